/* tolerance.c: the --check tolerances of a graph's outputs (docs/tolerances.md; declared in
 * host.h): rt_host_tolerance's rule for each output (the least precise float dtype on its path,
 * the total length of the reductions feeding it), and, for given inputs, that rule widened by
 * the rounding spread of 16- and 8-bit float intermediates (the reference interpreter's two
 * legal meanings of them). The API applies it to a block's outputs (fc_block_check_tolerances)
 * and, over the joint forward-and-backward graph, to its gradients
 * (fc_block_check_grad_tolerances); the CUDA emulation harness to a training block's forward
 * and backward graphs.
 */
#include "host.h"
#include "interp.h"

#include <math.h>

FcStatus rt_graph_tolerances(const IrGraph *g, double *tol, FcErr *err) {
    int64_t *K = fc_calloc((size_t)g->values.len + 1, sizeof(int64_t));
    int *dt = fc_calloc((size_t)g->values.len + 1, sizeof(int));
    if (!K || !dt) { fc_free(K); fc_free(dt); return FC_OOM(err); }
    /* precision rank: larger is less precise */
    static const int rank[FC_DTYPE_COUNT] = {[FC_F64] = 0, [FC_F32] = 1, [FC_F16] = 2, [FC_BF16] = 3,
                                             [FC_F8E4M3] = 4, [FC_F8E5M2] = 5, [FC_I32] = -1, [FC_I64] = -1, [FC_BOOL] = -1,
                                             [FC_I8] = -1};
    for (int v = 0; v < g->values.len; v++) dt[v] = -1;
    for (int i = 0; i < g->inputs.len; i++) {
        int v = g->inputs.data[i];
        dt[v] = rank[ir_cval(g, v)->dtype] >= 0 ? (int)ir_cval(g, v)->dtype : -1;
    }
    for (int i = 0; i < g->nodes.len; i++) {
        const IrNode *n = &g->nodes.data[i];
        int64_t k = 0;
        int d = -1;
        for (int j = 0; j < n->nin; j++) {
            if (K[n->in[j]] > k) k = K[n->in[j]];
            int dj = dt[n->in[j]];
            if (dj >= 0 && (d < 0 || rank[dj] > rank[d])) d = dj;
        }
        const IrValue *x = n->nin ? ir_cval(g, n->in[0]) : NULL;
        int64_t len = 0;
        switch (n->op) {
        case IR_OP_MATMUL: len = x->shape.dims[x->shape.rank - 1]; break;
        case IR_OP_SUM: case IR_OP_MEAN: case IR_OP_MAX: case IR_OP_MIN:
        case IR_OP_LAYERNORM: case IR_OP_RMSNORM:
            len = 1;
            for (int j = 0; j < n->a.nlist; j++) len *= x->shape.dims[n->a.list[j]];
            break;
        case IR_OP_SOFTMAX: case IR_OP_LOG_SOFTMAX: len = x->shape.dims[n->a.i[0]]; break;
        case IR_OP_SCATTER_ADD:   /* a row sums at most every position's row (all ids alike) */
            len = 1;
            ir_shape_numel(&ir_cval(g, n->in[1])->shape, &len);
            break;
        case IR_OP_CROSS_ENTROPY: {   /* a softmax over C per row, then the mean over the rows */
            int64_t rows = 1;
            ir_shape_numel(&ir_cval(g, n->in[1])->shape, &rows);
            len = x->shape.dims[x->shape.rank - 1] + rows;
            break;
        }
        case IR_OP_ATTENTION: {
            const IrValue *kk = ir_cval(g, n->in[1]);
            len = x->shape.dims[x->shape.rank - 1] + 2 * kk->shape.dims[kk->shape.rank - 2];
            break;
        }
        default: break;
        }
        for (int r = 0; r < n->nout; r++) {
            int v = n->out[r];
            K[v] = k + len;
            int own = rank[ir_cval(g, v)->dtype] >= 0 ? (int)ir_cval(g, v)->dtype : -1;
            dt[v] = own < 0 ? -1 : (d >= 0 && rank[d] > rank[own] ? d : own);
        }
    }
    for (int j = 0; j < g->outputs.len; j++) {
        int v = g->outputs.data[j];
        FcDtype t = dt[v] >= 0 ? (FcDtype)dt[v] : ir_cval(g, v)->dtype;
        tol[j] = rt_host_tolerance(t, K[v]);
    }
    fc_free(K);
    fc_free(dt);
    return FC_OK;
}


FcStatus rt_graph_check_tolerances(const IrGraph *g, const void *const *inputs, double *tol, double *spread, FcErr *err) {
    /* the three meanings of 16/8-bit float intermediates (interp.h RtRounding): every op, at
     * the outputs, and rounded where stored; the spread is how far the last two move from the
     * first */
    enum { NR = 3 };
    static const RtRounding mean[NR] = {RT_ROUND_EVERY_OP, RT_ROUND_AT_OUTPUTS, RT_ROUND_STORED};
    int nout = g->outputs.len;
    FC_TRY(rt_graph_tolerances(g, tol, err));
    for (int j = 0; spread && j < nout; j++) spread[j] = 0;
    if (nout == 0 || !rt_interp_has_narrow_intermediates(g)) return FC_OK;   /* the meanings are the same program */
    void **out[NR];
    FcStatus s = FC_OK;
    for (int k = 0; k < NR; k++)
        if (!(out[k] = fc_calloc((size_t)nout, sizeof(void *)))) s = FC_OOM(err);
    for (int j = 0; s == FC_OK && j < nout; j++) {
        const IrValue *y = ir_cval(g, g->outputs.data[j]);
        int64_t n = 1;
        ir_shape_numel(&y->shape, &n);
        for (int k = 0; k < NR && s == FC_OK; k++)
            if (!(out[k][j] = fc_alloc((size_t)n * fc_dtype_size(y->dtype) + 1))) s = FC_OOM(err);
    }
    for (int k = 0; k < NR && s == FC_OK; k++) s = rt_interp_run_rounding(g, inputs, out[k], mean[k], err);
    for (int j = 0; s == FC_OK && j < nout; j++) {
        const IrValue *y = ir_cval(g, g->outputs.data[j]);
        int64_t n = 1;
        ir_shape_numel(&y->shape, &n);
        double sp = 0;
        for (int k = 1; k < NR; k++) {
            double a = 0, r = 0;
            rt_host_compare(y->dtype, out[k][j], out[0][j], n, &a, &r);
            sp = isnan(r) || r > sp ? r : sp;
        }
        tol[j] += RT_CHECK_SPREAD_FACTOR * sp;
        if (spread) spread[j] = sp;
    }
    for (int k = 0; k < NR; k++) {
        for (int j = 0; out[k] && j < nout; j++) fc_free(out[k][j]);
        fc_free(out[k]);
    }
    return s;
}
