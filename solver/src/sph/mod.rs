//! The weakly compressible SPH method (issue 17), being built piece by piece. So far it holds its
//! physics layer only ([`physics`]): the smoothing kernels, the Tait equation of state, artificial
//! viscosity, the momentum and continuity pair terms, delta-SPH density diffusion, the variable
//! time step and the symplectic integrator, each formula once in Rust with a CUDA twin of the same
//! name in `kernels/src/cuda/sph_physics.cuh`. Case files, state, stages and backends come later.

pub mod physics;
