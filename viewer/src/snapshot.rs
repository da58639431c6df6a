//! Headless output: `--snapshot FILE` (one PNG of the newest frame) and `--every SECONDS
//! --out DIR` (a numbered series while the run goes on). Rendered by the CPU rasteriser.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::camera::{Camera, CameraSpec, UpAxis};
use crate::mesh_style::MeshStyle;
use crate::render::{cpu, legend};
use crate::scene::{Scene, SceneOptions};
use crate::source::{wait_first, Latest, Opener};

/// How to render a snapshot.
#[derive(Clone, Debug)]
pub struct SnapshotOptions {
    pub width: usize,
    pub height: usize,
    pub camera: CameraSpec,
    pub up: UpAxis,
    pub scene: SceneOptions,
    /// How meshes are drawn (`--meshes`, `--mesh-opacity`).
    pub meshes: MeshStyle,
    /// How long to wait for the segment and its first frame.
    pub wait: Duration,
}

/// One line describing the frame, drawn at the bottom of the image.
pub fn caption(latest: &Latest, describe: &str, scene: &Scene) -> String {
    let m = &latest.frame.meta;
    let state = if latest.status.alive {
        latest.status.state_name()
    } else {
        "solver gone"
    };
    let mut s = format!(
        "{describe}  t = {:.4} s  step {}  {} particles",
        m.sim_time, m.step, scene.total_particles
    );
    if scene.boundary_particles > 0 {
        s.push_str(&format!(
            " ({} boundary {})",
            scene.boundary_particles,
            scene.boundary.name()
        ));
    }
    if scene.stride > 1 {
        s.push_str(&format!(" (every {}th shown)", scene.stride));
    }
    if m.removed_count > 0 {
        s.push_str(&format!(", {} removed", m.removed_count));
    }
    s.push_str(&format!("  [{state}]"));
    s
}

/// Renders `latest` to an image with legend and caption.
pub fn render_latest(
    latest: &Latest,
    describe: &str,
    opts: &SnapshotOptions,
) -> (cpu::Image, Scene) {
    let scene = Scene::build(&latest.statics, &latest.frame, &opts.scene);
    let aspect = opts.width as f32 / opts.height.max(1) as f32;
    let cam = Camera::framing(&scene.world, &opts.camera, opts.up, aspect);
    let mut img = cpu::render(&scene, &cam, opts.width, opts.height, &opts.meshes);
    legend::draw_legend(&mut img, &scene.legend);
    legend::draw_caption(&mut img, &caption(latest, describe, &scene));
    (img, scene)
}

pub fn write_png(img: &cpu::Image, path: &Path) -> Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut enc = png::Encoder::new(
        std::io::BufWriter::new(file),
        img.width as u32,
        img.height as u32,
    );
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut w = enc
        .write_header()
        .with_context(|| format!("cannot write {}", path.display()))?;
    w.write_image_data(img.pixels.as_flattened())
        .with_context(|| format!("cannot write {}", path.display()))?;
    w.finish()
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

fn report_state(latest: &Latest, describe: &str) {
    if !latest.status.alive {
        eprintln!(
            "viewer: {describe}: solver gone (pid {} no longer runs); showing its last frame (step {}, t = {:.4} s)",
            latest.status.owner_pid, latest.frame.meta.step, latest.frame.meta.sim_time
        );
    }
}

/// `--snapshot FILE`.
pub fn run_snapshot(opener: &Opener, out: &Path, opts: &SnapshotOptions) -> Result<()> {
    let (src, latest) = wait_first(opener, opts.wait).map_err(anyhow::Error::msg)?;
    let describe = src.describe();
    report_state(&latest, &describe);
    let t0 = Instant::now();
    let (img, scene) = render_latest(&latest, &describe, opts);
    let render_s = t0.elapsed().as_secs_f64();
    if let Some(note) = &scene.note {
        eprintln!("viewer: {note}");
    }
    write_png(&img, out)?;
    eprintln!(
        "viewer: wrote {} ({}x{}, frame {} step {}, {} particles drawn, rendered in {:.3} s)",
        out.display(),
        img.width,
        img.height,
        latest.frame.meta.seq,
        latest.frame.meta.step,
        scene.centers.len(),
        render_s
    );
    Ok(())
}

/// `--every SECONDS --out DIR`: one PNG per new frame at most every `every`, until the run ends.
pub fn run_series(
    opener: &Opener,
    every: Duration,
    dir: &Path,
    opts: &SnapshotOptions,
) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let (mut src, mut latest) = wait_first(opener, opts.wait).map_err(anyhow::Error::msg)?;
    let describe = src.describe();
    report_state(&latest, &describe);
    let mut statics = Some(latest.statics.clone());
    let mut written = 0u64;
    let mut last_seq = 0u64;
    loop {
        let tick = Instant::now();
        if latest.frame.meta.seq != last_seq {
            last_seq = latest.frame.meta.seq;
            written += 1;
            let path: PathBuf = dir.join(format!("frame_{written:06}.png"));
            let (img, _) = render_latest(&latest, &describe, opts);
            write_png(&img, &path)?;
            eprintln!(
                "viewer: wrote {} (step {})",
                path.display(),
                latest.frame.meta.step
            );
        }
        let status = src.status().map_err(|e| anyhow::anyhow!("{e}"))?;
        if status.is_over() && status.newest_seq == last_seq {
            eprintln!(
                "viewer: {describe}: run {} after {written} images",
                if status.alive {
                    status.state_name()
                } else {
                    "gone"
                }
            );
            return Ok(());
        }
        if let Some(left) = every.checked_sub(tick.elapsed()) {
            std::thread::sleep(left);
        }
        match crate::source::read_latest(src.as_mut(), &mut statics) {
            Ok(Some(l)) => latest = l,
            Ok(None) => {}
            Err(e) => bail!("{describe}: {e}"),
        }
    }
}
