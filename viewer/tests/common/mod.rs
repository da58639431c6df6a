//! Shared helpers: a segment published by this test process, running the viewer, decoding PNGs.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Output;

use shm_protocol::layout::{SpeciesMethod, SPECIES_PARAMS};
use shm_protocol::{
    BodyTransform, Capacities, CreateOptions, FieldKind, MeshStatic, Publisher, SolverState,
    SpeciesRecord, StaticData,
};

pub const BACKGROUND: [u8; 3] = [24, 26, 32];

/// A segment that is unlinked when dropped.
pub struct Seg {
    pub name: String,
    pub publisher: Publisher,
}

impl Drop for Seg {
    fn drop(&mut self) {
        let _ = shm_protocol::segment::unlink(&self.name);
    }
}

pub fn unique_name(tag: &str) -> String {
    format!("pshm-vw-{}-{tag}", std::process::id())
}

/// One particle of a test frame.
#[derive(Clone, Copy)]
pub struct P {
    pub pos: [f32; 3],
    pub vel: [f32; 3],
    pub species: u32,
    pub radius: f32,
}

/// A lattice of particles filling `[lo, hi]` with spacing `2 r`; species 1 where x >= split_x.
pub fn block(lo: [f32; 3], hi: [f32; 3], r: f32, split_x: f32) -> Vec<P> {
    let mut out = Vec::new();
    let steps = |k: usize| (((hi[k] - lo[k]) / (2.0 * r)).floor() as usize).max(1);
    for i in 0..steps(0) {
        for j in 0..steps(1) {
            for k in 0..steps(2) {
                let pos = [
                    lo[0] + r + 2.0 * r * i as f32,
                    lo[1] + r + 2.0 * r * j as f32,
                    lo[2] + r + 2.0 * r * k as f32,
                ];
                out.push(P {
                    pos,
                    vel: [0.0; 3],
                    species: u32::from(pos[0] >= split_x),
                    radius: r,
                });
            }
        }
    }
    out
}

/// A square plate of side 0.2 in the body's x-z plane, centred on the body origin.
pub fn plate() -> MeshStatic {
    let (a, b) = (-0.1f32, 0.1f32);
    MeshStatic {
        name: "plate".into(),
        triangles: vec![
            [a, 0.0, a, b, 0.0, a, b, 0.0, b],
            [a, 0.0, a, b, 0.0, b, a, 0.0, b],
        ],
    }
}

/// The closed box [lo, hi] as 12 triangles (each face cut along a diagonal), in body
/// coordinates: with the identity transform it sits where it is given.
pub fn closed_box(lo: [f32; 3], hi: [f32; 3]) -> MeshStatic {
    let c = |i: usize| -> [f32; 3] {
        std::array::from_fn(|k| if i >> k & 1 == 0 { lo[k] } else { hi[k] })
    };
    // Faces as corner indices (bit 0: x, bit 1: y, bit 2: z), in order around each face.
    let faces = [
        [0, 1, 5, 4],
        [2, 3, 7, 6],
        [0, 2, 6, 4],
        [1, 3, 7, 5],
        [0, 1, 3, 2],
        [4, 5, 7, 6],
    ];
    let tri = |a: usize, b: usize, d: usize| -> [f32; 9] {
        let (a, b, d) = (c(a), c(b), c(d));
        [a[0], a[1], a[2], b[0], b[1], b[2], d[0], d[1], d[2]]
    };
    MeshStatic {
        name: "closed box".into(),
        triangles: faces
            .iter()
            .flat_map(|f| [tri(f[0], f[1], f[2]), tri(f[0], f[2], f[3])])
            .collect(),
    }
}

/// Creates a segment with world box [0,1]^3, two species, the given particles and meshes.
pub fn create(tag: &str, particles: &[P], meshes: Vec<MeshStatic>) -> Seg {
    create_reserving(tag, particles, meshes, 0)
}

/// [`create`] reserving `extra_fields` (a `FieldKind` bit mask) besides the default fields.
pub fn create_reserving(
    tag: &str,
    particles: &[P],
    meshes: Vec<MeshStatic>,
    extra_fields: u32,
) -> Seg {
    let name = unique_name(tag);
    let _ = shm_protocol::segment::unlink(&name);
    let mut caps = Capacities::for_particles(particles.len().max(1) as u64);
    caps.fields |= extra_fields;
    caps.max_bodies = meshes.len().max(1) as u32;
    caps.max_triangles = meshes
        .iter()
        .map(|m| m.triangles.len() as u64)
        .sum::<u64>()
        .max(1);
    let mut publisher =
        Publisher::create(&name, caps, CreateOptions::default()).expect("create segment");
    let st = StaticData {
        config_toml: String::new(),
        species: vec![
            SpeciesRecord::named("glass", 0.01, 2500.0),
            SpeciesRecord::named("steel", 0.01, 2500.0),
        ],
        particle_ids: (0..particles.len() as u32).collect(),
        particle_species: particles.iter().map(|p| p.species).collect(),
        particle_radius: particles.iter().map(|p| p.radius).collect(),
        meshes,
        world_min: [0.0; 3],
        world_max: [1.0; 3],
        cell_size: 0.0,
        generation: 0,
    };
    publisher.write_static(&st).expect("static");
    publisher.set_state(SolverState::Running);
    Seg { name, publisher }
}

/// Publishes a frame with these particles (same count as the static data) and bodies.
pub fn publish(seg: &mut Seg, particles: &[P], bodies: &[BodyTransform], step: u64) {
    let mut w = seg
        .publisher
        .begin_frame(particles.len() as u64)
        .expect("begin frame");
    w.step = step;
    w.sim_time = step as f64 * 1e-3;
    w.write_vec3(
        FieldKind::Position,
        &particles.iter().map(|p| p.pos).collect::<Vec<_>>(),
    )
    .expect("positions");
    w.write_vec3(
        FieldKind::Velocity,
        &particles.iter().map(|p| p.vel).collect::<Vec<_>>(),
    )
    .expect("velocities");
    w.set_bodies(bodies).expect("bodies");
    w.commit();
}

/// Publishes a frame of a run whose particle set changes: the live particles `live`, whose
/// ids (indices into the static section, ascending) are `ids`, and the outflow counters.
pub fn publish_live(seg: &mut Seg, live: &[P], ids: &[u32], removed: (u64, f64), step: u64) {
    assert_eq!(live.len(), ids.len());
    let mut w = seg
        .publisher
        .begin_frame(live.len() as u64)
        .expect("begin frame");
    w.step = step;
    w.sim_time = step as f64 * 1e-3;
    (w.removed_count, w.removed_mass) = removed;
    w.write_vec3(
        FieldKind::Position,
        &live.iter().map(|p| p.pos).collect::<Vec<_>>(),
    )
    .expect("positions");
    w.particle_ids_mut()
        .expect("particle_id reserved")
        .copy_from_slice(ids);
    w.commit();
}

pub fn viewer(args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_viewer"))
        .args(args)
        .output()
        .expect("run viewer")
}

pub fn out_path(file: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pshm-viewer-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir.join(file)
}

/// A decoded RGB image.
pub struct Png {
    pub width: usize,
    pub height: usize,
    pub rgb: Vec<[u8; 3]>,
}

impl Png {
    pub fn read(path: &Path) -> Png {
        let file = std::fs::File::open(path).expect("open png");
        let mut dec = png::Decoder::new(std::io::BufReader::new(file));
        dec.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
        let mut reader = dec.read_info().expect("png header");
        let mut buf = vec![0; reader.output_buffer_size().expect("size")];
        let info = reader.next_frame(&mut buf).expect("png data");
        let ch = info.color_type.samples();
        let rgb = buf[..info.buffer_size()]
            .chunks(ch)
            .map(|c| [c[0], c[1], c[2]])
            .collect();
        Png {
            width: info.width as usize,
            height: info.height as usize,
            rgb,
        }
    }
    pub fn at(&self, x: usize, y: usize) -> [u8; 3] {
        self.rgb[y * self.width + x]
    }
    /// Pixels of the rectangle [x0, x1) x [y0, y1).
    pub fn region(&self, x0: usize, y0: usize, x1: usize, y1: usize) -> Vec<[u8; 3]> {
        (y0..y1)
            .flat_map(|y| (x0..x1).map(move |x| (x, y)))
            .map(|(x, y)| self.at(x, y))
            .collect()
    }
}

pub fn fraction(px: &[[u8; 3]], pred: impl Fn(&[u8; 3]) -> bool) -> f64 {
    px.iter().filter(|p| pred(p)).count() as f64 / px.len().max(1) as f64
}

/// Front camera at distance `dist` from the box centre (0.5, 0.5, 0.5), vertical field of view
/// 35 degrees (the viewer's): pixel of world point `p` in a `w` x `h` image.
pub fn project_front(p: [f32; 3], dist: f32, w: usize, h: usize) -> (f32, f32) {
    let depth = dist + (p[1] - 0.5);
    let scale = 0.5 * h as f32 / (17.5f32).to_radians().tan();
    (
        0.5 * w as f32 + (p[0] - 0.5) / depth * scale,
        0.5 * h as f32 - (p[2] - 0.5) / depth * scale,
    )
}

/// Pixel rectangle covering the world box [lo, hi] seen by `project_front`, shrunk by `margin`.
pub fn rect_front(
    lo: [f32; 3],
    hi: [f32; 3],
    dist: f32,
    w: usize,
    h: usize,
    margin: f32,
) -> (usize, usize, usize, usize) {
    let mid_y = 0.5 * (lo[1] + hi[1]);
    let (x0, y1) = project_front([lo[0], mid_y, lo[2]], dist, w, h);
    let (x1, y0) = project_front([hi[0], mid_y, hi[2]], dist, w, h);
    (
        (x0 + margin) as usize,
        (y0 + margin) as usize,
        (x1 - margin) as usize,
        (y1 - margin) as usize,
    )
}

// SPH segments (species of the methods sph_fluid and sph_boundary, frames with density,
// pressure and particle kind).

/// A species record of an SPH method: radius `r` (half the spacing), rest density 1000,
/// params [c0, alpha, h] as the solver writes them.
pub fn sph_species(name: &str, method: SpeciesMethod, r: f64) -> SpeciesRecord {
    let mut params = [0.0; SPECIES_PARAMS];
    params[..3].copy_from_slice(&[20.0, 0.1, 2.0 * r * 3f64.sqrt()]);
    SpeciesRecord {
        method: method as u32,
        params,
        ..SpeciesRecord::named(name, r, 1000.0)
    }
}

/// Radius of the hand-built SPH particles (spacing 2 SPH_R) [m].
pub const SPH_R: f32 = 0.02;
pub const FLUID_LO: [f32; 3] = [0.3, 0.3, 0.1];
pub const FLUID_HI: [f32; 3] = [0.7, 0.7, 0.5];
/// Wall pressure: far above the fluid's, so a range that included it would flatten the fluid.
pub const WALL_PRESSURE: f32 = 1e5;

/// A hand-built SPH frame in the unit box: a fluid block FLUID_LO..FLUID_HI (spacing 2 SPH_R) with
/// hydrostatic pressure 1000 * 9.81 * (0.5 - z), inside a closed shell (one layer, lid
/// included) of boundary particles around [0.2, 0.8]^2 x [0, 0.92] at WALL_PRESSURE.
/// Species 0 fluid, 1 boundary; kinds 1 and 2.
pub fn sph_frame() -> (Vec<[f32; 3]>, Vec<u32>, Vec<f32>) {
    let fluid = block(FLUID_LO, FLUID_HI, SPH_R, 2.0);
    let (lo, hi) = ([0.18, 0.18, 0.0], [0.82, 0.82, 0.92]);
    let shell: Vec<P> = block(lo, hi, SPH_R, 2.0)
        .into_iter()
        .filter(|p| {
            (0..3).any(|k| p.pos[k] < lo[k] + 2.0 * SPH_R || p.pos[k] > hi[k] - 2.0 * SPH_R)
        })
        .collect();
    let mut pos = Vec::new();
    let (mut kinds, mut pressure) = (Vec::new(), Vec::new());
    for p in &fluid {
        pos.push(p.pos);
        kinds.push(1);
        pressure.push(1000.0 * 9.81 * (0.5 - p.pos[2]));
    }
    for p in &shell {
        pos.push(p.pos);
        kinds.push(2);
        pressure.push(WALL_PRESSURE);
    }
    (pos, kinds, pressure)
}

/// Publishes [`sph_frame`] as an SPH segment would carry it.
pub fn publish_sph(tag: &str) -> (Seg, usize) {
    let (pos, kinds, pressure) = sph_frame();
    let n = pos.len();
    let name = unique_name(tag);
    let _ = shm_protocol::segment::unlink(&name);
    let mut caps = Capacities::for_particles(n as u64);
    caps.fields = [
        FieldKind::Position,
        FieldKind::Velocity,
        FieldKind::Density,
        FieldKind::Pressure,
        FieldKind::ParticleKind,
    ]
    .iter()
    .fold(0, |m, f| m | f.bit());
    let mut publisher =
        Publisher::create(&name, caps, CreateOptions::default()).expect("create segment");
    publisher
        .write_static(&StaticData {
            species: vec![
                sph_species("fluid", SpeciesMethod::SphFluid, SPH_R as f64),
                sph_species("boundary", SpeciesMethod::SphBoundary, SPH_R as f64),
            ],
            particle_ids: (0..n as u32).collect(),
            particle_species: kinds.iter().map(|&k| u32::from(k == 2)).collect(),
            particle_radius: vec![SPH_R; n],
            world_min: [0.0; 3],
            world_max: [1.0; 3],
            ..Default::default()
        })
        .expect("static");
    publisher.set_state(SolverState::Running);
    let mut w = publisher.begin_frame(n as u64).expect("begin frame");
    w.step = 1;
    w.write_vec3(FieldKind::Position, &pos).expect("positions");
    w.write_vec3(FieldKind::Velocity, &vec![[0.0; 3]; n])
        .expect("velocities");
    w.scalar_mut(FieldKind::Density)
        .expect("density")
        .fill(1000.0);
    w.scalar_mut(FieldKind::Pressure)
        .expect("pressure")
        .copy_from_slice(&pressure);
    w.particle_kinds_mut()
        .expect("kinds")
        .copy_from_slice(&kinds);
    w.commit();
    let fluid = kinds.iter().filter(|&&k| k == 1).count();
    (Seg { name, publisher }, fluid)
}
