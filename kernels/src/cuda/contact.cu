// Collide + integrate, fused: one thread per particle (slot k of the sorted state `in`) gathers
// all its contacts (particle-particle in neighbour-cell order z, y, x ascending and (cell, id)
// order inside a cell, exactly the CPU reference's order; then the box walls in wall order; then
// the mesh triangles of its cell's bins in ascending triangle order), sums them in registers (no
// float atomics: the sum order is fixed, results are reproducible run to run), and integrates into
// slot k of `out`: symplectic Euler, or velocity Verlet's closing half kick (the opening half
// kick and drift are dem_kick_drift, before the neighbour search), or not at all.
//
// Mirrors the CPU worker's forces + integrate stages (solver/src/dem/cpu). Each particle keeps its
// own contact history (tangential springs keyed by partner id), so a pair's spring is carried
// twice, once by each side, and nothing is shared between threads. The per-step reorder does not
// move the history: in.row[k] is the row of the particle in slot k (moved with it by dem_gather).
// Two layouts (DEM_HIST_IN_PLACE, chosen by the host from the memory the case needs):
//   0  two history buffers: thread k reads its row of the last step's buffer and writes row k
//      of the other (reads nearly coalesced, writes fully); the host swaps them after the
//      collide. 2 x hist_cap entries per particle.
//   1  one buffer: each particle owns its row for as long as it lives (the rows of all slots
//      are a permutation, moved with the slots, so a slot that receives a particle finds a
//      free row in it). Thread k copies its row's old entries into shared memory (hist_stage),
//      looks them up there and writes the new ones over the row in place: only thread k
//      touches the row. Half the history memory; slower (the stage lowers occupancy, rows
//      drift from slot order as particles mix).
//
// DEM_SINGLE_COPY 1 (one GPU, symplectic Euler): the state has one copy, not two. The collide
// reads it and stores each slot's force and torque (out.force, out.torque: the force buffer);
// dem_integrate then moves every slot in place with the same arithmetic (integrate_slot), and a
// search reorders the state one array at a time through the force buffer (dem_gather_words,
// grid.cu). 56 B of state less per frictional particle for 24 B of forces; the same bits.
//
// Compile-time switches (set by the host from the case, one module per combination):
//   DEM_MODEL     0 linear spring-dashpot, 1 Hertz-Mindlin (physics::ContactModel)
//   DEM_FRICTION  1: tangential springs with history and rolling resistance
//   DEM_ROTATION  1: angular velocities are integrated (implied by friction)
//   DEM_MESHES    1: particle-triangle contacts (cases with meshes)
//   DEM_ONE_SPECIES 1: the case has one species (species_of returns 0 without a load)
//
// Precision: positions are double (a 1e-9 m step must not vanish against a coordinate of 2 m:
// float's spacing at 1 m is 6e-8 m); the centre distance is formed in double and rounded once;
// everything relative (normal, overlap, velocities, forces, springs) is `real`.

#ifndef DEM_MODEL
#define DEM_MODEL 0
#endif
#ifndef DEM_FRICTION
#define DEM_FRICTION 0
#endif
#ifndef DEM_ROTATION
#define DEM_ROTATION DEM_FRICTION
#endif
#ifndef DEM_MESHES
#define DEM_MESHES 1
#endif
// Blocks of 128 threads the collide must fit per SM (__launch_bounds__): bounds its registers.
#ifndef DEM_COLLIDE_MIN_BLOCKS
#define DEM_COLLIDE_MIN_BLOCKS 1
#endif
// Threads per block of dem_collide: set by the host from kernels::COLLIDE_THREADS (the launch
// size and the per-thread buffer's shape must agree).
#ifndef COLLIDE_BLOCK
#define COLLIDE_BLOCK 128
#endif
// DEM_COMPACT 1: particle contacts are found first and evaluated from a per-thread buffer of
// DEM_CANDIDATES slots (see dem_collide); 0: evaluated as found.
#ifndef DEM_COMPACT
#define DEM_COMPACT 1
#endif
#ifndef DEM_CANDIDATES
#define DEM_CANDIDATES 16
#endif
#ifndef DEM_HIST_IN_PLACE
#define DEM_HIST_IN_PLACE 0
#endif
#ifndef DEM_SINGLE_COPY
#define DEM_SINGLE_COPY 0
#endif
// DEM_HIST_PAIRS 1 (with DEM_HIST_IN_PLACE): each particle pair's spring kept once, in the row
// of the particle that owns the pair (owns_pair). dem_springs walks the contacts first and
// updates only the owned springs (and the walls' and meshes'), in place; dem_collide then reads
// every contact's new spring, the other side's negated from its owner's row, and takes the
// force from it (contact_force_from_spring). The pair's mirror is exact (physics.rs), so the
// bits are those of the other layouts.
#ifndef DEM_HIST_PAIRS
#define DEM_HIST_PAIRS 0
#endif
// DEM_HIST_SPILL 1 (with DEM_HIST_PAIRS): a row holds hist_cap entries inline, and a row that
// needs more keeps its first hist_cap - 1 there and the rest, up to DemParams::spill_width, in
// a spill row whose index its entry hist_cap - 1 holds as partner (the count word tells: more
// than hist_cap entries). Spill rows are taken afresh every step: dem_springs reads a row's old
// spill row in spill_cur and writes the new one into spill_next, from a counter the host zeroes
// before the launch; the two buffers alternate (dem/cuda/buffers.rs, Spill). Rows keep the
// entries' order, so everything that reads them sees the entries of the inline layout: the same
// bits. A row that finds no spill row left counts its extra contacts as overflow (an error, as a
// full row is without spill rows); the host grows the buffers before that, from the most rows
// any step asked for (spill_ctl[2]), which above spill_rows tells it they ran out.
#ifndef DEM_HIST_SPILL
#define DEM_HIST_SPILL 0
#endif
// DEM_OWNER_KEYS 1 (with DEM_HIST_SPILL and DEM_SINGLE_COPY, one GPU, slot-major rows): a pair's
// spring is kept by the particle owns_pair_keyed names from the two owner keys (ParticleArrays::
// key: each particle's coordinate along state::OWNER_DIRECTION at the last search), not from
// the ids: about half of every particle's contacts whatever its id (6 of 12 in a close packing,
// where shuffled ids give 1 to 12). The rows move with the slots (every slot's row is its slot:
// ParticleArrays::row is null). A search recomputes the keys (dem_owner_keys), which hands some
// pairs to their other particle; dem_adopt, between the search and dem_springs, copies each such
// spring from the row of the particle that kept it into an adoption row of the one that keeps
// it now (taken from spill_next's counter; DemParams::adopt), where dem_springs finds it. The
// pair's mirror is exact, so the bits are those of the other layouts.
#ifndef DEM_OWNER_KEYS
#define DEM_OWNER_KEYS 0
#endif
#if DEM_OWNER_KEYS && !(DEM_FRICTION && DEM_HIST_PAIRS && DEM_HIST_SPILL)
#error "owner keys need pairs-once rows with spill rows"
#endif
// A spill link that found no spill row left (Accum::link_new).
#define DEM_SPILL_FULL 0xFFFFFFFEu
// A pairs-once row's count word: the entry count in its low DEM_ROW_COUNT_BITS bits, and above
// them whether entry c's contact slid this step (bit DEM_ROW_COUNT_BITS + c), which the force of
// a stored spring depends on (physics::spring_force). Rows hold at most DEM_ROW_SLIDE_BITS
// entries (kernels::PAIRS_ROW_COUNT_BITS, PAIRS_MAX_ROW).
#define DEM_ROW_COUNT_BITS 6
#define DEM_ROW_COUNT_MASK 63u
#define DEM_ROW_SLIDE_BITS 26u
// DEM_AHEAD_ALWAYS 1: find_history reloads its entry ahead after every contact (see there);
// 0: only when the cursor moved (for comparisons, PARTICLE_SHM_NVRTC_OPTIONS).
#ifndef DEM_AHEAD_ALWAYS
#define DEM_AHEAD_ALWAYS 1
#endif
// DEM_STREAM_HINTS 1 (set by the host from the case's size, kernels::STREAM_HINTS_FROM): the
// contact history (f32 builds) and the Verlet list, read once and written once per step, are
// loaded and stored evict-first (__ldcs/__stcs), so that L2 keeps the partners' state, which
// about twelve neighbours read each step; 0: plain accesses. Cache hints only: the same values
// either way.
#ifndef DEM_STREAM_HINTS
#define DEM_STREAM_HINTS 0
#endif
// DEM_PASSES 1 (kernels::ModuleConfig::passes): dem_collide_interior and dem_collide_boundary
// are compiled too (a GPU of a group or rank overlapping its ghost refresh); 0: dem_collide
// alone (one GPU).
#ifndef DEM_PASSES
#define DEM_PASSES 0
#endif
// DEM_ONE_SPECIES 1: the case has one species (every species index is 0; the state has no
// species array).
#ifndef DEM_ONE_SPECIES
#define DEM_ONE_SPECIES 0
#endif
// How the collide walks a Verlet list (kernels::LIST_*): 0 buffered, 1 unbuffered, 2 chosen
// per warp (see dem_collide).
#ifndef DEM_LIST_WALK
#define DEM_LIST_WALK 2
#endif
// DEM_LIST_WALK 2: unbuffered where each of the warp's particles had at least this share [%] of
// its list's length in contacts last step.
#ifndef DEM_LIST_VOTE_PCT
#define DEM_LIST_VOTE_PCT 75u
#endif

// The species of slot j: with one species (DEM_ONE_SPECIES) 0 without a load, and a partner's
// properties are read from the table's first row, an address known before the partner is (the
// species load and the table load after it were two waits of each contact).
__device__ __forceinline__ unsigned species_of(const ParticleArrays& a, unsigned j) {
#if DEM_ONE_SPECIES
    (void)a;
    (void)j;
    return 0u;
#else
    return a.species ? a.species[j] : 0u;
#endif
}

// Whether the particle of `acc` keeps the spring of its pair with the particle in slot j (id
// `partner`) in pairs-once rows: by the owner keys (DEM_OWNER_KEYS) or the ids.
template <class Acc>
__device__ __forceinline__ bool owns_contact(const ParticleArrays& in, const Acc& acc, unsigned j, unsigned partner) {
#if DEM_OWNER_KEYS
    return owns_pair_keyed(acc.self_key, acc.self_id, in.key[j], partner);
#else
    (void)in;
    (void)j;
    return owns_pair(acc.self_id, partner);
#endif
}

// Lever arm from the centre to the contact point: the radius (cpu::contacts `lever`).
__device__ __forceinline__ real contact_arm(real r, real /*delta*/) { return r; }

// Accumulated force and torque on one particle, and its new contact history.
struct Accum {
    real3 f;
    real3 t;
    unsigned contacts;
    unsigned hist_out;
    unsigned overflow;
    unsigned long long used;  // old history entries taken by this step's contacts
    unsigned cursor;          // old entry after the last one taken: where the next is expected
    unsigned old_count;       // entries of the old history row
#if DEM_FRICTION
    HistEntry ahead;          // old entry `cursor` (meaningful below old_count), loaded ahead
                              // by find_history
#endif
    unsigned self_id;         // the particle's id (the pairs-once history's owner test)
    unsigned self_key;        // its owner key (DEM_OWNER_KEYS)
    bool hit;                 // find_history found the entry of its last call's partner
    unsigned slid;            // dem_springs: bit c, new entry c's contact slid
    unsigned row_word;        // pairs once, after dem_springs: the row's count word (slide flags)
#if DEM_HIST_SPILL
    unsigned link_old;        // the row's spill row (in spill_cur for dem_springs, else spill_next),
                              // or DEM_PARTNER_NONE
    unsigned link_new;        // dem_springs: the spill row it took this step, DEM_PARTNER_NONE
                              // (none yet) or DEM_SPILL_FULL
#endif
    static constexpr bool ENERGY = false;
    static constexpr bool SPRINGS = false;
    static constexpr bool COUNT = false;
};

// What dem_springs accumulates: the particle's new history row (its owned springs), no forces.
struct SpringAccum : Accum {
    static constexpr bool SPRINGS = true;
};

// What dem_spill_count accumulates: how many entries dem_springs would store in the particle's
// row (hist_out), nothing stored.
struct CountAccum : SpringAccum {
    static constexpr bool COUNT = true;
};

// What dem_energies accumulates per particle: the same contacts, their elastic energy [J] (a
// particle pair half on each side) instead of forces; nothing is written back.
struct EnergyAccum : Accum {
    double elastic;
    static constexpr bool ENERGY = true;
};

// Entry j of a Verlet list array (DEM_STREAM_HINTS).
__device__ __forceinline__ unsigned list_entry(const unsigned* a, size_t j) {
#if DEM_STREAM_HINTS
    return __ldcs(a + j);
#else
    return a[j];
#endif
}

#if DEM_FRICTION
// A history entry loaded and stored as one 16-byte vector, evict-first (DEM_STREAM_HINTS, f32).
__device__ __forceinline__ HistEntry load_entry(const HistEntry* a) {
#if DEM_STREAM_HINTS && !defined(DEM_DOUBLE)
    const float4 v = __ldcs(reinterpret_cast<const float4*>(a));
    HistEntry e;
    e.x = v.x;
    e.y = v.y;
    e.z = v.z;
    e.partner = __float_as_uint(v.w);
    return e;
#else
    return *a;
#endif
}
__device__ __forceinline__ void store_entry(HistEntry* a, const HistEntry& e) {
#if DEM_STREAM_HINTS && !defined(DEM_DOUBLE)
    __stcs(reinterpret_cast<float4*>(a), make_float4(e.x, e.y, e.z, __uint_as_float(e.partner)));
#else
    *a = e;
#endif
}

// Index of history entry c of row r (slot-major or row-major, DemParams::hist_sc/sr).
__device__ __forceinline__ unsigned hist_at(const DemParams& p, unsigned c, unsigned r) {
    return c * p.hist_sc + r * p.hist_sr;
}

#if DEM_HIST_IN_PLACE
// The calling thread's copy of its old history row: entry c of thread t of the block at
// [c * blockDim.x + t] of the dynamic shared memory (hist_cap * sizeof(HistEntry) * blockDim.x
// bytes, set by the host at launch: collide_shared_bytes in dem/cuda/mod.rs).
extern __shared__ __align__(16) unsigned char dem_dyn_shared[];
__device__ __forceinline__ HistEntry& hist_stage(unsigned c) {
    return reinterpret_cast<HistEntry*>(dem_dyn_shared)[c * blockDim.x + threadIdx.x];
}
#endif

// Copies the old entries 0..m of row `row` into the thread's stage (in place: before the first
// new entry is written over them).
__device__ __forceinline__ void stage_history(const DemParams& p, const ParticleArrays& in, unsigned row, unsigned m) {
#if DEM_HIST_IN_PLACE
    for (unsigned c = 0; c < m; c++) hist_stage(c) = load_entry(in.hist + hist_at(p, c, row));
#else
    (void)p;
    (void)in;
    (void)row;
    (void)m;
#endif
}

// Old entry c of the particle's row: from the stage (in place) or the last step's buffer.
__device__ __forceinline__ HistEntry old_entry(const DemParams& p, const ParticleArrays& in, unsigned row, unsigned c) {
#if DEM_HIST_IN_PLACE
    (void)p;
    (void)in;
    (void)row;
    return hist_stage(c);
#else
    return load_entry(in.hist + hist_at(p, c, row));
#endif
}

#if DEM_HIST_SPILL
// Where entry c of row `row` lies when its spill row is `link` (DEM_PARTNER_NONE: none): inline
// below hist_cap - 1, from there on in the spill row (of `spill`).
__device__ __forceinline__ const HistEntry* row_entry(const DemParams& p, const HistEntry* hist, const HistEntry* spill,
                                                      unsigned row, unsigned c, unsigned link) {
    if (link != DEM_PARTNER_NONE && c + 1u >= p.hist_cap)
        return spill + (size_t)link * p.spill_width + (c + 1u - p.hist_cap);
    return hist + hist_at(p, c, row);
}

// The spill row of row `row` with `m` entries (its entry hist_cap - 1's partner), or none.
__device__ __forceinline__ unsigned row_link(const DemParams& p, const HistEntry* hist, unsigned row, unsigned m) {
    return m > p.hist_cap ? load_entry(hist + hist_at(p, p.hist_cap - 1u, row)).partner : DEM_PARTNER_NONE;
}
#endif

// Old entry c of the particle's row as dem_springs reads it: old_entry, or with spill rows from
// the old spill row beyond hist_cap - 1 (a c past the row's end reads an entry never counted).
__device__ __forceinline__ HistEntry old_row_entry(const DemParams& p, const ParticleArrays& in, unsigned row, unsigned c,
                                                   const Accum& acc) {
#if DEM_HIST_SPILL
    if (acc.link_old != DEM_PARTNER_NONE && c + 1u >= p.hist_cap)
        return load_entry(row_entry(p, in.hist, p.spill_cur, row, c, acc.link_old));
    return old_entry(p, in, row, min(c, p.hist_cap - 1u));
#else
    (void)acc;
    return old_entry(p, in, row, c);
#endif
}

// Entries a row can hold: hist_cap, or with spill rows hist_cap - 1 inline and a spill row.
__device__ __forceinline__ unsigned row_capacity(const DemParams& p) {
#if DEM_HIST_SPILL
    return p.spill_rows ? p.hist_cap - 1u + p.spill_width : p.hist_cap;
#else
    return p.hist_cap;
#endif
}

// stages::find_history: the entry of the particle's old history with the same partner, not yet
// taken by an earlier contact of this step; for a mesh contact (partner keys [mesh_lo, mesh_hi)
// are the triangles of its mesh) that moved to a neighbouring triangle, the first untaken entry
// of the same mesh. Zero spring if none. Entries from 64 on are never marked taken (only mesh
// cases need the mark; CudaSim::new limits their history to 64 entries).
// The entry after the last one taken (the cursor) is tried first: contacts are visited in the
// order the history was written in, so it is almost always the one. Partners are unique within
// a history, so this finds the entry the scan finds. That entry is loaded ahead, at the end of
// the contact before (acc.ahead): with two buffers its load from memory then overlaps the next
// partner's loads instead of following them (the two were the dense collide's longest waits).
// The load is unconditional and has one site, so that it lands in acc.ahead's own registers (a
// conditional one was merged by a register move that waited for it); past the row's end it
// reads an entry of the row (in place: of its stage, never written this step) that the test
// c0 < m never lets count.
__device__ __forceinline__ ContactState find_history(const DemParams& p, const ParticleArrays& in, unsigned row,
                                                     unsigned partner, unsigned mesh_lo, unsigned mesh_hi,
                                                     Accum& acc) {
    ContactState s;
    s.xi = zero3();
    const unsigned m = acc.old_count;
    const unsigned c0 = acc.cursor;
    unsigned found = DEM_PARTNER_NONE;
    if (c0 < m && (c0 >= 64 || !((acc.used >> c0) & 1ull)) && acc.ahead.partner == partner) {
        found = c0;
        s.xi = make_real3(acc.ahead.x, acc.ahead.y, acc.ahead.z);
    } else {
        for (unsigned c = 0; c < m; c++) {
            const bool free_ = c >= 64 || !((acc.used >> c) & 1ull);
            if (free_ && old_row_entry(p, in, row, c, acc).partner == partner) {
                found = c;
                break;
            }
        }
        if (found == DEM_PARTNER_NONE && mesh_lo < mesh_hi) {
            for (unsigned c = 0; c < m; c++) {
                const bool free_ = c >= 64 || !((acc.used >> c) & 1ull);
                const unsigned q = old_row_entry(p, in, row, c, acc).partner;
                if (free_ && q >= mesh_lo && q < mesh_hi) {
                    found = c;
                    break;
                }
            }
        }
        if (found != DEM_PARTNER_NONE) {
            const HistEntry e = old_row_entry(p, in, row, found, acc);
            s.xi = make_real3(e.x, e.y, e.z);
        }
    }
    acc.hit = found != DEM_PARTNER_NONE;
    if (found != DEM_PARTNER_NONE) {
        if (found < 64) acc.used |= 1ull << found;
        acc.cursor = found + 1;
    }
#if DEM_AHEAD_ALWAYS
    acc.ahead = old_row_entry(p, in, row, min(acc.cursor, row_capacity(p) - 1u), acc);
#else
    if (found != DEM_PARTNER_NONE) acc.ahead = old_row_entry(p, in, row, min(acc.cursor, row_capacity(p) - 1u), acc);
#endif
    return s;
}

// Writes the next new entry: row `row` (in place; the old entries are in the stage) or row
// `k` of the other buffer.
__device__ __forceinline__ void store_history(const DemParams& p, ParticleArrays& out, unsigned row, unsigned k,
                                              Accum& acc, unsigned partner, const ContactState& s) {
#if DEM_HIST_IN_PLACE
    (void)k;
    const unsigned dst = row;
#else
    (void)row;
    const unsigned dst = k;
#endif
    HistEntry e;
    e.x = s.xi.x;
    e.y = s.xi.y;
    e.z = s.xi.z;
    e.partner = partner;
#ifdef DEM_DOUBLE
    e.pad = 0;
#endif
#if DEM_HIST_SPILL
    const unsigned c = acc.hist_out;
    if (p.spill_rows && c >= p.hist_cap) {
        // Entries from hist_cap - 1 on go to a spill row, taken at the first of them beyond
        // hist_cap: entry hist_cap - 1 moves there and its inline place takes the link.
        if (acc.link_new == DEM_PARTNER_NONE) {
            unsigned link = atomicAdd(p.spill_ctl + p.spill_sel, 1u);
            // The rows asked for, taken or not: more than spill_rows tells the host they ran out.
            atomicMax(p.spill_ctl + 2, link + 1u);
            if (link < p.spill_rows) {
                HistEntry* at = out.hist + hist_at(p, p.hist_cap - 1u, dst);
                store_entry(p.spill_next + (size_t)link * p.spill_width, load_entry(at));
                HistEntry l = {};
                l.partner = link;
                store_entry(at, l);
            } else {
                link = DEM_SPILL_FULL;
            }
            acc.link_new = link;
        }
        const unsigned x = c + 1u - p.hist_cap;
        if (acc.link_new == DEM_SPILL_FULL || x >= p.spill_width) {
            acc.overflow++;  // the contact still acts; its spring is not kept (an error)
            return;
        }
        store_entry(p.spill_next + (size_t)acc.link_new * p.spill_width + x, e);
        acc.hist_out++;
        return;
    }
#endif
    if (acc.hist_out >= p.hist_cap) {
        acc.overflow++;  // the contact still acts; its spring is not kept (reported as an error)
        return;
    }
    store_entry(out.hist + hist_at(p, acc.hist_out, dst), e);
    acc.hist_out++;
}

#if DEM_OWNER_KEYS
// The spring slot k adopted with `partner` at this step's search (dem_adopt; DemParams::adopt),
// zero if none (a new contact).
__device__ __forceinline__ real3 adopted_spring(const DemParams& p, unsigned k, unsigned partner) {
    const unsigned link = p.adopt[k];
    if (link != DEM_PARTNER_NONE) {
        const HistEntry* a = p.spill_next + (size_t)link * p.spill_width;
        for (unsigned c = 0; c < p.spill_width; c++) {
            const HistEntry e = load_entry(a + c);
            if (e.partner == DEM_PARTNER_NONE) break;
            if (e.partner == partner) return make_real3(e.x, e.y, e.z);
        }
    }
    return zero3();
}
#endif

#if DEM_HIST_PAIRS
// A spring dem_springs stored, and whether its contact slid.
struct StoredSpring {
    real3 xi;
    bool sliding;
};

// The spring dem_springs stored this step for the contact of particle acc.self_id (history row
// `row`, count word acc.row_word) with `partner` (for a particle partner, `j` is its slot): its
// own entry, or for a pair the other particle owns the owner's entry for it, negated. Zero and
// sticking if none (a new contact's spring is stored even when zero, so only an overflowed row
// lacks one). The rows are read only: every thread's springs are written before this kernel.
// dem_springs wrote the own entries in the order this walk meets their contacts, so the one
// after the last found (acc.cursor) is tried first.
__device__ __forceinline__ StoredSpring stored_spring(const DemParams& p, const ParticleArrays& in, unsigned row,
                                                      unsigned partner, unsigned j, Accum& acc) {
    StoredSpring s;
    s.xi = zero3();
    s.sliding = false;
    const unsigned self = acc.self_id;
    if (j != DEM_PARTNER_NONE && !owns_contact(in, acc, j, partner)) {
        const unsigned r = in.row ? in.row[j] : j;
        const unsigned w = in.hist_count[r];
        const unsigned m = w & DEM_ROW_COUNT_MASK;
#if DEM_HIST_SPILL
        const unsigned link = row_link(p, in.hist, r, m);
#endif
        for (unsigned c = 0; c < m; c++) {
#if DEM_HIST_SPILL
            const HistEntry e = load_entry(row_entry(p, in.hist, p.spill_cur, r, c, link));
#else
            const HistEntry e = load_entry(in.hist + hist_at(p, c, r));
#endif
            if (e.partner == self) {
                s.xi = make_real3(-e.x, -e.y, -e.z);
                s.sliding = (w >> (DEM_ROW_COUNT_BITS + c)) & 1u;
                break;
            }
        }
        return s;
    }
    const unsigned m = acc.old_count;
    unsigned c = acc.cursor;
    HistEntry e;
    bool found = false;
#if DEM_HIST_SPILL
    const HistEntry* spill = p.spill_cur;
    const unsigned link = acc.link_old;
#define DEM_OWN_ENTRY(c) row_entry(p, in.hist, spill, row, (c), link)
#else
#define DEM_OWN_ENTRY(c) (in.hist + hist_at(p, (c), row))
#endif
    if (c < m) {
        e = load_entry(DEM_OWN_ENTRY(c));
        found = e.partner == partner;
    }
    for (unsigned q = 0; q < m && !found; q++) {
        e = load_entry(DEM_OWN_ENTRY(q));
        found = e.partner == partner;
        c = q;
    }
#undef DEM_OWN_ENTRY
    if (found) {
        s.xi = make_real3(e.x, e.y, e.z);
        s.sliding = (acc.row_word >> (DEM_ROW_COUNT_BITS + c)) & 1u;
        acc.cursor = c + 1;
    }
    return s;
}
#endif
#endif

// One contact of particle k with a partner (another particle, a wall or a mesh triangle; for a
// triangle, [mesh_lo, mesh_hi) are the partner keys of its mesh, else empty). `row` is the
// particle's history row (where its old entries are), `k` its slot.
template <class Acc>
__device__ __forceinline__ void apply_contact(const DemParams& p, const ParticleArrays& in, ParticleArrays& out,
                                              unsigned row, unsigned k, const MaterialPair& pair, const ContactKinematics& kin,
                                              real arm, unsigned partner, unsigned mesh_lo, unsigned mesh_hi,
                                              unsigned j, Acc& acc) {
    acc.contacts++;
#if DEM_FRICTION && DEM_HIST_PAIRS
    if constexpr (Acc::SPRINGS) {
        // dem_springs: the springs this particle keeps (its own pairs, walls, meshes), updated
        // in place in its row (staged); the forces are dem_collide's.
        (void)arm;
        if (j != DEM_PARTNER_NONE && !owns_contact(in, acc, j, partner)) return;
        if constexpr (Acc::COUNT) {
            acc.hist_out++;
            return;
        }
        ContactState st = find_history(p, in, row, partner, mesh_lo, mesh_hi, acc);
#if DEM_OWNER_KEYS
        // A pair this particle keeps since this step's search: its spring in the adoption row.
        if (!acc.hit && p.adopt && j != DEM_PARTNER_NONE) st.xi = adopted_spring(p, k, partner);
#endif
        const ContactForce cf = contact_force(DEM_MODEL, pair, kin, &st, (real)p.dt);
        if (cf.sliding && acc.hist_out < DEM_ROW_SLIDE_BITS) acc.slid |= 1u << acc.hist_out;
        store_history(p, out, row, k, acc, partner, st);
        return;
    } else {
        (void)mesh_lo;
        (void)mesh_hi;
        const StoredSpring ss = stored_spring(p, in, row, partner, j, acc);
        if constexpr (Acc::ENERGY) {
            ContactState st;
            st.xi = ss.xi;
            (void)out;
            (void)k;
            (void)arm;
            const double en = contact_elastic_energy(DEM_MODEL, pair, (double)kin.r_eff, (double)kin.delta, &st);
            acc.elastic += is_particle_partner(partner) ? 0.5 * en : en;
        } else {
            (void)out;
            (void)k;
            const ContactForce cf = contact_force_from_spring(DEM_MODEL, pair, kin, ss.xi, ss.sliding, (real)p.dt);
            acc.f = add3(acc.f, cf.force);
            acc.t = add3(acc.t, add3(cross3(scale3(kin.n, arm), cf.tangential), cf.rolling_torque));
        }
        return;
    }
#else
    (void)j;
#endif
    if constexpr (Acc::ENERGY) {
        // stages::compute_energies: the spring stored with this very partner (no mesh fallback).
        ContactState st;
#if DEM_FRICTION
        st = find_history(p, in, row, partner, 0u, 0u, acc);
#else
        st.xi = zero3();
        (void)in;
        (void)row;
#endif
        (void)out;
        (void)k;
        (void)arm;
        (void)mesh_lo;
        (void)mesh_hi;
        const double en = contact_elastic_energy(DEM_MODEL, pair, (double)kin.r_eff, (double)kin.delta, &st);
        acc.elastic += is_particle_partner(partner) ? 0.5 * en : en;
        return;
    } else {
#if DEM_FRICTION
    ContactState st = find_history(p, in, row, partner, mesh_lo, mesh_hi, acc);
    ContactForce cf = contact_force(DEM_MODEL, pair, kin, &st, (real)p.dt);
    store_history(p, out, row, k, acc, partner, st);
    acc.f = add3(acc.f, cf.force);
    acc.t = add3(acc.t, add3(cross3(scale3(kin.n, arm), cf.tangential), cf.rolling_torque));
#else
    (void)in;
    (void)mesh_lo;
    (void)mesh_hi;
    (void)row;
    (void)k;
    (void)partner;
    real delta_dot = dot3(kin.v_rel, kin.n);
    real fn_ = normal_force_only(DEM_MODEL, pair, kin.m_eff, kin.r_eff, kin.delta, delta_dot);
    acc.f = axpy3(acc.f, kin.n, -fn_);
#endif
    }
}

// Mesh contacts of particle k (cpu::contacts, section "Meshes"): the candidates of its cell in
// ascending global triangle order; per mesh, if any face is touched, edge/vertex hits are dropped,
// and hits whose normals coincide with an earlier (kept-kind) hit count once. The candidates of
// one mesh are contiguous, so each mesh is walked twice: once for "any face touched", once to
// emit; the duplicate test walks the mesh's earlier hits again (a hit mask avoids recomputing
// non-touching triangles among the first 64 candidates).
// `Cursor` is a BinCursor (every candidate of the cell) or a HitCursor (only the candidates
// dem_mesh_filter found touching, in the same order: the outcome is the same).
// Not inlined (only particles with candidates call it, the particle loop keeps its registers);
// everything by value so that nothing of the caller's needs an address.
template <class Cursor, class Acc>
__device__ __noinline__ Acc mesh_contacts(const DemParams p, const ParticleArrays in, ParticleArrays out,
                                          unsigned row, unsigned k, const MeshArrays msh, Cursor cur, dvec3 pi,
                                          const SpeciesProps sp, unsigned si, real3 vi, real3 wi, Acc acc) {
    const real ri = (real)sp.radius, mi = (real)sp.mass, ii = (real)sp.inertia;
    const double r = sp.radius;
    while (!bins_done(cur)) {
        const unsigned mesh = msh.tri_mesh[bins_peek(msh, cur)];
        const Cursor seg = cur;
        unsigned len = 0;
        unsigned long long hitmask = 0;
        bool any_hit = false, has_face = false;
        while (!bins_done(cur) && msh.tri_mesh[bins_peek(msh, cur)] == mesh) {
            const unsigned g = bins_take(msh, cur);
            MeshHit h;
            if (mesh_hit(msh, g, pi, r, &h)) {
                any_hit = true;
                has_face = has_face || h.region == DEM_TRI_FACE;
                if (len < 64) hitmask |= 1ull << len;
            }
            len++;
        }
        if (!any_hit) continue;
        const MeshBody body = msh.bodies[mesh];
        const unsigned key_lo = triangle_partner(body.first_tri), key_hi = triangle_partner(body.first_tri + body.n_tri);
        Cursor c1 = seg;
        for (unsigned i = 0; i < len; i++) {
            const unsigned g = bins_take(msh, c1);
            if (i < 64 && !((hitmask >> i) & 1ull)) continue;
            MeshHit h;
            if (!mesh_hit(msh, g, pi, r, &h)) continue;
            if (has_face && h.region != DEM_TRI_FACE) continue;
            bool duplicate = false;
            Cursor c2 = seg;
            for (unsigned j = 0; j < i && !duplicate; j++) {
                const unsigned g2 = bins_take(msh, c2);
                if (j < 64 && !((hitmask >> j) & 1ull)) continue;
                MeshHit o;
                if (!mesh_hit(msh, g2, pi, r, &o)) continue;
                duplicate = (o.region == DEM_TRI_FACE || !has_face) && ddot3(o.n, h.n) > 1.0 - 1e-9;
            }
            if (duplicate) continue;
            ContactKinematics kin;
            kin.n = to_real3(h.n);
            kin.delta = (real)(r - h.dist);
            kin.v_rel = surface_contact_velocity(vi, wi, ri, kin.n, to_real3(wall_velocity(body, h.q)));
            kin.omega_rel = sub3(wi, to_real3(dload3(body.omega)));
            kin.r_eff = ri;
            kin.m_eff = mi;
            kin.i_eff = ii;
            apply_contact(p, in, out, row, k, p.pw[si * p.n_walls + body.material], kin, contact_arm(ri, kin.delta),
                          triangle_partner(g), key_lo, key_hi, DEM_PARTNER_NONE, acc);
        }
    }
    return acc;
}

// Runs before dem_collide on the same sorted state (`in`): tests the mesh candidates of each
// particle's cell for contact, `lanes` threads per particle (1, 2, 4 or 8; candidate j of a bin
// list by lane j % lanes), and stores the touching ones as bits of hit_mask[2k] (fixed bins) and
// hit_mask[2k + 1] (moving bins); a list of more than 64 candidates is marked unscreened. A
// cell near a fan of triangles (a drum's end cap near its axis) has dozens of candidates, which
// one collide thread walked and tested one after another while its warp waited: in a small
// case, where one wave of threads covers every particle, that thread was the step. The test is
// mesh_hit itself, so the collide, which then visits only the hits (HitCursor), sees the same
// contacts in the same order.
extern "C" __global__ void dem_mesh_filter(const DemParams p, const ParticleArrays in, const MeshArrays msh,
                                           unsigned lanes) {
#if DEM_MESHES
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned k = t / lanes, lane = t % lanes;
    unsigned long long fm = 0, mm = 0;
    if (k < p.n && in.id[k] != DEM_DEAD) {
        const double pix = in.pos[3 * k], piy = in.pos[3 * k + 1], piz = in.pos[3 * k + 2];
        const unsigned si = species_of(in, k);
        const double r = p.species[si].radius;
        const unsigned cx = cell_coord(pix, p.origin[0], p.cell, p.dims[0]);
        const unsigned cy = cell_coord(piy, p.origin[1], p.cell, p.dims[1]);
        const unsigned cz = cell_coord(piz, p.origin[2], p.cell, p.dims[2]);
        const BinCursor c = bins_of_cell(msh, cell_index(p, cx, cy, cz));
        const dvec3 pi = dv3(pix, piy, piz);
        MeshHit h;
        if (c.fe - c.f > 64) {
            fm = DEM_HITS_UNSCREENED;
        } else {
            for (unsigned j = lane; c.f + j < c.fe; j += lanes)
                if (mesh_hit(msh, msh.fixed_tri[c.f + j], pi, r, &h)) fm |= 1ull << j;
        }
        if (c.me - c.m > 64) {
            mm = DEM_HITS_UNSCREENED;
        } else {
            for (unsigned j = lane; c.m + j < c.me; j += lanes)
                if (mesh_hit(msh, msh.moving_tri[c.m + j], pi, r, &h)) mm |= 1ull << j;
        }
    }
    // Every thread of the warp takes part (lanes is the same for all).
    for (unsigned o = 1; o < lanes; o <<= 1) {
        fm |= __shfl_xor_sync(0xffffffffu, fm, o);
        mm |= __shfl_xor_sync(0xffffffffu, mm, o);
    }
    if (lane == 0 && k < p.n) {
        msh.hit_mask[2 * k] = fm;
        msh.hit_mask[2 * k + 1] = mm;
    }
#else
    (void)p;
    (void)in;
    (void)msh;
    (void)lanes;
#endif
}

// Whether particle slot j overlaps a sphere of radius r at (pix, piy, piz) (the test of the
// contact below, in the same arithmetic; a NaN distance counts as overlapping, as it did).
__device__ __forceinline__ bool overlaps(const DemParams& p, const ParticleArrays& in, unsigned j, double pix,
                                         double piy, double piz, double r) {
#if DEM_ONE_SPECIES
    const double rsum = r + p.species[0].radius;
#else
    const unsigned sj = species_of(in, j);
    const double rsum = r + p.species[sj].radius;
#endif
    const double dx = in.pos[3 * j] - pix, dy = in.pos[3 * j + 1] - piy, dz = in.pos[3 * j + 2] - piz;
    return !(dx * dx + dy * dy + dz * dz >= rsum * rsum);
}

// Verlet skin (solver/src/dem/cuda/skin.rs, same names): cells to search each way around a
// particle's cell of the last search when particles have moved at most `moved` since: two
// touching particles are less than reach apart now, so less than reach + 2 moved apart at that
// search, and cells m apart hold every pair closer than m cells.
__device__ __forceinline__ unsigned skin_search_cells(double reach, float moved, double cell) {
    const double need = (reach + 2.0 * (double)moved) / cell;
    // NaN (a non-finite state, which the diagnostics report): one cell.
    if (!(need > 1.0)) return 1u;
    return (unsigned)ceil(fmin(need, 1e6));
}

// Distance moved in one symplectic Euler drift (x += v dt), rounded up: 1e-3 relative covers the
// float norm and the float sums of a path of up to a thousand steps.
__device__ __forceinline__ float skin_path_step(real3 v, double dt) {
    const float s = sqrtf((float)v.x * (float)v.x + (float)v.y * (float)v.y + (float)v.z * (float)v.z);
    return s * (float)dt * 1.001f;
}

// One slot's new state from its total contact force f and torque t (DemParams::integrate), and
// its path since the last search (with a skin, after symplectic Euler; 0 otherwise). The fused
// collide and dem_integrate (DEM_SINGLE_COPY) both call it: the same arithmetic, the same bits.
struct Integrated {
    real3 v;
    real3 w;
    dvec3 x;
    float path;
    bool finite;
};

__device__ __forceinline__ Integrated integrate_slot(const DemParams& p, const GridArrays& g, unsigned k, real3 vi,
                                                     real3 wi, dvec3 x, real3 f, real3 t, real mi, real ii) {
    Integrated r;
    r.v = vi;
    r.w = wi;
    r.x = x;
    r.path = 0.0f;
    const real dt = (real)p.dt;
    const real3 g3 = make_real3((real)p.gravity[0], (real)p.gravity[1], (real)p.gravity[2]);
    if (p.integrate == DEM_INTEGRATE_EULER) {
        // Symplectic Euler, as cpu::stages::integrate_euler.
        r.v = kick(vi, g3, f, mi, dt);
        r.x = drift(x, r.v, p.dt);
#if DEM_ROTATION
        r.w = spin_kick(wi, t, ii, dt);
#endif
        if (g.path) {
            r.path = g.path[k] + skin_path_step(r.v, p.dt);
            g.path[k] = r.path;
        }
    } else if (p.integrate == DEM_INTEGRATE_HALF_KICK) {
        // Velocity Verlet's closing half kick, as cpu::stages::half_kick.
        const real h = (real)(0.5 * p.dt);
        r.v = kick(vi, g3, f, mi, h);
#if DEM_ROTATION
        r.w = spin_kick(wi, t, ii, h);
#endif
    }
#if !DEM_ROTATION
    (void)t;
    (void)ii;
#endif
    r.finite = isfinite(r.x.x) && isfinite(r.x.y) && isfinite(r.x.z) && isfinite(r.v.x) && isfinite(r.v.y) &&
               isfinite(r.v.z);
#if DEM_ROTATION
    r.finite = r.finite && isfinite(r.w.x) && isfinite(r.w.y) && isfinite(r.w.z);
#endif
    return r;
}

// Slot k's integrated state (position, velocity, spin) into `s`.
__device__ __forceinline__ void store_integrated(const ParticleArrays& s, unsigned k, const Integrated& r) {
    store3(s.vel, k, r.v);
    s.pos[3 * k] = r.x.x;
    s.pos[3 * k + 1] = r.x.y;
    s.pos[3 * k + 2] = r.x.z;
#if DEM_ROTATION
    store3(s.omega, k, r.w);
#endif
}

// The contact of particle k (slot, id id_i, species si) with the overlapping particle in slot j.
template <class Acc>
__device__ __forceinline__ void particle_contact(const DemParams& p, const ParticleArrays& in, ParticleArrays& out,
                                                 unsigned row_i, unsigned k, unsigned id_i, unsigned si,
                                                 const SpeciesProps& sp, double pix, double piy, double piz,
                                                 real3 vi, real3 wi, unsigned j, Acc& acc) {
#if DEM_HIST_PAIRS
    // dem_springs leaves the pairs the other particle keeps to it.
    if constexpr (Acc::SPRINGS) {
        if (!owns_contact(in, acc, j, in.id[j])) return;
    }
#endif
    const real ri = (real)sp.radius, mi = (real)sp.mass, ii = (real)sp.inertia;
    const unsigned sj = species_of(in, j);
#if DEM_ONE_SPECIES
    const SpeciesProps& sq = p.species[0];
#else
    const SpeciesProps& sq = p.species[sj];
#endif
    const double rsum = sp.radius + sq.radius;
    const double dx = in.pos[3 * j] - pix, dy = in.pos[3 * j + 1] - piy, dz = in.pos[3 * j + 2] - piz;
    const double d2 = dx * dx + dy * dy + dz * dz;
    const real dist = (real)sqrt(d2);
    const real rj = (real)sq.radius;
    ContactKinematics kin;
    if (dist > real(0)) {
        kin.n = scale3(make_real3((real)dx, (real)dy, (real)dz), real(1) / dist);
    } else {
        // Coincident centres: a fixed normal by id order, as the CPU does.
        kin.n = make_real3(0, 0, id_i < in.id[j] ? real(1) : real(-1));
    }
    kin.delta = (real)rsum - dist;
    const real3 vj = load3(in.vel, j);
    const real arm_i = contact_arm(ri, kin.delta);
#if DEM_ROTATION
    const real3 wj = load3(in.omega, j);
    kin.v_rel = particle_contact_velocity(vi, wi, ri, vj, wj, rj, kin.n);
    kin.omega_rel = sub3(wi, wj);
    kin.i_eff = effective_inertia(ii, (real)sq.inertia);
#else
    (void)wi;
    kin.v_rel = sub3(vi, vj);
    kin.omega_rel = zero3();
    kin.i_eff = ii;
#endif
    kin.r_eff = effective_radius(ri, rj);
    kin.m_eff = effective_mass(mi, (real)sq.mass);
    apply_contact(p, in, out, row_i, k, p.pp[si * p.n_species + sj], kin, arm_i, in.id[j], 0u, 0u, j, acc);
}

// The body of dem_collide (Acc = Accum) and of dem_energies (Acc = EnergyAccum: the same
// neighbour search and contacts, then per-block sums of the energies into partial[4 * block]
// instead of the integration; `out` and `diag` are not touched). PASS (DEM_PASS_*): the slots
// it covers, all of them but in the two passes of a GPU that overlaps its ghost refresh.
template <class Acc, int PASS>
__device__ __forceinline__ void collide_body(const DemParams& p, const ParticleArrays& in, ParticleArrays& out,
                                             const GridArrays& g, DemDiag* diag, const MeshArrays& msh,
                                             const DemFrame& fr, double* partial) {
    const unsigned t_index = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned k = t_index;
    bool active = k < p.n;
    // The boundary pass of an overlapped step collides the listed slots.
    if constexpr (PASS == DEM_PASS_BOUNDARY) {
        active = t_index < p.pass_count;
        k = active ? p.pass_list[t_index] : 0u;
    }
    // With a skin: the largest distance any particle has moved since the last search (a bound:
    // other blocks of this launch may already have raised it, which only widens the search).
    const unsigned skin_seen = g.dmax ? __ldcg(g.dmax) : 0u;
    const float skin_moved = __uint_as_float(skin_seen);
    float path = 0.0f;
    Acc acc;
    if constexpr (Acc::ENERGY) acc.elastic = 0.0;
    double kin_t = 0.0, kin_r = 0.0, pot = 0.0;
    acc.f = zero3();
    acc.t = zero3();
    acc.contacts = 0;
    acc.hist_out = 0;
    acc.overflow = 0;
    acc.used = 0;
    acc.cursor = 0;
    acc.old_count = 0;
    acc.self_id = 0;
    acc.self_key = 0;
    acc.hit = false;
    acc.slid = 0;
    acc.row_word = 0;
#if DEM_FRICTION && DEM_HIST_IN_PLACE
    if constexpr (!Acc::ENERGY && !Acc::SPRINGS) {
        // In place, every slot's row goes with its slot, live or dead, and those of the dead
        // tail behind the collided slots too (p.n_rows): the rows stay a permutation. (With two
        // buffers a live particle's new row is its slot, set below.)
        // (The interior pass carries every slot's row; the boundary pass none.)
        if (in.row && PASS != DEM_PASS_BOUNDARY && k < max(p.n, p.n_rows)) out.row[k] = in.row[k];
    }
#endif
    if (active) {
        // A ghost (a neighbour GPU's particle, outside this GPU's slab) is read, not moved: its
        // slot of `out` is marked dead, which the next exchange drops (or, between a skin's
        // searches, the next ghost refresh revives: exchange.cu). With a skin, who owns a slot
        // is decided at the search, by its cell then: between searches a particle may drift
        // across the bound and stays its owner's until the next search.
        const unsigned a = p.split_axis;
        unsigned layer;
        if (g.scell) {
            const unsigned c = g.scell[k];
            layer = a == 0 ? c % p.dims[0] : (a == 1 ? (c / p.dims[0]) % p.dims[1] : c / (p.dims[0] * p.dims[1]));
        } else {
            layer = cell_coord(in.pos[3 * k + a], p.origin[a], p.cell, p.dims[a]);
        }
        // A removed particle (outflow) was sorted behind the live ones; its slot stays dead.
        if (layer < p.slab_lo || layer >= p.slab_hi || in.id[k] == DEM_DEAD) {
            if constexpr (!Acc::ENERGY && !Acc::SPRINGS) out.id[k] = DEM_DEAD;
            active = false;
        } else if (PASS == DEM_PASS_INTERIOR && (layer == p.pass_skip[0] || layer == p.pass_skip[1])) {
            // An owned slot of a boundary layer: the boundary pass collides it once its
            // neighbours' ghosts have arrived.
            active = false;
        }
    }
    if (active) {
        const double pix = in.pos[3 * k], piy = in.pos[3 * k + 1], piz = in.pos[3 * k + 2];
        const real3 vi = load3(in.vel, k);
#if DEM_ROTATION
        const real3 wi = load3(in.omega, k);
#else
        const real3 wi = zero3();
#endif
        const unsigned si = species_of(in, k);
        const SpeciesProps sp = p.species[si];
        const real ri = (real)sp.radius, mi = (real)sp.mass, ii = (real)sp.inertia;
        const unsigned id_i = in.id[k];
        acc.self_id = id_i;
#if DEM_OWNER_KEYS
        acc.self_key = in.key[k];
#endif
        const unsigned row_i = in.row ? in.row[k] : k;

        const unsigned cx = cell_coord(pix, p.origin[0], p.cell, p.dims[0]);
        const unsigned cy = cell_coord(piy, p.origin[1], p.cell, p.dims[1]);
        const unsigned cz = cell_coord(piz, p.origin[2], p.cell, p.dims[2]);
        // The cells searched: m cells each way around the particle's cell, which with a skin is
        // its cell at the last search (the slots are still in that search's order), and m covers
        // the distance moved since (skin_search_cells); else its cell now and m = 1. Either way
        // the contacts come in (cell of the search, id) order.
        unsigned sx = cx, sy = cy, sz = cz, m = 1;
        if (g.scell) {
            const unsigned c = g.scell[k];
            sx = c % p.dims[0];
            sy = (c / p.dims[0]) % p.dims[1];
            sz = c / (p.dims[0] * p.dims[1]);
            m = skin_search_cells(p.reach, skin_moved, p.cell);
        }
        const unsigned x0 = sx > m ? sx - m : 0, x1 = min(sx + m, p.dims[0] - 1);
        const unsigned y0 = sy > m ? sy - m : 0, y1 = min(sy + m, p.dims[1] - 1);
        const unsigned z0 = sz > m ? sz - m : 0, z1 = min(sz + m, p.dims[2] - 1);
#if DEM_FRICTION
        acc.old_count = in.hist_count[row_i];
#if DEM_HIST_PAIRS
        acc.row_word = acc.old_count;
        acc.old_count &= DEM_ROW_COUNT_MASK;
#if DEM_HIST_SPILL
        // The row's spill row: dem_springs reads the old one (spill_cur) and takes a new one;
        // the kernels after it read the new (the host passes them spill_next as spill_cur).
        acc.link_old = row_link(p, in.hist, row_i, acc.old_count);
        acc.link_new = DEM_PARTNER_NONE;
#endif
        // Only dem_springs updates rows; the others read them where they lie.
        if constexpr (Acc::SPRINGS)
#endif
        {
            stage_history(p, in, row_i, min(acc.old_count, p.hist_cap));
            // CudaSim::new requires hist_cap >= 1 with friction (2 with spill rows).
            acc.ahead = old_row_entry(p, in, row_i, 0u, acc);
        }
#endif
        // Particle-particle contacts in two passes: the neighbour cells are scanned for
        // overlapping partners (a cheap test), whose slots are buffered per thread in shared
        // memory; the buffer is then worked through. A warp's threads have different numbers of
        // candidates and contacts, so a contact evaluated inside the scan would run with most of
        // the warp idle at each candidate; buffered, the warp runs the contact code about max(contacts)
        // times instead of max(candidates). The order of contacts is unchanged.
#if DEM_COMPACT
        // The 3 x 3 rows of neighbour cells (z, y ascending) are scanned from a cursor (row r,
        // slot j) until the buffer is full or the rows are done; the buffer is then worked
        // through, and the scan resumes. One copy of the contact code (a flush inside the scan
        // loop made the kernel 2x slower), and the scan is a tight loop over one row range
        // (merging the row changes into it slowed the loose phase 1.7x).
        __shared__ unsigned cand[DEM_CANDIDATES][COLLIDE_BLOCK];
        // The Verlet list, while the particles moved less than it covers (m = 1): the slots the
        // cell walk would meet that can touch, in the walk's order (one "row" of list entries).
        const unsigned listed = (g.ncount && m == 1) ? g.ncount[k] : DEM_LIST_FULL;
        const bool list = listed != DEM_LIST_FULL;
        const unsigned ny = y1 - y0 + 1, rows = list ? 1u : (z1 - z0 + 1) * ny;
        unsigned r = 0;
#if DEM_LIST_WALK != 0
        // The list walked unbuffered: each entry's contact evaluated as it is met. Where nearly
        // every entry is a contact (a dense bed) the buffer only costs its stores and a second
        // read of each partner; where few are, it keeps the warp's idle threads out of the
        // contact code. DEM_LIST_WALK 1: always; 2: where each of the warp's particles had at
        // least DEM_LIST_VOTE_PCT % of its list's length in contacts last step (its history
        // count), by a vote of the warp. The same contacts in the same order either way: the
        // same bits.
        if (list) {
#if DEM_LIST_WALK == 2 && DEM_FRICTION
            // (A pairs-once row holds about half the particle's contacts.)
            const bool direct =
                __all_sync(__activemask(), 100u * (DEM_HIST_PAIRS ? 2u : 1u) * acc.old_count >= DEM_LIST_VOTE_PCT * listed);
#elif DEM_LIST_WALK == 2
            const bool direct = false;
#else
            const bool direct = true;
#endif
            if (direct) {
                // Entry c + 1 is loaded before contact c is worked out (its load, from memory,
                // was the wait at the top of each pass).
                unsigned q_next = listed ? list_entry(g.nlist, k) : 0u;
                for (unsigned c = 0; c < listed; c++) {
                    const unsigned q = q_next;
                    if (c + 1 < listed) q_next = list_entry(g.nlist, (size_t)(c + 1) * p.list_stride + k);
                    if (overlaps(p, in, q, pix, piy, piz, sp.radius))
                        particle_contact(p, in, out, row_i, k, id_i, si, sp, pix, piy, piz, vi, wi, q, acc);
                }
                r = rows;
            }
        }
#endif
        // Cells x0..x1 of a row are consecutive in the sorted order: one range.
        unsigned j = list ? 0u : g.start[cell_index(p, x0, y0, z0)];
        unsigned e = list ? listed : g.start[cell_index(p, x1, y0, z0) + 1];
        if (r < rows) do {
            unsigned nc = 0;
            for (;;) {
                for (; j < e && nc < DEM_CANDIDATES; j++) {
                    const unsigned q = list ? list_entry(g.nlist, (size_t)j * p.list_stride + k) : j;
                    if (q != k && overlaps(p, in, q, pix, piy, piz, sp.radius)) cand[nc++][threadIdx.x] = q;
                }
                if (nc == DEM_CANDIDATES || ++r >= rows) break;
                const unsigned y = y0 + r % ny, z = z0 + r / ny;
                j = g.start[cell_index(p, x0, y, z)];
                e = g.start[cell_index(p, x1, y, z) + 1];
            }
            for (unsigned t = 0; t < nc; t++)
                particle_contact(p, in, out, row_i, k, id_i, si, sp, pix, piy, piz, vi, wi, cand[t][threadIdx.x], acc);
        } while (r < rows);
#else
        for (unsigned z = z0; z <= z1; z++) {
            for (unsigned y = y0; y <= y1; y++) {
                // Cells x0..x1 of a row are consecutive in the sorted order: one range.
                const unsigned b = g.start[cell_index(p, x0, y, z)];
                const unsigned e = g.start[cell_index(p, x1, y, z) + 1];
                for (unsigned j = b; j < e; j++) {
                    if (j == k || !overlaps(p, in, j, pix, piy, piz, sp.radius)) continue;
                    particle_contact(p, in, out, row_i, k, id_i, si, sp, pix, piy, piz, vi, wi, j, acc);
                }
            }
        }
#endif
        if (p.walls) {
            // geometry::box_wall_contacts: faces x_min, x_max, y_min, ... in that order, those in
            // the mask; face f has wall material f.
            const double pi3[3] = {pix, piy, piz};
#pragma unroll
            for (int a = 0; a < 3; a++) {
#pragma unroll
                for (int side = 0; side < 2; side++) {
                    if (!(p.walls & (1u << (2 * a + side)))) continue;
                    const double d = side == 0 ? sp.radius - (pi3[a] - p.box_min[a]) : sp.radius - (p.box_max[a] - pi3[a]);
                    if (!(d > 0.0)) continue;
                    ContactKinematics kin;
                    kin.n = zero3();
                    if (a == 0) kin.n.x = side == 0 ? real(-1) : real(1);
                    if (a == 1) kin.n.y = side == 0 ? real(-1) : real(1);
                    if (a == 2) kin.n.z = side == 0 ? real(-1) : real(1);
                    kin.delta = (real)d;
                    const real arm = contact_arm(ri, kin.delta);
                    kin.v_rel = surface_contact_velocity(vi, wi, arm, kin.n, zero3());
                    kin.omega_rel = wi;
                    kin.r_eff = ri;
                    kin.m_eff = mi;
                    kin.i_eff = ii;
                    apply_contact(p, in, out, row_i, k, p.pw[si * p.n_walls + 2 * a + side], kin, arm, wall_partner(2 * a + side), 0u, 0u,
                                  DEM_PARTNER_NONE, acc);
                }
            }
        }
#if DEM_MESHES
        if (msh.n_tris) {
            // Meshes after the walls, as the CPU orders them.
            const unsigned long long fm = msh.hit_mask ? msh.hit_mask[2 * k] : DEM_HITS_UNSCREENED;
            const unsigned long long mm = msh.hit_mask ? msh.hit_mask[2 * k + 1] : DEM_HITS_UNSCREENED;
            if (fm != DEM_HITS_UNSCREENED && mm != DEM_HITS_UNSCREENED) {
                // Screened by dem_mesh_filter: only the hits are visited (none for most).
                if (fm | mm) {
                    const BinCursor b = bins_of_cell(msh, cell_index(p, cx, cy, cz));
                    HitCursor hc;
                    hc.fm = fm;
                    hc.mm = mm;
                    hc.f0 = b.f;
                    hc.m0 = b.m;
                    acc = mesh_contacts(p, in, out, row_i, k, msh, hc, dv3(pix, piy, piz), sp, si, vi, wi, acc);
                }
            } else {
                const BinCursor cur = bins_of_cell(msh, cell_index(p, cx, cy, cz));
                if (!bins_done(cur)) acc = mesh_contacts(p, in, out, row_i, k, msh, cur, dv3(pix, piy, piz), sp, si, vi, wi, acc);
            }
        }
#endif
        if constexpr (Acc::COUNT) {
#if DEM_HIST_SPILL
            // dem_spill_count: the rows that will spill, counted in spill_ctl[3].
            if (acc.hist_out > p.hist_cap) atomicAdd(p.spill_ctl + 3, 1u);
#endif
        } else if constexpr (Acc::SPRINGS) {
            // dem_springs: the row's new length and slide flags; nothing else is written.
            out.hist_count[row_i] = acc.hist_out | (acc.slid << DEM_ROW_COUNT_BITS);
            if (acc.overflow) atomicAdd(&diag->hist_overflow, acc.overflow);
        } else if constexpr (Acc::ENERGY) {
            // stages::compute_energies, in its arithmetic (double).
            const double vx = vi.x, vy = vi.y, vz = vi.z;
            kin_t = 0.5 * sp.mass * (vx * vx + vy * vy + vz * vz);
#if DEM_ROTATION
            const double wx = wi.x, wy = wi.y, wz = wi.z;
            kin_r = 0.5 * sp.inertia * (wx * wx + wy * wy + wz * wz);
#endif
            pot = -sp.mass * (p.gravity[0] * pix + p.gravity[1] * piy + p.gravity[2] * piz);
        } else {
        // A frame of the state read here, deferred to this collide (dem/cuda/publish.rs): the
        // particle's values are loaded and still live, and every live slot passes here once.
        if (fr.pos) dem_frame_put(fr, dem_frame_index(fr.rank, id_i), pix, piy, piz, vi, wi);
#if DEM_SINGLE_COPY
        // One copy of the state: the forces only (dem_integrate moves the particles once every
        // slot's contacts have been read).
        (void)ii;
#else
        const Integrated r = integrate_slot(p, g, k, vi, wi, dv3(pix, piy, piz), acc.f, acc.t, mi, ii);
        path = r.path;
        store_integrated(out, k, r);
        out.id[k] = id_i;
        if (in.species) out.species[k] = si;
        if (!r.finite) atomicAdd(&diag->nonfinite, 1u);
#endif
        if (out.torque) store3(out.torque, k, acc.t);
        if (out.force) store3(out.force, k, acc.f);
        if (out.contacts) out.contacts[k] = acc.contacts;
#if DEM_FRICTION
#if DEM_HIST_PAIRS
        (void)row_i;  // dem_springs wrote the row and its length
#elif DEM_HIST_IN_PLACE
        out.hist_count[row_i] = acc.hist_out;
#else
        out.hist_count[k] = acc.hist_out;
        out.row[k] = k;
#endif
#endif
        if (acc.overflow) atomicAdd(&diag->hist_overflow, acc.overflow);
        }
    }
    if constexpr (Acc::ENERGY) {
        // Fixed order (thread 0 adds the block's values in thread order): the same sums run
        // to run; the host adds the blocks in order.
        (void)diag;
        __shared__ double sums[4][COLLIDE_BLOCK];
        sums[0][threadIdx.x] = kin_t;
        sums[1][threadIdx.x] = kin_r;
        sums[2][threadIdx.x] = pot;
        sums[3][threadIdx.x] = acc.elastic;
        __syncthreads();
        if (threadIdx.x == 0) {
            for (int c = 0; c < 4; c++) {
                double t = 0.0;
                for (unsigned i = 0; i < blockDim.x; i++) t += sums[c][i];
                partial[4 * blockIdx.x + c] = t;
            }
        }
    } else if constexpr (Acc::SPRINGS) {
        (void)partial;
        (void)kin_t;
        (void)kin_r;
        (void)pot;
        (void)skin_moved;
        (void)path;
    } else {
        (void)partial;
        (void)kin_t;
        (void)kin_r;
        (void)pot;
        (void)skin_moved;
        if (g.path) {
            // The warp's largest path, one atomic per warp that exceeds what was seen.
            const unsigned wmax = __reduce_max_sync(0xffffffffu, __float_as_uint(path));
            if ((threadIdx.x & 31) == 0 && wmax > skin_seen) atomicMax(g.dmax, wmax);
        }
        if (p.diag) {
            // Warp sum first: one 64-bit atomic per warp.
            unsigned c = __reduce_add_sync(0xffffffffu, acc.contacts);
            if ((threadIdx.x & 31) == 0 && c) atomicAdd(&diag->contacts, (unsigned long long)c);
        }
    }
}

// DEM_MODULE_PART (kernels::DEM_PART_*): 1 compiles dem_collide without dem_energies, 2
// dem_energies without dem_collide (two modules compiled side by side); unset, both.
#ifndef DEM_MODULE_PART
#define DEM_MODULE_PART 0
#endif

#if DEM_MODULE_PART != 2
extern "C" __global__ void __launch_bounds__(COLLIDE_BLOCK, DEM_COLLIDE_MIN_BLOCKS) dem_collide(const DemParams p, const ParticleArrays in,
                                                              ParticleArrays out, const GridArrays g, DemDiag* diag,
                                                              const MeshArrays msh, const DemFrame fr) {
    collide_body<Accum, DEM_PASS_ALL>(p, in, out, g, diag, msh, fr, nullptr);
}
#if DEM_FRICTION && DEM_HIST_PAIRS
// The pairs-once history's first pass (DEM_HIST_PAIRS): every particle's owned springs, walls'
// and meshes' updated in its row, in place, on the same input dem_collide then reads. Nothing
// else is written (the rows' permutation is dem_collide's to carry).
extern "C" __global__ void __launch_bounds__(COLLIDE_BLOCK, DEM_COLLIDE_MIN_BLOCKS) dem_springs(const DemParams p, const ParticleArrays in,
                                                              const GridArrays g, DemDiag* diag,
                                                              const MeshArrays msh) {
    ParticleArrays rows = in;  // in place: the history arrays are the same in both copies
    collide_body<SpringAccum, DEM_PASS_ALL>(p, in, rows, g, diag, msh, DemFrame{}, nullptr);
}
#endif
#if DEM_FRICTION && DEM_HIST_SPILL
// Spill rows (DEM_HIST_SPILL): before the first step of a run, the rows that its dem_springs
// will spill at the state's positions (the same walk, entries counted, nothing written but
// spill_ctl[3], which the host zeroes first), so that the spill rows are sized before any
// contact could find none (a bed placed in contact forms all its contacts in that step).
extern "C" __global__ void __launch_bounds__(COLLIDE_BLOCK, DEM_COLLIDE_MIN_BLOCKS) dem_spill_count(const DemParams p, const ParticleArrays in,
                                                                  const GridArrays g, DemDiag* diag,
                                                                  const MeshArrays msh) {
    ParticleArrays rows = in;
    collide_body<CountAccum, DEM_PASS_ALL>(p, in, rows, g, diag, msh, DemFrame{}, nullptr);
}
#endif
#if DEM_OWNER_KEYS
// Owner keys, at a search, after the reorder: each slot's key of the last search (moved with it)
// into old[k], its key now (state::owner_key of its position) into s.key[k].
extern "C" __global__ void dem_owner_keys(const DemParams p, ParticleArrays s, unsigned* old) {
    const unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= p.n) return;
    old[k] = s.key[k];
    s.key[k] = owner_key(s.pos[3 * k], s.pos[3 * k + 1], s.pos[3 * k + 2]);
}

// Owner keys, at a search, after dem_owner_keys and before dem_springs: the pairs that slot k
// keeps by the new keys (s.key) and its partner kept by the old ones (old) had their spring in
// the partner's row, which dem_springs is about to rewrite. Their springs, seen from k (negated:
// the exact mirror), go to k's adoption row, taken from spill_next's counter (spill_ctl
// [spill_sel], zeroed by the host before this launch; dem_springs takes its spill rows after
// them), ended by a DEM_PARTNER_NONE entry where it has room; links[k] is that row or
// DEM_PARTNER_NONE. Candidates are the 27 cells around k's cell now (the search's: every
// contact of this step lies within them). Rows are only read: every thread reads the rows as
// the last step left them. A spring that finds no room is counted as an overflow (an error).
extern "C" __global__ void dem_adopt(const DemParams p, const ParticleArrays s, const GridArrays g, const unsigned* old,
                                     unsigned* links, DemDiag* diag) {
    const unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= p.n) return;
    unsigned link = DEM_PARTNER_NONE, taken = 0, lost = 0;
    const unsigned id = s.id[k];
    if (id != DEM_DEAD) {
        const unsigned kn = s.key[k], ko = old[k];
        const unsigned cx = cell_coord(s.pos[3 * k], p.origin[0], p.cell, p.dims[0]);
        const unsigned cy = cell_coord(s.pos[3 * k + 1], p.origin[1], p.cell, p.dims[1]);
        const unsigned cz = cell_coord(s.pos[3 * k + 2], p.origin[2], p.cell, p.dims[2]);
        const unsigned x0 = cx > 0 ? cx - 1 : 0, x1 = min(cx + 1, p.dims[0] - 1);
        const unsigned y0 = cy > 0 ? cy - 1 : 0, y1 = min(cy + 1, p.dims[1] - 1);
        const unsigned z0 = cz > 0 ? cz - 1 : 0, z1 = min(cz + 1, p.dims[2] - 1);
        for (unsigned z = z0; z <= z1; z++) {
            for (unsigned y = y0; y <= y1; y++) {
                const unsigned b = g.start[cell_index(p, x0, y, z)], e = g.start[cell_index(p, x1, y, z) + 1];
                for (unsigned j = b; j < e; j++) {
                    if (j == k) continue;
                    const unsigned idj = s.id[j];
                    if (idj == DEM_DEAD) continue;
                    if (!owns_pair_keyed(kn, id, s.key[j], idj) || owns_pair_keyed(ko, id, old[j], idj)) continue;
                    // j kept the pair until this search; k keeps it from now.
                    const unsigned m = s.hist_count[j] & DEM_ROW_COUNT_MASK;
                    const unsigned jl = row_link(p, s.hist, j, m);
                    for (unsigned c = 0; c < m; c++) {
                        const HistEntry h = load_entry(row_entry(p, s.hist, p.spill_cur, j, c, jl));
                        if (h.partner != id) continue;
                        if (link == DEM_PARTNER_NONE) {
                            link = atomicAdd(p.spill_ctl + p.spill_sel, 1u);
                            atomicMax(p.spill_ctl + 2, link + 1u);
                            if (link >= p.spill_rows) link = DEM_SPILL_FULL;
                        }
                        if (link == DEM_SPILL_FULL || taken >= p.spill_width) {
                            lost++;
                        } else {
                            HistEntry a = {};
                            a.x = -h.x;
                            a.y = -h.y;
                            a.z = -h.z;
                            a.partner = idj;
                            store_entry(p.spill_next + (size_t)link * p.spill_width + taken, a);
                            taken++;
                        }
                        break;
                    }
                }
            }
        }
        if (link != DEM_PARTNER_NONE && link != DEM_SPILL_FULL && taken < p.spill_width) {
            HistEntry end = {};
            end.partner = DEM_PARTNER_NONE;
            store_entry(p.spill_next + (size_t)link * p.spill_width + taken, end);
        }
        if (lost) atomicAdd(&diag->hist_overflow, lost);
        if (taken) atomicAdd(p.spill_ctl + 4, taken);  // the springs handed over (a diagnostic)
    }
    links[k] = link == DEM_SPILL_FULL ? DEM_PARTNER_NONE : link;
}
#endif
#if DEM_PASSES
// dem_collide over every slot but the owned ones of the layers pass_skip (their ghosts are in
// flight), beside the ghost refresh.
extern "C" __global__ void __launch_bounds__(COLLIDE_BLOCK, DEM_COLLIDE_MIN_BLOCKS) dem_collide_interior(
    const DemParams p, const ParticleArrays in, ParticleArrays out, const GridArrays g, DemDiag* diag,
    const MeshArrays msh, const DemFrame fr) {
    collide_body<Accum, DEM_PASS_INTERIOR>(p, in, out, g, diag, msh, fr, nullptr);
}
// dem_collide over the slots pass_list[0..pass_count] (the boundary layers'), once their
// neighbours' ghosts have arrived.
extern "C" __global__ void __launch_bounds__(COLLIDE_BLOCK, DEM_COLLIDE_MIN_BLOCKS) dem_collide_boundary(
    const DemParams p, const ParticleArrays in, ParticleArrays out, const GridArrays g, DemDiag* diag,
    const MeshArrays msh, const DemFrame fr) {
    collide_body<Accum, DEM_PASS_BOUNDARY>(p, in, out, g, diag, msh, fr, nullptr);
}
#endif
#endif

#if DEM_MODULE_PART != 1
// Energies of the state at its current positions (stages::compute_energies), on the sorted
// scratch copy `in` that a neighbour search has just gathered (the state itself is not
// touched): per block of COLLIDE_BLOCK slots, partial[4 b ..] = kinetic (translation), kinetic
// (rotation), potential (-m g . x) and elastic energy [J]. Launched with COLLIDE_BLOCK threads.
extern "C" __global__ void __launch_bounds__(COLLIDE_BLOCK, 1) dem_energies(const DemParams p, const ParticleArrays in,
                                                                            const GridArrays g, const MeshArrays msh,
                                                                            double* partial) {
    ParticleArrays none = {};
    collide_body<EnergyAccum, DEM_PASS_ALL>(p, in, none, g, nullptr, msh, DemFrame{}, partial);
}
#endif

// The Verlet list of every slot at a search (after the gather; `in` is the sorted state): the
// slots j != k of the 3 x 3 x 3 cells around k's cell closer than r_k + r_j + (cell - reach), in
// the collide's walk order (cells z, y, x ascending, slots ascending), at most list_cap of them
// (more: DEM_LIST_FULL, and that slot's collide walks the cells). Two particles that touch later
// were within r_k + r_j + 2 D at the search, so the list holds them while 2 D <= cell - reach,
// which is when the collide uses it (skin_search_cells = 1).
extern "C" __global__ void dem_neighbours(const DemParams p, const ParticleArrays in, const GridArrays g) {
    const unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= p.n) return;
    const double pix = in.pos[3 * k], piy = in.pos[3 * k + 1], piz = in.pos[3 * k + 2];
    const double ri = p.species[species_of(in, k)].radius;
    const double margin = p.cell - p.reach;
    const unsigned c = g.scell[k];
    const unsigned sx = c % p.dims[0], sy = (c / p.dims[0]) % p.dims[1], sz = c / (p.dims[0] * p.dims[1]);
    const unsigned x0 = sx > 0 ? sx - 1 : 0, x1 = min(sx + 1, p.dims[0] - 1);
    const unsigned y0 = sy > 0 ? sy - 1 : 0, y1 = min(sy + 1, p.dims[1] - 1);
    const unsigned z0 = sz > 0 ? sz - 1 : 0, z1 = min(sz + 1, p.dims[2] - 1);
    unsigned n = 0;
    for (unsigned z = z0; z <= z1; z++) {
        for (unsigned y = y0; y <= y1; y++) {
            const unsigned e = g.start[cell_index(p, x1, y, z) + 1];
            for (unsigned j = g.start[cell_index(p, x0, y, z)]; j < e; j++) {
                if (j == k) continue;
                // overlaps() with the list's margin (and 1e-9 more for the rounding of the sums).
                if (overlaps(p, in, j, pix, piy, piz, ri + margin * (1.0 + 1e-9))) {
                    if (n < p.list_cap) g.nlist[(size_t)n * p.list_stride + k] = j;
                    n++;
                }
            }
        }
    }
    g.ncount[k] = n <= p.list_cap ? n : DEM_LIST_FULL;
}

// Velocity Verlet's opening half kick and drift (cpu::stages::half_kick, drift) with the forces
// stored by the last dem_collide, in place on the state (slot order of that collide's output).
extern "C" __global__ void dem_kick_drift(const DemParams p, ParticleArrays s) {
    unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= p.n || s.id[k] == DEM_DEAD) return;
    const unsigned si = species_of(s, k);
    const SpeciesProps sp = p.species[si];
    const real mi = (real)sp.mass;
    const real h = (real)(0.5 * p.dt);
    const real3 g3 = make_real3((real)p.gravity[0], (real)p.gravity[1], (real)p.gravity[2]);
    const real3 v = kick(load3(s.vel, k), g3, load3(s.force, k), mi, h);
    store3(s.vel, k, v);
#if DEM_ROTATION
    store3(s.omega, k, spin_kick(load3(s.omega, k), load3(s.torque, k), (real)sp.inertia, h));
#endif
    const dvec3 x = drift(dload3(s.pos + 3 * k), v, p.dt);
    s.pos[3 * k] = x.x;
    s.pos[3 * k + 1] = x.y;
    s.pos[3 * k + 2] = x.z;
}

// One copy of the state (DEM_SINGLE_COPY): the integration dem_collide leaves out, from the
// forces and torques it stored (s.force, s.torque), in place, with the fused collide's
// arithmetic (integrate_slot). With a skin each warp raises the largest path since the search
// (g.dmax) as the collide does.
extern "C" __global__ void dem_integrate(const DemParams p, ParticleArrays s, const GridArrays g, DemDiag* diag) {
    const unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned skin_seen = g.dmax ? __ldcg(g.dmax) : 0u;
    float path = 0.0f;
    if (k < p.n && s.id[k] != DEM_DEAD) {
        const SpeciesProps sp = p.species[species_of(s, k)];
#if DEM_ROTATION
        const real3 wi = load3(s.omega, k);
        const real3 ti = load3(s.torque, k);
#else
        const real3 wi = zero3();
        const real3 ti = zero3();
#endif
        const Integrated r = integrate_slot(p, g, k, load3(s.vel, k), wi, dload3(s.pos + 3 * k), load3(s.force, k),
                                            ti, (real)sp.mass, (real)sp.inertia);
        path = r.path;
        store_integrated(s, k, r);
        if (!r.finite) atomicAdd(&diag->nonfinite, 1u);
    }
    if (g.path) {
        const unsigned wmax = __reduce_max_sync(0xffffffffu, __float_as_uint(path));
        if ((threadIdx.x & 31) == 0 && wmax > skin_seen) atomicMax(g.dmax, wmax);
    }
}
