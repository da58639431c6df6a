//! Every physics formula against its CUDA twin on random inputs, in f64: the functions of
//! `solver::dem::physics`, the history partner encoding of `solver::dem::state` and
//! `BodyTransform::wall_velocity`, against `kernels/src/cuda/parity.cu` (which calls the twins
//! in `physics.cuh` and `mesh.cuh`), compiled as the parity mode compiles (`-DDEM_DOUBLE`, no
//! FMA contraction). Every output must have the same bits. Runs where an NVIDIA driver loads;
//! elsewhere (CI) it prints "skipped: no GPU" and passes.

#[path = "support/parity.rs"]
mod parity;

use cudarc::driver::{LaunchConfig, PushKernelArg};
use solver::core::geometry::BodyTransform;
use solver::core::rng::SplitMix64;
use solver::core::vec3::{self, V3};
use solver::dem::cuda;
use solver::dem::physics::{self, ContactKinematics, ContactModel, ContactState, MaterialPair};
use solver::dem::state;

/// Doubles and words per case in and out (`PARITY_*` in parity.cu).
const IN: usize = 72;
const IN_U: usize = 3;
const OUT: usize = 84;
const OUT_U: usize = 6;
const CASES: usize = 200_000;

fn v3(a: &[f64], o: usize) -> V3 {
    [a[o], a[o + 1], a[o + 2]]
}

fn put3(o: &mut [f64], at: usize, v: V3) {
    o[at..at + 3].copy_from_slice(&v);
}

fn unit(rng: &mut SplitMix64) -> V3 {
    loop {
        let v = [
            rng.range(-1.0, 1.0),
            rng.range(-1.0, 1.0),
            rng.range(-1.0, 1.0),
        ];
        let n = vec3::norm(v);
        if n > 0.1 && n < 1.0 {
            return vec3::scale(v, 1.0 / n);
        }
    }
}

/// Random inputs of one case (offsets as parity.cu reads them). A few cases hit the branches:
/// zero spring, spring along the normal, zero relative rotation, no rolling friction, a
/// negative (tensile) normal force, no friction.
fn inputs(rng: &mut SplitMix64, a: &mut [f64], u: &mut [u32]) {
    let mut r = |lo: f64, hi: f64| rng.range(lo, hi);
    let vec = |s: f64, r: &mut dyn FnMut(f64, f64) -> f64| [r(-s, s), r(-s, s), r(-s, s)];
    a[0] = r(1e-9, 1e-2); // m1 [kg]
    a[1] = r(1e-9, 1e-2); // m2
    a[2] = r(1e-4, 1e-2); // r1 [m]
    a[3] = r(1e-4, 1e-2); // r2
    a[4] = r(1e-15, 1e-8); // i1 [kg m^2]
    a[5] = r(1e-15, 1e-8); // i2
    a[6] = r(1e2, 1e7); // k [N/m]
    a[7] = r(0.0, 1.5); // beta
    a[8] = r(1e-9, 1e-4); // delta [m]
    a[9] = r(-2.0, 2.0); // delta_dot [m/s]
    a[10] = r(1e6, 1e11); // e_star [Pa]
    a[11] = r(1e6, 1e11); // g_star
    let xi = vec(1e-5, &mut r);
    a[12..15].copy_from_slice(&xi);
    a[18..21].copy_from_slice(&vec(1.0, &mut r)); // v_t
    a[21] = r(0.0, 1e6); // kt
    a[22] = r(0.0, 10.0); // ct
    a[23] = r(0.0, 1.0); // mu
    a[24] = r(-1.0, 100.0); // fn [N]
    a[25] = r(1e-7, 1e-4); // dt [s]
    a[26..29].copy_from_slice(&vec(100.0, &mut r)); // omega_rel
    a[29] = r(0.0, 0.5); // mu_r
    for o in [30, 33, 36, 39, 42, 45, 48] {
        a[o..o + 3].copy_from_slice(&vec(10.0, &mut r)); // vi wi vj wj v_wall g f
    }
    a[51] = r(1e-8, 1e-4); // h
    for o in [52, 55, 58, 61, 64] {
        a[o..o + 3].copy_from_slice(&vec(2.0, &mut r)); // x, body v/omega/center, q
    }
    a[67] = r(1e2, 1e7); // kn
    a[68] = r(0.0, 10.0); // cn
    let n = unit(rng);
    a[15..18].copy_from_slice(&n);
    match rng.next_u64() % 8 {
        0 => a[12..15].fill(0.0),
        1 => {
            let s = rng.range(-1e-5, 1e-5);
            a[12..15].copy_from_slice(&vec3::scale(n, s));
        }
        2 => a[26..29].fill(0.0),
        3 => a[29] = 0.0,
        4 => a[24] = -a[24].abs(),
        5 => a[23] = 0.0,
        _ => {}
    }
    u[0] = (rng.next_u64() % 6) as u32;
    u[1] = (rng.next_u64() % state::MAX_TRIANGLES as u64) as u32;
    u[2] = rng.next_u64() as u32;
}

/// What parity.cu writes, computed by the Rust functions.
fn expected(a: &[f64], u: &[u32], o: &mut [f64], ou: &mut [u32]) {
    let (m1, m2, r1, r2, i1, i2) = (a[0], a[1], a[2], a[3], a[4], a[5]);
    let (k, beta, delta, delta_dot, e_star, g_star) = (a[6], a[7], a[8], a[9], a[10], a[11]);
    let (xi, n, v_t) = (v3(a, 12), v3(a, 15), v3(a, 18));
    let (kt, ct, mu, fn_, dt) = (a[21], a[22], a[23], a[24], a[25]);
    let (omega_rel, mu_r) = (v3(a, 26), a[29]);
    let (vi, wi, vj, wj, v_wall) = (v3(a, 30), v3(a, 33), v3(a, 36), v3(a, 39), v3(a, 42));
    let (g, f, h) = (v3(a, 45), v3(a, 48), a[51]);
    let pair = MaterialPair {
        kn: a[67],
        kt,
        e_star,
        g_star,
        beta,
        mu_s: mu,
        mu_r,
    };
    let cn = a[68];
    o[0] = physics::effective_mass(m1, m2);
    o[1] = physics::effective_radius(r1, r2);
    o[2] = physics::effective_inertia(i1, i2);
    o[3] = physics::linear_damping_coefficient(k, m1, beta);
    o[4] = physics::linear_normal_force(pair.kn, cn, delta, delta_dot);
    o[5] = physics::hertz_normal_stiffness(e_star, r1, delta);
    o[6] = physics::mindlin_tangential_stiffness(g_star, r1, delta);
    o[7] = physics::hertz_damping_coefficient(k, m1, beta);
    o[8] = physics::hertz_normal_force(e_star, r1, m1, beta, delta, delta_dot);
    put3(o, 9, physics::project_spring(xi, n));
    let mut s = ContactState { xi };
    let law = physics::TangentialLaw { kt, ct, mu };
    let (ft, sliding) = physics::tangential_force(&mut s, n, v_t, law, fn_, dt);
    put3(o, 12, ft);
    put3(o, 15, s.xi);
    o[18] = if sliding { 1.0 } else { 0.0 };
    put3(
        o,
        19,
        physics::rolling_torque(omega_rel, mu_r, r1, fn_, i1, dt),
    );
    let kin = ContactKinematics {
        n,
        delta,
        v_rel: vi,
        omega_rel,
        r_eff: r1,
        m_eff: m1,
        i_eff: i1,
    };
    for (m, model) in [ContactModel::Linear, ContactModel::HertzMindlin]
        .into_iter()
        .enumerate()
    {
        let mut s = ContactState { xi };
        let cf = physics::contact_force(model, &pair, &kin, &mut s, dt);
        let at = 22 + 14 * m;
        put3(o, at, cf.force);
        put3(o, at + 3, cf.tangential);
        put3(o, at + 6, cf.rolling_torque);
        o[at + 9] = cf.normal;
        o[at + 10] = if cf.sliding { 1.0 } else { 0.0 };
        put3(o, at + 11, s.xi);
        // normal_force_only is contact_force's normal without the tangential part.
        o[50 + m] = cf.normal;
    }
    put3(
        o,
        52,
        physics::particle_contact_velocity(vi, wi, r1, vj, wj, r2, n),
    );
    put3(
        o,
        55,
        physics::surface_contact_velocity(vi, wi, r1, n, v_wall),
    );
    put3(o, 58, physics::kick(vi, g, f, m1, h));
    put3(o, 61, physics::spin_kick(wi, f, i1, h));
    put3(o, 64, physics::drift(v3(a, 52), vi, dt));
    let body = BodyTransform {
        rotation: [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0],
        translation: [0.0; 3],
        velocity: v3(a, 55),
        omega: v3(a, 58),
        center: v3(a, 61),
    };
    put3(o, 67, body.wall_velocity(v3(a, 64)));
    for (m, model) in [ContactModel::Linear, ContactModel::HertzMindlin]
        .into_iter()
        .enumerate()
    {
        o[70 + m] = physics::contact_elastic_energy(model, &pair, r1, delta, &ContactState { xi });
        // Model 0 as a sticking contact's, model 1 as a sliding one's.
        put3(
            o,
            75 + 3 * m,
            physics::contact_force_from_spring(model, &pair, &kin, xi, m == 1, dt).force,
        );
    }
    put3(o, 72, physics::spring_force(xi, v_t, law, false));
    put3(o, 81, physics::spring_force(xi, v_t, law, true));
    ou[0] = state::wall_partner(u[0]);
    ou[1] = state::triangle_partner(u[1]);
    ou[2] = u32::from(state::is_particle_partner(u[2]));
    ou[3] = u32::from(state::owns_pair(u[1], u[2]));
    let x = v3(a, 52);
    ou[4] = state::owner_key(x);
    // One case in eight with equal keys (decided by the ids).
    ou[5] = u32::from(state::owns_pair_keyed(u[0], u[1], u[0] ^ (u[2] & 7), u[2]));
}

/// Names of the outputs, for failure messages.
fn output_name(i: usize) -> &'static str {
    match i {
        0 => "effective_mass",
        1 => "effective_radius",
        2 => "effective_inertia",
        3 => "linear_damping_coefficient",
        4 => "linear_normal_force",
        5 => "hertz_normal_stiffness",
        6 => "mindlin_tangential_stiffness",
        7 => "hertz_damping_coefficient",
        8 => "hertz_normal_force",
        9..=11 => "project_spring",
        12..=18 => "tangential_force",
        19..=21 => "rolling_torque",
        22..=35 => "contact_force (linear)",
        36..=49 => "contact_force (Hertz-Mindlin)",
        50 | 51 => "normal_force_only",
        52..=54 => "particle_contact_velocity",
        55..=57 => "surface_contact_velocity",
        58..=60 => "kick",
        61..=63 => "spin_kick",
        64..=66 => "drift",
        67..=69 => "wall_velocity",
        70 | 71 => "contact_elastic_energy",
        72..=74 | 81..=83 => "spring_force",
        75..=80 => "contact_force_from_spring",
        _ => "padding",
    }
}

#[test]
fn every_physics_formula_has_the_bits_of_its_cuda_twin() {
    if cuda::driver::driver_available().is_err() {
        println!("skipped: no GPU");
        return;
    }
    let mut rng = SplitMix64::new(0x05ee_d0f7_a1e5);
    let mut a = vec![0.0f64; CASES * IN];
    let mut u = vec![0u32; CASES * IN_U];
    for (c, cu) in a.chunks_exact_mut(IN).zip(u.chunks_exact_mut(IN_U)) {
        inputs(&mut rng, c, cu);
    }

    let (f, stream) =
        parity::parity_kernel(kernels::parity_module_source(), kernels::PARITY_KERNEL);
    let d_in = stream.clone_htod(&a).expect("upload");
    let d_in_u = stream.clone_htod(&u).expect("upload");
    let mut d_out = stream.alloc_zeros::<f64>(CASES * OUT).expect("alloc");
    let mut d_out_u = stream.alloc_zeros::<u32>(CASES * OUT_U).expect("alloc");
    let n = CASES as u32;
    let mut b = stream.launch_builder(&f);
    b.arg(&d_in)
        .arg(&d_in_u)
        .arg(&mut d_out)
        .arg(&mut d_out_u)
        .arg(&n);
    // SAFETY: the kernel reads CASES * IN doubles and CASES * IN_U words and writes CASES * OUT
    // doubles and CASES * OUT_U words, the sizes allocated above; one thread per case.
    // 128 threads a block: the kernel holds every formula's results at once (many registers).
    let cfg = LaunchConfig {
        grid_dim: (n.div_ceil(128), 1, 1),
        block_dim: (128, 1, 1),
        shared_mem_bytes: 0,
    };
    unsafe { b.launch(cfg) }.expect("launch");
    let gpu = stream.clone_dtoh(&d_out).expect("download");
    let gpu_u = stream.clone_dtoh(&d_out_u).expect("download");

    let (mut want, mut want_u) = (vec![0.0; OUT], vec![0u32; OUT_U]);
    let mut mismatches = std::collections::BTreeMap::<&str, (usize, String)>::new();
    let mut sliding = [0usize; 2];
    for c in 0..CASES {
        expected(
            &a[c * IN..(c + 1) * IN],
            &u[c * IN_U..(c + 1) * IN_U],
            &mut want,
            &mut want_u,
        );
        sliding[0] += (want[18] == 1.0) as usize;
        sliding[1] += (want[18] == 0.0) as usize;
        let got = &gpu[c * OUT..(c + 1) * OUT];
        for i in 0..OUT {
            if got[i].to_bits() != want[i].to_bits() {
                let e = mismatches
                    .entry(output_name(i))
                    .or_insert((0, String::new()));
                if e.0 == 0 {
                    e.1 = format!("case {c}, output {i}: GPU {:e}, CPU {:e}", got[i], want[i]);
                }
                e.0 += 1;
            }
        }
        for i in 0..OUT_U {
            if gpu_u[c * OUT_U + i] != want_u[i] {
                let e = mismatches
                    .entry("history partner")
                    .or_insert((0, String::new()));
                if e.0 == 0 {
                    e.1 = format!(
                        "case {c}, word {i}: GPU {}, CPU {}",
                        gpu_u[c * OUT_U + i],
                        want_u[i]
                    );
                }
                e.0 += 1;
            }
        }
    }
    println!(
        "{CASES} random cases, {} sliding and {} sticking tangential contacts; {} formulas differ",
        sliding[0],
        sliding[1],
        mismatches.len()
    );
    assert!(
        sliding[0] > CASES / 10 && sliding[1] > CASES / 10,
        "the inputs must exercise both branches of the Coulomb limit: {sliding:?}"
    );
    assert!(
        mismatches.is_empty(),
        "CPU and GPU differ: {:#?}",
        mismatches
    );
}
