//! The binary protocol over TCP: length-prefixed bincode messages.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, OwnedSemaphorePermit};

use super::session::{self, Incoming, Peer, Sink};
use super::{auth, Hub, HELLO_TIMEOUT};
use crate::codec;
use crate::protocol::{ClientMsg, ServerMsg, MAX_CLIENT_MESSAGE};

/// A message must arrive whole within this once its length prefix has.
const BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// Reads the body announced by `len` (checked against the limit first).
async fn read_body(r: &mut (impl AsyncRead + Unpin), len: [u8; 4]) -> Result<ClientMsg, String> {
    let len = u32::from_le_bytes(len) as u64;
    codec::check_len(len, MAX_CLIENT_MESSAGE as u64).map_err(|e| e.to_string())?;
    let mut body = vec![0u8; len as usize];
    match tokio::time::timeout(BODY_TIMEOUT, r.read_exact(&mut body)).await {
        Err(_) => {
            return Err(format!(
                "incomplete message: {len} bytes announced, not sent within {BODY_TIMEOUT:?}"
            ))
        }
        Ok(Err(e)) => return Err(format!("truncated message: {len} bytes announced: {e}")),
        Ok(Ok(_)) => {}
    }
    codec::decode_client(&body).map_err(|e| e.to_string())
}

async fn refuse(stream: &mut TcpStream, reason: &str) {
    let msg = codec::encode_tcp(&ServerMsg::Refused {
        reason: reason.into(),
    });
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(&msg)).await;
}

pub async fn serve(
    hub: Arc<Hub>,
    mut stream: TcpStream,
    first: [u8; 4],
    addr: SocketAddr,
    id: u64,
    handshake: OwnedSemaphorePermit,
) {
    let hello = match tokio::time::timeout(HELLO_TIMEOUT, read_body(&mut stream, first)).await {
        Ok(Ok(m)) => m,
        Ok(Err(reason)) => {
            tracing::warn!(client = id, peer = %addr, "refused: bad hello: {reason}");
            refuse(&mut stream, &format!("bad hello: {reason}")).await;
            return;
        }
        Err(_) => {
            tracing::warn!(client = id, peer = %addr, "refused: no complete hello within {HELLO_TIMEOUT:?}");
            return;
        }
    };
    let (client, sub) = match auth::check_hello(hello, hub.config.token.as_deref()) {
        Ok(v) => v,
        Err(reason) => {
            tracing::warn!(client = id, peer = %addr, "refused: {reason}");
            refuse(&mut stream, &reason).await;
            return;
        }
    };
    let Ok(_session) = hub.sessions.clone().try_acquire_owned() else {
        tracing::warn!(client = id, peer = %addr, "refused: {} clients already connected", hub.config.max_clients);
        refuse(
            &mut stream,
            "the forwarder has as many clients as it serves",
        )
        .await;
        return;
    };
    drop(handshake);
    let peer = Peer { id, addr, client };
    tracing::info!(client = id, peer = %addr, name = %peer.client, ?sub, "tcp client connected");
    let (mut rd, wr) = stream.into_split();
    let (tx, rx) = mpsc::channel::<Incoming>(16);
    let reader = tokio::spawn(async move {
        loop {
            let mut len = [0u8; 4];
            if rd.read_exact(&mut len).await.is_err() {
                return; // closed: dropping `tx` tells the session
            }
            let msg = read_body(&mut rd, len).await;
            let stop = msg.is_err();
            if tx.send(msg).await.is_err() || stop {
                return;
            }
        }
    });
    let why = session::run(hub, &peer, Sink::Tcp(wr), rx, sub).await;
    reader.abort();
    if why.starts_with("protocol error") || why.contains("stalled") {
        tracing::warn!(client = id, peer = %addr, "disconnected: {why}");
    } else {
        tracing::info!(client = id, peer = %addr, "disconnected: {why}");
    }
}
