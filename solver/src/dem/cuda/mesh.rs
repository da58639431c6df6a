//! Triangle meshes of the CUDA backend. The host places the meshes at the step's time and bins
//! their triangles into the GPU grid with the CPU's own `geometry::MeshWorld` (fixed meshes
//! once, moving meshes with a skin of half a cell, rebinned when a vertex moved farther than the
//! skin, the next bins made ahead on another thread: `GpuMeshes::rebin`); the device gets the
//! world triangles of the moving meshes and their velocity fields every step, and the bins when
//! they change. The collide kernel walks the bins of its particle's cell (binary search), see
//! `mesh.cuh`. Candidate lists only need to be sorted supersets of the touching triangles, so
//! the contacts do not depend on when rebinning happened.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};

use super::params::{MeshArrays, MeshBody};
use super::CudaError;
use crate::core::geometry::{BodyTransform, Mesh, MeshWorld, MovingBins};
use crate::core::grid::Grid;

/// Meshes on the host (placement, bins) and their device copies.
pub(crate) struct GpuMeshes {
    meshes: Vec<Mesh>,
    grid: Grid,
    reach: f64,
    /// Placement and bins, shared with the CPU backend.
    world: MeshWorld,
    /// First global triangle of each mesh, plus the total at the end.
    pub first_tri: Vec<u32>,
    any_moving: bool,
    d_tris: CudaSlice<f64>,
    _d_tri_mesh: CudaSlice<u32>,
    d_bodies: CudaSlice<MeshBody>,
    _d_fixed: (CudaSlice<u32>, CudaSlice<u32>),
    d_moving: (CudaSlice<u32>, CudaSlice<u32>),
    /// dem_mesh_filter's touching candidates, two u64 per slot (grown with the slots).
    d_hit_mask: Option<CudaSlice<u64>>,
    /// The next bins of the moving meshes, made on another thread ([`GpuMeshes::rebin`]).
    pending: Option<std::thread::JoinHandle<MovingBins>>,
    /// What the collide kernel gets.
    pub arrays: MeshArrays,
    /// Device bytes in use (for the memory report).
    pub bytes: u64,
}

fn ptr<T>(s: &CudaSlice<T>, stream: &Arc<CudaStream>) -> u64 {
    let (p, _sync) = s.device_ptr(stream);
    p
}

fn upload<T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits>(
    stream: &Arc<CudaStream>,
    what: &str,
    data: &[T],
    capacity: usize,
) -> Result<CudaSlice<T>, CudaError> {
    let mut s = stream
        .alloc_zeros::<T>(capacity.max(data.len()).max(1))
        .map_err(|e| CudaError::driver(&format!("allocating {what}"), e))?;
    if !data.is_empty() {
        stream
            .memcpy_htod(data, &mut s.slice_mut(0..data.len()))
            .map_err(|e| CudaError::driver(&format!("uploading {what}"), e))?;
    }
    Ok(s)
}

/// (cell, triangle) bins split into two arrays.
fn split(bins: &[(u32, u32)]) -> (Vec<u32>, Vec<u32>) {
    bins.iter().copied().unzip()
}

impl GpuMeshes {
    /// Places the meshes at time `t` and bins them into `grid`; `reach` is the largest particle
    /// radius. Fails when the triangles do not fit the partner-id space.
    pub fn new(
        stream: &Arc<CudaStream>,
        meshes: &[Mesh],
        grid: &Grid,
        reach: f64,
        t: f64,
    ) -> Result<GpuMeshes, CudaError> {
        let total: usize = meshes.iter().map(|m| m.triangles.len()).sum();
        let max_tris = crate::dem::state::MAX_TRIANGLES as usize;
        if total > max_tris {
            return Err(CudaError::Unsupported(format!(
                "{total} mesh triangles (at most {max_tris})"
            )));
        }
        let mut world = MeshWorld::new(meshes);
        world.update(meshes, grid, t, reach);
        let mut first_tri = world.first_tri.clone();
        first_tri.push(world.world.len() as u32);
        let fixed = split(world.fixed_bins());
        let moving = split(world.moving_bins());
        let any_moving = meshes.iter().any(|m| !m.motion.is_fixed());
        let mut g = GpuMeshes {
            meshes: meshes.to_vec(),
            grid: grid.clone(),
            reach,
            d_tris: upload(
                stream,
                "mesh triangles",
                world.world.as_flattened().as_flattened(),
                0,
            )?,
            _d_tri_mesh: upload(stream, "mesh indices", &world.tri_mesh, 0)?,
            d_bodies: upload::<MeshBody>(stream, "mesh bodies", &[], meshes.len())?,
            _d_fixed: (
                upload(stream, "bins", &fixed.0, 0)?,
                upload(stream, "bins", &fixed.1, 0)?,
            ),
            d_moving: (
                upload(stream, "bins", &moving.0, 0)?,
                upload(stream, "bins", &moving.1, 0)?,
            ),
            world,
            first_tri,
            any_moving,
            d_hit_mask: None,
            pending: None,
            arrays: MeshArrays::default(),
            bytes: 0,
        };
        g.upload_bodies(stream)?;
        g.arrays = MeshArrays {
            tris: ptr(&g.d_tris, stream),
            tri_mesh: ptr(&g._d_tri_mesh, stream),
            bodies: ptr(&g.d_bodies, stream),
            fixed_cell: ptr(&g._d_fixed.0, stream),
            fixed_tri: ptr(&g._d_fixed.1, stream),
            moving_cell: ptr(&g.d_moving.0, stream),
            moving_tri: ptr(&g.d_moving.1, stream),
            n_fixed: fixed.0.len() as u32,
            n_moving: moving.0.len() as u32,
            n_meshes: meshes.len() as u32,
            n_tris: total as u32,
            hit_mask: 0,
        };
        g.bytes =
            (72 * total + 4 * total + 88 * meshes.len() + 8 * (fixed.0.len() + g.d_moving.0.len()))
                as u64;
        Ok(g)
    }

    /// Makes room for `words` u64 of dem_mesh_filter's results (two per particle; a new buffer
    /// changes [`GpuMeshes::arrays`], so the step's graph is captured again).
    pub fn ensure_hit_mask(
        &mut self,
        stream: &Arc<CudaStream>,
        words: usize,
    ) -> Result<(), CudaError> {
        if self.d_hit_mask.as_ref().is_some_and(|m| m.len() >= words) {
            return Ok(());
        }
        let m = stream
            .alloc_zeros::<u64>(words.max(1))
            .map_err(|e| CudaError::driver("allocating the mesh hit masks", e))?;
        self.bytes += 8 * (m.len() - self.d_hit_mask.as_ref().map_or(0, |o| o.len())) as u64;
        self.arrays.hit_mask = ptr(&m, stream);
        // The old buffer is freed in stream order, after the kernels that use it.
        self.d_hit_mask = Some(m);
        Ok(())
    }

    /// Current transform of each mesh.
    pub fn transforms(&self) -> &[BodyTransform] {
        &self.world.transforms
    }

    fn upload_bodies(&mut self, stream: &Arc<CudaStream>) -> Result<(), CudaError> {
        let bodies: Vec<MeshBody> = self
            .world
            .transforms
            .iter()
            .enumerate()
            .map(|(k, tr)| MeshBody {
                velocity: tr.velocity,
                omega: tr.omega,
                center: tr.center,
                first_tri: self.first_tri[k],
                n_tri: self.first_tri[k + 1] - self.first_tri[k],
                material: self.meshes[k].material as u32,
                pad: 0,
            })
            .collect();
        stream
            .memcpy_htod(&bodies, &mut self.d_bodies)
            .map_err(|e| CudaError::driver("uploading the mesh bodies", e))
    }

    /// Keeps the moving meshes' bins valid at the present placement, binning ahead on another
    /// thread; true when the bins changed. Binning a rotating drum's 256 triangles took the host
    /// a few milliseconds every couple of hundred steps, on the step's critical path (a third of
    /// the host's time in the 10 k drum). Bins made with a skin S hold every candidate while no
    /// vertex moved farther than S since they were made: once the vertices moved S/2, the next
    /// bins are made from the present placement on a thread; when the present bins expire they
    /// are swapped in if no vertex moved farther than S since their placement (else, or if the
    /// thread failed, they are made here, as before). The candidate lists are sorted supersets
    /// of the touching triangles either way, so the contacts, hence the bits, do not depend on
    /// when (or on which thread) binning happened.
    fn rebin(&mut self) -> bool {
        let s2 = self.world.skin().powi(2);
        let moved = self.world.moved_since_binning();
        if moved > s2 {
            let ready = self.pending.take().and_then(|h| h.join().ok());
            let (bins, binned) = match ready {
                Some((bins, binned)) if self.world.moved_since(&binned) <= s2 => (bins, binned),
                _ => self
                    .world
                    .moving_bin_job(&self.meshes, &self.grid, self.reach)(),
            };
            self.world.set_moving_bins(bins, binned);
            return true;
        }
        if moved > 0.25 * s2 && self.pending.is_none() {
            let job = self
                .world
                .moving_bin_job(&self.meshes, &self.grid, self.reach);
            // Without a thread the bins are made here when they expire.
            self.pending = std::thread::Builder::new()
                .name("mesh-bins".into())
                .spawn(job)
                .ok();
        }
        false
    }

    /// Places the moving meshes at time `t` (the time the step's contacts see them at) and queues
    /// the uploads on `stream`: their world triangles and velocity fields, and their bins when a
    /// vertex moved farther than the skin since the last binning.
    pub fn prepare(&mut self, stream: &Arc<CudaStream>, t: f64) -> Result<(), CudaError> {
        if !self.any_moving {
            return Ok(());
        }
        let rebinned = if self.world.is_binned() {
            self.world.place(&self.meshes, t);
            self.rebin()
        } else {
            self.world.update(&self.meshes, &self.grid, t, self.reach)
        };
        for (k, m) in self.meshes.iter().enumerate() {
            if m.motion.is_fixed() {
                continue;
            }
            let (a, b) = (self.first_tri[k] as usize, self.first_tri[k + 1] as usize);
            let src = self.world.world[a..b].as_flattened().as_flattened();
            stream
                .memcpy_htod(src, &mut self.d_tris.slice_mut(9 * a..9 * b))
                .map_err(|e| CudaError::driver("uploading mesh triangles", e))?;
        }
        self.upload_bodies(stream)?;
        if rebinned {
            let (cells, tris) = split(self.world.moving_bins());
            if cells.len() > self.d_moving.0.len() {
                // The old buffers are freed in stream order, after the kernels that use them.
                let cap = cells.len() + cells.len() / 2;
                self.bytes += 8 * (cap - self.d_moving.0.len()) as u64;
                self.d_moving = (
                    upload(stream, "bins", &cells, cap)?,
                    upload(stream, "bins", &tris, cap)?,
                );
                self.arrays.moving_cell = ptr(&self.d_moving.0, stream);
                self.arrays.moving_tri = ptr(&self.d_moving.1, stream);
            } else if !cells.is_empty() {
                stream
                    .memcpy_htod(&cells, &mut self.d_moving.0.slice_mut(0..cells.len()))
                    .and_then(|_| {
                        stream.memcpy_htod(&tris, &mut self.d_moving.1.slice_mut(0..tris.len()))
                    })
                    .map_err(|e| CudaError::driver("uploading mesh bins", e))?;
            }
            self.arrays.n_moving = cells.len() as u32;
        }
        Ok(())
    }
}
