//! `viewer`: the live 3D window onto a running simulation, and headless PNG snapshots.
//!
//! ```text
//! viewer --attach NAME                          # window (X11, OpenGL)
//! viewer --attach NAME --snapshot out.png       # newest frame to a PNG, no display or GPU
//! viewer --attach NAME --every 0.5 --out dir/   # a numbered PNG series while the run goes on
//! viewer --connect HOST:PORT                    # the same through a forwarder
//! viewer --attach NAME --meshes transparent     # see the particles inside a closed drum
//! viewer --attach NAME --boundary dimmed         # SPH: the tank's walls as dots around the fluid
//! ```
//!
//! Frames come from a `Box<dyn FrameSource>` (`source.rs`), so another transport drops in.

mod camera;
mod color;
mod elements;
mod mesh_style;
mod render;
mod scene;
mod snapshot;
mod source;
mod sph;
mod window;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use camera::{CameraSpec, UpAxis};
use color::ColorChoice;
use mesh_style::{MeshMode, MeshStyle};
use scene::SceneOptions;
use snapshot::SnapshotOptions;
use sph::BoundaryMode;

#[derive(Parser, Debug)]
#[command(
    name = "viewer",
    version,
    about = "Live 3D view of a particle-shm run, or headless PNG snapshots of it",
    // `--every -1` reaches the option's own check, not clap's "unexpected argument".
    allow_negative_numbers = true
)]
struct Args {
    #[command(flatten)]
    source: forwarder::SourceArgs,
    /// Render the newest frame to this PNG and exit (no display or GPU needed).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["every", "out"])]
    snapshot: Option<PathBuf>,
    /// Write a PNG every SECONDS (wall clock) while the run goes on; needs --out.
    #[arg(long, value_name = "SECONDS", requires = "out")]
    every: Option<f64>,
    /// Directory for the --every series (frame_000001.png, ...).
    #[arg(long, value_name = "DIR", requires = "every")]
    out: Option<PathBuf>,
    /// Image size for --snapshot/--every, or the initial window size.
    #[arg(long, value_name = "WxH", default_value = "1280x800", value_parser = parse_size)]
    size: (usize, usize),
    /// Particle colouring: species, speed, angular-speed, id, contacts, density, pressure, or
    /// auto: species for DEM runs, pressure for SPH runs (C cycles it in the window).
    #[arg(long, value_name = "FIELD", default_value = "auto")]
    color_by: ColorChoice,
    /// SPH runs: how boundary particles (the tank's walls, which enclose the fluid) are drawn:
    /// hidden (the fluid alone, as DualSPHysics users view it), dimmed (small grey dots, out of
    /// the colour range) or shown (coloured like the fluid). B cycles it in the window.
    #[arg(long, value_name = "MODE", value_enum, default_value_t = BoundaryMode::Hidden)]
    boundary: BoundaryMode,
    /// Same as `--boundary hidden` (the default).
    #[arg(long, conflicts_with = "boundary")]
    hide_boundary: bool,
    /// View direction: AZ,EL[,DIST] (degrees, degrees, metres) or iso, front, side, top, back.
    #[arg(
        long,
        value_name = "VIEW",
        default_value = "iso",
        allow_hyphen_values = true
    )]
    camera: CameraSpec,
    /// World axis pointing up on screen.
    #[arg(long, value_name = "AXIS", default_value = "z")]
    up: UpAxis,
    /// How meshes are drawn (images and window; M cycles it in the window): transparent or
    /// wireframe to see the particles inside a closed drum, hidden to leave meshes out.
    #[arg(long, value_name = "MODE", value_enum, default_value_t = MeshMode::Solid)]
    meshes: MeshMode,
    /// Opacity of `--meshes transparent` surfaces, from 0 (invisible) to 1 (opaque).
    #[arg(
        long,
        value_name = "A",
        allow_negative_numbers = true,
        default_value_t = mesh_style::DEFAULT_OPACITY,
        value_parser = mesh_style::parse_opacity
    )]
    mesh_opacity: f32,
    /// Draw at most this many particles (every k-th beyond it). Default: all for images,
    /// 2,000,000 in the window. With --connect the forwarder sends no more than that (every
    /// k-th particle of a larger frame), so a 100 M-particle run is watchable over a laptop's
    /// network.
    #[arg(long, value_name = "N")]
    max_particles: Option<usize>,
    /// Seconds to wait for the segment and its first frame (images only).
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    wait: f64,
    /// Window: after SECONDS, save a screenshot of the window to FILE and exit.
    #[arg(long, num_args = 2, value_names = ["SECONDS", "FILE"])]
    screenshot_after: Option<Vec<String>>,
}

/// Particles a window draws at most unless `--max-particles` says otherwise.
const WINDOW_MAX_PARTICLES: usize = 2_000_000;

fn parse_size(s: &str) -> Result<(usize, usize), String> {
    let (w, h) = s
        .split_once(['x', 'X'])
        .ok_or_else(|| format!("size must be WIDTHxHEIGHT, got {s:?}"))?;
    let num = |v: &str| {
        v.trim()
            .parse::<usize>()
            .ok()
            .filter(|n| (16..=16384).contains(n))
            .ok_or_else(|| format!("size: {v:?} is not a number of pixels in 16..=16384"))
    };
    Ok((num(w)?, num(h)?))
}

/// A wall-clock duration option, bounded (`shm_protocol::limits`): never a panic on 1e300.
fn seconds(v: f64, what: &str) -> anyhow::Result<Duration> {
    shm_protocol::limits::wall_duration(what, v, 0.0).map_err(anyhow::Error::msg)
}

fn run(args: Args) -> anyhow::Result<()> {
    let opener = match args.source.choice().map_err(anyhow::Error::msg)? {
        forwarder::SourceChoice::Segment(name) => {
            shm_protocol::validate_name(&name)
                .map_err(|reason| anyhow::anyhow!("invalid segment name {name:?}: {reason}"))?;
            source::attach_opener(name)
        }
        // A window draws at most 2 M by default: more need not cross the network either.
        forwarder::SourceChoice::Forwarder { addr, token } => {
            let images = args.snapshot.is_some() || args.every.is_some();
            let most = match args.max_particles {
                Some(m) => m as u64,
                None if images => 0,
                None => WINDOW_MAX_PARTICLES as u64,
            };
            source::connect_opener(addr, token, most)
        }
    };
    let scene = SceneOptions {
        color_by: args.color_by,
        max_particles: args.max_particles.unwrap_or(usize::MAX),
        clip: None,
        boundary: if args.hide_boundary {
            BoundaryMode::Hidden
        } else {
            args.boundary
        },
    };
    let meshes = MeshStyle {
        mode: args.meshes,
        opacity: args.mesh_opacity,
    };
    let snap = SnapshotOptions {
        width: args.size.0,
        height: args.size.1,
        camera: args.camera,
        up: args.up,
        scene,
        meshes,
        wait: seconds(args.wait, "--wait")?,
    };
    if let Some(out) = &args.snapshot {
        return snapshot::run_snapshot(&opener, out, &snap);
    }
    if let (Some(every), Some(dir)) = (args.every, &args.out) {
        let every = seconds(every, "--every")?;
        return snapshot::run_series(&opener, every, dir, &snap);
    }
    let screenshot = match &args.screenshot_after {
        Some(v) if v.len() == 2 => {
            let secs: f64 = v[0].parse().map_err(|_| {
                anyhow::anyhow!("--screenshot-after: {:?} is not a number of seconds", v[0])
            })?;
            Some((seconds(secs, "--screenshot-after")?, PathBuf::from(&v[1])))
        }
        _ => None,
    };
    window::run(window::WindowOptions {
        opener,
        size: args.size,
        camera: args.camera,
        up: args.up,
        scene: SceneOptions {
            max_particles: args.max_particles.unwrap_or(WINDOW_MAX_PARTICLES),
            ..scene
        },
        max_particles_explicit: args.max_particles.is_some(),
        meshes,
        screenshot,
    })
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("viewer: {}", shm_protocol::error_report(&e));
            ExitCode::FAILURE
        }
    }
}
