//! Creating, opening and validating the named segment, and typed access to its sections.
//!
//! [`Region`] is the validated view of a mapping (or of any byte buffer, in tests): it is only
//! constructed by [`Region::validate`], which checks magic, version, layout hash, size and every
//! offset, so its accessors never leave the mapping.

use std::io;
use std::ptr::NonNull;

use shared_memory::{Shmem, ShmemConf, ShmemError};

use crate::error::{AttachError, CreateError, ReadError};
use crate::guard::Guard;
use crate::layout::*;
use crate::sys;

/// Directory where Linux exposes POSIX shared-memory objects.
pub const SHM_DIR: &str = "/dev/shm";

/// Checks a segment name: 1 to 200 characters of `A-Z a-z 0-9 . _ -`, not starting with `.`.
pub fn validate_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the name is empty".into());
    }
    if name.len() > 200 {
        return Err(format!(
            "the name is {} bytes long; at most 200",
            name.len()
        ));
    }
    if name.starts_with('.') {
        return Err("the name may not start with '.'".into());
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "the name contains {c:?}; use only letters, digits, '.', '_' and '-'"
        ));
    }
    Ok(())
}

/// Path of the shared-memory object `name`.
pub fn shm_path(name: &str) -> String {
    format!("{SHM_DIR}/{name}")
}

/// A validated view of a segment's bytes.
#[derive(Clone, Copy)]
pub struct Region {
    base: NonNull<u8>,
    len: usize,
    caps: Capacities,
    plan: LayoutPlan,
}

// SAFETY: the region refers to shared memory designed for concurrent use from many processes;
// every mutable access goes through atomics or the seqlock protocol.
unsafe impl Send for Region {}
unsafe impl Sync for Region {}

impl Region {
    /// Validates the header at `base` (of `len` bytes) and returns a view whose offsets are all
    /// inside `len`. Reads only fixed header fields.
    ///
    /// # Safety
    /// `base` must point to `len` readable and writable bytes, 8-byte aligned, that stay mapped
    /// while the region (and anything derived from it) is used.
    pub unsafe fn validate(base: *mut u8, len: usize) -> Result<Self, AttachError> {
        let base = NonNull::new(base).ok_or(AttachError::Truncated { len: 0 })?;
        if len < std::mem::size_of::<SegmentHeader>() {
            return Err(AttachError::Truncated { len });
        }
        let h = &*(base.as_ptr() as *const SegmentHeader);
        let magic = std::ptr::read_volatile(&h.magic);
        if magic != MAGIC {
            return Err(AttachError::NotOurs { magic });
        }
        let version = h.abi_version.load(std::sync::atomic::Ordering::Acquire);
        if version == 0 {
            return Err(AttachError::NotInitialised);
        }
        if version != ABI_VERSION {
            return Err(AttachError::VersionMismatch {
                found: version,
                expected: ABI_VERSION,
            });
        }
        let header_size = std::ptr::read_volatile(&h.header_size);
        let hash = std::ptr::read_volatile(&h.layout_hash);
        if header_size as usize != std::mem::size_of::<SegmentHeader>() || hash != LAYOUT_HASH {
            return Err(AttachError::LayoutMismatch {
                found: hash,
                expected: LAYOUT_HASH,
            });
        }
        let total = std::ptr::read_volatile(&h.total_size);
        if total != len as u64 {
            return Err(AttachError::SizeMismatch {
                header: total,
                actual: len as u64,
            });
        }
        let caps = std::ptr::read_volatile(&h.capacities);
        let plan = LayoutPlan::new(&caps).map_err(AttachError::BadCapacities)?;
        let stored = std::ptr::read_volatile(&h.plan);
        if stored != plan || plan.total_size != total {
            return Err(AttachError::Corrupt(
                "section offsets do not follow from the capacities".into(),
            ));
        }
        Ok(Self {
            base,
            len,
            caps,
            plan,
        })
    }

    /// A region over memory the caller is initialising right now (creator only).
    ///
    /// # Safety
    /// As [`Region::validate`], and `len >= plan.total_size`.
    pub(crate) unsafe fn new_unchecked(
        base: *mut u8,
        len: usize,
        caps: Capacities,
        plan: LayoutPlan,
    ) -> Self {
        Self {
            base: NonNull::new_unchecked(base),
            len,
            caps,
            plan,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn capacities(&self) -> &Capacities {
        &self.caps
    }
    pub fn plan(&self) -> &LayoutPlan {
        &self.plan
    }
    pub fn base(&self) -> *mut u8 {
        self.base.as_ptr()
    }
    /// Pointer `offset` bytes into the region. Offsets come from the validated plan.
    pub(crate) fn at(&self, offset: u64) -> *mut u8 {
        debug_assert!(offset as usize <= self.len);
        // SAFETY: every caller passes an offset from the validated plan (<= len).
        unsafe { self.base.as_ptr().add(offset as usize) }
    }
    pub fn header(&self) -> &SegmentHeader {
        // SAFETY: validated: the header lies at offset 0 and len >= its size.
        unsafe { &*(self.base.as_ptr() as *const SegmentHeader) }
    }
    pub(crate) fn static_header(&self) -> *mut StaticHeader {
        self.at(self.plan.static_offset) as *mut StaticHeader
    }
    pub(crate) fn slot(&self, index: u32) -> *mut SlotHeader {
        assert!(index < self.caps.slot_count);
        self.at(self.plan.slot_offset(index)) as *mut SlotHeader
    }
    pub(crate) fn command(&self, index: u32) -> &CommandRecord {
        assert!(index < self.caps.command_records);
        let off =
            self.plan.commands_offset + index as u64 * std::mem::size_of::<CommandRecord>() as u64;
        // SAFETY: inside the validated command section; records are only mutated through their
        // atomic `state` protocol (see `command.rs`).
        unsafe { &*(self.at(off) as *const CommandRecord) }
    }
    pub(crate) fn command_mut(&self, index: u32) -> *mut CommandRecord {
        self.command(index) as *const CommandRecord as *mut CommandRecord
    }
    pub(crate) fn mutex(&self) -> sys::RobustMutex {
        let raw = self.header().command_mutex.0.as_ptr() as *mut libc::pthread_mutex_t;
        // SAFETY: initialised by the creator before `abi_version` was published.
        unsafe { sys::RobustMutex::from_raw(raw) }
    }
}

/// A mapped segment: the OS object plus its validated region.
pub struct Segment {
    /// Declared first so it is dropped (unguarded) before `shmem` unmaps the memory.
    guard: Guard,
    /// The object opened once more, to see its size (truncation by another process).
    file: Option<std::fs::File>,
    shmem: Shmem,
    name: String,
    region: Region,
}

// SAFETY: `Shmem` holds a raw pointer to a shared mapping that outlives the value; the mapping is
// designed for concurrent use (see `Region`).
unsafe impl Send for Segment {}

impl Segment {
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn region(&self) -> &Region {
        &self.region
    }

    /// Opens and validates an existing segment.
    pub fn open(name: &str) -> Result<Self, AttachError> {
        validate_name(name).map_err(|reason| AttachError::InvalidName {
            name: name.into(),
            reason,
        })?;
        let shmem = map_existing(name)?;
        let guard = Guard::new(shmem.as_ptr(), shmem.len());
        // SAFETY: the mapping is `len` bytes, page aligned, and lives in `shmem` with the region.
        let region = unsafe { Region::validate(shmem.as_ptr(), shmem.len()) }?;
        Ok(Self {
            guard,
            file: open_for_size(name),
            shmem,
            name: name.into(),
            region,
        })
    }

    /// `Ok` while the object still has the size it was mapped with and no access faulted past
    /// its end; [`ReadError::Truncated`] once another process shrank it (its data is then gone:
    /// the mapping reads zeros, see `guard.rs`).
    pub fn check_intact(&self) -> Result<(), ReadError> {
        let expected = self.region.len() as u64;
        let size = self
            .file
            .as_ref()
            .and_then(|f| f.metadata().ok())
            .map(|m| m.len());
        if self.guard.truncated() || size.is_some_and(|s| s < expected) {
            return Err(ReadError::Truncated {
                size: size.unwrap_or(0).min(expected),
                expected,
            });
        }
        Ok(())
    }

    /// Creates a fresh segment for `caps`, replacing a stale one of the same name whose owner
    /// is dead; refuses when the owner is alive or the object is not ours.
    pub(crate) fn create(
        name: &str,
        caps: Capacities,
        group_access: bool,
    ) -> Result<Self, CreateError> {
        validate_name(name).map_err(|reason| CreateError::InvalidName {
            name: name.into(),
            reason,
        })?;
        let plan = LayoutPlan::new(&caps).map_err(CreateError::Capacity)?;
        let available = sys::free_bytes(SHM_DIR).map_err(|source| CreateError::Os {
            name: name.into(),
            op: "statvfs /dev/shm",
            source,
        })?;
        if plan.total_size > available {
            return Err(CreateError::NoSpace {
                name: name.into(),
                needed: plan.total_size,
                available,
            });
        }
        let mut shmem = match create_mapping(name, plan.total_size) {
            Ok(s) => s,
            Err(CreateError::Exists { .. }) => {
                remove_if_stale(name)?;
                create_mapping(name, plan.total_size)?
            }
            Err(e) => return Err(e),
        };
        // From here a failure drops `shmem`, which (as owner) unlinks the half-made object.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(shm_path(name))
            .map_err(|source| CreateError::Os {
                name: name.into(),
                op: "open",
                source,
            })?;
        if let Err(source) = sys::reserve(&file, plan.total_size) {
            return Err(if source.raw_os_error() == Some(libc::ENOSPC) {
                CreateError::NoSpace {
                    name: name.into(),
                    needed: plan.total_size,
                    available: sys::free_bytes(SHM_DIR).unwrap_or(0),
                }
            } else {
                CreateError::Os {
                    name: name.into(),
                    op: "posix_fallocate",
                    source,
                }
            });
        }
        if group_access {
            use std::os::unix::fs::PermissionsExt;
            file.set_permissions(std::fs::Permissions::from_mode(0o660))
                .map_err(|source| CreateError::Os {
                    name: name.into(),
                    op: "chmod",
                    source,
                })?;
        }
        // SAFETY: fresh mapping of `total_size` bytes, page aligned, zero-filled by the kernel.
        let region = unsafe { Region::new_unchecked(shmem.as_ptr(), shmem.len(), caps, plan) };
        init_header(&region, group_access).map_err(|source| CreateError::Os {
            name: name.into(),
            op: "pthread_mutex_init",
            source,
        })?;
        // The publisher removes the object explicitly on a clean close; a crash leaves it.
        shmem.set_owner(false);
        Ok(Self {
            guard: Guard::new(shmem.as_ptr(), shmem.len()),
            file: Some(file),
            shmem,
            name: name.into(),
            region,
        })
    }

    /// Removes the OS object (the mapping stays valid until dropped).
    pub fn unlink(&self) -> io::Result<()> {
        unlink(&self.name)
    }

    #[allow(dead_code)]
    pub(crate) fn shmem(&self) -> &Shmem {
        &self.shmem
    }
}

/// The object opened read-only (not through a symlink) to watch its size; `None` if that fails
/// (then only the SIGBUS guard reports truncation).
fn open_for_size(name: &str) -> Option<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(shm_path(name))
        .ok()
}

/// Removes the shared-memory object `name`.
pub fn unlink(name: &str) -> io::Result<()> {
    let c = std::ffi::CString::new(format!("/{name}"))
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: NUL-terminated name; shm_unlink touches no memory of ours.
    if unsafe { libc::shm_unlink(c.as_ptr()) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn create_mapping(name: &str, size: u64) -> Result<Shmem, CreateError> {
    ShmemConf::new()
        .os_id(format!("/{name}"))
        .size(size as usize)
        .create()
        .map_err(|e| create_error(name, e))
}

/// What a failed create means, in the user's words (not "os error 28").
fn create_error(name: &str, e: ShmemError) -> CreateError {
    match e {
        ShmemError::MappingIdExists => CreateError::Exists { name: name.into() },
        // statvfs said there were bytes: what is missing is an inode.
        ShmemError::MapCreateFailed(errno) if errno as i32 == libc::ENOSPC => {
            CreateError::NoInodes { name: name.into() }
        }
        ShmemError::MapCreateFailed(errno) if errno as i32 == libc::EROFS => {
            CreateError::ReadOnly { name: name.into() }
        }
        other => CreateError::Os {
            name: name.into(),
            op: "shm_open/mmap",
            source: io::Error::other(other.to_string()),
        },
    }
}

/// What sits at `/dev/shm/NAME`, checked before opening so that a directory or a symbolic link
/// gets a message saying so (not "truncated (0 bytes)" or a bare errno).
fn check_object(name: &str) -> Result<(), AttachError> {
    let meta = match std::fs::symlink_metadata(shm_path(name)) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(AttachError::NotFound { name: name.into() })
        }
        Err(source) => {
            return Err(AttachError::Os {
                name: name.into(),
                source,
            })
        }
    };
    let ft = meta.file_type();
    let kind = if ft.is_dir() {
        "a directory"
    } else if ft.is_symlink() {
        "a symbolic link (segments are never opened through links)"
    } else if !ft.is_file() {
        "a special file"
    } else {
        return Ok(());
    };
    Err(AttachError::NotAnObject {
        name: name.into(),
        kind,
    })
}

/// Owner uid of `/dev/shm/NAME`, for permission messages.
fn owner_uid(name: &str) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(shm_path(name))
        .ok()
        .map(|m| m.uid())
}

fn map_existing(name: &str) -> Result<Shmem, AttachError> {
    check_object(name)?;
    ShmemConf::new()
        .os_id(format!("/{name}"))
        .open()
        .map_err(|e| match e {
            ShmemError::MapOpenFailed(errno) if errno as i32 == libc::ENOENT => {
                AttachError::NotFound { name: name.into() }
            }
            ShmemError::MapOpenFailed(errno) if errno as i32 == libc::EACCES => {
                AttachError::PermissionDenied {
                    name: name.into(),
                    owner_uid: owner_uid(name),
                }
            }
            // An empty object cannot be mapped: it is not a segment of ours.
            ShmemError::MapOpenFailed(errno) if errno as i32 == libc::EINVAL => {
                AttachError::Truncated { len: 0 }
            }
            other => AttachError::Os {
                name: name.into(),
                source: io::Error::other(other.to_string()),
            },
        })
}

/// Who holds an existing object named like ours.
pub enum Occupant {
    /// A particle-shm segment whose owner process is alive.
    Alive { pid: u32 },
    /// A particle-shm segment whose owner is gone.
    Stale { pid: u32 },
    /// Something else (not our magic), or unreadable.
    Foreign(AttachError),
}

/// Inspects the object `name` without requiring a complete, valid segment: only the magic and
/// the owner identity (written first by the creator) are read.
pub fn occupant(name: &str) -> Result<Occupant, AttachError> {
    let shmem = map_existing(name)?;
    if shmem.len() < std::mem::size_of::<SegmentHeader>() {
        return Ok(Occupant::Foreign(AttachError::Truncated {
            len: shmem.len(),
        }));
    }
    // SAFETY: the mapping holds at least a header; only fixed fields and atomics are read.
    let h = unsafe { &*(shmem.as_ptr() as *const SegmentHeader) };
    let magic = unsafe { std::ptr::read_volatile(&h.magic) };
    if magic != MAGIC {
        return Ok(Occupant::Foreign(AttachError::NotOurs { magic }));
    }
    let pid = h.owner_pid.load(std::sync::atomic::Ordering::Acquire);
    let ticks = h
        .owner_start_ticks
        .load(std::sync::atomic::Ordering::Acquire);
    Ok(if sys::process_alive(pid, ticks) {
        Occupant::Alive { pid }
    } else {
        Occupant::Stale { pid }
    })
}

fn remove_if_stale(name: &str) -> Result<(), CreateError> {
    match occupant(name) {
        Ok(Occupant::Stale { pid }) => {
            tracing::warn!(
                segment = name,
                dead_pid = pid,
                "replacing stale segment whose owner is gone"
            );
            unlink(name).map_err(|source| CreateError::Os {
                name: name.into(),
                op: "shm_unlink",
                source,
            })
        }
        Ok(Occupant::Alive { pid }) => Err(CreateError::InUse {
            name: name.into(),
            pid,
        }),
        Ok(Occupant::Foreign(reason)) => Err(CreateError::NotOurs {
            name: name.into(),
            reason,
        }),
        // Vanished in between: fine, create again.
        Err(AttachError::NotFound { .. }) => Ok(()),
        Err(AttachError::PermissionDenied { owner_uid, .. }) => Err(CreateError::OtherUser {
            name: name.into(),
            uid: owner_uid,
        }),
        Err(reason) => Err(CreateError::NotOurs {
            name: name.into(),
            reason,
        }),
    }
}

fn init_header(region: &Region, group_access: bool) -> io::Result<()> {
    use std::sync::atomic::Ordering::*;
    let h = region.header() as *const SegmentHeader as *mut SegmentHeader;
    let (pid, ticks) = sys::own_identity();
    // SAFETY: the creator has exclusive use of the fresh mapping until `abi_version` is stored;
    // plain fields are written through the raw pointer before that release store.
    unsafe {
        // Owner first, magic second: a process that sees our magic also sees a live owner, so
        // it never mistakes a segment being created for a stale one.
        (*h).owner_pid.store(pid, Relaxed);
        (*h).owner_start_ticks.store(ticks, Release);
        std::sync::atomic::fence(Release);
        std::ptr::write_volatile(&mut (*h).magic, MAGIC);
        (*h).header_size = std::mem::size_of::<SegmentHeader>() as u32;
        (*h).layout_hash = LAYOUT_HASH;
        (*h).total_size = region.plan().total_size;
        (*h).capacities = *region.capacities();
        (*h).plan = *region.plan();
        (*h).group_access = group_access as u32;
        (*h).created_unix_ns = sys::unix_ns();
        (*h).solver_state
            .store(SolverState::Starting as u32, Relaxed);
        (*h).heartbeat_mono_ns.store(sys::monotonic_ns(), Relaxed);
        (*h).heartbeat_unix_ns.store(sys::unix_ns(), Relaxed);
        sys::RobustMutex::init((*h).command_mutex.0.as_mut_ptr() as *mut libc::pthread_mutex_t)?;
        (*h).abi_version.store(ABI_VERSION, Release);
    }
    Ok(())
}

/// Takes the command mutex and never releases it: only for tests that kill a process holding it.
#[doc(hidden)]
pub fn lock_command_mutex_for_test(region: &Region) -> bool {
    matches!(
        region
            .mutex()
            .lock_timeout(std::time::Duration::from_secs(5)),
        Ok(Some(_))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_failures_name_their_cause() {
        let e = create_error("x", ShmemError::MapCreateFailed(libc::ENOSPC as u32));
        assert!(e.to_string().contains("no free inodes"), "{e}");
        let e = create_error("x", ShmemError::MapCreateFailed(libc::EROFS as u32));
        assert!(e.to_string().contains("read-only"), "{e}");
        assert!(!e.to_string().contains("os error"), "{e}");
    }
}
