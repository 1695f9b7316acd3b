/* test_cpu_pointwise.c: three things the CPU's pointwise kernels do (docs/cpu.md "Interleaved
 * vector math", docs/passes.md "pointwise" and "pipeline").
 *
 *  - Interleaving: a pointwise kernel's vector loop whose body calls inline vector math (exp,
 *    tanh, ndtr, sin, ...) carries llvm.loop.interleave.count 4, in the one-element loop and in
 *    the paired loop of 16-bit values; none for a loop without such math (x * 2 + 1), a row
 *    kernel's loops (layernorm then GELU), a short row (C = 40 or 48 at 8 lanes: the four
 *    copies' step leaves scalar work), or a GPU-shaped program's; a long row that is no
 *    multiple of the step (C = 1100) still gets it. At AVX-512 the paired loop is widened to
 *    16 words and keeps one copy, an f32 loop takes four. The interleaved kernels' results, outputs
 *    poisoned with NaN first, against the reference interpreter.
 *  - One loop for outputs of the same rows: a value returned as [4, 16, 256] and as its
 *    [64, 256] reshape (cast to bf16) is computed in one thread loop, not one a shape (the
 *    backward GELU of a 16-bit MLP computed its chain twice); results of both outputs checked.
 *  - A transposed 16-bit A widened in its own order (passes/libgemm.c): for transpose(x) @ w of
 *    bf16 operands the BLAS reads an f32 copy of x with its transpose flag (trans_a), the copy
 *    made by a kernel whose thread loop reads x at consecutive elements; the GPU-shaped program
 *    keeps the cast over the transpose (cuBLASLt reads the bf16 operands itself: ab16). Results
 *    against the interpreter, for A's widening alone and under a GELU's recompute.
 *  - The harness fails: a result moved by 1e-3 of the largest element is caught.
 *  - kir_round of a value rounded to the same type already returns it (no double rounding).
 */
#include "codegen.h"
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

static int vector_bytes = 32;   /* the host's widest vector the programs are lowered for */

static KirProgram *lower(const char *what, const IrGraph *g, bool cpu, PassResult *res) {
    PassOptions po = {.fuse = true, .sm = 90, .library_gemm = true, .cpu = cpu};
    po.host = (PassCpu){.l1d_bytes = 32768, .l2_bytes = 1 << 20, .llc_bytes = 32 << 20, .vector_bytes = vector_bytes};
    memset(res, 0, sizeof *res);
    FcErr err = {0};
    if (pass_pipeline(g, &po, res, &err) == FC_OK) return res->prog;
    EXPECT(0, "%s: pipeline: %s", what, err.msg);
    return NULL;
}

/* How many loops of p's LLVM IR ask for four interleaved copies; *wide: how many ask for a
 * vector of 16 (NULL: not counted). */
static int interleaved_loops_wide(const char *what, const KirProgram *p, int *wide) {
    StrBuf out = {0};
    FcErr err = {0};
    int n = -1;
    if (cg_llvm_text(p, &out, &err) == FC_OK) {
        n = 0;
        for (const char *s = out.data; (s = strstr(s, "!\"llvm.loop.interleave.count\", i32 4}")) != NULL; s++) n++;
        if (wide) *wide = 0;
        for (const char *s = out.data; wide && (s = strstr(s, "!\"llvm.loop.vectorize.width\", i32 16}")) != NULL; s++)
            ++*wide;
    } else {
        EXPECT(0, "%s: llvm: %s", what, err.msg);
    }
    sb_free(&out);
    return n;
}
static int interleaved_loops(const char *what, const KirProgram *p) { return interleaved_loops_wide(what, p, NULL); }

/* Runs p on random inputs (outputs poisoned with NaN first) and the interpreter on g; checks
 * every output within tol of the interpreter's (relative to the largest element; a bf16
 * output within 2^-7). With
 * `spoil`, output 0 is moved by 1e-3 of its largest element first and the check must fail. */
static void run_check(const char *what, const KirProgram *p, const IrGraph *g, double tol, bool spoil) {
    FcErr err = {0};
    RtCpuProgram *cp = NULL;
    if (rt_cpu_compile(p, 2, &cp, &err) != FC_OK) {
        EXPECT(0, "%s: cpu compile: %s", what, err.msg);
        return;
    }
    void **in = make_inputs(g, 0x2545f4914f6cdd1dull);
    int no = g->outputs.len;
    void *got[4] = {0}, *want[4] = {0};
    int64_t n[4] = {0};
    for (int o = 0; o < no && o < 4; o++) {
        const IrValue *y = ir_cval(g, g->outputs.data[o]);
        n[o] = 1;
        ir_shape_numel(&y->shape, &n[o]);
        got[o] = malloc((size_t)n[o] * 4);
        want[o] = malloc((size_t)n[o] * 4);
        memset(got[o], 0xFF, (size_t)n[o] * 4);   /* NaN: an element not written shows */
    }
    bool ok = rt_cpu_run(cp, in, got, &err) == FC_OK;
    EXPECT(ok, "%s: run: %s", what, err.msg);
    bool iok = rt_interp_run(g, (const void *const *)in, want, &err) == FC_OK;
    EXPECT(iok, "%s: interpreter: %s", what, err.msg);
    for (int o = 0; ok && iok && o < no && o < 4; o++) {
        FcDtype t = ir_cval(g, g->outputs.data[o])->dtype;
        if (spoil && o == 0) {   /* the harness: one element moved by 1e-3 of the largest */
            float big = 0;
            for (int64_t e = 0; e < n[0]; e++)
                if (fabsf(((float *)got[0])[e]) > big) big = fabsf(((float *)got[0])[e]);
            ((float *)got[0])[n[0] / 2] += 1e-3f * big;
        }
        /* bf16: two of its units in the last place (2^-8 each, relative; the two programs may
         * round f32 values a few f32 ulps apart to neighbouring bf16 values) */
        double bound = t == FC_BF16 ? 0x1p-7 : tol;
        double r = rel_err(got[o], want[o], t, n[o]);
        if (spoil && o == 0) EXPECT(r > bound, "%s: the harness did not see a moved element (error %g)", what, r);
        else EXPECT(r <= bound, "%s: output %d off the interpreter's by %g of its largest element (bound %g)", what, o, r, bound);
    }
    rt_cpu_free(cp);
    for (int i = 0; i < g->inputs.len; i++) free(in[i]);
    free(in);
    for (int o = 0; o < 4; o++) {
        free(got[o]);
        free(want[o]);
    }
}

/* The interleave plans: text lowered for the CPU has `want` interleaved loops (-1: at least
 * one); then its results. */
static void interleave(const char *what, const char *text, int want, double tol) {
    IrGraph *g = compile(what, text);
    if (!g) return;
    PassResult res;
    KirProgram *p = lower(what, g, true, &res);
    if (p) {
        int n = interleaved_loops(what, p);
        EXPECT(want < 0 ? n > 0 : n == want, "%s: %d interleaved loops, expected %s%d", what, n, want < 0 ? "some, not " : "",
               want < 0 ? 0 : want);
        if (tol > 0) run_check(what, p, g, tol, false);
    }
    pass_result_free(&res);
    ir_graph_free(g);
}

static void test_interleave(void) {
    interleave("exact gelu", "block b(x: f32[64, 1024]) -> f32[64, 1024] { return gelu(x) }", 1, 2e-6);
    interleave("tanh gelu, bf16 pairs",
               "block b(x: bf16[64, 1024]) -> bf16[64, 1024] { return gelu(x, approx=\"tanh\") }", 1, 2e-6);
    interleave("sin and exp, a long row no multiple of the step",
               "block b(x: f32[16, 1100], y: f32[16, 1100]) -> f32[16, 1100] { return sin(x) * exp(y) }", 1, 2e-6);
    interleave("silu, no multiple of the step but 32 of them",
               "block b(x: f32[8, 2056]) -> f32[8, 2056] { return x * sigmoid(x) }", 1, 2e-6);
    interleave("no vector math", "block b(x: f32[64, 1024]) -> f32[64, 1024] { return x * 2.0 + 1.0 }", 0, 0);
    interleave("a short row", "block b(x: f32[64, 40]) -> f32[64, 40] { return gelu(x) }", 0, 2e-6);
    interleave("a short row, 48", "block b(x: f32[64, 48]) -> f32[64, 48] { return tanh(x) }", 0, 2e-6);
    interleave("a row kernel",
               "block b(x: f32[64, 1024], g: f32[1024], c: f32[1024]) -> f32[64, 1024] {\n"
               "    return gelu(layernorm(x, g, c, eps=1e-5))\n}",
               0, 0);
    /* AVX-512: the paired loop is widened to 16 words and keeps one copy; an f32 loop (in ymm)
     * takes four */
    vector_bytes = 64;
    const char *v4[2] = {"block b(x: bf16[64, 1024]) -> bf16[64, 1024] { return gelu(x) }",
                         "block b(x: f32[64, 1024]) -> f32[64, 1024] { return gelu(x) }"};
    for (int i = 0; i < 2; i++) {
        IrGraph *g4 = compile("avx-512", v4[i]);
        if (!g4) continue;
        PassResult res;
        KirProgram *p = lower("avx-512", g4, true, &res);
        int wide = -1, n = p ? interleaved_loops_wide("avx-512", p, &wide) : -1;
        EXPECT(i == 0 ? n == 0 && wide == 1 : n == 1 && wide == 0, "AVX-512, %s: %d interleaved loops, %d of 16 words",
               i == 0 ? "bf16 pairs" : "f32", n, wide);
        pass_result_free(&res);
        ir_graph_free(g4);
    }
    vector_bytes = 32;
    /* the GPU-shaped program (the emulation harness's, or a CPU without the row schedule) */
    IrGraph *g = compile("gpu", "block b(x: f32[64, 1024]) -> f32[64, 1024] { return gelu(x) }");
    if (g) {
        PassResult res;
        KirProgram *p = lower("gpu", g, false, &res);
        if (p) EXPECT(interleaved_loops("gpu", p) == 0, "the GPU-shaped program's loops are interleaved");
        pass_result_free(&res);
        ir_graph_free(g);
    }
}

/* The thread loops of kernel k (KS_FOR with KIR_LOOP_THREADS, anywhere in its body). */
static int thread_loops(const KirKernel *k) {
    int n = 0;
    for (int s = 0; s < k->stmts.len; s++)
        n += k->stmts.data[s].kind == KS_FOR && k->stmts.data[s].loop == KIR_LOOP_THREADS;
    return n;
}

static void test_one_loop(void) {
    const char *what = "a value and its reshape";
    IrGraph *g = compile(what, "block b(x: f32[4, 16, 256], y: f32[4, 16, 256]) -> f32[4, 16, 256], bf16[64, 256] {\n"
                               "    u = gelu(x) * y\n"
                               "    return u, cast(reshape(u, [64, 256]), bf16)\n}");
    if (!g) return;
    PassResult res;
    KirProgram *p = lower(what, g, true, &res);
    if (p) {
        EXPECT(p->kernels.len == 1, "%s: %d kernels, expected one", what, p->kernels.len);
        if (p->kernels.len == 1)
            EXPECT(thread_loops(p->kernels.data[0]) == 1, "%s: %d thread loops, expected one for both outputs", what,
                   thread_loops(p->kernels.data[0]));
        run_check(what, p, g, 2e-6, false);
        run_check("the harness", p, g, 2e-6, true);
    }
    pass_result_free(&res);
    ir_graph_free(g);
}

/* p's first library product, or NULL */
static const KirKernel *product(const KirProgram *p) {
    for (int l = 0; p && l < p->launches.len; l++) {
        const KirKernel *k = p->kernels.data[p->launches.data[l].kernel];
        if (k->library) return k;
    }
    return NULL;
}

/* Does some store of kernel k write a param at the loop variable of a thread loop, its load of
 * param `from` at an index that is not (a strided read)? Reports the pattern of A's copy. */
static bool reads_strided(const KirKernel *k) {
    for (int e = 0; e < k->exprs.len; e++) {
        const KirExpr *x = &k->exprs.data[e];
        if (x->kind != KE_LOAD) continue;
        /* x's index: add(mul(..., C), v) with v a thread loop's var reads consecutive elements;
         * anything with the thread variable multiplied reads a column */
        const KirExpr *ix = x->a >= 0 ? &k->exprs.data[x->a] : NULL;
        if (!ix) continue;
        for (int s = 0; s < k->stmts.len; s++) {
            const KirStmt *st = &k->stmts.data[s];
            if (st->kind != KS_FOR || st->loop != KIR_LOOP_THREADS) continue;
            /* a mul whose operand is the thread variable, under the index */
            for (int j = 0; j < k->exprs.len; j++) {
                const KirExpr *m = &k->exprs.data[j];
                if (m->kind != KE_BINARY || (m->op != KB_MUL && m->op != KB_DIV && m->op != KB_REM)) continue;
                const KirExpr *a = m->a >= 0 ? &k->exprs.data[m->a] : NULL, *b = m->b >= 0 ? &k->exprs.data[m->b] : NULL;
                bool tv = (a && a->kind == KE_VAR && a->ref == st->var) || (b && b->kind == KE_VAR && b->ref == st->var);
                if (!tv) continue;
                /* is m under x's index? */
                int stack[64], sp = 0;
                stack[sp++] = x->a;
                while (sp > 0) {
                    int id = stack[--sp];
                    if (id == j) return true;
                    const KirExpr *y = &k->exprs.data[id];
                    int ops[3] = {y->a, y->b, y->c};
                    for (int q = 0; q < 3; q++)
                        if (ops[q] >= 0 && ops[q] < id && sp < 64) stack[sp++] = ops[q];
                }
            }
        }
    }
    return false;
}

static void transposed_a(const char *what, const char *text) {
    IrGraph *g = compile(what, text);
    if (!g) return;
    PassResult res;
    KirProgram *p = lower(what, g, true, &res);
    const KirKernel *mm = product(p);
    EXPECT(mm != NULL, "%s: no library product", what);
    if (mm) EXPECT(mm->gemm.trans_a && !mm->gemm.ab16, "%s: trans_a %d ab16 %d: the BLAS does not read A transposed", what,
                   mm->gemm.trans_a, mm->gemm.ab16);
    for (int i = 0; p && i < p->kernels.len; i++) {
        const KirKernel *k = p->kernels.data[i];
        if (!k->library) EXPECT(!reads_strided(k), "%s: kernel %s reads a column (A made in A's order)", what, k->name);
    }
    if (p) run_check(what, p, g, 2e-6, false);
    pass_result_free(&res);
    /* the GPU's library reads the 16-bit operands itself: the cast stays on top of the transpose */
    p = lower(what, g, false, &res);
    mm = product(p);
    if (mm) EXPECT(mm->gemm.ab16 && mm->gemm.trans_a, "%s, GPU: ab16 %d trans_a %d", what, mm->gemm.ab16, mm->gemm.trans_a);
    pass_result_free(&res);
    ir_graph_free(g);
}

static void test_transposed_a(void) {
    transposed_a("A = x^T", "block b(x: bf16[256, 96], w: bf16[256, 64]) -> bf16[96, 64] { return transpose(x) @ w }");
    transposed_a("A = gelu(u)^T",
                 "block b(u: bf16[128, 96], w: bf16[128, 64]) -> bf16[96, 64], bf16[128, 96] {\n"
                 "    h = gelu(u, approx=\"tanh\")\n    return transpose(h) @ w, h\n}");
}

/* kir_round is idempotent: a value rounded to a type already is not rounded again (the
 * backward GELU of a 16-bit MLP stored round_bf16(round_bf16(x)) for its widened copy) */
static void test_round_fold(void) {
    KirProgram *p = kir_program_new("r");
    KirKernel *k = kir_kernel_new(p, "k0_r", 1, 1);
    int x = kir_load(k, kir_param(k, FC_F32, 4, false), kir_const_i(k, KT_I64, 0));
    int r = kir_round(k, FC_BF16, x);
    EXPECT(r != x && kir_round(k, FC_BF16, r) == r, "round_bf16(round_bf16(x)) not folded");
    int h = kir_round(k, FC_F16, r);
    EXPECT(h != r && k->exprs.data[h].kind == KE_ROUND, "round_f16(round_bf16(x)) folded: another type");
    kir_program_free(p);
}

int main(void) {
    test_round_fold();
    test_interleave();
    test_one_loop();
    test_transposed_a();
    if (failures) fprintf(stderr, "test_cpu_pointwise: %d failures\n", failures);
    else printf("test_cpu_pointwise: ok\n");
    return failures != 0;
}
