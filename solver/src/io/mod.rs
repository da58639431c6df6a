//! Files a run writes and reads: VTK results for ParaView and checkpoints.

pub mod checkpoint;
pub mod vtk;
