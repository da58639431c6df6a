//! What the metrics need from the static section, prepared once per static generation:
//! per-particle radius and species, species densities, gravity and the world box.

use shm_protocol::static_data::decode_name;

use crate::metrics::sph::run::{self as sph_run, SphRun};
use shm_protocol::{MeshStatic, StaticData};

/// Gravity used when the configuration does not give one [m/s^2].
pub const DEFAULT_GRAVITY: [f64; 3] = [0.0, 0.0, -9.81];

/// Why the static section cannot be used.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ContextError {
    #[error(
        "particle {particle} has species {species} but the static section lists {count} species"
    )]
    BadSpecies {
        particle: usize,
        species: u32,
        count: usize,
    },
}

/// Static inputs of the metrics.
#[derive(Clone, Debug)]
pub struct StaticContext {
    /// Static generation these data come from.
    pub generation: u64,
    /// Per particle [m], in frame order.
    pub radii: Vec<f32>,
    /// Per particle species index, in frame order.
    pub species: Vec<u32>,
    pub species_names: Vec<String>,
    /// Per species [kg/m^3].
    pub densities: Vec<f64>,
    /// Per particle [kg], from radius, species and density: a solid sphere's, or rho0 dp^3
    /// for a species of an SPH method ([`sph_run::particle_masses`]).
    pub masses: Vec<f64>,
    /// [m/s^2]
    pub gravity: [f64; 3],
    /// Where `gravity` came from (`config key gravity`, or the default and why).
    pub gravity_source: String,
    /// World box [m] (the potential energy's reference height is `world_min[2]` along gravity).
    pub world_min: [f64; 3],
    pub world_max: [f64; 3],
    pub meshes: Vec<MeshStatic>,
    /// Largest and mean particle radius [m] (0 without particles).
    pub max_radius: f64,
    pub mean_radius: f64,
    /// SPH runs: fluid species, spacing, smoothing length, kernel, tank ([`SphRun`]).
    pub sph: Option<SphRun>,
}

impl StaticContext {
    /// Checks every species index and reads gravity from the configuration text.
    pub fn new(s: StaticData) -> Result<Self, ContextError> {
        let count = s.species.len();
        if let Some((particle, &species)) = s
            .particle_species
            .iter()
            .enumerate()
            .find(|(_, &k)| k as usize >= count)
        {
            return Err(ContextError::BadSpecies {
                particle,
                species,
                count,
            });
        }
        let (gravity, gravity_source) = match gravity_from_config(&s.config_toml) {
            Ok(Some(g)) => (g, "configuration key `gravity`".to_string()),
            Ok(None) => (
                DEFAULT_GRAVITY,
                "default [0, 0, -9.81] (no `gravity` in the configuration)".to_string(),
            ),
            Err(e) => (
                DEFAULT_GRAVITY,
                format!("default [0, 0, -9.81] (configuration unreadable: {e})"),
            ),
        };
        let n = s.particle_radius.len();
        let max_radius = s
            .particle_radius
            .iter()
            .fold(0.0f64, |m, &r| m.max(r as f64));
        let mean_radius = if n == 0 {
            0.0
        } else {
            s.particle_radius.iter().map(|&r| r as f64).sum::<f64>() / n as f64
        };
        let densities: Vec<f64> = s.species.iter().map(|r| r.density).collect();
        let sph_radius: Vec<Option<f64>> = s
            .species
            .iter()
            .map(|r| sph_run::is_sph_method(r.method()).then_some(r.radius))
            .collect();
        let sph = SphRun::from_static(&s);
        Ok(Self {
            masses: sph_run::particle_masses(
                &s.particle_radius,
                &s.particle_species,
                &densities,
                &sph_radius,
            ),
            generation: s.generation,
            radii: s.particle_radius,
            species: s.particle_species,
            species_names: s.species.iter().map(|r| decode_name(&r.name)).collect(),
            densities,
            gravity,
            gravity_source,
            world_min: s.world_min,
            world_max: s.world_max,
            meshes: s.meshes,
            max_radius,
            mean_radius,
            sph,
        })
    }

    pub fn particle_count(&self) -> usize {
        self.radii.len()
    }

    /// Species index by name or by number (`--lacey-species`).
    pub fn species_index(&self, word: &str) -> Option<u32> {
        if let Some(i) = self.species_names.iter().position(|n| n == word) {
            return Some(i as u32);
        }
        word.parse::<u32>()
            .ok()
            .filter(|&i| (i as usize) < self.species_names.len())
    }
}

/// Gravity [m/s^2] from the case configuration (TOML): the key `gravity = [gx, gy, gz]` at the
/// top level or, failing that, in any table (depth first, e.g. `[physics] gravity`).
/// `Ok(None)` when no such key exists; `Err` when the text is not TOML or the key is malformed.
pub fn gravity_from_config(text: &str) -> Result<Option<[f64; 3]>, String> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| e.message().to_string())?;
    match find_key(&table, "gravity") {
        None => Ok(None),
        Some(v) => {
            let arr = v
                .as_array()
                .filter(|a| a.len() == 3)
                .ok_or_else(|| format!("`gravity` must be an array of 3 numbers, got {v}"))?;
            let mut g = [0.0; 3];
            for (k, x) in arr.iter().enumerate() {
                g[k] = x
                    .as_float()
                    .or_else(|| x.as_integer().map(|i| i as f64))
                    .ok_or_else(|| format!("`gravity` component {k} is not a number: {x}"))?;
            }
            Ok(Some(g))
        }
    }
}

fn find_key<'a>(t: &'a toml::Table, key: &str) -> Option<&'a toml::Value> {
    if let Some(v) = t.get(key) {
        return Some(v);
    }
    t.values()
        .filter_map(toml::Value::as_table)
        .find_map(|sub| find_key(sub, key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use shm_protocol::SpeciesRecord;

    #[test]
    fn gravity_is_found_at_top_level_or_nested_and_defaults_otherwise() {
        assert_eq!(
            gravity_from_config("gravity = [0.0, 0.0, -9.81]\n"),
            Ok(Some([0.0, 0.0, -9.81]))
        );
        assert_eq!(
            gravity_from_config("dt = 1e-5\n[physics]\ngravity = [1, 0, 0]\n"),
            Ok(Some([1.0, 0.0, 0.0]))
        );
        assert_eq!(gravity_from_config("dt = 1e-5\n"), Ok(None));
        assert_eq!(gravity_from_config(""), Ok(None));
        assert!(gravity_from_config("gravity = 3").is_err());
        assert!(gravity_from_config("not toml [").is_err());
    }

    #[test]
    fn out_of_range_species_is_refused() {
        let s = StaticData {
            species: vec![SpeciesRecord::default()],
            particle_ids: vec![0, 1],
            particle_species: vec![0, 4],
            particle_radius: vec![0.1, 0.1],
            ..Default::default()
        };
        assert_eq!(
            StaticContext::new(s).unwrap_err(),
            ContextError::BadSpecies {
                particle: 1,
                species: 4,
                count: 1
            }
        );
    }
}
