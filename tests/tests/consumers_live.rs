//! The consumers against a real solver run: `viewer --snapshot` draws the particles where they
//! are, `analysis --once --json` reports the run, and both work the same through a forwarder
//! (`--connect`) as on the segment (`--attach`).

use e2e_tests::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// A scratch directory of this test process, one per test (tests run in parallel).
fn out_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pshm-e2e-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// `viewer ARGS --snapshot FILE`, asserting success.
fn snapshot(source: &[&str], file: &Path) -> Png {
    let mut args: Vec<&str> = source.to_vec();
    let f = file.to_str().expect("utf-8 path");
    args.extend(["--snapshot", f, "--size", "320x240", "--camera", "front"]);
    let o = Command::new(bin("viewer"))
        .args(&args)
        .output()
        .expect("run viewer");
    assert!(
        o.status.success(),
        "viewer {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    Png::read(file)
}

/// `analysis ARGS --once --json`, parsed.
fn analysis_once(source: &[&str]) -> serde_json::Value {
    let o = Command::new(bin("analysis"))
        .args(source)
        .args(["--once", "--json"])
        .output()
        .expect("run analysis");
    assert!(
        o.status.success(),
        "analysis {source:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("analysis prints one JSON object")
}

/// A decoded RGB image.
struct Png {
    width: usize,
    rgb: Vec<[u8; 3]>,
}

impl Png {
    fn read(path: &Path) -> Png {
        let file = std::fs::File::open(path).expect("open png");
        let mut dec = png::Decoder::new(std::io::BufReader::new(file));
        dec.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
        let mut reader = dec.read_info().expect("png header");
        let mut buf = vec![0; reader.output_buffer_size().expect("size")];
        let info = reader.next_frame(&mut buf).expect("png data");
        let ch = info.color_type.samples();
        let rgb = buf[..info.buffer_size()]
            .chunks(ch)
            .map(|c| [c[0], c[1], c[2]])
            .collect();
        Png {
            width: info.width as usize,
            rgb,
        }
    }

    /// Share of the image covered by particles (species colouring: bluish pixels), and the
    /// topmost row where particles cover a fifth of the central half of the image (the top of
    /// the particle column; the legend sits outside that half).
    fn particles(&self) -> (f64, usize) {
        let bluish = |p: &[u8; 3]| p[2] as i32 > p[0] as i32 + 20;
        let cover = self.rgb.iter().filter(|p| bluish(p)).count() as f64 / self.rgb.len() as f64;
        let (x0, x1) = (self.width / 4, 3 * self.width / 4);
        let top = self
            .rgb
            .chunks(self.width)
            .position(|row| row[x0..x1].iter().filter(|p| bluish(p)).count() * 5 > x1 - x0)
            .unwrap_or(usize::MAX);
        (cover, top)
    }
}

#[test]
fn viewer_and_analysis_follow_a_real_run_directly_and_through_the_forwarder() {
    let name = SegName::new("consumers");
    let dir = out_dir("consumers");
    let run = Running::spawn({
        let mut c = Command::new(bin("solver"));
        c.args([
            "--name-shm",
            &name.0,
            "--backend",
            "cpu",
            "--particles",
            "1000",
            "--end-time",
            "0.3",
            "--refresh",
            "0.002",
            "--keep-shm",
        ]);
        c
    });
    poll(Duration::from_secs(30), || {
        info(&name.0).filter(|v| step(v) > 0)
    })
    .expect("frames");
    let early = snapshot(&["--attach", &name.0], &dir.join("early.png"));
    let (early_cover, early_top) = early.particles();
    assert!(early_cover > 0.1, "particles drawn: {early_cover}");

    let live = analysis_once(&["--attach", &name.0]);
    for key in [
        "step",
        "sim_time",
        "kinetic_energy_translational",
        "kinetic_energy_rotational",
        "max_speed",
        "mean_speed",
        "center_of_mass",
        "coordination_number",
    ] {
        assert!(!live[key].is_null(), "analysis lacks {key}: {live}");
    }

    let (code, err) = run.wait_exit(Duration::from_secs(120));
    assert_eq!(code, Some(0), "{err}");
    let done = info(&name.0).expect("segment kept");
    assert_eq!(done["state"], "finished");

    // The column settled: the top of the drawn particles moved down the image (the lattice's
    // 10 % gaps close: about 0.2 m of the 2 m box, some 16 pixels here).
    let late = snapshot(&["--attach", &name.0], &dir.join("late.png"));
    let (late_cover, late_top) = late.particles();
    assert!(late_cover > 0.1, "particles drawn: {late_cover}");
    assert!(
        late_top >= early_top + 8 && late_top < 240,
        "particles fell: top row {early_top} -> {late_top}"
    );

    // Through the forwarder: the same newest frame gives the same metrics and the same picture.
    let direct = analysis_once(&["--attach", &name.0]);
    let fwd = Forwarder::start(&name.0, &[]);
    let remote = analysis_once(&["--connect", &fwd.addr]);
    for key in [
        "step",
        "sim_time",
        "kinetic_energy_translational",
        "center_of_mass",
        "coordination_number",
        "max_speed",
    ] {
        assert_eq!(
            direct[key], remote[key],
            "{key} differs through the forwarder"
        );
    }
    let remote_png = snapshot(&["--connect", &fwd.addr], &dir.join("remote.png"));
    // Same drawing above the HUD line (which names the source: segment or address).
    let scene_px = 320 * 200;
    let differing = (0..scene_px)
        .filter(|&i| remote_png.rgb[i] != late.rgb[i])
        .count();
    assert_eq!(differing, 0, "the forwarded frame draws the same particles");
    // At most 250 of the 1,000 particles: the forwarder sends every 4th (the viewer asks it to),
    // and they are the ones a local viewer draws with the same limit.
    let local_250 = snapshot(
        &["--attach", &name.0, "--max-particles", "250"],
        &dir.join("local250.png"),
    );
    let remote_250 = snapshot(
        &["--connect", &fwd.addr, "--max-particles", "250"],
        &dir.join("remote250.png"),
    );
    let differing = (0..scene_px)
        .filter(|&i| remote_250.rgb[i] != local_250.rgb[i])
        .count();
    assert_eq!(
        differing, 0,
        "the sampled frame draws the particles a local limit draws"
    );
    assert!(
        local_250.particles().0 < late.particles().0,
        "a quarter of the particles covers less of the image"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// An Xvfb display for the window test (`.ci/run` installs Xvfb); `None` without it outside CI.
fn xvfb() -> Option<(Running, String)> {
    if !std::path::Path::new("/usr/bin/Xvfb").exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must install Xvfb (.ci/run)"
        );
        eprintln!("skipped: /usr/bin/Xvfb is not installed");
        return None;
    }
    let display = format!(":{}", 300 + std::process::id() % 600);
    let mut c = Command::new("/usr/bin/Xvfb");
    c.args([
        display.as_str(),
        "-screen",
        "0",
        "800x600x24",
        "-nolisten",
        "tcp",
    ]);
    let x = Running::spawn(c);
    std::thread::sleep(Duration::from_millis(800));
    Some((x, display))
}

/// The window keeps the last frame of a finished run and re-attaches on its own when a new
/// solver creates the same name.
#[test]
fn viewer_window_reattaches_when_a_new_run_takes_the_name() {
    let Some((_x, display)) = xvfb() else {
        return;
    };
    let name = SegName::new("reattach");
    let run = |end: &str| {
        let o = Command::new(bin("solver"))
            .args([
                "--name-shm",
                &name.0,
                "--backend",
                "cpu",
                "--particles",
                "300",
            ])
            .args(["--end-time", end, "--keep-shm"])
            .output()
            .expect("solver");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    run("0.01");
    let dir = out_dir("reattach");
    let shot = dir.join("reattach.png");
    let viewer = Command::new(bin("viewer"))
        .args([
            "--attach",
            &name.0,
            "--size",
            "640x480",
            "--screenshot-after",
            "8",
        ])
        .arg(&shot)
        .env("DISPLAY", &display)
        .env("LIBGL_ALWAYS_SOFTWARE", "1")
        .env_remove("WAYLAND_DISPLAY")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("viewer");
    std::thread::sleep(Duration::from_secs(3));
    run("0.02"); // the first run's owner is gone: this replaces its segment
    let (code, err) = Running(viewer).wait_exit(Duration::from_secs(60));
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("re-attached"),
        "the window did not re-attach: {err}"
    );
    assert!(shot.exists());
    let _ = std::fs::remove_dir_all(&dir);
}
