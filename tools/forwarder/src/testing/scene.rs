//! A solver stand-in that publishes one fixed scene (particles with velocities, species and
//! radii, meshes with body transforms) over and over, answering commands like
//! [`FakeSolver`](super::FakeSolver). The browser tests draw it and check pixels.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use shm_protocol::layout::SpeciesMethod;
use shm_protocol::{
    BodyTransform, Capacities, Command, CreateOptions, FieldKind, MeshStatic, Publisher,
    SolverState, SpeciesRecord, StaticData,
};

/// What the scene solver publishes, every frame the same (but for step and time).
#[derive(Clone, Debug, Default)]
pub struct Scene {
    pub positions: Vec<[f32; 3]>,
    pub velocities: Vec<[f32; 3]>,
    pub species: Vec<u32>,
    /// [m]
    pub radii: Vec<f32>,
    /// Species names (records with radius 0.01 m, density 1000 kg/m^3).
    pub species_names: Vec<String>,
    /// Body-frame triangles, one mesh per entry.
    pub meshes: Vec<MeshStatic>,
    /// One per mesh.
    pub bodies: Vec<BodyTransform>,
    pub world_min: [f64; 3],
    pub world_max: [f64; 3],
    /// Each species' method (empty: every species DEM); SPH methods make an SPH scene.
    pub methods: Vec<SpeciesMethod>,
    /// One per particle: the frames carry pressures (an SPH scene's colouring).
    pub pressures: Option<Vec<f32>>,
}

/// The publisher thread; stops and removes the segment on drop.
pub struct SceneSolver {
    name: String,
    stop: Arc<AtomicBool>,
    paused: Arc<AtomicBool>,
    /// Commands received, in order.
    pub commands: Arc<Mutex<Vec<Command>>>,
    thread: Option<JoinHandle<()>>,
}

impl SceneSolver {
    pub fn start(name: &str, scene: Scene) -> Self {
        let n = scene.positions.len();
        let mut caps = Capacities::for_particles(n as u64);
        caps.fields = FieldKind::Position.bit() | FieldKind::Velocity.bit();
        if scene.pressures.is_some() {
            caps.fields |= FieldKind::Pressure.bit();
        }
        caps.max_bodies = scene.meshes.len() as u32;
        caps.max_triangles = scene.meshes.iter().map(|m| m.triangles.len() as u64).sum();
        let mut p =
            Publisher::create(name, caps, CreateOptions::default()).expect("create segment");
        p.write_static(&StaticData {
            config_toml: "[case]\nname = \"browser-scene\"\n".into(),
            species: scene
                .species_names
                .iter()
                .enumerate()
                .map(|(k, s)| match scene.methods.get(k) {
                    Some(&m) if m != SpeciesMethod::Dem => SpeciesRecord {
                        method: m as u32,
                        ..SpeciesRecord::named(s, 0.01, 1000.0)
                    },
                    _ => SpeciesRecord::dem(s, 0.01, 1000.0, Default::default()),
                })
                .collect(),
            particle_ids: (0..n as u32).collect(),
            particle_species: scene.species.clone(),
            particle_radius: scene.radii.clone(),
            meshes: scene.meshes.clone(),
            world_min: scene.world_min,
            world_max: scene.world_max,
            ..StaticData::default()
        })
        .expect("write static");
        p.set_state(SolverState::Running);
        let stop = Arc::new(AtomicBool::new(false));
        let paused = Arc::new(AtomicBool::new(false));
        let commands = Arc::new(Mutex::new(Vec::new()));
        let ctx = (stop.clone(), paused.clone(), commands.clone());
        let thread = std::thread::spawn(move || run(p, scene, ctx));
        Self {
            name: name.into(),
            stop,
            paused,
            commands,
            thread: Some(thread),
        }
    }

    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::Acquire)
    }
}

impl Drop for SceneSolver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = shm_protocol::segment::unlink(&self.name);
    }
}

type Ctx = (Arc<AtomicBool>, Arc<AtomicBool>, Arc<Mutex<Vec<Command>>>);

fn run(p: Publisher, scene: Scene, (stop, paused, commands): Ctx) {
    let mut step = 0u64;
    while !stop.load(Ordering::Acquire) {
        super::answer_commands(&p, &commands, &paused);
        p.heartbeat();
        if paused.load(Ordering::Acquire) {
            p.wait_for_command(Duration::from_millis(20));
            continue;
        }
        step += 1;
        let mut w = p
            .begin_frame(scene.positions.len() as u64)
            .expect("begin frame");
        w.step = step;
        w.sim_time = step as f64 * 1e-3;
        w.dt = 1e-3;
        w.write_vec3(FieldKind::Position, &scene.positions)
            .expect("positions");
        w.write_vec3(FieldKind::Velocity, &scene.velocities)
            .expect("velocities");
        if let Some(p) = &scene.pressures {
            w.scalar_mut(FieldKind::Pressure)
                .expect("pressures")
                .copy_from_slice(p);
        }
        w.set_bodies(&scene.bodies).expect("bodies");
        w.commit();
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = p.close(SolverState::Finished, true);
}
