//! Free sloshing against linear theory (issue 17): the first mode of water h deep in a
//! rectangular tank L long has omega^2 = g k tanh(k h), k = pi / L (Lamb 1932, art. 257;
//! Faltinsen & Timokha 2009, ch. 4), whatever the tank's width. The tank (L = 0.4 m, h = 0.1 m:
//! T = 0.884 s) is moved 1 cm along x in 0.1 s and then held; the water then sloshes, and the
//! time between the first mode's turning points (its crest from the surface, `mode_one`) is half
//! the period.
//!
//! What the runs show (`bench/results/sph_sloshing.md`): the period comes out short, by an
//! amount that shrinks as the spacing does: in a tank 0.3 L wide, -10.5 % at dp = L/40 (CPU),
//! -6.0 % at L/80 and -3.6 % at L/160 (GPU, f32). It grows with the share of the surface that
//! touches a wall: at L/40 a quasi-2D slice 4 dp thick was 24.3 % short (CPU; 24.75 % on the
//! GPU) against 10.5 % for the tank 0.3 L wide. The likely reason (not isolated): the walls'
//! boundary particles (dynamic boundary conditions, as DualSPHysics' DBC) take part in the
//! continuity equation, so the water that climbs a wall compresses the wall particles just above
//! it and is pushed back: the contact line is held, and the wave is stiffer than on a free-slip
//! wall. Two experiments on the slice (not kept in the code): with every wall particle's
//! density frozen at its start the period came out 20.8 % long instead of 24.3 % short, so the
//! walls' continuity is what stiffens it; resetting to rho0 only the wall particles with no fluid
//! in reach (a memory of earlier run-ups) changed no bit. So sloshing is checked in a tank 0.3 L
//! wide, not in a slice.
//!
//! `free_sloshing_on_the_cpu` runs in CI at dp = L/40. `free_sloshing_on_the_gpu` runs where
//! `PARTICLE_SHM_TEST_BACKENDS` names `cuda` and a GPU is present, at the spacings of
//! `PARTICLE_SHM_SLOSH_DPS` (m, comma separated; default 0.01,0.005,0.0025: L/40, L/80, L/160),
//! the finest with the tighter bound.

#[path = "support/sph.rs"]
mod sph;

use solver::sph::cpu::{SphSim, SphState};
use solver::sph::cuda::{SphCuda, SphCudaOptions, SphGpu};
use solver::sph::setup::{SphCase, KIND_FLUID};

use e2e_tests::sph_skips_decomposed_pass as decomposed_pass;

const G: f64 = 9.81;
/// Tank length and water depth [m].
const LEN: f64 = 0.4;
const DEPTH: f64 = 0.1;
/// How far the tank moves, and in how long, before it is held [m], [s].
const SHIFT: f64 = 0.01;
const PUSH: f64 = 0.1;

/// The first sloshing mode's period by linear theory [s].
fn linear_period(len: f64, depth: f64) -> f64 {
    let k = std::f64::consts::PI / len;
    2.0 * std::f64::consts::PI / (G * k * (k * depth).tanh()).sqrt()
}

/// The tank `width` wide (y) at spacing `dp`, water `DEPTH` deep, its lid 3 cm above the water.
/// The speed of sound is 10 sqrt(g h) (10 m/s, a hundred times the water's fastest speed here)
/// and the artificial viscosity 0.02 with none at the walls: at these spacings the default 0.1
/// is a viscosity a thousand times water's that damps the wave within a period.
fn case_text(dp: f64, width: f64, boundary: &str) -> String {
    let top = DEPTH + 0.03;
    let v = 2.0 * SHIFT / PUSH;
    let half = 0.5 * PUSH;
    format!(
        r#"
method = "sph"
dt = 1e-3
end_time = 10.0
[domain]
min = [0.0, 0.0, 0.0]
max = [{LEN}, {width}, {top}]
motion = {{ type = "schedule", segments = [
  {{ type = "translation", start = 0.0, end = {half}, velocity = [0.0, 0.0, 0.0], velocity_end = [{v}, 0.0, 0.0] }},
  {{ type = "translation", start = {half}, end = {PUSH}, velocity = [{v}, 0.0, 0.0], velocity_end = [0.0, 0.0, 0.0] }},
] }}
[sph]
spacing = {dp}
coef_sound = 10
viscosity = 0.02
viscosity_boundary_factor = 0
boundary = "{boundary}"
[[fluid]]
min = [0.0, 0.0, 0.0]
max = [{LEN}, {width}, {DEPTH}]
"#
    )
}

/// The first mode's crest height [m]: the water's surface eta(x) projected on cos(k x) (the
/// tank's left wall at x = 0; `SHIFT` once it is held). Over the water, the integral of
/// cos(k x) is that of cos(k x) eta(x) along the surface, a1 L / 2 for eta = a1 cos(k x), and the
/// other modes integrate to zero; so a1 = 2 h times the fluid particles' mean of cos(k x). The
/// centre of mass would mix in the third mode, which a push excites too.
fn mode_one(s: &SphState) -> f64 {
    let k = std::f64::consts::PI / LEN;
    let (mut sum, mut n) = (0.0, 0.0);
    for (i, p) in s.pos.iter().enumerate() {
        if s.kind[i] == KIND_FLUID {
            sum += (k * (p[0] - SHIFT)).cos();
            n += 1.0;
        }
    }
    2.0 * DEPTH * sum / n
}

/// What a run measured.
#[derive(Debug)]
struct Swing {
    /// Times of the first mode's turning points [s].
    turns: Vec<f64>,
    /// Twice the mean time between turning points [s].
    period: f64,
    /// The largest crest height at a turning point [m].
    crest: f64,
    particles: usize,
    steps: u64,
}

/// Samples the first mode's crest every `every` s from the end of the push to `end` (through
/// `sample(t)`, which runs the simulation to t) and times its turning points: each a local
/// extremum of the samples, refined by the parabola through it and its two neighbours.
fn swing(
    mut sample: impl FnMut(f64) -> (f64, u64),
    every: f64,
    end: f64,
    particles: usize,
) -> Swing {
    let mut series = Vec::new();
    let mut t = PUSH + every;
    let mut steps = 0;
    while t <= end + 1e-9 {
        let (x, n) = sample(t);
        series.push((t, x));
        steps = n;
        t += every;
    }
    let mut turns: Vec<(f64, f64)> = Vec::new();
    for w in series.windows(3) {
        let ((t0, a), (_, b), (_, c)) = (w[0], w[1], w[2]);
        let peak = b > a && b >= c;
        let trough = b < a && b <= c;
        if !(peak || trough) {
            continue;
        }
        // Vertex of the parabola through the three samples.
        let curv = a - 2.0 * b + c;
        let shift = if curv != 0.0 {
            0.5 * (a - c) / curv
        } else {
            0.0
        };
        let at = t0 + every * (1.0 + shift);
        // Ripples (higher modes, sound) could turn the crest too: keep a turning point only
        // where the swing reverses after at least a quarter of the linear period.
        if let Some(&(last, _)) = turns.last() {
            if at - last < 0.25 * linear_period(LEN, DEPTH) {
                continue;
            }
        }
        turns.push((at, b));
    }
    let times: Vec<f64> = turns.iter().map(|x| x.0).collect();
    let n = times.len();
    let period = if n >= 2 {
        2.0 * (times[n - 1] - times[0]) / (n - 1) as f64
    } else {
        f64::NAN
    };
    let crest = turns.iter().map(|x| x.1.abs()).fold(0.0, f64::max);
    Swing {
        turns: times,
        period,
        crest,
        particles,
        steps,
    }
}

/// Checks a run against linear theory within `bound` (a fraction) and prints it; the wave
/// must be linear (crest under 10 % of the depth) and have turned at least `min_turns` times.
fn check(label: &str, s: &Swing, min_turns: usize, bound: f64) {
    let theory = linear_period(LEN, DEPTH);
    let err = (s.period - theory) / theory;
    println!(
        "SLOSH {label}: {} particles, {} steps, turning points {:.4?} s: period {:.4} s, linear \
         theory {theory:.4} s ({:+.2} %); crest {:.2} mm ({:.1} % of the depth)",
        s.particles,
        s.steps,
        s.turns,
        s.period,
        100.0 * err,
        1e3 * s.crest,
        100.0 * s.crest / DEPTH
    );
    assert!(
        s.turns.len() >= min_turns,
        "{label}: {} turning points, wanted {min_turns}: {s:?}",
        s.turns.len()
    );
    assert!(
        s.crest > 1e-3 && s.crest < 0.1 * DEPTH,
        "{label}: crest {} m, not a small wave",
        s.crest
    );
    assert!(
        err.abs() < bound,
        "{label}: period {:.4} s against {theory:.4} s ({:+.2} %, bound {:.0} %)",
        s.period,
        100.0 * err,
        100.0 * bound
    );
}

/// The CPU reference on the tank `width` wide at `dp` with `boundary` walls, sampled every 5 ms
/// to `periods` linear periods after the push.
fn cpu_swing(dp: f64, width: f64, boundary: &str, periods: f64) -> Swing {
    let case = case_with(dp, width, boundary);
    let c = case.constants().unwrap();
    let p = case.particles(&c).unwrap();
    let n = p.kind.len();
    let mut sim = SphSim::new(c, p);
    swing(
        |t| {
            sim.run_to(t);
            (mode_one(&sim.s), sim.s.step)
        },
        0.005,
        PUSH + periods * linear_period(LEN, DEPTH),
        n,
    )
}

fn case_with(dp: f64, width: f64, boundary: &str) -> SphCase {
    SphCase::from_toml_str(&case_text(dp, width, boundary)).unwrap_or_else(|e| panic!("{e}"))
}

/// CI: dp = L/40 (10 particles deep), the tank 12 dp (0.3 L) wide as on the device, to the
/// second turning point (about 0.9 s simulated, 3 minutes on 2 cores). Measured: 10.5 % short
/// (0.7908 s); bound 15 %. The device test holds the physics to 5 % at dp = L/160 (-3.6 %
/// measured; -6.0 % at L/80). Coarser is not useful: at L/32 the crest (7.5 mm) is below the
/// spacing (12.5 mm) and the period came out 30 % short.
#[test]
fn free_sloshing_on_the_cpu() {
    if decomposed_pass() {
        return;
    }
    let s = cpu_swing(LEN / 40.0, 0.3 * LEN, "dbc", 0.9);
    check("cpu dp = L/40, 0.3 L wide", &s, 2, 0.15);
}

/// CI: the same tank with mDBC walls (`boundary = "mdbc"`) as a quasi-2D slice 4 dp thick at
/// dp = L/40, to the third turning point (1.5 periods, about 4 minutes on 2 cores). The slice is
/// where dynamic boundaries fail (24.3 % short, above): measured with mDBC -1.49 % (0.8707 s);
/// bound 5 %.
#[test]
fn free_sloshing_with_mdbc_in_a_slice() {
    if decomposed_pass() {
        return;
    }
    let dp = LEN / 40.0;
    let s = cpu_swing(dp, 4.0 * dp, "mdbc", 1.6);
    check("cpu mdbc dp = L/40, a slice 4 dp thick", &s, 3, 0.05);
}

/// Device: the tank 0.3 L wide at each spacing of `PARTICLE_SHM_SLOSH_DPS`, two periods, with
/// each boundary condition of `PARTICLE_SHM_SLOSH_BOUNDARIES` (default "dbc,mdbc"), and a slice
/// 4 dp thick at dp = L/40 beside them. Dynamic boundaries: the error must shrink as the spacing
/// does, each spacing but the finest within 15 % and the finest within 5 % (L/40, L/80, L/160:
/// -10.7 %, -6.0 %, -3.6 %; 99 s on an H200); their slice is printed (-24.75 %). mDBC: every
/// run within 5 %, the slice included (measured -1.90 % for the slice, -0.69, -0.66 and +0.39 %
/// at L/40, L/80 and L/160; both conditions 214 s on an H200).
#[test]
fn free_sloshing_on_the_gpu() {
    if !sph::device_validation_wanted() {
        return;
    }
    let dps: Vec<f64> = std::env::var("PARTICLE_SHM_SLOSH_DPS")
        .unwrap_or_else(|_| "0.01,0.005,0.0025".into())
        .split(',')
        .map(|v| {
            v.trim()
                .parse()
                .unwrap_or_else(|_| panic!("PARTICLE_SHM_SLOSH_DPS: {v}"))
        })
        .collect();
    let boundaries =
        std::env::var("PARTICLE_SHM_SLOSH_BOUNDARIES").unwrap_or_else(|_| "dbc,mdbc".into());
    let theory = linear_period(LEN, DEPTH);
    let end = PUSH + 2.2 * theory;
    let run = |dp: f64, width: f64, boundary: &str| {
        let case = case_with(dp, width, boundary);
        let c = case.constants().unwrap();
        let p = case.particles(&c).unwrap();
        let n = p.kind.len();
        let mut sim = SphCuda::new(c, p, SphCudaOptions::default()).expect("GPU backend starts");
        swing(
            |t| {
                sim.run_to(t).expect("GPU step");
                (mode_one(&sim.state().expect("download")), sim.step_index())
            },
            0.005,
            end,
            n,
        )
    };
    let theory_err = |s: &Swing| ((s.period - theory) / theory).abs();
    for boundary in boundaries.split(',').map(str::trim) {
        let mdbc = boundary == "mdbc";
        let thin = run(0.01, 0.04, boundary);
        println!(
            "SLOSH gpu {boundary} dp = L/40, a slice 4 dp thick: period {:.4} s ({:+.2} %)",
            thin.period,
            100.0 * (thin.period - theory) / theory
        );
        if mdbc {
            check("gpu mdbc dp = L/40, a slice 4 dp thick", &thin, 4, 0.05);
        }
        let mut errs = Vec::new();
        for (k, &dp) in dps.iter().enumerate() {
            let s = run(dp, 0.3 * LEN, boundary);
            let finest = k + 1 == dps.len();
            check(
                &format!("gpu {boundary} dp = L/{:.0}, 0.3 L wide", LEN / dp),
                &s,
                4,
                if finest || mdbc { 0.05 } else { 0.15 },
            );
            errs.push(theory_err(&s));
        }
        if !mdbc {
            for w in errs.windows(2) {
                assert!(
                    w[1] < w[0],
                    "the error does not shrink with the spacing: {errs:?}"
                );
            }
        }
    }
}
