//! End-to-end: publish frames with a known layout, run `viewer --snapshot`, check pixel colours.

mod common;

use common::*;
use shm_protocol::BodyTransform;

const W: usize = 320;
const H: usize = 240;
const DIST: f32 = 3.0;
const CAMERA: &str = "-90,0,3";

fn snapshot(seg: &Seg, file: &str, extra: &[&str]) -> Png {
    let out = out_path(file);
    let size = format!("{W}x{H}");
    let mut args = vec![
        "--attach",
        &seg.name,
        "--snapshot",
        out.to_str().expect("utf-8 path"),
        "--size",
        &size,
        "--camera",
        CAMERA,
    ];
    args.extend_from_slice(extra);
    let o = viewer(&args);
    assert!(
        o.status.success(),
        "viewer failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let png = Png::read(&out);
    assert_eq!((png.width, png.height), (W, H));
    png
}

fn is_bg(p: &[u8; 3]) -> bool {
    *p == BACKGROUND
}
fn bluish(p: &[u8; 3]) -> bool {
    p[2] as i32 > p[0] as i32 + 20
}
fn orange(p: &[u8; 3]) -> bool {
    p[0] as i32 > p[2] as i32 + 60
}

/// A region inside the box that no particle, edge or legend covers in these tests.
fn empty_region() -> (usize, usize, usize, usize) {
    rect_front([0.55, 0.5, 0.45], [0.85, 0.5, 0.7], DIST, W, H, 0.0)
}

const LOW_LO: [f32; 3] = [0.05, 0.3, 0.05];
const LOW_HI: [f32; 3] = [0.35, 0.7, 0.35];
const HIGH_LO: [f32; 3] = [0.05, 0.3, 0.6];
const HIGH_HI: [f32; 3] = [0.35, 0.7, 0.9];

#[test]
fn two_species_block_lands_where_it_projects() {
    let particles = block(LOW_LO, LOW_HI, 0.02, 0.2);
    let mut seg = create("species", &particles, vec![]);
    publish(&mut seg, &particles, &[], 1);
    let img = snapshot(&seg, "species.png", &["--color-by", "species"]);

    let (x0, y0, x1, y1) = rect_front(LOW_LO, LOW_HI, DIST, W, H, 3.0);
    let covered = img.region(x0, y0, x1, y1);
    assert!(
        fraction(&covered, |p| !is_bg(p)) > 0.95,
        "block region not covered"
    );
    // Species 0 (x < 0.2) is blue, species 1 (x >= 0.2) orange.
    let (sx, _) = project_front([0.2, 0.5, 0.2], DIST, W, H);
    let left = img.region(x0, y0, sx as usize - 3, y1);
    let right = img.region(sx as usize + 3, y0, x1, y1);
    assert!(fraction(&left, bluish) > 0.8, "species 0 not blue");
    assert!(fraction(&right, orange) > 0.8, "species 1 not orange");

    let (ex0, ey0, ex1, ey1) = empty_region();
    assert!(fraction(&img.region(ex0, ey0, ex1, ey1), is_bg) > 0.99);
    // Above the block, inside the box: empty.
    let (ax0, ay0, ax1, ay1) = rect_front([0.08, 0.5, 0.5], [0.32, 0.5, 0.8], DIST, W, H, 0.0);
    assert!(fraction(&img.region(ax0, ay0, ax1, ay1), is_bg) > 0.99);
}

#[test]
fn falling_block_moves_in_the_image() {
    let high = block(HIGH_LO, HIGH_HI, 0.02, 2.0);
    let mut seg = create("fall", &high, vec![]);
    publish(&mut seg, &high, &[], 1);
    let before = snapshot(&seg, "fall-1.png", &[]);
    let low: Vec<P> = high
        .iter()
        .map(|p| P {
            pos: [p.pos[0], p.pos[1], p.pos[2] - 0.55],
            ..*p
        })
        .collect();
    publish(&mut seg, &low, &[], 2);
    let after = snapshot(&seg, "fall-2.png", &[]);

    let (hx0, hy0, hx1, hy1) = rect_front(HIGH_LO, HIGH_HI, DIST, W, H, 3.0);
    let (lx0, ly0, lx1, ly1) = rect_front(LOW_LO, LOW_HI, DIST, W, H, 3.0);
    assert!(fraction(&before.region(hx0, hy0, hx1, hy1), |p| !is_bg(p)) > 0.95);
    // (The box's back edges cross the corners of these rectangles.)
    assert!(fraction(&before.region(lx0, ly0, lx1, ly1), is_bg) > 0.95);
    assert!(fraction(&after.region(hx0, hy0, hx1, hy1), is_bg) > 0.95);
    assert!(fraction(&after.region(lx0, ly0, lx1, ly1), |p| !is_bg(p)) > 0.95);
}

#[test]
fn color_by_speed_uses_the_ramp() {
    let mut particles = block(LOW_LO, LOW_HI, 0.02, 2.0);
    for p in &mut particles {
        p.vel = if p.pos[0] < 0.2 {
            [0.0; 3]
        } else {
            [0.0, 0.0, -3.0]
        };
    }
    let mut seg = create("speed", &particles, vec![]);
    publish(&mut seg, &particles, &[], 1);
    let img = snapshot(&seg, "speed.png", &["--color-by", "speed"]);
    let (x0, y0, x1, y1) = rect_front(LOW_LO, LOW_HI, DIST, W, H, 3.0);
    let (sx, _) = project_front([0.2, 0.5, 0.2], DIST, W, H);
    // Slow: dark violet (viridis 0); fast: yellow (viridis 1).
    let violet = |p: &[u8; 3]| p[2] > p[1] && p[0] > p[1];
    let yellow = |p: &[u8; 3]| p[0] > 60 && p[1] as i32 > p[2] as i32 + 40;
    assert!(fraction(&img.region(x0, y0, sx as usize - 3, y1), violet) > 0.8);
    assert!(fraction(&img.region(sx as usize + 3, y0, x1, y1), yellow) > 0.8);
}

#[test]
fn meshes_follow_their_body_transform() {
    let particles = block(LOW_LO, LOW_HI, 0.02, 2.0);
    let mut seg = create("mesh", &particles, vec![plate()]);
    let mut t = BodyTransform::IDENTITY;
    t.translation = [0.7, 0.5, 0.25];
    publish(&mut seg, &particles, &[t], 1);
    let img = snapshot(&seg, "mesh-1.png", &[]);
    let grey = |p: &[u8; 3]| !is_bg(p) && p[0].abs_diff(p[2]) < 25 && p[0] > 40;
    let (x0, y0, x1, y1) = rect_front([0.62, 0.5, 0.17], [0.78, 0.5, 0.33], DIST, W, H, 0.0);
    assert!(
        fraction(&img.region(x0, y0, x1, y1), grey) > 0.95,
        "plate not drawn"
    );

    // Moved up by 0.4: the old place is empty, the new one covered.
    t.translation = [0.7, 0.5, 0.65];
    publish(&mut seg, &particles, &[t], 2);
    let img = snapshot(&seg, "mesh-2.png", &[]);
    assert!(fraction(&img.region(x0, y0, x1, y1), is_bg) > 0.99);
    let (x0, y0, x1, y1) = rect_front([0.62, 0.5, 0.57], [0.78, 0.5, 0.73], DIST, W, H, 0.0);
    assert!(fraction(&img.region(x0, y0, x1, y1), grey) > 0.95);
}

/// A closed box around the low block (species 0 blue, 1 orange), drawn with each `--meshes`
/// mode: only `solid` hides the particles; `transparent` and `wireframe` show them through it.
#[test]
fn meshes_modes_show_particles_inside_a_closed_box() {
    let particles = block(LOW_LO, LOW_HI, 0.02, 0.2);
    let walls = closed_box([0.02, 0.25, 0.02], [0.38, 0.75, 0.38]);
    let mut seg = create("closed", &particles, vec![walls]);
    publish(&mut seg, &particles, &[], 1);
    let (x0, y0, x1, y1) = rect_front(LOW_LO, LOW_HI, DIST, W, H, 3.0);
    let (sx, _) = project_front([0.2, 0.5, 0.2], DIST, W, H);
    let grey = |p: &[u8; 3]| !is_bg(p) && p[0].abs_diff(p[2]) < 25 && p[0] > 40;
    // The species hues, also when tinted grey by a wall.
    let cool = |p: &[u8; 3]| p[2] as i32 > p[0] as i32 + 10;
    let warm = |p: &[u8; 3]| p[0] as i32 > p[2] as i32 + 30;
    let species = |img: &Png| {
        let left = img.region(x0, y0, sx as usize - 3, y1);
        let right = img.region(sx as usize + 3, y0, x1, y1);
        (fraction(&left, cool), fraction(&right, warm))
    };

    let solid = snapshot(&seg, "closed-solid.png", &["--meshes", "solid"]);
    assert!(
        fraction(&solid.region(x0, y0, x1, y1), grey) > 0.95,
        "box not opaque"
    );
    let (cool_, warm_) = species(&solid);
    assert!(cool_ < 0.01 && warm_ < 0.01, "solid: {cool_:.3} {warm_:.3}");

    let hidden = snapshot(&seg, "closed-bare.png", &["--meshes", "hidden"]);
    for mode in ["hidden", "transparent", "wireframe"] {
        let args = ["--meshes", mode];
        let img = snapshot(&seg, &format!("closed-{mode}.png"), &args);
        let (cool_, warm_) = species(&img);
        assert!(
            cool_ > 0.8 && warm_ > 0.8,
            "{args:?}: particles not visible ({cool_:.3} blue, {warm_:.3} orange)"
        );
        let same_as_hidden = img.region(x0, y0, x1, y1) == hidden.region(x0, y0, x1, y1);
        // Transparent tints the particles, wireframe crosses them with the front diagonals;
        // only hidden leaves them bare.
        assert_eq!(same_as_hidden, mode == "hidden", "{args:?}");
    }

    // --mesh-opacity reaches the renderer: a more opaque wall moves the colours further from
    // the bare particles.
    let tint = |opacity: &str| {
        let args = ["--meshes", "transparent", "--mesh-opacity", opacity];
        let img = snapshot(&seg, &format!("closed-opacity-{opacity}.png"), &args);
        let (a, b) = (img.region(x0, y0, x1, y1), hidden.region(x0, y0, x1, y1));
        let diff =
            |p: &[u8; 3], q: &[u8; 3]| (0..3).map(|k| p[k].abs_diff(q[k]) as u64).sum::<u64>();
        a.iter().zip(&b).map(|(p, q)| diff(p, q)).sum::<u64>()
    };
    let (none, light, heavy) = (tint("0"), tint("0.2"), tint("0.6"));
    assert!(
        none == 0 && light > 0 && heavy > light,
        "{none} {light} {heavy}"
    );
}

#[test]
fn series_writes_numbered_pngs_until_the_run_ends() {
    let particles = block(LOW_LO, LOW_HI, 0.05, 2.0);
    let mut seg = create("series", &particles, vec![]);
    publish(&mut seg, &particles, &[], 1);
    let dir = out_path("series");
    let _ = std::fs::remove_dir_all(&dir);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_viewer"))
        .args(["--attach", &seg.name, "--every", "0.1", "--out"])
        .arg(&dir)
        .args(["--size", "64x48"])
        .spawn()
        .expect("spawn viewer");
    std::thread::sleep(std::time::Duration::from_millis(400));
    publish(&mut seg, &particles, &[], 2);
    std::thread::sleep(std::time::Duration::from_millis(400));
    seg.publisher.set_state(shm_protocol::SolverState::Finished);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "viewer did not stop after the run finished"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(status.success());
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .expect("out dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["frame_000001.png", "frame_000002.png"]);
}
