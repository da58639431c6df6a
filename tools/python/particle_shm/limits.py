"""Bounds of the intervals and durations a user can give, copied from
``shm-protocol/src/limits.rs`` (keep the two in step): the solver refuses commands outside them,
and this package refuses them before anything is written to the segment, with the same messages.

Why bounds at all (from the Rust module): a schedule advanced by ``next += interval`` never moves
when the interval is below the float spacing of the time it is added to, and a float turned into a
duration overflows past u64 seconds or on NaN.
"""

import math
import numbers
from decimal import Decimal

# limits.rs SIM_INTERVAL_MIN_S: shortest simulated-time interval any client may ask for [s].
SIM_INTERVAL_MIN_S = 1e-12
# limits.rs SIM_INTERVAL_MAX_S: longest simulated-time interval, about 32 years [s].
SIM_INTERVAL_MAX_S = 1e9
# limits.rs WALL_INTERVAL_MAX_MS: longest wall-clock publication interval (one day) [ms]; 0 = off.
WALL_INTERVAL_MAX_MS = 86_400_000
# limits.rs WALL_DURATION_MAX_S: longest wall-clock duration (timeouts) a user can give [s].
WALL_DURATION_MAX_S = 86_400.0


def rust_display(x):
    """``x`` as Rust's ``{}`` prints an f64: shortest round-trip digits, never an exponent
    (``1e300`` is a 1 and 300 zeros, ``-1.0`` is ``-1``), ``NaN``, ``inf``."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    s = format(Decimal(repr(float(x))), "f")
    if "." in s:
        s = s.rstrip("0").rstrip(".")
    return s


def rust_exp(x):
    """``x`` as Rust's ``{:e}`` prints an f64: shortest round-trip digits, ``1e-2``, ``2.5e10``."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == 0:
        return "-0e0" if math.copysign(1.0, x) < 0 else "0e0"
    sign, digits, exponent = Decimal(repr(float(x))).normalize().as_tuple()
    d = "".join(map(str, digits))
    mantissa = d[0] + ("." + d[1:] if len(d) > 1 else "")
    return f"{'-' if sign else ''}{mantissa}e{exponent + len(d) - 1}"


def check_sim_interval(what, seconds):
    """limits.rs ``check_sim_interval``: a finite simulated-time interval in
    [SIM_INTERVAL_MIN_S, SIM_INTERVAL_MAX_S]. Returns it as a float; raises ValueError(message)."""
    seconds = float(seconds)
    if not math.isfinite(seconds):
        raise ValueError(
            f"{what} must be a finite number of simulated seconds, got {rust_display(seconds)}"
        )
    if not SIM_INTERVAL_MIN_S <= seconds <= SIM_INTERVAL_MAX_S:
        raise ValueError(
            f"{what} must be between {rust_exp(SIM_INTERVAL_MIN_S)} and "
            f"{rust_exp(SIM_INTERVAL_MAX_S)} simulated seconds, got {rust_exp(seconds)}"
        )
    return seconds


def check_wall_interval_ms(what, ms):
    """limits.rs ``check_wall_interval_ms`` for an integer: 0 (off) to WALL_INTERVAL_MAX_MS."""
    if ms < 0:
        # A u64 cannot be negative in Rust; say it as parse_wall_interval_ms does.
        raise ValueError(f"{what} must be a whole number of milliseconds (0 turns it off), got {ms}")
    if ms > WALL_INTERVAL_MAX_MS:
        raise ValueError(
            f"{what} must be 0 (off) or at most {WALL_INTERVAL_MAX_MS} ms (one day), got {ms}"
        )
    return ms


def parse_wall_interval_ms(what, ms):
    """limits.rs ``parse_wall_interval_ms``: a number typed by a user must be a whole,
    non-negative number of milliseconds up to WALL_INTERVAL_MAX_MS. Returns an int."""
    ms = float(ms)
    if not math.isfinite(ms) or ms < 0.0 or ms != math.floor(ms):
        raise ValueError(
            f"{what} must be a whole number of milliseconds (0 turns it off), got {rust_display(ms)}"
        )
    if ms > WALL_INTERVAL_MAX_MS:
        raise ValueError(
            f"{what} must be 0 (off) or at most {WALL_INTERVAL_MAX_MS} ms (one day), "
            f"got {rust_display(ms)}"
        )
    return int(ms)


def wall_duration(what, seconds, min_s):
    """limits.rs ``wall_duration``: a finite wall-clock duration in [min_s, WALL_DURATION_MAX_S]."""
    if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real):
        raise ValueError(
            f"{what} must be between {rust_display(min_s)} and {rust_display(WALL_DURATION_MAX_S)} "
            f"seconds, got {seconds!r}"
        )
    s = float(seconds)
    if not math.isfinite(s) or s < min_s or s > WALL_DURATION_MAX_S:
        raise ValueError(
            f"{what} must be between {rust_display(min_s)} and {rust_display(WALL_DURATION_MAX_S)} "
            f"seconds, got {rust_display(s)}"
        )
    return s
