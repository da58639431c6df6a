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
extern "C" __global__ void scan_tile(const unsigned* in, unsigned* out, unsigned* block_sums, unsigned n) {
    __shared__ unsigned sh[SCAN_THREADS];
    unsigned base = blockIdx.x * SCAN_TILE + threadIdx.x * SCAN_ITEMS;
    unsigned v[SCAN_ITEMS];
    unsigned sum = 0;
#pragma unroll
    for (int k = 0; k < SCAN_ITEMS; k++) {
        unsigned idx = base + k;
        v[k] = idx < n ? in[idx] : 0u;
        sum += v[k];
    }
    sh[threadIdx.x] = sum;
    __syncthreads();
    // Hillis-Steele inclusive scan of the per-thread sums.
    for (unsigned off = 1; off < SCAN_THREADS; off <<= 1) {
        unsigned t = threadIdx.x >= off ? sh[threadIdx.x - off] : 0u;
        __syncthreads();
        sh[threadIdx.x] += t;
        __syncthreads();
    }
    unsigned run = sh[threadIdx.x] - sum;
#pragma unroll
    for (int k = 0; k < SCAN_ITEMS; k++) {
        unsigned idx = base + k;
        if (idx < n) out[idx] = run;
        run += v[k];
    }
    if (threadIdx.x == SCAN_THREADS - 1) block_sums[blockIdx.x] = sh[threadIdx.x];
}

// Adds the scanned tile offsets to every element of its tile.
extern "C" __global__ void scan_add(unsigned* out, const unsigned* offsets, unsigned n) {
    unsigned idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) out[idx] += offsets[idx / SCAN_TILE];
}

