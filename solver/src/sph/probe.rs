//! Reading a run as a pressure sensor does: the pressure at a point interpolated from the fluid
//! particles with the kernel, as the `analysis` tool's `--probe` computes it
//! (`tools/analysis/src/metrics/sph/interp.rs`) and as DualSPHysics' MeasureTool does on its own
//! dam-break example (`-kclimit 0.5`).
//!
//! With V_j = m / rho_j and W the kernel, the fluid fraction S(x) = sum_j V_j W(|x - x_j|) is 1
//! inside the fluid and about 1/2 on a free surface. The reading is sum_j p_j V_j W / S where
//! S >= 1/2 (Shepard 1968), and sum_j p_j V_j W / (1/2) below: a probe that only a few
//! splashing particles reach reads their pressure in proportion to how much of it they cover,
//! not in full (a thin jet's particles carry the largest acoustic noise of the run).

use super::physics::{self, SphKernel};
use crate::core::vec3::{self, V3};

/// Fluid fraction below which the sum is no longer Shepard-normalised (MeasureTool's
/// `-kclimit`, the `analysis` tool's `FRACTION_LIMIT`).
pub const FRACTION_LIMIT: f64 = 0.5;

/// A probe's reading.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reading {
    /// Pressure [Pa]; 0 where no fluid is within reach.
    pub pressure: f64,
    /// Fluid fraction S (dimensionless).
    pub fraction: f64,
}

/// The reading at `at` from fluid particles given as (position [m], volume m/rho [m^3],
/// pressure [Pa]); `h` [m] the smoothing length of `kernel`.
pub fn read(
    fluid: impl IntoIterator<Item = (V3, f64, f64)>,
    kernel: SphKernel,
    h: f64,
    at: V3,
) -> Reading {
    let (mut s, mut sp) = (0.0, 0.0);
    for (x, vol, p) in fluid {
        let r = vec3::norm(vec3::sub(at, x));
        if r < 2.0 * h {
            let w = vol * physics::kernel_value(kernel, r, h);
            s += w;
            sp += w * p;
        }
    }
    Reading {
        pressure: sp / s.max(FRACTION_LIMIT),
        fraction: s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inside_the_fluid_the_shepard_value_and_splashes_in_proportion() {
        let h = 0.013;
        let k = SphKernel::WendlandC2;
        // A particle at the probe: S = V W(0), small, so the reading is 2 S p, not p.
        let v = 0.0075f64.powi(3);
        let one = read([([0.0; 3], v, 1000.0)], k, h, [0.0; 3]);
        let w0 = physics::kernel_value(k, 0.0, h);
        assert!((one.fraction - v * w0).abs() < 1e-15);
        assert!(one.fraction < FRACTION_LIMIT);
        assert!((one.pressure - 1000.0 * v * w0 / FRACTION_LIMIT).abs() < 1e-9);
        // Enough fluid at one pressure: the Shepard value, that pressure.
        let many: Vec<(V3, f64, f64)> = (0..20).map(|_| ([0.001, 0.0, 0.0], 0.1, 500.0)).collect();
        let full = read(many, k, h, [0.0; 3]);
        assert!(full.fraction > FRACTION_LIMIT);
        assert!((full.pressure - 500.0).abs() < 1e-9);
        // Nothing in reach: 0.
        let none = read([([1.0, 0.0, 0.0], v, 1000.0)], k, h, [0.0; 3]);
        assert_eq!(
            none,
            Reading {
                pressure: 0.0,
                fraction: 0.0
            }
        );
    }
}
