/* test_kir_views.c: the kernel-IR view check (kir_verify, ir/kir.c) and the lowering it guards.
 *
 * A row kernel (one block per row) stages or keeps rows of values in shared arrays; a consumer
 * behind a view (transpose, slice, gather, ...) may want another row's element, which the
 * shared array does not hold. The lowering records, on every load of a staged row and on every
 * load whose index it folded, the element the consumer's view maps it to; the verifier runs the
 * index arithmetic and checks each such load. These tests:
 *   - lower blocks whose views cross rows (GPU-shaped, with staged rows; CPU-shaped, with kept
 *     rows) and check that the kernels verify, that staged rows are marked and read with views,
 *     and that a cross-row read goes to memory (or is recomputed), not to the shared row;
 *   - break an index on purpose (a staged row read at the wrong element, a folded load's index,
 *     a staged row read without a view, a read past the row) and check that the verifier
 *     refuses each with the message that names it.
 */
#include "frontend.h"
#include "kir.h"
#include "passes.h"

#include <stdio.h>
#include <string.h>

#include "check.h"

/* The bug's block (difftest seed 20261124 graph 707): a sum over the rows of tanh(x0) and a
 * transpose of (x0 + tanh(x0)), in one row kernel. */
static const char *const transpose_src =
    "dim N = 5\n"
    "block g(x0: f32[N, N]) -> f32[N, N], f32[N] {\n"
    "    v2 = tanh(x0)\n"
    "    v4 = sum(v2, axis=[1])\n"
    "    v9 = transpose(square(x0 + v2))\n"
    "    return v9, v4\n}\n";
/* A softmax next to a reversed slice and a gather of the staged input (GPU: x staged). */
static const char *const slice_src =
    "block g(x: f32[8, 16]) -> f32[8, 16], f32[8, 16], f32[8, 16] {\n"
    "    m = softmax(x, axis=-1)\n"
    "    return m, slice(x * 2.0, 0, -1, -9, -1), gather(x + 1.0, 7 - iota([8], 0))\n}\n";

/* A pointwise block: GPU-shaped, its vec loop reads x at the loop's index, folded from the
 * output's multi-index (the load carries the view linearize(delinearize(v))). */
static const char *const pointwise_src =
    "block g(x: f32[4, 8]) -> f32[4, 8] {\n"
    "    return x * 0.5\n}\n";

static PassResult lower(const char *src, bool cpu) {
    PassResult r;
    memset(&r, 0, sizeof r);
    IrGraph *g = NULL;
    StrBuf diags = {0};
    FcErr err = {0};
    FeOptions fo = {0};
    EXPECT(fe_compile(src, strlen(src), "t.tf", &fo, &g, &diags, &err) == FC_OK, "compile: %s", err.msg);
    sb_free(&diags);
    if (!g) return r;
    PassOptions po = {.fuse = true, .sm = 90, .library_gemm = true, .cpu = cpu};
    if (cpu) po.host = (PassCpu){.l1d_bytes = 32768, .l2_bytes = 1 << 20, .llc_bytes = 32 << 20, .vector_bytes = 32};
    EXPECT(pass_pipeline(g, &po, &r, &err) == FC_OK, "pipeline: %s", err.msg);
    ir_graph_free(g);
    return r;
}

static KirKernel *row_kernel(PassResult *r) {
    for (int i = 0; r->prog && i < r->prog->kernels.len; i++)
        if (!strcmp(r->prog->kernels.data[i]->kind, "row_reduce")) return r->prog->kernels.data[i];
    return NULL;
}
static int count_staged(const KirKernel *k) {
    int n = 0;
    for (int i = 0; i < k->shared.len; i++) n += k->shared.data[i].base >= 0;
    return n;
}
/* The first expression of kind `kind` with a view (and, for SHLOAD, of a staged row). */
static int find_viewed(const KirKernel *k, KirExprKind kind) {
    for (int e = 0; e < k->exprs.len; e++)
        if (k->exprs.data[e].kind == kind && k->exprs.data[e].view >= 0) return e;
    return -1;
}
static FcStatus verify(const KirKernel *k, FcErr *err) {
    memset(err, 0, sizeof *err);
    return kir_verify(k, err);
}

/* Lowered kernels verify, their staged rows are marked, and the transpose reads memory. */
static void test_lowered(void) {
    for (int cpu = 0; cpu <= 1; cpu++) {
        PassResult r = lower(transpose_src, cpu);
        KirKernel *k = row_kernel(&r);
        EXPECT(k != NULL, "%s: the sum and the transpose share a row kernel", cpu ? "cpu" : "gpu");
        if (k) {
            FcErr err;
            EXPECT(verify(k, &err) == FC_OK, "%s: %s", cpu ? "cpu" : "gpu", err.msg);
            /* GPU: x0 staged and tanh kept; CPU: tanh kept */
            EXPECT(count_staged(k) == (cpu ? 1 : 2), "%s: %d staged rows", cpu ? "cpu" : "gpu", count_staged(k));
            /* every read of a staged row carries its view */
            for (int e = 0; e < k->exprs.len; e++) {
                const KirExpr *x = &k->exprs.data[e];
                if (x->kind == KE_SHLOAD && k->shared.data[x->ref].base >= 0)
                    EXPECT(x->view >= 0, "%s: sh%d read without a view", cpu ? "cpu" : "gpu", x->ref);
            }
            /* the transposed operand is read from memory (x0, input p0): a load of p0 exists */
            bool loads_x0 = false;
            for (int e = 0; e < k->exprs.len; e++)
                loads_x0 |= k->exprs.data[e].kind == KE_LOAD && k->exprs.data[e].ref == 0;
            EXPECT(loads_x0 || !cpu, "cpu: the transposed x0 is read from memory");
        }
        pass_result_free(&r);
    }
    PassResult r = lower(slice_src, false);
    for (int i = 0; r.prog && i < r.prog->kernels.len; i++) {
        FcErr err;
        EXPECT(verify(r.prog->kernels.data[i], &err) == FC_OK, "slice/gather: %s", err.msg);
    }
    pass_result_free(&r);
}

/* A broken index is refused, with a message that says what. */
static void test_broken(void) {
    PassResult r = lower(transpose_src, false);
    KirKernel *k = row_kernel(&r);
    REQUIRE(k != NULL);
    FcErr err;
    int e = find_viewed(k, KE_SHLOAD);
    REQUIRE(e >= 0);
    KirExpr saved = k->exprs.data[e];
    /* 1. the staged row read at the row's first element in the whole tensor (row * N, its
     *    base) instead of the element's place in the row (j). (A replacement index must be an
     *    older expression: operands precede their users.) */
    k->exprs.data[e].a = k->shared.data[saved.ref].base;
    k->exprs.data[e].vec = false;
    EXPECT(verify(k, &err) == FC_ERR_INTERNAL && strstr(err.msg, "reads the wrong element") &&
               strstr(err.msg, "staged row"),
           "a staged row read at the wrong element must be refused: '%s'", err.msg);
    /* 2. the same read with no view: refused */
    k->exprs.data[e] = saved;
    k->exprs.data[e].view = -1;
    EXPECT(verify(k, &err) == FC_ERR_INTERNAL && strstr(err.msg, "with no view"),
           "a staged row read without a view must be refused: '%s'", err.msg);
    /* 3. the view names another row's element (what the transpose bug did): the block index
     *    is the row, so view = j * N + row reads element (j, row) */
    k->exprs.data[e] = saved;
    int blk = -1;
    for (int i = 0; i < k->exprs.len; i++)
        if (k->exprs.data[i].kind == KE_BLOCK_IDX) blk = i;
    REQUIRE(blk >= 0);
    k->exprs.data[e].view = blk;   /* element `row` of the tensor: row 0's element `row` */
    EXPECT(verify(k, &err) == FC_ERR_INTERNAL && strstr(err.msg, "reads the wrong element"),
           "a staged row read for another row's element must be refused: '%s'", err.msg);
    k->exprs.data[e] = saved;
    EXPECT(verify(k, &err) == FC_OK, "restored: %s", err.msg);
    pass_result_free(&r);

    /* 4. a folded load (GPU vec loop) whose index is not its view's element */
    r = lower(pointwise_src, false);
    bool found = false;
    for (int i = 0; r.prog && i < r.prog->kernels.len && !found; i++) {
        KirKernel *kk = r.prog->kernels.data[i];
        int le = find_viewed(kk, KE_LOAD);
        if (le < 0) continue;
        found = true;
        EXPECT(verify(kk, &err) == FC_OK, "folded load: %s", err.msg);
        /* read at the block index instead (an older i64 expression) */
        int bi = -1;
        for (int j = 0; j < le; j++)
            if (kk->exprs.data[j].kind == KE_BLOCK_IDX) bi = j;
        REQUIRE(bi >= 0);
        kk->exprs.data[le].a = bi;
        kk->exprs.data[le].vec = false;
        EXPECT(verify(kk, &err) == FC_ERR_INTERNAL && strstr(err.msg, "reads the wrong element"),
               "a folded load at the wrong index must be refused: '%s'", err.msg);
    }
    EXPECT(found, "the GPU-shaped pointwise block has a folded vec load with a view");
    pass_result_free(&r);
}

int main(void) {
    test_lowered();
    test_broken();
    if (failures) fprintf(stderr, "test_kir_views: %d failures\n", failures);
    return failures != 0;
}
