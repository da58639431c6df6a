// Particle-triangle geometry: twins of solver/src/core/geometry/triangle.rs (closest point) and of
// the mesh section of solver/src/dem/cpu/contacts.rs (hit test, normal). Geometry is double in both
// precisions (positions are double); the same operations in the same order as the Rust code, so
// the parity mode (double, no FMA contraction) reproduces it bit for bit.

// geometry::BodyTransform::wall_velocity: velocity + omega x (q - center), the surface velocity of a
// mesh at world point q.
__device__ __forceinline__ dvec3 wall_velocity(const MeshBody& body, dvec3 q) {
    return dadd3(dload3(body.velocity), dcross3(dload3(body.omega), dsub3(q, dload3(body.center))));
}

// geometry::TriRegion
#define DEM_TRI_FACE 0
#define DEM_TRI_EDGE 1
#define DEM_TRI_VERTEX 2

// geometry::closest_point_on_triangle (Ericson 5.1.5): closest point q of triangle (a, b, c) to p;
// returns the region.
__device__ __forceinline__ int closest_point_on_triangle(dvec3 p, dvec3 a, dvec3 b, dvec3 c, dvec3* q) {
    const dvec3 ab = dsub3(b, a);
    const dvec3 ac = dsub3(c, a);
    const dvec3 ap = dsub3(p, a);
    const double d1 = ddot3(ab, ap);
    const double d2 = ddot3(ac, ap);
    if (d1 <= 0.0 && d2 <= 0.0) {
        *q = a;
        return DEM_TRI_VERTEX;
    }
    const dvec3 bp = dsub3(p, b);
    const double d3 = ddot3(ab, bp);
    const double d4 = ddot3(ac, bp);
    if (d3 >= 0.0 && d4 <= d3) {
        *q = b;
        return DEM_TRI_VERTEX;
    }
    const double vc = d1 * d4 - d3 * d2;
    if (vc <= 0.0 && d1 >= 0.0 && d3 <= 0.0) {
        const double v = d1 / (d1 - d3);
        *q = daxpy3(a, ab, v);
        return DEM_TRI_EDGE;
    }
    const dvec3 cp = dsub3(p, c);
    const double d5 = ddot3(ab, cp);
    const double d6 = ddot3(ac, cp);
    if (d6 >= 0.0 && d5 <= d6) {
        *q = c;
        return DEM_TRI_VERTEX;
    }
    const double vb = d5 * d2 - d1 * d6;
    if (vb <= 0.0 && d2 >= 0.0 && d6 <= 0.0) {
        const double w = d2 / (d2 - d6);
        *q = daxpy3(a, ac, w);
        return DEM_TRI_EDGE;
    }
    const double va = d3 * d6 - d5 * d4;
    if (va <= 0.0 && (d4 - d3) >= 0.0 && (d5 - d6) >= 0.0) {
        const double w = (d4 - d3) / ((d4 - d3) + (d5 - d6));
        *q = daxpy3(b, dsub3(c, b), w);
        return DEM_TRI_EDGE;
    }
    const double denom = 1.0 / (va + vb + vc);
    const double v = vb * denom;
    const double w = vc * denom;
    *q = dadd3(a, dadd3(dscale3(ab, v), dscale3(ac, w)));
    return DEM_TRI_FACE;
}

// A touching triangle (cpu::contacts MeshHit): closest point, unit normal from the particle
// centre towards it, centre distance, region.
struct MeshHit {
    dvec3 q;
    dvec3 n;
    double dist;
    int region;
};

// Whether the sphere (p, r) touches global triangle g; fills `h` if so (cpu::contacts, meshes).
__device__ __forceinline__ bool mesh_hit(const MeshArrays& m, unsigned g, dvec3 p, double r, MeshHit* h) {
    const double* t = m.tris + 9 * (size_t)g;
    const dvec3 a = dload3(t), b = dload3(t + 3), c = dload3(t + 6);
    dvec3 q;
    const int region = closest_point_on_triangle(p, a, b, c, &q);
    const dvec3 d = dsub3(q, p);
    const double dist2 = ddot3(d, d);
    if (dist2 >= r * r) return false;
    const double dist = sqrt(dist2);
    dvec3 n;
    if (dist > 0.0) {
        n = dscale3(d, 1.0 / dist);
    } else {
        // vec3::normalize_or_zero(cross(b - a, c - a))
        const dvec3 f = dcross3(dsub3(b, a), dsub3(c, a));
        const double len = sqrt(ddot3(f, f));
        n = len > 0.0 ? dscale3(f, 1.0 / len) : dv3(0.0, 0.0, 0.0);
    }
    h->q = q;
    h->n = n;
    h->dist = dist;
    h->region = region;
    return true;
}

// First index of `cells[0..n)` (sorted ascending) not below `c`.
__device__ __forceinline__ unsigned bins_lower_bound(const unsigned* cells, unsigned n, unsigned c) {
    unsigned lo = 0, hi = n;
    while (lo < hi) {
        const unsigned mid = lo + (hi - lo) / 2;
        if (cells[mid] < c)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

// Walks the candidates of one cell, the fixed and the moving bins merged: ascending global
// triangle index, as MeshWorld::candidates returns them.
struct BinCursor {
    unsigned f, fe, m, me;
};

// End of the run of `c` that starts at `lo` in the sorted `cells[0..n)` (lo itself if none):
// galloping, then bisection, so a run of 64 costs about 12 loads, not 64 dependent ones.
__device__ __forceinline__ unsigned bins_run_end(const unsigned* cells, unsigned n, unsigned lo, unsigned c) {
    if (lo >= n || cells[lo] != c) return lo;
    unsigned a = lo, b = lo + 1, s = 1;
    while (b < n && cells[b] == c) {
        a = b;
        s <<= 1;
        b = lo + s;
    }
    if (b > n) b = n;
    a++;
    while (a < b) {
        const unsigned mid = a + (b - a) / 2;
        if (cells[mid] == c)
            a = mid + 1;
        else
            b = mid;
    }
    return a;
}

__device__ __forceinline__ BinCursor bins_of_cell(const MeshArrays& ms, unsigned cell) {
    BinCursor c;
    c.f = bins_lower_bound(ms.fixed_cell, ms.n_fixed, cell);
    c.fe = bins_run_end(ms.fixed_cell, ms.n_fixed, c.f, cell);
    c.m = bins_lower_bound(ms.moving_cell, ms.n_moving, cell);
    c.me = bins_run_end(ms.moving_cell, ms.n_moving, c.m, cell);
    return c;
}

__device__ __forceinline__ bool bins_done(const BinCursor& c) { return c.f >= c.fe && c.m >= c.me; }

// The next candidate (the cursor must not be done).
__device__ __forceinline__ unsigned bins_peek(const MeshArrays& ms, const BinCursor& c) {
    if (c.f < c.fe && (c.m >= c.me || ms.fixed_tri[c.f] < ms.moving_tri[c.m])) return ms.fixed_tri[c.f];
    return ms.moving_tri[c.m];
}

__device__ __forceinline__ unsigned bins_take(const MeshArrays& ms, BinCursor& c) {
    if (c.f < c.fe && (c.m >= c.me || ms.fixed_tri[c.f] < ms.moving_tri[c.m])) return ms.fixed_tri[c.f++];
    return ms.moving_tri[c.m++];
}

// The touching candidates of a cell found by dem_mesh_filter, as a cursor like BinCursor (same
// ascending triangle order, both lists merged), over the hits only: bit j of `fm` (`mm`) is
// candidate j of the cell's fixed (moving) bins, which start at f0 (m0).
struct HitCursor {
    unsigned long long fm, mm;
    unsigned f0, m0;
};

// A filter mask that stands for "more than 64 candidates: not screened" (the collide walks the
// bins; a list of 64 that all touch reads the same and is walked too).
#define DEM_HITS_UNSCREENED 0xffffffffffffffffull

__device__ __forceinline__ bool bins_done(const HitCursor& c) { return c.fm == 0 && c.mm == 0; }

// The triangles at the heads of the fixed and the moving hit lists (0xffffffff for an empty one).
__device__ __forceinline__ void hit_heads(const MeshArrays& ms, const HitCursor& c, unsigned& a, unsigned& b) {
    a = c.fm ? ms.fixed_tri[c.f0 + __ffsll((long long)c.fm) - 1] : 0xffffffffu;
    b = c.mm ? ms.moving_tri[c.m0 + __ffsll((long long)c.mm) - 1] : 0xffffffffu;
}

__device__ __forceinline__ unsigned bins_peek(const MeshArrays& ms, const HitCursor& c) {
    unsigned a, b;
    hit_heads(ms, c, a, b);
    return a < b ? a : b;
}

__device__ __forceinline__ unsigned bins_take(const MeshArrays& ms, HitCursor& c) {
    unsigned a, b;
    hit_heads(ms, c, a, b);
    if (a < b) {
        c.fm &= c.fm - 1;
        return a;
    }
    c.mm &= c.mm - 1;
    return b;
}
