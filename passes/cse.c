/* cse.c: common-subexpression elimination on the decomposed graph (pass_cse, see passes.h).
 *
 * Requires: a verified graph. Leaves: a verified graph in which no two nodes compute the same
 * thing (same op, same inputs after the merge, same attributes), each kept node copied
 * unchanged (op, attributes, location, origin, result names), a merged node's readers reading
 * the node kept in its place (the first in order); the same inputs and outputs (an output that
 * was a merged node's result names the kept node's, so two outputs may share a value).
 *
 * Why: a block that writes two composites over one input computes their common parts twice
 * once they are decomposed. softmax and log_softmax of the same logits (examples/
 * softmax_logits.tf) each take the row max, subtract it, exponentiate and sum: four row
 * reductions where two serve, and an exp per element that one fused kernel computes three
 * times. Merging them before fusion gives one kernel that reduces each row twice.
 *
 * Only for fused programs (pipeline.c): the eager program runs each source op as its own
 * kernel, as eager autograd does, which merging across ops would change. Not merged:
 * dropout and dropout_mask (a random draw each, whatever their seeds say), fp8_quant (each
 * records its slot's amax), and views, casts, gathers and scatters (`mergeable`: computed
 * inside each reader's kernel for nothing, where a shared one would be a buffer).
 */
#include "passes.h"

#include <string.h>

static bool mergeable(IrOp op) {
    switch (ir_ops[op].cat) {
    /* views, casts, gathers and scatters: free or nearly inside each consumer's kernel, while
     * one of them read by two kernels is a buffer of its own (a transpose of x shared by two
     * weight gradients' products became a copy kernel and its bytes in the llama layer's
     * backward) */
    case IR_CAT_SHAPE: case IR_CAT_CAST: case IR_CAT_GATHER: case IR_CAT_SCATTER: return false;
    default: return op != IR_OP_DROPOUT && op != IR_OP_DROPOUT_MASK && op != IR_OP_FP8_QUANT;
    }
}

static bool same_attrs(const IrAttrs *a, const IrAttrs *b) {
    if (a->nlist != b->nlist || a->dtype != b->dtype || memcmp(a->i, b->i, sizeof a->i) != 0 ||
        memcmp(&a->f, &b->f, sizeof a->f) != 0)   /* bitwise: -0 is not 0, a NaN is itself */
        return false;
    return a->nlist == 0 || memcmp(a->list, b->list, sizeof(int64_t) * (size_t)a->nlist) == 0;
}

/* node k of g against (op, ins, attrs) */
static bool same_node(const IrGraph *g, int k, IrOp op, const int *ins, int nin, const IrAttrs *a) {
    const IrNode *m = &g->nodes.data[k];
    return m->op == op && m->nin == nin && (nin == 0 || memcmp(m->in, ins, sizeof(int) * (size_t)nin) == 0) &&
           same_attrs(&m->a, a);
}

static uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull; }

static uint64_t node_hash(IrOp op, const int *ins, int nin, const IrAttrs *a) {
    uint64_t h = mix(0xcbf29ce484222325ull, (uint64_t)op);
    for (int j = 0; j < nin; j++) h = mix(h, (uint64_t)(uint32_t)ins[j]);
    for (int j = 0; j < 4; j++) h = mix(h, (uint64_t)a->i[j]);
    for (int j = 0; j < a->nlist; j++) h = mix(h, (uint64_t)a->list[j]);
    return mix(h, (uint64_t)a->nlist);
}

FcStatus pass_cse(const IrGraph *in, IrGraph **out, FcErr *err) {
    *out = NULL;
    FC_CHECK(err, in != NULL);
    int nv = in->values.len, nn = in->nodes.len;
    /* an open-addressed table of kept nodes (dst indices), at most half full */
    int cap = 16;
    while (cap < 2 * nn + 2) cap *= 2;
    int *table = fc_alloc(sizeof(int) * (size_t)cap);
    int *map = fc_calloc((size_t)nv + 1, sizeof(int));
    int *ins = NULL;
    IrGraph *g = ir_graph_new(in->name, in->file);
    int merged = 0;
    FcStatus s = table && map && g ? FC_OK : FC_OOM(err);
    for (int j = 0; s == FC_OK && j < cap; j++) table[j] = -1;
    if (s == FC_OK) s = ir_copy_inputs(g, in, NULL, map, err);
    for (int i = 0; s == FC_OK && i < nn; i++) {
        const IrNode *n = &in->nodes.data[i];
        int *ni = fc_realloc(ins, sizeof(int) * (size_t)(n->nin > 0 ? n->nin : 1));
        if (!ni) { s = FC_OOM(err); break; }
        ins = ni;
        for (int j = 0; j < n->nin; j++) ins[j] = map[n->in[j]];
        size_t slot = (size_t)(node_hash(n->op, ins, n->nin, &n->a) & (uint64_t)(cap - 1));
        if (mergeable(n->op)) {
            while (table[slot] >= 0 && !same_node(g, table[slot], n->op, ins, n->nin, &n->a)) slot = (slot + 1) & (size_t)(cap - 1);
            if (table[slot] >= 0) {   /* computed already: its readers read the kept node's results */
                const IrNode *m = &g->nodes.data[table[slot]];
                for (int r = 0; r < n->nout; r++) map[n->out[r]] = m->out[r];
                merged++;
                continue;
            }
        }
        int first = -1;
        s = ir_readd_node(g, n, n->op, ins, n->nin, &n->a, "pass_cse", &first, err);
        if (s == FC_OK) s = ir_map_results(g, in, n, first, map, err);
        if (s == FC_OK && mergeable(n->op)) table[slot] = g->nodes.len - 1;
    }
    if (s == FC_OK) s = ir_copy_outputs(g, in, map, err);
    if (s == FC_OK) s = ir_verify(g, err);
    fc_free(table);
    fc_free(map);
    fc_free(ins);
    if (s != FC_OK || merged == 0) {   /* nothing merged: keep `in` (*out NULL) */
        ir_graph_free(g);
        return s;
    }
    *out = g;
    return FC_OK;
}
