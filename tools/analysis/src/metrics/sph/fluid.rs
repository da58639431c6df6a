//! One pass over the fluid particles of an SPH frame: their count and mass, kinetic and
//! potential energy, speeds, centre of mass, and the surge front.
//!
//! In an SPH run the boundary particles are the tank's walls, not matter that moves: the
//! energies, speeds and centre of mass of an SPH frame are those of the fluid (the same JSON
//! keys and CSV columns as for DEM grains). The per-particle terms are the DEM metrics' own
//! ([`super::super::energy`], [`super::super::motion`]), so each formula has one
//! implementation.

use std::str::FromStr;

use super::run::FluidSelector;
use crate::metrics::energy::{kinetic_term, potential_term};
use crate::metrics::motion::speed_of;
use crate::par::map_chunks;

/// Direction along which the surge front is measured (`--surge-axis`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SurgeAxis {
    /// 0 = x, 1 = y, 2 = z.
    pub axis: usize,
    /// +1 or -1.
    pub sign: i8,
}

impl Default for SurgeAxis {
    /// +x: the dam breaks of SPHERIC and of Martin & Moyce run along +x.
    fn default() -> Self {
        Self { axis: 0, sign: 1 }
    }
}

impl SurgeAxis {
    pub fn name(self) -> &'static str {
        match (self.sign > 0, self.axis) {
            (true, 0) => "+x",
            (true, 1) => "+y",
            (true, _) => "+z",
            (false, 0) => "-x",
            (false, 1) => "-y",
            (false, _) => "-z",
        }
    }
}

impl FromStr for SurgeAxis {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let w = s.trim();
        let (sign, rest) = match w.as_bytes().first() {
            Some(b'-') => (-1, &w[1..]),
            Some(b'+') => (1, &w[1..]),
            _ => (1, w),
        };
        let axis = match rest {
            "x" => 0,
            "y" => 1,
            "z" => 2,
            _ => {
                return Err(format!(
                    "{s:?} is not an axis: one of +x, -x, +y, -y, +z, -z"
                ))
            }
        };
        Ok(Self { axis, sign })
    }
}

/// Arrays of the pass, in frame order.
#[derive(Clone, Copy)]
pub struct FluidInputs<'a> {
    pub positions: Option<&'a [[f32; 3]]>,
    pub velocities: Option<&'a [[f32; 3]]>,
    /// [kg]
    pub masses: &'a [f64],
    /// [m]; read by the surge front only (0 when missing).
    pub radii: Option<&'a [f32]>,
    pub fluid: FluidSelector<'a>,
}

/// What the pass computes besides the count and mass (each needs its array).
#[derive(Clone, Copy, Debug, Default)]
pub struct FluidRequest {
    pub kinetic: bool,
    /// Gravity [m/s^2] and the reference point of the potential energy [m].
    pub potential: Option<([f64; 3], [f64; 3])>,
    pub speeds: bool,
    pub center_of_mass: bool,
    pub surge: Option<SurgeAxis>,
}

/// Totals over the fluid particles (zero for what was not requested).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FluidSums {
    pub count: u64,
    /// sum m [kg]
    pub mass: f64,
    /// sum 1/2 m |v|^2 [J]
    pub kinetic: f64,
    /// -sum m g . (x - x_ref) [J]
    pub potential: f64,
    /// Largest finite speed, sum and count of the finite speeds [m/s].
    pub max_speed: f64,
    pub speed_sum: f64,
    pub speed_count: u64,
    /// sum m x [kg m] and the count of finite positions in it.
    pub mass_moment: [f64; 3],
    pub position_count: u64,
    /// max of s x_a + r over the fluid (s, a the surge axis' sign and axis) [m]; -inf for none.
    pub front: f64,
}

impl Default for FluidSums {
    fn default() -> Self {
        Self {
            count: 0,
            mass: 0.0,
            kinetic: 0.0,
            potential: 0.0,
            max_speed: 0.0,
            speed_sum: 0.0,
            speed_count: 0,
            mass_moment: [0.0; 3],
            position_count: 0,
            front: f64::NEG_INFINITY,
        }
    }
}

impl FluidSums {
    fn merge(mut self, o: FluidSums) -> FluidSums {
        self.count += o.count;
        self.mass += o.mass;
        self.kinetic += o.kinetic;
        self.potential += o.potential;
        self.max_speed = self.max_speed.max(o.max_speed);
        self.speed_sum += o.speed_sum;
        self.speed_count += o.speed_count;
        for k in 0..3 {
            self.mass_moment[k] += o.mass_moment[k];
        }
        self.position_count += o.position_count;
        self.front = self.front.max(o.front);
        self
    }

    /// Largest and mean fluid speed [m/s] (`None` without a finite one).
    pub fn speeds(&self) -> Option<(f64, f64)> {
        (self.speed_count > 0).then(|| (self.max_speed, self.speed_sum / self.speed_count as f64))
    }

    /// Centre of mass of the fluid, sum m x / sum m [m] (`None` without fluid or mass).
    pub fn center_of_mass(&self) -> Option<[f64; 3]> {
        (self.position_count > 0 && self.mass > 0.0)
            .then(|| self.mass_moment.map(|v| v / self.mass))
    }

    /// The surge front along `axis` [m], a world coordinate: the farthest fluid particle's
    /// centre plus its radius (half the spacing: a particle stands for the cell of side dp
    /// around it, as the solver's water-column validation measures it), i.e. max x + r along
    /// +x, min x - r along -x. `None` without a finite fluid position.
    pub fn surge_front(&self, axis: SurgeAxis) -> Option<f64> {
        self.front
            .is_finite()
            .then(|| f64::from(axis.sign) * self.front)
    }
}

/// The requested sums over the fluid particles, in fixed chunks combined in order (the same
/// bits for any thread count). Arrays shorter than the masses end the pass early; a particle
/// with a non-finite position or velocity is left out of what needs it (a non-finite energy
/// would hide every other particle's).
pub fn fluid_sums(inp: FluidInputs<'_>, q: &FluidRequest) -> FluidSums {
    let lens = [
        Some(inp.masses.len()),
        inp.radii.filter(|_| q.surge.is_some()).map(<[_]>::len),
        inp.positions.map(<[_]>::len),
        inp.velocities.map(<[_]>::len),
    ];
    let n = lens.iter().flatten().copied().min().unwrap_or(0);
    let x = inp.positions.unwrap_or_default();
    let v = inp.velocities.unwrap_or_default();
    let radius = |i: usize| inp.radii.map_or(0.0, |r| r[i] as f64);
    let wants_x = q.potential.is_some() || q.center_of_mass || q.surge.is_some();
    let wants_v = q.kinetic || q.speeds;
    map_chunks(n, |range| {
        let mut s = FluidSums::default();
        for i in range {
            if !inp.fluid.is_fluid(i) {
                continue;
            }
            let m = inp.masses[i];
            s.count += 1;
            s.mass += m;
            if wants_v && !v.is_empty() {
                let vi = &v[i];
                let speed = speed_of(vi);
                if speed.is_finite() {
                    if q.kinetic {
                        s.kinetic += kinetic_term(m, vi);
                    }
                    if q.speeds {
                        s.max_speed = s.max_speed.max(speed as f64);
                        s.speed_sum += speed as f64;
                        s.speed_count += 1;
                    }
                }
            }
            if wants_x && !x.is_empty() {
                let xi = &x[i];
                if !xi.iter().all(|c| c.is_finite()) {
                    continue;
                }
                if let Some((g, reference)) = q.potential {
                    s.potential += potential_term(m, g, xi, reference);
                }
                if q.center_of_mass {
                    for (moment, &c) in s.mass_moment.iter_mut().zip(xi) {
                        *moment += m * c as f64;
                    }
                    s.position_count += 1;
                }
                if let Some(a) = q.surge {
                    let along = f64::from(a.sign) * xi[a.axis] as f64 + radius(i);
                    s.front = s.front.max(along);
                }
            }
        }
        s
    })
    .into_iter()
    .fold(FluidSums::default(), FluidSums::merge)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_parse_and_name() {
        for w in ["+x", "-x", "+y", "-y", "+z", "-z"] {
            assert_eq!(w.parse::<SurgeAxis>().map(|a| a.name()), Ok(w));
        }
        assert_eq!("x".parse::<SurgeAxis>(), Ok(SurgeAxis::default()));
        assert!("w".parse::<SurgeAxis>().unwrap_err().contains("+x"));
    }

    /// Three fluid particles and a boundary one (kind 2) far ahead and heavy.
    #[test]
    fn only_the_fluid_counts() {
        let x = [
            [0.1, 0.0, 0.2],
            [0.3, 0.0, 0.1],
            [0.2, 0.0, 0.0],
            [5.0, 0.0, 3.0],
        ];
        let v = [
            [3.0, 4.0, 0.0],
            [0.0, 0.0, 1.0],
            [0.0; 3],
            [100.0, 0.0, 0.0],
        ];
        let m = [2.0, 2.0, 4.0, 1e6];
        let r = [0.01f32; 4];
        let kinds = [1, 1, 1, 2];
        let inp = FluidInputs {
            positions: Some(&x),
            velocities: Some(&v),
            masses: &m,
            radii: Some(&r),
            fluid: FluidSelector::Kinds(&kinds),
        };
        let q = FluidRequest {
            kinetic: true,
            potential: Some(([0.0, 0.0, -10.0], [0.0; 3])),
            speeds: true,
            center_of_mass: true,
            surge: Some(SurgeAxis::default()),
        };
        let s = fluid_sums(inp, &q);
        assert_eq!((s.count, s.mass), (3, 8.0));
        // 1/2 (2 * 25 + 2 * 1) = 26 J.
        assert_eq!(s.kinetic, 26.0);
        // 10 (2 * 0.2 + 2 * 0.1 + 0) = 6 J (z in f32).
        let z = |v: f32| v as f64;
        assert!((s.potential - 10.0 * (2.0 * z(0.2) + 2.0 * z(0.1))).abs() < 1e-12);
        assert_eq!(s.speeds(), Some((5.0, 2.0)));
        let com = s.center_of_mass().expect("com");
        let want_x = (2.0 * z(0.1) + 2.0 * z(0.3) + 4.0 * z(0.2)) / 8.0;
        assert!((com[0] - want_x).abs() < 1e-12, "{com:?}");
        // Front: x = 0.3 plus r = 0.01 (the boundary particle at x = 5 is not fluid).
        let front = s.surge_front(SurgeAxis::default()).expect("front");
        assert!((front - (z(0.3) + z(0.01))).abs() < 1e-12, "{front}");
        // Along -x: the smallest x minus r.
        let back = fluid_sums(
            inp,
            &FluidRequest {
                surge: Some("-x".parse().expect("axis")),
                ..Default::default()
            },
        );
        let a = "-x".parse().expect("axis");
        assert!((back.surge_front(a).expect("front") - (z(0.1) - z(0.01))).abs() < 1e-12);
    }

    #[test]
    fn no_fluid_gives_no_front_and_no_centre() {
        let x = [[0.0; 3]];
        let inp = FluidInputs {
            positions: Some(&x),
            velocities: None,
            masses: &[1.0],
            radii: Some(&[0.01]),
            fluid: FluidSelector::Kinds(&[2]),
        };
        let q = FluidRequest {
            center_of_mass: true,
            surge: Some(SurgeAxis::default()),
            speeds: true,
            ..Default::default()
        };
        let s = fluid_sums(inp, &q);
        assert_eq!(s.count, 0);
        assert_eq!(s.surge_front(SurgeAxis::default()), None);
        assert_eq!(s.center_of_mass(), None);
        assert_eq!(s.speeds(), None);
    }
}
