//! Surviving a segment shrunk under our feet.
//!
//! Any process that may open the object (its owner, or the group with `--group-access`) can
//! `ftruncate` it while others have it mapped. Touching a page past the new end of a shared
//! file mapping raises SIGBUS, which kills the process by default: a careless `truncate -s 0`
//! would kill the solver and every viewer. Wayland compositors face the same with client
//! shared-memory pools and answer it the same way: a SIGBUS handler that recognises an address
//! inside a guarded mapping replaces the whole mapping with private zero pages (`mmap` with
//! `MAP_FIXED | MAP_ANONYMOUS`), records that the segment was truncated, and returns, so the
//! faulting access completes on harmless memory. The owner of the mapping checks
//! [`Guard::truncated`] at its next safe point and says so. A SIGBUS at any other address is
//! handed to the previous disposition (by default: the process dies as before).
//!
//! The handler touches only a fixed table of atomics and calls `mmap` (a plain system call;
//! not on POSIX's async-signal-safe list, but it takes no user-space lock in glibc).

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::Once;

/// Most mappings guarded at once in one process (a tool attaches to a handful of segments).
const SLOTS: usize = 64;

struct Entry {
    base: AtomicUsize,
    len: AtomicUsize,
    truncated: AtomicBool,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Entry = Entry {
    base: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    truncated: AtomicBool::new(false),
};
static TABLE: [Entry; SLOTS] = [EMPTY; SLOTS];
static PREVIOUS: AtomicPtr<libc::sigaction> = AtomicPtr::new(std::ptr::null_mut());
static INSTALL: Once = Once::new();

/// A guarded mapping; unguarded again when dropped (before the mapping is unmapped).
#[derive(Debug)]
pub struct Guard {
    slot: Option<usize>,
}

impl Guard {
    /// Guards `len` bytes at `base`. When the table is full the mapping is simply not guarded
    /// (the old behaviour) and a warning says so.
    pub fn new(base: *mut u8, len: usize) -> Self {
        INSTALL.call_once(install);
        for (i, e) in TABLE.iter().enumerate() {
            if e.base
                .compare_exchange(0, usize::MAX, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                e.truncated.store(false, Ordering::Relaxed);
                e.len.store(len, Ordering::Relaxed);
                e.base.store(base as usize, Ordering::Release);
                return Self { slot: Some(i) };
            }
        }
        tracing::warn!(
            "more than {SLOTS} segments mapped: this one is not guarded against truncation"
        );
        Self { slot: None }
    }

    /// Whether a SIGBUS inside the mapping was caught (its contents are now zero pages).
    pub fn truncated(&self) -> bool {
        self.slot
            .is_some_and(|i| TABLE[i].truncated.load(Ordering::Acquire))
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            TABLE[i].len.store(0, Ordering::Relaxed);
            TABLE[i].base.store(0, Ordering::Release);
        }
    }
}

fn install() {
    // SAFETY: sigaction with a zeroed struct filled field by field is the documented use; the
    // previous action is leaked into a static so the handler can read it at any time.
    unsafe {
        let mut new: libc::sigaction = std::mem::zeroed();
        new.sa_sigaction = on_sigbus as *const () as usize;
        new.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER;
        libc::sigemptyset(&mut new.sa_mask);
        let prev = Box::into_raw(Box::new(std::mem::zeroed::<libc::sigaction>()));
        if libc::sigaction(libc::SIGBUS, &new, prev) == 0 {
            PREVIOUS.store(prev, Ordering::Release);
        } else {
            tracing::warn!(
                "cannot install the SIGBUS handler: {}; a truncated segment will kill this process",
                std::io::Error::last_os_error()
            );
        }
    }
}

extern "C" fn on_sigbus(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers; `si_addr` is the
    // faulting address for SIGBUS.
    let addr = unsafe { (*info).si_addr() } as usize;
    for e in &TABLE {
        let base = e.base.load(Ordering::Acquire);
        let len = e.len.load(Ordering::Acquire);
        if base == 0 || base == usize::MAX || addr < base || addr - base >= len {
            continue;
        }
        // SAFETY: [base, base + len) is a mapping this process made and still owns (the guard
        // is dropped before it is unmapped); replacing it with private anonymous pages of the
        // same size keeps every pointer into it valid.
        let p = unsafe {
            libc::mmap(
                base as *mut libc::c_void,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_FIXED | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p != libc::MAP_FAILED {
            e.truncated.store(true, Ordering::Release);
            return;
        }
        break;
    }
    // Not ours (or the remap failed): restore the previous disposition; returning re-runs the
    // faulting instruction, which then gets the old behaviour.
    let prev = PREVIOUS.load(Ordering::Acquire);
    // SAFETY: `prev` is null or the leaked action saved at installation.
    unsafe {
        if prev.is_null() {
            let mut dfl: libc::sigaction = std::mem::zeroed();
            dfl.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(libc::SIGBUS, &dfl, std::ptr::null_mut());
        } else {
            libc::sigaction(libc::SIGBUS, prev, std::ptr::null_mut());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_truncated_file_mapping_reads_zeros_and_is_reported() {
        let dir = std::env::temp_dir().join(format!("guard-test-{}", std::process::id()));
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&dir)
            .unwrap();
        f.write_all(&[7u8; 3 * 4096]).unwrap();
        let len = 3 * 4096;
        // SAFETY: fresh shared mapping of a file we own, unmapped below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        } as *mut u8;
        assert_ne!(base as *mut libc::c_void, libc::MAP_FAILED);
        let g = Guard::new(base, len);
        // SAFETY: inside the mapping.
        assert_eq!(unsafe { std::ptr::read_volatile(base.add(5000)) }, 7);
        assert!(!g.truncated());
        f.set_len(0).unwrap();
        // Without the guard this read kills the test process with SIGBUS.
        // SAFETY: inside the mapping (now private zero pages).
        let v = unsafe { std::ptr::read_volatile(base.add(5000)) };
        assert_eq!(v, 0);
        assert!(g.truncated());
        drop(g);
        // SAFETY: the mapping made above.
        unsafe { libc::munmap(base as *mut libc::c_void, len) };
        let _ = std::fs::remove_file(dir);
    }
}
