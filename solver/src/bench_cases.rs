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
    dense_pack_ordered(n, model, IdOrder::Cells)
}

/// The order a [`dense_pack`]'s particles (ids 0..) take. Physics does not see it; the GPU's
/// pairs-once contact history does: it keeps each pair's spring with one particle chosen from
/// the two ids (`state::owns_pair`), and how many pairs a particle keeps decides the rows it
/// needs (`CudaOptions::hist_cap`). Bulk sites keep 5 or 7 in `Cells`, 6 in `Raster`, and
/// from 1 to about 12 in `Random` (session 35, bench/results/dem_gpu.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdOrder {
    /// Lattice cell by cell (x fastest, then y, z), the four sites of a cell in turn.
    Cells,
    /// Site by site along x, then y, then z (a lattice source's rows).
    Raster,
    /// Shuffled (a seeded permutation): ids unrelated to positions, as in a poured bed.
    Random,
}

impl IdOrder {
    /// `cells`, `raster` or `random`.
    pub fn parse(s: &str) -> Option<IdOrder> {
        match s {
            "cells" => Some(IdOrder::Cells),
            "raster" => Some(IdOrder::Raster),
            "random" => Some(IdOrder::Random),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            IdOrder::Cells => "cells",
            IdOrder::Raster => "raster",
            IdOrder::Random => "random",
        }
    }
}

/// [`dense_pack`] with its particles in `order` (the same positions).
pub fn dense_pack_ordered(n: usize, model: BenchModel, order: IdOrder) -> DensePack {
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
    // Each site's lattice coordinates in half cells (x, y, z), for the raster order.
    let mut sites: Vec<[usize; 3]> = Vec::with_capacity(4 * m * m * m);
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
                    sites.push(std::array::from_fn(|a| 2 * ijk[a] + (2.0 * o[a]) as usize));
                }
            }
        }
    }
    match order {
        IdOrder::Cells => {}
        IdOrder::Raster => {
            let mut by: Vec<usize> = (0..positions.len()).collect();
            by.sort_unstable_by_key(|&q| (sites[q][2], sites[q][1], sites[q][0]));
            positions = by.into_iter().map(|q| positions[q]).collect();
        }
        IdOrder::Random => {
            // Fisher-Yates with the pack's generator, after the jitter: the same positions.
            for q in (1..positions.len()).rev() {
                let r = (rng.next_u64() % (q as u64 + 1)) as usize;
                positions.swap(q, r);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dem::state::{owner_key, owns_pair, owns_pair_keyed};

    /// Entries each particle of a dense pack keeps in a pairs-once row (`state::owns_pair`):
    /// the touching particles it owns the pair with, and its walls.
    fn row_lengths(p: &DensePack) -> Vec<usize> {
        row_lengths_by(p, &|i, j| owns_pair(i as u32, j as u32))
    }

    /// [`row_lengths`] with the pair (i, j) kept by i where `owns(i, j)`.
    fn row_lengths_by(p: &DensePack, owns: &dyn Fn(usize, usize) -> bool) -> Vec<usize> {
        let r = p.case.species[0].radius;
        let (lo, hi) = (p.case.domain.min, p.case.domain.max);
        let x = &p.positions;
        (0..x.len())
            .map(|i| {
                let pairs = (0..x.len())
                    .filter(|&j| {
                        let d2: f64 = (0..3).map(|a| (x[i][a] - x[j][a]).powi(2)).sum();
                        j != i && d2 < 4.0 * r * r && owns(i, j)
                    })
                    .count();
                let walls = (0..3)
                    .map(|a| usize::from(x[i][a] - lo[a] < r) + usize::from(hi[a] - x[i][a] < r))
                    .sum::<usize>();
                pairs + walls
            })
            .collect()
    }

    /// The orders hold the same positions; in raster order every site keeps at most 6 entries
    /// (rows of 6 hold the bed), cell by cell a third keep 7, shuffled some keep 10 or more.
    #[test]
    fn id_orders_decide_the_pairs_once_rows() {
        let model = BenchModel::LinearFriction;
        let packs: Vec<DensePack> = [IdOrder::Cells, IdOrder::Raster, IdOrder::Random]
            .into_iter()
            .map(|o| dense_pack_ordered(2000, model, o))
            .collect();
        let key = |p: &DensePack| {
            let mut v: Vec<[u64; 3]> = p.positions.iter().map(|q| q.map(f64::to_bits)).collect();
            v.sort_unstable();
            v
        };
        assert_eq!(key(&packs[0]), key(&packs[1]));
        assert_eq!(key(&packs[0]), key(&packs[2]));
        assert_ne!(packs[0].positions, packs[1].positions);
        let longest = |p: &DensePack| row_lengths(p).into_iter().max().unwrap_or(0);
        let share_over_6 = |p: &DensePack| {
            let l = row_lengths(p);
            l.iter().filter(|&&k| k > 6).count() as f64 / l.len() as f64
        };
        assert_eq!(longest(&packs[1]), 6, "raster");
        assert_eq!(longest(&packs[0]), 7, "cells");
        assert!(share_over_6(&packs[0]) > 0.25, "cells");
        assert!(longest(&packs[2]) >= 10, "random");
        assert_eq!(IdOrder::parse("raster"), Some(IdOrder::Raster));
        assert_eq!(
            IdOrder::parse(IdOrder::Random.name()),
            Some(IdOrder::Random)
        );
        assert_eq!(IdOrder::parse("z"), None);
    }

    /// Owner keys (`state::owns_pair_keyed`, the GPU's rows with one state copy) decide by
    /// position: in every id order the bulk keeps 6 entries, and only the layer under the lid
    /// (its 6 pairs below and the lid) keeps 7.
    #[test]
    fn owner_keys_keep_six_whatever_the_ids() {
        let model = BenchModel::LinearFriction;
        for order in [IdOrder::Cells, IdOrder::Raster, IdOrder::Random] {
            let p = dense_pack_ordered(2000, model, order);
            let keys: Vec<u32> = p.positions.iter().map(|&x| owner_key(x)).collect();
            let l = row_lengths_by(&p, &|i, j| {
                owns_pair_keyed(keys[i], i as u32, keys[j], j as u32)
            });
            let r = p.case.species[0].radius;
            let top = p.case.domain.max[2];
            let over: Vec<usize> = (0..l.len()).filter(|&i| l[i] > 6).collect();
            assert!(l.iter().all(|&k| k <= 7), "{}", order.name());
            assert!(
                over.iter().all(|&i| top - p.positions[i][2] < r),
                "{}: only the top layer keeps 7",
                order.name()
            );
            let bulk = (0..l.len())
                .filter(|&i| {
                    (0..3).all(|a| {
                        p.positions[i][a] - p.case.domain.min[a] > 2.5 * r
                            && p.case.domain.max[a] - p.positions[i][a] > 2.5 * r
                    })
                })
                .collect::<Vec<_>>();
            assert!(!bulk.is_empty());
            assert!(bulk.iter().all(|&i| l[i] == 6), "{}", order.name());
        }
        // The keys order as the coordinate along the owner direction does.
        let a = owner_key([0.0, 0.0, 1.0]);
        let b = owner_key([0.0, 0.0, 0.0]);
        let c = owner_key([0.0, 0.0, -1.0]);
        assert!(a < b && b < c);
        assert!(owns_pair_keyed(a, 7, c, 3) && !owns_pair_keyed(c, 3, a, 7));
        assert_eq!(owns_pair_keyed(b, 4, b, 5), owns_pair(4, 5));
    }
}
