//! CUDA backend vs the CPU reference (issue 4). Runs only where an NVIDIA driver loads; on
//! machines without one (CI) it prints "skipped: no GPU" and passes.

use std::sync::Arc;

use solver::case::Case;
use solver::decomp::Decomposition;
use solver::dem::cuda::{self, CudaOptions, CudaSim, HistLayout, HistoryMode, StateCopies};
use solver::dem::state::SimState;
use solver::exec::coordinator::Coordinator;
use solver::exec::worker::{Energies, FusedWorker};

fn gpu_present() -> bool {
    if cuda::driver::driver_available().is_err() {
        println!("skipped: no GPU");
        return false;
    }
    true
}

fn falling_box_state(n: usize) -> (Case, SimState) {
    let case = Case::default_falling_box(n);
    let state = initial_state(&case);
    (case, state)
}

/// The CPU reference's state after `steps` steps from `state`.
fn cpu_after(sc: &StepContext, state: &SimState, steps: u64) -> SimState {
    let mut cpu = Coordinator::cpu(
        Arc::new(sc.clone()),
        state.clone(),
        &Decomposition::default(),
    )
    .expect("plan");
    cpu.advance(steps).expect("cpu");
    cpu.export_state().expect("state")
}

/// In f64 parity mode (no FMA contraction, same neighbour order) the GPU reproduces the CPU
/// bit for bit; in f32 mode positions agree to float round-off.
#[test]
fn cuda_matches_cpu_on_the_falling_box() {
    if !gpu_present() {
        return;
    }
    let (case, state) = falling_box_state(4000);
    let sc = cuda::step_context(&case).expect("case");
    let mut cpu = Coordinator::cpu(
        Arc::new(sc.clone()),
        state.clone(),
        &Decomposition::default(),
    )
    .expect("plan");
    let mut g64 = CudaSim::new(
        &sc,
        &state,
        &CudaOptions {
            double: true,
            ..Default::default()
        },
    )
    .expect("GPU f64");
    let mut g32 = CudaSim::new(&sc, &state, &CudaOptions::default()).expect("GPU f32");
    cpu.advance(300).expect("cpu");
    g64.steps(300).expect("gpu");
    g32.steps(300).expect("gpu");
    let (c, a, b) = (
        cpu.export_state().unwrap(),
        g64.state().expect("state"),
        g32.state().expect("state"),
    );
    assert_eq!(a.pos, c.pos);
    assert_eq!(a.vel, c.vel);
    let worst = b
        .pos
        .iter()
        .zip(&c.pos)
        .map(|(x, y)| {
            (0..3)
                .map(|k| ((x[k] - y[k]) / y[k].abs().max(1e-3)).abs())
                .fold(0.0, f64::max)
        })
        .fold(0.0, f64::max);
    assert!(worst < 1e-5, "f32 relative difference {worst:e}");
}

/// With two species the collide reads each partner's species (a one-species case compiles
/// that away, `ModuleConfig::one_species`): the built-in case with every third sphere of a
/// smaller, denser second species is bit-identical to the CPU in f64 (springs included), and the
/// one-species build is the one the built-in case gets.
#[test]
fn two_species_match_the_cpu_bit_for_bit() {
    if !gpu_present() {
        return;
    }
    let (mut case, _) = falling_box_state(4000);
    let one = cuda::step_context(&case).expect("case");
    let g1 = CudaSim::new(&one, &initial_state(&case), &parity_opts(true)).expect("GPU f64");
    assert!(
        g1.module_config().one_species,
        "the built-in case has one species"
    );
    let mut small = case.species[0].clone();
    small.name = "small".into();
    small.radius *= 0.8;
    small.density *= 1.5;
    case.species.push(small);
    let mut state = initial_state(&case);
    for (i, s) in state.species.iter_mut().enumerate() {
        if i % 3 == 0 {
            *s = 1;
        }
    }
    // Random velocities of 4 m/s (a fixed LCG): neighbours 12 mm apart meet within the 300
    // steps (3 ms), so contacts of both species pairs are formed and carried.
    let mut seed = 12345u64;
    let mut unit = || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    };
    for v in state.vel.iter_mut() {
        *v = [4.0 * unit(), 4.0 * unit(), 4.0 * unit()];
    }
    let sc = cuda::step_context(&case).expect("case");
    let mut g = CudaSim::new(&sc, &state, &parity_opts(true)).expect("GPU f64");
    assert!(!g.module_config().one_species);
    g.steps(300).expect("gpu");
    let (c, a) = (cpu_after(&sc, &state, 300), g.state().expect("state"));
    let touching = c.contacts.iter().filter(|&&n| n > 0).count();
    assert!(
        touching > 200,
        "the spheres must touch within 300 steps ({touching} in contact)"
    );
    assert_eq!(a.pos, c.pos, "positions");
    assert_eq!(a.vel, c.vel, "velocities");
    assert_eq!(a.omega, c.omega, "angular velocities");
    assert_eq!(a.contacts, c.contacts, "contact counts");
    assert!(a.history == c.history, "contact history");
}

/// The collide kernel's variants (contacts evaluated as found or buffered, with a buffer of 2
/// that makes it resume its neighbour scan many times per particle; history slot-major or
/// row-major) all reproduce the CPU bit for bit in f64 mode, springs included, on the built-in
/// case with friction (issue 13).
#[test]
fn collide_variants_match_the_cpu_bit_for_bit() {
    if !gpu_present() {
        return;
    }
    // A dense FCC pack (12 contacts per particle from the first step) with the built-in
    // case's friction: the buffer of 2 overflows about six times per particle and step.
    let (sc, state) = dense_pack_at_rest(solver::bench_cases::BenchModel::LinearFriction);
    let c = cpu_after(&sc, &state, 400);
    let springs = c
        .history
        .iter()
        .filter(|h| h.partner != solver::dem::state::PARTNER_NONE)
        .count();
    assert!(
        springs > 1000,
        "the case must build up contact history ({springs} springs)"
    );
    for (candidates, layout, history, copies) in [
        (0, HistLayout::SlotMajor, HistoryMode::Double),
        (2, HistLayout::SlotMajor, HistoryMode::Double),
        (
            cuda::DEFAULT_CANDIDATES,
            HistLayout::RowMajor,
            HistoryMode::Double,
        ),
        (2, HistLayout::RowMajor, HistoryMode::Double),
        (
            cuda::DEFAULT_CANDIDATES,
            HistLayout::SlotMajor,
            HistoryMode::InPlace,
        ),
        (0, HistLayout::SlotMajor, HistoryMode::InPlace),
        (2, HistLayout::RowMajor, HistoryMode::InPlace),
        // Each pair's spring once: rows of 10 hold the 6 pairs a site of this lattice owns
        // (state::owns_pair) and its walls.
        (
            cuda::DEFAULT_CANDIDATES,
            HistLayout::RowMajor,
            HistoryMode::Pairs,
        ),
        (0, HistLayout::SlotMajor, HistoryMode::Pairs),
    ]
    .into_iter()
    .map(|(c, l, h)| (c, l, h, StateCopies::Two))
    .chain([
        // One copy of the state: forces stored, dem_integrate, a search through the force
        // buffer (the history in place either way).
        (
            cuda::DEFAULT_CANDIDATES,
            HistLayout::SlotMajor,
            HistoryMode::InPlace,
            StateCopies::One,
        ),
        (
            0,
            HistLayout::RowMajor,
            HistoryMode::Pairs,
            StateCopies::One,
        ),
    ]) {
        let opts = CudaOptions {
            candidates,
            hist_layout: layout,
            history,
            state_copies: copies,
            hist_cap: if history == HistoryMode::Pairs {
                10
            } else {
                solver::dem::state::HISTORY_CAP as u32
            },
            ..parity_opts(true)
        };
        let mut g = CudaSim::new(&sc, &state, &opts).expect("GPU f64");
        assert_eq!(
            g.history_in_place(),
            matches!(history, HistoryMode::InPlace | HistoryMode::Pairs)
        );
        assert_eq!(g.history_pairs(), history == HistoryMode::Pairs);
        assert_eq!(g.module_config().single_copy, copies == StateCopies::One);
        g.steps(400).expect("gpu");
        let a = g.state().expect("state");
        let label = format!(
            "candidates {candidates}, {layout:?}, history {}, state copies {}",
            history.name(),
            copies.name()
        );
        assert_eq!(a.pos, c.pos, "{label}: positions");
        assert_eq!(a.vel, c.vel, "{label}: velocities");
        assert_eq!(a.omega, c.omega, "{label}: angular velocities");
        assert_eq!(a.contacts, c.contacts, "{label}: contact counts");
        assert!(a.history == c.history, "{label}: contact history");
        println!("{label}: bit-identical to the CPU after 400 steps ({springs} springs)");
    }
}

/// Spill rows behind pairs-once rows (`CudaOptions::hist_spill`): rows of 3 entries where
/// each site of the pack keeps 5 to 7 entries, so every row spills every step. In f64 the run
/// keeps the CPU's bits after 400 steps with the spill buffers sized before the first step
/// (`dem_spill_count`), and again started at exactly the most rows a step takes (a fixed start:
/// they grow at the first check, their rows copied over mid-run), and restarted from its state
/// (the upload places the spill rows); started at a quarter of that, the run fails with
/// `SpillFull` instead of losing springs. In f32 spill rows give the bits of rows long enough
/// not to spill.
#[test]
fn spill_rows_keep_the_cpu_bits_and_grow() {
    if !gpu_present() {
        return;
    }
    let (sc, state) = dense_pack_at_rest(solver::bench_cases::BenchModel::LinearFriction);
    let c = cpu_after(&sc, &state, 400);
    let base = CudaOptions {
        history: HistoryMode::Pairs,
        hist_cap: 3,
        hist_spill: 8,
        ..parity_opts(true)
    };
    let run = |opts: &CudaOptions| -> Result<(SimState, (u32, u32, u32)), cuda::CudaError> {
        let mut g = CudaSim::new(&sc, &state, opts)?;
        assert_eq!(g.history_rows(), (opts.hist_cap, opts.hist_spill));
        g.steps(400)?;
        g.check_diag()?;
        let spill = g.spill_rows()?.unwrap_or((0, 0, 0));
        Ok((g.state()?, spill))
    };
    let same = |label: &str, a: &SimState| assert_cpu_bits(label, a, &c);
    let (a, (width, rows, taken)) = run(&base).expect("spill rows");
    same("rows of 3, spill rows of 8", &a);
    // A restart from that state uploads every row's spill row (`buffers::place_row`) and
    // continues with the CPU's bits.
    let c2 = cpu_after(&sc, &a, 100);
    let mut g = CudaSim::new(&sc, &a, &base).expect("restart with spill rows");
    g.steps(100).expect("restarted");
    g.check_diag().expect("diagnostics");
    let b2 = g.state().expect("state");
    assert_eq!(b2.pos, c2.pos, "restart: positions");
    assert_eq!(b2.omega, c2.omega, "restart: angular velocities");
    assert!(b2.history == c2.history, "restart: contact history");
    drop(g);
    // Every site spills from the first step: the buffers (4,096 rows at the start) were sized
    // before it to one and a half times the rows it would take (dem_spill_count), and never
    // grew again.
    assert_eq!(width, 8);
    assert_eq!(rows, taken + taken / 2, "{rows} spill rows, {taken} taken");
    assert!(
        taken as usize > state.pos.len() / 2,
        "most sites keep more than 3 entries: {taken} spill rows of {} particles",
        state.pos.len()
    );
    let (b, (_, grown, _)) = run(&CudaOptions {
        spill_start: taken,
        ..base.clone()
    })
    .expect("spill rows grown mid-run");
    same("spill rows grown", &b);
    assert!(grown > taken, "grown to {grown} from {taken}");
    let err = run(&CudaOptions {
        spill_start: taken / 4,
        ..base.clone()
    })
    .expect_err("too few spill rows");
    assert!(
        matches!(err, cuda::CudaError::SpillFull { rows, .. } if rows == taken / 4),
        "{err}"
    );
    assert!(err.to_string().contains("spill rows"), "{err}");
    println!("spill rows: {taken} of {} particles spill, bit-identical to the CPU; grown {taken} -> {grown}; {err}", state.pos.len());
    // f32: the same bits as rows that never spill (the entries are the same, stored elsewhere),
    // with the same owners: f32 contracts products into FMAs, so a spring's bits depend on
    // which side updates it. Owners by id (rows of 12 have no spill rows, which owner keys
    // need), and, where one copy of the state gives owner keys, by the keys with spill rows
    // that rows of 12 never take.
    for keys in [false, true] {
        let (f, _) = run(&CudaOptions {
            double: false,
            owner_keys: keys,
            ..base.clone()
        })
        .expect("f32 spill rows");
        let (l, _) = run(&CudaOptions {
            double: false,
            owner_keys: keys,
            hist_cap: 12,
            hist_spill: if keys { 8 } else { 0 },
            ..base.clone()
        })
        .expect("f32 rows of 12");
        assert_eq!(f.pos, l.pos, "f32 positions, owner keys {keys}");
        assert_eq!(f.vel, l.vel, "f32 velocities, owner keys {keys}");
        assert!(
            f.history == l.history,
            "f32 contact history, owner keys {keys}"
        );
    }
}

/// Owner keys (`CudaOptions::owner_keys`, the default where pairs-once rows with spill rows
/// live in one copy of the state): each pair's spring is kept by the particle higher up, and
/// the pairs whose order changes between searches change hands (`dem_adopt`). In f64 600
/// particles falling into the rotating drum and tumbling there (a search every step: hundreds
/// of pairs change hands), a falling box with friction and the small drum keep the CPU's bits,
/// as rows whose owners the ids decide do, and a restart mid-run continues them. A shuffled dense pack, whose ids give rows of 1 to 12 entries, keeps 6 per row but
/// under its lid: rows of 6 with spill rows of 6 spill for a few particles instead of most.
#[test]
fn owner_keys_hand_pairs_over_with_the_cpu_bits() {
    if !gpu_present() {
        return;
    }
    let (case, state) = falling_box_state(4000);
    let boxed = cuda::step_context(&case).expect("case");
    let drum = drum_parity_case(Integrator::SymplecticEuler);
    let keyed = |sc: &StepContext| CudaOptions {
        history: HistoryMode::Pairs,
        hist_cap: 4,
        hist_spill: 8,
        state_copies: StateCopies::One,
        ..parity_opts_for(sc, true)
    };
    let run = |sc: &StepContext, state: &SimState, opts: &CudaOptions, steps: u64| {
        let mut g = CudaSim::new(sc, state, opts).expect("GPU f64");
        assert_eq!(g.module_config().owner_keys, opts.owner_keys);
        g.steps(steps).expect("steps");
        g.check_diag().expect("diagnostics");
        let handed = g.springs_handed_over().expect("counters");
        (g.state().expect("state"), handed)
    };
    // 600 particles in a box inside the drum (solid fraction 0.23), in contact after about
    // 1,000 steps: 317 pairs changed order between samples 50 steps apart in a CPU count.
    let (full_sc, full) = drum_filled(
        Integrator::SymplecticEuler,
        600,
        [-0.18, -0.05, -0.2],
        [0.18, 0.05, 0.1],
    );
    let mut handed_drum = 0;
    // The full drum searches every step (pairs change hands only at searches); the others keep
    // the default skin.
    for (name, sc, state, steps, skin) in [
        ("full drum", full_sc, full, 3000u64, Some(0.0)),
        ("falling box", boxed, state, 1500, None),
        ("drum", drum.0, drum.1, 600, None),
    ] {
        let c = cpu_after(&sc, &state, steps);
        let mut opts = keyed(&sc);
        if let Some(skin) = skin {
            opts.skin = skin;
        }
        let (a, handed) = run(&sc, &state, &opts, steps);
        let handed = handed.expect("owner keys");
        if name == "full drum" {
            handed_drum = handed;
        }
        assert_cpu_bits(name, &a, &c);
        let by_ids = CudaOptions {
            owner_keys: false,
            ..opts.clone()
        };
        let (b, none) = run(&sc, &state, &by_ids, steps);
        assert_eq!(none, None);
        assert_same_bits(&format!("{name}: owners by id"), &b, &a);
        // Restarted halfway from the keyed run's own state (the upload places each pair with
        // the owner the keys name).
        let (half, _) = run(&sc, &state, &opts, steps / 2);
        let (rest, _) = run(&sc, &half, &opts, steps - steps / 2);
        assert_same_bits(&format!("{name}: restarted"), &rest, &a);
        println!("{name}: {handed} springs handed over in {steps} steps, the CPU's bits");
    }
    assert!(
        handed_drum > 100,
        "the full drum must hand pairs over ({handed_drum})"
    );
    // A shuffled dense pack (IdOrder::Random): by the ids most rows of 6 spill, by the keys
    // only those under the lid.
    let (sc, state) = dense_pack_ordered_at_rest(
        solver::bench_cases::BenchModel::LinearFriction,
        solver::bench_cases::IdOrder::Random,
    );
    let n = state.pos.len();
    let c = cpu_after(&sc, &state, 300);
    let six = CudaOptions {
        hist_cap: 6,
        hist_spill: 6,
        ..keyed(&sc)
    };
    let spilled = |opts: &CudaOptions| {
        let mut g = CudaSim::new(&sc, &state, opts).expect("GPU f64");
        g.steps(300).expect("steps");
        g.check_diag().expect("diagnostics");
        let taken = g.spill_rows().expect("counters").expect("spill rows").2;
        (g.state().expect("state"), taken)
    };
    let (a, by_keys) = spilled(&six);
    let (b, by_ids) = spilled(&CudaOptions {
        owner_keys: false,
        ..six.clone()
    });
    assert_cpu_bits("shuffled pack, keys", &a, &c);
    assert_cpu_bits("shuffled pack, ids", &b, &c);
    assert!(
        (by_keys as usize) < n / 8 && (by_ids as usize) > n / 4,
        "spill rows taken: {by_keys} by the keys, {by_ids} by the ids, of {n} particles"
    );
    println!("shuffled pack: {by_keys} spill rows by the keys, {by_ids} by the ids, {n} particles");
}

/// A dense FCC pack of about 4,000 particles at rest (`bench_cases::dense_pack`) in `model`.
fn dense_pack_at_rest(model: solver::bench_cases::BenchModel) -> (StepContext, SimState) {
    dense_pack_ordered_at_rest(model, solver::bench_cases::IdOrder::Cells)
}

/// [`dense_pack_at_rest`] with its particles in `order` (particle i has id i).
fn dense_pack_ordered_at_rest(
    model: solver::bench_cases::BenchModel,
    order: solver::bench_cases::IdOrder,
) -> (StepContext, SimState) {
    let pack = solver::bench_cases::dense_pack_ordered(4000, model, order);
    let n = pack.positions.len();
    let state = SimState::new(
        0.0,
        0,
        vec![0; n],
        pack.positions,
        vec![[0.0; 3]; n],
        vec![[0.0; 3]; n],
    );
    (cuda::step_context(&pack.case).expect("case"), state)
}

/// Two runs give identical bits (no float atomics; per-cell order fixed by particle id).
#[test]
fn cuda_runs_are_deterministic() {
    if !gpu_present() {
        return;
    }
    let (case, state) = falling_box_state(4000);
    let sc = cuda::step_context(&case).expect("case");
    let run = || {
        let mut g = CudaSim::new(&sc, &state, &CudaOptions::default()).expect("GPU");
        g.steps(500).expect("steps");
        g.state().expect("state")
    };
    assert_eq!(run(), run());
    // With the skin's schedule at work (the interval set from each search's largest move), in
    // batches of several sizes as the solver runs them: the same searches and bits, twice.
    let dense = dense_pack_at_rest(solver::bench_cases::BenchModel::LinearFriction);
    let drum = drum_parity_case(Integrator::SymplecticEuler);
    for (name, sc, state) in [("dense pack", dense.0, dense.1), ("drum", drum.0, drum.1)] {
        let run = || {
            let mut g = CudaSim::new(&sc, &state, &CudaOptions::default()).expect("GPU");
            for batch in [1u64, 7, 64, 300, 5, 423] {
                g.steps(batch).expect("steps");
            }
            (g.state().expect("state"), g.skin_counts().expect("a skin"))
        };
        let (a, b) = (run(), run());
        assert!(a.1 .0 > 3, "{name}: the skin searched {} times", a.1 .0);
        assert_eq!(a.1, b.1, "{name}: searches, steps, wider intervals");
        assert_same_bits(name, &a.0, &b.0);
    }
}

/// One copy of the state changes nothing but memory: in f32 with the skin's schedule, in
/// batches, with the energies asked for before the first step (a search through the force
/// buffer) and on the way, the dense pack and the drum give the bits of two copies (the
/// history in place in both), forces included; the energies are equal too.
#[test]
fn one_state_copy_gives_the_bits_of_two() {
    if !gpu_present() {
        return;
    }
    let dense = dense_pack_at_rest(solver::bench_cases::BenchModel::LinearFriction);
    let drum = drum_parity_case(Integrator::SymplecticEuler);
    for (name, sc, state) in [("dense pack", dense.0, dense.1), ("drum", drum.0, drum.1)] {
        let run = |copies: StateCopies| {
            let opts = CudaOptions {
                state_copies: copies,
                history: HistoryMode::InPlace,
                store_forces: true,
                ..CudaOptions::default()
            };
            let mut g = CudaSim::new(&sc, &state, &opts).expect("GPU");
            assert_eq!(g.module_config().single_copy, copies == StateCopies::One);
            let mut energies = vec![g.energies().expect("energies")];
            for batch in [1u64, 7, 64, 300, 5, 423] {
                g.steps(batch).expect("steps");
                energies.push(g.energies().expect("energies"));
            }
            let bpp = g.memory().bytes_per_particle();
            (
                g.state().expect("state"),
                energies,
                g.skin_counts().expect("a skin"),
                bpp,
            )
        };
        let (two, one) = (run(StateCopies::Two), run(StateCopies::One));
        assert_same_bits(&format!("{name}, one copy"), &one.0, &two.0);
        assert_eq!(one.1, two.1, "{name}: energies");
        assert_eq!(one.2, two.2, "{name}: searches");
        // Per slot: a second state (56 B), the search's cells, ranks and permutation (12 B)
        // and the stored force (12 B) against one force buffer of forces and torques (24 B).
        assert!(
            (two.3 - one.3 - 56.0).abs() < 1e-6,
            "{name}: one copy {:.1} B/particle, two {:.1}: 56 B apart",
            one.3,
            two.3
        );
        println!(
            "{name}: one copy of the state gives the bits of two ({:.1} -> {:.1} B/particle)",
            two.3, one.3
        );
    }
}

/// A GPU run in f64 against the CPU reference, bit for bit: positions, velocities, spins,
/// contact counts and contact histories.
fn assert_cpu_bits(label: &str, got: &SimState, cpu: &SimState) {
    assert_eq!(got.pos, cpu.pos, "{label}: positions");
    assert_eq!(got.vel, cpu.vel, "{label}: velocities");
    assert_eq!(got.omega, cpu.omega, "{label}: angular velocities");
    assert_eq!(got.contacts, cpu.contacts, "{label}: contact counts");
    assert!(got.history == cpu.history, "{label}: contact history");
}

/// Two GPU runs that must agree bit for bit: positions, velocities, spins, stored forces and
/// contact histories.
fn assert_same_bits(label: &str, got: &SimState, want: &SimState) {
    assert_eq!(got.pos, want.pos, "{label}: positions");
    assert_eq!(got.vel, want.vel, "{label}: velocities");
    assert_eq!(got.omega, want.omega, "{label}: angular velocities");
    assert_eq!(got.force, want.force, "{label}: forces");
    assert!(got.history == want.history, "{label}: history");
}

/// The cases of the skin tests: a falling box (lists without contacts), a dense frictional
/// pack (every list entry a contact) and the rotating drum with its mesh.
fn skin_cases() -> [(&'static str, StepContext, SimState); 3] {
    let (case, state) = falling_box_state(4000);
    let dense = dense_pack_at_rest(solver::bench_cases::BenchModel::LinearFriction);
    let drum = drum_parity_case(Integrator::SymplecticEuler);
    [
        (
            "falling box",
            cuda::step_context(&case).expect("case"),
            state,
        ),
        ("dense pack with friction", dense.0, dense.1),
        ("drum", drum.0, drum.1),
    ]
}

/// With a Verlet skin the search runs every few steps and the collide walks the cells of the last
/// search, widened when particles moved more than half the skin: it must find exactly the contacts
/// a fresh search finds. At several steps of a skin run (between searches), its state is loaded
/// into a sim without a skin and both run one step counting contacts: the counts are equal and the
/// positions after that step agree to rounding (the sums run in another order). Adaptive intervals
/// with the default skin, and fixed long intervals with a tiny skin, which make the collide search
/// two or more cells each way.
#[test]
fn skin_steps_find_every_contact() {
    if !gpu_present() {
        return;
    }
    for (name, sc, state) in &skin_cases() {
        // Adaptive intervals with the Verlet list and with the cell walk; fixed long ones.
        for (fixed, list) in [(None, true), (None, false), (Some(40u32), true)] {
            let skin = if fixed.is_some() {
                1e-5
            } else {
                cuda::DEFAULT_SKIN
            };
            let mut a = CudaSim::new(
                sc,
                state,
                &CudaOptions {
                    skin,
                    neighbour_list: list,
                    ..Default::default()
                },
            )
            .expect("GPU with a skin");
            assert!(a.skin_width() > 0.0, "{name}: no skin");
            assert_eq!(a.has_neighbour_list(), list, "{name}: Verlet list");
            if let Some(k) = fixed {
                a.fix_skin_interval(k);
            }
            let (mut done, mut touched) = (0, false);
            for at in [37u64, 150, 333, 600] {
                a.steps(at - done).expect("steps");
                let s = a.state().expect("state");
                let mut b = CudaSim::new(
                    sc,
                    &s,
                    &CudaOptions {
                        skin: 0.0,
                        ..Default::default()
                    },
                )
                .expect("GPU without a skin");
                let (ca, cb) = (
                    a.count_contacts().expect("skin step"),
                    b.count_contacts().expect("step"),
                );
                done = at + 1;
                let label = format!("{name}, interval {fixed:?}, list {list}, step {at}");
                touched |= cb > 0.0;
                assert_eq!(ca, cb, "{label}: contacts per particle differ");
                let (sa, sb) = (a.state().expect("state"), b.state().expect("state"));
                let d = rel_diff(&sb.pos, &sa.pos, 1e-3);
                assert!(d < 1e-7, "{label}: positions differ by {d:e}");
            }
            let (searches, steps, wide) = a.skin_counts().expect("skin counts");
            println!(
                "{name}, interval {fixed:?}, list {list}: {searches} searches in {steps} steps, {wide} wider; {}",
                a.skin_summary().unwrap_or_default()
            );
            // The falling box has none yet (the lattice falls freely): it checks that nothing
            // is found that is not there, also with the wider search.
            assert!(
                touched || *name == "falling box",
                "{name}: no contacts to compare"
            );
            assert!(
                searches * 2 < steps,
                "{name}: the skin did not save searches"
            );
            if fixed.is_some() && *name != "drum" {
                assert!(wide > 0, "{name}: the wider search was not exercised");
            }
        }
    }
}

// ---- Triangle meshes --------------------------------------------------------------------------

mod common;
use common::{base_case, drum_case, initial_state, linear_species, linear_wall, ramp};
use solver::case::{Integrator, Source};
use solver::core::vec3;
use solver::dem::cuda::CudaBackend;
use solver::dem::state::StepContext;

/// Largest relative difference of `b` from `a` (componentwise, relative to max(|a|, `floor`)).
fn rel_diff(a: &[[f64; 3]], b: &[[f64; 3]], floor: f64) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| {
            (0..3)
                .map(|k| ((y[k] - x[k]) / x[k].abs().max(floor)).abs())
                .fold(0.0, f64::max)
        })
        .fold(0.0, f64::max)
}

fn parity_opts(double: bool) -> CudaOptions {
    CudaOptions {
        double,
        store_forces: true,
        check_every: 50,
        ..common::cuda_options()
    }
}

/// [`parity_opts`] for the case `sc`: velocity Verlet keeps two copies of the state (one is
/// refused), whatever `PARTICLE_SHM_TEST_COPIES` asks.
fn parity_opts_for(sc: &StepContext, double: bool) -> CudaOptions {
    let mut o = parity_opts(double);
    if sc.integrator == Integrator::VelocityVerlet {
        o.state_copies = StateCopies::Auto;
    }
    o
}

/// Steps the CPU reference and the GPU in f64 and f32 `steps` times; asserts that f64 is bit
/// identical (kinematics, forces, contact counts, contact history with its mesh keys) and that
/// f32 positions and velocities lie within `f32_pos` and `f32_vel` (relative, floors 1e-3 m and
/// 1e-2 m/s). Returns the CPU state.
fn mesh_parity(
    label: &str,
    sc: StepContext,
    state: SimState,
    steps: u64,
    f32_pos: f64,
    f32_vel: f64,
) -> SimState {
    let verlet = sc.integrator == Integrator::VelocityVerlet;
    let mut cpu = Coordinator::cpu(
        Arc::new(sc.clone()),
        state.clone(),
        &Decomposition::default(),
    )
    .expect("plan");
    let mut g64 = CudaSim::new(&sc, &state, &parity_opts_for(&sc, true)).expect("GPU f64");
    let mut g32 = CudaSim::new(&sc, &state, &parity_opts_for(&sc, false)).expect("GPU f32");
    cpu.advance(steps).expect("cpu");
    g64.steps(steps).expect("gpu f64");
    g32.steps(steps).expect("gpu f32");
    let (c, a, b) = (
        cpu.export_state().unwrap(),
        g64.state().expect("state"),
        g32.state().expect("state"),
    );
    let mesh_contacts = c
        .history
        .iter()
        .filter(|h| {
            (solver::dem::state::MESH_PARTNER_BASE..solver::dem::state::WALL_PARTNER_BASE)
                .contains(&h.partner)
        })
        .count();
    let touching = c.contacts.iter().filter(|&&k| k > 0).count();
    println!(
        "{label}: {} particles, {steps} steps, {mesh_contacts} mesh contacts in the history at the end, \
         {touching} particles in contact; f64: pos {:e} vel {:e} omega {:e} force {:e} (max rel. diff), \
         history equal: {}; f32: pos {:e} vel {:e} omega {:e}",
        c.pos.len(),
        rel_diff(&c.pos, &a.pos, 1e-3),
        rel_diff(&c.vel, &a.vel, 1e-2),
        rel_diff(&c.omega, &a.omega, 1e-2),
        rel_diff(&c.force, &a.force, 1e-6),
        c.history == a.history,
        rel_diff(&c.pos, &b.pos, 1e-3),
        rel_diff(&c.vel, &b.vel, 1e-2),
        rel_diff(&c.omega, &b.omega, 1e-2),
    );
    assert!(mesh_contacts > 0, "{label}: the case must touch a mesh");
    assert_eq!(a.time, c.time, "{label}: time");
    assert_eq!(a.pos, c.pos, "{label}: f64 positions");
    assert_eq!(a.vel, c.vel, "{label}: f64 velocities");
    assert_eq!(a.omega, c.omega, "{label}: f64 angular velocities");
    assert_eq!(a.force, c.force, "{label}: f64 forces");
    assert_eq!(a.contacts, c.contacts, "{label}: f64 contact counts");
    assert!(a.history == c.history, "{label}: f64 contact history");
    if verlet {
        assert_eq!(a.torque, c.torque, "{label}: f64 torques");
        assert!(a.forces_valid && c.forces_valid, "{label}: forces valid");
    }
    let (dp, dv) = (
        rel_diff(&c.pos, &b.pos, 1e-3),
        rel_diff(&c.vel, &b.vel, 1e-2),
    );
    assert!(dp < f32_pos, "{label}: f32 positions differ by {dp:e}");
    assert!(dv < f32_vel, "{label}: f32 velocities differ by {dv:e}");
    c
}

/// A sphere rolling (15 deg, mu 0.1) or sliding (30 deg) down a two-triangle incline mesh with
/// friction and rolling resistance, across the diagonal edge the two triangles share (face and
/// edge hits, the per-mesh dedup and the history hand-over between triangles).
#[test]
fn cuda_matches_cpu_on_a_mesh_incline() {
    if !gpu_present() {
        return;
    }
    const R: f64 = 0.05;
    for (deg, mu, mu_r) in [(15f64, 0.1, 0.0), (30f64, 0.1, 0.02)] {
        let theta = deg.to_radians();
        let (s, c) = theta.sin_cos();
        let (u, n) = ([c, 0.0, -s], [s, 0.0, c]);
        let k = 1e5;
        let mut case = base_case(
            "incline",
            linear_species("s", R, 2500.0, k, 0.3, mu, mu_r),
            linear_wall(k, 0.3, mu, mu_r),
            1e-4,
            [-3.5, -1.5, -3.0],
            [3.5, 1.5, 3.0],
            false,
        );
        case.meshes.push(ramp(u));
        // 0.05 m before the diagonal (crossed at u = -0.75), 0.5 m/s downhill, rolling.
        let pos = vec3::add(
            vec3::add(vec3::scale(u, -0.8), vec3::scale(n, 0.999 * R)),
            [0.0, -0.25, 0.0],
        );
        let v = vec3::scale(u, 0.5);
        let w = vec3::scale(vec3::cross(n, v), 1.0 / R);
        let state = SimState::new(0.0, 0, vec![0], vec![pos], vec![v], vec![w]);
        let sc = cuda::step_context(&case).expect("case");
        let end = mesh_parity(&format!("incline {deg} deg"), sc, state, 1500, 1e-4, 1e-3);
        let travelled = vec3::dot(vec3::sub(end.pos[0], pos), u);
        assert!(
            travelled > 0.06,
            "the sphere must cross the diagonal, travelled {travelled}"
        );
    }
}

/// 120 particles thrown onto the bottom of [`drum_case`] rotating at 60 rpm.
fn drum_parity_case(integrator: Integrator) -> (StepContext, SimState) {
    drum_filled(integrator, 120, [-0.11, -0.05, -0.28], [0.11, 0.05, -0.12])
}

/// `count` particles placed at random in the box [min, max] and thrown down at 0.5 m/s into
/// [`drum_case`] rotating at 60 rpm.
fn drum_filled(
    integrator: Integrator,
    count: usize,
    min: [f64; 3],
    max: [f64; 3],
) -> (StepContext, SimState) {
    let mut case = drum_case(60.0);
    case.integrator = integrator;
    case.sources.push(Source::RandomBox {
        species: "s".into(),
        min,
        max,
        count,
        seed: 5,
        velocity: [0.0, 0.0, -0.5],
        shape: None,
    });
    let p = case.generate_particles().expect("particles");
    let state = SimState::new(
        0.0,
        0,
        p.iter().map(|q| q.species).collect(),
        p.iter().map(|q| q.position).collect(),
        p.iter().map(|q| q.velocity).collect(),
        vec![[0.0; 3]; p.len()],
    );
    (cuda::step_context(&case).expect("case"), state)
}

/// A step replayed as a captured CUDA graph gives the bits of the same launches made one by one
/// (both integrators, f32 and f64, a rotating mesh rebinned along the way), and the graphs are
/// replayed, not captured anew every step.
#[test]
fn graph_replay_matches_direct_launches() {
    if !gpu_present() {
        return;
    }
    for integrator in [Integrator::SymplecticEuler, Integrator::VelocityVerlet] {
        let (sc, state) = drum_parity_case(integrator);
        for double in [false, true] {
            let run = |graphs: bool| {
                let opts = CudaOptions {
                    graphs,
                    ..parity_opts_for(&sc, double)
                };
                let mut g = CudaSim::new(&sc, &state, &opts).expect("GPU");
                // Batches of 50 (the first step of each is timed, so launched directly).
                for _ in 0..12 {
                    g.steps(50).expect("steps");
                }
                (g.state().expect("state"), g.graphs_captured())
            };
            let (direct, none) = run(false);
            let (replayed, captured) = run(true);
            let label = format!("{integrator:?}, double {double}");
            assert_eq!(none, 0, "{label}: graphs off captures nothing");
            // A graph per step shape: two history parities, or with a Verlet skin (f32) the
            // four (state copy, history buffer) pairs with and without a search; again after
            // each rebinning of the rotating mesh, which since session 16 comes every half skin
            // of mesh motion (the next bins are made ahead on a thread: mesh.rs), twice as often
            // as before (54 captures in f64, 76 in f32, against 600 steps).
            let most = if double { 80 } else { 120 };
            assert!(
                (1..=most).contains(&captured),
                "{label}: {captured} graphs captured for 600 steps"
            );
            assert_same_bits(&label, &replayed, &direct);
            println!("{label}: graphs replayed ({captured} captured for 600 steps), same bits");
        }
    }
}

/// Runs the GPU backend (f64) 300 steps, restarts a new GPU backend from its exported state and
/// runs 300 more; the result must equal the CPU's after 600 steps (mesh history keys, forces and
/// torques converted both ways). Then checks the mesh transforms and the snapshot one step on.
fn restart_parity(sc: StepContext, state: SimState, cpu_end: &SimState) {
    let opts = parity_opts_for(&sc, true);
    let ctx = Arc::new(sc);
    let mut first = CudaBackend::new(ctx.clone(), state, &opts).expect("GPU");
    first.advance(300).expect("steps");
    let mid = first.export_state().unwrap();
    let mut second = CudaBackend::new(ctx.clone(), mid, &opts).expect("GPU");
    second.advance(300).expect("steps");
    let end = second.export_state().unwrap();
    assert_eq!(end.pos, cpu_end.pos, "restart: positions");
    assert_eq!(end.vel, cpu_end.vel, "restart: velocities");
    assert_eq!(end.omega, cpu_end.omega, "restart: angular velocities");
    assert!(end.history == cpu_end.history, "restart: history");
    let mut cpu = Coordinator::cpu(ctx, cpu_end.clone(), &Decomposition::default()).expect("plan");
    assert_eq!(second.mesh_transforms().len(), 1);
    // The transform reported after a step is the one that step's contacts saw.
    second.advance(1).expect("step");
    cpu.advance(1).expect("step");
    // The contacts of that step, from the GPU's per-particle counts (no state download).
    assert_eq!(
        second.stats().unwrap(),
        cpu.stats().unwrap(),
        "contacts and history overflows"
    );
    assert!(cpu.stats().unwrap().contacts > 0, "the case has contacts");
    assert_eq!(
        second.mesh_transforms(),
        cpu.mesh_transforms(),
        "mesh transforms"
    );
    assert_eq!(
        second.snapshot().unwrap().pos,
        cpu.snapshot().unwrap().pos,
        "snapshot"
    );
    println!("restart from an exported GPU state: bit-identical to the CPU; mesh transforms equal");
}

/// Particles settling in a rotating drum mesh: moving-mesh placement at the step's time, wall
/// velocity, rebinning with the skin, cap/cylinder edges; the backend view (mesh transforms,
/// exported state) and a restart of the GPU from its exported state.
#[test]
fn cuda_matches_cpu_in_a_rotating_drum() {
    if !gpu_present() {
        return;
    }
    let (sc, state) = drum_parity_case(Integrator::SymplecticEuler);
    let cpu_end = mesh_parity("drum", sc.clone(), state.clone(), 600, 1e-3, 5e-2);
    restart_parity(sc, state, &cpu_end);
}

/// The drum with velocity Verlet (half kick, drift, forces at the new positions with the meshes
/// at the step's end time, half kick; forces evaluated once more at the start).
#[test]
fn cuda_matches_cpu_with_velocity_verlet() {
    if !gpu_present() {
        return;
    }
    let (sc, state) = drum_parity_case(Integrator::VelocityVerlet);
    let cpu_end = mesh_parity(
        "drum (velocity Verlet)",
        sc.clone(),
        state.clone(),
        600,
        1e-3,
        5e-2,
    );
    restart_parity(sc, state, &cpu_end);
}

/// What a frame gets from each backend (`Backend::begin_kinematics_copy`, the GPU's pack
/// kernel and copy stream): kinematics, last contact forces and contact counts. GPU in f64
/// mode: the same f32 values as the CPU.
#[test]
fn frame_arrays_from_the_gpu_equal_the_cpu() {
    use solver::bench_cases::{dense_pack, BenchModel};
    use solver::exec::sim::{BackendKind, FrameInput, Simulation};
    use solver::exec::worker::RawKinematics;
    if !gpu_present() {
        return;
    }
    let pack = dense_pack(4000, BenchModel::LinearFriction);
    let n = pack.positions.len();
    let frame = FrameInput {
        step: 0,
        time: 0.0,
        species: vec![0; n],
        positions: pack.positions.iter().map(|p| p.map(|c| c as f32)).collect(),
        velocities: vec![[0.0; 3]; n],
        angular_velocities: vec![[0.0; 3]; n],
    };
    type Arrays = (
        Vec<[f32; 3]>,
        Vec<[f32; 3]>,
        Vec<[f32; 3]>,
        Vec<[f32; 3]>,
        Vec<u32>,
    );
    let run = |kind: BackendKind| -> Arrays {
        let mut sim = Simulation::from_frame_on(pack.case.clone(), &frame, &kind).expect("start");
        sim.step_n(50).expect("steps");
        let mut a: Arrays = (
            vec![[0.0; 3]; n],
            vec![[0.0; 3]; n],
            vec![[0.0; 3]; n],
            vec![[0.0; 3]; n],
            vec![0; n],
        );
        let out = RawKinematics {
            count: n,
            positions: a.0.as_mut_ptr(),
            velocities: a.1.as_mut_ptr(),
            angular_velocities: a.2.as_mut_ptr(),
            forces: a.3.as_mut_ptr(),
            contact_counts: a.4.as_mut_ptr(),
        };
        // SAFETY: five arrays of n elements, alive and untouched until the copy completed.
        unsafe { sim.begin_kinematics_copy(out) }.expect("copy");
        sim.wait_kinematics_copy().expect("wait");
        a
    };
    let cpu = run(BackendKind::Cpu);
    let gpu = run(BackendKind::Cuda(CudaOptions {
        double: true,
        ..Default::default()
    }));
    assert!(
        cpu.4.iter().sum::<u32>() > 10 * n as u32,
        "a dense pack: about 12 contacts each"
    );
    assert_eq!(cpu.0, gpu.0, "positions");
    assert_eq!(cpu.1, gpu.1, "velocities");
    assert_eq!(cpu.2, gpu.2, "angular velocities");
    assert_eq!(cpu.3, gpu.3, "forces");
    assert_eq!(cpu.4, gpu.4, "contact counts");
    println!("frame arrays: {n} particles, GPU f64 == CPU for all five fields");
}

/// `|a - b|` of each energy within `tol` times the sum of the four magnitudes of `b` (the
/// potential energy can be far larger than the rest), and the elastic part within `tol_el` of
/// itself (f32 forms the overlap in float, the CPU in double).
fn assert_energies_close(label: &str, a: Energies, b: Energies, tol: f64, tol_el: f64) {
    let scale = b.kinetic_translation.abs()
        + b.kinetic_rotation.abs()
        + b.potential.abs()
        + b.elastic.abs();
    let pairs = [
        (
            "kinetic (translation)",
            a.kinetic_translation,
            b.kinetic_translation,
        ),
        ("kinetic (rotation)", a.kinetic_rotation, b.kinetic_rotation),
        ("potential", a.potential, b.potential),
    ];
    for (what, x, y) in pairs {
        assert!(
            (x - y).abs() <= tol * scale,
            "{label}: {what} on the GPU {x:e}, on the CPU {y:e}"
        );
    }
    assert!(
        (a.elastic - b.elastic).abs() <= tol_el * b.elastic.abs() + tol * scale,
        "{label}: elastic on the GPU {:e}, on the CPU {:e}",
        a.elastic,
        b.elastic
    );
}

/// Energies computed on the device (issue 13) equal the CPU reference's bookkeeping of the same
/// state (f64: to summation order; f32: the overlap in float) in a dense frictional pack in its
/// box (linear and Hertz-Mindlin, springs built up) and in the rotating drum mesh (both
/// integrators), and asking for them changes nothing: the run goes on with the same bits.
#[test]
fn device_energies_equal_the_cpu_reference_and_change_nothing() {
    if !gpu_present() {
        return;
    }
    let pack = dense_pack_at_rest;
    use solver::bench_cases::BenchModel;
    let cases = [
        ("pack, linear + friction", pack(BenchModel::LinearFriction)),
        ("pack, Hertz-Mindlin", pack(BenchModel::Hertz)),
        ("drum, Euler", drum_parity_case(Integrator::SymplecticEuler)),
        ("drum, Verlet", drum_parity_case(Integrator::VelocityVerlet)),
    ];
    for (name, (sc, state)) in cases {
        let ctx = Arc::new(sc);
        for double in [true, false] {
            let label = format!("{name}, double {double}");
            let opts = parity_opts_for(&ctx, double);
            let mut g = CudaBackend::new(ctx.clone(), state.clone(), &opts).expect("GPU");
            g.advance(300).expect("steps");
            let on_gpu = g.energies().expect("device energies");
            let mid = g.export_state().unwrap();
            let mut cpu = Coordinator::cpu(ctx.clone(), mid, &Decomposition::default()).unwrap();
            let on_cpu = cpu.energies().expect("cpu energies");
            assert!(on_cpu.elastic > 0.0, "{label}: contacts must store energy");
            let (tol, tol_el) = if double {
                (1e-12, 1e-12)
            } else {
                (1e-12, 1e-4)
            };
            assert_energies_close(&label, on_gpu, on_cpu, tol, tol_el);
            // Twice in a row: the same bits.
            assert_eq!(g.energies().unwrap(), on_gpu, "{label}: repeated");
            g.advance(300).expect("steps");
            let after = g.export_state().unwrap();
            let mut plain = CudaBackend::new(ctx.clone(), state.clone(), &opts).expect("GPU");
            plain.advance(600).expect("steps");
            let want = plain.export_state().unwrap();
            assert_eq!(
                after.pos, want.pos,
                "{label}: positions after asking for energies"
            );
            assert_eq!(after.vel, want.vel, "{label}: velocities");
            assert_eq!(after.omega, want.omega, "{label}: angular velocities");
            assert!(after.history == want.history, "{label}: history");
            println!(
                "{label}: GPU {on_gpu:?}\n{:>w$}CPU {on_cpu:?}; the run is unchanged",
                "",
                w = label.len() + 2
            );
        }
    }
}

/// Issue 13 (a run's first seconds): the DEM module comes from NVRTC the first time and from
/// the disk cache the second, the same kernels; a damaged cache file is compiled again and
/// replaced, never an error.
#[test]
fn kernels_come_from_the_disk_cache_the_second_time() {
    if !gpu_present() {
        return;
    }
    let ctx = cudarc::driver::CudaContext::new(0).expect("GPU 0");
    let dir = std::env::temp_dir().join(format!("pshm-kernel-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let src = kernels::dem_module_source();
    // Linear with friction, f32, 16 candidates, one species.
    let cfg = kernels::variants::dem_config();
    let compile = || {
        let (m, t) = cuda::driver::compile_module_in(
            &ctx,
            &src,
            cfg.defines(),
            false,
            "DEM",
            Some(dir.as_path()),
        )
        .expect("module");
        m.load_function("dem_collide").expect("the collide kernel");
        t
    };
    let first = compile();
    assert!(!first.cached && first.compile_s > 0.0, "{first:?}");
    let files: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    assert_eq!(files.len(), 1, "one file per module");
    let second = compile();
    assert!(second.cached && second.compile_s == 0.0, "{second:?}");
    println!("first: {}; second: {}", first.describe(), second.describe());
    // A damaged file: compiled again and replaced.
    let path = files[0].path();
    let whole = std::fs::read(&path).unwrap();
    let mut bad = whole.clone();
    let last = bad.len() - 100;
    bad[last..].iter_mut().for_each(|b| *b = 0xff);
    std::fs::write(&path, &bad).unwrap();
    let third = compile();
    assert!(!third.cached, "a damaged CUBIN is not loaded: {third:?}");
    assert_eq!(std::fs::read(&path).unwrap(), whole, "the file is replaced");
    assert!(compile().cached);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The collide's three ways of walking a Verlet list (buffered, unbuffered, chosen per warp)
/// meet the same contacts in the same order: the same bits, in f32, over a dense frictional
/// pack (where the warp vote goes unbuffered), a falling box (lists without contacts:
/// buffered) and the rotating drum (both, by warp).
#[test]
fn list_walks_give_the_same_bits() {
    if !gpu_present() {
        return;
    }
    for ((name, sc, state), steps) in skin_cases().iter().zip([1500u64, 400, 600]) {
        let run = |walk: u32| {
            let mut g = CudaSim::new(
                sc,
                state,
                &CudaOptions {
                    list_walk: walk,
                    store_forces: true,
                    ..Default::default()
                },
            )
            .expect("GPU");
            assert!(g.has_neighbour_list(), "{name}: a Verlet list");
            g.steps(steps).expect("steps");
            g.state().expect("state")
        };
        let want = run(kernels::LIST_BUFFERED);
        // The falling box has none yet (its lists hold near neighbours that do not touch).
        assert!(
            *name == "falling box" || want.contacts.iter().any(|&c| c > 0),
            "{name}: no contacts to compare"
        );
        for walk in [kernels::LIST_DIRECT, kernels::LIST_BY_WARP] {
            assert_same_bits(&format!("{name}, walk {walk}"), &run(walk), &want);
        }
        println!("{name}: {steps} steps, the three list walks give the same bits");
    }
}

/// Frames published after every step hold that step's state (kinematics bit for bit in f32,
/// and contact counts, which the solver's default frame carries), and publishing changes
/// nothing: a run publishing after each step against a twin that does not,
/// on a relaxing dense frictional pack of about 100,000 particles (rotation on), with two
/// copies of the state, one copy, in f64, with an outflow region removing particles (frames
/// list the live ids by rank), with velocity Verlet (its kick and drift come before the
/// collide: packed at once), and with the pack at once (`defer_frames` off). On one GPU with
/// symplectic Euler the next step's collide packs a frame's kinematics (`publish.rs`; its contact
/// counts are packed at once); every fifth frame is
/// waited for before any step, as a paused run or a requested frame is: `dem_pack` packs it.
#[test]
fn frames_packed_by_the_next_collide_are_their_steps_state() {
    use solver::bench_cases::{dense_pack, BenchModel};
    use solver::case::Integrator;
    use solver::dem::cuda::{CudaBackend, FrameTarget};
    if !gpu_present() {
        return;
    }
    let pack = dense_pack(100_000, BenchModel::LinearFriction);
    let n0 = pack.positions.len();
    let state = SimState::new(
        0.0,
        0,
        vec![0; n0],
        pack.positions.clone(),
        vec![[0.0; 3]; n0],
        vec![[0.0; 3]; n0],
    );
    let sc = cuda::step_context(&pack.case).expect("case");
    let l = pack.case.domain.max[0];
    let mut outflow = sc.clone();
    // The slab x < 0.1 l: its particles go at the first step, and others follow.
    outflow.outflows = vec![solver::case::Outflow::Box {
        min: [-1.0; 3],
        max: [0.1 * l, l + 1.0, l + 1.0],
    }];
    let mut verlet = sc.clone();
    verlet.integrator = Integrator::VelocityVerlet;
    let base = CudaOptions::default();
    let cases = [
        ("two copies", &sc, base.clone(), true),
        (
            "one copy",
            &sc,
            CudaOptions {
                state_copies: StateCopies::One,
                ..base.clone()
            },
            true,
        ),
        (
            "f64",
            &sc,
            CudaOptions {
                double: true,
                ..base.clone()
            },
            true,
        ),
        ("outflow", &outflow, base.clone(), true),
        ("velocity Verlet", &verlet, base.clone(), false),
        (
            "packed at once",
            &sc,
            CudaOptions {
                defer_frames: false,
                ..base.clone()
            },
            false,
        ),
    ];
    for (what, sc, opts, deferred) in cases {
        let ctx = Arc::new(sc.clone());
        let mut ba = CudaBackend::new(ctx.clone(), state.clone(), &opts).expect("GPU");
        let mut bb = CudaBackend::new(ctx, state.clone(), &opts).expect("GPU");
        // A step as the solver's batch of one: the step, then the removed particles taken
        // (from then on frames and states list the live ids by rank).
        let mut removed = 0;
        let mut step_both = |ba: &mut CudaBackend, bb: &mut CudaBackend| {
            ba.sim_mut().step().expect("step");
            bb.sim_mut().step().expect("step");
            let (ra, rb) = (
                ba.take_removed().expect("removed"),
                bb.take_removed().expect("removed"),
            );
            assert_eq!(ra, rb, "[{what}] the same particles removed");
            removed += ra.len();
        };
        let mut arrays = [
            vec![[0f32; 3]; n0],
            vec![[0f32; 3]; n0],
            vec![[0f32; 3]; n0],
        ];
        let mut counts = vec![0u32; n0];
        let ptrs = arrays.each_mut().map(|v| v.as_mut_ptr());
        let counts_ptr = counts.as_mut_ptr();
        let mut keep = Vec::new();
        for p in ptrs {
            // SAFETY: the vectors outlive the registrations (dropped below, before them).
            keep.push(unsafe { ba.sim().register_host(p.cast(), 12 * n0) }.expect("register"));
        }
        // SAFETY: as above.
        keep.push(unsafe { ba.sim().register_host(counts_ptr.cast(), 4 * n0) }.expect("register"));
        let target = FrameTarget {
            positions: ptrs[0],
            velocities: ptrs[1],
            angular_velocities: ptrs[2],
            forces: std::ptr::null_mut(),
            contact_counts: counts_ptr,
        };
        let mut touching = false;
        let mut check = |e: &SimState| {
            let m = e.pos.len();
            // SAFETY: the copy is complete; the host reads the registered vectors only now.
            let [pos, vel, omega] =
                ptrs.map(|p| unsafe { std::slice::from_raw_parts(p as *const [f32; 3], m) });
            // SAFETY: as above.
            let contacts = unsafe { std::slice::from_raw_parts(counts_ptr as *const u32, m) };
            touching |= contacts.iter().any(|&c| c > 0);
            for k in 0..m {
                let f = |v: [f64; 3]| v.map(|x| x as f32);
                assert!(
                    pos[k] == f(e.pos[k])
                        && vel[k] == f(e.vel[k])
                        && omega[k] == f(e.omega[k])
                        && contacts[k] == e.contacts[k],
                    "[{what}] the frame of step {} differs from its state at frame index {k} \
                     (id {}): {:?} {:?} {:?} {} against {:?} {:?} {:?} {}",
                    e.step,
                    e.id[k],
                    pos[k],
                    vel[k],
                    omega[k],
                    contacts[k],
                    e.pos[k],
                    e.vel[k],
                    e.omega[k],
                    e.contacts[k]
                );
            }
        };
        let mut expect: Option<SimState> = None;
        let mut spinning = false;
        for step in 0..=30u64 {
            step_both(&mut ba, &mut bb);
            let (a, b) = (ba.sim_mut(), bb.sim());
            if let Some(e) = expect.take() {
                // The frame of the step before: packed by this step's collide, copied behind it.
                let t = a.publish_wait().expect("wait").expect("a frame in flight");
                assert_eq!(t.step, e.step, "[{what}]");
                check(&e);
            }
            if step < 30 {
                let e = b.state().expect("state");
                // The bench's frame check reads positions alone (ids by rank after outflow).
                assert_eq!(b.positions().expect("positions"), e.pos, "[{what}]");
                spinning |= e.omega.iter().any(|w| *w != [0.0; 3]);
                // SAFETY: the arrays hold n0 >= live elements each; the host reads them only
                // after publish_wait.
                unsafe { a.publish_async(target) }.expect("publish");
                assert_eq!(a.publication_deferred(), deferred, "[{what}]");
                if deferred {
                    assert!(
                        a.publish_done().expect("query").is_none(),
                        "[{what}] a frame is not done before a step packed it"
                    );
                }
                if step % 5 == 4 {
                    let t = a.publish_wait().expect("wait").expect("a frame in flight");
                    assert_eq!(t.step, e.step, "[{what}]");
                    check(&e);
                } else {
                    expect = Some(e);
                }
            }
        }
        let (ea, eb) = (
            ba.sim().state().expect("state"),
            bb.sim().state().expect("state"),
        );
        assert!(ea == eb, "[{what}] publishing changed the run");
        assert!(touching, "[{what}] contact counts in the frames");
        assert!(
            spinning,
            "[{what}] the particles spin: angular velocities are checked"
        );
        if what == "outflow" {
            assert!(
                removed > 0 && ea.pos.len() == n0 - removed,
                "[{what}] particles were removed ({removed}; {} left)",
                ea.pos.len()
            );
        }
        drop(keep);
        println!(
            "[{what}] {} of {n0} particles: 30 frames, each its step's state; the same run",
            ea.pos.len()
        );
    }
}
