//! A run whose particle set changes (outflow removes particles): frames carry `particle_id` and
//! hold fewer particles than the static section. The snapshot must draw them with the species
//! and radius of their ids, not of their position in the frame.

mod common;

use common::*;
use shm_protocol::FieldKind;

const W: usize = 320;
const H: usize = 240;
const DIST: f32 = 3.0;

fn bluish(p: &[u8; 3]) -> bool {
    p[2] as i32 > p[0] as i32 + 20
}
fn orange(p: &[u8; 3]) -> bool {
    p[0] as i32 > p[2] as i32 + 60
}

/// Pixels of the disc of radius `r_px` around the projection of `c`.
fn disc(img: &Png, c: [f32; 3], r_px: f32) -> Vec<[u8; 3]> {
    let (cx, cy) = project_front(c, DIST, W, H);
    let r = r_px.ceil() as i64;
    let mut out = Vec::new();
    for dy in -r..=r {
        for dx in -r..=r {
            if ((dx * dx + dy * dy) as f32) <= r_px * r_px {
                out.push(img.at((cx as i64 + dx) as usize, (cy as i64 + dy) as usize));
            }
        }
    }
    out
}

/// Screen pixels per metre at the depth of the box centre.
fn px_per_m() -> f32 {
    0.5 * H as f32 / (17.5f32).to_radians().tan() / DIST
}

#[test]
fn frame_ids_choose_species_and_radius() {
    // Five particles in the static section: species 0, 1, 0, 1, 0; the odd ids are big.
    let radii = [0.02, 0.09, 0.02, 0.09, 0.05];
    let statics: Vec<P> = (0..5)
        .map(|i| P {
            pos: [0.5; 3],
            vel: [0.0; 3],
            species: (i % 2) as u32,
            radius: radii[i],
        })
        .collect();
    let mut seg = create_reserving("ids", &statics, vec![], FieldKind::ParticleId.bit());
    // Ids 0 and 2 left through an outflow; ids 1, 3, 4 remain, left to right.
    let centres = [[0.2, 0.5, 0.5], [0.5, 0.5, 0.5], [0.8, 0.5, 0.5]];
    let live: Vec<P> = [1usize, 3, 4]
        .iter()
        .zip(centres)
        .map(|(&id, pos)| P { pos, ..statics[id] })
        .collect();
    publish_live(&mut seg, &live, &[1, 3, 4], (2, 0.5), 7);

    let out = out_path("ids.png");
    let size = format!("{W}x{H}");
    let o = viewer(&[
        "--attach",
        &seg.name,
        "--snapshot",
        out.to_str().expect("utf-8 path"),
        "--size",
        &size,
        "--camera",
        "-90,0,3",
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "viewer failed: {stderr}");
    assert!(stderr.contains("3 particles drawn"), "{stderr}");
    let img = Png::read(&out);

    // Element 0 is id 1 (species 1, orange, radius 0.09): covered to 0.07 from its centre.
    // By position in the frame it would be static entry 0: blue and 0.02 small.
    let scale = px_per_m();
    let first = disc(&img, centres[0], 0.07 * scale);
    assert!(fraction(&first, orange) > 0.9, "id 1 not orange and big");
    assert!(fraction(&disc(&img, centres[1], 0.07 * scale), orange) > 0.9);
    // Element 2 is id 4: species 0, blue, radius 0.05 (static entry 2 would be 0.02).
    let last = disc(&img, centres[2], 0.04 * scale);
    assert!(fraction(&last, bluish) > 0.9, "id 4 not blue and 0.05 wide");
}
