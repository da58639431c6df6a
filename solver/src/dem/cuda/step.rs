//! The time step as a sequence of launches on the compute stream, timed through CUDA events:
//! always on one sampled step per batch (read back without waiting once the device has passed
//! it, and weighted by the batch's steps: no synchronisation is added), or on every step in
//! profiling mode (synchronising after each step).
//!
//! Stages (the pipeline names of the CPU backend): `prepare` = hash + count, scan, scatter,
//! per-cell id order; `reorder` = gather into the scratch copy; `collide` = fused collide +
//! integrate back into the state. Velocity Verlet adds `kick_drift` before `prepare`.

use cudarc::driver::{CudaEvent, LaunchConfig, PushKernelArg};
use kernels::Kernel;

use super::graph::StepLaunches;
use super::params::{
    DemDiag, DemFrame, DemParams, ParticleArrays, INTEGRATE_EULER, INTEGRATE_HALF_KICK,
    INTEGRATE_NONE,
};
use super::{CudaError, CudaSim};

/// Shortest wall time between two timed (sampled) steps: a sampled step is launched kernel by
/// kernel with events between them, which in a 10 k-particle case costs as much as several
/// replayed steps; the stage times need a few samples a second, not one per batch.
pub(crate) const SAMPLE_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

/// Particles up to which dem_mesh_filter runs [`kernels::MESH_FILTER_LANES`] threads per
/// particle (about two resident waves of an H100's threads at 8 lanes).
const MESH_FILTER_SMALL: u32 = 1 << 18;

/// Steps between two looks at the spill rows taken (`CudaSim::check_spill`; each synchronises):
/// the spill rows grow before the contacts that form meanwhile run out of them.
pub(crate) const SPILL_CHECK_EVERY: u64 = 50;

/// Accumulated device time per kernel [ms] and the steps it stands for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StageTimes {
    /// (kernel or stage name, total ms) in launch order.
    pub kernels: Vec<(&'static str, f64)>,
    pub steps: u64,
}

impl StageTimes {
    fn add(&mut self, name: &'static str, ms: f64) {
        match self.kernels.iter_mut().find(|k| k.0 == name) {
            Some(k) => k.1 += ms,
            None => self.kernels.push((name, ms)),
        }
    }
    /// Mean ms per step of each kernel, e.g. "hash_count 0.05 ms, scan 0.02 ms, ...".
    pub fn summary(&self) -> String {
        let s = self.steps.max(1) as f64;
        self.kernels
            .iter()
            .map(|(n, ms)| format!("{n} {:.3} ms", ms / s))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Swaps the particle state of two copies (history included), not the stored forces, which
/// belong to the state whichever copy holds it.
fn swap_state(a: &mut ParticleArrays, b: &mut ParticleArrays) {
    let keep = (a.force, a.contacts, a.torque, b.force, b.contacts, b.torque);
    std::mem::swap(a, b);
    (a.force, a.contacts, a.torque, b.force, b.contacts, b.torque) = keep;
}

/// Exchanges the contact-history buffers of two particle array sets (two-buffer history).
fn swap_history(a: &mut ParticleArrays, b: &mut ParticleArrays) {
    std::mem::swap(&mut a.hist_count, &mut b.hist_count);
    std::mem::swap(&mut a.hist, &mut b.hist);
}

fn blocks(n: u32, threads: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (n.div_ceil(threads).max(1), 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Exclusive scan of `n` u32 at `input` into `output` on `stream` with the kernels
/// `(scan_tile, scan_add)` of cells.cu and the block-sum buffers `levels` ((sums, scanned sums,
/// tiles) per level, sized for `n` at `level`): one tile pass, then the tile totals scanned
/// recursively and added back. Shared by the DEM and SPH modules.
pub(crate) fn exclusive_scan(
    stream: &std::sync::Arc<cudarc::driver::CudaStream>,
    fns: (&cudarc::driver::CudaFunction, &cudarc::driver::CudaFunction),
    levels: &[(u64, u64, u32)],
    input: u64,
    output: u64,
    n: u32,
    level: usize,
) -> Result<(), CudaError> {
    let (sums, scanned, tiles) = levels[level];
    let cfg = LaunchConfig {
        grid_dim: (tiles, 1, 1),
        block_dim: (kernels::SCAN_THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut b = stream.launch_builder(fns.0);
    b.arg(&input).arg(&output).arg(&sums).arg(&n);
    // SAFETY: scan_tile(const unsigned*, unsigned*, unsigned*, unsigned) with device arrays of
    // at least n, n and `tiles` elements (the caller allocated `levels` for this n).
    unsafe { b.launch(cfg) }.map_err(|e| CudaError::driver("launching scan_tile", e))?;
    if tiles > 1 {
        exclusive_scan(stream, fns, levels, sums, scanned, tiles, level + 1)?;
        let mut b = stream.launch_builder(fns.1);
        b.arg(&output).arg(&scanned).arg(&n);
        // SAFETY: scan_add(unsigned*, const unsigned*, unsigned) over n elements, SCAN_ITEMS
        // per thread; `scanned` holds one offset per tile.
        unsafe { b.launch(blocks(n.div_ceil(kernels::SCAN_ITEMS), 256)) }
            .map_err(|e| CudaError::driver("launching scan_add", e))?;
    }
    Ok(())
}

/// Tiles of each level of [`exclusive_scan`] over `n` elements (at least one level).
pub(crate) fn scan_level_sizes(n: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut m = n;
    loop {
        let t = m.div_ceil(kernels::SCAN_TILE).max(1);
        out.push(t);
        if t <= 1 {
            return out;
        }
        m = t;
    }
}

/// The error the collide kernel's diagnostics `d` report after `step`, if any: a non-finite
/// particle first, then contacts that found the history (`hist_cap` entries) full.
fn diag_failure(d: &DemDiag, hist_cap: u32, step: u64) -> Option<CudaError> {
    if d.nonfinite > 0 {
        Some(CudaError::NonFinite {
            count: d.nonfinite,
            step,
        })
    } else if d.hist_overflow > 0 {
        Some(CudaError::HistoryOverflow {
            count: d.hist_overflow,
            cap: hist_cap,
            step,
        })
    } else {
        None
    }
}

/// Records events between launches when profiling or sampling.
pub(crate) struct Marks {
    events: Vec<(&'static str, CudaEvent)>,
    on: bool,
    /// Events to reuse before creating new ones.
    spare: Vec<CudaEvent>,
}

impl Marks {
    /// No timing (several GPUs time whole phases; a Verlet step stopped for inflow).
    pub(crate) fn off() -> Marks {
        Marks {
            events: Vec::new(),
            on: false,
            spare: Vec::new(),
        }
    }
}

/// A step whose interior collide is queued ([`CudaSim::launch_interior`]): what its boundary
/// pass needs.
pub(crate) struct InteriorStep {
    l: StepLaunches,
    live: u32,
    /// The boundary layers' slots (device address) and their number.
    list: u64,
    count: u32,
    /// Recorded on the compute stream after the mesh filter (meshes only): the boundary
    /// pass, on another stream, reads its hit masks.
    filtered: Option<cudarc::driver::CudaEvent>,
}

/// The events of one sampled step, standing for `weight` steps.
pub(crate) struct Sample {
    events: Vec<(&'static str, CudaEvent)>,
    weight: u64,
}

impl CudaSim {
    fn mark(&self, marks: &mut Marks, name: &'static str) -> Result<(), CudaError> {
        if marks.on {
            let ev = match marks.spare.pop() {
                Some(ev) => ev,
                None => self
                    .ctx
                    .new_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))
                    .map_err(|e| CudaError::driver("creating an event", e))?,
            };
            ev.record(&self.stream)
                .map_err(|e| CudaError::driver("recording an event", e))?;
            marks.events.push((name, ev));
        }
        Ok(())
    }

    /// Exclusive scan of `n` u32 at `input` into `output`, using scan level `level`'s buffers.
    fn scan(&self, input: u64, output: u64, n: u32, level: usize) -> Result<(), CudaError> {
        self.scan_with(&self.state.scan_levels, input, output, n, level)
    }

    /// [`CudaSim::scan`] with the block-sum buffers `levels` (sized for `n` at level 0).
    pub(crate) fn scan_with(
        &self,
        levels: &[(u64, u64, u32)],
        input: u64,
        output: u64,
        n: u32,
        level: usize,
    ) -> Result<(), CudaError> {
        let fns = (
            self.module.function(Kernel::ScanTile),
            self.module.function(Kernel::ScanAdd),
        );
        exclusive_scan(&self.stream, fns, levels, input, output, n, level)
    }

    /// Queues the neighbour search and the collide kernel with integration `integrate`
    /// (`params::INTEGRATE_*`; returns without waiting for the device), with the meshes where
    /// the caller placed them ([`CudaSim::prepare_meshes`]). Untimed steps of one GPU replay a
    /// captured graph of the same launches (`graph.rs`).
    fn launch_step(&mut self, marks: &mut Marks, integrate: u32) -> Result<(), CudaError> {
        // A frame published since the last step is packed by this collide where it reads that
        // state (publish.rs), else at once, before anything of the step changes it.
        let frame = self.take_deferred_frame(integrate)?;
        self.size_spill()?;
        let (mut l, live) = self.prepare_step(integrate)?;
        if let Some(f) = &frame {
            l.frame = f.frame();
        }
        // Several GPUs change their live slots every step (a graph per step would never be
        // replayed); timed steps need their events between the launches; a step that packs a
        // frame runs once per frame.
        if marks.on || self.window.is_some() || !self.opts.graphs || frame.is_some() {
            self.enqueue_step(&l, marks)?;
        } else {
            let mut graphs = std::mem::take(&mut self.graphs);
            let r = graphs.launch(&self.stream, &l, || {
                self.enqueue_step(&l, &mut Marks::off())
            });
            self.graphs = graphs;
            r?;
        }
        if let Some(f) = frame {
            super::driver::wait_for(&self.copy_stream, &self.stream)?;
            self.queue_deferred_copy(f)?;
        }
        self.close_launches(l.search, live);
        Ok(())
    }

    /// The launches of a step with integration `integrate` and the live slots it collides.
    fn prepare_step(&mut self, integrate: u32) -> Result<(StepLaunches, u32), CudaError> {
        let mut p = self.params;
        p.integrate = integrate;
        if integrate == INTEGRATE_NONE {
            // Verlet's extra force evaluation: the CPU counts only the step's own contacts.
            p.diag = 0;
        }
        // With several GPUs only the live slots 0..live are collided (the dead ones were sorted
        // behind them).
        let live = self.window.as_ref().map_or(p.n, |w| w.live);
        let mut pc = p;
        pc.n = live;
        let search = self.skin_search()?;
        let mut l = self.step_launches(p, pc, search)?;
        if integrate == INTEGRATE_EULER {
            // A slab writes its particles into its group's frame, if one waits for this step.
            if let Some(f) = self.publish.slab_frame {
                l.frame = f;
            }
        }
        if self.skip_stores && integrate == INTEGRATE_EULER {
            // Nobody reads this step's forces (another step of the call follows): 28 bytes per
            // particle not written (the arrays keep the state's, as the launch's output only).
            // One copy of the state integrates from them.
            if !self.cfg.single_copy {
                l.output.force = 0;
                l.output.torque = 0;
            }
            l.output.contacts = 0;
        }
        Ok((l, live))
    }

    /// After a step's launches are queued: the state's copies and history buffers swap as the
    /// collide left them, and the dead tail is dropped.
    fn close_launches(&mut self, search: bool, live: u32) {
        let in_place = self.history_in_place();
        if let Some(sp) = self.state.spill.as_mut() {
            // dem_springs wrote this step's spill rows into the other buffer.
            sp.cur = 1 - sp.cur;
            super::buffers::apply_spill(&mut self.params, Some(sp));
        }
        // Any collide stores fresh forces (one copy: over what a search left in their buffer).
        self.forces_stale = false;
        let st = &mut self.state;
        if self.cfg.single_copy {
            // The collide and dem_integrate worked on the one copy in place.
        } else if !search {
            // The collide wrote the scratch copy in the same slot order: it is the state now.
            swap_state(&mut st.tmp, &mut st.cur);
        } else if !in_place {
            swap_history(&mut st.tmp, &mut st.cur);
        }
        if let Some(s) = self.skin.as_mut() {
            s.stepped();
        }
        // The dead tail is gone: the next exchange appends behind the live slots.
        self.params.n = live;
        if let Some(w) = self.window.as_mut() {
            // Slots 0..live are in this sort's order now (the band classification uses it).
            w.sorted = live;
        }
    }

    /// The first half of a step between a skin's searches on a GPU of a group whose ghost
    /// refresh runs beside it (multi.rs): the mesh filter, then the collide of every slot but
    /// those of the boundary layers that read ghosts (`DEM_PASS_INTERIOR`), on the compute
    /// stream. Those are [`CudaSim::launch_boundary`]'s, queued on the refresh stream after the
    /// ghosts' unpack, so that they run beside the interior too.
    pub(crate) fn launch_interior(&mut self, integrate: u32) -> Result<InteriorStep, CudaError> {
        self.flush_deferred_frame()?;
        self.search_override = Some(false);
        let (l, live) = self.prepare_step(integrate)?;
        let (skip, list, count) = self.boundary_slots();
        // The mesh filter reads ghost slots that the unpack may be writing: their masks are
        // never read (ghosts are not collided), and the owned slots' positions do not change.
        self.enqueue_mesh_filter(&l, &mut Marks::off())?;
        let filtered = if l.msh.n_tris > 0 && l.msh.hit_mask != 0 {
            Some(
                self.stream
                    .record_event(None)
                    .map_err(|e| CudaError::driver("recording an event", e))?,
            )
        } else {
            None
        };
        let mut pc = l.pc;
        pc.pass_skip = skip;
        let threads = pc.n.max(pc.n_rows);
        self.enqueue_collide(&self.stream, Kernel::CollideInterior, &l, pc, threads)?;
        Ok(InteriorStep {
            l,
            live,
            list,
            count,
            filtered,
        })
    }

    /// The second half of [`CudaSim::launch_interior`]'s step: the collide of the boundary
    /// layers' slots (the refresh lists' first two) on `stream` (ordered after the ghosts'
    /// unpack by the caller; after the mesh filter here), then the bookkeeping of a step.
    /// The two passes write disjoint slots and history rows and read the state, whose ghost
    /// slots only the unpack writes, and only the boundary pass reads.
    pub(crate) fn launch_boundary(
        &mut self,
        stream: &std::sync::Arc<cudarc::driver::CudaStream>,
        s: InteriorStep,
    ) -> Result<(), CudaError> {
        if let Some(ev) = &s.filtered {
            stream
                .wait(ev)
                .map_err(|e| CudaError::driver("ordering the boundary collide", e))?;
        }
        if s.count > 0 {
            let mut pc = s.l.pc;
            pc.pass_list = s.list;
            pc.pass_count = s.count;
            self.enqueue_collide(stream, Kernel::CollideBoundary, &s.l, pc, s.count)?;
        }
        self.close_launches(false, s.live);
        Ok(())
    }

    /// The owned layers whose slots read ghosts (`u32::MAX`: no neighbour on that side), and
    /// the list of their slots with its length: the first two refresh lists, one after the
    /// other (window.rs).
    fn boundary_slots(&self) -> ([u32; 2], u64, u32) {
        let r = self
            .window
            .as_ref()
            .and_then(|w| w.refresh.as_ref())
            .expect("refresh lists (a skin)");
        (
            [r.layers.layer[0], r.layers.layer[1]],
            r.list.ptr,
            r.totals[0] + r.totals[1],
        )
    }

    /// The arguments of a step's launches: search parameters `p`, collide parameters `pc`
    /// (its live slots; in place it carries the history rows of all `p.n`), the state, its scratch copy
    /// and the grid, and the mesh hit masks sized for `pc.n`. The history is not reordered: the
    /// collide updates each particle's row in place, or (two buffers) reads the last step's
    /// (the state's) and writes the other in slot order, swapped after the launch (contact.cu).
    /// Without a search (`search` false, a Verlet skin's step between searches) the collide
    /// reads the state itself, in the last search's order, and writes the scratch copy, which
    /// becomes the state (the stored forces stay with the state's arrays).
    pub(crate) fn step_launches(
        &mut self,
        p: DemParams,
        pc: DemParams,
        search: bool,
    ) -> Result<StepLaunches, CudaError> {
        if let Some(m) = self.meshes.as_mut() {
            m.ensure_hit_mask(&self.stream, 2 * pc.n as usize)?;
        }
        let st = &self.state;
        let (cur, tmp, mut grid) = (st.cur, st.tmp, st.grid);
        if self.skin.is_none() {
            grid.without_skin();
        }
        let (mut input, mut output) = if self.cfg.single_copy {
            // One copy: the collide reads it and stores forces and torques (in cur.force and
            // cur.torque, the force buffer), which dem_integrate applies in place.
            (cur, cur)
        } else if search {
            (tmp, cur)
        } else {
            let mut out = tmp;
            out.force = cur.force;
            out.contacts = cur.contacts;
            out.torque = cur.torque;
            (cur, out)
        };
        if search && !self.history_in_place() && !self.cfg.single_copy {
            swap_history(&mut input, &mut output);
        }
        // In place, the collide and the gather carry the rows of the dead tail too (free rows
        // for the next arrivals); with two buffers an arrival's row is its slot.
        let mut pc = pc;
        pc.n_rows = if self.history_in_place() { p.n } else { 0 };
        Ok(StepLaunches {
            search,
            adopt: search && self.cfg.owner_keys,
            p,
            pc,
            cur,
            tmp,
            grid,
            cells: st.cells,
            input,
            output,
            diag: st.diag,
            msh: self.meshes.as_ref().map(|m| m.arrays).unwrap_or_default(),
            // grid.count holds cells + 1 counters (allocated once with the grid, buffers.rs).
            count_bytes: 4 * (st.cells as usize + 1),
            frame: DemFrame::default(),
        })
    }

    /// Queues the launches of [`CudaSim::launch_step`] (directly, or into a graph capture).
    fn enqueue_step(&self, l: &StepLaunches, marks: &mut Marks) -> Result<(), CudaError> {
        if l.search {
            self.enqueue_search(l, marks)?;
        } else {
            self.enqueue_mesh_filter(l, marks)?;
        }
        if self.history_pairs() {
            self.mark(marks, "springs")?;
            self.enqueue_springs(l)?;
        }
        self.mark(marks, "collide")?;
        let threads = l.pc.n.max(l.pc.n_rows);
        self.enqueue_collide(&self.stream, Kernel::Collide, l, l.pc, threads)?;
        if self.cfg.single_copy {
            self.mark(marks, "integrate")?;
            self.enqueue_integrate(l)?;
        }
        Ok(())
    }

    /// Queues `dem_integrate` (one copy of the state): every live slot moved in place by the
    /// forces and torques the collide stored.
    fn enqueue_integrate(&self, l: &StepLaunches) -> Result<(), CudaError> {
        let mut b = self
            .stream
            .launch_builder(self.module.function(Kernel::Integrate));
        let (pc, s, grid) = (l.pc, l.output, l.grid);
        b.arg(&pc).arg(&s).arg(&grid).arg(&l.diag);
        // SAFETY: dem_integrate(DemParams, ParticleArrays, GridArrays, DemDiag*): thread k
        // reads slot k's force and torque (the force buffer, 3 n reals each) and state and
        // writes its state and skin path, k < pc.n <= the slots allocated; diag is the
        // allocated DemDiag.
        unsafe { b.launch(blocks(pc.n, 256)) }
            .map_err(|e| CudaError::driver("launching dem_integrate", e))?;
        Ok(())
    }

    /// Whether a search moves the contact history with the slots (one copy of the state, the
    /// history in place and slot-major, one GPU): then every slot's history row is its slot.
    pub(crate) fn history_moves(&self) -> bool {
        self.cfg.single_copy
            && self.history_in_place()
            && self.params.hist_sr == 1
            && self.window.is_none()
    }

    /// One copy of the state: a search's reorder (what `dem_gather` does between two copies),
    /// one array at a time: gathered into the force buffer by `perm`, then copied back. The
    /// skin's cells of the search first, from the grid's cells (which the force buffer holds),
    /// and its paths zeroed last (they held `perm`).
    fn enqueue_gather_in_place(&self, l: &StepLaunches) -> Result<(), CudaError> {
        let (cur, grid) = (l.cur, l.grid);
        let mut pc = l.pc;
        pc.n = pc.n.max(pc.n_rows);
        let n = pc.n;
        if grid.scell != 0 {
            let mut b = self
                .stream
                .launch_builder(self.module.function(Kernel::SearchCells));
            b.arg(&pc).arg(&grid);
            // SAFETY: dem_search_cells(DemParams, GridArrays): thread k < n reads cell[perm[k]]
            // (perm a permutation of 0..n) and writes scell[k] (n slots) and dmax.
            unsafe { b.launch(blocks(n, 256)) }
                .map_err(|e| CudaError::driver("launching dem_search_cells", e))?;
        }
        let (scratch, scratch_bytes) = self.state.scratch;
        let real_words = self.state.real_size as u32 / 4;
        let mut arrays = vec![
            (cur.pos, 6),
            (cur.vel, 3 * real_words),
            (cur.omega, 3 * real_words),
            (cur.id, 1),
            (cur.species, 1),
        ];
        if self.history_moves() {
            // The history moves with the slots, a column of entries at a time (slot-major: entry
            // c of every row is one array), so every slot's row stays its slot: a partner's row
            // lies beside its state whatever the ids (rows that stayed put were scattered reads
            // where ids are unrelated to positions). The rows' links to spill rows move with
            // them. `row` stays the identity it was uploaded as.
            let eb = super::buffers::hist_entry_bytes(self.state.real_size) as u64;
            let stride = u64::from(self.params.hist_sc) * eb;
            for c in 0..u64::from(self.params.hist_cap) {
                arrays.push((cur.hist + c * stride, eb as u32 / 4));
            }
            arrays.push((cur.hist_count, 1));
        } else {
            arrays.push((cur.row, 1));
        }
        // Owner keys move with their slots (0 without).
        arrays.push((cur.key, 1));
        crate::dem::cuda::driver::bind(&self.stream)?;
        for (ptr, words) in arrays {
            if ptr == 0 {
                continue;
            }
            let bytes = 4 * words as usize * n as usize;
            assert!(bytes <= scratch_bytes, "the force buffer holds any array");
            let mut b = self
                .stream
                .launch_builder(self.module.function(Kernel::GatherWords));
            b.arg(&ptr)
                .arg(&scratch)
                .arg(&grid.perm)
                .arg(&n)
                .arg(&words);
            // SAFETY: dem_gather_words(src, dst, perm, n, words): thread k < n copies `words`
            // words of slot perm[k] < n of src (an array of n slots of `words` words) into slot
            // k of dst, the force buffer, which holds `bytes` (checked above); distinct
            // allocations.
            unsafe { b.launch(blocks(n, 256)) }
                .map_err(|e| CudaError::driver("launching dem_gather_words", e))?;
            // SAFETY: both ranges are `bytes` long inside live allocations of this sim (the
            // array and the force buffer), ordered on its stream after the gather.
            unsafe {
                cudarc::driver::result::memcpy_dtod_async(
                    ptr,
                    scratch,
                    bytes,
                    self.stream.cu_stream(),
                )
            }
            .map_err(|e| CudaError::driver("copying a reordered array back", e))?;
        }
        if l.adopt {
            self.enqueue_adopt(l, pc)?;
        }
        if grid.path != 0 {
            // The paths held the permutation (buffers.rs): nothing has moved since the search.
            // SAFETY: plain memset of the skin's n paths (f32 0.0 is all zero bytes), a live
            // allocation of this sim, on its stream after the reorder.
            unsafe {
                cudarc::driver::result::memset_d8_async(
                    grid.path,
                    0,
                    4 * n as usize,
                    self.stream.cu_stream(),
                )
            }
            .map_err(|e| CudaError::driver("clearing the skin's paths", e))?;
        }
        Ok(())
    }

    /// Owner keys, at a step's search, after the reorder (`pc` over every slot): the spill
    /// counter of this step's rows zeroed, `dem_owner_keys` (the old keys into the force
    /// buffer's first n words), then `dem_adopt` (each slot's adoption row into its next n
    /// words: [`Self::adopt_links`]), before `dem_springs` reads them.
    fn enqueue_adopt(&self, l: &StepLaunches, pc: DemParams) -> Result<(), CudaError> {
        let n = pc.n;
        let (scratch, scratch_bytes) = self.state.scratch;
        assert!(
            8 * n as usize <= scratch_bytes,
            "the force buffer holds two words a slot"
        );
        let old = scratch;
        let links = self.adopt_links(n);
        // dem_adopt and then dem_springs take this step's spill rows from it.
        self.clear_spill_counter(&pc)?;
        let cur = l.cur;
        let mut b = self
            .stream
            .launch_builder(self.module.function(Kernel::OwnerKeys));
        b.arg(&pc).arg(&cur).arg(&old);
        // SAFETY: dem_owner_keys(DemParams, ParticleArrays, unsigned* old): thread k < n reads
        // slot k's position and key and writes key[k] and old[k]; the n words of `old` lie in
        // the force buffer (checked above), which nothing else uses between the reorder and
        // the collide.
        unsafe { b.launch(blocks(n, 256)) }
            .map_err(|e| CudaError::driver("launching dem_owner_keys", e))?;
        let (grid, diag) = (l.grid, l.diag);
        let mut b = self
            .stream
            .launch_builder(self.module.function(Kernel::Adopt));
        b.arg(&pc)
            .arg(&cur)
            .arg(&grid)
            .arg(&old)
            .arg(&links)
            .arg(&diag);
        // SAFETY: dem_adopt(DemParams, ParticleArrays, GridArrays, old, links, DemDiag*): thread
        // k < n reads the state, the keys, the grid's cell starts (this search's) and the rows,
        // writes links[k] (the force buffer's second n words, distinct from old's) and takes
        // rows of spill_next (spill_rows of spill_width entries) by the atomic counter
        // spill_ctl[spill_sel], writing only the rows it took; one atomic counter of `diag`.
        unsafe { b.launch(blocks(n, 128)) }
            .map_err(|e| CudaError::driver("launching dem_adopt", e))?;
        Ok(())
    }

    /// Zeroes the counter of the spill buffer a step takes its spill rows from
    /// (`spill_ctl[spill_sel]` of `pc`), on this sim's stream.
    fn clear_spill_counter(&self, pc: &DemParams) -> Result<(), CudaError> {
        crate::dem::cuda::driver::bind(&self.stream)?;
        // SAFETY: one 4-byte counter of spill_ctl (buffers::Spill::ctl, SPILL_CTL_WORDS words
        // allocated; spill_sel is 0 or 1), on this sim's stream.
        unsafe {
            cudarc::driver::result::memset_d8_async(
                pc.spill_ctl + 4 * u64::from(pc.spill_sel),
                0,
                4,
                self.stream.cu_stream(),
            )
        }
        .map_err(|e| CudaError::driver("clearing the spill counter", e))
    }

    /// The device address of the adoption rows' links of a step that searched with owner keys
    /// ([`Self::enqueue_adopt`]): the force buffer's second `n` words.
    fn adopt_links(&self, n: u32) -> u64 {
        self.state.scratch.0 + 4 * u64::from(n)
    }

    /// Queues `dem_springs` (pairs-once history): every live slot's owned springs updated in
    /// its row, before the collide reads them. After a search with owner keys it reads the
    /// adoption rows (whose rows it takes its spill rows after: the counter is not zeroed).
    fn enqueue_springs(&self, l: &StepLaunches) -> Result<(), CudaError> {
        if l.adopt {
            let mut pc = l.pc;
            pc.adopt = self.adopt_links(l.pc.n.max(l.pc.n_rows));
            return self.enqueue_springs_walk(Kernel::Springs, l, pc);
        }
        if l.pc.spill_rows > 0 {
            self.clear_spill_counter(&l.pc)?;
        }
        self.enqueue_springs_walk(Kernel::Springs, l, l.pc)
    }

    /// Queues `kernel`, `dem_springs` or `dem_spill_count` (the same walk, counting only), on
    /// the state `l.input` over the live slots, with parameters `pc`.
    fn enqueue_springs_walk(
        &self,
        kernel: Kernel,
        l: &StepLaunches,
        pc: DemParams,
    ) -> Result<(), CudaError> {
        let mut b = self.stream.launch_builder(self.module.function(kernel));
        b.arg(&pc)
            .arg(&l.input)
            .arg(&l.grid)
            .arg(&l.diag)
            .arg(&l.msh);
        let mut cfg = blocks(pc.n, kernels::COLLIDE_THREADS);
        cfg.shared_mem_bytes = self.collide_shared;
        // SAFETY: dem_springs / dem_spill_count(DemParams, in, GridArrays, DemDiag*,
        // MeshArrays): read the state `in` and thread k's history row in.row[k] (rows are a
        // permutation of the slots), whose old entries are first copied into the thread's part
        // of the dynamic shared memory (`collide_shared` bytes, set up for both kernels by
        // CudaSim::new). dem_springs writes only that row and hist_count[in.row[k]], plus one
        // atomic counter of `diag`; with spill rows it takes rows of spill_next by the atomic
        // counter spill_ctl[spill_sel] (below spill_rows, each row one thread's) and reads its
        // old one in spill_cur (a distinct buffer); the same stream then runs the collide, which
        // reads the rows. dem_spill_count writes nothing but the atomic counter spill_ctl[3].
        unsafe { b.launch(cfg) }
            .map_err(|e| CudaError::driver(&format!("launching {}", kernel.symbol()), e))?;
        Ok(())
    }

    /// Queues `kernel` (dem_collide, or one of its two passes: which slots) on `stream` with
    /// parameters `pc` over `threads` threads.
    fn enqueue_collide(
        &self,
        stream: &std::sync::Arc<cudarc::driver::CudaStream>,
        kernel: Kernel,
        l: &StepLaunches,
        pc: DemParams,
        threads: u32,
    ) -> Result<(), CudaError> {
        let (input, output, grid, diag, msh) = (l.input, l.output, l.grid, l.diag, l.msh);
        // The rows' links point into the spill buffer dem_springs has just written.
        let mut pc = pc;
        pc.spill_cur = pc.spill_next;
        let mut b = stream.launch_builder(self.module.function(kernel));
        b.arg(&pc)
            .arg(&input)
            .arg(&output)
            .arg(&grid)
            .arg(&diag)
            .arg(&msh)
            .arg(&l.frame);
        let mut cfg = blocks(threads, kernels::COLLIDE_THREADS);
        cfg.shared_mem_bytes = self.collide_stage();
        // SAFETY: dem_collide(DemParams, in, out, GridArrays, DemDiag*, MeshArrays, DemFrame):
        // the frame (publish.rs) is null or staging arrays holding an element for every frame
        // index, written at the index of each collided slot's id (ids unique); reads one
        // copy of the state (in: the scratch copy the gather wrote, or between a skin's searches
        // the state), writes slot k of the other (out; a distinct allocation), its skin path
        // slot k and one atomic maximum, and one history row from thread k only: in place the
        // row in.row[k] (rows are a permutation of the slots; the row's old entries are first
        // copied into the thread's part of the dynamic shared memory, `collide_shared` bytes,
        // set up for the kernel by CudaSim::new), else row k of the other history buffer
        // (distinct from the one read); the mesh arrays (uploaded on this stream before) are
        // read only. Slot k is thread k's (`threads` covers max(n, n_rows)), or in
        // dem_collide_boundary pass_list[thread] (`threads` = pass_count entries of a live list
        // of distinct slots below n), and the two passes of a step cover disjoint slots (the
        // interior pass skips the listed layers). The pass kernels exist in modules compiled
        // with `passes`, which slabs with a skin (the only callers of the passes) have.
        unsafe { b.launch(cfg) }
            .map_err(|e| CudaError::driver(&format!("launching {}", kernel.symbol()), e))?;
        Ok(())
    }

    /// The neighbour search of a step: hash, scan, scatter, per-cell id order, the gather of
    /// the state into the scratch copy in cell order, and the mesh filter (what `dem_collide`
    /// and `dem_energies` read).
    pub(crate) fn enqueue_search(
        &self,
        l: &StepLaunches,
        marks: &mut Marks,
    ) -> Result<(), CudaError> {
        let (p, cur, tmp, grid) = (l.p, l.cur, l.tmp, l.grid);
        let n = p.n;
        let launch_err =
            |k: Kernel| move |e| CudaError::driver(&format!("launching {}", k.symbol()), e);

        self.mark(marks, "hash_count")?;
        let mut b = self
            .stream
            .launch_builder(self.module.function(Kernel::HashCount));
        b.arg(&p).arg(&cur).arg(&grid);
        // SAFETY: dem_hash_count(DemParams, ParticleArrays, GridArrays) by value; every array
        // holds n elements (count: cells + 1, zeroed after the previous step's scatter).
        unsafe { b.launch(blocks(n, 256)) }.map_err(launch_err(Kernel::HashCount))?;

        self.mark(marks, "scan")?;
        self.scan(grid.count, grid.start, l.cells + 1, 0)?;

        self.mark(marks, "scatter")?;
        let mut b = self
            .stream
            .launch_builder(self.module.function(Kernel::Scatter));
        b.arg(&p).arg(&grid);
        // SAFETY: dem_scatter(DemParams, GridArrays); start[cell] + rank < n by construction.
        unsafe { b.launch(blocks(n, 256)) }.map_err(launch_err(Kernel::Scatter))?;

        self.mark(marks, "cell_sort")?;
        let cells = l.cells;
        let mut b = self
            .stream
            .launch_builder(self.module.function(Kernel::CellSort));
        b.arg(&p).arg(&cur).arg(&grid).arg(&cells);
        // SAFETY: dem_cell_sort(DemParams, ParticleArrays, GridArrays, unsigned) over `cells`
        // cells; start has cells + 1 entries.
        unsafe { b.launch(blocks(cells, 256)) }.map_err(launch_err(Kernel::CellSort))?;

        self.mark(marks, "gather")?;
        if self.cfg.single_copy {
            self.enqueue_gather_in_place(l)?;
        } else {
            let mut b = self
                .stream
                .launch_builder(self.module.function(Kernel::Gather));
            // Over the live slots: a GPU of a group drops its dead ones here, but for their
            // history rows (slots pc.n..pc.n_rows); one GPU's live slots are all of them.
            let pc = l.pc;
            b.arg(&pc).arg(&cur).arg(&tmp).arg(&grid);
            // SAFETY: dem_gather(DemParams, src, dst, GridArrays): perm[0..n) is a permutation
            // of the slots below n = max(pc.n, pc.n_rows) (the live ones sorted first, the dead
            // behind them); src and dst are distinct allocations of the same layout.
            unsafe { b.launch(blocks(pc.n.max(pc.n_rows), 256)) }
                .map_err(launch_err(Kernel::Gather))?;
        }

        crate::dem::cuda::driver::bind(&self.stream)?;
        // The counts must be zero for the next step's hash_count.
        // SAFETY: plain memset of the u8 device buffer grid.count (count_bytes long) owned by
        // this sim, on its stream.
        unsafe {
            cudarc::driver::result::memset_d8_async(
                grid.count,
                0,
                l.count_bytes,
                self.stream.cu_stream(),
            )
        }
        .map_err(|e| CudaError::driver("clearing the cell counts", e))?;
        if grid.nlist != 0 {
            self.mark(marks, "neighbours")?;
            let (pc, input) = (l.pc, l.input);
            let mut b = self
                .stream
                .launch_builder(self.module.function(Kernel::Neighbours));
            b.arg(&pc).arg(&input).arg(&grid);
            // SAFETY: dem_neighbours(DemParams, ParticleArrays, GridArrays): reads the state
            // just gathered and the grid; thread k writes its list entries
            // nlist[c * list_stride + k] for c < list_cap (list_cap * list_stride entries
            // allocated, list_stride = the slots) and ncount[k].
            unsafe { b.launch(blocks(pc.n, 128)) }.map_err(launch_err(Kernel::Neighbours))?;
        }
        self.enqueue_mesh_filter(l, marks)
    }

    /// The mesh filter of a step (meshes only): which of each particle's mesh candidates touch
    /// it, at the collide input's positions.
    pub(crate) fn enqueue_mesh_filter(
        &self,
        l: &StepLaunches,
        marks: &mut Marks,
    ) -> Result<(), CudaError> {
        let launch_err =
            |k: Kernel| move |e| CudaError::driver(&format!("launching {}", k.symbol()), e);
        let (pc, input, msh) = (l.pc, l.input, l.msh);
        if msh.n_tris > 0 && msh.hit_mask != 0 {
            self.mark(marks, "mesh_filter")?;
            // Several threads per particle while the particles fill less than the GPU (a
            // latency-bound step); one beyond, where the threads are better spent on particles.
            let lanes: u32 = if pc.n <= MESH_FILTER_SMALL {
                kernels::MESH_FILTER_LANES
            } else {
                1
            };
            let mut b = self
                .stream
                .launch_builder(self.module.function(Kernel::MeshFilter));
            b.arg(&pc).arg(&input).arg(&msh).arg(&lanes);
            // SAFETY: dem_mesh_filter(DemParams, ParticleArrays, MeshArrays, unsigned): reads
            // the gathered state and the mesh arrays; lane 0 of particle k writes
            // hit_mask[2k] and [2k + 1], which has 2 * pc.n entries (ensure_hit_mask).
            unsafe { b.launch(blocks(pc.n * lanes, 128)) }
                .map_err(launch_err(Kernel::MeshFilter))?;
        }
        Ok(())
    }

    /// [`CudaSim::launch_step`] without timing marks (several GPUs time whole phases): the
    /// neighbour search and the collide over the live slots.
    pub(crate) fn launch_step_unmarked(&mut self, integrate: u32) -> Result<(), CudaError> {
        let mut marks = Marks::off();
        self.launch_step(&mut marks, integrate)
    }

    /// [`CudaSim::launch_step_unmarked`] for a GPU of a group with a skin: `search` is the
    /// group's decision for this step (without a skin every step searches).
    pub(crate) fn launch_step_group(
        &mut self,
        integrate: u32,
        search: bool,
    ) -> Result<(), CudaError> {
        if self.skin.is_some() {
            self.search_override = Some(search);
        }
        self.launch_step_unmarked(integrate)
    }

    /// [`CudaSim::launch_kick_drift`] without timing marks (several GPUs: before the exchange,
    /// since it moves the particles).
    pub(crate) fn launch_kick_drift_unmarked(&mut self) -> Result<(), CudaError> {
        let mut marks = Marks::off();
        self.launch_kick_drift(&mut marks)
    }

    /// Places the meshes at time `t` for the next collide.
    pub(crate) fn prepare_meshes(&mut self, t: f64) -> Result<(), CudaError> {
        if let Some(m) = self.meshes.as_mut() {
            m.prepare(&self.stream, t)?;
        }
        Ok(())
    }

    /// Velocity Verlet's opening half kick and drift, in place on the state.
    fn launch_kick_drift(&mut self, marks: &mut Marks) -> Result<(), CudaError> {
        // It moves the particles: a frame still to pack is packed first.
        self.flush_deferred_frame()?;
        self.mark(marks, "kick_drift")?;
        let (p, cur) = (self.params, self.state.cur);
        let mut b = self
            .stream
            .launch_builder(self.module.function(Kernel::KickDrift));
        b.arg(&p).arg(&cur);
        // SAFETY: dem_kick_drift(DemParams, ParticleArrays): thread k reads and writes slot k of
        // the state only; force (and torque with rotation) are allocated for velocity Verlet.
        unsafe { b.launch(blocks(p.n, 256)) }
            .map_err(|e| CudaError::driver("launching dem_kick_drift", e))?;
        Ok(())
    }

    /// One step: symplectic Euler (meshes at the step's start time, fused collide + integrate),
    /// or velocity Verlet as cpu::stages (forces at the start if not valid; half kick + drift;
    /// meshes at the step's end time; forces; half kick).
    fn queue_step(&mut self, marks: &mut Marks) -> Result<(), CudaError> {
        if !self.verlet() {
            self.prepare_meshes(self.time)?;
            self.launch_step(marks, INTEGRATE_EULER)?;
            // Stage `outflow` closes the step, as on the CPU.
            return self.queue_outflow(self.step_index + 1);
        }
        if !self.forces_valid {
            self.prepare_meshes(self.time)?;
            self.launch_step(marks, INTEGRATE_NONE)?;
            self.forces_valid = true;
        }
        self.launch_kick_drift(marks)?;
        // Velocity Verlet removes after the drift, before the forces (the CPU's order).
        self.queue_outflow(self.step_index + 1)?;
        self.prepare_meshes(self.time + self.params.dt)?;
        self.launch_step(marks, INTEGRATE_HALF_KICK)
    }

    /// Advances `count` steps, but stops velocity Verlet's last one after its drift and
    /// outflow (the CPU places inflow particles there, before the forces); symplectic Euler
    /// runs all `count`. [`CudaSim::finish_step`] completes it.
    pub(crate) fn steps_to_placement(&mut self, count: u64) -> Result<(), CudaError> {
        if !self.verlet() || count == 0 {
            return self.steps(count);
        }
        self.steps(count - 1)?;
        let mut marks = Marks::off();
        if !self.forces_valid {
            self.prepare_meshes(self.time)?;
            self.launch_step(&mut marks, INTEGRATE_NONE)?;
            self.forces_valid = true;
        }
        self.launch_kick_drift(&mut marks)?;
        self.queue_outflow(self.step_index + 1)?;
        self.mid_step = true;
        Ok(())
    }

    /// Completes a step [`CudaSim::steps_to_placement`] stopped (nothing otherwise).
    pub(crate) fn finish_step(&mut self) -> Result<(), CudaError> {
        if !self.mid_step {
            return Ok(());
        }
        let mut marks = Marks::off();
        self.prepare_meshes(self.time + self.params.dt)?;
        self.launch_step(&mut marks, INTEGRATE_HALF_KICK)?;
        self.mid_step = false;
        self.step_index += 1;
        self.time += self.params.dt;
        Ok(())
    }

    /// Advances one time step. The work is queued; errors of earlier steps surface here.
    pub fn step(&mut self) -> Result<(), CudaError> {
        self.steps(1)
    }

    /// Adds the pending sample to the stage times if the device has passed it (never waits).
    fn harvest_sample(&mut self) -> Result<(), CudaError> {
        let done = match &self.sample {
            Some(s) => s
                .events
                .last()
                .map(|e| e.1.try_is_complete())
                .transpose()
                .map_err(|e| CudaError::driver("querying an event", e))?
                .unwrap_or(true),
            None => return Ok(()),
        };
        if !done {
            return Ok(());
        }
        let s = self.sample.take().expect("pending sample");
        for w in s.events.windows(2) {
            let ms = w[0]
                .1
                .elapsed_ms(&w[1].1)
                .map_err(|e| CudaError::driver("reading an event", e))?;
            self.times.add(w[0].0, ms as f64 * s.weight as f64);
        }
        self.times.steps += s.weight;
        self.spare_events.extend(s.events.into_iter().map(|e| e.1));
        Ok(())
    }

    /// Advances `count` steps (queued back to back; synchronises only for profiling and the
    /// periodic diagnostics check). The first step of the call is timed as the sample of all
    /// `count` (unless the previous sample is still in flight: then it stands for these steps
    /// too).
    pub fn steps(&mut self, count: u64) -> Result<(), CudaError> {
        self.harvest_sample()?;
        let profile = self.opts.profile;
        let sampling = !profile
            && count > 0
            && self.sample.is_none()
            && self.last_sample.is_none_or(|t| t.elapsed() >= SAMPLE_EVERY);
        if !profile && !sampling {
            match &mut self.sample {
                Some(s) => s.weight += count,
                None => self.unsampled += count,
            }
        }
        let queued = self.queue_steps(count, profile, sampling);
        // Whatever happened, the next launch stores its forces unless told otherwise.
        self.skip_stores = false;
        queued
    }

    /// The loop of [`CudaSim::steps`].
    fn queue_steps(&mut self, count: u64, profile: bool, sampling: bool) -> Result<(), CudaError> {
        for k in 0..count {
            self.skip_stores = k + 1 < count;
            let on = profile || (sampling && k == 0);
            let mut marks = Marks {
                events: Vec::new(),
                on,
                spare: if on {
                    std::mem::take(&mut self.spare_events)
                } else {
                    Vec::new()
                },
            };
            self.queue_step(&mut marks)?;
            self.mark(&mut marks, "end")?;
            self.spare_events.append(&mut marks.spare);
            self.step_index += 1;
            // Accumulated as the CPU does (the meshes are placed at this time: same bits).
            self.time += self.params.dt;
            if marks.on && !profile {
                self.last_sample = Some(std::time::Instant::now());
                self.sample = Some(Sample {
                    events: std::mem::take(&mut marks.events),
                    weight: count + std::mem::take(&mut self.unsampled),
                });
            } else if marks.on {
                marks
                    .events
                    .last()
                    .expect("end mark")
                    .1
                    .synchronize()
                    .map_err(|e| CudaError::driver("timing", e))?;
                for w in marks.events.windows(2) {
                    let ms = w[0]
                        .1
                        .elapsed_ms(&w[1].1)
                        .map_err(|e| CudaError::driver("reading an event", e))?;
                    self.times.add(w[0].0, ms as f64);
                }
                self.times.steps += 1;
                self.spare_events
                    .extend(marks.events.into_iter().map(|e| e.1));
            }
            if self.step_index.checked_rem(self.opts.check_every) == Some(0) {
                self.check_diag()?;
            } else if self.state.spill.is_some()
                && self.step_index.is_multiple_of(SPILL_CHECK_EVERY)
            {
                self.check_spill()?;
            }
        }
        Ok(())
    }

    fn read_diag(&self) -> Result<DemDiag, CudaError> {
        let words = self.read_words(self.state.diag, 4, "reading diagnostics")?;
        let mut d = DemDiag::default();
        // SAFETY: DemDiag is #[repr(C)], 16 bytes of integers (size asserted in params.rs).
        unsafe {
            std::ptr::copy_nonoverlapping(words.as_ptr(), &mut d as *mut DemDiag as *mut u32, 4)
        };
        Ok(d)
    }

    /// The spill rows' five counters (`buffers::Spill::ctl`; synchronises). Callers have spill
    /// rows, or owner keys, which come with them.
    pub(crate) fn spill_ctl(&self) -> Result<[u32; 5], CudaError> {
        let sp = self.state.spill.expect("spill rows");
        let w = self.read_words(sp.ctl, 5, "reading the spill rows' counters")?;
        Ok([w[0], w[1], w[2], w[3], w[4]])
    }

    /// `n` words at device address `src` once the compute stream's work before them is done
    /// (synchronises). A kernel writes them into page-locked host memory: a DMA copy would
    /// queue behind a frame's copy to the host on the copy engine (tens of ms at 50 M
    /// particles: session 19 for a group's exchange counts, session 45 for these reads).
    pub(crate) fn read_words(&self, src: u64, n: u32, what: &str) -> Result<Vec<u32>, CudaError> {
        assert!(n as usize <= super::SMALL_READ_WORDS, "{what}: {n} words");
        super::driver::bind(&self.stream)?;
        self.words_out.queue(self, src, n, 0)?;
        self.stream
            .synchronize()
            .map_err(|e| CudaError::driver(what, e))?;
        let mut w = self.words_out.read();
        w.truncate(n as usize);
        Ok(w)
    }

    fn clear_diag(&self) -> Result<(), CudaError> {
        crate::dem::cuda::driver::bind(&self.stream)?;
        // SAFETY: memset of the 16-byte diagnostics buffer owned by this sim, on its stream.
        unsafe {
            cudarc::driver::result::memset_d8_async(self.state.diag, 0, 16, self.stream.cu_stream())
        }
        .map_err(|e| CudaError::driver("clearing diagnostics", e))
    }

    /// Before the first step after an upload, with spill rows: counts the rows that step will
    /// spill (`dem_spill_count` on a search of the state, which leaves the run as the energies'
    /// search does: `energies.rs`) and grows the spill rows to one and a half times that where
    /// they are fewer. A bed placed in contact forms all its contacts in its first step, before
    /// any check could grow them. Synchronises once.
    ///
    /// The meshes stay where the caller placed them for the step (velocity Verlet's forces at
    /// the step's end time): placing them at the step's start here made the first step after a
    /// restart with valid forces collide with the meshes one step back (session 37,
    /// `cuda_matches_cpu_with_velocity_verlet` in the compact layout).
    pub(crate) fn size_spill(&mut self) -> Result<(), CudaError> {
        if self.spill_sized || self.mid_step {
            return Ok(());
        }
        let Some(sp) = self.state.spill else {
            return Ok(());
        };
        self.spill_sized = true;
        let p = self.params;
        let mut l = self.step_launches(p, p, true)?;
        // Without the skin's arrays (the cells of now): the next step searches again. The
        // owner keys stay as the rows hold them (that search moves pairs).
        l.grid.without_skin();
        l.adopt = false;
        self.enqueue_search(&l, &mut Marks::off())?;
        self.skin_stale();
        self.forces_stale |= self.cfg.single_copy;
        crate::dem::cuda::driver::bind(&self.stream)?;
        // SAFETY: the 4-byte counter spill_ctl[3] (buffers::Spill::ctl, SPILL_CTL_WORDS words), on
        // this sim's stream.
        unsafe {
            cudarc::driver::result::memset_d8_async(sp.ctl + 12, 0, 4, self.stream.cu_stream())
        }
        .map_err(|e| CudaError::driver("clearing the spill count", e))?;
        // dem_springs' walk over the state the search just sorted, counting.
        self.enqueue_springs_walk(Kernel::SpillCount, &l, l.pc)?;
        let need = self.spill_ctl()?[3];
        let want = need.saturating_add(need / 2);
        if want > sp.rows {
            tracing::info!(
                "contact history: spill rows {} -> {want} ({need} particles, {:.1} %, need one now)",
                sp.rows,
                100.0 * need as f64 / self.params.n.max(1) as f64
            );
            super::buffers::grow_spill(&self.stream, &mut self.state, want)?;
            super::buffers::apply_spill(&mut self.params, self.state.spill.as_ref());
        }
        Ok(())
    }

    /// Grows the spill rows (`buffers::Spill`) when a step since the last check took more than
    /// three quarters of them, and fails when one asked for more than there were (its extra
    /// contacts' springs were lost: [`CudaError::SpillFull`]). Synchronises; nothing without
    /// spill rows.
    pub(crate) fn check_spill(&mut self) -> Result<(), CudaError> {
        let Some(sp) = self.state.spill else {
            return Ok(());
        };
        let taken = self.spill_ctl()?[2];
        if taken > sp.rows {
            return Err(CudaError::SpillFull {
                needed: taken,
                rows: sp.rows,
                step: self.step_index,
            });
        }
        if let Some(rows) = super::buffers::spill_rows_after(sp.rows, taken) {
            tracing::info!(
                "contact history: spill rows {} -> {rows} (a step took {taken}, {:.1} % of the \
                 particles)",
                sp.rows,
                100.0 * taken as f64 / self.params.n.max(1) as f64
            );
            super::buffers::grow_spill(&self.stream, &mut self.state, rows)?;
            super::buffers::apply_spill(&mut self.params, self.state.spill.as_ref());
        }
        Ok(())
    }

    /// Reads and clears the diagnostics of the steps since the last check, and fails when a
    /// particle went non-finite or a contact found its particle's history full
    /// ([`CudaError::HistoryOverflow`]; the overflows are added to
    /// [`CudaSim::history_overflows`] first). Modules without friction keep no history and count
    /// no overflows: there is no spring to lose.
    pub fn check_diag(&mut self) -> Result<(), CudaError> {
        let d = self.read_diag()?;
        self.account_diag(&d)
    }

    fn account_diag(&mut self, d: &DemDiag) -> Result<(), CudaError> {
        if d.hist_overflow > 0 && d.nonfinite == 0 {
            self.history_overflows += d.hist_overflow as u64;
            self.clear_diag()?;
        }
        // Contacts that found no spill row left fail as such (before the count of lost springs).
        self.check_spill()?;
        let (rows, spill) = self.history_rows();
        match diag_failure(
            d,
            super::buffers::row_capacity(rows, spill),
            self.step_index,
        ) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Contacts whose tangential spring could not be stored (history full), up to the last check
    /// (each check that finds one also fails with [`CudaError::HistoryOverflow`]).
    pub fn history_overflows(&self) -> u64 {
        self.history_overflows
    }

    /// Contacts counted in the last [`CudaSim::count_contacts`] step (pairs twice, walls once).
    pub fn last_contacts(&self) -> u64 {
        self.last_contacts
    }

    /// Runs one step with contact counting on and returns the diagnostics of that step (fails
    /// as [`CudaSim::check_diag`] does).
    pub(crate) fn step_with_diag(&mut self) -> Result<DemDiag, CudaError> {
        self.check_diag()?;
        self.clear_diag()?;
        self.params.diag = 1;
        let r = self.step();
        self.params.diag = 0;
        r?;
        let d = self.read_diag()?;
        self.last_contacts = d.contacts;
        self.account_diag(&d)?;
        self.clear_diag()?;
        Ok(d)
    }

    /// Per-kernel device time: every step in profiling mode, else one sampled step per batch
    /// weighted by the batch's steps (samples still in flight are not in yet).
    /// Graphs of the step captured so far (`graph.rs`; a run replays a handful).
    pub fn graphs_captured(&self) -> u64 {
        self.graphs.captured
    }

    pub fn stage_times(&self) -> &StageTimes {
        &self.times
    }

    pub fn reset_stage_times(&mut self) {
        self.times = StageTimes::default();
        self.unsampled = 0;
    }

    /// Turns per-kernel timing on or off.
    pub fn set_profiling(&mut self, on: bool) {
        self.opts.profile = on;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_overflow_is_an_error_naming_count_and_capacity() {
        let ok = DemDiag::default();
        assert!(diag_failure(&ok, 16, 10).is_none());
        let full = DemDiag {
            contacts: 100,
            hist_overflow: 3,
            nonfinite: 0,
        };
        let e = diag_failure(&full, 16, 32).expect("an overflow is an error");
        assert!(matches!(
            e,
            CudaError::HistoryOverflow {
                count: 3,
                cap: 16,
                step: 32
            }
        ));
        let msg = e.to_string();
        assert!(
            msg.contains("3 contacts found their particle's contact history full (16 entries)"),
            "{msg}"
        );
        assert!(
            msg.contains("--hist-cap") && msg.contains("pairs-once"),
            "{msg}"
        );
        // A non-finite state is reported first.
        let both = DemDiag {
            nonfinite: 1,
            ..full
        };
        assert!(matches!(
            diag_failure(&both, 16, 32),
            Some(CudaError::NonFinite { .. })
        ));
    }
}
