//! Pair parameter tables and the time-step stability check.
//!
//! Mixing rules (conventions of this code, documented in the case reference):
//! * restitution, sliding and rolling friction of a pair: arithmetic means of the two materials;
//! * linear stiffness of a species: `normal_stiffness`, else 0.2 E* R* of the species against
//!   itself; of a species pair: the harmonic mean [`physics::combine_stiffness`]; against a wall:
//!   harmonic mean with the wall's `normal_stiffness`, else from E* (species, wall) with R* = r,
//!   else the species' own stiffness;
//! * Hertz-Mindlin: E* and G* from both materials' E and nu (the physics module's formulas).

use super::{
    Case, CaseError, CaseWarning, ContactModelSpec, InitialParticle, Species, WallMaterial,
};
use crate::core::geometry::Mesh;
use crate::core::vec3;
use crate::dem::physics::{self, ContactModel, MaterialPair};

/// Per-pair material parameters: species x species and species x wall material
/// (wall material 0 = box walls, k + 1 = mesh k).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MaterialTable {
    pub n_species: usize,
    pub n_walls: usize,
    /// `pp[a * n_species + b]`.
    pub pp: Vec<MaterialPair>,
    /// `pw[a * n_walls + w]`.
    pub pw: Vec<MaterialPair>,
}

impl MaterialTable {
    #[inline]
    pub fn particle_pair(&self, a: usize, b: usize) -> &MaterialPair {
        &self.pp[a * self.n_species + b]
    }
    #[inline]
    pub fn wall_pair(&self, a: usize, w: usize) -> &MaterialPair {
        &self.pw[a * self.n_walls + w]
    }
}

fn species_stiffness(s: &Species) -> f64 {
    s.normal_stiffness.unwrap_or_else(|| {
        let e = s.young_modulus.unwrap_or(0.0);
        physics::linear_stiffness_from_modulus(
            physics::effective_young_modulus(e, s.poisson_ratio, e, s.poisson_ratio),
            0.5 * s.radius,
        )
    })
}

fn pair_common(e_a: f64, e_b: f64, mu_a: f64, mu_b: f64, r_a: f64, r_b: f64) -> (f64, f64, f64) {
    (
        physics::damping_ratio_from_restitution(0.5 * (e_a + e_b)),
        0.5 * (mu_a + mu_b),
        0.5 * (r_a + r_b),
    )
}

impl Case {
    /// Wall materials in table order: box walls, then one per mesh.
    pub fn wall_materials(&self) -> Vec<&WallMaterial> {
        std::iter::once(&self.wall_material)
            .chain(
                self.meshes
                    .iter()
                    .map(|m| m.material.as_ref().unwrap_or(&self.wall_material)),
            )
            .collect()
    }

    /// Builds the pair tables. Assumes [`Case::validate_fields`] passed.
    pub fn material_table(&self) -> MaterialTable {
        let kt_ratio = match self.contact_model {
            ContactModelSpec::Linear {
                tangential_stiffness_ratio,
            } => tangential_stiffness_ratio,
            ContactModelSpec::HertzMindlin {} => 0.0,
        };
        let walls = self.wall_materials();
        let mut pp = Vec::new();
        for a in &self.species {
            for b in &self.species {
                let (beta, mu_s, mu_r) = pair_common(
                    a.restitution,
                    b.restitution,
                    a.sliding_friction,
                    b.sliding_friction,
                    a.rolling_friction,
                    b.rolling_friction,
                );
                let kn = physics::combine_stiffness(species_stiffness(a), species_stiffness(b));
                let (ea, eb) = (
                    a.young_modulus.unwrap_or(0.0),
                    b.young_modulus.unwrap_or(0.0),
                );
                pp.push(MaterialPair {
                    kn,
                    kt: kt_ratio * kn,
                    e_star: physics::effective_young_modulus(
                        ea,
                        a.poisson_ratio,
                        eb,
                        b.poisson_ratio,
                    ),
                    g_star: physics::effective_shear_modulus(
                        ea,
                        a.poisson_ratio,
                        eb,
                        b.poisson_ratio,
                    ),
                    beta,
                    mu_s,
                    mu_r,
                });
            }
        }
        let mut pw = Vec::new();
        for a in &self.species {
            for w in &walls {
                let (beta, mu_s, mu_r) = pair_common(
                    a.restitution,
                    w.restitution,
                    a.sliding_friction,
                    w.sliding_friction,
                    a.rolling_friction,
                    w.rolling_friction,
                );
                let ea = a.young_modulus.unwrap_or(0.0);
                let e_star = w
                    .young_modulus
                    .map(|ew| {
                        physics::effective_young_modulus(ea, a.poisson_ratio, ew, w.poisson_ratio)
                    })
                    .unwrap_or(0.0);
                let g_star = w
                    .young_modulus
                    .map(|ew| {
                        physics::effective_shear_modulus(ea, a.poisson_ratio, ew, w.poisson_ratio)
                    })
                    .unwrap_or(0.0);
                let ks = species_stiffness(a);
                let kn = match (w.normal_stiffness, w.young_modulus, a.young_modulus) {
                    (Some(kw), _, _) => physics::combine_stiffness(ks, kw),
                    (None, Some(_), Some(_)) if a.normal_stiffness.is_none() => {
                        physics::linear_stiffness_from_modulus(e_star, a.radius)
                    }
                    _ => ks,
                };
                pw.push(MaterialPair {
                    kn,
                    kt: kt_ratio * kn,
                    e_star,
                    g_star,
                    beta,
                    mu_s,
                    mu_r,
                });
            }
        }
        MaterialTable {
            n_species: self.species.len(),
            n_walls: walls.len(),
            pp,
            pw,
        }
    }
}

/// Result of the time-step stability check.
#[derive(Debug, Clone, PartialEq)]
pub struct StabilityReport {
    /// Shortest contact duration over all species pairs and species-wall pairs [s].
    pub contact_time: f64,
    /// Shortest Rayleigh time over the species (Hertz-Mindlin only) [s].
    pub rayleigh_time: Option<f64>,
    /// Characteristic impact speed used for the Hertz contact time [m/s].
    pub impact_speed: f64,
    /// Largest recommended dt: min(t_contact / 20, 0.2 T_R) [s].
    pub dt_recommended: f64,
    /// Largest accepted dt: min(t_contact / 5, T_R) [s].
    pub dt_max: f64,
    /// Set when dt_recommended < dt <= dt_max.
    pub warning: Option<CaseWarning>,
}

impl Case {
    /// Characteristic impact speed for the Hertz contact time [m/s]: the fastest initial particle
    /// plus the fastest mesh point plus a free fall over the largest box extent,
    /// sqrt(2 |g| L), and at least 1 m/s. Hertz contacts get shorter at higher speed
    /// (t ~ v^(-1/5)), so an overestimate is the safe side.
    pub fn impact_speed(&self, particles: &[InitialParticle], meshes: &[Mesh]) -> f64 {
        let v_p = particles
            .iter()
            .map(|p| vec3::norm(p.velocity))
            .fold(0.0, f64::max);
        let v_m = meshes.iter().map(Mesh::max_wall_speed).fold(0.0, f64::max);
        let ext = (0..3)
            .map(|a| self.domain.max[a] - self.domain.min[a])
            .fold(0.0, f64::max);
        (v_p + v_m + (2.0 * vec3::norm(self.gravity) * ext).sqrt()).max(1.0)
    }

    /// Time-step stability check. Criterion: with t_c the shortest contact duration (linear:
    /// damped half-period [`physics::linear_contact_time`]; Hertz: [`physics::hertz_contact_time`]
    /// at [`Case::impact_speed`]) and, for Hertz-Mindlin, T_R the Rayleigh time:
    /// dt > min(t_c / 5, T_R) is refused (a contact is resolved by fewer than 5 steps: energy
    /// blows up), dt > min(t_c / 20, 0.2 T_R) warns (restitution and contact forces inaccurate
    /// by a few %; 20+ steps per contact is the usual DEM rule, e.g. O'Sullivan & Bray 2004).
    pub fn stability(
        &self,
        particles: &[InitialParticle],
        meshes: &[Mesh],
    ) -> Result<StabilityReport, CaseError> {
        let table = self.material_table();
        let model = self.contact_model.model();
        let v = self.impact_speed(particles, meshes);
        let mass = |s: &Species| physics::sphere_mass(s.radius, s.density);
        let time = |pair: &MaterialPair, m_eff: f64, r_eff: f64| match model {
            ContactModel::Linear => physics::linear_contact_time(
                pair.kn,
                physics::linear_damping_coefficient(pair.kn, m_eff, pair.beta),
                m_eff,
            ),
            ContactModel::HertzMindlin => physics::hertz_contact_time(pair.e_star, r_eff, m_eff, v),
        };
        let mut tc = f64::INFINITY;
        let mut which = String::new();
        for (a, sa) in self.species.iter().enumerate() {
            for (b, sb) in self.species.iter().enumerate() {
                let t = time(
                    table.particle_pair(a, b),
                    physics::effective_mass(mass(sa), mass(sb)),
                    physics::effective_radius(sa.radius, sb.radius),
                );
                if t < tc {
                    tc = t;
                    which = format!("contact \"{}\"-\"{}\"", sa.name, sb.name);
                }
            }
            for w in 0..table.n_walls {
                if w == 0 && !self.domain.walls {
                    continue;
                }
                let t = time(table.wall_pair(a, w), mass(sa), sa.radius);
                if t < tc {
                    tc = t;
                    which = if w == 0 {
                        format!("contact \"{}\"-box wall", sa.name)
                    } else {
                        format!(
                            "contact \"{}\"-mesh \"{}\"",
                            sa.name,
                            self.meshes[w - 1].name
                        )
                    };
                }
            }
        }
        let rayleigh = match model {
            ContactModel::Linear => None,
            ContactModel::HertzMindlin => self
                .species
                .iter()
                .map(|s| {
                    physics::rayleigh_time(
                        s.radius,
                        s.density,
                        s.young_modulus.unwrap_or(f64::NAN),
                        s.poisson_ratio,
                    )
                })
                .reduce(f64::min),
        };
        let tr = rayleigh.unwrap_or(f64::INFINITY);
        let dt_max = (tc / 5.0).min(tr);
        let dt_rec = (tc / 20.0).min(0.2 * tr);
        let origin = &self.origin.name;
        let reason = format!(
            "shortest contact duration {tc:.3e} s ({which}, impact speed {v:.2} m/s){}",
            rayleigh
                .map(|t| format!(", Rayleigh time {t:.3e} s"))
                .unwrap_or_default()
        );
        if self.dt > dt_max || dt_max.is_nan() {
            return Err(CaseError::TimeStep {
                origin: origin.clone(),
                dt: self.dt,
                reason: format!(
                    "{reason}; a contact needs at least 5 steps (and dt <= Rayleigh time)"
                ),
                suggested: dt_rec,
            });
        }
        let warning = (self.dt > dt_rec).then(|| {
            CaseWarning(format!("{origin}: dt = {:e} s resolves a contact with fewer than 20 steps: {reason}; recommended dt <= {dt_rec:.3e} s", self.dt))
        });
        Ok(StabilityReport {
            contact_time: tc,
            rayleigh_time: rayleigh,
            impact_speed: v,
            dt_recommended: dt_rec,
            dt_max,
            warning,
        })
    }
}

/// Largest speed of a point of a moving mesh [m/s].
impl Mesh {
    pub fn max_wall_speed(&self) -> f64 {
        let points: Vec<vec3::V3> = self.triangles.iter().flatten().copied().collect();
        self.motion.max_speed(&points)
    }
}
