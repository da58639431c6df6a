//! Property test (hardening issue, item 4): every numeric field of the case format, set to a
//! value from {in range, 0, negative, huge (1e300), tiny (1e-300), NaN, inf, -inf}, makes
//! loading and validating end quickly with either Ok or an error that names the field, and
//! never panics. Values outside the documented range (`solver::case::ranges`, restated here as
//! the contract) must be errors naming the field; values inside may still be refused for another
//! reason (a spacing below the new diameter, a time step above the stability bound), with an
//! error that names the case file.
//!
//! One test sweeps every (field, class) pair; a proptest draws random in-range values and
//! random classes on top. Both use a small case (70 particles, two meshes): a few seconds.

use proptest::prelude::*;
use solver::Case;
use std::path::Path;
use std::time::{Duration, Instant};

const BASE: &str = r#"
dt = 1e-4
end_time = 0.5
gravity = [0.0, 0.0, -9.81]
reorder_every = 100

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
young_modulus = 1e7
normal_stiffness = 1e4
poisson_ratio = 0.25
restitution = 0.5
sliding_friction = 0.5
rolling_friction = 0.02

[wall_material]
young_modulus = 1e7
normal_stiffness = 1e4
poisson_ratio = 0.3
restitution = 0.5
sliding_friction = 0.5
rolling_friction = 0.01

[[sources]]
type = "grid"
species = "glass"
min = [0.0, 0.0, 0.0]
max = [0.5, 0.5, 0.2]
spacing = 0.025
count = 50
jitter = 0.2
seed = 3
velocity = [0.0, 0.0, -1.0]

[[sources]]
type = "random_box"
species = "glass"
min = [0.0, 0.0, 0.3]
max = [0.5, 0.5, 0.45]
count = 20
seed = 4
velocity = [0.0, 0.0, 0.0]

[[meshes]]
name = "paddle"
triangles = [
  [[0.1, 0.1, 0.25], [0.4, 0.1, 0.25], [0.1, 0.4, 0.25]],
  [[0.4, 0.1, 0.25], [0.4, 0.4, 0.25], [0.1, 0.4, 0.25]],
]
scale = 1.0
material = { young_modulus = 1e8, normal_stiffness = 2e4, poisson_ratio = 0.3, restitution = 0.6, sliding_friction = 0.3, rolling_friction = 0.01 }
motion = { type = "rotation", axis_point = [0.25, 0.25, 0.0], axis_direction = [0.0, 0.0, 1.0], rpm = 30.0 }

[[meshes]]
name = "lid"
triangles = [[[0.0, 0.0, 0.48], [0.5, 0.0, 0.48], [0.0, 0.5, 0.48]]]
motion = { type = "translation", velocity = [0.0, 0.0, -0.01] }

[output]
vtk_interval = 0.01
checkpoint_interval = 0.1
"#;

/// The classes of values every field is tried with.
#[derive(Debug, Clone, Copy)]
enum Class {
    InRange(f64),
    Zero,
    Negative,
    Huge,
    Tiny,
    Nan,
    Inf,
    NegInf,
}

const CLASSES: usize = 8;

fn class(i: usize, u: f64) -> Class {
    match i % CLASSES {
        0 => Class::InRange(u),
        1 => Class::Zero,
        2 => Class::Negative,
        3 => Class::Huge,
        4 => Class::Tiny,
        5 => Class::Nan,
        6 => Class::Inf,
        _ => Class::NegInf,
    }
}

/// A float field: where it is in the TOML, what its errors call it, how to draw an in-range
/// value from u in [0, 1], and whether a value is inside the documented range (given the rest
/// of the base case).
struct FloatField {
    path: &'static str,
    error_field: &'static str,
    sample: fn(f64) -> f64,
    valid: fn(f64) -> bool,
}

/// An integer field: path, key named by its errors, in-range sample, validity.
struct IntField {
    path: &'static str,
    error_field: &'static str,
    key: &'static str,
    sample: fn(f64) -> i64,
    valid: fn(i64) -> bool,
}

fn closed(v: f64, lo: f64, hi: f64) -> bool {
    v.is_finite() && (lo..=hi).contains(&v)
}
fn log_between(u: f64, lo: f64, hi: f64) -> f64 {
    (lo.ln() + u * (hi.ln() - lo.ln())).exp().clamp(lo, hi)
}
fn lin_between(u: f64, lo: f64, hi: f64) -> f64 {
    (lo + u * (hi - lo)).clamp(lo, hi)
}
fn len2(a: f64, b: f64) -> f64 {
    a.hypot(b)
}

macro_rules! f {
    ($path:expr, $err:expr, $sample:expr, $valid:expr) => {
        FloatField {
            path: $path,
            error_field: $err,
            sample: $sample,
            valid: $valid,
        }
    };
}

/// Material fields under `prefix` (species, wall material, mesh material).
macro_rules! material {
    ($p:literal) => {
        [
            f!(
                concat!($p, ".young_modulus"),
                concat!($p, ".young_modulus"),
                |u| log_between(u, 1.0, 1e13),
                |v| closed(v, 1.0, 1e13)
            ),
            f!(
                concat!($p, ".normal_stiffness"),
                concat!($p, ".normal_stiffness"),
                |u| log_between(u, 1e-6, 1e15),
                |v| closed(v, 1e-6, 1e15)
            ),
            f!(
                concat!($p, ".poisson_ratio"),
                concat!($p, ".poisson_ratio"),
                |u| lin_between(u, -0.99, 0.49),
                |v| v.is_finite() && v > -1.0 && v < 0.5
            ),
            f!(
                concat!($p, ".restitution"),
                concat!($p, ".restitution"),
                |u| lin_between(u, 0.01, 1.0),
                |v| v.is_finite() && v > 0.0 && v <= 1.0
            ),
            f!(
                concat!($p, ".sliding_friction"),
                concat!($p, ".sliding_friction"),
                |u| lin_between(u, 0.0, 10.0),
                |v| closed(v, 0.0, 10.0)
            ),
            f!(
                concat!($p, ".rolling_friction"),
                concat!($p, ".rolling_friction"),
                |u| lin_between(u, 0.0, 10.0),
                |v| closed(v, 0.0, 10.0)
            ),
        ]
    };
}

fn coordinate(v: f64) -> bool {
    closed(v, -1e6, 1e6)
}
fn any_coordinate(u: f64) -> f64 {
    lin_between(u, -1e6, 1e6)
}

fn float_fields() -> Vec<FloatField> {
    let mut v = vec![
        f!("dt", "dt", |u| log_between(u, 1e-12, 1.0), |v| closed(
            v, 1e-12, 1.0
        )),
        f!(
            "end_time",
            "end_time",
            |u| log_between(u, 1e-12, 1e9),
            |v| closed(v, 1e-12, 1e9)
        ),
        f!(
            "gravity[0]",
            "gravity",
            |u| lin_between(u, -9000.0, 9000.0),
            |v| v.is_finite() && len2(v, 9.81) <= 1e4
        ),
        f!(
            "gravity[2]",
            "gravity",
            |u| lin_between(u, -1e4, 1e4),
            |v| v.is_finite() && v.abs() <= 1e4
        ),
        f!(
            "contact_model.tangential_stiffness_ratio",
            "contact_model.tangential_stiffness_ratio",
            |u| lin_between(u, 0.0, 10.0),
            |v| closed(v, 0.0, 10.0)
        ),
        f!(
            "species[0].radius",
            "species[0].radius",
            |u| log_between(u, 1e-9, 1e3),
            |v| closed(v, 1e-9, 1e3)
        ),
        f!(
            "species[0].density",
            "species[0].density",
            |u| log_between(u, 1e-2, 1e5),
            |v| closed(v, 1e-2, 1e5)
        ),
        f!(
            "sources[0].spacing",
            "sources[0].spacing",
            |u| log_between(u, 0.02, 2e6),
            |v| closed(v, 0.02, 2e6)
        ),
        f!("sources[0].jitter", "sources[0].jitter", |u| u, |v| closed(
            v, 0.0, 1.0
        )),
        f!(
            "sources[0].velocity[2]",
            "sources[0].velocity",
            |u| lin_between(u, -1e5, 1e5),
            |v| v.is_finite() && v.abs() <= 1e5
        ),
        f!(
            "sources[1].velocity[0]",
            "sources[1].velocity",
            |u| lin_between(u, -1e5, 1e5),
            |v| v.is_finite() && v.abs() <= 1e5
        ),
        f!(
            "meshes[0].scale",
            "meshes[0].scale",
            |u| log_between(u, 1e-9, 1e9),
            |v| closed(v, 1e-9, 1e9)
        ),
        f!(
            "meshes[0].motion.rpm",
            "meshes[0].motion.rpm",
            |u| lin_between(u, -1e6, 1e6),
            |v| closed(v, -1e6, 1e6)
        ),
        f!(
            "meshes[1].motion.velocity[1]",
            "meshes[1].motion.velocity",
            |u| lin_between(u, -1e5, 1e5),
            |v| v.is_finite() && len2(v, 0.01) <= 1e5
        ),
        f!(
            "output.vtk_interval",
            "output.vtk_interval",
            |u| log_between(u, 1e-12, 1e9),
            |v| closed(v, 1e-12, 1e9)
        ),
        f!(
            "output.checkpoint_interval",
            "output.checkpoint_interval",
            |u| log_between(u, 1e-12, 1e9),
            |v| closed(v, 1e-12, 1e9)
        ),
    ];
    // Positions: every coordinate in [-1e6, 1e6] m.
    for (path, err) in [
        ("domain.min[0]", "domain.min"),
        ("domain.min[2]", "domain.min"),
        ("domain.max[1]", "domain.max"),
        ("sources[0].min[0]", "sources[0].min"),
        ("sources[0].max[2]", "sources[0].max"),
        ("sources[1].min[1]", "sources[1].min"),
        ("sources[1].max[0]", "sources[1].max"),
        (
            "meshes[0].motion.axis_point[0]",
            "meshes[0].motion.axis_point",
        ),
        (
            "meshes[0].motion.axis_direction[2]",
            "meshes[0].motion.axis_direction",
        ),
        ("meshes[0].triangles[0][0][0]", "meshes[0].triangles[0]"),
        ("meshes[0].triangles[1][2][1]", "meshes[0].triangles[1]"),
        ("meshes[1].triangles[0][1][2]", "meshes[1].triangles[0]"),
    ] {
        v.push(f!(path, err, any_coordinate, coordinate));
    }
    v.extend(material!("species[0]"));
    v.extend(material!("wall_material"));
    v.extend(material!("meshes[0].material"));
    v
}

fn int_fields() -> Vec<IntField> {
    vec![
        IntField {
            path: "reorder_every",
            error_field: "reorder_every",
            key: "reorder_every",
            sample: |u| 1 + (u * 1000.0) as i64,
            valid: |v| (1..=u32::MAX as i64).contains(&v),
        },
        IntField {
            path: "sources[0].count",
            error_field: "sources[0].count",
            key: "count",
            sample: |u| 1 + (u * 100.0) as i64,
            valid: |v| (1..=u32::MAX as i64).contains(&v),
        },
        IntField {
            path: "sources[0].seed",
            error_field: "sources[0].seed",
            key: "seed",
            sample: |u| (u * 1e12) as i64,
            valid: |v| v >= 0,
        },
        IntField {
            path: "sources[1].count",
            error_field: "sources[1].count",
            key: "count",
            sample: |u| 1 + (u * 100.0) as i64,
            valid: |v| (1..=u32::MAX as i64).contains(&v),
        },
        IntField {
            path: "sources[1].seed",
            error_field: "sources[1].seed",
            key: "seed",
            sample: |u| (u * 1e12) as i64,
            valid: |v| v >= 0,
        },
    ]
}

/// Path segments of "a.b[1][2].c".
fn segments(path: &str) -> Vec<Result<&str, usize>> {
    let mut out = Vec::new();
    for part in path.split('.') {
        let mut it = part.split('[');
        out.push(Ok(it.next().expect("key")));
        for idx in it {
            out.push(Err(idx.trim_end_matches(']').parse().expect("index")));
        }
    }
    out
}

/// The base case with the value at `path` replaced.
fn with_value(path: &str, value: toml::Value) -> String {
    let mut doc: toml::Value = toml::from_str(BASE).expect("base parses");
    let mut at = &mut doc;
    for seg in segments(path) {
        at = match seg {
            Ok(key) => at.get_mut(key),
            Err(i) => at.get_mut(i),
        }
        .unwrap_or_else(|| panic!("{path} is not in the base case"));
    }
    *at = value;
    toml::to_string(&doc).expect("serialises")
}

/// Loads and validates `text`; a panic becomes a test failure naming the input.
fn load(text: &str, what: &str) -> (Result<(), String>, Duration) {
    let t = Instant::now();
    let r = std::panic::catch_unwind(|| {
        Case::from_toml_str(text, "prop.toml", Path::new("."))
            .and_then(|c| c.validate().map(|_| ()))
            .map_err(|e| e.to_string())
    });
    let elapsed = t.elapsed();
    match r {
        Ok(r) => (r, elapsed),
        Err(_) => panic!("validating {what} panicked"),
    }
}

fn float_value(c: Class, field: &FloatField) -> f64 {
    match c {
        Class::InRange(u) => (field.sample)(u),
        Class::Zero => 0.0,
        Class::Negative => -(field.sample)(0.5).abs().max(1.0),
        Class::Huge => 1e300,
        Class::Tiny => 1e-300,
        Class::Nan => f64::NAN,
        Class::Inf => f64::INFINITY,
        Class::NegInf => f64::NEG_INFINITY,
    }
}

/// Checks the contract for one float field and value; returns a description of a violation.
fn check_float(field: &FloatField, v: f64) -> Result<(), String> {
    let what = format!("{} = {v:e}", field.path);
    let (r, elapsed) = load(&with_value(field.path, toml::Value::Float(v)), &what);
    if elapsed > Duration::from_secs(2) {
        return Err(format!("{what}: took {elapsed:?}"));
    }
    match r {
        Ok(()) if (field.valid)(v) => Ok(()),
        Ok(()) => Err(format!(
            "{what} is outside the documented range but was accepted"
        )),
        Err(e) if !e.starts_with("prop.toml: ") => Err(format!("{what}: unclear error {e:?}")),
        Err(e) if (field.valid)(v) => {
            let _ = e; // in range, refused for another reason: fine
            Ok(())
        }
        Err(e) if e.contains(field.error_field) => Ok(()),
        Err(e) => Err(format!(
            "{what}: the error does not name {}: {e:?}",
            field.error_field
        )),
    }
}

fn int_value(c: Class, field: &IntField) -> toml::Value {
    match c {
        Class::InRange(u) => toml::Value::Integer((field.sample)(u)),
        Class::Zero => toml::Value::Integer(0),
        Class::Negative => toml::Value::Integer(-1),
        Class::Huge => toml::Value::Integer(i64::MAX),
        // Floats where a whole number belongs.
        Class::Tiny => toml::Value::Float(1e-300),
        Class::Nan => toml::Value::Float(f64::NAN),
        Class::Inf => toml::Value::Float(f64::INFINITY),
        Class::NegInf => toml::Value::Float(1e300),
    }
}

fn check_int(field: &IntField, value: toml::Value) -> Result<(), String> {
    let what = format!("{} = {value}", field.path);
    let valid = value.as_integer().is_some_and(field.valid);
    let (r, elapsed) = load(&with_value(field.path, value), &what);
    if elapsed > Duration::from_secs(2) {
        return Err(format!("{what}: took {elapsed:?}"));
    }
    match r {
        Ok(()) if valid => Ok(()),
        Ok(()) => Err(format!("{what} is invalid but was accepted")),
        Err(e) if !e.starts_with("prop.toml: ") => Err(format!("{what}: unclear error {e:?}")),
        Err(_) if valid => Ok(()),
        // Parse errors name the key (`count`); field checks name the path (`sources[0].count`).
        Err(e) if e.contains(field.error_field) || e.contains(&format!("`{}`", field.key)) => {
            Ok(())
        }
        Err(e) => Err(format!(
            "{what}: the error does not name {}: {e:?}",
            field.key
        )),
    }
}

#[test]
fn the_base_case_is_valid() {
    let (r, _) = load(BASE, "the base case");
    r.unwrap();
}

/// Every field with every class (in-range values at the middle of the range).
#[test]
fn every_field_with_every_class() {
    let t = Instant::now();
    let mut failures = Vec::new();
    for field in float_fields() {
        for i in 0..CLASSES {
            if let Err(e) = check_float(&field, float_value(class(i, 0.5), &field)) {
                failures.push(e);
            }
        }
    }
    for field in int_fields() {
        for i in 0..CLASSES {
            if let Err(e) = check_int(&field, int_value(class(i, 0.5), &field)) {
                failures.push(e);
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    println!("swept in {:?}", t.elapsed());
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn any_float_field_any_value(field in 0usize..1000, cls in 0usize..CLASSES, u in 0.0f64..=1.0) {
        let fields = float_fields();
        let field = &fields[field % fields.len()];
        let v = float_value(class(cls, u), field);
        if let Err(e) = check_float(field, v) {
            return Err(TestCaseError::fail(e));
        }
    }

    #[test]
    fn any_int_field_any_value(field in 0usize..1000, cls in 0usize..CLASSES, u in 0.0f64..=1.0) {
        let fields = int_fields();
        let field = &fields[field % fields.len()];
        if let Err(e) = check_int(field, int_value(class(cls, u), field)) {
            return Err(TestCaseError::fail(e));
        }
    }
}
