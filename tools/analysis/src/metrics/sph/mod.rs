//! Metrics of SPH runs (issue 17): fluid mass, the fluid's energies, speeds and centre of mass,
//! the surge front, water height at gauges and pressure at probes.
//!
//! A run is SPH when its static section has species of the methods `sph_fluid`/`sph_boundary`
//! ([`run::SphRun`]). Fluid particles are those of kind 1 in the frame's `particle_kind` (or of
//! an `sph_fluid` species when the frame carries no kinds); boundary particles (the walls) count
//! for nothing but the fluid fraction near them.

pub mod fluid;
pub mod interp;
pub mod kernel;
pub mod run;

use shm_protocol::Frame;

use super::{Metric, Metrics, Settings};
use crate::elements::Elements;
use fluid::{fluid_sums, FluidInputs, FluidRequest};
use interp::{interpolate, InterpInputs, InterpParams};
use run::{FluidSelector, SphRun};

/// Metrics an SPH run answers from the fluid pass ([`fluid::fluid_sums`]): the DEM keys of the
/// energies, speeds and centre of mass, over the fluid only, and the SPH ones.
pub const FLUID_PASS: [Metric; 6] = [
    Metric::KineticEnergy,
    Metric::PotentialEnergy,
    Metric::Speed,
    Metric::CenterOfMass,
    Metric::SurgeFront,
    Metric::FluidMass,
];

/// Which elements of `frame` are fluid.
pub fn selector<'a>(frame: &'a Frame, el: &Elements<'a>, run: &'a SphRun) -> FluidSelector<'a> {
    match frame.particle_kinds.as_deref() {
        Some(k) => FluidSelector::Kinds(k),
        None => FluidSelector::Species {
            species: el.species.unwrap_or_default(),
            fluid_species: &run.fluid_species,
        },
    }
}

/// The selected metrics of [`FLUID_PASS`], from one pass over the fluid.
pub fn fluid_metrics(
    out: &mut Metrics,
    frame: &Frame,
    el: &Elements<'_>,
    run: &SphRun,
    gravity: [f64; 3],
    settings: &Settings,
    selected: &[Metric],
) {
    let (pos, vel) = (frame.positions.as_deref(), frame.velocities.as_deref());
    let wants = |m: Metric| selected.contains(&m);
    let mut missing = |metric: Metric, what: &str, have: bool| {
        if wants(metric) && !have {
            out.notes
                .push(format!("{}: frames carry no {what}", metric.name()));
        }
        wants(metric) && have
    };
    let kinetic = missing(Metric::KineticEnergy, "velocity", vel.is_some());
    let speeds = missing(Metric::Speed, "velocity", vel.is_some());
    let potential = missing(Metric::PotentialEnergy, "position", pos.is_some());
    let center = missing(Metric::CenterOfMass, "position", pos.is_some());
    let surge = missing(Metric::SurgeFront, "position", pos.is_some());
    let Some(masses) = el.masses else {
        out.notes
            .push("fluid metrics: no particle masses (static data)".into());
        return;
    };
    let q = FluidRequest {
        kinetic,
        potential: potential.then_some((gravity, run.domain_min)),
        speeds,
        center_of_mass: center,
        surge: surge.then_some(settings.surge_axis),
    };
    let inputs = FluidInputs {
        positions: pos,
        velocities: vel,
        masses,
        radii: el.radii,
        fluid: selector(frame, el, run),
    };
    let s = fluid_sums(inputs, &q);
    if wants(Metric::FluidMass) {
        out.fluid_particles = Some(s.count);
        out.fluid_mass = Some(s.mass);
    }
    out.kinetic_energy_translational = kinetic.then_some(s.kinetic);
    out.potential_energy = potential.then_some(s.potential);
    if let Some((max, mean)) = s.speeds().filter(|_| speeds) {
        out.max_speed = Some(max);
        out.mean_speed = Some(mean);
    }
    if center {
        out.center_of_mass = s.center_of_mass();
    }
    if surge {
        out.surge_axis = Some(settings.surge_axis.name());
        out.surge_front = s.surge_front(settings.surge_axis);
        if out.surge_front.is_none() {
            out.notes.push("surge_front: no fluid particle".into());
        }
    }
}

/// Pressure at the probes and water height at the gauges, as selected.
pub fn interpolated_metrics(
    out: &mut Metrics,
    frame: &Frame,
    el: &Elements<'_>,
    run: &SphRun,
    settings: &Settings,
    selected: &[Metric],
) {
    let probes = if selected.contains(&Metric::ProbePressure) {
        settings.probes.as_slice()
    } else {
        &[]
    };
    let gauges = if selected.contains(&Metric::WaterHeight) {
        settings.gauges.as_slice()
    } else {
        &[]
    };
    if probes.is_empty() && gauges.is_empty() {
        return;
    }
    let Some(h) = run.h else {
        out.notes.push(
            "probe_pressure, water_height: the run's species give no smoothing length".into(),
        );
        return;
    };
    let Some(positions) = frame.positions.as_deref() else {
        out.notes
            .push("probe_pressure, water_height: frames carry no position".into());
        return;
    };
    let pressures = frame.pressures.as_deref();
    let probes = if pressures.is_none() && !probes.is_empty() {
        out.notes
            .push("probe_pressure: frames carry no pressure".into());
        &[]
    } else {
        probes
    };
    if frame.densities.is_none() {
        out.notes.push(
            "probe_pressure, water_height: frames carry no density; particle volumes taken at the rest density"
                .into(),
        );
    }
    let inputs = InterpInputs {
        positions,
        densities: frame.densities.as_deref(),
        pressures,
        fluid: selector(frame, el, run),
    };
    let params = InterpParams {
        kernel: run.kernel,
        h,
        mass: run.mass,
        rho0: run.rho0,
        dp: run.dp,
        floor: run.floor(),
        top: run.domain_max[2],
    };
    let (p, g) = interpolate(&inputs, &params, probes, gauges);
    if !probes.is_empty() {
        out.probe_pressure = Some(p);
    }
    if !gauges.is_empty() {
        out.water_height = Some(g);
    }
}

#[cfg(test)]
mod tests {
    use super::interp::{Gauge, Probe};
    use crate::context::StaticContext;
    use crate::metrics::{compute, Metric, Settings};
    use shm_protocol::Frame;

    /// A hand-built SPH frame: 2 x 2 x 2 fluid particles (dp = 2 cm, at rest but one moving at
    /// 1 m/s along x) above a row of boundary particles at z = -1 cm; kinds in the frame.
    fn sph_frame() -> (StaticContext, Frame) {
        use crate::metrics::sph::run::tests::sph_record;
        use shm_protocol::layout::SpeciesMethod;
        let dp = 0.02;
        let h = 3f64.sqrt() * dp;
        let mut pos = Vec::new();
        for k in 0..2 {
            for j in 0..2 {
                for i in 0..2 {
                    let c = |m: i32| (dp * (m as f64 + 0.5)) as f32;
                    pos.push([c(i), c(j), c(k)]);
                }
            }
        }
        let fluid = pos.len();
        for i in 0..4 {
            pos.push([(dp * (i as f64 + 0.5)) as f32, 0.01, -0.01]);
        }
        let n = pos.len();
        let kinds: Vec<u32> = (0..n).map(|i| if i < fluid { 1 } else { 2 }).collect();
        let st = shm_protocol::StaticData {
            config_toml:
                "method = \"sph\"\n[domain]\nmin = [0.0, 0.0, 0.0]\nmax = [0.1, 0.1, 0.1]\n".into(),
            species: vec![
                sph_record("fluid", SpeciesMethod::SphFluid, dp, h),
                sph_record("boundary", SpeciesMethod::SphBoundary, dp, h),
            ],
            particle_ids: (0..n as u32).collect(),
            particle_species: kinds.iter().map(|&k| u32::from(k == 2)).collect(),
            particle_radius: vec![(0.5 * dp) as f32; n],
            world_min: [-0.08; 3],
            world_max: [0.18; 3],
            ..Default::default()
        };
        let mut vel = vec![[0.0f32; 3]; n];
        vel[3] = [1.0, 0.0, 0.0];
        // Walls far "faster": they must not count.
        for v in &mut vel[fluid..] {
            *v = [50.0, 0.0, 0.0];
        }
        let mut frame = Frame {
            positions: Some(pos),
            velocities: Some(vel),
            densities: Some(vec![1000.0; n]),
            pressures: Some(vec![100.0; n]),
            particle_kinds: Some(kinds),
            ..Default::default()
        };
        frame.meta.particle_count = n as u64;
        (StaticContext::new(st).expect("context"), frame)
    }

    #[test]
    fn sph_frames_get_fluid_metrics_and_skip_the_granular_ones() {
        let (ctx, frame) = sph_frame();
        let settings = Settings {
            probes: vec![Probe([0.02, 0.02, 0.02])],
            gauges: vec![Gauge([0.02, 0.02])],
            ..Settings::default()
        };
        let (m, t) = compute(&frame, &ctx, &settings).expect("metrics");
        let mass = crate::metrics::sph::run::lattice_mass(1000.0, 0.01);
        assert_eq!(m.fluid_particles, Some(8));
        let fluid_mass = m.fluid_mass.expect("fluid mass");
        assert!((fluid_mass - 8.0 * mass).abs() < 1e-15, "{fluid_mass}");
        // Kinetic energy of the fluid only: 1/2 m 1^2.
        assert_eq!(m.kinetic_energy_translational, Some(0.5 * mass));
        assert_eq!(m.kinetic_energy_rotational, None);
        assert_eq!(m.max_speed, Some(1.0));
        assert_eq!(m.mean_speed, Some(1.0 / 8.0));
        // Potential energy above the floor (z = 0): 9.81 m (4 * 0.01 + 4 * 0.03).
        let z = |v: f64| v as f32 as f64;
        let pe = 9.81 * mass * (4.0 * z(0.01) + 4.0 * z(0.03));
        let got = m.potential_energy.expect("E_p");
        assert!((got - pe).abs() < 1e-12 * pe, "{got} vs {pe}");
        let com = m.center_of_mass.expect("com");
        assert!((com[2] - 0.5 * (z(0.01) + z(0.03))).abs() < 1e-9, "{com:?}");
        // Front: the last fluid column at x = 0.03 plus half the spacing (walls reach 0.07).
        let front = m.surge_front.expect("front");
        assert!((front - (z(0.03) + z(0.01))).abs() < 1e-9, "{front}");
        assert_eq!(m.surge_axis, Some("+x"));
        // Uniform pressure, but eight particles fill less than half the probe's support: the
        // sum is divided by 1/2, not by the fraction (a small blob does not read full pressure).
        let p = &m.probe_pressure.as_ref().expect("probes")[0];
        assert!(p.fluid_fraction > 0.2 && p.fluid_fraction < 0.5, "{p:?}");
        assert!(
            (p.pressure - 100.0 * p.fluid_fraction / 0.5).abs() < 1e-9,
            "{p:?}"
        );
        assert_eq!(m.water_height.as_ref().map(Vec::len), Some(1));
        // Granular metrics are skipped, without notes (the one note is the discharge rate's,
        // which needs a second frame).
        assert_eq!(
            (m.coordination_number, m.solid_fraction, m.lacey_index),
            (None, None, None)
        );
        assert!(m.body_torque.is_none());
        assert!(
            m.notes.iter().all(|n| n.starts_with("discharge_rate")),
            "{:?}",
            m.notes
        );
        let names: Vec<&str> = t.iter().map(|(k, _)| k.as_str()).collect();
        assert!(names.iter().any(|k| k.contains("surge_front")), "{names:?}");
        // Named explicitly, they are computed all the same.
        let explicit = Settings {
            metrics: vec![Metric::CoordinationNumber],
            explicit: true,
            ..Settings::default()
        };
        let (m, _) = compute(&frame, &ctx, &explicit).expect("metrics");
        assert!(m.coordination_number.is_some());
        assert!(m.fluid_mass.is_none());
    }

    #[test]
    fn sph_metrics_on_a_dem_run_are_skipped_or_noted() {
        let (ctx, mut frame) = crate::elements::tests::five_and_three();
        frame.particle_ids = None;
        frame.meta.particle_count = 5;
        frame.positions = Some(vec![[0.5; 3]; 5]);
        frame.velocities = Some(vec![[0.0; 3]; 5]);
        let (m, _) = compute(&frame, &ctx, &Settings::default()).expect("metrics");
        assert_eq!((m.surge_front, m.fluid_mass), (None, None));
        assert!(m.notes.iter().all(|n| !n.contains("SPH")), "{:?}", m.notes);
        let explicit = Settings {
            metrics: vec![Metric::SurgeFront],
            explicit: true,
            ..Settings::default()
        };
        let (m, _) = compute(&frame, &ctx, &explicit).expect("metrics");
        assert!(m.surge_front.is_none());
        assert!(
            m.notes.iter().any(|n| n.contains("not an SPH run")),
            "{:?}",
            m.notes
        );
    }
}
