/* test_panels.c: products of narrow weights on the CPU take B in panels (KirGemm.panel_k,
 * docs/cpu.md "Products of narrow weights").
 *
 * Blocks x @ (cast(w, f32) * s) (an i8 weight) and x @ cast(w, f32) (a bf16 one), lowered for
 * the CPU with given L2 and last-level cache sizes. The test checks:
 *  - the plan: with a 4 KiB L2, B [96, 256] in six panels of 16 rows (one operand block each)
 *    made by the launch before the product, which writes no bytes to memory; with 1 MiB, one
 *    panel of all 96 rows; with more rows in the product than a panel (64 > 16), panels in the
 *    last-level cache: one of all of B at 32 MiB, none at 64 KiB (too small even for chunks of
 *    16 columns), the f32 B then written whole, once (a batched x @ w: not once per product of
 *    the batch, and one product of the batch's rows); 600 rows at a 1 MiB LLC: two panels of
 *    160 rows and C in two blocks of 304 rows (KirGemm.panel_m), the operand kernel's bytes
 *    read counted once per block; at 512 KiB B's 128 columns in two chunks of 64
 *    (KirGemm.panel_n), as 500 columns in chunks of 128 at 1 MiB; the GPU-shaped program never;
 *  - the results, with outputs poisoned before each run, against x @ B computed here in f64
 *    (within 1e-5 of the largest), for every plan; runs with a batch folded into the rows
 *    ([2, 8, 96] @ B, [4, 150, 320] @ B in blocks of C) likewise;
 *  - the harness fails: one output element moved by 1e-3 of the largest is caught;
 *  - a B that is a transposed weight made here (dX = dY @ w^T, w bf16 or i8 with scales): made
 *    as B^T and read transposed, in two panels of 300 rows of B with C in two blocks of 352 at a
 *    2 MiB LLC, one panel at 32 MiB; results against f64 (a wrong ldb fails 3 checks, a panel
 *    based as B's rows crashes);
 *  - with --strict-rounding no blocks, chunks or several panels (B^T too), one panel kept, and
 *    the fused result's bits the eager one's (several panels gave other bits: caught);
 *  - a causal product and one whose A ends in zeros (one head of attention with k and v in 16
 *    bits) keep B whole where panels would fit;
 *  - a sweep of 48 random shapes (up to 1212 x 606 @ 606 x 600, every other one tall) at random
 *    L2 and LLC sizes, i8 or bf16 weights, each run against f64, which must see blocks of C,
 *    chunks of B's columns, panels and no panels (a B's ldb mistaken for n failed 17 of them).
 */
#include "cpu.h"
#include "frontend.h"
#include "passes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static double urand(void) {
    rng ^= rng >> 12; rng ^= rng << 25; rng ^= rng >> 27;
    return (double)((rng * 0x2545f4914f6cdd1dull) >> 11) * (1.0 / 9007199254740992.0);
}

static IrGraph *compile(const char *text) {
    IrGraph *g = NULL;
    StrBuf diags = {0};
    FcErr err = {0};
    FeOptions fo = {0};
    if (fe_compile(text, strlen(text), "p.tf", &fo, &g, &diags, &err) != FC_OK) fprintf(stderr, "compile: %s\n", err.msg);
    sb_free(&diags);
    return g;
}

static bool strict, eager;   /* lower with --strict-rounding, or unfused */
static KirProgram *lower(const IrGraph *src, int64_t l2, int64_t llc, bool cpu, PassResult *res) {
    PassOptions po = {.fuse = !eager, .sm = 90, .library_gemm = true, .cpu = cpu, .strict_rounding = strict};
    po.host = (PassCpu){.l1d_bytes = 32768, .l2_bytes = l2, .llc_bytes = llc, .vector_bytes = 64};
    FcErr err = {0};
    memset(res, 0, sizeof *res);
    if (pass_pipeline(src, &po, res, &err) != FC_OK) {
        fprintf(stderr, "pipeline: %s\n", err.msg);
        return NULL;
    }
    return res->prog;
}

/* The program's one library product, or NULL; *li its launch. */
static const KirKernel *product(const KirProgram *p, int *li) {
    for (int l = 0; l < p->launches.len; l++) {
        const KirKernel *k = p->kernels.data[p->launches.data[l].kernel];
        if (k->library) {
            *li = l;
            return k;
        }
    }
    return NULL;
}

/* x's values and B's (w, s), the same in every run; returns out0 of p's run, or NULL. */
static float *run(const KirProgram *p, const IrGraph *src, double **x_out, double **b_out) {
    FcErr err = {0};
    RtCpuProgram *cp = NULL;
    if (rt_cpu_compile(p, 2, &cp, &err) != FC_OK) { fprintf(stderr, "cpu compile: %s\n", err.msg); return NULL; }
    const IrValue *xv = ir_cval(src, src->inputs.data[0]), *wv = ir_cval(src, src->inputs.data[1]);
    int64_t nx = 1, nw = 1;
    ir_shape_numel(&xv->shape, &nx);
    ir_shape_numel(&wv->shape, &nw);
    int64_t K = wv->shape.dims[0], N = wv->shape.dims[1];
    void *in[3];
    in[0] = calloc((size_t)nx, sizeof(float));
    in[1] = calloc((size_t)nw, 2);
    in[2] = calloc((size_t)N, sizeof(float));
    double *x = calloc((size_t)nx, sizeof *x), *b = calloc((size_t)nw, sizeof *b);
    rng = 0x2545f4914f6cdd1dull;
    for (int64_t e = 0; e < nx; e++) ((float *)in[0])[e] = (float)(x[e] = (double)(float)(urand() * 4 - 2));
    double sc[1024];
    for (int64_t j = 0; j < N && src->inputs.len > 2; j++) ((float *)in[2])[j] = (float)(sc[j] = (double)(float)((urand() + 0.5) / 100));
    for (int64_t e = 0; e < nw; e++) {
        if (wv->dtype == FC_I8) {
            signed char q = (signed char)((int)(urand() * 255) - 127);
            ((signed char *)in[1])[e] = q;
            b[e] = q * sc[e % N];
        } else {   /* bf16: a float's top half */
            float f = (float)(urand() * 2 - 1);
            unsigned u;
            memcpy(&u, &f, 4);
            unsigned short h = (unsigned short)(u >> 16);
            ((unsigned short *)in[1])[e] = h;
            u = (unsigned)h << 16;
            memcpy(&f, &u, 4);
            b[e] = f;
        }
    }
    (void)K;
    const IrValue *ov = ir_cval(src, src->outputs.data[0]);
    int64_t no = 1;
    ir_shape_numel(&ov->shape, &no);
    float *out = malloc((size_t)no * sizeof *out);
    memset(out, 0xFF, (size_t)no * sizeof *out);   /* NaN: an element not written shows */
    void *outs[1] = {out};
    if (rt_cpu_run(cp, in, outs, &err) != FC_OK) {
        fprintf(stderr, "run: %s\n", err.msg);
        free(out);
        out = NULL;
    }
    rt_cpu_free(cp);
    for (int i = 0; i < 3; i++) free(in[i]);
    *x_out = x;
    *b_out = b;
    return out;
}

/* max |got - x @ b| / max |x @ b| (rows of x: its elements over K) */
static double rel_err(const float *got, const double *x, const double *b, int64_t rows, int64_t K, int64_t N) {
    double e = 0, m = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++) s += x[r * K + k] * b[k * N + j];
            double d = fabs((double)got[r * N + j] - s);
            e = isnan(d) || d > e ? (isnan(d) ? INFINITY : d) : e;
            m = fabs(s) > m ? fabs(s) : m;
        }
    return m > 0 ? e / m : e;
}

/* Lowers src with l2 and llc and checks the plan (want_panel_k rows a panel, 0: none; C in blocks
 * of want_panel_m rows, 0: all at once) and the result. */
/* Compiles text and lowers it with l2 and llc; *src the graph (NULL: failed, reported). */
static KirProgram *compile_lower(const char *what, const char *text, int64_t l2, int64_t llc, bool cpu, IrGraph **src,
                                 PassResult *res) {
    *src = compile(text);
    EXPECT(*src != NULL, "%s", what);
    if (!*src) return NULL;
    KirProgram *p = lower(*src, l2, llc, cpu, res);
    EXPECT(p != NULL, "%s", what);
    return p;
}

static void check(const char *what, const char *text, int64_t l2, int64_t llc, bool cpu, int64_t want_panel_k,
                  int64_t want_blocks, int64_t want_panel_m, int64_t want_panel_n) {
    IrGraph *src;
    PassResult res;
    KirProgram *p = compile_lower(what, text, l2, llc, cpu, &src, &res);
    if (!src) return;
    const IrValue *xv = ir_cval(src, src->inputs.data[0]), *wv = ir_cval(src, src->inputs.data[1]);
    int64_t nx = 1;
    ir_shape_numel(&xv->shape, &nx);
    int64_t K = wv->shape.dims[0], N = wv->shape.dims[1], rows = nx / K;
    int li = -1;
    const KirKernel *k = p ? product(p, &li) : NULL;
    EXPECT(k != NULL, "%s: no library product", what);
    if (k) {
        EXPECT(k->gemm.panel_k == want_panel_k && (want_panel_k == 0 || k->gemm.panel_blocks == want_blocks) &&
               k->gemm.panel_m == want_panel_m && k->gemm.panel_n == want_panel_n,
               "%s: panel_k %lld blocks %lld panel_m %lld panel_n %lld, expected %lld, %lld, %lld and %lld", what,
               (long long)k->gemm.panel_k, (long long)k->gemm.panel_blocks, (long long)k->gemm.panel_m,
               (long long)k->gemm.panel_n, (long long)want_panel_k, (long long)want_blocks, (long long)want_panel_m,
               (long long)want_panel_n);
        const KirKernel *op = li > 0 ? p->kernels.data[p->launches.data[li - 1].kernel] : NULL;
        if (want_panel_k > 0) {   /* the operand kernel before it writes nothing to memory */
            EXPECT(op && !op->library && op->bytes_written == 0 && strstr(op->name, "operand"), "%s: operand kernel", what);
            /* and reads the weight (its scales) once per block of C's rows */
            int64_t passes = want_panel_m > 0 ? (rows + want_panel_m - 1) / want_panel_m : 1;
            int64_t once = wv->dtype == FC_I8 ? K * N + N * 4 : K * N * 2;
            EXPECT(op && op->bytes_read == passes * once, "%s: the operand kernel reads %lld bytes, not %lld x %lld", what,
                   op ? (long long)op->bytes_read : -1LL, (long long)passes, (long long)once);
        }
        else if (cpu)   /* the f32 B is written whole, once (not once per product of a batch) */
            EXPECT(op && !op->library && op->bytes_written == K * N * 4, "%s: no panels, B written in %lld bytes, not %lld",
                   what, op ? (long long)op->bytes_written : -1LL, (long long)(K * N * 4));
        if (cpu)   /* a batch of products sharing B is one product of the batch's rows */
            EXPECT(k->gemm.batch == 1 && k->gemm.m == rows, "%s: batch %lld m %lld, expected one product of %lld rows",
                   what, (long long)k->gemm.batch, (long long)k->gemm.m, (long long)rows);
    }
    double *x = NULL, *b = NULL;
    float *got = p && cpu ? run(p, src, &x, &b) : NULL;
    if (cpu) {
        EXPECT(got != NULL, "%s: run", what);
        if (got) {
            double e = rel_err(got, x, b, rows, K, N);
            EXPECT(e <= 1e-5, "%s: relative error %g", what, e);
            /* the harness catches one element off by 1e-3 of the largest */
            float keep = got[rows * N - 1];
            double m = 0;
            for (int64_t i = 0; i < rows * N; i++) m = fabs(got[i]) > m ? fabs(got[i]) : m;
            got[rows * N - 1] = (float)(keep + 1e-3 * m);
            EXPECT(rel_err(got, x, b, rows, K, N) > 1e-5, "%s: a wrong element passed", what);
        }
    }
    free(got);
    free(x);
    free(b);
    pass_result_free(&res);
    ir_graph_free(src);
}

/* A causal product, or one whose A ends in zeros, keeps B whole (its causal or zero-tail path)
 * even where panels would fit: the product `what` of src (the first, or the last) is causal
 * (want_causal) or has a zero tail, and no panels. */
static void check_kept_whole(const char *what, const char *text, bool last, bool want_causal) {
    IrGraph *src;
    PassResult res;
    KirProgram *p = compile_lower(what, text, 4096, 1 << 20, true, &src, &res);
    if (!src) return;
    const KirKernel *k = NULL;
    for (int l = 0; p && l < p->launches.len; l++) {
        const KirKernel *kk = p->kernels.data[p->launches.data[l].kernel];
        if (kk->library && (!k || last)) k = kk;
    }
    EXPECT(k != NULL, "%s: no product", what);
    if (k)
        EXPECT(k->gemm.panel_k == 0 && (want_causal ? k->gemm.causal : k->gemm.zero_tail),
               "%s: panel_k %lld causal %d zero_tail %d", what, (long long)k->gemm.panel_k, k->gemm.causal,
               k->gemm.zero_tail);
    pass_result_free(&res);
    ir_graph_free(src);
}

/* A product whose B is a transposed weight made here (the backward's dX = dY @ w^T): B made as
 * B^T, read transposed (trans_b), in panels of B^T's columns (want_panel_k of them, all its
 * rows, want_blocks operand blocks a panel; C in blocks of want_panel_m rows); the result
 * against f64 (w [n, k] as run() fills it, transposed here). */
static void check_t(const char *what, const char *text, int64_t l2, int64_t llc, int64_t want_panel_k,
                    int64_t want_blocks, int64_t want_panel_m) {
    IrGraph *src;
    PassResult res;
    KirProgram *p = compile_lower(what, text, l2, llc, true, &src, &res);
    if (!src) return;
    const IrValue *xv = ir_cval(src, src->inputs.data[0]), *wv = ir_cval(src, src->inputs.data[1]);
    int64_t Nn = wv->shape.dims[0], K = wv->shape.dims[1], nx = 1;
    ir_shape_numel(&xv->shape, &nx);
    int64_t rows = nx / K;
    int li = -1;
    const KirKernel *k = p ? product(p, &li) : NULL;
    EXPECT(k != NULL, "%s: no library product", what);
    if (k) {
        EXPECT(k->gemm.trans_b && k->gemm.panel_k == want_panel_k && k->gemm.panel_blocks == want_blocks &&
               k->gemm.panel_m == want_panel_m && k->gemm.panel_n == 0,
               "%s: trans_b %d panel_k %lld blocks %lld panel_m %lld panel_n %lld, expected 1, %lld, %lld, %lld, 0", what,
               k->gemm.trans_b, (long long)k->gemm.panel_k, (long long)k->gemm.panel_blocks, (long long)k->gemm.panel_m,
               (long long)k->gemm.panel_n, (long long)want_panel_k, (long long)want_blocks, (long long)want_panel_m);
        const KirKernel *op = li > 0 ? p->kernels.data[p->launches.data[li - 1].kernel] : NULL;
        EXPECT(op && !op->library && op->bytes_written == 0 && strstr(op->name, "operand"), "%s: operand kernel", what);
    }
    double *x = NULL, *b = NULL;
    float *got = p ? run(p, src, &x, &b) : NULL;
    EXPECT(got != NULL, "%s: run", what);
    if (got) {
        double *bt = malloc((size_t)(K * Nn) * sizeof *bt);
        for (int64_t j = 0; j < Nn; j++)
            for (int64_t kk = 0; kk < K; kk++) bt[kk * Nn + j] = b[j * K + kk];
        double e = rel_err(got, x, bt, rows, K, Nn);
        EXPECT(e <= 1e-5, "%s: relative error %g", what, e);
        free(bt);
    }
    free(got);
    free(x);
    free(b);
    pass_result_free(&res);
    ir_graph_free(src);
}

/* check_t's block lowered where it must take no panels: B^T made whole, read transposed. */
static void check_t_none(const char *what, const char *text, int64_t l2, int64_t llc) {
    IrGraph *src;
    PassResult res;
    KirProgram *p = compile_lower(what, text, l2, llc, true, &src, &res);
    if (!src) return;
    int li = -1;
    const KirKernel *k = p ? product(p, &li) : NULL;
    EXPECT(k && k->gemm.trans_b && k->gemm.panel_k == 0, "%s: trans_b %d panel_k %lld", what, k ? k->gemm.trans_b : -1,
           k ? (long long)k->gemm.panel_k : -1LL);
    pass_result_free(&res);
    ir_graph_free(src);
}

/* With --strict-rounding the fused program's result has the eager one's bits. */
static void check_strict_bits(const char *what, const char *text, int64_t l2, int64_t llc) {
    float *got[2] = {NULL, NULL};
    int64_t no = 0;
    for (int e = 0; e < 2; e++) {
        eager = e == 1;
        IrGraph *src;
        PassResult res;
        KirProgram *p = compile_lower(what, text, l2, llc, true, &src, &res);
        eager = false;
        if (!src) return;
        double *x = NULL, *b = NULL;
        got[e] = p ? run(p, src, &x, &b) : NULL;
        ir_shape_numel(&ir_cval(src, src->outputs.data[0])->shape, &no);
        free(x);
        free(b);
        pass_result_free(&res);
        ir_graph_free(src);
    }
    EXPECT(got[0] && got[1] && memcmp(got[0], got[1], (size_t)no * sizeof(float)) == 0,
           "%s: the fused result's bits are not the eager one's", what);
    free(got[0]);
    free(got[1]);
}

/* Random shapes and caches: every plan the caches give (panels in the L2 or the LLC, blocks of C,
 * chunks of B's columns, none), each run against f64; counts the plans seen so that the sweep
 * is known to reach blocks and chunks. */
static void sweep(int cases) {
    static const int64_t l2s[] = {4096, 16384, 65536}, llcs[] = {65536, 262144, 1 << 20};
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    int blocks = 0, chunks = 0, panels = 0, none = 0;
    for (int c = 0; c < cases; c++) {
        int64_t M, K, N;
        do {   /* at most 24M multiply-adds a case; every other one tall (more than 512 rows, which
                * blocks of C need at these caches) with more than 256 rows of B (several panels) */
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            bool tall = c % 2;
            M = tall ? 513 + (int64_t)((seed >> 11) % 700) : 1 + (int64_t)((seed >> 11) % 700);
            K = tall ? 257 + (int64_t)((seed >> 23) % 350) : 1 + (int64_t)((seed >> 23) % 600);
            N = 1 + (int64_t)((seed >> 37) % (tall ? 160 : 600));
        } while (M * K * N > 24000000);
        int64_t l2 = l2s[(seed >> 50) % 3], llc = llcs[c % 2 ? 1 + (seed >> 55) % 2 : (seed >> 55) % 3];
        bool i8 = (seed >> 60) & 1;
        char text[512], what[128];
        if (i8)
            snprintf(text, sizeof text,
                     "block q(x: f32[%lld, %lld], param w: i8[%lld, %lld], param s: f32[%lld]) -> f32[%lld, %lld] {\n"
                     "    return x @ (cast(w, f32) * s)\n}\n", (long long)M, (long long)K, (long long)K, (long long)N,
                     (long long)N, (long long)M, (long long)N);
        else
            snprintf(text, sizeof text,
                     "block q(x: f32[%lld, %lld], param w: bf16[%lld, %lld]) -> f32[%lld, %lld] {\n"
                     "    return x @ cast(w, f32)\n}\n", (long long)M, (long long)K, (long long)K, (long long)N,
                     (long long)M, (long long)N);
        snprintf(what, sizeof what, "sweep %d: [%lld, %lld] @ %s[%lld, %lld], L2 %lld, LLC %lld", c, (long long)M,
                 (long long)K, i8 ? "i8" : "bf16", (long long)K, (long long)N, (long long)l2, (long long)llc);
        IrGraph *src;
        PassResult res;
        KirProgram *p = compile_lower(what, text, l2, llc, true, &src, &res);
        if (!src) continue;
        int li = -1;
        const KirKernel *k = p ? product(p, &li) : NULL;
        if (k) {
            blocks += k->gemm.panel_m > 0;
            chunks += k->gemm.panel_n > 0;
            panels += k->gemm.panel_k > 0;
            none += k->gemm.panel_k == 0;
        }
        double *x = NULL, *b = NULL;
        float *got = p ? run(p, src, &x, &b) : NULL;
        EXPECT(got != NULL, "%s: run", what);
        if (got) {
            double e = rel_err(got, x, b, M, K, N);
            EXPECT(e <= 1e-5, "%s (panel_k %lld, panel_m %lld, panel_n %lld): relative error %g", what,
                   k ? (long long)k->gemm.panel_k : -1LL, k ? (long long)k->gemm.panel_m : -1LL,
                   k ? (long long)k->gemm.panel_n : -1LL, e);
        }
        free(got);
        free(x);
        free(b);
        pass_result_free(&res);
        ir_graph_free(src);
    }
    EXPECT(blocks >= 3 && chunks >= 3 && panels >= cases / 2 && none >= 1,
           "the sweep saw %d plans with blocks of C, %d with chunks, %d with panels, %d without", blocks, chunks, panels,
           none);
    printf("test_panels: sweep of %d: %d with blocks of C, %d with chunks of B, %d with panels, %d without\n", cases,
           blocks, chunks, panels, none);
}

int main(void) {
    static const char *const i8 =
        "block q(x: f32[16, 96], param w: i8[96, 256], param s: f32[256]) -> f32[16, 256] {\n"
        "    return x @ (cast(w, f32) * s)\n}\n";
    static const char *const tall =   /* 64 rows: more than a panel of 16 */
        "block q(x: f32[64, 96], param w: i8[96, 256], param s: f32[256]) -> f32[64, 256] {\n"
        "    return x @ (cast(w, f32) * s)\n}\n";
    static const char *const batched =   /* [2, 8, 96]: the batch folds into 16 rows */
        "block q(x: f32[2, 8, 96], param w: i8[96, 256], param s: f32[256]) -> f32[2, 8, 256] {\n"
        "    return x @ (cast(w, f32) * s)\n}\n";
    static const char *const tall_batched =   /* [4, 16, 96]: 64 rows, no panels, B made once */
        "block q(x: f32[4, 16, 96], param w: bf16[96, 256]) -> f32[4, 16, 256] {\n"
        "    return x @ cast(w, f32)\n}\n";
    static const char *const taller =   /* 600 rows of 320: C in blocks of rows with a small LLC */
        "block q(x: f32[600, 320], param w: i8[320, 128], param s: f32[128]) -> f32[600, 128] {\n"
        "    return x @ (cast(w, f32) * s)\n}\n";
    static const char *const taller_batched =   /* [4, 150, 320]: 600 rows */
        "block q(x: f32[4, 150, 320], param w: bf16[320, 128]) -> f32[4, 150, 128] {\n"
        "    return x @ cast(w, f32)\n}\n";
    static const char *const wide =   /* 500 columns: in chunks with a small LLC */
        "block q(x: f32[600, 320], param w: i8[320, 500], param s: f32[500]) -> f32[600, 500] {\n"
        "    return x @ (cast(w, f32) * s)\n}\n";
    static const char *const wide_batched =   /* [4, 150, 320]: 600 rows */
        "block q(x: f32[4, 150, 320], param w: bf16[320, 500]) -> f32[4, 150, 500] {\n"
        "    return x @ cast(w, f32)\n}\n";
    static const char *const b16 =
        "block q(x: f32[16, 96], param w: bf16[96, 256]) -> f32[16, 256] {\n"
        "    return x @ cast(w, f32)\n}\n";
    /* a 4 KiB L2: panels of 2 KiB, 2 rows of 256 floats, rounded up to a block of 16 rows
     * (pw_chunk's 4096 elements) */
    const int64_t big = 32 << 20;
    check("i8, 4 KiB L2", i8, 4096, big, true, 16, 1, 0, 0);
    check("i8, 1 MiB L2", i8, 1 << 20, big, true, 96, 2, 0, 0);   /* blocks of 64 rows */
    /* 64 rows, more than a panel of 16 in the L2: panels in the LLC, where all of B fits one */
    check("i8, more rows than an L2 panel", tall, 4096, big, true, 96, 6, 0, 0);
    /* a 64 KiB LLC: panels of its eighth would be 8 rows, under PANEL_MIN_K: none */
    check("i8, more rows than a panel", tall, 4096, 65536, true, 0, 0, 0, 0);
    check("i8, batch folded", batched, 4096, big, true, 16, 1, 0, 0);
    check("bf16, 4 KiB L2", b16, 4096, big, true, 16, 1, 0, 0);
    check("bf16, batch of more rows than a panel", tall_batched, 4096, 65536, true, 0, 0, 0, 0);
    check("i8, GPU-shaped", i8, 4096, big, false, 0, 0, 0, 0);
    /* 600 rows, a 64 KiB L2 (operand blocks of 32 rows, 4096 elements; its panels of 64 rows
     * fewer than C's), a 1 MiB LLC: panels of up to 256 rows (128 KiB), so two, made equal:
     * 160 + 160; C in blocks of up to 512 rows (256 KiB), so two, made equal (a multiple of
     * 16): 304 + 296, the weight read twice; with 512 KiB the panels would be 128 rows, under
     * PANEL_MIN_K, so B's columns go in two chunks of 64 (below), panels of 192 rows (three
     * operand blocks of 64 rows of a chunk); with 32 MiB all of B is one panel, C one block */
    check("i8, C in blocks of rows", taller, 65536, 1 << 20, true, 160, 5, 304, 0);
    check("bf16, C in blocks of rows, batch folded", taller_batched, 65536, 1 << 20, true, 160, 5, 304, 0);
    check("i8, panels too short: chunks", taller, 65536, 512 << 10, true, 192, 3, 304, 64);
    check("i8, B fits the LLC", taller, 65536, big, true, 320, 10, 0, 0);
    /* 500 columns at a 1 MiB LLC: a panel of an eighth of it would be 65 rows, under
     * PANEL_MIN_K: B's columns in chunks, of up to 128 (256 rows of them an eighth), four of them
     * made equal: 128 (125 rounded up to 16), the last 116; then as above: panels of 160 rows
     * (operand blocks of 32 rows of a chunk), C in blocks of 304 rows */
    check("i8, B's columns in chunks", wide, 65536, 1 << 20, true, 160, 5, 304, 128);
    check("bf16, B's columns in chunks, batch folded", wide_batched, 65536, 1 << 20, true, 160, 5, 304, 128);
    /* a 32 MiB LLC: all of B one panel (operand blocks of 8 rows of 500), no chunks */
    check("i8, wide B fits the LLC", wide, 65536, big, true, 320, 40, 0, 0);
    /* one head of attention whose k and v are stored in 16 bits (as at --precision bf16): their
     * widening would make B in panels (600 rows, a 1 MiB LLC), but the scores product stays
     * causal and the probabilities' product keeps its zero tail */
    static const char *const head =
        "block a(q: f32[600, 64], k: bf16[64, 600], v: bf16[600, 64]) -> f32[600, 64] {\n"
        "    p = softmax(causal_mask(q @ cast(k, f32)))\n"
        "    return p @ cast(v, f32)\n}\n";
    check_kept_whole("one head, scores", head, false, true);
    check_kept_whole("one head, p @ v", head, true, false);
    /* dX = dY @ w^T: w [200, 600] (bf16, or i8 with its scales), dY [700, 600] */
    static const char *const tb16 =
        "block q(x: f32[700, 600], param w: bf16[200, 600]) -> f32[700, 200] {\n"
        "    return x @ transpose(cast(w, f32), [1, 0])\n}\n";
    static const char *const ti8 =
        "block q(x: f32[700, 600], param w: i8[200, 600], param s: f32[600]) -> f32[700, 200] {\n"
        "    return x @ transpose(cast(w, f32) * s, [1, 0])\n}\n";
    /* a 4 KiB L2, a 2 MiB LLC: panels of up to 327 rows of B (200 x 327 floats an eighth of
     * it), so two of 300; operand blocks of 13 rows of B^T (4096 / 300), 16 a panel; C in
     * blocks of up to 640 rows, so two of 352 */
    check_t("bf16 w^T, panels of B^T", tb16, 4096, 2 << 20, 300, 16, 352);
    check_t("i8 w^T, panels of B^T", ti8, 4096, 2 << 20, 300, 16, 352);
    /* a 32 MiB LLC: all of B^T one panel (operand blocks of 6 rows of 600) */
    check_t("bf16 w^T, one panel", tb16, 4096, 32 << 20, 600, 34, 0);
    /* --strict-rounding: several panels, or chunks, would sum other parts than the eager
     * program's one call: none; one panel of all of B is the same sums, kept */
    strict = true;
    check("strict: no blocks of C", taller, 65536, 1 << 20, true, 0, 0, 0, 0);
    check("strict: no chunks", wide, 65536, 1 << 20, true, 0, 0, 0, 0);
    check_t_none("strict: no panels of B^T", tb16, 4096, 2 << 20);
    check("strict: one panel", taller, 65536, big, true, 320, 10, 0, 0);
    check_strict_bits("strict: bits, taller", taller, 65536, 1 << 20);
    check_strict_bits("strict: bits, wide", wide, 65536, 1 << 20);
    check_strict_bits("strict: bits, one panel", taller, 65536, big);
    check_strict_bits("strict: bits, L2 panels of a short C", i8, 4096, big);
    strict = false;
    sweep(48);
    if (failures) fprintf(stderr, "test_panels: %d failures\n", failures);
    else printf("test_panels: ok\n");
    return failures != 0;
}
