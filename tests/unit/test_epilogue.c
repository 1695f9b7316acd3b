/* test_epilogue.c: on the CPU a library product runs its epilogue a block of C's rows at a time,
 * while the block is in the cache (KirGemm.epi_rows, c_block; docs/cpu.md "Epilogues in the
 * cache").
 *
 * Blocks such as gelu(a @ w + b) + r, lowered for the CPU at given last-level cache sizes. The
 * test checks:
 *  - the plan: the epilogue (bias, GELU, residual) in the product's group, the launch just
 *    after the product, its blocks epi_rows rows of C; at a 32 MiB LLC C [600, 256] one block
 *    (panel_m 0), at 1 MiB three blocks of 208 rows (a quarter of the cache, equal, a multiple
 *    of 16), at 256 KiB none (blocks under 128 rows: C written whole, the epilogue after it);
 *    with C in blocks the product writes no bytes, C's buffer is one block and the epilogue
 *    reads none of C's bytes; a bf16 activation's widening made in the same blocks (A's block
 *    counted with C's: four blocks of 160 rows at 1 MiB), its kernel writing nothing to memory
 *    and reading the bf16 bytes once, the product reading no A; a narrow weight's panels (panel_m) are the epilogue's blocks too;
 *    a product whose C the block also returns writes C whole; --strict-rounding one block or
 *    none; the GPU-shaped program never;
 *  - the results of each, outputs poisoned (NaN) before the run, against the reference
 *    interpreter, with A a temporary (a softmax's rows) and the epilogue's result a temporary
 *    a row kernel reads (so that a workspace plan letting the epilogue's output share A's bytes
 *    shows: the epilogue runs between the blocks' products), and --strict-rounding's bits the
 *    eager program's;
 *  - a causal softmax's bf16 probabilities are not made in blocks for p @ v, which keeps its zero
 *    tail and the row kernel's known tails (made in blocks they were lost);
 *  - the harness fails: one output element moved by 1e-3 of the largest is caught;
 *  - a sweep of 40 random shapes (every other one tall and narrow), caches and weights (f32,
 *    bf16, i8 with scales), A an input or a softmax's rows, each against the interpreter, which
 *    must see blocks of C (a fifth of them at least), one block, and none.
 */
#include "cpu.h"
#include "frontend.h"
#include "interp.h"
#include "passes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tf_util.h"

static KirProgram *lower(const char *what, const IrGraph *g, int64_t llc, bool cpu, bool fuse, bool strict,
                         PassResult *res) {
    PassOptions po = {.fuse = fuse, .sm = 90, .library_gemm = true, .cpu = cpu, .strict_rounding = strict};
    po.host = (PassCpu){.l1d_bytes = 32768, .l2_bytes = 1 << 20, .llc_bytes = llc, .vector_bytes = 32};
    memset(res, 0, sizeof *res);
    FcErr err = {0};
    if (pass_pipeline(g, &po, res, &err) == FC_OK) return res->prog;
    EXPECT(0, "%s: pipeline: %s", what, err.msg);
    return NULL;
}

/* The program's first library product, or NULL; *li its launch. */
static const KirKernel *product(const KirProgram *p, int *li) {
    for (int l = 0; p && l < p->launches.len; l++) {
        const KirKernel *k = p->kernels.data[p->launches.data[l].kernel];
        if (k->library) {
            *li = l;
            return k;
        }
    }
    return NULL;
}

/* Runs p (compiled from g) on random inputs, outputs poisoned first; *out receives output 0 (f32,
 * malloc'd), *ref the interpreter's. False if a run failed (reported). */
static bool run_both(const char *what, const KirProgram *p, const IrGraph *g, float **out, float **ref, int64_t *no) {
    FcErr err = {0};
    RtCpuProgram *cp = NULL;
    *out = *ref = NULL;
    if (rt_cpu_compile(p, 2, &cp, &err) != FC_OK) {
        EXPECT(0, "%s: cpu compile: %s", what, err.msg);
        return false;
    }
    void **in = make_inputs(g, 0x2545f4914f6cdd1dull);
    *no = 1;
    ir_shape_numel(&ir_cval(g, g->outputs.data[0])->shape, no);
    void *got[4] = {0}, *want[4] = {0};
    for (int o = 0; o < g->outputs.len && o < 4; o++) {
        int64_t n = 1;
        ir_shape_numel(&ir_cval(g, g->outputs.data[o])->shape, &n);
        got[o] = malloc((size_t)n * sizeof(float));
        want[o] = malloc((size_t)n * sizeof(float));
        memset(got[o], 0xFF, (size_t)n * sizeof(float));   /* NaN: an element not written shows */
    }
    bool ok = rt_cpu_run(cp, in, got, &err) == FC_OK;
    EXPECT(ok, "%s: run: %s", what, err.msg);
    bool iok = rt_interp_run(g, (const void *const *)in, want, &err) == FC_OK;
    EXPECT(iok, "%s: interpreter: %s", what, err.msg);
    rt_cpu_free(cp);
    for (int i = 0; i < g->inputs.len; i++) free(in[i]);
    free(in);
    for (int o = 1; o < 4; o++) {
        free(got[o]);
        free(want[o]);
    }
    *out = got[0];
    *ref = want[0];
    return ok && iok;
}

/* Lowers text at llc for the CPU and checks the plan of its first product: the epilogue in
 * blocks of want_panel_m rows (0: C one block; -1: no epilogue run in the cache); then the
 * results against the interpreter. Returns the plan's kind: 2 blocks, 1 one block, 0 none. */
static int check(const char *what, const char *text, int64_t llc, int64_t want_panel_m, bool quiet) {
    IrGraph *g = compile(what, text);
    if (!g) return -1;
    PassResult res;
    KirProgram *p = lower(what, g, llc, true, true, false, &res);
    int li = -1, kind = -1;
    const KirKernel *k = product(p, &li);
    EXPECT(k != NULL, "%s: no library product", what);
    if (k) {
        const KirGemm *gm = &k->gemm;
        kind = gm->epi_rows == 0 ? 0 : gm->panel_m > 0 ? 2 : 1;
        if (want_panel_m >= -1)
            EXPECT(want_panel_m < 0 ? gm->epi_rows == 0 : gm->epi_rows > 0 && gm->c_block && gm->panel_m == want_panel_m,
                   "%s: epi_rows %lld c_block %d panel_m %lld, expected the epilogue %s (panel_m %lld)", what,
                   (long long)gm->epi_rows, gm->c_block, (long long)gm->panel_m, want_panel_m < 0 ? "after C" : "in blocks",
                   (long long)want_panel_m);
        if (strstr(text, "cast(x, f32)") && want_panel_m >= 0) {   /* A made in the blocks, in the cache */
            const KirKernel *ak = li > 0 ? p->kernels.data[p->launches.data[li - 1 - (gm->panel_k > 0)].kernel] : NULL;
            EXPECT(gm->a_rows > 0 && gm->panel_m % gm->a_rows == 0 && ak && !ak->library && ak->bytes_written == 0 &&
                       ak->bytes_read == gm->m * gm->k * 2 && k->bytes_read == (gm->panel_k > 0 ? 0 : gm->k * gm->n * 4),
                   "%s: a_rows %lld: A not made in the blocks (its kernel writes %lld bytes, reads %lld; the product "
                   "reads %lld)", what, (long long)gm->a_rows, ak ? (long long)ak->bytes_written : -1LL,
                   ak ? (long long)ak->bytes_read : -1LL, (long long)k->bytes_read);
        }
        if (gm->epi_rows > 0) {
            const KirLaunch *l = &p->launches.data[li];
            const KirKernel *e = li + 1 < p->launches.len ? p->kernels.data[p->launches.data[li + 1].kernel] : NULL;
            int64_t rows = gm->panel_m > 0 ? gm->panel_m : gm->m;
            EXPECT(gm->panel_m % gm->epi_rows == 0 && e && !e->library && e->grid == (gm->m + gm->epi_rows - 1) / gm->epi_rows,
                   "%s: the epilogue's blocks (%lld rows) do not tile C's (%lld)", what, (long long)gm->epi_rows,
                   (long long)gm->panel_m);
            EXPECT(k->bytes_written == 0 && p->buffers.data[l->args[2]].numel == rows * gm->n,
                   "%s: C written in %lld bytes, its buffer %lld elements, not one block of %lld x %lld in the cache",
                   what, (long long)k->bytes_written, (long long)p->buffers.data[l->args[2]].numel, (long long)rows,
                   (long long)gm->n);
            /* the epilogue reads none of C's bytes: r's and b's alone */
            EXPECT(e && e->bytes_read == (gm->m * gm->n + gm->n) * 4, "%s: the epilogue reads %lld bytes, not %lld", what,
                   e ? (long long)e->bytes_read : -1LL, (long long)((gm->m * gm->n + gm->n) * 4));
        }
    }
    float *got = NULL, *ref = NULL;
    int64_t no = 0;
    if (p && run_both(what, p, g, &got, &ref, &no)) {
        double err = rel_err(got, ref, FC_F32, no);
        EXPECT(err <= 1e-5, "%s (epi_rows %lld, panel_m %lld, panel_k %lld): relative error %g", what,
               k ? (long long)k->gemm.epi_rows : -1LL, k ? (long long)k->gemm.panel_m : -1LL,
               k ? (long long)k->gemm.panel_k : -1LL, err);
        if (!quiet) {   /* the harness catches one element off by 1e-3 of the largest */
            double big = 0;
            for (int64_t e = 0; e < no; e++) big = fabs(ref[e]) > big ? fabs(ref[e]) : big;
            got[no / 2] = (float)(got[no / 2] + 1e-3 * big);
            EXPECT(rel_err(got, ref, FC_F32, no) > 1e-5, "%s: a wrong element passed", what);
        }
    }
    free(got);
    free(ref);
    pass_result_free(&res);
    ir_graph_free(g);
    return kind;
}

/* --strict-rounding: the plan's (want_blocks: one block, else none) and the fused result's bits
 * the eager program's. */
static void check_strict(const char *what, const char *text, int64_t llc, bool want_block) {
    IrGraph *g = compile(what, text);
    if (!g) return;
    float *out[2] = {NULL, NULL}, *ref = NULL;
    int64_t no = 0;
    for (int e = 0; e < 2; e++) {
        PassResult res;
        KirProgram *p = lower(what, g, llc, true, e == 0, true, &res);
        int li = -1;
        const KirKernel *k = product(p, &li);
        if (e == 0)
            EXPECT(k && k->gemm.panel_m == 0 && (k->gemm.epi_rows > 0) == want_block, "%s: epi_rows %lld panel_m %lld",
                   what, k ? (long long)k->gemm.epi_rows : -1LL, k ? (long long)k->gemm.panel_m : -1LL);
        if (p) run_both(what, p, g, &out[e], &ref, &no);
        free(ref);
        pass_result_free(&res);
    }
    EXPECT(out[0] && out[1] && memcmp(out[0], out[1], (size_t)no * sizeof(float)) == 0,
           "%s: the fused result's bits are not the eager one's", what);
    free(out[0]);
    free(out[1]);
    ir_graph_free(g);
}

/* A causal softmax's bf16 probabilities widened for p @ v are not made in blocks: the row kernel
 * writes them widened, so that the product keeps its zero tail and knows where each row's zeros
 * start (KirGemm.tail; made in blocks, the tail was lost and p written twice). */
static void check_causal_tail(void) {
    const char *what = "one head, bf16 p";
    const char *text =
        "block h(q: bf16[512, 64], k: bf16[512, 64], v: bf16[512, 64]) -> f32[512, 64] {\n"
        "    s = causal_mask(cast(q, f32) @ transpose(cast(k, f32), [1, 0]) * 0.125)\n"
        "    p = cast(softmax(s, axis=-1), bf16)\n"
        "    return cast(p, f32) @ cast(v, f32)\n}\n";
    IrGraph *g = compile(what, text);
    if (!g) return;
    PassResult res;
    KirProgram *p = lower(what, g, 32 << 20, true, true, false, &res);
    const KirKernel *last = NULL;
    for (int l = 0; p && l < p->launches.len; l++)
        if (p->kernels.data[p->launches.data[l].kernel]->library) last = p->kernels.data[p->launches.data[l].kernel];
    EXPECT(last && last->gemm.zero_tail && last->gemm.tail.align > 0 && last->gemm.a_rows == 0,
           "%s: p @ v zero_tail %d tail %lld a_rows %lld", what, last ? last->gemm.zero_tail : -1,
           last ? (long long)last->gemm.tail.align : -1LL, last ? (long long)last->gemm.a_rows : -1LL);
    float *got = NULL, *ref = NULL;
    int64_t no = 0;
    if (p && run_both(what, p, g, &got, &ref, &no)) {
        /* p is rounded to bf16: where the f32 softmax differs from the interpreter's in its last
         * bits, a p can round to the neighbouring bf16 value (2^-8 of it) */
        double err = rel_err(got, ref, FC_F32, no);
        EXPECT(err <= 4e-3, "%s: relative error %g", what, err);
    }
    free(got);
    free(ref);
    pass_result_free(&res);
    ir_graph_free(g);
}

/* The GPU-shaped program never runs an epilogue in blocks. */
static void check_gpu(const char *what, const char *text) {
    IrGraph *g = compile(what, text);
    if (!g) return;
    PassResult res;
    KirProgram *p = lower(what, g, 1 << 20, false, true, false, &res);
    for (int l = 0; p && l < p->launches.len; l++) {
        const KirKernel *k = p->kernels.data[p->launches.data[l].kernel];
        EXPECT(!k->library || (k->gemm.epi_rows == 0 && !k->gemm.c_block), "%s: the GPU program's %s", what, k->name);
    }
    pass_result_free(&res);
    ir_graph_free(g);
}

/* The block: a_expr @ B + b, GELU, + r, with x [M, K], B of kind w (0: f32, 1: bf16, 2: i8 with
 * scales) [K, N]; `tail` what is returned of y (the epilogue's result). */
static void block_text(char *buf, size_t len, int64_t M, int64_t K, int64_t N, int w, const char *a_expr,
                       const char *tail, const char *ret_type) {
    const char *xt = strstr(a_expr, "cast(x") ? "bf16" : "f32";   /* a 16-bit activation, widened */
    static const char *const wt[] = {"f32", "bf16", "i8"};
    static const char *const bexpr[] = {"w", "cast(w, f32)", "(cast(w, f32) * s)"};
    char sdecl[64] = "";
    if (w == 2) snprintf(sdecl, sizeof sdecl, ", param s: f32[%lld]", (long long)N);
    snprintf(buf, len,
             "block e(x: %s[%lld, %lld], r: f32[%lld, %lld], param w: %s[%lld, %lld], param b: f32[%lld]%s) -> %s {\n"
             "    a = %s\n"
             "    y = gelu(a @ %s + b) + r\n"
             "    return %s\n}\n",
             xt, (long long)M, (long long)K, (long long)M, (long long)N, wt[w], (long long)K, (long long)N, (long long)N, sdecl,
             ret_type, a_expr, bexpr[w], tail);
}

static void sweep(int cases) {
    static const int64_t llcs[] = {65536, 262144, 1 << 20, 32 << 20};
    uint64_t seed = 0x243f6a8885a308d3ull;
    int seen[3] = {0, 0, 0};
    for (int c = 0; c < cases; c++) {
        int64_t M, K, N;
        do {   /* every other one tall and narrow: blocks of C at the smaller caches */
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            bool tall = c % 2;
            M = tall ? 513 + (int64_t)((seed >> 11) % 1000) : 1 + (int64_t)((seed >> 11) % 900);
            K = 1 + (int64_t)((seed >> 23) % 300);
            N = tall ? 16 + (int64_t)((seed >> 35) % 240) : 1 + (int64_t)((seed >> 35) % 700);
        } while (M * K * N > 30000000);
        int w = (int)((seed >> 50) % 3);
        int64_t llc = llcs[(seed >> 55) % 4];
        char text[1024], what[160], ret[64];
        snprintf(ret, sizeof ret, "f32[%lld, %lld]", (long long)M, (long long)N);
        static const char *const as[] = {"x", "softmax(x, axis=-1)", "cast(x, f32)"};
        block_text(text, sizeof text, M, K, N, w, as[(seed >> 60) % 3], "y", ret);
        snprintf(what, sizeof what, "sweep %d: [%lld, %lld] @ %s[%lld, %lld], LLC %lld", c, (long long)M, (long long)K,
                 w == 0 ? "f32" : w == 1 ? "bf16" : "i8", (long long)K, (long long)N, (long long)llc);
        int kind = check(what, text, llc, -2, true);
        if (kind >= 0) seen[kind]++;
    }
    EXPECT(seen[0] >= 2 && seen[1] >= 2 && seen[2] >= cases / 5, "the sweep saw %d plans with blocks of C, %d of one block, %d without",
           seen[2], seen[1], seen[0]);
    printf("test_epilogue: sweep of %d: %d with blocks of C, %d of one block, %d without\n", cases, seen[2], seen[1],
           seen[0]);
}

int main(void) {
    char text[1024];
    /* f32 weights, C [600, 256]: one block at 32 MiB, three of 208 rows at 1 MiB (256 rows a
     * quarter of it, equal), none at 256 KiB (64-row blocks) */
    block_text(text, sizeof text, 600, 96, 256, 0, "x", "y", "f32[600, 256]");
    check("f32, 32 MiB", text, 32 << 20, 0, false);
    check("f32, 1 MiB", text, 1 << 20, 208, false);
    check("f32, 256 KiB", text, 256 << 10, -1, false);
    check_gpu("f32", text);
    /* A a temporary (a softmax's rows), y a temporary another product reads: y's buffer must
     * not share A's bytes, though A is last read, and y first written, by the product's launch
     * and its epilogue's, which run interleaved */
    block_text(text, sizeof text, 600, 96, 256, 0, "softmax(x, axis=-1)", "y @ transpose(w, [1, 0])", "f32[600, 96]");
    check("temporaries, 1 MiB", text, 1 << 20, 208, false);
    /* an i8 weight at 4 KiB of L2... here 1 MiB of L2 holds B: one panel; a tall C at 256 KiB of
     * LLC takes B's panels in the LLC with C in blocks, which the epilogue's are */
    block_text(text, sizeof text, 600, 320, 128, 2, "x", "y", "f32[600, 128]");
    check("i8, 32 MiB", text, 32 << 20, 0, false);
    block_text(text, sizeof text, 600, 96, 256, 1, "x", "y", "f32[600, 256]");
    check("bf16, 1 MiB", text, 1 << 20, 208, false);
    /* a bf16 activation widened for the product: A made in the blocks too (A's block and C's
     * in a quarter of the cache: at 1 MiB 176 rows of 96 + 256 f32, four blocks of 160) */
    block_text(text, sizeof text, 600, 96, 256, 0, "cast(x, f32)", "y", "f32[600, 256]");
    check("bf16 A, 1 MiB", text, 1 << 20, 160, false);
    check("bf16 A, 32 MiB", text, 32 << 20, 0, false);
    /* C returned too: written whole, the epilogue after it */
    snprintf(text, sizeof text,
             "block e(x: f32[600, 96], r: f32[600, 256], param w: f32[96, 256], param b: f32[256]) -> "
             "f32[600, 256], f32[600, 256] {\n"
             "    c = x @ w\n"
             "    return gelu(c + b) + r, c\n}\n");
    check("C returned", text, 1 << 20, -1, false);
    /* --strict-rounding: one block where C fits a quarter of the cache, else none; eager's bits */
    block_text(text, sizeof text, 600, 96, 256, 0, "x", "y", "f32[600, 256]");
    check_strict("strict, 32 MiB", text, 32 << 20, true);
    check_strict("strict, 1 MiB", text, 1 << 20, false);
    check_causal_tail();
    sweep(40);
    if (failures) fprintf(stderr, "test_epilogue: %d failures\n", failures);
    else printf("test_epilogue: ok\n");
    return failures != 0;
}
