// Physics parity: every CUDA twin of solver/src/dem/physics.rs, of the history partner encoding
// (solver/src/dem/state.rs) and of BodyTransform::wall_velocity, evaluated on the host's random
// inputs. solver/tests/physics_parity.rs computes the same in Rust and requires equal bits; the
// module is compiled with -DDEM_DOUBLE and without FMA contraction (the parity mode).
//
// Case i reads PARITY_IN doubles at in[i * PARITY_IN] and PARITY_IN_U words at in_u[i * PARITY_IN_U]
// and writes PARITY_OUT doubles and PARITY_OUT_U words. The offsets are the `In`/`Out` tables of
// the Rust test: keep the two in step.

#define PARITY_IN 72
#define PARITY_IN_U 3
#define PARITY_OUT 84
#define PARITY_OUT_U 6

__device__ __forceinline__ real3 in3(const double* a, unsigned o) { return make_real3(a[o], a[o + 1], a[o + 2]); }
__device__ __forceinline__ void out3(double* a, unsigned o, real3 v) {
    a[o] = v.x;
    a[o + 1] = v.y;
    a[o + 2] = v.z;
}
__device__ __forceinline__ void out_force(double* o, unsigned at, const ContactForce& f, const ContactState& s) {
    out3(o, at, f.force);
    out3(o, at + 3, f.tangential);
    out3(o, at + 6, f.rolling_torque);
    o[at + 9] = f.normal;
    o[at + 10] = f.sliding ? 1.0 : 0.0;
    out3(o, at + 11, s.xi);
}

extern "C" __global__ void physics_parity(const double* in, const unsigned* in_u, double* out, unsigned* out_u,
                                          unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const double* a = in + (size_t)i * PARITY_IN;
    const unsigned* au = in_u + (size_t)i * PARITY_IN_U;
    double* o = out + (size_t)i * PARITY_OUT;
    unsigned* ou = out_u + (size_t)i * PARITY_OUT_U;

    // Inputs (offsets of the Rust test's `In`).
    const real m1 = a[0], m2 = a[1], r1 = a[2], r2 = a[3], i1 = a[4], i2 = a[5];
    const real k = a[6], beta = a[7], delta = a[8], delta_dot = a[9], e_star = a[10], g_star = a[11];
    const real3 xi = in3(a, 12), nn = in3(a, 15), v_t = in3(a, 18);
    const real kt = a[21], ct = a[22], mu = a[23], fn_ = a[24], dt = a[25];
    const real3 omega_rel = in3(a, 26);
    const real mu_r = a[29];
    const real3 vi = in3(a, 30), wi = in3(a, 33), vj = in3(a, 36), wj = in3(a, 39), v_wall = in3(a, 42);
    const real3 g = in3(a, 45), f = in3(a, 48);
    const real h = a[51];
    const dvec3 x = dv3(a[52], a[53], a[54]);
    MeshBody body;
    for (int c = 0; c < 3; c++) {
        body.velocity[c] = a[55 + c];
        body.omega[c] = a[58 + c];
        body.center[c] = a[61 + c];
    }
    const dvec3 q = dv3(a[64], a[65], a[66]);
    MaterialPair pair;
    pair.kn = a[67];
    pair.kt = a[21];
    pair.e_star = a[10];
    pair.g_star = a[11];
    pair.beta = a[7];
    pair.mu_s = a[23];
    pair.mu_r = a[29];
    const real cn = a[68];

    // Outputs (offsets of the Rust test's `Out`).
    o[0] = effective_mass(m1, m2);
    o[1] = effective_radius(r1, r2);
    o[2] = effective_inertia(i1, i2);
    o[3] = linear_damping_coefficient(k, m1, beta);
    o[4] = linear_normal_force(pair.kn, cn, delta, delta_dot);
    o[5] = hertz_normal_stiffness(e_star, r1, delta);
    o[6] = mindlin_tangential_stiffness(g_star, r1, delta);
    o[7] = hertz_damping_coefficient(k, m1, beta);
    o[8] = hertz_normal_force(e_star, r1, m1, beta, delta, delta_dot);
    out3(o, 9, project_spring(xi, nn));
    {
        ContactState s;
        s.xi = xi;
        bool sliding;
        const real3 ft = tangential_force(&s, nn, v_t, kt, ct, mu, fn_, dt, &sliding);
        out3(o, 12, ft);
        out3(o, 15, s.xi);
        o[18] = sliding ? 1.0 : 0.0;
    }
    out3(o, 19, rolling_torque(omega_rel, mu_r, r1, fn_, i1, dt));
    ContactKinematics kin;
    kin.n = nn;
    kin.delta = delta;
    kin.v_rel = vi;
    kin.omega_rel = omega_rel;
    kin.r_eff = r1;
    kin.m_eff = m1;
    kin.i_eff = i1;
    for (int model = 0; model < 2; model++) {
        ContactState s;
        s.xi = xi;
        const ContactForce cf = contact_force(model, pair, kin, &s, dt);
        out_force(o, 22 + 14 * model, cf, s);
    }
    // The frictionless specialisation must give contact_force's normal for the same contact.
    o[50] = normal_force_only(0, pair, m1, r1, delta, dot3(kin.v_rel, kin.n));
    o[51] = normal_force_only(1, pair, m1, r1, delta, dot3(kin.v_rel, kin.n));
    out3(o, 52, particle_contact_velocity(vi, wi, r1, vj, wj, r2, nn));
    out3(o, 55, surface_contact_velocity(vi, wi, r1, nn, v_wall));
    out3(o, 58, kick(vi, g, f, m1, h));
    out3(o, 61, spin_kick(wi, f, i1, h));
    const dvec3 xd = drift(x, vi, a[25]);
    o[64] = xd.x;
    o[65] = xd.y;
    o[66] = xd.z;
    const dvec3 vw = wall_velocity(body, q);
    o[67] = vw.x;
    o[68] = vw.y;
    o[69] = vw.z;
    {
        ContactState s;
        s.xi = xi;
        o[70] = contact_elastic_energy(0, pair, r1, delta, &s);
        o[71] = contact_elastic_energy(1, pair, r1, delta, &s);
    }
    out3(o, 72, spring_force(xi, v_t, kt, ct, false));
    out3(o, 81, spring_force(xi, v_t, kt, ct, true));
    // Model 0 as a sticking contact's, model 1 as a sliding one's.
    for (int model = 0; model < 2; model++)
        out3(o, 75 + 3 * model, contact_force_from_spring(model, pair, kin, xi, model == 1, dt).force);

    ou[0] = wall_partner(au[0]);
    ou[1] = triangle_partner(au[1]);
    ou[2] = is_particle_partner(au[2]) ? 1u : 0u;
    ou[3] = owns_pair(au[1], au[2]) ? 1u : 0u;
    ou[4] = owner_key(a[52], a[53], a[54]);
    // One case in eight with equal keys (decided by the ids).
    ou[5] = owns_pair_keyed(au[0], au[1], au[0] ^ (au[2] & 7u), au[2]) ? 1u : 0u;
}
