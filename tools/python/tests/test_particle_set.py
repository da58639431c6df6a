"""Runs whose particle set changes: frames carry ``particle_id`` and hold only the live
particles; ``Frame.particle_ids``, ``species`` and ``radii`` follow the ids.

The mapping tests run standalone; the segment tests need the segments of
``tools/analysis/tests/python_reader.rs``: PSHM_TEST_SET_SEGMENT (five static particles of
species 0, 1, 0, 1, 0, frames of ids 1, 3, 4; ``common::publish_set``) and PSHM_TEST_SEGMENT
(the known run, frames without ids).
"""

import os
import unittest

import numpy as np

import particle_shm as p
from particle_shm.frame import per_element

SET_SEG = os.environ.get("PSHM_TEST_SET_SEGMENT")
SEG = os.environ.get("PSHM_TEST_SEGMENT")
needs_segments = unittest.skipUnless(SET_SEG and SEG, "needs the segments of python_reader.rs")

# Mirrors SET_SPECIES, SET_RADII and SET_LIVE of tools/analysis/tests/common/mod.rs.
SET_SPECIES = np.array([0, 1, 0, 1, 0], dtype=np.uint32)
SET_RADII = np.array([0.010, 0.020, 0.015, 0.025, 0.030], dtype=np.float32)
SET_LIVE = np.array([1, 3, 4], dtype=np.uint32)


class PerElement(unittest.TestCase):
    def test_ids_select_static_entries(self):
        np.testing.assert_array_equal(per_element(SET_SPECIES, SET_LIVE), [1, 1, 0])
        np.testing.assert_array_equal(per_element(SET_RADII, SET_LIVE), SET_RADII[[1, 3, 4]])

    def test_without_ids_the_static_array_is_used_as_is(self):
        self.assertIs(per_element(SET_SPECIES, None), SET_SPECIES)

    def test_an_unknown_id_is_corrupt(self):
        with self.assertRaises(p.CorruptSegment) as cm:
            per_element(SET_SPECIES, np.array([1, 5], dtype=np.uint32))
        self.assertIn("particle id 5", str(cm.exception))
        self.assertEqual(len(per_element(SET_SPECIES, np.array([], dtype=np.uint32))), 0)


@needs_segments
class ReadsAChangingSet(unittest.TestCase):
    def check(self, f):
        self.assertEqual(f.particle_count, 3)
        self.assertEqual(f.positions.shape, (3, 3))
        np.testing.assert_array_equal(f.particle_ids, SET_LIVE)
        self.assertEqual(f.species.dtype, np.uint32)
        np.testing.assert_array_equal(f.species, [1, 1, 0])
        self.assertEqual(f.radii.dtype, np.float32)
        np.testing.assert_array_equal(f.radii, SET_RADII[SET_LIVE])
        # Frame 1 of publish_set: 2 removed, 0.5 kg.
        self.assertEqual((f.removed_count, f.removed_mass), (2, 0.5))
        self.assertTrue(f.valid())

    def test_views_and_copies_map_species_and_radii_by_id(self):
        seg = p.attach(SET_SEG)
        self.assertEqual(len(seg.static.ids), 5)
        self.check(seg.latest())
        self.check(seg.latest(copy=True))

    def test_frames_without_ids_use_the_static_arrays(self):
        seg = p.attach(SEG)
        st, f = seg.static, seg.latest(copy=True)
        np.testing.assert_array_equal(f.particle_ids, st.ids)
        np.testing.assert_array_equal(f.species, st.species_ids)
        np.testing.assert_array_equal(f.radii, st.radii)
        self.assertEqual((f.removed_count, f.removed_mass), (0, 0.0))
        # The static arrays are shared by the frames of their generation: read-only here.
        self.assertFalse(f.species.flags.writeable)
        self.assertEqual(f.static.generation, f.static_generation)


if __name__ == "__main__":
    unittest.main()
