//! What a run writes, set in its case file's `[output]` table or on the command line: VTK and
//! checkpoint intervals (DEM and SPH cases; the command line overrides the case) and the fields
//! each frame carries (`--fields` or `[output] fields`, SPH runs included). The real solver
//! binary against real segments.

use e2e_tests::*;
use shm_protocol::{Consumer, FieldKind};
use std::path::Path;
use std::time::Duration;

/// Runs case file `case` on the CPU into `seg` with `--output out` and `extra`.
fn into_dir(seg: &SegName, case: &Path, out: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let mut args = vec![
        "--case",
        case.to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
    ];
    args.extend(extra);
    solve_cpu(seg, &args)
}

/// Runs the solver with `args` to its end; returns the exit code and stderr.
fn run(args: &[&str]) -> (Option<i32>, String) {
    Running::spawn(solver(args)).wait_exit(Duration::from_secs(120))
}

/// The falling box with 216 spheres, to `end` s, with `output` as its `[output]` table.
fn small_box(end: f64, output: &str) -> String {
    let text = include_str!("../../solver/cases/falling_box.toml");
    let text = text
        .replace("end_time = 1.0\n", &format!("end_time = {end}\n"))
        .replace(
            "spacing = 0.1\ncount = 8000\n",
            "spacing = 0.3\ncount = 216\n",
        );
    let cut = text
        .find("[output]")
        .expect("the case has an [output] table");
    format!("{}[output]\n{output}\n", &text[..cut])
}

/// The files of `dir` whose names end with `ext`.
fn files_ending(dir: &Path, ext: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(ext))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn a_case_s_output_intervals_write_vtk_and_checkpoints() {
    let dir = scratch_dir("out-dem-case");
    let case = dir.join("box.toml");
    std::fs::write(
        &case,
        small_box(0.003, "vtk_interval = 0.001\ncheckpoint_interval = 0.0015"),
    )
    .unwrap();
    let out = dir.join("out");
    let seg = SegName::new("outcase");
    let (code, err) = into_dir(&seg, &case, &out, &[]);
    assert_eq!(code, Some(0), "{err}");
    // t = 0, 0.001, 0.002 and 0.003 (300 steps of 1e-5 s).
    let vtu = files_ending(&out, ".vtu");
    assert_eq!(
        vtu.len(),
        4,
        "VTK files every 0.001 s of 0.003: {vtu:?}\n{err}"
    );
    assert_eq!(files_ending(&out, ".pvd").len(), 1, "the series index");
    // Steps 150 and 300 (the final checkpoint is the last of them), and checkpoint.bin.
    let ckpt: Vec<String> = files_ending(&out, ".bin")
        .into_iter()
        .filter(|n| n.starts_with("checkpoint-"))
        .collect();
    assert_eq!(
        ckpt,
        vec!["checkpoint-000000150.bin", "checkpoint-000000300.bin"],
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_command_line_overrides_the_case_s_intervals() {
    let dir = scratch_dir("out-dem-cli");
    let case = dir.join("box.toml");
    std::fs::write(&case, small_box(0.003, "vtk_interval = 0.001")).unwrap();
    let out = dir.join("out");
    let seg = SegName::new("outcli");
    let (code, err) = into_dir(&seg, &case, &out, &["--output-every", "0.0015"]);
    assert_eq!(code, Some(0), "{err}");
    let vtu = files_ending(&out, ".vtu");
    assert_eq!(vtu.len(), 3, "t = 0, 0.0015, 0.003: {vtu:?}\n{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn case_intervals_without_an_output_directory_say_what_is_missing() {
    let dir = scratch_dir("out-dem-noout");
    let case = dir.join("box.toml");
    std::fs::write(&case, small_box(0.001, "vtk_interval = 0.0005")).unwrap();
    let seg = SegName::new("outnone");
    let (code, err) = solve_cpu(&seg, &["--case", case.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("output.vtk_interval") && err.contains("--output DIR"),
        "the log says the case's VTK interval needs --output: {err}"
    );
    // A case interval shorter than the time step writes nothing without --output (the run goes
    // on), and with it is refused by name, as --output-every is.
    std::fs::write(&case, small_box(0.001, "vtk_interval = 1e-7")).unwrap();
    let (code, err) = solve_cpu(&seg, &["--case", case.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    let out = dir.join("out");
    let (code, err) = into_dir(&seg, &case, &out, &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("output.vtk_interval") && err.contains("at least one time step"),
        "{err}"
    );
    assert!(
        !Path::new("/dev/shm").join(&seg.0).exists(),
        "a refused run leaves no segment"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The hydrostatic tank to 0.01 s with `extra` appended (a table of its own).
fn tank(extra: &str) -> String {
    format!("{}\n{extra}\n", sph_tank_case(0.01))
}

/// Runs an SPH case to its end and returns the last frame of its kept segment.
fn sph_frame(case: &Path, seg: &SegName, extra: &[&str]) -> shm_protocol::Frame {
    let mut args = vec!["--keep-shm", "--case", case.to_str().unwrap()];
    args.extend(extra);
    let (code, err) = solve_cpu(seg, &args);
    assert_eq!(code, Some(0), "{err}");
    newest_frame(seg)
}

#[test]
fn an_sph_run_publishes_only_the_fields_asked() {
    let dir = scratch_dir("out-sph-fields");
    let case = dir.join("tank.toml");
    std::fs::write(&case, tank("")).unwrap();
    let everything = sph_frame(&case, &SegName::new("sphall"), &[]);
    for (extra, tag) in [
        (&["--fields", "pos,pressure"][..], "sphfew"),
        (
            &["--fields", "pressure", "--subdomains", "2"][..],
            "sphfew2",
        ),
    ] {
        let f = sph_frame(&case, &SegName::new(tag), extra);
        for k in [
            FieldKind::Position,
            FieldKind::Pressure,
            FieldKind::ParticleKind,
        ] {
            assert!(f.meta.has(k), "{extra:?}: {k:?} missing");
        }
        for k in [FieldKind::Velocity, FieldKind::Density] {
            assert!(!f.meta.has(k), "{extra:?}: {k:?} was not asked for");
        }
        assert!(f.velocities.is_none() && f.densities.is_none());
        // The same values as the frame that carries everything.
        assert_eq!(f.positions, everything.positions, "{extra:?}");
        assert_eq!(f.pressures, everything.pressures, "{extra:?}");
        assert_eq!(f.particle_kinds, everything.particle_kinds, "{extra:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_sph_case_s_output_table_sets_fields_and_intervals() {
    let dir = scratch_dir("out-sph-case");
    let case = dir.join("tank.toml");
    std::fs::write(
        &case,
        tank("[output]\nfields = [\"pos\", \"density\"]\nvtk_interval = 0.005"),
    )
    .unwrap();
    let out = dir.join("out");
    let seg = SegName::new("sphcase");
    let f = sph_frame(&case, &seg, &["--output", out.to_str().unwrap()]);
    assert!(f.meta.has(FieldKind::Density) && f.densities.is_some());
    assert!(!f.meta.has(FieldKind::Velocity) && !f.meta.has(FieldKind::Pressure));
    // t = 0, 0.005 and 0.01.
    let vtu = files_ending(&out, ".vtu");
    assert_eq!(vtu.len(), 3, "{vtu:?}");

    // The segment cannot resume the run (no velocities): a clear error, the segment unchanged.
    let seq = f.meta.seq;
    let (code, err) = run(&[
        "--load-shm",
        &seg.0,
        "--backend",
        "cpu",
        "--end-time",
        "0.02",
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("velocities") && err.contains("--restart"),
        "the error names what the frame lacks and what to use instead: {err}"
    );
    let c = Consumer::attach(&seg.0).expect("the segment is still there");
    assert_eq!(c.read_newest().unwrap().unwrap().meta.seq, seq);
    drop(c);

    // Its checkpoint continues with the fields the command line asks for now.
    let ckpt = out.join("checkpoint.bin");
    let again = SegName::new("sphagain");
    let (code, err) = solve_cpu(
        &again,
        &[
            "--keep-shm",
            "--restart",
            ckpt.to_str().unwrap(),
            "--end-time",
            "0.015",
            "--fields",
            "vel,pressure",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let f = newest_frame(&again);
    assert!(f.velocities.is_some() && f.pressures.is_some() && f.densities.is_none());
    assert!((f.meta.sim_time - 0.015).abs() < 1e-9);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sph_fields_the_method_does_not_publish_are_refused_by_name() {
    let dir = scratch_dir("out-sph-badfields");
    let case = dir.join("tank.toml");
    std::fs::write(&case, tank("")).unwrap();
    let seg = SegName::new("sphbad");
    for (fields, says) in [
        ("omega", "does not publish \"omega\""),
        ("colour", "unknown frame field \"colour\""),
    ] {
        let (code, err) = solve_cpu(
            &seg,
            &["--case", case.to_str().unwrap(), "--fields", fields],
        );
        assert_eq!(code, Some(1), "{err}");
        assert!(
            err.contains(says) && err.contains("pressure"),
            "{fields}: the error names the field and what SPH publishes: {err}"
        );
        assert!(!Path::new("/dev/shm").join(&seg.0).exists());
    }
    std::fs::write(&case, tank("[output]\nfields = [\"force\"]")).unwrap();
    let (code, err) = solve_cpu(&seg, &["--case", case.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("output.fields") && err.contains("force"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
