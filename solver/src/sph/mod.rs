//! The weakly compressible SPH method (issue 17). [`physics`]: the smoothing kernels, the Tait
//! equation of state, artificial viscosity, the momentum and continuity pair terms, delta-SPH
//! density diffusion, the variable time step and the symplectic and Verlet integrators, each formula once in
//! Rust with a CUDA twin of the same name in `kernels/src/cuda/sph_physics.cuh`. [`setup`] reads
//! an SPH case (its own file type for now) and places fluid and dynamic boundary particles;
//! [`cpu`] is the CPU reference solver and [`cuda`] its GPU twin on one device (bit-identical in
//! f64), also split over several GPUs ([`cuda::SphGroup`], the same bits); [`checkpoint`] serves
//! all; [`motion`] moves the boundary particles of solids with a prescribed motion; [`probe`] reads pressure at a point as the `analysis` tool does. [`slabs`] cuts a run into
//! slabs of cell layers for several workers: GPUs of a group, MPI ranks with a GPU each
//! ([`cuda::SphRank`]) or on the CPU ([`ranks::SphCpuRank`]), whose frames and states travel as
//! [`parts`]; [`subdomains`] runs those CPU ranks as threads of one process (`--subdomains`).
//! Not on the DEM coordinator: SPH's slabs are its own.

pub mod checkpoint;
pub mod cpu;
pub mod cuda;
pub mod mdbc;
pub mod motion;
pub(crate) mod parts;
pub mod physics;
pub mod probe;
pub mod ranks;
pub mod setup;
pub mod slabs;
pub mod subdomains;

use shm_protocol::FieldKind;

/// The SPH method's frame declarations (its slabs are its own, not the DEM's workers).
pub struct Sph;

impl crate::exec::method::FrameFields for Sph {
    const NAME: &'static str = "sph";
    const FRAME: &'static [FieldKind] = &[
        FieldKind::Position,
        FieldKind::Velocity,
        FieldKind::Density,
        FieldKind::Pressure,
        FieldKind::ParticleKind,
    ];
    const FRAME_DEFAULT: &'static [FieldKind] = Self::FRAME;
    /// Positions, and the kinds by which readers tell the fluid from the walls (the viewer
    /// hides the walls, `analysis` sums the fluid).
    const FRAME_ALWAYS: &'static [FieldKind] = &[FieldKind::Position, FieldKind::ParticleKind];
}
