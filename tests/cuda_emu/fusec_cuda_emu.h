/* fusec_cuda_emu.h: CUDA semantics on the CPU, for the tests (docs/cuda_emu.md).
 *
 * The CUDA C that codegen/cuda.c emits (kernels and the AOT host launcher) is compiled by the
 * host C++ compiler (C++17) against this header and linked with fusec_cuda_emu.cc, which runs
 * every block of a launch on one OS thread of a small pool and every CUDA thread of the block
 * as a fiber (its own stack, a hand-written context switch). What the header provides:
 *   - the keywords: __global__ __device__ __host__ __forceinline__ __launch_bounds__(n)
 *     __align__(n) __restrict__ (native), __shared__ (see below);
 *   - threadIdx blockIdx blockDim gridDim warpSize, per fiber;
 *   - the 16-byte vector types float4 int4 uint4 double2 longlong2 (alignas(16): a
 *     misaligned vector access faults, as it does on a GPU);
 *   - __syncthreads() (a barrier among the block's fibers, checked: every live thread must
 *     reach the same __syncthreads), __syncwarp, __shfl_sync/_xor/_down/_up, __ballot_sync,
 *     __any_sync, __all_sync, __reduce_max_sync (the lanes named by the mask meet in a
 *     per-warp exchange area), __activemask (the lanes of the caller's warp that exist);
 *   - atomics (real atomics: blocks run concurrently on different OS threads);
 *   - the math functions of <cmath> plus the CUDA-only ones (rsqrtf, __expf, ...), bit casts
 *     (__float_as_uint, __longlong_as_double, ...), integer intrinsics (__popc, __clz, __umulhi, ...);
 *   - __half / __nv_bfloat16 with their conversions (round to nearest even);
 *   - the host API the AOT unit uses (cudaStream_t, cudaGetLastError, cudaMemsetAsync,
 *     cudaMemcpyAsync, cudaStreamSynchronize, cudaMalloc, cudaFuncSetAttribute for the
 *     dynamic shared memory limit, ...): host memory, synchronous.
 *
 * Two constructs need a textual rewrite of the source (tests/unit/test_cuda_emu.c does it):
 *   - `k<<<grid, block, smem, stream>>>(args)` becomes
 *     `::fcemu::launcher(k, "k", BOUND, grid, block, smem, stream)(args)` (BOUND: the kernel's
 *     __launch_bounds__, 0 if none; a launch with more threads fails as on a GPU);
 *   - `__shared__ T name[N]...;` becomes `FCEMU_SHARED(T, name, [N]...);` and
 *     `extern __shared__ T name[];` becomes `FCEMU_DYN_SHARED(T, name);`: shared arrays then
 *     live in per-worker buffers that are refilled with 0xFF bytes at the start of every block
 *     and end at a guard page (PROT_NONE), so that a missing barrier reads garbage and an
 *     index past the end faults. Without the rewrite, __shared__ falls back to
 *     `static thread_local` (one copy per OS thread, which runs one block at a time: correct
 *     but unpoisoned).
 *
 * Invariants: a fiber never migrates between OS threads (so thread-local state is the
 * fiber's block's); fibers of one block run one at a time and switch only inside the calls
 * above that synchronize (barriers, warp operations), so the interleaving is a deterministic
 * function of the launch order (forward or reverse), which the tests vary.
 */
#ifndef FUSEC_CUDA_EMU_H
#define FUSEC_CUDA_EMU_H

#include <cmath>
#include <math.h>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

/* the cvt instructions the generated conversion helpers wrap (fc_cvt_*), modelled */
#include "fusec_ptx_cvt.h"

/* ---- types of the CUDA runtime ---------------------------------------------------------- */
struct uint3 { unsigned int x, y, z; };
/* the vector types of 16-byte accesses (codegen/cuda.c's vec loops), aligned as on a GPU */
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(16) int4 { int x, y, z, w; };
struct alignas(16) uint4 { unsigned int x, y, z, w; };
struct alignas(16) double2 { double x, y; };
struct alignas(16) longlong2 { long long x, y; };
struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
};
typedef struct CUstream_st *cudaStream_t;
enum cudaError_t {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorLaunchOutOfResources = 701,
    cudaErrorLaunchFailure = 719
};
enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0, cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3, cudaMemcpyDefault = 4
};

/* ---- the runtime's interface (fusec_cuda_emu.cc) ------------------------------------------ */
namespace fcemu {
struct Ctx {                 /* one per fiber: what the CUDA built-in variables read */
    uint3 thread_idx;
    uint3 block_idx;
    dim3 block_dim;
    dim3 grid_dim;
    unsigned int linear;     /* thread index within the block, x fastest */
};
extern __thread Ctx *cur_ctx;    /* the fiber running on this OS thread */

typedef void (*ThreadFn)(void *closure);
/* Runs fn(closure) in every thread of every block; returns cudaSuccess or the launch error
 * (the reason: fcemu_last_error()). bound: the kernel's __launch_bounds__ (0: none). */
cudaError_t launch_erased(const char *name, const void *key, dim3 grid, dim3 block, size_t dyn_smem, unsigned bound,
                          ThreadFn fn, void *closure);
/* cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes): a launch of k
 * may then use up to `bytes` (at most 227 KiB, sm_90's opt-in); without it, 48 KiB. */
cudaError_t set_max_dynamic_shared(const void *key, int bytes);
void set_last_error(cudaError_t e);
cudaError_t take_last_error(void);
cudaError_t peek_last_error(void);

void syncthreads(int line);
/* All lanes of `mask` in this warp meet; each passes v and gets the value of lane `src`
 * (its own value when src < 0; 0xFF bytes when src is a lane outside the mask). */
unsigned long long warp_exchange(unsigned mask, unsigned long long v, int src, int line);
/* All lanes of `mask` meet; returns the ballot of pred over them. */
unsigned warp_vote(unsigned mask, bool pred, int line);
/* All lanes of `mask` meet; returns the largest of their v (unsigned order). */
unsigned warp_max(unsigned mask, unsigned v, int line);
/* The lanes of the calling thread's warp that exist (a partial last warp has fewer). */
unsigned warp_lanes(void);
void syncwarp(int line, unsigned mask = 0xffffffffu);
/* Shared memory of the running block (see the rewrite above). site: a per-declaration key. */
void *shared_slot(const void *site, size_t bytes, size_t align, const char *name);
void *dynamic_shared(void);
void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));  /* aborts the launch */

inline unsigned lane_id() { return cur_ctx->linear & 31u; }

template <class T> inline unsigned long long to_bits(T v) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffle of a type over 8 bytes");
    unsigned long long b = 0;
    std::memcpy(&b, &v, sizeof v);
    return b;
}
template <class T> inline T from_bits(unsigned long long b) {
    T v;
    std::memcpy(&v, &b, sizeof v);
    return v;
}
inline int check_width(int width, int line) {
    if (width < 1 || width > 32 || (width & (width - 1)) != 0)
        fail("line %d: shuffle width %d is not a power of two in [1, 32]", line, width);
    return width;
}
template <class T> inline T shfl_idx(int line, unsigned mask, T v, int src, int width = 32) {
    check_width(width, line);
    int lane = (int)lane_id(), base = lane & ~(width - 1);
    int s = base + (int)((unsigned)src % (unsigned)width);
    return from_bits<T>(warp_exchange(mask, to_bits(v), s, line));
}
template <class T> inline T shfl_xor(int line, unsigned mask, T v, int lane_mask, int width = 32) {
    check_width(width, line);
    int lane = (int)lane_id(), base = lane & ~(width - 1);
    int s = lane ^ lane_mask;
    if (s < base || s >= base + width) s = -1;   /* outside the segment: own value */
    return from_bits<T>(warp_exchange(mask, to_bits(v), s, line));
}
template <class T> inline T shfl_down(int line, unsigned mask, T v, unsigned delta, int width = 32) {
    check_width(width, line);
    int lane = (int)lane_id(), base = lane & ~(width - 1);
    int s = lane + (int)delta;
    if (s >= base + width) s = -1;
    return from_bits<T>(warp_exchange(mask, to_bits(v), s, line));
}
template <class T> inline T shfl_up(int line, unsigned mask, T v, unsigned delta, int width = 32) {
    check_width(width, line);
    int lane = (int)lane_id(), base = lane & ~(width - 1);
    int s = lane - (int)delta;
    if (s < base) s = -1;
    return from_bits<T>(warp_exchange(mask, to_bits(v), s, line));
}

/* A kernel bound to its launch configuration; calling it with the arguments launches. */
template <class... P> struct Launcher {
    void (*k)(P...);
    const char *name;
    unsigned bound;
    dim3 grid, block;
    size_t smem;
    template <class... A> void operator()(A &&...a) const {
        static_assert(sizeof...(A) == sizeof...(P), "wrong number of kernel arguments");
        std::tuple<P...> args(static_cast<P>(std::forward<A>(a))...);
        void (*fn)(P...) = k;
        auto call = [&]() { std::apply(fn, args); };
        set_last_error(launch_erased(name, reinterpret_cast<const void *>(k), grid, block, smem, bound,
                                     [](void *c) { (*static_cast<decltype(call) *>(c))(); }, &call));
    }
};
template <class... P>
inline Launcher<P...> launcher(void (*k)(P...), const char *name, unsigned bound, dim3 grid, dim3 block,
                               size_t smem = 0, cudaStream_t stream = nullptr) {
    (void)stream;
    return Launcher<P...>{k, name, bound, grid, block, smem};
}

/* IEEE binary16 / bfloat16 from and to f32, round to nearest even (independent of the
 * helpers the generated code carries). */
inline unsigned short f32_to_f16_bits(float f) {
    unsigned int x;
    std::memcpy(&x, &f, 4);
    unsigned int sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (unsigned short)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);           /* >= 65520: inf */
    if (ax < 0x38800000u) {                                                   /* subnormal */
        float a;
        std::memcpy(&a, &ax, 4);
        return (unsigned short)(sign | (unsigned int)std::nearbyint(a * 16777216.0f));
    }
    unsigned int r = ax - 0x38000000u;                                        /* rebias 127 -> 15 */
    r = (r + 0xfffu + ((r >> 13) & 1u)) >> 13;
    return (unsigned short)(sign | r);
}
inline float f16_bits_to_f32(unsigned short h) {
    unsigned int sign = ((unsigned int)h & 0x8000u) << 16, e = ((unsigned int)h >> 10) & 0x1fu,
                 m = (unsigned int)h & 0x3ffu, x;
    if (e == 0x1fu) x = sign | 0x7f800000u | (m << 13);
    else if (e == 0u) {
        float r = std::ldexp((float)m, -24);
        return sign ? -r : r;
    } else x = sign | ((e + 112u) << 23) | (m << 13);
    float f;
    std::memcpy(&f, &x, 4);
    return f;
}
inline unsigned short f32_to_bf16_bits(float f) {
    unsigned int x;
    std::memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (unsigned short)(x >> 16);
}
inline float bf16_bits_to_f32(unsigned short h) {
    unsigned int x = (unsigned int)h << 16;
    float f;
    std::memcpy(&f, &x, 4);
    return f;
}
} /* namespace fcemu */

/* Exported by the runtime for the test runner (C linkage). */
extern "C" const char *fcemu_last_error(void);           /* why the last launch failed */
extern "C" void fcemu_set_reverse(int reverse);          /* schedule threads and blocks backwards */
extern "C" int fcemu_describe_fault(const void *addr, char *buf, size_t len);

/* ---- keywords ------------------------------------------------------------------------------ */
#define __global__
#define __device__
#define __host__
#define __noinline__ __attribute__((noinline))
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
#define __constant__ static
#define __shared__ static thread_local
#define __managed__
#define __CUDA_ARCH__ 900
#define FCEMU_SHARED(T, name, dims)                                                              \
    static const char fcemu_site_##name = 0;                                                     \
    T(&name) dims = *reinterpret_cast<T(*) dims>(                                                \
        ::fcemu::shared_slot(&fcemu_site_##name, sizeof(T dims), alignof(T), #name))
#define FCEMU_DYN_SHARED(T, name) T *const name = reinterpret_cast<T *>(::fcemu::dynamic_shared())

/* ---- built-in variables ---------------------------------------------------------------------- */
#define threadIdx (::fcemu::cur_ctx->thread_idx)
#define blockIdx (::fcemu::cur_ctx->block_idx)
#define blockDim (::fcemu::cur_ctx->block_dim)
#define gridDim (::fcemu::cur_ctx->grid_dim)
#define warpSize 32

/* ---- synchronization and warp operations -------------------------------------------------------- */
#define __syncthreads() ::fcemu::syncthreads(__LINE__)
#define __syncwarp(...) ::fcemu::syncwarp(__LINE__, ##__VA_ARGS__)
#define __shfl_sync(...) ::fcemu::shfl_idx(__LINE__, __VA_ARGS__)
#define __shfl_xor_sync(...) ::fcemu::shfl_xor(__LINE__, __VA_ARGS__)
#define __shfl_down_sync(...) ::fcemu::shfl_down(__LINE__, __VA_ARGS__)
#define __shfl_up_sync(...) ::fcemu::shfl_up(__LINE__, __VA_ARGS__)
#define __ballot_sync(mask, pred) ::fcemu::warp_vote((mask), (pred) != 0, __LINE__)
#define __any_sync(mask, pred) (::fcemu::warp_vote((mask), (pred) != 0, __LINE__) != 0u ? 1 : 0)
#define __all_sync(mask, pred) \
    (::fcemu::fcemu_all_helper((mask), ::fcemu::warp_vote((mask), (pred) != 0, __LINE__)))
#define __reduce_max_sync(mask, v) ::fcemu::reduce_max((mask), (v), __LINE__)
namespace fcemu {
inline int fcemu_all_helper(unsigned mask, unsigned ballot) { return (ballot & mask) == mask ? 1 : 0; }
inline unsigned reduce_max(unsigned mask, unsigned v, int line) { return warp_max(mask, v, line); }
inline int reduce_max(unsigned mask, int v, int line) {   /* signed: the order of v ^ 0x80000000 unsigned */
    return (int)(warp_max(mask, (unsigned)v ^ 0x80000000u, line) ^ 0x80000000u);
}
}
/* Every existing lane of the warp: the code fusec emits calls it only where all of them arrive
 * converged (a fiber cannot tell which lanes a GPU would have diverged). */
static inline unsigned __activemask() { return ::fcemu::warp_lanes(); }
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __trap() { ::fcemu::fail("__trap() called"); }

/* ---- atomics (real ones: blocks run concurrently) ------------------------------------------------ */
#define FCEMU_INT_ATOMICS(T)                                                                              \
    static inline T atomicAdd(T *a, T v) { return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST); }         \
    static inline T atomicSub(T *a, T v) { return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST); }         \
    static inline T atomicExch(T *a, T v) { return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST); }       \
    static inline T atomicAnd(T *a, T v) { return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST); }         \
    static inline T atomicOr(T *a, T v) { return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST); }           \
    static inline T atomicXor(T *a, T v) { return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST); }         \
    static inline T atomicCAS(T *a, T cmp, T v) {                                                        \
        __atomic_compare_exchange_n(a, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);              \
        return cmp;                                                                                      \
    }                                                                                                    \
    static inline T atomicMax(T *a, T v) {                                                               \
        T o = __atomic_load_n(a, __ATOMIC_SEQ_CST);                                                      \
        while (o < v && !__atomic_compare_exchange_n(a, &o, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) \
            ;                                                                                            \
        return o;                                                                                        \
    }                                                                                                    \
    static inline T atomicMin(T *a, T v) {                                                               \
        T o = __atomic_load_n(a, __ATOMIC_SEQ_CST);                                                      \
        while (o > v && !__atomic_compare_exchange_n(a, &o, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) \
            ;                                                                                            \
        return o;                                                                                        \
    }
FCEMU_INT_ATOMICS(int)
FCEMU_INT_ATOMICS(unsigned int)
FCEMU_INT_ATOMICS(long long)
FCEMU_INT_ATOMICS(unsigned long long)
#undef FCEMU_INT_ATOMICS
static inline unsigned int atomicInc(unsigned int *a, unsigned int lim) {
    unsigned int o = __atomic_load_n(a, __ATOMIC_SEQ_CST);
    while (!__atomic_compare_exchange_n(a, &o, o >= lim ? 0u : o + 1u, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        ;
    return o;
}
static inline unsigned int atomicDec(unsigned int *a, unsigned int lim) {
    unsigned int o = __atomic_load_n(a, __ATOMIC_SEQ_CST);
    while (!__atomic_compare_exchange_n(a, &o, (o == 0u || o > lim) ? lim : o - 1u, true, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST))
        ;
    return o;
}
/* Floating-point atomics: a compare-and-swap loop on the bits. */
#define FCEMU_FLOAT_ATOMIC(T, U, NAME, EXPR)                                                     \
    static inline T NAME(T *a, T v) {                                                            \
        U *u = reinterpret_cast<U *>(a);                                                         \
        U ob = __atomic_load_n(u, __ATOMIC_SEQ_CST), nb;                                         \
        T o;                                                                                     \
        do {                                                                                     \
            std::memcpy(&o, &ob, sizeof o);                                                      \
            T n = (EXPR);                                                                        \
            std::memcpy(&nb, &n, sizeof n);                                                      \
        } while (!__atomic_compare_exchange_n(u, &ob, nb, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)); \
        return o;                                                                                \
    }
FCEMU_FLOAT_ATOMIC(float, unsigned int, atomicAdd, o + v)
FCEMU_FLOAT_ATOMIC(double, unsigned long long, atomicAdd, o + v)
FCEMU_FLOAT_ATOMIC(float, unsigned int, atomicExch, v)
FCEMU_FLOAT_ATOMIC(double, unsigned long long, atomicExch, v)
#undef FCEMU_FLOAT_ATOMIC

/* ---- bit casts and integer intrinsics ------------------------------------------------------------ */
static inline float __uint_as_float(unsigned int x) { return ::fcemu::from_bits<float>(x); }
static inline float __int_as_float(int x) { return ::fcemu::from_bits<float>((unsigned int)x); }
static inline unsigned int __float_as_uint(float x) { return (unsigned int)::fcemu::to_bits(x); }
static inline int __float_as_int(float x) { return (int)(unsigned int)::fcemu::to_bits(x); }
static inline double __longlong_as_double(long long x) { return ::fcemu::from_bits<double>((unsigned long long)x); }
static inline long long __double_as_longlong(double x) { return (long long)::fcemu::to_bits(x); }
static inline int __popc(unsigned int x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x ? __builtin_clz((unsigned int)x) : 32; }
static inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline unsigned int __umulhi(unsigned int x, unsigned int y) { return (unsigned int)(((unsigned long long)x * y) >> 32); }
static inline unsigned long long __umul64hi(unsigned long long x, unsigned long long y) {
    return (unsigned long long)(((unsigned __int128)x * y) >> 64);
}
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned int __brev(unsigned int x) {
    unsigned int r = 0;
    for (int i = 0; i < 32; i++) r |= ((x >> i) & 1u) << (31 - i);
    return r;
}
template <class T> static inline T __ldg(const T *p) { return *p; }

/* ---- math: <cmath> plus what only CUDA has (glibc declares __expf, __logf, __sinf, __cosf,
 * __tanf and __powf itself, as the accurate functions) ------------------------------------------ */
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
/* the standard normal CDF (CUDA: 5 ulp for normcdff), through the host's erfc in f64 */
static inline double normcdf(double x) { return 0.5 * erfc(-x * 0.70710678118654752440); }
static inline float normcdff(float x) { return (float)normcdf((double)x); }
static inline float __fdividef(float x, float y) { return x / y; }
static inline float __frcp_rn(float x) { return 1.0f / x; }
static inline float __fsqrt_rn(float x) { return sqrtf(x); }
/* The _rn intrinsics are never contracted into an FMA on a GPU; here neither: the empty asm
 * makes the rounded result a value the compiler cannot see through. The runner's contraction
 * mode (docs/cuda_emu.md) defines FCEMU_CONTRACT_EVERYWHERE and compiles the unit to contract
 * every a*b + c: then they are plain operators, which models a GPU compiler left free to
 * contract everything (what nvcc --fmad=true does with code that does not use them). */
#if defined(FCEMU_CONTRACT_EVERYWHERE)
#define FCEMU_OPAQUE(v) (void)(v)
#elif defined(__x86_64__) || defined(__i386__)
#define FCEMU_OPAQUE(v) __asm__("" : "+x"(v))
#elif defined(__aarch64__)
#define FCEMU_OPAQUE(v) __asm__("" : "+w"(v))
#else
#define FCEMU_OPAQUE(v) __asm__("" : "+m"(v))
#endif
static inline float __fadd_rn(float x, float y) { float r = x + y; FCEMU_OPAQUE(r); return r; }
static inline float __fmul_rn(float x, float y) { float r = x * y; FCEMU_OPAQUE(r); return r; }
static inline double __dadd_rn(double x, double y) { double r = x + y; FCEMU_OPAQUE(r); return r; }
static inline double __dmul_rn(double x, double y) { double r = x * y; FCEMU_OPAQUE(r); return r; }
static inline float __fmaf_rn(float x, float y, float z) { return fmaf(x, y, z); }
static inline float __saturatef(float x) { return x != x ? 0.0f : x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }
static inline int __float2int_rz(float x) { return (int)x; }
static inline int __float2int_rn(float x) { return (int)nearbyintf(x); }
static inline float __int2float_rn(int x) { return (float)x; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline unsigned int max(unsigned int a, unsigned int b) { return a > b ? a : b; }
static inline unsigned int min(unsigned int a, unsigned int b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline float min(float a, float b) { return fminf(a, b); }
static inline double max(double a, double b) { return fmax(a, b); }
static inline double min(double a, double b) { return fmin(a, b); }

/* ---- half and bfloat16 ---------------------------------------------------------------------------- */
struct __half {
    unsigned short __x;
    __half() = default;
    __half(float f) : __x(::fcemu::f32_to_f16_bits(f)) {}
    operator float() const { return ::fcemu::f16_bits_to_f32(__x); }
};
struct __nv_bfloat16 {
    unsigned short __x;
    __nv_bfloat16() = default;
    __nv_bfloat16(float f) : __x(::fcemu::f32_to_bf16_bits(f)) {}
    operator float() const { return ::fcemu::bf16_bits_to_f32(__x); }
};
typedef __half half;
static inline __half __float2half(float f) { return __half(f); }
static inline __half __float2half_rn(float f) { return __half(f); }
static inline float __half2float(__half h) { return (float)h; }
static inline unsigned short __half_as_ushort(__half h) { return h.__x; }
static inline __half __ushort_as_half(unsigned short x) { __half h; h.__x = x; return h; }
static inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
static inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
static inline float __bfloat162float(__nv_bfloat16 h) { return (float)h; }
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
static inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short x) { __nv_bfloat16 h; h.__x = x; return h; }
#define FCEMU_HALF_OPS(H)                                                                  \
    static inline H __hadd(H a, H b) { return H((float)a + (float)b); }                    \
    static inline H __hsub(H a, H b) { return H((float)a - (float)b); }                    \
    static inline H __hmul(H a, H b) { return H((float)a * (float)b); }                    \
    static inline H __hdiv(H a, H b) { return H((float)a / (float)b); }                    \
    static inline H __hneg(H a) { return H(-(float)a); }                                   \
    static inline H __hfma(H a, H b, H c) { return H(fmaf((float)a, (float)b, (float)c)); } \
    static inline bool __hlt(H a, H b) { return (float)a < (float)b; }                     \
    static inline bool __hgt(H a, H b) { return (float)a > (float)b; }                     \
    static inline bool __heq(H a, H b) { return (float)a == (float)b; }                    \
    static inline bool __hisnan(H a) { return (float)a != (float)a; }                      \
    static inline H __hmax(H a, H b) { return H(fmaxf((float)a, (float)b)); }              \
    static inline H __hmin(H a, H b) { return H(fminf((float)a, (float)b)); }
FCEMU_HALF_OPS(__half)
FCEMU_HALF_OPS(__nv_bfloat16)
#undef FCEMU_HALF_OPS

/* ---- host API (host memory; everything completes before the call returns) ----------------------- */
static inline cudaError_t cudaGetLastError(void) { return ::fcemu::take_last_error(); }
static inline cudaError_t cudaPeekAtLastError(void) { return ::fcemu::peek_last_error(); }
static inline const char *cudaGetErrorString(cudaError_t e) {
    return e == cudaSuccess ? "no error" : e == cudaErrorLaunchFailure ? fcemu_last_error() : "emulated CUDA error";
}
static inline cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s = nullptr) {
    (void)s;
    if (!p && n) return cudaErrorInvalidValue;
    if (n) std::memset(p, v, n);
    return cudaSuccess;
}
static inline cudaError_t cudaMemset(void *p, int v, size_t n) { return cudaMemsetAsync(p, v, n); }
static inline cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind k, cudaStream_t st = nullptr) {
    (void)k;
    (void)st;
    if ((!d || !s) && n) return cudaErrorInvalidValue;
    if (n) std::memmove(d, s, n);
    return cudaSuccess;
}
static inline cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind k) { return cudaMemcpyAsync(d, s, n, k); }
static inline cudaError_t cudaStreamSynchronize(cudaStream_t s) { (void)s; return cudaSuccess; }
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
template <class... P> static inline cudaError_t cudaFuncSetAttribute(void (*k)(P...), cudaFuncAttribute a, int v) {
    if (a != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaErrorInvalidValue;
    return ::fcemu::set_max_dynamic_shared(reinterpret_cast<const void *>(k), v);
}
static inline cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
static inline cudaError_t cudaStreamCreate(cudaStream_t *s) { *s = nullptr; return cudaSuccess; }
static inline cudaError_t cudaStreamDestroy(cudaStream_t s) { (void)s; return cudaSuccess; }
static inline cudaError_t cudaMalloc(void **p, size_t n) {
    *p = std::malloc(n ? n : 1);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
static inline cudaError_t cudaFree(void *p) { std::free(p); return cudaSuccess; }

#endif
