//! Bounds of every interval and duration a user can set, checked once here for every entry point
//! (solver CLI and case file, commands from `shmctl`, the forwarder and Python, consumers' own
//! options).
//!
//! Why bounds at all: a schedule advanced by `next += interval` never moves when the interval is
//! below the float spacing of the time it is added to (1e-300 s against t = 0.3 s), and a float
//! turned into a [`Duration`] panics past `u64::MAX` seconds or on NaN. Bounds make both
//! impossible and give the user a message naming the option, the value and the range.
//!
//! The solver adds one bound only it knows: a simulated-time interval below one time step is
//! refused there (see `solver/src/app/control.rs`), since nothing can happen more often than once
//! a step.

use std::time::Duration;

/// Shortest publication or output interval in simulated seconds that any client may ask for.
/// The solver also refuses anything below its time step.
pub const SIM_INTERVAL_MIN_S: f64 = 1e-12;
/// Longest simulated-time interval (publication, VTK output, checkpoints): 1e9 s, about 32
/// years of simulated time, beyond any run.
pub const SIM_INTERVAL_MAX_S: f64 = 1e9;
/// Longest wall-clock publication interval in milliseconds (one day); 0 turns it off.
pub const WALL_INTERVAL_MAX_MS: u64 = 86_400_000;
/// Longest wall-clock duration a user can give any tool (timeouts, progress period): one day.
pub const WALL_DURATION_MAX_S: f64 = 86_400.0;

/// A simulated-time interval given by the user as `what` (e.g. `--refresh`): finite, in
/// [[`SIM_INTERVAL_MIN_S`], [`SIM_INTERVAL_MAX_S`]].
pub fn check_sim_interval(what: &str, seconds: f64) -> Result<f64, String> {
    if !seconds.is_finite() {
        return Err(format!(
            "{what} must be a finite number of simulated seconds, got {seconds:?}"
        ));
    }
    if !(SIM_INTERVAL_MIN_S..=SIM_INTERVAL_MAX_S).contains(&seconds) {
        return Err(format!(
            "{what} must be between {SIM_INTERVAL_MIN_S:e} and {SIM_INTERVAL_MAX_S:e} simulated \
             seconds, got {seconds:e}"
        ));
    }
    Ok(seconds)
}

/// A wall-clock publication interval in milliseconds: 0 (off) or 1..=[`WALL_INTERVAL_MAX_MS`].
pub fn check_wall_interval_ms(what: &str, ms: u64) -> Result<u64, String> {
    if ms > WALL_INTERVAL_MAX_MS {
        return Err(format!(
            "{what} must be 0 (off) or at most {WALL_INTERVAL_MAX_MS} ms (one day), got {ms}"
        ));
    }
    Ok(ms)
}

/// The same, from a number typed by a user (`shmctl send NAME refresh-wall 250`): a whole,
/// non-negative number of milliseconds.
pub fn parse_wall_interval_ms(what: &str, ms: f64) -> Result<u64, String> {
    if !ms.is_finite() || ms < 0.0 || ms.fract() != 0.0 {
        return Err(format!(
            "{what} must be a whole number of milliseconds (0 turns it off), got {ms:?}"
        ));
    }
    if ms > WALL_INTERVAL_MAX_MS as f64 {
        return Err(format!(
            "{what} must be 0 (off) or at most {WALL_INTERVAL_MAX_MS} ms (one day), got {ms:?}"
        ));
    }
    Ok(ms as u64)
}

/// A wall-clock duration in seconds given by the user as `what`, turned into a [`Duration`]
/// without panicking: finite, in [`min_s`, [`WALL_DURATION_MAX_S`]].
pub fn wall_duration(what: &str, seconds: f64, min_s: f64) -> Result<Duration, String> {
    if !seconds.is_finite() || seconds < min_s || seconds > WALL_DURATION_MAX_S {
        return Err(format!(
            "{what} must be between {min_s} and {WALL_DURATION_MAX_S} seconds, got {seconds:?}"
        ));
    }
    // In range, so the conversion cannot fail; the error arm only satisfies the type.
    Duration::try_from_secs_f64(seconds).map_err(|e| format!("{what}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sim_intervals_are_bounded_on_both_sides() {
        assert_eq!(check_sim_interval("--refresh", 0.01), Ok(0.01));
        for bad in [0.0, -1.0, 1e-300, 1e300, f64::NAN, f64::INFINITY, -0.0] {
            let e = check_sim_interval("--refresh", bad).unwrap_err();
            assert!(e.starts_with("--refresh must be"), "{e}");
        }
    }

    #[test]
    fn wall_intervals_are_whole_milliseconds_up_to_a_day() {
        assert_eq!(parse_wall_interval_ms("refresh-wall", 0.0), Ok(0));
        assert_eq!(parse_wall_interval_ms("refresh-wall", 250.0), Ok(250));
        for bad in [0.5, -1.0, 1e300, f64::NAN, 86_400_001.0] {
            assert!(
                parse_wall_interval_ms("refresh-wall", bad).is_err(),
                "{bad}"
            );
        }
        assert!(check_wall_interval_ms("x", u64::MAX).is_err());
    }

    #[test]
    fn durations_never_panic() {
        assert_eq!(
            wall_duration("--timeout", 1.5, 0.0),
            Ok(Duration::from_millis(1500))
        );
        for bad in [1e300, f64::NAN, f64::INFINITY, -1.0, 86_401.0] {
            assert!(wall_duration("--timeout", bad, 0.0).is_err(), "{bad}");
        }
        assert!(wall_duration("--timeout", 0.01, 0.1).is_err());
    }
}
