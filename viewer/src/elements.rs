//! The static data of a frame's elements. Element `i` of a frame is static entry `i`, except in
//! runs whose particle set changes: their frames carry `particle_id`, hold only the live
//! particles, and element `i` is static entry `particle_id[i]` (LAYOUT.md, "Runs whose particle
//! set changes"). Colouring and radii go through here, never through the static arrays by
//! element index.

use std::borrow::Cow;

use shm_protocol::{Frame, StaticData};

/// Id, species and radius of each element of one frame (borrowed from the static data when the
/// frame carries no ids, gathered by id otherwise).
#[derive(Debug)]
pub struct Elements<'a> {
    pub ids: Cow<'a, [u32]>,
    pub species: Cow<'a, [u32]>,
    /// [m]
    pub radii: Cow<'a, [f32]>,
    /// Why species and radii could not be mapped (a frame naming an id the static section does
    /// not list): they are then left empty, and the scene falls back to the default colour and
    /// radius with this note.
    pub problem: Option<String>,
}

impl<'a> Elements<'a> {
    pub fn of(st: &'a StaticData, frame: &'a Frame) -> Self {
        let frame_ids = frame.particle_ids.as_deref();
        let ids = Cow::Borrowed(frame_ids.unwrap_or(&st.particle_ids));
        let mapped = StaticData::per_element(&st.particle_species, frame_ids).and_then(|species| {
            Ok((
                species,
                StaticData::per_element(&st.particle_radius, frame_ids)?,
            ))
        });
        match mapped {
            Ok((species, radii)) => Self {
                ids,
                species,
                radii,
                problem: None,
            },
            Err(e) => Self {
                ids,
                species: Cow::Borrowed(&[]),
                radii: Cow::Borrowed(&[]),
                problem: Some(format!(
                    "frame {}: {e}; species and radii not shown",
                    frame.meta.seq
                )),
            },
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use shm_protocol::FieldKind;

    /// Five particles of two species (ids 0..5, radii 1..5 mm) and a frame of ids 1, 3, 4.
    pub(crate) fn five_and_three() -> (StaticData, Frame) {
        let st = StaticData {
            particle_ids: (0..5).collect(),
            particle_species: vec![0, 1, 0, 1, 0],
            particle_radius: vec![0.001, 0.002, 0.003, 0.004, 0.005],
            ..Default::default()
        };
        let mut frame = Frame {
            positions: Some(vec![[0.2, 0.5, 0.5], [0.5, 0.5, 0.5], [0.8, 0.5, 0.5]]),
            particle_ids: Some(vec![1, 3, 4]),
            ..Default::default()
        };
        frame.meta.particle_count = 3;
        frame.meta.fields = FieldKind::Position.bit() | FieldKind::ParticleId.bit();
        (st, frame)
    }

    #[test]
    fn frame_ids_select_the_static_entries() {
        let (st, frame) = five_and_three();
        let el = Elements::of(&st, &frame);
        assert_eq!(el.ids[..], [1, 3, 4]);
        assert_eq!(el.species[..], [1, 1, 0]);
        assert_eq!(el.radii[..], [0.002, 0.004, 0.005]);
        assert!(el.problem.is_none());
    }

    #[test]
    fn without_ids_element_i_is_static_entry_i() {
        let (st, mut frame) = five_and_three();
        frame.particle_ids = None;
        let el = Elements::of(&st, &frame);
        assert!(matches!(el.species, Cow::Borrowed(_)));
        assert_eq!(el.species[..3], [0, 1, 0]);
        assert_eq!(el.ids[..], [0, 1, 2, 3, 4]);
    }

    #[test]
    fn an_unknown_id_is_a_note_not_a_panic() {
        let (st, mut frame) = five_and_three();
        frame.particle_ids = Some(vec![1, 3, 9]);
        let el = Elements::of(&st, &frame);
        assert!(el.species.is_empty() && el.radii.is_empty());
        let problem = el.problem.expect("a note");
        assert!(problem.contains("particle id 9"), "{problem}");
    }
}
