//! Helpers shared by the validation tests: the backends to run on, case builders and geometry
//! generators.
#![allow(dead_code)]

use solver::case::{
    Case, CaseOrigin, ContactModelSpec, Domain, FractionBasis, Integrator, Output, Source, Species,
    SpeciesChoice, WallMaterial,
};
use solver::core::stl::Triangle;
use solver::dem::cuda::{driver::driver_available, CudaOptions, HistoryMode, StateCopies};
use solver::exec::sim::BackendKind;
use solver::{FrameInput, SimState, Simulation};

/// Comma list of backends (`cpu`, `cuda`) the validation tests run on. Unset (or empty): the
/// CPU always, plus CUDA where an NVIDIA driver loads.
pub const BACKENDS_ENV: &str = "PARTICLE_SHM_TEST_BACKENDS";

/// The backends every validation test runs its physics check on, with their names.
///
/// * `("cpu", BackendKind::Cpu)` always, plus `("cuda", BackendKind::Cuda(default options))`
///   when the driver library loads (cudarc is never touched otherwise).
/// * [`BACKENDS_ENV`] restricts the list; naming `cuda` without a driver panics, so that a GPU
///   run cannot silently test only the CPU.
pub fn backends() -> Vec<(String, BackendKind)> {
    let cuda = || BackendKind::Cuda(cuda_options());
    let requested = std::env::var(BACKENDS_ENV)
        .ok()
        .filter(|v| !v.trim().is_empty());
    let list = match &requested {
        None => {
            let mut list = vec![("cpu".to_string(), BackendKind::Cpu)];
            match driver_available() {
                Ok(()) => list.push(("cuda".to_string(), cuda())),
                Err(e) => println!("CUDA backend not tested: {e}"),
            }
            list
        }
        Some(value) => {
            let mut list: Vec<(String, BackendKind)> = Vec::new();
            for name in value.split(',').map(|n| n.trim().to_ascii_lowercase()) {
                if name.is_empty() || list.iter().any(|(n, _)| *n == name) {
                    continue;
                }
                let kind = match name.as_str() {
                    "cpu" => BackendKind::Cpu,
                    "cuda" | "cuda2" => {
                        if let Err(e) = driver_available() {
                            panic!(
                                "{BACKENDS_ENV}={value:?} asks for the CUDA backend, but it cannot \
                                 run here: {e}"
                            );
                        }
                        if name == "cuda2" {
                            BackendKind::CudaGroup(cuda_options(), test_devices())
                        } else {
                            cuda()
                        }
                    }
                    other => panic!(
                        "{BACKENDS_ENV}={value:?}: unknown backend {other:?} (known: cpu, cuda, cuda2)"
                    ),
                };
                list.push((name, kind));
            }
            assert!(
                !list.is_empty(),
                "{BACKENDS_ENV}={value:?} names no backend (known: cpu, cuda)"
            );
            list
        }
    };
    let names: Vec<&str> = list.iter().map(|(n, _)| n.as_str()).collect();
    println!(
        "backends: {}{}",
        names.join(", "),
        match &requested {
            Some(v) => format!(" ({BACKENDS_ENV}={v:?})"),
            None => String::new(),
        }
    );
    list
}

/// How the CUDA tests keep a frictional contact history (`auto`, `double`, `in-place`, `pairs`,
/// `compact`; unset: auto, which is two buffers for every test case): the device suite runs the
/// parity, group and validation tests once more with `in-place`, and the one-GPU parity and
/// validation tests with `pairs` (which groups refuse) and `compact` (`solver --gpu-memory
/// compact`: pairs-once rows of 6 with spill rows of 6 and one copy of the state, the pairs kept
/// by owner keys; velocity Verlet keeps two copies and the pairs by the ids).
pub const HISTORY_ENV: &str = "PARTICLE_SHM_TEST_HISTORY";

/// [`HISTORY_ENV`]'s value: `compact`, or a history mode.
fn history_env() -> Option<String> {
    let v = std::env::var(HISTORY_ENV).unwrap_or_default();
    let v = v.trim();
    (!v.is_empty()).then(|| v.to_string())
}

fn test_compact() -> bool {
    history_env().as_deref() == Some("compact")
}

pub fn test_history() -> HistoryMode {
    match history_env() {
        None => HistoryMode::Auto,
        Some(v) if v == "compact" => HistoryMode::Pairs,
        Some(v) => HistoryMode::parse(&v).unwrap_or_else(|| {
            panic!("{HISTORY_ENV}={v:?}: not auto, double, in-place, pairs or compact")
        }),
    }
}

/// Copies of the particle state the CUDA tests keep (`auto`, `2`, `1`, `fewest`; unset: auto, which is
/// two for every test case): the device suite runs the one-GPU parity tests and the validation
/// tests that integrate with symplectic Euler once more with `1`.
pub const COPIES_ENV: &str = "PARTICLE_SHM_TEST_COPIES";

pub fn test_copies() -> StateCopies {
    let v = std::env::var(COPIES_ENV).unwrap_or_default();
    if v.trim().is_empty() {
        return StateCopies::Auto;
    }
    StateCopies::parse(v.trim())
        .unwrap_or_else(|| panic!("{COPIES_ENV}={v:?}: not auto, 2, 1 or fewest"))
}

/// The CUDA backend's default options with the tests' history mode ([`HISTORY_ENV`]) and
/// state copies ([`COPIES_ENV`]).
pub fn cuda_options() -> CudaOptions {
    if test_compact() {
        return solver::dem::cuda::compact_options(
            CudaOptions::default(),
            solver::dem::cuda::COMPACT_ROWS,
            solver::dem::cuda::COMPACT_SPILL,
        );
    }
    CudaOptions {
        history: test_history(),
        state_copies: test_copies(),
        ..CudaOptions::default()
    }
}

/// GPUs a multi-GPU test runs on (`cuda2` in [`BACKENDS_ENV`], `cuda_multi`): a comma list,
/// default `0,0` (two slabs on one GPU: the exchange is the same, between two streams).
pub const DEVICES_ENV: &str = "PARTICLE_SHM_TEST_DEVICES";

pub fn test_devices() -> Vec<usize> {
    let v = std::env::var(DEVICES_ENV).unwrap_or_default();
    if v.trim().is_empty() {
        return vec![0, 0];
    }
    v.split(',')
        .map(|d| {
            d.trim()
                .parse()
                .unwrap_or_else(|_| panic!("{DEVICES_ENV}={v:?}: not a GPU index list"))
        })
        .collect()
}

/// Sub-domain count every CPU simulation of the validation tests runs on (unset: the case's,
/// normally 1). CI runs the suite once with `PARTICLE_SHM_TEST_SUBDOMAINS=3`: a decomposed run
/// must pass every physics check the undecomposed one passes.
pub const SUBDOMAINS_ENV: &str = "PARTICLE_SHM_TEST_SUBDOMAINS";

/// `case` cut into [`SUBDOMAINS_ENV`] sub-domains when that is set and `kind` is the CPU.
pub fn decomposed(mut case: Case, kind: &BackendKind) -> Case {
    if *kind != BackendKind::Cpu {
        return case;
    }
    if let Ok(v) = std::env::var(SUBDOMAINS_ENV) {
        if !v.trim().is_empty() {
            let n: u32 = v
                .trim()
                .parse()
                .unwrap_or_else(|_| panic!("{SUBDOMAINS_ENV}={v:?} is not a whole number"));
            case.decomposition.subdomains = n;
        }
    }
    case
}

/// [`Simulation::new_on`] (decomposed as [`decomposed`] says); panics with the backend's name if
/// the simulation cannot start.
pub fn start_sim(name: &str, kind: &BackendKind, case: Case) -> Simulation {
    let case = decomposed(case, kind);
    let n = case.decomposition.subdomains as usize;
    let sim =
        Simulation::new_on(case, kind).unwrap_or_else(|e| panic!("[{name}] cannot start: {e}"));
    if *kind == BackendKind::Cpu {
        assert_eq!(
            sim.coordinator().plan().workers(),
            n,
            "[{name}] sub-domains"
        );
    }
    sim
}

/// [`Simulation::from_frame_on`]; panics with the backend's name if it cannot start.
pub fn start_from_frame(
    name: &str,
    kind: &BackendKind,
    case: Case,
    frame: &FrameInput,
) -> Simulation {
    Simulation::from_frame_on(decomposed(case, kind), frame, kind)
        .unwrap_or_else(|e| panic!("[{name}] cannot start from a frame: {e}"))
}

/// Advances `n` steps; panics with the backend's name if a step fails.
pub fn steps(sim: &mut Simulation, name: &str, n: u64) {
    sim.step_n(n)
        .unwrap_or_else(|e| panic!("[{name}] step failed: {e}"));
}

/// Steps until one contact is over: `gap(sim)` (the surface separation) goes negative and back;
/// returns (duration [s], rebound ratio -speed_after / speed_before) with the crossing times
/// interpolated linearly between steps at gap = 0. `speed(sim)` is the approach speed. `name`
/// is the backend's, for messages.
pub fn contact_episode(
    name: &str,
    mut sim: Simulation,
    gap: impl Fn(&Simulation) -> f64,
    speed: impl Fn(&Simulation) -> f64,
) -> (f64, f64) {
    let v_in = speed(&sim);
    let (mut t_in, mut t_out) = (None, None);
    let mut prev = (sim.time(), gap(&sim));
    for _ in 0..200_000 {
        steps(&mut sim, name, 1);
        let now = (sim.time(), gap(&sim));
        let cross = |a: (f64, f64), b: (f64, f64)| a.0 + (b.0 - a.0) * a.1 / (a.1 - b.1);
        if t_in.is_none() && prev.1 >= 0.0 && now.1 < 0.0 {
            t_in = Some(cross(prev, now));
        }
        if t_in.is_some() && prev.1 < 0.0 && now.1 >= 0.0 {
            t_out = Some(cross(prev, now));
            // One more step to be sure no force acts any more.
            steps(&mut sim, name, 1);
            break;
        }
        prev = now;
    }
    let t_in = t_in.unwrap_or_else(|| panic!("[{name}] contact did not start"));
    let t_out = t_out.unwrap_or_else(|| panic!("[{name}] contact did not end"));
    (t_out - t_in, -speed(&sim) / v_in)
}

pub fn linear_species(
    name: &str,
    radius: f64,
    density: f64,
    kn: f64,
    e: f64,
    mu: f64,
    mu_r: f64,
) -> Species {
    Species {
        name: name.into(),
        radius,
        density,
        young_modulus: None,
        normal_stiffness: Some(kn),
        poisson_ratio: 0.3,
        restitution: e,
        sliding_friction: mu,
        rolling_friction: mu_r,
    }
}

pub fn linear_wall(kn: f64, e: f64, mu: f64, mu_r: f64) -> WallMaterial {
    WallMaterial {
        young_modulus: None,
        normal_stiffness: Some(kn),
        poisson_ratio: 0.3,
        restitution: e,
        sliding_friction: mu,
        rolling_friction: mu_r,
    }
}

/// A case with one species, no sources, linear model; tests fill in the rest.
pub fn base_case(
    name: &str,
    species: Species,
    wall: WallMaterial,
    dt: f64,
    min: [f64; 3],
    max: [f64; 3],
    walls: bool,
) -> Case {
    Case {
        version: 1,
        method: Default::default(),
        dt,
        end_time: 1.0,
        gravity: [0.0, 0.0, -9.81],
        domain: Domain {
            min,
            max,
            walls: walls.into(),
            face_materials: Default::default(),
        },
        contact_model: ContactModelSpec::Linear {
            tangential_stiffness_ratio: 2.0 / 7.0,
            rolling_radius: Default::default(),
        },
        integrator: Integrator::SymplecticEuler,
        reorder_every: 50,
        species: vec![species],
        wall_material: wall,
        interactions: Vec::new(),
        sources: Vec::new(),
        meshes: Vec::new(),
        inflows: Vec::new(),
        outflows: Vec::new(),
        output: Output::default(),
        decomposition: Default::default(),
        origin: CaseOrigin {
            name: format!("<{name}>"),
            base_dir: Default::default(),
        },
    }
}

/// A single particle at `pos` with `velocity` (a 1-site grid source).
pub fn single(species: &str, pos: [f64; 3], velocity: [f64; 3], r: f64) -> Source {
    let s = 2.0 * r * 1.0001;
    Source::Grid {
        species: species.into(),
        min: [pos[0] - 0.5 * s, pos[1] - 0.5 * s, pos[2] - 0.5 * s],
        max: [pos[0] + 0.5 * s, pos[1] + 0.5 * s, pos[2] + 0.5 * s],
        spacing: s,
        count: Some(1),
        jitter: 0.0,
        seed: 0,
        velocity,
        shape: None,
    }
}

/// A fixed ramp of two triangles through the origin: 6 m along the unit downhill direction `u`
/// (in the x-z plane), 2 m wide along y; the shared diagonal is crossed at u = -0.75 for y = -0.25.
pub fn ramp(u: [f64; 3]) -> solver::case::MeshSpec {
    let p = |a: f64, b: f64| [u[0] * a, u[1] * a + b, u[2] * a];
    solver::case::MeshSpec {
        name: "ramp".into(),
        stl: None,
        triangles: Some(vec![
            [p(-3.0, -1.0), p(3.0, -1.0), p(3.0, 1.0)],
            [p(-3.0, -1.0), p(3.0, 1.0), p(-3.0, 1.0)],
        ]),
        scale: 1.0,
        material: None,
        motion: solver::core::geometry::Motion::Fixed,
    }
}

/// Closed cylinder (drum) about the y axis through the origin: radius `r`, y in [y0, y1],
/// `n` facets around, with end caps.
pub fn drum_triangles(r: f64, y0: f64, y1: f64, n: usize) -> Vec<Triangle> {
    let mut t = Vec::new();
    let p = |k: usize, y: f64| {
        let a = 2.0 * std::f64::consts::PI * k as f64 / n as f64;
        [r * a.cos(), y, r * a.sin()]
    };
    for k in 0..n {
        let (a0, a1, b0, b1) = (p(k, y0), p(k + 1, y0), p(k, y1), p(k + 1, y1));
        t.push([a0, a1, b1]);
        t.push([a0, b1, b0]);
        t.push([[0.0, y0, 0.0], a1, a0]);
        t.push([[0.0, y1, 0.0], b0, b1]);
    }
    t
}

/// A drum of radius 0.3 m and 0.1 m length about the y axis ([`drum_triangles`], 64 facets,
/// given inline) rotating at `rpm`, in a case with 1 cm spheres (linear, k = 1e4 N/m, e = 0.5,
/// mu = 0.5, mu_r = 0.02, also for the wall) and dt = 1e-4 s; no particles yet.
pub fn drum_case(rpm: f64) -> Case {
    let (rd, r, k) = (0.3, 0.01, 1e4);
    let mut case = base_case(
        "drum",
        linear_species("s", r, 2500.0, k, 0.5, 0.5, 0.02),
        linear_wall(k, 0.5, 0.5, 0.02),
        1e-4,
        [-0.32, -0.06, -0.32],
        [0.32, 0.06, 0.32],
        false,
    );
    case.meshes.push(solver::case::MeshSpec {
        name: "drum".into(),
        stl: None,
        triangles: Some(drum_triangles(rd, -0.05, 0.05, 64)),
        scale: 1.0,
        material: None,
        motion: solver::core::geometry::Motion::Rotation {
            axis_point: [0.0; 3],
            axis_direction: [0.0, 1.0, 0.0],
            rpm,
        },
    });
    case
}

/// Least-squares slope of y(x).
pub fn slope(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len() as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let sxy: f64 = x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum();
    let sxx: f64 = x.iter().map(|a| (a - mx) * (a - mx)).sum();
    sxy / sxx
}

/// 700 spheres thrown into a 0.3 m box with friction, rolling resistance and walls, onto a blade
/// turning at 120 rpm, with storage reordered every 7 steps: the case the determinism and
/// decomposition tests compare bit for bit.
pub fn friction_box_with_blade(name: &str, integrator: Integrator) -> Case {
    let k = 2e4;
    let mut case = base_case(
        name,
        linear_species("s", 0.01, 2500.0, k, 0.6, 0.4, 0.05),
        linear_wall(k, 0.6, 0.4, 0.05),
        5e-5,
        [-0.15, -0.15, 0.0],
        [0.15, 0.15, 0.3],
        true,
    );
    case.integrator = integrator;
    case.reorder_every = 7;
    case.sources.push(Source::RandomBox {
        species: "s".into(),
        min: [-0.15, -0.15, 0.06],
        max: [0.15, 0.15, 0.2],
        count: 700,
        seed: 11,
        velocity: [0.1, 0.0, -1.5],
        shape: None,
    });
    case.meshes.push(solver::case::MeshSpec {
        name: "blade".into(),
        stl: None,
        triangles: Some(vec![
            [[-0.12, 0.0, 0.01], [0.12, 0.0, 0.01], [0.12, 0.0, 0.05]],
            [[-0.12, 0.0, 0.01], [0.12, 0.0, 0.05], [-0.12, 0.0, 0.05]],
        ]),
        scale: 1.0,
        material: None,
        motion: solver::core::geometry::Motion::Rotation {
            axis_point: [0.0; 3],
            axis_direction: [0.0, 0.0, 1.0],
            rpm: 120.0,
        },
    });
    case
}

/// Every bit of a state (ids, kinematics, forces, contacts, history, clock), to compare runs
/// that must be identical.
pub fn bits(s: &SimState) -> Vec<u64> {
    let v3 = |v: &Vec<[f64; 3]>| v.iter().flatten().map(|c| c.to_bits()).collect::<Vec<_>>();
    let mut out: Vec<u64> = s.id.iter().map(|&i| i as u64).collect();
    out.extend(s.species.iter().map(|&x| x as u64));
    out.extend(v3(&s.pos));
    out.extend(v3(&s.vel));
    out.extend(v3(&s.omega));
    out.extend(v3(&s.force));
    out.extend(v3(&s.torque));
    out.extend(s.contacts.iter().map(|&c| c as u64));
    out.extend(s.history.iter().flat_map(|h| {
        [
            h.partner as u64,
            h.xi[0].to_bits(),
            h.xi[1].to_bits(),
            h.xi[2].to_bits(),
        ]
    }));
    out.extend([s.time.to_bits(), s.step, s.history_overflows]);
    out
}

/// What a frame gets: the f32 arrays the publishing path packs (positions, velocities, spins,
/// forces, contact counts; id order) as bits, waiting for a device copy.
pub fn frame_bits(sim: &mut Simulation) -> Vec<u32> {
    let n = sim.num_particles();
    let (mut p, mut v, mut w, mut f) = (
        vec![[0f32; 3]; n],
        vec![[0f32; 3]; n],
        vec![[0f32; 3]; n],
        vec![[0f32; 3]; n],
    );
    let mut c = vec![0u32; n];
    let out = solver::exec::worker::RawKinematics {
        count: n,
        positions: p.as_mut_ptr(),
        velocities: v.as_mut_ptr(),
        angular_velocities: w.as_mut_ptr(),
        forces: f.as_mut_ptr(),
        contact_counts: c.as_mut_ptr(),
    };
    // SAFETY: every array holds n elements and outlives the copy, which is waited for below.
    if unsafe { sim.begin_kinematics_copy(out) }.unwrap() {
        sim.wait_kinematics_copy().unwrap();
    }
    let mut bits: Vec<u32> = [p, v, w, f]
        .iter()
        .flat_map(|a| a.iter().flatten().map(|x| x.to_bits()).collect::<Vec<_>>())
        .collect();
    bits.extend(c);
    bits
}

/// The state at t = 0 of `case` (particles placed by its sources, ids in source order).
pub fn initial_state(case: &Case) -> SimState {
    let p = case.generate_particles().expect("particles");
    SimState::new(
        0.0,
        0,
        p.iter().map(|q| q.species).collect(),
        p.iter().map(|q| q.position).collect(),
        p.iter().map(|q| q.velocity).collect(),
        vec![[0.0; 3]; p.len()],
    )
}

/// Bits of the ids, positions, velocities, spins and contact counts: what the CPU and a GPU
/// share exactly in f64 mode (their force, torque and history storage differ).
pub fn kinematic_bits(s: &SimState) -> Vec<u64> {
    let mut out: Vec<u64> = s.id.iter().map(|&i| i as u64).collect();
    out.extend(
        s.pos
            .iter()
            .chain(&s.vel)
            .chain(&s.omega)
            .flatten()
            .map(|x| x.to_bits()),
    );
    out.extend(s.contacts.iter().map(|&c| c as u64));
    out
}

/// A quasi-2D flat-bottomed silo (6 cm wide, 1 cm thick) with a 2 cm orifice in its floor at
/// z = 0, filled with 2 mm spheres; below the floor either a closed bin (`outflow` false) or an
/// open box with an outflow region under the orifice.
pub fn silo_case(outflow: bool) -> Case {
    let r = 0.002;
    let mut case = base_case(
        "silo",
        linear_species("g", r, 2500.0, 2e3, 0.3, 0.5, 0.0),
        linear_wall(2e3, 0.3, 0.5, 0.0),
        2e-5,
        [0.0, 0.0, -0.1],
        [0.06, 0.01, 0.12],
        true,
    );
    case.sources.push(solver::case::Source::Grid {
        species: "g".into(),
        min: [0.0, 0.0, 0.002],
        max: [0.06, 0.01, 0.12],
        spacing: 0.0042,
        count: Some(700),
        jitter: 0.3,
        seed: 8,
        velocity: [0.0; 3],
        shape: None,
    });
    let floor = |x0: f64, x1: f64| {
        vec![
            [[x0, -0.01, 0.0], [x1, -0.01, 0.0], [x1, 0.02, 0.0]],
            [[x0, -0.01, 0.0], [x1, 0.02, 0.0], [x0, 0.02, 0.0]],
        ]
    };
    let mut tris = floor(-0.01, 0.02);
    tris.extend(floor(0.04, 0.07));
    case.meshes.push(solver::case::MeshSpec {
        name: "floor".into(),
        stl: None,
        triangles: Some(tris),
        scale: 1.0,
        material: None,
        motion: solver::core::geometry::Motion::Fixed,
    });
    if outflow {
        case.domain.walls = solver::case::Walls(0b00_1111);
        case.outflows.push(solver::case::Outflow::Box {
            min: [-1.0, -1.0, -1.0],
            max: [1.0, 1.0, -0.03],
        });
        case.outflows
            .push(solver::case::Outflow::OutsideDomain { margin: 0.0 });
    }
    case
}

/// An empty bin fed by an inflow source: 1 kg/s of a 50/50 (by mass) mix of 3 and 5 mm spheres
/// over [0.05, 0.35) s, poured downwards at 0.5 m/s from a box near the top.
pub fn pour_case() -> Case {
    let mut case = base_case(
        "pour",
        linear_species("fine", 0.003, 2500.0, 1e4, 0.3, 0.5, 0.0),
        linear_wall(1e4, 0.3, 0.5, 0.0),
        2e-5,
        [0.0, 0.0, 0.0],
        [0.2, 0.2, 0.4],
        true,
    );
    let mut coarse = case.species[0].clone();
    coarse.name = "coarse".into();
    coarse.radius = 0.005;
    case.species.push(coarse);
    case.inflows.push(solver::case::Inflow {
        species: SpeciesChoice::Mix {
            basis: FractionBasis::Mass,
            fractions: vec![("coarse".into(), 0.5), ("fine".into(), 0.5)],
        },
        min: [0.02, 0.02, 0.3],
        max: [0.18, 0.18, 0.39],
        shape: None,
        rate: None,
        mass_rate: Some(1.0),
        start: 0.05,
        end: Some(0.35),
        velocity: [0.0, 0.0, -0.5],
        seed: 21,
        interval: 0.01,
    });
    case.end_time = 0.4;
    case
}
