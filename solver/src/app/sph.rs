//! An SPH case as the run loop sees it: the CPU reference solver ([`solver::sph::cpu`]) behind
//! [`SimPort`], publishing positions, velocities, density, pressure and particle kind, and VTK
//! files with `--output`, checkpoints that `--restart` continues bit for bit. Not yet:
//! `--load-shm`, the GPU, sub-domains (each refused with a message).

use anyhow::{bail, Context, Result};
use shm_protocol::layout::{SpeciesMethod, SPECIES_PARAMS};
use shm_protocol::{BodyTransform, FieldKind, FrameWriter, Region, SpeciesRecord, StaticData};
use solver::io::vtk::{PointArray, VtkParticles, VtkSeries};
use solver::sph::cpu::SphSim;
use solver::sph::setup::{SphCase, KIND_FLUID};
use std::path::Path;

use super::cli::{BackendChoice, Cli};
use super::port::SimPort;

/// Whether the case text names `method = "sph"`.
pub fn is_sph(text: &str) -> bool {
    toml::from_str::<toml::Table>(text)
        .ok()
        .and_then(|t| t.get("method").and_then(|m| m.as_str().map(|s| s == "sph")))
        .unwrap_or(false)
}

/// Builds an SPH run from a case file's text.
pub fn build(path: &Path, text: &str, cli: &Cli) -> Result<Box<dyn SimPort>> {
    let name = path.display();
    if cli.backend == BackendChoice::Cuda {
        bail!("{name}: SPH runs on the CPU backend only so far; use --backend cpu (or auto)");
    }
    if cli.particles.is_some() || cli.fields.is_some() {
        bail!("{name}: --particles and --fields do not apply to SPH runs yet");
    }
    if cli.decomposition().subdomains.is_some_and(|n| n > 1) {
        bail!("{name}: SPH runs undecomposed so far (--subdomains 1)");
    }
    let mut case = SphCase::from_toml_str(text).with_context(|| format!("{name}"))?;
    if let Some(t) = cli.end_time {
        case.end_time = t;
    }
    if let Some(dt) = cli.dt {
        case.dt = dt;
    }
    let c = case.constants().with_context(|| format!("{name}"))?;
    let particles = case.particles(&c);
    tracing::info!(
        "SPH case {name}: {} fluid and {} boundary particles, dp = {} m, h = {:.4} m, c0 = {:.2} m/s (CPU reference)",
        particles.kind.iter().filter(|&&k| k == KIND_FLUID).count(),
        particles.kind.iter().filter(|&&k| k != KIND_FLUID).count(),
        c.dp,
        c.h,
        c.c0
    );
    Ok(Box::new(SphRunner {
        end_time: case.end_time,
        config_toml: text.to_string(),
        sim: SphSim::new(c, particles),
        vtk: None,
    }))
}

/// Continues an SPH run from its checkpoint (`--restart FILE`; `--end-time` may change).
pub fn restore(path: &Path, cli: &Cli) -> Result<Box<dyn SimPort>> {
    if cli.backend == BackendChoice::Cuda {
        bail!(
            "{}: SPH runs on the CPU backend only so far",
            path.display()
        );
    }
    if cli.particles.is_some() || cli.dt.is_some() || cli.fields.is_some() {
        bail!(
            "--particles, --dt and --fields cannot change a checkpointed SPH run (--end-time can)"
        );
    }
    let (config_toml, case, sim) = solver::sph::checkpoint::load(path)?;
    tracing::info!(
        "restarted SPH run from {} at step {}, t = {:.6} s",
        path.display(),
        sim.s.step,
        sim.s.time
    );
    Ok(Box::new(SphRunner {
        end_time: cli.end_time.unwrap_or(case.end_time),
        config_toml,
        sim,
        vtk: None,
    }))
}

struct SphRunner {
    sim: SphSim,
    end_time: f64,
    config_toml: String,
    vtk: Option<(std::path::PathBuf, VtkSeries)>,
}

const FIELDS: [FieldKind; 5] = [
    FieldKind::Position,
    FieldKind::Velocity,
    FieldKind::Density,
    FieldKind::Pressure,
    FieldKind::ParticleKind,
];

impl SimPort for SphRunner {
    fn step_n(&mut self, n: u64) -> Result<()> {
        for _ in 0..n {
            self.sim.step_within(self.end_time);
        }
        let s = &self.sim.s;
        if let Some(k) =
            (0..s.pos.len()).find(|&k| !s.rho[k].is_finite() || !s.pos[k][0].is_finite())
        {
            bail!(
                "particle {k} has a non-finite state after step {} (t = {} s): the time step or the case is unstable",
                s.step,
                s.time
            );
        }
        Ok(())
    }
    fn preferred_batch(&self) -> u64 {
        1
    }
    fn step_index(&self) -> u64 {
        self.sim.s.step
    }
    fn time(&self) -> f64 {
        self.sim.s.time
    }
    /// The next step, shortened near the end so that the run lands on the end time (the CFL
    /// step varies, so the run loop's "within half a step of the end" needs the real one).
    fn dt(&self) -> f64 {
        let left = self.end_time - self.sim.s.time;
        if left > 0.0 {
            self.sim.dt().min(left)
        } else {
            self.sim.dt()
        }
    }
    fn end_time(&self) -> f64 {
        self.end_time
    }
    fn particle_count(&self) -> usize {
        self.sim.s.pos.len()
    }
    fn id_count(&self) -> usize {
        self.sim.s.pos.len()
    }
    fn removed(&self) -> (u64, f64) {
        (0, 0.0)
    }
    fn mesh_count(&self) -> usize {
        0
    }
    fn triangle_count(&self) -> usize {
        0
    }
    fn species_count(&self) -> usize {
        2
    }
    fn frame_fields(&self) -> u32 {
        FIELDS.iter().fold(0, |m, f| m | f.bit())
    }

    fn static_data(&self) -> StaticData {
        let c = &self.sim.c;
        let record = |name: &str, method: SpeciesMethod| {
            let mut params = [0.0; SPECIES_PARAMS];
            params[..3].copy_from_slice(&[c.c0, c.alpha, c.h]);
            SpeciesRecord {
                name: shm_protocol::static_data::encode_name(name),
                method: method as u32,
                radius: 0.5 * c.dp,
                density: c.rho0,
                params,
                ..SpeciesRecord::default()
            }
        };
        let s = &self.sim.s;
        let n = s.pos.len();
        let (mut lo, mut hi) = ([f64::INFINITY; 3], [f64::NEG_INFINITY; 3]);
        for p in &s.pos {
            for a in 0..3 {
                lo[a] = lo[a].min(p[a]);
                hi[a] = hi[a].max(p[a]);
            }
        }
        StaticData {
            config_toml: self.config_toml.clone(),
            species: vec![
                record("fluid", SpeciesMethod::SphFluid),
                record("boundary", SpeciesMethod::SphBoundary),
            ],
            particle_ids: (0..n as u32).collect(),
            particle_species: s.kind.iter().map(|&k| u32::from(k != KIND_FLUID)).collect(),
            particle_radius: vec![(0.5 * c.dp) as f32; n],
            meshes: Vec::new(),
            world_min: lo,
            world_max: hi,
            cell_size: 2.0 * c.h,
            generation: 0,
        }
    }

    fn body_transforms(&self) -> Vec<BodyTransform> {
        Vec::new()
    }
    fn attach_segment(&mut self, _region: &Region) -> Result<()> {
        Ok(())
    }
    fn release_segment(&mut self) {}

    fn fill_frame(&mut self, w: &mut FrameWriter<'_>) -> Result<bool> {
        let s = &self.sim.s;
        let f3 = |v: &[f64; 3]| v.map(|c| c as f32);
        w.write_vec3(
            FieldKind::Position,
            &s.pos.iter().map(f3).collect::<Vec<_>>(),
        )?;
        w.write_vec3(
            FieldKind::Velocity,
            &s.vel.iter().map(f3).collect::<Vec<_>>(),
        )?;
        let (rho, p): (Vec<f32>, Vec<f32>) = (0..s.pos.len())
            .map(|k| (s.rho[k] as f32, self.sim.pressure(k) as f32))
            .unzip();
        w.scalar_mut(FieldKind::Density)?.copy_from_slice(&rho);
        w.scalar_mut(FieldKind::Pressure)?.copy_from_slice(&p);
        // The segment's particle_kind numbers are the setup's (1 fluid, 2 boundary).
        w.particle_kinds_mut()?.copy_from_slice(&s.kind);
        Ok(false)
    }
    fn frame_copied(&mut self) -> Result<bool> {
        Ok(true)
    }
    fn wait_frame_copy(&mut self) -> Result<()> {
        Ok(())
    }
    fn save_checkpoint(&self, path: &Path) -> Result<()> {
        Ok(solver::sph::checkpoint::save(
            path,
            &self.config_toml,
            &self.sim,
        )?)
    }
    /// VTK: velocity, density, pressure, kind (1 fluid, 2 boundary) and id per particle.
    fn write_output(&mut self, dir: &Path, _index: u64) -> Result<()> {
        if self.vtk.as_ref().is_none_or(|(d, _)| d != dir) {
            self.vtk = Some((dir.to_path_buf(), VtkSeries::new(dir, "sph")?));
        }
        let s = &self.sim.s;
        let n = s.pos.len();
        let particles = VtkParticles {
            positions: s.pos.iter().map(|v| v.map(|c| c as f32)).collect(),
            arrays: vec![
                (
                    "pressure",
                    PointArray::F32((0..n).map(|k| self.sim.pressure(k) as f32).collect(), 1),
                ),
                (
                    "velocity",
                    PointArray::F32(s.vel.iter().flatten().map(|&c| c as f32).collect(), 3),
                ),
                (
                    "density",
                    PointArray::F32(s.rho.iter().map(|&r| r as f32).collect(), 1),
                ),
                ("kind", PointArray::U32(s.kind.clone())),
                ("id", PointArray::U32((0..n as u32).collect())),
            ],
        };
        if let Some((_, series)) = &mut self.vtk {
            series.write_particles(s.step, s.time, &particles)?;
        }
        Ok(())
    }
    fn stage_summary(&self) -> String {
        format!("dt {:.3e} s", self.sim.dt())
    }
    fn backend_name(&self) -> String {
        "cpu (SPH reference)".into()
    }
}
