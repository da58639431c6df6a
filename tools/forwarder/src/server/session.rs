//! One connected client, over TCP or WebSocket: sends status, static data and the newest frame
//! whenever its socket is ready, forwards its commands to the solver and returns the acks.
//!
//! Backpressure: the task holds at most one frame (an `Arc` of the shared copy) and writes it
//! with `write_all`; while a slow socket is full the task simply waits, and the next frame it
//! sends is whatever is newest then. Nothing queues per client, so memory is bounded by
//! clients x one frame, and a client that accepts nothing for `stall_timeout` is dropped.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::SplitSink;
use futures_util::SinkExt;
use shm_protocol::{Command, CommandError, CommandOutcome, Consumer};
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::{Bytes, Message};
use tokio_tungstenite::WebSocketStream;

use super::{EncodingKey, FieldInterest, Hub, Published, PublishedStatic, Transport};
use crate::codec;
use crate::payload;
use crate::protocol::{ClientMsg, CommandFailure, ServerMsg, Subscription, PROTOCOL_VERSION};

/// Commands one client may have waiting for the solver at once.
const MAX_COMMANDS_IN_FLIGHT: usize = 4;
/// Longest acknowledgement wait a client may ask for.
const MAX_COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// Frames above this many particles are encoded on the blocking pool, not on a runtime worker.
const BLOCKING_ENCODE_PARTICLES: u64 = 16 * 1024;
/// Period of the status message (heartbeat age, newest sequence).
const STATUS_PERIOD: Duration = Duration::from_secs(1);

/// The writing half of a connection.
pub enum Sink {
    Tcp(OwnedWriteHalf),
    Ws(SplitSink<WebSocketStream<TcpStream>, Message>),
}

impl Sink {
    fn transport(&self) -> Transport {
        match self {
            Sink::Tcp(_) => Transport::Tcp,
            Sink::Ws(_) => Transport::Ws,
        }
    }

    async fn send(&mut self, bytes: Bytes) -> Result<(), String> {
        match self {
            Sink::Tcp(w) => w.write_all(&bytes).await.map_err(|e| e.to_string()),
            Sink::Ws(w) => w
                .send(Message::Binary(bytes))
                .await
                .map_err(|e| e.to_string()),
        }
    }

    /// Encodes a message without payload for this transport.
    fn encode(&self, msg: &ServerMsg) -> Bytes {
        Bytes::from(match self {
            Sink::Tcp(_) => codec::encode_tcp(msg),
            Sink::Ws(_) => codec::begin_ws(msg, 0),
        })
    }
}

/// What the connection's reading half delivers: a decoded message or why reading stopped.
pub type Incoming = Result<ClientMsg, String>;

/// Who the session is, for logs.
pub struct Peer {
    pub id: u64,
    pub addr: SocketAddr,
    pub client: String,
}

fn encode_frame(p: &Published, key: EncodingKey) -> Bytes {
    p.cache.get(key, || {
        let h = payload::frame_header(
            &p.frame,
            p.epoch,
            key.fields,
            key.positions,
            p.world,
            key.max_particles,
        );
        let hint = payload::frame_payload_len(
            h.meta.particle_count,
            h.meta.body_count as u64,
            h.meta.fields,
            h.positions,
        )
        .unwrap_or(0) as usize;
        let msg = ServerMsg::Frame(h.clone());
        match key.transport {
            Transport::Tcp => {
                let mut buf = codec::begin_tcp(&msg, hint);
                payload::write_frame_payload(&p.frame, &h, &mut buf);
                codec::finish_tcp(buf)
            }
            Transport::Ws => {
                let mut buf = codec::begin_ws(&msg, hint);
                payload::write_frame_payload(&p.frame, &h, &mut buf);
                buf
            }
        }
    })
}

fn encode_static(s: &PublishedStatic, key: EncodingKey) -> Bytes {
    s.cache.get(key, || {
        let h = payload::static_header(&s.data, s.epoch, key.static_arrays);
        let msg = ServerMsg::Static(h.clone());
        match key.transport {
            Transport::Tcp => {
                let mut buf = codec::begin_tcp(&msg, 0);
                payload::write_static_payload(&s.data, &h, &mut buf);
                codec::finish_tcp(buf)
            }
            Transport::Ws => {
                let mut buf = codec::begin_ws(&msg, 0);
                payload::write_static_payload(&s.data, &h, &mut buf);
                buf
            }
        }
    })
}

/// Runs the session until the client goes away or misbehaves; returns why it ended.
pub async fn run(
    hub: Arc<Hub>,
    peer: &Peer,
    mut sink: Sink,
    mut incoming: mpsc::Receiver<Incoming>,
    mut sub: Subscription,
) -> String {
    let stall = hub.config.stall_timeout;
    let mut interest = FieldInterest::new(hub.clone(), sub.fields);
    let mut frame_rx = hub.frame.subscribe();
    let mut static_rx = hub.statics.subscribe();
    let mut status_rx = hub.status.subscribe();
    let (ack_tx, mut ack_rx) = mpsc::channel::<ServerMsg>(MAX_COMMANDS_IN_FLIGHT);
    let in_flight = Arc::new(AtomicUsize::new(0));
    let mut frames_sent = 0u64;
    // Epoch, sequence and fields of the last frame sent.
    let mut last_frame: Option<(u64, u64, u32)> = None;
    let mut last_static: Option<(u64, u64, bool)> = None;
    let mut next_frame_at = Instant::now();
    let (mut static_due, mut status_due, mut frame_due) = (true, true, true);
    let mut status_tick = tokio::time::interval(STATUS_PERIOD);

    macro_rules! send {
        ($bytes:expr, $what:expr) => {
            match tokio::time::timeout(stall, sink.send($bytes)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return format!("{} failed after {frames_sent} frames: {e}", $what),
                Err(_) => {
                    return format!(
                        "client accepted nothing for {stall:?} (stalled) after {frames_sent} frames"
                    )
                }
            }
        };
    }

    let welcome = ServerMsg::Welcome {
        version: PROTOCOL_VERSION,
        server: format!("forwarder {}", env!("CARGO_PKG_VERSION")),
        segment: hub.config.segment.clone(),
    };
    send!(sink.encode(&welcome), "sending the welcome");

    loop {
        while let Ok(ack) = ack_rx.try_recv() {
            send!(sink.encode(&ack), "sending an ack");
        }
        // Static before status: a status naming generation G follows G's static message.
        if static_due {
            static_due = false;
            let current = static_rx.borrow_and_update().clone();
            if let Some(s) = current {
                let id = (s.epoch, s.data.generation, sub.static_arrays);
                if last_static != Some(id) {
                    last_static = Some(id);
                    // Static messages do not depend on the frame size limit.
                    let key = EncodingKey {
                        max_particles: 0,
                        ..key(&sink, &sub)
                    };
                    let bytes = tokio::task::spawn_blocking(move || encode_static(&s, key))
                        .await
                        .unwrap_or_default();
                    send!(bytes, "sending static data");
                }
            }
        }
        if status_due {
            status_due = false;
            let status = ServerMsg::Status(status_rx.borrow_and_update().clone());
            send!(sink.encode(&status), "sending status");
        }
        if frame_due && Instant::now() >= next_frame_at {
            frame_due = false;
            let current = frame_rx.borrow_and_update().clone();
            if let Some(p) = current {
                let fields = payload::sendable_fields(&p.frame, sub.fields);
                let id = (p.epoch, p.frame.meta.seq, fields);
                // Fields this client wants that the reader did not copy yet (it just
                // subscribed): the reader re-reads the frame shortly; wait for that copy.
                let missing = sub.fields & p.frame.meta.fields & !p.copied;
                if last_frame != Some(id) && missing == 0 {
                    last_frame = Some(id);
                    let key = key(&sink, &sub);
                    let bytes = if p.frame.meta.particle_count > BLOCKING_ENCODE_PARTICLES {
                        tokio::task::spawn_blocking(move || encode_frame(&p, key))
                            .await
                            .unwrap_or_default()
                    } else {
                        encode_frame(&p, key)
                    };
                    send!(bytes, "sending a frame");
                    frames_sent += 1;
                    // The rate was checked by `sanitise`; an unchecked one would panic here.
                    if let Ok(Some(period)) = super::auth::frame_period(&sub) {
                        next_frame_at = Instant::now() + period;
                    }
                }
            }
            continue;
        }
        tokio::select! {
            r = frame_rx.changed() => match r {
                Ok(()) => frame_due = true,
                Err(_) => return "forwarder shutting down".into(),
            },
            r = static_rx.changed() => match r {
                Ok(()) => static_due = true,
                Err(_) => return "forwarder shutting down".into(),
            },
            r = status_rx.changed() => match r {
                Ok(()) => status_due = true,
                Err(_) => return "forwarder shutting down".into(),
            },
            Some(ack) = ack_rx.recv() => send!(sink.encode(&ack), "sending an ack"),
            _ = status_tick.tick() => status_due = true,
            _ = tokio::time::sleep_until(next_frame_at), if frame_due => {}
            msg = incoming.recv() => match msg {
                None => return format!("client closed the connection after {frames_sent} frames"),
                Some(Err(reason)) => {
                    let err = ServerMsg::Error { reason: reason.clone() };
                    let _ = tokio::time::timeout(Duration::from_secs(1), sink.send(sink.encode(&err))).await;
                    return format!("protocol error: {reason}");
                }
                Some(Ok(ClientMsg::Hello { .. })) => {
                    let reason = "a second hello".to_string();
                    let err = ServerMsg::Error { reason: reason.clone() };
                    let _ = tokio::time::timeout(Duration::from_secs(1), sink.send(sink.encode(&err))).await;
                    return format!("protocol error: {reason}");
                }
                Some(Ok(ClientMsg::Subscribe(s))) => match super::auth::sanitise(s) {
                    Ok(s) => {
                        tracing::debug!(client = peer.id, ?s, "subscription changed");
                        interest.set(s.fields);
                        sub = s;
                        frame_due = true;
                        static_due = true;
                        last_frame = None;
                        next_frame_at = Instant::now();
                    }
                    Err(reason) => {
                        let err = ServerMsg::Error { reason: reason.clone() };
                        let _ = tokio::time::timeout(Duration::from_secs(1), sink.send(sink.encode(&err))).await;
                        return format!("protocol error: {reason}");
                    }
                },
                Some(Ok(ClientMsg::Command { id, timeout_ms, command })) => match command.validate() {
                    Ok(()) => start_command(&hub, peer, &in_flight, &ack_tx, id, timeout_ms, command),
                    // Refused where it enters: the solver never sees it. The answer is the one
                    // the solver gives a command it does not apply.
                    Err(reason) => {
                        tracing::warn!(client = peer.id, peer = %peer.addr, ?command, "command rejected: {reason}");
                        let ack = ServerMsg::Ack { id, outcome: Ok(CommandOutcome::Rejected(reason)) };
                        send!(sink.encode(&ack), "sending an ack");
                    }
                },
            },
        }
    }
}

fn key(sink: &Sink, sub: &Subscription) -> EncodingKey {
    EncodingKey {
        transport: sink.transport(),
        fields: sub.fields,
        positions: sub.positions,
        static_arrays: sub.static_arrays,
        max_particles: sub.max_particles,
    }
}

/// Forwards a command to the solver on the blocking pool; the ack comes back on `ack_tx`.
fn start_command(
    hub: &Arc<Hub>,
    peer: &Peer,
    in_flight: &Arc<AtomicUsize>,
    ack_tx: &mpsc::Sender<ServerMsg>,
    id: u64,
    timeout_ms: u32,
    command: Command,
) {
    tracing::info!(client = peer.id, peer = %peer.addr, ?command, "command");
    let ack_tx = ack_tx.clone();
    if in_flight.fetch_add(1, Ordering::AcqRel) >= MAX_COMMANDS_IN_FLIGHT {
        in_flight.fetch_sub(1, Ordering::AcqRel);
        let outcome = Err((
            CommandFailure::Busy,
            format!("more than {MAX_COMMANDS_IN_FLIGHT} commands in flight"),
        ));
        // The channel has room for MAX_COMMANDS_IN_FLIGHT acks; drop the refusal if it is full.
        let _ = ack_tx.try_send(ServerMsg::Ack { id, outcome });
        return;
    }
    let in_flight = in_flight.clone();
    let attached = hub.status.borrow().attached;
    let segment = hub.config.segment.clone();
    let timeout = Duration::from_millis(timeout_ms as u64).min(MAX_COMMAND_TIMEOUT);
    let client = peer.id;
    tokio::spawn(async move {
        let outcome = if attached {
            tokio::task::spawn_blocking(move || send_to_solver(&segment, &command, timeout))
                .await
                .unwrap_or_else(|e| Err((CommandFailure::Other, e.to_string())))
        } else {
            Err((
                CommandFailure::NotAttached,
                "the forwarder is not attached to a solver".into(),
            ))
        };
        tracing::info!(client, id, ?outcome, "command acknowledged");
        let _ = ack_tx.send(ServerMsg::Ack { id, outcome }).await;
        in_flight.fetch_sub(1, Ordering::AcqRel);
    });
}

fn send_to_solver(
    segment: &str,
    command: &Command,
    timeout: Duration,
) -> Result<shm_protocol::CommandOutcome, (CommandFailure, String)> {
    let mut c =
        Consumer::attach(segment).map_err(|e| (CommandFailure::NotAttached, e.to_string()))?;
    c.send(command, timeout).map_err(|e| {
        let kind = match e {
            CommandError::AckTimeout { .. } => CommandFailure::Timeout,
            CommandError::SolverGone(_) => CommandFailure::SolverGone,
            CommandError::TableFull { .. } | CommandError::LockTimeout(_) => CommandFailure::Busy,
            _ => CommandFailure::Other,
        };
        (kind, e.to_string())
    })
}
