// Publication: the sorted state packed into particle-id order as float32 (the frame layout of
// shm-protocol), into a device staging buffer that a copy stream then moves to the host.
// Mirrors Backend::begin_kinematics_copy's CPU default (positions, velocities, angular
// velocities, last contact force and contact count, by id). Null outputs are skipped; arrays the
// state does not hold (no rotation, forces not stored) are written as zeros.

// Frame index of particle `id` (`rank`, when set, maps an id to its index: the exclusive scan
// of the alive flags, since frames list the live ids in order).
__device__ __forceinline__ unsigned dem_frame_index(const unsigned* rank, unsigned id) {
    return rank ? rank[id] : id;
}

// Writes one particle's kinematics into a frame at index `i`. Every value comes loaded: a load
// issued between stores to memory that may alias waits for them. Shared by dem_pack and by the
// collide that packs a deferred frame (contact.cu), so that both write the same bits.
__device__ __forceinline__ void dem_frame_put(const DemFrame& f, unsigned i, double x, double y, double z, real3 v,
                                              real3 w) {
    if (f.pos) {
        f.pos[3 * i] = (float)x;
        f.pos[3 * i + 1] = (float)y;
        f.pos[3 * i + 2] = (float)z;
    }
    if (f.vel) {
        f.vel[3 * i] = (float)v.x;
        f.vel[3 * i + 1] = (float)v.y;
        f.vel[3 * i + 2] = (float)v.z;
    }
    if (f.omega) {
        f.omega[3 * i] = (float)w.x;
        f.omega[3 * i + 1] = (float)w.y;
        f.omega[3 * i + 2] = (float)w.z;
    }
}

// `rank` (null: frame index = id) maps an id to its frame index when particles were removed.
extern "C" __global__ void dem_pack(const DemParams p, const ParticleArrays s, float* pos, float* vel, float* omega,
                                    float* force, unsigned* contacts, const unsigned* rank) {
    unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= p.n) return;
    const unsigned id = s.id[k];
    if (id == DEM_DEAD) return;  // a ghost's or a removed particle's slot
    const unsigned i = dem_frame_index(rank, id);
    const double* q = s.pos + 3 * k;
    const double x = pos ? q[0] : 0.0, y = pos ? q[1] : 0.0, z = pos ? q[2] : 0.0;
    const real3 v = vel ? load3(s.vel, k) : zero3();
    const real3 w = (omega && s.omega) ? load3(s.omega, k) : zero3();
    DemFrame f;
    f.pos = pos;
    f.vel = vel;
    f.omega = omega;
    f.rank = rank;
    dem_frame_put(f, i, x, y, z, v, w);
    if (force)
        for (int a = 0; a < 3; a++) force[3 * i + a] = s.force ? (float)s.force[3 * k + a] : 0.0f;
    if (contacts) contacts[i] = s.contacts ? s.contacts[k] : 0u;
}

// Deletion regions (case::Outflow::contains, the same comparisons): kind 0 the box [a, b];
// kind 1 farther than a[0] outside the domain box. 56 bytes, mirrored by dem/cuda/outflow.rs.
struct OutflowRegion {
    double a[3];
    double b[3];
    unsigned kind;
    unsigned pad;
};

__device__ __forceinline__ bool outflow_contains(const OutflowRegion& r, const double* q, const DemParams& p) {
    if (r.kind == 0) {
        for (int a = 0; a < 3; a++)
            if (!(q[a] >= r.a[a] && q[a] <= r.b[a])) return false;
        return true;
    }
    for (int a = 0; a < 3; a++)
        if (q[a] < p.box_min[a] - r.a[0] || q[a] > p.box_max[a] + r.a[0]) return true;
    return false;
}

// Stage `outflow` at the end of a step: a live particle whose centre lies in a region is
// removed (its slot marked dead, sorted behind the live ones by the next step's neighbour
// search) and listed as (id, species, step) for the host's accounting; alive[id] = 0.
extern "C" __global__ void dem_outflow(const DemParams p, ParticleArrays s, const OutflowRegion* regions,
                                       unsigned n_regions, unsigned* list, unsigned* count, unsigned cap,
                                       unsigned* alive, unsigned step) {
    unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= p.n) return;
    const unsigned id = s.id[k];
    if (id == DEM_DEAD) return;
    const double* q = s.pos + 3 * k;
    for (unsigned r = 0; r < n_regions; r++) {
        if (outflow_contains(regions[r], q, p)) {
            const unsigned j = atomicAdd(count, 1u);
            if (j < cap) {
                list[3 * j] = id;
                list[3 * j + 1] = s.species ? s.species[k] : 0u;
                list[3 * j + 2] = step;
            }
            alive[id] = 0u;
            s.id[k] = DEM_DEAD;
            return;
        }
    }
}
