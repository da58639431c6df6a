//! Verlet skin of one GPU's neighbour search (issue 13, the main job's speed).
//!
//! Without a skin every step hashes, sorts and gathers the whole state (about a third of a
//! step of the built-in case). With a skin of width `s` the cells are `2 r_max + s` wide and the
//! search runs only every `interval` steps; in between the slots keep that search's order and
//! cells, and each particle's collide walks the cells around its cell of that search. Each slot
//! accumulates the distance its particle moved since (`path`, rounded up), and the launch's
//! largest path D bounds how far the cells can be off: two touching particles were less than
//! `2 r_max + 2 D` apart at the search, so `skin_search_cells` cells each way hold them (one
//! while 2 D <= s). The search is exact whatever the interval; the interval only decides
//! the speed: the host reads D at each search and sets the next interval so that D stays
//! below about 0.4 s ([`next_interval`]), a pure function of the state, so runs repeat bit for
//! bit.
//!
//! Contacts still come in (cell, id) order, of the cells of the last search: the same contacts,
//! summed in another order than a search every step, so the f32 results differ from a run
//! without a skin in the last bits. Hence no skin where bits must equal another run: the f64
//! parity mode (equal to the CPU) and GPU ranks (equal to one GPU without a skin), nor with
//! velocity Verlet, inflow and outflow (slots change between steps). A GPU group follows one
//! schedule for all its GPUs (multi.rs), and its bits are one GPU's with the skin.

use crate::dem::state::StepContext;

/// Skin of large cases as a fraction of the largest particle diameter ([`auto_skin`] from
/// [`AUTO_SKIN_FROM`] particles up).
pub const DEFAULT_SKIN: f64 = 0.1;

/// `CudaOptions::skin` that asks for [`auto_skin`] of the case's particle count (the default).
pub const SKIN_AUTO: f64 = -1.0;

/// Particles from which [`auto_skin`] is [`DEFAULT_SKIN`].
pub const AUTO_SKIN_FROM: usize = 500_000;

/// Largest skin [`auto_skin`] chooses.
pub const AUTO_SKIN_MAX: f64 = 0.5;

/// The default skin of a case of `particles`: 0.1 diameters from 500,000 particles up (the
/// main job's best: 28.3 s at 0.1 against 29.2 at 0.2, session 13), growing as
/// `0.1 sqrt(500,000 / N)` below, up to 0.5 (about 10,000 particles). A small case's step is
/// bound by launch latency: a search costs seven launches and a synchronisation whatever its
/// size, while a wider list costs little (H100, session 14: the 10 k drum 14,645 steps/s at 0.1,
/// 17,255 at 0.5; the 70 k silo 16,531 at 0.1, 17,636-17,781 from 0.2 to 0.5).
pub fn auto_skin(particles: usize) -> f64 {
    let n = particles.max(1) as f64;
    (DEFAULT_SKIN * (AUTO_SKIN_FROM as f64 / n).sqrt()).clamp(DEFAULT_SKIN, AUTO_SKIN_MAX)
}

/// Verlet list entries per particle: the neighbours within 1.1 diameters of a dense
/// monodisperse bed (12 to about 18), and within 1.5 (the widest automatic skin: 18 in a
/// close-packed lattice, 16-17 in a random dense pack), with a margin; a particle with more
/// walks the cells.
pub const LIST_CAP: u32 = 24;

/// Longest interval between two searches [steps].
pub const MAX_INTERVAL: u32 = 1000;

/// The part of the skin the host aims for at the end of an interval (the rest absorbs speed
/// that grows during the interval; past half the skin the collide widens its search).
const TARGET: f64 = 0.8;

/// Cells to search each way around a particle's cell of the last search when every particle has
/// moved at most `moved` [m] since (`reach` = 2 r_max, cells of edge `cell`). CUDA twin in
/// contact.cu.
pub fn skin_search_cells(reach: f64, moved: f32, cell: f64) -> u32 {
    let need = (reach + 2.0 * moved as f64) / cell;
    // NaN (a non-finite state, which the diagnostics report): one cell.
    if need.is_nan() || need <= 1.0 {
        return 1;
    }
    need.min(1e6).ceil() as u32
}

/// Distance moved in one symplectic Euler drift at velocity `v`, rounded up (CUDA twin in
/// contact.cu: float norm, times dt, times 1.001).
pub fn skin_path_step(v: [f32; 3], dt: f64) -> f32 {
    let s = (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt();
    s * dt as f32 * 1.001
}

/// The next interval between searches: `moved` [m] is the largest path at the end of the last
/// interval of `steps` steps, `half` half the skin width [m]. Aims at `TARGET` x half the
/// skin at the last interval's rate, growing at most twofold per interval.
pub fn next_interval(moved: f64, steps: u32, half: f64, prev: u32) -> u32 {
    let cap = prev.max(1).saturating_mul(2).min(MAX_INTERVAL);
    if steps == 0 {
        return prev.clamp(1, MAX_INTERVAL);
    }
    let rate = moved / steps as f64;
    if rate.is_nan() || rate < 0.0 {
        // A non-finite state, which the diagnostics report.
        return 1;
    }
    if rate == 0.0 {
        return cap;
    }
    ((TARGET * half / rate).floor() as u32).clamp(1, cap)
}

/// Skin width [m] of a case on one GPU: `fraction` of the largest diameter, or 0 where the
/// search must run every step (f64 parity mode, velocity Verlet).
pub fn skin_width(sc: &StepContext, fraction: f64, double: bool) -> f64 {
    let verlet = sc.integrator == crate::case::Integrator::VelocityVerlet;
    if double || verlet || fraction.is_nan() || fraction <= 0.0 {
        return 0.0;
    }
    fraction * 2.0 * sc.max_radius()
}

/// The host's side of the skin: when the next search runs, and what happened so far.
#[derive(Debug, Clone)]
pub(crate) struct Skin {
    /// Width [m].
    pub width: f64,
    /// Steps between searches now.
    pub interval: u32,
    /// Steps since the last search (`None`: the cells are stale, e.g. after a state upload or
    /// the energies' own search; the next step searches).
    pub since: Option<u32>,
    /// Searches and steps so far, and intervals whose particles moved more than half the skin
    /// (the collide searched more cells then).
    pub searches: u64,
    pub steps: u64,
    pub wide: u64,
    /// Largest path seen at the end of an interval [m].
    pub max_moved: f64,
    /// A fixed interval instead of [`next_interval`]'s (tests: long intervals make the collide
    /// search wider).
    pub fixed: Option<u32>,
    /// The next step searches whatever the interval (a GPU group: the moves passed half the
    /// skin).
    pub force: bool,
}

impl Skin {
    pub fn new(width: f64) -> Skin {
        Skin {
            width,
            interval: 1,
            since: None,
            searches: 0,
            steps: 0,
            wide: 0,
            max_moved: 0.0,
            fixed: None,
            force: false,
        }
    }

    /// Whether the next step searches.
    pub fn due(&self) -> bool {
        self.force || self.since.is_none_or(|s| s >= self.interval)
    }

    /// A search starts an interval (the one it ends, if any, is accounted by
    /// [`Skin::interval_ended`]).
    pub fn searched(&mut self) {
        if let Some(k) = self.fixed {
            self.interval = k.max(1);
        }
        self.since = Some(0);
        self.searches += 1;
        self.force = false;
    }

    /// The interval of `steps` steps that the last search ended had its particles move at most
    /// `moved` [m]: sets the interval that search started.
    pub fn interval_ended(&mut self, moved: f64, steps: u32) {
        if moved > 0.5 * self.width {
            self.wide += 1;
        }
        self.max_moved = self.max_moved.max(moved);
        self.interval = next_interval(moved, steps, 0.5 * self.width, self.interval);
        if let Some(k) = self.fixed {
            self.interval = k.max(1);
        }
    }

    /// One step ran.
    pub fn stepped(&mut self) {
        if let Some(s) = self.since.as_mut() {
            *s += 1;
        }
        self.steps += 1;
    }

    /// One line for the run's log.
    pub fn summary(&self) -> String {
        format!(
            "neighbour search every {:.1} steps on average ({} searches in {} steps, skin {:.3e} m, \
             largest move between searches {:.3e} m, {} intervals searched wider)",
            self.steps as f64 / self.searches.max(1) as f64,
            self.searches,
            self.steps,
            self.width,
            self.max_moved,
            self.wide
        )
    }
}

/// The skin of several GPUs (a group in one process, GPU ranks): one schedule for all, from
/// the largest move over every GPU, read at the end of every step. Every GPU searches at the
/// same steps, keeps its slots and ghosts in between and refreshes the ghosts from their owners
/// (window.rs). Unlike one GPU, the GPUs cannot search wider cells when the moves pass half the
/// skin (a ghost layer is one cell): the next step searches instead (`forced`). Slab bounds
/// the balancing moves take effect at the next search.
#[derive(Debug, Clone)]
pub(crate) struct SharedSkin {
    pub skin: Skin,
    /// Largest move since the last search over every GPU at the end of the last step [m].
    moved: f64,
    /// Searches forced because the moves passed half the skin.
    forced: u64,
}

impl SharedSkin {
    pub fn new(width: f64) -> SharedSkin {
        SharedSkin {
            skin: Skin::new(width),
            moved: 0.0,
            forced: 0,
        }
    }

    /// Whether this step searches (every GPU alike): one GPU's schedule from the largest move
    /// over all GPUs, or a forced search.
    pub fn search_due(&mut self) -> bool {
        let s = &mut self.skin;
        if !s.due() {
            return false;
        }
        let ended = s.since;
        s.searched();
        if let Some(steps) = ended {
            s.interval_ended(self.moved, steps);
        }
        true
    }

    /// A step ended; `moved` [m] is the largest move since the last search over every GPU.
    pub fn stepped(&mut self, moved: f64) {
        self.moved = moved;
        let s = &mut self.skin;
        s.stepped();
        if moved > 0.5 * s.width && !s.force {
            s.force = true;
            self.forced += 1;
        }
    }

    /// Whether the next step searches whatever the schedule.
    pub fn forced_next(&self) -> bool {
        self.skin.force
    }

    /// (searches, steps, searches forced by moves past half the skin).
    pub fn counts(&self) -> (u64, u64, u64) {
        (self.skin.searches, self.skin.steps, self.forced)
    }

    /// One line for the run's log.
    pub fn summary(&self) -> String {
        format!(
            "{}; {} searches forced by moves past half the skin",
            self.skin.summary(),
            self.forced
        )
    }
}

impl super::CudaSim {
    /// Whether this step searches. At a search that ends an interval the largest distance moved
    /// in it is read back (one synchronisation per search), which sets the next interval.
    /// (Reading it one step later, while the device runs the search, gave the same schedule
    /// and no measurable speed: session 14, `raw/session14/sixth/`.)
    pub(crate) fn skin_search(&mut self) -> Result<bool, super::CudaError> {
        let Some(s) = self.skin.as_ref() else {
            return Ok(true);
        };
        if let Some(search) = self.search_override.take() {
            // A GPU of a group: the group decided, from every GPU's moves.
            if search {
                if let Some(s) = self.skin.as_mut() {
                    s.searched();
                }
            }
            return Ok(search);
        }
        if !s.due() {
            return Ok(false);
        }
        let ended = match s.since {
            Some(steps) => Some((self.read_skin_moved()? as f64, steps)),
            None => None,
        };
        if let Some(s) = self.skin.as_mut() {
            s.searched();
            if let Some((moved, steps)) = ended {
                s.interval_ended(moved, steps);
            }
        }
        Ok(true)
    }

    /// The largest path since the last search (the collide's atomic maximum, `GridArrays::dmax`).
    fn read_skin_moved(&self) -> Result<f32, super::CudaError> {
        // (allocated with the skin)
        let w = self.read_words(self.state.grid.dmax, 1, "reading the skin's largest move")?;
        Ok(f32::from_bits(w[0]))
    }

    /// The cells are not the last search's any more (the state was replaced, or another search
    /// reordered the grid): the next step searches.
    pub(crate) fn skin_stale(&mut self) {
        if let Some(s) = self.skin.as_mut() {
            s.since = None;
        }
    }

    /// How the skin's searches went so far (None without a skin).
    pub fn skin_summary(&self) -> Option<String> {
        self.skin.as_ref().map(Skin::summary)
    }

    /// Skin width [m] (0 without).
    pub fn skin_width(&self) -> f64 {
        self.skin.as_ref().map_or(0.0, |s| s.width)
    }

    /// Whether the collide has a Verlet list to walk between searches.
    pub fn has_neighbour_list(&self) -> bool {
        self.skin.is_some() && self.state.grid.nlist != 0
    }

    /// (searches, steps, intervals searched wider) so far with a skin (None without).
    pub fn skin_counts(&self) -> Option<(u64, u64, u64)> {
        self.skin.as_ref().map(|s| (s.searches, s.steps, s.wide))
    }

    /// Searches every `k` steps from the next search on, whatever the particles do (tests of
    /// the wider search; no effect without a skin).
    #[doc(hidden)]
    pub fn fix_skin_interval(&mut self, k: u32) {
        if let Some(s) = self.skin.as_mut() {
            s.fixed = Some(k.max(1));
        }
    }

    /// The next step searches whatever the schedule, as a GPU group's does when a slab bound
    /// moved or the moves passed half the skin (tests comparing a group with one GPU step by
    /// step; no effect without a skin).
    #[doc(hidden)]
    pub fn force_search_next(&mut self) {
        if let Some(s) = self.skin.as_mut() {
            s.force = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_automatic_skin_widens_for_small_cases_only() {
        assert_eq!(auto_skin(100_000_000), DEFAULT_SKIN);
        assert_eq!(auto_skin(1_000_000), DEFAULT_SKIN);
        assert_eq!(auto_skin(AUTO_SKIN_FROM), DEFAULT_SKIN);
        let silo = auto_skin(70_000);
        assert!((0.25..0.3).contains(&silo), "{silo}");
        assert_eq!(auto_skin(10_000), AUTO_SKIN_MAX);
        assert_eq!(auto_skin(1), AUTO_SKIN_MAX);
        assert_eq!(auto_skin(0), AUTO_SKIN_MAX);
        // Monotone: fewer particles, never a narrower skin.
        let mut last = 0.0;
        for n in (1..200).rev().map(|k| k * 5_000) {
            let s = auto_skin(n);
            assert!(s >= last, "{n}: {s} < {last}");
            last = s;
        }
    }

    #[test]
    fn one_cell_while_the_skin_covers_the_moves() {
        // reach 1, skin 0.1: cells of 1.1.
        assert_eq!(skin_search_cells(1.0, 0.0, 1.1), 1);
        assert_eq!(skin_search_cells(1.0, 0.049, 1.1), 1);
        assert_eq!(skin_search_cells(1.0, 0.06, 1.1), 2);
        assert_eq!(skin_search_cells(1.0, 0.6, 1.1), 3);
        assert_eq!(skin_search_cells(1.0, f32::NAN, 1.1), 1);
        assert_eq!(skin_search_cells(1.0, f32::INFINITY, 1.1), 1_000_000);
    }

    #[test]
    fn path_steps_round_up() {
        let v = [3.0f32, 4.0, 0.0];
        let d = skin_path_step(v, 1e-3);
        assert!(d as f64 >= 5e-3 && (d as f64) < 5.01e-3);
    }

    #[test]
    fn intervals_follow_the_rate_and_grow_at_most_twofold() {
        // 10 steps moved 0.01 of a half skin of 0.1: rate 1e-3, target 0.08 -> 80, capped at 20.
        assert_eq!(next_interval(0.01, 10, 0.1, 10), 20);
        // Moved 0.09 in 10 steps: rate 9e-3 -> 8.
        assert_eq!(next_interval(0.09, 10, 0.1, 10), 8);
        // Moved more than the half skin: shorter.
        assert_eq!(next_interval(0.5, 10, 0.1, 10), 1);
        // At rest: doubles up to the cap.
        assert_eq!(next_interval(0.0, 10, 0.1, 10), 20);
        assert_eq!(next_interval(0.0, 10, 0.1, 900), MAX_INTERVAL);
        assert_eq!(next_interval(f64::NAN, 10, 0.1, 10), 1);
    }

    #[test]
    fn a_stale_search_is_not_an_interval() {
        let mut s = Skin::new(0.2);
        assert!(s.due());
        assert_eq!(s.since, None);
        s.searched();
        assert_eq!(s.interval, 1, "no interval had run");
        s.stepped();
        assert!(s.due());
        // The search ends an interval of one step; its move arrives after the search began.
        let steps = s.since.expect("an interval ran");
        s.searched();
        s.interval_ended(0.0, steps);
        assert_eq!(s.interval, 2);
        s.stepped();
        assert!(!s.due());
        s.stepped();
        assert!(s.due());
        let steps = s.since.expect("an interval ran");
        s.searched();
        s.interval_ended(0.5, steps);
        assert_eq!(s.wide, 1);
        assert_eq!(s.interval, 1);
        assert_eq!(s.searches, 3);
        // A fixed interval wins over the moves.
        s.fixed = Some(7);
        s.stepped();
        s.searched();
        s.interval_ended(0.0, 1);
        assert_eq!(s.interval, 7);
    }
}
