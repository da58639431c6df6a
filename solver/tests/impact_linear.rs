//! Validation 1: normal impact with the linear spring-dashpot. The measured coefficient of
//! restitution must equal the configured e, and the contact duration must equal the damped
//! half-period pi / sqrt(k/m* - (c/2m*)^2), each within 1%, for a sphere hitting a wall and for
//! two spheres hitting each other.

mod common;
use common::*;
use solver::exec::sim::BackendKind;
use solver::Simulation;
use std::f64::consts::PI;

const R: f64 = 0.01;
const RHO: f64 = 2500.0;
const K: f64 = 1e5;

fn mass() -> f64 {
    4.0 / 3.0 * PI * R.powi(3) * RHO
}

/// Expected duration from the textbook formula, written out here independently of the library.
fn expected_duration(m_eff: f64, e: f64) -> f64 {
    let ln_e = e.ln();
    let c = 2.0 * (K * m_eff).sqrt() * (-ln_e) / (PI * PI + ln_e * ln_e).sqrt();
    PI / (K / m_eff - (c / (2.0 * m_eff)).powi(2)).sqrt()
}

fn dt_for(m_eff: f64) -> f64 {
    PI * (m_eff / K).sqrt() / 1000.0
}

#[test]
fn sphere_on_wall_restitution_and_duration() {
    for (name, kind) in backends() {
        sphere_on_wall(&name, &kind);
    }
}

fn sphere_on_wall(name: &str, kind: &BackendKind) {
    for e in [0.1, 0.5, 0.9] {
        let m = mass();
        let mut case = base_case(
            "wall impact",
            linear_species("s", R, RHO, K, e, 0.0, 0.0),
            linear_wall(K, e, 0.0, 0.0),
            dt_for(m),
            [0.0; 3],
            [0.1; 3],
            true,
        );
        case.gravity = [0.0; 3];
        case.sources
            .push(single("s", [0.05, 0.05, R + 1e-4], [0.0, 0.0, -1.0], R));
        let sim = start_sim(name, kind, case);
        let (t_meas, e_meas) = contact_episode(
            name,
            sim,
            |s| s.snapshot().unwrap().pos[0][2] - R,
            |s| -s.snapshot().unwrap().vel[0][2],
        );
        let t_exp = expected_duration(m, e);
        let (de, dtc) = ((e_meas - e) / e, (t_meas - t_exp) / t_exp);
        println!("[{name}] wall e={e}: measured e={e_meas:.5} (err {:.3}%), duration {t_meas:.6e} vs {t_exp:.6e} (err {:.3}%)", 100.0 * de, 100.0 * dtc);
        assert!(de.abs() < 0.01, "[{name}] e={e}: restitution error {de}");
        assert!(dtc.abs() < 0.01, "[{name}] e={e}: duration error {dtc}");
    }
}

#[test]
fn two_spheres_restitution_and_duration() {
    for (name, kind) in backends() {
        two_spheres(&name, &kind);
    }
}

fn two_spheres(name: &str, kind: &BackendKind) {
    for e in [0.1, 0.5, 0.9] {
        let m_eff = 0.5 * mass();
        let mut case = base_case(
            "pair impact",
            linear_species("s", R, RHO, K, e, 0.0, 0.0),
            linear_wall(K, e, 0.0, 0.0),
            dt_for(m_eff),
            [0.0; 3],
            [0.2; 3],
            false,
        );
        case.gravity = [0.0; 3];
        case.sources
            .push(single("s", [0.1 - R - 1e-4, 0.1, 0.1], [0.5, 0.0, 0.0], R));
        case.sources
            .push(single("s", [0.1 + R + 1e-4, 0.1, 0.1], [-0.5, 0.0, 0.0], R));
        let sim = start_sim(name, kind, case);
        let gap = |s: &Simulation| {
            s.snapshot().unwrap().pos[1][0] - s.snapshot().unwrap().pos[0][0] - 2.0 * R
        };
        let (t_meas, e_meas) = contact_episode(name, sim, gap, |s| {
            s.snapshot().unwrap().vel[0][0] - s.snapshot().unwrap().vel[1][0]
        });
        let t_exp = expected_duration(m_eff, e);
        let (de, dtc) = ((e_meas - e) / e, (t_meas - t_exp) / t_exp);
        println!("[{name}] pair e={e}: measured e={e_meas:.5} (err {:.3}%), duration {t_meas:.6e} vs {t_exp:.6e} (err {:.3}%)", 100.0 * de, 100.0 * dtc);
        assert!(de.abs() < 0.01, "[{name}] e={e}: restitution error {de}");
        assert!(dtc.abs() < 0.01, "[{name}] e={e}: duration error {dtc}");
    }
}
