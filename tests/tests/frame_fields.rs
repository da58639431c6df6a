//! Frame field masks end to end (solver core issue, item 6): the real solver binary, a real
//! segment. By default a DEM run reserves and fills positions, velocities, angular velocities
//! and contact counts, not forces; `--fields` (or the case's `[output] fields`) chooses, and
//! what it does not name costs no memory; unknown or foreign fields are refused at start with
//! nothing left behind.

use e2e_tests::*;
use shm_protocol::{Consumer, FieldKind};
use std::path::Path;
use std::time::Duration;

/// Runs a short CPU run into `name` (kept), returns the reserved mask and the newest frame's.
fn run(name: &str, extra: &[&str]) -> (u32, u32, shm_protocol::Frame) {
    let mut args = vec![
        "--name-shm",
        name,
        "--backend",
        "cpu",
        "--particles",
        "300",
        // Long enough for the spheres to land (0.3 s, 30,000 steps of 300 spheres, ~3 s).
        "--end-time",
        "0.3",
        "--keep-shm",
    ];
    args.extend_from_slice(extra);
    let (code, err) = Running::spawn(solver(&args)).wait_exit(Duration::from_secs(60));
    assert_eq!(code, Some(0), "{extra:?}: {err}");
    let c = Consumer::attach(name).expect("attach");
    let reserved = c.region().capacities().fields;
    let f = c.read_newest().expect("read").expect("a frame");
    (reserved, f.meta.fields, f)
}

fn mask(fields: &[FieldKind]) -> u32 {
    fields.iter().fold(0, |m, f| m | f.bit())
}

#[test]
fn default_fields_leave_forces_out_and_fields_choose() {
    use FieldKind::*;
    let a = SegName::new("fields-default");
    let (reserved, filled, f) = run(&a.0, &[]);
    let want = mask(&[Position, Velocity, AngularVelocity, ContactCount]);
    assert_eq!(reserved, want, "default reservation");
    assert_eq!(filled, want, "default frame");
    assert!(f.forces.is_none() && f.contact_counts.is_some());

    let b = SegName::new("fields-force");
    let (reserved, filled, f) = run(&b.0, &["--fields", "vel,force"]);
    // Positions are always there.
    assert_eq!(reserved, mask(&[Position, Velocity, Force]));
    assert_eq!(filled, reserved);
    let forces = f.forces.expect("forces were asked for");
    assert!(
        forces.iter().any(|v| v.iter().any(|&c| c != 0.0)),
        "particles touching the floor feel a force"
    );
    assert!(f.angular_velocities.is_none() && f.contact_counts.is_none());

    // The same positions whatever the fields: a frame's content does not depend on its mask.
    let c = Consumer::attach(&a.0)
        .unwrap()
        .read_newest()
        .unwrap()
        .unwrap();
    assert_eq!(c.meta.step, f.meta.step);
    assert_eq!(c.positions, f.positions);
    let _ = shm_protocol::segment::unlink(&a.0);
    let _ = shm_protocol::segment::unlink(&b.0);
}

#[test]
fn the_case_file_chooses_fields_and_bad_ones_are_refused_by_name() {
    use FieldKind::*;
    let dir = std::env::temp_dir().join(format!("pshm-fields-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let base = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../solver/cases/falling_box.toml"),
    )
    .expect("example case");
    let with = |file: &str, fields: &str| {
        let p = dir.join(file);
        let text = if base.contains("[output]") {
            base.replace("[output]", &format!("[output]\nfields = {fields}"))
        } else {
            format!("{base}\n[output]\nfields = {fields}\n")
        };
        std::fs::write(&p, text).unwrap();
        p
    };
    let good = with("good.toml", r#"["pos", "contacts", "force"]"#);
    let a = SegName::new("fields-case");
    let args = [
        "--name-shm",
        &a.0,
        "--backend",
        "cpu",
        "--end-time",
        "0.001",
        "--keep-shm",
        "--case",
        good.to_str().unwrap(),
    ];
    let (code, err) = Running::spawn(solver(&args)).wait_exit(Duration::from_secs(60));
    assert_eq!(code, Some(0), "{err}");
    let c = Consumer::attach(&a.0).expect("attach");
    assert_eq!(
        c.region().capacities().fields,
        mask(&[Position, ContactCount, Force])
    );
    drop(c);
    let _ = shm_protocol::segment::unlink(&a.0);

    // Unknown names and fields DEM does not publish: refused before any segment exists.
    let bad_case = with("bad.toml", r#"["pos", "temperature"]"#);
    for (extra, expect) in [
        (
            vec!["--fields", "pos,density"],
            "--fields: the dem method does not publish \"density\"",
        ),
        (vec!["--fields", "colour"], "unknown frame field \"colour\""),
        (
            vec!["--case", bad_case.to_str().unwrap()],
            "output.fields unknown frame field \"temperature\"",
        ),
    ] {
        let b = SegName::new("fields-bad");
        let mut args = vec![
            "--name-shm",
            &b.0,
            "--backend",
            "cpu",
            "--end-time",
            "0.001",
        ];
        if !extra.contains(&"--case") {
            args.extend(["--particles", "100"]);
        }
        args.extend(extra.iter().copied());
        let (code, err) = Running::spawn(solver(&args)).wait_exit(Duration::from_secs(60));
        assert_ne!(code, Some(0), "{extra:?} was accepted");
        assert!(err.contains(expect), "{extra:?}: {err}");
        assert!(
            err.contains("pos, vel, omega, force, contacts"),
            "the error lists what DEM publishes: {err}"
        );
        assert!(
            !Path::new(&shm_protocol::shm_path(&b.0)).exists(),
            "nothing left behind"
        );
    }
    // A resumed run keeps the segment's fields: --fields is refused before anything is read.
    let (code, err) = Running::spawn(solver(&["--load-shm", "fields-none", "--fields", "pos"]))
        .wait_exit(Duration::from_secs(30));
    assert_ne!(code, Some(0));
    assert!(err.contains("--fields does not apply"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}
