//! Processes killed at the worst moments must not stall the writer or the other consumers.

mod common;
use common::*;
use shm_protocol::{Command, CommandOutcome, SolverState, WaitOutcome};
use std::time::{Duration, Instant};

/// Frames a fresh consumer sees arrive within `window`.
fn frames_within(c: &shm_protocol::Consumer, window: Duration) -> u64 {
    let start = c.newest_seq();
    let end = Instant::now() + window;
    let mut last = start;
    while Instant::now() < end {
        if let WaitOutcome::Newer(s) = c.wait_newer(last, end - Instant::now()) {
            last = s;
        }
    }
    last - start
}

#[test]
fn consumer_killed_holding_the_command_mutex_stalls_nobody() {
    let name = TestName::new("holdlock");
    let _writer = Proc::spawn(&["writer", &name.0, "--interval-us", "1000"]);
    let mut c = attach(&name.0);
    assert!(eventually(Duration::from_secs(5), || c.newest_seq() > 0));

    let mut holder = Proc::spawn(&["hold-lock", &name.0]);
    assert_eq!(holder.line(), "locked true");
    // While the mutex is held the writer keeps publishing (it never takes the mutex).
    assert!(frames_within(&c, Duration::from_millis(300)) > 20);
    holder.sigkill();
    // The next client recovers the mutex (EOWNERDEAD) and its command is answered.
    let t = Instant::now();
    let out = c
        .send(&Command::UpdateNow, Duration::from_secs(5))
        .expect("command answered");
    assert!(matches!(out, CommandOutcome::Done(_)), "{out:?}");
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "took {:?}",
        t.elapsed()
    );
    assert!(frames_within(&c, Duration::from_millis(300)) > 20);
}

#[test]
fn consumer_killed_while_waiting_stalls_nobody() {
    let name = TestName::new("waitkill");
    let _writer = Proc::spawn(&["writer", &name.0, "--interval-us", "1000"]);
    let mut c = attach(&name.0);
    assert!(eventually(Duration::from_secs(5), || c.newest_seq() > 0));
    let mut waiters: Vec<Proc> = (0..4).map(|_| Proc::spawn(&["wait", &name.0])).collect();
    for w in &mut waiters {
        assert_eq!(w.line(), "waiting");
    }
    std::thread::sleep(Duration::from_millis(50));
    assert!(frames_within(&c, Duration::from_millis(50)) > 0);
    assert!(shm_protocol::frame_waiters_present_for_test(c.region()));
    for w in &mut waiters {
        w.sigkill();
    }
    // Regression: each killed waiter used to leave +1 in a waiter count forever, so the writer
    // paid a wake system call per frame for good. Their leases run out instead.
    assert!(
        eventually(Duration::from_secs(1), || {
            !shm_protocol::frame_waiters_present_for_test(c.region())
        }),
        "the dead waiters' leases never ended"
    );
    // Wake-ups keep flowing to live consumers, and commands still round-trip.
    assert!(frames_within(&c, Duration::from_millis(300)) > 20);
    assert!(c
        .send(&Command::Pause, Duration::from_secs(5))
        .unwrap()
        .is_done());
}

#[test]
fn writer_killed_is_seen_within_two_seconds_and_last_frame_stays() {
    let name = TestName::new("writerkill");
    let mut writer = Proc::spawn(&["writer", &name.0, "--interval-us", "500"]);
    let c = attach(&name.0);
    assert!(eventually(Duration::from_secs(5), || c.newest_seq() > 10));
    assert!(c.status().alive);
    // A consumer waiting for a frame that will never come.
    let waiter = std::thread::spawn({
        let n = name.0.clone();
        move || {
            let c = shm_protocol::Consumer::attach(&n).unwrap();
            let t = Instant::now();
            let r = c.wait_newer(u64::MAX - 1, Duration::from_secs(30));
            (r, t.elapsed())
        }
    });
    std::thread::sleep(Duration::from_millis(100));
    writer.sigkill();
    let (r, waited) = waiter.join().unwrap();
    assert_eq!(r, WaitOutcome::SolverGone);
    assert!(waited < Duration::from_secs(2), "noticed after {waited:?}");
    let st = c.status();
    assert!(!st.alive);
    assert_eq!(
        st.state,
        Some(SolverState::Running),
        "a killed solver cannot say goodbye"
    );
    let f = c.read_newest().unwrap().expect("last frame readable");
    assert_eq!(f.meta.seq, st.newest_seq);
    assert_eq!(f.positions.unwrap().len(), 1024);
}
