// 3-vector helpers: the CUDA twins of solver/src/core/vec3.rs (same names with a `3` suffix;
// `d...3` for the double vectors that positions and mesh geometry use in both precisions).
//
// `real` is the precision of velocities, forces and contact quantities: float by default,
// double when the module is compiled with -DDEM_DOUBLE (parity runs against the f64 CPU
// reference). Positions are always double (see contact.cu).

#ifdef DEM_DOUBLE
typedef double real;
#else
typedef float real;
#endif

struct real3 {
    real x, y, z;
};

__device__ __forceinline__ real3 make_real3(real x, real y, real z) {
    real3 r;
    r.x = x;
    r.y = y;
    r.z = z;
    return r;
}
__device__ __forceinline__ real3 zero3() { return make_real3(0, 0, 0); }
__device__ __forceinline__ real3 add3(real3 a, real3 b) { return make_real3(a.x + b.x, a.y + b.y, a.z + b.z); }
__device__ __forceinline__ real3 sub3(real3 a, real3 b) { return make_real3(a.x - b.x, a.y - b.y, a.z - b.z); }
__device__ __forceinline__ real3 scale3(real3 a, real s) { return make_real3(a.x * s, a.y * s, a.z * s); }
// a + b * s (vec3::axpy)
__device__ __forceinline__ real3 axpy3(real3 a, real3 b, real s) {
    return make_real3(a.x + b.x * s, a.y + b.y * s, a.z + b.z * s);
}
__device__ __forceinline__ real3 neg3(real3 a) { return make_real3(-a.x, -a.y, -a.z); }
__device__ __forceinline__ real dot3(real3 a, real3 b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
__device__ __forceinline__ real3 cross3(real3 a, real3 b) {
    return make_real3(a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x);
}
__device__ __forceinline__ real norm23(real3 a) { return dot3(a, a); }
__device__ __forceinline__ real norm3(real3 a) { return sqrt(dot3(a, a)); }

__device__ __forceinline__ real3 load3(const real* p, unsigned i) {
    return make_real3(p[3 * i], p[3 * i + 1], p[3 * i + 2]);
}
__device__ __forceinline__ void store3(real* p, unsigned i, real3 v) {
    p[3 * i] = v.x;
    p[3 * i + 1] = v.y;
    p[3 * i + 2] = v.z;
}

// Double 3-vectors (positions, mesh geometry): the same helpers with a `d` prefix.
struct dvec3 {
    double x, y, z;
};

__device__ __forceinline__ dvec3 dv3(double x, double y, double z) {
    dvec3 r;
    r.x = x;
    r.y = y;
    r.z = z;
    return r;
}
__device__ __forceinline__ dvec3 dadd3(dvec3 a, dvec3 b) { return dv3(a.x + b.x, a.y + b.y, a.z + b.z); }
__device__ __forceinline__ dvec3 dsub3(dvec3 a, dvec3 b) { return dv3(a.x - b.x, a.y - b.y, a.z - b.z); }
__device__ __forceinline__ dvec3 dscale3(dvec3 a, double s) { return dv3(a.x * s, a.y * s, a.z * s); }
// a + b * s (vec3::axpy)
__device__ __forceinline__ dvec3 daxpy3(dvec3 a, dvec3 b, double s) {
    return dv3(a.x + b.x * s, a.y + b.y * s, a.z + b.z * s);
}
__device__ __forceinline__ double ddot3(dvec3 a, dvec3 b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
__device__ __forceinline__ dvec3 dcross3(dvec3 a, dvec3 b) {
    return dv3(a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x);
}
__device__ __forceinline__ dvec3 dload3(const double* p) { return dv3(p[0], p[1], p[2]); }
__device__ __forceinline__ real3 to_real3(dvec3 a) { return make_real3((real)a.x, (real)a.y, (real)a.z); }
