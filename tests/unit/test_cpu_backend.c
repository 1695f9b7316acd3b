/* test_cpu_backend.c: the CPU backend (codegen/llvm.c, runtime/cpu.c, runtime/threadpool.c)
 * on hand-built kernel IR programs covering every KIR construct, against plain-C expected
 * results computed here.
 *
 * Inputs are seeded random values (never zeros), outputs are poisoned with NaN (or 0xA5
 * bytes) before each run, sizes are not multiples of the block and include 1. Every program
 * runs twice and must give identical bits; FUSEC_NUM_THREADS=1 vs 2 (and odd counts) must
 * agree bit for bit. Storage conversions are checked against an oracle that decodes every
 * code with ldexp and picks the nearest (ties to even) by search, independent of the
 * backend's bit tricks. Reductions are checked bit for bit against a C emulation of the
 * documented order (docs/cpu.md), and the test shows that a sequential sum would differ.
 */
#include "cache.h"
#include "codegen.h"
#include "cpu.h"
#include "host.h"
#include "kir.h"

#include <llvm-c/Core.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
#include "check.h"

/* ---- random numbers ------------------------------------------------------------------------ */
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
    rng ^= rng >> 12; rng ^= rng << 25; rng ^= rng >> 27;
    return rng * 0x2545f4914f6cdd1dull;
}
static double urand(void) { return (double)(rnd() >> 11) * (1.0 / 9007199254740992.0); }
/* uniform in [lo, hi), never exactly 0 */
static float frand(float lo, float hi) {
    for (;;) {
        float v = (float)(lo + (hi - lo) * urand());
        if (v != 0.0f) return v;
    }
}

static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static bool same_f32(float a, float b) { return (isnan(a) && isnan(b)) || f2u(a) == f2u(b); }
static bool same_f64(double a, double b) {
    uint64_t x, y;
    memcpy(&x, &a, 8); memcpy(&y, &b, 8);
    return (isnan(a) && isnan(b)) || x == y;
}
static bool close_f(double got, double want, double rtol, double atol) {
    if (isnan(want)) return isnan(got);
    if (isinf(want)) return got == want;
    return fabs(got - want) <= atol + rtol * fabs(want);
}

static void *xalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) { fprintf(stderr, "out of memory\n"); exit(2); }
    return p;
}
static void poison(void *p, FcDtype d, int64_t n) {
    if (d == FC_F32) for (int64_t i = 0; i < n; i++) ((float *)p)[i] = NAN;
    else if (d == FC_F64) for (int64_t i = 0; i < n; i++) ((double *)p)[i] = NAN;
    else memset(p, 0xA5, (size_t)n * fc_dtype_size(d));
}

/* ---- program building ---------------------------------------------------------------------- */
typedef struct Prog {
    KirProgram *p;
    int nin, nout;
    int64_t ws;
} Prog;

static void prog_init(Prog *g, const char *name) {
    g->p = kir_program_new(name);
    g->nin = g->nout = 0;
    g->ws = 0;
    if (!g->p) { fprintf(stderr, "out of memory\n"); exit(2); }
}
static int add_buf(Prog *g, KirBufKind kind, FcDtype d, int64_t n) {
    KirBuffer b = {kind, 0, d, n, 0, -1};
    if (kind == KIR_BUF_INPUT) b.index = g->nin++;
    else if (kind == KIR_BUF_OUTPUT) b.index = g->nout++;
    else {
        b.offset = g->ws;
        g->ws += ((n * (int64_t)fc_dtype_size(d) + 255) / 256) * 256;
        g->p->workspace_bytes = g->ws;
    }
    if (!FC_VEC_PUSH(&g->p->buffers, b)) exit(2);
    return g->p->buffers.len - 1;
}
static void add_launch(Prog *g, int kernel, int nargs, const int *args) {
    KirLaunch l = {kernel, nargs, arena_alloc(&g->p->arena, sizeof(int) * (size_t)(nargs ? nargs : 1))};
    if (!l.args) exit(2);
    memcpy(l.args, args, sizeof(int) * (size_t)nargs);
    if (!FC_VEC_PUSH(&g->p->launches, l)) exit(2);
}
/* One launch of kernel `ki` whose params are bound to buffers of the same dtype/size, in order. */
static void launch_all(Prog *g, int ki, const int *bufs) {
    add_launch(g, ki, g->p->kernels.data[ki]->params.len, bufs);
}

#define C64(k, v) kir_const_i((k), KT_I64, (v))
#define VR(k, v) kir_var_ref((k), (v))

/* Opens `for threads i in [b*block, min(b*block + block, n))`; returns i's var. */
static int open_pointwise(KirKernel *k, int64_t n) {
    int vlo = kir_var(k, KT_I64), vhi = kir_var(k, KT_I64), vi = kir_var(k, KT_I64);
    kir_let(k, vlo, kir_bin(k, KB_MUL, kir_block_idx(k), C64(k, k->block)));
    kir_let(k, vhi, kir_bin(k, KB_MIN, kir_bin(k, KB_ADD, VR(k, vlo), C64(k, k->block)), C64(k, n)));
    kir_for(k, KIR_LOOP_THREADS, vi, VR(k, vlo), VR(k, vhi));
    return vi;
}
static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Compiles and runs with nthreads (twice, checking identical outputs); 0 on success. */
static FcStatus run_prog(Prog *g, int nthreads, void **in, void **out, const int64_t *out_bytes,
                         FcErr *err) {
    RtCpuProgram *cp = NULL;
    for (int i = 0; i < g->p->kernels.len; i++) { /* the test's programs are valid kernel IR */
        FcErr verr;
        FcStatus vs = kir_verify(g->p->kernels.data[i], &verr);
        EXPECT(vs == FC_OK, "%s: kir_verify: %s", g->p->block_name, vs == FC_OK ? "" : verr.msg);
    }
    FcStatus s = rt_cpu_compile(g->p, nthreads, &cp, err);
    if (s != FC_OK) return s;
    s = rt_cpu_run(cp, in, out, err);
    if (s == FC_OK && out_bytes) {
        void **first = xalloc(sizeof(void *) * (size_t)(g->nout + 1));
        for (int i = 0; i < g->nout; i++) {
            first[i] = xalloc((size_t)out_bytes[i]);
            memcpy(first[i], out[i], (size_t)out_bytes[i]);
            memset(out[i], 0x7f, (size_t)out_bytes[i]);
        }
        s = rt_cpu_run(cp, in, out, err);
        for (int i = 0; i < g->nout; i++) {
            EXPECT(s != FC_OK || memcmp(first[i], out[i], (size_t)out_bytes[i]) == 0,
                  "%s: output %d differs between two runs", g->p->block_name, i);
            free(first[i]);
        }
        free(first);
    }
    rt_cpu_free(cp);
    return s;
}
#define RUN_OK(g, nt, in, out, bytes)                                                       \
    do {                                                                                    \
        FcErr err_;                                                                         \
        FcStatus s_ = run_prog((g), (nt), (in), (out), (bytes), &err_);                     \
        EXPECT(s_ == FC_OK, "%s: %s", (g)->p->block_name, s_ == FC_OK ? "" : err_.msg);      \
    } while (0)

/* ---- 1. pointwise, sizes 1 and not multiples of the block, grid > threads -------------------- */
static void build_axpy(Prog *g, int64_t n, int block) {
    KirKernel *k = kir_kernel_new(g->p, "k0_axpy", cdiv(n, block), block);
    int x = kir_param(k, FC_F32, n, false), y = kir_param(k, FC_F32, n, false), o = kir_param(k, FC_F32, n, true);
    int vi = open_pointwise(k, n);
    int v = kir_bin(k, KB_ADD, kir_bin(k, KB_MUL, kir_load(k, x, VR(k, vi)), kir_const_f(k, KT_F32, 2.5)),
                    kir_load(k, y, VR(k, vi)));
    kir_store(k, o, VR(k, vi), v);
    kir_end(k);
    EXPECT(kir_kernel_ok(k), "axpy built");
    int bufs[3] = {add_buf(g, KIR_BUF_INPUT, FC_F32, n), add_buf(g, KIR_BUF_INPUT, FC_F32, n),
                   add_buf(g, KIR_BUF_OUTPUT, FC_F32, n)};
    launch_all(g, 0, bufs);
}

static void test_pointwise(void) {
    static const int64_t sizes[] = {1, 1000, 4097, 100003};
    static const int blocks[] = {128, 128, 256, 32};
    for (int t = 0; t < 4; t++) {
        int64_t n = sizes[t];
        Prog g;
        prog_init(&g, "pointwise");
        build_axpy(&g, n, blocks[t]);
        float *x = xalloc(sizeof(float) * (size_t)n), *y = xalloc(sizeof(float) * (size_t)n);
        float *o1 = xalloc(sizeof(float) * (size_t)n), *o2 = xalloc(sizeof(float) * (size_t)n);
        for (int64_t i = 0; i < n; i++) { x[i] = frand(-10, 10); y[i] = frand(-10, 10); }
        void *in[2] = {x, y}, *out1[1] = {o1}, *out2[1] = {o2};
        int64_t bytes[1] = {n * 4};
        poison(o1, FC_F32, n);
        poison(o2, FC_F32, n);
        RUN_OK(&g, 2, in, out1, bytes);
        RUN_OK(&g, 1, in, out2, bytes);
        int bad = 0;
        for (int64_t i = 0; i < n; i++) bad += !same_f32(o1[i], x[i] * 2.5f + y[i]);
        EXPECT(bad == 0, "axpy n=%lld: %d wrong", (long long)n, bad);
        EXPECT(memcmp(o1, o2, (size_t)n * 4) == 0, "axpy n=%lld: 1 vs 2 threads differ", (long long)n);
        if (n == 100003) { /* more threads than cores, grid far above the thread count */
            poison(o2, FC_F32, n);
            RUN_OK(&g, 7, in, out2, bytes);
            EXPECT(memcmp(o1, o2, (size_t)n * 4) == 0, "axpy: 2 vs 7 threads differ");
        }
        free(x); free(y); free(o1); free(o2);
        kir_program_free(g.p);
    }
}

/* ---- 2. unary ops ----------------------------------------------------------------------------- */
static void test_unary(void) {
    const int64_t n = 333;
    const int block = 64;
    for (int wide = 0; wide < 2; wide++) {
        FcDtype d = wide ? FC_F64 : FC_F32;
        KirType t = wide ? KT_F64 : KT_F32;
        static const KirUnOp fops[] = {KU_NEG, KU_ABS, KU_EXP, KU_LOG, KU_SQRT, KU_RSQRT, KU_RECIP,
                                       KU_TANH, KU_ERF, KU_SIN, KU_COS, KU_FLOOR};
        enum { NF = sizeof fops / sizeof fops[0] };
        Prog g;
        prog_init(&g, "unary");
        KirKernel *k = kir_kernel_new(g.p, "k0_unary", cdiv(n, block), block);
        int xs = kir_param(k, d, n, false), xp = kir_param(k, d, n, false);
        int outs[NF];
        for (int j = 0; j < NF; j++) outs[j] = kir_param(k, d, n, true);
        int vi = open_pointwise(k, n);
        for (int j = 0; j < NF; j++) {
            bool pos = fops[j] == KU_LOG || fops[j] == KU_SQRT || fops[j] == KU_RSQRT;
            kir_store(k, outs[j], VR(k, vi), kir_un(k, fops[j], kir_load(k, pos ? xp : xs, VR(k, vi))));
        }
        kir_end(k);
        (void)t;
        int bufs[2 + NF];
        bufs[0] = add_buf(&g, KIR_BUF_INPUT, d, n);
        bufs[1] = add_buf(&g, KIR_BUF_INPUT, d, n);
        for (int j = 0; j < NF; j++) bufs[2 + j] = add_buf(&g, KIR_BUF_OUTPUT, d, n);
        launch_all(&g, 0, bufs);
        size_t es = fc_dtype_size(d);
        char *xsb = xalloc(es * (size_t)n), *xpb = xalloc(es * (size_t)n);
        void *in[2] = {xsb, xpb}, *out[NF];
        int64_t bytes[NF];
        for (int64_t i = 0; i < n; i++) {
            double a = frand(-4, 4), b = frand(0.01f, 50);
            if (wide) { ((double *)xsb)[i] = a; ((double *)xpb)[i] = b; }
            else { ((float *)xsb)[i] = (float)a; ((float *)xpb)[i] = (float)b; }
        }
        for (int j = 0; j < NF; j++) { out[j] = xalloc(es * (size_t)n); poison(out[j], d, n); bytes[j] = n * (int64_t)es; }
        RUN_OK(&g, 2, in, out, bytes);
        for (int j = 0; j < NF; j++) {
            int bad = 0;
            for (int64_t i = 0; i < n && bad < 3; i++) {
                if (wide) {
                    double a = ((double *)(fops[j] == KU_LOG || fops[j] == KU_SQRT || fops[j] == KU_RSQRT ? xpb : xsb))[i];
                    double w, got = ((double *)out[j])[i];
                    switch (fops[j]) {
                    case KU_NEG: w = -a; break; case KU_ABS: w = fabs(a); break; case KU_EXP: w = exp(a); break;
                    case KU_LOG: w = log(a); break; case KU_SQRT: w = sqrt(a); break; case KU_RSQRT: w = 1.0 / sqrt(a); break;
                    case KU_RECIP: w = 1.0 / a; break; case KU_TANH: w = tanh(a); break; case KU_ERF: w = erf(a); break;
                    case KU_SIN: w = sin(a); break; case KU_COS: w = cos(a); break; default: w = floor(a); break;
                    }
                    if (!close_f(got, w, 4e-16, 1e-300)) { bad++; fprintf(stderr, "  f64 %s(%.17g) = %.17g, want %.17g\n", kir_unop_name(fops[j]), a, got, w); }
                } else {
                    float a = ((float *)(fops[j] == KU_LOG || fops[j] == KU_SQRT || fops[j] == KU_RSQRT ? xpb : xsb))[i];
                    float w, got = ((float *)out[j])[i];
                    switch (fops[j]) {
                    case KU_NEG: w = -a; break; case KU_ABS: w = fabsf(a); break; case KU_EXP: w = expf(a); break;
                    case KU_LOG: w = logf(a); break; case KU_SQRT: w = sqrtf(a); break; case KU_RSQRT: w = 1.0f / sqrtf(a); break;
                    case KU_RECIP: w = 1.0f / a; break; case KU_TANH: w = tanhf(a); break; case KU_ERF: w = erff(a); break;
                    case KU_SIN: w = sinf(a); break; case KU_COS: w = cosf(a); break; default: w = floorf(a); break;
                    }
                    /* exact where the C library is called or IEEE defines the result; a few ulps
                     * for the transcendental intrinsics LLVM may lower differently */
                    if (!close_f(got, w, 3e-7, 1e-38)) { bad++; fprintf(stderr, "  f32 %s(%.9g) = %.9g, want %.9g\n", kir_unop_name(fops[j]), a, got, w); }
                }
            }
            EXPECT(bad == 0, "unary %s on %s", kir_unop_name(fops[j]), fc_dtype_name(d));
            free(out[j]);
        }
        free(xsb); free(xpb);
        kir_program_free(g.p);
    }
    /* integer neg/abs and bool not */
    {
        Prog g;
        prog_init(&g, "unary_int");
        KirKernel *k = kir_kernel_new(g.p, "k0_unary_int", cdiv(n, block), block);
        int a32 = kir_param(k, FC_I32, n, false), a64 = kir_param(k, FC_I64, n, false), ab = kir_param(k, FC_BOOL, n, false);
        int o[5];
        o[0] = kir_param(k, FC_I32, n, true); o[1] = kir_param(k, FC_I32, n, true);
        o[2] = kir_param(k, FC_I64, n, true); o[3] = kir_param(k, FC_I64, n, true);
        o[4] = kir_param(k, FC_BOOL, n, true);
        int vi = open_pointwise(k, n);
        kir_store(k, o[0], VR(k, vi), kir_un(k, KU_NEG, kir_load(k, a32, VR(k, vi))));
        kir_store(k, o[1], VR(k, vi), kir_un(k, KU_ABS, kir_load(k, a32, VR(k, vi))));
        kir_store(k, o[2], VR(k, vi), kir_un(k, KU_NEG, kir_load(k, a64, VR(k, vi))));
        kir_store(k, o[3], VR(k, vi), kir_un(k, KU_ABS, kir_load(k, a64, VR(k, vi))));
        kir_store(k, o[4], VR(k, vi), kir_un(k, KU_NOT, kir_load(k, ab, VR(k, vi))));
        kir_end(k);
        int bufs[8] = {add_buf(&g, KIR_BUF_INPUT, FC_I32, n), add_buf(&g, KIR_BUF_INPUT, FC_I64, n),
                       add_buf(&g, KIR_BUF_INPUT, FC_BOOL, n), add_buf(&g, KIR_BUF_OUTPUT, FC_I32, n),
                       add_buf(&g, KIR_BUF_OUTPUT, FC_I32, n), add_buf(&g, KIR_BUF_OUTPUT, FC_I64, n),
                       add_buf(&g, KIR_BUF_OUTPUT, FC_I64, n), add_buf(&g, KIR_BUF_OUTPUT, FC_BOOL, n)};
        launch_all(&g, 0, bufs);
        int32_t *i32 = xalloc(4 * (size_t)n), *on32 = xalloc(4 * (size_t)n), *oa32 = xalloc(4 * (size_t)n);
        int64_t *i64 = xalloc(8 * (size_t)n), *on64 = xalloc(8 * (size_t)n), *oa64 = xalloc(8 * (size_t)n);
        uint8_t *ib = xalloc((size_t)n), *ob = xalloc((size_t)n);
        for (int64_t i = 0; i < n; i++) {
            i32[i] = (int32_t)(rnd() % 2000001) - 1000000;
            i64[i] = (int64_t)(rnd() % 2000000000001ull) - 1000000000000ll;
            if (!i32[i]) i32[i] = 7;
            if (!i64[i]) i64[i] = -9;
            ib[i] = rnd() & 1;
        }
        void *in[3] = {i32, i64, ib}, *out[5] = {on32, oa32, on64, oa64, ob};
        int64_t bytes[5] = {4 * n, 4 * n, 8 * n, 8 * n, n};
        for (int j = 0; j < 5; j++) memset(out[j], 0xA5, (size_t)bytes[j]);
        RUN_OK(&g, 2, in, out, bytes);
        int bad = 0;
        for (int64_t i = 0; i < n; i++)
            bad += on32[i] != -i32[i] || oa32[i] != abs(i32[i]) || on64[i] != -i64[i] ||
                   oa64[i] != llabs(i64[i]) || ob[i] != !ib[i];
        EXPECT(bad == 0, "integer unary ops: %d wrong", bad);
        free(i32); free(on32); free(oa32); free(i64); free(on64); free(oa64); free(ib); free(ob);
        kir_program_free(g.p);
    }
}

/* ---- 3. binary ops ----------------------------------------------------------------------------- */
static const KirBinOp all_binops[] = {KB_ADD, KB_SUB, KB_MUL, KB_DIV, KB_REM, KB_POW, KB_MAX, KB_MIN,
                                      KB_LT, KB_LE, KB_GT, KB_GE, KB_EQ, KB_NE, KB_AND, KB_OR};
static bool binop_defined(KirBinOp op, KirType t) {
    bool f = t == KT_F32 || t == KT_F64, i = t == KT_I32 || t == KT_I64, b = t == KT_BOOL;
    switch (op) {
    case KB_ADD: case KB_SUB: case KB_MUL: case KB_DIV: return f || i;
    case KB_REM: return i;
    case KB_POW: return f;
    case KB_MAX: case KB_MIN: return true;
    case KB_AND: case KB_OR: return i || b;
    default: return true;
    }
}
static double get_num(const void *p, FcDtype d, int64_t i) {
    switch (d) {
    case FC_F32: return ((const float *)p)[i];
    case FC_F64: return ((const double *)p)[i];
    case FC_I32: return ((const int32_t *)p)[i];
    case FC_I64: return (double)((const int64_t *)p)[i];
    default: return ((const uint8_t *)p)[i];
    }
}
static double fmax_nan(double a, double b) { return isnan(a) || isnan(b) ? NAN : (a > b ? a : b); }
static double fmin_nan(double a, double b) { return isnan(a) || isnan(b) ? NAN : (a < b ? a : b); }

static void test_binary(void) {
    const int64_t n = 251;
    const int block = 32;
    static const FcDtype dts[] = {FC_F32, FC_F64, FC_I32, FC_I64, FC_BOOL};
    for (int di = 0; di < 5; di++) {
        FcDtype d = dts[di];
        KirType t = kir_compute_type(d);
        Prog g;
        prog_init(&g, "binary");
        KirKernel *k = kir_kernel_new(g.p, "k0_binary", cdiv(n, block), block);
        int pa = kir_param(k, d, n, false), pb = kir_param(k, d, n, false);
        int nops = 0, ops[KB_COUNT], outs[KB_COUNT];
        FcDtype odt[KB_COUNT];
        for (int j = 0; j < (int)(sizeof all_binops / sizeof all_binops[0]); j++) {
            if (!binop_defined(all_binops[j], t)) continue;
            ops[nops] = all_binops[j];
            odt[nops] = (all_binops[j] >= KB_LT && all_binops[j] <= KB_NE) ? FC_BOOL : d;
            outs[nops] = kir_param(k, odt[nops], n, true);
            nops++;
        }
        int vi = open_pointwise(k, n);
        for (int j = 0; j < nops; j++)
            kir_store(k, outs[j], VR(k, vi), kir_bin(k, (KirBinOp)ops[j], kir_load(k, pa, VR(k, vi)), kir_load(k, pb, VR(k, vi))));
        kir_end(k);
        EXPECT(kir_kernel_ok(k), "binary kernel built");
        int bufs[2 + KB_COUNT];
        bufs[0] = add_buf(&g, KIR_BUF_INPUT, d, n);
        bufs[1] = add_buf(&g, KIR_BUF_INPUT, d, n);
        for (int j = 0; j < nops; j++) bufs[2 + j] = add_buf(&g, KIR_BUF_OUTPUT, odt[j], n);
        launch_all(&g, 0, bufs);
        size_t es = fc_dtype_size(d);
        char *a = xalloc(es * (size_t)n), *b = xalloc(es * (size_t)n);
        for (int64_t i = 0; i < n; i++) {
            double x = frand(0.25f, 9), y = frand(0.25f, 9);
            if (i % 7 == 3) y = x; /* equal operands for EQ/LE/GE */
            switch (d) {
            case FC_F32:
                ((float *)a)[i] = (float)(x - 4);
                ((float *)b)[i] = i % 11 == 5 ? NAN : (float)y;
                if (i % 7 == 3) ((float *)b)[i] = ((float *)a)[i];
                if (i % 13 == 6) ((float *)a)[i] = fabsf(((float *)a)[i]); /* pow of a positive base */
                break;
            case FC_F64:
                ((double *)a)[i] = i % 17 == 2 ? NAN : x - 4;
                ((double *)b)[i] = i % 7 == 3 ? ((double *)a)[i] : y;
                break;
            case FC_I32:
                ((int32_t *)a)[i] = (int32_t)(rnd() % 100000) + 1;
                ((int32_t *)b)[i] = i % 7 == 3 ? ((int32_t *)a)[i] : (int32_t)(rnd() % 300) + 1;
                if (i % 19 == 4) ((int32_t *)b)[i] = 0; /* x / 0 and x % 0 give 0 */
                break;
            case FC_I64:
                ((int64_t *)b)[i] = (int64_t)(rnd() % 100000) + 1;
                ((int64_t *)a)[i] = i % 7 == 3 ? ((int64_t *)b)[i] : (int64_t)(rnd() % 100000000000ull) + 1;
                break;
            default:
                ((uint8_t *)a)[i] = rnd() & 1;
                ((uint8_t *)b)[i] = rnd() & 1;
                break;
            }
        }
        void *in[2] = {a, b}, *out[KB_COUNT];
        int64_t bytes[KB_COUNT];
        for (int j = 0; j < nops; j++) {
            bytes[j] = n * (int64_t)fc_dtype_size(odt[j]);
            out[j] = xalloc((size_t)bytes[j]);
            poison(out[j], odt[j], n);
        }
        RUN_OK(&g, 2, in, out, bytes);
        for (int j = 0; j < nops; j++) {
            int bad = 0;
            for (int64_t i = 0; i < n; i++) {
                double x = get_num(a, d, i), y = get_num(b, d, i), w = 0;
                int64_t xi = 0, yi = 0;
                if (d == FC_I64) { xi = ((int64_t *)a)[i]; yi = ((int64_t *)b)[i]; }
                else if (d == FC_I32) { xi = ((int32_t *)a)[i]; yi = ((int32_t *)b)[i]; }
                bool isint = d == FC_I32 || d == FC_I64;
                switch (ops[j]) {
                case KB_ADD: w = isint ? (double)(xi + yi) : x + y; break;
                case KB_SUB: w = isint ? (double)(xi - yi) : x - y; break;
                case KB_MUL: w = isint ? (double)(d == FC_I32 ? (int64_t)(int32_t)(xi * yi) : xi * yi) : x * y; break;
                case KB_DIV: w = isint ? (double)(yi ? xi / yi : 0) : x / y; break;
                case KB_REM: w = (double)(yi ? xi % yi : 0); break;
                case KB_POW: w = x; break; /* checked below */
                case KB_MAX: w = d == FC_BOOL ? (x || y) : fmax_nan(x, y); break;
                case KB_MIN: w = d == FC_BOOL ? (x && y) : fmin_nan(x, y); break;
                case KB_LT: w = x < y; break;
                case KB_LE: w = x <= y; break;
                case KB_GT: w = x > y; break;
                case KB_GE: w = x >= y; break;
                case KB_EQ: w = x == y; break;
                case KB_NE: w = x != y; break;
                case KB_AND: w = isint ? (double)(xi & yi) : (x && y); break;
                case KB_OR: w = isint ? (double)(xi | yi) : (x || y); break;
                default: break;
                }
                double got = get_num(out[j], odt[j], i);
                bool ok;
                if (d == FC_F32 && ops[j] != KB_POW && odt[j] == FC_F32) {
                    float wf = ops[j] == KB_ADD ? (float)x + (float)y : ops[j] == KB_SUB ? (float)x - (float)y
                             : ops[j] == KB_MUL ? (float)x * (float)y : ops[j] == KB_DIV ? (float)x / (float)y : (float)w;
                    ok = same_f32((float)got, wf);
                } else if (ops[j] == KB_POW) {
                    double pw = d == FC_F32 ? (double)powf((float)x, (float)y) : pow(x, y);
                    ok = close_f(got, pw, d == FC_F32 ? 3e-7 : 4e-16, 0);
                } else if (d == FC_I64 && odt[j] == FC_I64) {
                    int64_t gi = ((int64_t *)out[j])[i], wi;
                    switch (ops[j]) {
                    case KB_ADD: wi = xi + yi; break; case KB_SUB: wi = xi - yi; break; case KB_MUL: wi = xi * yi; break;
                    case KB_DIV: wi = yi ? xi / yi : 0; break; case KB_REM: wi = yi ? xi % yi : 0; break;
                    case KB_MAX: wi = xi > yi ? xi : yi; break; case KB_MIN: wi = xi < yi ? xi : yi; break;
                    case KB_AND: wi = xi & yi; break; default: wi = xi | yi; break;
                    }
                    ok = gi == wi;
                } else {
                    ok = same_f64(got, w);
                }
                if (!ok && bad++ < 3)
                    fprintf(stderr, "  %s %s(%.9g, %.9g) = %.9g, want %.9g\n", fc_dtype_name(d),
                            kir_binop_name((KirBinOp)ops[j]), x, y, got, w);
            }
            EXPECT(bad == 0, "binary %s on %s", kir_binop_name((KirBinOp)ops[j]), fc_dtype_name(d));
            free(out[j]);
        }
        free(a); free(b);
        kir_program_free(g.p);
    }
}

/* ---- 4. select and casts ------------------------------------------------------------------------- */
static int64_t sat_i(double v, int64_t lo, int64_t hi) {
    if (isnan(v)) return 0;
    double t = trunc(v);
    if (t <= (double)lo) return lo;
    if (t >= (double)hi) return hi;
    return (int64_t)t;
}
static void test_casts(void) {
    const int64_t n = 97;
    const int block = 16;
    Prog g;
    prog_init(&g, "casts");
    KirKernel *k = kir_kernel_new(g.p, "k0_casts", cdiv(n, block), block);
    int px = kir_param(k, FC_F32, n, false), pd = kir_param(k, FC_F64, n, false);
    int pi = kir_param(k, FC_I32, n, false), pl = kir_param(k, FC_I64, n, false), pb = kir_param(k, FC_BOOL, n, false);
    static const struct { FcDtype out; int src; KirType to; } cs[] = {
        {FC_I32, 0, KT_I32}, {FC_I64, 0, KT_I64}, {FC_F64, 0, KT_F64}, {FC_BOOL, 0, KT_BOOL},
        {FC_I32, 1, KT_I32}, {FC_I64, 1, KT_I64}, {FC_F32, 1, KT_F32},
        {FC_F32, 2, KT_F32}, {FC_I64, 2, KT_I64}, {FC_BOOL, 2, KT_BOOL}, {FC_F64, 2, KT_F64},
        {FC_F64, 3, KT_F64}, {FC_F32, 3, KT_F32}, {FC_I32, 3, KT_I32},
        {FC_F32, 4, KT_F32}, {FC_I32, 4, KT_I32}, {FC_I64, 4, KT_I64},
    };
    enum { NC = sizeof cs / sizeof cs[0] };
    int outs[NC + 1];
    for (int j = 0; j < NC; j++) outs[j] = kir_param(k, cs[j].out, n, true);
    outs[NC] = kir_param(k, FC_F32, n, true); /* select */
    int srcp[5] = {px, pd, pi, pl, pb};
    int vi = open_pointwise(k, n);
    for (int j = 0; j < NC; j++)
        kir_store(k, outs[j], VR(k, vi), kir_cast(k, cs[j].to, kir_load(k, srcp[cs[j].src], VR(k, vi))));
    int x = kir_load(k, px, VR(k, vi));
    kir_store(k, outs[NC], VR(k, vi),
              kir_select(k, kir_bin(k, KB_GT, x, kir_const_f(k, KT_F32, 0.5)), x,
                         kir_bin(k, KB_MUL, x, kir_const_f(k, KT_F32, -3.0))));
    kir_end(k);
    EXPECT(kir_kernel_ok(k), "casts built");
    int bufs[5 + NC + 1];
    bufs[0] = add_buf(&g, KIR_BUF_INPUT, FC_F32, n); bufs[1] = add_buf(&g, KIR_BUF_INPUT, FC_F64, n);
    bufs[2] = add_buf(&g, KIR_BUF_INPUT, FC_I32, n); bufs[3] = add_buf(&g, KIR_BUF_INPUT, FC_I64, n);
    bufs[4] = add_buf(&g, KIR_BUF_INPUT, FC_BOOL, n);
    for (int j = 0; j < NC; j++) bufs[5 + j] = add_buf(&g, KIR_BUF_OUTPUT, cs[j].out, n);
    bufs[5 + NC] = add_buf(&g, KIR_BUF_OUTPUT, FC_F32, n);
    launch_all(&g, 0, bufs);

    float *fx = xalloc(4 * (size_t)n); double *fd = xalloc(8 * (size_t)n);
    int32_t *ii = xalloc(4 * (size_t)n); int64_t *il = xalloc(8 * (size_t)n); uint8_t *ib = xalloc((size_t)n);
    static const float fspecial[] = {NAN, INFINITY, -INFINITY, 3e9f, -3e9f, 1e20f, -1e20f, 2.7f, -2.7f, -0.5f, 0.75f, 2147483520.0f};
    static const double dspecial[] = {NAN, INFINITY, -INFINITY, 1e19, -1e19, 9.3e18, -9.3e18, 3e9, -3e9, 2.999, -2.999, -0.25};
    for (int64_t i = 0; i < n; i++) {
        fx[i] = i < 12 ? fspecial[i] : frand(-100, 100);
        fd[i] = i < 12 ? dspecial[i] : frand(-1e6f, 1e6f);
        ii[i] = (int32_t)(rnd() % 2000001) - 1000000;
        if (!ii[i]) ii[i] = 3;
        il[i] = (int64_t)(rnd() >> 1) - (int64_t)(rnd() >> 1);
        if (i == 0) il[i] = INT64_MAX;
        if (i == 1) il[i] = INT64_MIN;
        if (!il[i]) il[i] = -5;
        ib[i] = rnd() & 1;
    }
    void *in[5] = {fx, fd, ii, il, ib}, *out[NC + 1];
    int64_t bytes[NC + 1];
    for (int j = 0; j <= NC; j++) {
        FcDtype od = j < NC ? cs[j].out : FC_F32;
        bytes[j] = n * (int64_t)fc_dtype_size(od);
        out[j] = xalloc((size_t)bytes[j]);
        poison(out[j], od, n);
    }
    RUN_OK(&g, 2, in, out, bytes);
    for (int j = 0; j <= NC; j++) {
        int bad = 0;
        for (int64_t i = 0; i < n; i++) {
            bool ok = true;
            if (j == NC) {
                float w = fx[i] > 0.5f ? fx[i] : fx[i] * -3.0f;
                ok = same_f32(((float *)out[j])[i], w);
            } else {
                int src = cs[j].src;
                double sv = src == 0 ? fx[i] : src == 1 ? fd[i] : src == 2 ? ii[i] : src == 3 ? (double)il[i] : ib[i];
                switch (cs[j].out) {
                case FC_I32: {
                    int32_t got = ((int32_t *)out[j])[i];
                    int32_t w = src == 3 ? (int32_t)(uint32_t)(uint64_t)il[i] : src == 4 ? ib[i]
                              : (int32_t)sat_i(sv, INT32_MIN, INT32_MAX);
                    ok = got == w;
                    break;
                }
                case FC_I64: {
                    int64_t got = ((int64_t *)out[j])[i];
                    int64_t w = src == 2 ? ii[i] : src == 4 ? ib[i] : sat_i(sv, INT64_MIN, INT64_MAX);
                    ok = got == w;
                    break;
                }
                case FC_F64: ok = same_f64(((double *)out[j])[i], src == 3 ? (double)il[i] : sv); break;
                case FC_F32: {
                    float w = src == 1 ? (float)fd[i] : src == 2 ? (float)ii[i] : src == 3 ? (float)il[i] : (float)ib[i];
                    ok = same_f32(((float *)out[j])[i], w);
                    break;
                }
                default: { /* bool: != 0, NaN -> true */
                    uint8_t got = ((uint8_t *)out[j])[i];
                    ok = got == (uint8_t)(src == 0 ? (fx[i] != 0.0f) : (ii[i] != 0));
                    break;
                }
                }
            }
            if (!ok && bad++ < 3) fprintf(stderr, "  cast %d at %lld (x=%.9g d=%.17g)\n", j, (long long)i, fx[i], fd[i]);
        }
        EXPECT(bad == 0, "cast/select case %d", j);
        free(out[j]);
    }
    /* pinned values: saturation and NaN -> 0 */
    free(fx); free(fd); free(ii); free(il); free(ib);
    kir_program_free(g.p);
}

/* ---- 5. storage dtypes: oracle ------------------------------------------------------------------ */
typedef struct Fmt { int ebits, mbits, bias; uint32_t maxcode; bool has_inf; } Fmt;
static Fmt fmt_of(FcDtype d) {
    switch (d) {
    case FC_F16: return (Fmt){5, 10, 15, 0x7bff, true};
    case FC_BF16: return (Fmt){8, 7, 127, 0x7f7f, true};
    case FC_F8E4M3: return (Fmt){4, 3, 7, 0x7e, false};
    default: return (Fmt){5, 2, 15, 0x7b, true};
    }
}
static double decode(FcDtype d, uint32_t code) {
    Fmt f = fmt_of(d);
    uint32_t sign = (code >> (f.ebits + f.mbits)) & 1, e = (code >> f.mbits) & ((1u << f.ebits) - 1),
             m = code & ((1u << f.mbits) - 1);
    double v;
    if (f.has_inf && e == (1u << f.ebits) - 1) v = m ? NAN : INFINITY;
    else if (!f.has_inf && e == 15 && m == 7) v = NAN;
    else if (e == 0) v = ldexp((double)m, 1 - f.bias - f.mbits);
    else v = ldexp((double)((1u << f.mbits) + m), (int)e - f.bias - f.mbits);
    return sign ? -v : v;
}
/* The code nearest to x (ties to even), overflow per the dtype's rule; NaN gives UINT32_MAX. */
static uint32_t encode(FcDtype d, float xf) {
    Fmt f = fmt_of(d);
    if (isnan(xf)) return UINT32_MAX;
    uint32_t sign = signbit(xf) ? 1u << (f.ebits + f.mbits) : 0;
    double ax = fabs((double)xf), mx = decode(d, f.maxcode);
    if (ax >= mx) {
        if (!f.has_inf) return sign | f.maxcode;                          /* e4m3 saturates, inf too */
        uint32_t inf = (((1u << f.ebits) - 1) << f.mbits);
        if (d == FC_F8E5M2) return sign | (isinf(ax) ? inf : f.maxcode); /* saturate finite values */
        double next = ldexp(1.0, (1 << (f.ebits - 1)));                  /* 2^(emax+1) */
        return sign | (ax >= (mx + next) / 2 ? inf : f.maxcode);
    }
    uint32_t lo = 0, hi = f.maxcode;                  /* largest c with decode(c) <= ax */
    while (lo < hi) {
        uint32_t mid = (lo + hi + 1) / 2;
        if (decode(d, mid) <= ax) lo = mid; else hi = mid - 1;
    }
    double a = decode(d, lo), b = decode(d, lo + 1), m = (a + b) / 2;
    uint32_t c = ax > m ? lo + 1 : ax < m ? lo : ((lo & 1) ? lo + 1 : lo);
    return sign | c;
}

static const FcDtype storage_dt[4] = {FC_F16, FC_BF16, FC_F8E4M3, FC_F8E5M2};

/* One kernel storing x: f32[n] to each narrow dtype (outputs 0-3) and rounding it to each with
 * KE_ROUND (outputs 4-7, f32). */
static void build_stores(Prog *g, int64_t n) {
    const FcDtype *nd = storage_dt;
    const int block = 128;
    KirKernel *k = kir_kernel_new(g->p, "k0_stores", cdiv(n, block), block);
    int px = kir_param(k, FC_F32, n, false);
    int ps[4], pr[4];
    for (int j = 0; j < 4; j++) ps[j] = kir_param(k, nd[j], n, true);
    for (int j = 0; j < 4; j++) pr[j] = kir_param(k, FC_F32, n, true);
    int vi = open_pointwise(k, n);
    for (int j = 0; j < 4; j++) {
        kir_store(k, ps[j], VR(k, vi), kir_load(k, px, VR(k, vi)));
        kir_store(k, pr[j], VR(k, vi), kir_round(k, nd[j], kir_load(k, px, VR(k, vi))));
    }
    kir_end(k);
    int bufs[9];
    bufs[0] = add_buf(g, KIR_BUF_INPUT, FC_F32, n);
    for (int j = 0; j < 4; j++) bufs[1 + j] = add_buf(g, KIR_BUF_OUTPUT, nd[j], n);
    for (int j = 0; j < 4; j++) bufs[5 + j] = add_buf(g, KIR_BUF_OUTPUT, FC_F32, n);
    launch_all(g, 0, bufs);
}

/* build_stores' outputs for x[0..n) against the host's encode (and decode); wrong ones per
 * dtype into bad[4] (the first few printed). */
static void check_stores(const float *x, void *const *out, int64_t n, int64_t bad[4]) {
    for (int j = 0; j < 4; j++) {
        FcDtype d = storage_dt[j];
        for (int64_t i = 0; i < n; i++) {
            uint32_t got = fc_dtype_size(d) == 2 ? ((uint16_t *)out[j])[i] : ((uint8_t *)out[j])[i];
            uint32_t want = encode(d, x[i]);
            bool ok = want == UINT32_MAX ? isnan(decode(d, got)) : got == want;
            float r = ((float *)out[4 + j])[i];
            bool rok = want == UINT32_MAX ? isnan(r) : same_f32(r, (float)decode(d, want));
            if ((!ok || !rok) && bad[j]++ < 4)
                fprintf(stderr, "  %s: %a -> 0x%x (round %a), want 0x%x\n", fc_dtype_name(d), (double)x[i], got, (double)r, want);
        }
    }
}

/* FUSEC_TEST_ALL_F32=1: the stores and roundings of build_stores on every f32 bit pattern,
 * against the host's conversions (runtime/host.c, rt_host_convert: C code of their own, which
 * test_host checks against this file's encode on samples), NaN for NaN. A one-off check of a
 * change to the conversions, some minutes; not part of the suite. */
static void test_storage_all(void) {
    if (!getenv("FUSEC_TEST_ALL_F32") || strcmp(getenv("FUSEC_TEST_ALL_F32"), "1") != 0) return;
    const int64_t n = (int64_t)1 << 22;
    Prog g;
    prog_init(&g, "stores_all");
    build_stores(&g, n);
    RtCpuProgram *cp = NULL;
    FcErr err;
    if (rt_cpu_compile(g.p, 0, &cp, &err) != FC_OK) { EXPECT(0, "all f32: %s", err.msg); kir_program_free(g.p); return; }
    uint32_t *x = xalloc(4 * (size_t)n);
    void *out[8];
    for (int j = 0; j < 8; j++) out[j] = xalloc((size_t)n * (j < 4 ? fc_dtype_size(storage_dt[j]) : 4));
    int64_t bad[4] = {0};
    void *want = xalloc(2 * (size_t)n);
    float *wr = xalloc(4 * (size_t)n);
    for (uint64_t base = 0; base < ((uint64_t)1 << 32); base += (uint64_t)n) {
        for (int64_t i = 0; i < n; i++) x[i] = (uint32_t)(base + (uint64_t)i);
        void *in[1] = {x};
        if (rt_cpu_run(cp, in, out, &err) != FC_OK) { EXPECT(0, "all f32: %s", err.msg); break; }
        for (int j = 0; j < 4; j++) {
            FcDtype d = storage_dt[j];
            rt_host_convert(d, want, FC_F32, x, n);
            rt_host_convert(FC_F32, wr, d, want, n);
            const float *r = out[4 + j];
            for (int64_t i = 0; i < n; i++) {
                bool two = fc_dtype_size(d) == 2;
                uint32_t got = two ? ((uint16_t *)out[j])[i] : ((uint8_t *)out[j])[i];
                uint32_t w = two ? ((uint16_t *)want)[i] : ((uint8_t *)want)[i];
                bool nan = isnan(wr[i]);
                bool ok = nan ? isnan(decode(d, got)) && isnan(r[i]) : got == w && same_f32(r[i], wr[i]);
                if (!ok && bad[j]++ < 4)
                    fprintf(stderr, "  %s: %08x -> 0x%x (round %a), want 0x%x (%a)\n", fc_dtype_name(d), (unsigned)x[i], got,
                            (double)r[i], w, (double)wr[i]);
            }
        }
    }
    free(want);
    free(wr);
    for (int j = 0; j < 4; j++)
        EXPECT(bad[j] == 0, "all f32 patterns: stores/round to %s: %lld wrong", fc_dtype_name(storage_dt[j]), (long long)bad[j]);
    printf("all 2^32 f32 patterns stored and rounded to f16, bf16, e4m3, e5m2: %lld %lld %lld %lld wrong\n",
           (long long)bad[0], (long long)bad[1], (long long)bad[2], (long long)bad[3]);
    rt_cpu_free(cp);
    for (int j = 0; j < 8; j++) free(out[j]);
    free(x);
    kir_program_free(g.p);
}

static void test_storage(void) {
    const FcDtype *nd = storage_dt;
    /* stores and KE_ROUND from f32: random values over each dtype's range, ties, specials */
    const int64_t n = 4001;
    Prog g;
    prog_init(&g, "stores");
    build_stores(&g, n);
    float *x = xalloc(4 * (size_t)n);
    static const float special[] = {
        NAN, -NAN, INFINITY, -INFINITY, 65504.0f, 65519.0f, 65520.0f, -65520.0f, 1e9f, -1e9f,
        448.0f, 464.0f, 463.99f, 500.0f, -500.0f, 57344.0f, 61439.0f, 61440.0f, 1e6f, -1e6f,
        1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-4f, 1.0f + 3 * 0x1p-4f,
        1.0f + 0x1p-3f, 1.0f + 3 * 0x1p-3f, 0x1p-25f, 0x1.8p-24f, 0x1p-26f, 0x1p-10f, 0x1p-17f, 0x1.8p-16f,
        0x1p-149f, -0x1p-149f, 0x1p-14f, 0x1.ffep-15f, 3.0e38f, -3.4e38f, 0x1.fffffep127f, 0x1.fep127f,
        0x1.ff8p-7f, 0x1p-130f,
        /* bf16 subnormals (AVX-512 BF16 reads them as zero; runtime/cpu.c lifts them): the
         * largest f32 subnormal carries to 2^-126, ties go to even, -0 keeps its sign */
        0x1.fffffcp-127f, -0x1.fffffcp-127f, 0x1p-133f, 0x1.8p-133f, 0x1.4p-131f, -0x1.4p-131f, 0x1.fcp-127f,
        0x1.fep-127f, 0x1.fdp-127f, 0x1p-126f, -0x1p-126f, -0.0f, 0x1p-134f, 0x1.000002p-134f, 0x1.6p-128f};
    enum { NS = sizeof special / sizeof special[0] };
    for (int64_t i = 0; i < n; i++) {
        if (i < NS) { x[i] = special[i]; continue; }
        if (i % 6 == 5) {   /* an f32 subnormal (or a zero), either sign */
            uint32_t bits = (uint32_t)rnd() & 0x807fffffu;
            memcpy(&x[i], &bits, 4);
            continue;
        }
        int which = (int)(i % 5);
        double mag = which == 0 ? ldexp(urand() + 0.5, (int)(rnd() % 40) - 24)      /* f16 range */
                   : which == 1 ? ldexp(urand() + 0.5, (int)(rnd() % 250) - 125)   /* bf16 range */
                   : which == 2 ? ldexp(urand() + 0.5, (int)(rnd() % 20) - 11)     /* e4m3 range */
                   : which == 3 ? ldexp(urand() + 0.5, (int)(rnd() % 34) - 17)     /* e5m2 range */
                   : ldexp((double)(1 + (rnd() % 64)) / 8, (int)(rnd() % 30) - 20); /* exact ties */
        x[i] = (float)((rnd() & 1) ? -mag : mag);
        if (x[i] == 0.0f) x[i] = 1.5f;
    }
    const uint32_t snan = 0xff800001u;   /* a negative signalling NaN with a payload */
    memcpy(&x[NS], &snan, 4);
    void *in[1] = {x}, *out[8];
    int64_t bytes[8];
    for (int j = 0; j < 4; j++) {
        bytes[j] = n * (int64_t)fc_dtype_size(nd[j]);
        out[j] = xalloc((size_t)bytes[j]);
        poison(out[j], nd[j], n);
        bytes[4 + j] = 4 * n;
        out[4 + j] = xalloc((size_t)bytes[4 + j]);
        poison(out[4 + j], FC_F32, n);
    }
    RUN_OK(&g, 2, in, out, bytes);
    int64_t wrong[4] = {0};
    check_stores(x, out, n, wrong);
    for (int j = 0; j < 4; j++) EXPECT(wrong[j] == 0, "stores/round to %s: %lld wrong", fc_dtype_name(nd[j]), (long long)wrong[j]);
    /* pinned bit patterns */
    {
        const uint16_t *h = out[0], *bf = out[1];
        const uint8_t *e4 = out[2], *e5 = out[3];
        EXPECT(h[20] == 0x3c00 && h[21] == 0x3c02, "f16 ties to even: %04x %04x", h[20], h[21]);
        EXPECT(h[5] == 0x7bff && h[6] == 0x7c00 && h[7] == 0xfc00 && h[2] == 0x7c00, "f16 overflow: %04x %04x %04x", h[5], h[6], h[7]);
        EXPECT((h[0] & 0x7fff) > 0x7c00, "f16 NaN stays NaN: %04x", h[0]);
        EXPECT(bf[22] == 0x3f80 && bf[23] == 0x3f82, "bf16 ties to even: %04x %04x", bf[22], bf[23]);
        EXPECT(bf[40] == 0x7f80, "bf16 max f32 rounds to inf: %04x", bf[40]);
        EXPECT((bf[0] & 0x7fff) > 0x7f80, "bf16 NaN stays NaN: %04x", bf[0]);
        EXPECT(e4[10] == 0x7e && e4[11] == 0x7e && e4[13] == 0x7e && e4[14] == 0xfe, "e4m3 saturates: %02x %02x %02x", e4[10], e4[11], e4[14]);
        EXPECT(e4[2] == 0x7e && e4[3] == 0xfe && e4[8] == 0x7e, "e4m3: inf and 1e9 saturate to 448: %02x %02x", e4[2], e4[3]);
        EXPECT((e4[0] & 0x7f) == 0x7f && (e4[1] & 0x7f) == 0x7f, "e4m3 NaN: %02x", e4[0]);
        EXPECT(e4[24] == 0x38 && e4[25] == 0x3a, "e4m3 ties to even: %02x %02x", e4[24], e4[25]);
        EXPECT(e5[15] == 0x7b && e5[16] == 0x7b && e5[17] == 0x7b && e5[18] == 0x7b && e5[19] == 0xfb,
              "e5m2 saturates finite values: %02x %02x %02x", e5[15], e5[17], e5[19]);
        EXPECT(e5[2] == 0x7c && e5[3] == 0xfc, "e5m2 inf stays inf: %02x %02x", e5[2], e5[3]);
        EXPECT((e5[0] & 0x7f) > 0x7c, "e5m2 NaN: %02x", e5[0]);
        EXPECT(e5[26] == 0x3c && e5[27] == 0x3e, "e5m2 ties to even: %02x %02x", e5[26], e5[27]);
        /* KE_ROUND of a NaN has the bits the store and then the load give (llvm.c's
         * fc_round_* helpers skip the code): quiet, the sign kept, the payload of the load */
        static const uint32_t nan_round[4] = {0xffc00000u, 0xffc00000u, 0xffc00000u, 0xffe00000u};
        for (int j = 0; j < 4; j++) {
            uint32_t rb;
            memcpy(&rb, (float *)out[4 + j] + NS, 4);
            EXPECT(rb == nan_round[j], "round of a signalling NaN to %s: %08x, want %08x", fc_dtype_name(nd[j]), rb,
                   nan_round[j]);
        }
    }
    for (int j = 0; j < 8; j++) free(out[j]);
    free(x);
    kir_program_free(g.p);

    /* loads: every code of each narrow dtype, converted to f32 exactly; plus i32/i64/f64/bool
     * copies through the same kernel */
    for (int j = 0; j < 4; j++) {
        int64_t m = fc_dtype_size(nd[j]) == 2 ? 65536 : 256;
        Prog h;
        prog_init(&h, "loads");
        KirKernel *kk = kir_kernel_new(h.p, "k0_loads", cdiv(m, 256), 256);
        int pin = kir_param(kk, nd[j], m, false), pout = kir_param(kk, FC_F32, m, true);
        int pcp = kir_param(kk, nd[j], m, true);
        int v = open_pointwise(kk, m);
        kir_store(kk, pout, VR(kk, v), kir_load(kk, pin, VR(kk, v)));
        kir_store(kk, pcp, VR(kk, v), kir_load(kk, pin, VR(kk, v))); /* load + store round trip */
        kir_end(kk);
        int hb[3] = {add_buf(&h, KIR_BUF_INPUT, nd[j], m), add_buf(&h, KIR_BUF_OUTPUT, FC_F32, m),
                     add_buf(&h, KIR_BUF_OUTPUT, nd[j], m)};
        launch_all(&h, 0, hb);
        size_t es = fc_dtype_size(nd[j]);
        char *codes = xalloc(es * (size_t)m), *cp = xalloc(es * (size_t)m);
        float *f = xalloc(4 * (size_t)m);
        for (int64_t i = 0; i < m; i++) {
            if (es == 2) ((uint16_t *)codes)[i] = (uint16_t)i;
            else ((uint8_t *)codes)[i] = (uint8_t)i;
        }
        poison(f, FC_F32, m);
        poison(cp, nd[j], m);
        void *hin[1] = {codes}, *hout[2] = {f, cp};
        int64_t hbytes[2] = {4 * m, (int64_t)es * m};
        RUN_OK(&h, 2, hin, hout, hbytes);
        int bad = 0, badrt = 0;
        for (int64_t i = 0; i < m; i++) {
            double w = decode(nd[j], (uint32_t)i);
            if (!(isnan(w) ? isnan(f[i]) : (double)f[i] == w && !signbit(f[i]) == !signbit(w)) && bad++ < 3)
                fprintf(stderr, "  load %s 0x%llx -> %a, want %a\n", fc_dtype_name(nd[j]), (long long)i, (double)f[i], w);
            uint32_t back = es == 2 ? ((uint16_t *)cp)[i] : ((uint8_t *)cp)[i];
            if (!(isnan(w) ? isnan(decode(nd[j], back)) : back == (uint32_t)i)) badrt++;
        }
        EXPECT(bad == 0, "loads of %s: %d wrong", fc_dtype_name(nd[j]), bad);
        EXPECT(badrt == 0, "%s load/store round trip: %d wrong", fc_dtype_name(nd[j]), badrt);
        free(codes); free(cp); free(f);
        kir_program_free(h.p);
    }
}

/* ---- 6. block reductions (softmax) --------------------------------------------------------------- */
/* The documented order: thread t accumulates iterations t, t+B, ... from the identity (+0 for
 * sums); then per warp a halving tree over its lanes (off = 16..1: lane l op= lane l+off where
 * that lane exists), then the same tree over the warp totals. */
typedef enum { RED_SUM, RED_MAX } RedKind;
static float red_f(RedKind r, float a, float b) {
    if (r == RED_SUM) return a + b;
    return isnan(a) || isnan(b) ? NAN : (a > b ? a : b);
}
static void halve_f(RedKind r, float *v, int count) {
    for (int off = 16; off >= 1; off /= 2)
        for (int l = 0; l < off && l + off < count; l++) v[l] = red_f(r, v[l], v[l + off]);
}
static float tree_reduce(RedKind r, const float *v, int n, int block) {
    float part[1024], wt[32];
    int nw = (block + 31) / 32;
    for (int t = 0; t < block; t++) part[t] = r == RED_SUM ? 0.0f : -INFINITY;
    for (int i = 0; i < n; i++) part[i % block] = red_f(r, part[i % block], v[i]);
    for (int w = 0; w < nw; w++) {
        int cnt = block - 32 * w < 32 ? block - 32 * w : 32;
        halve_f(r, part + 32 * w, cnt);
        wt[w] = part[32 * w];
    }
    halve_f(r, wt, nw);
    return wt[0];
}

static void build_softmax(Prog *g, int64_t rows, int64_t cols, int block) {
    KirKernel *k = kir_kernel_new(g->p, "k0_softmax", rows, block);
    k->kind = "row_reduce";
    int px = kir_param(k, FC_F32, rows * cols, false), py = kir_param(k, FC_F32, rows * cols, true);
    int pm = kir_param(k, FC_F32, rows, true), ps = kir_param(k, FC_F32, rows, true);
    int pp = kir_param(k, FC_F32, rows, true);
    int vbase = kir_var(k, KT_I64), vm = kir_var(k, KT_F32), vs = kir_var(k, KT_F32), vp = kir_var(k, KT_F32);
    int j1 = kir_var(k, KT_I64), j2 = kir_var(k, KT_I64), j3 = kir_var(k, KT_I64), j4 = kir_var(k, KT_I64);
    int ve = kir_var(k, KT_F32);
    kir_let(k, vbase, kir_bin(k, KB_MUL, kir_block_idx(k), C64(k, cols)));
    kir_reduce(k, KR_MAX, vm, j1, C64(k, 0), C64(k, cols));
    kir_end_reduce(k, kir_load(k, px, kir_bin(k, KB_ADD, VR(k, vbase), VR(k, j1))));
    kir_reduce(k, KR_SUM, vs, j2, C64(k, 0), C64(k, cols));
    kir_let(k, ve, kir_un(k, KU_EXP, kir_bin(k, KB_SUB, kir_load(k, px, kir_bin(k, KB_ADD, VR(k, vbase), VR(k, j2))), VR(k, vm))));
    kir_end_reduce(k, VR(k, ve));
    kir_reduce(k, KR_SUM, vp, j4, C64(k, 0), C64(k, cols)); /* plain sum: pins the order */
    kir_end_reduce(k, kir_load(k, px, kir_bin(k, KB_ADD, VR(k, vbase), VR(k, j4))));
    kir_barrier(k);
    kir_for(k, KIR_LOOP_THREADS, j3, C64(k, 0), C64(k, cols));
    int idx = kir_bin(k, KB_ADD, VR(k, vbase), VR(k, j3));
    kir_store(k, py, idx, kir_bin(k, KB_DIV, kir_un(k, KU_EXP, kir_bin(k, KB_SUB, kir_load(k, px, idx), VR(k, vm))), VR(k, vs)));
    kir_end(k);
    kir_store(k, pm, kir_block_idx(k), VR(k, vm));
    kir_store(k, ps, kir_block_idx(k), VR(k, vs));
    kir_store(k, pp, kir_block_idx(k), VR(k, vp));
    EXPECT(kir_kernel_ok(k), "softmax built");
    int bufs[5] = {add_buf(g, KIR_BUF_INPUT, FC_F32, rows * cols), add_buf(g, KIR_BUF_OUTPUT, FC_F32, rows * cols),
                   add_buf(g, KIR_BUF_OUTPUT, FC_F32, rows), add_buf(g, KIR_BUF_OUTPUT, FC_F32, rows),
                   add_buf(g, KIR_BUF_OUTPUT, FC_F32, rows)};
    launch_all(g, 0, bufs);
}

static void test_softmax(void) {
    static const struct { int64_t rows, cols; int block; } cases[] = {
        {37, 1000, 128}, {3, 1, 128}, {5, 77, 48}, {2, 5000, 1024}, {4, 3, 1}, {6, 300, 33}};
    int order_sensitive = 0;
    for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++) {
        int64_t R = cases[c].rows, C = cases[c].cols;
        int B = cases[c].block;
        Prog g;
        prog_init(&g, "softmax");
        build_softmax(&g, R, C, B);
        float *x = xalloc(4 * (size_t)(R * C)), *y = xalloc(4 * (size_t)(R * C)), *y1 = xalloc(4 * (size_t)(R * C));
        float *m = xalloc(4 * (size_t)R), *s = xalloc(4 * (size_t)R), *ps = xalloc(4 * (size_t)R);
        float *e = xalloc(4 * (size_t)C);
        for (int64_t i = 0; i < R * C; i++) x[i] = frand(-8, 8);
        if (c == 0) x[5 * C + 17] = NAN; /* a NaN row: max propagates it */
        void *in[1] = {x}, *out[4] = {y, m, s, ps};
        int64_t bytes[4] = {4 * R * C, 4 * R, 4 * R, 4 * R};
        poison(y, FC_F32, R * C); poison(m, FC_F32, R); poison(s, FC_F32, R); poison(ps, FC_F32, R);
        double tc0 = now_s();
        RUN_OK(&g, 2, in, out, bytes);
        if (getenv("FUSEC_TEST_TIMES")) fprintf(stderr, "  softmax %lldx%lld/%d: %.2fs\n", (long long)R, (long long)C, B, now_s() - tc0);
        int bad = 0;
        for (int64_t r = 0; r < R; r++) {
            const float *xr = x + r * C;
            float wm = tree_reduce(RED_MAX, xr, (int)C, B);
            for (int64_t j = 0; j < C; j++) e[j] = expf(xr[j] - wm);
            float ws = tree_reduce(RED_SUM, e, (int)C, B);
            float wp = tree_reduce(RED_SUM, xr, (int)C, B);
            float seq = 0.0f;
            for (int64_t j = 0; j < C; j++) seq += xr[j];
            if (!same_f32(seq, wp)) order_sensitive++;
            if (!same_f32(m[r], wm) && bad++ < 3) fprintf(stderr, "  row %lld max %a want %a\n", (long long)r, (double)m[r], (double)wm);
            if (!same_f32(ps[r], wp) && bad++ < 3) fprintf(stderr, "  row %lld sum %a want %a\n", (long long)r, (double)ps[r], (double)wp);
            if (!close_f(s[r], ws, 1e-6, 0) && bad++ < 3) fprintf(stderr, "  row %lld sum exp %a want %a\n", (long long)r, (double)s[r], (double)ws);
            for (int64_t j = 0; j < C; j++)
                if (!close_f(y[r * C + j], e[j] / ws, 2e-6, 1e-30) && bad++ < 3)
                    fprintf(stderr, "  y[%lld,%lld] %g want %g\n", (long long)r, (long long)j, y[r * C + j], e[j] / ws);
        }
        EXPECT(bad == 0, "softmax %lldx%lld block %d", (long long)R, (long long)C, B);
        poison(y1, FC_F32, R * C);
        void *out1[4] = {y1, m, s, ps};
        RUN_OK(&g, 1, in, out1, bytes);
        EXPECT(memcmp(y, y1, 4 * (size_t)(R * C)) == 0, "softmax: 1 vs 2 threads differ");
        free(x); free(y); free(y1); free(m); free(s); free(ps); free(e);
        kir_program_free(g.p);
    }
    /* the harness can fail: the documented order is visible in the bits */
    EXPECT(order_sensitive > 0, "no row where a sequential sum differs from the tree: the order check is vacuous");
}

/* A kernel with a tail (kir.h): each block sums its row into part[row]; the tail, once after
 * every block, sums the R partials in row order into out[0]. The expected bits follow the
 * documented tree, so a tail that ran before some block (a missing partial) or in another
 * order shows; and the verifier refuses a tail that reads the block index. */
static void build_tail(Prog *g, int64_t rows, int64_t cols, int block, bool bad_tail) {
    KirKernel *k = kir_kernel_new(g->p, "k0_sum_all", rows, block);
    k->kind = "row_reduce_tail";
    int px = kir_param(k, FC_F32, rows * cols, false), pp = kir_param(k, FC_F32, rows, true);
    int po = kir_param(k, FC_F32, 1, true);
    int vbase = kir_var(k, KT_I64), vs = kir_var(k, KT_F32), j = kir_var(k, KT_I64);
    kir_let(k, vbase, kir_bin(k, KB_MUL, kir_block_idx(k), C64(k, cols)));
    kir_reduce(k, KR_SUM, vs, j, C64(k, 0), C64(k, cols));
    kir_end_reduce(k, kir_load(k, px, kir_bin(k, KB_ADD, VR(k, vbase), VR(k, j))));
    kir_store(k, pp, kir_block_idx(k), VR(k, vs));
    kir_begin_tail(k);
    int vt = kir_var(k, KT_F32), i = kir_var(k, KT_I64);
    kir_reduce(k, KR_SUM, vt, i, C64(k, 0), C64(k, rows));
    kir_end_reduce(k, kir_load(k, pp, VR(k, i)));
    kir_store(k, po, bad_tail ? kir_bin(k, KB_MUL, kir_block_idx(k), C64(k, 0)) : C64(k, 0), VR(k, vt));
    EXPECT(kir_kernel_ok(k), "tail kernel built");
    int bufs[3] = {add_buf(g, KIR_BUF_INPUT, FC_F32, rows * cols), add_buf(g, KIR_BUF_OUTPUT, FC_F32, rows),
                   add_buf(g, KIR_BUF_OUTPUT, FC_F32, 1)};
    launch_all(g, 0, bufs);
}

static void test_tail(void) {
    static const struct { int64_t rows, cols; int block; } cases[] = {{1, 5, 32}, {37, 100, 64}, {300, 33, 32}, {1000, 3, 96}};
    for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++) {
        int64_t R = cases[c].rows, C = cases[c].cols;
        int B = cases[c].block;
        Prog g;
        prog_init(&g, "tail");
        build_tail(&g, R, C, B, false);
        float *x = xalloc(4 * (size_t)(R * C)), *part = xalloc(4 * (size_t)R), *want = xalloc(4 * (size_t)R), out = 0;
        for (int64_t e = 0; e < R * C; e++) x[e] = frand(-4, 4);
        for (int64_t r = 0; r < R; r++) want[r] = tree_reduce(RED_SUM, x + r * C, (int)C, B);
        float total = tree_reduce(RED_SUM, want, (int)R, B);
        void *in[1] = {x}, *outs[2] = {part, &out};
        int64_t bytes[2] = {4 * R, 4};
        poison(part, FC_F32, R);
        poison(&out, FC_F32, 1);
        RUN_OK(&g, 2, in, outs, bytes);
        EXPECT(memcmp(part, want, 4 * (size_t)R) == 0, "tail %lldx%lld: the row sums", (long long)R, (long long)C);
        EXPECT(same_f32(out, total), "tail %lldx%lld/%d: total %a want %a", (long long)R, (long long)C, B, (double)out,
               (double)total);
        poison(&out, FC_F32, 1);
        RUN_OK(&g, 1, in, outs, bytes);
        EXPECT(same_f32(out, total), "tail %lldx%lld: 1 thread: total %a want %a", (long long)R, (long long)C,
               (double)out, (double)total);
        free(x); free(part); free(want);
        kir_program_free(g.p);
    }
    Prog g;
    prog_init(&g, "bad_tail");
    build_tail(&g, 4, 4, 32, true);
    FcErr err;
    EXPECT(kir_verify(g.p->kernels.data[0], &err) == FC_ERR_INTERNAL && strstr(err.msg, "block index read in the tail"),
           "a tail reading the block index is refused: %s", err.msg);
    kir_program_free(g.p);
}

/* integer and f64 reductions, min included */
static void test_reduce_types(void) {
    const int64_t R = 3, C = 1001;
    const int B = 64;
    Prog g;
    prog_init(&g, "reduce_types");
    KirKernel *k = kir_kernel_new(g.p, "k0_reduce_types", R, B);
    int pi = kir_param(k, FC_I32, R * C, false), pd = kir_param(k, FC_F64, R * C, false);
    int o[6];
    for (int j = 0; j < 3; j++) o[j] = kir_param(k, FC_I32, R, true);
    for (int j = 3; j < 6; j++) o[j] = kir_param(k, FC_F64, R, true);
    int vb = kir_var(k, KT_I64);
    kir_let(k, vb, kir_bin(k, KB_MUL, kir_block_idx(k), C64(k, C)));
    static const KirRedOp rops[3] = {KR_SUM, KR_MAX, KR_MIN};
    for (int j = 0; j < 6; j++) {
        KirType t = j < 3 ? KT_I32 : KT_F64;
        int res = kir_var(k, t), lv = kir_var(k, KT_I64);
        kir_reduce(k, rops[j % 3], res, lv, C64(k, 0), C64(k, C));
        kir_end_reduce(k, kir_load(k, j < 3 ? pi : pd, kir_bin(k, KB_ADD, VR(k, vb), VR(k, lv))));
        kir_store(k, o[j], kir_block_idx(k), VR(k, res));
    }
    EXPECT(kir_kernel_ok(k), "reduce_types built");
    int bufs[8] = {add_buf(&g, KIR_BUF_INPUT, FC_I32, R * C), add_buf(&g, KIR_BUF_INPUT, FC_F64, R * C)};
    for (int j = 0; j < 3; j++) bufs[2 + j] = add_buf(&g, KIR_BUF_OUTPUT, FC_I32, R);
    for (int j = 3; j < 6; j++) bufs[2 + j] = add_buf(&g, KIR_BUF_OUTPUT, FC_F64, R);
    launch_all(&g, 0, bufs);
    int32_t *xi = xalloc(4 * (size_t)(R * C));
    double *xd = xalloc(8 * (size_t)(R * C));
    for (int64_t i = 0; i < R * C; i++) { xi[i] = (int32_t)(rnd() % 20001) - 10000; xd[i] = frand(-50, 50) * 1.0000001; }
    int32_t oi[3][3];
    double od[3][3];
    void *in[2] = {xi, xd}, *out[6] = {oi[0], oi[1], oi[2], od[0], od[1], od[2]};
    int64_t bytes[6] = {4 * R, 4 * R, 4 * R, 8 * R, 8 * R, 8 * R};
    memset(oi, 0xA5, sizeof oi);
    poison(od, FC_F64, 9);
    RUN_OK(&g, 2, in, out, bytes);
    for (int64_t r = 0; r < R; r++) {
        int64_t s = 0;
        int32_t mx = INT32_MIN, mn = INT32_MAX;
        double dmx = -INFINITY, dmn = INFINITY, part[64], wt[32];
        for (int t = 0; t < 64; t++) part[t] = 0.0;
        for (int64_t j = 0; j < C; j++) {
            int32_t v = xi[r * C + j];
            s += v; mx = v > mx ? v : mx; mn = v < mn ? v : mn;
            double d = xd[r * C + j];
            dmx = d > dmx ? d : dmx; dmn = d < dmn ? d : dmn;
            part[j % 64] += d;
        }
        for (int w = 0; w < 2; w++) {
            for (int off = 16; off >= 1; off /= 2)
                for (int l = 0; l < off; l++) part[w * 32 + l] += part[w * 32 + l + off];
            wt[w] = part[w * 32];
        }
        wt[0] += wt[1]; /* two warps */
        EXPECT(oi[0][r] == (int32_t)s && oi[1][r] == mx && oi[2][r] == mn, "i32 reductions row %lld", (long long)r);
        EXPECT(same_f64(od[0][r], wt[0]) && od[1][r] == dmx && od[2][r] == dmn, "f64 reductions row %lld: %a vs %a", (long long)r, od[0][r], wt[0]);
    }
    free(xi); free(xd);
    kir_program_free(g.p);
}

/* ---- 7. tiled matmul: shared memory, barriers, a thread array -------------------------------- */
static void test_matmul(void) {
    const int64_t M = 37, K = 29, N = 41, T = 16;
    const int64_t tm = cdiv(M, T), tn = cdiv(N, T), tk = cdiv(K, T);
    const int B = 128; /* 16x16 tile, each thread computes rows r and r + 8 of column c */
    Prog g;
    prog_init(&g, "matmul");
    KirKernel *k = kir_kernel_new(g.p, "k0_matmul", tm * tn, B);
    k->kind = "matmul";
    int pa = kir_param(k, FC_F32, M * K, false), pb = kir_param(k, FC_F32, K * N, false), pc = kir_param(k, FC_F32, M * N, true);
    int sa = kir_shared(k, KT_F32, T * T), sb = kir_shared(k, KT_F32, T * T);
    int acc = kir_tarray(k, KT_F32, 2);
    int vbi = kir_var(k, KT_I64), vbj = kir_var(k, KT_I64), vkt = kir_var(k, KT_I64);
    int t0 = kir_var(k, KT_I64), t1 = kir_var(k, KT_I64), t2 = kir_var(k, KT_I64), t3 = kir_var(k, KT_I64);
    int vkk = kir_var(k, KT_I64), vr = kir_var(k, KT_I64), vc = kir_var(k, KT_I64), vb = kir_var(k, KT_F32);
    int vgr = kir_var(k, KT_I64), vgc = kir_var(k, KT_I64), vr2 = kir_var(k, KT_I64), vc2 = kir_var(k, KT_I64);
    kir_let(k, vbi, kir_bin(k, KB_DIV, kir_block_idx(k), C64(k, tn)));
    kir_let(k, vbj, kir_bin(k, KB_REM, kir_block_idx(k), C64(k, tn)));
    /* acc = 0 */
    kir_for(k, KIR_LOOP_THREADS, t0, C64(k, 0), C64(k, B));
    kir_tstore(k, acc, C64(k, 0), kir_const_f(k, KT_F32, 0));
    kir_tstore(k, acc, C64(k, 1), kir_const_f(k, KT_F32, 0));
    kir_end(k);
    kir_for(k, KIR_LOOP_SERIAL, vkt, C64(k, 0), C64(k, tk));
    {
        /* load the A and B tiles (zero outside the matrices): 256 elements over 128 threads */
        kir_for(k, KIR_LOOP_THREADS, t1, C64(k, 0), C64(k, T * T));
        kir_let(k, vgr, kir_bin(k, KB_ADD, kir_bin(k, KB_MUL, VR(k, vbi), C64(k, T)), kir_bin(k, KB_DIV, VR(k, t1), C64(k, T))));
        kir_let(k, vgc, kir_bin(k, KB_ADD, kir_bin(k, KB_MUL, VR(k, vkt), C64(k, T)), kir_bin(k, KB_REM, VR(k, t1), C64(k, T))));
        kir_if(k, kir_bin(k, KB_AND, kir_bin(k, KB_LT, VR(k, vgr), C64(k, M)), kir_bin(k, KB_LT, VR(k, vgc), C64(k, K))));
        kir_shstore(k, sa, VR(k, t1), kir_load(k, pa, kir_bin(k, KB_ADD, kir_bin(k, KB_MUL, VR(k, vgr), C64(k, K)), VR(k, vgc))));
        kir_else(k);
        kir_shstore(k, sa, VR(k, t1), kir_const_f(k, KT_F32, 0));
        kir_end(k);
        kir_let(k, vr2, kir_bin(k, KB_ADD, kir_bin(k, KB_MUL, VR(k, vkt), C64(k, T)), kir_bin(k, KB_DIV, VR(k, t1), C64(k, T))));
        kir_let(k, vc2, kir_bin(k, KB_ADD, kir_bin(k, KB_MUL, VR(k, vbj), C64(k, T)), kir_bin(k, KB_REM, VR(k, t1), C64(k, T))));
        kir_if(k, kir_bin(k, KB_AND, kir_bin(k, KB_LT, VR(k, vr2), C64(k, K)), kir_bin(k, KB_LT, VR(k, vc2), C64(k, N))));
        kir_shstore(k, sb, VR(k, t1), kir_load(k, pb, kir_bin(k, KB_ADD, kir_bin(k, KB_MUL, VR(k, vr2), C64(k, N)), VR(k, vc2))));
        kir_else(k);
        kir_shstore(k, sb, VR(k, t1), kir_const_f(k, KT_F32, 0));
        kir_end(k);
        kir_end(k);
        kir_barrier(k);
        /* multiply: thread t: r = t / 16, c = t % 16 */
        kir_for(k, KIR_LOOP_THREADS, t2, C64(k, 0), C64(k, B));
        kir_let(k, vr, kir_bin(k, KB_DIV, VR(k, t2), C64(k, T)));
        kir_let(k, vc, kir_bin(k, KB_REM, VR(k, t2), C64(k, T)));
        kir_for(k, KIR_LOOP_SERIAL, vkk, C64(k, 0), C64(k, T));
        kir_let(k, vb, kir_shload(k, sb, kir_bin(k, KB_ADD, kir_bin(k, KB_MUL, VR(k, vkk), C64(k, T)), VR(k, vc))));
        for (int h = 0; h < 2; h++) {
            int row = kir_bin(k, KB_ADD, VR(k, vr), C64(k, 8 * h));
            int av = kir_shload(k, sa, kir_bin(k, KB_ADD, kir_bin(k, KB_MUL, row, C64(k, T)), VR(k, vkk)));
            kir_tstore(k, acc, C64(k, h), kir_bin(k, KB_ADD, kir_tload(k, acc, C64(k, h)), kir_bin(k, KB_MUL, av, VR(k, vb))));
        }
        kir_end(k);
        kir_end(k);
        kir_barrier(k);
    }
    kir_end(k);
    /* write back */
    kir_for(k, KIR_LOOP_THREADS, t3, C64(k, 0), C64(k, B));
    for (int h = 0; h < 2; h++) {
        int gr = kir_bin(k, KB_ADD, kir_bin(k, KB_MUL, VR(k, vbi), C64(k, T)),
                         kir_bin(k, KB_ADD, kir_bin(k, KB_DIV, VR(k, t3), C64(k, T)), C64(k, 8 * h)));
        int gc = kir_bin(k, KB_ADD, kir_bin(k, KB_MUL, VR(k, vbj), C64(k, T)), kir_bin(k, KB_REM, VR(k, t3), C64(k, T)));
        kir_if(k, kir_bin(k, KB_AND, kir_bin(k, KB_LT, gr, C64(k, M)), kir_bin(k, KB_LT, gc, C64(k, N))));
        kir_store(k, pc, kir_bin(k, KB_ADD, kir_bin(k, KB_MUL, gr, C64(k, N)), gc), kir_tload(k, acc, C64(k, h)));
        kir_end(k);
    }
    kir_end(k);
    EXPECT(kir_kernel_ok(k), "matmul built");
    int bufs[3] = {add_buf(&g, KIR_BUF_INPUT, FC_F32, M * K), add_buf(&g, KIR_BUF_INPUT, FC_F32, K * N),
                   add_buf(&g, KIR_BUF_OUTPUT, FC_F32, M * N)};
    launch_all(&g, 0, bufs);
    float *a = xalloc(4 * (size_t)(M * K)), *b = xalloc(4 * (size_t)(K * N));
    float *c = xalloc(4 * (size_t)(M * N)), *c1 = xalloc(4 * (size_t)(M * N));
    for (int64_t i = 0; i < M * K; i++) a[i] = frand(-1, 1);
    for (int64_t i = 0; i < K * N; i++) b[i] = frand(-1, 1);
    poison(c, FC_F32, M * N);
    void *in[2] = {a, b}, *out[1] = {c};
    int64_t bytes[1] = {4 * M * N};
    RUN_OK(&g, 2, in, out, bytes);
    int bad = 0;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            float w = 0.0f; /* same order as the kernel: k = 0, 1, ... (padding adds exact zeros) */
            for (int64_t kk = 0; kk < K; kk++) w += a[i * K + kk] * b[kk * N + j];
            if (!close_f(c[i * N + j], w, 1e-6, 1e-6) && bad++ < 3)
                fprintf(stderr, "  C[%lld,%lld] = %g, want %g\n", (long long)i, (long long)j, c[i * N + j], w);
        }
    EXPECT(bad == 0, "tiled matmul: %d wrong", bad);
    poison(c1, FC_F32, M * N);
    void *out1[1] = {c1};
    RUN_OK(&g, 1, in, out1, bytes);
    EXPECT(memcmp(c, c1, 4 * (size_t)(M * N)) == 0, "matmul: 1 vs 2 threads differ");
    free(a); free(b); free(c); free(c1);
    kir_program_free(g.p);
}

/* ---- 8. KS_ERROR, temps, launches, run_launch ------------------------------------------------- */
static void test_error_and_temps(void) {
    const int64_t n = 1234;
    const int block = 100;
    Prog g;
    prog_init(&g, "errors");
    /* k0: t = x * 2 (temp); error if x > 100 */
    KirKernel *k0 = kir_kernel_new(g.p, "k0_scale", cdiv(n, block), block);
    int x0 = kir_param(k0, FC_F32, n, false), t0 = kir_param(k0, FC_F32, n, true);
    int v0 = open_pointwise(k0, n);
    kir_error_if(k0, kir_bin(k0, KB_GT, kir_load(k0, x0, VR(k0, v0)), kir_const_f(k0, KT_F32, 100)), FC_ERR_RUNTIME_DATA);
    kir_store(k0, t0, VR(k0, v0), kir_bin(k0, KB_MUL, kir_load(k0, x0, VR(k0, v0)), kir_const_f(k0, KT_F32, 2)));
    kir_end(k0);
    /* k1: y = t + 1, in f16 */
    KirKernel *k1 = kir_kernel_new(g.p, "k1_shift", cdiv(n, block), block);
    int t1 = kir_param(k1, FC_F32, n, false), y1 = kir_param(k1, FC_F16, n, true);
    int v1 = open_pointwise(k1, n);
    kir_store(k1, y1, VR(k1, v1), kir_bin(k1, KB_ADD, kir_load(k1, t1, VR(k1, v1)), kir_const_f(k1, KT_F32, 1)));
    kir_end(k1);
    int bx = add_buf(&g, KIR_BUF_INPUT, FC_F32, n), bt = add_buf(&g, KIR_BUF_TEMP, FC_F32, n);
    int by = add_buf(&g, KIR_BUF_OUTPUT, FC_F16, n);
    int a0[2] = {bx, bt}, a1[2] = {bt, by};
    add_launch(&g, 0, 2, a0);
    add_launch(&g, 1, 2, a1);
    float *x = xalloc(4 * (size_t)n);
    uint16_t *y = xalloc(2 * (size_t)n);
    for (int64_t i = 0; i < n; i++) x[i] = frand(-50, 50);
    void *in[1] = {x}, *out[1] = {y};
    RtCpuProgram *cp = NULL;
    FcErr err;
    FcStatus s = rt_cpu_compile(g.p, 2, &cp, &err);
    EXPECT(s == FC_OK, "%s", err.msg);
    if (s != FC_OK) { kir_program_free(g.p); free(x); free(y); return; }
    EXPECT(rt_cpu_threads(cp) == 2, "threads %d", rt_cpu_threads(cp));
    memset(y, 0xA5, 2 * (size_t)n);
    s = rt_cpu_run(cp, in, out, &err);
    EXPECT(s == FC_OK, "%s", err.msg);
    int bad = 0;
    for (int64_t i = 0; i < n; i++) bad += y[i] != encode(FC_F16, x[i] * 2 + 1);
    EXPECT(bad == 0, "temp chain: %d wrong", bad);
    /* a value that trips the check, in the last block */
    x[n - 3] = 150.0f;
    s = rt_cpu_run(cp, in, out, &err);
    EXPECT(s == FC_ERR_RUNTIME_DATA, "status %d", (int)s);
    EXPECT(strcmp(err.msg, "cpu: kernel k0_scale: a run-time check failed (run-time data error)") == 0, "message: %s", err.msg);
    /* the status word does not stick across runs */
    x[n - 3] = 1.5f;
    s = rt_cpu_run(cp, in, out, &err);
    EXPECT(s == FC_OK, "after an error: %s", s == FC_OK ? "" : err.msg);
    /* one launch at a time */
    memset(y, 0xA5, 2 * (size_t)n);
    s = rt_cpu_run_launch(cp, 0, in, out, &err);
    EXPECT(s == FC_OK, "run_launch 0");
    s = rt_cpu_run_launch(cp, 1, in, out, &err);
    EXPECT(s == FC_OK && y[0] == encode(FC_F16, x[0] * 2 + 1), "run_launch 1");
    s = rt_cpu_run_launch(cp, 2, in, out, &err);
    EXPECT(s == FC_ERR_USAGE && strcmp(err.msg, "cpu: launch 2 does not exist (the program has 2)") == 0, "%s", err.msg);
    s = rt_cpu_run(cp, in, NULL, &err);
    EXPECT(s == FC_ERR_USAGE && strcmp(err.msg, "cpu: output 0 of the block is a NULL pointer") == 0, "%s", err.msg);
    rt_cpu_free(cp);
    free(x); free(y);
    kir_program_free(g.p);
}

/* ---- KS_AMAX: the printer's line, and what the verifier and the backend refuse (the samples of
 * kir_samples.h run it) ------------------------------------------------------------------------ */
/* A kernel of one thread loop over p0 f32[8] with `amax p1[elem] <- |p0[i]|`, p1 of dtype d with
 * `written`; in the tail instead when `tail`. */
static KirKernel *amax_kernel(Prog *g, FcDtype d, bool written, int elem_expr_kind, int64_t elem, bool tail) {
    KirKernel *k = kir_kernel_new(g->p, "k0_amax", 1, 32);
    kir_param(k, FC_F32, 8, false);
    kir_param(k, d, 4, written);
    if (tail) kir_begin_tail(k);
    int i = kir_var(k, KT_I64);
    kir_for(k, KIR_LOOP_THREADS, i, C64(k, 0), C64(k, 8));
    int idx = elem_expr_kind == 0 ? C64(k, elem) : elem_expr_kind == 1 ? kir_const_i(k, KT_I32, elem) : VR(k, i);
    kir_amax(k, 1, idx, kir_load(k, 0, VR(k, i)));
    kir_end(k);
    EXPECT(kir_kernel_ok(k), "amax kernel built");
    int bufs[2] = {add_buf(g, KIR_BUF_INPUT, FC_F32, 8), add_buf(g, KIR_BUF_OUTPUT, d, 4)};
    launch_all(g, 0, bufs);
    return k;
}

static void test_amax_ir(void) {
    static const struct {
        FcDtype d; bool written; int elem_kind; int64_t elem; bool tail; const char *verify, *cpu;
    } cases[] = {
        {FC_F32, true, 0, 3, false, NULL, NULL},
        {FC_F32, true, 0, 3, true, "amax in the tail", "amax in the tail"},
        {FC_F32, false, 0, 3, false, "amax not at an i64 constant element of an f32 param marked written",
         "amax not at an i64 constant element of an f32 param marked written"},
        {FC_F16, true, 0, 3, false, "amax not at an i64 constant element", "amax not at an i64 constant element"},
        {FC_F32, true, 0, 4, false, "amax not at an i64 constant element", "amax not at an i64 constant element"},
        {FC_F32, true, 0, -1, false, "amax not at an i64 constant element", "amax not at an i64 constant element"},
        {FC_F32, true, 1, 3, false, "amax not at an i64 constant element", "amax not at an i64 constant element"},
        {FC_F32, true, 2, 0, false, "amax not at an i64 constant element", "amax not at an i64 constant element"},
    };
    for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++) {
        Prog g;
        prog_init(&g, "amax_ir");
        KirKernel *k = amax_kernel(&g, cases[c].d, cases[c].written, cases[c].elem_kind, cases[c].elem, cases[c].tail);
        FcErr err = {0};
        FcStatus vs = kir_verify(k, &err);
        if (!cases[c].verify) {
            EXPECT(vs == FC_OK, "case %d: %s", c, err.msg);
            StrBuf sb = {0};
            kir_print_kernel(k, &sb);
            EXPECT(sb.data && strstr(sb.data, "\n    amax p1[3] <- |p0[v0]|\n"), "the printed amax: %s", sb.data ? sb.data : "");
            sb_free(&sb);
        } else {
            EXPECT(vs == FC_ERR_INTERNAL && strstr(err.msg, cases[c].verify), "case %d: kir_verify: %s", c, err.msg);
        }
        RtCpuProgram *cp = NULL;
        FcStatus cs = rt_cpu_compile(g.p, 1, &cp, &err);
        if (!cases[c].cpu) EXPECT(cs == FC_OK, "case %d: %s", c, err.msg);
        else EXPECT(cs == FC_ERR_INTERNAL && strstr(err.msg, cases[c].cpu), "case %d: the CPU backend: %s", c, err.msg);
        rt_cpu_free(cp);
        kir_program_free(g.p);
    }
}

/* in place: a kernel whose read and written params are bound to one buffer (no noalias) */
static void test_inplace(void) {
    const int64_t n = 555;
    Prog g;
    prog_init(&g, "inplace");
    KirKernel *k = kir_kernel_new(g.p, "k0_inplace", cdiv(n, 64), 64);
    int pr = kir_param(k, FC_F32, n, false), pw = kir_param(k, FC_F32, n, true);
    int v = open_pointwise(k, n);
    kir_store(k, pw, VR(k, v), kir_bin(k, KB_MUL, kir_load(k, pr, VR(k, v)), kir_const_f(k, KT_F32, 3)));
    kir_end(k);
    int b = add_buf(&g, KIR_BUF_OUTPUT, FC_F32, n);
    int args[2] = {b, b};
    add_launch(&g, 0, 2, args);
    StrBuf sb = {0};
    FcErr err;
    EXPECT(cg_llvm_text(g.p, &sb, &err) == FC_OK, "text");
    EXPECT(sb.data && !strstr(sb.data, "noalias"), "aliased params must not be noalias");
    sb_free(&sb);
    float *y = xalloc(4 * (size_t)n), *w = xalloc(4 * (size_t)n);
    for (int64_t i = 0; i < n; i++) w[i] = y[i] = frand(-3, 3);
    void *out[1] = {y};
    RUN_OK(&g, 2, NULL, out, NULL);
    int bad = 0;
    for (int64_t i = 0; i < n; i++) bad += !same_f32(y[i], w[i] * 3);
    EXPECT(bad == 0, "in place: %d wrong", bad);
    free(y); free(w);
    kir_program_free(g.p);
}

/* ---- 9. threads, text, vectorization, errors, fault injection, STREAM ------------------------- */
static void test_threads_env(void) {
    Prog g;
    prog_init(&g, "env");
    build_axpy(&g, 10, 4);
    static const char *bad[] = {"abc", "0", "-3", "2000", "4x", ""};
    for (int i = 0; i < 6; i++) {
        RtCpuProgram *cp = NULL;
        FcErr err;
        setenv("FUSEC_NUM_THREADS", bad[i], 1);
        FcStatus s = rt_cpu_compile(g.p, 0, &cp, &err);
        char want[200];
        snprintf(want, sizeof want, "FUSEC_NUM_THREADS must be an integer from 1 to 1024 (it is '%s')", bad[i]);
        EXPECT(s == FC_ERR_USAGE && cp == NULL && strcmp(err.msg, want) == 0, "FUSEC_NUM_THREADS=%s: %s", bad[i], err.msg);
        rt_cpu_free(cp);
    }
    setenv("FUSEC_NUM_THREADS", "3", 1);
    RtCpuProgram *cp = NULL;
    FcErr err;
    EXPECT(rt_cpu_compile(g.p, 0, &cp, &err) == FC_OK && rt_cpu_threads(cp) == 3, "FUSEC_NUM_THREADS=3");
    rt_cpu_free(cp);
    cp = NULL;
    EXPECT(rt_cpu_compile(g.p, 5, &cp, &err) == FC_OK && rt_cpu_threads(cp) == 5, "explicit count wins");
    rt_cpu_free(cp);
    cp = NULL;
    EXPECT(rt_cpu_compile(g.p, 1025, &cp, &err) == FC_ERR_USAGE, "1025 threads");
    unsetenv("FUSEC_NUM_THREADS");
    EXPECT(rt_cpu_compile(g.p, 0, &cp, &err) == FC_OK && rt_cpu_threads(cp) >= 1, "default: all cores");
    rt_cpu_free(cp);
    kir_program_free(g.p);
}

static void test_text_and_vectorization(void) {
    Prog g;
    prog_init(&g, "text");
    build_axpy(&g, 1000, 128);
    StrBuf a = {0}, b = {0};
    FcErr err;
    EXPECT(cg_llvm_text(g.p, &a, &err) == FC_OK && cg_llvm_text(g.p, &b, &err) == FC_OK, "text: %s", err.msg);
    EXPECT(a.data && b.data && strcmp(a.data, b.data) == 0, "text is deterministic");
    EXPECT(a.data && strstr(a.data, "define void @k0_axpy(ptr nocapture readonly %params, i64 %block_begin, i64 %block_end, ptr nocapture %status)"),
          "calling convention");
    EXPECT(a.data && strstr(a.data, "noalias") && strstr(a.data, "!invariant.load"), "noalias params, invariant loads");
    EXPECT(a.data && !strstr(a.data, "llvm.prefetch"), "no prefetch in a pointwise kernel");
    sb_free(&a);
    sb_free(&b);

    /* optimized for the host, the thread loop becomes vector code */
    LLVMInitializeNativeTarget();
    LLVMInitializeNativeAsmPrinter();
    LLVMContextRef ctx = LLVMContextCreate();
    void *mod = NULL;
    EXPECT(cg_llvm_module(g.p, ctx, &mod, &err) == FC_OK, "module: %s", err.msg);
    if (mod) {
        char *triple = LLVMGetDefaultTargetTriple(), *cpu = LLVMGetHostCPUName(), *feat = LLVMGetHostCPUFeatures();
        LLVMTargetRef target;
        char *msg = NULL;
        if (!LLVMGetTargetFromTriple(triple, &target, &msg)) {
            LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, triple, cpu, feat, LLVMCodeGenLevelAggressive,
                                                              LLVMRelocPIC, LLVMCodeModelJITDefault);
            LLVMSetTarget(mod, triple);
            LLVMTargetDataRef dl = LLVMCreateTargetDataLayout(tm);
            LLVMSetModuleDataLayout(mod, dl);
            LLVMDisposeTargetData(dl);
            LLVMPassBuilderOptionsRef o = LLVMCreatePassBuilderOptions();
            LLVMErrorRef e = LLVMRunPasses(mod, "default<O3>", tm, o);
            EXPECT(e == NULL, "passes");
            LLVMDisposePassBuilderOptions(o);
            char *ir = LLVMPrintModuleToString(mod);
            EXPECT(strstr(ir, "x float>") != NULL, "the pointwise thread loop is vectorized");
            LLVMDisposeMessage(ir);
            LLVMDisposeTargetMachine(tm);
        }
        LLVMDisposeMessage(msg);
        LLVMDisposeMessage(triple); LLVMDisposeMessage(cpu); LLVMDisposeMessage(feat);
        LLVMDisposeModule(mod);
    }
    LLVMContextDispose(ctx);
    kir_program_free(g.p);

    /* a row kernel prefetches the next row: read ranges (rw 0) and written ranges (rw 1) */
    prog_init(&g, "text_rows");
    build_softmax(&g, 37, 1000, 64);
    StrBuf r = {0};
    EXPECT(cg_llvm_text(g.p, &r, &err) == FC_OK, "text: %s", err.msg);
    int nread = 0, nwrite = 0;
    for (const char *s = r.data; s && (s = strstr(s, "call void @llvm.prefetch.p0(")) != NULL; s++) {
        const char *rw = strstr(s, ", i32 ");
        if (rw && rw[6] == '0') nread++;
        if (rw && rw[6] == '1') nwrite++;
    }
    /* 1000 floats = 63 lines of x read, 63 of y written; 16 strips of ceil(63/16) = 4 each */
    EXPECT(nread == 4 && nwrite == 4, "row prefetches per strip: %d read, %d write (want 4, 4)", nread, nwrite);
    sb_free(&r);
    kir_program_free(g.p);
}

/* A block-invariant head (codegen/llvm.c, invariant_head_end; what the lowering's stage_whole
 * emits: a row kernel's bf16 weight staged widened): a leading thread loop that stores a param
 * into a shared array based at a constant, which nothing else writes, runs once per chunk of
 * blocks, before the block loop. One whose array a later statement also writes (s1 += block)
 * stays in the block loop: hoisted, block b would read w + the earlier blocks' indices. */
static void build_invariant_head(Prog *g, int64_t R, int64_t C) {
    KirKernel *k = kir_kernel_new(g->p, "k0_rows", R, 64);
    int x = kir_param(k, FC_F32, R * C, false), w = kir_param(k, FC_BF16, C, false), o = kir_param(k, FC_F32, R * C, true);
    int s0 = kir_shared(k, KT_F32, C), s1 = kir_shared(k, KT_F32, C);
    kir_shared_base(k, s0, C64(k, 0));
    kir_shared_base(k, s1, C64(k, 0));
    int sh[2] = {s0, s1};
    for (int j = 0; j < 2; j++) {
        int i = kir_var(k, KT_I64);
        kir_for(k, KIR_LOOP_THREADS, i, C64(k, 0), C64(k, C));
        kir_shstore(k, sh[j], VR(k, i), kir_load(k, w, VR(k, i)));
        kir_end(k);
    }
    kir_barrier(k);
    int b = kir_var(k, KT_I64), i2 = kir_var(k, KT_I64), i3 = kir_var(k, KT_I64);
    kir_let(k, b, kir_block_idx(k));
    kir_for(k, KIR_LOOP_THREADS, i2, C64(k, 0), C64(k, C));
    int l1 = kir_shload(k, s1, VR(k, i2));
    kir_set_view(k, l1, VR(k, i2));
    kir_shstore(k, s1, VR(k, i2), kir_bin(k, KB_ADD, l1, kir_cast(k, KT_F32, VR(k, b))));
    kir_end(k);
    kir_barrier(k);
    kir_for(k, KIR_LOOP_THREADS, i3, C64(k, 0), C64(k, C));
    int at = kir_bin(k, KB_ADD, kir_bin(k, KB_MUL, VR(k, b), C64(k, C)), VR(k, i3));
    int a0 = kir_shload(k, s0, VR(k, i3)), a1 = kir_shload(k, s1, VR(k, i3));
    kir_set_view(k, a0, VR(k, i3));
    kir_set_view(k, a1, VR(k, i3));
    kir_store(k, o, at, kir_bin(k, KB_ADD, kir_bin(k, KB_MUL, kir_load(k, x, at), a0), a1));
    kir_end(k);
    EXPECT(kir_kernel_ok(k), "invariant head built");
    int bufs[3] = {add_buf(g, KIR_BUF_INPUT, FC_F32, R * C), add_buf(g, KIR_BUF_INPUT, FC_BF16, C),
                   add_buf(g, KIR_BUF_OUTPUT, FC_F32, R * C)};
    launch_all(g, 0, bufs);
}

static void test_invariant_head(void) {
    const int64_t R = 37, C = 100;
    Prog g;
    prog_init(&g, "invariant_head");
    build_invariant_head(&g, R, C);
    /* the text: s0 is stored before the block loop starts, s1 after */
    StrBuf t = {0};
    FcErr err;
    EXPECT(cg_llvm_text(g.p, &t, &err) == FC_OK, "text: %s", err.msg);
    const char *blk = t.data ? strstr(t.data, "store i64 %block_begin") : NULL;
    const char *u0 = t.data ? strstr(t.data, "float, ptr %sh0") : NULL, *u1 = t.data ? strstr(t.data, "float, ptr %sh1") : NULL;
    EXPECT(blk && u0 && u1 && u0 < blk && u1 > blk, "s0 staged before the block loop, s1 in it");
    sb_free(&t);
    float *x = xalloc(sizeof(float) * (size_t)(R * C)), *o = xalloc(sizeof(float) * (size_t)(R * C));
    uint16_t *w = xalloc(sizeof(uint16_t) * (size_t)C);
    for (int64_t i = 0; i < R * C; i++) x[i] = frand(-2, 2);
    for (int64_t i = 0; i < C; i++) w[i] = (uint16_t)(f2u(frand(-2, 2)) >> 16);
    for (int nt = 1; nt <= 3; nt += 2) {
        poison(o, FC_F32, R * C);
        void *in[2] = {x, w}, *out[1] = {o};
        int64_t bytes[1] = {R * C * 4};
        RUN_OK(&g, nt, in, out, bytes);
        int bad = 0;
        for (int64_t r = 0; r < R; r++)
            for (int64_t c = 0; c < C; c++) {
                uint32_t wb = (uint32_t)w[c] << 16;
                float wf;
                memcpy(&wf, &wb, 4);
                float want = x[r * C + c] * wf + (wf + (float)r);
                bad += !same_f32(o[r * C + c], want);
            }
        EXPECT(bad == 0, "invariant head, %d threads: %d of %lld elements wrong", nt, bad, (long long)(R * C));
    }
    free(x); free(o); free(w);
    kir_program_free(g.p);

    /* the same kernel run in place (x and o one buffer): no noalias, and no hoisting either */
    prog_init(&g, "invariant_head_inplace");
    build_invariant_head(&g, R, C);
    g.p->launches.data[0].args[0] = g.p->launches.data[0].args[2];
    EXPECT(cg_llvm_text(g.p, &t, &err) == FC_OK, "text: %s", err.msg);
    blk = t.data ? strstr(t.data, "store i64 %block_begin") : NULL;
    u0 = t.data ? strstr(t.data, "float, ptr %sh0") : NULL;
    EXPECT(blk && u0 && u0 > blk, "in place: s0 staged in the block loop");
    sb_free(&t);
    kir_program_free(g.p);
}

/* how many times s occurs in text (NULL: none) */
static int occurrences(const char *text, const char *s) {
    int n = 0;
    for (const char *c = text; c && (c = strstr(c, s)) != NULL; c++) n++;
    return n;
}

/* A store of a value already rounded to bf16 is the top half of its bits (codegen/llvm.c,
 * exact_bf16): through a variable let to the rounding, and through a shared array whose every
 * store is one (a row kernel's kept row of a rounded sum). Both must give the bits the store's
 * own conversion gives the unrounded value, over random bit patterns (NaNs with payloads,
 * infinities, subnormals, values that round to infinity). */
static void test_exact_bf16_store(void) {
    const int64_t n = 4099;
    Prog g;
    prog_init(&g, "exact_bf16");
    KirKernel *k = kir_kernel_new(g.p, "k0_exact", 1, 256);
    int x = kir_param(k, FC_F32, n, false), o1 = kir_param(k, FC_BF16, n, true), o2 = kir_param(k, FC_BF16, n, true),
        o3 = kir_param(k, FC_BF16, n, true);
    int sh = kir_shared(k, KT_F32, n);
    int i = kir_var(k, KT_I64), r = kir_var(k, KT_F32), j = kir_var(k, KT_I64);
    kir_for(k, KIR_LOOP_THREADS, i, C64(k, 0), C64(k, n));
    kir_let(k, r, kir_round(k, FC_BF16, kir_load(k, x, VR(k, i))));
    kir_store(k, o1, VR(k, i), VR(k, r));
    kir_store(k, o2, VR(k, i), kir_load(k, x, VR(k, i)));
    kir_shstore(k, sh, VR(k, i), VR(k, r));
    kir_end(k);
    kir_barrier(k);
    kir_for(k, KIR_LOOP_THREADS, j, C64(k, 0), C64(k, n));
    kir_store(k, o3, VR(k, j), kir_shload(k, sh, VR(k, j)));
    kir_end(k);
    EXPECT(kir_kernel_ok(k), "exact bf16 built");
    int bufs[4] = {add_buf(&g, KIR_BUF_INPUT, FC_F32, n), add_buf(&g, KIR_BUF_OUTPUT, FC_BF16, n),
                   add_buf(&g, KIR_BUF_OUTPUT, FC_BF16, n), add_buf(&g, KIR_BUF_OUTPUT, FC_BF16, n)};
    launch_all(&g, 0, bufs);
    StrBuf t = {0};
    FcErr err;
    EXPECT(cg_llvm_text(g.p, &t, &err) == FC_OK, "text: %s", err.msg);
    int helpers = occurrences(t.data, "call i16 @fc_f32_to_bf16(");
    EXPECT(helpers == 1, "one store converts (o2), two take the top half: %d conversions", helpers);
    sb_free(&t);
    uint32_t *xb = xalloc(4 * (size_t)n);
    uint16_t *y1 = xalloc(2 * (size_t)n), *y2 = xalloc(2 * (size_t)n), *y3 = xalloc(2 * (size_t)n);
    for (int64_t e = 0; e < n; e++) {
        uint32_t u = (uint32_t)rnd();
        switch (e % 6) {
        case 0: u = (u & 0x807fffffu) | 0x7f800000u; break;          /* inf and NaNs, payloads */
        case 1: u &= 0x807fffffu; break;                             /* subnormals and zeros */
        case 2: u = (u & 0x8000ffffu) | 0x7f7f0000u; break;          /* near the largest, to inf */
        default: break;
        }
        xb[e] = u;
    }
    memset(y1, 0xA5, 2 * (size_t)n); memset(y2, 0x5A, 2 * (size_t)n); memset(y3, 0xA5, 2 * (size_t)n);
    void *in[1] = {xb}, *out[3] = {y1, y2, y3};
    int64_t bytes[3] = {2 * n, 2 * n, 2 * n};
    RUN_OK(&g, 1, in, out, bytes);
    int bad = 0;
    for (int64_t e = 0; e < n; e++)
        if (y1[e] != y2[e] || y3[e] != y2[e]) {
            if (bad++ < 3) fprintf(stderr, "  x %08x: converted %04x, let %04x, row %04x\n", xb[e], y2[e], y1[e], y3[e]);
        }
    EXPECT(bad == 0, "stores of rounded bf16 values: %d of %lld differ from the conversion", bad, (long long)n);
    free(xb); free(y1); free(y2); free(y3);
    kir_program_free(g.p);
}

/* bf16 loops in pairs (codegen/llvm.c, pair_loop): a thread loop whose unit-stride accesses are
 * all bf16 runs two elements at a time, one i32 word a load and a store. Every bf16 code as x
 * (NaNs, infinities, subnormals), an odd block so that half the blocks start at an odd element
 * and end on one left over, a broadcast load, a let, a rounded (exact) store and the loop index
 * in a value: each element must be what the one-at-a-time conversions give, computed here. The
 * emitted text must show the pairs (else the test would pass on the old code). */
static uint16_t bf16_rne(float f) {
    uint32_t code = encode(FC_BF16, f);
    return code == UINT32_MAX ? 0x7fc0 : (uint16_t)code;
}
static float bf16_val(uint16_t c) { uint32_t u = (uint32_t)c << 16; float f; memcpy(&f, &u, 4); return f; }
static void test_bf16_pairs(void) {
    const int64_t n = 65536 + 1001;
    const int block = 129;
    Prog g;
    prog_init(&g, "bf16_pairs");
    KirKernel *k = kir_kernel_new(g.p, "k0_pairs", cdiv(n, block), block);
    int px = kir_param(k, FC_BF16, n, false), pb = kir_param(k, FC_BF16, 8, false);
    int o1 = kir_param(k, FC_BF16, n, true), o2 = kir_param(k, FC_BF16, n, true), o3 = kir_param(k, FC_BF16, n, true);
    int vi = open_pointwise(k, n);
    int v = kir_var(k, KT_F32);
    kir_let(k, v, kir_bin(k, KB_MUL, kir_bin(k, KB_ADD, kir_load(k, px, VR(k, vi)), kir_load(k, pb, C64(k, 5))),
                          kir_const_f(k, KT_F32, 3.0)));
    kir_store(k, o1, VR(k, vi), VR(k, v));
    kir_store(k, o2, VR(k, vi), kir_round(k, FC_BF16, kir_bin(k, KB_MUL, kir_load(k, px, VR(k, vi)), kir_const_f(k, KT_F32, 0.1))));
    kir_store(k, o3, VR(k, vi), kir_bin(k, KB_ADD, VR(k, v), kir_cast(k, KT_F32, VR(k, vi))));
    kir_end(k);
    EXPECT(kir_kernel_ok(k), "pairs built");
    int bufs[5] = {add_buf(&g, KIR_BUF_INPUT, FC_BF16, n), add_buf(&g, KIR_BUF_INPUT, FC_BF16, 8),
                   add_buf(&g, KIR_BUF_OUTPUT, FC_BF16, n), add_buf(&g, KIR_BUF_OUTPUT, FC_BF16, n),
                   add_buf(&g, KIR_BUF_OUTPUT, FC_BF16, n)};
    launch_all(&g, 0, bufs);
    StrBuf t = {0};
    FcErr err;
    EXPECT(cg_llvm_text(g.p, &t, &err) == FC_OK, "text: %s", err.msg);
    int words = occurrences(t.data, "load i32, ptr");
    EXPECT(words == 2, "the x load paired (one word), once in each body copy: %d i32 loads", words);
    EXPECT(t.data && strstr(t.data, "store i32"), "the stores paired");
    EXPECT(t.data && !strstr(t.data, "llvm.loop.vectorize.width"), "no width asked below AVX-512");
    sb_free(&t);
    /* at AVX-512 the loop asks for 16 words (each half a zmm); run that way too (here, AVX2 or
     * SSE: the same values at another width) */
    for (int wide = 0; wide < 2; wide++) {
        g.p->vector_bytes = wide ? 64 : 0;
        if (wide) {
            StrBuf t64 = {0};
            EXPECT(cg_llvm_text(g.p, &t64, &err) == FC_OK, "text: %s", err.msg);
            EXPECT(t64.data && strstr(t64.data, "!\"llvm.loop.vectorize.width\", i32 16}"), "width 16 at AVX-512");
            sb_free(&t64);
        }
        uint16_t *x = xalloc(2 * (size_t)n), b[8], *y[3];
        for (int64_t i = 0; i < n; i++) x[i] = i < 65536 ? (uint16_t)(i * 40503u) : (uint16_t)rnd();
        for (int j = 0; j < 8; j++) b[j] = (uint16_t)(0x3f00 + 37 * j);   /* b[5] = 0x3fb9, 1.4453125 */
        for (int j = 0; j < 3; j++) { y[j] = xalloc(2 * (size_t)n); poison(y[j], FC_BF16, n); }
        void *in[2] = {x, b}, *out[3] = {y[0], y[1], y[2]};
        int64_t bytes[3] = {2 * n, 2 * n, 2 * n};
        RUN_OK(&g, 2, in, out, bytes);
        int64_t bad = 0;
        for (int64_t i = 0; i < n; i++) {
            float xf = bf16_val(x[i]);
            float a = xf + bf16_val(b[5]);
            float vf = a * 3.0f;
            float r2 = bf16_val(bf16_rne(xf * 0.1f));
            float s3 = vf + (float)i;
            uint16_t want[3] = {bf16_rne(vf), bf16_rne(r2), bf16_rne(s3)};
            for (int j = 0; j < 3; j++) {
                bool ok = isnan(bf16_val(want[j])) ? isnan(bf16_val(y[j][i])) : y[j][i] == want[j];
                if (!ok && bad++ < 4)
                    fprintf(stderr, "  pairs: o%d[%lld] of x %04x: %04x, want %04x\n", j + 1, (long long)i, x[i], y[j][i], want[j]);
            }
        }
        EXPECT(bad == 0, "bf16 pairs (%d-byte vectors): %lld of %lld values wrong", wide ? 64 : 0, (long long)bad,
               (long long)(3 * n));
        free(x);
        for (int j = 0; j < 3; j++) free(y[j]);
    }
    kir_program_free(g.p);
}

/* erf's coefficient tables: the vectorized lookups become permutes, and the results are the
 * same as those of the scalar loop (sizes not multiples of the vector width) */
static void test_erf_tables(void) {
    const int64_t n = 1037;
    Prog g;
    prog_init(&g, "erf_tables");
    KirKernel *k = kir_kernel_new(g.p, "k0_erf", cdiv(n, 256), 256);
    int px = kir_param(k, FC_F32, n, false), py = kir_param(k, FC_F32, n, true);
    int vi = open_pointwise(k, n);
    kir_store(k, py, VR(k, vi), kir_un(k, KU_ERF, kir_load(k, px, VR(k, vi))));
    kir_end(k);
    EXPECT(kir_kernel_ok(k), "erf built");
    int bufs[2] = {add_buf(&g, KIR_BUF_INPUT, FC_F32, n), add_buf(&g, KIR_BUF_OUTPUT, FC_F32, n)};
    launch_all(&g, 0, bufs);
    float *x = xalloc(4 * (size_t)n), *y = xalloc(4 * (size_t)n);
    for (int64_t i = 0; i < n; i++) x[i] = frand(-4.5f, 4.5f);
    x[0] = NAN; x[1] = -0.0f; x[2] = 3.92f; x[3] = -INFINITY; x[4] = 0.25f; x[5] = 0.24999999f;
    poison(y, FC_F32, n);
    void *in[1] = {x}, *out[1] = {y};
    int64_t bytes[1] = {4 * n};
    RUN_OK(&g, 2, in, out, bytes);
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double want = erf((double)x[i]);
        bool ok = isnan(x[i]) ? isnan(y[i]) : fabs((double)y[i] - want) <= 2.5e-7 * fabs(want) + 1e-45;
        if (!ok && bad++ < 3) fprintf(stderr, "  erf(%a) = %a, want %a\n", (double)x[i], (double)y[i], want);
    }
    EXPECT(bad == 0, "erf through the tables");
    EXPECT(signbit(y[1]) && y[1] == 0.0f && y[2] == 1.0f && y[3] == -1.0f, "erf special values");
    /* with AVX2 or AVX-512 the loop vectorizer makes gathers of the tables, which become
     * permutes: the six coefficient rows and the centres (on AVX2 without the "+fast-gather"
     * tuning LLVM scalarized them: x86-64-v3's exact GELU took 4x its AVX-512 time) */
    const char *lname = NULL;
    int level = rt_cpu_level(&lname);
#if defined(__x86_64__)
    bool avx2 = level >= 3 || (level == 0 && __builtin_cpu_supports("avx2"));
#else
    bool avx2 = false;
#endif
    if (avx2) {
        RtCpuProgram *cp = NULL;
        FcErr err;
        EXPECT(rt_cpu_compile(g.p, 1, &cp, &err) == FC_OK, "erf: %s", err.msg);
        if (cp) EXPECT(rt_cpu_table_permutes(cp) >= 7, "erf's 7 tables as permutes at FUSEC_CPU=%s: %d", lname ? lname : "native",
                       rt_cpu_table_permutes(cp));
        rt_cpu_free(cp);
    }
    free(x); free(y);
    kir_program_free(g.p);
}

static void test_codegen_errors(void) {
    FcErr err;
    RtCpuProgram *cp = NULL;
    /* a block-level var assigned inside a thread loop */
    {
        Prog g;
        prog_init(&g, "bad1");
        KirKernel *k = kir_kernel_new(g.p, "k0_bad", 1, 32);
        int p = kir_param(k, FC_F32, 32, true);
        int acc = kir_var(k, KT_F32), i = kir_var(k, KT_I64);
        kir_let(k, acc, kir_const_f(k, KT_F32, 0));
        kir_for(k, KIR_LOOP_THREADS, i, C64(k, 0), C64(k, 32));
        kir_assign(k, acc, kir_bin(k, KB_ADD, VR(k, acc), kir_load(k, p, VR(k, i))));
        kir_end(k);
        kir_store(k, p, C64(k, 0), VR(k, acc));
        int b = add_buf(&g, KIR_BUF_OUTPUT, FC_F32, 32);
        add_launch(&g, 0, 1, &b);
        FcStatus s = rt_cpu_compile(g.p, 1, &cp, &err);
        EXPECT(s == FC_ERR_INTERNAL && strcmp(err.msg, "llvm codegen: kernel k0_bad: v0, declared at block level, is assigned "
                                             "inside a thread loop (per-thread state must be a thread array)") == 0, "%s", err.msg);
        kir_program_free(g.p);
    }
    /* too much per-block scratch */
    {
        Prog g;
        prog_init(&g, "bad2");
        KirKernel *k = kir_kernel_new(g.p, "k0_big", 1, 1024);
        kir_shared(k, KT_F64, (int64_t)1 << 20);
        FcStatus s = rt_cpu_compile(g.p, 1, &cp, &err);
        EXPECT(s == FC_ERR_UNSUPPORTED && strstr(err.msg, "k0_big needs more than 4194304 bytes"), "%s", err.msg);
        kir_program_free(g.p);
    }
    /* a name that is not a plain identifier, and one that clashes with libm */
    {
        Prog g;
        prog_init(&g, "bad3");
        kir_kernel_new(g.p, "tanhf", 1, 1);
        FcStatus s = rt_cpu_compile(g.p, 1, &cp, &err);
        EXPECT(s == FC_ERR_INTERNAL && strstr(err.msg, "kernel name 'tanhf' is not a fresh identifier"), "%s", err.msg);
        kir_program_free(g.p);
    }
    /* a launch binding a buffer smaller than the param */
    {
        Prog g;
        prog_init(&g, "bad4");
        build_axpy(&g, 100, 32);
        g.p->buffers.data[2].numel = 99;
        FcStatus s = rt_cpu_compile(g.p, 1, &cp, &err);
        EXPECT(s == FC_ERR_INTERNAL && strcmp(err.msg, "cpu: launch 0 of k0_axpy: buffer b2 (f32[99]) does not fit param p2 (f32[100])") == 0, "%s", err.msg);
        kir_program_free(g.p);
    }
    EXPECT(cp == NULL, "no handle after a failure");
}

static void test_fault_injection(void) {
    Prog g;
    prog_init(&g, "faults");
    build_softmax(&g, 2, 10, 32);
    int fails = 0;
    for (long nth = 1; nth < 200; nth++) {
        RtCpuProgram *cp = NULL;
        FcErr err;
        fc_alloc_fail_at(nth);
        FcStatus s = rt_cpu_compile(g.p, 2, &cp, &err);
        fc_alloc_fail_at(0);
        if (s == FC_OK) { rt_cpu_free(cp); break; }
        fails++;
        EXPECT(s == FC_ERR_NOMEM && cp == NULL, "allocation %ld failing gave %d: %s", nth, (int)s, err.msg);
    }
    EXPECT(fails > 3, "fault injection reached only %d allocations", fails);
    kir_program_free(g.p);
}

/* ---- 10. the shared kernel samples (tests/unit/kir_samples.h), when present ------------------ */
#if defined(__has_include)
#if __has_include("kir_samples.h")
#include "kir_samples.h"
#define HAVE_KIR_SAMPLES 1
#endif
#endif
#ifdef HAVE_KIR_SAMPLES
/* The comparison can fail for an amax: element 0 of an amax sample's state (the largest |x|)
 * expected as a backend that lost the lane holding that |x| would leave it (the largest of the
 * others and the prior; for a NaN, a number) is reported, and only it. */
static void amax_wrong_max_caught(const KsSample *s, void *const *got, void *const *want) {
    const KirProgram *p = s->prog;
    const float *x = want[0];
    float *state = want[2];
    uint32_t top = 0, rest;
    int64_t at = -1;
    memcpy(&rest, &ks_am_prior[0], 4);
    for (int64_t i = 0; i < p->buffers.data[0].numel; i++) {
        uint32_t b;
        memcpy(&b, &x[i], 4);
        if ((b & 0x7fffffffu) > top) { top = b & 0x7fffffffu; at = i; }
    }
    for (int64_t i = 0; i < p->buffers.data[0].numel; i++) {
        uint32_t b;
        memcpy(&b, &x[i], 4);
        if (i != at && (b & 0x7fffffffu) > rest) rest = b & 0x7fffffffu;
    }
    float keep = state[0], wrong;
    memcpy(&wrong, &rest, 4);
    state[0] = wrong;
    char msg[256];
    long bad = ks_compare(p, got, want, s->rtol, msg, sizeof msg);
    EXPECT(bad == 1 && strstr(msg, "output 0 (b2) element 0:"), "sample %s: the wrong maximum %.9g (for %.9g) gave %ld mismatches: %s",
           s->name, (double)wrong, (double)keep, bad, msg);
    state[0] = keep;
}

static void test_samples(void) {
    for (int i = 0; i < KS_NUM_SAMPLES; i++) {
        KsSample s;
        if (!ks_sample(i, &s)) { EXPECT(0, "sample %d: out of memory", i); continue; }
        const KirProgram *p = s.prog;
        void **got = ks_alloc_buffers(p), **want = ks_alloc_buffers(p);
        void **in = xalloc(sizeof(void *) * (size_t)(p->buffers.len + 1));
        void **out = xalloc(sizeof(void *) * (size_t)(p->buffers.len + 1));
        if (!got || !want) exit(2);
        s.fill(got, p, 1234 + (uint64_t)i);
        ks_copy_inputs(p, got, want);
        ks_poison_outputs(p, got);
        for (int b = 0; b < p->buffers.len; b++) {
            const KirBuffer *kb = &p->buffers.data[b];
            if (kb->kind == KIR_BUF_INPUT) in[kb->index] = got[b];
            else if (kb->kind == KIR_BUF_OUTPUT) out[kb->index] = got[b];
        }
        RtCpuProgram *cp = NULL;
        FcErr err;
        FcStatus st = rt_cpu_compile(p, 2, &cp, &err);
        EXPECT(st == FC_OK, "sample %s: %s", s.name, err.msg);
        if (st == FC_OK) {
            st = rt_cpu_run(cp, in, out, &err);
            int want_status = s.reference(want, p);
            EXPECT((int)st == want_status, "sample %s: status %d, want %d (%s)", s.name, (int)st, want_status,
                  st == FC_OK ? "" : err.msg);
            if (st == FC_OK) {
                char msg[256];
                long bad = ks_compare(p, got, want, s.rtol, msg, sizeof msg);
                EXPECT(bad == 0, "sample %s: %ld mismatches; %s", s.name, bad, msg);
                if (!strncmp(s.name, "amax", 4)) amax_wrong_max_caught(&s, got, want);
            }
        }
        rt_cpu_free(cp);
        free(in); free(out);
        ks_free_buffers(p, got);
        ks_free_buffers(p, want);
        ks_sample_free(&s);
    }
}
#endif

/* ---- the object cache (docs/cpu.md, "The object cache") -------------------------------------- */
/* Compiles g in the cache folder `dir`, runs it on x, y into o (poisoned first); whether the
 * cache answered into *hit. */
static void cached_run(Prog *g, float *x, float *y, float *o, int64_t n, bool *hit) {
    RtCpuProgram *cp = NULL;
    FcErr err;
    *hit = false;
    FcStatus s = rt_cpu_compile(g->p, 2, &cp, &err);
    EXPECT(s == FC_OK, "cache: compile: %s", s == FC_OK ? "" : err.msg);
    if (s != FC_OK) return;
    *hit = rt_cpu_cache_hit(cp);
    poison(o, FC_F32, n);
    void *in[2] = {x, y}, *out[1] = {o};
    s = rt_cpu_run(cp, in, out, &err);
    EXPECT(s == FC_OK, "cache: run: %s", s == FC_OK ? "" : err.msg);
    rt_cpu_free(cp);
}
/* After the entry was spoiled (`what`): a miss computing o1's bits, then a hit (replaced). */
static void expect_replaced(Prog *g, float *x, float *y, const float *o1, float *o2, int64_t n, const char *what) {
    bool hit = true;
    cached_run(g, x, y, o2, n, &hit);
    EXPECT(!hit, "cache: %s was used", what);
    EXPECT(memcmp(o1, o2, 4 * (size_t)n) == 0, "cache: after %s", what);
    cached_run(g, x, y, o2, n, &hit);
    EXPECT(hit, "cache: %s was not replaced", what);
}
/* The one entry of the folder: its name into name (NULL if there is not exactly one). */
static const char *only_entry(const char *dir, char *name, size_t n) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -c '\\.o$' | grep -qx 1 && ls '%s' | grep '\\.o$'", dir, dir);
    FILE *f = popen(cmd, "r");
    if (!f) return NULL;
    bool ok = fgets(name, (int)n, f) != NULL;
    pclose(f);
    if (!ok) return NULL;
    name[strcspn(name, "\n")] = 0;
    return strlen(name) == 66 ? name : NULL;
}

static void test_object_cache(void) {
    char dir[] = "/tmp/fusec-objcache-XXXXXX";
    if (!mkdtemp(dir)) { EXPECT(0, "mkdtemp"); return; }
    const char *saved = getenv("FUSEC_CACHE_DIR");
    char *saved_copy = saved ? strdup(saved) : NULL;
    setenv("FUSEC_CACHE_DIR", dir, 1);
    const int64_t n = 4097;
    Prog g;
    prog_init(&g, "cached");
    build_axpy(&g, n, 128);
    float *x = xalloc(4 * (size_t)n), *y = xalloc(4 * (size_t)n), *o1 = xalloc(4 * (size_t)n), *o2 = xalloc(4 * (size_t)n);
    for (int64_t i = 0; i < n; i++) { x[i] = frand(-10, 10); y[i] = frand(-10, 10); }
    bool hit = true;
    cached_run(&g, x, y, o1, n, &hit);
    EXPECT(!hit, "cache: the first compile found an entry");
    int bad = 0;
    for (int64_t i = 0; i < n; i++) bad += !same_f32(o1[i], x[i] * 2.5f + y[i]);
    EXPECT(bad == 0, "cache: compiled: %d wrong", bad);
    cached_run(&g, x, y, o2, n, &hit);
    EXPECT(hit, "cache: the second compile missed");
    EXPECT(memcmp(o1, o2, 4 * (size_t)n) == 0, "cache: the cached object computes something else");

    char name[128], path[512];
    EXPECT(only_entry(dir, name, sizeof name) != NULL, "cache: not one entry in %s", dir);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    /* a damaged entry (one byte of the object flipped: the checksum fails) is a miss, compiled
     * again and replaced */
    FILE *f = fopen(path, "r+b");
    EXPECT(f != NULL, "cache: open %s", path);
    if (f) {
        fseek(f, 64 + 16 + 100, SEEK_SET);
        int c = fgetc(f);
        fseek(f, 64 + 16 + 100, SEEK_SET);
        fputc(c ^ 0x5a, f);
        fclose(f);
    }
    expect_replaced(&g, x, y, o1, o2, n, "a damaged entry");
    /* a whole entry whose payload is not an object of ours (the cache's checks pass) */
    RtCache *c = NULL;
    FcErr err;
    EXPECT(rt_cache_open_dir(dir, &c, &err) == FC_OK, "cache: open: %s", err.msg);
    if (c) {
        RtCacheKey key = {{0}, {0}};
        for (int i = 0; i < 32; i++) {
            unsigned v = 0;
            sscanf(name + 2 * i, "%2x", &v);
            key.bytes[i] = (uint8_t)v;
        }
        memcpy(key.hex, name, 64);
        static const char foreign[] = "FCOBJ9\0\0 not an object";
        EXPECT(rt_cache_put(c, &key, "o", foreign, sizeof foreign, &err) == FC_OK, "cache: put: %s", err.msg);
        rt_cache_free(c);
    }
    expect_replaced(&g, x, y, o1, o2, n, "a foreign payload");
    /* another x86 level is another key (from the host's; ctest's per-level runs skip this) */
    const char *lname = NULL;
    if (rt_cpu_level(&lname) == 0) {
        setenv("FUSEC_CPU", "x86-64-v2", 1);
        if (rt_cpu_level(&lname) == 2) {
            cached_run(&g, x, y, o2, n, &hit);
            EXPECT(!hit, "cache: x86-64-v2 took the host's object");
            EXPECT(memcmp(o1, o2, 4 * (size_t)n) == 0, "cache: x86-64-v2");
        }
        unsetenv("FUSEC_CPU");
    }
    /* an unusable folder: compiled without the cache */
    setenv("FUSEC_CACHE_DIR", "/proc/version/not-a-folder", 1);
    cached_run(&g, x, y, o2, n, &hit);
    EXPECT(!hit, "cache: a hit without a folder");
    EXPECT(memcmp(o1, o2, 4 * (size_t)n) == 0, "cache: without a folder");

    if (saved_copy) setenv("FUSEC_CACHE_DIR", saved_copy, 1); else unsetenv("FUSEC_CACHE_DIR");
    free(saved_copy);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    EXPECT(system(cmd) == 0, "cache: rm");
    free(x); free(y); free(o1); free(o2);
    kir_program_free(g.p);
}

static void test_stream(void) {
    double gbps = rt_cpu_stream_gbps(2);
    EXPECT(gbps > 0.1 && gbps < 1e5, "STREAM copy %.2f GB/s", gbps);
    printf("STREAM copy, 2 threads: %.1f GB/s\n", gbps);
}

#define T(f) do { double t0_ = now_s(); f(); if (getenv("FUSEC_TEST_TIMES")) fprintf(stderr, "%-30s %.2fs\n", #f, now_s() - t0_); } while (0)

int main(void) {
    unsetenv("FUSEC_NUM_THREADS");
    const char *level = NULL;
    if (rt_cpu_level(&level) < 0) {   /* FUSEC_CPU above this host (ctest's per-level runs) */
        printf("test_cpu_backend: skipped: FUSEC_CPU=%s is not supported by this host\n", level ? level : "?");
        return 77;
    }
    T(test_pointwise);
    T(test_unary);
    T(test_binary);
    T(test_casts);
    T(test_storage);
    T(test_storage_all);
    T(test_softmax);
    T(test_tail);
    T(test_reduce_types);
    T(test_matmul);
    T(test_error_and_temps);
    T(test_amax_ir);
    T(test_inplace);
    T(test_threads_env);
    T(test_text_and_vectorization);
    T(test_invariant_head);
    T(test_exact_bf16_store);
    T(test_bf16_pairs);
    T(test_erf_tables);
    T(test_codegen_errors);
    T(test_fault_injection);
    T(test_object_cache);
#ifdef HAVE_KIR_SAMPLES
    T(test_samples);
#endif
    T(test_stream);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("test_cpu_backend: all checks passed\n");
    return 0;
}
