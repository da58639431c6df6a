//! Every SPH physics formula against its CUDA twin: the functions of `solver::sph::physics`
//! against `kernels/src/cuda/sph_parity.cu` (which calls the twins in `sph_physics.cuh`), compiled
//! as the parity mode compiles (`-DDEM_DOUBLE`, no FMA contraction), on random inputs in f64.
//! Every output must have the same bits. Runs where an NVIDIA driver loads; elsewhere (CI) it
//! prints "skipped: no GPU" and passes.
//!
//! Two checks run everywhere, without a GPU: every public function of `physics.rs` has a twin of
//! the same name with the same argument names in the same order, and the structs the twins share
//! have the same fields in the same order.

#[path = "support/parity.rs"]
mod parity;

use cudarc::driver::{LaunchConfig, PushKernelArg};
use solver::core::rng::SplitMix64;
use solver::core::vec3::{self, V3};
use solver::dem::cuda;
use solver::sph::physics::{self, DiffusionParams, FluidRates, FluidState, SphKernel, SphPair};

/// Doubles per case in and out (`SPH_PARITY_IN`, `SPH_PARITY_OUT` in sph_parity.cu).
const IN: usize = 71;
const OUT: usize = 97;
const CASES: usize = 200_000;

/// Input offsets (`SphParityIn` in sph_parity.cu).
mod inp {
    pub const R: usize = 0;
    pub const H: usize = 1;
    pub const R_IJ: usize = 2;
    pub const V_IJ: usize = 5;
    pub const RHO_I: usize = 8;
    pub const RHO_J: usize = 9;
    pub const P_I: usize = 10;
    pub const P_J: usize = 11;
    pub const C_I: usize = 12;
    pub const C_J: usize = 13;
    pub const M_J: usize = 14;
    pub const ALPHA: usize = 15;
    pub const DELTA: usize = 16;
    pub const C0: usize = 17;
    pub const RHO0: usize = 18;
    pub const B: usize = 19;
    pub const GRAVITY: usize = 20;
    pub const T: usize = 23;
    pub const P: usize = 24;
    pub const DEPTH: usize = 25;
    pub const G: usize = 26;
    pub const COEF: usize = 27;
    pub const ACC: usize = 28;
    pub const X: usize = 31;
    pub const V: usize = 34;
    pub const RHO: usize = 37;
    pub const DRHO: usize = 38;
    pub const DT: usize = 39;
    pub const CFL: usize = 40;
    pub const DT_F: usize = 41;
    pub const DT_CV: usize = 42;
    pub const RHO_HALF: usize = 43;
    pub const DRHO_HALF: usize = 44;
    pub const MU_MAX: usize = 45;
    pub const RHO_EOS: usize = 46;
    pub const KERNEL: usize = 47;
    /// A ghost node's sums: rho, grad (3), the matrix (16).
    pub const GHOST: usize = 48;
    pub const TO_PARTICLE: usize = 68;
}

/// Output offsets (`SphParityOut` in sph_parity.cu).
mod out {
    pub const WENDLAND_ALPHA: usize = 0;
    pub const WENDLAND: usize = 1;
    pub const WENDLAND_F: usize = 2;
    pub const CUBIC_ALPHA: usize = 3;
    pub const CUBIC: usize = 4;
    pub const CUBIC_F: usize = 5;
    pub const KERNEL_VALUE: usize = 6;
    pub const KERNEL_F: usize = 7;
    pub const KERNEL_GRADIENT: usize = 8;
    pub const TAIT_B: usize = 11;
    pub const TAIT_PRESSURE: usize = 12;
    pub const SEVENTH_ROOT: usize = 13;
    pub const TAIT_DENSITY: usize = 14;
    pub const SOUND_SPEED: usize = 15;
    pub const SOUND_SPEED_COEF: usize = 16;
    pub const HYDROSTATIC_PRESSURE: usize = 17;
    pub const HYDROSTATIC_DENSITY: usize = 18;
    pub const ETA2: usize = 19;
    pub const VISCOUS_MU: usize = 20;
    pub const VISCOSITY: usize = 21;
    pub const MOMENTUM: usize = 22;
    pub const CONTINUITY: usize = 25;
    pub const DIFFUSION: usize = 26;
    pub const DIFFUSION_MC: usize = 27;
    pub const HYDROSTATIC_DIFFERENCE: usize = 28;
    pub const DIFFUSION_FOURTAKAS: usize = 29;
    pub const FORCE_DT: usize = 30;
    pub const VISCOUS_RATE: usize = 31;
    pub const VISCOUS_DT: usize = 32;
    pub const DT: usize = 33;
    pub const PREDICT: usize = 34;
    pub const SYMPLECTIC_DENSITY: usize = 41;
    pub const CORRECT: usize = 42;
    pub const SOFTENED_INVERSE: usize = 49;
    pub const SEVENTH_ROOT_SERIES: usize = 50;
    /// The input sums after ghost_pair (20), adjugate4's determinant and adjugate (17),
    /// ghost_density (-1 for NaN).
    pub const GHOST_PAIR: usize = 51;
    pub const ADJUGATE: usize = 71;
    pub const GHOST_DENSITY: usize = 88;
    /// A Verlet step (base velocity v_ij, base density rho_half, span 2 dt), then an Euler
    /// density.
    pub const VERLET: usize = 89;
    pub const VERLET_DENSITY: usize = 96;
}

fn v3(a: &[f64], o: usize) -> V3 {
    [a[o], a[o + 1], a[o + 2]]
}

fn put3(o: &mut [f64], at: usize, v: V3) {
    o[at..at + 3].copy_from_slice(&v);
}

fn put_state(o: &mut [f64], at: usize, s: &FluidState) {
    put3(o, at, s.x);
    put3(o, at + 3, s.v);
    o[at + 6] = s.rho;
}

/// Random inputs of one case (offsets as sph_parity.cu reads them). Some cases sit on the
/// branches: r = 0, r = h (the cubic spline's joint), r = 2h (the support's edge), r_ij = 0, a
/// seventh root of 0, of t <= -1 and of large t (the second starting point), zero acceleration
/// (an infinite force limit), an infinite dt candidate.
fn inputs(rng: &mut SplitMix64, a: &mut [f64]) {
    let mut r = |lo: f64, hi: f64| rng.range(lo, hi);
    let h = r(1e-3, 0.1);
    a[inp::H] = h;
    let pick = r(0.0, 1.0);
    a[inp::R] = if pick < 0.05 {
        0.0
    } else if pick < 0.1 {
        h
    } else if pick < 0.15 {
        2.0 * h
    } else {
        r(0.0, 2.4 * h)
    };
    let dir = loop {
        let d = [r(-1.0, 1.0), r(-1.0, 1.0), r(-1.0, 1.0)];
        let n = vec3::norm(d);
        if n > 0.1 && n < 1.0 {
            break vec3::scale(d, 1.0 / n);
        }
    };
    let r_ij = if r(0.0, 1.0) < 0.03 {
        [0.0; 3]
    } else {
        vec3::scale(dir, r(0.0, 2.2 * h))
    };
    put3(a, inp::R_IJ, r_ij);
    put3(a, inp::V_IJ, [r(-5.0, 5.0), r(-5.0, 5.0), r(-5.0, 5.0)]);
    a[inp::RHO_I] = r(900.0, 1100.0);
    a[inp::RHO_J] = r(900.0, 1100.0);
    a[inp::P_I] = r(-1e4, 1e5);
    a[inp::P_J] = r(-1e4, 1e5);
    a[inp::C_I] = r(10.0, 100.0);
    a[inp::C_J] = r(10.0, 100.0);
    a[inp::M_J] = r(1e-9, 1e-2);
    a[inp::ALPHA] = r(0.0, 0.5);
    a[inp::DELTA] = r(0.0, 0.2);
    let (c0, rho0) = (r(10.0, 100.0), r(900.0, 1100.0));
    let b = physics::tait_b(rho0, c0);
    a[inp::C0] = c0;
    a[inp::RHO0] = rho0;
    a[inp::B] = b;
    let gravity = if r(0.0, 1.0) < 0.7 {
        [0.0, 0.0, -r(1.0, 20.0)]
    } else {
        [r(-20.0, 20.0), r(-20.0, 20.0), r(-20.0, 20.0)]
    };
    put3(a, inp::GRAVITY, gravity);
    let pick = r(0.0, 1.0);
    a[inp::T] = if pick < 0.4 {
        r(-0.1, 0.1)
    } else if pick < 0.6 {
        r(-0.99, 10.0)
    } else if pick < 0.8 {
        10f64.powf(r(-12.0, 12.0))
    } else if pick < 0.85 {
        0.0
    } else if pick < 0.9 {
        r(-3.0, -1.0)
    } else {
        -(10f64.powf(r(-12.0, -0.31)))
    };
    a[inp::P] = r(-0.5, 2.0) * b;
    a[inp::DEPTH] = r(0.0, 10.0);
    a[inp::G] = r(1.0, 20.0);
    a[inp::COEF] = r(5.0, 40.0);
    let acc = if r(0.0, 1.0) < 0.05 {
        [0.0; 3]
    } else {
        [r(-100.0, 100.0), r(-100.0, 100.0), r(-100.0, 100.0)]
    };
    put3(a, inp::ACC, acc);
    put3(a, inp::X, [r(-10.0, 10.0), r(-10.0, 10.0), r(-10.0, 10.0)]);
    put3(a, inp::V, [r(-5.0, 5.0), r(-5.0, 5.0), r(-5.0, 5.0)]);
    a[inp::RHO] = r(900.0, 1100.0);
    a[inp::DRHO] = r(-1e4, 1e4);
    a[inp::DT] = r(1e-6, 1e-3);
    a[inp::CFL] = r(0.05, 0.4);
    a[inp::DT_F] = if r(0.0, 1.0) < 0.05 {
        f64::INFINITY
    } else {
        r(1e-6, 1e-2)
    };
    a[inp::DT_CV] = r(1e-6, 1e-2);
    a[inp::RHO_HALF] = r(900.0, 1100.0);
    a[inp::DRHO_HALF] = r(-1e4, 1e4);
    a[inp::MU_MAX] = r(0.0, 10.0);
    a[inp::RHO_EOS] = r(900.0, 1100.0);
    a[inp::KERNEL] = if r(0.0, 1.0) < 0.5 { 0.0 } else { 1.0 };
    // Ghost sums on each branch of ghost_density: no fluid (a11 = 0), a near-singular matrix
    // (the Shepard average), a full support (det about 1).
    let pick = r(0.0, 1.0);
    a[inp::GHOST] = r(0.0, 2000.0);
    for k in 0..3 {
        a[inp::GHOST + 1 + k] = r(-1e5, 1e5);
    }
    for k in 0..16 {
        let diag = if k % 5 == 0 { 1.0 } else { 0.0 };
        a[inp::GHOST + 4 + k] = if pick < 0.3 {
            1e-2 * r(-1.0, 1.0)
        } else {
            diag + 0.3 * r(-1.0, 1.0)
        };
    }
    if pick < 0.1 {
        a[inp::GHOST + 4] = 0.0;
    } else if pick < 0.3 {
        a[inp::GHOST + 4] = r(1e-3, 1.0);
    }
    put3(
        a,
        inp::TO_PARTICLE,
        [r(-0.1, 0.1), r(-0.1, 0.1), r(-0.1, 0.1)],
    );
}

fn ghost_sums(a: &[f64]) -> physics::GhostSums {
    let g = inp::GHOST;
    physics::GhostSums {
        rho: a[g],
        grad: v3(a, g + 1),
        a: std::array::from_fn(|k| a[g + 4 + k]),
    }
}

/// What sph_parity.cu writes, computed by the Rust functions.
fn expected(a: &[f64], o: &mut [f64]) {
    let (r, h) = (a[inp::R], a[inp::H]);
    let kernel = if a[inp::KERNEL] == 0.0 {
        SphKernel::WendlandC2
    } else {
        SphKernel::CubicSpline
    };
    let pair = SphPair {
        r_ij: v3(a, inp::R_IJ),
        v_ij: v3(a, inp::V_IJ),
        rho_i: a[inp::RHO_I],
        rho_j: a[inp::RHO_J],
        p_i: a[inp::P_I],
        p_j: a[inp::P_J],
        c_i: a[inp::C_I],
        c_j: a[inp::C_J],
        m_j: a[inp::M_J],
    };
    let params = DiffusionParams {
        delta: a[inp::DELTA],
        h,
        c0: a[inp::C0],
        rho0: a[inp::RHO0],
        b: a[inp::B],
        gravity: v3(a, inp::GRAVITY),
    };
    let (rho0, c0, b) = (a[inp::RHO0], a[inp::C0], a[inp::B]);
    let (g, depth) = (a[inp::G], a[inp::DEPTH]);

    o[out::WENDLAND_ALPHA] = physics::wendland_c2_alpha(h);
    o[out::WENDLAND] = physics::wendland_c2(r, h);
    o[out::WENDLAND_F] = physics::wendland_c2_grad_factor(r, h);
    o[out::CUBIC_ALPHA] = physics::cubic_spline_alpha(h);
    o[out::CUBIC] = physics::cubic_spline(r, h);
    o[out::CUBIC_F] = physics::cubic_spline_grad_factor(r, h);
    o[out::KERNEL_VALUE] = physics::kernel_value(kernel, r, h);
    o[out::KERNEL_F] = physics::kernel_grad_factor(kernel, r, h);
    let f = physics::kernel_grad_factor(kernel, vec3::norm(pair.r_ij), h);
    put3(
        o,
        out::KERNEL_GRADIENT,
        physics::kernel_gradient(f, pair.r_ij),
    );

    o[out::TAIT_B] = physics::tait_b(rho0, c0);
    o[out::TAIT_PRESSURE] = physics::tait_pressure(a[inp::RHO_EOS], rho0, b);
    o[out::SEVENTH_ROOT] = physics::seventh_root_minus_one(a[inp::T]);
    o[out::SEVENTH_ROOT_SERIES] = physics::seventh_root_series(a[inp::T]);
    o[out::TAIT_DENSITY] = physics::tait_density(a[inp::P], rho0, b);
    o[out::SOUND_SPEED] = physics::sound_speed(a[inp::RHO_EOS], rho0, c0);
    o[out::SOUND_SPEED_COEF] = physics::sound_speed_from_coefficient(a[inp::COEF], g, depth);
    o[out::HYDROSTATIC_PRESSURE] = physics::hydrostatic_pressure(rho0, g, depth);
    o[out::HYDROSTATIC_DENSITY] = physics::hydrostatic_density(rho0, b, g, depth);

    o[out::ETA2] = physics::eta_squared(h);
    // The pair's shared factors, as the CPU's pair loop forms them.
    let r2 = vec3::norm2(pair.r_ij);
    let vr = vec3::dot(pair.v_ij, pair.r_ij);
    let inv = physics::softened_inverse_square(h, r2);
    o[out::SOFTENED_INVERSE] = inv;
    let mu = physics::viscous_mu(h, vr, inv);
    o[out::VISCOUS_MU] = mu;
    let pi_ij = physics::artificial_viscosity(a[inp::ALPHA], mu, &pair);
    o[out::VISCOSITY] = pi_ij;
    put3(o, out::MOMENTUM, physics::momentum_pair(f, &pair, pi_ij));
    o[out::CONTINUITY] = physics::continuity_pair(f, vr, pair.m_j);

    o[out::DIFFUSION] = physics::density_diffusion(&params, f, &pair, a[inp::T], r2, inv);
    o[out::DIFFUSION_MC] = physics::diffusion_molteni_colagrossi(&params, f, &pair, r2, inv);
    o[out::HYDROSTATIC_DIFFERENCE] = physics::hydrostatic_density_difference(&params, pair.r_ij);
    o[out::DIFFUSION_FOURTAKAS] = physics::diffusion_fourtakas(&params, f, &pair, r2, inv);

    o[out::FORCE_DT] = physics::force_time_step(h, v3(a, inp::ACC));
    o[out::VISCOUS_RATE] = physics::viscous_rate(mu);
    o[out::VISCOUS_DT] = physics::viscous_time_step(h, pair.c_i, a[inp::MU_MAX]);
    o[out::DT] = physics::variable_time_step(a[inp::CFL], a[inp::DT_F], a[inp::DT_CV]);

    let s = FluidState {
        x: v3(a, inp::X),
        v: v3(a, inp::V),
        rho: a[inp::RHO],
    };
    let rates = FluidRates {
        acc: v3(a, inp::ACC),
        drho: a[inp::DRHO],
    };
    let grav = v3(a, inp::GRAVITY);
    let dt = a[inp::DT];
    put_state(
        o,
        out::PREDICT,
        &physics::symplectic_predict(&s, &rates, grav, dt),
    );
    o[out::SYMPLECTIC_DENSITY] =
        physics::symplectic_density(a[inp::RHO], a[inp::RHO_HALF], a[inp::DRHO_HALF], dt);
    let rates_half = FluidRates {
        acc: v3(a, inp::ACC),
        drho: a[inp::DRHO_HALF],
    };
    put_state(
        o,
        out::CORRECT,
        &physics::symplectic_correct(&s, a[inp::RHO_HALF], &rates_half, grav, dt),
    );
    put_state(
        o,
        out::VERLET,
        &physics::verlet_update(
            &s,
            v3(a, inp::V_IJ),
            a[inp::RHO_HALF],
            &rates,
            grav,
            dt,
            2.0 * dt,
        ),
    );
    o[out::VERLET_DENSITY] = physics::verlet_density(a[inp::RHO_HALF], a[inp::DRHO], dt);

    let mut gs = ghost_sums(a);
    let w = physics::kernel_value(kernel, vec3::norm(pair.r_ij), h);
    physics::ghost_pair(&mut gs, w, f, pair.r_ij, pair.m_j, pair.rho_j);
    o[out::GHOST_PAIR] = gs.rho;
    put3(o, out::GHOST_PAIR + 1, gs.grad);
    o[out::GHOST_PAIR + 4..out::GHOST_PAIR + 20].copy_from_slice(&gs.a);
    let gs = ghost_sums(a);
    let mut adj = [0.0; 16];
    o[out::ADJUGATE] = physics::adjugate4(&gs.a, &mut adj);
    o[out::ADJUGATE + 1..out::ADJUGATE + 17].copy_from_slice(&adj);
    let d = physics::ghost_density(&gs, v3(a, inp::TO_PARTICLE));
    o[out::GHOST_DENSITY] = if d.is_nan() { -1.0 } else { d };
}

/// Names of the outputs, for failure messages.
fn output_name(i: usize) -> &'static str {
    match i {
        out::WENDLAND_ALPHA => "wendland_c2_alpha",
        out::WENDLAND => "wendland_c2",
        out::WENDLAND_F => "wendland_c2_grad_factor",
        out::CUBIC_ALPHA => "cubic_spline_alpha",
        out::CUBIC => "cubic_spline",
        out::CUBIC_F => "cubic_spline_grad_factor",
        out::KERNEL_VALUE => "kernel_value",
        out::KERNEL_F => "kernel_grad_factor",
        8..=10 => "kernel_gradient",
        out::TAIT_B => "tait_b",
        out::TAIT_PRESSURE => "tait_pressure",
        out::SEVENTH_ROOT => "seventh_root_minus_one",
        out::TAIT_DENSITY => "tait_density",
        out::SOUND_SPEED => "sound_speed",
        out::SOUND_SPEED_COEF => "sound_speed_from_coefficient",
        out::HYDROSTATIC_PRESSURE => "hydrostatic_pressure",
        out::HYDROSTATIC_DENSITY => "hydrostatic_density",
        out::ETA2 => "eta_squared",
        out::VISCOUS_MU => "viscous_mu",
        out::VISCOSITY => "artificial_viscosity",
        22..=24 => "momentum_pair",
        out::CONTINUITY => "continuity_pair",
        out::DIFFUSION => "density_diffusion",
        out::DIFFUSION_MC => "diffusion_molteni_colagrossi",
        out::HYDROSTATIC_DIFFERENCE => "hydrostatic_density_difference",
        out::DIFFUSION_FOURTAKAS => "diffusion_fourtakas",
        out::FORCE_DT => "force_time_step",
        out::VISCOUS_RATE => "viscous_rate",
        out::VISCOUS_DT => "viscous_time_step",
        out::DT => "variable_time_step",
        34..=40 => "symplectic_predict",
        out::SYMPLECTIC_DENSITY => "symplectic_density",
        42..=48 => "symplectic_correct",
        out::SOFTENED_INVERSE => "softened_inverse_square",
        out::SEVENTH_ROOT_SERIES => "seventh_root_series",
        51..=70 => "ghost_pair",
        71..=87 => "adjugate4",
        out::GHOST_DENSITY => "ghost_density",
        89..=95 => "verlet_update",
        out::VERLET_DENSITY => "verlet_density",
        _ => "unknown output",
    }
}

#[test]
fn every_sph_formula_has_the_bits_of_its_cuda_twin() {
    if cuda::driver::driver_available().is_err() {
        println!("skipped: no GPU");
        return;
    }
    let mut rng = SplitMix64::new(0x005b_40f7_a1e5);
    let mut a = vec![0.0f64; CASES * IN];
    for c in a.chunks_exact_mut(IN) {
        inputs(&mut rng, c);
    }

    let (f, stream) = parity::parity_kernel(
        kernels::sph_parity_module_source(),
        kernels::SPH_PARITY_KERNEL,
    );
    let d_in = stream.clone_htod(&a).expect("upload");
    let mut d_out = stream.alloc_zeros::<f64>(CASES * OUT).expect("alloc");
    let n = CASES as u32;
    let mut b = stream.launch_builder(&f);
    b.arg(&d_in).arg(&mut d_out).arg(&n);
    // SAFETY: the kernel reads CASES * IN doubles and writes CASES * OUT doubles, the sizes
    // allocated above; one thread per case, threads past `n` return at once.
    let cfg = LaunchConfig {
        grid_dim: (n.div_ceil(128), 1, 1),
        block_dim: (128, 1, 1),
        shared_mem_bytes: 0,
    };
    unsafe { b.launch(cfg) }.expect("launch");
    let gpu = stream.clone_dtoh(&d_out).expect("download");

    let mut want = vec![0.0; OUT];
    let mut mismatches = std::collections::BTreeMap::<&str, (usize, String)>::new();
    // Branch coverage: approaching pairs (viscosity on), large seventh-root arguments (second
    // start), small ones (the series), pairs inside the support.
    let (mut approaching, mut large_t, mut inside) = (0usize, 0usize, 0usize);
    let mut series = 0usize;
    let (mut ghost_none, mut ghost_shepard, mut ghost_first) = (0usize, 0usize, 0usize);
    for c in 0..CASES {
        let ac = &a[c * IN..(c + 1) * IN];
        expected(ac, &mut want);
        approaching += (want[out::VISCOSITY] > 0.0) as usize;
        large_t += (ac[inp::T] > 1.0) as usize;
        series += (ac[inp::T].abs() <= physics::SEVENTH_ROOT_SERIES_MAX) as usize;
        if ac[inp::GHOST + 4] <= 0.0 {
            ghost_none += 1;
        } else if want[out::ADJUGATE].abs() < physics::GHOST_DETERMINANT_MIN {
            ghost_shepard += 1;
        } else {
            ghost_first += 1;
        }
        inside += (want[out::KERNEL_GRADIENT..out::KERNEL_GRADIENT + 3] != [0.0; 3]) as usize;
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
    }
    println!(
        "{CASES} random cases, {approaching} approaching pairs, {inside} pairs inside the \
         support, {large_t} seventh roots of t > 1 and {series} by the series; {} formulas differ",
        mismatches.len()
    );
    assert!(
        approaching > CASES / 10
            && inside > CASES / 2
            && large_t > CASES / 20
            && series > CASES / 20
            && ghost_none > CASES / 20
            && ghost_shepard > CASES / 20
            && ghost_first > CASES / 2,
        "the inputs must exercise the branches: {approaching} {inside} {large_t} {series} \
         {ghost_none} {ghost_shepard} {ghost_first}"
    );
    assert!(
        mismatches.is_empty(),
        "CPU and GPU differ: {:#?}",
        mismatches
    );
}

// ---------------------------------------------------------------------------------------------
// Name, argument and field checks (no GPU needed)
// ---------------------------------------------------------------------------------------------

const RUST_SOURCE: &str = include_str!("../src/sph/physics.rs");

/// Splits a parameter or field list at its top-level commas (generic or nested brackets kept).
fn split_top(list: &str) -> Vec<String> {
    let (mut depth, mut cur, mut parts) = (0i32, String::new(), Vec::new());
    for ch in list.chars() {
        match ch {
            '(' | '[' | '<' => depth += 1,
            ')' | ']' | '>' => depth -= 1,
            _ => {}
        }
        if ch == ',' && depth == 0 {
            parts.push(std::mem::take(&mut cur));
        } else {
            cur.push(ch);
        }
    }
    parts.push(cur);
    parts
        .into_iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

/// The text between the '(' at `open` and its matching ')'.
fn parenthesised(s: &str, open: usize) -> &str {
    let mut depth = 0;
    for (k, ch) in s[open..].char_indices() {
        match ch {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return &s[open + 1..open + k];
                }
            }
            _ => {}
        }
    }
    panic!("unbalanced parentheses after byte {open}");
}

/// The last identifier of a C declaration (`const SphPair& pair` -> `pair`).
fn last_identifier(decl: &str) -> String {
    let t = decl.trim_end();
    let start = t
        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .map_or(0, |k| k + 1);
    t[start..].to_string()
}

/// `pub fn` names and argument names of the Rust module (before its tests).
fn rust_functions() -> Vec<(String, Vec<String>)> {
    let src = RUST_SOURCE
        .split("#[cfg(test)]")
        .next()
        .unwrap_or(RUST_SOURCE);
    let mut fns = Vec::new();
    let mut at = 0;
    while let Some(k) = src[at..].find("pub fn ") {
        let start = at + k + "pub fn ".len();
        let open = start + src[start..].find('(').expect("a parameter list");
        let name = src[start..open].trim().to_string();
        let args = split_top(parenthesised(src, open))
            .iter()
            .map(|p| {
                let n = p.split(':').next().unwrap_or("").trim();
                n.trim_start_matches("mut ").to_string()
            })
            .collect();
        fns.push((name, args));
        at = open;
    }
    fns
}

/// `__device__ __forceinline__` function names and argument names of a CUDA source.
fn cuda_functions(src: &str) -> std::collections::HashMap<String, Vec<String>> {
    let mut fns = std::collections::HashMap::new();
    let marker = "__device__ __forceinline__ ";
    let mut at = 0;
    while let Some(k) = src[at..].find(marker) {
        let start = at + k + marker.len();
        let open = start + src[start..].find('(').expect("a parameter list");
        let name = last_identifier(&src[start..open]);
        let args = split_top(parenthesised(src, open))
            .iter()
            .map(|p| last_identifier(p))
            .collect();
        fns.insert(name, args);
        at = open;
    }
    fns
}

/// Field names of `pub struct name` in the Rust module.
fn rust_fields(name: &str) -> Vec<String> {
    let head = format!("pub struct {name} {{");
    let start = RUST_SOURCE.find(&head).expect("the struct") + head.len();
    let body = &RUST_SOURCE[start..start + RUST_SOURCE[start..].find("\n}").expect("its end")];
    body.lines()
        .map(str::trim)
        .filter_map(|l| l.strip_prefix("pub "))
        .map(|l| l.split(':').next().unwrap_or("").trim().to_string())
        .collect()
}

/// Field names of `struct name` in a CUDA source.
fn cuda_fields(src: &str, name: &str) -> Vec<String> {
    let head = format!("struct {name} {{");
    let start = src.find(&head).expect("the struct") + head.len();
    let body = &src[start..start + src[start..].find("};").expect("its end")];
    let code: String = body
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let mut fields = Vec::new();
    for decl in code.split(';').map(str::trim).filter(|d| !d.is_empty()) {
        // "real rho_i, rho_j": the type, then the names.
        let (_, names) = decl
            .split_once(char::is_whitespace)
            .expect("type and names");
        // "double a[16]": the name without its extent.
        fields.extend(
            names
                .split(',')
                .map(|n| n.split('[').next().unwrap_or("").trim().to_string()),
        );
    }
    fields
}

#[test]
fn every_sph_formula_has_a_twin_with_the_same_arguments() {
    let header = kernels::SPH_PHYSICS_HEADER;
    let twins = cuda_functions(header);
    let rust = rust_functions();
    assert!(rust.len() >= 30, "parsed {} Rust functions", rust.len());
    let parity = kernels::sph_parity_module_source();
    let parity_cu = parity
        .split("#line 1 \"sph_parity.cu\"")
        .nth(1)
        .expect("sph_parity.cu in the module");
    let mut problems = Vec::new();
    for (name, args) in &rust {
        match twins.get(name) {
            None => problems.push(format!("{name}: no twin in sph_physics.cuh")),
            Some(cuda_args) if cuda_args != args => problems.push(format!(
                "{name}: Rust ({}) vs CUDA ({})",
                args.join(", "),
                cuda_args.join(", ")
            )),
            Some(_) => {}
        }
        if !parity_cu.contains(&format!("{name}(")) {
            problems.push(format!("{name}: not evaluated by sph_parity.cu"));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn sph_structs_and_constants_match_their_twins() {
    let header = kernels::SPH_PHYSICS_HEADER;
    for name in [
        "SphPair",
        "DiffusionParams",
        "FluidState",
        "FluidRates",
        "GhostSums",
    ] {
        assert_eq!(rust_fields(name), cuda_fields(header, name), "{name}");
    }
    let define = |name: &str| -> f64 {
        let head = format!("#define {name} ");
        let start = header.find(&head).expect("the define") + head.len();
        let text = header[start..].lines().next().unwrap_or("").trim();
        text.parse().expect("a number")
    };
    assert_eq!(define("SPH_TAIT_GAMMA"), physics::TAIT_GAMMA);
    assert_eq!(
        define("SPH_GHOST_DETERMINANT_MIN"),
        physics::GHOST_DETERMINANT_MIN
    );
    assert_eq!(define("SPH_ETA2_COEFFICIENT"), physics::ETA2_COEFFICIENT);
    assert_eq!(
        define("SPH_SEVENTH_ROOT_MAX_ITERATIONS"),
        f64::from(physics::SEVENTH_ROOT_MAX_ITERATIONS)
    );
    assert_eq!(
        define("SPH_SEVENTH_ROOT_SERIES_MAX"),
        physics::SEVENTH_ROOT_SERIES_MAX
    );
    for (k, &c) in physics::SEVENTH_ROOT_SERIES.iter().enumerate() {
        assert_eq!(
            define(&format!("SPH_SEVENTH_ROOT_C{}", k + 1)),
            c,
            "C(1/7, {})",
            k + 1
        );
    }
    assert_eq!(
        define("SPH_KERNEL_WENDLAND_C2"),
        f64::from(SphKernel::WendlandC2 as u32)
    );
    assert_eq!(
        define("SPH_KERNEL_CUBIC_SPLINE"),
        f64::from(SphKernel::CubicSpline as u32)
    );
    let module = kernels::sph_parity_module_source();
    assert!(module.contains(&format!("void {}(", kernels::SPH_PARITY_KERNEL)));
    assert!(module.contains(&format!("#define SPH_PARITY_IN {IN}\n")));
    assert!(module.contains(&format!("#define SPH_PARITY_OUT {OUT}\n")));
    assert!(
        !module.contains("#include \""),
        "NVRTC gets one translation unit"
    );
}
