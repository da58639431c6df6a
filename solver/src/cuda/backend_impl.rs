//! The CUDA backend behind the library's [`Backend`] trait, so that `sim::Simulation` and the
//! validation scenarios can run on it like on the CPU reference.

use std::sync::Arc;
use std::time::Duration;

use super::{CudaError, CudaOptions, CudaSim};
use crate::backend::{
    Backend, BackendStats, Energies, RawKinematics, SimState, Snapshot, StageTimers, StepContext,
    StepError,
};
use crate::cpu::CpuBackend;
use crate::geometry::BodyTransform;

/// [`CudaSim`] as a [`Backend`]. Forces and contact counts are stored (for snapshots), and
/// contacts are counted every step (for [`Backend::stats`]).
pub struct CudaBackend {
    sim: CudaSim,
    ctx: Arc<StepContext>,
    /// The frame memory registered with the driver (the shared-memory segment).
    host: Option<super::HostRegistration>,
}

impl CudaBackend {
    /// Same inputs as `CpuBackend::new`, plus the device options.
    pub fn new(
        ctx: Arc<StepContext>,
        state: SimState,
        opts: &CudaOptions,
    ) -> Result<Self, CudaError> {
        let opts = CudaOptions {
            store_forces: true,
            ..opts.clone()
        };
        let sim = CudaSim::new(&ctx, &state, &opts)?;
        Ok(CudaBackend {
            sim,
            ctx,
            host: None,
        })
    }

    pub fn sim(&self) -> &CudaSim {
        &self.sim
    }
    pub fn sim_mut(&mut self) -> &mut CudaSim {
        &mut self.sim
    }

    fn device_failure(&self, e: CudaError) -> StepError {
        match e {
            CudaError::NonFinite { .. } => {
                let s = self.sim.state();
                let id = s
                    .ok()
                    .and_then(|s| {
                        (0..s.pos.len()).find(|&i| {
                            !(crate::vec3::is_finite(s.pos[i]) && crate::vec3::is_finite(s.vel[i]))
                        })
                    })
                    .unwrap_or(0) as u32;
                StepError::NonFinite {
                    id,
                    step: self.sim.step_index(),
                    time: self.sim.time(),
                }
            }
            other => StepError::Device {
                backend: "cuda",
                step: self.sim.step_index(),
                message: other.to_string(),
            },
        }
    }
}

impl Backend for CudaBackend {
    fn name(&self) -> &'static str {
        "cuda"
    }

    /// Queues the steps and checks the device diagnostics (non-finite state, history overflow)
    /// once at the end: one synchronisation per call, so callers step in batches.
    fn step(&mut self, n_steps: u64) -> Result<(), StepError> {
        self.sim
            .steps(n_steps)
            .and_then(|()| self.sim.check_diag())
            .map_err(|e| self.device_failure(e))
    }

    fn time(&self) -> f64 {
        self.sim.time()
    }

    fn step_index(&self) -> u64 {
        self.sim.step_index()
    }

    fn snapshot(&self) -> Result<Snapshot, StepError> {
        let s = self.export_state()?;
        Ok(Snapshot {
            pos: s.pos,
            vel: s.vel,
            omega: s.omega,
            force: s.force,
            contacts: s.contacts,
        })
    }

    fn export_state(&self) -> Result<SimState, StepError> {
        self.sim.state().map_err(|e| self.device_failure(e))
    }

    fn mesh_transforms(&self) -> Vec<BodyTransform> {
        self.sim.mesh_transforms()
    }

    fn timers(&self) -> StageTimers {
        let t = self.sim.stage_times();
        let ms = |names: &[&str]| -> Duration {
            Duration::from_secs_f64(
                t.kernels
                    .iter()
                    .filter(|k| names.contains(&k.0))
                    .map(|k| k.1)
                    .sum::<f64>()
                    * 1e-3,
            )
        };
        StageTimers {
            prepare: ms(&["hash_count", "scan", "scatter", "cell_sort", "gather"]),
            collide: ms(&["collide"]),
            integrate: ms(&["kick_drift"]),
            steps: t.steps,
        }
    }

    fn reset_timers(&mut self) {
        self.sim.reset_stage_times();
    }

    /// Contacts of the last step are summed from the per-particle counts (downloads the state:
    /// for diagnostics, not for every step).
    fn stats(&self) -> Result<BackendStats, StepError> {
        Ok(BackendStats {
            history_overflows: self.sim.history_overflows(),
            contacts: self
                .export_state()?
                .contacts
                .iter()
                .map(|&c| c as u64)
                .sum(),
        })
    }

    unsafe fn register_host_memory(&mut self, ptr: *mut u8, len: usize) -> Result<(), StepError> {
        self.host = None;
        // SAFETY: the caller keeps the range mapped until release_host_memory or drop.
        let reg = unsafe { self.sim.register_host(ptr, len) };
        self.host = Some(reg.map_err(|e| self.device_failure(e))?);
        Ok(())
    }

    fn release_host_memory(&mut self) {
        let _ = self.sim.publish_wait();
        self.host = None;
    }

    unsafe fn begin_kinematics_copy(&mut self, out: RawKinematics) -> Result<bool, StepError> {
        let target = super::FrameTarget {
            positions: out.positions,
            velocities: out.velocities,
            angular_velocities: out.angular_velocities,
            forces: out.forces,
            contact_counts: out.contact_counts,
        };
        // SAFETY: the caller keeps the arrays valid and untouched until the copy completed.
        unsafe { self.sim.publish_async(target) }.map_err(|e| self.device_failure(e))?;
        Ok(true)
    }

    fn kinematics_copy_done(&mut self) -> Result<bool, StepError> {
        self.sim
            .publish_done()
            .map(|t| t.is_some())
            .map_err(|e| self.device_failure(e))
    }

    fn wait_kinematics_copy(&mut self) -> Result<(), StepError> {
        self.sim
            .publish_wait()
            .map(|_| ())
            .map_err(|e| self.device_failure(e))
    }

    fn device_report(&self) -> Option<String> {
        let m = self.sim.memory();
        Some(format!(
            "CUDA device {}: {} particles, {:.2} GiB of GPU memory ({:.0} B/particle), kernels compiled in {:.2} s",
            self.sim.device_name(),
            self.sim.particle_count(),
            m.total() as f64 / (1u64 << 30) as f64,
            m.bytes_per_particle(),
            self.sim.compile_seconds()
        ))
    }

    /// Computed on the host by the CPU reference's bookkeeping over the downloaded state.
    fn energies(&self) -> Result<Energies, StepError> {
        CpuBackend::new(self.ctx.clone(), self.export_state()?).energies()
    }
}
