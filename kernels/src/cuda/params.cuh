// Parameter structs passed by value to every kernel. Mirrored field for field by
// solver/src/cuda/params.rs (#[repr(C)], with size asserts on both sides). Pointers are device
// addresses (8 bytes); a null pointer means "array not allocated for this configuration".

// Per-species constants, computed on the host in double (physics::sphere_mass, sphere_inertia).
struct SpeciesProps {
    double radius;   // [m]
    double mass;     // [kg]
    double inertia;  // [kg m^2]
    double pad;
};

// DemParams::integrate
#define DEM_INTEGRATE_EULER 0       // symplectic Euler: v += a dt, x += v dt, w += T dt / I
#define DEM_INTEGRATE_HALF_KICK 1   // velocity Verlet's closing half kick: v += a dt/2, w += T dt/2I
#define DEM_INTEGRATE_NONE 2        // forces only (Verlet's first step without valid forces)

// Which slots a collide kernel covers. A GPU of a group overlaps its ghost refresh with the
// collide (dem/cuda/multi.rs): dem_collide_interior collides every slot but those of the
// boundary layers whose ghosts are in flight, dem_collide_boundary those, once the ghosts have
// arrived. Each slot is collided by exactly one of the two, with the same arithmetic: the same
// bits as dem_collide.
#define DEM_PASS_ALL 0        // every slot 0..n (dem_collide)
#define DEM_PASS_INTERIOR 1   // every slot 0..n except the owned layers pass_skip[0..2]
#define DEM_PASS_BOUNDARY 2   // the slots pass_list[0..pass_count] only

// Id of a slot that holds no particle (an emigrant, a spent ghost): the hash puts it in the
// extra bucket after the last cell, so the sort moves it behind every live particle.
#define DEM_DEAD 0xFFFFFFFFu

struct HistEntry;

// Case-wide constants of one step.
struct DemParams {
    double origin[3];    // grid origin [m]
    double cell;         // grid cell edge [m]
    double dt;           // time step [s]
    double gravity[3];   // [m/s^2]
    double box_min[3];   // box walls [m]
    double box_max[3];
    unsigned dims[3];    // grid cells per axis
    unsigned n;          // particles
    unsigned walls;      // bit f: box face f (x_min, x_max, y_min, y_max, z_min, z_max) is a wall
    unsigned n_species;
    unsigned n_walls;    // wall materials (box face f = f, mesh k = 6 + k)
    unsigned hist_cap;   // contact history entries per particle
    unsigned hist_sc;    // history entry c of row r is at c * hist_sc + r * hist_sr: slot-major
    unsigned hist_sr;    //   (hist_sc = n, hist_sr = 1) or row-major (1, hist_cap)
    unsigned diag;       // 1: count contacts into DemDiag
    unsigned integrate;  // what dem_collide does after the forces: DEM_INTEGRATE_*
    unsigned split_axis; // axis of the GPUs' slabs (0 x, 1 y, 2 z)
    unsigned slab_lo;    // this GPU's slab: cell layers [slab_lo, slab_hi) along split_axis; the
    unsigned slab_hi;    //   particles outside are ghosts, read only (one GPU: 0, dims[axis])
    unsigned n_rows;     // dem_collide carries the history rows of slots [0, max(n, n_rows)): the
                         //   dead tail behind a group's live slots too
    const SpeciesProps* species;  // [n_species]
    const MaterialPair* pp;       // [n_species * n_species]
    const MaterialPair* pw;       // [n_species * n_walls]
    double reach;                 // largest particle contact distance, 2 r_max [m]: with a skin
                                  //   the collide searches ceil((reach + 2 D) / cell) cells around
                                  //   each particle's cell of the last search (GridArrays::dmax)
    unsigned list_cap;            // neighbour list entries per slot (GridArrays::nlist; 0: none)
    unsigned list_stride;         // entry c of slot k at c * list_stride + k
    const unsigned* pass_list;    // dem_collide_boundary: the slots it collides, [pass_count]
    unsigned pass_count;
    unsigned pass_skip[2];        // dem_collide_interior: owned layers left out (~0u: none)
    unsigned pass_pad;
    // Spill rows of a pairs-once history (DEM_HIST_SPILL, contact.cu; all 0 without): a row
    // whose entries outgrow hist_cap keeps its first hist_cap - 1 inline and the rest in a
    // spill row of spill_width entries, whose index its entry hist_cap - 1 holds (as partner).
    // Two buffers of spill_rows rows alternate: dem_springs reads a row's old spill row in
    // spill_cur and writes its new one in spill_next, taking it from the counter
    // spill_ctl[spill_sel] (zeroed before the launch); the kernels after it read spill_next.
    HistEntry* spill_cur;
    HistEntry* spill_next;
    unsigned* spill_ctl;          // [8]: rows asked for in spill buffers 0 and 1 (the last step that
                                  //   wrote each), the most any step asked for, the rows the
                                  //   next step will spill (dem_spill_count), the springs
                                  //   dem_adopt handed over (owner keys), 3 unused
    unsigned spill_rows;          // rows of each spill buffer (0: no spill rows)
    unsigned spill_width;         // entries of a spill row
    unsigned spill_sel;           // the counter of spill_next (0 or 1)
    unsigned spill_pad;
    // Owner keys (DEM_OWNER_KEYS): on the dem_springs of a step that searched, the adoption row
    // of each slot (an index into spill_next, or DEM_PARTNER_NONE), which dem_adopt wrote: the
    // springs of the pairs the slot keeps since this search that the other particle kept
    // before (contact.cu, dem_adopt). Null on every other launch.
    const unsigned* adopt;
};

// One contact history entry: a tangential spring and its partner (state::wall_partner, ...),
// packed so that an entry is one 16-byte load or store (two with double). Mirrored by the
// host's upload and download (dem/cuda/buffers.rs).
#ifdef DEM_DOUBLE
struct __align__(16) HistEntry {
    double x, y, z;
    unsigned partner;
    unsigned pad;
};
#else
struct __align__(16) HistEntry {
    float x, y, z;
    unsigned partner;
};
#endif

// Particle state in storage (sorted) order. Two of these exist (the state and the scratch copy
// the gather writes), or one (DEM_SINGLE_COPY, contact.cu); they share one contact history
// (hist_count, hist), addressed by row.
struct ParticleArrays {
    double* pos;             // [3n] positions [m]
    real* vel;               // [3n] velocities [m/s]
    real* omega;             // [3n] angular velocities [rad/s], null without rotation
    unsigned* id;            // [n] particle id
    unsigned* species;       // [n] species index, null with one species
    unsigned* hist_count;    // [n] entries in history row r (by row, not slot), null without friction
    HistEntry* hist;         // [hist_cap * n] entries, entry c of row r at DemParams::hist_sc/sr
                             //   (one buffer, the same in both sets: rows are never moved)
    real* force;             // [3n] contact force of the last step [N], null unless requested or Verlet
                             //   (DEM_SINGLE_COPY: always, the force buffer, torques behind it)
    unsigned* contacts;      // [n] contacts of the last step, null unless requested
    real* torque;            // [3n] contact torque of the last step [N m], velocity Verlet only
    unsigned* row;           // [n] history row of the slot k's particle (a permutation of 0..n over
                             // all slots, moved with the slots), null without friction and with
                             // owner keys (every slot's row is its slot)
    unsigned* key;           // [n] owner key of slot k (state::owner_key at the last search, moved
                             // with the slots), DEM_OWNER_KEYS only; null otherwise
};

// A frame of the state a collide reads, written by it in particle-id order (the kinematics
// of publish.cu's dem_pack, through dem_frame_put): one GPU defers a published frame's pack to
// the next step's collide, which loads every value anyway (dem/cuda/publish.rs). Null pos: no
// frame. 32 bytes, mirrored by dem/cuda/params.rs.
struct DemFrame {
    float* pos;            // [3 * count] positions [m], by frame index
    float* vel;            // [3 * count] velocities [m/s], null: not wanted
    float* omega;          // [3 * count] angular velocities [rad/s] (zeros without rotation), null: not wanted
    const unsigned* rank;  // [ids] frame index of each id (removed particles), null: the id
};

// Neighbour-search arrays.
struct GridArrays {
    unsigned* cell;   // [n] cell of each slot
    unsigned* rank;   // [n] arrival rank within its cell (from atomicAdd; fixed by cell_sort)
    unsigned* perm;   // [n] new slot k takes old slot perm[k]
    unsigned* count;  // [cells + 1] particles per cell, zero between steps
    unsigned* start;  // [cells + 1] exclusive scan of count
    // Verlet skin (one GPU, symplectic Euler; null otherwise): the search runs every few steps,
    // and in between the slots keep their order and cells (solver/src/dem/cuda/skin.rs).
    unsigned* scell;  // [n] cell of slot k at the last search (written by the gather)
    float* path;      // [n] distance slot k's particle has moved since then, rounded up [m]
    unsigned* dmax;   // [1] float bits of an upper bound of the largest path (atomicMax of
                      //   non-negative floats' bits, whose order is the floats' order)
    // Verlet list (with a skin, when it fits; null otherwise): at each search, the slots within
    // r_i + r_j + (cell - reach) of slot k, in the order the collide's cell walk meets them;
    // between searches, while 2 D <= cell - reach, the collide walks the list instead of the cells.
    unsigned* nlist;  // [list_cap * list_stride]
    unsigned* ncount; // [n] entries of slot k, or DEM_LIST_FULL (the collide walks the cells)
};

#define DEM_LIST_FULL 0xFFFFFFFFu

// Diagnostics accumulated by the collide kernel (integers only: deterministic).
struct DemDiag {
    unsigned long long contacts;   // particle-particle + wall contacts seen from each side
    unsigned hist_overflow;        // particles whose history exceeded hist_cap
    unsigned nonfinite;            // particles with a non-finite new state
};

// One mesh at the step's time: the velocity field of its geometry::BodyTransform (the wall
// velocity at world point q is velocity + omega x (q - center)) and its constants. 88 bytes.
struct MeshBody {
    double velocity[3];  // [m/s]
    double omega[3];     // [rad/s]
    double center[3];    // [m]
    unsigned first_tri;  // first global triangle
    unsigned n_tri;      // triangles of this mesh
    unsigned material;   // wall material (column of DemParams::pw)
    unsigned pad;
};

// Triangle meshes (geometry::MeshWorld): world triangles at the step's time and the grid bins,
// (cell, global triangle) sorted, of fixed and of moving meshes. All null / zero without meshes.
// 72 bytes.
struct MeshArrays {
    const double* tris;           // [9 * n_tris] world vertices a, b, c of each triangle [m]
    const unsigned* tri_mesh;     // [n_tris] mesh of each global triangle
    const MeshBody* bodies;       // [n_meshes]
    const unsigned* fixed_cell;   // [n_fixed] bins of fixed meshes, sorted by (cell, triangle)
    const unsigned* fixed_tri;    // [n_fixed]
    const unsigned* moving_cell;  // [n_moving] bins of moving meshes (made with a skin)
    const unsigned* moving_tri;   // [n_moving]
    unsigned n_fixed;
    unsigned n_moving;
    unsigned n_meshes;
    unsigned n_tris;
    // [2 * slots] or null: for the particle in slot k, bit j of [2k] ([2k + 1]) is set when
    // candidate j of its cell's fixed (moving) bins touches it (dem_mesh_filter, contact.cu).
    unsigned long long* hit_mask;
};
