//! Speeds and centre of mass.

use super::energy::Masses;
use super::sums::{particle_sums, SumInputs, SumRequest};

/// Speed |v| [m/s], evaluated in f32 like the velocity.
#[inline]
pub fn speed_of(v: &[f32; 3]) -> f32 {
    let [x, y, z] = *v;
    (x * x + y * y + z * z).sqrt()
}

/// Largest and mean speed, max_i |v_i| and (1/N) sum_i |v_i| [m/s] ([`speed_of`], summed in
/// f64). Non-finite velocities are left out; `None` without particles.
pub fn speeds(velocities: &[[f32; 3]]) -> Option<(f64, f64)> {
    let request = SumRequest {
        speeds: true,
        ..Default::default()
    };
    let inputs = SumInputs {
        velocities: Some(velocities),
        ..SumInputs::default()
    };
    let s = particle_sums(inputs, &request);
    speeds_from(&s)
}

/// Largest and mean speed from a pass's sums (`None` without a finite speed).
pub fn speeds_from(s: &super::sums::Sums) -> Option<(f64, f64)> {
    (s.speed_count > 0).then(|| (s.max_speed, s.speed_sum / s.speed_count as f64))
}

/// Centre of mass sum_i m_i x_i / sum_i m_i [m]. When every mass is zero (no densities in the
/// static section) the plain mean of the positions. `None` without particles.
pub fn center_of_mass(positions: &[[f32; 3]], m: Masses<'_>) -> Option<[f64; 3]> {
    let request = SumRequest {
        center_of_mass: true,
        ..Default::default()
    };
    let inputs = SumInputs {
        positions: Some(positions),
        ..SumInputs::with_masses(m)
    };
    center_of_mass_from(&particle_sums(inputs, &request))
}

/// Centre of mass from a pass's sums.
pub fn center_of_mass_from(s: &super::sums::Sums) -> Option<[f64; 3]> {
    if s.position_count == 0 {
        None
    } else if s.mass > 0.0 {
        Some(s.mass_moment.map(|v| v / s.mass))
    } else {
        Some(s.position_sum.map(|v| v / s.position_count as f64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::energy::particle_masses;

    #[test]
    fn speeds_by_hand() {
        let (max, mean) =
            speeds(&[[3.0, 4.0, 0.0], [0.0, 0.0, 1.0], [f32::NAN, 0.0, 0.0]]).unwrap();
        assert_eq!(max, 5.0);
        assert_eq!(mean, 3.0);
        assert!(speeds(&[]).is_none());
    }

    #[test]
    fn centre_of_mass_is_mass_weighted() {
        // Same radius, densities 1000 and 3000: COM at 3/4 of the way from x=0 to x=4 -> x=3.
        let mass = particle_masses(&[0.1, 0.1], &[0, 1], &[1000.0, 3000.0]);
        let m = Masses {
            mass: &mass,
            radii: &[0.1, 0.1],
        };
        let c = center_of_mass(&[[0.0, 0.0, 0.0], [4.0, 2.0, 0.0]], m).unwrap();
        assert!(
            (c[0] - 3.0).abs() < 1e-12 && (c[1] - 1.5).abs() < 1e-12,
            "{c:?}"
        );
        let massless = Masses {
            mass: &[0.0, 0.0],
            ..m
        };
        let c = center_of_mass(&[[0.0, 0.0, 0.0], [4.0, 2.0, 0.0]], massless).unwrap();
        assert_eq!(c, [2.0, 1.0, 0.0]);
    }
}
