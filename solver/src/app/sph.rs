//! An SPH case as the run loop sees it: the CPU reference solver ([`solver::sph::cpu`]), CPU
//! sub-domains in one process ([`solver::sph::subdomains`], `--subdomains`), one GPU or several
//! ([`solver::sph::cuda`]), or slabs on MPI ranks (GPU or CPU: [`solver::sph::ranks`]) behind
//! [`SimPort`], publishing positions, velocities, density, pressure and particle kind (or those
//! of them `--fields` or the case's `[output] fields` name; positions and kinds always), and VTK
//! files with `--output`, checkpoints that `--restart` continues bit for bit (on any backend,
//! number of GPUs or sub-domains: the file is the same), and `--load-shm` resuming a dead run
//! from its last frame.

use anyhow::{bail, Context, Result};
use shm_protocol::layout::{SpeciesMethod, SPECIES_PARAMS};
use shm_protocol::{BodyTransform, FieldKind, FrameWriter, Region, SpeciesRecord, StaticData};
use solver::io::vtk::{PointArray, VtkParticles, VtkSeries};
use solver::sph::cpu::{SphSim, SphState};
use solver::sph::cuda::{
    SphCuda, SphCudaOptions, SphGpu, SphGroup, SphGroupOptions, SphRank, SphRankOptions,
};
use solver::sph::motion::MovingSolids;
use solver::sph::physics;
use solver::sph::ranks::{SphCpuRank, SphCpuRankOptions};
use solver::sph::setup::{SphCase, SphConstants, KIND_FLUID};
use solver::sph::slabs::SlabOptions;
use solver::sph::subdomains::{SphCpuSubdomains, SphSubdomainOptions};
use std::path::Path;

use super::cli::Cli;
use super::port::{CaseIntervals, SimPort};
use crate::Backend;

/// Whether the case text names `method = "sph"`.
pub fn is_sph(text: &str) -> bool {
    toml::from_str::<toml::Table>(text)
        .ok()
        .and_then(|t| t.get("method").and_then(|m| m.as_str().map(|s| s == "sph")))
        .unwrap_or(false)
}

/// Builds an SPH run from a case file's text.
pub fn build(path: &Path, text: &str, backend: Backend, cli: &Cli) -> Result<Box<dyn SimPort>> {
    let name = path.display();
    refuse_unsupported(&name.to_string(), cli)?;
    let mut case = SphCase::from_toml_str(text).with_context(|| format!("{name}"))?;
    case.base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    if let Some(t) = cli.end_time {
        case.end_time = t;
    }
    if let Some(dt) = cli.dt {
        case.dt = dt;
    }
    if let Some(dp) = cli.spacing {
        case.sph.spacing = dp;
    }
    let c = case.constants().with_context(|| format!("{name}"))?;
    let fields = frame_fields(&case, cli).with_context(|| format!("{name}"))?;
    let acoustic = c.cfl * c.h / c.c0;
    if case.dt > acoustic {
        // Not an error: `dt` only caps the step, which always meets the CFL condition.
        tracing::info!(
            "{name}: dt = {} s is above the acoustic CFL bound C h / c0 = {acoustic:.3e} s; \
             each step is the CFL step (Monaghan & Kos), at most dt",
            case.dt
        );
    }
    let bound = case.particle_bound(&c);
    check_host_memory(bound, backend, &case, cli).with_context(|| format!("{name}"))?;
    if bound >= LARGE_START {
        // Placing 300 M particles takes about half a minute: say so before the wait.
        tracing::info!("{name}: placing up to {bound} particles");
    }
    let placing = std::time::Instant::now();
    let particles = case.particles(&c).with_context(|| format!("{name}"))?;
    let placing = placing.elapsed().as_secs_f64();
    // The segment, checkpoints and the other ranks keep the run's case: with the command
    // line's overrides (a restart or a resume continues with them; the case file's text gave
    // a restart after --dt the file's largest step) and its STL paths made absolute (a run
    // resumed from the segment finds them from anywhere).
    let stored = case
        .self_contained_toml()
        .with_context(|| format!("{name}"))?;
    let text = stored.as_str();
    tracing::info!(
        "SPH case {name}: {} fluid and {} boundary particles, dp = {} m, h = {:.4} m, c0 = {:.2} m/s{}",
        particles.kind.iter().filter(|&&k| k == KIND_FLUID).count(),
        particles.kind.iter().filter(|&&k| k != KIND_FLUID).count(),
        c.dp,
        c.h,
        c.c0,
        took(placing, "placed")
    );
    let world = bounds(&particles.pos);
    let dt = solver::sph::cpu::first_time_step(&c);
    let state = SphState::initial(&particles);
    let run = RunInfo {
        config_toml: text,
        end_time: case.end_time,
        world,
    };
    let sim = engine(backend, c, state, dt, particles.moving, cli, run)
        .with_context(|| format!("{name}"))?;
    Ok(Box::new(SphRunner {
        end_time: case.end_time,
        config_toml: text.to_string(),
        sim,
        world,
        vtk: None,
        fields,
        intervals: CaseIntervals::of(&case.output),
    }))
}

/// Particles from which the start says what it is doing before each long phase.
const LARGE_START: u64 = 20_000_000;

/// `", placed in 26.1 s"` for a phase of at least a second (a large run's start), else nothing.
fn took(seconds: f64, what: &str) -> String {
    if seconds >= 1.0 {
        format!(", {what} in {seconds:.1} s")
    } else {
        String::new()
    }
}

/// The options an SPH run does not take.
fn refuse_unsupported(what: &str, cli: &Cli) -> Result<()> {
    if cli.particles.is_some() {
        bail!("{what}: --particles scales the built-in DEM case; an SPH case sets its spacing");
    }
    if cli.gpu_memory != super::cli::GpuMemory::Auto {
        bail!("{what}: --gpu-memory sets the layout of DEM runs; SPH keeps its own");
    }
    Ok(())
}

/// Host memory an SPH run of `particles` needs on the CPU [B]: the reference's arrays, and
/// those of each further sub-domain (every slab keeps arrays for all particles).
fn cpu_host_bytes(particles: u64, subdomains: u32) -> u64 {
    use solver::sph::cpu::{SPH_CPU_HOST_BYTES_PER_PARTICLE, SPH_SUBDOMAIN_BYTES_PER_PARTICLE};
    let per = SPH_CPU_HOST_BYTES_PER_PARTICLE
        + SPH_SUBDOMAIN_BYTES_PER_PARTICLE * u64::from(subdomains.max(1) - 1);
    particles.saturating_mul(per)
}

/// Why an SPH run of `particles` that needs `need` bytes cannot start on this CPU with
/// `available`, if it cannot, with what to change.
fn memory_refusal(particles: u64, need: u64, available: u64) -> Option<String> {
    solver::case::memory_refusal(particles, need, available, "an SPH run on the CPU").map(|why| {
        format!(
            "{why}: use a coarser --spacing, fewer --subdomains, MPI ranks on several hosts, or \
             a GPU"
        )
    })
}

/// Refuses an SPH run on the CPU that would need more host memory than this machine has
/// available, before anything is placed (an out-of-memory kill says nothing). `particles`: at
/// least the run's count. A GPU run keeps its arrays on the device, which checks its own
/// memory; over MPI each rank checks its own share (one slab, arrays for every particle).
fn check_host_memory(particles: u64, backend: Backend, case: &SphCase, cli: &Cli) -> Result<()> {
    if backend != Backend::Cpu {
        return Ok(());
    }
    let Some(available) = solver::case::available_memory() else {
        return Ok(());
    };
    let subdomains = if super::ranks::current().is_some() {
        1
    } else {
        cli.decomposition().apply(case.decomposition).subdomains
    };
    match memory_refusal(particles, cpu_host_bytes(particles, subdomains), available) {
        Some(why) => bail!(why),
        None => Ok(()),
    }
}

/// The frame field mask: `--fields`, else the case's `[output] fields`, else every SPH field.
fn frame_fields(case: &SphCase, cli: &Cli) -> Result<u32> {
    cli.frame_mask::<solver::sph::Sph, _>(|| case.frame_fields())
}

/// The cut a run asks for: its case's `[decomposition]` with the command line's overrides.
/// Every MPI rank derives it from the same case text and command line, so all cut alike.
fn decomposition(config_toml: &str, cli: &Cli) -> Result<solver::decomp::Decomposition> {
    let case = SphCase::from_toml_str(config_toml).context("the run's SPH case")?;
    let d = cli.decomposition().apply(case.decomposition);
    d.check().context("--subdomains")?;
    Ok(d)
}

/// The cut and balancing of `d` (the case and command line, [`decomposition`]) with the command
/// line's `--first-cut`, `--balance-every` and `--balance-threshold`.
fn slab_options(d: &solver::decomp::Decomposition, cli: &Cli) -> SlabOptions {
    SlabOptions {
        axis: d.split_axis,
        first_cut: cli.first_cut.unwrap_or_default(),
        balance: d.balance,
        interval: cli
            .balance_every
            .unwrap_or(solver::decomp::balance::BALANCE_INTERVAL),
        threshold: cli.balance_threshold,
    }
}

/// Whether `subdomains` fits a run of `slabs` slabs, one per `each` (an MPI rank or a GPU) of
/// `what`: 1, or the same count.
fn check_slabs(subdomains: u32, slabs: usize, what: &str, each: &str) -> Result<()> {
    if subdomains > 1 && subdomains as usize != slabs {
        bail!(
            "{subdomains} sub-domains asked for, but an SPH run on {what} has one slab per \
             {each}: drop --subdomains (or the case's [decomposition] subdomains), or use \
             --backend cpu for CPU sub-domains"
        );
    }
    Ok(())
}

/// The box of `pos`.
fn bounds(pos: &[[f64; 3]]) -> ([f64; 3], [f64; 3]) {
    let (mut lo, mut hi) = ([f64::INFINITY; 3], [f64::NEG_INFINITY; 3]);
    for p in pos {
        for a in 0..3 {
            lo[a] = lo[a].min(p[a]);
            hi[a] = hi[a].max(p[a]);
        }
    }
    (lo, hi)
}

/// What the other MPI ranks need of a run besides its state: they build the same
/// [`SphRunner`] (its end time shortens the last step alike on every rank).
struct RunInfo<'a> {
    config_toml: &'a str,
    end_time: f64,
    world: ([f64; 3], [f64; 3]),
}

/// The first bytes of an SPH run's start as rank 0 sends it to the other MPI ranks (a DEM
/// run's start is checkpoint bytes, which begin otherwise).
const START_MAGIC: [u8; 8] = *b"PSHMSPHR";

/// The start of an SPH run over MPI ranks: the case text, end time, world box, constants, step,
/// state, moving solids, and whether the ranks run on GPUs (rank 0's backend decides for all),
/// after [`START_MAGIC`].
type Start = (
    String,
    f64,
    ([f64; 3], [f64; 3]),
    SphConstants,
    f64,
    SphState,
    MovingSolids,
    bool,
);

/// Whether rank 0's start bytes are an SPH run's.
pub fn is_sph_start(bytes: &[u8]) -> bool {
    bytes.starts_with(&START_MAGIC)
}

/// What every rank starts from: the constants, the state about to take the step `dt`, and the
/// moving solids.
struct Initial {
    c: SphConstants,
    state: SphState,
    dt: f64,
    moving: MovingSolids,
}

/// This rank's engine of a run over MPI ranks: slab `rank` of the run, on the CPU or on the
/// rank's GPU of `--devices` (the ranks of a host take its listed GPUs in turn).
fn rank_engine(
    ranks: &solver::exec::sim::RankSet,
    initial: Initial,
    gpu: bool,
    cli: &Cli,
    d: solver::decomp::Decomposition,
) -> Result<Engine> {
    let Initial {
        c,
        state,
        dt,
        moving,
    } = initial;
    // (Rank 0 checked `d.subdomains` against the ranks before it sent the start.)
    let slabs = slab_options(&d, cli);
    let (name, bounds, axis, engine) = if gpu {
        let devices = cli.devices.resolve()?;
        let local = super::ranks::local_rank().unwrap_or(ranks.comm.rank());
        let opts = SphRankOptions {
            comm: ranks.comm.clone(),
            device: devices[local % devices.len()],
            double: false,
            slabs,
            spare_slots: solver::sph::cuda::SPARE_SLOTS,
            classify_in_rates: solver::sph::cuda::classify_in_rates_from_env()?,
            overlap: solver::sph::cuda::overlap_from_env()?,
        };
        let rank = SphRank::from_state(c, state, dt, moving, opts)?;
        let (name, bounds, axis) = (rank.device_name(), rank.bounds().to_vec(), rank.axis());
        (name, bounds, axis, Engine::Gpu(Box::new(rank)))
    } else {
        let opts = SphCpuRankOptions {
            comm: ranks.comm.clone(),
            slabs,
            label: "rank",
        };
        let rank = SphCpuRank::from_state(c, state, dt, moving, opts)?;
        let name = format!("{} MPI ranks on the CPU", rank.ranks());
        let (bounds, axis) = (rank.bounds().to_vec(), rank.axis());
        (name, bounds, axis, Engine::Ranks(Box::new(rank)))
    };
    if ranks.comm.is_root() {
        tracing::info!(
            "SPH on {name}: slabs {bounds:?} along {}",
            ["x", "y", "z"][axis]
        );
    }
    Ok(engine)
}

/// The engine of `backend`: the CPU reference, one GPU or a group of slabs (`--devices`,
/// `--split-axis`, `--balance`); over MPI ranks, one slab per rank on either (rank 0 first sends
/// the others the start).
fn engine(
    backend: Backend,
    c: SphConstants,
    state: SphState,
    dt: f64,
    moving: MovingSolids,
    cli: &Cli,
    run: RunInfo<'_>,
) -> Result<Engine> {
    let gpu = backend == Backend::Cuda;
    let d = decomposition(run.config_toml, cli)?;
    let ranks = super::ranks::current();
    if let Some(ranks) = ranks {
        // Refused before the start goes out: the other ranks then give up waiting for it.
        check_slabs(d.subdomains, ranks.comm.size(), "MPI ranks", "rank")?;
        let mut bytes = START_MAGIC.to_vec();
        bytes.extend(solver::exec::comm::encode(&(
            run.config_toml,
            run.end_time,
            run.world,
            &c,
            dt,
            &state,
            &moving,
            gpu,
        )));
        ranks.send_start_bytes(bytes);
        return rank_engine(
            &ranks,
            Initial {
                c,
                state,
                dt,
                moving,
            },
            gpu,
            cli,
            d,
        );
    }
    if !gpu && d.subdomains > 1 {
        let opts = SphSubdomainOptions {
            subdomains: d.subdomains as usize,
            slabs: slab_options(&d, cli),
        };
        let group = SphCpuSubdomains::from_state(c, state, dt, moving, opts)?;
        tracing::info!(
            "SPH on {} CPU sub-domains (threads of this process, each holding arrays for every \
             particle): slabs {:?} along {}",
            group.subdomains(),
            group.bounds(),
            ["x", "y", "z"][group.axis()]
        );
        return Ok(Engine::Subdomains(Box::new(group)));
    }
    if !gpu {
        return Ok(Engine::Cpu(Box::new(SphSim::from_state_moving(
            c, state, dt, moving,
        ))));
    }
    let devices = cli.devices.resolve()?;
    check_slabs(d.subdomains, devices.len(), "the listed GPUs", "GPU")?;
    if state.kind.len() as u64 >= LARGE_START {
        tracing::info!(
            "uploading {} particles to {}",
            state.kind.len(),
            if devices.len() == 1 {
                "the GPU"
            } else {
                "the GPUs"
            }
        );
    }
    let upload = std::time::Instant::now();
    if devices.len() == 1 {
        let opts = SphCudaOptions {
            device: devices[0],
            double: false,
        };
        let sim = SphCuda::from_state_moving(c, state, dt, opts, moving)?;
        let m = sim.memory();
        tracing::info!(
            "SPH on {}: {} of device memory ({:.0} B/particle){}",
            sim.device_name(),
            solver::case::human_bytes(m.total()),
            m.bytes_per_particle(),
            took(upload.elapsed().as_secs_f64(), "set up")
        );
        return Ok(Engine::Gpu(Box::new(sim)));
    }
    let opts = SphGroupOptions {
        devices,
        double: false,
        slabs: slab_options(&d, cli),
        spare_slots: solver::sph::cuda::SPARE_SLOTS,
        classify_in_rates: solver::sph::cuda::classify_in_rates_from_env()?,
        overlap: solver::sph::cuda::overlap_from_env()?,
    };
    let group = SphGroup::from_state_moving(c, state, dt, moving, opts)?;
    let m = group.memory();
    tracing::info!(
        "SPH on {}: slabs {:?} along {}, {} of device memory over all GPUs ({:.0} B/particle){}",
        group.device_name(),
        group.bounds(),
        ["x", "y", "z"][group.axis()],
        solver::case::human_bytes(m.total()),
        m.bytes_per_particle(),
        took(upload.elapsed().as_secs_f64(), "set up")
    );
    Ok(Engine::Gpu(Box::new(group)))
}

/// Continues an SPH run from its checkpoint (`--restart FILE`; `--end-time` may change).
pub fn restore(path: &Path, backend: Backend, cli: &Cli) -> Result<Box<dyn SimPort>> {
    if cli.particles.is_some() || cli.dt.is_some() || cli.spacing.is_some() {
        bail!(
            "--particles, --dt and --spacing cannot change a checkpointed SPH run (--end-time can)"
        );
    }
    let mut r = solver::sph::checkpoint::load_state(path)?;
    // The run's case keeps a new end time, as a run's keeps its overrides (`build`): the
    // checkpoints this run writes restart with it.
    if let Some(t) = cli.end_time {
        r.case.end_time = t;
        r.case_toml = r
            .case
            .self_contained_toml()
            .with_context(|| format!("{}", path.display()))?;
    }
    check_host_memory(r.state.pos.len() as u64, backend, &r.case, cli)
        .with_context(|| format!("{}", path.display()))?;
    let fields = frame_fields(&r.case, cli).with_context(|| format!("{}", path.display()))?;
    tracing::info!(
        "restarted SPH run from {} at step {}, t = {:.6} s",
        path.display(),
        r.state.step,
        r.state.time
    );
    let world = bounds(&r.state.pos);
    let run = RunInfo {
        config_toml: &r.case_toml,
        end_time: r.case.end_time,
        world,
    };
    // Moving solids are placed from their rest positions, which the case gives.
    let moving = r.moving_solids(path)?;
    let sim = engine(backend, r.constants, r.state, r.dt, moving, cli, run)
        .with_context(|| format!("{}", path.display()))?;
    Ok(Box::new(SphRunner {
        end_time: r.case.end_time,
        intervals: CaseIntervals::of(&r.case.output),
        config_toml: r.case_toml,
        sim,
        world,
        vtk: None,
        fields,
    }))
}

/// Continues a dead SPH run from the last complete frame of segment `name` (`--load-shm`).
/// An SPH frame holds the whole state (positions, velocities, densities, kinds), in f32: the
/// run goes on from it, not with the bits an uninterrupted run would have had (a checkpoint
/// gives those). Boundary particles take their exact positions from the case (moving solids'
/// from their motion at the frame's time), the step restarts from the acoustic CFL bound.
/// Nothing in the segment is trusted: the time, the count, the kinds and every value are
/// checked first.
pub fn resume_from_frame(
    name: &str,
    stat: &StaticData,
    frame: &shm_protocol::Frame,
    backend: Backend,
    cli: &Cli,
) -> Result<Box<dyn SimPort>> {
    refuse_unsupported(&format!("segment {name:?}"), cli)?;
    if cli.spacing.is_some() {
        bail!("--load-shm resumes the segment's particles; --spacing cannot change them");
    }
    let mut case = SphCase::from_toml_str(&stat.config_toml)
        .with_context(|| format!("segment {name:?}: its stored SPH case cannot be read"))?;
    if let Some(t) = cli.end_time {
        case.end_time = t;
    }
    if let Some(dt) = cli.dt {
        case.dt = dt;
    }
    let c = case
        .constants()
        .with_context(|| format!("segment {name:?}: its stored SPH case"))?;
    // The segment and this run's checkpoints keep the case with these overrides, as a run's
    // own do (`build`): a restart after `--load-shm --dt` goes on with the step it was given.
    let stored = case
        .self_contained_toml()
        .with_context(|| format!("segment {name:?}: its stored SPH case"))?;
    check_host_memory(frame.meta.particle_count, backend, &case, cli)
        .with_context(|| format!("segment {name:?}"))?;
    let placed = case
        .particles(&c)
        .with_context(|| format!("segment {name:?}: its stored SPH case"))?;
    let state = frame_state(name, stat, frame, &c, &placed, case.end_time)?;
    tracing::info!(
        "resuming SPH run from segment {name:?} at step {}, t = {:.6} s ({} particles; f32 \
         frame data, so not bit for bit the uninterrupted run)",
        state.step,
        state.time,
        state.pos.len()
    );
    let world = bounds(&placed.pos);
    let dt = solver::sph::cpu::first_time_step(&c);
    let run = RunInfo {
        config_toml: &stored,
        end_time: case.end_time,
        world,
    };
    let sim = engine(backend, c, state, dt, placed.moving, cli, run)
        .with_context(|| format!("segment {name:?}"))?;
    Ok(Box::new(SphRunner {
        end_time: case.end_time,
        config_toml: stored,
        sim,
        world,
        vtk: None,
        // The segment keeps the fields it was made with.
        fields: frame.meta.fields,
        intervals: CaseIntervals::of(&case.output),
    }))
}

/// The state in the last frame of an SPH segment, checked against its case's placement.
fn frame_state(
    name: &str,
    stat: &StaticData,
    frame: &shm_protocol::Frame,
    c: &SphConstants,
    placed: &solver::sph::setup::SphParticles,
    end_time: f64,
) -> Result<SphState> {
    let bad = |what: String| anyhow::anyhow!("segment {name:?}: the last frame {what}");
    let m = &frame.meta;
    if m.static_generation != stat.generation {
        return Err(bad(format!(
            "belongs to static data generation {}, but the static section is generation {}",
            m.static_generation, stat.generation
        )));
    }
    let max_t = shm_protocol::limits::SIM_INTERVAL_MAX_S;
    if !(m.sim_time.is_finite() && (0.0..=max_t).contains(&m.sim_time)) {
        return Err(bad(format!(
            "has simulated time {} s (must be finite, in [0, {max_t:e}])",
            m.sim_time
        )));
    }
    if m.sim_time >= end_time {
        bail!(
            "segment {name:?}: the last frame is at t = {} s, at or past the end time {end_time} s; \
             give a later --end-time to continue",
            m.sim_time
        );
    }
    let n = placed.pos.len();
    if m.particle_count as usize != n {
        return Err(bad(format!(
            "has {} particles, but its case places {n}",
            m.particle_count
        )));
    }
    let need = |v: Option<usize>, what: &str| -> Result<()> {
        match v {
            Some(k) if k == n => Ok(()),
            Some(k) => Err(bad(format!("has {k} {what} for {n} particles"))),
            None => Err(bad(format!(
                "has no {what}: the run left them out of its frames (--fields or [output] \
                 fields), so it cannot resume from them; use --restart with a checkpoint"
            ))),
        }
    };
    need(frame.positions.as_ref().map(Vec::len), "positions")?;
    need(frame.velocities.as_ref().map(Vec::len), "velocities")?;
    need(frame.densities.as_ref().map(Vec::len), "densities")?;
    need(
        frame.particle_kinds.as_ref().map(Vec::len),
        "particle kinds",
    )?;
    let (pos, vel, rho, kind) = (
        frame.positions.as_deref().unwrap_or_default(),
        frame.velocities.as_deref().unwrap_or_default(),
        frame.densities.as_deref().unwrap_or_default(),
        frame.particle_kinds.as_deref().unwrap_or_default(),
    );
    if let Some(k) = (0..n).find(|&k| kind[k] != placed.kind[k]) {
        return Err(bad(format!(
            "gives particle {k} kind {}, but its case makes it {} (1 fluid, 2 boundary)",
            kind[k], placed.kind[k]
        )));
    }
    // Densities within a factor 2 of rho0 (the Tait pressure of 2 rho0 is 127 B: far beyond
    // any run that was still stable), speeds below 10 c0.
    let vmax = 10.0 * c.c0;
    for k in 0..n {
        let finite = pos[k].iter().chain(&vel[k]).all(|x| x.is_finite());
        let r = rho[k] as f64;
        let speed = vel[k]
            .iter()
            .map(|&v| (v as f64).powi(2))
            .sum::<f64>()
            .sqrt();
        if !finite || !(0.5 * c.rho0..=2.0 * c.rho0).contains(&r) || speed > vmax {
            return Err(bad(format!(
                "holds particle {k} at {:?} with velocity {:?} and density {r} kg/m^3: not a state \
                 to continue from (finite, density within [0.5, 2] rho0 = {}, speed below 10 c0 = {vmax} m/s)",
                pos[k], vel[k], c.rho0
            )));
        }
    }
    let f64v = |v: &[f32; 3]| v.map(|x| x as f64);
    let mut state = SphState {
        time: m.sim_time,
        step: m.step,
        kind: placed.kind.clone(),
        pos: (0..n)
            .map(|k| {
                if placed.kind[k] == KIND_FLUID {
                    f64v(&pos[k])
                } else {
                    placed.pos[k]
                }
            })
            .collect(),
        vel: (0..n)
            .map(|k| {
                if placed.kind[k] == KIND_FLUID {
                    f64v(&vel[k])
                } else {
                    [0.0; 3]
                }
            })
            .collect(),
        rho: rho.iter().map(|&r| r as f64).collect(),
        // A frame has no state one step back: a Verlet run's first step from it is an Euler step.
        prev: None,
    };
    // Moving solids where their motion has them at the frame's time.
    placed
        .moving
        .place(state.time, &mut state.pos, &mut state.vel);
    Ok(state)
}

/// A rank other than 0 of an SPH run over MPI ranks: builds its slab from rank 0's `start`
/// and obeys rank 0's control messages (as `app::ranks::follow` does for DEM) until the run
/// finishes.
pub fn follow(ranks: solver::exec::sim::RankSet, start: &[u8], cli: &Cli) -> Result<()> {
    use super::ranks::Op;
    let (config_toml, end_time, world, c, dt, state, moving, gpu): Start =
        solver::exec::comm::decode(&start[START_MAGIC.len()..], "the SPH start from rank 0");
    let d = decomposition(&config_toml, cli)?;
    let engine = rank_engine(
        &ranks,
        Initial {
            c,
            state,
            dt,
            moving,
        },
        gpu,
        cli,
        d,
    )?;
    let mut runner = SphRunner {
        sim: engine,
        world,
        end_time,
        config_toml,
        vtk: None,
        // Rank 0's segment says which fields a frame keeps; this rank posts its whole part.
        fields: 0,
        intervals: CaseIntervals::default(),
    };
    loop {
        let mut w = [0u64; 4];
        ranks.comm.broadcast_control(&mut w);
        let op = Op::from_words(w)
            .ok_or_else(|| anyhow::anyhow!("unknown control message {w:?} from rank 0"))?;
        match op {
            Op::Step(n) => runner.step_n(n)?,
            Op::Frame => match &mut runner.sim {
                // SAFETY: no targets: a rank other than 0 only posts its part.
                Engine::Gpu(g) => unsafe { g.publish_async([std::ptr::null_mut(); 4]) }?,
                // SAFETY: as above.
                Engine::Ranks(r) => unsafe { r.publish([std::ptr::null_mut(); 4]) },
                Engine::Cpu(_) | Engine::Subdomains(_) => {}
            },
            Op::State | Op::Snapshot => {
                runner.sim.state()?;
            }
            Op::Finish => return Ok(()),
            Op::Abort => bail!("rank 0 failed (its output says why); stopping"),
        }
    }
}

/// The solver behind the port: the CPU reference, one GPU or several (also one per MPI rank),
/// CPU slabs on MPI ranks, or CPU sub-domains in this process.
enum Engine {
    Cpu(Box<SphSim>),
    Gpu(Box<dyn SphGpu>),
    Ranks(Box<SphCpuRank>),
    Subdomains(Box<SphCpuSubdomains>),
}

impl Engine {
    fn c(&self) -> &SphConstants {
        match self {
            Engine::Cpu(s) => &s.c,
            Engine::Gpu(g) => g.constants(),
            Engine::Ranks(r) => r.constants(),
            Engine::Subdomains(g) => g.constants(),
        }
    }
    fn step_within(&mut self, t_end: f64) -> Result<()> {
        match self {
            Engine::Cpu(s) => s.step_within(t_end),
            Engine::Gpu(g) => g.step_within(t_end)?,
            Engine::Ranks(r) => r.step_within(t_end)?,
            Engine::Subdomains(g) => g.step_within(t_end)?,
        }
        Ok(())
    }
    fn step(&self) -> u64 {
        match self {
            Engine::Cpu(s) => s.s.step,
            Engine::Gpu(g) => g.step_index(),
            Engine::Ranks(r) => r.step_index(),
            Engine::Subdomains(g) => g.step_index(),
        }
    }
    fn time(&self) -> f64 {
        match self {
            Engine::Cpu(s) => s.s.time,
            Engine::Gpu(g) => g.time(),
            Engine::Ranks(r) => r.time(),
            Engine::Subdomains(g) => g.time(),
        }
    }
    fn dt(&self) -> f64 {
        match self {
            Engine::Cpu(s) => s.dt(),
            Engine::Gpu(g) => g.dt(),
            Engine::Ranks(r) => r.dt(),
            Engine::Subdomains(g) => g.dt(),
        }
    }
    fn len(&self) -> usize {
        match self {
            Engine::Cpu(s) => s.s.pos.len(),
            Engine::Gpu(g) => g.particle_count(),
            Engine::Ranks(r) => r.kinds().len(),
            Engine::Subdomains(g) => g.kinds().len(),
        }
    }
    fn kinds(&self) -> &[u32] {
        match self {
            Engine::Cpu(s) => &s.s.kind,
            Engine::Gpu(g) => g.kinds(),
            Engine::Ranks(r) => r.kinds(),
            Engine::Subdomains(g) => g.kinds(),
        }
    }
    /// The whole state in id order (a download on the GPU).
    fn state(&self) -> Result<std::borrow::Cow<'_, SphState>> {
        Ok(match self {
            Engine::Cpu(s) => std::borrow::Cow::Borrowed(&s.s),
            Engine::Gpu(g) => std::borrow::Cow::Owned(g.state()?),
            Engine::Ranks(r) => std::borrow::Cow::Owned(r.state()?),
            Engine::Subdomains(g) => std::borrow::Cow::Owned(g.state()?),
        })
    }
}

/// Writes the kinds into frame `w` and returns where its positions, velocities, densities and
/// pressures go (null where the segment does not reserve the field).
fn frame_targets(w: &mut FrameWriter<'_>, kinds: &[u32]) -> Result<[*mut u8; 4]> {
    w.particle_kinds_mut()?.copy_from_slice(kinds);
    let mut ptr = |k: FieldKind| w.field_ptr_if_reserved(k).unwrap_or(std::ptr::null_mut());
    Ok([
        ptr(FieldKind::Position),
        ptr(FieldKind::Velocity),
        ptr(FieldKind::Density),
        ptr(FieldKind::Pressure),
    ])
}

struct SphRunner {
    sim: Engine,
    /// The box of the particles at the start (the static section's world box).
    world: ([f64; 3], [f64; 3]),
    end_time: f64,
    config_toml: String,
    vtk: Option<(std::path::PathBuf, VtkSeries)>,
    /// The segment's frame fields.
    fields: u32,
    intervals: CaseIntervals,
}

impl SimPort for SphRunner {
    fn step_n(&mut self, n: u64) -> Result<()> {
        for _ in 0..n {
            self.sim.step_within(self.end_time)?;
        }
        if let Engine::Cpu(sim) = &self.sim {
            // (The GPU counts non-finite particles in its corrector and fails the step.)
            let s = &sim.s;
            if let Some(k) =
                (0..s.pos.len()).find(|&k| !s.rho[k].is_finite() || !s.pos[k][0].is_finite())
            {
                bail!(
                    "particle {k} has a non-finite state after step {} (t = {} s): the time step or the case is unstable",
                    s.step,
                    s.time
                );
            }
        }
        Ok(())
    }
    fn preferred_batch(&self) -> u64 {
        1
    }
    fn step_index(&self) -> u64 {
        self.sim.step()
    }
    fn time(&self) -> f64 {
        self.sim.time()
    }
    /// The next step, shortened near the end so that the run lands on the end time (the CFL
    /// step varies, so the run loop's "within half a step of the end" needs the real one).
    fn dt(&self) -> f64 {
        let left = self.end_time - self.sim.time();
        if left > 0.0 {
            self.sim.dt().min(left)
        } else {
            self.sim.dt()
        }
    }
    fn end_time(&self) -> f64 {
        self.end_time
    }
    fn particle_count(&self) -> usize {
        self.sim.len()
    }
    fn id_count(&self) -> usize {
        self.sim.len()
    }
    fn removed(&self) -> (u64, f64) {
        (0, 0.0)
    }
    fn mesh_count(&self) -> usize {
        0
    }
    fn triangle_count(&self) -> usize {
        0
    }
    fn species_count(&self) -> usize {
        2
    }
    fn frame_fields(&self) -> u32 {
        self.fields
    }
    fn case_intervals(&self) -> CaseIntervals {
        self.intervals
    }

    fn static_data(&self) -> StaticData {
        let c = self.sim.c();
        // The boundary's viscosity is the alpha of fluid-boundary pairs.
        let record = |name: &str, method: SpeciesMethod| {
            let alpha = match method {
                SpeciesMethod::SphBoundary => c.alpha_boundary,
                _ => c.alpha,
            };
            let mut params = [0.0; SPECIES_PARAMS];
            params[..3].copy_from_slice(&[c.c0, alpha, c.h]);
            SpeciesRecord {
                name: shm_protocol::static_data::encode_name(name),
                method: method as u32,
                radius: 0.5 * c.dp,
                density: c.rho0,
                params,
                ..SpeciesRecord::default()
            }
        };
        let kind = self.sim.kinds();
        let n = kind.len();
        StaticData {
            config_toml: self.config_toml.clone(),
            species: vec![
                record("fluid", SpeciesMethod::SphFluid),
                record("boundary", SpeciesMethod::SphBoundary),
            ],
            particle_ids: (0..n as u32).collect(),
            particle_species: kind.iter().map(|&k| u32::from(k != KIND_FLUID)).collect(),
            particle_radius: vec![(0.5 * c.dp) as f32; n],
            meshes: Vec::new(),
            world_min: self.world.0,
            world_max: self.world.1,
            cell_size: 2.0 * c.h,
            generation: 0,
        }
    }

    fn body_transforms(&self) -> Vec<BodyTransform> {
        Vec::new()
    }
    fn attach_segment(&mut self, region: &Region) -> Result<()> {
        if let Engine::Gpu(g) = &mut self.sim {
            // SAFETY: the segment stays mapped until release_segment, which the run calls
            // before closing it (a crash ends the process, mapping and registration together).
            unsafe { g.register_host(region.base(), region.len()) }
                .context("registering the segment with the GPU")?;
        }
        Ok(())
    }
    fn release_segment(&mut self) {
        if let Engine::Gpu(g) = &mut self.sim {
            g.release_host();
        }
    }

    fn fill_frame(&mut self, w: &mut FrameWriter<'_>) -> Result<bool> {
        match &mut self.sim {
            Engine::Cpu(sim) => {
                let s = &sim.s;
                let has = |k: FieldKind| self.fields & k.bit() != 0;
                let f3 = |v: &[f64; 3]| v.map(|c| c as f32);
                w.write_vec3(
                    FieldKind::Position,
                    &s.pos.iter().map(f3).collect::<Vec<_>>(),
                )?;
                if has(FieldKind::Velocity) {
                    w.write_vec3(
                        FieldKind::Velocity,
                        &s.vel.iter().map(f3).collect::<Vec<_>>(),
                    )?;
                }
                if has(FieldKind::Density) {
                    let rho: Vec<f32> = s.rho.iter().map(|&r| r as f32).collect();
                    w.scalar_mut(FieldKind::Density)?.copy_from_slice(&rho);
                }
                if has(FieldKind::Pressure) {
                    let p: Vec<f32> = (0..s.pos.len()).map(|k| sim.pressure(k) as f32).collect();
                    w.scalar_mut(FieldKind::Pressure)?.copy_from_slice(&p);
                }
            }
            Engine::Gpu(g) => {
                let targets = frame_targets(w, g.kinds())?;
                // Packed on the device in id order and copied straight into the frame slot
                // (the registered segment) on the copy stream while the steps go on.
                // SAFETY: the frame slot holds one element per particle of each reserved
                // field and is committed (made visible, then reused) only after frame_copied
                // or wait_frame_copy said the copy completed.
                unsafe { g.publish_async(targets) }?;
                return Ok(true);
            }
            Engine::Ranks(r) => {
                let targets = frame_targets(w, r.kinds())?;
                // Rank 0 places its own part now and the others' as they arrive.
                // SAFETY: as above.
                unsafe { r.publish(targets) };
                return Ok(true);
            }
            Engine::Subdomains(g) => {
                let targets = frame_targets(w, g.kinds())?;
                // Sub-domain 0 places its own part now and the others' as they arrive.
                // SAFETY: as above.
                unsafe { g.publish(targets) }?;
                return Ok(true);
            }
        }
        // The segment's particle_kind numbers are the setup's (1 fluid, 2 boundary).
        w.particle_kinds_mut()?.copy_from_slice(self.sim.kinds());
        Ok(false)
    }
    fn frame_copied(&mut self) -> Result<bool> {
        match &mut self.sim {
            Engine::Cpu(_) => Ok(true),
            Engine::Gpu(g) => Ok(g.publish_done()?),
            Engine::Ranks(r) => Ok(r.publish_done()),
            Engine::Subdomains(g) => Ok(g.publish_done()?),
        }
    }
    fn wait_frame_copy(&mut self) -> Result<()> {
        match &mut self.sim {
            Engine::Cpu(_) => {}
            Engine::Gpu(g) => g.publish_wait()?,
            Engine::Ranks(r) => r.publish_wait(),
            Engine::Subdomains(g) => g.publish_wait()?,
        }
        Ok(())
    }
    fn save_checkpoint(&self, path: &Path) -> Result<()> {
        let state = self.sim.state()?.into_owned();
        Ok(solver::sph::checkpoint::save_state(
            path,
            &self.config_toml,
            state,
            self.sim.dt(),
        )?)
    }
    /// VTK: velocity, density, pressure, kind (1 fluid, 2 boundary) and id per particle.
    fn write_output(&mut self, dir: &Path, _index: u64) -> Result<()> {
        if self.vtk.as_ref().is_none_or(|(d, _)| d != dir) {
            self.vtk = Some((dir.to_path_buf(), VtkSeries::new(dir, "sph")?));
        }
        let state = self.sim.state()?;
        let s = state.as_ref();
        let c = self.sim.c();
        let n = s.pos.len();
        let pressure = |k: usize| physics::tait_pressure(s.rho[k], c.rho0, c.b) as f32;
        let particles = VtkParticles {
            positions: s.pos.iter().map(|v| v.map(|c| c as f32)).collect(),
            arrays: vec![
                (
                    "pressure",
                    PointArray::F32((0..n).map(pressure).collect(), 1),
                ),
                (
                    "velocity",
                    PointArray::F32(s.vel.iter().flatten().map(|&c| c as f32).collect(), 3),
                ),
                (
                    "density",
                    PointArray::F32(s.rho.iter().map(|&r| r as f32).collect(), 1),
                ),
                ("kind", PointArray::U32(s.kind.clone())),
                ("id", PointArray::U32((0..n as u32).collect())),
            ],
        };
        if let Some((_, series)) = &mut self.vtk {
            series.write_particles(s.step, s.time, &particles)?;
        }
        Ok(())
    }
    /// The step; on CPU slabs (sub-domains or MPI ranks) also where they are and how often the
    /// balancing moved them.
    fn stage_summary(&self) -> String {
        let dt = format!("dt {:.3e} s", self.sim.dt());
        let (bounds, axis, moves) = match &self.sim {
            Engine::Subdomains(g) => (g.bounds(), g.axis(), g.rebalances()),
            Engine::Ranks(r) => (r.bounds(), r.axis(), r.rebalances()),
            Engine::Cpu(_) | Engine::Gpu(_) => return dt,
        };
        format!(
            "{dt}, slabs at layers {bounds:?} of {}, moved {moves} time{}",
            ["x", "y", "z"][axis],
            if moves == 1 { "" } else { "s" }
        )
    }
    fn backend_name(&self) -> String {
        match &self.sim {
            Engine::Cpu(_) => "cpu (SPH reference)".into(),
            Engine::Ranks(r) => format!("cpu (SPH reference, {} MPI ranks)", r.ranks()),
            Engine::Subdomains(g) => {
                format!("cpu (SPH reference, {} sub-domains)", g.subdomains())
            }
            Engine::Gpu(g) => format!("cuda (SPH, {})", g.device_name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_run_that_does_not_fit_is_refused_with_what_fits() {
        // 10 M particles on one worker: 6.8 GB; on 3 sub-domains 11.2 GB.
        assert_eq!(cpu_host_bytes(10_000_000, 1), 6_800_000_000);
        assert_eq!(cpu_host_bytes(10_000_000, 3), 11_200_000_000);
        assert_eq!(cpu_host_bytes(u64::MAX, 2), u64::MAX, "saturates");
        let gib = 1u64 << 30;
        assert_eq!(memory_refusal(10_000_000, 6_800_000_000, 8 * gib), None);
        let why = memory_refusal(10_000_000, 6_800_000_000, 4 * gib).expect("refused");
        assert!(why.contains("10000000 particles"), "{why}");
        assert!(why.contains("680 B per particle"), "{why}");
        assert!(why.contains("at most about 6316128 particles fit"), "{why}");
        assert!(why.contains("--spacing"), "{why}");
    }
}
