//! Builds the simulation the command line asks for (built-in case, case file, checkpoint or a
//! dead run's last frame) on the chosen backend, and adapts it to the run loop ([`SimPort`]).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use shm_protocol::layout::DemMaterial;
use shm_protocol::{
    BodyTransform, FieldKind, Frame, FrameWriter, MeshStatic, Region, SpeciesRecord, StaticData,
};
use solver::case::Case;
use solver::core::vec3;
use solver::dem::cuda::{compact_options, CudaOptions};
use solver::dem::state::SimState;
use solver::exec::sim::{BackendKind, FrameInput, Simulation};
use solver::exec::worker::RawKinematics;
use solver::io::vtk::VtkSeries;

use super::cli::{Cli, GpuMemory};
use super::port::SimPort;
use crate::Backend;

/// This build contains the CUDA backend (it still needs a driver at run time).
pub const CUDA_AVAILABLE: bool = true;

/// Built-in case size when `--particles` is not given: a few seconds per 0.01 s simulated on a
/// laptop CPU, and the XPS benchmark size on a GPU.
const DEFAULT_PARTICLES_CPU: u64 = 10_000;
const DEFAULT_PARTICLES_CUDA: u64 = 1_000_000;

/// GPU steps per run-loop iteration: one synchronisation per batch instead of per step, while
/// commands still take effect within a few milliseconds.
const GPU_BATCH: u64 = 16;

pub(crate) fn backend_kind(backend: Backend, cli: &Cli) -> Result<BackendKind> {
    if backend == Backend::Cpu && cli.devices != super::cli::Devices::List(vec![0]) {
        tracing::warn!("--devices selects GPUs for --backend cuda; the CPU backend ignores it");
    }
    if backend == Backend::Cpu && cli.gpu_memory != GpuMemory::Auto {
        tracing::warn!("--gpu-memory sets the layout on a GPU; the CPU backend ignores it");
    }
    Ok(match backend {
        Backend::Cpu => match super::ranks::current() {
            Some(ranks) => BackendKind::CpuRanks(ranks),
            None => BackendKind::Cpu,
        },
        Backend::Cuda => {
            // A driver failure is reported when the backend starts.
            let devices = cli.devices.resolve().unwrap_or_else(|_| vec![0]);
            if let GpuMemory::Compact(rows) = cli.gpu_memory {
                if devices.len() > 1 || super::ranks::current().is_some() {
                    bail!(
                        "--gpu-memory compact:{rows} runs on one GPU (a pair's spring lies with \
                         one of its particles, which a GPU's neighbours do not hold); on \
                         several GPUs or MPI ranks leave it at `auto`"
                    );
                }
            }
            if let Some(ranks) = super::ranks::current() {
                // One GPU per rank: the ranks of a host take its listed GPUs in turn.
                let local = super::ranks::local_rank().unwrap_or(ranks.comm.rank());
                let opts = CudaOptions {
                    device: devices[local % devices.len()],
                    ..CudaOptions::default()
                };
                return Ok(BackendKind::CudaRanks(opts, ranks));
            }
            let mut opts = CudaOptions {
                device: devices[0],
                skin: cli.skin,
                list_walk: list_walk_from_env(),
                ..CudaOptions::default()
            };
            if let GpuMemory::Compact(rows) = cli.gpu_memory {
                // One copy where the case allows it (velocity Verlet keeps two).
                opts = compact_options(opts, rows, super::cli::compact_spill(rows));
                // The Verlet list costs about 100 B a particle.
                opts.neighbour_list = false;
            }
            if devices.len() > 1 {
                BackendKind::CudaGroup(opts, devices)
            } else {
                BackendKind::Cuda(opts)
            }
        }
    })
}

/// `PARTICLE_SHM_LIST_WALK=buffered|direct|warp`: how the collide walks the Verlet list, for
/// measurements of the main job (the same bits whichever; `kernels::LIST_BY_WARP` unset).
fn list_walk_from_env() -> u32 {
    match std::env::var("PARTICLE_SHM_LIST_WALK").as_deref() {
        Ok("buffered") => kernels::LIST_BUFFERED,
        Ok("direct") => kernels::LIST_DIRECT,
        _ => kernels::LIST_BY_WARP,
    }
}

/// Applies the command-line overrides that make sense for any case.
fn apply_overrides(case: &mut Case, cli: &Cli) {
    if let Some(t) = cli.end_time {
        case.end_time = t;
    }
    if let Some(dt) = cli.dt {
        case.dt = dt;
    }
    case.decomposition = cli.decomposition().apply(case.decomposition);
}

/// The case as TOML with STL paths made absolute, so a reader of the segment (or a
/// `--load-shm` resume from another directory) can load the meshes.
fn self_contained_toml(case: &Case) -> Result<String> {
    let mut c = case.clone();
    for m in &mut c.meshes {
        if let Some(p) = &m.stl {
            let full = case.origin.base_dir.join(p);
            m.stl = Some(std::fs::canonicalize(&full).unwrap_or(full));
        }
    }
    Ok(c.to_toml()?)
}

/// The frame field mask: `--fields`, else the case's `[output] fields`, else the method's
/// default.
fn frame_fields(case: &Case, cli: &Cli) -> Result<u32> {
    // A changing particle set needs the ids in every frame (LAYOUT.md).
    let ids = if case.changes_particle_set() {
        shm_protocol::FieldKind::ParticleId.bit()
    } else {
        0
    };
    Ok(ids | cli.frame_mask::<solver::dem::Dem, _>(|| case.frame_fields())?)
}

/// The options only SPH runs take, refused for a DEM run rather than ignored.
fn refuse_sph_options(cli: &Cli) -> Result<()> {
    if cli.spacing.is_some() {
        bail!("--spacing sets the particle spacing of SPH cases; DEM sizes come from the case's species");
    }
    if cli.first_cut.is_some() {
        bail!("--first-cut applies to SPH runs; DEM slabs start at equal particle counts");
    }
    if cli.balance_every.is_some() || cli.balance_threshold.is_some() {
        bail!(
            "--balance-every and --balance-threshold apply to SPH runs; DEM balances every 32 \
             steps with the modes' default thresholds"
        );
    }
    Ok(())
}

fn start(case: Case, kind: &BackendKind, cli: &Cli) -> Result<Box<dyn SimPort>> {
    refuse_sph_options(cli)?;
    let config_toml = self_contained_toml(&case)?;
    let fields = frame_fields(&case, cli)?;
    let sim = Simulation::new_on(case, kind)?;
    for w in sim.warnings() {
        tracing::warn!("{w}");
    }
    Ok(super::ranks::port(Box::new(SimRunner::new(
        sim,
        config_toml,
        fields,
    ))))
}

/// A new run: the case file, or the built-in falling box.
pub fn build(case_path: Option<&Path>, backend: Backend, cli: &Cli) -> Result<Box<dyn SimPort>> {
    let mut case = match case_path {
        Some(path) => {
            if cli.particles.is_some() {
                bail!(
                    "--particles scales the built-in case only; set the particle counts of {} in its [[sources]]",
                    path.display()
                );
            }
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("{}: cannot read case file", path.display()))?;
            if super::sph::is_sph(&text) {
                return Ok(super::ranks::port(super::sph::build(
                    path, &text, backend, cli,
                )?));
            }
            // Validated once, after the overrides, when the simulation is built (placing the
            // particles twice costs seconds at millions of particles).
            let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
            Case::from_toml_str(&text, &path.display().to_string(), &base_dir)?
        }
        None => {
            let n = cli.particles.unwrap_or(match backend {
                Backend::Cpu => DEFAULT_PARTICLES_CPU,
                Backend::Cuda => DEFAULT_PARTICLES_CUDA,
            });
            let n = usize::try_from(n).context("--particles is too large for this machine")?;
            tracing::info!(
                "built-in case: {n} spheres falling into a 2 m box (XPS benchmark, Neubauer 2018)"
            );
            Case::default_falling_box(n)
        }
    };
    apply_overrides(&mut case, cli);
    start(case, &backend_kind(backend, cli)?, cli)
}

/// Continues from a checkpoint file.
pub fn restore(path: &Path, backend: Backend, cli: &Cli) -> Result<Box<dyn SimPort>> {
    if solver::sph::checkpoint::is_sph_checkpoint(path) {
        return Ok(super::ranks::port(super::sph::restore(path, backend, cli)?));
    }
    if cli.particles.is_some() || cli.dt.is_some() {
        bail!("--particles and --dt cannot change a checkpointed run (--end-time can)");
    }
    refuse_sph_options(cli)?;
    let mut sim =
        Simulation::load_checkpoint_with(path, &backend_kind(backend, cli)?, cli.decomposition())?;
    if let Some(t) = cli.end_time {
        sim.set_end_time(t);
    }
    tracing::info!(
        "restarted from {} at step {}, t = {:.6} s",
        path.display(),
        sim.step_index(),
        sim.time()
    );
    let config_toml = self_contained_toml(sim.case())?;
    let fields = frame_fields(sim.case(), cli)?;
    Ok(super::ranks::port(Box::new(SimRunner::new(
        sim,
        config_toml,
        fields,
    ))))
}

/// Continues a dead run from the last complete frame of segment `name`, after checking the
/// frame as strictly as a case file (see [`super::resume::check_frame`]) and the time step
/// (with any `--dt`) against the frame's speeds and the contact times.
pub fn resume_from_frame(
    name: &str,
    stat: &StaticData,
    frame: &Frame,
    backend: Backend,
    cli: &Cli,
) -> Result<Box<dyn SimPort>> {
    if cli.particles.is_some() || cli.case.is_some() {
        bail!("--load-shm resumes the segment's own case; --particles and --case do not apply");
    }
    if super::sph::is_sph(&stat.config_toml) {
        return Ok(super::ranks::port(super::sph::resume_from_frame(
            name, stat, frame, backend, cli,
        )?));
    }
    refuse_sph_options(cli)?;
    let mut case = Case::from_toml_str(
        &stat.config_toml,
        "<case stored in the segment>",
        Path::new("/"),
    )
    .with_context(|| format!("segment {name:?}: its stored case cannot be read"))?;
    // The run planned its inflow ids with the case as stored (an inflow without an end runs to
    // the end time, which --end-time may change now).
    let stored = case.clone();
    apply_overrides(&mut case, cli);
    case.validate_fields()
        .with_context(|| format!("segment {name:?}: its stored case is not valid"))?;
    // A run that adds or removes particles publishes the live ids in every frame.
    let flow_run = case.changes_particle_set();
    if frame.meta.has(FieldKind::ParticleId) != flow_run {
        bail!(
            "segment {name:?}: its case {} particles but its last frame {} a list of particle \
             ids: the segment is inconsistent",
            if flow_run {
                "adds or removes"
            } else {
                "neither adds nor removes"
            },
            if flow_run { "has no" } else { "has" }
        );
    }
    let (particles, ids) = super::resume::check_frame(name, &case, stat, frame)?;
    let meshes = case.load_meshes()?;
    let report = case.stability(&particles, &meshes)?;
    if let Some(w) = &report.warning {
        tracing::warn!("{w}");
    }
    let n = particles.len();
    let config_toml = stat.config_toml.clone();
    // The segment keeps the fields it was made with.
    let fields = frame.meta.fields;
    let omega = frame
        .angular_velocities
        .clone()
        .filter(|w| w.len() == n)
        .unwrap_or_else(|| vec![[0.0; 3]; n]);
    let kind = backend_kind(backend, cli)?;
    let sim = if flow_run {
        // The live particles with their ids, and what the run had removed and added.
        let flow = super::resume::resumed_flow(name, &stored, stat, frame, &ids)?;
        let f64s = |v: &[[f32; 3]]| v.iter().map(|&x| vec3::from_f32(x)).collect::<Vec<_>>();
        let mut state = SimState::new(
            frame.meta.sim_time,
            frame.meta.step,
            particles.iter().map(|p| p.species).collect(),
            particles.iter().map(|p| p.position).collect(),
            particles.iter().map(|p| p.velocity).collect(),
            f64s(&omega),
        );
        state.id = ids;
        state.flow = flow;
        tracing::info!(
            "resuming with {n} live particles, {} removed so far, inflow {}",
            state.flow.removed_count,
            state
                .flow
                .inflows
                .iter()
                .map(|p| format!("{} of {}", p.inserted, p.total))
                .collect::<Vec<_>>()
                .join(", ")
        );
        Simulation::from_state_on(case, state, &kind)?
    } else {
        let input = FrameInput {
            step: frame.meta.step,
            time: frame.meta.sim_time,
            species: stat.particle_species.clone(),
            positions: frame.positions.clone().unwrap_or_default(),
            velocities: frame.velocities.clone().unwrap_or_default(),
            angular_velocities: omega,
        };
        Simulation::from_frame_on(case, &input, &kind)?
    };
    Ok(super::ranks::port(Box::new(SimRunner::new(
        sim,
        config_toml,
        fields,
    ))))
}

/// A [`Simulation`] as the run loop sees it.
pub struct SimRunner {
    sim: Simulation,
    config_toml: String,
    /// Segment field mask of the frames.
    fields: u32,
    vtk: Option<(PathBuf, VtkSeries)>,
}

impl SimRunner {
    fn new(sim: Simulation, config_toml: String, fields: u32) -> Self {
        if let Some(report) = sim.device_report() {
            tracing::info!("{report}");
        }
        Self {
            sim,
            config_toml,
            fields,
            vtk: None,
        }
    }
}

impl SimPort for SimRunner {
    fn step_n(&mut self, n: u64) -> Result<()> {
        Ok(self.sim.step_n(n)?)
    }
    fn preferred_batch(&self) -> u64 {
        if self.sim.backend_name() == "cpu" {
            1
        } else {
            GPU_BATCH
        }
    }
    fn step_index(&self) -> u64 {
        self.sim.step_index()
    }
    fn time(&self) -> f64 {
        self.sim.time()
    }
    fn dt(&self) -> f64 {
        self.sim.dt()
    }
    fn end_time(&self) -> f64 {
        self.sim.case().end_time
    }
    fn particle_count(&self) -> usize {
        self.sim.num_particles()
    }
    fn id_count(&self) -> usize {
        if self.sim.case().changes_particle_set() {
            self.sim.id_count()
        } else {
            self.sim.num_particles()
        }
    }
    fn removed(&self) -> (u64, f64) {
        let f = self.sim.flow();
        (f.removed_count, f.removed_mass)
    }
    fn mesh_count(&self) -> usize {
        self.sim.meshes().len()
    }
    fn triangle_count(&self) -> usize {
        self.sim.meshes().iter().map(|m| m.triangles.len()).sum()
    }
    fn species_count(&self) -> usize {
        self.sim.species().len()
    }

    fn frame_fields(&self) -> u32 {
        self.fields
    }
    fn case_intervals(&self) -> super::port::CaseIntervals {
        super::port::CaseIntervals::of(&self.sim.case().output)
    }

    fn static_data(&self) -> StaticData {
        let species = self
            .sim
            .species()
            .iter()
            .map(|s| {
                let material = DemMaterial {
                    young_modulus: s.young_modulus.unwrap_or(0.0),
                    poisson_ratio: s.poisson_ratio,
                    restitution: s.restitution,
                    sliding_friction: s.sliding_friction,
                    rolling_friction: s.rolling_friction,
                    normal_stiffness: s.normal_stiffness.unwrap_or(0.0),
                };
                SpeciesRecord::dem(&s.name, s.radius, s.density, material)
            })
            .collect();
        let meshes = (0..self.sim.meshes().len())
            .map(|k| MeshStatic {
                name: self.sim.meshes()[k].name.clone(),
                triangles: self
                    .sim
                    .mesh_triangles_f32(k)
                    .iter()
                    .map(|t| {
                        let f = t.as_flattened();
                        std::array::from_fn(|i| f[i])
                    })
                    .collect(),
            })
            .collect();
        // A run whose particle set changes lists every id 0..id_count (static arrays indexed
        // by id, LAYOUT.md); frames then carry the live ids.
        let (particle_ids, particle_species) = if self.sim.case().changes_particle_set() {
            let sp = self.sim.id_species().to_vec();
            ((0..sp.len() as u32).collect(), sp)
        } else {
            (self.sim.particle_ids(), self.sim.species_ids())
        };
        let particle_radius = particle_species
            .iter()
            .map(|&s| self.sim.species()[s as usize].radius as f32)
            .collect();
        let (lo, hi) = (self.sim.case().domain.min, self.sim.case().domain.max);
        let rmax = self
            .sim
            .species()
            .iter()
            .map(|s| s.radius)
            .fold(0.0, f64::max);
        StaticData {
            config_toml: self.config_toml.clone(),
            species,
            particle_ids,
            particle_species,
            particle_radius,
            meshes,
            world_min: lo,
            world_max: hi,
            cell_size: 2.0 * rmax,
            generation: 0,
        }
    }

    fn body_transforms(&self) -> Vec<BodyTransform> {
        self.sim
            .mesh_transforms()
            .iter()
            .map(|t| BodyTransform {
                rotation: t.rotation.map(|c| c as f32),
                translation: vec3::to_f32(t.translation),
                velocity: vec3::to_f32(t.wall_velocity(t.translation)),
                angular_velocity: vec3::to_f32(t.omega),
            })
            .collect()
    }

    fn attach_segment(&mut self, region: &Region) -> Result<()> {
        // SAFETY: the segment stays mapped until release_segment, which the run calls before
        // closing it (and a crash ends the process, mapping and registration together).
        unsafe { self.sim.register_host_memory(region.base(), region.len()) }
            .context("registering the segment with the GPU")
    }

    fn release_segment(&mut self) {
        self.sim.release_host_memory();
    }

    fn fill_frame(&mut self, w: &mut FrameWriter<'_>) -> Result<bool> {
        // Fields the segment does not reserve are not produced (null: the pack skips them).
        let mut ptr = |k: FieldKind| w.field_ptr_if_reserved(k).unwrap_or(std::ptr::null_mut());
        let out = RawKinematics {
            count: self.sim.num_particles(),
            positions: ptr(FieldKind::Position) as *mut [f32; 3],
            velocities: ptr(FieldKind::Velocity) as *mut [f32; 3],
            angular_velocities: ptr(FieldKind::AngularVelocity) as *mut [f32; 3],
            forces: ptr(FieldKind::Force) as *mut [f32; 3],
            contact_counts: ptr(FieldKind::ContactCount) as *mut u32,
        };
        // SAFETY: each non-null pointer is a distinct reserved array of this slot holding the
        // frame's particle count (= count) elements; the slot stays odd, unread and untouched
        // until the run loop commits it, which it does only after the copy completed.
        let t0 = std::time::Instant::now();
        // (Collective over MPI ranks: first, so that no error on this rank can skip it.)
        let in_flight = unsafe { self.sim.begin_kinematics_copy(out) }
            .context("copying the state into the frame")?;
        // A run whose particle set changes names the live particles of each frame.
        if w.field_ptr_if_reserved(FieldKind::ParticleId).is_some() {
            w.particle_ids_mut()?
                .copy_from_slice(&self.sim.particle_ids());
        }
        // The host's share of publishing (a device copy runs on while the steps go on).
        self.sim.add_publish_time(t0.elapsed());
        Ok(in_flight)
    }

    fn frame_copied(&mut self) -> Result<bool> {
        Ok(self.sim.kinematics_copy_done()?)
    }

    fn wait_frame_copy(&mut self) -> Result<()> {
        Ok(self.sim.wait_kinematics_copy()?)
    }

    fn save_checkpoint(&self, path: &Path) -> Result<()> {
        Ok(self.sim.save_checkpoint(path)?)
    }

    fn write_output(&mut self, dir: &Path, _index: u64) -> Result<()> {
        // The snapshot first (collective over MPI ranks; the VTK writer uses it, cached).
        self.sim.snapshot()?;
        if self.vtk.as_ref().is_none_or(|(d, _)| d != dir) {
            self.vtk = Some((dir.to_path_buf(), VtkSeries::new(dir, "particles")?));
        }
        if let Some((_, series)) = &mut self.vtk {
            series.write_frame(&self.sim)?;
        }
        Ok(())
    }

    /// Empty until a step has been timed (on the GPU, until the first sampled batch is read).
    fn stage_summary(&self) -> String {
        let t = self.sim.timers();
        if t.steps == 0 {
            return String::new();
        }
        // Each sub-domain's share of the particles (this rank's, over MPI), and how often load
        // balancing moved the slab bounds.
        let loads = self.sim.coordinator().worker_loads();
        if loads.len() < 2 {
            return t.to_string();
        }
        let total = loads.iter().sum::<usize>().max(1) as f64;
        let shares: Vec<String> = loads
            .iter()
            .map(|&n| format!("{:.0}", 100.0 * n as f64 / total))
            .collect();
        format!(
            "{t}; shares {} %, {} rebalances",
            shares.join("/"),
            self.sim.coordinator().rebalances()
        )
    }

    fn backend_name(&self) -> String {
        self.sim.backend_name().to_string()
    }
}
