//! The window itself, under Xvfb with Mesa's software OpenGL: start `viewer --attach NAME`,
//! let it save a screenshot of its own window, and check that particles were drawn.
//! Skipped (with a message) when `Xvfb` is not installed; `.ci/run` installs it.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_xvfb() -> Option<(Killed, String)> {
    if !Path::new("/usr/bin/Xvfb").exists() {
        // CI installs Xvfb (.ci/run): there a missing Xvfb is a failure, not a skip.
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must install Xvfb (.ci/run) for the window test"
        );
        eprintln!("window_xvfb: skipped, /usr/bin/Xvfb is not installed (apt-get install xvfb)");
        return None;
    }
    // Tests of this process run in parallel: each takes its own block of display numbers.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    for n in 0..50 {
        let display = 90 + (std::process::id() as usize + 50 * call + n) % 400;
        if Path::new(&format!("/tmp/.X11-unix/X{display}")).exists()
            || Path::new(&format!("/tmp/.X{display}-lock")).exists()
        {
            continue;
        }
        let child = Command::new("/usr/bin/Xvfb")
            .args([
                &format!(":{display}"),
                "-screen",
                "0",
                "1024x768x24",
                "-nolisten",
                "tcp",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn Xvfb");
        let guard = Killed(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if Path::new(&format!("/tmp/.X11-unix/X{display}")).exists() {
                return Some((guard, format!(":{display}")));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    panic!("Xvfb did not start");
}

/// Runs the window on `display` with `extra` arguments until it saves its screenshot.
fn window_shot(display: &str, seg: &mut Seg, extra: &[&str], file: &str) -> Png {
    let shot = out_path(file);
    let _ = std::fs::remove_file(&shot);
    let mut child = Command::new(env!("CARGO_BIN_EXE_viewer"))
        .args([
            "--attach",
            &seg.name,
            "--size",
            "800x600",
            "--screenshot-after",
            "2",
        ])
        .arg(&shot)
        .args(extra)
        .env("DISPLAY", display)
        .env("LIBGL_ALWAYS_SOFTWARE", "1")
        .env_remove("WAYLAND_DISPLAY")
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn viewer");
    let deadline = Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the viewer window did not save its screenshot within 90 s");
        }
        // Keep the run alive-looking, as a solver would.
        seg.publisher.heartbeat();
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut err);
    }
    assert!(status.success(), "viewer window failed: {err}");
    assert!(err.contains("window screenshot"), "{err}");
    let img = Png::read(&shot);
    assert!(
        img.width >= 400 && img.height >= 300,
        "{}x{}",
        img.width,
        img.height
    );
    img
}

/// Fractions of the image in the species colours (blue and orange, shaded).
fn species_fractions(img: &Png) -> (f64, f64) {
    let all = img.region(0, 0, img.width, img.height);
    let blue = fraction(&all, |p| p[2] as i32 > p[0] as i32 + 30 && p[2] > 60);
    let orange = fraction(&all, |p| p[0] as i32 > p[2] as i32 + 80 && p[0] > 120);
    (blue, orange)
}

#[test]
fn window_draws_particles_under_xvfb() {
    let Some((_xvfb, display)) = start_xvfb() else {
        return;
    };
    let particles = block([0.1, 0.2, 0.05], [0.9, 0.8, 0.45], 0.02, 0.5);
    let mut seg = create("window", &particles, vec![]);
    publish(&mut seg, &particles, &[], 1);
    let img = window_shot(&display, &mut seg, &[], "window.png");
    // Species colours fill a good part of the 3D view.
    let (blue, orange) = species_fractions(&img);
    assert!(
        blue > 0.03 && orange > 0.03,
        "blue {blue:.3}, orange {orange:.3}: particles not drawn"
    );
}

/// The OpenGL side of `--meshes`: a closed box around the particles hides them when solid and
/// shows them when transparent, wireframe or hidden.
#[test]
fn window_meshes_modes_under_xvfb() {
    let Some((_xvfb, display)) = start_xvfb() else {
        return;
    };
    let particles = block([0.1, 0.2, 0.05], [0.9, 0.8, 0.45], 0.02, 0.5);
    let walls = closed_box([0.05, 0.15, 0.02], [0.95, 0.85, 0.5]);
    let mut seg = create("window-mesh", &particles, vec![walls]);
    publish(&mut seg, &particles, &[], 1);
    let mut look = |mode: &str| {
        let img = window_shot(
            &display,
            &mut seg,
            &["--meshes", mode],
            &format!("window-{mode}.png"),
        );
        species_fractions(&img)
    };
    let (blue, orange) = look("solid");
    assert!(
        blue < 0.005 && orange < 0.005,
        "solid: blue {blue:.3}, orange {orange:.3}: particles seen through the box"
    );
    for mode in ["transparent", "wireframe", "hidden"] {
        let (blue, orange) = look(mode);
        assert!(
            blue > 0.03 && orange > 0.03,
            "{mode}: blue {blue:.3}, orange {orange:.3}: particles not seen inside the box"
        );
    }
}

/// The window on an SPH segment: by default the boundary shell is hidden and the fluid is
/// coloured by pressure (viridis, violet on top to yellow at the bottom); coloured by species,
/// the fluid is blue and no wall (orange) is drawn until `--boundary shown`, when the shell
/// hides most of the fluid (it still shows through the gaps between the wall's spheres).
#[test]
fn window_sph_hides_the_boundary_under_xvfb() {
    let Some((_xvfb, display)) = start_xvfb() else {
        return;
    };
    let (mut seg, _) = publish_sph("window-sph");
    let img = window_shot(&display, &mut seg, &["--camera", "front"], "window-sph.png");
    let all = img.region(0, 0, img.width, img.height);
    let violet = fraction(&all, |p| p[2] > p[1] + 20 && p[0] > p[1] + 20);
    let yellow = fraction(&all, |p| p[0] > 120 && p[1] as i32 > p[2] as i32 + 80);
    assert!(
        violet > 0.005 && yellow > 0.005,
        "violet {violet:.3}, yellow {yellow:.3}: the fluid is not coloured by pressure"
    );
    let mut species = |extra: &[&str], file: &str| {
        let mut args = vec!["--camera", "front", "--color-by", "species"];
        args.extend_from_slice(extra);
        species_fractions(&window_shot(&display, &mut seg, &args, file))
    };
    let (blue, orange) = species(&[], "window-sph-species.png");
    assert!(
        blue > 0.02 && orange < 0.002,
        "hidden walls: blue {blue:.3}, orange {orange:.3}"
    );
    let (blue_shown, orange_shown) = species(&["--boundary", "shown"], "window-sph-shown.png");
    assert!(
        orange_shown > 0.05 && blue_shown < 0.25 * blue,
        "shown walls: blue {blue_shown:.3} (hidden: {blue:.3}), orange {orange_shown:.3}"
    );
}
