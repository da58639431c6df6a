//! Outflow: what left the domain, from the frame header's counters (`removed_count`,
//! `removed_mass`: cumulative since t = 0, zero in runs without outflow regions), and the rate
//! at which it leaves.

/// A point of the cumulative removed mass: simulated time [s] and mass removed by then [kg].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RemovedAt {
    pub sim_time: f64,
    pub removed_mass: f64,
}

/// Discharge rate between two analysed frames, the backward difference of the cumulative
/// removed mass, Q = (M(t) - M(t_prev)) / (t - t_prev) [kg/s]: the mean mass flow through the
/// outflow regions over that interval (the frames in between are not needed, M is cumulative).
/// `Err` says why there is no rate: simulated time did not advance, or M decreased (the frames
/// belong to different runs).
pub fn discharge_rate(prev: RemovedAt, now: RemovedAt) -> Result<f64, &'static str> {
    let dt = now.sim_time - prev.sim_time;
    if dt.is_nan() || dt <= 0.0 {
        return Err("simulated time did not advance since the previous analysed frame");
    }
    let dm = now.removed_mass - prev.removed_mass;
    if dm < 0.0 {
        return Err("the removed mass decreased since the previous analysed frame (a new run?)");
    }
    let q = dm / dt;
    if q.is_finite() {
        Ok(q)
    } else {
        Err("the removed mass is not a finite number")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(sim_time: f64, removed_mass: f64) -> RemovedAt {
        RemovedAt {
            sim_time,
            removed_mass,
        }
    }

    #[test]
    fn rate_is_the_mass_difference_over_the_time_difference() {
        assert_eq!(discharge_rate(at(0.5, 1.0), at(0.75, 1.5)), Ok(2.0));
        assert_eq!(discharge_rate(at(0.5, 1.0), at(0.75, 1.0)), Ok(0.0));
    }

    #[test]
    fn no_rate_without_elapsed_time_or_with_a_decreasing_mass() {
        assert!(discharge_rate(at(0.5, 1.0), at(0.5, 2.0)).is_err());
        assert!(discharge_rate(at(0.5, 1.0), at(0.4, 2.0)).is_err());
        assert!(discharge_rate(at(0.5, 1.0), at(0.6, 0.5)).is_err());
        assert!(discharge_rate(at(0.5, 1.0), at(0.6, f64::NAN)).is_err());
    }
}
