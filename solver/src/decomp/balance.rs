//! Dynamic load balancing: slab bounds move by whole cell layers toward equal work. Any cut gives
//! the same bits (contacts and SPH pair sums are gathered in cell and id order), so balancing
//! changes only speed. After XPS (Neubauer 2018: decide every 32 steps), Verma et al. (compare
//! neighbours' times, move a bound by one layer when they differ by more than p) and GPUSPH
//! (Rustico: a GPU slower than the mean by more than H_LB of a slice's time gives a slice).

use serde::{Deserialize, Serialize};

/// What the balancing measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Balance {
    /// Slabs keep their first cut.
    Off,
    /// Equal particle counts.
    Count,
    /// Equal measured compute time (each worker's time per particle, spread over its layers by
    /// their particle counts): follows contact density as well as counts.
    #[default]
    Time,
    /// Verma et al.: neighbours whose times differ by more than p = 5 % (relative;
    /// for SPH `--balance-threshold` sets p) move their common bound one layer toward the faster.
    // (Plain text, not doc links: clap prints these lines in --help. The values are
    // NEIGHBOUR_THRESHOLD and SLICE_THRESHOLD.)
    Neighbour,
    /// GPUSPH (Rustico): a worker slower than the mean by more than H_LB = 0.5 of the time of
    /// one layer (for SPH `--balance-threshold` sets H_LB) gives a layer toward the fastest such worker.
    Slice,
}

impl Balance {
    pub fn name(self) -> &'static str {
        match self {
            Balance::Off => "off",
            Balance::Count => "count",
            Balance::Time => "time",
            Balance::Neighbour => "neighbour",
            Balance::Slice => "slice",
        }
    }
}

/// Verma et al.'s p: the relative time difference of neighbours that moves their bound.
pub const NEIGHBOUR_THRESHOLD: f64 = 0.05;
/// GPUSPH's H_LB: the share of one layer's time by which a worker must deviate from the mean
/// (Rustico found 0.5 a good general choice).
pub const SLICE_THRESHOLD: f64 = 0.5;

/// The threshold of `how` when none is given: [`BALANCE_TOLERANCE`] for counts and times,
/// [`NEIGHBOUR_THRESHOLD`] (p) and [`SLICE_THRESHOLD`] (H_LB) for the papers' rules.
pub fn default_threshold(how: Balance) -> f64 {
    match how {
        Balance::Neighbour => NEIGHBOUR_THRESHOLD,
        Balance::Slice => SLICE_THRESHOLD,
        _ => BALANCE_TOLERANCE,
    }
}

/// The balancing decision of `how` from the owned particles per layer and each worker's busy
/// time since the last decision: new bounds, or `None`. Every slab keeps `min_width` layers.
pub fn decide(
    how: Balance,
    bounds: &[u32],
    per_layer: &[u64],
    busy: &[f64],
    min_width: u32,
) -> Option<Vec<u32>> {
    decide_with(how, None, bounds, per_layer, busy, min_width)
}

/// [`decide`] with `threshold` in place of [`default_threshold`]: the imbalance tolerated
/// (count, time), p (neighbour) or H_LB (slice).
pub fn decide_with(
    how: Balance,
    threshold: Option<f64>,
    bounds: &[u32],
    per_layer: &[u64],
    busy: &[f64],
    min_width: u32,
) -> Option<Vec<u32>> {
    let timed = busy.iter().any(|&b| b > 0.0);
    let th = threshold.unwrap_or(default_threshold(how));
    let new = match how {
        Balance::Off => return None,
        Balance::Count => {
            let cost: Vec<f64> = per_layer.iter().map(|&c| c as f64).collect();
            rebalance_within(bounds, &cost, th)?
        }
        Balance::Time if timed => {
            rebalance_within(bounds, &time_costs(bounds, per_layer, busy), th)?
        }
        Balance::Neighbour if timed => neighbour(bounds, busy, th)?,
        Balance::Slice if timed => slice(bounds, busy, th)?,
        _ => return None,
    };
    new.windows(2)
        .all(|w| w[1] >= w[0] + min_width)
        .then_some(new)
}

/// Whether slabs cut at `bounds` fit their workers' `room` (particle slots): each worker's
/// particles (`per_layer` summed over its layers) plus the layers next to its slab (its ghosts)
/// plus one more layer's worth of arrivals.
pub fn fits(bounds: &[u32], per_layer: &[u64], room: &[u64]) -> bool {
    let layer = |l: i64| -> u64 {
        if l < 0 {
            0
        } else {
            per_layer.get(l as usize).copied().unwrap_or(0)
        }
    };
    let widest = per_layer.iter().copied().max().unwrap_or(0);
    bounds.windows(2).zip(room).all(|(b, &r)| {
        let own: u64 = (b[0]..b[1]).map(|l| layer(l as i64)).sum();
        let ghosts = layer(b[0] as i64 - 1) + layer(b[1] as i64);
        own + ghosts + widest <= r
    })
}

/// Verma et al.'s correction: for each pair of neighbours, d = (t[i+1] - t[i]) / t[i]; when
/// d > p the slower i + 1 gives its first layer to i, when d < -p the slower i gives its last
/// layer to i + 1. `None` when nothing moves.
pub fn neighbour(bounds: &[u32], busy: &[f64], p: f64) -> Option<Vec<u32>> {
    let mut new = bounds.to_vec();
    for i in 0..busy.len().saturating_sub(1) {
        if busy[i] <= 0.0 {
            continue;
        }
        let d = (busy[i + 1] - busy[i]) / busy[i];
        if d > p && bounds[i + 2] > bounds[i + 1] + 1 {
            new[i + 1] = bounds[i + 1] + 1;
        } else if d < -p && bounds[i + 1] > bounds[i] + 1 {
            new[i + 1] = bounds[i + 1] - 1;
        }
    }
    (new != bounds).then_some(new)
}

/// GPUSPH's decision: with the mean time A and the mean time of one layer T = A / (layers per
/// worker), the worker furthest above A + h T gives one layer toward the worker furthest below
/// A - h T (every worker between gives one and takes one). `None` when no such pair exists.
pub fn slice(bounds: &[u32], busy: &[f64], h: f64) -> Option<Vec<u32>> {
    let n = busy.len();
    if n < 2 {
        return None;
    }
    let mean = busy.iter().sum::<f64>() / n as f64;
    let layers = (bounds[n] - bounds[0]) as f64 / n as f64;
    let t = h * mean / layers;
    let (mut give, mut take) = (None, None);
    for (g, &b) in busy.iter().enumerate() {
        let d = b - mean;
        if d > t && give.is_none_or(|k: usize| b > busy[k]) {
            give = Some(g);
        }
        if d < -t && take.is_none_or(|k: usize| b < busy[k]) {
            take = Some(g);
        }
    }
    let (give, take) = (give?, take?);
    let mut new = bounds.to_vec();
    if give < take {
        for b in &mut new[give + 1..=take] {
            *b -= 1;
        }
    } else {
        for b in &mut new[take + 1..=give] {
            *b += 1;
        }
    }
    new.windows(2).all(|w| w[0] < w[1]).then_some(new)
}

/// A move judged by its effect: the interval's step time after it against the one before it.
/// A move that made the step slower by more than [`GUARD_TOLERANCE`] is undone, and the next
/// move waits [`MoveGuard`]'s hold, doubled after each undone move (up to
/// [`GUARD_MAX_HOLD`] decisions) and reset by a move that helped.
///
/// Why: a model that spreads a worker's time over its layers by their counts cannot see what a
/// move costs elsewhere. On four H200s (session 24, the falling box cut along z, 2 M particles)
/// the steps were bound by launches and the exchange, not by the particles: moving the bounds
/// toward even loads drew them into the dense bed, the ghost layers grew, and the step went
/// from 0.285 to 0.374 ms (balancing by time, 9 moves), slower than not balancing.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MoveGuard {
    trial: Option<Trial>,
    /// Decisions still to skip.
    hold: u32,
    /// The hold after the next undone move (0 before the first).
    backoff: u32,
    kept: u64,
    undone: u64,
}

#[derive(Debug, Clone, PartialEq)]
struct Trial {
    /// Step time per step of the interval before the move [s].
    before: f64,
    /// The bounds before the move.
    undo: Vec<u32>,
    /// The move has been applied (with a Verlet skin: at the next search).
    applied: bool,
    /// A whole interval has passed since it was applied (the interval that applied it also
    /// paid its migration, so it is not compared).
    settled: bool,
}

/// What [`MoveGuard::decide`] asks of the caller.
#[derive(Debug, Clone, PartialEq)]
pub enum Guarded {
    /// Nothing moves.
    Stay,
    /// A move on trial: apply these bounds and call [`MoveGuard::applied`] when they are.
    Try(Vec<u32>),
    /// The last move made the steps slower: go back to these bounds.
    Undo(Vec<u32>),
}

impl Guarded {
    /// The bounds to apply, if any (an undo is logged at debug level).
    pub fn into_bounds(self) -> Option<Vec<u32>> {
        match self {
            Guarded::Stay => None,
            Guarded::Try(new) => Some(new),
            Guarded::Undo(old) => {
                tracing::debug!(to = ?old, "slab move undone: the steps after it were slower");
                Some(old)
            }
        }
    }
}

/// The share by which the step time after a move may exceed the one before it and the move is
/// kept: measurement noise, and a load that changes while it is judged (a bed forming changes
/// the step by far less than a per cent in the 64 steps a move takes to judge). Small, because
/// moves kept within it add up.
pub const GUARD_TOLERANCE: f64 = 0.01;
/// The longest hold after undone moves, in decisions ([`BALANCE_INTERVAL`] steps each).
pub const GUARD_MAX_HOLD: u32 = 64;

impl MoveGuard {
    /// One decision: `cost` is the interval's step time per step (the slowest worker's);
    /// `propose` the balancing rule's new bounds. Undoing is asked only where `fits` accepts
    /// the old bounds.
    pub fn decide(
        &mut self,
        bounds: &[u32],
        cost: f64,
        fits: impl Fn(&[u32]) -> bool,
        propose: impl FnOnce() -> Option<Vec<u32>>,
    ) -> Guarded {
        if let Some(t) = self.trial.as_mut() {
            if !t.applied {
                return Guarded::Stay;
            }
            if !t.settled {
                t.settled = true;
                return Guarded::Stay;
            }
            let t = self.trial.take().expect("a trial");
            if cost.is_finite() && cost > t.before * (1.0 + GUARD_TOLERANCE) {
                self.backoff = (self.backoff * 2).clamp(1, GUARD_MAX_HOLD);
                self.hold = self.backoff;
                if fits(&t.undo) {
                    self.undone += 1;
                    return Guarded::Undo(t.undo);
                }
                return Guarded::Stay;
            }
            self.kept += 1;
            self.backoff = 0;
            // The next move is judged against an interval of these bounds alone.
            return Guarded::Stay;
        }
        if self.hold > 0 {
            self.hold -= 1;
            return Guarded::Stay;
        }
        match propose() {
            Some(new) if cost.is_finite() && cost > 0.0 => {
                self.trial = Some(Trial {
                    before: cost,
                    undo: bounds.to_vec(),
                    applied: false,
                    settled: false,
                });
                Guarded::Try(new)
            }
            _ => Guarded::Stay,
        }
    }

    /// The bounds of the move on trial are in place (moves are judged from the next whole
    /// interval on).
    pub fn applied(&mut self) {
        if let Some(t) = self.trial.as_mut() {
            t.applied = true;
        }
    }

    /// Moves kept and undone so far.
    pub fn kept(&self) -> u64 {
        self.kept
    }
    pub fn undone(&self) -> u64 {
        self.undone
    }
}

/// The step time per step of a balancing interval: the slowest worker's time over the
/// interval's timed steps (infinite when none was timed, which no guard judges).
pub fn per_step_cost(busy: &[f64], steps: u64) -> f64 {
    if steps == 0 {
        return f64::INFINITY;
    }
    busy.iter().cloned().fold(0.0, f64::max) / steps as f64
}

/// Whether `how` decides from measured times, so that its moves are judged by their effect
/// ([`MoveGuard`]). Counts are kept even whatever the speed: that mode also keeps every worker
/// within its memory.
pub fn guarded(how: Balance) -> bool {
    matches!(how, Balance::Time | Balance::Neighbour | Balance::Slice)
}

/// Steps between two balancing decisions.
pub const BALANCE_INTERVAL: u64 = 32;
/// Bounds move only when the busiest worker exceeds the mean load by more than this share.
pub const BALANCE_TOLERANCE: f64 = 0.05;
/// Most layers a bound moves per decision: each move's migration stays small.
pub const MAX_MOVE: u32 = 1;

/// Worker loads under `bounds` from per-layer costs.
pub fn loads(bounds: &[u32], layer_cost: &[f64]) -> Vec<f64> {
    bounds
        .windows(2)
        .map(|b| layer_cost[b[0] as usize..b[1] as usize].iter().sum())
        .collect()
}

/// Per-layer costs for [`Balance::Time`]: each worker's measured `busy` time spread over its
/// layers in proportion to their particle `counts` (evenly when it owns none).
pub fn time_costs(bounds: &[u32], counts: &[u64], busy: &[f64]) -> Vec<f64> {
    let mut cost = vec![0.0; counts.len()];
    for (w, b) in bounds.windows(2).enumerate() {
        let r = b[0] as usize..b[1] as usize;
        let n: u64 = counts[r.clone()].iter().sum();
        for l in r.clone() {
            cost[l] = if n > 0 {
                busy[w] * counts[l] as f64 / n as f64
            } else {
                busy[w] / r.len() as f64
            };
        }
    }
    cost
}

/// New bounds moving each inner bound at most [`MAX_MOVE`] layers toward the cut that equalises
/// the cost, or `None` when the loads are within [`BALANCE_TOLERANCE`] or nothing would move.
/// Every slab keeps at least one layer.
pub fn rebalance(bounds: &[u32], layer_cost: &[f64]) -> Option<Vec<u32>> {
    rebalance_within(bounds, layer_cost, BALANCE_TOLERANCE)
}

/// [`rebalance`] with the tolerance `tolerance` in place of [`BALANCE_TOLERANCE`].
pub fn rebalance_within(bounds: &[u32], layer_cost: &[f64], tolerance: f64) -> Option<Vec<u32>> {
    let n = bounds.len() - 1;
    if n < 2 {
        return None;
    }
    let load = loads(bounds, layer_cost);
    let total: f64 = load.iter().sum();
    let max = load.iter().cloned().fold(0.0, f64::max);
    if total <= 0.0 || max <= (1.0 + tolerance) * total / n as f64 {
        return None;
    }
    // The ideal cut k: the layer boundary where the cumulative cost is nearest k/n of the total.
    let mut cum = Vec::with_capacity(layer_cost.len() + 1);
    cum.push(0.0);
    for &c in layer_cost {
        cum.push(cum.last().copied().unwrap_or(0.0) + c);
    }
    let mut new = bounds.to_vec();
    for k in 1..n {
        let goal = total * k as f64 / n as f64;
        let at = cum.partition_point(|&c| c < goal);
        let target = if at > 0 && (goal - cum[at - 1]) < (cum[at] - goal) {
            at - 1
        } else {
            at
        } as u32;
        let old = bounds[k];
        new[k] = target.clamp(old.saturating_sub(MAX_MOVE), old + MAX_MOVE);
    }
    // At least one layer per slab (old bounds were valid, so this moves nothing further than
    // MAX_MOVE).
    for k in 1..n {
        new[k] = new[k].max(new[k - 1] + 1);
    }
    for k in (1..n).rev() {
        new[k] = new[k].min(new[k + 1] - 1);
    }
    (new != bounds).then_some(new)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Balance`'s doc lines, which `--help` prints, give these values as plain text.
    #[test]
    fn the_help_text_states_the_papers_thresholds() {
        assert_eq!(
            NEIGHBOUR_THRESHOLD, 0.05,
            "update Balance::Neighbour's doc (p = 5 %)"
        );
        assert_eq!(
            SLICE_THRESHOLD, 0.5,
            "update Balance::Slice's doc (H_LB = 0.5)"
        );
    }

    /// A move that would put more particles on a worker than its slots hold is refused.
    #[test]
    fn fits_counts_own_layers_ghosts_and_a_layer_of_arrivals() {
        let per_layer = [10u64, 10, 10, 10];
        // [0,2) holds 20, ghosts 10 (layer 2), arrivals 10: 40; [2,4): the same.
        assert!(fits(&[0, 2, 4], &per_layer, &[40, 40]));
        assert!(!fits(&[0, 2, 4], &per_layer, &[39, 40]));
        // [0,3) holds 30 + ghosts 10 + 10 = 50.
        assert!(!fits(&[0, 3, 4], &per_layer, &[40, 40]));
        assert!(fits(&[0, 3, 4], &per_layer, &[50, 40]));
    }

    #[test]
    fn balanced_loads_stay() {
        assert_eq!(rebalance(&[0, 2, 4], &[1.0, 1.0, 1.0, 1.0]), None);
        // Within the tolerance.
        assert_eq!(rebalance(&[0, 2, 4], &[1.0, 1.04, 1.0, 1.0]), None);
        assert_eq!(rebalance(&[0, 4], &[5.0, 0.0, 0.0, 0.0]), None);
    }

    #[test]
    fn bounds_step_one_layer_toward_the_load() {
        // Everything in the last layers: the cut moves right one layer per decision.
        let even = [1.0; 8];
        assert_eq!(rebalance(&[0, 4, 8], &even), None, "already even");
        let cost = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0];
        assert_eq!(rebalance(&[0, 4, 8], &cost), Some(vec![0, 5, 8]));
        assert_eq!(rebalance(&[0, 5, 8], &cost), Some(vec![0, 6, 8]));
        assert_eq!(rebalance(&[0, 6, 8], &cost), Some(vec![0, 7, 8]));
        assert_eq!(rebalance(&[0, 7, 8], &cost), None, "converged");
    }

    #[test]
    fn every_slab_keeps_a_layer() {
        let cost = [0.0, 0.0, 0.0, 0.0, 0.0, 10.0];
        let mut b = vec![0, 1, 2, 3, 6];
        for _ in 0..10 {
            match rebalance(&b, &cost) {
                Some(n) => {
                    assert!(n.windows(2).all(|w| w[0] < w[1]), "{n:?}");
                    assert!(n.iter().zip(&b).all(|(x, y)| x.abs_diff(*y) <= MAX_MOVE));
                    b = n;
                }
                None => break,
            }
        }
        assert_eq!(b, vec![0, 3, 4, 5, 6]);
    }

    #[test]
    fn neighbours_move_their_bound_toward_the_faster() {
        // Verma et al.'s example: 8 s and 10 s, d = 0.25: a layer goes from the slower (1) to 0.
        assert_eq!(
            neighbour(&[0, 5, 10], &[8.0, 10.0], 0.05),
            Some(vec![0, 6, 10])
        );
        assert_eq!(
            neighbour(&[0, 5, 10], &[10.0, 8.0], 0.05),
            Some(vec![0, 4, 10])
        );
        assert_eq!(
            neighbour(&[0, 5, 10], &[10.0, 10.4], 0.05),
            None,
            "within p"
        );
        // Each pair decides on its own: the slow middle slab gives a layer to each side.
        assert_eq!(
            neighbour(&[0, 3, 6, 9], &[1.0, 2.0, 1.0], 0.05),
            Some(vec![0, 4, 5, 9])
        );
        // A slab never loses its last layer.
        assert_eq!(neighbour(&[0, 9, 10], &[1.0, 2.0], 0.05), None);
    }

    #[test]
    fn a_given_threshold_replaces_the_modes_default() {
        let (b, counts) = ([0, 4, 8], [1u64; 8]);
        // Neighbours 8 % apart: p = 0.05 moves the bound, p = 0.1 does not.
        let busy = [1.0, 1.08];
        assert_eq!(
            decide_with(Balance::Neighbour, None, &b, &counts, &busy, 1),
            Some(vec![0, 5, 8])
        );
        assert_eq!(
            decide_with(Balance::Neighbour, Some(0.1), &b, &counts, &busy, 1),
            None
        );
        // Times: a 13 % excess over the mean moves a bound by default, not with 0.2 tolerated.
        let (b16, counts16, busy) = ([0, 8, 16], [1u64; 16], [1.0, 1.3]);
        assert_eq!(
            decide_with(Balance::Time, None, &b16, &counts16, &busy, 1),
            Some(vec![0, 9, 16])
        );
        assert_eq!(
            decide_with(Balance::Time, Some(0.2), &b16, &counts16, &busy, 1),
            None
        );
        // Slice: H = 0.5 of a layer's time (0.13 here) moves at 0.3 from the mean, H = 2 not.
        let busy = [0.75, 1.35];
        assert_eq!(
            decide_with(Balance::Slice, None, &b, &counts, &busy, 1),
            Some(vec![0, 5, 8])
        );
        assert_eq!(
            decide_with(Balance::Slice, Some(2.0), &b, &counts, &busy, 1),
            None
        );
    }

    #[test]
    fn the_slowest_gives_a_slice_along_the_chain() {
        // Mean 2, 4 layers per worker: one layer takes 0.5; H = 0.5 -> threshold 0.25.
        let b = [0, 4, 8, 12];
        assert_eq!(
            slice(&b, &[2.0, 2.1, 1.9], 0.5),
            None,
            "within the threshold"
        );
        assert_eq!(slice(&b, &[3.0, 2.0, 1.0], 0.5), Some(vec![0, 3, 7, 12]));
        assert_eq!(slice(&b, &[1.0, 2.0, 3.0], 0.5), Some(vec![0, 5, 9, 12]));
        assert_eq!(slice(&b, &[2.0, 3.0, 1.0], 0.5), Some(vec![0, 4, 7, 12]));
        // A giver without a taker (or the reverse) moves nothing.
        assert_eq!(slice(&[0, 4, 8], &[2.0, 2.0], 0.5), None);
    }

    #[test]
    fn decide_keeps_the_minimum_width_and_needs_times() {
        let counts = [0, 0, 0, 0, 0, 0, 10, 10];
        assert_eq!(
            decide(Balance::Off, &[0, 4, 8], &counts, &[1.0, 9.0], 1),
            None
        );
        assert_eq!(
            decide(Balance::Count, &[0, 4, 8], &counts, &[0.0, 0.0], 1),
            Some(vec![0, 5, 8])
        );
        assert_eq!(
            decide(Balance::Neighbour, &[0, 4, 8], &counts, &[0.0, 0.0], 1),
            None
        );
        assert_eq!(
            decide(Balance::Neighbour, &[0, 4, 8], &counts, &[1.0, 9.0], 1),
            Some(vec![0, 5, 8])
        );
        assert_eq!(
            decide(Balance::Neighbour, &[0, 5, 8], &counts, &[1.0, 9.0], 3),
            None
        );
        assert_eq!(
            decide(Balance::Slice, &[0, 4, 8], &counts, &[1.0, 9.0], 3),
            Some(vec![0, 5, 8])
        );
    }

    #[test]
    fn time_costs_follow_counts_within_a_worker() {
        let c = time_costs(&[0, 2, 4], &[1, 3, 0, 0], &[4.0, 2.0]);
        assert_eq!(c, vec![1.0, 3.0, 1.0, 1.0]);
        assert_eq!(loads(&[0, 2, 4], &c), vec![4.0, 2.0]);
    }

    /// One whole trial of the move `from` -> `to` judged `ok`: proposed at cost 1, applied, its
    /// mixed interval skipped, then judged at cost `after`; the verdict.
    fn trial(
        g: &mut MoveGuard,
        from: &[u32],
        to: &[u32],
        after: f64,
        fits: impl Fn(&[u32]) -> bool,
    ) -> Guarded {
        assert_eq!(
            g.decide(from, 1.0, &fits, || Some(to.to_vec())),
            Guarded::Try(to.to_vec())
        );
        g.applied();
        assert_eq!(
            g.decide(to, 5.0, &fits, || panic!("settling")),
            Guarded::Stay
        );
        g.decide(to, after, &fits, || panic!("judging"))
    }

    /// A move that slows the steps is undone after a whole interval of the new bounds, and the
    /// next waits a hold that doubles; a move that helps is kept and resets the hold.
    #[test]
    fn the_guard_undoes_a_move_that_made_the_steps_slower() {
        let mut g = MoveGuard::default();
        let ok = |_: &[u32]| true;
        let b0 = vec![0, 4, 8];
        let b1 = vec![0, 5, 8];
        // Proposed and tried.
        assert_eq!(
            g.decide(&b0, 1.0, ok, || Some(b1.clone())),
            Guarded::Try(b1.clone())
        );
        // Not yet applied (a skin applies it at the next search): nothing is judged.
        assert_eq!(
            g.decide(&b0, 1.0, ok, || panic!("no proposal")),
            Guarded::Stay
        );
        g.applied();
        // The interval that applied it paid the migration: not judged either.
        assert_eq!(
            g.decide(&b1, 5.0, ok, || panic!("no proposal")),
            Guarded::Stay
        );
        // 10 % slower than before the move: undone, and one decision held.
        assert_eq!(
            g.decide(&b1, 1.1, ok, || panic!("no proposal")),
            Guarded::Undo(b0.clone())
        );
        assert_eq!(g.undone(), 1);
        assert_eq!(Guarded::Undo(b0.clone()).into_bounds(), Some(b0.clone()));
        assert_eq!(Guarded::Try(b1.clone()).into_bounds(), Some(b1.clone()));
        assert_eq!(Guarded::Stay.into_bounds(), None);
        assert_eq!(g.decide(&b0, 1.0, ok, || panic!("held")), Guarded::Stay);
        // Tried again, undone again: the hold doubles.
        assert_eq!(trial(&mut g, &b0, &b1, 1.5, ok), Guarded::Undo(b0.clone()));
        for _ in 0..2 {
            assert_eq!(g.decide(&b0, 1.0, ok, || panic!("held")), Guarded::Stay);
        }
        // A move that helps (within the tolerance counts as helping) is kept.
        assert_eq!(
            trial(&mut g, &b0, &b1, 1.0 + GUARD_TOLERANCE / 2.0, ok),
            Guarded::Stay
        );
        assert_eq!((g.kept(), g.undone()), (1, 2));
        // The hold is reset: the next decision may move at once.
        let b2 = vec![0, 6, 8];
        assert_eq!(
            g.decide(&b1, 1.0, ok, || Some(b2.clone())),
            Guarded::Try(b2)
        );
    }

    /// Undoing is skipped where the old bounds no longer fit; the hold doubles up to its
    /// ceiling and then stays there.
    #[test]
    fn the_guard_keeps_a_move_it_cannot_undo_and_caps_its_hold() {
        let mut g = MoveGuard::default();
        let (b0, b1) = (vec![0, 4, 8], vec![0, 5, 8]);
        for round in 0..10 {
            assert_eq!(
                trial(&mut g, &b0, &b1, 2.0, |b| b == b1.as_slice()),
                Guarded::Stay,
                "round {round}: the old bounds do not fit"
            );
            // Held exactly 1, 2, 4 ... 64 decisions; the next trial (next round) is proposed.
            for k in 0..(1u32 << round).min(GUARD_MAX_HOLD) {
                assert_eq!(
                    g.decide(&b0, 1.0, |_| true, || panic!("round {round}: held at {k}")),
                    Guarded::Stay
                );
            }
        }
        assert_eq!((g.kept(), g.undone()), (0, 0));
        assert!(guarded(Balance::Time) && !guarded(Balance::Count) && !guarded(Balance::Off));
    }
}
