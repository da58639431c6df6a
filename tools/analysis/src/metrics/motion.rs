//! Speeds and centre of mass.

use rayon::prelude::*;

use super::energy::Masses;
use crate::grid::MIN_CHUNK;

/// Largest and mean speed, max_i |v_i| and (1/N) sum_i |v_i| [m/s]. Non-finite velocities are
/// left out; `None` without particles.
pub fn speeds(velocities: &[[f32; 3]]) -> Option<(f64, f64)> {
    let (max, sum, n) = velocities
        .par_iter()
        .with_min_len(MIN_CHUNK)
        .map(|v| {
            let [x, y, z] = v.map(f64::from);
            (x * x + y * y + z * z).sqrt()
        })
        .filter(|s| s.is_finite())
        .fold(
            || (0.0f64, 0.0f64, 0usize),
            |(m, s, n), v| (m.max(v), s + v, n + 1),
        )
        .reduce(
            || (0.0, 0.0, 0),
            |(a, b, c), (d, e, f)| (a.max(d), b + e, c + f),
        );
    (n > 0).then(|| (max, sum / n as f64))
}

/// Centre of mass sum_i m_i x_i / sum_i m_i [m]. When every mass is zero (no densities in the
/// static section) the plain mean of the positions. `None` without particles.
pub fn center_of_mass(positions: &[[f32; 3]], m: Masses<'_>) -> Option<[f64; 3]> {
    let (wx, w, px, n) = positions
        .par_iter()
        .enumerate()
        .with_min_len(MIN_CHUNK)
        .fold(
            || ([0.0f64; 3], 0.0f64, [0.0f64; 3], 0usize),
            |(mut wx, mut w, mut px, n), (i, x)| {
                let mi = m.mass(i);
                for k in 0..3 {
                    wx[k] += mi * x[k] as f64;
                    px[k] += x[k] as f64;
                }
                w += mi;
                (wx, w, px, n + 1)
            },
        )
        .reduce(
            || ([0.0; 3], 0.0, [0.0; 3], 0),
            |(a, b, c, d), (e, f, g, h)| {
                (
                    [0, 1, 2].map(|k| a[k] + e[k]),
                    b + f,
                    [0, 1, 2].map(|k| c[k] + g[k]),
                    d + h,
                )
            },
        );
    if n == 0 {
        None
    } else if w > 0.0 {
        Some(wx.map(|v| v / w))
    } else {
        Some(px.map(|v| v / n as f64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let m = Masses {
            radii: &[0.1, 0.1],
            species: &[0, 1],
            density: &[1000.0, 3000.0],
        };
        let c = center_of_mass(&[[0.0, 0.0, 0.0], [4.0, 2.0, 0.0]], m).unwrap();
        assert!(
            (c[0] - 3.0).abs() < 1e-12 && (c[1] - 1.5).abs() < 1e-12,
            "{c:?}"
        );
        let massless = Masses {
            density: &[0.0, 0.0],
            ..m
        };
        let c = center_of_mass(&[[0.0, 0.0, 0.0], [4.0, 2.0, 0.0]], massless).unwrap();
        assert_eq!(c, [2.0, 1.0, 0.0]);
    }
}
