//! The pure-Python reader (`tools/python/particle_shm`) against the Rust writer: frames and static
//! data published with `Publisher` are read from Python and compared with what the Rust
//! `Consumer` reads; Python sends commands that this test (playing the solver) acknowledges;
//! corrupt copies of the segment raise the matching Python exceptions. The package is installed
//! by pip into a virtual environment first, as a user installs it (`pip install tools/python`;
//! `tools/python/tests/make_venv.py`), and the tests import it from there. Requires python3 with
//! numpy, setuptools and wheel (`.ci/run` installs them); fails, never skips, without them.

mod common;
use common::*;
use shm_protocol::{Command, CommandOutcome, Consumer};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command as Proc, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The Python test modules (`tools/python/tests/test_*.py`), run in this order against the
/// segment this test publishes; `test_particle_shm` first, while the segment still holds exactly
/// what `expected` recorded. `test_particle_set` also reads a second segment, a run whose
/// particle set changes (`publish_set`).
const PYTHON_TEST_MODULES: &[&str] = &[
    "test_particle_shm",
    "test_particle_set",
    "test_attach_errors",
    "test_command_limits",
    "test_deadlines_and_leases",
    "test_truncation",
    "test_wire",
];

fn python_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../python")
}

/// The interpreter of a virtual environment into which pip installed `tools/python`
/// (`make_venv.py`: offline, numpy from the system), made once per test process in the target
/// directory; later runs remove it.
fn venv_python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("python-venv-analysis-{}", std::process::id()));
        let out = Proc::new("python3")
            .arg(python_dir().join("tests/make_venv.py"))
            .arg(&dir)
            .output()
            .unwrap_or_else(|e| {
                panic!("python3 is required for the Python reader tests but could not be run: {e}")
            });
        assert!(
            out.status.success(),
            "installing tools/python into a virtual environment failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    })
}

/// What the Rust API reads, as JSON for the Python side to compare with.
fn expected(name: &str) -> serde_json::Value {
    let c = Consumer::attach(name).expect("attach");
    let s = c.read_static().expect("static");
    let f = c.read_newest().expect("read").expect("a frame");
    serde_json::json!({
        "owner_pid": std::process::id(),
        "static": {
            "generation": s.generation,
            "ids": s.particle_ids,
            "species_ids": s.particle_species,
            "radii": s.particle_radius,
            "species": s.species.iter().map(|r| serde_json::json!({
                "name": shm_protocol::static_data::decode_name(&r.name),
                "radius": r.radius,
                "density": r.density,
                "method": r.method().map(|m| m.name()),
                "restitution": r.dem_material().map(|m| m.restitution),
            })).collect::<Vec<_>>(),
            "meshes": s.meshes.iter().map(|m| serde_json::json!({
                "name": m.name, "triangles": m.triangles,
            })).collect::<Vec<_>>(),
            "config": s.config_toml,
            "world_min": s.world_min,
            "world_max": s.world_max,
            "cell_size": s.cell_size,
        },
        "frame": {
            "seq": f.meta.seq,
            "step": f.meta.step,
            "sim_time": f.meta.sim_time,
            "dt": f.meta.dt,
            "particle_count": f.meta.particle_count,
            "static_generation": f.meta.static_generation,
            "positions": f.positions,
            "velocities": f.velocities,
            "angular_velocities": f.angular_velocities,
            "forces": f.forces,
            "bodies": f.bodies.iter().map(|b| serde_json::json!({
                "rotation": b.rotation, "translation": b.translation,
            })).collect::<Vec<_>>(),
        },
        "capacities": {
            "max_particles": c.capacities().max_particles,
            "slot_count": c.capacities().slot_count,
            "fields": c.capacities().fields,
        },
        "total_size": c.region().plan().total_size,
    })
}

#[test]
fn python_reader_matches_the_rust_reader() {
    let python = venv_python();
    let mut on_disk: Vec<String> = std::fs::read_dir(python_dir().join("tests"))
        .expect("tools/python/tests")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|f| Some(f.strip_suffix(".py")?.to_string()))
        .filter(|m| m.starts_with("test_"))
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = PYTHON_TEST_MODULES.iter().map(|m| m.to_string()).collect();
    listed.sort();
    assert_eq!(
        on_disk, listed,
        "list every Python test module in PYTHON_TEST_MODULES"
    );
    let name = Name::new("py");
    let mut p = publish_known(&name.0, 2);
    let set = Name::new("pyset");
    let _set = publish_set(&set.0, 1);
    let exp = std::env::temp_dir().join(format!("pshm-an-{}-expected.json", std::process::id()));
    std::fs::write(&exp, expected(&name.0).to_string()).unwrap();

    let mut child = Proc::new(python)
        .args(["-m", "unittest", "-v"])
        .args(PYTHON_TEST_MODULES)
        .current_dir(python_dir().join("tests"))
        .env_remove("PYTHONPATH")
        .env("PSHM_TEST_SEGMENT", &name.0)
        .env("PSHM_TEST_SET_SEGMENT", &set.0)
        .env("PSHM_TEST_EXPECTED", &exp)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn python3");
    // Play the solver: acknowledge every command with its Debug text; `update` publishes a frame.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut next = 3;
    let status = loop {
        for cmd in p.poll_commands() {
            let outcome = match &cmd.command {
                Ok(Command::UpdateNow) => {
                    publish_frame(&mut p, next);
                    next += 1;
                    CommandOutcome::Done("UpdateNow".into())
                }
                Ok(c) => CommandOutcome::Done(format!("{c:?}")),
                Err(e) => CommandOutcome::Rejected(e.clone()),
            };
            p.acknowledge(&cmd, &outcome);
        }
        p.heartbeat();
        if let Some(s) = child.try_wait().expect("wait python") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the Python tests did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let out = child.wait_with_output().expect("python output");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let _ = std::fs::remove_file(&exp);
    assert!(status.success(), "Python reader tests failed:\n{stderr}");
    assert!(
        !stderr.contains("skipped"),
        "no Python test may be skipped:\n{stderr}"
    );
    assert!(stderr.contains("\nOK"), "{stderr}");
    eprintln!("{stderr}");
}

#[test]
fn live_energy_example_prints_energy_until_the_run_finishes() {
    let python = venv_python();
    let name = Name::new("live");
    let mut p = publish_known(&name.0, 1);
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/live_energy.py");
    let mut child = Proc::new(python)
        .arg(&script)
        .arg(&name.0)
        .env_remove("PYTHONPATH")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn python3");
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    let mut stdout = String::new();
    let mut read_until = |prefix: &str| {
        for line in lines.by_ref() {
            let line = line.expect("read stdout");
            stdout.push_str(&line);
            stdout.push('\n');
            if line.trim_start().starts_with(prefix) {
                return stdout.clone();
            }
        }
        panic!("no line starting with {prefix:?} in:\n{stdout}");
    };
    read_until("100 ");
    publish_frame(&mut p, 2);
    read_until("200 ");
    p.set_state(shm_protocol::SolverState::Finished);
    let stdout = read_until("solver finished");
    let status = child.wait().expect("python exit");
    assert!(status.success(), "{stdout}");
    // E_t = 1/2 (mg (1 + 4) + ms 9) with mg = 2500 4/3 pi 0.01^3, ms = 7800 4/3 pi 0.02^3.
    let v = |rho: f64, r: f32| rho * 4.0 / 3.0 * std::f64::consts::PI * (r as f64).powi(3);
    let e_t = 0.5 * (v(GLASS_DENSITY, 0.01) * 5.0 + v(STEEL_DENSITY, 0.02) * 9.0);
    let energies: Vec<(u64, f64)> = stdout
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            Some((w.first()?.parse().ok()?, w.get(2)?.parse().ok()?))
        })
        .collect();
    assert_eq!(
        energies.iter().map(|e| e.0).collect::<Vec<_>>(),
        [100, 200],
        "{stdout}"
    );
    for (_, e) in &energies {
        assert!((e - e_t).abs() < 1e-5 * e_t, "expected {e_t} in:\n{stdout}");
    }
    assert!(stdout.contains("solver finished"), "{stdout}");
}
