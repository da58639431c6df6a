//! Malformed input closes that connection with a log line; the forwarder keeps serving others.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use forwarder::client::ConnectError;
use forwarder::codec;
use forwarder::protocol::{ClientMsg, Subscription, PROTOCOL_NAME, PROTOCOL_VERSION};
use forwarder::testing::{unique_name, FakeSolver, ForwarderProcess, SolverOptions};
use forwarder::{ConnectOptions, RemoteSource};
use shm_protocol::{FrameSource, WaitOutcome};

fn exe() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_forwarder"))
}

fn hello(version: u32, token: &str) -> Vec<u8> {
    codec::encode_tcp(&ClientMsg::Hello {
        protocol: PROTOCOL_NAME.into(),
        version,
        token: token.into(),
        client: "malformed-test".into(),
        subscription: Subscription::default(),
    })
}

/// Sends `bytes` (then half-closes if `eof`) and waits for the forwarder to close the connection.
fn expect_closed(addr: &str, bytes: &[u8], eof: bool) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(15)))
        .expect("timeout");
    let _ = s.write_all(bytes);
    if eof {
        let _ = s.shutdown(Shutdown::Write);
    }
    let t0 = Instant::now();
    let mut sink = [0u8; 65536];
    loop {
        match s.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(_) => assert!(
                t0.elapsed() < Duration::from_secs(15),
                "connection not closed"
            ),
        }
    }
    assert!(
        t0.elapsed() < Duration::from_secs(14),
        "the forwarder did not close the connection"
    );
}

/// The good client still gets new frames.
fn still_serving(src: &mut RemoteSource) {
    assert!(matches!(
        src.wait_newer(0, Duration::from_secs(10)),
        Ok(WaitOutcome::Newer(_))
    ));
    let seq = src.read_newest().expect("read").expect("frame").meta.seq;
    assert!(matches!(
        src.wait_newer(seq, Duration::from_secs(10)),
        Ok(WaitOutcome::Newer(_))
    ));
}

fn wait_log(fw: &ForwarderProcess, needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !fw.log().contains(needle) {
        assert!(
            Instant::now() < deadline,
            "no log line with {needle:?}; log:\n{}",
            fw.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn malformed_input_closes_only_that_connection() {
    let name = unique_name("bad");
    let solver = FakeSolver::start(&name, SolverOptions::default());
    let fw = ForwarderProcess::start(exe(), &name, &[]);
    let mut good = RemoteSource::connect(&fw.addr).expect("connect");
    still_serving(&mut good);

    // Garbage whose first four bytes are a plausible length.
    expect_closed(&fw.addr, b"\x10\x00\x00\x00this is no hello", false);
    wait_log(&fw, "bad hello");
    // Text garbage: its first bytes read as a huge length.
    expect_closed(&fw.addr, b"hello forwarder, how are you?", false);
    wait_log(&fw, "exceeds the limit");
    // Oversize length prefix, then nothing.
    expect_closed(&fw.addr, &[0xff, 0xff, 0xff, 0x7f], false);
    // Truncated message: 100 bytes announced, 10 sent, then EOF.
    let mut trunc = vec![100, 0, 0, 0];
    trunc.extend_from_slice(&[1; 10]);
    expect_closed(&fw.addr, &trunc, true);
    wait_log(&fw, "truncated message");
    // Wrong version.
    expect_closed(&fw.addr, &hello(99, ""), false);
    wait_log(&fw, "protocol version 99");
    // A good hello followed by garbage: the session ends with a protocol error.
    let mut then_garbage = hello(PROTOCOL_VERSION, "");
    then_garbage.extend_from_slice(&[3, 0, 0, 0, 0xfe, 0xfe, 0xfe]);
    expect_closed(&fw.addr, &then_garbage, false);
    wait_log(&fw, "protocol error");
    // HTTP: an endless request head.
    let mut head = b"GET / HTTP/1.1\r\nX: ".to_vec();
    head.extend(std::iter::repeat_n(b'a', 9000));
    expect_closed(&fw.addr, &head, false);
    wait_log(&fw, "request head over");
    still_serving(&mut good);

    // A thousand quick connects: each closes at once; the forwarder keeps serving.
    let t0 = Instant::now();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let addr = fw.addr.clone();
            std::thread::spawn(move || {
                for _ in 0..250 {
                    if let Ok(s) = TcpStream::connect(&addr) {
                        drop(s);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("connect thread");
    }
    eprintln!("1000 connects in {:?}", t0.elapsed());
    still_serving(&mut good);
    let mut again = RemoteSource::connect(&fw.addr).expect("connect after the storm");
    still_serving(&mut again);
    assert!(
        fw.log()
            .matches("connection closed before a request")
            .count()
            >= 900
    );
    solver.stop();
}

#[test]
fn tokens_are_checked_in_every_hello() {
    let name = unique_name("tok");
    let solver = FakeSolver::start(&name, SolverOptions::default());
    let dir = std::env::temp_dir().join(format!("forwarder-token-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("token");
    std::fs::write(&file, "s3cret-token\n").expect("token file");
    let fw = ForwarderProcess::start(
        exe(),
        &name,
        &["--token-file", file.to_str().expect("utf-8")],
    );
    let with = |token: Option<&str>| {
        RemoteSource::connect_with(
            &fw.addr,
            ConnectOptions {
                token: token.map(Into::into),
                ..Default::default()
            },
        )
    };
    match with(None) {
        Err(ConnectError::Refused { reason, .. }) => {
            assert!(reason.contains("requires a token"), "{reason}")
        }
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("connected without a token"),
    }
    match with(Some("guess")) {
        Err(ConnectError::Refused { reason, .. }) => assert_eq!(reason, "wrong token"),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("connected with a wrong token"),
    }
    wait_log(&fw, "refused: wrong token");
    let mut ok = with(Some("s3cret-token")).expect("the right token");
    still_serving(&mut ok);
    let _ = std::fs::remove_dir_all(&dir);
    solver.stop();
}

#[test]
fn non_loopback_listen_without_a_token_is_refused() {
    let out = std::process::Command::new(exe())
        .args(["--attach", "pshm-fw-nobody", "--listen", "0.0.0.0:0"])
        .output()
        .expect("run forwarder");
    assert!(
        !out.status.success(),
        "the forwarder started on 0.0.0.0 without a token"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("without a token"), "stderr: {err}");
    let empty = std::env::temp_dir().join(format!("forwarder-empty-token-{}", std::process::id()));
    std::fs::write(&empty, "  \n").expect("file");
    let out = std::process::Command::new(exe())
        .args([
            "--attach",
            "pshm-fw-nobody",
            "--listen",
            "0.0.0.0:0",
            "--token-file",
        ])
        .arg(&empty)
        .output()
        .expect("run forwarder");
    let _ = std::fs::remove_file(&empty);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("token is empty"));
}
