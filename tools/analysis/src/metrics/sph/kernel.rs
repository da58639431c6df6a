//! SPH smoothing kernels (3D, support 2h), for interpolating at probes and gauges.
//!
//! The solver's kernels live in `solver/src/sph/physics.rs`; `analysis` depends on
//! `shm-protocol` only (ARCHITECTURE.md, "Consumer decisions"), so the two kernels it needs are
//! written here again from the same sources, and checked against their defining properties
//! (normalisation, values at q = 0, 1, 2) rather than against the solver's code. The kernel of
//! a run is the case's `[sph] kernel` (Wendland C2 by default).

use std::f64::consts::PI;

/// The kernel a run uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Kernel {
    /// Wendland C2 (Wendland 1995), the solver's and DualSPHysics' default.
    #[default]
    WendlandC2,
    /// Cubic spline M4 (Monaghan & Lattanzio 1985).
    CubicSpline,
}

impl Kernel {
    /// The kernel named by a case file's `[sph] kernel` (`wendland`, `cubic_spline`).
    pub fn from_case_name(name: &str) -> Option<Self> {
        match name {
            "wendland" => Some(Self::WendlandC2),
            "cubic_spline" => Some(Self::CubicSpline),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::WendlandC2 => "wendland",
            Self::CubicSpline => "cubic_spline",
        }
    }

    /// W(r) [1/m^3] at distance `r` [m] for smoothing length `h` [m]; 0 for r >= 2h. With
    /// q = r / h:
    ///
    /// - Wendland C2: alpha_D (1 - q/2)^4 (2q + 1), alpha_D = 21 / (16 pi h^3) (Wendland 1995,
    ///   Adv. Comput. Math. 4:389; DualSPHysics wiki eq. (5));
    /// - cubic spline: alpha_D (1 - 3/2 q^2 + 3/4 q^3) for q < 1, alpha_D / 4 (2 - q)^3 for
    ///   1 <= q < 2, alpha_D = 1 / (pi h^3) (Monaghan & Lattanzio 1985, A&A 149:135;
    ///   DualSPHysics wiki eq. (4)).
    #[inline]
    pub fn w(self, r: f64, h: f64) -> f64 {
        let q = r / h;
        if q >= 2.0 || q.is_nan() {
            return 0.0;
        }
        match self {
            Self::WendlandC2 => {
                let a = 21.0 / (16.0 * PI * h * h * h);
                let t = 1.0 - 0.5 * q;
                let t2 = t * t;
                a * t2 * t2 * (2.0 * q + 1.0)
            }
            Self::CubicSpline => {
                let a = 1.0 / (PI * h * h * h);
                if q >= 1.0 {
                    let t = 2.0 - q;
                    a * 0.25 * t * t * t
                } else {
                    a * (1.0 - 1.5 * q * q + 0.75 * q * q * q)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 4 pi int_0^2h W(r) r^2 dr = 1 (Simpson's rule, 2000 intervals).
    #[test]
    fn both_kernels_integrate_to_one() {
        for k in [Kernel::WendlandC2, Kernel::CubicSpline] {
            let h = 0.0346;
            let n = 2000;
            let dr = 2.0 * h / n as f64;
            let f = |i: usize| {
                let r = i as f64 * dr;
                4.0 * PI * r * r * k.w(r, h)
            };
            let simpson: f64 = (0..=n)
                .map(|i| {
                    let c = if i == 0 || i == n {
                        1.0
                    } else if i % 2 == 1 {
                        4.0
                    } else {
                        2.0
                    };
                    c * f(i)
                })
                .sum::<f64>()
                * dr
                / 3.0;
            assert!((simpson - 1.0).abs() < 1e-9, "{k:?}: {simpson}");
        }
    }

    #[test]
    fn values_at_the_centre_the_knot_and_the_support() {
        let h = 0.5;
        let a_w = 21.0 / (16.0 * PI * h * h * h);
        assert!((Kernel::WendlandC2.w(0.0, h) - a_w).abs() < 1e-15);
        // q = 1: (1/2)^4 * 3 = 3/16.
        assert!((Kernel::WendlandC2.w(h, h) - a_w * 3.0 / 16.0).abs() < 1e-15);
        let a_c = 1.0 / (PI * h * h * h);
        assert!((Kernel::CubicSpline.w(0.0, h) - a_c).abs() < 1e-15);
        // Both branches give alpha_D / 4 at q = 1.
        assert!((Kernel::CubicSpline.w(h, h) - a_c / 4.0).abs() < 1e-15);
        for k in [Kernel::WendlandC2, Kernel::CubicSpline] {
            assert_eq!(k.w(2.0 * h, h), 0.0);
            assert_eq!(k.w(3.0 * h, h), 0.0);
            assert_eq!(k.w(f64::NAN, h), 0.0);
            assert_eq!(Kernel::from_case_name(k.name()), Some(k));
        }
        assert_eq!(Kernel::from_case_name("gaussian"), None);
    }
}
