//! Particle placement from the case's sources, and the initial overlap check.

use super::{Case, CaseError, Source};
use crate::rng::SplitMix64;
use crate::vec3::{self, V3};
use std::collections::HashMap;

/// A particle as placed at t = 0. Its id is its index in the list.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InitialParticle {
    pub species: u32,
    pub position: V3,
    pub velocity: V3,
}

/// Hash grid over placed particles for overlap queries (cell size = largest diameter).
struct PlacementGrid {
    cell: f64,
    cells: HashMap<[i64; 3], Vec<usize>>,
}

impl PlacementGrid {
    fn new(cell: f64) -> Self {
        Self {
            cell,
            cells: HashMap::new(),
        }
    }
    fn key(&self, p: V3) -> [i64; 3] {
        p.map(|c| (c / self.cell).floor() as i64)
    }
    fn insert(&mut self, p: V3, i: usize) {
        self.cells.entry(self.key(p)).or_default().push(i);
    }
    /// First placed particle overlapping a sphere (p, r), if any.
    fn first_overlap(
        &self,
        p: V3,
        r: f64,
        placed: &[InitialParticle],
        radii: &[f64],
    ) -> Option<usize> {
        let k = self.key(p);
        let mut best: Option<usize> = None;
        for dz in -1..=1 {
            for dy in -1..=1 {
                for dx in -1..=1 {
                    let Some(list) = self.cells.get(&[k[0] + dx, k[1] + dy, k[2] + dz]) else {
                        continue;
                    };
                    for &j in list {
                        let rj = radii[placed[j].species as usize];
                        if vec3::norm(vec3::sub(p, placed[j].position)) < r + rj
                            && best.is_none_or(|b| j < b)
                        {
                            best = Some(j);
                        }
                    }
                }
            }
        }
        best
    }
}

/// The first particle `i` (in order) overlapping an earlier one, with the earliest such `j`:
/// particles sorted by cell (z, y, x rows, so the three cells of a row are one range), then each
/// particle tests its 9 neighbour rows, in parallel. O(N log N) without hashing, which matters at
/// tens of millions of particles.
fn first_overlap_pair(
    particles: &[InitialParticle],
    radius: &(dyn Fn(&InitialParticle) -> f64 + Sync),
    cell: f64,
) -> Option<(usize, usize)> {
    use rayon::prelude::*;
    let cell = cell.max(f64::MIN_POSITIVE);
    let key = |p: V3| [2, 1, 0].map(|a| (p[a] / cell).floor() as i64);
    let mut sorted: Vec<([i64; 3], u32)> = particles
        .par_iter()
        .enumerate()
        .map(|(i, p)| (key(p.position), i as u32))
        .collect();
    sorted.par_sort_unstable();
    let row = |z: i64, y: i64, x0: i64, x1: i64| {
        let lo = sorted.partition_point(|e| e.0 < [z, y, x0]);
        let hi = sorted.partition_point(|e| e.0 <= [z, y, x1]);
        &sorted[lo..hi]
    };
    (0..particles.len())
        .into_par_iter()
        .filter_map(|i| {
            let p = &particles[i];
            let [kz, ky, kx] = key(p.position);
            let mut best: Option<usize> = None;
            for z in kz - 1..=kz + 1 {
                for y in ky - 1..=ky + 1 {
                    for &(_, j) in row(z, y, kx - 1, kx + 1) {
                        let j = j as usize;
                        if j >= i || best.is_some_and(|b| b <= j) {
                            continue;
                        }
                        let q = &particles[j];
                        if vec3::norm(vec3::sub(p.position, q.position)) < radius(p) + radius(q) {
                            best = Some(j);
                        }
                    }
                }
            }
            best.map(|j| (i, j))
        })
        .min_by_key(|&(i, _)| i)
}

impl Case {
    fn radii(&self) -> Vec<f64> {
        self.species.iter().map(|s| s.radius).collect()
    }

    /// Places all particles, source by source (ids in that order). Deterministic for given seeds.
    /// Assumes [`Case::validate_fields`] passed (species names resolve).
    pub fn generate_particles(&self) -> Result<Vec<InitialParticle>, CaseError> {
        let radii = self.radii();
        let rmax = radii.iter().copied().fold(0.0, f64::max);
        let mut grid = PlacementGrid::new(2.0 * rmax);
        let mut in_grid = 0usize;
        let mut out: Vec<InitialParticle> = Vec::new();
        let origin = &self.origin.name;
        for (k, src) in self.sources.iter().enumerate() {
            let field = format!("sources[{k}]");
            match src {
                Source::Grid {
                    species,
                    min,
                    max,
                    spacing,
                    count,
                    jitter,
                    seed,
                    velocity,
                } => {
                    let s = self.species_index(species).unwrap_or(0);
                    let r = radii[s];
                    let n: [usize; 3] = std::array::from_fn(|a| {
                        ((max[a] - min[a]) / spacing + 1e-9).floor().max(0.0) as usize
                    });
                    let sites = n[0].saturating_mul(n[1]).saturating_mul(n[2]);
                    let want = count.unwrap_or(sites);
                    if want > sites || sites == 0 {
                        return Err(CaseError::Invalid {
                            origin: origin.clone(),
                            field: format!("{field}.count"),
                            message: format!("asks for {want} particles but the lattice {n:?} of spacing {spacing} in the region has {sites} sites"),
                        });
                    }
                    let mut rng = SplitMix64::new(*seed);
                    let amp = jitter * (spacing - 2.0 * r) * 0.5;
                    for idx in 0..want {
                        let ijk = [idx % n[0], (idx / n[0]) % n[1], idx / (n[0] * n[1])];
                        let p: V3 = std::array::from_fn(|a| {
                            min[a] + spacing * (ijk[a] as f64 + 0.5) + amp * rng.range(-1.0, 1.0)
                        });
                        out.push(InitialParticle {
                            species: s as u32,
                            position: p,
                            velocity: *velocity,
                        });
                    }
                }
                Source::RandomBox {
                    species,
                    min,
                    max,
                    count,
                    seed,
                    velocity,
                } => {
                    let s = self.species_index(species).unwrap_or(0);
                    let r = radii[s];
                    if (0..3).any(|a| max[a] - min[a] < 2.0 * r) {
                        return Err(CaseError::Invalid {
                            origin: origin.clone(),
                            field: field.clone(),
                            message: format!(
                                "region {min:?}..{max:?} is smaller than a particle of diameter {}",
                                2.0 * r
                            ),
                        });
                    }
                    // Lattice particles placed so far join the grid only now: a case of lattices
                    // alone (millions of particles) never pays for it.
                    for (i, q) in out.iter().enumerate().skip(in_grid) {
                        grid.insert(q.position, i);
                    }
                    in_grid = out.len();
                    let mut rng = SplitMix64::new(*seed);
                    let max_attempts = 1000usize.saturating_mul(*count).max(100_000);
                    let mut placed = 0;
                    let mut attempts = 0;
                    while placed < *count {
                        if attempts >= max_attempts {
                            return Err(CaseError::Placement {
                                origin: origin.clone(),
                                field,
                                placed,
                                count: *count,
                            });
                        }
                        attempts += 1;
                        let p: V3 = std::array::from_fn(|a| rng.range(min[a] + r, max[a] - r));
                        if grid.first_overlap(p, r, &out, &radii).is_none() {
                            grid.insert(p, out.len());
                            in_grid = out.len() + 1;
                            out.push(InitialParticle {
                                species: s as u32,
                                position: p,
                                velocity: *velocity,
                            });
                            placed += 1;
                        }
                    }
                }
            }
        }
        Ok(out)
    }

    /// Checks that no two particles overlap and, with walls on, that every particle lies inside
    /// the box without touching a wall. The error names the particles (ids) and positions: the
    /// first particle in id order that overlaps an earlier one, and the earliest such partner.
    pub fn check_initial_overlaps(&self, particles: &[InitialParticle]) -> Result<(), CaseError> {
        let radii = self.radii();
        let rmax = radii.iter().copied().fold(0.0, f64::max);
        let origin = &self.origin.name;
        let radius = |p: &InitialParticle| radii.get(p.species as usize).copied().unwrap_or(0.0);
        if let Some((i, j)) = first_overlap_pair(particles, &radius, 2.0 * rmax) {
            let (p, pj) = (particles[i], particles[j]);
            return Err(CaseError::Overlap {
                origin: origin.clone(),
                a: j,
                b: i,
                pa: pj.position,
                pb: p.position,
                distance: vec3::norm(vec3::sub(p.position, pj.position)),
                radii: radius(&p) + radius(&pj),
            });
        }
        for (i, p) in particles.iter().enumerate() {
            let r = radius(p);
            if self.domain.walls {
                for a in 0..3 {
                    let axis = ["x", "y", "z"][a];
                    if p.position[a] - r < self.domain.min[a] {
                        let message = format!(
                            "overlaps or lies beyond the {axis}_min wall at {} (radius {r})",
                            self.domain.min[a]
                        );
                        return Err(CaseError::ParticleOutside {
                            origin: origin.clone(),
                            id: i,
                            pos: p.position,
                            message,
                        });
                    }
                    if p.position[a] + r > self.domain.max[a] {
                        let message = format!(
                            "overlaps or lies beyond the {axis}_max wall at {} (radius {r})",
                            self.domain.max[a]
                        );
                        return Err(CaseError::ParticleOutside {
                            origin: origin.clone(),
                            id: i,
                            pos: p.position,
                            message,
                        });
                    }
                }
            }
        }
        Ok(())
    }
}
