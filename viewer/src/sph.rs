//! What the viewer does differently for SPH runs: telling boundary particles from fluid ones,
//! how boundary particles are drawn (`--boundary`, the window's B key), and the colouring an SPH
//! run gets by default.
//!
//! An SPH segment (LAYOUT.md) has species of the methods `sph_fluid` and `sph_boundary`, and
//! its frames carry `particle_kind` (1 fluid, 2 boundary). The solver's boundary particles are
//! layers of dynamic boundary particles all around the tank, lid included: drawn like the
//! fluid they hide it from every side. So they are hidden by default, as DualSPHysics users
//! look at the fluid alone (its post-processing writes the fluid, `PartFluid`, apart from the
//! boundary, `PartBound`, and most of its figures show only the former).

use shm_protocol::layout::{ParticleKind, SpeciesMethod};
use shm_protocol::{Frame, StaticData};

use crate::color::{ColorBy, Rgb};
use crate::elements::Elements;

/// How boundary particles of an SPH run are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum BoundaryMode {
    /// Not drawn: the fluid is seen from every side (the default).
    #[default]
    Hidden,
    /// Small grey dots, a fifth of their size (so the fluid shows between them), left out of
    /// the colour range and the legend: the tank's outline around the fluid.
    Dimmed,
    /// Drawn like the fluid, coloured by the same quantity (their pressure is the wall's).
    Shown,
}

impl BoundaryMode {
    pub const ALL: [BoundaryMode; 3] = [Self::Hidden, Self::Dimmed, Self::Shown];

    pub fn name(self) -> &'static str {
        match self {
            Self::Hidden => "hidden",
            Self::Dimmed => "dimmed",
            Self::Shown => "shown",
        }
    }

    /// The next mode in `ALL` order (the window's B key).
    pub fn next(self) -> Self {
        let i = Self::ALL.iter().position(|m| *m == self).unwrap_or(0);
        Self::ALL[(i + 1) % Self::ALL.len()]
    }
}

/// Colour of dimmed boundary particles (before shading): a grey darker than meshes, so that
/// they read as background structure.
pub const DIMMED_COLOR: Rgb = [105, 108, 118];
/// Radius of a dimmed boundary particle relative to its own. Boundary particles sit on a
/// lattice of spacing 2 r: at 0.2 r a layer covers pi 0.2^2 / 4 = 3 % of the area behind it, so
/// four layers seen at an angle still leave most of the fluid visible.
pub const DIMMED_RADIUS: f32 = 0.2;

/// The colouring an SPH run gets unless one is asked for: pressure shows the hydrostatic state
/// of still water and the impacts of a dam break (the quantity the SPHERIC benchmarks measure);
/// speed and density are one C key away.
pub const SPH_DEFAULT_COLORING: ColorBy = ColorBy::Pressure;

/// Whether the run is SPH: a species of an SPH method, or a frame whose particle kinds say
/// fluid or boundary.
pub fn is_sph(st: &StaticData, frame: &Frame) -> bool {
    let sph_species = st.species.iter().any(|s| {
        matches!(
            s.method(),
            Some(SpeciesMethod::SphFluid | SpeciesMethod::SphBoundary)
        )
    });
    sph_species
        || frame.particle_kinds.as_deref().is_some_and(|k| {
            k.iter()
                .any(|&k| k == ParticleKind::Fluid as u32 || k == ParticleKind::Boundary as u32)
        })
}

/// Which of the first `n` elements of `frame` are SPH boundary particles: by the frame's
/// `particle_kind` when it carries one, else by the method of the element's species. `None`
/// when none is (every DEM run), so DEM scenes pay nothing.
pub fn boundary_mask(
    st: &StaticData,
    el: &Elements<'_>,
    frame: &Frame,
    n: usize,
) -> Option<Vec<bool>> {
    let boundary = ParticleKind::Boundary as u32;
    let mask: Vec<bool> = match frame.particle_kinds.as_deref() {
        Some(kinds) => (0..n).map(|i| kinds.get(i) == Some(&boundary)).collect(),
        None => {
            let boundary_species: Vec<bool> = st
                .species
                .iter()
                .map(|s| s.method() == Some(SpeciesMethod::SphBoundary))
                .collect();
            if !boundary_species.contains(&true) {
                return None;
            }
            (0..n)
                .map(|i| {
                    el.species
                        .get(i)
                        .and_then(|&s| boundary_species.get(s as usize))
                        .copied()
                        .unwrap_or(false)
                })
                .collect()
        }
    };
    mask.contains(&true).then_some(mask)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use shm_protocol::SpeciesRecord;

    /// An SPH static section: species 0 "fluid" (sph_fluid), 1 "boundary" (sph_boundary);
    /// particles of the given species, radius 1 cm.
    pub(crate) fn sph_static(species: &[u32]) -> StaticData {
        let record = |name: &str, method: SpeciesMethod| SpeciesRecord {
            method: method as u32,
            ..SpeciesRecord::named(name, 0.01, 1000.0)
        };
        StaticData {
            species: vec![
                record("fluid", SpeciesMethod::SphFluid),
                record("boundary", SpeciesMethod::SphBoundary),
            ],
            particle_ids: (0..species.len() as u32).collect(),
            particle_species: species.to_vec(),
            particle_radius: vec![0.01; species.len()],
            world_min: [0.0; 3],
            world_max: [1.0; 3],
            ..Default::default()
        }
    }

    #[test]
    fn next_cycles_and_names_match_the_command_line() {
        use clap::ValueEnum;
        let mut m = BoundaryMode::Hidden;
        for want in [
            BoundaryMode::Dimmed,
            BoundaryMode::Shown,
            BoundaryMode::Hidden,
        ] {
            m = m.next();
            assert_eq!(m, want);
        }
        for m in BoundaryMode::ALL {
            let v = m.to_possible_value().expect("every mode is a value");
            assert_eq!(v.get_name(), m.name());
        }
    }

    #[test]
    fn kinds_decide_and_species_methods_stand_in() {
        let st = sph_static(&[0, 1, 1]);
        let mut frame = Frame {
            positions: Some(vec![[0.5; 3]; 3]),
            ..Default::default()
        };
        frame.meta.particle_count = 3;
        let el = Elements::of(&st, &frame);
        // No particle_kind in the frame (e.g. an old forwarder): the species' methods.
        assert_eq!(
            boundary_mask(&st, &el, &frame, 3),
            Some(vec![false, true, true])
        );
        // The frame's kinds win over the species.
        frame.particle_kinds = Some(vec![2, 1, 1]);
        let el = Elements::of(&st, &frame);
        assert_eq!(
            boundary_mask(&st, &el, &frame, 3),
            Some(vec![true, false, false])
        );
        assert!(is_sph(&st, &frame));
        // A DEM run: no mask at all.
        let dem = StaticData {
            species: vec![SpeciesRecord::named("glass", 0.01, 2500.0)],
            particle_species: vec![0; 3],
            ..Default::default()
        };
        let frame = Frame::default();
        let el = Elements::of(&dem, &frame);
        assert_eq!(boundary_mask(&dem, &el, &frame, 3), None);
        assert!(!is_sph(&dem, &frame));
    }
}
