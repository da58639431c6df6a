//! Validation 7: bit-identical results for 1 and 2 threads, and checkpoint restart bit-for-bit
//! (2N steps == N steps + save + load + N steps), with friction, rolling friction, walls, a
//! rotating mesh and frequent reordering, for both integrators.

mod common;
use common::*;
use solver::case::Integrator;
use solver::exec::sim::BackendKind;
use solver::{SimState, Simulation};

fn case(integrator: Integrator) -> solver::Case {
    friction_box_with_blade("determinism", integrator)
}

fn bits(s: &SimState) -> Vec<u64> {
    let v3 = |v: &Vec<[f64; 3]>| v.iter().flatten().map(|c| c.to_bits()).collect::<Vec<_>>();
    let mut out = v3(&s.pos);
    out.extend(v3(&s.vel));
    out.extend(v3(&s.omega));
    out.extend(v3(&s.force));
    out.extend(v3(&s.torque));
    out.extend(s.history.iter().flat_map(|h| {
        [
            h.partner as u64,
            h.xi[0].to_bits(),
            h.xi[1].to_bits(),
            h.xi[2].to_bits(),
        ]
    }));
    out.push(s.time.to_bits());
    out
}

fn run_in_pool(threads: usize, steps: u64) -> SimState {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    pool.install(|| {
        let mut sim = Simulation::new(decomposed(
            case(Integrator::SymplecticEuler),
            &BackendKind::Cpu,
        ))
        .unwrap();
        sim.step_n(steps).unwrap();
        assert!(
            sim.stats().unwrap().contacts > 500,
            "the test must exercise contacts, got {}",
            sim.stats().unwrap().contacts
        );
        sim.state().unwrap()
    })
}

#[test]
fn same_bits_for_one_and_two_threads() {
    let a = run_in_pool(1, 2500);
    let b = run_in_pool(2, 2500);
    assert_eq!(a.step, 2500);
    assert!(bits(&a) == bits(&b), "1-thread and 2-thread runs differ");
}

#[test]
fn checkpoint_restart_is_bit_for_bit() {
    let dir = std::env::temp_dir().join(format!("solver-ckpt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for integrator in [Integrator::SymplecticEuler, Integrator::VelocityVerlet] {
        let n = 600;
        let mut straight =
            Simulation::new(decomposed(case(integrator), &BackendKind::Cpu)).unwrap();
        straight.step_n(2 * n).unwrap();

        let mut first = Simulation::new(decomposed(case(integrator), &BackendKind::Cpu)).unwrap();
        first.step_n(n).unwrap();
        let path = dir.join(format!("{integrator:?}.ckpt"));
        first.save_checkpoint(&path).unwrap();
        drop(first);
        let mut resumed = Simulation::load_checkpoint(&path).unwrap();
        assert_eq!(resumed.step_index(), n);
        resumed.step_n(n).unwrap();
        assert!(
            bits(&straight.state().unwrap()) == bits(&resumed.state().unwrap()),
            "{integrator:?}: restart differs"
        );
        assert_eq!(
            straight.mesh_transforms_f32(),
            resumed.mesh_transforms_f32()
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn corrupt_checkpoint_is_an_error_naming_the_file() {
    let dir = std::env::temp_dir().join(format!("solver-ckpt-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("bad.ckpt");
    std::fs::write(&p, b"definitely not a checkpoint").unwrap();
    let e = Simulation::load_checkpoint(&p).err().unwrap().to_string();
    assert!(e.contains("bad.ckpt"), "{e}");
    let mut sim = Simulation::new(decomposed(
        case(Integrator::SymplecticEuler),
        &BackendKind::Cpu,
    ))
    .unwrap();
    sim.step_n(10).unwrap();
    sim.save_checkpoint(&p).unwrap();
    let mut bytes = std::fs::read(&p).unwrap();
    bytes.truncate(bytes.len() / 2);
    std::fs::write(&p, &bytes).unwrap();
    let e = Simulation::load_checkpoint(&p).err().unwrap().to_string();
    assert!(e.contains("bad.ckpt") && e.contains("corrupt"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}
