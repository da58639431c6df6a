//! Time per frame of each metric (and of copying the frame out of the segment) on a synthetic
//! dense packing: `cargo run --release -p analysis --example bench_metrics -- [PARTICLES] [REPEATS]
//! [lattice|shuffled] [OUT.json]`.
//!
//! Particles sit on a jittered simple cubic lattice (spacing 1.96 r: about 6 contacts each), two
//! species at random, random velocities and spins, in lattice order or shuffled (as after a
//! long mixing run: neighbours far apart in memory); one mesh-free segment is published with the
//! real `Publisher` and read back with `Consumer::read_newest_into` (a reused buffer) as
//! `analysis` does; the first read (fresh allocation) is reported apart.

use std::time::{Duration, Instant};

use analysis::metrics::{compute_with, contacts, Scratch, Settings};
use analysis::StaticContext;
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
    let shuffled = match args.get(3).map(String::as_str) {
        None | Some("lattice") => false,
        Some("shuffled") => true,
        Some(other) => anyhow::bail!("order must be `lattice` or `shuffled`, got {other:?}"),
    };
    let r = 0.001f32;
    let side = (n as f64).cbrt().ceil() as usize;
    let spacing = 1.96 * r;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut positions: Vec<[f32; 3]> = (0..n)
        .map(|i| {
            let (x, y, z) = (i % side, (i / side) % side, i / (side * side));
            [x, y, z].map(|k| k as f32 * spacing + (rng.next() - 0.5) * 0.02 * r)
        })
        .collect();
    if shuffled {
        // Frame order unrelated to space, as after a long mixing run (Fisher-Yates).
        for i in (1..n).rev() {
            let j = ((rng.next() as f64) * (i + 1) as f64) as usize;
            positions.swap(i, j.min(i));
        }
    }
    let velocities: Vec<[f32; 3]> = (0..n)
        .map(|_| [rng.next(), rng.next(), rng.next()])
        .collect();
    let angular: Vec<[f32; 3]> = (0..n).map(|_| [rng.next(), 0.0, 0.0]).collect();
    let species: Vec<u32> = (0..n).map(|_| (rng.next() < 0.5) as u32).collect();
    let extent = side as f64 * spacing as f64;
    let sp = |name: &str, density: f64| SpeciesRecord::named(name, r as f64, density);
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
    let order = if shuffled { "shuffled" } else { "lattice" };
    println!(
        "{n} particles ({order} order), {threads} rayon threads, median of {repeats} frames [ms]:"
    );
    let mut copy = Vec::new();
    // Stages of `compute_with` in the order they ran: the one pass of the summed metrics, then
    // each grid metric.
    let mut per: Vec<(String, Vec<Duration>)> = Vec::new();
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
            match per.iter_mut().find(|(m, _)| *m == k) {
                Some(e) => e.1.push(d),
                None => per.push((k, vec![d])),
            }
        }
        last = Some(m);
    }
    let median = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2].as_secs_f64() * 1e3
    };
    // Whole frame (copy and every metric) per repeat: what has to fit in 100 ms for 10 frames/s.
    let mut frames: Vec<Duration> = (0..repeats)
        .map(|k| copy[k] + per.iter().map(|(_, v)| v[k]).sum::<Duration>())
        .collect();
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
    let mut record = serde_json::Map::new();
    let mut total = 0.0;
    for (m, v) in &mut per {
        let t = median(v);
        total += t;
        record.insert(m.clone(), serde_json::json!(t));
        println!("  {:<22} {:>8.2}", m.replace('+', " + "), t);
    }
    println!("  {:<22} {:>8.2}", "all metrics", total);
    let worst = frames
        .iter()
        .max()
        .copied()
        .unwrap_or_default()
        .as_secs_f64()
        * 1e3;
    let frame_ms = median(&mut frames);
    println!(
        "  {:<22} {:>8.2}   (worst {worst:.2}; {:.1} frames/s)",
        "frame: copy + metrics",
        frame_ms,
        1e3 / frame_ms
    );
    // Breakdown of the coordination number: its cell grid alone, built as it builds it.
    if let Some(positions) = frame.positions.as_deref() {
        let mut grid_times = Vec::new();
        let mut phases: Vec<[Duration; 5]> = Vec::new();
        let mut buffers = analysis::grid::GridBuffers::default();
        for _ in 0..repeats {
            let t = Instant::now();
            let grid = contacts::contact_grid(positions, &ctx.radii, ctx.max_radius, buffers);
            grid_times.push(t.elapsed());
            buffers = grid.map(|g| g.into_buffers()).unwrap_or_default();
            phases.push(buffers.phase_times());
        }
        let grid_ms = median(&mut grid_times);
        record.insert("coordination_cell_grid".into(), serde_json::json!(grid_ms));
        println!("  {:<22} {:>8.2}", "(of which cell grid)", grid_ms);
        let names = [
            "bounding box",
            "pass 1 (count)",
            "offsets",
            "pass 2 (partition)",
            "pass 3 (sort)",
        ];
        for (k, name) in names.iter().enumerate() {
            let mut v: Vec<Duration> = phases.iter().map(|p| p[k]).collect();
            println!("    {:<20} {:>8.2}", name, median(&mut v));
        }
    }
    if let Some(path) = args.get(4) {
        let json = serde_json::json!({
            "bench": "analysis metrics per frame",
            "command": args.join(" "),
            "particles": n,
            "order": order,
            "rayon_threads": threads,
            "repeats": repeats,
            "median_ms": record,
            "copy_ms": median(&mut copy),
            "all_metrics_ms": total,
            "frame_median_ms": frame_ms,
            "frame_worst_ms": worst,
            "frames_per_s": 1e3 / frame_ms,
        });
        std::fs::write(path, serde_json::to_string_pretty(&json)? + "\n")?;
    }
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
