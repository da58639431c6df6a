//! Helpers for the multi-process tests in `tests/tests/`: locating the workspace's built
//! binaries, unique segment names, processes killed on drop, polling, a forwarder, and the Python
//! package installed into a virtual environment.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Path of a workspace binary built by the same `cargo test` run (target/<profile>/<name>).
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test> -> target/<profile>/<name>
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let p = dir.join(name);
    assert!(
        p.exists(),
        "{} is not built; run `cargo test --workspace --release` (or `cargo build --release --workspace`) first",
        p.display()
    );
    p
}

/// `target/<profile>/solver` when built; `None` (skipped, with a message) when not, except
/// under CI, where `cargo test --workspace` builds it (then its absence is a failure). For the
/// tests of other crates that start a real solver.
pub fn built_solver() -> Option<PathBuf> {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test> -> target/<profile>/solver
    let p = exe.parent()?.parent()?.join("solver");
    if p.exists() {
        return Some(p);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{} is not built (CI runs `cargo test --workspace`, which builds it)",
        p.display()
    );
    eprintln!(
        "skipped: {} is not built (cargo build --release -p solver)",
        p.display()
    );
    None
}

/// The still tank of the SPH tests, the shipped `solver/cases/hydrostatic_tank.toml` run to
/// `end_time`: 0.2 x 0.1 m, 0.2 m of water in a 0.3 m tall tank, dp = 2 cm (500 fluid particles
/// inside four layers of boundary particles), dt = 1 ms.
pub fn sph_tank_case(end_time: f64) -> String {
    let text = include_str!("../../solver/cases/hydrostatic_tank.toml");
    assert!(text.contains("\nend_time = 1.0\n"));
    text.replace("\nend_time = 1.0\n", &format!("\nend_time = {end_time}\n"))
}

/// The sub-domain count of the CI pass that repeats the solver tests on CPU sub-domains
/// (`PARTICLE_SHM_TEST_SUBDOMAINS`); `None` in the undecomposed pass.
pub fn decomposed_pass_subdomains() -> Option<usize> {
    let v = std::env::var("PARTICLE_SHM_TEST_SUBDOMAINS").ok()?;
    if v.trim().is_empty() {
        return None;
    }
    Some(
        v.trim()
            .parse()
            .unwrap_or_else(|_| panic!("PARTICLE_SHM_TEST_SUBDOMAINS={v:?} is not a whole number")),
    )
}

/// Whether an SPH test that runs undecomposed skips the sub-domain pass. In that pass the water
/// column's collapse is validated on CPU sub-domains (`sph_validation.rs`), and
/// `sph_subdomains.rs` checks every shipped case bit for bit against one process in both
/// passes; the other long SPH runs would only repeat themselves (and say so).
pub fn sph_skips_decomposed_pass() -> bool {
    let set = decomposed_pass_subdomains().is_some();
    if set {
        println!(
            "SPH on sub-domains is checked bit for bit in sph_subdomains.rs: skipped in the \
             sub-domain pass"
        );
    }
    set
}

/// Every field of two SPH frames, bit for bit (`what` names the comparison in a failure).
pub fn same_sph_frame(a: &shm_protocol::Frame, what: &str, b: &shm_protocol::Frame) {
    assert_eq!(a.meta.step, b.meta.step, "{what}: step");
    assert_eq!(a.meta.sim_time, b.meta.sim_time, "{what}: time");
    assert_eq!(a.positions, b.positions, "{what}: positions");
    assert_eq!(a.velocities, b.velocities, "{what}: velocities");
    assert_eq!(a.densities, b.densities, "{what}: densities");
    assert_eq!(a.pressures, b.pressures, "{what}: pressures");
    assert_eq!(a.particle_kinds, b.particle_kinds, "{what}: kinds");
}

/// A segment name unique to this test, removed (if left) on drop.
pub struct SegName(pub String);

impl SegName {
    pub fn new(tag: &str) -> Self {
        Self(format!("pshm-e2e-{}-{tag}", std::process::id()))
    }
}

impl Drop for SegName {
    fn drop(&mut self) {
        let _ = shm_protocol::segment::unlink(&self.0);
    }
}

/// Runs the solver on the CPU backend into segment `seg` with `args` after those, to its end
/// (at most two minutes); returns the exit code and stderr.
pub fn solve_cpu(seg: &SegName, args: &[&str]) -> (Option<i32>, String) {
    let mut all = vec!["--name-shm", seg.0.as_str(), "--backend", "cpu"];
    all.extend(args);
    Running::spawn(solver(&all)).wait_exit(Duration::from_secs(120))
}

/// The newest complete frame of segment `seg` (a panic when there is none).
pub fn newest_frame(seg: &SegName) -> shm_protocol::Frame {
    shm_protocol::Consumer::attach(&seg.0)
        .expect("attach")
        .read_newest()
        .expect("read")
        .expect("a frame")
}

/// A fresh, empty directory for one test (`tag` tells tests apart).
pub fn scratch_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pshm-e2e-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A child process killed on drop.
pub struct Running(pub Child);

impl Running {
    pub fn spawn(mut cmd: Command) -> Self {
        cmd.stdout(Stdio::null()).stderr(Stdio::piped());
        Self(cmd.spawn().expect("spawn"))
    }
    pub fn sigkill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
    /// Waits up to `timeout` for exit; returns (exit code, stderr).
    pub fn wait_exit(mut self, timeout: Duration) -> (Option<i32>, String) {
        let end = Instant::now() + timeout;
        loop {
            if let Ok(Some(st)) = self.0.try_wait() {
                let mut err = String::new();
                if let Some(mut e) = self.0.stderr.take() {
                    use std::io::Read;
                    let _ = e.read_to_string(&mut err);
                }
                return (st.code(), err);
            }
            if Instant::now() > end {
                self.sigkill();
                return (None, "timed out".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Polls `f` until it returns `Some` or `timeout` passes.
pub fn poll<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let end = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() > end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `shmctl` and returns (exit code, stdout, stderr).
pub fn shmctl(args: &[&str]) -> (i32, String, String) {
    let o = Command::new(bin("shmctl"))
        .args(args)
        .output()
        .expect("run shmctl");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `shmctl info NAME --json`, parsed.
pub fn info(name: &str) -> Option<serde_json::Value> {
    let (code, out, _) = shmctl(&["info", name, "--json"]);
    if code != 0 {
        return None;
    }
    serde_json::from_str(&out).ok()
}

/// The workspace's `solver` binary with `args`, logging at info level.
pub fn solver(args: &[&str]) -> Command {
    let mut c = Command::new(bin("solver"));
    c.args(args).env("RUST_LOG", "info");
    c
}

/// The `step` of a `shmctl info --json` answer (0 when absent).
pub fn step(v: &serde_json::Value) -> u64 {
    v["step"].as_u64().unwrap_or(0)
}

/// The `forwarder` binary following a segment, on a free loopback port; killed on drop.
pub struct Forwarder {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
}

impl Forwarder {
    /// `forwarder --attach SEGMENT --listen 127.0.0.1:0 EXTRA...`, once it prints its address.
    pub fn start(segment: &str, extra: &[&str]) -> Forwarder {
        let mut child = Command::new(bin("forwarder"))
            .args(["--attach", segment, "--listen", "127.0.0.1:0"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start forwarder");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("forwarder prints its address");
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_string();
        Forwarder { child, addr }
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `tools/python` in this checkout.
pub fn python_package_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/python")
}

/// The interpreter of a virtual environment into which pip installed `tools/python`, as a user
/// installs it (`tools/python/tests/make_venv.py`: offline, numpy from the system). Made once per
/// test process, in the target directory; later runs remove it. Fails, never skips, without
/// python3, numpy, setuptools or wheel (`.ci/run` installs them).
pub fn python_venv() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        // target/<profile>/deps/<test> -> target/tmp (cargo's scratch directory for tests)
        let exe = std::env::current_exe().expect("test executable path");
        let target = exe.ancestors().nth(3).expect("target dir");
        let dir = target
            .join("tmp")
            .join(format!("python-venv-e2e-{}", std::process::id()));
        let out = Command::new("python3")
            .arg(python_package_dir().join("tests/make_venv.py"))
            .arg(&dir)
            .output()
            .unwrap_or_else(|e| panic!("python3 is required for the Python tests: {e}"));
        assert!(
            out.status.success(),
            "installing tools/python into a virtual environment failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    })
}

/// A feed of beads falling through an outflow box (issue 20): 500 particles/s added at the top
/// for 20 s, removed 5 cm above the floor.
pub const FEED_CASE: &str = r#"
dt = 2e-5
end_time = 20.0

[domain]
min = [0.0, 0.0, 0.0]
max = [0.1, 0.1, 0.3]
walls = ["x_min", "x_max", "y_min", "y_max"]

[contact_model]
type = "linear"

[[species]]
name = "bead"
radius = 0.003
density = 2500.0
normal_stiffness = 2e3
restitution = 0.3
sliding_friction = 0.5

[wall_material]
normal_stiffness = 2e3
restitution = 0.3
sliding_friction = 0.4

[[inflows]]
species = "bead"
min = [0.01, 0.01, 0.2]
max = [0.09, 0.09, 0.28]
rate = 500.0
velocity = [0.0, 0.0, -1.0]
seed = 3

[[outflows]]
type = "box"
min = [-1.0, -1.0, -1.0]
max = [1.0, 1.0, 0.05]
"#;
