//! The segment's condition variables: futex words in the header that the writer bumps and wakes
//! after each event. A waiter registers in a waiter count, re-checks its condition, then sleeps
//! on the word's old value with a bounded timeout. Waking never blocks, and a waiter killed while
//! asleep leaves nothing to hang on (unlike glibc's process-shared `pthread_cond_t`, sourceware
//! bug 21422).
//!
//! Why no wake is lost: the writer publishes, then bumps the word, then reads the waiter count
//! (all SeqCst); the waiter increments the count, then reads the word, then checks the condition.
//! Either the writer sees the waiter (and wakes it, or the futex sees a changed word), or the
//! waiter's condition check sees the publication.

use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::time::{Duration, Instant};

use crate::layout::SegmentHeader;
use crate::sys;

/// Bumps `word` and wakes its sleepers if any are registered.
pub(crate) fn bump_and_wake(word: &AtomicU32, waiters: Option<&AtomicU32>) {
    word.fetch_add(1, SeqCst);
    if waiters.is_none_or(|w| w.load(SeqCst) > 0) {
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
    waiters: &AtomicU32,
    deadline: Instant,
    slice: Duration,
    mut ready: impl FnMut() -> bool,
    mut give_up: impl FnMut() -> bool,
) -> WaitResult {
    // `give_up` may be costly (it reads /proc): run it once per slice, not on every wake-up.
    let mut next_check = Instant::now() + slice;
    loop {
        waiters.fetch_add(1, SeqCst);
        let seen = word.load(SeqCst);
        if ready() {
            waiters.fetch_sub(1, SeqCst);
            return WaitResult::Ready;
        }
        let now = Instant::now();
        if now >= deadline {
            waiters.fetch_sub(1, SeqCst);
            return WaitResult::TimedOut;
        }
        if now >= next_check {
            next_check = now + slice;
            if give_up() {
                waiters.fetch_sub(1, SeqCst);
                return WaitResult::GaveUp;
            }
        }
        sys::futex_wait(word, seen, (deadline - now).min(next_check - now));
        waiters.fetch_sub(1, SeqCst);
    }
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum WaitResult {
    Ready,
    TimedOut,
    GaveUp,
}
