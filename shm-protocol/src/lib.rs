//! `shm-protocol`: the shared-memory segment every particle-shm process shares.
//!
//! One writer (the solver, [`Publisher`]) and any number of readers ([`Consumer`]) map one named
//! POSIX shared-memory object. Frames are published into rotating slots under a per-slot seqlock
//! (the writer never waits for a reader); readers wait for new frames on a futex word; commands
//! go back through a table guarded by a robust process-shared mutex. `LAYOUT.md` documents every
//! byte for readers in other languages.

pub mod command;
pub mod consumer;
pub mod error;
pub mod frame;
mod guard;
pub mod layout;
pub mod limits;
mod notify;
pub mod publisher;
pub mod segment;
pub mod source;
pub mod static_data;
pub mod sys;

pub use command::{Command, CommandOutcome, ReceivedCommand, Ticket};
pub use consumer::{Consumer, SolverStatus, WaitOutcome};
pub use error::{AttachError, CommandError, CreateError, PublishError, ReadError};
pub use frame::{Frame, FrameMeta, FrameSample, FrameView, FrameWriter};
pub use layout::{
    BodyTransform, Capacities, FieldKind, SolverState, SpeciesRecord, ABI_VERSION, DEFAULT_FIELDS,
    LAYOUT_HASH,
};
pub use publisher::{CreateOptions, Publisher};
pub use segment::{shm_path, validate_name, Occupant, Region};
pub use source::{FrameSource, SourceError};
pub use static_data::{MeshStatic, StaticData};

/// Reads the static section of a validated region (tests and tools working on raw images).
#[doc(hidden)]
pub fn static_data_for_test(region: &Region) -> Result<StaticData, ReadError> {
    static_data::read_static(region)
}

/// Whether the writer would still wake `frame_futex` for a sleeping waiter (tests of the
/// waiter leases: a waiter killed asleep must stop costing wake-ups).
#[doc(hidden)]
pub fn frame_waiters_present_for_test(region: &Region) -> bool {
    notify::lease_active(
        region
            .header()
            .frame_waiters
            .load(std::sync::atomic::Ordering::SeqCst),
    )
}

/// An error and its causes on one line, for a binary's final message. Causes whose text the
/// message already contains (error enums that print their source) are not repeated.
pub fn error_report(e: &anyhow::Error) -> String {
    let mut out = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !out.contains(&c) {
            out.push_str(": ");
            out.push_str(&c);
        }
    }
    out
}

#[cfg(test)]
mod report_tests {
    #[test]
    fn causes_already_in_the_message_are_not_repeated() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let e = anyhow::Error::new(io).context("case.toml: cannot read: no such file");
        assert_eq!(
            super::error_report(&e),
            "case.toml: cannot read: no such file"
        );
        let e = anyhow::anyhow!("inner").context("outer");
        assert_eq!(super::error_report(&e), "outer: inner");
    }
}
