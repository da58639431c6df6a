//! Frames received through the forwarder equal the segment's; commands round-trip.

use std::path::Path;
use std::time::{Duration, Instant};

use forwarder::testing::{
    position, unique_name, velocity, FakeSolver, ForwarderProcess, SolverOptions,
};
use forwarder::{ConnectOptions, PositionEncoding, RemoteSource, Subscription};
use shm_protocol::{
    Command, CommandOutcome, FieldKind, Frame, FrameSource, SolverState, WaitOutcome,
};

const T: Duration = Duration::from_secs(10);

fn forwarder(name: &str) -> ForwarderProcess {
    ForwarderProcess::start(Path::new(env!("CARGO_BIN_EXE_forwarder")), name, &[])
}

/// Waits for a frame newer than `seq` and returns it.
fn next_frame(src: &mut RemoteSource, seq: u64) -> Frame {
    match src.wait_newer(seq, T).expect("wait") {
        WaitOutcome::Newer(_) => {}
        other => panic!("no newer frame than {seq}: {other:?}"),
    }
    let f = src.read_newest().expect("read").expect("a frame");
    assert!(f.meta.seq > seq);
    f
}

/// Changes the subscription and returns the first newer frame that shows it (`applied`).
fn resubscribe(
    src: &mut RemoteSource,
    seq: &mut u64,
    sub: Subscription,
    applied: impl Fn(&Frame) -> bool,
) -> Frame {
    src.subscribe(sub).expect("subscribe");
    let deadline = Instant::now() + T;
    loop {
        let f = next_frame(src, *seq);
        *seq = f.meta.seq;
        if applied(&f) {
            return f;
        }
        assert!(Instant::now() < deadline, "subscription change not applied");
    }
}

fn same_bits(a: &[[f32; 3]], b: &[[f32; 3]]) -> bool {
    bytemuck::cast_slice::<[f32; 3], u8>(a) == bytemuck::cast_slice::<[f32; 3], u8>(b)
}

#[test]
fn frames_equal_the_segment_and_commands_round_trip() {
    let name = unique_name("rt");
    let n = 1000;
    let solver = FakeSolver::start(
        &name,
        SolverOptions {
            particles: n,
            ..Default::default()
        },
    );
    let fw = forwarder(&name);
    let sub = Subscription {
        fields: FieldKind::Position.bit() | FieldKind::Velocity.bit(),
        ..Subscription::default()
    };
    let mut src = RemoteSource::connect_with(
        &fw.addr,
        ConnectOptions {
            subscription: sub,
            client_name: "roundtrip".into(),
            ..Default::default()
        },
    )
    .expect("connect");
    assert!(src.describe().contains(&name));

    let statics = src.read_static().expect("static");
    assert_eq!(statics.particle_ids, (0..n as u32).collect::<Vec<_>>());
    assert_eq!(statics.world_max, [1.0; 3]);
    assert!(statics.config_toml.contains("forwarder-test"));

    // Same sequence numbers and the same bytes as the publisher wrote for them.
    let mut seq = 0;
    for _ in 0..10 {
        let f = next_frame(&mut src, seq);
        let want_pos: Vec<_> = (0..n).map(|i| position(f.meta.seq, i)).collect();
        let want_vel: Vec<_> = (0..n).map(|i| velocity(f.meta.seq, i)).collect();
        assert!(
            same_bits(f.positions.as_deref().expect("positions"), &want_pos),
            "seq {}",
            f.meta.seq
        );
        assert!(same_bits(
            f.velocities.as_deref().expect("velocities"),
            &want_vel
        ));
        assert!(f.angular_velocities.is_none());
        assert_eq!(f.meta.particle_count, n as u64);
        assert_eq!(f.meta.step, 10 * f.meta.seq);
        seq = f.meta.seq;
    }
    assert!(solver.published.load(std::sync::atomic::Ordering::Acquire) >= seq);

    // Commands go to the solver and come back acknowledged.
    assert_eq!(
        src.send(&Command::Pause, T).expect("pause"),
        CommandOutcome::Done("paused".into())
    );
    let deadline = Instant::now() + T;
    while src.status().expect("status").state != Some(SolverState::Paused) {
        assert!(Instant::now() < deadline, "state never became paused");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(solver.is_paused());
    assert_eq!(
        src.send(&Command::Resume, T).expect("resume"),
        CommandOutcome::Done("running".into())
    );
    assert!(matches!(
        src.send(&Command::Checkpoint, T).expect("checkpoint"),
        CommandOutcome::Rejected(_)
    ));
    let got = solver.commands.lock().unwrap().clone();
    assert_eq!(
        got,
        vec![Command::Pause, Command::Resume, Command::Checkpoint]
    );

    // Fields and encoding chosen by the client: quantised positions, no velocities.
    let f = resubscribe(
        &mut src,
        &mut seq,
        Subscription {
            fields: FieldKind::Position.bit(),
            positions: PositionEncoding::Quantized16,
            ..Subscription::default()
        },
        |f| f.velocities.is_none(),
    );
    let step = 1.0 / 65535.0;
    for (i, p) in f
        .positions
        .as_deref()
        .expect("positions")
        .iter()
        .enumerate()
    {
        let want = position(f.meta.seq, i);
        for a in 0..3 {
            assert!(
                (p[a] - want[a]).abs() <= step * 0.51 + 1e-7,
                "particle {i}: {p:?} vs {want:?}"
            );
        }
    }

    // At most 300 of the 1000 particles: every fourth, exact, named by its id.
    let f = resubscribe(
        &mut src,
        &mut seq,
        Subscription {
            fields: FieldKind::Position.bit() | FieldKind::Velocity.bit(),
            max_particles: 300,
            ..Subscription::default()
        },
        |f| f.meta.particle_count < n as u64,
    );
    assert_eq!(f.meta.particle_count, 250);
    assert_eq!(
        f.sample,
        Some(shm_protocol::FrameSample {
            stride: 4,
            of: n as u64
        })
    );
    let ids: Vec<u32> = (0..250).map(|i| 4 * i).collect();
    assert_eq!(f.particle_ids.as_deref(), Some(&ids[..]));
    let want_pos: Vec<_> = (0..n).step_by(4).map(|i| position(f.meta.seq, i)).collect();
    let want_vel: Vec<_> = (0..n).step_by(4).map(|i| velocity(f.meta.seq, i)).collect();
    assert!(same_bits(
        f.positions.as_deref().expect("positions"),
        &want_pos
    ));
    assert!(same_bits(
        f.velocities.as_deref().expect("velocities"),
        &want_vel
    ));
    // Species and radii by id, as for a run whose particle set changes.
    let radii =
        shm_protocol::StaticData::per_element(&statics.particle_radius, f.particle_ids.as_deref())
            .expect("ids within the static arrays");
    assert_eq!(radii.len(), 250);
    drop(src);
    solver.stop();
}

/// A client that asks for at most 5 frames/s gets about that many while the solver publishes
/// at 200 frames/s (newest frame wins; the forwarder skips the rest).
#[test]
fn max_rate_limits_the_frames_a_client_receives() {
    let name = unique_name("rate");
    let solver = FakeSolver::start(&name, SolverOptions::default());
    let fw = forwarder(&name);
    let mut src = RemoteSource::connect_with(
        &fw.addr,
        ConnectOptions {
            subscription: Subscription {
                max_rate_hz: 5.0,
                ..Subscription::default()
            },
            client_name: "rate".into(),
            ..Default::default()
        },
    )
    .expect("connect");
    let mut seq = next_frame(&mut src, 0).meta.seq;
    let (start, published0) = (
        Instant::now(),
        solver.published.load(std::sync::atomic::Ordering::Relaxed),
    );
    let mut received = 0u32;
    while start.elapsed() < Duration::from_secs(3) {
        if let WaitOutcome::Newer(_) = src
            .wait_newer(seq, Duration::from_millis(500))
            .expect("wait")
        {
            let f = src.read_newest().expect("read").expect("frame");
            seq = f.meta.seq;
            received += 1;
        }
    }
    let published = solver.published.load(std::sync::atomic::Ordering::Relaxed) - published0;
    assert!(published > 100, "the solver kept publishing: {published}");
    assert!(
        (10..=18).contains(&received),
        "5 frames/s for 3 s: got {received} of {published} published"
    );
    solver.stop();
}
