//! Inflow: particles added during a run by the case's `inflows` (see [`crate::case::Inflow`]).
//!
//! Each source's particles are planned when the run starts: a count (rate x window, or mass rate
//! x window / mean particle mass), an id range after every id the run has, and the species of
//! each (exact counts per size class in a seeded order). Those plans go into the state's
//! [`ParticleFlow`], so checkpoints restart with the same ids and species and the static section
//! can list every particle the run will have. During the run, at every `interval` the
//! coordinator asks for the particles due by then; they are placed at random in the source's
//! region without overlapping the particles already there or each other, deterministically
//! (the random stream depends on the source, its seed and the batch, never on the
//! decomposition), and handed to the workers that own their positions.

use crate::case::sources::{shuffled_classes, PlacementGrid};
use crate::case::{Case, CaseError, Inflow, Region};
use crate::core::rng::SplitMix64;
use crate::core::vec3::V3;
use crate::dem::state::{InflowProgress, ParticleFlow};

/// Attempts per due particle before a batch gives up on the rest (they wait for the next).
const ATTEMPTS_PER_PARTICLE: u64 = 200;

/// A particle an inflow source adds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NewParticle {
    pub id: u32,
    pub species: u32,
    pub pos: V3,
    pub vel: V3,
}

/// One source, resolved.
struct Source {
    spec: Inflow,
    region: Option<Region>,
    /// Species of its k-th particle.
    species: Vec<u32>,
    start: f64,
    end: f64,
}

/// The inflow sources of a run.
pub struct Inflows {
    sources: Vec<Source>,
    radius: Vec<f64>,
    max_radius: f64,
    /// Whether a crowded batch was reported already (once per run).
    warned: bool,
}

impl Inflows {
    /// Resolves the sources of `case`; plans their id ranges into `flow` when it has none yet
    /// (a fresh run), otherwise keeps the plan it holds (a restart).
    pub fn plan(case: &Case, flow: &mut ParticleFlow) -> Result<Inflows, CaseError> {
        let radius: Vec<f64> = case.species.iter().map(|s| s.radius).collect();
        let fresh = flow.inflows.is_empty();
        let mut sources = Vec::with_capacity(case.inflows.len());
        for (k, spec) in case.inflows.iter().enumerate() {
            let field = format!("inflows[{k}]");
            let region = match &spec.shape {
                Some(sh) => Some(case.region(&format!("{field}.shape"), sh)?),
                None => None,
            };
            let start = spec.start;
            let end = spec.end.unwrap_or(case.end_time);
            let classes = case.species_classes(&spec.species);
            let total = if fresh {
                let window = (end - start).max(0.0);
                let n = match (spec.rate, spec.mass_rate) {
                    (Some(rate), _) => rate * window,
                    (None, Some(mass_rate)) => {
                        let mean: f64 = classes
                            .iter()
                            .map(|&(s, f)| {
                                let sp = &case.species[s as usize];
                                f * crate::dem::physics::sphere_mass(sp.radius, sp.density)
                            })
                            .sum();
                        mass_rate * window / mean
                    }
                    (None, None) => 0.0,
                };
                let n = n.round() as u64;
                let first_id =
                    flow.next_id as u64 + flow.inflows.iter().map(|p| p.total).sum::<u64>();
                if first_id + n > crate::dem::state::MAX_PARTICLE_ID as u64 + 1 {
                    return Err(CaseError::TooManyParticles {
                        origin: case.origin.name.clone(),
                        field: field.clone(),
                        message: format!(
                            "adds {n} particles after {first_id} ids: more than the {} ids a run may have",
                            crate::dem::state::MAX_PARTICLE_ID as u64 + 1
                        ),
                    });
                }
                flow.inflows.push(InflowProgress {
                    first_id: first_id as u32,
                    total: n,
                    inserted: 0,
                });
                n
            } else {
                flow.inflows.get(k).map_or(0, |p| p.total)
            };
            let species = shuffled_classes(total as usize, &classes, spec.seed);
            sources.push(Source {
                spec: spec.clone(),
                region,
                species,
                start,
                end,
            });
        }
        let max_radius = radius.iter().copied().fold(0.0, f64::max);
        Ok(Inflows {
            sources,
            radius,
            max_radius,
            warned: false,
        })
    }

    /// Species of every planned inflow particle, as (id, species).
    pub fn planned(&self, flow: &ParticleFlow) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        for (src, p) in self.sources.iter().zip(&flow.inflows) {
            out.extend(
                src.species
                    .iter()
                    .enumerate()
                    .map(|(j, &s)| (p.first_id + j as u32, s)),
            );
        }
        out
    }

    /// The sum of the planned counts of `case`'s sources (every id they will add).
    pub fn planned_total(case: &Case) -> Result<u64, CaseError> {
        let mut flow = ParticleFlow::default();
        Inflows::plan(case, &mut flow)?;
        Ok(flow.inflows.iter().map(|p| p.total).sum())
    }

    /// The inflow part of the flow of a run resumed from a frame (`--load-shm`) at time `t`:
    /// the plan a fresh run of `case` with `initial` particles makes (the same id ranges and
    /// species), and for each source as many particles added as one past the highest of its ids
    /// among `live_ids` (ascending) says: ids are given in order and the newest particles sit
    /// in the source's region, far from any outflow. A source none of whose particles is live
    /// any more counts what its schedule had due at its last batch before `t`. The removed
    /// counters are the caller's (the frame carries them).
    pub fn resumed_flow(
        case: &Case,
        initial: u32,
        live_ids: &[u32],
        t: f64,
    ) -> Result<ParticleFlow, CaseError> {
        let mut flow = ParticleFlow {
            next_id: initial,
            ..Default::default()
        };
        let inflows = Inflows::plan(case, &mut flow)?;
        for k in 0..flow.inflows.len() {
            let p = flow.inflows[k];
            let (first, end) = (p.first_id as u64, p.first_id as u64 + p.total);
            let lo = live_ids.partition_point(|&id| (id as u64) < first);
            let hi = live_ids.partition_point(|&id| (id as u64) < end);
            let inserted = if hi > lo {
                live_ids[hi - 1] as u64 + 1 - first
            } else {
                let s = &inflows.sources[k];
                let last_batch = if t >= s.start && s.spec.interval > 0.0 {
                    s.start + ((t - s.start) / s.spec.interval).floor() * s.spec.interval
                } else {
                    t
                };
                inflows.due(k, &p, last_batch)
            }
            .min(p.total);
            flow.inflows[k].inserted = inserted;
            if inserted > 0 {
                flow.next_id = flow
                    .next_id
                    .max((first + inserted).min(u32::MAX as u64) as u32);
            }
        }
        Ok(flow)
    }

    /// Particles due by time `t` from source `k`: total x elapsed fraction of its window.
    fn due(&self, k: usize, p: &InflowProgress, t: f64) -> u64 {
        let s = &self.sources[k];
        if t < s.start {
            return 0;
        }
        if t >= s.end || s.end <= s.start {
            return p.total;
        }
        ((p.total as f64) * (t - s.start) / (s.end - s.start)).floor() as u64
    }

    /// Whether a batch of source `k` falls in (t_prev, t]: batches at start + i * interval.
    fn batch_in(&self, k: usize, t_prev: f64, t: f64) -> Option<u64> {
        let s = &self.sources[k];
        let i = |x: f64| ((x - s.start) / s.spec.interval).floor();
        if t < s.start {
            return None;
        }
        if t_prev < s.start {
            return Some(0);
        }
        (i(t) > i(t_prev)).then(|| i(t) as u64)
    }

    /// Whether any batch falls in (t_prev, t] (then the coordinator gathers the positions).
    pub fn any_batch(&self, flow: &ParticleFlow, t_prev: f64, t: f64) -> bool {
        (0..self.sources.len()).any(|k| {
            flow.inflows.get(k).is_some_and(|p| p.inserted < p.total)
                && self.batch_in(k, t_prev, t).is_some()
        })
    }

    /// The particles of the batches in (t_prev, t], placed among `existing` positions (treated
    /// as spheres of the largest radius: conservative), in source order and id order; updates
    /// `flow`.
    pub fn place(
        &mut self,
        flow: &mut ParticleFlow,
        t_prev: f64,
        t: f64,
        existing: &[V3],
    ) -> Vec<NewParticle> {
        let mut out = Vec::new();
        let mut grid = PlacementGrid::new(2.0 * self.max_radius.max(f64::MIN_POSITIVE));
        // Only particles that can touch a new one matter: those near a region with a batch due.
        let reach = 2.0 * self.max_radius;
        let near: Vec<(V3, V3)> = (0..self.sources.len())
            .filter(|&k| self.batch_in(k, t_prev, t).is_some())
            .map(|k| {
                let s = &self.sources[k].spec;
                (s.min.map(|c| c - reach), s.max.map(|c| c + reach))
            })
            .collect();
        for &p in existing {
            if near
                .iter()
                .any(|(lo, hi)| (0..3).all(|a| p[a] >= lo[a] && p[a] <= hi[a]))
            {
                grid.insert(p, self.max_radius);
            }
        }
        for k in 0..self.sources.len() {
            let Some(batch) = self.batch_in(k, t_prev, t) else {
                continue;
            };
            let Some(mut prog) = flow.inflows.get(k).copied() else {
                continue;
            };
            let want = self.due(k, &prog, t).saturating_sub(prog.inserted);
            if want == 0 {
                continue;
            }
            let s = &self.sources[k];
            let mut rng = SplitMix64::new(
                s.spec.seed
                    ^ (batch.wrapping_add(1)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                    ^ (k as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F),
            );
            let (mut placed, mut attempts) = (0u64, 0u64);
            let max_attempts = ATTEMPTS_PER_PARTICLE * want;
            while placed < want && attempts < max_attempts {
                attempts += 1;
                let j = (prog.inserted + placed) as usize;
                let species = s.species[j];
                let r = self.radius[species as usize];
                let pos: V3 =
                    std::array::from_fn(|a| rng.range(s.spec.min[a] + r, s.spec.max[a] - r));
                if s.region
                    .as_ref()
                    .is_some_and(|g| !g.contains_sphere(pos, r))
                    || grid.overlaps(pos, r)
                {
                    continue;
                }
                grid.insert(pos, r);
                out.push(NewParticle {
                    id: prog.first_id + j as u32,
                    species,
                    pos,
                    vel: s.spec.velocity,
                });
                placed += 1;
            }
            if placed < want && !self.warned {
                self.warned = true;
                tracing::warn!(
                    "inflows[{k}]: placed {placed} of {want} particles due at t = {t:.4} s (the \
                     region is crowded); the rest wait for the next batches, so the inflow runs \
                     behind its rate: enlarge the region, give the particles a velocity that \
                     clears it, or lower the rate"
                );
            }
            prog.inserted += placed;
            flow.inflows[k] = prog;
            let next = prog.first_id as u64 + prog.inserted;
            flow.next_id = flow.next_id.max(next.min(u32::MAX as u64) as u32);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case() -> Case {
        let text = r#"
dt = 1e-4
end_time = 2.0
[domain]
min = [0.0, 0.0, 0.0]
max = [0.1, 0.1, 0.1]
[contact_model]
type = "linear"
[[species]]
name = "bead"
radius = 0.002
density = 2500.0
normal_stiffness = 2e3
restitution = 0.3
sliding_friction = 0.5
[wall_material]
normal_stiffness = 2e3
restitution = 0.3
sliding_friction = 0.5
[[inflows]]
species = "bead"
min = [0.0, 0.0, 0.05]
max = [0.1, 0.1, 0.1]
rate = 100.0
start = 0.0
end = 1.0
[[inflows]]
species = "bead"
min = [0.0, 0.0, 0.05]
max = [0.1, 0.1, 0.1]
rate = 40.0
start = 0.5
end = 1.0
"#;
        Case::from_toml_str(text, "test", std::path::Path::new("/")).expect("case")
    }

    /// `--load-shm` of a run with inflow: the plan of a fresh run, each source resuming after
    /// its highest live id, or at its schedule when none of its particles is live.
    #[test]
    fn resumed_flow_follows_the_newest_live_particle_of_each_source() {
        let c = case();
        assert_eq!(Inflows::planned_total(&c).unwrap(), 120);
        // 10 particles placed at t = 0 (ids 0..10); source 0 has ids 10..110, source 1 110..130.
        let live = [2, 9, 14, 15, 47];
        let f = Inflows::resumed_flow(&c, 10, &live, 0.505).unwrap();
        assert_eq!((f.inflows[0].first_id, f.inflows[0].total), (10, 100));
        assert_eq!((f.inflows[1].first_id, f.inflows[1].total), (110, 20));
        // Source 0: one past id 47. Source 1: none live, its first batch (t = 0.5) had nothing due.
        assert_eq!(f.inflows[0].inserted, 38);
        assert_eq!(f.inflows[1].inserted, 0);
        assert_eq!(f.next_id, 48);
        // Source 0 with none live at t = 0.505: what its last batch (t = 0.5) had due, 50.
        let f = Inflows::resumed_flow(&c, 10, &[2, 9], 0.505).unwrap();
        assert_eq!(f.inflows[0].inserted, 50);
        assert_eq!(f.next_id, 60);
        // Source 1's particles live at t = 0.8.
        let f = Inflows::resumed_flow(&c, 10, &[12, 111, 115], 0.8).unwrap();
        assert_eq!(f.inflows[1].inserted, 6);
        assert_eq!(f.next_id, 116);
        assert_eq!(f.removed_count, 0);
    }
}
