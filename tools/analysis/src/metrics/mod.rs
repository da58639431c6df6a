//! The per-frame metrics: one small function per quantity (formula and units in its doc
//! comment), and [`compute`], which runs the selected ones on a frame and times each.

pub mod contacts;
pub mod energy;
pub mod lacey;
pub mod motion;
pub mod solid_fraction;
pub mod sums;
pub mod torque;

use std::time::{Duration, Instant};

use serde::Serialize;
use shm_protocol::{FieldKind, Frame};

use crate::context::StaticContext;
use crate::region::Aabb;
use lacey::LaceyGrid;
use torque::BodyLoad;

/// A metric group that `--metrics` can select.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Metric {
    /// `kinetic_energy_translational` and `kinetic_energy_rotational`.
    KineticEnergy,
    PotentialEnergy,
    /// `max_speed` and `mean_speed`.
    Speed,
    CenterOfMass,
    CoordinationNumber,
    SolidFraction,
    LaceyIndex,
    BodyTorque,
}

impl Metric {
    pub const ALL: [Metric; 8] = [
        Metric::KineticEnergy,
        Metric::PotentialEnergy,
        Metric::Speed,
        Metric::CenterOfMass,
        Metric::CoordinationNumber,
        Metric::SolidFraction,
        Metric::LaceyIndex,
        Metric::BodyTorque,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::KineticEnergy => "kinetic_energy",
            Self::PotentialEnergy => "potential_energy",
            Self::Speed => "speed",
            Self::CenterOfMass => "center_of_mass",
            Self::CoordinationNumber => "coordination_number",
            Self::SolidFraction => "solid_fraction",
            Self::LaceyIndex => "lacey_index",
            Self::BodyTorque => "body_torque",
        }
    }

    /// Parses one name of `--metrics` (also the JSON keys a group fills, e.g. `max_speed`).
    pub fn parse(word: &str) -> Result<Self, String> {
        let w = word.trim();
        let alias = match w {
            "kinetic_energy_translational" | "kinetic_energy_rotational" | "energy" => {
                Some(Self::KineticEnergy)
            }
            "max_speed" | "mean_speed" | "speeds" => Some(Self::Speed),
            "torque" => Some(Self::BodyTorque),
            _ => None,
        };
        alias
            .or_else(|| Self::ALL.into_iter().find(|m| m.name() == w))
            .ok_or_else(|| {
                let known: Vec<_> = Self::ALL.iter().map(|m| m.name()).collect();
                format!("unknown metric {w:?}; known: {}", known.join(", "))
            })
    }
}

/// Choices that shape the metrics.
#[derive(Clone, Debug)]
pub struct Settings {
    pub metrics: Vec<Metric>,
    /// Solid-fraction region (default: lower half of the world box).
    pub region: Option<Aabb>,
    /// Lacey species pair (default: species 0 and 1).
    pub lacey_species: Option<(u32, u32)>,
    /// Lacey sample cell edge [m] (default: 3 mean diameters).
    pub lacey_cell: Option<f64>,
    /// Lacey region (default: the bounding box of the two species).
    pub lacey_region: Option<Aabb>,
    pub lacey_min_particles: u32,
}

impl Settings {
    /// The frame fields the selected metrics read (a [`FieldKind::bit`] mask): a frame source
    /// need copy only these.
    pub fn fields(&self) -> u32 {
        self.metrics
            .iter()
            .map(|m| match m {
                Metric::KineticEnergy => {
                    FieldKind::Velocity.bit() | FieldKind::AngularVelocity.bit()
                }
                Metric::Speed => FieldKind::Velocity.bit(),
                Metric::BodyTorque => FieldKind::Position.bit() | FieldKind::Force.bit(),
                Metric::PotentialEnergy
                | Metric::CenterOfMass
                | Metric::CoordinationNumber
                | Metric::SolidFraction
                | Metric::LaceyIndex => FieldKind::Position.bit(),
            })
            .fold(0, |a, b| a | b)
    }
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            metrics: Metric::ALL.to_vec(),
            region: None,
            lacey_species: None,
            lacey_cell: None,
            lacey_region: None,
            lacey_min_particles: 10,
        }
    }
}

/// Metrics of one frame. Every key is always present; `null` when not selected or not
/// computable (the reason is in `notes`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Metrics {
    pub seq: u64,
    pub step: u64,
    /// [s]
    pub sim_time: f64,
    pub particles: u64,
    /// [J]
    pub kinetic_energy_translational: Option<f64>,
    /// [J]
    pub kinetic_energy_rotational: Option<f64>,
    /// [J], relative to `world_min` along gravity.
    pub potential_energy: Option<f64>,
    /// [m/s]
    pub max_speed: Option<f64>,
    /// [m/s]
    pub mean_speed: Option<f64>,
    /// [m]
    pub center_of_mass: Option<[f64; 3]>,
    /// [contacts per particle]
    pub coordination_number: Option<f64>,
    /// [-] in `solid_fraction_region`.
    pub solid_fraction: Option<f64>,
    pub solid_fraction_region: Option<Aabb>,
    /// [-] between `lacey_species`.
    pub lacey_index: Option<f64>,
    pub lacey_species: Option<[String; 2]>,
    pub lacey_grid: Option<LaceyGrid>,
    /// Per mesh body, approximate (see [`torque::body_loads`]).
    pub body_torque: Option<Vec<BodyLoad>>,
    pub notes: Vec<String>,
    /// Milliseconds per metric group (with `--timing`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timing_ms: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Why a frame cannot be analysed with the static data at hand.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameMismatch {
    #[error("frame {seq} has {frame} particles but the static section describes {static_count}")]
    ParticleCount {
        seq: u64,
        frame: u64,
        static_count: usize,
    },
}

/// Time taken by each stage of [`compute`]: the grid metrics by name, and the one pass of the
/// per-particle sums under the names of the metrics it served joined by `+` (e.g.
/// `kinetic_energy+speed`).
pub type Timings = Vec<(String, Duration)>;

/// Metrics computed in the one pass of [`sums::particle_sums`].
const SUMMED: [Metric; 5] = [
    Metric::KineticEnergy,
    Metric::PotentialEnergy,
    Metric::Speed,
    Metric::CenterOfMass,
    Metric::SolidFraction,
];

/// Runs the selected metrics on `frame`. Metrics whose inputs the frame lacks are `null` with a
/// note; nothing panics on missing data.
pub fn compute(
    frame: &Frame,
    ctx: &StaticContext,
    settings: &Settings,
) -> Result<(Metrics, Timings), FrameMismatch> {
    compute_with(frame, ctx, settings, &mut Scratch::default())
}

/// Working arrays of the metrics, kept from frame to frame by a following run.
#[derive(Default)]
pub struct Scratch {
    contacts: contacts::ContactScratch,
    lacey: lacey::LaceyScratch,
}

/// [`compute`] reusing `scratch`'s arrays.
pub fn compute_with(
    frame: &Frame,
    ctx: &StaticContext,
    settings: &Settings,
    scratch: &mut Scratch,
) -> Result<(Metrics, Timings), FrameMismatch> {
    let n = frame.meta.particle_count;
    if n as usize != ctx.particle_count() {
        return Err(FrameMismatch::ParticleCount {
            seq: frame.meta.seq,
            frame: n,
            static_count: ctx.particle_count(),
        });
    }
    let mut out = Metrics {
        seq: frame.meta.seq,
        step: frame.meta.step,
        sim_time: frame.meta.sim_time,
        particles: n,
        ..Default::default()
    };
    let pos = frame.positions.as_deref();
    let mut timings = Vec::new();
    let summed: Vec<Metric> = settings
        .metrics
        .iter()
        .copied()
        .filter(|m| SUMMED.contains(m))
        .collect();
    if !summed.is_empty() {
        let t0 = Instant::now();
        summed_metrics(&mut out, frame, ctx, settings, &summed);
        let names: Vec<&str> = summed.iter().map(|m| m.name()).collect();
        timings.push((names.join("+"), t0.elapsed()));
    }
    for &metric in settings.metrics.iter().filter(|m| !SUMMED.contains(m)) {
        let t0 = Instant::now();
        match metric {
            Metric::CoordinationNumber => match pos {
                Some(p) => {
                    out.coordination_number = contacts::coordination_number_with(
                        p,
                        &ctx.radii,
                        ctx.max_radius,
                        &mut scratch.contacts,
                    )
                }
                None => out
                    .notes
                    .push("coordination_number: frames carry no position".into()),
            },
            Metric::LaceyIndex => lacey(&mut out, pos, ctx, settings, &mut scratch.lacey),
            Metric::BodyTorque => torque(&mut out, frame, ctx),
            _ => unreachable!("summed metrics are computed above"),
        }
        timings.push((metric.name().to_string(), t0.elapsed()));
    }
    Ok((out, timings))
}

/// The selected metrics of [`SUMMED`], from one [`sums::particle_sums`] pass.
fn summed_metrics(
    out: &mut Metrics,
    frame: &Frame,
    ctx: &StaticContext,
    settings: &Settings,
    selected: &[Metric],
) {
    let (pos, vel) = (frame.positions.as_deref(), frame.velocities.as_deref());
    let spin = frame.angular_velocities.as_deref();
    let wants = |m: Metric| selected.contains(&m);
    let mut missing = |metric: Metric, what: &str, have: bool| {
        if wants(metric) && !have {
            out.notes
                .push(format!("{}: frames carry no {what}", metric.name()));
        }
        wants(metric) && have
    };
    let kinetic_t = missing(Metric::KineticEnergy, "velocity", vel.is_some());
    let kinetic_r = missing(Metric::KineticEnergy, "angular_velocity", spin.is_some());
    let potential = missing(Metric::PotentialEnergy, "position", pos.is_some());
    let speeds = missing(Metric::Speed, "velocity", vel.is_some());
    let center = missing(Metric::CenterOfMass, "position", pos.is_some());
    let solid_region = if wants(Metric::SolidFraction) {
        solid_region(out, pos.is_some(), ctx, settings)
    } else {
        None
    };
    let request = sums::SumRequest {
        kinetic_translational: kinetic_t,
        kinetic_rotational: kinetic_r,
        potential: potential.then_some((ctx.gravity, ctx.world_min)),
        speeds,
        center_of_mass: center,
        solid_region,
    };
    let inputs = sums::SumInputs {
        positions: pos,
        velocities: vel,
        angular_velocities: spin,
        mass: Some(&ctx.masses),
        radii: Some(&ctx.radii),
    };
    let s = sums::particle_sums(inputs, &request);
    out.kinetic_energy_translational = kinetic_t.then_some(s.kinetic_translational);
    out.kinetic_energy_rotational = kinetic_r.then_some(s.kinetic_rotational);
    out.potential_energy = potential.then_some(s.potential);
    if let Some((max, mean)) = motion::speeds_from(&s).filter(|_| speeds) {
        out.max_speed = Some(max);
        out.mean_speed = Some(mean);
    }
    if center {
        out.center_of_mass = motion::center_of_mass_from(&s);
    }
    if let Some(region) = solid_region {
        out.solid_fraction = Some(s.solid_volume / region.volume());
    }
}

/// The solid-fraction region (`--region`, else the lower half of the world box), noted in
/// `out`; `None` with a note when it is unusable or the frames carry no positions.
fn solid_region(
    out: &mut Metrics,
    have_positions: bool,
    ctx: &StaticContext,
    s: &Settings,
) -> Option<Aabb> {
    let region = match s.region {
        Some(r) => Ok(r),
        None => Aabb::lower_half(ctx.world_min, ctx.world_max),
    };
    let region = match region {
        Ok(r) => r,
        Err(e) => {
            out.notes.push(format!(
                "solid_fraction: no --region given and the world box is unusable ({e})"
            ));
            return None;
        }
    };
    out.solid_fraction_region = Some(region);
    if !have_positions {
        out.notes
            .push("solid_fraction: frames carry no position".into());
        return None;
    }
    Some(region)
}

fn lacey(
    out: &mut Metrics,
    pos: Option<&[[f32; 3]]>,
    ctx: &StaticContext,
    s: &Settings,
    scratch: &mut lacey::LaceyScratch,
) {
    if ctx.species_names.len() < 2 {
        out.notes
            .push("lacey_index: needs at least 2 species".into());
        return;
    }
    let (a, b) = s.lacey_species.unwrap_or((0, 1));
    let name = |k: u32| {
        ctx.species_names
            .get(k as usize)
            .cloned()
            .unwrap_or_else(|| k.to_string())
    };
    let grid = LaceyGrid {
        cell: s.lacey_cell.unwrap_or(6.0 * ctx.mean_radius),
        min_particles: s.lacey_min_particles,
        region: s.lacey_region,
    };
    out.lacey_species = Some([name(a), name(b)]);
    out.lacey_grid = Some(grid);
    let Some(p) = pos else {
        out.notes
            .push("lacey_index: frames carry no position".into());
        return;
    };
    out.lacey_index = lacey::lacey_index_with(p, &ctx.species, a, b, grid, scratch);
    if out.lacey_index.is_none() {
        out.notes.push(
            "lacey_index: undefined (a species is absent or no sample cell holds enough particles)"
                .into(),
        );
    }
}

fn torque(out: &mut Metrics, frame: &Frame, ctx: &StaticContext) {
    if ctx.meshes.is_empty() {
        out.notes.push("body_torque: no mesh bodies".into());
        return;
    }
    let (Some(p), Some(f)) = (frame.positions.as_deref(), frame.forces.as_deref()) else {
        out.notes.push(
            "body_torque: skipped, frames carry no per-particle force (reserve the force field)"
                .into(),
        );
        return;
    };
    out.body_torque = Some(torque::body_loads(
        p,
        &ctx.radii,
        f,
        &ctx.meshes,
        &frame.bodies,
        ctx.max_radius,
    ));
    out.notes.push(
        "body_torque: approximated from per-particle total contact forces of the particles touching each body"
            .into(),
    );
}

/// Timings as a JSON object of milliseconds.
pub fn timings_json(t: &Timings) -> serde_json::Map<String, serde_json::Value> {
    t.iter()
        .map(|(name, d)| (name.clone(), serde_json::json!(d.as_secs_f64() * 1e3)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_follow_the_selected_metrics() {
        let only = |metrics: Vec<Metric>| Settings {
            metrics,
            ..Settings::default()
        };
        assert_eq!(
            only(vec![Metric::Speed]).fields(),
            FieldKind::Velocity.bit()
        );
        let all = Settings::default().fields();
        for k in [
            FieldKind::Position,
            FieldKind::Velocity,
            FieldKind::AngularVelocity,
            FieldKind::Force,
        ] {
            assert_ne!(all & k.bit(), 0, "{k:?}");
        }
        assert_eq!(all & FieldKind::ContactCount.bit(), 0);
    }

    #[test]
    fn metric_names_parse() {
        for m in Metric::ALL {
            assert_eq!(Metric::parse(m.name()), Ok(m));
        }
        assert_eq!(Metric::parse("max_speed"), Ok(Metric::Speed));
        assert!(Metric::parse("entropy").unwrap_err().contains("known:"));
    }
}
