//! `analysis`: live metrics on a particle-shm run.
//!
//! The binary (`main.rs`) follows a run through any [`shm_protocol::FrameSource`] and feeds each
//! frame to [`metrics::compute`]; results go to the sinks in [`output`]. Every metric is a small
//! function in [`metrics`] with its formula and units in its doc comment, so scripts and tests can
//! also call them directly on slices.

pub mod context;
pub mod elements;
pub mod follow;
pub mod grid;
pub mod metrics;
pub mod output;
pub mod par;
pub mod region;

pub use context::{ContextError, StaticContext};
pub use metrics::{compute, Metric, Metrics, Settings};
pub use region::Aabb;
