//! The benchmark cases shared by the CPU and GPU benchmark binaries: the XPS falling box with a
//! chosen force law (the loose phase) and a dense, fully contacting pack (the settled phase).

use crate::case::{Case, ContactModelSpec};
use crate::dem::physics;

/// Force law of a benchmark run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BenchModel {
    /// Linear spring-dashpot, frictionless, no rotation.
    Linear,
    /// The default case's materials: linear, sliding friction 0.5, rolling friction 0.02.
    LinearFriction,
    /// Hertz-Mindlin with the default case's friction; E chosen so that an impact at the
    /// free-fall speed from 2 m lasts 50 steps, like the linear case.
    Hertz,
}

impl std::str::FromStr for BenchModel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "linear" => Ok(Self::Linear),
            "linear-friction" => Ok(Self::LinearFriction),
            "hertz" => Ok(Self::Hertz),
            _ => Err(format!(
                "unknown model {s:?} (linear, linear-friction or hertz)"
            )),
        }
    }
}

impl BenchModel {
    pub fn name(self) -> &'static str {
        match self {
            Self::Linear => "linear",
            Self::LinearFriction => "linear-friction",
            Self::Hertz => "hertz",
        }
    }

    /// Sets the force law and materials of `case` (built by [`Case::falling_box`]).
    pub fn apply(self, case: &mut Case) {
        match self {
            Self::Linear => {
                for s in &mut case.species {
                    s.sliding_friction = 0.0;
                    s.rolling_friction = 0.0;
                }
                case.wall_material.sliding_friction = 0.0;
                case.wall_material.rolling_friction = 0.0;
            }
            Self::LinearFriction => {}
            Self::Hertz => {
                let s = &case.species[0];
                let m = physics::sphere_mass(s.radius, s.density);
                let (m_eff, r_eff) = (0.5 * m, 0.5 * s.radius);
                let v = (2.0 * 9.81 * 2.0f64).sqrt();
                let tc = 50.0 * case.dt;
                // hertz_contact_time inverted: E*^2 = m*^2 / (R* v (tc / 2.868)^5);
                // E = 2 E* (1 - nu^2).
                let e_star = (m_eff * m_eff / (r_eff * v * (tc / 2.868).powi(5))).sqrt();
                let nu = s.poisson_ratio;
                let e = 2.0 * e_star * (1.0 - nu * nu);
                case.contact_model = ContactModelSpec::HertzMindlin {
                    rolling_radius: Default::default(),
                };
                for s in &mut case.species {
                    s.young_modulus = Some(e);
                    s.normal_stiffness = None;
                }
                case.wall_material.young_modulus = Some(e);
                case.wall_material.normal_stiffness = None;
            }
        }
    }
}

/// The XPS falling box with `n` particles and force law `model` (loose phase).
pub fn falling_box(n: usize, model: BenchModel) -> Case {
    let mut c = Case::default_falling_box(n);
    model.apply(&mut c);
    c
}

/// A dense pack: the case (no sources), the particle positions (species 0, at rest) and the
/// solid fraction.
pub struct DensePack {
    pub case: Case,
    pub positions: Vec<[f64; 3]>,
    pub solid_fraction: f64,
}

/// The default case's spheres on a face-centred cubic lattice with nearest-neighbour distance
/// 0.99 d (1% overlap), jittered by +-0.2% d, in a box that holds it with the same 1% overlap:
/// solid fraction about 0.74 (0.76 in the bulk, less at the walls), 12 contacts per particle (rigid with or without
/// friction, unlike a simple cubic pack, which frictionless spheres leave at once). Denser than
/// a poured bed (~0.6, ~6 contacts): the pessimistic side. About `n` particles (4 m^3).
pub fn dense_pack(n: usize, model: BenchModel) -> DensePack {
    let m = ((n as f64) / 4.0).cbrt().round().max(2.0) as usize;
    let mut c = Case::default_falling_box(4 * m * m * m);
    model.apply(&mut c);
    let r = c.species[0].radius;
    let d = 2.0 * r;
    let ac = std::f64::consts::SQRT_2 * 0.99 * d;
    let lo = 0.99 * r;
    let l = (m as f64 - 0.5) * ac + 2.0 * lo;
    c.domain.min = [0.0; 3];
    c.domain.max = [l; 3];
    c.sources = Vec::new();
    let mut rng = crate::core::rng::SplitMix64::new(7);
    let mut positions = Vec::with_capacity(4 * m * m * m);
    let offs = [
        [0.0, 0.0, 0.0],
        [0.5, 0.5, 0.0],
        [0.5, 0.0, 0.5],
        [0.0, 0.5, 0.5],
    ];
    for k in 0..m {
        for j in 0..m {
            for i in 0..m {
                for o in &offs {
                    let ijk = [i, j, k];
                    positions.push(std::array::from_fn(|a| {
                        lo + (ijk[a] as f64 + o[a]) * ac + 0.002 * d * rng.range(-1.0, 1.0)
                    }));
                }
            }
        }
    }
    let solid_fraction = positions.len() as f64 * physics::sphere_mass(r, 1.0) / (l * l * l);
    DensePack {
        case: c,
        positions,
        solid_fraction,
    }
}

/// SPHERIC Test 2 (`solver/cases/dambreak.toml`, the shipped case) at spacing `dp` [m], run to
/// `end_time` [s]: the SPH benchmark's and the validation's case.
pub fn sph_dambreak(dp: f64, end_time: f64) -> crate::sph::setup::SphCase {
    let mut case =
        crate::sph::setup::SphCase::from_toml_str(include_str!("../cases/dambreak.toml"))
            .expect("the shipped dambreak.toml parses");
    case.sph.spacing = dp;
    case.end_time = end_time;
    case
}
