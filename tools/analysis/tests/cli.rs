//! The `analysis` binary against a real segment: `--once --json` numbers checked by hand,
//! following a run to its end (finished and died), and clear errors.

mod common;
use common::*;
use std::f64::consts::PI;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

const ANALYSIS: &str = env!("CARGO_BIN_EXE_analysis");

fn run(args: &[&str]) -> (i32, String, String) {
    let o = Command::new(ANALYSIS)
        .args(args)
        .env("RUST_LOG", "info")
        .output()
        .expect("run analysis");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into(),
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

fn close(got: &serde_json::Value, want: f64, what: &str) {
    let g = got
        .as_f64()
        .unwrap_or_else(|| panic!("{what} is {got}, expected {want}"));
    assert!(
        (g - want).abs() <= 1e-6 * want.abs().max(1e-12),
        "{what}: got {g}, expected {want}"
    );
}

fn mass(density: f64, r: f64) -> f64 {
    density * 4.0 / 3.0 * PI * r.powi(3)
}

#[test]
fn once_json_matches_hand_computed_metrics() {
    let name = Name::new("once");
    let _p = publish_known(&name.0, 1);
    let (code, out, err) = run(&["--attach", &name.0, "--once", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON object");
    // f32 radii: compute the masses from the same f32 values the segment holds.
    let (rg, rs) = (0.01f32 as f64, 0.02f32 as f64);
    let (mg, ms) = (mass(GLASS_DENSITY, rg), mass(STEEL_DENSITY, rs));
    // E_t = 1/2 (mg 1^2 + mg 2^2 + ms 3^2 + 0)
    close(
        &v["kinetic_energy_translational"],
        0.5 * (mg * 1.0 + mg * 4.0 + ms * 9.0),
        "E_t",
    );
    // E_r = 1/2 (2/5 mg rg^2 100^2 + 2/5 ms rs^2 10^2)
    let e_r = 0.5 * (0.4 * mg * rg * rg * 1e4 + 0.4 * ms * rs * rs * 100.0);
    close(&v["kinetic_energy_rotational"], e_r, "E_r");
    // E_p = 9.81 (mg 0.05 + mg 0.05 + ms 0.8 + ms 0.3), reference z = world_min = 0.
    let z = |x: f32| x as f64;
    let e_p = 9.81 * (mg * z(0.05) * 2.0 + ms * (z(0.8) + z(0.3)));
    close(&v["potential_energy"], e_p, "E_p");
    close(&v["max_speed"], 3.0, "max_speed");
    close(
        &v["mean_speed"],
        (1.0 + 2.0 + 3.0 + 0.0) / 4.0,
        "mean_speed",
    );
    let m = 2.0 * mg + 2.0 * ms;
    let com_x = (mg * (0.1f32 as f64 + 0.115f32 as f64) + ms * (0.5f32 as f64 + 0.9f32 as f64)) / m;
    close(&v["center_of_mass"][0], com_x, "com_x");
    // One overlapping pair (distance 0.015 < 0.02) among 4 particles: Z = 2 / 4.
    close(&v["coordination_number"], 0.5, "Z");
    // Lower half of the unit box (volume 0.5) holds both glass beads and one steel ball whole.
    let vol = |r: f64| 4.0 / 3.0 * PI * r.powi(3);
    close(&v["solid_fraction"], (2.0 * vol(rg) + vol(rs)) / 0.5, "phi");
    assert_eq!(v["step"], 100);
    assert_eq!(v["sim_time"], 0.01);
    // Two species, but no sample cell holds 10 particles: present and null, with a note.
    assert!(v["lacey_index"].is_null());
    assert_eq!(v["lacey_species"][0], "glass");
    // Forces (0, 0, 1) on the two beads touching the floor? None touches (z = 0.05 > r).
    assert_eq!(v["body_torque"][0]["body"], "floor");
    assert_eq!(v["body_torque"][0]["contacts"], 0);
    assert!(err.contains("gravity from configuration key"), "{err}");
}

#[test]
fn metrics_selection_leaves_the_others_null_and_table_prints() {
    let name = Name::new("select");
    let _p = publish_known(&name.0, 2);
    let (code, out, err) = run(&[
        "--attach",
        &name.0,
        "--once",
        "--json",
        "--metrics",
        "speed,coordination_number",
        "--timing",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["step"], 200);
    assert!(v["kinetic_energy_translational"].is_null());
    assert!(v["solid_fraction"].is_null());
    assert_eq!(v["max_speed"], 3.0);
    assert!(v["timing_ms"]["coordination_number"].is_number());
    let (code, out, _) = run(&["--attach", &name.0, "--once", "--region", "0,0,0,1,1,1"]);
    assert_eq!(code, 0);
    assert!(out.contains("E_trans") && out.contains("200"), "{out}");
    let (code, _, err) = run(&["--attach", &name.0, "--once", "--metrics", "entropy"]);
    assert_eq!(code, 1);
    assert!(err.contains("unknown metric \"entropy\""), "{err}");
}

#[test]
fn missing_segment_is_a_clear_error() {
    let (code, _, err) = run(&["--attach", "pshm-an-does-not-exist", "--once", "--json"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("cannot attach to segment") && err.contains("no segment named"),
        "{err}"
    );
}

fn spawn_follow(name: &str, dir: &std::path::Path) -> std::process::Child {
    Command::new(ANALYSIS)
        .args(["--attach", name, "--quiet"])
        .arg("--csv")
        .arg(dir.join("m.csv"))
        .arg("--jsonl")
        .arg(dir.join("m.jsonl"))
        .arg("--plot")
        .arg(dir.join("m.png"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn analysis")
}

fn wait_lines(path: &std::path::Path, lines: usize) {
    let end = Instant::now() + Duration::from_secs(20);
    while Instant::now() < end {
        if std::fs::read_to_string(path).is_ok_and(|s| s.lines().count() >= lines) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{} never reached {lines} lines", path.display());
}

fn tempdir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("analysis-test-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn follows_until_the_solver_finishes() {
    let name = Name::new("finish");
    let dir = tempdir("finish");
    let mut p = publish_known(&name.0, 1);
    let child = spawn_follow(&name.0, &dir);
    wait_lines(&dir.join("m.jsonl"), 1);
    // Runs at nice 10 by default, its worker threads too (they must not slow a CPU solver).
    let tasks = std::fs::read_dir(format!("/proc/{}/task", child.id())).unwrap();
    let nices: Vec<i64> = tasks
        .map(|t| {
            let stat = std::fs::read_to_string(t.unwrap().path().join("stat")).unwrap();
            // Fields after the command name in parentheses; niceness is field 19.
            let rest = &stat[stat.rfind(')').unwrap() + 2..];
            rest.split(' ').nth(16).unwrap().parse().unwrap()
        })
        .collect();
    assert!(
        nices.len() > 1 && nices.iter().all(|&n| n == 10),
        "{nices:?}"
    );
    for f in 2..=3 {
        publish_frame(&mut p, f);
        wait_lines(&dir.join("m.jsonl"), f as usize);
    }
    p.set_state(shm_protocol::SolverState::Finished);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("solver finished") && err.contains("3 frames analysed"),
        "{err}"
    );
    let csv = std::fs::read_to_string(dir.join("m.csv")).unwrap();
    assert_eq!(csv.lines().count(), 4, "{csv}");
    assert!(csv.starts_with("seq,step,sim_time"));
    let png = std::fs::read(dir.join("m.png")).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn says_so_and_keeps_files_when_the_solver_dies() {
    let name = Name::new("dies");
    let dir = tempdir("dies");
    let p = publish_known(&name.0, 1);
    let child = spawn_follow(&name.0, &dir);
    wait_lines(&dir.join("m.jsonl"), 1);
    // Simulate the owner's death: point the header at a reaped child's pid.
    let mut dead = Command::new("true").spawn().unwrap();
    let pid = dead.id();
    dead.wait().unwrap();
    p.region().header().owner_pid.store(pid, Ordering::Release);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains(&format!("solver (pid {pid}) died while running")),
        "{err}"
    );
    assert!(err.contains("output files kept"), "{err}");
    assert_eq!(
        std::fs::read_to_string(dir.join("m.csv"))
            .unwrap()
            .lines()
            .count(),
        2
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// `--plot` is rewritten while the run goes on, not only at the end.
#[test]
fn plot_is_refreshed_while_the_run_goes_on() {
    let name = Name::new("plot");
    let dir = tempdir("plot");
    let png = dir.join("m.png");
    let mut p = publish_known(&name.0, 1);
    let child = Command::new(ANALYSIS)
        .args([
            "--attach",
            &name.0,
            "--quiet",
            "--plot-every",
            "0.2",
            "--plot",
        ])
        .arg(&png)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn analysis");
    let read_when = |ok: &dyn Fn(&[u8]) -> bool| -> Vec<u8> {
        let end = Instant::now() + Duration::from_secs(20);
        while Instant::now() < end {
            if let Ok(b) = std::fs::read(&png) {
                if b.len() > 8 && ok(&b) {
                    return b;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("{} was not (re)written in time", png.display());
    };
    let first = read_when(&|b| &b[1..4] == b"PNG");
    for f in 2..=4 {
        std::thread::sleep(Duration::from_millis(300));
        publish_frame(&mut p, f);
    }
    let later = read_when(&|b| &b[1..4] == b"PNG" && b != first.as_slice());
    assert_ne!(first, later, "plot refreshed before the run ended");
    p.set_state(shm_protocol::SolverState::Finished);
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(dir);
}
