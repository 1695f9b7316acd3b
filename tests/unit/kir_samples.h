/* kir_samples.h: hand-built kernel IR programs that cover every KIR construct, each with a
 * plain-C reference, for the tests of any backend (CUDA text + NVRTC, LLVM JIT, emulation).
 * Header-only: every function is static inline.
 *
 * Use:
 *     for (int i = 0; i < KS_NUM_SAMPLES; i++) {
 *         KsSample s;
 *         if (!ks_sample(i, &s)) fail("out of memory");
 *         void **got = ks_alloc_buffers(s.prog), **want = ks_alloc_buffers(s.prog);
 *         s.fill(got, s.prog, seed); ks_copy_inputs(s.prog, got, want);
 *         ks_poison_outputs(s.prog, got);              // NaN / 0x7f.. patterns
 *         ... run s.prog on the backend over `got` (buffer b lives at got[b]) -> status ...
 *         int want_status = s.reference(want, s.prog);
 *         ks_compare(s.prog, got, want, s.rtol, msg, sizeof msg) == 0 && status == want_status
 *         ks_free_buffers(s.prog, got); ks_free_buffers(s.prog, want); ks_sample_free(&s);
 *     }
 * Buffers are host arrays, one per KirBuffer (temps included), in the buffer's storage dtype
 * (f16/bf16 as uint16 bit patterns, f8 as bytes, bool as 0/1 bytes).
 *
 * Coverage: pointwise (every unary and binary op at every type where defined, select, every
 * cast including float->int saturation and NaN, KE_ROUND to every narrow type, loads and stores
 * of every storage dtype, a serial loop with an assignment, a thread loop over a size that is
 * not a multiple of the block); row reductions (KS_REDUCE sum/max/min of f32, f64, i32, i64,
 * blocks of 256, 100, 48 and 1 threads: full warps, a partial last warp, one lane; and over
 * 32, 64, 96 and 128 lanes of a block of 256, bit for bit); a tiled
 * matrix product (shared arrays, barriers, a thread array, if/else, serial loops); a gather
 * with KS_ERROR (valid and out-of-range ids); a two-kernel program with a workspace temp;
 * KE_PHILOX on Random123's known answers and random counters and keys; KS_AMAX in every place
 * it may stand (block-uniform, thread loops plain and vec, a serial loop, an if body, a
 * reduction body), over several blocks of 100, 1024 and 48 threads, with and without a tail,
 * values of both signs, a prior that stays, and a NaN.
 * The references compute in the kernels' precision (f32 where the kernel uses f32), so
 * differences come only from math library accuracy and reduction order; rtol says how much.
 */
#ifndef FUSEC_KIR_SAMPLES_H
#define FUSEC_KIR_SAMPLES_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "kir.h"
#include "interp.h"

typedef struct KsSample {
    const char *name;
    KirProgram *prog;
    /* Fills the input buffers with seeded random data valid for the sample (never zeros). */
    void (*fill)(void *const *bufs, const KirProgram *p, uint64_t seed);
    /* Computes the outputs from the inputs; returns the status the run must end with
     * (0, or FC_ERR_RUNTIME_DATA when the data is bad). */
    int (*reference)(void *const *bufs, const KirProgram *p);
    double rtol;   /* float outputs: |got - want| <= rtol * max(1, |want|) */
} KsSample;

/* ---- host-side storage conversions (value arithmetic, independent of the CUDA helpers) ---- */
typedef struct KsFmt { int mbits, bias; double maxv; bool has_inf; } KsFmt;
static inline KsFmt ks_fmt(FcDtype t) {
    switch (t) {
    case FC_F16: return (KsFmt){10, 15, 65504.0, true};
    case FC_BF16: return (KsFmt){7, 127, 3.3895313892515355e38, true};
    case FC_F8E4M3: return (KsFmt){3, 7, 448.0, false};
    default: return (KsFmt){2, 15, 57344.0, true};   /* FC_F8E5M2 */
    }
}
/* The value x takes when stored as narrow float t (round to nearest even; f8 saturating). */
static inline float ks_round(FcDtype t, float x) {
    KsFmt f = ks_fmt(t);
    if (isnan(x)) return x;
    bool sat = t == FC_F8E4M3 || t == FC_F8E5M2;
    if (isinf(x)) return (t == FC_F8E4M3) ? (float)copysign(f.maxv, x) : x;
    if (x == 0) return x;
    int e = ilogb(x);
    int emin = 1 - f.bias;
    if (e < emin) e = emin;
    double q = ldexp(1.0, e - f.mbits);
    double r = nearbyint((double)x / q) * q;
    if (fabs(r) > f.maxv) r = sat ? copysign(f.maxv, x) : copysign(INFINITY, x);
    if (r == 0) r = copysign(0.0, x);
    return (float)r;
}
/* Bits of ks_round(t, x). */
static inline uint32_t ks_encode(FcDtype t, float x) {
    KsFmt f = ks_fmt(t);
    int ebits = t == FC_F8E4M3 ? 4 : t == FC_BF16 ? 8 : 5;
    int width = 1 + ebits + f.mbits;
    uint32_t sign = signbit(x) ? 1u << (width - 1) : 0u;
    uint32_t emax = (1u << ebits) - 1u;
    if (isnan(x)) return sign | (t == FC_F8E4M3 ? 0x7fu : (emax << f.mbits) | (1u << (f.mbits - 1)));
    float r = ks_round(t, x);
    if (isinf(r)) return sign | (emax << f.mbits);
    double a = fabs((double)r);
    if (a == 0) return sign;
    int e = ilogb(a);
    if (e < 1 - f.bias) return sign | (uint32_t)(a / ldexp(1.0, 1 - f.bias - f.mbits));
    uint32_t m = (uint32_t)(a / ldexp(1.0, e - f.mbits)) - (1u << f.mbits);
    return sign | ((uint32_t)(e + f.bias) << f.mbits) | m;
}
static inline float ks_decode(FcDtype t, uint32_t b) {
    KsFmt f = ks_fmt(t);
    int ebits = t == FC_F8E4M3 ? 4 : t == FC_BF16 ? 8 : 5;
    int width = 1 + ebits + f.mbits;
    bool neg = (b >> (width - 1)) & 1u;
    uint32_t e = (b >> f.mbits) & ((1u << ebits) - 1u), m = b & ((1u << f.mbits) - 1u);
    double v;
    if (t == FC_F8E4M3 && e == 15 && m == 7) v = NAN;
    else if (t != FC_F8E4M3 && e == (1u << ebits) - 1u) v = m ? NAN : INFINITY;
    else if (e == 0) v = ldexp((double)m, 1 - f.bias - f.mbits);
    else v = ldexp(1.0 + ldexp((double)m, -f.mbits), (int)e - f.bias);
    return (float)(neg ? -v : v);
}
static inline int32_t ks_f2i32(double a) {
    if (isnan(a)) return 0;
    if (a >= 2147483648.0) return INT32_MAX;
    if (a <= -2147483648.0) return INT32_MIN;
    return (int32_t)a;
}
static inline int64_t ks_f2i64(double a) {
    if (isnan(a)) return 0;
    if (a >= 9223372036854775808.0) return INT64_MAX;
    if (a <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)a;
}
static inline float ks_maxf(float a, float b) { return isnan(a) ? a : isnan(b) ? b : fmaxf(a, b); }
static inline float ks_minf(float a, float b) { return isnan(a) ? a : isnan(b) ? b : fminf(a, b); }
static inline double ks_maxd(double a, double b) { return isnan(a) ? a : isnan(b) ? b : fmax(a, b); }
static inline double ks_mind(double a, double b) { return isnan(a) ? a : isnan(b) ? b : fmin(a, b); }

/* ---- random numbers (splitmix64) ------------------------------------------------------------ */
static inline uint64_t ks_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
/* Uniform in [lo, hi), never exactly 0. */
static inline double ks_uniform(uint64_t *s, double lo, double hi) {
    for (;;) {
        double u = (double)(ks_next(s) >> 11) * 0x1.0p-53;
        double v = lo + (hi - lo) * u;
        if (v != 0) return v;
    }
}
static inline int64_t ks_randint(uint64_t *s, int64_t lo, int64_t hi) {   /* [lo, hi], != 0 if possible */
    for (;;) {
        int64_t v = lo + (int64_t)(ks_next(s) % (uint64_t)(hi - lo + 1));
        if (v != 0 || (lo == 0 && hi == 0)) return v;
    }
}

/* ---- buffers ----------------------------------------------------------------------------------- */
static inline void **ks_alloc_buffers(const KirProgram *p) {
    void **b = calloc((size_t)p->buffers.len + 1, sizeof(void *));
    if (!b) return NULL;
    for (int i = 0; i < p->buffers.len; i++) {
        size_t n = (size_t)p->buffers.data[i].numel * fc_dtype_size(p->buffers.data[i].dtype);
        b[i] = calloc(n ? n : 1, 1);
        if (!b[i]) {
            for (int j = 0; j < i; j++) free(b[j]);
            free(b);
            return NULL;
        }
    }
    return b;
}
static inline void ks_free_buffers(const KirProgram *p, void **b) {
    if (!b) return;
    for (int i = 0; i < p->buffers.len; i++) free(b[i]);
    free(b);
}
static inline void ks_copy_inputs(const KirProgram *p, void *const *from, void *const *to) {
    for (int i = 0; i < p->buffers.len; i++)
        if (p->buffers.data[i].kind == KIR_BUF_INPUT)
            memcpy(to[i], from[i], (size_t)p->buffers.data[i].numel * fc_dtype_size(p->buffers.data[i].dtype));
}
/* Outputs and temps get a pattern no kernel writes by accident: NaN for floats, 0x5a.. else. */
static inline void ks_poison_outputs(const KirProgram *p, void *const *b) {
    for (int i = 0; i < p->buffers.len; i++) {
        const KirBuffer *kb = &p->buffers.data[i];
        if (kb->kind == KIR_BUF_INPUT) continue;
        size_t n = (size_t)kb->numel;
        switch (kb->dtype) {
        case FC_F64: for (size_t j = 0; j < n; j++) ((double *)b[i])[j] = NAN; break;
        case FC_F32: for (size_t j = 0; j < n; j++) ((float *)b[i])[j] = NAN; break;
        case FC_F16: case FC_BF16: for (size_t j = 0; j < n; j++) ((uint16_t *)b[i])[j] = kb->dtype == FC_F16 ? 0x7e00 : 0x7fc0; break;
        case FC_F8E4M3: case FC_F8E5M2: memset(b[i], 0x7f, n); break;
        default: memset(b[i], 0x5a, n * fc_dtype_size(kb->dtype)); break;
        }
    }
}
/* Element j of buffer b as a double (narrow floats decoded). */
static inline double ks_get(FcDtype t, const void *b, int64_t j) {
    switch (t) {
    case FC_F64: return ((const double *)b)[j];
    case FC_F32: return ((const float *)b)[j];
    case FC_F16: case FC_BF16: return ks_decode(t, ((const uint16_t *)b)[j]);
    case FC_F8E4M3: case FC_F8E5M2: return ks_decode(t, ((const uint8_t *)b)[j]);
    case FC_I32: return ((const int32_t *)b)[j];
    case FC_I64: return (double)((const int64_t *)b)[j];
    default: return ((const uint8_t *)b)[j];
    }
}
/* Compares every output buffer; returns the number of mismatches, the first described in msg.
 * Floats: NaN matches NaN, infinities must match exactly, else |g - w| <= rtol * max(1, |w|).
 * Integers and bools: exact (i64 compared as integers). */
static inline long ks_compare(const KirProgram *p, void *const *got, void *const *want, double rtol,
                              char *msg, size_t msglen) {
    long bad = 0;
    if (msglen) msg[0] = 0;
    for (int i = 0; i < p->buffers.len; i++) {
        const KirBuffer *kb = &p->buffers.data[i];
        if (kb->kind != KIR_BUF_OUTPUT) continue;
        for (int64_t j = 0; j < kb->numel; j++) {
            bool ok;
            double g = ks_get(kb->dtype, got[i], j), w = ks_get(kb->dtype, want[i], j);
            if (kb->dtype == FC_I64) ok = ((const int64_t *)got[i])[j] == ((const int64_t *)want[i])[j];
            else if (kb->dtype == FC_I32 || kb->dtype == FC_BOOL) ok = g == w;
            else if (isnan(w) || isnan(g)) ok = isnan(w) && isnan(g);
            else if (isinf(w) || isinf(g)) ok = g == w;
            else ok = fabs(g - w) <= rtol * fmax(1.0, fabs(w));
            if (!ok && bad++ == 0 && msglen)
                snprintf(msg, msglen, "output %d (b%d) element %lld: got %.9g, want %.9g", kb->index, i,
                         (long long)j, g, w);
        }
    }
    return bad;
}

/* ---- building helpers ------------------------------------------------------------------------ */
static inline int ks_buffer(KirProgram *p, KirBufKind kind, int index, FcDtype t, int64_t numel, int64_t offset) {
    KirBuffer b = {kind, index, t, numel, offset, -1};
    if (!FC_VEC_PUSH(&p->buffers, b)) return -1;
    return p->buffers.len - 1;
}
static inline bool ks_launch(KirProgram *p, int kernel, int nargs, const int *args) {
    int *a = arena_alloc(&p->arena, sizeof(int) * (size_t)(nargs ? nargs : 1));
    if (!a) return false;
    memcpy(a, args, sizeof(int) * (size_t)nargs);
    KirLaunch l = {kernel, nargs, a};
    return FC_VEC_PUSH(&p->launches, l);
}
/* Binds params 0..n-1 of the last kernel to buffers 0..n-1 (the samples declare both in order). */
static inline bool ks_launch_identity(KirProgram *p, int n) {
    int args[64];
    for (int i = 0; i < n; i++) args[i] = i;
    return ks_launch(p, p->kernels.len - 1, n, args);
}
#define KS_I64(k, v) kir_const_i((k), KT_I64, (v))
#define KS_I32(k, v) kir_const_i((k), KT_I32, (v))
#define KS_F32(k, v) kir_const_f((k), KT_F32, (v))
#define KS_F64(k, v) kir_const_f((k), KT_F64, (v))
static inline int ks_let(KirKernel *k, KirType t, int value) {
    int v = kir_var(k, t);
    kir_let(k, v, value);
    return kir_var_ref(k, v);
}
static inline int ks_idx(KirKernel *k, int64_t col, int64_t n, int i) {   /* col * n + i */
    return kir_bin(k, KB_ADD, KS_I64(k, col * n), i);
}

/* ============================ 1. pointwise: every op, cast and dtype ============================ */
enum { KS_PW_N = 1000, KS_PW_BLOCK = 128, KS_PW_CHUNK = 384, KS_PW_NF32 = 33, KS_PW_NF64 = 22,
       KS_PW_NI32 = 13, KS_PW_NI64 = 11, KS_PW_NB = 12 };
/* buffers: 0 x f32, 1 y f32 (positive), 2 h f16, 3 bf bf16, 4 e4 f8e4m3, 5 e5 f8e5m2, 6 d f64,
 * 7 ii i32, 8 ll i64, 9 m bool | outputs 10 f32[NF32*n], 11 f64[NF64*n], 12 i32[NI32*n],
 * 13 i64[NI64*n], 14 bool[NB*n], 15 f16[n], 16 bf16[n], 17 f8e4m3[n], 18 f8e5m2[n] */
static const FcDtype ks_pw_dtypes[19] = {
    FC_F32, FC_F32, FC_F16, FC_BF16, FC_F8E4M3, FC_F8E5M2, FC_F64, FC_I32, FC_I64, FC_BOOL,
    FC_F32, FC_F64, FC_I32, FC_I64, FC_BOOL, FC_F16, FC_BF16, FC_F8E4M3, FC_F8E5M2};
static const int ks_pw_cols[19] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, KS_PW_NF32, KS_PW_NF64, KS_PW_NI32,
                                   KS_PW_NI64, KS_PW_NB, 1, 1, 1, 1};

static inline void ks_pw_fill(void *const *b, const KirProgram *p, uint64_t seed) {
    (void)p;
    uint64_t s = seed;
    for (int i = 0; i < KS_PW_N; i++) {
        ((float *)b[0])[i] = (float)ks_uniform(&s, -3, 3);
        ((float *)b[1])[i] = (float)ks_uniform(&s, 0.5, 2);
        ((uint16_t *)b[2])[i] = (uint16_t)ks_encode(FC_F16, (float)ks_uniform(&s, -70000, 70000) / (float)(1 << (i % 30)));
        ((uint16_t *)b[3])[i] = (uint16_t)ks_encode(FC_BF16, (float)ks_uniform(&s, -1e30, 1e30) / (float)(1 << (i % 30)));
        ((uint8_t *)b[4])[i] = (uint8_t)ks_encode(FC_F8E4M3, (float)ks_uniform(&s, -448, 448) / (float)(1 << (i % 16)));
        ((uint8_t *)b[5])[i] = (uint8_t)ks_encode(FC_F8E5M2, (float)ks_uniform(&s, -57344, 57344) / (float)(1 << (i % 30)));
        ((double *)b[6])[i] = ks_uniform(&s, -3, 3);
        ((int32_t *)b[7])[i] = (int32_t)ks_randint(&s, -1000, 1000);
        ((int64_t *)b[8])[i] = ks_randint(&s, -1000000000000LL, 1000000000000LL);
        ((uint8_t *)b[9])[i] = (uint8_t)(ks_next(&s) & 1);
    }
}

static inline int ks_pw_reference(void *const *b, const KirProgram *p) {
    (void)p;
    const int n = KS_PW_N;
    const float *x = b[0], *y = b[1];
    const uint16_t *h = b[2], *bf = b[3];
    const uint8_t *e4 = b[4], *e5 = b[5], *m = b[9];
    const double *d = b[6];
    const int32_t *ii = b[7];
    const int64_t *ll = b[8];
    float *of = b[10];
    double *od = b[11];
    int32_t *oi = b[12];
    int64_t *ol = b[13];
    uint8_t *ob = b[14];
    for (int i = 0; i < n; i++) {
        float xv = x[i], yv = y[i];
        float z = (i % 17 == 0) ? NAN : -xv;
        float c = xv * 3.7f;
        float f[KS_PW_NF32] = {
            -xv, fabsf(xv), expf(xv), logf(yv), sqrtf(yv), 1.0f / sqrtf(yv), 1.0f / yv, tanhf(xv),
            erff(xv), sinf(xv), cosf(xv), floorf(xv * 3.0f), xv + yv, xv - yv, xv * yv, xv / yv,
            powf(yv, xv), ks_maxf(xv, z), ks_minf(xv, z), ks_decode(FC_F16, h[i]),
            ks_decode(FC_BF16, bf[i]), ks_decode(FC_F8E4M3, e4[i]), ks_decode(FC_F8E5M2, e5[i]),
            ks_round(FC_F16, c), ks_round(FC_BF16, c), ks_round(FC_F8E4M3, c), ks_round(FC_F8E5M2, c),
            (float)ii[i], (float)ll[i], (float)d[i], m[i] ? 1.0f : 0.0f, m[i] ? xv : yv, 0};
        float acc = 0;
        for (int q = 0; q < 3; q++) acc = acc + xv * (float)q;
        f[32] = acc;
        for (int j = 0; j < KS_PW_NF32; j++) of[j * n + i] = f[j];
        double dv = d[i], dd = (double)yv, ad = fabs(dv);
        double z64 = (i % 17 == 0) ? NAN : -dv;
        double g[KS_PW_NF64] = {
            -dv, fabs(dv), exp(dv), log(ad + 0.5), sqrt(ad), 1.0 / sqrt(ad + 0.5), 1.0 / (ad + 0.5),
            tanh(dv), erf(dv), sin(dv), cos(dv), floor(dv * 3.0), dv + dd, dv - dd, dv * dd, dv / dd,
            pow(dd, dv), ks_maxd(dv, z64), ks_mind(dv, z64), (double)xv, (double)ll[i], (double)ii[i]};
        for (int j = 0; j < KS_PW_NF64; j++) od[j * n + i] = g[j];
        int32_t iv = ii[i];
        float zs = (i % 5 == 0) ? xv * 1e10f : (i % 7 == 0) ? NAN : xv * 100.0f;
        int32_t r32[KS_PW_NI32] = {
            iv + 7, iv - 3, iv * 5, iv / 7, iv % 7, iv > 3 ? iv : 3, iv < 3 ? iv : 3, -iv, iv < 0 ? -iv : iv,
            ks_f2i32(zs), ks_f2i32(dv * 1e10), (int32_t)(uint32_t)(uint64_t)ll[i], (int32_t)m[i]};
        for (int j = 0; j < KS_PW_NI32; j++) oi[j * n + i] = r32[j];
        int64_t lv = ll[i];
        float zl = (i % 7 == 0) ? NAN : xv * 1e19f;
        int64_t r64[KS_PW_NI64] = {lv + lv, lv * 3, lv / 1000, lv % 1000, lv > 0 ? lv : 0, lv < 0 ? lv : 0,
                                   -lv, lv < 0 ? -lv : lv, ks_f2i64(zl), ks_f2i64(dv * 1e19), (int64_t)iv};
        for (int j = 0; j < KS_PW_NI64; j++) ol[j * n + i] = r64[j];
        float hy = 0.5f * yv;
        float zb = (i % 4 == 0) ? 0.0f : xv;
        uint8_t rb[KS_PW_NB] = {xv < hy, xv <= hy, xv > hy, xv >= hy, iv % 3 == 0, iv % 3 != 0,
                                m[i] && xv > 0, m[i] || xv > 0, !m[i], zb != 0.0f, (iv % 2) != 0, m[i]};
        for (int j = 0; j < KS_PW_NB; j++) ob[j * n + i] = rb[j];
        float inf = INFINITY;
        ((uint16_t *)b[15])[i] = (uint16_t)ks_encode(FC_F16, i % 11 == 0 ? inf : i % 13 == 0 ? NAN : xv * 3e4f);
        ((uint16_t *)b[16])[i] = (uint16_t)ks_encode(FC_BF16, xv * 1.37f);
        ((uint8_t *)b[17])[i] = (uint8_t)ks_encode(FC_F8E4M3, i % 11 == 0 ? inf : i % 13 == 0 ? NAN : xv * 200.0f);
        ((uint8_t *)b[18])[i] = (uint8_t)ks_encode(FC_F8E5M2, i % 11 == 0 ? -inf : i % 13 == 0 ? NAN : xv * 3e4f);
    }
    return 0;
}

static inline KirProgram *ks_build_pointwise(void) {
    const int64_t n = KS_PW_N;
    KirProgram *p = kir_program_new("samples_pointwise");
    if (!p) return NULL;
    int64_t grid = (n + KS_PW_CHUNK - 1) / KS_PW_CHUNK;
    KirKernel *k = kir_kernel_new(p, "k0_pointwise", grid, KS_PW_BLOCK);
    if (!k) { kir_program_free(p); return NULL; }
    k->kind = "pointwise";
    k->ops = "every unary, binary, cast and round";
    for (int b = 0; b < 19; b++) {
        kir_param(k, ks_pw_dtypes[b], n * ks_pw_cols[b], b >= 10);
        if (ks_buffer(p, b < 10 ? KIR_BUF_INPUT : KIR_BUF_OUTPUT, b < 10 ? b : b - 10, ks_pw_dtypes[b],
                      n * ks_pw_cols[b], 0) < 0) { kir_program_free(p); return NULL; }
    }
    int lo = ks_let(k, KT_I64, kir_bin(k, KB_MUL, kir_block_idx(k), KS_I64(k, KS_PW_CHUNK)));
    int hi = ks_let(k, KT_I64, kir_bin(k, KB_MIN, kir_bin(k, KB_ADD, lo, KS_I64(k, KS_PW_CHUNK)), KS_I64(k, n)));
    int iv = kir_var(k, KT_I64);
    kir_for(k, KIR_LOOP_THREADS, iv, lo, hi);
    int i = kir_var_ref(k, iv);
    int x = ks_let(k, KT_F32, kir_load(k, 0, i));
    int y = ks_let(k, KT_F32, kir_load(k, 1, i));
    int d = ks_let(k, KT_F64, kir_load(k, 6, i));
    int ii = ks_let(k, KT_I32, kir_load(k, 7, i));
    int ll = ks_let(k, KT_I64, kir_load(k, 8, i));
    int m = ks_let(k, KT_BOOL, kir_load(k, 9, i));
    int every17 = kir_bin(k, KB_EQ, kir_bin(k, KB_REM, i, KS_I64(k, 17)), KS_I64(k, 0));
    int z = ks_let(k, KT_F32, kir_select(k, every17, KS_F32(k, NAN), kir_un(k, KU_NEG, x)));
    int c = ks_let(k, KT_F32, kir_bin(k, KB_MUL, x, KS_F32(k, 3.7f)));
    int acc_v = kir_var(k, KT_F32);
    kir_let(k, acc_v, KS_F32(k, 0));
    int qv = kir_var(k, KT_I32);
    kir_for(k, KIR_LOOP_SERIAL, qv, KS_I32(k, 0), KS_I32(k, 3));
    kir_assign(k, acc_v, kir_bin(k, KB_ADD, kir_var_ref(k, acc_v),
                                 kir_bin(k, KB_MUL, x, kir_cast(k, KT_F32, kir_var_ref(k, qv)))));
    kir_end(k);
    int f[KS_PW_NF32] = {
        kir_un(k, KU_NEG, x), kir_un(k, KU_ABS, x), kir_un(k, KU_EXP, x), kir_un(k, KU_LOG, y),
        kir_un(k, KU_SQRT, y), kir_un(k, KU_RSQRT, y), kir_un(k, KU_RECIP, y), kir_un(k, KU_TANH, x),
        kir_un(k, KU_ERF, x), kir_un(k, KU_SIN, x), kir_un(k, KU_COS, x),
        kir_un(k, KU_FLOOR, kir_bin(k, KB_MUL, x, KS_F32(k, 3))), kir_bin(k, KB_ADD, x, y),
        kir_bin(k, KB_SUB, x, y), kir_bin(k, KB_MUL, x, y), kir_bin(k, KB_DIV, x, y), kir_bin(k, KB_POW, y, x),
        kir_bin(k, KB_MAX, x, z), kir_bin(k, KB_MIN, x, z), kir_load(k, 2, i), kir_load(k, 3, i),
        kir_load(k, 4, i), kir_load(k, 5, i), kir_round(k, FC_F16, c), kir_round(k, FC_BF16, c),
        kir_round(k, FC_F8E4M3, c), kir_round(k, FC_F8E5M2, c), kir_cast(k, KT_F32, ii),
        kir_cast(k, KT_F32, ll), kir_cast(k, KT_F32, d), kir_cast(k, KT_F32, m), kir_select(k, m, x, y),
        kir_var_ref(k, acc_v)};
    for (int j = 0; j < KS_PW_NF32; j++) kir_store(k, 10, ks_idx(k, j, n, i), f[j]);
    int dd = ks_let(k, KT_F64, kir_cast(k, KT_F64, y));
    int ad = ks_let(k, KT_F64, kir_un(k, KU_ABS, d));
    int adh = kir_bin(k, KB_ADD, ad, KS_F64(k, 0.5));
    int z64 = kir_select(k, every17, KS_F64(k, NAN), kir_un(k, KU_NEG, d));
    int g[KS_PW_NF64] = {
        kir_un(k, KU_NEG, d), kir_un(k, KU_ABS, d), kir_un(k, KU_EXP, d), kir_un(k, KU_LOG, adh),
        kir_un(k, KU_SQRT, ad), kir_un(k, KU_RSQRT, adh), kir_un(k, KU_RECIP, adh), kir_un(k, KU_TANH, d),
        kir_un(k, KU_ERF, d), kir_un(k, KU_SIN, d), kir_un(k, KU_COS, d),
        kir_un(k, KU_FLOOR, kir_bin(k, KB_MUL, d, KS_F64(k, 3))), kir_bin(k, KB_ADD, d, dd),
        kir_bin(k, KB_SUB, d, dd), kir_bin(k, KB_MUL, d, dd), kir_bin(k, KB_DIV, d, dd), kir_bin(k, KB_POW, dd, d),
        kir_bin(k, KB_MAX, d, z64), kir_bin(k, KB_MIN, d, z64), kir_cast(k, KT_F64, x), kir_cast(k, KT_F64, ll),
        kir_cast(k, KT_F64, ii)};
    for (int j = 0; j < KS_PW_NF64; j++) kir_store(k, 11, ks_idx(k, j, n, i), g[j]);
    int every5 = kir_bin(k, KB_EQ, kir_bin(k, KB_REM, i, KS_I64(k, 5)), KS_I64(k, 0));
    int every7 = kir_bin(k, KB_EQ, kir_bin(k, KB_REM, i, KS_I64(k, 7)), KS_I64(k, 0));
    int zs = kir_select(k, every5, kir_bin(k, KB_MUL, x, KS_F32(k, 1e10f)),
                        kir_select(k, every7, KS_F32(k, NAN), kir_bin(k, KB_MUL, x, KS_F32(k, 100))));
    int three = KS_I32(k, 3);
    int r32[KS_PW_NI32] = {
        kir_bin(k, KB_ADD, ii, KS_I32(k, 7)), kir_bin(k, KB_SUB, ii, three), kir_bin(k, KB_MUL, ii, KS_I32(k, 5)),
        kir_bin(k, KB_DIV, ii, KS_I32(k, 7)), kir_bin(k, KB_REM, ii, KS_I32(k, 7)), kir_bin(k, KB_MAX, ii, three),
        kir_bin(k, KB_MIN, ii, three), kir_un(k, KU_NEG, ii), kir_un(k, KU_ABS, ii), kir_cast(k, KT_I32, zs),
        kir_cast(k, KT_I32, kir_bin(k, KB_MUL, d, KS_F64(k, 1e10))), kir_cast(k, KT_I32, ll), kir_cast(k, KT_I32, m)};
    for (int j = 0; j < KS_PW_NI32; j++) kir_store(k, 12, ks_idx(k, j, n, i), r32[j]);
    int zl = kir_select(k, every7, KS_F32(k, NAN), kir_bin(k, KB_MUL, x, KS_F32(k, 1e19f)));
    int zero64 = KS_I64(k, 0);
    int r64[KS_PW_NI64] = {
        kir_bin(k, KB_ADD, ll, ll), kir_bin(k, KB_MUL, ll, KS_I64(k, 3)), kir_bin(k, KB_DIV, ll, KS_I64(k, 1000)),
        kir_bin(k, KB_REM, ll, KS_I64(k, 1000)), kir_bin(k, KB_MAX, ll, zero64), kir_bin(k, KB_MIN, ll, zero64),
        kir_un(k, KU_NEG, ll), kir_un(k, KU_ABS, ll), kir_cast(k, KT_I64, zl),
        kir_cast(k, KT_I64, kir_bin(k, KB_MUL, d, KS_F64(k, 1e19))), kir_cast(k, KT_I64, ii)};
    for (int j = 0; j < KS_PW_NI64; j++) kir_store(k, 13, ks_idx(k, j, n, i), r64[j]);
    int hy = kir_bin(k, KB_MUL, KS_F32(k, 0.5), y);
    int mod3 = kir_bin(k, KB_REM, ii, three);
    int xpos = kir_bin(k, KB_GT, x, KS_F32(k, 0));
    int every4 = kir_bin(k, KB_EQ, kir_bin(k, KB_REM, i, KS_I64(k, 4)), zero64);
    int rb[KS_PW_NB] = {
        kir_bin(k, KB_LT, x, hy), kir_bin(k, KB_LE, x, hy), kir_bin(k, KB_GT, x, hy), kir_bin(k, KB_GE, x, hy),
        kir_bin(k, KB_EQ, mod3, KS_I32(k, 0)), kir_bin(k, KB_NE, mod3, KS_I32(k, 0)), kir_bin(k, KB_AND, m, xpos),
        kir_bin(k, KB_OR, m, xpos), kir_un(k, KU_NOT, m),
        kir_cast(k, KT_BOOL, kir_select(k, every4, KS_F32(k, 0), x)),
        kir_cast(k, KT_BOOL, kir_bin(k, KB_REM, ii, KS_I32(k, 2))), m};
    for (int j = 0; j < KS_PW_NB; j++) kir_store(k, 14, ks_idx(k, j, n, i), rb[j]);
    int every11 = kir_bin(k, KB_EQ, kir_bin(k, KB_REM, i, KS_I64(k, 11)), zero64);
    int every13 = kir_bin(k, KB_EQ, kir_bin(k, KB_REM, i, KS_I64(k, 13)), zero64);
    int nanv = KS_F32(k, NAN);
    kir_store(k, 15, i, kir_select(k, every11, KS_F32(k, INFINITY),
                                   kir_select(k, every13, nanv, kir_bin(k, KB_MUL, x, KS_F32(k, 3e4)))));
    kir_store(k, 16, i, kir_bin(k, KB_MUL, x, KS_F32(k, 1.37f)));
    kir_store(k, 17, i, kir_select(k, every11, KS_F32(k, INFINITY),
                                   kir_select(k, every13, nanv, kir_bin(k, KB_MUL, x, KS_F32(k, 200)))));
    kir_store(k, 18, i, kir_select(k, every11, KS_F32(k, -INFINITY),
                                   kir_select(k, every13, nanv, kir_bin(k, KB_MUL, x, KS_F32(k, 3e4)))));
    kir_end(k);
    if (!kir_kernel_ok(k) || !ks_launch_identity(p, 19)) { kir_program_free(p); return NULL; }
    return p;
}

/* ============================ 2. softmax rows: reduce max, reduce sum, write ======================= */
/* buffers: 0 x f32[rows*cols] in, 1 y f32[rows*cols] out. Shape in the program name's kernel. */
static inline void ks_sm_dims(const KirProgram *p, int64_t *rows, int64_t *cols) {
    *rows = p->kernels.data[0]->grid;
    *cols = p->buffers.data[0].numel / *rows;
}
static inline void ks_sm_fill(void *const *b, const KirProgram *p, uint64_t seed) {
    uint64_t s = seed;
    for (int64_t i = 0; i < p->buffers.data[0].numel; i++) ((float *)b[0])[i] = (float)ks_uniform(&s, -4, 4);
}
static inline int ks_sm_reference(void *const *b, const KirProgram *p) {
    int64_t rows, cols;
    ks_sm_dims(p, &rows, &cols);
    const float *x = b[0];
    float *y = b[1];
    for (int64_t r = 0; r < rows; r++) {
        float mx = -INFINITY;
        for (int64_t j = 0; j < cols; j++) mx = ks_maxf(mx, x[r * cols + j]);
        double s = 0;
        for (int64_t j = 0; j < cols; j++) s += exp((double)x[r * cols + j] - mx);
        for (int64_t j = 0; j < cols; j++) y[r * cols + j] = (float)(exp((double)x[r * cols + j] - mx) / s);
    }
    return 0;
}
static inline KirProgram *ks_build_softmax(int64_t rows, int64_t cols, int block) {
    KirProgram *p = kir_program_new("samples_softmax");
    if (!p) return NULL;
    KirKernel *k = kir_kernel_new(p, "k0_softmax", rows, block);
    if (!k) { kir_program_free(p); return NULL; }
    k->kind = "row_reduce";
    k->ops = "softmax";
    kir_param(k, FC_F32, rows * cols, false);
    kir_param(k, FC_F32, rows * cols, true);
    if (ks_buffer(p, KIR_BUF_INPUT, 0, FC_F32, rows * cols, 0) < 0 ||
        ks_buffer(p, KIR_BUF_OUTPUT, 0, FC_F32, rows * cols, 0) < 0) { kir_program_free(p); return NULL; }
    int base = ks_let(k, KT_I64, kir_bin(k, KB_MUL, kir_block_idx(k), KS_I64(k, cols)));
    int mv = kir_var(k, KT_F32), j1 = kir_var(k, KT_I64);
    kir_reduce(k, KR_MAX, mv, j1, KS_I64(k, 0), KS_I64(k, cols));
    kir_end_reduce(k, kir_load(k, 0, kir_bin(k, KB_ADD, base, kir_var_ref(k, j1))));
    int sv = kir_var(k, KT_F32), j2 = kir_var(k, KT_I64);
    kir_reduce(k, KR_SUM, sv, j2, KS_I64(k, 0), KS_I64(k, cols));
    kir_end_reduce(k, kir_un(k, KU_EXP, kir_bin(k, KB_SUB, kir_load(k, 0, kir_bin(k, KB_ADD, base, kir_var_ref(k, j2))),
                                                 kir_var_ref(k, mv))));
    int inv = ks_let(k, KT_F32, kir_un(k, KU_RECIP, kir_var_ref(k, sv)));
    int j3 = kir_var(k, KT_I64);
    kir_for(k, KIR_LOOP_THREADS, j3, KS_I64(k, 0), KS_I64(k, cols));
    int idx = kir_bin(k, KB_ADD, base, kir_var_ref(k, j3));
    kir_store(k, 1, idx, kir_bin(k, KB_MUL, kir_un(k, KU_EXP, kir_bin(k, KB_SUB, kir_load(k, 0, idx), kir_var_ref(k, mv))), inv));
    kir_end(k);
    if (!kir_kernel_ok(k) || !ks_launch_identity(p, 2)) { kir_program_free(p); return NULL; }
    return p;
}

/* ============================ 3. row statistics: reductions of every type ========================== */
enum { KS_RS_ROWS = 6, KS_RS_COLS = 300, KS_RS_BLOCK = 48 };
/* buffers: 0 a i32 (never INT32_MIN: that is a data error), 1 b i64, 2 d f64, 3 x f32 (each
 * [rows*cols]) | outputs [rows]: 4 sum(a) i32,
 * 5 min(b) i64, 6 max(d) f64 (row 2 has a NaN injected at column 17), 7 min(x) f32, 8 sum(x) f32,
 * 9 sum(d) f64 */
static inline void ks_rs_fill(void *const *b, const KirProgram *p, uint64_t seed) {
    (void)p;
    uint64_t s = seed;
    for (int i = 0; i < KS_RS_ROWS * KS_RS_COLS; i++) {
        ((int32_t *)b[0])[i] = (int32_t)ks_randint(&s, -100000, 100000);
        ((int64_t *)b[1])[i] = ks_randint(&s, -4000000000000LL, 4000000000000LL);
        ((double *)b[2])[i] = ks_uniform(&s, -10, 10);
        ((float *)b[3])[i] = (float)ks_uniform(&s, -10, 10);
    }
}
static inline int ks_rs_reference(void *const *b, const KirProgram *p) {
    (void)p;
    for (int r = 0; r < KS_RS_ROWS; r++) {
        int32_t sa = 0;
        int64_t mb = INT64_MAX;
        double md = -INFINITY, sd = 0;
        float mx = INFINITY;
        double sx = 0;
        for (int j = 0; j < KS_RS_COLS; j++) {
            int i = r * KS_RS_COLS + j;
            sa += ((int32_t *)b[0])[i];
            int64_t bv = ((int64_t *)b[1])[i];
            mb = bv < mb ? bv : mb;
            double dv = (r == 2 && j == 17) ? NAN : ((double *)b[2])[i];
            md = ks_maxd(md, dv);
            sd += ((double *)b[2])[i];
            mx = ks_minf(mx, ((float *)b[3])[i]);
            sx += ((float *)b[3])[i];
        }
        ((int32_t *)b[4])[r] = sa;
        ((int64_t *)b[5])[r] = mb;
        ((double *)b[6])[r] = md;
        ((float *)b[7])[r] = mx;
        ((float *)b[8])[r] = (float)sx;
        ((double *)b[9])[r] = sd;
    }
    return 0;
}
static inline KirProgram *ks_build_row_stats(void) {
    const int64_t R = KS_RS_ROWS, C = KS_RS_COLS;
    KirProgram *p = kir_program_new("samples_row_stats");
    if (!p) return NULL;
    KirKernel *k = kir_kernel_new(p, "k0_row_stats", R, KS_RS_BLOCK);
    if (!k) { kir_program_free(p); return NULL; }
    k->kind = "row_reduce";
    k->ops = "sum,min,max";
    static const FcDtype dt[10] = {FC_I32, FC_I64, FC_F64, FC_F32, FC_I32, FC_I64, FC_F64, FC_F32, FC_F32, FC_F64};
    for (int b = 0; b < 10; b++) {
        int64_t n = b < 4 ? R * C : R;
        kir_param(k, dt[b], n, b >= 4);
        if (ks_buffer(p, b < 4 ? KIR_BUF_INPUT : KIR_BUF_OUTPUT, b < 4 ? b : b - 4, dt[b], n, 0) < 0) {
            kir_program_free(p);
            return NULL;
        }
    }
    int row = ks_let(k, KT_I64, kir_block_idx(k));
    int base = ks_let(k, KT_I64, kir_bin(k, KB_MUL, row, KS_I64(k, C)));
    int res[6];
    static const KirRedOp ops[6] = {KR_SUM, KR_MIN, KR_MAX, KR_MIN, KR_SUM, KR_SUM};
    static const int src[6] = {0, 1, 2, 3, 3, 2};
    static const KirType rt[6] = {KT_I32, KT_I64, KT_F64, KT_F32, KT_F32, KT_F64};
    for (int r = 0; r < 6; r++) {
        int v = kir_var(k, rt[r]), j = kir_var(k, KT_I64);
        kir_reduce(k, ops[r], v, j, KS_I64(k, 0), KS_I64(k, C));
        int val = kir_load(k, src[r], kir_bin(k, KB_ADD, base, kir_var_ref(k, j)));
        if (r == 0)   /* a statement in a reduction body (never true for the sample's data) */
            kir_error_if(k, kir_bin(k, KB_EQ, val, KS_I32(k, INT32_MIN)), FC_ERR_RUNTIME_DATA);
        if (r == 2) {   /* a NaN in row 2, column 17: max must propagate it */
            int hit = kir_bin(k, KB_AND, kir_bin(k, KB_EQ, row, KS_I64(k, 2)),
                              kir_bin(k, KB_EQ, kir_var_ref(k, j), KS_I64(k, 17)));
            val = kir_select(k, hit, KS_F64(k, NAN), val);
        }
        kir_end_reduce(k, val);
        res[r] = v;
    }
    int t = kir_var(k, KT_I64);
    kir_for(k, KIR_LOOP_THREADS, t, KS_I64(k, 0), KS_I64(k, 1));   /* one thread stores */
    for (int r = 0; r < 6; r++) kir_store(k, 4 + r, row, kir_var_ref(k, res[r]));
    kir_end(k);
    if (!kir_kernel_ok(k) || !ks_launch_identity(p, 10)) { kir_program_free(p); return NULL; }
    return p;
}

/* ============================ 4. tiled matrix product ============================================ */
enum { KS_MM_M = 37, KS_MM_K = 29, KS_MM_N = 41, KS_MM_BM = 32, KS_MM_BN = 16, KS_MM_BK = 16 };
/* buffers: 0 A f32[M*K], 1 B f32[K*N], 2 C f32[M*N] out. Block 256 = 16x16 threads; each
 * thread accumulates rows ty and ty+16 of a 32x16 output tile in a thread array of 2. */
static inline void ks_mm_fill(void *const *b, const KirProgram *p, uint64_t seed) {
    (void)p;
    uint64_t s = seed;
    for (int i = 0; i < KS_MM_M * KS_MM_K; i++) ((float *)b[0])[i] = (float)ks_uniform(&s, -1, 1);
    for (int i = 0; i < KS_MM_K * KS_MM_N; i++) ((float *)b[1])[i] = (float)ks_uniform(&s, -1, 1);
}
static inline int ks_mm_reference(void *const *b, const KirProgram *p) {
    (void)p;
    const float *A = b[0], *B = b[1];
    float *C = b[2];
    for (int i = 0; i < KS_MM_M; i++)
        for (int j = 0; j < KS_MM_N; j++) {
            double acc = 0;
            for (int q = 0; q < KS_MM_K; q++) acc += (double)A[i * KS_MM_K + q] * B[q * KS_MM_N + j];
            C[i * KS_MM_N + j] = (float)acc;
        }
    return 0;
}
static inline KirProgram *ks_build_matmul(void) {
    const int64_t M = KS_MM_M, K = KS_MM_K, N = KS_MM_N, BM = KS_MM_BM, BN = KS_MM_BN, BK = KS_MM_BK;
    int64_t nbn = (N + BN - 1) / BN, nbm = (M + BM - 1) / BM;
    KirProgram *p = kir_program_new("samples_matmul");
    if (!p) return NULL;
    KirKernel *k = kir_kernel_new(p, "k0_matmul", nbm * nbn, 256);
    if (!k) { kir_program_free(p); return NULL; }
    k->kind = "matmul";
    k->ops = "matmul";
    kir_param(k, FC_F32, M * K, false);
    kir_param(k, FC_F32, K * N, false);
    kir_param(k, FC_F32, M * N, true);
    if (ks_buffer(p, KIR_BUF_INPUT, 0, FC_F32, M * K, 0) < 0 || ks_buffer(p, KIR_BUF_INPUT, 1, FC_F32, K * N, 0) < 0 ||
        ks_buffer(p, KIR_BUF_OUTPUT, 0, FC_F32, M * N, 0) < 0) { kir_program_free(p); return NULL; }
    int As = kir_shared(k, KT_F32, BM * BK), Bs = kir_shared(k, KT_F32, BK * BN);
    int acc = kir_tarray(k, KT_F32, 2);
    int bid = ks_let(k, KT_I64, kir_block_idx(k));
    int bm = ks_let(k, KT_I64, kir_bin(k, KB_DIV, bid, KS_I64(k, nbn)));
    int bn = ks_let(k, KT_I64, kir_bin(k, KB_REM, bid, KS_I64(k, nbn)));
    int t0 = kir_var(k, KT_I64);
    kir_for(k, KIR_LOOP_THREADS, t0, KS_I64(k, 0), KS_I64(k, 256));
    kir_tstore(k, acc, KS_I32(k, 0), KS_F32(k, 0));
    kir_tstore(k, acc, KS_I32(k, 1), KS_F32(k, 0));
    kir_end(k);
    int kt = kir_var(k, KT_I64);
    kir_for(k, KIR_LOOP_SERIAL, kt, KS_I64(k, 0), KS_I64(k, (K + BK - 1) / BK));
    {   /* A tile: 32x16 = 512 elements, two per thread */
        int t = kir_var(k, KT_I64);
        kir_for(k, KIR_LOOP_THREADS, t, KS_I64(k, 0), KS_I64(k, BM * BK));
        int tr = kir_var_ref(k, t);
        int gr = ks_let(k, KT_I64, kir_bin(k, KB_ADD, kir_bin(k, KB_MUL, bm, KS_I64(k, BM)), kir_bin(k, KB_DIV, tr, KS_I64(k, BK))));
        int gc = ks_let(k, KT_I64, kir_bin(k, KB_ADD, kir_bin(k, KB_MUL, kir_var_ref(k, kt), KS_I64(k, BK)), kir_bin(k, KB_REM, tr, KS_I64(k, BK))));
        kir_if(k, kir_bin(k, KB_AND, kir_bin(k, KB_LT, gr, KS_I64(k, M)), kir_bin(k, KB_LT, gc, KS_I64(k, K))));
        kir_shstore(k, As, tr, kir_load(k, 0, kir_bin(k, KB_ADD, kir_bin(k, KB_MUL, gr, KS_I64(k, K)), gc)));
        kir_else(k);
        kir_shstore(k, As, tr, KS_F32(k, 0));
        kir_end(k);
        kir_end(k);
    }
    {   /* B tile: 16x16 */
        int t = kir_var(k, KT_I64);
        kir_for(k, KIR_LOOP_THREADS, t, KS_I64(k, 0), KS_I64(k, BK * BN));
        int tr = kir_var_ref(k, t);
        int gr = ks_let(k, KT_I64, kir_bin(k, KB_ADD, kir_bin(k, KB_MUL, kir_var_ref(k, kt), KS_I64(k, BK)), kir_bin(k, KB_DIV, tr, KS_I64(k, BN))));
        int gc = ks_let(k, KT_I64, kir_bin(k, KB_ADD, kir_bin(k, KB_MUL, bn, KS_I64(k, BN)), kir_bin(k, KB_REM, tr, KS_I64(k, BN))));
        int inb = kir_bin(k, KB_AND, kir_bin(k, KB_LT, gr, KS_I64(k, K)), kir_bin(k, KB_LT, gc, KS_I64(k, N)));
        kir_if(k, inb);
        kir_shstore(k, Bs, tr, kir_load(k, 1, kir_bin(k, KB_ADD, kir_bin(k, KB_MUL, gr, KS_I64(k, N)), gc)));
        kir_end(k);
        kir_if(k, kir_un(k, KU_NOT, inb));
        kir_shstore(k, Bs, tr, KS_F32(k, 0));
        kir_end(k);
        kir_end(k);
    }
    kir_barrier(k);
    {
        int t = kir_var(k, KT_I64);
        kir_for(k, KIR_LOOP_THREADS, t, KS_I64(k, 0), KS_I64(k, 256));
        int ty = ks_let(k, KT_I64, kir_bin(k, KB_DIV, kir_var_ref(k, t), KS_I64(k, 16)));
        int tx = ks_let(k, KT_I64, kir_bin(k, KB_REM, kir_var_ref(k, t), KS_I64(k, 16)));
        int kk = kir_var(k, KT_I64);
        kir_for(k, KIR_LOOP_SERIAL, kk, KS_I64(k, 0), KS_I64(k, BK));
        int kkr = kir_var_ref(k, kk);
        int bv = ks_let(k, KT_F32, kir_shload(k, Bs, kir_bin(k, KB_ADD, kir_bin(k, KB_MUL, kkr, KS_I64(k, BN)), tx)));
        for (int r = 0; r < 2; r++) {
            int row = kir_bin(k, KB_ADD, ty, KS_I64(k, 16 * r));
            int a = kir_shload(k, As, kir_bin(k, KB_ADD, kir_bin(k, KB_MUL, row, KS_I64(k, BK)), kkr));
            kir_tstore(k, acc, KS_I32(k, r), kir_bin(k, KB_ADD, kir_tload(k, acc, KS_I32(k, r)), kir_bin(k, KB_MUL, a, bv)));
        }
        kir_end(k);
        kir_end(k);
    }
    kir_barrier(k);
    kir_end(k);   /* kt */
    {
        int t = kir_var(k, KT_I64);
        kir_for(k, KIR_LOOP_THREADS, t, KS_I64(k, 0), KS_I64(k, 256));
        int ty = ks_let(k, KT_I64, kir_bin(k, KB_DIV, kir_var_ref(k, t), KS_I64(k, 16)));
        int tx = ks_let(k, KT_I64, kir_bin(k, KB_REM, kir_var_ref(k, t), KS_I64(k, 16)));
        int gc = ks_let(k, KT_I64, kir_bin(k, KB_ADD, kir_bin(k, KB_MUL, bn, KS_I64(k, BN)), tx));
        for (int r = 0; r < 2; r++) {
            int gr = kir_bin(k, KB_ADD, kir_bin(k, KB_MUL, bm, KS_I64(k, BM)), kir_bin(k, KB_ADD, ty, KS_I64(k, 16 * r)));
            kir_if(k, kir_bin(k, KB_AND, kir_bin(k, KB_LT, gr, KS_I64(k, M)), kir_bin(k, KB_LT, gc, KS_I64(k, N))));
            kir_store(k, 2, kir_bin(k, KB_ADD, kir_bin(k, KB_MUL, gr, KS_I64(k, N)), gc), kir_tload(k, acc, KS_I32(k, r)));
            kir_end(k);
        }
        kir_end(k);
    }
    if (!kir_kernel_ok(k) || !ks_launch_identity(p, 3)) { kir_program_free(p); return NULL; }
    return p;
}

/* ============================ 5. gather with a bounds check (KS_ERROR) ============================= */
enum { KS_GA_N = 50, KS_GA_V = 13, KS_GA_D = 7, KS_GA_BLOCK = 128 };
/* buffers: 0 ids i64[N], 1 table f32[V*D], 2 out f32[N*D]. Out-of-range ids set status
 * FC_ERR_RUNTIME_DATA and read row 0 instead (so the outputs stay comparable). */
static inline void ks_ga_fill_common(void *const *b, uint64_t seed, bool bad) {
    uint64_t s = seed;
    for (int i = 0; i < KS_GA_N; i++) ((int64_t *)b[0])[i] = ks_randint(&s, 1, KS_GA_V - 1);
    for (int i = 0; i < KS_GA_V * KS_GA_D; i++) ((float *)b[1])[i] = (float)ks_uniform(&s, -5, 5);
    if (bad) {
        ((int64_t *)b[0])[3] = -1;
        ((int64_t *)b[0])[KS_GA_N - 1] = KS_GA_V;
    }
}
static inline void ks_ga_fill(void *const *b, const KirProgram *p, uint64_t seed) { (void)p; ks_ga_fill_common(b, seed, false); }
static inline void ks_ga_fill_bad(void *const *b, const KirProgram *p, uint64_t seed) { (void)p; ks_ga_fill_common(b, seed, true); }
static inline int ks_ga_reference(void *const *b, const KirProgram *p) {
    (void)p;
    int status = 0;
    for (int i = 0; i < KS_GA_N; i++) {
        int64_t id = ((int64_t *)b[0])[i];
        if (id < 0 || id >= KS_GA_V) { status = FC_ERR_RUNTIME_DATA; id = 0; }
        for (int c = 0; c < KS_GA_D; c++) ((float *)b[2])[i * KS_GA_D + c] = ((float *)b[1])[id * KS_GA_D + c];
    }
    return status;
}
static inline KirProgram *ks_build_gather(void) {
    const int64_t N = KS_GA_N, V = KS_GA_V, D = KS_GA_D;
    KirProgram *p = kir_program_new("samples_gather");
    if (!p) return NULL;
    KirKernel *k = kir_kernel_new(p, "k0_gather", (N * D + KS_GA_BLOCK - 1) / KS_GA_BLOCK, KS_GA_BLOCK);
    if (!k) { kir_program_free(p); return NULL; }
    k->kind = "pointwise";
    k->ops = "gather";
    kir_param(k, FC_I64, N, false);
    kir_param(k, FC_F32, V * D, false);
    kir_param(k, FC_F32, N * D, true);
    if (ks_buffer(p, KIR_BUF_INPUT, 0, FC_I64, N, 0) < 0 || ks_buffer(p, KIR_BUF_INPUT, 1, FC_F32, V * D, 0) < 0 ||
        ks_buffer(p, KIR_BUF_OUTPUT, 0, FC_F32, N * D, 0) < 0) { kir_program_free(p); return NULL; }
    int lo = ks_let(k, KT_I64, kir_bin(k, KB_MUL, kir_block_idx(k), KS_I64(k, KS_GA_BLOCK)));
    int hi = ks_let(k, KT_I64, kir_bin(k, KB_MIN, kir_bin(k, KB_ADD, lo, KS_I64(k, KS_GA_BLOCK)), KS_I64(k, N * D)));
    int tv = kir_var(k, KT_I64);
    kir_for(k, KIR_LOOP_THREADS, tv, lo, hi);
    int t = kir_var_ref(k, tv);
    int id = ks_let(k, KT_I64, kir_load(k, 0, kir_bin(k, KB_DIV, t, KS_I64(k, D))));
    int bad = ks_let(k, KT_BOOL, kir_bin(k, KB_OR, kir_bin(k, KB_LT, id, KS_I64(k, 0)), kir_bin(k, KB_GE, id, KS_I64(k, V))));
    kir_error_if(k, bad, FC_ERR_RUNTIME_DATA);
    int safe = kir_select(k, bad, KS_I64(k, 0), id);
    kir_store(k, 2, t, kir_load(k, 1, kir_bin(k, KB_ADD, kir_bin(k, KB_MUL, safe, KS_I64(k, D)), kir_bin(k, KB_REM, t, KS_I64(k, D)))));
    kir_end(k);
    if (!kir_kernel_ok(k) || !ks_launch_identity(p, 3)) { kir_program_free(p); return NULL; }
    return p;
}

/* ============================ 6. two kernels through a workspace temp ============================== */
/* buffers: 0 x f32[n] in, 1 y f32[n] out, 2 t f16[n] temp at offset 0. k0: t = x * 2 (stored as
 * f16); k1: y = t + 1. */
static inline void ks_ts_fill(void *const *b, const KirProgram *p, uint64_t seed) {
    uint64_t s = seed;
    for (int64_t i = 0; i < p->buffers.data[0].numel; i++) ((float *)b[0])[i] = (float)ks_uniform(&s, -100, 100);
}
static inline int ks_ts_reference(void *const *b, const KirProgram *p) {
    for (int64_t i = 0; i < p->buffers.data[0].numel; i++) {
        float t = ks_round(FC_F16, ((float *)b[0])[i] * 2.0f);
        if (b[2]) ((uint16_t *)b[2])[i] = (uint16_t)ks_encode(FC_F16, t);
        ((float *)b[1])[i] = t + 1.0f;
    }
    return 0;
}
static inline KirProgram *ks_build_two_stage(int64_t n, int block) {
    KirProgram *p = kir_program_new("samples_two_stage");
    if (!p) return NULL;
    if (ks_buffer(p, KIR_BUF_INPUT, 0, FC_F32, n, 0) < 0 || ks_buffer(p, KIR_BUF_OUTPUT, 0, FC_F32, n, 0) < 0 ||
        ks_buffer(p, KIR_BUF_TEMP, 0, FC_F16, n, 0) < 0) { kir_program_free(p); return NULL; }
    p->workspace_bytes = (2 * n + 255) / 256 * 256;
    int64_t grid = (n + block - 1) / block;
    for (int s = 0; s < 2; s++) {
        KirKernel *k = kir_kernel_new(p, s == 0 ? "k0_scale" : "k1_add", grid, block);
        if (!k) { kir_program_free(p); return NULL; }
        k->kind = "pointwise";
        k->ops = s == 0 ? "mul" : "add";
        int in = kir_param(k, s == 0 ? FC_F32 : FC_F16, n, false);
        int out = kir_param(k, s == 0 ? FC_F16 : FC_F32, n, true);
        int lo = ks_let(k, KT_I64, kir_bin(k, KB_MUL, kir_block_idx(k), KS_I64(k, block)));
        int hi = ks_let(k, KT_I64, kir_bin(k, KB_MIN, kir_bin(k, KB_ADD, lo, KS_I64(k, block)), KS_I64(k, n)));
        int iv = kir_var(k, KT_I64);
        kir_for(k, KIR_LOOP_THREADS, iv, lo, hi);
        int i = kir_var_ref(k, iv);
        kir_store(k, out, i, kir_bin(k, s == 0 ? KB_MUL : KB_ADD, kir_load(k, in, i), KS_F32(k, s == 0 ? 2 : 1)));
        kir_end(k);
        int args[2] = {s == 0 ? 0 : 2, s == 0 ? 2 : 1};
        if (!kir_kernel_ok(k) || !ks_launch(p, s, 2, args)) { kir_program_free(p); return NULL; }
    }
    return p;
}

/* ============================ 7. Philox-4x32-10 (KE_PHILOX) ========================================== */
enum { KS_PH_N = 300, KS_PH_BLOCK = 128 };
/* Random123's known answers for philox4x32-10: counter (c0, c1, c2, c3), key (k0, k1), word 0 */
static const uint32_t ks_ph_kat[3][7] = {
    {0, 0, 0, 0, 0, 0, 0x6627e8d5u},
    {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0x408f276du},
    {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u, 0xd16cfe09u},
};
static inline int64_t ks_ph_pack(uint32_t lo, uint32_t hi) { return (int64_t)(((uint64_t)hi << 32) | lo); }
/* buffers: 0 i64[3 N] (counter low, counter high, key per lane), 1 out i64[N]. Lanes 0..2 are the
 * known answers; the others random. */
static inline void ks_ph_fill(void *const *b, const KirProgram *p, uint64_t seed) {
    (void)p;
    uint64_t s = seed;
    int64_t *in = b[0];
    for (int i = 0; i < KS_PH_N; i++) {
        const uint32_t *v = i < 3 ? ks_ph_kat[i] : NULL;
        in[3 * i] = v ? ks_ph_pack(v[0], v[1]) : (int64_t)ks_next(&s);
        in[3 * i + 1] = v ? ks_ph_pack(v[2], v[3]) : i % 2 ? 0 : (int64_t)ks_next(&s);
        in[3 * i + 2] = v ? ks_ph_pack(v[4], v[5]) : (int64_t)ks_next(&s);
    }
}
/* The known answers, and the reference interpreter's Philox (runtime/interp.c) elsewhere. */
static inline int ks_ph_reference(void *const *b, const KirProgram *p) {
    (void)p;
    const uint64_t *in = b[0];
    for (int i = 0; i < KS_PH_N; i++) {
        uint32_t ctr[4] = {(uint32_t)in[3 * i], (uint32_t)(in[3 * i] >> 32), (uint32_t)in[3 * i + 1],
                           (uint32_t)(in[3 * i + 1] >> 32)};
        uint32_t key[2] = {(uint32_t)in[3 * i + 2], (uint32_t)(in[3 * i + 2] >> 32)}, r[4];
        rt_interp_philox4x32_10(ctr, key, r);
        ((int64_t *)b[1])[i] = i < 3 ? ks_ph_kat[i][6] : r[0];
    }
    return 0;
}
static inline KirProgram *ks_build_philox(void) {
    KirProgram *p = kir_program_new("samples_philox");
    if (!p) return NULL;
    KirKernel *k = kir_kernel_new(p, "k0_philox", (KS_PH_N + KS_PH_BLOCK - 1) / KS_PH_BLOCK, KS_PH_BLOCK);
    if (!k) { kir_program_free(p); return NULL; }
    k->kind = "pointwise";
    k->ops = "dropout_mask";
    kir_param(k, FC_I64, 3 * KS_PH_N, false);
    kir_param(k, FC_I64, KS_PH_N, true);
    if (ks_buffer(p, KIR_BUF_INPUT, 0, FC_I64, 3 * KS_PH_N, 0) < 0 || ks_buffer(p, KIR_BUF_OUTPUT, 0, FC_I64, KS_PH_N, 0) < 0) {
        kir_program_free(p);
        return NULL;
    }
    int lo = ks_let(k, KT_I64, kir_bin(k, KB_MUL, kir_block_idx(k), KS_I64(k, KS_PH_BLOCK)));
    int hi = ks_let(k, KT_I64, kir_bin(k, KB_MIN, kir_bin(k, KB_ADD, lo, KS_I64(k, KS_PH_BLOCK)), KS_I64(k, KS_PH_N)));
    int tv = kir_var(k, KT_I64);
    kir_for(k, KIR_LOOP_THREADS, tv, lo, hi);
    int t = kir_var_ref(k, tv), at = kir_bin(k, KB_MUL, t, KS_I64(k, 3));
    int c01 = kir_load(k, 0, at), c23 = kir_load(k, 0, kir_bin(k, KB_ADD, at, KS_I64(k, 1)));
    int key = kir_load(k, 0, kir_bin(k, KB_ADD, at, KS_I64(k, 2)));
    kir_store(k, 1, t, kir_philox(k, c01, c23, key));
    kir_end(k);
    if (!kir_kernel_ok(k) || !ks_launch_identity(p, 2)) { kir_program_free(p); return NULL; }
    return p;
}

/* ============================ 8. amax (KS_AMAX) ===================================================== */
enum { KS_AM_S = 8 };
/* buffers: 0 x f32[n] in (both signs; a NaN in the _nan variant), 1 prior f32[S] in (non-negative),
 * 2 state f32[S] out (the amaxes), 3 y f8e4m3[n] out (x stored as f8, what an amax goes with),
 * 4 bmax f32[G] out (each block's max of x), and with a tail 5 gmax f32[1] out (the max of bmax).
 * k0_prior copies prior into state (the program sets the prior values: outputs are poisoned).
 * k1_amax: G blocks, block b over [lo, hi) = [b C, min(b C + C, n)), C = ks_am_chunk(block), not a
 * multiple of the block (a thread loop's last round is partial):
 *   state[0] <- |x[i]|             a thread loop
 *   state[1] <- |x[lo]|            block-uniform
 *   state[2] <- |x[j] * 3|         the body of the reduce_max whose result is bmax[b]
 *   state[3] <- |x[i]| if x[i] < 0 an if body in the thread loop
 *   state[4] <- |x[i] * 2^-10|     every value below the prior (1000): the element keeps it
 *   state[5] <- |x[v] + 0.5|       a vec 4 thread loop (its vector groups and the rest)
 *   state[6] <- |x[lo] - q|        a block-uniform serial loop, q in [0, 3)
 *   state[7] <- |x[i] * 0|         zeros (-0 among them) over a prior of 0: stays 0
 * The tail (a variant) reduces bmax into gmax[0]: the amaxes merge before its ticket. */
static const float ks_am_prior[KS_AM_S] = {0.5f, 0.25f, 2.0f, 0.125f, 1000.0f, 0.75f, 1.5f, 0.0f};
static inline int64_t ks_am_chunk(int block) { return block + 30; }
static inline void ks_am_fill_common(void *const *b, const KirProgram *p, uint64_t seed, bool nan) {
    uint64_t s = seed;
    int64_t n = p->buffers.data[0].numel;
    float *x = b[0];
    for (int64_t i = 0; i < n; i++) x[i] = (float)ks_uniform(&s, -100, 100);
    if (nan) {   /* a negative NaN with a payload: |.| clears the sign */
        uint32_t bits = 0xffc00123u;
        memcpy(&x[n / 2 + 3], &bits, 4);
    }
    memcpy(b[1], ks_am_prior, sizeof ks_am_prior);
}
static inline void ks_am_fill(void *const *b, const KirProgram *p, uint64_t seed) { ks_am_fill_common(b, p, seed, false); }
static inline void ks_am_fill_nan(void *const *b, const KirProgram *p, uint64_t seed) { ks_am_fill_common(b, p, seed, true); }
/* acc = max(acc, bits of |v|), KS_AMAX's order */
static inline void ks_am_max(uint32_t *acc, float v) {
    uint32_t bits;
    memcpy(&bits, &v, 4);
    bits &= 0x7fffffffu;
    if (bits > *acc) *acc = bits;
}
static inline int ks_am_reference(void *const *b, const KirProgram *p) {
    const float *x = b[0];
    int64_t n = p->buffers.data[0].numel, G = p->kernels.data[1]->grid, C = ks_am_chunk(p->kernels.data[1]->block);
    float *bmax = b[4];
    uint32_t acc[KS_AM_S];
    memcpy(acc, b[1], sizeof acc);
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        ((uint8_t *)b[3])[i] = (uint8_t)ks_encode(FC_F8E4M3, v);
        ks_am_max(&acc[0], v);
        ks_am_max(&acc[2], v * 3.0f);
        if (v < 0) ks_am_max(&acc[3], v);
        ks_am_max(&acc[4], v * 0x1p-10f);
        ks_am_max(&acc[5], v + 0.5f);
        ks_am_max(&acc[7], v * 0.0f);
    }
    for (int64_t g = 0; g < G; g++) {
        int64_t lo = g * C, hi = lo + C < n ? lo + C : n;
        ks_am_max(&acc[1], x[lo]);
        for (int q = 0; q < 3; q++) ks_am_max(&acc[6], x[lo] - (float)q);
        float m = -INFINITY;
        for (int64_t i = lo; i < hi; i++) m = ks_maxf(m, x[i]);
        bmax[g] = m;
    }
    if (p->buffers.len > 5) {
        float m = -INFINITY;
        for (int64_t g = 0; g < G; g++) m = ks_maxf(m, bmax[g]);
        ((float *)b[5])[0] = m;
    }
    memcpy(b[2], acc, sizeof acc);
    return 0;
}
static inline KirProgram *ks_build_amax(int64_t n, int block, bool tail) {
    const int64_t C = ks_am_chunk(block), G = (n + C - 1) / C, S = KS_AM_S;
    KirProgram *p = kir_program_new("samples_amax");
    if (!p) return NULL;
    if (ks_buffer(p, KIR_BUF_INPUT, 0, FC_F32, n, 0) < 0 || ks_buffer(p, KIR_BUF_INPUT, 1, FC_F32, S, 0) < 0 ||
        ks_buffer(p, KIR_BUF_OUTPUT, 0, FC_F32, S, 0) < 0 || ks_buffer(p, KIR_BUF_OUTPUT, 1, FC_F8E4M3, n, 0) < 0 ||
        ks_buffer(p, KIR_BUF_OUTPUT, 2, FC_F32, G, 0) < 0 || (tail && ks_buffer(p, KIR_BUF_OUTPUT, 3, FC_F32, 1, 0) < 0)) {
        kir_program_free(p);
        return NULL;
    }
    /* k0_prior: state = prior */
    KirKernel *k = kir_kernel_new(p, "k0_prior", 1, 32);
    if (!k) { kir_program_free(p); return NULL; }
    k->kind = "pointwise";
    k->ops = "copy";
    kir_param(k, FC_F32, S, false);
    kir_param(k, FC_F32, S, true);
    int iv = kir_var(k, KT_I64);
    kir_for(k, KIR_LOOP_THREADS, iv, KS_I64(k, 0), KS_I64(k, S));
    kir_store(k, 1, kir_var_ref(k, iv), kir_load(k, 0, kir_var_ref(k, iv)));
    kir_end(k);
    int args0[2] = {1, 2};
    if (!kir_kernel_ok(k) || !ks_launch(p, 0, 2, args0)) { kir_program_free(p); return NULL; }
    /* k1_amax */
    k = kir_kernel_new(p, "k1_amax", G, block);
    if (!k) { kir_program_free(p); return NULL; }
    k->kind = "amax";
    k->ops = "f8_store,amax";
    kir_param(k, FC_F32, n, false);
    kir_param(k, FC_F32, S, true);
    kir_param(k, FC_F8E4M3, n, true);
    kir_param(k, FC_F32, G, true);
    if (tail) kir_param(k, FC_F32, 1, true);
    int lo = ks_let(k, KT_I64, kir_bin(k, KB_MUL, kir_block_idx(k), KS_I64(k, C)));
    int hi = ks_let(k, KT_I64, kir_bin(k, KB_MIN, kir_bin(k, KB_ADD, lo, KS_I64(k, C)), KS_I64(k, n)));
    int first = kir_load(k, 0, lo);
    kir_amax(k, 1, KS_I64(k, 1), first);
    int qv = kir_var(k, KT_I64);
    kir_for(k, KIR_LOOP_SERIAL, qv, KS_I64(k, 0), KS_I64(k, 3));
    kir_amax(k, 1, KS_I64(k, 6), kir_bin(k, KB_SUB, first, kir_cast(k, KT_F32, kir_var_ref(k, qv))));
    kir_end(k);
    iv = kir_var(k, KT_I64);
    kir_for(k, KIR_LOOP_THREADS, iv, lo, hi);
    int x = ks_let(k, KT_F32, kir_load(k, 0, kir_var_ref(k, iv)));
    kir_store(k, 2, kir_var_ref(k, iv), x);
    kir_amax(k, 1, KS_I64(k, 0), x);
    kir_if(k, kir_bin(k, KB_LT, x, KS_F32(k, 0)));
    kir_amax(k, 1, KS_I64(k, 3), x);
    kir_end(k);
    kir_amax(k, 1, KS_I64(k, 4), kir_bin(k, KB_MUL, x, KS_F32(k, 0x1p-10)));
    kir_amax(k, 1, KS_I64(k, 7), kir_bin(k, KB_MUL, x, KS_F32(k, 0)));
    kir_end(k);
    int rv = kir_var(k, KT_F32), jv = kir_var(k, KT_I64);
    kir_reduce(k, KR_MAX, rv, jv, lo, hi);
    kir_amax(k, 1, KS_I64(k, 2), kir_bin(k, KB_MUL, kir_load(k, 0, kir_var_ref(k, jv)), KS_F32(k, 3)));
    kir_end_reduce(k, kir_load(k, 0, kir_var_ref(k, jv)));
    kir_store(k, 3, kir_block_idx(k), kir_var_ref(k, rv));
    int vv = kir_var(k, KT_I64);
    kir_for_vec(k, vv, lo, hi, 4);
    kir_amax(k, 1, KS_I64(k, 5), kir_bin(k, KB_ADD, kir_load_vec(k, 0, kir_var_ref(k, vv)), KS_F32(k, 0.5)));
    kir_end(k);
    if (tail) {   /* gmax = the max of the blocks' maxima, once every block has stored its own */
        kir_begin_tail(k);
        int tv = kir_var(k, KT_F32), tj = kir_var(k, KT_I64);
        kir_reduce(k, KR_MAX, tv, tj, KS_I64(k, 0), KS_I64(k, G));
        kir_end_reduce(k, kir_load(k, 3, kir_var_ref(k, tj)));
        kir_store(k, 4, KS_I64(k, 0), kir_var_ref(k, tv));
    }
    int args1[6] = {0, 2, 3, 4, 5};
    if (!kir_kernel_ok(k) || !ks_launch(p, 1, tail ? 5 : 4, args1)) { kir_program_free(p); return NULL; }
    return p;
}

/* ============================ 9. reductions of fewer lanes than the block ========================= */
enum { KS_RL_ROWS = 5, KS_RL_COLS = 1000, KS_RL_BLOCK = 256 };
/* KirStmt.lanes: a reduction spread over its first `lanes` threads has the bits of a block of
 * that many. Buffers: 0 x f32, 1 d f64 ([rows*cols]) | outputs [rows]: 2 sum(x) over the block,
 * 3 sum(x) lanes 32, 4 sum(x) lanes 128, 5 sum(d) lanes 96 (three warps: a tree of 3 inside one
 * of 8), 6 max(x) lanes 64. The reference runs each order exactly (rtol 0). */
static const int ks_rl_lanes[5] = {0, 32, 128, 96, 64};
static inline void ks_rl_fill(void *const *b, const KirProgram *p, uint64_t seed) {
    (void)p;
    uint64_t s = seed;
    for (int i = 0; i < KS_RL_ROWS * KS_RL_COLS; i++) {
        ((float *)b[0])[i] = (float)ks_uniform(&s, -10, 10);
        ((double *)b[1])[i] = ks_uniform(&s, -10, 10) * (1 + 1e-9 * i);
    }
}
/* thread t of `lanes` sums iterations t, t + lanes, ...; each warp's halving tree; the tree over
 * the warps (the order docs/cpu.md "Reduction order" describes) */
static inline double ks_rl_tree(const void *x, bool f64, int64_t n, int lanes, bool max) {
    double part[KS_RL_BLOCK];
    float partf[KS_RL_BLOCK];
    for (int t = 0; t < lanes; t++) { part[t] = max ? -INFINITY : 0.0; partf[t] = max ? -INFINITY : 0.0f; }
    for (int64_t j = 0; j < n; j++) {
        int t = (int)(j % lanes);
        if (f64) part[t] = part[t] + ((const double *)x)[j];
        else partf[t] = max ? ks_maxf(partf[t], ((const float *)x)[j]) : partf[t] + ((const float *)x)[j];
    }
    int nw = lanes / 32;
    for (int w = 0; w < nw; w++)
        for (int off = 16; off >= 1; off /= 2)
            for (int l = 0; l < off; l++) {
                int a = w * 32 + l, c = a + off;
                if (f64) part[a] = part[a] + part[c];
                else partf[a] = max ? ks_maxf(partf[a], partf[c]) : partf[a] + partf[c];
            }
    for (int off = 16; off >= 1; off /= 2)
        for (int i = 0; i < off && i + off < nw; i++) {
            if (f64) part[32 * i] = part[32 * i] + part[32 * (i + off)];
            else partf[32 * i] = max ? ks_maxf(partf[32 * i], partf[32 * (i + off)]) : partf[32 * i] + partf[32 * (i + off)];
        }
    return f64 ? part[0] : (double)partf[0];
}
static inline int ks_rl_reference(void *const *b, const KirProgram *p) {
    (void)p;
    for (int r = 0; r < KS_RL_ROWS; r++) {
        const float *x = (const float *)b[0] + (int64_t)r * KS_RL_COLS;
        const double *d = (const double *)b[1] + (int64_t)r * KS_RL_COLS;
        for (int o = 0; o < 5; o++) {
            int lanes = ks_rl_lanes[o] ? ks_rl_lanes[o] : KS_RL_BLOCK;
            if (o == 3) ((double *)b[2 + o])[r] = ks_rl_tree(d, true, KS_RL_COLS, lanes, false);
            else ((float *)b[2 + o])[r] = (float)ks_rl_tree(x, false, KS_RL_COLS, lanes, o == 4);
        }
    }
    return 0;
}
static inline KirProgram *ks_build_reduce_lanes(void) {
    const int64_t R = KS_RL_ROWS, C = KS_RL_COLS;
    KirProgram *p = kir_program_new("samples_reduce_lanes");
    if (!p) return NULL;
    KirKernel *k = kir_kernel_new(p, "k0_reduce_lanes", R, KS_RL_BLOCK);
    if (!k) { kir_program_free(p); return NULL; }
    k->kind = "row_reduce";
    k->ops = "sum,max";
    static const FcDtype dt[7] = {FC_F32, FC_F64, FC_F32, FC_F32, FC_F32, FC_F64, FC_F32};
    for (int b = 0; b < 7; b++) {
        int64_t n = b < 2 ? R * C : R;
        kir_param(k, dt[b], n, b >= 2);
        if (ks_buffer(p, b < 2 ? KIR_BUF_INPUT : KIR_BUF_OUTPUT, b < 2 ? b : b - 2, dt[b], n, 0) < 0) {
            kir_program_free(p);
            return NULL;
        }
    }
    int row = ks_let(k, KT_I64, kir_block_idx(k));
    int base = ks_let(k, KT_I64, kir_bin(k, KB_MUL, row, KS_I64(k, C)));
    int res[5];
    for (int o = 0; o < 5; o++) {
        int v = kir_var(k, o == 3 ? KT_F64 : KT_F32), j = kir_var(k, KT_I64);
        kir_reduce(k, o == 4 ? KR_MAX : KR_SUM, v, j, KS_I64(k, 0), KS_I64(k, C));
        if (ks_rl_lanes[o]) kir_reduce_lanes(k, ks_rl_lanes[o]);
        kir_end_reduce(k, kir_load(k, o == 3 ? 1 : 0, kir_bin(k, KB_ADD, base, kir_var_ref(k, j))));
        res[o] = v;
    }
    int t = kir_var(k, KT_I64);
    kir_for(k, KIR_LOOP_THREADS, t, KS_I64(k, 0), KS_I64(k, 1));   /* one thread stores */
    for (int o = 0; o < 5; o++) kir_store(k, 2 + o, row, kir_var_ref(k, res[o]));
    kir_end(k);
    if (!kir_kernel_ok(k) || !ks_launch_identity(p, 7)) { kir_program_free(p); return NULL; }
    return p;
}

/* ============================ the list ============================================================= */
enum { KS_NUM_SAMPLES = 15 };
/* Builds sample i (0 <= i < KS_NUM_SAMPLES); false on allocation failure. */
static inline bool ks_sample(int i, KsSample *s) {
    memset(s, 0, sizeof *s);
    switch (i) {
    case 0: *s = (KsSample){"pointwise", ks_build_pointwise(), ks_pw_fill, ks_pw_reference, 2e-5}; break;
    case 1: *s = (KsSample){"softmax_b256", ks_build_softmax(37, 1000, 256), ks_sm_fill, ks_sm_reference, 2e-5}; break;
    case 2: *s = (KsSample){"softmax_b100", ks_build_softmax(5, 77, 100), ks_sm_fill, ks_sm_reference, 2e-5}; break;
    case 3: *s = (KsSample){"softmax_b1", ks_build_softmax(3, 50, 1), ks_sm_fill, ks_sm_reference, 2e-5}; break;
    case 4: *s = (KsSample){"row_stats", ks_build_row_stats(), ks_rs_fill, ks_rs_reference, 2e-5}; break;
    case 5: *s = (KsSample){"matmul", ks_build_matmul(), ks_mm_fill, ks_mm_reference, 2e-5}; break;
    case 6: *s = (KsSample){"gather", ks_build_gather(), ks_ga_fill, ks_ga_reference, 0}; break;
    case 7: *s = (KsSample){"gather_bad_ids", ks_build_gather(), ks_ga_fill_bad, ks_ga_reference, 0}; break;
    case 8: *s = (KsSample){"two_stage", ks_build_two_stage(1000, 256), ks_ts_fill, ks_ts_reference, 1e-6}; break;
    case 9: *s = (KsSample){"two_stage_n1", ks_build_two_stage(1, 1), ks_ts_fill, ks_ts_reference, 1e-6}; break;
    case 10: *s = (KsSample){"philox", ks_build_philox(), ks_ph_fill, ks_ph_reference, 0}; break;
    case 11: *s = (KsSample){"amax_b100", ks_build_amax(1000, 100, false), ks_am_fill, ks_am_reference, 0}; break;
    case 12: *s = (KsSample){"amax_b1024_tail", ks_build_amax(5000, 1024, true), ks_am_fill, ks_am_reference, 0}; break;
    case 13: *s = (KsSample){"amax_nan_b48_tail", ks_build_amax(1000, 48, true), ks_am_fill_nan, ks_am_reference, 0}; break;
    case 14: *s = (KsSample){"reduce_lanes", ks_build_reduce_lanes(), ks_rl_fill, ks_rl_reference, 0}; break;
    default: return false;
    }
    return s->prog != NULL;
}
static inline void ks_sample_free(KsSample *s) {
    kir_program_free(s->prog);
    s->prog = NULL;
}

#endif
