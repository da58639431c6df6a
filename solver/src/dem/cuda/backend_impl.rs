//! The CUDA backend as a [`FusedWorker`]: one GPU running whole steps, so that
//! `exec::sim::Simulation` and the validation scenarios can run on it like on the CPU reference.

use std::sync::Arc;
use std::time::Duration;

use super::{CudaError, CudaOptions, CudaSim};
use crate::core::geometry::BodyTransform;
use crate::decomp::Decomposition;
use crate::dem::state::{SimState, StepContext};
use crate::exec::coordinator::Coordinator;
use crate::exec::stages::{Stage, StageTimers};
use crate::exec::worker::{
    BackendStats, Energies, FusedWorker, RawKinematics, Snapshot, StepError,
};

/// [`CudaSim`] as a [`FusedWorker`]. Forces and contact counts are stored (for snapshots), and
/// contacts are counted every step (for [`FusedWorker::stats`]).
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
        let sim = if ctx.outflows.is_empty() && opts.inflow_room == 0 {
            CudaSim::new(&ctx, &state, &opts)?
        } else {
            // Frames index live ids by rank: ids may have gaps (a restart after removals), and
            // slots are reserved for the particles inflow sources will add.
            let spin = state.omega.iter().any(|w| *w != [0.0; 3]);
            let capacity = state.pos.len() + opts.inflow_room;
            let mut sim = CudaSim::with_capacity(&ctx, &state, &opts, capacity, spin, 0.0)?;
            sim.set_outflows(&ctx.outflows, &state.id, opts.id_limit, capacity)?;
            sim
        };
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
        super::step_error(
            e,
            || self.sim.state(),
            self.sim.step_index(),
            self.sim.time(),
        )
    }
}

impl FusedWorker for CudaBackend {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn stable_dt(&self) -> f64 {
        self.ctx.dt
    }

    /// Queues the steps and checks the device diagnostics (non-finite state, history overflow)
    /// once at the end: one synchronisation per call, so callers step in batches.
    fn advance(&mut self, n_steps: u64) -> Result<(), StepError> {
        self.sim
            .steps(n_steps)
            .and_then(|()| self.sim.check_diag())
            .map_err(|e| self.device_failure(e))
    }

    fn time(&self) -> f64 {
        self.sim.time()
    }

    fn snapshot(&self) -> Result<Snapshot, StepError> {
        Ok(self.export_state()?.into())
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
        let mut timers = StageTimers {
            steps: t.steps,
            ..Default::default()
        };
        timers.add(
            Stage::Prepare,
            ms(&[
                "hash_count",
                "scan",
                "scatter",
                "cell_sort",
                "gather",
                "neighbours",
            ]),
        );
        // The collide kernel integrates too (fused): its time is reported under `forces`.
        timers.add(Stage::Forces, ms(&["mesh_filter", "collide"]));
        timers.add(Stage::Integrate, ms(&["kick_drift"]));
        timers
    }

    fn reset_timers(&mut self) {
        self.sim.reset_stage_times();
    }

    /// Contacts of the last step are summed from the per-particle counts the collide stores
    /// (ids and counts come back, 8 bytes a particle, not the whole state).
    fn stats(&self) -> Result<BackendStats, StepError> {
        let contacts = match self.sim.last_step_contacts() {
            Ok(Some(c)) => c,
            Ok(None) => self
                .export_state()?
                .contacts
                .iter()
                .map(|&c| c as u64)
                .sum(),
            Err(e) => return Err(self.device_failure(e)),
        };
        Ok(BackendStats {
            history_overflows: self.sim.history_overflows(),
            contacts,
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

    fn take_removed(&mut self) -> Result<Vec<(u32, u32, u64)>, StepError> {
        self.sim.take_removed().map_err(|e| self.device_failure(e))
    }

    fn advance_to_placement(&mut self, n_steps: u64) -> Result<(), StepError> {
        self.sim
            .steps_to_placement(n_steps)
            .and_then(|()| self.sim.check_diag())
            .map_err(|e| self.device_failure(e))
    }

    fn finish_step(&mut self) -> Result<(), StepError> {
        self.sim.finish_step().map_err(|e| self.device_failure(e))
    }

    fn adopt(&mut self, new: &[crate::exec::inflow::NewParticle]) -> Result<(), StepError> {
        self.sim.adopt(new).map_err(|e| self.device_failure(e))
    }

    fn positions(&self) -> Result<Vec<crate::core::vec3::V3>, StepError> {
        self.sim
            .live_positions()
            .map_err(|e| self.device_failure(e))
    }

    fn device_report(&self) -> Option<String> {
        let m = self.sim.memory();
        let (live, slots) = (self.sim.live_count(), self.sim.slots());
        // A run with inflow reserves slots for the particles it will add: memory is per slot.
        let room = if slots > live {
            format!(" (room for {slots})")
        } else {
            String::new()
        };
        // The slower layouts are chosen only when the fast one does not fit (or asked for): say
        // so.
        let history = format!(
            "{}{}",
            if self.sim.history_pairs() {
                let (rows, spill) = self.sim.history_rows();
                let owner = if self.sim.module_config().owner_keys {
                    ", kept by the particle above"
                } else {
                    ""
                };
                if spill > 0 {
                    format!(
                        ", each pair's contact history once{owner} in rows of {rows} (and spill rows of {spill})"
                    )
                } else {
                    format!(", each pair's contact history once in rows of {rows}")
                }
            } else if self.sim.history_in_place() {
                ", contact history in place".to_string()
            } else {
                String::new()
            },
            if self.sim.module_config().single_copy {
                ", one copy of the state"
            } else {
                ""
            }
        );
        // The skin changes the order of the force sums (last bits) against a search every step.
        let skin = match self.sim.skin_width() {
            w if w > 0.0 => format!(
                ", Verlet skin {:.3} mm{}",
                w * 1e3,
                if self.sim.has_neighbour_list() {
                    " with lists"
                } else {
                    ""
                }
            ),
            _ => String::new(),
        };
        Some(format!(
            "CUDA device {}: {live} particles{room}, {:.2} GiB of GPU memory ({:.0} B/particle{history}{skin}), {}",
            self.sim.device_name(),
            m.total() as f64 / (1u64 << 30) as f64,
            m.bytes_per_particle(),
            self.sim.module_timing().describe()
        ))
    }

    /// Computed on the device (`energies.rs`): the CPU reference's bookkeeping, no download.
    fn energies(&mut self) -> Result<Energies, StepError> {
        self.sim.energies().map_err(|e| self.device_failure(e))
    }
}

/// Energies of a downloaded state, by the CPU reference's bookkeeping (id order): what a GPU
/// group reports (each GPU holds only its slab and ghosts).
pub(crate) fn energies_on_host(
    ctx: &Arc<StepContext>,
    state: SimState,
) -> Result<Energies, StepError> {
    let mut coord = Coordinator::cpu(ctx.clone(), state, &Decomposition::default())
        .expect("one sub-domain always fits");
    coord.energies()
}
