/* precision.c: storage precision (pass_precision, see passes.h; docs/precision.md).
 *
 * Requires: a verified graph (the frontend's). Leaves: a verified graph with the same inputs
 * (names, shapes, param flags, order; f32 dtypes lowered) and outputs (names), where every value
 * the source declared or computed as f32 is stored as the narrow float p (bf16 or f16), except
 * the values kept wide:
 *   - the results of sum and mean (a norm's statistics, a softmax's sum, a mean loss written by
 *     hand): rounding a statistic to 8 bits of significand and then subtracting it from values
 *     near it is where a narrow format loses everything; they are small (reduced) tensors;
 *   - the result of cross_entropy (the loss);
 *   - constants (full, iota): a literal such as a norm's eps keeps the value f32 gives it (1e-5
 *     is a subnormal in f16), and a generator is made in registers, never stored, unless it is
 *     a block output.
 * attention(q, k, v) becomes its steps, each result stored in p (attention_steps).
 * A wide op's lowered inputs are widened to f32 first (a cast, exact), and so are the lowered
 * inputs of any op that also reads a wide value (x - mean(x) is computed from f32 operands);
 * such an op's f32 result is then cast to p. f64 and the narrow types the source declared itself
 * are left as they are; integers and bools too. A cast to f32 becomes a cast to p.
 *
 * Arithmetic stays f32: code generation computes every narrow value in f32 registers and
 * rounds only where a value is stored (a kernel's output, or every op under --strict-rounding),
 * and the composites widen their own inputs (pass_decompose). So each cast this pass adds is
 * elementwise next to its producer or its consumer, under that op's origin: fusion puts it in
 * the producer's or the consumer's kernel, the eager program in that op's kernel, and a value
 * crosses a kernel boundary in p, never in f32 and then again in p.
 *
 * f8 (E4M3/E5M2) needs per-tensor scales to keep activations in its range; the pass does not
 * make them, and the library refuses --precision f8 before it runs. */
#include "passes.h"

#include <math.h>
#include <string.h>

typedef struct Px {
    const IrGraph *src;
    IrGraph *g;
    int *map;          /* src value id -> g value id */
    FcDtype p;         /* the storage type */
    FcErr *err;
    const IrNode *n;   /* the node being copied */
    IrLoc loc;         /* what every node made now gets: n's location, origin and origin op, */
    int origin;        /* or an attention step's own origin */
    IrOp origin_op;
} Px;

static bool wide_op(IrOp op) {
    return op == IR_OP_SUM || op == IR_OP_MEAN || op == IR_OP_CROSS_ENTROPY || op == IR_OP_FULL || op == IR_OP_IOTA;
}

static FcStatus emit(Px *x, IrOp op, const int *ins, int nin, const IrAttrs *a, int *out) {
    FcStatus s = ir_add_node(x->g, op, ins, nin, a, x->loc, x->origin, x->origin_op, out, x->err);
    if (s == FC_ERR_INPUT) {
        char msg[sizeof x->err->msg];
        memcpy(msg, x->err->msg, sizeof msg);
        return fc_err_set(x->err, FC_ERR_INTERNAL, "internal error: pass_precision: '%s' became a bad '%s': %s",
                          ir_ops[x->n->op].name, ir_ops[op].name, msg);
    }
    return s;
}

/* v cast to t (v itself when it is of dtype t). */
static FcStatus cast_to(Px *x, int v, FcDtype t, int *out) {
    if (ir_cval(x->g, v)->dtype == t) {
        *out = v;
        return FC_OK;
    }
    IrAttrs a = {.dtype = t};
    return emit(x, IR_OP_CAST, &v, 1, &a, out);
}

/* attention(q, k, v) with q, k, v lowered: its steps as ops of their own, each with a fresh
 * origin (as pass_decompose's), every step's result stored in p: the scores q @ kT, scaled (in
 * f32, then p), masked, their softmax (the composite computes in f32 and rounds once) and the
 * product with v. The composite would keep the scores and probabilities f32 from end to end, and
 * a [.., T, T] tensor is the largest an attention block stores between kernels (and saves for
 * the backward); the math attention of mixed-precision training stores them narrow too. */
static FcStatus attention_steps(Px *x, const IrNode *n, int *out) {
    int q = x->map[n->in[0]], k = x->map[n->in[1]], v = x->map[n->in[2]];
    int r = ir_cval(x->g, k)->shape.rank;
    int64_t perm[IR_MAX_RANK];
    for (int i = 0; i < r; i++) perm[i] = i;
    perm[r - 2] = r - 1;
    perm[r - 1] = r - 2;
    IrAttrs pa = {.nlist = r, .list = perm}, ca = {.f = n->a.f, .dtype = FC_F32}, wa = {.dtype = FC_F32},
            na = {.dtype = x->p}, ma = {.f = -INFINITY}, sa = {.i = {r - 1}};
    int kt, s, c, sw, p;
    x->origin = x->g->next_origin++, x->origin_op = IR_OP_TRANSPOSE;
    FC_TRY(emit(x, IR_OP_TRANSPOSE, &k, 1, &pa, &kt));
    x->origin = x->g->next_origin++, x->origin_op = IR_OP_MATMUL;
    int qk[2] = {q, kt};
    FC_TRY(emit(x, IR_OP_MATMUL, qk, 2, NULL, &s));
    x->origin = x->g->next_origin++, x->origin_op = IR_OP_MUL;
    FC_TRY(emit(x, IR_OP_FULL, NULL, 0, &ca, &c));
    FC_TRY(emit(x, IR_OP_CAST, &s, 1, &wa, &sw));
    int sc[2] = {sw, c};
    FC_TRY(emit(x, IR_OP_MUL, sc, 2, NULL, &sw));
    FC_TRY(emit(x, IR_OP_CAST, &sw, 1, &na, &s));
    if (n->a.i[0]) {
        x->origin = x->g->next_origin++, x->origin_op = IR_OP_CAUSAL_MASK;
        FC_TRY(emit(x, IR_OP_CAUSAL_MASK, &s, 1, &ma, &s));
    }
    x->origin = x->g->next_origin++, x->origin_op = IR_OP_SOFTMAX;
    FC_TRY(emit(x, IR_OP_SOFTMAX, &s, 1, &sa, &p));
    x->origin = x->g->next_origin++, x->origin_op = IR_OP_MATMUL;
    int pv[2] = {p, v};
    return emit(x, IR_OP_MATMUL, pv, 2, NULL, out);
}

static FcStatus run_node(Px *x, const IrNode *n) {
    x->n = n;
    x->loc = n->loc;
    x->origin = n->origin;
    x->origin_op = n->origin_op;
    if (n->op == IR_OP_ATTENTION) {
        bool low = true;
        for (int k = 0; k < 3; k++) low = low && x->map[n->in[k]] >= 0 && ir_cval(x->g, x->map[n->in[k]])->dtype == x->p;
        if (low) {
            int o = -1;
            FC_TRY(attention_steps(x, n, &o));
            x->map[n->out[0]] = o;
            const char *nm = ir_cval(x->src, n->out[0])->name;
            if (nm && !(ir_val(x->g, o)->name = arena_strdup(&x->g->arena, nm))) return FC_OOM(x->err);
            return FC_OK;
        }
    }
    int *ins = fc_calloc((size_t)(n->nin > 0 ? n->nin : 1), sizeof *ins);
    if (!ins) return FC_OOM(x->err);
    bool widen = wide_op(n->op);
    for (int k = 0; k < n->nin; k++) {
        FC_CHECK(x->err, n->in[k] >= 0 && n->in[k] < x->src->values.len && x->map[n->in[k]] >= 0);
        ins[k] = x->map[n->in[k]];
        /* an f32 operand that stayed f32 (a wide value): the lowered ones meet it in f32 */
        if (ir_cval(x->src, n->in[k])->dtype == FC_F32 && ir_cval(x->g, ins[k])->dtype == FC_F32) widen = true;
    }
    FcStatus s = FC_OK;
    for (int k = 0; k < n->nin && s == FC_OK && widen; k++)
        if (ir_cval(x->src, n->in[k])->dtype == FC_F32) s = cast_to(x, ins[k], FC_F32, &ins[k]);
    IrAttrs a = n->a;
    if (n->op == IR_OP_CAST && a.dtype == FC_F32 && !widen) a.dtype = x->p;
    int first = -1;
    if (s == FC_OK) s = emit(x, n->op, ins, n->nin, &a, &first);
    fc_free(ins);
    if (s != FC_OK) return s;
    FC_CHECK(x->err, x->g->nodes.data[x->g->nodes.len - 1].nout == n->nout);
    for (int k = 0; k < n->nout; k++) {
        int v = first + k;
        /* an f32 result is stored in p, but a wide op's */
        if (!wide_op(n->op) && ir_cval(x->src, n->out[k])->dtype == FC_F32) FC_TRY(cast_to(x, v, x->p, &v));
        x->map[n->out[k]] = v;
        const char *nm = ir_cval(x->src, n->out[k])->name;
        if (nm && !(ir_val(x->g, v)->name = arena_strdup(&x->g->arena, nm))) return FC_OOM(x->err);
    }
    return FC_OK;
}

static FcStatus run(Px *x) {
    const IrGraph *src = x->src;
    int retype[FC_DTYPE_COUNT];
    for (int t = 0; t < FC_DTYPE_COUNT; t++) retype[t] = t == FC_F32 ? (int)x->p : -1;
    FC_TRY(ir_copy_inputs(x->g, src, retype, x->map, x->err));
    for (int i = 0; i < src->nodes.len; i++) FC_TRY(run_node(x, &src->nodes.data[i]));
    FC_TRY(ir_copy_outputs(x->g, src, x->map, x->err));
    return ir_verify(x->g, x->err);
}

FcStatus pass_precision(const IrGraph *in, FcDtype p, IrGraph **out, FcErr *err) {
    *out = NULL;
    FC_CHECK(err, in != NULL && (p == FC_BF16 || p == FC_F16));
    Px x = {.src = in, .p = p, .err = err};
    x.g = ir_graph_new(in->name, in->file);
    x.map = fc_calloc((size_t)(in->values.len > 0 ? in->values.len : 1), sizeof *x.map);
    FcStatus s = x.g && x.map ? run(&x) : FC_OOM(err);
    fc_free(x.map);
    if (s != FC_OK) {
        ir_graph_free(x.g);
        return s;
    }
    *out = x.g;
    return FC_OK;
}
