//! Modified dynamic boundary conditions (mDBC; English et al. 2022, Comp. Part. Mech. 9:911):
//! each boundary particle takes its density from the fluid around a *ghost node*, its mirror
//! image through the boundary's surface, extrapolated back to the particle with the first-order
//! consistent interpolation ([`super::physics::ghost_density`]). With dynamic boundary
//! particles (DBC) the walls integrate their density with the continuity equation instead, so
//! the water that runs up a wall compresses the wall particles above it and is pushed back
//! (measured: a sloshing slice's period 24 % short at L/40, `solver/tests/sph_sloshing.rs`).
//!
//! The surfaces are those of the case at rest: the tank's faces (its particles lie outside the
//! tank box, their ghost nodes inside: the point reflection through the box's closest point,
//! so that a particle of an edge or a corner mirrors through the edge or the corner) and the faces
//! of box solids (their particles lie inside the box: the reflection through the nearest face)
//! and closed STL surfaces (the reflection through the surface's closest point).
//! A moving solid's ghost nodes move with it: the pose applied to the node at rest.
//!
//! A decomposed run (CPU ranks, several GPUs, GPU ranks) computes each wall's density on the
//! worker whose layers hold the wall's *node*, whose layers and halo hold the fluid around it,
//! and hands it to every worker holding the wall (a node may lie up to twice the walls'
//! thickness plus the support from its particle, beyond the one-layer halo): the bits of one
//! worker.

use super::motion::MovingSolids;
use super::setup::{index_box, MdbcGeometry, MdbcSolid, SphConstants, KIND_FLUID};
use crate::core::geometry::{closest_point_on_triangle, lattice_sites_inside};
use crate::core::stl::Triangle;
use crate::core::vec3::{self, V3};
use rayon::prelude::*;
use std::collections::{HashMap, HashSet};

/// With mDBC, every particle's ghost node at rest (id order; None with DBC) for a state whose
/// positions `pos` have the moving solids at their pose of its time.
pub fn ghosts_at_rest(
    c: &SphConstants,
    moving: &MovingSolids,
    pos: &[V3],
    kind: &[u32],
) -> Option<Vec<V3>> {
    c.mdbc
        .as_ref()
        .map(|m| ghost_nodes(m, &moving.at_rest(pos), kind))
}

/// The ghost node at rest of every particle (id order): NaN for fluid particles and for a
/// boundary particle with no surface to mirror through (a solid particle outside every solid,
/// or deeper than the support plus dp below a closed surface: no fluid reaches it).
pub fn ghost_nodes(g: &MdbcGeometry, pos: &[V3], kind: &[u32]) -> Vec<V3> {
    let meshes: Vec<Option<MeshMirror>> = g
        .solids
        .iter()
        .map(|s| match s {
            MdbcSolid::Mesh { tris, min, max } => Some(MeshMirror::new(g, tris, *min, *max)),
            MdbcSolid::Cuboid { .. } => None,
        })
        .collect();
    pos.par_iter()
        .zip(kind)
        .map(|(&p, &k)| {
            if k == KIND_FLUID {
                return [f64::NAN; 3];
            }
            let inside_tank = (0..3).all(|a| p[a] >= g.tank_min[a] && p[a] <= g.tank_max[a]);
            if !inside_tank {
                // Through the tank box's closest point.
                return std::array::from_fn(|a| {
                    2.0 * p[a].clamp(g.tank_min[a], g.tank_max[a]) - p[a]
                });
            }
            // A solid's particle: through the surface of the first solid listed that holds it.
            for (solid, mesh) in g.solids.iter().zip(&meshes) {
                match (solid, mesh) {
                    (MdbcSolid::Cuboid { min, max }, _) => {
                        if (0..3).all(|a| p[a] >= min[a] && p[a] <= max[a]) {
                            return mirror_in_box(p, *min, *max);
                        }
                    }
                    (MdbcSolid::Mesh { tris, .. }, Some(m)) => {
                        if m.holds(p) {
                            return m.mirror(tris, p);
                        }
                    }
                    (MdbcSolid::Mesh { .. }, None) => unreachable!("every mesh has its mirror"),
                }
            }
            [f64::NAN; 3]
        })
        .collect()
}

/// The reflection of `p` (inside the box) through the box's nearest face (the first face, in
/// the order -x, +x, -y, +y, -z, +z, where two are as near).
fn mirror_in_box(p: V3, min: V3, max: V3) -> V3 {
    let mut best = (f64::INFINITY, 0usize, 0.0f64);
    for a in 0..3 {
        for (face, sign) in [(min[a], -1.0), (max[a], 1.0)] {
            let d = (face - p[a]).abs();
            if d < best.0 {
                best = (d, a, sign);
            }
        }
    }
    let (d, a, sign) = best;
    let mut q = p;
    q[a] += sign * 2.0 * d;
    q
}

/// A closed surface prepared for mirroring: the tank's lattice sites inside it (the solid's
/// particles at rest, found as the case placed them, so a site is its solid's whatever the
/// rounding at the surface) and its triangles binned in cubes of the search radius.
struct MeshMirror {
    origin: V3,
    dp: f64,
    /// The search radius: the support plus dp.
    radius: f64,
    inside: HashSet<[i64; 3]>,
    bins: HashMap<[i64; 3], Vec<u32>>,
}

impl MeshMirror {
    /// `min`, `max`: the triangles' bounding box (the case's, [`MdbcSolid::Mesh`]).
    fn new(g: &MdbcGeometry, tris: &[Triangle], min: V3, max: V3) -> MeshMirror {
        let (origin, dp) = (g.tank_min, g.spacing);
        let radius = g.support + dp;
        // The sites the case searched (SphCase::tank_sites).
        let (first, last) = index_box(origin, dp, min, max);
        // The case placed its particles from the same surface, so it is closed and simple.
        let inside = lattice_sites_inside(tris, origin, dp, first, last)
            .unwrap_or_default()
            .into_iter()
            .collect();
        let mut bins: HashMap<[i64; 3], Vec<u32>> = HashMap::new();
        let cell = |x: f64, a: usize| ((x - origin[a]) / radius).floor() as i64;
        for (k, t) in tris.iter().enumerate() {
            let b0: [i64; 3] = std::array::from_fn(|a| cell(t[0][a].min(t[1][a]).min(t[2][a]), a));
            let b1: [i64; 3] = std::array::from_fn(|a| cell(t[0][a].max(t[1][a]).max(t[2][a]), a));
            for z in b0[2]..=b1[2] {
                for y in b0[1]..=b1[1] {
                    for x in b0[0]..=b1[0] {
                        bins.entry([x, y, z]).or_default().push(k as u32);
                    }
                }
            }
        }
        MeshMirror {
            origin,
            dp,
            radius,
            inside,
            bins,
        }
    }

    /// Whether `p` (at rest) is one of the lattice sites inside the surface.
    fn holds(&self, p: V3) -> bool {
        let i = std::array::from_fn(|a| ((p[a] - self.origin[a]) / self.dp - 0.5).round() as i64);
        self.inside.contains(&i)
    }

    /// The reflection of `p` through the surface's closest point within the search radius
    /// (the first triangle, in the file's order, where two points are as near), else NaN.
    fn mirror(&self, tris: &[Triangle], p: V3) -> V3 {
        let c: [i64; 3] =
            std::array::from_fn(|a| ((p[a] - self.origin[a]) / self.radius).floor() as i64);
        let mut near: Vec<u32> = Vec::new();
        for z in -1..=1 {
            for y in -1..=1 {
                for x in -1..=1 {
                    if let Some(b) = self.bins.get(&[c[0] + x, c[1] + y, c[2] + z]) {
                        near.extend_from_slice(b);
                    }
                }
            }
        }
        near.sort_unstable();
        near.dedup();
        let mut best = (self.radius * self.radius, None);
        for k in near {
            let t = &tris[k as usize];
            let (q, _) = closest_point_on_triangle(p, t[0], t[1], t[2]);
            let d2 = vec3::norm2(vec3::sub(q, p));
            if d2 < best.0 {
                best = (d2, Some(q));
            }
        }
        match best.1 {
            Some(q) => std::array::from_fn(|a| 2.0 * q[a] - p[a]),
            None => [f64::NAN; 3],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sph::setup::KIND_BOUNDARY;

    #[test]
    fn walls_mirror_through_faces_edges_and_corners_and_solids_through_their_nearest_face() {
        let g = MdbcGeometry {
            tank_min: [0.0; 3],
            tank_max: [1.0; 3],
            spacing: 0.05,
            support: 0.2,
            solids: vec![MdbcSolid::Cuboid {
                min: [0.4, 0.4, 0.0],
                max: [0.6, 0.6, 0.3],
            }],
        };
        let pos = [
            [0.5, 0.5, -0.05],  // floor
            [-0.05, 0.5, 0.5],  // wall x = 0
            [1.1, 0.5, -0.05],  // edge x = 1, z = 0
            [-0.1, -0.1, 1.05], // corner
            [0.45, 0.5, 0.1],   // solid, nearest face x = 0.4
            [0.5, 0.5, 0.27],   // solid, nearest face its top
            [0.2, 0.2, 0.2],    // inside the tank, in no solid
            [0.3, 0.3, 0.3],    // fluid
        ];
        let mut kind = vec![KIND_BOUNDARY; pos.len()];
        kind[7] = KIND_FLUID;
        let q = ghost_nodes(&g, &pos, &kind);
        let near = |a: V3, b: V3| (0..3).all(|k| (a[k] - b[k]).abs() < 1e-12);
        assert!(near(q[0], [0.5, 0.5, 0.05]));
        assert!(near(q[1], [0.05, 0.5, 0.5]));
        assert!(near(q[2], [0.9, 0.5, 0.05]));
        assert!(near(q[3], [0.1, 0.1, 0.95]));
        assert!(near(q[4], [0.35, 0.5, 0.1]));
        assert!(near(q[5], [0.5, 0.5, 0.33]));
        assert!(q[6][0].is_nan() && q[7][0].is_nan());
    }
}
