//! The readers' side: any number of processes attach to a segment by name.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::command::{self, Command, CommandOutcome, Ticket};
use crate::error::{AttachError, CommandError, ReadError};
use crate::frame::{self, Frame, FrameView};
use crate::layout::{Capacities, SolverState};
use crate::notify::{self, WaitResult};
use crate::segment::{Region, Segment};
use crate::static_data::{self, StaticData};
use crate::sys;

/// A consumer's view of the solver, from the header alone.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SolverStatus {
    pub state: Option<SolverState>,
    pub owner_pid: u32,
    /// The owner process exists (pid and start time match, not a zombie).
    pub alive: bool,
    /// Seconds since the owner's last heartbeat.
    pub heartbeat_age_s: f64,
    pub newest_seq: u64,
    pub created_unix_ns: u64,
}

impl SolverStatus {
    /// A finished or failed run, or an owner that is gone.
    pub fn is_over(&self) -> bool {
        !self.alive
            || matches!(
                self.state,
                Some(SolverState::Finished | SolverState::Failed)
            )
    }
    pub fn state_name(&self) -> &'static str {
        self.state.map_or("unknown", SolverState::as_str)
    }
}

/// What [`Consumer::wait_newer`] saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitOutcome {
    /// A frame with this sequence number (newer than asked) is available.
    Newer(u64),
    TimedOut,
    /// The solver died or finished and no newer frame exists.
    SolverGone,
}

/// How often waits re-check the solver's liveness: "solver gone" is seen within this.
pub const LIVENESS_POLL: Duration = Duration::from_millis(200);

/// An attached reader (and command sender).
pub struct Consumer {
    seg: Segment,
    client_id: u32,
    next_request: u64,
}

impl Consumer {
    /// Attaches to segment `name`, validating everything before use.
    pub fn attach(name: &str) -> Result<Self, AttachError> {
        Ok(Self {
            seg: Segment::open(name)?,
            client_id: std::process::id(),
            next_request: 1,
        })
    }

    pub fn name(&self) -> &str {
        self.seg.name()
    }
    pub fn region(&self) -> &Region {
        self.seg.region()
    }
    pub fn capacities(&self) -> &Capacities {
        self.seg.region().capacities()
    }

    pub fn status(&self) -> SolverStatus {
        let h = self.seg.region().header();
        let pid = h.owner_pid.load(Ordering::Acquire);
        let ticks = h.owner_start_ticks.load(Ordering::Acquire);
        let beat = h.heartbeat_mono_ns.load(Ordering::Relaxed);
        SolverStatus {
            state: SolverState::from_u32(h.solver_state.load(Ordering::Acquire)),
            owner_pid: pid,
            alive: sys::process_alive(pid, ticks),
            heartbeat_age_s: sys::monotonic_ns().saturating_sub(beat) as f64 * 1e-9,
            newest_seq: h.newest_seq.load(Ordering::Acquire),
            created_unix_ns: h.created_unix_ns,
        }
    }

    /// Sequence number of the newest complete frame (0: none yet).
    pub fn newest_seq(&self) -> u64 {
        self.seg
            .region()
            .header()
            .newest_seq
            .load(Ordering::Acquire)
    }

    /// `Ok` while the segment has its full size (see [`Segment::check_intact`]): every read
    /// checks it before and after touching the memory, so data from a segment another process
    /// truncated is never returned.
    pub fn check_intact(&self) -> Result<(), ReadError> {
        self.seg.check_intact()
    }

    /// Runs a read between two truncation checks.
    fn guarded<T>(
        &self,
        read: impl FnOnce(&Region) -> Result<T, ReadError>,
    ) -> Result<T, ReadError> {
        self.seg.check_intact()?;
        let r = read(self.seg.region());
        self.seg.check_intact()?;
        r
    }

    pub fn read_static(&self) -> Result<StaticData, ReadError> {
        self.guarded(static_data::read_static)
    }

    /// Copies the newest complete frame (`None` before the first publication).
    pub fn read_newest(&self) -> Result<Option<Frame>, ReadError> {
        self.guarded(frame::read_newest)
    }

    /// [`Consumer::read_newest`] into a reused frame (see [`frame::read_newest_into`]).
    pub fn read_newest_into(&self, out: &mut Frame) -> Result<bool, ReadError> {
        self.guarded(|r| frame::read_newest_into(r, out))
    }

    /// [`Consumer::read_newest_into`] of only the fields in `fields` (a [`crate::FieldKind::bit`] mask;
    /// see [`frame::read_newest_fields_into`]).
    pub fn read_newest_fields_into(&self, out: &mut Frame, fields: u32) -> Result<bool, ReadError> {
        self.guarded(|r| frame::read_newest_fields_into(r, out, fields))
    }

    /// Runs `f` on a zero-copy view of the newest frame; the result is returned only if the frame
    /// was not overwritten while `f` ran (otherwise `f` runs again on the then-newest frame).
    pub fn with_newest<T>(
        &self,
        f: impl FnMut(&FrameView<'_>) -> T,
    ) -> Result<Option<T>, ReadError> {
        self.guarded(|r| frame::with_newest(r, f))
    }

    /// Waits until a frame newer than `seq` is complete, the solver is gone (or the segment
    /// truncated: the next read says so), or `timeout`.
    pub fn wait_newer(&self, seq: u64, timeout: Duration) -> WaitOutcome {
        let h = self.seg.region().header();
        let deadline = Instant::now() + timeout;
        let newest = || h.newest_seq.load(Ordering::SeqCst);
        match notify::wait_until(
            &h.frame_futex,
            &h.frame_waiters,
            deadline,
            LIVENESS_POLL,
            || newest() > seq,
            || self.seg.check_intact().is_err() || self.status().is_over(),
        ) {
            WaitResult::Ready => WaitOutcome::Newer(newest()),
            WaitResult::TimedOut => WaitOutcome::TimedOut,
            WaitResult::GaveUp => WaitOutcome::SolverGone,
        }
    }

    /// Queues `cmd` for the solver without waiting; the solver drops it unapplied if it gets
    /// to it only after `answer_within` (the sender will have stopped waiting by then).
    pub fn submit(
        &mut self,
        cmd: &Command,
        answer_within: Duration,
    ) -> Result<Ticket, CommandError> {
        let id = self.next_request;
        self.next_request += 1;
        command::submit(self.seg.region(), self.client_id, id, cmd, answer_within)
    }

    /// Waits for the solver's answer to `ticket`.
    pub fn wait_ack(
        &self,
        ticket: &Ticket,
        timeout: Duration,
    ) -> Result<CommandOutcome, CommandError> {
        command::wait_ack(self.seg.region(), ticket, timeout, || !self.status().alive)
    }

    /// Sends `cmd` and waits for its acknowledgement.
    pub fn send(
        &mut self,
        cmd: &Command,
        timeout: Duration,
    ) -> Result<CommandOutcome, CommandError> {
        let status = self.status();
        if !status.alive {
            return Err(CommandError::SolverGone(status.owner_pid));
        }
        // A full table frees up as the solver answers and as records of vanished senders
        // pass their deadline: keep trying within our own time.
        let deadline = Instant::now() + timeout;
        let t = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.submit(cmd, left) {
                Err(CommandError::TableFull { .. }) if left > Duration::from_millis(20) => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                other => break other?,
            }
        };
        self.wait_ack(&t, deadline.saturating_duration_since(Instant::now()))
    }
}
