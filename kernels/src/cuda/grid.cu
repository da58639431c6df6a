// Neighbour search: cell hash, counting sort by cell, (cell, id) order within each cell, reorder.
// Mirrors solver/src/grid.rs (Grid::cell_coords, Grid::cell_index, CellList::build): the result
// is the same (cell, id) order as the CPU's, independent of the arrival order of the atomics.

__device__ __forceinline__ unsigned cell_index(const DemParams& p, unsigned x, unsigned y, unsigned z) {
    return x + p.dims[0] * (y + p.dims[1] * z);
}

// Hash every slot and count particles per cell; `rank` is the arrival order inside the cell.
// Dead slots (DEM_DEAD) go to the extra bucket `cells` (count and start have cells + 1 entries),
// so the sort moves them behind every live particle and the permutation covers every slot: the
// dead ones carry their history rows (free rows, contact.cu) to the slots that receive the next
// particles. On a GPU of a group a particle outside its slab and outside the ghost layers next to
// it is a migrant that dem_classify packed for a neighbour: its slot dies here (exchange.cu).
// After an exchange the dead bucket holds the last step's ghosts and the migrants: their ranks
// come from one atomic per warp (one contended counter per slot cost 0.25 ms a step at 25 M
// particles a GPU). Their order varies run to run; only which free row a slot gets depends on it.
extern "C" __global__ void dem_hash_count(const DemParams p, const ParticleArrays s, GridArrays g) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= p.n) return;
    const unsigned dead = p.dims[0] * p.dims[1] * p.dims[2];  // the bucket after the last cell
    unsigned c = dead;
    if (s.id[i] != DEM_DEAD) {
        unsigned x = cell_coord(s.pos[3 * i], p.origin[0], p.cell, p.dims[0]);
        unsigned y = cell_coord(s.pos[3 * i + 1], p.origin[1], p.cell, p.dims[1]);
        unsigned z = cell_coord(s.pos[3 * i + 2], p.origin[2], p.cell, p.dims[2]);
        const unsigned layer = p.split_axis == 0 ? x : (p.split_axis == 1 ? y : z);
        if (layer + 1 < p.slab_lo || layer > p.slab_hi)
            s.id[i] = DEM_DEAD;
        else
            c = cell_index(p, x, y, z);
    }
    if (c == dead) {
        // The dead threads of this warp that run here together take consecutive ranks.
        const unsigned m = __activemask();
        const unsigned lane = threadIdx.x & 31u;
        const unsigned leader = __ffs(m) - 1;
        unsigned base = 0;
        if (lane == leader) base = atomicAdd(&g.count[dead], (unsigned)__popc(m));
        base = __shfl_sync(m, base, leader);
        g.rank[i] = base + __popc(m & ((1u << lane) - 1u));
    } else {
        g.rank[i] = atomicAdd(&g.count[c], 1u);
    }
    g.cell[i] = c;
}

// Slot i goes to start[cell] + rank (arrival order, fixed next by dem_cell_sort).
extern "C" __global__ void dem_scatter(const DemParams p, GridArrays g) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= p.n) return;
    unsigned c = g.cell[i];
    g.perm[g.start[c] + g.rank[i]] = i;
}

// Sorts each cell's entries by particle id (insertion sort: cells hold a handful of particles),
// which makes the order, and so every force sum, independent of the atomics' arrival order.
extern "C" __global__ void dem_cell_sort(const DemParams p, const ParticleArrays s, GridArrays g, unsigned cells) {
    unsigned c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cells) return;
    unsigned b = g.start[c], e = g.start[c + 1];
    if (e - b < 2) return;
    for (unsigned a = b + 1; a < e; a++) {
        unsigned v = g.perm[a];
        unsigned key = s.id[v];
        unsigned k = a;
        while (k > b && s.id[g.perm[k - 1]] > key) {
            g.perm[k] = g.perm[k - 1];
            k--;
        }
        g.perm[k] = v;
    }
}

// Reorder: dst slot k takes src slot perm[k] (every array but the contact history, which never
// moves; `row` says where each particle's is: contact.cu).
// Slots from p.n to p.n_rows (a group's dead tail, sorted behind its live slots) take only
// their rows: free rows for the slots that receive the next particles.
extern "C" __global__ void dem_gather(const DemParams p, const ParticleArrays src, ParticleArrays dst, const GridArrays g) {
    unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= max(p.n, p.n_rows)) return;
    unsigned j = g.perm[k];
    if (k >= p.n) {
        if (src.row) dst.row[k] = src.row[j];
        return;
    }
    for (int a = 0; a < 3; a++) {
        dst.pos[3 * k + a] = src.pos[3 * j + a];
        dst.vel[3 * k + a] = src.vel[3 * j + a];
    }
    if (src.omega)
        for (int a = 0; a < 3; a++) dst.omega[3 * k + a] = src.omega[3 * j + a];
    dst.id[k] = src.id[j];
    if (src.species) dst.species[k] = src.species[j];
    if (src.row) dst.row[k] = src.row[j];
    if (g.scell) {
        // A new search: every slot's cell is fresh and nothing has moved since.
        g.scell[k] = g.cell[j];
        g.path[k] = 0.0f;
        if (k == 0) *g.dmax = 0u;
    }
}

// One copy of the state (DEM_SINGLE_COPY): the reorder one array at a time, through a scratch
// buffer the host copies back: dst slot k takes src slot perm[k], `words` 32-bit words a slot.
extern "C" __global__ void dem_gather_words(const unsigned* src, unsigned* dst, const unsigned* perm, unsigned n,
                                            unsigned words) {
    const unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n) return;
    const size_t j = perm[k];
    for (unsigned w = 0; w < words; w++) dst[(size_t)k * words + w] = src[j * words + w];
}

// One copy of the state with a skin: what dem_gather does for the skin's cells at a search
// (every slot's cell is fresh), before the reorder reuses the force buffer that holds g.cell.
// The paths, which hold the permutation until the reorder is done, are zeroed by the host after
// it (nothing has moved since the search).
extern "C" __global__ void dem_search_cells(const DemParams p, GridArrays g) {
    const unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= p.n) return;
    g.scell[k] = g.cell[g.perm[k]];
    if (k == 0) *g.dmax = 0u;
}
