//! Validation 4: a solid sphere on an inclined plane made of two inline triangles (a mesh).
//! * tan(theta) < 3.5 mu: rolls without slipping, a = 5/7 g sin(theta), v = omega r (2%);
//! * tan(theta) > 3.5 mu: slides, a = g (sin(theta) - mu cos(theta)) (2%);
//! * with rolling resistance mu_r > tan(theta), a rolling sphere comes to rest (and without it
//!   keeps accelerating).

mod common;
use common::*;
use solver::core::vec3;
use solver::exec::sim::BackendKind;
use solver::{FrameInput, Simulation};

const R: f64 = 0.05;
const G: f64 = 9.81;

struct Incline {
    u: [f64; 3], // downhill direction
    n: [f64; 3], // plane normal (up)
}

fn incline(theta: f64) -> Incline {
    let (s, c) = theta.sin_cos();
    Incline {
        u: [c, 0.0, -s],
        n: [s, 0.0, c],
    }
}

fn case(theta: f64, mu: f64, mu_r: f64) -> solver::Case {
    let inc = incline(theta);
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
    case.meshes.push(ramp(inc.u));
    case
}

/// Starts the sphere touching the plane 1 m uphill of the origin and 0.25 m off the centre line
/// (so that it crosses the diagonal shared by the two triangles at 0.75 m), with velocity `v0`
/// along the slope, rolling (omega = n x v / r), on backend `kind` (named `name`).
fn start(name: &str, kind: &BackendKind, theta: f64, mu: f64, mu_r: f64, v0: f64) -> Simulation {
    let inc = incline(theta);
    let pos = vec3::add(
        vec3::add(vec3::scale(inc.u, -1.0), vec3::scale(inc.n, R)),
        [0.0, -0.25, 0.0],
    );
    let v = vec3::scale(inc.u, v0);
    let w = vec3::scale(vec3::cross(inc.n, v), 1.0 / R);
    let frame = FrameInput {
        step: 0,
        time: 0.0,
        species: vec![0],
        positions: vec![pos.map(|c| c as f32)],
        velocities: vec![v.map(|c| c as f32)],
        angular_velocities: vec![w.map(|c| c as f32)],
    };
    start_from_frame(name, kind, case(theta, mu, mu_r), &frame)
}

/// Runs `t_end` seconds; returns (fitted acceleration along the slope over [0.1 s, t_end],
/// final speed along the slope, final omega * r).
fn run(name: &str, sim: &mut Simulation, theta: f64, t_end: f64) -> (f64, f64, f64) {
    let inc = incline(theta);
    let (mut ts, mut vs) = (Vec::new(), Vec::new());
    while sim.time() < t_end {
        steps(sim, name, 10);
        if sim.time() > 0.1 {
            ts.push(sim.time());
            vs.push(vec3::dot(sim.snapshot().unwrap().vel[0], inc.u));
        }
    }
    let w = vec3::norm(sim.snapshot().unwrap().omega[0]);
    (slope(&ts, &vs), *vs.last().unwrap(), w * R)
}

#[test]
fn rolls_without_slipping_below_the_critical_angle() {
    let (theta, mu) = (15f64.to_radians(), 0.1);
    assert!(theta.tan() < 3.5 * mu);
    for (name, kind) in backends() {
        rolls(&name, &kind, theta, mu);
    }
}

fn rolls(name: &str, kind: &BackendKind, theta: f64, mu: f64) {
    let mut sim = start(name, kind, theta, mu, 0.0, 0.0);
    let (a, v, wr) = run(name, &mut sim, theta, 0.6);
    let a_exp = 5.0 / 7.0 * G * theta.sin();
    println!("[{name}] rolling: a = {a:.5} vs {a_exp:.5} m/s^2 (err {:.3}%), v = {v:.5}, omega r = {wr:.5} (err {:.3}%)", 100.0 * (a - a_exp) / a_exp, 100.0 * (wr - v) / v);
    assert!(
        ((a - a_exp) / a_exp).abs() < 0.02,
        "[{name}] rolling: acceleration {a} vs {a_exp}"
    );
    assert!(
        ((wr - v) / v).abs() < 0.02,
        "[{name}] rolling: omega r = {wr} vs v = {v} (must not slip)"
    );
}

#[test]
fn slides_above_the_critical_angle() {
    let (theta, mu) = (30f64.to_radians(), 0.1);
    assert!(theta.tan() > 3.5 * mu);
    for (name, kind) in backends() {
        slides(&name, &kind, theta, mu);
    }
}

fn slides(name: &str, kind: &BackendKind, theta: f64, mu: f64) {
    let mut sim = start(name, kind, theta, mu, 0.0, 0.0);
    let (a, v, wr) = run(name, &mut sim, theta, 0.6);
    let a_exp = G * (theta.sin() - mu * theta.cos());
    println!(
        "[{name}] sliding: a = {a:.5} vs {a_exp:.5} m/s^2 (err {:.3}%), v = {v:.4} > omega r = {wr:.4}",
        100.0 * (a - a_exp) / a_exp
    );
    assert!(
        ((a - a_exp) / a_exp).abs() < 0.02,
        "[{name}] sliding: acceleration {a} vs {a_exp}"
    );
    assert!(
        wr < 0.9 * v,
        "[{name}] sliding: must slip, omega r = {wr}, v = {v}"
    );
}

#[test]
fn rolling_resistance_brings_a_sphere_to_rest() {
    let theta = 5f64.to_radians();
    let mu_r = 0.15;
    assert!(theta.tan() < mu_r);
    for (name, kind) in backends() {
        comes_to_rest(&name, &kind, theta, mu_r);
    }
}

fn comes_to_rest(name: &str, kind: &BackendKind, theta: f64, mu_r: f64) {
    let inc = incline(theta);
    let mut sim = start(name, kind, theta, 0.5, mu_r, 0.2);
    steps(&mut sim, name, 15_000);
    let v = vec3::norm(sim.snapshot().unwrap().vel[0]);
    let travelled = vec3::dot(sim.snapshot().unwrap().pos[0], inc.u) + 1.0;
    // expected stopping distance v0^2 / (2 |a|), a = 5/7 g (sin - mu_r cos)
    let a = 5.0 / 7.0 * G * (theta.sin() - mu_r * theta.cos());
    let d_exp = 0.2 * 0.2 / (2.0 * a.abs());
    println!("[{name}] rolling resistance: final speed {v:.2e} m/s, travelled {travelled:.4} m (constant-deceleration estimate {d_exp:.4} m)");
    assert!(v < 1e-3, "[{name}] must come to rest, speed {v}");
    assert!(
        (travelled - d_exp).abs() < 0.1 * d_exp,
        "[{name}] stopping distance {travelled} vs {d_exp}"
    );

    let mut free = start(name, kind, theta, 0.5, 0.0, 0.2);
    steps(&mut free, name, 5_000);
    let v_free = vec3::dot(free.snapshot().unwrap().vel[0], inc.u);
    assert!(
        v_free > 0.2,
        "[{name}] without rolling resistance it accelerates, speed {v_free}"
    );
}

/// A pair table with a frictionless wall (issue 20): particles and the ramp both have mu = 0.5,
/// which alone would make the sphere roll at 5/7 g sin(theta); the interaction
/// `between = ["s", "ramp"]` with zero sliding and rolling friction makes it slide at
/// g sin(theta) without turning, as on a frictionless plane.
#[test]
fn pair_table_frictionless_wall_gives_frictionless_sliding() {
    let (theta, mu) = (30f64.to_radians(), 0.5);
    for (name, kind) in backends() {
        let inc = incline(theta);
        let pos = vec3::add(
            vec3::add(vec3::scale(inc.u, -1.0), vec3::scale(inc.n, R)),
            [0.0, -0.25, 0.0],
        );
        let frame = FrameInput {
            step: 0,
            time: 0.0,
            species: vec![0],
            positions: vec![pos.map(|c| c as f32)],
            velocities: vec![[0.0; 3]],
            angular_velocities: vec![[0.0; 3]],
        };
        let mut c = case(theta, mu, 0.1);
        c.interactions.push(solver::case::Interaction {
            between: ["s".into(), "ramp".into()],
            restitution: None,
            sliding_friction: Some(0.0),
            rolling_friction: Some(0.0),
        });
        let mut sim = start_from_frame(&name, &kind, c, &frame);
        let (a, v, wr) = run(&name, &mut sim, theta, 0.6);
        let a_exp = G * theta.sin();
        println!(
            "[{name}] frictionless pair: a = {a:.5} vs {a_exp:.5} m/s^2 (err {:.4}%), v = {v:.4}, omega r = {wr:.2e}",
            100.0 * (a - a_exp) / a_exp
        );
        assert!(
            ((a - a_exp) / a_exp).abs() < 0.005,
            "[{name}] frictionless pair: acceleration {a} vs g sin(theta) = {a_exp}"
        );
        assert!(
            wr < 1e-6 * v,
            "[{name}] frictionless pair: the sphere turns (omega r = {wr}, v = {v})"
        );
    }
}
