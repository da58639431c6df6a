//! Time per frame of each metric (and of copying the frame out of the segment) on a synthetic
//! dense packing: `cargo run --release -p analysis --example bench_metrics -- [PARTICLES] [REPEATS]`.
//!
//! Particles sit on a jittered simple cubic lattice (spacing 1.96 r: about 6 contacts each), two
//! species at random, random velocities and spins; one mesh-free segment is published with the
//! real `Publisher` and read back with `Consumer::read_newest_into` (a reused buffer) as
//! `analysis` does; the first read (fresh allocation) is reported apart.

use std::time::{Duration, Instant};

use analysis::metrics::{compute_with, Metric, Scratch, Settings};
use analysis::StaticContext;
use shm_protocol::static_data::encode_name;
use shm_protocol::*;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 24) as f32
    }
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).map_or(Ok(1_000_000), |s| s.parse())?;
    let repeats: usize = args.get(2).map_or(Ok(5), |s| s.parse())?;
    let r = 0.001f32;
    let side = (n as f64).cbrt().ceil() as usize;
    let spacing = 1.96 * r;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let positions: Vec<[f32; 3]> = (0..n)
        .map(|i| {
            let (x, y, z) = (i % side, (i / side) % side, i / (side * side));
            [x, y, z].map(|k| k as f32 * spacing + (rng.next() - 0.5) * 0.02 * r)
        })
        .collect();
    let velocities: Vec<[f32; 3]> = (0..n)
        .map(|_| [rng.next(), rng.next(), rng.next()])
        .collect();
    let angular: Vec<[f32; 3]> = (0..n).map(|_| [rng.next(), 0.0, 0.0]).collect();
    let species: Vec<u32> = (0..n).map(|_| (rng.next() < 0.5) as u32).collect();
    let extent = side as f64 * spacing as f64;
    let sp = |name: &str, density: f64| SpeciesRecord {
        name: encode_name(name),
        radius: r as f64,
        density,
        ..Default::default()
    };
    let data = StaticData {
        config_toml: "gravity = [0.0, 0.0, -9.81]\n".into(),
        species: vec![sp("a", 2500.0), sp("b", 7800.0)],
        particle_ids: (0..n as u32).collect(),
        particle_species: species,
        particle_radius: vec![r; n],
        world_min: [0.0; 3],
        world_max: [extent; 3],
        ..Default::default()
    };

    let name = format!("pshm-an-bench-{}", std::process::id());
    let mut p = Publisher::create(
        &name,
        Capacities::for_particles(n as u64),
        CreateOptions::default(),
    )?;
    p.write_static(&data)?;
    let mut w = p.begin_frame(n as u64)?;
    w.write_vec3(FieldKind::Position, &positions)?;
    w.write_vec3(FieldKind::Velocity, &velocities)?;
    w.write_vec3(FieldKind::AngularVelocity, &angular)?;
    w.commit();
    let c = Consumer::attach(&name)?;
    let ctx = StaticContext::new(c.read_static()?)?;

    let threads = rayon::current_num_threads();
    println!("{n} particles, {threads} rayon threads, median of {repeats} frames [ms]:");
    let mut copy = Vec::new();
    let mut per: Vec<(Metric, Vec<Duration>)> =
        Metric::ALL.iter().map(|&m| (m, Vec::new())).collect();
    let settings = Settings::default();
    let mut last = None;
    let mut frame = Frame::default();
    let mut scratch = Scratch::default();
    let t = Instant::now();
    anyhow::ensure!(c.read_newest_into(&mut frame)?, "no frame");
    let first_copy = t.elapsed();
    for _ in 0..repeats {
        let t = Instant::now();
        anyhow::ensure!(c.read_newest_into(&mut frame)?, "no frame");
        copy.push(t.elapsed());
        let (m, timings) = compute_with(&frame, &ctx, &settings, &mut scratch)?;
        for (k, d) in timings {
            if let Some(e) = per.iter_mut().find(|(m, _)| *m == k) {
                e.1.push(d);
            }
        }
        last = Some(m);
    }
    let median = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2].as_secs_f64() * 1e3
    };
    println!(
        "  {:<22} {:>8.2}",
        "first copy (allocates)",
        first_copy.as_secs_f64() * 1e3
    );
    println!(
        "  {:<22} {:>8.2}",
        "copy (reused buffer)",
        median(&mut copy)
    );
    let mut total = 0.0;
    for (m, v) in &mut per {
        let t = median(v);
        total += t;
        println!("  {:<22} {:>8.2}", m.name(), t);
    }
    println!("  {:<22} {:>8.2}", "all metrics", total);
    if let Some(m) = last {
        println!(
            "  (Z = {:?}, phi = {:?}, Lacey = {:?})",
            m.coordination_number, m.solid_fraction, m.lacey_index
        );
    }
    drop(c);
    p.close(SolverState::Finished, false)?;
    Ok(())
}
