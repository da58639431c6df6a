//! Validation 6: moving meshes.
//! * Rotating drum (a closed cylinder STL written by the test): the drum drags the bed up its
//!   rising side, and the particles touching the wall under the bed acquire the wall's
//!   tangential velocity (measured: contact point 0.82 of the wall speed; see the open item
//!   below). Their centres move at 0.5 to 1 times
//!   the wall speed: spheres with little rolling resistance roll between the wall and the bed
//!   (ball-bearing effect; measured 0.62 with mu_r = 0.02, 0.76 with mu_r = 0.3, nearly
//!   independent of wall friction 0.5 to 3.0, so the wall layer rolls rather than slips).
//! * Conveyor belt (translating mesh): exact 2/7 law.
//! * Mixer (box walls + a blade rotating about z): runs, the blade transform is the prescribed
//!   rotation at every checked time, the blade drives the particles around the axis, and no
//!   particle leaves the box.

mod common;
use common::*;
use solver::case::{MeshSpec, Source};
use solver::core::geometry::{axis_angle_matrix, Motion};
use solver::core::stl::write_binary_stl;
use solver::exec::sim::BackendKind;
use std::f64::consts::PI;

/// Index of the particle at exactly position `p`.
fn n_of(pos: &[[f64; 3]], p: &[f64; 3]) -> usize {
    pos.iter().position(|q| q == p).unwrap()
}

/// [`drum_case`] with `count` particles dropped inside, its mesh read from an STL file written
/// to `dir` (the STL path of case files).
fn drum_with_particles(dir: &std::path::Path, count: usize, rpm: f64) -> solver::case::Case {
    let mut case = drum_case(rpm);
    std::fs::create_dir_all(dir).unwrap();
    let mesh = &mut case.meshes[0];
    let triangles = mesh.triangles.take().expect("inline drum");
    write_binary_stl(&dir.join("drum.stl"), &triangles).unwrap();
    mesh.stl = Some("drum.stl".into());
    case.origin.base_dir = dir.to_path_buf();
    case.sources.push(Source::RandomBox {
        species: "s".into(),
        min: [-0.2, -0.04, -0.2],
        max: [0.2, 0.04, 0.2],
        count,
        seed: 5,
        velocity: [0.0; 3],
        shape: None,
    });
    case
}

/// The energies of a state do not depend on the backend object holding it: after steps with a
/// rotating mesh (symplectic Euler leaves the meshes where the step started), a restart from a
/// checkpoint (a backend rebuilt from the state, as the GPU backend computes its energies)
/// reports the same energies, elastic energy of the mesh contacts included.
#[test]
fn energies_of_a_moving_mesh_state_survive_a_restart() {
    let dir = std::env::temp_dir().join(format!("solver-energy-{}", std::process::id()));
    let case = drum_with_particles(&dir, 300, 60.0);
    let mut sim = start_sim("cpu", &BackendKind::Cpu, case);
    steps(&mut sim, "cpu", 3_000);
    let before = sim.energies().unwrap();
    let path = dir.join("state.bin");
    sim.save_checkpoint(&path).unwrap();
    let after = solver::exec::sim::Simulation::load_checkpoint(&path)
        .unwrap()
        .energies()
        .unwrap();
    println!("energies before {before:?}, after a restart {after:?}");
    assert!(before.elastic > 0.0, "the bed must press on the drum");
    assert_eq!(before.elastic.to_bits(), after.elastic.to_bits());
    assert_eq!(before.total().to_bits(), after.total().to_bits());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn drum_wall_particles_move_with_the_wall() {
    for (name, kind) in backends() {
        drum(&name, &kind);
    }
}

fn drum(name: &str, kind: &BackendKind) {
    let (rd, r, rpm) = (0.3, 0.01, 20.0);
    let dir = std::env::temp_dir().join(format!("solver-drum-{}-{name}", std::process::id()));
    let case = drum_with_particles(&dir, 700, rpm);
    let mut sim = start_sim(name, kind, case);
    let w = rpm * 2.0 * PI / 60.0;
    steps(&mut sim, name, 10_000);
    // The bed is dragged up the rising side; its wall-contact zone lies in the direction of its
    // centre of mass. Sample the particles touching the cylinder within 25 degrees of that
    // direction (deep in the bed: the solid-body zone, not the avalanching surface).
    let (mut sum, mut sum_c, mut n) = (0.0, 0.0, 0usize);
    let (mut mid_c, mut n_mid) = (0.0, 0usize);
    let mut lift = 0.0;
    for _ in 0..10 {
        steps(&mut sim, name, 500);
        let s = sim.snapshot().unwrap();
        let m = s.pos.len() as f64;
        let com = [
            s.pos.iter().map(|p| p[0]).sum::<f64>() / m,
            s.pos.iter().map(|p| p[2]).sum::<f64>() / m,
        ];
        let com_n = (com[0] * com[0] + com[1] * com[1]).sqrt();
        lift = (com[0] / com_n).asin().abs().to_degrees();
        for (p, v) in s.pos.iter().zip(&s.vel) {
            let rho = (p[0] * p[0] + p[2] * p[2]).sqrt();
            let cos = (p[0] * com[0] + p[2] * com[1]) / (rho * com_n);
            if rho > rd - 1.5 * r && cos > 25f64.to_radians().cos() {
                // e_t = y x p / |p|: direction of the wall velocity omega y x p
                let e_t = [p[2] / rho, 0.0, -p[0] / rho];
                sum += (v[0] * e_t[0] + v[2] * e_t[2]) / (w * rho);
                // velocity of the particle's surface point facing the wall, p + r rho_hat
                let o = s.omega[n_of(&s.pos, p)];
                let arm = [r * p[0] / rho, 0.0, r * p[2] / rho];
                let vc = [
                    v[0] + o[1] * arm[2] - o[2] * arm[1],
                    0.0,
                    v[2] + o[0] * arm[1] - o[1] * arm[0],
                ];
                sum_c += (vc[0] * e_t[0] + vc[2] * e_t[2]) / (w * (rho + r));
                n += 1;
                if p[1].abs() < 0.025 {
                    mid_c += (vc[0] * e_t[0] + vc[2] * e_t[2]) / (w * (rho + r));
                    n_mid += 1;
                }
            }
        }
        let escaped = s
            .pos
            .iter()
            .filter(|p| (p[0] * p[0] + p[2] * p[2]).sqrt() > rd || p[1].abs() > 0.05)
            .count();
        assert_eq!(escaped, 0, "[{name}] particles left the drum");
    }
    let (ratio, ratio_c) = (sum / n as f64, sum_c / n as f64);
    println!(
        "[{name}] drum: bed lifted {lift:.1} deg from the bottom; {n} wall-zone samples: contact-point velocity / wall velocity = {ratio_c:.4}, centre velocity / (omega rho) = {ratio:.4}; away from the end caps ({n_mid} samples) contact-point ratio {:.4}",
        mid_c / n_mid as f64
    );
    assert!(n > 100, "[{name}] only {n} wall-zone samples");
    assert!(
        lift > 10.0,
        "[{name}] the drum must drag the bed up its rising side, lifted {lift} deg"
    );
    // The contact point lags the wall by ~20% on average (the belt test below shows exact
    // no-slip for a single moving-mesh contact). It is wall slip: with friction 2 instead of 0.5
    // (wall and particles) the same run gives 0.92 instead of 0.82 and lifts the bed 41 instead
    // of 36 deg (measured 2026-11-23). Pinned loosely.
    assert!(
        ratio_c > 0.7 && ratio_c <= 1.05,
        "[{name}] wall particles must be dragged at the contact, ratio {ratio_c}"
    );
    assert!(
        ratio > 0.5 && ratio <= 1.05,
        "[{name}] centres move between rolling (0.5) and sticking (1), got {ratio}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// A sphere at rest placed on a belt (a translating mesh) moving at V: friction accelerates it
/// until it rolls on the belt; angular momentum about the contact point gives v = 2/7 V and
/// omega r = -5/7 V (relative to the belt: v - omega r = V).
#[test]
fn sphere_on_conveyor_belt_reaches_two_sevenths_of_belt_speed() {
    for (name, kind) in backends() {
        conveyor_belt(&name, &kind);
    }
}

fn conveyor_belt(name: &str, kind: &BackendKind) {
    let (r, k, belt) = (0.02, 1e5, 1.0);
    let mut case = base_case(
        "belt",
        linear_species("s", r, 2500.0, k, 0.3, 0.3, 0.0),
        linear_wall(k, 0.3, 0.3, 0.0),
        5e-5,
        [-1.0, -0.5, -0.2],
        [2.0, 0.5, 0.5],
        false,
    );
    case.sources.push(single("s", [0.0, 0.0, r], [0.0; 3], r));
    let t = |x0: f64, x1: f64| {
        vec![
            [[x0, -0.3, 0.0], [x1, -0.3, 0.0], [x1, 0.3, 0.0]],
            [[x0, -0.3, 0.0], [x1, 0.3, 0.0], [x0, 0.3, 0.0]],
        ]
    };
    let mut tris = t(-3.0, -1.0);
    tris.extend(t(-1.0, 1.0)); // the sphere starts on the second pair and moves onto the first
    case.meshes.push(MeshSpec {
        name: "belt".into(),
        stl: None,
        triangles: Some(tris),
        scale: 1.0,
        material: None,
        motion: Motion::Translation {
            velocity: [belt, 0.0, 0.0],
        },
    });
    let mut sim = start_sim(name, kind, case);
    steps(&mut sim, name, 10_000);
    let s = sim.snapshot().unwrap();
    let (v, wr) = (s.vel[0][0], s.omega[0][1] * r);
    println!(
        "[{name}] belt: v = {v:.5} (expected {:.5}), omega_y r = {wr:.5} (expected {:.5})",
        2.0 / 7.0 * belt,
        5.0 / 7.0 * belt
    );
    assert!(
        (v - 2.0 / 7.0 * belt).abs() < 0.01 * belt,
        "[{name}] belt: sphere speed {v} vs 2/7 of {belt}"
    );
    // omega about +y with contact at -z: contact point velocity v - (omega_y r)... = v + omega x (-r z)
    assert!(
        (wr + 5.0 / 7.0 * belt).abs() < 0.01 * belt || (wr - 5.0 / 7.0 * belt).abs() < 0.01 * belt,
        "[{name}] belt: |omega_y r| = {} vs 5/7 of {belt}",
        wr.abs()
    );
}

#[test]
fn mixer_blade_follows_its_prescribed_rotation() {
    for (name, kind) in backends() {
        mixer(&name, &kind);
    }
}

fn mixer(name: &str, kind: &BackendKind) {
    let (r, k) = (0.01, 1e4);
    let mut case = base_case(
        "mixer",
        linear_species("s", r, 2500.0, k, 0.5, 0.5, 0.02),
        linear_wall(k, 0.5, 0.5, 0.02),
        1e-4,
        [-0.3, -0.3, 0.0],
        [0.3, 0.3, 0.4],
        true,
    );
    case.sources.push(Source::RandomBox {
        species: "s".into(),
        min: [-0.28, -0.28, 0.12],
        max: [0.28, 0.28, 0.38],
        count: 600,
        seed: 9,
        velocity: [0.0, 0.0, -1.0],
        shape: None,
    });
    let blade = vec![
        [[-0.25, 0.0, 0.02], [0.25, 0.0, 0.02], [0.25, 0.0, 0.1]],
        [[-0.25, 0.0, 0.02], [0.25, 0.0, 0.1], [-0.25, 0.0, 0.1]],
    ];
    case.meshes.push(MeshSpec {
        name: "blade".into(),
        stl: None,
        triangles: Some(blade),
        scale: 1.0,
        material: None,
        motion: Motion::Rotation {
            axis_point: [0.0; 3],
            axis_direction: [0.0, 0.0, 1.0],
            rpm: 60.0,
        },
    });
    let mut sim = start_sim(name, kind, case);
    for _ in 0..6 {
        steps(&mut sim, name, 1000);
        // The transform reported after step n is the one used for that step's contacts.
        let t_mesh = sim.time() - sim.dt();
        let expect = axis_angle_matrix([0.0, 0.0, 1.0], 2.0 * PI * t_mesh);
        let got = sim.mesh_transforms_f32()[0];
        for (a, b) in got.rotation.iter().zip(expect) {
            assert!(
                (*a as f64 - b).abs() < 1e-6,
                "[{name}] rotation {:?} vs {expect:?} at t = {t_mesh}",
                got.rotation
            );
        }
        assert!(
            got.translation.iter().all(|c| c.abs() < 1e-6),
            "[{name}] translation {:?} at t = {t_mesh}",
            got.translation
        );
        let s = sim.snapshot().unwrap();
        assert!(
            s.pos
                .iter()
                .all(|p| p[0].abs() < 0.3 && p[1].abs() < 0.3 && p[2] > 0.0 && p[2] < 0.4),
            "[{name}] a particle left the box"
        );
    }
    let s = sim.snapshot().unwrap();
    let lz: f64 = s
        .pos
        .iter()
        .zip(&s.vel)
        .map(|(p, v)| p[0] * v[1] - p[1] * v[0])
        .sum();
    println!(
        "[{name}] mixer: angular momentum about z per unit mass: {lz:.4} m^2/s after {} s",
        sim.time()
    );
    assert!(
        lz > 0.5,
        "[{name}] the blade must drive the particles in its direction of rotation, L_z = {lz}"
    );
}

/// A sphere resting on a plate shaken up and down, z_plate = A (1 - cos(w t)) (`oscillation`
/// with phase -90 degrees: the plate starts at rest). The plate pushes the sphere with
/// m (g + a), a = A w^2 cos(w t): while Gamma = A w^2 / g < 1 the sphere never leaves it (and the
/// contact is least pressed, by (1 - Gamma) m g / k, at w t = 180 degrees); above,
/// it lifts off where the plate's downward acceleration first exceeds g, cos(w t) = -1 / Gamma
/// (the vibrated-bed threshold; for Gamma = 2 at w t = 120 degrees). A soft contact lags the
/// rigid law by about w / w_n (w_n = sqrt(k / m): 1.6 degrees here).
#[test]
fn a_sphere_on_a_shaken_plate_lifts_off_where_the_plate_outpulls_gravity() {
    for (name, kind) in backends() {
        for gamma in [0.8, 2.0] {
            shaken_plate(&name, &kind, gamma);
        }
    }
}

fn shaken_plate(name: &str, kind: &BackendKind, gamma: f64) {
    let (r, k, f, g) = (0.02, 1e5, 5.0, 9.81);
    let w = 2.0 * PI * f;
    let a = gamma * g / (w * w);
    let mut case = base_case(
        "plate",
        linear_species("s", r, 2500.0, k, 0.3, 0.5, 0.0),
        linear_wall(k, 0.3, 0.5, 0.0),
        5e-5,
        [-0.5, -0.5, -0.2],
        [0.5, 0.5, 0.5],
        false,
    );
    // At rest on the plate: pressed in by m g / k.
    let m = 2500.0 * 4.0 / 3.0 * PI * r.powi(3);
    let rest = m * g / k;
    case.sources
        .push(single("s", [0.0, 0.0, r - rest], [0.0; 3], r));
    case.meshes.push(MeshSpec {
        name: "plate".into(),
        stl: None,
        triangles: Some(vec![
            [[-0.3, -0.3, 0.0], [0.3, -0.3, 0.0], [0.3, 0.3, 0.0]],
            [[-0.3, -0.3, 0.0], [0.3, 0.3, 0.0], [-0.3, 0.3, 0.0]],
        ]),
        scale: 1.0,
        material: None,
        motion: Motion::Oscillation {
            amplitude: [0.0, 0.0, a],
            frequency: f,
            phase_deg: -90.0,
        },
    });
    let mut sim = start_sim(name, kind, case);
    let plate = |t: f64| a * (1.0 - (w * t).cos());
    // Two periods; the first lift-off, if any: the phase w t at the first step with a gap.
    let mut lift = None;
    let mut min_gap = f64::INFINITY;
    let mut max_gap = f64::NEG_INFINITY;
    while sim.time() < 2.0 / f {
        steps(&mut sim, name, 1);
        let t = sim.time();
        let gap = sim.snapshot().unwrap().pos[0][2] - r - plate(t);
        // (After the ring-down of the plate's sudden start: 1 / (zeta w_n) = 2.6 ms.)
        if t > 0.1 / f {
            (min_gap, max_gap) = (min_gap.min(gap), max_gap.max(gap));
        }
        if gap > 0.0 && lift.is_none() {
            lift = Some((w * t).to_degrees());
            if gamma > 1.0 {
                break;
            }
        }
    }
    println!(
        "[{name}] shaken plate, Gamma = {gamma}: lift-off at {lift:?} degrees; gap {min_gap:.3e} .. {max_gap:.3e} m"
    );
    if gamma < 1.0 {
        assert!(
            lift.is_none(),
            "[{name}] Gamma = {gamma}: the sphere left the plate at {lift:?} degrees (gap up to {max_gap:.3e} m)"
        );
        // Where the plate pulls down hardest (w t = 180 degrees) it still presses with
        // m g (1 - Gamma): the contact is pressed in by (1 - Gamma) m g / k.
        let want = -(1.0 - gamma) * rest;
        assert!(
            (max_gap - want).abs() < 0.25 * want.abs(),
            "[{name}] Gamma = {gamma}: the least overlap is {:.3e} m, the force law says {:.3e}",
            -max_gap,
            -want
        );
    } else {
        let want = (-1.0 / gamma).acos().to_degrees();
        let got = lift.unwrap_or_else(|| panic!("[{name}] Gamma = {gamma}: never lifted off"));
        assert!(
            (got - want).abs() < 3.0,
            "[{name}] Gamma = {gamma}: lift-off at {got:.2} degrees, the rigid law says {want:.2}"
        );
    }
}
