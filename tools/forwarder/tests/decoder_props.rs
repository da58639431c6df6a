//! Property tests: the message and payload decoders never panic on arbitrary bytes, and never
//! read or allocate beyond the announced and permitted length.

use forwarder::codec::{self, CodecError};
use forwarder::payload;
use forwarder::protocol::{PositionEncoding, ServerMsg};
use proptest::prelude::*;
use shm_protocol::{BodyTransform, FieldKind, Frame, FrameMeta};

/// Decodes a server message body the way the client does; errors are fine, panics are not.
fn decode_all(body: &[u8]) {
    if let Ok((msg, p)) = codec::decode_server(body) {
        match msg {
            ServerMsg::Frame(h) => {
                let _ = payload::read_frame(&h, p);
            }
            ServerMsg::Static(h) => {
                let _ = payload::read_static(&h, p);
            }
            _ => {}
        }
    }
    let _ = codec::decode_client(body);
    let _ = codec::decode_client_json(&String::from_utf8_lossy(body));
}

/// `max_particles` 0: the whole frame; else subsampled (with synthesised particle ids).
fn valid_frame_message(n: usize, quantised: bool, max_particles: u64) -> Vec<u8> {
    let frame = Frame {
        meta: FrameMeta {
            seq: 3,
            particle_count: n as u64,
            body_count: 1,
            fields: FieldKind::Position.bit() | FieldKind::Density.bit(),
            ..FrameMeta::default()
        },
        bodies: vec![BodyTransform::IDENTITY],
        positions: Some((0..n).map(|i| [i as f32, 1.0, 2.0]).collect()),
        densities: Some(vec![1000.0; n]),
        ..Frame::default()
    };
    let enc = if quantised {
        PositionEncoding::Quantized16
    } else {
        PositionEncoding::F32
    };
    let h = payload::frame_header(&frame, 1, u32::MAX, enc, None, max_particles);
    let mut buf = codec::begin_tcp(&ServerMsg::Frame(h.clone()), 0);
    payload::write_frame_payload(&frame, &h, &mut buf);
    codec::finish_tcp(buf)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn random_streams_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let mut r = &bytes[..];
        // Read messages until the stream is exhausted or invalid.
        while let Ok(body) = codec::read_message(&mut r, 1 << 16) {
            prop_assert!(body.len() <= 1 << 16);
            decode_all(&body);
        }
        decode_all(&bytes);
    }

    #[test]
    fn corrupted_frames_never_panic(n in 0usize..64, quantised: bool, max_particles in 0u64..8,
                                    edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
                                    cut in any::<usize>()) {
        let mut wire = valid_frame_message(n, quantised, max_particles);
        for (at, v) in edits {
            let i = 4 + at % (wire.len() - 4);
            wire[i] = v;
        }
        let keep = 4 + cut % (wire.len() - 3);
        wire.truncate(keep);
        let mut r = &wire[..];
        match codec::read_message(&mut r, 1 << 20) {
            Ok(body) => decode_all(&body),
            Err(CodecError::Truncated { .. }) => {}
            Err(e) => prop_assert!(false, "unexpected {e}"),
        }
    }

    #[test]
    fn oversize_prefixes_are_refused_before_reading(len in (1u32 << 16) + 1.., tail in proptest::collection::vec(any::<u8>(), 0..64)) {
        let mut wire = len.to_le_bytes().to_vec();
        wire.extend_from_slice(&tail);
        let is_oversize = matches!(codec::read_message(&mut &wire[..], 1 << 16), Err(CodecError::Oversize { .. }));
        prop_assert!(is_oversize);
    }
}

#[test]
fn valid_frames_decode() {
    for quantised in [false, true] {
        for (max, len) in [(0, 9), (4, 3)] {
            let wire = valid_frame_message(9, quantised, max);
            let body = codec::read_message(&mut &wire[..], 1 << 20).expect("read");
            let (msg, p) = codec::decode_server(&body).expect("decode");
            let ServerMsg::Frame(h) = msg else {
                panic!("not a frame")
            };
            let f = payload::read_frame(&h, p).expect("frame");
            assert_eq!(f.positions.expect("positions").len(), len);
            assert_eq!(f.densities.expect("densities"), vec![1000.0; len]);
        }
    }
}
