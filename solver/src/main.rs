//! `solver`: runs a DEM case and publishes it live into a shared-memory segment.

mod app;

use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{CommandFactory, FromArgMatches};
use shm_protocol::{
    Capacities, Consumer, CreateOptions, Frame, Publisher, SolverState, StaticData,
};

use app::cli::{BackendChoice, Cli};
use app::port::SimPort;
use app::run::{run, Ending, RunSettings};

fn main() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .init();
    let matches = Cli::command().get_matches();
    let mut cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    cli.devices_given =
        matches.value_source("devices") == Some(clap::parser::ValueSource::CommandLine);
    if let Err(e) = app::ranks::init() {
        eprintln!("solver: error: {}", shm_protocol::error_report(&e));
        return ExitCode::FAILURE;
    }
    let ranks = app::ranks::current();
    let result = match &ranks {
        Some(r) if !r.comm.is_root() => follow(r.clone(), &cli),
        _ => real_main(cli),
    };
    let code = match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let rank = match &ranks {
                Some(r) => format!(" (MPI rank {})", r.comm.rank()),
                None => String::new(),
            };
            eprintln!("solver{rank}: error: {}", shm_protocol::error_report(&e));
            if let Some(r) = &ranks {
                // Rank 0 failed before the others got a start state: release them.
                r.cancel_start();
            }
            ExitCode::FAILURE
        }
    };
    drop(ranks);
    app::ranks::finalize();
    code
}

/// A rank other than 0: rank 0 decides when to stop (a signal that reaches every rank, as
/// from the launcher, is handled by rank 0's clean stop), so signals only get noted here.
fn follow(ranks: solver::exec::sim::RankSet, cli: &Cli) -> Result<()> {
    set_up_process(cli)?;
    let cuda = match app::sim::backend_kind(pick_backend(cli)?, cli)? {
        solver::exec::sim::BackendKind::CudaRanks(opts, _) => Some(opts),
        _ => None,
    };
    app::ranks::follow(ranks, cuda, cli)
}

/// The CPU thread pool (`--threads`), and SIGINT/SIGTERM noted in the returned flag (the run
/// loop stops cleanly when it is set).
fn set_up_process(cli: &Cli) -> Result<Arc<AtomicBool>> {
    if let Some(n) = cli.threads {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build_global()
            .context("setting up the CPU thread pool")?;
    }
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, flag.clone()).context("installing signal handlers")?;
    }
    Ok(flag)
}

/// Most CPU threads accepted: more than this many per core only adds switching.
const THREADS_PER_CORE_MAX: usize = 4;

/// Checks the command line before anything is created. Every number has a range; intervals
/// are checked again against the time step once the case is known ([`output_intervals`]).
fn check_cli(cli: &Cli) -> Result<()> {
    use shm_protocol::limits;
    let err = |e: String| anyhow::anyhow!(e);
    for (flag, v) in [
        ("--refresh", cli.refresh),
        ("--output-every", cli.output_every),
        ("--checkpoint-every", cli.checkpoint_every),
        ("--end-time", cli.end_time),
    ] {
        if let Some(v) = v {
            limits::check_sim_interval(flag, v).map_err(err)?;
        }
    }
    if let Some(dt) = cli.dt {
        if !(dt.is_finite() && dt > 0.0) {
            bail!("--dt must be a positive number of seconds, got {dt}");
        }
    }
    if let Some(dp) = cli.spacing {
        if !(dp.is_finite() && dp > 0.0) {
            bail!("--spacing must be a positive number of metres, got {dp}");
        }
    }
    limits::check_wall_interval_ms("--refresh-wall-ms", cli.refresh_wall_ms).map_err(err)?;
    limits::wall_duration("--progress-every", cli.progress_every, 0.05).map_err(err)?;
    if cli.particles == Some(0) {
        bail!("--particles must be at least 1");
    }
    if cli.load_shm.is_some() && cli.fields.is_some() {
        bail!("--load-shm keeps the fields the segment was made with; --fields does not apply");
    }
    if (cli.output_every.is_some() || cli.checkpoint_every.is_some()) && cli.output.is_none() {
        bail!("--output-every and --checkpoint-every need --output DIR");
    }
    if let Some(n) = cli.threads {
        let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
        let max = THREADS_PER_CORE_MAX * cores;
        if n == 0 || n > max {
            bail!("--threads must be between 1 and {max} ({THREADS_PER_CORE_MAX} per core on this machine's {cores}), got {n}");
        }
    }
    if let Some(dir) = &cli.output {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create output directory {}", dir.display()))?;
        let probe = dir.join(".solver-write-test");
        std::fs::write(&probe, b"")
            .with_context(|| format!("output directory {} is not writable", dir.display()))?;
        let _ = std::fs::remove_file(probe);
    }
    Ok(())
}

/// The run's VTK and checkpoint intervals: the command line's, else the case's `[output]`
/// table's. They and `--refresh` are checked against the case's time step, each named as the
/// user gave it. Files need `--output DIR`: without it a case's intervals write nothing (and are
/// not checked), which the log says; the flags themselves need it ([`check_cli`]).
fn output_intervals(cli: &Cli, sim: &dyn SimPort) -> Result<(Option<f64>, Option<f64>)> {
    let case = sim.case_intervals();
    let pick = |flag: &'static str, given: Option<f64>, key: &'static str, in_case: Option<f64>| {
        given.map(|v| (flag, v)).or(in_case.map(|v| (key, v)))
    };
    let vtk = pick(
        "--output-every",
        cli.output_every,
        "output.vtk_interval",
        case.vtk,
    );
    let checkpoint = pick(
        "--checkpoint-every",
        cli.checkpoint_every,
        "output.checkpoint_interval",
        case.checkpoint,
    );
    let dt = sim.dt();
    let check = |name: &str, v: f64| {
        app::control::check_interval(name, v, dt).map_err(|e| anyhow::anyhow!(e))
    };
    if let Some(v) = cli.refresh {
        check("--refresh", v)?;
    }
    for (name, v) in [vtk, checkpoint].into_iter().flatten() {
        if name.starts_with("--") {
            check(name, v)?;
        } else if cli.output.is_some() {
            check(&format!("the case's {name}"), v)?;
        } else {
            tracing::info!(
                "the case's {name} = {v} s writes nothing without --output DIR (where the files go)"
            );
        }
    }
    Ok((vtk.map(|(_, v)| v), checkpoint.map(|(_, v)| v)))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Cpu,
    Cuda,
}

fn pick_backend(cli: &Cli) -> Result<Backend> {
    let ranks = app::ranks::current().map(|r| r.comm.size());
    // GPUs named with `--devices` under `--backend auto`: on ranks they ask for GPU ranks, as
    // `--backend cuda` does (every rank reads the same command line, so all agree).
    let named = cli.devices_given && cli.backend == BackendChoice::Auto;
    let choice = if named && ranks.is_some() {
        BackendChoice::Cuda
    } else {
        cli.backend
    };
    if let (Some(n), BackendChoice::Auto) = (ranks, choice) {
        // Not the GPUs by default: every rank would have to agree, and ranks that outnumber a
        // host's GPUs would share them.
        tracing::info!(
            "{n} MPI ranks: running on the CPU backend (--backend cuda: one GPU per rank)"
        );
        return Ok(Backend::Cpu);
    }
    match choice {
        BackendChoice::Cpu => {
            if cli.devices_given {
                tracing::warn!("--devices names GPUs: the CPU backend ignores it");
            }
            Ok(Backend::Cpu)
        }
        BackendChoice::Cuda => match app::gpu::cuda_driver_available() {
            Ok(()) if app::sim::CUDA_AVAILABLE => {
                if let Some(n) = ranks {
                    tracing::info!("{n} MPI ranks: one GPU each");
                }
                Ok(Backend::Cuda)
            }
            Ok(()) => {
                bail!("--backend cuda: this build has no CUDA backend yet; use --backend cpu")
            }
            Err(why) if ranks.is_some() && named => bail!(
                "--devices names GPUs for the MPI ranks, but {why}; leave --devices out (or \
                 give --backend cpu) to run on CPU ranks"
            ),
            Err(why) if ranks.is_some() => {
                bail!("--backend cuda over MPI ranks: {why}; use --backend cpu")
            }
            Err(why) => bail!("--backend cuda: {why}; use --backend cpu or auto"),
        },
        BackendChoice::Auto => match app::gpu::cuda_driver_available() {
            Ok(()) if app::sim::CUDA_AVAILABLE => Ok(Backend::Cuda),
            Ok(()) => {
                tracing::warn!(
                    "GPU driver found but this build has no CUDA backend: running on the CPU"
                );
                Ok(Backend::Cpu)
            }
            // Named GPUs are a request for them: a run that would take hours on the CPU
            // instead stops here.
            Err(why) if named => bail!(
                "--devices names GPUs, but {why}; leave --devices out (or give --backend cpu) \
                 to run on the CPU"
            ),
            Err(why) => {
                tracing::info!("{why}: running on the CPU backend");
                Ok(Backend::Cpu)
            }
        },
    }
}

/// Segment capacities for `sim` and its static data (the configuration text sized from the
/// case itself: a case with thousands of inline triangles has a long one).
fn capacities(sim: &dyn SimPort, stat: &StaticData) -> Capacities {
    let mut caps = Capacities::for_particles(sim.id_count().max(1) as u64);
    caps.max_bodies = sim.mesh_count() as u32;
    caps.max_triangles = sim.triangle_count() as u64;
    caps.max_species = (sim.species_count() as u32).max(1);
    caps.fields = sim.frame_fields();
    let config = stat.config_toml.len().div_ceil(4096) * 4096;
    caps.config_bytes = u32::try_from(config.max(4096)).unwrap_or(u32::MAX);
    caps
}

/// A dead run's segment: its static data and last frame, read (not yet taken over) so they can
/// be checked before anything changes.
fn read_dead_run(name: &str) -> Result<(StaticData, Frame)> {
    let c = Consumer::attach(name)?;
    let status = c.status();
    if status.alive {
        bail!(
            "segment {name:?} is still owned by a live process (pid {}); cannot take it over",
            status.owner_pid
        );
    }
    let stat = c
        .read_static()
        .with_context(|| format!("segment {name:?} has no static data to resume from"))?;
    let frame = c
        .read_newest()
        .with_context(|| format!("reading the last frame of {name:?}"))?
        .with_context(|| format!("segment {name:?} has no complete frame to resume from"))?;
    Ok((stat, frame))
}

fn real_main(cli: Cli) -> Result<()> {
    check_cli(&cli)?;
    let backend = pick_backend(&cli)?;
    let interrupted = set_up_process(&cli)?;

    // Build and check the simulation first: a bad case or frame must not leave a segment
    // behind or change one.
    // When the segment's creation (or take-over) began: at hundreds of millions of particles
    // creating, filling and page-locking it takes most of a minute.
    let segment_t0;
    let (mut sim, mut publisher, stat, created, intervals) = if let Some(name) = &cli.load_shm {
        let (stat, frame) = read_dead_run(name)?;
        let sim = app::sim::resume_from_frame(name, &stat, &frame, backend, &cli)?;
        let intervals = output_intervals(&cli, sim.as_ref())?;
        segment_t0 = std::time::Instant::now();
        let publisher = Publisher::take_over(name)?;
        if publisher.read_newest()?.map(|f| f.meta.seq) != Some(frame.meta.seq) {
            bail!("segment {name:?} changed while it was being resumed; try again");
        }
        tracing::warn!(
            "resuming {name:?} from frame {} (step {}, t = {:.6} s): the state at frame precision (f32) \
             (DEM: contact history restarts from zero); use --restart with a checkpoint for an exact continuation",
            frame.meta.seq, frame.meta.step, frame.meta.sim_time
        );
        let stat = sim.static_data();
        (sim, publisher, stat, false, intervals)
    } else {
        let sim = match &cli.restart {
            Some(path) => app::sim::restore(path, backend, &cli)?,
            None => app::sim::build(cli.case.as_deref(), backend, &cli)?,
        };
        let intervals = output_intervals(&cli, sim.as_ref())?;
        let given = cli.segment_name();
        let name = given
            .clone()
            .unwrap_or_else(|| format!("particle-shm-{}", std::process::id()));
        let stat = sim.static_data();
        segment_t0 = std::time::Instant::now();
        let publisher = Publisher::create(
            &name,
            capacities(sim.as_ref(), &stat),
            CreateOptions {
                group_access: cli.group_access,
            },
        )?;
        // Its size: at hundreds of millions of particles the frame slots take tens of GB of
        // the machine's memory.
        let size = solver::case::human_bytes(publisher.region().len() as u64);
        if given.is_some() {
            eprintln!(
                "solver: publishing into shared-memory segment {name:?} ({size}; attach with \
                 `viewer --attach {name}`)"
            );
        } else {
            eprintln!("solver: no --name-shm given; publishing into {name:?} ({size})");
        }
        (sim, publisher, stat, true, intervals)
    };
    let prepared = (|| -> Result<()> {
        // Built once: at millions of particles the id, species and radius arrays cost time.
        publisher.write_static(&stat)?;
        sim.attach_segment(publisher.region())?;
        Ok(())
    })();
    let preparing = segment_t0.elapsed().as_secs_f64();
    if prepared.is_ok() && preparing >= 1.0 {
        // At hundreds of millions of particles: tens of GB of pages written, and on a GPU
        // page-locked for its frame copies (a silent minute at 318 M particles before this).
        tracing::info!(
            "segment ready in {preparing:.1} s (created, its static data written{})",
            if backend == Backend::Cuda {
                ", its pages locked for the GPU's frame copies"
            } else {
                ""
            }
        );
    }
    drop(stat);
    if let Err(e) = prepared {
        // Nothing was published: a segment this run created goes with it.
        if created {
            let _ = publisher.close(SolverState::Failed, false);
        }
        return Err(e);
    }
    tracing::info!(
        "{} particles, {} meshes, dt = {:.3e} s, end time {} s, backend {}",
        sim.particle_count(),
        sim.mesh_count(),
        sim.dt(),
        sim.end_time(),
        sim.backend_name()
    );

    let (output_every, checkpoint_every) = intervals;
    let refresh = cli
        .refresh
        .unwrap_or_else(|| (sim.end_time() / 100.0).clamp(sim.dt(), 0.01));
    let settings = RunSettings {
        refresh_sim: refresh,
        refresh_wall_ms: cli.refresh_wall_ms,
        output: cli.output.clone(),
        output_every,
        checkpoint_every,
        progress_every: Duration::from_secs_f64(cli.progress_every),
        interrupted,
    };
    let outcome = run(sim.as_mut(), &publisher, &settings);
    sim.release_segment();
    let name = publisher.name().to_string();
    match outcome {
        Ok(Ending::SegmentLost(why)) => {
            // Its data is gone and nobody can use it: remove the object rather than leave it.
            let _ = publisher.close(SolverState::Failed, false);
            bail!("segment {name:?}: {why}");
        }
        Ok(ending) => {
            sim.finish();
            if ending == Ending::Stopped {
                tracing::info!("stopped on request");
            }
            publisher
                .close(SolverState::Finished, cli.keep_shm)
                .with_context(|| format!("removing segment {name:?}"))?;
            if cli.keep_shm {
                eprintln!("solver: segment {name:?} kept (remove with `shmctl clean` once stale)");
            }
            Ok(())
        }
        Err(e) => {
            publisher.set_state(SolverState::Failed);
            Err(e.context(format!(
                "run failed; segment {name:?} kept with its last frame"
            )))
        }
    }
}
