//! The browser page, loaded in headless Chromium against a forwarder on localhost, draws the
//! particles (screenshot pixel check) and its pause button pauses the solver (`?autopause=1`
//! presses it after the first frame is drawn).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use forwarder::testing::{unique_name, FakeSolver, ForwarderProcess, SolverOptions};
use shm_protocol::FieldKind;

fn chromium() -> PathBuf {
    let path =
        PathBuf::from(std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into()));
    assert!(
        path.exists(),
        "Chromium not found at {} (set CHROMIUM=...): the browser test needs it; install it with \
         `apt-get install -y chromium` (.ci/run does)",
        path.display()
    );
    path
}

/// Runs headless Chromium on `url` and returns the screenshot's path.
fn screenshot(url: &str, dir: &Path) -> PathBuf {
    let shot = dir.join("page.png");
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--virtual-time-budget=4000",
            "--window-size=800,600",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(url)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromium");
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Some(status) = child.try_wait().expect("wait chromium") {
            assert!(status.success(), "chromium exited with {status}");
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 90 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(shot.exists(), "chromium wrote no screenshot");
    shot
}

/// (width, height, RGBA pixels) of a PNG.
fn decode_png(path: &Path) -> (usize, usize, Vec<u8>) {
    let decoder = png::Decoder::new(std::fs::File::open(path).expect("open png"));
    let mut reader = decoder.read_info().expect("png header");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("png data");
    let channels = info.color_type.samples();
    let (w, h) = (info.width as usize, info.height as usize);
    let mut rgba = Vec::with_capacity(w * h * 4);
    for px in buf[..w * h * channels].chunks(channels) {
        rgba.extend_from_slice(&[px[0], px[1 % channels], px[2 % channels], 255]);
    }
    (w, h, rgba)
}

#[test]
fn browser_page_draws_particles_and_its_pause_button_pauses_the_solver() {
    let browser = chromium();
    let name = unique_name("web");
    let solver = FakeSolver::start(
        &name,
        SolverOptions {
            particles: 20_000,
            fields: FieldKind::Position.bit(),
            interval: Duration::from_millis(20),
            reuse_positions: false,
        },
    );
    let fw = ForwarderProcess::start(Path::new(env!("CARGO_BIN_EXE_forwarder")), &name, &[]);
    let dir = std::env::temp_dir().join(format!("forwarder-browser-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let shot = screenshot(&format!("http://{}/?autopause=1", fw.addr), &dir);
    eprintln!(
        "screenshot: {} (browser {})",
        shot.display(),
        browser.display()
    );

    // Background is rgb(16, 20, 24); particles are bright. The particles fill the unit box,
    // drawn in the middle of the 800x600 view: count bright pixels in the central third.
    let (w, h, px) = decode_png(&shot);
    let bright = |x: usize, y: usize| {
        let p = &px[(y * w + x) * 4..][..3];
        p.iter().map(|&c| c as u32).sum::<u32>() > 200
    };
    let (mut lit, mut total) = (0, 0);
    for y in h / 3..2 * h / 3 {
        for x in w / 3..2 * w / 3 {
            total += 1;
            lit += bright(x, y) as usize;
        }
    }
    let corner_lit = (0..20)
        .flat_map(|y| (w - 20..w).map(move |x| (x, y)))
        .filter(|&(x, y)| bright(x, y))
        .count();
    assert!(
        lit * 100 > total * 10,
        "only {lit} of {total} central pixels show particles (screenshot {}); forwarder log:\n{}",
        shot.display(),
        fw.log()
    );
    assert_eq!(corner_lit, 0, "the top-right corner should be background");

    let deadline = Instant::now() + Duration::from_secs(10);
    while !solver.is_paused() {
        assert!(
            Instant::now() < deadline,
            "the page's pause did not reach the solver; forwarder log:\n{}",
            fw.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(fw.log().contains("websocket client connected"));
    if std::env::var_os("FORWARDER_KEEP_SCREENSHOT").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    solver.stop();
}
