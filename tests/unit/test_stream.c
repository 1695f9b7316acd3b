/* test_stream.c: streaming (non-temporal) stores of the CPU backend (KirParam.stream,
 * docs/cpu.md "Non-temporal stores").
 *
 * The lowering marks the written-only params of a CPU kernel `stream` when the kernel writes
 * more than half the last-level cache (PassOptions.host.llc_bytes) or reads and writes more
 * than all of it. Here the cache is set to 4 KiB so that small blocks stream. For each block the test checks:
 *  - the kernel IR marks exactly the written-only params of the kernels over the threshold,
 *    and none with the cache unknown (llc_bytes = 0) or in the GPU-shaped program;
 *  - the JIT made some stores non-temporal (x86-64; where rows are 64-byte multiples) and none
 *    without stream params;
 *  - the acceptance block at full size on a 32 MiB LLC streams both fused outputs and every
 *    eager kernel's output; a softmax's output streams with 32-byte vectors (its exp is not in
 *    the loop that stores), a loop that stores and computes a tanh does not;
 *  - results are identical, bit for bit, with and without streaming, with outputs 64-byte
 *    aligned (the streaming copy of each kernel runs) and 16 bytes off (the plain copy runs);
 *    outputs are poisoned (NaN) before every run, inputs are seeded random values.
 */
#include "cpu.h"
#include "frontend.h"
#include "passes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int cur;   /* the block being tested */

static const char *const blocks[] = {
    /* residual + layernorm + bias + gelu, two outputs: one row kernel */
    "dim N = 37, C = 96\n"
    "block f(x: f32[N, C], y: f32[N, C], param g: f32[C], param b: f32[C], param bias: f32[C]) -> f32[N, C], f32[N, C] {\n"
    "    r = x + y\n"
    "    return r, gelu(layernorm(r, g, b, eps=1e-5) + bias)\n}\n",
    /* pointwise with a broadcast, a softmax and a reduction to a small output */
    "dim B = 3, T = 29, C = 40\n"
    "block h(x: f32[B, T, C], w: f32[C]) -> f32[B, T, C], f32[B, T, C], f32[B, T] {\n"
    "    y = tanh(x * w) + x\n"
    "    return y, softmax(y, axis=2), sum(y, axis=2)\n}\n",
    /* f64 rows of an odd width: no vector store is 64-byte aligned, so nothing streams (the
     * backend leaves under-aligned stores alone) but results must still agree */
    "dim N = 50, C = 33\n"
    "block d(x: f64[N, C]) -> f64[N, C] {\n    return exp(x) * 0.5 + x\n}\n",
};

static uint64_t rng = 0x853c49e6748fea9bull;
static double urand(void) {
    rng ^= rng >> 12; rng ^= rng << 25; rng ^= rng >> 27;
    return (double)((rng * 0x2545f4914f6cdd1dull) >> 11) * (1.0 / 9007199254740992.0);
}

static KirProgram *lower(const IrGraph *src, int64_t llc, bool cpu, PassResult *res) {
    PassOptions po = {.fuse = true, .sm = 90, .library_gemm = true, .cpu = cpu};
    po.host = (PassCpu){.l1d_bytes = 32768, .l2_bytes = 1 << 20, .llc_bytes = llc, .vector_bytes = 64};
    FcErr err = {0};
    memset(res, 0, sizeof *res);
    if (pass_pipeline(src, &po, res, &err) != FC_OK) {
        fprintf(stderr, "pipeline: %s\n", err.msg);
        return NULL;
    }
    return res->prog;
}

static int count_stream(const KirProgram *p, bool *bad) {
    int n = 0;
    for (int i = 0; i < p->kernels.len; i++) {
        const KirKernel *k = p->kernels.data[i];
        bool big = k->bytes_written > 2048 || k->bytes_read + k->bytes_written > 4096;
        for (int j = 0; j < k->params.len; j++) {
            const KirParam *q = &k->params.data[j];
            bool read = false;
            for (int e = 0; e < k->exprs.len; e++) read = read || (k->exprs.data[e].kind == KE_LOAD && k->exprs.data[e].ref == j);
            if (q->stream) n++;
            if (q->stream != (big && q->written && !read && !k->library)) *bad = true;
        }
    }
    return n;
}

/* Runs p with outputs `off` bytes past a 64-byte boundary; returns the outputs (malloc'd). */
static char **run(const KirProgram *p, const IrGraph *src, size_t off, int *nt_stores) {
    FcErr err = {0};
    RtCpuProgram *cp = NULL;
    if (rt_cpu_compile(p, 2, &cp, &err) != FC_OK) { fprintf(stderr, "compile: %s\n", err.msg); return NULL; }
    *nt_stores = rt_cpu_stream_stores(cp);
    int ni = src->inputs.len, no = src->outputs.len;
    void *in[8], *out[8], *raw[8];
    char **res = calloc((size_t)no, sizeof *res);
    for (int i = 0; i < ni; i++) {
        const IrValue *x = ir_cval(src, src->inputs.data[i]);
        int64_t n = 1;
        ir_shape_numel(&x->shape, &n);
        size_t es = fc_dtype_size(x->dtype);
        in[i] = aligned_alloc(64, ((size_t)n * es + 63) / 64 * 64);
        uint64_t save = rng;
        rng = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);   /* the same inputs in every run */
        for (int64_t e = 0; e < n; e++) {
            double v = urand() * 4.0 - 2.0;
            if (v == 0.0) v = 0.25;
            if (x->dtype == FC_F64) ((double *)in[i])[e] = v;
            else ((float *)in[i])[e] = (float)v;
        }
        rng = save;
    }
    size_t bytes[8];
    for (int j = 0; j < no; j++) {
        const IrValue *x = ir_cval(src, src->outputs.data[j]);
        int64_t n = 1;
        ir_shape_numel(&x->shape, &n);
        bytes[j] = (size_t)n * fc_dtype_size(x->dtype);
        raw[j] = aligned_alloc(64, (bytes[j] + off + 63) / 64 * 64);
        out[j] = (char *)raw[j] + off;
        memset(out[j], 0xFF, bytes[j]);   /* NaN in every float lane */
    }
    FcStatus s = rt_cpu_run(cp, in, out, &err);
    if (s != FC_OK) fprintf(stderr, "run: %s\n", err.msg);
    for (int j = 0; j < no; j++) {
        res[j] = malloc(bytes[j] + 8);
        memcpy(res[j], out[j], bytes[j]);
        memcpy(res[j] + bytes[j], &bytes[j], sizeof bytes[j]);   /* remember the size after the data */
        free(raw[j]);
    }
    for (int i = 0; i < ni; i++) free(in[i]);
    rt_cpu_free(cp);
    if (s != FC_OK) { for (int j = 0; j < no; j++) free(res[j]); free(res); return NULL; }
    return res;
}

static size_t out_bytes(const IrGraph *src, int j) {
    const IrValue *x = ir_cval(src, src->outputs.data[j]);
    int64_t n = 1;
    ir_shape_numel(&x->shape, &n);
    return (size_t)n * fc_dtype_size(x->dtype);
}

static void test_block(const char *text) {
    IrGraph *src = NULL;
    StrBuf diags = {0};
    FcErr err = {0};
    FeOptions fo = {0};
    EXPECT(fe_compile(text, strlen(text), "t.tf", &fo, &src, &diags, &err) == FC_OK, "block %d", cur);
    sb_free(&diags);
    if (!src) return;
    PassResult rs, rp, rg;
    KirProgram *ps = lower(src, 4096, true, &rs);      /* streams: over 2 KiB written or 4 KiB in all */
    KirProgram *pp = lower(src, 0, true, &rp);         /* cache unknown: never */
    KirProgram *pg = lower(src, 4096, false, &rg);     /* GPU-shaped: never */
    EXPECT(ps && pp && pg, "block %d", cur);
    if (ps && pp && pg) {
        bool bad = false;
        EXPECT(count_stream(ps, &bad) > 0, "block %d", cur);
        EXPECT(!bad, "block %d", cur);
        EXPECT(count_stream(pp, &bad) == 0, "block %d", cur);
        EXPECT(count_stream(pg, &bad) == 0, "block %d", cur);
        StrBuf kir = {0};
        kir_print_program(ps, &kir);
        EXPECT(kir.data && strstr(kir.data, " out stream\n"), "block %d", cur);
        sb_free(&kir);

        int nt_plain = -1, nt_a = -1, nt_u = -1;
        char **plain = run(pp, src, 0, &nt_plain);
        char **aligned = run(ps, src, 0, &nt_a);
        char **unaligned = run(ps, src, 16, &nt_u);
        EXPECT(plain && aligned && unaligned, "block %d", cur);
        EXPECT(nt_plain == 0, "block %d", cur);
#if defined(__x86_64__)
        if (cur < 2) EXPECT(nt_a > 0, "block %d", cur);
#endif
        for (int j = 0; plain && aligned && unaligned && j < src->outputs.len; j++) {
            size_t n = out_bytes(src, j);
            EXPECT(memcmp(plain[j], aligned[j], n) == 0, "block %d", cur);
            EXPECT(memcmp(plain[j], unaligned[j], n) == 0, "block %d", cur);
            /* every output written (no NaN left from the poison) */
            bool nan = false;
            const IrValue *x = ir_cval(src, src->outputs.data[j]);
            for (size_t e = 0; e < n / fc_dtype_size(x->dtype); e++)
                nan = nan || (x->dtype == FC_F64 ? isnan(((double *)aligned[j])[e]) : isnan(((float *)aligned[j])[e]));
            EXPECT(!nan, "block %d", cur);
        }
        for (int j = 0; j < src->outputs.len; j++) {
            if (plain) free(plain[j]);
            if (aligned) free(aligned[j]);
            if (unaligned) free(unaligned[j]);
        }
        free(plain); free(aligned); free(unaligned);
    }
    pass_result_free(&rs);
    pass_result_free(&rp);
    pass_result_free(&rg);
    ir_graph_free(src);
}

/* The block of source text src, or NULL (a failure counted) */
static IrGraph *compile_src(const char *src) {
    IrGraph *g = NULL;
    StrBuf diags = {0};
    FcErr err = {0};
    FeOptions fo = {0};
    EXPECT(fe_compile(src, strlen(src), "t.tf", &fo, &g, &diags, &err) == FC_OK, "compile: %s", err.msg);
    sb_free(&diags);
    return g;
}

/* The acceptance block at full size on a 32 MiB LLC (this machine's): the fused kernel writes
 * 64 MiB and streams both outputs; eager, each of the four kernels writes 32 MiB and streams.
 * (At bf16 with a 16 MiB LLC, the same bytes over the threshold; on a 32 MiB LLC each eager
 * kernel writes 16 MiB, half the cache, but reads and writes 48 MiB or 32 MiB and a bit.) Not
 * where a vector store is less than a line and the kernel computes a transcendental
 * (launch_streams in passes/lower.c): with 32-byte vectors (AVX2) at f32, or at bf16, the fused
 * kernel (exact GELU) and the eager gelu stream nothing, the eager add, layernorm and add still
 * do. */
static void test_full_size(int vector_bytes, FcDtype prec, int64_t llc, int want_fused, int want_eager) {
    static const char *src =
        "dim N = 8192, C = 1024\n"
        "block f(x: f32[N, C], y: f32[N, C], param g: f32[C], param b: f32[C], param bias: f32[C]) -> f32[N, C], f32[N, C] {\n"
        "    r = x + y\n"
        "    return r, gelu(layernorm(r, g, b, eps=1e-5) + bias)\n}\n";
    IrGraph *g = compile_src(src), *low = NULL;
    FcErr err = {0};
    if (!g) return;
    if (prec != FC_F32) {
        EXPECT(pass_precision(g, prec, false, &low, &err) == FC_OK && low, "precision: %s", err.msg);
        if (!low) { ir_graph_free(g); return; }
    }
    for (int fuse = 1; fuse >= 0; fuse--) {
        PassOptions po = {.fuse = fuse, .sm = 90, .library_gemm = true, .cpu = true};
        po.host = (PassCpu){.l1d_bytes = 32768, .l2_bytes = 1 << 20, .llc_bytes = llc, .vector_bytes = vector_bytes};
        PassResult r;
        memset(&r, 0, sizeof r);
        EXPECT(pass_pipeline(low ? low : g, &po, &r, &err) == FC_OK, "pipeline: %s", err.msg);
        int streamed = 0, kernels = 0;
        for (int i = 0; r.prog && i < r.prog->kernels.len; i++) {
            const KirKernel *k = r.prog->kernels.data[i];
            kernels++;
            for (int j = 0; j < k->params.len; j++) streamed += k->params.data[j].stream;
        }
        EXPECT(kernels == (fuse ? 1 : 4) && streamed == (fuse ? want_fused : want_eager),
               "%d-byte vectors, %s, %s: %d kernels, %d stream params", vector_bytes, fc_dtype_name(prec),
               fuse ? "fused" : "eager", kernels, streamed);
        pass_result_free(&r);
    }
    ir_graph_free(low);
    ir_graph_free(g);
}

/* Which loop computes the transcendental matters, not the kernel: a softmax's or a
 * log_softmax's output loop divides or subtracts (the exp is in the reduction before it, the
 * log of the row's sum is computed once), so with 32-byte vectors its 32 MiB output streams;
 * one that also takes a tanh of each element there (`softmax(x) * tanh(x)`) does not, and
 * with 64-byte vectors it does. (A 2-core Zen 3, 2 threads, [24576, 2048] f32: softmax
 * 35.5-37.9 ms to 29.2-31.4, log_softmax 36.0-38.1 to 30.0-33.1.) */
static void test_loop_transcendental(const char *body, int vector_bytes, int want) {
    char src[512];
    snprintf(src, sizeof src, "dim N = 8192, C = 1024\nblock f(x: f32[N, C]) -> f32[N, C] {\n    return %s\n}\n", body);
    IrGraph *g = compile_src(src);
    FcErr err = {0};
    if (!g) return;
    PassOptions po = {.fuse = true, .sm = 90, .library_gemm = true, .cpu = true};
    po.host = (PassCpu){.l1d_bytes = 32768, .l2_bytes = 1 << 20, .llc_bytes = 32 << 20, .vector_bytes = vector_bytes};
    PassResult r;
    memset(&r, 0, sizeof r);
    EXPECT(pass_pipeline(g, &po, &r, &err) == FC_OK, "pipeline: %s", err.msg);
    int streamed = 0, kernels = 0;
    for (int i = 0; r.prog && i < r.prog->kernels.len; i++, kernels++)
        for (int j = 0; j < r.prog->kernels.data[i]->params.len; j++) streamed += r.prog->kernels.data[i]->params.data[j].stream;
    EXPECT(kernels == 1 && streamed == want, "%s, %d-byte vectors: %d kernels, %d stream params (want 1 and %d)", body,
           vector_bytes, kernels, streamed, want);
    pass_result_free(&r);
    ir_graph_free(g);
}

/* the harness can fail: a corrupted result differs */
static void test_harness_fails(void) {
    char a[16] = {1, 2, 3}, b[16] = {1, 2, 3};
    b[5] ^= 1;
    EXPECT(memcmp(a, b, sizeof a) != 0, "a changed bit must be seen");
}

int main(void) {
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++) {
        cur = (int)i;
        test_block(blocks[i]);
    }
    test_full_size(64, FC_F32, 32 << 20, 2, 4);
    test_full_size(32, FC_F32, 32 << 20, 0, 3);
    test_full_size(64, FC_BF16, 16 << 20, 0, 3);   /* an eager kernel writes 16 MiB at bf16 */
    test_full_size(32, FC_BF16, 32 << 20, 0, 3);   /* ... and reads 16 or 32 MiB: over 32 in all */
    test_loop_transcendental("softmax(x, axis=-1)", 32, 1);
    test_loop_transcendental("log_softmax(x, axis=-1)", 32, 1);
    test_loop_transcendental("softmax(x, axis=-1) * tanh(x)", 32, 0);
    test_loop_transcendental("softmax(x, axis=-1) * tanh(x)", 64, 1);
    test_harness_fails();
    if (failures) fprintf(stderr, "test_stream: %d failures\n", failures);
    return failures != 0;
}
