//! Validation 2: elastic Hertz impact. The contact duration must equal
//! 2.87 (m*^2 / (R* E*^2 v))^(1/5) within 3% (sphere on a wall and two spheres, two speeds), and
//! the rebound must be elastic for e = 1.

mod common;
use common::*;
use solver::case::ContactModelSpec;
use solver::exec::sim::BackendKind;
use solver::Simulation;
use std::f64::consts::PI;

const R: f64 = 0.01;
const RHO: f64 = 2500.0;
const E: f64 = 1e8;
const NU: f64 = 0.3;

fn hertz_case(dt: f64, walls: bool) -> solver::Case {
    let mut sp = linear_species("s", R, RHO, 1.0, 1.0, 0.0, 0.0);
    sp.normal_stiffness = None;
    sp.young_modulus = Some(E);
    sp.poisson_ratio = NU;
    let mut w = linear_wall(1.0, 1.0, 0.0, 0.0);
    w.normal_stiffness = None;
    w.young_modulus = Some(E);
    w.poisson_ratio = NU;
    let mut case = base_case("hertz", sp, w, dt, [0.0; 3], [0.2; 3], walls);
    case.contact_model = ContactModelSpec::HertzMindlin {
        rolling_radius: Default::default(),
    };
    case.gravity = [0.0; 3];
    case
}

fn expected(m_eff: f64, r_eff: f64, e_star: f64, v: f64) -> f64 {
    2.87 * (m_eff * m_eff / (r_eff * e_star * e_star * v)).powf(0.2)
}

#[test]
fn hertz_contact_duration() {
    for (name, kind) in backends() {
        contact_duration(&name, &kind);
    }
}

fn contact_duration(name: &str, kind: &BackendKind) {
    let m = 4.0 / 3.0 * PI * R.powi(3) * RHO;
    for v in [0.5, 2.0] {
        // sphere on wall: m* = m, R* = R, E* = E / (2 (1 - nu^2))
        let t_exp = expected(m, R, E / (2.0 * (1.0 - NU * NU)), v);
        let mut case = hertz_case(t_exp / 1000.0, true);
        case.sources
            .push(single("s", [0.1, 0.1, R + 1e-5], [0.0, 0.0, -v], R));
        let (t, e) = contact_episode(
            name,
            start_sim(name, kind, case),
            |s| s.snapshot().unwrap().pos[0][2] - R,
            |s| -s.snapshot().unwrap().vel[0][2],
        );
        let err = (t - t_exp) / t_exp;
        println!(
            "[{name}] hertz wall v={v}: duration {t:.5e} vs {t_exp:.5e} (err {:.3}%), rebound {e:.5}",
            100.0 * err
        );
        assert!(
            err.abs() < 0.03,
            "[{name}] wall v={v}: duration error {err}"
        );
        assert!(
            (e - 1.0).abs() < 0.005,
            "[{name}] wall v={v}: elastic rebound {e}"
        );

        // two spheres: m* = m/2, R* = R/2, E* as above; relative speed v
        let t_exp = expected(0.5 * m, 0.5 * R, E / (2.0 * (1.0 - NU * NU)), v);
        let mut case = hertz_case(t_exp / 1000.0, false);
        case.sources.push(single(
            "s",
            [0.1 - R - 1e-5, 0.1, 0.1],
            [0.5 * v, 0.0, 0.0],
            R,
        ));
        case.sources.push(single(
            "s",
            [0.1 + R + 1e-5, 0.1, 0.1],
            [-0.5 * v, 0.0, 0.0],
            R,
        ));
        let gap = |s: &Simulation| {
            s.snapshot().unwrap().pos[1][0] - s.snapshot().unwrap().pos[0][0] - 2.0 * R
        };
        let (t, e) = contact_episode(name, start_sim(name, kind, case), gap, |s| {
            s.snapshot().unwrap().vel[0][0] - s.snapshot().unwrap().vel[1][0]
        });
        let err = (t - t_exp) / t_exp;
        println!(
            "[{name}] hertz pair v={v}: duration {t:.5e} vs {t_exp:.5e} (err {:.3}%), rebound {e:.5}",
            100.0 * err
        );
        assert!(
            err.abs() < 0.03,
            "[{name}] pair v={v}: duration error {err}"
        );
        assert!(
            (e - 1.0).abs() < 0.005,
            "[{name}] pair v={v}: elastic rebound {e}"
        );
    }
}
