//! Boundaries: the walls of the axis-aligned box and triangle meshes with prescribed motion.

mod mesh;
mod motion;
mod solid;
mod triangle;

pub use mesh::{Mesh, MeshWorld, MovingBins};
pub use motion::{axis_angle_matrix, BodyTransform, Motion, Segment, IDENTITY};
pub use solid::{
    box_triangles, cylinder_triangles, enclosed_volume, lattice_sites_inside, open_edge,
    ray_crosses_triangle,
};
pub use triangle::{closest_point_on_triangle, triangle_area, TriRegion};

use crate::core::vec3::V3;

/// A contact of a sphere with a box wall: outward normal from the particle towards the wall and
/// overlap. Walls are the six faces of [min, max], numbered x_min, x_max, y_min, ... (0..6).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WallContact {
    pub wall: u32,
    pub n: V3,
    pub delta: f64,
}

/// Box-wall contacts of a sphere at `p` with radius `r` against the faces in `mask` (bit f: face
/// f = x_min, x_max, y_min, y_max, z_min, z_max), appended to `out` in face order.
#[inline]
pub fn box_wall_contacts(p: V3, r: f64, min: V3, max: V3, mask: u32, out: &mut Vec<WallContact>) {
    for a in 0..3 {
        let mut n = [0.0; 3];
        let d_lo = r - (p[a] - min[a]);
        if mask & (1 << (2 * a)) != 0 && d_lo > 0.0 {
            n[a] = -1.0;
            out.push(WallContact {
                wall: 2 * a as u32,
                n,
                delta: d_lo,
            });
        }
        let d_hi = r - (max[a] - p[a]);
        if mask & (1 << (2 * a + 1)) != 0 && d_hi > 0.0 {
            n[a] = 1.0;
            out.push(WallContact {
                wall: 2 * a as u32 + 1,
                n,
                delta: d_hi,
            });
        }
    }
}
