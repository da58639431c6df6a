//! Who may connect: the listen-address policy and the hello check.

use std::net::SocketAddr;
use std::time::Duration;

use shm_protocol::layout::ALL_FIELDS_MASK;

use crate::protocol::{ClientMsg, Subscription, MAX_TOKEN_LEN, PROTOCOL_NAME, PROTOCOL_VERSION};
use crate::values::rate_period;

/// Refuses to serve a non-loopback address without a token: frames show a run's data and
/// commands can stop it, so nobody on the network may use them unauthenticated.
pub fn check_listen(addr: &SocketAddr, token: Option<&str>) -> Result<(), String> {
    match token {
        Some("") => Err("the token is empty".into()),
        Some(t) if t.len() > MAX_TOKEN_LEN => {
            Err(format!("the token is longer than {MAX_TOKEN_LEN} bytes"))
        }
        Some(_) => Ok(()),
        None if addr.ip().is_loopback() => Ok(()),
        None => Err(format!(
            "refusing to listen on {addr} without a token: anyone who can reach that address \
             could read the run and send it commands. Pass --token-file FILE (or --token T), \
             or listen on 127.0.0.1 and tunnel (ssh -L)"
        )),
    }
}

/// Compares without an early exit, so the time taken does not reveal the matching prefix.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for (i, x) in a.iter().enumerate() {
        diff |= (x ^ b.get(i).copied().unwrap_or(0)) as usize;
    }
    diff == 0
}

/// Validates a first message; returns the client's name and subscription, or why it is refused.
pub fn check_hello(msg: ClientMsg, token: Option<&str>) -> Result<(String, Subscription), String> {
    let ClientMsg::Hello {
        protocol,
        version,
        token: given,
        client,
        subscription,
    } = msg
    else {
        return Err("the first message must be a hello".into());
    };
    if protocol != PROTOCOL_NAME {
        return Err(format!(
            "not a {PROTOCOL_NAME} hello (protocol {protocol:?})"
        ));
    }
    if version != PROTOCOL_VERSION {
        return Err(format!(
            "protocol version {version}, this forwarder speaks {PROTOCOL_VERSION}: upgrade one side"
        ));
    }
    if let Some(t) = token {
        if !same_secret(given.as_bytes(), t.as_bytes()) {
            return Err(if given.is_empty() {
                "this forwarder requires a token".into()
            } else {
                "wrong token".into()
            });
        }
    }
    Ok((client.chars().take(64).collect(), sanitise(subscription)?))
}

/// Drops unknown field bits and checks the rate.
pub fn sanitise(mut s: Subscription) -> Result<Subscription, String> {
    s.fields &= ALL_FIELDS_MASK;
    frame_period(&s)?;
    Ok(s)
}

/// Shortest time between two frames to this client (`None`: no limit). `max_rate_hz` is 0 or
/// at least one frame a day: the period of a tiny positive rate (1e-30 Hz) is no `Duration`.
pub fn frame_period(s: &Subscription) -> Result<Option<Duration>, String> {
    if s.max_rate_hz == 0.0 {
        return Ok(None);
    }
    rate_period("max_rate_hz", s.max_rate_hz as f64)
        .map(Some)
        .map_err(|e| format!("{e} (0: no limit)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(token: &str, version: u32) -> ClientMsg {
        ClientMsg::Hello {
            protocol: PROTOCOL_NAME.into(),
            version,
            token: token.into(),
            client: "t".into(),
            subscription: Subscription::default(),
        }
    }

    #[test]
    fn non_loopback_needs_a_token() {
        let any: SocketAddr = "0.0.0.0:7788".parse().unwrap();
        let lo: SocketAddr = "127.0.0.1:7788".parse().unwrap();
        assert!(check_listen(&any, None)
            .unwrap_err()
            .contains("without a token"));
        assert!(check_listen(&any, Some("s3cret")).is_ok());
        assert!(check_listen(&lo, None).is_ok());
        assert!(check_listen(&lo, Some("")).is_err());
    }

    #[test]
    fn rates_are_zero_or_at_least_one_frame_a_day() {
        let sub = |max_rate_hz| Subscription {
            max_rate_hz,
            ..Subscription::default()
        };
        assert_eq!(frame_period(&sub(0.0)), Ok(None));
        assert_eq!(
            frame_period(&sub(4.0)),
            Ok(Some(Duration::from_millis(250)))
        );
        assert_eq!(frame_period(&sub(1e30)), Ok(Some(Duration::ZERO)));
        // 1e-30 Hz: a period of 1e30 s, past what a Duration holds; 1e-45: 1 / x is infinite.
        for bad in [1e-30, 1e-45, 1e-6, -1.0, f32::NAN, f32::INFINITY] {
            let e = sanitise(sub(bad)).unwrap_err();
            assert!(e.contains("max_rate_hz"), "{bad}: {e}");
        }
    }

    #[test]
    fn hello_checks_version_and_token() {
        assert!(check_hello(hello("", PROTOCOL_VERSION), None).is_ok());
        assert!(check_hello(hello("abc", PROTOCOL_VERSION), Some("abc")).is_ok());
        assert_eq!(
            check_hello(hello("abd", PROTOCOL_VERSION), Some("abc")).unwrap_err(),
            "wrong token"
        );
        assert!(check_hello(hello("", PROTOCOL_VERSION), Some("abc"))
            .unwrap_err()
            .contains("requires"));
        // A version-1 client (before species records named their method) is refused by name.
        assert!(check_hello(hello("", 1), None)
            .unwrap_err()
            .contains("version 1"));
        assert!(check_hello(hello("", 9), None)
            .unwrap_err()
            .contains("version 9"));
    }
}
