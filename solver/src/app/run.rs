//! The run loop: step, apply commands between steps, publish when due, write results, report.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use shm_protocol::{FrameWriter, Publisher, SolverState};

use super::control::{RunControl, Schedule};
use super::port::SimPort;

/// Everything the loop needs besides the simulation and the segment.
pub struct RunSettings {
    pub refresh_sim: f64,
    pub refresh_wall_ms: u64,
    pub output: Option<PathBuf>,
    pub output_every: Option<f64>,
    pub checkpoint_every: Option<f64>,
    pub progress_every: Duration,
    pub interrupted: Arc<AtomicBool>,
}

/// A frame whose device copy is still in flight: committed (made visible) once it landed.
type Pending<'p> = Option<FrameWriter<'p>>;

/// Commits the pending frame once its copy completed (`wait`: waits for it).
fn settle(sim: &mut dyn SimPort, pending: &mut Pending<'_>, wait: bool) -> anyhow::Result<()> {
    if let Some(w) = pending.take() {
        if wait {
            sim.wait_frame_copy()?;
        } else if !sim.frame_copied()? {
            *pending = Some(w);
            return Ok(());
        }
        w.commit();
    }
    Ok(())
}

/// Publishes the current state as a frame: at once on the CPU; on a GPU the copy into the slot
/// runs while the next steps do, and a later [`settle`] commits the frame.
pub fn publish_frame<'p>(
    sim: &mut dyn SimPort,
    publisher: &'p Publisher,
    steps_per_s: f64,
    pending: &mut Pending<'p>,
) -> anyhow::Result<()> {
    settle(sim, pending, true)?;
    let n = sim.particle_count() as u64;
    let bodies = sim.body_transforms();
    let mut w = publisher.begin_frame(n)?;
    w.step = sim.step_index();
    w.sim_time = sim.time();
    w.dt = sim.dt();
    w.steps_per_s = steps_per_s;
    (w.removed_count, w.removed_mass) = sim.removed();
    w.set_bodies(&bodies)?;
    if sim.fill_frame(&mut w)? {
        *pending = Some(w);
    } else {
        w.commit();
    }
    Ok(())
}

/// How the run ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ending {
    Completed,
    Stopped,
    /// Another process truncated the segment: its data is gone (the message says so and where
    /// the final checkpoint went, if any).
    SegmentLost(String),
}

/// Wall time a batch of GPU steps aims at: commands and frames wait at most about this long,
/// and a fast small case does not pay a synchronisation every few tens of microseconds. Each
/// batch ends in one (the device diagnostics), which drains the GPU's queue: in a 10 k-particle
/// drum at 16,000 steps/s a 4 ms batch lost 17 % of the speed to it (`bench/results/small_cases.md`).
const BATCH_WALL_S: f64 = 0.010;
/// Longest wall time a batch of slow GPU steps aims at: a 100 M-particle run steps about 30
/// times a second, and 16 steps a batch held every command and frame back for half a second
/// (frames at most 2 a second). Such a batch has one step or a few.
const SLOW_BATCH_WALL_S: f64 = 0.050;
/// Most steps in one batch.
const MAX_BATCH: u64 = 1024;

/// Steps of the next run-loop iteration: the method's preferred batch (1 on the CPU) until a
/// rate is known; then on a GPU the steps of about `BATCH_WALL_S` where that is more, and
/// below `preferred / SLOW_BATCH_WALL_S` steps per second those of `SLOW_BATCH_WALL_S` (at
/// least one step).
fn batch_for(preferred: u64, steps_per_s: f64) -> u64 {
    if preferred <= 1 || steps_per_s.is_nan() || steps_per_s <= 0.0 {
        return preferred;
    }
    let slow = ((steps_per_s * SLOW_BATCH_WALL_S) as u64).clamp(1, preferred);
    ((steps_per_s * BATCH_WALL_S) as u64).clamp(slow, MAX_BATCH.max(preferred))
}

pub fn run(
    sim: &mut dyn SimPort,
    publisher: &Publisher,
    s: &RunSettings,
) -> anyhow::Result<Ending> {
    let mut pending: Pending<'_> = None;
    let mut ctl = RunControl::new(s.refresh_sim, s.refresh_wall_ms, sim.time(), sim.dt());
    let schedule = |every: Option<f64>| {
        every
            .filter(|_| s.output.is_some())
            .map(|e| Schedule::new(e, sim.time()))
    };
    let mut outputs = schedule(s.output_every);
    let mut checkpoints = schedule(s.checkpoint_every);
    let mut output_index = 0u64;
    let end = sim.end_time();
    let start_step = sim.step_index();
    let start_wall = Instant::now();
    let mut last_progress = Instant::now();
    let (mut rate_steps, mut rate_since, mut steps_per_s) =
        (sim.step_index(), Instant::now(), 0.0f64);

    publisher.set_state(SolverState::Running);
    let t0 = Instant::now();
    publish_frame(sim, publisher, 0.0, &mut pending)?;
    let cost = t0.elapsed();
    settle(sim, &mut pending, true)?;
    ctl.published(sim.time(), cost);
    let batch = sim.preferred_batch().max(1);
    if let Some(dir) = &s.output {
        if s.output_every.is_some() {
            sim.write_output(dir, output_index)?;
            output_index += 1;
        }
    }
    let checkpoint = &|sim: &dyn SimPort| -> anyhow::Result<PathBuf> {
        let dir = s
            .output
            .as_ref()
            .context("no --output directory for checkpoints")?;
        let path = dir.join(format!("checkpoint-{:09}.bin", sim.step_index()));
        sim.save_checkpoint(&path)?;
        let latest = dir.join("checkpoint.bin");
        std::fs::copy(&path, &latest).with_context(|| format!("writing {}", latest.display()))?;
        Ok(path)
    };

    loop {
        // Commands, between steps only.
        let mut publish_now = false;
        let mut answers = Vec::new();
        for c in publisher.poll_commands() {
            let outcome = match &c.command {
                Ok(cmd) => {
                    let (mut outcome, req) = ctl.apply(cmd, sim.time(), s.output.is_some());
                    publish_now |= req.publish_now;
                    if req.checkpoint_now {
                        outcome = match checkpoint(sim) {
                            Ok(p) => shm_protocol::CommandOutcome::Done(p.display().to_string()),
                            Err(e) => shm_protocol::CommandOutcome::Rejected(format!("{e:#}")),
                        };
                    }
                    tracing::info!(client = c.client_id, ?cmd, ?outcome, "command");
                    outcome
                }
                Err(e) => {
                    shm_protocol::CommandOutcome::Rejected(format!("undecodable command: {e}"))
                }
            };
            answers.push((c, outcome));
        }
        if s.interrupted.load(Ordering::Relaxed) && !ctl.stop {
            tracing::info!("signal received: stopping cleanly");
            ctl.stop = true;
        }
        if publish_now {
            // Asked for by a client: the frame is visible before the acknowledgement.
            let t0 = Instant::now();
            publish_frame(sim, publisher, steps_per_s, &mut pending)?;
            let cost = t0.elapsed();
            settle(sim, &mut pending, true)?;
            ctl.published(sim.time(), cost);
        }
        for (c, outcome) in &answers {
            publisher.acknowledge(c, outcome);
        }
        if ctl.stop {
            break;
        }
        if ctl.paused {
            if let Err(e) = publisher.check_intact() {
                return segment_lost(sim, &mut pending, &e, &checkpoint);
            }
            settle(sim, &mut pending, true)?;
            publisher.set_state(SolverState::Paused);
            publisher.heartbeat();
            publisher.wait_for_command(Duration::from_millis(100));
            continue;
        }
        publisher.set_state(SolverState::Running);
        if sim.time() >= end - 0.5 * sim.dt() {
            break;
        }

        let remaining = ((end - sim.time()) / sim.dt()).round().max(1.0) as u64;
        sim.step_n(batch_for(batch, steps_per_s).min(remaining))?;
        if let Err(e) = publisher.check_intact() {
            return segment_lost(sim, &mut pending, &e, &checkpoint);
        }
        publisher.heartbeat();
        settle(sim, &mut pending, false)?;

        let t = sim.time();
        // The first rate after 100 ms, so that a short run is not stepped in the first,
        // small batches for half a second; then every 500 ms.
        let rate_every = if steps_per_s > 0.0 { 500 } else { 100 };
        if rate_since.elapsed() >= Duration::from_millis(rate_every) {
            steps_per_s =
                (sim.step_index() - rate_steps) as f64 / rate_since.elapsed().as_secs_f64();
            rate_steps = sim.step_index();
            rate_since = Instant::now();
        }
        if ctl.publish_due(t) {
            // The host time the steps wait for it (a GPU's copy runs on meanwhile).
            let t0 = Instant::now();
            publish_frame(sim, publisher, steps_per_s, &mut pending)?;
            ctl.published(t, t0.elapsed());
        }
        if let Some(dir) = &s.output {
            if outputs.as_mut().is_some_and(|o| o.take_due(t)) {
                sim.write_output(dir, output_index)?;
                output_index += 1;
            }
            if checkpoints.as_mut().is_some_and(|c| c.take_due(t)) {
                let p = checkpoint(sim)?;
                tracing::info!(path = %p.display(), "checkpoint written");
            }
        }
        if last_progress.elapsed() >= s.progress_every {
            last_progress = Instant::now();
            let remaining_steps = ((end - t) / sim.dt()).max(0.0);
            let eta = if steps_per_s > 0.0 {
                remaining_steps / steps_per_s
            } else {
                f64::NAN
            };
            let (removed, removed_mass) = sim.removed();
            tracing::info!(
                "t = {t:.5}/{end} s  step {}  {} steps/s  {:.3e} particle-steps/s  {} particles{}  ETA {}{}",
                sim.step_index(),
                format_rate(steps_per_s),
                steps_per_s * sim.particle_count() as f64,
                sim.particle_count(),
                if removed > 0 {
                    format!(" ({removed} removed, {removed_mass:.4} kg)")
                } else {
                    String::new()
                },
                format_eta(eta),
                match sim.stage_summary() {
                    st if st.is_empty() => String::new(),
                    st => format!("  [{st}]"),
                },
            );
        }
    }

    // Final frame, results and checkpoint.
    publish_frame(sim, publisher, steps_per_s, &mut pending)?;
    settle(sim, &mut pending, true)?;
    if let Some(dir) = &s.output {
        if s.output_every.is_some() {
            sim.write_output(dir, output_index)?;
        }
        if sim.can_checkpoint() {
            let p = checkpoint(sim)?;
            tracing::info!(path = %p.display(), "final checkpoint written");
        } else {
            tracing::info!("no final checkpoint: this method has none yet");
        }
    }
    let wall = start_wall.elapsed().as_secs_f64();
    let steps = sim.step_index() - start_step;
    tracing::info!(
        "{} after {steps} steps in {wall:.2} s ({} steps/s, {:.3e} particle-steps/s), t = {:.6} s",
        if ctl.stop { "stopped" } else { "finished" },
        format_rate(steps as f64 / wall.max(1e-9)),
        steps as f64 * sim.particle_count() as f64 / wall.max(1e-9),
        sim.time()
    );
    Ok(if ctl.stop {
        Ending::Stopped
    } else {
        Ending::Completed
    })
}

/// The segment was truncated by another process: this process survived (see
/// `shm-protocol/src/guard.rs`), but frames can no longer reach anyone. The state is saved
/// when there is somewhere to save it, and the run ends.
fn segment_lost(
    sim: &mut dyn SimPort,
    pending: &mut Pending<'_>,
    e: &shm_protocol::ReadError,
    checkpoint: &dyn Fn(&dyn SimPort) -> anyhow::Result<PathBuf>,
) -> anyhow::Result<Ending> {
    // A frame copy in flight lands in memory nobody reads; wait for it, never commit it.
    if pending.take().is_some() {
        sim.wait_frame_copy()?;
    }
    tracing::error!("{e}: stopping at t = {:.6} s", sim.time());
    let saved = match checkpoint(sim) {
        Ok(p) => format!("state saved to {}", p.display()),
        Err(e) => format!("state not saved ({e:#})"),
    };
    Ok(Ending::SegmentLost(format!(
        "{e}; stopped at step {}, t = {:.6} s; {saved}",
        sim.step_index(),
        sim.time()
    )))
}

fn format_eta(s: f64) -> String {
    if !s.is_finite() {
        return "?".into();
    }
    let s = s as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

/// A rate for the log: whole numbers from 100 up, and enough decimals below that a run of
/// millions of particles on the CPU (a step every few seconds) does not read "0 steps/s".
fn format_rate(per_s: f64) -> String {
    if per_s >= 99.5 {
        format!("{per_s:.0}")
    } else if per_s >= 0.995 {
        format!("{per_s:.1}")
    } else {
        format!("{per_s:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_rates_keep_their_digits() {
        assert_eq!(format_rate(3832.4), "3832");
        assert_eq!(format_rate(99.96), "100");
        assert_eq!(format_rate(12.34), "12.3");
        assert_eq!(format_rate(0.0376), "0.038");
        assert_eq!(format_rate(0.0), "0.000");
    }

    #[test]
    fn gpu_batches_take_10_to_50_ms() {
        // The CPU steps one at a time, whatever its speed.
        assert_eq!(batch_for(1, 1e6), 1);
        // No rate measured yet: the preferred batch.
        assert_eq!(batch_for(16, 0.0), 16);
        assert_eq!(batch_for(16, f64::NAN), 16);
        // A 1 M-particle run at 1,000 steps/s keeps 16 (16 ms per batch already); at 2,000: 20.
        assert_eq!(batch_for(16, 1_000.0), 16);
        assert_eq!(batch_for(16, 2_000.0), 20);
        // A lab-scale case at 15,000 steps/s: 150 steps, about 10 ms.
        assert_eq!(batch_for(16, 15_000.0), 150);
        // Never more than MAX_BATCH.
        assert_eq!(batch_for(16, 1e7), MAX_BATCH);
        // Slow runs: about 50 ms a batch, at least a step. 320 steps/s keeps 16; 100 M
        // particles at 30 steps/s step one at a time, 5 M at 100 steps/s five.
        assert_eq!(batch_for(16, 320.0), 16);
        assert_eq!(batch_for(16, 100.0), 5);
        assert_eq!(batch_for(16, 30.0), 1);
        assert_eq!(batch_for(16, 0.5), 1);
    }
}
