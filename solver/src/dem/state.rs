//! DEM state: the contact history (keys and tangential springs), the run constants a DEM worker
//! reads ([`StepContext`]) and the full state in id order ([`SimState`], what checkpoints store).

use crate::case::{Integrator, MaterialTable};
use crate::core::geometry::Mesh;
use crate::core::grid::Grid;
use crate::core::vec3::V3;
use crate::dem::physics::ContactModel;
use serde::{Deserialize, Serialize};

/// Contact history slots per particle. 16 covers the 12 neighbours of the densest packing of
/// equal spheres plus walls; further contacts are still computed but lose their tangential spring
/// between steps, and are counted in [`crate::exec::worker::BackendStats::history_overflows`].
pub const HISTORY_CAP: usize = 16;

/// History partner of an unused slot.
pub const PARTNER_NONE: u32 = u32::MAX;
/// History partner of global mesh triangle 0 (the triangles of all meshes concatenated in mesh
/// order): [`triangle_partner`]. Particle ids, which are their own partner ids, stay below it.
pub const MESH_PARTNER_BASE: u32 = 0x8000_0000;
/// History partner of box wall 0 (walls x_min, x_max, y_min, ...): [`wall_partner`].
pub const WALL_PARTNER_BASE: u32 = 0xFFFF_FFF0;
/// Largest particle id a run may use (ids above name mesh triangles and walls in the history).
pub const MAX_PARTICLE_ID: u32 = MESH_PARTNER_BASE - 1;
/// Most mesh triangles a run may have (all meshes together).
pub const MAX_TRIANGLES: u32 = WALL_PARTNER_BASE - MESH_PARTNER_BASE;

// The history partner encoding, one u32 for every kind of partner, the same on the CPU and the
// GPU (twins of the same names in kernels/src/cuda/physics.cuh): a particle is its id, a box wall
// `WALL_PARTNER_BASE + wall`, a mesh triangle `MESH_PARTNER_BASE + global triangle index`.

/// History partner of box wall `wall` (0..6, `geometry::WallContact::wall`).
#[inline]
pub fn wall_partner(wall: u32) -> u32 {
    WALL_PARTNER_BASE + wall
}

/// History partner of mesh triangle `tri` (global index over all meshes).
#[inline]
pub fn triangle_partner(tri: u32) -> u32 {
    MESH_PARTNER_BASE + tri
}

/// Whether a history partner is a particle (a pair whose spring both sides carry).
#[inline]
pub fn is_particle_partner(partner: u32) -> bool {
    partner < MESH_PARTNER_BASE
}

/// Whether particle `id` keeps the spring of its contact with particle `other` when each pair's
/// spring is kept once (the GPU's pairs-once history, `HistoryMode::Pairs`): the smaller id when
/// the two differ in parity, else the larger. Both sides decide alike, and in any lattice whose
/// ids run along it each particle keeps half its pairs (a pair at id offset +d is kept by the
/// first of the two when d is odd, by the second when d is even).
#[inline]
pub fn owns_pair(id: u32, other: u32) -> bool {
    if (id ^ other) & 1 == 1 {
        id < other
    } else {
        id > other
    }
}

/// The direction along which pairs-once rows with owner keys (the GPU's `DEM_OWNER_KEYS`, one
/// state copy) give each pair to one particle: mostly down, tilted off the axes so that no row
/// of a lattice lies across it. A particle keeps the pairs with the partners that lie further
/// along it than itself (its contacts below): about half of any particle's contacts whatever
/// the ids, 6 of 12 in a close packing (where the ids' [`owns_pair`] gives 1 to 12 to shuffled
/// ids). Twin: `DEM_OWNER_DIR_*` (physics.cuh).
pub const OWNER_DIRECTION: V3 = [0.0123, 0.0347, -1.0];

/// A position's owner key: its coordinate along [`OWNER_DIRECTION`] as an f32 whose bits order
/// as the floats do (a negative float's bits inverted, a positive one's sign bit set). Twin:
/// `owner_key` (physics.cuh).
#[inline]
pub fn owner_key(pos: V3) -> u32 {
    let d = OWNER_DIRECTION;
    let s = pos[0] * d[0] + pos[1] * d[1] + pos[2] * d[2];
    let b = (s as f32).to_bits();
    if b & 0x8000_0000 != 0 {
        !b
    } else {
        b | 0x8000_0000
    }
}

/// Whether particle `id` with owner key `key` keeps the spring of its contact with particle
/// `other` (key `other_key`) in pairs-once rows with owner keys: the smaller key (the particle
/// higher up), equal keys by the ids ([`owns_pair`]). Both sides decide alike. Twin:
/// `owns_pair_keyed` (physics.cuh).
#[inline]
pub fn owns_pair_keyed(key: u32, id: u32, other_key: u32, other: u32) -> bool {
    if key != other_key {
        key < other_key
    } else {
        owns_pair(id, other)
    }
}

/// One contact-history slot: the partner ([`wall_partner`], [`triangle_partner`] or a particle
/// id; [`PARTNER_NONE`] when unused) and the tangential spring.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HistEntry {
    pub partner: u32,
    pub xi: V3,
}

impl HistEntry {
    pub const NONE: HistEntry = HistEntry {
        partner: PARTNER_NONE,
        xi: [0.0; 3],
    };
}

/// Constant inputs of a run, derived from the case by [`crate::exec::sim::Simulation`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepContext {
    pub dt: f64,
    pub gravity: V3,
    pub model: ContactModel,
    pub integrator: Integrator,
    pub reorder_every: u32,
    pub domain_min: V3,
    pub domain_max: V3,
    /// Box faces that are walls: bit f for face f (x_min, x_max, y_min, y_max, z_min, z_max).
    pub walls: u32,
    /// Per species: radius [m], mass [kg], moment of inertia [kg m^2].
    pub species_radius: Vec<f64>,
    pub species_mass: Vec<f64>,
    pub species_inertia: Vec<f64>,
    pub table: MaterialTable,
    pub meshes: Vec<Mesh>,
    /// Deletion regions (the case's `outflows`).
    pub outflows: Vec<crate::case::Outflow>,
}

impl StepContext {
    /// The run constants of `case` with its loaded `meshes`: per-species mass and inertia
    /// (crate::dem::physics::sphere_mass, sphere_inertia), the material table, the box.
    pub fn from_case(case: &crate::case::Case, meshes: Vec<Mesh>) -> StepContext {
        let species_radius: Vec<f64> = case.species.iter().map(|s| s.radius).collect();
        let species_mass: Vec<f64> = case
            .species
            .iter()
            .map(|s| crate::dem::physics::sphere_mass(s.radius, s.density))
            .collect();
        let species_inertia = species_mass
            .iter()
            .zip(&species_radius)
            .map(|(&m, &r)| crate::dem::physics::sphere_inertia(m, r))
            .collect();
        StepContext {
            dt: case.dt,
            gravity: case.gravity,
            model: case.contact_model.model(),
            integrator: case.integrator,
            reorder_every: case.reorder_every,
            domain_min: case.domain.min,
            domain_max: case.domain.max,
            walls: case.domain.walls.mask(),
            species_radius,
            species_mass,
            species_inertia,
            table: case.material_table(),
            meshes,
            outflows: case.outflows.clone(),
        }
    }

    /// Largest particle radius [m].
    pub fn max_radius(&self) -> f64 {
        self.species_radius.iter().copied().fold(0.0, f64::max)
    }

    /// The run's global grid, linearised slowest along `slab_axis`: the domain extended to the
    /// meshes' vertices at t = 0, cells of the largest diameter, one border cell each side.
    pub fn grid(&self, slab_axis: usize) -> Grid {
        self.grid_with_cell(slab_axis, (2.0 * self.max_radius()).max(1e-12))
    }

    /// [`StepContext::grid`] with cells of at least `min_cell` [m] (a GPU's Verlet skin widens
    /// them).
    pub fn grid_with_cell(&self, slab_axis: usize, min_cell: f64) -> Grid {
        let (mut lo, mut hi) = (self.domain_min, self.domain_max);
        for v in self
            .meshes
            .iter()
            .flat_map(|m| m.triangles.iter().flatten())
        {
            for a in 0..3 {
                lo[a] = lo[a].min(v[a]);
                hi[a] = hi[a].max(v[a]);
            }
        }
        Grid::new(lo, hi, min_cell, slab_axis)
    }
}

/// Full simulation state in particle-id order: what a checkpoint stores and what any worker
/// layout can import and export. Entry `k` of every array belongs to particle `id[k]`; ids are
/// strictly ascending but need not be 0..n (sources and deletion regions will leave gaps).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimState {
    pub time: f64,
    pub step: u64,
    /// Particle ids, strictly ascending.
    pub id: Vec<u32>,
    pub species: Vec<u32>,
    pub pos: Vec<V3>,
    pub vel: Vec<V3>,
    pub omega: Vec<V3>,
    /// Contact force and torque of the last step (velocity Verlet needs them).
    pub force: Vec<V3>,
    pub torque: Vec<V3>,
    /// Whether `force`/`torque` belong to the current positions.
    pub forces_valid: bool,
    pub contacts: Vec<u32>,
    /// `history_cap` slots per particle (particle `k`'s at `k * history_cap ..`), used ones
    /// first: [`HISTORY_CAP`] from the CPU, the device's capacity from a GPU. Empty: no
    /// particle has a contact yet (a fresh start does not hold 16 empty slots of 32 B per
    /// particle on the host: 95 GB at 185 M particles).
    pub history: Vec<HistEntry>,
    pub history_cap: usize,
    pub history_overflows: u64,
    /// Particles removed and added since t = 0.
    pub flow: ParticleFlow,
}

/// What outflow regions removed and inflow sources added since t = 0 (all zero in a run with
/// neither).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ParticleFlow {
    /// Particles removed by outflow regions, and their mass [kg].
    pub removed_count: u64,
    pub removed_mass: f64,
    /// The next id an added particle gets: one past every id the run has had (ids are never
    /// reused, so it stays put when the largest id is removed).
    pub next_id: u32,
    /// Per inflow source (case order): its id range and progress.
    pub inflows: Vec<InflowProgress>,
}

/// An inflow source's ids `first_id .. first_id + total` (planned when the run starts, kept by
/// checkpoints so a restart gives the same particles the same ids) and how many it has added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct InflowProgress {
    pub first_id: u32,
    pub total: u64,
    pub inserted: u64,
}

impl SimState {
    /// `n` particles of species 0 at rest at the origin, ids 0..n: a state to be filled in
    /// (downloads and merges write every particle).
    pub fn zeroed(time: f64, step: u64, n: usize) -> Self {
        SimState::new(
            time,
            step,
            vec![0; n],
            vec![[0.0; 3]; n],
            vec![[0.0; 3]; n],
            vec![[0.0; 3]; n],
        )
    }

    /// A state at rest-history with ids 0..n: given kinematics, no contact history, no forces.
    pub fn new(
        time: f64,
        step: u64,
        species: Vec<u32>,
        pos: Vec<V3>,
        vel: Vec<V3>,
        omega: Vec<V3>,
    ) -> Self {
        let n = pos.len();
        SimState {
            time,
            step,
            id: (0..n as u32).collect(),
            species,
            pos,
            vel,
            omega,
            force: vec![[0.0; 3]; n],
            torque: vec![[0.0; 3]; n],
            forces_valid: false,
            contacts: vec![0; n],
            history: Vec::new(),
            history_cap: HISTORY_CAP,
            history_overflows: 0,
            flow: ParticleFlow {
                next_id: n as u32,
                ..Default::default()
            },
        }
    }
}

impl SimState {
    /// Number of particles.
    pub fn len(&self) -> usize {
        self.id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.id.is_empty()
    }

    /// Why this state is not self-consistent, if it is not: array lengths that differ from the id
    /// count, or ids that are not strictly ascending.
    pub fn inconsistency(&self) -> Option<String> {
        let n = self.id.len();
        let lens = [
            ("species", self.species.len()),
            ("pos", self.pos.len()),
            ("vel", self.vel.len()),
            ("omega", self.omega.len()),
            ("force", self.force.len()),
            ("torque", self.torque.len()),
            ("contacts", self.contacts.len()),
        ];
        if let Some((name, len)) = lens.iter().find(|(_, l)| *l != n) {
            return Some(format!("{n} ids but {len} entries of {name}"));
        }
        if self.history_cap == 0
            || !(self.history.is_empty() || self.history.len() == n * self.history_cap)
        {
            return Some(format!(
                "history holds {} slots, expected none or {n} x {}",
                self.history.len(),
                self.history_cap
            ));
        }
        if let Some(w) = self.id.windows(2).find(|w| w[0] >= w[1]) {
            return Some(format!(
                "ids are not strictly ascending ({} then {})",
                w[0], w[1]
            ));
        }
        if let Some(&id) = self.id.last().filter(|&&id| id > MAX_PARTICLE_ID) {
            return Some(format!(
                "particle id {id} is above {MAX_PARTICLE_ID} (higher ids name walls and mesh \
                 triangles in the contact history)"
            ));
        }
        None
    }

    /// The used history slots of the particle at index `k` (id order).
    pub fn history_of(&self, k: usize) -> impl Iterator<Item = &HistEntry> {
        self.history_slots(k)
            .iter()
            .filter(|h| h.partner != PARTNER_NONE)
    }

    /// The `history_cap` slots of the particle at index `k`, or none when the state holds no
    /// history.
    pub fn history_slots(&self, k: usize) -> &[HistEntry] {
        if self.history.is_empty() {
            &[]
        } else {
            &self.history[k * self.history_cap..(k + 1) * self.history_cap]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_one_side_owns_a_pair_and_a_lattice_splits_evenly() {
        for (a, b) in [(0u32, 1u32), (4, 9), (7, 3), (10, 12), (MAX_PARTICLE_ID, 0)] {
            assert_ne!(owns_pair(a, b), owns_pair(b, a), "{a} {b}");
        }
        // The twelve neighbours of an FCC site at id offsets +-d: six are kept by the site.
        let offsets = [1u32, 2, 37, 38, 1369, 1370];
        let i = 100_000u32;
        let kept = offsets
            .iter()
            .map(|&d| u32::from(owns_pair(i, i + d)) + u32::from(owns_pair(i, i - d)))
            .sum::<u32>();
        assert_eq!(kept, 6);
    }

    /// A fresh start holds no history slots on the host, and reads as one without contacts;
    /// a history of the wrong size is still refused.
    #[test]
    fn a_fresh_state_holds_no_history() {
        let n = 3;
        let mut s = SimState::new(
            0.0,
            0,
            vec![0; n],
            vec![[0.0; 3]; n],
            vec![[0.0; 3]; n],
            vec![[0.0; 3]; n],
        );
        assert!(s.history.is_empty());
        assert_eq!(s.inconsistency(), None);
        assert_eq!(s.history_of(2).count(), 0);
        assert!(s.history_slots(1).is_empty());
        s.history = vec![HistEntry::NONE; n * HISTORY_CAP];
        s.history[HISTORY_CAP].partner = 7;
        assert_eq!(s.inconsistency(), None);
        assert_eq!(
            s.history_of(1).map(|h| h.partner).collect::<Vec<_>>(),
            vec![7]
        );
        s.history.pop();
        assert!(s
            .inconsistency()
            .unwrap()
            .contains("expected none or 3 x 16"));
    }
}
