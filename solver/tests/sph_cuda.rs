//! The SPH GPU backend (`solver::sph::cuda`) against the CPU reference (`solver::sph::cpu`):
//! in the parity mode (f64, no FMA) every step has the CPU's bits, state and time step, for
//! both kernels and every density diffusion; in float the collapse follows the CPU; checkpoints
//! move between the two backends. Runs where an NVIDIA driver loads; elsewhere (CI) each test
//! prints "skipped: no GPU" and passes.

#[path = "support/sph.rs"]
mod sph;

use solver::core::geometry::cylinder_triangles;
use solver::core::stl::write_binary_stl;
use solver::sph::cpu::{SphSim, SphState};
use solver::sph::cuda::{FrameArray, SphCuda, SphCudaOptions, SphGpu};
use solver::sph::physics;
use solver::sph::setup::{IntegratorName, SphCase, KIND_FLUID};
use sph::{assert_same_bits, column, column_text, gpu, DOUBLE};

/// f64 GPU = CPU bit for bit, step by step (the time step too), for the Wendland and cubic
/// spline kernels, each density diffusion and a boundary viscosity of its own; and the packed
/// frame is the CPU state in f32.
#[test]
fn f64_gpu_steps_have_the_cpu_bits() {
    if !gpu() {
        return;
    }
    for extra in [
        "",
        "kernel = \"cubic_spline\"\ndiffusion = \"molteni\"",
        "diffusion = \"none\"\nviscosity = 0.02",
        "viscosity_boundary_factor = 0.5",
        "boundary = \"mdbc\"",
        "integrator = \"verlet\"",
        "integrator = \"verlet\"\nverlet_steps = 7\nboundary = \"mdbc\"",
    ] {
        let case = column(extra);
        let c = case.constants().unwrap();
        let p = case.particles(&c).unwrap();
        let mut cpu = SphSim::new(c.clone(), p.clone());
        let mut gpu = SphCuda::new(c.clone(), p, DOUBLE).expect("GPU backend starts");
        for step in 0..80 {
            cpu.step();
            gpu.step().expect("GPU step");
            assert_eq!(
                cpu.dt().to_bits(),
                gpu.dt().to_bits(),
                "[{extra}] next dt after step {step}: cpu {} gpu {}",
                cpu.dt(),
                gpu.dt()
            );
        }
        let g = gpu.state().unwrap();
        assert!(
            g.vel.iter().any(|v| v[0] > 0.05),
            "[{extra}] the column must be collapsing"
        );
        assert_same_bits(&cpu.s, &g, extra);
        // The frame: id order, f32 of the state, pressure from the density.
        let n = g.pos.len();
        let (mut pos, mut vel) = (vec![[0f32; 3]; n], vec![[0f32; 3]; n]);
        let (mut rho, mut pr) = (vec![0f32; n], vec![0f32; n]);
        gpu.pack_frame().unwrap();
        gpu.frame_vec3(FrameArray::Position, &mut pos).unwrap();
        gpu.frame_vec3(FrameArray::Velocity, &mut vel).unwrap();
        gpu.frame_scalar(FrameArray::Density, &mut rho).unwrap();
        gpu.frame_scalar(FrameArray::Pressure, &mut pr).unwrap();
        for k in 0..n {
            assert_eq!(pos[k], cpu.s.pos[k].map(|x| x as f32), "frame position {k}");
            assert_eq!(vel[k], cpu.s.vel[k].map(|x| x as f32), "frame velocity {k}");
            assert_eq!(rho[k], cpu.s.rho[k] as f32, "frame density {k}");
            assert_eq!(pr[k], cpu.pressure(k) as f32, "frame pressure {k}");
        }
        println!("[{extra}] 80 steps, {n} particles: identical bits");
    }
}

/// A checkpoint written from the GPU continues on the CPU and on the GPU with the bits of the
/// uninterrupted CPU run (the file is the same for both backends).
#[test]
fn checkpoints_move_between_cpu_and_gpu() {
    if !gpu() {
        return;
    }
    for extra in ["", "integrator = \"verlet\"\nverlet_steps = 9"] {
        checkpoint_moves(extra);
    }
}

fn checkpoint_moves(extra: &str) {
    let case = column(extra);
    let c = case.constants().unwrap();
    let p = case.particles(&c).unwrap();
    let mut reference = SphSim::new(c.clone(), p.clone());
    let mut gpu = SphCuda::new(c.clone(), p, DOUBLE).unwrap();
    for _ in 0..30 {
        reference.step();
        gpu.step().unwrap();
    }
    let path = std::env::temp_dir().join(format!("sph-gpu-ckpt-{}.bin", std::process::id()));
    let text = column_text(extra);
    solver::sph::checkpoint::save_state(&path, &text, gpu.state().unwrap(), gpu.dt()).unwrap();
    let r = solver::sph::checkpoint::load_state(&path).unwrap();
    std::fs::remove_file(&path).ok();
    assert_eq!(r.case_toml, text);
    assert_eq!(r.constants, c);
    let (state, dt) = (r.state, r.dt);
    let mut on_cpu = SphSim::from_state(c.clone(), state.clone(), dt);
    let mut on_gpu = SphCuda::from_state(c.clone(), state, dt, DOUBLE).unwrap();
    for _ in 0..30 {
        reference.step();
        on_cpu.step();
        on_gpu.step().unwrap();
    }
    assert_same_bits(
        &reference.s,
        &on_cpu.s,
        "GPU checkpoint continued on the CPU",
    );
    assert_same_bits(
        &reference.s,
        &on_gpu.state().unwrap(),
        "GPU checkpoint continued on the GPU",
    );
}

/// In float (the default mode) the collapse follows the CPU reference with either integrator
/// (float mode updates each particle inside the rates kernel): the surge front within 3 % of the
/// CPU's at T = 1.5 and 2.5, no particle leaves the tank, the fluid count holds.
#[test]
fn f32_gpu_collapse_follows_the_cpu() {
    if !gpu() {
        return;
    }
    for extra in ["", "integrator = \"verlet\"\nverlet_steps = 11"] {
        f32_collapse(extra);
    }
}

fn f32_collapse(extra: &str) {
    let case = column(extra);
    let c = case.constants().unwrap();
    let p = case.particles(&c).unwrap();
    let mut cpu = SphSim::new(c.clone(), p.clone());
    let mut gpu = SphCuda::new(c.clone(), p, SphCudaOptions::default()).unwrap();
    let a = 0.1;
    let front = |s: &SphState| {
        (0..s.pos.len())
            .filter(|&k| s.kind[k] == KIND_FLUID)
            .map(|k| s.pos[k][0])
            .fold(f64::NEG_INFINITY, f64::max)
    };
    for big_t in [1.5, 2.5] {
        let t = big_t / (2.0f64 * 9.81 / a).sqrt();
        cpu.run_to(t);
        gpu.run_to(t).unwrap();
        let g = gpu.state().unwrap();
        let (fc, fg) = (front(&cpu.s), front(&g));
        println!(
            "{extra:?} T = {big_t}: front cpu {fc:.4} m, gpu (f32) {fg:.4} m ({:+.2} %), steps {} / {}",
            100.0 * (fg - fc) / fc,
            cpu.s.step,
            g.step
        );
        assert!((fg - fc).abs() < 0.03 * fc, "front {fg} vs {fc}");
        for k in 0..g.pos.len() {
            let q = g.pos[k];
            assert!(
                (0..3)
                    .all(|ax| q[ax] > case.domain.min[ax] - 0.05
                        && q[ax] < case.domain.max[ax] + 0.05),
                "particle {k} left the tank: {q:?}"
            );
            assert!(g.rho[k].is_finite() && g.rho[k] > 0.5 * c.rho0);
        }
        let p_mid = physics::tait_pressure(g.rho[0], c.rho0, c.b);
        assert!(p_mid.is_finite());
    }
}

/// Frames published while the run goes on (one GPU, float mode as a run publishes: the fluid
/// packed by the next step's first gather, the copy to the host beside the rest of that step)
/// hold the state of the step they were taken at, and publishing changes no step: every frame
/// of a run that publishes after each step against a twin that does not, for both integrators
/// on the dam break at about 1 M particles (whose copy takes long enough to still run while the
/// next step's kernels start), mDBC walls and moving solids. Every fifth frame is waited for
/// before any step (as a paused run or a requested frame does): packed at once, the same values.
/// The fixed walls' positions and velocities are staged on the device by the first frame only.
#[test]
fn frames_published_beside_the_steps_are_their_steps_state() {
    if !gpu() {
        return;
    }
    let float = SphCudaOptions {
        device: 0,
        double: false,
    };
    let mut cases = Vec::new();
    for integrator in [IntegratorName::Symplectic, IntegratorName::Verlet] {
        let mut case = solver::bench_cases::sph_dambreak(0.0114, 1.5);
        case.sph.integrator = integrator;
        cases.push((format!("dam break, {integrator:?}"), case));
    }
    cases.push((
        "column, mDBC, Verlet".to_string(),
        column("boundary = \"mdbc\"\nintegrator = \"verlet\""),
    ));
    cases.push((
        "column, moving solids".to_string(),
        SphCase::from_toml_str(&moving_column_text()).expect("the moving column parses"),
    ));
    for (what, case) in cases {
        let c = case.constants().unwrap();
        let p = case.particles(&c).unwrap();
        let mut a = SphCuda::new(c.clone(), p.clone(), float).expect("GPU backend starts");
        let mut b = SphCuda::new(c, p, float).expect("GPU backend starts");
        let n = a.particle_count();
        let (mut pos, mut vel) = (vec![[0f32; 3]; n], vec![[0f32; 3]; n]);
        let (mut rho, mut pr) = (vec![0f32; n], vec![0f32; n]);
        let regs = [
            (pos.as_mut_ptr() as *mut u8, 12 * n),
            (vel.as_mut_ptr() as *mut u8, 12 * n),
            (rho.as_mut_ptr() as *mut u8, 4 * n),
            (pr.as_mut_ptr() as *mut u8, 4 * n),
        ];
        let mut keep = Vec::new();
        for (ptr, len) in regs {
            // SAFETY: the vectors outlive the registrations (dropped below, before them).
            keep.push(unsafe { solver::dem::cuda::register_host(a.context(), ptr, len) }.unwrap());
        }
        let targets = regs.map(|r| r.0);
        let (rho0, tait_b) = (a.c.rho0, a.c.b);
        let check = |e: &SphState| {
            // SAFETY: the copy is complete; the host reads the registered vectors only now.
            let (pos, vel, rho, pr) = unsafe {
                (
                    std::slice::from_raw_parts(targets[0] as *const [f32; 3], n),
                    std::slice::from_raw_parts(targets[1] as *const [f32; 3], n),
                    std::slice::from_raw_parts(targets[2] as *const f32, n),
                    std::slice::from_raw_parts(targets[3] as *const f32, n),
                )
            };
            for k in 0..n {
                assert!(
                    pos[k] == e.pos[k].map(|x| x as f32)
                        && vel[k] == e.vel[k].map(|x| x as f32)
                        && rho[k] == e.rho[k] as f32,
                    "[{what}] the frame after step {} differs from its state at particle {k}",
                    e.step
                );
                // The device's Tait pressure is of the f32 density.
                let p = physics::tait_pressure(e.rho[k], rho0, tait_b);
                assert!(
                    (f64::from(pr[k]) - p).abs() <= 1e-5 * tait_b,
                    "[{what}] the frame after step {}: pressure {} against {p} at particle {k}",
                    e.step,
                    pr[k]
                );
            }
        };
        let mut expect: Option<SphState> = None;
        for step in 0..=30 {
            a.step().unwrap();
            b.step().unwrap();
            if let Some(e) = expect.take() {
                // The frame of the step before: its fluid packed by this step's first gather,
                // the copy beside the rest of this step.
                a.publish_wait().unwrap();
                check(&e);
            }
            if step < 30 {
                let e = b.state().unwrap();
                // Every frame's copy brings the whole frame, the parts staged on the device
                // once (the fixed boundary's positions and velocities) too: the host side is
                // poisoned (NaN) before each.
                for (ptr, len) in regs {
                    // SAFETY: no copy is in flight (each frame was waited for above); the
                    // registered vectors hold `len` bytes at `ptr`.
                    unsafe { std::ptr::write_bytes(ptr, 0xff, len) };
                }
                // SAFETY: the targets hold n elements each; the host reads them only after
                // publish_wait.
                unsafe { a.publish_async(targets) }.unwrap();
                assert!(
                    !a.publish_done().unwrap(),
                    "[{what}] a frame is not complete before it was packed"
                );
                if step % 5 == 4 {
                    a.publish_wait().unwrap();
                    check(&e);
                } else {
                    expect = Some(e);
                }
            }
        }
        assert_same_bits(&b.state().unwrap(), &a.state().unwrap(), &what);
        drop(keep);
        println!("[{what}] {n} particles: 30 frames, each its step's state; the same steps");
    }
}

/// The column with two moving solids: a paddle turning at 60 rpm about a y axis right beside
/// the water, and a block sinking at 0.1 m/s towards it.
fn moving_column_text() -> String {
    moving_column_text_with("")
}

fn moving_column_text_with(extra: &str) -> String {
    column_text(extra)
        + r#"
[[obstacles]]
min = [0.11, 0.0, 0.03]
max = [0.15, 0.05, 0.07]
motion = { type = "rotation", axis_point = [0.13, 0.025, 0.05], axis_direction = [0.0, 1.0, 0.0], rpm = 60.0 }
[[obstacles]]
min = [0.2, 0.0, 0.15]
max = [0.24, 0.05, 0.19]
motion = { type = "translation", velocity = [0.0, 0.0, -0.1] }
"#
}

/// Moving solids: the f64 GPU places, sorts and sums them with the CPU's bits, step by step
/// (the boundary re-sorted on the device at each evaluation, its velocities in the pair terms),
/// the frame carries their velocities, and a checkpoint taken while they move continues on the
/// GPU with the bits of the uninterrupted CPU run.
#[test]
fn f64_gpu_moving_solids_have_the_cpu_bits() {
    if !gpu() {
        return;
    }
    // The solids alone, then with the tank rocking too (every boundary particle moves, the
    // walls partly out of the grid built at rest).
    let rocking = moving_column_text().replace(
        "max = [0.3, 0.05, 0.25]\n",
        "max = [0.3, 0.05, 0.25]\nmotion = { type = \"rocking\", axis_point = [0.15, 0.0, 0.0], \
         axis_direction = [0.0, 1.0, 0.0], amplitude_deg = 3.0, frequency = 2.0 }\n",
    );
    // And with mDBC walls: the ghost nodes of the turning paddle, the sinking block and the
    // rocking tank move with their solids.
    let rocking_mdbc = rocking.replace("[sph]\n", "[sph]\nboundary = \"mdbc\"\n");
    assert_ne!(rocking_mdbc, rocking);
    // And the paddle as a short cylinder from an STL (mDBC's nodes through the closest point
    // of its surface, turning with it).
    let dir = std::env::temp_dir().join(format!("sph-gpu-stl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let stl = dir.join("paddle.stl");
    let tris = cylinder_triangles([0.13, 0.025, 0.03], 0.02, 0.04, 24);
    write_binary_stl(&stl, &tris).unwrap();
    let paddle_stl = moving_column_text_with("boundary = \"mdbc\"").replace(
        "min = [0.11, 0.0, 0.03]\nmax = [0.15, 0.05, 0.07]\n",
        &format!("stl = \"{}\"\n", stl.display()),
    );
    assert!(paddle_stl.contains("paddle.stl"));
    for (text, solids) in [
        (moving_column_text(), 2),
        (rocking, 3),
        (moving_column_text_with("boundary = \"mdbc\""), 2),
        (rocking_mdbc.clone(), 3),
        (paddle_stl, 2),
        // The Verlet integrator with all of it but the STL.
        (
            rocking_mdbc.replace("[sph]\n", "[sph]\nintegrator = \"verlet\"\n"),
            3,
        ),
    ] {
        moving_parity(&text, solids);
    }
    std::fs::remove_dir_all(&dir).ok();
}

fn moving_parity(text: &str, solids: usize) {
    let case = solver::sph::setup::SphCase::from_toml_str(text).unwrap();
    let c = case.constants().unwrap();
    let p = case.particles(&c).unwrap();
    assert_eq!(p.moving.motions.len(), solids);
    let mut cpu = SphSim::new(c.clone(), p.clone());
    let mut gpu = SphCuda::new(c.clone(), p.clone(), DOUBLE).expect("GPU backend starts");
    for step in 0..120 {
        cpu.step();
        gpu.step().expect("GPU step");
        assert_eq!(
            cpu.dt().to_bits(),
            gpu.dt().to_bits(),
            "next dt after step {step}"
        );
    }
    let g = gpu.state().unwrap();
    assert_same_bits(&cpu.s, &g, "moving solids");
    let paddle = p.moving.ids[0] as usize;
    assert!(
        cpu.s.vel[paddle] != [0.0; 3] && cpu.s.pos[paddle] != p.pos[paddle],
        "the paddle turns"
    );
    let n = g.pos.len();
    let mut vel = vec![[0f32; 3]; n];
    gpu.pack_frame().unwrap();
    gpu.frame_vec3(FrameArray::Velocity, &mut vel).unwrap();
    for (k, v) in vel.iter().enumerate() {
        assert_eq!(*v, cpu.s.vel[k].map(|x| x as f32), "frame velocity {k}");
    }
    // A checkpoint of the moving run, continued on the GPU.
    let path = std::env::temp_dir().join(format!("sph-gpu-moving-{}.bin", std::process::id()));
    solver::sph::checkpoint::save_state(&path, text, g, gpu.dt()).unwrap();
    let r = solver::sph::checkpoint::load_state(&path).unwrap();
    std::fs::remove_file(&path).ok();
    let moving = r.moving_solids(&path).unwrap();
    let mut on_gpu = SphCuda::from_state_moving(c, r.state, r.dt, DOUBLE, moving).unwrap();
    for _ in 0..40 {
        cpu.step();
        on_gpu.step().unwrap();
    }
    assert_same_bits(
        &cpu.s,
        &on_gpu.state().unwrap(),
        "moving checkpoint on the GPU",
    );
    println!("120 + 40 steps, {n} particles, {solids} moving solids: identical bits");
}

/// In float, a moving solid stirs the water as on the CPU: after 0.3 s of the paddle the fluid's
/// mean velocity agrees with the CPU's within 5 % of its size.
#[test]
fn f32_gpu_moving_solids_follow_the_cpu() {
    if !gpu() {
        return;
    }
    let case = solver::sph::setup::SphCase::from_toml_str(&moving_column_text()).unwrap();
    let c = case.constants().unwrap();
    let p = case.particles(&c).unwrap();
    let mut cpu = SphSim::new(c.clone(), p.clone());
    let opts = SphCudaOptions {
        device: 0,
        double: false,
    };
    let mut gpu = SphCuda::new(c, p, opts).unwrap();
    cpu.run_to(0.3);
    gpu.run_to(0.3).unwrap();
    let g = gpu.state().unwrap();
    let mean = |s: &SphState| {
        let mut m = [0.0; 3];
        let mut n = 0.0;
        for k in 0..s.pos.len() {
            if s.kind[k] == KIND_FLUID {
                for (m, v) in m.iter_mut().zip(s.vel[k]) {
                    *m += v;
                }
                n += 1.0;
            }
        }
        m.map(|x| x / n)
    };
    let (a, b) = (mean(&cpu.s), mean(&g));
    let size = a.iter().map(|x| x * x).sum::<f64>().sqrt();
    let diff = (0..3).map(|k| (a[k] - b[k]).powi(2)).sum::<f64>().sqrt();
    println!("mean fluid velocity: cpu {a:?} gpu {b:?} (difference {diff:.2e}, size {size:.2e})");
    assert!(size > 0.05, "the water moves");
    assert!(diff < 0.05 * size, "cpu {a:?} gpu {b:?}");
}
