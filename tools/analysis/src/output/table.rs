//! The live terminal table (one line per analysed frame) and its JSON-lines variant.

use std::io::{self, Write};

use super::{or_dash, Sink};
use crate::metrics::Metrics;

/// Prints a header, then one aligned line per frame to stdout.
#[derive(Default)]
pub struct TableSink {
    /// Lines left before the header is printed again.
    lines: u32,
}

const HEADER: &str = "      step     t [s]  E_trans [J]    E_rot [J]    E_pot [J]  v_max [m/s] v_mean [m/s]      Z    phi  Lacey";

impl TableSink {
    /// One table line for `m` (no newline).
    pub fn line(m: &Metrics) -> String {
        let e = |v: Option<f64>| or_dash(v, |x| format!("{x:.5e}"));
        let g = |v: Option<f64>| or_dash(v, |x| format!("{x:.4}"));
        format!(
            "{:>10} {:>9.4} {:>12} {:>12} {:>12} {:>12} {:>12} {:>6} {:>6} {:>6}",
            m.step,
            m.sim_time,
            e(m.kinetic_energy_translational),
            e(m.kinetic_energy_rotational),
            e(m.potential_energy),
            e(m.max_speed),
            e(m.mean_speed),
            or_dash(m.coordination_number, |x| format!("{x:.3}")),
            g(m.solid_fraction),
            or_dash(m.lacey_index, |x| format!("{x:.3}")),
        )
    }
}

impl Sink for TableSink {
    fn record(&mut self, m: &Metrics) -> io::Result<()> {
        let mut out = io::stdout().lock();
        // The header again every 40 lines, so it stays in view.
        if self.lines == 0 {
            writeln!(out, "{HEADER}")?;
            self.lines = 40;
        }
        self.lines -= 1;
        writeln!(out, "{}", Self::line(m))?;
        out.flush()
    }
}

/// One JSON object per frame on stdout (`--json` while following).
pub struct JsonStdout;

impl Sink for JsonStdout {
    fn record(&mut self, m: &Metrics) -> io::Result<()> {
        let mut out = io::stdout().lock();
        serde_json::to_writer(&mut out, m)?;
        writeln!(out)?;
        out.flush()
    }
}
