//! The native window: eframe (winit + OpenGL through glow) with egui controls. The 3D view is an
//! egui paint callback drawing with [`gl::GlScene`]; frames arrive from the background
//! [`Feed`] thread, so a slow window never slows the solver.

mod gl;
mod hud;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::anyhow;
use eframe::egui;

use crate::camera::{Camera, CameraSpec, UpAxis};
use crate::color::{ColorChoice, Legend};
use crate::mesh_style::MeshStyle;
use crate::render::cpu::BACKGROUND;
use crate::scene::{ClipPlane, Scene, SceneOptions};
use crate::source::{Feed, Opener};
use gl::{DrawParams, GlScene, Upload};

pub struct WindowOptions {
    pub opener: Opener,
    pub size: (usize, usize),
    pub camera: CameraSpec,
    pub up: UpAxis,
    pub scene: SceneOptions,
    /// The user chose `scene.max_particles` (otherwise it is lowered on software OpenGL).
    pub max_particles_explicit: bool,
    /// How meshes are drawn at start (M cycles the mode).
    pub meshes: MeshStyle,
    /// Save a screenshot of the window after this long, then exit.
    pub screenshot: Option<(Duration, PathBuf)>,
}

pub fn run(opts: WindowOptions) -> anyhow::Result<()> {
    let (w, h) = opts.size;
    let native = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default()
            .with_inner_size([w as f32, h as f32])
            .with_title("particle-shm viewer"),
        depth_buffer: 24,
        renderer: eframe::Renderer::Glow,
        ..Default::default()
    };
    let outcome = Arc::new(Mutex::new(None::<Result<String, String>>));
    let out2 = outcome.clone();
    eframe::run_native(
        "particle-shm viewer",
        native,
        Box::new(move |cc| Ok(Box::new(ViewerApp::new(cc, opts, out2)?))),
    )
    .map_err(|e| {
        anyhow!(
            "cannot open the window: {e} (is DISPLAY set and OpenGL 3.3 available? \
             `--snapshot FILE` renders without a display)"
        )
    })?;
    let result = outcome.lock().map(|mut o| o.take()).unwrap_or(None);
    match result {
        Some(Ok(msg)) => {
            eprintln!("viewer: {msg}");
            Ok(())
        }
        Some(Err(e)) => Err(anyhow!(e)),
        None => Ok(()),
    }
}

/// Which buttons the stop confirmation and help overlay show.
#[derive(Default)]
struct UiFlags {
    help: bool,
    confirm_stop: bool,
    refresh_text: String,
}

/// Frame-rate bookkeeping for the HUD.
struct FpsCounter {
    frames: Vec<Instant>,
}

impl FpsCounter {
    fn tick(&mut self) {
        let now = Instant::now();
        self.frames.push(now);
        self.frames
            .retain(|t| now.duration_since(*t) < Duration::from_secs(2));
    }
    fn fps(&self) -> f64 {
        match (self.frames.first(), self.frames.last()) {
            (Some(a), Some(b)) if self.frames.len() > 1 => {
                (self.frames.len() - 1) as f64 / b.duration_since(*a).as_secs_f64().max(1e-6)
            }
            _ => 0.0,
        }
    }
}

struct ScreenshotPlan {
    at: Instant,
    path: PathBuf,
    requested: bool,
    frames_drawn: u64,
    started: Instant,
}

/// Particles drawn by default on a software OpenGL renderer (about 10 fps there).
const SOFTWARE_MAX_PARTICLES: usize = 500_000;

pub struct ViewerApp {
    feed: Feed,
    /// GL_RENDERER, shown in the HUD.
    renderer: String,
    gl: Arc<Mutex<Option<GlScene>>>,
    pending: Arc<Mutex<Option<Upload>>>,
    seen_version: u64,
    opts: SceneOptions,
    opts_dirty: bool,
    clip_on: bool,
    clip: ClipPlane,
    /// A draw-time setting: changing it needs no scene rebuild.
    meshes: MeshStyle,
    camera: Option<Camera>,
    camera_spec: CameraSpec,
    up: UpAxis,
    scene_info: Option<SceneInfo>,
    flags: UiFlags,
    fps: FpsCounter,
    screenshot: Option<ScreenshotPlan>,
    outcome: Arc<Mutex<Option<Result<String, String>>>>,
    frames_drawn: u64,
}

/// What the HUD and legend need from the current scene.
pub struct SceneInfo {
    pub legend: Legend,
    pub shown: usize,
    pub total: usize,
    pub stride: usize,
    pub world: crate::camera::Bounds,
    pub note: Option<String>,
    pub build_ms: f64,
    pub max_radius: f32,
    /// Mesh triangles in the scene (the HUD names the mesh mode only when there are some).
    pub triangles: usize,
    /// The colouring used (`auto` resolved for this run).
    pub color_by: crate::color::ColorBy,
    /// SPH boundary particles in the frame (the boundary control shows only when there are).
    pub boundary_particles: usize,
}

impl ViewerApp {
    fn new(
        cc: &eframe::CreationContext<'_>,
        opts: WindowOptions,
        outcome: Arc<Mutex<Option<Result<String, String>>>>,
    ) -> Result<Self, String> {
        let glc = cc
            .gl
            .as_ref()
            .ok_or("eframe gave no OpenGL context (the glow renderer is required)")?;
        // SAFETY: eframe makes its GL context current before calling the app creator.
        let scene =
            unsafe { GlScene::new(glc) }.map_err(|e| format!("OpenGL setup failed: {e}"))?;
        // SAFETY: as above.
        let renderer = unsafe {
            use eframe::glow::HasContext;
            glc.get_parameter_string(eframe::glow::RENDERER)
        };
        let software = ["llvmpipe", "softpipe", "swrast", "lavapipe"]
            .iter()
            .any(|s| renderer.to_lowercase().contains(s));
        let mut scene_opts = opts.scene;
        if software && !opts.max_particles_explicit {
            scene_opts.max_particles = scene_opts.max_particles.min(SOFTWARE_MAX_PARTICLES);
        }
        let ctx = cc.egui_ctx.clone();
        let feed = Feed::start(opts.opener, Box::new(move || ctx.request_repaint()));
        let screenshot = opts.screenshot.map(|(after, path)| ScreenshotPlan {
            at: Instant::now() + after,
            path,
            requested: false,
            frames_drawn: 0,
            started: Instant::now(),
        });
        Ok(Self {
            feed,
            gl: Arc::new(Mutex::new(Some(scene))),
            pending: Arc::new(Mutex::new(None)),
            seen_version: 0,
            opts: scene_opts,
            renderer,
            opts_dirty: false,
            clip_on: false,
            clip: ClipPlane {
                axis: 1,
                fraction: 0.5,
                keep_above: true,
            },
            meshes: opts.meshes,
            camera: None,
            camera_spec: opts.camera,
            up: opts.up,
            scene_info: None,
            flags: UiFlags {
                refresh_text: "0.01".into(),
                ..Default::default()
            },
            fps: FpsCounter { frames: Vec::new() },
            screenshot,
            outcome,
            frames_drawn: 0,
        })
    }

    /// Rebuilds the scene when a new frame arrived or the options changed.
    fn refresh_scene(&mut self) {
        let (version, latest) = {
            let st = self.feed.state();
            (st.version, st.latest.clone())
        };
        if version == self.seen_version && !self.opts_dirty {
            return;
        }
        let Some(latest) = latest else { return };
        self.seen_version = version;
        self.opts_dirty = false;
        let t0 = Instant::now();
        let mut opts = self.opts;
        opts.clip = self.clip_on.then_some(self.clip);
        let scene = Scene::build(&latest.statics, &latest.frame, &opts);
        let upload = Upload::from_scene(&scene);
        let max_radius = upload.max_radius;
        if let Ok(mut p) = self.pending.lock() {
            *p = Some(upload);
        }
        if self.camera.is_none() {
            self.camera = Some(Camera::framing(
                &scene.world,
                &self.camera_spec,
                self.up,
                1.5,
            ));
        }
        self.scene_info = Some(SceneInfo {
            shown: scene.centers.len(),
            total: scene.total_particles,
            stride: scene.stride,
            world: scene.world,
            note: scene.note.clone(),
            legend: scene.legend,
            build_ms: t0.elapsed().as_secs_f64() * 1e3,
            max_radius,
            triangles: scene.triangles.len(),
            color_by: scene.color_by,
            boundary_particles: scene.boundary_particles,
        });
    }

    fn reset_camera(&mut self, spec: CameraSpec, aspect: f32) {
        if let Some(info) = &self.scene_info {
            self.camera = Some(Camera::framing(&info.world, &spec, self.up, aspect));
        }
    }

    /// The 3D view: input handling and the paint callback.
    fn view_3d(&mut self, ui: &mut egui::Ui) {
        let rect = ui.available_rect_before_wrap();
        let response = ui.allocate_rect(rect, egui::Sense::click_and_drag());
        let aspect = rect.width() / rect.height().max(1.0);
        let Some(cam) = self.camera.as_mut() else {
            ui.painter().rect_filled(rect, 0.0, color32(BACKGROUND));
            return;
        };
        let d = response.drag_delta();
        if response.dragged_by(egui::PointerButton::Primary) {
            cam.orbit(-d.x * 0.3, d.y * 0.3);
        } else if response.dragged_by(egui::PointerButton::Secondary)
            || response.dragged_by(egui::PointerButton::Middle)
        {
            cam.pan(d.x / rect.height(), d.y / rect.height());
        }
        if response.hovered() {
            let scroll = ui.input(|i| i.smooth_scroll_delta.y);
            let zoom = ui.input(|i| i.zoom_delta());
            if scroll != 0.0 {
                cam.zoom((-scroll * 0.002).exp());
            }
            if zoom != 1.0 {
                cam.zoom(1.0 / zoom);
            }
        }
        let world = self.scene_info.as_ref().map(|i| i.world);
        let (near, far) = world.map_or((0.01, 100.0), |w| cam.clip_range(&w));
        let max_r = self.scene_info.as_ref().map_or(0.0, |i| i.max_radius);
        let px_per_unit = 0.5 * rect.height() * ui.ctx().pixels_per_point()
            / (cam.fov_y_deg.to_radians() * 0.5).tan();
        let params = DrawParams {
            max_radius_px: (max_r * px_per_unit / (near * 0.5).max(1e-9)).min(1e6),
            viewport_height_px: rect.height() * ui.ctx().pixels_per_point(),
            view: cam.view_matrix(),
            proj: cam.projection_matrix(aspect, near, far),
            background: BACKGROUND.map(|c| c as f32 / 255.0),
            meshes: self.meshes,
        };
        let gl_scene = self.gl.clone();
        let pending = self.pending.clone();
        let callback = egui::PaintCallback {
            rect,
            callback: Arc::new(eframe::egui_glow::CallbackFn::new(move |info, painter| {
                let glc = painter.gl();
                let Ok(mut guard) = gl_scene.lock() else {
                    return;
                };
                let Some(scene) = guard.as_mut() else { return };
                let clip = info.clip_rect_in_pixels();
                // SAFETY: egui_glow runs paint callbacks on the GL thread with its context current.
                unsafe {
                    if let Some(up) = pending.lock().ok().and_then(|mut p| p.take()) {
                        scene.upload(glc, &up);
                    }
                    scene.draw(
                        glc,
                        [
                            clip.left_px,
                            clip.from_bottom_px,
                            clip.width_px,
                            clip.height_px,
                        ],
                        &params,
                    );
                }
            })),
        };
        ui.painter().add(callback);
        self.frames_drawn += 1;
        let _ = aspect;
    }

    fn handle_keys(&mut self, ctx: &egui::Context, aspect: f32) {
        use egui::Key;
        let pressed = |k: Key| ctx.input(|i| i.key_pressed(k));
        if ctx.egui_wants_keyboard_input() {
            return;
        }
        if pressed(Key::H) || pressed(Key::F1) || pressed(Key::Questionmark) {
            self.flags.help = !self.flags.help;
        }
        if pressed(Key::R) {
            self.reset_camera(self.camera_spec, aspect);
        }
        if pressed(Key::F) {
            if let (Some(cam), Some(info)) = (self.camera.as_mut(), &self.scene_info) {
                cam.target = info.world.center();
                cam.distance = cam.fit_distance(&info.world, aspect);
            }
        }
        for (key, idx) in [
            (Key::Num1, 0),
            (Key::Num2, 1),
            (Key::Num3, 2),
            (Key::Num4, 3),
            (Key::Num5, 4),
        ] {
            if pressed(key) {
                self.reset_camera(CameraSpec::PRESETS[idx].1, aspect);
            }
        }
        if pressed(Key::C) {
            // From the colouring in use (`auto` resolved), so the first press moves on from it.
            let current = self
                .scene_info
                .as_ref()
                .map_or(self.opts.color_by.resolve(false), |i| i.color_by);
            self.opts.color_by = ColorChoice::Fixed(current.next());
            self.opts_dirty = true;
        }
        if pressed(Key::B) {
            self.opts.boundary = self.opts.boundary.next();
            self.opts_dirty = true;
        }
        if pressed(Key::M) {
            self.meshes.mode = self.meshes.mode.next();
        }
        if pressed(Key::X) {
            self.clip_on = !self.clip_on;
            self.opts_dirty = true;
        }
        if pressed(Key::Space) {
            self.toggle_pause();
        }
        if pressed(Key::U) {
            self.feed.send(shm_protocol::Command::UpdateNow);
        }
        if pressed(Key::Escape) {
            self.flags.help = false;
            self.flags.confirm_stop = false;
        }
    }

    fn toggle_pause(&self) {
        let paused = self
            .feed
            .state()
            .status
            .as_ref()
            .is_some_and(|s| s.state == Some(shm_protocol::SolverState::Paused));
        self.feed.send(if paused {
            shm_protocol::Command::Resume
        } else {
            shm_protocol::Command::Pause
        });
    }

    fn screenshot_logic(&mut self, ctx: &egui::Context) {
        let Some(plan) = self.screenshot.as_mut() else {
            return;
        };
        ctx.request_repaint();
        let have_scene = self.scene_info.is_some();
        if plan.requested || Instant::now() < plan.at || !have_scene {
            if !plan.requested && Instant::now() > plan.at + Duration::from_secs(30) {
                if let Ok(mut o) = self.outcome.lock() {
                    *o = Some(Err(
                        "no frame arrived within 30 s after --screenshot-after".into()
                    ));
                }
                ctx.send_viewport_cmd(egui::ViewportCommand::Close);
            }
            return;
        }
        plan.requested = true;
        let path = plan.path.clone();
        let outcome = self.outcome.clone();
        let frames = self.frames_drawn - plan.frames_drawn;
        let secs = plan.started.elapsed().as_secs_f64();
        let shown = self.scene_info.as_ref().map_or(0, |i| i.shown);
        let ctx2 = ctx.clone();
        ctx.request_screenshot(move |image| {
            let img = crate::render::cpu::Image {
                width: image.size[0],
                height: image.size[1],
                pixels: image.pixels.iter().map(|c| [c.r(), c.g(), c.b()]).collect(),
            };
            let res = crate::snapshot::write_png(&img, &path)
                .map(|()| {
                    format!(
                        "window screenshot {} ({}x{}); {frames} frames in {secs:.1} s = {:.1} fps with {shown} particles",
                        path.display(),
                        img.width,
                        img.height,
                        frames as f64 / secs.max(1e-6)
                    )
                })
                .map_err(|e| format!("{e:#}"));
            if let Ok(mut o) = outcome.lock() {
                *o = Some(res);
            }
            ctx2.send_viewport_cmd(egui::ViewportCommand::Close);
            ctx2.request_repaint();
        });
    }
}

pub fn color32(c: [u8; 3]) -> egui::Color32 {
    egui::Color32::from_rgb(c[0], c[1], c[2])
}

impl eframe::App for ViewerApp {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        let ctx = ui.ctx().clone();
        self.fps.tick();
        self.refresh_scene();
        let aspect = {
            let r = ui.available_rect_before_wrap();
            r.width() / r.height().max(1.0)
        };
        self.handle_keys(&ctx, aspect);
        egui::Panel::left("controls")
            .resizable(false)
            .show(ui, |ui| hud::controls(self, ui));
        egui::CentralPanel::no_frame().show(ui, |ui| {
            self.view_3d(ui);
            hud::overlay(self, ui);
        });
        hud::dialogs(self, &ctx);
        self.screenshot_logic(&ctx);
        // Keep the HUD's clocks (frame age) moving even without new frames.
        ctx.request_repaint_after(Duration::from_millis(250));
    }

    fn on_exit(&mut self, gl: Option<&eframe::glow::Context>) {
        if let (Some(gl), Ok(mut s)) = (gl, self.gl.lock()) {
            if let Some(scene) = s.take() {
                // SAFETY: eframe calls on_exit on the GL thread with the context current.
                unsafe { scene.destroy(gl) };
            }
        }
    }
}
