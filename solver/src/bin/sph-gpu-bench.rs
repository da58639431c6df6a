//! `sph-gpu-bench`: speed and memory of the SPH GPU backend on the 3D dam break of SPHERIC
//! Test 2 (the geometry of `solver/cases/dambreak.toml`, the spacing chosen for each particle
//! count), f32, Wendland C2, dynamic boundaries, Fourtakas delta-SPH, symplectic with the
//! variable CFL step: the model and phase a user of `solver --case dambreak.toml` gets.
//!
//! For each `--particles` entry: place the particles, upload, run `--warmup` steps (the NVRTC
//! compile and the first collapse), then time `--steps` steps (each ends with the 24-byte read
//! of the time-step limits, as in a run); then time packing and copying `--frames` frames to
//! host memory (the publication cost). Prints a line per size and appends one JSON record to
//! `--out` (JSON lines) with the exact command.
//!
//! With `--devices 0,1` each size runs on one GPU (the first listed) and then on all of them
//! once per `--balance` entry (the same warm-up and timed steps from the same start), and each
//! record adds the speedup over the one-GPU run, the imbalance (the largest GPU's compute time
//! over the mean) and the exchange's share of the wall time.
//!
//! `--first-cut work,count` runs each balancing from each first cut (default: work, the
//! solver's default), to show what the estimate of the work gains over equal particle counts.
//!
//! `--diffusion molteni|none` replaces the case's Fourtakas density diffusion, to show what it
//! costs. `--coefh C` replaces the case's smoothing length factor (h = C sqrt(3) dp; the shipped
//! case's 1.0 is h = 1.73 dp, DualSPHysics' usual 1.1547 is h = 2 dp), to compare with codes
//! that run the case with more neighbours. `--integrator verlet` replaces the symplectic scheme
//! (two evaluations of the rates per step) by Verlet (one, an Euler step every 40), as
//! DualSPHysics and TNL-SPH ran this case in the peer benchmark beside ours.
//!
//! `PARTICLE_SHM_SPH_CLASSIFY=rates` has the slabs' rates kernels classify the fluid for the
//! next exchange instead of sph_classify before it (off by default: on one H100 it gained 0.3 %
//! at 104 M, nothing beside the overlap; the record says which, and the command names the
//! variable). `PARTICLE_SHM_SPH_OVERLAP=off`
//! runs each exchange after the evaluation's every kernel instead of beside the boundary's rates
//! (the record's `overlap` and `overlapped_exchanges`).
//!
//! Usage: sph-gpu-bench [--particles 1e6,1e7,1e8] [--steps 200] [--warmup 20] [--frames 5]
//!                      [--device 0] [--devices 0,1] [--balance off,slice]
//!                      [--first-cut work] [--diffusion fourtakas] [--out FILE]

use std::io::Write;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use solver::decomp::Balance;
use solver::sph::cpu::{first_time_step, SphState};
use solver::sph::cuda::{SphCuda, SphCudaOptions, SphGpu, SphGroup, SphGroupOptions};
use solver::sph::setup::{BoundaryName, Diffusion, IntegratorName, SphCase, KIND_FLUID};
use solver::sph::slabs::{FirstCut, SlabOptions};

struct Args {
    particles: Vec<f64>,
    steps: u64,
    warmup: u64,
    frames: u32,
    device: usize,
    devices: Vec<usize>,
    balance: Vec<Balance>,
    first_cut: Vec<FirstCut>,
    balance_every: u64,
    balance_threshold: Option<f64>,
    diffusion: Diffusion,
    boundary: BoundaryName,
    coefh: Option<f64>,
    integrator: IntegratorName,
    out: Option<String>,
}

fn parse() -> Result<Args> {
    let mut a = Args {
        particles: vec![1e6, 1e7],
        steps: 200,
        warmup: 20,
        frames: 5,
        device: 0,
        devices: Vec::new(),
        balance: vec![Balance::Off, Balance::Slice],
        first_cut: vec![FirstCut::Work],
        balance_every: solver::decomp::balance::BALANCE_INTERVAL,
        balance_threshold: None,
        diffusion: Diffusion::Fourtakas,
        boundary: BoundaryName::Dbc,
        coefh: None,
        integrator: IntegratorName::Symplectic,
        out: None,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < argv.len() {
        let k = argv[i].as_str();
        if k == "--help" || k == "-h" {
            println!("{}", USAGE);
            std::process::exit(0);
        }
        let v = argv
            .get(i + 1)
            .with_context(|| format!("{k} needs a value"))?;
        match k {
            "--particles" => {
                a.particles = v
                    .split(',')
                    .map(|x| {
                        x.parse::<f64>()
                            .with_context(|| format!("--particles: {x}"))
                    })
                    .collect::<Result<_>>()?;
                if a.particles.iter().any(|n| !(1e3..=1e9).contains(n)) {
                    bail!("--particles: each count between 1e3 and 1e9");
                }
            }
            "--steps" => a.steps = v.parse().context("--steps")?,
            "--warmup" => a.warmup = v.parse().context("--warmup")?,
            "--frames" => a.frames = v.parse().context("--frames")?,
            "--device" => a.device = v.parse().context("--device")?,
            "--devices" => {
                a.devices = v
                    .split(',')
                    .map(|x| {
                        x.parse::<usize>()
                            .with_context(|| format!("--devices: {x}"))
                    })
                    .collect::<Result<_>>()?;
                if a.devices.len() < 2 {
                    bail!("--devices: list two GPUs or more (one GPU: --device)");
                }
            }
            "--balance" => {
                a.balance = v
                    .split(',')
                    .map(|x| {
                        <Balance as clap::ValueEnum>::from_str(x, true).map_err(|_| {
                            anyhow::anyhow!(
                                "--balance: off, count, time, neighbour or slice, not {x}"
                            )
                        })
                    })
                    .collect::<Result<_>>()?;
            }
            "--first-cut" => {
                a.first_cut = v
                    .split(',')
                    .map(|x| {
                        <FirstCut as clap::ValueEnum>::from_str(x, true)
                            .map_err(|_| anyhow::anyhow!("--first-cut: work or count, not {x}"))
                    })
                    .collect::<Result<_>>()?;
            }
            "--balance-every" => {
                a.balance_every = v.parse().context("--balance-every")?;
                if a.balance_every == 0 {
                    bail!("--balance-every must be at least 1");
                }
            }
            "--balance-threshold" => {
                let t: f64 = v.parse().context("--balance-threshold")?;
                if !(t > 0.0 && t <= 100.0) {
                    bail!("--balance-threshold: a positive share, at most 100; got {t}");
                }
                a.balance_threshold = Some(t);
            }
            "--diffusion" => {
                a.diffusion = match v.as_str() {
                    "fourtakas" => Diffusion::Fourtakas,
                    "molteni" => Diffusion::Molteni,
                    "none" => Diffusion::None,
                    _ => bail!("--diffusion: fourtakas, molteni or none, not {v}"),
                }
            }
            "--boundary" => {
                a.boundary = match v.as_str() {
                    "dbc" => BoundaryName::Dbc,
                    "mdbc" => BoundaryName::Mdbc,
                    _ => bail!("--boundary: dbc or mdbc, not {v}"),
                }
            }
            "--coefh" => {
                let c: f64 = v.parse().context("--coefh")?;
                if !(0.5..=3.0).contains(&c) {
                    bail!("--coefh: h = coefh sqrt(3) dp with coefh from 0.5 to 3, not {c}");
                }
                a.coefh = Some(c);
            }
            "--integrator" => {
                a.integrator = match v.as_str() {
                    "symplectic" => IntegratorName::Symplectic,
                    "verlet" => IntegratorName::Verlet,
                    _ => bail!("--integrator: symplectic or verlet, not {v}"),
                }
            }
            "--out" => a.out = Some(v.clone()),
            _ => bail!("unknown option {k}\n{USAGE}"),
        }
        i += 2;
    }
    if a.steps == 0 {
        bail!("--steps must be at least 1");
    }
    Ok(a)
}

const USAGE: &str = "sph-gpu-bench [--particles 1e6,1e7,1e8] [--steps 200] [--warmup 20] \
[--frames 5] [--device 0] [--devices 0,1] [--balance off,slice] [--first-cut work,count] \
[--balance-every 32] [--balance-threshold X] [--diffusion fourtakas] [--boundary dbc|mdbc] \
[--coefh 1.0] [--integrator symplectic|verlet] [--out FILE]";

/// The dam-break case (the shipped dambreak.toml) at spacing `dp`, with `diffusion`.
fn dambreak(dp: f64, diffusion: Diffusion) -> Result<SphCase> {
    let mut case = solver::bench_cases::sph_dambreak(dp, 1.5);
    case.sph.diffusion = diffusion;
    Ok(case)
}

/// The spacing that gives about `n` particles: counted at a coarse spacing, fluid scaling as
/// dp^-3 and boundary layers as dp^-2.
fn spacing_for(n: f64) -> Result<f64> {
    let d0 = 0.04;
    let case = dambreak(d0, Diffusion::Fourtakas)?;
    let c = case.constants()?;
    let p = case.particles(&c)?;
    let f = p.kind.iter().filter(|&&k| k == KIND_FLUID).count() as f64;
    let b = p.kind.len() as f64 - f;
    let count = |dp: f64| f * (d0 / dp).powi(3) + b * (d0 / dp).powi(2);
    let (mut lo, mut hi) = (1e-5, d0);
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if count(mid) > n {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(hi)
}

/// The integrator as a record's model names it.
fn integrator_words(i: IntegratorName) -> &'static str {
    match i {
        IntegratorName::Symplectic => "symplectic",
        IntegratorName::Verlet => "Verlet (an Euler step every 40)",
    }
}

/// The density diffusion as a record's model names it.
fn diffusion_words(d: Diffusion) -> &'static str {
    match d {
        Diffusion::Fourtakas => "Fourtakas delta-SPH",
        Diffusion::Molteni => "Molteni-Colagrossi delta-SPH",
        Diffusion::None => "no",
    }
}

/// The walls as a record's model names them.
fn boundary_words(b: BoundaryName) -> &'static str {
    match b {
        BoundaryName::Dbc => "dynamic boundaries",
        BoundaryName::Mdbc => "mDBC boundaries",
    }
}

fn json_num(x: f64) -> String {
    if x.is_finite() {
        format!("{x}")
    } else {
        "null".to_string()
    }
}

/// The command as run, after the variables that change what it measures where they are set.
fn command_line() -> String {
    let vars = [
        "PARTICLE_SHM_SPH_CLASSIFY",
        "PARTICLE_SHM_SPH_OVERLAP",
        "PARTICLE_SHM_NVRTC_OPTIONS",
    ]
    .into_iter()
    .filter_map(|v| std::env::var(v).ok().map(|x| format!("{v}='{x}'")));
    vars.chain(std::env::args().map(|a| a.rsplit('/').next().unwrap_or(&a).to_string()))
        .collect::<Vec<_>>()
        .join(" ")
}

fn main() -> Result<()> {
    let a = parse()?;
    let mut out = match &a.out {
        Some(p) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .with_context(|| format!("cannot open {p}"))?,
        ),
        None => None,
    };
    for &target in &a.particles {
        let dp = spacing_for(target)?;
        let mut case = dambreak(dp, a.diffusion)?;
        case.sph.boundary = a.boundary;
        if let Some(coefh) = a.coefh {
            case.sph.coefh = coefh;
        }
        case.sph.integrator = a.integrator;
        let c = case.constants()?;
        let t0 = Instant::now();
        let p = case.particles(&c)?;
        let n = p.kind.len();
        let nf = p.kind.iter().filter(|&&k| k == KIND_FLUID).count();
        let place_s = t0.elapsed().as_secs_f64();
        let t0 = Instant::now();
        let opts = SphCudaOptions {
            device: a.device,
            double: false,
        };
        let mut sim = SphCuda::new(c.clone(), p, opts)?;
        let start_s = t0.elapsed().as_secs_f64();
        for _ in 0..a.warmup {
            sim.step()?;
        }
        let (timed_from, t0) = (sim.time(), Instant::now());
        for _ in 0..a.steps {
            sim.step()?;
        }
        let wall = t0.elapsed().as_secs_f64();
        let timed_to = sim.time();
        let ms_step = 1e3 * wall / a.steps as f64;
        let rate = n as f64 * a.steps as f64 / wall;
        // Publication as a run does it: page-locked host memory (the run registers its
        // segment), a frame every k steps with k giving 10 frames per second of wall time, the
        // copy overlapping the next steps. The share is the extra wall time against the same
        // number of steps without frames (the mean of a run before and one after).
        let (mut pos, mut vel) = (vec![[0f32; 3]; n], vec![[0f32; 3]; n]);
        let (mut rho, mut pr) = (vec![0f32; n], vec![0f32; n]);
        let mut frame_ms = f64::NAN;
        let mut share = f64::NAN;
        let mut fps = f64::NAN;
        if a.frames > 0 {
            let regs = [
                (pos.as_mut_ptr() as *mut u8, 12 * n),
                (vel.as_mut_ptr() as *mut u8, 12 * n),
                (rho.as_mut_ptr() as *mut u8, 4 * n),
                (pr.as_mut_ptr() as *mut u8, 4 * n),
            ];
            let mut keep = Vec::new();
            for (ptr, len) in regs {
                // SAFETY: the vectors outlive the registrations (dropped at the end of this
                // block, before the vectors).
                keep.push(unsafe { solver::dem::cuda::register_host(sim.context(), ptr, len) }?);
            }
            let targets = regs.map(|r| r.0);
            // One frame alone: pack and copy, waited for.
            let t0 = Instant::now();
            // SAFETY: the targets hold n elements each and are not touched until the wait.
            unsafe { sim.publish_async(targets) }?;
            sim.publish_wait()?;
            frame_ms = 1e3 * t0.elapsed().as_secs_f64();
            let k = ((100.0 / ms_step).round() as u64).max(1);
            let steps = (k * a.frames as u64).max(a.steps.min(50));
            let t0 = Instant::now();
            for _ in 0..steps {
                sim.step()?;
            }
            let plain = t0.elapsed().as_secs_f64();
            let t0 = Instant::now();
            let mut frames = 0u64;
            for s in 0..steps {
                sim.step()?;
                sim.publish_done()?;
                // No frame after the last step: in a run its copy overlaps the steps that
                // follow, here it would be waited for with nothing to overlap. Where a frame
                // follows every step (100 M, k = 1) that wait alone put about 2.5 % on the share
                // of 20 steps (sessions 15 to 42).
                if s % k == 0 && s + 1 < steps {
                    // SAFETY: as above; publish_async waits for the previous copy.
                    unsafe { sim.publish_async(targets) }?;
                    frames += 1;
                }
            }
            // The copies that did not finish within the steps after them are waited for here.
            sim.publish_wait()?;
            let with = t0.elapsed().as_secs_f64();
            // The steps without frames again: the step's cost drifts as the dam breaks, so the
            // frames are compared with the mean of the runs before and after them.
            let t0 = Instant::now();
            for _ in 0..steps {
                sim.step()?;
            }
            let plain = 0.5 * (plain + t0.elapsed().as_secs_f64());
            share = (with - plain) / plain;
            fps = frames as f64 / with;
            drop(keep);
        }
        let mem = sim.memory();
        let bpp = mem.total() as f64 / n as f64;
        println!(
            "SPH dam break f32: {n} particles ({nf} fluid, dp = {:.5} m) on {}: {ms_step:.3} ms/step, \
             {rate:.3e} particle-steps/s; {bpp:.1} B/particle; frame {frame_ms:.2} ms \
             (steps {:+.2} % slower with {fps:.1} frames/s); t = {:.4} s after {} steps (placing {place_s:.1} s, start {start_s:.1} s); \
             h = {:.3} dp",
            dp,
            sim.device_name(),
            100.0 * share,
            sim.time(),
            sim.step_index(),
            c.h / dp
        );
        let line = format!(
            "{{\"case\": \"dambreak_spheric2\", \"model\": \"WCSPH Wendland C2, {bc}, \
             {diff} density diffusion, {integ}, variable CFL dt, f32 (positions f64)\", \
             \"phase\": \"from rest: {w} warm-up steps, then {s} timed, t = {tf:.4} to {tt:.4} s\", \
             \"device\": \"{dev}\", \"particles\": {n}, \"fluid\": {nf}, \"spacing\": {dp}, \
             \"steps\": {s}, \"wall_s\": {wall}, \"ms_per_step\": {ms_step}, \
             \"particle_steps_per_s\": {rate}, \"bytes_per_particle\": {bpp}, \
             \"frame_ms\": {fm}, \"publication_share\": {sh}, \"publication_fps\": {fp}, \
             \"sim_time_s\": {t}, \"h_over_dp\": {hdp}, \"command\": \"{cmd}\"}}",
            w = a.warmup,
            s = a.steps,
            diff = diffusion_words(a.diffusion),
            integ = integrator_words(a.integrator),
            bc = boundary_words(a.boundary),
            dev = sim.device_name(),
            t = sim.time(),
            tf = timed_from,
            tt = timed_to,
            hdp = c.h / dp,
            fm = json_num(frame_ms),
            sh = json_num(share),
            fp = json_num(fps),
            cmd = command_line(),
        );
        if let Some(f) = &mut out {
            writeln!(f, "{line}")?;
        }
        println!("memory:\n{}", mem.breakdown());
        drop(sim);
        if !a.devices.is_empty() {
            let p = case.particles(&c)?;
            let state = SphState {
                time: 0.0,
                step: 0,
                vel: vec![[0.0; 3]; n],
                kind: p.kind,
                pos: p.pos,
                rho: p.rho,
                prev: None,
            };
            for &first_cut in &a.first_cut {
                for &balance in &a.balance {
                    let line = group_run(&a, &c, &state, first_cut, balance, rate, dp)?;
                    if let Some(f) = &mut out {
                        writeln!(f, "{line}")?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// The same warm-up and timed steps on `a.devices` from `first_cut` with `balance`: one JSON
/// record.
#[allow(clippy::too_many_arguments)]
fn group_run(
    a: &Args,
    c: &solver::sph::setup::SphConstants,
    state: &SphState,
    first_cut: FirstCut,
    balance: Balance,
    one_gpu_rate: f64,
    dp: f64,
) -> Result<String> {
    let n = state.pos.len();
    let opts = SphGroupOptions {
        devices: a.devices.clone(),
        double: false,
        slabs: SlabOptions {
            axis: None,
            first_cut,
            balance,
            interval: a.balance_every,
            threshold: a.balance_threshold,
        },
        spare_slots: solver::sph::cuda::SPARE_SLOTS,
        classify_in_rates: solver::sph::cuda::classify_in_rates_from_env()?,
        overlap: solver::sph::cuda::overlap_from_env()?,
    };
    let opts_classify = opts.classify_in_rates;
    let opts_overlap = opts.overlap;
    let t0 = Instant::now();
    let mut g = SphGroup::from_state(c.clone(), state.clone(), first_time_step(c), opts)?;
    let start_s = t0.elapsed().as_secs_f64();
    let first = g.bounds().to_vec();
    for _ in 0..a.warmup {
        g.step()?;
    }
    g.reset_phase_times();
    let (timed_from, t0) = (g.time(), Instant::now());
    for _ in 0..a.steps {
        g.step()?;
    }
    let wall = t0.elapsed().as_secs_f64();
    let timed_to = g.time();
    let rate = n as f64 * a.steps as f64 / wall;
    let (compute, exchange, _) = g.phase_times();
    let mean = compute.iter().sum::<f64>() / compute.len() as f64;
    let imbalance = compute.iter().cloned().fold(0.0, f64::max) / mean;
    let exchange_share = exchange.iter().cloned().fold(0.0, f64::max) / wall;
    let speedup = rate / one_gpu_rate;
    let bpp = g.memory().total() as f64 / n as f64;
    println!(
        "SPH dam break f32 on {}, first cut {first_cut:?}, balance {}: {n} particles, {:.3} ms/step, {rate:.3e} particle-steps/s, \
         speedup {speedup:.3}x over one GPU, imbalance {imbalance:.3}, exchange {:.1} % of the wall time; \
         bounds {first:?} -> {:?} ({} moves); {bpp:.1} B/particle over all GPUs (start {start_s:.1} s; \
         classified {} times in the rates kernels; {} exchanges beside the boundary's rates)",
        g.device_name(),
        balance.name(),
        1e3 * wall / a.steps as f64,
        100.0 * exchange_share,
        g.bounds(),
        g.rebalances(),
        g.classified_in_rates(),
        g.overlapped_exchanges(),
    );
    Ok(format!(
        "{{\"case\": \"dambreak_spheric2\", \"model\": \"WCSPH Wendland C2, {bc}, \
         {diff} density diffusion, {integ}, variable CFL dt, f32 (positions f64)\", \
         \"phase\": \"from rest: {w} warm-up steps, then {s} timed, t = {tf:.4} to {tt:.4} s\", \
         \"device\": \"{dev}\", \"gpus\": {gpus}, \"first_cut\": \"{fc}\", \"balance\": \"{bal}\", \"balance_every\": {be}, \"balance_threshold\": {bt}, \"particles\": {n}, \
         \"spacing\": {dp}, \"steps\": {s}, \"wall_s\": {wall}, \"particle_steps_per_s\": {rate}, \
         \"speedup_over_one_gpu\": {speedup}, \"imbalance_max_over_mean\": {imbalance}, \
         \"exchange_share\": {exchange_share}, \"bounds_first\": {first:?}, \"bounds_last\": {last:?}, \
         \"rebalances\": {moves}, \"bytes_per_particle\": {bpp}, \"classify\": \"{cl}\", \
         \"classified_in_rates\": {cir}, \"overlap\": {opts_overlap}, \"overlapped_exchanges\": {ovl}, \
         \"command\": \"{cmd}\"}}",
        w = a.warmup,
        s = a.steps,
        tf = timed_from,
        tt = timed_to,
        bc = boundary_words(a.boundary),
        diff = diffusion_words(a.diffusion),
        integ = integrator_words(a.integrator),
        dev = g.device_name(),
        gpus = a.devices.len(),
        bal = balance.name(),
        be = a.balance_every,
        bt = a
            .balance_threshold
            .unwrap_or(solver::decomp::balance::default_threshold(balance)),
        fc = if first_cut == FirstCut::Work { "work" } else { "count" },
        last = g.bounds(),
        moves = g.rebalances(),
        cl = if opts_classify { "rates" } else { "standalone" },
        cir = g.classified_in_rates(),
        ovl = g.overlapped_exchanges(),
        cmd = command_line(),
    ))
}
