// DEM contact physics: the CUDA twins of solver/src/dem/physics.rs (and of the history partner
// encoding in solver/src/dem/state.rs), one function per Rust function, same names and argument
// order. Units, sources and derivations are documented once, on the Rust side; keep the two in
// step: solver/tests/physics_parity.rs runs every twin against its Rust function on random inputs
// in double (kernels/src/cuda/parity.cu) and requires equal bits.
//
// Tuples returned by the Rust functions become out-parameters here (last argument).

#define DEM_PI 3.14159265358979323846

// Material parameters of one contact pair (physics::MaterialPair), kept in double on the device
// and converted to `real` where used.
struct MaterialPair {
    double kn, kt, e_star, g_star, beta, mu_s, mu_r;
};

// physics::ContactKinematics
struct ContactKinematics {
    real3 n;
    real delta;
    real3 v_rel;
    real3 omega_rel;
    real r_eff;
    real m_eff;
    real i_eff;
};

// physics::ContactState
struct ContactState {
    real3 xi;
};

// physics::ContactForce
struct ContactForce {
    real3 force;
    real3 tangential;
    real3 rolling_torque;
    real normal;
    bool sliding;
};

// physics::effective_mass for two finite masses (walls pass their particle's mass directly).
__device__ __forceinline__ real effective_mass(real m1, real m2) { return m1 * m2 / (m1 + m2); }

// physics::effective_radius for two finite radii.
__device__ __forceinline__ real effective_radius(real r1, real r2) { return r1 * r2 / (r1 + r2); }

// physics::effective_inertia
__device__ __forceinline__ real effective_inertia(real i1, real i2) { return i1 * i2 / (i1 + i2); }

// physics::linear_damping_coefficient
__device__ __forceinline__ real linear_damping_coefficient(real k, real m_eff, real beta) {
    return real(2) * beta * sqrt(k * m_eff);
}

// physics::linear_normal_force
__device__ __forceinline__ real linear_normal_force(real kn, real cn, real delta, real delta_dot) {
    return kn * delta + cn * delta_dot;
}

// physics::hertz_normal_stiffness
__device__ __forceinline__ real hertz_normal_stiffness(real e_star, real r_eff, real delta) {
    return real(2) * e_star * sqrt(r_eff * delta);
}

// physics::mindlin_tangential_stiffness
__device__ __forceinline__ real mindlin_tangential_stiffness(real g_star, real r_eff, real delta) {
    return real(8) * g_star * sqrt(r_eff * delta);
}

// physics::linear_spring_energy
__device__ __forceinline__ double linear_spring_energy(double k, double x) { return 0.5 * k * x * x; }

// physics::hertz_elastic_energy
__device__ __forceinline__ double hertz_elastic_energy(double e_star, double r_eff, double delta) {
    return 8.0 / 15.0 * e_star * sqrt(r_eff) * delta * delta * sqrt(delta);
}

// physics::hertz_damping_coefficient
__device__ __forceinline__ real hertz_damping_coefficient(real stiffness, real m_eff, real beta) {
    return real(2) * sqrt(real(5.0 / 6.0)) * beta * sqrt(stiffness * m_eff);
}

// physics::hertz_normal_force
__device__ __forceinline__ real hertz_normal_force(real e_star, real r_eff, real m_eff, real beta, real delta,
                                                   real delta_dot) {
    real elastic = real(4.0 / 3.0) * e_star * sqrt(r_eff) * delta * sqrt(delta);
    real sn = hertz_normal_stiffness(e_star, r_eff, delta);
    return elastic + hertz_damping_coefficient(sn, m_eff, beta) * delta_dot;
}

// physics::project_spring
__device__ __forceinline__ real3 project_spring(real3 xi, real3 n) {
    real old = norm3(xi);
    if (old == real(0)) return zero3();
    real3 p = axpy3(xi, n, -dot3(xi, n));
    real len = norm3(p);
    return len > real(0) ? scale3(p, old / len) : zero3();
}

// physics::spring_force
__device__ __forceinline__ real3 spring_force(real3 xi, real3 v_t, real kt, real ct, bool sliding) {
    if (sliding) return scale3(xi, -kt);
    return sub3(scale3(xi, -kt), scale3(v_t, ct));
}

// physics::tangential_force; `sliding` receives the second tuple element.
__device__ __forceinline__ real3 tangential_force(ContactState* state, real3 n, real3 v_t, real kt, real ct, real mu,
                                                  real fn_, real dt, bool* sliding) {
    real3 xi = axpy3(project_spring(state->xi, n), v_t, dt);
    real3 trial = spring_force(xi, v_t, kt, ct, false);
    real limit = mu * fmax(fn_, real(0));
    real mag = norm3(trial);
    if (mag > limit) {
        real3 ft = mag > real(0) ? scale3(trial, limit / mag) : zero3();
        *sliding = true;
        if (kt > real(0)) {
            state->xi = scale3(ft, real(-1) / kt);
            return spring_force(state->xi, v_t, kt, ct, true);
        }
        state->xi = zero3();
        return ft;
    }
    state->xi = xi;
    *sliding = false;
    return trial;
}

// physics::rolling_torque (lever arm R*; the "particle" radius convention is folded into mu_r by the
// host's pair table, see RollingRadius)
__device__ __forceinline__ real3 rolling_torque(real3 omega_rel, real mu_r, real r_eff, real fn_, real i_eff,
                                                real dt) {
    real w = norm3(omega_rel);
    if (w == real(0) || mu_r == real(0)) return zero3();
    real mag = fmin(mu_r * r_eff * fmax(fn_, real(0)), i_eff * w / dt);
    return scale3(omega_rel, -mag / w);
}

// physics::contact_laws: v_t, the normal force and the tangential law (kt, ct) of one contact.
__device__ __forceinline__ void contact_laws(int model, const MaterialPair& pair, const ContactKinematics& k, real3* v_t,
                                             real* fn_, real* kt, real* ct) {
    real delta_dot = dot3(k.v_rel, k.n);
    *v_t = axpy3(k.v_rel, k.n, -delta_dot);
    real beta = (real)pair.beta;
    if (model == 0) {
        real kn = (real)pair.kn;
        *kt = (real)pair.kt;
        real cn = linear_damping_coefficient(kn, k.m_eff, beta);
        *ct = linear_damping_coefficient(*kt, k.m_eff, beta);
        *fn_ = linear_normal_force(kn, cn, k.delta, delta_dot);
    } else {
        real st = mindlin_tangential_stiffness((real)pair.g_star, k.r_eff, k.delta);
        *ct = hertz_damping_coefficient(st, k.m_eff, beta);
        *fn_ = hertz_normal_force((real)pair.e_star, k.r_eff, k.m_eff, beta, k.delta, delta_dot);
        *kt = st;
    }
}

// physics::contact_result
__device__ __forceinline__ ContactForce contact_result(const MaterialPair& pair, const ContactKinematics& k, real fn_,
                                                       real3 ft, bool sliding, real dt) {
    ContactForce out;
    out.tangential = ft;
    out.sliding = sliding;
    out.rolling_torque = rolling_torque(k.omega_rel, (real)pair.mu_r, k.r_eff, fn_, k.i_eff, dt);
    out.force = axpy3(ft, k.n, -fn_);
    out.normal = fn_;
    return out;
}

// physics::contact_force. `model` is 0 (Linear) or 1 (HertzMindlin), as physics::ContactModel.
__device__ __forceinline__ ContactForce contact_force(int model, const MaterialPair& pair, const ContactKinematics& k,
                                                      ContactState* state, real dt) {
    real3 v_t;
    real fn_, kt, ct;
    contact_laws(model, pair, k, &v_t, &fn_, &kt, &ct);
    bool sliding;
    const real3 ft = tangential_force(state, k.n, v_t, kt, ct, (real)pair.mu_s, fn_, dt, &sliding);
    return contact_result(pair, k, fn_, ft, sliding, dt);
}

// physics::contact_force_from_spring: the force of a contact whose spring (and whether it slid)
// this step already stored (the pairs-once history).
__device__ __forceinline__ ContactForce contact_force_from_spring(int model, const MaterialPair& pair,
                                                                  const ContactKinematics& k, real3 xi, bool sliding,
                                                                  real dt) {
    real3 v_t;
    real fn_, kt, ct;
    contact_laws(model, pair, k, &v_t, &fn_, &kt, &ct);
    return contact_result(pair, k, fn_, spring_force(xi, v_t, kt, ct, sliding), sliding, dt);
}

// physics::contact_elastic_energy (energy bookkeeping, in double whatever `real` is).
__device__ __forceinline__ double contact_elastic_energy(int model, const MaterialPair& pair, double r_eff, double delta,
                                                         const ContactState* state) {
    const double x = state->xi.x, y = state->xi.y, z = state->xi.z;
    const double xi2 = x * x + y * y + z * z;
    if (model == 0) return linear_spring_energy(pair.kn, delta) + 0.5 * pair.kt * xi2;
    return hertz_elastic_energy(pair.e_star, r_eff, delta) +
           0.5 * (double)mindlin_tangential_stiffness((real)pair.g_star, (real)r_eff, (real)delta) * xi2;
}

// Normal force alone, for the frictionless specialisation (DEM_FRICTION == 0): the same value
// contact_force returns in `normal` (the tangential part is exactly zero when mu_s = 0).
__device__ __forceinline__ real normal_force_only(int model, const MaterialPair& pair, real m_eff, real r_eff,
                                                  real delta, real delta_dot) {
    real beta = (real)pair.beta;
    if (model == 0) {
        real kn = (real)pair.kn;
        return linear_normal_force(kn, linear_damping_coefficient(kn, m_eff, beta), delta, delta_dot);
    }
    return hertz_normal_force((real)pair.e_star, r_eff, m_eff, beta, delta, delta_dot);
}

// physics::particle_contact_velocity: v_i - v_j + (r_i w_i + r_j w_j) x n.
__device__ __forceinline__ real3 particle_contact_velocity(real3 vi, real3 wi, real ri, real3 vj, real3 wj, real rj,
                                                           real3 n) {
    const real3 spin = add3(scale3(wi, ri), scale3(wj, rj));
    return add3(sub3(vi, vj), cross3(spin, n));
}

// physics::surface_contact_velocity: v_i + w_i x (r_i n) - v_wall.
__device__ __forceinline__ real3 surface_contact_velocity(real3 vi, real3 wi, real ri, real3 n, real3 v_wall) {
    return sub3(add3(vi, cross3(wi, scale3(n, ri))), v_wall);
}

// physics::kick: v + (g + f (1/m)) h.
__device__ __forceinline__ real3 kick(real3 v, real3 g, real3 f, real m, real h) {
    return axpy3(v, axpy3(g, f, real(1) / m), h);
}

// physics::spin_kick: w + t (h / I).
__device__ __forceinline__ real3 spin_kick(real3 w, real3 t, real inertia, real h) { return axpy3(w, t, h / inertia); }

// physics::drift: x + v dt, positions in double.
__device__ __forceinline__ dvec3 drift(dvec3 x, real3 v, double dt) {
    return dv3(x.x + (double)v.x * dt, x.y + (double)v.y * dt, x.z + (double)v.z * dt);
}

// History partners (solver/src/dem/state.rs): one u32 per partner on the CPU and the GPU. A particle
// is its id; box wall w (0..6: x_min, x_max, y_min, ...) is DEM_WALL_PARTNER_BASE + w; mesh
// triangle g (global index: all meshes' triangles concatenated in mesh order) is
// DEM_MESH_PARTNER_BASE + g. Particle ids stay below DEM_MESH_PARTNER_BASE.
#define DEM_PARTNER_NONE 0xFFFFFFFFu        // state::PARTNER_NONE
#define DEM_MESH_PARTNER_BASE 0x80000000u   // state::MESH_PARTNER_BASE
#define DEM_WALL_PARTNER_BASE 0xFFFFFFF0u   // state::WALL_PARTNER_BASE
__device__ __forceinline__ unsigned wall_partner(unsigned wall) { return DEM_WALL_PARTNER_BASE + wall; }
__device__ __forceinline__ unsigned triangle_partner(unsigned tri) { return DEM_MESH_PARTNER_BASE + tri; }
__device__ __forceinline__ bool is_particle_partner(unsigned partner) { return partner < DEM_MESH_PARTNER_BASE; }
// state::owns_pair
__device__ __forceinline__ bool owns_pair(unsigned id, unsigned other) {
    return ((id ^ other) & 1u) ? id < other : id > other;
}
// state::OWNER_DIRECTION: pairs-once rows with owner keys (DEM_OWNER_KEYS) give a pair to the
// particle whose position lies further against this direction (mostly down, tilted off the axes
// so that no lattice row lies across it).
#define DEM_OWNER_DIR_X 0.0123
#define DEM_OWNER_DIR_Y 0.0347
#define DEM_OWNER_DIR_Z (-1.0)
// state::owner_key: the position's coordinate along the owner direction as an f32 whose bits
// order as the floats do (a negative float's bits inverted, a positive one's sign bit set).
__device__ __forceinline__ unsigned owner_key(double x, double y, double z) {
    const double s = x * DEM_OWNER_DIR_X + y * DEM_OWNER_DIR_Y + z * DEM_OWNER_DIR_Z;
    const unsigned b = __float_as_uint((float)s);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
// state::owns_pair_keyed: the smaller key keeps the pair (the particle higher up keeps its
// contacts with those below it), equal keys by the ids (owns_pair).
__device__ __forceinline__ bool owns_pair_keyed(unsigned key, unsigned id, unsigned other_key, unsigned other) {
    return key != other_key ? key < other_key : owns_pair(id, other);
}
