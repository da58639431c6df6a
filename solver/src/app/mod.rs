//! The solver binary's application layer: command line, run loop, control, publishing.
pub mod cli;
pub mod control;
pub mod gpu;
pub mod port;
pub mod ranks;
pub mod resume;
pub mod run;
pub mod sim;
pub mod sph;
