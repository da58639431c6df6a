//! SPH fluid and solids from closed STL surfaces (issue 17): `[[fluid]] stl = ...` fills the
//! inside of a surface with fluid, `[[obstacles]] stl = ...` with boundary particles, both on the
//! tank's lattice; fluid that a box puts inside a solid, or closer than dp/2 to its particles, is
//! left out; unreadable, open or misplaced surfaces are errors naming the key.

use std::path::{Path, PathBuf};

use solver::core::geometry::{box_triangles, cylinder_triangles, enclosed_volume};
use solver::core::stl::{write_binary_stl, Triangle};
use solver::core::vec3;
use solver::sph::setup::{SphCase, SphParticles, KIND_BOUNDARY, KIND_FLUID};

/// A folder of this test's files, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let d =
            std::env::temp_dir().join(format!("pshm-sph-geometry-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
    fn stl(&self, name: &str, tris: &[Triangle]) -> PathBuf {
        let p = self.0.join(name);
        write_binary_stl(&p, tris).unwrap();
        p
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A 0.6 x 0.3 x 0.4 m tank at dp = 2 cm with `blocks` (TOML) appended, reading STL files from
/// `base`.
fn case(base: &Path, blocks: &str) -> SphCase {
    let mut c = SphCase::from_toml_str(&format!(
        r#"method = "sph"
dt = 1e-3
end_time = 0.01
[domain]
min = [0.0, 0.0, 0.0]
max = [0.6, 0.3, 0.4]
[sph]
spacing = 0.02
{blocks}"#
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    c.base_dir = base.to_path_buf();
    c
}

fn particles(c: &SphCase) -> SphParticles {
    let k = c.constants().unwrap_or_else(|e| panic!("{e}"));
    c.particles(&k).unwrap_or_else(|e| panic!("{e}"))
}

fn of_kind(p: &SphParticles, kind: u32) -> Vec<[f64; 3]> {
    (0..p.pos.len())
        .filter(|&k| p.kind[k] == kind)
        .map(|k| p.pos[k])
        .collect()
}

/// An obstacle given as the STL of a box is the box obstacle, particle for particle (and bit
/// for bit), and the fluid beside it is unchanged.
#[test]
fn an_stl_box_solid_is_the_box_obstacle() {
    let d = Dir::new("box");
    // Faces between the lattice's sites (a site exactly on a face of a box obstacle is its,
    // of an STL surface only on the solid's -x, -y and -z faces).
    let (min, max) = ([0.305, 0.045, 0.0], [0.452, 0.223, 0.171]);
    d.stl("block.stl", &box_triangles(min, max));
    let fluid = "[[fluid]]\nmin = [0.0, 0.0, 0.0]\nmax = [0.2, 0.3, 0.2]\n";
    let a = particles(&case(
        &d.0,
        &format!("{fluid}[[obstacles]]\nmin = {min:?}\nmax = {max:?}\n"),
    ));
    let b = particles(&case(
        &d.0,
        &format!("{fluid}[[obstacles]]\nstl = \"block.stl\"\n"),
    ));
    // The solid's particles (the boundary inside the tank): 8 x 9 x 9 sites of x, y, z =
    // 0.01 + 0.02 k within the box.
    let solid = of_kind(&b, KIND_BOUNDARY)
        .into_iter()
        .filter(|q| (0..3).all(|a| q[a] > 0.0 && q[a] < [0.6, 0.3, 0.4][a]))
        .count();
    assert_eq!(solid, 8 * 9 * 9);
    // (Compared field by field: a failing assert_eq! would print every particle.)
    assert_eq!(a.kind.len(), b.kind.len());
    assert!(
        a.kind == b.kind && a.pos == b.pos && a.rho == b.rho,
        "the particles differ"
    );
}

/// Fluid from the STL of a cylinder: the tank's lattice sites inside it, whose volume is the
/// cylinder's within the lattice's error; the free surface (hydrostatic density) is its top.
#[test]
fn an_stl_fluid_fills_the_inside_of_its_surface() {
    let d = Dir::new("fluid");
    let tris = cylinder_triangles([0.3, 0.15, 0.0], 0.12, 0.25, 64);
    d.stl("column.stl", &tris);
    let c = case(&d.0, "[[fluid]]\nstl = \"column.stl\"\n");
    let k = c.constants().unwrap();
    assert!((k.surface - 0.25).abs() < 1e-12, "surface {}", k.surface);
    let p = particles(&c);
    let fluid = of_kind(&p, KIND_FLUID);
    // Between the lattice sites inside the 64-gon's inscribed and circumscribed cylinders.
    let sites_within = |r: f64| {
        let mut n = 0;
        for k in 0..20 {
            for j in 0..15 {
                for i in 0..30 {
                    let q = [
                        0.01 + 0.02 * i as f64,
                        0.01 + 0.02 * j as f64,
                        0.01 + 0.02 * k as f64,
                    ];
                    n += usize::from((q[0] - 0.3).hypot(q[1] - 0.15) < r && q[2] < 0.25);
                }
            }
        }
        n
    };
    let (lo, hi) = (
        sites_within(0.12 * (std::f64::consts::PI / 64.0).cos()),
        sites_within(0.12),
    );
    assert!(
        fluid.len() >= lo && fluid.len() <= hi,
        "{} sites, {lo}..{hi} expected",
        fluid.len()
    );
    let vol = fluid.len() as f64 * 0.02f64.powi(3);
    let exact = enclosed_volume(&tris);
    println!(
        "{} fluid particles: {vol:.5} m^3 against {exact:.5} inside",
        fluid.len()
    );
    for q in &fluid {
        let r = (q[0] - 0.3).hypot(q[1] - 0.15);
        assert!(
            r < 0.12 && q[2] > 0.0 && q[2] < 0.25,
            "{q:?} is outside the cylinder"
        );
        // The tank's lattice: x = 0.01 + 0.02 i.
        let i = (q[0] - 0.01) / 0.02;
        assert!((i - i.round()).abs() < 1e-9, "{q:?} is off the lattice");
    }
}

/// A fluid box that covers the place of a solid cylinder: no fluid inside it, none closer than
/// dp/2 to its particles, the rest of the box kept.
#[test]
fn fluid_inside_or_against_a_solid_is_left_out() {
    let d = Dir::new("pier");
    let tris = cylinder_triangles([0.3, 0.15, 0.0], 0.06, 0.3, 48);
    d.stl("pier.stl", &tris);
    let blocks = "[[fluid]]\nmin = [0.005, 0.0, 0.0]\nmax = [0.6, 0.3, 0.2]\n";
    let alone = particles(&case(&d.0, blocks));
    let with = particles(&case(
        &d.0,
        &format!("{blocks}[[obstacles]]\nstl = \"pier.stl\"\n"),
    ));
    let (f0, f1) = (of_kind(&alone, KIND_FLUID), of_kind(&with, KIND_FLUID));
    let solid: Vec<[f64; 3]> = of_kind(&with, KIND_BOUNDARY)
        .into_iter()
        .filter(|q| (0..3).all(|a| q[a] > 0.0 && q[a] < [0.6, 0.3, 0.4][a]))
        .collect();
    assert!(!solid.is_empty());
    for q in &f1 {
        let r = (q[0] - 0.3).hypot(q[1] - 0.15);
        assert!(
            r >= 0.06 - 1e-9 || q[2] > 0.3,
            "fluid at {q:?} inside the pier"
        );
        for s in &solid {
            assert!(
                vec3::norm(vec3::sub(*q, *s)) >= 0.01,
                "fluid at {q:?} against {s:?}"
            );
        }
    }
    // What was left out is about the pier's volume below the fluid's top.
    let removed = (f0.len() - f1.len()) as f64 * 0.02f64.powi(3);
    let pier = std::f64::consts::PI * 0.06f64.powi(2) * 0.2;
    assert!(
        removed > 0.8 * pier && removed < 2.0 * pier,
        "{removed} m^3 left out, pier {pier}"
    );
    // The fluid box's own lattice is kept where it is clear of the pier.
    assert!(f1.iter().all(|q| f0.contains(q)));
}

/// Bad STL blocks are errors that name the key and say what is wrong.
#[test]
fn bad_stl_blocks_are_refused_by_name() {
    let d = Dir::new("bad");
    let mut open = box_triangles([0.1, 0.1, 0.1], [0.2, 0.2, 0.2]);
    open.pop();
    d.stl("open.stl", &open);
    d.stl("big.stl", &box_triangles([0.1, 0.1, 0.1], [0.9, 0.2, 0.2]));
    std::fs::write(d.0.join("junk.stl"), b"not an stl").unwrap();
    // A needle 2.2 cm long on a diagonal that passes between the sites (x, y, z = 0.01 + 0.02 k):
    // its box is more than a spacing on every axis, and no site lies inside.
    let (a, b) = ([0.300, 0.104, 0.108], [0.322, 0.126, 0.130]);
    let mid = vec3::scale(vec3::add(a, b), 0.5);
    let (m1, m2) = (
        vec3::add(mid, [0.001, -0.001, 0.0]),
        vec3::add(mid, [0.0, 0.001, -0.001]),
    );
    d.stl(
        "needle.stl",
        &[[a, b, m1], [a, m1, m2], [a, m2, b], [b, m2, m1]],
    );
    let fluid = "[[fluid]]\nmin = [0.0, 0.0, 0.0]\nmax = [0.1, 0.3, 0.1]\n";
    for (blocks, key, words) in [
        (
            format!("{fluid}[[obstacles]]\nstl = \"missing.stl\"\n"),
            "obstacles[0].stl",
            "missing.stl",
        ),
        (
            format!("{fluid}[[obstacles]]\nstl = \"junk.stl\"\n"),
            "obstacles[0].stl",
            "junk.stl",
        ),
        (
            format!("{fluid}[[obstacles]]\nstl = \"open.stl\"\n"),
            "obstacles[0].stl",
            "not a closed surface",
        ),
        (
            format!("{fluid}[[obstacles]]\nstl = \"big.stl\"\n"),
            "obstacles[0]",
            "inside the tank",
        ),
        (
            "[[fluid]]\nstl = \"big.stl\"\n".to_string(),
            "fluid[0]",
            "inside the tank",
        ),
        (
            "[[fluid]]\nstl = \"open.stl\"\n".to_string(),
            "fluid[0].stl",
            "not a closed surface",
        ),
        (
            format!("{fluid}[[obstacles]]\nstl = \"big.stl\"\nscale = -1.0\n"),
            "obstacles[0].scale",
            "> 0",
        ),
        (
            format!("{fluid}[[obstacles]]\nstl = \"big.stl\"\nmin = [0.0, 0.0, 0.0]\n"),
            "obstacles[0]",
            "either",
        ),
        (
            format!("{fluid}[[obstacles]]\nmax = [0.2, 0.2, 0.2]\n"),
            "obstacles[0]",
            "either",
        ),
        (
            format!("{fluid}[[obstacles]]\nstl = \"needle.stl\"\n"),
            "obstacles[0].stl",
            "thinner than the spacing",
        ),
    ] {
        let c = case(&d.0, &blocks);
        let e = match c.constants() {
            Err(e) => e,
            Ok(k) => c.particles(&k).expect_err(&blocks),
        };
        let m = e.to_string();
        assert!(m.starts_with(key) && m.contains(words), "{blocks}: {m}");
    }
}

/// The case kept with a run (segment, checkpoints) names its STL files by absolute path, and
/// parses back to the same case.
#[test]
fn the_stored_case_finds_its_stl_from_anywhere() {
    let d = Dir::new("stored");
    d.stl(
        "pier.stl",
        &cylinder_triangles([0.3, 0.15, 0.0], 0.06, 0.3, 16),
    );
    let c = case(&d.0, "[[fluid]]\nmin = [0.0, 0.0, 0.0]\nmax = [0.2, 0.3, 0.2]\n[[obstacles]]\nstl = \"pier.stl\"\n");
    assert!(c.uses_stl());
    let text = c.self_contained_toml().unwrap();
    let back = SphCase::from_toml_str(&text).unwrap();
    let stl = back.obstacles[0].stl.clone().unwrap();
    assert!(stl.is_absolute() && stl.ends_with("pier.stl"), "{stl:?}");
    assert_eq!(particles(&back), particles(&c));
}
