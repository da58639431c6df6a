//! Speeds and centre of mass.

use super::energy::Masses;
use crate::par::map_chunks;

/// Largest and mean speed, max_i |v_i| and (1/N) sum_i |v_i| [m/s] (|v_i| evaluated in f32
/// like the velocities, summed in f64). Non-finite velocities are left out; `None` without
/// particles.
pub fn speeds(velocities: &[[f32; 3]]) -> Option<(f64, f64)> {
    let parts = map_chunks(velocities.len(), |r| chunk_speeds(&velocities[r]));
    let (max, sum, n) = parts
        .into_iter()
        .fold((0.0f64, 0.0, 0), |(a, b, c), (d, e, f)| {
            (a.max(d), b + e, c + f)
        });
    (n > 0).then(|| (max, sum / n as f64))
}

/// Largest speed, sum of speeds and count of finite speeds in `v`: branch-free, four partial
/// sums, so that it vectorises.
#[inline(never)]
fn chunk_speeds(v: &[[f32; 3]]) -> (f64, f64, usize) {
    let (mut max, mut sum, mut n) = ([0.0f32; 4], [0.0f64; 4], [0usize; 4]);
    let mut groups = v.chunks_exact(4);
    for g in &mut groups {
        for l in 0..4 {
            let [x, y, z] = g[l];
            let s = (x * x + y * y + z * z).sqrt();
            let ok = s < f32::INFINITY;
            max[l] = if ok && s > max[l] { s } else { max[l] };
            sum[l] += if ok { s as f64 } else { 0.0 };
            n[l] += ok as usize;
        }
    }
    for (l, &[x, y, z]) in groups.remainder().iter().enumerate() {
        let s = (x * x + y * y + z * z).sqrt();
        if s < f32::INFINITY {
            max[l] = max[l].max(s);
            sum[l] += s as f64;
            n[l] += 1;
        }
    }
    let m = max.iter().fold(0.0f32, |a, &b| a.max(b));
    (
        m as f64,
        (sum[0] + sum[1]) + (sum[2] + sum[3]),
        n.iter().sum(),
    )
}

/// Centre of mass sum_i m_i x_i / sum_i m_i [m]. When every mass is zero (no densities in the
/// static section) the plain mean of the positions. `None` without particles.
pub fn center_of_mass(positions: &[[f32; 3]], m: Masses<'_>) -> Option<[f64; 3]> {
    let n = positions.len().min(m.mass.len());
    let parts = map_chunks(n, |r| {
        let (mut wx, mut w, mut px) = ([0.0f64; 3], 0.0f64, [0.0f64; 3]);
        for i in r {
            let (x, mi) = (positions[i].map(f64::from), m.mass[i]);
            for k in 0..3 {
                wx[k] += mi * x[k];
                px[k] += x[k];
            }
            w += mi;
        }
        (wx, w, px)
    });
    let (wx, w, px) = parts
        .into_iter()
        .fold(([0.0; 3], 0.0, [0.0; 3]), |(a, b, c), (e, f, g)| {
            (
                [0, 1, 2].map(|k| a[k] + e[k]),
                b + f,
                [0, 1, 2].map(|k| c[k] + g[k]),
            )
        });
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
