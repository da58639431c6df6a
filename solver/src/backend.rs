//! The `Backend` trait a compute backend implements (CPU reference now, CUDA later), and the
//! portable data it exchanges with [`crate::sim::Simulation`].

use crate::case::{Integrator, MaterialTable};
use crate::geometry::{BodyTransform, Mesh};
use crate::physics::ContactModel;
use crate::vec3::V3;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Contact history slots per particle. 16 covers the 12 neighbours of the densest packing of
/// equal spheres plus walls; further contacts are still computed but lose their tangential spring
/// between steps, and are counted in [`BackendStats::history_overflows`].
pub const HISTORY_CAP: usize = 16;

/// Key of an unused history slot.
pub const KEY_NONE: u64 = u64::MAX;
/// Partner kind bits of a history key: a particle (`id`), a box wall (`WALL | wall`) or a mesh
/// triangle (`MESH | mesh << 32 | triangle`).
pub const KEY_WALL: u64 = 1 << 62;
pub const KEY_MESH: u64 = 2 << 62;
pub const KEY_KIND: u64 = 3 << 62;

/// One contact-history slot: the partner key and the tangential spring.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HistEntry {
    pub key: u64,
    pub xi: V3,
}

impl HistEntry {
    pub const NONE: HistEntry = HistEntry {
        key: KEY_NONE,
        xi: [0.0; 3],
    };
}

/// Constant inputs of a run, derived from the case by [`crate::sim::Simulation`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepContext {
    pub dt: f64,
    pub gravity: V3,
    pub model: ContactModel,
    pub integrator: Integrator,
    pub reorder_every: u32,
    pub domain_min: V3,
    pub domain_max: V3,
    pub walls: bool,
    /// Per species: radius [m], mass [kg], moment of inertia [kg m^2].
    pub species_radius: Vec<f64>,
    pub species_mass: Vec<f64>,
    pub species_inertia: Vec<f64>,
    pub table: MaterialTable,
    pub meshes: Vec<Mesh>,
}

/// Full simulation state in particle-id order: what a checkpoint stores and what any backend can
/// import and export.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimState {
    pub time: f64,
    pub step: u64,
    pub species: Vec<u32>,
    pub pos: Vec<V3>,
    pub vel: Vec<V3>,
    pub omega: Vec<V3>,
    /// Contact force and torque of the last step (velocity Verlet needs them).
    pub force: Vec<V3>,
    pub torque: Vec<V3>,
    /// Whether `force`/`torque` belong to the current positions.
    pub forces_valid: bool,
    pub contacts: Vec<u32>,
    /// `HISTORY_CAP` slots per particle.
    pub history: Vec<HistEntry>,
    pub history_overflows: u64,
}

impl SimState {
    /// A state at rest-history: given kinematics, no contact history, no forces.
    pub fn new(
        time: f64,
        step: u64,
        species: Vec<u32>,
        pos: Vec<V3>,
        vel: Vec<V3>,
        omega: Vec<V3>,
    ) -> Self {
        let n = pos.len();
        SimState {
            time,
            step,
            species,
            pos,
            vel,
            omega,
            force: vec![[0.0; 3]; n],
            torque: vec![[0.0; 3]; n],
            forces_valid: false,
            contacts: vec![0; n],
            history: vec![HistEntry::NONE; n * HISTORY_CAP],
            history_overflows: 0,
        }
    }
}

/// Per-particle kinematics in id order (f64).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Snapshot {
    pub pos: Vec<V3>,
    pub vel: Vec<V3>,
    pub omega: Vec<V3>,
    pub force: Vec<V3>,
    pub contacts: Vec<u32>,
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

/// Wall-clock time spent in each stage of the step pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct StageTimers {
    /// Cell hash, sort, cell start, mesh placement and binning, periodic reorder.
    pub prepare: Duration,
    /// Contact detection and forces.
    pub collide: Duration,
    /// Time integration.
    pub integrate: Duration,
    pub steps: u64,
}

impl std::fmt::Display for StageTimers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.steps.max(1) as f64;
        let ms = |d: Duration| d.as_secs_f64() * 1e3 / n;
        write!(
            f,
            "{} steps, per step: prepare {:.3} ms, collide {:.3} ms, integrate {:.3} ms",
            self.steps,
            ms(self.prepare),
            ms(self.collide),
            ms(self.integrate)
        )
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

/// Destination of [`Backend::begin_kinematics_copy`]: arrays of the particle count, id order,
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

/// A compute backend: owns the particle state and advances it.
pub trait Backend: Send {
    /// Short name ("cpu", "cuda").
    fn name(&self) -> &'static str;
    /// Advances `n_steps` time steps.
    fn step(&mut self, n_steps: u64) -> Result<(), StepError>;
    /// Simulated time [s].
    fn time(&self) -> f64;
    /// Number of steps done since t = 0.
    fn step_index(&self) -> u64;
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
    /// Energies at the current state.
    fn energies(&self) -> Result<Energies, StepError>;
    /// One line about the compute device (name, memory in use per particle), if any.
    fn device_report(&self) -> Option<String> {
        None
    }
    /// Page-locks host memory that frames will be copied into, so device copies run
    /// asynchronously at full bus speed (device backends; nothing to do on the CPU).
    ///
    /// # Safety
    /// `ptr..ptr + len` must stay mapped until [`Backend::release_host_memory`] or drop.
    unsafe fn register_host_memory(&mut self, _ptr: *mut u8, _len: usize) -> Result<(), StepError> {
        Ok(())
    }
    /// Undoes [`Backend::register_host_memory`].
    fn release_host_memory(&mut self) {}
    /// Starts copying the current f32 kinematics, last contact forces and contact counts into
    /// `out`. Returns `true` when the copy is
    /// still in flight (device backends: poll [`Backend::kinematics_copy_done`] between steps,
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
                    *d = crate::vec3::to_f32(*v);
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
    /// Whether the copy started by [`Backend::begin_kinematics_copy`] completed (`true` once
    /// per copy on device backends).
    fn kinematics_copy_done(&mut self) -> Result<bool, StepError> {
        Ok(true)
    }
    /// Waits for the copy in flight, if any.
    fn wait_kinematics_copy(&mut self) -> Result<(), StepError> {
        Ok(())
    }
}
