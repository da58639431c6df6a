//! An SPH case: its parameters (`[sph]` of a case file with `method = "sph"`), the fluid blocks,
//! and the particles they give: fluid on a lattice of spacing dp with hydrostatic density, and
//! dynamic boundary particles (Crespo, Gomez-Gesteira & Dalrymple 2007) in layers outside the
//! box walls, enough layers to fill the kernel support.

use std::path::PathBuf;

use super::motion::{MovingSolids, MAX_MOVING_SOLIDS};
use super::physics::{self, SphKernel};
use crate::core::geometry::{self, Motion};
use crate::core::stl::Triangle;
use crate::core::vec3::V3;
use crate::decomp::Decomposition;
use serde::{Deserialize, Serialize};

/// Density diffusion (delta-SPH) variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Diffusion {
    None,
    /// Molteni & Colagrossi (2009).
    Molteni,
    /// Fourtakas et al. (2019): the dynamic density only (the default: a still tank stays still).
    #[default]
    Fourtakas,
}

/// Kernel name in a case file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelName {
    #[default]
    Wendland,
    CubicSpline,
}

impl KernelName {
    pub fn kernel(self) -> SphKernel {
        match self {
            KernelName::Wendland => SphKernel::WendlandC2,
            KernelName::CubicSpline => SphKernel::CubicSpline,
        }
    }
}

fn d_coefh() -> f64 {
    1.0
}
fn d_rho0() -> f64 {
    1000.0
}
fn d_coef_sound() -> f64 {
    20.0
}
fn d_alpha() -> f64 {
    0.1
}
fn d_delta() -> f64 {
    0.1
}
fn d_one() -> f64 {
    1.0
}
fn d_cfl() -> f64 {
    0.2
}
fn d_verlet_steps() -> u32 {
    40
}

/// The time integration scheme (`[sph] integrator`; DualSPHysics' `StepAlgorithm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IntegratorName {
    /// Symplectic position Verlet: a predictor and a corrector, two evaluations of the rates
    /// per step (second order; the default).
    #[default]
    Symplectic,
    /// Verlet (Monaghan 1994): one evaluation per step from the state one step back, an Euler
    /// step every `verlet_steps` steps; half the work of a step for the same CFL step.
    Verlet,
}

/// The integrator of a run as its constants carry it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Integrator {
    #[default]
    Symplectic,
    /// Verlet, every `euler_every`-th step an Euler step (and the first step of a run that has
    /// no state one step back), so that the two interleaved solutions of the leapfrog stay
    /// together.
    Verlet { euler_every: u32 },
}

/// The `[sph]` section: the parameters of the method (DualSPHysics' names in brackets).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SphParams {
    /// Particle spacing dp [m] (`dp`).
    pub spacing: f64,
    /// h = coefh sqrt(3) dp (`coefh`, default 1.0).
    #[serde(default = "d_coefh")]
    pub coefh: f64,
    /// Reference density rho0 [kg/m^3] (default 1000).
    #[serde(default = "d_rho0")]
    pub rho0: f64,
    /// c0 = coef_sound sqrt(g H), H the highest fluid column (`coefsound`, default 20), unless
    /// `sound_speed` gives c0 [m/s] directly.
    #[serde(default = "d_coef_sound")]
    pub coef_sound: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sound_speed: Option<f64>,
    #[serde(default)]
    pub kernel: KernelName,
    /// Monaghan artificial viscosity alpha (`Visco`, default 0.1: the value of DualSPHysics'
    /// dam-break and still-water examples).
    #[serde(default = "d_alpha")]
    pub viscosity: f64,
    /// The artificial viscosity between fluid and boundary particles is `viscosity` times this
    /// (`ViscoBoundFactor`, default 1): below 1 the walls drag less on the fluid along them.
    #[serde(default = "d_one")]
    pub viscosity_boundary_factor: f64,
    #[serde(default)]
    pub diffusion: Diffusion,
    /// delta of the density diffusion (default 0.1).
    #[serde(default = "d_delta")]
    pub delta: f64,
    /// Courant number of the variable time step (default 0.2).
    #[serde(default = "d_cfl")]
    pub cfl: f64,
    /// How the boundary particles get their density (`Boundary`): `"dbc"` (default) integrates
    /// it with the continuity equation, as the fluid's (Crespo et al. 2007); `"mdbc"` sets it at
    /// every step from the fluid around a ghost node mirrored into the fluid (English et al.
    /// 2022), which keeps the walls from holding the water they touch.
    #[serde(default)]
    pub boundary: BoundaryName,
    /// Time integration (`StepAlgorithm`): `"symplectic"` (default) or `"verlet"`.
    #[serde(default)]
    pub integrator: IntegratorName,
    /// Verlet: an Euler step every this many steps (`VerletSteps`, default 40).
    #[serde(default = "d_verlet_steps")]
    pub verlet_steps: u32,
}

/// The boundary condition of `[sph] boundary`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BoundaryName {
    #[default]
    Dbc,
    Mdbc,
}

/// The geometry mDBC mirrors boundary particles through ([`super::mdbc`]): the tank's faces,
/// and the surfaces of the solids, all at rest [m].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MdbcGeometry {
    pub tank_min: V3,
    pub tank_max: V3,
    /// The particle spacing dp [m]: solids' particles lie on the tank's lattice,
    /// x = tank_min + dp (i + 1/2).
    pub spacing: f64,
    /// The kernel's support 2h [m]: a solid's particle deeper than the support plus dp below
    /// its surface has no fluid neighbour, and a closed surface gives it no ghost node.
    pub support: f64,
    /// The obstacles, in the case's order.
    pub solids: Vec<MdbcSolid>,
}

/// An obstacle as mDBC mirrors through it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum MdbcSolid {
    /// A box [min, max]: its particles mirror through the nearest face.
    Cuboid { min: V3, max: V3 },
    /// A closed surface (its triangles, scaled, and their bounding box): its particles mirror
    /// through the surface's closest point.
    Mesh {
        tris: Vec<Triangle>,
        min: V3,
        max: V3,
    },
}

/// A block of fluid or solid: the box [min, max], or the inside of a closed STL surface
/// (`stl`, relative to the case file, its vertices times `scale`).
/// Fluid boxes take the lattice sites x = min + dp (i + 1/2) inside them; fluid from an STL
/// and every solid take the sites of the tank's lattice, x = domain.min + dp (i + 1/2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FluidBlock {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<V3>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<V3>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stl: Option<PathBuf>,
    /// Scale of the STL's vertices (0.001 for a file in mm); default 1.
    #[serde(default = "d_one", skip_serializing_if = "is_one")]
    pub scale: f64,
    /// Solids only: the prescribed motion of the solid (a DEM mesh's `motion`: translation,
    /// rotation, harmonic oscillation or rocking, or a schedule; default fixed). Its coordinates
    /// are the solid's at t = 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub motion: Option<Motion>,
}

fn is_one(v: &f64) -> bool {
    *v == 1.0
}

/// A block resolved: its box, or its closed surface (read and checked) with its bounding box.
#[derive(Debug, Clone)]
enum Shape {
    Cuboid {
        min: V3,
        max: V3,
    },
    Mesh {
        tris: Vec<Triangle>,
        min: V3,
        max: V3,
    },
}

impl Shape {
    fn bounds(&self) -> (V3, V3) {
        match self {
            Shape::Cuboid { min, max } | Shape::Mesh { min, max, .. } => (*min, *max),
        }
    }
}

/// An SPH case (for now its own file type; `method = "sph"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SphCase {
    pub method: String,
    /// Largest time step [s] (the step is the CFL step, at most this).
    pub dt: f64,
    pub end_time: f64,
    #[serde(default = "default_gravity")]
    pub gravity: V3,
    /// The tank: its six faces are walls of boundary particles.
    pub domain: SphDomain,
    pub sph: SphParams,
    pub fluid: Vec<FluidBlock>,
    /// Solids inside the tank (obstacles: boxes, or closed STL surfaces), filled with boundary
    /// particles on the tank's lattice.
    #[serde(default)]
    pub obstacles: Vec<FluidBlock>,
    /// `[decomposition]`, as in a DEM case: CPU sub-domains (`subdomains`), and for every cut
    /// (sub-domains, GPUs, MPI ranks) the split axis and the balancing. The command line's
    /// `--subdomains`, `--split-axis` and `--balance` override it.
    #[serde(default, skip_serializing_if = "is_undecomposed")]
    pub decomposition: Decomposition,
    /// `[output]`, as in a DEM case: VTK and checkpoint intervals (the command line's
    /// `--output-every` and `--checkpoint-every` override them; files need `--output DIR`) and
    /// the fields each frame carries (of [`super::Sph`]'s: `pos`, `vel`, `density`, `pressure`,
    /// `kind`; positions and kinds always).
    #[serde(default, skip_serializing_if = "is_default_output")]
    pub output: crate::case::Output,
    /// Where `stl` paths start (the case file's folder; the working directory when empty).
    #[serde(skip)]
    pub base_dir: PathBuf,
}

/// The tank [m], at rest; `motion` moves its walls (a sloshing tank: an `oscillation` or
/// `rocking`), coordinates as at t = 0.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SphDomain {
    pub min: V3,
    pub max: V3,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub motion: Option<Motion>,
}

fn is_default_output(o: &crate::case::Output) -> bool {
    *o == crate::case::Output::default()
}

fn is_undecomposed(d: &Decomposition) -> bool {
    *d == Decomposition::default()
}

fn default_gravity() -> V3 {
    [0.0, 0.0, -9.81]
}

/// Particle kinds, as the frames' `particle_kind` field numbers them.
pub const KIND_FLUID: u32 = 1;
pub const KIND_BOUNDARY: u32 = 2;

/// Why an SPH case cannot run.
#[derive(Debug, thiserror::Error)]
#[error("{field}: {message}")]
pub struct SphCaseError {
    pub field: String,
    pub message: String,
}

fn bad(field: &str, message: String) -> SphCaseError {
    SphCaseError {
        field: field.to_string(),
        message,
    }
}

/// Constants of a run derived from its case (sent as they are to the other MPI ranks).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SphConstants {
    pub kernel: SphKernel,
    pub dp: f64,
    pub h: f64,
    pub rho0: f64,
    pub c0: f64,
    pub b: f64,
    /// Particle mass rho0 dp^3 [kg].
    pub mass: f64,
    pub alpha: f64,
    /// Artificial viscosity of fluid-boundary pairs, alpha x `viscosity_boundary_factor`.
    pub alpha_boundary: f64,
    pub diffusion: Diffusion,
    pub delta: f64,
    pub cfl: f64,
    pub dt_max: f64,
    pub gravity: V3,
    /// The free surface height of the fluid at rest (highest block top) [m].
    pub surface: f64,
    /// mDBC's geometry when `[sph] boundary = "mdbc"`; None: dynamic boundary particles.
    pub mdbc: Option<MdbcGeometry>,
    pub integrator: Integrator,
}

/// The particles of a case at t = 0: kind, position, density (velocity zero but for the moving
/// solids' particles, which `moving` places), and the moving solids.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SphParticles {
    pub kind: Vec<u32>,
    pub pos: Vec<V3>,
    pub rho: Vec<f64>,
    pub moving: MovingSolids,
}

impl SphCase {
    pub fn from_toml_str(text: &str) -> Result<SphCase, SphCaseError> {
        toml::from_str(text).map_err(|e| bad("case", e.to_string()))
    }

    /// At least as many particles as [`SphCase::particles`] places, counted without placing
    /// them (for the memory check before a run allocates): the tank's wall shell and the sites
    /// of every block's box (an STL's bounding box; the whole tank where it cannot be read,
    /// which placing will report).
    pub fn particle_bound(&self, c: &SphConstants) -> u64 {
        let dp = c.dp;
        let sites = |min: V3, max: V3, round: bool| -> u64 {
            (0..3)
                .map(|a| {
                    let n = (max[a] - min[a]) / dp;
                    let n = if round {
                        n.round()
                    } else {
                        (n + 1e-9).floor() + 1.0
                    };
                    n.max(0.0) as u64
                })
                .fold(1u64, u64::saturating_mul)
        };
        let (lo, hi) = (self.domain.min, self.domain.max);
        let interior = sites(lo, hi, true);
        let layers = (2.0 * c.h / dp).ceil();
        let grown = |p: V3, by: f64| -> V3 { std::array::from_fn(|a| p[a] + by * dp) };
        let shell = sites(grown(lo, -layers), grown(hi, layers), true).saturating_sub(interior);
        let blocks = self
            .fluid
            .iter()
            .chain(&self.obstacles)
            .map(|b| match self.shape("block", b) {
                Ok(Shape::Cuboid { min, max } | Shape::Mesh { min, max, .. }) => {
                    sites(min, max, false).min(interior)
                }
                Err(_) => interior,
            })
            .fold(0u64, u64::saturating_add);
        shell.saturating_add(blocks)
    }

    /// The segment field mask of `[output] fields` (every SPH field when absent).
    pub fn frame_fields(&self) -> Result<u32, SphCaseError> {
        self.output
            .frame_mask::<super::Sph>()
            .map_err(|m| bad("output.fields", m))
    }

    /// Whether a solid moves (`[[obstacles]] motion` or `[domain] motion`, not fixed).
    pub fn has_moving_solids(&self) -> bool {
        self.obstacles
            .iter()
            .map(|o| &o.motion)
            .chain([&self.domain.motion])
            .any(|m| m.as_ref().is_some_and(|m| !m.is_fixed()))
    }

    /// The tank's motion, when it moves.
    fn domain_motion(&self) -> Option<&Motion> {
        self.domain.motion.as_ref().filter(|m| !m.is_fixed())
    }

    /// Whether a block or solid comes from an STL file.
    pub fn uses_stl(&self) -> bool {
        self.fluid
            .iter()
            .chain(&self.obstacles)
            .any(|b| b.stl.is_some())
    }

    /// The case as TOML with its STL paths absolute (canonical where the file exists), so that
    /// a run resumed from its segment finds them from any working directory.
    pub fn self_contained_toml(&self) -> Result<String, SphCaseError> {
        let mut c = self.clone();
        for b in c.fluid.iter_mut().chain(c.obstacles.iter_mut()) {
            if let Some(p) = &b.stl {
                let full = self.base_dir.join(p);
                b.stl = Some(std::fs::canonicalize(&full).unwrap_or(full));
            }
        }
        toml::to_string(&c).map_err(|e| bad("case", e.to_string()))
    }

    /// Block `b` (named `field` in errors) resolved: a box, or its STL read, scaled, checked to
    /// be closed and non-empty.
    fn shape(&self, field: &str, b: &FluidBlock) -> Result<Shape, SphCaseError> {
        match (b.min, b.max, &b.stl) {
            (Some(min), Some(max), None) => Ok(Shape::Cuboid { min, max }),
            (None, None, Some(path)) => {
                if !(b.scale > 0.0 && b.scale.is_finite()) {
                    return Err(bad(
                        &format!("{field}.scale"),
                        format!("must be > 0, got {}", b.scale),
                    ));
                }
                let full = self.base_dir.join(path);
                let tris: Vec<Triangle> = crate::core::stl::read_stl(&full)
                    .map_err(|e| bad(&format!("{field}.stl"), e.to_string()))?
                    .into_iter()
                    .map(|t| t.map(|v| v.map(|x| x * b.scale)))
                    .filter(|t| geometry::triangle_area(t) > 0.0)
                    .collect();
                if tris.is_empty() {
                    return Err(bad(
                        &format!("{field}.stl"),
                        format!("{}: no triangle with an area", full.display()),
                    ));
                }
                if let Some((a, c, n)) = geometry::open_edge(&tris) {
                    return Err(bad(
                        &format!("{field}.stl"),
                        format!(
                            "{}: not a closed surface: the edge {a:?} - {c:?} belongs to {n} \
                             triangle(s); a fluid or solid needs a watertight mesh (every edge \
                             shared by exactly two triangles)",
                            full.display()
                        ),
                    ));
                }
                let mut min = [f64::INFINITY; 3];
                let mut max = [f64::NEG_INFINITY; 3];
                for v in tris.iter().flatten() {
                    for a in 0..3 {
                        min[a] = min[a].min(v[a]);
                        max[a] = max[a].max(v[a]);
                    }
                }
                Ok(Shape::Mesh { tris, min, max })
            }
            _ => Err(bad(
                field,
                "needs either `min` and `max` (a box) or `stl` (a closed surface)".into(),
            )),
        }
    }

    /// The sites of the tank's lattice (dp) inside `shape`, in (k, j, i) order.
    fn tank_sites(&self, field: &str, shape: &Shape, dp: f64) -> Result<Sites, SphCaseError> {
        let origin = self.domain.min;
        let (min, max) = shape.bounds();
        let (first, last) = index_box(origin, dp, min, max);
        let idx = match shape {
            Shape::Cuboid { .. } => {
                let mut out = Vec::new();
                for k in first[2]..=last[2] {
                    for j in first[1]..=last[1] {
                        for i in first[0]..=last[0] {
                            out.push([i, j, k]);
                        }
                    }
                }
                out
            }
            Shape::Mesh { tris, .. } => {
                let idx = geometry::lattice_sites_inside(tris, origin, dp, first, last)
                    .map_err(|e| bad(&format!("{field}.stl"), e))?;
                if idx.is_empty() {
                    return Err(bad(
                        &format!("{field}.stl"),
                        format!(
                            "no site of the particle lattice (spacing {dp} m) lies inside the \
                             surface: it is thinner than the spacing (check `scale`, or refine \
                             `sph.spacing`)"
                        ),
                    ));
                }
                idx
            }
        };
        Ok(Sites { origin, idx })
    }

    /// A moving solid (bounding box `min`, `max` at rest) must stay inside the tank for the whole
    /// run: its box's corners are checked at 4,096 instants over [0, end_time] (over one period
    /// of a harmonic motion, if shorter) and at the ends of its schedule's segments (a box's
    /// rotated corners bound the rotated box).
    fn stays_in_tank(&self, field: &str, m: &Motion, min: V3, max: V3) -> Result<(), SphCaseError> {
        let corners = box_corners(min, max);
        let n = 4096;
        // A harmonic motion repeats: its first period (or the run, if shorter) holds every pose.
        let span = match m {
            Motion::Oscillation { frequency, .. } | Motion::Rocking { frequency, .. }
                if *frequency > 0.0 =>
            {
                self.end_time.min(1.0 / frequency)
            }
            _ => self.end_time,
        };
        let mut times: Vec<f64> = (0..=n).map(|k| span * k as f64 / n as f64).collect();
        if let Motion::Schedule { segments } = m {
            times.extend(
                segments
                    .iter()
                    .flat_map(|s| [Some(s.start()), s.end()])
                    .flatten()
                    .filter(|&t| t <= self.end_time),
            );
        }
        let (lo, hi) = (self.domain.min, self.domain.max);
        let slack = 1e-9 * (0..3).map(|a| hi[a] - lo[a]).fold(0.0, f64::max);
        for t in times {
            let pose = m.transform_at(t);
            for c in corners {
                let x = pose.apply(c);
                if (0..3).any(|a| x[a] < lo[a] - slack || x[a] > hi[a] + slack) {
                    return Err(bad(
                        &format!("{field}.motion"),
                        format!(
                            "takes the solid out of the tank {lo:?}..{hi:?}: at t = {t:.6} s a \
                             corner of its box is at {x:?}; a moving solid must stay inside the \
                             tank for the whole run (end_time = {} s)",
                            self.end_time
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Checks the numbers and derives the constants: clear errors for an absurd spacing, a
    /// kernel support larger than the tank, a fluid block outside the tank.
    pub fn constants(&self) -> Result<SphConstants, SphCaseError> {
        if self.method != "sph" {
            return Err(bad(
                "method",
                format!("must be \"sph\", got {:?}", self.method),
            ));
        }
        if let Err(e) = self.decomposition.check() {
            return Err(bad("decomposition.subdomains", e.to_string()));
        }
        for (name, v) in [
            ("output.vtk_interval", self.output.vtk_interval),
            (
                "output.checkpoint_interval",
                self.output.checkpoint_interval,
            ),
        ] {
            if let Some(v) = v {
                // Reads "output.vtk_interval: it must be between ..." (`bad` adds the key).
                shm_protocol::limits::check_sim_interval("it", v).map_err(|m| bad(name, m))?;
            }
        }
        self.frame_fields()?;
        let p = &self.sph;
        let ext: V3 = std::array::from_fn(|a| self.domain.max[a] - self.domain.min[a]);
        if ext.iter().any(|&e| !(e > 0.0 && e.is_finite())) {
            return Err(bad("domain", "max must exceed min on every axis".into()));
        }
        let smallest = ext.iter().copied().fold(f64::INFINITY, f64::min);
        if !(p.spacing > 0.0 && p.spacing.is_finite()) || p.spacing > 0.5 * smallest {
            return Err(bad(
                "sph.spacing",
                format!(
                    "= {} m is absurd for a tank whose smallest side is {smallest} m (need 0 < dp <= half of it)",
                    p.spacing
                ),
            ));
        }
        let cells = ext.iter().map(|e| e / p.spacing).product::<f64>();
        if cells > 4e9 {
            return Err(bad(
                "sph.spacing",
                format!("= {} m gives about {cells:.2e} particles in the tank: more than a run may have", p.spacing),
            ));
        }
        for (name, v, lo, hi) in [
            ("sph.coefh", p.coefh, 0.5, 3.0),
            ("sph.rho0", p.rho0, 1e-3, 1e5),
            ("sph.coef_sound", p.coef_sound, 1.0, 1e3),
            ("sph.viscosity", p.viscosity, 0.0, 10.0),
            (
                "sph.viscosity_boundary_factor",
                p.viscosity_boundary_factor,
                0.0,
                10.0,
            ),
            ("sph.delta", p.delta, 0.0, 1.0),
            ("sph.cfl", p.cfl, 1e-3, 1.0),
            ("dt", self.dt, 1e-12, 1.0),
            ("end_time", self.end_time, 1e-12, 1e9),
        ] {
            if !(v >= lo && v <= hi) {
                return Err(bad(name, format!("must be in [{lo}, {hi}], got {v}")));
            }
        }
        if !(1..=10_000).contains(&p.verlet_steps) {
            return Err(bad(
                "sph.verlet_steps",
                format!("must be in [1, 10000], got {}", p.verlet_steps),
            ));
        }
        let h = p.coefh * 3f64.sqrt() * p.spacing;
        if 2.0 * h >= smallest {
            return Err(bad(
                "sph.spacing",
                format!("= {} m gives a kernel support 2h = {:.4} m that does not fit in the tank's smallest side ({smallest} m)", p.spacing, 2.0 * h),
            ));
        }
        if self.fluid.is_empty() {
            return Err(bad("fluid", "must list at least one block".into()));
        }
        let mut surface = f64::NEG_INFINITY;
        let inside_tank = |min: V3, max: V3| {
            (0..3).all(|a| {
                min[a] >= self.domain.min[a] - 1e-12
                    && max[a] <= self.domain.max[a] + 1e-12
                    && max[a] - min[a] >= p.spacing
            })
        };
        let mut boxes = Vec::new();
        for (k, b) in self.fluid.iter().enumerate() {
            let field = format!("fluid[{k}]");
            if b.motion.is_some() {
                return Err(bad(
                    &format!("{field}.motion"),
                    "only solids move: give `motion` to an `[[obstacles]]` block".into(),
                ));
            }
            let shape = self.shape(&field, b)?;
            let (min, max) = shape.bounds();
            if !inside_tank(min, max) {
                return Err(bad(
                    &field,
                    format!(
                        "{min:?}..{max:?} must lie inside the tank {:?}..{:?} and be at least one spacing thick",
                        self.domain.min, self.domain.max
                    ),
                ));
            }
            if let Shape::Cuboid { .. } = shape {
                boxes.push((k, min, max));
            }
            surface = surface.max(max[2]);
        }
        let mut moving = Vec::new();
        if let Some(m) = &self.domain.motion {
            crate::case::check_motion("domain", m).map_err(|(f, e)| bad(&f, e))?;
        }
        for (k, o) in self.obstacles.iter().enumerate() {
            let field = format!("obstacles[{k}]");
            let shape = self.shape(&field, o)?;
            let (min, max) = shape.bounds();
            if let Some(m) = &o.motion {
                crate::case::check_motion(&field, m).map_err(|(f, e)| bad(&f, e))?;
                if !m.is_fixed() {
                    // Inside a moving tank a solid moves with it (give it the tank's motion):
                    // not checked against the tank at rest.
                    if self.domain_motion().is_none() {
                        self.stays_in_tank(&field, m, min, max)?;
                    }
                    moving.push((field.clone(), m, min, max));
                }
            }
            if !inside_tank(min, max) {
                return Err(bad(
                    &field,
                    format!(
                        "{min:?}..{max:?} must lie inside the tank and be at least one spacing thick"
                    ),
                ));
            }
            // A fluid box reaching into a solid box is a mistake; fluid particles inside (or
            // within dp/2 of) a solid from an STL are left out (`particles`), as a curved
            // solid seldom fits a box of fluid.
            if let Shape::Cuboid { .. } = shape {
                if let Some((f, ..)) = boxes
                    .iter()
                    .find(|(_, bmin, bmax)| (0..3).all(|a| bmin[a] < max[a] && min[a] < bmax[a]))
                {
                    return Err(bad(
                        &field,
                        format!("overlaps fluid[{f}]: a fluid block must not reach into a solid"),
                    ));
                }
            }
        }
        if let Some(m) = self.domain_motion() {
            moving.push(("domain".into(), m, self.domain.min, self.domain.max));
        }
        if moving.len() > MAX_MOVING_SOLIDS {
            return Err(bad(
                "obstacles",
                format!(
                    "{} solids move (the tank counts as one when it moves); at most \
                     {MAX_MOVING_SOLIDS} may (a GPU takes their poses as one launch parameter)",
                    moving.len()
                ),
            ));
        }
        let mdbc = match p.boundary {
            BoundaryName::Dbc => None,
            BoundaryName::Mdbc => {
                let mut solids = Vec::new();
                for (k, o) in self.obstacles.iter().enumerate() {
                    solids.push(match self.shape(&format!("obstacles[{k}]"), o)? {
                        Shape::Cuboid { min, max } => MdbcSolid::Cuboid { min, max },
                        Shape::Mesh { tris, min, max } => MdbcSolid::Mesh { tris, min, max },
                    });
                }
                Some(MdbcGeometry {
                    tank_min: self.domain.min,
                    tank_max: self.domain.max,
                    spacing: p.spacing,
                    support: 2.0 * h,
                    solids,
                })
            }
        };
        let g = crate::core::vec3::norm(self.gravity);
        let depth = surface - self.domain.min[2];
        let c0 = match p.sound_speed {
            Some(c) if c > 0.0 && c.is_finite() => c,
            Some(c) => return Err(bad("sph.sound_speed", format!("must be > 0, got {c}"))),
            None => physics::sound_speed_from_coefficient(p.coef_sound, g.max(1e-12), depth),
        };
        for (field, m, min, max) in &moving {
            // Weak compressibility holds while the flow is slower than c0 / 10 (Monaghan 1994):
            // a solid driving the water faster makes it compress by more than 1 %.
            let speed = m.max_speed(&box_corners(*min, *max));
            if speed > 0.1 * c0 {
                tracing::warn!(
                    "{field}.motion moves at up to {speed:.3} m/s, more than a tenth of the speed \
                     of sound c0 = {c0:.3} m/s: the water will compress by more than 1 %; raise \
                     sph.coef_sound or give sph.sound_speed >= {:.3} m/s",
                    10.0 * speed
                );
            }
        }
        Ok(SphConstants {
            kernel: p.kernel.kernel(),
            dp: p.spacing,
            h,
            rho0: p.rho0,
            c0,
            b: physics::tait_b(p.rho0, c0),
            mass: p.rho0 * p.spacing.powi(3),
            alpha: p.viscosity,
            alpha_boundary: p.viscosity * p.viscosity_boundary_factor,
            diffusion: p.diffusion,
            delta: p.delta,
            cfl: p.cfl,
            dt_max: self.dt,
            gravity: self.gravity,
            surface,
            mdbc,
            integrator: match p.integrator {
                IntegratorName::Symplectic => Integrator::Symplectic,
                IntegratorName::Verlet => Integrator::Verlet {
                    euler_every: p.verlet_steps,
                },
            },
        })
    }

    /// The particles at t = 0: fluid lattices (hydrostatic density below `surface`), the solids'
    /// sites, then the boundary layers outside the six walls (their density hydrostatic too,
    /// never below rho0). Boundary layers: ceil(2h / dp) sheets, spacing dp, so a fluid particle
    /// at a wall has a full kernel support. Where the case has an STL block, fluid particles
    /// inside a solid or closer than dp/2 to one of its particles are left out (a fluid box that
    /// also covers the place of a curved solid is the usual way to fill around it). Errors: an
    /// STL that cannot be read or is not closed.
    pub fn particles(&self, c: &SphConstants) -> Result<SphParticles, SphCaseError> {
        let mut out = SphParticles::default();
        let g = crate::core::vec3::norm(c.gravity);
        let rho_at = |z: f64| {
            let depth = (c.surface - z).max(0.0);
            physics::hydrostatic_density(c.rho0, c.b, g, depth)
        };
        let dp = c.dp;
        let mut blocks: Vec<Sites> = Vec::new();
        for (k, b) in self.fluid.iter().enumerate() {
            let field = format!("fluid[{k}]");
            match self.shape(&field, b)? {
                Shape::Cuboid { min, max } => {
                    let n: [i64; 3] =
                        std::array::from_fn(|a| ((max[a] - min[a]) / dp + 1e-9).floor() as i64);
                    let mut idx = Vec::with_capacity(n.iter().product::<i64>().max(0) as usize);
                    for k in 0..n[2] {
                        for j in 0..n[1] {
                            for i in 0..n[0] {
                                idx.push([i, j, k]);
                            }
                        }
                    }
                    blocks.push(Sites { origin: min, idx });
                }
                mesh @ Shape::Mesh { .. } => blocks.push(self.tank_sites(&field, &mesh, dp)?),
            }
        }
        // Solids: the tank's lattice sites inside each box or closed surface.
        let mut solid: Vec<V3> = Vec::new();
        // The moving solid each solid particle belongs to, if any.
        let mut solid_body: Vec<Option<u32>> = Vec::new();
        let mut shapes = Vec::new();
        for (k, o) in self.obstacles.iter().enumerate() {
            let field = format!("obstacles[{k}]");
            let shape = self.shape(&field, o)?;
            let before = solid.len();
            solid.extend(self.tank_sites(&field, &shape, dp)?.positions(dp));
            let body = match o.motion.as_ref().filter(|m| !m.is_fixed()) {
                Some(m) => {
                    out.moving.motions.push(m.clone());
                    Some(out.moving.motions.len() as u32 - 1)
                }
                None => None,
            };
            solid_body.resize(solid.len(), body);
            debug_assert!(solid_body[before..].iter().all(|&b| b == body));
            shapes.push((field, shape));
        }
        if self.uses_stl() {
            let before: usize = blocks.iter().map(|b| b.idx.len()).sum();
            blocks = fluid_clear_of_solids(blocks, &solid, &shapes, dp)?;
            let after: usize = blocks.iter().map(|b| b.idx.len()).sum();
            if after < before {
                tracing::info!(
                    "SPH case: {} fluid particles inside or within dp/2 of a solid left out",
                    before - after
                );
            }
        }
        let fluid: Vec<V3> = blocks.iter().flat_map(|b| b.positions(dp)).collect();
        for p in fluid {
            out.kind.push(KIND_FLUID);
            out.rho.push(rho_at(p[2]));
            out.pos.push(p);
        }
        for (p, body) in solid.into_iter().zip(solid_body) {
            if let Some(b) = body {
                out.moving.ids.push(out.pos.len() as u32);
                out.moving.body.push(b);
                out.moving.rest.push(p);
            }
            out.kind.push(KIND_BOUNDARY);
            out.rho.push(rho_at(p[2]).max(c.rho0));
            out.pos.push(p);
        }
        let (lo, hi) = (self.domain.min, self.domain.max);
        let tank_body = self.domain_motion().map(|m| {
            out.moving.motions.push(m.clone());
            out.moving.motions.len() as u32 - 1
        });
        // Boundary: a lattice of spacing dp offset by dp/2 from the walls, filling the shell of
        // thickness `layers` dp around the tank.
        let layers = (2.0 * c.h / dp).ceil() as i64;
        let n: [i64; 3] = std::array::from_fn(|a| ((hi[a] - lo[a]) / dp).round() as i64);
        for k in -layers..n[2] + layers {
            for j in -layers..n[1] + layers {
                for i in -layers..n[0] + layers {
                    let inside = i >= 0 && i < n[0] && j >= 0 && j < n[1] && k >= 0 && k < n[2];
                    if inside {
                        continue;
                    }
                    let p = [
                        lo[0] + dp * (i as f64 + 0.5),
                        lo[1] + dp * (j as f64 + 0.5),
                        lo[2] + dp * (k as f64 + 0.5),
                    ];
                    if let Some(b) = tank_body {
                        out.moving.ids.push(out.pos.len() as u32);
                        out.moving.body.push(b);
                        out.moving.rest.push(p);
                    }
                    out.kind.push(KIND_BOUNDARY);
                    out.pos.push(p);
                    out.rho.push(rho_at(p[2]).max(c.rho0));
                }
            }
        }
        Ok(out)
    }
}

/// The eight corners of the box [min, max].
fn box_corners(min: V3, max: V3) -> [V3; 8] {
    std::array::from_fn(|k| std::array::from_fn(|a| if k >> a & 1 == 0 { min[a] } else { max[a] }))
}

/// Sites `idx` of the lattice `origin + dp (i + 1/2, j + 1/2, k + 1/2)`.
#[derive(Debug, Clone)]
struct Sites {
    origin: V3,
    idx: Vec<[i64; 3]>,
}

impl Sites {
    fn positions(&self, dp: f64) -> impl Iterator<Item = V3> + '_ {
        let o = self.origin;
        self.idx
            .iter()
            .map(move |p| std::array::from_fn(|a| o[a] + dp * (p[a] as f64 + 0.5)))
    }
}

/// The index box of the sites of the lattice (`origin`, `dp`) within [min, max].
pub(crate) fn index_box(origin: V3, dp: f64, min: V3, max: V3) -> ([i64; 3], [i64; 3]) {
    (
        std::array::from_fn(|a| ((min[a] - origin[a]) / dp - 0.5).ceil() as i64),
        std::array::from_fn(|a| ((max[a] - origin[a]) / dp - 0.5).floor() as i64),
    )
}

/// The fluid `blocks` without the sites inside a solid (`shapes`, named by their field) or
/// closer than dp/2 to a solid's particle (`solid`), in order. A closed surface is tested on
/// each block's own lattice, row by row ([`geometry::lattice_sites_inside`]), so that the cost
/// does not grow as sites times triangles.
fn fluid_clear_of_solids(
    blocks: Vec<Sites>,
    solid: &[V3],
    shapes: &[(String, Shape)],
    dp: f64,
) -> Result<Vec<Sites>, SphCaseError> {
    use rayon::prelude::*;
    use std::collections::{HashMap, HashSet};
    let cell = |p: V3| -> [i64; 3] { p.map(|x| (x / dp).floor() as i64) };
    let mut grid: HashMap<[i64; 3], Vec<V3>> = HashMap::new();
    for &q in solid {
        grid.entry(cell(q)).or_default().push(q);
    }
    let near = |p: V3| {
        let c = cell(p);
        (-1..=1).any(|dz| {
            (-1..=1).any(|dy| {
                (-1..=1).any(|dx| {
                    grid.get(&[c[0] + dx, c[1] + dy, c[2] + dz])
                        .is_some_and(|v| {
                            v.iter().any(|q| {
                                crate::core::vec3::norm(crate::core::vec3::sub(p, *q)) < 0.5 * dp
                            })
                        })
                })
            })
        })
    };
    let mut out = Vec::with_capacity(blocks.len());
    for b in blocks {
        let mut inside: HashSet<[i64; 3]> = HashSet::new();
        for (field, shape) in shapes {
            if let Shape::Mesh { tris, min, max } = shape {
                let (first, last) = index_box(b.origin, dp, *min, *max);
                inside.extend(
                    geometry::lattice_sites_inside(tris, b.origin, dp, first, last)
                        .map_err(|e| bad(&format!("{field}.stl"), e))?,
                );
            }
        }
        let o = b.origin;
        let idx = b
            .idx
            .into_par_iter()
            .filter(|i| {
                let p: V3 = std::array::from_fn(|a| o[a] + dp * (i[a] as f64 + 0.5));
                let in_box = shapes.iter().any(|(_, s)| match s {
                    Shape::Cuboid { min, max } => (0..3).all(|a| p[a] > min[a] && p[a] < max[a]),
                    Shape::Mesh { .. } => false,
                });
                !in_box && !inside.contains(i) && !near(p)
            })
            .collect();
        out.push(Sites { origin: o, idx });
    }
    Ok(out)
}
