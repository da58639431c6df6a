//! Regression (hardening issue, item 2): `random_box` placement had no time bound: `count =
//! 1000000` in a box that holds about 100 spheres ran silently until killed. Now the solid
//! fraction is checked first (refused above `ranges::RANDOM_BOX_MAX_FRACTION`, naming the
//! fraction and the count that fits), the search is bounded in attempts and in wall time, and a
//! long placement logs its progress.

#[path = "support/run_solver.rs"]
mod run_solver;

use run_solver::{assert_refused, run_solver, scratch_dir, unique_name};
use solver::case::{ranges, PlacementLimits, Source};
use solver::Case;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A 0.1 m box: about 100 spheres of radius 1 cm would fill it at the jamming fraction.
const CROWDED: &str = r#"
dt = 1e-4
end_time = 0.1

[domain]
min = [0.0, 0.0, 0.0]
max = [0.1, 0.1, 0.1]

[contact_model]
type = "linear"

[[species]]
name = "glass"
radius = 0.01
density = 2500.0
normal_stiffness = 1e4
restitution = 0.5
sliding_friction = 0.5

[wall_material]
normal_stiffness = 1e4
restitution = 0.5
sliding_friction = 0.5

[[sources]]
type = "random_box"
species = "glass"
min = [0.0, 0.0, 0.0]
max = [0.1, 0.1, 0.1]
count = 1000000
"#;

#[test]
fn an_impossible_count_is_refused_at_once_through_the_binary() {
    let dir = scratch_dir("random-box");
    let path = dir.join("crowded.toml");
    std::fs::write(&path, CROWDED).unwrap();
    let name = unique_name("crowded");
    let out = run_solver(
        &[
            "--backend",
            "cpu",
            "--name-shm",
            &name,
            "--case",
            path.to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    // 1e6 x 4.19e-6 m^3 / 1e-3 m^3 = 4189; 0.35 x 1e-3 / 4.19e-6 = 83.
    assert_refused(
        &out,
        &name,
        &[
            "crowded.toml",
            "sources[0].count = 1000000",
            "solid fraction of 4.189e3",
            "cannot exceed 0.35",
            "at most 83 particles fit",
        ],
    );
    assert!(
        out.elapsed < Duration::from_secs(10),
        "took {:?}",
        out.elapsed
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// A case with one random box of `count` spheres of radius 1 cm filling `fraction` of a cube.
fn random_case(count: usize, fraction: f64) -> Case {
    let mut case = Case::default_falling_box(1000);
    let r = 0.01f64;
    case.species[0].radius = r;
    let side = (count as f64 * 4.0 / 3.0 * std::f64::consts::PI * r.powi(3) / fraction).cbrt();
    case.domain.max = [side; 3];
    case.sources = vec![Source::RandomBox {
        species: "glass".into(),
        min: [0.0; 3],
        max: [side; 3],
        count,
        seed: 7,
        velocity: [0.0; 3],
        shape: None,
    }];
    case
}

#[test]
fn fraction_bound_is_checked_by_validation_and_placement() {
    let case = random_case(1000, 0.36);
    let e = case.validate_fields().expect_err("refused").to_string();
    assert!(e.contains("sources[0].count = 1000"), "{e}");
    assert!(e.contains("solid fraction of 0.360"), "{e}");
    let e = case.generate_particles().expect_err("refused").to_string();
    assert!(e.contains("solid fraction of 0.360"), "{e}");
    const { assert!(ranges::RANDOM_BOX_MAX_FRACTION < 0.38) };
    // Below the bound it is placed, deterministically.
    let ok = random_case(1000, 0.2);
    let a = ok.generate_particles().unwrap();
    assert_eq!(a, ok.generate_particles().unwrap());
    assert_eq!(a.len(), 1000);
}

#[test]
fn attempts_are_bounded() {
    // Allowed fraction, but 100 spheres in a box this small jam (the walls): the attempt bound
    // (here 50 per particle) ends it.
    let case = random_case(100, 0.34);
    let limits = PlacementLimits {
        attempts_per_particle: 50,
        ..PlacementLimits::default()
    };
    let t = Instant::now();
    let e = case
        .generate_particles_with(&limits)
        .expect_err("the box jams")
        .to_string();
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(e.contains("sources[0]: could place only"), "{e}");
    assert!(e.contains("of 100 particles"), "{e}");
    assert!(e.contains("gave up after 100"), "{e}"); // at least 100,000 attempts in all
}

/// Collects formatted tracing output.
#[derive(Clone, Default)]
struct Sink(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Sink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn wall_time_is_bounded_and_progress_is_logged() {
    // Near jamming with unlimited attempts: only the clock stops it.
    let case = random_case(20_000, 0.345);
    let limits = PlacementLimits {
        attempts_per_particle: u64::MAX,
        max_seconds: 0.6,
        progress_every: 0.1,
    };
    let sink = Sink::default();
    let writer = sink.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let t = Instant::now();
    let result =
        tracing::subscriber::with_default(subscriber, || case.generate_particles_with(&limits));
    let elapsed = t.elapsed();
    let log = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
    let e = result.expect_err("stopped by the clock").to_string();
    assert!(elapsed < Duration::from_secs(5), "took {elapsed:?}");
    assert!(e.contains("gave up after 0.6 s"), "{e}");
    assert!(e.contains("of 20000 particles"), "{e}");
    assert!(
        log.contains("sources[0]: placed ") && log.contains("/20000 particles"),
        "no progress line in:\n{log}"
    );
}
