//! [`Comm`] over MPI (cargo feature `mpi`): the `mpi` crate against the system's Open MPI or
//! MPICH. Byte messages of any size: counts travel as u64, large payloads in chunks of at
//! most [`CHUNK`] bytes (MPI counts are 32-bit).

use super::comm::Comm;
use mpi::collective::SystemOperation;
use mpi::datatype::{Partition, PartitionMut};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use mpi::Count;
use std::thread::ThreadId;
use std::time::{Duration, Instant};

/// Largest single MPI message [B].
const CHUNK: usize = 1 << 30;
/// Tag of the point-to-point messages of [`Comm::gather`].
const GATHER_TAG: i32 = 17;

/// Environment variables a launcher sets for each rank (Open MPI, MPICH/Hydra, Slurm's PMI).
const LAUNCHER_VARS: [&str; 4] = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK"];

/// Whether this process was started by an MPI launcher (`mpirun`, `mpiexec`, `srun`).
pub fn launched_by_mpi() -> bool {
    LAUNCHER_VARS.iter().any(|v| std::env::var_os(v).is_some())
}

/// The world communicator of this process, with MPI initialised for calls from one thread.
pub struct MpiComm {
    // Dropped last: finalises MPI.
    world: SimpleCommunicator,
    _universe: mpi::environment::Universe,
    thread: ThreadId,
    rank: usize,
    size: usize,
}

impl std::fmt::Debug for MpiComm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MpiComm(rank {} of {})", self.rank, self.size)
    }
}

// SAFETY: MPI is initialised at level FUNNELED (only the initialising thread calls MPI), and
// every method checks that it runs on that thread before it touches MPI, so moving or sharing
// the handle cannot make another thread call MPI.
unsafe impl Send for MpiComm {}
// SAFETY: as above.
unsafe impl Sync for MpiComm {}

/// Why MPI could not be started.
#[derive(Debug, thiserror::Error)]
pub enum MpiInitError {
    #[error("MPI could not be initialised (already initialised, or the launcher failed)")]
    Init,
    #[error("the MPI library offers no thread support (FUNNELED is needed, it gives {0:?})")]
    Threading(mpi::Threading),
}

impl MpiComm {
    /// Initialises MPI (once per process).
    pub fn init() -> Result<MpiComm, MpiInitError> {
        let (universe, level) =
            mpi::initialize_with_threading(mpi::Threading::Funneled).ok_or(MpiInitError::Init)?;
        if level < mpi::Threading::Funneled {
            return Err(MpiInitError::Threading(level));
        }
        let world = universe.world();
        let (rank, size) = (world.rank() as usize, world.size() as usize);
        Ok(MpiComm {
            world,
            _universe: universe,
            thread: std::thread::current().id(),
            rank,
            size,
        })
    }

    fn check_thread(&self) {
        assert_eq!(
            std::thread::current().id(),
            self.thread,
            "MPI called from a thread other than the one that initialised it"
        );
    }

    /// Counts and displacements of a variable-count collective, as MPI's 32-bit counts.
    fn partition(lens: &[u64], what: &str) -> (Vec<Count>, Vec<Count>) {
        let total: u64 = lens.iter().sum();
        assert!(
            total <= Count::MAX as u64,
            "{what}: {total} bytes in one collective exceed MPI's 32-bit counts"
        );
        let counts: Vec<Count> = lens.iter().map(|&l| l as Count).collect();
        let displs = counts
            .iter()
            .scan(0, |acc, &c| {
                let d = *acc;
                *acc += c;
                Some(d)
            })
            .collect();
        (counts, displs)
    }

    fn split(buf: Vec<u8>, counts: &[Count], displs: &[Count]) -> Vec<Vec<u8>> {
        counts
            .iter()
            .zip(displs)
            .map(|(&c, &d)| buf[d as usize..(d + c) as usize].to_vec())
            .collect()
    }
}

impl Comm for MpiComm {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn exchange(&self, sends: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        self.check_thread();
        assert_eq!(sends.len(), self.size, "one send buffer per rank");
        let send_lens: Vec<u64> = sends.iter().map(|s| s.len() as u64).collect();
        let mut recv_lens = vec![0u64; self.size];
        self.world
            .all_to_all_into(&send_lens[..], &mut recv_lens[..]);
        let (sc, sd) = Self::partition(&send_lens, "exchange (send)");
        let (rc, rd) = Self::partition(&recv_lens, "exchange (receive)");
        let send: Vec<u8> = sends.concat();
        let mut recv = vec![0u8; recv_lens.iter().sum::<u64>() as usize];
        {
            let s = Partition::new(&send[..], &sc[..], &sd[..]);
            let mut r = PartitionMut::new(&mut recv[..], &rc[..], &rd[..]);
            self.world.all_to_all_varcount_into(&s, &mut r);
        }
        Self::split(recv, &rc, &rd)
    }

    fn gather(&self, local: Vec<u8>) -> Vec<Vec<u8>> {
        self.check_thread();
        let root = self.world.process_at_rank(0);
        if self.rank != 0 {
            root.send_with_tag(&(local.len() as u64), GATHER_TAG);
            for c in local.chunks(CHUNK) {
                root.send_with_tag(c, GATHER_TAG);
            }
            return Vec::new();
        }
        let mut out = vec![local];
        for r in 1..self.size {
            let p = self.world.process_at_rank(r as i32);
            let mut len = 0u64;
            p.receive_into_with_tag(&mut len, GATHER_TAG);
            let mut buf = vec![0u8; len as usize];
            for c in buf.chunks_mut(CHUNK) {
                p.receive_into_with_tag(c, GATHER_TAG);
            }
            out.push(buf);
        }
        out
    }

    fn all_gather(&self, local: Vec<u8>) -> Vec<Vec<u8>> {
        self.check_thread();
        let mut lens = vec![0u64; self.size];
        self.world
            .all_gather_into(&(local.len() as u64), &mut lens[..]);
        let (c, d) = Self::partition(&lens, "all-gather");
        let mut recv = vec![0u8; lens.iter().sum::<u64>() as usize];
        {
            let mut r = PartitionMut::new(&mut recv[..], &c[..], &d[..]);
            self.world.all_gather_varcount_into(&local[..], &mut r);
        }
        Self::split(recv, &c, &d)
    }

    fn broadcast(&self, data: &mut Vec<u8>) {
        self.check_thread();
        let root = self.world.process_at_rank(0);
        let mut len = data.len() as u64;
        root.broadcast_into(&mut len);
        data.resize(len as usize, 0);
        for c in data.chunks_mut(CHUNK) {
            root.broadcast_into(c);
        }
    }

    fn broadcast_control(&self, words: &mut [u64; 4]) {
        self.check_thread();
        let root = self.world.process_at_rank(0);
        mpi::request::scope(|scope| {
            let mut req = root.immediate_broadcast_into(scope, &mut words[..]);
            if self.rank == 0 {
                req.wait_without_status();
                return;
            }
            // A waiting rank (the run is paused, or rank 0 writes a checkpoint) sleeps
            // between polls instead of spinning a core.
            let since = Instant::now();
            loop {
                match req.test() {
                    Ok(_) => return,
                    Err(r) => req = r,
                }
                if since.elapsed() < Duration::from_millis(5) {
                    std::thread::yield_now();
                } else {
                    std::thread::sleep(Duration::from_micros(500));
                }
            }
        });
    }

    fn min_f64(&self, x: f64) -> f64 {
        self.check_thread();
        let mut y = 0.0f64;
        self.world
            .all_reduce_into(&x, &mut y, SystemOperation::min());
        y
    }

    fn min_u64(&self, x: u64) -> u64 {
        self.check_thread();
        let mut y = 0u64;
        self.world
            .all_reduce_into(&x, &mut y, SystemOperation::min());
        y
    }

    fn sum_u64(&self, x: u64) -> u64 {
        self.check_thread();
        let mut y = 0u64;
        self.world
            .all_reduce_into(&x, &mut y, SystemOperation::sum());
        y
    }
}
