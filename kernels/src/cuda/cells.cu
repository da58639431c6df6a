// Shared by the DEM and SPH modules (concatenated before their kernel files): the cell
// coordinate of a position (Grid::cell_coords in solver/src/core/grid.rs) and the exclusive scan
// the counting sorts use.

__device__ __forceinline__ unsigned cell_coord(double p, double origin, double cell, unsigned dim) {
    // Grid::cell_coords: floor, clamp to [0, dim - 1]; NaN maps to 0 (fmax returns the non-NaN).
    double c = floor((p - origin) / cell);
    c = fmin(fmax(c, 0.0), (double)(dim - 1));
    return (unsigned)c;
}

// Adds one to counts[layer] for every lane whose layer is not ~0u, with one atomic per distinct
// layer in the warp: slots are in cell order, so a warp's lanes mostly share a layer, and one
// atomic per particle would queue a whole layer's adds on one counter (about 7 ms per count at
// 10 M particles, measured on two H200s). Every lane of the warp must call it (no early return).
__device__ __forceinline__ void count_in_layer(unsigned* counts, unsigned layer) {
    const unsigned same = __match_any_sync(0xffffffffu, layer);
    const unsigned lane = threadIdx.x & 31u;
    if (layer != ~0u && lane == (unsigned)(__ffs(same) - 1)) atomicAdd(&counts[layer], (unsigned)__popc(same));
}

#define SCAN_THREADS 256
#define SCAN_ITEMS 4
#define SCAN_TILE (SCAN_THREADS * SCAN_ITEMS)

// Exclusive scan of one tile of `in` into `out`; the tile total goes to block_sums[blockIdx.x].
// A thread's SCAN_ITEMS (4) elements travel as one 16-byte load and store where the arrays are
// aligned (allocations are), and the per-thread sums are scanned by warp shuffles. For the 80 M
// cells of a 100 M dam break's grid on an H100 the whole scan takes 0.79 ms; with scalar
// accesses and a shared-memory scan (16 barriers a tile) it took 1.00 ms (session 53).
extern "C" __global__ void scan_tile(const unsigned* in, unsigned* out, unsigned* block_sums, unsigned n) {
    __shared__ unsigned warp_total[SCAN_THREADS / 32];
    const unsigned base = blockIdx.x * SCAN_TILE + threadIdx.x * SCAN_ITEMS;
    const bool whole = base + SCAN_ITEMS <= n && ((size_t)in & 15) == 0 && ((size_t)out & 15) == 0;
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (whole) {
        v = *(const uint4*)(in + base);
    } else {
        if (base < n) v.x = in[base];
        if (base + 1 < n) v.y = in[base + 1];
        if (base + 2 < n) v.z = in[base + 2];
        if (base + 3 < n) v.w = in[base + 3];
    }
    const unsigned sum = v.x + v.y + v.z + v.w;
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    unsigned x = sum;  // inclusive scan of the warp's per-thread sums
#pragma unroll
    for (unsigned off = 1; off < 32; off <<= 1) {
        const unsigned t = __shfl_up_sync(0xffffffffu, x, off);
        if (lane >= off) x += t;
    }
    if (lane == 31) warp_total[warp] = x;
    __syncthreads();
    if (warp == 0) {
        unsigned w = lane < SCAN_THREADS / 32 ? warp_total[lane] : 0u;
#pragma unroll
        for (unsigned off = 1; off < SCAN_THREADS / 32; off <<= 1) {
            const unsigned t = __shfl_up_sync(0xffffffffu, w, off);
            if (lane >= off) w += t;
        }
        if (lane < SCAN_THREADS / 32) warp_total[lane] = w;  // inclusive over the warps
    }
    __syncthreads();
    uint4 o;
    o.x = x - sum + (warp > 0 ? warp_total[warp - 1] : 0u);
    o.y = o.x + v.x;
    o.z = o.y + v.y;
    o.w = o.z + v.z;
    if (whole) {
        *(uint4*)(out + base) = o;
    } else {
        if (base < n) out[base] = o.x;
        if (base + 1 < n) out[base + 1] = o.y;
        if (base + 2 < n) out[base + 2] = o.z;
        if (base + 3 < n) out[base + 3] = o.w;
    }
    if (threadIdx.x == SCAN_THREADS - 1) block_sums[blockIdx.x] = warp_total[SCAN_THREADS / 32 - 1];
}

// Adds the scanned tile offsets to every element of its tile: SCAN_ITEMS elements per thread
// (one tile's, SCAN_TILE being a multiple of it), as one 16-byte access where aligned.
extern "C" __global__ void scan_add(unsigned* out, const unsigned* offsets, unsigned n) {
    const unsigned base = (blockIdx.x * blockDim.x + threadIdx.x) * SCAN_ITEMS;
    if (base >= n) return;
    const unsigned add = offsets[base / SCAN_TILE];
    if (base + SCAN_ITEMS <= n && ((size_t)out & 15) == 0) {
        uint4 v = *(uint4*)(out + base);
        v.x += add;
        v.y += add;
        v.z += add;
        v.w += add;
        *(uint4*)(out + base) = v;
    } else {
        for (unsigned k = base; k < min(base + SCAN_ITEMS, n); k++) out[k] += add;
    }
}

