//! Kinetic and potential energies of spheres.

use rayon::prelude::*;

use crate::grid::MIN_CHUNK;

/// Per-particle mass inputs: radius [m] and species, and each species' density [kg/m^3].
/// Species indices were checked against `density` when the context was built.
#[derive(Clone, Copy)]
pub struct Masses<'a> {
    pub radii: &'a [f32],
    pub species: &'a [u32],
    pub density: &'a [f64],
}

impl Masses<'_> {
    /// Mass of particle `i` [kg] (0 for an unknown species: never panics).
    #[inline]
    pub fn mass(&self, i: usize) -> f64 {
        let rho = self
            .density
            .get(self.species[i] as usize)
            .copied()
            .unwrap_or(0.0);
        sphere_mass(rho, self.radii[i] as f64)
    }
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

/// Translational kinetic energy E_t = sum_i 1/2 m_i |v_i|^2 [J] (v [m/s]).
pub fn kinetic_energy_translational(velocities: &[[f32; 3]], m: Masses<'_>) -> f64 {
    velocities
        .par_iter()
        .enumerate()
        .with_min_len(MIN_CHUNK)
        .map(|(i, v)| 0.5 * m.mass(i) * norm2(v))
        .sum()
}

/// Rotational kinetic energy E_r = sum_i 1/2 I_i |w_i|^2 with I_i = 2/5 m_i r_i^2 [J]
/// (w [rad/s]).
pub fn kinetic_energy_rotational(angular_velocities: &[[f32; 3]], m: Masses<'_>) -> f64 {
    angular_velocities
        .par_iter()
        .enumerate()
        .with_min_len(MIN_CHUNK)
        .map(|(i, w)| 0.5 * sphere_inertia(m.mass(i), m.radii[i] as f64) * norm2(w))
        .sum()
}

/// Gravitational potential energy E_p = -sum_i m_i g . (x_i - x_ref) [J] (g [m/s^2], x [m]).
/// With g = (0, 0, -g) and x_ref = world_min this is sum_i m_i g (z_i - z_min).
pub fn potential_energy(
    positions: &[[f32; 3]],
    m: Masses<'_>,
    gravity: [f64; 3],
    reference: [f64; 3],
) -> f64 {
    positions
        .par_iter()
        .enumerate()
        .with_min_len(MIN_CHUNK)
        .map(|(i, x)| {
            let dot: f64 = (0..3)
                .map(|k| gravity[k] * (x[k] as f64 - reference[k]))
                .sum();
            -m.mass(i) * dot
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::f64::consts::PI;

    const R: [f32; 2] = [0.1, 0.2];
    const S: [u32; 2] = [0, 1];
    const RHO: [f64; 2] = [1000.0, 2500.0];

    fn masses() -> Masses<'static> {
        Masses {
            radii: &R,
            species: &S,
            density: &RHO,
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
        let m = Masses {
            radii: &[1.0],
            species: &[7],
            density: &[1.0],
        };
        assert_eq!(m.mass(0), 0.0);
    }
}
