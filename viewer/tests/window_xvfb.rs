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
    for n in 0..50 {
        let display = 90 + (std::process::id() as usize + n) % 400;
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

#[test]
fn window_draws_particles_under_xvfb() {
    let Some((_xvfb, display)) = start_xvfb() else {
        return;
    };
    let particles = block([0.1, 0.2, 0.05], [0.9, 0.8, 0.45], 0.02, 0.5);
    let mut seg = create("window", &particles, vec![]);
    publish(&mut seg, &particles, &[], 1);
    let shot = out_path("window.png");
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
        .env("DISPLAY", &display)
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
    // Species colours (blue and orange, shaded) fill a good part of the 3D view.
    let all = img.region(0, 0, img.width, img.height);
    let blue = fraction(&all, |p| p[2] as i32 > p[0] as i32 + 30 && p[2] > 60);
    let orange = fraction(&all, |p| p[0] as i32 > p[2] as i32 + 80 && p[0] > 120);
    assert!(
        blue > 0.03 && orange > 0.03,
        "blue {blue:.3}, orange {orange:.3}: particles not drawn"
    );
}
