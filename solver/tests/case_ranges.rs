//! Regression (hardening issue, item 3): absurd numbers were accepted and failed later or never:
//! a species radius of 1e-300 (NaN at step 1), `gravity = [1e308, 0, 0]`, mesh `scale = 1e300`,
//! `rpm = 1e300`; NaN inline mesh triangles were dropped silently while an STL file with NaN
//! was an error. Every number now has a documented range (`solver::case::ranges`) and the
//! message names the file, the field and the value.

#[path = "support/run_solver.rs"]
mod run_solver;

use run_solver::{assert_refused, run_solver, scratch_dir, unique_name};
use solver::Case;

const GOOD: &str = r#"
dt = 1e-4
end_time = 0.5
gravity = [0.0, 0.0, -9.81]

[domain]
min = [0.0, 0.0, 0.0]
max = [0.5, 0.5, 0.5]

[contact_model]
type = "linear"
tangential_stiffness_ratio = 0.3

[[species]]
name = "glass"
radius = 0.01
density = 2500.0
normal_stiffness = 1e4
poisson_ratio = 0.25
restitution = 0.5
sliding_friction = 0.5
rolling_friction = 0.02

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
count = 50
jitter = 0.2
velocity = [0.0, 0.0, -1.0]

[[sources]]
type = "random_box"
species = "glass"
min = [0.0, 0.0, 0.3]
max = [0.5, 0.5, 0.45]
count = 20

[[meshes]]
name = "paddle"
triangles = [
  [[0.1, 0.1, 0.25], [0.4, 0.1, 0.25], [0.1, 0.4, 0.25]],
  [[0.4, 0.1, 0.25], [0.4, 0.4, 0.25], [0.1, 0.4, 0.25]],
]
scale = 1.0
motion = { type = "rotation", axis_point = [0.25, 0.25, 0.0], axis_direction = [0.0, 0.0, 1.0], rpm = 30.0 }

[[meshes]]
name = "lid"
triangles = [[[0.0, 0.0, 0.48], [0.5, 0.0, 0.48], [0.0, 0.5, 0.48]]]
motion = { type = "translation", velocity = [0.0, 0.0, -0.01] }

[output]
vtk_interval = 0.01
checkpoint_interval = 0.1
"#;

fn write(name: &str, text: &str) -> std::path::PathBuf {
    let path = scratch_dir("case-ranges").join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn error_of(name: &str, text: &str) -> String {
    match Case::from_file(&write(name, text)) {
        Ok(_) => panic!("{name} was accepted"),
        Err(e) => e.to_string(),
    }
}

/// `GOOD` with the first occurrence of `from` replaced (which must exist).
fn with(from: &str, to: &str) -> String {
    assert!(GOOD.contains(from), "{from:?} not in the base case");
    GOOD.replacen(from, to, 1)
}

fn assert_mentions(e: &str, parts: &[&str]) {
    for p in parts {
        assert!(e.contains(p), "error {e:?} does not mention {p:?}");
    }
}

#[test]
fn the_base_case_is_valid() {
    let (_, warnings) = Case::from_file(&write("good.toml", GOOD)).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
}

#[test]
fn a_vanishing_radius_is_refused() {
    let e = error_of("tiny.toml", &with("radius = 0.01", "radius = 1e-300"));
    assert_mentions(
        &e,
        &[
            "tiny.toml",
            "species[0].radius must be in [1e-9, 1e3] m, got 1e-300",
        ],
    );
}

#[test]
fn the_same_through_the_binary_leaves_no_segment() {
    // Before, this case started, created its segment and failed at step 1 with the segment
    // kept; now it is refused before the segment exists.
    let path = write("tiny_bin.toml", &with("radius = 0.01", "radius = 1e-300"));
    let name = unique_name("tiny-radius");
    let out = run_solver(
        &[
            "--backend",
            "cpu",
            "--name-shm",
            &name,
            "--case",
            path.to_str().unwrap(),
        ],
        std::time::Duration::from_secs(60),
    );
    assert_refused(
        &out,
        &name,
        &["tiny_bin.toml", "species[0].radius", "got 1e-300"],
    );
}

#[test]
fn material_numbers_have_ranges() {
    for (from, to, parts) in [
        (
            "density = 2500.0",
            "density = 1e300",
            &["species[0].density must be in [1e-2, 1e5] kg/m^3, got 1e300"][..],
        ),
        (
            "normal_stiffness = 1e4\npoisson",
            "normal_stiffness = 1e-300\npoisson",
            &["species[0].normal_stiffness must be in [1e-6, 1e15] N/m, got 1e-300"],
        ),
        (
            "poisson_ratio = 0.25",
            "poisson_ratio = nan",
            &["species[0].poisson_ratio must be a finite number in (-1, 0.5), got NaN"],
        ),
        (
            "restitution = 0.5\nsliding_friction = 0.5\nrolling",
            "restitution = inf\nsliding_friction = 0.5\nrolling",
            &["species[0].restitution must be a finite number in (0, 1], got inf"],
        ),
        (
            "sliding_friction = 0.5\nrolling",
            "sliding_friction = 1e300\nrolling",
            &["species[0].sliding_friction must be in [0, 10], got 1e300"],
        ),
        (
            "rolling_friction = 0.02",
            "rolling_friction = -0.1",
            &["species[0].rolling_friction must be in [0, 10], got -0.1"],
        ),
        (
            "tangential_stiffness_ratio = 0.3",
            "tangential_stiffness_ratio = 1e300",
            &["contact_model.tangential_stiffness_ratio must be in [0, 10], got 1e300"],
        ),
    ] {
        let e = error_of("material.toml", &with(from, to));
        assert_mentions(&e, parts);
    }
    let e = error_of(
        "young.toml",
        &with(
            "normal_stiffness = 1e4\npoisson",
            "young_modulus = 1e300\npoisson",
        ),
    );
    assert_mentions(
        &e,
        &["species[0].young_modulus must be in [1, 1e13] Pa, got 1e300"],
    );
}

#[test]
fn times_have_ranges() {
    let e = error_of("dt.toml", &with("dt = 1e-4", "dt = 1e-300"));
    assert_mentions(&e, &["dt must be in [1e-12, 1] s, got 1e-300"]);
    let e = error_of("end.toml", &with("end_time = 0.5", "end_time = 1e300"));
    assert_mentions(&e, &["end_time must be in [1e-12, 1e9] s, got 1e300"]);
    let e = error_of(
        "vtk.toml",
        &with("vtk_interval = 0.01", "vtk_interval = nan"),
    );
    assert_mentions(&e, &["output.vtk_interval must be a finite number"]);
    let e = error_of(
        "ckpt.toml",
        &with("checkpoint_interval = 0.1", "checkpoint_interval = 1e300"),
    );
    assert_mentions(
        &e,
        &["output.checkpoint_interval must be in [1e-12, 1e9] s"],
    );
}

#[test]
fn gravity_velocities_and_positions_have_ranges() {
    let e = error_of(
        "gravity.toml",
        &with("gravity = [0.0, 0.0, -9.81]", "gravity = [1e308, 0.0, 0.0]"),
    );
    assert_mentions(
        &e,
        &[
            "gravity.toml",
            "gravity must have a length of at most 1e4 m/s^2, got [1e308, 0, 0]",
        ],
    );
    let e = error_of(
        "vel.toml",
        &with(
            "velocity = [0.0, 0.0, -1.0]",
            "velocity = [0.0, 0.0, -1e300]",
        ),
    );
    assert_mentions(
        &e,
        &["sources[0].velocity must have a length of at most 1e5 m/s"],
    );
    let e = error_of(
        "trans.toml",
        &with("velocity = [0.0, 0.0, -0.01]", "velocity = [0.0, inf, 0.0]"),
    );
    assert_mentions(
        &e,
        &["meshes[1].motion.velocity must be finite, got [0, inf, 0]"],
    );
    let e = error_of(
        "domain.toml",
        &with("max = [0.5, 0.5, 0.5]", "max = [0.5, 1e300, 0.5]"),
    );
    assert_mentions(
        &e,
        &["domain.max every component must be in [-1e6, 1e6] m, got [0.5, 1e300, 0.5]"],
    );
    let e = error_of(
        "src.toml",
        &with("min = [0.0, 0.0, 0.3]", "min = [0.0, -inf, 0.3]"),
    );
    assert_mentions(
        &e,
        &["sources[1].min every component must be a finite number"],
    );
    let e = error_of(
        "axis.toml",
        &with(
            "axis_point = [0.25, 0.25, 0.0]",
            "axis_point = [0.25, 1e300, 0.0]",
        ),
    );
    assert_mentions(&e, &["meshes[0].motion.axis_point every component"]);
}

#[test]
fn mesh_numbers_have_ranges() {
    let e = error_of("scale.toml", &with("scale = 1.0", "scale = 1e300"));
    assert_mentions(
        &e,
        &[
            "scale.toml",
            "meshes[0].scale must be in [1e-9, 1e9], got 1e300",
        ],
    );
    let e = error_of("rpm.toml", &with("rpm = 30.0", "rpm = 1e300"));
    assert_mentions(
        &e,
        &["meshes[0].motion.rpm must be in [-1e6, 1e6] rpm, got 1e300"],
    );
    let e = error_of(
        "dir.toml",
        &with(
            "axis_direction = [0.0, 0.0, 1.0]",
            "axis_direction = [0.0, 0.0, 1e-300]",
        ),
    );
    assert_mentions(
        &e,
        &["meshes[0].motion.axis_direction must not be the zero vector"],
    );
    // Within the scale range, but the scaled vertices leave the coordinate range.
    let e = error_of("far.toml", &with("scale = 1.0", "scale = 1e9"));
    assert_mentions(
        &e,
        &["meshes[0].triangles[0] (mesh \"paddle\")", "scaled by 1e9"],
    );
}

#[test]
fn non_finite_inline_triangles_are_errors_like_in_stl_files() {
    let e = error_of(
        "nan_tri.toml",
        &with(
            "[[0.4, 0.1, 0.25], [0.4, 0.4, 0.25], [0.1, 0.4, 0.25]]",
            "[[0.4, 0.1, 0.25], [nan, 0.4, 0.25], [0.1, 0.4, 0.25]]",
        ),
    );
    assert_mentions(
        &e,
        &[
            "nan_tri.toml",
            "meshes[0].triangles[1] (mesh \"paddle\") has a non-finite vertex 1",
        ],
    );
    let e = error_of(
        "inf_tri.toml",
        &with("[[0.0, 0.0, 0.48]", "[[0.0, -inf, 0.48]"),
    );
    assert_mentions(
        &e,
        &["meshes[1].triangles[0] (mesh \"lid\") has a non-finite vertex 0"],
    );

    // The STL reader already refused NaN, naming the triangle: both paths now agree.
    let dir = scratch_dir("case-ranges");
    let stl = dir.join("nan.stl");
    solver::core::stl::write_binary_stl(
        &stl,
        &[
            [[0.0, 0.0, 0.1], [0.1, 0.0, 0.1], [0.0, 0.1, 0.1]],
            [[0.0, 0.0, 0.1], [f64::NAN, 0.0, 0.1], [0.0, 0.1, 0.1]],
        ],
    )
    .unwrap();
    let text = format!(
        "{}\n[[meshes]]\nname = \"file\"\nstl = \"nan.stl\"\n",
        GOOD.split("[[meshes]]").next().unwrap()
    );
    let e = error_of("nan_stl.toml", &text);
    assert_mentions(
        &e,
        &["nan_stl.toml", "meshes[0].stl", "nan.stl", "triangle 1"],
    );
}

#[test]
fn source_numbers_have_ranges() {
    let e = error_of("jitter.toml", &with("jitter = 0.2", "jitter = nan"));
    assert_mentions(
        &e,
        &["sources[0].jitter must be a finite number in [0, 1], got NaN"],
    );
    let e = error_of("spacing.toml", &with("spacing = 0.025", "spacing = 1e300"));
    assert_mentions(
        &e,
        &["sources[0].spacing must be in [0.02, 2e6] m, got 1e300"],
    );
    let e = error_of("spacing2.toml", &with("spacing = 0.025", "spacing = 0.001"));
    assert_mentions(
        &e,
        &["sources[0].spacing must be >= the diameter 0.02 of species \"glass\", got 0.001"],
    );
}

/// A mesh on a harmonic motion (a shaker table, a rocking sieve) is a valid case; its frequency,
/// amplitude and phase are checked by name.
#[test]
fn harmonic_mesh_motions_are_checked_by_name() {
    let rotation = r#"motion = { type = "rotation", axis_point = [0.25, 0.25, 0.0], axis_direction = [0.0, 0.0, 1.0], rpm = 30.0 }"#;
    let shake =
        r#"motion = { type = "oscillation", amplitude = [0.0, 0.0, 0.002], frequency = 25.0 }"#;
    let rock = r#"motion = { type = "rocking", axis_point = [0.25, 0.25, 0.0], axis_direction = [1.0, 0.0, 0.0], amplitude_deg = 5.0, frequency = 2.0, phase_deg = 90.0 }"#;
    for ok in [shake, rock] {
        let (case, _) = Case::from_file(&write("harmonic.toml", &with(rotation, ok)))
            .unwrap_or_else(|e| panic!("{ok}: {e}"));
        assert!(!case.meshes[0].motion.is_fixed());
    }
    let e = error_of(
        "freq.toml",
        &with(
            rotation,
            &shake.replace("frequency = 25.0", "frequency = 1e7"),
        ),
    );
    assert_mentions(
        &e,
        &["meshes[0].motion.frequency must be in [0, 1e6] Hz, got 1e7"],
    );
    let e = error_of(
        "amp.toml",
        &with(rotation, &shake.replace("0.002]", "1e300]")),
    );
    assert_mentions(&e, &["meshes[0].motion.amplitude"]);
    let e = error_of(
        "deg.toml",
        &with(
            rotation,
            &rock.replace("amplitude_deg = 5.0", "amplitude_deg = 720.0"),
        ),
    );
    assert_mentions(
        &e,
        &["meshes[0].motion.amplitude_deg must be in [-360, 360] deg, got 720"],
    );
    let e = error_of(
        "phase.toml",
        &with(
            rotation,
            &rock.replace("phase_deg = 90.0", "phase_deg = -1000.0"),
        ),
    );
    assert_mentions(&e, &["meshes[0].motion.phase_deg"]);
}
