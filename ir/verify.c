/* verify.c: the graph IR's invariants (ir_verify), checked after the frontend and after
 * every pass in debug builds.
 *
 * Checks, in this order, and reports the first violation as FC_ERR_INTERNAL:
 * - the graph's bookkeeping: parallel vectors of equal length, names present;
 * - inputs: ids in range, each a distinct value marked as that input (node -1, result = its
 *   index), and every value marked as an input is one;
 * - nodes, in array order: a known op, arity within the op table's range, result count
 *   (fixed by the table, or the section count for split), result values in range and
 *   pointing back at (node, result), inputs defined before use (topological order),
 *   origin in [0, next_origin) and a known origin op;
 * - attribute slots that the op's ATTRS string does not name are zero (so the printed form,
 *   which shows only named slots, is complete);
 * - binary ops, comparisons and where's data inputs share one dtype; where's condition is bool;
 * - the shape rule, re-run on a scratch copy of the node, accepts it, gives exactly the
 *   stored result dtypes and shapes, and leaves the attributes unchanged (they are
 *   normalized already);
 * - outputs: ids in range, names present.
 * Every value is then defined exactly once, by an input or by one node's result.
 */
#include "ir.h"

#include <math.h>

#include <stdio.h>
#include <string.h>

/* Records a violation, prefixed with the block name. */
static FcStatus bad(const IrGraph *g, FcErr *err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static FcStatus bad(const IrGraph *g, FcErr *err, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return fc_err_set(err, FC_ERR_INTERNAL, "internal error: ir_verify: block '%s': %s", g->name ? g->name : "?", msg);
}

/* Slots named by ATTRS: bit 0..3 i[0..3], bit 4 list, bit 5 f, bit 6 dtype. */
static unsigned named_slots(IrOp op) {
    unsigned m = 0;
    const char *p = ir_ops[op].attrs;
    while (*p) {
        while (*p == ' ') p++;
        if (!*p) break;
        if (p[0] == 'L') m |= 1u << 4;
        else if (p[0] == 'f') m |= 1u << 5;
        else if (p[0] == 'd') m |= 1u << 6;
        else if ((p[0] == 'i' || p[0] == 's') && p[1] >= '0' && p[1] <= '3') m |= 1u << (p[1] - '0');
        p += strcspn(p, " ");
    }
    return m;
}

static bool attrs_equal(const IrAttrs *a, const IrAttrs *b) {
    if (a->nlist != b->nlist || a->dtype != b->dtype) return false;
    if (memcmp(a->i, b->i, sizeof a->i) != 0 || memcmp(&a->f, &b->f, sizeof a->f) != 0) return false;
    return a->nlist == 0 || memcmp(a->list, b->list, sizeof(int64_t) * (size_t)a->nlist) == 0;
}

/* The node header for messages: "node 3 (%5 = add)". */
static void node_desc(const IrNode *n, int i, char *buf, size_t len) {
    const char *name = (unsigned)n->op < IR_OP_COUNT ? ir_ops[n->op].name : "?";
    if (n->nout > 0 && n->out) snprintf(buf, len, "node %d (%%%d = %s)", i, n->out[0], name);
    else snprintf(buf, len, "node %d (%s)", i, name);
}

/* Re-runs the node's shape rule on a scratch copy and compares. */
static FcStatus check_rule(const IrGraph *g, const IrNode *n, const char *nd, FcErr *err) {
    IrNode c = *n;
    int cap = n->a.nlist > 4 ? n->a.nlist : 4;
    int64_t *list = fc_calloc((size_t)(n->a.nlist > 0 ? n->a.nlist : 1), sizeof *list);
    FcDtype *dt = fc_calloc((size_t)cap, sizeof *dt);
    IrShape *sh = fc_calloc((size_t)cap, sizeof *sh);
    FcStatus s = FC_OK;
    if (!list || !dt || !sh) {
        s = FC_OOM(err);
        goto done;
    }
    if (n->a.nlist > 0) memcpy(list, n->a.list, sizeof(int64_t) * (size_t)n->a.nlist);
    c.a.list = n->a.nlist > 0 ? list : NULL;
    int nout = ir_ops[n->op].nout > 0 ? ir_ops[n->op].nout : 0;
    FcErr rerr = {0};
    if (ir_check_storage_operands(g, &c, &rerr) != FC_OK || ir_ops[n->op].shape(g, &c, dt, sh, &nout, &rerr) != FC_OK) {
        s = bad(g, err, "%s: its shape rule rejects it: %s", nd, rerr.msg);
        goto done;
    }
    if (nout != n->nout) {
        s = bad(g, err, "%s: has %d results; its shape rule gives %d", nd, n->nout, nout);
        goto done;
    }
    for (int k = 0; k < nout; k++) {
        const IrValue *v = ir_cval(g, n->out[k]);
        if (v->dtype != dt[k] || !ir_shape_eq(&v->shape, &sh[k])) {
            char have[256], want[256];
            ir_type_str(v->dtype, &v->shape, have, sizeof have);
            ir_type_str(dt[k], &sh[k], want, sizeof want);
            s = bad(g, err, "%s: result %%%d has type %s; its shape rule gives %s", nd, n->out[k], have, want);
            goto done;
        }
    }
    if (!attrs_equal(&c.a, &n->a)) s = bad(g, err, "%s: attributes are not normalized (the shape rule changes them)", nd);
done:
    fc_free(list);
    fc_free(dt);
    fc_free(sh);
    return s;
}

static FcStatus check_node(const IrGraph *g, int i, FcErr *err) {
    const IrNode *n = &g->nodes.data[i];
    char nd[96];
    node_desc(n, i, nd, sizeof nd);
    if ((unsigned)n->op >= IR_OP_COUNT) return bad(g, err, "node %d has an unknown op %d", i, (int)n->op);
    const IrOpInfo *info = &ir_ops[n->op];
    if (n->nin < info->min_in || (info->max_in >= 0 && n->nin > info->max_in) || (n->nin > 0 && !n->in))
        return bad(g, err, "%s: has %d inputs; '%s' takes %d to %d", nd, n->nin, info->name, info->min_in, info->max_in);
    int want_out = info->nout > 0 ? info->nout : n->a.nlist;
    if (n->nout != want_out || n->nout < 1 || !n->out)
        return bad(g, err, "%s: has %d results; expected %d", nd, n->nout, want_out);
    if (n->a.nlist < 0 || (n->a.nlist > 0 && !n->a.list))
        return bad(g, err, "%s: has a malformed attribute list", nd);
    for (int k = 0; k < n->nout; k++) {
        int v = n->out[k];
        if (v < 0 || v >= g->values.len) return bad(g, err, "%s: result id %%%d is out of range", nd, v);
        const IrValue *val = ir_cval(g, v);
        if (val->node != i || val->result != k)
            return bad(g, err, "%s: value %%%d is its result %d but says it comes from node %d, result %d", nd, v, k,
                       val->node, val->result);
    }
    for (int k = 0; k < n->nin; k++) {
        int v = n->in[k];
        if (v < 0 || v >= g->values.len) return bad(g, err, "%s: input id %%%d is out of range", nd, v);
        if (ir_cval(g, v)->node >= i)
            return bad(g, err, "%s: input %%%d is defined by node %d, not before its use", nd, v, ir_cval(g, v)->node);
    }
    if (n->origin < 0 || n->origin >= g->next_origin)
        return bad(g, err, "%s: origin #%d is outside [0, next_origin=%d)", nd, n->origin, g->next_origin);
    if ((unsigned)n->origin_op >= IR_OP_COUNT) return bad(g, err, "%s: unknown origin op %d", nd, (int)n->origin_op);

    unsigned named = named_slots(n->op);
    for (int k = 0; k < 4; k++)
        if (!(named & (1u << k)) && n->a.i[k] != 0)
            return bad(g, err, "%s: attribute slot i%d is %lld but '%s' does not use it", nd, k, (long long)n->a.i[k],
                       info->name);
    if (!(named & (1u << 4)) && n->a.nlist != 0)
        return bad(g, err, "%s: has an attribute list but '%s' does not use one", nd, info->name);
    if (!(named & (1u << 5)) && memcmp(&n->a.f, &(double){0}, sizeof(double)) != 0)
        return bad(g, err, "%s: attribute slot f is set but '%s' does not use it", nd, info->name);
    if (!(named & (1u << 6)) && n->a.dtype != 0)
        return bad(g, err, "%s: attribute slot d is set but '%s' does not use it", nd, info->name);

    if (n->op == IR_OP_FP8_QUANT || n->op == IR_OP_FP8_DEQUANT) {
        /* the scale is the slot's own: an fp8_scale node's result (of the same slot for a quant) */
        const IrValue *sv = ir_cval(g, n->in[1]);
        const IrNode *sn = sv->node >= 0 ? &g->nodes.data[sv->node] : NULL;
        if (!sn || sn->op != IR_OP_FP8_SCALE || (n->op == IR_OP_FP8_QUANT && sn->a.i[0] != n->a.i[0]))
            return bad(g, err, "%s: its scale %%%d is not an fp8_scale of its slot", nd, n->in[1]);
    } else if (info->cat == IR_CAT_BINARY || info->cat == IR_CAT_COMPARE || info->cat == IR_CAT_SELECT) {
        int a = info->cat == IR_CAT_SELECT ? 1 : 0;
        FcDtype ta = ir_cval(g, n->in[a])->dtype, tb = ir_cval(g, n->in[a + 1])->dtype;
        if (ta != tb)
            return bad(g, err, "%s: inputs %%%d and %%%d have different dtypes, %s and %s", nd, n->in[a], n->in[a + 1],
                       fc_dtype_name(ta) ? fc_dtype_name(ta) : "?", fc_dtype_name(tb) ? fc_dtype_name(tb) : "?");
        if (info->cat == IR_CAT_SELECT && ir_cval(g, n->in[0])->dtype != FC_BOOL)
            return bad(g, err, "%s: condition %%%d is not bool", nd, n->in[0]);
    }
    return check_rule(g, n, nd, err);
}

FcStatus ir_verify(const IrGraph *g, FcErr *err) {
    FC_CHECK(err, g != NULL);
    if (!g->name || !g->file) return bad(g, err, "the block name or file is missing");
    if (g->is_param.len != g->inputs.len)
        return bad(g, err, "%d inputs but %d is_param flags", g->inputs.len, g->is_param.len);
    if (g->output_names.len != g->outputs.len)
        return bad(g, err, "%d outputs but %d output names", g->outputs.len, g->output_names.len);
    if (g->next_origin < 0) return bad(g, err, "next_origin is negative (%d)", g->next_origin);

    for (int i = 0; i < g->inputs.len; i++) {
        int v = g->inputs.data[i];
        if (v < 0 || v >= g->values.len) return bad(g, err, "input %d: id %%%d is out of range", i, v);
        const IrValue *val = ir_cval(g, v);
        if (val->node != -1 || val->result != i)
            return bad(g, err, "input %d: value %%%d says it comes from node %d, result %d", i, v, val->node, val->result);
    }
    for (int v = 0; v < g->values.len; v++) {
        const IrValue *val = ir_cval(g, v);
        if ((unsigned)val->dtype >= FC_DTYPE_COUNT) return bad(g, err, "value %%%d has an unknown dtype %d", v, (int)val->dtype);
        if (val->shape.rank < 0 || val->shape.rank > IR_MAX_RANK)
            return bad(g, err, "value %%%d has rank %d", v, val->shape.rank);
        for (int d = 0; d < val->shape.rank; d++)
            if (val->shape.dims[d] < 1) return bad(g, err, "value %%%d has a size %lld < 1", v, (long long)val->shape.dims[d]);
        int64_t nbytes;
        if (!ir_shape_nbytes(&val->shape, val->dtype, &nbytes)) return bad(g, err, "value %%%d's byte count overflows", v);
        if (val->node == -1) {
            if (val->result < 0 || val->result >= g->inputs.len || g->inputs.data[val->result] != v)
                return bad(g, err, "value %%%d says it is input %d, which it is not", v, val->result);
        } else if (val->node < 0 || val->node >= g->nodes.len) {
            return bad(g, err, "value %%%d says it comes from node %d, which does not exist", v, val->node);
        } else {
            const IrNode *n = &g->nodes.data[val->node];
            if (val->result < 0 || val->result >= n->nout || !n->out || n->out[val->result] != v)
                return bad(g, err, "value %%%d says it is result %d of node %d, which it is not", v, val->result, val->node);
        }
    }
    for (int k = 0; k < g->fp8.len; k++) {
        const IrFp8Slot *sl = &g->fp8.data[k];
        int e;
        if (sl->fmt != FC_F8E4M3 && sl->fmt != FC_F8E5M2) return bad(g, err, "f8 slot %d has format %d, not an f8 type", k, (int)sl->fmt);
        if (!(sl->scale > 0) || !isfinite(sl->scale) || frexp(sl->scale, &e) != 0.5)
            return bad(g, err, "f8 slot %d's scale %g is not a positive finite power of two", k, sl->scale);
        /* a tensor's gradient slot: another slot, E5M2, with no gradient slot of its own */
        if (sl->grad != -1 && (sl->grad < 0 || sl->grad >= g->fp8.len || sl->grad == k ||
                               g->fp8.data[sl->grad].fmt != FC_F8E5M2 || g->fp8.data[sl->grad].grad != -1))
            return bad(g, err, "f8 slot %d's gradient slot %d is not another E5M2 slot without one of its own", k, sl->grad);
        /* an interface input's: an input of the slot's format, one slot an input, nothing else */
        if (sl->input != -1) {
            if (sl->input < 0 || sl->input >= g->inputs.len || ir_cval(g, g->inputs.data[sl->input])->dtype != sl->fmt)
                return bad(g, err, "f8 slot %d's input %d is not an input of the slot's format", k, sl->input);
            if (sl->grad != -1 || sl->read_only) return bad(g, err, "f8 slot %d of input %d has a gradient slot or is read_only", k, sl->input);
            for (int j = 0; j < k; j++)
                if (g->fp8.data[j].input == sl->input) return bad(g, err, "f8 slots %d and %d both scale input %d", j, k, sl->input);
        }
    }
    for (int i = 0; i < g->nodes.len; i++) FC_TRY(check_node(g, i, err));
    /* one tensor a slot: at most one fp8_quant of each */
    for (int i = 0; i < g->nodes.len; i++) {
        const IrNode *n = &g->nodes.data[i];
        if (n->op != IR_OP_FP8_QUANT) continue;
        if (g->fp8.data[n->a.i[0]].input >= 0)
            return bad(g, err, "node %d quantizes with f8 slot %lld, input %d's", i, (long long)n->a.i[0],
                       g->fp8.data[n->a.i[0]].input);
        for (int j = i + 1; j < g->nodes.len; j++)
            if (g->nodes.data[j].op == IR_OP_FP8_QUANT && g->nodes.data[j].a.i[0] == n->a.i[0])
                return bad(g, err, "nodes %d and %d both quantize with f8 slot %lld", i, j, (long long)n->a.i[0]);
    }
    for (int i = 0; i < g->outputs.len; i++) {
        int v = g->outputs.data[i];
        if (v < 0 || v >= g->values.len) return bad(g, err, "output %d: id %%%d is out of range", i, v);
        if (!g->output_names.data[i]) return bad(g, err, "output %d has no name", i);
    }
    return FC_OK;
}
