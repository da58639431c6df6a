//! Contact detection for one particle: particle-particle through the cell list, box walls, and
//! mesh triangles through the grid bins. Produces the kinematics of every contact in a fixed
//! order (neighbour cells z/y/x ascending, particles by id within a cell, then walls, then
//! meshes), so the caller's sums are the same for every thread count.

use crate::core::geometry::{
    box_wall_contacts, closest_point_on_triangle, MeshWorld, TriRegion, WallContact,
};
use crate::core::grid::{CellList, Grid};
use crate::core::vec3::{self, V3};
use crate::dem::exchange::Particles;
use crate::dem::physics::{self, ContactKinematics, MaterialPair};
use crate::dem::state::{self, StepContext};

/// Everything the contact search reads, borrowed for one stage.
pub(super) struct World<'a> {
    pub ctx: &'a StepContext,
    pub p: &'a Particles,
    pub grid: &'a Grid,
    pub cells: &'a CellList,
    pub meshes: &'a MeshWorld,
}

/// One contact of particle `i`.
pub(super) struct Contact<'a> {
    /// History partner (particle id, wall or mesh triangle; `state::wall_partner`, ...).
    pub partner: u32,
    /// For mesh contacts: the partners of the mesh's triangles (history falls back to any
    /// entry of the same mesh); empty otherwise.
    pub mesh_partners: std::ops::Range<u32>,
    pub kin: ContactKinematics,
    pub pair: &'a MaterialPair,
    /// Lever arm from the centre of `i` to the contact point along `kin.n` [m].
    pub lever: f64,
}

/// Per-thread scratch space.
#[derive(Default)]
pub(super) struct Scratch {
    candidates: Vec<u32>,
    hits: Vec<MeshHit>,
    walls: Vec<WallContact>,
}

#[derive(Clone, Copy)]
struct MeshHit {
    mesh: u32,
    tri: u32,
    region: TriRegion,
    q: V3,
    n: V3,
    dist: f64,
}

impl World<'_> {
    /// Calls `f` for every contact of the particle in storage slot `i`.
    pub fn visit_contacts(&self, i: usize, scratch: &mut Scratch, mut f: impl FnMut(Contact)) {
        let (ctx, p) = (self.ctx, self.p);
        let si = p.species[i] as usize;
        let (pi, vi, wi) = (p.pos[i], p.vel[i], p.omega[i]);
        let ri = ctx.species_radius[si];
        let mi = ctx.species_mass[si];
        let ii = ctx.species_inertia[si];
        let c = self.grid.cell_coords(pi);

        // Particle-particle.
        let mut neigh = [0u32; 27];
        let nc = self.grid.neighbour_cells(c, &mut neigh);
        for &cell in &neigh[..nc] {
            for k in self.cells.cell_range(cell) {
                let j = self.cells.sorted[k] as usize;
                if j == i {
                    continue;
                }
                let sj = p.species[j] as usize;
                let rj = ctx.species_radius[sj];
                let d = vec3::sub(p.pos[j], pi);
                let dist2 = vec3::norm2(d);
                let rsum = ri + rj;
                if dist2 >= rsum * rsum {
                    continue;
                }
                let dist = dist2.sqrt();
                let n = if dist > 0.0 {
                    vec3::scale(d, 1.0 / dist)
                } else if p.id[i] < p.id[j] {
                    [0.0, 0.0, 1.0]
                } else {
                    [0.0, 0.0, -1.0]
                };
                let wj = p.omega[j];
                let (mj, ij) = (ctx.species_mass[sj], ctx.species_inertia[sj]);
                let kin = ContactKinematics {
                    n,
                    delta: rsum - dist,
                    v_rel: physics::particle_contact_velocity(vi, wi, ri, p.vel[j], wj, rj, n),
                    omega_rel: vec3::sub(wi, wj),
                    r_eff: physics::effective_radius(ri, rj),
                    m_eff: physics::effective_mass(mi, mj),
                    i_eff: physics::effective_inertia(ii, ij),
                };
                f(Contact {
                    partner: p.id[j],
                    mesh_partners: 0..0,
                    kin,
                    pair: ctx.table.particle_pair(si, sj),
                    lever: ri,
                });
            }
        }

        // Box walls.
        if ctx.walls != 0 {
            scratch.walls.clear();
            box_wall_contacts(
                pi,
                ri,
                ctx.domain_min,
                ctx.domain_max,
                ctx.walls,
                &mut scratch.walls,
            );
            for w in &scratch.walls {
                let kin = ContactKinematics {
                    n: w.n,
                    delta: w.delta,
                    v_rel: physics::surface_contact_velocity(vi, wi, ri, w.n, vec3::ZERO),
                    omega_rel: wi,
                    r_eff: ri,
                    m_eff: mi,
                    i_eff: ii,
                };
                f(Contact {
                    partner: state::wall_partner(w.wall),
                    mesh_partners: 0..0,
                    kin,
                    pair: ctx.table.wall_pair(si, w.wall as usize),
                    lever: ri,
                });
            }
        }

        // Meshes.
        if self.meshes.is_empty() {
            return;
        }
        scratch.candidates.clear();
        self.meshes
            .candidates(self.grid.cell_index(c), &mut scratch.candidates);
        scratch.hits.clear();
        for &g in &scratch.candidates {
            let t = &self.meshes.world[g as usize];
            let (q, region) = closest_point_on_triangle(pi, t[0], t[1], t[2]);
            let d = vec3::sub(q, pi);
            let dist2 = vec3::norm2(d);
            if dist2 >= ri * ri {
                continue;
            }
            let dist = dist2.sqrt();
            let n = if dist > 0.0 {
                vec3::scale(d, 1.0 / dist)
            } else {
                vec3::normalize_or_zero(vec3::cross(vec3::sub(t[1], t[0]), vec3::sub(t[2], t[0])))
            };
            scratch.hits.push(MeshHit {
                mesh: self.meshes.tri_mesh[g as usize],
                tri: g,
                region,
                q,
                n,
                dist,
            });
        }
        // Per mesh: if any face is touched, edge/vertex hits are the same surface seen from a
        // neighbouring triangle and are dropped; hits whose normals coincide (the shared edge or
        // vertex of adjacent triangles, or coplanar faces) count once.
        let hits = &scratch.hits;
        for (h_idx, h) in hits.iter().enumerate() {
            let mesh_has_face = hits
                .iter()
                .any(|o| o.mesh == h.mesh && o.region == TriRegion::Face);
            if mesh_has_face && h.region != TriRegion::Face {
                continue;
            }
            let duplicate = hits[..h_idx].iter().any(|o| {
                o.mesh == h.mesh
                    && (o.region == TriRegion::Face || !mesh_has_face)
                    && vec3::dot(o.n, h.n) > 1.0 - 1e-9
            });
            if duplicate {
                continue;
            }
            let tr = &self.meshes.transforms[h.mesh as usize];
            let kin = ContactKinematics {
                n: h.n,
                delta: ri - h.dist,
                v_rel: physics::surface_contact_velocity(vi, wi, ri, h.n, tr.wall_velocity(h.q)),
                omega_rel: vec3::sub(wi, tr.omega),
                r_eff: ri,
                m_eff: mi,
                i_eff: ii,
            };
            let material = ctx.meshes[h.mesh as usize].material;
            let tris = self.meshes.triangles_of(h.mesh);
            f(Contact {
                partner: state::triangle_partner(h.tri),
                mesh_partners: state::triangle_partner(tris.start)
                    ..state::triangle_partner(tris.end),
                kin,
                pair: ctx.table.wall_pair(si, material),
                lever: ri,
            });
        }
    }
}
