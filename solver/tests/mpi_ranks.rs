//! One simulation over several MPI ranks (CPU workers), run as users run it: `mpirun -np N
//! solver ...` against a real segment. Needs the `mpi` feature and `mpirun` on PATH (Open MPI
//! or MPICH): `cargo test --release -p solver --features mpi --test mpi_ranks`.
#![cfg(feature = "mpi")]

#[path = "support/sph.rs"]
mod sph;
#[path = "support/run_solver.rs"]
mod support;

use e2e_tests::same_sph_frame;
use shm_protocol::{Command as Cmd, CommandOutcome, Consumer, Frame};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `mpirun -np N solver ARGS`, set up for a small shared machine: ranks may outnumber cores,
/// are not pinned, yield when idle, and one CPU thread each.
fn mpirun(np: usize, args: &[&str]) -> Command {
    let mut c = Command::new("mpirun");
    c.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1")
        .env("OMPI_MCA_hwloc_base_binding_policy", "none")
        .env("OMPI_MCA_mpi_yield_when_idle", "1")
        // Containers often forbid the cross-process copy Open MPI tries first.
        .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
        .env("RUST_LOG", "info")
        .args(["-np", &np.to_string()])
        .arg(support::solver_exe())
        .args(args)
        .args(["--threads", "1", "--progress-every", "1000"]);
    c
}

/// The same run in one process.
fn single(args: &[&str]) -> Command {
    let mut c = Command::new(support::solver_exe());
    c.env("RUST_LOG", "info")
        .args(args)
        .args(["--threads", "1", "--progress-every", "1000"]);
    c
}

/// Runs to the end within `limit`; returns (exit code, stderr).
fn run(c: Command, limit: Duration) -> (Option<i32>, String) {
    let out = support::run_command(c, limit);
    (out.code, out.stderr)
}

struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("mpi-ranks-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("scratch directory");
        Scratch(d)
    }
    fn path(&self, p: &str) -> String {
        self.0.join(p).display().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A segment name unique to this test process, removed when dropped.
struct Seg(String);

impl Seg {
    fn new(tag: &str) -> Seg {
        Seg(format!("mpi-{tag}-{}", std::process::id()))
    }
}

impl Drop for Seg {
    fn drop(&mut self) {
        let _ = shm_protocol::segment::unlink(&self.0);
    }
}

fn newest_frame(name: &str) -> Frame {
    Consumer::attach(name)
        .unwrap_or_else(|e| panic!("attach {name}: {e}"))
        .read_newest()
        .expect("read")
        .expect("a frame")
}

/// A run's result files: name and bytes.
type Files = Vec<(String, Vec<u8>)>;

/// Every file under `dir`, relative path -> bytes.
fn files(dir: &Path) -> Files {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .expect("output directory")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_file())
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            (name, std::fs::read(&p).expect("read"))
        })
        .collect();
    out.sort();
    out
}

/// The silo case (inflow source, meshes, outflow regions) made quick: beads enter at 3 m/s and
/// an outflow band 7 cm below the inflow removes them, so particles are added and removed
/// within a few hundred steps.
fn quick_silo(dir: &Scratch) -> String {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("cases/silo.toml");
    let text = std::fs::read_to_string(src).expect("silo case");
    let text = text.replace("velocity = [0.0, 0.0, -1.0]", "velocity = [0.0, 0.0, -3.0]");
    assert!(
        text.contains("-3.0]"),
        "the silo's inflow velocity line changed"
    );
    let text = text.replace(
        "[[outflows]]\ntype = \"outside_domain\"",
        "[[outflows]]\ntype = \"outside_domain\"\n\n[[outflows]]\ntype = \"box\"\nmin = [-1.0, -1.0, 0.10]\nmax = [1.0, 1.0, 0.15]",
    );
    assert!(text.contains("0.15]"), "the silo's outflow lines changed");
    let path = dir.path("quick_silo.toml");
    std::fs::write(&path, text).expect("case file");
    path
}

/// Frames, VTK files and checkpoints of `args` on 1 process, 2 and 3 ranks: all the same bits.
fn same_bits_on_every_rank_count(tag: &str, args: &[&str], dir: &Scratch) {
    let mut reference: Option<(Frame, Files)> = None;
    for np in [1usize, 2, 3] {
        let seg = Seg::new(&format!("{tag}{np}"));
        let out = dir.path(&format!("{tag}-np{np}"));
        let mut a: Vec<&str> = args.to_vec();
        a.extend([
            "--backend",
            "cpu",
            "--name-shm",
            &seg.0,
            "--keep-shm",
            "--refresh-wall-ms",
            "0",
            "--output",
            &out,
        ]);
        let cmd = if np == 1 { single(&a) } else { mpirun(np, &a) };
        let (code, err) = run(cmd, Duration::from_secs(240));
        assert_eq!(code, Some(0), "{tag} on {np} ranks failed:\n{err}");
        if np > 1 {
            assert!(err.contains(&format!("on {np} MPI ranks")), "{err}");
        }
        let frame = newest_frame(&seg.0);
        let results = files(Path::new(&out));
        assert!(
            results.iter().any(|(n, _)| n == "checkpoint.bin"),
            "no final checkpoint in {out}"
        );
        match &reference {
            None => reference = Some((frame, results)),
            Some((f, r)) => same_end(&format!("{tag} np {np}"), (&frame, &results), (f, r)),
        }
    }
}

/// A run's last frame and result files are bit for bit the reference's.
fn same_end(what: &str, (frame, results): (&Frame, &Files), (f, r): (&Frame, &Files)) {
    let m = (&frame.meta, &f.meta);
    assert_eq!((m.0.step, m.0.sim_time), (m.1.step, m.1.sim_time), "{what}");
    assert_eq!(m.0.particle_count, m.1.particle_count, "{what}");
    assert_eq!(
        (m.0.removed_count, m.0.removed_mass),
        (m.1.removed_count, m.1.removed_mass),
        "{what}"
    );
    assert_eq!(frame.positions, f.positions, "{what}: positions");
    assert_eq!(frame.velocities, f.velocities, "{what}: velocities");
    assert_eq!(frame.angular_velocities, f.angular_velocities, "{what}");
    assert_eq!(frame.contact_counts, f.contact_counts, "{what}");
    assert_eq!(frame.particle_ids, f.particle_ids, "{what}: ids");
    assert_eq!(frame.bodies, f.bodies, "{what}: meshes");
    let names = |r: &Files| r.iter().map(|x| x.0.clone()).collect::<Vec<_>>();
    assert_eq!(names(results), names(r), "{what}: result files");
    for ((name, a), (_, b)) in results.iter().zip(r) {
        assert!(a == b, "{what}: {name} differs from the reference run's");
    }
}

#[test]
fn ranks_give_the_bits_of_one_process() {
    let dir = Scratch::new("bits");
    // The built-in case: friction, rolling resistance, history across rank boundaries.
    same_bits_on_every_rank_count(
        "box",
        &[
            "--particles",
            "3000",
            "--end-time",
            "0.01",
            "--output-every",
            "0.005",
        ],
        &dir,
    );
    // Inflow, outflow (ids with gaps, removed mass) and meshes.
    let silo = quick_silo(&dir);
    same_bits_on_every_rank_count(
        "silo",
        &[
            "--case",
            &silo,
            "--end-time",
            "0.04",
            "--output-every",
            "0.02",
        ],
        &dir,
    );
    let removed = removed_by_quick_silo(&dir);
    assert!(
        removed > 0,
        "the quick silo removed no particle: the outflow path was not exercised"
    );
}

/// Particles the quick silo's one-process run removed (from its final checkpoint).
fn removed_by_quick_silo(dir: &Scratch) -> u64 {
    let sim = solver::exec::sim::Simulation::load_checkpoint(Path::new(
        &dir.path("silo-np1/checkpoint.bin"),
    ))
    .expect("checkpoint");
    sim.flow().removed_count
}

#[test]
fn checkpoints_restart_on_any_rank_count() {
    let dir = Scratch::new("restart");
    let base = [
        "--backend",
        "cpu",
        "--particles",
        "2000",
        "--refresh-wall-ms",
        "0",
    ];
    fn with<'a>(base: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
        [base, extra].concat()
    }
    // Written by 3 ranks halfway ...
    let half = dir.path("half");
    let (code, err) = run(
        mpirun(
            3,
            &with(&base, &["--shm", "--end-time", "0.005", "--output", &half]),
        ),
        Duration::from_secs(120),
    );
    assert_eq!(code, Some(0), "{err}");
    let ckpt = format!("{half}/checkpoint.bin");
    // ... continued on 1 process and on 2 ranks, against one process from the start.
    let straight = dir.path("straight");
    let (code, err) = run(
        single(&with(
            &base,
            &["--shm", "--end-time", "0.01", "--output", &straight],
        )),
        Duration::from_secs(120),
    );
    assert_eq!(code, Some(0), "{err}");
    let load = |d: &str| {
        solver::exec::sim::Simulation::load_checkpoint(Path::new(&format!("{d}/checkpoint.bin")))
            .expect("checkpoint")
            .state()
            .expect("state")
    };
    let expected = load(&straight);
    for np in [1usize, 2] {
        let out = dir.path(&format!("from3-np{np}"));
        let args = [
            "--backend",
            "cpu",
            "--shm",
            "--restart",
            &ckpt,
            "--end-time",
            "0.01",
            "--output",
            &out,
        ];
        let cmd = if np == 1 {
            single(&args)
        } else {
            mpirun(np, &args)
        };
        let (code, err) = run(cmd, Duration::from_secs(120));
        assert_eq!(code, Some(0), "{err}");
        assert_eq!(
            load(&out),
            expected,
            "3 ranks -> {np}: not the straight run's state"
        );
    }
}

/// The runs the rank-protocol tests start: the built-in case and the dam break ("sph-cpu") on
/// CPU ranks, and where the GPU tests run, the same on GPU ranks ("cuda", "sph").
fn rank_backends() -> Vec<&'static str> {
    if gpu_tests() {
        vec!["cpu", "sph-cpu", "cuda", "sph"]
    } else {
        vec!["cpu", "sph-cpu"]
    }
}

/// The arguments of `backend`'s run (see [`rank_backends`]): 3,000 particles of the built-in
/// case, or the dam break at dp = 4 cm.
fn backend_args(backend: &str) -> Vec<String> {
    let a: Vec<String> = match backend {
        "sph" | "sph-cpu" => vec![
            "--backend".into(),
            if backend == "sph" { "cuda" } else { "cpu" }.into(),
            "--case".into(),
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("cases/dambreak.toml")
                .display()
                .to_string(),
        ],
        b => vec![
            "--backend".into(),
            b.into(),
            "--particles".into(),
            "3000".into(),
        ],
    };
    a
}

/// Spawns a long run on `np` ranks of `backend` into `seg` with stderr going to a file; returns
/// the child and the log path once a frame beyond the first is out.
fn long_run(
    np: usize,
    seg: &Seg,
    dir: &Scratch,
    extra: &[&str],
    backend: &str,
) -> (Child, PathBuf) {
    let log = dir.0.join(format!("{}.log", seg.0));
    let file = std::fs::File::create(&log).expect("log");
    let owned = backend_args(backend);
    let mut args: Vec<&str> = owned.iter().map(String::as_str).collect();
    args.extend([
        "--end-time",
        "50",
        "--name-shm",
        &seg.0,
        "--refresh",
        "0.001",
    ]);
    args.extend(extra);
    let child = mpirun(np, &args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(file)
        .spawn()
        .expect("starting mpirun");
    let start = Instant::now();
    loop {
        let ok = Consumer::attach(&seg.0)
            .ok()
            .and_then(|c| c.read_newest().ok().flatten())
            .is_some_and(|f| f.meta.seq >= 2);
        if ok {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no frames within 60 s:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (child, log)
}

fn wait_exit(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Some(st) = child.try_wait().expect("waiting") {
            return Some(st);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[test]
fn a_killed_rank_stops_the_run_and_the_segment_keeps_its_last_frame() {
    for backend in rank_backends() {
        killed_rank(backend);
    }
}

fn killed_rank(backend: &str) {
    let dir = Scratch::new(&format!("kill{backend}"));
    let seg = Seg::new(&format!("kill{backend}"));
    let (mut child, log) = long_run(2, &seg, &dir, &[], backend);
    let text = std::fs::read_to_string(&log).expect("log");
    let pid: i32 = text
        .lines()
        .find_map(|l| l.split("MPI rank 1 of 2 (pid ").nth(1))
        .and_then(|r| r.split(',').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("rank 1's pid is not in the log:\n{text}"));
    let before = newest_frame(&seg.0);
    // SAFETY: plain kill(2) of a process this test started (through mpirun).
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0, "kill rank 1");
    let t0 = Instant::now();
    let status = wait_exit(&mut child, Duration::from_secs(10)).unwrap_or_else(|| {
        let _ = child.kill();
        panic!(
            "the run did not stop within 10 s of a rank's death:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    });
    assert!(!status.success(), "a run that lost a rank must fail");
    eprintln!(
        "stopped {:.2} s after rank 1 died ({status})",
        t0.elapsed().as_secs_f64()
    );
    let c = Consumer::attach(&seg.0).expect("the segment is kept");
    assert!(!c.status().alive, "its owner is gone");
    let last = c
        .read_newest()
        .expect("read")
        .expect("the last frame is readable");
    assert!(last.meta.seq >= before.meta.seq);
    let n = before.meta.particle_count;
    if !backend.starts_with("sph") {
        assert_eq!(n, 3000);
    }
    assert_eq!(last.meta.particle_count, n);
    assert_eq!(last.positions.as_ref().map(Vec::len), Some(n as usize));
}

#[test]
fn pause_checkpoint_and_stop_reach_every_rank() {
    for backend in rank_backends() {
        commands_reach_every_rank(backend);
    }
}

fn commands_reach_every_rank(backend: &str) {
    let dir = Scratch::new(&format!("cmd{backend}"));
    let seg = Seg::new(&format!("cmd{backend}"));
    let out = dir.path("out");
    let (mut child, log) = long_run(3, &seg, &dir, &["--output", &out], backend);
    let mut c = Consumer::attach(&seg.0).expect("attach");
    let t = Duration::from_secs(20);
    let done = |o: CommandOutcome| match o {
        CommandOutcome::Done(s) => s,
        CommandOutcome::Rejected(why) => panic!("rejected: {why}"),
    };
    done(c.send(&Cmd::Pause, t).expect("pause"));
    let paused = newest_frame(&seg.0).meta.step;
    std::thread::sleep(Duration::from_millis(500));
    done(c.send(&Cmd::UpdateNow, t).expect("update"));
    assert_eq!(
        newest_frame(&seg.0).meta.step,
        paused,
        "steps go on while paused"
    );

    // A checkpoint holds every rank's particles and continues as the run does.
    let path = done(c.send(&Cmd::Checkpoint, t).expect("checkpoint"));
    let frame = newest_frame(&seg.0);
    let (step, pos) = if backend.starts_with("sph") {
        let r = solver::sph::checkpoint::load_state(Path::new(&path))
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(r.state.pos.len(), frame.meta.particle_count as usize);
        let pos: Vec<[f32; 3]> = r.state.pos.iter().map(|p| p.map(|x| x as f32)).collect();
        (r.state.step, pos)
    } else {
        let sim = solver::exec::sim::Simulation::load_checkpoint(Path::new(&path))
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(sim.num_particles(), 3000);
        (sim.step_index(), sim.positions_f32().expect("positions"))
    };
    assert_eq!(step, paused);
    assert_eq!(Some(pos), frame.positions, "checkpoint and frame disagree");

    done(c.send(&Cmd::Resume, t).expect("resume"));
    let start = Instant::now();
    while newest_frame(&seg.0).meta.step == paused {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no step after resume"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    done(c.send(&Cmd::Stop, t).expect("stop"));
    let status = wait_exit(&mut child, Duration::from_secs(30)).unwrap_or_else(|| {
        let _ = child.kill();
        panic!(
            "no exit after stop:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    });
    assert!(
        status.success(),
        "stop must end every rank cleanly ({status}):\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert!(
        !Path::new(&shm_protocol::shm_path(&seg.0)).exists(),
        "segment removed on a clean stop"
    );
}

#[test]
fn a_bad_case_on_rank_0_ends_every_rank_with_its_message() {
    let seg = Seg::new("bad");
    let (code, err) = run(
        mpirun(
            2,
            &[
                "--backend",
                "cpu",
                "--name-shm",
                &seg.0,
                "--case",
                "no-such-case.toml",
            ],
        ),
        Duration::from_secs(30),
    );
    assert_ne!(code, Some(0));
    assert!(err.contains("no-such-case.toml"), "{err}");
    assert!(
        !Path::new(&shm_protocol::shm_path(&seg.0)).exists(),
        "no segment left behind"
    );
}

/// An SPH run over ranks has one slab per rank: asking for another number of sub-domains is
/// refused on rank 0 before the start, and every rank ends with the reason.
#[test]
fn sph_sub_domains_other_than_the_ranks_are_refused() {
    let seg = Seg::new("sphsub");
    let case = Path::new(env!("CARGO_MANIFEST_DIR")).join("cases/hydrostatic_tank.toml");
    let case = case.to_string_lossy();
    let (code, err) = run(
        mpirun(
            2,
            &[
                "--backend",
                "cpu",
                "--name-shm",
                &seg.0,
                "--case",
                &case,
                "--subdomains",
                "3",
            ],
        ),
        Duration::from_secs(30),
    );
    assert_ne!(code, Some(0));
    assert!(err.contains("3 sub-domains asked for"), "{err}");
    assert!(err.contains("one slab per rank"), "{err}");
    assert!(
        err.contains("rank 0 failed before the run started"),
        "the other rank must say why it ends: {err}"
    );
    assert!(
        !Path::new(&shm_protocol::shm_path(&seg.0)).exists(),
        "no segment left behind"
    );
}

/// mDBC walls over CPU ranks: the dam break at dp = 8 cm with `boundary = "mdbc"` to 0.3 s on
/// 2 and 3 ranks (bounds moving by count) gives the frame and final checkpoint of one process
/// bit for bit, and the 2-rank checkpoint continues on one process and on 3 ranks to the same
/// frame. The split axis is x, across the obstacle's faces and the end walls, so wall
/// particles have ghost nodes in other ranks' slabs. Where the GPU tests run, the same on GPUs:
/// one GPU, two slabs of GPU 0 in one process, 2 and 3 GPU ranks, and the 2-rank checkpoint on
/// one GPU and 2 ranks.
#[test]
fn mdbc_over_ranks_gives_the_bits_of_one_process() {
    let dir = Scratch::new("mdbc");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("cases/dambreak.toml");
    let text = std::fs::read_to_string(&src).expect("dambreak.toml");
    assert!(text.contains("spacing = 0.04"), "the case's spacing moved");
    let text = text
        .replace("spacing = 0.04", "spacing = 0.08")
        .replace("\n[sph]\n", "\n[sph]\nboundary = \"mdbc\"\n");
    assert!(text.contains("boundary = \"mdbc\""));
    let case = dir.path("dambreak8_mdbc.toml");
    std::fs::write(&case, text).expect("case");
    let runs = cpu_rank_runs();
    sph_runs_agree(&dir, "sphd", &["--backend", "cpu"], &case, &runs, &[], 3);
    if !gpu_tests() {
        return;
    }
    sph_gpu_runs_agree(&Scratch::new("mdbcgpu"), "sphdg", &case);
}

/// Whether this machine runs the GPU tests (`PARTICLE_SHM_TEST_BACKENDS` names cuda).
fn gpu_tests() -> bool {
    std::env::var("PARTICLE_SHM_TEST_BACKENDS").is_ok_and(|b| b.contains("cuda"))
}

#[test]
fn cuda_without_a_gpu_is_refused_over_ranks() {
    if gpu_tests() {
        return;
    }
    // No driver here: GPU ranks are refused with the reason, before any rank starts work.
    let (code, err) = run(
        mpirun(2, &["--backend", "cuda", "--shm"]),
        Duration::from_secs(30),
    );
    assert_ne!(code, Some(0));
    assert!(err.contains("--backend cuda over MPI ranks"), "{err}");
    // GPUs named under --backend auto ask for GPU ranks too: refused alike, not run on CPU
    // ranks.
    let (code, err) = run(
        mpirun(2, &["--devices", "0", "--shm"]),
        Duration::from_secs(30),
    );
    assert_ne!(code, Some(0));
    assert!(
        err.contains("--devices names GPUs for the MPI ranks"),
        "{err}"
    );
}

/// SPH on CPU ranks (issue 18 through MPI, no GPU needed): the dam break at dp = 8 cm (7,000
/// particles) to 0.3 s on 2 and 3 ranks, bounds moving by count, gives the frame (positions,
/// velocities, densities, pressures, kinds) and the final checkpoint of one process bit for
/// bit; the 2-rank checkpoint continues on one process and on 3 ranks to the same frame.
#[test]
fn sph_cpu_ranks_give_the_bits_of_one_process() {
    let dir = Scratch::new("sphcpu");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("cases/dambreak.toml");
    let text = std::fs::read_to_string(&src).expect("dambreak.toml");
    assert!(text.contains("spacing = 0.04"), "the case's spacing moved");
    let case = dir.path("dambreak8.toml");
    std::fs::write(&case, text.replace("spacing = 0.04", "spacing = 0.08")).expect("case");
    // The first cut by estimated work leaves count balancing nothing to move at this coarse
    // spacing; from equal particle counts (walls included) it moves a bound.
    let mut runs = cpu_rank_runs();
    runs[2].4.push("SPH rank bounds moved".into());
    sph_runs_agree(&dir, "sphc", &["--backend", "cpu"], &case, &runs, &[], 3);
}

/// Moving solids over ranks: [`sph::rocking_blade_text`] at dp = 2.5 cm (10,000 particles) on 2
/// and 3 CPU ranks (bounds moving by count)
/// gives the frame and final checkpoint of one process bit for bit, and the 2-rank checkpoint
/// continues on one process and on 3 ranks to the same frame (the solids placed from the case
/// at the checkpoint's time). Where the GPU tests run, the same on GPUs: one GPU, two slabs of
/// GPU 0 in one process, 2 and 3 GPU ranks, and the 2-rank checkpoint on one GPU and 2 ranks.
#[test]
fn moving_solids_over_ranks_give_the_bits_of_one_process() {
    let dir = Scratch::new("sphmove");
    let case = dir.path("rocking.toml");
    std::fs::write(&case, sph::rocking_blade_text(0.025)).expect("case");
    let runs = cpu_rank_runs();
    sph_runs_agree(&dir, "sphm", &["--backend", "cpu"], &case, &runs, &[], 3);
    if !gpu_tests() {
        return;
    }
    sph_gpu_runs_agree(&Scratch::new("sphmovegpu"), "sphmg", &case);
}

/// The Verlet integrator over ranks: the rocking blade with mDBC walls and `integrator =
/// "verlet"` (an Euler step every 13) on 2 and 3 CPU ranks gives the frame and final checkpoint
/// of one process bit for bit (the records carry the state one step back; the checkpoint holds
/// it), and the 2-rank checkpoint continues on one process and on 3 ranks to the same frame.
/// Where the GPU tests run, the same on one GPU, two slabs of GPU 0 and 2 and 3 GPU ranks.
#[test]
fn verlet_over_ranks_gives_the_bits_of_one_process() {
    let dir = Scratch::new("sphverlet");
    let case = dir.path("rocking_verlet.toml");
    let text = sph::rocking_blade_text(0.025).replace(
        "\n[sph]\n",
        "\n[sph]\nintegrator = \"verlet\"\nverlet_steps = 13\nboundary = \"mdbc\"\n",
    );
    assert!(text.contains("verlet_steps = 13"));
    std::fs::write(&case, text).expect("case");
    let runs = cpu_rank_runs();
    sph_runs_agree(&dir, "sphv", &["--backend", "cpu"], &case, &runs, &[], 3);
    if !gpu_tests() {
        return;
    }
    sph_gpu_runs_agree(&Scratch::new("sphverletgpu"), "sphvg", &case);
}

/// The SPH `case` on GPUs ([`sph_runs_agree`]): one GPU, two slabs of GPU 0 in one process, 2
/// and 3 ranks on `PARTICLE_SHM_TEST_DEVICES` (default GPU 0, which the ranks then share), bounds
/// moving by count, the records travelling beside the boundary's rates (the default; the
/// exchanges before a balancing decision and the first take the road after the evaluation),
/// and 2 ranks with that overlap off; the 2-rank checkpoint continues on one GPU and on 2
/// ranks.
fn sph_gpu_runs_agree(dir: &Scratch, tag: &str, case: &str) {
    let devices = std::env::var("PARTICLE_SHM_TEST_DEVICES").unwrap_or_else(|_| "0".into());
    let overlapped = "exchanges ran their records beside the boundary's rates";
    let on_ranks = |np: usize| {
        vec![
            format!("{np} MPI ranks, one GPU each"),
            overlapped.into(),
            // Some exchange overlapped.
            "not:SPH rank 0: 0 of".into(),
        ]
    };
    let mut off = on_ranks(2);
    off[2] = "SPH rank 0: 0 of".into();
    let runs: [SphBitsRun; 5] = [
        ("one", 1, &["--devices", "0"], &[], vec![]),
        (
            "group",
            1,
            &["--devices", "0,0", "--balance", "count"],
            &[],
            vec!["slabs [0, ".into()],
        ),
        (
            "np2",
            2,
            &["--devices", &devices, "--balance", "count"],
            &[],
            on_ranks(2),
        ),
        (
            "np3",
            3,
            &["--devices", &devices, "--balance", "count"],
            &[],
            on_ranks(3),
        ),
        (
            "np2off",
            2,
            &["--devices", &devices, "--balance", "count"],
            &[("PARTICLE_SHM_SPH_OVERLAP", "off")],
            off,
        ),
    ];
    let restart = ["--devices", devices.as_str()];
    sph_runs_agree(dir, tag, &["--backend", "cuda"], case, &runs, &restart, 2);
}

/// One run of [`sph_runs_agree`]: label, ranks (1: one process), arguments beyond the common
/// ones, environment variables, lines its log must hold (with `not:`, must not hold).
type SphBitsRun<'a> = (
    &'a str,
    usize,
    &'a [&'a str],
    &'a [(&'a str, &'a str)],
    Vec<String>,
);

/// One process, then 2 and 3 CPU ranks with the bounds moving by count (3 from a first cut of
/// equal counts), each saying it runs on ranks.
fn cpu_rank_runs() -> [SphBitsRun<'static>; 3] {
    let on_ranks = |np: usize| vec![format!("SPH on {np} MPI ranks on the CPU")];
    [
        ("one", 1, &[], &[], vec![]),
        ("np2", 2, &["--balance", "count"], &[], on_ranks(2)),
        (
            "np3",
            3,
            &["--balance", "count", "--first-cut", "count"],
            &[],
            on_ranks(3),
        ),
    ]
}

/// Runs the SPH `case` with `base` and each run's arguments to 0.3 s (frames kept, output
/// written) and requires every frame (all fields) and final checkpoint to equal the first
/// run's bit for bit; then continues run "np2"'s checkpoint with `base` and `restart` on one
/// process and on `ranks` ranks to 0.35 s and requires the same frame.
fn sph_runs_agree(
    dir: &Scratch,
    tag: &str,
    base: &[&str],
    case: &str,
    runs: &[SphBitsRun],
    restart: &[&str],
    ranks: usize,
) {
    let mut reference: Option<(Frame, Files)> = None;
    for (label, np, extra, env, expect) in runs {
        let seg = Seg::new(&format!("{tag}{label}"));
        let out = dir.path(label);
        let mut a = base.to_vec();
        a.extend([
            "--case",
            case,
            "--end-time",
            "0.3",
            "--name-shm",
            &seg.0,
            "--keep-shm",
            "--refresh-wall-ms",
            "0",
            "--output",
            &out,
        ]);
        a.extend(extra.iter());
        let mut cmd = if *np == 1 {
            single(&a)
        } else {
            mpirun(*np, &a)
        };
        cmd.env(
            "RUST_LOG",
            "info,solver::sph::ranks=debug,solver::sph::cuda=debug",
        );
        cmd.envs(env.iter().copied());
        let (code, err) = run(cmd, Duration::from_secs(300));
        assert_eq!(code, Some(0), "SPH {label} failed:\n{err}");
        for line in expect {
            match line.strip_prefix("not:") {
                Some(absent) => assert!(!err.contains(absent), "SPH {label}: {absent:?} in\n{err}"),
                None => assert!(
                    err.contains(line.as_str()),
                    "SPH {label}: no {line:?} in\n{err}"
                ),
            }
        }
        let frame = newest_frame(&seg.0);
        let results = final_checkpoint(&out);
        match &reference {
            None => reference = Some((frame, results)),
            Some((f, r)) => {
                same_sph_frame(&frame, label, f);
                assert!(results == *r, "SPH {label}: the final checkpoint differs");
            }
        }
    }
    let ck = dir.path("np2/checkpoint.bin");
    let mut ends = Vec::new();
    for np in [1, ranks] {
        let seg = Seg::new(&format!("{tag}r{np}"));
        let mut a = base.to_vec();
        a.extend(restart);
        a.extend([
            "--restart",
            &ck,
            "--end-time",
            "0.35",
            "--name-shm",
            &seg.0,
            "--keep-shm",
        ]);
        let cmd = if np == 1 { single(&a) } else { mpirun(np, &a) };
        let (code, err) = run(cmd, Duration::from_secs(300));
        assert_eq!(code, Some(0), "SPH restart on {np} failed:\n{err}");
        ends.push(newest_frame(&seg.0));
    }
    same_sph_frame(&ends[1], &format!("restart on {ranks} ranks"), &ends[0]);
}

/// SPH on GPU ranks (issue 18 through MPI; `PARTICLE_SHM_TEST_BACKENDS=cuda`, the ranks share
/// GPU 0 on a one-GPU machine): the dam break on 2 and 3 ranks, bounds moving by count, gives
/// the frame (positions, velocities, densities, pressures, kinds) and final checkpoint of one
/// GPU and of a group of two slabs in one process, bit for bit; the 2-rank checkpoint continues
/// on one GPU and on 2 ranks to the same frame.
#[test]
fn sph_gpu_ranks_give_the_bits_of_one_gpu() {
    if !gpu_tests() {
        return;
    }
    let case = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("cases/dambreak.toml")
        .display()
        .to_string();
    sph_gpu_runs_agree(&Scratch::new("sphgpu"), "sph", &case);
}

/// The GPU tests' run: the built-in case at 30,000 particles to t = 0.05 s on `devices`,
/// frames into `seg` (kept), output (the final checkpoint) into `out`, then `extra`.
fn gpu_run_args(devices: &str, seg: &str, out: &str, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = [
        "--backend",
        "cuda",
        "--devices",
        devices,
        "--particles",
        "30000",
        "--end-time",
        "0.05",
        "--name-shm",
        seg,
        "--keep-shm",
        "--refresh-wall-ms",
        "0",
        "--output",
        out,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

/// The end state of a run's output: its final checkpoint (a GPU writes output at the batch
/// boundary after an output time, and its batches follow the wall clock, so only the last
/// output is at the same step on any run).
fn final_checkpoint(out: &str) -> Files {
    let results: Files = files(Path::new(out))
        .into_iter()
        .filter(|(n, _)| n == "checkpoint.bin")
        .collect();
    assert_eq!(results.len(), 1, "no final checkpoint in {out}");
    results
}

/// One GPU per rank (`PARTICLE_SHM_TEST_BACKENDS=cuda`; the ranks share GPU 0 on a one-GPU
/// machine, `PARTICLE_SHM_TEST_DEVICES=0,1` puts them on two): 2 and 3 ranks give the frame, VTK
/// files and checkpoint of the same run on one GPU, bit for bit; the checkpoint restarts on one
/// GPU and on 2 ranks with the same result; inflow and outflow are refused with a message.
#[test]
fn gpu_ranks_give_the_bits_of_one_gpu() {
    if !gpu_tests() {
        return;
    }
    let devices = std::env::var("PARTICLE_SHM_TEST_DEVICES").unwrap_or_else(|_| "0".into());
    let dir = Scratch::new("gpu");
    let mut reference: Option<(Frame, Files)> = None;
    for np in [1usize, 2, 3] {
        let seg = Seg::new(&format!("gpu{np}"));
        let out = dir.path(&format!("np{np}"));
        // --skin 0: one GPU searches every step, as ranks then do: the same bits (with a
        // skin, ranks follow a group's schedule: the test below).
        let owned = gpu_run_args(&devices, &seg.0, &out, &["--skin", "0"]);
        let a: Vec<&str> = owned.iter().map(String::as_str).collect();
        // One process runs one GPU: the first of the list.
        let one: Vec<&str> = a
            .iter()
            .map(|&x| if x == devices { "0" } else { x })
            .collect();
        let cmd = if np == 1 {
            single(&one)
        } else {
            mpirun(np, &a)
        };
        let (code, err) = run(cmd, Duration::from_secs(300));
        assert_eq!(code, Some(0), "{np} GPU ranks failed:\n{err}");
        if np > 1 {
            assert!(err.contains(&format!("on {np} MPI ranks")), "{err}");
            assert!(err.contains("one GPU each"), "{err}");
        }
        let frame = newest_frame(&seg.0);
        let results = final_checkpoint(&out);
        match &reference {
            None => reference = Some((frame, results)),
            Some((f, r)) => same_end(&format!("{np} GPU ranks"), (&frame, &results), (f, r)),
        }
    }
    // The 2-rank checkpoint continues on one GPU and on 2 ranks to the same frame.
    let ck = dir.path("np2/checkpoint.bin");
    let mut ends = Vec::new();
    for np in [1usize, 2] {
        let seg = Seg::new(&format!("gpur{np}"));
        let a = [
            "--backend",
            "cuda",
            "--restart",
            &ck,
            "--end-time",
            "0.06",
            "--name-shm",
            &seg.0,
            "--keep-shm",
            "--skin",
            "0",
        ];
        let cmd = if np == 1 { single(&a) } else { mpirun(np, &a) };
        let (code, err) = run(cmd, Duration::from_secs(300));
        assert_eq!(code, Some(0), "restart on {np} failed:\n{err}");
        ends.push(newest_frame(&seg.0));
    }
    assert_eq!(ends[0].meta.step, ends[1].meta.step);
    assert_eq!(ends[0].positions, ends[1].positions, "restarts differ");
    // Inflow and outflow regions stay in one process for now: a clear refusal.
    let silo = quick_silo(&dir);
    let (code, err) = run(
        mpirun(2, &["--backend", "cuda", "--case", &silo, "--shm"]),
        Duration::from_secs(120),
    );
    assert_ne!(code, Some(0));
    assert!(
        err.contains("inflow and outflow regions on GPU ranks"),
        "{err}"
    );
}

/// With the Verlet skin (f32 and `--skin auto`, the defaults) GPU ranks search at the steps a
/// GPU group in one process searches (one schedule from every GPU's largest move, a search
/// wherever a bound moves), refresh their ghosts between searches through NCCL or host memory,
/// and give that group's frame and checkpoint bit for bit: 2 ranks against `--devices` of two
/// slabs in one process, bounds moving by count.
#[test]
fn gpu_ranks_with_a_skin_give_the_bits_of_a_gpu_group() {
    if !gpu_tests() {
        return;
    }
    let devices = std::env::var("PARTICLE_SHM_TEST_DEVICES").unwrap_or_else(|_| "0".into());
    // Two slabs in one process: the GPUs of the list, or GPU 0 twice.
    let pair = if devices.contains(',') {
        devices.clone()
    } else {
        format!("{devices},{devices}")
    };
    let dir = Scratch::new("gpuskin");
    let mut ends = Vec::new();
    for np in [1usize, 2] {
        let seg = Seg::new(&format!("gskin{np}"));
        let out = dir.path(&format!("np{np}"));
        let owned = gpu_run_args(&pair, &seg.0, &out, &["--balance", "count"]);
        let a: Vec<&str> = owned.iter().map(String::as_str).collect();
        let cmd = if np == 1 { single(&a) } else { mpirun(np, &a) };
        let (code, err) = run(cmd, Duration::from_secs(300));
        assert_eq!(code, Some(0), "{np} process(es) failed:\n{err}");
        assert!(err.contains("Verlet skin"), "no skin reported:\n{err}");
        assert!(
            err.contains("searches forced by moves past half the skin"),
            "no skin summary:\n{err}"
        );
        ends.push((newest_frame(&seg.0), final_checkpoint(&out)));
    }
    same_end(
        "2 GPU ranks with a skin against a group in one process",
        (&ends[1].0, &ends[1].1),
        (&ends[0].0, &ends[0].1),
    );
}
