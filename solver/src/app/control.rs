//! Run control: publication schedule, pause/stop state, and how commands change them.

use std::time::{Duration, Instant};

use shm_protocol::{Command, CommandOutcome};

/// What the main loop must do after commands were applied.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Requests {
    pub publish_now: bool,
    pub checkpoint_now: bool,
}

/// Something due every `every` simulated seconds (publication, VTK output, checkpoints).
///
/// Advancing is O(1) whatever the interval: the old `while next <= t { next += every }` never
/// ended once `every` fell below the float spacing of `t` (`refresh 1e-300` wedged the solver
/// for good). Intervals are also bounded where they enter (at least one time step, see
/// [`check_interval`]), so a schedule is never due more than once per step.
#[derive(Debug, Clone)]
pub struct Schedule {
    next: f64,
    every: f64,
}

impl Schedule {
    /// First due one interval after `now`.
    pub fn new(every: f64, now: f64) -> Self {
        Self {
            next: now + every,
            every,
        }
    }
    pub fn every(&self) -> f64 {
        self.every
    }
    /// Steps accumulate rounding: "due" allows a millionth of the interval early.
    fn tolerance(&self) -> f64 {
        1e-6 * self.every
    }
    pub fn is_due(&self, t: f64) -> bool {
        t >= self.next - self.tolerance()
    }
    /// Moves the next event past `t` (to the first whole interval after it) in O(1).
    pub fn advance_past(&mut self, t: f64) {
        if t + self.tolerance() >= self.next {
            let k = ((t + self.tolerance() - self.next) / self.every).floor() + 1.0;
            self.next += k * self.every;
        }
        if self.next <= t {
            // The interval vanished against t's float spacing: next representable time.
            self.next = (t + self.every).max(t.next_up());
        }
    }
    /// `is_due` then `advance_past` when it was.
    pub fn take_due(&mut self, t: f64) -> bool {
        let due = self.is_due(t);
        if due {
            self.advance_past(t);
        }
        due
    }
}

/// A simulated-time interval given as `what`: within the protocol's bounds
/// ([`shm_protocol::limits`]) and at least one time step `dt` (nothing can happen more often).
pub fn check_interval(what: &str, seconds: f64, dt: f64) -> Result<f64, String> {
    shm_protocol::limits::check_sim_interval(what, seconds)?;
    if seconds < dt * (1.0 - 1e-9) {
        return Err(format!(
            "{what} must be at least one time step (dt = {dt:e} s), got {seconds:e} s"
        ));
    }
    Ok(seconds)
}

/// Publication schedule and run state, changed only between steps.
#[derive(Debug)]
pub struct RunControl {
    /// Publish every this many simulated seconds.
    publish: Schedule,
    /// And at least every this much wall time (None: off).
    pub refresh_wall: Option<Duration>,
    pub paused: bool,
    pub stop: bool,
    /// The time step, the lower bound of the publication interval [s].
    dt: f64,
    last_wall_publish: Instant,
    /// Host time the last frame took to publish (what the steps waited for it).
    last_cost: Duration,
    /// Whether the cost bound has been logged.
    throttle_logged: bool,
}

/// Frames whose publication costs the steps more than this are spaced so that publishing
/// takes at most [`PUBLISH_SHARE`] of the run (a frame of GPU ranks is gathered through host
/// memory: 70 ms at 2 M particles on two ranks; below this cost the schedule stands as asked).
const COSTLY_FRAME: Duration = Duration::from_millis(5);
/// The most of the run's wall time costly frames may take.
const PUBLISH_SHARE: f64 = 0.02;

impl RunControl {
    pub fn new(refresh_sim: f64, refresh_wall_ms: u64, now_sim: f64, dt: f64) -> Self {
        Self {
            publish: Schedule::new(refresh_sim, now_sim),
            refresh_wall: (refresh_wall_ms > 0).then(|| Duration::from_millis(refresh_wall_ms)),
            paused: false,
            stop: false,
            dt,
            last_wall_publish: Instant::now(),
            last_cost: Duration::ZERO,
            throttle_logged: false,
        }
    }

    /// The shortest wall time between frames that keeps costly frames under
    /// [`PUBLISH_SHARE`] of the run (zero for cheap ones).
    fn min_wall_gap(&self) -> Duration {
        if self.last_cost <= COSTLY_FRAME {
            return Duration::ZERO;
        }
        self.last_cost
            .mul_f64((1.0 - PUBLISH_SHARE) / PUBLISH_SHARE)
    }

    /// Publication interval in simulated seconds.
    #[cfg(test)]
    pub fn refresh_sim(&self) -> f64 {
        self.publish.every()
    }

    /// Whether a frame is due at simulated time `t`.
    pub fn publish_due(&self, t: f64) -> bool {
        let since = self.last_wall_publish.elapsed();
        (self.publish.is_due(t) || self.refresh_wall.is_some_and(|w| since >= w))
            && since >= self.min_wall_gap()
    }

    /// Records a publication at simulated time `t` that cost the steps `cost` of host time.
    pub fn published(&mut self, t: f64, cost: Duration) {
        self.publish.advance_past(t);
        self.last_wall_publish = Instant::now();
        self.last_cost = cost;
        if !self.throttle_logged && cost > COSTLY_FRAME {
            self.throttle_logged = true;
            tracing::info!(
                "a frame takes {:.0} ms to publish here: frames at most every {:.1} s, so that \
                 publishing stays under {:.0} % of the run (`shmctl send NAME update` asks for one now)",
                cost.as_secs_f64() * 1e3,
                self.min_wall_gap().as_secs_f64(),
                PUBLISH_SHARE * 100.0
            );
        }
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
                let checked = cmd.validate().and_then(|()| match sim_seconds {
                    Some(s) => check_interval("refresh", *s, self.dt).map(Some),
                    None => Ok(None),
                });
                let s = match checked {
                    Ok(s) => s,
                    Err(why) => return (CommandOutcome::Rejected(why), req),
                };
                if let Some(s) = s {
                    self.publish = Schedule::new(s, now_sim);
                }
                if let Some(ms) = wall_ms {
                    self.refresh_wall = (*ms > 0).then(|| Duration::from_millis(*ms));
                }
                CommandOutcome::Done(format!(
                    "refresh {:e} s simulated, wall {}",
                    self.publish.every(),
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

    fn refresh(s: f64) -> Command {
        Command::SetRefresh {
            sim_seconds: Some(s),
            wall_ms: None,
        }
    }

    #[test]
    fn schedule_follows_simulated_time_and_commands() {
        let mut c = RunControl::new(0.01, 0, 0.0, 1e-5);
        assert!(!c.publish_due(0.005));
        assert!(c.publish_due(0.01));
        c.published(0.0100001, Duration::ZERO);
        assert!(!c.publish_due(0.015));
        let (o, _) = c.apply(&refresh(0.001), 0.015, false);
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

    /// A frame that costs the steps 100 ms waits 4.9 s for the next (2 % of the run); cheap
    /// ones keep the schedule as asked.
    #[test]
    fn costly_frames_are_spaced_to_two_percent() {
        let mut c = RunControl::new(0.01, 100, 0.0, 1e-5);
        c.published(0.0, Duration::from_millis(100));
        assert_eq!(c.min_wall_gap(), Duration::from_millis(4900));
        assert!(
            !c.publish_due(0.05),
            "due by simulated time, but too soon after a costly frame"
        );
        c.published(0.05, Duration::from_millis(1));
        assert_eq!(c.min_wall_gap(), Duration::ZERO);
        assert!(c.publish_due(0.06));
    }

    /// Regression (hardening issue, item 1): `refresh 1e-300` was acknowledged and then the
    /// schedule's `while next <= t { next += every }` never ended.
    #[test]
    fn tiny_or_huge_intervals_are_refused_and_schedules_always_advance() {
        let mut c = RunControl::new(0.01, 100, 0.3, 1e-5);
        for bad in [1e-300, 1e-9, 0.0, -1.0, f64::NAN, f64::INFINITY, 1e300] {
            let (o, _) = c.apply(&refresh(bad), 0.3, false);
            assert!(!o.is_done(), "{bad}: {o:?}");
        }
        let (o, _) = c.apply(&refresh(1e-9), 0.3, false);
        assert!(
            matches!(&o, CommandOutcome::Rejected(m) if m.contains("one time step")),
            "{o:?}"
        );
        assert_eq!(c.refresh_sim(), 0.01, "a refused command changes nothing");
        // Even a schedule built with an interval below the float spacing of t moves on.
        let mut s = Schedule::new(1e-300, 0.3);
        assert!(s.take_due(0.3));
        assert!(!s.is_due(0.3));
        assert!(s.take_due(0.31));
        // A long jump advances in one step, to the first interval after t.
        let mut s = Schedule::new(1e-3, 0.0);
        s.advance_past(1e6);
        assert!(!s.is_due(1e6) && s.is_due(1e6 + 1e-3));
    }

    #[test]
    fn acknowledgements_keep_both_settings() {
        let mut c = RunControl::new(0.01, 100, 0.0, 1e-5);
        let (o, _) = c.apply(
            &Command::SetRefresh {
                sim_seconds: None,
                wall_ms: Some(0),
            },
            0.0,
            false,
        );
        assert_eq!(
            o,
            CommandOutcome::Done("refresh 1e-2 s simulated, wall off".into())
        );
        assert_eq!(c.refresh_wall, None);
        assert_eq!(c.refresh_sim(), 0.01);
    }

    proptest::proptest! {
        /// Any refresh command, whatever its numbers (any f64 bit pattern: NaN, infinities,
        /// subnormals, huge), is either refused with a reason or leaves a schedule that is
        /// finite, at least one step long, and moves past any time in one call.
        #[test]
        fn any_refresh_command_is_refused_or_leaves_a_sane_schedule(
            bits in proptest::prelude::any::<u64>(),
            wall in proptest::prelude::any::<u64>(),
            t in 0.0f64..1e6,
        ) {
            let dt = 1e-5;
            let mut c = RunControl::new(0.01, 0, 0.0, dt);
            let s = f64::from_bits(bits);
            let (o, _) = c.apply(
                &Command::SetRefresh { sim_seconds: Some(s), wall_ms: Some(wall) },
                t,
                false,
            );
            match o {
                CommandOutcome::Done(_) => {
                    proptest::prop_assert!(s.is_finite() && s >= dt && s <= 1e9);
                    proptest::prop_assert!(wall <= shm_protocol::limits::WALL_INTERVAL_MAX_MS);
                }
                CommandOutcome::Rejected(why) => proptest::prop_assert!(!why.is_empty()),
            }
            let every = c.refresh_sim();
            c.published(t + 3.5 * every, Duration::ZERO);
            proptest::prop_assert!(!c.publish.is_due(t + 3.5 * every));
        }
    }
}
