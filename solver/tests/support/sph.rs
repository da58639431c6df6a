//! Helpers of the SPH GPU tests: the GPU probes, a small collapsing column, a rocking tank with a
//! turning blade, bitwise comparison.
#![allow(dead_code)]

use solver::sph::cpu::SphState;
use solver::sph::cuda::SphCudaOptions;
use solver::sph::setup::SphCase;

pub fn gpu() -> bool {
    let ok = solver::dem::cuda::driver::driver_available().is_ok()
        && solver::dem::cuda::driver::device_count().is_ok_and(|n| n > 0);
    if !ok {
        println!("skipped: no GPU");
    }
    ok
}

/// Whether a device-only validation runs: `PARTICLE_SHM_TEST_BACKENDS` names `cuda` (otherwise
/// it says how to ask and skips), and then a GPU must be usable (a failure, not a skip).
pub fn device_validation_wanted() -> bool {
    let on = std::env::var("PARTICLE_SHM_TEST_BACKENDS").is_ok_and(|v| v.contains("cuda"));
    if !on {
        println!("skipped: set PARTICLE_SHM_TEST_BACKENDS=cuda on a GPU machine");
        return false;
    }
    let gpu = solver::dem::cuda::driver::driver_available().is_ok()
        && solver::dem::cuda::driver::device_count().is_ok_and(|n| n > 0);
    assert!(gpu, "PARTICLE_SHM_TEST_BACKENDS=cuda but no GPU is usable");
    true
}

pub const DOUBLE: SphCudaOptions = SphCudaOptions {
    device: 0,
    double: true,
};

/// A column 0.1 m wide and 0.2 m high collapsing in a 0.3 m tank (dp = 1 cm: about 2,000 fluid
/// and 5,000 boundary particles), with `extra` lines in its [sph] section.
pub fn column(extra: &str) -> SphCase {
    SphCase::from_toml_str(&column_text(extra)).unwrap_or_else(|e| panic!("{e}"))
}

pub fn column_text(extra: &str) -> String {
    format!(
        r#"
method = "sph"
dt = 1e-3
end_time = 1.0
[domain]
min = [0.0, 0.0, 0.0]
max = [0.3, 0.05, 0.25]
[sph]
spacing = 0.01
{extra}
[[fluid]]
min = [0.0, 0.0, 0.0]
max = [0.1, 0.05, 0.2]
"#
    )
}

pub fn assert_same_bits(cpu: &SphState, gpu: &SphState, what: &str) {
    assert_eq!(cpu.step, gpu.step, "{what}: step");
    assert_eq!(cpu.time.to_bits(), gpu.time.to_bits(), "{what}: time");
    assert_eq!(cpu.kind, gpu.kind, "{what}: kinds");
    let n = cpu.pos.len();
    let mut differ = 0;
    let mut first = None;
    for k in 0..n {
        let same = (0..3).all(|a| {
            cpu.pos[k][a].to_bits() == gpu.pos[k][a].to_bits()
                && cpu.vel[k][a].to_bits() == gpu.vel[k][a].to_bits()
        }) && cpu.rho[k].to_bits() == gpu.rho[k].to_bits();
        if !same {
            differ += 1;
            first.get_or_insert(k);
        }
    }
    if let Some(k) = first {
        panic!(
            "{what}: {differ} of {n} particles differ; first {k}: cpu {:?} {:?} {} gpu {:?} {:?} {}",
            cpu.pos[k], cpu.vel[k], cpu.rho[k], gpu.pos[k], gpu.vel[k], gpu.rho[k]
        );
    }
    // A Verlet run's state one step back.
    match (&cpu.prev, &gpu.prev) {
        (None, None) => {}
        (Some(a), Some(b)) => {
            let same = |x: f64, y: f64| x.to_bits() == y.to_bits();
            let differ = (0..n)
                .filter(|&k| {
                    !(same(a.rho[k], b.rho[k]) && (0..3).all(|i| same(a.vel[k][i], b.vel[k][i])))
                })
                .count();
            assert_eq!(
                differ, 0,
                "{what}: {differ} of {n} particles differ one step back"
            );
        }
        (a, b) => panic!(
            "{what}: one state has the step back, the other not ({} / {})",
            a.is_some(),
            b.is_some()
        ),
    }
}

/// A tank rocking +-3 degrees about the middle of its floor at 1 Hz (all its walls move) with a
/// blade turning at 60 rpm about a horizontal axis, across the split axis (x): the blade's
/// particles, and the walls' near a bound, change slab as they move. `spacing` in metres (2 to
/// 2.5 cm: 10,000 to 17,000 particles).
pub fn rocking_blade_text(spacing: f64) -> String {
    format!(
        r#"method = "sph"
dt = 1e-3
end_time = 1.0
[domain]
min = [0.0, 0.0, 0.0]
max = [1.0, 0.1, 0.3]
motion = {{ type = "rocking", axis_point = [0.5, 0.05, 0.0], axis_direction = [0.0, 1.0, 0.0], amplitude_deg = 3.0, frequency = 1.0, phase_deg = 0.0 }}
[sph]
spacing = {spacing:?}
[[fluid]]
min = [0.0, 0.0, 0.0]
max = [1.0, 0.1, 0.12]
[[obstacles]]
min = [0.4, 0.02, 0.14]
max = [0.6, 0.08, 0.18]
motion = {{ type = "rotation", axis_point = [0.5, 0.05, 0.16], axis_direction = [0.0, 1.0, 0.0], rpm = 60.0 }}
"#
    )
}
