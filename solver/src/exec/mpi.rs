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
/// Tag of [`Comm::post_to_root`]'s messages: a u64 length, then the bytes in chunks.
const POST_TAG: i32 = 18;
/// How long a rank that ends waits for rank 0 to take its last post before it gives up on it.
const POST_DRAIN: Duration = Duration::from_secs(2);

/// A non-blocking send in flight: its requests and the buffers they read, which must live until
/// the requests complete (leaked boxes, freed by [`MpiComm::complete_posts`]).
struct PendingPost {
    requests: Vec<mpi::request::Request<'static, [u8], mpi::request::StaticScope>>,
    buffers: Vec<*mut [u8]>,
}

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
    /// This rank's post to rank 0 still in flight (only the initialising thread touches it).
    post: std::cell::RefCell<Option<PendingPost>>,
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
            post: std::cell::RefCell::new(None),
        })
    }

    /// Tests this rank's post in flight once; true when none is left (its buffers freed).
    fn progress_posts(&self) -> bool {
        let mut slot = self.post.borrow_mut();
        let Some(p) = slot.take() else {
            return true;
        };
        let mut still = Vec::new();
        for r in p.requests {
            if let Err(r) = r.test() {
                still.push(r);
            }
        }
        if still.is_empty() {
            for b in p.buffers {
                // SAFETY: each buffer was leaked by post_to_root and its request has completed,
                // so nothing reads it any more.
                drop(unsafe { Box::from_raw(b) });
            }
            return true;
        }
        *slot = Some(PendingPost {
            requests: still,
            buffers: p.buffers,
        });
        false
    }

    /// Completes this rank's post in flight (waits for rank 0 to take it; `limit`: gives up
    /// after that long, leaking the buffers, as a rank that ends does when rank 0 is gone).
    /// It polls without sleeping: MPI moves a large message only while both sides call into it
    /// (with 0.2 ms sleeps between tests a 560 MB frame part crawled at 150 MB/s, session 18).
    fn complete_posts(&self, limit: Option<Duration>) {
        let since = Instant::now();
        while !self.progress_posts() {
            if limit.is_some_and(|l| since.elapsed() > l) {
                // Rank 0 never took it: dropping a live request would abort; leak it.
                if let Some(p) = self.post.borrow_mut().take() {
                    std::mem::forget(p.requests);
                }
                return;
            }
            std::thread::yield_now();
        }
    }

    /// Receives the bytes of a post whose length message `msg` was matched.
    fn receive_post(&self, from: usize, msg: mpi::point_to_point::Message) -> Vec<u8> {
        let mut len = 0u64;
        msg.matched_receive_into(&mut len);
        let p = self.world.process_at_rank(from as i32);
        let mut buf = vec![0u8; len as usize];
        for c in buf.chunks_mut(CHUNK) {
            p.receive_into_with_tag(c, POST_TAG);
        }
        buf
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
        // Both buffers are real allocations, at least a byte each: two empty Vecs share one
        // dangling address, and Open MPI refuses a send buffer equal to the receive buffer
        // (MPI_ERR_ARG; found with GPU ranks, whose record messages can be empty).
        let send_n = send_lens.iter().sum::<u64>() as usize;
        let recv_n = recv_lens.iter().sum::<u64>() as usize;
        let mut send: Vec<u8> = Vec::with_capacity(send_n.max(1));
        for s in sends {
            send.extend_from_slice(&s);
        }
        send.resize(send_n.max(1), 0);
        let mut recv = vec![0u8; recv_n.max(1)];
        {
            let s = Partition::new(&send[..], &sc[..], &sd[..]);
            let mut r = PartitionMut::new(&mut recv[..], &rc[..], &rd[..]);
            self.world.all_to_all_varcount_into(&s, &mut r);
        }
        recv.truncate(recv_n);
        Self::split(recv, &rc, &rd)
    }

    fn exchange_lens(&self, lens: &[usize]) -> Vec<usize> {
        self.check_thread();
        assert_eq!(lens.len(), self.size, "one length per rank");
        let send: Vec<u64> = lens.iter().map(|&l| l as u64).collect();
        let mut recv = vec![0u64; self.size];
        self.world.all_to_all_into(&send[..], &mut recv[..]);
        recv.into_iter().map(|l| l as usize).collect()
    }

    fn exchange_into(
        &self,
        send: &[u8],
        send_lens: &[usize],
        recv: &mut [u8],
        recv_lens: &[usize],
    ) {
        self.check_thread();
        assert_eq!(send_lens.len(), self.size, "one send length per rank");
        assert_eq!(recv_lens.len(), self.size, "one receive length per rank");
        let sl: Vec<u64> = send_lens.iter().map(|&l| l as u64).collect();
        let rl: Vec<u64> = recv_lens.iter().map(|&l| l as u64).collect();
        let (sc, sd) = Self::partition(&sl, "exchange (send)");
        let (rc, rd) = Self::partition(&rl, "exchange (receive)");
        let (sn, rn) = (
            sl.iter().sum::<u64>() as usize,
            rl.iter().sum::<u64>() as usize,
        );
        // Open MPI refuses a send buffer equal to the receive buffer (MPI_ERR_ARG), which two
        // empty slices can be (one dangling address): a byte of its own stands in for either.
        let (mut s1, mut r1) = ([0u8; 1], [0u8; 1]);
        let send = if sn == 0 {
            &mut s1[..] as &[u8]
        } else {
            &send[..sn]
        };
        let recv = if rn == 0 {
            &mut r1[..]
        } else {
            &mut recv[..rn]
        };
        let s = Partition::new(send, &sc[..], &sd[..]);
        let mut r = PartitionMut::new(recv, &rc[..], &rd[..]);
        self.world.all_to_all_varcount_into(&s, &mut r);
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
            // between polls instead of spinning a core, except while a post of its own is in
            // flight: MPI moves it only while this rank calls in (rank 0 is receiving it).
            let since = Instant::now();
            loop {
                match req.test() {
                    Ok(_) => return,
                    Err(r) => req = r,
                }
                let posting = !self.progress_posts();
                if posting || since.elapsed() < Duration::from_millis(5) {
                    std::thread::yield_now();
                } else {
                    std::thread::sleep(Duration::from_micros(500));
                }
            }
        });
    }

    fn post_to_root(&self, bytes: Vec<u8>) {
        self.check_thread();
        assert_ne!(self.rank, 0, "rank 0 posts nothing to itself");
        self.complete_posts(None);
        let root = self.world.process_at_rank(0);
        // The buffers must outlive the requests: leaked here, freed by complete_posts.
        let len_box: Box<[u8]> = Box::new((bytes.len() as u64).to_ne_bytes());
        let len_ptr = Box::into_raw(len_box);
        let data_ptr = Box::into_raw(bytes.into_boxed_slice());
        // SAFETY: both boxes stay allocated, and unwritten, until complete_posts frees them
        // after their requests completed.
        let (len, data): (&'static [u8], &'static [u8]) = unsafe { (&*len_ptr, &*data_ptr) };
        let mut requests =
            vec![root.immediate_send_with_tag(mpi::request::StaticScope, len, POST_TAG)];
        for c in data.chunks(CHUNK) {
            requests.push(root.immediate_send_with_tag(mpi::request::StaticScope, c, POST_TAG));
        }
        let buffers = vec![len_ptr, data_ptr];
        *self.post.borrow_mut() = Some(PendingPost { requests, buffers });
    }

    fn try_take_posted(&self, from: usize) -> Option<Vec<u8>> {
        self.check_thread();
        let p = self.world.process_at_rank(from as i32);
        let (msg, _) = p.immediate_matched_probe_with_tag(POST_TAG)?;
        Some(self.receive_post(from, msg))
    }

    fn take_posted(&self, from: usize) -> Vec<u8> {
        self.check_thread();
        let p = self.world.process_at_rank(from as i32);
        let (msg, _) = p.matched_probe_with_tag(POST_TAG);
        self.receive_post(from, msg)
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

impl Drop for MpiComm {
    fn drop(&mut self) {
        // Before MPI is finalised (the fields drop after this): the last post must have left.
        if std::thread::current().id() == self.thread {
            self.complete_posts(Some(POST_DRAIN));
        }
    }
}
