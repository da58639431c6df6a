//! The mesh display modes of the CPU rasteriser (`--meshes`) on a closed box around a particle:
//! solid hides the particle, hidden and transparent show it, wireframe shows it between the
//! edges.

use super::cpu::{render, Image, BACKGROUND, MESH_COLOR};
use crate::camera::{transform, Bounds, Camera, CameraSpec, UpAxis, Vec3};
use crate::color::{Legend, Rgb};
use crate::mesh_style::{MeshMode, MeshStyle};
use crate::scene::Scene;

const SIZE: usize = 400;
const PARTICLE: Rgb = [200, 50, 50];
/// The closed box [LO, HI]^3 around the particle.
const LO: f32 = 0.25;
const HI: f32 = 0.75;

/// The 12 triangles of the closed box [lo, hi]^3, each face cut along one diagonal.
fn closed_box(lo: f32, hi: f32) -> Vec<[Vec3; 3]> {
    let c = |i: usize| -> Vec3 {
        [
            if i & 1 == 0 { lo } else { hi },
            if i & 2 == 0 { lo } else { hi },
            if i & 4 == 0 { lo } else { hi },
        ]
    };
    // Faces as corner indices (bit 0: x, bit 1: y, bit 2: z), in order around the face.
    let faces = [
        [0, 1, 5, 4], // y = lo (seen by the front camera)
        [2, 3, 7, 6], // y = hi
        [0, 2, 6, 4], // x = lo
        [1, 3, 7, 5], // x = hi
        [0, 1, 3, 2], // z = lo
        [4, 5, 7, 6], // z = hi
    ];
    faces
        .iter()
        .flat_map(|f| [[c(f[0]), c(f[1]), c(f[2])], [c(f[0]), c(f[2]), c(f[3])]])
        .collect()
}

/// One red particle of radius 0.2 at the centre of the unit world, inside the closed box.
fn drum_scene() -> Scene {
    Scene {
        centers: vec![[0.5; 3]],
        radii: vec![0.2],
        colors: vec![PARTICLE],
        triangles: closed_box(LO, HI),
        world: Bounds {
            min: [0.0; 3],
            max: [1.0; 3],
        },
        legend: Legend::Ramp {
            title: String::new(),
            min: 0.0,
            max: 1.0,
        },
        total_particles: 1,
        color_by: crate::color::ColorBy::Species,
        boundary_particles: 0,
        boundary: crate::sph::BoundaryMode::Hidden,
        stride: 1,
        note: None,
    }
}

fn front_camera(scene: &Scene) -> Camera {
    let front = "front".parse::<CameraSpec>().expect("preset");
    Camera::framing(&scene.world, &front, UpAxis::Z, 1.0)
}

/// Pixel (column, row) of world point `p`, as the rasteriser projects it.
fn pixel(cam: &Camera, p: Vec3) -> (usize, usize) {
    let v = transform(&cam.view_matrix(), p);
    let scale = 0.5 * SIZE as f32 / (cam.fov_y_deg.to_radians() * 0.5).tan();
    let d = -v[2];
    let x = 0.5 * SIZE as f32 + v[0] / d * scale;
    let y = 0.5 * SIZE as f32 - v[1] / d * scale;
    (x as usize, y as usize)
}

fn draw(mode: MeshMode) -> (Image, Camera) {
    let scene = drum_scene();
    let cam = front_camera(&scene);
    let style = MeshStyle {
        mode,
        ..MeshStyle::default()
    };
    (render(&scene, &cam, SIZE, SIZE, &style), cam)
}

/// A shade of the particle's red.
fn reddish(p: Rgb) -> bool {
    p[0] as i32 > p[2] as i32 + 40
}

/// A shade of the mesh's grey.
fn greyish(p: Rgb) -> bool {
    p != BACKGROUND && p[0].abs_diff(p[2]) < 25 && p[0].abs_diff(p[1]) < 25 && p[0] > 60
}

/// A point of the front face (y = LO) off its diagonal and away from its edges, in front of
/// the particle.
const INSIDE: Vec3 = [0.4, LO, 0.6];

#[test]
fn solid_box_hides_the_particle() {
    let (img, cam) = draw(MeshMode::Solid);
    let (x, y) = pixel(&cam, INSIDE);
    assert!(greyish(img.get(x, y)), "{:?}", img.get(x, y));
}

#[test]
fn hidden_box_shows_the_particle() {
    let (img, cam) = draw(MeshMode::Hidden);
    let (x, y) = pixel(&cam, INSIDE);
    assert!(reddish(img.get(x, y)), "{:?}", img.get(x, y));
    // Nothing of the box is drawn: outside the particle, inside the box outline, background.
    let (x, y) = pixel(&cam, [LO + 0.03, LO, HI - 0.03]);
    assert_eq!(img.get(x, y), BACKGROUND);
}

#[test]
fn transparent_box_shows_the_particle_through_its_wall() {
    let (img, cam) = draw(MeshMode::Transparent);
    let (hidden, _) = draw(MeshMode::Hidden);
    let (solid, _) = draw(MeshMode::Solid);
    let (x, y) = pixel(&cam, INSIDE);
    let (c, bare, wall) = (img.get(x, y), hidden.get(x, y), solid.get(x, y));
    assert!(reddish(c), "particle not visible through the wall: {c:?}");
    // The wall is there too: the colour lies between the bare particle and the opaque wall.
    for k in 0..3 {
        let (lo, hi) = (bare[k].min(wall[k]), bare[k].max(wall[k]));
        assert!(
            (lo..=hi).contains(&c[k]),
            "{c:?} not between {bare:?} and {wall:?}"
        );
    }
    assert_ne!(c, bare);
    // Where no particle is behind them, the two walls show over the background.
    let (x, y) = pixel(&cam, [LO + 0.03, LO, HI - 0.03]);
    let c = img.get(x, y);
    assert!(greyish(c) && c[0] > BACKGROUND[0] + 30, "{c:?}");
}

#[test]
fn transparent_opacity_zero_and_one_match_hidden_and_solid_inside() {
    let scene = drum_scene();
    let cam = front_camera(&scene);
    let at = |opacity: f32| {
        let style = MeshStyle {
            mode: MeshMode::Transparent,
            opacity,
        };
        let (x, y) = pixel(&cam, INSIDE);
        render(&scene, &cam, SIZE, SIZE, &style).get(x, y)
    };
    let (x, y) = pixel(&cam, INSIDE);
    assert_eq!(at(0.0), draw(MeshMode::Hidden).0.get(x, y));
    assert_eq!(at(1.0), draw(MeshMode::Solid).0.get(x, y));
}

#[test]
fn wireframe_draws_edges_and_shows_the_particle_between_them() {
    let (img, cam) = draw(MeshMode::Wireframe);
    let (hidden, _) = draw(MeshMode::Hidden);
    let (x, y) = pixel(&cam, INSIDE);
    assert_eq!(
        img.get(x, y),
        hidden.get(x, y),
        "face interior not see-through"
    );

    // Inside the front face's outline: mostly particle or background, some edge pixels
    // (the front diagonal, the back face's outline and diagonal, the side faces' edges).
    let (x0, y0) = pixel(&cam, [LO, LO, HI]);
    let (x1, y1) = pixel(&cam, [HI, LO, LO]);
    let (mut edge, mut total) = (0usize, 0usize);
    for py in y0 + 3..y1 - 3 {
        for px in x0 + 3..x1 - 3 {
            let c = img.get(px, py);
            total += 1;
            if c == MESH_COLOR {
                edge += 1;
            } else {
                assert!(c == BACKGROUND || reddish(c), "({px}, {py}): {c:?}");
            }
        }
    }
    let frac = edge as f64 / total as f64;
    assert!(frac > 0.005 && frac < 0.15, "edge pixels {frac:.3}");

    // The front face's left edge (x = LO) at mid-height: an edge pixel within a pixel of it,
    // and none away from every edge.
    let (ex, ey) = pixel(&cam, [LO, LO, 0.5]);
    assert!(
        (ex.saturating_sub(1)..=ex + 1).any(|px| img.get(px, ey) == MESH_COLOR),
        "left edge not drawn near x = {ex}"
    );
    let (gx, gy) = pixel(&cam, [LO + 0.06, LO, 0.5]);
    assert_ne!(img.get(gx, gy), MESH_COLOR);
}

#[test]
fn transparent_walls_are_blended_once_along_their_diagonals() {
    let mut scene = drum_scene();
    scene.centers.clear();
    scene.radii.clear();
    scene.colors.clear();
    let cam = front_camera(&scene);
    let style = MeshStyle {
        mode: MeshMode::Transparent,
        ..MeshStyle::default()
    };
    let img = render(&scene, &cam, SIZE, SIZE, &style);
    // Inside the back face's outline every pixel sees the same two flat walls, including the
    // pixels on the diagonals shared by each wall's two triangles.
    let (x0, y0) = pixel(&cam, [LO, HI, HI]);
    let (x1, y1) = pixel(&cam, [HI, HI, LO]);
    let first = img.get(x0 + 2, y0 + 2);
    for py in y0 + 2..y1 - 2 {
        for px in x0 + 2..x1 - 2 {
            assert_eq!(img.get(px, py), first, "({px}, {py})");
        }
    }
}
