//! The discrete element method: contact physics, its state (contact history, the run constants),
//! what crosses a sub-domain boundary, and its stages on the CPU ([`cpu`]) and on CUDA ([`cuda`]).

pub mod cpu;
pub mod cuda;
pub mod exchange;
pub mod physics;
pub mod state;

use crate::exec::method::{Field, FieldSet, FrameFields, Method};
use shm_protocol::FieldKind;

/// The DEM's declarations.
pub struct Dem;

impl Method for Dem {
    /// The force stage reads a neighbour's id (history key, tie-break), species (radius,
    /// material), position, velocity and spin.
    const HALO: FieldSet = FieldSet::of(&[
        Field::Id,
        Field::Species,
        Field::Position,
        Field::Velocity,
        Field::AngularVelocity,
    ]);
    /// Everything: velocity Verlet needs the last forces, and the history its springs.
    const MIGRATE: FieldSet = FieldSet::of(&[
        Field::Id,
        Field::Species,
        Field::Position,
        Field::Velocity,
        Field::AngularVelocity,
        Field::Force,
        Field::Torque,
        Field::Contacts,
        Field::History,
    ]);
}

impl FrameFields for Dem {
    const NAME: &'static str = "dem";
    const FRAME: &'static [FieldKind] = &[
        FieldKind::Position,
        FieldKind::Velocity,
        FieldKind::AngularVelocity,
        FieldKind::Force,
        FieldKind::ContactCount,
    ];
    /// Forces are stored only when asked (12 bytes per particle and slot).
    const FRAME_DEFAULT: &'static [FieldKind] = &[
        FieldKind::Position,
        FieldKind::Velocity,
        FieldKind::AngularVelocity,
        FieldKind::ContactCount,
    ];
    const FRAME_ALWAYS: &'static [FieldKind] = &[FieldKind::Position];
}
