//! Corrupt, truncated and hostile segments give errors, never out-of-bounds reads: a property
//! test mutates header, static and slot bytes of a real segment image placed right before a
//! PROT_NONE guard page (an out-of-bounds read would crash the test), then attaches and reads.

mod common;
use common::*;
use proptest::prelude::*;
use shm_protocol::layout::{SegmentHeader, SlotHeader, StaticHeader};
use shm_protocol::*;
use std::mem::size_of;

/// A valid segment image: two meshes, species, static data and two frames.
fn image() -> Vec<u8> {
    let name = TestName::new("image");
    let mut caps = Capacities::for_particles(50);
    caps.max_bodies = 2;
    caps.max_triangles = 4;
    caps.fields = layout::ALL_FIELDS_MASK;
    let mut p = Publisher::create(&name.0, caps, CreateOptions::default()).unwrap();
    let tri = [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0];
    p.write_static(&StaticData {
        config_toml: "dt = 1e-5\n".into(),
        species: vec![SpeciesRecord {
            radius: 0.01,
            ..Default::default()
        }],
        particle_ids: (0..50).collect(),
        particle_species: vec![0; 50],
        particle_radius: vec![0.01; 50],
        meshes: vec![
            MeshStatic {
                name: "drum".into(),
                triangles: vec![tri; 3],
            },
            MeshStatic {
                name: "blade".into(),
                triangles: vec![tri],
            },
        ],
        world_min: [0.0; 3],
        world_max: [1.0; 3],
        ..Default::default()
    })
    .unwrap();
    for k in 0..2u64 {
        let mut w = p.begin_frame(50).unwrap();
        w.step = k;
        for f in [
            FieldKind::Position,
            FieldKind::Velocity,
            FieldKind::AngularVelocity,
            FieldKind::Force,
        ] {
            w.vec3_mut(f).unwrap().fill([k as f32; 3]);
        }
        w.contact_counts_mut().unwrap().fill(3);
        w.set_bodies(&[BodyTransform::IDENTITY; 2]).unwrap();
        w.commit();
    }
    let bytes = std::fs::read(shm_path(&name.0)).unwrap();
    assert_eq!(bytes.len() as u64, p.region().plan().total_size);
    bytes
}

/// Memory ending exactly at a PROT_NONE page.
struct Guarded {
    map: *mut u8,
    map_len: usize,
    start: *mut u8,
}

impl Guarded {
    fn new(bytes: &[u8]) -> Self {
        let page = 4096usize;
        let body = bytes.len().div_ceil(page) * page;
        let map_len = body + page;
        // SAFETY: anonymous private mapping; we own it until drop.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        } as *mut u8;
        assert!(!map.is_null());
        unsafe {
            assert_eq!(libc::mprotect(map.add(body) as _, page, libc::PROT_NONE), 0);
            let start = map.add(body - bytes.len());
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), start, bytes.len());
            Self {
                map,
                map_len,
                start,
            }
        }
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.map as _, self.map_len) };
    }
}

fn exercise(bytes: &[u8]) -> Result<(), String> {
    let g = Guarded::new(bytes);
    // SAFETY: `g` maps `bytes.len()` bytes at `start` (64-byte aligned: the length is a multiple
    // of 64 and the page end is page aligned).
    let region = unsafe { Region::validate(g.start, bytes.len()) }.map_err(|e| e.to_string())?;
    let s = shm_protocol::static_data_for_test(&region).map_err(|e| e.to_string());
    let f = shm_protocol::frame::read_newest(&region).map_err(|e| e.to_string());
    let _ = shm_protocol::frame::with_newest(&region, |v| {
        v.positions().map(|p| p.iter().map(|x| x[0]).sum::<f32>())
    });
    s.and(f).map(|_| ())
}

#[test]
fn the_untouched_image_reads_back() {
    let img = image();
    exercise(&img).unwrap();
}

#[test]
fn truncated_images_and_wrong_versions_are_refused() {
    let img = image();
    for len in [0usize, 8, 64, size_of::<SegmentHeader>(), img.len() - 64] {
        let e = exercise(&img[..len]).unwrap_err();
        assert!(
            e.contains("truncated") || e.contains("bytes but the object has"),
            "{len}: {e}"
        );
    }
    let mut v = img.clone();
    v[8] = 99; // abi_version
    assert!(exercise(&v).unwrap_err().contains("ABI version 99"));
    // A version-1 segment (an older solver's) is refused naming both versions and the remedy.
    v[8] = 1;
    let e = exercise(&v).unwrap_err();
    assert!(
        e.contains("ABI version 1") && e.contains("reads version 2") && e.contains("older"),
        "{e}"
    );
    let mut m = img.clone();
    m[0] = b'X';
    assert!(exercise(&m)
        .unwrap_err()
        .contains("not a particle-shm segment"));
}

#[test]
fn corrupt_file_in_dev_shm_gives_clear_attach_error() {
    let name = TestName::new("truncfile");
    let img = image();
    std::fs::write(shm_path(&name.0), &img[..1000]).unwrap();
    let e = Consumer::attach(&name.0).err().unwrap().to_string();
    assert!(
        e.contains("truncated") || e.contains("bytes but the object has"),
        "{e}"
    );
}

fn hot_ranges(img_len: usize) -> Vec<std::ops::Range<usize>> {
    // Header, static header, and the first slot header (found through the real plan).
    let plan = shm_protocol::layout::LayoutPlan::new(&{
        let mut c = Capacities::for_particles(50);
        c.max_bodies = 2;
        c.max_triangles = 4;
        c.fields = layout::ALL_FIELDS_MASK;
        c
    })
    .unwrap();
    assert_eq!(plan.total_size as usize, img_len);
    let so = plan.static_offset as usize;
    let mut r = vec![
        0..size_of::<SegmentHeader>(),
        so..so + size_of::<StaticHeader>(),
    ];
    r.push(plan.mesh_table_offset as usize..plan.mesh_table_offset as usize + 128);
    for i in 0..3 {
        let s = plan.slot_offset(i) as usize;
        r.push(s..s + size_of::<SlotHeader>());
    }
    r
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]
    #[test]
    fn mutated_segments_never_read_out_of_bounds(
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<prop::sample::Index>(), any::<u8>()), 1..12)
    ) {
        let img = IMAGE.with(|i| i.clone());
        let ranges = hot_ranges(img.len());
        let mut bytes = img.clone();
        for (which, at, value) in edits {
            let r = &ranges[which.index(ranges.len())];
            bytes[r.start + at.index(r.len())] = value;
        }
        // Any result is fine; a crash (guard page) or panic fails the test.
        let _ = exercise(&bytes);
    }
}

thread_local! {
    static IMAGE: Vec<u8> = image();
}
