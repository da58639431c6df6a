//! One error enum per operation, each message carrying what a user needs to act.

use std::io;

use crate::layout::CapacityError;

/// Creating a segment ([`crate::Publisher::create`]).
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error("invalid segment name {name:?}: {reason}")]
    InvalidName { name: String, reason: String },
    #[error("cannot lay out the segment: {0}")]
    Capacity(#[from] CapacityError),
    #[error(
        "not enough space in /dev/shm for segment {name:?}: it needs {}, {} are free \
         (free space with `shmctl clean`, use fewer particles, or enlarge /dev/shm)",
        crate::error::bytes(*needed), crate::error::bytes(*available)
    )]
    NoSpace {
        name: String,
        needed: u64,
        available: u64,
    },
    #[error(
        "cannot create segment {name:?}: /dev/shm has no free inodes (too many files; remove \
         stale segments with `shmctl clean`)"
    )]
    NoInodes { name: String },
    #[error("cannot create segment {name:?}: /dev/shm is mounted read-only")]
    ReadOnly { name: String },
    #[error("segment {name:?} already exists")]
    Exists { name: String },
    #[error(
        "segment {name:?} is in use by a running solver (pid {pid}); pick another name or stop \
         that solver (`shmctl send {name} stop`)"
    )]
    InUse { name: String, pid: u32 },
    #[error(
        "/dev/shm/{name} exists and is not a particle-shm segment ({reason}); refusing to replace it"
    )]
    NotOurs { name: String, reason: AttachError },
    #[error(
        "segment {name:?} exists and belongs to another user{}; pick another name",
        uid.map_or(String::new(), |u| format!(" (uid {u})"))
    )]
    OtherUser { name: String, uid: Option<u32> },
    #[error("segment {name:?} is still owned by a live process (pid {pid}); cannot take it over")]
    OwnerAlive { name: String, pid: u32 },
    #[error("segment {name:?} was already taken over by pid {pid}")]
    TakenOver { name: String, pid: u32 },
    #[error("cannot take over segment {name:?}: {source}")]
    Attach {
        name: String,
        #[source]
        source: AttachError,
    },
    #[error("segment {name:?}: {op} failed: {source}")]
    Os {
        name: String,
        op: &'static str,
        #[source]
        source: io::Error,
    },
}

/// Attaching to a segment ([`crate::Consumer::attach`]) or validating its header.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error("invalid segment name {name:?}: {reason}")]
    InvalidName { name: String, reason: String },
    #[error("no segment named {name:?} (is the solver running? `shmctl list` shows segments)")]
    NotFound { name: String },
    #[error(
        "permission denied opening segment {name:?}{}: segments are owner-only unless their \
         solver was started with --group-access",
        owner_uid.map_or(String::new(), |u| format!(" (it belongs to uid {u})"))
    )]
    PermissionDenied {
        name: String,
        owner_uid: Option<u32>,
    },
    #[error("/dev/shm/{name} is {kind}, not a shared-memory segment")]
    NotAnObject { name: String, kind: &'static str },
    #[error("not a particle-shm segment (magic {magic:02x?})")]
    NotOurs { magic: [u8; 8] },
    #[error("segment is truncated ({len} bytes): not a complete particle-shm segment")]
    Truncated { len: usize },
    #[error("segment is still being initialised by its creator; try again")]
    NotInitialised,
    #[error(
        "segment ABI version {found}, this program reads version {expected}: the segment was made by {} \
         particle-shm build; attach with tools of the same build as the solver that made it, or \
         restart the run with this build's solver",
        if found < expected { "an older" } else { "a newer" }
    )]
    VersionMismatch { found: u32, expected: u32 },
    #[error("segment layout hash {found:#x} differs from this program's {expected:#x}: rebuild one side")]
    LayoutMismatch { found: u64, expected: u64 },
    #[error("segment header says {header} bytes but the object has {actual}")]
    SizeMismatch { header: u64, actual: u64 },
    #[error("segment header has impossible capacities: {0}")]
    BadCapacities(CapacityError),
    #[error("corrupt segment: {0}")]
    Corrupt(String),
    #[error("segment {name:?}: {source}")]
    Os {
        name: String,
        #[source]
        source: io::Error,
    },
}

/// Reading static data or a frame.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ReadError {
    #[error("corrupt segment: {0}")]
    Corrupt(String),
    #[error("the writer overwrote the data {0} times while it was read; try again")]
    Contended(u32),
    #[error("no static data published yet")]
    NoStatic,
    #[error(
        "the segment was truncated by another process to {size} bytes (it had {expected}); its \
         data is gone"
    )]
    Truncated { size: u64, expected: u64 },
    #[error(
        "frame {seq} belongs to static data generation {frame}, but the segment's static \
         section is generation {current}"
    )]
    StaticMismatch { seq: u64, frame: u64, current: u64 },
}

/// Writing static data or a frame.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PublishError {
    #[error("{what}: {got} exceeds the segment's capacity of {capacity}")]
    OverCapacity {
        what: &'static str,
        got: u64,
        capacity: u64,
    },
    #[error("field {0} was not reserved when the segment was created")]
    FieldNotReserved(&'static str),
    #[error("a frame is already being written; commit or drop it first")]
    FrameInProgress,
}

/// Sending a command and waiting for its acknowledgement.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error(
        "the command table is full: of {records} records, {waiting} wait for the solver and \
         {answered} hold answers their senders have not read yet{}; try again shortly",
        if *waiting > 0 && *solver_idle_s > 2.0 {
            format!(" (the solver has not stepped for {solver_idle_s:.0} s: paused, stopped or stuck)")
        } else {
            String::new()
        }
    )]
    TableFull {
        records: u32,
        waiting: u32,
        answered: u32,
        solver_idle_s: f64,
    },
    #[error("timed out after {0:?} waiting for the command mutex")]
    LockTimeout(std::time::Duration),
    #[error(
        "no acknowledgement within {timeout:?} (the solver may be busy in a long step or \
         stopped); {applied}"
    )]
    AckTimeout {
        timeout: std::time::Duration,
        applied: crate::command::Applied,
    },
    #[error("invalid command: {0}")]
    Invalid(String),
    #[error("the solver (pid {0}) is gone; nobody will answer")]
    SolverGone(u32),
    #[error("cannot encode the command: {0}")]
    Encode(String),
    #[error("corrupt acknowledgement: {0}")]
    Decode(String),
    #[error("command mutex: {0}")]
    Os(#[from] io::Error),
}

/// `n` bytes in the largest unit that keeps a digit before the point (no "0 MiB").
pub(crate) fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} bytes")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_are_never_shown_as_zero_of_a_large_unit() {
        assert_eq!(super::bytes(0), "0 bytes");
        assert_eq!(super::bytes(4096), "4.0 KiB");
        assert_eq!(super::bytes(300 << 20), "300.0 MiB");
        assert_eq!(super::bytes(123_456), "120.6 KiB");
    }
}
