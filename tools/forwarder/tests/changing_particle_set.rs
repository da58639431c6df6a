//! A run whose particle set changes, served by the forwarder: frames carrying `particle_id`
//! (ids 1, 3, 4 of five static particles of two species) and the outflow counters reach a
//! `RemoteSource` (binary protocol) and the browser's WebSocket JSON intact, and the remote side
//! finds each element's species and radius by id.

mod common;

use common::{forwarder_exe, Ws, T};
use forwarder::testing::{unique_name, ForwarderProcess};
use forwarder::RemoteSource;
use shm_protocol::{
    Capacities, CreateOptions, FieldKind, FrameSource, Publisher, SolverState, StaticData,
    WaitOutcome,
};

/// Unlinks the segment when the test ends, passed or not.
struct Unlink(String);
impl Drop for Unlink {
    fn drop(&mut self) {
        let _ = shm_protocol::segment::unlink(&self.0);
    }
}

fn publish(name: &str) -> Publisher {
    let mut caps = Capacities::for_particles(5);
    caps.fields = FieldKind::Position.bit() | FieldKind::ParticleId.bit();
    let mut p = Publisher::create(name, caps, CreateOptions::default()).expect("create segment");
    p.write_static(&StaticData {
        particle_ids: (0..5).collect(),
        particle_species: vec![0, 1, 0, 1, 0],
        particle_radius: vec![0.01, 0.02, 0.03, 0.04, 0.05],
        world_min: [0.0; 3],
        world_max: [1.0; 3],
        ..StaticData::default()
    })
    .expect("static");
    p.set_state(SolverState::Running);
    let ids = [1u32, 3, 4];
    let mut w = p.begin_frame(ids.len() as u64).expect("begin frame");
    w.step = 10;
    w.sim_time = 0.25;
    (w.removed_count, w.removed_mass) = (2, 0.75);
    w.write_vec3(
        FieldKind::Position,
        &[[0.2, 0.5, 0.5], [0.5, 0.5, 0.5], [0.8, 0.5, 0.5]],
    )
    .expect("positions");
    w.particle_ids_mut()
        .expect("particle_id reserved")
        .copy_from_slice(&ids);
    w.commit();
    p.heartbeat();
    p
}

#[test]
fn ids_and_outflow_counters_reach_remote_clients() {
    let name = unique_name("set");
    let _unlink = Unlink(name.clone());
    let _p = publish(&name);
    let fw = ForwarderProcess::start(forwarder_exe(), &name, &[]);

    let fields = FieldKind::Position.bit() | FieldKind::ParticleId.bit();
    let mut src = RemoteSource::connect_fields(&fw.addr, None, fields).expect("connect");
    assert!(matches!(
        src.wait_newer(0, T).expect("wait"),
        WaitOutcome::Newer(_)
    ));
    let f = src.read_newest().expect("read").expect("a frame");
    let st = src.read_static().expect("static");
    assert_eq!(f.meta.particle_count, 3);
    assert_eq!(st.particle_ids.len(), 5);
    assert_eq!(f.particle_ids.as_deref(), Some(&[1, 3, 4][..]));
    assert_eq!((f.meta.removed_count, f.meta.removed_mass), (2, 0.75));
    let ids = f.particle_ids.as_deref();
    let species = StaticData::per_element(&st.particle_species, ids).expect("species");
    let radii = StaticData::per_element(&st.particle_radius, ids).expect("radii");
    assert_eq!(species[..], [1, 1, 0]);
    assert_eq!(radii[..], [0.02, 0.04, 0.05]);

    // The browser's view: the counters are in the frame header's JSON.
    let mut ws = Ws::connect(&fw.addr);
    ws.hello("");
    let frame = ws.next_of("Frame").expect("a frame over WebSocket");
    assert_eq!(frame["meta"]["particle_count"], 3);
    assert_eq!(frame["meta"]["removed_count"], 2);
    assert_eq!(frame["meta"]["removed_mass"], 0.75);
}
