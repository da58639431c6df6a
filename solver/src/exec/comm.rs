//! Collective operations between the processes of one run (MPI ranks), as plain bytes.
//!
//! A run in one process uses [`Solo`]: every operation is the identity. A run launched by
//! `mpirun` uses `exec::mpi::MpiComm` (cargo feature `mpi`); an SPH run on CPU sub-domains in
//! one process runs its ranks as threads over [`super::thread_comm::ThreadComm`]. Every rank must call the same
//! operations in the same order (they are collective); the coordinator and the application's
//! rank protocol (`app::ranks`) are written so that they do. A failed MPI operation ends the
//! whole job (MPI's default error handler), so none of these returns an error.

/// Collective operations over the ranks of a run. Rank 0 is the root: it owns the segment,
/// writes checkpoints and assembles frames.
pub trait Comm: Send + Sync + std::fmt::Debug {
    /// This process's rank, 0..size.
    fn rank(&self) -> usize;
    /// Ranks in the run.
    fn size(&self) -> usize;
    /// All-to-all: `sends[r]` goes to rank r; returns what each rank sent to this one, by rank.
    fn exchange(&self, sends: Vec<Vec<u8>>) -> Vec<Vec<u8>>;
    /// All-to-all of lengths: `lens[r]` goes to rank r; returns what each rank sent to this one
    /// (the lengths of an [`Comm::exchange_into`] that follows).
    fn exchange_lens(&self, lens: &[usize]) -> Vec<usize>;
    /// All-to-all into the caller's buffers (no allocation: page-locked ones, say): `send`
    /// holds rank r's `send_lens[r]` bytes in rank order, one after the other; `recv` receives
    /// rank r's `recv_lens[r]` bytes in rank order. Each `recv_lens[r]` must be what rank r
    /// passes as its `send_lens[this rank]` ([`Comm::exchange_lens`] tells).
    fn exchange_into(&self, send: &[u8], send_lens: &[usize], recv: &mut [u8], recv_lens: &[usize]);
    /// Gathers every rank's bytes on rank 0 (by rank); other ranks get an empty list.
    fn gather(&self, local: Vec<u8>) -> Vec<Vec<u8>>;
    /// Gathers every rank's bytes on every rank (by rank).
    fn all_gather(&self, local: Vec<u8>) -> Vec<Vec<u8>>;
    /// Rank 0's `data` replaces every other rank's.
    fn broadcast(&self, data: &mut Vec<u8>);
    /// Rank 0's four words replace every other rank's: the control messages of the
    /// application's rank protocol. The other ranks wait without spinning a core.
    fn broadcast_control(&self, words: &mut [u64; 4]);
    /// Minimum over the ranks.
    fn min_f64(&self, x: f64) -> f64;
    /// Minimum over the ranks.
    fn min_u64(&self, x: u64) -> u64;
    /// Sum over the ranks.
    fn sum_u64(&self, x: u64) -> u64;

    /// Rank other than 0: starts sending `bytes` to rank 0 and returns without waiting for
    /// rank 0 to take them (a rank's part of a frame). The previous post of this rank is
    /// completed first. Not collective: rank 0 takes them with [`Comm::try_take_posted`].
    fn post_to_root(&self, bytes: Vec<u8>);
    /// Rank 0: what rank `from` posted, once it has arrived; `None` (at once) before.
    fn try_take_posted(&self, from: usize) -> Option<Vec<u8>>;
    /// Rank 0: what rank `from` posted, waiting for it.
    fn take_posted(&self, from: usize) -> Vec<u8>;

    fn is_root(&self) -> bool {
        self.rank() == 0
    }
}

/// One process: the collective operations of a single rank.
#[derive(Debug, Clone, Copy, Default)]
pub struct Solo;

impl Comm for Solo {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn exchange(&self, sends: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        sends
    }
    fn exchange_lens(&self, lens: &[usize]) -> Vec<usize> {
        lens.to_vec()
    }
    fn exchange_into(
        &self,
        send: &[u8],
        send_lens: &[usize],
        recv: &mut [u8],
        recv_lens: &[usize],
    ) {
        assert_eq!(send_lens, recv_lens, "one rank receives what it sends");
        let n = send_lens.iter().sum::<usize>();
        recv[..n].copy_from_slice(&send[..n]);
    }
    fn gather(&self, local: Vec<u8>) -> Vec<Vec<u8>> {
        vec![local]
    }
    fn all_gather(&self, local: Vec<u8>) -> Vec<Vec<u8>> {
        vec![local]
    }
    fn broadcast(&self, _data: &mut Vec<u8>) {}
    fn broadcast_control(&self, _words: &mut [u64; 4]) {}
    fn post_to_root(&self, _bytes: Vec<u8>) {
        unreachable!("one process is rank 0: it posts nothing to itself");
    }
    fn try_take_posted(&self, from: usize) -> Option<Vec<u8>> {
        unreachable!("one process has no rank {from} to take from");
    }
    fn take_posted(&self, from: usize) -> Vec<u8> {
        unreachable!("one process has no rank {from} to take from");
    }
    fn min_f64(&self, x: f64) -> f64 {
        x
    }
    fn min_u64(&self, x: u64) -> u64 {
        x
    }
    fn sum_u64(&self, x: u64) -> u64 {
        x
    }
}

/// This host's name, to tell ranks on one host from ranks on others ("?" when unknown).
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "?".into())
}

/// Rank 0: hands `take` the posts ([`Comm::post_to_root`]) of the ranks in `waiting` that have
/// arrived (all of them, waiting for each, with `wait`) and keeps the others in `waiting`.
/// True when none is left.
pub fn take_posts(
    comm: &dyn Comm,
    waiting: &mut Vec<usize>,
    wait: bool,
    mut take: impl FnMut(Vec<u8>),
) -> bool {
    waiting.retain(|&r| {
        let got = if wait {
            Some(comm.take_posted(r))
        } else {
            comm.try_take_posted(r)
        };
        match got {
            Some(bytes) => {
                take(bytes);
                false
            }
            None => true,
        }
    });
    waiting.is_empty()
}

/// The contiguous block of `workers` global worker indices rank `rank` of `ranks` drives
/// (the first `workers % ranks` ranks get one more).
pub fn rank_workers(workers: usize, ranks: usize, rank: usize) -> std::ops::Range<usize> {
    let (q, r) = (workers / ranks, workers % ranks);
    let start = rank * q + rank.min(r);
    start..start + q + usize::from(rank < r)
}

/// Encodes a value for another rank (bincode 2, standard configuration).
pub fn encode<T: serde::Serialize>(v: &T) -> Vec<u8> {
    bincode::serde::encode_to_vec(v, bincode::config::standard())
        .expect("encoding plain data into memory cannot fail")
}

/// Decodes what [`encode`] made on another rank of the same binary. A failure means the ranks
/// run different binaries or memory is corrupt: the message says so.
pub fn decode<T: serde::de::DeserializeOwned>(bytes: &[u8], what: &str) -> T {
    bincode::serde::decode_from_slice(bytes, bincode::config::standard())
        .unwrap_or_else(|e| {
            panic!("{what} from another rank cannot be decoded ({e}): do all ranks run the same solver binary?")
        })
        .0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_workers_cover_every_worker_once() {
        for workers in 1..9 {
            for ranks in 1..=workers {
                let mut next = 0;
                for r in 0..ranks {
                    let w = rank_workers(workers, ranks, r);
                    assert_eq!(w.start, next);
                    assert!(
                        !w.is_empty(),
                        "{workers} workers, {ranks} ranks: rank {r} idle"
                    );
                    next = w.end;
                }
                assert_eq!(next, workers);
            }
        }
    }

    #[test]
    fn solo_is_the_identity() {
        let s = Solo;
        assert_eq!(s.exchange(vec![vec![1, 2]]), vec![vec![1, 2]]);
        assert_eq!(s.exchange_lens(&[2]), vec![2]);
        let mut recv = [0u8; 3];
        s.exchange_into(&[1, 2], &[2], &mut recv, &[2]);
        assert_eq!(recv, [1, 2, 0]);
        assert_eq!(s.gather(vec![3]), vec![vec![3]]);
        assert_eq!(s.min_f64(2.5), 2.5);
        assert_eq!(s.sum_u64(7), 7);
        assert!(s.is_root());
    }
}
