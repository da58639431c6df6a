//! Running a simulation: the [`coordinator`] drives the named [`stages`] of every step on its
//! [`worker`]s and moves particles between them through a [`transport`]; [`sim::Simulation`] is
//! the facade the application and the tests use. [`method`] is what a method (DEM, SPH)
//! declares to this machinery.

pub mod comm;
pub mod coordinator;
pub mod inflow;
pub mod method;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod sim;
pub mod stages;
pub mod thread_comm;
pub mod transport;
pub mod worker;
