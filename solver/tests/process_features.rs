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
