//! Thin, tested wrappers over `libc` for what the named crates do not offer: futex wait/wake on
//! a word in shared memory, a robust process-shared mutex, process liveness, clocks and
//! `/dev/shm` space reservation. All `unsafe` of the crate outside `segment.rs` lives here.

use std::io;
use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// `CLOCK_MONOTONIC` in nanoseconds (system-wide: comparable between processes).
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// `CLOCK_REALTIME` in nanoseconds since the Unix epoch.
pub fn unix_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; both clocks exist on every Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sleeps on `word` while it equals `expected`, at most `timeout`. Returns on wake-up, value
/// change, signal or timeout: callers re-check their condition. A shared (non-private) futex, so
/// it works between processes mapping the same memory; a dead waiter cannot block a waker.
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `word` is a live, aligned u32 for the duration of the call; FUTEX_WAIT only reads
    // it and the relative timeout is a valid timespec.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// Wakes every process sleeping on `word`. Never blocks.
pub fn futex_wake_all(word: &AtomicU32) {
    // SAFETY: `word` is a live, aligned u32; FUTEX_WAKE does not access other memory.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            i32::MAX,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// Outcome of taking the robust mutex.
#[derive(Debug, PartialEq, Eq)]
pub enum Locked {
    /// Taken normally.
    Clean,
    /// Taken after its previous owner died holding it; the mutex was made consistent and the
    /// caller must repair whatever the dead owner may have left half-done.
    OwnerDied,
}

/// A robust, process-shared `pthread_mutex_t` living in shared memory.
pub struct RobustMutex {
    raw: *mut libc::pthread_mutex_t,
}

impl RobustMutex {
    /// Initialises the mutex at `raw` (creator only, before any other process can see it).
    ///
    /// # Safety
    /// `raw` must point to writable, suitably aligned memory of at least
    /// `size_of::<pthread_mutex_t>()` bytes that no other thread or process uses yet.
    pub unsafe fn init(raw: *mut libc::pthread_mutex_t) -> io::Result<()> {
        let mut attr: libc::pthread_mutexattr_t = std::mem::zeroed();
        check(libc::pthread_mutexattr_init(&mut attr))?;
        check(libc::pthread_mutexattr_setpshared(
            &mut attr,
            libc::PTHREAD_PROCESS_SHARED,
        ))?;
        check(libc::pthread_mutexattr_setrobust(
            &mut attr,
            libc::PTHREAD_MUTEX_ROBUST,
        ))?;
        let r = check(libc::pthread_mutex_init(raw, &attr));
        libc::pthread_mutexattr_destroy(&mut attr);
        r
    }

    /// # Safety
    /// `raw` must point to a mutex initialised by [`RobustMutex::init`] that stays mapped while
    /// the returned value is used.
    pub unsafe fn from_raw(raw: *mut libc::pthread_mutex_t) -> Self {
        Self { raw }
    }

    /// One attempt; `Ok(None)` when another process holds it.
    pub fn try_lock(&self) -> io::Result<Option<Locked>> {
        // SAFETY: `raw` is an initialised process-shared mutex (constructor contract).
        match unsafe { libc::pthread_mutex_trylock(self.raw) } {
            0 => Ok(Some(Locked::Clean)),
            libc::EBUSY => Ok(None),
            libc::EOWNERDEAD => {
                // SAFETY: we hold the mutex (EOWNERDEAD means it was handed to us).
                check(unsafe { libc::pthread_mutex_consistent(self.raw) })?;
                Ok(Some(Locked::OwnerDied))
            }
            e => Err(io::Error::from_raw_os_error(e)),
        }
    }

    /// Tries until `timeout` with a short backoff; `Ok(None)` on timeout. Polling keeps every
    /// wait bounded and on the monotonic clock (no `CLOCK_REALTIME` deadlines).
    pub fn lock_timeout(&self, timeout: Duration) -> io::Result<Option<Locked>> {
        let deadline = std::time::Instant::now() + timeout;
        let mut spins = 0u32;
        loop {
            if let Some(l) = self.try_lock()? {
                return Ok(Some(l));
            }
            if std::time::Instant::now() >= deadline {
                return Ok(None);
            }
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }

    pub fn unlock(&self) {
        // SAFETY: only called by the holder (see `CommandTable`).
        unsafe { libc::pthread_mutex_unlock(self.raw) };
    }
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

/// This process's pid and start time in clock ticks since boot.
pub fn own_identity() -> (u32, u64) {
    let pid = std::process::id();
    (pid, process_start_ticks(pid).unwrap_or(0))
}

/// Start time of `pid` (field 22 of `/proc/<pid>/stat`), or `None` when the process does not
/// exist or is a zombie (dead but not yet reaped).
pub fn process_start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces and parentheses: parse after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    if state == "Z" || state == "X" {
        return None;
    }
    // `rest` starts at field 3 (state); field 22 is 19 further.
    fields.nth(18)?.parse().ok()
}

/// Whether the process that recorded (`pid`, `start_ticks`) is still running. A start time
/// of 0 never matches: every owner records its real start time, so 0 means a corrupt or
/// hostile header (accepting it made a segment claiming pid 1 "alive" forever).
pub fn process_alive(pid: u32, start_ticks: u64) -> bool {
    if pid == 0 || start_ticks == 0 {
        return false;
    }
    process_start_ticks(pid) == Some(start_ticks)
}

/// Bytes available to an unprivileged writer in the file system holding `path`.
pub fn free_bytes(path: &str) -> io::Result<u64> {
    let c =
        std::ffi::CString::new(path).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: zeroed statvfs is a valid out-parameter; `c` is NUL-terminated.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(s.f_bavail as u64 * s.f_frsize as u64)
}

/// Reserves `len` bytes of backing store for `file` so that first touch cannot SIGBUS.
pub fn reserve(file: &std::fs::File, len: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid open fd; posix_fallocate does not touch our memory.
    let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len as libc::off_t) };
    check(rc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_is_alive_and_pid_reuse_is_detected() {
        let (pid, ticks) = own_identity();
        assert!(ticks > 0);
        assert!(process_alive(pid, ticks));
        assert!(!process_alive(pid, ticks + 1));
        assert!(!process_alive(0, 0));
        // Regression: a start time of 0 used to match any live process (pid 1 here).
        assert!(!process_alive(1, 0));
        assert!(!process_alive(pid, 0));
    }

    #[test]
    fn reaped_child_is_dead() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(process_start_ticks(pid).is_none());
    }

    #[test]
    fn futex_wait_times_out_and_returns_on_changed_value() {
        let w = AtomicU32::new(5);
        let t = std::time::Instant::now();
        futex_wait(&w, 5, Duration::from_millis(20));
        assert!(t.elapsed() >= Duration::from_millis(15));
        let t = std::time::Instant::now();
        futex_wait(&w, 4, Duration::from_secs(5));
        assert!(t.elapsed() < Duration::from_secs(1));
    }
}
