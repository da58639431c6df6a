//! Regression (hardening issue, item 1): absurd particle counts ended in the allocator's abort
//! ("memory allocation of 7516192768 bytes failed", exit 134) after minutes of placement:
//! `--particles 1000000000000`, `--particles 5000000000` (above the protocol's 2^32 - 1) and a
//! grid source of 1e12 sites. Now the count is checked against the protocol's limit and the
//! run's memory against MemAvailable before anything is allocated, with a message that says
//! what is needed and what is available.

#[path = "support/run_solver.rs"]
mod run_solver;

use run_solver::{assert_refused, run_solver, scratch_dir, unique_name};
use solver::Case;
use std::path::Path;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(60);

fn refused_particles(count: &str, parts: &[&str]) {
    let name = unique_name("particles");
    let out = run_solver(
        &[
            "--backend",
            "cpu",
            "--name-shm",
            &name,
            "--particles",
            count,
        ],
        LIMIT,
    );
    assert_refused(&out, &name, parts);
    assert!(
        out.elapsed < Duration::from_secs(20),
        "refusing took {:?}",
        out.elapsed
    );
}

#[test]
fn a_trillion_particles_are_refused_before_allocating() {
    refused_particles(
        "1000000000000",
        &[
            "built-in falling box of 1000000000000 particles",
            "sources[0].count = 1000000000000",
            "more than the 4294967295 particles",
        ],
    );
}

#[test]
fn more_particles_than_the_protocol_allows_are_refused() {
    refused_particles(
        "5000000000",
        &["sources[0].count = 5000000000", "4294967295"],
    );
}

#[test]
fn the_largest_count_the_flag_takes_is_refused_cleanly() {
    // Before: "out-of-range value for u64 type" (writing the case as TOML failed first).
    refused_particles(
        "18446744073709551615",
        &["sources[0].count = 18446744073709551615", "4294967295"],
    );
}

#[test]
fn a_count_within_the_protocol_but_beyond_memory_says_need_and_available() {
    if !Path::new("/proc/meminfo").exists() {
        println!("no /proc/meminfo: the memory check is skipped on this system");
        return;
    }
    // 4e9 particles need about 8 TB on the CPU backend.
    refused_particles(
        "4000000000",
        &[
            "4000000000 particles need about",
            "TiB of memory for a run on the CPU backend",
            "available (MemAvailable in /proc/meminfo)",
            "particles fit",
        ],
    );
}

const LATTICE: &str = r#"
dt = 1e-5
end_time = 0.1

[domain]
min = [0.0, 0.0, 0.0]
max = [100.0, 100.0, 100.0]

[contact_model]
type = "linear"

[[species]]
name = "fine"
radius = 0.004
density = 2500.0
normal_stiffness = 1e4
restitution = 0.5
sliding_friction = 0.5

[wall_material]
normal_stiffness = 1e4
restitution = 0.5
sliding_friction = 0.5

# No count: every site of a 10000^3 lattice.
[[sources]]
type = "grid"
species = "fine"
min = [0.0, 0.0, 0.0]
max = [100.0, 100.0, 100.0]
spacing = 0.01
"#;

#[test]
fn a_lattice_of_a_trillion_sites_is_refused_by_validation() {
    let dir = scratch_dir("absurd-lattice");
    let path = dir.join("lattice.toml");
    std::fs::write(&path, LATTICE).unwrap();
    let t = Instant::now();
    let e = Case::from_file(&path).expect_err("refused").to_string();
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "took {:?}",
        t.elapsed()
    );
    for p in [
        "lattice.toml",
        "sources[0] fills a lattice of 10000 x 10000 x 10000 = 1000000000000 sites",
        "4294967295",
    ] {
        assert!(e.contains(p), "{e:?} does not mention {p:?}");
    }

    let name = unique_name("lattice");
    let out = run_solver(
        &[
            "--backend",
            "cpu",
            "--name-shm",
            &name,
            "--case",
            path.to_str().unwrap(),
        ],
        LIMIT,
    );
    assert_refused(&out, &name, &["lattice.toml", "1000000000000 sites"]);
    std::fs::remove_dir_all(&dir).ok();
}

/// The placement layer checks by itself too: a caller that skips `validate_fields` (as
/// `CudaSim::from_case`'s tests of particle lists do) gets the error, not an abort.
#[test]
fn placement_checks_the_count_itself() {
    let mut case = Case::default_falling_box(1000);
    if let solver::case::Source::Grid { count, .. } = &mut case.sources[0] {
        *count = None;
    }
    if let solver::case::Source::Grid { spacing, .. } = &mut case.sources[0] {
        *spacing = 1e-5; // 200000^3 sites
    }
    let e = case.generate_particles().expect_err("refused").to_string();
    assert!(e.contains("sources[0] fills a lattice"), "{e}");
}

/// `--devices` takes GPU indices or `all`: anything else is refused by the argument parser with
/// a message naming the bad entry, before a segment exists.
#[test]
fn device_lists_that_are_not_gpu_indices_are_refused() {
    for (list, bad) in [("0,x", "`x`"), ("-1", "`-1`"), ("0,,1", "``")] {
        let name = unique_name("devices");
        let arg = format!("--devices={list}");
        let out = run_solver(&["--backend", "cuda", &arg, "--name-shm", &name], LIMIT);
        assert_eq!(out.code, Some(2), "--devices {list}: {}", out.stderr);
        assert!(
            out.stderr.contains(bad) && out.stderr.contains("is not a GPU index"),
            "--devices {list}: {}",
            out.stderr
        );
        assert!(!Path::new(&shm_protocol::shm_path(&name)).exists());
    }
}
