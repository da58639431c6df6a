// Host stand-ins for the CUDA built-ins the kernels use, so that g++ can check the module sources'
// C++ (names declared before use, types, template instantiation) without NVRTC: see
// host_syntax.rs. Nothing here runs; the bodies only have to type-check.
#include <cmath>
#include <cstdint>
#define __device__
#define __global__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __shared__
#define __restrict__
struct uint3s { unsigned x, y, z; };
static uint3s threadIdx, blockIdx, blockDim, gridDim;
struct float4 { float x, y, z, w; };
struct float3 { float x, y, z; };
struct double3 { double x, y, z; };
struct int4 { int x, y, z, w; };
struct uint4 { unsigned x, y, z, w; };
struct uint2 { unsigned x, y; };
struct float2 { float x, y; };
struct double2 { double x, y; };
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
inline float3 make_float3(float a, float b, float c) { return {a, b, c}; }
inline double3 make_double3(double a, double b, double c) { return {a, b, c}; }
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a,b,c,d}; }
template <class T> T __shfl_sync(unsigned, T v, int) { return v; }
template <class T> T __shfl_xor_sync(unsigned, T v, int) { return v; }
template <class T> T __shfl_down_sync(unsigned, T v, int) { return v; }
template <class T> T __shfl_up_sync(unsigned, T v, int) { return v; }
inline unsigned __ballot_sync(unsigned, int) { return 0; }
inline unsigned __activemask() { return 0; }
inline int __any_sync(unsigned, int) { return 0; }
inline int __all_sync(unsigned, int) { return 0; }
inline int __popc(unsigned) { return 0; }
inline int __popcll(unsigned long long) { return 0; }
inline int __ffs(unsigned) { return 0; }
inline void __syncwarp(unsigned = 0xffffffffu) {}
inline void __syncthreads() {}
inline int __syncthreads_count(int p) { return p; }
inline void __threadfence() {}
inline void __threadfence_system() {}
template <class T> T atomicAdd(T* a, T v) { return *a; }
template <class T> T atomicMin(T* a, T v) { return *a; }
template <class T> T atomicMax(T* a, T v) { return *a; }
template <class T> T atomicCAS(T* a, T c, T v) { return *a; }
inline long long __double_as_longlong(double) { return 0; }
inline double __longlong_as_double(long long) { return 0; }
inline float __int_as_float(int) { return 0; }
inline int __float_as_int(float) { return 0; }
inline unsigned __float_as_uint(float) { return 0; }
inline float __uint_as_float(unsigned) { return 0; }
using std::sqrt; using std::fabs; using std::fmax; using std::fmin; using std::floor; using std::isfinite;
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline float rsqrtf(float x) { return 1 / std::sqrt(x); }
inline double rsqrt(double x) { return 1 / std::sqrt(x); }
template <class T> T __ldg(const T* p) { return *p; }
template <class T> T __ldcs(const T* p) { return *p; }
template <class T> void __stcs(T* p, T v) { *p = v; }
inline unsigned __match_any_sync(unsigned, unsigned) { return 0; }
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
inline int __ffsll(long long) { return 0; }
inline unsigned __reduce_max_sync(unsigned, unsigned v) { return v; }
inline unsigned __reduce_add_sync(unsigned, unsigned v) { return v; }
template <class T> T __ldcg(const T* p) { return *p; }
template <class T> T __ldca(const T* p) { return *p; }
template <class T> T __ldlu(const T* p) { return *p; }
template <class T> void __stcg(T* p, T v) { *p = v; }
template <class T> void __stwt(T* p, T v) { *p = v; }
