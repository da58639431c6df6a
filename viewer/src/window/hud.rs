//! The window's egui parts: the control panel (colouring, clipping, subsampling, commands to the
//! solver), the HUD and legend over the 3D view, the help overlay and the stop confirmation.

use eframe::egui::{self, Color32, RichText};
use shm_protocol::Command;

use super::{color32, ViewerApp};
use crate::color::{viridis, ColorBy, ColorChoice, Legend};
use crate::mesh_style::MeshMode;
use crate::render::legend::format_value;
use crate::sph::BoundaryMode;

pub const SHORTCUTS: [(&str, &str); 14] = [
    ("left drag", "orbit"),
    ("right/middle drag", "pan"),
    ("wheel", "zoom"),
    ("R", "reset view"),
    ("F", "fit to domain"),
    ("1..5", "iso / front / side / top / back"),
    ("C", "next colouring"),
    ("M", "meshes: solid / transparent / wireframe / hidden"),
    ("B", "SPH boundary particles: hidden / dimmed / shown"),
    ("X", "clipping plane on/off"),
    ("Space", "pause / resume the solver"),
    ("U", "ask the solver for a frame now"),
    ("H, F1, ?", "this help"),
    ("Esc", "close dialogs"),
];

pub fn controls(app: &mut ViewerApp, ui: &mut egui::Ui) {
    ui.heading("View");
    let before = (app.opts, app.clip_on, app.clip);
    let selected = match (app.opts.color_by, &app.scene_info) {
        (ColorChoice::Auto, Some(info)) => format!("auto ({})", info.color_by.name()),
        (c, _) => c.name().to_string(),
    };
    egui::ComboBox::from_label("colour by (C)")
        .selected_text(selected)
        .show_ui(ui, |ui| {
            ui.selectable_value(&mut app.opts.color_by, ColorChoice::Auto, "auto");
            for c in ColorBy::ALL {
                ui.selectable_value(&mut app.opts.color_by, ColorChoice::Fixed(c), c.name());
            }
        });
    if app
        .scene_info
        .as_ref()
        .is_some_and(|i| i.boundary_particles > 0)
    {
        egui::ComboBox::from_label("boundary (B)")
            .selected_text(app.opts.boundary.name())
            .show_ui(ui, |ui| {
                for m in BoundaryMode::ALL {
                    ui.selectable_value(&mut app.opts.boundary, m, m.name());
                }
            });
    }
    egui::ComboBox::from_label("meshes (M)")
        .selected_text(app.meshes.mode.name())
        .show_ui(ui, |ui| {
            for m in MeshMode::ALL {
                ui.selectable_value(&mut app.meshes.mode, m, m.name());
            }
        });
    if app.meshes.mode == MeshMode::Transparent {
        ui.add(egui::Slider::new(&mut app.meshes.opacity, 0.0..=1.0).text("mesh opacity"));
    }
    ui.checkbox(&mut app.clip_on, "clipping plane (X)");
    if app.clip_on {
        ui.horizontal(|ui| {
            for (i, name) in ["x", "y", "z"].iter().enumerate() {
                ui.radio_value(&mut app.clip.axis, i, *name);
            }
            ui.checkbox(&mut app.clip.keep_above, "keep above");
        });
        ui.add(egui::Slider::new(&mut app.clip.fraction, 0.0..=1.0).text("position"));
    }
    let mut max_k = (app.opts.max_particles.min(100_000_000) / 1000).max(1);
    ui.add(
        egui::Slider::new(&mut max_k, 10..=20_000)
            .logarithmic(true)
            .text("max particles (k)"),
    );
    app.opts.max_particles = max_k * 1000;
    if before != (app.opts, app.clip_on, app.clip) {
        app.opts_dirty = true;
    }
    ui.horizontal(|ui| {
        if ui.button("Reset view").clicked() {
            app.camera = None;
            app.opts_dirty = true;
        }
        if ui.button("Help").clicked() {
            app.flags.help = true;
        }
    });

    ui.separator();
    ui.heading("Solver");
    let (status, acks) = {
        let st = app.feed.state();
        (st.status.clone(), st.acks.clone())
    };
    let alive = status.as_ref().is_some_and(|s| s.alive && !s.is_over());
    ui.add_enabled_ui(alive, |ui| {
        ui.horizontal(|ui| {
            ui.label("refresh [sim s]");
            ui.add(egui::TextEdit::singleline(&mut app.flags.refresh_text).desired_width(60.0));
            if ui.button("Set").clicked() {
                match app.flags.refresh_text.trim().parse::<f64>() {
                    Ok(s) if s.is_finite() && s > 0.0 => app.feed.send(Command::SetRefresh {
                        sim_seconds: Some(s),
                        wall_ms: None,
                    }),
                    _ => app.feed.state().acks.push(format!(
                        "refresh: {:?} is not a positive number of seconds",
                        app.flags.refresh_text
                    )),
                }
            }
        });
        ui.horizontal(|ui| {
            if ui.button("Update now").clicked() {
                app.feed.send(Command::UpdateNow);
            }
            let paused = status
                .as_ref()
                .is_some_and(|s| s.state == Some(shm_protocol::SolverState::Paused));
            if ui.button(if paused { "Resume" } else { "Pause" }).clicked() {
                app.toggle_pause();
            }
        });
        ui.horizontal(|ui| {
            if ui.button("Checkpoint").clicked() {
                app.feed.send(Command::Checkpoint);
            }
            if ui
                .button(RichText::new("Stop...").color(Color32::LIGHT_RED))
                .clicked()
            {
                app.flags.confirm_stop = true;
            }
        });
    });
    ui.separator();
    ui.label("Acknowledgements");
    egui::ScrollArea::vertical()
        .max_height(160.0)
        .show(ui, |ui| {
            for a in acks.iter().rev() {
                ui.label(RichText::new(a).small());
            }
            if acks.is_empty() {
                ui.label(RichText::new("(none yet)").small().weak());
            }
        });
}

fn hud_lines(app: &ViewerApp) -> (Vec<String>, Option<String>) {
    let st = app.feed.state();
    let mut lines = vec![if st.describe.is_empty() {
        "not attached".to_string()
    } else {
        st.describe.clone()
    }];
    let mut warning = st.error.clone();
    if let Some(s) = &st.status {
        let state = if s.alive {
            s.state_name()
        } else {
            "solver gone"
        };
        lines.push(format!("state: {state} (pid {})", s.owner_pid));
        if !s.alive && warning.is_none() {
            warning = Some("solver gone: showing its last frame; waiting for a new run".into());
        }
    }
    if let Some(l) = &st.latest {
        let m = &l.frame.meta;
        let age = shm_protocol::sys::unix_ns().saturating_sub(m.wall_unix_ns) as f64 * 1e-9;
        lines.push(format!("t = {:.5} s   step {}", m.sim_time, m.step));
        lines.push(format!("solver {:.1} steps/s", m.steps_per_s));
        lines.push(format!("frame #{}  age {:.1} s", m.seq, age));
        if m.removed_count > 0 {
            lines.push(format!(
                "removed {} particles ({:.4e} kg)",
                m.removed_count, m.removed_mass
            ));
        }
    }
    if st.reattached > 0 {
        lines.push(format!("re-attached {} time(s)", st.reattached));
    }
    drop(st);
    if let Some(i) = &app.scene_info {
        let mut s = format!("particles shown {} of {}", i.shown, i.total);
        if i.stride > 1 {
            s.push_str(&format!(" (1 in {})", i.stride));
        }
        lines.push(s);
        if i.boundary_particles > 0 {
            lines.push(format!(
                "boundary particles {} {} (B)",
                i.boundary_particles,
                app.opts.boundary.name()
            ));
        }
        lines.push(format!("scene rebuild {:.0} ms", i.build_ms));
        if i.triangles > 0 {
            lines.push(format!("meshes {} (M)", app.meshes.mode.name()));
        }
        if let Some(n) = &i.note {
            lines.push(n.clone());
        }
    }
    lines.push(format!(
        "{:.0} fps on {}   H: help",
        app.fps.fps(),
        app.renderer
    ));
    (lines, warning)
}

pub fn overlay(app: &mut ViewerApp, ui: &mut egui::Ui) {
    let rect = ui.max_rect();
    let painter = ui.painter();
    let (lines, warning) = hud_lines(app);
    let font = egui::FontId::monospace(13.0);
    let mut y = rect.top() + 8.0;
    for l in &lines {
        painter.text(
            egui::pos2(rect.left() + 10.0, y),
            egui::Align2::LEFT_TOP,
            l,
            font.clone(),
            Color32::from_gray(230),
        );
        y += 16.0;
    }
    if let Some(w) = warning {
        painter.text(
            egui::pos2(rect.left() + 10.0, y + 4.0),
            egui::Align2::LEFT_TOP,
            w,
            font.clone(),
            Color32::from_rgb(255, 170, 80),
        );
    }
    if let Some(info) = &app.scene_info {
        legend(painter, rect, &info.legend);
    }
}

fn legend(painter: &egui::Painter, rect: egui::Rect, legend: &Legend) {
    let font = egui::FontId::proportional(13.0);
    let x = rect.right() - 170.0;
    let mut y = rect.top() + 10.0;
    let text = Color32::from_gray(230);
    match legend {
        Legend::Categories { title, entries } => {
            painter.text(
                egui::pos2(x, y),
                egui::Align2::LEFT_TOP,
                title,
                font.clone(),
                text,
            );
            for (name, c) in entries.iter().take(12) {
                y += 18.0;
                let sw = egui::Rect::from_min_size(egui::pos2(x, y + 2.0), egui::vec2(12.0, 12.0));
                painter.rect_filled(sw, 2.0, color32(*c));
                painter.text(
                    egui::pos2(x + 18.0, y),
                    egui::Align2::LEFT_TOP,
                    name,
                    font.clone(),
                    text,
                );
            }
        }
        Legend::Ramp { title, min, max } => {
            painter.text(
                egui::pos2(x, y),
                egui::Align2::LEFT_TOP,
                title,
                font.clone(),
                text,
            );
            y += 20.0;
            let h = 150.0;
            for k in 0..60 {
                let t = 1.0 - k as f32 / 59.0;
                let r = egui::Rect::from_min_size(
                    egui::pos2(x, y + k as f32 * h / 60.0),
                    egui::vec2(14.0, h / 60.0 + 1.0),
                );
                painter.rect_filled(r, 0.0, color32(viridis(t)));
            }
            painter.text(
                egui::pos2(x + 20.0, y),
                egui::Align2::LEFT_TOP,
                format_value(*max),
                font.clone(),
                text,
            );
            painter.text(
                egui::pos2(x + 20.0, y + h),
                egui::Align2::LEFT_BOTTOM,
                format_value(*min),
                font,
                text,
            );
        }
    }
}

pub fn dialogs(app: &mut ViewerApp, ctx: &egui::Context) {
    if app.flags.help {
        let mut open = true;
        egui::Window::new("Keyboard and mouse")
            .open(&mut open)
            .collapsible(false)
            .show(ctx, |ui| {
                egui::Grid::new("keys").striped(true).show(ui, |ui| {
                    for (k, what) in SHORTCUTS {
                        ui.label(RichText::new(k).monospace());
                        ui.label(what);
                        ui.end_row();
                    }
                });
            });
        app.flags.help &= open;
    }
    if app.flags.confirm_stop {
        egui::Window::new("Stop the run?")
            .collapsible(false)
            .resizable(false)
            .anchor(egui::Align2::CENTER_CENTER, egui::vec2(0.0, 0.0))
            .show(ctx, |ui| {
                ui.label("The solver writes its final output and a checkpoint, then exits.");
                ui.horizontal(|ui| {
                    if ui
                        .button(RichText::new("Stop").color(Color32::LIGHT_RED))
                        .clicked()
                    {
                        app.feed.send(Command::Stop);
                        app.flags.confirm_stop = false;
                    }
                    if ui.button("Cancel").clicked() {
                        app.flags.confirm_stop = false;
                    }
                });
            });
    }
}
