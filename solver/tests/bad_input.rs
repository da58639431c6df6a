//! Validation 8: bad input gives a clear error naming the file and the field.

use solver::core::stl::write_binary_stl;
use solver::{Case, Simulation};
use std::path::{Path, PathBuf};

const GOOD: &str = r#"
dt = 1e-4
end_time = 0.5
gravity = [0.0, 0.0, -9.81]

[domain]
min = [0.0, 0.0, 0.0]
max = [0.5, 0.5, 0.5]

[contact_model]
type = "linear"

[[species]]
name = "glass"
radius = 0.01
density = 2500.0
normal_stiffness = 1e4
restitution = 0.5
sliding_friction = 0.5

[wall_material]
normal_stiffness = 1e4
restitution = 0.5
sliding_friction = 0.5

[[sources]]
type = "grid"
species = "glass"
min = [0.0, 0.0, 0.0]
max = [0.5, 0.5, 0.2]
spacing = 0.025
count = 100
"#;

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("solver-bad-input-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Writes `text` as `name` in a temp dir and loads it; returns the error text.
fn error_of(name: &str, text: &str) -> String {
    let path = dir().join(name);
    std::fs::write(&path, text).unwrap();
    match Case::from_file(&path) {
        Ok(_) => panic!("{name} was accepted"),
        Err(e) => e.to_string(),
    }
}

fn assert_mentions(e: &str, parts: &[&str]) {
    for p in parts {
        assert!(e.contains(p), "error {e:?} does not mention {p:?}");
    }
}

#[test]
fn the_good_case_is_accepted() {
    let path = dir().join("good.toml");
    std::fs::write(&path, GOOD).unwrap();
    let (case, warnings) = Case::from_file(&path).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let mut sim = Simulation::new(case).unwrap();
    sim.step_n(10).unwrap();
    assert_eq!(sim.positions_f32().unwrap().len(), 100);
}

#[test]
fn unknown_key() {
    let e = error_of(
        "unknown.toml",
        &GOOD.replace(
            "sliding_friction = 0.5\n\n[wall_material]",
            "sliding_friction = 0.5\ncolour = \"red\"\n\n[wall_material]",
        ),
    );
    assert_mentions(&e, &["unknown.toml", "unknown field `colour`"]);
}

#[test]
fn negative_radius() {
    let e = error_of("neg.toml", &GOOD.replace("radius = 0.01", "radius = -0.1"));
    assert_mentions(&e, &["neg.toml", "species[0].radius must be > 0, got -0.1"]);
}

#[test]
fn zero_values() {
    let e = error_of("zero_dt.toml", &GOOD.replace("dt = 1e-4", "dt = 0.0"));
    assert_mentions(&e, &["zero_dt.toml", "dt must be > 0, got 0"]);
    let e = error_of(
        "zero_out.toml",
        &format!("{GOOD}\n[output]\nvtk_interval = 0.0\n"),
    );
    assert_mentions(
        &e,
        &["zero_out.toml", "output.vtk_interval must be > 0, got 0"],
    );
    let e = error_of(
        "zero_reorder.toml",
        &GOOD.replace("end_time = 0.5", "end_time = 0.5\nreorder_every = 0"),
    );
    assert_mentions(&e, &["zero_reorder.toml", "reorder_every must be > 0"]);
    let e = error_of(
        "bad_e.toml",
        &GOOD.replace(
            "restitution = 0.5\nsliding_friction = 0.5\n\n[wall",
            "restitution = 1.5\nsliding_friction = 0.5\n\n[wall",
        ),
    );
    assert_mentions(
        &e,
        &[
            "bad_e.toml",
            "species[0].restitution must be in (0, 1], got 1.5",
        ],
    );
}

#[test]
fn unknown_species_name() {
    let e = error_of(
        "sp.toml",
        &GOOD.replace("species = \"glass\"\nmin", "species = \"steel\"\nmin"),
    );
    assert_mentions(&e, &["sp.toml", "sources[0].species", "\"steel\""]);
}

fn with_mesh(stl: &str) -> String {
    format!("{GOOD}\n[[meshes]]\nname = \"m\"\nstl = \"{stl}\"\n")
}

#[test]
fn missing_stl_file() {
    let e = error_of("missing.toml", &with_mesh("nowhere.stl"));
    assert_mentions(
        &e,
        &[
            "missing.toml",
            "meshes[0].stl",
            "nowhere.stl",
            "cannot read STL file",
        ],
    );
}

#[test]
fn malformed_stl_files() {
    std::fs::write(
        dir().join("bad_ascii.stl"),
        "solid x\n facet normal 0 0 1\n  outer loop\n   vertex 0 0 0\n   vertex 1 0 oops\n",
    )
    .unwrap();
    let e = error_of("ascii.toml", &with_mesh("bad_ascii.stl"));
    assert_mentions(
        &e,
        &[
            "ascii.toml",
            "meshes[0].stl",
            "bad_ascii.stl:5:",
            "bad coordinate `oops`",
        ],
    );

    let p = dir().join("short.stl");
    write_binary_stl(&p, &[[[0.0; 3], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]; 3]).unwrap();
    let mut b = std::fs::read(&p).unwrap();
    b.truncate(b.len() - 20);
    std::fs::write(&p, b).unwrap();
    let e = error_of("binary.toml", &with_mesh("short.stl"));
    assert_mentions(&e, &["binary.toml", "short.stl", "declares 3 triangles"]);
}

#[test]
fn overlapping_particles() {
    let extra = "\n[[sources]]\ntype = \"grid\"\nspecies = \"glass\"\nmin = [0.005, 0.0, 0.0]\nmax = [0.03, 0.025, 0.025]\nspacing = 0.025\n";
    let e = error_of("overlap.toml", &format!("{GOOD}{extra}"));
    assert_mentions(&e, &["overlap.toml", "particles 0 and 100 overlap"]);
}

#[test]
fn particle_through_wall() {
    let extra = "\n[[sources]]\ntype = \"grid\"\nspecies = \"glass\"\nmin = [-0.02, 0.3, 0.3]\nmax = [0.005, 0.325, 0.325]\nspacing = 0.025\n";
    let e = error_of("wall.toml", &format!("{GOOD}{extra}"));
    assert_mentions(&e, &["wall.toml", "particle 100", "x_min wall"]);
}

#[test]
fn time_step_above_the_stability_bound() {
    // t_contact = pi sqrt(m*/k) = 2.3e-3 s: dt = 1e-3 is refused, 2e-4 warns.
    let e = error_of("dt.toml", &GOOD.replace("dt = 1e-4", "dt = 1e-3"));
    assert_mentions(
        &e,
        &[
            "dt.toml",
            "above the stability bound",
            "contact duration",
            "use dt <=",
        ],
    );
    let path = dir().join("dt_warn.toml");
    std::fs::write(&path, GOOD.replace("dt = 1e-4", "dt = 2e-4")).unwrap();
    let (_, warnings) = Case::from_file(&path).unwrap();
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].to_string().contains("fewer than 20 steps"),
        "{}",
        warnings[0]
    );
}

#[test]
fn hertz_needs_young_modulus() {
    let e = error_of(
        "hertz.toml",
        &GOOD.replace("type = \"linear\"", "type = \"hertz_mindlin\""),
    );
    assert_mentions(&e, &["hertz.toml", "species[0].young_modulus is required"]);
}

#[test]
fn unreadable_case_file_and_unwritable_output() {
    let e = Case::from_file(Path::new("/nonexistent/case.toml"))
        .err()
        .unwrap()
        .to_string();
    assert_mentions(&e, &["/nonexistent/case.toml"]);
    let blocker = dir().join("a_file");
    std::fs::write(&blocker, "x").unwrap();
    let e = solver::io::vtk::VtkSeries::new(&blocker.join("out"), "p")
        .err()
        .unwrap()
        .to_string();
    assert_mentions(&e, &["a_file/out"]);
}
