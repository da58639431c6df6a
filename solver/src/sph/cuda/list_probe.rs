//! A measurement, not a mode of the solver: how fast the fluid's rates would be evaluated over
//! neighbour lists (kept for several evaluations) instead of the walk over the cells, at the
//! state the GPU holds now (`sph-gpu-bench --list-probe SKIN`). The walk runs the pair code for
//! the cells' candidates, about half of which lie outside the support; a list built with a skin
//! holds mostly pairs. The probe times both over the same sorted state and compares their rates.

use std::time::Instant;

use super::{blocks, CudaError, KernelParams, SphCuda, Which};

/// What [`SphCuda::list_probe`] measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ListProbe {
    /// The skin (m) and the support 2h (m).
    pub skin: f64,
    pub support: f64,
    /// Milliseconds per evaluation of `sph_rates_fluid` (the walk) and of
    /// `sph_rates_fluid_list`, and per build of the lists (the anchors and both passes).
    pub walk_ms: f64,
    pub list_ms: f64,
    pub build_ms: f64,
    /// Entries per fluid particle: mean and largest.
    pub mean_entries: f64,
    pub max_entries: u32,
    /// Bytes of the lists and the anchors per fluid particle.
    pub list_bytes_per_fluid: f64,
    /// The largest difference of an acceleration component between the two, over the largest
    /// acceleration magnitude; and of a density rate over the largest density rate.
    pub acc_diff: f64,
    pub drho_diff: f64,
}

impl SphCuda {
    /// Sorts the state, then times `reps` evaluations of the fluid rates by the walk and over
    /// lists of skin `skin` (m), and compares the rates (float mode, one GPU only).
    pub fn list_probe(&mut self, skin: f64, reps: u32) -> Result<ListProbe, CudaError> {
        if self.loc == 0 || self.slab.is_some() {
            return Err(CudaError::Unsupported(
                "the list probe in the parity mode or on a slab".into(),
            ));
        }
        let nf = self.nf as usize;
        self.sort_fluid(self.s.pos)?;
        self.reorder(Which::State)?;
        let p = self.p;
        let pb = KernelParams { n: self.nb, ..p };
        let none = 0u64;
        let f = self.s;
        self.launch(
            "sph_localize",
            blocks(self.nf),
            &[&p, &f.pos, &f.rho, &f.vel, &self.loc, &self.kin],
        )?;
        self.launch(
            "sph_localize",
            blocks(self.nb),
            &[&pb, &self.bpos, &self.brho, &none, &self.bloc, &none],
        )?;
        let walk = |sim: &SphCuda| {
            sim.launch(
                "sph_rates_fluid",
                blocks(sim.nf),
                &[
                    &p,
                    &f,
                    &sim.loc,
                    &sim.kin,
                    &sim.g.start,
                    &sim.bpos,
                    &sim.bloc,
                    &sim.brho,
                    &sim.bstart,
                    &sim.acc,
                    &sim.drho,
                    &none,
                    &sim.diag,
                ],
            )
        };
        walk(self)?;
        let walk_ms = self.time_ms(reps, walk)?;
        let acc_walk = self.download_reals(self.acc, 3 * nf)?;
        let drho_walk = self.download_reals(self.drho, nf)?;

        let fanchor = self.alloc("probe: fluid anchors", 4 * nf)?;
        let banchor = self.alloc("probe: boundary anchors", 4 * self.nb as usize)?;
        let counts = self.alloc("probe: list counts", 4 * nf)?;
        let skin_f = skin as f32;
        // Count first (capacity 0), then size the lists by the largest count.
        let mut list = 0u64;
        let mut cap = 0u32;
        let build = |sim: &SphCuda, list: u64, cap: u32| -> Result<(), CudaError> {
            sim.launch("sph_anchor", blocks(sim.nf), &[&p, &f.pos, &fanchor])?;
            sim.launch("sph_anchor", blocks(sim.nb), &[&pb, &sim.bpos, &banchor])?;
            sim.launch(
                "sph_list_build",
                blocks(sim.nf),
                &[
                    &p,
                    &f,
                    &sim.loc,
                    &sim.g.start,
                    &sim.bloc,
                    &sim.bstart,
                    &skin_f,
                    &cap,
                    &list,
                    &counts,
                ],
            )
        };
        build(self, list, cap)?;
        let mut c = vec![0u8; 4 * nf];
        self.get(counts, &mut c)?;
        let totals: Vec<u32> = c
            .chunks_exact(4)
            .map(|b| {
                let v = u32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
                (v & 0xffff) + (v >> 16)
            })
            .collect();
        let max_entries = totals.iter().copied().max().unwrap_or(0);
        let mean_entries = totals.iter().map(|&t| t as f64).sum::<f64>() / nf.max(1) as f64;
        cap = max_entries;
        list = self.alloc("probe: lists", 4 * cap as usize * nf)?;
        build(self, list, cap)?;
        let build_ms = self.time_ms(reps.min(5), |sim| build(sim, list, cap))?;
        let rates = |sim: &SphCuda| {
            sim.launch(
                "sph_rates_fluid_list",
                blocks(sim.nf),
                &[
                    &p, &f, &sim.loc, &sim.kin, &fanchor, &sim.bloc, &banchor, &list, &counts,
                    &sim.acc, &sim.drho, &sim.diag,
                ],
            )
        };
        rates(self)?;
        let list_ms = self.time_ms(reps, rates)?;
        let acc_list = self.download_reals(self.acc, 3 * nf)?;
        let drho_list = self.download_reals(self.drho, nf)?;
        let rel = |a: &[f64], b: &[f64]| {
            let scale = a.iter().fold(0f64, |m, x| m.max(x.abs())).max(1e-300);
            a.iter().zip(b).fold(0f64, |m, (x, y)| m.max((x - y).abs())) / scale
        };
        let out = ListProbe {
            skin,
            support: 2.0 * self.c.h,
            walk_ms,
            list_ms,
            build_ms,
            mean_entries,
            max_entries,
            list_bytes_per_fluid: 4.0 * cap as f64 + 8.0,
            acc_diff: rel(&acc_walk, &acc_list),
            drho_diff: rel(&drho_walk, &drho_list),
        };
        for ptr in [list, counts, banchor, fanchor] {
            self.free(ptr);
        }
        Ok(out)
    }

    /// Milliseconds per call of `f` (queued `reps` times between two waits for the stream).
    fn time_ms(
        &self,
        reps: u32,
        f: impl Fn(&SphCuda) -> Result<(), CudaError>,
    ) -> Result<f64, CudaError> {
        let sync = |sim: &SphCuda| {
            sim.stream
                .synchronize()
                .map_err(|e| CudaError::driver("waiting for the probe", e))
        };
        sync(self)?;
        let t0 = Instant::now();
        for _ in 0..reps.max(1) {
            f(self)?;
        }
        sync(self)?;
        Ok(1e3 * t0.elapsed().as_secs_f64() / reps.max(1) as f64)
    }
}
