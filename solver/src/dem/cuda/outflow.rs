//! Outflow regions on one GPU (issue 20): `dem_outflow` (publish.cu) runs at the end of every
//! step, marks the particles whose centre lies in a region dead and lists them with their
//! species and step; the host reads the list once per batch (the coordinator accounts the
//! removed count and mass in (step, id) order, the CPU's order). Dead slots are sorted behind
//! the live ones by the next neighbour search and dropped from the arrays at the next read.
//! Frames list the live ids in order: `alive[id]` flags, scanned into each id's frame index
//! before a frame is packed.

use cudarc::driver::{LaunchConfig, PushKernelArg};
use kernels::Kernel;

use super::buffers::Buf;
use super::window::alloc;
use super::{CudaError, CudaSim};
use crate::case::Outflow;

/// `OutflowRegion` of publish.cu.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct OutflowRegion {
    pub a: [f64; 3],
    pub b: [f64; 3],
    pub kind: u32,
    pub pad: u32,
}
const _: () = assert!(std::mem::size_of::<OutflowRegion>() == 56);

impl OutflowRegion {
    /// The device form of `o` (case::Outflow::contains is the reference).
    pub(crate) fn of(o: &Outflow) -> OutflowRegion {
        match o {
            Outflow::Box { min, max } => OutflowRegion {
                a: *min,
                b: *max,
                kind: 0,
                pad: 0,
            },
            Outflow::OutsideDomain { margin } => OutflowRegion {
                a: [*margin, 0.0, 0.0],
                b: [0.0; 3],
                kind: 1,
                pad: 0,
            },
        }
    }
}

/// Device buffers of the outflow stage.
pub(crate) struct Outflows {
    regions: Buf,
    n_regions: u32,
    /// (id, species, step) per removed particle since the last read.
    list: Buf,
    count: Buf,
    cap: u32,
    /// 1 per live id (ids below `ids`), scanned into `rank`.
    alive: Buf,
    rank: Buf,
    ids: u32,
    scan_levels: Vec<(u64, u64, u32)>,
    _scan_bufs: Vec<Buf>,
    /// Particles removed in the last step before a read: still inside the live slots (the next
    /// neighbour search moves them behind).
    pending: u32,
    /// Frame index differs from id (some particle was removed or ids have gaps).
    pub ranked: bool,
    /// Slots of the arrays (particles plus the inflow reserve).
    capacity: u32,
    /// Where the outflow stage clears alive flags: this GPU's, or GPU 0's for a GPU group (its
    /// flags give the frame index of every id of the run).
    pub alive_target: u64,
    /// Entries of the list already counted by [`CudaSim::removed_since`].
    seen: u32,
    /// Removed particles a [`CudaSim::take_removed`] cleared from the list before
    /// [`CudaSim::removed_since`] counted them.
    unseen: u32,
}

fn blocks(n: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (n.div_ceil(256).max(1), 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// A removed particle: (id, species, step after which it was removed).
pub type Removed = (u32, u32, u64);

impl CudaSim {
    /// Turns the outflow stage on for `regions` (maybe none: a run with inflow only), for a
    /// run whose ids are `ids` (any order, gaps allowed: frames are indexed by rank) and stay
    /// below `id_limit` (0: the largest + 1), in arrays of `capacity` slots.
    pub(crate) fn set_outflows(
        &mut self,
        regions: &[Outflow],
        ids: &[u32],
        id_limit: u32,
        capacity: usize,
    ) -> Result<(), CudaError> {
        let stream = self.stream.clone();
        let dev: Vec<OutflowRegion> = regions.iter().map(OutflowRegion::of).collect();
        let rbuf = alloc(&stream, 56 * dev.len(), "outflow regions")?;
        // SAFETY: OutflowRegion is #[repr(C)] plain data (size asserted).
        let bytes = unsafe {
            std::slice::from_raw_parts(
                dev.as_ptr() as *const u8,
                std::mem::size_of_val(dev.as_slice()),
            )
        };
        let mut rbuf = rbuf;
        stream
            .memcpy_htod(bytes, &mut rbuf.slice.slice_mut(0..bytes.len()))
            .map_err(|e| CudaError::driver("uploading outflow regions", e))?;
        let n = capacity.max(1) as u32;
        let id_count = ids
            .iter()
            .copied()
            .max()
            .map_or(0, |m| m + 1)
            .max(id_limit)
            .max(1);
        let list = alloc(&stream, 12 * n as usize, "outflow list")?;
        let count = alloc(&stream, 16, "outflow count")?;
        let mut alive = alloc(&stream, 4 * id_count as usize, "alive flags")?;
        let mut flags = vec![0u32; id_count as usize];
        for &id in ids {
            flags[id as usize] = 1;
        }
        // SAFETY: u32 as bytes.
        let fb =
            unsafe { std::slice::from_raw_parts(flags.as_ptr() as *const u8, 4 * flags.len()) };
        stream
            .memcpy_htod(fb, &mut alive.slice.slice_mut(0..fb.len()))
            .map_err(|e| CudaError::driver("uploading alive flags", e))?;
        let rank = alloc(&stream, 4 * id_count as usize, "frame ranks")?;
        let mut scan_levels = Vec::new();
        let mut scan_bufs = Vec::new();
        let mut m = id_count as usize;
        while m > 1 {
            let tiles = m.div_ceil(kernels::SCAN_TILE);
            let sums = alloc(&stream, 4 * tiles, "rank scan")?;
            let scanned = alloc(&stream, 4 * tiles, "rank scan")?;
            scan_levels.push((sums.ptr, scanned.ptr, tiles as u32));
            scan_bufs.push(sums);
            scan_bufs.push(scanned);
            m = tiles;
        }
        if scan_levels.is_empty() {
            let sums = alloc(&stream, 16, "rank scan")?;
            let scanned = alloc(&stream, 16, "rank scan")?;
            scan_levels.push((sums.ptr, scanned.ptr, 1));
            scan_bufs.push(sums);
            scan_bufs.push(scanned);
        }
        let ranked = ids.iter().enumerate().any(|(k, &id)| id as usize != k);
        // Removals change the slots between searches: with_capacity built it without a skin.
        debug_assert!(
            self.skin.is_none(),
            "a run with outflow searches every step"
        );
        self.outflow = Some(Outflows {
            regions: rbuf,
            n_regions: dev.len() as u32,
            list,
            count,
            cap: n,
            alive,
            rank,
            ids: id_count,
            scan_levels,
            _scan_bufs: scan_bufs,
            pending: 0,
            ranked,
            capacity: n,
            alive_target: 0,
            seen: 0,
            unseen: 0,
        });
        Ok(())
    }

    /// Appends the particles an inflow source placed (at rest spin, no forces, no history)
    /// behind the live slots.
    pub(crate) fn adopt(
        &mut self,
        new: &[crate::exec::inflow::NewParticle],
    ) -> Result<(), CudaError> {
        if new.is_empty() {
            return Ok(());
        }
        // A frame published before them lists the particles of then (publish.rs).
        self.flush_deferred_frame()?;
        let o = self.outflow.as_ref().ok_or_else(|| {
            CudaError::Unsupported("adding particles to a run started without inflow".into())
        })?;
        let m = new.len() as u32;
        if self.params.n as u64 + m as u64 > o.capacity as u64 {
            return Err(CudaError::Unsupported(format!(
                "{m} more particles: the GPU reserved {} slots at start and holds {}",
                o.capacity, self.params.n
            )));
        }
        if let Some(bad) = new.iter().map(|p| p.id).find(|&id| id >= o.ids) {
            return Err(CudaError::Unsupported(format!(
                "particle id {bad} beyond the {} ids planned at start",
                o.ids
            )));
        }
        let real = self.state.real_size;
        let hist = if self.state.cur.hist_count != 0 {
            self.params.hist_cap as usize
        } else {
            0
        };
        let (rec, _) = super::window::record_bytes(real, hist);
        let mut bytes = vec![0u8; rec * new.len()];
        for (j, p) in new.iter().enumerate() {
            let r = &mut bytes[j * rec..(j + 1) * rec];
            for a in 0..3 {
                r[8 * a..8 * a + 8].copy_from_slice(&p.pos[a].to_ne_bytes());
                let at = 24 + a * real;
                if real == 8 {
                    r[at..at + 8].copy_from_slice(&p.vel[a].to_ne_bytes());
                } else {
                    r[at..at + 4].copy_from_slice(&(p.vel[a] as f32).to_ne_bytes());
                }
            }
            // Spin, force and torque stay zero; then id, species, contacts 0, history count 0.
            let at = 24 + 12 * real;
            r[at..at + 4].copy_from_slice(&p.id.to_ne_bytes());
            r[at + 4..at + 8].copy_from_slice(&p.species.to_ne_bytes());
        }
        let stream = self.stream.clone();
        let mut buf = alloc(&stream, bytes.len(), "inflow records")?;
        stream
            .memcpy_htod(&bytes, &mut buf.slice.slice_mut(0..bytes.len()))
            .map_err(|e| CudaError::driver("uploading inflow particles", e))?;
        let o = self.outflow.as_mut().expect("outflow");
        // One of several GPUs sets the flags in GPU 0's array (frame ranks of the whole run).
        let alive = if o.alive_target != 0 {
            o.alive_target
        } else {
            o.alive.ptr
        };
        let (p, cur, base) = (self.params, self.state.cur, self.params.n);
        let (full, rec32) = (1u32, rec as u32);
        let mut b = stream.launch_builder(self.module.function(Kernel::Unpack));
        b.arg(&p)
            .arg(&cur)
            .arg(&buf.ptr)
            .arg(&m)
            .arg(&base)
            .arg(&full)
            .arg(&rec32)
            .arg(&alive);
        // SAFETY: dem_unpack(DemParams, ParticleArrays, const char*, unsigned x4, unsigned*):
        // reads m records of rec bytes (uploaded above; the buffer lives until the stream passed
        // it: synchronised below), writes slots n..n + m <= capacity (checked) and the alive
        // flags of ids below the planned limit (checked).
        unsafe { b.launch(blocks(m)) }.map_err(|e| CudaError::driver("launching dem_unpack", e))?;
        o.ranked = true;
        self.params.n += m;
        stream
            .synchronize()
            .map_err(|e| CudaError::driver("adding inflow particles", e))
    }

    /// Positions of the live particles (slot order; synchronises).
    pub(crate) fn live_positions(&self) -> Result<Vec<crate::core::vec3::V3>, CudaError> {
        let ids = super::buffers::download_ids(&self.stream, &self.state, &self.params)?;
        let pos = super::buffers::download_positions(&self.stream, &self.state, &self.params)?;
        Ok(ids
            .iter()
            .enumerate()
            .filter(|(_, &id)| id != super::buffers::DEAD)
            .map(|(k, _)| pos[k])
            .collect())
    }

    /// Queues the outflow stage after step `step` (nothing without regions).
    pub(crate) fn queue_outflow(&mut self, step: u64) -> Result<(), CudaError> {
        let Some(o) = &self.outflow else {
            return Ok(());
        };
        if o.n_regions == 0 {
            return Ok(());
        }
        let p = self.params;
        let cur = self.state.cur;
        let step32 = step as u32;
        let alive = if o.alive_target != 0 {
            o.alive_target
        } else {
            o.alive.ptr
        };
        let mut b = self
            .stream
            .launch_builder(self.module.function(Kernel::Outflow));
        b.arg(&p)
            .arg(&cur)
            .arg(&o.regions.ptr)
            .arg(&o.n_regions)
            .arg(&o.list.ptr)
            .arg(&o.count.ptr)
            .arg(&o.cap)
            .arg(&alive)
            .arg(&step32);
        // SAFETY: dem_outflow(DemParams, ParticleArrays, const OutflowRegion*, unsigned, unsigned*,
        // unsigned*, unsigned, unsigned*, unsigned): slots 0..n, each thread writes its own slot's
        // id; at most cap (= the slots at the last read, every particle at most once) list
        // entries; alive has an entry for every id of the run.
        unsafe { b.launch(blocks(p.n)) }
            .map_err(|e| CudaError::driver("launching dem_outflow", e))?;
        Ok(())
    }

    /// Entries in the removal list (synchronises).
    fn read_count(&self, o: &Outflows) -> Result<u32, CudaError> {
        Ok(self.read_words(o.count.ptr, 1, "reading the outflow count")?[0])
    }

    /// The particles removed since the last call (synchronises), in (step, id) order; drops
    /// the dead slots the last neighbour search moved behind the live ones.
    pub(crate) fn take_removed(&mut self) -> Result<Vec<Removed>, CudaError> {
        let Some(o) = &self.outflow else {
            return Ok(Vec::new());
        };
        let count = self.read_count(o)?;
        if count == 0 {
            return Ok(Vec::new());
        }
        if count > o.cap {
            return Err(CudaError::Unsupported(format!(
                "{count} particles removed in one batch, more than the {} listed",
                o.cap
            )));
        }
        let mut bytes = vec![0u8; 12 * count as usize];
        self.stream
            .memcpy_dtoh(&o.list.slice.slice(0..bytes.len()), &mut bytes)
            .map_err(|e| CudaError::driver("reading the outflow list", e))?;
        crate::dem::cuda::driver::bind(&self.stream)?;
        // SAFETY: memset of the 16-byte count this sim owns, on its stream.
        unsafe {
            cudarc::driver::result::memset_d8_async(o.count.ptr, 0, 4, self.stream.cu_stream())
        }
        .map_err(|e| CudaError::driver("clearing the outflow count", e))?;
        let word = |k: usize| {
            u32::from_ne_bytes([
                bytes[4 * k],
                bytes[4 * k + 1],
                bytes[4 * k + 2],
                bytes[4 * k + 3],
            ])
        };
        // Steps are listed by their low 32 bits: within a batch they are the current step's
        // (at most the step in progress, when a Verlet step stopped after its drift).
        let newest = self.step_index + u64::from(self.mid_step);
        let base = newest & !0xFFFF_FFFF;
        let mut out: Vec<Removed> = (0..count as usize)
            .map(|j| {
                let s32 = word(3 * j + 2) as u64;
                let mut step = base | s32;
                if step > newest {
                    step -= 1 << 32;
                }
                (word(3 * j), word(3 * j + 1), step)
            })
            .collect();
        out.sort_unstable_by_key(|r| (r.2, r.0));
        // Removed before the last neighbour search: sorted behind the live slots, now beyond
        // n. Removed after it: still inside (symplectic Euler removes at the end of a step;
        // velocity Verlet after the drift, before the search, unless the step stopped there).
        let inside = if self.mid_step {
            Some(newest)
        } else if self.verlet() {
            None
        } else {
            Some(self.step_index)
        };
        let last = out.iter().filter(|r| Some(r.2) == inside).count() as u32;
        let windowed = self.window.is_some();
        let o = self.outflow.as_mut().expect("outflow");
        o.unseen += count - o.seen;
        o.seen = 0;
        o.ranked = true;
        if !windowed {
            // One of several GPUs: the exchange drops dead slots (window.rs).
            let behind = o.pending + count - last;
            o.pending = last;
            self.params.n -= behind;
        }
        Ok(out)
    }

    /// Slots of the particle arrays: the particles the run may hold.
    pub(crate) fn slots(&self) -> u32 {
        self.outflow
            .as_ref()
            .map_or(self.params.n, |o| o.capacity.max(self.params.n))
    }

    /// Particles removed since the last call (or the last [`CudaSim::take_removed`]);
    /// synchronises. One of several GPUs subtracts them from its owned count.
    pub(crate) fn removed_since(&mut self) -> Result<u32, CudaError> {
        let Some(o) = &self.outflow else {
            return Ok(0);
        };
        let count = self.read_count(o)?;
        let o = self.outflow.as_mut().expect("outflow");
        let new = count - o.seen + o.unseen;
        o.seen = count;
        o.unseen = 0;
        Ok(new)
    }

    /// Frames go by the ranks of the alive flags from now on (a GPU group's GPU 0, once any
    /// of its GPUs added particles).
    pub(crate) fn mark_ranked(&mut self) {
        if let Some(o) = self.outflow.as_mut() {
            o.ranked = true;
        }
    }

    /// Clears alive flags at `ptr` (GPU 0's, for a GPU group) instead of this GPU's.
    pub(crate) fn set_alive_target(&mut self, ptr: u64) {
        if let Some(o) = self.outflow.as_mut() {
            o.alive_target = ptr;
        }
    }

    /// The live ids (slot order; synchronises).
    pub(crate) fn live_ids(&self) -> Result<Vec<u32>, CudaError> {
        let mut ids = super::buffers::download_ids(&self.stream, &self.state, &self.params)?;
        ids.retain(|&id| id != super::buffers::DEAD);
        Ok(ids)
    }

    /// Device address of the alive flags (GPU 0's, for a GPU group).
    pub(crate) fn alive_ptr(&self) -> Option<u64> {
        self.outflow.as_ref().map(|o| o.alive.ptr)
    }

    /// Live particles (slots minus removed ones not yet behind them): a frame's count.
    pub(crate) fn live_count(&self) -> u32 {
        self.params.n - self.outflow.as_ref().map_or(0, |o| o.pending)
    }

    /// Frame index of each id, computed on the device (null when frames index by id).
    pub(crate) fn queue_ranks(&self) -> Result<u64, CudaError> {
        let Some(o) = &self.outflow else {
            return Ok(0);
        };
        if !o.ranked {
            return Ok(0);
        }
        self.scan_with(&o.scan_levels, o.alive.ptr, o.rank.ptr, o.ids, 0)?;
        Ok(o.rank.ptr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_keep_the_case_numbers() {
        let b = OutflowRegion::of(&Outflow::Box {
            min: [0.0, 1.0, 2.0],
            max: [3.0, 4.0, 5.0],
        });
        assert_eq!((b.a, b.b, b.kind), ([0.0, 1.0, 2.0], [3.0, 4.0, 5.0], 0));
        let o = OutflowRegion::of(&Outflow::OutsideDomain { margin: 0.25 });
        assert_eq!((o.a[0], o.kind), (0.25, 1));
    }
}
