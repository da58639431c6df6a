//! Regression (hardening issue): values from clients that panicked. A subscription's
//! `max_rate_hz` of 1e-30 made the session compute `Duration::from_secs_f32(1e30)` and panic at
//! its first frame; `RemoteSource` panicked on `Duration::MAX` timeouts (`Instant + timeout`,
//! `timeout + 2 s`). The rate is now refused in the hello and in `Subscribe`, with a message
//! naming it, and the client's waits accept any duration.

mod common;

use std::time::Duration;

use common::{forwarder_exe, T};
use forwarder::client::ConnectError;
use forwarder::testing::{unique_name, FakeSolver, ForwarderProcess, SolverOptions};
use forwarder::{ConnectOptions, RemoteSource, Subscription};
use shm_protocol::{Command, CommandOutcome, FrameSource, WaitOutcome};

fn rate(max_rate_hz: f32) -> Subscription {
    Subscription {
        max_rate_hz,
        ..Subscription::default()
    }
}

#[test]
fn a_rate_without_a_representable_period_is_refused() {
    let name = unique_name("rate-bad");
    let solver = FakeSolver::start(&name, SolverOptions::default());
    let fw = ForwarderProcess::start(forwarder_exe(), &name, &[]);
    for bad in [1e-30, 1e-45, -1.0] {
        let opts = ConnectOptions {
            subscription: rate(bad),
            ..Default::default()
        };
        match RemoteSource::connect_with(&fw.addr, opts) {
            Err(ConnectError::Refused { reason, .. }) => {
                assert!(reason.contains("max_rate_hz"), "{reason}")
            }
            Err(e) => panic!("{bad}: unexpected error {e}"),
            Ok(_) => panic!("a hello with max_rate_hz {bad} was accepted"),
        }
    }
    // The same rate in a later Subscribe ends that session with an error naming it.
    let mut src = RemoteSource::connect(&fw.addr).expect("connect");
    src.subscribe(rate(1e-30)).expect("send subscribe");
    let err = src
        .wait_newer(u64::MAX, T)
        .expect_err("the session should end");
    assert!(err.to_string().contains("max_rate_hz"), "{err}");
    // Nothing panicked, and the forwarder serves the next client.
    let mut ok = RemoteSource::connect(&fw.addr).expect("connect again");
    assert!(matches!(ok.wait_newer(0, T), Ok(WaitOutcome::Newer(_))));
    assert!(!fw.log().contains("panicked"), "{}", fw.log());
    solver.stop();
}

#[test]
fn the_client_accepts_any_timeout() {
    let name = unique_name("rate-max");
    let solver = FakeSolver::start(&name, SolverOptions::default());
    let fw = ForwarderProcess::start(forwarder_exe(), &name, &[]);
    let mut src = RemoteSource::connect(&fw.addr).expect("connect");
    assert!(matches!(
        src.wait_newer(0, Duration::MAX),
        Ok(WaitOutcome::Newer(_))
    ));
    assert_eq!(
        src.send(&Command::Pause, Duration::MAX).expect("pause"),
        CommandOutcome::Done("paused".into())
    );
    solver.stop();
}
