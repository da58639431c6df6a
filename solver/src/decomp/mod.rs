//! Domain decomposition: how the global grid is cut into slabs ([`plan`]) and what moves between
//! them ([`exchange`]: migrating particles with their full state, read-only ghost layers).

pub mod balance;
pub mod exchange;
pub mod plan;

pub use balance::Balance;
pub use plan::{Axis, Decomposition, DecompositionOverride, Plan, PlanError};
