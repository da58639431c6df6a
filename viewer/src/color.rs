//! Particle colouring: which quantity (`ColorBy`), the colour maps, and the legend that
//! explains them. Shared by the CPU rasteriser and the window.

use std::fmt;
use std::str::FromStr;

use shm_protocol::{FieldKind, Frame, StaticData};

use crate::elements::Elements;

/// What the particle colour shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ColorBy {
    #[default]
    Species,
    Speed,
    AngularSpeed,
    Id,
    Contacts,
    Density,
    Pressure,
}

impl ColorBy {
    pub const ALL: [ColorBy; 7] = [
        Self::Species,
        Self::Speed,
        Self::AngularSpeed,
        Self::Id,
        Self::Contacts,
        Self::Density,
        Self::Pressure,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Species => "species",
            Self::Speed => "speed",
            Self::AngularSpeed => "angular-speed",
            Self::Id => "id",
            Self::Contacts => "contacts",
            Self::Density => "density",
            Self::Pressure => "pressure",
        }
    }

    /// Legend title with the unit.
    pub fn title(self) -> &'static str {
        match self {
            Self::Species => "species",
            Self::Speed => "speed [m/s]",
            Self::AngularSpeed => "angular speed [rad/s]",
            Self::Id => "particle id",
            Self::Contacts => "contacts",
            Self::Density => "density [kg/m^3]",
            Self::Pressure => "pressure [Pa]",
        }
    }

    /// The frame field this colouring needs (None: static data only).
    pub fn field(self) -> Option<FieldKind> {
        match self {
            Self::Species | Self::Id => None,
            Self::Speed => Some(FieldKind::Velocity),
            Self::AngularSpeed => Some(FieldKind::AngularVelocity),
            Self::Contacts => Some(FieldKind::ContactCount),
            Self::Density => Some(FieldKind::Density),
            Self::Pressure => Some(FieldKind::Pressure),
        }
    }

    pub fn next(self) -> Self {
        let i = Self::ALL.iter().position(|c| *c == self).unwrap_or(0);
        Self::ALL[(i + 1) % Self::ALL.len()]
    }
}

impl FromStr for ColorBy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.replace('_', "-");
        Self::ALL
            .into_iter()
            .find(|c| c.name() == s || (s == "contact-count" && *c == Self::Contacts))
            .ok_or_else(|| {
                let names: Vec<_> = Self::ALL.iter().map(|c| c.name()).collect();
                format!("unknown colouring {s:?}; one of {}", names.join(", "))
            })
    }
}

impl fmt::Display for ColorBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `--color-by`: a quantity, or `auto` (the default): species for DEM runs,
/// [`crate::sph::SPH_DEFAULT_COLORING`] for SPH runs, decided per frame by [`ColorChoice::resolve`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ColorChoice {
    #[default]
    Auto,
    Fixed(ColorBy),
}

impl ColorChoice {
    /// The colouring to use for a run that is (`sph`) or is not SPH.
    pub fn resolve(self, sph: bool) -> ColorBy {
        match self {
            Self::Fixed(c) => c,
            Self::Auto if sph => crate::sph::SPH_DEFAULT_COLORING,
            Self::Auto => ColorBy::Species,
        }
    }

    /// As [`ColorChoice::resolve`] for the fields `frame` carries: `auto` on an SPH run whose
    /// frames leave pressure out (`solver --fields`) takes the next of density and speed that
    /// they carry, rather than species.
    pub fn resolve_for(self, sph: bool, frame: &Frame) -> ColorBy {
        let first = self.resolve(sph);
        if self != Self::Auto || !sph {
            return first;
        }
        [first, ColorBy::Density, ColorBy::Speed]
            .into_iter()
            .find(|&c| carries(frame, c))
            .unwrap_or(ColorBy::Species)
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Fixed(c) => c.name(),
        }
    }
}

impl FromStr for ColorChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.trim() == "auto" {
            return Ok(Self::Auto);
        }
        s.parse::<ColorBy>()
            .map(Self::Fixed)
            .map_err(|e| format!("{e}, or auto"))
    }
}

impl fmt::Display for ColorChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

pub type Rgb = [u8; 3];

/// Categorical palette for species (Tableau 10): distinct hues, readable on a dark background.
pub const SPECIES_PALETTE: [Rgb; 10] = [
    [78, 121, 167],
    [242, 142, 43],
    [225, 87, 89],
    [118, 183, 178],
    [89, 161, 79],
    [237, 201, 72],
    [176, 122, 161],
    [255, 157, 167],
    [156, 117, 95],
    [186, 176, 172],
];

pub fn species_color(species: u32) -> Rgb {
    SPECIES_PALETTE[species as usize % SPECIES_PALETTE.len()]
}

/// Viridis sampled at 9 stops (perceptually uniform, colour-blind safe).
const VIRIDIS: [Rgb; 9] = [
    [68, 1, 84],
    [71, 44, 122],
    [59, 81, 139],
    [44, 113, 142],
    [33, 144, 141],
    [39, 173, 129],
    [92, 200, 99],
    [170, 220, 50],
    [253, 231, 37],
];

/// Viridis at `t` in 0..=1 (clamped; NaN maps to 0).
pub fn viridis(t: f32) -> Rgb {
    let t = if t.is_nan() { 0.0 } else { t.clamp(0.0, 1.0) };
    let x = t * (VIRIDIS.len() - 1) as f32;
    let i = (x as usize).min(VIRIDIS.len() - 2);
    let f = x - i as f32;
    let (a, b) = (VIRIDIS[i], VIRIDIS[i + 1]);
    std::array::from_fn(|k| (a[k] as f32 + (b[k] as f32 - a[k] as f32) * f).round() as u8)
}

/// What the colours mean, for a legend.
#[derive(Clone, Debug, PartialEq)]
pub enum Legend {
    Categories {
        title: String,
        entries: Vec<(String, Rgb)>,
    },
    Ramp {
        title: String,
        min: f32,
        max: f32,
    },
}

/// Per-particle colours and their legend.
#[derive(Clone, Debug)]
pub struct Coloring {
    pub colors: Vec<Rgb>,
    pub legend: Legend,
    /// Why the requested colouring could not be used, if it could not.
    pub note: Option<String>,
}

fn norm3(v: &[f32; 3]) -> f32 {
    (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt()
}

/// Whether `frame` holds what colouring `by` reads (static data needs nothing).
fn carries(frame: &Frame, by: ColorBy) -> bool {
    match by {
        ColorBy::Species | ColorBy::Id => true,
        ColorBy::Speed => frame.velocities.is_some(),
        ColorBy::AngularSpeed => frame.angular_velocities.is_some(),
        ColorBy::Contacts => frame.contact_counts.is_some(),
        ColorBy::Density => frame.densities.is_some(),
        ColorBy::Pressure => frame.pressures.is_some(),
    }
}

/// Scalar values for a continuous colouring, or `None` if the frame lacks the field.
fn scalars(by: ColorBy, el: &Elements<'_>, frame: &Frame, n: usize) -> Option<Vec<f32>> {
    let take = |v: &[f32]| v.iter().take(n).copied().collect::<Vec<_>>();
    match by {
        ColorBy::Species => None,
        ColorBy::Id => Some(
            (0..n)
                .map(|i| el.ids.get(i).map_or(i as f32, |&id| id as f32))
                .collect(),
        ),
        ColorBy::Speed => frame
            .velocities
            .as_ref()
            .map(|v| v.iter().take(n).map(norm3).collect()),
        ColorBy::AngularSpeed => frame
            .angular_velocities
            .as_ref()
            .map(|v| v.iter().take(n).map(norm3).collect()),
        ColorBy::Contacts => frame
            .contact_counts
            .as_ref()
            .map(|v| v.iter().take(n).map(|&c| c as f32).collect()),
        ColorBy::Density => frame.densities.as_deref().map(take),
        ColorBy::Pressure => frame.pressures.as_deref().map(take),
    }
}

/// Share of the values left out at each end of a [`robust_range`].
pub const ROBUST_TAIL: f64 = 0.005;

/// The finite values whose `exclude` entry is not set.
fn counted_values(values: &[f32], exclude: Option<&[bool]>) -> Vec<f32> {
    let counted = |i: &usize| exclude.is_none_or(|x| !x.get(*i).copied().unwrap_or(false));
    (0..values.len())
        .filter(counted)
        .map(|i| values[i])
        .filter(|v| v.is_finite())
        .collect()
}

/// Range of the finite values whose `exclude` entry is not set.
fn finite_range(values: &[f32], exclude: Option<&[bool]>) -> (f32, f32) {
    let (mut lo, mut hi) = (f32::INFINITY, f32::NEG_INFINITY);
    for v in counted_values(values, exclude) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if lo > hi {
        (0.0, 1.0)
    } else {
        (lo, hi)
    }
}

/// Range of the counted finite values without the [`ROBUST_TAIL`] most extreme at each end
/// (order statistics k and N - 1 - k, k = floor(0.005 (N - 1)): all of them below 201
/// values). For SPH pressure and density: weakly compressible SPH has isolated spikes at walls
/// and the free surface (the coarse dam break at t = 1 s spanned -5.9 to +12.5 kPa where the
/// water is at most 0.3 m deep, about 3 kPa hydrostatic), and a min-max range squeezed every
/// other particle into one or two colours. Values beyond the range take its end colours.
fn robust_range(values: &[f32], exclude: Option<&[bool]>) -> (f32, f32) {
    let mut v = counted_values(values, exclude);
    if v.is_empty() {
        return (0.0, 1.0);
    }
    let k = (ROBUST_TAIL * (v.len() - 1) as f64) as usize;
    let last = v.len() - 1 - k;
    let (_, &mut hi, _) = v.select_nth_unstable_by(last, f32::total_cmp);
    let (_, &mut lo, _) = v[..=last].select_nth_unstable_by(k, f32::total_cmp);
    (lo, hi)
}

/// Colours `n` particles of `frame` by `by`, falling back to species when a field is missing.
/// Species and ids are the frame's elements' (`el`); `st` names the species. Particles whose
/// `exclude` entry is set (SPH boundary particles drawn dimmed or not at all) still get a
/// colour but are left out of the colour range and the species legend.
pub fn color_particles(
    by: ColorBy,
    st: &StaticData,
    el: &Elements<'_>,
    frame: &Frame,
    n: usize,
    exclude: Option<&[bool]>,
) -> Coloring {
    if let Some(values) = scalars(by, el, frame, n) {
        let (mut min, max) = match by {
            ColorBy::Pressure | ColorBy::Density => robust_range(&values, exclude),
            _ => finite_range(&values, exclude),
        };
        // Magnitudes and counts read best from zero.
        if matches!(
            by,
            ColorBy::Speed | ColorBy::AngularSpeed | ColorBy::Contacts
        ) {
            min = 0.0;
        }
        let span = if max > min { max - min } else { 1.0 };
        let colors = values.iter().map(|&v| viridis((v - min) / span)).collect();
        return Coloring {
            colors,
            legend: Legend::Ramp {
                title: by.title().into(),
                min,
                max,
            },
            note: None,
        };
    }
    let note = (by != ColorBy::Species).then(|| {
        format!(
            "the frame has no {} field; colouring by species",
            by.field().map_or("?", FieldKind::name)
        )
    });
    let colors = (0..n)
        .map(|i| species_color(el.species.get(i).copied().unwrap_or(0)))
        .collect();
    let mut used: Vec<u32> = el
        .species
        .iter()
        .take(n)
        .enumerate()
        .filter(|(i, _)| exclude.is_none_or(|x| !x.get(*i).copied().unwrap_or(false)))
        .map(|(_, &s)| s)
        .collect();
    used.sort_unstable();
    used.dedup();
    let entries = used
        .iter()
        .map(|&s| {
            let name = st
                .species
                .get(s as usize)
                .map(|r| shm_protocol::static_data::decode_name(&r.name))
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| format!("species {s}"));
            (name, species_color(s))
        })
        .collect();
    Coloring {
        colors,
        legend: Legend::Categories {
            title: "species".into(),
            entries,
        },
        note,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for c in ColorBy::ALL {
            assert_eq!(c.name().parse::<ColorBy>(), Ok(c));
        }
        assert!("colour".parse::<ColorBy>().is_err());
    }

    #[test]
    fn viridis_ends() {
        assert_eq!(viridis(0.0), VIRIDIS[0]);
        assert_eq!(viridis(1.0), VIRIDIS[8]);
        assert_eq!(viridis(f32::NAN), VIRIDIS[0]);
    }

    #[test]
    fn missing_field_falls_back_to_species() {
        let st = StaticData {
            particle_species: vec![0, 1],
            ..Default::default()
        };
        let frame = Frame::default();
        let el = Elements::of(&st, &frame);
        let c = color_particles(ColorBy::Pressure, &st, &el, &frame, 2, None);
        assert!(matches!(c.legend, Legend::Categories { .. }));
        assert!(c.note.is_some());
        assert_eq!(c.colors, vec![species_color(0), species_color(1)]);
    }

    #[test]
    fn species_and_ids_follow_the_frame_ids() {
        let (mut st, frame) = crate::elements::tests::five_and_three();
        st.species = vec![
            shm_protocol::SpeciesRecord::named("glass", 0.01, 2500.0),
            shm_protocol::SpeciesRecord::named("steel", 0.01, 7800.0),
        ];
        let el = Elements::of(&st, &frame);
        let c = color_particles(ColorBy::Species, &st, &el, &frame, 3, None);
        // Ids 1, 3, 4 are steel, steel, glass (element order, not static order 0, 1, 0).
        let want = [species_color(1), species_color(1), species_color(0)];
        assert_eq!(c.colors, want);
        let Legend::Categories { entries, .. } = c.legend else {
            panic!("species legend expected");
        };
        assert_eq!(
            entries.iter().map(|e| e.0.as_str()).collect::<Vec<_>>(),
            ["glass", "steel"]
        );
        // Colouring by id shows the particles' ids, 1 to 4.
        let by_id = color_particles(ColorBy::Id, &st, &el, &frame, 3, None);
        assert_eq!(
            by_id.legend,
            Legend::Ramp {
                title: "particle id".into(),
                min: 1.0,
                max: 4.0
            }
        );
    }

    #[test]
    fn auto_is_species_for_dem_and_pressure_for_sph() {
        assert_eq!("auto".parse::<ColorChoice>(), Ok(ColorChoice::Auto));
        assert_eq!(
            "speed".parse::<ColorChoice>(),
            Ok(ColorChoice::Fixed(ColorBy::Speed))
        );
        assert!("colour"
            .parse::<ColorChoice>()
            .unwrap_err()
            .contains("auto"));
        assert_eq!(ColorChoice::Auto.resolve(false), ColorBy::Species);
        assert_eq!(ColorChoice::Auto.resolve(true), ColorBy::Pressure);
        let fixed = ColorChoice::Fixed(ColorBy::Density);
        assert_eq!(
            (fixed.resolve(true), fixed.resolve(false)),
            (ColorBy::Density, ColorBy::Density)
        );
    }

    #[test]
    fn auto_on_sph_frames_without_pressure_takes_what_they_carry() {
        let with = |kinds: &[FieldKind]| {
            let has = |k: FieldKind| kinds.contains(&k);
            Frame {
                positions: Some(vec![[0.0; 3]]),
                velocities: has(FieldKind::Velocity).then(|| vec![[0.0; 3]]),
                densities: has(FieldKind::Density).then(|| vec![1000.0]),
                pressures: has(FieldKind::Pressure).then(|| vec![0.0]),
                ..Frame::default()
            }
        };
        let all = with(&[
            FieldKind::Position,
            FieldKind::Velocity,
            FieldKind::Density,
            FieldKind::Pressure,
        ]);
        let auto = ColorChoice::Auto;
        assert_eq!(auto.resolve_for(true, &all), ColorBy::Pressure);
        let no_p = with(&[FieldKind::Position, FieldKind::Velocity, FieldKind::Density]);
        assert_eq!(auto.resolve_for(true, &no_p), ColorBy::Density);
        let vel = with(&[FieldKind::Position, FieldKind::Velocity]);
        assert_eq!(auto.resolve_for(true, &vel), ColorBy::Speed);
        let pos = with(&[FieldKind::Position]);
        assert_eq!(auto.resolve_for(true, &pos), ColorBy::Species);
        // DEM runs and fixed choices are as asked (a missing field falls back with a note).
        assert_eq!(auto.resolve_for(false, &pos), ColorBy::Species);
        let fixed = ColorChoice::Fixed(ColorBy::Pressure);
        assert_eq!(fixed.resolve_for(true, &pos), ColorBy::Pressure);
    }

    #[test]
    fn excluded_particles_leave_the_range_and_the_legend() {
        let st = crate::sph::tests::sph_static(&[0, 0, 1]);
        let mut frame = Frame {
            pressures: Some(vec![100.0, 300.0, 9000.0]),
            ..Default::default()
        };
        frame.meta.particle_count = 3;
        let el = Elements::of(&st, &frame);
        let exclude = [false, false, true];
        let c = color_particles(ColorBy::Pressure, &st, &el, &frame, 3, Some(&exclude));
        let Legend::Ramp { min, max, .. } = c.legend else {
            panic!("ramp expected");
        };
        assert_eq!((min, max), (100.0, 300.0));
        assert_eq!(c.colors[0], viridis(0.0));
        assert_eq!(c.colors[1], viridis(1.0));
        let c = color_particles(ColorBy::Species, &st, &el, &frame, 3, Some(&exclude));
        let Legend::Categories { entries, .. } = c.legend else {
            panic!("species legend expected");
        };
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].0, "fluid");
    }

    #[test]
    fn pressure_range_leaves_out_the_spikes() {
        // 1000 values 0..999 Pa and two spikes: the range is the 5th to the 995th value.
        let mut v: Vec<f32> = (0..1000).map(|i| i as f32).collect();
        v.extend([-1e6, 1e7]);
        let (lo, hi) = robust_range(&v, None);
        assert_eq!((lo, hi), (4.0, 995.0));
        // Few values: all of them.
        assert_eq!(robust_range(&[3.0, -2.0, 9.0], None), (-2.0, 9.0));
        assert_eq!(robust_range(&[f32::NAN], None), (0.0, 1.0));
    }
}
