//! `Simulation`: the facade of a run for the application and the tests. It owns the case, the
//! [`Coordinator`] (clock, plan, workers) and the per-particle static data, and gives
//! per-particle data in particle-id order, assembled from every worker.

use super::comm::Comm;
use super::coordinator::{Coordinator, Crew};
use super::stages::StageTimers;
use super::worker::{BackendStats, Energies, IdIndex, RawKinematics, Snapshot, StepError};
use crate::case::{Case, CaseError, CaseWarning, Species};
use crate::core::geometry::Mesh;
use crate::core::vec3::{self, V3};
use crate::decomp::{Decomposition, PlanError};
use crate::dem::state::{SimState, StepContext};
use std::cell::OnceCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Why a simulation could not be created or resumed.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error(transparent)]
    Case(#[from] CaseError),
    #[error("{origin}: frame to resume from is inconsistent: {message}")]
    Frame { origin: String, message: String },
    #[error(transparent)]
    Cuda(#[from] crate::dem::cuda::CudaError),
    #[error("{origin}: cannot decompose: {source}")]
    Plan {
        origin: String,
        #[source]
        source: PlanError,
    },
    #[error(
        "{origin}: the CUDA backend runs one sub-domain per GPU ({subdomains} asked for): list \
         the GPUs with --devices (e.g. --devices 0,1), or use --backend cpu for CPU sub-domains"
    )]
    CudaSubdomains { origin: String, subdomains: u32 },
    #[error("{origin}: {message}")]
    State { origin: String, message: String },
}

/// Which compute backend a [`Simulation`] runs on.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum BackendKind {
    /// The CPU reference (rayon).
    #[default]
    Cpu,
    /// The CUDA backend on one GPU.
    Cuda(crate::dem::cuda::CudaOptions),
    /// The CUDA backend on several GPUs of this host (device ordinals, one slab each).
    CudaGroup(crate::dem::cuda::CudaOptions, Vec<usize>),
    /// CPU workers spread over the processes (MPI ranks) of a run.
    CpuRanks(RankSet),
    /// One GPU per process (MPI rank) of a run: this rank's options (its device).
    CudaRanks(crate::dem::cuda::CudaOptions, RankSet),
}

/// The processes of a run over several ranks, as a [`BackendKind`] carries them.
#[derive(Debug, Clone)]
pub struct RankSet {
    pub comm: Arc<dyn Comm>,
    /// Set once rank 0 has sent the start state (before it, a failure on rank 0 sends the other
    /// ranks an empty start instead).
    started: Arc<AtomicBool>,
}

impl PartialEq for RankSet {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.comm, &other.comm)
    }
}

impl RankSet {
    pub fn new(comm: Arc<dyn Comm>) -> RankSet {
        RankSet {
            comm,
            started: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Whether rank 0 has sent the start state.
    pub fn started(&self) -> bool {
        self.started.load(Ordering::Relaxed)
    }

    /// Rank 0 sends the other ranks (waiting in [`Simulation::join_ranks`]) the start state:
    /// the case, its meshes and `state`, as checkpoint bytes. Once; nothing on other ranks.
    fn send_start(
        &self,
        case: &Case,
        meshes: &[Mesh],
        state: &SimState,
    ) -> Result<(), crate::io::checkpoint::CheckpointError> {
        if !self.comm.is_root() || self.started() {
            return Ok(());
        }
        let label = std::path::Path::new("<start state for the other ranks>");
        let bytes = crate::io::checkpoint::encode_parts(case, meshes, state, label)?;
        self.send_start_bytes(bytes);
        Ok(())
    }

    /// Rank 0 sends the other ranks (waiting in [`RankSet::receive_start`]) the start of a run
    /// as bytes of the method's own format (DEM: checkpoint bytes; SPH: `app::sph`'s). Once;
    /// nothing on other ranks.
    pub fn send_start_bytes(&self, mut bytes: Vec<u8>) {
        if !self.comm.is_root() || self.started() {
            return;
        }
        self.started.store(true, Ordering::Relaxed);
        self.comm.broadcast(&mut bytes);
    }

    /// A rank other than 0: waits for rank 0's start ([`RankSet::send_start_bytes`]); an error
    /// when rank 0 failed before it could send one.
    pub fn receive_start(&self) -> Result<Vec<u8>, SimError> {
        let mut bytes = Vec::new();
        self.comm.broadcast(&mut bytes);
        self.started.store(true, Ordering::Relaxed);
        if bytes.is_empty() {
            return Err(SimError::State {
                origin: "<start state from rank 0>".into(),
                message: "rank 0 failed before the run started (its output says why)".into(),
            });
        }
        Ok(bytes)
    }

    /// Rank 0 failed before the run could start: tells the other ranks (waiting in
    /// [`Simulation::join_ranks`]) to give up. Does nothing once started.
    pub fn cancel_start(&self) {
        if self.comm.is_root() && !self.started.swap(true, Ordering::Relaxed) {
            self.comm.broadcast(&mut Vec::new());
        }
    }
}

/// Host bytes per particle of a run besides the backend's own: the placed particles
/// (`case::PLACEMENT_BYTES_PER_PARTICLE`), the cached [`Snapshot`] (4 x f64 x 3 + u32) and the
/// shared-memory segment (3 frame slots of 4 x f32 x 3 + u32; static id, species and radius).
/// The initial state is not added here: the CPU backend takes its arrays over, and the CUDA
/// backend's figure includes it.
const RUN_BYTES_PER_PARTICLE: u64 =
    crate::case::PLACEMENT_BYTES_PER_PARTICLE + (4 * 24 + 4) + (3 * 52 + 12);

/// Host memory a run on `kind` needs per particle [B] (an estimate from the array sizes: see
/// [`crate::dem::cpu::HOST_BYTES_PER_PARTICLE`], [`crate::dem::cuda::HOST_BYTES_PER_PARTICLE`]), and what
/// for, for messages.
pub fn host_bytes_per_particle(kind: &BackendKind) -> (u64, &'static str) {
    match kind {
        BackendKind::Cpu | BackendKind::CpuRanks(_) => (
            RUN_BYTES_PER_PARTICLE + crate::dem::cpu::HOST_BYTES_PER_PARTICLE,
            "a run on the CPU backend",
        ),
        BackendKind::Cuda(_) | BackendKind::CudaGroup(..) | BackendKind::CudaRanks(..) => (
            RUN_BYTES_PER_PARTICLE + crate::dem::cuda::HOST_BYTES_PER_PARTICLE,
            "a run on the CUDA backend (host side)",
        ),
    }
}

/// Kinematics to resume from ([`Simulation::from_frame`]), f32 and in id order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FrameInput {
    pub step: u64,
    /// Simulated time [s].
    pub time: f64,
    /// Species index of each particle.
    pub species: Vec<u32>,
    pub positions: Vec<[f32; 3]>,
    pub velocities: Vec<[f32; 3]>,
    pub angular_velocities: Vec<[f32; 3]>,
}

/// Current pose of a mesh, f32: x_world = rotation * x_body + translation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeshTransformF32 {
    /// Row-major 3x3 rotation.
    pub rotation: [f32; 9],
    pub translation: [f32; 3],
}

/// A running simulation.
pub struct Simulation {
    case: Case,
    ctx: Arc<StepContext>,
    /// Species of every id the run has had (index = id; ids removed before this simulation was
    /// built, e.g. before a restart, hold species 0).
    id_species: Vec<u32>,
    coord: Coordinator,
    snapshot: OnceCell<Snapshot>,
    warnings: Vec<CaseWarning>,
}

impl Simulation {
    /// Validates the case, places the particles and starts the CPU backend at t = 0.
    pub fn new(case: Case) -> Result<Self, CaseError> {
        match Self::new_on(case, &BackendKind::Cpu) {
            Ok(s) => Ok(s),
            Err(SimError::Case(e)) => Err(e),
            Err(e) => unreachable!("the CPU backend cannot fail to start: {e}"),
        }
    }

    /// [`Simulation::new`] on the chosen backend. The particle count is checked against the
    /// protocol's limit and the run's host memory ([`host_bytes_per_particle`]) against
    /// `MemAvailable` before anything is placed; the CUDA backend checks the device's free
    /// memory before it allocates.
    pub fn new_on(case: Case, kind: &BackendKind) -> Result<Self, SimError> {
        case.validate_fields()?;
        let (bytes, purpose) = host_bytes_per_particle(kind);
        case.check_host_memory(bytes, purpose)?;
        let meshes = case.load_meshes()?;
        if let BackendKind::Cuda(opts) = kind {
            // NVRTC (seconds on a machine's first run) works while the particles are placed.
            let sc = StepContext::from_case(&case, Vec::new());
            let placed = case.source_counts().iter().sum::<u64>();
            crate::dem::cuda::prefetch_kernels(
                &sc,
                !meshes.is_empty(),
                opts,
                &[opts.device],
                usize::try_from(placed).unwrap_or(usize::MAX),
            );
        }
        let particles = case.generate_particles()?;
        case.check_initial_overlaps(&particles)?;
        let warnings: Vec<CaseWarning> = case
            .stability(&particles, &meshes)?
            .warning
            .into_iter()
            .collect();
        let state = SimState::new(
            0.0,
            0,
            particles.iter().map(|p| p.species).collect(),
            particles.iter().map(|p| p.position).collect(),
            particles.iter().map(|p| p.velocity).collect(),
            vec![[0.0; 3]; particles.len()],
        );
        Self::assemble(case, meshes, state, warnings, kind)
    }

    /// Resumes from a published frame (f32 kinematics in id order) at its step and time, with
    /// empty contact history. Overlaps are not checked (a frame from a running simulation has them).
    pub fn from_frame(case: Case, frame: &FrameInput) -> Result<Self, SimError> {
        Self::from_frame_on(case, frame, &BackendKind::Cpu)
    }

    /// [`Simulation::from_frame`] on the chosen backend.
    pub fn from_frame_on(
        case: Case,
        frame: &FrameInput,
        kind: &BackendKind,
    ) -> Result<Self, SimError> {
        case.validate_fields()?;
        let meshes = case.load_meshes()?;
        let n = frame.positions.len();
        let origin = case.origin.name.clone();
        if frame.velocities.len() != n
            || frame.angular_velocities.len() != n
            || frame.species.len() != n
        {
            return Err(SimError::Frame {
                origin,
                message: format!(
                    "{} positions, {} velocities, {} angular velocities, {} species",
                    n,
                    frame.velocities.len(),
                    frame.angular_velocities.len(),
                    frame.species.len()
                ),
            });
        }
        if let Some((id, s)) = frame
            .species
            .iter()
            .enumerate()
            .find(|(_, &s)| s as usize >= case.species.len())
        {
            return Err(SimError::Frame {
                origin,
                message: format!(
                    "particle {id} has species {s} but the case defines {}",
                    case.species.len()
                ),
            });
        }
        let conv = |v: &[[f32; 3]]| v.iter().map(|&x| vec3::from_f32(x)).collect::<Vec<V3>>();
        let state = SimState::new(
            frame.time,
            frame.step,
            frame.species.clone(),
            conv(&frame.positions),
            conv(&frame.velocities),
            conv(&frame.angular_velocities),
        );
        if let Some(id) = (0..n).find(|&i| {
            !(vec3::is_finite(state.pos[i])
                && vec3::is_finite(state.vel[i])
                && vec3::is_finite(state.omega[i]))
        }) {
            return Err(SimError::Frame {
                origin,
                message: format!("particle {id} has a non-finite value"),
            });
        }
        Self::assemble(case, meshes, state, Vec::new(), kind)
    }

    /// Continues from a full state (id order, with contact history) on the CPU.
    pub fn from_state(case: Case, state: SimState) -> Result<Self, SimError> {
        Self::from_state_on(case, state, &BackendKind::Cpu)
    }

    /// [`Simulation::from_state`] on the chosen backend.
    pub fn from_state_on(
        case: Case,
        state: SimState,
        kind: &BackendKind,
    ) -> Result<Self, SimError> {
        case.validate_fields()?;
        let meshes = case.load_meshes()?;
        Self::assemble(case, meshes, state, Vec::new(), kind)
    }

    /// Builds a simulation from its parts (used by checkpoint loading). The decomposition is
    /// the case's.
    pub(crate) fn assemble(
        case: Case,
        meshes: Vec<Mesh>,
        state: SimState,
        warnings: Vec<CaseWarning>,
        kind: &BackendKind,
    ) -> Result<Self, SimError> {
        let origin = case.origin.name.clone();
        if let Some(message) = state.inconsistency() {
            return Err(SimError::State { origin, message });
        }
        if let Some(k) = state
            .species
            .iter()
            .position(|&s| s as usize >= case.species.len())
        {
            let message = format!(
                "particle {} has species {} but the case defines {}",
                state.id[k],
                state.species[k],
                case.species.len()
            );
            return Err(SimError::State { origin, message });
        }
        let ctx = Arc::new(StepContext::from_case(&case, meshes));
        let mut state = state;
        state.flow.next_id = state
            .flow
            .next_id
            .max(state.id.last().map_or(0, |&id| id + 1));
        let inflows = crate::exec::inflow::Inflows::plan(&case, &mut state.flow)?;
        let planned = inflows.planned(&state.flow);
        let id_count = planned
            .iter()
            .map(|&(id, _)| id + 1)
            .fold(state.flow.next_id, u32::max);
        let mut id_species = vec![0u32; id_count as usize];
        for (&id, &s) in state.id.iter().zip(&state.species) {
            id_species[id as usize] = s;
        }
        for (id, s) in planned {
            id_species[id as usize] = s;
        }
        let mut d = case.decomposition;
        let coord = match kind {
            BackendKind::Cpu | BackendKind::CpuRanks(_) => {
                let comm: Arc<dyn Comm> = match kind {
                    BackendKind::CpuRanks(ranks) => {
                        ranks.send_start(&case, &ctx.meshes, &state).map_err(|e| {
                            SimError::State {
                                origin: origin.clone(),
                                message: e.to_string(),
                            }
                        })?;
                        let size = ranks.comm.size() as u32;
                        if d.subdomains < size {
                            if d.subdomains > 1 {
                                tracing::warn!(
                                    "{} sub-domains asked for {size} ranks: using {size}, one per rank",
                                    d.subdomains
                                );
                            }
                            d.subdomains = size;
                        }
                        ranks.comm.clone()
                    }
                    _ => Arc::new(super::comm::Solo),
                };
                let mut c = Coordinator::cpu_on(ctx.clone(), state, &d, comm)
                    .map_err(|source| SimError::Plan { origin, source })?;
                if !case.inflows.is_empty() {
                    c.set_inflows(inflows);
                }
                c
            }
            BackendKind::Cuda(opts)
            | BackendKind::CudaGroup(opts, _)
            | BackendKind::CudaRanks(opts, _) => {
                let devices = match kind {
                    BackendKind::CudaGroup(_, devices) => devices.clone(),
                    _ => vec![opts.device],
                };
                if d.subdomains > 1 && d.subdomains as usize != devices.len() {
                    return Err(SimError::CudaSubdomains {
                        origin,
                        subdomains: d.subdomains,
                    });
                }
                if case.outflows.is_empty()
                    && state.id.iter().enumerate().any(|(k, &id)| id as usize != k)
                {
                    return Err(SimError::State {
                        origin,
                        message: "the CUDA backend needs particle ids 0..n".into(),
                    });
                }
                let (ids, step, flow) = (state.id.clone(), state.step, state.flow.clone());
                // Slots and ids for the particles inflow sources will add.
                let pending: usize = inflows.planned(&state.flow).len();
                let opts = &crate::dem::cuda::CudaOptions {
                    inflow_room: pending,
                    id_limit: if pending > 0 { id_count } else { 0 },
                    ..opts.clone()
                };
                let worker: Box<dyn super::worker::FusedWorker> =
                    if let BackendKind::CudaRanks(_, ranks) = kind {
                        ranks.send_start(&case, &ctx.meshes, &state).map_err(|e| {
                            SimError::State {
                                origin: origin.clone(),
                                message: e.to_string(),
                            }
                        })?;
                        Box::new(crate::dem::cuda::CudaRank::new(
                            ctx.clone(),
                            &state,
                            opts,
                            &crate::dem::cuda::RankOptions {
                                comm: ranks.comm.clone(),
                                device: opts.device,
                                axis: d.split_axis,
                                balance: d.balance,
                            },
                        )?)
                    } else if devices.len() > 1 {
                        Box::new(crate::dem::cuda::CudaGroup::new(
                            ctx.clone(),
                            &state,
                            opts,
                            &crate::dem::cuda::GroupOptions {
                                devices,
                                axis: d.split_axis,
                                balance: d.balance,
                            },
                        )?)
                    } else {
                        Box::new(crate::dem::cuda::CudaBackend::new(
                            ctx.clone(),
                            state,
                            opts,
                        )?)
                    };
                let mut c =
                    Coordinator::fused(worker, &ids, step, crate::dem::cuda::gpu_grid(&ctx));
                c.set_context(ctx.clone(), flow);
                if !case.inflows.is_empty() {
                    c.set_inflows(inflows);
                }
                c
            }
        };
        Ok(Simulation {
            case,
            ctx,
            id_species,
            coord,
            snapshot: OnceCell::new(),
            warnings,
        })
    }

    /// Joins a run over several processes on a rank other than 0: waits for rank 0's start
    /// state (the case, meshes and particles it built or loaded) and builds this rank's part.
    /// `cuda`: this rank's GPU options when the run is on GPU ranks (else CPU workers).
    pub fn join_ranks(
        ranks: RankSet,
        cuda: Option<crate::dem::cuda::CudaOptions>,
    ) -> Result<Self, SimError> {
        let bytes = ranks.receive_start()?;
        Self::join_ranks_with(ranks, &bytes, cuda)
    }

    /// [`Simulation::join_ranks`] with the start already received.
    pub fn join_ranks_with(
        ranks: RankSet,
        bytes: &[u8],
        cuda: Option<crate::dem::cuda::CudaOptions>,
    ) -> Result<Self, SimError> {
        let origin = "<start state from rank 0>".to_string();
        let (case, meshes, state) =
            crate::io::checkpoint::decode_parts(bytes, std::path::Path::new(&origin)).map_err(
                |e| SimError::State {
                    origin: origin.clone(),
                    message: e.to_string(),
                },
            )?;
        let kind = match cuda {
            Some(opts) => BackendKind::CudaRanks(opts, ranks),
            None => BackendKind::CpuRanks(ranks),
        };
        Self::assemble(case, meshes, state, Vec::new(), &kind)
    }

    /// Advances one time step.
    pub fn step(&mut self) -> Result<(), StepError> {
        self.step_n(1)
    }

    /// Advances `n` time steps.
    pub fn step_n(&mut self, n: u64) -> Result<(), StepError> {
        self.snapshot = OnceCell::new();
        self.coord.advance(n)
    }

    /// The coordinator (clock, plan, workers).
    pub fn coordinator(&self) -> &Coordinator {
        &self.coord
    }

    /// The decomposition this run was asked for.
    pub fn decomposition(&self) -> Decomposition {
        self.case.decomposition
    }

    /// Simulated time [s].
    pub fn time(&self) -> f64 {
        self.coord.clock().time
    }
    pub fn step_index(&self) -> u64 {
        self.coord.clock().step
    }
    /// The time step of the next step [s] (the coordinator's minimum over its workers).
    pub fn dt(&self) -> f64 {
        self.coord.clock().dt
    }
    pub fn case(&self) -> &Case {
        &self.case
    }
    /// Changes the simulated end time [s] (e.g. to extend a restarted run).
    pub fn set_end_time(&mut self, end_time: f64) {
        self.case.end_time = end_time;
    }
    /// One line about the compute device (name, memory per particle) or the decomposition,
    /// where there is one.
    pub fn device_report(&self) -> Option<String> {
        match self.coord.crew() {
            Crew::Fused(w) => w.device_report(),
            Crew::Staged(_) if self.coord.plan().workers() > 1 => {
                let plan = self.coord.plan();
                let ranks = self.coord.comm().size();
                Some(format!(
                    "CPU: {} sub-domains along {} ({} cell layers of {:.3e} m){}, particles per sub-domain{}: {:?}",
                    plan.workers(),
                    ["x", "y", "z"][plan.axis],
                    self.coord.grid().dims[plan.axis],
                    self.coord.grid().cell,
                    if ranks > 1 { format!(" over {ranks} MPI ranks") } else { String::new() },
                    if ranks > 1 { " of this rank" } else { "" },
                    self.coord.worker_loads()
                ))
            }
            Crew::Staged(_) => None,
        }
    }
    /// Warnings found when the case was validated (e.g. a marginal time step).
    pub fn warnings(&self) -> &[CaseWarning] {
        &self.warnings
    }
    pub fn backend_name(&self) -> &'static str {
        match self.coord.crew() {
            Crew::Fused(w) => w.name(),
            Crew::Staged(_) => "cpu",
        }
    }
    /// Particles alive now.
    pub fn num_particles(&self) -> usize {
        self.coord.index().len()
    }

    /// Every id the run has had or will have (0..this): the static section's particle count.
    pub fn id_count(&self) -> usize {
        self.id_species.len()
    }

    /// Particles removed and added since t = 0.
    pub fn flow(&self) -> &crate::dem::state::ParticleFlow {
        self.coord.flow()
    }

    /// See [`crate::exec::worker::FusedWorker::register_host_memory`].
    ///
    /// # Safety
    /// As [`crate::exec::worker::FusedWorker::register_host_memory`].
    pub unsafe fn register_host_memory(
        &mut self,
        ptr: *mut u8,
        len: usize,
    ) -> Result<(), StepError> {
        match self.coord.fused_mut() {
            // SAFETY: forwarded contract.
            Some(w) => unsafe { w.register_host_memory(ptr, len) },
            None => Ok(()),
        }
    }
    /// See [`crate::exec::worker::FusedWorker::release_host_memory`].
    pub fn release_host_memory(&mut self) {
        if let Some(w) = self.coord.fused_mut() {
            w.release_host_memory()
        }
    }
    /// See [`crate::exec::worker::FusedWorker::begin_kinematics_copy`].
    ///
    /// # Safety
    /// As [`crate::exec::worker::FusedWorker::begin_kinematics_copy`].
    pub unsafe fn begin_kinematics_copy(&mut self, out: RawKinematics) -> Result<bool, StepError> {
        // SAFETY: forwarded contract.
        unsafe { self.coord.begin_kinematics_copy(out) }
    }
    /// See [`crate::exec::worker::FusedWorker::kinematics_copy_done`].
    pub fn kinematics_copy_done(&mut self) -> Result<bool, StepError> {
        self.coord.kinematics_copy_done()
    }
    /// See [`crate::exec::worker::FusedWorker::wait_kinematics_copy`].
    pub fn wait_kinematics_copy(&mut self) -> Result<(), StepError> {
        self.coord.wait_kinematics_copy()
    }

    /// Per-particle kinematics in id order, f64 (cached until the next step; a device
    /// backend downloads it, and a driver error is returned).
    pub fn snapshot(&self) -> Result<&Snapshot, StepError> {
        if let Some(s) = self.snapshot.get() {
            return Ok(s);
        }
        let s = self.coord.snapshot()?;
        Ok(self.snapshot.get_or_init(|| s))
    }

    /// The full state including contact history (what a checkpoint stores).
    pub fn state(&self) -> Result<SimState, StepError> {
        self.coord.export_state()
    }

    pub fn positions_f32(&self) -> Result<Vec<[f32; 3]>, StepError> {
        Ok(self
            .snapshot()?
            .pos
            .iter()
            .map(|&v| vec3::to_f32(v))
            .collect())
    }
    pub fn velocities_f32(&self) -> Result<Vec<[f32; 3]>, StepError> {
        Ok(self
            .snapshot()?
            .vel
            .iter()
            .map(|&v| vec3::to_f32(v))
            .collect())
    }
    pub fn angular_velocities_f32(&self) -> Result<Vec<[f32; 3]>, StepError> {
        Ok(self
            .snapshot()?
            .omega
            .iter()
            .map(|&v| vec3::to_f32(v))
            .collect())
    }
    /// Particle ids, ascending: the order of every per-particle array this type gives.
    pub fn particle_ids(&self) -> Vec<u32> {
        self.coord.index().ids()
    }
    /// Species of the live particles, id order.
    pub fn species_ids(&self) -> Vec<u32> {
        match self.coord.index() {
            IdIndex::Dense(n) => self.id_species[..*n].to_vec(),
            IdIndex::Sorted(ids) => ids.iter().map(|&id| self.id_species[id as usize]).collect(),
        }
    }
    /// Radii of the live particles, id order.
    pub fn radii_f32(&self) -> Vec<f32> {
        self.species_ids()
            .iter()
            .map(|&s| self.ctx.species_radius[s as usize] as f32)
            .collect()
    }
    /// Species of every id 0..[`Simulation::id_count`] (the static section of a run whose
    /// particle set changes).
    pub fn id_species(&self) -> &[u32] {
        &self.id_species
    }
    /// The species table.
    pub fn species(&self) -> &[Species] {
        &self.case.species
    }
    /// Meshes in their body frame (names, triangles, motion).
    pub fn meshes(&self) -> &[Mesh] {
        &self.ctx.meshes
    }
    /// Body-frame triangles of mesh `k`, f32.
    pub fn mesh_triangles_f32(&self, k: usize) -> Vec<[[f32; 3]; 3]> {
        self.ctx
            .meshes
            .get(k)
            .map(|m| m.triangles.iter().map(|t| t.map(vec3::to_f32)).collect())
            .unwrap_or_default()
    }
    /// Current pose of every mesh.
    pub fn mesh_transforms_f32(&self) -> Vec<MeshTransformF32> {
        self.coord
            .mesh_transforms()
            .iter()
            .map(|t| MeshTransformF32 {
                rotation: t.rotation.map(|c| c as f32),
                translation: vec3::to_f32(t.translation),
            })
            .collect()
    }
    /// Current pose of every mesh, f64.
    pub fn mesh_transforms(&self) -> Vec<crate::core::geometry::BodyTransform> {
        self.coord.mesh_transforms()
    }
    /// The simulation box (min, max) [m].
    pub fn world_bounds(&self) -> ([f32; 3], [f32; 3]) {
        (
            vec3::to_f32(self.ctx.domain_min),
            vec3::to_f32(self.ctx.domain_max),
        )
    }
    pub fn energies(&mut self) -> Result<Energies, StepError> {
        self.coord.energies()
    }
    /// Stage timers since the last reset (the same names on every backend).
    pub fn timers(&self) -> StageTimers {
        self.coord.timers()
    }
    pub fn reset_timers(&mut self) {
        self.coord.reset_timers()
    }
    /// Adds `d` to the `publish` stage (the application's frame copy).
    pub fn add_publish_time(&mut self, d: std::time::Duration) {
        self.coord.add_time(crate::exec::stages::Stage::Publish, d);
    }
    pub fn stats(&self) -> Result<BackendStats, StepError> {
        self.coord.stats()
    }
}
