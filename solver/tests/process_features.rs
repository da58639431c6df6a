//! Process features (issue 20): timed motion, per-pair and per-face interaction properties,
//! shaped sources and size distributions, each checked against what an engineer would measure.

mod common;
use common::*;
use solver::case::{Case, FractionBasis, Integrator, MeshSpec, Shape, Source, SpeciesChoice};
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
        shape: None,
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

/// Shaped sources: a random fill of a cylinder and lattice sites inside it keep every sphere
/// wholly inside, and a lattice fill of the whole cylinder holds the number of sites its volume
/// predicts.
#[test]
fn cylinder_sources_place_whole_spheres_inside() {
    let r = 0.005;
    let mut case = base_case(
        "cylinder",
        linear_species("s", r, 2500.0, 1e4, 0.5, 0.5, 0.0),
        linear_wall(1e4, 0.5, 0.5, 0.0),
        1e-4,
        [-0.2, -0.2, 0.0],
        [0.2, 0.2, 0.6],
        true,
    );
    // A tilted cylinder: axis (1, 0, 2), radius 0.08, length 0.25, from (0, 0, 0.05).
    let shape = Shape::Cylinder {
        base: [0.0, 0.0, 0.05],
        axis: [1.0, 0.0, 2.0],
        radius: 0.08,
        length: 0.25,
    };
    let inside = |p: &[f64; 3]| {
        let u = [1.0 / 5f64.sqrt(), 0.0, 2.0 / 5f64.sqrt()];
        let d = [p[0], p[1], p[2] - 0.05];
        let h = d[0] * u[0] + d[2] * u[2];
        let rho2 = (d[0] - h * u[0]).powi(2) + d[1].powi(2) + (d[2] - h * u[2]).powi(2);
        h >= r - 1e-12 && h <= 0.25 - r + 1e-12 && rho2.sqrt() <= 0.08 - r + 1e-12
    };
    case.sources.push(Source::RandomBox {
        species: "s".into(),
        min: [-0.2, -0.2, 0.0],
        max: [0.2, 0.2, 0.35],
        count: 1500,
        seed: 4,
        velocity: [0.0; 3],
        shape: Some(shape.clone()),
    });
    case.validate().unwrap();
    let placed = case.generate_particles().unwrap();
    assert_eq!(placed.len(), 1500);
    assert!(
        placed.iter().all(|p| inside(&p.position)),
        "a random sphere pokes out"
    );

    case.sources[0] = Source::Grid {
        species: "s".into(),
        min: [-0.2, -0.2, 0.0],
        max: [0.2, 0.2, 0.35],
        spacing: 0.011,
        count: None,
        jitter: 0.0,
        seed: 0,
        velocity: [0.0; 3],
        shape: Some(shape),
    };
    case.validate().unwrap();
    let placed = case.generate_particles().unwrap();
    assert!(
        placed.iter().all(|p| inside(&p.position)),
        "a lattice sphere pokes out"
    );
    // Sites whose centre lies in the cylinder shrunk by r: volume / spacing^3.
    let expect = std::f64::consts::PI * (0.08 - r).powi(2) * (0.25 - 2.0 * r) / 0.011f64.powi(3);
    let n = placed.len() as f64;
    println!("cylinder lattice: {n} sites, volume estimate {expect:.0}");
    assert!(
        (n - expect).abs() < 0.1 * expect,
        "{n} sites, expected about {expect}"
    );
}

/// The inside of a closed mesh: particles poured into the drum of the drum case stay inside its
/// cylinder; an open mesh (the incline's two triangles) is refused with the open edge named.
#[test]
fn mesh_sources_fill_the_inside_of_a_closed_mesh() {
    let mut case = drum_case(0.0);
    let r = case.species[0].radius;
    case.sources.push(Source::RandomBox {
        species: "s".into(),
        min: [-0.32, -0.06, -0.32],
        max: [0.32, 0.06, 0.32],
        count: 2000,
        seed: 9,
        velocity: [0.0; 3],
        shape: Some(Shape::Mesh {
            mesh: Some("drum".into()),
            stl: None,
            scale: 1.0,
        }),
    });
    case.validate().unwrap();
    let placed = case.generate_particles().unwrap();
    assert_eq!(placed.len(), 2000);
    // The 64-gon lies inside the circle of radius 0.3.
    for p in &placed {
        let [x, y, z] = p.position;
        assert!(
            (x * x + z * z).sqrt() <= 0.3 - r + 1e-9 && y.abs() <= 0.05 - r + 1e-9,
            "sphere at {:?} is not inside the drum",
            p.position
        );
    }
    // Spread over the whole drum, not a corner: the centroid near the axis.
    let cx = placed.iter().map(|p| p.position[0]).sum::<f64>() / 2000.0;
    let cz = placed.iter().map(|p| p.position[2]).sum::<f64>() / 2000.0;
    assert!(cx.abs() < 0.02 && cz.abs() < 0.02, "centroid ({cx}, {cz})");
    // A sim starts from it.
    let mut sim = start_sim("cpu", &BackendKind::Cpu, case.clone());
    steps(&mut sim, "cpu", 10);

    let mut open = case.clone();
    open.meshes.push(ramp([1.0, 0.0, 0.0]));
    if let Source::RandomBox { shape, .. } = &mut open.sources[0] {
        *shape = Some(Shape::Mesh {
            mesh: Some("ramp".into()),
            stl: None,
            scale: 1.0,
        });
    }
    let e = open.generate_particles().unwrap_err().to_string();
    assert!(
        e.contains("sources[0].shape")
            && e.contains("not a closed surface")
            && e.contains("1 triangle"),
        "{e}"
    );
}

/// A size distribution by mass: two size classes at mass fractions 0.3 / 0.7 give those mass
/// fractions within 1 % (exact counts), mixed through the whole source (not in layers); by
/// number, the counts are exact.
#[test]
fn size_distributions_give_the_requested_fractions() {
    let mut case = base_case(
        "psd",
        linear_species("fine", 0.002, 2500.0, 1e4, 0.5, 0.5, 0.0),
        linear_wall(1e4, 0.5, 0.5, 0.0),
        1e-5,
        [0.0; 3],
        [0.2, 0.2, 0.4],
        true,
    );
    let mut coarse = case.species[0].clone();
    coarse.name = "coarse".into();
    coarse.radius = 0.004;
    case.species.push(coarse);
    let mix: SpeciesChoice = toml::from_str::<toml::Table>(
        "species = { mass_fractions = { fine = 0.3, coarse = 0.7 } }",
    )
    .unwrap()["species"]
        .clone()
        .try_into()
        .unwrap();
    case.sources.push(Source::Grid {
        species: mix,
        min: [0.0; 3],
        max: [0.2, 0.2, 0.4],
        spacing: 0.0085,
        count: Some(10_000),
        jitter: 0.2,
        seed: 11,
        velocity: [0.0; 3],
        shape: None,
    });
    case.validate().unwrap();
    let placed = case.generate_particles().unwrap();
    assert_eq!(placed.len(), 10_000);
    let mass = |k: u32| {
        let r = [0.002f64, 0.004][k as usize];
        2500.0 * 4.0 / 3.0 * std::f64::consts::PI * r.powi(3)
    };
    let m_fine: f64 = placed
        .iter()
        .filter(|p| p.species == 0)
        .map(|_| mass(0))
        .sum();
    let m_all: f64 = placed.iter().map(|p| mass(p.species)).sum();
    println!("mass fraction of fine: {:.4}", m_fine / m_all);
    assert!(
        (m_fine / m_all - 0.3).abs() < 0.003,
        "fine mass fraction {}",
        m_fine / m_all
    );
    // Mixed: the fine fraction of the lower and the upper half agree.
    let half = |lo: bool| {
        let sel: Vec<_> = placed
            .iter()
            .filter(|p| (p.position[2] < 0.1) == lo)
            .collect();
        sel.iter().filter(|p| p.species == 0).count() as f64 / sel.len() as f64
    };
    assert!(
        (half(true) - half(false)).abs() < 0.05,
        "layered: {} vs {}",
        half(true),
        half(false)
    );

    // By number, random placement, largest first: exact counts.
    case.sources[0] = Source::RandomBox {
        species: SpeciesChoice::Mix {
            basis: FractionBasis::Number,
            fractions: vec![("coarse".into(), 0.25), ("fine".into(), 0.75)],
        },
        min: [0.0; 3],
        max: [0.2, 0.2, 0.4],
        count: 4000,
        seed: 2,
        velocity: [0.0; 3],
        shape: None,
    };
    case.validate().unwrap();
    let placed = case.generate_particles().unwrap();
    assert_eq!(placed.iter().filter(|p| p.species == 1).count(), 1000);
    assert_eq!(placed.iter().filter(|p| p.species == 0).count(), 3000);

    // Fractions that do not add up to 1 are refused, naming the key.
    if let Source::RandomBox { species, .. } = &mut case.sources[0] {
        *species = SpeciesChoice::Mix {
            basis: FractionBasis::Mass,
            fractions: vec![("coarse".into(), 30.0), ("fine".into(), 70.0)],
        };
    }
    let e = case.validate().unwrap_err().to_string();
    assert!(
        e.contains("sources[0].species.mass_fractions.coarse"),
        "{e}"
    );
}

/// Discharged mass over time: removed plus still-live particles below the floor.
fn discharged(sim: &solver::Simulation, m: f64) -> f64 {
    let s = sim.snapshot().unwrap();
    let below = s.pos.iter().filter(|p| p[2] < 0.0).count() as f64;
    sim.flow().removed_mass + below * m
}

/// An outflow region below the orifice gives the same steady discharge rate as a closed bin
/// (what happens below the orifice does not reach up into the silo), the removed mass is the
/// removed count times the particle mass, and the live count falls by the removed count.
#[test]
fn silo_with_outflow_discharges_as_a_closed_bin_does() {
    for (name, kind) in backends() {
        if name == "cuda2" {
            println!("[{name}] outflow regions run on one GPU or the CPU so far");
            continue;
        }
        // One GPU with outflow searches every step: the closed bin too (no Verlet skin), so
        // that both runs are the same silo above the orifice, not two samples of it.
        let kind = match kind {
            BackendKind::Cuda(o) => {
                BackendKind::Cuda(solver::dem::cuda::CudaOptions { skin: 0.0, ..o })
            }
            k => k,
        };
        let m = 2500.0 * 4.0 / 3.0 * std::f64::consts::PI * 0.002f64.powi(3);
        let mut rates = Vec::new();
        for outflow in [false, true] {
            let mut sim = start_sim(&name, &kind, silo_case(outflow));
            let n0 = sim.num_particles();
            steps(&mut sim, &name, 10_000); // 0.2 s: the flow has formed
            let (t1, d1) = (sim.time(), discharged(&sim, m));
            steps(&mut sim, &name, 10_000);
            let (t2, d2) = (sim.time(), discharged(&sim, m));
            let rate = (d2 - d1) / (t2 - t1);
            let f = sim.flow().clone();
            println!(
                "[{name}] silo, {}: discharge {rate:.5} kg/s over [{t1:.2}, {t2:.2}] s; removed {} ({:.5} kg), live {}",
                if outflow { "outflow region" } else { "closed bin" },
                f.removed_count,
                f.removed_mass,
                sim.num_particles()
            );
            if outflow {
                assert!(
                    f.removed_count > 50,
                    "[{name}] only {} removed",
                    f.removed_count
                );
                assert!((f.removed_mass - f.removed_count as f64 * m).abs() < 1e-12);
                assert_eq!(sim.num_particles() as u64, n0 as u64 - f.removed_count);
                let ids = sim.particle_ids();
                assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids not ascending");
            } else {
                assert_eq!(f.removed_count, 0);
                assert_eq!(sim.num_particles(), n0);
            }
            rates.push(rate);
        }
        assert!(rates[0] > 0.0, "[{name}] the silo does not discharge");
        assert!(
            (rates[1] - rates[0]).abs() < 0.1 * rates[0],
            "[{name}] discharge rate with outflow {} vs closed bin {}",
            rates[1],
            rates[0]
        );
    }
}

/// A run with outflow is the same whatever its decomposition (ids, kinematics, history and the
/// removed mass, bit for bit), and a checkpoint of it continues bit for bit, counters included.
#[test]
fn outflow_runs_are_decomposition_independent_and_restart_exactly() {
    let run = |subdomains: u32| {
        let mut case = silo_case(true);
        case.decomposition.subdomains = subdomains;
        let mut sim = solver::Simulation::new(case).unwrap();
        sim.step_n(12_000).unwrap();
        sim
    };
    let one = run(1);
    let three = run(3);
    let (a, b) = (one.state().unwrap(), three.state().unwrap());
    assert!(a.flow.removed_count > 0, "nothing removed yet");
    assert_eq!(a, b, "1 and 3 sub-domains differ");
    let dir = std::env::temp_dir().join(format!("outflow-ckpt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("silo.ckpt");
    one.save_checkpoint(&path).unwrap();
    let mut back = solver::Simulation::load_checkpoint(&path).unwrap();
    assert_eq!(back.state().unwrap(), a);
    let mut one = one;
    one.step_n(500).unwrap();
    back.step_n(500).unwrap();
    assert_eq!(back.state().unwrap(), one.state().unwrap());
    std::fs::remove_dir_all(&dir).ok();
}

/// On one GPU in f64 mode, a run with outflow regions (a silo) or an inflow source (a pour) is
/// the CPU's bit for bit: positions, velocities, spins and contact counts, removed count and
/// mass, inflow progress, ids, and every frame (packed by frame index: the live ids
/// in order); a checkpoint of it (ids with gaps) continues bit for bit on the GPU. Both
/// integrators (velocity Verlet removes after the drift, before the forces).
#[test]
fn outflow_and_inflow_on_the_gpu_match_the_cpu_bit_for_bit() {
    if solver::dem::cuda::driver::driver_available().is_err() {
        println!("skipped: no GPU");
        return;
    }
    let gpu = BackendKind::Cuda(solver::dem::cuda::CudaOptions {
        double: true,
        ..Default::default()
    });
    let dir = std::env::temp_dir().join(format!("outflow-gpu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cases = [
        ("silo", Integrator::SymplecticEuler),
        ("silo", Integrator::VelocityVerlet),
        ("pour", Integrator::SymplecticEuler),
        ("pour", Integrator::VelocityVerlet),
    ];
    for (which, integrator) in cases {
        let mut case = if which == "silo" {
            silo_case(true)
        } else {
            pour_case()
        };
        case.integrator = integrator;
        let run = |kind: &BackendKind| {
            let mut sim = solver::Simulation::new_on(case.clone(), kind).unwrap();
            let mut frames = Vec::new();
            for _ in 0..6 {
                sim.step_n(2_000).unwrap();
                frames.push(frame_bits(&mut sim));
            }
            (sim, frames)
        };
        let (cpu, fc) = run(&BackendKind::Cpu);
        let (gpu_sim, fg) = run(&gpu);
        let (a, b) = (cpu.state().unwrap(), gpu_sim.state().unwrap());
        assert!(
            a.flow.removed_count + a.pos.len() as u64 > 50,
            "{which} {integrator:?}: nothing removed or added"
        );
        assert_eq!(
            a.flow, b.flow,
            "{which} {integrator:?}: removed count or mass differ"
        );
        assert_eq!(a.id, b.id, "{which} {integrator:?}: live ids differ");
        if kinematic_bits(&a) != kinematic_bits(&b) {
            let differing = (0..a.pos.len()).filter(|&i| a.pos[i] != b.pos[i]).count();
            let contacts = (0..a.pos.len())
                .filter(|&i| a.contacts[i] != b.contacts[i])
                .count();
            panic!(
                "{which} {integrator:?}: GPU state differs from the CPU's: {differing} positions, \
                 {contacts} contact counts"
            );
        }
        assert!(
            fc == fg,
            "{which} {integrator:?}: GPU frames differ from the CPU's"
        );
        let path = dir.join(format!("{which}-{integrator:?}.ckpt"));
        gpu_sim.save_checkpoint(&path).unwrap();
        let mut back = solver::Simulation::load_checkpoint_with(
            &path,
            &gpu,
            solver::decomp::DecompositionOverride::default(),
        )
        .unwrap();
        let mut cpu = cpu;
        cpu.step_n(1_000).unwrap();
        back.step_n(1_000).unwrap();
        let (a, b) = (cpu.state().unwrap(), back.state().unwrap());
        assert_eq!(
            a.flow, b.flow,
            "{which} {integrator:?}: after the restart, removed differ"
        );
        assert!(
            kinematic_bits(&a) == kinematic_bits(&b),
            "{which} {integrator:?}: the GPU restart differs from the CPU"
        );
        assert!(
            frame_bits(&mut cpu) == frame_bits(&mut back),
            "{which} {integrator:?}: frames after the restart differ"
        );
        println!(
            "{which} {integrator:?}: GPU = CPU bit for bit, {} removed, {} live",
            a.flow.removed_count,
            a.pos.len()
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

fn live_mass(sim: &solver::Simulation) -> f64 {
    sim.species_ids()
        .iter()
        .map(|&s| {
            let r = [0.003f64, 0.005][s as usize];
            2500.0 * 4.0 / 3.0 * std::f64::consts::PI * r.powi(3)
        })
        .sum()
}

/// An inflow source adds the requested mass within 1 % (0.3 kg over its window), nothing
/// before its start, about rate x elapsed time meanwhile, without overlaps among the particles
/// it places, with new ids after the existing ones.
#[test]
fn inflow_adds_the_requested_mass() {
    for (name, kind) in backends() {
        let mut sim = start_sim(&name, &kind, pour_case());
        assert_eq!(sim.num_particles(), 0);
        let dt = 2e-5;
        steps(&mut sim, &name, (0.049 / dt) as u64);
        assert_eq!(
            sim.num_particles(),
            0,
            "[{name}] particles before the start"
        );
        let mut worst_gap = f64::INFINITY;
        let mut mid = 0.0;
        while sim.time() < 0.4 - 0.5 * dt {
            let before = sim.num_particles();
            steps(&mut sim, &name, 1);
            if sim.num_particles() > before {
                // Just placed: no new particle overlaps another.
                let s = sim.snapshot().unwrap();
                let sp = sim.species_ids();
                // The new particles have the largest ids: the last elements.
                let top: Vec<usize> = (0..s.pos.len()).filter(|&i| s.pos[i][2] > 0.28).collect();
                for &i in top.iter().filter(|&&i| i >= before) {
                    for &j in top.iter().filter(|&&j| j != i) {
                        let r = |k: usize| [0.003, 0.005][sp[k] as usize];
                        let d =
                            solver::core::vec3::norm(solver::core::vec3::sub(s.pos[i], s.pos[j]));
                        worst_gap = worst_gap.min(d - r(i) - r(j));
                    }
                }
            }
            if (sim.time() - 0.2).abs() < 0.5 * dt {
                mid = live_mass(&sim);
            }
        }
        let total = live_mass(&sim);
        let f = sim.flow();
        println!(
            "[{name}] inflow: {:.5} kg added (asked 0.3), {:.5} kg by t = 0.2 s (asked 0.15), {} particles, ids {}..{}, smallest gap at insertion {worst_gap:.2e} m",
            total,
            mid,
            sim.num_particles(),
            f.inflows[0].first_id,
            f.inflows[0].first_id as u64 + f.inflows[0].total
        );
        assert!(
            (total - 0.3).abs() < 0.003,
            "[{name}] added {total} kg, asked 0.3"
        );
        assert!(
            (mid - 0.15).abs() < 0.015,
            "[{name}] {mid} kg by t = 0.2 s, asked 0.15"
        );
        assert_eq!(f.inflows[0].inserted, f.inflows[0].total);
        assert!(
            worst_gap >= -1e-12,
            "[{name}] inserted particles overlap by {}",
            -worst_gap
        );
        let ids = sim.particle_ids();
        assert_eq!(ids, (0..ids.len() as u32).collect::<Vec<_>>());
    }
}

/// Inflow with a decomposition gives the same particles bit for bit, and a checkpoint taken
/// mid-inflow continues exactly (same ids, species and positions of the particles still to come).
#[test]
fn inflow_is_decomposition_independent_and_restarts_exactly() {
    let run = |subdomains: u32, steps: u64| {
        let mut case = pour_case();
        case.decomposition.subdomains = subdomains;
        let mut sim = solver::Simulation::new(case).unwrap();
        sim.step_n(steps).unwrap();
        sim
    };
    let one = run(1, 8_000);
    let three = run(3, 8_000);
    assert!(one.num_particles() > 100);
    assert_eq!(
        one.state().unwrap(),
        three.state().unwrap(),
        "1 and 3 sub-domains differ"
    );
    let dir = std::env::temp_dir().join(format!("inflow-ckpt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("pour.ckpt");
    one.save_checkpoint(&path).unwrap();
    let mut back = solver::Simulation::load_checkpoint(&path).unwrap();
    let mut one = one;
    one.step_n(3_000).unwrap();
    back.step_n(3_000).unwrap();
    assert_eq!(back.state().unwrap(), one.state().unwrap());
    assert_eq!(back.id_species(), one.id_species());
    std::fs::remove_dir_all(&dir).ok();
}
