//! particle-shm solver library: case configuration, DEM physics, backends, output.
//!
//! Module map (pipeline order): [`case`] (what to simulate) -> [`sim::Simulation`] (owns a
//! [`backend::Backend`]; the CPU reference is [`cpu::CpuBackend`]) whose step runs
//! prepare ([`grid`], [`geometry`]) -> collide ([`physics`]) -> integrate. Output: [`vtk`],
//! [`checkpoint`]. Input files: [`stl`].

pub mod backend;
pub mod bench_cases;
pub mod case;
pub mod checkpoint;
pub mod cpu;
pub mod cuda;
pub mod geometry;
pub mod grid;
pub mod physics;
pub mod rng;
pub mod sim;
pub mod stl;
pub mod vec3;
pub mod vtk;

pub use backend::{Backend, Energies, SimState, StageTimers, StepError};
pub use case::{Case, CaseError, CaseWarning};
pub use checkpoint::CheckpointError;
pub use sim::{FrameInput, MeshTransformF32, SimError, Simulation};
