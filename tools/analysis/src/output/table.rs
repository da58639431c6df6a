//! The live terminal table (one line per analysed frame) and its JSON-lines variant.

use std::io::{self, Write};

use super::{or_dash, Sink};
use crate::metrics::Metrics;

/// Prints a header, then one aligned line per frame to stdout: the DEM columns, or for an SPH
/// run (decided on the first frame: it has fluid metrics) the fluid's.
#[derive(Default)]
pub struct TableSink {
    /// Lines left before the header is printed again.
    lines: u32,
    /// The SPH layout with this many gauge and probe columns, once the first frame said so.
    sph: Option<(usize, usize)>,
    decided: bool,
}

const HEADER: &str = "      step     t [s]  E_trans [J]    E_rot [J]    E_pot [J]  v_max [m/s] v_mean [m/s]      Z    phi  Lacey";

const SPH_HEADER: &str =
    "      step     t [s]    E_kin [J]    E_pot [J]  v_max [m/s]  front [m]   fluid [kg]";

/// Whether `m` comes from an SPH run (any fluid metric present).
fn is_sph(m: &Metrics) -> bool {
    m.fluid_particles.is_some()
        || m.surge_front.is_some()
        || m.water_height.is_some()
        || m.probe_pressure.is_some()
}

impl TableSink {
    /// The SPH table's header for `gauges` gauges and `probes` probes.
    pub fn sph_header(gauges: usize, probes: usize) -> String {
        let mut h = SPH_HEADER.to_string();
        for k in 1..=gauges {
            h.push_str(&format!(" {:>9}", format!("H{k} [m]")));
        }
        for k in 1..=probes {
            h.push_str(&format!(" {:>11}", format!("P{k} [Pa]")));
        }
        h
    }

    /// One SPH table line for `m` (no newline), with `gauges` and `probes` columns.
    pub fn sph_line(m: &Metrics, gauges: usize, probes: usize) -> String {
        let e = |v: Option<f64>| or_dash(v, |x| format!("{x:.5e}"));
        let mut s = format!(
            "{:>10} {:>9.4} {:>12} {:>12} {:>12} {:>10} {:>12}",
            m.step,
            m.sim_time,
            e(m.kinetic_energy_translational),
            e(m.potential_energy),
            e(m.max_speed),
            or_dash(m.surge_front, |x| format!("{x:.4}")),
            e(m.fluid_mass),
        );
        for k in 0..gauges {
            let h = m
                .water_height
                .as_ref()
                .and_then(|g| g.get(k))
                .map(|g| g.height);
            s.push_str(&format!(" {:>9}", or_dash(h, |x| format!("{x:.4}"))));
        }
        for k in 0..probes {
            let p = m
                .probe_pressure
                .as_ref()
                .and_then(|p| p.get(k))
                .map(|p| p.pressure);
            s.push_str(&format!(" {:>11}", or_dash(p, |x| format!("{x:.1}"))));
        }
        s
    }

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
        if !self.decided {
            self.decided = true;
            self.sph = is_sph(m).then(|| {
                (
                    m.water_height.as_ref().map_or(0, Vec::len),
                    m.probe_pressure.as_ref().map_or(0, Vec::len),
                )
            });
        }
        let mut out = io::stdout().lock();
        // The header again every 40 lines, so it stays in view.
        if self.lines == 0 {
            match self.sph {
                Some((g, p)) => writeln!(out, "{}", Self::sph_header(g, p))?,
                None => writeln!(out, "{HEADER}")?,
            }
            self.lines = 40;
        }
        self.lines -= 1;
        match self.sph {
            Some((g, p)) => writeln!(out, "{}", Self::sph_line(m, g, p))?,
            None => writeln!(out, "{}", Self::line(m))?,
        }
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
