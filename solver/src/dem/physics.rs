//! DEM contact physics: every formula exactly once, as small pure functions on plain structs.
//!
//! Units are SI throughout (m, kg, s, N, Pa). Each function says where its formula comes from.
//! The functions take and return plain `f64`/[`V3`] values and `#[repr(C)]` structs so that the
//! CUDA twin in `kernels/` can carry the same names and argument order one-to-one
//! (`__device__ double linear_normal_force(double kn, double cn, double delta, double delta_dot)`).
//!
//! Sign conventions, used by every contact (particle-particle, particle-wall, particle-triangle):
//! * `n` is the unit normal pointing from particle `i` towards its partner,
//! * `delta > 0` is the overlap,
//! * `v_rel` is the velocity of `i`'s contact point minus the partner's contact point velocity,
//!   so `delta_dot = dot(v_rel, n) > 0` means approach,
//! * the scalar normal force `fn` is positive when repulsive; the force on `i` is `-fn * n`.

use crate::core::vec3::{self, V3};
use serde::{Deserialize, Serialize};
use std::f64::consts::PI;

/// Which normal/tangential force law is used.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ContactModel {
    /// Linear spring-dashpot (Cundall & Strack 1979) with a Coulomb-limited tangential spring.
    Linear = 0,
    /// Hertz normal force and Mindlin (no-slip) tangential stiffness, Tsuji-type damping.
    HertzMindlin = 1,
}

/// Material parameters of one contact pair, computed once on the host from the two materials.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MaterialPair {
    /// Linear model: normal stiffness [N/m].
    pub kn: f64,
    /// Linear model: tangential stiffness [N/m].
    pub kt: f64,
    /// Hertz-Mindlin: effective Young's modulus E* [Pa].
    pub e_star: f64,
    /// Hertz-Mindlin: effective shear modulus G* [Pa].
    pub g_star: f64,
    /// Damping ratio from the coefficient of restitution, see [`damping_ratio_from_restitution`] [-].
    pub beta: f64,
    /// Sliding (Coulomb) friction coefficient [-].
    pub mu_s: f64,
    /// Rolling friction coefficient (constant-torque model) [-].
    pub mu_r: f64,
}

/// Geometry and relative motion of one contact, seen from particle `i`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ContactKinematics {
    /// Unit normal from `i` towards the partner [-].
    pub n: V3,
    /// Overlap [m], > 0.
    pub delta: f64,
    /// Contact point velocity of `i` minus that of the partner [m/s].
    pub v_rel: V3,
    /// Angular velocity of `i` minus that of the partner [rad/s].
    pub omega_rel: V3,
    /// Effective radius R* [m] ([`effective_radius`]; the particle radius against a wall).
    pub r_eff: f64,
    /// Effective mass m* [kg] ([`effective_mass`]; the particle mass against a wall).
    pub m_eff: f64,
    /// Effective moment of inertia for the rolling-torque limiter [kg m^2].
    pub i_eff: f64,
}

/// History carried by a contact from step to step: the tangential spring.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ContactState {
    /// Tangential spring displacement xi [m], kept in the current tangent plane.
    pub xi: V3,
}

/// Result of one contact evaluation, acting on particle `i`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ContactForce {
    /// Normal + tangential force on `i` [N].
    pub force: V3,
    /// Tangential force on `i` alone [N] (the caller forms the torque `(r_i n) x ft`).
    pub tangential: V3,
    /// Rolling resistance torque on `i` [N m].
    pub rolling_torque: V3,
    /// Scalar normal force, positive when repulsive [N].
    pub normal: f64,
    /// True when the Coulomb limit was reached this step.
    pub sliding: bool,
}

// ---------------------------------------------------------------------------------------------
// Effective quantities
// ---------------------------------------------------------------------------------------------

/// Mass of a solid sphere, m = 4/3 pi r^3 rho [kg].
#[inline]
pub fn sphere_mass(radius: f64, density: f64) -> f64 {
    4.0 / 3.0 * PI * radius * radius * radius * density
}

/// Moment of inertia of a solid sphere about its centre, I = 2/5 m r^2 [kg m^2].
#[inline]
pub fn sphere_inertia(mass: f64, radius: f64) -> f64 {
    0.4 * mass * radius * radius
}

/// Effective (reduced) mass m* = m1 m2 / (m1 + m2) [kg] (Hertz 1882; e.g. Johnson, "Contact
/// Mechanics" 1985, sec. 11.1). Against a wall (infinite mass) m* = m1: call with `m2 = INFINITY`.
#[inline]
pub fn effective_mass(m1: f64, m2: f64) -> f64 {
    if m2.is_infinite() {
        m1
    } else {
        m1 * m2 / (m1 + m2)
    }
}

/// Effective moment of inertia I* = I1 I2 / (I1 + I2) [kg m^2], the inertia the rolling-torque
/// limiter of [`rolling_torque`] may stop within one step (by analogy with [`effective_mass`];
/// against a wall or mesh the particle's own inertia).
#[inline]
pub fn effective_inertia(i1: f64, i2: f64) -> f64 {
    i1 * i2 / (i1 + i2)
}

/// Effective radius R* = r1 r2 / (r1 + r2) [m] (Johnson 1985, eq. 4.21). Against a plane
/// (infinite radius) R* = r1: call with `r2 = INFINITY`.
#[inline]
pub fn effective_radius(r1: f64, r2: f64) -> f64 {
    if r2.is_infinite() {
        r1
    } else {
        r1 * r2 / (r1 + r2)
    }
}

/// Effective Young's modulus 1/E* = (1 - nu1^2)/E1 + (1 - nu2^2)/E2 [Pa] (Johnson 1985, eq. 4.22).
#[inline]
pub fn effective_young_modulus(e1: f64, nu1: f64, e2: f64, nu2: f64) -> f64 {
    1.0 / ((1.0 - nu1 * nu1) / e1 + (1.0 - nu2 * nu2) / e2)
}

/// Effective shear modulus 1/G* = 2(2 - nu1)(1 + nu1)/E1 + 2(2 - nu2)(1 + nu2)/E2 [Pa]
/// (Mindlin 1949 with G = E / (2(1 + nu)); the form used by EDEM and LIGGGHTS `hertz/mindlin`).
#[inline]
pub fn effective_shear_modulus(e1: f64, nu1: f64, e2: f64, nu2: f64) -> f64 {
    1.0 / (2.0 * (2.0 - nu1) * (1.0 + nu1) / e1 + 2.0 * (2.0 - nu2) * (1.0 + nu2) / e2)
}

/// Pair stiffness of two linear springs given per material: the harmonic mean 2 k1 k2 / (k1 + k2)
/// [N/m], so that two equal materials keep their stiffness k (a convention of this code, not a
/// series connection, which would give k/2).
#[inline]
pub fn combine_stiffness(k1: f64, k2: f64) -> f64 {
    2.0 * k1 * k2 / (k1 + k2)
}

/// Linear stiffness derived from Young's modulus when no stiffness is given: the Hertz tangent
/// stiffness dF/d(delta) = 2 E* sqrt(R* delta) at the reference overlap delta = 1% of R*, i.e.
/// k = 0.2 E* R* [N/m]. A convention of this code (documented in the case file reference).
#[inline]
pub fn linear_stiffness_from_modulus(e_star: f64, r_eff: f64) -> f64 {
    0.2 * e_star * r_eff
}

/// Damping ratio beta = -ln e / sqrt(pi^2 + ln^2 e) for a coefficient of restitution 0 < e <= 1
/// [-]. For the linear spring-dashpot the damping coefficient c = 2 beta sqrt(k m*) reproduces
/// e exactly (Ting & Corkum 1992; Schäfer, Dippel & Wolf 1996, J. Phys. I France 6, eq. (10)).
#[inline]
pub fn damping_ratio_from_restitution(e: f64) -> f64 {
    let ln_e = e.ln();
    -ln_e / (PI * PI + ln_e * ln_e).sqrt()
}

// ---------------------------------------------------------------------------------------------
// Linear spring-dashpot
// ---------------------------------------------------------------------------------------------

/// Linear dashpot coefficient c = 2 beta sqrt(k m*) [N s/m] (Schäfer et al. 1996, eq. (10)).
#[inline]
pub fn linear_damping_coefficient(k: f64, m_eff: f64, beta: f64) -> f64 {
    2.0 * beta * (k * m_eff).sqrt()
}

/// Linear spring-dashpot normal force fn = kn delta + cn delta_dot [N] (Cundall & Strack 1979).
/// Not clamped at zero: the small attraction at the end of a damped contact is what makes the
/// restitution equal to `e` exactly (Schäfer et al. 1996, sec. 3).
#[inline]
pub fn linear_normal_force(kn: f64, cn: f64, delta: f64, delta_dot: f64) -> f64 {
    kn * delta + cn * delta_dot
}

/// Duration of a linear spring-dashpot contact t = pi / sqrt(k/m* - (c / 2m*)^2) [s]
/// (damped half-period; Schäfer et al. 1996, eq. (9)).
#[inline]
pub fn linear_contact_time(kn: f64, cn: f64, m_eff: f64) -> f64 {
    let w0 = kn / m_eff;
    let g = cn / (2.0 * m_eff);
    PI / (w0 - g * g).sqrt()
}

/// Elastic energy of a linear spring 1/2 k x^2 [J].
#[inline]
pub fn linear_spring_energy(k: f64, x: f64) -> f64 {
    0.5 * k * x * x
}

// ---------------------------------------------------------------------------------------------
// Hertz-Mindlin
// ---------------------------------------------------------------------------------------------

/// Hertz normal contact stiffness S_n = dF/d(delta) = 2 E* sqrt(R* delta) [N/m]
/// (Johnson 1985, eq. 4.23 differentiated).
#[inline]
pub fn hertz_normal_stiffness(e_star: f64, r_eff: f64, delta: f64) -> f64 {
    2.0 * e_star * (r_eff * delta).sqrt()
}

/// Mindlin tangential stiffness S_t = 8 G* sqrt(R* delta) [N/m] (Mindlin 1949; as in Tsuji,
/// Tanaka & Ishida 1992 and EDEM's Hertz-Mindlin no-slip model).
#[inline]
pub fn mindlin_tangential_stiffness(g_star: f64, r_eff: f64, delta: f64) -> f64 {
    8.0 * g_star * (r_eff * delta).sqrt()
}

/// Hertz-type dashpot coefficient c = 2 sqrt(5/6) beta sqrt(S m*) [N s/m], applied with S = S_n
/// (normal) and S = S_t (tangential). Tsuji, Tanaka & Ishida 1992 (Powder Technol. 71, eq. (12)
/// form, damping proportional to delta^(1/4)); the sqrt(5/6) factor and the beta relation are
/// those of the EDEM/LIGGGHTS Hertz-Mindlin model, for which Antypov & Elliott 2011
/// (EPL 94, 50004) give the resulting restitution: close to `e` but not exact.
#[inline]
pub fn hertz_damping_coefficient(stiffness: f64, m_eff: f64, beta: f64) -> f64 {
    2.0 * (5.0f64 / 6.0).sqrt() * beta * (stiffness * m_eff).sqrt()
}

/// Hertz normal force fn = 4/3 E* sqrt(R*) delta^(3/2) + c_n delta_dot [N]
/// (Johnson 1985, eq. 4.23, plus [`hertz_damping_coefficient`] with S_n). Not clamped at zero.
#[inline]
pub fn hertz_normal_force(
    e_star: f64,
    r_eff: f64,
    m_eff: f64,
    beta: f64,
    delta: f64,
    delta_dot: f64,
) -> f64 {
    let elastic = 4.0 / 3.0 * e_star * r_eff.sqrt() * delta * delta.sqrt();
    let sn = hertz_normal_stiffness(e_star, r_eff, delta);
    elastic + hertz_damping_coefficient(sn, m_eff, beta) * delta_dot
}

/// Elastic energy stored in a Hertz contact, integral of 4/3 E* sqrt(R*) d^(3/2) = 8/15 E*
/// sqrt(R*) delta^(5/2) [J].
#[inline]
pub fn hertz_elastic_energy(e_star: f64, r_eff: f64, delta: f64) -> f64 {
    8.0 / 15.0 * e_star * r_eff.sqrt() * delta * delta * delta.sqrt()
}

/// Duration of an elastic Hertz impact at normal speed v: t = 2.868 (m*^2 / (R* E*^2 v))^(1/5)
/// [s] (Hertz 1882; Johnson 1985, eq. 11.24 with k = 4/3 E* sqrt(R*)).
#[inline]
pub fn hertz_contact_time(e_star: f64, r_eff: f64, m_eff: f64, v: f64) -> f64 {
    2.868 * (m_eff * m_eff / (r_eff * e_star * e_star * v)).powf(0.2)
}

/// Rayleigh wave time T_R = pi r sqrt(rho / G) / (0.1631 nu + 0.8766) [s], with G = E / (2(1+nu))
/// (Ning & Ghadiri 2006; the criterion used by EDEM: dt a fraction of T_R).
#[inline]
pub fn rayleigh_time(radius: f64, density: f64, young: f64, poisson: f64) -> f64 {
    let g = young / (2.0 * (1.0 + poisson));
    PI * radius * (density / g).sqrt() / (0.1631 * poisson + 0.8766)
}

// ---------------------------------------------------------------------------------------------
// Tangential spring, rolling resistance
// ---------------------------------------------------------------------------------------------

/// Rotates the stored tangential spring into the current tangent plane, keeping its length
/// (Luding 2008, Granular Matter 10:235, sec. 2.2.2; LIGGGHTS `tangential_history`): the part
/// along `n` is removed and the remainder rescaled to the old length.
#[inline]
pub fn project_spring(xi: V3, n: V3) -> V3 {
    let old = vec3::norm(xi);
    if old == 0.0 {
        return vec3::ZERO;
    }
    let p = vec3::axpy(xi, n, -vec3::dot(xi, n));
    let len = vec3::norm(p);
    if len > 0.0 {
        vec3::scale(p, old / len)
    } else {
        vec3::ZERO
    }
}

/// Tangential spring-dashpot law of one contact: stiffness, damping and friction coefficient.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TangentialLaw {
    /// Tangential stiffness [N/m].
    pub kt: f64,
    /// Tangential damping coefficient [N s/m].
    pub ct: f64,
    /// Sliding friction coefficient [-].
    pub mu: f64,
}

/// Tangential force of a stored spring `xi` [N]: the spring-dashpot `-kt xi - ct v_t` of a
/// sticking contact (Luding 2008, eq. (3)), `-kt xi` of a sliding one, whose spring
/// [`tangential_force`] reset to carry the whole Coulomb force. Every contact's force is this
/// function of what [`tangential_force`] stores, so a worker that holds only the stored spring
/// and whether it slid (the GPU's pairs-once history keeps a pair's with one of its particles)
/// computes the force the other computed.
#[inline]
pub fn spring_force(xi: V3, v_t: V3, law: TangentialLaw, sliding: bool) -> V3 {
    if sliding {
        vec3::scale(xi, -law.kt)
    } else {
        vec3::sub(vec3::scale(xi, -law.kt), vec3::scale(v_t, law.ct))
    }
}

/// Tangential force with a Coulomb limit and history [N] (Cundall & Strack 1979; Luding 2008,
/// eqs. (18)-(21)). The spring is first projected into the tangent plane
/// ([`project_spring`]), then advanced by `v_t dt`; the trial force is [`spring_force`]. When
/// |trial| > mu fn the trial is scaled onto the Coulomb cone (ft) and the spring reset to carry
/// it, xi = -ft / kt, as LIGGGHTS does, and the force is that spring's sliding
/// [`spring_force`], -kt xi (ft to rounding). Luding 2008, eq. (21), resets to -(ft + ct v_t) / kt,
/// which keeps the damping part in the spring too: tried in session 33 and dropped, since a fast
/// slide then stores a spring mostly of damping (ct v_t can be hundreds of times mu fn against a
/// drum wall) and its force, recomputed as a difference of two large terms, loses f32 digits
/// (the f32 drum drifted 40 times further from f64). With kt = 0 (then ct = 0 too, for every law
/// a case builds) there is no spring and the force is ft. Returns (force on i, sliding).
#[inline]
pub fn tangential_force(
    state: &mut ContactState,
    n: V3,
    v_t: V3,
    law: TangentialLaw,
    fn_: f64,
    dt: f64,
) -> (V3, bool) {
    let TangentialLaw { kt, mu, .. } = law;
    let xi = vec3::axpy(project_spring(state.xi, n), v_t, dt);
    let trial = spring_force(xi, v_t, law, false);
    let limit = mu * fn_.max(0.0);
    let mag = vec3::norm(trial);
    if mag > limit {
        let ft = if mag > 0.0 {
            vec3::scale(trial, limit / mag)
        } else {
            vec3::ZERO
        };
        if kt > 0.0 {
            state.xi = vec3::scale(ft, -1.0 / kt);
            (spring_force(state.xi, v_t, law, true), true)
        } else {
            state.xi = vec3::ZERO;
            (ft, true)
        }
    } else {
        state.xi = xi;
        (trial, false)
    }
}

/// Rolling resistance, constant directional torque model ("model A" of Ai, Chen, Rotter & Ooi
/// 2011, Powder Technol. 206, eq. (8)): M_r = -mu_r R* fn omega_rel / |omega_rel| [N m].
///
/// Radius convention: the lever arm `r_eff` is the effective radius R* = r_i r_j / (r_i + r_j)
/// (r/2 between equal spheres; r against a wall), as in Ai et al. Codes that use the particle's
/// own radius (EDEM, many papers) apply twice this torque between equal spheres for the same
/// mu_r. A case takes their value as it is with `contact_model.rolling_radius = "particle"`: the
/// pair table then carries mu_r (r_i + r_j) / r_j, so that mu_r' R* = mu_r r_i and this one
/// formula serves both ([`crate::case::RollingRadius`]).
/// To keep the torque from reversing the relative rotation within one step (the chatter that
/// model A is known for, Ai et al. sec. 2.1), its magnitude is limited to i_eff |omega_rel| / dt.
#[inline]
pub fn rolling_torque(omega_rel: V3, mu_r: f64, r_eff: f64, fn_: f64, i_eff: f64, dt: f64) -> V3 {
    let w = vec3::norm(omega_rel);
    if w == 0.0 || mu_r == 0.0 {
        return vec3::ZERO;
    }
    let mag = (mu_r * r_eff * fn_.max(0.0)).min(i_eff * w / dt);
    vec3::scale(omega_rel, -mag / w)
}

/// The laws of one contact: its tangential relative velocity v_t [m/s], normal force fn [N] of
/// the chosen `model`, and its tangential law (stiffness, damping, friction).
#[inline]
fn contact_laws(
    model: ContactModel,
    pair: &MaterialPair,
    k: &ContactKinematics,
) -> (V3, f64, TangentialLaw) {
    let delta_dot = vec3::dot(k.v_rel, k.n);
    let v_t = vec3::axpy(k.v_rel, k.n, -delta_dot);
    let (fn_, kt, ct) = match model {
        ContactModel::Linear => {
            let cn = linear_damping_coefficient(pair.kn, k.m_eff, pair.beta);
            let ct = linear_damping_coefficient(pair.kt, k.m_eff, pair.beta);
            (
                linear_normal_force(pair.kn, cn, k.delta, delta_dot),
                pair.kt,
                ct,
            )
        }
        ContactModel::HertzMindlin => {
            let st = mindlin_tangential_stiffness(pair.g_star, k.r_eff, k.delta);
            let ct = hertz_damping_coefficient(st, k.m_eff, pair.beta);
            (
                hertz_normal_force(pair.e_star, k.r_eff, k.m_eff, pair.beta, k.delta, delta_dot),
                st,
                ct,
            )
        }
    };
    let law = TangentialLaw {
        kt,
        ct,
        mu: pair.mu_s,
    };
    (v_t, fn_, law)
}

/// Evaluates one contact: normal force of the chosen `model`, tangential spring with Coulomb limit
/// (updating `state`), rolling torque. Pure apart from `state`.
#[inline]
pub fn contact_force(
    model: ContactModel,
    pair: &MaterialPair,
    k: &ContactKinematics,
    state: &mut ContactState,
    dt: f64,
) -> ContactForce {
    let (v_t, fn_, law) = contact_laws(model, pair, k);
    let (ft, sliding) = tangential_force(state, k.n, v_t, law, fn_, dt);
    contact_result(pair, k, fn_, ft, sliding, dt)
}

/// A contact's forces from its normal force `fn_` and tangential force `ft`: the total on i and
/// the rolling torque.
#[inline]
fn contact_result(
    pair: &MaterialPair,
    k: &ContactKinematics,
    fn_: f64,
    ft: V3,
    sliding: bool,
    dt: f64,
) -> ContactForce {
    ContactForce {
        force: vec3::axpy(ft, k.n, -fn_),
        tangential: ft,
        rolling_torque: rolling_torque(k.omega_rel, pair.mu_r, k.r_eff, fn_, k.i_eff, dt),
        normal: fn_,
        sliding,
    }
}

/// The force [`contact_force`] returned, from the spring it stored (`xi`, already updated this
/// step) and whether the contact slid, instead of the old spring: the tangential force is the
/// stored spring's [`spring_force`]. Equal bits whenever kt > 0, and with kt = 0 too where
/// ct = 0 (every law a case builds): the GPU's pairs-once history computes the force of the
/// pair's second particle this way.
#[inline]
pub fn contact_force_from_spring(
    model: ContactModel,
    pair: &MaterialPair,
    k: &ContactKinematics,
    xi: V3,
    sliding: bool,
    dt: f64,
) -> ContactForce {
    let (v_t, fn_, law) = contact_laws(model, pair, k);
    let ft = spring_force(xi, v_t, law, sliding);
    contact_result(pair, k, fn_, ft, sliding, dt)
}

/// Elastic energy stored in a contact (normal + tangential spring) [J], for energy bookkeeping.
pub fn contact_elastic_energy(
    model: ContactModel,
    pair: &MaterialPair,
    r_eff: f64,
    delta: f64,
    state: &ContactState,
) -> f64 {
    let xi2 = vec3::norm2(state.xi);
    match model {
        ContactModel::Linear => linear_spring_energy(pair.kn, delta) + 0.5 * pair.kt * xi2,
        ContactModel::HertzMindlin => {
            hertz_elastic_energy(pair.e_star, r_eff, delta)
                + 0.5 * mindlin_tangential_stiffness(pair.g_star, r_eff, delta) * xi2
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Contact-point velocities
// ---------------------------------------------------------------------------------------------

/// Relative velocity of the contact point of particle `i` against particle `j` [m/s]:
/// `(v_i + w_i x (r_i n)) - (v_j + w_j x (-r_j n)) = v_i - v_j + (r_i w_i + r_j w_j) x n`,
/// with `n` the unit normal from `i` towards `j` and the contact point on each surface
/// (the lever arm is the radius; the overlap is neglected, as in most DEM codes).
#[inline]
pub fn particle_contact_velocity(vi: V3, wi: V3, ri: f64, vj: V3, wj: V3, rj: f64, n: V3) -> V3 {
    let spin = vec3::add(vec3::scale(wi, ri), vec3::scale(wj, rj));
    vec3::add(vec3::sub(vi, vj), vec3::cross(spin, n))
}

/// Relative velocity of the contact point of particle `i` against a surface (box wall or mesh
/// triangle) moving with `v_wall` at that point [m/s]: `v_i + w_i x (r_i n) - v_wall`
/// (`v_wall`: `geometry::BodyTransform::wall_velocity`, zero for the box).
#[inline]
pub fn surface_contact_velocity(vi: V3, wi: V3, ri: f64, n: V3, v_wall: V3) -> V3 {
    vec3::sub(vec3::add(vi, vec3::cross(wi, vec3::scale(n, ri))), v_wall)
}

// ---------------------------------------------------------------------------------------------
// Time integration (the building blocks of both integrators)
// ---------------------------------------------------------------------------------------------
//
// Symplectic Euler:  v = kick(v, g, F, m, dt); x = drift(x, v, dt); w = spin_kick(w, T, I, dt).
// Velocity Verlet:   v = kick(.., dt/2) and w = spin_kick(.., dt/2) with the old forces,
//                    x = drift(x, v, dt), new forces, then the closing half kicks.

/// Velocity after a kick of length `h` [s] under gravity `g` [m/s^2] and force `f` [N] on mass
/// `m` [kg]: `v + (g + f (1/m)) h` (the acceleration is formed first, as written).
#[inline]
pub fn kick(v: V3, g: V3, f: V3, m: f64, h: f64) -> V3 {
    vec3::axpy(v, vec3::axpy(g, f, 1.0 / m), h)
}

/// Angular velocity after a kick of length `h` [s] under torque `t` [N m] on moment of inertia
/// `inertia` [kg m^2]: `w + t (h / I)`.
#[inline]
pub fn spin_kick(w: V3, t: V3, inertia: f64, h: f64) -> V3 {
    vec3::axpy(w, t, h / inertia)
}

/// Position after drifting with velocity `v` for `dt` [s]: `x + v dt`.
#[inline]
pub fn drift(x: V3, v: V3, dt: f64) -> V3 {
    vec3::axpy(x, v, dt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn damping_ratio_limits() {
        assert_eq!(damping_ratio_from_restitution(1.0), 0.0);
        let b = damping_ratio_from_restitution(1e-12);
        assert!(b > 0.99 && b < 1.0);
    }

    #[test]
    fn restitution_identity_for_linear_dashpot() {
        // e = exp(-pi gamma / omega_d) with gamma = c / 2m, omega_d = sqrt(k/m - gamma^2).
        for e in [0.1, 0.5, 0.9] {
            let (k, m) = (1e5, 0.3);
            let c = linear_damping_coefficient(k, m, damping_ratio_from_restitution(e));
            let g = c / (2.0 * m);
            let wd = (k / m - g * g).sqrt();
            assert!(((-PI * g / wd).exp() - e).abs() < 1e-12);
        }
    }

    #[test]
    fn coulomb_limit_and_spring_reset() {
        let mut s = ContactState::default();
        let n = [0.0, 0.0, 1.0];
        let (f, sliding) = tangential_force(
            &mut s,
            n,
            [1.0, 0.0, 0.0],
            TangentialLaw {
                kt: 1000.0,
                ct: 0.0,
                mu: 0.5,
            },
            10.0,
            0.1,
        );
        assert!(sliding);
        assert!((vec3::norm(f) - 5.0).abs() < 1e-12);
        assert!((s.xi[0] - 5.0 / 1000.0).abs() < 1e-15);
    }

    #[test]
    fn a_contact_force_is_its_stored_spring_force() {
        // Sliding: the spring is reset to carry the Coulomb force, mu fn (to rounding), and
        // nothing of the damping; the force is the stored spring's.
        let law = TangentialLaw {
            kt: 1000.0,
            ct: 3.0,
            mu: 0.5,
        };
        let (n, v_t) = ([0.0, 0.0, 1.0], [1.0, 0.5, 0.0]);
        let mut s = ContactState::default();
        let (f, sliding) = tangential_force(&mut s, n, v_t, law, 10.0, 0.1);
        assert!(sliding);
        assert!((vec3::norm(f) - 5.0).abs() < 1e-12);
        assert_eq!(f, spring_force(s.xi, v_t, law, true));
        assert!(vec3::norm(vec3::add(vec3::scale(s.xi, law.kt), f)) < 1e-12);
        // Sticking: the spring-dashpot force of the advanced spring.
        let mut s = ContactState::default();
        let (f, sliding) = tangential_force(&mut s, n, [1e-3, 0.0, 0.0], law, 10.0, 1e-3);
        assert!(!sliding);
        assert_eq!(f, spring_force(s.xi, [1e-3, 0.0, 0.0], law, false));
    }

    #[test]
    fn a_pair_seen_from_its_other_side_is_the_exact_mirror() {
        // The GPU keeps a pair's spring once: the other particle reads it negated. That gives
        // its own bits only if every step of the spring's update is odd in (xi, n, v_rel).
        let pair = MaterialPair {
            kn: 2e5,
            kt: 5e4,
            beta: 0.3,
            mu_s: 0.4,
            mu_r: 0.05,
            e_star: 1e8,
            g_star: 4e7,
        };
        let neg = |v: V3| [-v[0], -v[1], -v[2]];
        let mut rng = crate::core::rng::SplitMix64::new(7);
        for model in [ContactModel::Linear, ContactModel::HertzMindlin] {
            let mut slid = 0;
            let mut si = ContactState::default();
            let mut sj = ContactState::default();
            for step in 0..2000 {
                let mut u = || rng.range(-1.0, 1.0);
                let n = vec3::normalize_or_zero([u(), u(), u()]);
                // Slow steps among fast ones, so that contacts stick as well as slide.
                let sc = if step % 3 == 0 { 1.0 } else { 1e-4 };
                let mut v = || [sc * u(), sc * u(), sc * u()];
                let (vi, wi, vj, wj) = (v(), v(), v(), v());
                let (ri, rj) = (1e-3, 1.3e-3);
                let ki = ContactKinematics {
                    n,
                    delta: 1e-5 * (1.0 + u()),
                    v_rel: particle_contact_velocity(vi, wi, ri, vj, wj, rj, n),
                    omega_rel: vec3::sub(wi, wj),
                    r_eff: effective_radius(ri, rj),
                    m_eff: effective_mass(1e-5, 2e-5),
                    i_eff: effective_inertia(1e-12, 3e-12),
                };
                let kj = ContactKinematics {
                    n: neg(n),
                    v_rel: particle_contact_velocity(vj, wj, rj, vi, wi, ri, neg(n)),
                    omega_rel: vec3::sub(wj, wi),
                    r_eff: effective_radius(rj, ri),
                    m_eff: effective_mass(2e-5, 1e-5),
                    i_eff: effective_inertia(3e-12, 1e-12),
                    ..ki
                };
                let fi = contact_force(model, &pair, &ki, &mut si, 1e-5);
                let fj = contact_force(model, &pair, &kj, &mut sj, 1e-5);
                assert_eq!(sj.xi, neg(si.xi), "{model:?} step {step}");
                // The other side's force from the stored spring alone, negated.
                let from =
                    contact_force_from_spring(model, &pair, &kj, neg(si.xi), fi.sliding, 1e-5);
                assert_eq!(from.force, fj.force, "{model:?} step {step}");
                assert_eq!(from.rolling_torque, fj.rolling_torque);
                assert_eq!(fj.force, neg(fi.force), "{model:?} step {step}");
                assert_eq!(fj.rolling_torque, neg(fi.rolling_torque));
                assert_eq!(fj.sliding, fi.sliding);
                slid += usize::from(fi.sliding);
            }
            // Both branches of the Coulomb limit were taken.
            assert!(
                (200..1800).contains(&slid),
                "{model:?}: {slid} of 2000 steps slid"
            );
        }
    }

    #[test]
    fn projection_keeps_length_and_is_tangent() {
        let xi = project_spring([1.0, 0.0, 0.5], [0.0, 0.0, 1.0]);
        assert!((vec3::norm(xi) - 1.25f64.sqrt()).abs() < 1e-14);
        assert_eq!(xi[2], 0.0);
    }

    #[test]
    fn rolling_torque_opposes_and_is_limited() {
        let t = rolling_torque([0.0, 2.0, 0.0], 0.1, 0.01, 100.0, 1e-6, 1e-4);
        assert!(t[1] < 0.0);
        assert!(t[1].abs() <= 1e-6 * 2.0 / 1e-4 + 1e-15);
    }
}
