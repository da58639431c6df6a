//! SPH fluid and solids from closed STL surfaces (issue 17): `[[fluid]] stl = ...` fills the
//! inside of a surface with fluid, `[[obstacles]] stl = ...` with boundary particles, both on the
//! tank's lattice; fluid that a box puts inside a solid, or closer than dp/2 to its particles, is
//! left out; unreadable, open or misplaced surfaces are errors naming the key.

use std::path::{Path, PathBuf};

use solver::core::geometry::{box_triangles, cylinder_triangles, enclosed_volume};
use solver::core::stl::{write_binary_stl, Triangle};
use solver::core::vec3;
use solver::sph::cpu::SphSim;
use solver::sph::mdbc::ghost_nodes;
use solver::sph::setup::{BoundaryName, SphCase, SphParticles, KIND_BOUNDARY, KIND_FLUID};

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

/// `case` with `[sph] boundary = "mdbc"`.
fn mdbc_case(base: &Path, blocks: &str) -> SphCase {
    let mut c = case(base, blocks);
    c.sph.boundary = BoundaryName::Mdbc;
    c
}

/// The ghost nodes at rest of a case's particles.
/// An STL keeps its vertices in f32: the surface lies within this of the one written [m].
const TOL: f64 = 1e-6;

fn ghosts(c: &SphCase) -> (SphParticles, Vec<[f64; 3]>) {
    let k = c.constants().unwrap_or_else(|e| panic!("{e}"));
    let p = c.particles(&k).unwrap_or_else(|e| panic!("{e}"));
    let g = ghost_nodes(k.mdbc.as_ref().unwrap(), &p.pos, &p.kind);
    (p, g)
}

/// mDBC through an STL solid: the particles of the STL of a box mirror through its closest
/// face, as those of the box obstacle do (where two faces are as near, through either: the
/// node lies as far beyond the surface); those deeper than the support plus dp have no node.
#[test]
fn an_stl_box_solid_mirrors_as_the_box_obstacle_with_mdbc() {
    let d = Dir::new("mdbc-box");
    // Thicker than twice the support plus dp (0.089 m), so that some particles lie deeper.
    let (min, max) = ([0.255, 0.025, 0.0], [0.545, 0.275, 0.305]);
    d.stl("block.stl", &box_triangles(min, max));
    let fluid = "[[fluid]]\nmin = [0.0, 0.0, 0.0]\nmax = [0.2, 0.3, 0.2]\n";
    let (pa, ga) = ghosts(&mdbc_case(
        &d.0,
        &format!("{fluid}[[obstacles]]\nmin = {min:?}\nmax = {max:?}\n"),
    ));
    let (pb, gb) = ghosts(&mdbc_case(
        &d.0,
        &format!("{fluid}[[obstacles]]\nstl = \"block.stl\"\n"),
    ));
    assert!(pa.pos == pb.pos && pa.kind == pb.kind);
    let k = case(&d.0, fluid).constants().unwrap();
    let reach = 2.0 * k.h + k.dp;
    let (mut same, mut ties, mut deep) = (0, 0, 0);
    for (i, q) in pb.pos.iter().enumerate() {
        let solid = pb.kind[i] == KIND_BOUNDARY && (0..3).all(|a| q[a] > 0.0 && q[a] < 0.6);
        let solid = solid && q[1] < 0.3 && q[2] < 0.4;
        if !solid {
            // Fluid (no node) and the tank's walls: the same code, the same nodes.
            assert!(
                ga[i]
                    .iter()
                    .zip(&gb[i])
                    .all(|(a, b)| a == b || (a.is_nan() && b.is_nan())),
                "{q:?}: {:?} against {:?}",
                ga[i],
                gb[i]
            );
            continue;
        }
        let mut depths: Vec<f64> = (0..3)
            .flat_map(|a| [q[a] - min[a], max[a] - q[a]])
            .collect();
        depths.sort_by(f64::total_cmp);
        if depths[0] > reach {
            assert!(gb[i][0].is_nan(), "{q:?} at {} m has a node", depths[0]);
            deep += 1;
        } else if depths[1] > depths[0] + TOL {
            let near = (0..3).all(|a| (ga[i][a] - gb[i][a]).abs() < TOL);
            assert!(near, "{q:?}: {:?} against {:?}", ga[i], gb[i]);
            same += 1;
        } else {
            let moved = vec3::norm(vec3::sub(gb[i], *q));
            assert!(
                (moved - 2.0 * depths[0]).abs() < TOL,
                "{q:?}: node {:?}",
                gb[i]
            );
            let beyond = (0..3).any(|a| gb[i][a] < min[a] - TOL || gb[i][a] > max[a] + TOL);
            assert!(beyond, "{q:?}: node {:?} inside the solid", gb[i]);
            ties += 1;
        }
    }
    println!("{same} nodes as the box's, {ties} through either of two faces, {deep} deep");
    assert!(same > 100 && ties > 10 && deep > 0, "{same} {ties} {deep}");
}

/// The particles of a cylindrical pier from an STL mirror through its surface: each node lies
/// outside the 48-gon, the midpoint of particle and node on its side or a cap, as far from the
/// particle as the surface is; particles deeper than the support plus dp have none.
#[test]
fn a_cylinder_pier_mirrors_through_its_surface_with_mdbc() {
    let d = Dir::new("mdbc-pier");
    let (r, top, n) = (0.12, 0.3, 48);
    d.stl("pier.stl", &cylinder_triangles([0.3, 0.15, 0.0], r, top, n));
    let c = mdbc_case(
        &d.0,
        "[[fluid]]\nmin = [0.0, 0.0, 0.0]\nmax = [0.2, 0.3, 0.2]\n[[obstacles]]\nstl = \"pier.stl\"\n",
    );
    let k = c.constants().unwrap();
    let reach = 2.0 * k.h + k.dp;
    let (p, g) = ghosts(&c);
    let inner = r * (std::f64::consts::PI / n as f64).cos();
    let (mut mirrored, mut deep) = (0, 0);
    for (i, q) in p.pos.iter().enumerate() {
        let radius = (q[0] - 0.3).hypot(q[1] - 0.15);
        if p.kind[i] != KIND_BOUNDARY || radius > r || q[2] < 0.0 || q[2] > top {
            continue;
        }
        // Depth below the side (between the 48-gon's inscribed and circumscribed circles), the
        // top or the bottom (on the floor).
        let depth = (inner - radius).min(top - q[2]).min(q[2]);
        if depth > reach {
            assert!(g[i][0].is_nan(), "{q:?} deep inside has a node");
            deep += 1;
            continue;
        }
        if depth < reach - (r - inner) - TOL {
            assert!(!g[i][0].is_nan(), "{q:?} near the surface has no node");
        }
        if g[i][0].is_nan() {
            continue;
        }
        let m = vec3::scale(vec3::add(g[i], *q), 0.5);
        let (mr, gr) = (
            (m[0] - 0.3).hypot(m[1] - 0.15),
            (g[i][0] - 0.3).hypot(g[i][1] - 0.15),
        );
        let on_side = mr > inner - TOL && mr < r + TOL && m[2] <= top + TOL;
        let on_cap = ((m[2] - top).abs() < TOL || m[2].abs() < TOL) && mr <= r + TOL;
        assert!(on_side || on_cap, "{q:?}: midpoint {m:?}");
        let outside = gr > inner - TOL || g[i][2] > top || g[i][2] < 0.0;
        assert!(outside, "{q:?}: node {:?} inside", g[i]);
        let half = vec3::norm(vec3::sub(g[i], *q)) / 2.0;
        assert!(
            half <= depth + (r - inner) + TOL && half <= reach,
            "{q:?}: {half} m"
        );
        mirrored += 1;
    }
    assert!(
        mirrored > 200 && deep > 0,
        "{mirrored} mirrored, {deep} deep"
    );
}

/// A dam break against an STL pier with mDBC on the CPU: the water reaches the pier, none
/// enters it, every density stays finite.
#[test]
fn a_dam_break_around_an_stl_pier_with_mdbc_keeps_the_water_out() {
    let d = Dir::new("mdbc-run");
    let (r, top) = (0.05, 0.3);
    d.stl(
        "pier.stl",
        &cylinder_triangles([0.23, 0.15, 0.0], r, top, 32),
    );
    let c = mdbc_case(
        &d.0,
        "[[fluid]]\nmin = [0.0, 0.0, 0.0]\nmax = [0.16, 0.3, 0.2]\n[[obstacles]]\nstl = \"pier.stl\"\n",
    );
    let k = c.constants().unwrap();
    let p = c.particles(&k).unwrap();
    let rho0 = k.rho0;
    let pier: Vec<usize> = (0..p.pos.len())
        .filter(|&i| {
            let q = p.pos[i];
            p.kind[i] == KIND_BOUNDARY && (q[0] - 0.23).hypot(q[1] - 0.15) < r && q[2] > 0.0
        })
        .collect();
    let mut sim = SphSim::new(k, p);
    while sim.s.time < 0.15 {
        sim.step();
    }
    let s = &sim.s;
    assert!(s.rho.iter().all(|r| r.is_finite() && *r >= rho0 * 0.9));
    for (i, q) in s.pos.iter().enumerate() {
        if s.kind[i] == KIND_FLUID {
            let radius = (q[0] - 0.23).hypot(q[1] - 0.15);
            assert!(
                radius > r - 0.01 || q[2] > top,
                "fluid {i} at {q:?} in the pier"
            );
        }
    }
    // The water reached the pier (its upstream face at x = 0.18).
    let wet = s
        .pos
        .iter()
        .zip(&s.kind)
        .filter(|(q, &k)| k == KIND_FLUID && q[0] > 0.17)
        .count();
    println!(
        "t = {:.3} s: {wet} fluid particles past x = 0.17 m, {} pier particles",
        s.time,
        pier.len()
    );
    assert!(wet > 50, "{wet}");
}

/// The segment and the checkpoints keep a run's case as `self_contained_toml` writes it (with
/// the command line's overrides): for every shipped SPH case it reads back as the same case,
/// placing the same particles.
#[test]
fn every_shipped_case_reads_back_from_its_stored_text() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("cases");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        if !text.contains("method = \"sph\"") {
            continue;
        }
        let mut case = SphCase::from_toml_str(&text).unwrap();
        case.base_dir = dir.clone();
        // An override the stored text must carry (as --end-time's).
        case.end_time *= 0.5;
        let stored = case.self_contained_toml().unwrap();
        let back = SphCase::from_toml_str(&stored).unwrap();
        let name = path.display();
        // The STL paths are absolute in the stored text; everything else is the case's.
        assert_eq!(back.self_contained_toml().unwrap(), stored, "{name}");
        let mut same = back.clone();
        for (b, o) in same
            .fluid
            .iter_mut()
            .chain(same.obstacles.iter_mut())
            .zip(case.fluid.iter().chain(&case.obstacles))
        {
            b.stl.clone_from(&o.stl);
        }
        same.base_dir = case.base_dir.clone();
        assert_eq!(same, case, "{name}");
        let placed = particles(&back);
        assert_eq!(placed, particles(&case), "{name}");
        // The memory check's count, made without placing, bounds the placed count closely.
        let bound = back.particle_bound(&back.constants().unwrap());
        let n = placed.pos.len() as u64;
        assert!(
            n <= bound && bound <= n + n / 4,
            "{name}: {n} particles placed, {bound} counted"
        );
        seen += 1;
    }
    assert_eq!(seen, 7, "the shipped SPH cases");
}
