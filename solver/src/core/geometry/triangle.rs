//! Closest point on a triangle (Ericson, "Real-Time Collision Detection", 2005, sec. 5.1.5).

use crate::core::stl::Triangle;
use crate::core::vec3::{self, V3};

/// Which feature of the triangle the closest point lies on. Face contacts come first when a
/// particle touches several triangles of one mesh (see `cpu::mesh_contacts`).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TriRegion {
    Face = 0,
    Edge = 1,
    Vertex = 2,
}

/// Area of a triangle [m^2].
pub fn triangle_area(t: &Triangle) -> f64 {
    0.5 * vec3::norm(vec3::cross(vec3::sub(t[1], t[0]), vec3::sub(t[2], t[0])))
}

/// Closest point of triangle (a, b, c) to p, and the region it lies in. Ericson's
/// `ClosestPtPointTriangle`: Voronoi regions of the vertices, then edges, then the face, using
/// barycentric coordinates from dot products only (no square roots). The triangle must not be
/// degenerate (zero area); meshes drop such triangles when loaded.
pub fn closest_point_on_triangle(p: V3, a: V3, b: V3, c: V3) -> (V3, TriRegion) {
    let ab = vec3::sub(b, a);
    let ac = vec3::sub(c, a);
    let ap = vec3::sub(p, a);
    let d1 = vec3::dot(ab, ap);
    let d2 = vec3::dot(ac, ap);
    if d1 <= 0.0 && d2 <= 0.0 {
        return (a, TriRegion::Vertex);
    }
    let bp = vec3::sub(p, b);
    let d3 = vec3::dot(ab, bp);
    let d4 = vec3::dot(ac, bp);
    if d3 >= 0.0 && d4 <= d3 {
        return (b, TriRegion::Vertex);
    }
    let vc = d1 * d4 - d3 * d2;
    if vc <= 0.0 && d1 >= 0.0 && d3 <= 0.0 {
        let v = d1 / (d1 - d3);
        return (vec3::axpy(a, ab, v), TriRegion::Edge);
    }
    let cp = vec3::sub(p, c);
    let d5 = vec3::dot(ab, cp);
    let d6 = vec3::dot(ac, cp);
    if d6 >= 0.0 && d5 <= d6 {
        return (c, TriRegion::Vertex);
    }
    let vb = d5 * d2 - d1 * d6;
    if vb <= 0.0 && d2 >= 0.0 && d6 <= 0.0 {
        let w = d2 / (d2 - d6);
        return (vec3::axpy(a, ac, w), TriRegion::Edge);
    }
    let va = d3 * d6 - d5 * d4;
    if va <= 0.0 && (d4 - d3) >= 0.0 && (d5 - d6) >= 0.0 {
        let w = (d4 - d3) / ((d4 - d3) + (d5 - d6));
        return (vec3::axpy(b, vec3::sub(c, b), w), TriRegion::Edge);
    }
    let denom = 1.0 / (va + vb + vc);
    let v = vb * denom;
    let w = vc * denom;
    (
        vec3::add(a, vec3::add(vec3::scale(ab, v), vec3::scale(ac, w))),
        TriRegion::Face,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const A: V3 = [0.0, 0.0, 0.0];
    const B: V3 = [1.0, 0.0, 0.0];
    const C: V3 = [0.0, 1.0, 0.0];

    #[test]
    fn regions() {
        let (q, r) = closest_point_on_triangle([0.2, 0.2, 1.0], A, B, C);
        assert_eq!(r, TriRegion::Face);
        assert!(vec3::norm(vec3::sub(q, [0.2, 0.2, 0.0])) < 1e-15);
        assert_eq!(
            closest_point_on_triangle([-1.0, -1.0, 0.3], A, B, C),
            (A, TriRegion::Vertex)
        );
        assert_eq!(
            closest_point_on_triangle([2.0, -0.5, 0.0], A, B, C),
            (B, TriRegion::Vertex)
        );
        assert_eq!(
            closest_point_on_triangle([0.5, -1.0, 0.0], A, B, C),
            ([0.5, 0.0, 0.0], TriRegion::Edge)
        );
        let (q, r) = closest_point_on_triangle([1.0, 1.0, 0.0], A, B, C);
        assert_eq!(r, TriRegion::Edge);
        assert!((q[0] - 0.5).abs() < 1e-15 && (q[1] - 0.5).abs() < 1e-15);
    }

    proptest! {
        /// The result is no farther than any sampled point of the triangle.
        #[test]
        fn is_closest(p in proptest::array::uniform3(-3.0f64..3.0), u in 0.0f64..1.0, v in 0.0f64..1.0) {
            let (q, _) = closest_point_on_triangle(p, A, B, C);
            let (u, v) = if u + v > 1.0 { (1.0 - u, 1.0 - v) } else { (u, v) };
            let s = [u, v, 0.0];
            prop_assert!(vec3::norm(vec3::sub(p, q)) <= vec3::norm(vec3::sub(p, s)) + 1e-12);
        }
    }
}
