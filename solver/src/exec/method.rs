//! What a method declares to the shared machinery: which per-particle fields a frame can carry
//! (DEM and SPH, [`FrameFields`]), and for the DEM's workers which cross a sub-domain boundary
//! as read-only ghosts and which travel with a migrating particle ([`Method`]).

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
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

/// What a method's frames can carry: every method publishes (DEM and SPH); `--fields` and a
/// case's `[output] fields` choose among these.
pub trait FrameFields {
    /// Name in the case file (`method = "dem"`).
    const NAME: &'static str;
    /// Segment fields a frame of this method can carry.
    const FRAME: &'static [shm_protocol::FieldKind];
    /// The fields a frame carries unless the case or `--fields` says otherwise.
    const FRAME_DEFAULT: &'static [shm_protocol::FieldKind];
    /// The fields every frame carries, whatever is asked (what every reader needs).
    const FRAME_ALWAYS: &'static [shm_protocol::FieldKind];
}

/// The declarations of a method that runs on the shared workers (DEM).
pub trait Method: FrameFields {
    /// Fields a worker sends to its neighbours each step for their force stage.
    const HALO: FieldSet;
    /// Fields that move with a particle to its new owner.
    const MIGRATE: FieldSet;
}

/// Short names of frame fields (what `--fields` lists); the others go by the segment's names.
const SHORT_NAMES: [(&str, shm_protocol::FieldKind); 6] = [
    ("pos", shm_protocol::FieldKind::Position),
    ("vel", shm_protocol::FieldKind::Velocity),
    ("omega", shm_protocol::FieldKind::AngularVelocity),
    ("contacts", shm_protocol::FieldKind::ContactCount),
    ("id", shm_protocol::FieldKind::ParticleId),
    ("kind", shm_protocol::FieldKind::ParticleKind),
];

/// A frame field as the case file and `--fields` name it: the segment's field names
/// (`position`, `contact_count`, ...) or the short ones (`pos`, `vel`, `omega`, `force`,
/// `contacts`, `id`, `kind`).
pub fn frame_field(name: &str) -> Option<shm_protocol::FieldKind> {
    let name = name.trim();
    SHORT_NAMES
        .iter()
        .find(|(short, _)| *short == name)
        .map(|&(_, f)| f)
        .or_else(|| shm_protocol::FieldKind::from_name(name))
}

/// The short name of a frame field (what `--fields` lists).
pub fn frame_field_name(f: shm_protocol::FieldKind) -> &'static str {
    SHORT_NAMES
        .iter()
        .find(|&&(_, k)| k == f)
        .map_or(f.name(), |&(short, _)| short)
}

/// The segment field mask of `names` for method `M`: unknown names and fields the method does
/// not publish are errors naming what it does publish; [`FrameFields::FRAME_ALWAYS`] is always
/// included (positions: every reader places particles by them).
pub fn frame_mask<M: FrameFields>(names: &[String]) -> Result<u32, String> {
    let known: Vec<&str> = M::FRAME.iter().map(|&f| frame_field_name(f)).collect();
    let mut mask = M::FRAME_ALWAYS.iter().fold(0, |m, f| m | f.bit());
    for n in names {
        let f = frame_field(n).ok_or_else(|| {
            format!(
                "unknown frame field {n:?}; the {} method publishes {}",
                M::NAME,
                known.join(", ")
            )
        })?;
        if !M::FRAME.contains(&f) {
            return Err(format!(
                "the {} method does not publish {n:?}; it publishes {}",
                M::NAME,
                known.join(", ")
            ));
        }
        mask |= f.bit();
    }
    Ok(mask)
}

/// The default frame field mask of method `M`.
pub fn default_frame_mask<M: FrameFields>() -> u32 {
    M::FRAME_DEFAULT
        .iter()
        .chain(M::FRAME_ALWAYS)
        .fold(0, |m, f| m | f.bit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_frame_field_is_found_by_its_short_and_its_segment_name() {
        for f in shm_protocol::FieldKind::ALL {
            assert_eq!(frame_field(frame_field_name(f)), Some(f), "{f:?}");
            assert_eq!(frame_field(f.name()), Some(f), "{f:?}");
        }
        assert_eq!(frame_field("colour"), None);
    }

    #[test]
    fn sets_hold_what_they_list() {
        let s = FieldSet::of(&[Field::Id, Field::History]);
        assert!(s.contains(Field::Id) && s.contains(Field::History));
        assert!(!s.contains(Field::Position));
        assert!(!FieldSet::EMPTY.contains(Field::Id));
    }
}
