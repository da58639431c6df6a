//! What a method (DEM now, SPH next) declares to the shared machinery: which per-particle fields
//! cross a sub-domain boundary as read-only ghosts, which travel with a migrating particle, and
//! which a frame can carry.

/// A per-particle field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Field {
    Id,
    Species,
    Position,
    Velocity,
    AngularVelocity,
    /// Contact force of the last step.
    Force,
    /// Contact torque of the last step.
    Torque,
    /// Contacts of the last step.
    Contacts,
    /// Contact history (partner keys and tangential springs).
    History,
}

/// A set of [`Field`]s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FieldSet(u32);

impl FieldSet {
    pub const EMPTY: FieldSet = FieldSet(0);

    pub const fn of(fields: &[Field]) -> FieldSet {
        let mut bits = 0;
        let mut k = 0;
        while k < fields.len() {
            bits |= 1 << fields[k] as u32;
            k += 1;
        }
        FieldSet(bits)
    }

    pub const fn contains(self, f: Field) -> bool {
        self.0 & (1 << f as u32) != 0
    }
}

/// The declarations of a method.
pub trait Method {
    /// Name in the case file (`method = "dem"`).
    const NAME: &'static str;
    /// Fields a worker sends to its neighbours each step for their force stage.
    const HALO: FieldSet;
    /// Fields that move with a particle to its new owner.
    const MIGRATE: FieldSet;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_hold_what_they_list() {
        let s = FieldSet::of(&[Field::Id, Field::History]);
        assert!(s.contains(Field::Id) && s.contains(Field::History));
        assert!(!s.contains(Field::Position));
        assert!(!FieldSet::EMPTY.contains(Field::Id));
    }
}
