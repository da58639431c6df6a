//! The documented range of every number in the case format (the case-file reference).
//!
//! Every float must be finite. The ranges are wide (they admit anything from nanometre powders
//! to boulders, gels to diamond) but exclude values whose products overflow or underflow `f64`
//! in the contact laws (a radius of 1e-300 m gives a mass of 0 and a NaN at the first step),
//! or that no run can mean (gravity of 1e308 m/s^2). [`super::Case::validate_fields`] checks
//! them; a message names the field, the value and the range, e.g.
//! `case.toml: species[0].radius must be in [1e-9, 1e3] m, got 1e-300`.
//!
//! | field | range |
//! |---|---|
//! | `dt` | [1e-12, 1] s |
//! | `end_time`, `output.*_interval` | [1e-12, 1e9] s (the shared-memory protocol's interval bounds) |
//! | `gravity` | length <= 1e4 m/s^2 |
//! | positions: `domain.min/max`, source `min/max`, mesh vertices (after `scale`), `axis_point` | each coordinate in [-1e6, 1e6] m |
//! | velocities: source `velocity`, translation `velocity` | length <= 1e5 m/s |
//! | `rpm` | [-1e6, 1e6] |
//! | `axis_direction` | each component in [-1e6, 1e6], not zero |
//! | `scale` | [1e-9, 1e9] |
//! | `radius` | [1e-9, 1e3] m |
//! | `density` | [1e-2, 1e5] kg/m^3 |
//! | `young_modulus` | [1, 1e13] Pa |
//! | `normal_stiffness` | [1e-6, 1e15] N/m |
//! | `poisson_ratio` | (-1, 0.5) |
//! | `restitution` | (0, 1] |
//! | `sliding_friction`, `rolling_friction` | [0, 10] |
//! | `tangential_stiffness_ratio` | [0, 10] |
//! | grid `spacing` | [diameter, 2e6] m |
//! | grid `jitter` | [0, 1] |
//! | particle counts (all sources together) | [1, 2^32 - 1] (u32 particle ids of the protocol) and the memory of the machine |
//! | `random_box` | solid fraction <= [`RANDOM_BOX_MAX_FRACTION`] |
//! | `reorder_every` | >= 1 |

/// A closed or half-open interval of allowed values, with its unit for messages.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range {
    pub lo: f64,
    pub hi: f64,
    /// Whether `lo` itself is excluded.
    pub lo_open: bool,
    /// Whether `hi` itself is excluded.
    pub hi_open: bool,
    /// Unit for messages ("" when dimensionless).
    pub unit: &'static str,
}

impl Range {
    pub const fn closed(lo: f64, hi: f64, unit: &'static str) -> Range {
        Range {
            lo,
            hi,
            lo_open: false,
            hi_open: false,
            unit,
        }
    }

    /// Whether `v` is a finite number inside the range.
    pub fn contains(&self, v: f64) -> bool {
        v.is_finite()
            && if self.lo_open {
                v > self.lo
            } else {
                v >= self.lo
            }
            && if self.hi_open {
                v < self.hi
            } else {
                v <= self.hi
            }
    }
}

impl std::fmt::Display for Range {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}{}, {}{}",
            if self.lo_open { "(" } else { "[" },
            bound(self.lo),
            bound(self.hi),
            if self.hi_open { ")" } else { "]" }
        )?;
        if !self.unit.is_empty() {
            write!(f, " {}", self.unit)?;
        }
        Ok(())
    }
}

/// A bound as the table above writes it: powers of ten outside [0.1, 1e3) as `1e-9`, `1e3`;
/// anything else as [`value`] prints it (`0.5`, `10`, `0.02`, `2e6`).
pub fn bound(v: f64) -> String {
    let a = v.abs();
    let power_of_ten = a > 0.0 && a.log10().round() == a.log10();
    if power_of_ten && !(0.1..1e3).contains(&a) {
        format!("{v:e}")
    } else {
        value(v)
    }
}

/// A user's value for a message: as typed for ordinary magnitudes, in exponent form otherwise
/// (`1e300`, not 301 digits), `NaN` and `inf` as such.
pub fn value(v: f64) -> String {
    let a = v.abs();
    if !v.is_finite() || v == 0.0 || (1e-3..1e6).contains(&a) {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

/// Time step [s].
pub const DT: Range = Range::closed(1e-12, 1.0, "s");
/// End time and output intervals [s]: the bounds of `shm_protocol::limits` for simulated-time
/// intervals (1e-12 s to about 32 years).
pub const SIM_TIME: Range = Range::closed(1e-12, 1e9, "s");
/// Largest length of the gravity vector [m/s^2] (1000 g: centrifuges stay far below).
/// A time in a motion schedule (0 = the start of the run).
pub const SCHEDULE_TIME: Range = Range::closed(0.0, 1e9, "s");
/// Most segments of one motion schedule.
pub const SCHEDULE_SEGMENTS_MAX: usize = 1000;
/// A fraction of a size distribution.
pub const FRACTION: Range = Range {
    lo: 0.0,
    hi: 1.0,
    lo_open: true,
    hi_open: false,
    unit: "",
};
/// Radius or length of a source shape [m].
pub const SHAPE_SIZE: Range = Range::closed(1e-9, 2e6, "m");
/// Inflow rate [particles/s].
pub const INFLOW_RATE: Range = Range::closed(1e-9, 1e12, "1/s");
/// Inflow mass rate [kg/s].
pub const INFLOW_MASS_RATE: Range = Range::closed(1e-15, 1e9, "kg/s");
/// Margin of an `outside_domain` outflow [m].
pub const MARGIN: Range = Range::closed(0.0, 1e6, "m");
pub const GRAVITY_MAX: f64 = 1e4;
/// Any coordinate of a position [m] (1000 km).
pub const COORDINATE: Range = Range::closed(-1e6, 1e6, "m");
/// Largest length of a prescribed velocity [m/s] (faster than any impact DEM is used for).
pub const VELOCITY_MAX: f64 = 1e5;
/// Rotation speed of a mesh [rev/min] (1e6 rpm: 1e5 m/s at a radius of 1 m).
pub const RPM: Range = Range::closed(-1e6, 1e6, "rpm");
/// Frequency of a harmonic motion [Hz] (above 1 MHz no time step resolves it).
pub const FREQUENCY: Range = Range::closed(0.0, 1e6, "Hz");
/// Amplitude of a rocking motion [deg] (one turn either way).
pub const ROCKING_DEG: Range = Range::closed(-360.0, 360.0, "deg");
/// Phase of a harmonic motion [deg].
pub const PHASE_DEG: Range = Range::closed(-360.0, 360.0, "deg");
/// A component of a rotation axis direction (any length; it is normalised).
pub const AXIS_COMPONENT: Range = Range::closed(-1e6, 1e6, "");
/// Mesh scale factor [-] (nanometre to gigametre units).
pub const SCALE: Range = Range::closed(1e-9, 1e9, "");
/// Sphere radius [m].
pub const RADIUS: Range = Range::closed(1e-9, 1e3, "m");
/// Density [kg/m^3] (aerogels to osmium with margin).
pub const DENSITY: Range = Range::closed(1e-2, 1e5, "kg/m^3");
/// Young's modulus [Pa] (gels to diamond with margin).
pub const YOUNG_MODULUS: Range = Range::closed(1.0, 1e13, "Pa");
/// Linear normal stiffness [N/m].
pub const NORMAL_STIFFNESS: Range = Range::closed(1e-6, 1e15, "N/m");
/// Poisson ratio [-] (the thermodynamic bounds of an isotropic material).
pub const POISSON: Range = Range {
    lo: -1.0,
    hi: 0.5,
    lo_open: true,
    hi_open: true,
    unit: "",
};
/// Coefficient of restitution [-].
pub const RESTITUTION: Range = Range {
    lo: 0.0,
    hi: 1.0,
    lo_open: true,
    hi_open: false,
    unit: "",
};
/// Sliding and rolling friction coefficients [-].
pub const FRICTION: Range = Range::closed(0.0, 10.0, "");
/// kt / kn of the linear model [-] (2/7 by default; Mindlin's ratio is 2/3 to 4/3).
pub const STIFFNESS_RATIO: Range = Range::closed(0.0, 10.0, "");
/// Largest lattice spacing of a grid source [m] (the widest region positions allow).
pub const SPACING_MAX: f64 = 2e6;
/// Lattice jitter [-].
pub const JITTER: Range = Range::closed(0.0, 1.0, "");

/// Largest solid fraction a `random_box` source may ask for: count * (4/3) pi r^3 over the
/// region's volume. Random sequential addition of equal spheres jams at 0.38 in 3D (Torquato,
/// Uche & Stillinger 2006, Phys. Rev. E 74, 061308); the last few percent before jamming take
/// ever more attempts, and the region's walls lower the reachable fraction further, so requests
/// above 0.35 are refused at once instead of searching for hours.
pub const RANDOM_BOX_MAX_FRACTION: f64 = 0.35;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_print_as_documented() {
        assert_eq!(RADIUS.to_string(), "[1e-9, 1e3] m");
        assert_eq!(RESTITUTION.to_string(), "(0, 1]");
        assert_eq!(POISSON.to_string(), "(-1, 0.5)");
        assert_eq!(DT.to_string(), "[1e-12, 1] s");
        assert!(!RADIUS.contains(f64::NAN) && !RADIUS.contains(1e-300) && RADIUS.contains(0.01));
        assert!(!RESTITUTION.contains(0.0) && RESTITUTION.contains(1.0));
    }
}
