//! `dem-cpu-bench`: particle-steps per second of the CPU reference backend on the XPS falling
//! box, in the loose phase (particles falling, few contacts) and the settled phase (a dense pack
//! with every particle in contact), for each thread count and sub-domain count asked. Prints a
//! table (with the time of each stage) and writes JSON.
//!
//! ```text
//! dem-cpu-bench --particles 100000 --threads 1,2 --subdomains 1,2 --out bench/results/dem_cpu.json
//! ```

use std::time::Instant;

use anyhow::{Context, Result};
use clap::Parser;
use solver::bench_cases::{self, BenchModel};
use solver::decomp::{Axis, Decomposition};
use solver::exec::sim::{FrameInput, Simulation};
use solver::Stage;

#[derive(Parser, Debug)]
#[command(about = "CPU backend throughput on the falling box, loose and settled phases")]
struct Args {
    /// Particles (the dense pack rounds to 4 m^3).
    #[arg(long, default_value_t = 100_000)]
    particles: usize,
    /// Thread counts to measure, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    threads: Vec<usize>,
    /// Sub-domain counts to measure, comma separated (CPU workers exchanging ghosts and
    /// migrants; results are bit-identical for every count).
    #[arg(long, value_delimiter = ',', default_value = "1")]
    subdomains: Vec<u32>,
    /// Axis the sub-domains are cut along [default: the longest axis of the domain].
    #[arg(long, value_enum)]
    split_axis: Option<Axis>,
    /// Force law: linear, linear-friction (the default case's) or hertz.
    #[arg(long, default_value = "linear-friction")]
    model: BenchModel,
    /// Timed steps per measurement.
    #[arg(long, default_value_t = 100)]
    steps: u64,
    /// Steps run before timing the settled phase (the pack relaxes its initial overlaps).
    #[arg(long, default_value_t = 200)]
    relax: u64,
    /// JSON output file.
    #[arg(long)]
    out: Option<std::path::PathBuf>,
}

struct Record {
    threads: usize,
    subdomains: u32,
    phase: &'static str,
    particles: usize,
    steps_per_s: f64,
    contacts_per_particle: f64,
    stages: String,
    /// Forces-stage time of each sub-domain [ms per step] (the load balance).
    worker_forces_ms: Vec<f64>,
}

/// Times `steps` steps of `sim` and describes the measurement.
fn timed(sim: &mut Simulation, steps: u64, threads: usize, phase: &'static str) -> Result<Record> {
    let subdomains = sim.decomposition().subdomains;
    sim.reset_timers();
    let t0 = Instant::now();
    sim.step_n(steps)?;
    let steps_per_s = steps as f64 / t0.elapsed().as_secs_f64();
    let particles = sim.num_particles();
    Ok(Record {
        threads,
        subdomains,
        phase,
        particles,
        steps_per_s,
        contacts_per_particle: sim.stats()?.contacts as f64 / particles as f64,
        stages: sim.timers().to_string(),
        worker_forces_ms: sim
            .coordinator()
            .worker_timers()
            .iter()
            .map(|t| t.get(Stage::Forces).as_secs_f64() * 1e3 / steps as f64)
            .collect(),
    })
}

fn measure(a: &Args, threads: usize, subdomains: u32) -> Result<Vec<Record>> {
    let d = Decomposition {
        subdomains,
        split_axis: a.split_axis,
        ..Default::default()
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .context("thread pool")?;
    pool.install(|| {
        let mut out = Vec::new();
        eprintln!(
            "[{threads} threads, {subdomains} sub-domains] loose: falling box, {} particles",
            a.particles
        );
        let mut case = bench_cases::falling_box(a.particles, a.model);
        case.decomposition = d;
        let mut sim = Simulation::new(case)?;
        sim.step_n(5)?;
        out.push(timed(&mut sim, a.steps, threads, "loose")?);

        let mut pack = bench_cases::dense_pack(a.particles, a.model);
        pack.case.decomposition = d;
        let n = pack.positions.len();
        eprintln!(
            "[{threads} threads, {subdomains} sub-domains] settled: dense pack, {n} particles, solid fraction {:.3}, relaxing {} steps",
            pack.solid_fraction, a.relax
        );
        let f32s = |v: &[[f64; 3]]| v.iter().map(|p| p.map(|c| c as f32)).collect();
        let frame = FrameInput {
            step: 0,
            time: 0.0,
            species: vec![0; n],
            positions: f32s(&pack.positions),
            velocities: vec![[0.0; 3]; n],
            angular_velocities: vec![[0.0; 3]; n],
        };
        let mut sim = Simulation::from_frame(pack.case, &frame)?;
        sim.step_n(a.relax)?;
        out.push(timed(&mut sim, a.steps, threads, "settled")?);
        Ok(out)
    })
}

fn main() -> Result<()> {
    let a = Args::parse();
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let mut records = Vec::new();
    for &s in &a.subdomains {
        for &t in &a.threads {
            records.extend(measure(&a, t, s)?);
        }
    }
    println!(
        "{:>7} {:>10} {:>8} {:>10} {:>10} {:>14} {:>9}",
        "threads", "subdomains", "phase", "particles", "steps/s", "part-steps/s", "contacts"
    );
    for r in &records {
        println!(
            "{:>7} {:>10} {:>8} {:>10} {:>10.2} {:>14.3e} {:>9.2}   {}",
            r.threads,
            r.subdomains,
            r.phase,
            r.particles,
            r.steps_per_s,
            r.steps_per_s * r.particles as f64,
            r.contacts_per_particle,
            r.stages
        );
    }
    if let Some(path) = &a.out {
        let json = serde_json::json!({
            "bench": "dem_cpu",
            "command": command,
            "machine_cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            "model": a.model.name(),
            "steps": a.steps,
            "relax_steps": a.relax,
            "results": records.iter().map(|r| serde_json::json!({
                "threads": r.threads,
                "subdomains": r.subdomains,
                "phase": r.phase,
                "particles": r.particles,
                "steps_per_s": r.steps_per_s,
                "particle_steps_per_s": r.steps_per_s * r.particles as f64,
                "contacts_per_particle": r.contacts_per_particle,
                "stages": r.stages,
                "worker_forces_ms_per_step": r.worker_forces_ms,
            })).collect::<Vec<_>>(),
        });
        std::fs::write(path, serde_json::to_string_pretty(&json)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}
