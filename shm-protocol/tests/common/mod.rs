//! Helpers for the multi-process protocol tests: unique names, fixture processes, cleanup.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const FIXTURE: &str = env!("CARGO_BIN_EXE_shm-fixture");

/// A segment name unique to this test process, removed when dropped.
pub struct TestName(pub String);

impl TestName {
    pub fn new(tag: &str) -> Self {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let k = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Self(format!("pshm-test-{}-{tag}-{k}", std::process::id()))
    }
}

impl Drop for TestName {
    fn drop(&mut self) {
        let _ = shm_protocol::segment::unlink(&self.0);
    }
}

pub fn fixture(args: &[&str]) -> Command {
    let mut c = Command::new(FIXTURE);
    c.args(args).stdout(Stdio::piped()).stderr(Stdio::inherit());
    c
}

/// Kills the child on drop so a failing test leaves no process behind.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Proc {
    pub fn spawn(args: &[&str]) -> Self {
        Self(fixture(args).spawn().expect("spawn shm-fixture"))
    }
    /// Reads one stdout line (blocking).
    pub fn line(&mut self) -> String {
        let out = self.0.stdout.as_mut().expect("piped");
        let mut r = BufReader::new(out);
        let mut s = String::new();
        r.read_line(&mut s).expect("read line");
        s.trim().to_string()
    }
    pub fn sigkill(&mut self) {
        self.0.kill().expect("kill");
        self.0.wait().expect("reap");
    }
}

/// Polls `f` until it returns true or `timeout` passes.
pub fn eventually(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    f()
}

pub fn attach(name: &str) -> shm_protocol::Consumer {
    let mut last = None;
    if eventually(
        Duration::from_secs(10),
        || match shm_protocol::Consumer::attach(name) {
            Ok(c) => {
                last = Some(c);
                true
            }
            Err(_) => false,
        },
    ) {
        return last.expect("attached");
    }
    panic!("could not attach to {name}");
}
