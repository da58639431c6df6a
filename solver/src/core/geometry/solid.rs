//! Closed triangle meshes as solids: whether a surface is closed, and which sites of a regular
//! lattice lie inside it (SPH fluid and boundary particles from STL files).

use std::collections::HashMap;

use crate::core::stl::Triangle;
use crate::core::vec3::{self, V3};

/// The first edge (as its two vertices) not shared by exactly two triangles, with its count.
/// Vertices closer than 1e-9 of the mesh's extent are one (welded): a facetted surface computed
/// in floating point, or written twice to STL, need not repeat vertices bit for bit.
pub fn open_edge(triangles: &[Triangle]) -> Option<(V3, V3, usize)> {
    let extent = triangles
        .iter()
        .flatten()
        .flat_map(|v| v.iter())
        .fold(0.0f64, |m, c| m.max(c.abs()));
    let eps = (1e-9 * extent).max(f64::MIN_POSITIVE);
    let cell = |v: V3| v.map(|c| (c / eps).floor() as i64);
    let mut ids: HashMap<[i64; 3], Vec<(V3, u32)>> = HashMap::new();
    let mut verts: Vec<V3> = Vec::new();
    let mut weld = |v: V3| -> u32 {
        let k = cell(v);
        for dz in -1..=1 {
            for dy in -1..=1 {
                for dx in -1..=1 {
                    if let Some(list) = ids.get(&[k[0] + dx, k[1] + dy, k[2] + dz]) {
                        if let Some(&(_, id)) = list
                            .iter()
                            .find(|(q, _)| vec3::norm(vec3::sub(*q, v)) <= eps)
                        {
                            return id;
                        }
                    }
                }
            }
        }
        let id = verts.len() as u32;
        verts.push(v);
        ids.entry(k).or_default().push((v, id));
        id
    };
    let mut edges: HashMap<(u32, u32), usize> = HashMap::new();
    for t in triangles {
        let w = [weld(t[0]), weld(t[1]), weld(t[2])];
        for (a, b) in [(w[0], w[1]), (w[1], w[2]), (w[2], w[0])] {
            *edges.entry((a.min(b), a.max(b))).or_default() += 1;
        }
    }
    let mut bad: Vec<_> = edges.into_iter().filter(|&(_, n)| n != 2).collect();
    bad.sort_unstable();
    bad.first()
        .map(|&((a, b), n)| (verts[a as usize], verts[b as usize], n))
}

/// Moller-Trumbore: whether the ray p + t d, t > 0, crosses triangle `t`.
pub fn ray_crosses_triangle(p: V3, d: V3, t: &Triangle) -> bool {
    let e1 = vec3::sub(t[1], t[0]);
    let e2 = vec3::sub(t[2], t[0]);
    let pv = vec3::cross(d, e2);
    let det = vec3::dot(e1, pv);
    if det == 0.0 {
        return false;
    }
    let inv = 1.0 / det;
    let tv = vec3::sub(p, t[0]);
    let a = vec3::dot(tv, pv) * inv;
    if !(0.0..=1.0).contains(&a) {
        return false;
    }
    let qv = vec3::cross(tv, e1);
    let b = vec3::dot(d, qv) * inv;
    if b < 0.0 || a + b > 1.0 {
        return false;
    }
    vec3::dot(e2, qv) * inv > 0.0
}

/// Twice the signed area of the 2D triangle (a, b, p), computed from the edge's endpoints in a
/// fixed (lexicographic) order, so that the edge b -> a gives exactly the negated value: two
/// triangles that share an edge never both claim, nor both miss, a point on it.
fn edge_fn(a: [f64; 2], b: [f64; 2], p: [f64; 2]) -> f64 {
    let raw =
        |a: [f64; 2], b: [f64; 2]| (b[0] - a[0]) * (p[1] - a[1]) - (b[1] - a[1]) * (p[0] - a[0]);
    if (a[0], a[1]) <= (b[0], b[1]) {
        raw(a, b)
    } else {
        -raw(b, a)
    }
}

/// Whether a point exactly on the directed edge a -> b of a counter-clockwise triangle belongs to
/// it: as if the point were moved by (e^2, e) for an infinitesimal e (simulation of simplicity),
/// so that every point of a closed surface's projection is covered once per sheet, on shared
/// edges and vertices too.
fn owns_edge(a: [f64; 2], b: [f64; 2]) -> bool {
    let (du, dv) = (b[0] - a[0], b[1] - a[1]);
    du > 0.0 || (du == 0.0 && dv < 0.0)
}

/// The lattice sites `origin + dp (i + 1/2, j + 1/2, k + 1/2)`, `first <= (i, j, k) <= last`,
/// that lie inside the closed surface `tris` (check it with [`open_edge`] first), in (k, j, i)
/// order. Each row of sites along x is a ray: the crossings with the triangles whose (y, z)
/// projection covers the row (ties decided by [`owns_edge`]) are sorted, and the sites between
/// the first and second, third and fourth, ... are inside. A site exactly on the surface is
/// inside where the solid lies on its +x, +y or +z side (a box [min, max) of the lattice, half
/// open, so that two solids sharing a face never both take its sites). A row that meets a
/// surface an odd number of times (a self-intersecting or non-manifold mesh) is an error naming
/// the row.
pub fn lattice_sites_inside(
    tris: &[Triangle],
    origin: V3,
    dp: f64,
    first: [i64; 3],
    last: [i64; 3],
) -> Result<Vec<[i64; 3]>, String> {
    if (0..3).any(|a| last[a] < first[a]) {
        return Ok(Vec::new());
    }
    let site = |a: usize, i: i64| origin[a] + dp * (i as f64 + 0.5);
    let nj = (last[1] - first[1] + 1) as u64;
    // (row, x) of every crossing; row = (k - first_k) nj + (j - first_j).
    let mut hits: Vec<(u64, f64)> = Vec::new();
    for t in tris {
        let p2 = |v: &V3| [v[1], v[2]];
        let (a, mut b, mut c) = (p2(&t[0]), p2(&t[1]), p2(&t[2]));
        let (xa, mut xb, mut xc) = (t[0][0], t[1][0], t[2][0]);
        let area = edge_fn(a, b, c);
        if area == 0.0 || !area.is_finite() {
            continue; // parallel to the rays
        }
        if area < 0.0 {
            std::mem::swap(&mut b, &mut c);
            std::mem::swap(&mut xb, &mut xc);
        }
        let area = area.abs();
        // Rows whose (y, z) lies within the projection's bounding box.
        let range = |ax: usize, lo: f64, hi: f64| {
            let i0 = ((lo - origin[ax]) / dp - 0.5).ceil() as i64;
            let i1 = ((hi - origin[ax]) / dp - 0.5).floor() as i64;
            (i0.max(first[ax]), i1.min(last[ax]))
        };
        let (j0, j1) = range(1, a[0].min(b[0]).min(c[0]), a[0].max(b[0]).max(c[0]));
        let (k0, k1) = range(2, a[1].min(b[1]).min(c[1]), a[1].max(b[1]).max(c[1]));
        for k in k0..=k1 {
            for j in j0..=j1 {
                let p = [site(1, j), site(2, k)];
                let (wa, wb, wc) = (edge_fn(b, c, p), edge_fn(c, a, p), edge_fn(a, b, p));
                let inside =
                    |w: f64, e0: [f64; 2], e1: [f64; 2]| w > 0.0 || (w == 0.0 && owns_edge(e0, e1));
                if inside(wa, b, c) && inside(wb, c, a) && inside(wc, a, b) {
                    let x = (wa * xa + wb * xb + wc * xc) / area;
                    hits.push(((k - first[2]) as u64 * nj + (j - first[1]) as u64, x));
                }
            }
        }
    }
    hits.sort_unstable_by(|p, q| p.0.cmp(&q.0).then(p.1.total_cmp(&q.1)));
    let mut out = Vec::new();
    let mut r = 0;
    while r < hits.len() {
        let row = hits[r].0;
        let end = r + hits[r..].iter().take_while(|h| h.0 == row).count();
        let (j, k) = (first[1] + (row % nj) as i64, first[2] + (row / nj) as i64);
        if (end - r) % 2 == 1 {
            return Err(format!(
                "the line y = {}, z = {} crosses the surface {} times (an odd count: the mesh \
                 intersects itself or is not a simple closed surface)",
                site(1, j),
                site(2, k),
                end - r
            ));
        }
        for pair in hits[r..end].chunks_exact(2) {
            let (x0, x1) = (pair[0].1, pair[1].1);
            // Sites in [x0, x1): half-open along x as the tie rule makes it along y and z.
            let i0 = (((x0 - origin[0]) / dp - 0.5).ceil() as i64).max(first[0]);
            let i1 = (((x1 - origin[0]) / dp - 0.5).ceil() as i64 - 1).min(last[0]);
            out.extend((i0..=i1).map(|i| [i, j, k]));
        }
        r = end;
    }
    // Rows come in (k, j) order and a row's runs in x order.
    Ok(out)
}

/// The closed surface of the box [min, max] as 12 outward-facing triangles (tests, examples).
pub fn box_triangles(min: V3, max: V3) -> Vec<Triangle> {
    let v = |i: usize| -> V3 {
        [
            if i & 1 == 0 { min[0] } else { max[0] },
            if i & 2 == 0 { min[1] } else { max[1] },
            if i & 4 == 0 { min[2] } else { max[2] },
        ]
    };
    // Faces as corner quadruples, counter-clockwise seen from outside.
    let faces = [
        [0, 4, 6, 2],
        [1, 3, 7, 5],
        [0, 1, 5, 4],
        [2, 6, 7, 3],
        [0, 2, 3, 1],
        [4, 5, 7, 6],
    ];
    let mut out = Vec::new();
    for f in faces {
        out.push([v(f[0]), v(f[1]), v(f[2])]);
        out.push([v(f[0]), v(f[2]), v(f[3])]);
    }
    out
}

/// A closed upright cylinder as triangles: axis along z from `base` up `height`, `radius`,
/// `segments` facets around, outward-facing (tests, examples).
pub fn cylinder_triangles(base: V3, radius: f64, height: f64, segments: usize) -> Vec<Triangle> {
    let n = segments.max(3);
    let ring = |k: usize, z: f64| -> V3 {
        let a = 2.0 * std::f64::consts::PI * (k % n) as f64 / n as f64;
        [
            base[0] + radius * a.cos(),
            base[1] + radius * a.sin(),
            base[2] + z,
        ]
    };
    let (bottom, top) = (
        [base[0], base[1], base[2]],
        [base[0], base[1], base[2] + height],
    );
    let mut out = Vec::with_capacity(4 * n);
    for k in 0..n {
        let (a0, a1) = (ring(k, 0.0), ring(k + 1, 0.0));
        let (b0, b1) = (ring(k, height), ring(k + 1, height));
        out.push([a0, a1, b1]);
        out.push([a0, b1, b0]);
        out.push([bottom, a1, a0]);
        out.push([top, b0, b1]);
    }
    out
}

/// The volume a closed surface encloses (divergence theorem) [m^3].
pub fn enclosed_volume(tris: &[Triangle]) -> f64 {
    tris.iter()
        .map(|t| vec3::dot(t[0], vec3::cross(t[1], t[2])) / 6.0)
        .sum::<f64>()
        .abs()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sites of a unit-cube lattice inside, by brute force on the box itself.
    fn box_sites(
        min: V3,
        max: V3,
        origin: V3,
        dp: f64,
        first: [i64; 3],
        last: [i64; 3],
    ) -> Vec<[i64; 3]> {
        let mut out = Vec::new();
        for k in first[2]..=last[2] {
            for j in first[1]..=last[1] {
                for i in first[0]..=last[0] {
                    let p = [i, j, k];
                    let x: V3 = std::array::from_fn(|a| origin[a] + dp * (p[a] as f64 + 0.5));
                    if (0..3).all(|a| x[a] >= min[a] && x[a] < max[a]) {
                        out.push(p);
                    }
                }
            }
        }
        out
    }

    /// A box whose faces' diagonals pass exactly through lattice rows (y = z on the x faces):
    /// every site is found once, none twice, in the lattice order.
    #[test]
    fn a_box_gives_exactly_its_sites_even_where_rows_graze_its_diagonals() {
        let (min, max) = ([0.0, 0.0, 0.0], [1.0, 1.0, 1.0]);
        for (origin, dp) in [
            ([0.0; 3], 0.1),
            ([-0.3, -0.2, -0.1], 0.05),
            ([0.013, 0.0, 0.0], 0.1),
        ] {
            let first = [-8, -8, -8];
            let last = [30, 30, 30];
            let got =
                lattice_sites_inside(&box_triangles(min, max), origin, dp, first, last).unwrap();
            assert_eq!(
                got,
                box_sites(min, max, origin, dp, first, last),
                "origin {origin:?}, dp {dp}"
            );
        }
    }

    /// The order of the triangles' vertices (either orientation, mixed) does not matter.
    #[test]
    fn orientation_does_not_matter() {
        let mut tris = box_triangles([0.1, 0.2, 0.3], [0.55, 0.6, 0.9]);
        for t in tris.iter_mut().step_by(3) {
            t.swap(1, 2);
        }
        let got = lattice_sites_inside(&tris, [0.0; 3], 0.05, [0; 3], [20; 3]).unwrap();
        assert_eq!(
            got,
            box_sites(
                [0.1, 0.2, 0.3],
                [0.55, 0.6, 0.9],
                [0.0; 3],
                0.05,
                [0; 3],
                [20; 3]
            )
        );
    }

    /// A tetrahedron rotated off the axes, and a faceted sphere: the site count times dp^3 is
    /// the enclosed volume within the lattice's error, and every site agrees with an independent
    /// inside test (ray parity along a skew direction). The tetrahedron's corners are not round
    /// numbers: a site exactly on a face is inside for one test and outside for the other.
    #[test]
    fn skew_and_curved_surfaces_hold_their_volume() {
        let sphere = icosphere([0.5, 0.5, 0.5], 0.4, 3);
        assert!(open_edge(&sphere).is_none());
        let tet = vec![
            [
                [0.1031, 0.1107, 0.0973],
                [0.9013, 0.2081, 0.1517],
                [0.3029, 0.8493, 0.2011],
            ],
            [
                [0.1031, 0.1107, 0.0973],
                [0.3029, 0.8493, 0.2011],
                [0.4007, 0.3983, 0.9521],
            ],
            [
                [0.1031, 0.1107, 0.0973],
                [0.4007, 0.3983, 0.9521],
                [0.9013, 0.2081, 0.1517],
            ],
            [
                [0.9013, 0.2081, 0.1517],
                [0.4007, 0.3983, 0.9521],
                [0.3029, 0.8493, 0.2011],
            ],
        ];
        assert!(open_edge(&tet).is_none());
        for (m, (mesh, tol)) in [(&sphere, 0.01), (&tet, 0.03)].into_iter().enumerate() {
            let dp = 0.01;
            let got = lattice_sites_inside(mesh, [0.0; 3], dp, [0; 3], [99; 3]).unwrap();
            let vol = got.len() as f64 * dp.powi(3);
            let exact = enclosed_volume(mesh);
            assert!((vol - exact).abs() < tol * exact, "{vol} against {exact}");
            let set: std::collections::HashSet<[i64; 3]> = got.iter().copied().collect();
            for k in (0..100).step_by(7) {
                for j in (0..100).step_by(3) {
                    for i in 0..100 {
                        let p = [
                            (i as f64 + 0.5) * dp,
                            (j as f64 + 0.5) * dp,
                            (k as f64 + 0.5) * dp,
                        ];
                        assert_eq!(
                            set.contains(&[i, j, k]),
                            skew_parity(mesh, p),
                            "mesh {m}, site {:?}",
                            [i, j, k]
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn an_empty_index_box_or_a_far_mesh_gives_no_sites() {
        let tris = box_triangles([0.0; 3], [1.0; 3]);
        assert!(lattice_sites_inside(&tris, [0.0; 3], 0.1, [5; 3], [4; 3])
            .unwrap()
            .is_empty());
        assert!(lattice_sites_inside(&tris, [5.0; 3], 0.1, [0; 3], [9; 3])
            .unwrap()
            .is_empty());
    }

    /// A box with one triangle of a face missing: rows through the hole cross the surface once.
    #[test]
    fn a_surface_with_a_hole_is_an_error_naming_a_row() {
        let mut tris = box_triangles([0.0; 3], [1.0; 3]);
        tris.remove(2); // the first triangle of the x = 1 face
        assert!(open_edge(&tris).is_some());
        let err = lattice_sites_inside(&tris, [0.0; 3], 0.1, [0; 3], [9; 3]).unwrap_err();
        assert!(err.contains("crosses the surface 1 times"), "{err}");
    }

    fn skew_parity(tris: &[Triangle], p: V3) -> bool {
        let d = [0.8418206, 0.4466411, 0.3031119];
        tris.iter()
            .filter(|t| ray_crosses_triangle(p, d, t))
            .count()
            % 2
            == 1
    }

    /// A sphere of `levels` subdivisions of an icosahedron.
    fn icosphere(c: V3, r: f64, levels: u32) -> Vec<Triangle> {
        let t = (1.0 + 5f64.sqrt()) / 2.0;
        let mut v: Vec<V3> = [
            [-1.0, t, 0.0],
            [1.0, t, 0.0],
            [-1.0, -t, 0.0],
            [1.0, -t, 0.0],
            [0.0, -1.0, t],
            [0.0, 1.0, t],
            [0.0, -1.0, -t],
            [0.0, 1.0, -t],
            [t, 0.0, -1.0],
            [t, 0.0, 1.0],
            [-t, 0.0, -1.0],
            [-t, 0.0, 1.0],
        ]
        .iter()
        .map(|p| vec3::normalize_or_zero(*p))
        .collect();
        let mut f: Vec<[usize; 3]> = vec![
            [0, 11, 5],
            [0, 5, 1],
            [0, 1, 7],
            [0, 7, 10],
            [0, 10, 11],
            [1, 5, 9],
            [5, 11, 4],
            [11, 10, 2],
            [10, 7, 6],
            [7, 1, 8],
            [3, 9, 4],
            [3, 4, 2],
            [3, 2, 6],
            [3, 6, 8],
            [3, 8, 9],
            [4, 9, 5],
            [2, 4, 11],
            [6, 2, 10],
            [8, 6, 7],
            [9, 8, 1],
        ];
        for _ in 0..levels {
            let mut mid: HashMap<(usize, usize), usize> = HashMap::new();
            let mut m = |a: usize, b: usize, v: &mut Vec<V3>| {
                *mid.entry((a.min(b), a.max(b))).or_insert_with(|| {
                    v.push(vec3::normalize_or_zero(vec3::scale(
                        vec3::add(v[a], v[b]),
                        0.5,
                    )));
                    v.len() - 1
                })
            };
            let mut g = Vec::new();
            for [a, b, cc] in f {
                let (ab, bc, ca) = (m(a, b, &mut v), m(b, cc, &mut v), m(cc, a, &mut v));
                g.extend([[a, ab, ca], [b, bc, ab], [cc, ca, bc], [ab, bc, ca]]);
            }
            f = g;
        }
        f.iter()
            .map(|t| t.map(|k| vec3::add(c, vec3::scale(v[k], r))))
            .collect()
    }
}
