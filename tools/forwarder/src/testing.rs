//! Test and bench helpers (not part of the stable API): a fake solver publishing deterministic
//! frames into a real segment and answering commands, and the forwarder run as a process.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command as Process, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

pub mod scene;

use shm_protocol::{
    Capacities, Command, CommandOutcome, CreateOptions, FieldKind, Publisher, SolverState,
    StaticData,
};

/// Position of particle `i` in frame `seq`: spread over the unit box (golden-ratio sequence),
/// drifting slowly with `seq`. Tests recompute it to check what they received.
pub fn position(seq: u64, i: usize) -> [f32; 3] {
    let f = |a: f64, b: f64| ((i as f64 * a + b).fract()) as f32;
    [
        f(0.618_034, 0.0),
        f(0.754_877, seq as f64 * 1e-3),
        f(0.569_840, 0.0),
    ]
}

/// Velocity of particle `i` in frame `seq` (exact in f32 for the sizes tests use).
pub fn velocity(seq: u64, i: usize) -> [f32; 3] {
    [seq as f32, i as f32, -1.0]
}

/// A unique segment name for this process and `tag`.
pub fn unique_name(tag: &str) -> String {
    format!("pshm-fw-{}-{tag}", std::process::id())
}

/// How the fake solver runs.
#[derive(Clone, Debug)]
pub struct SolverOptions {
    pub particles: usize,
    /// Fields reserved and published.
    pub fields: u32,
    /// Pause between frames.
    pub interval: Duration,
    /// Compute positions once and republish them (benchmarks: keeps the fake solver's CPU use
    /// down to the copy into the slot); frames then hold `position(1, i)`.
    pub reuse_positions: bool,
}

impl Default for SolverOptions {
    fn default() -> Self {
        Self {
            particles: 1000,
            fields: FieldKind::Position.bit() | FieldKind::Velocity.bit(),
            interval: Duration::from_millis(5),
            reuse_positions: false,
        }
    }
}

/// A publisher thread standing in for the solver.
pub struct FakeSolver {
    pub name: String,
    stop: Arc<AtomicBool>,
    /// Frames published so far (= newest sequence number).
    pub published: Arc<AtomicU64>,
    /// Commands received, in order.
    pub commands: Arc<Mutex<Vec<Command>>>,
    paused: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FakeSolver {
    /// Creates the segment (replacing a stale one), writes static data and starts publishing.
    pub fn start(name: &str, opts: SolverOptions) -> Self {
        let mut caps = Capacities::for_particles(opts.particles as u64);
        caps.fields = opts.fields;
        let mut publisher =
            Publisher::create(name, caps, CreateOptions::default()).expect("create segment");
        let n = opts.particles;
        publisher
            .write_static(&StaticData {
                config_toml: "[case]\nname = \"forwarder-test\"\n".into(),
                particle_ids: (0..n as u32).collect(),
                particle_species: vec![0; n],
                particle_radius: vec![0.01; n],
                world_min: [0.0; 3],
                world_max: [1.0; 3],
                ..StaticData::default()
            })
            .expect("write static");
        publisher.set_state(SolverState::Running);
        let stop = Arc::new(AtomicBool::new(false));
        let published = Arc::new(AtomicU64::new(0));
        let commands = Arc::new(Mutex::new(Vec::new()));
        let paused = Arc::new(AtomicBool::new(false));
        let ctx = (
            stop.clone(),
            published.clone(),
            commands.clone(),
            paused.clone(),
        );
        let thread = std::thread::spawn(move || publish_loop(publisher, opts, ctx));
        Self {
            name: name.into(),
            stop,
            published,
            commands,
            paused,
            thread: Some(thread),
        }
    }

    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::Acquire)
    }

    /// Stops publishing and removes the segment.
    pub fn stop(mut self) {
        self.finish();
    }

    fn finish(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = shm_protocol::segment::unlink(&self.name);
    }
}

impl Drop for FakeSolver {
    fn drop(&mut self) {
        self.finish();
    }
}

type LoopCtx = (
    Arc<AtomicBool>,
    Arc<AtomicU64>,
    Arc<Mutex<Vec<Command>>>,
    Arc<AtomicBool>,
);

fn publish_loop(p: Publisher, opts: SolverOptions, (stop, published, commands, paused): LoopCtx) {
    let n = opts.particles;
    let mut step = 0u64;
    let mut positions = vec![[0f32; 3]; n];
    let mut velocities = vec![[0f32; 3]; n];
    while !stop.load(Ordering::Acquire) {
        answer_commands(&p, &commands, &paused);
        p.heartbeat();
        if paused.load(Ordering::Acquire) {
            p.wait_for_command(Duration::from_millis(20));
            continue;
        }
        step += 10;
        let seq = published.load(Ordering::Relaxed) + 1;
        if !opts.reuse_positions || seq == 1 {
            for (i, p) in positions.iter_mut().enumerate() {
                *p = position(seq, i);
            }
        }
        let mut w = p.begin_frame(n as u64).expect("begin frame");
        w.step = step;
        w.sim_time = step as f64 * 1e-4;
        w.dt = 1e-4;
        w.write_vec3(FieldKind::Position, &positions)
            .expect("positions");
        if opts.fields & FieldKind::Velocity.bit() != 0 {
            for (i, v) in velocities.iter_mut().enumerate() {
                *v = velocity(seq, i);
            }
            w.write_vec3(FieldKind::Velocity, &velocities)
                .expect("velocities");
        }
        let meta = w.commit();
        published.store(meta.seq, Ordering::Release);
        if !opts.interval.is_zero() {
            std::thread::sleep(opts.interval);
        }
    }
    let _ = p.close(SolverState::Finished, true);
}

/// Answers pending commands as a solver would: pause and resume change the state, checkpoint
/// is rejected, the rest are done.
pub(crate) fn answer_commands(p: &Publisher, commands: &Mutex<Vec<Command>>, paused: &AtomicBool) {
    for cmd in p.poll_commands() {
        let outcome = match &cmd.command {
            Ok(c) => {
                commands
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(c.clone());
                match c {
                    Command::Pause => {
                        paused.store(true, Ordering::Release);
                        p.set_state(SolverState::Paused);
                        CommandOutcome::Done("paused".into())
                    }
                    Command::Resume => {
                        paused.store(false, Ordering::Release);
                        p.set_state(SolverState::Running);
                        CommandOutcome::Done("running".into())
                    }
                    Command::Checkpoint => CommandOutcome::Rejected("no checkpoints here".into()),
                    _ => CommandOutcome::Done("ok".into()),
                }
            }
            Err(e) => CommandOutcome::Rejected(e.clone()),
        };
        p.acknowledge(&cmd, &outcome);
    }
}

/// The forwarder binary running as a child process, stderr going to a log file.
pub struct ForwarderProcess {
    pub child: Child,
    /// `127.0.0.1:PORT` it listens on.
    pub addr: String,
    pub log: PathBuf,
}

impl ForwarderProcess {
    /// Starts `exe --attach segment --listen 127.0.0.1:0 extra...` and waits for its address.
    pub fn start(exe: &Path, segment: &str, extra: &[&str]) -> Self {
        static STARTED: AtomicU64 = AtomicU64::new(0);
        let log = std::env::temp_dir().join(format!(
            "forwarder-{}-{segment}-{}.log",
            std::process::id(),
            STARTED.fetch_add(1, Ordering::Relaxed)
        ));
        let err = std::fs::File::create(&log).expect("log file");
        let mut child = Process::new(exe)
            .args(["--attach", segment, "--listen", "127.0.0.1:0"])
            .args(extra)
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(err)
            .spawn()
            .expect("start forwarder");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            if let Some(Ok(l)) = lines.next() {
                let _ = tx.send(l);
            }
            for _ in lines {}
        });
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("forwarder did not start; log:\n{}", read(&log)));
        let addr = line
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_string();
        Self { child, addr, log }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The forwarder's log so far.
    pub fn log(&self) -> String {
        read(&self.log)
    }

    /// Resident memory [KiB] from /proc/PID/status.
    pub fn rss_kib(&self) -> u64 {
        proc_rss_kib(self.pid())
    }

    /// User + system CPU time [s] from /proc/PID/stat.
    pub fn cpu_seconds(&self) -> f64 {
        proc_cpu_seconds(self.pid())
    }
}

impl Drop for ForwarderProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// VmRSS of a process [KiB] (0 if unreadable).
pub fn proc_rss_kib(pid: u32) -> u64 {
    read(Path::new(&format!("/proc/{pid}/status")))
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// utime + stime of a process [s] (0 if unreadable).
pub fn proc_cpu_seconds(pid: u32) -> f64 {
    let stat = read(Path::new(&format!("/proc/{pid}/stat")));
    // Fields after the command name (which may contain spaces) start after the last ')'.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state): utime is field 14, stime field 15.
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (ticks(11) + ticks(12)) as f64 / hz
}
