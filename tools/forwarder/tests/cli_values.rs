//! Regression (hardening issue): `forwarder --stall-timeout-s 1e300` panicked (exit 101) in
//! `Duration::from_secs_f64`; `--max-clients 18446744073709551615` panicked creating the
//! semaphore; `--token-file /dev/zero` read forever. `forwarder-bench --seconds` and
//! `--publish-hz` had the same conversion. Every such value now gets a one-line error and exit
//! status 2 (clap) or 1, never a panic (101) or an abort (134).

mod common;

use std::path::Path;
use std::time::Duration;

use common::{forwarder_exe, run_bounded};

/// Runs `exe args`, which must be refused: exit status 1 or 2, within seconds, an error line
/// containing `message`, no panic.
fn refused(exe: &Path, args: &[&str], message: &str) {
    let (status, stderr) = run_bounded(exe, args, Duration::from_secs(20));
    let status = status.unwrap_or_else(|| panic!("{args:?}: still running after 20 s"));
    assert!(
        matches!(status.code(), Some(1 | 2)),
        "{args:?}: exit status {status}, stderr:\n{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{args:?} panicked:\n{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.contains(message))
        .unwrap_or_else(|| panic!("{args:?}: no line with {message:?} in:\n{stderr}"));
    assert!(
        line.starts_with("error:") || line.starts_with("forwarder:"),
        "{line}"
    );
}

#[test]
fn out_of_range_seconds_are_refused_with_a_message() {
    let base = ["--attach", "pshm-fw-nobody"];
    for bad in ["1e300", "NaN", "-1", "inf", "0.5", "86401"] {
        let flag = format!("--stall-timeout-s={bad}");
        let args = [&base[..], &[flag.as_str()]].concat();
        refused(
            forwarder_exe(),
            &args,
            &format!(
                "invalid value '{bad}' for '--stall-timeout-s <SECONDS>': \
                 --stall-timeout-s must be between 1 and 86400 seconds, got "
            ),
        );
    }
    // A negative number as a separate word is a clap error of its own; still no panic.
    let (status, stderr) = run_bounded(
        forwarder_exe(),
        &["--attach", "x", "--stall-timeout-s", "-1"],
        Duration::from_secs(20),
    );
    assert_eq!(status.and_then(|s| s.code()), Some(2), "{stderr}");
    refused(
        forwarder_exe(),
        &["--attach", "x", "--stall-timeout-s", "soon"],
        "expects a number of seconds",
    );
}

#[test]
fn client_counts_beyond_what_the_server_can_hold_are_refused() {
    for bad in ["18446744073709551615", "0", "65537"] {
        refused(
            forwarder_exe(),
            &["--attach", "pshm-fw-nobody", "--max-clients", bad],
            "--max-clients",
        );
    }
}

#[test]
fn an_endless_token_file_is_refused_not_read_forever() {
    refused(
        forwarder_exe(),
        &["--attach", "pshm-fw-nobody", "--token-file", "/dev/zero"],
        "is larger than 65536 bytes",
    );
}

#[test]
fn bench_durations_and_rates_are_checked() {
    let bench = Path::new(env!("CARGO_BIN_EXE_forwarder-bench"));
    // Refused while parsing the arguments, before any fake solver or forwarder starts.
    for bad in ["1e300", "NaN", "-1", "inf", "0"] {
        refused(
            bench,
            &[&format!("--seconds={bad}")],
            "--seconds must be between 0.1 and 86400 seconds",
        );
    }
    // 1e-300 Hz: a period of 1e300 s. (A huge rate is fine: its period is 0, no pause.)
    for bad in ["1e-300", "NaN", "-1", "inf", "0"] {
        refused(
            bench,
            &[&format!("--publish-hz={bad}")],
            "--publish-hz must be a rate of at least 1/86400 Hz (one per day)",
        );
    }
    refused(bench, &["--particles=0"], "--particles");
}
