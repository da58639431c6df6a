// The SPH step on the GPU: the kernels of solver/src/sph/cuda/, which mirror the CPU reference
// solver/src/sph/cpu.rs stage for stage (the order of every sum included, so that the parity mode,
// -DDEM_DOUBLE without FMA contraction, reproduces the CPU's bits):
//   sph_hash_count, scan, sph_scatter, sph_cell_rank: fluid particles sorted by (cell, x, id);
//   sph_gather: the fluid arrays reordered into that order (and, when a frame is pending, its
//   fluid values packed in particle-id order from the state it reads: sph_frame_put);
//   sph_localize (float mode): cell-relative float positions and densities for the pair sums;
//   sph_fluid_blocks, sph_fluid_near: the blocks of cells with sorted fluid in reach, which the
//   walls' and mDBC's ghost nodes' walks consult (a dry one skips its walk);
//   sph_rates_fluid, sph_rates_bound: accelerations, density rates and the time-step limits,
//   and the update of the symplectic predictor, its corrector or Verlet (SphUpdate; the
//   parity mode updates the fluid in sph_update);
//   sph_pack: publication in particle-id order (float32).
// Boundary particles do not move (the host sorts them once and gives their cell starts), unless
// the case has moving solids (SPH_MOVING 1): then sph_bound_place puts their particles where the
// body's pose has them and the boundary is sorted by (cell, x, id) before each evaluation as the
// fluid is (sph_bound_gather), and the pair terms take the boundary's velocities.
// Needs vec3.cuh, sph_physics.cuh and cells.cu before it.

// SphParams: KernelParams in solver/src/sph/cuda/mod.rs (160 bytes).
struct SphParams {
    double origin[3];
    double cell;
    double gravity[3];
    double h, rho0, c0, b, mass, alpha, delta;
    double dt;
    unsigned dims[3];
    // Elements of the launch (fluid or boundary particles).
    unsigned n;
    // The case's kernel and diffusion (0 none, 1 Molteni-Colagrossi, 2 Fourtakas), which the pair
    // terms take from SPH_KERNEL and SPH_DIFFUSION, the module's constants.
    int kernel;
    int diffusion;
    // The slab of this GPU (sph/group.rs): the cell layers [own_lo, own_hi) along `axis` whose
    // particles it owns; one GPU owns every layer.
    unsigned axis, own_lo, own_hi;
    // Cells a neighbour may lie away along an axis (SPH_REACH, the module's constant, too).
    unsigned reach;
};

// The layer of a position along the split axis: `reach` cells thick (sph_layer_of in cpu.rs).
__device__ __forceinline__ unsigned sph_layer(const SphParams& p, const double* x) {
    return cell_coord(x[p.axis], p.origin[p.axis], p.cell, p.dims[p.axis]) / p.reach;
}

__device__ __forceinline__ bool sph_owns(const SphParams& p, unsigned layer) {
    return layer >= p.own_lo && layer < p.own_hi;
}

// One copy of the fluid state in sorted order (SphArrays in cuda.rs); id may be null.
struct SphArrays {
    double* pos;
    real* vel;
    real* rho;
    unsigned* id;
};

// SphFrame in solver/src/sph/cuda/mod.rs (32 bytes): a frame's arrays, f32 in particle-id order
// (any may be null: not wanted; on a slab, GPU 0's staging).
struct SphFrame {
    float* pos;    // 3 per particle
    float* vel;    // 3 per particle
    float* rho;    // density
    float* press;  // tait_pressure of the density
};

// Particle `i`'s entry of a frame: every publication path writes it through here (sph_gather,
// sph_pack, sph_pack_part).
__device__ __forceinline__ void sph_frame_put(const SphParams& p, const SphFrame& fr, unsigned i, const dvec3 x,
                                              const real3 v, const real rho) {
    if (fr.pos) {
        fr.pos[3 * i] = (float)x.x;
        fr.pos[3 * i + 1] = (float)x.y;
        fr.pos[3 * i + 2] = (float)x.z;
    }
    if (fr.vel) {
        fr.vel[3 * i] = (float)v.x;
        fr.vel[3 * i + 1] = (float)v.y;
        fr.vel[3 * i + 2] = (float)v.z;
    }
    if (fr.rho) fr.rho[i] = (float)rho;
    if (fr.press) fr.press[i] = (float)tait_pressure(rho, (real)p.rho0, (real)p.b);
}

// Counting-sort arrays of the fluid (SphGrid in cuda.rs); count and start have cells + 1 entries.
struct SphGrid {
    unsigned* cell;
    unsigned* rank;
    unsigned* perm;
    unsigned* count;
    unsigned* start;
};

// Reduced over every particle of an evaluation (SphDiag in cuda.rs): the time-step limits as the
// bits of non-negative doubles (whose order is the order of the bits), and non-finite particles.
struct SphDiag {
    unsigned long long dt_f;
    unsigned long long dt_cv;
    unsigned nonfinite;
    unsigned pad;
};

__device__ __forceinline__ real3 sph_gravity(const SphParams& p) {
    return make_real3((real)p.gravity[0], (real)p.gravity[1], (real)p.gravity[2]);
}

__device__ __forceinline__ unsigned sph_cell_index(const SphParams& p, unsigned x, unsigned y, unsigned z) {
    return x + p.dims[0] * (y + p.dims[1] * z);
}

// `keep` (may be null): slots whose flag is 0 go to the extra bucket `cells` after every cell
// (a slab's particles that no GPU needs here any more).
extern "C" __global__ void sph_hash_count(const SphParams p, const double* pos, const unsigned char* keep,
                                          SphGrid g) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= p.n) return;
    if (keep && !keep[i]) {
        const unsigned c = p.dims[0] * p.dims[1] * p.dims[2];
        g.cell[i] = c;
        g.rank[i] = atomicAdd(&g.count[c], 1u);
        return;
    }
    unsigned x = cell_coord(pos[3 * i], p.origin[0], p.cell, p.dims[0]);
    unsigned y = cell_coord(pos[3 * i + 1], p.origin[1], p.cell, p.dims[1]);
    unsigned z = cell_coord(pos[3 * i + 2], p.origin[2], p.cell, p.dims[2]);
    unsigned c = sph_cell_index(p, x, y, z);
    g.cell[i] = c;
    g.rank[i] = atomicAdd(&g.count[c], 1u);
}

extern "C" __global__ void sph_scatter(const SphParams p, SphGrid g) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= p.n) return;
    unsigned c = g.cell[i];
    g.perm[g.start[c] + g.rank[i]] = i;
    // The counts are consumed: cleared for the next sort (each cell by the particles in it).
    if (g.rank[i] == 0) g.count[c] = 0;
}

// The key of x whose unsigned order is the order of the doubles (core::grid::x_order_key).
__device__ __forceinline__ unsigned long long sph_x_key(double x) {
    const unsigned long long b = (unsigned long long)__double_as_longlong(x);
    return (b >> 63) ? ~b : (b | (1ull << 63));
}

// Each cell's entries by x, then by particle id (the atomics of sph_hash_count give them in a
// random order), as CellList::by_x orders them: a row of cells along x is then in x order, which
// the pair walk's chord cut needs. Entry k of cell c goes to start[c] + the number of the cell's
// entries before it, into `sorted` (the keys are unique, so the ranks are a permutation). One
// thread per entry, each reading its cell's keys; a thread per cell sorting its entries by
// insertion in local memory took 6.5 % of the step. Entries of the extra bucket (slots not kept,
// after every cell) keep their place.
extern "C" __global__ void sph_cell_rank(const SphParams p, const double* pos, const unsigned* id, SphGrid g,
                                         unsigned* sorted) {
    unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= p.n) return;
    const unsigned v = g.perm[k];
    const unsigned c = g.cell[v];
    if (c >= p.dims[0] * p.dims[1] * p.dims[2]) {
        sorted[k] = v;
        return;
    }
    const unsigned b = g.start[c], e = g.start[c + 1];
    const unsigned long long xm = sph_x_key(pos[3 * v]);
    const unsigned mine = id[v];
    unsigned r = 0;
    for (unsigned a = b; a < e; a++) {
        const unsigned u = g.perm[a];
        const unsigned long long xa = sph_x_key(pos[3 * u]);
        r += xa < xm || (xa == xm && id[u] < mine);
    }
    sorted[b + r] = v;
}

// dst slot k takes src slot perm[k] (the id only where both have one). With a frame (`fr.pos`
// not null; src has ids) each particle's values also go to its id's entry: the frame of the
// state before the step, whose values this gather reads anyway (a separate sph_pack read them
// again: 44 of its 76 bytes a particle).
extern "C" __global__ void sph_gather(const SphParams p, const SphArrays src, SphArrays dst, const unsigned* perm,
                                      const SphFrame fr) {
    unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= p.n) return;
    unsigned j = perm[k];
    // Every load before the first store: the compiler cannot move a load above a store to
    // memory it may alias, so interleaved they would wait for memory one after the other.
    const dvec3 x = dload3(src.pos + 3 * j);
    const real3 v = load3(src.vel, j);
    const real rho = src.rho[j];
    const bool ids = src.id && dst.id;
    const unsigned id = ids ? src.id[j] : 0u;
    dst.pos[3 * k] = x.x;
    dst.pos[3 * k + 1] = x.y;
    dst.pos[3 * k + 2] = x.z;
    store3(dst.vel, k, v);
    dst.rho[k] = rho;
    if (ids) dst.id[k] = id;
    if (fr.pos && src.id) sph_frame_put(p, fr, src.id[j], x, v, rho);
}

// Minimum of v over the warp, then one atomic per warp (fmin ignores NaN, as f64::min does).
__device__ __forceinline__ void sph_atomic_min(unsigned long long* target, double v) {
    for (int off = 16; off > 0; off >>= 1) v = fmin(v, __shfl_down_sync(0xffffffffu, v, off));
    if ((threadIdx.x & 31) == 0 && v == v) atomicMin(target, (unsigned long long)__double_as_longlong(v));
}

// The pair sums of one particle over the sorted particles of cells [lo, hi) of the rows around
// it (one call per list: fluid, then boundary), in the CPU's order: cells z, then y, then x
// ascending (a row's cells are consecutive in the sorted arrays), by x, then id, within a cell.
// `self_k`: the particle's own slot in this list (skipped), or ~0u.
struct SphSums {
    real3 acc;
    real drho;
    real mu_max;
};

// Moving solids (sph/motion.rs): 1 when the case has any, so that a case without them keeps the
// pair code that takes a boundary particle's velocity as zero (solver/src/sph/cuda/mod.rs sets it).
#ifndef SPH_MOVING
#define SPH_MOVING 0
#endif

// The pair geometry. The parity mode (-DDEM_DOUBLE) forms r_ij = x_i - x_j from the f64
// positions, as the CPU does. The float mode forms it from float positions relative to the lower
// corner of each particle's cell (sph_localize, with the density in w: one 16-byte load per
// candidate instead of three 8-byte loads, three double subtractions and three conversions):
// x_i - x_j = l_i - l_j - (c_j - c_i) cell, exact to about 1e-9 m in a cell of centimetres.
// The mode decides (-DSPH_LOCAL=0 in float mode selected the f64 positions, to compare, until
// session 41): float mode updates each particle inside the rates kernel (SphUpdate), which pair
// sums reading the state arrays would race with.
#ifdef SPH_LOCAL
#error "SPH_LOCAL follows the mode: float mode's update inside the rates kernel needs the copies"
#endif
#ifdef DEM_DOUBLE
#define SPH_LOCAL 0
#else
#define SPH_LOCAL 1
#endif

// Position x relative to the lower corner of its cell (cell_coord's clamped cell), in float.
__device__ __forceinline__ float sph_local_coord(double x, double origin, double cell, unsigned dim) {
    return (float)(x - (origin + (double)cell_coord(x, origin, cell, dim) * cell));
}

// Along x the float positions are relative to the lower corner of the particle's x-block, the
// SPH_XBLOCK cells [b SPH_XBLOCK, (b + 1) SPH_XBLOCK) of its row (y and z stay relative to the
// cell): a row's walk spans at most 2 SPH_REACH + 1 <= SPH_XBLOCK cells, so at most two blocks,
// and the walk changes its x offset at most once per row instead of tracking each candidate's
// cell. A block of 8 cells of 2h/3 is 5.3 h: float keeps x there to about 4e-9 m at 10 M
// particles (dp = 4.6 mm), 1e-6 of the spacing.
#define SPH_XBLOCK (2 * SPH_REACH + 1 <= 8 ? 8 : 2 * SPH_REACH + 1 <= 16 ? 16 : 32)
#if 2 * SPH_REACH + 1 > SPH_XBLOCK
#error "a row's walk must span at most two x-blocks (SPH_REACH at most 15)"
#endif

// Position x relative to the lower corner of its x-block, in float.
__device__ __forceinline__ float sph_block_coord(double x, double origin, double cell, unsigned dim) {
    const unsigned c = cell_coord(x, origin, cell, dim);
    return (float)(x - (origin + (double)(c - c % SPH_XBLOCK) * cell));
}

// A slab's ownership of its fluid slots at positions `pos` (slot k of n): own[k] for every slot,
// and counts[b] = the owned slots of launch block b (counts[gridDim.x] = 0, so that the
// exclusive scan of gridDim.x + 1 counts ends in the total), which sph_list_fill turns into the
// list of owned slots in slot order that sph_rates_fluid runs over, one thread per particle.
// With one thread per slot, the halo's particles idled lanes beside owned ones in the same
// warps: split along x, every row of cells ends in halo cells of about five particles, and the
// two slabs' fluid rates of the 104 M dam break took 1.7 % more than one GPU's (session 53).
// The list keeps slot order: appended one atomic per warp, in the order the warps reached it,
// the fluid rates of those slabs took 21 % longer than in slot order (session 54), as the warps
// that share an SM no longer read the same cells. Every thread of the block must call it.
__device__ __forceinline__ void sph_flag_own(const SphParams& p, unsigned k, unsigned n, const double* pos,
                                             unsigned char* own, unsigned* counts) {
    const bool mine = k < n && sph_owns(p, sph_layer(p, pos + 3 * k));
    if (k < n) own[k] = mine ? 1 : 0;
    const unsigned c = __syncthreads_count(mine);
    if (threadIdx.x == 0) counts[blockIdx.x] = c;
    if (threadIdx.x == 0 && blockIdx.x == gridDim.x - 1) counts[gridDim.x] = 0;
}

// The parity mode's sph_flag_own (float mode's runs inside sph_localize, which the parity mode
// skips).
extern "C" __global__ void sph_own_fluid(const SphParams p, const double* pos, unsigned char* own, unsigned* counts) {
    sph_flag_own(p, blockIdx.x * blockDim.x + threadIdx.x, p.n, pos, own, counts);
}

// list[offs[b] + i] = the i-th slot of block b of sph_flag_own's launch (SPH_BLOCK = 128 slots)
// whose flag is set: the flagged slots of n in slot order (offs: the exclusive scan of
// sph_flag_own's counts). One warp per such block, four slots a lane (one 4-byte load of
// flags), so a warp's scan of its lanes' counts places them without a barrier: with a thread
// per slot and the block's warps summed in shared memory it took 0.22 ms for 44 M slots on an
// H100 (session 54).
#if SPH_BLOCK != 128
#error "sph_list_fill reads sph_flag_own's blocks of SPH_BLOCK slots as one warp of 4 slots a lane"
#endif
extern "C" __global__ void sph_list_fill(unsigned n, const unsigned char* flags, const unsigned* offs,
                                         unsigned* list) {
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned lane = threadIdx.x & 31u, k0 = 4 * t;
    unsigned f = 0;  // bit j: slot k0 + j is flagged
    if (k0 + 4 <= n) {
        const unsigned v = *(const unsigned*)(flags + k0);  // slot k0 + j in byte j (little-endian)
        for (unsigned j = 0; j < 4; j++)
            if (v & (0xffu << (8 * j))) f |= 1u << j;
    } else {
        for (unsigned j = 0; j < 4; j++)
            if (k0 + j < n && flags[k0 + j]) f |= 1u << j;
    }
    const unsigned c = (unsigned)__popc(f);
    unsigned x = c;  // inclusive scan of the warp's counts
#pragma unroll
    for (unsigned off = 1; off < 32; off <<= 1) {
        const unsigned y = __shfl_up_sync(0xffffffffu, x, off);
        if (lane >= off) x += y;
    }
    if (f == 0) return;
    unsigned i = offs[t >> 5] + x - c;
    for (unsigned j = 0; j < 4; j++)
        if (f & (1u << j)) list[i++] = k0 + j;
}

// loc[k] = (position relative to its x-block's corner along x and to its cell's corner along y
// and z, density) of the p.n particles of pos, rho,
// and, when `kin` is given (the fluid), kin[k] = (velocity, Tait pressure): refreshed before
// every evaluation of the rates in float mode, so that a pair loads its neighbour in two 16-byte
// loads and takes the pressure computed once per particle (the same function of the density).
// On a slab of a group (`counts` given: the fluid) it flags the slab's owned slots too
// (sph_flag_own), from the positions it reads anyway.
extern "C" __global__ void sph_localize(const SphParams p, const double* pos, const real* rho, const real* vel,
                                        float4* loc, float4* kin, unsigned char* own, unsigned* counts) {
    unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    if (counts) sph_flag_own(p, k, p.n, pos, own, counts);
    if (k >= p.n) return;
    const double* x = pos + 3 * k;
    loc[k] = make_float4(sph_block_coord(x[0], p.origin[0], p.cell, p.dims[0]),
                         sph_local_coord(x[1], p.origin[1], p.cell, p.dims[1]),
                         sph_local_coord(x[2], p.origin[2], p.cell, p.dims[2]), (float)rho[k]);
    if (kin) {
        const real3 v = load3(vel, k);
        kin[k] = make_float4(v.x, v.y, v.z, tait_pressure(rho[k], (real)p.rho0, (real)p.b));
    }
}

// Particle i as its pair sums see it: state, pressure and sound speed, cell (and the position
// relative to the cell's corner, and along x to its x-block's corner too: float mode).
struct SphI {
    dvec3 x;
    real3 v;
    real rho, p, c;
    unsigned cx, cy, cz;
    float lx, ly, lz;
    float bx;
};

__device__ __forceinline__ SphI sph_particle(const SphParams& p, dvec3 x, real3 v, real rho) {
    SphI i;
    i.x = x;
    i.v = v;
    i.rho = rho;
    i.p = tait_pressure(rho, (real)p.rho0, (real)p.b);
    i.c = sound_speed(rho, (real)p.rho0, (real)p.c0);
    i.cx = cell_coord(x.x, p.origin[0], p.cell, p.dims[0]);
    i.cy = cell_coord(x.y, p.origin[1], p.cell, p.dims[1]);
    i.cz = cell_coord(x.z, p.origin[2], p.cell, p.dims[2]);
    i.lx = sph_local_coord(x.x, p.origin[0], p.cell, p.dims[0]);
    i.ly = sph_local_coord(x.y, p.origin[1], p.cell, p.dims[1]);
    i.lz = sph_local_coord(x.z, p.origin[2], p.cell, p.dims[2]);
    i.bx = sph_block_coord(x.x, p.origin[0], p.cell, p.dims[0]);
    return i;
}

__device__ __forceinline__ SphSums sph_sums_zero() {
    SphSums s;
    s.acc = zero3();
    s.drho = real(0);
    s.mu_max = real(0);
    return s;
}

// The case's constants in the pair code are the module's too: sph/cuda/mod.rs defines SPH_H,
// SPH_RHO0, SPH_B, SPH_C0, SPH_MASS, SPH_ALPHA, SPH_ALPHA_BOUND (fluid-boundary pairs),
// SPH_DELTA and SPH_GX, SPH_GY, SPH_GZ with the values of SphParams and SphConstants (Rust's
// shortest decimals, which parse back to the same doubles), so that they fold into the
// arithmetic instead of occupying registers.
#ifndef SPH_H
#error "the case's constants (SPH_H, SPH_RHO0, ...) must be defined"
#endif

// The interpolation constants of every pair (the case's, in `real`).
__device__ __forceinline__ DiffusionParams sph_diffusion_params(const SphParams& p) {
    DiffusionParams d;
    d.delta = (real)(SPH_DELTA);
    d.h = (real)(SPH_H);
    d.c0 = (real)(SPH_C0);
    d.rho0 = (real)(SPH_RHO0);
    d.b = (real)(SPH_B);
    d.gravity = make_real3((real)(SPH_GX), (real)(SPH_GY), (real)(SPH_GZ));
    return d;
}

// The smoothing kernel (physics::SphKernel) and the density diffusion (setup::Diffusion) of the
// pair terms are constants of the module, which solver/src/sph/cuda/mod.rs compiles for the case
// (pair_constants): as run-time branches on SphParams::kernel and ::diffusion they cost 12 % of
// the step (10 M dam break, 56.9 -> 50.9 ms).
#ifndef SPH_KERNEL
#error "SPH_KERNEL (0 Wendland C2, 1 cubic spline) must be defined"
#endif
#ifndef SPH_DIFFUSION
#error "SPH_DIFFUSION (0 none, 1 Molteni-Colagrossi, 2 Fourtakas) must be defined"
#endif
#ifndef SPH_REACH
#error "SPH_REACH (cells per kernel support, SphParams::reach) must be defined"
#endif

// The terms of pair (i, j) at distance r < 2h (r2 = r^2), added to the sums in the CPU's order.
// `kin_j`: j's sph_localize velocity and pressure (float mode, fluid neighbours), else `vel`.
template <bool FLUID_I, bool FLUID_J>
__device__ __forceinline__ void sph_pair_terms(const DiffusionParams& dparams, const SphI& i, real3 r_ij, real r2,
                                               real r, real rho_j, const real* vel, unsigned j, float4 kin_j,
                                               SphSums& s) {
    const real h = dparams.h;
    const real f = kernel_grad_factor(SPH_KERNEL, r, h);
    SphPair pair;
    pair.r_ij = r_ij;
    pair.rho_i = i.rho;
    pair.rho_j = rho_j;
    pair.p_i = i.p;
#if SPH_LOCAL
    if (FLUID_J) {
        pair.v_ij = sub3(i.v, make_real3(kin_j.x, kin_j.y, kin_j.z));
        pair.p_j = kin_j.w;
    } else {
        // A boundary neighbour moves only with its solid (`vel`: the boundary's velocities).
        pair.v_ij = sub3(i.v, SPH_MOVING ? load3(vel, j) : zero3());
        pair.p_j = tait_pressure(pair.rho_j, dparams.rho0, dparams.b);
    }
#else
    pair.v_ij = (FLUID_J || SPH_MOVING) ? sub3(i.v, load3(vel, j)) : sub3(i.v, zero3());
    pair.p_j = tait_pressure(pair.rho_j, dparams.rho0, dparams.b);
#endif
    pair.c_i = i.c;
    pair.m_j = (real)(SPH_MASS);
    // The factors that several terms share, once per pair (as cpu.rs computes them): 5 % of the
    // step at 10 M against each term forming its own (raw/session26/fast_pair/).
    const real vr = dot3(pair.v_ij, r_ij);
    const real inv = softened_inverse_square(h, r2);
    const real mu = viscous_mu(h, vr, inv);
    s.drho += continuity_pair(f, vr, pair.m_j);
    if (FLUID_I && FLUID_J) {
        s.drho += SPH_DIFFUSION == 0   ? real(0)
                  : SPH_DIFFUSION == 1 ? diffusion_molteni_colagrossi(dparams, f, pair, r2, inv)
                                     : diffusion_fourtakas(dparams, f, pair, r2, inv);
    }
    if (FLUID_I) {
        // j's sound speed serves only the viscosity of an approaching pair.
        pair.c_j = mu < real(0) ? sound_speed(pair.rho_j, dparams.rho0, dparams.c0) : real(0);
        const real pi = artificial_viscosity(FLUID_J ? (real)(SPH_ALPHA) : (real)(SPH_ALPHA_BOUND), mu, pair);
        s.acc = add3(s.acc, momentum_pair(f, pair, pi));
        s.mu_max = fmax(s.mu_max, viscous_rate(mu));
    }
}

// Pair (i, j) added to the sums when r_ij < 2h, the CPU's test (the parity mode's walk).
// `reject2`: a conservative early rejection on the squared distance (no square root for the
// candidates outside the support): every pair it rejects has r >= 2h too, so the exact test
// decides as the CPU does.
template <bool FLUID_I, bool FLUID_J>
__device__ __forceinline__ void sph_pair_sum(const DiffusionParams& dparams, const SphI& i, real3 r_ij, real rho_j,
                                             const real* vel, unsigned j, real reject2, SphSums& s) {
    const real r2 = norm23(r_ij);
    if (r2 > reject2) return;
    const real r = sqrt(r2);  // norm3(r_ij)
    if (r >= real(2) * dparams.h) return;
    sph_pair_terms<FLUID_I, FLUID_J>(dparams, i, r_ij, r2, r, rho_j, vel, j, make_float4(0.f, 0.f, 0.f, 0.f), s);
}

// Distance along one axis from a particle at `l` (relative to its own cell's lower corner) to the
// cells `d` cells away (the twin of cell_gap in solver/src/core/grid.rs, in float): 0 for its
// own. Clamped particles (outside the grid, in an edge cell) keep their true offset, so the gap
// to a nearer cell is still a lower bound.
__device__ __forceinline__ float cell_gap(float l, int d, float cell) {
    return d > 0 ? fmaxf((float)d * cell - l, 0.0f) : d < 0 ? fmaxf(l - (float)(d + 1) * cell, 0.0f) : 0.0f;
}

// 1: the parity mode's walk cuts each row to the support's chord along x (the rows are in x
// order); 0: the whole row's cells (-DSPH_CHORD=0 through PARTICLE_SHM_NVRTC_OPTIONS, to compare;
// the same sums). Float mode's walk always cuts.
#ifndef SPH_CHORD
#define SPH_CHORD 1
#endif

// A row's y and z offsets (ay, az in sph_sum_list), passed through an opaque move: under the
// 40-register bound the compiler otherwise recomputed them from the row's indices for every
// candidate, 6 of the candidate path's 27 instructions; kept, 10 M Verlet 9.58 -> 9.25 ms per
// step (session 42, raw/session42/). One rounding (fmaf), not the compiler's choice: it had
// fused the product in one rates kernel and rounded it first in the other.
__device__ __forceinline__ float sph_row_offset(float l, int d, float cell) {
    const float x = fmaf(-(float)d, cell, l);
#ifdef __CUDA_ARCH__
    // SAFETY (of the asm): a register move, no memory; volatile so that it is not repeated.
    float r;
    asm volatile("mov.b32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
#else
    return x;
#endif
}

// SPH_PTR_WALK 1 (an experiment, through PARTICLE_SHM_NVRTC_OPTIONS; the same sums): the walk
// loads its candidates through a pointer it advances instead of the list's base and the index.
#ifndef SPH_PTR_WALK
#define SPH_PTR_WALK 0
#endif

// The support with a margin for the walk's float arithmetic (SPH_WALK_MARGIN in cpu.rs is the
// CPU's): a cell farther than this from the particle holds no particle closer than 2h.
#define SPH_WALK_MARGIN 1.001f

// The pair sums of one particle over the sorted particles of the cells within SPH_REACH of its own
// ((2 SPH_REACH + 1)^3, cells of 2h / SPH_REACH; one call per list: fluid, then boundary), in the
// CPU's order: cells z, then y, then x ascending, by x, then id, within a cell. Cells whose box lies
// farther than the support (with a margin) are skipped, as Grid::neighbour_rows_near skips them:
// whole planes and rows by their gap in z and y, and each row's cells to those within the
// support's half-chord at that gap. They hold only pairs that the test r < 2h rejects, so the
// sums and their order are the same; the candidates are 8.0 instead of 12.7 supports cubed with
// cells of 2h/3 (10.5 instead of 15.6 with cells of h). `self_k`: the particle's own slot in this
// list (skipped), or ~0u. `loc`: the list's sph_localize output (float mode; `kin` for the
// fluid), `pos`: its f64 positions (parity mode).
// Float mode's walk is lean (session 40): per candidate a load, the x cut, the distance and one
// branch (the support test, the particle's own slot folded in), 27 instructions against 50 when
// it tracked each candidate's cell for its corner's offset (x-blocks instead, SPH_XBLOCK) and
// tested the support twice; 10 M Verlet 11.94 -> 9.88 ms per step (raw/session40/lean/).
template <bool FLUID_I, bool FLUID_J>
__device__ __forceinline__ void sph_sum_list(const SphParams& p, const SphI& i, const double* pos,
                                             const float4* loc, const float4* kin, const real* vel,
                                             const real* rho, const unsigned* start, unsigned self_k,
                                             SphSums& s) {
    const real two_h = real(2) * (real)(SPH_H);
    const real reject2 = two_h * two_h * real(1.0001);
    const real support2 = two_h * two_h;
    const DiffusionParams dparams = sph_diffusion_params(p);
    const int R = SPH_REACH;
    const float cellf = (float)p.cell, inv_cell = 1.0f / cellf;
    const float near = (float)(2.0 * SPH_H) * SPH_WALK_MARGIN, near2 = near * near;
    const int cx = (int)i.cx, cy = (int)i.cy, cz = (int)i.cz;
    // The first cell of i's x-block (float mode; SPH_XBLOCK is a power of two).
    const int bi = cx & ~(SPH_XBLOCK - 1);
    const int x0 = max(cx - R, 0), x1 = min(cx + R, (int)p.dims[0] - 1);
    const int y0 = max(cy - R, 0), y1 = min(cy + R, (int)p.dims[1] - 1);
    const int z0 = max(cz - R, 0), z1 = min(cz + R, (int)p.dims[2] - 1);
    for (int z = z0; z <= z1; z++) {
        const float gz = cell_gap(i.lz, z - cz, cellf);
        const float gz2 = gz * gz;
        if (gz2 >= near2) continue;
        for (int y = y0; y <= y1; y++) {
            const float gy = cell_gap(i.ly, y - cy, cellf);
            const float g2 = gy * gy + gz2;
            if (g2 >= near2) continue;
            // The cells of the row within the half-chord e of the particle along x, its own cell
            // always (a particle outside the grid has lx beyond [0, cell)).
            const float e = sqrtf(near2 - g2);
            const int xa = min(max(cx + (int)floorf((i.lx - e) * inv_cell), x0), cx);
            const int xb = max(min(cx + (int)floorf((i.lx + e) * inv_cell), x1), cx);
            const unsigned row = sph_cell_index(p, 0, (unsigned)y, (unsigned)z);
#if SPH_LOCAL
            // l_i minus the offset of j's cell corner from i's along y and z, and along x of j's
            // x-block corner from i's (for the row's first and second block): r_ij = a - l_j.
            const float ay = sph_row_offset(i.ly, y - cy, cellf);
            const float az = sph_row_offset(i.lz, z - cz, cellf);
            const unsigned e_end = start[row + xb + 1];
            unsigned j = start[row + xa];
            // The entries before jb lie in the row's first block (none when the range lies in
            // one block: then jb <= j and ax2 = ax1). Both loops take j's offset by a select.
            const int ba = xa & ~(SPH_XBLOCK - 1), bb = xb & ~(SPH_XBLOCK - 1);
            const float ax1 = i.bx + (float)(bi - ba) * cellf;
            const float ax2 = i.bx + (float)(bi - bb) * cellf;
            const unsigned jb = start[row + bb];
            // The row is in x order (CellList::by_x): the candidates before the chord's near end
            // are passed over by a loop without the pair code, and the walk stops at the first
            // past its far end (r_x < -e). Both lie farther than the support (with the margin),
            // so the sums and their order are those of the whole row.
            for (; j < e_end; j++) {
                if ((j < jb ? ax1 : ax2) - loc[j].x <= e) break;
            }
            const float4* qp = loc + j;
            for (; j < e_end; j++) {
                // A fluid candidate's velocity and pressure are loaded with its position (10 M
                // Verlet 12.42 -> 12.33 ms per step in session 39's walk); NVRTC now moves the
                // load behind the support test (raw/session40/lean/sph_module_lean.sass.gz).
                const float4 q = SPH_PTR_WALK ? *qp++ : loc[j];
                const float4 kj = FLUID_J ? kin[j] : make_float4(0.f, 0.f, 0.f, 0.f);
                const float rx = (j < jb ? ax1 : ax2) - q.x;
                if (rx < -e) break;
                const real3 r_ij = make_real3(rx, ay - q.y, az - q.z);
                const real r2 = norm23(r_ij);
                // The support test on r^2 (float mode has no CPU bits to keep), with the
                // particle's own slot: one branch per candidate.
                if (r2 >= support2 || j == self_k) continue;
                sph_pair_terms<FLUID_I, FLUID_J>(dparams, i, r_ij, r2, sqrt(r2), q.w, vel, j, kj, s);
            }
#else
            // The row's cells are consecutive in the sorted order, and in x order: one range,
            // cut to the chord as above.
            const unsigned e_end = start[row + xb + 1];
            const double ed = (double)e;
            unsigned j = start[row + xa];
            while (SPH_CHORD && j < e_end && i.x.x - pos[3 * j] > ed) j++;
            for (; j < e_end; j++) {
                if (j == self_k) continue;
                const dvec3 xj = dload3(pos + 3 * j);
                if (SPH_CHORD && i.x.x - xj.x < -ed) break;
                sph_pair_sum<FLUID_I, FLUID_J>(dparams, i, to_real3(dsub3(i.x, xj)), rho[j], vel, j, reject2, s);
            }
#endif
        }
    }
}

// ---- A slab's exchange: its records and its classification ----
// Before each evaluation of the rates, every slab keeps the particles it owned at the last one
// that lie in its layers or their halo (one layer each side) at the positions of this one, and
// sends those its neighbours need, state and half state, as one record each (SPH_REC_BYTES):
// s.pos, half.pos (f64), then s.vel, s.rho, half.vel, half.rho (real), then the id.
#define SPH_REC_BYTES (56 + 8 * sizeof(real))

// The slab's neighbours as sph_classify sees them (SphSlab in group.rs).
struct SphSlab {
    // A particle in layer x goes to the left neighbour when x <= left_hi (the last layer of its
    // halo: this slab's own_lo) and to the right one when x >= right_lo (this slab's own_hi - 1);
    // -1 and dims where there is no neighbour.
    int left_hi, right_lo;
    // The layers [reach_lo, reach_hi) a particle of this slab may reach: beyond them a slab two
    // away would need it (a step moving a particle by more than a layer: an error).
    int reach_lo, reach_hi;
    // Record capacity of each send buffer.
    unsigned cap;
    unsigned pad;
};

// Whether an owned particle at layer x stays on its slab (its layers and their halo, one layer
// each side) and whether it left the layers the slab's neighbours cover (an error).
__device__ __forceinline__ bool sph_kept_at(const SphParams& p, int x) {
    return x + 1 >= (int)p.own_lo && x < (int)p.own_hi + 1;
}

__device__ __forceinline__ bool sph_beyond_reach(const SphSlab& sl, int x) {
    return x < sl.reach_lo || x >= sl.reach_hi;
}

// The records of owned slot k, at layer x, for the neighbours that need it (their halo or
// layers): a slot of each send buffer from counts[0] (left) and counts[1] (right); one past the
// buffer's capacity is counted and not written (the host grows the buffer and classifies again).
__device__ __forceinline__ void sph_send_records(const SphSlab& sl, const SphArrays& s, const SphArrays& half,
                                                 unsigned k, int x, unsigned char* send_left,
                                                 unsigned char* send_right, unsigned* counts) {
    for (int side = 0; side < 2; side++) {
        const bool needed = side == 0 ? x <= sl.left_hi : x >= sl.right_lo;
        if (!needed) continue;
        const unsigned slot = atomicAdd(&counts[side], 1u);
        if (slot >= sl.cap) continue;
        unsigned char* r = (side == 0 ? send_left : send_right) + (size_t)slot * SPH_REC_BYTES;
        double* d = (double*)r;
        for (int a = 0; a < 3; a++) {
            d[a] = s.pos[3 * k + a];
            d[3 + a] = half.pos[3 * k + a];
        }
        real* v = (real*)(r + 48);
        for (int a = 0; a < 3; a++) {
            v[a] = s.vel[3 * k + a];
            v[4 + a] = half.vel[3 * k + a];
        }
        v[3] = s.rho[k];
        v[7] = half.rho[k];
        *(unsigned*)(r + 48 + 8 * sizeof(real)) = s.id[k];
    }
}

// sph_send_records as a call, for the rates kernel: inlined there, the records' stores took its
// spills from 152 to 304 bytes a thread, for the few particles of the layers next to a bound.
__device__ __noinline__ void sph_send_records_call(const SphSlab sl, const SphArrays s, const SphArrays half, unsigned k,
                                                   int x, unsigned char* send_left, unsigned char* send_right,
                                                   unsigned* counts) {
    sph_send_records(sl, s, half, k, x, send_left, send_right, counts);
}

// SphSends in solver/src/sph/cuda/slab.rs (56 bytes): the classification a slab's fluid rates
// kernel ends with (sph_rates_fluid_sends, float mode), for the exchange before the next
// evaluation, whose positions are the ones each particle's update has just written. The host
// zeroed `counts` and `keep` (the halo's slots are no thread's there, and are not kept).
struct SphSends {
    SphSlab sl;
    unsigned char* keep;
    unsigned char* left;
    unsigned char* right;
    unsigned* counts;
};

// ---------------------------------------------------------------------------------------------
// The integrators' updates. In float mode the fluid's runs inside sph_rates_fluid, each
// particle's as soon as its rates are summed (SphUpdate::stage): the float pair sums read the
// neighbours' sph_localize copies, never the state arrays an update writes, and a particle's own
// state is read only by its own thread. That saves a kernel's pass over the state and the rates
// (at 10 M with Verlet the update kernel took 0.49 ms of a 9.88 ms step). The parity mode's pair
// sums read the state arrays themselves, so its fluid update stays a kernel of its own after the
// rates (sph_update). The boundary's density update runs inside
// sph_rates_bound in both modes: the fluid rates, the only other reader of boundary densities,
// have finished by then (the same stream), and a boundary particle's rates read only its own.
// ---------------------------------------------------------------------------------------------

#define SPH_STAGE_NONE 0     // the rates stored in acc and drho; an update kernel follows
#define SPH_STAGE_PREDICT 1  // the symplectic predictor: half = symplectic_predict(s)
#define SPH_STAGE_CORRECT 2  // the symplectic corrector: s = symplectic_correct(s, half.rho)
#define SPH_STAGE_VERLET 3   // Verlet: s = verlet_update(s, half); half = the state at n

// SphUpdate in solver/src/sph/cuda/mod.rs (88 bytes): the update the rates kernels end with.
struct SphUpdate {
    SphArrays s;     // the state at n (the corrector and Verlet update it in place)
    SphArrays half;  // the predictor's half state; with Verlet the state one step back
    real* brho;      // the boundary densities at n (in place, as s)
    real* bhalf;     // the boundary's half densities; with Verlet those one step back
    unsigned stage;  // SPH_STAGE_*
    unsigned euler;  // Verlet: an Euler step (the base is the state itself, the span dt)
};

// Fluid slot k of a state and of the rates, as the integrator's structs.
__device__ __forceinline__ FluidState sph_load_state(const SphArrays& s, unsigned k) {
    FluidState st;
    st.x = dload3(s.pos + 3 * k);
    st.v = load3(s.vel, k);
    st.rho = s.rho[k];
    return st;
}

__device__ __forceinline__ FluidRates sph_load_rates(const real* acc, const real* drho, unsigned k) {
    FluidRates r;
    r.acc = load3(acc, k);
    r.drho = drho[k];
    return r;
}

__device__ __forceinline__ void sph_store_state(const SphArrays& s, unsigned k, const FluidState& o) {
    s.pos[3 * k] = o.x.x;
    s.pos[3 * k + 1] = o.x.y;
    s.pos[3 * k + 2] = o.x.z;
    store3(s.vel, k, o.v);
    s.rho[k] = o.rho;
}

__device__ __forceinline__ void sph_count_nonfinite(const FluidState& o, SphDiag* diag) {
    if (!(isfinite(o.x.x) && isfinite(o.x.y) && isfinite(o.x.z) && isfinite((double)o.rho)))
        atomicAdd(&diag->nonfinite, 1u);
}

// The update of fluid slot k with its rates `r` (stage PREDICT, CORRECT or VERLET).
__device__ __forceinline__ void sph_update_fluid(const SphParams& p, const SphUpdate& u, unsigned k,
                                                 const FluidRates& r, SphDiag* diag) {
    const FluidState st = sph_load_state(u.s, k);
    if (u.stage == SPH_STAGE_PREDICT) {
        sph_store_state(u.half, k, symplectic_predict(st, r, sph_gravity(p), p.dt));
    } else if (u.stage == SPH_STAGE_CORRECT) {
        const FluidState o = symplectic_correct(st, u.half.rho[k], r, sph_gravity(p), p.dt);
        sph_store_state(u.s, k, o);
        sph_count_nonfinite(o, diag);
    } else {
        const real3 vb = u.euler ? st.v : load3(u.half.vel, k);
        const real rb = u.euler ? st.rho : u.half.rho[k];
        const double span = u.euler ? p.dt : 2.0 * p.dt;
        const FluidState o = verlet_update(st, vb, rb, r, sph_gravity(p), p.dt, span);
        store3(u.half.vel, k, st.v);
        u.half.rho[k] = st.rho;
        sph_store_state(u.s, k, o);
        sph_count_nonfinite(o, diag);
    }
}

// The update of boundary slot k's density with its rate `drho` (stage PREDICT: rho + dt/2 drho,
// as cpu.rs writes it; CORRECT and VERLET never below rho0: walls do not pull fluid in). The
// host never passes SPH_STAGE_NONE to sph_rates_bound.
__device__ __forceinline__ void sph_update_bound(const SphParams& p, const SphUpdate& u, unsigned k, real drho) {
    const real r = u.brho[k];
    if (u.stage == SPH_STAGE_PREDICT) {
        u.bhalf[k] = (real)((double)r + 0.5 * p.dt * (double)drho);
    } else if (u.stage == SPH_STAGE_CORRECT) {
        const double rho = symplectic_density((double)r, (double)u.bhalf[k], (double)drho, p.dt);
        u.brho[k] = (real)fmax(rho, p.rho0);
    } else if (u.stage == SPH_STAGE_VERLET) {
        const double base = u.euler ? (double)r : (double)u.bhalf[k];
        const double span = u.euler ? p.dt : 2.0 * p.dt;
        u.bhalf[k] = r;
        u.brho[k] = (real)fmax(verlet_density(base, (double)drho, span), p.rho0);
    }
}

// Rates of the fluid particles (state `f`, sorted, cell starts `fstart`) against the fluid and the
// boundary (`bpos`, `brho`, cell starts `bstart`; `bvel` its velocities, read with SPH_MOVING
// only): acceleration and density rate, and the limits
// of the next time step into `diag`. `floc`, `fkin`, `bloc`: sph_localize of the fluid and the
// boundary (float mode; unused in the parity mode).
// On a slab, the particles of its own layers only, one thread each: `act` lists their slots in
// slot order (`*act_n` of them; sph_flag_own, sph_list_fill). Nothing is written for the halo's.
// One GPU: every slot (`act` null). SENDS (sph_rates_fluid_sends): on a slab in float mode, each
// owned particle is classified for the next exchange right after its update (`c`), which saves
// that exchange sph_classify's pass over every slot.
// The rates kernels' register bound in float mode: 12 blocks of SPH_BLOCK (128) threads per SM
// leave 40 registers a thread (48 unbounded) and 75 % occupancy instead of 62.5 %; the walk
// waits on its loads (11.5 cycles per issued instruction at 57 % achieved). 10 M Verlet:
// 12.36 -> 12.06 ms per step (raw/session39/final/; NVRTC's --maxrregcount=40 on the whole
// module gave 11.92, raw/session39/variants/); 1 M 1 % slower. With session 40's lean walk:
// 9.88 against 9.94 unbounded at 10 M, 0.928 against 0.897 at 1 M (raw/session40/lean/): kept
// for 10 M. With the update inside (session 41) unbounded took 10.20 against 9.58 ms, and 48
// registers (-DSPH_RATES_MIN_BLOCKS=10) 9.89 (session 42). The parity mode keeps the compiler's
// choice; -DSPH_RATES_UNBOUNDED drops the bound.
#ifndef SPH_BLOCK
#error "SPH_BLOCK (the launches' threads per block) must be defined"
#endif
#if defined(DEM_DOUBLE) || defined(SPH_RATES_UNBOUNDED)
#define SPH_RATES_BOUNDS
#else
#ifndef SPH_RATES_MIN_BLOCKS
#define SPH_RATES_MIN_BLOCKS 12
#endif
#define SPH_RATES_BOUNDS __launch_bounds__(SPH_BLOCK, SPH_RATES_MIN_BLOCKS)
#endif

template <bool SENDS>
__device__ __forceinline__ void sph_rates_fluid_at(const SphParams& p, const SphArrays& f, const float4* floc,
                                                   const float4* fkin, const unsigned* fstart, const double* bpos,
                                                   const float4* bloc, const real* brho, const real* bvel,
                                                   const unsigned* bstart, real* acc, real* drho, const unsigned* act,
                                                   const unsigned* act_n, SphDiag* diag, const SphUpdate& u,
                                                   const SphSends& c) {
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    double dt_f = 1.0 / 0.0, dt_cv = 1.0 / 0.0;
    const bool mine = act ? t < *act_n : t < p.n && sph_owns(p, sph_layer(p, f.pos + 3 * t));
    const unsigned k = act && mine ? act[t] : t;
    bool here = false, beyond = false;
    if (mine) {
        const SphI i = sph_particle(p, dload3(f.pos + 3 * k), load3(f.vel, k), f.rho[k]);
        SphSums s = sph_sums_zero();
        sph_sum_list<true, true>(p, i, f.pos, floc, fkin, f.vel, f.rho, fstart, k, s);
        sph_sum_list<true, false>(p, i, bpos, bloc, 0, bvel, brho, bstart, ~0u, s);
        if (u.stage == SPH_STAGE_NONE) {
            store3(acc, k, s.acc);
            drho[k] = s.drho;
        } else {
            FluidRates r;
            r.acc = s.acc;
            r.drho = s.drho;
            sph_update_fluid(p, u, k, r, diag);
        }
        const real h = (real)p.h;
        dt_f = (double)force_time_step(h, add3(s.acc, sph_gravity(p)));
        dt_cv = (double)viscous_time_step(h, i.c, s.mu_max);
        if (SENDS) {
            // The next exchange's classification, at the positions just written: the
            // predictor's half state, else the state. Its own stores, read back by the same
            // thread (from L1), so the record holds what sph_classify would read.
            const double* e = (u.stage == SPH_STAGE_PREDICT ? u.half.pos : u.s.pos) + 3 * k;
            const int x = (int)sph_layer(p, e);
            here = sph_kept_at(p, x);
            beyond = sph_beyond_reach(c.sl, x);
            c.keep[k] = here;
            if (x <= c.sl.left_hi || x >= c.sl.right_lo)
                sph_send_records_call(c.sl, u.s, u.half, k, x, c.left, c.right, c.counts);
        }
    }
    sph_atomic_min(&diag->dt_f, dt_f);
    sph_atomic_min(&diag->dt_cv, dt_cv);
    if (SENDS) {
        // One atomic per block, as sph_classify (every thread of the block reaches the
        // barrier: no thread returns early).
        const unsigned kept = __syncthreads_count(here), far = __syncthreads_count(beyond);
        if (threadIdx.x == 0) {
            if (kept) atomicAdd(&c.counts[2], kept);
            if (far) atomicAdd(&c.counts[3], far);
        }
    }
}

extern "C" __global__ void SPH_RATES_BOUNDS sph_rates_fluid(const SphParams p, const SphArrays f, const float4* floc,
                                           const float4* fkin, const unsigned* fstart, const double* bpos, const float4* bloc,
                                           const real* brho, const real* bvel, const unsigned* bstart, real* acc,
                                           real* drho, const unsigned* act, const unsigned* act_n, SphDiag* diag,
                                           const SphUpdate u) {
    const SphSends none = {};
    sph_rates_fluid_at<false>(p, f, floc, fkin, fstart, bpos, bloc, brho, bvel, bstart, acc, drho, act, act_n, diag, u,
                              none);
}

// sph_rates_fluid on a slab in float mode, classifying for the next exchange (SphSends). A kernel
// of its own so that one GPU's keeps its registers: the classification in the one kernel, off at
// run time, took its spills from 152 to 304 bytes a thread (ptxas, sm_90).
extern "C" __global__ void SPH_RATES_BOUNDS sph_rates_fluid_sends(const SphParams p, const SphArrays f, const float4* floc,
                                           const float4* fkin, const unsigned* fstart, const double* bpos, const float4* bloc,
                                           const real* brho, const real* bvel, const unsigned* bstart, real* acc,
                                           real* drho, const unsigned* act, const unsigned* act_n, SphDiag* diag,
                                           const SphUpdate u, const SphSends c) {
    sph_rates_fluid_at<true>(p, f, floc, fkin, fstart, bpos, bloc, brho, bvel, bstart, acc, drho, act, act_n, diag, u,
                             c);
}

// ---- Walls without fluid in reach (Grid::mark_within_reach in the CPU reference) ----
// Most of a tank's boundary particles have no fluid within the walk's reach, yet their walk
// visited every row of it and found each empty. Skipping those walks took 0.8 % off the 10 M
// dam break's step with Verlet and 1.2 % with the symplectic scheme (session 49, H200; the wall
// kernel's 0.53 ms had been mostly the wet walls' pairs). Before it, the fluid's
// cells are marked by blocks of SPH_REACH^3 cells (sph_fluid_blocks, from the cell starts of the
// sorted fluid), then each block by whether it or a block beside it holds fluid
// (sph_fluid_near). A particle's walk covers cells within SPH_REACH of its own, which lie in its
// block or the blocks beside it: a particle whose block is not marked finds no fluid, and skips
// the walk. Its sums, order and limits are those of the walk (no pair, mu_max 0).

// The blocks of SPH_REACH^3 cells per axis.
struct SphBlockDims {
    unsigned x, y, z;
};

__device__ __forceinline__ SphBlockDims sph_block_dims(const SphParams& p) {
    const unsigned R = SPH_REACH;
    SphBlockDims d;
    d.x = (p.dims[0] + R - 1) / R;
    d.y = (p.dims[1] + R - 1) / R;
    d.z = (p.dims[2] + R - 1) / R;
    return d;
}

// occ[b] = 1 where block b's cells hold a fluid particle of the sort, else 0 (one thread a block:
// the cell starts of its rows).
extern "C" __global__ void sph_fluid_blocks(const SphParams p, const unsigned* start, unsigned char* occ) {
    const SphBlockDims bd = sph_block_dims(p);
    const unsigned b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= bd.x * bd.y * bd.z) return;
    const unsigned R = SPH_REACH;
    const unsigned bx = b % bd.x, by = (b / bd.x) % bd.y, bz = b / (bd.x * bd.y);
    const unsigned x0 = bx * R, x1 = min(x0 + R, p.dims[0]);
    bool any = false;
    for (unsigned z = bz * R; z < min(bz * R + R, p.dims[2]) && !any; z++)
        for (unsigned y = by * R; y < min(by * R + R, p.dims[1]) && !any; y++) {
            const unsigned row = sph_cell_index(p, 0, y, z);
            any = start[row + x1] > start[row + x0];
        }
    occ[b] = any ? 1 : 0;
}

// near[b] = 1 where block b or one of the 26 beside it is marked in occ.
extern "C" __global__ void sph_fluid_near(const SphParams p, const unsigned char* occ, unsigned char* near) {
    const SphBlockDims bd = sph_block_dims(p);
    const unsigned b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= bd.x * bd.y * bd.z) return;
#ifdef SPH_FLUID_NEAR_OWN_BLOCK
    // A wrong mark on purpose (through PARTICLE_SHM_NVRTC_OPTIONS): the block's own only. The
    // GPU parity suites must then fail (bench/gpu/session49_checks.sh near).
    near[b] = occ[b];
    return;
#endif
    const int bx = b % bd.x, by = (b / bd.x) % bd.y, bz = b / (bd.x * bd.y);
    bool any = false;
    for (int z = max(bz - 1, 0); z <= min(bz + 1, (int)bd.z - 1); z++)
        for (int y = max(by - 1, 0); y <= min(by + 1, (int)bd.y - 1); y++)
            for (int x = max(bx - 1, 0); x <= min(bx + 1, (int)bd.x - 1); x++)
                any = any || occ[x + bd.x * (y + bd.y * z)];
    near[b] = any ? 1 : 0;
}

// Whether the fluid may lie within the walk's reach of a particle in cell (cx, cy, cz): its
// block's mark (`near` null: always).
__device__ __forceinline__ bool sph_fluid_in_reach(const SphParams& p, const unsigned char* near, unsigned cx,
                                                   unsigned cy, unsigned cz) {
    if (!near) return true;
    const SphBlockDims bd = sph_block_dims(p);
    const unsigned R = SPH_REACH;
    return near[cx / R + bd.x * (cy / R + bd.y * (cz / R))] != 0;
}

// Rates of the boundary particles: the density rate from their fluid neighbours only.
// Only the boundary particles the slab owns (`bown`, when given; fixed with the slab bounds).
// A list of them, as the fluid's (`act`), made this kernel slower on a slab (38.9 against 33.8
// ms over 22 steps of the 104 M dam break's first slab on an H100, session 54), not faster.
// `near`: sph_fluid_near's marks of the fluid sorted at `fstart` (null: every particle walks).
extern "C" __global__ void SPH_RATES_BOUNDS sph_rates_bound(const SphParams p, const SphArrays f, const float4* floc,
                                           const float4* fkin, const unsigned* fstart, const double* bpos, const real* brho,
                                           const real* bvel, const unsigned char* bown, const unsigned char* near,
                                           SphDiag* diag, const SphUpdate u) {
    unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    double dt_cv = 1.0 / 0.0;
    if (k < p.n && (!bown || bown[k])) {
        const SphI i = sph_particle(p, dload3(bpos + 3 * k), SPH_MOVING ? load3(bvel, k) : zero3(), brho[k]);
        SphSums s = sph_sums_zero();
        if (sph_fluid_in_reach(p, near, i.cx, i.cy, i.cz))
            sph_sum_list<false, true>(p, i, f.pos, floc, fkin, f.vel, f.rho, fstart, ~0u, s);
        sph_update_bound(p, u, k, s.drho);
        dt_cv = (double)viscous_time_step((real)p.h, i.c, s.mu_max);
    }
    sph_atomic_min(&diag->dt_cv, dt_cv);
}

extern "C" __global__ void sph_reset_diag(SphDiag* diag) {
    diag->dt_f = 0x7ff0000000000000ull;  // +inf
    diag->dt_cv = 0x7ff0000000000000ull;
    diag->nonfinite = 0;
}

// The fluid's update as a kernel of its own, after sph_rates_fluid stored the rates (the parity
// mode, SPH_STAGE_NONE there; see sph_update_fluid). Halo slots (`own` 0, when given) are skipped.
extern "C" __global__ void sph_update(const SphParams p, const SphUpdate u, const real* acc, const real* drho,
                                      const unsigned char* own, SphDiag* diag) {
    unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= p.n || (own && !own[k])) return;
    sph_update_fluid(p, u, k, sph_load_rates(acc, drho, k), diag);
}

// Publication in particle-id order (float32): fluid slot k goes to its id, boundary slot k to
// bid[k] (with its velocity `bvel` when given: moving solids); halo slots (own or bown 0, when
// given) are skipped. Any destination may be null (and may be another GPU's memory: a slab packs
// into GPU 0's frame); a null position or velocity array is not read either.
extern "C" __global__ void sph_pack(const SphParams p, const SphArrays f, unsigned nb, const double* bpos,
                                    const real* brho, const real* bvel, const unsigned* bid, const unsigned char* own,
                                    const unsigned char* bown, const SphFrame fr) {
    unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= p.n + nb) return;
    const bool fluid = k < p.n;
    const unsigned j = fluid ? k : k - p.n;
    const unsigned char* mine = fluid ? own : bown;
    if (mine && !mine[j]) return;
    const unsigned id = fluid ? f.id[j] : bid[j];
    // A frame without positions or velocities (the fixed boundary's, staged once) reads neither.
    const real3 v = !fr.vel ? zero3() : fluid ? load3(f.vel, j) : bvel ? load3(bvel, j) : zero3();
    const dvec3 x = fr.pos ? dload3(fluid ? f.pos + 3 * j : bpos + 3 * j) : dv3(0.0, 0.0, 0.0);
    sph_frame_put(p, fr, id, x, v, fluid ? f.rho[j] : brho[j]);
}

// sph_pack's values of this GPU's owned particles, compacted for another process (an MPI rank's
// part of a frame, sph/cuda/ranks.rs): entry i = atomicAdd(count, 1) gets the id of the
// particle and its values, in no particular order (the root places them by id).
extern "C" __global__ void sph_pack_part(const SphParams p, const SphArrays f, unsigned nb, const double* bpos,
                                         const real* brho, const real* bvel, const unsigned* bid, const unsigned char* own,
                                         const unsigned char* bown, unsigned* count, unsigned* ids, const SphFrame fr) {
    unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    const bool fluid = k < p.n;
    const unsigned j = fluid ? k : k - p.n;
    const bool mine = k < p.n + nb && (fluid ? own : bown)[j];
    // One atomic per warp for its owned lanes' entries: one per particle queued them all on
    // the one counter, the pattern that cost sph_classify's kept count half its time (this
    // kernel runs per frame on MPI ranks only, and was not timed).
    const unsigned m = __ballot_sync(0xffffffffu, mine);
    if (m == 0) return;
    const unsigned lane = threadIdx.x & 31u, leader = (unsigned)(__ffs(m) - 1);
    unsigned base = 0;
    if (lane == leader) base = atomicAdd(count, (unsigned)__popc(m));
    base = __shfl_sync(0xffffffffu, base, leader);
    if (!mine) return;
    const unsigned i = base + (unsigned)__popc(m & ((1u << lane) - 1u));
    ids[i] = fluid ? f.id[j] : bid[j];
    const real3 v = fluid ? load3(f.vel, j) : bvel ? load3(bvel, j) : zero3();
    sph_frame_put(p, fr, i, dload3(fluid ? f.pos + 3 * j : bpos + 3 * j), v, fluid ? f.rho[j] : brho[j]);
}

// ---- Moving solids (solver/src/sph/motion.rs) ----
// At most SPH_MAX_BODIES solids move (motion::MAX_MOVING_SOLIDS): their poses travel as one
// launch parameter (16 x 168 bytes).
#define SPH_MAX_BODIES 16

// geometry::BodyTransform (SphBody in cuda/mod.rs, 168 bytes): x_world = R x_body + T, and the
// body's velocity at x is velocity + omega x (x - center).
struct SphBody {
    double rotation[9];  // row-major
    double translation[3];
    double velocity[3];
    double omega[3];
    double center[3];
};

struct SphBodies {
    SphBody b[SPH_MAX_BODIES];
};

// The boundary arrays that a sort of the boundary reorders (SphBound in cuda/mod.rs): position,
// velocity, density, half-step density, id, position at rest and moving solid (~0u: fixed).
struct SphBound {
    double* pos;
    real* vel;
    real* rho;
    real* half;
    unsigned* id;
    double* rest;
    unsigned* body;
    // mDBC: the ghost node at rest of each slot (null with DBC).
    double* ghost;
};

// motion::body_place: x = R rest + T (BodyTransform::apply: the matrix product row by row, then
// the translation), v = velocity + omega x (x - center) (BodyTransform::wall_velocity), in the
// Rust code's order, so that the parity mode places them with the CPU's bits.
__device__ __forceinline__ void sph_body_place(const SphBody& b, dvec3 rest, dvec3* x, dvec3* v) {
    const double* m = b.rotation;
    const dvec3 r = dv3(m[0] * rest.x + m[1] * rest.y + m[2] * rest.z, m[3] * rest.x + m[4] * rest.y + m[5] * rest.z,
                        m[6] * rest.x + m[7] * rest.y + m[8] * rest.z);
    *x = dadd3(r, dload3(b.translation));
    *v = dadd3(dload3(b.velocity), dcross3(dload3(b.omega), dsub3(*x, dload3(b.center))));
}

// The p.n boundary slots of moving solids where `bodies` puts them (the others keep theirs).
extern "C" __global__ void sph_bound_place(const SphParams p, const SphBodies bodies, SphBound b) {
    unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= p.n) return;
    const unsigned body = b.body[k];
    if (body >= SPH_MAX_BODIES) return;
    dvec3 x, v;
    sph_body_place(bodies.b[body], dload3(b.rest + 3 * k), &x, &v);
    b.pos[3 * k] = x.x;
    b.pos[3 * k + 1] = x.y;
    b.pos[3 * k + 2] = x.z;
    store3(b.vel, k, to_real3(v));
}

// dst slot k takes src slot perm[k]: the boundary in (cell, x, id) order after sph_hash_count, the
// scan, sph_scatter and sph_cell_rank ran over it.
extern "C" __global__ void sph_bound_gather(const SphParams p, const SphBound src, SphBound dst,
                                            const unsigned* perm) {
    unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= p.n) return;
    const unsigned j = perm[k];
    for (int a = 0; a < 3; a++) {
        dst.pos[3 * k + a] = src.pos[3 * j + a];
        dst.vel[3 * k + a] = src.vel[3 * j + a];
        dst.rest[3 * k + a] = src.rest[3 * j + a];
    }
    dst.rho[k] = src.rho[j];
    dst.half[k] = src.half[j];
    dst.id[k] = src.id[j];
    dst.body[k] = src.body[j];
    if (src.ghost) {
        for (int a = 0; a < 3; a++) dst.ghost[3 * k + a] = src.ghost[3 * j + a];
    }
}

// ---- mDBC (solver/src/sph/mdbc.rs; SphSim::correct_boundary) ----
// Boundary slot k takes its density from the fluid (state `f`, sorted, cell starts `fstart`) around
// its ghost node (`ghost`, at rest; moved by its solid's pose in `bodies` when `body` names one),
// extrapolated to the particle (ghost_density), never below rho0; a slot without a node (NaN) or
// without fluid in reach keeps its density. The (2 SPH_REACH + 1)^3 cells around the node's cell
// are walked in the CPU's order (z, y, x; by x, then id, within a cell): the cells that
// Grid::neighbour_rows_near leaves out hold only pairs that the test r < 2h rejects, so the sums
// and their order are the CPU's. Positions in double in both modes (a boundary pass).
// `slab_rho` (a slab of several GPUs, sph/cuda/group.rs): only the slots whose node lies in this
// slab's layers, whose fluid support its layers and halo hold, are computed, into `slab_rho`
// instead of `brho`, NaN elsewhere; the owner of each particle then takes it (sph_take_ghost).
// `near`: sph_fluid_near's marks of the fluid sorted at `fstart` (null: every node walks); a
// node whose block has none finds no fluid, as a dry wall's particle (sph_rates_bound).
extern "C" __global__ void sph_ghost_density(const SphParams p, const SphArrays f, const unsigned* fstart,
                                             const double* bpos, const double* ghost, const unsigned* body,
                                             const SphBodies bodies, real* brho, real* slab_rho,
                                             const unsigned char* near) {
    unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= p.n) return;
    // A quiet NaN (slot not this slab's), in either precision.
    if (slab_rho) slab_rho[k] = (real)__longlong_as_double(0x7ff8000000000000ll);
    dvec3 g = dload3(ghost + 3 * k);
    if (g.x != g.x) return;
    if (body && body[k] < SPH_MAX_BODIES) {
        dvec3 v;
        sph_body_place(bodies.b[body[k]], dload3(ghost + 3 * k), &g, &v);
    }
    if (slab_rho) {
        const double at[3] = {g.x, g.y, g.z};
        if (!sph_owns(p, sph_layer(p, at))) return;
    }
    const int R = SPH_REACH;
    const int cx = (int)cell_coord(g.x, p.origin[0], p.cell, p.dims[0]);
    const int cy = (int)cell_coord(g.y, p.origin[1], p.cell, p.dims[1]);
    const int cz = (int)cell_coord(g.z, p.origin[2], p.cell, p.dims[2]);
    // No fluid in reach: no sums, no density (ghost_density's NaN below), as after the walk.
    if (!sph_fluid_in_reach(p, near, (unsigned)cx, (unsigned)cy, (unsigned)cz)) return;
    const int x0 = max(cx - R, 0), x1 = min(cx + R, (int)p.dims[0] - 1);
    const int y0 = max(cy - R, 0), y1 = min(cy + R, (int)p.dims[1] - 1);
    const int z0 = max(cz - R, 0), z1 = min(cz + R, (int)p.dims[2] - 1);
    const double two_h = 2.0 * p.h;
    const real h = (real)p.h;
    GhostSums s = ghost_sums_zero();
    for (int z = z0; z <= z1; z++) {
        for (int y = y0; y <= y1; y++) {
            const unsigned row = sph_cell_index(p, 0, (unsigned)y, (unsigned)z);
            const unsigned e_end = fstart[row + x1 + 1];
            for (unsigned j = fstart[row + x0]; j < e_end; j++) {
                const dvec3 dr = dsub3(g, dload3(f.pos + 3 * j));
                const double r = sqrt(dr.x * dr.x + dr.y * dr.y + dr.z * dr.z);
                if (r >= two_h) continue;
                const real w = kernel_value(SPH_KERNEL, (real)r, h);
                const real fr = kernel_grad_factor(SPH_KERNEL, (real)r, h);
                ghost_pair(s, w, fr, to_real3(dr), (real)p.mass, f.rho[j]);
            }
        }
    }
    const double rho = ghost_density(s, dsub3(dload3(bpos + 3 * k), g));
    if (rho == rho) (slab_rho ? slab_rho : brho)[k] = (real)fmax(rho, p.rho0);
}

// mDBC on several GPUs: boundary slot k takes the density another slab (or this one) computed for
// it from the fluid around its node (`src`, that slab's sph_ghost_density output; NaN: not its).
extern "C" __global__ void sph_take_ghost(unsigned n, const real* src, real* brho) {
    unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n) return;
    const real v = src[k];
    if (v == v) brho[k] = v;
}

// ---- Several GPUs (solver/src/sph/group.rs) ----
// The standalone classification: before an evaluation that no rates kernel classified (the
// first, one after a move of the bounds or a grown send buffer, and every one in the parity
// mode). `eval_pos`: the positions of the evaluation; `own`: the slots owned at the last one.
// counts: [0] sent left, [1] sent right, [2] kept, [3] beyond reach.
extern "C" __global__ void sph_classify(const SphParams p, const SphSlab sl, const SphArrays s, const SphArrays half,
                                        const double* eval_pos, const unsigned char* own, unsigned char* keep,
                                        unsigned char* send_left, unsigned char* send_right, unsigned* counts) {
    unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    const bool mine = k < p.n && own[k];
    if (k < p.n && !mine) keep[k] = 0;
    const int x = mine ? (int)sph_layer(p, eval_pos + 3 * k) : 0;
    const bool beyond = mine && sph_beyond_reach(sl, x);
    const bool here = mine && sph_kept_at(p, x);
    if (mine) keep[k] = here;
    // The kept and beyond counts: one atomic per block. One per kept particle, all on one
    // address, took this kernel 1.68 ms for a slab of 44 M particles on an H100; with one per
    // block, 0.78 ms (session 53).
    const unsigned kept = __syncthreads_count(here), far = __syncthreads_count(beyond);
    if (threadIdx.x == 0) {
        if (kept) atomicAdd(&counts[2], kept);
        if (far) atomicAdd(&counts[3], far);
    }
    if (!mine) return;
    sph_send_records(sl, s, half, k, x, send_left, send_right, counts);
}

// Received records into slots base.. of the state and the half state (kept: every record was
// sent because this slab needs it).
extern "C" __global__ void sph_unpack(const SphParams p, const unsigned char* recv, unsigned base, SphArrays s,
                                      SphArrays half, unsigned char* keep) {
    unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= p.n) return;
    const unsigned char* r = recv + (size_t)k * SPH_REC_BYTES;
    const unsigned j = base + k;
    const double* d = (const double*)r;
    const real* v = (const real*)(r + 48);
    for (int a = 0; a < 3; a++) {
        s.pos[3 * j + a] = d[a];
        half.pos[3 * j + a] = d[3 + a];
        s.vel[3 * j + a] = v[a];
        half.vel[3 * j + a] = v[4 + a];
    }
    s.rho[j] = v[3];
    half.rho[j] = v[7];
    s.id[j] = *(const unsigned*)(r + 48 + 8 * sizeof(real));
    keep[j] = 1;
}

// Every GPU of a group holds every boundary particle in one (cell, x, id) order, so a slot names
// the same particle on all of them. bown[k]: the slot's layer is one of this slab's.
extern "C" __global__ void sph_own_bound(const SphParams p, unsigned nb, const double* bpos, unsigned char* bown) {
    unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k < nb) bown[k] = sph_owns(p, sph_layer(p, bpos + 3 * k)) ? 1 : 0;
}

// dst[k] = src[k] for the boundary slots whose layer is in [lo, hi): densities of layers that
// another GPU owns (its halo layer each exchange, the layers it gives up at a move), read from
// that GPU's array over peer access.
extern "C" __global__ void sph_take(const SphParams p, unsigned nb, const double* bpos, unsigned lo, unsigned hi,
                                    const real* src, real* dst) {
    unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= nb) return;
    const unsigned l = sph_layer(p, bpos + 3 * k);
    if (l >= lo && l < hi) dst[k] = src[k];
}

// Moving solids on a group: dst[k] = src[k] for the moving boundary slots (body[k] names a solid)
// that the slab whose flags are src_own owned at its last evaluation: every slab then holds the
// density of every moving particle, whichever slab integrated it and whichever owns it next.
extern "C" __global__ void sph_take_moving(const SphParams p, unsigned nb, const unsigned* body,
                                           const unsigned char* src_own, const real* src, real* dst) {
    unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k < nb && body[k] < SPH_MAX_BODIES && src_own[k]) dst[k] = src[k];
}

// Moving solids on MPI ranks: (slot, density) of the boundary slots whose layer is in [lo, hi),
// only the moving ones this slab owns with `moving_own` (body and bown given), compacted through
// `count` (in no fixed order: the receiver writes them by slot, sph_put_bound).
extern "C" __global__ void sph_pick_bound(const SphParams p, unsigned nb, const double* bpos, const unsigned* body,
                                          const unsigned char* bown, unsigned lo, unsigned hi, unsigned moving_own,
                                          const real* src, unsigned* count, unsigned* slots, real* vals) {
    unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= nb) return;
    const unsigned l = sph_layer(p, bpos + 3 * k);
    if (l < lo || l >= hi) return;
    if (moving_own && !(body[k] < SPH_MAX_BODIES && bown[k])) return;
    const unsigned i = atomicAdd(count, 1u);
    slots[i] = k;
    vals[i] = src[k];
}

// dst[slots[i]] = vals[i] for n entries (what sph_pick_bound picked on another rank).
extern "C" __global__ void sph_put_bound(unsigned n, const unsigned* slots, const real* vals, real* dst) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[slots[i]] = vals[i];
}

// The layer of every boundary slot (an MPI rank lists the slots of each layer once: they never
// move).
extern "C" __global__ void sph_bound_layer(const SphParams p, unsigned nb, const double* bpos, unsigned* layer) {
    unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k < nb) layer[k] = sph_layer(p, bpos + 3 * k);
}

// dst[k] = src[idx[k]] for n entries of `words` 32-bit words each (boundary densities of chosen
// slots, for another process).
extern "C" __global__ void sph_pick_words(unsigned n, unsigned words, const unsigned* idx, const unsigned* src,
                                          unsigned* dst) {
    unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n * words) return;
    dst[k] = src[idx[k / words] * words + k % words];
}

// dst[idx[k]] = src[k]: the inverse of sph_pick_words.
extern "C" __global__ void sph_put_words(unsigned n, unsigned words, const unsigned* idx, const unsigned* src,
                                         unsigned* dst) {
    unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n * words) return;
    dst[idx[k / words] * words + k % words] = src[k];
}

// Owned fluid particles per layer along the split axis (the balancing's per-layer counts).
extern "C" __global__ void sph_layer_count(const SphParams p, const double* pos, const unsigned char* own,
                                           unsigned* layers) {
    unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    const bool mine = k < p.n && own[k];
    count_in_layer(layers, mine ? sph_layer(p, pos + 3 * k) : ~0u);
}
