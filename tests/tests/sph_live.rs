//! SPH end to end (issue 17): the real solver binary on an SPH case file publishes frames with
//! positions, velocities, density, pressure and particle kind, and species records of the SPH
//! methods, into a real segment.

use e2e_tests::*;
use shm_protocol::layout::SpeciesMethod;
use shm_protocol::{Consumer, FieldKind};
use std::time::Duration;

#[test]
fn an_sph_case_publishes_density_pressure_and_kind() {
    let seg = SegName::new("sph");
    let dir = std::env::temp_dir().join(format!("pshm-sph-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let case = dir.join("tank.toml");
    let text = e2e_tests::sph_tank_case(0.05)
        .replace("[sph]\n", "[sph]\nviscosity_boundary_factor = 0.5\n");
    std::fs::write(&case, text).unwrap();
    let case_arg = case.to_string_lossy().to_string();
    let out = dir.join("vtk");
    let out_arg = out.to_string_lossy().to_string();
    let args = [
        "--name-shm",
        &seg.0,
        "--case",
        &case_arg,
        "--backend",
        "cpu",
        "--keep-shm",
        "--output",
        &out_arg,
        "--output-every",
        "0.025",
    ];
    let (code, err) = Running::spawn(solver(&args)).wait_exit(Duration::from_secs(120));
    assert_eq!(code, Some(0), "{err}");
    let c = Consumer::attach(&seg.0).expect("attach");
    let stat = c.read_static().expect("static");
    let methods: Vec<_> = stat.species.iter().map(|s| s.method()).collect();
    assert_eq!(
        methods,
        vec![
            Some(SpeciesMethod::SphFluid),
            Some(SpeciesMethod::SphBoundary)
        ]
    );
    // Parameters: sound speed, viscosity (the boundary's: alpha of fluid-boundary pairs),
    // smoothing length.
    let alphas: Vec<f64> = stat.species.iter().map(|s| s.params[1]).collect();
    assert_eq!(alphas, vec![0.1, 0.1 * 0.5]);
    let f = c.read_newest().expect("read").expect("a frame");
    assert!(
        (f.meta.sim_time - 0.05).abs() < 1e-9,
        "last frame at the end time, got {}",
        f.meta.sim_time
    );
    for k in [
        FieldKind::Position,
        FieldKind::Velocity,
        FieldKind::Density,
        FieldKind::Pressure,
        FieldKind::ParticleKind,
    ] {
        assert!(f.meta.has(k), "{k:?} missing");
    }
    let kinds = f.particle_kinds.clone().expect("kinds");
    let pos = f.positions.clone().expect("positions");
    let (rho, p) = (
        f.densities.clone().expect("rho"),
        f.pressures.clone().expect("p"),
    );
    assert_eq!(
        kinds.iter().filter(|&&k| k == 1).count(),
        10 * 5 * 10,
        "fluid particles"
    );
    assert!(kinds.iter().all(|&k| k == 1 || k == 2));
    for i in 0..kinds.len() {
        assert_eq!(
            stat.particle_species[i],
            u32::from(kinds[i] == 2),
            "species follow the kind"
        );
        if kinds[i] == 1 {
            assert!((rho[i] - 1000.0).abs() < 20.0, "density {}", rho[i]);
            // Hydrostatic within 15 % at depth, sampled 1 s before settling is complete.
            let depth = 0.2 - pos[i][2] as f64;
            if depth > 0.09 {
                let exact = 1000.0 * 9.81 * depth;
                assert!(
                    (p[i] as f64 - exact).abs() < 0.15 * exact,
                    "p = {} at depth {depth}, expected {exact}",
                    p[i]
                );
            }
        }
    }
    // VTK for ParaView: the series index and point data with the SPH fields.
    let pvd = std::fs::read_to_string(out.join("sph.pvd")).expect("sph.pvd");
    assert!(pvd.matches("<DataSet").count() >= 3, "{pvd}");
    let first = std::fs::read(out.join("sph_particles_0000000000.vtu")).expect("first vtu");
    let head = String::from_utf8_lossy(&first[..first.len().min(2000)]).to_string();
    for name in ["pressure", "density", "velocity", "kind"] {
        assert!(
            head.contains(&format!("Name=\"{name}\"")),
            "{name} missing: {head}"
        );
    }
    let _ = shm_protocol::segment::unlink(&seg.0);
    std::fs::remove_dir_all(&dir).ok();
}

/// `--load-shm` on the segment of a finished (or dead) SPH run continues from its last frame:
/// the step count goes on, the still tank stays still, and an end time before that frame is a
/// clear error.
#[test]
fn load_shm_continues_an_sph_run_from_its_last_frame() {
    let seg = SegName::new("sph-resume");
    let dir = std::env::temp_dir().join(format!("pshm-sph-resume-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let case = dir.join("tank.toml");
    std::fs::write(&case, e2e_tests::sph_tank_case(0.05)).unwrap();
    let case_arg = case.to_string_lossy().to_string();
    let first = [
        "--name-shm",
        &seg.0,
        "--case",
        &case_arg,
        "--backend",
        "cpu",
        "--keep-shm",
    ];
    let (code, err) = Running::spawn(solver(&first)).wait_exit(Duration::from_secs(120));
    assert_eq!(code, Some(0), "{err}");
    let done = info(&seg.0).expect("segment kept");
    let s1 = step(&done);
    assert!(s1 > 10, "{done}");
    let too_early = [
        "--load-shm",
        &seg.0,
        "--backend",
        "cpu",
        "--end-time",
        "0.01",
    ];
    let (code, err) = Running::spawn(solver(&too_early)).wait_exit(Duration::from_secs(60));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("give a later --end-time"), "{err}");
    let resume = [
        "--load-shm",
        &seg.0,
        "--backend",
        "cpu",
        "--end-time",
        "0.1",
        "--keep-shm",
    ];
    let (code, err) = Running::spawn(solver(&resume)).wait_exit(Duration::from_secs(120));
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("resuming SPH run"), "{err}");
    let c = shm_protocol::Consumer::attach(&seg.0).expect("attach");
    let f = c.read_newest().expect("read").expect("a frame");
    assert!(
        f.meta.step > s1,
        "continued from step {s1}: now {}",
        f.meta.step
    );
    assert!(
        (f.meta.sim_time - 0.1).abs() < 1e-9,
        "t = {}",
        f.meta.sim_time
    );
    let vmax = f
        .velocities
        .as_ref()
        .expect("velocities")
        .iter()
        .map(|v| (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt())
        .fold(0.0f32, f32::max);
    assert!(
        vmax < 0.5,
        "the still tank must stay still, max speed {vmax} m/s"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// An SPH case with a solid from an STL file (the shipped `dambreak_pier.toml` and `pier.stl`,
/// copied elsewhere): the STL is found beside the case file whatever the working directory, the
/// run publishes its particles, `--load-shm` continues it from another directory (the stored
/// case names the STL by absolute path), and once the STL is gone the resume is a clear error
/// naming it.
#[test]
fn an_sph_case_with_an_stl_solid_runs_and_resumes_from_elsewhere() {
    let seg = SegName::new("sph-stl");
    let dir = std::env::temp_dir().join(format!("pshm-sph-stl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cases = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../solver/cases");
    for f in ["dambreak_pier.toml", "pier.stl"] {
        std::fs::copy(cases.join(f), dir.join(f)).unwrap();
    }
    let case_arg = dir.join("dambreak_pier.toml").to_string_lossy().to_string();
    let first = [
        "--name-shm",
        &seg.0,
        "--case",
        &case_arg,
        "--backend",
        "cpu",
        "--end-time",
        "0.002",
        "--keep-shm",
    ];
    let mut cmd = solver(&first);
    cmd.current_dir(std::env::temp_dir());
    let (code, err) = Running::spawn(cmd).wait_exit(Duration::from_secs(120));
    assert_eq!(code, Some(0), "{err}");
    let c = Consumer::attach(&seg.0).expect("attach");
    let f = c.read_newest().expect("read").expect("a frame");
    let n = f.positions.as_ref().expect("positions").len();
    assert!(
        n > 40_000,
        "{n} particles: the tank, the pier and the water"
    );
    let stat = c.read_static().expect("static");
    // The stored case names the STL by its absolute path (canonical: the temp folder may be
    // reached through a link).
    let stl = std::fs::canonicalize(dir.join("pier.stl")).unwrap();
    assert!(
        stat.config_toml
            .contains(&format!("stl = \"{}\"", stl.display())),
        "{}",
        stat.config_toml
    );
    drop(c);
    let resume = [
        "--load-shm",
        &seg.0,
        "--backend",
        "cpu",
        "--end-time",
        "0.003",
        "--keep-shm",
    ];
    let mut cmd = solver(&resume);
    cmd.current_dir("/");
    let (code, err) = Running::spawn(cmd).wait_exit(Duration::from_secs(120));
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("resuming SPH run"), "{err}");
    std::fs::remove_file(dir.join("pier.stl")).unwrap();
    let mut cmd = solver(&resume);
    cmd.current_dir("/");
    let (code, err) = Running::spawn(cmd).wait_exit(Duration::from_secs(60));
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("obstacles[0].stl") && err.contains("pier.stl"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A solid with a prescribed motion (a block sinking at 0.2 m/s above the still tank): the
/// frames carry its particles where the motion has them and with its velocity, and `--load-shm`
/// continues the run with the solid placed from its motion at the frame's time.
#[test]
fn a_moving_solid_is_published_and_resumes_where_its_motion_has_it() {
    let seg = SegName::new("sph-moving");
    let dir = std::env::temp_dir().join(format!("pshm-sph-moving-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let case = dir.join("block.toml");
    let text = e2e_tests::sph_tank_case(0.05)
        + "[[obstacles]]\nmin = [0.06, 0.02, 0.22]\nmax = [0.14, 0.08, 0.28]\n\
           motion = { type = \"translation\", velocity = [0.0, 0.0, -0.2] }\n";
    std::fs::write(&case, text).unwrap();
    let case_arg = case.to_string_lossy().to_string();
    // The block's 4 x 3 x 3 particles: boundary particles moving at (0, 0, -0.2) m/s, their
    // lattice sites (z 0.23, 0.25, 0.27 at rest) lowered by 0.2 t.
    let block = |f: &shm_protocol::Frame| {
        let t = f.meta.sim_time;
        let (pos, vel) = (
            f.positions.as_ref().unwrap(),
            f.velocities.as_ref().unwrap(),
        );
        let kind = f.particle_kinds.as_ref().unwrap();
        let moving: Vec<usize> = (0..pos.len())
            .filter(|&k| kind[k] == 2 && vel[k] == [0.0, 0.0, -0.2])
            .collect();
        assert_eq!(moving.len(), 36, "the block's particles at t = {t}");
        for &k in &moving {
            let rest = pos[k][2] as f64 + 0.2 * t;
            let site = ((rest - 0.01) / 0.02).round() * 0.02 + 0.01;
            assert!(
                (rest - site).abs() < 1e-5 && (0.22..0.28).contains(&site),
                "block particle {k} at z = {} at t = {t}",
                pos[k][2]
            );
        }
    };
    let first = [
        "--name-shm",
        &seg.0,
        "--case",
        &case_arg,
        "--backend",
        "cpu",
        "--keep-shm",
    ];
    let (code, err) = Running::spawn(solver(&first)).wait_exit(Duration::from_secs(120));
    assert_eq!(code, Some(0), "{err}");
    {
        let c = Consumer::attach(&seg.0).expect("attach");
        let f = c.read_newest().expect("read").expect("a frame");
        assert!((f.meta.sim_time - 0.05).abs() < 1e-9);
        block(&f);
    }
    let resume = [
        "--load-shm",
        &seg.0,
        "--backend",
        "cpu",
        "--end-time",
        "0.08",
        "--keep-shm",
    ];
    let (code, err) = Running::spawn(solver(&resume)).wait_exit(Duration::from_secs(120));
    assert_eq!(code, Some(0), "{err}");
    let c = Consumer::attach(&seg.0).expect("attach");
    let f = c.read_newest().expect("read").expect("a frame");
    assert!(
        (f.meta.sim_time - 0.08).abs() < 1e-9,
        "t = {}",
        f.meta.sim_time
    );
    block(&f);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A scratch folder removed on drop.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("pshm-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
    fn path(&self, name: &str) -> String {
        self.0.join(name).to_string_lossy().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The shipped dam break at dp = 8 cm (7,000 particles), written into `dir` with `extra`
/// appended.
fn coarse_dambreak(dir: &Scratch, extra: &str) -> String {
    let src =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../solver/cases/dambreak.toml");
    let text = std::fs::read_to_string(src).expect("dambreak.toml");
    assert!(text.contains("spacing = 0.04"), "the case's spacing moved");
    let case = dir.path("dambreak8.toml");
    std::fs::write(
        &case,
        format!(
            "{}\n{extra}",
            text.replace("spacing = 0.04", "spacing = 0.08")
        ),
    )
    .unwrap();
    case
}

/// The checkpoint files of `dir`, sorted (the first written first).
fn checkpoints(dir: &str) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.retain(|p| {
        let n = p.file_name().unwrap_or_default().to_string_lossy();
        n.starts_with("checkpoint-") && n.ends_with(".bin")
    });
    v.sort();
    v
}

/// Every field of the newest frames of two segments, bit for bit.
fn same_newest_frame(a: &str, b: &str) {
    let read = |n: &str| {
        Consumer::attach(n)
            .expect("attach")
            .read_newest()
            .expect("read")
            .expect("a frame")
    };
    same_sph_frame(&read(a), &format!("{a} and {b}"), &read(b));
}

/// `solver --subdomains 3` on an SPH case (CPU sub-domains in one process, bounds moving by
/// count) gives the last frame and every checkpoint of one process bit for bit; its middle
/// checkpoint continues on 2 sub-domains to the same final checkpoint; the case's
/// `[decomposition]` asks for the same; a cut the tank cannot take is a clear error that leaves
/// no segment behind.
#[test]
fn sph_sub_domains_give_the_frames_and_checkpoints_of_one_process() {
    let dir = Scratch::new("sphsub");
    let case = coarse_dambreak(&dir, "");
    let run = |tag: &str, extra: &[&str]| -> (SegName, String, String) {
        let seg = SegName::new(tag);
        let out = dir.path(tag);
        let mut args = vec![
            "--name-shm",
            &seg.0,
            "--backend",
            "cpu",
            "--end-time",
            "0.06",
            "--output",
            &out,
            "--checkpoint-every",
            "0.03",
            "--keep-shm",
            "--balance",
            "count",
            "--balance-every",
            "4",
        ];
        args.extend_from_slice(extra);
        let (code, err) = Running::spawn(solver(&args)).wait_exit(Duration::from_secs(300));
        assert_eq!(code, Some(0), "{tag}: {err}");
        (seg, out, err)
    };
    let (one, one_out, _) = run("sub1", &["--case", &case]);
    let (three, three_out, err) = run("sub3", &["--case", &case, "--subdomains", "3"]);
    assert!(err.contains("SPH on 3 CPU sub-domains"), "{err}");
    assert!(err.contains("moves)"), "the sub-domains' summaries: {err}");
    same_newest_frame(&one.0, &three.0);
    let (a, b) = (checkpoints(&one_out), checkpoints(&three_out));
    // At 0.03 s and at the end.
    assert_eq!(a.len(), 2, "{a:?}");
    assert_eq!(b.len(), a.len(), "{b:?}");
    for (x, y) in a.iter().zip(&b) {
        assert!(
            std::fs::read(x).unwrap() == std::fs::read(y).unwrap(),
            "{} and {} differ",
            x.display(),
            y.display()
        );
    }
    // The middle checkpoint of 3 sub-domains, continued on 2: the final checkpoint of one.
    let middle = b[0].to_string_lossy().to_string();
    let (_two, two_out, _) = run("sub2", &["--restart", &middle, "--subdomains", "2"]);
    let c = checkpoints(&two_out);
    assert_eq!(
        std::fs::read(c.last().unwrap()).unwrap(),
        std::fs::read(a.last().unwrap()).unwrap(),
        "restarted on 2 sub-domains: not the final checkpoint of one process"
    );
    // The case file can ask for the cut.
    let in_case = coarse_dambreak(
        &dir,
        "[decomposition]\nsubdomains = 2\nsplit_axis = \"x\"\n",
    );
    let seg = SegName::new("subcase");
    let (code, err) = Running::spawn(solver(&[
        "--name-shm",
        &seg.0,
        "--case",
        &in_case,
        "--backend",
        "cpu",
        "--end-time",
        "0.005",
    ]))
    .wait_exit(Duration::from_secs(120));
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("SPH on 2 CPU sub-domains"), "{err}");
    assert!(err.contains("along x"), "{err}");
    // Too many: refused before a step, the segment removed.
    let seg = SegName::new("subbad");
    let (code, err) = Running::spawn(solver(&[
        "--name-shm",
        &seg.0,
        "--case",
        &case,
        "--backend",
        "cpu",
        "--subdomains",
        "64",
    ]))
    .wait_exit(Duration::from_secs(60));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("use fewer sub-domains"), "{err}");
    assert!(
        !std::path::Path::new(&shm_protocol::shm_path(&seg.0)).exists(),
        "a refused run left its segment"
    );
}

/// Pause, publish now, checkpoint, resume and stop reach an SPH run on CPU sub-domains as they
/// reach one process: no step while paused, a checkpoint at the paused step, steps after
/// resume, and a clean exit on stop.
#[test]
fn commands_reach_an_sph_run_on_sub_domains() {
    use shm_protocol::{Command as Cmd, CommandOutcome};
    let dir = Scratch::new("sphsubcmd");
    let case = coarse_dambreak(&dir, "");
    let seg = SegName::new("subcmd");
    let out = dir.path("out");
    let mut running = Running::spawn(solver(&[
        "--name-shm",
        &seg.0,
        "--case",
        &case,
        "--backend",
        "cpu",
        "--subdomains",
        "3",
        "--end-time",
        "100",
        "--output",
        &out,
    ]));
    let mut c = poll(Duration::from_secs(60), || {
        Consumer::attach(&seg.0)
            .ok()
            .filter(|c| c.read_newest().ok().flatten().is_some())
    })
    .expect("the run's first frame");
    let t = Duration::from_secs(30);
    let done = |o: CommandOutcome| match o {
        CommandOutcome::Done(s) => s,
        CommandOutcome::Rejected(why) => panic!("rejected: {why}"),
    };
    let newest = |c: &Consumer| c.read_newest().expect("read").expect("a frame").meta.step;
    done(c.send(&Cmd::Pause, t).expect("pause"));
    done(c.send(&Cmd::UpdateNow, t).expect("update"));
    let paused = newest(&c);
    std::thread::sleep(Duration::from_millis(500));
    done(c.send(&Cmd::UpdateNow, t).expect("update"));
    assert_eq!(newest(&c), paused, "steps go on while paused");
    let path = done(c.send(&Cmd::Checkpoint, t).expect("checkpoint"));
    assert!(std::path::Path::new(&path).is_file(), "checkpoint {path}");
    assert!(
        path.ends_with(&format!("checkpoint-{paused:09}.bin")),
        "{path}: not at the paused step {paused}"
    );
    done(c.send(&Cmd::Resume, t).expect("resume"));
    assert!(
        poll(Duration::from_secs(30), || (newest(&c) > paused)
            .then_some(()))
        .is_some(),
        "no step after resume"
    );
    done(c.send(&Cmd::Stop, t).expect("stop"));
    let start = std::time::Instant::now();
    let status = loop {
        if let Ok(Some(s)) = running.0.try_wait() {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no exit after stop"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "stop must end the run cleanly ({status})");
    assert!(
        !std::path::Path::new(&shm_protocol::shm_path(&seg.0)).exists(),
        "segment removed on a clean stop"
    );
}
