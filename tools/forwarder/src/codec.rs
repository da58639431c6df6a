//! Framing and headers: `u32` LE length, bincode 2 header, raw payload (TCP); a JSON header in a
//! binary message (WebSocket). Decoders never trust a length: every count is checked against
//! the bytes actually present before anything is allocated or indexed.

use std::io::Read;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::protocol::{ClientMsg, ServerMsg, MAX_HEADER};

#[cfg(target_endian = "big")]
compile_error!(
    "the forwarder's payloads are little-endian memory copies; big-endian hosts need byte swapping"
);

/// Decoding or reading a message.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("message length {len} exceeds the limit of {max} bytes")]
    Oversize { len: u64, max: u64 },
    #[error("empty message (length 0)")]
    Empty,
    #[error("connection closed in the middle of a message ({got} of {want} bytes)")]
    Truncated { got: u64, want: u64 },
    #[error("connection closed")]
    Closed,
    #[error("undecodable header: {0}")]
    Header(String),
    #[error("{0} trailing bytes after a message that has no payload")]
    Trailing(usize),
    #[error("payload is {got} bytes, the header implies {want}")]
    PayloadSize { got: u64, want: u64 },
    #[error("invalid message: {0}")]
    Invalid(String),
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

type Config = bincode::config::Configuration<
    bincode::config::LittleEndian,
    bincode::config::Varint,
    bincode::config::Limit<MAX_HEADER>,
>;

/// bincode 2 standard configuration, with a limit so a lying length inside a header cannot
/// make the decoder reserve more than [`MAX_HEADER`] bytes.
pub fn bincode_config() -> Config {
    bincode::config::standard().with_limit::<MAX_HEADER>()
}

/// Starts a TCP message: 4 placeholder length bytes and the bincode header. Append the payload,
/// then call [`finish_tcp`].
pub fn begin_tcp<T: Serialize>(header: &T, payload_hint: usize) -> Vec<u8> {
    let mut buf = Vec::with_capacity(64 + payload_hint);
    buf.extend_from_slice(&[0; 4]);
    // Encoding into a Vec cannot fail for our types (no maps with non-string keys, no limits on
    // the encoder side); should it, the message is sent without a header and the peer's decoder
    // reports it.
    if let Err(e) = bincode::serde::encode_into_std_write(header, &mut buf, bincode_config()) {
        tracing::error!("bincode encode failed: {e}");
    }
    buf
}

/// Writes the length prefix of a message built with [`begin_tcp`].
pub fn finish_tcp(mut buf: Vec<u8>) -> Vec<u8> {
    let len = (buf.len() - 4) as u32;
    buf[..4].copy_from_slice(&len.to_le_bytes());
    buf
}

/// A complete TCP message without payload.
pub fn encode_tcp<T: Serialize>(msg: &T) -> Vec<u8> {
    finish_tcp(begin_tcp(msg, 0))
}

/// Starts a WebSocket binary message: `u32` LE JSON length, the JSON header padded with spaces
/// to a multiple of 4 bytes (so the payload's arrays can be viewed as typed arrays in place).
pub fn begin_ws<T: Serialize>(header: &T, payload_hint: usize) -> Vec<u8> {
    let mut json = serde_json::to_vec(header).unwrap_or_else(|e| {
        tracing::error!("json encode failed: {e}");
        b"{}".to_vec()
    });
    while !json.len().is_multiple_of(4) {
        json.push(b' ');
    }
    let mut buf = Vec::with_capacity(4 + json.len() + payload_hint);
    buf.extend_from_slice(&(json.len() as u32).to_le_bytes());
    buf.extend_from_slice(&json);
    buf
}

/// Reads one length-prefixed message body (blocking). Refuses a length over `max` before
/// reading it, and grows the buffer only as bytes arrive, so a lying prefix costs nothing.
pub fn read_message(r: &mut impl Read, max: u64) -> Result<Vec<u8>, CodecError> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match r.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Err(CodecError::Closed),
            Ok(0) => {
                return Err(CodecError::Truncated {
                    got: got as u64,
                    want: 4,
                })
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    let len = u32::from_le_bytes(len) as u64;
    check_len(len, max)?;
    let mut body = Vec::with_capacity(len.min(1 << 20) as usize);
    r.take(len).read_to_end(&mut body)?;
    if (body.len() as u64) < len {
        return Err(CodecError::Truncated {
            got: body.len() as u64,
            want: len,
        });
    }
    Ok(body)
}

/// Checks a length prefix against the limit.
pub fn check_len(len: u64, max: u64) -> Result<(), CodecError> {
    if len == 0 {
        return Err(CodecError::Empty);
    }
    if len > max {
        return Err(CodecError::Oversize { len, max });
    }
    Ok(())
}

/// Decodes a bincode header at the start of `body`; returns it and the payload after it.
pub fn decode_header<T: DeserializeOwned>(body: &[u8]) -> Result<(T, &[u8]), CodecError> {
    let (v, used) = bincode::serde::decode_from_slice(body, bincode_config())
        .map_err(|e| CodecError::Header(e.to_string()))?;
    Ok((v, &body[used..]))
}

/// Decodes a server message body into its header and payload.
pub fn decode_server(body: &[u8]) -> Result<(ServerMsg, &[u8]), CodecError> {
    let (msg, payload) = decode_header::<ServerMsg>(body)?;
    let carries_payload = matches!(msg, ServerMsg::Frame(_) | ServerMsg::Static(_));
    if !carries_payload && !payload.is_empty() {
        return Err(CodecError::Trailing(payload.len()));
    }
    Ok((msg, payload))
}

/// Decodes a client message body (bincode, no payload).
pub fn decode_client(body: &[u8]) -> Result<ClientMsg, CodecError> {
    let (msg, rest) = decode_header::<ClientMsg>(body)?;
    if !rest.is_empty() {
        return Err(CodecError::Trailing(rest.len()));
    }
    Ok(msg)
}

/// Decodes a client message sent as WebSocket JSON text.
pub fn decode_client_json(text: &str) -> Result<ClientMsg, CodecError> {
    serde_json::from_str(text).map_err(|e| CodecError::Header(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::*;

    #[test]
    fn client_messages_round_trip_and_reject_trailing_bytes() {
        let hello = ClientMsg::Hello {
            protocol: PROTOCOL_NAME.into(),
            version: PROTOCOL_VERSION,
            token: "t".into(),
            client: "test".into(),
            subscription: Subscription::default(),
        };
        let wire = encode_tcp(&hello);
        let body = read_message(&mut &wire[..], MAX_CLIENT_MESSAGE as u64).unwrap();
        assert_eq!(decode_client(&body).unwrap(), hello);
        let mut longer = body.clone();
        longer.push(0);
        assert!(matches!(
            decode_client(&longer),
            Err(CodecError::Trailing(1))
        ));
    }

    #[test]
    fn oversize_and_truncated_lengths_are_refused_without_reading() {
        let wire = [0xff, 0xff, 0xff, 0x7f, 1, 2, 3];
        assert!(matches!(
            read_message(&mut &wire[..], 1024),
            Err(CodecError::Oversize { .. })
        ));
        let wire = [10, 0, 0, 0, 1, 2, 3];
        assert!(matches!(
            read_message(&mut &wire[..], 1024),
            Err(CodecError::Truncated { got: 3, want: 10 })
        ));
        assert!(matches!(
            read_message(&mut &[0u8, 0, 0, 0][..], 1024),
            Err(CodecError::Empty)
        ));
        assert!(matches!(
            read_message(&mut &[][..], 1024),
            Err(CodecError::Closed)
        ));
    }
}
