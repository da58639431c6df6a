//! Following a run: wait for frames on any [`FrameSource`], analyse the due ones, feed the
//! sinks, and stop when the solver finishes or dies.

use std::io;
use std::time::{Duration, Instant};

use shm_protocol::{
    Frame, FrameSource, ReadError, SolverState, SolverStatus, SourceError, WaitOutcome,
};

use crate::context::{ContextError, StaticContext};
use crate::metrics::{self, Metrics, Settings, Timings};
use crate::output::Sink;

/// How long one wait for a frame lasts before the loop looks around again.
const WAIT_SLICE: Duration = Duration::from_millis(500);

/// Errors that stop the analysis.
#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    #[error("reading {source_name}: {error}")]
    Source {
        source_name: String,
        #[source]
        error: SourceError,
    },
    #[error("static data of {0}: {1}")]
    Static(String, ContextError),
    #[error("{0}")]
    NoFrame(String),
    #[error("writing output: {0}")]
    Output(#[from] io::Error),
}

/// Which frames to analyse.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cadence {
    /// At least this much simulated time between analysed frames [s].
    pub sim_seconds: Option<f64>,
    /// At least this much wall-clock time between analysed frames.
    pub wall: Option<Duration>,
}

/// How a followed run ended.
#[derive(Debug)]
pub enum End {
    /// The solver marked the run finished and no newer frame exists.
    Finished { status: SolverStatus, frames: u64 },
    /// The solver marked the run failed.
    Failed { status: SolverStatus, frames: u64 },
    /// The solver process is gone without marking the run finished.
    Died { status: SolverStatus, frames: u64 },
}

/// A source with its description, so errors say where they came from.
pub struct Run<'a> {
    pub source: &'a mut dyn FrameSource,
    name: String,
    ctx: Option<StaticContext>,
    scratch: metrics::Scratch,
}

impl<'a> Run<'a> {
    pub fn new(source: &'a mut dyn FrameSource) -> Self {
        let name = source.describe();
        Self {
            source,
            name,
            ctx: None,
            scratch: metrics::Scratch::default(),
        }
    }

    fn err(&self, error: impl Into<SourceError>) -> FollowError {
        FollowError::Source {
            source_name: self.name.clone(),
            error: error.into(),
        }
    }

    /// Reads the static section, waiting (up to `timeout`) while none is published yet.
    fn load_static(&mut self, timeout: Duration) -> Result<&StaticContext, FollowError> {
        let deadline = Instant::now() + timeout;
        let data = loop {
            match self.source.read_static() {
                Ok(d) => break d,
                Err(SourceError::Read(ReadError::NoStatic)) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => return Err(self.err(e)),
            }
        };
        let ctx =
            StaticContext::new(data).map_err(|e| FollowError::Static(self.name.clone(), e))?;
        tracing::info!(
            particles = ctx.particle_count(),
            species = ctx.species_names.len(),
            meshes = ctx.meshes.len(),
            gravity = ?ctx.gravity,
            "static data from {}: gravity from {}",
            self.name,
            ctx.gravity_source
        );
        Ok(self.ctx.insert(ctx))
    }

    /// Metrics of `frame`, reloading the static data when the frame belongs to a newer
    /// generation or does not match it. `None` (with a warning) when it still does not match.
    pub fn analyse(
        &mut self,
        frame: &Frame,
        settings: &Settings,
    ) -> Result<Option<(Metrics, Timings)>, FollowError> {
        let gen = frame.meta.static_generation;
        let stale = self
            .ctx
            .as_ref()
            .is_none_or(|c| gen != 0 && c.generation != gen);
        if stale {
            self.load_static(Duration::from_secs(2))?;
        }
        for attempt in 0..2 {
            let Some(ctx) = self.ctx.as_ref() else {
                break;
            };
            match metrics::compute_with(frame, ctx, settings, &mut self.scratch) {
                Ok(r) => return Ok(Some(r)),
                Err(e) if attempt == 0 => {
                    tracing::debug!("{e}; re-reading the static data");
                    self.load_static(Duration::from_secs(2))?;
                }
                Err(e) => tracing::warn!("skipping frame: {e}"),
            }
        }
        Ok(None)
    }

    /// The newest frame, waiting up to `timeout` for the first one.
    pub fn newest(&mut self, timeout: Duration) -> Result<Frame, FollowError> {
        let outcome = self
            .source
            .wait_newer(0, timeout)
            .map_err(|e| self.err(e))?;
        match outcome {
            WaitOutcome::Newer(_) => {}
            WaitOutcome::TimedOut => {
                return Err(FollowError::NoFrame(format!(
                    "{} has published no frame within {timeout:?}",
                    self.name
                )))
            }
            WaitOutcome::SolverGone => {
                if self.source.status().map_err(|e| self.err(e))?.newest_seq == 0 {
                    return Err(FollowError::NoFrame(format!(
                        "the solver of {} is gone without publishing a frame",
                        self.name
                    )));
                }
            }
        }
        match self.source.read_newest().map_err(|e| self.err(e))? {
            Some(f) => Ok(f),
            None => Err(FollowError::NoFrame(format!("{} has no frame", self.name))),
        }
    }

    /// Follows the run until the solver finishes or dies, feeding every due frame to `sinks`.
    pub fn follow(
        &mut self,
        settings: &Settings,
        cadence: Cadence,
        timing: bool,
        sinks: &mut [Box<dyn Sink>],
    ) -> Result<End, FollowError> {
        let mut seen = 0u64;
        let mut last: Option<(f64, Instant)> = None;
        let mut frames = 0u64;
        // One frame buffer for the whole run: no allocation (and page faults) per frame.
        let mut frame = Frame::default();
        loop {
            let outcome = self
                .source
                .wait_newer(seen, WAIT_SLICE)
                .map_err(|e| self.err(e))?;
            match outcome {
                WaitOutcome::TimedOut => continue,
                WaitOutcome::SolverGone => {
                    let status = self.source.status().map_err(|e| self.err(e))?;
                    for s in sinks.iter_mut() {
                        s.finish()?;
                    }
                    return Ok(match status.state {
                        Some(SolverState::Finished) => End::Finished { status, frames },
                        Some(SolverState::Failed) => End::Failed { status, frames },
                        _ => End::Died { status, frames },
                    });
                }
                WaitOutcome::Newer(_) => {}
            }
            match self
                .source
                .read_newest_fields_into(&mut frame, settings.fields())
            {
                Ok(true) => {}
                Ok(false) => continue,
                Err(SourceError::Read(e @ ReadError::Contended(_))) => {
                    tracing::warn!("{e}");
                    continue;
                }
                Err(e) => return Err(self.err(e)),
            };
            seen = frame.meta.seq;
            if !due(cadence, last, frame.meta.sim_time) {
                continue;
            }
            let Some((mut m, t)) = self.analyse(&frame, settings)? else {
                continue;
            };
            last = Some((frame.meta.sim_time, Instant::now()));
            frames += 1;
            if timing {
                log_timings(&m, &t);
                m.timing_ms = Some(metrics::timings_json(&t));
            }
            for s in sinks.iter_mut() {
                s.record(&m)?;
            }
        }
    }
}

/// Whether a frame at `sim_time` is due, given the last analysed one.
fn due(c: Cadence, last: Option<(f64, Instant)>, sim_time: f64) -> bool {
    let Some((t, at)) = last else {
        return true;
    };
    c.sim_seconds.is_none_or(|dt| sim_time >= t + dt) && c.wall.is_none_or(|w| at.elapsed() >= w)
}

/// Logs the time per metric of one frame.
pub fn log_timings(m: &Metrics, t: &Timings) {
    let parts: Vec<String> = t
        .iter()
        .map(|(k, d)| format!("{k}={:.2}ms", d.as_secs_f64() * 1e3))
        .collect();
    let total: f64 = t.iter().map(|(_, d)| d.as_secs_f64() * 1e3).sum();
    tracing::info!(
        "frame {} ({} particles): {} total={total:.2}ms",
        m.seq,
        m.particles,
        parts.join(" ")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cadence_in_simulated_and_wall_time() {
        let now = Instant::now();
        let c = Cadence {
            sim_seconds: Some(0.1),
            wall: None,
        };
        assert!(due(c, None, 0.0));
        assert!(!due(c, Some((1.0, now)), 1.05));
        assert!(due(c, Some((1.0, now)), 1.1));
        let w = Cadence {
            sim_seconds: None,
            wall: Some(Duration::from_secs(3600)),
        };
        assert!(!due(w, Some((0.0, now)), 5.0));
        assert!(due(Cadence::default(), Some((0.0, now)), 0.0));
    }
}
