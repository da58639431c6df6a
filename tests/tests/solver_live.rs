//! The solver as users run it: a live segment that shmctl inspects and steers, clean stop,
//! clear errors, and resuming a killed run from its last frame.

use e2e_tests::*;
use std::process::Command;
use std::time::Duration;

#[test]
fn live_run_is_inspected_paused_resumed_updated_and_stopped() {
    let name = SegName::new("live");
    let run = Running::spawn(solver(&[
        "--name-shm",
        &name.0,
        "--backend",
        "cpu",
        "--particles",
        "2000",
        "--end-time",
        "50",
        "--refresh",
        "0.001",
    ]));
    let first = poll(Duration::from_secs(30), || {
        info(&name.0).filter(|v| step(v) > 0)
    })
    .expect("frames advance");
    for key in ["state", "pid", "step", "sim_time", "particles", "frame_seq"] {
        assert!(!first[key].is_null(), "info lacks {key}: {first}");
    }
    assert_eq!(first["particles"], 2000);
    assert_eq!(first["pid"], run.0.id());
    let later = poll(Duration::from_secs(30), || {
        info(&name.0).filter(|v| step(v) > step(&first))
    })
    .expect("advancing");
    assert!(later["frame_seq"].as_u64() > first["frame_seq"].as_u64());

    let (code, out, err) = shmctl(&["send", &name.0, "pause"]);
    assert_eq!(code, 0, "{out}{err}");
    let paused = poll(Duration::from_secs(5), || {
        info(&name.0).filter(|v| v["state"] == "paused")
    })
    .expect("paused");
    std::thread::sleep(Duration::from_millis(500));
    let still = info(&name.0).unwrap();
    assert_eq!(
        step(&still),
        step(&paused),
        "step counter must stop while paused"
    );

    let seq_before = still["frame_seq"].as_u64().unwrap();
    let (code, _, _) = shmctl(&["send", &name.0, "update"]);
    assert_eq!(code, 0);
    let after = info(&name.0).unwrap();
    assert!(
        after["frame_seq"].as_u64().unwrap() > seq_before,
        "update publishes a frame"
    );

    assert_eq!(shmctl(&["send", &name.0, "resume"]).0, 0);
    poll(Duration::from_secs(10), || {
        info(&name.0).filter(|v| step(v) > step(&still))
    })
    .expect("resumed");

    let (code, out, _) = shmctl(&["send", &name.0, "stop"]);
    assert_eq!(code, 0, "{out}");
    let (code, err) = run.wait_exit(Duration::from_secs(30));
    assert_eq!(code, Some(0), "{err}");
    assert!(
        !std::path::Path::new(&shm_protocol::shm_path(&name.0)).exists(),
        "segment removed on clean exit"
    );
}

#[test]
fn the_start_line_names_the_segment_and_its_size() {
    let name = SegName::new("size");
    let (code, err) = solve_cpu(
        &name,
        &["--keep-shm", "--particles", "2000", "--end-time", "0.01"],
    );
    assert_eq!(code, Some(0), "{err}");
    let line = err
        .lines()
        .find(|l| {
            l.contains(&format!(
                "publishing into shared-memory segment {:?}",
                name.0
            ))
        })
        .unwrap_or_else(|| panic!("no start line naming the segment: {err}"));
    // "(150.0 MiB; attach with ...)": the segment's size, to the shown digit.
    let size = line
        .split_once('(')
        .and_then(|(_, rest)| rest.split_once(';'))
        .map(|(size, _)| size)
        .unwrap_or_else(|| panic!("no size: {line}"));
    let (value, unit) = size.split_once(' ').expect("a number and a unit");
    let unit = match unit {
        "B" => 1.0,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        other => panic!("unit {other:?} in {line}"),
    };
    let stated = value.parse::<f64>().expect("a number") * unit;
    let bytes = std::fs::metadata(shm_protocol::shm_path(&name.0))
        .expect("the kept segment")
        .len() as f64;
    assert!(
        (stated - bytes).abs() <= 0.05 * unit,
        "{line}: the segment has {bytes} bytes"
    );
}

#[test]
fn missing_case_file_fails_naming_the_file_and_leaves_no_segment() {
    let name = SegName::new("nocase");
    let o = solver(&["--name-shm", &name.0, "--case", "does-not-exist.toml"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("does-not-exist.toml"), "{err}");
    assert!(!std::path::Path::new(&shm_protocol::shm_path(&name.0)).exists());
}

#[test]
fn cuda_without_gpu_is_a_one_line_error_and_auto_falls_back() {
    if std::path::Path::new("/dev/nvidia0").exists() {
        return; // this check is about machines without a GPU
    }
    let o = solver(&[
        "--backend",
        "cuda",
        "--particles",
        "10",
        "--end-time",
        "0.001",
    ])
    .output()
    .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--backend cuda"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let name = SegName::new("auto");
    let o = solver(&[
        "--name-shm",
        &name.0,
        "--backend",
        "auto",
        "--particles",
        "100",
        "--end-time",
        "0.002",
    ])
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("CPU"));
}

#[test]
fn load_shm_resumes_a_killed_run_from_its_last_frame() {
    let name = SegName::new("resume");
    let mut run = Running::spawn(solver(&[
        "--name-shm",
        &name.0,
        "--backend",
        "cpu",
        "--particles",
        "1000",
        "--end-time",
        "50",
        "--refresh",
        "0.001",
    ]));
    let seen = poll(Duration::from_secs(30), || {
        info(&name.0).filter(|v| step(v) >= 200)
    })
    .expect("progress");
    run.sigkill();
    let dead = poll(Duration::from_secs(5), || {
        info(&name.0).filter(|v| v["alive"] == false)
    })
    .expect("seen dead");
    let last_step = step(&dead);
    assert!(last_step >= step(&seen));
    let resumed = Running::spawn(solver(&[
        "--load-shm",
        &name.0,
        "--backend",
        "cpu",
        "--end-time",
        "50",
    ]));
    let pid = resumed.0.id();
    let first = poll(Duration::from_secs(30), || {
        info(&name.0).filter(|v| v["pid"] == pid && v["alive"] == true)
    })
    .expect("resumed solver owns the segment");
    assert!(
        step(&first) >= last_step,
        "must continue from step {last_step}, not restart: {first}"
    );
    poll(Duration::from_secs(30), || {
        info(&name.0).filter(|v| step(v) > last_step)
    })
    .expect("resumed run advances");
    assert_eq!(shmctl(&["send", &name.0, "stop"]).0, 0);
    let (code, err) = resumed.wait_exit(Duration::from_secs(30));
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn sigterm_stops_cleanly_with_a_final_frame_and_checkpoint() {
    let name = SegName::new("sigterm");
    let out = std::env::temp_dir().join(format!("pshm-e2e-sigterm-{}", std::process::id()));
    let run = Running::spawn(solver(&[
        "--name-shm",
        &name.0,
        "--backend",
        "cpu",
        "--particles",
        "500",
        "--end-time",
        "50",
        "--output",
        out.to_str().expect("utf-8 temp dir"),
        "--keep-shm",
    ]));
    let seen = poll(Duration::from_secs(30), || {
        info(&name.0).filter(|v| step(v) > 0)
    })
    .expect("frames");
    let killed = Command::new("kill")
        .args(["-TERM", &run.0.id().to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    let (code, err) = run.wait_exit(Duration::from_secs(30));
    assert_eq!(code, Some(0), "SIGTERM is a clean stop: {err}");
    assert!(err.contains("signal received"), "{err}");
    let done = info(&name.0).expect("segment kept (--keep-shm)");
    assert_eq!(done["state"], "finished");
    assert!(step(&done) >= step(&seen), "final frame published");
    assert!(
        out.join("checkpoint.bin").exists(),
        "final checkpoint written"
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// The newest frame of `name`: (step, live ids, removed count, removed mass).
fn live_ids(name: &str) -> (u64, Vec<u32>, u64, f64) {
    let c = shm_protocol::Consumer::attach(name).expect("attach");
    let f = c.read_newest().expect("read").expect("a frame");
    let ids = f
        .particle_ids
        .expect("a run with inflow lists its live ids");
    (f.meta.step, ids, f.meta.removed_count, f.meta.removed_mass)
}

#[test]
fn load_shm_resumes_a_run_with_inflow_and_outflow() {
    let name = SegName::new("resume-flow");
    let dir = std::env::temp_dir().join(format!("pshm-e2e-flow-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let case = dir.join("feed.toml");
    std::fs::write(&case, FEED_CASE).expect("case file");
    let mut run = Running::spawn(solver(&[
        "--name-shm",
        &name.0,
        "--backend",
        "cpu",
        "--case",
        case.to_str().expect("utf-8 temp dir"),
        "--refresh",
        "0.002",
    ]));
    // Until beads have been added and some have fallen through the outflow box.
    poll(Duration::from_secs(60), || {
        info(&name.0).filter(|_| live_ids(&name.0).2 >= 5)
    })
    .expect("particles removed");
    run.sigkill();
    poll(Duration::from_secs(5), || {
        info(&name.0).filter(|v| v["alive"] == false)
    })
    .expect("seen dead");
    let (step0, ids0, removed0, mass0) = live_ids(&name.0);
    let max0 = *ids0.last().expect("live particles");
    let resumed = Running::spawn(solver(&["--load-shm", &name.0, "--backend", "cpu"]));
    // Until the resumed run has added new particles and removed more.
    let (step1, ids1, removed1, mass1) = poll(Duration::from_secs(60), || {
        let v = live_ids(&name.0);
        (v.1.last().is_some_and(|&m| m > max0 + 10) && v.2 > removed0).then_some(v)
    })
    .expect("the resumed run adds and removes particles");
    assert_eq!(shmctl(&["send", &name.0, "stop"]).0, 0);
    let (code, err) = resumed.wait_exit(Duration::from_secs(30));
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("removed so far"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(step1 > step0, "continues from step {step0}: {step1}");
    // The removed counters go on from the frame's, never restart.
    assert!(
        removed1 > removed0 && mass1 > mass0,
        "{removed0} {mass0} -> {removed1} {mass1}"
    );
    assert!((mass1 / removed1 as f64 - mass0 / removed0 as f64).abs() < 1e-9 * mass1);
    // Ids stay unique: ascending, and an id at or below the last one before the crash is a
    // particle that was live then (no removed id comes back, no source starts again).
    assert!(ids1.windows(2).all(|w| w[0] < w[1]), "live ids ascending");
    let before: std::collections::HashSet<u32> = ids0.iter().copied().collect();
    for &id in ids1.iter().filter(|&&id| id <= max0) {
        assert!(
            before.contains(&id),
            "id {id} was not live before the crash"
        );
    }
    // New ids follow the newest particle before the crash, without a gap (the source goes on).
    let first_new = ids1.iter().copied().find(|&id| id > max0);
    println!(
        "crash at step {step0}: {} live (ids to {max0}), {removed0} removed; resumed to step \
         {step1}: {} live, first new id {first_new:?}, {removed1} removed",
        ids0.len(),
        ids1.len()
    );
    assert!(
        first_new.is_some_and(|id| id <= max0 + 60),
        "first new id {first_new:?} after {max0}"
    );
}
