//! The per-frame metrics: one small function per quantity (formula and units in its doc
//! comment), and [`compute`], which runs the selected ones on a frame and times each.

pub mod contacts;
pub mod energy;
pub mod lacey;
pub mod motion;
pub mod outflow;
pub mod solid_fraction;
pub mod sph;
pub mod sums;
pub mod torque;

use std::time::{Duration, Instant};

use serde::Serialize;
use shm_protocol::{FieldKind, Frame};

use crate::context::StaticContext;
use crate::elements::{elements, ElementScratch, Elements, Needs};
use crate::region::Aabb;
use lacey::LaceyGrid;
use sph::fluid::SurgeAxis;
use sph::interp::{Gauge, GaugeReading, Probe, ProbeReading};
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
    /// Live particles in the frame: the `particles` key and column, present whatever is
    /// selected (the name is accepted so that it can be listed with the others).
    ParticleCount,
    /// `removed_count` of the frame header.
    RemovedCount,
    /// `removed_mass` of the frame header [kg].
    RemovedMass,
    /// [`outflow::discharge_rate`] [kg/s].
    DischargeRate,
    /// SPH: the fluid's front along `--surge-axis` ([`sph::fluid::FluidSums::surge_front`]).
    SurgeFront,
    /// SPH: water height at each `--gauge` ([`sph::interp`]).
    WaterHeight,
    /// SPH: pressure at each `--probe` ([`sph::interp`]).
    ProbePressure,
    /// SPH: `fluid_particles` and `fluid_mass`.
    FluidMass,
}

impl Metric {
    pub const ALL: [Metric; 16] = [
        Metric::KineticEnergy,
        Metric::PotentialEnergy,
        Metric::Speed,
        Metric::CenterOfMass,
        Metric::CoordinationNumber,
        Metric::SolidFraction,
        Metric::LaceyIndex,
        Metric::BodyTorque,
        Metric::ParticleCount,
        Metric::RemovedCount,
        Metric::RemovedMass,
        Metric::DischargeRate,
        Metric::SurgeFront,
        Metric::WaterHeight,
        Metric::ProbePressure,
        Metric::FluidMass,
    ];

    /// Metrics of granular matter: skipped on SPH runs unless `--metrics` names them.
    pub const DEM_ONLY: [Metric; 4] = [
        Metric::CoordinationNumber,
        Metric::SolidFraction,
        Metric::LaceyIndex,
        Metric::BodyTorque,
    ];

    /// Metrics of SPH runs: skipped on other runs unless `--metrics` names them (then `null`
    /// with a note).
    pub const SPH_ONLY: [Metric; 4] = [
        Metric::SurgeFront,
        Metric::WaterHeight,
        Metric::ProbePressure,
        Metric::FluidMass,
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
            Self::ParticleCount => "particle_count",
            Self::RemovedCount => "removed_count",
            Self::RemovedMass => "removed_mass",
            Self::DischargeRate => "discharge_rate",
            Self::SurgeFront => "surge_front",
            Self::WaterHeight => "water_height",
            Self::ProbePressure => "probe_pressure",
            Self::FluidMass => "fluid_mass",
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
            "particles" => Some(Self::ParticleCount),
            "gauge" | "gauges" => Some(Self::WaterHeight),
            "probe" | "probes" => Some(Self::ProbePressure),
            "fluid_particles" => Some(Self::FluidMass),
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
    /// `metrics` was chosen (`--metrics`): computed whatever the run. Otherwise (all metrics)
    /// [`Metric::DEM_ONLY`] are skipped on SPH runs and [`Metric::SPH_ONLY`] on the others.
    pub explicit: bool,
    /// SPH: water-height gauges (`--gauge X,Y`) and pressure probes (`--probe X,Y,Z`).
    pub gauges: Vec<Gauge>,
    pub probes: Vec<Probe>,
    /// SPH: direction of the surge front (`--surge-axis`, default +x).
    pub surge_axis: SurgeAxis,
}

impl Settings {
    /// The selected metrics that apply to a run that is (`sph`) or is not SPH.
    pub fn active(&self, sph: bool) -> Vec<Metric> {
        self.metrics
            .iter()
            .copied()
            .filter(|m| {
                self.explicit
                    || if sph {
                        !Metric::DEM_ONLY.contains(m)
                    } else {
                        !Metric::SPH_ONLY.contains(m)
                    }
            })
            .collect()
    }

    /// The frame fields the selected metrics read (a [`FieldKind::bit`] mask): a frame source
    /// need copy only these. Always `particle_id` (when the run fills it: species, masses and
    /// radii are looked up by it, and the particle count is checked against the static one) and
    /// `particle_kind` (when the run fills it, SPH: it tells fluid from boundary particles).
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
                Metric::ParticleCount
                | Metric::RemovedCount
                | Metric::RemovedMass
                | Metric::DischargeRate
                | Metric::FluidMass => 0,
                Metric::SurgeFront => FieldKind::Position.bit(),
                // Nothing to read without a gauge or a probe.
                Metric::WaterHeight if self.gauges.is_empty() => 0,
                Metric::WaterHeight => FieldKind::Position.bit() | FieldKind::Density.bit(),
                Metric::ProbePressure if self.probes.is_empty() => 0,
                Metric::ProbePressure => {
                    FieldKind::Position.bit() | FieldKind::Density.bit() | FieldKind::Pressure.bit()
                }
            })
            .fold(
                FieldKind::ParticleId.bit() | FieldKind::ParticleKind.bit(),
                |a, b| a | b,
            )
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
            explicit: false,
            gauges: Vec::new(),
            probes: Vec::new(),
            surge_axis: SurgeAxis::default(),
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
    /// Live particles in the frame (`particle_count` in `--metrics`; fewer than the static
    /// section lists in a run whose particle set changes).
    pub particles: u64,
    /// [J]. In SPH runs this, the potential energy, the speeds and the centre of mass are the
    /// fluid's (boundary particles are walls).
    pub kinetic_energy_translational: Option<f64>,
    /// [J]
    pub kinetic_energy_rotational: Option<f64>,
    /// [J], relative to `world_min` along gravity (SPH: the tank's `[domain] min`, its floor).
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
    /// Particles removed by outflow regions since t = 0 (frame header; 0 without outflow).
    pub removed_count: Option<u64>,
    /// Their mass [kg] (frame header).
    pub removed_mass: Option<f64>,
    /// [kg/s] since the previous analysed frame ([`outflow::discharge_rate`]); `null` for the
    /// first one.
    pub discharge_rate: Option<f64>,
    /// SPH: fluid particles in the frame, and their mass [kg] (m = rho0 dp^3 each).
    pub fluid_particles: Option<u64>,
    pub fluid_mass: Option<f64>,
    /// SPH: the fluid's front along `surge_axis` [m], a world coordinate
    /// ([`sph::fluid::FluidSums::surge_front`]).
    pub surge_front: Option<f64>,
    pub surge_axis: Option<&'static str>,
    /// SPH: per `--gauge`, the free surface's height above the tank floor [m].
    pub water_height: Option<Vec<GaugeReading>>,
    /// SPH: per `--probe`, the pressure [Pa] and fluid fraction there.
    pub probe_pressure: Option<Vec<ProbeReading>>,
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
    #[error(
        "frame {seq} names particle id {id}, but the static section lists {static_count} particles"
    )]
    UnknownId {
        seq: u64,
        id: u32,
        static_count: usize,
    },
    #[error("frame {seq} has {ids} particle ids for {frame} particles")]
    IdCount { seq: u64, ids: usize, frame: u64 },
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

/// Working arrays of the metrics, kept from frame to frame by a following run, and the previous
/// analysed frame's removed mass (for the discharge rate).
#[derive(Default)]
pub struct Scratch {
    contacts: contacts::ContactScratch,
    lacey: lacey::LaceyScratch,
    elements: ElementScratch,
    previous: Option<outflow::RemovedAt>,
}

/// [`compute`] reusing `scratch`'s arrays.
pub fn compute_with(
    frame: &Frame,
    ctx: &StaticContext,
    settings: &Settings,
    scratch: &mut Scratch,
) -> Result<(Metrics, Timings), FrameMismatch> {
    let Scratch {
        contacts: contact_scratch,
        lacey: lacey_scratch,
        elements: element_scratch,
        previous,
    } = scratch;
    let mut timings = Vec::new();
    let t0 = Instant::now();
    let sph = ctx.sph.as_ref();
    let active = settings.active(sph.is_some());
    let el = elements(
        frame,
        ctx,
        Needs::of(&active, sph.is_some()),
        element_scratch,
    )?;
    if frame.particle_ids.is_some() {
        timings.push(("particle_ids".to_string(), t0.elapsed()));
    }
    let mut out = Metrics {
        seq: frame.meta.seq,
        step: frame.meta.step,
        sim_time: frame.meta.sim_time,
        particles: frame.meta.particle_count,
        ..Default::default()
    };
    header_metrics(&mut out, frame, &active, previous.as_ref());
    *previous = Some(outflow::RemovedAt {
        sim_time: frame.meta.sim_time,
        removed_mass: frame.meta.removed_mass,
    });
    let pos = frame.positions.as_deref();
    // SPH runs answer the energies, speeds and centre of mass from the fluid alone.
    let fluid_pass: Vec<Metric> = match sph {
        Some(_) => active
            .iter()
            .copied()
            .filter(|m| sph::FLUID_PASS.contains(m))
            .collect(),
        None => Vec::new(),
    };
    let summed: Vec<Metric> = active
        .iter()
        .copied()
        .filter(|m| SUMMED.contains(m) && !fluid_pass.contains(m))
        .collect();
    if !summed.is_empty() {
        let t0 = Instant::now();
        summed_metrics(&mut out, frame, ctx, &el, settings, &summed);
        let names: Vec<&str> = summed.iter().map(|m| m.name()).collect();
        timings.push((names.join("+"), t0.elapsed()));
    }
    match sph {
        Some(run) => {
            if !fluid_pass.is_empty() {
                let t0 = Instant::now();
                sph::fluid_metrics(
                    &mut out,
                    frame,
                    &el,
                    run,
                    ctx.gravity,
                    settings,
                    &fluid_pass,
                );
                let names: Vec<&str> = fluid_pass.iter().map(|m| m.name()).collect();
                timings.push((names.join("+"), t0.elapsed()));
            }
            let interpolated: Vec<Metric> = active
                .iter()
                .copied()
                .filter(|m| matches!(m, Metric::WaterHeight | Metric::ProbePressure))
                .collect();
            if !interpolated.is_empty() {
                let t0 = Instant::now();
                sph::interpolated_metrics(&mut out, frame, &el, run, settings, &interpolated);
                let names: Vec<&str> = interpolated.iter().map(|m| m.name()).collect();
                timings.push((names.join("+"), t0.elapsed()));
            }
        }
        None => {
            for m in active.iter().filter(|m| Metric::SPH_ONLY.contains(m)) {
                out.notes.push(format!(
                    "{}: not an SPH run (no species of method sph_fluid or sph_boundary)",
                    m.name()
                ));
            }
        }
    }
    let radii = el.radii.unwrap_or_default();
    let per_particle = |m: &&Metric| {
        matches!(
            m,
            Metric::CoordinationNumber | Metric::LaceyIndex | Metric::BodyTorque
        )
    };
    for &metric in active.iter().filter(per_particle) {
        let t0 = Instant::now();
        match metric {
            Metric::CoordinationNumber => match pos {
                Some(p) => {
                    out.coordination_number = contacts::coordination_number_with(
                        p,
                        radii,
                        ctx.max_radius,
                        contact_scratch,
                    )
                }
                None => out
                    .notes
                    .push("coordination_number: frames carry no position".into()),
            },
            Metric::LaceyIndex => {
                let species = el.species.unwrap_or_default();
                lacey(&mut out, pos, ctx, species, settings, lacey_scratch)
            }
            Metric::BodyTorque => torque(&mut out, frame, ctx, radii),
            _ => unreachable!("only the per-particle metrics pass the filter"),
        }
        timings.push((metric.name().to_string(), t0.elapsed()));
    }
    Ok((out, timings))
}

/// The selected metrics of the frame header: outflow counters and the discharge rate since
/// `previous` (the last analysed frame, if any).
fn header_metrics(
    out: &mut Metrics,
    frame: &Frame,
    selected: &[Metric],
    previous: Option<&outflow::RemovedAt>,
) {
    let wants = |m: Metric| selected.contains(&m);
    let m = &frame.meta;
    if wants(Metric::RemovedCount) {
        out.removed_count = Some(m.removed_count);
    }
    if wants(Metric::RemovedMass) {
        out.removed_mass = Some(m.removed_mass);
    }
    if wants(Metric::DischargeRate) {
        let now = outflow::RemovedAt {
            sim_time: m.sim_time,
            removed_mass: m.removed_mass,
        };
        match previous.map(|p| outflow::discharge_rate(*p, now)) {
            Some(Ok(q)) => out.discharge_rate = Some(q),
            Some(Err(why)) => out.notes.push(format!("discharge_rate: {why}")),
            None => out
                .notes
                .push("discharge_rate: needs a previous analysed frame".into()),
        }
    }
}

/// The selected metrics of [`SUMMED`], from one [`sums::particle_sums`] pass.
fn summed_metrics(
    out: &mut Metrics,
    frame: &Frame,
    ctx: &StaticContext,
    el: &Elements<'_>,
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
        mass: el.masses,
        radii: el.radii,
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
    species: &[u32],
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
    out.lacey_index = lacey::lacey_index_with(p, species, a, b, grid, scratch);
    if out.lacey_index.is_none() {
        out.notes.push(
            "lacey_index: undefined (a species is absent or no sample cell holds enough particles)"
                .into(),
        );
    }
}

fn torque(out: &mut Metrics, frame: &Frame, ctx: &StaticContext, radii: &[f32]) {
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
        radii,
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
        // Ids and kinds always (free when the run does not fill them).
        let always = FieldKind::ParticleId.bit() | FieldKind::ParticleKind.bit();
        assert_eq!(
            only(vec![Metric::Speed]).fields(),
            FieldKind::Velocity.bit() | always
        );
        assert_eq!(only(vec![Metric::RemovedMass]).fields(), always);
        assert_eq!(only(vec![Metric::ProbePressure]).fields(), always);
        let probed = Settings {
            probes: vec![Probe([0.0; 3])],
            ..only(vec![Metric::ProbePressure])
        };
        assert_eq!(
            probed.fields(),
            FieldKind::Position.bit()
                | FieldKind::Density.bit()
                | FieldKind::Pressure.bit()
                | always
        );
        let all = Settings {
            probes: vec![Probe([0.0; 3])],
            ..Settings::default()
        }
        .fields();
        for k in [
            FieldKind::Position,
            FieldKind::Velocity,
            FieldKind::AngularVelocity,
            FieldKind::Force,
            FieldKind::Density,
            FieldKind::Pressure,
        ] {
            assert_ne!(all & k.bit(), 0, "{k:?}");
        }
        assert_eq!(all & FieldKind::ContactCount.bit(), 0);
    }

    #[test]
    fn per_particle_metrics_use_the_frame_ids() {
        let (ctx, frame) = crate::elements::tests::five_and_three();
        let settings = Settings {
            metrics: vec![
                Metric::KineticEnergy,
                Metric::CenterOfMass,
                Metric::LaceyIndex,
            ],
            lacey_cell: Some(1.0),
            lacey_min_particles: 1,
            ..Settings::default()
        };
        let (m, _) = compute(&frame, &ctx, &settings).expect("metrics");
        // Ids 1, 3, 4 at 1 m/s: E = 1/2 (m1 + m3 + m4), not the masses of entries 0, 1, 2.
        let (m1, m3, m4) = (ctx.masses[1], ctx.masses[3], ctx.masses[4]);
        let e = m.kinetic_energy_translational.expect("E_t");
        assert!((e - 0.5 * (m1 + m3 + m4)).abs() <= 1e-12 * e, "{e}");
        let z = |k: usize| frame.positions.as_ref().expect("positions")[k][2] as f64;
        let com_z = (m1 * z(0) + m3 * z(1) + m4 * z(2)) / (m1 + m3 + m4);
        let got = m.center_of_mass.expect("com")[2];
        assert!((got - com_z).abs() < 1e-12, "{got} vs {com_z}");
        assert_eq!(m.particles, 3);
        // One cell holding steel, steel, glass: present, computed from the mapped species.
        assert_eq!(
            m.lacey_species,
            Some(["glass".to_string(), "steel".to_string()])
        );
        assert!(m.lacey_index.is_some(), "{:?}", m.notes);
    }

    #[test]
    fn outflow_counters_and_discharge_rate_between_analysed_frames() {
        let (ctx, mut frame) = crate::elements::tests::five_and_three();
        let settings = Settings {
            metrics: vec![
                Metric::ParticleCount,
                Metric::RemovedCount,
                Metric::RemovedMass,
                Metric::DischargeRate,
            ],
            ..Settings::default()
        };
        let mut scratch = Scratch::default();
        frame.meta.sim_time = 0.5;
        (frame.meta.removed_count, frame.meta.removed_mass) = (2, 1.0);
        let (first, t) = compute_with(&frame, &ctx, &settings, &mut scratch).expect("metrics");
        assert_eq!(
            (first.particles, first.removed_count, first.removed_mass),
            (3, Some(2), Some(1.0))
        );
        assert_eq!(first.discharge_rate, None);
        assert!(first.notes.iter().any(|n| n.starts_with("discharge_rate")));
        // Header metrics are not timed as passes over the particles.
        assert!(t.iter().all(|(k, _)| k == "particle_ids"), "{t:?}");
        frame.meta.sim_time = 0.75;
        frame.meta.removed_mass = 1.5;
        let (second, _) = compute_with(&frame, &ctx, &settings, &mut scratch).expect("metrics");
        assert_eq!(second.discharge_rate, Some(2.0));
        // Not selected: null.
        let only_count = Settings {
            metrics: vec![Metric::RemovedCount],
            ..Settings::default()
        };
        let (m, _) = compute_with(&frame, &ctx, &only_count, &mut scratch).expect("metrics");
        assert_eq!((m.removed_mass, m.discharge_rate), (None, None));
    }

    #[test]
    fn metric_names_parse() {
        for m in Metric::ALL {
            assert_eq!(Metric::parse(m.name()), Ok(m));
        }
        assert_eq!(Metric::parse("max_speed"), Ok(Metric::Speed));
        assert_eq!(Metric::parse("particles"), Ok(Metric::ParticleCount));
        assert!(Metric::parse("entropy").unwrap_err().contains("known:"));
    }
}
