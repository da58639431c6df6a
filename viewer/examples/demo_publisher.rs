//! Publishes a synthetic particle bed (no physics) for trying the viewer without a solver:
//! a settled bed of two species with a slowly sinking top layer and a rotating paddle mesh.
//!
//! `cargo run --release -p viewer --example demo_publisher -- NAME [PARTICLES] [SECONDS] [INTERVAL_MS]`

use std::time::{Duration, Instant};

use shm_protocol::{
    BodyTransform, Capacities, CreateOptions, FieldKind, MeshStatic, Publisher, SolverState,
    SpeciesRecord, StaticData,
};

/// A box paddle (12 triangles) of half extents `h`, in its body frame.
fn paddle(h: [f32; 3]) -> MeshStatic {
    let c = |i: usize| {
        [
            if i & 1 == 0 { -h[0] } else { h[0] },
            if i & 2 == 0 { -h[1] } else { h[1] },
            if i & 4 == 0 { -h[2] } else { h[2] },
        ]
    };
    let faces = [
        [0, 1, 3, 2],
        [4, 6, 7, 5],
        [0, 4, 5, 1],
        [2, 3, 7, 6],
        [0, 2, 6, 4],
        [1, 5, 7, 3],
    ];
    let mut triangles = Vec::new();
    for f in faces {
        for t in [[f[0], f[1], f[2]], [f[0], f[2], f[3]]] {
            let (a, b, d) = (c(t[0]), c(t[1]), c(t[2]));
            triangles.push([a[0], a[1], a[2], b[0], b[1], b[2], d[0], d[1], d[2]]);
        }
    }
    MeshStatic {
        name: "paddle".into(),
        triangles,
    }
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let name = args.first().cloned().unwrap_or_else(|| "demo".into());
    let n: usize = args.get(1).map_or(Ok(20_000), |s| s.parse())?;
    let seconds: f64 = args.get(2).map_or(Ok(60.0), |s| s.parse())?;
    let interval_ms: u64 = args.get(3).map_or(Ok(100), |s| s.parse())?;
    // A bed filling the lower 40% of a 1 x 0.5 x 1 m box on a cubic lattice.
    let (lx, ly) = (1.0f32, 0.5f32);
    let spacing = ((lx * ly * 0.4) / n as f32).cbrt();
    let r = 0.45 * spacing;
    let (nx, ny) = ((lx / spacing) as usize, (ly / spacing) as usize);
    let mut pos = Vec::with_capacity(n);
    for i in 0..n {
        let (ix, iy, iz) = (i % nx, (i / nx) % ny, i / (nx * ny));
        let jitter = ((i as f32 * 12.9898).sin() * 43758.547).fract() * 0.1 * spacing;
        pos.push([
            (ix as f32 + 0.5) * spacing + jitter,
            (iy as f32 + 0.5) * spacing,
            (iz as f32 + 0.5) * spacing,
        ]);
    }
    let mut caps = Capacities::for_particles(n as u64);
    caps.max_bodies = 1;
    caps.max_triangles = 12;
    let mut p = Publisher::create(&name, caps, CreateOptions::default())?;
    p.write_static(&StaticData {
        species: vec![
            SpeciesRecord::named("glass", r as f64, 2500.0),
            SpeciesRecord::named("steel", r as f64, 2500.0),
        ],
        particle_ids: (0..n as u32).collect(),
        particle_species: pos.iter().map(|q| u32::from(q[0] > 0.5)).collect(),
        particle_radius: vec![r; n],
        meshes: vec![paddle([0.2, 0.02, 0.08])],
        world_min: [0.0; 3],
        world_max: [lx as f64, ly as f64, 1.0],
        ..Default::default()
    })?;
    p.set_state(SolverState::Running);
    eprintln!("demo_publisher: segment {name}, {n} particles, radius {r:.4} m, {seconds} s");
    let start = Instant::now();
    let top = pos.iter().map(|q| q[2]).fold(0.0f32, f32::max);
    let mut step = 0u64;
    while start.elapsed().as_secs_f64() < seconds {
        step += 1;
        let t = start.elapsed().as_secs_f32();
        let angle = t * 0.8;
        let vel: Vec<[f32; 3]> = pos
            .iter()
            .map(|q| {
                let w = (q[2] / top).powi(4);
                [0.3 * w * (angle + q[0] * 6.0).sin(), 0.0, -0.5 * w]
            })
            .collect();
        let mut w = p.begin_frame(n as u64)?;
        w.step = step;
        w.sim_time = step as f64 * 1e-3;
        w.steps_per_s = 1000.0;
        w.write_vec3(FieldKind::Position, &pos)?;
        w.write_vec3(FieldKind::Velocity, &vel)?;
        let (s, c) = angle.sin_cos();
        w.set_bodies(&[BodyTransform {
            rotation: [c, -s, 0.0, s, c, 0.0, 0.0, 0.0, 1.0],
            translation: [0.5, 0.25, top + 0.15],
            ..BodyTransform::IDENTITY
        }])?;
        w.commit();
        p.heartbeat();
        for cmd in p.poll_commands() {
            let outcome =
                shm_protocol::CommandOutcome::Done(format!("demo ignores {:?}", cmd.command));
            p.acknowledge(&cmd, &outcome);
        }
        let next = Instant::now() + Duration::from_millis(interval_ms);
        while Instant::now() < next && start.elapsed().as_secs_f64() < seconds {
            p.heartbeat();
            for cmd in p.poll_commands() {
                let outcome =
                    shm_protocol::CommandOutcome::Done(format!("demo ignores {:?}", cmd.command));
                p.acknowledge(&cmd, &outcome);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    p.close(SolverState::Finished, false)?;
    Ok(())
}
