/* selftest.cc: the emulator's own tests, hand-written CUDA run by tests/unit/test_cuda_emu.c
 * (which rewrites launches and __shared__ declarations as for generated code, compiles this
 * file and calls fcemu_selftest(which) in a child process, forward and reverse order).
 *
 * which: 0 warp operations (shuffles of every kind and width, votes, __syncwarp, a partial
 * warp, two half-warp masks at once, __activemask, __reduce_max_sync); 1 atomics across blocks; 2 dynamic shared memory;
 * 3 three-dimensional grids and blocks; then the errors the emulator must report, each
 * returning the launch error (the runner checks the message): 4 a barrier in divergent code,
 * 5 threads at different barriers, 6 a deadlock in a shuffle, 7 a shared index past the end
 * (a fault), 8 a shuffle mask without the caller, 9 a launch over __launch_bounds__,
 * 10 a thread's stack overflow (a fault), 11 dynamic shared memory past its end (a fault),
 * 12 the lanes of one mask at two different shuffles, 13 a reduction whose mask names lanes
 * that do not exist (a full mask in a partial warp).
 * Returns 0 when everything checked holds, a positive code otherwise (details on stderr).
 */
#include "fusec_cuda_emu.h"

#include <vector>

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "selftest %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            return 100 + __LINE__ % 100;                                               \
        }                                                                              \
    } while (0)

/* ---- 0: warp operations; out[t * 16 + k] = result k of thread t (block of 48: a partial warp) */
__global__ void st_warp(int *out) {
    unsigned t = threadIdx.x, lane = t & 31u;
    int *o = out + t * 16;
    unsigned full = t < 32 ? 0xffffffffu : 0xffffu;
    int v = (int)t * 10;
    int s = v;
    for (int off = 16; off >= 1; off /= 2) {
        int x = __shfl_xor_sync(full, s, off);
        if ((lane ^ (unsigned)off) < (t < 32 ? 32u : 16u)) s += x;
    }
    o[0] = s;                                             /* sum over the warp */
    o[1] = __shfl_sync(full, v, 5);                       /* lane 5 of the warp */
    o[2] = __shfl_sync(full, v, 3, 8);                    /* lane 3 of each group of 8 */
    o[3] = __shfl_down_sync(full, v, 1);                  /* next lane, own at the end */
    o[4] = __shfl_up_sync(full, v, 2);                    /* two lanes back, own at the start */
    o[5] = (int)__ballot_sync(full, lane & 1u);
    o[6] = __any_sync(full, lane == 7);
    o[7] = __all_sync(full, lane < 40);
    o[8] = __all_sync(full, lane != 3);
    __syncwarp(full);
    o[9] = __shfl_xor_sync(full, v, 16);                  /* partial warp: lanes past 16 are outside the mask */
    double d = __shfl_sync(full, (double)t + 0.5, 0);
    o[10] = (int)(d * 2.0);
    long long ll = __shfl_xor_sync(full, (long long)t << 40, 1);
    o[11] = (int)(ll >> 40);
    if (t < 32) {                                         /* two half-warps meet separately */
        unsigned half = lane < 16 ? 0x0000ffffu : 0xffff0000u;
        o[12] = __shfl_sync(half, v, lane < 16 ? 0 : 16);
    } else {
        o[12] = -7;
    }
    float f = __shfl_down_sync(full, 1.5f * (float)t, 4, 16);
    o[13] = (int)(f * 2.0f);
    o[14] = (int)__activemask();                          /* the lanes that exist */
    unsigned mx = __reduce_max_sync(__activemask(), (t * 37u) % 101u);
    int smx = __reduce_max_sync(full, (int)(t % 7u) - 3 - (int)t);
    o[15] = (int)mx * 1000 + smx;
}

static int test_warp(void) {
    const int n = 48;
    std::vector<int> out((size_t)n * 16, 0);
    int *d = out.data();
    st_warp<<<1, n>>>(d);
    int e = (int)cudaGetLastError();
    if (e) return e;
    for (int t = 0; t < n; t++) {
        const int *o = &out[(size_t)t * 16];
        int lane = t & 31, base = t & ~31, cnt = t < 32 ? 32 : 16;
        int sum = 0;
        for (int l = 0; l < cnt; l++) sum += (base + l) * 10;
        CHECK(o[0] == sum);
        CHECK(o[1] == (base + 5) * 10);
        CHECK(o[2] == (base + (lane & ~7) + 3) * 10);
        CHECK(o[3] == (lane + 1 < 32 && lane + 1 < cnt ? (t + 1) * 10 : lane + 1 >= 32 ? t * 10 : -1));
        CHECK(o[4] == (lane >= 2 ? (t - 2) * 10 : t * 10));
        CHECK((unsigned)o[5] == (t < 32 ? 0xaaaaaaaau : 0xaaaau));
        CHECK(o[6] == 1);
        CHECK(o[7] == 1);
        CHECK(o[8] == 0);
        CHECK(o[9] == (t < 32 ? (t ^ 16) * 10 : -1));    /* 0xFF bytes from a lane outside the mask */
        CHECK(o[10] == 2 * base + 1);
        CHECK(o[11] == (t ^ 1));
        CHECK(o[12] == (t < 32 ? (lane < 16 ? 0 : 160) : -7));
        int src = (lane & ~15) + (lane & 15) + 4;
        int want = (lane & 15) + 4 < 16 ? src + base : t;
        CHECK(o[13] == 3 * want);
        CHECK((unsigned)o[14] == (t < 32 ? 0xffffffffu : 0xffffu));
        int mx = 0, smx = INT_MIN;
        for (int l = 0; l < cnt; l++) {
            mx = ((base + l) * 37) % 101 > mx ? ((base + l) * 37) % 101 : mx;
            smx = (base + l) % 7 - 3 - (base + l) > smx ? (base + l) % 7 - 3 - (base + l) : smx;
        }
        CHECK(o[15] == mx * 1000 + smx);
    }
    return 0;
}

/* ---- 1: atomics ------------------------------------------------------------------------------ */
struct Acc { int count; float fsum; double dsum; int imax; int imin; unsigned long long cas; int exch; unsigned inc; };
__global__ void st_atomics(Acc *a) {
    int g = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    atomicAdd(&a->count, 1);
    atomicAdd(&a->fsum, 1.0f);
    atomicAdd(&a->dsum, 0.5);
    atomicMax(&a->imax, g);
    atomicMin(&a->imin, -g);
    unsigned long long old = a->cas, seen;
    while ((seen = atomicCAS(&a->cas, old, old + 3ull)) != old) old = seen;
    atomicExch(&a->exch, 42);
    atomicInc(&a->inc, 1000000u);
}

static int test_atomics(void) {
    Acc a = {0, 0.0f, 0.0, -1, 1, 0, 0, 0};
    st_atomics<<<50, 64>>>(&a);
    int e = (int)cudaGetLastError();
    if (e) return e;
    CHECK(a.count == 3200);
    CHECK(a.fsum == 3200.0f);
    CHECK(a.dsum == 1600.0);
    CHECK(a.imax == 3199);
    CHECK(a.imin == -3199);
    CHECK(a.cas == 9600ull);
    CHECK(a.exch == 42);
    CHECK(a.inc == 3200u);
    return 0;
}

/* ---- 2: dynamic shared memory: reversal through it, two views of one buffer -------------------- */
__global__ void st_dyn(float *out, int n) {
    extern __shared__ float buf[];
    extern __shared__ int ibuf[];
    int t = (int)threadIdx.x;
    buf[t] = (float)(t + 1) * (float)(blockIdx.x + 1);
    __syncthreads();
    out[blockIdx.x * (unsigned)n + (unsigned)t] = buf[n - 1 - t] + (ibuf[t] == __float_as_int(buf[t]) ? 0.0f : 1000.0f);
}

static int test_dyn(void) {
    const int n = 37;
    std::vector<float> out(3 * n, -1.0f);
    st_dyn<<<3, n, n * sizeof(float)>>>(out.data(), n);
    int e = (int)cudaGetLastError();
    if (e) return e;
    for (int b = 0; b < 3; b++)
        for (int t = 0; t < n; t++) CHECK(out[(size_t)(b * n + t)] == (float)(n - t) * (float)(b + 1));
    return 0;
}

/* ---- 3: 3-D grids and blocks ------------------------------------------------------------------ */
__global__ void st_3d(int *out) {
    __shared__ int tile[24];
    int lt = (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
    int lb = (int)(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z));
    tile[lt] = lb * 100 + lt;
    __syncthreads();
    int nt = (int)(blockDim.x * blockDim.y * blockDim.z);
    out[lb * nt + lt] = tile[nt - 1 - lt];
}

static int test_3d(void) {
    dim3 grid(3, 2, 2), block(4, 3, 2);
    std::vector<int> out(12 * 24, -1);
    st_3d<<<grid, block>>>(out.data());
    int e = (int)cudaGetLastError();
    if (e) return e;
    for (int b = 0; b < 12; b++)
        for (int t = 0; t < 24; t++) CHECK(out[(size_t)(b * 24 + t)] == b * 100 + 23 - t);
    return 0;
}

/* ---- 4..11: what the emulator must refuse ---------------------------------------------------------- */
__global__ void st_divergent(float *p) {
    if (threadIdx.x < 16) return;
    __syncthreads();
    p[threadIdx.x] = 1.0f;
}
__global__ void st_two_barriers(float *p) {
    if (threadIdx.x & 1u) {
        __syncthreads();
    } else {
        __syncthreads();
    }
    p[threadIdx.x] = 1.0f;
}
__global__ void st_deadlock(float *p) {
    float v = (float)threadIdx.x;
    if (threadIdx.x == 0) v = __shfl_sync(0xffffffffu, v, 1);
    p[threadIdx.x] = v;
}
__global__ void st_shared_past_end(float *p) {
    __shared__ float s[64];
    s[threadIdx.x + 1] = 1.0f;
    __syncthreads();
    p[threadIdx.x] = s[threadIdx.x];
}
__global__ void st_mask(float *p) {
    float v = (float)threadIdx.x;
    if (threadIdx.x < 2) v = __shfl_sync(0x2u, v, 1);
    p[threadIdx.x] = v;
}
__global__ void __launch_bounds__(64) st_bounds(float *p) { p[threadIdx.x] = 1.0f; }
/* over the 64 KiB stack in frames of about 1 KiB, each touched as it is made: the first
 * touch past the stack's end falls in the guard page below it at any optimization level (one
 * 200 KiB array let -O0 touch its loop counter, below the array, first: past the guard) */
__device__ __noinline__ int st_deep(int n) {
    volatile char pad[1024];
    pad[0] = (char)n;
    return n == 0 ? pad[0] : st_deep(n - 1) + pad[0];
}
__global__ void st_overflow(float *p) { p[threadIdx.x] = (float)st_deep(200); }
__global__ void st_dyn_past_end(float *p) {
    extern __shared__ float dbuf[];
    dbuf[threadIdx.x + 1] = 1.0f;
    __syncthreads();
    p[threadIdx.x] = dbuf[threadIdx.x];
}

__global__ void st_reduce_lanes(float *p) {
    p[threadIdx.x] = (float)__reduce_max_sync(0xffffffffu, threadIdx.x);
}

__global__ void st_two_shuffles(float *p) {
    float v = (float)threadIdx.x;
    if (threadIdx.x < 16) v = __shfl_sync(0xffffffffu, v, 0);
    else v = __shfl_sync(0xffffffffu, v, 1);
    p[threadIdx.x] = v;
}

extern "C" int fcemu_selftest(int which) {
    static float p[1024];
    switch (which) {
    case 0: return test_warp();
    case 1: return test_atomics();
    case 2: return test_dyn();
    case 3: return test_3d();
    case 4: st_divergent<<<1, 64>>>(p); break;
    case 5: st_two_barriers<<<1, 64>>>(p); break;
    case 6: st_deadlock<<<1, 32>>>(p); break;
    case 7: st_shared_past_end<<<1, 64>>>(p); break;
    case 8: st_mask<<<1, 32>>>(p); break;
    case 9: st_bounds<<<1, 128>>>(p); break;
    case 10: st_overflow<<<1, 4>>>(p); break;
    case 11: st_dyn_past_end<<<1, 64, 64 * sizeof(float)>>>(p); break;
    case 12: st_two_shuffles<<<1, 32>>>(p); break;
    case 13: st_reduce_lanes<<<1, 48>>>(p); break;
    default: return 1;
    }
    return (int)cudaGetLastError();
}
