//! The segment's condition variables: futex words in the header that the writer bumps and wakes
//! after each event. A waiter takes a lease ("someone may sleep until T"), re-checks its
//! condition, then sleeps on the word's old value for at most [`SLEEP_SLICE`]. Waking never
//! blocks, and a waiter killed while asleep leaves nothing to hang on (unlike glibc's
//! process-shared `pthread_cond_t`, sourceware bug 21422).
//!
//! Leases instead of a waiter count: a count incremented before sleeping and decremented after
//! leaked +1 for every waiter killed asleep, and the writer then paid a wake system call per
//! event forever. A lease is a time: the waiter stores now + [`LEASE`] (monotonic ms, u32,
//! wrapping) and sleeps at most [`SLEEP_SLICE`] < [`LEASE`]; a dead waiter's lease simply
//! expires. Plain stores suffice (every waiter writes now + the same constant, so a later
//! store is never earlier than another waiter's wake-up by more than the scheduling gap
//! between its clock read and its store, which the margin [`LEASE`] - [`SLEEP_SLICE`] covers).
//!
//! Why no wake is lost: the writer publishes, then bumps the word, then reads the lease (all
//! SeqCst); the waiter stores its lease, then reads the word, then checks the condition. Either
//! the writer sees the lease (and wakes, or the futex sees a changed word), or the waiter's
//! condition check sees the publication.

use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::time::{Duration, Instant};

use crate::layout::SegmentHeader;
use crate::sys;

/// Longest single futex sleep of a waiter.
pub const SLEEP_SLICE: Duration = Duration::from_millis(200);
/// A waiter's lease: how long after storing it the writer still wakes the word. Longer than
/// [`SLEEP_SLICE`] by a margin for the gap between the waiter's clock read and its store.
pub const LEASE_MS: u32 = 300;

/// `CLOCK_MONOTONIC` in ms, truncated to the u32 the lease words hold (wraps after 49 days;
/// leases are compared with wrapping arithmetic).
fn now_ms() -> u32 {
    (sys::monotonic_ns() / 1_000_000) as u32
}

/// Whether a lease stored in a header word is still running.
pub(crate) fn lease_active(lease: u32) -> bool {
    (lease.wrapping_sub(now_ms()) as i32) > 0
}

/// Bumps `word` and wakes its sleepers if any waiter's lease is running (`None`: always wake).
pub(crate) fn bump_and_wake(word: &AtomicU32, lease: Option<&AtomicU32>) {
    word.fetch_add(1, SeqCst);
    if lease.is_none_or(|l| lease_active(l.load(SeqCst))) {
        sys::futex_wake_all(word);
    }
}

pub(crate) fn wake_frame(h: &SegmentHeader) {
    bump_and_wake(&h.frame_futex, Some(&h.frame_waiters));
}

/// Waits until `ready()` holds or `deadline` passes, sleeping on `word` in slices of at most
/// `slice` (so that `give_up()`, e.g. "the solver died", is re-checked regularly).
pub(crate) fn wait_until(
    word: &AtomicU32,
    lease: &AtomicU32,
    deadline: Instant,
    slice: Duration,
    mut ready: impl FnMut() -> bool,
    mut give_up: impl FnMut() -> bool,
) -> WaitResult {
    // `give_up` may be costly (it reads /proc): run it once per slice, not on every wake-up.
    let mut next_check = Instant::now() + slice;
    loop {
        lease.store(now_ms().wrapping_add(LEASE_MS), SeqCst);
        let seen = word.load(SeqCst);
        if ready() {
            return WaitResult::Ready;
        }
        let now = Instant::now();
        if now >= deadline {
            return WaitResult::TimedOut;
        }
        if now >= next_check {
            next_check = now + slice;
            if give_up() {
                return WaitResult::GaveUp;
            }
        }
        let sleep = (deadline - now).min(next_check - now).min(SLEEP_SLICE);
        sys::futex_wait(word, seen, sleep);
    }
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum WaitResult {
    Ready,
    TimedOut,
    GaveUp,
}
