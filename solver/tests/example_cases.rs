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
