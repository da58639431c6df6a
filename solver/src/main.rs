//! `solver`: runs a DEM case and publishes it live into a shared-memory segment.

mod app;

use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Parser;
use shm_protocol::{Capacities, CreateOptions, FieldKind, Publisher, SolverState, DEFAULT_FIELDS};

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
    let cli = Cli::parse();
    match real_main(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("solver: error: {}", shm_protocol::error_report(&e));
            ExitCode::FAILURE
        }
    }
}

/// Checks the command line before anything is created.
fn check_cli(cli: &Cli) -> Result<()> {
    if let Some(r) = cli.refresh {
        if !(r.is_finite() && r > 0.0) {
            bail!("--refresh must be a positive number of simulated seconds, got {r}");
        }
    }
    for (flag, v) in [
        ("--output-every", cli.output_every),
        ("--checkpoint-every", cli.checkpoint_every),
        ("--end-time", cli.end_time),
        ("--dt", cli.dt),
    ] {
        if let Some(v) = v {
            if !(v.is_finite() && v > 0.0) {
                bail!("{flag} must be a positive number of seconds, got {v}");
            }
        }
    }
    if cli.particles == Some(0) {
        bail!("--particles must be at least 1");
    }
    if (cli.output_every.is_some() || cli.checkpoint_every.is_some()) && cli.output.is_none() {
        bail!("--output-every and --checkpoint-every need --output DIR");
    }
    if cli.threads == Some(0) {
        bail!("--threads must be at least 1");
    }
    if !(cli.progress_every.is_finite() && cli.progress_every > 0.0) {
        bail!("--progress-every must be positive");
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Cpu,
    Cuda,
}

fn pick_backend(choice: BackendChoice) -> Result<Backend> {
    match choice {
        BackendChoice::Cpu => Ok(Backend::Cpu),
        BackendChoice::Cuda => match app::gpu::cuda_driver_available() {
            Ok(()) if app::sim::CUDA_AVAILABLE => Ok(Backend::Cuda),
            Ok(()) => {
                bail!("--backend cuda: this build has no CUDA backend yet; use --backend cpu")
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
            Err(why) => {
                tracing::info!("{why}: running on the CPU backend");
                Ok(Backend::Cpu)
            }
        },
    }
}

fn capacities(sim: &dyn SimPort) -> Capacities {
    let mut caps = Capacities::for_particles(sim.particle_count().max(1) as u64);
    caps.max_bodies = sim.mesh_count() as u32;
    caps.max_triangles = sim.triangle_count() as u64;
    caps.max_species = (sim.species_count() as u32).max(1);
    caps.fields = DEFAULT_FIELDS | FieldKind::Force.bit() | FieldKind::ContactCount.bit();
    caps
}

fn real_main(cli: Cli) -> Result<()> {
    check_cli(&cli)?;
    let backend = pick_backend(cli.backend)?;
    if let Some(n) = cli.threads {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build_global()
            .context("setting up the CPU thread pool")?;
    }

    // Build the simulation first: a bad case must not leave a segment behind.
    let (mut sim, mut publisher) = if let Some(name) = &cli.load_shm {
        let publisher = Publisher::take_over(name)?;
        let stat = publisher
            .read_static()
            .with_context(|| format!("segment {name:?} has no static data to resume from"))?;
        let frame = publisher
            .read_newest()
            .with_context(|| format!("reading the last frame of {name:?}"))?
            .with_context(|| format!("segment {name:?} has no complete frame to resume from"))?;
        tracing::warn!(
            "resuming {name:?} from frame {} (step {}, t = {:.6} s): positions at frame precision (f32), \
             contact history restarts from zero; use --restart with a checkpoint for an exact continuation",
            frame.meta.seq, frame.meta.step, frame.meta.sim_time
        );
        let sim = app::sim::resume_from_frame(&stat, &frame, backend, &cli)?;
        (sim, publisher)
    } else {
        let sim = match &cli.restart {
            Some(path) => app::sim::restore(path, backend, &cli)?,
            None => app::sim::build(cli.case.as_deref(), backend, &cli)?,
        };
        let name = cli.segment_name();
        let publisher = match name {
            Some(name) => {
                let p = Publisher::create(
                    &name,
                    capacities(sim.as_ref()),
                    CreateOptions {
                        group_access: cli.group_access,
                    },
                )?;
                eprintln!("solver: publishing into shared-memory segment {name:?} (attach with `viewer --attach {name}`)");
                p
            }
            None => {
                let name = format!("particle-shm-{}", std::process::id());
                let p = Publisher::create(
                    &name,
                    capacities(sim.as_ref()),
                    CreateOptions {
                        group_access: cli.group_access,
                    },
                )?;
                eprintln!("solver: no --name-shm given; publishing into {name:?}");
                p
            }
        };
        (sim, publisher)
    };
    publisher.write_static(&sim.static_data())?;
    sim.attach_segment(publisher.region())?;
    tracing::info!(
        "{} particles, {} meshes, dt = {:.3e} s, end time {} s, backend {}",
        sim.particle_count(),
        sim.mesh_count(),
        sim.dt(),
        sim.end_time(),
        sim.backend_name()
    );

    let interrupted = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, interrupted.clone())
            .context("installing signal handlers")?;
    }
    let refresh = cli
        .refresh
        .unwrap_or_else(|| (sim.end_time() / 100.0).clamp(sim.dt(), 0.01));
    let settings = RunSettings {
        refresh_sim: refresh,
        refresh_wall_ms: cli.refresh_wall_ms,
        output: cli.output.clone(),
        output_every: cli.output_every,
        checkpoint_every: cli.checkpoint_every,
        progress_every: Duration::from_secs_f64(cli.progress_every),
        interrupted,
    };
    let outcome = run(sim.as_mut(), &publisher, &settings);
    sim.release_segment();
    match outcome {
        Ok(ending) => {
            if ending == Ending::Stopped {
                tracing::info!("stopped on request");
            }
            let name = publisher.name().to_string();
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
                "run failed; segment {:?} kept with its last frame",
                publisher.name()
            )))
        }
    }
}
