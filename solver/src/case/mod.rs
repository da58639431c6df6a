//! Case configuration: what is simulated (TOML file or a built-in default), and its validation.
//!
//! A case file is read with [`Case::from_file`], which parses it (unknown keys are errors),
//! resolves STL paths relative to the file, and runs [`Case::validate`]. Every error names the file
//! and the field, e.g. `case.toml: species[1].radius must be > 0, got -0.1`.
//!
//! Submodules: `ranges` (the documented range of every number), `validate` (field checks),
//! `capacity` (particle counts against the protocol's limit and the machine's memory),
//! `materials` (pair parameter tables and the time-step stability check), `sources` (particle
//! placement, initial overlap check), `default` (the XPS falling-box benchmark).

mod capacity;
mod de;
mod default;
mod materials;
pub mod ranges;
pub(crate) mod sources;
mod validate;

pub use capacity::{
    available_memory, human_bytes, memory_refusal, MAX_PARTICLES, PLACEMENT_BYTES_PER_PARTICLE,
    RANDOM_BOX_BYTES_PER_PARTICLE, STATE_BYTES_PER_PARTICLE,
};
pub use materials::{InteractionTarget, MaterialTable, StabilityReport, BOX_FACES};
pub use sources::{InitialParticle, PlacementLimits, Region};
pub use validate::check_motion;

use crate::core::geometry::{Mesh, Motion};
use crate::core::stl::{StlError, Triangle};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A complete simulation case. Field documentation is the case-file reference; the allowed
/// range of every number is in [`ranges`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// Case format version; 1 (the only one so far) when absent.
    #[serde(default = "default_version", deserialize_with = "de::version")]
    pub version: u32,
    /// Simulation method: `"dem"` (the default; SPH comes next).
    #[serde(default)]
    pub method: MethodName,
    /// Time step [s].
    pub dt: f64,
    /// Simulated end time [s].
    pub end_time: f64,
    /// Gravitational acceleration [m/s^2]; default (0, 0, -9.81).
    #[serde(default = "default_gravity")]
    pub gravity: [f64; 3],
    /// The simulation box.
    pub domain: Domain,
    /// Force law.
    pub contact_model: ContactModelSpec,
    /// Time integrator; default symplectic Euler (see [`Integrator`]).
    #[serde(default)]
    pub integrator: Integrator,
    /// Reorder particle storage by grid cell every this many steps (memory locality); default 100.
    #[serde(default = "default_reorder", deserialize_with = "de::reorder_every")]
    pub reorder_every: u32,
    /// Particle species (materials and sizes); particles refer to them by name in `sources`.
    pub species: Vec<Species>,
    /// Material of the box walls, and of meshes without their own `material`.
    pub wall_material: WallMaterial,
    /// Pair properties overriding the mixing rules (per species pair, species and mesh, species
    /// and box face); see [`Interaction`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interactions: Vec<Interaction>,
    /// Particle sources, placed in order (particle ids follow this order).
    #[serde(default)]
    pub sources: Vec<Source>,
    /// Triangle meshes (STL files or inline triangles) with prescribed motion.
    #[serde(default)]
    pub meshes: Vec<MeshSpec>,
    /// Sources that add particles during the run. See [`Inflow`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inflows: Vec<Inflow>,
    /// Deletion regions: particles whose centre enters one are removed (and counted, with
    /// their mass, in every frame). See [`Outflow`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outflows: Vec<Outflow>,
    /// Result output intervals (used by the CLI).
    #[serde(default)]
    pub output: Output,
    /// Cutting the domain into sub-domains (CPU workers now; GPUs with the multi-GPU work).
    /// Results do not depend on it, only speed does.
    #[serde(default, skip_serializing_if = "is_undecomposed")]
    pub decomposition: crate::decomp::Decomposition,
    /// Where the case came from (file name for messages, directory for relative STL paths).
    #[serde(skip)]
    pub origin: CaseOrigin,
}

/// Where a case came from: its name in error messages and the directory STL paths are relative to.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CaseOrigin {
    pub name: String,
    pub base_dir: PathBuf,
}

/// The case format version this build reads.
pub const CASE_VERSION: u32 = 1;

fn default_version() -> u32 {
    CASE_VERSION
}

fn is_undecomposed(d: &crate::decomp::Decomposition) -> bool {
    *d == crate::decomp::Decomposition::default()
}

/// The simulation method of a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MethodName {
    /// Discrete element method: spheres, walls and meshes with contact forces.
    #[default]
    Dem,
}

fn default_gravity() -> [f64; 3] {
    [0.0, 0.0, -9.81]
}
fn default_reorder() -> u32 {
    100
}
fn default_poisson() -> f64 {
    0.3
}
fn default_one() -> f64 {
    1.0
}
fn default_kt_ratio() -> f64 {
    2.0 / 7.0
}

/// Axis-aligned simulation box [m].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Domain {
    pub min: [f64; 3],
    pub max: [f64; 3],
    /// Which faces of the box are solid walls: `true` (all six, the default), `false` (none) or
    /// a list of faces, e.g. `["x_min", "x_max", "y_min", "y_max", "z_min"]` for an open top.
    /// Without a wall particles may leave the box through that face; they are still simulated.
    #[serde(default)]
    pub walls: Walls,
    /// Materials of single faces (`z_min = { ... }`); faces not named use `wall_material`.
    #[serde(default, skip_serializing_if = "FaceMaterials::is_empty")]
    pub face_materials: FaceMaterials,
}

/// A face of the box, in the order of the wall contacts (and of the history partners
/// `wall_partner(face)`): x_min, x_max, y_min, y_max, z_min, z_max.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Face {
    XMin,
    XMax,
    YMin,
    YMax,
    ZMin,
    ZMax,
}

impl Face {
    pub const ALL: [Face; 6] = [
        Face::XMin,
        Face::XMax,
        Face::YMin,
        Face::YMax,
        Face::ZMin,
        Face::ZMax,
    ];
    pub const NAMES: [&'static str; 6] = ["x_min", "x_max", "y_min", "y_max", "z_min", "z_max"];

    /// Index 0..6 (2 axis + side).
    pub fn index(self) -> usize {
        self as usize
    }
    pub fn name(self) -> &'static str {
        Self::NAMES[self.index()]
    }
    pub fn from_name(name: &str) -> Option<Face> {
        Self::NAMES
            .iter()
            .position(|n| *n == name)
            .map(|i| Self::ALL[i])
    }
}

/// Which box faces are walls: a mask, bit `f` for [`Face`] `f`. In case files `true`, `false`
/// or a list of face names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Walls(pub u8);

impl Walls {
    pub const ALL: Walls = Walls(0b11_1111);
    pub const NONE: Walls = Walls(0);

    pub fn has(self, f: Face) -> bool {
        self.0 & (1 << f.index()) != 0
    }
    pub fn any(self) -> bool {
        self.0 != 0
    }
    pub fn mask(self) -> u32 {
        u32::from(self.0)
    }
}

impl Default for Walls {
    fn default() -> Self {
        Walls::ALL
    }
}

impl From<bool> for Walls {
    fn from(all: bool) -> Self {
        if all {
            Walls::ALL
        } else {
            Walls::NONE
        }
    }
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum WallsRepr {
    All(bool),
    Faces(Vec<Face>),
}

impl Serialize for Walls {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Walls::ALL => WallsRepr::All(true),
            Walls::NONE => WallsRepr::All(false),
            w => WallsRepr::Faces(Face::ALL.into_iter().filter(|&f| w.has(f)).collect()),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Walls {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match WallsRepr::deserialize(d).map_err(|_| {
            serde::de::Error::custom(
                "walls must be true, false or a list of faces (\"x_min\", \"x_max\", \"y_min\", \
                 \"y_max\", \"z_min\", \"z_max\")",
            )
        })? {
            WallsRepr::All(b) => Ok(Walls::from(b)),
            WallsRepr::Faces(list) => Ok(Walls(list.iter().fold(0u8, |m, f| m | (1 << f.index())))),
        }
    }
}

/// Materials of single box faces; a face not given uses `wall_material`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaceMaterials {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub x_min: Option<WallMaterial>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub x_max: Option<WallMaterial>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub y_min: Option<WallMaterial>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub y_max: Option<WallMaterial>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub z_min: Option<WallMaterial>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub z_max: Option<WallMaterial>,
}

impl FaceMaterials {
    pub fn get(&self, f: Face) -> Option<&WallMaterial> {
        match f {
            Face::XMin => self.x_min.as_ref(),
            Face::XMax => self.x_max.as_ref(),
            Face::YMin => self.y_min.as_ref(),
            Face::YMax => self.y_max.as_ref(),
            Face::ZMin => self.z_min.as_ref(),
            Face::ZMax => self.z_max.as_ref(),
        }
    }
    pub fn is_empty(&self) -> bool {
        Face::ALL.iter().all(|&f| self.get(f).is_none())
    }
}

/// Interaction properties of one pair, overriding the mixing rule (arithmetic means of the two
/// materials) for the values given. `between = [species, other]`: `other` is a species, a mesh,
/// `"box"` (the six faces) or one face (`"z_min"`, ...). Later entries override earlier ones
/// (`"box"` then `"z_min"`: the floor differs from the other faces). Stiffness keeps its rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Interaction {
    pub between: [String; 2],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restitution: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sliding_friction: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_friction: Option<f64>,
}

/// The lever arm of the rolling-resistance torque M_r = mu_r R fn (see
/// [`crate::dem::physics::rolling_torque`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RollingRadius {
    /// R = R* = r_i r_j / (r_i + r_j) (r/2 for equal spheres; r against a wall): Ai et al.
    /// (2011), model A, as this code has always used. The default.
    #[default]
    Effective,
    /// R = r_i, the radius of the particle the torque acts on (EDEM's and many papers'
    /// convention): twice the torque of `effective` between equal spheres for the same mu_r.
    Particle,
}

/// Force law, `type = "linear"` or `type = "hertz_mindlin"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ContactModelSpec {
    /// Linear spring-dashpot; species need `normal_stiffness` or `young_modulus` (then
    /// kn = 0.2 E* R*, see [`crate::dem::physics::linear_stiffness_from_modulus`]).
    Linear {
        /// kt / kn; default 2/7, which gives the same normal and tangential oscillation period
        /// for solid spheres (Schäfer, Dippel & Wolf 1996).
        #[serde(default = "default_kt_ratio")]
        tangential_stiffness_ratio: f64,
        /// Lever arm of the rolling-resistance torque; default `"effective"` (R*).
        #[serde(default, skip_serializing_if = "is_default_rolling")]
        rolling_radius: RollingRadius,
    },
    /// Hertz-Mindlin from Young's modulus and Poisson ratio.
    HertzMindlin {
        /// Lever arm of the rolling-resistance torque; default `"effective"` (R*).
        #[serde(default, skip_serializing_if = "is_default_rolling")]
        rolling_radius: RollingRadius,
    },
}

fn is_default_rolling(r: &RollingRadius) -> bool {
    *r == RollingRadius::Effective
}

impl ContactModelSpec {
    pub fn model(&self) -> crate::dem::physics::ContactModel {
        match self {
            Self::Linear { .. } => crate::dem::physics::ContactModel::Linear,
            Self::HertzMindlin { .. } => crate::dem::physics::ContactModel::HertzMindlin,
        }
    }

    pub fn rolling_radius(&self) -> RollingRadius {
        match self {
            Self::Linear { rolling_radius, .. } | Self::HertzMindlin { rolling_radius } => {
                *rolling_radius
            }
        }
    }
}

/// Time integrator.
///
/// The default is **symplectic (semi-implicit) Euler**, `v += a dt; x += v dt`: one force
/// evaluation per step like velocity Verlet, symplectic (no secular energy drift for
/// conservative contacts, see the energy test), first-order but with errors well below the
/// contact-model uncertainty at the dt required for stability, and the scheme XPS and most GPU
/// DEM codes use. Velocity Verlet (kick-drift-kick, forces evaluated with the half-step
/// velocity) is second order in position and is offered for comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Integrator {
    #[default]
    SymplecticEuler,
    VelocityVerlet,
}

/// A particle species: size and material.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Species {
    pub name: String,
    /// Sphere radius [m].
    pub radius: f64,
    /// Density [kg/m^3].
    pub density: f64,
    /// Young's modulus [Pa] (required by Hertz-Mindlin).
    #[serde(default)]
    pub young_modulus: Option<f64>,
    /// Linear normal stiffness [N/m] (linear model; overrides `young_modulus` there).
    #[serde(default)]
    pub normal_stiffness: Option<f64>,
    /// Poisson ratio [-], default 0.3.
    #[serde(default = "default_poisson")]
    pub poisson_ratio: f64,
    /// Coefficient of restitution, 0 < e <= 1.
    pub restitution: f64,
    /// Coulomb sliding friction coefficient [-].
    pub sliding_friction: f64,
    /// Rolling friction coefficient [-] (constant-torque model), default 0.
    #[serde(default)]
    pub rolling_friction: f64,
}

/// Material of walls and meshes. Pair values with a species are arithmetic means (restitution,
/// friction); stiffness rules are in [`MaterialTable`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WallMaterial {
    #[serde(default)]
    pub young_modulus: Option<f64>,
    #[serde(default)]
    pub normal_stiffness: Option<f64>,
    #[serde(default = "default_poisson")]
    pub poisson_ratio: f64,
    pub restitution: f64,
    pub sliding_friction: f64,
    #[serde(default)]
    pub rolling_friction: f64,
}

/// A particle source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Source {
    /// Particles on a cubic lattice filling [min, max]: sites at min + spacing (i + 1/2), x
    /// fastest, then y, then z (so `count` fills from the bottom). `jitter` in [0, 1] moves each
    /// coordinate by up to jitter * (spacing - 2r) / 2, which can never create an overlap.
    Grid {
        species: SpeciesChoice,
        min: [f64; 3],
        max: [f64; 3],
        spacing: f64,
        #[serde(default, deserialize_with = "de::optional_count")]
        count: Option<usize>,
        #[serde(default)]
        jitter: f64,
        #[serde(default, deserialize_with = "de::seed")]
        seed: u64,
        #[serde(default)]
        velocity: [f64; 3],
        /// Only the sites whose sphere lies wholly inside this shape (and the box); `count` then
        /// takes the first such sites.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        shape: Option<Shape>,
    },
    /// `count` particles at uniformly random positions in [min, max] (the whole sphere inside),
    /// rejecting any position that overlaps an already placed particle (random sequential
    /// addition): never creates an overlap. A solid fraction (count * sphere volume / region
    /// volume) above [`ranges::RANDOM_BOX_MAX_FRACTION`] is refused at once; otherwise placement
    /// gives up with an error after 1000 attempts per particle or
    /// [`PlacementLimits::max_seconds`], and logs its progress every 2 s.
    RandomBox {
        species: SpeciesChoice,
        min: [f64; 3],
        max: [f64; 3],
        #[serde(deserialize_with = "de::count")]
        count: usize,
        #[serde(default, deserialize_with = "de::seed")]
        seed: u64,
        #[serde(default)]
        velocity: [f64; 3],
        /// Only positions whose sphere lies wholly inside this shape (and the box).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        shape: Option<Shape>,
    },
}

impl Source {
    pub fn species(&self) -> &SpeciesChoice {
        match self {
            Source::Grid { species, .. } | Source::RandomBox { species, .. } => species,
        }
    }
    pub fn shape(&self) -> Option<&Shape> {
        match self {
            Source::Grid { shape, .. } | Source::RandomBox { shape, .. } => shape.as_ref(),
        }
    }
}

/// The species a source places: one, by name (`species = "beads"`), or a size distribution
/// over several (`species = { mass_fractions = { fine = 0.3, coarse = 0.7 } }`, or
/// `number_fractions`), each species being one size class. Mass fractions are the convention of
/// LIGGGHTS' `particledistribution/discrete` and of sieve analyses; a source places exact counts
/// (largest remainder of count x number fraction) in a seeded random order.
#[derive(Debug, Clone, PartialEq)]
pub enum SpeciesChoice {
    One(String),
    Mix {
        basis: FractionBasis,
        /// (species name, fraction), in name order.
        fractions: Vec<(String, f64)>,
    },
}

/// What the fractions of a [`SpeciesChoice::Mix`] measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FractionBasis {
    Mass,
    Number,
}

impl From<&str> for SpeciesChoice {
    fn from(s: &str) -> Self {
        SpeciesChoice::One(s.to_string())
    }
}

impl From<String> for SpeciesChoice {
    fn from(s: String) -> Self {
        SpeciesChoice::One(s)
    }
}

impl SpeciesChoice {
    /// The species names it refers to.
    pub fn names(&self) -> Vec<&str> {
        match self {
            SpeciesChoice::One(n) => vec![n.as_str()],
            SpeciesChoice::Mix { fractions, .. } => {
                fractions.iter().map(|(n, _)| n.as_str()).collect()
            }
        }
    }
}

impl std::fmt::Display for SpeciesChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpeciesChoice::One(n) => write!(f, "\"{n}\""),
            SpeciesChoice::Mix { basis, fractions } => {
                let list: Vec<String> = fractions.iter().map(|(n, x)| format!("{n} {x}")).collect();
                let by = match basis {
                    FractionBasis::Mass => "mass",
                    FractionBasis::Number => "number",
                };
                write!(f, "{{{by} fractions: {}}}", list.join(", "))
            }
        }
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct MixRepr {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mass_fractions: Option<std::collections::BTreeMap<String, f64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    number_fractions: Option<std::collections::BTreeMap<String, f64>>,
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum SpeciesChoiceRepr {
    One(String),
    Mix(MixRepr),
}

impl Serialize for SpeciesChoice {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            SpeciesChoice::One(n) => SpeciesChoiceRepr::One(n.clone()),
            SpeciesChoice::Mix { basis, fractions } => {
                let map = Some(fractions.iter().cloned().collect());
                SpeciesChoiceRepr::Mix(match basis {
                    FractionBasis::Mass => MixRepr {
                        mass_fractions: map,
                        number_fractions: None,
                    },
                    FractionBasis::Number => MixRepr {
                        mass_fractions: None,
                        number_fractions: map,
                    },
                })
            }
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for SpeciesChoice {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        const FORMS: &str = "species must be a species name, `{ mass_fractions = { name = \
             fraction, ... } }` or `{ number_fractions = { ... } }`";
        let repr =
            SpeciesChoiceRepr::deserialize(d).map_err(|_| serde::de::Error::custom(FORMS))?;
        Ok(match repr {
            SpeciesChoiceRepr::One(n) => SpeciesChoice::One(n),
            SpeciesChoiceRepr::Mix(MixRepr {
                mass_fractions: Some(m),
                number_fractions: None,
            }) => SpeciesChoice::Mix {
                basis: FractionBasis::Mass,
                fractions: m.into_iter().collect(),
            },
            SpeciesChoiceRepr::Mix(MixRepr {
                mass_fractions: None,
                number_fractions: Some(m),
            }) => SpeciesChoice::Mix {
                basis: FractionBasis::Number,
                fractions: m.into_iter().collect(),
            },
            SpeciesChoiceRepr::Mix(_) => {
                return Err(serde::de::Error::custom(format!(
                    "{FORMS}: give exactly one of mass_fractions and number_fractions"
                )))
            }
        })
    }
}

/// A region particles are placed in (whole spheres inside), beside a source's box.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Shape {
    /// Circular cylinder: base centre `base`, axis direction `axis` (any length), `radius`,
    /// `length` along the axis from the base [m].
    Cylinder {
        base: [f64; 3],
        axis: [f64; 3],
        radius: f64,
        length: f64,
    },
    /// The inside of a closed triangle mesh: a mesh of this case by `mesh = "name"` (its pose at
    /// t = 0), or an STL file by `stl = "path"` (relative to the case file) with `scale`. Every
    /// edge must belong to exactly two triangles (a watertight surface).
    Mesh {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mesh: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stl: Option<PathBuf>,
        #[serde(default = "default_one")]
        scale: f64,
    },
}

/// A source that adds particles during the run: `rate` particles/s or `mass_rate` kg/s over
/// [start, end) (end default: the run's end time), placed at random in the box [min, max]
/// (whole spheres inside, optionally only inside `shape`) without overlapping any particle,
/// with `velocity`. Particles are added in batches every `interval` seconds (default 0.01 s):
/// each batch brings the count up to rate x elapsed time, so the total is exact; a batch that
/// cannot place all its particles (the region is crowded) carries the rest to the next one and
/// the run warns. New particles get new ids (never reused).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Inflow {
    pub species: SpeciesChoice,
    pub min: [f64; 3],
    pub max: [f64; 3],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<Shape>,
    /// Particles per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Kilograms per second (converted with the mean particle mass of `species`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mass_rate: Option<f64>,
    #[serde(default)]
    pub start: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<f64>,
    #[serde(default)]
    pub velocity: [f64; 3],
    #[serde(default, deserialize_with = "de::seed")]
    pub seed: u64,
    /// Seconds between batches.
    #[serde(default = "default_inflow_interval")]
    pub interval: f64,
}

fn default_inflow_interval() -> f64 {
    0.01
}

/// A deletion region. A particle is removed at the end of the step in which its centre lies in
/// the region; the removed count and mass go into every frame (`removed_count`,
/// `removed_mass`), so `analysis` shows a discharge rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Outflow {
    /// The box [min, max] [m], e.g. below a silo's orifice.
    Box { min: [f64; 3], max: [f64; 3] },
    /// Everything farther than `margin` [m] (default 0) outside the domain box: particles that
    /// leave an open box are gone instead of piling up in the border cells.
    OutsideDomain {
        #[serde(default)]
        margin: f64,
    },
}

impl Outflow {
    /// Whether a centre at `p` is removed, for a domain [min, max].
    #[inline]
    pub fn contains(&self, p: [f64; 3], domain_min: [f64; 3], domain_max: [f64; 3]) -> bool {
        match self {
            Outflow::Box { min, max } => (0..3).all(|a| p[a] >= min[a] && p[a] <= max[a]),
            Outflow::OutsideDomain { margin } => {
                (0..3).any(|a| p[a] < domain_min[a] - margin || p[a] > domain_max[a] + margin)
            }
        }
    }
}

/// A triangle mesh: an STL file (path relative to the case file) or inline triangles.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeshSpec {
    pub name: String,
    #[serde(default)]
    pub stl: Option<PathBuf>,
    #[serde(default)]
    pub triangles: Option<Vec<Triangle>>,
    /// Scale applied to the vertices (e.g. 0.001 for an STL in mm); default 1.
    #[serde(default = "default_one")]
    pub scale: f64,
    /// The mesh's material; default `wall_material`.
    #[serde(default)]
    pub material: Option<WallMaterial>,
    /// Prescribed motion; default fixed.
    #[serde(default)]
    pub motion: Motion,
}

/// Output intervals in simulated seconds (each must be > 0 when given).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Output {
    #[serde(default)]
    pub vtk_interval: Option<f64>,
    #[serde(default)]
    pub checkpoint_interval: Option<f64>,
    /// Per-particle arrays each published frame carries (DEM: `["pos", "vel", "omega",
    /// "force", "contacts"]`; SPH: `["pos", "vel", "density", "pressure", "kind"]`; or the
    /// segment's names); positions always (SPH: and kinds). Default: the method's
    /// (`pos, vel, omega, contacts` for DEM: forces only when asked; every field for SPH).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields: Option<Vec<String>>,
}

impl Output {
    /// The segment field mask of `fields` for method `M` (its default when absent); an error
    /// names what `M` publishes. DEM and SPH cases both read their `[output]` table so.
    pub fn frame_mask<M: crate::exec::method::FrameFields>(&self) -> Result<u32, String> {
        use crate::exec::method::{default_frame_mask, frame_mask};
        match &self.fields {
            None => Ok(default_frame_mask::<M>()),
            Some(names) => frame_mask::<M>(names),
        }
    }
}

/// Why a case is not usable. Messages start with the case's name (file) and name the field.
#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    #[error("{path}: cannot read case file: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{origin}: {message}")]
    Parse { origin: String, message: String },
    #[error("{origin}: {field} {message}")]
    Invalid {
        origin: String,
        field: String,
        message: String,
    },
    #[error("{origin}: {field}: {source}")]
    Stl {
        origin: String,
        field: String,
        #[source]
        source: StlError,
    },
    #[error("{origin}: particles {a} and {b} overlap at start ({pa:?} and {pb:?}, distance {distance:.6e} m < sum of radii {radii:.6e} m)")]
    Overlap {
        origin: String,
        a: usize,
        b: usize,
        pa: [f64; 3],
        pb: [f64; 3],
        distance: f64,
        radii: f64,
    },
    #[error("{origin}: particle {id} at {pos:?} {message}")]
    ParticleOutside {
        origin: String,
        id: usize,
        pos: [f64; 3],
        message: String,
    },
    #[error("{origin}: {field}: could place only {placed} of {count} particles without overlap ({reason}); enlarge the region or lower the count")]
    Placement {
        origin: String,
        field: String,
        placed: usize,
        count: usize,
        /// Which bound stopped the search (attempts or time).
        reason: String,
    },
    /// More particles than a run may have (the shared-memory protocol's u32 ids).
    #[error("{origin}: {field} {message}")]
    TooManyParticles {
        origin: String,
        field: String,
        message: String,
    },
    /// The particles would not fit in the memory of this machine.
    #[error("{origin}: {message}")]
    Memory { origin: String, message: String },
    #[error("{origin}: dt = {dt:e} s is above the stability bound: {reason}; use dt <= {suggested:.3e} s")]
    TimeStep {
        origin: String,
        dt: f64,
        reason: String,
        suggested: f64,
    },
}

/// A non-fatal finding of [`Case::validate`].
#[derive(Debug, Clone, PartialEq)]
pub struct CaseWarning(pub String);

impl std::fmt::Display for CaseWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Case {
    /// Reads, parses and validates a case file. Warnings (e.g. a marginal time step) are returned
    /// alongside the case.
    pub fn from_file(path: &Path) -> Result<(Case, Vec<CaseWarning>), CaseError> {
        let case = Self::read_file(path)?;
        let warnings = case.validate()?;
        Ok((case, warnings))
    }

    /// Reads and parses a case file without validating it (for callers that change fields
    /// first and validate once, e.g. `Simulation::new_on`, which places the particles anyway).
    pub fn read_file(path: &Path) -> Result<Case, CaseError> {
        let text = std::fs::read_to_string(path).map_err(|source| CaseError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Self::from_toml_str(&text, &path.display().to_string(), &base_dir)
    }

    /// Parses TOML text without validating. `name` appears in messages; STL paths are relative to
    /// `base_dir`.
    pub fn from_toml_str(text: &str, name: &str, base_dir: &Path) -> Result<Case, CaseError> {
        let mut case: Case = toml::from_str(text).map_err(|e| CaseError::Parse {
            origin: name.to_string(),
            message: e.to_string(),
        })?;
        case.origin = CaseOrigin {
            name: name.to_string(),
            base_dir: base_dir.to_path_buf(),
        };
        Ok(case)
    }

    /// Serialises the case to TOML (the origin is not part of it). A particle count beyond the
    /// protocol's limit is refused here already (TOML integers cannot even hold counts above
    /// 2^63 - 1, which gave "out-of-range value for u64 type").
    pub fn to_toml(&self) -> Result<String, CaseError> {
        self.check_particle_count()?;
        toml::to_string(self).map_err(|e| CaseError::Parse {
            origin: self.origin.name.clone(),
            message: e.to_string(),
        })
    }

    /// Whether particles leave (outflow regions) or join (inflow) during the run: frames then
    /// carry particle ids and hold the live particles only.
    pub fn changes_particle_set(&self) -> bool {
        !self.outflows.is_empty() || !self.inflows.is_empty()
    }

    /// Index of the species called `name`.
    pub fn species_index(&self, name: &str) -> Option<usize> {
        self.species.iter().position(|s| s.name == name)
    }

    /// Loads every mesh (STL files are read here), applying `scale`. Every vertex must be finite
    /// and, scaled, inside [`ranges::COORDINATE`] (an error names the mesh and the triangle);
    /// degenerate (zero-area) triangles are then dropped. Mesh `k` uses wall material
    /// [`MaterialTable::mesh_wall`]`(k)` (after the six box faces).
    pub fn load_meshes(&self) -> Result<Vec<Mesh>, CaseError> {
        let origin = &self.origin.name;
        let mut out = Vec::with_capacity(self.meshes.len());
        for (k, m) in self.meshes.iter().enumerate() {
            let field = format!("meshes[{k}]");
            let (raw, source) = match (&m.stl, &m.triangles) {
                (Some(p), None) => {
                    let full = self.origin.base_dir.join(p);
                    let tris =
                        crate::core::stl::read_stl(&full).map_err(|source| CaseError::Stl {
                            origin: origin.clone(),
                            field: format!("{field}.stl"),
                            source,
                        })?;
                    (
                        std::borrow::Cow::Owned(tris),
                        format!("of {}", full.display()),
                    )
                }
                (None, Some(t)) => (std::borrow::Cow::Borrowed(t), String::new()),
                _ => {
                    return Err(CaseError::Invalid {
                        origin: origin.clone(),
                        field: format!("{field} (\"{}\")", m.name),
                        message: "needs exactly one of `stl` or `triangles`".into(),
                    })
                }
            };
            let mut tris = Vec::with_capacity(raw.len());
            for (i, t) in raw.iter().enumerate() {
                let scaled = t.map(|v| v.map(|c| c * m.scale));
                let bad = |message: String| {
                    let tri = if m.stl.is_some() {
                        format!("{field} (\"{}\") triangle {i} {source}", m.name)
                    } else {
                        format!("{field}.triangles[{i}] (mesh \"{}\")", m.name)
                    };
                    CaseError::Invalid {
                        origin: origin.clone(),
                        field: tri,
                        message,
                    }
                };
                if let Some(v) = t.iter().position(|v| !crate::core::vec3::is_finite(*v)) {
                    return Err(bad(format!("has a non-finite vertex {v}: {:?}", t[v])));
                }
                if let Some(v) = scaled
                    .iter()
                    .position(|v| v.iter().any(|&c| !ranges::COORDINATE.contains(c)))
                {
                    return Err(bad(format!(
                        "vertex {v} scaled by {} is {:?}: every coordinate must be in {}",
                        ranges::value(m.scale),
                        scaled[v],
                        ranges::COORDINATE
                    )));
                }
                if crate::core::geometry::triangle_area(&scaled) > 0.0 {
                    tris.push(scaled);
                }
            }
            if tris.is_empty() {
                return Err(CaseError::Invalid {
                    origin: origin.clone(),
                    field,
                    message: "has no non-degenerate triangles".into(),
                });
            }
            out.push(Mesh {
                name: m.name.clone(),
                triangles: tris,
                motion: m.motion.clone(),
                material: MaterialTable::mesh_wall(k),
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
