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
    Case, CaseError, CaseWarning, ContactModelSpec, Face, InitialParticle, Interaction,
    RollingRadius, Species, WallMaterial,
};
use crate::core::geometry::Mesh;
use crate::core::vec3;
use crate::dem::physics::{self, ContactModel, MaterialPair};

/// Per-pair material parameters: species x species and species x wall material (wall
/// materials 0..6 = the box faces x_min, x_max, y_min, y_max, z_min, z_max; 6 + k = mesh k).
/// Entries need not be symmetric: `pp[a][b]` is what particle a feels (its rolling lever arm
/// may be its own radius, [`super::RollingRadius::Particle`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MaterialTable {
    pub n_species: usize,
    pub n_walls: usize,
    /// `pp[a * n_species + b]`.
    pub pp: Vec<MaterialPair>,
    /// `pw[a * n_walls + w]`.
    pub pw: Vec<MaterialPair>,
}

/// Wall-material columns before the meshes' (one per box face).
pub const BOX_FACES: usize = 6;

impl MaterialTable {
    #[inline]
    pub fn particle_pair(&self, a: usize, b: usize) -> &MaterialPair {
        &self.pp[a * self.n_species + b]
    }
    #[inline]
    pub fn wall_pair(&self, a: usize, w: usize) -> &MaterialPair {
        &self.pw[a * self.n_walls + w]
    }
    /// Wall-material column of mesh `k`.
    pub const fn mesh_wall(k: usize) -> usize {
        BOX_FACES + k
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

/// Restitution, sliding and rolling friction of one pair before they become table entries.
#[derive(Debug, Clone, Copy)]
struct Surface {
    restitution: f64,
    mu_s: f64,
    mu_r: f64,
}

impl Surface {
    /// The mixing rule: arithmetic means.
    fn mixed(e_a: f64, e_b: f64, mu_a: f64, mu_b: f64, r_a: f64, r_b: f64) -> Surface {
        Surface {
            restitution: 0.5 * (e_a + e_b),
            mu_s: 0.5 * (mu_a + mu_b),
            mu_r: 0.5 * (r_a + r_b),
        }
    }

    fn override_with(&mut self, i: &Interaction) {
        if let Some(e) = i.restitution {
            self.restitution = e;
        }
        if let Some(m) = i.sliding_friction {
            self.mu_s = m;
        }
        if let Some(m) = i.rolling_friction {
            self.mu_r = m;
        }
    }
}

/// What the second name of an [`Interaction`] denotes.
#[derive(Debug, Clone, PartialEq)]
pub enum InteractionTarget {
    Species(usize),
    /// Wall-material columns (one face, all six, or a mesh).
    Walls(Vec<usize>),
}

impl Case {
    /// Wall materials in table order: the six box faces, then one per mesh.
    pub fn wall_materials(&self) -> Vec<&WallMaterial> {
        Face::ALL
            .iter()
            .map(|&f| {
                self.domain
                    .face_materials
                    .get(f)
                    .unwrap_or(&self.wall_material)
            })
            .chain(
                self.meshes
                    .iter()
                    .map(|m| m.material.as_ref().unwrap_or(&self.wall_material)),
            )
            .collect()
    }

    /// Name of wall-material column `w` for messages: `box face "z_min"` or `mesh "drum"`.
    pub fn wall_name(&self, w: usize) -> String {
        match w {
            w if w < BOX_FACES => format!("box face {}", Face::NAMES[w]),
            w => format!("mesh \"{}\"", self.meshes[w - BOX_FACES].name),
        }
    }

    /// Resolves `between` of an interaction: (species index, target). The error message says
    /// which name is unknown or ambiguous.
    pub fn interaction_target(
        &self,
        i: &Interaction,
    ) -> Result<(usize, InteractionTarget), String> {
        let [a, b] = &i.between;
        let sa = self.species_index(a).ok_or_else(|| {
            format!(
                "names {a:?} first, which is not a species (species: {})",
                self.species_names()
            )
        })?;
        let as_species = self.species_index(b);
        let as_mesh = self.meshes.iter().position(|m| m.name == *b);
        let as_wall = match b.as_str() {
            "box" => Some((0..BOX_FACES).collect()),
            name => Face::from_name(name).map(|f| vec![f.index()]),
        };
        match (as_species, as_mesh, as_wall) {
            (Some(s), None, None) => Ok((sa, InteractionTarget::Species(s))),
            (None, Some(m), None) => Ok((sa, InteractionTarget::Walls(vec![Self::mesh_column(m)]))),
            (None, None, Some(w)) => Ok((sa, InteractionTarget::Walls(w))),
            (None, None, None) => Err(format!(
                "names {b:?}, which is neither a species ({}), a mesh ({}), \"box\" nor a box face ({})",
                self.species_names(),
                if self.meshes.is_empty() {
                    "none".to_string()
                } else {
                    self.meshes.iter().map(|m| format!("{:?}", m.name)).collect::<Vec<_>>().join(", ")
                },
                Face::NAMES.join(", ")
            )),
            _ => Err(format!(
                "names {b:?}, which is ambiguous (a species, a mesh or a box face of that name): \
                 rename the species or the mesh"
            )),
        }
    }

    fn mesh_column(k: usize) -> usize {
        MaterialTable::mesh_wall(k)
    }

    fn species_names(&self) -> String {
        self.species
            .iter()
            .map(|s| format!("{:?}", s.name))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Builds the pair tables: mixing rules, then the `interactions` in order, then the rolling
    /// lever arm. Assumes [`Case::validate_fields`] passed (unresolvable interactions are
    /// skipped here; validation refuses them).
    pub fn material_table(&self) -> MaterialTable {
        let kt_ratio = match self.contact_model {
            ContactModelSpec::Linear {
                tangential_stiffness_ratio,
                ..
            } => tangential_stiffness_ratio,
            ContactModelSpec::HertzMindlin { .. } => 0.0,
        };
        let walls = self.wall_materials();
        let (ns, nw) = (self.species.len(), walls.len());
        // Surfaces first, so that overrides apply before restitution becomes a damping ratio.
        let mut sp: Vec<Surface> = Vec::with_capacity(ns * ns);
        for a in &self.species {
            for b in &self.species {
                sp.push(Surface::mixed(
                    a.restitution,
                    b.restitution,
                    a.sliding_friction,
                    b.sliding_friction,
                    a.rolling_friction,
                    b.rolling_friction,
                ));
            }
        }
        let mut sw: Vec<Surface> = Vec::with_capacity(ns * nw);
        for a in &self.species {
            for w in &walls {
                sw.push(Surface::mixed(
                    a.restitution,
                    w.restitution,
                    a.sliding_friction,
                    w.sliding_friction,
                    a.rolling_friction,
                    w.rolling_friction,
                ));
            }
        }
        for i in &self.interactions {
            match self.interaction_target(i) {
                Ok((a, InteractionTarget::Species(b))) => {
                    sp[a * ns + b].override_with(i);
                    sp[b * ns + a].override_with(i);
                }
                Ok((a, InteractionTarget::Walls(cols))) => {
                    for w in cols {
                        sw[a * nw + w].override_with(i);
                    }
                }
                Err(_) => {}
            }
        }
        let particle_lever = self.contact_model.rolling_radius() == RollingRadius::Particle;
        let mut pp = Vec::with_capacity(ns * ns);
        for (ia, a) in self.species.iter().enumerate() {
            for (ib, b) in self.species.iter().enumerate() {
                let s = sp[ia * ns + ib];
                let kn = physics::combine_stiffness(species_stiffness(a), species_stiffness(b));
                let (ea, eb) = (
                    a.young_modulus.unwrap_or(0.0),
                    b.young_modulus.unwrap_or(0.0),
                );
                // The kernels' lever arm is R*; the particle's own radius r_a is R* (r_a + r_b)
                // / r_b, folded into mu_r so that one formula serves both conventions.
                let lever = if particle_lever {
                    (a.radius + b.radius) / b.radius
                } else {
                    1.0
                };
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
                    beta: physics::damping_ratio_from_restitution(s.restitution),
                    mu_s: s.mu_s,
                    mu_r: s.mu_r * lever,
                });
            }
        }
        let mut pw = Vec::with_capacity(ns * nw);
        for (ia, a) in self.species.iter().enumerate() {
            for (iw, w) in walls.iter().enumerate() {
                let s = sw[ia * nw + iw];
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
                // Against a wall R* = r: both conventions agree.
                pw.push(MaterialPair {
                    kn,
                    kt: kt_ratio * kn,
                    e_star,
                    g_star,
                    beta: physics::damping_ratio_from_restitution(s.restitution),
                    mu_s: s.mu_s,
                    mu_r: s.mu_r,
                });
            }
        }
        MaterialTable {
            n_species: ns,
            n_walls: nw,
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
                if w < BOX_FACES && !self.domain.walls.has(Face::ALL[w]) {
                    continue;
                }
                let t = time(table.wall_pair(a, w), mass(sa), sa.radius);
                if t < tc {
                    tc = t;
                    which = format!("contact \"{}\"-{}", sa.name, self.wall_name(w));
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
