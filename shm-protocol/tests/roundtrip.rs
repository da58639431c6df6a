//! What the writer publishes is what readers get: static data, frames, bodies, commands.

mod common;
use common::*;
use shm_protocol::*;
use std::time::Duration;

#[test]
fn static_and_frames_round_trip_and_generation_advances() {
    let name = TestName::new("rt");
    let mut caps = Capacities::for_particles(10);
    caps.max_bodies = 1;
    caps.max_triangles = 2;
    caps.fields |= FieldKind::ContactCount.bit();
    let mut p = Publisher::create(&name.0, caps, CreateOptions::default()).unwrap();
    let c = Consumer::attach(&name.0).unwrap();
    assert_eq!(c.read_static(), Err(ReadError::NoStatic));
    assert_eq!(c.read_newest().unwrap(), None);
    let st = StaticData {
        config_toml: "[case]\nname = \"x\"\n".into(),
        species: vec![SpeciesRecord {
            name: static_data::encode_name("glass"),
            radius: 0.5,
            ..Default::default()
        }],
        particle_ids: (0..10).collect(),
        particle_species: vec![0; 10],
        particle_radius: (0..10).map(|i| i as f32).collect(),
        meshes: vec![MeshStatic {
            name: "blade".into(),
            triangles: vec![[1.0; 9], [2.0; 9]],
        }],
        world_min: [-1.0; 3],
        world_max: [1.0; 3],
        cell_size: 0.1,
        generation: 0,
    };
    let g1 = p.write_static(&st).unwrap();
    let got = c.read_static().unwrap();
    assert_eq!(got.generation, g1);
    assert_eq!(
        StaticData {
            generation: 0,
            ..got.clone()
        },
        st
    );
    assert_eq!(static_data::decode_name(&got.species[0].name), "glass");
    let g2 = p.write_static(&st).unwrap();
    assert!(g2 > g1 && g2.is_multiple_of(2));

    let pos: Vec<[f32; 3]> = (0..10).map(|i| [i as f32, 2.0, 3.0]).collect();
    let mut w = p.begin_frame(10).unwrap();
    w.step = 42;
    w.sim_time = 0.5;
    w.dt = 1e-5;
    w.write_vec3(FieldKind::Position, &pos).unwrap();
    w.contact_counts_mut().unwrap().copy_from_slice(&[1; 10]);
    let body = BodyTransform {
        translation: [0.0, 0.0, 1.5],
        ..BodyTransform::IDENTITY
    };
    w.set_bodies(&[body]).unwrap();
    assert!(matches!(
        w.vec3_mut(FieldKind::Force),
        Err(PublishError::FieldNotReserved(_))
    ));
    let meta = w.commit();
    assert_eq!(meta.seq, 1);
    let f = c.read_newest().unwrap().unwrap();
    assert_eq!(
        (f.meta.step, f.meta.sim_time, f.meta.static_generation),
        (42, 0.5, g2)
    );
    assert_eq!(f.positions.as_deref(), Some(&pos[..]));
    assert_eq!(f.velocities, None);
    assert_eq!(f.contact_counts, Some(vec![1; 10]));
    assert_eq!(f.bodies, vec![body]);
    // Slots rotate; the newest is always what readers get.
    for k in 2..=7u64 {
        let mut w = p.begin_frame(3).unwrap();
        w.step = k;
        w.commit();
        assert_eq!(c.read_newest().unwrap().unwrap().meta.step, k);
        assert_eq!(
            c.read_newest().unwrap().unwrap().meta.slot as u64,
            (k - 1) % 3
        );
    }
    assert!(matches!(
        p.begin_frame(11),
        Err(PublishError::OverCapacity { .. })
    ));
    assert_eq!(
        c.wait_newer(6, Duration::from_millis(10)),
        WaitOutcome::Newer(7)
    );
    assert_eq!(
        c.wait_newer(7, Duration::from_millis(30)),
        WaitOutcome::TimedOut
    );
}

#[test]
fn commands_from_many_clients_are_applied_in_order_and_acknowledged() {
    let name = TestName::new("cmds");
    let p = Publisher::create(
        &name.0,
        Capacities::for_particles(4),
        CreateOptions::default(),
    )
    .unwrap();
    p.set_state(SolverState::Running);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let n = name.0.clone();
    let clients: Vec<_> = (0..4)
        .map(|k| {
            let n = n.clone();
            std::thread::spawn(move || {
                let mut c = Consumer::attach(&n).unwrap();
                (0..50)
                    .map(|i| {
                        let cmd = Command::SetRefresh {
                            sim_seconds: Some((k * 1000 + i + 1) as f64),
                            wall_ms: None,
                        };
                        c.send(&cmd, Duration::from_secs(10)).unwrap()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let s = stop.clone();
    let solver = std::thread::spawn(move || {
        let mut applied = Vec::new();
        while !s.load(std::sync::atomic::Ordering::Relaxed) {
            for c in p.poll_commands() {
                let Ok(Command::SetRefresh {
                    sim_seconds: Some(v),
                    ..
                }) = c.command
                else {
                    panic!("{c:?}")
                };
                applied.push(v);
                p.acknowledge(&c, &CommandOutcome::Done(format!("refresh {v}")));
            }
            p.wait_for_command(Duration::from_millis(5));
        }
        applied
    });
    for (k, h) in clients.into_iter().enumerate() {
        let acks = h.join().unwrap();
        for (i, a) in acks.iter().enumerate() {
            assert_eq!(
                a,
                &CommandOutcome::Done(format!("refresh {}", k * 1000 + i + 1))
            );
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let applied = solver.join().unwrap();
    assert_eq!(applied.len(), 200);
    // Per client, submission order is preserved.
    for k in 0..4 {
        let mine: Vec<f64> = applied
            .iter()
            .copied()
            .filter(|v| (*v as usize - 1) / 1000 == k)
            .collect();
        assert!(mine.windows(2).all(|w| w[0] < w[1]), "client {k}: {mine:?}");
    }
}

#[test]
fn a_command_to_a_dead_or_silent_solver_fails_clearly() {
    let name = TestName::new("silent");
    let _p = Publisher::create(
        &name.0,
        Capacities::for_particles(4),
        CreateOptions::default(),
    )
    .unwrap();
    let mut c = Consumer::attach(&name.0).unwrap();
    let e = c
        .send(&Command::Pause, Duration::from_millis(100))
        .unwrap_err();
    assert!(matches!(e, CommandError::AckTimeout { .. }), "{e}");
}

/// A frame may stay open across steps (a GPU copy in flight) while the writer answers
/// commands; a second frame cannot start meanwhile, and an abandoned frame is never seen.
#[test]
fn an_open_frame_blocks_a_second_one_but_not_commands() {
    let name = TestName::new("open");
    let p = Publisher::create(
        &name.0,
        Capacities::for_particles(4),
        CreateOptions::default(),
    )
    .unwrap();
    let mut c = Consumer::attach(&name.0).unwrap();
    let mut w = p.begin_frame(4).unwrap();
    w.write_vec3(FieldKind::Position, &[[1.0; 3]; 4]).unwrap();
    assert_eq!(p.begin_frame(4).err(), Some(PublishError::FrameInProgress));
    let ticket = c.submit(&Command::Pause, Duration::from_secs(5)).unwrap();
    let cmds = p.poll_commands();
    assert_eq!(cmds.len(), 1);
    p.acknowledge(&cmds[0], &CommandOutcome::Done("paused".into()));
    assert!(c
        .wait_ack(&ticket, Duration::from_secs(2))
        .unwrap()
        .is_done());
    assert_eq!(c.read_newest().unwrap(), None, "open frame not visible");
    let meta = w.commit();
    assert_eq!(c.read_newest().unwrap().unwrap().meta.seq, meta.seq);

    let w = p.begin_frame(4).unwrap();
    drop(w);
    assert_eq!(
        c.read_newest().unwrap().unwrap().meta.seq,
        meta.seq,
        "abandoned frame unseen"
    );
    let mut w = p.begin_frame(4).unwrap();
    w.write_vec3(FieldKind::Position, &[[2.0; 3]; 4]).unwrap();
    let next = w.commit();
    assert_eq!(next.seq, meta.seq + 1);
    let f = c.read_newest().unwrap().unwrap();
    // A reused buffer (holding an older, larger-field frame) ends up equal to a fresh copy.
    let mut buf = Frame {
        velocities: Some(vec![[9.0; 3]; 7]),
        ..Frame::default()
    };
    assert!(c.read_newest_into(&mut buf).unwrap());
    assert_eq!(buf, f);
    assert_eq!(f.positions.unwrap()[3], [2.0; 3]);
}

#[test]
fn a_field_selection_copies_only_those_fields() {
    let name = TestName::new("fields");
    let p = Publisher::create(
        &name.0,
        Capacities::for_particles(3),
        CreateOptions::default(),
    )
    .unwrap();
    let c = Consumer::attach(&name.0).unwrap();
    let mut w = p.begin_frame(3).unwrap();
    w.write_vec3(FieldKind::Position, &[[1.0, 2.0, 3.0]; 3])
        .unwrap();
    w.write_vec3(FieldKind::Velocity, &[[4.0, 5.0, 6.0]; 3])
        .unwrap();
    w.write_vec3(FieldKind::AngularVelocity, &[[7.0; 3]; 3])
        .unwrap();
    w.commit();
    let full = c.read_newest().unwrap().unwrap();
    // A buffer holding every field from an earlier read keeps none it did not ask for.
    let mut buf = full.clone();
    let fields = FieldKind::Velocity.bit() | FieldKind::Force.bit();
    assert!(c.read_newest_fields_into(&mut buf, fields).unwrap());
    assert_eq!(buf.meta, full.meta);
    assert_eq!(buf.velocities, full.velocities);
    assert_eq!(buf.positions, None);
    assert_eq!(buf.angular_velocities, None);
    assert_eq!(buf.forces, None, "asked for but not published");
    assert!(c.read_newest_fields_into(&mut buf, u32::MAX).unwrap());
    assert_eq!(buf, full);
}
