//! Regression (hardening issue): the forwarder relayed whatever command a client sent, so
//! `SetRefresh { sim_seconds: Some(1e-300) }` (a schedule that never advances) or NaN reached
//! the solver. Commands are now checked with `Command::validate` where they enter; the client
//! gets the `Ack` a refusing solver would give (`Rejected`, naming the range) and the solver
//! never sees the command.

mod common;

use common::{forwarder_exe, Ws, T};
use forwarder::testing::{unique_name, FakeSolver, ForwarderProcess, SolverOptions};
use forwarder::RemoteSource;
use serde_json::json;
use shm_protocol::{Command, CommandOutcome, FrameSource};

fn refresh(sim_seconds: f64) -> Command {
    Command::SetRefresh {
        sim_seconds: Some(sim_seconds),
        wall_ms: None,
    }
}

fn assert_names_the_range(why: &str, value: &str) {
    assert!(
        why.contains("between 1e-12 and 1e9") && why.contains(value),
        "rejection {why:?} should name the range and {value}"
    );
}

#[test]
fn out_of_range_commands_are_rejected_before_the_solver() {
    let name = unique_name("cmd");
    let solver = FakeSolver::start(&name, SolverOptions::default());
    let fw = ForwarderProcess::start(forwarder_exe(), &name, &[]);

    // Binary protocol (bincode also carries NaN and infinities).
    let mut tcp = RemoteSource::connect(&fw.addr).expect("connect");
    match tcp.send(&refresh(1e-300), T).expect("an answer") {
        CommandOutcome::Rejected(why) => assert_names_the_range(&why, "1e-300"),
        other => panic!("1e-300 s was not rejected: {other:?}"),
    }
    for bad in [f64::NAN, f64::INFINITY, -1.0, 0.0, 1e300] {
        assert!(
            matches!(tcp.send(&refresh(bad), T), Ok(CommandOutcome::Rejected(_))),
            "{bad}"
        );
    }
    let wall = Command::SetRefresh {
        sim_seconds: None,
        wall_ms: Some(u64::MAX),
    };
    assert!(matches!(
        tcp.send(&wall, T),
        Ok(CommandOutcome::Rejected(_))
    ));

    // WebSocket JSON.
    let mut ws = Ws::connect(&fw.addr);
    ws.hello("");
    ws.send(json!({"Command": {"id": 7, "timeout_ms": 5000,
        "command": {"SetRefresh": {"sim_seconds": 1e-300, "wall_ms": null}}}}));
    let ack = ws.next_of("Ack").expect("an ack");
    assert_eq!(ack["id"], 7);
    let why = ack["outcome"]["Ok"]["Rejected"]
        .as_str()
        .unwrap_or_else(|| panic!("not a rejection: {ack}"));
    assert_names_the_range(why, "1e-300");

    // A valid command still goes through, and it is the only one the solver saw.
    assert_eq!(
        tcp.send(&refresh(0.01), T).expect("valid refresh"),
        CommandOutcome::Done("ok".into())
    );
    ws.send(json!({"Command": {"id": 8, "timeout_ms": 5000, "command": "Pause"}}));
    let ack = ws.next_of("Ack").expect("an ack");
    assert_eq!(ack["outcome"]["Ok"]["Done"], "paused", "{ack}");
    let seen = solver.commands.lock().unwrap().clone();
    assert_eq!(seen, vec![refresh(0.01), Command::Pause]);
    assert!(fw
        .log()
        .contains("command rejected: refresh must be between"));
    assert!(tcp.status().is_ok(), "the client stays connected");
    solver.stop();
}
