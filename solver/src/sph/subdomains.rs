//! One SPH run cut into CPU sub-domains in one process (`solver --backend cpu --subdomains N
//! --case dambreak.toml`): the slabs of the MPI ranks ([`SphCpuRank`]), one per thread, talking
//! through a [`ThreadComm`] instead of MPI. The results are the bits of one undecomposed
//! process, as over `mpirun`; only the speed changes.
//!
//! Sub-domain 0 runs in the caller's thread, as rank 0 runs the application over MPI; every
//! other one waits on its own thread for the operations sub-domain 0 is about to take part in
//! (a step, a frame, a state), in the order the caller asks for them, as MPI ranks obey rank 0's
//! control messages. Their pair sums share the process's rayon pool.
//!
//! A sub-domain whose thread fails (an error, or a panic) abandons the group: the others stop
//! at their next operation that needs it, and the caller gets an error naming the sub-domain
//! and why, never a hang.

use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;

use super::cpu::SphState;
use super::motion::MovingSolids;
use super::ranks::{SphCpuRank, SphCpuRankOptions, SphRankError};
use super::setup::SphConstants;
use super::slabs::{SlabOptions, TooFewLayers};
use crate::exec::thread_comm::{catch_abandoned, Abandoned, ThreadComm};

/// How an SPH run is cut into CPU sub-domains.
#[derive(Debug, Clone)]
pub struct SphSubdomainOptions {
    /// Sub-domains, at least 1 (1: one slab, still on the sub-domain machinery).
    pub subdomains: usize,
    /// The cut and its balancing.
    pub slabs: SlabOptions,
}

/// Why an SPH run on CPU sub-domains cannot go on.
#[derive(Debug, thiserror::Error)]
pub enum SphSubdomainError {
    #[error("{0}: use fewer sub-domains (or --split-axis along a longer axis)")]
    TooFewLayers(TooFewLayers),
    #[error(transparent)]
    Step(SphRankError),
    #[error("{0}")]
    Failed(String),
    #[error("cannot start the thread of SPH sub-domain {index}: {source}")]
    Thread {
        index: usize,
        source: std::io::Error,
    },
}

impl From<SphRankError> for SphSubdomainError {
    fn from(e: SphRankError) -> Self {
        match e {
            SphRankError::TooFewLayers(t) => SphSubdomainError::TooFewLayers(t),
            e => SphSubdomainError::Step(e),
        }
    }
}

/// What sub-domain 0 asks the others to take part in.
#[derive(Debug, Clone, Copy)]
enum Op {
    /// One step, shortened so as not to pass this time.
    Step(f64),
    /// Post this sub-domain's part of a frame.
    Frame,
    /// Send this sub-domain's particles for a state.
    State,
}

struct Follower {
    ops: Option<mpsc::Sender<Op>>,
    thread: Option<JoinHandle<()>>,
}

/// See the module documentation.
pub struct SphCpuSubdomains {
    /// Sub-domain 0, stepped in the caller's thread.
    root: SphCpuRank,
    comm: Arc<ThreadComm>,
    followers: Vec<Follower>,
}

impl SphCpuSubdomains {
    /// `state` (about to take the step `dt`, with the case's `moving` solids placed at its
    /// time) cut into `opts.subdomains` slabs.
    pub fn from_state(
        c: SphConstants,
        state: SphState,
        dt: f64,
        moving: MovingSolids,
        opts: SphSubdomainOptions,
    ) -> Result<SphCpuSubdomains, SphSubdomainError> {
        let n = opts.subdomains.max(1);
        let mut comms: Vec<Arc<ThreadComm>> =
            ThreadComm::group(n).into_iter().map(Arc::new).collect();
        let rank_opts = |comm: Arc<ThreadComm>| SphCpuRankOptions {
            comm,
            slabs: opts.slabs,
            label: "sub-domain",
        };
        let comm = comms.remove(0);
        // Sub-domain 0 first: a case the cut refuses is refused before any thread starts (the
        // others would build the same cut).
        let root = SphCpuRank::from_state(
            c.clone(),
            state.clone(),
            dt,
            moving.clone(),
            rank_opts(comm.clone()),
        )?;
        let mut group = SphCpuSubdomains {
            root,
            comm: comm.clone(),
            followers: Vec::with_capacity(n - 1),
        };
        // The last sub-domain takes `state` itself: one copy of the whole state per thread.
        let mut state = Some(state);
        let last = comms.len();
        for (k, theirs) in comms.into_iter().enumerate() {
            let index = k + 1;
            let (tx, rx) = mpsc::channel();
            let state = if index == last {
                state.take()
            } else {
                state.clone()
            };
            let (c, moving, o) = (c.clone(), moving.clone(), rank_opts(theirs.clone()));
            let Some(state) = state else {
                unreachable!("the state is taken by the last sub-domain only");
            };
            let thread = std::thread::Builder::new()
                .name(format!("sph-subdomain-{index}"))
                .spawn(move || {
                    follow(index, theirs, rx, move || {
                        SphCpuRank::from_state(c, state, dt, moving, o)
                    })
                })
                .map_err(|source| SphSubdomainError::Thread { index, source })?;
            group.followers.push(Follower {
                ops: Some(tx),
                thread: Some(thread),
            });
        }
        Ok(group)
    }

    /// Asks every other sub-domain to take part in `op` (sub-domain 0 takes its part next).
    fn ask(&self, op: Op) -> Result<(), SphSubdomainError> {
        for fo in &self.followers {
            let sent = fo.ops.as_ref().is_some_and(|tx| tx.send(op).is_ok());
            if !sent {
                return Err(self.failure());
            }
        }
        Ok(())
    }

    /// Why the group cannot go on.
    fn failure(&self) -> SphSubdomainError {
        SphSubdomainError::Failed(
            self.comm.abandoned().unwrap_or_else(|| {
                "an SPH sub-domain's thread ended before the run did".to_string()
            }),
        )
    }

    /// One step, shortened so as not to pass `t_end`. Every sub-domain takes it, or none does:
    /// the errors of a step (a non-finite state, particles past a whole slab) are found by all
    /// of them together.
    pub fn step_within(&mut self, t_end: f64) -> Result<(), SphSubdomainError> {
        self.ask(Op::Step(t_end))?;
        guarded(&self.comm, || self.root.step_within(t_end))??;
        Ok(())
    }

    /// One step.
    pub fn step(&mut self) -> Result<(), SphSubdomainError> {
        self.step_within(f64::INFINITY)
    }

    /// Steps until the time reaches `t` (the last step shortened to land on it), as
    /// [`super::cpu::SphSim::run_to`] does: the same steps.
    pub fn run_to(&mut self, t: f64) -> Result<(), SphSubdomainError> {
        while self.time() < t - 1e-12 {
            self.step_within(t)?;
        }
        Ok(())
    }

    /// The whole state, in id order.
    pub fn state(&self) -> Result<SphState, SphSubdomainError> {
        self.ask(Op::State)?;
        Ok(guarded(&self.comm, || self.root.state())??)
    }

    /// Starts a frame: every sub-domain's particles go to `targets` (positions, velocities,
    /// densities, pressures; null: not wanted), sub-domain 0's at once, the others' as they
    /// arrive ([`SphCpuSubdomains::publish_done`]). A frame still pending is completed first.
    ///
    /// # Safety
    /// Each non-null target holds one element per particle ([f32; 3] or f32) and stays valid
    /// and untouched by others until the frame is complete (or this group is dropped).
    pub unsafe fn publish(&mut self, targets: [*mut u8; 4]) -> Result<(), SphSubdomainError> {
        self.ask(Op::Frame)?;
        // SAFETY: the caller's contract.
        guarded(&self.comm, || unsafe { self.root.publish(targets) })
    }

    /// Whether the frame is complete (places the parts that arrived).
    pub fn publish_done(&mut self) -> Result<bool, SphSubdomainError> {
        guarded(&self.comm, || self.root.publish_done())
    }

    /// Waits for every part of the pending frame.
    pub fn publish_wait(&mut self) -> Result<(), SphSubdomainError> {
        guarded(&self.comm, || self.root.publish_wait())
    }

    pub fn constants(&self) -> &SphConstants {
        self.root.constants()
    }
    /// The slabs' first layers and the end of the last (layers of the kernel support).
    pub fn bounds(&self) -> &[u32] {
        self.root.bounds()
    }
    pub fn axis(&self) -> usize {
        self.root.axis()
    }
    pub fn dt(&self) -> f64 {
        self.root.dt()
    }
    pub fn time(&self) -> f64 {
        self.root.time()
    }
    pub fn step_index(&self) -> u64 {
        self.root.step_index()
    }
    pub fn kinds(&self) -> &[u32] {
        self.root.kinds()
    }
    pub fn subdomains(&self) -> usize {
        self.root.ranks()
    }
    /// How often the bounds moved.
    pub fn rebalances(&self) -> u64 {
        self.root.rebalances()
    }
}

impl Drop for SphCpuSubdomains {
    fn drop(&mut self) {
        // A pending frame is completed while the others can still post their parts, unless
        // one failed (its part would never come) or sub-domain 0 is unwinding from a bug.
        if self.comm.abandoned().is_some()
            || std::thread::panicking()
            || catch_abandoned(|| self.root.publish_wait()).is_err()
        {
            self.root.forget_frame();
        }
        // Idle threads end when their channel closes; one still waiting in an operation that
        // sub-domain 0 will never join (after a failure) is woken by the abandonment. An
        // operation every sub-domain entered still completes.
        for f in &mut self.followers {
            f.ops.take();
        }
        self.comm.abandon("the run ended".into());
        for f in &mut self.followers {
            if let Some(t) = f.thread.take() {
                let _ = t.join();
            }
        }
    }
}

/// `f`, sub-domain 0's part of an operation: an error if the group was abandoned meanwhile.
/// Any other panic (a bug) abandons the group first, so that no other sub-domain waits for
/// sub-domain 0, and goes on unwinding.
fn guarded<T>(comm: &ThreadComm, f: impl FnOnce() -> T) -> Result<T, SphSubdomainError> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(v) => Ok(v),
        Err(payload) => match payload.downcast::<Abandoned>() {
            Ok(a) => Err(SphSubdomainError::Failed(a.0)),
            Err(other) => {
                comm.abandon(format!("SPH sub-domain 0 panicked: {}", message(&other)));
                std::panic::resume_unwind(other)
            }
        },
    }
}

/// The thread of sub-domain `index`: builds it, then takes part in what sub-domain 0 asks
/// until the channel closes; abandons the group when it fails.
fn follow(
    index: usize,
    comm: Arc<ThreadComm>,
    ops: mpsc::Receiver<Op>,
    build: impl FnOnce() -> Result<SphCpuRank, SphRankError>,
) {
    let run = || -> Result<(), SphRankError> {
        let mut rank = build()?;
        while let Ok(op) = ops.recv() {
            match op {
                Op::Step(t_end) => rank.step_within(t_end)?,
                // SAFETY: no targets: a sub-domain other than 0 only posts its part.
                Op::Frame => unsafe { rank.publish([std::ptr::null_mut(); 4]) },
                Op::State => {
                    rank.state()?;
                }
            }
        }
        Ok(())
    };
    let why = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)) {
        Ok(Ok(())) => return,
        Ok(Err(e)) => format!("SPH sub-domain {index} stopped: {e}"),
        // Another sub-domain failed first; it said why.
        Err(p) if p.is::<Abandoned>() => return,
        Err(p) => format!("SPH sub-domain {index} panicked: {}", message(&p)),
    };
    comm.abandon(why);
}

/// The text of a panic's payload.
fn message(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}
