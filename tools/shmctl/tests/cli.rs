//! `shmctl` against real segments: list, info --json, send (acknowledged), clean (stale only).

use shm_protocol::*;
use std::process::Command as Cmd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const SHMCTL: &str = env!("CARGO_BIN_EXE_shmctl");

struct Name(String);
impl Name {
    fn new(tag: &str) -> Self {
        Self(format!("pshm-ctl-{}-{tag}", std::process::id()))
    }
}
impl Drop for Name {
    fn drop(&mut self) {
        let _ = segment::unlink(&self.0);
    }
}

fn shmctl(args: &[&str]) -> (i32, String, String) {
    let o = Cmd::new(SHMCTL).args(args).output().expect("run shmctl");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into(),
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

fn publisher(name: &str) -> Publisher {
    let p =
        Publisher::create(name, Capacities::for_particles(8), CreateOptions::default()).unwrap();
    p.set_state(SolverState::Running);
    let mut w = p.begin_frame(8).unwrap();
    w.step = 123;
    w.sim_time = 0.25;
    w.commit();
    p
}

#[test]
fn info_json_and_list_show_the_segment() {
    let n = Name::new("info");
    let _p = publisher(&n.0);
    let (code, out, err) = shmctl(&["info", &n.0, "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["state"], "running");
    assert_eq!(v["pid"], std::process::id());
    assert_eq!(v["alive"], true);
    assert_eq!(v["step"], 123);
    assert_eq!(v["sim_time"], 0.25);
    assert_eq!(v["particles"], 8);
    assert_eq!(v["frame_seq"], 1);
    assert_eq!(
        v["frame_fields"],
        serde_json::json!(["position", "velocity", "angular_velocity"]),
        "the fields by name"
    );
    let (code, out, _) = shmctl(&["list"]);
    assert_eq!(code, 0);
    let line = out.lines().find(|l| l.starts_with(&n.0)).expect("listed");
    assert!(line.contains("alive") && line.contains("running"), "{line}");
    // Every column lines up under its heading (right-aligned numbers end where it ends).
    let header = out
        .lines()
        .find(|l| l.starts_with("NAME"))
        .expect("a header");
    for (heading, value) in [
        ("PID", std::process::id().to_string()),
        ("PARTICLES", "8".to_string()),
        ("FRAME", "1".to_string()),
    ] {
        let end = header.find(heading).unwrap() + heading.len();
        assert_eq!(
            &line[end - value.len()..end],
            value,
            "{heading} column:\n{header}\n{line}"
        );
    }
}

#[test]
fn send_prints_the_acknowledgement() {
    let n = Name::new("send");
    let p = publisher(&n.0);
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let solver = std::thread::spawn(move || {
        let mut got = Vec::new();
        while !s.load(Ordering::Relaxed) {
            for c in p.poll_commands() {
                let outcome = match &c.command {
                    Ok(Command::Checkpoint) => {
                        CommandOutcome::Rejected("no output directory".into())
                    }
                    Ok(cmd) => CommandOutcome::Done(format!("{cmd:?}")),
                    Err(e) => CommandOutcome::Rejected(e.clone()),
                };
                got.push(c.command.clone());
                p.acknowledge(&c, &outcome);
            }
            p.wait_for_command(Duration::from_millis(10));
        }
        got
    });
    let (code, out, err) = shmctl(&["send", &n.0, "pause"]);
    assert_eq!((code, out.trim()), (0, "ok: Pause"), "{err}");
    let (code, out, _) = shmctl(&["send", &n.0, "refresh", "0.5"]);
    assert_eq!(code, 0);
    assert!(out.contains("sim_seconds: Some(0.5)"), "{out}");
    let (code, out, _) = shmctl(&["send", &n.0, "checkpoint"]);
    assert_eq!((code, out.trim()), (2, "rejected: no output directory"));
    let (code, _, err) = shmctl(&["send", &n.0, "explode"]);
    assert_ne!(code, 0);
    assert!(err.contains("unknown command"), "{err}");
    stop.store(true, Ordering::Relaxed);
    assert_eq!(solver.join().unwrap().len(), 3);
}

#[test]
fn clean_removes_stale_segments_only() {
    let live = Name::new("live");
    let stale = Name::new("stale");
    let _p = publisher(&live.0);
    let q = publisher(&stale.0);
    // Make `stale` look like its solver died: its owner becomes a reaped process.
    let mut child = Cmd::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    q.region().header().owner_pid.store(dead, Ordering::Release);
    let (code, out, _) = shmctl(&["clean", "--dry-run"]);
    assert_eq!(code, 0);
    assert!(out.contains(&format!("would remove {}", stale.0)), "{out}");
    assert!(!out.contains(&live.0), "{out}");
    let (code, out, _) = shmctl(&["clean"]);
    assert_eq!(code, 0, "{out}");
    assert!(!std::path::Path::new(&shm_path(&stale.0)).exists());
    assert!(std::path::Path::new(&shm_path(&live.0)).exists());
}

#[test]
fn missing_segment_is_a_clear_error() {
    let (code, _, err) = shmctl(&["info", "pshm-ctl-nope"]);
    assert_ne!(code, 0);
    assert!(err.contains("no segment named \"pshm-ctl-nope\""), "{err}");
}
