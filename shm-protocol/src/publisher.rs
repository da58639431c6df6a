//! The writer's side: one solver process owns a segment and publishes into it.

use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::command::{self, CommandOutcome, ReceivedCommand};
use crate::error::{CreateError, PublishError, ReadError};
use crate::frame::{self, Frame, FrameWriter};
use crate::layout::{Capacities, RecordState, SolverState};
use crate::segment::{occupant, Occupant, Segment};
use crate::static_data::{self, StaticData};
use crate::{notify, sys};

/// How to create a segment.
#[derive(Clone, Copy, Debug, Default)]
pub struct CreateOptions {
    /// Mode 0660 instead of the default owner-only 0600.
    pub group_access: bool,
}

/// Owner of a segment. Publishing never waits for a consumer.
///
/// Dropping a publisher leaves the segment in place (a crashed solver's last frame stays
/// readable); [`Publisher::close`] removes it after a clean run.
pub struct Publisher {
    seg: Segment,
    next_seq: Cell<u64>,
    writing: Cell<bool>,
    static_generation: u64,
}

impl Publisher {
    /// Creates segment `name` sized for `caps` (see [`Segment`] for stale-name handling).
    pub fn create(name: &str, caps: Capacities, opts: CreateOptions) -> Result<Self, CreateError> {
        let seg = Segment::create(name, caps, opts.group_access)?;
        Ok(Self {
            seg,
            next_seq: Cell::new(1),
            writing: Cell::new(false),
            static_generation: 0,
        })
    }

    /// Takes over an existing segment whose owner is dead (resuming with `--load-shm`).
    ///
    /// Atomic: the owner is re-checked and replaced while holding the segment's robust command
    /// mutex, so of several processes taking over at once exactly one wins and the others get
    /// [`CreateError::TakenOver`] naming the winner.
    pub fn take_over(name: &str) -> Result<Self, CreateError> {
        let attach = |source| CreateError::Attach {
            name: name.into(),
            source,
        };
        match occupant(name).map_err(attach)? {
            Occupant::Alive { pid } if pid != std::process::id() => {
                return Err(CreateError::OwnerAlive {
                    name: name.into(),
                    pid,
                })
            }
            Occupant::Foreign(reason) => {
                return Err(CreateError::NotOurs {
                    name: name.into(),
                    reason,
                })
            }
            _ => {}
        }
        let seg = Segment::open(name).map_err(attach)?;
        let region = *seg.region();
        let h = region.header();
        let mutex = region.mutex();
        let os = |source| CreateError::Os {
            name: name.into(),
            op: "taking the command mutex",
            source,
        };
        if mutex
            .lock_timeout(command::LOCK_TIMEOUT)
            .map_err(os)?
            .is_none()
        {
            return Err(CreateError::Os {
                name: name.into(),
                op: "taking the command mutex",
                source: std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("another process held it for {:?}", command::LOCK_TIMEOUT),
                ),
            });
        }
        let (me, ticks) = sys::own_identity();
        let owner = h.owner_pid.load(Ordering::Acquire);
        let owner_ticks = h.owner_start_ticks.load(Ordering::Acquire);
        if owner != me && sys::process_alive(owner, owner_ticks) {
            mutex.unlock();
            return Err(CreateError::TakenOver {
                name: name.into(),
                pid: owner,
            });
        }
        h.owner_start_ticks.store(ticks, Ordering::Release);
        h.owner_pid.store(me, Ordering::Release);
        mutex.unlock();
        // Commands the dead owner had claimed will never be answered by it: hand them back.
        for i in 0..region.capacities().command_records {
            let _ = region.command(i).state.compare_exchange(
                RecordState::Taken as u32,
                RecordState::Pending as u32,
                Ordering::AcqRel,
                Ordering::Relaxed,
            );
        }
        let next_seq = h.newest_seq.load(Ordering::Acquire) + 1;
        let static_generation = static_data::read_static(&region)
            .map(|s| s.generation)
            .unwrap_or(0);
        let p = Self {
            seg,
            next_seq: Cell::new(next_seq),
            writing: Cell::new(false),
            static_generation,
        };
        p.set_state(SolverState::Starting);
        p.heartbeat();
        Ok(p)
    }

    pub fn name(&self) -> &str {
        self.seg.name()
    }
    pub fn capacities(&self) -> &Capacities {
        self.seg.region().capacities()
    }
    pub fn region(&self) -> &crate::segment::Region {
        self.seg.region()
    }

    /// (Re)writes the static section; frames published afterwards carry the new generation.
    pub fn write_static(&mut self, data: &StaticData) -> Result<u64, PublishError> {
        self.static_generation = static_data::write_static(self.seg.region(), data)?;
        Ok(self.static_generation)
    }

    /// Starts filling the oldest slot with a frame of `particle_count` particles. The writer
    /// may stay open across steps (a GPU copy in flight) while commands are polled and
    /// answered; only one frame can be open at a time ([`PublishError::FrameInProgress`]).
    pub fn begin_frame(&self, particle_count: u64) -> Result<FrameWriter<'_>, PublishError> {
        let gen = self.static_generation;
        let mut w = FrameWriter::begin(
            self.seg.region(),
            &self.next_seq,
            &self.writing,
            particle_count,
        )?;
        w.static_generation = gen;
        Ok(w)
    }

    /// The newest complete frame (what `--load-shm` resumes from).
    pub fn read_newest(&self) -> Result<Option<Frame>, ReadError> {
        frame::read_newest(self.seg.region())
    }

    pub fn read_static(&self) -> Result<StaticData, ReadError> {
        static_data::read_static(self.seg.region())
    }

    /// `Ok` while the segment has its full size; [`ReadError::Truncated`] once another process
    /// shrank it (see `guard.rs`: this process survives, but the segment's data is gone).
    /// Cheap (one `fstat`): the solver checks it after every batch of steps.
    pub fn check_intact(&self) -> Result<(), ReadError> {
        self.seg.check_intact()
    }

    /// Sets the solver state; a change wakes frame waiters, so a viewer sees "finished" at once.
    pub fn set_state(&self, state: SolverState) {
        let h = self.seg.region().header();
        if h.solver_state.swap(state as u32, Ordering::AcqRel) != state as u32 {
            notify::wake_frame(h);
        }
    }

    /// Records that the solver is alive and stepping. Cheap: two clock reads and two stores.
    pub fn heartbeat(&self) {
        let h = self.seg.region().header();
        h.heartbeat_mono_ns
            .store(sys::monotonic_ns(), Ordering::Relaxed);
        h.heartbeat_unix_ns.store(sys::unix_ns(), Ordering::Relaxed);
    }

    /// Claims the commands submitted since the last call, in submission order. Never blocks.
    pub fn poll_commands(&self) -> Vec<ReceivedCommand> {
        command::take_pending(self.seg.region())
    }

    /// Sleeps until a command may have arrived or `timeout` passes (a paused solver's idle loop).
    pub fn wait_for_command(&self, timeout: Duration) {
        let h = self.seg.region().header();
        let seen = h.command_futex.load(Ordering::SeqCst);
        let pending = (0..self.capacities().command_records).any(|i| {
            self.seg.region().command(i).state.load(Ordering::Acquire)
                == RecordState::Pending as u32
        });
        if !pending {
            sys::futex_wait(&h.command_futex, seen, timeout);
        }
    }

    pub fn acknowledge(&self, cmd: &ReceivedCommand, outcome: &CommandOutcome) {
        command::acknowledge(self.seg.region(), cmd, outcome);
    }

    /// Marks the run finished (or failed) and removes the segment unless `keep`.
    pub fn close(self, final_state: SolverState, keep: bool) -> std::io::Result<()> {
        self.set_state(final_state);
        if keep {
            Ok(())
        } else {
            self.seg.unlink()
        }
    }
}
