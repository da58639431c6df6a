//! Regression (hardening issue): the hand-written WebSocket handshake answered `101` to an
//! invalid `Sec-WebSocket-Key` and to `Sec-WebSocket-Version: 99`. RFC 6455 asks for `400 Bad
//! Request` (4.2.1) and `426 Upgrade Required` with `Sec-WebSocket-Version: 13` (4.2.2). Raw TCP
//! clients check every answer; the page, `/status` and token authentication keep working.

mod common;

use common::{forwarder_exe, http, Ws};
use forwarder::testing::{unique_name, FakeSolver, ForwarderProcess, SolverOptions};

/// RFC 6455 1.3's example key and the accept value it implies.
const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";
const ACCEPT: &str = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";

fn upgrade(addr: &str, upgrade: &str, version: &str, key: &str, extra: &str) -> String {
    let mut r = format!("GET /ws HTTP/1.1\r\nHost: {addr}\r\nConnection: Upgrade\r\n");
    for (name, value) in [
        ("Upgrade", upgrade),
        ("Sec-WebSocket-Version", version),
        ("Sec-WebSocket-Key", key),
    ] {
        if !value.is_empty() {
            r += &format!("{name}: {value}\r\n");
        }
    }
    r + extra + "\r\n"
}

#[test]
fn invalid_upgrades_get_rfc_6455_status_codes() {
    let name = unique_name("hs");
    let solver = FakeSolver::start(&name, SolverOptions::default());
    let fw = ForwarderProcess::start(forwarder_exe(), &name, &[]);
    let a = fw.addr.as_str();

    let ok = http(a, &upgrade(a, "websocket", "13", KEY, ""));
    assert_eq!(ok.code(), 101, "{ok:?}");
    assert_eq!(ok.header("sec-websocket-accept"), Some(ACCEPT));

    for bad_key in ["not-a-key", "dGhlIHNhbXBsZQ==", "AAAAAAAAAAAAAAAAAAAAAAAA"] {
        let r = http(a, &upgrade(a, "websocket", "13", bad_key, ""));
        assert_eq!(r.code(), 400, "key {bad_key:?}: {r:?}");
        assert!(r.header("sec-websocket-accept").is_none());
    }
    let r = http(a, &upgrade(a, "websocket", "13", "", ""));
    assert_eq!(r.code(), 400, "no key: {r:?}");

    let r = http(a, &upgrade(a, "websocket", "99", KEY, ""));
    assert_eq!(r.code(), 426, "version 99: {r:?}");
    assert_eq!(r.header("sec-websocket-version"), Some("13"));
    assert!(String::from_utf8_lossy(&r.body).contains("\"99\""));
    let r = http(a, &upgrade(a, "websocket", "", KEY, ""));
    assert_eq!(r.code(), 400, "no version: {r:?}");

    let r = http(a, &upgrade(a, "", "13", KEY, ""));
    assert_eq!(r.code(), 400, "no Upgrade header: {r:?}");
    let plain = http(a, &format!("GET /ws HTTP/1.1\r\nHost: {a}\r\n\r\n"));
    assert_eq!(plain.code(), 400, "{plain:?}");

    // The browser checks still answer 403 (cross-site page, DNS-rebound host name).
    let r = http(
        a,
        &upgrade(a, "websocket", "13", KEY, "Origin: http://evil.example\r\n"),
    );
    assert_eq!(r.code(), 403, "{r:?}");
    let rebound = upgrade(a, "websocket", "13", KEY, "").replace(a, "evil.example:7788");
    assert_eq!(http(a, &rebound).code(), 403);

    // The page, its script and the status, HTTP/1.0 included; unknown paths are 404.
    let page = http(a, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(page.code(), 200);
    assert!(page
        .header("content-type")
        .unwrap_or("")
        .starts_with("text/html"));
    assert_eq!(http(a, "GET /app.js HTTP/1.0\r\n\r\n").code(), 200);
    let status = http(a, "GET /status?x=1 HTTP/1.1\r\n\r\n");
    let status: serde_json::Value = serde_json::from_slice(&status.body).expect("status json");
    assert!(status.get("attached").is_some(), "{status}");
    assert_eq!(http(a, "GET /nope HTTP/1.1\r\n\r\n").code(), 404);
    assert_eq!(
        http(a, "GET / HTTP/1.1\r\nbroken header\r\n\r\n").code(),
        400
    );

    // A real WebSocket client still gets the welcome and frames.
    let mut ws = Ws::connect(a);
    ws.hello("");
    let welcome = ws.next_of("Welcome").expect("welcome");
    assert_eq!(welcome["segment"], name.as_str());
    assert!(ws.next_of("Frame").is_some(), "no frame over WebSocket");
    assert!(fw
        .log()
        .contains("refused websocket (426 Upgrade Required)"));
    solver.stop();
}

#[test]
fn websocket_hellos_still_need_the_token() {
    let name = unique_name("hs-token");
    let solver = FakeSolver::start(&name, SolverOptions::default());
    let fw = ForwarderProcess::start(forwarder_exe(), &name, &["--token", "s3cret"]);
    let mut ws = Ws::connect(&fw.addr);
    ws.hello("guess");
    let refused = ws.next_of("Refused").expect("refused");
    assert_eq!(refused["reason"], "wrong token");
    let mut ws = Ws::connect(&fw.addr);
    ws.hello("s3cret");
    assert!(ws.next_of("Welcome").is_some());
    assert!(ws.next_of("Frame").is_some());
    solver.stop();
}
