//! Numbers typed by a user (command-line flags) or sent by a client (a subscription's rate),
//! turned into [`Duration`]s without panicking: `Duration::from_secs_f64` panics on NaN, on
//! negative values and past `u64::MAX` seconds, so every such value goes through
//! [`shm_protocol::limits::wall_duration`] and is refused with a message naming it.

use std::time::Duration;

use shm_protocol::limits::{wall_duration, WALL_DURATION_MAX_S};

/// A command-line value in seconds for flag `what`, at least `min_s` and at most one day
/// ([`WALL_DURATION_MAX_S`]). Use it as a clap `value_parser`: a bad value is then a clap
/// error (one line, exit status 2).
pub fn seconds_arg(what: &str, text: &str, min_s: f64) -> Result<Duration, String> {
    let seconds: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{what} expects a number of seconds, got {text:?}"))?;
    wall_duration(what, seconds, min_s)
}

/// Lowest rate anything accepts [Hz]: one event a day, so the period fits
/// [`WALL_DURATION_MAX_S`].
pub const MIN_RATE_HZ: f64 = 1.0 / WALL_DURATION_MAX_S;

/// The period of a rate `hz` given as `what`: finite and at least [`MIN_RATE_HZ`]. Large rates
/// are fine (their period rounds to zero: no limit).
pub fn rate_period(what: &str, hz: f64) -> Result<Duration, String> {
    if !(hz.is_finite() && hz >= MIN_RATE_HZ) {
        return Err(format!(
            "{what} must be a rate of at least 1/{WALL_DURATION_MAX_S} Hz (one per day), got {hz}"
        ));
    }
    // hz >= 1/86400, so 1/hz is in (0, 86400]: within wall_duration's range.
    wall_duration(what, 1.0 / hz, 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_checked_before_the_conversion() {
        assert_eq!(
            seconds_arg("--t", "2.5", 1.0),
            Ok(Duration::from_millis(2500))
        );
        for bad in [
            "1e300", "NaN", "nan", "-1", "inf", "-inf", "0.5", "86401", "abc", "",
        ] {
            let e = seconds_arg("--t", bad, 1.0).unwrap_err();
            assert!(e.starts_with("--t "), "{bad}: {e}");
            assert!(!e.contains('\n'), "{bad}: {e}");
        }
    }

    #[test]
    fn rates_never_give_an_unrepresentable_period() {
        assert_eq!(rate_period("r", 4.0), Ok(Duration::from_millis(250)));
        assert_eq!(rate_period("r", 1e30), Ok(Duration::ZERO));
        assert!(rate_period("r", MIN_RATE_HZ).is_ok());
        // 1 / 1e-30 s overflows a Duration; 1 / 1e-45 is infinite in f32.
        for bad in [1e-30, 1e-45, 0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(
                rate_period("r", bad).unwrap_err().contains("one per day"),
                "{bad}"
            );
        }
    }
}
