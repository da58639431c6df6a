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
//! of box solids (their particles lie inside the box: the reflection through the nearest face).
//! A moving solid's ghost nodes move with it: the pose applied to the node at rest.

use super::setup::{MdbcGeometry, SphConstants, KIND_FLUID};
use crate::core::vec3::V3;

/// Why a decomposed run (several GPUs, MPI ranks) refuses mDBC, or None: a ghost node lies up to
/// twice the walls' thickness (2 ceil(2h / dp) dp) plus the support from its particle, beyond the
/// one layer of halo a slab holds, so the particle's owner may not hold the fluid around it.
pub fn refused_when_decomposed(c: &SphConstants) -> Option<String> {
    c.mdbc.as_ref().map(|_| {
        "sph.boundary = \"mdbc\" runs on one worker so far (the CPU, or one GPU): a ghost \
         node may lie beyond a slab's one-layer halo; use boundary = \"dbc\" on several GPUs \
         or MPI ranks"
            .to_string()
    })
}

/// The ghost node at rest of every particle (id order): NaN for fluid particles and for a
/// boundary particle with no surface to mirror through (a solid particle outside every box).
pub fn ghost_nodes(g: &MdbcGeometry, pos: &[V3], kind: &[u32]) -> Vec<V3> {
    pos.iter()
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
            // A solid's particle: through the nearest face of the box that holds it (the first
            // box listed wins where boxes overlap, the first face where two are as near).
            for [min, max] in &g.solids {
                if (0..3).any(|a| p[a] < min[a] || p[a] > max[a]) {
                    continue;
                }
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
                return q;
            }
            [f64::NAN; 3]
        })
        .collect()
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
            solids: vec![[[0.4, 0.4, 0.0], [0.6, 0.6, 0.3]]],
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
