//! Shared fixtures of the analysis and Python-reader tests: a unique segment name removed on
//! drop, and a small known configuration written with the real `Publisher`.
#![allow(dead_code)]

use shm_protocol::*;

/// A segment name unique to this test process, removed when dropped.
pub struct Name(pub String);

impl Name {
    pub fn new(tag: &str) -> Self {
        Self(format!("pshm-an-{}-{tag}", std::process::id()))
    }
}

impl Drop for Name {
    fn drop(&mut self) {
        let _ = segment::unlink(&self.0);
    }
}

pub const GLASS_DENSITY: f64 = 2500.0;
pub const STEEL_DENSITY: f64 = 7800.0;

pub fn species(name: &str, radius: f64, density: f64) -> SpeciesRecord {
    let material = shm_protocol::layout::DemMaterial {
        young_modulus: 1e7,
        poisson_ratio: 0.3,
        restitution: 0.5,
        sliding_friction: 0.4,
        rolling_friction: 0.01,
        normal_stiffness: 0.0,
    };
    SpeciesRecord::dem(name, radius, density, material)
}

/// Four particles in the unit box: two overlapping glass beads low down, two steel balls.
pub struct Known {
    pub radii: Vec<f32>,
    pub species: Vec<u32>,
    pub positions: Vec<[f32; 3]>,
    pub velocities: Vec<[f32; 3]>,
    pub angular: Vec<[f32; 3]>,
}

pub fn known() -> Known {
    Known {
        radii: vec![0.01, 0.01, 0.02, 0.02],
        species: vec![0, 0, 1, 1],
        positions: vec![
            [0.1, 0.1, 0.05],
            [0.115, 0.1, 0.05],
            [0.5, 0.5, 0.8],
            [0.9, 0.9, 0.3],
        ],
        velocities: vec![[1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, -3.0], [0.0; 3]],
        angular: vec![[0.0, 0.0, 100.0], [0.0; 3], [0.0; 3], [10.0, 0.0, 0.0]],
    }
}

pub fn static_data(k: &Known, config: &str) -> StaticData {
    let n = k.radii.len() as u32;
    StaticData {
        config_toml: config.into(),
        species: vec![
            species("glass", 0.01, GLASS_DENSITY),
            species("steel", 0.02, STEEL_DENSITY),
        ],
        particle_ids: (0..n).map(|i| 100 + i).collect(),
        particle_species: k.species.clone(),
        particle_radius: k.radii.clone(),
        meshes: vec![MeshStatic {
            name: "floor".into(),
            triangles: vec![
                [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0],
                [0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0],
            ],
        }],
        world_min: [0.0; 3],
        world_max: [1.0; 3],
        cell_size: 0.04,
        ..Default::default()
    }
}

/// Creates `name` with the known static data and publishes `frames` frames of the known
/// configuration (frame k: step 100 k, sim_time 0.01 k, positions shifted by k mm in x).
pub fn publish_known(name: &str, frames: u64) -> Publisher {
    let k = known();
    let mut caps = Capacities::for_particles(k.radii.len() as u64);
    caps.max_bodies = 1;
    caps.max_triangles = 2;
    caps.fields |= FieldKind::Force.bit();
    let mut p = Publisher::create(name, caps, CreateOptions::default()).expect("create segment");
    p.write_static(&static_data(&k, "dt = 1e-5\ngravity = [0.0, 0.0, -9.81]\n"))
        .expect("static");
    p.set_state(SolverState::Running);
    p.heartbeat();
    for f in 1..=frames {
        publish_frame(&mut p, f);
    }
    p
}

pub fn publish_frame(p: &mut Publisher, f: u64) {
    let k = known();
    let n = k.radii.len() as u64;
    let mut w = p.begin_frame(n).expect("begin frame");
    w.step = 100 * f;
    w.sim_time = 0.01 * f as f64;
    w.dt = 1e-5;
    let shift = 0.001 * (f - 1) as f32;
    let pos: Vec<[f32; 3]> = k
        .positions
        .iter()
        .map(|x| [x[0] + shift, x[1], x[2]])
        .collect();
    w.write_vec3(FieldKind::Position, &pos).expect("positions");
    w.write_vec3(FieldKind::Velocity, &k.velocities)
        .expect("velocities");
    w.write_vec3(FieldKind::AngularVelocity, &k.angular)
        .expect("angular");
    w.write_vec3(FieldKind::Force, &[[0.0, 0.0, 1.0]; 4])
        .expect("forces");
    w.set_bodies(&[BodyTransform::IDENTITY]).expect("bodies");
    w.commit();
    p.heartbeat();
}

/// A run whose particle set changes: five particles in the static section (ids 0..5, species
/// glass, steel, glass, steel, glass; radii below), of which frames hold ids 1, 3, 4.
pub const SET_SPECIES: [u32; 5] = [0, 1, 0, 1, 0];
pub const SET_RADII: [f32; 5] = [0.010, 0.020, 0.015, 0.025, 0.030];
pub const SET_LIVE: [u32; 3] = [1, 3, 4];

/// Creates `name` for the changing-set run (reserving `particle_id`) and publishes `frames`
/// frames of it ([`publish_set_frame`]).
pub fn publish_set(name: &str, frames: u64) -> Publisher {
    let mut caps = Capacities::for_particles(SET_SPECIES.len() as u64);
    caps.fields |= FieldKind::ParticleId.bit();
    let mut p = Publisher::create(name, caps, CreateOptions::default()).expect("create segment");
    p.write_static(&StaticData {
        config_toml: "gravity = [0.0, 0.0, -9.81]\n".into(),
        species: vec![
            species("glass", 0.01, GLASS_DENSITY),
            species("steel", 0.02, STEEL_DENSITY),
        ],
        particle_ids: (0..SET_SPECIES.len() as u32).collect(),
        particle_species: SET_SPECIES.to_vec(),
        particle_radius: SET_RADII.to_vec(),
        world_min: [0.0; 3],
        world_max: [1.0; 3],
        ..Default::default()
    })
    .expect("static");
    p.set_state(SolverState::Running);
    p.heartbeat();
    for f in 1..=frames {
        publish_set_frame(&mut p, f);
    }
    p
}

/// Frame `f` of the changing-set run: ids [`SET_LIVE`] at x = 0.2, 0.5, 0.8, moving at 1 m/s
/// along x; step 100 f, sim_time 0.01 f; `removed_count` f + 1 and `removed_mass` 0.5 f kg
/// (so 50 kg/s between consecutive frames).
pub fn publish_set_frame(p: &mut Publisher, f: u64) {
    let n = SET_LIVE.len();
    let mut w = p.begin_frame(n as u64).expect("begin frame");
    w.step = 100 * f;
    w.sim_time = 0.01 * f as f64;
    w.dt = 1e-5;
    w.removed_count = f + 1;
    w.removed_mass = 0.5 * f as f64;
    w.write_vec3(
        FieldKind::Position,
        &[[0.2, 0.5, 0.1], [0.5, 0.5, 0.2], [0.8, 0.5, 0.3]],
    )
    .expect("positions");
    w.write_vec3(FieldKind::Velocity, &[[1.0, 0.0, 0.0]; 3])
        .expect("velocities");
    w.write_vec3(FieldKind::AngularVelocity, &[[0.0; 3]; 3])
        .expect("angular");
    w.particle_ids_mut()
        .expect("particle_id reserved")
        .copy_from_slice(&SET_LIVE);
    w.commit();
    p.heartbeat();
}
