//! Energies of the state computed on the device (issue 13): the step's own neighbour search
//! into the scratch copy, then `dem_energies`, which visits the contacts exactly as
//! `dem_collide` does but sums kinetic, potential and elastic energy instead of integrating.
//! Only 32 bytes per 128 particles come back; the state is not reordered or changed.

use cudarc::driver::{LaunchConfig, PushKernelArg};
use kernels::Kernel;

use super::step::Marks;
use super::{CudaError, CudaSim};
use crate::exec::worker::Energies;

impl CudaSim {
    /// Energies at the current state (`cpu::stages::compute_energies` on the device: the same
    /// contacts, the same formulas, meshes placed at the current time). Per particle the sums
    /// are the CPU's; the total adds blocks of 128 slots of the cell order, each in thread order,
    /// then the blocks in order (the same result run to run; the CPU adds in id order, so the
    /// last bits may differ). One GPU only: a group computes its energies from a download.
    pub fn energies(&mut self) -> Result<Energies, CudaError> {
        if self.window.is_some() {
            return Err(CudaError::Unsupported(
                "device energies of one GPU of a group".into(),
            ));
        }
        if self.mid_step {
            // Velocity Verlet stopped after its drift for inflow placement: not a state.
            return Err(CudaError::Unsupported(
                "energies in the middle of a step".into(),
            ));
        }
        self.prepare_meshes(self.time)?;
        let p = self.params;
        // With a skin between searches, dem_energies reads the state itself and walks the last
        // search's cells, as the next step's collide will (the run is not touched); else a
        // search gathers the state into the scratch copy, and dem_energies reads that and the
        // state's (newest) history, as a step's collide does. With one copy of the state
        // (`StateCopies::One`) that search reorders the state itself, through the force
        // buffer: the next step's search sorts it by (cell, id) again, the same order, but the
        // last forces are gone until then (`forces_stale`).
        let between = self.skin.as_ref().is_some_and(|s| s.since.is_some());
        let mut l = self.step_launches(p, p, !between)?;
        if between {
            self.enqueue_mesh_filter(&l, &mut Marks::off())?;
        } else {
            // Without the skin's arrays (the cells of now); the grid the skin's steps use is
            // overwritten, so the next step searches.
            l.grid.without_skin();
            // The owner keys stay as the rows hold them (the next step's search moves pairs).
            l.adopt = false;
            self.enqueue_search(&l, &mut Marks::off())?;
            self.skin_stale();
            // One copy of the state was reordered through its force buffer.
            self.forces_stale |= self.cfg.single_copy;
        }
        let blocks = p.n.div_ceil(kernels::COLLIDE_THREADS).max(1);
        let mut partial = self
            .stream
            .alloc_zeros::<f64>(4 * blocks as usize)
            .map_err(|e| CudaError::driver("allocating the energy sums", e))?;
        let mut b = self
            .stream
            .launch_builder(self.module.function(Kernel::Energies));
        b.arg(&p)
            .arg(&l.input)
            .arg(&l.grid)
            .arg(&l.msh)
            .arg(&mut partial);
        let cfg = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (kernels::COLLIDE_THREADS, 1, 1),
            shared_mem_bytes: self.collide_stage(),
        };
        // SAFETY: dem_energies(DemParams, ParticleArrays in, GridArrays, MeshArrays, double*):
        // reads the scratch copy the search just gathered, or the state (p.n slots), the
        // history at each slot's row (staged in the dynamic shared memory, as the collide does),
        // the grid and the mesh arrays; block b writes partial[4b .. 4b + 4], which holds
        // 4 * blocks doubles.
        unsafe { b.launch(cfg) }.map_err(|e| CudaError::driver("launching dem_energies", e))?;
        let sums = self
            .stream
            .clone_dtoh(&partial)
            .map_err(|e| CudaError::driver("reading the energy sums", e))?;
        let mut e = [0.0f64; 4];
        for b in sums.chunks_exact(4) {
            for c in 0..4 {
                e[c] += b[c];
            }
        }
        Ok(Energies {
            kinetic_translation: e[0],
            kinetic_rotation: e[1],
            potential: e[2],
            elastic: e[3],
        })
    }
}

impl CudaSim {
    /// Contacts of the last step (pairs twice, walls once), summed from the per-particle counts
    /// when the backend stores them (`CudaOptions::store_forces`), else `None`.
    pub fn last_step_contacts(&self) -> Result<Option<u64>, CudaError> {
        super::buffers::download_contact_sum(&self.stream, &self.state, &self.params)
    }
}
