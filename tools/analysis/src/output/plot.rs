//! `--plot FILE.png`: time series of the metrics, redrawn every few seconds while the run goes on
//! (written to a temporary file and renamed, so a viewer never sees half a PNG).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use plotters::prelude::*;

use super::Sink;
use crate::metrics::Metrics;

/// Fonts tried for labels (the first readable one is used; `ANALYSIS_FONT` overrides). Without
/// any, the plots are drawn without text.
const FONT_PATHS: [&str; 5] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
];

/// Registers a system font with plotters once; false when none could be loaded.
fn have_font() -> bool {
    static FONT: OnceLock<bool> = OnceLock::new();
    *FONT.get_or_init(|| {
        let env = std::env::var("ANALYSIS_FONT").ok();
        for path in env.iter().map(String::as_str).chain(FONT_PATHS) {
            if let Ok(bytes) = std::fs::read(path) {
                // Leaked once per process: plotters keeps fonts for the program's lifetime.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return true;
                }
            }
        }
        tracing::warn!("no TrueType font found (set ANALYSIS_FONT=FILE.ttf): plots have no labels");
        false
    })
}

/// A series' value at a point (`None`: no value there).
type Value = Box<dyn Fn(&Metrics) -> Option<f64>>;

/// A named series.
struct Series {
    name: String,
    value: Value,
}

fn series(name: &str, value: impl Fn(&Metrics) -> Option<f64> + 'static) -> Series {
    Series {
        name: name.to_string(),
        value: Box::new(value),
    }
}

/// One panel: a title and its series.
struct Panel {
    title: &'static str,
    series: Vec<Series>,
}

/// The panels of a DEM run.
fn dem_panels() -> Vec<Panel> {
    vec![
        Panel {
            title: "energy [J]",
            series: vec![
                series("translational", |m| m.kinetic_energy_translational),
                series("rotational", |m| m.kinetic_energy_rotational),
                series("potential", |m| m.potential_energy),
            ],
        },
        Panel {
            title: "speed [m/s]",
            series: vec![
                series("max", |m| m.max_speed),
                series("mean", |m| m.mean_speed),
            ],
        },
        Panel {
            title: "coordination number",
            series: vec![series("Z", |m| m.coordination_number)],
        },
        Panel {
            title: "solid fraction",
            series: vec![series("phi", |m| m.solid_fraction)],
        },
        Panel {
            title: "Lacey mixing index",
            series: vec![series("M", |m| m.lacey_index)],
        },
        Panel {
            title: "centre of mass [m]",
            series: vec![
                series("x", |m| m.center_of_mass.map(|c| c[0])),
                series("y", |m| m.center_of_mass.map(|c| c[1])),
                series("z", |m| m.center_of_mass.map(|c| c[2])),
            ],
        },
    ]
}

/// The panels of an SPH run whose first point has `gauges` gauges and `probes` probes, each
/// gauge and probe a series named by its number and place.
fn sph_panels(first: &Metrics) -> Vec<Panel> {
    let gauges = first.water_height.as_deref().unwrap_or_default();
    let probes = first.probe_pressure.as_deref().unwrap_or_default();
    vec![
        Panel {
            title: "fluid energy [J]",
            series: vec![
                series("kinetic", |m| m.kinetic_energy_translational),
                series("potential", |m| m.potential_energy),
            ],
        },
        Panel {
            title: "fluid speed [m/s]",
            series: vec![
                series("max", |m| m.max_speed),
                series("mean", |m| m.mean_speed),
            ],
        },
        Panel {
            title: "surge front [m]",
            series: vec![series("front", |m| m.surge_front)],
        },
        Panel {
            title: "water height [m]",
            series: gauges
                .iter()
                .enumerate()
                .map(|(k, g)| {
                    let name = format!("H{} ({}, {})", k + 1, g.at[0], g.at[1]);
                    series(&name, move |m: &Metrics| {
                        m.water_height.as_ref()?.get(k).map(|g| g.height)
                    })
                })
                .collect(),
        },
        Panel {
            title: "probe pressure [Pa]",
            series: probes
                .iter()
                .enumerate()
                .map(|(k, p)| {
                    let name = format!("P{} ({}, {}, {})", k + 1, p.at[0], p.at[1], p.at[2]);
                    series(&name, move |m: &Metrics| {
                        m.probe_pressure.as_ref()?.get(k).map(|p| p.pressure)
                    })
                })
                .collect(),
        },
        Panel {
            title: "fluid mass [kg]",
            series: vec![series("mass", |m| m.fluid_mass)],
        },
    ]
}

/// The panels for `points`: SPH ones when the first point has fluid metrics.
fn panels(points: &[Metrics]) -> Vec<Panel> {
    match points.first() {
        Some(m)
            if m.fluid_particles.is_some()
                || m.surge_front.is_some()
                || m.water_height.is_some()
                || m.probe_pressure.is_some() =>
        {
            sph_panels(m)
        }
        _ => dem_panels(),
    }
}

/// Tableau 10, cycled for panels with many series (gauges, probes).
const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

pub struct PlotSink {
    path: PathBuf,
    tmp: PathBuf,
    interval: Duration,
    last_draw: Option<Instant>,
    points: Vec<Metrics>,
}

impl PlotSink {
    /// Plots into `path` (must end in `.png`), redrawn at most every `interval`.
    pub fn new(path: &Path, interval: Duration) -> io::Result<Self> {
        if path.extension().and_then(|e| e.to_str()) != Some("png") {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("--plot {}: the file name must end in .png", path.display()),
            ));
        }
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp.png");
        Ok(Self {
            path: path.to_owned(),
            tmp: tmp.into(),
            interval,
            last_draw: None,
            points: Vec::new(),
        })
    }

    fn draw(&mut self) -> io::Result<()> {
        draw(&self.tmp, &self.points)
            .map_err(|e| io::Error::other(format!("drawing {}: {e}", self.path.display())))?;
        std::fs::rename(&self.tmp, &self.path)?;
        self.last_draw = Some(Instant::now());
        Ok(())
    }
}

impl Sink for PlotSink {
    fn record(&mut self, m: &Metrics) -> io::Result<()> {
        let mut m = m.clone();
        m.notes.clear();
        m.body_torque = None;
        self.points.push(m);
        if self.last_draw.is_none_or(|t| t.elapsed() >= self.interval) {
            self.draw()?;
        }
        Ok(())
    }
    fn finish(&mut self) -> io::Result<()> {
        if self.points.is_empty() {
            return Ok(());
        }
        self.draw()
    }
}

/// Range of finite values, widened when flat.
fn range(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    let (lo, hi) = values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
    if lo > hi {
        return None;
    }
    let pad = ((hi - lo) * 0.05)
        .max(hi.abs().max(lo.abs()) * 1e-3)
        .max(1e-12);
    Some((lo - pad, hi + pad))
}

fn draw(path: &Path, points: &[Metrics]) -> Result<(), Box<dyn std::error::Error>> {
    let text = have_font();
    let root = BitMapBackend::new(path, (1400, 900)).into_drawing_area();
    root.fill(&WHITE)?;
    let (t0, t1) = range(points.iter().map(|m| m.sim_time)).unwrap_or((0.0, 1.0));
    for (area, panel) in root.split_evenly((2, 3)).iter().zip(panels(points)) {
        let values = || {
            points
                .iter()
                .flat_map(|m| panel.series.iter().filter_map(move |s| (s.value)(m)))
        };
        let Some((y0, y1)) = range(values()) else {
            continue;
        };
        let mut builder = ChartBuilder::on(area);
        builder.margin(12);
        if text {
            builder
                .caption(panel.title, ("sans-serif", 18))
                .x_label_area_size(30)
                .y_label_area_size(70);
        }
        let mut chart = builder.build_cartesian_2d(t0..t1, y0..y1)?;
        if text {
            chart
                .configure_mesh()
                .x_desc("simulated time [s]")
                .x_labels(6)
                .y_labels(6)
                .label_style(("sans-serif", 12))
                .draw()?;
        }
        for (k, series) in panel.series.iter().enumerate() {
            let color = COLORS[k % COLORS.len()];
            let line = points
                .iter()
                .filter_map(|m| (series.value)(m).map(|v| (m.sim_time, v)));
            let s = chart.draw_series(LineSeries::new(line, color.stroke_width(2)))?;
            if text && panel.series.len() > 1 {
                s.label(series.name.as_str()).legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
                });
            }
        }
        if text && panel.series.len() > 1 {
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .label_font(("sans-serif", 12))
                .draw()?;
        }
    }
    root.present()?;
    Ok(())
}
