//! The forwarder server: one thread follows the segment ([`follow`]) and publishes the newest
//! frame into a `watch` slot; each connection is a task that sends the newest frame whenever
//! its socket can take one ([`session`]), so a slow client skips frames and never delays the
//! others or the segment reader.

pub mod auth;
mod follow;
mod http;
mod session;
mod tcp;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use shm_protocol::{FieldKind, Frame, StaticData};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio_tungstenite::tungstenite::Bytes;

use crate::protocol::{PositionEncoding, WireStatus};

/// How the forwarder runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// Segment name to follow.
    pub segment: String,
    pub listen: SocketAddr,
    /// Required in every hello when set.
    pub token: Option<String>,
    /// Most connected clients (TCP and WebSocket together).
    pub max_clients: usize,
    /// A client whose socket accepts nothing for this long is disconnected.
    pub stall_timeout: Duration,
}

/// How long a new connection may take to send its hello (or HTTP request head).
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections still in their handshake, beyond which new ones are closed at once.
const MAX_HANDSHAKES: usize = 256;

/// Which framing a cached encoding is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transport {
    Tcp,
    Ws,
}

/// What a client's encoding of a frame or static message depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EncodingKey {
    pub transport: Transport,
    pub fields: u32,
    pub positions: PositionEncoding,
    pub static_arrays: bool,
    pub max_particles: u64,
}

/// Encoded messages shared by every client with the same [`EncodingKey`]: the first client
/// to need one encodes it, the others wait for and reuse it.
#[derive(Default)]
pub struct EncodingCache(Mutex<Vec<(EncodingKey, Arc<OnceLock<Bytes>>)>>);

impl EncodingCache {
    pub fn get(&self, key: EncodingKey, build: impl FnOnce() -> Vec<u8>) -> Bytes {
        let cell = {
            let mut entries = self.0.lock().unwrap_or_else(|p| p.into_inner());
            match entries.iter().find(|(k, _)| *k == key) {
                Some((_, c)) => c.clone(),
                None => {
                    let c = Arc::new(OnceLock::new());
                    entries.push((key, c.clone()));
                    c
                }
            }
        };
        cell.get_or_init(|| Bytes::from(build())).clone()
    }
}

/// A frame read from the segment, shared by every client that sends it.
pub struct Published {
    pub epoch: u64,
    pub frame: Frame,
    /// Fields copied from the segment (those some client wanted when it was read); the
    /// segment's frame had `frame.meta.fields`.
    pub copied: u32,
    /// World box of the static data the frame belongs to (for quantisation).
    pub world: Option<([f64; 3], [f64; 3])>,
    pub cache: EncodingCache,
}

/// Static data read from the segment.
pub struct PublishedStatic {
    pub epoch: u64,
    pub data: StaticData,
    pub cache: EncodingCache,
}

/// State shared by the segment reader and every client task.
pub struct Hub {
    pub config: Config,
    pub frame: watch::Sender<Option<Arc<Published>>>,
    pub statics: watch::Sender<Option<Arc<PublishedStatic>>>,
    pub status: watch::Sender<WireStatus>,
    /// Clients wanting each field: the reader copies only fields somebody wants.
    field_interest: [AtomicUsize; FieldKind::TABLE_LEN],
    next_client: AtomicU64,
    sessions: Arc<Semaphore>,
    handshakes: Arc<Semaphore>,
}

impl Hub {
    pub fn new(config: Config) -> Arc<Self> {
        Arc::new(Self {
            sessions: Arc::new(Semaphore::new(config.max_clients)),
            handshakes: Arc::new(Semaphore::new(MAX_HANDSHAKES)),
            config,
            frame: watch::Sender::new(None),
            statics: watch::Sender::new(None),
            status: watch::Sender::new(WireStatus {
                message: "starting".into(),
                ..WireStatus::default()
            }),
            field_interest: Default::default(),
            next_client: AtomicU64::new(1),
        })
    }

    /// Union of the fields connected clients want.
    pub fn wanted_fields(&self) -> u32 {
        FieldKind::ALL
            .into_iter()
            .filter(|f| self.field_interest[*f as usize].load(Ordering::Relaxed) > 0)
            .fold(0, |m, f| m | f.bit())
    }
}

/// Registers a client's interest in fields for as long as it lives.
pub struct FieldInterest {
    hub: Arc<Hub>,
    fields: u32,
}

impl FieldInterest {
    pub fn new(hub: Arc<Hub>, fields: u32) -> Self {
        let mut me = Self { hub, fields: 0 };
        me.set(fields);
        me
    }
    pub fn set(&mut self, fields: u32) {
        for f in FieldKind::ALL {
            let slot = &self.hub.field_interest[f as usize];
            if fields & f.bit() != 0 {
                slot.fetch_add(1, Ordering::Relaxed);
            }
            if self.fields & f.bit() != 0 {
                slot.fetch_sub(1, Ordering::Relaxed);
            }
        }
        self.fields = fields;
    }
}

impl Drop for FieldInterest {
    fn drop(&mut self) {
        self.set(0);
    }
}

/// Binds, starts the segment reader and serves until the process ends. `on_bound` is told the
/// address actually bound (useful with port 0).
pub async fn serve(config: Config, on_bound: impl FnOnce(SocketAddr)) -> anyhow::Result<()> {
    auth::check_listen(&config.listen, config.token.as_deref()).map_err(anyhow::Error::msg)?;
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", config.listen))?;
    let bound = listener.local_addr()?;
    let hub = Hub::new(config);
    let mut first_status = hub.status.subscribe();
    follow::spawn(hub.clone())?;
    // Serve only once the first attach attempt is done, so early clients see the real state.
    let _ = tokio::time::timeout(Duration::from_secs(2), first_status.changed()).await;
    tracing::info!(
        addr = %bound,
        segment = %hub.config.segment,
        token = hub.config.token.is_some(),
        "forwarder listening (browser page: http://{bound}/)"
    );
    on_bound(bound);
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let hub = hub.clone();
        tokio::spawn(async move { handle_connection(hub, stream, peer).await });
    }
}

/// A connection's first four bytes decide: `GET ` is HTTP (page or WebSocket), anything else
/// is the binary protocol's length prefix.
async fn handle_connection(hub: Arc<Hub>, mut stream: TcpStream, peer: SocketAddr) {
    let Ok(_permit) = hub.handshakes.clone().try_acquire_owned() else {
        tracing::warn!(%peer, "closing connection: too many connections in their handshake");
        return;
    };
    let _ = stream.set_nodelay(true);
    let mut first = [0u8; 4];
    match tokio::time::timeout(HELLO_TIMEOUT, stream.read_exact(&mut first)).await {
        Err(_) => {
            tracing::warn!(%peer, "closing connection: nothing received within {HELLO_TIMEOUT:?}");
            return;
        }
        Ok(Err(e)) => {
            tracing::warn!(%peer, "connection closed before a request: {e}");
            return;
        }
        Ok(Ok(_)) => {}
    }
    let id = hub.next_client.fetch_add(1, Ordering::Relaxed);
    if &first == b"GET " {
        http::serve(hub, stream, peer, id, _permit).await;
    } else {
        tcp::serve(hub, stream, first, peer, id, _permit).await;
    }
}
