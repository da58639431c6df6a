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
