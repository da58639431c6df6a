//! Method-independent foundations: the global neighbour grid and its windows, geometry (box walls,
//! meshes and their motion), STL input, vector maths and the deterministic random numbers.

pub mod geometry;
pub mod grid;
pub mod rng;
pub mod stl;
pub mod vec3;
