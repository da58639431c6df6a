//! What the ranks of an SPH run over MPI send rank 0: their parts of a frame (posted without
//! waiting, placed by id as they arrive) and of a state (gathered for a checkpoint or VTK). The
//! GPU ranks ([`super::cuda::SphRank`]) and the CPU ranks ([`super::ranks::SphCpuRank`]) send
//! the same parts.

use crate::core::vec3::V3;
use crate::exec::comm::{decode, take_posts, Comm};
use crate::sph::cpu::SphState;

fn as_bytes<T: Copy>(v: &[T]) -> &[u8] {
    // SAFETY: only used with f32 and u32 (no padding, every bit pattern valid as bytes); the
    // length covers exactly the slice's memory.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}

/// Particles of one GPU (or rank), by id: a part of a state.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct OwnedParticles {
    pub id: Vec<u32>,
    pub pos: Vec<V3>,
    pub vel: Vec<V3>,
    pub rho: Vec<f64>,
    /// The Verlet integrator's velocities and densities one step back, by entry (empty: none,
    /// the symplectic scheme or before a Verlet run's first step).
    pub prev_vel: Vec<V3>,
    pub prev_rho: Vec<f64>,
}

impl OwnedParticles {
    /// Puts these particles into `s` at their ids (boundary particles keep zero velocity), and
    /// their state one step back when they have it.
    pub fn write_into(&self, s: &mut SphState) {
        for (k, &id) in self.id.iter().enumerate() {
            let i = id as usize;
            s.pos[i] = self.pos[k];
            s.vel[i] = self.vel[k];
            s.rho[i] = self.rho[k];
        }
        if self.prev_rho.len() == self.id.len() && !self.id.is_empty() {
            let n = s.pos.len();
            let back = s.prev.get_or_insert_with(|| crate::sph::cpu::PrevState {
                vel: vec![[0.0; 3]; n],
                rho: vec![0.0; n],
            });
            for (k, &id) in self.id.iter().enumerate() {
                back.vel[id as usize] = self.prev_vel[k];
                back.rho[id as usize] = self.prev_rho[k];
            }
        }
    }
}

/// One rank's part of a frame: its particles' ids and their f32 values as a frame holds them (the GPU's
/// `sph_pack` makes them on the device, the CPU ranks on the host).
#[derive(Debug, Default, PartialEq)]
pub(crate) struct FramePart {
    pub id: Vec<u32>,
    pub pos: Vec<f32>,
    pub vel: Vec<f32>,
    pub rho: Vec<f32>,
    pub press: Vec<f32>,
}

impl FramePart {
    /// Raw bytes for another rank of the same binary: the count (u64), then the arrays as they
    /// are in memory (a frame part is hundreds of megabytes at large sizes: no per-element
    /// encoding).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(8 + 36 * self.id.len());
        b.extend((self.id.len() as u64).to_le_bytes());
        b.extend_from_slice(as_bytes(&self.id));
        for a in [&self.pos, &self.vel, &self.rho, &self.press] {
            b.extend_from_slice(as_bytes(a));
        }
        b
    }

    /// The inverse of [`FramePart::to_bytes`]; `None` when the bytes do not hold one.
    pub fn from_bytes(b: &[u8]) -> Option<FramePart> {
        let n = u64::from_le_bytes(b.get(..8)?.try_into().ok()?) as usize;
        if b.len() != 8 + n.checked_mul(36)? {
            return None;
        }
        let words = |from: usize, count: usize| -> Vec<[u8; 4]> {
            b[from..from + 4 * count]
                .chunks_exact(4)
                .map(|c| [c[0], c[1], c[2], c[3]])
                .collect()
        };
        let floats = |from: usize, count: usize| -> Vec<f32> {
            words(from, count)
                .into_iter()
                .map(f32::from_ne_bytes)
                .collect()
        };
        Some(FramePart {
            id: words(8, n).into_iter().map(u32::from_ne_bytes).collect(),
            pos: floats(8 + 4 * n, 3 * n),
            vel: floats(8 + 16 * n, 3 * n),
            rho: floats(8 + 28 * n, n),
            press: floats(8 + 32 * n, n),
        })
    }

    /// Places the part by id into the four frame arrays (null: not wanted).
    ///
    /// # Safety
    /// Each non-null target holds one element per particle ([f32; 3] or f32) of the run, and
    /// every id is below that count.
    pub unsafe fn place(&self, targets: [*mut u8; 4]) {
        for (k, &id) in self.id.iter().enumerate() {
            let i = id as usize;
            let put = |t: *mut u8, width: usize, src: &[f32]| {
                if !t.is_null() {
                    // SAFETY: the caller's contract: `t` holds `width` f32 per particle.
                    let dst = unsafe { (t as *mut f32).add(width * i) };
                    for c in 0..width {
                        // SAFETY: as above; f32 needs no alignment beyond the segment's.
                        unsafe { dst.add(c).write_unaligned(src[width * k + c]) };
                    }
                }
            };
            put(targets[0], 3, &self.pos);
            put(targets[1], 3, &self.vel);
            put(targets[2], 1, &self.rho);
            put(targets[3], 1, &self.press);
        }
    }
}

/// Rank 0's frame while the other ranks' parts are on their way.
pub(crate) struct PendingFrame {
    targets: [*mut u8; 4],
    waiting: Vec<usize>,
    particles: usize,
}

impl PendingFrame {
    /// A frame of `particles` whose parts from ranks 1.. are still to come.
    pub fn new(targets: [*mut u8; 4], ranks: usize, particles: usize) -> PendingFrame {
        PendingFrame {
            targets,
            waiting: (1..ranks).collect(),
            particles,
        }
    }
}

/// Places what the ranks of the pending frame posted (all of them, waiting, with `wait`); true
/// once the frame is complete (or none is pending).
///
/// # Safety
/// The pending frame's targets are still valid as [`FramePart::place`] needs them.
pub(crate) unsafe fn take_parts(
    comm: &dyn Comm,
    pending: &mut Option<PendingFrame>,
    wait: bool,
) -> bool {
    let Some(p) = pending else {
        return true;
    };
    let (targets, n) = (p.targets, p.particles);
    let done = take_posts(comm, &mut p.waiting, wait, |bytes| {
        let part = FramePart::from_bytes(&bytes);
        if let Some(part) = part.filter(|p| p.id.iter().all(|&id| (id as usize) < n)) {
            // SAFETY: the caller's contract: the targets hold the run's particles, and every
            // id is below their count (checked).
            unsafe { part.place(targets) };
        } else {
            tracing::error!("a rank sent a frame part that is not one of this run's");
        }
    });
    if done {
        *pending = None;
    }
    done
}

/// Rank 0: the state of `kind.len()` particles from every rank's [`OwnedParticles`] (gathered
/// bytes); an error naming what is wrong when the parts do not hold every particle exactly once.
pub(crate) fn assemble_state(
    parts: Vec<Vec<u8>>,
    time: f64,
    step: u64,
    kind: &[u32],
) -> Result<SphState, String> {
    let mut st = SphState::zeroed(time, step, kind.to_vec());
    let mut seen = vec![false; kind.len()];
    for bytes in parts {
        let part: OwnedParticles = decode(&bytes, "a rank's particles");
        for &id in &part.id {
            match seen.get_mut(id as usize) {
                Some(s) if !*s => *s = true,
                Some(_) => {
                    return Err(format!("particle {id} is held by two ranks at step {step}"))
                }
                None => {
                    return Err(format!(
                        "a rank holds particle {id} of a run of {}",
                        kind.len()
                    ))
                }
            }
        }
        part.write_into(&mut st);
    }
    let held = seen.iter().filter(|&&s| s).count();
    if held != kind.len() {
        return Err(format!(
            "the ranks hold {held} particles of {} at step {step}",
            kind.len()
        ));
    }
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::comm::encode;

    #[test]
    fn a_frame_part_crosses_as_raw_bytes() {
        let p = FramePart {
            id: vec![7, 2],
            pos: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            vel: vec![-1.0, 0.5, 0.25, 8.0, 9.0, 10.0],
            rho: vec![1000.0, 1001.5],
            press: vec![0.0, 12.5],
        };
        let b = p.to_bytes();
        assert_eq!(b.len(), 8 + 2 * 36);
        assert_eq!(FramePart::from_bytes(&b), Some(p));
        assert_eq!(FramePart::from_bytes(&b[..b.len() - 1]), None);
        assert_eq!(FramePart::from_bytes(&[1, 2, 3]), None);
        let empty = FramePart::default();
        assert_eq!(FramePart::from_bytes(&empty.to_bytes()), Some(empty));
    }

    #[test]
    fn a_state_needs_every_particle_exactly_once() {
        let part = |ids: &[u32]| {
            encode(&OwnedParticles {
                id: ids.to_vec(),
                pos: ids.iter().map(|&i| [i as f64, 0.0, 0.0]).collect(),
                vel: vec![[0.0; 3]; ids.len()],
                rho: vec![1000.0; ids.len()],
                prev_vel: ids.iter().map(|&i| [0.0, i as f64, 0.0]).collect(),
                prev_rho: vec![999.0; ids.len()],
            })
        };
        let kind = [1, 1, 2];
        let s = assemble_state(vec![part(&[2, 0]), part(&[1])], 0.5, 3, &kind).unwrap();
        assert_eq!(s.pos[2], [2.0, 0.0, 0.0]);
        assert_eq!((s.time, s.step), (0.5, 3));
        // The state one step back comes with the parts.
        let back = s.prev.expect("the state one step back");
        assert_eq!(back.rho, [999.0; 3]);
        assert_eq!(back.vel[2], [0.0, 2.0, 0.0]);
        let twice = assemble_state(vec![part(&[0, 1]), part(&[1, 2])], 0.5, 3, &kind);
        assert!(twice
            .unwrap_err()
            .contains("particle 1 is held by two ranks"));
        let short = assemble_state(vec![part(&[0]), part(&[2])], 0.5, 3, &kind);
        assert!(short.unwrap_err().contains("hold 2 particles of 3"));
        let beyond = assemble_state(vec![part(&[0, 1, 2, 3])], 0.5, 3, &kind);
        assert!(beyond.unwrap_err().contains("particle 3"));
    }
}
