//! [`RemoteSource`]: a blocking client of the forwarder (std::net, one background reader
//! thread) that implements [`FrameSource`], so tools work the same with `--connect HOST:PORT`
//! as with `--attach NAME`.
//!
//! The reader thread drains the socket continuously and keeps only the newest frame, so what
//! `read_newest` returns is never older than the network latency; limit the bandwidth with
//! [`Subscription::max_rate_hz`] and [`Subscription::fields`].

use std::collections::HashMap;
use std::io::Write;
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use shm_protocol::{
    Command, CommandError, CommandOutcome, Frame, FrameSource, ReadError, SolverStatus,
    SourceError, StaticData, WaitOutcome,
};

use crate::codec::{self, CodecError};
use crate::payload;
use crate::protocol::{
    ClientMsg, CommandFailure, ServerMsg, Subscription, WireStatus, DEFAULT_MAX_SERVER_MESSAGE,
    PROTOCOL_NAME, PROTOCOL_VERSION,
};

/// How to connect.
#[derive(Clone, Debug)]
pub struct ConnectOptions {
    /// Sent in the hello; required by forwarders listening beyond loopback.
    pub token: Option<String>,
    pub subscription: Subscription,
    /// For connecting and for the welcome.
    pub timeout: Duration,
    /// Largest server message accepted (see [`DEFAULT_MAX_SERVER_MESSAGE`]).
    pub max_message: u64,
    /// Name shown in the forwarder's log.
    pub client_name: String,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            token: None,
            subscription: Subscription::default(),
            timeout: Duration::from_secs(5),
            max_message: DEFAULT_MAX_SERVER_MESSAGE,
            client_name: std::env::args().next().unwrap_or_else(|| "client".into()),
        }
    }
}

/// Connecting failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("cannot resolve {addr}: {source}")]
    Resolve {
        addr: String,
        source: std::io::Error,
    },
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        addr: String,
        source: std::io::Error,
    },
    #[error("forwarder at {addr} refused the connection: {reason}")]
    Refused { addr: String, reason: String },
    #[error("forwarder at {addr}: {source}")]
    Protocol { addr: String, source: CodecError },
    #[error("{addr} did not answer like a forwarder: {what}")]
    Unexpected { addr: String, what: String },
}

#[derive(Default)]
struct State {
    status: Option<WireStatus>,
    statics: Option<StaticData>,
    static_epoch: u64,
    frame: Option<(u64, Arc<Frame>)>,
    acks: HashMap<u64, Result<CommandOutcome, (CommandFailure, String)>>,
    closed: Option<String>,
    frames_received: u64,
    bytes_received: u64,
}

type Shared = Arc<(Mutex<State>, Condvar)>;

fn lock(s: &Shared) -> MutexGuard<'_, State> {
    s.0.lock().unwrap_or_else(|p| p.into_inner())
}

/// A run seen through a forwarder.
pub struct RemoteSource {
    addr: String,
    segment: String,
    writer: TcpStream,
    shared: Shared,
    reader: Option<JoinHandle<()>>,
    next_id: u64,
    /// Epoch of the frame last returned by `read_newest` (sequence numbers restart with it).
    read_epoch: u64,
}

impl RemoteSource {
    /// Connects with default options (positions only, full precision, no rate limit).
    pub fn connect(addr: &str) -> Result<Self, ConnectError> {
        Self::connect_with(addr, ConnectOptions::default())
    }

    /// Connects asking for the fields in `fields` (a `FieldKind` bitmask), full precision: what
    /// `viewer --connect` and `analysis --connect` use.
    pub fn connect_fields(
        addr: &str,
        token: Option<String>,
        fields: u32,
    ) -> Result<Self, ConnectError> {
        let opts = ConnectOptions {
            token,
            subscription: Subscription {
                fields,
                ..Subscription::default()
            },
            ..ConnectOptions::default()
        };
        Self::connect_with(addr, opts)
    }

    pub fn connect_with(addr: &str, opts: ConnectOptions) -> Result<Self, ConnectError> {
        let resolve = |source| ConnectError::Resolve {
            addr: addr.into(),
            source,
        };
        let sockaddr = addr
            .to_socket_addrs()
            .map_err(resolve)?
            .next()
            .ok_or_else(|| resolve(std::io::Error::other("no address")))?;
        let connect = |source| ConnectError::Connect {
            addr: addr.into(),
            source,
        };
        let mut stream = TcpStream::connect_timeout(&sockaddr, opts.timeout).map_err(connect)?;
        stream.set_nodelay(true).map_err(connect)?;
        let hello = ClientMsg::Hello {
            protocol: PROTOCOL_NAME.into(),
            version: PROTOCOL_VERSION,
            token: opts.token.clone().unwrap_or_default(),
            client: opts.client_name.clone(),
            subscription: opts.subscription,
        };
        stream
            .write_all(&codec::encode_tcp(&hello))
            .map_err(connect)?;
        stream
            .set_read_timeout(Some(opts.timeout))
            .map_err(connect)?;
        let protocol = |source| ConnectError::Protocol {
            addr: addr.into(),
            source,
        };
        let body = codec::read_message(&mut stream, opts.max_message).map_err(protocol)?;
        let segment = match codec::decode_server(&body).map_err(protocol)?.0 {
            ServerMsg::Welcome { segment, .. } => segment,
            ServerMsg::Refused { reason } | ServerMsg::Error { reason } => {
                return Err(ConnectError::Refused {
                    addr: addr.into(),
                    reason,
                })
            }
            other => {
                return Err(ConnectError::Unexpected {
                    addr: addr.into(),
                    what: format!("{other:?}"),
                })
            }
        };
        stream.set_read_timeout(None).map_err(connect)?;
        let mut reading = stream.try_clone().map_err(connect)?;
        let shared: Shared = Arc::default();
        let s = shared.clone();
        let max = opts.max_message;
        let reader = std::thread::Builder::new()
            .name("forwarder-client".into())
            .spawn(move || {
                let why = loop {
                    match codec::read_message(&mut reading, max) {
                        Ok(body) => {
                            if let Err(e) = handle(&s, &body) {
                                break e.to_string();
                            }
                        }
                        Err(e) => break e.to_string(),
                    }
                };
                lock(&s).closed = Some(why);
                s.1.notify_all();
            })
            .map_err(connect)?;
        let mut me = Self {
            addr: addr.into(),
            segment,
            writer: stream,
            shared,
            reader: Some(reader),
            next_id: 1,
            read_epoch: 0,
        };
        // The welcome is followed at once by a status: wait for it so `status()` is meaningful.
        let epoch = me
            .wait_for(opts.timeout, |s| s.status.is_some())
            .status
            .as_ref()
            .map_or(0, |s| s.epoch);
        me.read_epoch = epoch;
        Ok(me)
    }

    /// Changes what the forwarder sends.
    pub fn subscribe(&mut self, sub: Subscription) -> Result<(), SourceError> {
        self.write(&ClientMsg::Subscribe(sub))
    }

    /// The forwarder's last status (segment attached, epoch, solver header).
    pub fn wire_status(&self) -> Option<WireStatus> {
        lock(&self.shared).status.clone()
    }

    /// Frames and bytes received so far.
    pub fn received(&self) -> (u64, u64) {
        let s = lock(&self.shared);
        (s.frames_received, s.bytes_received)
    }

    fn write(&mut self, msg: &ClientMsg) -> Result<(), SourceError> {
        self.writer
            .write_all(&codec::encode_tcp(msg))
            .map_err(|e| SourceError::Connection(format!("{}: {e}", self.addr)))
    }

    /// Waits until `ready` holds, the connection closes or `timeout` passes. A timeout beyond
    /// what the clock can represent (`Duration::MAX`) waits without a deadline.
    fn wait_for(&self, timeout: Duration, ready: impl Fn(&State) -> bool) -> MutexGuard<'_, State> {
        let deadline = Instant::now().checked_add(timeout);
        let mut st = lock(&self.shared);
        while !ready(&st) && st.closed.is_none() {
            let left = deadline.map_or(UNBOUNDED_WAIT_SLICE, |d| {
                d.saturating_duration_since(Instant::now())
            });
            if left.is_zero() {
                break;
            }
            st = self
                .shared
                .1
                .wait_timeout(st, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        st
    }

    fn closed_error(&self, st: &State) -> Option<SourceError> {
        st.closed
            .as_ref()
            .map(|why| SourceError::Connection(format!("forwarder {} closed: {why}", self.addr)))
    }
}

/// Applies one server message to the shared state.
fn handle(s: &Shared, body: &[u8]) -> Result<(), CodecError> {
    let (msg, payload_bytes) = codec::decode_server(body)?;
    let st = match msg {
        ServerMsg::Frame(h) => {
            let frame = payload::read_frame(&h, payload_bytes)?;
            let mut st = lock(s);
            st.frames_received += 1;
            st.bytes_received += body.len() as u64 + 4;
            st.frame = Some((h.epoch, Arc::new(frame)));
            st
        }
        ServerMsg::Static(h) => {
            let data = payload::read_static(&h, payload_bytes)?;
            let mut st = lock(s);
            st.static_epoch = h.epoch;
            st.statics = Some(data);
            st
        }
        ServerMsg::Status(w) => {
            let mut st = lock(s);
            st.status = Some(w);
            st
        }
        ServerMsg::Ack { id, outcome } => {
            let mut st = lock(s);
            st.acks.insert(id, outcome);
            st
        }
        ServerMsg::Error { reason } | ServerMsg::Refused { reason } => {
            return Err(CodecError::Invalid(format!("forwarder says: {reason}")))
        }
        ServerMsg::Welcome { .. } => return Err(CodecError::Invalid("a second welcome".into())),
    };
    drop(st);
    s.1.notify_all();
    Ok(())
}

impl Drop for RemoteSource {
    fn drop(&mut self) {
        let _ = self.writer.shutdown(Shutdown::Both);
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

/// One wait of a wait without a deadline (the loop re-checks and waits again).
const UNBOUNDED_WAIT_SLICE: Duration = Duration::from_secs(3600);
/// How long `read_static`/`read_newest` wait for data the forwarder said it has.
const ARRIVAL_TIMEOUT: Duration = Duration::from_secs(10);

impl FrameSource for RemoteSource {
    fn describe(&self) -> String {
        format!("forwarder {} (segment {})", self.addr, self.segment)
    }

    fn status(&mut self) -> Result<SolverStatus, SourceError> {
        let st = lock(&self.shared);
        if let Some(e) = self.closed_error(&st) {
            return Err(e);
        }
        Ok(st
            .status
            .as_ref()
            .map(WireStatus::solver_status)
            .unwrap_or_else(|| WireStatus::default().solver_status()))
    }

    fn read_static(&mut self) -> Result<StaticData, SourceError> {
        let wanted = |st: &State| st.status.as_ref().map_or(0, |s| s.static_generation);
        let st = self.wait_for(ARRIVAL_TIMEOUT, |st| {
            let gen = wanted(st);
            let epoch = st.status.as_ref().map_or(0, |s| s.epoch);
            gen == 0
                || st
                    .statics
                    .as_ref()
                    .is_some_and(|d| d.generation == gen && st.static_epoch == epoch)
        });
        if wanted(&st) == 0 {
            return match (&st.statics, self.closed_error(&st)) {
                (_, Some(e)) => Err(e),
                (Some(d), None) => Ok(d.clone()),
                (None, None) => Err(ReadError::NoStatic.into()),
            };
        }
        match (&st.statics, self.closed_error(&st)) {
            (Some(d), _) => Ok(d.clone()),
            (None, Some(e)) => Err(e),
            (None, None) => Err(SourceError::Connection(format!(
                "forwarder {} announced static data but did not send it within {ARRIVAL_TIMEOUT:?}",
                self.addr
            ))),
        }
    }

    fn read_newest(&mut self) -> Result<Option<Frame>, SourceError> {
        // A fresh connection may not have its first frame yet although the forwarder has one.
        let st = self.wait_for(ARRIVAL_TIMEOUT, |st| {
            st.frame.is_some() || st.status.as_ref().is_none_or(|s| s.frame_seq == 0)
        });
        if let Some((epoch, f)) = &st.frame {
            let (epoch, f) = (*epoch, Frame::clone(f));
            drop(st);
            self.read_epoch = epoch;
            return Ok(Some(f));
        }
        match self.closed_error(&st) {
            Some(e) => Err(e),
            None => Ok(None),
        }
    }

    fn wait_newer(&mut self, seq: u64, timeout: Duration) -> Result<WaitOutcome, SourceError> {
        let epoch = self.read_epoch;
        let newer = move |st: &State| {
            st.frame
                .as_ref()
                .is_some_and(|(e, f)| *e > epoch || (*e == epoch && f.meta.seq > seq))
        };
        let over = |st: &State| {
            st.status
                .as_ref()
                .is_some_and(|s| s.solver_status().is_over())
        };
        let st = self.wait_for(timeout, |st| newer(st) || over(st));
        if newer(&st) {
            let seq = st.frame.as_ref().map_or(0, |(_, f)| f.meta.seq);
            return Ok(WaitOutcome::Newer(seq));
        }
        if let Some(e) = self.closed_error(&st) {
            return Err(e);
        }
        Ok(if over(&st) {
            WaitOutcome::SolverGone
        } else {
            WaitOutcome::TimedOut
        })
    }

    fn send(&mut self, cmd: &Command, timeout: Duration) -> Result<CommandOutcome, SourceError> {
        let id = self.next_id;
        self.next_id += 1;
        self.write(&ClientMsg::Command {
            id,
            timeout_ms: timeout.as_millis().min(u32::MAX as u128) as u32,
            command: cmd.clone(),
        })?;
        // The forwarder answers within `timeout` (+ the network); allow a margin.
        let mut st = self.wait_for(timeout.saturating_add(Duration::from_secs(2)), |st| {
            st.acks.contains_key(&id)
        });
        match st.acks.remove(&id) {
            Some(Ok(outcome)) => Ok(outcome),
            Some(Err((kind, msg))) => Err(match kind {
                CommandFailure::Timeout => CommandError::AckTimeout {
                    timeout,
                    applied: shm_protocol::command::Applied::Unknown,
                }
                .into(),
                CommandFailure::SolverGone => {
                    let pid = st
                        .status
                        .as_ref()
                        .map_or(0, |s| s.solver_status().owner_pid);
                    CommandError::SolverGone(pid).into()
                }
                _ => SourceError::Connection(format!("forwarder {}: {msg}", self.addr)),
            }),
            None => Err(self.closed_error(&st).unwrap_or_else(|| {
                CommandError::AckTimeout {
                    timeout,
                    applied: shm_protocol::command::Applied::Unknown,
                }
                .into()
            })),
        }
    }
}
