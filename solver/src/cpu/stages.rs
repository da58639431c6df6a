//! The CPU step pipeline: prepare, collide, integrate; plus energy bookkeeping.

use super::contacts::{Scratch, World};
use super::CpuBackend;
use crate::backend::{Energies, HistEntry, StepError, HISTORY_CAP, KEY_KIND, KEY_MESH};
use crate::case::Integrator;
use crate::grid::CellList;
use crate::physics::{self, ContactState};
use crate::vec3::{self, V3};
use rayon::prelude::*;
use std::time::Instant;

/// Sums of `collide` for one particle.
struct Out {
    force: V3,
    torque: V3,
    contacts: u32,
    overflow: u32,
}

/// Finds the history slot of a contact: the same partner key, or, for a mesh contact that moved
/// to a neighbouring triangle, the first unused slot of the same mesh.
#[inline]
fn find_history(
    old: &[HistEntry; HISTORY_CAP],
    used: u32,
    key: u64,
    mesh: Option<u32>,
) -> Option<usize> {
    let free = |k: usize| used & (1 << k) == 0;
    (0..HISTORY_CAP)
        .find(|&k| free(k) && old[k].key == key)
        .or_else(|| {
            let m = mesh?;
            (0..HISTORY_CAP).find(|&k| {
                free(k)
                    && old[k].key & KEY_KIND == KEY_MESH
                    && ((old[k].key >> 32) & 0x3FFF_FFFF) as u32 == m
            })
        })
}

impl CpuBackend {
    pub(super) fn one_step(&mut self) -> Result<(), StepError> {
        match self.ctx.integrator {
            Integrator::SymplecticEuler => {
                self.prepare(self.time);
                self.collide();
                let t0 = Instant::now();
                self.integrate_euler();
                self.timers.integrate += t0.elapsed();
            }
            Integrator::VelocityVerlet => {
                if !self.forces_valid {
                    self.prepare(self.time);
                    self.collide();
                }
                let t0 = Instant::now();
                self.half_kick();
                self.drift();
                self.timers.integrate += t0.elapsed();
                self.prepare(self.time + self.ctx.dt);
                self.collide();
                let t0 = Instant::now();
                self.half_kick();
                self.timers.integrate += t0.elapsed();
            }
        }
        self.time += self.ctx.dt;
        self.step += 1;
        self.timers.steps += 1;
        self.check_finite()
    }

    /// Cell hash, sort, cell start; places the meshes at time `t`; periodic reorder.
    fn prepare(&mut self, t: f64) {
        let t0 = Instant::now();
        self.cells.build(&self.grid, &self.p.pos, &self.p.id);
        let due = self.step.is_multiple_of(self.ctx.reorder_every as u64);
        if due && !self.p.pos.is_empty() {
            let order = std::mem::take(&mut self.cells.sorted);
            self.p.permute(&order);
            for (slot, &id) in self.p.id.iter().enumerate() {
                self.slot_of_id[id as usize] = slot as u32;
            }
            self.cells.build(&self.grid, &self.p.pos, &self.p.id);
        }
        let reach = self.ctx.species_radius.iter().copied().fold(0.0, f64::max);
        self.meshes.update(&self.ctx.meshes, &self.grid, t, reach);
        self.timers.prepare += t0.elapsed();
    }

    /// Contact forces (gather), new contact history.
    fn collide(&mut self) {
        let t0 = Instant::now();
        let (model, dt) = (self.ctx.model, self.ctx.dt);
        // Results go straight into the particle arrays (taken out while `world` reads the
        // rest) and the history double buffer: no per-step allocation.
        let n = self.p.pos.len();
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
                let mut used = 0u32;
                world.visit_contacts(i, scratch, |c| {
                    let mut state = ContactState::default();
                    if let Some(k) = find_history(old, used, c.key, c.mesh) {
                        used |= 1 << k;
                        state.xi = old[k].xi;
                    }
                    let cf = physics::contact_force(model, c.pair, &c.kin, &mut state, dt);
                    out.force = vec3::add(out.force, cf.force);
                    let t = vec3::cross(vec3::scale(c.kin.n, c.lever), cf.tangential);
                    out.torque = vec3::add(out.torque, vec3::add(t, cf.rolling_torque));
                    let slot = out.contacts as usize - out.overflow as usize;
                    if slot < HISTORY_CAP {
                        h[slot] = HistEntry {
                            key: c.key,
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
        self.forces_valid = true;
        self.timers.collide += t0.elapsed();
    }

    /// Symplectic Euler: v += (F/m + g) dt; x += v dt; w += T/I dt.
    fn integrate_euler(&mut self) {
        let ctx = &*self.ctx;
        let (dt, g) = (ctx.dt, ctx.gravity);
        let p = &mut self.p;
        let (force, torque, species) = (&p.force, &p.torque, &p.species);
        p.pos
            .par_iter_mut()
            .zip(p.vel.par_iter_mut())
            .zip(p.omega.par_iter_mut())
            .enumerate()
            .for_each(|(i, ((x, v), w))| {
                let s = species[i] as usize;
                let a = vec3::axpy(g, force[i], 1.0 / ctx.species_mass[s]);
                *v = vec3::axpy(*v, a, dt);
                *x = vec3::axpy(*x, *v, dt);
                *w = vec3::axpy(*w, torque[i], dt / ctx.species_inertia[s]);
            });
    }

    /// Velocity Verlet half kick: v += a dt/2, w += alpha dt/2 with the stored forces.
    fn half_kick(&mut self) {
        let ctx = &*self.ctx;
        let (h, g) = (0.5 * ctx.dt, ctx.gravity);
        let p = &mut self.p;
        let (force, torque, species) = (&p.force, &p.torque, &p.species);
        p.vel
            .par_iter_mut()
            .zip(p.omega.par_iter_mut())
            .enumerate()
            .for_each(|(i, (v, w))| {
                let s = species[i] as usize;
                *v = vec3::axpy(*v, vec3::axpy(g, force[i], 1.0 / ctx.species_mass[s]), h);
                *w = vec3::axpy(*w, torque[i], h / ctx.species_inertia[s]);
            });
    }

    /// Velocity Verlet drift: x += v dt.
    fn drift(&mut self) {
        let dt = self.ctx.dt;
        let p = &mut self.p;
        p.pos
            .par_iter_mut()
            .zip(p.vel.par_iter())
            .for_each(|(x, v)| *x = vec3::axpy(*x, *v, dt));
    }

    /// Stops the run at the first non-finite particle (lowest id), instead of propagating NaN.
    fn check_finite(&self) -> Result<(), StepError> {
        let p = &self.p;
        let bad = (0..p.pos.len())
            .into_par_iter()
            .filter(|&i| {
                !(vec3::is_finite(p.pos[i])
                    && vec3::is_finite(p.vel[i])
                    && vec3::is_finite(p.omega[i]))
            })
            .map(|i| p.id[i])
            .min();
        match bad {
            Some(id) => Err(StepError::NonFinite {
                id,
                step: self.step,
                time: self.time,
            }),
            None => Ok(()),
        }
    }

    /// Kinetic, potential and elastic energy at the current positions (neighbour list rebuilt
    /// here; moving meshes placed at the current time: a symplectic Euler step leaves them where
    /// the step started, and a backend rebuilt from this state (restart, GPU) places them at its
    /// time). Summed in id order, so the value does not depend on the storage layout.
    pub(super) fn compute_energies(&self) -> Energies {
        let ctx = &*self.ctx;
        let mut cells = CellList::default();
        cells.build(&self.grid, &self.p.pos, &self.p.id);
        let placed;
        let meshes = if ctx.meshes.iter().any(|m| !m.motion.is_fixed()) {
            let reach = ctx.species_radius.iter().copied().fold(0.0, f64::max);
            let mut now = self.meshes.clone();
            now.update(&ctx.meshes, &self.grid, self.time, reach);
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
        let per: Vec<Energies> = (0..self.p.pos.len())
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
                        .find(|h| h.key == c.key)
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
                    e.elastic += if c.key & KEY_KIND == 0 { 0.5 * en } else { en };
                });
                e
            })
            .collect();
        let mut total = Energies::default();
        for &slot in &self.slot_of_id {
            let e = per[slot as usize];
            total.kinetic_translation += e.kinetic_translation;
            total.kinetic_rotation += e.kinetic_rotation;
            total.potential += e.potential;
            total.elastic += e.elastic;
        }
        total
    }
}
