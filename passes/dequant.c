/* dequant.c: an f8 value read back once per reader (pass_split_dequant, see passes.h).
 *
 * Requires: a verified graph. Leaves: a verified graph with the same inputs and outputs where
 * every fp8_dequant has at most one reader node: the first keeps it, each later reader gets a
 * copy of its own (same q, scale and dtype) under the reader's location and origin, as
 * pass_precision places the forward's. Fusion keeps a dequant with its reader (pass_fuse), so
 * an f8 value then crosses every kernel boundary in f8, never in the 16-bit type it is read
 * back as. The forward's f8 values already have one dequant a reader; a backward's E5M2
 * gradient has one dequant (pass_autodiff), which the producer's rule reads several times (a
 * product's two backward products, the two operands of a sum), often from different kernels.
 * A copy costs one multiply an element in its reader's kernel. */
#include "passes.h"

#include <string.h>

/* map[d] for the result of a dequant d, or, for a reader after the first, a copy of d */
static FcStatus copy_for(const IrGraph *src, IrGraph *g, const IrNode *reader, int v, const int *map, int *out, FcErr *err) {
    const IrNode *d = &src->nodes.data[ir_cval(src, v)->node];
    int ins[2] = {map[d->in[0]], map[d->in[1]]};
    return ir_readd_node(g, reader, IR_OP_FP8_DEQUANT, ins, 2, &d->a, "pass_split_dequant", out, err);
}

static bool is_dequant(const IrGraph *g, int v) {
    int p = ir_cval(g, v)->node;
    return p >= 0 && g->nodes.data[p].op == IR_OP_FP8_DEQUANT;
}

static FcStatus run(const IrGraph *src, IrGraph *g, int *map, bool *read, FcErr *err) {
    FC_TRY(ir_copy_inputs(g, src, NULL, map, err));
    for (int i = 0; i < src->nodes.len; i++) {
        const IrNode *n = &src->nodes.data[i];
        int ins[8], first = -1;
        int *in = n->nin <= 8 ? ins : fc_calloc((size_t)n->nin, sizeof *in);
        if (!in) return FC_OOM(err);
        FcStatus s = FC_OK;
        for (int k = 0; k < n->nin && s == FC_OK; k++) {
            int v = n->in[k], j = 0;
            while (j < k && n->in[j] != v) j++;
            if (j < k) in[k] = in[j];                          /* read twice by n: one copy */
            else if (!is_dequant(src, v) || !read[v]) in[k] = map[v], read[v] = true;
            else s = copy_for(src, g, n, v, map, &in[k], err);
        }
        if (s == FC_OK) s = ir_readd_node(g, n, n->op, in, n->nin, &n->a, "pass_split_dequant", &first, err);
        if (in != ins) fc_free(in);
        if (s != FC_OK) return s;
        FC_TRY(ir_map_results(g, src, n, first, map, err));
    }
    FC_TRY(ir_copy_outputs(g, src, map, err));
    return ir_verify(g, err);
}

FcStatus pass_split_dequant(const IrGraph *in, IrGraph **out, FcErr *err) {
    *out = NULL;
    FC_CHECK(err, in != NULL);
    int nv = in->values.len;
    int *readers = fc_calloc((size_t)nv + 1, sizeof *readers);
    if (!readers) return FC_OOM(err);
    bool any = false;   /* graphs without f8, and forward graphs: no copy */
    for (int i = 0; i < in->nodes.len; i++) {
        const IrNode *n = &in->nodes.data[i];
        for (int k = 0; k < n->nin; k++) {
            int j = 0;
            while (j < k && n->in[j] != n->in[k]) j++;
            if (j == k && is_dequant(in, n->in[k])) any |= ++readers[n->in[k]] > 1;
        }
    }
    fc_free(readers);
    if (!any) return FC_OK;
    IrGraph *g = ir_graph_new(in->name, in->file);
    int *map = fc_calloc((size_t)nv + 1, sizeof *map);
    bool *read = fc_calloc((size_t)nv + 1, sizeof *read);
    FcStatus s = g && map && read ? run(in, g, map, read, err) : FC_OOM(err);
    fc_free(map);
    fc_free(read);
    if (s != FC_OK) {
        ir_graph_free(g);
        return s;
    }
    *out = g;
    return FC_OK;
}
