//! Torque of the particles on each mesh body, from the per-particle contact forces.

use rayon::prelude::*;
use shm_protocol::{BodyTransform, MeshStatic};

use crate::grid::CellLayout;
use crate::par::CHUNK;

/// Cells per axis of a body's triangle grid, at most.
const TRIANGLE_GRID_AXIS: usize = 64;

/// Force and torque of the particles on one body.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct BodyLoad {
    pub body: String,
    /// Torque about the body origin (its transform's translation), world axes [N m].
    pub torque: [f64; 3],
    /// Force on the body, world axes [N].
    pub force: [f64; 3],
    /// Particles found touching the body.
    pub contacts: u64,
}

type V3 = [f64; 3];

fn sub(a: V3, b: V3) -> V3 {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}
fn dot(a: V3, b: V3) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}
fn cross(a: V3, b: V3) -> V3 {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}
fn axpy(s: f64, a: V3, b: V3) -> V3 {
    [b[0] + s * a[0], b[1] + s * a[1], b[2] + s * a[2]]
}

/// Closest point of triangle `t` to `p` (Ericson, Real-Time Collision Detection, 5.1.5).
pub fn closest_point_on_triangle(p: V3, t: &[V3; 3]) -> V3 {
    let [a, b, c] = *t;
    let (ab, ac, ap) = (sub(b, a), sub(c, a), sub(p, a));
    let (d1, d2) = (dot(ab, ap), dot(ac, ap));
    if d1 <= 0.0 && d2 <= 0.0 {
        return a;
    }
    let bp = sub(p, b);
    let (d3, d4) = (dot(ab, bp), dot(ac, bp));
    if d3 >= 0.0 && d4 <= d3 {
        return b;
    }
    let vc = d1 * d4 - d3 * d2;
    if vc <= 0.0 && d1 >= 0.0 && d3 <= 0.0 {
        return axpy(d1 / (d1 - d3), ab, a);
    }
    let cp = sub(p, c);
    let (d5, d6) = (dot(ab, cp), dot(ac, cp));
    if d6 >= 0.0 && d5 <= d6 {
        return c;
    }
    let vb = d5 * d2 - d1 * d6;
    if vb <= 0.0 && d2 >= 0.0 && d6 <= 0.0 {
        return axpy(d2 / (d2 - d6), ac, a);
    }
    let va = d3 * d6 - d5 * d4;
    if va <= 0.0 && (d4 - d3) >= 0.0 && (d5 - d6) >= 0.0 {
        return axpy((d4 - d3) / ((d4 - d3) + (d5 - d6)), sub(c, b), b);
    }
    let denom = 1.0 / (va + vb + vc);
    axpy(vc * denom, ac, axpy(vb * denom, ab, a))
}

/// `x_world = R x_body + t` for one vertex.
fn to_world(tf: &BodyTransform, v: &[f32]) -> V3 {
    let r = tf.rotation.map(f64::from);
    let v = [v[0], v[1], v[2]].map(f64::from);
    [0, 1, 2].map(|k| {
        r[3 * k] * v[0] + r[3 * k + 1] * v[1] + r[3 * k + 2] * v[2] + tf.translation[k] as f64
    })
}

/// One body's triangles in world coordinates, binned into a coarse grid.
struct BodyGrid {
    triangles: Vec<[V3; 3]>,
    layout: CellLayout,
    cells: Vec<Vec<u32>>,
    lo: V3,
    hi: V3,
}

impl BodyGrid {
    /// Bins every triangle into the cells its bounding box, grown by `reach`, overlaps.
    fn new(mesh: &MeshStatic, tf: &BodyTransform, reach: f64) -> Option<Self> {
        let triangles: Vec<[V3; 3]> = mesh
            .triangles
            .iter()
            .map(|t| {
                [
                    to_world(tf, &t[0..3]),
                    to_world(tf, &t[3..6]),
                    to_world(tf, &t[6..9]),
                ]
            })
            .filter(|t| t.iter().flatten().all(|c| c.is_finite()))
            .collect();
        let bounds = |t: &[V3; 3]| {
            let lo = [0, 1, 2].map(|k| t[0][k].min(t[1][k]).min(t[2][k]) - reach);
            let hi = [0, 1, 2].map(|k| t[0][k].max(t[1][k]).max(t[2][k]) + reach);
            (lo, hi)
        };
        let (lo, hi) = triangles.iter().map(bounds).reduce(|(a, b), (c, d)| {
            (
                [0, 1, 2].map(|k| a[k].min(c[k])),
                [0, 1, 2].map(|k| b[k].max(d[k])),
            )
        })?;
        let extent = (0..3).map(|k| hi[k] - lo[k]).fold(0.0, f64::max);
        let axis = TRIANGLE_GRID_AXIS;
        let layout = CellLayout::new(
            lo,
            hi,
            (2.0 * reach).max(extent / axis as f64),
            axis * axis * axis,
        );
        let mut cells = vec![Vec::new(); layout.cell_count()];
        for (i, t) in triangles.iter().enumerate() {
            let (a, b) = bounds(t);
            let c0 = layout.coords(&a.map(|v| v as f32)).unwrap_or([0; 3]);
            let c1 = layout.coords(&b.map(|v| v as f32)).unwrap_or([0; 3]);
            for z in c0[2]..=c1[2] {
                for y in c0[1]..=c1[1] {
                    for x in c0[0]..=c1[0] {
                        cells[layout.index([x, y, z])].push(i as u32);
                    }
                }
            }
        }
        Some(Self {
            triangles,
            layout,
            cells,
            lo,
            hi,
        })
    }

    /// Closest point of the body to `p`, among triangles within the grid cell of `p`.
    fn closest(&self, p: V3) -> Option<(V3, f64)> {
        if (0..3).any(|k| p[k] < self.lo[k] || p[k] > self.hi[k]) {
            return None;
        }
        let c = self.layout.coords(&p.map(|v| v as f32))?;
        self.cells[self.layout.index(c)]
            .iter()
            .map(|&t| {
                let q = closest_point_on_triangle(p, &self.triangles[t as usize]);
                let d = sub(p, q);
                (q, dot(d, d))
            })
            .min_by(|a, b| a.1.total_cmp(&b.1))
    }
}

/// Force and torque of the particles on each body k [N, N m], **approximated** from the
/// per-particle total contact force F_i (the only force the frames carry):
/// F_k = sum_i -F_i and T_k = sum_i (q_i - o_k) x (-F_i) over the particles i touching body k
/// (closest point q_i of its world-space triangles nearer than r_i), o_k the body origin. Exact
/// when those particles touch nothing else (a dilute flow, a single layer on a wall); in a dense
/// bed it also counts the particle-particle forces they carry. Bodies without a transform in the
/// frame are skipped.
pub fn body_loads(
    positions: &[[f32; 3]],
    radii: &[f32],
    forces: &[[f32; 3]],
    meshes: &[MeshStatic],
    bodies: &[BodyTransform],
    max_radius: f64,
) -> Vec<BodyLoad> {
    let n = positions.len().min(radii.len()).min(forces.len());
    meshes
        .iter()
        .zip(bodies)
        .map(|(mesh, tf)| {
            let origin = tf.translation.map(f64::from);
            let Some(grid) = BodyGrid::new(mesh, tf, max_radius) else {
                return BodyLoad {
                    body: mesh.name.clone(),
                    torque: [0.0; 3],
                    force: [0.0; 3],
                    contacts: 0,
                };
            };
            let (torque, force, contacts) = (0..n)
                .into_par_iter()
                .with_min_len(CHUNK)
                .filter_map(|i| {
                    let p = positions[i].map(f64::from);
                    let r = radii[i] as f64;
                    let (q, d2) = grid.closest(p)?;
                    (d2 < r * r).then(|| {
                        let f = forces[i].map(|v| -(v as f64));
                        (cross(sub(q, origin), f), f)
                    })
                })
                .fold(
                    || ([0.0; 3], [0.0; 3], 0u64),
                    |(t, f, c), (dt, df)| {
                        (
                            [0, 1, 2].map(|k| t[k] + dt[k]),
                            [0, 1, 2].map(|k| f[k] + df[k]),
                            c + 1,
                        )
                    },
                )
                .reduce(
                    || ([0.0; 3], [0.0; 3], 0),
                    |(a, b, c), (d, e, f)| {
                        (
                            [0, 1, 2].map(|k| a[k] + d[k]),
                            [0, 1, 2].map(|k| b[k] + e[k]),
                            c + f,
                        )
                    },
                );
            BodyLoad {
                body: mesh.name.clone(),
                torque,
                force,
                contacts,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn floor() -> MeshStatic {
        // Square [-2, 2]^2 at z = 0 (body frame), two triangles.
        MeshStatic {
            name: "floor".into(),
            triangles: vec![
                [-2.0, -2.0, 0.0, 2.0, -2.0, 0.0, 2.0, 2.0, 0.0],
                [-2.0, -2.0, 0.0, 2.0, 2.0, 0.0, -2.0, 2.0, 0.0],
            ],
        }
    }

    #[test]
    fn closest_point_regions() {
        let t = [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]];
        let q = closest_point_on_triangle([0.2, 0.2, 5.0], &t);
        assert!(
            (0..3).all(|k| (q[k] - [0.2, 0.2, 0.0][k]).abs() < 1e-12),
            "{q:?}"
        );
        assert_eq!(
            closest_point_on_triangle([-1.0, -1.0, 0.0], &t),
            [0.0, 0.0, 0.0]
        );
        assert_eq!(
            closest_point_on_triangle([0.5, -3.0, 1.0], &t),
            [0.5, 0.0, 0.0]
        );
        assert_eq!(
            closest_point_on_triangle([2.0, 2.0, 0.0], &t),
            [0.5, 0.5, 0.0]
        );
    }

    #[test]
    fn resting_particle_loads_the_floor_by_hand() {
        // Floor moved to z = 1 with origin (0, 0, 1). Particle at (1, 0, 1.05), r = 0.1, pushed
        // up by F = (0, 0, 10) N: the floor gets (0, 0, -10) at q = (1, 0, 1); lever
        // q - o = (1, 0, 0); torque = (1, 0, 0) x (0, 0, -10) = (0, 10, 0) N m. The particle at
        // z = 1.5 does not touch.
        let tf = BodyTransform {
            translation: [0.0, 0.0, 1.0],
            ..BodyTransform::IDENTITY
        };
        let loads = body_loads(
            &[[1.0, 0.0, 1.05], [0.0, 0.0, 1.5]],
            &[0.1, 0.1],
            &[[0.0, 0.0, 10.0], [5.0, 5.0, 5.0]],
            &[floor()],
            &[tf],
            0.1,
        );
        assert_eq!(loads.len(), 1);
        let l = &loads[0];
        assert_eq!(l.contacts, 1);
        assert_eq!(l.force, [0.0, 0.0, -10.0]);
        assert!(
            (l.torque[0]).abs() < 1e-12 && (l.torque[1] - 10.0).abs() < 1e-12,
            "{l:?}"
        );
    }

    #[test]
    fn rotated_body_uses_world_triangles() {
        // Floor rotated 90 degrees about x becomes the wall y = 0 (z up): R = [[1,0,0],[0,0,-1],[0,1,0]].
        let tf = BodyTransform {
            rotation: [1.0, 0.0, 0.0, 0.0, 0.0, -1.0, 0.0, 1.0, 0.0],
            ..BodyTransform::IDENTITY
        };
        let loads = body_loads(
            &[[0.0, 0.05, 1.0]],
            &[0.1],
            &[[0.0, 3.0, 0.0]],
            &[floor()],
            &[tf],
            0.1,
        );
        // Force on wall (0, -3, 0) at q = (0, 0, 1): torque = (0,0,1) x (0,-3,0) = (3, 0, 0).
        assert_eq!(loads[0].contacts, 1);
        assert!((loads[0].torque[0] - 3.0).abs() < 1e-9, "{:?}", loads[0]);
    }
}
