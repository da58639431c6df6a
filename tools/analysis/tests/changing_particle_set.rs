//! A run whose particle set changes (outflow regions remove particles): frames carry
//! `particle_id`, hold fewer particles than the static section, and their header counts what
//! was removed. The metrics must use the live particles' own masses, and report the outflow.

mod common;
use common::*;
use std::f64::consts::PI;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ANALYSIS: &str = env!("CARGO_BIN_EXE_analysis");

/// Mass of static particle `id` [kg], from the f32 radius the segment holds.
fn mass(id: u32) -> f64 {
    let rho = [GLASS_DENSITY, STEEL_DENSITY][SET_SPECIES[id as usize] as usize];
    rho * 4.0 / 3.0 * PI * (SET_RADII[id as usize] as f64).powi(3)
}

#[test]
fn once_json_uses_the_live_particles_and_reports_the_outflow() {
    let name = Name::new("set-once");
    let _p = publish_set(&name.0, 1);
    let o = Command::new(ANALYSIS)
        .args(["--attach", &name.0, "--once", "--json"])
        .output()
        .expect("run analysis");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).expect("one JSON object on stdout");
    assert_eq!(v["particles"], 3);
    // Every live particle moves at 1 m/s: E_t = 1/2 (m1 + m3 + m4). By frame position
    // (entries 0, 1, 2) it would be 1/2 (m0 + m1 + m2), less than half of it.
    let live: f64 = SET_LIVE.iter().map(|&id| mass(id)).sum();
    let e = v["kinetic_energy_translational"].as_f64().expect("E_t");
    assert!(
        (e - 0.5 * live).abs() <= 1e-9 * live,
        "E_t {e}, want {}",
        0.5 * live
    );
    assert_eq!(v["lacey_species"][1], "steel");
    assert_eq!(v["removed_count"], 2);
    assert_eq!(v["removed_mass"], 0.5);
    assert!(v["discharge_rate"].is_null(), "{v}");
}

#[test]
fn csv_carries_the_outflow_and_the_discharge_rate_between_frames() {
    let name = Name::new("set-csv");
    let dir = std::env::temp_dir().join(format!("analysis-test-{}-set", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let csv = dir.join("m.csv");
    let mut p = publish_set(&name.0, 1);
    let child = Command::new(ANALYSIS)
        .args(["--attach", &name.0, "--quiet", "--csv"])
        .arg(&csv)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn analysis");
    let wait_rows = |rows: usize| {
        let end = Instant::now() + Duration::from_secs(20);
        while std::fs::read_to_string(&csv).map_or(0, |s| s.lines().count()) < rows + 1 {
            assert!(
                Instant::now() < end,
                "{} never got {rows} rows",
                csv.display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait_rows(1);
    publish_set_frame(&mut p, 2);
    wait_rows(2);
    p.set_state(shm_protocol::SolverState::Finished);
    let out = child.wait_with_output().expect("analysis exit");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&csv).expect("csv");
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split(',').collect()).collect();
    let col = |name: &str| {
        rows[0]
            .iter()
            .position(|c| *c == name)
            .unwrap_or_else(|| panic!("no column {name} in {text}"))
    };
    let (q, count, m) = (
        col("discharge_rate"),
        col("removed_count"),
        col("removed_mass"),
    );
    assert_eq!(rows.len(), 3, "{text}");
    assert_eq!((rows[1][count], rows[2][count]), ("2", "3"));
    assert_eq!(rows[2][m].parse::<f64>().ok(), Some(1.0));
    assert_eq!(rows[1][col("particles")], "3");
    // First analysed frame: no rate (empty cell); then 0.5 kg over 0.01 s.
    assert_eq!(rows[1][q], "", "{text}");
    let rate: f64 = rows[2][q].parse().expect("a number");
    assert!((rate - 50.0).abs() < 1e-9, "{rate}");
    let _ = std::fs::remove_dir_all(dir);
}
