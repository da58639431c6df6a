//! particle-shm solver library.
//!
//! Rooms, in the order a run uses them: [`case`] (what to simulate) -> [`exec`] (the
//! coordinator, its workers and the stage pipeline; [`exec::sim::Simulation`] is the facade) ->
//! [`decomp`] (slabs of the global grid, migration and ghost routes) -> [`dem`] (the method:
//! physics, state, CPU and CUDA stages) on [`core`] (grid, geometry, STL, vectors). Files:
//! [`io`] (VTK, checkpoints).

pub mod bench_cases;
pub mod case;
pub mod core;
pub mod decomp;
pub mod dem;
pub mod exec;
pub mod io;
pub mod sph;

pub use case::{Case, CaseError, CaseWarning};
pub use dem::state::SimState;
pub use exec::sim::{FrameInput, MeshTransformF32, SimError, Simulation};
pub use exec::stages::{Stage, StageTimers};
pub use exec::worker::{Energies, StepError};
pub use io::checkpoint::CheckpointError;
