//! Regressions (hardening issue, item 7): a command whose sender gave up was still applied
//! later (a `pause` applied after SIGCONT), and the command table refused every sender for
//! 10 s after abandoned commands with a wrong message. Commands now carry their sender's
//! deadline: a sender that times out withdraws its command, the solver drops expired ones
//! unapplied, and records of vanished senders are reclaimed soon after their deadline.

mod common;
use common::*;
use shm_protocol::command::Applied;
use shm_protocol::*;
use std::time::{Duration, Instant};

fn publisher(name: &TestName) -> Publisher {
    Publisher::create(
        &name.0,
        Capacities::for_particles(4),
        CreateOptions::default(),
    )
    .unwrap()
}

#[test]
fn a_command_whose_sender_timed_out_is_never_applied() {
    let name = TestName::new("late");
    let p = publisher(&name);
    let mut c = Consumer::attach(&name.0).unwrap();
    // The solver is not polling (stopped with SIGSTOP, say): the sender gives up.
    let e = c
        .send(&Command::Pause, Duration::from_millis(100))
        .unwrap_err();
    assert!(
        matches!(
            e,
            CommandError::AckTimeout {
                applied: Applied::No,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("will not be applied"), "{e}");
    // The solver continues: the withdrawn pause is not there to apply.
    assert!(p.poll_commands().is_empty());
}

#[test]
fn a_command_taken_after_its_deadline_is_dropped() {
    let name = TestName::new("expired");
    let p = publisher(&name);
    let mut c = Consumer::attach(&name.0).unwrap();
    // A sender that died right after submitting (so it could not withdraw).
    c.submit(&Command::Pause, Duration::from_millis(50))
        .unwrap();
    std::thread::sleep(Duration::from_millis(120));
    assert!(p.poll_commands().is_empty(), "expired command applied");
    // And its record is free again: a fresh command goes through at once.
    c.submit(&Command::Resume, Duration::from_secs(5)).unwrap();
    let got = p.poll_commands();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].command, Ok(Command::Resume));
}

#[test]
fn records_of_vanished_senders_do_not_block_the_table_for_long() {
    let name = TestName::new("abandoned");
    let p = publisher(&name);
    let records = p.capacities().command_records;
    // Every record answered but never read: their senders died between answer and read.
    let mut dead = Consumer::attach(&name.0).unwrap();
    for _ in 0..records {
        dead.submit(&Command::UpdateNow, Duration::from_millis(200))
            .unwrap();
    }
    for cmd in p.poll_commands() {
        p.acknowledge(&cmd, &CommandOutcome::Done("ok".into()));
    }
    let full = dead
        .submit(&Command::UpdateNow, Duration::from_secs(1))
        .unwrap_err();
    let msg = full.to_string();
    assert!(
        msg.contains(&format!("{records} hold answers")) && !msg.contains("not consuming"),
        "{msg}"
    );
    // A live solver keeps answering; a new sender gets through within its timeout (the old
    // code refused every sender for 10 s).
    let stop = std::sync::atomic::AtomicBool::new(false);
    let stop = &stop;
    std::thread::scope(|s| {
        s.spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for cmd in p.poll_commands() {
                    p.acknowledge(&cmd, &CommandOutcome::Done("ok".into()));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        let mut c = Consumer::attach(&name.0).unwrap();
        let t = Instant::now();
        let r = c.send(&Command::Pause, Duration::from_secs(6));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(r.as_ref().is_ok_and(|o| o.is_done()), "{r:?}");
        assert!(t.elapsed() < Duration::from_secs(6));
    });
}

#[test]
fn long_acknowledgements_keep_their_meaning() {
    let name = TestName::new("longack");
    let p = publisher(&name);
    let mut c = Consumer::attach(&name.0).unwrap();
    let t = c
        .submit(&Command::UpdateNow, Duration::from_secs(5))
        .unwrap();
    let long = format!(
        "checkpoint written to /{}",
        "very-long-directory/".repeat(10)
    );
    for cmd in p.poll_commands() {
        p.acknowledge(&cmd, &CommandOutcome::Done(long.clone()));
    }
    let CommandOutcome::Done(text) = c.wait_ack(&t, Duration::from_secs(2)).unwrap() else {
        panic!("verdict lost");
    };
    // Cut to the record's room (was 64 bytes), and visibly so.
    assert!(text.len() > 64 && text.ends_with("..."), "{text}");
    assert!(long.starts_with(text.trim_end_matches("...")));
}

#[test]
fn out_of_range_commands_are_refused_before_they_reach_the_solver() {
    let name = TestName::new("invalid");
    let p = publisher(&name);
    let mut c = Consumer::attach(&name.0).unwrap();
    for cmd in [
        Command::SetRefresh {
            sim_seconds: Some(1e-300),
            wall_ms: None,
        },
        Command::SetRefresh {
            sim_seconds: Some(f64::NAN),
            wall_ms: None,
        },
        Command::SetRefresh {
            sim_seconds: None,
            wall_ms: Some(u64::MAX),
        },
    ] {
        let e = c.send(&cmd, Duration::from_secs(1)).unwrap_err();
        assert!(matches!(e, CommandError::Invalid(_)), "{e}");
    }
    assert!(p.poll_commands().is_empty());
}
