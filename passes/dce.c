/* dce.c: dead-code elimination (pass_dce, see passes.h).
 *
 * Requires: a verified graph. Leaves: a verified graph holding only the nodes from which a
 * block output can be reached, in the same order, with the same inputs (all of them, used or
 * not: they are the block's signature) and outputs.
 *
 * Why before fusion: a value that reaches no output must reach no kernel. A dead reduction
 * left in the graph is still grouped with its neighbours, and its schedule then decides how
 * live values in the same kernel are computed (a dead row reduction turns a live transpose
 * into a row kernel's output); it also costs a launch or a pass over memory for nothing.
 *
 * Every kept node is copied unchanged (op, attributes, location, origin, result names); a
 * graph with no dead node is copied as it is, so the pass is idempotent.
 */
#include "passes.h"

#include <string.h>

FcStatus pass_dce(const IrGraph *in, IrGraph **out, FcErr *err) {
    *out = NULL;
    FC_CHECK(err, in != NULL);
    int nv = in->values.len, nn = in->nodes.len;
    bool *live = fc_calloc((size_t)nv + 1, sizeof(bool));
    bool *keep = fc_calloc((size_t)nn + 1, sizeof(bool));
    int *map = fc_calloc((size_t)nv + 1, sizeof(int));
    int *ins = NULL;
    IrGraph *g = ir_graph_new(in->name, in->file);
    FcStatus s = live && keep && map && g ? FC_OK : FC_OOM(err);
    /* liveness: backwards from the outputs (nodes are in topological order) */
    for (int i = 0; s == FC_OK && i < in->outputs.len; i++) {
        int v = in->outputs.data[i];
        if (v < 0 || v >= nv) s = fc_err_set(err, FC_ERR_INTERNAL, "internal error: pass_dce: bad output %d", v);
        else live[v] = true;
    }
    for (int i = nn - 1; s == FC_OK && i >= 0; i--) {
        const IrNode *n = &in->nodes.data[i];
        for (int r = 0; r < n->nout; r++) keep[i] |= live[n->out[r]];
        if (!keep[i]) continue;
        for (int j = 0; j < n->nin; j++) {
            if (n->in[j] < 0 || n->in[j] >= nv) {
                s = fc_err_set(err, FC_ERR_INTERNAL, "internal error: pass_dce: bad value %d", n->in[j]);
                break;
            }
            live[n->in[j]] = true;
        }
    }
    /* the copy */
    for (int v = 0; v < nv && s == FC_OK; v++) map[v] = -1;
    if (s == FC_OK) g->next_origin = in->next_origin;
    if (s == FC_OK) s = ir_copy_fp8_slots(g, in, err);
    for (int i = 0; s == FC_OK && i < in->inputs.len; i++) {
        const IrValue *x = ir_cval(in, in->inputs.data[i]);
        map[in->inputs.data[i]] = ir_add_input(g, x->name, x->dtype, &x->shape, in->is_param.data[i]);
        if (map[in->inputs.data[i]] < 0) s = FC_OOM(err);
    }
    for (int i = 0; s == FC_OK && i < nn; i++) {
        if (!keep[i]) continue;
        const IrNode *n = &in->nodes.data[i];
        int *ni = fc_realloc(ins, sizeof(int) * (size_t)(n->nin > 0 ? n->nin : 1));
        if (!ni) { s = FC_OOM(err); break; }
        ins = ni;
        for (int j = 0; j < n->nin; j++) ins[j] = map[n->in[j]];
        int first = -1;
        s = ir_add_node(g, n->op, ins, n->nin, &n->a, n->loc, n->origin, n->origin_op, &first, err);
        if (s == FC_ERR_INPUT) {   /* the graph was verified: a shape rule refusing a copy is a bug */
            char msg[sizeof err->msg];
            memcpy(msg, err->msg, sizeof msg);
            s = fc_err_set(err, FC_ERR_INTERNAL, "internal error: pass_dce: copying '%s': %s", ir_ops[n->op].name, msg);
        }
        if (s != FC_OK) break;
        s = ir_map_results(g, in, n, first, map, err);
    }
    for (int i = 0; s == FC_OK && i < in->outputs.len; i++)
        s = ir_add_output(g, map[in->outputs.data[i]], in->output_names.data[i], err);
    if (s == FC_OK) s = ir_verify(g, err);
    fc_free(live);
    fc_free(keep);
    fc_free(map);
    fc_free(ins);
    if (s != FC_OK) {
        ir_graph_free(g);
        return s;
    }
    *out = g;
    return FC_OK;
}
