//! `analysis`: live metrics of a particle-shm run (energies, speeds, centre of mass,
//! coordination number, solid fraction, Lacey mixing index, body torque, outflow and discharge
//! rate; for SPH runs the fluid's energies, fluid mass, surge front, water height at gauges and
//! pressure at probes), as a terminal table, CSV, JSON lines and PNG plots; `--once --json`
//! prints the newest frame's metrics and exits. Runs whose particle set changes (frames with
//! `particle_id`) are analysed particle by id.
//!
//! Exit status: 0 when the run finished (or `--once` succeeded), 1 on an error, 3 when the
//! solver died or failed (output files are kept and complete up to the last frame).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use analysis::follow::{Cadence, End, Run};
use analysis::metrics::sph::fluid::SurgeAxis;
use analysis::metrics::sph::interp::{Gauge, Probe};
use analysis::metrics::{timings_json, Metric, Settings};
use analysis::output::{CsvSink, JsonStdout, JsonlSink, PlotSink, Sink, TableSink};
use analysis::Aabb;
use anyhow::{bail, Context};
use clap::Parser;
use shm_protocol::{Consumer, FrameSource};

#[derive(Parser, Debug)]
// allow_negative_numbers: `--every -1` reaches the option's own check, not clap's "unexpected
// argument '-1' found".
#[command(
    version,
    about = "Live metrics of a particle-shm run",
    allow_negative_numbers = true
)]
struct Cli {
    #[command(flatten)]
    source: forwarder::SourceArgs,
    /// Analyse the newest frame only, print it and exit.
    #[arg(long)]
    once: bool,
    /// Print JSON instead of the table (one object with --once, one line per frame otherwise).
    #[arg(long)]
    json: bool,
    /// Also write one CSV row per analysed frame.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// Also write one JSON object per analysed frame (includes body torques and notes).
    #[arg(long, value_name = "FILE")]
    jsonl: Option<PathBuf>,
    /// Also plot the time series into this PNG, refreshed while the run goes on.
    #[arg(long, value_name = "FILE.png")]
    plot: Option<PathBuf>,
    /// Seconds of wall-clock time between plot refreshes.
    #[arg(long, value_name = "SECONDS", default_value_t = 3.0)]
    plot_every: f64,
    /// Analyse a frame only when this much simulated time passed since the last one [s].
    #[arg(long, value_name = "SECONDS")]
    every: Option<f64>,
    /// Analyse a frame only when this much wall-clock time passed since the last one [ms].
    #[arg(long, value_name = "MS")]
    every_wall: Option<u64>,
    /// Metrics to compute, comma separated (default all that apply to the run): kinetic_energy,
    /// potential_energy, speed, center_of_mass, coordination_number, solid_fraction,
    /// lacey_index, body_torque, particle_count (live particles, the `particles` column, always
    /// present), removed_count and removed_mass [kg] (removed by outflow regions since t = 0),
    /// discharge_rate [kg/s] (removed mass per simulated second since the previous analysed
    /// frame; empty for the first). SPH runs: surge_front [m], water_height [m] (--gauge),
    /// probe_pressure [Pa] (--probe), fluid_mass [kg] (and fluid_particles); there the energies,
    /// speeds and centre of mass are the fluid's, and the granular metrics (coordination,
    /// solid fraction, Lacey, torque) are left out unless named here.
    #[arg(long, value_name = "A,B,...", value_delimiter = ',')]
    metrics: Option<Vec<String>>,
    /// SPH: a water-height gauge on the vertical line through (X, Y) [m]; repeat for more (CSV
    /// columns gauge1_height, ...). The height of the free surface above the tank floor: going
    /// up from the floor, where the fluid fraction sum_j (m/rho_j) W(x - x_j) over the fluid
    /// particles within 2h first falls below 1/2 (DualSPHysics' GaugeSwl); splashes above the
    /// surface are ignored, a dry spot reads 0.
    #[arg(long, value_name = "X,Y", allow_hyphen_values = true)]
    gauge: Vec<Gauge>,
    /// SPH: a pressure probe at (X, Y, Z) [m]; repeat for more (CSV columns probe1_pressure,
    /// ...). Kernel interpolation from the fluid particles within 2h, Shepard-normalised
    /// (sum p_j V_j W / sum V_j W, V_j = m/rho_j, m = rho0 dp^3; divided by at least 1/2, so a
    /// probe in the air reads 0). Place probes about 1.5 h off walls, as DualSPHysics advises:
    /// nearer, all particles lie on one side and the value is that of a point inside the fluid.
    #[arg(long, value_name = "X,Y,Z", allow_hyphen_values = true)]
    probe: Vec<Probe>,
    /// SPH: direction of the surge front: +x, -x, +y, -y, +z or -z. The front is the farthest
    /// fluid particle's coordinate along it plus half the spacing (SPHERIC's dam break runs
    /// along -x).
    #[arg(
        long,
        value_name = "AXIS",
        default_value = "+x",
        allow_hyphen_values = true
    )]
    surge_axis: SurgeAxis,
    /// Solid-fraction region xmin,ymin,zmin,xmax,ymax,zmax [m] (default: lower half of the world box).
    #[arg(long, value_name = "BOX", allow_hyphen_values = true)]
    region: Option<Aabb>,
    /// The two species of the Lacey index, by name or number (default: species 0 and 1).
    #[arg(long, value_name = "A,B")]
    lacey_species: Option<String>,
    /// Edge of the Lacey sample cells [m] (default: 3 mean particle diameters).
    #[arg(long, value_name = "METRES")]
    lacey_cell: Option<f64>,
    /// Lacey region xmin,ymin,zmin,xmax,ymax,zmax [m]: only particles inside count and the sample
    /// cells start at its corner (default: the bounding box of the two species).
    #[arg(long, value_name = "BOX", allow_hyphen_values = true)]
    lacey_region: Option<Aabb>,
    /// Lacey sample cells with fewer particles of the two species are left out.
    #[arg(long, value_name = "N", default_value_t = 10)]
    lacey_min: u32,
    /// Scheduling niceness, 0 (normal) to 19 (lowest): when analysis and a CPU solver share
    /// cores, the solver keeps its speed and the analysis skips frames instead.
    #[arg(long, value_name = "N", default_value_t = 10,
          value_parser = clap::value_parser!(i32).range(0..=19))]
    nice: i32,
    /// Log the time each metric takes per frame (and add `timing_ms` to the JSON). The metrics
    /// that are sums over particles share one pass, timed under their names joined by `+`.
    #[arg(long)]
    timing: bool,
    /// With --once: how long to wait for a first frame [s].
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    timeout: f64,
    /// No terminal table (only files).
    #[arg(long, short)]
    quiet: bool,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let cli = Cli::parse();
    // Before any thread starts: threads inherit the niceness of the thread that creates them.
    lower_priority(cli.nice);
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("analysis: error: {}", shm_protocol::error_report(&e));
            ExitCode::from(1)
        }
    }
}

/// Raises this process's niceness to `nice` (0: leave it).
fn lower_priority(nice: i32) {
    if nice == 0 {
        return;
    }
    // SAFETY: setpriority only reads its integer arguments.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS as _, 0, nice) };
    if rc != 0 {
        tracing::warn!(
            "cannot lower the scheduling priority to nice {nice}: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// A wall-clock duration option, bounded (`shm_protocol::limits`): never a panic on 1e300.
fn positive(v: f64, what: &str) -> anyhow::Result<Duration> {
    shm_protocol::limits::wall_duration(what, v, 0.001).map_err(anyhow::Error::msg)
}

fn settings(cli: &Cli) -> anyhow::Result<Settings> {
    let explicit = cli.metrics.is_some();
    let metrics = match &cli.metrics {
        None => Metric::ALL.to_vec(),
        Some(words) => {
            let mut v = Vec::new();
            for w in words {
                let m = Metric::parse(w).map_err(anyhow::Error::msg)?;
                if !v.contains(&m) {
                    v.push(m);
                }
            }
            v
        }
    };
    if let Some(c) = cli.lacey_cell {
        if !(c.is_finite() && c > 0.0 && c <= 1e6) {
            bail!("--lacey-cell must be a cell size in (0, 1e6] m, got {c:?}");
        }
    }
    // Sites and metrics must agree, so that a typo in either does not go unnoticed.
    for (metric, sites, flag) in [
        (Metric::WaterHeight, cli.gauge.len(), "--gauge X,Y"),
        (Metric::ProbePressure, cli.probe.len(), "--probe X,Y,Z"),
    ] {
        let selected = metrics.contains(&metric);
        if explicit && selected && sites == 0 {
            bail!("--metrics {}: needs at least one {flag}", metric.name());
        }
        if explicit && !selected && sites > 0 {
            bail!(
                "{flag} given but --metrics does not select {}",
                metric.name()
            );
        }
    }
    Ok(Settings {
        metrics,
        region: cli.region,
        lacey_species: None,
        lacey_cell: cli.lacey_cell,
        lacey_region: cli.lacey_region,
        lacey_min_particles: cli.lacey_min,
        explicit,
        gauges: cli.gauge.clone(),
        probes: cli.probe.clone(),
        surge_axis: cli.surge_axis,
    })
}

/// Resolves `--lacey-species` against the run's species names.
fn lacey_pair(run: &mut Run<'_>, words: &str) -> anyhow::Result<(u32, u32)> {
    let data = run
        .source
        .read_static()
        .context("reading species names for --lacey-species")?;
    let ctx = analysis::StaticContext::new(data)?;
    let parts: Vec<&str> = words.split(',').map(str::trim).collect();
    let [a, b] = parts[..] else {
        bail!("--lacey-species expects two species A,B, got {words:?}");
    };
    let find = |w: &str| {
        ctx.species_index(w).with_context(|| {
            format!(
                "--lacey-species: no species {w:?} (species: {})",
                ctx.species_names.join(", ")
            )
        })
    };
    Ok((find(a)?, find(b)?))
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let mut settings = settings(&cli)?;
    let plot_every = positive(cli.plot_every, "--plot-every")?;
    if let Some(e) = cli.every {
        shm_protocol::limits::check_sim_interval("--every", e).map_err(anyhow::Error::msg)?;
    }
    let timeout = positive(cli.timeout, "--timeout")?;
    let mut source: Box<dyn FrameSource> = match cli.source.choice().map_err(anyhow::Error::msg)? {
        forwarder::SourceChoice::Segment(name) => Box::new(
            Consumer::attach(&name)
                .with_context(|| format!("cannot attach to segment {name:?}"))?,
        ),
        forwarder::SourceChoice::Forwarder { addr, token } => {
            // Only what the selected metrics read crosses the network.
            Box::new(forwarder::RemoteSource::connect_fields(
                &addr,
                token,
                settings.fields(),
            )?)
        }
    };
    let mut run = Run::new(source.as_mut());
    if let Some(words) = &cli.lacey_species {
        settings.lacey_species = Some(lacey_pair(&mut run, words)?);
    }

    if cli.once {
        let frame = run.newest(timeout)?;
        let Some((mut m, t)) = run.analyse(&frame, &settings)? else {
            bail!("the newest frame does not match the static data (see the warning above)");
        };
        if cli.timing {
            analysis::follow::log_timings(&m, &t);
            m.timing_ms = Some(timings_json(&t));
        }
        if cli.json {
            println!("{}", serde_json::to_string(&m)?);
        } else {
            TableSink::default().record(&m)?;
        }
        let mut files: Vec<Box<dyn Sink>> = file_sinks(&cli, plot_every)?;
        for s in &mut files {
            s.record(&m)?;
            s.finish()?;
        }
        return Ok(ExitCode::SUCCESS);
    }

    let mut sinks = file_sinks(&cli, plot_every)?;
    if !cli.quiet {
        if cli.json {
            sinks.push(Box::new(JsonStdout));
        } else {
            sinks.push(Box::new(TableSink::default()));
        }
    }
    let cadence = Cadence {
        sim_seconds: cli.every,
        wall: cli.every_wall.map(Duration::from_millis),
    };
    tracing::info!("following {} (Ctrl-C to stop)", run.source.describe());
    let end = run.follow(&settings, cadence, cli.timing, &mut sinks)?;
    Ok(match end {
        End::Finished { status, frames } => {
            tracing::info!(
                "solver finished (frame {}); {frames} frames analysed",
                status.newest_seq
            );
            ExitCode::SUCCESS
        }
        End::Failed { status, frames } => {
            tracing::error!(
                "solver reported failure (pid {}, newest frame {}); {frames} frames analysed, output files kept",
                status.owner_pid,
                status.newest_seq
            );
            ExitCode::from(3)
        }
        End::Died { status, frames } => {
            tracing::error!(
                "solver (pid {}) died while {} (newest frame {}, heartbeat {:.1} s ago); {frames} frames analysed, output files kept",
                status.owner_pid,
                status.state_name(),
                status.newest_seq,
                status.heartbeat_age_s
            );
            ExitCode::from(3)
        }
    })
}

fn file_sinks(cli: &Cli, plot_every: Duration) -> anyhow::Result<Vec<Box<dyn Sink>>> {
    let mut sinks: Vec<Box<dyn Sink>> = Vec::new();
    if let Some(p) = &cli.csv {
        sinks.push(Box::new(CsvSink::create(
            p,
            cli.gauge.len(),
            cli.probe.len(),
        )?));
    }
    if let Some(p) = &cli.jsonl {
        sinks.push(Box::new(JsonlSink::create(p)?));
    }
    if let Some(p) = &cli.plot {
        sinks.push(Box::new(PlotSink::new(p, plot_every)?));
    }
    Ok(sinks)
}
