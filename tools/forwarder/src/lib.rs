//! `forwarder`: serves a particle-shm segment's frames and commands over TCP and WebSocket
//! (`PROTOCOL.md`), and the blocking client [`client::RemoteSource`] that lets any
//! [`shm_protocol::FrameSource`] user read a run through the network.

pub mod client;
pub mod codec;
pub mod payload;
pub mod protocol;
pub mod server;
pub mod source_args;
pub mod values;

pub use client::{ConnectOptions, RemoteSource};
pub use protocol::{PositionEncoding, Subscription};
pub use source_args::{SourceArgs, SourceChoice};
#[doc(hidden)]
pub mod testing;
