/* test_causal.c: causal products on the CPU (KirGemm.causal, docs/cpu.md "Causal products").
 *
 * The test checks:
 *  - the closed form kir_gemm_cols_before against the sum of kir_gemm_cols, for offsets from
 *    below -m to above n;
 *  - the runtime (rt_blas_gemm_part): C prefilled with a sentinel, every element a causal
 *    product needs equals the product computed here in f64 (within 1e-5 of the largest), and
 *    every other element still holds the sentinel (the product was not computed there), for
 *    batches, offsets and part counts; a harness that would not notice a wrong element is
 *    caught (one element moved);
 *  - the plan: `softmax(causal_mask(q @ kT * s)) @ v` lowered for the CPU makes the first
 *    product causal with offset Tk - Tq (square, Tq < Tk) and not the second; masks written
 *    by hand with iota (i32 and i64, <, <=, >=, an offset, a finite fill) likewise; not when
 *    the scores are also an output, are read by a reduction or by the condition, feed the
 *    where's fill, cross a stored intermediate, go through an f8 quantization, with
 *    --strict-rounding, or in the GPU-shaped program;
 *  - a zero tail (KirGemm.zero_tail): A whose rows end in zeros (of both signs), dense, all
 *    zero or ending in a nonzero constant, B with and without an infinity in the rows left
 *    out, plain and transposed, f32 and f64, the rows' tail column given (KirGemm.tail) or
 *    scanned: C equals the full product, NaN where 0 * inf makes it one; the second product of
 *    an attention reads a zero tail, the first and the GPU's or --strict-rounding's do not; its
 *    tail column is known where a causal softmax stored its A, not otherwise;
 *  - the results of every causal plan, outputs poisoned before the run, against the reference
 *    interpreter (within 1e-5 of the largest);
 *  - causal rows (docs/cpu.md "Causal rows"): which row kernels' reductions stop at their masks
 *    and which go on past them as a loop (softmax, log_softmax with Tq < Tk, rows keeping no
 *    column, a bias after the mask, finite fills with a count, a mean, a min and two offsets),
 *    the bytes read, none for another row shape, the GPU program or --strict-rounding; the
 *    results against the interpreter on random inputs and on rows with NaNs past the
 *    diagonal, rows of -inf and rows with +inf.
 */
#include "blas.h"
#include "cpu.h"
#include "frontend.h"
#include "interp.h"
#include "passes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void) {
    rng ^= rng >> 12; rng ^= rng << 25; rng ^= rng >> 27;
    return (double)((rng * 0x2545f4914f6cdd1dull) >> 11) * (1.0 / 9007199254740992.0);
}

static void check_cols(void) {
    for (int64_t m = 1; m <= 9; m += 4)
        for (int64_t n = 1; n <= 11; n += 5)
            for (int64_t off = -m; off <= n; off++) {
                KirGemm g = {.batch = 1, .m = m, .n = n, .k = 1, .dtype = FC_F32, .causal = true, .causal_off = off};
                int64_t sum = 0;
                for (int64_t r = 0; r <= m; r++) {
                    EXPECT(kir_gemm_cols_before(&g, r) == sum, "m %lld n %lld off %lld: cols before row %lld %lld, not %lld",
                           (long long)m, (long long)n, (long long)off, (long long)r, (long long)kir_gemm_cols_before(&g, r),
                           (long long)sum);
                    if (r < m) sum += kir_gemm_cols(&g, r);
                }
            }
}

/* C[i] = A[i] @ B[i]^T ([m, k] @ [n, k]^T, as scores are), causal at off, in nparts parts. */
static void check_runtime(int64_t batch, int64_t m, int64_t n, int64_t k, int64_t off, int64_t nparts) {
    KirGemm g = {.batch = batch, .m = m, .n = n, .k = k, .stride_a = batch > 1 ? m * k : 0,
                 .stride_b = batch > 1 ? n * k : 0, .stride_c = batch > 1 ? m * n : 0, .trans_b = true,
                 .dtype = FC_F32, .causal = true, .causal_off = off};
    float *a = malloc(sizeof(float) * (size_t)(batch * m * k)), *b = malloc(sizeof(float) * (size_t)(batch * n * k));
    float *c = malloc(sizeof(float) * (size_t)(batch * m * n));
    for (int64_t e = 0; e < batch * m * k; e++) a[e] = (float)(urand() * 2 - 1);
    for (int64_t e = 0; e < batch * n * k; e++) b[e] = (float)(urand() * 2 - 1);
    const float sentinel = 1234.5f;
    for (int64_t e = 0; e < batch * m * n; e++) c[e] = sentinel;
    FcErr err = {0};
    if (rt_blas_ready((int)nparts, "test", &err) != FC_OK) {
        fprintf(stderr, "blas: %s\n", err.msg);
        EXPECT(0, "the BLAS loads");
        return;
    }
    for (int64_t p = 0; p < nparts; p++) rt_blas_gemm_part(&g, a, b, c, p, nparts);
    double worst = 0, big = 0;
    int64_t untouched = 0, needed = 0, wrote_extra = 0;
    for (int64_t i = 0; i < batch; i++)
        for (int64_t r = 0; r < m; r++)
            for (int64_t j = 0; j < n; j++) {
                float got = c[(i * m + r) * n + j];
                if (j > r + off) {   /* not needed: computed only where a panel's last row needs it */
                    untouched += got == sentinel;
                    wrote_extra += got != sentinel;
                    continue;
                }
                double s = 0;
                for (int64_t t = 0; t < k; t++) s += (double)a[(i * m + r) * k + t] * b[(i * n + j) * k + t];
                double d = fabs((double)got - s);
                worst = isnan(d) || d > worst ? (isnan(d) ? INFINITY : d) : worst;
                big = fabs(s) > big ? fabs(s) : big;
                needed++;
            }
    EXPECT(worst <= 1e-5 * big, "causal b %lld m %lld n %lld off %lld parts %lld: error %g of %g", (long long)batch,
           (long long)m, (long long)n, (long long)off, (long long)nparts, worst, big);
    EXPECT(needed == batch * kir_gemm_cols_before(&g, m), "causal: %lld needed elements", (long long)needed);
    /* the skipped elements: at most a panel (64 rows) beyond the needed ones a row, and most of
     * the masked triangle left alone when it is large */
    int64_t masked = batch * m * n - needed;
    EXPECT(wrote_extra <= batch * m * 64, "causal m %lld n %lld off %lld: %lld elements computed beyond the mask",
           (long long)m, (long long)n, (long long)off, (long long)wrote_extra);
    if (m >= 256 && n >= 256 && masked > 0)
        EXPECT(untouched * 10 >= masked * 7, "causal m %lld n %lld off %lld: only %lld of %lld masked elements skipped",
               (long long)m, (long long)n, (long long)off, (long long)untouched, (long long)masked);
    /* the harness: a needed element moved is caught */
    if (needed > 0) {
        int64_t r = m - 1, j = 0;
        float keep = c[r * n + j];
        c[r * n + j] = keep + (float)(1e-3 * big) + 1e-3f;
        double s = 0;
        for (int64_t t = 0; t < k; t++) s += (double)a[r * k + t] * b[j * k + t];
        EXPECT(fabs((double)c[r * n + j] - s) > 1e-5 * big, "a wrong element would pass");
        c[r * n + j] = keep;
    }
    free(a);
    free(b);
    free(c);
}

/* A zero tail (KirGemm.zero_tail): C = A @ B ([m, k] @ [k, n], or B given [n, k]) with A's rows
 * ending in zeros at `tail` (0: a dense A; 1: a causal softmax's, row r nonzero up to r + 2;
 * 2: every row zero; 3: row r 0.5 from r + 2 on), and B with an infinity in row bad_row (-1:
 * none). known: the rows' tail column given (KirGemm.tail: r + 2 on, as a causal row kernel
 * stores its probabilities), so that the runtime reads one element a row (and scans the rows
 * whose value there is not a zero). Every element of C equals the full product's computed here
 * in f64 (NaN where it is: 0 * inf), poisoned before. */
static void check_zero_tail(int64_t batch, int64_t m, int64_t n, int64_t k, int tail, int64_t bad_row, bool trans_b,
                            int64_t nparts, bool f64, bool known) {
    if (bad_row >= k) return;
    KirGemm g = {.batch = batch, .m = m, .n = n, .k = k, .stride_a = batch > 1 ? m * k : 0,
                 .stride_b = batch > 1 ? n * k : 0, .stride_c = batch > 1 ? m * n : 0, .trans_b = trans_b,
                 .dtype = f64 ? FC_F64 : FC_F32, .zero_tail = true, .tail = {.off = 1, .align = known ? 1 : 0}};
    int64_t na = batch * m * k, nb = batch * n * k, nc = batch * m * n;
    size_t es = f64 ? sizeof(double) : sizeof(float);
    /* the values in f64 (each a float's), and the buffers in the product's type */
    double *ad = malloc(sizeof(double) * (size_t)na), *bd = malloc(sizeof(double) * (size_t)nb);
    void *a = malloc(es * (size_t)na), *b = malloc(es * (size_t)nb), *c = malloc(es * (size_t)nc);
    for (int64_t i = 0; i < batch; i++)
        for (int64_t r = 0; r < m; r++)
            for (int64_t t = 0; t < k; t++) {
                bool zero = tail == 2 || (tail == 1 && t > r + 1);
                ad[(i * m + r) * k + t] = zero ? (t % 3 ? 0.0 : -0.0)
                                          : tail == 3 && t > r + 1 ? 0.5 : (double)(float)(urand() * 2 - 1);
            }
    for (int64_t e = 0; e < nb; e++) bd[e] = (double)(float)(urand() * 2 - 1);
    if (bad_row >= 0)
        for (int64_t i = 0; i < batch; i++) bd[i * n * k + (trans_b ? 1 * k + bad_row : bad_row * n + 1)] = INFINITY;
    for (int64_t e = 0; e < na; e++) {
        if (f64) ((double *)a)[e] = ad[e];
        else ((float *)a)[e] = (float)ad[e];
    }
    for (int64_t e = 0; e < nb; e++) {
        if (f64) ((double *)b)[e] = bd[e];
        else ((float *)b)[e] = (float)bd[e];
    }
    memset(c, 0xFF, es * (size_t)nc);
    FcErr err = {0};
    if (rt_blas_ready((int)nparts, "test", &err) != FC_OK) {
        EXPECT(0, "the BLAS loads: %s", err.msg);
        return;
    }
    for (int64_t p = 0; p < nparts; p++) rt_blas_gemm_part(&g, a, b, c, p, nparts);
    double worst = 0, big = 0;
    int64_t nan_ok = 0, nan_want = 0;
    for (int64_t i = 0; i < batch; i++)
        for (int64_t r = 0; r < m; r++)
            for (int64_t j = 0; j < n; j++) {
                double s = 0;
                for (int64_t t = 0; t < k; t++)
                    s += ad[(i * m + r) * k + t] * bd[i * n * k + (trans_b ? j * k + t : t * n + j)];
                int64_t e = (i * m + r) * n + j;
                double got = f64 ? ((double *)c)[e] : ((float *)c)[e];
                if (isnan(s)) {
                    nan_want++;
                    nan_ok += isnan(got);
                    continue;
                }
                double d = fabs(got - s);
                worst = isnan(d) || d > worst ? (isnan(d) ? INFINITY : d) : worst;
                big = fabs(s) > big ? fabs(s) : big;
            }
    EXPECT(worst <= 1e-5 * big + 1e-30,
           "zero tail %s b %lld m %lld n %lld k %lld tail %d bad %lld trans %d parts %lld known %d: error %g of %g",
           f64 ? "f64" : "f32", (long long)batch, (long long)m, (long long)n, (long long)k, tail, (long long)bad_row, trans_b,
           (long long)nparts, known, worst, big);
    EXPECT(nan_ok == nan_want, "zero tail %s tail %d bad %lld: %lld of %lld NaNs (0 * inf) kept", f64 ? "f64" : "f32", tail,
           (long long)bad_row, (long long)nan_ok, (long long)nan_want);
    free(ad);
    free(bd);
    free(a);
    free(b);
    free(c);
}

static IrGraph *compile(const char *text) {
    IrGraph *g = NULL;
    StrBuf diags = {0};
    FcErr err = {0};
    FeOptions fo = {0};
    if (fe_compile(text, strlen(text), "c.tf", &fo, &g, &diags, &err) != FC_OK) fprintf(stderr, "compile: %s\n", err.msg);
    sb_free(&diags);
    return g;
}

/* The first library product of p, or NULL. */
static const KirKernel *first_product(const KirProgram *p, int nth) {
    for (int l = 0; l < p->launches.len; l++) {
        const KirKernel *k = p->kernels.data[p->launches.data[l].kernel];
        if (k->library && nth-- == 0) return k;
    }
    return NULL;
}

/* Lowers g for the CPU (the GPU unless cpu) into *res; false (a failure counted) when it fails. */
static bool lower_for(const char *what, const IrGraph *g, bool cpu, bool strict, PassResult *res) {
    PassOptions po = {.fuse = true, .sm = 90, .library_gemm = true, .cpu = cpu, .strict_rounding = strict};
    po.host = (PassCpu){.l1d_bytes = 32768, .l2_bytes = 1 << 20, .llc_bytes = 32 << 20, .vector_bytes = 32};
    memset(res, 0, sizeof *res);
    FcErr err = {0};
    if (pass_pipeline(g, &po, res, &err) == FC_OK) return true;
    EXPECT(0, "%s: pipeline: %s", what, err.msg);
    return false;
}

/* Runs p on random inputs and compares every output with the interpreter's (a NaN against a
 * NaN, an infinity against itself). special: input 0's rows (its last two dims) get a NaN past
 * the diagonal, an infinity in some of their first elements, rows of -inf (some of them whole),
 * so that what a causal row kernel leaves out and the rows whose max is not finite show. */
static void check_results_at(const char *what, const KirProgram *p, const IrGraph *g, bool special) {
    FcErr err = {0};
    RtCpuProgram *cp = NULL;
    if (rt_cpu_compile(p, 2, &cp, &err) != FC_OK) {
        EXPECT(0, "%s: cpu compile: %s", what, err.msg);
        return;
    }
    void *in[8] = {0}, *got[4] = {0}, *ref[4] = {0};
    int64_t nout[4] = {0};
    for (int i = 0; i < g->inputs.len && i < 8; i++) {
        int64_t n = 1;
        ir_shape_numel(&ir_cval(g, g->inputs.data[i])->shape, &n);
        in[i] = malloc(sizeof(float) * (size_t)n);
        for (int64_t e = 0; e < n; e++) ((float *)in[i])[e] = (float)(urand() * 4 - 2);
        const IrShape *sh = &ir_cval(g, g->inputs.data[i])->shape;
        if (i > 0 || !special || sh->rank < 2) continue;
        int64_t rows = sh->dims[sh->rank - 2], cols = sh->dims[sh->rank - 1];
        for (int64_t e = 0; e < n; e++) {
            int64_t r = e / cols % rows, c = e % cols, row = e / cols;
            float *x = &((float *)in[i])[e];
            if (c > r) *x = NAN;                                   /* past the diagonal */
            else if (row % 7 == 3) *x = -INFINITY;                 /* a row of -inf */
            else if (row % 7 == 5 && c <= 2) *x = -INFINITY;       /* its first elements */
            else if (row % 11 == 6 && c == r / 2) *x = INFINITY;   /* a row with +inf */
        }
    }
    for (int o = 0; o < g->outputs.len && o < 4; o++) {
        ir_shape_numel(&ir_cval(g, g->outputs.data[o])->shape, &nout[o]);
        got[o] = malloc(sizeof(float) * (size_t)nout[o]);
        ref[o] = malloc(sizeof(float) * (size_t)nout[o]);
        memset(got[o], 0xFF, sizeof(float) * (size_t)nout[o]);   /* NaN: an element not written shows */
    }
    EXPECT(rt_cpu_run(cp, in, got, &err) == FC_OK, "%s: run: %s", what, err.msg);
    EXPECT(rt_interp_run(g, (const void *const *)in, ref, &err) == FC_OK, "%s: interpreter: %s", what, err.msg);
    for (int o = 0; o < g->outputs.len && o < 4; o++) {
        double worst = 0, big = 0;
        for (int64_t e = 0; e < nout[o]; e++)   /* the scale: the largest finite reference */
            if (isfinite(((float *)ref[o])[e]) && fabs(((float *)ref[o])[e]) > big) big = fabs(((float *)ref[o])[e]);
        for (int64_t e = 0; e < nout[o]; e++) {
            double r = ((float *)ref[o])[e], x = ((float *)got[o])[e];
            if ((isnan(r) && isnan(x)) || r == x) continue;
            double d = isfinite(r) && isfinite(x) ? fabs(x - r) : INFINITY;   /* one not finite: wrong */
            if (d > worst) worst = d;
        }
        EXPECT(worst <= 1e-5 * big, "%s: output %d off by %g of %g", what, o, worst, big);
        free(got[o]);
        free(ref[o]);
    }
    for (int i = 0; i < 8; i++) free(in[i]);
    rt_cpu_free(cp);
}
static void check_results(const char *what, const KirProgram *p, const IrGraph *g) {
    check_results_at(what, p, g, false);
}

/* Lowers text (for the CPU unless gpu) and checks whether its first product is causal (at
 * want_off) and that its second is not; then the results. */
static void check_plan_at(const char *what, const char *text, bool want, int64_t want_off, bool gpu, bool strict,
                          FcDtype prec, int want_tail) {
    IrGraph *g = compile(text);
    EXPECT(g != NULL, "%s: compiles", what);
    if (!g) return;
    if (prec != FC_F32) {   /* lowered to bf16 (the plan only: the results are the CLI's tests') */
        IrGraph *low = NULL;
        FcErr perr = {0};
        EXPECT(pass_precision(g, prec, false, &low, &perr) == FC_OK, "%s: precision: %s", what, perr.msg);
        ir_graph_free(g);
        if (!low) return;
        g = low;
    }
    PassResult res;
    if (!lower_for(what, g, !gpu, strict, &res)) {
        ir_graph_free(g);
        return;
    }
    const KirKernel *k0 = first_product(res.prog, 0), *k1 = first_product(res.prog, 1);
    EXPECT(k0 != NULL, "%s: a library product", what);
    if (k0) {
        EXPECT(k0->gemm.causal == want, "%s: causal %d, expected %d", what, k0->gemm.causal, want);
        if (want)
            EXPECT(k0->gemm.causal_off == want_off, "%s: offset %lld, expected %lld", what, (long long)k0->gemm.causal_off,
                   (long long)want_off);
        if (want)   /* the report counts the elements computed */
            EXPECT(k0->flops == 2 * k0->gemm.batch * kir_gemm_cols_before(&k0->gemm, k0->gemm.m) * k0->gemm.k,
                   "%s: flops %lld", what, (long long)k0->flops);
    }
    if (k1) EXPECT(!k1->gemm.causal, "%s: the second product is not causal", what);
    if (k1 && want) EXPECT(k1->gemm.zero_tail, "%s: the second product reads a zero tail", what);
    /* p stored by a causal softmax (a causal row kernel): its tail column known (want_tail 1) */
    if (k1 && want_tail == 1)
        EXPECT(k1->gemm.tail.align > 0 && k1->gemm.tail.off == want_off, "%s: the second product's tail (%lld, %lld)", what,
               (long long)k1->gemm.tail.off, (long long)k1->gemm.tail.align);
    if (k1 && want_tail == 0) EXPECT(k1->gemm.tail.align == 0, "%s: no tail known", what);
    if (k0) EXPECT(!k0->gemm.zero_tail, "%s: the first product has no zero tail", what);
    if (k1 && (gpu || strict)) EXPECT(!k1->gemm.zero_tail, "%s: no zero tail", what);
    if (!gpu && prec == FC_F32) check_results(what, res.prog, g);
    pass_result_free(&res);
    ir_graph_free(g);
}
static void check_plan(const char *what, const char *text, bool want, int64_t want_off, bool gpu, bool strict) {
    check_plan_at(what, text, want, want_off, gpu, strict, FC_F32, gpu || strict ? 0 : -1);
}

/* Training: the backward of a causal attention (each remat mode) has a product reading a zero
 * tail (dQ = dS @ K, dS zero above the diagonal); *causal_bwd: whether one is causal (a
 * recomputed score product). */
static void check_train(const char *text, PassRemat mode, int *zero_tails, int *causal_bwd) {
    IrGraph *g = compile(text);
    *zero_tails = *causal_bwd = 0;
    if (!g) return;
    AdJoint joint;
    RematPlan plan;
    memset(&joint, 0, sizeof joint);
    memset(&plan, 0, sizeof plan);
    FcErr err = {0};
    if (pass_train(g, mode, -1, &joint, &plan, &err) == FC_OK) {
        PassOptions po = {.fuse = true, .sm = 90, .library_gemm = true, .cpu = true, .train = true};
        po.host = (PassCpu){.l1d_bytes = 32768, .l2_bytes = 1 << 20, .llc_bytes = 32 << 20, .vector_bytes = 32};
        PassResult res;
        memset(&res, 0, sizeof res);
        if (pass_pipeline(plan.bwd, &po, &res, &err) == FC_OK)
            for (int l = 0; l < res.prog->launches.len; l++) {
                const KirKernel *k = res.prog->kernels.data[res.prog->launches.data[l].kernel];
                *zero_tails += k->library && k->gemm.zero_tail;
                *causal_bwd += k->library && k->gemm.causal;
            }
        else
            EXPECT(0, "backward pipeline: %s", err.msg);
        pass_result_free(&res);
    } else {
        EXPECT(0, "pass_train: %s", err.msg);
    }
    remat_plan_free(&plan);
    ad_joint_free(&joint);
    ir_graph_free(g);
}

/* Causal rows (docs/cpu.md "Causal rows"): lowers text for the CPU (the GPU unless cpu) and
 * counts its row kernels' reductions that stop at the masks (hi a variable) and those that go
 * on past them as a loop (lo a variable); then the results, on random inputs and on inputs with
 * NaNs past the diagonal and rows whose max is -inf or +inf. */
static void check_rows_read(const char *what, const char *text, int want_split, int want_loops, bool cpu, bool strict,
                            int64_t want_read) {
    IrGraph *g = compile(text);
    EXPECT(g != NULL, "%s: compiles", what);
    if (!g) return;
    PassResult res;
    if (!lower_for(what, g, cpu, strict, &res)) {
        ir_graph_free(g);
        return;
    }
    int split = 0, loops = 0;
    for (int i = 0; i < res.prog->kernels.len; i++) {
        const KirKernel *k = res.prog->kernels.data[i];
        if (want_read >= 0)   /* the bytes read: the scores' columns before the masks */
            EXPECT(k->bytes_read == want_read, "%s: %s reads %lld bytes, expected %lld", what, k->name,
                   (long long)k->bytes_read, (long long)want_read);
        for (int st = 0; st < k->stmts.len; st++) {
            const KirStmt *x = &k->stmts.data[st];
            if (x->kind != KS_REDUCE) continue;
            split += k->exprs.data[x->b].kind != KE_CONST;
            loops += k->exprs.data[x->a].kind != KE_CONST;
        }
    }
    EXPECT(split == want_split, "%s: %d reductions stop at the masks, expected %d", what, split, want_split);
    EXPECT(loops == want_loops, "%s: %d go on past them as a loop, expected %d", what, loops, want_loops);
    if (cpu) {
        check_results_at(what, res.prog, g, false);
        check_results_at(what, res.prog, g, true);
    }
    pass_result_free(&res);
    ir_graph_free(g);
}
static void check_rows(const char *what, const char *text, int want_split, int want_loops, bool cpu, bool strict) {
    check_rows_read(what, text, want_split, want_loops, cpu, strict, -1);
}

int main(void) {
    check_cols();
    for (int64_t parts = 1; parts <= 3; parts++) {
        check_runtime(3, 70, 70, 16, 0, parts);
        check_runtime(1, 300, 300, 8, 0, parts);
        check_runtime(2, 40, 90, 8, 50, parts);     /* Tq < Tk: keys before the queries */
        check_runtime(1, 90, 40, 8, -50, parts);    /* the first 50 rows need nothing */
        check_runtime(2, 33, 20, 4, 20, parts);     /* every column needed */
        check_runtime(1, 20, 33, 4, -20, parts);    /* no element needed */
        check_runtime(1, 257, 129, 8, -3, parts);
    }

    for (int64_t parts = 1; parts <= 3; parts += 2)
        for (int tail = 0; tail <= 3; tail++)
            for (int64_t bad = -1; bad < 200; bad += 100)
                for (int tr = 0; tr <= 1; tr++)
                    for (int known = 0; known <= (tail > 0); known++) {
                        check_zero_tail(2, 150, 24, 150, tail, bad, tr, parts, false, known);
                        check_zero_tail(1, 200, 8, 200, tail, bad, tr, parts, tr == 1, known);
                    }

    static const char *const attn =
        "block a(q: f32[2, 3, 24, 16], k: f32[2, 3, 24, 16], v: f32[2, 3, 24, 8]) -> f32[2, 3, 24, 8] {\n"
        "    return softmax(causal_mask(q @ transpose(k) * 0.25)) @ v\n}\n";
    check_plan_at("causal_mask", attn, true, 0, false, false, FC_F32, 1);
    for (int mode = PASS_REMAT_AUTO; mode <= PASS_REMAT_FULL; mode++) {
        int zt, cb;
        check_train(attn, (PassRemat)mode, &zt, &cb);
        printf("remat mode %d: backward products with a zero tail %d, causal %d\n", mode, zt, cb);
        EXPECT(zt >= 1, "remat mode %d: the backward's dS @ K reads a zero tail", mode);
    }
    check_plan("GPU program", attn, false, 0, true, false);
    check_plan_at("bf16", attn, true, 0, false, false, FC_BF16, 1);
    check_plan_at("f16", attn, true, 0, false, false, FC_F16, 1);
    check_plan("--strict-rounding", attn, false, 0, false, true);
    check_plan_at("attention op",
                  "block a(q: f32[2, 24, 16], k: f32[2, 40, 16], v: f32[2, 40, 8]) -> f32[2, 24, 8] {\n"
                  "    return attention(q, k, v, causal=true)\n}\n",
                  true, 16, false, false, FC_F32, 1);
    check_plan_at("i32 iotas, <, an offset, a finite fill",
                  "block a(q: f32[24, 16], k: f32[24, 16], v: f32[24, 8]) -> f32[24, 8] {\n"
                  "    s = q @ transpose(k)\n"
                  "    keep = iota([24, 24], 1) < iota([24, 24], 0) + 3\n"
                  "    return softmax(where(keep, s, -1e9)) @ v\n}\n",
                  true, 2, false, false, FC_F32, 1);
    /* no row kernel: p's tail not known */
    check_plan_at("i64 iotas, >=",
                  "block a(q: f32[24, 16], k: f32[24, 16], v: f32[24, 8]) -> f32[24, 8] {\n"
                  "    s = exp(q @ transpose(k) * 0.5)\n"
                  "    keep = iota([24, 24], 0, dtype=i64) - 1 >= iota([24, 24], 1, dtype=i64)\n"
                  "    return where(keep, s, 0.0) @ v\n}\n",
                  true, -1, false, false, FC_F32, 0);
    check_plan("scores also returned",
               "block a(q: f32[24, 16], k: f32[24, 16], v: f32[24, 8]) -> f32[24, 8], f32[24, 24] {\n"
               "    s = q @ transpose(k)\n"
               "    return softmax(causal_mask(s)) @ v, s\n}\n",
               false, 0, false, false);
    check_plan("scores summed",
               "block a(q: f32[24, 16], k: f32[24, 16], v: f32[24, 8]) -> f32[24, 8] {\n"
               "    s = q @ transpose(k)\n"
               "    return softmax(causal_mask(s) + sum(s, axis=1, keepdim=true)) @ v\n}\n",
               false, 0, false, false);
    /* and past the mask p depends on s: not one value a row, its tail not known */
    check_plan_at("scores in the condition",
                  "block a(q: f32[24, 16], k: f32[24, 16], v: f32[24, 8]) -> f32[24, 8] {\n"
                  "    s = q @ transpose(k)\n"
                  "    return softmax(where(s > 0.0, causal_mask(s), -1e9)) @ v\n}\n",
                  false, 0, false, false, FC_F32, 0);
    check_plan("scores as the fill",
               "block a(q: f32[24, 16], k: f32[24, 16], v: f32[24, 8]) -> f32[24, 8] {\n"
               "    s = q @ transpose(k)\n"
               "    keep = iota([24, 24], 1) <= iota([24, 24], 0)\n"
               "    return softmax(where(keep, 0.0, s)) @ v\n}\n",
               false, 0, false, false);
    check_plan("the row index on the wrong side",
               "block a(q: f32[24, 16], k: f32[24, 16], v: f32[24, 8]) -> f32[24, 8] {\n"
               "    s = q @ transpose(k)\n"
               "    keep = iota([24, 24], 0) <= iota([24, 24], 1)\n"
               "    return softmax(where(keep, s, -1e9)) @ v\n}\n",
               false, 0, false, false);

    /* causal rows */
    /* row r reads r + 1 columns; in a row of 256 or more a multiple of 32: rows 0-31 32, ...,
     * 288-299 all 300 */
    check_rows_read("causal softmax", "block r(s: f32[3, 100, 100]) -> f32[3, 100, 100] {\n    return softmax(causal_mask(s))\n}\n",
                    2, 0, true, false, 3 * 4 * (100 * 101 / 2));
    int64_t long_read = 0;
    for (int64_t r = 0; r < 300; r++) long_read += (r / 32 + 1) * 32 < 300 ? (r / 32 + 1) * 32 : 300;
    check_rows_read("causal softmax, long rows",
                    "block r(s: f32[2, 300, 300]) -> f32[2, 300, 300] {\n    return softmax(causal_mask(s))\n}\n", 2, 0, true,
                    false, 2 * 4 * long_read);
    check_rows("log_softmax, keys before the queries",
               "block r(s: f32[2, 70, 130]) -> f32[2, 70, 130] {\n"
               "    keep = iota([70, 130], 1) <= iota([70, 130], 0) + 16\n"
               "    return log_softmax(where(keep, s, -inf))\n}\n",
               2, 0, true, false);
    check_rows("rows with no column kept",
               "block r(s: f32[2, 90, 90]) -> f32[2, 90, 90] {\n"
               "    keep = iota([90, 90], 1) < iota([90, 90], 0) - 3\n"
               "    return softmax(where(keep, s, -inf))\n}\n",
               2, 0, true, false);
    check_rows("a bias after the mask: the rest is a loop",
               "block r(s: f32[2, 97, 97], b: f32[97]) -> f32[2, 97, 97] {\n"
               "    return softmax(causal_mask(s) + b)\n}\n",
               2, 2, true, false);
    check_rows("finite fills: a count, a mean, a min, two offsets",
               "block r(s: f32[99, 99]) -> f32[99, 1], f32[99, 1], f32[99, 99], f32[99] {\n"
               "    a = iota([99, 99], 1) <= iota([99, 99], 0)\n"
               "    b = iota([99, 99], 1) <= iota([99, 99], 0) + 5\n"
               "    x = where(a, s, 1.0) + where(b, s * 2.0, 0.5)\n"
               "    m = mean(where(b, s, 3.0), axis=1, keepdim=true)\n"
               "    n = x - min(where(a, s, inf), axis=1, keepdim=true)\n"
               "    return sum(x, axis=1, keepdim=true), m, n, sum(where(a, s, -inf), axis=1)\n}\n",
               4, 0, true, false);
    check_rows("a row kernel of another shape", "block r(s: f32[3, 40, 40]) -> f32[3, 40] {\n"
               "    return sum(causal_mask(s), axis=1)\n}\n", 0, 0, true, false);
    check_rows("GPU program", "block r(s: f32[3, 40, 40]) -> f32[3, 40, 40] {\n    return softmax(causal_mask(s))\n}\n",
               0, 0, false, false);
    check_rows("--strict-rounding", "block r(s: f32[3, 40, 40]) -> f32[3, 40, 40] {\n    return softmax(causal_mask(s))\n}\n",
               0, 0, true, true);
    if (failures) fprintf(stderr, "test_causal: %d failures\n", failures);
    else printf("test_causal: ok\n");
    return failures != 0;
}
