//! A client that stops reading does not slow another client, nor grow the forwarder's memory.

use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use forwarder::codec;
use forwarder::protocol::{ClientMsg, Subscription, PROTOCOL_NAME, PROTOCOL_VERSION};
use forwarder::testing::{unique_name, FakeSolver, ForwarderProcess, SolverOptions};
use forwarder::{ConnectOptions, RemoteSource};
use shm_protocol::{FieldKind, FrameSource};

/// Frames the reading client and the solver produced during `window`.
fn rates(src: &RemoteSource, solver: &FakeSolver, window: Duration) -> (f64, f64) {
    let (f0, p0, t0) = (
        src.received().0,
        solver.published.load(Ordering::Acquire),
        Instant::now(),
    );
    std::thread::sleep(window);
    let dt = t0.elapsed().as_secs_f64();
    let (f1, p1) = (src.received().0, solver.published.load(Ordering::Acquire));
    ((f1 - f0) as f64 / dt, (p1 - p0) as f64 / dt)
}

#[test]
fn a_stalled_client_neither_slows_others_nor_grows_memory() {
    let name = unique_name("bp");
    let n = 100_000; // 1.2 MB of positions per frame
    let solver = FakeSolver::start(
        &name,
        SolverOptions {
            particles: n,
            fields: FieldKind::Position.bit(),
            interval: Duration::from_millis(10),
            reuse_positions: false,
        },
    );
    let fw = ForwarderProcess::start(Path::new(env!("CARGO_BIN_EXE_forwarder")), &name, &[]);
    let mut reader = RemoteSource::connect_with(
        &fw.addr,
        ConnectOptions {
            client_name: "reader".into(),
            ..Default::default()
        },
    )
    .expect("connect");
    assert!(matches!(
        reader.wait_newer(0, Duration::from_secs(10)),
        Ok(shm_protocol::WaitOutcome::Newer(_))
    ));
    assert!(reader.read_newest().expect("read").is_some());
    let (alone, published_alone) = rates(&reader, &solver, Duration::from_secs(2));
    let rss_alone = fw.rss_kib();

    // A client that says hello and then never reads: its socket buffers fill up and stay full.
    let mut stalled = TcpStream::connect(&fw.addr).expect("connect stalled");
    let hello = ClientMsg::Hello {
        protocol: PROTOCOL_NAME.into(),
        version: PROTOCOL_VERSION,
        token: String::new(),
        client: "stalled".into(),
        subscription: Subscription::default(),
    };
    stalled
        .write_all(&codec::encode_tcp(&hello))
        .expect("hello");
    std::thread::sleep(Duration::from_secs(1));
    let rss_stalled_start = fw.rss_kib();
    let (with_stalled, published) = rates(&reader, &solver, Duration::from_secs(3));
    let rss_stalled_end = fw.rss_kib();
    eprintln!(
        "reader alone {alone:.0} fps (solver {published_alone:.0}); with a stalled client \
         {with_stalled:.0} fps (solver {published:.0}), stalled client 0 fps; RSS {rss_alone} -> \
         {rss_stalled_start} -> {rss_stalled_end} KiB"
    );
    assert!(
        with_stalled >= 0.5 * published,
        "reader got {with_stalled:.0} of {published:.0} frames/s while another client stalled"
    );
    assert!(
        with_stalled >= 0.5 * alone,
        "reader slowed from {alone:.0} to {with_stalled:.0} fps"
    );
    // Bounded: the stalled client pins at most one frame (1.2 MB) plus socket buffers.
    assert!(
        rss_stalled_end <= rss_stalled_start + 16 * 1024,
        "RSS grew {rss_stalled_start} -> {rss_stalled_end} KiB while a client stalled"
    );
    assert!(
        rss_stalled_end <= rss_alone + 32 * 1024,
        "RSS {rss_alone} -> {rss_stalled_end} KiB"
    );
    assert!(reader.status().expect("status").alive);
    drop(stalled);
    solver.stop();
}
