// Weakly compressible SPH physics: the CUDA twins of solver/src/sph/physics.rs, one function per
// Rust function, same names and argument order (argument names too). Units, sources and
// derivations are documented once, on the Rust side; keep the two in step:
// solver/tests/sph_physics_parity.rs checks names and argument lists against the Rust file and runs
// every twin against its Rust function on random inputs in double (kernels/src/cuda/sph_parity.cu),
// requiring equal bits. Needs vec3.cuh (real, real3, dvec3 and their helpers) before it.
//
// Written with +, -, *, /, sqrt, fabs, fmin only (all correctly rounded in double), never pow, so
// that the parity mode (-DDEM_DOUBLE, no FMA contraction) reproduces the CPU's bits. The integrator
// works in double whatever `real` is (as drift in physics.cuh and DualSPHysics' symplectic steps).

#define SPH_PI 3.14159265358979323846
// physics::TAIT_GAMMA
#define SPH_TAIT_GAMMA 7
// physics::ETA2_COEFFICIENT
#define SPH_ETA2_COEFFICIENT 0.01
// physics::SEVENTH_ROOT_MAX_ITERATIONS
#define SPH_SEVENTH_ROOT_MAX_ITERATIONS 100
// physics::SEVENTH_ROOT_SERIES_MAX
#define SPH_SEVENTH_ROOT_SERIES_MAX 0.015625
// physics::SEVENTH_ROOT_SERIES: C(1/7, k), k = 1..8
#define SPH_SEVENTH_ROOT_C1 0.14285714285714285
#define SPH_SEVENTH_ROOT_C2 -0.061224489795918366
#define SPH_SEVENTH_ROOT_C3 0.037900874635568516
#define SPH_SEVENTH_ROOT_C4 -0.027072053311120368
#define SPH_SEVENTH_ROOT_C5 0.02088415541143571
#define SPH_SEVENTH_ROOT_C6 -0.016906221047352718
#define SPH_SEVENTH_ROOT_C7 0.014146021692682887
#define SPH_SEVENTH_ROOT_C8 -0.012125161450871046
// physics::SphKernel
#define SPH_KERNEL_WENDLAND_C2 0
#define SPH_KERNEL_CUBIC_SPLINE 1

// physics::SphPair
struct SphPair {
    real3 r_ij;
    real3 v_ij;
    real rho_i, rho_j;
    real p_i, p_j;
    real c_i, c_j;
    real m_j;
};

// physics::DiffusionParams
struct DiffusionParams {
    real delta, h, c0, rho0, b;
    real3 gravity;
};

// physics::FluidState; positions in double, as in the DEM.
struct FluidState {
    dvec3 x;
    real3 v;
    real rho;
};

// physics::FluidRates
struct FluidRates {
    real3 acc;
    real drho;
};

// ---------------------------------------------------------------------------------------------
// Smoothing kernels
// ---------------------------------------------------------------------------------------------

// physics::wendland_c2_alpha: 21 / (16 pi h^3).
__device__ __forceinline__ real wendland_c2_alpha(real h) { return real(21) / (real(16) * real(SPH_PI) * h * h * h); }

// physics::wendland_c2
__device__ __forceinline__ real wendland_c2(real r, real h) {
    const real q = r / h;
    if (q >= real(2)) return real(0);
    const real w = real(1) - real(0.5) * q;
    const real w2 = w * w;
    return wendland_c2_alpha(h) * (w2 * w2) * (real(2) * q + real(1));
}

// physics::wendland_c2_grad_factor: -5 alpha_D / h^2 (1 - q/2)^3.
__device__ __forceinline__ real wendland_c2_grad_factor(real r, real h) {
    const real q = r / h;
    if (q >= real(2)) return real(0);
    const real w = real(1) - real(0.5) * q;
    return real(-5) * wendland_c2_alpha(h) / (h * h) * (w * w * w);
}

// physics::cubic_spline_alpha: 1 / (pi h^3).
__device__ __forceinline__ real cubic_spline_alpha(real h) { return real(1) / (real(SPH_PI) * h * h * h); }

// physics::cubic_spline
__device__ __forceinline__ real cubic_spline(real r, real h) {
    const real q = r / h;
    if (q >= real(2)) return real(0);
    if (q >= real(1)) {
        const real w = real(2) - q;
        return cubic_spline_alpha(h) * real(0.25) * (w * w * w);
    }
    return cubic_spline_alpha(h) * (real(1) - real(1.5) * q * q + real(0.75) * q * q * q);
}

// physics::cubic_spline_grad_factor
__device__ __forceinline__ real cubic_spline_grad_factor(real r, real h) {
    const real q = r / h;
    if (q >= real(2)) return real(0);
    if (q >= real(1)) {
        const real w = real(2) - q;
        return cubic_spline_alpha(h) / (h * h) * (real(-0.75) * w * w / q);
    }
    return cubic_spline_alpha(h) / (h * h) * (real(-3) + real(2.25) * q);
}

// physics::kernel_value; `kernel` is SPH_KERNEL_WENDLAND_C2 or SPH_KERNEL_CUBIC_SPLINE.
__device__ __forceinline__ real kernel_value(int kernel, real r, real h) {
    return kernel == SPH_KERNEL_WENDLAND_C2 ? wendland_c2(r, h) : cubic_spline(r, h);
}

// physics::kernel_grad_factor
__device__ __forceinline__ real kernel_grad_factor(int kernel, real r, real h) {
    return kernel == SPH_KERNEL_WENDLAND_C2 ? wendland_c2_grad_factor(r, h) : cubic_spline_grad_factor(r, h);
}

// physics::kernel_gradient: F r_ij.
__device__ __forceinline__ real3 kernel_gradient(real f, real3 r_ij) { return scale3(r_ij, f); }

// ---------------------------------------------------------------------------------------------
// Equation of state
// ---------------------------------------------------------------------------------------------

// physics::tait_b: c0^2 rho0 / gamma.
__device__ __forceinline__ real tait_b(real rho0, real c0) { return c0 * c0 * rho0 / real(SPH_TAIT_GAMMA); }

// physics::tait_pressure: B ((rho/rho0)^7 - 1).
__device__ __forceinline__ real tait_pressure(real rho, real rho0, real b) {
    const real x = rho / rho0;
    const real x3 = x * x * x;
    return b * (x3 * x3 * x - real(1));
}

// physics::seventh_root_series: the binomial series of (1 + t)^(1/7) - 1 to t^8 (Horner form).
__device__ __forceinline__ real seventh_root_series(real t) {
    return t * (real(SPH_SEVENTH_ROOT_C1) +
                t * (real(SPH_SEVENTH_ROOT_C2) +
                     t * (real(SPH_SEVENTH_ROOT_C3) +
                          t * (real(SPH_SEVENTH_ROOT_C4) +
                               t * (real(SPH_SEVENTH_ROOT_C5) +
                                    t * (real(SPH_SEVENTH_ROOT_C6) +
                                         t * (real(SPH_SEVENTH_ROOT_C7) + t * real(SPH_SEVENTH_ROOT_C8))))))));
}

// physics::seventh_root_minus_one: (1 + t)^(1/7) - 1, the binomial series for small |t|, else
// Newton from above (see the Rust side).
__device__ __forceinline__ real seventh_root_minus_one(real t) {
    if (fabs(t) <= real(SPH_SEVENTH_ROOT_SERIES_MAX)) return seventh_root_series(t);
    if (t <= real(-1)) return real(-1);
    real d = t > real(1) ? fmin(t / real(7), sqrt(sqrt(real(1) + t)) - real(1)) : t / real(7);
    for (int k = 0; k < SPH_SEVENTH_ROOT_MAX_ITERATIONS; k++) {
        const real y = real(1) + d;
        const real y2 = y * y;
        const real p =
            d * (real(7) + d * (real(21) + d * (real(35) + d * (real(35) + d * (real(21) + d * (real(7) + d))))));
        const real next = d - (p - t) / (real(7) * (y2 * y2 * y2));
        if (!(next < d)) break;
        d = next;
    }
    return d;
}

// physics::tait_density: rho0 (1 + p/B)^(1/7).
__device__ __forceinline__ real tait_density(real p, real rho0, real b) {
    return rho0 + rho0 * seventh_root_minus_one(p / b);
}

// physics::sound_speed: c0 (rho/rho0)^3.
__device__ __forceinline__ real sound_speed(real rho, real rho0, real c0) {
    const real x = rho / rho0;
    return c0 * (x * x * x);
}

// physics::sound_speed_from_coefficient: coef sqrt(g H).
__device__ __forceinline__ real sound_speed_from_coefficient(real coef, real g, real depth) {
    return coef * sqrt(g * depth);
}

// physics::hydrostatic_pressure: rho0 g depth.
__device__ __forceinline__ real hydrostatic_pressure(real rho0, real g, real depth) { return rho0 * g * depth; }

// physics::hydrostatic_density
__device__ __forceinline__ real hydrostatic_density(real rho0, real b, real g, real depth) {
    return tait_density(hydrostatic_pressure(rho0, g, depth), rho0, b);
}

// ---------------------------------------------------------------------------------------------
// Momentum and continuity
// ---------------------------------------------------------------------------------------------

// physics::eta_squared: 0.01 h^2.
__device__ __forceinline__ real eta_squared(real h) { return real(SPH_ETA2_COEFFICIENT) * h * h; }

// physics::softened_inverse_square: 1 / (r^2 + eta^2), shared by mu_ij and the diffusion.
__device__ __forceinline__ real softened_inverse_square(real h, real r2) { return real(1) / (r2 + eta_squared(h)); }

// physics::viscous_mu: h (v_ij.r_ij) / (r_ij^2 + eta^2) from vr = v_ij.r_ij and the inverse.
__device__ __forceinline__ real viscous_mu(real h, real vr, real inv) { return h * (vr * inv); }

// physics::artificial_viscosity: -alpha c_ij mu_ij / rho_ij for approaching pairs (mu < 0), else 0.
__device__ __forceinline__ real artificial_viscosity(real alpha, real mu, const SphPair& pair) {
    if (mu >= real(0)) return real(0);
    return -alpha * (pair.c_i + pair.c_j) * mu / (pair.rho_i + pair.rho_j);
}

// physics::momentum_pair: r_ij scaled by -m_j ((p_i + p_j) / (rho_i rho_j) + Pi_ij) F.
__device__ __forceinline__ real3 momentum_pair(real f, const SphPair& pair, real pi_ij) {
    const real s = -pair.m_j * ((pair.p_i + pair.p_j) / (pair.rho_i * pair.rho_j) + pi_ij) * f;
    return scale3(pair.r_ij, s);
}

// physics::continuity_pair: m_j F (v_ij . r_ij).
__device__ __forceinline__ real continuity_pair(real f, real vr, real m_j) { return m_j * (f * vr); }

// ---------------------------------------------------------------------------------------------
// Density diffusion
// ---------------------------------------------------------------------------------------------

// physics::density_diffusion: 2 delta h c0 psi (-F r^2) / (r^2 + eta^2) m_j / rho_j.
__device__ __forceinline__ real density_diffusion(const DiffusionParams& params, real f, const SphPair& pair,
                                                  real psi, real r2, real inv) {
    return real(2) * params.delta * params.h * params.c0 * psi * (-f * r2) * inv * pair.m_j / pair.rho_j;
}

// physics::diffusion_molteni_colagrossi: psi = rho_j - rho_i.
__device__ __forceinline__ real diffusion_molteni_colagrossi(const DiffusionParams& params, real f,
                                                             const SphPair& pair, real r2, real inv) {
    return density_diffusion(params, f, pair, pair.rho_j - pair.rho_i, r2, inv);
}

// physics::hydrostatic_density_difference: rho0 ((1 - rho0 g.r_ij / B)^(1/7) - 1).
// The float mode of the SPH module (which defines the case's gravity as SPH_GX, SPH_GY, SPH_GZ)
// leaves out the products with a zero component, which the compiler may not drop (0 x inf is
// NaN); the parity mode keeps the CPU's dot product.
__device__ __forceinline__ real hydrostatic_density_difference(const DiffusionParams& params, real3 r_ij) {
#if defined(SPH_GX) && !defined(DEM_DOUBLE)
    const real g_r = ((real)(SPH_GX) != real(0) ? (real)(SPH_GX) * r_ij.x : real(0)) +
                     ((real)(SPH_GY) != real(0) ? (real)(SPH_GY) * r_ij.y : real(0)) +
                     ((real)(SPH_GZ) != real(0) ? (real)(SPH_GZ) * r_ij.z : real(0));
#else
    const real g_r = dot3(params.gravity, r_ij);
#endif
#if defined(SPH_HYDRO_TERMS) && !defined(DEM_DOUBLE)
    // Float mode: the same series as a polynomial in g.r_ij, its coefficients folded by the host
    // and cut where float stops seeing the terms (sph/cuda/mod.rs::hydrostatic_polynomial): four
    // or five operations per pair instead of twelve.
    const real a[SPH_HYDRO_TERMS] = {SPH_HYDRO_COEFFS};
    real poly = a[SPH_HYDRO_TERMS - 1];
#pragma unroll
    for (int k = SPH_HYDRO_TERMS - 2; k >= 0; k--) poly = a[k] + g_r * poly;
    return g_r * poly;
#else
    const real dp = -params.rho0 * g_r;
    // SPH_HYDROSTATIC_SERIES (sph/cuda/mod.rs::pair_constants): the case bounds every pair's |t|
    // within the series' range, where seventh_root_minus_one would take the series anyway (the
    // same bits), so the branch and the Newton loop are left out (3 % of the step at 10 M).
#if defined(SPH_HYDROSTATIC_SERIES)
    return params.rho0 * seventh_root_series(dp / params.b);
#else
    return params.rho0 * seventh_root_minus_one(dp / params.b);
#endif
#endif
}

// physics::diffusion_fourtakas: psi = (rho_j - rho_i) - rho^H_ji.
__device__ __forceinline__ real diffusion_fourtakas(const DiffusionParams& params, real f, const SphPair& pair,
                                                    real r2, real inv) {
    const real psi = (pair.rho_j - pair.rho_i) - hydrostatic_density_difference(params, pair.r_ij);
    return density_diffusion(params, f, pair, psi, r2, inv);
}

// ---------------------------------------------------------------------------------------------
// Variable time step
// ---------------------------------------------------------------------------------------------

// physics::force_time_step: sqrt(h / |acc|) (+inf for acc = 0).
__device__ __forceinline__ real force_time_step(real h, real3 acc) { return sqrt(h / norm3(acc)); }

// physics::viscous_rate: |mu_ij|.
__device__ __forceinline__ real viscous_rate(real mu) { return fabs(mu); }

// physics::viscous_time_step: h / (c + mu_max).
__device__ __forceinline__ real viscous_time_step(real h, real c, real mu_max) { return h / (c + mu_max); }

// physics::variable_time_step: C_CFL min(dt_f, dt_cv).
__device__ __forceinline__ real variable_time_step(real cfl, real dt_f, real dt_cv) { return cfl * fmin(dt_f, dt_cv); }

// ---------------------------------------------------------------------------------------------
// Symplectic position Verlet, in double (steps are small against the state: float would lose the
// increments, as DualSPHysics notes by computing these in double too).
// ---------------------------------------------------------------------------------------------

// a + (b + c) s in double, rounded to real at the end (vec3::axpy(a, vec3::add(b, c), s) in f64).
__device__ __forceinline__ real3 sph_axpy_sum_d(real3 a, real3 b, real3 c, double s) {
    return make_real3((real)((double)a.x + ((double)b.x + (double)c.x) * s),
                      (real)((double)a.y + ((double)b.y + (double)c.y) * s),
                      (real)((double)a.z + ((double)b.z + (double)c.z) * s));
}

// physics::symplectic_predict: x + dt/2 v, v + dt/2 (acc + g), rho + dt/2 drho.
__device__ __forceinline__ FluidState symplectic_predict(const FluidState& s, const FluidRates& rates, real3 g,
                                                         double dt) {
    const double dt05 = 0.5 * dt;
    FluidState o;
    o.x = dv3(s.x.x + (double)s.v.x * dt05, s.x.y + (double)s.v.y * dt05, s.x.z + (double)s.v.z * dt05);
    o.v = sph_axpy_sum_d(s.v, rates.acc, g, dt05);
    o.rho = (real)((double)s.rho + (double)rates.drho * dt05);
    return o;
}

// physics::symplectic_density: rho_n (2 - eps) / (2 + eps), eps = -(drho_half / rho_half) dt.
__device__ __forceinline__ double symplectic_density(double rho_n, double rho_half, double drho_half, double dt) {
    const double eps = -(drho_half / rho_half) * dt;
    return rho_n * (2.0 - eps) / (2.0 + eps);
}

// physics::symplectic_correct: v + dt (acc' + g), x + dt/2 (v + v1), symplectic_density.
__device__ __forceinline__ FluidState symplectic_correct(const FluidState& s, real rho_half,
                                                         const FluidRates& rates_half, real3 g, double dt) {
    FluidState o;
    o.v = sph_axpy_sum_d(s.v, rates_half.acc, g, dt);
    const double dt05 = 0.5 * dt;
    o.x = dv3(s.x.x + ((double)s.v.x + (double)o.v.x) * dt05, s.x.y + ((double)s.v.y + (double)o.v.y) * dt05,
              s.x.z + ((double)s.v.z + (double)o.v.z) * dt05);
    o.rho = (real)symplectic_density((double)s.rho, (double)rho_half, (double)rates_half.drho, dt);
    return o;
}

// physics::verlet_density: rho_base + dt_span drho.
__device__ __forceinline__ double verlet_density(double rho_base, double drho, double dt_span) {
    return rho_base + drho * dt_span;
}

// physics::verlet_update: x + (dt v + dt^2/2 (acc + g)), v_base + dt_span (acc + g),
// verlet_density(rho_base, drho, dt_span); in double, rounded to real at the end.
__device__ __forceinline__ FluidState verlet_update(const FluidState& s, real3 v_base, real rho_base,
                                                    const FluidRates& rates, real3 g, double dt, double dt_span) {
    const double ax = (double)rates.acc.x + (double)g.x;
    const double ay = (double)rates.acc.y + (double)g.y;
    const double az = (double)rates.acc.z + (double)g.z;
    const double dt205 = 0.5 * dt * dt;
    FluidState o;
    o.x = dv3(s.x.x + ((double)s.v.x * dt + ax * dt205), s.x.y + ((double)s.v.y * dt + ay * dt205),
              s.x.z + ((double)s.v.z * dt + az * dt205));
    o.v = make_real3((real)((double)v_base.x + ax * dt_span), (real)((double)v_base.y + ay * dt_span),
                     (real)((double)v_base.z + az * dt_span));
    o.rho = (real)verlet_density((double)rho_base, (double)rates.drho, dt_span);
    return o;
}

// ---------------------------------------------------------------------------------------------
// Modified dynamic boundary conditions (mDBC). In double whatever `real` is: the 4 x 4 system is
// solved by its adjugate, whose cancellations float would not survive (a boundary pass, cheap).
// ---------------------------------------------------------------------------------------------

// physics::GHOST_DETERMINANT_MIN
#define SPH_GHOST_DETERMINANT_MIN 0.001

// physics::GhostSums (the 4 x 4 matrix row-major).
struct GhostSums {
    double rho;
    dvec3 grad;
    double a[16];
};

__device__ __forceinline__ GhostSums ghost_sums_zero() {
    GhostSums s;
    s.rho = 0.0;
    s.grad = dv3(0.0, 0.0, 0.0);
    for (int k = 0; k < 16; k++) s.a[k] = 0.0;
    return s;
}

// physics::ghost_pair: sum m W, sum m grad W, and the rows [V W, V W dr], [V grad_k W, V grad_k W dr].
__device__ __forceinline__ void ghost_pair(GhostSums& s, real w, real f, real3 dr, real m_j, real rho_j) {
    const double v = (double)m_j / (double)rho_j;
    const double d[3] = {(double)dr.x, (double)dr.y, (double)dr.z};
    const double g[3] = {d[0] * (double)f, d[1] * (double)f, d[2] * (double)f};
    s.rho += (double)m_j * (double)w;
    s.grad = dv3(s.grad.x + g[0] * (double)m_j, s.grad.y + g[1] * (double)m_j, s.grad.z + g[2] * (double)m_j);
    const double vw = v * (double)w;
    const double rows[4] = {vw, v * g[0], v * g[1], v * g[2]};
    for (int r = 0; r < 4; r++) {
        const double q = rows[r];
        s.a[4 * r] += q;
        s.a[4 * r + 1] += d[0] * q;
        s.a[4 * r + 2] += d[1] * q;
        s.a[4 * r + 3] += d[2] * q;
    }
}

// physics::adjugate4: det a, and the adjugate of a into b.
__device__ __forceinline__ double adjugate4(const double* a, double* b) {
    const double s0 = a[0] * a[5] - a[4] * a[1];
    const double s1 = a[0] * a[6] - a[4] * a[2];
    const double s2 = a[0] * a[7] - a[4] * a[3];
    const double s3 = a[1] * a[6] - a[5] * a[2];
    const double s4 = a[1] * a[7] - a[5] * a[3];
    const double s5 = a[2] * a[7] - a[6] * a[3];
    const double c5 = a[10] * a[15] - a[14] * a[11];
    const double c4 = a[9] * a[15] - a[13] * a[11];
    const double c3 = a[9] * a[14] - a[13] * a[10];
    const double c2 = a[8] * a[15] - a[12] * a[11];
    const double c1 = a[8] * a[14] - a[12] * a[10];
    const double c0 = a[8] * a[13] - a[12] * a[9];
    const double det = s0 * c5 - s1 * c4 + s2 * c3 + s3 * c2 - s4 * c1 + s5 * c0;
    b[0] = a[5] * c5 - a[6] * c4 + a[7] * c3;
    b[1] = -a[1] * c5 + a[2] * c4 - a[3] * c3;
    b[2] = a[13] * s5 - a[14] * s4 + a[15] * s3;
    b[3] = -a[9] * s5 + a[10] * s4 - a[11] * s3;
    b[4] = -a[4] * c5 + a[6] * c2 - a[7] * c1;
    b[5] = a[0] * c5 - a[2] * c2 + a[3] * c1;
    b[6] = -a[12] * s5 + a[14] * s2 - a[15] * s1;
    b[7] = a[8] * s5 - a[10] * s2 + a[11] * s1;
    b[8] = a[4] * c4 - a[5] * c2 + a[7] * c0;
    b[9] = -a[0] * c4 + a[1] * c2 - a[3] * c0;
    b[10] = a[12] * s4 - a[13] * s2 + a[15] * s0;
    b[11] = -a[8] * s4 + a[9] * s2 - a[11] * s0;
    b[12] = -a[4] * c3 + a[5] * c1 - a[6] * c0;
    b[13] = a[0] * c3 - a[1] * c1 + a[2] * c0;
    b[14] = -a[12] * s3 + a[13] * s1 - a[14] * s0;
    b[15] = a[8] * s3 - a[9] * s1 + a[10] * s0;
    return det;
}

// physics::ghost_density: the first-order extrapolation to the particle (Shepard where |det A| is
// small); NaN without fluid in reach.
__device__ __forceinline__ double ghost_density(const GhostSums& s, dvec3 to_particle) {
    if (s.a[0] <= 0.0) return 0.0 / 0.0;
    double b[16];
    const double det = adjugate4(s.a, b);
    if (fabs(det) < SPH_GHOST_DETERMINANT_MIN) return s.rho / s.a[0];
    const double rhs[4] = {s.rho, s.grad.x, s.grad.y, s.grad.z};
    double x[4];
    for (int r = 0; r < 4; r++) {
        x[r] = (b[4 * r] * rhs[0] + b[4 * r + 1] * rhs[1] + b[4 * r + 2] * rhs[2] + b[4 * r + 3] * rhs[3]) / det;
    }
    const double gx = -x[1], gy = -x[2], gz = -x[3];
    return x[0] + (gx * to_particle.x + gy * to_particle.y + gz * to_particle.z);
}
