//! Clear messages and exit codes when nothing (or only a stale run) can be shown.

mod common;

use std::sync::atomic::Ordering;

use common::*;

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn missing_segment_names_it_and_fails() {
    let name = unique_name("missing");
    let out = out_path("missing.png");
    let o = viewer(&[
        "--attach",
        &name,
        "--snapshot",
        out.to_str().expect("utf-8"),
        "--wait",
        "0.3",
    ]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains(&name) && e.contains("no segment"), "{e}");
    assert!(!out.exists());
}

#[test]
fn invalid_name_is_rejected() {
    let o = viewer(&["--attach", "../etc", "--snapshot", "x.png"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("invalid segment name"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn stale_segment_still_renders_and_says_solver_gone() {
    let particles = block([0.1; 3], [0.4; 3], 0.03, 2.0);
    let mut seg = create("stale", &particles, vec![]);
    publish(&mut seg, &particles, &[], 7);
    // A pid that certainly no longer runs: a child that has exited and been reaped.
    let mut child = std::process::Command::new("true")
        .spawn()
        .expect("spawn true");
    let dead = child.id();
    child.wait().expect("wait");
    seg.publisher
        .region()
        .header()
        .owner_pid
        .store(dead, Ordering::Release);
    let out = out_path("stale.png");
    let o = viewer(&[
        "--attach",
        &seg.name,
        "--snapshot",
        out.to_str().expect("utf-8"),
        "--size",
        "64x48",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("solver gone"), "{}", stderr(&o));
    let png = Png::read(&out);
    assert!(png.rgb.iter().any(|p| *p != BACKGROUND));
}

#[test]
fn incompatible_version_is_explained() {
    let particles = block([0.1; 3], [0.4; 3], 0.05, 2.0);
    let mut seg = create("version", &particles, vec![]);
    publish(&mut seg, &particles, &[], 1);
    let h = seg.publisher.region().header();
    h.abi_version.store(99, Ordering::Release);
    let out = out_path("version.png");
    let o = viewer(&[
        "--attach",
        &seg.name,
        "--snapshot",
        out.to_str().expect("utf-8"),
        "--wait",
        "0.3",
    ]);
    h.abi_version
        .store(shm_protocol::ABI_VERSION, Ordering::Release);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains(&seg.name) && e.contains("ABI version 99"), "{e}");
}

#[test]
fn no_frame_yet_times_out_with_a_message() {
    let particles = block([0.1; 3], [0.4; 3], 0.05, 2.0);
    let seg = create("noframe", &particles, vec![]);
    let out = out_path("noframe.png");
    let o = viewer(&[
        "--attach",
        &seg.name,
        "--snapshot",
        out.to_str().expect("utf-8"),
        "--wait",
        "0.5",
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("no frame published"), "{}", stderr(&o));
}

#[test]
fn bad_arguments_are_usage_errors() {
    for args in [
        vec!["--attach", "x", "--snapshot", "a.png", "--size", "big"],
        vec![
            "--attach",
            "x",
            "--snapshot",
            "a.png",
            "--color-by",
            "colour",
        ],
        vec!["--attach", "x", "--snapshot", "a.png", "--camera", "1,2,-3"],
    ] {
        let o = viewer(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn bad_mesh_options_are_usage_errors_that_say_what_is_allowed() {
    let run = |extra: &[&str]| {
        let mut args = vec!["--attach", "x", "--snapshot", "a.png"];
        args.extend_from_slice(extra);
        let o = viewer(&args);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr(&o));
        stderr(&o)
    };
    let e = run(&["--meshes", "glass"]);
    assert!(
        e.contains("--meshes") && e.contains("solid, transparent, wireframe, hidden"),
        "{e}"
    );
    for bad in ["1.5", "-0.2", "nan", "opaque"] {
        let e = run(&["--mesh-opacity", bad]);
        assert!(
            e.contains("--mesh-opacity") && e.contains("from 0 (invisible) to 1 (opaque)"),
            "{e}"
        );
    }
}

#[test]
fn help_explains_the_mesh_modes() {
    let o = viewer(&["--help"]);
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    for want in [
        "--meshes <MODE>",
        "transparent",
        "inside a closed drum",
        "wireframe",
        "hidden",
        "--mesh-opacity <A>",
        "[default: 0.35]",
    ] {
        assert!(out.contains(want), "--help lacks {want:?}:\n{out}");
    }
}
