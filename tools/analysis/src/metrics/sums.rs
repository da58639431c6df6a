//! One pass over the particles for every metric that is a sum over particles: kinetic energies,
//! potential energy, speeds, centre of mass and solid fraction.
//!
//! These metrics are memory bound: run one after the other they read the positions twice, the
//! velocities twice and the masses three times (1.1 GB per 10 M-particle frame); together, each
//! array once (0.5 GB). The per-particle terms are the functions of [`super::energy`],
//! [`super::motion`] and [`super::solid_fraction`]; their public metric functions call this
//! pass with one request, so each formula has one implementation.

use super::energy::{kinetic_term, potential_term, rotational_term, Masses};
use super::motion::speed_of;
use super::solid_fraction::{sphere_volume, sphere_volume_inside, Placement};
use crate::par::map_chunks;
use crate::region::Aabb;

/// Arrays for [`particle_sums`], in frame order. A sum whose arrays are missing is left at
/// zero; all sums run over the particles of the shortest array given.
#[derive(Clone, Copy, Default)]
pub struct SumInputs<'a> {
    pub positions: Option<&'a [[f32; 3]]>,
    pub velocities: Option<&'a [[f32; 3]]>,
    pub angular_velocities: Option<&'a [[f32; 3]]>,
    /// [kg]
    pub mass: Option<&'a [f64]>,
    /// [m]
    pub radii: Option<&'a [f32]>,
}

impl<'a> SumInputs<'a> {
    /// Masses and radii of `m`, no frame arrays yet.
    pub fn with_masses(m: Masses<'a>) -> Self {
        Self {
            mass: Some(m.mass),
            radii: Some(m.radii),
            ..Self::default()
        }
    }
}

/// Which sums to compute.
#[derive(Clone, Copy, Debug, Default)]
pub struct SumRequest {
    pub kinetic_translational: bool,
    pub kinetic_rotational: bool,
    /// Gravity [m/s^2] and reference point [m] of the potential energy.
    pub potential: Option<([f64; 3], [f64; 3])>,
    pub speeds: bool,
    pub center_of_mass: bool,
    pub solid_region: Option<Aabb>,
}

/// Totals of one pass (zero for what was not requested or lacked its input).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Sums {
    /// sum 1/2 m |v|^2 [J]
    pub kinetic_translational: f64,
    /// sum 1/2 I |w|^2 [J]
    pub kinetic_rotational: f64,
    /// -sum m g . (x - x_ref) [J]
    pub potential: f64,
    /// Largest finite speed [m/s], sum of finite speeds [m/s] and their count.
    pub max_speed: f64,
    pub speed_sum: f64,
    pub speed_count: usize,
    /// sum m x [kg m], sum m [kg], sum x [m] and the count of positions.
    pub mass_moment: [f64; 3],
    pub mass: f64,
    pub position_sum: [f64; 3],
    pub position_count: usize,
    /// Solid volume inside the requested region [m^3].
    pub solid_volume: f64,
}

impl Sums {
    fn merge(mut self, o: Sums) -> Sums {
        self.kinetic_translational += o.kinetic_translational;
        self.kinetic_rotational += o.kinetic_rotational;
        self.potential += o.potential;
        self.max_speed = self.max_speed.max(o.max_speed);
        self.speed_sum += o.speed_sum;
        self.speed_count += o.speed_count;
        for k in 0..3 {
            self.mass_moment[k] += o.mass_moment[k];
            self.position_sum[k] += o.position_sum[k];
        }
        self.mass += o.mass;
        self.position_count += o.position_count;
        self.solid_volume += o.solid_volume;
        self
    }
}

/// The requested sums over all particles, in fixed chunks combined in order (the same bits
/// for any thread count).
pub fn particle_sums(inputs: SumInputs<'_>, request: &SumRequest) -> Sums {
    let lens = [
        inputs.positions.map(<[_]>::len),
        inputs.velocities.map(<[_]>::len),
        inputs.angular_velocities.map(<[_]>::len),
        inputs.mass.map(<[_]>::len),
        inputs.radii.map(<[_]>::len),
    ];
    let n = lens.iter().flatten().copied().min().unwrap_or(0);
    let (x, v, w) = (
        inputs.positions.is_some(),
        inputs.velocities.is_some(),
        inputs.angular_velocities.is_some(),
    );
    let (m, r) = (inputs.mass.is_some(), inputs.radii.is_some());
    // What can be computed from the arrays at hand.
    let q = SumRequest {
        kinetic_translational: request.kinetic_translational && v && m,
        kinetic_rotational: request.kinetic_rotational && w && m && r,
        potential: request.potential.filter(|_| x && m),
        speeds: request.speeds && v,
        center_of_mass: request.center_of_mass && x && m,
        solid_region: request.solid_region.filter(|_| x && r),
    };
    let arrays = Arrays {
        x: inputs.positions.unwrap_or_default(),
        v: inputs.velocities.unwrap_or_default(),
        w: inputs.angular_velocities.unwrap_or_default(),
        m: inputs.mass.unwrap_or_default(),
        r: inputs.radii.unwrap_or_default(),
    };
    map_chunks(n, |range| chunk_sums(&arrays, &q, range))
        .into_iter()
        .fold(Sums::default(), Sums::merge)
}

/// The arrays of [`SumInputs`]; an array is read only by the sums that were checked to have it
/// (with at least the particles of the pass).
struct Arrays<'a> {
    x: &'a [[f32; 3]],
    v: &'a [[f32; 3]],
    w: &'a [[f32; 3]],
    m: &'a [f64],
    r: &'a [f32],
}

/// Particles per block: each requested sum runs as its own tight loop over the block, so the
/// loops stay simple enough to vectorise while the block's arrays (about 250 kB) are still in
/// cache for the next sum: memory is read once, as in a single loop.
const BLOCK: usize = 4096;
const _: () = assert!(
    BLOCK <= 1 << 16,
    "solid_volume lists cut spheres by u16 offset"
);

/// [`particle_sums`] over the particles `range`, block by block.
fn chunk_sums(a: &Arrays<'_>, q: &SumRequest, range: std::ops::Range<usize>) -> Sums {
    let mut s = Sums::default();
    let mut start = range.start;
    while start < range.end {
        let b = start..(start + BLOCK).min(range.end);
        start = b.end;
        if q.kinetic_translational {
            s.kinetic_translational += kinetic_sum(&a.m[b.clone()], &a.v[b.clone()]);
        }
        if q.speeds {
            let (max, sum, count) = speed_sums(&a.v[b.clone()]);
            s.max_speed = s.max_speed.max(max);
            s.speed_sum += sum;
            s.speed_count += count;
        }
        if q.kinetic_rotational {
            let (m, r, w) = (&a.m[b.clone()], &a.r[b.clone()], &a.w[b.clone()]);
            s.kinetic_rotational += rotational_sum(m, r, w);
        }
        if let Some((g, reference)) = q.potential {
            s.potential += potential_sum(&a.m[b.clone()], &a.x[b.clone()], g, reference);
        }
        if q.center_of_mass {
            let (moment, mass, sum) = mass_sums(&a.m[b.clone()], &a.x[b.clone()]);
            for k in 0..3 {
                s.mass_moment[k] += moment[k];
                s.position_sum[k] += sum[k];
            }
            s.mass += mass;
            s.position_count += b.len();
        }
        if let Some(region) = &q.solid_region {
            s.solid_volume += solid_volume(&a.x[b.clone()], &a.r[b], region);
        }
    }
    s
}

/// Sum of `term(i)` for i in 0..n in four interleaved partial sums (one chain of dependent
/// additions waits four cycles per term; four chains vectorise).
#[inline(always)]
fn sum4(n: usize, term: impl Fn(usize) -> f64) -> f64 {
    let mut acc = [0.0f64; 4];
    let full = n / 4 * 4;
    let mut i = 0;
    while i < full {
        for (l, a) in acc.iter_mut().enumerate() {
            *a += term(i + l);
        }
        i += 4;
    }
    for j in full..n {
        acc[j - full] += term(j);
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3])
}

#[inline(never)]
fn kinetic_sum(m: &[f64], v: &[[f32; 3]]) -> f64 {
    let v = &v[..m.len()];
    sum4(m.len(), |i| kinetic_term(m[i], &v[i]))
}

#[inline(never)]
fn rotational_sum(m: &[f64], r: &[f32], w: &[[f32; 3]]) -> f64 {
    let (r, w) = (&r[..m.len()], &w[..m.len()]);
    sum4(m.len(), |i| rotational_term(m[i], r[i], &w[i]))
}

#[inline(never)]
fn potential_sum(m: &[f64], x: &[[f32; 3]], g: [f64; 3], reference: [f64; 3]) -> f64 {
    let x = &x[..m.len()];
    sum4(m.len(), |i| potential_term(m[i], g, &x[i], reference))
}

/// sum m x, sum m and sum x (seven independent sums: one loop keeps the adders busy).
#[inline(never)]
fn mass_sums(m: &[f64], x: &[[f32; 3]]) -> ([f64; 3], f64, [f64; 3]) {
    let (mut moment, mut mass, mut sum) = ([0.0f64; 3], 0.0f64, [0.0f64; 3]);
    for (&mi, xi) in m.iter().zip(x) {
        let p = xi.map(f64::from);
        for k in 0..3 {
            moment[k] += mi * p[k];
            sum[k] += p[k];
        }
        mass += mi;
    }
    (moment, mass, sum)
}

/// Largest finite speed, sum and count of the finite speeds: branch-free, four lanes.
#[inline(never)]
fn speed_sums(v: &[[f32; 3]]) -> (f64, f64, usize) {
    let (mut max, mut sum, mut n) = ([0.0f32; 4], [0.0f64; 4], [0usize; 4]);
    let mut groups = v.chunks_exact(4);
    for g in &mut groups {
        for l in 0..4 {
            let s = speed_of(&g[l]);
            let ok = s < f32::INFINITY;
            max[l] = if ok && s > max[l] { s } else { max[l] };
            sum[l] += if ok { s as f64 } else { 0.0 };
            n[l] += ok as usize;
        }
    }
    for (l, v) in groups.remainder().iter().enumerate() {
        let s = speed_of(v);
        if s < f32::INFINITY {
            max[l] = max[l].max(s);
            sum[l] += s as f64;
            n[l] += 1;
        }
    }
    let m = max.iter().fold(0.0f32, |a, &b| a.max(b));
    (
        m as f64,
        (sum[0] + sum[1]) + (sum[2] + sum[3]),
        n.iter().sum(),
    )
}

/// Solid volume inside `region` of the spheres `x`, `r` (at most 65,536). Spheres wholly inside
/// or outside are added without branches (in a shuffled frame inside and outside alternate at
/// random, and a branch per sphere tripled the time); the few cut by a face are listed without
/// a branch too and then computed exactly.
#[inline(never)]
fn solid_volume(x: &[[f32; 3]], r: &[f32], region: &Aabb) -> f64 {
    let (mut whole, mut cut, mut cuts) = (0.0f64, vec![0u16; x.len()], 0);
    for (j, (p, &rad)) in x.iter().zip(r).enumerate() {
        let (c, rad) = (p.map(f64::from), rad as f64);
        let place = Placement::of(c, rad, region);
        whole += sphere_volume(rad) * f64::from(u8::from(place.inside));
        cut[cuts] = j as u16;
        cuts += usize::from(place.cut);
    }
    let cut: f64 = cut[..cuts]
        .iter()
        .map(|&j| sphere_volume_inside(x[j as usize].map(f64::from), r[j as usize] as f64, region))
        .sum();
    whole + cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{energy, motion, solid_fraction};

    type Vec3s = Vec<[f32; 3]>;

    /// A few blocks of particles (positions, velocities, spins, masses, radii), some
    /// non-finite, some cut by the region's faces.
    fn particles(n: usize) -> (Vec3s, Vec3s, Vec3s, Vec<f64>, Vec<f32>) {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 40) as f32 / (1u64 << 24) as f32
        };
        let mut pos: Vec<[f32; 3]> = (0..n).map(|_| [rnd(), rnd(), rnd()]).collect();
        let mut vel: Vec<[f32; 3]> = (0..n).map(|_| [rnd() - 0.5, rnd(), 2.0 * rnd()]).collect();
        let spin: Vec<[f32; 3]> = (0..n).map(|_| [rnd(), rnd() * 10.0, 0.0]).collect();
        let radii: Vec<f32> = (0..n).map(|_| 0.01 + 0.02 * rnd()).collect();
        let mass: Vec<f64> = radii
            .iter()
            .map(|&r| energy::sphere_mass(2500.0, r as f64))
            .collect();
        pos[7] = [f32::NAN, 0.5, 0.5];
        vel[9] = [f32::INFINITY, 0.0, 0.0];
        (pos, vel, spin, mass, radii)
    }

    #[test]
    fn one_pass_gives_the_bits_of_each_metric_alone() {
        let n = 3 * BLOCK + 123;
        let (pos, vel, spin, mass, radii) = particles(n);
        let m = Masses {
            mass: &mass,
            radii: &radii,
        };
        let region = Aabb::new([0.1, 0.0, 0.0], [0.9, 1.0, 0.5]).unwrap();
        let (g, reference) = ([0.0, 0.0, -9.81], [0.0, 0.0, -1.0]);
        let all = SumRequest {
            kinetic_translational: true,
            kinetic_rotational: true,
            potential: Some((g, reference)),
            speeds: true,
            center_of_mass: true,
            solid_region: Some(region),
        };
        let inputs = SumInputs {
            positions: Some(&pos),
            velocities: Some(&vel),
            angular_velocities: Some(&spin),
            ..SumInputs::with_masses(m)
        };
        let s = particle_sums(inputs, &all);
        // The velocity of particle 9 is infinite: its kinetic energy is too.
        assert_eq!(s.kinetic_translational, f64::INFINITY);
        let finite_vel: Vec<[f32; 3]> = vel
            .iter()
            .map(|v| if v[0].is_finite() { *v } else { [0.0; 3] })
            .collect();
        let e_t = energy::kinetic_energy_translational(&finite_vel, m);
        let by_hand: f64 = (0..n)
            .map(|i| energy::kinetic_term(mass[i], &finite_vel[i]))
            .sum();
        assert!(
            (e_t - by_hand).abs() < 1e-12 * by_hand,
            "{e_t} vs {by_hand}"
        );
        assert_eq!(
            s.kinetic_rotational,
            energy::kinetic_energy_rotational(&spin, m)
        );
        let potential = energy::potential_energy(&pos, m, g, reference);
        assert_eq!(s.potential.to_bits(), potential.to_bits());
        assert!(potential.is_nan(), "particle 7 has a NaN position");
        assert_eq!(motion::speeds_from(&s), motion::speeds(&vel));
        assert!(motion::speeds(&vel).unwrap().1 > 0.0);
        assert_eq!(
            s.solid_volume / region.volume(),
            solid_fraction::solid_fraction(&pos, &radii, &region)
        );
        // Every solid-fraction sphere counted exactly: against a plain sum of the formula.
        let by_hand: f64 = (0..n)
            .filter(|&i| pos[i][0].is_finite())
            .map(|i| {
                let c = pos[i].map(f64::from);
                solid_fraction::sphere_volume_inside(c, radii[i] as f64, &region)
            })
            .sum();
        assert!((s.solid_volume - by_hand).abs() < 1e-12 * by_hand);
        // NaN x from particle 7 (NaN != NaN: compare bits).
        let bits = |c: [f64; 3]| c.map(f64::to_bits);
        let com = motion::center_of_mass(&pos, m).unwrap();
        assert_eq!(motion::center_of_mass_from(&s).map(bits), Some(bits(com)));
        assert!(com[0].is_nan() && com[1].is_finite());
    }

    #[test]
    fn missing_or_short_arrays_leave_their_sums_at_zero() {
        let (pos, vel, _, mass, radii) = particles(100);
        let m = Masses {
            mass: &mass,
            radii: &radii,
        };
        let request = SumRequest {
            kinetic_translational: true,
            kinetic_rotational: true,
            speeds: true,
            ..Default::default()
        };
        let inputs = SumInputs {
            positions: Some(&pos[..50]),
            velocities: Some(&vel),
            ..SumInputs::with_masses(m)
        };
        let s = particle_sums(inputs, &request);
        assert_eq!(s.kinetic_rotational, 0.0, "no spins given");
        assert_eq!(
            s.speed_count, 49,
            "50 particles (the shortest array), one infinite"
        );
    }
}
