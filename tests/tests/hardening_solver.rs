//! Regressions of the hardening issue, against the real solver binary and a real segment:
//! tiny intervals that wedged the solver (item 1), a segment truncated under a running solver
//! and its consumers (item 3), a configuration text over 64 KiB (item 4), and frames of a dead
//! run that `--load-shm` trusted (item 8).

use e2e_tests::*;
use shm_protocol::{Consumer, Publisher};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn segment_exists(name: &str) -> bool {
    Path::new(&shm_protocol::shm_path(name)).exists()
}

/// Runs the solver to its end (at most `timeout`): (exit code, stderr).
fn run_to_end(args: &[&str], timeout: Duration) -> (Option<i32>, String) {
    Running::spawn(solver(args)).wait_exit(timeout)
}

#[test]
fn tiny_or_huge_intervals_are_refused_at_start_with_nothing_left_behind() {
    let name = SegName::new("tiny");
    let out = std::env::temp_dir().join(format!("pshm-tiny-{}", std::process::id()));
    let out = out.to_str().unwrap();
    for (flag, value, expect) in [
        ("--refresh", "1e-300", "--refresh must be between"),
        ("--refresh", "1e300", "--refresh must be between"),
        ("--refresh", "NaN", "--refresh must be a finite"),
        ("--output-every", "1e-300", "--output-every must be between"),
        (
            "--checkpoint-every",
            "inf",
            "--checkpoint-every must be a finite",
        ),
        // Within the protocol's bounds but below the case's time step.
        ("--refresh", "1e-9", "at least one time step"),
        ("--output-every", "1e-10", "at least one time step"),
        (
            "--progress-every",
            "1e300",
            "--progress-every must be between",
        ),
        (
            "--refresh-wall-ms",
            "18446744073709551615",
            "--refresh-wall-ms must be 0",
        ),
        // An SPH-only option on a DEM run: refused, not ignored.
        ("--first-cut", "work", "--first-cut applies to SPH runs"),
        (
            "--balance-every",
            "8",
            "--balance-every and --balance-threshold apply to SPH",
        ),
        (
            "--balance-threshold",
            "0.1",
            "--balance-every and --balance-threshold apply",
        ),
    ] {
        let (code, err) = run_to_end(
            &[
                "--name-shm",
                &name.0,
                "--backend",
                "cpu",
                "--particles",
                "200",
                "--output",
                out,
                flag,
                value,
            ],
            Duration::from_secs(60),
        );
        assert_eq!(code, Some(1), "{flag} {value}: {err}");
        assert!(err.contains(expect), "{flag} {value}: {err}");
        assert!(!segment_exists(&name.0), "{flag} {value} left a segment");
    }
    let _ = std::fs::remove_dir_all(out);
}

#[test]
fn a_tiny_refresh_command_is_refused_and_the_solver_keeps_stepping_and_stops() {
    let name = SegName::new("tinycmd");
    let run = Running::spawn(solver(&[
        "--name-shm",
        &name.0,
        "--backend",
        "cpu",
        "--particles",
        "500",
        "--end-time",
        "50",
    ]));
    let first = poll(Duration::from_secs(30), || {
        info(&name.0).filter(|v| step(v) > 0)
    })
    .expect("frames advance");
    for (value, expect) in [
        ("1e-300", "refresh must be between"),
        ("1e-9", "at least one time step"),
        // Not clap's "unexpected argument '-1' found".
        ("-1", "refresh must be between"),
    ] {
        let (code, out, err) = shmctl(&["send", &name.0, "refresh", value]);
        // shmctl refuses what the protocol forbids itself; the solver refuses the rest.
        assert_ne!(code, 0, "refresh {value} accepted: {out}{err}");
        assert!(
            format!("{out}{err}").contains(expect),
            "{value}: {out}{err}"
        );
    }
    let later = poll(Duration::from_secs(30), || {
        info(&name.0).filter(|v| step(v) > step(&first) + 10)
    });
    assert!(later.is_some(), "the step counter froze");
    let (code, out, err) = shmctl(&["send", &name.0, "refresh-wall", "0"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("wall off"), "{out}");
    // SIGTERM still ends it cleanly.
    sigterm(run.0.id());
    let (code, err) = run.wait_exit(Duration::from_secs(20));
    assert_eq!(code, Some(0), "{err}");
}

/// SIGTERM through kill(1) (this crate has no libc dependency).
fn sigterm(pid: u32) {
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
}

#[test]
fn a_truncated_segment_stops_the_solver_cleanly_and_consumers_report_it() {
    let name = SegName::new("trunc");
    let out = std::env::temp_dir().join(format!("pshm-trunc-{}", std::process::id()));
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
        "--output",
        out.to_str().unwrap(),
    ]));
    poll(Duration::from_secs(30), || {
        info(&name.0).filter(|v| step(v) > 0)
    })
    .expect("running");
    let c = Consumer::attach(&name.0).unwrap();
    assert!(c.read_newest().unwrap().is_some());
    // What a careless `truncate -s 0 /dev/shm/NAME` does.
    std::fs::OpenOptions::new()
        .write(true)
        .open(shm_protocol::shm_path(&name.0))
        .unwrap()
        .set_len(0)
        .unwrap();
    let (code, err) = run.wait_exit(Duration::from_secs(30));
    assert_eq!(
        code,
        Some(1),
        "the solver must exit with an error, not die by SIGBUS: {err}"
    );
    assert!(err.contains("truncated by another process"), "{err}");
    assert!(err.contains("state saved to"), "{err}");
    assert!(out.join("checkpoint.bin").exists());
    assert!(!segment_exists(&name.0), "the truncated object is removed");
    // This process still has it mapped: reading reports the truncation instead of SIGBUS.
    let e = c.read_newest().unwrap_err();
    assert!(e.to_string().contains("truncated"), "{e}");
    let _ = std::fs::remove_dir_all(out);
}

#[test]
fn a_case_with_a_long_configuration_runs_and_a_failed_start_leaves_nothing() {
    let name = SegName::new("bigcfg");
    let dir = std::env::temp_dir().join(format!("pshm-bigcfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // 1,500 inline triangles: about 100 KB of configuration text (was refused above 64 KiB).
    let mut tris = String::new();
    for i in 0..1500 {
        let x = -0.9 + 1.8 * (i as f64) / 1500.0;
        tris.push_str(&format!(
            "  [[{x:.6}, -0.9, -0.95], [{:.6}, -0.9, -0.95], [{x:.6}, 0.9, -0.95]],\n",
            x + 0.001
        ));
    }
    let case = format!(
        r#"dt = 1e-5
end_time = 0.0005
gravity = [0.0, 0.0, -9.81]
[domain]
min = [-1.0, -1.0, -1.0]
max = [1.0, 1.0, 1.0]
[contact_model]
type = "linear"
[[species]]
name = "glass"
radius = 0.01
density = 2500.0
normal_stiffness = 1e4
restitution = 0.5
sliding_friction = 0.5
[wall_material]
normal_stiffness = 1e4
restitution = 0.5
sliding_friction = 0.5
[[sources]]
type = "grid"
species = "glass"
min = [-0.5, -0.5, -0.5]
max = [0.5, 0.5, 0.5]
spacing = 0.1
count = 125
[[meshes]]
name = "floor"
triangles = [
{tris}]
"#
    );
    let path = dir.join("big.toml");
    std::fs::write(&path, &case).unwrap();
    assert!(case.len() > 64 * 1024);
    let (code, err) = run_to_end(
        &[
            "--name-shm",
            &name.0,
            "--backend",
            "cpu",
            "--case",
            path.to_str().unwrap(),
        ],
        Duration::from_secs(120),
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(!segment_exists(&name.0));
    let _ = std::fs::remove_dir_all(dir);
}

/// A dead run's segment whose last frame is rewritten by `edit` (owner made dead afterwards).
fn dead_run_with(
    name: &SegName,
    edit: impl FnOnce(&mut shm_protocol::Frame, &mut shm_protocol::StaticData),
) {
    dead_run_of(name, &["--particles", "300", "--end-time", "0.002"], edit);
}

/// [`dead_run_with`] for a run of the solver with `args`; the frame's id list and removed
/// counters (a run with inflow or outflow) are republished too.
fn dead_run_of(
    name: &SegName,
    args: &[&str],
    edit: impl FnOnce(&mut shm_protocol::Frame, &mut shm_protocol::StaticData),
) {
    let mut all = vec!["--name-shm", &name.0, "--backend", "cpu", "--keep-shm"];
    all.extend_from_slice(args);
    let (code, err) = run_to_end(&all, Duration::from_secs(60));
    assert_eq!(code, Some(0), "{err}");
    let c = Consumer::attach(&name.0).unwrap();
    let mut stat = c.read_static().unwrap();
    let mut frame = c.read_newest().unwrap().unwrap();
    drop(c);
    shm_protocol::segment::unlink(&name.0).unwrap();
    edit(&mut frame, &mut stat);
    // Re-publish from a short-lived child, so the owner is dead when the solver resumes.
    // (The static section lists every id of a run with inflow: more than the live ones.)
    let mut caps = shm_protocol::Capacities::for_particles(
        frame
            .meta
            .particle_count
            .max(stat.particle_ids.len() as u64)
            .max(1),
    );
    caps.fields = frame_fields(&frame);
    let mut p = Publisher::create(&name.0, caps, Default::default()).unwrap();
    p.write_static(&stat).unwrap();
    let mut w = p.begin_frame(frame.meta.particle_count).unwrap();
    w.step = frame.meta.step;
    w.sim_time = frame.meta.sim_time;
    w.dt = frame.meta.dt;
    w.removed_count = frame.meta.removed_count;
    w.removed_mass = frame.meta.removed_mass;
    if let Some(ids) = &frame.particle_ids {
        w.particle_ids_mut().unwrap().copy_from_slice(ids);
    }
    if let Some(v) = &frame.positions {
        w.write_vec3(shm_protocol::FieldKind::Position, v).unwrap();
    }
    if let Some(v) = &frame.velocities {
        w.write_vec3(shm_protocol::FieldKind::Velocity, v).unwrap();
    }
    w.commit();
    // Pretend the owner died: a pid that no longer exists.
    let mut gone = Command::new("true").spawn().unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    p.region()
        .header()
        .owner_pid
        .store(pid, std::sync::atomic::Ordering::Release);
    drop(p);
}

/// `--load-shm` of the dead run `name` (to `end_time`) fails with a message containing `expect`
/// and leaves the segment as it was: still there, owner still dead.
fn assert_resume_refused(name: &SegName, end_time: &str, tag: &str, expect: &str) {
    let (code, err) = resume(name, end_time, &[]);
    assert_eq!(code, Some(1), "{tag}: {err}");
    assert!(err.contains(expect), "{tag}: {err}");
    let c = Consumer::attach(&name.0).unwrap();
    assert!(
        !c.status().alive,
        "{tag}: a refused resume must not take the segment"
    );
}

/// `solver --load-shm NAME --backend cpu --end-time END_TIME EXTRA...` to its end: (code, stderr).
fn resume(name: &SegName, end_time: &str, extra: &[&str]) -> (Option<i32>, String) {
    let mut args = vec![
        "--load-shm",
        &name.0,
        "--backend",
        "cpu",
        "--end-time",
        end_time,
    ];
    args.extend_from_slice(extra);
    run_to_end(&args, Duration::from_secs(60))
}

fn frame_fields(f: &shm_protocol::Frame) -> u32 {
    use shm_protocol::FieldKind::*;
    let mut m = 0;
    if f.positions.is_some() {
        m |= Position.bit();
    }
    if f.velocities.is_some() {
        m |= Velocity.bit();
    }
    if f.particle_ids.is_some() {
        m |= ParticleId.bit();
    }
    m
}

#[test]
fn load_shm_checks_the_frame_as_strictly_as_a_case_file() {
    type Edit = fn(&mut shm_protocol::Frame, &mut shm_protocol::StaticData);
    let cases: [(&str, Edit, &str); 5] = [
        (
            "nan-time",
            |f, _| f.meta.sim_time = f64::NAN,
            "simulated time NaN",
        ),
        (
            "dup-ids",
            |_, s| s.particle_ids[1] = 0,
            "ids must be unique",
        ),
        ("radius0", |_, s| s.particle_radius[3] = 0.0, "radius 0"),
        (
            "far",
            |f, _| f.positions.as_mut().unwrap()[5] = [1e30, 0.0, 0.0],
            "far outside the domain",
        ),
        (
            "fast",
            |f, _| f.velocities.as_mut().unwrap()[7] = [1e9, 0.0, 0.0],
            "m/s",
        ),
    ];
    for (tag, edit, expect) in cases {
        let name = SegName::new(tag);
        dead_run_with(&name, edit);
        assert_resume_refused(&name, "10", tag, expect);
    }
    // `--dt` with `--load-shm` goes through the stability check too.
    let name = SegName::new("bigdt");
    dead_run_with(&name, |_, _| {});
    let (code, err) = resume(&name, "10", &["--dt", "0.01"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("dt"), "{err}");
}

/// Every numeric option of the solver's command line with values from each class (in range,
/// zero, negative, huge, tiny, NaN, infinite): a clear error or a normal run, never a panic, an
/// abort, a hang or a segment left behind.
#[test]
fn every_numeric_option_gives_a_clear_error_or_runs() {
    let values = [
        "0.001",
        "0",
        "-1",
        "1e300",
        "1e-300",
        "NaN",
        "inf",
        "18446744073709551616",
    ];
    let flags = [
        "--particles",
        "--threads",
        "--end-time",
        "--dt",
        "--refresh",
        "--refresh-wall-ms",
        "--output-every",
        "--checkpoint-every",
        "--progress-every",
        "--devices",
        "--skin",
    ];
    let out = std::env::temp_dir().join(format!("pshm-fuzz-{}", std::process::id()));
    for flag in flags {
        for value in values {
            let name = SegName::new("fuzz");
            let mut args = vec![
                "--name-shm",
                &name.0,
                "--backend",
                "cpu",
                "--output",
                out.to_str().unwrap(),
            ];
            if flag != "--particles" {
                args.extend(["--particles", "50"]);
            }
            if flag != "--end-time" {
                args.extend(["--end-time", "0.001"]);
            }
            let arg = format!("{flag}={value}");
            args.push(&arg);
            let (code, err) = run_to_end(&args, Duration::from_secs(60));
            assert!(
                matches!(code, Some(0..=2)),
                "{flag} {value}: exit {code:?} (panic, abort or hang): {err}"
            );
            assert!(!err.contains("panicked"), "{flag} {value}: {err}");
            if code != Some(0) {
                let last = err.lines().last().unwrap_or("");
                assert!(
                    last.starts_with("solver: error:") || err.contains("error: invalid value"),
                    "{flag} {value}: no clear error line: {err}"
                );
            }
            assert!(!segment_exists(&name.0), "{flag} {value} left a segment");
        }
    }
    let _ = std::fs::remove_dir_all(out);
}

/// A negative number after a space reaches the option's own check (clap took `-0.01` for a
/// flag and answered "unexpected argument '-0' found"), and GPUs named with `--devices` are not
/// silently replaced by the CPU when `--backend auto` finds no driver.
#[test]
fn negative_values_and_named_gpus_get_clear_errors() {
    let dir = std::env::temp_dir().join(format!("pshm-neg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let case = dir.join("tank.toml");
    std::fs::write(&case, sph_tank_case(0.01)).unwrap();
    let case = case.to_str().unwrap();
    let name = SegName::new("neg");
    let base = ["--name-shm", &name.0, "--backend", "cpu"];
    for (args, expect) in [
        (
            &["--case", case, "--spacing", "-0.01"][..],
            "--spacing must be a positive number of metres, got -0.01",
        ),
        (&["--end-time", "-1"][..], "--end-time must be between"),
        (
            &["--particles", "50", "--end-time", "0.001", "--dt", "-0.5"][..],
            "--dt must be a positive number of seconds, got -0.5",
        ),
    ] {
        let all: Vec<&str> = base.iter().chain(args).copied().collect();
        let (code, err) = run_to_end(&all, Duration::from_secs(60));
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(err.contains(expect), "{args:?}: {err}");
        assert!(!segment_exists(&name.0), "{args:?} left a segment");
    }
    // The CPU backend runs and says that it ignores the GPUs named.
    let (code, err) = run_to_end(
        &[
            &base[..],
            &[
                "--particles",
                "50",
                "--end-time",
                "0.001",
                "--devices",
                "0,1",
            ],
        ]
        .concat(),
        Duration::from_secs(60),
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("--devices names GPUs: the CPU backend ignores it"),
        "{err}"
    );
    // `--backend auto` (the default) with GPUs named: on a machine without a driver, a clear
    // error and nothing left behind; with one, the run is on the GPU, never on the CPU.
    let (code, err) = run_to_end(
        &[
            "--name-shm",
            &name.0,
            "--particles",
            "50",
            "--end-time",
            "0.001",
            "--devices",
            "0",
        ],
        Duration::from_secs(120),
    );
    assert!(!err.contains("running on the CPU backend"), "{err}");
    if code != Some(0) {
        assert_eq!(code, Some(1), "{err}");
        assert!(err.contains("--devices names GPUs, but"), "{err}");
        assert!(!segment_exists(&name.0), "a segment was left");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Regression (items 9-10): float-to-duration options of the consumers panicked on 1e300.
/// And a negative number after a space reaches each option's own check: clap had taken `-1`
/// for a flag ("unexpected argument '-1' found"). Each case: an exit code of 1 or 2, no panic,
/// and the option's own message.
#[test]
fn consumer_options_give_their_own_errors_and_never_panic() {
    const BETWEEN: &str = "must be between";
    let cases: [(&str, &[&str], &str); 9] = [
        (
            "shmctl",
            &["send", "pshm-none", "pause", "--timeout=1e300"],
            BETWEEN,
        ),
        (
            "analysis",
            &["--attach", "pshm-none", "--once", "--timeout=1e300"],
            BETWEEN,
        ),
        (
            "analysis",
            &["--attach", "pshm-none", "--once", "--plot-every=NaN"],
            BETWEEN,
        ),
        (
            "viewer",
            &[
                "--attach",
                "pshm-none",
                "--snapshot",
                "/tmp/x.png",
                "--wait=1e300",
            ],
            BETWEEN,
        ),
        (
            "analysis",
            &["--attach", "pshm-none", "--every", "-1"],
            "--every must be between",
        ),
        (
            "analysis",
            &["--attach", "pshm-none", "--lacey-cell", "-0.1"],
            "--lacey-cell must be a cell size",
        ),
        (
            "viewer",
            &[
                "--attach",
                "pshm-none",
                "--snapshot",
                "/tmp/x.png",
                "--wait",
                "-3",
            ],
            "--wait must be between",
        ),
        (
            "forwarder",
            &["--attach", "pshm-none", "--stall-timeout-s", "-1"],
            "--stall-timeout-s must be between",
        ),
        (
            "shmctl",
            &["send", "pshm-none", "refresh", "-1"],
            "refresh must be between",
        ),
    ];
    for (tool, args, expect) in cases {
        let o = Command::new(bin(tool)).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            matches!(o.status.code(), Some(1 | 2)),
            "{tool} {args:?}: {o:?}"
        );
        assert!(!err.contains("panicked"), "{tool} {args:?}: {err}");
        assert!(err.contains(expect), "{tool} {args:?}: {err}");
    }
}

/// A run with inflow and outflow resumes only from a frame whose id list and removed counters
/// agree with its static section and case (issue 20): each corruption is named, nothing taken.
#[test]
fn load_shm_checks_the_live_ids_and_counters_of_a_flow_run() {
    let dir = std::env::temp_dir().join(format!("pshm-e2e-flowbad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let case = dir.join("feed.toml");
    std::fs::write(&case, FEED_CASE).unwrap();
    let case = case.to_str().unwrap().to_string();
    type Edit = fn(&mut shm_protocol::Frame, &mut shm_protocol::StaticData);
    let cases: [(&str, Edit, &str); 4] = [
        (
            "flow-order",
            |f, _| f.particle_ids.as_mut().unwrap().swap(0, 1),
            "live ids must be ascending",
        ),
        (
            "flow-beyond",
            |f, s| {
                *f.particle_ids.as_mut().unwrap().last_mut().unwrap() = s.particle_ids.len() as u32
            },
            "below the",
        ),
        (
            "flow-removed",
            |f, _| f.meta.removed_count = u64::MAX / 2,
            "were removed",
        ),
        (
            "flow-noids",
            |f, _| f.particle_ids = None,
            "segment is inconsistent",
        ),
    ];
    for (tag, edit, expect) in cases {
        let name = SegName::new(tag);
        dead_run_of(&name, &["--case", &case, "--end-time", "0.3"], edit);
        assert_resume_refused(&name, "0.4", tag, expect);
    }
    // The same segment unedited resumes and runs to its new end.
    let name = SegName::new("flow-ok");
    dead_run_of(&name, &["--case", &case, "--end-time", "0.3"], |_, _| {});
    let (code, err) = resume(&name, "0.35", &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("removed so far"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--gpu-memory`: a bad layout is a clear usage error; the CPU backend runs and says it ignores
/// the option; an SPH run refuses it (DEM layouts only), with nothing left behind.
#[test]
fn gpu_memory_layouts_are_checked() {
    // The solver on the CPU publishing into a fresh segment `tag`, with `args` after.
    let run = |tag: &str, args: &[&str]| {
        let name = SegName::new(tag);
        let mut all = vec!["--name-shm", &name.0, "--backend", "cpu"];
        all.extend_from_slice(args);
        let (code, err) = run_to_end(&all, Duration::from_secs(60));
        (code, err, segment_exists(&name.0))
    };
    for (value, expect) in [
        ("compact:0", "rows of 1 to 26 entries"),
        ("compact:27", "rows of 1 to 26 entries"),
        ("compact:x", "rows of 1 to 26 entries"),
        ("fast", "expected `auto`, `compact` or `compact:N`"),
    ] {
        let arg = format!("--gpu-memory={value}");
        let (code, err, left) = run("gpumem", &[&arg]);
        assert_eq!(code, Some(2), "{value}: {err}");
        assert!(err.contains(expect), "{value}: {err}");
        assert!(!left, "{value}: a segment was left");
    }
    let (code, err, _) = run(
        "gpumem-cpu",
        &[
            "--particles",
            "50",
            "--end-time",
            "0.001",
            "--gpu-memory",
            "compact:7",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("the CPU backend ignores it"), "{err}");
    let dir = std::env::temp_dir().join(format!("pshm-gpumem-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let case = dir.join("tank.toml");
    std::fs::write(&case, sph_tank_case(0.01)).unwrap();
    let case = case.to_str().unwrap();
    let (code, err, left) = run("gpumem-sph", &["--case", case, "--gpu-memory", "compact"]);
    assert_ne!(code, Some(0), "{err}");
    assert!(
        err.contains("--gpu-memory sets the layout of DEM runs"),
        "{err}"
    );
    assert!(!left, "a segment was left");
    let _ = std::fs::remove_dir_all(&dir);
}
