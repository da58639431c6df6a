//! Kinetic and potential energies of spheres.

use rayon::prelude::*;

use super::sums::{particle_sums, SumInputs, SumRequest};
use crate::par::CHUNK;

/// Per-particle mass [kg] and radius [m], in frame order (see [`particle_masses`]).
#[derive(Clone, Copy)]
pub struct Masses<'a> {
    pub mass: &'a [f64],
    pub radii: &'a [f32],
}

/// Mass of every particle [kg] from its radius [m], its species and the species' densities
/// [kg/m^3] (0 for an unknown species: never panics). Computed once per static generation, so
/// that the per-frame sums only stream the frame's arrays.
pub fn particle_masses(radii: &[f32], species: &[u32], density: &[f64]) -> Vec<f64> {
    radii
        .par_iter()
        .zip(species)
        .with_min_len(CHUNK)
        .map(|(&r, &s)| sphere_mass(density.get(s as usize).copied().unwrap_or(0.0), r as f64))
        .collect()
}

/// Mass of a solid sphere, m = rho * 4/3 * pi * r^3 [kg] (rho [kg/m^3], r [m]).
#[inline]
pub fn sphere_mass(density: f64, radius: f64) -> f64 {
    density * 4.0 / 3.0 * std::f64::consts::PI * radius * radius * radius
}

/// Moment of inertia of a solid sphere about a diameter, I = 2/5 m r^2 [kg m^2].
#[inline]
pub fn sphere_inertia(mass: f64, radius: f64) -> f64 {
    0.4 * mass * radius * radius
}

#[inline]
fn norm2(v: &[f32; 3]) -> f64 {
    let [x, y, z] = v.map(f64::from);
    x * x + y * y + z * z
}

/// Translational kinetic energy of one particle, 1/2 m |v|^2 [J].
#[inline]
pub fn kinetic_term(mass: f64, v: &[f32; 3]) -> f64 {
    0.5 * mass * norm2(v)
}

/// Rotational kinetic energy of one sphere, 1/2 I |w|^2 with I = 2/5 m r^2 [J].
#[inline]
pub fn rotational_term(mass: f64, radius: f32, w: &[f32; 3]) -> f64 {
    0.5 * sphere_inertia(mass, radius as f64) * norm2(w)
}

/// Potential energy of one particle, -m g . (x - x_ref) [J].
#[inline]
pub fn potential_term(mass: f64, gravity: [f64; 3], x: &[f32; 3], reference: [f64; 3]) -> f64 {
    let dot = gravity[0] * (x[0] as f64 - reference[0])
        + gravity[1] * (x[1] as f64 - reference[1])
        + gravity[2] * (x[2] as f64 - reference[2]);
    -mass * dot
}

/// Translational kinetic energy E_t = sum_i 1/2 m_i |v_i|^2 [J] (v [m/s]).
pub fn kinetic_energy_translational(velocities: &[[f32; 3]], m: Masses<'_>) -> f64 {
    let request = SumRequest {
        kinetic_translational: true,
        ..Default::default()
    };
    let inputs = SumInputs {
        velocities: Some(velocities),
        ..SumInputs::with_masses(m)
    };
    particle_sums(inputs, &request).kinetic_translational
}

/// Rotational kinetic energy E_r = sum_i 1/2 I_i |w_i|^2 with I_i = 2/5 m_i r_i^2 [J]
/// (w [rad/s]).
pub fn kinetic_energy_rotational(angular_velocities: &[[f32; 3]], m: Masses<'_>) -> f64 {
    let request = SumRequest {
        kinetic_rotational: true,
        ..Default::default()
    };
    let inputs = SumInputs {
        angular_velocities: Some(angular_velocities),
        ..SumInputs::with_masses(m)
    };
    particle_sums(inputs, &request).kinetic_rotational
}

/// Gravitational potential energy E_p = -sum_i m_i g . (x_i - x_ref) [J] (g [m/s^2], x [m]).
/// With g = (0, 0, -g) and x_ref = world_min this is sum_i m_i g (z_i - z_min).
pub fn potential_energy(
    positions: &[[f32; 3]],
    m: Masses<'_>,
    gravity: [f64; 3],
    reference: [f64; 3],
) -> f64 {
    let request = SumRequest {
        potential: Some((gravity, reference)),
        ..Default::default()
    };
    let inputs = SumInputs {
        positions: Some(positions),
        ..SumInputs::with_masses(m)
    };
    particle_sums(inputs, &request).potential
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::f64::consts::PI;

    const R: [f32; 2] = [0.1, 0.2];
    const S: [u32; 2] = [0, 1];
    const RHO: [f64; 2] = [1000.0, 2500.0];

    fn masses() -> Masses<'static> {
        let mass = particle_masses(&R, &S, &RHO);
        Masses {
            mass: Vec::leak(mass),
            radii: &R,
        }
    }

    // Hand computation: m0 = 1000 * 4/3 pi 0.1^3 = 4.18879 kg; m1 = 2500 * 4/3 pi 0.2^3 = 83.7758 kg.
    // (Radii are f32, so results agree to ~1e-7 relative.)
    fn m0() -> f64 {
        1000.0 * 4.0 / 3.0 * PI * 0.001
    }
    fn m1() -> f64 {
        2500.0 * 4.0 / 3.0 * PI * 0.008
    }

    #[test]
    fn translational_energy_by_hand() {
        // |v0|^2 = 25, |v1|^2 = 1: E = 0.5 (m0 25 + m1 1) = 52.3599 + 41.8879 J.
        let e = kinetic_energy_translational(&[[3.0, 4.0, 0.0], [0.0, 0.0, -1.0]], masses());
        let want = 0.5 * (m0() * 25.0 + m1());
        assert!((e - want).abs() < 1e-6 * want, "{e} vs {want}");
        assert!((e - 94.2478).abs() < 1e-3);
    }

    #[test]
    fn rotational_energy_by_hand() {
        // I0 = 0.4 m0 0.01 = 0.0167552; w0 = 10 rad/s -> 0.5 I0 100 = 0.837758 J; particle 1 still.
        let e = kinetic_energy_rotational(&[[0.0, 0.0, 10.0], [0.0; 3]], masses());
        assert!((e - 0.837758).abs() < 1e-5, "{e}");
    }

    #[test]
    fn potential_energy_by_hand() {
        // z0 = 1.5, z1 = -0.5, reference z = -0.5, g = 9.81: E = m0 9.81 2 + 0 = 82.1841 J.
        let e = potential_energy(
            &[[7.0, 3.0, 1.5], [1.0, 1.0, -0.5]],
            masses(),
            [0.0, 0.0, -9.81],
            [-1.0, -1.0, -0.5],
        );
        assert!((e - m0() * 9.81 * 2.0).abs() < 1e-6 * e, "{e}");
        assert!((e - 82.1841).abs() < 1e-3);
    }

    #[test]
    fn unknown_species_weighs_nothing() {
        assert_eq!(
            particle_masses(&[1.0, 1.0], &[7, 0], &[1.0]),
            [0.0, 4.0 / 3.0 * PI]
        );
    }
}
