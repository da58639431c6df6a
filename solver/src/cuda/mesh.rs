//! Triangle meshes of the CUDA backend. The host places the meshes at the step's time and bins
//! their triangles into the GPU grid exactly as `geometry::MeshWorld` does for the CPU (same
//! placement arithmetic, same bins: fixed meshes once, moving meshes with a skin of half a cell,
//! rebinned when a vertex moved farther than the skin); the device gets the world triangles of
//! the moving meshes and their velocity fields every step, and the bins when they change. The
//! collide kernel walks the bins of its particle's cell (binary search), see `mesh.cuh`.
//!
//! `MeshWorld` keeps its bins private, hence the mirror here; the binning is the same code.
//! Candidate lists only need to be sorted supersets of the touching triangles, so the contacts do
//! not depend on the grid or on when rebinning happened.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use rayon::prelude::*;

use super::params::{MeshArrays, MeshBody};
use super::CudaError;
use crate::backend::{KEY_KIND, KEY_MESH};
use crate::geometry::{closest_point_on_triangle, BodyTransform, Mesh};
use crate::grid::Grid;
use crate::stl::Triangle;
use crate::vec3;

/// History partner id of global mesh triangle 0 (`DEM_MESH_ID_BASE` in params.cuh). With meshes,
/// particle ids must stay below it.
pub const MESH_ID_BASE: u32 = 0x8000_0000;

/// Meshes on the host (placement, bins) and their device copies.
pub(crate) struct GpuMeshes {
    meshes: Vec<Mesh>,
    grid: Grid,
    reach: f64,
    skin: f64,
    /// World triangles of all meshes at the last placement, in mesh order.
    world: Vec<Triangle>,
    /// First global triangle of each mesh, plus the total at the end.
    pub first_tri: Vec<u32>,
    /// Transform of each mesh at the last placement.
    pub transforms: Vec<BodyTransform>,
    binned_world: Vec<Triangle>,
    any_moving: bool,
    d_tris: CudaSlice<f64>,
    _d_tri_mesh: CudaSlice<u32>,
    d_bodies: CudaSlice<MeshBody>,
    _d_fixed: (CudaSlice<u32>, CudaSlice<u32>),
    d_moving: (CudaSlice<u32>, CudaSlice<u32>),
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
fn split(bins: Vec<(u32, u32)>) -> (Vec<u32>, Vec<u32>) {
    bins.into_iter().unzip()
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
        let max_tris = (super::buffers::WALL_ID_BASE - MESH_ID_BASE) as usize;
        if total > max_tris {
            return Err(CudaError::Unsupported(format!(
                "{total} mesh triangles (at most {max_tris})"
            )));
        }
        let mut first_tri = Vec::with_capacity(meshes.len() + 1);
        let mut world = Vec::with_capacity(total);
        let mut tri_mesh = Vec::with_capacity(total);
        let mut transforms = Vec::with_capacity(meshes.len());
        for (k, m) in meshes.iter().enumerate() {
            first_tri.push(world.len() as u32);
            world.extend_from_slice(&m.triangles);
            tri_mesh.extend(std::iter::repeat_n(k as u32, m.triangles.len()));
            transforms.push(m.motion.transform_at(0.0));
        }
        first_tri.push(world.len() as u32);
        let skin = 0.5 * grid.cell;
        let any_moving = meshes.iter().any(|m| !m.motion.is_fixed());
        let mut g = GpuMeshes {
            meshes: meshes.to_vec(),
            grid: grid.clone(),
            reach,
            skin,
            world,
            first_tri,
            transforms,
            binned_world: Vec::new(),
            any_moving,
            d_tris: upload::<f64>(stream, "mesh triangles", &[], 0)?,
            _d_tri_mesh: upload(stream, "mesh indices", &tri_mesh, 0)?,
            d_bodies: upload::<MeshBody>(stream, "mesh bodies", &[], meshes.len())?,
            _d_fixed: (
                upload::<u32>(stream, "bins", &[], 0)?,
                upload::<u32>(stream, "bins", &[], 0)?,
            ),
            d_moving: (
                upload::<u32>(stream, "bins", &[], 0)?,
                upload::<u32>(stream, "bins", &[], 0)?,
            ),
            arrays: MeshArrays::default(),
            bytes: 0,
        };
        g.place(t);
        let fixed = split(g.bin(reach, true));
        let moving = split(g.bin(reach + skin, false));
        g.binned_world.clone_from(&g.world);
        g.d_tris = upload(
            stream,
            "mesh triangles",
            g.world.as_flattened().as_flattened(),
            0,
        )?;
        g._d_fixed = (
            upload(stream, "bins", &fixed.0, 0)?,
            upload(stream, "bins", &fixed.1, 0)?,
        );
        g.d_moving = (
            upload(stream, "bins", &moving.0, 0)?,
            upload(stream, "bins", &moving.1, 0)?,
        );
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
        };
        g.bytes =
            (72 * total + 4 * total + 88 * meshes.len() + 8 * (fixed.0.len() + g.d_moving.0.len()))
                as u64;
        Ok(g)
    }

    /// Moves every moving mesh to time `t` (geometry::MeshWorld::update's placement).
    fn place(&mut self, t: f64) {
        for (k, m) in self.meshes.iter().enumerate() {
            if m.motion.is_fixed() {
                continue;
            }
            let tr = m.motion.transform_at(t);
            self.transforms[k] = tr;
            let first = self.first_tri[k] as usize;
            for (i, tri) in m.triangles.iter().enumerate() {
                self.world[first + i] = tri.map(|v| tr.apply(v));
            }
        }
    }

    /// geometry::MeshWorld::bin: (cell, global triangle) of every cell whose centre lies within
    /// `reach` + half a cell diagonal of the triangle (border cells always), sorted.
    fn bin(&self, reach: f64, fixed: bool) -> Vec<(u32, u32)> {
        let grid = &self.grid;
        let half_diag = 0.5 * grid.cell * 3f64.sqrt();
        let tri_mesh = |g: usize| self.first_tri.partition_point(|&f| f as usize <= g) - 1;
        let mut bins: Vec<(u32, u32)> = (0..self.world.len())
            .into_par_iter()
            .filter(|&g| self.meshes[tri_mesh(g)].motion.is_fixed() == fixed)
            .flat_map_iter(|g| {
                let t = &self.world[g];
                let lo: [f64; 3] =
                    std::array::from_fn(|a| t[0][a].min(t[1][a]).min(t[2][a]) - reach);
                let hi: [f64; 3] =
                    std::array::from_fn(|a| t[0][a].max(t[1][a]).max(t[2][a]) + reach);
                let (c0, c1) = (grid.cell_coords(lo), grid.cell_coords(hi));
                let mut out = Vec::new();
                for z in c0[2]..=c1[2] {
                    for y in c0[1]..=c1[1] {
                        for x in c0[0]..=c1[0] {
                            let border = [x, y, z]
                                .iter()
                                .zip(grid.dims)
                                .any(|(&c, d)| c == 0 || c == d - 1);
                            let centre = [x, y, z].map(|c| c as f64 + 0.5);
                            let centre: [f64; 3] =
                                std::array::from_fn(|a| grid.origin[a] + centre[a] * grid.cell);
                            let (q, _) = closest_point_on_triangle(centre, t[0], t[1], t[2]);
                            if border || vec3::norm(vec3::sub(q, centre)) <= reach + half_diag {
                                out.push((grid.cell_index([x, y, z]), g as u32));
                            }
                        }
                    }
                }
                out
            })
            .collect();
        bins.par_sort_unstable();
        bins
    }

    fn upload_bodies(&mut self, stream: &Arc<CudaStream>) -> Result<(), CudaError> {
        let bodies: Vec<MeshBody> = self
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

    /// Places the moving meshes at time `t` (the time the step's contacts see them at) and queues
    /// the uploads on `stream`: their world triangles and velocity fields, and their bins when a
    /// vertex moved farther than the skin since the last binning.
    pub fn prepare(&mut self, stream: &Arc<CudaStream>, t: f64) -> Result<(), CudaError> {
        if !self.any_moving {
            return Ok(());
        }
        self.place(t);
        for (k, m) in self.meshes.iter().enumerate() {
            if m.motion.is_fixed() {
                continue;
            }
            let (a, b) = (self.first_tri[k] as usize, self.first_tri[k + 1] as usize);
            let src = self.world[a..b].as_flattened().as_flattened();
            stream
                .memcpy_htod(src, &mut self.d_tris.slice_mut(9 * a..9 * b))
                .map_err(|e| CudaError::driver("uploading mesh triangles", e))?;
        }
        self.upload_bodies(stream)?;
        let skin2 = self.skin * self.skin;
        let moved = self
            .world
            .iter()
            .zip(&self.binned_world)
            .any(|(a, b)| (0..3).any(|v| vec3::norm2(vec3::sub(a[v], b[v])) > skin2));
        if moved {
            let (cells, tris) = split(self.bin(self.reach + self.skin, false));
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
            self.binned_world.clone_from(&self.world);
        }
        Ok(())
    }

    /// History key of the CPU backend -> device partner id (None: not a triangle of these meshes).
    pub fn partner_of_key(first_tri: &[u32], key: u64) -> Option<u32> {
        if key & KEY_KIND != KEY_MESH || first_tri.is_empty() {
            return None;
        }
        let mesh = ((key >> 32) & 0x3FFF_FFFF) as usize;
        let tri = key as u32;
        let (&first, &next) = (first_tri.get(mesh)?, first_tri.get(mesh + 1)?);
        (tri < next - first).then_some(MESH_ID_BASE + first + tri)
    }

    /// Device partner id >= [`MESH_ID_BASE`] -> CPU history key.
    pub fn key_of_partner(first_tri: &[u32], partner: u32) -> u64 {
        let g = partner - MESH_ID_BASE;
        let mesh = first_tri.partition_point(|&f| f <= g).saturating_sub(1);
        KEY_MESH | (mesh as u64) << 32 | (g - first_tri[mesh]) as u64
    }
}
