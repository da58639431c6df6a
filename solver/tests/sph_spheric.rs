//! SPHERIC Test 2 (Kleefsman et al. 2005) on the GPU (issue 17): the 3.22 x 1 x 1 m tank, the
//! 0.55 m water column released towards the box obstacle, at least 2 M particles. Measured in
//! the experiment: pressure P2 on the obstacle's face leaves ~0.5 kPa at t = 0.410 s and peaks
//! at 8.13 kPa at 0.426 s; water heights H4 (x = 2.638 m) = 0.547 m at t = 0, 0.468 at 0.366 s,
//! 0.426 at 0.5 s, 0.278 at 1.0 s, 0.129 at 2.0 s; H2 (x = 0.992 m) = 0.050 m at 0.405 s, 0.099
//! at 0.5 s, 0.179 at 1.0 s. Bounds: P2 impact time within 0.02 s, first peak within 25 %, H4
//! within 15 %, H2 within 0.03 m.
//!
//! `spheric_test2_coarse_on_the_cpu` runs the same tank in CI at 5 cm with wider bounds.
//! The full test is device only (minutes on an H100): runs when `PARTICLE_SHM_TEST_BACKENDS` names `cuda` and a
//! GPU is present, otherwise prints why it is skipped. `PARTICLE_SHM_SPHERIC_DP` (m, default
//! 0.0075: 2.7 M particles), `PARTICLE_SHM_SPHERIC_END` (s, default 2.0, the last H4 point;
//! 1.0 stops before it, in about half the time: 360 s to 2.0 s on an H200), `PARTICLE_SHM_SPHERIC_ALPHA` (the artificial viscosity, default the case's) and
//! `PARTICLE_SHM_SPHERIC_BOUNDARY_FACTOR` (its factor between fluid and walls: the case's 0 by
//! default; with DualSPHysics' 1 the impact and H4 at 2.0 s miss their bounds) and
//! `PARTICLE_SHM_SPHERIC_BOUNDARY` (`dbc`, the case's, or `mdbc`; with mDBC at 7.5 mm the
//! impact came at 0.430 s and the first peak at 10.47 kPa, both outside their bounds) change
//! the run; the particle-count bound holds only at the default spacing or finer.
//!
//! P2 is read 1.5 h in front of the face (DualSPHysics' advice for probes near a boundary), as
//! the `analysis` tool's `--probe` reads it (`solver::sph::probe`: the kernel average of the
//! fluid pressures, Shepard-normalised where the fluid fraction is at least 1/2, as
//! DualSPHysics' MeasureTool with `-kclimit 0.5` on its own dam-break example; the plain
//! Shepard average, which gives a lone splash its whole pressure, is printed beside it); a water height is where the
//! kernel-interpolated fluid fraction on the vertical line falls below 0.5 (the analysis tool's
//! gauge method).

#[path = "support/sph.rs"]
mod sph;

use solver::core::vec3;
use solver::sph::cpu::SphState;
use solver::sph::cuda::{SphCuda, SphCudaOptions, SphGpu};
use solver::sph::physics;
use solver::sph::probe;
use solver::sph::setup::{SphCase, SphConstants, KIND_FLUID};

fn env_f64(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .map(|v| v.parse().unwrap_or_else(|_| panic!("{name}={v}")))
        .unwrap_or(default)
}

/// Fluid particles with their kernel volume m/rho and pressure.
struct Fluid {
    pos: Vec<[f64; 3]>,
    vol: Vec<f64>,
    p: Vec<f64>,
}

fn fluid_of(s: &SphState, c: &SphConstants) -> Fluid {
    let mut f = Fluid {
        pos: Vec::new(),
        vol: Vec::new(),
        p: Vec::new(),
    };
    for k in 0..s.pos.len() {
        if s.kind[k] == KIND_FLUID {
            f.pos.push(s.pos[k]);
            f.vol.push(c.mass / s.rho[k]);
            f.p.push(physics::tait_pressure(s.rho[k], c.rho0, c.b));
        }
    }
    f
}

/// P2 as the `analysis` tool's `--probe` reads it ([`probe::read`]).
fn probe_at(f: &Fluid, c: &SphConstants, at: [f64; 3]) -> probe::Reading {
    let fluid = (0..f.pos.len()).map(|k| (f.pos[k], f.vol[k], f.p[k]));
    probe::read(fluid, c.kernel, c.h, at)
}

/// Water height on the vertical line at (x, y) [m].
fn height(f: &Fluid, c: &SphConstants, x: f64, y: f64) -> f64 {
    let reach = 2.0 * c.h;
    let near: Vec<usize> = (0..f.pos.len())
        .filter(|&k| (f.pos[k][0] - x).hypot(f.pos[k][1] - y) < reach)
        .collect();
    let fraction = |z: f64| {
        near.iter()
            .map(|&k| {
                let r = vec3::norm(vec3::sub([x, y, z], f.pos[k]));
                f.vol[k] * physics::kernel_value(c.kernel, r, c.h)
            })
            .sum::<f64>()
    };
    let dz = c.dp / 4.0;
    let mut above: Option<(f64, f64)> = None;
    let mut z = 0.0;
    while z <= 1.0 {
        let s = fraction(z);
        if s >= 0.5 {
            above = Some((z, s));
        } else if let Some((z0, s0)) = above {
            return z0 + (z - z0) * (s0 - 0.5) / (s0 - s);
        }
        z += dz;
    }
    above.map_or(0.0, |(z0, _)| z0)
}

/// The SPHERIC Test 2 case (the shipped `dambreak.toml`) at spacing `dp`, run to `end`, with
/// the walls of `PARTICLE_SHM_SPHERIC_BOUNDARY` (`dbc`, the case's, or `mdbc`) and the integrator
/// of `PARTICLE_SHM_SPHERIC_INTEGRATOR` (`symplectic`, the case's, or `verlet`).
fn spheric_case(dp: f64, end: f64) -> SphCase {
    let mut case = solver::bench_cases::sph_dambreak(dp, end);
    match std::env::var("PARTICLE_SHM_SPHERIC_BOUNDARY").as_deref() {
        Ok("mdbc") => case.sph.boundary = solver::sph::setup::BoundaryName::Mdbc,
        Ok("dbc") | Err(_) => {}
        Ok(other) => panic!("PARTICLE_SHM_SPHERIC_BOUNDARY={other}: dbc or mdbc"),
    }
    match std::env::var("PARTICLE_SHM_SPHERIC_INTEGRATOR").as_deref() {
        Ok("verlet") => case.sph.integrator = solver::sph::setup::IntegratorName::Verlet,
        Ok("symplectic") | Err(_) => {}
        Ok(other) => panic!("PARTICLE_SHM_SPHERIC_INTEGRATOR={other}: symplectic or verlet"),
    }
    case
}

/// CI, CPU reference, dp = 5 cm (36 k particles, 0.6 s simulated, about 2.5 minutes on 2
/// cores): the front reaches the obstacle's face (x = 0.8245 m) within 0.15 s of the measured
/// P2 impact (0.410 s), and H4 is within 25 % of the experiment at 0.366 and 0.5 s. Measured:
/// the front arrives at 0.536 s, 0.126 s late (at 5 cm the dynamic boundary layers of the floor
/// hold it back; at 7.5 mm on the GPU the P2 impact is 0.018 s late), H4 +2.5 % and +3.2 %
/// (2.3 minutes on 2 cores; with the walls' artificial viscosity, which the shipped case left
/// on until session 27: 0.552 s, +3.0 % and +4.4 %). The run is deterministic, so the wide arrival bound only catches a
/// change of the physics; the device test holds the experiment's 0.02 s.
#[test]
fn spheric_test2_coarse_on_the_cpu() {
    if std::env::var("PARTICLE_SHM_TEST_SUBDOMAINS").is_ok_and(|v| !v.trim().is_empty()) {
        println!("SPH runs undecomposed so far: skipped in the sub-domain pass");
        return;
    }
    let case = spheric_case(0.05, 0.6);
    let c = case.constants().unwrap();
    let mut sim = solver::sph::cpu::SphSim::new(c.clone(), case.particles(&c).unwrap());
    let front = |s: &SphState| {
        (0..s.pos.len())
            .filter(|&k| s.kind[k] == KIND_FLUID)
            .map(|k| s.pos[k][0])
            .fold(f64::INFINITY, f64::min)
            - 0.5 * c.dp
    };
    let mut arrival = None;
    let mut t = 0.0;
    let mut failures = Vec::new();
    while t < 0.6 - 1e-9 {
        t += 0.002;
        sim.run_to(t);
        if arrival.is_none() && front(&sim.s) <= 0.8245 {
            arrival = Some(t);
        }
        if (t / 0.05).fract() < 0.02 || (t / 0.05).fract() > 0.98 {
            println!(
                "t = {t:.3} s: front at x = {:.3} m ({} steps, dt {:.3e} s)",
                front(&sim.s),
                sim.s.step,
                sim.dt()
            );
        }
        for (tm, m) in [(0.366, 0.468), (0.5, 0.426)] {
            if (t - tm).abs() < 1e-3 - 1e-9 {
                let h4 = height(&fluid_of(&sim.s, &c), &c, 2.638, 0.5);
                println!(
                    "H4 at {t:.3} s: {h4:.3} m vs {m} ({:+.1} %)",
                    100.0 * (h4 - m) / m
                );
                if (h4 - m).abs() > 0.25 * m {
                    failures.push(format!("H4 at {t:.3} s: {h4:.3} m vs {m} (25 %)"));
                }
            }
        }
    }
    println!(
        "{} particles, {} steps; front at the obstacle at {arrival:?} s (P2 impact 0.410 s measured)",
        sim.s.pos.len(),
        sim.s.step
    );
    match arrival {
        Some(ta) if (ta - 0.410).abs() <= 0.15 => {}
        other => failures.push(format!(
            "front at the obstacle at {other:?} s, not 0.410 +- 0.15"
        )),
    }
    assert!(failures.is_empty(), "{}", failures.join("; "));
}

#[test]
fn spheric_test2_dam_break_against_the_experiment() {
    if !sph::device_validation_wanted() {
        return;
    }
    let dp = env_f64("PARTICLE_SHM_SPHERIC_DP", 0.0075);
    let end = env_f64("PARTICLE_SHM_SPHERIC_END", 2.0);
    let mut case = spheric_case(dp, end);
    case.sph.viscosity = env_f64("PARTICLE_SHM_SPHERIC_ALPHA", case.sph.viscosity);
    case.sph.viscosity_boundary_factor = env_f64(
        "PARTICLE_SHM_SPHERIC_BOUNDARY_FACTOR",
        case.sph.viscosity_boundary_factor,
    );
    let c = case.constants().unwrap();
    let p = case.particles(&c).unwrap();
    let n = p.kind.len();
    println!(
        "dp = {dp} m, h = {:.4} m, c0 = {:.2} m/s, alpha = {} (walls {}), boundary {:?}, {:?}: \
         {n} particles",
        c.h, c.c0, c.alpha, c.alpha_boundary, case.sph.boundary, c.integrator
    );
    if dp <= 0.0075 {
        assert!(n >= 2_000_000, "{n} particles, the validation wants 2 M");
    }
    let t0 = std::time::Instant::now();
    let mut sim = SphCuda::new(c.clone(), p, SphCudaOptions::default()).unwrap();
    let p2_at = [0.8245 + 1.5 * c.h, 0.471, 0.061];
    let (h2_x, h4_x, gy) = (0.992, 2.638, 0.5);
    let h4_0 = height(&fluid_of(&sim.state().unwrap(), &c), &c, h4_x, gy);
    println!("t = 0: H4 = {h4_0:.3} m (0.547 measured)");
    // P2 every millisecond through the impact.
    let mut p2: Vec<(f64, probe::Reading)> = Vec::new();
    let mut t = 0.36;
    sim.run_to(t).unwrap();
    let mut heights: Vec<(f64, f64, f64)> = Vec::new();
    let mut record_heights = |t: f64, f: &Fluid, steps: u64, dt: f64| {
        let (a, b) = (height(f, &c, h2_x, gy), height(f, &c, h4_x, gy));
        println!(
            "t = {t:.3} s: H2 = {a:.3} m, H4 = {b:.3} m ({steps} steps, dt {dt:.3e} s, {:.1} s)",
            t0.elapsed().as_secs_f64()
        );
        heights.push((t, a, b));
    };
    while t < 0.5 - 1e-9 {
        t += 0.001;
        sim.run_to(t).unwrap();
        let f = fluid_of(&sim.state().unwrap(), &c);
        p2.push((t, probe_at(&f, &c, p2_at)));
        if [0.366, 0.405].iter().any(|&m| (t - m).abs() < 1e-6) {
            record_heights(t, &f, sim.step_index(), sim.dt());
        }
    }
    record_heights(
        t,
        &fluid_of(&sim.state().unwrap(), &c),
        sim.step_index(),
        sim.dt(),
    );
    // H4 and H2 every 0.25 s from 1.0 s on (printed; the bounds apply at the listed times).
    for m in [1.0, 1.25, 1.5, 1.75, 2.0] {
        if m <= end + 1e-9 {
            sim.run_to(m).unwrap();
            record_heights(
                m,
                &fluid_of(&sim.state().unwrap(), &c),
                sim.step_index(),
                sim.dt(),
            );
        }
    }
    println!(
        "{} steps to t = {:.3} s in {:.1} s",
        sim.step_index(),
        sim.time(),
        t0.elapsed().as_secs_f64()
    );
    for (t, r) in &p2 {
        if *t >= 0.395 && *t <= 0.47 {
            let shepard = if r.fraction > 0.0 {
                r.pressure * r.fraction.max(probe::FRACTION_LIMIT) / r.fraction
            } else {
                0.0
            };
            println!(
                "P2 t = {t:.3} s: {:.2} kPa (fluid fraction {:.3}; plain Shepard {:.2} kPa)",
                r.pressure / 1e3,
                r.fraction,
                shepard / 1e3
            );
        }
    }
    let p2: Vec<(f64, f64)> = p2.iter().map(|(t, r)| (*t, r.pressure)).collect();
    // Impact: the first sample above 0.5 kPa; peak: the largest within 0.03 s after it.
    let impact = p2.iter().find(|(_, p)| *p > 500.0).map(|x| x.0);
    let impact = impact.expect("P2 never rose above 0.5 kPa");
    let (t_peak, peak) = p2
        .iter()
        .filter(|(t, _)| *t >= impact && *t <= impact + 0.03)
        .fold((0.0, 0.0), |a, &(t, p)| if p > a.1 { (t, p) } else { a });
    println!(
        "P2: impact at {impact:.3} s (0.410 measured), first peak {:.2} kPa at {t_peak:.3} s (8.13 kPa at 0.426 s)",
        peak / 1e3
    );
    let mut failures = Vec::new();
    if (impact - 0.410).abs() > 0.02 {
        failures.push(format!(
            "P2 impact at {impact:.3} s, not within 0.02 s of 0.410"
        ));
    }
    if (peak - 8130.0).abs() > 0.25 * 8130.0 {
        failures.push(format!(
            "P2 first peak {:.2} kPa, not within 25 % of 8.13",
            peak / 1e3
        ));
    }
    let h4_ref = [(0.366, 0.468), (0.5, 0.426), (1.0, 0.278), (2.0, 0.129)];
    let h2_ref = [(0.405, 0.050), (0.5, 0.099), (1.0, 0.179)];
    for &(t, h2, h4) in &heights {
        if let Some(&(_, m)) = h4_ref.iter().find(|r| (r.0 - t).abs() < 1e-6) {
            println!(
                "H4 at {t}: {h4:.3} m vs {m} ({:+.1} %)",
                100.0 * (h4 - m) / m
            );
            if (h4 - m).abs() > 0.15 * m {
                failures.push(format!("H4 at {t} s: {h4:.3} m vs {m} (15 %)"));
            }
        }
        if let Some(&(_, m)) = h2_ref.iter().find(|r| (r.0 - t).abs() < 1e-6) {
            println!("H2 at {t}: {h2:.3} m vs {m} ({:+.3} m)", h2 - m);
            if (h2 - m).abs() > 0.03 {
                failures.push(format!("H2 at {t} s: {h2:.3} m vs {m} (0.03 m)"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("; "));
}
