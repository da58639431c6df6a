//! Triangle meshes placed in the world at time t, and binned into the neighbour grid so that a
//! particle only tests the triangles near its own cell (not O(N * T)).

use super::motion::{BodyTransform, Motion};
use super::triangle::closest_point_on_triangle;
use crate::core::grid::Grid;
use crate::core::stl::Triangle;
use crate::core::vec3;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// A rigid triangle mesh in its body frame (= its coordinates at t = 0).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mesh {
    pub name: String,
    /// Triangles in the body frame [m].
    pub triangles: Vec<Triangle>,
    pub motion: Motion,
    /// Index into the wall materials of the [`crate::case::MaterialTable`].
    pub material: usize,
}

/// Bins of the moving meshes, (cell, global triangle) sorted, with the world triangles they were
/// made from ([`MeshWorld::moving_bin_job`]).
pub type MovingBins = (Vec<(u32, u32)>, Vec<Triangle>);

/// All meshes at the current time: world-space triangles, transforms and grid bins.
#[derive(Debug, Clone, Default)]
pub struct MeshWorld {
    /// World-space triangles of all meshes, concatenated in mesh order.
    pub world: Vec<Triangle>,
    /// Mesh of each global triangle.
    pub tri_mesh: Vec<u32>,
    /// First global triangle of each mesh.
    pub first_tri: Vec<u32>,
    /// Current transform of each mesh.
    pub transforms: Vec<BodyTransform>,
    /// (cell, global triangle) of fixed meshes, sorted; built once per grid.
    fixed_bins: Vec<(u32, u32)>,
    /// (cell, global triangle) of moving meshes, sorted; rebuilt when a vertex moved more
    /// than `skin` since the last binning (a Verlet-list skin: bins are made with reach + skin).
    moving_bins: Vec<(u32, u32)>,
    /// World triangles as they were when `moving_bins` was built.
    binned_world: Vec<Triangle>,
    skin: f64,
    fixed_binned: bool,
}

impl MeshWorld {
    pub fn new(meshes: &[Mesh]) -> Self {
        let mut w = MeshWorld::default();
        for (k, m) in meshes.iter().enumerate() {
            w.first_tri.push(w.world.len() as u32);
            w.world.extend_from_slice(&m.triangles);
            w.tri_mesh
                .extend(std::iter::repeat_n(k as u32, m.triangles.len()));
            w.transforms.push(m.motion.transform_at(0.0));
        }
        w
    }

    pub fn is_empty(&self) -> bool {
        self.world.is_empty()
    }

    /// The global triangle indices of mesh `mesh`.
    pub fn triangles_of(&self, mesh: u32) -> std::ops::Range<u32> {
        let m = mesh as usize;
        let end = self
            .first_tri
            .get(m + 1)
            .copied()
            .unwrap_or(self.world.len() as u32);
        self.first_tri[m]..end
    }

    /// Places every moving mesh at time `t` and rebins; bins fixed meshes on first use. `reach`
    /// is the largest particle radius [m]. Returns whether the moving meshes' bins were
    /// (re)built (the GPU backend uploads them then).
    pub fn update(&mut self, meshes: &[Mesh], grid: &Grid, t: f64, reach: f64) -> bool {
        self.place(meshes, t);
        if !self.fixed_binned {
            self.fixed_bins = self.bin(meshes, grid, reach, true);
            self.skin = 0.5 * grid.cell;
            self.moving_bins = self.bin(meshes, grid, reach + self.skin, false);
            self.binned_world = self.world.clone();
            self.fixed_binned = true;
            return true;
        }
        // Rebin moving meshes only when some vertex moved farther than the skin. The candidate
        // lists stay supersets of the touching triangles and are sorted by triangle index, so
        // the forces do not depend on when binning happened.
        let moved = self.moved_since(&self.binned_world) > self.skin * self.skin;
        if moved {
            self.moving_bins = self.bin(meshes, grid, reach + self.skin, false);
            self.binned_world.clone_from(&self.world);
        }
        moved
    }

    /// Places every moving mesh at time `t` (world triangles and transforms), bins untouched.
    pub fn place(&mut self, meshes: &[Mesh], t: f64) {
        for (k, m) in meshes.iter().enumerate() {
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

    /// Whether [`MeshWorld::update`] has binned the meshes (it bins on its first call).
    pub fn is_binned(&self) -> bool {
        self.fixed_binned
    }

    /// The skin of the moving meshes' bins [m]: they hold every triangle within the particle
    /// reach of a cell while no vertex moved farther than this since `binned`.
    pub fn skin(&self) -> f64 {
        self.skin
    }

    /// The largest squared distance a vertex moved since the moving meshes were binned.
    pub fn moved_since_binning(&self) -> f64 {
        self.moved_since(&self.binned_world)
    }

    /// The largest squared distance a vertex moved between `binned` (world triangles of an
    /// earlier time) and now.
    pub fn moved_since(&self, binned: &[Triangle]) -> f64 {
        self.world
            .iter()
            .zip(binned)
            .flat_map(|(a, b)| (0..3).map(move |v| vec3::norm2(vec3::sub(a[v], b[v]))))
            .fold(0.0, f64::max)
    }

    /// The binning of the moving meshes at their present placement as a job for another thread:
    /// it returns the bins (as [`MeshWorld::update`] makes them) and the world they were made
    /// from, for [`MeshWorld::set_moving_bins`].
    pub fn moving_bin_job(
        &self,
        meshes: &[Mesh],
        grid: &Grid,
        reach: f64,
    ) -> impl FnOnce() -> MovingBins + Send + 'static {
        let world = self.world.clone();
        let tri_mesh = self.tri_mesh.clone();
        let fixed: Vec<bool> = meshes.iter().map(|m| m.motion.is_fixed()).collect();
        let (grid, reach) = (grid.clone(), reach + self.skin);
        move || {
            let bins = bin_triangles(&world, &tri_mesh, &fixed, &grid, reach, false);
            (bins, world)
        }
    }

    /// Installs bins of the moving meshes made from the world triangles `binned` (a
    /// [`MeshWorld::moving_bin_job`]); the caller has checked that no vertex moved farther than
    /// the skin since.
    pub fn set_moving_bins(&mut self, bins: Vec<(u32, u32)>, binned: Vec<Triangle>) {
        self.moving_bins = bins;
        self.binned_world = binned;
    }

    /// (cell, global triangle) bins of the fixed meshes, sorted.
    pub fn fixed_bins(&self) -> &[(u32, u32)] {
        &self.fixed_bins
    }

    /// (cell, global triangle) bins of the moving meshes, sorted (a superset with a skin).
    pub fn moving_bins(&self) -> &[(u32, u32)] {
        &self.moving_bins
    }

    fn bin(&self, meshes: &[Mesh], grid: &Grid, reach: f64, fixed: bool) -> Vec<(u32, u32)> {
        let flags: Vec<bool> = meshes.iter().map(|m| m.motion.is_fixed()).collect();
        bin_triangles(&self.world, &self.tri_mesh, &flags, grid, reach, fixed)
    }

    /// Forget the fixed bins (after the grid changed).
    pub fn invalidate_bins(&mut self) {
        self.fixed_binned = false;
    }

    /// Global triangles that may touch a particle whose centre lies in `cell`, ascending,
    /// appended to `out`.
    pub fn candidates(&self, cell: u32, out: &mut Vec<u32>) {
        for bins in [&self.fixed_bins, &self.moving_bins] {
            let s = bins.partition_point(|b| b.0 < cell);
            out.extend(bins[s..].iter().take_while(|b| b.0 == cell).map(|b| b.1));
        }
        out.sort_unstable();
    }
}

/// (cell, global triangle) bins, sorted, of the triangles of `world` whose mesh (`tri_mesh`) is
/// fixed (`fixed_mesh`) when `fixed`, moving otherwise: every cell with a point within `reach`
/// of the triangle (cells on the grid's border always, as they hold the clamped particles).
fn bin_triangles(
    world: &[Triangle],
    tri_mesh: &[u32],
    fixed_mesh: &[bool],
    grid: &Grid,
    reach: f64,
    fixed: bool,
) -> Vec<(u32, u32)> {
    let half_diag = 0.5 * grid.cell * 3f64.sqrt();
    let mut bins: Vec<(u32, u32)> = (0..world.len())
        .into_par_iter()
        .filter(|&g| fixed_mesh[tri_mesh[g] as usize] == fixed)
        .flat_map_iter(|g| {
            let t = &world[g];
            let lo: [f64; 3] = std::array::from_fn(|a| t[0][a].min(t[1][a]).min(t[2][a]) - reach);
            let hi: [f64; 3] = std::array::from_fn(|a| t[0][a].max(t[1][a]).max(t[2][a]) + reach);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A square of two triangles turning about the z axis through its corner, 60 rpm.
    fn paddle() -> Vec<Mesh> {
        let (a, b, c, d) = (
            [0.0, 0.0, 0.0],
            [0.3, 0.0, 0.0],
            [0.3, 0.0, 0.2],
            [0.0, 0.0, 0.2],
        );
        vec![Mesh {
            name: "paddle".into(),
            triangles: vec![[a, b, c], [a, c, d]],
            motion: Motion::Rotation {
                axis_point: [0.0; 3],
                axis_direction: [0.0, 0.0, 1.0],
                rpm: 60.0,
            },
            material: 0,
        }]
    }

    #[test]
    fn bins_made_on_another_thread_equal_the_bins_of_an_update() {
        let meshes = paddle();
        let grid = Grid::new([-0.4; 3], [0.4; 3], 0.02, 2);
        let mut w = MeshWorld::new(&meshes);
        assert!(
            w.update(&meshes, &grid, 0.0, 0.005),
            "bins on the first update"
        );
        assert!(w.is_binned() && w.skin() > 0.0);
        assert_eq!(w.moved_since_binning(), 0.0);
        // A quarter turn later: placed, not binned.
        w.place(&meshes, 0.25);
        let moved = w.moved_since_binning();
        assert!(
            (moved.sqrt() - 0.3 * 2f64.sqrt()).abs() < 1e-9,
            "{}",
            moved.sqrt()
        );
        let (bins, binned) = std::thread::spawn(w.moving_bin_job(&meshes, &grid, 0.005))
            .join()
            .unwrap();
        let mut fresh = MeshWorld::new(&meshes);
        fresh.update(&meshes, &grid, 0.25, 0.005);
        assert_eq!(
            bins,
            fresh.moving_bins(),
            "the same bins as a binning at 0.25 s"
        );
        assert!(!bins.is_empty());
        w.set_moving_bins(bins, binned);
        assert_eq!(w.moved_since_binning(), 0.0);
        assert_eq!(w.moving_bins(), fresh.moving_bins());
    }
}
