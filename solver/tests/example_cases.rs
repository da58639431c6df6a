//! The example cases under `solver/cases/` parse, validate without warnings, run a few steps and
//! write VTK output.

use solver::io::vtk::VtkSeries;
use solver::{Case, Simulation};
use std::path::Path;

fn cases_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/cases"))
}

#[test]
fn example_cases_parse_validate_and_run() {
    let out = std::env::temp_dir().join(format!("solver-examples-{}", std::process::id()));
    for name in ["falling_box.toml", "drum.toml", "mixer.toml", "silo.toml"] {
        let path = cases_dir().join(name);
        let (case, warnings) = Case::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
        assert!(warnings.is_empty(), "{name}: {warnings:?}");
        let mut sim = Simulation::new(case).unwrap();
        sim.step_n(20).unwrap();
        let mut vtk = VtkSeries::new(&out, name.trim_end_matches(".toml")).unwrap();
        vtk.write_frame(&sim).unwrap();
        let pvd = std::fs::read_to_string(vtk.pvd_path()).unwrap();
        assert!(pvd.contains("_particles_0000000020.vtu"), "{pvd}");
        println!(
            "{name}: {} particles, {} meshes, {}",
            sim.num_particles(),
            sim.meshes().len(),
            sim.timers()
        );
    }
    std::fs::remove_dir_all(&out).ok();
}

#[test]
fn shipped_falling_box_matches_the_builtin_default() {
    let (file, _) = Case::from_file(&cases_dir().join("falling_box.toml")).unwrap();
    let built = Case::falling_box(8000, 1e-5);
    assert!((file.species[0].radius - built.species[0].radius).abs() < 1e-12);
    let (k_file, k_built) = (
        file.species[0].normal_stiffness.unwrap(),
        built.species[0].normal_stiffness.unwrap(),
    );
    assert!(
        (k_file - k_built).abs() < 1e-4 * k_built,
        "{k_file} vs {k_built}"
    );
}

/// The SPH examples (`method = "sph"`) place their particles (the pier's from its STL, relative to
/// the case file) and take a few steps on the CPU reference with finite values; no fluid starts
/// inside the pier.
#[test]
fn sph_examples_place_their_particles_and_step() {
    use solver::sph::cpu::SphSim;
    use solver::sph::setup::{SphCase, KIND_FLUID};
    for name in [
        "dambreak.toml",
        "dambreak_pier.toml",
        "hydrostatic_tank.toml",
        "sloshing_tank.toml",
        "stirred_tank.toml",
        "water_column.toml",
        "wavemaker.toml",
    ] {
        let path = cases_dir().join(name);
        let text = std::fs::read_to_string(&path).unwrap();
        let mut case = SphCase::from_toml_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        case.base_dir = cases_dir().to_path_buf();
        let c = case.constants().unwrap_or_else(|e| panic!("{name}: {e}"));
        let p = case.particles(&c).unwrap_or_else(|e| panic!("{name}: {e}"));
        let fluid = p.kind.iter().filter(|&&k| k == KIND_FLUID).count();
        println!(
            "{name}: {fluid} fluid, {} boundary particles",
            p.kind.len() - fluid
        );
        assert!(fluid > 0 && fluid < p.kind.len(), "{name}");
        if name == "dambreak_pier.toml" {
            for (k, q) in p.pos.iter().enumerate() {
                let r = (q[0] - 0.96).hypot(q[1] - 0.335);
                assert!(
                    p.kind[k] != KIND_FLUID || r > 0.06 || q[2] > 0.35,
                    "fluid inside the pier at {q:?}"
                );
            }
            assert!(
                p.kind.len() - fluid > 30_000,
                "the tank's walls and the pier's particles"
            );
        }
        let moves = matches!(
            name,
            "sloshing_tank.toml" | "stirred_tank.toml" | "wavemaker.toml"
        );
        assert_eq!(!p.moving.is_empty(), moves, "{name}: moving solids");
        let mut sim = SphSim::new(c, p);
        for _ in 0..3 {
            sim.step();
        }
        assert!(
            sim.s
                .pos
                .iter()
                .flatten()
                .chain(&sim.s.rho)
                .all(|v| v.is_finite()),
            "{name}: non-finite state after 3 steps"
        );
    }
}
