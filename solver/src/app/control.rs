//! Run control: publication schedule, pause/stop state, and how commands change them.

use std::time::{Duration, Instant};

use shm_protocol::{Command, CommandOutcome};

/// What the main loop must do after commands were applied.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Requests {
    pub publish_now: bool,
    pub checkpoint_now: bool,
}

/// Publication schedule and run state, changed only between steps.
#[derive(Debug)]
pub struct RunControl {
    /// Publish every this many simulated seconds.
    pub refresh_sim: f64,
    /// And at least every this much wall time (None: off).
    pub refresh_wall: Option<Duration>,
    pub paused: bool,
    pub stop: bool,
    next_sim_publish: f64,
    last_wall_publish: Instant,
}

impl RunControl {
    pub fn new(refresh_sim: f64, refresh_wall_ms: u64, now_sim: f64) -> Self {
        Self {
            refresh_sim,
            refresh_wall: (refresh_wall_ms > 0).then(|| Duration::from_millis(refresh_wall_ms)),
            paused: false,
            stop: false,
            next_sim_publish: now_sim + refresh_sim,
            last_wall_publish: Instant::now(),
        }
    }

    /// Whether a frame is due at simulated time `t`.
    pub fn publish_due(&self, t: f64) -> bool {
        t >= self.next_sim_publish - 1e-12
            || self
                .refresh_wall
                .is_some_and(|w| self.last_wall_publish.elapsed() >= w)
    }

    /// Records a publication at simulated time `t`.
    pub fn published(&mut self, t: f64) {
        while self.next_sim_publish <= t + 1e-12 {
            self.next_sim_publish += self.refresh_sim;
        }
        self.last_wall_publish = Instant::now();
    }

    /// Applies one command; returns the acknowledgement and what the loop must do.
    pub fn apply(
        &mut self,
        cmd: &Command,
        now_sim: f64,
        can_checkpoint: bool,
    ) -> (CommandOutcome, Requests) {
        let mut req = Requests::default();
        let outcome = match cmd {
            Command::SetRefresh {
                sim_seconds,
                wall_ms,
            } => {
                if let Some(s) = sim_seconds {
                    if !(s.is_finite() && *s > 0.0) {
                        return (
                            CommandOutcome::Rejected(format!("refresh must be > 0 s, got {s}")),
                            req,
                        );
                    }
                    self.refresh_sim = *s;
                    self.next_sim_publish = now_sim + s;
                }
                if let Some(ms) = wall_ms {
                    self.refresh_wall = (*ms > 0).then(|| Duration::from_millis(*ms));
                }
                CommandOutcome::Done(format!(
                    "refresh {} s simulated, wall {}",
                    self.refresh_sim,
                    self.refresh_wall
                        .map_or("off".to_string(), |d| format!("{} ms", d.as_millis()))
                ))
            }
            Command::UpdateNow => {
                req.publish_now = true;
                CommandOutcome::Done("frame published".into())
            }
            Command::Pause => {
                self.paused = true;
                req.publish_now = true;
                CommandOutcome::Done(format!("paused at t = {now_sim:.6} s"))
            }
            Command::Resume => {
                self.paused = false;
                CommandOutcome::Done(format!("resumed at t = {now_sim:.6} s"))
            }
            Command::Stop => {
                self.stop = true;
                CommandOutcome::Done(format!("stopping at t = {now_sim:.6} s"))
            }
            Command::Checkpoint => {
                if can_checkpoint {
                    req.checkpoint_now = true;
                    CommandOutcome::Done("checkpoint written".into())
                } else {
                    CommandOutcome::Rejected(
                        "no --output directory: the solver has nowhere to write checkpoints".into(),
                    )
                }
            }
        };
        (outcome, req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_follows_simulated_time_and_commands() {
        let mut c = RunControl::new(0.01, 0, 0.0);
        assert!(!c.publish_due(0.005));
        assert!(c.publish_due(0.01));
        c.published(0.0100001);
        assert!(!c.publish_due(0.015));
        let (o, _) = c.apply(
            &Command::SetRefresh {
                sim_seconds: Some(0.001),
                wall_ms: None,
            },
            0.015,
            false,
        );
        assert!(o.is_done());
        assert!(c.publish_due(0.016));
        let (o, r) = c.apply(&Command::Checkpoint, 0.0, false);
        assert!(!o.is_done() && !r.checkpoint_now);
        let (_, r) = c.apply(&Command::Pause, 0.0, true);
        assert!(c.paused && r.publish_now);
        c.apply(&Command::Resume, 0.0, true);
        assert!(!c.paused);
        c.apply(&Command::Stop, 0.0, true);
        assert!(c.stop);
    }
}
