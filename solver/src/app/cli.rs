//! The solver's command line.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BackendChoice {
    /// CUDA when an NVIDIA GPU and driver are present, otherwise the CPU (with a notice).
    Auto,
    /// The CPU reference backend (rayon).
    Cpu,
    /// The CUDA backend; an error when no GPU is usable.
    Cuda,
}

/// Particle simulation published live into a shared-memory segment that viewers and analysis
/// tools attach to: the discrete element method (spheres, walls and moving meshes) or, for a
/// case file with `method = "sph"`, weakly compressible SPH (free-surface flow; examples in
/// solver/cases: dambreak.toml, water_column.toml, sloshing_tank.toml, ...).
#[derive(Debug, Parser)]
#[command(
    name = "solver",
    version,
    // `--spacing -0.01` reaches the value's own check ("must be a positive number of
    // metres"), not clap's "unexpected argument '-0' found".
    allow_negative_numbers = true,
    after_help = "EXAMPLES:\n  \
    solver --name-shm run1                      built-in case (spheres falling into a 2 m box)\n  \
    solver --name-shm run1 --particles 100000   the same, with 100k particles\n  \
    solver --name-shm mix --case mixer.toml --output out --output-every 0.01\n  \
    solver --name-shm db --case solver/cases/dambreak.toml   SPH dam break (SPHERIC Test 2)\n  \
    solver --load-shm run1                      resume from run1's last frame after a crash\n  \
    solver --restart out/checkpoint.bin         continue bit-for-bit from a checkpoint\n  \
    solver --name-shm run1 --backend cpu --subdomains 4 --split-axis x   4 CPU sub-domains\n  \
    solver --name-shm db --case dambreak.toml --backend cpu --subdomains 3   SPH on 3 CPU sub-domains\n  \
    mpirun -np 4 solver --name-shm run1 --backend cpu --threads 2   4 MPI ranks (--features mpi)\n  \
    mpirun -np 8 solver --name-shm run1 --backend cuda --devices all   one GPU per MPI rank\n  \
    mpirun -np 2 solver --name-shm db --backend cuda --case dambreak.toml   SPH on 2 GPU ranks\n  \
    mpirun -np 4 solver --name-shm db --backend cpu --case dambreak.toml    SPH on 4 CPU ranks\n\n\
    While it runs:  viewer --attach run1   |   shmctl info run1   |   shmctl send run1 pause"
)]
pub struct Cli {
    /// Create the shared-memory segment NAME and publish into it.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["shm", "load_shm"])]
    pub name_shm: Option<String>,
    /// Publish into a segment named particle-shm-<pid> (printed at start).
    #[arg(long, conflicts_with = "load_shm")]
    pub shm: bool,
    /// Resume from the last complete frame of the existing segment NAME (whose solver died)
    /// and keep publishing into it. Positions at frame precision; contact history restarts; a
    /// run with inflow or outflow keeps its removed count and mass, and each inflow source goes
    /// on after its newest particle.
    #[arg(long, value_name = "NAME")]
    pub load_shm: Option<String>,
    /// Case file (TOML). Without it the built-in falling-box case runs.
    #[arg(long, value_name = "FILE")]
    pub case: Option<PathBuf>,
    /// Continue from a checkpoint file written by --checkpoint-every or the checkpoint command.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["case", "load_shm"])]
    pub restart: Option<PathBuf>,
    /// Particles in the built-in case [default: 10000 on the CPU, 1000000 on CUDA].
    #[arg(long)]
    pub particles: Option<u64>,
    #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
    pub backend: BackendChoice,
    /// Cut the domain into N slabs, one CPU worker each, exchanging ghost layers and migrating
    /// particles every step (overrides the case's [decomposition]). Results are bit-identical
    /// for every N; speed is what changes. SPH: one thread per slab, each holding arrays for
    /// every particle (as an MPI rank does), so memory grows with N; a slab needs at least 3
    /// layers of the kernel support.
    #[arg(long, value_name = "N")]
    pub subdomains: Option<u32>,
    /// Axis the slabs are cut along [default: the longest axis of the domain; on ties x on the
    /// CPU, y on GPUs, whose memory keeps a y layer in longer runs].
    #[arg(long, value_enum, value_name = "AXIS")]
    pub split_axis: Option<solver::decomp::Axis>,
    /// Dynamic load balancing of the sub-domains: every 32 steps slab bounds move by one cell
    /// layer toward equal measured time (`time`), equal particle counts (`count`), the faster
    /// of two neighbours whose times differ by more than 5 % (`neighbour`, Verma et al.), or from
    /// the slowest to the fastest worker when they differ from the mean by more than half a
    /// layer's time (`slice`, GPUSPH); results do not change, only speed. On GPUs a move by
    /// `time`, `neighbour` or `slice` is undone when the steps after it are slower, and the next
    /// waits longer (a layer moved into a dense bed can cost more in ghosts than it saves)
    /// [default: the case's, else time].
    #[arg(long, value_enum, value_name = "HOW")]
    pub balance: Option<solver::decomp::Balance>,
    /// SPH on several GPUs or MPI ranks: where the slabs start. `work` (the default) cuts at
    /// equal estimated work, the pairs each particle's sums walk, so that the walls of a dry
    /// part of the tank, which cost almost nothing, do not draw a slab; `count` at equal
    /// particle counts, fluid and boundary alike. The balancing moves the bounds from there;
    /// results do not change, only speed.
    #[arg(long, value_enum, value_name = "HOW")]
    pub first_cut: Option<solver::sph::slabs::FirstCut>,
    /// SPH on several GPUs or MPI ranks: steps between two balancing decisions [default: 32,
    /// as XPS]. Shorter follows a moving load sooner; each decision costs a collective and,
    /// when a bound moves, a hand-over of one layer.
    #[arg(long, value_name = "STEPS", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub balance_every: Option<u64>,
    /// SPH on several GPUs or MPI ranks: the balancing's threshold. `neighbour`: p, the relative
    /// time difference of two neighbours that moves their bound [0.05, Verma et al.]; `slice`:
    /// H_LB, in units of one layer's time [0.5, GPUSPH]; `count` and `time`: the imbalance
    /// tolerated, relative to the mean [0.05].
    #[arg(long, value_name = "X", value_parser = parse_threshold)]
    pub balance_threshold: Option<f64>,
    /// GPUs for the CUDA backend: one index (`0`), a comma-separated list (`0,1`: one
    /// simulation split into slabs along --split-axis, one per GPU, exchanging boundary layers
    /// device to device), or `all`. Under mpirun each rank takes one GPU: the list's entry at
    /// its place among the ranks of its host. Results are the same on any number of GPUs: bit
    /// for bit in --double, and with --skin 0; with a skin, the GPUs search together on one
    /// schedule and give one GPU's bits until they must search early (moves past half the
    /// skin, where one GPU searches wider cells instead), from where the contacts are summed
    /// in another order (last-bit differences); runs repeat bit for bit. Between searches
    /// each GPU sends its boundary layers to its neighbours while it computes its interior;
    /// the progress line shows how much of that exchange was hidden. Naming GPUs on a machine
    /// without an NVIDIA driver is an error, not a run on the CPU (leave it out, or give
    /// --backend cpu, which ignores it).
    #[arg(long, default_value = "0", value_name = "LIST")]
    pub devices: Devices,
    /// Whether `--devices` was on the command line (not the default): with `--backend auto` on
    /// a machine without a GPU, a run that names GPUs stops instead of running on the CPU.
    #[arg(skip)]
    pub devices_given: bool,
    /// DEM on GPUs: Verlet skin of the neighbour search, as a fraction of the largest particle
    /// diameter, or `auto`. Cells are that much wider and the search (hash, sort, reorder, and
    /// on several GPUs the exchange) runs only when some particle may have moved half the
    /// skin, instead of every step; contacts are found exactly either way, summed in another
    /// order (last-bit differences). `auto`: 0.1 from 500,000 particles up, wider for smaller
    /// cases (up to 0.5 at 10,000), whose steps are short enough that each search's launches
    /// count. 0 searches every step. Off in --double, with velocity Verlet, inflow and outflow.
    #[arg(long, value_name = "FRACTION", default_value = "auto", value_parser = parse_skin)]
    pub skin: f64,
    /// DEM on one GPU: how the device stores the particles. `auto` takes the fastest layout
    /// that fits: two copies of the state, a Verlet list and, with friction, two contact
    /// histories (about 760 B/particle), dropping the list, then the second history (about
    /// 390 B), then the second copy of the state (about 350 B), then `compact` (with friction)
    /// when the case does not fit.
    /// `compact` keeps one copy of the state, no Verlet list, and each particle pair's
    /// tangential spring once, in rows of 6 entries per particle with spill rows of 6 more for
    /// the particles that need them (about 200 B/particle, 207 in the built-in case; its speed
    /// about 0.4x that of the fastest layout, 0.6x that of one history buffer); `compact:N`
    /// makes the rows N entries long (1 to 26; spill rows take a row to at most 26). A row holds
    /// the pairs its particle keeps (those with the contacts below it: about half, 6 of 12 in
    /// a close packing, whatever the ids) and its wall and mesh contacts; the spill rows grow
    /// with what the run takes; a run whose rows fill stops with an error rather than lose
    /// friction. One GPU. With velocity Verlet, whose last forces must outlive the search, it
    /// keeps two copies of the state (about 45 B/particle more) and a pair with the particle of
    /// the lower id, so more rows take spill rows.
    #[arg(long, value_name = "LAYOUT", default_value = "auto", value_parser = parse_gpu_memory)]
    pub gpu_memory: GpuMemory,
    /// CPU threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Simulated end time [s] (overrides the case).
    #[arg(long)]
    pub end_time: Option<f64>,
    /// Time step [s] (overrides the case; checked against the contact time). SPH: the largest
    /// step, each step being the CFL step at most this.
    #[arg(long)]
    pub dt: Option<f64>,
    /// SPH: particle spacing dp [m], overriding the case's `[sph] spacing` (half the spacing
    /// makes about 8 times the particles and steps about half as long). The segment and the
    /// checkpoints keep it, as they keep --dt and --end-time.
    #[arg(long, value_name = "METRES")]
    pub spacing: Option<f64>,
    /// Publication interval in simulated seconds [default: 1/100 of the end time, at most 0.01].
    #[arg(long, value_name = "SECONDS")]
    pub refresh: Option<f64>,
    /// Also publish at least every MS milliseconds of wall-clock time (0: off).
    #[arg(long, value_name = "MS", default_value_t = 100)]
    pub refresh_wall_ms: u64,
    /// Directory for result files (VTK series for ParaView, checkpoints).
    #[arg(long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Write VTK results every SECONDS of simulated time (needs --output).
    #[arg(long, value_name = "SECONDS")]
    pub output_every: Option<f64>,
    /// Write a checkpoint every SECONDS of simulated time (needs --output).
    #[arg(long, value_name = "SECONDS")]
    pub checkpoint_every: Option<f64>,
    /// Per-particle arrays each frame carries, comma-separated. DEM: pos, vel, omega, force,
    /// contacts (positions always; forces cost 12 bytes per particle in every frame slot, so
    /// they are stored only when asked). SPH: pos, vel, density, pressure, kind (positions and
    /// kinds always; a frame without vel and density cannot be resumed with --load-shm)
    /// [default: the case's `[output] fields`, else DEM pos,vel,omega,contacts, SPH all].
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub fields: Option<Vec<String>>,
    /// Leave the segment in /dev/shm after a clean exit (it is always left after a crash).
    #[arg(long)]
    pub keep_shm: bool,
    /// Let the owner's group read and command the segment (mode 0660 instead of 0600).
    #[arg(long)]
    pub group_access: bool,
    /// Seconds between progress lines on stderr.
    #[arg(long, default_value_t = 2.0)]
    pub progress_every: f64,
}

impl Cli {
    /// `--subdomains` and `--split-axis`.
    pub fn decomposition(&self) -> solver::decomp::DecompositionOverride {
        solver::decomp::DecompositionOverride {
            subdomains: self.subdomains,
            split_axis: self.split_axis,
            balance: self.balance,
        }
    }

    /// The frame field mask of method `M` that `--fields` asks for, else `from_case` (the
    /// case's `[output] fields`, or the method's default).
    pub fn frame_mask<M, E>(
        &self,
        from_case: impl FnOnce() -> Result<u32, E>,
    ) -> anyhow::Result<u32>
    where
        M: solver::exec::method::FrameFields,
        E: Into<anyhow::Error>,
    {
        match &self.fields {
            Some(names) => solver::exec::method::frame_mask::<M>(names)
                .map_err(|e| anyhow::anyhow!("--fields: {e}")),
            None => from_case().map_err(Into::into),
        }
    }

    pub fn segment_name(&self) -> Option<String> {
        if let Some(n) = &self.name_shm {
            Some(n.clone())
        } else if self.shm {
            Some(format!("particle-shm-{}", std::process::id()))
        } else {
            self.load_shm.clone()
        }
    }
}

/// `--skin`: a fraction of the diameter in [0, 1], or `auto` (`SKIN_AUTO`).
fn parse_threshold(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("expected a number such as 0.05, got {s:?}"))?;
    if !(v > 0.0 && v <= 100.0) {
        return Err(format!(
            "the threshold is a positive share (0.05 is 5 %), at most 100; got {v}"
        ));
    }
    Ok(v)
}

fn parse_skin(s: &str) -> Result<f64, String> {
    if s == "auto" {
        return Ok(solver::dem::cuda::SKIN_AUTO);
    }
    let v: f64 = s
        .parse()
        .map_err(|_| format!("expected `auto` or a number such as 0.1, got {s:?}"))?;
    if !(0.0..=1.0).contains(&v) {
        return Err(format!(
            "the skin is a fraction of the largest diameter, from 0 (search every step) to 1; got {v}"
        ));
    }
    Ok(v)
}

/// `--gpu-memory`: the device layout of a DEM run on one GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuMemory {
    /// The fastest layout that fits (`CudaOptions`' defaults).
    Auto,
    /// One copy of the state, each pair's spring once, rows of this many entries (and spill
    /// rows: [`compact_spill`]).
    Compact(u32),
}

/// Row length of `--gpu-memory compact` without `:N`. A particle keeps the contact pairs with
/// the particles below it (`state::owns_pair_keyed`, owner keys: about half its contacts,
/// whatever the ids) and its walls: in a poured bed (about 6 contacts a particle) rows of 6
/// spill rarely (the main job: 207 B/particle); a bed compressed to 12 contacts keeps 6 at
/// every site but the layer under a lid (7, in spill rows): 198 B/particle at 10 M in any id
/// order (session 36; by the ids, shuffled, it needed rows of 8 and 241.5 B).
pub const COMPACT_ROWS: u32 = solver::dem::cuda::COMPACT_ROWS;

/// Entries of a spill row behind compact rows of `rows` entries: 6, or fewer where a row
/// would pass [`kernels::PAIRS_MAX_ROW`] entries; none behind rows of 1 (a row needs an entry
/// beside its spill row's link).
pub fn compact_spill(rows: u32) -> u32 {
    if rows < 2 {
        0
    } else {
        solver::dem::cuda::COMPACT_SPILL.min(kernels::PAIRS_MAX_ROW + 1 - rows)
    }
}

fn parse_gpu_memory(s: &str) -> Result<GpuMemory, String> {
    let max = kernels::PAIRS_MAX_ROW;
    match s.split_once(':') {
        None if s == "auto" => Ok(GpuMemory::Auto),
        None if s == "compact" => Ok(GpuMemory::Compact(COMPACT_ROWS)),
        Some(("compact", n)) => match n.parse::<u32>() {
            Ok(n) if (1..=max).contains(&n) => Ok(GpuMemory::Compact(n)),
            _ => Err(format!(
                "compact:N takes rows of 1 to {max} entries, not {n:?}"
            )),
        },
        _ => Err(format!(
            "expected `auto`, `compact` or `compact:N` (rows of N entries), got {s:?}"
        )),
    }
}

/// `--devices`: GPU ordinals, or every GPU of the machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Devices {
    List(Vec<usize>),
    All,
}

impl std::str::FromStr for Devices {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.trim() == "all" {
            return Ok(Devices::All);
        }
        let list: Vec<usize> = s
            .split(',')
            .map(|d| {
                d.trim().parse::<usize>().map_err(|_| {
                    format!("`{d}` is not a GPU index: give indices like 0 or 0,1, or `all`")
                })
            })
            .collect::<Result<_, _>>()?;
        if list.is_empty() || list.len() > 64 {
            return Err(format!("{} GPUs listed: give 1 to 64", list.len()));
        }
        Ok(Devices::List(list))
    }
}

impl Devices {
    /// The ordinals; `all` asks the driver how many GPUs there are.
    pub fn resolve(&self) -> anyhow::Result<Vec<usize>> {
        match self {
            Devices::List(l) => Ok(l.clone()),
            Devices::All => {
                solver::dem::cuda::driver::driver_available()?;
                let n = solver::dem::cuda::driver::device_count()?;
                if n == 0 {
                    anyhow::bail!("--devices all: the driver reports no GPU");
                }
                Ok((0..n).collect())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `compact` is rows of 6 with spill rows of 6; a row and its spill row never pass the
    /// count word's 26 entries, and rows of 1 have no spill rows.
    #[test]
    fn compact_layouts_spill_within_a_row_word() {
        assert_eq!(parse_gpu_memory("compact"), Ok(GpuMemory::Compact(6)));
        assert_eq!(parse_gpu_memory("compact:3"), Ok(GpuMemory::Compact(3)));
        assert_eq!(compact_spill(COMPACT_ROWS), 6);
        assert_eq!(compact_spill(1), 0);
        assert_eq!(compact_spill(24), 3);
        for rows in 2..=kernels::PAIRS_MAX_ROW {
            assert!(
                rows - 1 + compact_spill(rows) <= kernels::PAIRS_MAX_ROW,
                "rows of {rows}"
            );
        }
    }
}
