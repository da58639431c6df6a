//! Validation 3: with e = 1 and no friction, the total energy (kinetic + potential + elastic
//! spring energy) of a dense random system falling in a box drifts by less than 0.5% over
//! 10,000 steps, for both integrators.

mod common;
use common::*;
use solver::case::{Integrator, Source};
use solver::exec::sim::BackendKind;
use std::f64::consts::PI;

/// Largest relative drift of the total energy over 10,000 steps on backend `name`.
fn drift(name: &str, kind: &BackendKind, integrator: Integrator) -> f64 {
    let (r, rho, k) = (0.01, 2500.0, 1e4);
    let m_eff = 0.5 * 4.0 / 3.0 * PI * r * r * r * rho;
    let tc = PI * (m_eff / k).sqrt();
    let mut case = base_case(
        "energy",
        linear_species("s", r, rho, k, 1.0, 0.0, 0.0),
        linear_wall(k, 1.0, 0.0, 0.0),
        tc / 50.0,
        [0.0; 3],
        [0.2; 3],
        true,
    );
    case.integrator = integrator;
    // 450 spheres at 24% solid fraction, then falling and colliding.
    case.sources.push(Source::RandomBox {
        species: "s".into(),
        min: [0.0; 3],
        max: [0.2; 3],
        count: 450,
        seed: 3,
        velocity: [0.0; 3],
        shape: None,
    });
    let mut sim = start_sim(name, kind, case);
    let e0 = sim.energies().unwrap().total();
    let mut worst: f64 = 0.0;
    let mut max_contacts = 0;
    for _ in 0..100 {
        steps(&mut sim, name, 100);
        let e = sim.energies().unwrap();
        worst = worst.max(((e.total() - e0) / e0).abs());
        max_contacts = max_contacts.max(sim.stats().unwrap().contacts);
    }
    let e = sim.energies().unwrap();
    println!(
        "[{name}] {integrator:?}: max |dE|/E0 = {:.4}% over 10,000 steps (E0 = {e0:.4} J; final kinetic {:.4} J, elastic {:.5} J; up to {max_contacts} contacts)",
        100.0 * worst,
        e.kinetic_translation + e.kinetic_rotation,
        e.elastic
    );
    assert!(
        e.kinetic_translation > 0.1 * e0,
        "[{name}] {integrator:?}: the system must still be moving"
    );
    worst
}

fn check(integrator: Integrator) {
    for (name, kind) in backends() {
        let worst = drift(&name, &kind, integrator);
        assert!(
            worst < 0.005,
            "[{name}] {integrator:?}: energy drift {worst} (max |dE|/E0)"
        );
    }
}

#[test]
fn energy_conserved_symplectic_euler() {
    check(Integrator::SymplecticEuler);
}

#[test]
fn energy_conserved_velocity_verlet() {
    check(Integrator::VelocityVerlet);
}
