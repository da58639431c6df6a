//! DEM particles in flight between workers: a whole migrating particle ([`Dem::MIGRATE`]) or a
//! read-only ghost ([`Dem::HALO`]), as plain arrays.

use super::state::{HistEntry, HISTORY_CAP};
use super::Dem;
use crate::core::vec3::V3;
use crate::exec::method::{Field, FieldSet, Method};

/// Particles as arrays; the arrays of fields outside `fields` are empty.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ParticleBatch {
    pub fields: FieldSet,
    pub id: Vec<u32>,
    pub species: Vec<u32>,
    pub pos: Vec<V3>,
    pub vel: Vec<V3>,
    pub omega: Vec<V3>,
    pub force: Vec<V3>,
    pub torque: Vec<V3>,
    pub contacts: Vec<u32>,
    pub hist: Vec<[HistEntry; HISTORY_CAP]>,
}

impl ParticleBatch {
    pub fn new(fields: FieldSet) -> Self {
        ParticleBatch {
            fields,
            ..Default::default()
        }
    }

    pub fn len(&self) -> usize {
        self.id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.id.is_empty()
    }
}

/// The DEM particle arrays a worker keeps, in storage order: the kinematic arrays hold the
/// `own` owned particles followed by the ghosts; the force, contact and history arrays hold the
/// owned particles only.
#[derive(Debug, Clone, Default)]
pub(crate) struct Particles {
    pub id: Vec<u32>,
    pub species: Vec<u32>,
    pub pos: Vec<V3>,
    pub vel: Vec<V3>,
    pub omega: Vec<V3>,
    pub force: Vec<V3>,
    pub torque: Vec<V3>,
    pub contacts: Vec<u32>,
    pub hist: Vec<[HistEntry; HISTORY_CAP]>,
}

impl Particles {
    /// Owned particles.
    pub fn own(&self) -> usize {
        self.force.len()
    }

    /// Drops the ghosts.
    pub fn clear_ghosts(&mut self) {
        let n = self.own();
        self.id.truncate(n);
        self.species.truncate(n);
        self.pos.truncate(n);
        self.vel.truncate(n);
        self.omega.truncate(n);
    }

    /// Appends owned particles (full state); the ghosts must have been cleared.
    pub fn push_owned(&mut self, b: ParticleBatch) {
        assert!(
            b.fields == Dem::MIGRATE && self.id.len() == self.own(),
            "owned particles need the full state and no ghosts"
        );
        self.id.extend(b.id);
        self.species.extend(b.species);
        self.pos.extend(b.pos);
        self.vel.extend(b.vel);
        self.omega.extend(b.omega);
        self.force.extend(b.force);
        self.torque.extend(b.torque);
        self.contacts.extend(b.contacts);
        self.hist.extend(b.hist);
    }

    /// Appends ghosts (after the owned particles).
    pub fn push_ghosts(&mut self, b: &ParticleBatch) {
        debug_assert!(b.fields == Dem::HALO);
        self.id.extend_from_slice(&b.id);
        self.species.extend_from_slice(&b.species);
        self.pos.extend_from_slice(&b.pos);
        self.vel.extend_from_slice(&b.vel);
        self.omega.extend_from_slice(&b.omega);
    }

    /// Copies owned particle `i`'s `fields` into `b`.
    pub fn copy_to(&self, i: usize, b: &mut ParticleBatch) {
        let f = b.fields;
        b.id.push(self.id[i]);
        if f.contains(Field::Species) {
            b.species.push(self.species[i]);
        }
        if f.contains(Field::Position) {
            b.pos.push(self.pos[i]);
        }
        if f.contains(Field::Velocity) {
            b.vel.push(self.vel[i]);
        }
        if f.contains(Field::AngularVelocity) {
            b.omega.push(self.omega[i]);
        }
        if f.contains(Field::Force) {
            b.force.push(self.force[i]);
        }
        if f.contains(Field::Torque) {
            b.torque.push(self.torque[i]);
        }
        if f.contains(Field::Contacts) {
            b.contacts.push(self.contacts[i]);
        }
        if f.contains(Field::History) {
            b.hist.push(self.hist[i]);
        }
    }

    /// Keeps the owned particles with `keep[i]`, in order; the ghosts must have been cleared.
    pub fn retain_owned(&mut self, keep: &[bool]) {
        fn r<T: Copy>(v: &mut Vec<T>, keep: &[bool]) {
            let mut k = 0;
            v.retain(|_| {
                k += 1;
                keep[k - 1]
            });
        }
        r(&mut self.id, keep);
        r(&mut self.species, keep);
        r(&mut self.pos, keep);
        r(&mut self.vel, keep);
        r(&mut self.omega, keep);
        r(&mut self.force, keep);
        r(&mut self.torque, keep);
        r(&mut self.contacts, keep);
        r(&mut self.hist, keep);
    }

    /// Permutes the owned particles: slot `k` takes the particle from slot `order[k]`
    /// (`order` is a permutation of `0..own`); the ghosts keep their slots.
    pub fn permute_owned(&mut self, order: &[u32]) {
        fn p<T: Copy>(v: &mut [T], order: &[u32]) {
            let moved: Vec<T> = order.iter().map(|&k| v[k as usize]).collect();
            v[..moved.len()].copy_from_slice(&moved);
        }
        p(&mut self.id, order);
        p(&mut self.species, order);
        p(&mut self.pos, order);
        p(&mut self.vel, order);
        p(&mut self.omega, order);
        p(&mut self.force, order);
        p(&mut self.torque, order);
        p(&mut self.contacts, order);
        p(&mut self.hist, order);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owned(ids: &[u32]) -> ParticleBatch {
        let n = ids.len();
        let v = |k: usize| [k as f64; 3];
        ParticleBatch {
            fields: Dem::MIGRATE,
            id: ids.to_vec(),
            species: vec![0; n],
            pos: (0..n).map(v).collect(),
            vel: (0..n).map(v).collect(),
            omega: (0..n).map(v).collect(),
            force: (0..n).map(v).collect(),
            torque: (0..n).map(v).collect(),
            contacts: vec![1; n],
            hist: (0..n)
                .map(|k| {
                    let mut h = [HistEntry::NONE; HISTORY_CAP];
                    h[0] = HistEntry {
                        partner: k as u32 + 100,
                        xi: [1.0, 2.0, 3.0],
                    };
                    h
                })
                .collect(),
        }
    }

    #[test]
    fn a_migrant_keeps_its_history() {
        let mut p = Particles::default();
        p.push_owned(owned(&[5, 6, 7]));
        let mut out = ParticleBatch::new(Dem::MIGRATE);
        p.copy_to(1, &mut out);
        p.retain_owned(&[true, false, true]);
        assert_eq!(p.id, vec![5, 7]);
        assert_eq!(p.hist.len(), 2);
        let mut q = Particles::default();
        q.push_owned(out);
        assert_eq!(q.id, vec![6]);
        assert_eq!(q.hist[0][0].partner, 101);
        assert_eq!(q.hist[0][0].xi, [1.0, 2.0, 3.0]);
    }

    #[test]
    fn ghosts_follow_the_owned_and_are_dropped() {
        let mut p = Particles::default();
        p.push_owned(owned(&[1, 2]));
        let mut g = ParticleBatch::new(Dem::HALO);
        Particles { ..p.clone() }.copy_to(0, &mut g);
        assert!(g.hist.is_empty() && g.force.is_empty());
        p.push_ghosts(&g);
        assert_eq!((p.id.len(), p.own()), (3, 2));
        p.permute_owned(&[1, 0]);
        assert_eq!(p.id, vec![2, 1, 1]);
        p.clear_ghosts();
        assert_eq!(p.id, vec![2, 1]);
    }
}
