//! Frame slots: the writer side ([`FrameWriter`]) and the seqlock-validated readers
//! ([`read_frame`] copying, [`FrameView`] zero-copy).
//!
//! Seqlock: the writer stores an odd `lock_seq` (2*seq - 1), fills the slot, then stores the even
//! `2*seq` with release ordering. A reader loads `lock_seq` (acquire), reads, issues an acquire
//! fence and loads it again; equal and even means the bytes read belong to one complete frame.
//! The reader's copy may race with a writer reusing the slot; such a copy is detected and thrown
//! away, never returned (the usual seqlock contract).

use std::cell::Cell;
use std::ptr::addr_of;
use std::sync::atomic::{fence, Ordering};

use crate::error::{PublishError, ReadError};
use crate::layout::*;
use crate::segment::Region;
use crate::sys;

/// A frame's metadata (a copy of its slot header).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FrameMeta {
    pub seq: u64,
    pub slot: u32,
    pub step: u64,
    pub sim_time: f64,
    pub dt: f64,
    pub wall_unix_ns: u64,
    pub publish_mono_ns: u64,
    pub particle_count: u64,
    pub fields: u32,
    pub body_count: u32,
    pub static_generation: u64,
    pub steps_per_s: f64,
    /// Particles removed by outflow regions since t = 0.
    pub removed_count: u64,
    /// Their mass [kg].
    pub removed_mass: f64,
}

impl FrameMeta {
    pub fn has(&self, field: FieldKind) -> bool {
        self.fields & field.bit() != 0
    }
}

/// An owned copy of one complete frame.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Frame {
    pub meta: FrameMeta,
    pub bodies: Vec<BodyTransform>,
    pub positions: Option<Vec<[f32; 3]>>,
    pub velocities: Option<Vec<[f32; 3]>>,
    pub angular_velocities: Option<Vec<[f32; 3]>>,
    pub forces: Option<Vec<[f32; 3]>>,
    pub contact_counts: Option<Vec<u32>>,
    pub densities: Option<Vec<f32>>,
    pub pressures: Option<Vec<f32>>,
    /// Ids of this frame's particles ([`FieldKind::ParticleId`]); `None`: the static ids.
    pub particle_ids: Option<Vec<u32>>,
    /// [`crate::layout::ParticleKind`] of each particle.
    pub particle_kinds: Option<Vec<u32>>,
    /// Set when this frame is a sample of a larger one (a forwarder client's `max_particles`):
    /// every `stride`-th particle, named by `particle_ids`. `None` for a segment's frames.
    pub sample: Option<FrameSample>,
}

/// How a [`Frame`] was sampled from the run's frame: element `i` is that frame's particle
/// `stride * i`, and the whole frame held `of` particles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameSample {
    pub stride: u64,
    pub of: u64,
}

/// Reads the slot header and checks its counts against the capacities.
fn slot_meta(region: &Region, slot: u32) -> Result<(u64, FrameMeta), ReadError> {
    let p = region.slot(slot);
    // SAFETY: `p` is a slot header inside the validated region; plain fields are read with
    // volatile loads because the writer may be changing them (validated by the caller).
    let (lock, meta) = unsafe {
        let lock = (*p).lock_seq.load(Ordering::Acquire);
        let meta = FrameMeta {
            seq: std::ptr::read_volatile(addr_of!((*p).frame_seq)),
            slot,
            step: std::ptr::read_volatile(addr_of!((*p).step)),
            sim_time: std::ptr::read_volatile(addr_of!((*p).sim_time)),
            dt: std::ptr::read_volatile(addr_of!((*p).dt)),
            wall_unix_ns: std::ptr::read_volatile(addr_of!((*p).wall_unix_ns)),
            publish_mono_ns: std::ptr::read_volatile(addr_of!((*p).publish_mono_ns)),
            particle_count: std::ptr::read_volatile(addr_of!((*p).particle_count)),
            fields: std::ptr::read_volatile(addr_of!((*p).fields)),
            body_count: std::ptr::read_volatile(addr_of!((*p).body_count)),
            static_generation: std::ptr::read_volatile(addr_of!((*p).static_generation)),
            steps_per_s: std::ptr::read_volatile(addr_of!((*p).steps_per_s)),
            removed_count: std::ptr::read_volatile(addr_of!((*p).removed_count)),
            removed_mass: std::ptr::read_volatile(addr_of!((*p).removed_mass)),
        };
        (lock, meta)
    };
    Ok((lock, meta))
}

fn check_meta(region: &Region, meta: &FrameMeta) -> Result<(), ReadError> {
    let caps = region.capacities();
    if meta.particle_count > caps.max_particles {
        return Err(ReadError::Corrupt(format!(
            "frame {} claims {} particles, capacity {}",
            meta.seq, meta.particle_count, caps.max_particles
        )));
    }
    if meta.body_count > caps.max_bodies {
        return Err(ReadError::Corrupt(format!(
            "frame {} claims {} bodies, capacity {}",
            meta.seq, meta.body_count, caps.max_bodies
        )));
    }
    if meta.fields & !caps.fields != 0 {
        return Err(ReadError::Corrupt(format!(
            "frame {} has fields {:#x} outside the reserved {:#x}",
            meta.seq, meta.fields, caps.fields
        )));
    }
    Ok(())
}

fn lock_now(region: &Region, slot: u32) -> u64 {
    fence(Ordering::Acquire);
    // SAFETY: slot header inside the validated region; atomic load.
    unsafe { (*region.slot(slot)).lock_seq.load(Ordering::Relaxed) }
}

/// Slot currently holding the newest complete frame, if any.
pub fn newest_slot(region: &Region) -> Option<u32> {
    let h = region.header();
    if h.newest_seq.load(Ordering::Acquire) == 0 {
        return None;
    }
    let slot = h.newest_slot.load(Ordering::Acquire);
    (slot < region.capacities().slot_count).then_some(slot)
}

/// A zero-copy view of one slot. Slices point into shared memory; they are only known to be one
/// consistent frame if [`FrameView::still_valid`] returns true after they were used.
pub struct FrameView<'a> {
    region: &'a Region,
    lock: u64,
    pub meta: FrameMeta,
}

impl<'a> FrameView<'a> {
    /// Opens a view on `slot` if it holds a complete frame with sane counts.
    pub fn open(region: &'a Region, slot: u32) -> Result<Option<Self>, ReadError> {
        let (lock, meta) = slot_meta(region, slot)?;
        if lock == 0 || lock % 2 == 1 {
            return Ok(None);
        }
        if lock_now(region, slot) != lock {
            return Ok(None);
        }
        check_meta(region, &meta)?;
        Ok(Some(Self { region, lock, meta }))
    }

    /// True while the writer has not started reusing this slot.
    pub fn still_valid(&self) -> bool {
        lock_now(self.region, self.meta.slot) == self.lock
    }

    fn array<T>(&self, field: FieldKind) -> Option<&'a [T]> {
        if !self.meta.has(field) {
            return None;
        }
        let off = self.region.plan().slot_offset(self.meta.slot)
            + self.region.plan().slot_field_offsets[field as usize];
        debug_assert_eq!(std::mem::size_of::<T>() as u64, field.element_size());
        // SAFETY: offset and count come from the validated plan and the checked meta
        // (particle_count <= max_particles, field reserved); alignment is 64 bytes.
        Some(unsafe {
            std::slice::from_raw_parts(
                self.region.at(off) as *const T,
                self.meta.particle_count as usize,
            )
        })
    }

    pub fn positions(&self) -> Option<&'a [[f32; 3]]> {
        self.array(FieldKind::Position)
    }
    pub fn velocities(&self) -> Option<&'a [[f32; 3]]> {
        self.array(FieldKind::Velocity)
    }
    pub fn angular_velocities(&self) -> Option<&'a [[f32; 3]]> {
        self.array(FieldKind::AngularVelocity)
    }
    pub fn forces(&self) -> Option<&'a [[f32; 3]]> {
        self.array(FieldKind::Force)
    }
    pub fn contact_counts(&self) -> Option<&'a [u32]> {
        self.array(FieldKind::ContactCount)
    }
    pub fn densities(&self) -> Option<&'a [f32]> {
        self.array(FieldKind::Density)
    }
    pub fn pressures(&self) -> Option<&'a [f32]> {
        self.array(FieldKind::Pressure)
    }
    pub fn particle_ids(&self) -> Option<&'a [u32]> {
        self.array(FieldKind::ParticleId)
    }
    pub fn particle_kinds(&self) -> Option<&'a [u32]> {
        self.array(FieldKind::ParticleKind)
    }
    pub fn bodies(&self) -> &'a [BodyTransform] {
        let off =
            self.region.plan().slot_offset(self.meta.slot) + self.region.plan().slot_bodies_offset;
        // SAFETY: as `array`: body_count <= max_bodies was checked.
        unsafe {
            std::slice::from_raw_parts(
                self.region.at(off) as *const BodyTransform,
                self.meta.body_count as usize,
            )
        }
    }

    /// Copies the view into `out`, reusing its buffers (no allocation, hence no page faults,
    /// after the first frame of a size: at 10 M particles that is most of a copy's cost).
    pub fn copy_into(&self, out: &mut Frame) {
        self.copy_fields_into(out, u32::MAX);
    }

    /// [`FrameView::copy_into`] of only the fields in `fields` (a [`FieldKind::bit`] mask);
    /// the others are `None` in `out`. A consumer that needs a few fields of a large frame
    /// copies only those.
    pub fn copy_fields_into(&self, out: &mut Frame, fields: u32) {
        fn fill<T: Copy + Send + Sync>(dst: &mut Option<Vec<T>>, src: Option<&[T]>) {
            match src {
                Some(src) => {
                    let v = dst.get_or_insert_with(Vec::new);
                    if v.len() == src.len() {
                        copy_parallel(v, src);
                    } else {
                        v.clear();
                        v.extend_from_slice(src);
                    }
                }
                None => *dst = None,
            }
        }
        out.meta = self.meta;
        out.sample = None;
        out.bodies.clear();
        out.bodies.extend_from_slice(self.bodies());
        let want = |k: FieldKind| fields & k.bit() != 0;
        let pos = self.positions().filter(|_| want(FieldKind::Position));
        fill(&mut out.positions, pos);
        let vel = self.velocities().filter(|_| want(FieldKind::Velocity));
        fill(&mut out.velocities, vel);
        let spin = self.angular_velocities();
        fill(
            &mut out.angular_velocities,
            spin.filter(|_| want(FieldKind::AngularVelocity)),
        );
        fill(
            &mut out.forces,
            self.forces().filter(|_| want(FieldKind::Force)),
        );
        let counts = self.contact_counts();
        fill(
            &mut out.contact_counts,
            counts.filter(|_| want(FieldKind::ContactCount)),
        );
        fill(
            &mut out.densities,
            self.densities().filter(|_| want(FieldKind::Density)),
        );
        fill(
            &mut out.pressures,
            self.pressures().filter(|_| want(FieldKind::Pressure)),
        );
        fill(
            &mut out.particle_ids,
            self.particle_ids().filter(|_| want(FieldKind::ParticleId)),
        );
        fill(
            &mut out.particle_kinds,
            self.particle_kinds()
                .filter(|_| want(FieldKind::ParticleKind)),
        );
    }

    /// Copies the view into owned memory (the caller validates afterwards).
    pub fn to_frame(&self) -> Frame {
        Frame {
            meta: self.meta,
            bodies: self.bodies().to_vec(),
            positions: self.positions().map(<[_]>::to_vec),
            velocities: self.velocities().map(<[_]>::to_vec),
            angular_velocities: self.angular_velocities().map(<[_]>::to_vec),
            forces: self.forces().map(<[_]>::to_vec),
            contact_counts: self.contact_counts().map(<[_]>::to_vec),
            densities: self.densities().map(<[_]>::to_vec),
            pressures: self.pressures().map(<[_]>::to_vec),
            particle_ids: self.particle_ids().map(<[_]>::to_vec),
            particle_kinds: self.particle_kinds().map(<[_]>::to_vec),
            sample: None,
        }
    }
}

/// Copies `src` into `dst` (same length) on several threads when it is large: one thread moves
/// about 6 GB/s, a 10 M-particle frame is 360 MB or more.
fn copy_parallel<T: Copy + Send + Sync>(dst: &mut [T], src: &[T]) {
    const MIN_BYTES_PER_THREAD: usize = 4 << 20;
    let bytes = std::mem::size_of_val(src);
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8)
        .min(bytes / MIN_BYTES_PER_THREAD)
        .max(1);
    if threads == 1 {
        dst.copy_from_slice(src);
        return;
    }
    let chunk = src.len().div_ceil(threads);
    std::thread::scope(|scope| {
        for (d, s) in dst.chunks_mut(chunk).zip(src.chunks(chunk)) {
            scope.spawn(move || d.copy_from_slice(s));
        }
    });
}

/// Attempts before a copying read gives up with [`ReadError::Contended`].
pub const READ_RETRIES: u32 = 16;

/// Runs `f` on a view of the newest frame and returns its result only if the frame stayed
/// consistent throughout; retries on the then-newest frame otherwise.
pub fn with_newest<T>(
    region: &Region,
    mut f: impl FnMut(&FrameView<'_>) -> T,
) -> Result<Option<T>, ReadError> {
    for _ in 0..READ_RETRIES {
        let Some(slot) = newest_slot(region) else {
            return Ok(None);
        };
        let Some(view) = FrameView::open(region, slot)? else {
            continue;
        };
        let out = f(&view);
        if view.still_valid() {
            return Ok(Some(out));
        }
    }
    Err(ReadError::Contended(READ_RETRIES))
}

/// Copies the newest complete frame.
pub fn read_newest(region: &Region) -> Result<Option<Frame>, ReadError> {
    with_newest(region, |v| v.to_frame())
}

/// Copies the newest complete frame into `out`, reusing its buffers; `false` when there is no
/// frame yet (`out` unchanged). On an error `out` may hold a partial copy.
pub fn read_newest_into(region: &Region, out: &mut Frame) -> Result<bool, ReadError> {
    read_newest_fields_into(region, out, u32::MAX)
}

/// [`read_newest_into`] of only the fields in `fields` (see [`FrameView::copy_fields_into`]).
pub fn read_newest_fields_into(
    region: &Region,
    out: &mut Frame,
    fields: u32,
) -> Result<bool, ReadError> {
    Ok(with_newest(region, |v| v.copy_fields_into(out, fields))?.is_some())
}

/// Frame contents supplied by the writer; [`FrameWriter::commit`] publishes them.
pub struct FrameWriter<'a> {
    region: &'a Region,
    slot: u32,
    seq: u64,
    pub step: u64,
    pub sim_time: f64,
    pub dt: f64,
    pub steps_per_s: f64,
    pub static_generation: u64,
    /// Particles removed by outflow since t = 0, and their mass [kg].
    pub removed_count: u64,
    pub removed_mass: f64,
    particle_count: u64,
    fields: u32,
    body_count: u32,
    /// The publisher's next sequence number (advanced on commit) and its "a frame is being
    /// written" flag (cleared on commit or drop).
    next_seq: &'a Cell<u64>,
    writing: &'a Cell<bool>,
}

impl<'a> FrameWriter<'a> {
    /// Marks the oldest slot as being written. `next_seq` is advanced on commit. Only one frame
    /// can be in progress (`writing`): a second would pick the same slot.
    pub(crate) fn begin(
        region: &'a Region,
        next_seq: &'a Cell<u64>,
        writing: &'a Cell<bool>,
        particle_count: u64,
    ) -> Result<Self, PublishError> {
        if writing.get() {
            return Err(PublishError::FrameInProgress);
        }
        let caps = region.capacities();
        if particle_count > caps.max_particles {
            return Err(PublishError::OverCapacity {
                what: "particles",
                got: particle_count,
                capacity: caps.max_particles,
            });
        }
        let slot = match newest_slot(region) {
            Some(s) => (s + 1) % caps.slot_count,
            None => 0,
        };
        let seq = next_seq.get();
        writing.set(true);
        // SAFETY: slot header inside the region; only this process writes slots.
        unsafe {
            (*region.slot(slot))
                .lock_seq
                .store(2 * seq - 1, Ordering::Relaxed)
        };
        fence(Ordering::Release);
        Ok(Self {
            region,
            slot,
            seq,
            step: 0,
            sim_time: 0.0,
            dt: 0.0,
            steps_per_s: 0.0,
            static_generation: 0,
            removed_count: 0,
            removed_mass: 0.0,
            particle_count,
            fields: 0,
            body_count: 0,
            next_seq,
            writing,
        })
    }

    pub fn slot(&self) -> u32 {
        self.slot
    }
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Raw pointer to `field`'s array in this slot (for device-to-host copies); marks the field
    /// present. The array holds `particle_count * field.element_size()` bytes.
    pub fn field_ptr(&mut self, field: FieldKind) -> Result<*mut u8, PublishError> {
        if self.region.capacities().fields & field.bit() == 0 {
            return Err(PublishError::FieldNotReserved(field.name()));
        }
        self.fields |= field.bit();
        let plan = self.region.plan();
        Ok(self
            .region
            .at(plan.slot_offset(self.slot) + plan.slot_field_offsets[field as usize]))
    }

    /// [`FrameWriter::field_ptr`] for a field the segment reserves, `None` for one it does
    /// not (a writer that produces only the fields its readers asked for).
    pub fn field_ptr_if_reserved(&mut self, field: FieldKind) -> Option<*mut u8> {
        self.field_ptr(field).ok()
    }

    fn field_slice<T>(&mut self, field: FieldKind) -> Result<&mut [T], PublishError> {
        debug_assert_eq!(std::mem::size_of::<T>() as u64, field.element_size());
        let p = self.field_ptr(field)?;
        // SAFETY: reserved array of particle_count (<= capacity) elements, 64-byte aligned; the
        // slot is marked odd so readers discard what they see of it.
        Ok(unsafe { std::slice::from_raw_parts_mut(p as *mut T, self.particle_count as usize) })
    }

    pub fn vec3_mut(&mut self, field: FieldKind) -> Result<&mut [[f32; 3]], PublishError> {
        self.field_slice(field)
    }
    pub fn scalar_mut(&mut self, field: FieldKind) -> Result<&mut [f32], PublishError> {
        self.field_slice(field)
    }
    pub fn contact_counts_mut(&mut self) -> Result<&mut [u32], PublishError> {
        self.field_slice(FieldKind::ContactCount)
    }
    /// The frame's `particle_kind` array (0 DEM grain, 1 SPH fluid, 2 SPH boundary).
    pub fn particle_kinds_mut(&mut self) -> Result<&mut [u32], PublishError> {
        self.field_slice(FieldKind::ParticleKind)
    }
    /// The frame's `particle_id` array (runs whose particle set changes, LAYOUT.md).
    pub fn particle_ids_mut(&mut self) -> Result<&mut [u32], PublishError> {
        self.field_slice(FieldKind::ParticleId)
    }

    /// Copies `data` into `field` (length must equal the frame's particle count).
    pub fn write_vec3(&mut self, field: FieldKind, data: &[[f32; 3]]) -> Result<(), PublishError> {
        let dst = self.vec3_mut(field)?;
        if dst.len() != data.len() {
            return Err(PublishError::OverCapacity {
                what: field.name(),
                got: data.len() as u64,
                capacity: dst.len() as u64,
            });
        }
        dst.copy_from_slice(data);
        Ok(())
    }

    pub fn set_bodies(&mut self, bodies: &[BodyTransform]) -> Result<(), PublishError> {
        let cap = self.region.capacities().max_bodies;
        if bodies.len() as u64 > cap as u64 {
            return Err(PublishError::OverCapacity {
                what: "bodies",
                got: bodies.len() as u64,
                capacity: cap as u64,
            });
        }
        let plan = self.region.plan();
        let dst = self
            .region
            .at(plan.slot_offset(self.slot) + plan.slot_bodies_offset)
            as *mut BodyTransform;
        // SAFETY: within the slot's body array (count checked above).
        unsafe { std::ptr::copy_nonoverlapping(bodies.as_ptr(), dst, bodies.len()) };
        self.body_count = bodies.len() as u32;
        Ok(())
    }

    /// Completes the slot and makes it the newest frame, then wakes waiting readers.
    pub fn commit(self) -> FrameMeta {
        let p = self.region.slot(self.slot);
        let now_mono = sys::monotonic_ns();
        // SAFETY: slot header inside the region, written only by this process; still odd.
        unsafe {
            std::ptr::write_volatile(&mut (*p).frame_seq, self.seq);
            std::ptr::write_volatile(&mut (*p).step, self.step);
            std::ptr::write_volatile(&mut (*p).sim_time, self.sim_time);
            std::ptr::write_volatile(&mut (*p).dt, self.dt);
            std::ptr::write_volatile(&mut (*p).wall_unix_ns, sys::unix_ns());
            std::ptr::write_volatile(&mut (*p).publish_mono_ns, now_mono);
            std::ptr::write_volatile(&mut (*p).particle_count, self.particle_count);
            std::ptr::write_volatile(&mut (*p).fields, self.fields);
            std::ptr::write_volatile(&mut (*p).body_count, self.body_count);
            std::ptr::write_volatile(&mut (*p).static_generation, self.static_generation);
            std::ptr::write_volatile(&mut (*p).steps_per_s, self.steps_per_s);
            std::ptr::write_volatile(&mut (*p).removed_count, self.removed_count);
            std::ptr::write_volatile(&mut (*p).removed_mass, self.removed_mass);
            (*p).lock_seq.store(2 * self.seq, Ordering::Release);
        }
        let h = self.region.header();
        h.newest_slot.store(self.slot, Ordering::Release);
        h.newest_seq.store(self.seq, Ordering::SeqCst);
        self.next_seq.set(self.seq + 1);
        crate::notify::wake_frame(h);
        slot_meta(self.region, self.slot)
            .map(|(_, m)| m)
            .unwrap_or_default()
    }
}

impl Drop for FrameWriter<'_> {
    /// Ends the frame in progress, committed or not: an abandoned frame leaves its slot odd
    /// (readers skip it) and the next frame reuses the slot.
    fn drop(&mut self) {
        self.writing.set(false);
    }
}

#[cfg(test)]
mod copy_tests {
    #[test]
    fn parallel_copy_of_a_large_array_is_exact() {
        // 24 MB: split over several threads where the machine has them.
        let src: Vec<[f32; 3]> = (0..2_000_000u32)
            .map(|i| [i as f32, -(i as f32), 0.5 * i as f32])
            .collect();
        let mut dst = vec![[0.0f32; 3]; src.len()];
        super::copy_parallel(&mut dst, &src);
        assert!(dst == src);
        let mut small = vec![0u32; 3];
        super::copy_parallel(&mut small, &[1, 2, 3]);
        assert_eq!(small, [1, 2, 3]);
    }
}
