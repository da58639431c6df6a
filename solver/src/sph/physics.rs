//! Weakly compressible SPH physics: every formula exactly once, as small pure functions.
//!
//! Units are SI throughout (m, kg, s, Pa). Each function says where its formula comes from; where
//! a form is taken from DualSPHysics (v5.4, `src/source/`), the function it mirrors is named, and
//! "wiki eq. (n)" refers to the numbered equations of the DualSPHysics wiki page "3. SPH
//! formulation". The CUDA twins in `kernels/src/cuda/sph_physics.cuh` carry the same names and
//! argument order (`__device__ real wendland_c2(real r, real h)`); solver/tests/sph_physics_parity.rs
//! compares every twin with its Rust function bit for bit in f64, and checks that names and
//! argument names agree.
//!
//! Conventions, used by every pair term (particle `i` and its neighbour `j`):
//! * `r_ij = x_i - x_j` [m], `r = |r_ij|`, `v_ij = v_i - v_j` [m/s],
//! * the kernel gradient is `grad_i W_ij = F(r) r_ij` with `F` the gradient factor
//!   ([`wendland_c2_grad_factor`]); F < 0 inside the support, so grad_i W_ij points from `i`
//!   towards `j`,
//! * the support is `r < 2h` (`q = r/h < 2`), 3D normalisation,
//! * `v_ij . r_ij < 0` means the pair approaches,
//! * gravity is a vector `g` [m/s^2] (e.g. `(0, 0, -9.81)`); "depth" is measured down from the
//!   free surface.
//!
//! Every pair term returns what particle `i` receives from `j`; the caller sums over `j`.

use crate::core::vec3::{self, V3};
use std::f64::consts::PI;

/// Polytropic exponent of the Tait equation of state, gamma = 7 for water [-] (Batchelor 1967;
/// Monaghan 1994, sec. 2). Fixed, so that `(rho/rho0)^gamma` is a product of multiplications
/// (bit-identical on the GPU, where `pow` is not) and the inverse a seventh root
/// ([`seventh_root_minus_one`]).
pub const TAIT_GAMMA: f64 = 7.0;

/// eta^2 = 0.01 h^2 keeps `1/(r^2 + eta^2)` finite when two particles meet (Monaghan 1992,
/// sec. 4; DualSPHysics `Eta2`) [-].
pub const ETA2_COEFFICIENT: f64 = 0.01;

/// Newton iterations [`seventh_root_minus_one`] may take at most; it stops earlier, as soon as an
/// iterate fails to decrease (converged). About 5 suffice for |t| < 1, about 25 for t = 1e12.
pub const SEVENTH_ROOT_MAX_ITERATIONS: u32 = 100;

/// Up to this |t| [`seventh_root_minus_one`] sums the binomial series instead of iterating: the
/// first term left out, C(1/7, 9) t^9, is below 4e-16 of the result there [-].
pub const SEVENTH_ROOT_SERIES_MAX: f64 = 1.0 / 64.0;

/// The binomial coefficients C(1/7, k) = (1/7)(1/7 - 1)...(1/7 - k + 1) / k!, k = 1..8: 1/7,
/// -3/49, 13/343, -65/2401, 351/16807, -1989/117649, 81549/5764801, -489294/40353607 [-].
pub const SEVENTH_ROOT_SERIES: [f64; 8] = [
    0.14285714285714285,
    -0.061224489795918366,
    0.037900874635568516,
    -0.027072053311120368,
    0.02088415541143571,
    -0.016906221047352718,
    0.014146021692682887,
    -0.012125161450871046,
];

/// Which smoothing kernel the pair terms use.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum SphKernel {
    /// Wendland C2 (the default, as in DualSPHysics): free of the pairing instability (Dehnen &
    /// Aly 2012, MNRAS 425:1068).
    WendlandC2 = 0,
    /// Cubic B-spline (M4).
    CubicSpline = 1,
}

/// One neighbour pair seen from particle `i`: what the pair terms read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SphPair {
    /// x_i - x_j [m].
    pub r_ij: V3,
    /// v_i - v_j [m/s].
    pub v_ij: V3,
    /// Densities [kg/m^3].
    pub rho_i: f64,
    pub rho_j: f64,
    /// Pressures [Pa].
    pub p_i: f64,
    pub p_j: f64,
    /// Speeds of sound [m/s] ([`sound_speed`]).
    pub c_i: f64,
    pub c_j: f64,
    /// Mass of the neighbour [kg].
    pub m_j: f64,
}

/// Constants of the delta-SPH density diffusion, computed once on the host.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DiffusionParams {
    /// Diffusion coefficient delta [-] (0.1 recommended: Molteni & Colagrossi 2009, DualSPHysics).
    pub delta: f64,
    /// Smoothing length h [m].
    pub h: f64,
    /// Reference speed of sound c0 [m/s].
    pub c0: f64,
    /// Reference density rho0 [kg/m^3].
    pub rho0: f64,
    /// Tait stiffness B [Pa] ([`tait_b`]).
    pub b: f64,
    /// Gravity vector [m/s^2] (only the Fourtakas variant reads it).
    pub gravity: V3,
}

/// Position, velocity and density of one particle: what the integrator advances.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FluidState {
    /// Position [m].
    pub x: V3,
    /// Velocity [m/s].
    pub v: V3,
    /// Density [kg/m^3].
    pub rho: f64,
}

/// Time derivatives of one particle, summed over its neighbours.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FluidRates {
    /// Acceleration from the pair terms, gravity excluded [m/s^2].
    pub acc: V3,
    /// d rho / dt: continuity plus density diffusion [kg/(m^3 s)].
    pub drho: f64,
}

// ---------------------------------------------------------------------------------------------
// Smoothing kernels (3D, support 2h)
// ---------------------------------------------------------------------------------------------

/// Normalisation of the Wendland C2 kernel in 3D, alpha_D = 21 / (16 pi h^3) [1/m^3]
/// (Wendland 1995, Adv. Comput. Math. 4:389, the C2 function of degree 5 in 3D, rescaled to the
/// support 2h; DualSPHysics wiki eq. (5), `GetKernelWendland_Ctes`: 0.41778/h^3).
#[inline]
pub fn wendland_c2_alpha(h: f64) -> f64 {
    21.0 / (16.0 * PI * h * h * h)
}

/// Wendland C2 kernel W(r) = alpha_D (1 - q/2)^4 (2q + 1) for q = r/h < 2, else 0 [1/m^3]
/// (Wendland 1995; DualSPHysics wiki eq. (5)). `r` >= 0 is the distance [m], `h` the smoothing
/// length [m].
#[inline]
pub fn wendland_c2(r: f64, h: f64) -> f64 {
    let q = r / h;
    if q >= 2.0 {
        return 0.0;
    }
    let w = 1.0 - 0.5 * q;
    let w2 = w * w;
    wendland_c2_alpha(h) * (w2 * w2) * (2.0 * q + 1.0)
}

/// Gradient factor of the Wendland C2 kernel, F(r) = (dW/dr) / r [1/m^5], so that
/// grad_i W_ij = F r_ij (the `fac` of DualSPHysics `GetKernelWendland_Fac`).
///
/// dW/dq = alpha_D [-2 (1 - q/2)^3 (2q + 1) + 2 (1 - q/2)^4] = -5 alpha_D q (1 - q/2)^3, and
/// dW/dr = (dW/dq) / h with q / r = 1/h, so F = -5 alpha_D / h^2 (1 - q/2)^3: finite at r = 0
/// (where the gradient itself, F r_ij, is zero), zero for q >= 2.
#[inline]
pub fn wendland_c2_grad_factor(r: f64, h: f64) -> f64 {
    let q = r / h;
    if q >= 2.0 {
        return 0.0;
    }
    let w = 1.0 - 0.5 * q;
    -5.0 * wendland_c2_alpha(h) / (h * h) * (w * w * w)
}

/// Normalisation of the cubic spline kernel in 3D, alpha_D = 1 / (pi h^3) [1/m^3]
/// (Monaghan & Lattanzio 1985, A&A 149:135, the M4 spline; DualSPHysics wiki eq. (4)).
#[inline]
pub fn cubic_spline_alpha(h: f64) -> f64 {
    1.0 / (PI * h * h * h)
}

/// Cubic spline kernel [1/m^3] (Monaghan & Lattanzio 1985; DualSPHysics wiki eq. (4)):
/// alpha_D (1 - 3/2 q^2 + 3/4 q^3) for q < 1, alpha_D / 4 (2 - q)^3 for 1 <= q < 2, else 0.
#[inline]
pub fn cubic_spline(r: f64, h: f64) -> f64 {
    let q = r / h;
    if q >= 2.0 {
        0.0
    } else if q >= 1.0 {
        let w = 2.0 - q;
        cubic_spline_alpha(h) * 0.25 * (w * w * w)
    } else {
        cubic_spline_alpha(h) * (1.0 - 1.5 * q * q + 0.75 * q * q * q)
    }
}

/// Gradient factor of the cubic spline, F(r) = (dW/dr) / r [1/m^5] (DualSPHysics
/// `GetKernelCubic_Fac`). With dW/dr = (dW/dq) / h and q / r = 1/h, F = alpha_D / h^2 (dW/dq) / q:
/// alpha_D / h^2 (-3 + 9/4 q) for q < 1 (finite at r = 0), alpha_D / h^2 (-3/4 (2 - q)^2 / q) for
/// 1 <= q < 2 (both -3/4 alpha_D / h^2 at q = 1), else 0.
#[inline]
pub fn cubic_spline_grad_factor(r: f64, h: f64) -> f64 {
    let q = r / h;
    if q >= 2.0 {
        0.0
    } else if q >= 1.0 {
        let w = 2.0 - q;
        cubic_spline_alpha(h) / (h * h) * (-0.75 * w * w / q)
    } else {
        cubic_spline_alpha(h) / (h * h) * (-3.0 + 2.25 * q)
    }
}

/// W(r) of the chosen kernel [1/m^3].
#[inline]
pub fn kernel_value(kernel: SphKernel, r: f64, h: f64) -> f64 {
    match kernel {
        SphKernel::WendlandC2 => wendland_c2(r, h),
        SphKernel::CubicSpline => cubic_spline(r, h),
    }
}

/// F(r) = (dW/dr) / r of the chosen kernel [1/m^5].
#[inline]
pub fn kernel_grad_factor(kernel: SphKernel, r: f64, h: f64) -> f64 {
    match kernel {
        SphKernel::WendlandC2 => wendland_c2_grad_factor(r, h),
        SphKernel::CubicSpline => cubic_spline_grad_factor(r, h),
    }
}

/// grad_i W_ij = F r_ij [1/m^4], from the gradient factor `f` and r_ij = x_i - x_j.
#[inline]
pub fn kernel_gradient(f: f64, r_ij: V3) -> V3 {
    vec3::scale(r_ij, f)
}

// ---------------------------------------------------------------------------------------------
// Equation of state
// ---------------------------------------------------------------------------------------------

/// Tait stiffness B = c0^2 rho0 / gamma [Pa] (Monaghan 1994, J. Comput. Phys. 110:399, sec. 2;
/// DualSPHysics wiki eq. (14), `CteB`).
#[inline]
pub fn tait_b(rho0: f64, c0: f64) -> f64 {
    c0 * c0 * rho0 / TAIT_GAMMA
}

/// Tait equation of state p = B ((rho/rho0)^gamma - 1) with gamma = 7 [Pa] (Batchelor 1967;
/// Monaghan 1994, sec. 2; DualSPHysics wiki eq. (14)). Negative below rho0 (tension), as in
/// DualSPHysics.
#[inline]
pub fn tait_pressure(rho: f64, rho0: f64, b: f64) -> f64 {
    let x = rho / rho0;
    let x3 = x * x * x;
    b * (x3 * x3 * x - 1.0)
}

/// (1 + t)^(1/7) - 1 for t > -1, without cancellation for small t [-]: the inverse of the Tait
/// law in the form both its users need ([`tait_density`], [`hydrostatic_density_difference`]).
/// Returns -1 for t <= -1 (a tension beyond -B: no positive density), NaN for NaN.
///
/// Written with +, -, *, / and sqrt only, so that the CUDA twin gives the same bits (`pow` is not
/// correctly rounded on either side). Newton's method on P(d) = (1 + d)^7 - 1 - t, with P in
/// Horner form d (7 + d (21 + d (35 + d (35 + d (21 + d (7 + d)))))) and P' = 7 (1 + d)^6.
/// P is increasing and convex on d > -1, so Newton from any start above the root decreases
/// monotonically onto it; the start t/7 is above the root (Bernoulli: (1 + d)^7 - 1 >= 7d), and
/// for t > 1 so is (1 + t)^(1/4) - 1, the better start when t is large (for small t it rounds
/// below the root: 1 + t loses t's low bits). The iteration stops at the first iterate that does
/// not decrease (converged to rounding), after at most [`SEVENTH_ROOT_MAX_ITERATIONS`]
/// (converged for t up to ~1e12, far beyond any physical use).
/// Relative error a few ulp for t >= -1/2; towards t = -1 (a tension near -B) the root is
/// ill-conditioned in this form (P' = 7 (1 + d)^6 -> 0): 4e-11 relative at t = -0.999999.
///
/// For |t| <= [`SEVENTH_ROOT_SERIES_MAX`] it is the binomial series sum_k C(1/7, k) t^k, k = 1..8,
/// in Horner form (eight multiply-adds, no division): Fourtakas' diffusion calls this for every
/// fluid pair with |t| = |7 g.r_ij| / c0^2 <= 14 h / (coef^2 H), about 1e-3, and Newton's two or
/// three iterations, each with a division, were 30 % of the GPU's step (issue 17).
#[inline]
pub fn seventh_root_minus_one(t: f64) -> f64 {
    if t.abs() <= SEVENTH_ROOT_SERIES_MAX {
        return seventh_root_series(t);
    }
    if t <= -1.0 {
        return -1.0;
    }
    let mut d = if t > 1.0 {
        (t / 7.0).min((1.0 + t).sqrt().sqrt() - 1.0)
    } else {
        t / 7.0
    };
    for _ in 0..SEVENTH_ROOT_MAX_ITERATIONS {
        let y = 1.0 + d;
        let y2 = y * y;
        let p = d * (7.0 + d * (21.0 + d * (35.0 + d * (35.0 + d * (21.0 + d * (7.0 + d))))));
        let next = d - (p - t) / (7.0 * (y2 * y2 * y2));
        // Not below the last iterate (or NaN): converged. The CUDA twin writes !(next < d).
        if next.partial_cmp(&d) != Some(std::cmp::Ordering::Less) {
            break;
        }
        d = next;
    }
    d
}

/// The binomial series of (1 + t)^(1/7) - 1, sum_k C(1/7, k) t^k for k = 1..8, in Horner form:
/// [`seventh_root_minus_one`] for |t| <= [`SEVENTH_ROOT_SERIES_MAX`] (relative error below 1e-16
/// there). The GPU calls it directly in Fourtakas' diffusion when the case bounds every pair's
/// |t| within that range (`SPH_HYDROSTATIC_SERIES`), which gives the same bits without the
/// branch and the Newton loop (3 % of the step at 10 M).
#[inline]
pub fn seventh_root_series(t: f64) -> f64 {
    let c = SEVENTH_ROOT_SERIES;
    t * (c[0]
        + t * (c[1] + t * (c[2] + t * (c[3] + t * (c[4] + t * (c[5] + t * (c[6] + t * c[7])))))))
}

/// Inverse of the Tait law, rho(p) = rho0 (1 + p/B)^(1/gamma) [kg/m^3], e.g. for the hydrostatic
/// initial density ([`hydrostatic_density`]).
#[inline]
pub fn tait_density(p: f64, rho0: f64, b: f64) -> f64 {
    rho0 + rho0 * seventh_root_minus_one(p / b)
}

/// Speed of sound c(rho) = sqrt(dp/drho) = c0 (rho/rho0)^((gamma-1)/2) = c0 (rho/rho0)^3 [m/s]
/// (from [`tait_pressure`] and [`tait_b`]; Monaghan 1994, sec. 2).
#[inline]
pub fn sound_speed(rho: f64, rho0: f64, c0: f64) -> f64 {
    let x = rho / rho0;
    c0 * (x * x * x)
}

/// Reference speed of sound from a coefficient, c0 = coef sqrt(g H) [m/s], with `g` the magnitude
/// of gravity [m/s^2] and `depth` H the largest still-water depth [m]: the dam-break front speed
/// times `coef` (DualSPHysics `coefsound`, default 20, times `speedsystem` = sqrt(g hswl);
/// `JCaseCtes`). coef >= 10 keeps density variations below about 1 % (Monaghan 1994, sec. 3).
#[inline]
pub fn sound_speed_from_coefficient(coef: f64, g: f64, depth: f64) -> f64 {
    coef * (g * depth).sqrt()
}

/// Hydrostatic pressure p = rho0 g depth [Pa] (`g` the magnitude of gravity, `depth` below the
/// free surface), the reference-density form DualSPHysics initialises with.
#[inline]
pub fn hydrostatic_pressure(rho0: f64, g: f64, depth: f64) -> f64 {
    rho0 * g * depth
}

/// Hydrostatic initial density, the [`tait_density`] of the [`hydrostatic_pressure`] at `depth`
/// [kg/m^3]: a still tank starts at rest in its own equation of state.
#[inline]
pub fn hydrostatic_density(rho0: f64, b: f64, g: f64, depth: f64) -> f64 {
    tait_density(hydrostatic_pressure(rho0, g, depth), rho0, b)
}

// ---------------------------------------------------------------------------------------------
// Momentum and continuity
// ---------------------------------------------------------------------------------------------

/// eta^2 = 0.01 h^2 [m^2] ([`ETA2_COEFFICIENT`]).
#[inline]
pub fn eta_squared(h: f64) -> f64 {
    ETA2_COEFFICIENT * h * h
}

/// 1 / (r_ij^2 + eta^2) [1/m^2] for `r2` = r_ij^2: the softened inverse square that
/// [`viscous_mu`] and [`density_diffusion`] share (computed once per pair: a division less).
#[inline]
pub fn softened_inverse_square(h: f64, r2: f64) -> f64 {
    1.0 / (r2 + eta_squared(h))
}

/// mu_ij = h v_ij . r_ij / (r_ij^2 + eta^2) [m/s] (Monaghan 1992, Annu. Rev. Astron. Astrophys.
/// 30:543, sec. 4; DualSPHysics wiki eq. (8), `amubar`), from `vr` = v_ij . r_ij [m^2/s] and
/// `inv` = [`softened_inverse_square`] [1/m^2]. Negative when the pair approaches.
#[inline]
pub fn viscous_mu(h: f64, vr: f64, inv: f64) -> f64 {
    h * (vr * inv)
}

/// Monaghan (1992) artificial viscosity Pi_ij = -alpha c_ij mu_ij / rho_ij when the pair
/// approaches (mu_ij < 0), else 0 [m^5/(kg s^2), i.e. Pa/(kg/m^3)^2] (Monaghan 1992, sec. 4,
/// without the beta mu^2 term; DualSPHysics wiki eq. (8)). c_ij and rho_ij are the means of the
/// pair, `mu` is [`viscous_mu`]. Positive (repulsive through [`momentum_pair`]) for approaching
/// pairs. DualSPHysics takes c0 for c_ij; the mean is Monaghan's.
#[inline]
pub fn artificial_viscosity(alpha: f64, mu: f64, pair: &SphPair) -> f64 {
    if mu >= 0.0 {
        return 0.0;
    }
    // The means' halves cancel: the bits of -alpha c_mean mu / rho_mean (halving scales exactly,
    // away from subnormals), two multiplications fewer per approaching pair on the GPU.
    -alpha * (pair.c_i + pair.c_j) * mu / (pair.rho_i + pair.rho_j)
}

/// Acceleration of `i` from `j`, -m_j ((p_i + p_j) / (rho_i rho_j) + Pi_ij) grad_i W_ij [m/s^2]
/// (Monaghan 1992, sec. 3 and 4, in the form of DualSPHysics wiki eq. (7), `p_vpm` and `pi_visc`
/// of `JSphCpu::InteractionForcesFluid`), with `f` the gradient factor at |r_ij| and `pi_ij` from
/// [`artificial_viscosity`] (0 without it). Antisymmetric: swapping `i` and `j` negates it
/// exactly, so equal masses conserve momentum pair by pair.
#[inline]
pub fn momentum_pair(f: f64, pair: &SphPair, pi_ij: f64) -> V3 {
    // r_ij scaled once by the product of the scalars (not by F, then by the rest).
    let s = -pair.m_j * ((pair.p_i + pair.p_j) / (pair.rho_i * pair.rho_j) + pi_ij) * f;
    vec3::scale(pair.r_ij, s)
}

/// Continuity term of `i` from `j`, d rho_i / dt += m_j v_ij . grad_i W_ij = m_j F (v_ij . r_ij)
/// [kg/(m^3 s)] (Monaghan 1992, sec. 2; DualSPHysics wiki eq. (13)), with `vr` = v_ij . r_ij
/// [m^2/s] (shared with [`viscous_mu`]). DualSPHysics 5.x multiplies it by rho_i / rho_j; this is
/// the classic form.
#[inline]
pub fn continuity_pair(f: f64, vr: f64, m_j: f64) -> f64 {
    m_j * (f * vr)
}

// ---------------------------------------------------------------------------------------------
// Density diffusion (delta-SPH)
// ---------------------------------------------------------------------------------------------

/// Density diffusion of `i` from `j` for a density difference `psi` [kg/(m^3 s)]:
/// 2 delta h c0 psi (r_ji . grad_i W_ij) / (r^2 + eta^2) m_j / rho_j, with r_ji = -r_ij, so
/// r_ji . grad_i W_ij = -F r^2 (`r2` = r_ij^2, `inv` = [`softened_inverse_square`]). `psi` is
/// rho_j - rho_i for [`diffusion_molteni_colagrossi`] and the dynamic part of it for
/// [`diffusion_fourtakas`]. Sign: -F r^2 > 0, so a denser neighbour raises rho_i (DualSPHysics
/// writes (rho_i - rho_j) r_ij . grad_i W_ij, the same product).
#[inline]
pub fn density_diffusion(
    params: &DiffusionParams,
    f: f64,
    pair: &SphPair,
    psi: f64,
    r2: f64,
    inv: f64,
) -> f64 {
    2.0 * params.delta * params.h * params.c0 * psi * (-f * r2) * inv * pair.m_j / pair.rho_j
}

/// Molteni & Colagrossi (2009, Comput. Phys. Commun. 180:861) density diffusion of `i` from `j`:
/// [`density_diffusion`] with psi = rho_j - rho_i [kg/(m^3 s)] (DualSPHysics wiki eqs. (15.1),
/// (15.2); `DDT_DDT` in `JSphCpu::InteractionForcesFluid`, where `DDTkh` = 2 h delta). In a
/// still tank it diffuses the hydrostatic density gradient too, which pulls fluid down at walls.
#[inline]
pub fn diffusion_molteni_colagrossi(
    params: &DiffusionParams,
    f: f64,
    pair: &SphPair,
    r2: f64,
    inv: f64,
) -> f64 {
    density_diffusion(params, f, pair, pair.rho_j - pair.rho_i, r2, inv)
}

/// Hydrostatic density difference rho^H_ji = rho0 ((1 + (p^H_j - p^H_i) / B)^(1/gamma) - 1)
/// [kg/m^3], with p^H_j - p^H_i = -rho0 g . r_ij = rho0 |g| (z_i - z_j) for g = (0, 0, -|g|)
/// (Fourtakas, Dominguez, Vacondio & Rogers 2019, Comput. Fluids 190:346, the delta-SPH term of
/// their sec. 2; DualSPHysics wiki eqs. (18)-(20)). The form is that of the DualSPHysics code
/// (`DDT_DDT2`: `rh = 1 + DDTgz drz`, `drho = rho0 rh^(1/gamma) - rho0`), which subtracts rho0;
/// the wiki's rendering of eq. (18) is disputed on the DualSPHysics forum (discussion 2173,
/// "DDT Fourtakas - hydrostatic component") and the code is the reference there. It is exact for
/// `i` at the free surface (p^H_i = 0) and first-order in p^H_i / B otherwise.
#[inline]
pub fn hydrostatic_density_difference(params: &DiffusionParams, r_ij: V3) -> f64 {
    let dp = -params.rho0 * vec3::dot(params.gravity, r_ij);
    params.rho0 * seventh_root_minus_one(dp / params.b)
}

/// Fourtakas et al. (2019) density diffusion of `i` from `j`: [`density_diffusion`] of the
/// dynamic density difference, psi = (rho_j - rho_i) - rho^H_ji
/// ([`hydrostatic_density_difference`]) [kg/(m^3 s)] (DualSPHysics wiki eqs. (16)-(17),
/// `DDT_DDT2`). Vanishes in hydrostatic rest; without gravity it equals
/// [`diffusion_molteni_colagrossi`].
#[inline]
pub fn diffusion_fourtakas(
    params: &DiffusionParams,
    f: f64,
    pair: &SphPair,
    r2: f64,
    inv: f64,
) -> f64 {
    let psi = (pair.rho_j - pair.rho_i) - hydrostatic_density_difference(params, pair.r_ij);
    density_diffusion(params, f, pair, psi, r2, inv)
}

// ---------------------------------------------------------------------------------------------
// Variable time step (Monaghan & Kos 1999, J. Waterw. Port Coast. Ocean Eng. 125:145;
// DualSPHysics wiki eq. (35), `JSphCpu::DtVariable`):
//   dt = C_CFL min(dt_f, dt_cv),  dt_f = min_i sqrt(h / |f_i|),
//   dt_cv = min_i h / (c_i + max_j |h v_ij . r_ij / (r_ij^2 + eta^2)|).
// DualSPHysics uses c0 (or 10 |v|max, if larger) for c_i; taking the particle's own c is
// Monaghan & Kos'.
// ---------------------------------------------------------------------------------------------

/// Force limit of one particle, sqrt(h / |acc|) [s], with `acc` its acceleration (pair terms plus
/// gravity) [m/s^2]. +infinity when `acc` is zero.
#[inline]
pub fn force_time_step(h: f64, acc: V3) -> f64 {
    (h / vec3::norm(acc)).sqrt()
}

/// |mu_ij| = |h v_ij . r_ij / (r_ij^2 + eta^2)| of one pair [m/s], `mu` from [`viscous_mu`]; the
/// caller keeps the largest over `i`'s neighbours.
#[inline]
pub fn viscous_rate(mu: f64) -> f64 {
    mu.abs()
}

/// Courant and viscous limit of one particle, h / (c + max_j |mu_ij|) [s], with `c` its speed of
/// sound [m/s] and `mu_max` the largest [`viscous_rate`] over its neighbours [m/s].
#[inline]
pub fn viscous_time_step(h: f64, c: f64, mu_max: f64) -> f64 {
    h / (c + mu_max)
}

/// The step, C_CFL min(dt_f, dt_cv) [s], from the smallest [`force_time_step`] and
/// [`viscous_time_step`] over all particles and the CFL number `cfl` [-] (DualSPHysics default
/// 0.2).
#[inline]
pub fn variable_time_step(cfl: f64, dt_f: f64, dt_cv: f64) -> f64 {
    cfl * dt_f.min(dt_cv)
}

// ---------------------------------------------------------------------------------------------
// Symplectic position Verlet (Leimkuhler, Reich & Skeel 1996; DualSPHysics wiki eqs. (33)-(34),
// `JSphCpu::ComputeSymplecticPre` / `ComputeSymplecticCorr`). One step:
//   predictor  x' = x + dt/2 v,  v' = v + dt/2 (a + g),  rho' = rho + dt/2 drho   (rates at n)
//   new rates at the half step from (x', v', rho')
//   corrector  v1 = v + dt (a' + g),  x1 = x + dt/2 (v + v1),  rho1 = rho (2 - eps)/(2 + eps)
// x + dt/2 (v + v1) is x' + dt/2 v1 written as DualSPHysics writes it (from the stored x^n).
// ---------------------------------------------------------------------------------------------

/// Predictor half step: x + dt/2 v, v + dt/2 (acc + g), rho + dt/2 drho, with the rates at the
/// start of the step and gravity `g` [m/s^2]; `dt` the full step [s].
#[inline]
pub fn symplectic_predict(s: &FluidState, rates: &FluidRates, g: V3, dt: f64) -> FluidState {
    let dt05 = 0.5 * dt;
    FluidState {
        x: vec3::axpy(s.x, s.v, dt05),
        v: vec3::axpy(s.v, vec3::add(rates.acc, g), dt05),
        rho: s.rho + rates.drho * dt05,
    }
}

/// Corrected density rho^{n+1} = rho^n (2 - eps) / (2 + eps), eps = -(drho/dt)^{n+1/2} /
/// rho^{n+1/2} dt [kg/m^3] (Monaghan 2005, Rep. Prog. Phys. 68:1703, sec. 8; DualSPHysics
/// `epsilon_rdot`). For drho/dt = -k rho it is the (1,1) Pade approximant of exp(-k dt): exact to
/// second order, error (k dt)^3 / 12 per step.
#[inline]
pub fn symplectic_density(rho_n: f64, rho_half: f64, drho_half: f64, dt: f64) -> f64 {
    let eps = -(drho_half / rho_half) * dt;
    rho_n * (2.0 - eps) / (2.0 + eps)
}

/// Corrector: the state at the end of the step from the state `s` at its start, the predicted
/// density `rho_half` and the rates evaluated at the half step (`rates_half`), gravity `g`
/// [m/s^2], step `dt` [s].
#[inline]
pub fn symplectic_correct(
    s: &FluidState,
    rho_half: f64,
    rates_half: &FluidRates,
    g: V3,
    dt: f64,
) -> FluidState {
    let v = vec3::axpy(s.v, vec3::add(rates_half.acc, g), dt);
    FluidState {
        x: vec3::axpy(s.x, vec3::add(s.v, v), 0.5 * dt),
        v,
        rho: symplectic_density(s.rho, rho_half, rates_half.drho, dt),
    }
}

// ---------------------------------------------------------------------------------------------
// Verlet (Monaghan 1994, J. Comput. Phys. 110:399; DualSPHysics wiki eqs. (29)-(32),
// `JSphCpu::ComputeVerlet`). One evaluation of the rates per step, at the state n:
//   x1 = x + (dt v + dt^2/2 (a + g)),  v1 = v^{n-1} + 2 dt (a + g),  rho1 = rho^{n-1} + 2 dt drho
// and every `verlet_steps`-th step an Euler step, v1 = v + dt (a + g), rho1 = rho + dt drho,
// which couples the leapfrog's two interleaved solutions again. With a variable step, 2 dt is
// twice the current step, as DualSPHysics takes it.
// ---------------------------------------------------------------------------------------------

/// One Verlet step of a fluid particle from its state `s` at n, the base of its velocity and
/// density (`v_base`, `rho_base`: the state at n-1 on a Verlet step, `s`'s own on an Euler step),
/// the rates at n, gravity `g` [m/s^2], the step `dt` [s] and the span of the velocity and
/// density update `dt_span` [s] (2 dt on a Verlet step, dt on an Euler step).
#[inline]
pub fn verlet_update(
    s: &FluidState,
    v_base: V3,
    rho_base: f64,
    rates: &FluidRates,
    g: V3,
    dt: f64,
    dt_span: f64,
) -> FluidState {
    let a = vec3::add(rates.acc, g);
    let dt205 = 0.5 * dt * dt;
    let dx = vec3::add(vec3::scale(s.v, dt), vec3::scale(a, dt205));
    FluidState {
        x: vec3::add(s.x, dx),
        v: vec3::axpy(v_base, a, dt_span),
        rho: verlet_density(rho_base, rates.drho, dt_span),
    }
}

/// The Verlet density rho_base + dt_span drho [kg/m^3] (fluid and boundary particles).
#[inline]
pub fn verlet_density(rho_base: f64, drho: f64, dt_span: f64) -> f64 {
    rho_base + drho * dt_span
}

// ---------------------------------------------------------------------------------------------
// Modified dynamic boundary conditions (mDBC)
// ---------------------------------------------------------------------------------------------

/// Below this |det A| the ghost node's density is the Shepard average instead of the
/// first-order interpolation (DualSPHysics' `determlimit`, 1e-3; English et al. 2022, sec. 2.2).
/// A is dimensionless in the sense that matters: a full support gives det A about 1 [-].
pub const GHOST_DETERMINANT_MIN: f64 = 1e-3;

/// What a ghost node collects from its fluid neighbours (English, Dominguez, Vacondio, Crespo,
/// Stansby, Lind, Chiapponi & Gomez-Gesteira 2022, "Modified dynamic boundary conditions
/// (mDBC) for general-purpose smoothed particle hydrodynamics (SPH): application to tank
/// sloshing, dam break and fish pass problems", Comp. Part. Mech. 9:911, eqs. 10-12; the
/// first-order consistent interpolation of Liu & Liu 2006). With dr = x_g - x_j:
/// `rho` = sum m_j W, `grad` = sum m_j grad W, and the 4 x 4 matrix `a` (row-major) has rows
/// [V W, V W dr] and [V grad_k W, V grad_k W dr] for k = x, y, z (V = m_j / rho_j).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GhostSums {
    pub rho: f64,
    pub grad: V3,
    pub a: [f64; 16],
}

/// Adds fluid neighbour j to the ghost node's sums: kernel value `w`, gradient factor `f`
/// (grad W = f dr), `dr` = x_g - x_j [m], mass `m_j` [kg], density `rho_j` [kg/m^3].
#[inline]
pub fn ghost_pair(s: &mut GhostSums, w: f64, f: f64, dr: V3, m_j: f64, rho_j: f64) {
    let v = m_j / rho_j;
    let g = kernel_gradient(f, dr);
    s.rho += m_j * w;
    s.grad = vec3::add(s.grad, vec3::scale(g, m_j));
    let vw = v * w;
    let rows = [vw, v * g[0], v * g[1], v * g[2]];
    for (r, &q) in rows.iter().enumerate() {
        s.a[4 * r] += q;
        s.a[4 * r + 1] += dr[0] * q;
        s.a[4 * r + 2] += dr[1] * q;
        s.a[4 * r + 3] += dr[2] * q;
    }
}

/// The determinant of the row-major 4 x 4 matrix `a`, and its adjugate (the inverse times the
/// determinant) into `b`, by 2 x 2 minors of the top and bottom row pairs (Laplace expansion).
#[inline]
pub fn adjugate4(a: &[f64; 16], b: &mut [f64; 16]) -> f64 {
    let s0 = a[0] * a[5] - a[4] * a[1];
    let s1 = a[0] * a[6] - a[4] * a[2];
    let s2 = a[0] * a[7] - a[4] * a[3];
    let s3 = a[1] * a[6] - a[5] * a[2];
    let s4 = a[1] * a[7] - a[5] * a[3];
    let s5 = a[2] * a[7] - a[6] * a[3];
    let c5 = a[10] * a[15] - a[14] * a[11];
    let c4 = a[9] * a[15] - a[13] * a[11];
    let c3 = a[9] * a[14] - a[13] * a[10];
    let c2 = a[8] * a[15] - a[12] * a[11];
    let c1 = a[8] * a[14] - a[12] * a[10];
    let c0 = a[8] * a[13] - a[12] * a[9];
    let det = s0 * c5 - s1 * c4 + s2 * c3 + s3 * c2 - s4 * c1 + s5 * c0;
    *b = [
        a[5] * c5 - a[6] * c4 + a[7] * c3,
        -a[1] * c5 + a[2] * c4 - a[3] * c3,
        a[13] * s5 - a[14] * s4 + a[15] * s3,
        -a[9] * s5 + a[10] * s4 - a[11] * s3,
        -a[4] * c5 + a[6] * c2 - a[7] * c1,
        a[0] * c5 - a[2] * c2 + a[3] * c1,
        -a[12] * s5 + a[14] * s2 - a[15] * s1,
        a[8] * s5 - a[10] * s2 + a[11] * s1,
        a[4] * c4 - a[5] * c2 + a[7] * c0,
        -a[0] * c4 + a[1] * c2 - a[3] * c0,
        a[12] * s4 - a[13] * s2 + a[15] * s0,
        -a[8] * s4 + a[9] * s2 - a[11] * s0,
        -a[4] * c3 + a[5] * c1 - a[6] * c0,
        a[0] * c3 - a[1] * c1 + a[2] * c0,
        -a[12] * s3 + a[13] * s1 - a[14] * s0,
        a[8] * s3 - a[9] * s1 + a[10] * s0,
    ];
    det
}

/// The density of a boundary particle from its ghost node's sums `s` (English et al. 2022,
/// eq. 13): solve A [rho_g, -grad rho] = [sum m W, sum m grad W], then
/// rho_b = rho_g + grad rho . `to_particle` (x_b - x_g, [m]). Where |det A| is below
/// [`GHOST_DETERMINANT_MIN`] (a ghost node with few fluid neighbours, on one side), the Shepard
/// average sum m W / sum V W. NaN without fluid in reach (sum V W = 0) [kg/m^3].
#[inline]
pub fn ghost_density(s: &GhostSums, to_particle: V3) -> f64 {
    if s.a[0] <= 0.0 {
        return f64::NAN;
    }
    let mut b = [0.0; 16];
    let det = adjugate4(&s.a, &mut b);
    if det.abs() < GHOST_DETERMINANT_MIN {
        return s.rho / s.a[0];
    }
    let rhs = [s.rho, s.grad[0], s.grad[1], s.grad[2]];
    let row = |r: usize| {
        (b[4 * r] * rhs[0] + b[4 * r + 1] * rhs[1] + b[4 * r + 2] * rhs[2] + b[4 * r + 3] * rhs[3])
            / det
    };
    let (rho_g, gx, gy, gz) = (row(0), -row(1), -row(2), -row(3));
    rho_g + (gx * to_particle[0] + gy * to_particle[1] + gz * to_particle[2])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shared factors of a pair, as the pair loops form them.
    fn r2_of(pair: &SphPair) -> f64 {
        vec3::norm2(pair.r_ij)
    }
    fn vr_of(pair: &SphPair) -> f64 {
        vec3::dot(pair.v_ij, pair.r_ij)
    }
    fn inv_of(h: f64, pair: &SphPair) -> f64 {
        softened_inverse_square(h, r2_of(pair))
    }
    fn mu_of(h: f64, pair: &SphPair) -> f64 {
        viscous_mu(h, vr_of(pair), inv_of(h, pair))
    }
    use crate::core::rng::SplitMix64;

    const KERNELS: [SphKernel; 2] = [SphKernel::WendlandC2, SphKernel::CubicSpline];

    /// Water-like constants: rho0 1000 kg/m^3, c0 = 20 sqrt(g 1 m).
    fn water() -> (f64, f64, f64) {
        let rho0 = 1000.0;
        let c0 = sound_speed_from_coefficient(20.0, 9.81, 1.0);
        (rho0, c0, tait_b(rho0, c0))
    }

    fn random_pair(rng: &mut SplitMix64, h: f64) -> SphPair {
        let mut r = |lo: f64, hi: f64| rng.range(lo, hi);
        let s = 2.0 * h / 3f64.sqrt();
        SphPair {
            r_ij: [r(-s, s), r(-s, s), r(-s, s)],
            v_ij: [r(-2.0, 2.0), r(-2.0, 2.0), r(-2.0, 2.0)],
            rho_i: r(980.0, 1020.0),
            rho_j: r(980.0, 1020.0),
            p_i: r(-1e3, 1e4),
            p_j: r(-1e3, 1e4),
            c_i: r(40.0, 80.0),
            c_j: r(40.0, 80.0),
            m_j: 1e-3,
        }
    }

    /// The same pair seen from `j`.
    fn swapped(p: &SphPair) -> SphPair {
        SphPair {
            r_ij: vec3::neg(p.r_ij),
            v_ij: vec3::neg(p.v_ij),
            rho_i: p.rho_j,
            rho_j: p.rho_i,
            p_i: p.p_j,
            p_j: p.p_i,
            c_i: p.c_j,
            c_j: p.c_i,
            m_j: p.m_j,
        }
    }

    #[test]
    fn kernels_integrate_to_one() {
        // Simpson's rule on 4 pi r^2 W(r) over [0, 2h]; the node at q = 1 keeps the cubic
        // spline's piecewise pieces apart.
        let n = 4000;
        for kernel in KERNELS {
            for h in [0.01, 1.3] {
                let dr = 2.0 * h / n as f64;
                let g = |r: f64| 4.0 * PI * r * r * kernel_value(kernel, r, h);
                let mut sum = g(0.0) + g(2.0 * h);
                for k in 1..n {
                    sum += if k % 2 == 1 { 4.0 } else { 2.0 } * g(k as f64 * dr);
                }
                let integral = sum * dr / 3.0;
                assert!(
                    (integral - 1.0).abs() < 1e-4,
                    "{kernel:?}, h = {h}: integral {integral}"
                );
            }
        }
    }

    #[test]
    fn gradient_factor_is_the_derivative() {
        for kernel in KERNELS {
            let h = 0.02;
            let scale = kernel_value(kernel, 0.0, h) / h; // size of dW/dr
            for k in 1..400 {
                let r = 2.0 * h * k as f64 / 400.0;
                let e = 1e-7 * h;
                let fd =
                    (kernel_value(kernel, r + e, h) - kernel_value(kernel, r - e, h)) / (2.0 * e);
                let f = kernel_grad_factor(kernel, r, h);
                assert!(
                    (f * r - fd).abs() < 1e-6 * scale,
                    "{kernel:?} at q = {}: F r = {}, dW/dr = {fd}",
                    r / h,
                    f * r
                );
                assert!(f <= 0.0);
            }
            // Finite at r = 0, and the limit of F(r) there.
            let f0 = kernel_grad_factor(kernel, 0.0, h);
            let f_small = kernel_grad_factor(kernel, 1e-9 * h, h);
            assert!(f0.is_finite() && f0 < 0.0);
            assert!((f0 - f_small).abs() < 1e-6 * f0.abs());
            assert_eq!(kernel_gradient(f0, [0.0; 3]), [0.0; 3]);
        }
    }

    #[test]
    fn kernels_vanish_outside_the_support() {
        let h = 0.05;
        for kernel in KERNELS {
            for r in [2.0 * h, 2.0 * h * (1.0 + 1e-12), 2.5 * h, 100.0 * h] {
                assert_eq!(
                    kernel_value(kernel, r, h),
                    0.0,
                    "{kernel:?} W at r/h = {}",
                    r / h
                );
                assert_eq!(
                    kernel_grad_factor(kernel, r, h),
                    0.0,
                    "{kernel:?} F at r/h = {}",
                    r / h
                );
            }
            let inside = 2.0 * h * (1.0 - 1e-3);
            assert!(kernel_value(kernel, inside, h) > 0.0);
            assert!(kernel_grad_factor(kernel, inside, h) < 0.0);
        }
        // The dispatch is the named kernels.
        assert_eq!(
            kernel_value(SphKernel::WendlandC2, 0.3 * h, h),
            wendland_c2(0.3 * h, h)
        );
        assert_eq!(
            kernel_value(SphKernel::CubicSpline, 1.3 * h, h),
            cubic_spline(1.3 * h, h)
        );
    }

    #[test]
    fn tait_law_and_its_inverse_round_trip() {
        let (rho0, c0, b) = water();
        assert_eq!(tait_pressure(rho0, rho0, b), 0.0);
        assert_eq!(tait_density(0.0, rho0, b), rho0);
        assert_eq!(sound_speed(rho0, rho0, c0), c0);
        for k in 0..=200 {
            let rho = rho0 * (0.9 + 0.2 * k as f64 / 200.0);
            let p = tait_pressure(rho, rho0, b);
            let back = tait_density(p, rho0, b);
            assert!(
                (back - rho).abs() < 1e-12 * rho,
                "rho {rho} -> p {p} -> {back}"
            );
            // c^2 = dp/drho (the speed of sound is the slope of the equation of state).
            let e = 1e-6 * rho0;
            let slope =
                (tait_pressure(rho + e, rho0, b) - tait_pressure(rho - e, rho0, b)) / (2.0 * e);
            let c = sound_speed(rho, rho0, c0);
            assert!(
                (c * c - slope).abs() < 1e-6 * slope,
                "rho {rho}: c^2 {} vs {slope}",
                c * c
            );
        }
    }

    #[test]
    fn seventh_root_is_accurate_over_its_range() {
        assert_eq!(seventh_root_minus_one(0.0), 0.0);
        assert_eq!(seventh_root_minus_one(-1.0), -1.0);
        assert_eq!(seventh_root_minus_one(-5.0), -1.0);
        assert_eq!(seventh_root_minus_one(127.0), 1.0);
        assert!(seventh_root_minus_one(f64::NAN).is_nan());
        let mut ts = vec![1e-300, -1e-300, 1e-12, -1e-12, -0.5, 1e12];
        let mut rng = SplitMix64::new(7);
        for _ in 0..20_000 {
            let e = rng.range(-12.0, 12.0);
            ts.push(10f64.powf(e));
            ts.push(-(10f64.powf(e.min(0.0)).min(0.5)));
        }
        for t in ts {
            let d = seventh_root_minus_one(t);
            let want = (t.ln_1p() / 7.0).exp_m1();
            assert!(
                (d - want).abs() <= 4e-15 * want.abs(),
                "t = {t:e}: {d:e} vs {want:e}"
            );
        }
    }

    /// The form without the means' halves has the bits of Monaghan's written with the means
    /// (halving scales exactly), over water-like pairs and over random magnitudes.
    #[test]
    fn viscosity_without_the_halves_has_the_bits_of_the_means() {
        let mut rng = SplitMix64::new(13);
        let (rho0, c0, _) = water();
        for k in 0..200_000 {
            let mut pair = random_pair(&mut rng, 0.01);
            if k % 2 == 0 {
                pair.rho_i = rho0 * rng.range(0.9, 1.1);
                pair.rho_j = rho0 * rng.range(0.9, 1.1);
                pair.c_i = sound_speed(pair.rho_i, rho0, c0);
                pair.c_j = sound_speed(pair.rho_j, rho0, c0);
            } else {
                let mut e = || 10f64.powf(rng.range(-30.0, 30.0));
                (pair.rho_i, pair.rho_j, pair.c_i, pair.c_j) = (e(), e(), e(), e());
            }
            let alpha = rng.range(0.0, 1.0);
            let mu = -rng.range(0.0, 10.0);
            let c_mean = 0.5 * (pair.c_i + pair.c_j);
            let rho_mean = 0.5 * (pair.rho_i + pair.rho_j);
            let means = -alpha * c_mean * mu / rho_mean;
            assert_eq!(
                artificial_viscosity(alpha, mu, &pair).to_bits(),
                means.to_bits()
            );
        }
    }

    #[test]
    fn viscosity_acts_only_on_approaching_pairs_and_repels() {
        let mut rng = SplitMix64::new(11);
        let (h, alpha) = (0.01, 0.01);
        let (mut approaching, mut separating) = (0, 0);
        for _ in 0..10_000 {
            let mut pair = random_pair(&mut rng, h);
            pair.p_i = 0.0;
            pair.p_j = 0.0;
            let r = vec3::norm(pair.r_ij);
            if r >= 2.0 * h || r == 0.0 {
                continue;
            }
            let pi = artificial_viscosity(alpha, mu_of(h, &pair), &pair);
            let acc = momentum_pair(wendland_c2_grad_factor(r, h), &pair, pi);
            if vec3::dot(pair.v_ij, pair.r_ij) < 0.0 {
                approaching += 1;
                assert!(pi > 0.0);
                // Pushes i away from j, along r_ij.
                assert!(vec3::dot(acc, pair.r_ij) > 0.0);
            } else {
                separating += 1;
                assert_eq!(pi, 0.0);
                assert_eq!(acc, [0.0; 3]);
            }
        }
        assert!(approaching > 1000 && separating > 1000);
    }

    #[test]
    fn momentum_pair_is_antisymmetric() {
        let mut rng = SplitMix64::new(3);
        let h = 0.01;
        for _ in 0..10_000 {
            let pair = random_pair(&mut rng, h);
            let back = swapped(&pair);
            let r = vec3::norm(pair.r_ij);
            let f = wendland_c2_grad_factor(r, h);
            assert_eq!(f, wendland_c2_grad_factor(vec3::norm(back.r_ij), h));
            let a_ij = momentum_pair(f, &pair, artificial_viscosity(0.1, mu_of(h, &pair), &pair));
            let a_ji = momentum_pair(f, &back, artificial_viscosity(0.1, mu_of(h, &back), &back));
            // Equal masses: m a_ij + m a_ji = 0 exactly (Newton's third law, pair by pair).
            assert_eq!(a_ij, vec3::neg(a_ji));
            // The continuity term is symmetric: both particles see the same compression.
            assert_eq!(
                continuity_pair(f, vr_of(&pair), pair.m_j),
                continuity_pair(f, vr_of(&back), back.m_j)
            );
        }
    }

    #[test]
    fn continuity_raises_density_of_approaching_pairs() {
        let h = 0.01;
        let pair = SphPair {
            r_ij: [h, 0.0, 0.0],
            v_ij: [-1.0, 0.0, 0.0],
            rho_i: 1000.0,
            rho_j: 1000.0,
            p_i: 0.0,
            p_j: 0.0,
            c_i: 50.0,
            c_j: 50.0,
            m_j: 1e-3,
        };
        assert!(continuity_pair(wendland_c2_grad_factor(h, h), vr_of(&pair), pair.m_j) > 0.0);
    }

    #[test]
    fn density_diffusion_smooths_and_fourtakas_without_gravity_is_molteni() {
        let (rho0, c0, b) = water();
        let h = 0.01;
        let mut params = DiffusionParams {
            delta: 0.1,
            h,
            c0,
            rho0,
            b,
            gravity: [0.0; 3],
        };
        let mut rng = SplitMix64::new(5);
        for _ in 0..10_000 {
            let pair = random_pair(&mut rng, h);
            let f = wendland_c2_grad_factor(vec3::norm(pair.r_ij), h);
            let d = diffusion_molteni_colagrossi(&params, f, &pair, r2_of(&pair), inv_of(h, &pair));
            // Towards the neighbour's density.
            assert!(d * (pair.rho_j - pair.rho_i) >= 0.0);
            assert_eq!(
                diffusion_fourtakas(&params, f, &pair, r2_of(&pair), inv_of(h, &pair)),
                d
            );
        }
        params.gravity = [0.0, 0.0, -9.81];
        assert_eq!(
            hydrostatic_density_difference(&params, [0.3, -0.2, 0.0]),
            0.0
        );
    }

    #[test]
    fn hydrostatic_profile() {
        let (rho0, c0, b) = water();
        let (g, h) = (9.81, 0.01);
        assert_eq!(hydrostatic_density(rho0, b, g, 0.0), rho0);
        let params = DiffusionParams {
            delta: 0.1,
            h,
            c0,
            rho0,
            b,
            gravity: [0.0, 0.0, -g],
        };
        let mut last = rho0;
        for k in 1..=100 {
            let depth = 0.01 * k as f64;
            let rho = hydrostatic_density(rho0, b, g, depth);
            assert!(rho > last, "density grows with depth");
            last = rho;
            // Its pressure is the hydrostatic pressure.
            let p = tait_pressure(rho, rho0, b);
            assert!(
                (p - rho0 * g * depth).abs() < 1e-9 * rho0 * g * depth,
                "{p}"
            );
        }
        // A particle at the surface (z = 0) and one below it, both in hydrostatic rest.
        let pair_at = |z_i: f64, dz: f64| {
            let rho_i = hydrostatic_density(rho0, b, g, -z_i);
            let rho_j = hydrostatic_density(rho0, b, g, -(z_i - dz));
            SphPair {
                r_ij: [0.3 * h, 0.0, dz],
                v_ij: [0.0; 3],
                rho_i,
                rho_j,
                p_i: tait_pressure(rho_i, rho0, b),
                p_j: tait_pressure(rho_j, rho0, b),
                c_i: sound_speed(rho_i, rho0, c0),
                c_j: sound_speed(rho_j, rho0, c0),
                m_j: 1e-3,
            }
        };
        let dz = 1.2 * h;
        let surface = pair_at(0.0, dz);
        // The hydrostatic difference is the profile's, exactly up to rounding, from the surface.
        let rho_h = hydrostatic_density_difference(&params, surface.r_ij);
        assert!((rho_h - (surface.rho_j - surface.rho_i)).abs() < 1e-12 * rho0);
        let f = wendland_c2_grad_factor(vec3::norm(surface.r_ij), h);
        let mc = diffusion_molteni_colagrossi(
            &params,
            f,
            &surface,
            r2_of(&surface),
            inv_of(h, &surface),
        );
        let fourtakas =
            diffusion_fourtakas(&params, f, &surface, r2_of(&surface), inv_of(h, &surface));
        assert!(
            mc > 0.0,
            "Molteni-Colagrossi diffuses the hydrostatic gradient"
        );
        assert!(fourtakas.abs() < 1e-9 * mc, "{fourtakas} vs {mc}");
        // One metre down the hydrostatic difference taken from the surface misses the profile's
        // by about 6/7 p_i / B of it (1.5 % here): Fourtakas' term is that small, not zero.
        let deep = pair_at(-1.0, dz);
        let mc = diffusion_molteni_colagrossi(&params, f, &deep, r2_of(&deep), inv_of(h, &deep));
        let fourtakas = diffusion_fourtakas(&params, f, &deep, r2_of(&deep), inv_of(h, &deep));
        let p_over_b = deep.p_i / b;
        assert!(fourtakas.abs() < p_over_b * mc, "{fourtakas} vs {mc}");
        assert!(fourtakas.abs() > 0.5 * p_over_b * mc, "{fourtakas} vs {mc}");
    }

    #[test]
    fn time_step_limits() {
        let h = 0.01;
        assert_eq!(force_time_step(h, [0.0; 3]), f64::INFINITY);
        assert_eq!(force_time_step(h, [0.0, 0.0, -h]), 1.0);
        assert_eq!(viscous_time_step(h, 50.0, 0.0), h / 50.0);
        assert_eq!(variable_time_step(0.2, 1.0, f64::INFINITY), 0.2);
        assert_eq!(variable_time_step(0.2, 3.0, 2.0), 0.2 * 2.0);
        // |mu| is the same from both sides and grows with the approach speed.
        let rate = |v: V3, r: V3| {
            viscous_rate(viscous_mu(
                h,
                vec3::dot(v, r),
                softened_inverse_square(h, vec3::norm2(r)),
            ))
        };
        let (r, v) = ([h, 0.0, 0.0], [-1.0, 0.5, 0.0]);
        assert_eq!(rate(v, r), rate(vec3::neg(v), vec3::neg(r)));
        assert!(rate(vec3::scale(v, 2.0), r) > rate(v, r));
        assert!(viscous_time_step(h, 50.0, rate(v, r)) < h / 50.0);
    }

    /// Takes one symplectic step of d rho/dt = -k rho and returns the density.
    fn decay_step(rho: f64, k: f64, dt: f64) -> f64 {
        let s = FluidState {
            x: [0.0; 3],
            v: [0.0; 3],
            rho,
        };
        let rates = |rho: f64| FluidRates {
            acc: [0.0; 3],
            drho: -k * rho,
        };
        let half = symplectic_predict(&s, &rates(s.rho), [0.0; 3], dt);
        symplectic_correct(&s, half.rho, &rates(half.rho), [0.0; 3], dt).rho
    }

    #[test]
    fn symplectic_density_update_is_second_order() {
        let (rho, k) = (1000.0, 5.0);
        let mut last_err = f64::NAN;
        for dt in [4e-3, 2e-3, 1e-3, 5e-4] {
            let err = (decay_step(rho, k, dt) - rho * (-k * dt).exp()).abs();
            // Pade (1,1): error (k dt)^3 / 12 per step.
            let x: f64 = k * dt;
            assert!(
                (err / (rho * x * x * x / 12.0) - 1.0).abs() < 0.2,
                "dt {dt}: {err}"
            );
            if last_err.is_finite() {
                let ratio = last_err / err;
                assert!(
                    (ratio - 8.0).abs() < 0.5,
                    "halving dt divides the error by {ratio}"
                );
            }
            last_err = err;
        }
        // Mass-conserving update of a zero rate: unchanged.
        assert_eq!(symplectic_density(rho, rho, 0.0, 1e-3), rho);
    }

    #[test]
    fn symplectic_step_is_exact_under_constant_acceleration() {
        let g = [0.0, 0.0, -9.81];
        let s = FluidState {
            x: [0.5, 0.0, 1.0],
            v: [1.0, 0.0, 2.0],
            rho: 1000.0,
        };
        let rates = FluidRates {
            acc: [0.5, 0.0, 0.0],
            drho: 0.0,
        };
        let dt = 0.125;
        let half = symplectic_predict(&s, &rates, g, dt);
        assert_eq!(half.x, [0.5 + 0.0625, 0.0, 1.0 + 0.125]);
        let end = symplectic_correct(&s, half.rho, &rates, g, dt);
        let a = vec3::add(rates.acc, g);
        let x = vec3::add(vec3::axpy(s.x, s.v, dt), vec3::scale(a, 0.5 * dt * dt));
        let v = vec3::axpy(s.v, a, dt);
        for c in 0..3 {
            assert!((end.x[c] - x[c]).abs() < 1e-15, "x[{c}]");
            assert!((end.v[c] - v[c]).abs() < 1e-15, "v[{c}]");
        }
        assert_eq!(end.rho, s.rho);
    }

    #[test]
    fn verlet_step_is_exact_under_constant_acceleration() {
        let g = [0.0, 0.0, -9.81];
        let rates = FluidRates {
            acc: [0.5, 0.0, 0.0],
            drho: 2.0,
        };
        let a = vec3::add(rates.acc, g);
        let dt = 0.125;
        let s = FluidState {
            x: [0.5, 0.0, 1.0],
            v: [1.0, 0.0, 2.0],
            rho: 1000.0,
        };
        // The exact state one step back under the same acceleration and density rate.
        let (v_prev, rho_prev) = (vec3::axpy(s.v, a, -dt), s.rho - 2.0 * dt);
        let x = vec3::add(vec3::axpy(s.x, s.v, dt), vec3::scale(a, 0.5 * dt * dt));
        let v = vec3::axpy(s.v, a, dt);
        let verlet = verlet_update(&s, v_prev, rho_prev, &rates, g, dt, 2.0 * dt);
        let euler = verlet_update(&s, s.v, s.rho, &rates, g, dt, dt);
        for end in [verlet, euler] {
            for c in 0..3 {
                assert!((end.x[c] - x[c]).abs() < 1e-14, "x[{c}]");
                assert!((end.v[c] - v[c]).abs() < 1e-14, "v[{c}]");
            }
            assert_eq!(end.rho, 1000.25);
        }
        assert_eq!(verlet_density(1000.0, -4.0, 0.25), 999.0);
    }

    /// Verlet keeps an oscillator's amplitude (x'' = -w^2 x, 10 periods, 200 steps a period,
    /// an Euler step every 40) where forward Euler alone grows it by 1.2 % a period.
    #[test]
    fn verlet_keeps_an_oscillators_amplitude() {
        let w = 2.0 * std::f64::consts::PI;
        let dt = 1.0 / 200.0;
        let mut s = FluidState {
            x: [1.0, 0.0, 0.0],
            v: [0.0; 3],
            rho: 1000.0,
        };
        let mut prev: Option<(V3, f64)> = None;
        for step in 0..2000u32 {
            let rates = FluidRates {
                acc: [-w * w * s.x[0], 0.0, 0.0],
                drho: 0.0,
            };
            let euler = prev.is_none() || (step + 1) % 40 == 0;
            let (vb, rb, span) = match prev {
                Some((v, r)) if !euler => (v, r, 2.0 * dt),
                _ => (s.v, s.rho, dt),
            };
            let next = verlet_update(&s, vb, rb, &rates, [0.0; 3], dt, span);
            prev = Some((s.v, s.rho));
            s = next;
        }
        let amplitude = (s.x[0] * s.x[0] + (s.v[0] / w).powi(2)).sqrt();
        assert!((amplitude - 1.0).abs() < 0.02, "amplitude {amplitude}");
    }

    #[test]
    fn adjugate_times_matrix_is_the_determinant() {
        let mut rng = SplitMix64::new(7);
        for _ in 0..100 {
            let a: [f64; 16] = std::array::from_fn(|_| rng.range(-1.0, 1.0));
            let mut b = [0.0; 16];
            let det = adjugate4(&a, &mut b);
            for r in 0..4 {
                for c in 0..4 {
                    let ab: f64 = (0..4).map(|k| a[4 * r + k] * b[4 * k + c]).sum();
                    let want = if r == c { det } else { 0.0 };
                    assert!((ab - want).abs() < 1e-12, "({r}, {c}): {ab} vs {want}");
                }
            }
        }
    }

    /// The ghost node's interpolation is first-order consistent: fluid on a lattice with a
    /// density linear in x gives, extrapolated to a particle, that line's value there, even on
    /// one side of the fluid (a node near the free surface); with few neighbours the Shepard
    /// average; without any, NaN.
    #[test]
    fn ghost_density_extrapolates_a_linear_field_exactly() {
        let (dp, h) = (0.01, 0.013);
        let (rho0, slope) = (1000.0, [3.0, -2.0, 50.0]);
        let rho_at = |x: V3| rho0 + vec3::dot(slope, x);
        let mass = rho0 * dp * dp * dp;
        for kernel in KERNELS {
            for ghost in [[0.0013, -0.0021, 0.0037], [0.0, 0.0, 0.021]] {
                let mut sums = GhostSums::default();
                for i in -4..=4 {
                    for j in -4..=4 {
                        // Fluid only below z = 0.025: a node near the top sees it on one side.
                        for k in -4..=2 {
                            let x = [i as f64 * dp, j as f64 * dp, k as f64 * dp];
                            let dr = vec3::sub(ghost, x);
                            let r = vec3::norm(dr);
                            if r >= 2.0 * h {
                                continue;
                            }
                            let (w, f) =
                                (kernel_value(kernel, r, h), kernel_grad_factor(kernel, r, h));
                            ghost_pair(&mut sums, w, f, dr, mass, rho_at(x));
                        }
                    }
                }
                let particle = vec3::sub(ghost, [0.0, 0.0, 0.03]);
                let got = ghost_density(&sums, vec3::sub(particle, ghost));
                let want = rho_at(particle);
                assert!(
                    (got - want).abs() < 1e-6 * rho0,
                    "{kernel:?} at {ghost:?}: {got} vs {want}"
                );
            }
            // One neighbour: a singular matrix, the Shepard average (its density).
            let mut one = GhostSums::default();
            let dr = [0.0, 0.0, 0.005];
            let r = vec3::norm(dr);
            ghost_pair(
                &mut one,
                kernel_value(kernel, r, h),
                kernel_grad_factor(kernel, r, h),
                dr,
                mass,
                1010.0,
            );
            assert!((ghost_density(&one, [0.0, 0.0, -0.01]) - 1010.0).abs() < 1e-9);
            assert!(ghost_density(&GhostSums::default(), [0.0; 3]).is_nan());
        }
    }
}
