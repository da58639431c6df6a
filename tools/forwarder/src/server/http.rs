//! HTTP on the same port: the browser page (`/`), a JSON status (`/status`) and the WebSocket
//! endpoint (`/ws`). Only `GET` with a head of at most 8 KiB is understood.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, OwnedSemaphorePermit};
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

use super::session::{self, Incoming, Peer, Sink};
use super::{auth, Hub, HELLO_TIMEOUT};
use crate::codec;
use crate::protocol::{ServerMsg, MAX_CLIENT_MESSAGE};

const MAX_HEAD: usize = 8 * 1024;
const INDEX_HTML: &str = include_str!("../../web/index.html");
const APP_JS: &str = include_str!("../../web/app.js");

struct Request {
    path: String,
    headers: HashMap<String, String>,
}

/// Reads the request head (the caller consumed `GET `).
async fn read_head(stream: &mut TcpStream) -> Result<Request, String> {
    let mut buf = b"GET ".to_vec();
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        if buf.len() > MAX_HEAD {
            return Err(format!("request head over {MAX_HEAD} bytes"));
        }
        let n = stream.read(&mut chunk).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("connection closed inside the request head".into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(0);
    if end + 4 != buf.len() {
        return Err("data after the request head".into());
    }
    let text = std::str::from_utf8(&buf[..end]).map_err(|_| "request head is not UTF-8")?;
    let mut lines = text.split("\r\n");
    let line = lines.next().unwrap_or_default();
    let mut parts = line.split(' ');
    let (_, target, version) = (parts.next(), parts.next(), parts.next());
    let (Some(target), Some(version)) = (target, version) else {
        return Err(format!("bad request line {line:?}"));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(format!("unsupported {version:?}"));
    }
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Ok(Request {
        path: target.split('?').next().unwrap_or("/").to_string(),
        headers,
    })
}

async fn respond(stream: &mut TcpStream, status: &str, ctype: &str, body: &[u8]) {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n\
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
fn check_browser(req: &Request, token_required: bool) -> Result<(), String> {
    let host = req.headers.get("host").map(String::as_str).unwrap_or("");
    if let Some(origin) = req.headers.get("origin") {
        let origin_host = origin.split_once("://").map_or(origin.as_str(), |(_, h)| h);
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

pub async fn serve(
    hub: Arc<Hub>,
    mut stream: TcpStream,
    addr: SocketAddr,
    id: u64,
    handshake: OwnedSemaphorePermit,
) {
    let req = match tokio::time::timeout(HELLO_TIMEOUT, read_head(&mut stream)).await {
        Ok(Ok(r)) => r,
        Ok(Err(reason)) => {
            tracing::warn!(client = id, peer = %addr, "bad http request: {reason}");
            respond(
                &mut stream,
                "400 Bad Request",
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
    match req.path.as_str() {
        "/" | "/index.html" => {
            tracing::debug!(client = id, peer = %addr, "page");
            respond(
                &mut stream,
                "200 OK",
                "text/html; charset=utf-8",
                INDEX_HTML.as_bytes(),
            )
            .await
        }
        "/app.js" => {
            respond(
                &mut stream,
                "200 OK",
                "text/javascript; charset=utf-8",
                APP_JS.as_bytes(),
            )
            .await
        }
        "/status" => {
            let status = hub.status.borrow().clone();
            let body = serde_json::to_vec(&status).unwrap_or_default();
            respond(&mut stream, "200 OK", "application/json", &body).await
        }
        "/ws" => websocket(hub, stream, req, addr, id, handshake).await,
        _ => respond(&mut stream, "404 Not Found", "text/plain", b"not found").await,
    }
}

async fn websocket(
    hub: Arc<Hub>,
    mut stream: TcpStream,
    req: Request,
    addr: SocketAddr,
    id: u64,
    handshake: OwnedSemaphorePermit,
) {
    let upgrade = req
        .headers
        .get("upgrade")
        .is_some_and(|u| u.eq_ignore_ascii_case("websocket"));
    let key = req.headers.get("sec-websocket-key");
    let (true, Some(key)) = (upgrade, key) else {
        tracing::warn!(client = id, peer = %addr, "refused: /ws without a websocket upgrade");
        respond(
            &mut stream,
            "400 Bad Request",
            "text/plain",
            b"websocket upgrade expected",
        )
        .await;
        return;
    };
    if let Err(reason) = check_browser(&req, hub.config.token.is_some()) {
        tracing::warn!(client = id, peer = %addr, "refused websocket: {reason}");
        respond(
            &mut stream,
            "403 Forbidden",
            "text/plain",
            reason.as_bytes(),
        )
        .await;
        return;
    }
    let accept = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: {}\r\n\r\n",
        derive_accept_key(key.as_bytes())
    );
    if stream.write_all(accept.as_bytes()).await.is_err() {
        return;
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

    fn req(host: &str, origin: Option<&str>) -> Request {
        let mut headers = HashMap::new();
        headers.insert("host".to_string(), host.to_string());
        if let Some(o) = origin {
            headers.insert("origin".to_string(), o.to_string());
        }
        Request {
            path: "/ws".into(),
            headers,
        }
    }

    #[test]
    fn browser_checks_refuse_foreign_origins_and_rebound_names() {
        assert!(
            check_browser(&req("127.0.0.1:7788", Some("http://127.0.0.1:7788")), false).is_ok()
        );
        assert!(check_browser(&req("localhost:7788", None), false).is_ok());
        assert!(check_browser(&req("[::1]:7788", None), false).is_ok());
        assert!(check_browser(&req("127.0.0.1:7788", Some("http://evil.example")), false).is_err());
        assert!(check_browser(
            &req("evil.example:7788", Some("http://evil.example:7788")),
            false
        )
        .is_err());
        assert!(check_browser(
            &req("evil.example:7788", Some("http://evil.example:7788")),
            true
        )
        .is_ok());
    }
}
