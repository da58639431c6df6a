//! A run cut into CPU sub-domains is bit-identical to the uncut run: frames, final state and
//! contact history, for 2, 3 and 4 slabs along each axis, in a falling box with friction,
//! rolling resistance and a rotating blade (both integrators), in the rotating drum (an STL
//! mesh), and in a gas of particles that cross slab boundaries thousands of times. A checkpoint
//! written on 3 sub-domains continues bit-for-bit on 1 and on 4.

mod common;
use common::*;
use solver::case::{Integrator, Source};
use solver::decomp::{Axis, Balance, Decomposition, DecompositionOverride};
use solver::exec::sim::BackendKind;
use solver::{Case, SimState, Simulation};
use std::path::Path;

/// Friction, rolling resistance, walls, a rotating blade and frequent reordering.
fn falling_box(integrator: Integrator) -> Case {
    friction_box_with_blade("falling box", integrator)
}

/// The shipped rotating drum (STL).
fn drum() -> Case {
    let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/cases/drum.toml"));
    Case::from_file(path).unwrap_or_else(|e| panic!("{e}")).0
}

/// No gravity, fast particles in a narrow box: they bounce between the walls and through the
/// slab boundaries of a decomposition along x (8 slabs about 1 cm thick), with friction (so
/// migrants carry history).
fn crossing_gas() -> Case {
    let k = 4e4;
    let mut case = base_case(
        "crossing gas",
        linear_species("g", 0.002, 2500.0, k, 0.99, 0.3, 0.01),
        linear_wall(k, 0.99, 0.3, 0.01),
        5e-6,
        [0.0, 0.0, 0.0],
        [0.08, 0.04, 0.04],
        true,
    );
    case.gravity = [0.0; 3];
    case.sources.push(Source::RandomBox {
        species: "g".into(),
        min: [0.0, 0.0, 0.0],
        max: [0.08, 0.04, 0.04],
        count: 400,
        seed: 3,
        velocity: [0.0; 3],
        shape: None,
    });
    case
}

/// Frames every 500 steps and the final state after `steps` steps.
fn run(mut case: Case, d: Decomposition, steps: u64) -> (Vec<Vec<u32>>, SimState, Simulation) {
    case.decomposition = d;
    let mut sim = Simulation::new_on(case, &BackendKind::Cpu).unwrap_or_else(|e| panic!("{e}"));
    let mut frames = Vec::new();
    let mut done = 0;
    while done < steps {
        let n = 500.min(steps - done);
        sim.step_n(n).unwrap_or_else(|e| panic!("{d:?}: {e}"));
        done += n;
        frames.push(frame_bits(&mut sim));
    }
    let state = sim.state().unwrap();
    (frames, state, sim)
}

fn check_all_cuts(name: &str, case: Case, axes: &[Axis], counts: &[u32], steps: u64) {
    let (ref_frames, ref_state, mut ref_sim) = run(case.clone(), Decomposition::default(), steps);
    assert!(
        ref_sim.stats().unwrap().contacts > 100,
        "{name}: the test must exercise contacts"
    );
    let ref_bits = bits(&ref_state);
    for &axis in axes {
        for &n in counts {
            let d = Decomposition {
                subdomains: n,
                split_axis: Some(axis),
                ..Default::default()
            };
            let (frames, state, mut sim) = run(case.clone(), d, steps);
            assert_eq!(sim.coordinator().plan().workers(), n as usize);
            let m = sim.coordinator().migrations();
            println!(
                "{name}: {n} sub-domains along {}: {} migrations ({} with history), loads {:?}",
                axis.name(),
                m.particles,
                m.with_history,
                sim.coordinator().worker_loads()
            );
            for (k, (a, b)) in ref_frames.iter().zip(&frames).enumerate() {
                assert!(
                    a == b,
                    "{name}: frame {k} differs with {n} sub-domains along {}",
                    axis.name()
                );
            }
            assert!(
                bits(&state) == ref_bits,
                "{name}: final state differs with {n} sub-domains along {}",
                axis.name()
            );
            assert_eq!(sim.energies().unwrap(), ref_sim.energies().unwrap());
            assert_eq!(sim.stats().unwrap(), ref_sim.stats().unwrap());
        }
    }
}

#[test]
fn falling_box_with_friction_is_identical_on_2_3_4_subdomains_along_each_axis() {
    check_all_cuts(
        "falling box (Euler)",
        falling_box(Integrator::SymplecticEuler),
        &[Axis::X, Axis::Y, Axis::Z],
        &[2, 3, 4],
        2000,
    );
}

#[test]
fn velocity_verlet_is_identical_on_subdomains() {
    check_all_cuts(
        "falling box (velocity Verlet)",
        falling_box(Integrator::VelocityVerlet),
        &[Axis::X, Axis::Z],
        &[3],
        2000,
    );
}

#[test]
fn rotating_drum_is_identical_on_2_3_4_subdomains_along_each_axis() {
    check_all_cuts(
        "drum",
        drum(),
        &[Axis::X, Axis::Y, Axis::Z],
        &[2, 3, 4],
        2000,
    );
}

#[test]
fn particles_crossing_slabs_thousands_of_times_keep_their_history() {
    let case = crossing_gas();
    // Give the gas its speed: random velocities from a fixed seed.
    let mut state_case = case.clone();
    state_case.decomposition = Decomposition::default();
    let sim = Simulation::new(state_case).unwrap();
    let mut s = sim.state().unwrap();
    let mut rng = 0x2545F4914F6CDD1Du64;
    for v in &mut s.vel {
        for c in v.iter_mut() {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            *c = ((rng >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 10.0;
        }
    }
    let dir = std::env::temp_dir().join(format!("solver-crossing-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Start every run from this state through a checkpoint (the public way to set a state).
    let start = dir.join("start.ckpt");
    drop(sim);
    write_state_checkpoint(&case, s, &start);
    let mut runs = Vec::new();
    for n in [1u32, 8] {
        let over = DecompositionOverride {
            subdomains: Some(n),
            split_axis: Some(Axis::X),
            balance: None,
        };
        let mut sim = Simulation::load_checkpoint_with(&start, &BackendKind::Cpu, over).unwrap();
        sim.step_n(12000).unwrap();
        let m = sim.coordinator().migrations();
        println!("crossing gas, {n} sub-domains: {m:?}");
        if n > 1 {
            assert!(
                m.particles > 1000,
                "the gas must cross slab boundaries thousands of times, got {}",
                m.particles
            );
            assert!(
                m.with_history > 50,
                "migrants must carry contact history, got {}",
                m.with_history
            );
        }
        runs.push(sim.state().unwrap());
    }
    assert!(
        bits(&runs[0]) == bits(&runs[1]),
        "8 sub-domains differ from 1: migration lost or changed a particle's state or history"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// Writes `state` as a checkpoint of `case` (by running 0 steps of a simulation rebuilt from it).
fn write_state_checkpoint(case: &Case, state: SimState, path: &Path) {
    let sim = Simulation::from_state(case.clone(), state).unwrap();
    sim.save_checkpoint(path).unwrap();
}

#[test]
fn checkpoint_from_3_subdomains_continues_identically_on_1_and_4() {
    let dir = std::env::temp_dir().join(format!("solver-decomp-ckpt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for integrator in [Integrator::SymplecticEuler, Integrator::VelocityVerlet] {
        let mut case = falling_box(integrator);
        case.decomposition = Decomposition {
            subdomains: 3,
            split_axis: Some(Axis::X),
            ..Default::default()
        };
        let mut straight = Simulation::new(case.clone()).unwrap();
        straight.step_n(1200).unwrap();
        let mut first = Simulation::new(case).unwrap();
        first.step_n(600).unwrap();
        let path = dir.join(format!("{integrator:?}.ckpt"));
        first.save_checkpoint(&path).unwrap();
        drop(first);
        for n in [1u32, 4] {
            let over = DecompositionOverride {
                subdomains: Some(n),
                split_axis: None,
                balance: None,
            };
            let mut resumed =
                Simulation::load_checkpoint_with(&path, &BackendKind::Cpu, over).unwrap();
            assert_eq!(resumed.coordinator().plan().workers(), n as usize);
            assert_eq!(resumed.step_index(), 600);
            resumed.step_n(600).unwrap();
            assert!(
                bits(&straight.state().unwrap()) == bits(&resumed.state().unwrap()),
                "{integrator:?}: 3 sub-domains -> checkpoint -> {n} differs from a straight run"
            );
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn impossible_cuts_are_clear_errors() {
    let mut case = falling_box(Integrator::SymplecticEuler);
    case.decomposition = Decomposition {
        subdomains: 1000,
        split_axis: Some(Axis::Z),
        ..Default::default()
    };
    let e = Simulation::new_on(case.clone(), &BackendKind::Cpu)
        .err()
        .expect("1000 slabs of a 17-layer grid")
        .to_string();
    assert!(
        e.contains("1000 sub-domains along z") && e.contains("cell layers"),
        "{e}"
    );
    case.decomposition.subdomains = 0;
    let e = Simulation::new(case)
        .err()
        .expect("0 sub-domains")
        .to_string();
    assert!(e.contains("decomposition.subdomains"), "{e}");
}

/// Load balancing: a falling box cut along z, whose particles fall out of the upper slabs. With
/// balancing the bounds follow the bed, the particle counts end more even than with the first
/// cut kept, and no bit of the result changes.
#[test]
fn balancing_follows_a_falling_bed_and_changes_no_bits() {
    let case = falling_box(Integrator::SymplecticEuler);
    let mut reference = None;
    for balance in [Balance::Off, Balance::Count, Balance::Time] {
        let d = Decomposition {
            subdomains: 3,
            split_axis: Some(Axis::Z),
            balance,
        };
        let (_, state, sim) = run(case.clone(), d, 3000);
        let c = sim.coordinator();
        let loads = c.worker_loads();
        let mean = loads.iter().sum::<usize>() as f64 / loads.len() as f64;
        let worst = *loads.iter().max().unwrap() as f64 / mean;
        println!(
            "balance {}: bounds {:?}, loads {loads:?} (max/mean {worst:.2}), {} moves",
            balance.name(),
            c.plan().bounds,
            c.rebalances()
        );
        match &reference {
            None => {
                assert_eq!(c.rebalances(), 0, "balance off moved bounds");
                reference = Some((bits(&state), worst));
            }
            Some((b, off_worst)) => {
                assert!(
                    *b == bits(&state),
                    "balance {} changed the result",
                    balance.name()
                );
                assert!(c.rebalances() > 0, "balance {} never moved", balance.name());
                if balance == Balance::Count {
                    assert!(
                        worst < *off_worst,
                        "balancing by count left max/mean {worst:.2} (first cut: {off_worst:.2})"
                    );
                }
            }
        }
    }
}
