//! Test vectors for other implementations of the protocol: every message type (and the bincode
//! corner cases under them) encoded by this crate, with its serde JSON value and, for frames and
//! static data, the arrays this crate's decoder reads from the payload. The Python client's
//! tests (`tools/python/tests/test_wire.py`) decode and re-encode them.
//!
//! The vectors are committed (`tools/python/tests/wire_vectors.json`) so the Python tests also
//! run standalone; this test fails when the file is not what the current code writes, so the
//! two sides cannot drift. After a deliberate protocol change, rewrite it with
//! `PSHM_WRITE_VECTORS=1 cargo test --release -p forwarder --test wire_vectors`.

use std::path::PathBuf;

use forwarder::codec;
use forwarder::payload;
use forwarder::protocol::{
    ClientMsg, CommandFailure, PositionEncoding, ServerMsg, Subscription, WireStatus,
    PROTOCOL_NAME, PROTOCOL_VERSION,
};
use forwarder::server::auth::check_hello;
use serde_json::{json, Value};
use shm_protocol::layout::SpeciesMethod;
use shm_protocol::static_data::encode_name;
use shm_protocol::{
    BodyTransform, Command, CommandOutcome, FieldKind, Frame, FrameMeta, MeshStatic, SolverState,
    SolverStatus, SpeciesRecord, StaticData,
};

fn vectors_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../python/tests/wire_vectors.json")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One vector: a name, the Rust type, the serde JSON value and the bytes.
fn vector(name: &str, ty: &str, value: Value, bytes: &[u8]) -> Value {
    json!({"name": name, "type": ty, "value": value, "hex": hex(bytes)})
}

/// bincode corner cases: u8 and i8 raw, every varint width at its boundaries, zigzag, floats,
/// bool, a non-ASCII string, Option, Vec. (Two nested tuples: serde implements up to 16.)
fn primitives() -> Value {
    #[allow(clippy::type_complexity)]
    let v: (
        (u8, i8, u16, u16, u16, u32, u32, u64, u64, u64),
        (
            i16,
            i32,
            i64,
            i64,
            f32,
            f64,
            bool,
            String,
            Option<u64>,
            Option<u64>,
            Vec<u32>,
        ),
    ) = (
        (
            255,
            -5,
            250,
            251,
            65535,
            65536,
            u32::MAX,
            1 << 32,
            u64::MAX,
            0,
        ),
        (
            -1,
            i32::MIN,
            i64::MAX,
            -300,
            1.5,
            -0.1,
            true,
            "h\u{e9}llo".into(),
            None,
            Some(300),
            vec![1, 251, 70000],
        ),
    );
    let bytes = bincode::serde::encode_to_vec(&v, codec::bincode_config()).expect("encode");
    vector("primitives", "primitives", json!(v), &bytes)
}

fn client(name: &str, msg: ClientMsg) -> Value {
    vector(
        name,
        "ClientMsg",
        serde_json::to_value(&msg).expect("json"),
        &codec::encode_tcp(&msg),
    )
}

fn client_messages() -> Vec<Value> {
    let hello = |token: &str, subscription| ClientMsg::Hello {
        protocol: PROTOCOL_NAME.into(),
        version: PROTOCOL_VERSION,
        token: token.into(),
        client: "python test".into(),
        subscription,
    };
    let command = |id, timeout_ms, command| ClientMsg::Command {
        id,
        timeout_ms,
        command,
    };
    let sub = Subscription {
        fields: FieldKind::Position.bit() | FieldKind::Velocity.bit() | FieldKind::ParticleId.bit(),
        positions: PositionEncoding::Quantized16,
        max_rate_hz: 2.5,
        static_arrays: true,
        max_particles: 200_000,
    };
    vec![
        client("hello_default", hello("", Subscription::default())),
        client("hello_token_quantized", hello("s3cret", sub)),
        client("subscribe", ClientMsg::Subscribe(sub)),
        client("command_pause", command(1, 5000, Command::Pause)),
        client(
            "command_refresh_sim",
            command(
                300,
                60_000,
                Command::SetRefresh {
                    sim_seconds: Some(0.01),
                    wall_ms: None,
                },
            ),
        ),
        client(
            "command_refresh_wall",
            command(
                2,
                1,
                Command::SetRefresh {
                    sim_seconds: None,
                    wall_ms: Some(250),
                },
            ),
        ),
        client("command_update", command(3, 5000, Command::UpdateNow)),
        client("command_resume", command(4, 5000, Command::Resume)),
        client("command_stop", command(5, 5000, Command::Stop)),
        client(
            "command_checkpoint",
            command(1 << 40, 5000, Command::Checkpoint),
        ),
    ]
}

/// A server message without payload.
fn server(name: &str, msg: ServerMsg) -> Value {
    vector(
        name,
        "ServerMsg",
        serde_json::to_value(&msg).expect("json"),
        &codec::encode_tcp(&msg),
    )
}

/// A frame message and the arrays `payload::read_frame` reads back from it.
fn frame_vector(
    name: &str,
    frame: &Frame,
    enc: PositionEncoding,
    world: Option<([f64; 3], [f64; 3])>,
    max_particles: u64,
) -> Value {
    let h = payload::frame_header(frame, 7, u32::MAX, enc, world, max_particles);
    let msg = ServerMsg::Frame(h.clone());
    let mut wire = codec::begin_tcp(&msg, 0);
    payload::write_frame_payload(frame, &h, &mut wire);
    let wire = codec::finish_tcp(wire);
    let back = payload::read_frame(&h, &wire[4 + header_len(&msg)..]).expect("decodes");
    let mut v = vector(
        name,
        "ServerMsg",
        serde_json::to_value(&msg).expect("json"),
        &wire,
    );
    v["arrays"] = json!({
        "bodies": back.bodies.iter().map(|b| {
            b.rotation.iter().chain(&b.translation).chain(&b.velocity).chain(&b.angular_velocity)
                .copied().collect::<Vec<f32>>()
        }).collect::<Vec<_>>(),
        "positions": back.positions,
        "velocities": back.velocities,
        "angular_velocities": back.angular_velocities,
        "forces": back.forces,
        "contact_counts": back.contact_counts,
        "densities": back.densities,
        "pressures": back.pressures,
        "particle_ids": back.particle_ids,
        "particle_kinds": back.particle_kinds,
    });
    v
}

fn header_len(msg: &ServerMsg) -> usize {
    codec::encode_tcp(msg).len() - 4
}

/// A static message and the arrays `payload::read_static` reads back from it.
fn static_vector(name: &str, data: &StaticData, arrays: bool) -> Value {
    let h = payload::static_header(data, 7, arrays);
    let msg = ServerMsg::Static(h.clone());
    let mut wire = codec::begin_tcp(&msg, 0);
    payload::write_static_payload(data, &h, &mut wire);
    let wire = codec::finish_tcp(wire);
    let back = payload::read_static(&h, &wire[4 + header_len(&msg)..]).expect("decodes");
    let mut v = vector(
        name,
        "ServerMsg",
        serde_json::to_value(&msg).expect("json"),
        &wire,
    );
    v["arrays"] = json!({
        "ids": back.particle_ids,
        "species_ids": back.particle_species,
        "radii": back.particle_radius,
        "meshes": back.meshes.iter().map(|m| json!({"name": m.name, "triangles": m.triangles}))
            .collect::<Vec<_>>(),
    });
    v
}

fn sample_static() -> StaticData {
    let mut dem = SpeciesRecord {
        name: encode_name("glass"),
        method: SpeciesMethod::Dem as u32,
        radius: 0.002,
        density: 2500.0,
        ..SpeciesRecord::default()
    };
    dem.params[..6].copy_from_slice(&[7e10, 0.25, 0.3, 0.5, 0.05, 2000.0]);
    let unknown = SpeciesRecord {
        name: encode_name("d\u{e9}j\u{e0} vu"),
        method: 9,
        radius: 0.003,
        density: 1000.0,
        ..SpeciesRecord::default()
    };
    StaticData {
        config_toml: "dt = 2e-5\n[domain]\nmin = [0.0, 0.0, -0.1]\n".into(),
        species: vec![dem, unknown],
        particle_ids: vec![0, 1, 2],
        particle_species: vec![0, 1, 0],
        particle_radius: vec![0.002, 0.003, 0.0025],
        meshes: vec![MeshStatic {
            name: "floor".into(),
            triangles: vec![
                [0.0, 0.0, 0.0, 0.1, 0.0, 0.0, 0.1, 0.1, 0.0],
                [0.0, 0.0, 0.0, 0.1, 0.1, 0.0, 0.0, 0.1, 0.0],
            ],
        }],
        world_min: [0.0, 0.0, -0.1],
        world_max: [0.1, 0.1, 0.3],
        cell_size: 0.006,
        generation: 4,
    }
}

fn sample_frame(n: usize) -> Frame {
    Frame {
        meta: FrameMeta {
            seq: 300,
            slot: 2,
            step: 70_000,
            sim_time: 1.4,
            dt: 2e-5,
            wall_unix_ns: 1_763_900_000_123_456_789,
            publish_mono_ns: 98_765_432_100,
            particle_count: n as u64,
            body_count: 1,
            static_generation: 4,
            steps_per_s: 8123.5,
            // Beyond u32: a u32 in its place would decode to something else.
            removed_count: 5_000_000_000,
            removed_mass: 6.5e-5,
            ..FrameMeta::default()
        },
        bodies: vec![BodyTransform {
            translation: [0.01, 0.0, -0.001],
            velocity: [0.5, 0.0, 0.0],
            ..BodyTransform::IDENTITY
        }],
        positions: Some(
            (0..n)
                .map(|i| [0.01 * i as f32, 0.05, 0.2 - 0.03 * i as f32])
                .collect(),
        ),
        velocities: Some((0..n).map(|i| [0.0, -(i as f32), 1.5]).collect()),
        contact_counts: Some((0..n as u32).collect()),
        densities: Some((0..n).map(|i| 1000.0 + i as f32).collect()),
        particle_ids: Some((0..n as u32).map(|i| 2 * i + 1).collect()),
        ..Frame::default()
    }
}

/// A hello as the Python client sends it.
fn hello(token: &str, version: u32) -> ClientMsg {
    ClientMsg::Hello {
        protocol: PROTOCOL_NAME.into(),
        version,
        token: token.into(),
        client: "python test".into(),
        subscription: Subscription::default(),
    }
}

/// The `Refused` a forwarder with `token` answers `msg` with.
fn refusal(name: &str, msg: ClientMsg, token: Option<&str>) -> Value {
    let reason = check_hello(msg, token).expect_err("refused");
    server(name, ServerMsg::Refused { reason })
}

fn server_messages() -> Vec<Value> {
    let solver = SolverStatus {
        state: Some(SolverState::Running),
        owner_pid: 4242,
        alive: true,
        heartbeat_age_s: 0.125,
        newest_seq: 300,
        created_unix_ns: 1_763_900_000_000_000_000,
    };
    let quantised = {
        let mut f = sample_frame(5);
        f.meta.fields = FieldKind::Position.bit();
        f.velocities = None;
        f.contact_counts = None;
        f.densities = None;
        f.particle_ids = None;
        f.bodies.clear();
        f.meta.body_count = 0;
        f
    };
    let mut full = sample_frame(3);
    full.meta.fields = [
        FieldKind::Position,
        FieldKind::Velocity,
        FieldKind::ContactCount,
        FieldKind::Density,
        FieldKind::ParticleId,
    ]
    .iter()
    .fold(0, |m, f| m | f.bit());
    let mut world_box_frame = quantised.clone();
    world_box_frame.positions = Some(vec![
        [0.0, 0.0, -0.1],
        [0.1, 0.1, 0.3],
        [0.05, 0.025, 0.1],
        [0.2, -1.0, 0.0],
        [0.0; 3],
    ]);
    vec![
        server(
            "welcome",
            ServerMsg::Welcome {
                version: PROTOCOL_VERSION,
                server: "forwarder 0.1.0".into(),
                segment: "run1".into(),
            },
        ),
        // The forwarder's own refusal texts: clients tell them apart by these words.
        refusal(
            "refused_wrong_token",
            hello("abd", PROTOCOL_VERSION),
            Some("abc"),
        ),
        refusal(
            "refused_missing_token",
            hello("", PROTOCOL_VERSION),
            Some("abc"),
        ),
        refusal(
            "refused_other_version",
            hello("", PROTOCOL_VERSION - 1),
            None,
        ),
        server(
            "status_running",
            ServerMsg::Status(WireStatus {
                attached: true,
                epoch: 1,
                solver: Some(solver),
                static_generation: 4,
                frame_seq: 300,
                message: String::new(),
            }),
        ),
        server(
            "status_detached",
            ServerMsg::Status(WireStatus {
                attached: false,
                epoch: 2,
                solver: None,
                static_generation: 0,
                frame_seq: 0,
                message: "segment \"run1\" not found".into(),
            }),
        ),
        server(
            "ack_done",
            ServerMsg::Ack {
                id: 1,
                outcome: Ok(CommandOutcome::Done("paused".into())),
            },
        ),
        server(
            "ack_rejected",
            ServerMsg::Ack {
                id: 300,
                outcome: Ok(CommandOutcome::Rejected(
                    "refresh must be between 1e-12 and 1e9".into(),
                )),
            },
        ),
        server(
            "ack_timeout",
            ServerMsg::Ack {
                id: 2,
                outcome: Err((
                    CommandFailure::Timeout,
                    "no acknowledgement within 5s".into(),
                )),
            },
        ),
        server(
            "ack_busy",
            ServerMsg::Ack {
                id: 1 << 33,
                outcome: Err((
                    CommandFailure::Busy,
                    "more than 4 commands in flight".into(),
                )),
            },
        ),
        server(
            "error",
            ServerMsg::Error {
                reason: "a second hello".into(),
            },
        ),
        static_vector("static_arrays", &sample_static(), true),
        static_vector("static_without_arrays", &sample_static(), false),
        frame_vector(
            "frame_f32_fields_bodies_ids",
            &full,
            PositionEncoding::F32,
            None,
            0,
        ),
        frame_vector(
            "frame_quantized_bounding_box",
            &quantised,
            PositionEncoding::Quantized16,
            None,
            0,
        ),
        frame_vector(
            "frame_quantized_world_box",
            &world_box_frame,
            PositionEncoding::Quantized16,
            Some(([0.0, 0.0, -0.1], [0.1, 0.1, 0.3])),
            0,
        ),
        // At most 2 of 5 particles: every third, named by the sampled indices (no ids).
        frame_vector(
            "frame_subsampled_quantized",
            &world_box_frame,
            PositionEncoding::Quantized16,
            Some(([0.0, 0.0, -0.1], [0.1, 0.1, 0.3])),
            2,
        ),
        // A frame with its own ids, every second of 3: they keep those ids.
        frame_vector(
            "frame_subsampled_ids",
            &full,
            PositionEncoding::F32,
            None,
            2,
        ),
    ]
}

/// The file's text: one vector per line, so a change shows as a readable diff.
fn render() -> String {
    let mut all = vec![primitives()];
    all.extend(client_messages());
    all.extend(server_messages());
    let lines: Vec<String> = all.iter().map(|v| format!("  {v}")).collect();
    format!(
        "{{\"protocol_version\": {PROTOCOL_VERSION}, \"written_by\": \"tools/forwarder/tests/wire_vectors.rs\", \"vectors\": [\n{}\n]}}\n",
        lines.join(",\n")
    )
}

#[test]
fn committed_vectors_are_what_this_code_encodes() {
    let text = render();
    // Every vector parses back and is unique by name.
    let parsed: Value = serde_json::from_str(&text).expect("valid JSON");
    let mut names: Vec<&str> = parsed["vectors"]
        .as_array()
        .expect("vectors")
        .iter()
        .map(|v| v["name"].as_str().expect("name"))
        .collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(
        names.len(),
        parsed["vectors"].as_array().map_or(0, Vec::len)
    );

    let path = vectors_file();
    if std::env::var_os("PSHM_WRITE_VECTORS").is_some() {
        std::fs::write(&path, &text).expect("write the vectors");
        eprintln!("wrote {}", path.display());
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == text,
        "{} is not what this code encodes (the protocol changed?). Check the change, then rewrite \
         it with `PSHM_WRITE_VECTORS=1 cargo test --release -p forwarder --test wire_vectors` \
         and make the Python client (tools/python/particle_shm/_wire.py) follow",
        path.display()
    );
}
