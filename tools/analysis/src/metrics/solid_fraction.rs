//! Solid (volume) fraction of spheres in an axis-aligned box.

use super::sums::{particle_sums, SumInputs, SumRequest};
use crate::region::Aabb;

/// Fraction of a unit sphere's volume below the plane at height t (centre at 0):
/// the cap of height h = 1 + t has volume pi h^2 (3 - h) / 3, i.e. (1 + t)^2 (2 - t) / 4 of
/// the sphere, clamped to 0 below t = -1 and 1 above t = 1.
#[inline]
pub fn sphere_fraction_below(t: f64) -> f64 {
    if t <= -1.0 {
        0.0
    } else if t >= 1.0 {
        1.0
    } else {
        (1.0 + t) * (1.0 + t) * (2.0 - t) / 4.0
    }
}

/// Fraction of the sphere (centre `c`, radius `r`) inside `b`: the product over the three axes
/// of the exact fraction inside each slab `[min_k, max_k]`. Exact when at most one axis cuts the
/// sphere (and, by symmetry, when the cutting planes pass through the centre); an approximation
/// only for spheres straddling an edge or corner of the box off-centre.
#[inline]
pub fn sphere_fraction_inside(c: [f64; 3], r: f64, b: &Aabb) -> f64 {
    if r <= 0.0 {
        let inside = (0..3).all(|k| c[k] >= b.min[k] && c[k] < b.max[k]);
        return inside as u8 as f64;
    }
    (0..3)
        .map(|k| {
            sphere_fraction_below((b.max[k] - c[k]) / r)
                - sphere_fraction_below((b.min[k] - c[k]) / r)
        })
        .product()
}

/// Volume of a sphere, 4/3 pi r^3 [m^3].
#[inline]
pub fn sphere_volume(r: f64) -> f64 {
    4.0 / 3.0 * std::f64::consts::PI * r * r * r
}

/// Volume of the sphere inside `b` [m^3] ([`sphere_fraction_inside`]).
#[inline]
pub fn sphere_volume_inside(c: [f64; 3], r: f64, b: &Aabb) -> f64 {
    sphere_volume(r) * sphere_fraction_inside(c, r, b)
}

/// Where a sphere lies relative to a box: wholly inside, cut by a face, or (neither) outside
/// or not finite. Computed without branches.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Placement {
    pub inside: bool,
    pub cut: bool,
}

impl Placement {
    #[inline]
    #[allow(clippy::needless_range_loop)] // one axis index across centre and box
    pub fn of(c: [f64; 3], r: f64, b: &Aabb) -> Self {
        // `&`, not `&&`: no branch per comparison. NaN fails every comparison.
        let (mut inside, mut near) = (true, true);
        for k in 0..3 {
            inside &= (c[k] - r >= b.min[k]) & (c[k] + r <= b.max[k]);
            near &= (c[k] + r >= b.min[k]) & (c[k] - r <= b.max[k]);
        }
        Self {
            inside,
            cut: near & !inside,
        }
    }
}

/// Solid fraction phi = sum_i V_i f_i / V_box [-]: V_i = 4/3 pi r_i^3 and f_i the fraction of
/// sphere i inside the box ([`sphere_fraction_inside`]), so spheres cut by the box faces count
/// by the part inside rather than all-or-nothing by their centre. Overlaps between spheres are
/// counted twice (they are small in DEM). Non-finite positions are left out.
pub fn solid_fraction(positions: &[[f32; 3]], radii: &[f32], region: &Aabb) -> f64 {
    let request = SumRequest {
        solid_region: Some(*region),
        ..Default::default()
    };
    let inputs = SumInputs {
        positions: Some(positions),
        radii: Some(radii),
        ..SumInputs::default()
    };
    particle_sums(inputs, &request).solid_volume / region.volume()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::f64::consts::PI;

    fn lattice(l: usize, d: f32, offset: f32) -> Vec<[f32; 3]> {
        let mut v = Vec::new();
        for z in 0..l {
            for y in 0..l {
                for x in 0..l {
                    v.push([x, y, z].map(|k| k as f32 * d + offset));
                }
            }
        }
        v
    }

    #[test]
    fn cap_fraction_by_hand() {
        assert_eq!(sphere_fraction_below(0.0), 0.5);
        assert_eq!(sphere_fraction_below(-2.0), 0.0);
        assert_eq!(sphere_fraction_below(1.0), 1.0);
        // Cap of height 1/2 (t = -1/2): pi (1/4)(5/2)/3 / (4 pi / 3) = 5/32.
        assert!((sphere_fraction_below(-0.5) - 5.0 / 32.0).abs() < 1e-15);
    }

    #[test]
    fn simple_cubic_packing_is_pi_over_six() {
        // Touching spheres (d = 2r) with centres at (k + 1/2) d: the box [0, 10d]^3 holds 1000
        // whole spheres, phi = 1000 (4/3 pi r^3) / (10 d)^3 = pi / 6.
        let (r, d) = (0.05f32, 0.1f32);
        let pos = lattice(10, d, 0.5 * d);
        let b = Aabb::new([0.0; 3], [1.0; 3]).unwrap();
        let phi = solid_fraction(&pos, &vec![r; pos.len()], &b);
        assert!((phi - PI / 6.0).abs() < 1e-6, "{phi}");
    }

    #[test]
    fn faces_through_centres_count_halves_exactly() {
        // Centres at k d, k = 0..=10, box [0, 10 d]^3: face spheres count 1/2, edges 1/4, corners
        // 1/8, which adds up to exactly 10^3 spheres: phi = pi / 6 again.
        let (r, d) = (0.05f32, 0.1f32);
        let pos = lattice(11, d, 0.0);
        let b = Aabb::new([0.0; 3], [1.0; 3]).unwrap();
        let phi = solid_fraction(&pos, &vec![r; pos.len()], &b);
        assert!((phi - PI / 6.0).abs() < 1e-5, "{phi}");
    }

    #[test]
    fn outside_and_non_finite_spheres_do_not_count() {
        let b = Aabb::new([0.0; 3], [1.0; 3]).unwrap();
        let phi = solid_fraction(&[[2.0, 0.5, 0.5], [f32::NAN, 0.5, 0.5]], &[0.1, 0.1], &b);
        assert_eq!(phi, 0.0);
    }
}
