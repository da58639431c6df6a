//! The Python client over the network (issue 19): `particle_shm.connect` against the real
//! `solver` and `forwarder` binaries, with the package installed by pip into a virtual
//! environment as a user installs it. `tools/python/tests/live_remote.py` does the checking:
//! frames arrive with the local reader's shapes and bytes for the same sequence number,
//! `wait_newer` wakes and times out, `pause` is acknowledged and pauses the solver, `resume` and
//! `stop` too, a wrong or missing token raises `TokenRejected`, and a run whose particle set
//! changes (the silo filling from its inflow) maps ids to species and radii remotely as locally.
//! `examples/remote_energy.py` then prints the energy `analysis` computes from the segment.

use e2e_tests::*;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const TOKEN: &str = "py-remote-s3cret";

/// Runs the silo case on the CPU for 0.1 s (inflow under way: 400-odd of 2573 planned
/// particles live) and keeps its segment.
fn silo_run(seg: &SegName) {
    let case = Path::new(env!("CARGO_MANIFEST_DIR")).join("../solver/cases/silo.toml");
    let args = [
        "--name-shm",
        &seg.0,
        "--backend",
        "cpu",
        "--threads",
        "1",
        "--case",
        case.to_str().expect("utf-8 path"),
        "--end-time",
        "0.1",
        "--refresh",
        "0.05",
        "--keep-shm",
    ];
    let (code, err) = Running::spawn(solver(&args)).wait_exit(Duration::from_secs(60));
    assert_eq!(code, Some(0), "silo run: {err}");
}

/// Runs `python ARGS` in `tools/python/tests` with `env` (and no PARTICLE_SHM_TOKEN or
/// PYTHONPATH from this process), at most `limit`; returns (success, stdout + stderr).
fn python(args: &[&str], env: &[(&str, &str)], limit: Duration) -> (bool, String) {
    let log = tempfile("py.log");
    let out = std::fs::File::create(&log).expect("log file");
    let mut c = Command::new(python_venv());
    c.args(args)
        .current_dir(python_package_dir().join("tests"))
        .env_remove("PARTICLE_SHM_TOKEN")
        .env_remove("PYTHONPATH")
        .envs(env.iter().copied())
        .stdout(out.try_clone().expect("log file"))
        .stderr(out);
    let mut child = c.spawn().expect("start python");
    let ok = poll(limit, || child.try_wait().expect("wait python"))
        .map(|s| s.success())
        .unwrap_or_else(|| {
            let _ = child.kill();
            let _ = child.wait();
            false
        });
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    (ok, text)
}

/// A path in the temp directory unique to this process and `name`.
fn tempfile(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("pshm-e2e-pyremote-{}-{name}", std::process::id()))
}

#[test]
fn python_client_follows_real_runs_through_the_forwarder() {
    // The finished silo run first (a second solver would share the two cores with the first).
    let silo = SegName::new("pysilo");
    silo_run(&silo);
    let silo_fw = Forwarder::start(&silo.0, &[]);

    let live = SegName::new("pylive");
    let token_file = tempfile("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).expect("token file");
    // Long enough for the test, which ends it with `stop`; one thread leaves a core free.
    let run = Running::spawn(solver(&[
        "--name-shm",
        &live.0,
        "--backend",
        "cpu",
        "--threads",
        "1",
        "--particles",
        "500",
        "--end-time",
        "1000",
        "--refresh",
        "0.002",
    ]));
    poll(Duration::from_secs(30), || {
        info(&live.0).filter(|v| step(v) > 0)
    })
    .expect("the live run publishes frames");
    let fw = Forwarder::start(
        &live.0,
        &["--token-file", token_file.to_str().expect("utf-8 path")],
    );

    let (ok, out) = python(
        &["-m", "unittest", "-v", "live_remote"],
        &[
            ("PSHM_LIVE_ADDR", &fw.addr),
            ("PSHM_LIVE_SEGMENT", &live.0),
            ("PSHM_LIVE_TOKEN", TOKEN),
            ("PSHM_SET_ADDR", &silo_fw.addr),
            ("PSHM_SET_SEGMENT", &silo.0),
        ],
        Duration::from_secs(180),
    );
    eprintln!("{out}");
    assert!(ok, "live_remote.py failed:\n{out}");
    assert!(out.contains("\nOK"), "{out}");
    assert!(!out.contains("skipped"), "no test may be skipped:\n{out}");
    // The Python side stopped the run with `stop`: a clean exit.
    let (code, err) = run.wait_exit(Duration::from_secs(60));
    assert_eq!(code, Some(0), "the live run after `stop`: {err}");
    drop(fw);

    // The example prints what `analysis` computes from the segment itself.
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/remote_energy.py");
    let (ok, out) = python(
        &[
            example.to_str().expect("utf-8 path"),
            &silo_fw.addr,
            "--frames",
            "1",
        ],
        &[],
        Duration::from_secs(60),
    );
    assert!(ok, "remote_energy.py failed:\n{out}");
    let remote: f64 = out
        .lines()
        .find_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() == 5 && w[0].parse::<u64>().is_ok()).then(|| w[3].parse().ok())?
        })
        .unwrap_or_else(|| panic!("no energy line in:\n{out}"));
    let a = Command::new(bin("analysis"))
        .args(["--attach", &silo.0, "--once", "--json"])
        .output()
        .expect("run analysis");
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    let local: serde_json::Value = serde_json::from_slice(&a.stdout).expect("analysis JSON");
    let local = local["kinetic_energy_translational"]
        .as_f64()
        .expect("energy");
    assert!(local > 0.0, "the inflow's particles move: {local}");
    assert!(
        (remote - local).abs() <= 1e-7 * local,
        "E_trans through the forwarder {remote} vs analysis on the segment {local}\n{out}"
    );
    let _ = std::fs::remove_file(&token_file);
}
