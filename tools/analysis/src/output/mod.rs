//! Where the metrics go: the live terminal table, CSV, JSON lines and PNG plots.

mod files;
mod plot;
mod table;

use std::io;

use crate::metrics::Metrics;

pub use files::{csv_columns, CsvSink, JsonlSink, CSV_COLUMNS, SPH_COLUMNS};
pub use plot::PlotSink;
pub use table::{JsonStdout, TableSink};

/// A consumer of per-frame metrics.
pub trait Sink {
    /// Takes one frame's metrics (files are flushed so that a crash loses nothing written).
    fn record(&mut self, m: &Metrics) -> io::Result<()>;
    /// Called once at the end (the plot is redrawn with every point).
    fn finish(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// `-` for a missing value, else `v` formatted by `f`.
pub(crate) fn or_dash(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or_else(|| "-".to_string(), f)
}
