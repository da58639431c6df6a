//! One run over several processes (`mpirun -np N solver ...`, cargo feature `mpi`).
//!
//! Rank 0 runs the application as in one process (segment, commands, checkpoints, output) on
//! its block of the CPU workers. Its simulation port ([`RankRoot`]) sends the other ranks a
//! control message before every collective action (steps, a frame, a state for a checkpoint, a
//! snapshot for VTK), so every rank calls the coordinator's collective operations in the same
//! order and commands take effect on all ranks at the same step. The other ranks ([`follow`])
//! build their part from rank 0's start state and obey the control messages until told to
//! finish. A rank that dies ends the job through the launcher; a rank that fails tells the
//! others (an empty start, or `Abort`).

use std::path::Path;
use std::sync::Arc;

use anyhow::Result;
use shm_protocol::{BodyTransform, FrameWriter, Region, StaticData};
use solver::exec::comm::Comm;
use solver::exec::sim::RankSet;

use super::port::SimPort;

/// The control messages rank 0 sends, as four words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Advance this many steps.
    Step(u64),
    /// Send the kinematics for a frame.
    Frame,
    /// Send the full state (a checkpoint).
    State,
    /// Send the kinematics for a snapshot (VTK output).
    Snapshot,
    /// The run ended normally.
    Finish,
    /// Rank 0 failed.
    Abort,
}

impl Op {
    pub fn words(self) -> [u64; 4] {
        match self {
            Op::Step(n) => [1, n, 0, 0],
            Op::Frame => [2, 0, 0, 0],
            Op::State => [3, 0, 0, 0],
            Op::Snapshot => [4, 0, 0, 0],
            Op::Finish => [5, 0, 0, 0],
            Op::Abort => [6, 0, 0, 0],
        }
    }

    pub fn from_words(w: [u64; 4]) -> Option<Op> {
        Some(match w[0] {
            1 => Op::Step(w[1]),
            2 => Op::Frame,
            3 => Op::State,
            4 => Op::Snapshot,
            5 => Op::Finish,
            6 => Op::Abort,
            _ => return None,
        })
    }
}

/// The ranks of this run, once [`init`] found more than one (taken out by [`finalize`]).
static RANKS: std::sync::Mutex<Option<RankSet>> = std::sync::Mutex::new(None);

/// The ranks of this run, if it runs over several processes.
pub fn current() -> Option<RankSet> {
    RANKS.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Ends MPI (`MPI_Finalize`, which every rank must reach on a normal exit) once the last user
/// of the ranks is gone: call it at the very end of `main`.
pub fn finalize() {
    let ranks = RANKS.lock().unwrap_or_else(|e| e.into_inner()).take();
    drop(ranks);
}

/// Starts MPI when an MPI launcher started this process, and remembers the ranks when there
/// are several. Without the `mpi` feature, a launcher's environment is refused with a message
/// (N copies of one run would otherwise fight over one segment).
pub fn init() -> Result<()> {
    #[cfg(feature = "mpi")]
    {
        use solver::exec::mpi::{launched_by_mpi, MpiComm};
        if launched_by_mpi() {
            let comm = MpiComm::init()?;
            if comm.size() > 1 {
                tracing::info!(
                    "MPI rank {} of {} (pid {}, host {})",
                    comm.rank(),
                    comm.size(),
                    std::process::id(),
                    solver::exec::comm::hostname()
                );
                *RANKS.lock().unwrap_or_else(|e| e.into_inner()) =
                    Some(RankSet::new(Arc::new(comm)));
            }
        }
    }
    #[cfg(not(feature = "mpi"))]
    {
        let size = std::env::var("OMPI_COMM_WORLD_SIZE")
            .or_else(|_| std::env::var("PMI_SIZE"))
            .ok()
            .and_then(|s| s.parse::<u32>().ok());
        if size.is_some_and(|n| n > 1) {
            anyhow::bail!(
                "started by an MPI launcher with several ranks, but this solver was built without \
                 MPI; build it with `cargo build --release -p solver --features mpi`"
            );
        }
    }
    Ok(())
}

/// This process's rank among the ranks of its host, as the launcher says (Open MPI, Slurm,
/// MPICH/Hydra), if it says.
pub fn local_rank() -> Option<usize> {
    [
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "SLURM_LOCALID",
        "MPI_LOCALRANKID",
    ]
    .iter()
    .find_map(|v| std::env::var(v).ok()?.parse().ok())
}

/// `sim` as the run loop should drive it: wrapped in a [`RankRoot`] on rank 0 of a run over
/// several processes.
pub fn port(sim: Box<dyn SimPort>) -> Box<dyn SimPort> {
    match current() {
        Some(r) => Box::new(RankRoot {
            inner: sim,
            comm: r.comm,
            followers: true,
        }),
        None => sim,
    }
}

/// Rank 0's simulation port: sends the control message of each collective action first.
pub struct RankRoot {
    inner: Box<dyn SimPort>,
    comm: Arc<dyn Comm>,
    /// Whether the other ranks are waiting for control messages.
    followers: bool,
}

impl RankRoot {
    fn send(&self, op: Op) {
        if self.followers {
            let mut w = op.words();
            self.comm.broadcast_control(&mut w);
        }
    }
}

impl Drop for RankRoot {
    fn drop(&mut self) {
        // Rank 0 leaves without finishing (an error): the others must not wait for it.
        self.send(Op::Abort);
    }
}

impl SimPort for RankRoot {
    fn step_n(&mut self, n: u64) -> Result<()> {
        self.send(Op::Step(n));
        let r = self.inner.step_n(n);
        if r.is_err() {
            // Step failures are found collectively: every rank failed at the same step.
            self.followers = false;
        }
        r
    }
    fn preferred_batch(&self) -> u64 {
        self.inner.preferred_batch()
    }
    fn step_index(&self) -> u64 {
        self.inner.step_index()
    }
    fn time(&self) -> f64 {
        self.inner.time()
    }
    fn dt(&self) -> f64 {
        self.inner.dt()
    }
    fn end_time(&self) -> f64 {
        self.inner.end_time()
    }
    fn particle_count(&self) -> usize {
        self.inner.particle_count()
    }
    fn id_count(&self) -> usize {
        self.inner.id_count()
    }
    fn removed(&self) -> (u64, f64) {
        self.inner.removed()
    }
    fn mesh_count(&self) -> usize {
        self.inner.mesh_count()
    }
    fn triangle_count(&self) -> usize {
        self.inner.triangle_count()
    }
    fn species_count(&self) -> usize {
        self.inner.species_count()
    }
    fn frame_fields(&self) -> u32 {
        self.inner.frame_fields()
    }
    fn case_intervals(&self) -> super::port::CaseIntervals {
        self.inner.case_intervals()
    }
    fn static_data(&self) -> StaticData {
        self.inner.static_data()
    }
    fn body_transforms(&self) -> Vec<BodyTransform> {
        self.inner.body_transforms()
    }
    fn attach_segment(&mut self, region: &Region) -> Result<()> {
        self.inner.attach_segment(region)
    }
    fn release_segment(&mut self) {
        self.inner.release_segment()
    }
    fn fill_frame(&mut self, w: &mut FrameWriter<'_>) -> Result<bool> {
        self.send(Op::Frame);
        self.inner.fill_frame(w)
    }
    fn frame_copied(&mut self) -> Result<bool> {
        self.inner.frame_copied()
    }
    fn wait_frame_copy(&mut self) -> Result<()> {
        self.inner.wait_frame_copy()
    }
    fn save_checkpoint(&self, path: &Path) -> Result<()> {
        self.send(Op::State);
        self.inner.save_checkpoint(path)
    }
    fn can_checkpoint(&self) -> bool {
        self.inner.can_checkpoint()
    }
    fn write_output(&mut self, dir: &Path, index: u64) -> Result<()> {
        self.send(Op::Snapshot);
        self.inner.write_output(dir, index)
    }
    fn stage_summary(&self) -> String {
        self.inner.stage_summary()
    }
    fn backend_name(&self) -> String {
        format!(
            "{} on {} MPI ranks",
            self.inner.backend_name(),
            self.comm.size()
        )
    }
    fn finish(&mut self) {
        self.send(Op::Finish);
        self.followers = false;
    }
}

/// A rank other than 0: builds its part of the run from rank 0's start state and obeys rank
/// 0's control messages until the run finishes. Returns an error when the run failed.
/// `cuda`: this rank's GPU on a DEM run over GPU ranks (an SPH run's start says it is one, and
/// `app::sph::follow` takes it).
pub fn follow(
    ranks: RankSet,
    cuda: Option<solver::dem::cuda::CudaOptions>,
    cli: &super::cli::Cli,
) -> Result<()> {
    use solver::exec::sim::Simulation;
    use solver::exec::worker::RawKinematics;
    let comm = ranks.comm.clone();
    let start = ranks.receive_start()?;
    if super::sph::is_sph_start(&start) {
        return super::sph::follow(ranks, &start, cli);
    }
    let mut sim = Simulation::join_ranks_with(ranks, &start, cuda)?;
    loop {
        let mut w = [0u64; 4];
        comm.broadcast_control(&mut w);
        let op = Op::from_words(w)
            .ok_or_else(|| anyhow::anyhow!("unknown control message {w:?} from rank 0"))?;
        match op {
            Op::Step(n) => sim.step_n(n)?,
            Op::Frame => {
                let none = RawKinematics::none(sim.num_particles());
                // SAFETY: no destination pointers: nothing is written on this rank.
                unsafe { sim.begin_kinematics_copy(none) }?;
            }
            Op::State => {
                sim.state()?;
            }
            Op::Snapshot => {
                sim.snapshot()?;
            }
            Op::Finish => return Ok(()),
            Op::Abort => anyhow::bail!("rank 0 failed (its output says why); stopping"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_messages_round_trip() {
        for op in [
            Op::Step(16),
            Op::Frame,
            Op::State,
            Op::Snapshot,
            Op::Finish,
            Op::Abort,
        ] {
            assert_eq!(Op::from_words(op.words()), Some(op));
        }
        assert_eq!(Op::from_words([9, 0, 0, 0]), None);
    }
}
