//! How many particles a case asks for, checked before anything is allocated: against the
//! shared-memory protocol's limit (particle ids are u32) and against the memory this machine has
//! (`MemAvailable` of `/proc/meminfo`).
//!
//! Without these checks an absurd count (`--particles 1000000000000`, a lattice of 1e12 sites)
//! ended in the allocator's abort ("memory allocation of 7516192768 bytes failed", exit 134)
//! after minutes of placement. Counts are computed from the sources' fields alone, so the check
//! costs nothing and covers the built-in case, case files and resumed runs alike.

use super::{Case, CaseError, InitialParticle, Source};
use crate::core::vec3::V3;
use crate::dem::state::{HistEntry, HISTORY_CAP};

/// Most particles a case may have: the shared-memory protocol's limit (ids are u32).
pub const MAX_PARTICLES: u64 = shm_protocol::layout::MAX_PARTICLES_LIMIT;

/// Host bytes per particle of the initial state every backend is started from
/// (`backend::SimState`): species and contact count (u32 each), position, velocity, angular
/// velocity, force and torque (f64 x 3 each) and [`HISTORY_CAP`] history slots.
pub const STATE_BYTES_PER_PARTICLE: u64 = (2 * std::mem::size_of::<u32>()
    + 5 * std::mem::size_of::<V3>()
    + HISTORY_CAP * std::mem::size_of::<HistEntry>())
    as u64;

/// Host bytes per particle that placement needs ([`Case::generate_particles`] and
/// [`Case::check_initial_overlaps`]): the placed particle and its entry in the overlap check's
/// sorted cell list.
pub const PLACEMENT_BYTES_PER_PARTICLE: u64 =
    (std::mem::size_of::<InitialParticle>() + std::mem::size_of::<([i64; 3], u32)>()) as u64;

/// Extra host bytes per particle of a `random_box` source: its hash grid of placed particles
/// (about 0.75 occupied cells per particle at the solid fractions allowed, each a 48-byte map
/// entry and a list of (position, radius) entries of 32 B with room for at least 4).
pub const RANDOM_BOX_BYTES_PER_PARTICLE: u64 = 192;

/// `MemAvailable` of `/proc/meminfo` [bytes]: what the kernel estimates can be allocated without
/// swapping. `None` where it cannot be read (not Linux); the memory checks are then skipped.
pub fn available_memory() -> Option<u64> {
    parse_mem_available(&std::fs::read_to_string("/proc/meminfo").ok()?)
}

/// The `MemAvailable:  123456 kB` line of a `/proc/meminfo` text, in bytes.
fn parse_mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?;
    let mut words = line.split_whitespace();
    let value: u64 = words.next()?.parse().ok()?;
    let unit = match words.next() {
        Some("kB") => 1024,
        None => 1,
        Some(_) => return None,
    };
    value.checked_mul(unit)
}

/// Bytes as "12.3 GiB" / "1.2 TiB" / "512 MiB".
pub fn human_bytes(b: u64) -> String {
    let b = b as f64;
    let units = [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)];
    for (name, shift) in units {
        let u = (1u64 << shift) as f64;
        if b >= u {
            return format!("{:.1} {name}", b / u);
        }
    }
    format!("{b:.0} B")
}

/// Why `particles` that need `need` bytes of host memory for `purpose` (e.g. "a run on the CPU
/// backend") cannot start with `available`, if they cannot: what they need, what there is, and
/// how many would fit. DEM cases and SPH runs on the CPU are refused with it.
pub fn memory_refusal(particles: u64, need: u64, available: u64, purpose: &str) -> Option<String> {
    (need > available).then(|| {
        let per = need as f64 / particles.max(1) as f64;
        format!(
            "{particles} particles need about {} of memory for {purpose} ({per:.0} B per \
             particle), but this machine has {} available (MemAvailable in /proc/meminfo); at \
             most about {} particles fit",
            human_bytes(need),
            human_bytes(available),
            (available as f64 / per) as u64
        )
    })
}

/// Lattice sites per axis of a grid source and their product (saturating: a lattice too large
/// to count is `u64::MAX` sites, which every limit refuses).
pub(crate) fn lattice(min: [f64; 3], max: [f64; 3], spacing: f64) -> ([u64; 3], u64) {
    let n: [u64; 3] = std::array::from_fn(|a| {
        // `as` saturates (NaN -> 0); validate_fields has checked that everything is finite.
        ((max[a] - min[a]) / spacing + 1e-9).floor().max(0.0) as u64
    });
    (n, n[0].saturating_mul(n[1]).saturating_mul(n[2]))
}

impl Case {
    /// Particles each source asks for, from its fields alone (a grid source without `count`
    /// fills every site of its lattice). Assumes the sources' numbers are finite.
    pub fn source_counts(&self) -> Vec<u64> {
        self.sources
            .iter()
            .map(|s| match s {
                Source::Grid {
                    min,
                    max,
                    spacing,
                    count,
                    ..
                } => match count {
                    Some(c) => *c as u64,
                    None => lattice(*min, *max, *spacing).1,
                },
                Source::RandomBox { count, .. } => *count as u64,
            })
            .collect()
    }

    /// All particles the case asks for (saturating).
    pub fn requested_particles(&self) -> u64 {
        self.source_counts()
            .iter()
            .fold(0u64, |a, &c| a.saturating_add(c))
    }

    /// Refuses more than [`MAX_PARTICLES`] particles, naming the source that crosses the limit.
    pub fn check_particle_count(&self) -> Result<(), CaseError> {
        let mut total = 0u64;
        for (k, c) in self.source_counts().into_iter().enumerate() {
            total = total.saturating_add(c);
            if total > MAX_PARTICLES {
                let (field, what) = match &self.sources[k] {
                    Source::Grid {
                        count: None,
                        min,
                        max,
                        spacing,
                        ..
                    } => {
                        let (n, _) = lattice(*min, *max, *spacing);
                        (
                            format!("sources[{k}]"),
                            format!(
                                "fills a lattice of {} x {} x {} = {c} sites (no `count` given)",
                                n[0], n[1], n[2]
                            ),
                        )
                    }
                    _ => (format!("sources[{k}].count"), format!("= {c}")),
                };
                let total_note = if total == c {
                    String::new()
                } else {
                    format!(" (together with the sources before it: {total})")
                };
                return Err(CaseError::TooManyParticles {
                    origin: self.origin.name.clone(),
                    field,
                    message: format!(
                        "{what}{total_note}: more than the {MAX_PARTICLES} particles a run may have (particle ids are 32-bit in the shared-memory protocol)"
                    ),
                });
            }
        }
        Ok(())
    }

    /// Refuses a case whose particles would need more host memory than is available:
    /// `bytes_per_particle` for `purpose` (e.g. "a run on the CPU backend") times
    /// [`Case::requested_particles`], plus [`RANDOM_BOX_BYTES_PER_PARTICLE`] for each particle of
    /// a random box. Skipped where `MemAvailable` cannot be read.
    pub fn check_host_memory(
        &self,
        bytes_per_particle: u64,
        purpose: &str,
    ) -> Result<(), CaseError> {
        let Some(available) = available_memory() else {
            return Ok(());
        };
        self.check_memory_against(bytes_per_particle, purpose, available)
    }

    pub(crate) fn check_memory_against(
        &self,
        bytes_per_particle: u64,
        purpose: &str,
        available: u64,
    ) -> Result<(), CaseError> {
        let counts = self.source_counts();
        let particles = counts.iter().fold(0u64, |a, &c| a.saturating_add(c));
        let random: u64 = self
            .sources
            .iter()
            .zip(&counts)
            .filter(|(s, _)| matches!(s, Source::RandomBox { .. }))
            .fold(0u64, |a, (_, &c)| a.saturating_add(c));
        let need = particles
            .saturating_mul(bytes_per_particle)
            .saturating_add(random.saturating_mul(RANDOM_BOX_BYTES_PER_PARTICLE));
        match memory_refusal(particles, need, available, purpose) {
            None => Ok(()),
            Some(message) => Err(CaseError::Memory {
                origin: self.origin.name.clone(),
                message,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_available_is_parsed_in_bytes() {
        let text = "MemTotal:       16318412 kB\nMemFree:  100 kB\nMemAvailable:   12000000 kB\n";
        assert_eq!(parse_mem_available(text), Some(12_000_000 * 1024));
        assert_eq!(parse_mem_available("MemFree: 1 kB\n"), None);
        assert_eq!(parse_mem_available("MemAvailable: x kB\n"), None);
        if std::path::Path::new("/proc/meminfo").exists() {
            assert!(available_memory().is_some_and(|b| b > 0));
        }
    }

    #[test]
    fn state_bytes_match_the_state_layout() {
        // 2 x u32 + 5 x [f64; 3] + 16 x (u64 key + [f64; 3] spring)
        assert_eq!(STATE_BYTES_PER_PARTICLE, 8 + 120 + 16 * 32);
    }

    #[test]
    fn too_many_particles_name_the_source_and_the_limit() {
        let mut case = Case::default_falling_box(1000);
        assert!(case.check_particle_count().is_ok());
        case.sources[0] = match case.sources[0].clone() {
            Source::Grid {
                species,
                min,
                max,
                spacing,
                jitter,
                seed,
                velocity,
                ..
            } => Source::Grid {
                species,
                min,
                max,
                spacing,
                count: Some(5_000_000_000),
                jitter,
                seed,
                velocity,
                shape: None,
            },
            s => s,
        };
        let e = case.check_particle_count().unwrap_err().to_string();
        assert!(e.contains("sources[0].count = 5000000000"), "{e}");
        assert!(e.contains("4294967295"), "{e}");
    }

    #[test]
    fn memory_error_says_needed_and_available() {
        let case = Case::default_falling_box(1_000_000);
        assert!(case
            .check_memory_against(1000, "a test", 2_000_000_000)
            .is_ok());
        let e = case
            .check_memory_against(1000, "a test", 100_000_000)
            .unwrap_err()
            .to_string();
        assert!(e.contains("1000000 particles need about 953.7 MiB"), "{e}");
        assert!(e.contains("95.4 MiB available"), "{e}");
        assert!(e.contains("at most about 100000 particles fit"), "{e}");
    }
}
