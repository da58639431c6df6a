//! What the SPH metrics need to know about a run, from its static section and case text: which
//! species are fluid, the particle spacing, rest density, mass and smoothing length, the kernel,
//! and where the tank's floor is.

use rayon::prelude::*;
use shm_protocol::layout::{ParticleKind, SpeciesMethod};
use shm_protocol::StaticData;

use super::kernel::Kernel;
use crate::metrics::energy::sphere_mass;
use crate::par::CHUNK;

/// Static SPH data of a run (a static section with species of the SPH methods).
#[derive(Clone, Debug, PartialEq)]
pub struct SphRun {
    /// Per species: its method is `sph_fluid`.
    pub fluid_species: Vec<bool>,
    /// Particle spacing dp = 2 x the fluid species' radius [m].
    pub dp: f64,
    /// Rest density rho0, the fluid species' density [kg/m^3].
    pub rho0: f64,
    /// Mass of a fluid particle, m = rho0 dp^3 [kg] (the solver's; a particle stands for a
    /// lattice cell of the spacing, not for a sphere).
    pub mass: f64,
    /// Smoothing length h, the fluid species' `smoothing_length` parameter [m]; `None` when it
    /// is missing or not a positive number (probes and gauges then have no value).
    pub h: Option<f64>,
    pub kernel: Kernel,
    /// The tank [m]: the case's `[domain]` (`min`, `max`), else the world box (which for the
    /// solver's SPH runs includes the boundary layers outside the walls).
    pub domain_min: [f64; 3],
    pub domain_max: [f64; 3],
    /// What was assumed and why (a missing `[domain]`, an unknown kernel), for the log.
    pub assumptions: Vec<String>,
}

/// Mass of an SPH particle, m = rho0 dp^3 with dp = 2 r [kg] (rho0 [kg/m^3], r [m], half the
/// lattice spacing as the segment's radius says).
#[inline]
pub fn lattice_mass(density: f64, radius: f64) -> f64 {
    let dp = 2.0 * radius;
    density * dp * dp * dp
}

/// Whether species records describe an SPH run.
pub fn is_sph_method(m: Option<SpeciesMethod>) -> bool {
    matches!(
        m,
        Some(SpeciesMethod::SphFluid | SpeciesMethod::SphBoundary)
    )
}

/// Mass of every particle [kg]: for a species of an SPH method (`sph_radius[s]` is its
/// record's radius, half the spacing, in f64: every particle of the species has that mass,
/// exactly) [`lattice_mass`], for the others a solid sphere's of the particle's radius; 0 for an
/// unknown species (never panics).
pub fn particle_masses(
    radii: &[f32],
    species: &[u32],
    density: &[f64],
    sph_radius: &[Option<f64>],
) -> Vec<f64> {
    radii
        .par_iter()
        .zip(species)
        .with_min_len(CHUNK)
        .map(|(&r, &s)| {
            let rho = density.get(s as usize).copied().unwrap_or(0.0);
            match sph_radius.get(s as usize).copied().flatten() {
                Some(spacing_half) => lattice_mass(rho, spacing_half),
                None => sphere_mass(rho, r as f64),
            }
        })
        .collect()
}

impl SphRun {
    /// `None` unless a species has an SPH method. Reads `[sph] kernel` and `[domain]` from the
    /// case text when it has them.
    pub fn from_static(s: &StaticData) -> Option<Self> {
        if !s.species.iter().any(|r| is_sph_method(r.method())) {
            return None;
        }
        let fluid_species: Vec<bool> = s
            .species
            .iter()
            .map(|r| r.method() == Some(SpeciesMethod::SphFluid))
            .collect();
        let mut assumptions = Vec::new();
        // The fluid's record (the boundary's carries the same numbers when there is no fluid).
        let record = s
            .species
            .iter()
            .find(|r| r.method() == Some(SpeciesMethod::SphFluid))
            .or_else(|| s.species.iter().find(|r| is_sph_method(r.method())))?;
        let h = Some(record.params[2]).filter(|h| h.is_finite() && *h > 0.0);
        if h.is_none() {
            assumptions.push(format!(
                "the fluid species gives no smoothing length (params[2] = {}): probes and gauges have no value",
                record.params[2]
            ));
        }
        let case: Option<toml::Table> = s.config_toml.parse().ok();
        let sph_table = case
            .as_ref()
            .and_then(|t| t.get("sph"))
            .and_then(toml::Value::as_table);
        let kernel = match sph_table.and_then(|t| t.get("kernel")) {
            None => Kernel::default(),
            Some(v) => match v.as_str().and_then(Kernel::from_case_name) {
                Some(k) => k,
                None => {
                    assumptions.push(format!(
                        "unknown [sph] kernel {v}: interpolating with the Wendland C2 kernel"
                    ));
                    Kernel::default()
                }
            },
        };
        let domain = case
            .as_ref()
            .and_then(|t| t.get("domain"))
            .and_then(toml::Value::as_table);
        let corner = |key: &str| domain.and_then(|d| d.get(key)).and_then(vec3);
        let (domain_min, domain_max) = match (corner("min"), corner("max")) {
            (Some(lo), Some(hi)) => (lo, hi),
            _ => {
                assumptions.push(
                    "no [domain] min/max in the case text: the tank is taken as the world box (floor at world_min z)"
                        .into(),
                );
                (s.world_min, s.world_max)
            }
        };
        let dp = 2.0 * record.radius;
        Some(Self {
            fluid_species,
            dp,
            rho0: record.density,
            mass: lattice_mass(record.density, record.radius),
            h,
            kernel,
            domain_min,
            domain_max,
            assumptions,
        })
    }

    /// The tank floor, z of `domain_min` [m].
    pub fn floor(&self) -> f64 {
        self.domain_min[2]
    }
}

fn vec3(v: &toml::Value) -> Option<[f64; 3]> {
    let a = v.as_array().filter(|a| a.len() == 3)?;
    let num = |x: &toml::Value| x.as_float().or_else(|| x.as_integer().map(|i| i as f64));
    Some([num(&a[0])?, num(&a[1])?, num(&a[2])?])
}

/// Which elements of a frame are fluid: by the frame's `particle_kind` (1 fluid) when it
/// carries one, else by the method of each element's species.
#[derive(Clone, Copy)]
pub enum FluidSelector<'a> {
    Kinds(&'a [u32]),
    Species {
        species: &'a [u32],
        fluid_species: &'a [bool],
    },
}

impl FluidSelector<'_> {
    /// Whether element `i` is fluid (false for an index beyond the arrays).
    #[inline]
    pub fn is_fluid(&self, i: usize) -> bool {
        match self {
            Self::Kinds(k) => k.get(i) == Some(&(ParticleKind::Fluid as u32)),
            Self::Species {
                species,
                fluid_species,
            } => species
                .get(i)
                .and_then(|&s| fluid_species.get(s as usize))
                .copied()
                .unwrap_or(false),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use shm_protocol::layout::SPECIES_PARAMS;
    use shm_protocol::SpeciesRecord;

    /// An SPH species record as the solver writes it: radius dp/2, density rho0,
    /// params [c0, alpha, h].
    pub(crate) fn sph_record(name: &str, method: SpeciesMethod, dp: f64, h: f64) -> SpeciesRecord {
        let mut params = [0.0; SPECIES_PARAMS];
        params[..3].copy_from_slice(&[20.0, 0.1, h]);
        SpeciesRecord {
            method: method as u32,
            params,
            ..SpeciesRecord::named(name, 0.5 * dp, 1000.0)
        }
    }

    #[test]
    fn reads_the_fluid_species_and_the_case() {
        let s = StaticData {
            config_toml: "method = \"sph\"\n[domain]\nmin = [0.0, 0.0, -0.5]\nmax = [1, 1, 1]\n[sph]\nspacing = 0.02\nkernel = \"cubic_spline\"\n".into(),
            species: vec![
                sph_record("fluid", SpeciesMethod::SphFluid, 0.02, 0.0346),
                sph_record("boundary", SpeciesMethod::SphBoundary, 0.02, 0.0346),
            ],
            world_min: [-0.07; 3],
            world_max: [1.07; 3],
            ..Default::default()
        };
        let run = SphRun::from_static(&s).expect("an SPH run");
        assert_eq!(run.fluid_species, [true, false]);
        assert_eq!((run.dp, run.rho0, run.h), (0.02, 1000.0, Some(0.0346)));
        // m = rho0 dp^3 = 1000 * 8e-6 kg.
        assert!((run.mass - 8e-3).abs() < 1e-15);
        assert_eq!(run.kernel, Kernel::CubicSpline);
        assert_eq!(
            (run.domain_min, run.domain_max),
            ([0.0, 0.0, -0.5], [1.0; 3])
        );
        assert_eq!(run.floor(), -0.5);
        assert!(run.assumptions.is_empty(), "{:?}", run.assumptions);
    }

    #[test]
    fn without_a_case_the_world_box_and_wendland_with_a_note() {
        let s = StaticData {
            species: vec![sph_record("water", SpeciesMethod::SphFluid, 0.04, 0.0)],
            world_min: [0.0, 0.0, 0.1],
            world_max: [1.0; 3],
            ..Default::default()
        };
        let run = SphRun::from_static(&s).expect("an SPH run");
        assert_eq!(run.kernel, Kernel::WendlandC2);
        assert_eq!(run.h, None);
        assert_eq!(run.floor(), 0.1);
        assert_eq!(run.assumptions.len(), 2, "{:?}", run.assumptions);
        // DEM species: not an SPH run.
        let dem = StaticData {
            species: vec![SpeciesRecord::named("glass", 0.01, 2500.0)],
            ..Default::default()
        };
        assert!(SphRun::from_static(&dem).is_none());
    }

    #[test]
    fn lattice_masses_for_sph_species_spheres_for_the_others() {
        let m = particle_masses(
            &[0.01, 0.01, 0.01],
            &[0, 1, 9],
            &[1000.0, 1000.0],
            &[Some(0.01), None],
        );
        // The record's f64 radius, not the particle's f32 one: exactly rho0 dp^3.
        assert_eq!(m[0], lattice_mass(1000.0, 0.01));
        assert!((m[1] - sphere_mass(1000.0, 0.01f32 as f64)).abs() < 1e-15);
        assert_eq!(m[2], 0.0);
    }

    #[test]
    fn kinds_decide_else_species() {
        let kinds = [1, 2, 0];
        let k = FluidSelector::Kinds(&kinds);
        assert_eq!(
            (0..4).map(|i| k.is_fluid(i)).collect::<Vec<_>>(),
            [true, false, false, false]
        );
        let species = [1, 0, 7];
        let s = FluidSelector::Species {
            species: &species,
            fluid_species: &[true, false],
        };
        assert_eq!(
            (0..4).map(|i| s.is_fluid(i)).collect::<Vec<_>>(),
            [false, true, false, false]
        );
    }
}
