//! CUDA graphs of the step's launches (issue 13, lab-scale cases). A step of a 10 k-particle case
//! is nine launches of kernels that each run for a few microseconds, and the host's cost per
//! launch (about 5 us here) bounded the step, not the GPU. The neighbour search and collide of a
//! step are captured once into a graph and replayed with one launch.
//!
//! The cache is keyed by everything the launches read from the host: the kernel arguments (every
//! array address, the parameters, the mesh arrays), so a key that differs (the two history
//! buffers alternate between steps, meshes rebinned, buffers grown, particles added) captures a
//! new graph instead of replaying a stale one. Nothing else of the step changes: the graph runs
//! the same kernels with the same arguments, so the results are the same bits.

use std::sync::Arc;

use cudarc::driver::{sys, CudaGraph, CudaStream};

use super::params::{DemFrame, DemParams, GridArrays, MeshArrays, ParticleArrays};
use super::CudaError;

/// The host-side inputs of one step's neighbour search and collide launches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct StepLaunches {
    /// Whether the step searches (false: a Verlet skin's step between searches, the collide
    /// alone reading the state: `skin.rs`).
    pub search: bool,
    /// Owner keys (`DEM_OWNER_KEYS`): whether the search recomputes the keys and hands pairs
    /// over (`dem_owner_keys`, `dem_adopt`), which a step's does and the extra searches of the
    /// energies and the spill rows' sizing do not (the next step's search does it for them).
    pub adopt: bool,
    /// Parameters of the search kernels (all slots).
    pub p: DemParams,
    /// Parameters of the collide (its live slots).
    pub pc: DemParams,
    pub cur: ParticleArrays,
    pub tmp: ParticleArrays,
    pub grid: GridArrays,
    pub cells: u32,
    /// The collide's input and output (the history buffers crossed).
    pub input: ParticleArrays,
    pub output: ParticleArrays,
    pub diag: u64,
    pub msh: MeshArrays,
    /// The cell counts' buffer length in bytes (cleared by a memset).
    pub count_bytes: usize,
    /// A published frame the collide packs (`publish.rs`; none in a captured graph: a step
    /// that packs one is launched directly).
    pub frame: DemFrame,
}

/// One captured step.
struct Graph {
    key: StepLaunches,
    exec: CudaGraph,
}

// SAFETY: a CUDA graph (and its executable) may be used from any thread as long as no two
// threads use it at once; the cache is owned by one `CudaSim`, which only launches it through
// `&mut self`, so moving it to another thread is sound.
unsafe impl Send for Graph {}

/// Graphs of the last few distinct steps (two history parities, and velocity Verlet's first
/// force evaluation; with a skin, which copy holds the state and which the newest history, for
/// steps with and without a search).
#[derive(Default)]
pub(crate) struct GraphCache {
    graphs: Vec<Graph>,
    /// Graphs captured so far (a capture per step would mean the cache never hits).
    pub captured: u64,
}

/// Graphs kept: the two parities of the history buffers times two kinds of integration, or
/// with a skin the four (state copy, history buffer) pairs with and without a search; each
/// with and without the stores of forces (only the last step of a batch stores them).
const KEEP: usize = 16;

impl GraphCache {
    /// Launches the cached graph of `key` on `stream`, or captures `enqueue` (which must queue the
    /// launches `key` describes on `stream`) into a new graph and launches that.
    pub fn launch(
        &mut self,
        stream: &Arc<CudaStream>,
        key: &StepLaunches,
        enqueue: impl FnOnce() -> Result<(), CudaError>,
    ) -> Result<(), CudaError> {
        if let Some(g) = self.graphs.iter().find(|g| g.key == *key) {
            return g
                .exec
                .launch()
                .map_err(|e| CudaError::driver("launching the step's graph", e));
        }
        stream
            .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(|e| CudaError::driver("starting a graph capture", e))?;
        let queued = enqueue();
        // The capture is ended whatever happened, so that the stream stays usable.
        let ended = stream.end_capture(sys::CUgraphInstantiate_flags(0));
        queued?;
        let exec = ended
            .map_err(|e| CudaError::driver("capturing the step's graph", e))?
            .ok_or_else(|| CudaError::Unsupported("an empty graph was captured".into()))?;
        exec.launch()
            .map_err(|e| CudaError::driver("launching the step's graph", e))?;
        if self.graphs.len() == KEEP {
            self.graphs.remove(0);
        }
        self.graphs.push(Graph { key: *key, exec });
        self.captured += 1;
        Ok(())
    }
}
