//! Per-particle static data (mass, radius, species) of a frame's elements.
//!
//! [`StaticContext`] holds them in static order. A frame without `particle_id` holds every
//! static particle in that order, and the static arrays are used as they are (no copy). A run
//! whose particle set changes (outflow, inflow) fills `particle_id` and its frames hold only the
//! live particles: element `i` is static entry `particle_id[i]` (LAYOUT.md, "Runs whose particle
//! set changes"), so the arrays the selected metrics read are gathered by id, into buffers kept
//! from frame to frame (no allocation per frame once the run's size is reached).

use rayon::prelude::*;
use shm_protocol::Frame;

use crate::context::StaticContext;
use crate::metrics::{FrameMismatch, Metric};
use crate::par::CHUNK;

/// Which per-element arrays the selected metrics read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Needs {
    pub masses: bool,
    pub radii: bool,
    pub species: bool,
}

impl Needs {
    /// What `metrics` read, in a run that is (`sph`) or is not SPH. In an SPH run the fluid
    /// pass reads every mass (its count and mass) and the species (fluid or boundary, when
    /// the frame carries no `particle_kind`).
    pub fn of(metrics: &[Metric], sph: bool) -> Self {
        let any = |set: &[Metric]| metrics.iter().any(|m| set.contains(m));
        let fluid = sph && any(&crate::metrics::sph::FLUID_PASS);
        let interpolated = sph && any(&[Metric::WaterHeight, Metric::ProbePressure]);
        Self {
            masses: fluid
                || any(&[
                    Metric::KineticEnergy,
                    Metric::PotentialEnergy,
                    Metric::CenterOfMass,
                ]),
            radii: (sph && any(&[Metric::SurgeFront]))
                || any(&[
                    Metric::KineticEnergy,
                    Metric::SolidFraction,
                    Metric::CoordinationNumber,
                    Metric::BodyTorque,
                ]),
            species: fluid || interpolated || any(&[Metric::LaceyIndex]),
        }
    }
}

/// Buffers of the gathered arrays, reused from frame to frame.
#[derive(Default)]
pub struct ElementScratch {
    masses: Vec<f64>,
    radii: Vec<f32>,
    species: Vec<u32>,
}

/// The static data of each element of one frame, in frame order. `None`: not needed by the
/// selected metrics and not gathered (never `None` for a frame without ids).
#[derive(Clone, Copy, Debug, Default)]
pub struct Elements<'a> {
    /// [kg]
    pub masses: Option<&'a [f64]>,
    /// [m]
    pub radii: Option<&'a [f32]>,
    pub species: Option<&'a [u32]>,
}

/// The per-element arrays of `frame` that `needs` asks for. Errors when the frame cannot belong
/// to `ctx`: without ids its particle count must be the static one; with ids, there must be one
/// per particle and each must name a static particle.
pub fn elements<'a>(
    frame: &Frame,
    ctx: &'a StaticContext,
    needs: Needs,
    scratch: &'a mut ElementScratch,
) -> Result<Elements<'a>, FrameMismatch> {
    let n = frame.meta.particle_count;
    let static_count = ctx.particle_count();
    let Some(ids) = frame.particle_ids.as_deref() else {
        if n as usize != static_count {
            return Err(FrameMismatch::ParticleCount {
                seq: frame.meta.seq,
                frame: n,
                static_count,
            });
        }
        return Ok(Elements {
            masses: Some(&ctx.masses),
            radii: Some(&ctx.radii),
            species: Some(&ctx.species),
        });
    };
    if ids.len() as u64 != n {
        return Err(FrameMismatch::IdCount {
            seq: frame.meta.seq,
            ids: ids.len(),
            frame: n,
        });
    }
    if let Some(id) = ids
        .par_iter()
        .with_min_len(CHUNK)
        .copied()
        .find_any(|&id| id as usize >= static_count)
    {
        return Err(FrameMismatch::UnknownId {
            seq: frame.meta.seq,
            id,
            static_count,
        });
    }
    let ElementScratch {
        masses,
        radii,
        species,
    } = scratch;
    Ok(Elements {
        masses: needs.masses.then(|| gather(masses, &ctx.masses, ids)),
        radii: needs.radii.then(|| gather(radii, &ctx.radii, ids)),
        species: needs.species.then(|| gather(species, &ctx.species, ids)),
    })
}

/// `dst[i] = src[ids[i]]`, the ids already checked against the static count (an id outside
/// `src` would read as 0, never panic).
fn gather<'a, T: Copy + Default + Send + Sync>(
    dst: &'a mut Vec<T>,
    src: &[T],
    ids: &[u32],
) -> &'a [T] {
    dst.clear();
    dst.par_extend(
        ids.par_iter()
            .with_min_len(CHUNK)
            .map(|&id| src.get(id as usize).copied().unwrap_or_default()),
    );
    dst
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use shm_protocol::{FieldKind, SpeciesRecord, StaticData};

    /// Five particles of two species (glass 2500 kg/m^3 for even ids, steel 7800 for odd ids;
    /// radii 1..5 cm) and a frame of ids 1, 3, 4 at rest with speed 1 m/s along x.
    pub(crate) fn five_and_three() -> (StaticContext, Frame) {
        let st = StaticData {
            species: vec![
                SpeciesRecord::named("glass", 0.01, 2500.0),
                SpeciesRecord::named("steel", 0.01, 7800.0),
            ],
            particle_ids: (0..5).collect(),
            particle_species: vec![0, 1, 0, 1, 0],
            particle_radius: vec![0.01, 0.02, 0.03, 0.04, 0.05],
            world_min: [0.0; 3],
            world_max: [1.0; 3],
            ..Default::default()
        };
        let mut frame = Frame {
            positions: Some(vec![[0.2, 0.5, 0.1], [0.5, 0.5, 0.2], [0.8, 0.5, 0.3]]),
            velocities: Some(vec![[1.0, 0.0, 0.0]; 3]),
            particle_ids: Some(vec![1, 3, 4]),
            ..Default::default()
        };
        frame.meta.seq = 4;
        frame.meta.particle_count = 3;
        frame.meta.fields =
            FieldKind::Position.bit() | FieldKind::Velocity.bit() | FieldKind::ParticleId.bit();
        (StaticContext::new(st).expect("context"), frame)
    }

    const ALL: Needs = Needs {
        masses: true,
        radii: true,
        species: true,
    };

    #[test]
    fn ids_gather_the_static_entries() {
        let (ctx, frame) = five_and_three();
        let mut scratch = ElementScratch::default();
        let el = elements(&frame, &ctx, ALL, &mut scratch).expect("elements");
        assert_eq!(el.species, Some(&[1, 1, 0][..]));
        assert_eq!(el.radii, Some(&[0.02, 0.04, 0.05][..]));
        let m = el.masses.expect("masses");
        assert_eq!(m, [ctx.masses[1], ctx.masses[3], ctx.masses[4]]);
    }

    #[test]
    fn only_what_the_metrics_read_is_gathered() {
        let (ctx, frame) = five_and_three();
        let mut scratch = ElementScratch::default();
        let needs = Needs::of(&[Metric::LaceyIndex, Metric::RemovedMass], false);
        assert_eq!(
            needs,
            Needs {
                species: true,
                ..Needs::default()
            }
        );
        let el = elements(&frame, &ctx, needs, &mut scratch).expect("elements");
        assert!(el.masses.is_none() && el.radii.is_none());
        assert_eq!(el.species, Some(&[1, 1, 0][..]));
    }

    #[test]
    fn without_ids_the_static_arrays_are_used_in_place() {
        let (ctx, mut frame) = five_and_three();
        frame.particle_ids = None;
        let mut scratch = ElementScratch::default();
        // Three particles but five in the static section: refused as before.
        assert!(matches!(
            elements(&frame, &ctx, ALL, &mut scratch),
            Err(FrameMismatch::ParticleCount { frame: 3, .. })
        ));
        frame.meta.particle_count = 5;
        let el = elements(&frame, &ctx, Needs::default(), &mut scratch).expect("elements");
        assert!(std::ptr::eq(el.masses.expect("masses"), &ctx.masses[..]));
    }

    #[test]
    fn unknown_ids_and_short_id_arrays_are_refused() {
        let (ctx, mut frame) = five_and_three();
        let mut scratch = ElementScratch::default();
        frame.particle_ids = Some(vec![1, 3, 5]);
        let e = elements(&frame, &ctx, ALL, &mut scratch).unwrap_err();
        assert_eq!(
            e,
            FrameMismatch::UnknownId {
                seq: 4,
                id: 5,
                static_count: 5
            }
        );
        assert!(e.to_string().contains("particle id 5"), "{e}");
        frame.particle_ids = Some(vec![1, 3]);
        assert!(matches!(
            elements(&frame, &ctx, ALL, &mut scratch),
            Err(FrameMismatch::IdCount {
                ids: 2,
                frame: 3,
                ..
            })
        ));
    }
}
