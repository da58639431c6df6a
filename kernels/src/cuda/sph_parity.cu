// SPH physics parity: every CUDA twin of solver/src/sph/physics.rs (sph_physics.cuh), evaluated on
// the host's random inputs. solver/tests/sph_physics_parity.rs computes the same in Rust and requires
// equal bits; the module is compiled with -DDEM_DOUBLE and without FMA contraction (the parity
// mode). Self-contained: vec3.cuh and sph_physics.cuh only (kernels::sph_parity_module_source).
//
// Case i reads SPH_PARITY_IN doubles at in[i * SPH_PARITY_IN] and writes SPH_PARITY_OUT doubles at
// out[i * SPH_PARITY_OUT]. The offsets below are the `inp` and `out` tables of the Rust test: keep
// the two in step.

#define SPH_PARITY_IN 71
#define SPH_PARITY_OUT 97

// Inputs (the Rust test's `inp`).
enum SphParityIn {
    IN_R = 0,
    IN_H = 1,
    IN_R_IJ = 2,  // 3
    IN_V_IJ = 5,  // 3
    IN_RHO_I = 8,
    IN_RHO_J = 9,
    IN_P_I = 10,
    IN_P_J = 11,
    IN_C_I = 12,
    IN_C_J = 13,
    IN_M_J = 14,
    IN_ALPHA = 15,
    IN_DELTA = 16,
    IN_C0 = 17,
    IN_RHO0 = 18,
    IN_B = 19,
    IN_GRAVITY = 20,  // 3
    IN_T = 23,
    IN_P = 24,
    IN_DEPTH = 25,
    IN_G = 26,
    IN_COEF = 27,
    IN_ACC = 28,  // 3
    IN_X = 31,    // 3
    IN_V = 34,    // 3
    IN_RHO = 37,
    IN_DRHO = 38,
    IN_DT = 39,
    IN_CFL = 40,
    IN_DT_F = 41,
    IN_DT_CV = 42,
    IN_RHO_HALF = 43,
    IN_DRHO_HALF = 44,
    IN_MU_MAX = 45,
    IN_RHO_EOS = 46,
    IN_KERNEL = 47,  // 0 or 1, SphKernel
    IN_GHOST = 48,   // rho, grad (3), a (16)
    IN_TO_PARTICLE = 68,  // 3
};

// Outputs (the Rust test's `out`).
enum SphParityOut {
    OUT_WENDLAND_ALPHA = 0,
    OUT_WENDLAND = 1,
    OUT_WENDLAND_F = 2,
    OUT_CUBIC_ALPHA = 3,
    OUT_CUBIC = 4,
    OUT_CUBIC_F = 5,
    OUT_KERNEL_VALUE = 6,
    OUT_KERNEL_F = 7,
    OUT_KERNEL_GRADIENT = 8,  // 3
    OUT_TAIT_B = 11,
    OUT_TAIT_PRESSURE = 12,
    OUT_SEVENTH_ROOT = 13,
    OUT_TAIT_DENSITY = 14,
    OUT_SOUND_SPEED = 15,
    OUT_SOUND_SPEED_COEF = 16,
    OUT_HYDROSTATIC_PRESSURE = 17,
    OUT_HYDROSTATIC_DENSITY = 18,
    OUT_ETA2 = 19,
    OUT_VISCOUS_MU = 20,
    OUT_VISCOSITY = 21,
    OUT_MOMENTUM = 22,  // 3
    OUT_CONTINUITY = 25,
    OUT_DIFFUSION = 26,
    OUT_DIFFUSION_MC = 27,
    OUT_HYDROSTATIC_DIFFERENCE = 28,
    OUT_DIFFUSION_FOURTAKAS = 29,
    OUT_FORCE_DT = 30,
    OUT_VISCOUS_RATE = 31,
    OUT_VISCOUS_DT = 32,
    OUT_DT = 33,
    OUT_PREDICT = 34,  // x 3, v 3, rho
    OUT_SYMPLECTIC_DENSITY = 41,
    OUT_CORRECT = 42,  // x 3, v 3, rho
    OUT_SOFTENED_INVERSE = 49,
    OUT_SEVENTH_ROOT_SERIES = 50,
    OUT_GHOST_PAIR = 51,  // 20
    OUT_ADJUGATE = 71,    // det, then 16
    OUT_GHOST_DENSITY = 88,  // -1 for NaN
    OUT_VERLET = 89,  // x 3, v 3, rho
    OUT_VERLET_DENSITY = 96,
};

__device__ __forceinline__ GhostSums sph_in_ghost(const double* a) {
    GhostSums s;
    s.rho = a[IN_GHOST];
    s.grad = dv3(a[IN_GHOST + 1], a[IN_GHOST + 2], a[IN_GHOST + 3]);
    for (int k = 0; k < 16; k++) s.a[k] = a[IN_GHOST + 4 + k];
    return s;
}

__device__ __forceinline__ real3 sph_in3(const double* a, unsigned o) { return make_real3(a[o], a[o + 1], a[o + 2]); }
__device__ __forceinline__ void sph_out3(double* a, unsigned o, real3 v) {
    a[o] = v.x;
    a[o + 1] = v.y;
    a[o + 2] = v.z;
}
__device__ __forceinline__ void sph_out_state(double* a, unsigned o, const FluidState& s) {
    a[o] = s.x.x;
    a[o + 1] = s.x.y;
    a[o + 2] = s.x.z;
    sph_out3(a, o + 3, s.v);
    a[o + 6] = s.rho;
}

extern "C" __global__ void sph_physics_parity(const double* in, double* out, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const double* a = in + (size_t)i * SPH_PARITY_IN;
    double* o = out + (size_t)i * SPH_PARITY_OUT;

    const real r = a[IN_R], h = a[IN_H];
    const int kernel = a[IN_KERNEL] == 0.0 ? SPH_KERNEL_WENDLAND_C2 : SPH_KERNEL_CUBIC_SPLINE;
    SphPair pair;
    pair.r_ij = sph_in3(a, IN_R_IJ);
    pair.v_ij = sph_in3(a, IN_V_IJ);
    pair.rho_i = a[IN_RHO_I];
    pair.rho_j = a[IN_RHO_J];
    pair.p_i = a[IN_P_I];
    pair.p_j = a[IN_P_J];
    pair.c_i = a[IN_C_I];
    pair.c_j = a[IN_C_J];
    pair.m_j = a[IN_M_J];
    DiffusionParams params;
    params.delta = a[IN_DELTA];
    params.h = h;
    params.c0 = a[IN_C0];
    params.rho0 = a[IN_RHO0];
    params.b = a[IN_B];
    params.gravity = sph_in3(a, IN_GRAVITY);
    const real rho0 = a[IN_RHO0], c0 = a[IN_C0], b = a[IN_B];
    const real g = a[IN_G], depth = a[IN_DEPTH];

    // Kernels.
    o[OUT_WENDLAND_ALPHA] = wendland_c2_alpha(h);
    o[OUT_WENDLAND] = wendland_c2(r, h);
    o[OUT_WENDLAND_F] = wendland_c2_grad_factor(r, h);
    o[OUT_CUBIC_ALPHA] = cubic_spline_alpha(h);
    o[OUT_CUBIC] = cubic_spline(r, h);
    o[OUT_CUBIC_F] = cubic_spline_grad_factor(r, h);
    o[OUT_KERNEL_VALUE] = kernel_value(kernel, r, h);
    o[OUT_KERNEL_F] = kernel_grad_factor(kernel, r, h);
    // The pair terms' gradient factor, at the pair's own distance.
    const real f = kernel_grad_factor(kernel, norm3(pair.r_ij), h);
    sph_out3(o, OUT_KERNEL_GRADIENT, kernel_gradient(f, pair.r_ij));

    // Equation of state.
    o[OUT_TAIT_B] = tait_b(rho0, c0);
    o[OUT_TAIT_PRESSURE] = tait_pressure(a[IN_RHO_EOS], rho0, b);
    o[OUT_SEVENTH_ROOT] = seventh_root_minus_one(a[IN_T]);
    o[OUT_SEVENTH_ROOT_SERIES] = seventh_root_series(a[IN_T]);
    o[OUT_TAIT_DENSITY] = tait_density(a[IN_P], rho0, b);
    o[OUT_SOUND_SPEED] = sound_speed(a[IN_RHO_EOS], rho0, c0);
    o[OUT_SOUND_SPEED_COEF] = sound_speed_from_coefficient(a[IN_COEF], g, depth);
    o[OUT_HYDROSTATIC_PRESSURE] = hydrostatic_pressure(rho0, g, depth);
    o[OUT_HYDROSTATIC_DENSITY] = hydrostatic_density(rho0, b, g, depth);

    // Momentum, continuity.
    o[OUT_ETA2] = eta_squared(h);
    // The pair's shared factors, as sph_pair_sum forms them.
    const real r2 = norm23(pair.r_ij);
    const real vr = dot3(pair.v_ij, pair.r_ij);
    const real inv = softened_inverse_square(h, r2);
    o[OUT_SOFTENED_INVERSE] = inv;
    const real mu = viscous_mu(h, vr, inv);
    o[OUT_VISCOUS_MU] = mu;
    const real pi_ij = artificial_viscosity(a[IN_ALPHA], mu, pair);
    o[OUT_VISCOSITY] = pi_ij;
    sph_out3(o, OUT_MOMENTUM, momentum_pair(f, pair, pi_ij));
    o[OUT_CONTINUITY] = continuity_pair(f, vr, pair.m_j);

    // Density diffusion (the generic term with psi = t).
    o[OUT_DIFFUSION] = density_diffusion(params, f, pair, a[IN_T], r2, inv);
    o[OUT_DIFFUSION_MC] = diffusion_molteni_colagrossi(params, f, pair, r2, inv);
    o[OUT_HYDROSTATIC_DIFFERENCE] = hydrostatic_density_difference(params, pair.r_ij);
    o[OUT_DIFFUSION_FOURTAKAS] = diffusion_fourtakas(params, f, pair, r2, inv);

    // Time step.
    o[OUT_FORCE_DT] = force_time_step(h, sph_in3(a, IN_ACC));
    o[OUT_VISCOUS_RATE] = viscous_rate(mu);
    o[OUT_VISCOUS_DT] = viscous_time_step(h, pair.c_i, a[IN_MU_MAX]);
    o[OUT_DT] = variable_time_step(a[IN_CFL], a[IN_DT_F], a[IN_DT_CV]);

    // Symplectic integrator.
    FluidState s;
    s.x = dv3(a[IN_X], a[IN_X + 1], a[IN_X + 2]);
    s.v = sph_in3(a, IN_V);
    s.rho = a[IN_RHO];
    FluidRates rates;
    rates.acc = sph_in3(a, IN_ACC);
    rates.drho = a[IN_DRHO];
    const real3 grav = sph_in3(a, IN_GRAVITY);
    const double dt = a[IN_DT];
    sph_out_state(o, OUT_PREDICT, symplectic_predict(s, rates, grav, dt));
    o[OUT_SYMPLECTIC_DENSITY] = symplectic_density(a[IN_RHO], a[IN_RHO_HALF], a[IN_DRHO_HALF], dt);
    FluidRates rates_half;
    rates_half.acc = sph_in3(a, IN_ACC);
    rates_half.drho = a[IN_DRHO_HALF];
    sph_out_state(o, OUT_CORRECT, symplectic_correct(s, a[IN_RHO_HALF], rates_half, grav, dt));

    // Verlet integrator: a Verlet step (base v_ij and rho_half, span 2 dt) and an Euler density.
    sph_out_state(o, OUT_VERLET, verlet_update(s, sph_in3(a, IN_V_IJ), a[IN_RHO_HALF], rates, grav, dt, 2.0 * dt));
    o[OUT_VERLET_DENSITY] = verlet_density(a[IN_RHO_HALF], a[IN_DRHO], dt);

    // mDBC.
    GhostSums gs = sph_in_ghost(a);
    const real w = kernel_value(kernel, norm3(pair.r_ij), h);
    ghost_pair(gs, w, f, pair.r_ij, pair.m_j, pair.rho_j);
    o[OUT_GHOST_PAIR] = gs.rho;
    o[OUT_GHOST_PAIR + 1] = gs.grad.x;
    o[OUT_GHOST_PAIR + 2] = gs.grad.y;
    o[OUT_GHOST_PAIR + 3] = gs.grad.z;
    for (int k = 0; k < 16; k++) o[OUT_GHOST_PAIR + 4 + k] = gs.a[k];
    const GhostSums g0 = sph_in_ghost(a);
    o[OUT_ADJUGATE] = adjugate4(g0.a, o + OUT_ADJUGATE + 1);
    const double d = ghost_density(g0, dv3(a[IN_TO_PARTICLE], a[IN_TO_PARTICLE + 1], a[IN_TO_PARTICLE + 2]));
    o[OUT_GHOST_DENSITY] = d != d ? -1.0 : d;
}
