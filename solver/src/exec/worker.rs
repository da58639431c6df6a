//! What a worker is: the interfaces the coordinator ([`crate::exec::coordinator`]) drives, and the
//! portable data they exchange with it.
//!
//! A worker owns one sub-domain's particles on one device. A [`StagedWorker`] exposes each stage
//! of the step, so the coordinator can exchange migrants and ghosts between its stages: the CPU
//! worker, any number per run. A [`FusedWorker`] runs whole steps by itself (all stages queued on
//! one device stream per batch, no synchronisation per step): the CUDA worker, one per run until
//! the multi-GPU work gives it stages.

use super::stages::StageTimers;
use crate::core::geometry::BodyTransform;
use crate::core::vec3::V3;
use crate::dem::state::SimState;

/// Per-particle kinematics in id order (f64).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Snapshot {
    pub pos: Vec<V3>,
    pub vel: Vec<V3>,
    pub omega: Vec<V3>,
    pub force: Vec<V3>,
    pub contacts: Vec<u32>,
}

impl From<SimState> for Snapshot {
    fn from(s: SimState) -> Snapshot {
        Snapshot {
            pos: s.pos,
            vel: s.vel,
            omega: s.omega,
            force: s.force,
            contacts: s.contacts,
        }
    }
}

/// Energies of the system [J].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Energies {
    pub kinetic_translation: f64,
    pub kinetic_rotation: f64,
    /// -sum m g . x
    pub potential: f64,
    /// Elastic energy stored in all contacts (normal + tangential springs).
    pub elastic: f64,
}

impl Energies {
    pub fn total(&self) -> f64 {
        self.kinetic_translation + self.kinetic_rotation + self.potential + self.elastic
    }
}

/// Counters a user may want to see.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BackendStats {
    /// Contacts whose tangential spring could not be stored (history full), summed over steps.
    pub history_overflows: u64,
    /// Contacts in the last step (each particle pair counted twice, walls once).
    pub contacts: u64,
}

/// Why a step failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StepError {
    #[error("particle {id} has a non-finite position or velocity after step {step} (t = {time} s); the time step is probably too large")]
    NonFinite { id: u32, step: u64, time: f64 },
    /// The device (GPU) failed: a driver error, or a limit of the device backend was hit.
    #[error("{backend} backend failed at step {step}: {message}")]
    Device {
        backend: &'static str,
        step: u64,
        message: String,
    },
}

/// Destination of [`FusedWorker::begin_kinematics_copy`] and [`StagedWorker::pack`]: arrays of the particle count, id order,
/// f32 (a frame slot's); null pointers are not written.
#[derive(Debug, Clone, Copy)]
pub struct RawKinematics {
    /// Elements of each array (the particle count).
    pub count: usize,
    pub positions: *mut [f32; 3],
    pub velocities: *mut [f32; 3],
    pub angular_velocities: *mut [f32; 3],
    /// Contact force of the last step [N].
    pub forces: *mut [f32; 3],
    /// Contacts of the last step.
    pub contact_counts: *mut u32,
}

impl RawKinematics {
    /// No destination: what ranks other than 0 pass to a collective frame copy.
    pub fn none(count: usize) -> RawKinematics {
        RawKinematics {
            count,
            positions: std::ptr::null_mut(),
            velocities: std::ptr::null_mut(),
            angular_velocities: std::ptr::null_mut(),
            forces: std::ptr::null_mut(),
            contact_counts: std::ptr::null_mut(),
        }
    }
}

/// A 3-vector as a frame stores it (f32): the workers' f64 vectors, or a GPU rank's frame part,
/// which arrives in f32 already.
pub trait FrameVec: Copy + Sync {
    fn frame_f32(self) -> [f32; 3];
}

impl FrameVec for V3 {
    #[inline]
    fn frame_f32(self) -> [f32; 3] {
        crate::core::vec3::to_f32(self)
    }
}

impl FrameVec for [f32; 3] {
    #[inline]
    fn frame_f32(self) -> [f32; 3] {
        self
    }
}

/// Owned particles' kinematics as slices of equal length (the first `ids.len()` elements of
/// each are used), to be written into a frame.
#[derive(Debug, Clone, Copy)]
pub struct KinematicsSlices<'a, T: FrameVec = V3> {
    pub ids: &'a [u32],
    pub pos: &'a [T],
    pub vel: &'a [T],
    pub omega: &'a [T],
    pub force: &'a [T],
    pub contacts: &'a [u32],
}

/// Writes `k` into the id-ordered f32 arrays of `out` (element `index.of(id)`), in parallel;
/// null pointers are skipped.
///
/// # Safety
/// As [`StagedWorker::pack`]: each non-null pointer of `out` points to `out.count` writable
/// elements, `index` holds every id of `k`, and no other writer touches those ids' elements.
pub unsafe fn pack_kinematics<T: FrameVec>(
    k: KinematicsSlices<'_, T>,
    index: &IdIndex,
    out: &RawKinematics,
) {
    use rayon::prelude::*;
    // Raw pointers are not Send: pass the addresses.
    let addr = |x: *mut [f32; 3]| x as usize;
    let (pos, vel, omega, force) = (
        addr(out.positions),
        addr(out.velocities),
        addr(out.angular_velocities),
        addr(out.forces),
    );
    let counts = out.contact_counts as usize;
    let count = out.count;
    (0..k.ids.len()).into_par_iter().for_each(|i| {
        let slot = index.of(k.ids[i]);
        assert!(slot < count, "particle id {} beyond the frame", k.ids[i]);
        let put = |dst: usize, v: &[T]| {
            if dst != 0 {
                // SAFETY: the caller guarantees `count` writable elements at each non-null
                // pointer; slot < count, and ids are unique, so no other thread writes it.
                unsafe { *(dst as *mut [f32; 3]).add(slot) = v[i].frame_f32() };
            }
        };
        put(pos, k.pos);
        put(vel, k.vel);
        put(omega, k.omega);
        put(force, k.force);
        if counts != 0 {
            // SAFETY: as above.
            unsafe { *(counts as *mut u32).add(slot) = k.contacts[i] };
        }
    });
}

/// The integration a [`StagedWorker::integrate`] call performs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Symplectic Euler: v += a dt, x += v dt, w += alpha dt.
    Euler,
    /// Velocity Verlet's first half: v += a dt/2, w += alpha dt/2, x += v dt.
    KickDrift,
    /// Velocity Verlet's second half kick with the new forces.
    Kick,
}

/// Dense index of particle ids: ids are not storage slots, but frames and states are in id
/// order, so every worker writes its particles at `index.of(id)`.
#[derive(Debug, Clone, PartialEq)]
pub enum IdIndex {
    /// Ids are exactly 0..n.
    Dense(usize),
    /// Strictly ascending ids with gaps.
    Sorted(Vec<u32>),
}

impl IdIndex {
    pub fn new(ids: &[u32]) -> IdIndex {
        if ids.iter().enumerate().all(|(k, &id)| id as usize == k) {
            IdIndex::Dense(ids.len())
        } else {
            IdIndex::Sorted(ids.to_vec())
        }
    }

    pub fn len(&self) -> usize {
        match self {
            IdIndex::Dense(n) => *n,
            IdIndex::Sorted(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Position of `id` in id order.
    #[inline]
    pub fn of(&self, id: u32) -> usize {
        match self {
            IdIndex::Dense(_) => id as usize,
            IdIndex::Sorted(v) => v
                .binary_search(&id)
                .unwrap_or_else(|_| panic!("particle id {id} is not in the run's id index")),
        }
    }

    /// The ids in order.
    pub fn ids(&self) -> Vec<u32> {
        match self {
            IdIndex::Dense(n) => (0..*n as u32).collect(),
            IdIndex::Sorted(v) => v.clone(),
        }
    }
}

/// A worker whose stages the coordinator drives one by one. Messages (`Msg`) are the method's
/// particle batches.
pub trait StagedWorker: Send + Sync {
    type Msg: Send;
    fn name(&self) -> &'static str;
    /// The largest stable time step of this worker's particles [s].
    fn stable_dt(&self) -> f64;
    /// Owned particles.
    fn owned(&self) -> usize;
    /// Stage `prepare` before step `step` at time `t`.
    fn prepare(&mut self, step: u64, t: f64);
    /// Stage `forces` with time step `dt`.
    fn forces(&mut self, dt: f64);
    /// Stage `integrate`.
    fn integrate(&mut self, phase: Phase, dt: f64);
    /// Exchange, part 1: removes the owned particles that left the slab and returns them, with
    /// their full state, as (new owner, batch).
    fn emigrate(&mut self) -> Vec<(usize, Self::Msg)>;
    /// Exchange, part 2: takes ownership of arriving particles (migrants, or particles an
    /// inflow source adds).
    fn immigrate(&mut self, inbox: Vec<Self::Msg>);
    /// Takes ownership of particles an inflow source adds (full state), dropping the ghosts
    /// first (the exchange after it refreshes them).
    fn adopt(&mut self, batch: Self::Msg);
    /// Stage `outflow`: removes the owned particles whose centre `doomed` selects and returns
    /// their (id, species). Drops the ghosts when it removes any (the exchange after it
    /// refreshes them).
    fn remove(&mut self, doomed: &(dyn Fn(V3) -> bool + Sync)) -> Vec<(u32, u32)>;
    /// Exchange, part 3: the boundary layers the neighbours need as ghosts, as (worker, batch).
    fn halo(&self) -> Vec<(usize, Self::Msg)>;
    /// Exchange, part 4: replaces the ghosts.
    fn set_ghosts(&mut self, inbox: Vec<Self::Msg>);
    /// Takes a new plan (moved slab bounds, from load balancing): the next exchange moves the
    /// particles whose layer changed owner.
    fn set_plan(&mut self, plan: std::sync::Arc<crate::decomp::Plan>);
    /// Owned particles per cell layer along the plan's axis, as (layer, count), ascending.
    fn layer_counts(&self) -> Vec<(u32, u64)>;
    /// Stage `reduce`: the lowest id of an owned particle with a non-finite state, if any.
    fn first_nonfinite(&self) -> Option<u32>;
    /// Every owned particle with its full state (storage order).
    fn export(&self) -> Self::Msg;
    /// Every owned particle's id, position, velocity, spin, last force and contact count
    /// (storage order): what a snapshot needs, without the history.
    fn kinematics(&self) -> Self::Msg;
    /// Writes the owned particles' kinematics into the id-ordered arrays of `out`.
    ///
    /// # Safety
    /// As [`FusedWorker::begin_kinematics_copy`]; `index` must hold every owned id, and no other
    /// writer may touch the same ids' elements meanwhile.
    unsafe fn pack(&self, index: &IdIndex, out: &RawKinematics);
    /// Per-particle energies of the owned particles at time `t`, as (id, energies).
    fn energies(&self, t: f64) -> Vec<(u32, Energies)>;
    /// History overflows since this worker started, and contacts of the last step.
    fn stats(&self) -> BackendStats;
    fn timers(&self) -> StageTimers;
    fn reset_timers(&mut self);
    fn mesh_transforms(&self) -> Vec<BodyTransform>;
}

/// A worker that runs whole steps by itself (one per run).
pub trait FusedWorker: Send {
    /// Short name ("cuda").
    fn name(&self) -> &'static str;
    /// The largest stable time step [s].
    fn stable_dt(&self) -> f64;
    /// Advances `n_steps` time steps.
    fn advance(&mut self, n_steps: u64) -> Result<(), StepError>;
    /// Simulated time [s] the worker has reached (its clock must agree with the coordinator's).
    fn time(&self) -> f64;
    /// Per-particle kinematics in id order (device backends download it: a driver error is
    /// returned, not a panic).
    fn snapshot(&self) -> Result<Snapshot, StepError>;
    /// The full state, including contact history, in id order.
    fn export_state(&self) -> Result<SimState, StepError>;
    /// Current transform of each mesh.
    fn mesh_transforms(&self) -> Vec<BodyTransform>;
    /// Per-stage wall-clock timers since the last reset.
    fn timers(&self) -> StageTimers;
    fn reset_timers(&mut self);
    fn stats(&self) -> Result<BackendStats, StepError>;
    /// Energies at the current state (`&mut`: a device backend runs a neighbour search of its
    /// own into scratch buffers; the state is not changed).
    fn energies(&mut self) -> Result<Energies, StepError>;
    /// One line about the compute device (name, memory in use per particle), if any.
    fn device_report(&self) -> Option<String> {
        None
    }
    /// Particles owned by each device (several GPUs: one entry per slab).
    fn loads(&self) -> Vec<usize> {
        Vec::new()
    }
    /// Load-balancing moves of the slab bounds since the start (several GPUs).
    fn rebalances(&self) -> u64 {
        0
    }
    /// Particles removed by outflow regions since the last call, as (id, species, step after
    /// which it left), in (step, id) order.
    fn take_removed(&mut self) -> Result<Vec<(u32, u32, u64)>, StepError> {
        Ok(Vec::new())
    }
    /// Advances `n` steps, stopping velocity Verlet's last one after its drift and outflow,
    /// where inflow particles are placed ([`FusedWorker::finish_step`] completes it).
    fn advance_to_placement(&mut self, n: u64) -> Result<(), StepError> {
        self.advance(n)
    }
    /// Completes the step [`FusedWorker::advance_to_placement`] stopped.
    fn finish_step(&mut self) -> Result<(), StepError> {
        Ok(())
    }
    /// Takes the particles an inflow source adds (at rest spin, no forces, no history).
    fn adopt(&mut self, new: &[super::inflow::NewParticle]) -> Result<(), StepError> {
        let _ = new;
        Err(StepError::Device {
            backend: self.name(),
            step: 0,
            message: "this worker cannot add particles".into(),
        })
    }
    /// Positions of the live particles (any order): where an inflow source must not overlap.
    fn positions(&self) -> Result<Vec<V3>, StepError> {
        Ok(self.export_state()?.pos)
    }
    /// Page-locks host memory that frames will be copied into, so device copies run
    /// asynchronously at full bus speed (device backends; nothing to do on the CPU).
    ///
    /// # Safety
    /// `ptr..ptr + len` must stay mapped until [`FusedWorker::release_host_memory`] or drop.
    unsafe fn register_host_memory(&mut self, _ptr: *mut u8, _len: usize) -> Result<(), StepError> {
        Ok(())
    }
    /// Undoes [`FusedWorker::register_host_memory`].
    fn release_host_memory(&mut self) {}
    /// Starts copying the current f32 kinematics, last contact forces and contact counts into
    /// `out`. Returns `true` when the copy is
    /// still in flight (device backends: poll [`FusedWorker::kinematics_copy_done`] between steps,
    /// stepping on meanwhile), `false` when it is complete already (the CPU).
    ///
    /// # Safety
    /// Each non-null pointer of `out` must point to particle-count writable elements that stay
    /// valid and untouched until the copy is complete.
    unsafe fn begin_kinematics_copy(&mut self, out: RawKinematics) -> Result<bool, StepError> {
        let n = out.count;
        let s = self.snapshot()?;
        let conv = |dst: *mut [f32; 3], src: &[V3]| {
            if !dst.is_null() {
                // SAFETY: the caller guarantees n writable elements at each non-null pointer.
                let dst = unsafe { std::slice::from_raw_parts_mut(dst, n) };
                for (d, v) in dst.iter_mut().zip(src) {
                    *d = crate::core::vec3::to_f32(*v);
                }
            }
        };
        conv(out.positions, &s.pos);
        conv(out.velocities, &s.vel);
        conv(out.angular_velocities, &s.omega);
        conv(out.forces, &s.force);
        if !out.contact_counts.is_null() {
            // SAFETY: as above, n writable counts.
            let c = unsafe { std::slice::from_raw_parts_mut(out.contact_counts, n) };
            c.copy_from_slice(&s.contacts[..n]);
        }
        Ok(false)
    }
    /// Whether the copy started by [`FusedWorker::begin_kinematics_copy`] completed (`true` once
    /// per copy on device backends).
    fn kinematics_copy_done(&mut self) -> Result<bool, StepError> {
        Ok(true)
    }
    /// Waits for the copy in flight, if any.
    fn wait_kinematics_copy(&mut self) -> Result<(), StepError> {
        Ok(())
    }
}
