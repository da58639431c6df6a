//! HTTP on the same port: the browser page (`/`), a JSON status (`/status`) and the WebSocket
//! endpoint (`/ws`). Only `GET` with a head of at most 8 KiB is understood.
//!
//! The head is read here (bounded in size and time, since the first bytes decide between HTTP
//! and the binary protocol) and parsed with `httparse`. A WebSocket upgrade is validated and
//! answered by tungstenite (`create_response`, `write_response`), which then does the framing.
//! Tungstenite's `accept` is not used as a whole: it serves nothing but WebSocket, and it closes
//! the connection without any answer when an upgrade is invalid. Its refusals are mapped here
//! to the answers RFC 6455 asks for: 400 for a bad handshake (4.2.1), 426 with
//! `Sec-WebSocket-Version: 13` for another version (4.2.2), and 403 from the browser checks.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, OwnedSemaphorePermit};
use tokio_tungstenite::tungstenite::error::{Error as WsError, ProtocolError};
use tokio_tungstenite::tungstenite::handshake::machine::TryParse;
use tokio_tungstenite::tungstenite::handshake::server::{
    create_response, write_response, Request, Response,
};
use tokio_tungstenite::tungstenite::http::HeaderMap;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

use super::session::{self, Incoming, Peer, Sink};
use super::{auth, Hub, HELLO_TIMEOUT};
use crate::codec;
use crate::protocol::{ServerMsg, MAX_CLIENT_MESSAGE};

const MAX_HEAD: usize = 8 * 1024;
/// Most header lines in a request head (a browser sends about 15).
const MAX_HEADERS: usize = 64;
/// The browser page: `(path, content type, body)`, embedded so that the binary is all a user
/// needs (no build step). The scripts are ES modules that import each other by these paths.
const ASSETS: &[(&str, &str, &str)] = &[
    ("/", HTML, include_str!("../../web/index.html")),
    ("/index.html", HTML, include_str!("../../web/index.html")),
    ("/app.js", JS, include_str!("../../web/app.js")),
    ("/camera.js", JS, include_str!("../../web/camera.js")),
    ("/colors.js", JS, include_str!("../../web/colors.js")),
    ("/protocol.js", JS, include_str!("../../web/protocol.js")),
    ("/renderer.js", JS, include_str!("../../web/renderer.js")),
];
const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";

/// A request head as received.
struct Head {
    /// The whole head, `GET ` included (tungstenite parses it again for an upgrade).
    bytes: Vec<u8>,
    /// Path of the request target, without the query.
    path: String,
}

/// Reads the request head (the caller consumed `GET `).
async fn read_head(stream: &mut TcpStream) -> Result<Head, String> {
    let mut buf = b"GET ".to_vec();
    let mut chunk = [0u8; 1024];
    let end = loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        if buf.len() > MAX_HEAD {
            return Err(format!("request head over {MAX_HEAD} bytes"));
        }
        let n = stream.read(&mut chunk).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("connection closed inside the request head".into());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    if end != buf.len() {
        return Err("data after the request head".into());
    }
    let path = request_path(&buf)?;
    Ok(Head { bytes: buf, path })
}

/// Parses a complete head (HTTP/1.0 or 1.1) and returns its path.
fn request_path(head: &[u8]) -> Result<String, String> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err("incomplete request head".into()),
        Err(e) => return Err(format!("bad request head: {e}")),
    }
    let target = req.path.unwrap_or("/");
    Ok(target.split('?').next().unwrap_or("/").to_string())
}

/// Writes a complete response and closes the connection (bounded in time: the client may not
/// be reading).
async fn respond(
    stream: &mut TcpStream,
    status: &str,
    extra_headers: &[(&str, &str)],
    ctype: &str,
    body: &[u8],
) {
    let extra: String = extra_headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    let head = format!(
        "HTTP/1.1 {status}\r\n{extra}Content-Type: {ctype}\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let write = async {
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body).await?;
        stream.shutdown().await
    };
    let _ = tokio::time::timeout(Duration::from_secs(5), write).await;
}

/// `host[:port]` without the port.
fn host_part(h: &str) -> &str {
    if let Some(rest) = h.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    h.rsplit_once(':').map_or(h, |(host, _)| host)
}

/// Browser-facing checks for the WebSocket: a page from another origin may not drive the
/// solver (cross-site WebSocket hijacking), and without a token only a loopback host name is
/// accepted (DNS rebinding would otherwise let a remote page reach a local forwarder).
fn check_browser(headers: &HeaderMap, token_required: bool) -> Result<(), String> {
    let text = |name: &str| headers.get(name).map(|v| v.to_str().unwrap_or("\u{fffd}"));
    let host = text("host").unwrap_or("");
    if let Some(origin) = text("origin") {
        let origin_host = origin.split_once("://").map_or(origin, |(_, h)| h);
        if origin_host != host {
            return Err(format!("origin {origin:?} does not match host {host:?}"));
        }
    }
    if !token_required {
        let h = host_part(host);
        let loopback = h == "localhost"
            || h.parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        if !loopback {
            return Err(format!(
                "host {host:?} is not a loopback name (this forwarder has no token)"
            ));
        }
    }
    Ok(())
}

/// Why an upgrade request gets no `101`: status line, headers to add, reason (body and log).
#[derive(Debug, PartialEq)]
struct Refusal {
    status: &'static str,
    headers: &'static [(&'static str, &'static str)],
    reason: String,
}

/// The version this forwarder speaks, announced with every version refusal (RFC 6455 4.4).
const VERSION_HEADER: &[(&str, &str)] = &[("Sec-WebSocket-Version", "13")];

/// Tungstenite's validation of an upgrade request: the request and its `101` response, or the
/// RFC 6455 refusal (`create_response` checks the `Connection`, `Upgrade`,
/// `Sec-WebSocket-Version` and `Sec-WebSocket-Key` headers, the key's base64 and length).
fn accept_upgrade(head: &[u8]) -> Result<(Request, Response), Refusal> {
    let bad = |reason: String| Refusal {
        status: "400 Bad Request",
        headers: &[],
        reason,
    };
    let request = match Request::try_parse(head) {
        Ok(Some((_, request))) => request,
        Ok(None) => return Err(bad("incomplete request head".into())),
        Err(WsError::Protocol(e)) => return Err(bad(e.to_string())),
        Err(e) => return Err(bad(e.to_string())),
    };
    match create_response(&request) {
        Ok(response) => Ok((request, response)),
        Err(WsError::Protocol(ProtocolError::MissingSecWebSocketVersionHeader)) => {
            Err(match request.headers().get("sec-websocket-version") {
                Some(v) => Refusal {
                    status: "426 Upgrade Required",
                    headers: VERSION_HEADER,
                    reason: format!(
                        "WebSocket version {:?} is not supported: this forwarder speaks 13",
                        String::from_utf8_lossy(v.as_bytes())
                    ),
                },
                None => Refusal {
                    status: "400 Bad Request",
                    headers: VERSION_HEADER,
                    reason: "no Sec-WebSocket-Version header".into(),
                },
            })
        }
        Err(WsError::Protocol(e)) => Err(bad(e.to_string())),
        Err(e) => Err(bad(e.to_string())),
    }
}

pub async fn serve(
    hub: Arc<Hub>,
    mut stream: TcpStream,
    addr: SocketAddr,
    id: u64,
    handshake: OwnedSemaphorePermit,
) {
    let head = match tokio::time::timeout(HELLO_TIMEOUT, read_head(&mut stream)).await {
        Ok(Ok(r)) => r,
        Ok(Err(reason)) => {
            tracing::warn!(client = id, peer = %addr, "bad http request: {reason}");
            respond(
                &mut stream,
                "400 Bad Request",
                &[],
                "text/plain",
                reason.as_bytes(),
            )
            .await;
            return;
        }
        Err(_) => {
            tracing::warn!(client = id, peer = %addr, "http request head not complete within {HELLO_TIMEOUT:?}");
            return;
        }
    };
    if let Some((_, kind, body)) = ASSETS.iter().find(|(p, _, _)| *p == head.path) {
        tracing::debug!(client = id, peer = %addr, path = %head.path, "page");
        respond(&mut stream, "200 OK", &[], kind, body.as_bytes()).await;
        return;
    }
    match head.path.as_str() {
        "/status" => {
            let status = hub.status.borrow().clone();
            let body = serde_json::to_vec(&status).unwrap_or_default();
            respond(&mut stream, "200 OK", &[], "application/json", &body).await
        }
        "/ws" => websocket(hub, stream, &head, addr, id, handshake).await,
        _ => {
            respond(
                &mut stream,
                "404 Not Found",
                &[],
                "text/plain",
                b"not found",
            )
            .await
        }
    }
}

async fn websocket(
    hub: Arc<Hub>,
    mut stream: TcpStream,
    head: &Head,
    addr: SocketAddr,
    id: u64,
    handshake: OwnedSemaphorePermit,
) {
    let checked = accept_upgrade(&head.bytes).and_then(|(request, response)| {
        check_browser(request.headers(), hub.config.token.is_some())
            .map(|()| response)
            .map_err(|reason| Refusal {
                status: "403 Forbidden",
                headers: &[],
                reason,
            })
    });
    let response = match checked {
        Ok(response) => response,
        Err(refusal) => {
            tracing::warn!(client = id, peer = %addr, "refused websocket ({}): {}", refusal.status, refusal.reason);
            respond(
                &mut stream,
                refusal.status,
                refusal.headers,
                "text/plain",
                refusal.reason.as_bytes(),
            )
            .await;
            return;
        }
    };
    let mut accept = Vec::new();
    if write_response(&mut accept, &response).is_err() {
        return;
    }
    match tokio::time::timeout(HELLO_TIMEOUT, stream.write_all(&accept)).await {
        Ok(Ok(())) => {}
        _ => return,
    }
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_CLIENT_MESSAGE as usize))
        .max_frame_size(Some(MAX_CLIENT_MESSAGE as usize));
    let ws = WebSocketStream::from_raw_socket(stream, Role::Server, Some(config)).await;
    let (mut sink, mut stream) = ws.split();

    let first = tokio::time::timeout(HELLO_TIMEOUT, next_message(&mut stream)).await;
    let hello = match first {
        Ok(Some(Ok(m))) => m,
        Ok(Some(Err(reason))) => {
            tracing::warn!(client = id, peer = %addr, "refused websocket: bad hello: {reason}");
            return;
        }
        Ok(None) => {
            tracing::warn!(client = id, peer = %addr, "websocket closed before its hello");
            return;
        }
        Err(_) => {
            tracing::warn!(client = id, peer = %addr, "refused websocket: no hello within {HELLO_TIMEOUT:?}");
            return;
        }
    };
    let refuse =
        |reason: String| Message::Binary(codec::begin_ws(&ServerMsg::Refused { reason }, 0).into());
    let (client, sub) = match auth::check_hello(hello, hub.config.token.as_deref()) {
        Ok(v) => v,
        Err(reason) => {
            tracing::warn!(client = id, peer = %addr, "refused websocket: {reason}");
            let _ = futures_util::SinkExt::send(&mut sink, refuse(reason)).await;
            return;
        }
    };
    let Ok(_session) = hub.sessions.clone().try_acquire_owned() else {
        tracing::warn!(client = id, peer = %addr, "refused websocket: server full");
        let _ = futures_util::SinkExt::send(&mut sink, refuse("server full".into())).await;
        return;
    };
    drop(handshake);
    let peer = Peer { id, addr, client };
    tracing::info!(client = id, peer = %addr, name = %peer.client, ?sub, "websocket client connected");
    let (tx, rx) = mpsc::channel::<Incoming>(16);
    let reader = tokio::spawn(async move {
        while let Some(msg) = next_message(&mut stream).await {
            let stop = msg.is_err();
            if tx.send(msg).await.is_err() || stop {
                return;
            }
        }
    });
    let why = session::run(hub, &peer, Sink::Ws(sink), rx, sub).await;
    reader.abort();
    tracing::info!(client = id, peer = %addr, "websocket disconnected: {why}");
}

/// The next client message: JSON text or bincode binary; control frames are skipped.
async fn next_message(
    stream: &mut futures_util::stream::SplitStream<WebSocketStream<TcpStream>>,
) -> Option<Incoming> {
    loop {
        return match stream.next().await? {
            Ok(Message::Text(t)) => {
                Some(codec::decode_client_json(t.as_str()).map_err(|e| e.to_string()))
            }
            Ok(Message::Binary(b)) => Some(codec::decode_client(&b).map_err(|e| e.to_string())),
            Ok(Message::Close(_)) => None,
            Ok(_) => continue,
            Err(e) => Some(Err(e.to_string())),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(host: &str, origin: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("host", host.parse().unwrap());
        if let Some(o) = origin {
            h.insert("origin", o.parse().unwrap());
        }
        h
    }

    #[test]
    fn browser_checks_refuse_foreign_origins_and_rebound_names() {
        let check = |host, origin, token| check_browser(&headers(host, origin), token);
        assert!(check("127.0.0.1:7788", Some("http://127.0.0.1:7788"), false).is_ok());
        assert!(check("localhost:7788", None, false).is_ok());
        assert!(check("[::1]:7788", None, false).is_ok());
        assert!(check("127.0.0.1:7788", Some("http://evil.example"), false).is_err());
        let evil = ("evil.example:7788", Some("http://evil.example:7788"));
        assert!(check(evil.0, evil.1, false).is_err());
        assert!(check(evil.0, evil.1, true).is_ok());
    }

    fn upgrade(extra: &str) -> Vec<u8> {
        format!("GET /ws HTTP/1.1\r\nHost: 127.0.0.1:7788\r\n{extra}\r\n").into_bytes()
    }

    const GOOD: &str = "Connection: Upgrade\r\nUpgrade: websocket\r\n\
                        Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";

    #[test]
    fn upgrades_are_answered_as_rfc_6455_says() {
        // RFC 6455 1.3's example key and accept value.
        let (_, response) = accept_upgrade(&upgrade(GOOD)).unwrap();
        assert_eq!(response.status(), 101);
        assert_eq!(
            response.headers()["sec-websocket-accept"],
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
        let refused = |req: String| accept_upgrade(&upgrade(&req)).unwrap_err();
        for key in [
            "not base64!",
            "",
            "AAAAAAAAAAAAAAAAAAAAAAAA",
            "dGhlIHNhbXBsZQ==",
        ] {
            let r = refused(GOOD.replace("dGhlIHNhbXBsZSBub25jZQ==", key));
            assert_eq!(r.status, "400 Bad Request", "key {key:?}: {r:?}");
        }
        let r = refused(GOOD.replace("Version: 13", "Version: 99"));
        assert_eq!(r.status, "426 Upgrade Required");
        assert_eq!(r.headers, &[("Sec-WebSocket-Version", "13")]);
        assert!(r.reason.contains("\"99\""), "{}", r.reason);
        let r = refused(GOOD.replace("Sec-WebSocket-Version: 13\r\n", ""));
        assert_eq!(r.status, "400 Bad Request");
        for missing in [
            "Upgrade: websocket\r\n",
            "Connection: Upgrade\r\n",
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n",
        ] {
            let r = refused(GOOD.replace(missing, ""));
            assert_eq!(r.status, "400 Bad Request", "without {missing:?}");
        }
        let http10 = String::from_utf8(upgrade(GOOD))
            .unwrap()
            .replace("HTTP/1.1", "HTTP/1.0");
        assert_eq!(
            accept_upgrade(http10.as_bytes()).unwrap_err().status,
            "400 Bad Request"
        );
    }

    #[test]
    fn request_heads_are_parsed_by_httparse() {
        assert_eq!(
            request_path(b"GET /status?x=1 HTTP/1.0\r\n\r\n").unwrap(),
            "/status"
        );
        assert_eq!(request_path(&upgrade(GOOD)).unwrap(), "/ws");
        assert!(request_path(b"GET / HTTP/2.0\r\n\r\n").is_err());
        assert!(request_path(b"GET / HTTP/1.1\r\nno colon\r\n\r\n").is_err());
    }
}
