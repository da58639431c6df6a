//! `--csv FILE` and `--jsonl FILE`.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use super::Sink;
use crate::metrics::Metrics;

/// CSV columns, in order (empty cell = not available; body torques are in the JSON lines only).
/// `particles` is the frame's particle count (the `particle_count` metric); later additions come
/// after these, so the earlier columns keep their places: [`SPH_COLUMNS`], then one column per
/// gauge and per probe ([`csv_columns`]).
pub const CSV_COLUMNS: [&str; 18] = [
    "seq",
    "step",
    "sim_time",
    "particles",
    "kinetic_energy_translational",
    "kinetic_energy_rotational",
    "potential_energy",
    "max_speed",
    "mean_speed",
    "com_x",
    "com_y",
    "com_z",
    "coordination_number",
    "solid_fraction",
    "lacey_index",
    "removed_count",
    "removed_mass",
    "discharge_rate",
];

/// SPH columns after [`CSV_COLUMNS`] (empty for other runs).
pub const SPH_COLUMNS: [&str; 3] = ["fluid_particles", "fluid_mass", "surge_front"];

/// Every column of a CSV file for `gauges` gauges and `probes` probes: [`CSV_COLUMNS`],
/// [`SPH_COLUMNS`], `gauge1_height` [m] ... and `probe1_pressure` [Pa] ..., numbered in the
/// order of `--gauge` and `--probe` (the JSON carries their coordinates).
pub fn csv_columns(gauges: usize, probes: usize) -> Vec<String> {
    CSV_COLUMNS
        .iter()
        .chain(&SPH_COLUMNS)
        .map(|c| c.to_string())
        .chain((1..=gauges).map(|k| format!("gauge{k}_height")))
        .chain((1..=probes).map(|k| format!("probe{k}_pressure")))
        .collect()
}

fn create(path: &Path, what: &str) -> io::Result<BufWriter<File>> {
    File::create(path).map(BufWriter::new).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot create {what} file {}: {e}", path.display()),
        )
    })
}

pub struct CsvSink {
    out: BufWriter<File>,
    gauges: usize,
    probes: usize,
}

impl CsvSink {
    /// A CSV file with a column for each of `gauges` gauges and `probes` probes.
    pub fn create(path: &Path, gauges: usize, probes: usize) -> io::Result<Self> {
        let mut out = create(path, "CSV")?;
        writeln!(out, "{}", csv_columns(gauges, probes).join(","))?;
        out.flush()?;
        Ok(Self {
            out,
            gauges,
            probes,
        })
    }
}

fn cell(v: Option<f64>) -> String {
    v.filter(|x| x.is_finite())
        .map_or_else(String::new, |x| format!("{x:e}"))
}

impl Sink for CsvSink {
    fn record(&mut self, m: &Metrics) -> io::Result<()> {
        let com = m.center_of_mass.map(|c| c.map(Some)).unwrap_or([None; 3]);
        let row = [
            m.seq.to_string(),
            m.step.to_string(),
            format!("{:e}", m.sim_time),
            m.particles.to_string(),
            cell(m.kinetic_energy_translational),
            cell(m.kinetic_energy_rotational),
            cell(m.potential_energy),
            cell(m.max_speed),
            cell(m.mean_speed),
            cell(com[0]),
            cell(com[1]),
            cell(com[2]),
            cell(m.coordination_number),
            cell(m.solid_fraction),
            cell(m.lacey_index),
            m.removed_count.map_or_else(String::new, |c| c.to_string()),
            cell(m.removed_mass),
            cell(m.discharge_rate),
            m.fluid_particles
                .map_or_else(String::new, |c| c.to_string()),
            cell(m.fluid_mass),
            cell(m.surge_front),
        ];
        let gauges = (0..self.gauges).map(|k| {
            cell(
                m.water_height
                    .as_ref()
                    .and_then(|g| g.get(k))
                    .map(|g| g.height),
            )
        });
        let probes = (0..self.probes).map(|k| {
            cell(
                m.probe_pressure
                    .as_ref()
                    .and_then(|p| p.get(k))
                    .map(|p| p.pressure),
            )
        });
        let row: Vec<String> = row.into_iter().chain(gauges).chain(probes).collect();
        writeln!(self.out, "{}", row.join(","))?;
        self.out.flush()
    }
}

pub struct JsonlSink {
    out: BufWriter<File>,
}

impl JsonlSink {
    pub fn create(path: &Path) -> io::Result<Self> {
        Ok(Self {
            out: create(path, "JSON lines")?,
        })
    }
}

impl Sink for JsonlSink {
    fn record(&mut self, m: &Metrics) -> io::Result<()> {
        serde_json::to_writer(&mut self.out, m)?;
        writeln!(self.out)?;
        self.out.flush()
    }
}
