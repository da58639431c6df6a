//! Unit tests of case parsing and validation (file-level tests are in `solver/tests/`).

use super::*;
use crate::core::geometry::Motion;

#[test]
fn default_case_is_valid_and_round_trips_through_toml() {
    let case = Case::default_falling_box(1000);
    let warnings = case.validate().unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let text = case.to_toml().unwrap();
    let back = Case::from_toml_str(&text, "x.toml", Path::new(".")).unwrap();
    assert_eq!(back.species, case.species);
    assert_eq!(back.sources, case.sources);
    assert_eq!(back.dt.to_bits(), case.dt.to_bits());
    let particles = case.generate_particles().unwrap();
    assert_eq!(particles.len(), 1000);
}

/// The default case with a mesh, two species of radii 0.01 and 0.02 m, for the table tests.
fn two_species_case() -> Case {
    let mut case = Case::default_falling_box(100);
    let mut big = case.species[0].clone();
    big.name = "big".into();
    big.radius = 2.0 * case.species[0].radius;
    big.rolling_friction = 0.1;
    case.species[0].rolling_friction = 0.1;
    case.species.push(big);
    case.meshes.push(MeshSpec {
        name: "plate".into(),
        stl: None,
        triangles: Some(vec![[[0.1, 0.1, 0.1], [0.5, 0.1, 0.1], [0.5, 0.5, 0.1]]]),
        scale: 1.0,
        material: None,
        motion: Motion::Fixed,
    });
    case
}

fn interaction(a: &str, b: &str, mu: Option<f64>, e: Option<f64>) -> Interaction {
    Interaction {
        between: [a.into(), b.into()],
        restitution: e,
        sliding_friction: mu,
        rolling_friction: None,
    }
}

/// Interactions override the mixing rule for what they set, symmetric for species pairs, in
/// order ("box" then a face), and leave everything else alone.
#[test]
fn interactions_override_the_mixing_rule_in_order() {
    let mut case = two_species_case();
    let base = case.material_table();
    let glass = case.species[0].name.clone();
    case.interactions = vec![
        interaction(&glass, "big", Some(0.05), None),
        interaction(&glass, "box", Some(0.0), None),
        interaction(&glass, "z_min", Some(0.9), Some(0.6)),
        interaction("big", "plate", None, Some(0.2)),
    ];
    case.validate().unwrap();
    let t = case.material_table();
    assert_eq!(t.n_walls, BOX_FACES + 1);
    assert_eq!(t.particle_pair(0, 1).mu_s, 0.05);
    assert_eq!(t.particle_pair(1, 0).mu_s, 0.05);
    assert_eq!(t.particle_pair(0, 0), base.particle_pair(0, 0));
    assert_eq!(t.particle_pair(1, 1), base.particle_pair(1, 1));
    for f in 0..4 {
        assert_eq!(t.wall_pair(0, f).mu_s, 0.0, "face {f}");
        assert_eq!(t.wall_pair(0, f).beta, base.wall_pair(0, f).beta);
    }
    assert_eq!(t.wall_pair(0, 4).mu_s, 0.9);
    assert_eq!(
        t.wall_pair(0, 4).beta,
        crate::dem::physics::damping_ratio_from_restitution(0.6)
    );
    assert_eq!(t.wall_pair(0, 5).mu_s, 0.0);
    assert_eq!(t.wall_pair(1, 4), base.wall_pair(1, 4));
    let plate = MaterialTable::mesh_wall(0);
    assert_eq!(
        t.wall_pair(1, plate).beta,
        crate::dem::physics::damping_ratio_from_restitution(0.2)
    );
    assert_eq!(t.wall_pair(0, plate), base.wall_pair(0, plate));
}

#[test]
fn interactions_with_unknown_or_ambiguous_names_are_refused() {
    let msg = |case: &Case| case.validate().unwrap_err().to_string();
    let mut case = two_species_case();
    case.interactions = vec![interaction("sand", "box", Some(0.1), None)];
    let m = msg(&case);
    assert!(
        m.contains("interactions[0].between") && m.contains("\"sand\""),
        "{m}"
    );
    case.interactions = vec![interaction("big", "lid", Some(0.1), None)];
    let m = msg(&case);
    assert!(
        m.contains("\"lid\"") && m.contains("\"plate\"") && m.contains("z_max"),
        "{m}"
    );
    case.meshes[0].name = "big".into();
    case.interactions = vec![interaction("big", "big", Some(0.1), None)];
    assert!(msg(&case).contains("ambiguous"), "{}", msg(&case));
    case.meshes[0].name = "plate".into();
    case.interactions = vec![interaction("big", "plate", None, None)];
    assert!(msg(&case).contains("sets nothing"), "{}", msg(&case));
    case.interactions = vec![interaction("big", "plate", Some(-1.0), None)];
    assert!(
        msg(&case).contains("interactions[0].sliding_friction"),
        "{}",
        msg(&case)
    );
}

/// `rolling_radius = "particle"`: the lever arm is the particle's own radius, folded into the
/// table as mu_r (r_a + r_b) / r_b (twice the effective-radius torque between equal spheres);
/// against walls R* = r already, so nothing changes there.
#[test]
fn particle_rolling_radius_scales_the_pair_table() {
    let mut case = two_species_case();
    let base = case.material_table();
    case.contact_model = ContactModelSpec::Linear {
        tangential_stiffness_ratio: 2.0 / 7.0,
        rolling_radius: RollingRadius::Particle,
    };
    let t = case.material_table();
    let mu_r = 0.1;
    assert!((t.particle_pair(0, 0).mu_r - 2.0 * mu_r).abs() < 1e-15);
    assert!((t.particle_pair(1, 1).mu_r - 2.0 * mu_r).abs() < 1e-15);
    // Small (r) against big (2r): lever r = R* (r + 2r) / 2r = 1.5 R*; big against small: 3 R*.
    assert!((t.particle_pair(0, 1).mu_r - 1.5 * mu_r).abs() < 1e-15);
    assert!((t.particle_pair(1, 0).mu_r - 3.0 * mu_r).abs() < 1e-15);
    assert_eq!(t.pw, base.pw);
    let text = case.to_toml().unwrap();
    assert!(text.contains("rolling_radius = \"particle\""), "{text}");
    let back = Case::from_toml_str(&text, "x.toml", Path::new(".")).unwrap();
    assert_eq!(back.contact_model, case.contact_model);
}

/// `walls` takes true, false or a list of faces, and face materials go to their columns.
#[test]
fn walls_face_by_face() {
    let case = Case::default_falling_box(100);
    let text = case.to_toml().unwrap();
    assert!(text.contains("walls = true"), "{text}");
    let open_top = text.replace(
        "walls = true",
        "walls = [\"x_min\", \"x_max\", \"y_min\", \"y_max\", \"z_min\"]\n\
         face_materials.z_min = { normal_stiffness = 1e5, restitution = 0.9, sliding_friction = 0.0 }",
    );
    let c = Case::from_toml_str(&open_top, "x.toml", Path::new(".")).unwrap();
    c.validate().unwrap();
    assert_eq!(c.domain.walls, Walls(0b01_1111));
    assert!(!c.domain.walls.has(Face::ZMax) && c.domain.walls.has(Face::ZMin));
    let t = c.material_table();
    assert_eq!(
        t.wall_pair(0, Face::ZMin.index()).mu_s,
        0.5 * c.species[0].sliding_friction
    );
    assert_eq!(
        t.wall_pair(0, Face::XMin.index()).mu_s,
        0.5 * (c.species[0].sliding_friction + c.wall_material.sliding_friction)
    );
    let back = Case::from_toml_str(&c.to_toml().unwrap(), "y.toml", Path::new(".")).unwrap();
    assert_eq!(back.domain, c.domain);
    let none = text.replace("walls = true", "walls = false");
    let c = Case::from_toml_str(&none, "x.toml", Path::new(".")).unwrap();
    assert!(!c.domain.walls.any());
    let bad = text.replace("walls = true", "walls = [\"z_low\"]");
    let e = Case::from_toml_str(&bad, "x.toml", Path::new("."))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("x.toml") && e.contains("walls must be") && e.contains("z_min"),
        "{e}"
    );
}
