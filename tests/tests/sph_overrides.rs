//! An SPH run's command-line overrides of its case (`--dt`, `--end-time`, `--spacing`) are the
//! run's case: the segment and the checkpoints keep them, so a restart or a resume continues the
//! run that was started, not the case file's. The real solver binary against real segments.

use e2e_tests::*;
use std::path::Path;
use std::time::Duration;

/// Runs the solver with `args` to its end; returns the exit code and stderr.
fn run(args: &[&str]) -> (Option<i32>, String) {
    Running::spawn(solver(args)).wait_exit(Duration::from_secs(120))
}

/// The hydrostatic tank (its case file's dt = 1e-3 s; the CFL step is about 2.4e-4 s).
fn tank_file(dir: &Path) -> String {
    let case = dir.join("tank.toml");
    std::fs::write(&case, sph_tank_case(1.0)).unwrap();
    case.to_string_lossy().into_owned()
}

/// The checkpoints in `dir`, oldest first.
fn checkpoints(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("checkpoint-"))
        })
        .collect();
    v.sort();
    v
}

#[test]
fn a_restart_continues_the_time_step_the_command_line_set() {
    let dir = scratch_dir("over-dt");
    let case = tank_file(&dir);
    let out = dir.join("out");
    // --dt 1e-4 caps every step below the CFL step: the run's steps are the cap's.
    let whole = SegName::new("dtwhole");
    let (code, err) = solve_cpu(
        &whole,
        &[
            "--keep-shm",
            "--case",
            &case,
            "--dt",
            "1e-4",
            "--end-time",
            "0.004",
            "--output",
            out.to_str().unwrap(),
            "--checkpoint-every",
            "0.002",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let first = checkpoints(&out)
        .into_iter()
        .next()
        .expect("a periodic checkpoint");
    let again = SegName::new("dtagain");
    let (code, err) = solve_cpu(
        &again,
        &[
            "--keep-shm",
            "--restart",
            first.to_str().unwrap(),
            "--end-time",
            "0.004",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let (a, b) = (newest_frame(&whole), newest_frame(&again));
    // 0.004 s in steps of the 1e-4 cap (the last one a sliver of rounding), not the CFL's 17.
    assert!((40..=41).contains(&a.meta.step), "{}", a.meta.step);
    assert_eq!(
        b.meta.step, a.meta.step,
        "the restart kept the step the run was given"
    );
    same_sph_frame(&a, "the run restarted from its checkpoint", &b);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_resumed_or_restarted_run_keeps_the_overrides_it_was_given() {
    let dir = scratch_dir("over-resume");
    let case = tank_file(&dir);
    // The file's step: every step the CFL's, about 2.4e-4 s.
    let seg = SegName::new("rsfirst");
    let (code, err) = solve_cpu(
        &seg,
        &["--keep-shm", "--case", &case, "--end-time", "0.002"],
    );
    assert_eq!(code, Some(0), "{err}");
    let start = newest_frame(&seg).meta.step;

    // Resumed from the segment with a smaller step and a later end, writing a checkpoint.
    let out = dir.join("resumed");
    let (code, err) = run(&[
        "--load-shm",
        &seg.0,
        "--backend",
        "cpu",
        "--keep-shm",
        "--dt",
        "1e-4",
        "--end-time",
        "0.004",
        "--output",
        out.to_str().unwrap(),
        "--checkpoint-every",
        "0.001",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let resumed = newest_frame(&seg);
    assert!(
        (19..=21).contains(&(resumed.meta.step - start)),
        "0.002 s in steps of 1e-4: {} steps",
        resumed.meta.step - start
    );
    // Its first checkpoint, at 0.003 s, restarts with that step and end: to the same frame,
    // bit for bit, with neither given again (the segment's case text had kept the first run's
    // end, 0.002 s, and the file's step, so the restart stopped at once).
    let first = checkpoints(&out).into_iter().next().expect("a checkpoint");
    let again = SegName::new("rsagain");
    let (code, err) = solve_cpu(
        &again,
        &["--keep-shm", "--restart", first.to_str().unwrap()],
    );
    assert_eq!(code, Some(0), "{err}");
    let restarted = newest_frame(&again);
    assert_eq!(restarted.meta.step, resumed.meta.step, "{err}");
    same_sph_frame(
        &resumed,
        "the run restarted from its checkpoint",
        &restarted,
    );

    // A restart given a later end keeps it too: its own first checkpoint (0.004 s) restarts
    // to that end.
    let out2 = dir.join("restarted");
    let (code, err) = solve_cpu(
        &again,
        &[
            "--keep-shm",
            "--restart",
            first.to_str().unwrap(),
            "--end-time",
            "0.005",
            "--output",
            out2.to_str().unwrap(),
            "--checkpoint-every",
            "0.001",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let longer = newest_frame(&again);
    assert!((longer.meta.sim_time - 0.005).abs() < 1e-9);
    let second = checkpoints(&out2).into_iter().next().expect("a checkpoint");
    let third = SegName::new("rsthird");
    let (code, err) = solve_cpu(
        &third,
        &["--keep-shm", "--restart", second.to_str().unwrap()],
    );
    assert_eq!(code, Some(0), "{err}");
    same_sph_frame(&longer, "the restart's restart", &newest_frame(&third));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn spacing_sets_the_resolution_of_an_sph_case() {
    let dir = scratch_dir("over-dp");
    let case = tank_file(&dir);
    // 0.2 x 0.1 x 0.2 m of water: 10 x 5 x 10 = 500 sites at 2 cm (the file's), 4,000 at 1 cm.
    let fine = SegName::new("dpfine");
    let (code, err) = solve_cpu(
        &fine,
        &[
            "--keep-shm",
            "--case",
            &case,
            "--spacing",
            "0.01",
            "--end-time",
            "0.001",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let f = newest_frame(&fine);
    let kinds = f.particle_kinds.as_ref().expect("kinds");
    assert_eq!(
        kinds.iter().filter(|&&k| k == 1).count(),
        4000,
        "fluid at 1 cm"
    );
    assert!(
        err.contains("dp = 0.01 m"),
        "the start log says the spacing: {err}"
    );

    // The segment keeps the spacing: the run resumes from it (its case places the same sites).
    let (code, err) = run(&[
        "--load-shm",
        &fine.0,
        "--backend",
        "cpu",
        "--keep-shm",
        "--end-time",
        "0.002",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!((newest_frame(&fine).meta.sim_time - 0.002).abs() < 1e-9);

    // A spacing whose particles would not fit this machine's memory is refused before anything
    // is placed, saying what fits: the dam break at 1 mm is about 750 M particles, 474 GiB on
    // the CPU (more than any machine these tests run on).
    let dambreak = Path::new(env!("CARGO_MANIFEST_DIR")).join("../solver/cases/dambreak.toml");
    let huge = SegName::new("dphuge");
    let (code, err) = solve_cpu(
        &huge,
        &["--case", dambreak.to_str().unwrap(), "--spacing", "0.001"],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("of memory for an SPH run on the CPU")
            && err.contains("particles fit")
            && err.contains("--spacing"),
        "{err}"
    );
    assert!(!Path::new("/dev/shm").join(&huge.0).exists());

    // Absurd spacings are refused by name; a DEM run refuses the option.
    let seg = SegName::new("dpbad");
    for (args, says) in [
        (vec!["--case", &case, "--spacing", "0.5"], "sph.spacing"),
        (vec!["--case", &case, "--spacing=-1"], "--spacing"),
        (vec!["--case", &case, "--spacing", "nan"], "--spacing"),
        (vec!["--particles", "100", "--spacing", "0.01"], "SPH"),
    ] {
        let (code, err) = solve_cpu(&seg, &args);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!Path::new("/dev/shm").join(&seg.0).exists());
    }
    let _ = std::fs::remove_dir_all(&dir);
}
