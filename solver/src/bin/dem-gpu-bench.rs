//! `dem-gpu-bench`: correctness checks and benchmarks of the CUDA backend (issue 4), run on the
//! GPU machine by `bench/gpu/run.sh`. Each command prints a human line and appends one JSON
//! record per measurement to `--out` (JSON lines), which the script gathers into
//! `bench/results/dem_gpu.json`.
//!
//! Commands: smoke, parity, determinism, restitution, bench, case, multi, scale, full, publish,
//! bandwidth.

use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use solver::bench_cases::{self, BenchModel};
use solver::case::Case;
use solver::decomp::Decomposition;
use solver::dem::cuda::{self, CudaOptions, CudaSim};
use solver::dem::physics;
use solver::dem::state::SimState;
use solver::exec::coordinator::Coordinator;

struct Args {
    cmd: String,
    particles: usize,
    steps: u64,
    warmup: u64,
    relax: u64,
    model: String,
    phase: String,
    /// `--ids cells|raster|random`: the order of a dense pack's particles, wherever a dense
    /// pack is made (bench_cases::IdOrder; default cells).
    ids: bench_cases::IdOrder,
    out: Option<String>,
    device: usize,
    seconds: f64,
    hist_layout: cuda::HistLayout,
    /// `--history auto|double|in-place|pairs` (frictional contact history, CudaOptions::history).
    history: cuda::HistoryMode,
    /// `--hist-cap N`: history entries per particle row (CudaOptions::hist_cap; default 16).
    hist_cap: u32,
    /// `--hist-spill E`: entries of a spill row behind pairs-once rows (CudaOptions::hist_spill;
    /// default 0, none).
    hist_spill: u32,
    /// `--owner positions|ids`: who keeps a pair's spring in pairs-once rows with spill rows and
    /// one state copy (CudaOptions::owner_keys; default positions).
    owner_keys: bool,
    /// `--copies auto|2|1|fewest`: copies of the particle state (CudaOptions::state_copies).
    copies: cuda::StateCopies,
    candidates: u32,
    min_blocks: u32,
    /// `multi`: the GPUs of the group (the same one twice: two slabs on one GPU).
    devices: Vec<usize>,
    /// `--devices` was given (`publish` then measures the group).
    devices_given: bool,
    /// `multi`: one group run per entry (`--balance off,time`).
    balance: Vec<solver::decomp::Balance>,
    /// `multi`, `publish`: the group's split axis (default: the longest).
    axis: Option<solver::decomp::Axis>,
    /// `multi --weak on`: `--particles` per GPU (one GPU runs that many, the group that many
    /// times its GPUs, each relaxed on its own); otherwise the same case on both.
    weak: bool,
    /// Replay each step as a CUDA graph (`--graphs on|off`).
    graphs: bool,
    /// `case`: the case file.
    case: Option<String>,
    /// `case --batch N`: steps per call, each call followed by the diagnostics check (a
    /// synchronisation), as the solver's run loop does per batch; 0: 1,000 a call, unchecked.
    /// `publish --batch N`: steps between two looks at the frame (0: 10).
    batch: u64,
    /// `--store-forces on`: forces and contact counts stored (on the last step of each call
    /// of `steps`), as the solver's backend does (for frames and snapshots).
    store_forces: bool,
    /// `--skin F|auto`: the Verlet skin of one GPU's search as a fraction of the diameter (0: a
    /// search every step).
    skin: f64,
    /// `--list on|off`: the skin's Verlet list.
    list: bool,
    /// `--list-walk buffered|direct|warp`: how the collide walks the Verlet list.
    list_walk: u32,
    /// `--overlap on|off|auto`: a group refreshes its ghosts beside the interior collide (auto:
    /// where every slab has a GPU of its own).
    overlap: Option<bool>,
    /// `scale --sets 0:0,1:0,1,2,3`: the GPU sets to run in turn, the first that fits the
    /// baseline of the efficiencies.
    sets: Vec<Vec<usize>>,
    /// `--frame-pack next|now|both`: one GPU packs a frame's kinematics in the next step's
    /// collide (next, the default) or at once with `dem_pack` (CudaOptions::defer_frames);
    /// `publish` measures each entry in turn (both: now, next, now, next, in one process).
    frame_pack: Vec<bool>,
    /// `--contacts on|off`: `publish` frames carry contact counts too, as the solver's default
    /// frame does (off: the kinematics only, as measured up to session 44).
    contacts: bool,
}

/// The position, velocity and angular velocity arrays of a frame slot being written, and its
/// contact counts with `--contacts on` (null: not published).
fn frame_slots(
    w: &mut shm_protocol::FrameWriter<'_>,
    a: &Args,
) -> Result<([*mut [f32; 3]; 3], *mut u32)> {
    use shm_protocol::FieldKind;
    let contacts = if a.contacts {
        w.field_ptr(FieldKind::ContactCount)? as *mut u32
    } else {
        std::ptr::null_mut()
    };
    Ok((
        [
            w.field_ptr(FieldKind::Position)? as *mut [f32; 3],
            w.field_ptr(FieldKind::Velocity)? as *mut [f32; 3],
            w.field_ptr(FieldKind::AngularVelocity)? as *mut [f32; 3],
        ],
        contacts,
    ))
}

/// The value of an `on|off` option.
fn on_off(flag: &str, v: &str) -> Result<bool> {
    match v {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => bail!("{flag} takes on or off, not {v}"),
    }
}

/// The commands `main` dispatches, checked before the GPU is probed.
const COMMANDS: [&str; 12] = [
    "smoke",
    "compile",
    "parity",
    "determinism",
    "restitution",
    "bench",
    "case",
    "multi",
    "scale",
    "full",
    "publish",
    "bandwidth",
];

const USAGE: &str = "usage: dem-gpu-bench <smoke|compile|parity|determinism|restitution|bench|case|multi|scale|full|publish|bandwidth> [--particles N] [--steps S] [--warmup W] [--seconds T (publish)] [--device D] [--model linear|linear-friction|hertz] [--phase loose|dense] [--relax S] [--hist-layout slot|row] [--history auto|double|in-place|pairs] [--hist-cap N] [--hist-spill E] [--owner positions|ids] [--ids cells|raster|random] [--copies auto|2|1|fewest] [--candidates N] [--min-blocks B] [--devices 0,1] [--balance off,count,time] [--axis x|y|z] [--weak on|off] [--sets 0:0,1:0,1,2,3] [--graphs on|off] [--case FILE] [--batch N] [--store-forces on|off] [--skin F|auto] [--list on|off] [--list-walk buffered|direct|warp] [--overlap on|off|auto] [--frame-pack next|now|both] [--contacts on|off] [--out FILE]";

fn parse() -> Result<Args> {
    let mut it = std::env::args().skip(1);
    let cmd = it.next().context(USAGE)?;
    if matches!(cmd.as_str(), "-h" | "--help" | "help") {
        println!("{USAGE}");
        std::process::exit(0);
    }
    if !COMMANDS.contains(&cmd.as_str()) {
        bail!("unknown command {cmd}\n{USAGE}");
    }
    let mut a = Args {
        cmd,
        particles: 1_000_000,
        steps: 1000,
        warmup: 20,
        relax: 2000,
        model: "linear".into(),
        phase: "loose".into(),
        ids: bench_cases::IdOrder::Cells,
        out: None,
        device: 0,
        seconds: 3.0,
        hist_layout: cuda::HistLayout::SlotMajor,
        history: cuda::HistoryMode::Auto,
        hist_cap: solver::dem::state::HISTORY_CAP as u32,
        hist_spill: 0,
        owner_keys: true,
        copies: cuda::StateCopies::Auto,
        candidates: cuda::DEFAULT_CANDIDATES,
        min_blocks: 0,
        devices: vec![0, 1],
        devices_given: false,
        balance: vec![solver::decomp::Balance::Off],
        axis: None,
        weak: false,
        graphs: true,
        batch: 0,
        store_forces: false,
        case: None,
        skin: cuda::SKIN_AUTO,
        list: true,
        list_walk: kernels::LIST_BY_WARP,
        overlap: None,
        sets: vec![vec![0], vec![0, 1]],
        frame_pack: vec![true],
        contacts: false,
    };
    while let Some(k) = it.next() {
        let v = it.next().with_context(|| format!("{k} needs a value"))?;
        match k.as_str() {
            "--particles" => a.particles = v.parse::<f64>()? as usize,
            "--steps" => a.steps = v.parse()?,
            "--warmup" => a.warmup = v.parse()?,
            "--relax" => a.relax = v.parse()?,
            "--model" => a.model = v,
            "--phase" => a.phase = v,
            "--out" => a.out = Some(v),
            "--device" => a.device = v.parse()?,
            "--seconds" => a.seconds = v.parse()?,
            // Kernel variants (issue 13 measurements): history layout, contact buffering,
            // collide launch bounds.
            "--hist-layout" => {
                a.hist_layout = match v.as_str() {
                    "slot" => cuda::HistLayout::SlotMajor,
                    "row" => cuda::HistLayout::RowMajor,
                    _ => bail!("--hist-layout takes slot or row, not {v}"),
                }
            }
            "--history" => {
                a.history = cuda::HistoryMode::parse(&v)
                    .with_context(|| {
                        format!("--history takes auto, double, in-place or pairs, not {v}")
                    })?
            }
            "--hist-cap" => {
                a.hist_cap = v
                    .parse()
                    .ok()
                    .filter(|&c: &u32| (1..=64).contains(&c))
                    .with_context(|| format!("--hist-cap takes 1 to 64 entries, not {v}"))?
            }
            "--ids" => {
                a.ids = bench_cases::IdOrder::parse(&v)
                    .with_context(|| format!("--ids takes cells, raster or random, not {v}"))?
            }
            "--hist-spill" => {
                a.hist_spill = v
                    .parse()
                    .ok()
                    .filter(|&c: &u32| c < kernels::PAIRS_MAX_ROW)
                    .with_context(|| {
                        format!(
                            "--hist-spill takes 0 to {} entries, not {v}",
                            kernels::PAIRS_MAX_ROW - 1
                        )
                    })?
            }
            "--owner" => {
                a.owner_keys = match v.as_str() {
                    "positions" => true,
                    "ids" => false,
                    _ => bail!("--owner takes positions or ids, not {v}"),
                }
            }
            "--copies" => {
                a.copies = cuda::StateCopies::parse(&v)
                    .with_context(|| format!("--copies takes auto, 2, 1 or fewest, not {v}"))?
            }
            "--candidates" => a.candidates = v.parse()?,
            "--min-blocks" => a.min_blocks = v.parse()?,
            "--graphs" => a.graphs = on_off("--graphs", &v)?,
            "--case" => a.case = Some(v),
            "--batch" => a.batch = v.parse()?,
            "--skin" if v == "auto" => a.skin = cuda::SKIN_AUTO,
            "--skin" => a.skin = v.parse()?,
            "--list" => a.list = on_off("--list", &v)?,
            "--list-walk" => {
                a.list_walk = match v.as_str() {
                    "buffered" => kernels::LIST_BUFFERED,
                    "direct" => kernels::LIST_DIRECT,
                    "warp" => kernels::LIST_BY_WARP,
                    _ => bail!("--list-walk: buffered, direct or warp, not {v:?}"),
                }
            }
            "--store-forces" => a.store_forces = on_off("--store-forces", &v)?,
            "--contacts" => a.contacts = on_off("--contacts", &v)?,
            "--frame-pack" => {
                a.frame_pack = match v.as_str() {
                    "next" => vec![true],
                    "now" => vec![false],
                    "both" => vec![false, true, false, true],
                    _ => bail!("--frame-pack takes next, now or both, not {v}"),
                }
            }
            "--overlap" if v == "auto" => a.overlap = None,
            "--overlap" => a.overlap = Some(on_off("--overlap", &v)?),
            "--devices" => {
                a.devices = v
                    .split(',')
                    .map(|d| d.trim().parse::<usize>())
                    .collect::<Result<_, _>>()
                    .with_context(|| format!("--devices {v}: GPU indices like 0,1"))?;
                a.devices_given = true;
                if a.devices.len() < 2 {
                    bail!("--devices: list two GPUs or more (one GPU: --device)");
                }
            }
            "--balance" => {
                a.balance = v
                    .split(',')
                    .map(|b| {
                        <solver::decomp::Balance as clap::ValueEnum>::from_str(b.trim(), true)
                            .map_err(|_| {
                                anyhow::anyhow!(
                                    "--balance takes off, count, time, neighbour or slice (a comma list), not {b}"
                                )
                            })
                    })
                    .collect::<Result<_>>()?
            }
            "--axis" => {
                a.axis = Some(match v.as_str() {
                    "x" => solver::decomp::Axis::X,
                    "y" => solver::decomp::Axis::Y,
                    "z" => solver::decomp::Axis::Z,
                    _ => bail!("--axis takes x, y or z, not {v}"),
                })
            }
            "--weak" => a.weak = on_off("--weak", &v)?,
            "--sets" => {
                a.sets = v
                    .split(':')
                    .map(|set| {
                        set.split(',')
                            .map(|d| d.trim().parse::<usize>())
                            .collect::<Result<Vec<_>, _>>()
                    })
                    .collect::<Result<_, _>>()
                    .with_context(|| {
                        format!("--sets {v}: GPU lists separated by ':', like 0:0,1:0,1,2,3")
                    })?;
                if a.sets.is_empty() || a.sets.iter().any(|s| s.is_empty()) {
                    bail!("--sets {v}: every set names at least one GPU");
                }
            }
            _ => bail!("unknown option {k}"),
        }
    }
    Ok(a)
}

fn command_line() -> String {
    let args = std::env::args()
        .map(|a| a.rsplit('/').next().unwrap_or(&a).to_string())
        .collect::<Vec<_>>()
        .join(" ");
    // Experiments set NVRTC options and the refresh's stream through the environment: part
    // of the command.
    let mut env = String::new();
    for v in ["PARTICLE_SHM_NVRTC_OPTIONS", "PARTICLE_SHM_REFRESH_STREAM"] {
        if let Ok(o) = std::env::var(v) {
            if !o.trim().is_empty() {
                env.push_str(&format!("{v}='{}' ", o.trim()));
            }
        }
    }
    format!("{env}{args}")
}

/// Appends one JSON record (already serialised fields) to --out.
fn record(a: &Args, fields: &[(&str, String)]) -> Result<()> {
    let body = fields
        .iter()
        .map(|(k, v)| format!("\"{k}\": {v}"))
        .collect::<Vec<_>>()
        .join(", ");
    let line = format!("{{{body}, \"command\": {}}}", js(&command_line()));
    println!("RECORD {line}");
    if let Some(p) = &a.out {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)?;
        writeln!(f, "{line}")?;
    }
    Ok(())
}

fn js(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

fn num(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.6e}")
    } else {
        "null".into()
    }
}

fn bench_model(name: &str) -> Result<BenchModel> {
    name.parse().map_err(anyhow::Error::msg)
}

/// The XPS falling box (loose phase: particles falling onto the floor).
fn falling(n: usize, model: &str) -> Result<Case> {
    Ok(bench_cases::falling_box(n, bench_model(model)?))
}

/// Dense phase ([`bench_cases::dense_pack`]): the case (sources empty), the positions and the
/// solid fraction. Relaxed for `--relax` steps before timing.
fn dense(n: usize, model: &str, ids: bench_cases::IdOrder) -> Result<(Case, Vec<[f64; 3]>, f64)> {
    let p = bench_cases::dense_pack_ordered(n, bench_model(model)?, ids);
    Ok((p.case, p.positions, p.solid_fraction))
}

/// The order of a dense pack's particles (`--ids`) as JSON; null for the loose phase.
fn ids_json(a: &Args) -> String {
    if a.phase == "dense" {
        js(a.ids.name())
    } else {
        "null".into()
    }
}

/// The spill rows of a pairs-once history as a JSON object (entries per spill row, rows per
/// buffer, the most rows a step took, and that as a share of the particles), or null.
fn spill_json(sim: &CudaSim) -> Result<String> {
    Ok(match sim.spill_rows()? {
        Some((width, rows, taken)) => format!(
            "{{\"width\": {width}, \"rows\": {rows}, \"most_taken\": {taken}, \"most_taken_share\": {}, \"owner\": {}}}",
            num(taken as f64 / sim.particle_count().max(1) as f64),
            js(if sim.module_config().owner_keys {
                "position"
            } else {
                "id"
            })
        ),
        None => "null".into(),
    })
}

fn opts(a: &Args) -> CudaOptions {
    CudaOptions {
        device: a.device,
        check_every: 5000,
        hist_layout: a.hist_layout,
        history: a.history,
        hist_cap: a.hist_cap,
        hist_spill: a.hist_spill,
        owner_keys: a.owner_keys,
        state_copies: a.copies,
        candidates: a.candidates,
        min_blocks: a.min_blocks,
        graphs: a.graphs,
        store_forces: a.store_forces,
        skin: a.skin,
        neighbour_list: a.list,
        list_walk: a.list_walk,
        overlap: a.overlap,
        defer_frames: a.frame_pack[0],
        ..Default::default()
    }
}

/// The case's particles as placed by its sources, at t = 0.
fn generated_state(case: &Case) -> Result<SimState> {
    let particles = case.generate_particles()?;
    let n = particles.len();
    Ok(SimState::new(
        0.0,
        0,
        particles.iter().map(|p| p.species).collect(),
        particles.iter().map(|p| p.position).collect(),
        particles.iter().map(|p| p.velocity).collect(),
        vec![[0.0; 3]; n],
    ))
}

/// Particles at `pos`, at rest, species 0.
fn rest_state(pos: Vec<[f64; 3]>) -> SimState {
    let n = pos.len();
    SimState::new(
        0.0,
        0,
        vec![0; n],
        pos,
        vec![[0.0; 3]; n],
        vec![[0.0; 3]; n],
    )
}

/// Places the particles and starts the GPU. Field validation is skipped on purpose: the dense
/// pack's lattice spacing is below the diameter (the overlap is the point of it).
fn start(
    case: &Case,
    o: &CudaOptions,
) -> Result<(CudaSim, solver::dem::state::StepContext, SimState)> {
    let state = generated_state(case)?;
    let sc = cuda::step_context(case)?;
    let sim = CudaSim::new(&sc, &state, o)?;
    Ok((sim, sc, state))
}

/// Starts the GPU with explicit positions (at rest, species 0).
fn start_at(
    case: &Case,
    pos: &[[f64; 3]],
    o: &CudaOptions,
) -> Result<(CudaSim, solver::dem::state::StepContext, SimState)> {
    let state = rest_state(pos.to_vec());
    let sc = cuda::step_context(case)?;
    let sim = CudaSim::new(&sc, &state, o)?;
    Ok((sim, sc, state))
}

fn timed_steps(sim: &mut CudaSim, steps: u64) -> Result<f64> {
    sim.synchronize()?;
    let t0 = Instant::now();
    sim.steps(steps)?;
    sim.synchronize()?;
    Ok(t0.elapsed().as_secs_f64())
}

/// NVRTC's time for the DEM module of `--model` (no disk cache): the whole module, each of the
/// two parts the solver compiles side by side, and the two parts on two threads, as the solver
/// does. NVIDIA keeps the machine code of each kernel it compiled under `~/.nv/ComputeCache`
/// and a define the code does not use does not change it: only the first compile of a kernel
/// on a machine (or after that directory is removed) is a real one; the parts that follow the
/// whole module come from that cache (session 14, `raw/session14/fifth/`).
fn compile_times(a: &Args) -> Result<()> {
    let model = bench_model(&a.model)?;
    let friction = model != BenchModel::Linear;
    let cfg = kernels::ModuleConfig {
        model: u32::from(model == BenchModel::Hertz),
        friction,
        rotation: friction,
        double: false,
        meshes: false,
        candidates: cuda::DEFAULT_CANDIDATES,
        min_blocks: 0,
        hist_in_place: false,
        hist_pairs: false,
        list_walk: kernels::LIST_BY_WARP,
        one_species: true,
        stream_hints: false,
        passes: false,
        single_copy: false,
        hist_spill: false,
        owner_keys: false,
    };
    let ctx = cudarc::driver::CudaContext::new(a.device)?;
    let src = kernels::dem_module_source();
    let probe = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let compile = |tag: &str, part: Option<u32>| -> Result<f64> {
        let mut d = cfg.defines();
        d.push(format!("-DDEM_COMPILE_PROBE={probe}{tag}"));
        if let Some(p) = part {
            d.push(format!("-DDEM_MODULE_PART={p}"));
        }
        let (_, t) = cuda::driver::compile_module_in(&ctx, &src, d, false, "DEM", None)?;
        Ok(t.compile_s)
    };
    let whole = compile("0", None)?;
    let step = compile("1", Some(kernels::DEM_PART_STEP))?;
    let energies = compile("2", Some(kernels::DEM_PART_ENERGIES))?;
    let t0 = Instant::now();
    let (x, y) = std::thread::scope(|sc| {
        let e = sc.spawn(|| compile("4", Some(kernels::DEM_PART_ENERGIES)));
        (compile("3", Some(kernels::DEM_PART_STEP)), e.join())
    });
    x?;
    y.map_err(|_| anyhow::anyhow!("compile thread panicked"))??;
    let both = t0.elapsed().as_secs_f64();
    println!(
        "NVRTC, {}: whole module {whole:.2} s; step part {step:.2} s, energies part {energies:.2} s; both parts on two threads {both:.2} s",
        a.model
    );
    record(
        a,
        &[
            ("model", js(&a.model)),
            ("phase", js("compile")),
            ("whole_s", num(whole)),
            ("step_part_s", num(step)),
            ("energies_part_s", num(energies)),
            ("parts_in_parallel_s", num(both)),
        ],
    )
}

fn smoke(a: &Args) -> Result<()> {
    let case = falling(a.particles.min(10_000), "linear-friction")?;
    let (mut sim, _, _) = start(
        &case,
        &CudaOptions {
            profile: true,
            ..opts(a)
        },
    )?;
    println!(
        "device: {}; module {:?}: {}",
        sim.device_name(),
        sim.module_config(),
        sim.module_timing().describe()
    );
    print!("{}", sim.memory().breakdown());
    sim.steps(100)?;
    sim.check_diag()?;
    let s = sim.state()?;
    let zmin = s.pos.iter().map(|p| p[2]).fold(f64::INFINITY, f64::min);
    println!(
        "100 steps: t = {:.4} s, lowest z = {zmin:.5} m; kernels: {}",
        sim.time(),
        sim.stage_times().summary()
    );
    Ok(())
}

struct Diff {
    max_abs: f64,
    max_rel: f64,
    max_vel_rel: f64,
}

fn diff(a: &SimState, b: &SimState) -> Diff {
    let mut d = Diff {
        max_abs: 0.0,
        max_rel: 0.0,
        max_vel_rel: 0.0,
    };
    let vmax = b
        .vel
        .iter()
        .map(|v| solver::core::vec3::norm(*v))
        .fold(0.0, f64::max)
        .max(1e-30);
    for i in 0..a.pos.len() {
        let e = solver::core::vec3::norm(solver::core::vec3::sub(a.pos[i], b.pos[i]));
        d.max_abs = d.max_abs.max(e);
        d.max_rel = d
            .max_rel
            .max(e / solver::core::vec3::norm(b.pos[i]).max(1e-30));
        d.max_vel_rel = d
            .max_vel_rel
            .max(solver::core::vec3::norm(solver::core::vec3::sub(a.vel[i], b.vel[i])) / vmax);
    }
    d
}

/// CPU reference vs GPU (f64 parity mode and f32 production mode) after `--steps` steps, on the
/// default falling box and on the dense pack with friction and rotation.
fn parity(a: &Args) -> Result<()> {
    let cases = [
        (
            "falling-box",
            falling(a.particles, "linear-friction")?,
            None,
        ),
        (
            "dense-linear",
            dense(a.particles, "linear", a.ids)?.0,
            Some(dense(a.particles, "linear", a.ids)?.1),
        ),
        (
            "dense-linear-friction",
            dense(a.particles, "linear-friction", a.ids)?.0,
            Some(dense(a.particles, "linear-friction", a.ids)?.1),
        ),
        (
            "dense-hertz",
            dense(a.particles, "hertz", a.ids)?.0,
            Some(dense(a.particles, "hertz", a.ids)?.1),
        ),
    ];
    for (label, case, pos) in cases {
        let launch = |o: &CudaOptions| match &pos {
            Some(p) => start_at(&case, p, o),
            None => start(&case, o),
        };
        let (mut g64, sc, st) = launch(&CudaOptions {
            double: true,
            ..opts(a)
        })?;
        let (mut g32, _, _) = launch(&opts(a))?;
        let mut cpu = Coordinator::cpu(Arc::new(sc), st, &Decomposition::default())?;
        let t0 = Instant::now();
        cpu.advance(a.steps).map_err(|e| anyhow::anyhow!("{e}"))?;
        let cpu_s = t0.elapsed().as_secs_f64();
        g64.steps(a.steps)?;
        g32.steps(a.steps)?;
        let cpu_state = cpu.export_state().map_err(|e| anyhow::anyhow!("{e}"))?;
        let (c, s64, s32) = (cpu_state, g64.state()?, g32.state()?);
        let d = cpu.snapshot().map_err(|e| anyhow::anyhow!("{e}"))?;
        let contacts = d.contacts.iter().map(|&c| c as f64).sum::<f64>() / d.contacts.len() as f64;
        let r = case.species[0].radius;
        let (d64, d32) = (diff(&s64, &c), diff(&s32, &c));
        let bitwise = s64.pos == c.pos && s64.vel == c.vel && s64.omega == c.omega;
        println!(
            "parity {label}: N = {}, {} steps, mean contacts {contacts:.2} (CPU {cpu_s:.1} s); GPU f64 vs CPU: bit-identical {bitwise}, max |dx| {:.3e} m (rel {:.3e}); GPU f32 vs CPU: max |dx| {:.3e} m = {:.3e} d (rel {:.3e}), max |dv|/max|v| {:.3e}",
            c.pos.len(), a.steps, d64.max_abs, d64.max_rel, d32.max_abs, d32.max_abs / (2.0 * r), d32.max_rel, d32.max_vel_rel
        );
        record(
            a,
            &[
                ("check", js("parity")),
                ("case", js(label)),
                ("particles", c.pos.len().to_string()),
                ("steps", a.steps.to_string()),
                ("mean_contacts", num(contacts)),
                ("f64_bit_identical", bitwise.to_string()),
                ("f64_max_abs_m", num(d64.max_abs)),
                ("f64_max_rel", num(d64.max_rel)),
                ("f32_max_abs_m", num(d32.max_abs)),
                ("f32_max_abs_diameters", num(d32.max_abs / (2.0 * r))),
                ("f32_max_rel", num(d32.max_rel)),
                ("f32_max_vel_rel", num(d32.max_vel_rel)),
            ],
        )?;
    }
    Ok(())
}

fn determinism(a: &Args) -> Result<()> {
    let (case, pos, _) = dense(a.particles, "linear-friction", a.ids)?;
    let mut states = Vec::new();
    for _ in 0..2 {
        let (mut g, _, _) = start_at(&case, &pos, &opts(a))?;
        g.steps(a.steps)?;
        states.push(g.state()?);
    }
    let same = states[0].pos == states[1].pos
        && states[0].vel == states[1].vel
        && states[0].omega == states[1].omega
        && states[0].history == states[1].history;
    println!(
        "determinism: two GPU runs of {} particles x {} steps bit-identical: {same}",
        states[0].pos.len(),
        a.steps
    );
    record(
        a,
        &[
            ("check", js("determinism")),
            ("particles", states[0].pos.len().to_string()),
            ("steps", a.steps.to_string()),
            ("bit_identical", same.to_string()),
        ],
    )
}

/// Normal impacts on the GPU: restitution and contact duration against the damped half-period
/// (linear) for sphere-wall and sphere-sphere, as the CPU validation test does.
fn restitution(a: &Args) -> Result<()> {
    let (k, e, r, rho) = (1e5, 0.5, 0.01, 2500.0);
    let mut case = Case::default_falling_box(1);
    case.gravity = [0.0; 3];
    case.dt = 1e-6;
    for s in &mut case.species {
        s.radius = r;
        s.density = rho;
        s.normal_stiffness = Some(k);
        s.restitution = e;
        s.sliding_friction = 0.0;
        s.rolling_friction = 0.0;
    }
    case.wall_material.normal_stiffness = Some(k);
    case.wall_material.restitution = e;
    case.wall_material.sliding_friction = 0.0;
    case.wall_material.rolling_friction = 0.0;
    let sc = cuda::step_context(&case)?;
    let m = physics::sphere_mass(r, rho);
    for (label, pos, vel, m_eff) in [
        (
            "wall",
            vec![[1.0, 1.0, r + 1e-4]],
            vec![[0.0, 0.0, -1.0]],
            m,
        ),
        (
            "pair",
            vec![[1.0, 1.0, 1.0 - r - 1e-4], [1.0, 1.0, 1.0 + r + 1e-4]],
            vec![[0.0, 0.0, 0.5], [0.0, 0.0, -0.5]],
            0.5 * m,
        ),
    ] {
        let n = pos.len();
        let st = SimState::new(0.0, 0, vec![0; n], pos, vel, vec![[0.0; 3]; n]);
        let mut g = CudaSim::new(
            &sc,
            &st,
            &CudaOptions {
                double: false,
                ..opts(a)
            },
        )?;
        let gap = |s: &SimState| {
            if n == 1 {
                s.pos[0][2] - r
            } else {
                s.pos[1][2] - s.pos[0][2] - 2.0 * r
            }
        };
        let (mut t_in, mut t_out, mut prev) = (None, None, gap(&g.state()?));
        for _ in 0..200_000 {
            g.step()?;
            let s = g.state()?;
            let gp = gap(&s);
            let t = g.time();
            if t_in.is_none() && gp < 0.0 {
                t_in = Some(t - g.dt() * gp / (gp - prev));
            }
            if t_in.is_some() && gp >= 0.0 {
                t_out = Some(t - g.dt() * gp / (gp - prev));
                let v_out = if n == 1 {
                    s.vel[0][2]
                } else {
                    s.vel[1][2] - s.vel[0][2]
                };
                let e_meas = v_out.abs() / 1.0;
                let beta = physics::damping_ratio_from_restitution(e);
                let tc = physics::linear_contact_time(
                    k,
                    physics::linear_damping_coefficient(k, m_eff, beta),
                    m_eff,
                );
                let dur = t_out.unwrap_or(0.0) - t_in.unwrap_or(0.0);
                let ok = (e_meas - e).abs() / e < 0.01 && (dur - tc).abs() / tc < 0.01;
                println!("restitution {label}: e = {e_meas:.4} (want {e}), contact {dur:.4e} s (want {tc:.4e} s): {}", if ok { "PASS" } else { "FAIL" });
                record(
                    a,
                    &[
                        ("check", js("restitution")),
                        ("case", js(label)),
                        ("e", num(e_meas)),
                        ("duration_s", num(dur)),
                        ("expected_duration_s", num(tc)),
                        ("pass", ok.to_string()),
                    ],
                )?;
                break;
            }
            prev = gp;
        }
        if t_out.is_none() {
            bail!("restitution {label}: contact did not end");
        }
    }
    Ok(())
}

/// Bytes the collide kernel must move per particle at least (state read + written, cell starts).
fn collide_bytes(sim: &CudaSim, contacts: f64) -> f64 {
    let cfg = sim.module_config();
    let real = if cfg.double { 8.0 } else { 4.0 };
    let mut b = 2.0 * (24.0 + 3.0 * real + 4.0) + 9.0 * 8.0 / 1.0f64.max(1.0);
    if cfg.rotation || cfg.friction {
        b += 2.0 * 3.0 * real;
    }
    if cfg.friction {
        b += 2.0 * (4.0 + contacts * (4.0 + 3.0 * real));
    }
    b
}

fn bench(a: &Args) -> Result<()> {
    let t_setup = Instant::now();
    let (mut sim, phi, case) = match a.phase.as_str() {
        "dense" => {
            let (case, pos, phi) = dense(a.particles, &a.model, a.ids)?;
            (start_at(&case, &pos, &opts(a))?.0, phi, case)
        }
        _ => {
            let case = falling(a.particles, &a.model)?;
            (start(&case, &opts(a))?.0, 0.0, case)
        }
    };
    let n = sim.particle_count();
    println!(
        "{} {} {}: N = {n}, setup {:.1} s, {:.1} B/particle",
        sim.device_name(),
        a.model,
        a.phase,
        t_setup.elapsed().as_secs_f64(),
        sim.memory().bytes_per_particle()
    );
    if a.phase == "dense" && a.relax > 0 {
        let s = timed_steps(&mut sim, a.relax)?;
        println!("  relaxed {} steps in {s:.1} s", a.relax);
    }
    timed_steps(&mut sim, a.warmup)?;
    let wall = timed_steps(&mut sim, a.steps)?;
    sim.check_diag()?;
    let sps = a.steps as f64 / wall;
    let contacts = sim.count_contacts()?;
    sim.set_profiling(true);
    sim.reset_stage_times();
    sim.steps(20)?;
    sim.set_profiling(false);
    let times = sim.stage_times().clone();
    // Energies on the device (issue 13), against the way they were computed before: the state
    // downloaded and the CPU reference's bookkeeping over it (16 threads on the GPU machine).
    sim.synchronize()?;
    let t = Instant::now();
    let e = sim.energies()?;
    let energies_ms = t.elapsed().as_secs_f64() * 1e3;
    // The download path holds the whole state with its history on the host: not beyond 20 M.
    let energies_host_ms = if n <= 20_000_000 {
        let t = Instant::now();
        let ctx = Arc::new(cuda::step_context(&case)?);
        let on_host = Coordinator::cpu(ctx, sim.state()?, &Decomposition::default())?.energies()?;
        let ms = t.elapsed().as_secs_f64() * 1e3;
        println!(
            "  energies: on the device {energies_ms:.1} ms, by download + CPU {ms:.1} ms; total {:.9e} J vs {:.9e} J",
            e.total(),
            on_host.total()
        );
        ms
    } else {
        println!(
            "  energies: on the device {energies_ms:.1} ms, total {:.9e} J",
            e.total()
        );
        f64::NAN
    };
    let per_step: f64 = times.kernels.iter().map(|k| k.1).sum::<f64>() / times.steps.max(1) as f64;
    let collide_ms = times
        .kernels
        .iter()
        .find(|k| k.0 == "collide")
        .map(|k| k.1 / times.steps.max(1) as f64)
        .unwrap_or(f64::NAN);
    let bw = collide_bytes(&sim, contacts) * n as f64 / (collide_ms * 1e-3) / 1e9;
    println!(
        "  {sps:.1} steps/s, {:.3e} particle-steps/s, mean contacts {contacts:.2}{}; kernels per step: {} (sum {per_step:.3} ms); collide >= {bw:.0} GB/s",
        sps * n as f64,
        if phi > 0.0 { format!(", solid fraction {phi:.3}") } else { String::new() },
        times.summary()
    );
    let kernels = format!(
        "{{{}}}",
        times
            .kernels
            .iter()
            .map(|(k, ms)| format!("{}: {}", js(k), num(ms / times.steps.max(1) as f64)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    record(
        a,
        &[
            ("device", js(sim.device_name())),
            ("model", js(&a.model)),
            ("particles", n.to_string()),
            ("phase", js(&a.phase)),
            ("steps", a.steps.to_string()),
            ("wall_s", num(wall)),
            ("steps_per_s", num(sps)),
            ("particle_steps_per_s", num(sps * n as f64)),
            ("bytes_per_particle", num(sim.memory().bytes_per_particle())),
            ("spill_rows", spill_json(&sim)?),
            ("ids", ids_json(a)),
            ("publish_share", "null".into()),
            ("mean_contacts", num(contacts)),
            (
                "solid_fraction",
                if phi > 0.0 { num(phi) } else { "null".into() },
            ),
            ("kernel_ms_per_step", kernels),
            (
                "collide_min_bytes_per_particle",
                num(collide_bytes(&sim, contacts)),
            ),
            ("collide_gb_per_s", num(bw)),
            ("energies_device_ms", num(energies_ms)),
            ("energies_download_cpu_ms", num(energies_host_ms)),
            ("sim_time_s", num(sim.time())),
            (
                "kernel_variant",
                js(&format!(
                    "{:?} history{}{}{}, candidates {}, min blocks {}, Verlet list {} (walk {}), skin {}",
                    a.hist_layout,
                    if sim.history_pairs() {
                        " pairs-once"
                    } else if sim.history_in_place() {
                        " in place"
                    } else {
                        ""
                    },
                    if sim.module_config().single_copy {
                        ", one state copy"
                    } else {
                        ""
                    },
                    if sim.module_config().hist_spill {
                        format!(
                            ", spill rows of {}, owners by {}",
                            sim.history_rows().1,
                            if sim.module_config().owner_keys {
                                "position"
                            } else {
                                "id"
                            }
                        )
                    } else {
                        String::new()
                    },
                    a.candidates,
                    sim.module_config().collide_min_blocks(),
                    if sim.has_neighbour_list() {
                        "on"
                    } else {
                        "off"
                    },
                    ["buffered", "direct", "warp"]
                        .get(a.list_walk as usize)
                        .unwrap_or(&"?"),
                    sim.skin_summary().unwrap_or_else(|| "off".into())
                )),
            ),
        ],
    )?;
    if a.particles >= 1_000_000 && a.phase == "loose" {
        eprint!("{}", sim.memory().breakdown());
    }
    Ok(())
}

/// The XPS run: 1 s simulated (steps = 1 / dt) of the falling box, timed as a whole.
fn full(a: &Args) -> Result<()> {
    let case = falling(a.particles, &a.model)?;
    let (mut sim, _, _) = start(&case, &opts(a))?;
    let n = sim.particle_count();
    let total = (case.end_time / case.dt).round() as u64;
    let chunk = 10_000u64.min(total);
    sim.synchronize()?;
    let t0 = Instant::now();
    let mut done = 0;
    while done < total {
        let c = chunk.min(total - done);
        sim.steps(c)?;
        sim.synchronize()?;
        done += c;
        println!(
            "  step {done}/{total}: {:.1} s wall, {:.0} steps/s so far",
            t0.elapsed().as_secs_f64(),
            done as f64 / t0.elapsed().as_secs_f64()
        );
        if t0.elapsed().as_secs_f64() > a.seconds {
            println!("  stopping at the --seconds limit");
            break;
        }
    }
    let wall = t0.elapsed().as_secs_f64();
    sim.check_diag()?;
    let contacts = sim.count_contacts()?;
    let sps = done as f64 / wall;
    println!("full {}: N = {n}, {done} steps (t = {:.3} s) in {wall:.1} s: {sps:.1} steps/s, {:.3e} particle-steps/s, mean contacts at the end {contacts:.2}", a.model, sim.time(), sps * n as f64);
    record(
        a,
        &[
            ("device", js(sim.device_name())),
            ("model", js(&a.model)),
            ("particles", n.to_string()),
            (
                "phase",
                js(if done == total {
                    "full"
                } else {
                    "full-partial"
                }),
            ),
            ("steps", done.to_string()),
            ("wall_s", num(wall)),
            ("steps_per_s", num(sps)),
            ("particle_steps_per_s", num(sps * n as f64)),
            ("bytes_per_particle", num(sim.memory().bytes_per_particle())),
            ("spill_rows", spill_json(&sim)?),
            ("ids", ids_json(a)),
            ("publish_share", "null".into()),
            ("mean_contacts", num(contacts)),
            ("sim_time_s", num(sim.time())),
        ],
    )
}

/// A case file on the GPU without publication (issue 13's lab-scale cases): `--warmup` steps,
/// then `--steps` timed, with or without graphs (`--graphs`), to separate the stepping from
/// what the solver adds around it.
fn case_run(a: &Args) -> Result<()> {
    let path = a.case.as_deref().context("case needs --case FILE")?;
    let case = Case::read_file(std::path::Path::new(path))?;
    let (mut sim, _, _) = start(&case, &opts(a))?;
    let n = sim.particle_count();
    sim.steps(a.warmup)?;
    sim.synchronize()?;
    let t0 = Instant::now();
    let mut done = 0;
    while done < a.steps {
        let c = (if a.batch > 0 { a.batch } else { 1000 }).min(a.steps - done);
        sim.steps(c)?;
        if a.batch > 0 {
            sim.check_diag()?;
        }
        done += c;
    }
    sim.synchronize()?;
    let wall = t0.elapsed().as_secs_f64();
    sim.check_diag()?;
    let sps = done as f64 / wall;
    println!(
        "case {path}: N = {n}, {done} steps in {wall:.3} s: {sps:.0} steps/s (graphs {}, batch {}, forces stored {})",
        if a.graphs { "on" } else { "off" },
        a.batch,
        a.store_forces
    );
    if let Some(s) = sim.skin_summary() {
        println!("  {s}");
    }
    // Each step timed with events and waited for, launched kernel by kernel: the device's time
    // per step plus the gaps where it waited for the host's next launch (an upper bound of
    // the device time; the gaps are what a graph removes).
    sim.set_profiling(true);
    sim.reset_stage_times();
    sim.steps(500)?;
    sim.set_profiling(false);
    let times = sim.stage_times().clone();
    let gpu_ms: f64 = times.kernels.iter().map(|k| k.1).sum::<f64>() / times.steps.max(1) as f64;
    println!(
        "  timed steps (kernel by kernel): {:.1} us each, against {:.1} us per step above ({})",
        gpu_ms * 1e3,
        1e6 / sps,
        times.summary()
    );
    record(
        a,
        &[
            ("device", js(sim.device_name())),
            ("case", js(path)),
            ("particles", n.to_string()),
            ("phase", js("small-stepping")),
            ("graphs", a.graphs.to_string()),
            ("batch", a.batch.to_string()),
            ("store_forces", a.store_forces.to_string()),
            ("steps", done.to_string()),
            ("wall_s", num(wall)),
            ("steps_per_s", num(sps)),
        ],
    )
}

/// A real segment for `n` particles, named after this process; the caller closes (removes) it.
fn bench_segment(n: usize) -> Result<shm_protocol::Publisher> {
    let name = format!("dem-gpu-bench-{}", std::process::id());
    let mut caps = shm_protocol::Capacities::for_particles(n as u64);
    // Room for contact counts too (`--contacts on`: the solver's default frame carries them).
    caps.fields |= shm_protocol::FieldKind::ContactCount.bit();
    shm_protocol::Publisher::create(&name, caps, shm_protocol::CreateOptions::default())
        .context("creating the segment")
}

/// The largest difference between a frame's positions and the state's [m] (f32 rounding when
/// the frame is the state).
fn max_frame_error(frame: &[[f32; 3]], state: &[[f64; 3]]) -> f64 {
    frame
        .iter()
        .zip(state)
        .flat_map(|(f, s)| (0..3).map(move |k| (f[k] as f64 - s[k]).abs()))
        .fold(0.0, f64::max)
}

/// Publication share: steps/s for `--seconds` without publishing, then with a frame every
/// 100 ms of wall time (pack on the GPU, async copy into a registered shared-memory segment,
/// commit once the copy completed), then without again: the falling particles make every step
/// dearer than the one before, so the steps with frames are compared with the mean of the
/// runs before and after them (as sph-gpu-bench does). The steps go `--batch` at a time (10
/// when 0), each batch followed by a synchronisation and a look at the frame, in all three
/// runs: a frame is started at most once a batch and committed at the earliest one batch
/// later, so at 100 M, where a step takes over 30 ms, `--batch 1` is what reaches 10 frames/s.
/// With `--frame-pack both` the runs with frames alternate between the two packs, each between
/// two runs without.
fn publish(a: &Args) -> Result<()> {
    // `--phase dense`: a dense pack relaxed for `--relax` steps, whose steps cost the same
    // before, during and after the frames (the falling case's do not).
    let t_setup = Instant::now();
    let (case, state) = start_state(a.particles, a)?;
    let sc = cuda::step_context(&case)?;
    let mut sim = CudaSim::new(&sc, &state, &opts(a))?;
    drop(state);
    let n = sim.particle_count();
    if a.phase == "dense" {
        sim.steps(a.relax)?;
    }
    sim.steps(a.warmup)?;
    sim.synchronize()?;
    println!(
        "  set up (built, uploaded, relaxed, warmed up) in {:.1} s",
        t_setup.elapsed().as_secs_f64()
    );
    let chunk = if a.batch == 0 { 10 } else { a.batch };
    // What a run did besides its steps: searches (with a skin), graphs captured, and the
    // kernels' sampled time per step, since `mark` (taken before the run).
    let mark = |sim: &mut CudaSim| -> (Option<(u64, u64, u64)>, u64) {
        sim.reset_stage_times();
        (sim.skin_counts(), sim.graphs_captured())
    };
    let diag = |sim: &CudaSim, m: (Option<(u64, u64, u64)>, u64)| -> String {
        let searches = match (sim.skin_counts(), m.0) {
            (Some(now), Some(then)) => format!(
                "{} searches in {} steps ({} wider)",
                now.0 - then.0,
                now.1 - then.1,
                now.2 - then.2
            ),
            _ => "a search every step".into(),
        };
        format!(
            "{searches}, {} graphs captured; kernels: {}",
            sim.graphs_captured() - m.1,
            sim.stage_times().summary()
        )
    };
    // Without publication.
    let plain = |sim: &mut CudaSim| -> Result<f64> {
        let m = mark(sim);
        sim.synchronize()?;
        let t0 = Instant::now();
        let mut steps = 0;
        while t0.elapsed().as_secs_f64() < a.seconds {
            sim.steps(chunk)?;
            sim.synchronize()?;
            steps += chunk;
        }
        let rate = steps as f64 / t0.elapsed().as_secs_f64();
        println!("  without frames: {rate:.1} steps/s; {}", diag(sim, m));
        Ok(rate)
    };
    let mut before = plain(&mut sim)?;
    // With publication into a real segment.
    let publisher = bench_segment(n)?;
    let region_len = publisher.region().len();
    // SAFETY: the mapping lives as long as `publisher`, which outlives `_reg` (dropped first).
    let _reg = unsafe { sim.register_host(publisher.region().base(), region_len)? };
    for &deferred in &a.frame_pack {
        sim.set_defer_frames(deferred);
        let (mut frames, mut last) = (0u64, Instant::now());
        let mut writer: Option<shm_protocol::FrameWriter<'_>> = None;
        let host_s0 = sim.publish_host_seconds();
        let m = mark(&mut sim);
        // Host time spent queuing the steps (a copy that blocked the host would show here).
        let mut queue_s = 0.0;
        sim.synchronize()?;
        let t0 = Instant::now();
        let mut steps = 0;
        while t0.elapsed().as_secs_f64() < a.seconds {
            if writer.is_none() && last.elapsed().as_secs_f64() >= 0.1 {
                last = Instant::now();
                let mut w = publisher.begin_frame(n as u64)?;
                w.step = sim.step_index();
                w.sim_time = sim.time();
                let ([positions, velocities, angular_velocities], contact_counts) =
                    frame_slots(&mut w, a)?;
                let target = cuda::FrameTarget {
                    positions,
                    velocities,
                    angular_velocities,
                    forces: std::ptr::null_mut(),
                    contact_counts,
                };
                // SAFETY: the slot arrays hold n [f32; 3] each and stay untouched until
                // commit, which happens only after publish_done returned the ticket.
                unsafe { sim.publish_async(target)? };
                writer = Some(w);
            }
            let q = Instant::now();
            sim.steps(chunk)?;
            queue_s += q.elapsed().as_secs_f64();
            steps += chunk;
            if writer.is_some() && sim.publish_done()?.is_some() {
                writer.take().expect("pending frame").commit();
                frames += 1;
            }
            sim.synchronize()?;
        }
        let wall = t0.elapsed().as_secs_f64();
        let with_diag = diag(&sim, m);
        // The frame still in flight (not counted: it lands after the timed steps), then one of
        // the current state, so that the check below compares like with like.
        if let Some(w) = writer.take() {
            sim.publish_wait()?;
            w.commit();
        }
        let mut w = publisher.begin_frame(n as u64)?;
        w.step = sim.step_index();
        let target = cuda::FrameTarget::positions(
            w.field_ptr(shm_protocol::FieldKind::Position)? as *mut [f32; 3]
        );
        // SAFETY: as above; publish_wait below completes the copy before commit.
        unsafe { sim.publish_async(target)? };
        sim.publish_wait()?;
        w.commit();
        let with = steps as f64 / wall;
        // The last frame was committed after the final steps' copy: it must equal the state.
        let frame = publisher
            .read_newest()?
            .context("no frame in the segment")?;
        let pos = frame.positions.unwrap_or_default();
        // Positions only: the whole state's history takes tens of GB on the host at 100 M.
        let step_ok = frame.meta.step == sim.step_index();
        let max_err = max_frame_error(&pos, &sim.positions()?);
        let after = plain(&mut sim)?;
        let base = 0.5 * (before + after);
        let share = (1.0 - with / base).max(0.0);
        let fps = frames as f64 / wall;
        let pack = if deferred { "next" } else { "now" };
        let host_ms = 1e3 * (sim.publish_host_seconds() - host_s0) / frames.max(1) as f64;
        println!("publish ({pack}): N = {n}: {base:.1} steps/s without ({before:.1} before, {after:.1} after), {with:.1} with {fps:.1} frames/s: share {:.2} %; host queuing {host_ms:.2} ms/frame", 100.0 * share);
        println!(
            "  with frames: {with_diag}; queuing the steps took {:.3} ms a batch",
            1e3 * queue_s * chunk as f64 / steps.max(1) as f64
        );
        println!("  newest frame: {} positions, step matches {step_ok}, max |frame - state| {max_err:.2e} m (f32 rounding)", pos.len());
        anyhow::ensure!(
            step_ok && pos.len() == n && max_err < 1e-5,
            "the newest frame is not the state: step matches {step_ok}, {} of {n} positions, max |frame - state| {max_err:.2e} m",
            pos.len()
        );
        record(
            a,
            &[
                ("device", js(sim.device_name())),
                ("model", js(&a.model)),
                ("particles", n.to_string()),
                ("phase", js(&a.phase)),
                ("steps_per_s", num(with)),
                ("steps_per_s_without_publication", num(base)),
                ("steps_per_s_without_before", num(before)),
                ("steps_per_s_without_after", num(after)),
                ("particle_steps_per_s", num(with * n as f64)),
                ("bytes_per_particle", num(sim.memory().bytes_per_particle())),
                ("publish_share", num(share)),
                ("frames_per_s", num(fps)),
                ("batch", chunk.to_string()),
                ("frame_pack", js(pack)),
                ("contacts", a.contacts.to_string()),
            ],
        )?;
        before = after;
    }
    drop(_reg);
    publisher.close(shm_protocol::SolverState::Finished, false)?;
    Ok(())
}

/// Device-to-device copy bandwidth (bytes read + written per second).
fn bandwidth(a: &Args) -> Result<()> {
    let ctx = cudarc::driver::CudaContext::new(a.device)?;
    let stream = ctx.default_stream();
    let bytes = 2usize << 30;
    let src = stream.alloc_zeros::<u8>(bytes)?;
    let mut dst = stream.alloc_zeros::<u8>(bytes)?;
    stream.memcpy_dtod(&src, &mut dst)?;
    stream.synchronize()?;
    let reps = 10;
    let t0 = Instant::now();
    for _ in 0..reps {
        stream.memcpy_dtod(&src, &mut dst)?;
    }
    stream.synchronize()?;
    let gbs = 2.0 * bytes as f64 * reps as f64 / t0.elapsed().as_secs_f64() / 1e9;
    println!("device-to-device copy: {gbs:.0} GB/s (read + write)");
    record(
        a,
        &[
            ("check", js("copy_bandwidth")),
            ("device", js(&ctx.name()?)),
            ("gb_per_s", num(gbs)),
        ],
    )
}

/// The start state of `multi` and `publish`: the falling box (loose) or a dense pack at rest
/// (relaxed on the GPU before timing).
fn start_state(n: usize, a: &Args) -> Result<(Case, SimState)> {
    match a.phase.as_str() {
        "dense" => {
            let (case, pos, _) = dense(n, &a.model, a.ids)?;
            Ok((case, rest_state(pos)))
        }
        _ => {
            let case = falling(n, &a.model)?;
            let state = generated_state(&case)?;
            Ok((case, state))
        }
    }
}

fn distinct_gpus(devices: &[usize]) -> usize {
    let mut d = devices.to_vec();
    d.sort_unstable();
    d.dedup();
    d.len()
}

fn group_of(
    ctx: &Arc<solver::dem::state::StepContext>,
    state: &SimState,
    a: &Args,
    balance: solver::decomp::Balance,
) -> Result<cuda::CudaGroup> {
    Ok(cuda::CudaGroup::new(
        ctx.clone(),
        state,
        &opts(a),
        &cuda::GroupOptions {
            devices: a.devices.clone(),
            axis: a.axis,
            balance,
        },
    )?)
}

/// The largest GPU's busy time (its steps: compute and the exchange not hidden) over the
/// mean, from a group's `phase_times`: 1 is even.
fn busy_imbalance(phases: &[(f64, f64, f64)]) -> f64 {
    let busy: Vec<f64> = phases.iter().map(|p| p.0 + p.1 - p.2).collect();
    busy.iter().cloned().fold(0.0, f64::max) / (busy.iter().sum::<f64>() / busy.len() as f64)
}

/// One GPU against a group of GPUs (issue 14), timed over `--steps` after `--warmup` steps.
/// Strong scaling (default): the group starts from the one GPU's state after its relaxation (the
/// same particles, the same contacts). Weak scaling (`--weak on`): the one GPU runs
/// `--particles`, the group a case that many times its GPUs, relaxed on the group. One group
/// run per `--balance` entry, each from the same start. On a group that names one GPU twice the
/// ratio is the cost of the slabs' exchange, not a speed-up.
fn multi(a: &Args) -> Result<()> {
    use solver::exec::worker::FusedWorker;
    let gpus = a.devices.len();
    let distinct = distinct_gpus(&a.devices);
    let dense = a.phase == "dense";
    // One GPU.
    let (case, state0) = start_state(a.particles, a)?;
    let sc = cuda::step_context(&case)?;
    let mut sim = CudaSim::new(&sc, &state0, &opts(a))?;
    drop(state0);
    let n1 = sim.particle_count();
    if dense && a.relax > 0 {
        let s = timed_steps(&mut sim, a.relax)?;
        println!(
            "  one GPU: {n1} particles relaxed {} steps in {s:.1} s",
            a.relax
        );
    }
    let relaxed = if a.weak { None } else { Some(sim.state()?) };
    timed_steps(&mut sim, a.warmup)?;
    let wall1 = timed_steps(&mut sim, a.steps)?;
    let sps1 = a.steps as f64 / wall1;
    let device = sim.device_name().to_string();
    let bpp1 = sim.memory().bytes_per_particle();
    drop(sim);
    println!("  one GPU: {sps1:.2} steps/s, {bpp1:.0} B/particle");
    // The group's start.
    let (gcase, gstate, grelax) = match relaxed {
        Some(s) => (case, s, 0),
        None => {
            let (c, s) = start_state(a.particles * gpus, a)?;
            (c, s, if dense { a.relax } else { 0 })
        }
    };
    let ng = gstate.pos.len();
    let ctx = Arc::new(cuda::step_context(&gcase)?);
    for &balance in &a.balance {
        let mut g = group_of(&ctx, &gstate, a, balance)?;
        let report = g.device_report().unwrap_or_default();
        println!("  {report}");
        if grelax > 0 {
            let t0 = Instant::now();
            g.advance(grelax).map_err(|e| anyhow::anyhow!("{e}"))?;
            println!(
                "  group: {ng} particles relaxed {grelax} steps in {:.1} s",
                t0.elapsed().as_secs_f64()
            );
        }
        g.advance(a.warmup).map_err(|e| anyhow::anyhow!("{e}"))?;
        g.reset_timers();
        let t0 = Instant::now();
        g.advance(a.steps).map_err(|e| anyhow::anyhow!("{e}"))?;
        let wall = t0.elapsed().as_secs_f64();
        let sps = a.steps as f64 / wall;
        let phases = g.phase_times();
        let ex: f64 = phases.iter().map(|p| p.0).sum::<f64>() / gpus as f64;
        let co: f64 = phases.iter().map(|p| p.1).sum::<f64>() / gpus as f64;
        let hid: f64 = phases.iter().map(|p| p.2).sum::<f64>() / gpus as f64;
        let imbalance = busy_imbalance(&phases);
        let speedup = sps / sps1;
        // Strong: steps/s over (GPUs x one GPU's); weak: steps/s of G times the particles over
        // one GPU's.
        let efficiency = if distinct != gpus {
            f64::NAN
        } else if a.weak {
            speedup
        } else {
            speedup / gpus as f64
        };
        println!(
            "  balance {}: one GPU {sps1:.2} steps/s ({n1} particles); {gpus} slabs on {distinct} GPUs {sps:.2} steps/s ({ng} particles), {} efficiency {efficiency:.3}; per step and GPU: exchange {:.3} ms ({:.0} % hidden), rest {:.3} ms; imbalance {imbalance:.3}; bounds {:?}, owned {:?}, {} moves ({} judged and kept, {} undone)",
            balance.name(),
            if a.weak { "weak" } else { "strong" },
            ex * 1e3,
            100.0 * g.hidden_share(),
            co * 1e3,
            g.bounds(),
            g.owned(),
            g.rebalances(),
            g.guard_counts().0,
            g.guard_counts().1
        );
        record(
            a,
            &[
                ("check", js("multi_gpu")),
                ("device", js(&device)),
                ("devices", js(&format!("{:?}", a.devices))),
                ("distinct_gpus", distinct.to_string()),
                ("model", js(&a.model)),
                ("phase", js(&a.phase)),
                ("scaling", js(if a.weak { "weak" } else { "strong" })),
                ("particles", n1.to_string()),
                ("group_particles", ng.to_string()),
                ("steps", a.steps.to_string()),
                ("one_gpu_steps_per_s", num(sps1)),
                ("group_steps_per_s", num(sps)),
                ("speedup", num(speedup)),
                ("efficiency", num(efficiency)),
                ("exchange_ms_per_step", num(ex * 1e3)),
                ("rest_ms_per_step", num(co * 1e3)),
                ("exchange_share", num((ex - hid) / (ex - hid + co))),
                ("exchange_hidden_share", num(g.hidden_share())),
                ("overlap", js(if g.overlaps() { "on" } else { "off" })),
                ("imbalance_max_over_mean", num(imbalance)),
                ("one_gpu_bytes_per_particle", num(bpp1)),
                ("balance", js(balance.name())),
                ("rebalances", g.rebalances().to_string()),
                ("moves_kept", g.guard_counts().0.to_string()),
                ("moves_undone", g.guard_counts().1.to_string()),
                ("migrations", g.migrations().to_string()),
                ("bounds", js(&format!("{:?}", g.bounds()))),
                ("report", js(&report)),
                (
                    "group_skin",
                    js(&g.skin_summary().unwrap_or_else(|| "off".into())),
                ),
            ],
        )?;
        if let Some(s) = g.skin_summary() {
            println!("  group: {s}");
        }
    }
    Ok(())
}

/// What one GPU set of `scale` measured.
struct SetRun {
    particles: usize,
    steps_per_s: f64,
    report: String,
    exchange_hidden_share: f64,
    /// Per step and GPU, averaged over the GPUs: the exchange and the rest [s] (NaN on one).
    exchange_s: f64,
    rest_s: f64,
    imbalance: f64,
    /// How often the set searched for neighbours (its Verlet skin), over relaxation and timing.
    searches: String,
    place_s: f64,
    build_s: f64,
    relax_s: f64,
}

/// Runs `--particles` (times the set's GPUs with `--weak on`) on one GPU set: placed on the
/// host, built, relaxed `--relax` steps (dense phase), `--warmup` steps, then `--steps` timed.
fn scale_one(a: &Args, set: &[usize]) -> Result<SetRun> {
    use solver::exec::worker::FusedWorker;
    let n = if a.weak {
        a.particles * set.len()
    } else {
        a.particles
    };
    let t0 = Instant::now();
    let (case, state) = start_state(n, a)?;
    let particles = state.pos.len();
    let place_s = t0.elapsed().as_secs_f64();
    let ctx = Arc::new(cuda::step_context(&case)?);
    let relax = if a.phase == "dense" { a.relax } else { 0 };
    let t0 = Instant::now();
    if let [device] = set {
        let o = CudaOptions {
            device: *device,
            ..opts(a)
        };
        let mut sim = CudaSim::new(&ctx, &state, &o)?;
        drop(state);
        sim.synchronize()?;
        let build_s = t0.elapsed().as_secs_f64();
        let relax_s = timed_steps(&mut sim, relax)?;
        timed_steps(&mut sim, a.warmup)?;
        let wall = timed_steps(&mut sim, a.steps)?;
        return Ok(SetRun {
            particles,
            steps_per_s: a.steps as f64 / wall,
            report: format!(
                "CUDA device {device} ({}): {particles} particles, {:.0} B/particle",
                sim.device_name(),
                sim.memory().bytes_per_particle()
            ),
            exchange_hidden_share: f64::NAN,
            exchange_s: f64::NAN,
            rest_s: f64::NAN,
            imbalance: 1.0,
            searches: sim.skin_summary().unwrap_or_else(|| "off".into()),
            place_s,
            build_s,
            relax_s,
        });
    }
    let mut g = cuda::CudaGroup::new(
        ctx,
        &state,
        &opts(a),
        &cuda::GroupOptions {
            devices: set.to_vec(),
            axis: a.axis,
            balance: a.balance[0],
        },
    )?;
    drop(state);
    let build_s = t0.elapsed().as_secs_f64();
    let report = g.device_report().unwrap_or_default();
    println!("  {report}");
    let step_err = |e: solver::exec::worker::StepError| anyhow::anyhow!("{e}");
    let t0 = Instant::now();
    g.advance(relax).map_err(step_err)?;
    let relax_s = t0.elapsed().as_secs_f64();
    g.advance(a.warmup).map_err(step_err)?;
    g.reset_timers();
    let t0 = Instant::now();
    g.advance(a.steps).map_err(step_err)?;
    let wall = t0.elapsed().as_secs_f64();
    let phases = g.phase_times();
    let imbalance = busy_imbalance(&phases);
    let mean =
        |f: fn(&(f64, f64, f64)) -> f64| phases.iter().map(f).sum::<f64>() / phases.len() as f64;
    Ok(SetRun {
        particles,
        steps_per_s: a.steps as f64 / wall,
        report,
        exchange_hidden_share: g.hidden_share(),
        exchange_s: mean(|p| p.0),
        rest_s: mean(|p| p.1),
        imbalance,
        searches: g.skin_summary().unwrap_or_else(|| "off".into()),
        place_s,
        build_s,
        relax_s,
    })
}

/// Strong or weak scaling over GPU sets (issue 16): `--sets 0:0,1:0,1,2,3` runs the case on GPU
/// 0 alone, on 0 and 1, then on 0-3, each from the same start (the dense pack is placed the
/// same way every time and relaxed on the set for the same steps: no state download, so sizes
/// one GPU cannot hold run too). The first set that fits is the baseline: strong efficiency is
/// (steps/s x baseline GPUs) / (baseline steps/s x GPUs); weak (`--weak on`, `--particles` per
/// GPU) is particle-steps/s per GPU over the baseline's. A set the case does not fit is
/// recorded with the error that says so, and the run goes on.
fn scale(a: &Args) -> Result<()> {
    let mut base: Option<(usize, f64, usize)> = None;
    let scaling = if a.weak { "weak" } else { "strong" };
    for set in &a.sets {
        let gpus = set.len();
        let distinct = distinct_gpus(set);
        println!(
            "+ {scaling} scaling, {} particles{} on GPUs {set:?}",
            a.particles,
            if a.weak { " per GPU" } else { "" }
        );
        // The fields every record of this set starts with.
        let head = vec![
            ("check", js("scale")),
            ("scaling", js(scaling)),
            ("model", js(&a.model)),
            ("phase", js(&a.phase)),
            ("devices", js(&format!("{set:?}"))),
            ("gpus", gpus.to_string()),
        ];
        let run = match scale_one(a, set) {
            Ok(r) => r,
            Err(e) => {
                let msg = format!("{e:#}");
                println!("  GPUs {set:?}: did not run: {msg}");
                let mut fields = head.clone();
                fields.extend([
                    ("requested_particles", a.particles.to_string()),
                    ("ran", "false".into()),
                    ("error", js(&msg)),
                ]);
                record(a, &fields)?;
                continue;
            }
        };
        let pss = run.particles as f64 * run.steps_per_s;
        let (bg, bsps, bn) = *base.get_or_insert((gpus, run.steps_per_s, run.particles));
        let efficiency = if distinct != gpus {
            f64::NAN
        } else if a.weak {
            (pss / gpus as f64) / (bn as f64 * bsps / bg as f64)
        } else {
            run.steps_per_s * bg as f64 / (bsps * gpus as f64)
        };
        println!(
            "  GPUs {set:?}: {} particles, {:.2} steps/s ({pss:.3e} particle-steps/s), {scaling} efficiency {efficiency:.3} against {bg} GPU(s); imbalance {:.3}; placed {:.1} s, built {:.1} s, relaxed {:.1} s",
            run.particles, run.steps_per_s, run.imbalance, run.place_s, run.build_s, run.relax_s
        );
        println!("  GPUs {set:?}: {}", run.searches);
        let mut fields = head;
        fields.extend([
            ("distinct_gpus", distinct.to_string()),
            ("ran", "true".into()),
            ("particles", run.particles.to_string()),
            ("steps", a.steps.to_string()),
            // Relaxation runs in the dense phase only.
            (
                "relax",
                (if a.phase == "dense" { a.relax } else { 0 }).to_string(),
            ),
            ("steps_per_s", num(run.steps_per_s)),
            ("particle_steps_per_s", num(pss)),
            ("baseline_gpus", bg.to_string()),
            ("baseline_particles", bn.to_string()),
            ("baseline_steps_per_s", num(bsps)),
            ("efficiency", num(efficiency)),
            ("exchange_hidden_share", num(run.exchange_hidden_share)),
            ("exchange_ms_per_step", num(run.exchange_s * 1e3)),
            ("rest_ms_per_step", num(run.rest_s * 1e3)),
            ("searches", js(&run.searches)),
            ("imbalance_max_over_mean", num(run.imbalance)),
            ("balance", js(a.balance[0].name())),
            ("place_s", num(run.place_s)),
            ("build_s", num(run.build_s)),
            ("relax_s", num(run.relax_s)),
            ("report", js(&run.report)),
        ]);
        record(a, &fields)?;
    }
    Ok(())
}

/// `publish --devices 0,1`: the cost of publication from a GPU group into a real segment, as
/// `publish` measures it for one GPU (steps/s without and with a frame every 0.1 s).
fn publish_group(a: &Args) -> Result<()> {
    use solver::exec::worker::{FusedWorker, RawKinematics};
    let t_setup = Instant::now();
    let (case, state) = start_state(a.particles, a)?;
    let n = state.pos.len();
    let ctx = Arc::new(cuda::step_context(&case)?);
    let mut g = group_of(&ctx, &state, a, a.balance[0])?;
    drop(state);
    let report = g.device_report().unwrap_or_default();
    println!("  {report}");
    // `--batch` steps between two looks at the frame (10 when 0), as `publish` takes them.
    let chunk = if a.batch == 0 { 10 } else { a.batch };
    let run = |g: &mut cuda::CudaGroup| g.advance(chunk).map_err(|e| anyhow::anyhow!("{e}"));
    // Steps taken, for the frames' step field.
    let mut done = 0u64;
    if a.phase == "dense" {
        g.advance(a.relax).map_err(|e| anyhow::anyhow!("{e}"))?;
        done += a.relax;
    }
    for _ in 0..a.warmup.div_ceil(chunk) {
        run(&mut g)?;
        done += chunk;
    }
    println!(
        "  set up (built, uploaded, relaxed, warmed up) in {:.1} s",
        t_setup.elapsed().as_secs_f64()
    );
    // Without frames, before and after the run with them (the falling particles make every
    // step dearer: the run with frames is compared with the mean of the two).
    let plain = |g: &mut cuda::CudaGroup, done: &mut u64| -> Result<f64> {
        let t0 = Instant::now();
        let mut steps = 0u64;
        while t0.elapsed().as_secs_f64() < a.seconds {
            run(g)?;
            steps += chunk;
            *done += chunk;
        }
        Ok(steps as f64 / t0.elapsed().as_secs_f64())
    };
    let mut before = plain(&mut g, &mut done)?;
    let publisher = bench_segment(n)?;
    let region_len = publisher.region().len();
    // SAFETY: the mapping lives as long as `publisher`; release_host_memory runs before it drops.
    unsafe { g.register_host_memory(publisher.region().base(), region_len) }
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    for &deferred in &a.frame_pack {
        g.set_defer_frames(deferred);
        let (mut frames, mut last) = (0u64, Instant::now());
        let mut writer: Option<shm_protocol::FrameWriter<'_>> = None;
        let t0 = Instant::now();
        let mut steps = 0u64;
        while t0.elapsed().as_secs_f64() < a.seconds {
            if writer.is_none() && last.elapsed().as_secs_f64() >= 0.1 {
                last = Instant::now();
                let mut w = publisher.begin_frame(n as u64)?;
                w.step = done;
                w.sim_time = g.time();
                let ([positions, velocities, angular_velocities], contact_counts) =
                    frame_slots(&mut w, a)?;
                let out = RawKinematics {
                    count: n,
                    positions,
                    velocities,
                    angular_velocities,
                    forces: std::ptr::null_mut(),
                    contact_counts,
                };
                // SAFETY: the slot arrays hold n elements each and stay untouched until
                // commit, which happens only once kinematics_copy_done said the copy completed.
                unsafe { g.begin_kinematics_copy(out) }.map_err(|e| anyhow::anyhow!("{e}"))?;
                writer = Some(w);
            }
            run(&mut g)?;
            steps += chunk;
            done += chunk;
            if writer.is_some()
                && g.kinematics_copy_done()
                    .map_err(|e| anyhow::anyhow!("{e}"))?
            {
                writer.take().expect("pending frame").commit();
                frames += 1;
            }
        }
        let wall = t0.elapsed().as_secs_f64();
        // The frame still in flight (not counted: it lands after the timed steps), then one of
        // the current state, so that the check below compares like with like.
        if let Some(w) = writer.take() {
            g.wait_kinematics_copy()
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            w.commit();
        }
        let mut w = publisher.begin_frame(n as u64)?;
        w.step = done;
        let positions = w.field_ptr(shm_protocol::FieldKind::Position)? as *mut [f32; 3];
        let out = RawKinematics {
            positions,
            ..RawKinematics::none(n)
        };
        // SAFETY: as above; wait_kinematics_copy completes the copy before commit.
        unsafe { g.begin_kinematics_copy(out) }.map_err(|e| anyhow::anyhow!("{e}"))?;
        g.wait_kinematics_copy()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        w.commit();
        let with = steps as f64 / wall;
        // The last frame was committed after the final steps' copy: it must equal the state.
        let frame = publisher
            .read_newest()?
            .context("no frame in the segment")?;
        let pos = frame.positions.unwrap_or_default();
        let state_pos = g.positions().map_err(|e| anyhow::anyhow!("{e}"))?;
        let max_err = max_frame_error(&pos, &state_pos);
        anyhow::ensure!(
            frame.meta.step == done && pos.len() == n && max_err < 1e-5,
            "the newest frame is not the state: step {} against {done}, {} of {n} positions, max |frame - state| {max_err:.2e} m",
            frame.meta.step,
            pos.len()
        );
        let after = plain(&mut g, &mut done)?;
        let base = 0.5 * (before + after);
        let share = (1.0 - with / base).max(0.0);
        let fps = frames as f64 / wall;
        let pack = if deferred { "next" } else { "now" };
        println!(
            "publish ({pack}) on {:?}: N = {n}: {base:.2} steps/s without ({before:.2} before, {after:.2} after), {with:.2} with {fps:.2} frames/s: share {:.2} %",
            a.devices,
            100.0 * share
        );
        // Where a frame's device time goes: each GPU's pack holds up its compute stream (none
        // when the collides wrote every frame).
        let (pack_ms, copy_ms) = g.frame_times().unwrap_or_default();
        println!("  per frame so far: pack {pack_ms:.2?} ms per GPU, copy to the host {copy_ms:.2} ms; newest frame: max |frame - state| {max_err:.2e} m");
        record(
            a,
            &[
                ("check", js("publish_group")),
                ("devices", js(&format!("{:?}", a.devices))),
                ("model", js(&a.model)),
                ("phase", js(&a.phase)),
                ("particles", n.to_string()),
                ("steps_per_s_without", num(base)),
                ("steps_per_s_without_before", num(before)),
                ("steps_per_s_without_after", num(after)),
                ("steps_per_s_with", num(with)),
                ("frames_per_s", num(fps)),
                ("publish_share", num(share)),
                ("pack_ms_per_gpu", js(&format!("{pack_ms:.3?}"))),
                ("copy_ms", num(copy_ms)),
                ("batch", chunk.to_string()),
                ("frame_pack", js(pack)),
                ("contacts", a.contacts.to_string()),
                ("report", js(&report)),
            ],
        )?;
        before = after;
    }
    g.release_host_memory();
    publisher.close(shm_protocol::SolverState::Finished, false)?;
    Ok(())
}

fn main() -> std::process::ExitCode {
    // The library's log (start reports, module timings, the collide's registers at debug
    // level) when RUST_LOG asks for it; silent otherwise, as the reports are printed.
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_default_env() {
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .init();
    }
    let r = parse().and_then(|a| {
        if let Err(e) = cuda::driver::driver_available() {
            bail!("{e}");
        }
        match a.cmd.as_str() {
            "smoke" => smoke(&a),
            "compile" => compile_times(&a),
            "parity" => parity(&a),
            "determinism" => determinism(&a),
            "restitution" => restitution(&a),
            "bench" => bench(&a),
            "case" => case_run(&a),
            "multi" => multi(&a),
            "scale" => scale(&a),
            "full" => full(&a),
            "publish" if a.devices_given => publish_group(&a),
            "publish" => publish(&a),
            "bandwidth" => bandwidth(&a),
            c => bail!("unknown command {c}"),
        }
    });
    match r {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dem-gpu-bench: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
