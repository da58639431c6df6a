// Exchange between the GPUs of one run (solver/src/dem/cuda/window.rs): each GPU owns a slab of
// cell layers along DemParams::split_axis and keeps, besides its own particles, read-only copies
// (ghosts) of its neighbours' boundary layers. Before every neighbour search:
//   dem_classify  sorts each owned particle into "stays", "leaves to the lower / upper
//                 neighbour" (a migrant: its full state and contact history are packed into a
//                 record) and "in my first / last layer" (a ghost record for that neighbour);
//                 it only reads the state, so it can run again into larger buffers;
//   (the host copies the records device to device into the neighbours' receive buffers)
//   dem_unpack    appends received records behind the live slots.
// The neighbour search then marks the migrants' slots dead (dem_hash_count: those in a ghost
// layer stay, as ghosts, since the neighbour's ghost records were made before they arrived
// there), sorts ghosts into their cells and dead slots behind everything, so every owned particle
// sees the same neighbours in the same (cell, id) order as on one GPU.

// Parameters of dem_classify. Mirrored by window.rs (ExchangeParams, size asserted: 72 bytes).
struct ExchangeParams {
    char* mig[2];       // outgoing migrant records: to the lower (0) and the upper (1) neighbour
    char* halo[2];      // outgoing ghost records
    unsigned* counts;   // [6] migrants lower, upper; ghosts lower, upper; slab skipped; migrants
                        // kept as ghosts
    unsigned cap_mig;   // records each migrant buffer holds (more are counted, not written)
    unsigned cap_halo;  // records each ghost buffer holds
    unsigned n;         // slots to classify
    unsigned has_lo;    // 1: there is a lower neighbour
    unsigned has_hi;    // 1: there is an upper neighbour
    unsigned lo_lo;     // the lower neighbour's first layer
    unsigned hi_hi;     // the upper neighbour's end layer (one past its last)
    unsigned rec_mig;   // bytes of a migrant record
};

// Record layout (bytes): positions 3 x f64 at 0; then `real` velocity, spin (and for migrants
// last force and torque); then u32 id, species (and for migrants contacts, history count); a
// migrant's history entries start at the next multiple of 16. window.rs computes the same
// sizes (record_bytes).
#define REC_REALS_GHOST 6
#define REC_REALS_MIG 12

__device__ __forceinline__ unsigned rec_words(bool full) {
    return 24 + (full ? REC_REALS_MIG : REC_REALS_GHOST) * (unsigned)sizeof(real);
}
__device__ __forceinline__ unsigned rec_hist_offset() {
    return (rec_words(true) + 16 + 15) / 16 * 16;
}

__device__ __forceinline__ unsigned slab_layer(const DemParams& p, const double* pos, unsigned k) {
    const unsigned a = p.split_axis;
    return cell_coord(pos[3 * k + a], p.origin[a], p.cell, p.dims[a]);
}

__device__ void write_record(const DemParams& p, const ParticleArrays& s, unsigned k, char* r, bool full) {
    double* d = (double*)r;
    for (int a = 0; a < 3; a++) d[a] = s.pos[3 * k + a];
    real* v = (real*)(r + 24);
    for (int a = 0; a < 3; a++) {
        v[a] = s.vel[3 * k + a];
        v[3 + a] = s.omega ? s.omega[3 * k + a] : (real)0;
    }
    if (full)
        for (int a = 0; a < 3; a++) {
            v[6 + a] = s.force ? s.force[3 * k + a] : (real)0;
            v[9 + a] = s.torque ? s.torque[3 * k + a] : (real)0;
        }
    unsigned* u = (unsigned*)(r + rec_words(full));
    u[0] = s.id[k];
    u[1] = s.species ? s.species[k] : 0u;
    if (!full) return;
    u[2] = s.contacts ? s.contacts[k] : 0u;
    const unsigned row = s.row ? s.row[k] : k;
    const unsigned hc = s.hist_count ? s.hist_count[row] : 0u;
    u[3] = hc;
    HistEntry* h = (HistEntry*)(r + rec_hist_offset());
    for (unsigned c = 0; c < hc; c++) h[c] = s.hist[c * p.hist_sc + row * p.hist_sr];
}

// Slot k's position, velocity and spin from record `r` (write_record's layout).
__device__ __forceinline__ void read_kinematics(ParticleArrays& s, unsigned k, const char* r) {
    const double* d = (const double*)r;
    for (int a = 0; a < 3; a++) s.pos[3 * k + a] = d[a];
    const real* v = (const real*)(r + 24);
    for (int a = 0; a < 3; a++) {
        s.vel[3 * k + a] = v[a];
        if (s.omega) s.omega[3 * k + a] = v[3 + a];
    }
}

// What dem_classify does with slot k: -1 nothing, 0/1 migrant to the lower/upper neighbour,
// 2/3 ghost record for the lower/upper neighbour, 4 skipped a whole slab (an error). `kept`: a
// migrant that stays here as a ghost (it lands in the neighbour's boundary layer, and the
// neighbour classified before it arrived). A particle in a one-layer slab is a ghost for both
// sides: `both` says the upper record is due as well.
__device__ __forceinline__ int classify_slot(const DemParams& p, const ParticleArrays& s, const ExchangeParams& x,
                                             unsigned k, bool* kept, bool* both) {
    *kept = false;
    *both = false;
    if (k >= x.n || s.id[k] == DEM_DEAD) return -1;
    const unsigned layer = slab_layer(p, s.pos, k);
    if (layer < p.slab_lo || layer >= p.slab_hi) {
        const int side = layer >= p.slab_hi ? 1 : 0;
        // Particles move far less than a cell per step: one that crossed a whole neighbour slab
        // means a broken step, reported instead of being lost.
        const bool reachable = side ? (x.has_hi && layer < x.hi_hi) : (x.has_lo && layer >= x.lo_lo);
        if (!reachable) return 4;
        *kept = layer + 1 == p.slab_lo || layer == p.slab_hi;
        return side;
    }
    const bool lo = x.has_lo && layer == p.slab_lo;
    const bool hi = x.has_hi && layer + 1 == p.slab_hi;
    *both = lo && hi;
    return lo ? 2 : (hi ? 3 : -1);
}

// The two passes shared by dem_classify and dem_classify_band. Pass 1 counts slot k's kind
// `c` (0, 1: migrant down, up; 2, 3: ghost for the neighbour below, above; 4: kept ghost) in the
// block's counters `cnt` (3 once more when the slot is a ghost for both sides, 5 when it stays).
__device__ __forceinline__ void count_kind(unsigned* cnt, int c, bool kept, bool both) {
    atomicAdd(&cnt[c], 1u);
    if (both) atomicAdd(&cnt[3], 1u);
    if (kept) atomicAdd(&cnt[5], 1u);
}

// Between the passes: the block's places in each kind's records (one global atomic per kind),
// and its counters cleared for pass 2. Called by every thread of the block.
__device__ __forceinline__ void reserve_places(ExchangeParams& x, unsigned* cnt, unsigned* base) {
    __syncthreads();
    if (threadIdx.x < 6) {
        base[threadIdx.x] = cnt[threadIdx.x] ? atomicAdd(&x.counts[threadIdx.x], cnt[threadIdx.x]) : 0u;
        cnt[threadIdx.x] = 0;
    }
    __syncthreads();
}

// Pass 2: slot k's records at the block's places (the order inside is arbitrary; the sort
// restores (cell, id)).
__device__ __forceinline__ void emit_records(const DemParams& p, const ParticleArrays& s, const ExchangeParams& x,
                                             unsigned k, int c, bool both, const unsigned* base, unsigned* cnt) {
    if (c == 4) return;
    const unsigned rec_halo = (rec_words(false) + 8 + 7) / 8 * 8;
    const unsigned j = base[c] + atomicAdd(&cnt[c], 1u);
    if (c < 2) {
        if (j < x.cap_mig) write_record(p, s, k, x.mig[c] + (size_t)j * x.rec_mig, true);
    } else if (j < x.cap_halo) {
        write_record(p, s, k, x.halo[c - 2] + (size_t)j * rec_halo, false);
    }
    if (both) {
        const unsigned h = base[3] + atomicAdd(&cnt[3], 1u);
        if (h < x.cap_halo) write_record(p, s, k, x.halo[1] + (size_t)h * rec_halo, false);
    }
}

// Slots each block of dem_classify handles (kernels::CLASSIFY_CHUNK): its records take one
// global atomic per kind and block, and their kinds fit in shared memory (4 KB). One atomic per record (on four counters) serialised the
// kernel: ghosts are about one slot in a hundred at 25 M particles a GPU, spread over every row
// of cells, and dem_classify took 0.63 ms there on an H100 against about 0.25 for its reads.
#define CLASSIFY_CHUNK 4096

extern "C" __global__ void dem_classify(const DemParams p, const ParticleArrays s, ExchangeParams x) {
    __shared__ unsigned cnt[6], base[6];
    // Each slot's kind from pass 1 (bit 3: `both`), so that pass 2 reads no position again.
    __shared__ signed char kind[CLASSIFY_CHUNK];
    if (threadIdx.x < 6) cnt[threadIdx.x] = 0;
    __syncthreads();
    const unsigned first = blockIdx.x * CLASSIFY_CHUNK;
    const unsigned last = min(first + CLASSIFY_CHUNK, x.n);
    // Pass 1: each slot's kind, and how many of each kind this block writes.
    for (unsigned k = first + threadIdx.x; k < last; k += blockDim.x) {
        bool kept, both;
        const int c = classify_slot(p, s, x, k, &kept, &both);
        kind[k - first] = (signed char)(c < 0 ? -1 : (c | (both ? 8 : 0)));
        if (c >= 0) count_kind(cnt, c, kept, both);
    }
    reserve_places(x, cnt, base);
    // Pass 2: the records, at this block's places.
    for (unsigned k = first + threadIdx.x; k < last; k += blockDim.x) {
        const int v = kind[k - first];
        if (v >= 0) emit_records(p, s, x, k, v & 7, (v & 8) != 0, base, cnt);
    }
}

// The cell layers around the slab bounds whose particles dem_classify_band looks at. Mirrored
// by window.rs (BandParams, size asserted: 48 bytes).
struct BandParams {
    unsigned layers[6];  // distinct layers, ascending: lo - 1 .. lo + 1 and hi - 2 .. hi (in range)
    unsigned n_layers;
    unsigned per_layer;  // cells of one layer: dims[o1] * dims[o2]
    unsigned o1, o2;     // the other two axes, ascending
    unsigned sorted;     // slots 0..sorted are in the last sort's order (grid start lists them)
    unsigned pad;
};

#define BAND_ITEMS 1024

// Work item t of dem_classify_band: the slots of one band cell, or one slot appended after the
// last sort (inflow). [*first, *last).
__device__ __forceinline__ void band_item(const DemParams& p, const unsigned* start, const BandParams& b,
                                          unsigned n, unsigned t, unsigned* first, unsigned* last) {
    const unsigned cells = b.n_layers * b.per_layer;
    if (t < cells) {
        const unsigned q = t % b.per_layer;
        unsigned c3[3];
        c3[p.split_axis] = b.layers[t / b.per_layer];
        c3[b.o1] = q % p.dims[b.o1];
        c3[b.o2] = q / p.dims[b.o1];
        const unsigned c = cell_index(p, c3[0], c3[1], c3[2]);
        *first = start[c];
        *last = start[c + 1];
    } else {
        const unsigned k = b.sorted + (t - cells);
        *first = k;
        *last = k < n ? k + 1 : k;
    }
}

// One pass of dem_classify_band over this thread's slots of the block's items [t0, t1): their
// kinds counted (pass 1), or their records written (EMIT, pass 2). (A lambda would say it in
// fewer lines, but NVRTC's JIT mode refuses unannotated ones.)
template <bool EMIT>
__device__ __forceinline__ void band_pass(const DemParams& p, const ParticleArrays& s, const ExchangeParams& x,
                                          const unsigned* start, const BandParams& b, unsigned t0, unsigned t1,
                                          unsigned* cnt, const unsigned* base) {
    for (unsigned t = t0 + threadIdx.x; t < t1; t += blockDim.x) {
        unsigned first, last;
        band_item(p, start, b, x.n, t, &first, &last);
        for (unsigned k = first; k < last; k++) {
            bool kept, both;
            const int c = classify_slot(p, s, x, k, &kept, &both);
            if (c < 0) continue;
            if (EMIT)
                emit_records(p, s, x, k, c, both, base, cnt);
            else
                count_kind(cnt, c, kept, both);
        }
    }
}

// dem_classify for a GPU whose slots are in the order of the last sort: only the particles of
// the layers next to the bounds (where every migrant and ghost of this step lies: particles move
// less than a cell per step, as the neighbour search assumes, and a bound moves one layer per
// decision) and those appended since are looked at, instead of every slot (0.34 ms at 25 M
// particles a GPU on an H100, for ghosts that are about one slot in a hundred). Same records,
// same counts.
extern "C" __global__ void dem_classify_band(const DemParams p, const ParticleArrays s, ExchangeParams x,
                                             const unsigned* start, const BandParams b, unsigned items) {
    __shared__ unsigned cnt[6], base[6];
    if (threadIdx.x < 6) cnt[threadIdx.x] = 0;
    __syncthreads();
    const unsigned t0 = blockIdx.x * BAND_ITEMS;
    const unsigned t1 = min(t0 + BAND_ITEMS, items);
    band_pass<false>(p, s, x, start, b, t0, t1, cnt, base);
    reserve_places(x, cnt, base);
    band_pass<true>(p, s, x, start, b, t0, t1, cnt, base);
}

// Writes `count` received records into slots base.. of the state; a migrant's history goes to
// the history row its new slot carries.
// `alive` (null but for inflow): the id's flag for frame ranks (publish.cu) is set.
extern "C" __global__ void dem_unpack(const DemParams p, ParticleArrays s, const char* recs, unsigned count,
                                      unsigned base, unsigned full, unsigned rec_bytes, unsigned* alive) {
    unsigned j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= count) return;
    const char* r = recs + (size_t)j * rec_bytes;
    const unsigned k = base + j;
    read_kinematics(s, k, r);
    const real* v = (const real*)(r + 24);
    if (full)
        for (int a = 0; a < 3; a++) {
            if (s.force) s.force[3 * k + a] = v[6 + a];
            if (s.torque) s.torque[3 * k + a] = v[9 + a];
        }
    const unsigned* u = (const unsigned*)(r + rec_words(full != 0));
    s.id[k] = u[0];
    if (alive) alive[u[0]] = 1u;
    if (s.species) s.species[k] = u[1];
    if (full && s.contacts) s.contacts[k] = u[2];
    if (s.hist_count) {
        // In place: the free row that the slot carries (rows are a permutation over all slots);
        // two buffers: row k of the newest, free beyond the collided slots.
#if DEM_HIST_IN_PLACE
        const unsigned row = s.row ? s.row[k] : k;  // owner keys: every slot's row is its slot
#else
        const unsigned row = k;
        s.row[k] = k;
#endif
        const unsigned hc = full ? u[3] : 0u;
        s.hist_count[row] = hc;
        const HistEntry* h = (const HistEntry*)(r + rec_hist_offset());
        for (unsigned c = 0; c < hc; c++) s.hist[c * p.hist_sc + row * p.hist_sr] = h[c];
    }
}

// Owned particles per cell layer along the split axis (load balancing), added into `counts`.
extern "C" __global__ void dem_layer_counts(const DemParams p, const ParticleArrays s, unsigned n, unsigned* counts) {
    unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    const bool live = k < n && s.id[k] != DEM_DEAD;
    count_in_layer(counts, live ? slab_layer(p, s.pos, k) : ~0u);
}

// ---- Ghost refresh between a Verlet skin's searches (window.rs, skin.rs) ----
// Between two searches the slots keep their order and every GPU keeps its ghosts; only their
// positions and velocities change, sent each step by their owner. At a search both sides list
// their slots of a boundary layer in slot order: the sender its owned particles of its first
// (last) layer, the receiver its ghosts of the same layer. Both are the particles of that layer
// after the exchange (a migrant that landed there is owned by the one and kept as a ghost by the
// other), hashed from the same positions, sorted by (cell, id): the two lists name the same
// particles in the same order, so record j of the one is slot j of the other (the host checks
// the totals; the receiver checks each record's id).

// The layers of the four lists (window.rs RefreshLayers, size asserted: 32 bytes): list 0 sends
// to the lower neighbour (layer slab_lo), 1 to the upper (slab_hi - 1), 2 receives from the
// lower (slab_lo - 1), 3 from the upper (slab_hi); ~0u: no neighbour there.
struct RefreshLayers {
    unsigned layer[4];
    unsigned per_layer;  // cells of one layer: dims[o1] * dims[o2]
    unsigned o1, o2;     // the other two axes, ascending
    unsigned pad;
};

__device__ __forceinline__ unsigned refresh_cell(const DemParams& p, const RefreshLayers& r, unsigned b, unsigned q) {
    unsigned c3[3];
    c3[p.split_axis] = r.layer[b];
    c3[r.o1] = q % p.dims[r.o1];
    c3[r.o2] = q / p.dims[r.o1];
    return cell_index(p, c3[0], c3[1], c3[2]);
}

// cnt[b * per_layer + q] = slots of cell q of list b's layer (0 without the list); cnt[4 *
// per_layer] = 0 (the scan's total).
extern "C" __global__ void dem_refresh_count(const DemParams p, const unsigned* start, const RefreshLayers r,
                                             unsigned* cnt) {
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned cells = 4 * r.per_layer;
    if (t > cells) return;
    unsigned v = 0;
    if (t < cells) {
        const unsigned b = t / r.per_layer;
        if (r.layer[b] != ~0u) {
            const unsigned c = refresh_cell(p, r, b, t % r.per_layer);
            v = start[c + 1] - start[c];
        }
    }
    cnt[t] = v;
}

// The lists from the scanned counts `off`: entry off[b * per_layer + q] + i of `list` is slot
// start[c] + i of cell q of list b, and the same entry of `ids` its id at this search
// (`slot_ids`: the state the search gathered); at most `cap` entries written. totals[b] = list
// b's length, totals[4] = all of them (the host grows the lists and checks the totals).
extern "C" __global__ void dem_refresh_fill(const DemParams p, const unsigned* start, const RefreshLayers r,
                                            const unsigned* off, const unsigned* slot_ids, unsigned* list,
                                            unsigned* ids, unsigned cap, unsigned* totals) {
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned cells = 4 * r.per_layer;
    if (t == 0) {
        for (unsigned b = 0; b < 4; b++) totals[b] = off[(b + 1) * r.per_layer] - off[b * r.per_layer];
        totals[4] = off[cells];
    }
    if (t >= cells) return;
    const unsigned b = t / r.per_layer;
    if (r.layer[b] == ~0u) return;
    const unsigned c = refresh_cell(p, r, b, t % r.per_layer);
    unsigned j = off[t];
    for (unsigned k = start[c]; k < start[c + 1]; k++, j++)
        if (j < cap) {
            list[j] = k;
            ids[j] = slot_ids[k];
        }
}

// Ghost records of list b's first `count` slots (its entries start at off[b * per_layer]).
extern "C" __global__ void dem_refresh_pack(const DemParams p, const ParticleArrays s, const unsigned* list,
                                            const unsigned* off, unsigned first_cell, unsigned count, char* recs) {
    const unsigned j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= count) return;
    const unsigned rec_halo = (rec_words(false) + 8 + 7) / 8 * 8;
    write_record(p, s, list[off[first_cell] + j], recs + (size_t)j * rec_halo, false);
}

// Writes ghost record j into list b's slot j: position, velocity and spin (the id and species
// are the slot's since the search; the collide marked the slot dead, which the record undoes).
// A record whose id is not the one the slot held at the search counts in mismatch[0].
extern "C" __global__ void dem_refresh_unpack(const DemParams p, ParticleArrays s, const char* recs,
                                              const unsigned* list, const unsigned* off, unsigned first_cell,
                                              unsigned count, const unsigned* ids, unsigned* mismatch) {
    const unsigned j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= count) return;
    const unsigned rec_halo = (rec_words(false) + 8 + 7) / 8 * 8;
    const char* r = recs + (size_t)j * rec_halo;
    const unsigned e = off[first_cell] + j;
    const unsigned k = list[e];
    read_kinematics(s, k, r);
    const unsigned* u = (const unsigned*)(r + rec_words(false));
    if (u[0] != ids[e]) atomicAdd(mismatch, 1u);
    s.id[k] = u[0];
    if (s.species) s.species[k] = u[1];
}

// Copies `n` words to `out`, page-locked host memory mapped into the device: a step's small
// results (exchange counts, the skin's status) reach the host without a DMA copy, which would
// queue behind a frame's copy to the host on the copy engine (window.rs, MappedWords).
extern "C" __global__ void dem_words_out(const unsigned* src, unsigned n, volatile unsigned* out) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = src[i];
    __threadfence_system();
}
