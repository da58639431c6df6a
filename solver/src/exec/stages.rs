//! The named stages of a step and their timers, the same names on every backend.
//!
//! A step is the cycle `prepare -> forces -> integrate -> exchange -> reduce`, with `publish`
//! between steps when a frame is due. `exchange` (migration of particles that left their
//! sub-domain, then the refresh of the ghost layers) closes a step rather than opening the next,
//! so that between steps every worker's ghosts match the current positions: energies, snapshots
//! and checkpoints can be taken at any step boundary without another exchange.

use std::time::Duration;

/// One stage of the step pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Migration of particles that crossed a sub-domain boundary, and the ghost refresh.
    Exchange,
    /// Cell hash, sort, cell start; meshes placed and binned; periodic storage reorder.
    Prepare,
    /// Contact detection and forces (DEM), or the particle interactions of the method.
    Forces,
    /// Time integration.
    Integrate,
    /// Reductions over all workers: the stable time step, non-finite checks, counters.
    Reduce,
    /// Copying a frame into the shared-memory segment.
    Publish,
}

impl Stage {
    pub const ALL: [Stage; 6] = [
        Stage::Exchange,
        Stage::Prepare,
        Stage::Forces,
        Stage::Integrate,
        Stage::Reduce,
        Stage::Publish,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Stage::Exchange => "exchange",
            Stage::Prepare => "prepare",
            Stage::Forces => "forces",
            Stage::Integrate => "integrate",
            Stage::Reduce => "reduce",
            Stage::Publish => "publish",
        }
    }
}

/// Time spent in each stage since the last reset, and the steps it covers.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct StageTimers {
    pub total: [Duration; 6],
    pub steps: u64,
    /// Of the exchange's time, what ran while the worker computed (a GPU group's ghost refresh
    /// beside its interior collide). The `Exchange` stage holds all of it, so the steps took
    /// the sum of the stages less this.
    pub exchange_hidden: Duration,
}

impl StageTimers {
    pub fn add(&mut self, stage: Stage, d: Duration) {
        self.total[stage as usize] += d;
    }

    pub fn get(&self, stage: Stage) -> Duration {
        self.total[stage as usize]
    }

    /// Adds every stage of `other` (and not its steps: workers run the same steps).
    pub fn add_stages(&mut self, other: &StageTimers) {
        for s in Stage::ALL {
            self.add(s, other.get(s));
        }
        self.exchange_hidden += other.exchange_hidden;
    }

    /// Runs `f`, adding its wall-clock time to `stage`.
    #[inline]
    pub fn time<R>(&mut self, stage: Stage, f: impl FnOnce() -> R) -> R {
        let t0 = std::time::Instant::now();
        let r = f();
        self.add(stage, t0.elapsed());
        r
    }

    /// Mean milliseconds per step of `stage`.
    pub fn ms_per_step(&self, stage: Stage) -> f64 {
        self.get(stage).as_secs_f64() * 1e3 / self.steps.max(1) as f64
    }

    /// "prepare 0.120 ms, forces 0.800 ms, ..." per step: the stages that took any time, and
    /// how much of the exchange ran behind the computation ("exchange 0.500 ms (80 % hidden)").
    pub fn per_step_summary(&self) -> String {
        Stage::ALL
            .iter()
            .filter(|&&s| !self.get(s).is_zero())
            .map(|&s| {
                let hidden = self.exchange_hidden.as_secs_f64();
                let e = self.get(s).as_secs_f64();
                if s == Stage::Exchange && hidden > 0.0 {
                    format!(
                        "{} {:.3} ms ({:.0} % hidden)",
                        s.name(),
                        self.ms_per_step(s),
                        100.0 * (hidden / e).min(1.0)
                    )
                } else {
                    format!("{} {:.3} ms", s.name(), self.ms_per_step(s))
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl std::fmt::Display for StageTimers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} steps, per step: {}",
            self.steps,
            self.per_step_summary()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_names_the_stages_that_ran() {
        let mut t = StageTimers {
            steps: 2,
            ..Default::default()
        };
        t.add(Stage::Forces, Duration::from_millis(4));
        t.add(Stage::Exchange, Duration::from_millis(1));
        assert_eq!(t.per_step_summary(), "exchange 0.500 ms, forces 2.000 ms");
        t.exchange_hidden = Duration::from_micros(750);
        assert_eq!(
            t.per_step_summary(),
            "exchange 0.500 ms (75 % hidden), forces 2.000 ms"
        );
        let mut u = StageTimers::default();
        u.add_stages(&t);
        assert_eq!(u.get(Stage::Forces), Duration::from_millis(4));
        assert_eq!(u.steps, 0);
    }
}
