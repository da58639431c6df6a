//! One simulation on several GPUs (issue 14) is the simulation on one GPU: in f64 mode and in
//! f32 mode, the final state (kinematics, forces, contact history) and every frame are
//! bit-identical to one GPU's, and the f64 run to the CPU's, for a falling box with friction and
//! a rotating blade (both integrators, cut along z and along x), the rotating STL drum cut
//! through its axis, and with the slab bounds moving under load balancing.
//!
//! Runs where an NVIDIA driver loads (else prints "skipped: no GPU"), on the GPUs of
//! `PARTICLE_SHM_TEST_DEVICES` (default `0,0`: two slabs on one GPU, exchanging through device
//! copies between two streams; `0,1` on a two-GPU machine).

mod common;
use common::*;
use solver::case::Integrator;
use solver::decomp::{Axis, Balance, Decomposition};
use solver::dem::cuda::{self, CudaGroup, CudaOptions, GroupOptions};
use solver::exec::sim::BackendKind;
use solver::exec::worker::FusedWorker;
use solver::{Case, SimState, Simulation};
use std::path::Path;
use std::sync::Arc;

fn gpu_present() -> bool {
    if cuda::driver::driver_available().is_err() {
        println!("skipped: no GPU");
        return false;
    }
    true
}

/// The one-GPU reference searches every step (no Verlet skin), as every GPU of a group does:
/// then the bits are the same.
fn opts(double: bool) -> CudaOptions {
    CudaOptions {
        double,
        skin: 0.0,
        ..cuda_options()
    }
}

/// `count` slabs on the test GPUs (the list repeated as needed).
fn group(double: bool, count: usize) -> BackendKind {
    let d = test_devices();
    BackendKind::CudaGroup(opts(double), (0..count).map(|i| d[i % d.len()]).collect())
}

fn drum() -> Case {
    let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/cases/drum.toml"));
    Case::from_file(path).unwrap_or_else(|e| panic!("{e}")).0
}

/// Frames every 500 steps and the final state.
fn run(
    mut case: Case,
    kind: &BackendKind,
    axis: Option<Axis>,
    steps: u64,
) -> (Vec<Vec<u32>>, SimState) {
    case.decomposition = Decomposition {
        subdomains: 1,
        split_axis: axis,
        balance: Balance::Off,
    };
    let mut sim = Simulation::new_on(case, kind).unwrap_or_else(|e| panic!("{kind:?}: {e}"));
    if let Some(r) = sim.device_report() {
        println!("{r}");
    }
    let mut frames = Vec::new();
    let mut done = 0;
    while done < steps {
        let n = 500.min(steps - done);
        sim.step_n(n).unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        done += n;
        frames.push(frame_bits(&mut sim));
    }
    (frames, sim.state().unwrap())
}

/// Several GPUs against one (every bit, frames too) and, in f64, against the CPU.
fn check(name: &str, case: Case, slabs: &[(usize, Option<Axis>)], steps: u64) {
    for double in [true, false] {
        let (f1, s1) = run(case.clone(), &BackendKind::Cuda(opts(double)), None, steps);
        if double {
            let (_, c) = run(case.clone(), &BackendKind::Cpu, None, steps);
            assert!(
                kinematic_bits(&s1) == kinematic_bits(&c),
                "{name}: one GPU (f64) differs from the CPU"
            );
        }
        for &(count, axis) in slabs {
            let (f, s) = run(case.clone(), &group(double, count), axis, steps);
            let what = format!("{name}, {count} slabs along {axis:?}, f64 {double}");
            assert_eq!(s.pos.len(), s1.pos.len(), "{what}: particle count");
            let mut ids = s.id.clone();
            ids.dedup();
            assert_eq!(ids.len(), s.id.len(), "{what}: ids not unique");
            assert!(
                bits(&s) == bits(&s1),
                "{what}: final state differs from one GPU"
            );
            assert!(f == f1, "{what}: frames differ from one GPU");
            println!("{what}: identical to one GPU after {steps} steps");
        }
    }
}

#[test]
fn falling_box_with_friction_is_identical_on_two_three_and_four_gpus() {
    if !gpu_present() {
        return;
    }
    let case = friction_box_with_blade("falling box", Integrator::SymplecticEuler);
    check(
        "falling box",
        case,
        &[
            (2, Some(Axis::Z)),
            (3, Some(Axis::X)),
            (2, None),
            (4, Some(Axis::Y)),
        ],
        2000,
    );
}

#[test]
fn velocity_verlet_is_identical_on_two_gpus() {
    if !gpu_present() {
        return;
    }
    let case = friction_box_with_blade("falling box", Integrator::VelocityVerlet);
    check("falling box (Verlet)", case, &[(2, Some(Axis::Z))], 2000);
}

/// The drum's axis (y, at x = z = 0) lies on the boundary of a cut along x: the particles cross
/// it thousands of times with their contact history.
#[test]
fn rotating_drum_cut_through_its_axis_loses_nothing() {
    if !gpu_present() {
        return;
    }
    check(
        "drum",
        drum(),
        &[(2, Some(Axis::X)), (3, Some(Axis::Z))],
        4000,
    );
}

/// The slab bounds move (by count and by measured time) while the bed forms, and the result
/// stays the one-GPU result.
#[test]
fn balancing_moves_the_bounds_and_changes_no_bits() {
    if !gpu_present() {
        return;
    }
    let case = friction_box_with_blade("falling box", Integrator::SymplecticEuler);
    let sc = Arc::new(cuda::step_context(&case).unwrap());
    let state = initial_state(&case);
    let d = test_devices();
    let mut one = cuda::CudaBackend::new(sc.clone(), state.clone(), &opts(true)).unwrap();
    let mut reference = Vec::new();
    for _ in 0..3000 / 16 {
        one.advance(16).unwrap();
        reference.push(bits(&one.export_state().unwrap()));
    }
    let start = |balance, slabs: usize| {
        CudaGroup::new(
            sc.clone(),
            &state,
            &opts(true),
            &GroupOptions {
                devices: (0..slabs).map(|i| d[i % d.len()]).collect(),
                axis: Some(Axis::Z),
                balance,
            },
        )
        .unwrap()
    };
    let mut failures = Vec::new();
    for (balance, slabs) in [
        (Balance::Off, 3),
        (Balance::Count, 2),
        (Balance::Count, 3),
        (Balance::Time, 3),
    ] {
        // A run as the solver makes it (no synchronisation but the group's own), then, if it
        // differs, the same in steps of 16 to say where the difference appears.
        let mut g = start(balance, slabs);
        let first = g.bounds().to_vec();
        g.advance(16 * reference.len() as u64).unwrap();
        let what = format!("balance {} on {slabs} slabs", balance.name());
        println!(
            "{what}: bounds {first:?} -> {:?}, owned {:?}, {} moves, {} migrations",
            g.bounds(),
            g.owned(),
            g.rebalances(),
            g.migrations()
        );
        // By time, 700 particles cost every GPU about the same (launch overheads): no move
        // is right there; by count the bed must pull the bounds down.
        if balance == Balance::Count && g.rebalances() == 0 {
            failures.push(format!("{what}: the bounds never moved"));
        }
        if bits(&g.export_state().unwrap()) == *reference.last().unwrap() {
            continue;
        }
        let mut g = start(balance, slabs);
        let mut at = None;
        for (chunk, r) in reference.iter().enumerate() {
            g.advance(16).unwrap();
            if bits(&g.export_state().unwrap()) != *r {
                at = Some(16 * (chunk + 1));
                break;
            }
        }
        failures.push(format!(
            "{what}: differs from one GPU after {} steps; in steps of 16 it {}",
            16 * reference.len(),
            match at {
                Some(s) => format!("differs from step {s} on (bounds {:?})", g.bounds()),
                None => "does not differ (a race between the GPUs' streams?)".into(),
            }
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A checkpoint written on two GPUs continues bit for bit on one and on three, and one written
/// on one GPU continues on two (both integrators: Verlet carries its forces through it).
#[test]
fn checkpoints_move_between_one_and_several_gpus() {
    if !gpu_present() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("solver-multi-ckpt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let one = BackendKind::Cuda(opts(true));
    for integrator in [Integrator::SymplecticEuler, Integrator::VelocityVerlet] {
        let case = friction_box_with_blade("falling box", integrator);
        let mut straight = Simulation::new_on(case.clone(), &one).unwrap();
        straight.step_n(1200).unwrap();
        let reference = bits(&straight.state().unwrap());
        for (from, to) in [
            (group(true, 2), one.clone()),
            (group(true, 2), group(true, 3)),
            (one.clone(), group(true, 2)),
        ] {
            let mut first = Simulation::new_on(case.clone(), &from).unwrap();
            first.step_n(600).unwrap();
            let path = dir.join(format!("{integrator:?}.ckpt"));
            first.save_checkpoint(&path).unwrap();
            drop(first);
            let mut resumed = Simulation::load_checkpoint_with(
                &path,
                &to,
                solver::decomp::DecompositionOverride::default(),
            )
            .unwrap_or_else(|e| panic!("{to:?}: {e}"));
            assert_eq!(resumed.step_index(), 600);
            resumed.step_n(600).unwrap();
            assert!(
                bits(&resumed.state().unwrap()) == reference,
                "{integrator:?}: {from:?} -> checkpoint -> {to:?} differs from a straight run"
            );
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// A pour from an inflow source (1 kg/s of a 3/5 mm mix from t = 0.05 s) on 2 slabs along z
/// (the particles fall through the bound) and 3 along x, with both integrators: the new
/// particles go to the GPU owning their layer and on to the others as ghosts and migrants; the
/// inflow progress, ids, final state and every frame are one GPU's, bit for bit (f64 and f32).
#[test]
fn inflow_on_several_gpus_is_one_gpus() {
    if !gpu_present() {
        return;
    }
    for integrator in [Integrator::SymplecticEuler, Integrator::VelocityVerlet] {
        let mut case = pour_case();
        case.integrator = integrator;
        for double in [true, false] {
            let (f1, s1) = run(case.clone(), &BackendKind::Cuda(opts(double)), None, 12_000);
            assert!(s1.pos.len() > 100, "the pour must have added particles");
            for (count, axis) in [(2, Some(Axis::Z)), (3, Some(Axis::X))] {
                let (f, s) = run(case.clone(), &group(double, count), axis, 12_000);
                let what =
                    format!("pour {integrator:?}, {count} slabs along {axis:?}, f64 {double}");
                assert_eq!(s.flow, s1.flow, "{what}: inflow progress");
                assert_eq!(s.id, s1.id, "{what}: ids");
                assert!(
                    bits(&s) == bits(&s1),
                    "{what}: final state differs from one GPU"
                );
                assert!(f == f1, "{what}: frames differ from one GPU");
                println!("{what}: identical to one GPU; {} particles", s.pos.len());
            }
        }
    }
}

/// A silo discharging into outflow regions on 2 slabs along z (the particles leave through the
/// bottom slab) and 3 along x: the removed count and mass, the
/// live ids, the final state and every frame are one GPU's, bit for bit (f64 and f32).
#[test]
fn outflow_on_several_gpus_is_one_gpus() {
    if !gpu_present() {
        return;
    }
    let case = silo_case(true);
    for double in [true, false] {
        let (f1, s1) = run(case.clone(), &BackendKind::Cuda(opts(double)), None, 12_000);
        for (count, axis) in [(2, Some(Axis::Z)), (3, Some(Axis::X))] {
            let (f, s) = run(case.clone(), &group(double, count), axis, 12_000);
            let what = format!("silo, {count} slabs along {axis:?}, f64 {double}");
            assert_eq!(s.flow, s1.flow, "{what}: removed count or mass");
            assert_eq!(s.id, s1.id, "{what}: live ids");
            assert!(
                bits(&s) == bits(&s1),
                "{what}: final state differs from one GPU"
            );
            assert!(f == f1, "{what}: frames differ from one GPU");
            println!(
                "{what}: identical to one GPU; {} removed, {} live",
                s.flow.removed_count,
                s.pos.len()
            );
        }
    }
}

/// f32 with the Verlet skin (the default options), the ghost refresh beside the collide even
/// where the slabs share a GPU (the default on distinct GPUs).
fn skin_opts() -> CudaOptions {
    CudaOptions {
        double: false,
        overlap: Some(true),
        ..cuda_options()
    }
}

/// A group with the skin and one GPU with the skin, side by side on `case`.
fn skin_pair(
    case: &Case,
    slabs: usize,
    axis: Axis,
    balance: Balance,
) -> (cuda::CudaBackend, CudaGroup) {
    skin_pair_with(case, slabs, axis, balance, &skin_opts())
}

/// [`skin_pair`] with the group's options `group_opts`.
fn skin_pair_with(
    case: &Case,
    slabs: usize,
    axis: Axis,
    balance: Balance,
    group_opts: &CudaOptions,
) -> (cuda::CudaBackend, CudaGroup) {
    let sc = Arc::new(cuda::step_context(case).unwrap());
    let state = initial_state(case);
    let d = test_devices();
    let one = cuda::CudaBackend::new(sc.clone(), state.clone(), &skin_opts()).unwrap();
    let g = CudaGroup::new(
        sc,
        &state,
        group_opts,
        &GroupOptions {
            devices: (0..slabs).map(|i| d[i % d.len()]).collect(),
            axis: Some(axis),
            balance,
        },
    )
    .unwrap();
    (one, g)
}

/// Runs one GPU and the group side by side for `steps` steps, one step at a time: where the
/// group will search whatever its schedule (the moves passed half the skin,
/// which its ghost layers do not cover: one GPU searches wider cells there instead), one GPU is
/// made to search too. Compares every bit every 500 steps; returns the group's (searches,
/// steps, searches forced by moves).
fn lockstep(
    what: &str,
    one: &mut cuda::CudaBackend,
    g: &mut CudaGroup,
    steps: u64,
) -> (u64, u64, u64) {
    for step in 1..=steps {
        one.advance(1).unwrap();
        g.advance(1)
            .unwrap_or_else(|e| panic!("{what}: step {step}: {e}"));
        if g.search_forced_next() {
            one.sim_mut().force_search_next();
        }
        if step % 500 == 0 || step == steps {
            assert!(
                bits(&g.export_state().unwrap()) == bits(&one.export_state().unwrap()),
                "{what}: differs from one GPU with its skin after {step} steps ({})",
                g.skin_summary().unwrap_or_default()
            );
        }
    }
    let counts = g.skin_counts().expect("the group has a skin");
    let (one_searches, _, _) = one.sim().skin_counts().expect("one GPU has a skin");
    assert_eq!(counts.0, one_searches, "{what}: the schedules differ");
    counts
}

/// The frame of a state as the publishing path packs it (frame_bits' layout).
fn frame_of(s: &SimState) -> Vec<u32> {
    let f32s = |v: &Vec<[f64; 3]>| {
        v.iter()
            .flatten()
            .map(|x| (*x as f32).to_bits())
            .collect::<Vec<_>>()
    };
    let mut out = f32s(&s.pos);
    out.extend(f32s(&s.vel));
    out.extend(f32s(&s.omega));
    out.extend(f32s(&s.force));
    out.extend(s.contacts.iter().copied());
    out
}

/// With the Verlet skin (f32, the default) every GPU of a group searches at the same steps (the
/// schedule of one GPU, from the largest move over all GPUs), keeps its slots and ghosts in
/// between and refreshes the ghosts from their owners: every bit is one GPU's with its skin
/// searching at the same steps. The falling box searches early while it falls (the moves pass
/// half the skin); the drum rarely. Frames from the group are its state, no ghost in them.
#[test]
fn a_skin_on_several_gpus_is_one_gpus_skin() {
    if !gpu_present() {
        return;
    }
    let falling = friction_box_with_blade("falling box", Integrator::SymplecticEuler);
    for (name, case, slabs, axis, steps) in [
        ("falling box", falling.clone(), 2, Axis::Z, 3000),
        ("falling box", falling.clone(), 3, Axis::X, 3000),
        ("drum", drum(), 2, Axis::X, 4000),
        // The packing validation's bed (2,000 particles poured and settled, 1.5 s).
        (
            "packing box",
            Case::falling_box(2000, 1e-4),
            2,
            Axis::Z,
            15_000,
        ),
    ] {
        let what = format!("{name}, {slabs} slabs along {axis:?}, skin");
        let (mut one, mut g) = skin_pair(&case, slabs, axis, Balance::Off);
        let (searches, stepped, forced) = lockstep(&what, &mut one, &mut g, steps);
        assert!(
            searches * 3 < stepped,
            "{what}: {searches} searches in {stepped} steps: the skin was hardly used"
        );
        println!(
            "{what}: identical to one GPU after {steps} steps; {} ({forced} forced)",
            g.skin_summary().unwrap_or_default()
        );
    }
    // The frames, through the solver's own path: what the group publishes is its state.
    let d = test_devices();
    let kind = BackendKind::CudaGroup(skin_opts(), vec![d[0], d[1 % d.len()]]);
    let mut case = falling;
    case.decomposition = Decomposition {
        subdomains: 1,
        split_axis: Some(Axis::Z),
        balance: Balance::Off,
    };
    let mut sim = Simulation::new_on(case, &kind).unwrap();
    for _ in 0..4 {
        sim.step_n(500).unwrap();
        let frame = frame_bits(&mut sim);
        assert!(
            frame == frame_of(&sim.state().unwrap()),
            "skin: a group's frame is not its state"
        );
    }
}

/// Searches far apart (a fixed interval of 1,000 steps: the moves pass half the skin all the
/// time), and bounds that move under count balancing (at the next search): still every
/// bit one GPU's searching at the same steps, nothing lost, ids unique.
#[test]
fn forced_searches_lose_nothing() {
    if !gpu_present() {
        return;
    }
    let case = friction_box_with_blade("falling box", Integrator::SymplecticEuler);
    for (fixed, balance, slabs) in [(Some(1000), Balance::Off, 2), (None, Balance::Count, 3)] {
        let what = format!(
            "fixed interval {fixed:?}, balance {}, {slabs} slabs",
            balance.name()
        );
        let (mut one, mut g) = skin_pair(&case, slabs, Axis::Z, balance);
        if let Some(k) = fixed {
            g.fix_skin_interval(k);
            one.sim_mut().fix_skin_interval(k);
        }
        let (searches, stepped, forced) = lockstep(&what, &mut one, &mut g, 3000);
        let s = g.export_state().unwrap();
        let mut ids = s.id.clone();
        ids.dedup();
        assert_eq!(ids.len(), 700, "{what}: ids lost or repeated");
        println!(
            "{what}: identical to one GPU; {searches} searches in {stepped} steps ({forced} \
             forced by moves), {} moves of the bounds, {} migrations",
            g.rebalances(),
            g.migrations()
        );
        if fixed.is_some() {
            assert!(forced > 0, "{what}: no search was forced");
        } else {
            assert!(g.rebalances() > 0, "{what}: the bounds never moved");
        }
        assert!(g.migrations() > 0, "{what}: nothing crossed a bound");
    }
}

/// Between searches each GPU refreshes its ghosts on a second stream while it collides the
/// slots that read none, then collides the boundary layers' slots (the default), or refreshes
/// before the whole collide (`overlap: false`): both give one GPU's bits, on a cut along z
/// (boundary layers are slot ranges) and along x (they are not: the interior pass skips them
/// slot by slot). The group reports how much of its exchange ran beside the collide.
#[test]
fn the_refresh_beside_the_collide_changes_no_bits() {
    if !gpu_present() {
        return;
    }
    let case = friction_box_with_blade("falling box", Integrator::SymplecticEuler);
    for (overlap, slabs, axis) in [(true, 2, Axis::Z), (true, 3, Axis::X), (false, 2, Axis::Z)] {
        let what = format!("overlap {overlap}, {slabs} slabs along {axis:?}");
        let opts = CudaOptions {
            overlap: Some(overlap),
            ..skin_opts()
        };
        let (mut one, mut g) = skin_pair_with(&case, slabs, axis, Balance::Off, &opts);
        let (searches, stepped, _) = lockstep(&what, &mut one, &mut g, 2000);
        assert!(searches * 3 < stepped, "{what}: the skin was hardly used");
        let phases = g.phase_times();
        let hidden = g.hidden_share();
        assert!(
            phases.iter().all(|p| p.0 > 0.0 && p.2 >= 0.0 && p.2 <= p.0),
            "{what}: exchange and hidden times per GPU {phases:?}"
        );
        assert!(
            (0.0..=1.0).contains(&hidden),
            "{what}: hidden share {hidden}"
        );
        if !overlap {
            assert_eq!(hidden, 0.0, "{what}: nothing runs beside the collide");
        }
        println!(
            "{what}: identical to one GPU; {searches} searches in {stepped} steps; exchange {:.1} % hidden; per GPU (exchange, rest, hidden) ms {:?}",
            100.0 * hidden,
            phases
                .iter()
                .map(|p| (p.0 * 1e3, p.1 * 1e3, p.2 * 1e3))
                .collect::<Vec<_>>()
        );
    }
}

/// A group's frames hold their steps' state (kinematics bit for bit in f32, contact counts),
/// and publishing changes nothing: a group publishing after every step against a twin group
/// that does not. With symplectic Euler each GPU's collide of the next step writes its own
/// particles of a frame into GPU 0's staging (publish.rs, multi.rs), whatever that step does
/// first: refresh its ghosts beside the collide or before it, search and hand particles across
/// the bounds (every step without a skin), move the bounds (count balancing on three slabs), or
/// remove particles (the silo's outflow: frames list the live ids by rank). Every fourth frame
/// is waited for at once, as a pause or a requested frame is (`dem_pack` packs it); velocity
/// Verlet and `defer_frames` off pack every frame at once.
#[test]
fn a_groups_frames_written_by_the_next_collides_are_their_steps_state() {
    use solver::exec::worker::RawKinematics;
    if !gpu_present() {
        return;
    }
    let falling = friction_box_with_blade("falling box", Integrator::SymplecticEuler);
    let verlet = friction_box_with_blade("falling box", Integrator::VelocityVerlet);
    let silo = silo_case(true);
    let beside = skin_opts();
    let before = CudaOptions {
        overlap: Some(false),
        ..skin_opts()
    };
    let at_once = CudaOptions {
        defer_frames: false,
        ..skin_opts()
    };
    // (what, case, options, slabs, axis, balance, steps, steps between frames, deferred)
    let cases = [
        (
            "skin, refresh beside",
            &falling,
            &beside,
            2,
            Axis::Z,
            Balance::Off,
            2000,
            1,
            true,
        ),
        (
            "skin, refresh before",
            &falling,
            &before,
            2,
            Axis::Z,
            Balance::Off,
            2000,
            1,
            true,
        ),
        (
            "search every step",
            &falling,
            &opts(false),
            2,
            Axis::Z,
            Balance::Off,
            1500,
            1,
            true,
        ),
        (
            "f64",
            &falling,
            &opts(true),
            2,
            Axis::X,
            Balance::Off,
            1500,
            1,
            true,
        ),
        (
            "count balancing",
            &falling,
            &beside,
            3,
            Axis::Z,
            Balance::Count,
            2000,
            1,
            true,
        ),
        (
            "outflow",
            &silo,
            &beside,
            2,
            Axis::Z,
            Balance::Off,
            12_000,
            40,
            true,
        ),
        (
            "velocity Verlet",
            &verlet,
            &opts(false),
            2,
            Axis::Z,
            Balance::Off,
            400,
            1,
            false,
        ),
        (
            "packed at once",
            &falling,
            &at_once,
            2,
            Axis::Z,
            Balance::Off,
            400,
            1,
            false,
        ),
    ];
    let d = test_devices();
    for (what, case, o, slabs, axis, balance, steps, every, deferred) in cases {
        let sc = Arc::new(cuda::step_context(case).unwrap());
        let state = initial_state(case);
        let n0 = state.pos.len();
        let group = GroupOptions {
            devices: (0..slabs).map(|i| d[i % d.len()]).collect(),
            axis: Some(axis),
            balance,
        };
        let mut g = CudaGroup::new(sc.clone(), &state, o, &group).unwrap();
        let mut h = CudaGroup::new(sc, &state, o, &group).unwrap();
        // One page-locked block, as a segment is: positions, velocities, angular velocities
        // (3 floats each) and contact counts of n0 particles.
        let mut block = vec![0u32; 10 * n0];
        let base = block.as_mut_ptr();
        // SAFETY: `block` outlives the registration (released below, before it drops).
        unsafe { g.register_host_memory(base.cast(), 40 * n0) }.unwrap();
        let (mut removed, mut published, mut checked) = (0, 0u64, 0u64);
        let check = |e: &SimState, checked: &mut u64| {
            let m = e.pos.len();
            // SAFETY: the copy completed; the host reads the block only now.
            let f = unsafe { std::slice::from_raw_parts(base as *const u32, 10 * n0) };
            let f32s = |v: &Vec<[f64; 3]>| {
                v.iter()
                    .flatten()
                    .map(|x| (*x as f32).to_bits())
                    .collect::<Vec<_>>()
            };
            for (a, (got, want)) in [
                (0, (&f[..3 * m], f32s(&e.pos))),
                (1, (&f[3 * n0..3 * n0 + 3 * m], f32s(&e.vel))),
                (2, (&f[6 * n0..6 * n0 + 3 * m], f32s(&e.omega))),
                (3, (&f[9 * n0..9 * n0 + m], e.contacts.clone())),
            ] {
                if let Some(k) = (0..want.len()).find(|&k| got[k] != want[k]) {
                    panic!(
                        "{what}: the frame of step {} differs from its state in array {a} \
                         (position, velocity, angular velocity, contacts) at element {k} \
                         (frame index {}, id {})",
                        e.step,
                        k / if a == 3 { 1 } else { 3 },
                        e.id[k / if a == 3 { 1 } else { 3 }]
                    );
                }
            }
            *checked += 1;
        };
        let mut expect: Option<SimState> = None;
        for step in 1..=steps {
            g.advance(1)
                .unwrap_or_else(|e| panic!("{what}: step {step}: {e}"));
            h.advance(1).unwrap();
            let (rg, rh) = (g.take_removed().unwrap(), h.take_removed().unwrap());
            assert_eq!(rg, rh, "{what}: the same particles removed");
            removed += rg.len();
            if let Some(e) = expect.take() {
                // Written by this step's collides, copied behind them.
                g.wait_kinematics_copy().unwrap();
                check(&e, &mut checked);
            }
            if step % every != 0 || step == steps {
                continue;
            }
            let e = h.export_state().unwrap();
            if published % 4 == 0 {
                // The bench's frame check reads positions alone.
                assert_eq!(
                    h.positions().unwrap(),
                    e.pos,
                    "{what}: positions() are the state's"
                );
            }
            let m = e.pos.len();
            // SAFETY: the block holds n0 >= m elements of each array; the host reads it only
            // once the copy completed (wait_kinematics_copy).
            let out = unsafe {
                RawKinematics {
                    count: m,
                    positions: base.cast(),
                    velocities: base.add(3 * n0).cast(),
                    angular_velocities: base.add(6 * n0).cast(),
                    forces: std::ptr::null_mut(),
                    contact_counts: base.add(9 * n0),
                }
            };
            // SAFETY: as above.
            unsafe { g.begin_kinematics_copy(out) }.unwrap();
            assert_eq!(g.publication_deferred(), deferred, "{what}");
            if deferred {
                assert!(
                    !g.kinematics_copy_done().unwrap(),
                    "{what}: a frame is not done before a step wrote it"
                );
            }
            published += 1;
            if published % 4 == 0 {
                g.wait_kinematics_copy().unwrap();
                check(&e, &mut checked);
            } else {
                expect = Some(e);
            }
        }
        g.release_host_memory();
        let (eg, eh) = (g.export_state().unwrap(), h.export_state().unwrap());
        assert!(bits(&eg) == bits(&eh), "{what}: publishing changed the run");
        assert_eq!(checked, published, "{what}: every frame checked");
        assert!(
            !deferred || eg.contacts.iter().any(|&c| c > 0),
            "{what}: contact counts to compare"
        );
        assert!(g.migrations() > 0, "{what}: nothing crossed a bound");
        if balance != Balance::Off {
            assert!(g.rebalances() > 0, "{what}: the bounds never moved");
        }
        if what == "outflow" {
            assert!(
                removed > 0 && eg.pos.len() == n0 - removed,
                "{what}: particles were removed ({removed}; {} left)",
                eg.pos.len()
            );
        }
        println!(
            "{what}: {published} frames on {slabs} slabs, each its step's state; {} \
             migrations, {} moves of the bounds, {removed} removed; the same run",
            g.migrations(),
            g.rebalances()
        );
    }
}
