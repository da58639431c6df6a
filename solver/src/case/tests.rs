//! Unit tests of case parsing and validation (file-level tests are in `solver/tests/`).

use super::*;

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
