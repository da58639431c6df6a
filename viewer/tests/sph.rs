//! SPH runs in `--snapshot` images: boundary particles hidden by default (`--boundary`,
//! `--hide-boundary`), colouring by pressure by default, the colour following the pressure.
//! First on a hand-built SPH segment with known pressures, then on a real segment written by
//! the solver binary (`target/<profile>/solver`, built by `cargo test --workspace`).

mod common;

use std::process::Command;

use common::*;
use shm_protocol::Consumer;

const W: usize = 320;
const H: usize = 240;

/// A rectangle of pixels.
type Rect = (usize, usize, usize, usize);

/// Front camera at distance `dist` from `center` (the world box centre), as `project_front`
/// but for any box: pixel of world point `p`.
fn project(p: [f32; 3], center: [f32; 3], dist: f32) -> (f32, f32) {
    let depth = dist + (p[1] - center[1]);
    let scale = 0.5 * H as f32 / (17.5f32).to_radians().tan();
    (
        0.5 * W as f32 + (p[0] - center[0]) / depth * scale,
        0.5 * H as f32 - (p[2] - center[2]) / depth * scale,
    )
}

/// Pixels of the x-z rectangle [x0, x1] x [z0, z1] at y = `y`, shrunk by `margin` pixels.
fn rect(x: [f32; 2], z: [f32; 2], y: f32, center: [f32; 3], dist: f32, margin: f32) -> Rect {
    let (px0, py1) = project([x[0], y, z[0]], center, dist);
    let (px1, py0) = project([x[1], y, z[1]], center, dist);
    (
        (px0 + margin) as usize,
        (py0 + margin) as usize,
        (px1 - margin) as usize,
        (py1 - margin) as usize,
    )
}

fn pixels(img: &Png, r: Rect) -> Vec<[u8; 3]> {
    img.region(r.0, r.1, r.2, r.3)
}

fn is_bg(p: &[u8; 3]) -> bool {
    *p == BACKGROUND
}
/// Low end of viridis (dark violet), shaded.
fn violet(p: &[u8; 3]) -> bool {
    p[2] > p[1] && p[0] > p[1]
}
/// High end of viridis (yellow), shaded.
fn yellow(p: &[u8; 3]) -> bool {
    p[0] > 60 && p[1] as i32 > p[2] as i32 + 40
}
fn grey(p: &[u8; 3]) -> bool {
    !is_bg(p) && p[0].abs_diff(p[2]) < 25 && p[0].abs_diff(p[1]) < 25
}

/// Runs `viewer --snapshot` on `seg` with `camera` and `extra`; the image and stderr.
fn snapshot(seg: &str, file: &str, camera: &str, extra: &[&str]) -> (Png, String) {
    let out = out_path(file);
    let size = format!("{W}x{H}");
    let mut args = vec![
        "--attach",
        seg,
        "--snapshot",
        out.to_str().expect("utf-8 path"),
        "--size",
        &size,
        "--camera",
        camera,
    ];
    args.extend_from_slice(extra);
    let o = viewer(&args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "viewer {extra:?} failed: {err}");
    (Png::read(&out), err)
}

const CENTER: [f32; 3] = [0.5; 3];
const DIST: f32 = 3.0;
const CAMERA: &str = "-90,0,3";

#[test]
fn boundary_hidden_by_default_and_pressure_colours_the_fluid() {
    let (seg, fluid) = publish_sph("hide");
    let (img, err) = snapshot(&seg.name, "sph-default.png", CAMERA, &[]);
    // Only the fluid is drawn.
    assert!(
        err.contains(&format!("{fluid} particles drawn")),
        "{fluid} fluid particles: {err}"
    );
    let mid_y = 0.5;
    let fluid_rect = rect([0.3, 0.7], [0.1, 0.5], mid_y, CENTER, DIST, 3.0);
    assert!(fraction(&pixels(&img, fluid_rect), |p| !is_bg(p)) > 0.95);
    // Low pressure at the top (violet), high at the bottom (yellow): the colour follows the
    // pressure, over the fluid's range only.
    // The bottom and top rows of the front layer of particles (y = 0.32), what the camera sees.
    let front = FLUID_LO[1] + SPH_R;
    let top = rect([0.3, 0.7], [0.46, 0.5], front, CENTER, DIST, 2.0);
    let bottom = rect([0.3, 0.7], [0.1, 0.14], front, CENTER, DIST, 2.0);
    let (t, b) = (pixels(&img, top), pixels(&img, bottom));
    let (tv, by) = (fraction(&t, violet), fraction(&b, yellow));
    assert!(
        tv > 0.8 && by > 0.8,
        "top violet {tv:.3}, bottom yellow {by:.3}"
    );
    // Between the fluid and the lid, and beside the fluid, inside the (hidden) walls: empty.
    let above = rect([0.3, 0.7], [0.55, 0.85], mid_y, CENTER, DIST, 0.0);
    let beside = rect([0.72, 0.78], [0.1, 0.8], mid_y, CENTER, DIST, 0.0);
    assert!(fraction(&pixels(&img, above), is_bg) > 0.99, "walls drawn");
    assert!(fraction(&pixels(&img, beside), is_bg) > 0.99, "walls drawn");

    // --hide-boundary is the default spelled out: the same pixels.
    let (same, _) = snapshot(&seg.name, "sph-hide.png", CAMERA, &["--hide-boundary"]);
    assert!(
        same.rgb == img.rgb,
        "--hide-boundary differs from the default"
    );

    // Shown: the front wall covers everything inside the tank, coloured by its pressure (the
    // top of the range now).
    let (shown, err) = snapshot(&seg.name, "sph-shown.png", CAMERA, &["--boundary", "shown"]);
    assert!(!err.contains(&format!("{fluid} particles drawn")), "{err}");
    assert!(fraction(&pixels(&shown, above), |p| !is_bg(p)) > 0.95);
    let y = fraction(&pixels(&shown, fluid_rect), yellow);
    assert!(y > 0.6, "front wall yellow over {y:.3} of the fluid");

    // Dimmed: small grey dots, the fluid's colours seen between them.
    let (dim, _) = snapshot(
        &seg.name,
        "sph-dimmed.png",
        CAMERA,
        &["--boundary", "dimmed"],
    );
    let a = pixels(&dim, above);
    let dots = fraction(&a, |p| !is_bg(p));
    assert!(dots > 0.005 && dots < 0.2, "dimmed walls cover {dots:.3}");
    assert!(fraction(&a, grey) > 0.9 * dots, "dimmed walls not grey");
    assert!(fraction(&pixels(&dim, top), violet) > 0.8);
    assert!(fraction(&pixels(&dim, bottom), yellow) > 0.8);

    // An explicit colouring still wins: species, the fluid's (blue).
    let (species, _) = snapshot(
        &seg.name,
        "sph-species.png",
        CAMERA,
        &["--color-by", "species"],
    );
    let bluish = |p: &[u8; 3]| p[2] as i32 > p[0] as i32 + 20;
    assert!(fraction(&pixels(&species, fluid_rect), bluish) > 0.9);
}

#[test]
fn conflicting_boundary_flags_are_refused() {
    let o = viewer(&[
        "--attach",
        "x",
        "--snapshot",
        "x.png",
        "--hide-boundary",
        "--boundary",
        "shown",
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--boundary"), "{err}");
    let o = viewer(&[
        "--attach",
        "x",
        "--snapshot",
        "x.png",
        "--boundary",
        "faint",
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("hidden") && err.contains("dimmed") && err.contains("shown"),
        "{err}"
    );
}

/// A real SPH segment: the solver runs a still tank 0.2 x 0.1 m, 0.2 m of water (dp = 2 cm:
/// 500 fluid particles inside four layers of boundary particles) for 10 ms.
#[test]
fn a_real_sph_segment_shows_the_fluid_coloured_by_pressure() {
    let Some(solver) = e2e_tests::built_solver() else {
        return;
    };
    let seg = unique_name("solver");
    let dir = out_path("sph-case");
    std::fs::create_dir_all(&dir).expect("case dir");
    let case = dir.join("tank.toml");
    std::fs::write(&case, e2e_tests::sph_tank_case(0.01)).expect("write case");
    struct Unlink(String);
    impl Drop for Unlink {
        fn drop(&mut self) {
            let _ = shm_protocol::segment::unlink(&self.0);
        }
    }
    let _unlink = Unlink(seg.clone());
    let o = Command::new(solver)
        .args(["--case"])
        .arg(&case)
        .args(["--name-shm", &seg, "--backend", "cpu", "--keep-shm"])
        .args(["--threads", "1"])
        .output()
        .expect("run the solver");
    assert!(
        o.status.success(),
        "solver failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let st = Consumer::attach(&seg)
        .expect("attach")
        .read_static()
        .expect("static");
    let center: [f32; 3] =
        std::array::from_fn(|k| (0.5 * (st.world_min[k] + st.world_max[k])) as f32);
    let dist = 1.2;
    let camera = format!("-90,0,{dist}");
    let (img, err) = snapshot(&seg, "sph-solver.png", &camera, &[]);
    assert!(err.contains("500 particles drawn"), "{err}");
    let y = 0.05;
    let fluid = rect([0.0, 0.2], [0.0, 0.2], y, center, dist, 4.0);
    assert!(fraction(&pixels(&img, fluid), |p| !is_bg(p)) > 0.9);
    let top = rect([0.0, 0.2], [0.16, 0.2], y, center, dist, 4.0);
    let bottom = rect([0.0, 0.2], [0.0, 0.04], y, center, dist, 4.0);
    let (t, b) = (
        fraction(&pixels(&img, top), violet),
        fraction(&pixels(&img, bottom), yellow),
    );
    assert!(
        t > 0.7 && b > 0.7,
        "top violet {t:.2}, bottom yellow {b:.2}"
    );
    // Above the water, inside the tank: the walls are hidden, nothing there.
    let air = rect([0.0, 0.2], [0.22, 0.28], y, center, dist, 2.0);
    assert!(fraction(&pixels(&img, air), is_bg) > 0.97, "walls drawn");
    let (shown, _) = snapshot(
        &seg,
        "sph-solver-shown.png",
        &camera,
        &["--boundary", "shown"],
    );
    assert!(
        fraction(&pixels(&shown, air), |p| !is_bg(p)) > 0.95,
        "walls not drawn"
    );
}
