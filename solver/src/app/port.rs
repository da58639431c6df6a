//! What the run loop needs from a simulation, whatever its backend.

use std::path::Path;

use shm_protocol::{BodyTransform, FrameWriter, StaticData};

pub trait SimPort {
    /// Advances one time step.
    fn step(&mut self) -> anyhow::Result<()>;
    fn step_index(&self) -> u64;
    /// Simulated time [s].
    fn time(&self) -> f64;
    fn dt(&self) -> f64;
    fn end_time(&self) -> f64;
    fn particle_count(&self) -> usize;
    fn mesh_count(&self) -> usize;
    fn triangle_count(&self) -> usize;
    fn species_count(&self) -> usize;
    /// Static section contents (configuration text, species, radii, meshes, world box).
    fn static_data(&self) -> StaticData;
    /// Current mesh poses, one per mesh.
    fn body_transforms(&self) -> Vec<BodyTransform>;
    /// Fills the per-particle arrays of a frame (particle-id order).
    fn fill_frame(&mut self, w: &mut FrameWriter<'_>) -> anyhow::Result<()>;
    /// Writes a checkpoint that `--restart` continues bit-for-bit.
    fn save_checkpoint(&self, path: &Path) -> anyhow::Result<()>;
    /// Writes VTK files for output index `index` into `dir` and updates the series index.
    fn write_output(&mut self, dir: &Path, index: u64) -> anyhow::Result<()>;
    /// Per-stage timing summary for the progress line.
    fn stage_summary(&self) -> String;
    /// Backend name for logs.
    fn backend_name(&self) -> String;
}
