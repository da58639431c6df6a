//! The browser page, loaded in headless Chromium against a forwarder on localhost: it draws
//! the particles (screenshot pixel checks), colours by speed with the legend's end colours,
//! draws a mesh where its body transform puts it, clips, sends a command from its own button
//! and shows the acknowledgement, and asks for a token when the forwarder needs one.
//! The page's test hooks (`?autopause=1`, `?typetoken=T`, `?probe=...`) press its controls as a
//! user would and report state on `<body data-*>`, read here from `--dump-dom`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use forwarder::testing::scene::{Scene, SceneSolver};
use forwarder::testing::{unique_name, FakeSolver, ForwarderProcess, SolverOptions};
use shm_protocol::{BodyTransform, FieldKind, MeshStatic};

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
    let _ = std::fs::remove_file(&shot);
    chromium_run(url, dir, &format!("--screenshot={}", shot.display()));
    assert!(shot.exists(), "chromium wrote no screenshot");
    shot
}

/// Runs headless Chromium on `url` and returns the page's DOM after the time budget.
fn dump_dom(url: &str, dir: &Path) -> String {
    chromium_run(url, dir, "--dump-dom")
}

/// Runs headless Chromium on `url` with `action` (screenshot or DOM dump); returns its stdout.
fn chromium_run(url: &str, dir: &Path, action: &str) -> String {
    let out_path = dir.join("stdout.txt");
    let out = std::fs::File::create(&out_path).expect("stdout file");
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
            "--virtual-time-budget=5000",
            "--window-size=800,600",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .arg(action)
        .arg(format!(
            "{url}{}hold=1",
            if url.contains('?') { '&' } else { '?' }
        ))
        .stdout(out)
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
    std::fs::read_to_string(&out_path).unwrap_or_default()
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
    let corner_lit = (h - 20..h)
        .flat_map(|y| (w - 20..w).map(move |x| (x, y)))
        .filter(|&(x, y)| bright(x, y))
        .count();
    assert!(
        lit * 100 > total * 10,
        "only {lit} of {total} central pixels show particles (screenshot {}); forwarder log:\n{}",
        shot.display(),
        fw.log()
    );
    assert_eq!(
        corner_lit, 0,
        "the bottom-right corner should be background"
    );

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

/// `?max=5000` on a 20,000-particle run: the forwarder sends every fourth particle (the page
/// receives 5,000, not 20,000) and the HUD says what is drawn of the whole.
#[test]
fn browser_max_particles_is_applied_by_the_forwarder() {
    chromium();
    let name = unique_name("webmax");
    let solver = FakeSolver::start(
        &name,
        SolverOptions {
            particles: 20_000,
            fields: FieldKind::Position.bit() | FieldKind::Velocity.bit(),
            interval: Duration::from_millis(20),
            reuse_positions: false,
        },
    );
    let fw = ForwarderProcess::start(Path::new(env!("CARGO_BIN_EXE_forwarder")), &name, &[]);
    let dir = TestDir::new("webmax");
    let dom = dump_dom(&format!("http://{}/?max=5000&color=speed", fw.addr), &dir.0);
    let attr = |k| data_attr(&dom, k).unwrap_or_default();
    assert_eq!(
        (attr("received"), attr("drawn"), attr("total")),
        ("5000".into(), "5000".into(), "20000".into()),
        "DOM:\n{dom}\nforwarder log:\n{}",
        fw.log()
    );
    assert!(dom.contains("drawn of 20,000 (every 4th)"), "{dom}");
    solver.stop();
}

/// A test directory of its own (Chromium profile, screenshots), removed on drop unless
/// `FORWARDER_KEEP_SCREENSHOT` is set.
struct TestDir(PathBuf);

impl TestDir {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("forwarder-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("tmp dir");
        Self(dir)
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        if std::env::var_os("FORWARDER_KEEP_SCREENSHOT").is_none() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// The value of `data-NAME="..."` on the dumped `<body>` (HTML entities for quotes undone).
fn data_attr(dom: &str, name: &str) -> Option<String> {
    let key = format!("data-{name}=\"");
    let start = dom.find(&key)? + key.len();
    let len = dom[start..].find('"')?;
    Some(
        dom[start..start + len]
            .replace("&quot;", "\"")
            .replace("&amp;", "&"),
    )
}

/// Screen positions [px] the page reported for its `probe` points, moved to a `w` x `h` view.
/// A `--dump-dom` run lays the page out smaller than a screenshot run of the same window
/// size; the camera's vertical field of view is fixed, so a point's offset from the centre
/// scales with the view's height.
fn probes(dom: &str, (w, h): (usize, usize)) -> Vec<(usize, usize)> {
    let text = data_attr(dom, "probes").unwrap_or_else(|| panic!("no probes in the DOM:\n{dom}"));
    let view = data_attr(dom, "viewport").expect("viewport");
    let (vw, vh) = view.split_once(',').expect("w,h");
    let (vw, vh): (f64, f64) = (vw.parse().expect("w"), vh.parse().expect("h"));
    let s = h as f64 / vh;
    let v: Vec<Option<[f64; 2]>> = serde_json::from_str(&text).expect("probe json");
    v.into_iter()
        .map(|p| {
            let [x, y] = p.expect("probe behind the camera");
            let x = w as f64 / 2.0 + (x - vw / 2.0) * s;
            let y = h as f64 / 2.0 + (y - vh / 2.0) * s;
            (x.round() as usize, y.round() as usize)
        })
        .collect()
}

/// Colour at (x, y) of an RGBA image `w` wide.
fn pixel(px: &[u8], w: usize, (x, y): (usize, usize)) -> [i32; 3] {
    let p = &px[(y * w + x) * 4..][..3];
    [p[0] as i32, p[1] as i32, p[2] as i32]
}

fn near(a: [i32; 3], b: [i32; 3], tol: i32) -> bool {
    a.iter().zip(b).all(|(x, y)| (x - y).abs() <= tol)
}

const BACKGROUND: [i32; 3] = [16, 20, 24];
/// Viridis at 0 and 1: the legend's ends (web/colors.js, viewer/src/color.rs).
const VIRIDIS_LOW: [i32; 3] = [68, 1, 84];
const VIRIDIS_HIGH: [i32; 3] = [253, 231, 37];

/// Two particles at rest and at 10 m/s, and a 0.24 x 0.06 m rectangle (long along body x)
/// turned 90 degrees about z and moved to (0.5, 0.2, 0.3): long along world y there.
fn scene() -> Scene {
    let (a, b) = (0.12, 0.03);
    Scene {
        positions: vec![[0.25, 0.5, 0.5], [0.75, 0.5, 0.5]],
        velocities: vec![[0.0; 3], [10.0, 0.0, 0.0]],
        species: vec![0, 0],
        radii: vec![0.06, 0.06],
        species_names: vec!["grain".into()],
        meshes: vec![MeshStatic {
            name: "plate".into(),
            triangles: vec![
                [-a, -b, 0.0, a, -b, 0.0, a, b, 0.0],
                [-a, -b, 0.0, a, b, 0.0, -a, b, 0.0],
            ],
        }],
        bodies: vec![BodyTransform {
            rotation: [0.0, -1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0],
            translation: [0.5, 0.2, 0.3],
            ..BodyTransform::IDENTITY
        }],
        world_min: [0.0; 3],
        world_max: [1.0; 3],
        methods: Vec::new(),
        pressures: None,
    }
}

/// An SPH scene: fluid at rest at (0.25, 0.5, 0.5) with 0 Pa and at (0.75, 0.5, 0.5) with
/// 1,000 Pa, a wall particle between them at 5,000 Pa (the walls' pressure spikes, which must
/// not stretch the colour range).
fn sph_scene() -> Scene {
    use shm_protocol::layout::SpeciesMethod;
    Scene {
        positions: vec![[0.25, 0.5, 0.5], [0.75, 0.5, 0.5], [0.5, 0.5, 0.5]],
        velocities: vec![[0.0; 3]; 3],
        species: vec![0, 0, 1],
        radii: vec![0.06; 3],
        species_names: vec!["fluid".into(), "boundary".into()],
        methods: vec![SpeciesMethod::SphFluid, SpeciesMethod::SphBoundary],
        pressures: Some(vec![0.0, 1000.0, 5000.0]),
        world_min: [0.0; 3],
        world_max: [1.0; 3],
        ..Scene::default()
    }
}

#[test]
fn browser_hides_sph_walls_and_colours_by_pressure() {
    chromium();
    let name = unique_name("websph");
    let _solver = SceneSolver::start(&name, sph_scene());
    let fw = ForwarderProcess::start(Path::new(env!("CARGO_BIN_EXE_forwarder")), &name, &[]);
    let dir = TestDir::new("browser-sph");
    // Probes: the two fluid particles and the wall particle.
    let base = format!(
        "http://{}/?view=top&probe=0.25,0.5,0.5;0.75,0.5,0.5;0.5,0.5,0.5",
        fw.addr
    );
    for (walls, drawn, legend) in [
        ("", "2", "0,1000"),
        ("&walls=dimmed", "3", "0,1000"),
        ("&walls=shown", "3", "0,5000"),
    ] {
        let url = format!("{base}{walls}");
        let dom = dump_dom(&url, &dir.0);
        let ctx = format!("{url}; DOM:\n{dom}\nlog:\n{}", fw.log());
        let want = if walls.is_empty() {
            "hidden"
        } else {
            &walls[7..]
        };
        assert_eq!(data_attr(&dom, "walls").as_deref(), Some(want), "{ctx}");
        assert_eq!(data_attr(&dom, "drawn").as_deref(), Some(drawn), "{ctx}");
        assert_eq!(
            data_attr(&dom, "legend").as_deref(),
            Some(legend),
            "coloured by pressure, the walls outside the range unless shown: {ctx}"
        );
        let shot = screenshot(&url, &dir.0);
        let (w, h, px) = decode_png(&shot);
        let p = probes(&dom, (w, h));
        let at = |i: usize| pixel(&px, w, p[i]);
        let ctx = format!("{walls}: probes {p:?}, screenshot {}", shot.display());
        assert!(
            near(at(0), VIRIDIS_LOW, 12),
            "0 Pa fluid {:?} ({ctx})",
            at(0)
        );
        let high = if walls == "&walls=shown" {
            // 1,000 of 0..5,000 Pa: not the top of the ramp.
            assert!(
                near(at(2), VIRIDIS_HIGH, 12),
                "wall shown {:?} ({ctx})",
                at(2)
            );
            !near(at(1), VIRIDIS_HIGH, 40)
        } else {
            near(at(1), VIRIDIS_HIGH, 12)
        };
        assert!(high, "1,000 Pa fluid {:?} ({ctx})", at(1));
        let wall = at(2);
        match walls {
            "" => assert!(
                near(wall, BACKGROUND, 6),
                "hidden wall drawn {wall:?} ({ctx})"
            ),
            "&walls=dimmed" => assert!(
                !near(wall, BACKGROUND, 20)
                    && (wall[0] - wall[1]).abs() < 12
                    && (wall[1] - wall[2]).abs() < 12,
                "a dimmed wall is a grey dot {wall:?} ({ctx})"
            ),
            _ => {}
        }
    }
}

/// Probes: slow particle, fast particle, mesh centre, a point on the turned mesh's long axis,
/// and where that point would be without the rotation (must be background).
const PROBES: &str = "0.25,0.5,0.5;0.75,0.5,0.5;0.5,0.2,0.3;0.5,0.29,0.3;0.59,0.2,0.3";

#[test]
fn browser_colours_by_speed_draws_the_moved_mesh_clips_and_acknowledges_pause() {
    chromium();
    let name = unique_name("webscene");
    let solver = SceneSolver::start(&name, scene());
    let fw = ForwarderProcess::start(Path::new(env!("CARGO_BIN_EXE_forwarder")), &name, &[]);
    let dir = TestDir::new("browser-scene");
    let base = format!("http://{}/?view=top&color=speed&probe={PROBES}", fw.addr);

    let dom = dump_dom(&base, &dir.0);
    let frames: u64 = data_attr(&dom, "frames")
        .and_then(|f| f.parse().ok())
        .unwrap_or(0);
    assert!(
        frames > 0,
        "the page drew no frame; DOM:\n{dom}\nlog:\n{}",
        fw.log()
    );
    assert_eq!(
        data_attr(&dom, "legend").as_deref(),
        Some("0,10"),
        "legend range"
    );
    assert_eq!(data_attr(&dom, "drawn").as_deref(), Some("2"));
    let shot = screenshot(&base, &dir.0);
    let (w, h, px) = decode_png(&shot);
    let p = probes(&dom, (w, h));
    let at = |i: usize| pixel(&px, w, p[i]);
    let ctx = format!("probes {p:?}, screenshot {}", shot.display());
    assert!(
        near(at(0), VIRIDIS_LOW, 12),
        "slow particle {:?}, want {VIRIDIS_LOW:?} ({ctx})",
        at(0)
    );
    assert!(
        near(at(1), VIRIDIS_HIGH, 12),
        "fast particle {:?}, want {VIRIDIS_HIGH:?} ({ctx})",
        at(1)
    );
    for i in [2, 3] {
        let c = at(i);
        assert!(
            c.iter().all(|&v| v > 110) && (c[0] - c[2]).abs() < 50,
            "mesh probe {i} {c:?} should be the mesh's grey ({ctx})"
        );
    }
    assert!(
        near(at(4), BACKGROUND, 6),
        "the unrotated mesh's place {:?} should be background ({ctx})",
        at(4)
    );

    // Keep x below 0.5: the fast particle (x = 0.75) is not drawn, the slow one is.
    let shot = screenshot(&format!("{base}&clip=x,0.5"), &dir.0);
    let (w, _, px) = decode_png(&shot);
    let at = |i: usize| pixel(&px, w, p[i]);
    assert!(
        near(at(0), VIRIDIS_LOW, 12),
        "clipped view: slow particle {:?} ({ctx})",
        at(0)
    );
    assert!(
        near(at(1), BACKGROUND, 6),
        "clipped view: particle beyond the plane drawn {:?} ({ctx})",
        at(1)
    );

    // The page's own Pause button: the solver pauses and the page shows the acknowledgement.
    let dom = dump_dom(&format!("{base}&autopause=1"), &dir.0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !solver.is_paused() {
        assert!(
            Instant::now() < deadline,
            "pause did not reach the solver; log:\n{}",
            fw.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        dom.contains("pause: done: paused"),
        "the page does not show the pause acknowledgement; DOM:\n{dom}"
    );
}

#[test]
fn browser_asks_for_the_token_and_connects_with_the_one_typed() {
    chromium();
    let name = unique_name("webtoken");
    let _solver = SceneSolver::start(&name, scene());
    let fw = ForwarderProcess::start(
        Path::new(env!("CARGO_BIN_EXE_forwarder")),
        &name,
        &["--token", "s3cret"],
    );
    let dir = TestDir::new("browser-token");
    let dom = dump_dom(&format!("http://{}/", fw.addr), &dir.0);
    assert_eq!(
        data_attr(&dom, "state").as_deref(),
        Some("refused"),
        "DOM:\n{dom}"
    );
    assert!(
        dom.contains("id=\"tokenform\" class=\"panel\" style=\"display: block;\""),
        "token form not shown; DOM:\n{dom}"
    );

    let dom = dump_dom(&format!("http://{}/?typetoken=s3cret", fw.addr), &dir.0);
    assert_eq!(
        data_attr(&dom, "state").as_deref(),
        Some("connected"),
        "DOM:\n{dom}\nlog:\n{}",
        fw.log()
    );
    let frames: u64 = data_attr(&dom, "frames")
        .and_then(|f| f.parse().ok())
        .unwrap_or(0);
    assert!(
        frames > 0,
        "no frame drawn after the token was typed; DOM:\n{dom}"
    );
}
