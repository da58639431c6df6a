//! Process features (issue 20): timed motion, per-pair and per-face interaction properties,
//! shaped sources and size distributions, each checked against what an engineer would measure.

mod common;
use common::*;
use solver::case::{Case, MeshSpec, Source};
use solver::core::geometry::{Motion, Segment};
use solver::exec::sim::BackendKind;

/// A 0.1 m square column of spheres resting on a trapdoor at z = 0.1 m (two triangles spanning
/// the box, hinged at x = 0), which holds until `open_at` and then swings down by 90 degrees
/// over 0.25 s.
fn trapdoor_case(open_at: f64) -> Case {
    let r = 0.004;
    let mut case = base_case(
        "trapdoor",
        linear_species("s", r, 2500.0, 2e3, 0.3, 0.5, 0.0),
        linear_wall(2e3, 0.3, 0.5, 0.0),
        5e-5,
        [0.0, 0.0, 0.0],
        [0.1, 0.1, 0.3],
        true,
    );
    case.sources.push(Source::Grid {
        species: "s".into(),
        min: [0.0, 0.0, 0.11],
        max: [0.1, 0.1, 0.2],
        spacing: 0.0105,
        count: Some(150),
        jitter: 0.3,
        seed: 3,
        velocity: [0.0; 3],
    });
    let z = 0.1;
    case.meshes.push(MeshSpec {
        name: "gate".into(),
        stl: None,
        triangles: Some(vec![
            [[0.0, 0.0, z], [0.1, 0.0, z], [0.1, 0.1, z]],
            [[0.0, 0.0, z], [0.1, 0.1, z], [0.0, 0.1, z]],
        ]),
        scale: 1.0,
        material: None,
        // 60 rpm for 0.25 s = a quarter turn; +y turns the free edge (x = 0.1) downwards.
        motion: Motion::Schedule {
            segments: vec![
                Segment::Hold {
                    start: 0.0,
                    end: open_at,
                },
                Segment::Rotation {
                    start: open_at,
                    end: Some(open_at + 0.25),
                    axis_point: [0.0, 0.05, z],
                    axis_direction: [0.0, 1.0, 0.0],
                    rpm: 60.0,
                    rpm_end: None,
                },
            ],
        },
    });
    case.end_time = open_at + 0.5;
    case
}

/// A gate that opens at t = 0.5 s releases nothing before: every particle stays above it until
/// then (the bed settles on it), and after it has swung open most of them have fallen through.
#[test]
fn gate_opening_at_half_a_second_releases_nothing_before() {
    for (name, kind) in backends() {
        gate(&name, &kind);
    }
}

fn gate(name: &str, kind: &BackendKind) {
    let open_at = 0.5;
    let case = trapdoor_case(open_at);
    let dt = case.dt;
    let mut sim = start_sim(name, kind, case);
    let lowest = |sim: &solver::Simulation| {
        let s = sim.snapshot().unwrap();
        let r = 0.004;
        s.pos.iter().map(|p| p[2] - r).fold(f64::INFINITY, f64::min)
    };
    // Up to the opening, in 0.05 s chunks: the gate is at rest in its initial pose and no
    // particle passes it.
    let chunk = (0.05 / dt).round() as u64;
    let mut lowest_before = f64::INFINITY;
    while sim.time() + 0.5 * dt < open_at {
        let n = chunk.min(((open_at - sim.time()) / dt).round() as u64);
        steps(&mut sim, name, n);
        let tr = sim.mesh_transforms()[0];
        assert_eq!(
            tr.omega,
            [0.0; 3],
            "[{name}] gate moved at t = {}",
            sim.time()
        );
        assert_eq!(
            tr.translation,
            [0.0; 3],
            "[{name}] gate moved at t = {}",
            sim.time()
        );
        lowest_before = lowest_before.min(lowest(&sim));
    }
    println!("[{name}] lowest particle surface before the opening: z = {lowest_before:.5} m");
    assert!(
        lowest_before > 0.1 - 0.001,
        "[{name}] a particle went below the closed gate (z = {lowest_before})"
    );
    // The door swings open during 0.25 s; 0.25 s later most particles lie below its hinge.
    steps(&mut sim, name, (0.5 / dt).round() as u64);
    let s = sim.snapshot().unwrap();
    let below = s.pos.iter().filter(|p| p[2] < 0.1).count();
    println!(
        "[{name}] 0.5 s after the opening: {below} of {} particles below the hinge",
        s.pos.len()
    );
    assert!(
        below * 10 >= s.pos.len() * 8,
        "[{name}] only {below} of {} particles fell through the open gate",
        s.pos.len()
    );
}

/// Walls face by face: a box open at the top whose floor has its own material (restitution 0.9
/// where the other faces have 0.3; the spheres have 0.9, pairs take the mean). A sphere thrown
/// at the floor rebounds at 0.9 of its impact speed (the linear model's restitution is exact
/// without gravity), one thrown at the x_max wall at 0.6, and one thrown upwards leaves through
/// the open top.
#[test]
fn walls_face_by_face_with_their_own_material() {
    for (name, kind) in backends() {
        faces(&name, &kind);
    }
}

fn faces(name: &str, kind: &BackendKind) {
    let r = 0.01;
    let box_case = |pos: [f64; 3], vel: [f64; 3]| {
        let mut case = base_case(
            "open-top",
            linear_species("s", r, 2500.0, 1e4, 0.9, 0.3, 0.0),
            linear_wall(1e4, 0.3, 0.3, 0.0),
            2e-5,
            [0.0, 0.0, 0.0],
            [0.5, 0.5, 0.5],
            true,
        );
        case.domain.walls = solver::case::Walls(0b01_1111);
        case.domain.face_materials.z_min = Some(linear_wall(1e4, 0.9, 0.3, 0.0));
        case.sources.push(single("s", pos, vel, r));
        case.gravity = [0.0; 3];
        case
    };
    // Floor: rebound ratio 0.9, not the 0.6 of the other faces.
    let sim = start_sim(name, kind, box_case([0.25, 0.25, 0.02], [0.0, 0.0, -1.0]));
    let (_, e) = contact_episode(
        name,
        sim,
        |s| s.snapshot().unwrap().pos[0][2] - r,
        |s| -s.snapshot().unwrap().vel[0][2],
    );
    println!("[{name}] floor with its own material: rebound ratio {e:.5}");
    assert!(
        (e - 0.9).abs() < 0.01,
        "[{name}] floor restitution {e}, expected 0.9"
    );
    // Side wall: the mean of the sphere's and wall_material's restitution.
    let sim = start_sim(name, kind, box_case([0.45, 0.25, 0.25], [1.0, 0.0, 0.0]));
    let (_, e) = contact_episode(
        name,
        sim,
        |s| 0.5 - s.snapshot().unwrap().pos[0][0] - r,
        |s| s.snapshot().unwrap().vel[0][0],
    );
    println!("[{name}] x_max wall: rebound ratio {e:.5}");
    assert!(
        (e - 0.6).abs() < 0.01,
        "[{name}] side restitution {e}, expected 0.6"
    );
    // Open top: a sphere thrown upwards passes z = 0.5 unhindered.
    let mut sim = start_sim(name, kind, box_case([0.25, 0.25, 0.4], [0.0, 0.0, 2.0]));
    steps(&mut sim, name, (0.2 / 2e-5) as u64);
    let s = sim.snapshot().unwrap();
    println!(
        "[{name}] open top: z = {:.4}, vz = {:.4}",
        s.pos[0][2], s.vel[0][2]
    );
    assert!(
        (s.pos[0][2] - 0.8).abs() < 1e-6 && s.vel[0][2] == 2.0,
        "[{name}] the open top stopped the sphere: z = {}, vz = {}",
        s.pos[0][2],
        s.vel[0][2]
    );
}
