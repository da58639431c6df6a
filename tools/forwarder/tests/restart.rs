//! The forwarder survives a solver restart: it re-attaches by name and tells clients.

use std::path::Path;
use std::time::{Duration, Instant};

use forwarder::testing::{unique_name, FakeSolver, ForwarderProcess, SolverOptions};
use forwarder::RemoteSource;
use shm_protocol::{FrameSource, WaitOutcome};

fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_forwarder_reattaches_when_the_solver_restarts() {
    let name = unique_name("re");
    // Started before the solver: it waits for the segment to appear.
    let fw = ForwarderProcess::start(Path::new(env!("CARGO_BIN_EXE_forwarder")), &name, &[]);
    let mut src = RemoteSource::connect(&fw.addr).expect("connect");
    assert!(!src.wire_status().expect("status").attached);
    assert!(src.status().expect("status").is_over());

    let first = FakeSolver::start(&name, SolverOptions::default());
    wait_until("first attach", || {
        src.wire_status().is_some_and(|s| s.attached)
    });
    let epoch1 = src.wire_status().expect("status").epoch;
    let mut seq = 0;
    for _ in 0..30 {
        if let Ok(WaitOutcome::Newer(s)) = src.wait_newer(seq, Duration::from_secs(5)) {
            seq = s;
        }
    }
    let f = src.read_newest().expect("read").expect("frame");
    assert!(f.meta.seq >= 20, "seq {}", f.meta.seq);

    first.stop(); // unlinks the segment
    wait_until("detached", || {
        src.wire_status().is_some_and(|s| !s.attached)
    });
    assert!(src.status().expect("status").is_over());

    // A slower solver, so its sequence numbers stay below the first run's during the test.
    let _second = FakeSolver::start(
        &name,
        SolverOptions {
            interval: Duration::from_millis(100),
            ..SolverOptions::default()
        },
    );
    wait_until("re-attach", || {
        src.wire_status()
            .is_some_and(|s| s.attached && s.epoch > epoch1)
    });
    // Sequence numbers restart with the new segment: a wait on the old number still sees them.
    assert!(matches!(
        src.wait_newer(f.meta.seq, Duration::from_secs(10)),
        Ok(WaitOutcome::Newer(_))
    ));
    let g = src.read_newest().expect("read").expect("frame");
    assert!(
        g.meta.seq < f.meta.seq,
        "new run's seq {} vs old {}",
        g.meta.seq,
        f.meta.seq
    );
    assert!(src.status().expect("status").alive);
    assert!(fw.log().contains("re-attaching"));
}
