//! Particle placement from the case's sources, and the initial overlap check.

use super::{ranges, Case, CaseError, FractionBasis, Shape, Source, SpeciesChoice};
use crate::core::rng::SplitMix64;
use crate::core::stl::Triangle;
use crate::core::vec3::{self, V3};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::time::{Duration, Instant};

/// Bounds of random placement ([`Source::RandomBox`]); see [`Case::generate_particles_with`].
#[derive(Debug, Clone, PartialEq)]
pub struct PlacementLimits {
    /// Attempts per requested particle before giving up (at least 100,000 in all).
    pub attempts_per_particle: u64,
    /// Wall-clock seconds one source may take before giving up.
    pub max_seconds: f64,
    /// Seconds between progress lines (`tracing::info`) of a long placement.
    pub progress_every: f64,
}

impl Default for PlacementLimits {
    /// 1000 attempts per particle (random sequential addition below the allowed fraction needs
    /// a few to a few hundred on average), 600 s (100,000 spheres at a solid fraction of 0.30
    /// take about 3 s, 0.33 about 11 s on the 2-core development machine), a progress line
    /// every 2 s.
    fn default() -> Self {
        PlacementLimits {
            attempts_per_particle: 1000,
            max_seconds: 600.0,
            progress_every: 2.0,
        }
    }
}

/// Refuses a random box whose spheres would fill more than
/// [`ranges::RANDOM_BOX_MAX_FRACTION`] of the region: random sequential addition cannot get
/// there (it jams near 0.38), so searching would only burn time.
pub(crate) fn random_box_feasible(
    origin: &str,
    field: &str,
    radius: f64,
    min: [f64; 3],
    max: [f64; 3],
    count: usize,
) -> Result<(), CaseError> {
    let volume: f64 = (0..3).map(|a| max[a] - min[a]).product();
    let sphere = 4.0 / 3.0 * std::f64::consts::PI * radius.powi(3);
    let fraction = count as f64 * sphere / volume;
    let limit = ranges::RANDOM_BOX_MAX_FRACTION;
    if fraction <= limit {
        return Ok(());
    }
    let fit = (limit * volume / sphere).floor() as u64;
    Err(CaseError::Invalid {
        origin: origin.to_string(),
        field: format!("{field}.count"),
        message: format!(
            "= {count} spheres of radius {} would fill a solid fraction of {} of the region {}..{} \
             (volume {} m^3); random placement cannot exceed {limit} (it jams near 0.38): at most \
             {fit} particles fit, or use a `grid` source for dense packings",
            ranges::value(radius),
            fraction_text(fraction),
            show3(min),
            show3(max),
            ranges::value(volume),
        ),
    })
}

fn fraction_text(f: f64) -> String {
    if f < 1e3 {
        format!("{f:.3}")
    } else {
        format!("{f:.3e}")
    }
}

fn show3(v: [f64; 3]) -> String {
    format!(
        "[{}, {}, {}]",
        ranges::value(v[0]),
        ranges::value(v[1]),
        ranges::value(v[2])
    )
}

/// A particle as placed at t = 0. Its id is its index in the list.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InitialParticle {
    pub species: u32,
    pub position: V3,
    pub velocity: V3,
}

/// Hash grid over placed particles for overlap queries (cell size = largest diameter). Each cell
/// keeps its particles' positions and radii, so a query reads one list per cell (the 27 lists
/// of a query are the cost of random placement: with the positions elsewhere it was a second
/// cache miss per neighbour).
pub(crate) struct PlacementGrid {
    cell: f64,
    cells: HashMap<[i64; 3], Vec<(V3, f64)>, BuildHasherDefault<CellHasher>>,
}

/// Multiply-rotate hash of cell keys (FxHash's step): SipHash's DoS resistance buys nothing
/// here and costs a third of a placement attempt.
#[derive(Default)]
struct CellHasher(u64);

impl Hasher for CellHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(w));
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

impl PlacementGrid {
    pub(crate) fn new(cell: f64) -> Self {
        Self {
            cell,
            cells: HashMap::default(),
        }
    }
    fn key(&self, p: V3) -> [i64; 3] {
        p.map(|c| (c / self.cell).floor() as i64)
    }
    pub(crate) fn insert(&mut self, p: V3, r: f64) {
        self.cells.entry(self.key(p)).or_default().push((p, r));
    }
    /// Whether a placed particle overlaps the sphere (p, r).
    pub(crate) fn overlaps(&self, p: V3, r: f64) -> bool {
        let k = self.key(p);
        for dz in -1..=1 {
            for dy in -1..=1 {
                for dx in -1..=1 {
                    let Some(list) = self.cells.get(&[k[0] + dx, k[1] + dy, k[2] + dz]) else {
                        continue;
                    };
                    if list
                        .iter()
                        .any(|&(q, rq)| vec3::norm(vec3::sub(p, q)) < r + rq)
                    {
                        return true;
                    }
                }
            }
        }
        false
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

/// A resolved [`Shape`]: where a source may put whole spheres.
#[derive(Debug, Clone, PartialEq)]
pub enum Region {
    Cylinder {
        base: V3,
        /// Unit axis.
        u: V3,
        radius: f64,
        length: f64,
    },
    /// A watertight mesh (checked when resolved) and its bounding box.
    Mesh {
        triangles: Vec<Triangle>,
        min: V3,
        max: V3,
    },
}

/// Ray direction of the inside test: no simple ratios, so that a ray through a lattice site
/// practically never grazes an edge or a vertex of a meshed (axis-aligned or regular) surface.
const RAY: V3 = [0.8418206, 0.4466411, 0.3031119];

impl Region {
    /// Whether the sphere (p, r) lies wholly inside.
    pub fn contains_sphere(&self, p: V3, r: f64) -> bool {
        match self {
            Region::Cylinder {
                base,
                u,
                radius,
                length,
            } => {
                let d = vec3::sub(p, *base);
                let h = vec3::dot(d, *u);
                let rho = vec3::norm(vec3::sub(d, vec3::scale(*u, h)));
                h >= r && h <= length - r && rho <= radius - r
            }
            Region::Mesh {
                triangles,
                min,
                max,
            } => {
                if (0..3).any(|a| p[a] - r < min[a] || p[a] + r > max[a]) {
                    return false;
                }
                // Inside: an odd number of crossings of a ray from p (Jordan); then no triangle
                // closer than r.
                let crossings = triangles
                    .iter()
                    .filter(|t| crate::core::geometry::ray_crosses_triangle(p, RAY, t))
                    .count();
                crossings % 2 == 1
                    && triangles.iter().all(|t| {
                        let (q, _) =
                            crate::core::geometry::closest_point_on_triangle(p, t[0], t[1], t[2]);
                        vec3::norm2(vec3::sub(q, p)) >= r * r
                    })
            }
        }
    }

    /// Enclosed volume [m^3] (a mesh's by the divergence theorem).
    pub fn volume(&self) -> f64 {
        match self {
            Region::Cylinder { radius, length, .. } => {
                std::f64::consts::PI * radius * radius * length
            }
            Region::Mesh { triangles, .. } => crate::core::geometry::enclosed_volume(triangles),
        }
    }
}

/// Exact counts per class: `total` split by `fractions` (summing to 1) with the largest
/// remainder method, so the counts add up to `total` and each is within one of its share.
pub(crate) fn split_counts(total: usize, fractions: &[f64]) -> Vec<usize> {
    let shares: Vec<f64> = fractions.iter().map(|f| f * total as f64).collect();
    let mut counts: Vec<usize> = shares.iter().map(|s| s.floor() as usize).collect();
    let mut left = total.saturating_sub(counts.iter().sum());
    let mut order: Vec<usize> = (0..fractions.len()).collect();
    order.sort_by(|&a, &b| {
        let (ra, rb) = (shares[a] - shares[a].floor(), shares[b] - shares[b].floor());
        rb.total_cmp(&ra).then(a.cmp(&b))
    });
    for &i in order.iter().cycle() {
        if left == 0 {
            break;
        }
        counts[i] += 1;
        left -= 1;
    }
    counts
}

/// A size class assignment for `total` particles: the exact counts of [`split_counts`] in an
/// order shuffled by `seed` (Fisher-Yates with SplitMix64).
pub(crate) fn shuffled_classes(total: usize, classes: &[(u32, f64)], seed: u64) -> Vec<u32> {
    let fr: Vec<f64> = classes.iter().map(|c| c.1).collect();
    let mut out = Vec::with_capacity(total);
    for (k, n) in split_counts(total, &fr).into_iter().enumerate() {
        out.extend(std::iter::repeat_n(classes[k].0, n));
    }
    let mut rng = SplitMix64::new(seed ^ 0x5eed_c1a5_5e50_u64);
    for i in (1..out.len()).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        out.swap(i, j);
    }
    out
}

/// One random-box source, resolved.
struct RandomSource<'a> {
    field: &'a str,
    /// Species of each particle to place, in placement order.
    classes: Vec<u32>,
    region: Option<&'a Region>,
    min: V3,
    max: V3,
    count: usize,
    seed: u64,
    velocity: V3,
}

impl Case {
    fn radii(&self) -> Vec<f64> {
        self.species.iter().map(|s| s.radius).collect()
    }

    /// (species index, number fraction) of a source's species choice; mass fractions become
    /// number fractions n_i ~ w_i / m_i. Assumes validation passed (unknown names are left out).
    pub fn species_classes(&self, choice: &SpeciesChoice) -> Vec<(u32, f64)> {
        match choice {
            SpeciesChoice::One(n) => vec![(self.species_index(n).unwrap_or(0) as u32, 1.0)],
            SpeciesChoice::Mix { basis, fractions } => {
                let raw: Vec<(u32, f64)> = fractions
                    .iter()
                    .filter_map(|(n, f)| {
                        let k = self.species_index(n)?;
                        let s = &self.species[k];
                        let w = match basis {
                            FractionBasis::Number => *f,
                            FractionBasis::Mass => {
                                f / crate::dem::physics::sphere_mass(s.radius, s.density)
                            }
                        };
                        Some((k as u32, w))
                    })
                    .collect();
                let sum: f64 = raw.iter().map(|c| c.1).sum();
                raw.into_iter().map(|(k, w)| (k, w / sum)).collect()
            }
        }
    }

    /// Largest radius a source's species choice places [m].
    pub fn choice_max_radius(&self, choice: &SpeciesChoice) -> f64 {
        choice
            .names()
            .iter()
            .filter_map(|n| self.species_index(n))
            .map(|k| self.species[k].radius)
            .fold(0.0, f64::max)
    }

    /// Resolves a source shape (reading its STL or taking a case mesh at t = 0); a mesh must be
    /// watertight.
    pub fn region(&self, field: &str, shape: &Shape) -> Result<Region, CaseError> {
        let origin = &self.origin.name;
        let invalid = |message: String| CaseError::Invalid {
            origin: origin.clone(),
            field: field.to_string(),
            message,
        };
        match shape {
            Shape::Cylinder {
                base,
                axis,
                radius,
                length,
            } => Ok(Region::Cylinder {
                base: *base,
                u: vec3::normalize_or_zero(*axis),
                radius: *radius,
                length: *length,
            }),
            Shape::Mesh { mesh, stl, scale } => {
                let triangles: Vec<Triangle> = match (mesh, stl) {
                    (Some(name), None) => {
                        let k = self
                            .meshes
                            .iter()
                            .position(|m| m.name == *name)
                            .ok_or_else(|| {
                                invalid(format!(
                                    "names mesh \"{name}\", which this case does not have"
                                ))
                            })?;
                        self.load_meshes()?.swap_remove(k).triangles
                    }
                    (None, Some(path)) => {
                        let full = self.origin.base_dir.join(path);
                        crate::core::stl::read_stl(&full)
                            .map_err(|source| CaseError::Stl {
                                origin: origin.clone(),
                                field: format!("{field}.stl"),
                                source,
                            })?
                            .into_iter()
                            .map(|t| t.map(|v| v.map(|c| c * scale)))
                            .filter(|t| crate::core::geometry::triangle_area(t) > 0.0)
                            .collect()
                    }
                    _ => {
                        return Err(invalid(
                            "needs exactly one of `mesh` (a mesh of this case) or `stl`".into(),
                        ))
                    }
                };
                if triangles.is_empty() {
                    return Err(invalid("has no non-degenerate triangles".into()));
                }
                if let Some((a, b, n)) = crate::core::geometry::open_edge(&triangles) {
                    return Err(invalid(format!(
                        "is not a closed surface: the edge {} - {} belongs to {n} triangle(s), \
                         every edge must belong to exactly two (a watertight mesh) for an inside \
                         to exist",
                        show3(a),
                        show3(b)
                    )));
                }
                let mut min = [f64::INFINITY; 3];
                let mut max = [f64::NEG_INFINITY; 3];
                for v in triangles.iter().flatten() {
                    for a in 0..3 {
                        min[a] = min[a].min(v[a]);
                        max[a] = max[a].max(v[a]);
                    }
                }
                Ok(Region::Mesh {
                    triangles,
                    min,
                    max,
                })
            }
        }
    }

    /// [`random_box_feasible`] for a source of several sizes, inside a shape: the spheres'
    /// volume against the smaller of the box's and the shape's.
    fn random_feasible(
        &self,
        field: &str,
        kinds: &[u32],
        min: V3,
        max: V3,
        region: Option<&Region>,
    ) -> Result<(), CaseError> {
        let spheres: f64 = kinds
            .iter()
            .map(|&k| 4.0 / 3.0 * std::f64::consts::PI * self.species[k as usize].radius.powi(3))
            .sum();
        let boxed: f64 = (0..3).map(|a| max[a] - min[a]).product();
        let volume = region.map_or(boxed, |g| g.volume().min(boxed));
        let fraction = spheres / volume;
        let limit = ranges::RANDOM_BOX_MAX_FRACTION;
        if fraction <= limit {
            return Ok(());
        }
        Err(CaseError::Invalid {
            origin: self.origin.name.clone(),
            field: format!("{field}.count"),
            message: format!(
                "= {} spheres would fill a solid fraction of {} of {} (volume {} m^3); random \
                 placement cannot exceed {limit} (it jams near 0.38): lower the count, or use a \
                 `grid` source for dense packings",
                kinds.len(),
                fraction_text(fraction),
                if region.is_some() {
                    "the shape"
                } else {
                    "the region"
                },
                ranges::value(volume),
            ),
        })
    }

    /// Places all particles, source by source (ids in that order). Deterministic for given seeds.
    /// Assumes [`Case::validate_fields`] passed (species names resolve). Random boxes are bounded
    /// by [`PlacementLimits::default`].
    pub fn generate_particles(&self) -> Result<Vec<InitialParticle>, CaseError> {
        self.generate_particles_with(&PlacementLimits::default())
    }

    /// [`Case::generate_particles`] with explicit bounds for random boxes. Checks the particle
    /// count (protocol limit), each random box's solid fraction and the available memory before
    /// allocating.
    pub fn generate_particles_with(
        &self,
        limits: &PlacementLimits,
    ) -> Result<Vec<InitialParticle>, CaseError> {
        self.check_particle_count()?;
        self.check_host_memory(super::PLACEMENT_BYTES_PER_PARTICLE, "placing the particles")?;
        let radii = self.radii();
        let rmax = radii.iter().copied().fold(0.0, f64::max);
        let mut grid = PlacementGrid::new(2.0 * rmax);
        let mut in_grid = 0usize;
        let origin = &self.origin.name;
        let mut out: Vec<InitialParticle> = Vec::new();
        let total = self.requested_particles();
        out.try_reserve_exact(total as usize)
            .map_err(|e| CaseError::Memory {
                origin: origin.clone(),
                message: format!(
                    "cannot allocate the list of {total} particles ({}): {e}",
                    super::human_bytes(
                        total.saturating_mul(std::mem::size_of::<InitialParticle>() as u64)
                    )
                ),
            })?;
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
                    shape,
                } => {
                    let classes = self.species_classes(species);
                    let r = self.choice_max_radius(species);
                    let region = match shape {
                        Some(sh) => Some(self.region(&format!("{field}.shape"), sh)?),
                        None => None,
                    };
                    let (n, sites) = super::capacity::lattice(*min, *max, *spacing);
                    let want = count.map_or(sites, |c| c as u64);
                    if want > sites || sites == 0 {
                        return Err(CaseError::Invalid {
                            origin: origin.clone(),
                            field: format!("{field}.count"),
                            message: format!("asks for {want} particles but the lattice {n:?} of spacing {spacing} in the region has {sites} sites"),
                        });
                    }
                    let mut rng = SplitMix64::new(*seed);
                    let amp = jitter * (spacing - 2.0 * r) * 0.5;
                    // Saturating: with a lattice of more than 2^64 sites in a layer, every
                    // wanted site (at most 2^32) lies in the first layer.
                    let layer = n[0].saturating_mul(n[1]);
                    let site = |idx: u64, rng: &mut SplitMix64| -> V3 {
                        let ijk = [idx % n[0], (idx / n[0]) % n[1], idx / layer];
                        std::array::from_fn(|a| {
                            min[a] + spacing * (ijk[a] as f64 + 0.5) + amp * rng.range(-1.0, 1.0)
                        })
                    };
                    let positions: Vec<V3> = match &region {
                        None => (0..want).map(|idx| site(idx, &mut rng)).collect(),
                        Some(region) => {
                            // Sites in lattice order, in chunks tested in parallel, until
                            // `count` lie inside (or the lattice ends).
                            use rayon::prelude::*;
                            let mut inside = Vec::new();
                            let mut idx = 0u64;
                            while idx < sites && (inside.len() as u64) < want {
                                let end = (idx + 65_536).min(sites);
                                let chunk: Vec<V3> =
                                    (idx..end).map(|i| site(i, &mut rng)).collect();
                                let keep: Vec<bool> = chunk
                                    .par_iter()
                                    .map(|&p| region.contains_sphere(p, r))
                                    .collect();
                                inside.extend(
                                    chunk.into_iter().zip(keep).filter(|x| x.1).map(|x| x.0),
                                );
                                idx = end;
                            }
                            inside.truncate(want.min(inside.len() as u64) as usize);
                            if inside.is_empty()
                                || (count.is_some() && (inside.len() as u64) < want)
                            {
                                return Err(CaseError::Invalid {
                                    origin: origin.clone(),
                                    field: format!("{field}.shape"),
                                    message: format!(
                                        "holds {} lattice sites of spacing {spacing} (spheres of radius {r} wholly inside), {}",
                                        inside.len(),
                                        match count {
                                            Some(c) => format!("fewer than the {c} asked for"),
                                            None => "so the source places nothing".to_string(),
                                        }
                                    ),
                                });
                            }
                            inside
                        }
                    };
                    let kinds = shuffled_classes(positions.len(), &classes, *seed);
                    out.extend(
                        positions
                            .into_iter()
                            .zip(kinds)
                            .map(|(p, s)| InitialParticle {
                                species: s,
                                position: p,
                                velocity: *velocity,
                            }),
                    );
                }
                Source::RandomBox {
                    species,
                    min,
                    max,
                    count,
                    seed,
                    velocity,
                    shape,
                } => {
                    let classes = self.species_classes(species);
                    let r = self.choice_max_radius(species);
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
                    let region = match shape {
                        Some(sh) => Some(self.region(&format!("{field}.shape"), sh)?),
                        None => None,
                    };
                    let mut kinds = shuffled_classes(*count, &classes, *seed);
                    // Largest first: random sequential addition packs a mixture far better.
                    kinds.sort_by(|&a, &b| radii[b as usize].total_cmp(&radii[a as usize]));
                    self.random_feasible(&field, &kinds, *min, *max, region.as_ref())?;
                    // Lattice particles placed so far join the grid only now: a case of lattices
                    // alone (millions of particles) never pays for it.
                    for q in out.iter().skip(in_grid) {
                        grid.insert(q.position, radii[q.species as usize]);
                    }
                    let source = RandomSource {
                        field: &field,
                        classes: kinds,
                        region: region.as_ref(),
                        min: *min,
                        max: *max,
                        count: *count,
                        seed: *seed,
                        velocity: *velocity,
                    };
                    self.place_random(&source, limits, &mut grid, &mut out)?;
                    in_grid = out.len();
                }
            }
        }
        Ok(out)
    }

    /// Random sequential addition of one random-box source into `out`, bounded in attempts and
    /// wall time, with a progress line every `limits.progress_every` seconds.
    fn place_random(
        &self,
        src: &RandomSource<'_>,
        limits: &PlacementLimits,
        grid: &mut PlacementGrid,
        out: &mut Vec<InitialParticle>,
    ) -> Result<(), CaseError> {
        let radii = self.radii();
        let mut rng = SplitMix64::new(src.seed);
        let max_attempts = limits
            .attempts_per_particle
            .saturating_mul(src.count as u64)
            .max(100_000);
        let start = Instant::now();
        let max_time = Duration::try_from_secs_f64(limits.max_seconds).unwrap_or(Duration::MAX);
        let every = Duration::try_from_secs_f64(limits.progress_every).unwrap_or(Duration::MAX);
        let mut next_report = every;
        let (mut placed, mut attempts) = (0usize, 0u64);
        while placed < src.count {
            // The clock is read every 1024 attempts (a few microseconds of work).
            if attempts % 1024 == 0 && attempts > 0 {
                let elapsed = start.elapsed();
                let stop = if attempts >= max_attempts {
                    Some(format!(
                        "gave up after {attempts} attempts, {} per particle",
                        limits.attempts_per_particle
                    ))
                } else if elapsed >= max_time {
                    Some(format!(
                        "gave up after {:.1} s and {attempts} attempts",
                        elapsed.as_secs_f64()
                    ))
                } else {
                    None
                };
                if let Some(reason) = stop {
                    return Err(CaseError::Placement {
                        origin: self.origin.name.clone(),
                        field: src.field.to_string(),
                        placed,
                        count: src.count,
                        reason,
                    });
                }
                if elapsed >= next_report {
                    next_report = elapsed.saturating_add(every);
                    tracing::info!(
                        "{}: {}: placed {placed}/{} particles ({attempts} attempts, {:.0} s)",
                        self.origin.name,
                        src.field,
                        src.count,
                        elapsed.as_secs_f64()
                    );
                }
            }
            attempts += 1;
            let species = src.classes[placed];
            let r = radii[species as usize];
            let p: V3 = std::array::from_fn(|a| rng.range(src.min[a] + r, src.max[a] - r));
            if src.region.is_none_or(|g| g.contains_sphere(p, r)) && !grid.overlaps(p, r) {
                grid.insert(p, r);
                out.push(InitialParticle {
                    species,
                    position: p,
                    velocity: src.velocity,
                });
                placed += 1;
            }
        }
        Ok(())
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
            for a in 0..3 {
                let axis = ["x", "y", "z"][a];
                let lo = self.domain.walls.has(super::Face::ALL[2 * a]);
                let hi = self.domain.walls.has(super::Face::ALL[2 * a + 1]);
                if lo && p.position[a] - r < self.domain.min[a] {
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
                if hi && p.position[a] + r > self.domain.max[a] {
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
        Ok(())
    }
}
