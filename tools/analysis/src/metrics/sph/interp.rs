//! Values between the particles of an SPH frame: pressure at probes (`--probe X,Y,Z`) and the
//! water height at gauges (`--gauge X,Y`), both interpolated from the fluid particles with the
//! run's kernel, as DualSPHysics' gauges and MeasureTool do.
//!
//! With V_j = m / rho_j the volume of fluid particle j (m = rho0 dp^3 its mass, rho_j its
//! density) and W the kernel of smoothing length h (support 2h):
//!
//! - the **fluid fraction** at x, S(x) = sum_j V_j W(|x - x_j|), is 1 inside the fluid (the
//!   kernel's integral), about 1/2 on a free surface or a wall (half the support is empty;
//!   only fluid particles are summed) and 0 in the air;
//! - the **probe pressure** is the Shepard-normalised sum p(x) = sum_j p_j V_j W / S(x)
//!   (Shepard 1968; DualSPHysics `JGaugeVelocity`, MeasureTool), where S(x) >= 1/2, and
//!   sum_j p_j V_j W / (1/2) below that (MeasureTool's kernel-correction limit `-kclimit 0.5`,
//!   here made continuous): inside the fluid the plain Shepard value, a probe in the air reads 0
//!   and a stray droplet within reach does not give it its whole pressure. Near a wall the
//!   fluid particles all lie on one side of the probe, so the value is that of a point shifted
//!   into the fluid (lower than the wall's pressure at depth); DualSPHysics advises probes
//!   1.5 h off the boundary;
//! - the **water height** at (X, Y) follows S along the vertical line from the tank floor up in
//!   steps of dp/4 and takes the first point where S falls below 1/2 after having been above it
//!   (DualSPHysics `JGaugeSwl`, mass limit 0.5 in 3D), linearly interpolated between the two
//!   samples: the free surface. The height is that point's z above the floor (the case's
//!   `[domain] min` z). A column where S never reaches 1/2 (dry, or a film thinner than about
//!   h) reads 0; one full to the top of the tank reads the tank's height. Splashes above the
//!   surface are ignored (a lone particle gives S = V W(0), about 0.08 for Wendland with
//!   h = sqrt(3) dp), and so is an air pocket's roof above the first crossing.
//!
//! Cost: one pass over the particles, testing each against every probe and gauge (O(N x
//! sites), fine for the handful a user places), then a sum over the fluid within reach of each.

use std::str::FromStr;

use serde::Serialize;

use super::kernel::Kernel;
use super::run::FluidSelector;
use crate::par::map_chunks;

/// Fluid fraction below which a probe's sum is no longer Shepard-normalised, and which the
/// free surface crosses at a gauge (DualSPHysics' 3D default for both).
pub const FRACTION_LIMIT: f64 = 0.5;

/// Gauge samples per spacing along the vertical.
const GAUGE_STEPS_PER_DP: f64 = 4.0;
/// Most samples along one gauge (the step grows beyond).
const GAUGE_MAX_SAMPLES: usize = 100_000;

fn numbers<const N: usize>(s: &str, what: &str) -> Result<[f64; N], String> {
    let v: Vec<f64> = s
        .split(',')
        .map(|w| {
            w.trim()
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .ok_or_else(|| format!("{what} {s:?}: {w:?} is not a finite number"))
        })
        .collect::<Result<_, _>>()?;
    v.try_into()
        .map_err(|v: Vec<f64>| format!("{what} {s:?}: expected {N} numbers, got {}", v.len()))
}

/// A pressure probe at a point [m] (`--probe X,Y,Z`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Probe(pub [f64; 3]);

impl FromStr for Probe {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        numbers::<3>(s, "probe X,Y,Z").map(Probe)
    }
}

/// A water-height gauge on the vertical line through (x, y) [m] (`--gauge X,Y`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gauge(pub [f64; 2]);

impl FromStr for Gauge {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        numbers::<2>(s, "gauge X,Y").map(Gauge)
    }
}

/// A probe's value.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProbeReading {
    /// Where [m].
    pub at: [f64; 3],
    /// [Pa]
    pub pressure: f64,
    /// S at the probe [-]: about 1 inside the fluid, 1/2 at a surface or wall, 0 in the air.
    pub fluid_fraction: f64,
}

/// A gauge's value.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GaugeReading {
    /// Where (x, y) [m].
    pub at: [f64; 2],
    /// Height of the free surface above the tank floor [m].
    pub height: f64,
    /// z of the free surface [m].
    pub surface_z: f64,
}

/// The fluid particles' data the interpolation reads, in frame order.
#[derive(Clone, Copy)]
pub struct InterpInputs<'a> {
    pub positions: &'a [[f32; 3]],
    /// [kg/m^3]; `None`: every particle at the rest density (V = dp^3).
    pub densities: Option<&'a [f32]>,
    /// [Pa]; needed by probes only.
    pub pressures: Option<&'a [f32]>,
    pub fluid: FluidSelector<'a>,
}

/// The run's constants the interpolation needs.
#[derive(Clone, Copy, Debug)]
pub struct InterpParams {
    pub kernel: Kernel,
    /// Smoothing length [m].
    pub h: f64,
    /// Fluid particle mass [kg] and rest density [kg/m^3].
    pub mass: f64,
    pub rho0: f64,
    /// Particle spacing [m] (the gauge step is a quarter of it).
    pub dp: f64,
    /// z of the tank floor and top [m].
    pub floor: f64,
    pub top: f64,
}

/// A fluid particle within reach of a site: position [m], volume [m^3], pressure [Pa].
#[derive(Clone, Copy, Debug)]
struct Near {
    x: [f64; 3],
    vol: f64,
    p: f64,
}

/// Fluid particles within reach (2h) of each probe, then of each gauge's vertical line, each
/// list in frame order (chunks in order: the same sums for any thread count).
fn neighbours(
    inp: &InterpInputs<'_>,
    c: &InterpParams,
    probes: &[Probe],
    gauges: &[Gauge],
) -> Vec<Vec<Near>> {
    let reach = 2.0 * c.h;
    let reach2 = reach * reach;
    let sites = probes.len() + gauges.len();
    let n = match (inp.densities, inp.pressures) {
        (Some(d), Some(p)) => inp.positions.len().min(d.len()).min(p.len()),
        (Some(d), None) => inp.positions.len().min(d.len()),
        (None, Some(p)) => inp.positions.len().min(p.len()),
        (None, None) => inp.positions.len(),
    };
    let default_vol = c.mass / c.rho0;
    let chunks = map_chunks(n, |range| {
        let mut out: Vec<Vec<Near>> = vec![Vec::new(); sites];
        for i in range {
            if !inp.fluid.is_fluid(i) {
                continue;
            }
            let x = inp.positions[i].map(f64::from);
            let vol = match inp.densities.map(|d| d[i] as f64) {
                Some(rho) if rho.is_finite() && rho > 0.0 => c.mass / rho,
                Some(_) => continue,
                None => default_vol,
            };
            let p = inp.pressures.map_or(0.0, |p| p[i] as f64);
            let near = Near { x, vol, p };
            for (k, pr) in probes.iter().enumerate() {
                let d: [f64; 3] = std::array::from_fn(|a| x[a] - pr.0[a]);
                if d[0] * d[0] + d[1] * d[1] + d[2] * d[2] < reach2 {
                    out[k].push(near);
                }
            }
            for (k, g) in gauges.iter().enumerate() {
                let (dx, dy) = (x[0] - g.0[0], x[1] - g.0[1]);
                if dx * dx + dy * dy < reach2 {
                    out[probes.len() + k].push(near);
                }
            }
        }
        out
    });
    let mut lists: Vec<Vec<Near>> = vec![Vec::new(); sites];
    for chunk in chunks {
        for (list, part) in lists.iter_mut().zip(chunk) {
            list.extend(part);
        }
    }
    lists
}

fn distance(a: [f64; 3], b: [f64; 3]) -> f64 {
    let d: [f64; 3] = std::array::from_fn(|k| a[k] - b[k]);
    (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt()
}

/// Pressure and fluid fraction at `at` from the particles `near` (module docs).
fn probe_value(near: &[Near], at: [f64; 3], c: &InterpParams) -> ProbeReading {
    let (mut s, mut sp) = (0.0, 0.0);
    for j in near {
        let w = j.vol * c.kernel.w(distance(at, j.x), c.h);
        s += w;
        sp += w * j.p;
    }
    ProbeReading {
        at,
        pressure: sp / s.max(FRACTION_LIMIT),
        fluid_fraction: s,
    }
}

/// Water height on the vertical line at `at` from the particles `near` (module docs).
fn gauge_value(mut near: Vec<Near>, at: [f64; 2], c: &InterpParams) -> GaugeReading {
    // Sorted by height, so each sample sums only the particles within 2h of it in z.
    near.sort_by(|a, b| a.x[2].total_cmp(&b.x[2]));
    let reach = 2.0 * c.h;
    let span = (c.top - c.floor).max(0.0);
    let samples =
        ((span / (c.dp / GAUGE_STEPS_PER_DP)).ceil() as usize).clamp(1, GAUGE_MAX_SAMPLES);
    let dz = span / samples as f64;
    let fraction = |z: f64| {
        let first = near.partition_point(|j| j.x[2] <= z - reach);
        near[first..]
            .iter()
            .take_while(|j| j.x[2] < z + reach)
            .map(|j| j.vol * c.kernel.w(distance([at[0], at[1], z], j.x), c.h))
            .sum::<f64>()
    };
    // The last sample at or above the limit, and the first below it after one was above.
    let mut above: Option<(f64, f64)> = None;
    let mut surface = None;
    for k in 0..=samples {
        let z = c.floor + dz * k as f64;
        let s = fraction(z);
        if s >= FRACTION_LIMIT {
            above = Some((z, s));
        } else if let Some((z0, s0)) = above {
            // Linear between (z0, s0 >= limit) and (z, s < limit).
            surface = Some(z0 + (z - z0) * (s0 - FRACTION_LIMIT) / (s0 - s));
            break;
        }
    }
    let surface_z = match (surface, above) {
        (Some(z), _) => z,
        (None, Some(_)) => c.top,
        (None, None) => c.floor,
    };
    GaugeReading {
        at,
        height: surface_z - c.floor,
        surface_z,
    }
}

/// Readings of every probe and gauge on one frame, in the order given.
pub fn interpolate(
    inp: &InterpInputs<'_>,
    c: &InterpParams,
    probes: &[Probe],
    gauges: &[Gauge],
) -> (Vec<ProbeReading>, Vec<GaugeReading>) {
    let mut lists = neighbours(inp, c, probes, gauges).into_iter();
    let probe_values = probes
        .iter()
        .zip(lists.by_ref())
        .map(|(p, near)| probe_value(&near, p.0, c))
        .collect();
    let gauge_values = gauges
        .iter()
        .zip(lists)
        .map(|(g, near)| gauge_value(near, g.0, c))
        .collect();
    (probe_values, gauge_values)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DP: f64 = 0.02;
    const RHO0: f64 = 1000.0;

    fn params(top: f64) -> InterpParams {
        InterpParams {
            kernel: Kernel::WendlandC2,
            h: 3f64.sqrt() * DP,
            mass: RHO0 * DP * DP * DP,
            rho0: RHO0,
            dp: DP,
            floor: 0.0,
            top,
        }
    }

    /// A still lattice of fluid (spacing DP, sites at DP (i + 1/2)) filling [0, L]^2 x [0, depth]
    /// with hydrostatic pressure rho0 g (depth - z), density rho0. L is wide enough that the
    /// middle of the block sees no side.
    fn lattice(l: f64, depth: f64) -> (Vec<[f32; 3]>, Vec<f32>, Vec<f32>, Vec<u32>) {
        let n = |e: f64| (e / DP).round() as usize;
        let mut x = Vec::new();
        for k in 0..n(depth) {
            for j in 0..n(l) {
                for i in 0..n(l) {
                    let c = |m: usize| (DP * (m as f64 + 0.5)) as f32;
                    x.push([c(i), c(j), c(k)]);
                }
            }
        }
        let p = x
            .iter()
            .map(|q| (RHO0 * 9.81 * (depth - q[2] as f64)) as f32)
            .collect();
        let count = x.len();
        (x, vec![RHO0 as f32; count], p, vec![1; count])
    }

    #[test]
    fn probes_read_hydrostatic_pressure_inside_and_zero_in_the_air() {
        let (x, rho, p, kinds) = lattice(0.4, 0.3);
        let inp = InterpInputs {
            positions: &x,
            densities: Some(&rho),
            pressures: Some(&p),
            fluid: FluidSelector::Kinds(&kinds),
        };
        let c = params(0.5);
        let probes: Vec<Probe> = ["0.2,0.2,0.1", "0.2,0.2,0.2", "0.2,0.2,0.45"]
            .iter()
            .map(|s| s.parse().expect("probe"))
            .collect();
        let (values, _) = interpolate(&inp, &c, &probes, &[]);
        for (v, z) in values.iter().zip([0.1, 0.2]) {
            // Pressure linear in z: Shepard on a symmetric lattice gives it back exactly
            // (to f32 rounding); the fraction is the lattice's kernel sum, close to 1.
            let want = RHO0 * 9.81 * (0.3 - z);
            assert!((v.pressure - want).abs() < 1e-3 * want, "{v:?} vs {want}");
            assert!((v.fluid_fraction - 1.0).abs() < 0.02, "{v:?}");
        }
        // 0.15 m above the surface, farther than 2h = 0.069 m: nothing within reach.
        assert_eq!((values[2].pressure, values[2].fluid_fraction), (0.0, 0.0));
    }

    #[test]
    fn a_lone_droplet_does_not_lend_a_probe_its_pressure() {
        let x = [[0.0f32, 0.0, 0.0]];
        let inp = InterpInputs {
            positions: &x,
            densities: None,
            pressures: Some(&[1000.0]),
            fluid: FluidSelector::Kinds(&[1]),
        };
        let c = params(1.0);
        let (v, _) = interpolate(&inp, &c, &[Probe([0.0, 0.0, 0.0])], &[]);
        // S = dp^3 W(0) = 21 / (16 pi 3^1.5) = 0.0804; p = 1000 S / 0.5.
        let s = DP.powi(3) * Kernel::WendlandC2.w(0.0, c.h);
        assert!((v[0].fluid_fraction - s).abs() < 1e-12);
        assert!((v[0].pressure - 1000.0 * s / 0.5).abs() < 1e-9, "{v:?}");
    }

    #[test]
    fn gauges_find_the_still_water_surface_within_a_spacing() {
        let (x, rho, p, kinds) = lattice(0.4, 0.24);
        let inp = InterpInputs {
            positions: &x,
            densities: Some(&rho),
            pressures: Some(&p),
            fluid: FluidSelector::Kinds(&kinds),
        };
        let c = params(0.5);
        // Mid-tank, and at 0.01 from a side (outside the fluid: a wall's side, half the
        // support empty, still finds it).
        let gauges = [Gauge([0.2, 0.2]), Gauge([0.2, 0.01])];
        let (_, g) = interpolate(&inp, &c, &[], &gauges);
        for r in &g {
            assert!((r.height - 0.24).abs() < DP, "{r:?}");
            assert_eq!(r.surface_z, r.height);
        }
        // Mid-tank the surface is found within a tenth of the spacing.
        assert!((g[0].height - 0.24).abs() < 0.1 * DP, "{:?}", g[0]);
        // Outside the fluid's footprint by more than 2h: dry, height 0.
        let (_, dry) = interpolate(&inp, &c, &[], &[Gauge([0.6, 0.2])]);
        assert_eq!(dry[0].height, 0.0);
    }

    #[test]
    fn a_splash_above_the_surface_is_not_the_surface() {
        let (mut x, mut rho, mut p, mut kinds) = lattice(0.4, 0.2);
        for z in [0.3f32, 0.32, 0.4] {
            x.push([0.2, 0.2, z]);
            rho.push(1000.0);
            p.push(0.0);
            kinds.push(1);
        }
        // A boundary particle (kind 2) in the air does not count either.
        x.push([0.2, 0.2, 0.35]);
        rho.push(1000.0);
        p.push(0.0);
        kinds.push(2);
        let inp = InterpInputs {
            positions: &x,
            densities: Some(&rho),
            pressures: None,
            fluid: FluidSelector::Kinds(&kinds),
        };
        let (_, g) = interpolate(&inp, &params(0.5), &[], &[Gauge([0.2, 0.2])]);
        assert!((g[0].height - 0.2).abs() < 0.1 * DP, "{:?}", g[0]);
    }

    #[test]
    fn sites_parse_with_clear_errors() {
        assert_eq!("1,2,-3".parse::<Probe>(), Ok(Probe([1.0, 2.0, -3.0])));
        assert_eq!(" 0.992 , 0.5".parse::<Gauge>(), Ok(Gauge([0.992, 0.5])));
        assert!("1,2"
            .parse::<Probe>()
            .unwrap_err()
            .contains("expected 3 numbers"));
        assert!("1,x".parse::<Gauge>().unwrap_err().contains("\"x\""));
        assert!("1,nan".parse::<Gauge>().is_err());
    }
}
