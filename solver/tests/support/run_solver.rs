//! Runs the `solver` binary for the bad-input regression tests: with a time limit (a hang is a
//! failure, not a stuck test), capturing stderr, and checking that a refused input ends as a
//! normal error exit without leaving a shared-memory segment behind.
#![allow(dead_code)]

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How a run ended.
#[derive(Debug)]
pub struct Outcome {
    /// Exit code, `None` when killed by a signal.
    pub code: Option<i32>,
    /// Signal that ended it (134 = abort shows up as SIGABRT here).
    pub signal: Option<i32>,
    pub stderr: String,
    pub elapsed: Duration,
}

/// A segment name unique to this test run.
pub fn unique_name(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("bad-input-{tag}-{}-{nanos}", std::process::id())
}

/// A scratch directory for case files of one test.
pub fn scratch_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("solver-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs the solver with `args`, killing it after `limit` (then panics: the input hung it).
pub fn run_solver(args: &[&str], limit: Duration) -> Outcome {
    let mut cmd = Command::new(solver_exe());
    cmd.args(args).env("RUST_LOG", "info");
    run_command(cmd, limit)
}

/// The solver binary: beside this test binary where both were carried to a GPU machine
/// (bench/gpu/pack.sh), else cargo's.
pub fn solver_exe() -> PathBuf {
    match std::env::current_exe().map(|e| e.with_file_name("solver")) {
        Ok(p) if p.exists() => p,
        _ => PathBuf::from(env!("CARGO_BIN_EXE_solver")),
    }
}

/// Runs `cmd` (the solver, or a launcher that starts it) to its end with stderr captured,
/// killing it after `limit` (then panics: it hung).
pub fn run_command(mut cmd: Command, limit: Duration) -> Outcome {
    let start = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {cmd:?}: {e}"));
    let mut pipe = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = pipe.read_to_string(&mut s);
        s
    });
    let status = loop {
        if let Some(st) = child.try_wait().expect("waiting for the solver") {
            break st;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            let stderr = reader.join().unwrap_or_default();
            panic!("{cmd:?} still ran after {limit:?} (hang); stderr so far:\n{stderr}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    use std::os::unix::process::ExitStatusExt;
    Outcome {
        code: status.code(),
        signal: status.signal(),
        stderr: reader.join().unwrap_or_default(),
        elapsed: start.elapsed(),
    }
}

/// The run was refused cleanly: exit code 1 (not a panic's 101, not an abort), stderr names
/// every one of `parts`, and no segment called `segment` (or containing its name) is left in
/// /dev/shm.
pub fn assert_refused(out: &Outcome, segment: &str, parts: &[&str]) {
    assert_eq!(
        (out.code, out.signal),
        (Some(1), None),
        "expected a normal error exit (code 1); stderr:\n{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("solver: error:"),
        "no error line in stderr:\n{}",
        out.stderr
    );
    for p in parts {
        assert!(
            out.stderr.contains(p),
            "stderr does not mention {p:?}:\n{}",
            out.stderr
        );
    }
    assert!(
        !std::path::Path::new(&shm_protocol::shm_path(segment)).exists(),
        "segment {segment} was left in /dev/shm"
    );
    if let Ok(entries) = std::fs::read_dir("/dev/shm") {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            assert!(!name.contains(segment), "{name} was left in /dev/shm");
        }
    }
}
