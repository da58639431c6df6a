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

// A slot in the next free place of `*ctr`, with one atomic per warp instead of one per thread:
// ghosts of a boundary layer are about one in every 200 slots at 100 M particles, and one atomic
// counter taken by each of them serialised dem_classify (0.65 ms per step at 25 M particles on
// an H100). The slots' order in the buffer is arbitrary either way; the sort restores (cell, id).
// Lanes are grouped by counter (__match_any_sync): a warp's migrants may go both ways.
__device__ __forceinline__ unsigned warp_slot(unsigned* ctr) {
    const unsigned mask = __match_any_sync(__activemask(), (unsigned long long)ctr);
    const unsigned lane = threadIdx.x & 31u;
    const unsigned leader = __ffs(mask) - 1;
    unsigned base = 0;
    if (lane == leader) base = atomicAdd(ctr, (unsigned)__popc(mask));
    base = __shfl_sync(mask, base, leader);
    return base + (unsigned)__popc(mask & ((1u << lane) - 1u));
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

extern "C" __global__ void dem_classify(const DemParams p, const ParticleArrays s, ExchangeParams x) {
    unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= x.n || s.id[k] == DEM_DEAD) return;
    const unsigned layer = slab_layer(p, s.pos, k);
    if (layer < p.slab_lo || layer >= p.slab_hi) {
        const int side = layer >= p.slab_hi ? 1 : 0;
        // Particles move far less than a cell per step: one that crossed a whole neighbour slab
        // means a broken step, reported instead of being lost.
        const bool reachable = side ? (x.has_hi && layer < x.hi_hi) : (x.has_lo && layer >= x.lo_lo);
        if (!reachable) {
            atomicAdd(&x.counts[4], 1u);
            return;
        }
        const unsigned j = warp_slot(&x.counts[side]);
        if (j < x.cap_mig) write_record(p, s, k, x.mig[side] + (size_t)j * x.rec_mig, true);
        // A migrant that lands in the neighbour's boundary layer is one of this GPU's ghosts
        // now, and the neighbour classified before it arrived: it stays here as a ghost.
        if (layer + 1 == p.slab_lo || layer == p.slab_hi) warp_slot(&x.counts[5]);
        return;
    }
    const unsigned rec_halo = (rec_words(false) + 8 + 7) / 8 * 8;
    if (x.has_lo && layer == p.slab_lo) {
        const unsigned j = warp_slot(&x.counts[2]);
        if (j < x.cap_halo) write_record(p, s, k, x.halo[0] + (size_t)j * rec_halo, false);
    }
    if (x.has_hi && layer + 1 == p.slab_hi) {
        const unsigned j = warp_slot(&x.counts[3]);
        if (j < x.cap_halo) write_record(p, s, k, x.halo[1] + (size_t)j * rec_halo, false);
    }
}

// Writes `count` received records into slots base.. of the state; a migrant's history goes to
// the history row of its new slot in the state's (newest) history buffers.
// `alive` (null but for inflow): the id's flag for frame ranks (publish.cu) is set.
extern "C" __global__ void dem_unpack(const DemParams p, ParticleArrays s, const char* recs, unsigned count,
                                      unsigned base, unsigned full, unsigned rec_bytes, unsigned* alive) {
    unsigned j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= count) return;
    const char* r = recs + (size_t)j * rec_bytes;
    const unsigned k = base + j;
    const double* d = (const double*)r;
    for (int a = 0; a < 3; a++) s.pos[3 * k + a] = d[a];
    const real* v = (const real*)(r + 24);
    for (int a = 0; a < 3; a++) {
        s.vel[3 * k + a] = v[a];
        if (s.omega) s.omega[3 * k + a] = v[3 + a];
    }
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
    if (s.row) s.row[k] = k;
    if (s.hist_count) {
        const unsigned hc = full ? u[3] : 0u;
        s.hist_count[k] = hc;
        const HistEntry* h = (const HistEntry*)(r + rec_hist_offset());
        for (unsigned c = 0; c < hc; c++) s.hist[c * p.hist_sc + k * p.hist_sr] = h[c];
    }
}

// Owned particles per cell layer along the split axis (load balancing), added into `counts`.
extern "C" __global__ void dem_layer_counts(const DemParams p, const ParticleArrays s, unsigned n, unsigned* counts) {
    unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n || s.id[k] == DEM_DEAD) return;
    atomicAdd(&counts[slab_layer(p, s.pos, k)], 1u);
}
