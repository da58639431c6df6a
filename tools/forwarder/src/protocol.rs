//! Message types of the forwarder protocol (`PROTOCOL.md` documents every byte).
//!
//! Every message is a serde value: over TCP it is encoded with bincode 2 (standard config) and
//! framed by a little-endian `u32` length; over WebSocket the browser sends JSON text and receives
//! binary messages holding a JSON header. Frames and static data carry their big arrays as raw
//! little-endian bytes after the header (the "payload"), never through serde.

use serde::{Deserialize, Serialize};
use shm_protocol::{Command, CommandOutcome, FrameMeta, SolverStatus};

/// `protocol` string of a [`ClientMsg::Hello`]: anything else is garbage.
pub const PROTOCOL_NAME: &str = "particle-shm-forwarder";
/// Bumped on any incompatible change of this file or of the payload layouts. 3: the frame
/// header's `meta` ends in `removed_count` and `removed_mass` (shm-protocol's `FrameMeta`).
/// 4: `Subscription::max_particles`; the frame header's `stride` and `frame_particles`.
pub const PROTOCOL_VERSION: u32 = 4;
/// Largest message a client may send (body bytes after the length prefix). Commands and
/// hellos are a few hundred bytes; anything larger is an attack or a bug.
pub const MAX_CLIENT_MESSAGE: u32 = 64 * 1024;
/// Default largest server message a [`crate::client::RemoteSource`] accepts: 1 GiB holds every
/// field of ~18 M particles. Raise it with `ConnectOptions::max_message` for bigger runs.
pub const DEFAULT_MAX_SERVER_MESSAGE: u64 = 1 << 30;
/// Largest bincode header inside a message (the configuration text is the big part).
pub const MAX_HEADER: usize = 16 << 20;
/// Longest token accepted in a hello.
pub const MAX_TOKEN_LEN: usize = 1024;

/// How positions travel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PositionEncoding {
    /// `f32 x3` exactly as in the segment.
    #[default]
    F32,
    /// `u16 x3`, quantised within the frame header's box: `x = min + q * (max - min) / 65535`.
    /// Error at most `(max - min) / 131070` per axis; 2x smaller than `F32`.
    Quantized16,
}

/// What a client wants to receive.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Subscription {
    /// Bitmask of `shm_protocol::FieldKind` bits; fields the solver does not publish are skipped.
    pub fields: u32,
    pub positions: PositionEncoding,
    /// Most frames per second to send (0 = as fast as the client reads them); otherwise at
    /// least one frame a day (1/86400 Hz), since the period must be a representable duration.
    pub max_rate_hz: f32,
    /// Send the static per-particle arrays (ids, species, radii, triangles); without them the
    /// static message carries only the world box, species, meshes' names and configuration.
    pub static_arrays: bool,
    /// Most particles per frame (0 = all). A frame holding more is sent subsampled: every
    /// `stride`-th particle, `stride = ceil(N / max_particles)`, named by its particle id (see
    /// [`FrameHeader::stride`]). What lets a browser on a laptop follow a 10 M-particle run.
    /// May be left out of a JSON subscription (0).
    #[serde(default)]
    pub max_particles: u64,
}

impl Default for Subscription {
    fn default() -> Self {
        Self {
            fields: shm_protocol::FieldKind::Position.bit(),
            positions: PositionEncoding::F32,
            max_rate_hz: 0.0,
            static_arrays: true,
            max_particles: 0,
        }
    }
}

/// Client to server.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ClientMsg {
    /// Must be the first message.
    Hello {
        protocol: String,
        version: u32,
        /// Empty when the server needs none.
        token: String,
        /// Free text for the server's log (program name).
        client: String,
        subscription: Subscription,
    },
    /// Changes the subscription.
    Subscribe(Subscription),
    /// A command for the solver; answered by [`ServerMsg::Ack`] with the same `id`. A command
    /// whose values are out of range (`Command::validate`) is answered at once with
    /// `Ok(CommandOutcome::Rejected(why))` and never reaches the solver.
    Command {
        id: u64,
        /// How long the forwarder waits for the solver's acknowledgement (capped at 60 s).
        timeout_ms: u32,
        command: Command,
    },
}

/// Why a command got no outcome from the solver.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CommandFailure {
    /// The solver did not acknowledge in time.
    Timeout,
    /// The solver is gone.
    SolverGone,
    /// The forwarder is not attached to a segment.
    NotAttached,
    /// The command table is full, or this client has too many commands in flight.
    Busy,
    Other,
}

/// Server to client.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum ServerMsg {
    /// Answer to a good hello.
    Welcome {
        version: u32,
        /// Forwarder name and version.
        server: String,
        /// Segment name the forwarder follows.
        segment: String,
    },
    /// Answer to a bad hello; the connection closes.
    Refused { reason: String },
    /// The solver's state as the forwarder sees it: on change and every second.
    Status(WireStatus),
    /// Static data (payload: arrays, see [`StaticHeader`]).
    Static(StaticHeader),
    /// A frame (payload: arrays, see [`FrameHeader`]).
    Frame(FrameHeader),
    /// Outcome of [`ClientMsg::Command`] `id`.
    Ack {
        id: u64,
        outcome: Result<CommandOutcome, (CommandFailure, String)>,
    },
    /// A protocol error in what the client sent; the connection closes.
    Error { reason: String },
}

/// The forwarder's view of the solver.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct WireStatus {
    /// Attached to a segment of the followed name.
    pub attached: bool,
    /// Incremented every time the forwarder attaches to a new segment object (solver restart):
    /// frame sequence numbers restart with it.
    pub epoch: u64,
    /// Header of the attached segment (None when detached).
    pub solver: Option<SolverStatus>,
    /// Static generation the forwarder has (0: none). A client that sees a status with
    /// generation G has already been sent the static message of G.
    pub static_generation: u64,
    /// Sequence number of the newest frame the forwarder has read (0: none).
    pub frame_seq: u64,
    /// Why the forwarder is detached, or the last error reading the segment.
    pub message: String,
}

impl WireStatus {
    /// The `SolverStatus` a local consumer would see (a detached forwarder reads as a dead
    /// solver, which is what a local consumer of a vanished segment sees too).
    pub fn solver_status(&self) -> SolverStatus {
        self.solver.clone().unwrap_or(SolverStatus {
            state: None,
            owner_pid: 0,
            alive: false,
            heartbeat_age_s: f64::INFINITY,
            newest_seq: 0,
            created_unix_ns: 0,
        })
    }
}

/// One species, as in the segment's species record: its method (`SpeciesMethod`'s name, e.g.
/// `"dem"`), radius [m], density [kg/m^3] and the method's parameters by name
/// (`SpeciesMethod::param_names`, in that order).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WireSpecies {
    pub name: String,
    pub method: String,
    pub radius: f64,
    pub density: f64,
    pub params: Vec<(String, f64)>,
}

/// A mesh's name and how many of the payload's triangles are its own (in order).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WireMesh {
    pub name: String,
    pub triangle_count: u64,
}

/// Header of a static message. Payload when `arrays`: `particle_ids u32[n]`,
/// `particle_species u32[n]`, `particle_radius f32[n]`, then every mesh's triangles
/// (`f32[9]` each) in mesh order; empty otherwise.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StaticHeader {
    pub epoch: u64,
    pub generation: u64,
    pub world_min: [f64; 3],
    pub world_max: [f64; 3],
    pub cell_size: f64,
    pub config_toml: String,
    pub species: Vec<WireSpecies>,
    pub meshes: Vec<WireMesh>,
    pub particle_count: u64,
    pub arrays: bool,
}

/// Header of a frame message. Payload: `meta.body_count` body transforms (18 `f32` each:
/// rotation[9], translation[3], velocity[3], angular_velocity[3]), then for each bit of
/// `fields` in increasing order the array of `meta.particle_count` elements (positions as
/// `positions` says), each array padded with zero bytes to a multiple of 4 bytes.
///
/// In a run whose particle set changes the frame holds only the live particles, and element `i`
/// is the particle `particle_id[i]` (bit 7): a client that looks up species or radii in the
/// static arrays subscribes to it and indexes them by id (`StaticData::per_element`). A
/// subsampled frame (`stride` > 1) always carries `particle_id`, subscribed or not.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FrameHeader {
    pub epoch: u64,
    /// The segment's metadata, in its field order, ending in `removed_count` (particles removed
    /// by outflow regions since t = 0) and `removed_mass` [kg]; `meta.fields` and
    /// `meta.particle_count` are what this message carries.
    pub meta: FrameMeta,
    pub positions: PositionEncoding,
    /// Quantisation box (meaningful with `Quantized16`): the world box of the static data when
    /// it is finite and non-empty, else the frame's bounding box.
    pub quant_min: [f32; 3],
    pub quant_max: [f32; 3],
    /// 1: every particle of the frame. k > 1 (the subscription's `max_particles`): element `i`
    /// is the frame's particle `k * i`, and `particle_id` names each element (the frame's own
    /// ids, or `k * i` where the frame has none: its static entry).
    pub stride: u64,
    /// Particles of the frame in the segment (`meta.particle_count` when `stride` is 1).
    pub frame_particles: u64,
}

impl Default for FrameHeader {
    fn default() -> Self {
        Self {
            epoch: 0,
            meta: FrameMeta::default(),
            positions: PositionEncoding::default(),
            quant_min: [0.0; 3],
            quant_max: [0.0; 3],
            stride: 1,
            frame_particles: 0,
        }
    }
}
