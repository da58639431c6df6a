//! SPH on several GPUs (`solver::sph::cuda::SphGroup`) against one GPU: the same bits, every
//! step and every time step, for any number of slabs, split axis and balancing (the bounds move
//! while the dam breaks); frames and checkpoints are the one-GPU run's. Slabs given the same
//! device ordinal run on one GPU (the exchange is the same device-to-device copy), so this runs
//! wherever one NVIDIA GPU is; elsewhere (CI) each test prints "skipped: no GPU" and passes.

#[path = "common/mod.rs"]
mod common;
#[path = "support/run_solver.rs"]
mod run;
#[path = "support/sph.rs"]
mod sph;

use solver::decomp::{Axis, Balance};
use solver::sph::cpu::{first_time_step, sph_grid, sph_layer_of, sph_reach, SphSim, SphState};
use solver::sph::cuda::{FrameArray, SphCuda, SphCudaOptions, SphGpu, SphGroup, SphGroupOptions};
use solver::sph::setup::{SphCase, SphConstants, SphParticles};
use solver::sph::slabs::owner_of;
use solver::sph::slabs::{FirstCut, SlabOptions};
use sph::{assert_same_bits, gpu};

/// A dam 0.15 m wide and 0.2 m high breaking along a 0.6 m tank (dp = 1 cm: 22 cell layers
/// along x): the fluid crosses every slab bound.
const DAM: &str = r#"
method = "sph"
dt = 1e-3
end_time = 1.0
[domain]
min = [0.0, 0.0, 0.0]
max = [0.6, 0.05, 0.25]
[sph]
spacing = 0.01
[[fluid]]
min = [0.0, 0.0, 0.0]
max = [0.15, 0.05, 0.2]
"#;

fn dam() -> (SphConstants, SphState) {
    dam_of(DAM)
}

fn dam_of(text: &str) -> (SphConstants, SphState) {
    let case = SphCase::from_toml_str(text).unwrap_or_else(|e| panic!("{e}"));
    let c = case.constants().unwrap();
    let p = case.particles(&c).unwrap();
    let n = p.pos.len();
    let state = SphState {
        time: 0.0,
        step: 0,
        kind: p.kind,
        pos: p.pos,
        vel: vec![[0.0; 3]; n],
        rho: p.rho,
        prev: None,
    };
    (c, state)
}

/// GPUs the slabs run on, in turn: `PARTICLE_SHM_TEST_DEVICES` (e.g. `0,1` on a two-GPU
/// machine; default GPU 0 for every slab).
fn slab_devices(slabs: usize) -> Vec<usize> {
    let list = common::test_devices();
    (0..slabs).map(|i| list[i % list.len()]).collect()
}

fn group_opts(slabs: usize, double: bool, axis: Option<Axis>, balance: Balance) -> SphGroupOptions {
    SphGroupOptions {
        devices: slab_devices(slabs),
        double,
        slabs: SlabOptions {
            axis,
            // Count balancing from a cut of equal counts moves the bounds as the dam breaks
            // (the bits are tested while they move); from the default cut of equal estimated
            // work this small dam has nothing to move. The other balancings start from the
            // default.
            first_cut: if balance == Balance::Count {
                FirstCut::Count
            } else {
                FirstCut::Work
            },
            balance,
            interval: 10,
            threshold: None,
        },
        // No spare slots: every GPU grows its arrays as the dam flows to it.
        spare_slots: 0,
        classify_in_rates: false,
        overlap: true,
    }
}

/// Steps one GPU and a group side by side: the next time step after every step and the whole
/// state every 100 steps have the same bits.
fn same_run(double: bool, opts: SphGroupOptions, steps: u64) -> SphGroup {
    same_run_of(DAM, double, opts, steps)
}

/// [`same_run`] on the case `text`.
fn same_run_of(text: &str, double: bool, opts: SphGroupOptions, steps: u64) -> SphGroup {
    let (c, state) = dam_of(text);
    let dt = first_time_step(&c);
    let what = format!("{opts:?}");
    let one = SphCudaOptions { device: 0, double };
    let mut single = SphCuda::from_state(c.clone(), state.clone(), dt, one).expect("one GPU");
    let mut group = SphGroup::from_state(c, state, dt, opts).expect("the group starts");
    let first = group.bounds().to_vec();
    let slots0 = group.fluid_slots();
    for step in 1..=steps {
        single.step().expect("one GPU step");
        group.step().expect("group step");
        assert_eq!(
            single.dt().to_bits(),
            group.dt().to_bits(),
            "{what}: next dt after step {step}"
        );
        if step % 100 == 0 || step == steps {
            let (a, b) = (single.state().unwrap(), group.state().unwrap());
            assert_same_bits(&a, &b, &format!("{what} at step {step}"));
        }
    }
    let s = single.state().unwrap();
    assert!(
        s.vel.iter().any(|v| v[0] > 0.3),
        "{what}: the dam must be breaking"
    );
    println!(
        "{what}: {steps} steps identical; bounds {first:?} -> {:?}, {} rebalances, {} records sent, fluid slots {slots0:?} -> {:?}",
        group.bounds(),
        group.rebalances(),
        group.records_sent(),
        group.fluid_slots()
    );
    assert!(
        group.fluid_slots().iter().zip(&slots0).any(|(a, b)| a > b),
        "{what}: some GPU must have grown its arrays"
    );
    assert!(group.records_sent() > 0, "{what}: nothing crossed a bound");
    group
}

/// f64: two and three slabs along x, two along z, with every balancing: one GPU's bits.
#[test]
fn f64_group_steps_have_one_gpus_bits() {
    if !gpu() {
        return;
    }
    let g = same_run(true, group_opts(2, true, None, Balance::Count), 400);
    assert!(
        g.rebalances() > 0,
        "counts must move the bound as the dam breaks"
    );
    same_run(true, group_opts(3, true, None, Balance::Neighbour), 300);
    same_run(
        true,
        group_opts(3, true, Some(Axis::X), Balance::Slice),
        300,
    );
    let g = same_run(true, group_opts(2, true, Some(Axis::Z), Balance::Off), 300);
    // The parity mode updates the fluid after the boundary's rates: nothing to start early.
    assert_eq!(g.overlapped_exchanges(), 0);
}

/// Float (the default mode): the same kernels sum the same neighbours in the same order, so
/// the group has one GPU's bits here too, with either integrator (each particle updated inside
/// the rates kernel, only the slab's own).
#[test]
fn f32_group_steps_have_one_gpus_bits() {
    if !gpu() {
        return;
    }
    let verlet = DAM.replace(
        "[sph]\n",
        "[sph]\nintegrator = \"verlet\"\nverlet_steps = 13\n",
    );
    assert!(verlet.contains("verlet_steps"));
    // Classified before each exchange, and by the rates kernel before it (the records, the
    // kept flags and counts are the same; the records' order in the buffers is not, and the
    // sort orders each cell by x and id whatever their order); each exchange after the
    // evaluation's every kernel, or started as soon as the fluid's kernel ended, its copies and
    // unpack beside the boundary's rates (and, where a GPU must grow its arrays, as these
    // groups without spare slots do, after them).
    for (classify_in_rates, overlap) in [(false, false), (true, false), (false, true), (true, true)]
    {
        let opts = |balance| SphGroupOptions {
            classify_in_rates,
            overlap,
            ..group_opts(2, false, None, balance)
        };
        for g in [
            same_run(false, opts(Balance::Time), 400),
            same_run_of(&verlet, false, opts(Balance::Count), 400),
        ] {
            // All but the first exchange and those after a move of the bounds, or none.
            let made = g.classified_in_rates();
            assert_eq!(
                made > 0,
                classify_in_rates,
                "{made} classified in the rates kernels"
            );
            let early = g.overlapped_exchanges();
            assert_eq!(early > 0, overlap, "{early} exchanges started early");
        }
    }
}

/// The group's frame is one GPU's (id order, every particle once), and its state continues on
/// one GPU (a checkpoint) with the bits of the uninterrupted group.
#[test]
fn frames_and_checkpoints_of_a_group_are_one_gpus() {
    if !gpu() {
        return;
    }
    let (c, state) = dam();
    let dt = first_time_step(&c);
    let one = SphCudaOptions {
        device: 0,
        double: true,
    };
    let mut single = SphCuda::from_state(c.clone(), state.clone(), dt, one).unwrap();
    let mut group = SphGroup::from_state(
        c.clone(),
        state,
        dt,
        group_opts(3, true, None, Balance::Count),
    )
    .unwrap();
    single.run_to(0.05).unwrap();
    group.run_to(0.05).unwrap();
    let n = group.particle_count();
    assert_eq!(
        group.owned_counts().unwrap().iter().sum::<usize>(),
        n,
        "every particle owned once"
    );
    single.pack_frame().unwrap();
    group.pack_frame().unwrap();
    for a in [FrameArray::Position, FrameArray::Velocity] {
        let (mut x, mut y) = (vec![[0f32; 3]; n], vec![[0f32; 3]; n]);
        single.frame_vec3(a, &mut x).unwrap();
        group.frame_vec3(a, &mut y).unwrap();
        assert!(x == y, "frame {a:?}");
    }
    for a in [FrameArray::Density, FrameArray::Pressure] {
        let (mut x, mut y) = (vec![0f32; n], vec![0f32; n]);
        single.frame_scalar(a, &mut x).unwrap();
        group.frame_scalar(a, &mut y).unwrap();
        assert!(
            x.iter().zip(&y).all(|(a, b)| a.to_bits() == b.to_bits()),
            "frame {a:?}"
        );
    }
    // Group -> one GPU, one GPU -> group.
    let mut from_group = SphCuda::from_state(c.clone(), group.state().unwrap(), group.dt(), one)
        .expect("one GPU from the group's state");
    let mut to_group = SphGroup::from_state(
        c.clone(),
        single.state().unwrap(),
        single.dt(),
        group_opts(2, true, None, Balance::Off),
    )
    .expect("a group from one GPU's state");
    for _ in 0..50 {
        single.step().unwrap();
        from_group.step().unwrap();
        to_group.step().unwrap();
    }
    let s = single.state().unwrap();
    assert_same_bits(&s, &from_group.state().unwrap(), "group state on one GPU");
    assert_same_bits(&s, &to_group.state().unwrap(), "one GPU's state on a group");
}

/// More slabs than the layers allow: a clear error, nothing started.
#[test]
fn too_many_slabs_for_the_layers_is_an_error() {
    if !gpu() {
        return;
    }
    let (c, state) = dam();
    let dt = first_time_step(&c);
    let err = SphGroup::from_state(c, state, dt, group_opts(12, true, None, Balance::Off))
        .err()
        .expect("12 slabs of 3 layers do not fit about 17 layers");
    let msg = err.to_string();
    assert!(msg.contains("12 GPUs") && msg.contains("layers"), "{msg}");
}

/// What a user sees: `solver --devices 0,0` (two slabs; `0,1` with PARTICLE_SHM_TEST_DEVICES) writes the checkpoint of
/// `solver --devices 0`, bit for bit (the default float mode), and says where its slabs are.
#[test]
fn the_solver_on_two_slabs_writes_one_gpus_checkpoint() {
    if !gpu() {
        return;
    }
    let dir = run::scratch_dir("sph-group");
    let case = dir.join("dam.toml");
    std::fs::write(&case, DAM).unwrap();
    let mut restored = Vec::new();
    let two = slab_devices(2)
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join(",");
    for (tag, devices) in [("one", "0"), ("two", two.as_str())] {
        let out = dir.join(tag);
        let name = run::unique_name(tag);
        let args = [
            "--backend",
            "cuda",
            "--devices",
            devices,
            "--case",
            case.to_str().unwrap(),
            "--end-time",
            "0.05",
            "--output",
            out.to_str().unwrap(),
            "--checkpoint-every",
            "0.05",
            "--name-shm",
            &name,
        ];
        let o = run::run_solver(&args, std::time::Duration::from_secs(120));
        assert_eq!(o.code, Some(0), "--devices {devices}: {}", o.stderr);
        if tag == "two" {
            assert!(o.stderr.contains("slabs [0, "), "{}", o.stderr);
        }
        restored.push(solver::sph::checkpoint::load_state(&out.join("checkpoint.bin")).unwrap());
    }
    std::fs::remove_dir_all(&dir).ok();
    let (a, b) = (&restored[0], &restored[1]);
    assert!(a.state.step > 100, "the run took {} steps", a.state.step);
    assert_eq!(a.dt.to_bits(), b.dt.to_bits(), "next time step");
    assert_same_bits(&a.state, &b.state, "checkpoint of --devices 0,0");
}

/// A case's constants, particles, first step and state at t = 0.
fn start_of(text: &str) -> (SphConstants, SphParticles, f64, SphState) {
    let case = SphCase::from_toml_str(text).unwrap_or_else(|e| panic!("{e}"));
    let c = case.constants().unwrap();
    let p = case.particles(&c).unwrap();
    let dt = first_time_step(&c);
    let state = SphState::initial(&p);
    (c, p, dt, state)
}

/// One step of the CPU reference and of `group` side by side: the next time step has the same
/// bits after it, and the whole state every 50 steps (then true).
fn step_beside(cpu: &mut SphSim, group: &mut SphGroup, step: u64, what: &str) -> bool {
    cpu.step();
    group.step().expect("group step");
    assert_eq!(
        cpu.dt().to_bits(),
        group.dt().to_bits(),
        "{what}: next dt after step {step}"
    );
    let check = step.is_multiple_of(50);
    if check {
        assert_same_bits(
            &cpu.s,
            &group.state().unwrap(),
            &format!("{what} at step {step}"),
        );
    }
    check
}

/// f64, moving solids ([`sph::rocking_blade_text`] at dp = 2 cm): two and three slabs along x
/// (bounds moving by count) give the CPU reference's bits every 50 steps and the same next time step after every step, while the blade's
/// particles cross the bounds (each slab places every moving particle and takes the density of
/// those another slab integrated).
#[test]
fn f64_group_with_moving_solids_has_the_cpu_bits() {
    if !gpu() {
        return;
    }
    let case =
        SphCase::from_toml_str(&sph::rocking_blade_text(0.02)).unwrap_or_else(|e| panic!("{e}"));
    let c = case.constants().unwrap();
    let p = case.particles(&c).unwrap();
    assert!(!p.moving.is_empty(), "the case must move");
    let dt = first_time_step(&c);
    let state = SphState::initial(&p);
    for slabs in [2, 3] {
        let what = format!("{slabs} slabs, moving solids");
        let mut cpu = SphSim::from_state_moving(c.clone(), state.clone(), dt, p.moving.clone());
        let opts = group_opts(slabs, true, Some(Axis::X), Balance::Count);
        let mut group =
            SphGroup::from_state_moving(c.clone(), state.clone(), dt, p.moving.clone(), opts)
                .expect("the group starts");
        let first = group.bounds().to_vec();
        let (grid, reach) = {
            let g = sph_grid(&c, &p.moving.at_rest(&state.pos), &state.kind);
            let r = sph_reach(&c, &g);
            (g, r)
        };
        let slab_of = |s: &SphState, b: &[u32]| -> Vec<usize> {
            p.moving
                .ids
                .iter()
                .map(|&k| owner_of(b, sph_layer_of(&grid, s.pos[k as usize], 0, reach)))
                .collect()
        };
        let mut changed = 0;
        for step in 1..=800u64 {
            let bounds = group.bounds().to_vec();
            let before = slab_of(&cpu.s, &bounds);
            step_beside(&mut cpu, &mut group, step, &what);
            // Under the same bounds: a particle's own move, not a move of the bounds.
            let after = slab_of(&cpu.s, &bounds);
            changed += before.iter().zip(&after).filter(|(a, b)| a != b).count();
        }
        println!(
            "{what}: 800 steps (t = {:.3} s) with the CPU's bits; bounds {first:?} -> {:?}, {} \
             rebalances; {changed} changes of slab by moving particles",
            cpu.s.time,
            group.bounds(),
            group.rebalances()
        );
        assert!(changed > 0, "{what}: no moving particle changed slab");
    }
}

/// mDBC walls on a group: the dam with a block in its path and `boundary = "mdbc"`, f64, on two
/// slabs along x and three along z (bounds moving by count), and the rocking blade with mDBC on
/// two, give the CPU reference's bits every 50 steps and its next time step after every step;
/// along z the nodes of the floor and of the block's top lie in another slab than their
/// particle (each GPU computes the nodes in its layers and every GPU takes them).
#[test]
fn f64_group_with_mdbc_has_the_cpu_bits() {
    if !gpu() {
        return;
    }
    let block = DAM.replace("[sph]\n", "[sph]\nboundary = \"mdbc\"\n")
        + "[[obstacles]]\nmin = [0.3, 0.0, 0.0]\nmax = [0.36, 0.05, 0.06]\n";
    let blade = sph::rocking_blade_text(0.02).replace("[sph]\n", "[sph]\nboundary = \"mdbc\"\n");
    assert!(blade.contains("mdbc"));
    // Along z the floor's nodes and those of the block's top lie across the bounds.
    let (x, z) = (Axis::X, Axis::Z);
    for (text, slabs, axis, steps) in [
        (&block, 2, x, 400u64),
        (&block, 3, z, 400),
        (&blade, 2, x, 400),
    ] {
        let (c, p, dt, state) = start_of(text);
        let what = format!(
            "mDBC, {slabs} slabs along {axis:?}, {} moving solids",
            p.moving.motions.len()
        );
        let at_rest = p.moving.at_rest(&state.pos);
        let ghosts =
            solver::sph::mdbc::ghost_nodes(c.mdbc.as_ref().unwrap(), &at_rest, &state.kind);
        let grid = sph_grid(&c, &at_rest, &state.kind);
        let reach = sph_reach(&c, &grid);
        let mut cpu = SphSim::from_state_moving(c.clone(), state.clone(), dt, p.moving.clone());
        let opts = group_opts(slabs, true, Some(axis), Balance::Count);
        let mut group =
            SphGroup::from_state_moving(c.clone(), state.clone(), dt, p.moving.clone(), opts)
                .expect("the group starts");
        let mut elsewhere = 0usize;
        let a = if axis == Axis::Z { 2 } else { 0 };
        for step in 1..=steps {
            if step_beside(&mut cpu, &mut group, step, &what) {
                // Fixed walls whose node lies in another slab than the particle.
                let b = group.bounds();
                let slab = |x: [f64; 3]| owner_of(b, sph_layer_of(&grid, x, a, reach));
                elsewhere += (0..ghosts.len())
                    .filter(|&k| {
                        !ghosts[k][0].is_nan() && p.moving.ids.binary_search(&(k as u32)).is_err()
                    })
                    .filter(|&k| slab(ghosts[k]) != slab(state.pos[k]))
                    .count();
            }
        }
        println!(
            "{what}: {steps} steps with the CPU's bits; bounds {:?}, {} rebalances; {elsewhere} \
             (wall, check) pairs with the node in another slab",
            group.bounds(),
            group.rebalances()
        );
        if axis == Axis::Z {
            assert!(
                elsewhere > 0,
                "{what}: every node lay in its particle's slab"
            );
        }
    }
}

/// The Verlet integrator on a group, f64: the dam on two slabs along x (bounds moving by count,
/// an Euler step every 13) and the rocking blade with mDBC on three give the CPU reference's
/// bits every 50 steps and its next time step after every step (the records carry the state one
/// step back across the bounds; the walls' densities one step back follow moved bounds and
/// moving particles); the group's state, one step back included, continues on the CPU with the
/// bits of the uninterrupted run.
#[test]
fn f64_group_with_verlet_has_the_cpu_bits() {
    if !gpu() {
        return;
    }
    let verlet = "[sph]\nintegrator = \"verlet\"\nverlet_steps = 13\n";
    let dam = DAM.replace("[sph]\n", verlet);
    let blade =
        sph::rocking_blade_text(0.02).replace("[sph]\n", &format!("{verlet}boundary = \"mdbc\"\n"));
    assert!(dam.contains("verlet") && blade.contains("mdbc"));
    for (text, slabs) in [(&dam, 2usize), (&blade, 3)] {
        let (c, p, dt, state) = start_of(text);
        let what = format!(
            "Verlet, {slabs} slabs, {} moving solids",
            p.moving.motions.len()
        );
        let mut cpu = SphSim::from_state_moving(c.clone(), state.clone(), dt, p.moving.clone());
        let opts = group_opts(slabs, true, Some(Axis::X), Balance::Count);
        let mut group =
            SphGroup::from_state_moving(c.clone(), state.clone(), dt, p.moving.clone(), opts)
                .expect("the group starts");
        for step in 1..=300u64 {
            step_beside(&mut cpu, &mut group, step, &what);
        }
        let st = group.state().unwrap();
        assert!(st.prev.is_some(), "{what}: the state one step back");
        assert_same_bits(&cpu.s, &st, &format!("{what}: the group's state"));
        let mut resumed = SphSim::from_state_moving(c.clone(), st, group.dt(), p.moving.clone());
        for _ in 0..30 {
            cpu.step();
            resumed.step();
        }
        assert_same_bits(&cpu.s, &resumed.s, &format!("{what}: continued on the CPU"));
        println!(
            "{what}: 300 steps with the CPU's bits, bounds {:?} after {} rebalances; continued \
             from its state",
            group.bounds(),
            group.rebalances()
        );
        assert!(group.rebalances() > 0, "{what}: the bounds must move");
    }
}
