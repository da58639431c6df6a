//! Helpers of the regression tests: a process run with a time limit, a raw HTTP exchange and a
//! WebSocket client speaking the forwarder's JSON.
#![allow(dead_code)] // each test file uses a part

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use forwarder::protocol::{PROTOCOL_NAME, PROTOCOL_VERSION};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::{self, Message, WebSocket};

pub const T: Duration = Duration::from_secs(10);

pub fn forwarder_exe() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_forwarder"))
}

/// Runs `exe args` for at most `limit` (killed after it); returns its exit status (`None` when
/// killed) and stderr.
pub fn run_bounded(exe: &Path, args: &[&str], limit: Duration) -> (Option<ExitStatus>, String) {
    let mut child = Command::new(exe)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start process");
    let mut stderr = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status, reader.join().unwrap_or_default())
}

/// An HTTP response as received: status line, header lines (lower-cased names) and body.
#[derive(Debug)]
pub struct HttpResponse {
    pub status: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpResponse {
    pub fn code(&self) -> u16 {
        self.status
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0)
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Sends a raw request and reads the response head and its `Content-Length` body (a `101`
/// has none: the connection then stays open and is dropped here).
pub fn http(addr: &str, request: &str) -> HttpResponse {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(T)).expect("timeout");
    s.write_all(request.as_bytes()).expect("send request");
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(1) => buf.push(byte[0]),
            other => panic!(
                "response head incomplete ({other:?}): {:?}",
                String::from_utf8_lossy(&buf)
            ),
        }
    }
    let text = String::from_utf8(buf).expect("utf-8 head");
    let mut lines = text.trim_end().split("\r\n");
    let status = lines.next().unwrap_or_default().to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).expect("response body");
    HttpResponse {
        status,
        headers,
        body,
    }
}

/// A WebSocket client of the forwarder (tungstenite's blocking client).
pub struct Ws(WebSocket<TcpStream>);

impl Ws {
    pub fn connect(addr: &str) -> Self {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(T)).expect("timeout");
        let (ws, response) =
            tungstenite::client::client(format!("ws://{addr}/ws"), stream).expect("handshake");
        assert_eq!(response.status(), 101);
        Self(ws)
    }

    pub fn send(&mut self, msg: Value) {
        self.0
            .send(Message::Text(msg.to_string().into()))
            .expect("send");
    }

    pub fn hello(&mut self, token: &str) {
        self.send(json!({"Hello": {
            "protocol": PROTOCOL_NAME,
            "version": PROTOCOL_VERSION,
            "token": token,
            "client": "regression-test",
            "subscription": {"fields": 1, "positions": "F32", "max_rate_hz": 0.0, "static_arrays": false},
        }}));
    }

    /// The JSON header of the next server message (`None`: the connection closed).
    pub fn next(&mut self) -> Option<Value> {
        loop {
            match self.0.read() {
                Ok(Message::Binary(b)) => {
                    let len = u32::from_le_bytes(b[..4].try_into().expect("length")) as usize;
                    return Some(serde_json::from_slice(&b[4..4 + len]).expect("json header"));
                }
                Ok(Message::Close(_)) | Err(_) => return None,
                Ok(_) => continue,
            }
        }
    }

    /// Reads until a message with `key` at the top (`"Ack"`, `"Welcome"`...) arrives.
    pub fn next_of(&mut self, key: &str) -> Option<Value> {
        let deadline = Instant::now() + T;
        while Instant::now() < deadline {
            let msg = self.next()?;
            if let Some(v) = msg.get(key) {
                return Some(v.clone());
            }
        }
        None
    }
}
