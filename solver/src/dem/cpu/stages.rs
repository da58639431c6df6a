//! The CPU worker's stages: prepare, forces, integrate; plus energy bookkeeping.

use super::contacts::{Scratch, World};
use super::CpuWorker;
use crate::core::grid::CellList;
use crate::core::vec3::{self, V3};
use crate::dem::physics::{self, ContactState};
use crate::dem::state::{self, HistEntry, HISTORY_CAP};
use crate::exec::worker::Energies;
use rayon::prelude::*;

/// Sums of `forces` for one particle.
struct Out {
    force: V3,
    torque: V3,
    contacts: u32,
    overflow: u32,
}

/// Finds the history slot of a contact: the same partner, or, for a mesh contact that moved to a
/// neighbouring triangle, the first unused slot of the same mesh (`mesh_partners`: the partners
/// of its triangles). Twin of `find_history` in kernels/src/cuda/contact.cu: the entry at
/// `cursor` (after the last one taken) is tried first, as contacts come in the order the history
/// was written; partners are unique within a history, so the scan would find the same entry.
#[inline]
fn find_history(
    old: &[HistEntry; HISTORY_CAP],
    used: u32,
    cursor: usize,
    partner: u32,
    mesh_partners: &std::ops::Range<u32>,
) -> Option<usize> {
    let free = |k: usize| used & (1 << k) == 0;
    if cursor < HISTORY_CAP && free(cursor) && old[cursor].partner == partner {
        return Some(cursor);
    }
    (0..HISTORY_CAP)
        .find(|&k| free(k) && old[k].partner == partner)
        .or_else(|| {
            if mesh_partners.is_empty() {
                return None;
            }
            (0..HISTORY_CAP).find(|&k| free(k) && mesh_partners.contains(&old[k].partner))
        })
}

impl CpuWorker {
    /// Cell hash, sort, cell start over the window; periodic reorder of the owned particles;
    /// places the meshes at time `t`.
    pub(super) fn prepare_stage(&mut self, step: u64, t: f64) {
        let window = self.window.clone();
        self.cells
            .build_window(&self.grid, window.clone(), &self.p.pos, &self.p.id);
        let own = self.p.own();
        if step.is_multiple_of(self.ctx.reorder_every as u64) && own > 0 {
            let order: Vec<u32> = self
                .cells
                .sorted
                .iter()
                .copied()
                .filter(|&k| (k as usize) < own)
                .collect();
            self.p.permute_owned(&order);
            self.cells
                .build_window(&self.grid, window, &self.p.pos, &self.p.id);
        }
        self.meshes
            .update(&self.ctx.meshes, &self.grid, t, self.ctx.max_radius());
    }

    /// Contact forces of the owned particles (gather), new contact history.
    pub(super) fn forces_stage(&mut self, dt: f64) {
        let model = self.ctx.model;
        // Results go straight into the particle arrays (taken out while `world` reads the
        // rest) and the history double buffer: no per-step allocation.
        let n = self.p.own();
        let mut force = std::mem::take(&mut self.p.force);
        let mut torque = std::mem::take(&mut self.p.torque);
        let mut counts = std::mem::take(&mut self.p.contacts);
        let mut hist = std::mem::take(&mut self.hist_next);
        hist.resize(n, [HistEntry::NONE; HISTORY_CAP]);
        let world = World {
            ctx: &self.ctx,
            p: &self.p,
            grid: &self.grid,
            cells: &self.cells,
            meshes: &self.meshes,
        };
        let overflow: u64 = force
            .par_iter_mut()
            .zip(torque.par_iter_mut())
            .zip(counts.par_iter_mut())
            .zip(hist.par_iter_mut())
            .enumerate()
            .map_init(Scratch::default, |scratch, (i, (((f, t), c), h))| {
                let old = &world.p.hist[i];
                let mut out = Out {
                    force: vec3::ZERO,
                    torque: vec3::ZERO,
                    contacts: 0,
                    overflow: 0,
                };
                *h = [HistEntry::NONE; HISTORY_CAP];
                let (mut used, mut cursor) = (0u32, 0usize);
                world.visit_contacts(i, scratch, |c| {
                    let mut state = ContactState::default();
                    if let Some(k) = find_history(old, used, cursor, c.partner, &c.mesh_partners) {
                        used |= 1 << k;
                        cursor = k + 1;
                        state.xi = old[k].xi;
                    }
                    let cf = physics::contact_force(model, c.pair, &c.kin, &mut state, dt);
                    out.force = vec3::add(out.force, cf.force);
                    let t = vec3::cross(vec3::scale(c.kin.n, c.lever), cf.tangential);
                    out.torque = vec3::add(out.torque, vec3::add(t, cf.rolling_torque));
                    let slot = out.contacts as usize - out.overflow as usize;
                    if slot < HISTORY_CAP {
                        h[slot] = HistEntry {
                            partner: c.partner,
                            xi: state.xi,
                        };
                    } else {
                        out.overflow += 1;
                    }
                    out.contacts += 1;
                });
                (*f, *t, *c) = (out.force, out.torque, out.contacts);
                out.overflow as u64
            })
            .sum();
        let contacts = counts.iter().map(|&c| c as u64).sum();
        self.p.force = force;
        self.p.torque = torque;
        self.p.contacts = counts;
        std::mem::swap(&mut self.p.hist, &mut hist);
        self.hist_next = hist;
        self.stats.history_overflows += overflow;
        self.stats.contacts = contacts;
    }

    /// Symplectic Euler: v += (F/m + g) dt; x += v dt; w += T/I dt (`physics::kick`, ...).
    pub(super) fn integrate_euler(&mut self, dt: f64) {
        let ctx = &*self.ctx;
        let g = ctx.gravity;
        let p = &mut self.p;
        let n = p.force.len();
        let (force, torque, species) = (&p.force, &p.torque, &p.species);
        p.pos[..n]
            .par_iter_mut()
            .zip(p.vel[..n].par_iter_mut())
            .zip(p.omega[..n].par_iter_mut())
            .enumerate()
            .for_each(|(i, ((x, v), w))| {
                let s = species[i] as usize;
                *v = physics::kick(*v, g, force[i], ctx.species_mass[s], dt);
                *x = physics::drift(*x, *v, dt);
                *w = physics::spin_kick(*w, torque[i], ctx.species_inertia[s], dt);
            });
    }

    /// Velocity Verlet half kick: v += a dt/2, w += alpha dt/2 with the stored forces.
    pub(super) fn half_kick(&mut self, dt: f64) {
        let ctx = &*self.ctx;
        let (h, g) = (0.5 * dt, ctx.gravity);
        let p = &mut self.p;
        let n = p.force.len();
        let (force, torque, species) = (&p.force, &p.torque, &p.species);
        p.vel[..n]
            .par_iter_mut()
            .zip(p.omega[..n].par_iter_mut())
            .enumerate()
            .for_each(|(i, (v, w))| {
                let s = species[i] as usize;
                *v = physics::kick(*v, g, force[i], ctx.species_mass[s], h);
                *w = physics::spin_kick(*w, torque[i], ctx.species_inertia[s], h);
            });
    }

    /// Velocity Verlet drift: x += v dt.
    pub(super) fn drift(&mut self, dt: f64) {
        let p = &mut self.p;
        let n = p.force.len();
        p.pos[..n]
            .par_iter_mut()
            .zip(p.vel[..n].par_iter())
            .for_each(|(x, v)| *x = physics::drift(*x, *v, dt));
    }

    /// The lowest id of an owned particle with a non-finite state (the run stops there instead
    /// of propagating NaN).
    pub(super) fn first_nonfinite_id(&self) -> Option<u32> {
        let p = &self.p;
        (0..p.own())
            .into_par_iter()
            .filter(|&i| {
                !(vec3::is_finite(p.pos[i])
                    && vec3::is_finite(p.vel[i])
                    && vec3::is_finite(p.omega[i]))
            })
            .map(|i| p.id[i])
            .min()
    }

    /// Kinetic, potential and elastic energy of each owned particle (storage order) at the
    /// current positions (neighbour list rebuilt here over owned particles and ghosts; moving
    /// meshes placed at time `t`: a symplectic Euler step leaves them where the step started,
    /// and a worker rebuilt from this state (restart, GPU) places them at its time). The
    /// coordinator sums them in id order, so the total does not depend on the storage layout or
    /// the decomposition.
    pub(super) fn compute_energies(&self, t: f64) -> Vec<Energies> {
        let ctx = &*self.ctx;
        let mut cells = CellList::default();
        cells.build_window(&self.grid, self.window.clone(), &self.p.pos, &self.p.id);
        let placed;
        let meshes = if ctx.meshes.iter().any(|m| !m.motion.is_fixed()) {
            let mut now = self.meshes.clone();
            now.update(&ctx.meshes, &self.grid, t, ctx.max_radius());
            placed = now;
            &placed
        } else {
            &self.meshes
        };
        let world = World {
            ctx,
            p: &self.p,
            grid: &self.grid,
            cells: &cells,
            meshes,
        };
        (0..self.p.own())
            .into_par_iter()
            .map_init(Scratch::default, |scratch, i| {
                let s = self.p.species[i] as usize;
                let (m, inertia) = (ctx.species_mass[s], ctx.species_inertia[s]);
                let mut e = Energies {
                    kinetic_translation: 0.5 * m * vec3::norm2(self.p.vel[i]),
                    kinetic_rotation: 0.5 * inertia * vec3::norm2(self.p.omega[i]),
                    potential: -m * vec3::dot(ctx.gravity, self.p.pos[i]),
                    elastic: 0.0,
                };
                let hist = &self.p.hist[i];
                world.visit_contacts(i, scratch, |c| {
                    let xi = hist
                        .iter()
                        .find(|h| h.partner == c.partner)
                        .map(|h| h.xi)
                        .unwrap_or(vec3::ZERO);
                    let en = physics::contact_elastic_energy(
                        ctx.model,
                        c.pair,
                        c.kin.r_eff,
                        c.kin.delta,
                        &ContactState { xi },
                    );
                    // A particle pair is seen from both sides.
                    e.elastic += if state::is_particle_partner(c.partner) {
                        0.5 * en
                    } else {
                        en
                    };
                });
                e
            })
            .collect()
    }
}
