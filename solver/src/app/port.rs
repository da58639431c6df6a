//! What the run loop needs from a simulation, whatever its backend.

use std::path::Path;

use shm_protocol::{BodyTransform, FrameWriter, Region, StaticData};

/// The VTK and checkpoint intervals a case's `[output]` table asks for [s] (the command line's
/// `--output-every` and `--checkpoint-every` override them).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CaseIntervals {
    pub vtk: Option<f64>,
    pub checkpoint: Option<f64>,
}

impl CaseIntervals {
    pub fn of(o: &solver::case::Output) -> CaseIntervals {
        CaseIntervals {
            vtk: o.vtk_interval,
            checkpoint: o.checkpoint_interval,
        }
    }
}

pub trait SimPort {
    /// Advances `n` time steps.
    fn step_n(&mut self, n: u64) -> anyhow::Result<()>;
    /// Steps per call that keep the backend busy (a GPU synchronises once per call); commands
    /// and publication are handled between calls.
    fn preferred_batch(&self) -> u64;
    fn step_index(&self) -> u64;
    /// Simulated time [s].
    fn time(&self) -> f64;
    fn dt(&self) -> f64;
    fn end_time(&self) -> f64;
    /// Particles alive now (a frame's count).
    fn particle_count(&self) -> usize;
    /// Ids the run has had or will have: the static section's particle count (the live count
    /// unless outflow or inflow change the particle set).
    fn id_count(&self) -> usize;
    /// Particles removed by outflow regions since t = 0, and their mass [kg].
    fn removed(&self) -> (u64, f64);
    fn mesh_count(&self) -> usize;
    fn triangle_count(&self) -> usize;
    fn species_count(&self) -> usize;
    /// Segment field mask of the frames (`--fields`, the case, or the method's default).
    fn frame_fields(&self) -> u32;
    /// The case's `[output]` intervals.
    fn case_intervals(&self) -> CaseIntervals;
    /// Static section contents (configuration text, species, radii, meshes, world box).
    fn static_data(&self) -> StaticData;
    /// Current mesh poses, one per mesh.
    fn body_transforms(&self) -> Vec<BodyTransform>;
    /// Registers the segment's memory with the compute device (once, after creating it).
    fn attach_segment(&mut self, region: &Region) -> anyhow::Result<()>;
    /// Undoes [`SimPort::attach_segment`] (before the segment is closed).
    fn release_segment(&mut self);
    /// Fills the per-particle arrays of a frame (particle-id order). `Ok(true)`: a device copy
    /// into the frame is still in flight; commit only after [`SimPort::frame_copied`] said so
    /// (or [`SimPort::wait_frame_copy`] returned).
    fn fill_frame(&mut self, w: &mut FrameWriter<'_>) -> anyhow::Result<bool>;
    /// Whether the copy in flight completed (true once per copy).
    fn frame_copied(&mut self) -> anyhow::Result<bool>;
    /// Waits for the copy in flight, if any.
    fn wait_frame_copy(&mut self) -> anyhow::Result<()>;
    /// Writes a checkpoint that `--restart` continues bit-for-bit.
    fn save_checkpoint(&self, path: &Path) -> anyhow::Result<()>;
    /// Whether [`SimPort::save_checkpoint`] can work (the final checkpoint of `--output` is
    /// skipped otherwise; an explicit request still gets the error).
    fn can_checkpoint(&self) -> bool {
        true
    }
    /// Writes VTK files for output index `index` into `dir` and updates the series index.
    fn write_output(&mut self, dir: &Path, index: u64) -> anyhow::Result<()>;
    /// Per-stage timing summary for the progress line.
    fn stage_summary(&self) -> String;
    /// Backend name for logs.
    fn backend_name(&self) -> String;
    /// The run ended normally (a run over several processes lets its other ranks go).
    fn finish(&mut self) {}
}
