//! Dynamic load balancing: slab bounds move by whole cell layers toward equal work. Any cut gives
//! the same bits (contacts are gathered in cell-coordinate and id order), so balancing changes
//! only speed. After XPS (Neubauer 2018: decide every 32 steps) and Verma et al. (compare
//! neighbours' loads, move a boundary by one layer per decision).

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
}

impl Balance {
    pub fn name(self) -> &'static str {
        match self {
            Balance::Off => "off",
            Balance::Count => "count",
            Balance::Time => "time",
        }
    }
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
    let n = bounds.len() - 1;
    if n < 2 {
        return None;
    }
    let load = loads(bounds, layer_cost);
    let total: f64 = load.iter().sum();
    let max = load.iter().cloned().fold(0.0, f64::max);
    if total <= 0.0 || max <= (1.0 + BALANCE_TOLERANCE) * total / n as f64 {
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
    fn time_costs_follow_counts_within_a_worker() {
        let c = time_costs(&[0, 2, 4], &[1, 3, 0, 0], &[4.0, 2.0]);
        assert_eq!(c, vec![1.0, 3.0, 1.0, 1.0]);
        assert_eq!(loads(&[0, 2, 4], &c), vec![4.0, 2.0]);
    }
}
