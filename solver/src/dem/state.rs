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

/// Key of an unused history slot.
pub const KEY_NONE: u64 = u64::MAX;
/// Partner kind bits of a history key: a particle (`id`), a box wall (`WALL | wall`) or a mesh
/// triangle (`MESH | mesh << 32 | triangle`).
pub const KEY_WALL: u64 = 1 << 62;
pub const KEY_MESH: u64 = 2 << 62;
pub const KEY_KIND: u64 = 3 << 62;

/// One contact-history slot: the partner key and the tangential spring.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HistEntry {
    pub key: u64,
    pub xi: V3,
}

impl HistEntry {
    pub const NONE: HistEntry = HistEntry {
        key: KEY_NONE,
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
    pub walls: bool,
    /// Per species: radius [m], mass [kg], moment of inertia [kg m^2].
    pub species_radius: Vec<f64>,
    pub species_mass: Vec<f64>,
    pub species_inertia: Vec<f64>,
    pub table: MaterialTable,
    pub meshes: Vec<Mesh>,
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
            walls: case.domain.walls,
            species_radius,
            species_mass,
            species_inertia,
            table: case.material_table(),
            meshes,
        }
    }

    /// Largest particle radius [m].
    pub fn max_radius(&self) -> f64 {
        self.species_radius.iter().copied().fold(0.0, f64::max)
    }

    /// The run's global grid, linearised slowest along `slab_axis`: the domain extended to the
    /// meshes' vertices at t = 0, cells of the largest diameter, one border cell each side.
    pub fn grid(&self, slab_axis: usize) -> Grid {
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
        Grid::new(lo, hi, (2.0 * self.max_radius()).max(1e-12), slab_axis)
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
    /// `HISTORY_CAP` slots per particle.
    pub history: Vec<HistEntry>,
    pub history_overflows: u64,
}

impl SimState {
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
            history: vec![HistEntry::NONE; n * HISTORY_CAP],
            history_overflows: 0,
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
            ("history", self.history.len() / HISTORY_CAP),
        ];
        if let Some((name, len)) = lens.iter().find(|(_, l)| *l != n) {
            return Some(format!("{n} ids but {len} entries of {name}"));
        }
        if self.history.len() != n * HISTORY_CAP {
            return Some(format!(
                "history holds {} slots, expected {n} x {HISTORY_CAP}",
                self.history.len()
            ));
        }
        if let Some(w) = self.id.windows(2).find(|w| w[0] >= w[1]) {
            return Some(format!(
                "ids are not strictly ascending ({} then {})",
                w[0], w[1]
            ));
        }
        None
    }
}
