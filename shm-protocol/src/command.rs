//! Commands from consumers to the solver, and their acknowledgements.
//!
//! The command table is an array of fixed 256-byte records. A client takes the robust mutex
//! (bounded wait), picks a free record, writes its bincode request and marks it `Pending` with
//! the next submission number, releases the mutex and wakes the solver. The solver never takes
//! the mutex: between steps it claims `Pending` records with a compare-and-swap (`Taken`),
//! applies them in submission order, writes the bincode outcome and marks them `Acked`. The
//! client waits for `Acked` on the ack futex, reads the outcome and frees the record. A client
//! that dies holding the mutex leaves it `EOWNERDEAD` for the next client to recover; a client
//! that dies before reading its outcome leaves an `Acked` record that is reclaimed after
//! [`ABANDONED_AFTER`].

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::CommandError;
use crate::layout::{CommandRecord, RecordState, COMMAND_PAYLOAD};
use crate::limits;
use crate::notify::{self, WaitResult};
use crate::segment::Region;
use crate::sys;

/// What a consumer can ask of the solver.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Command {
    /// Publication interval in simulated seconds and/or wall-clock milliseconds (`None` leaves
    /// that interval unchanged; `Some(0)` for wall-clock turns it off).
    SetRefresh {
        sim_seconds: Option<f64>,
        wall_ms: Option<u64>,
    },
    /// Publish a frame after the current step.
    UpdateNow,
    Pause,
    Resume,
    /// Final output and checkpoint, then exit cleanly.
    Stop,
    /// Write a checkpoint file now.
    Checkpoint,
}

impl Command {
    /// Parses the command-line form: `pause`, `resume`, `stop`, `update`, `checkpoint`,
    /// `refresh SECONDS`, `refresh-wall MILLISECONDS`.
    pub fn parse(words: &[&str]) -> Result<Self, String> {
        let num = |w: Option<&&str>, what: &str| -> Result<f64, String> {
            let w = w.ok_or_else(|| format!("`{what}` needs a value"))?;
            w.parse::<f64>()
                .map_err(|_| format!("`{what}` expects a number, got {w:?}"))
        };
        let cmd = match words.first().copied() {
            Some("pause") => Self::Pause,
            Some("resume") => Self::Resume,
            Some("stop") => Self::Stop,
            Some("update" | "update-now") => Self::UpdateNow,
            Some("checkpoint") => Self::Checkpoint,
            Some("refresh") => {
                let s = num(words.get(1), "refresh")?;
                Self::SetRefresh {
                    sim_seconds: Some(limits::check_sim_interval("refresh", s)?),
                    wall_ms: None,
                }
            }
            Some("refresh-wall") => {
                let ms = num(words.get(1), "refresh-wall")?;
                Self::SetRefresh {
                    sim_seconds: None,
                    wall_ms: Some(limits::parse_wall_interval_ms("refresh-wall", ms)?),
                }
            }
            Some(other) => return Err(format!(
                "unknown command {other:?}; known: pause, resume, stop, update, checkpoint, refresh SECONDS, refresh-wall MS"
            )),
            None => return Err("no command given".into()),
        };
        let expected = if matches!(cmd, Self::SetRefresh { .. }) {
            2
        } else {
            1
        };
        if words.len() > expected {
            return Err(format!("unexpected extra words after {:?}", words[0]));
        }
        Ok(cmd)
    }

    /// Checks the values a command carries against [`crate::limits`]: every process that accepts
    /// a command from a user or a client (`shmctl`, the forwarder, the solver) calls this, so an
    /// out-of-range value is refused where it enters, with the same message.
    pub fn validate(&self) -> Result<(), String> {
        if let Self::SetRefresh {
            sim_seconds,
            wall_ms,
        } = self
        {
            if sim_seconds.is_none() && wall_ms.is_none() {
                return Err(
                    "refresh: give a simulated interval, a wall-clock interval or both".into(),
                );
            }
            if let Some(s) = sim_seconds {
                limits::check_sim_interval("refresh", *s)?;
            }
            if let Some(ms) = wall_ms {
                limits::check_wall_interval_ms("refresh-wall", *ms)?;
            }
        }
        Ok(())
    }
}

/// The solver's answer to a command.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum CommandOutcome {
    /// Applied; the text says what happened (e.g. the checkpoint path, truncated to fit).
    Done(String),
    /// Not applied, and why.
    Rejected(String),
}

impl CommandOutcome {
    pub fn is_done(&self) -> bool {
        matches!(self, Self::Done(_))
    }
}

/// A command taken from the table by the solver, to be acknowledged.
#[derive(Clone, Debug)]
pub struct ReceivedCommand {
    pub command: Result<Command, String>,
    pub client_id: u32,
    pub request_id: u64,
    record: u32,
}

/// Ticket for a submitted command.
#[derive(Clone, Copy, Debug)]
pub struct Ticket {
    pub client_id: u32,
    pub request_id: u64,
    record: u32,
}

/// An acknowledged record without a deadline (older senders) older than this is considered
/// abandoned by a dead client.
pub const ABANDONED_AFTER: Duration = Duration::from_secs(10);
/// An acknowledged record is reclaimed this long after its sender's deadline: the sender's
/// wait ended at the deadline, and this margin covers a sender still reading its answer.
pub const RECLAIM_GRACE: Duration = Duration::from_secs(2);
/// How long a client waits for the command mutex.
pub const LOCK_TIMEOUT: Duration = Duration::from_secs(2);

fn cfg() -> bincode::config::Configuration {
    bincode::config::standard()
}

fn encode<T: Serialize>(value: &T) -> Result<([u8; COMMAND_PAYLOAD], u32), String> {
    let mut buf = [0u8; COMMAND_PAYLOAD];
    let n = bincode::serde::encode_into_slice(value, &mut buf, cfg()).map_err(|e| e.to_string())?;
    Ok((buf, n as u32))
}

fn decode<T: for<'de> Deserialize<'de>>(
    buf: &[u8; COMMAND_PAYLOAD],
    len: u32,
) -> Result<T, String> {
    let len = (len as usize).min(COMMAND_PAYLOAD);
    let (v, _) =
        bincode::serde::decode_from_slice(&buf[..len], cfg()).map_err(|e| e.to_string())?;
    Ok(v)
}

fn state(r: &CommandRecord) -> u32 {
    r.state.load(Ordering::Acquire)
}

/// Client side: writes `cmd` into a free record under the mutex.
///
/// `answer_within` is how long the sender will wait for the answer: the solver drops the command
/// unapplied if it only gets to it later, so a command never takes effect after its sender gave
/// up (a `pause` sent to a stopped solver must not pause it once it is continued).
pub(crate) fn submit(
    region: &Region,
    client_id: u32,
    request_id: u64,
    cmd: &Command,
    answer_within: Duration,
) -> Result<Ticket, CommandError> {
    cmd.validate().map_err(CommandError::Invalid)?;
    let (payload, len) = encode(cmd).map_err(CommandError::Encode)?;
    let deadline_ns = sys::monotonic_ns()
        .saturating_add(answer_within.as_nanos().min(u64::MAX as u128) as u64)
        .max(1);
    let mutex = region.mutex();
    if mutex.lock_timeout(LOCK_TIMEOUT)?.is_none() {
        return Err(CommandError::LockTimeout(LOCK_TIMEOUT));
    }
    // A previous holder that died left no half-written record: a record becomes `Pending` only
    // by the final store below, so there is nothing to repair after EOWNERDEAD.
    let result = (|| {
        let count = region.capacities().command_records;
        let now = sys::monotonic_ns();
        let pick = (0..count).find(|&i| state(region.command(i)) == RecordState::Free as u32);
        let pick = pick.or_else(|| (0..count).find(|&i| reclaimable(region.command(i), now)));
        let Some(index) = pick else {
            return Err(table_full(region, now));
        };
        let h = region.header();
        let submit_seq = h.command_submit_seq.load(Ordering::Relaxed) + 1;
        let p = region.command_mut(index);
        // SAFETY: the record is Free (or abandoned Acked) and we hold the mutex, so no other
        // client writes it, and the solver only touches Pending/Taken records.
        unsafe {
            (*p).client_id = client_id;
            (*p).request_id = request_id;
            (*p).submit_seq = submit_seq;
            (*p).submit_mono_ns = now;
            (*p).request = payload;
            (*p).request_len = len;
            (*p).ack_len = 0;
            (*p).deadline_mono_ns = deadline_ns;
            (*p).state
                .store(RecordState::Pending as u32, Ordering::Release);
        }
        h.command_submit_seq.store(submit_seq, Ordering::Release);
        Ok(Ticket {
            client_id,
            request_id,
            record: index,
        })
    })();
    mutex.unlock();
    if result.is_ok() {
        notify::bump_and_wake(&region.header().command_futex, None);
    }
    result
}

/// Solver side: claims every pending command, in submission order. Never blocks.
pub(crate) fn take_pending(region: &Region) -> Vec<ReceivedCommand> {
    let mut taken = Vec::new();
    for i in 0..region.capacities().command_records {
        let r = region.command(i);
        if state(r) != RecordState::Pending as u32 {
            continue;
        }
        if r.state
            .compare_exchange(
                RecordState::Pending as u32,
                RecordState::Taken as u32,
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_err()
        {
            continue;
        }
        if r.deadline_mono_ns != 0 && sys::monotonic_ns() > r.deadline_mono_ns {
            // Its sender stopped waiting: applying it now would surprise everyone.
            tracing::debug!(
                client = r.client_id,
                request = r.request_id,
                "dropping a command whose sender's deadline passed"
            );
            r.state.store(RecordState::Free as u32, Ordering::Release);
            continue;
        }
        taken.push((
            r.submit_seq,
            ReceivedCommand {
                command: decode(&r.request, r.request_len),
                client_id: r.client_id,
                request_id: r.request_id,
                record: i,
            },
        ));
    }
    taken.sort_by_key(|(seq, _)| *seq);
    taken.into_iter().map(|(_, c)| c).collect()
}

/// Solver side: stores the outcome and wakes waiting clients.
pub(crate) fn acknowledge(region: &Region, cmd: &ReceivedCommand, outcome: &CommandOutcome) {
    let (payload, len) = match encode(outcome) {
        Ok(v) => v,
        Err(_) => {
            // Too long: keep the verdict, shorten the text.
            let short = match outcome {
                CommandOutcome::Done(s) => CommandOutcome::Done(fit(s)),
                CommandOutcome::Rejected(s) => CommandOutcome::Rejected(fit(s)),
            };
            encode(&short).unwrap_or(([0; COMMAND_PAYLOAD], 0))
        }
    };
    let p = region.command_mut(cmd.record);
    // SAFETY: the record is Taken (or Withdrawn by its sender), which only the solver (us)
    // writes; the sender reads `ack` only after seeing Acked.
    unsafe {
        (*p).ack = payload;
        (*p).ack_len = len;
        (*p).ack_mono_ns = sys::monotonic_ns();
    }
    let r = region.command(cmd.record);
    if r.state
        .compare_exchange(
            RecordState::Taken as u32,
            RecordState::Acked as u32,
            Ordering::AcqRel,
            Ordering::Acquire,
        )
        .is_err()
    {
        // Withdrawn: nobody waits for this answer any more.
        r.state.store(RecordState::Free as u32, Ordering::Release);
        return;
    }
    let h = region.header();
    notify::bump_and_wake(&h.ack_futex, Some(&h.ack_waiters));
}

/// The longest prefix of `s` that fits an acknowledgement, ending in "..." to show the cut.
/// Messages are written to fit (the solver's are short); this only guards against long paths.
fn fit(s: &str) -> String {
    // bincode: 1 byte for the variant, up to 3 for the string length (< 2^16).
    let room = COMMAND_PAYLOAD - 4;
    if s.len() <= room {
        return s.to_string();
    }
    let mut end = room - 3;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

/// An Acked record whose sender no longer waits (it gave up or died): free for reuse.
fn reclaimable(r: &CommandRecord, now: u64) -> bool {
    if state(r) != RecordState::Acked as u32 {
        return false;
    }
    if r.deadline_mono_ns != 0 {
        now > r
            .deadline_mono_ns
            .saturating_add(RECLAIM_GRACE.as_nanos() as u64)
    } else {
        now.saturating_sub(r.ack_mono_ns) > ABANDONED_AFTER.as_nanos() as u64
    }
}

/// Why no record is free, for the error message.
fn table_full(region: &Region, now: u64) -> CommandError {
    let count = region.capacities().command_records;
    let (mut waiting, mut answered) = (0u32, 0u32);
    for i in 0..count {
        match state(region.command(i)) {
            s if s == RecordState::Pending as u32 || s == RecordState::Taken as u32 => waiting += 1,
            s if s == RecordState::Acked as u32 => answered += 1,
            _ => {}
        }
    }
    let beat = region.header().heartbeat_mono_ns.load(Ordering::Relaxed);
    CommandError::TableFull {
        records: count,
        waiting,
        answered,
        solver_idle_s: now.saturating_sub(beat) as f64 * 1e-9,
    }
}

/// Client side: waits for the acknowledgement of `ticket`; frees the record when read.
pub(crate) fn wait_ack(
    region: &Region,
    ticket: &Ticket,
    timeout: Duration,
    solver_gone: impl FnMut() -> bool,
) -> Result<CommandOutcome, CommandError> {
    let r = region.command(ticket.record);
    let mine = || {
        state(r) == RecordState::Acked as u32
            && r.client_id == ticket.client_id
            && r.request_id == ticket.request_id
    };
    let h = region.header();
    let deadline = Instant::now() + timeout;
    match notify::wait_until(
        &h.ack_futex,
        &h.ack_waiters,
        deadline,
        Duration::from_millis(100),
        mine,
        solver_gone,
    ) {
        WaitResult::Ready => {
            let outcome = decode::<CommandOutcome>(&r.ack, r.ack_len);
            let _ = r.state.compare_exchange(
                RecordState::Acked as u32,
                RecordState::Free as u32,
                Ordering::AcqRel,
                Ordering::Relaxed,
            );
            outcome.map_err(CommandError::Decode)
        }
        WaitResult::TimedOut => Err(withdraw(r, ticket, timeout)),
        WaitResult::GaveUp => {
            let _ = withdraw(r, ticket, timeout);
            Err(CommandError::SolverGone(
                h.owner_pid.load(Ordering::Relaxed),
            ))
        }
    }
}

/// The sender gives up on `ticket`: its record is freed (or left for the solver to free), and
/// the error says whether the command can still have been applied.
fn withdraw(r: &CommandRecord, ticket: &Ticket, timeout: Duration) -> CommandError {
    let cas = |from: RecordState, to: RecordState| {
        r.state
            .compare_exchange(from as u32, to as u32, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    };
    let ours = r.client_id == ticket.client_id && r.request_id == ticket.request_id;
    if !ours {
        return CommandError::AckTimeout {
            timeout,
            applied: Applied::No,
        };
    }
    if cas(RecordState::Pending, RecordState::Free) {
        CommandError::AckTimeout {
            timeout,
            applied: Applied::No,
        }
    } else if cas(RecordState::Taken, RecordState::Withdrawn) {
        CommandError::AckTimeout {
            timeout,
            applied: Applied::Maybe,
        }
    } else if cas(RecordState::Acked, RecordState::Free) {
        // Answered just now: it was applied.
        CommandError::AckTimeout {
            timeout,
            applied: Applied::Yes,
        }
    } else {
        // Dropped by the solver after our deadline, or already reclaimed: not applied.
        CommandError::AckTimeout {
            timeout,
            applied: Applied::No,
        }
    }
}

/// Whether a command whose answer did not come in time took effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// Withdrawn before the solver took it: it never takes effect.
    No,
    /// The solver had taken it when the sender gave up: it is being applied.
    Maybe,
    /// The answer arrived just after the wait ended.
    Yes,
    /// Not known to this sender (the command went through a relay that did not say).
    Unknown,
}

impl std::fmt::Display for Applied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::No => "it was withdrawn and will not be applied",
            Self::Maybe => "the solver had already taken it, so it is being applied",
            Self::Yes => "it was applied just as the wait ended",
            Self::Unknown => "it may or may not have been applied",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_accepts_the_documented_forms_and_rejects_others() {
        assert_eq!(Command::parse(&["pause"]), Ok(Command::Pause));
        assert_eq!(
            Command::parse(&["refresh", "0.05"]),
            Ok(Command::SetRefresh {
                sim_seconds: Some(0.05),
                wall_ms: None
            })
        );
        assert!(Command::parse(&["refresh", "0"]).is_err());
        assert!(Command::parse(&["refresh"]).is_err());
        assert!(Command::parse(&["explode"])
            .unwrap_err()
            .contains("unknown command"));
        assert!(Command::parse(&["pause", "now"]).is_err());
    }

    #[test]
    fn every_command_and_long_outcomes_fit_a_record() {
        for c in [
            Command::SetRefresh {
                sim_seconds: Some(1e-3),
                wall_ms: Some(u64::MAX),
            },
            Command::UpdateNow,
            Command::Stop,
        ] {
            let (buf, len) = encode(&c).unwrap();
            assert_eq!(decode::<Command>(&buf, len).unwrap(), c);
        }
        assert!(encode(&CommandOutcome::Done("x".repeat(200))).is_err());
        assert!(decode::<Command>(&[0xff; COMMAND_PAYLOAD], 96).is_err());
    }
}
