/* decompose.c: composite ops and split into primitives (pass_decompose, see passes.h).
 *
 * Requires: a verified graph. Leaves: a verified graph with no IR_CAT_COMPOSITE op and no
 * split, with the same inputs (names, types, param flags, order) and outputs (names).
 *
 * Every node is copied through unchanged (op, attributes, location, origin) except:
 *   split(x) {sizes, axis}   -> one slice per section (start = running offset, step 1)
 *   softmax(x) {axis}        -> m = max(x, axis, keepdim); e = exp(x - m); e / sum(e, axis, keepdim)
 *   log_softmax(x) {axis}    -> d = x - max(x, axis, keepdim); d - log(sum(exp(d), axis, keepdim))
 *   layernorm(x, g?, b?)     -> d = x - mean(x); d * rsqrt(mean(d * d) + eps) [* g] [+ b]
 *   rmsnorm(x, g?)           -> x * rsqrt(mean(x * x) + eps) [* g]
 *   causal_mask(s) {value}   -> where(le(iota1, iota0 + (Tk - Tq)), s, full(value)), iotas i64 [Tq, Tk]
 *   gelu(x) none             -> x * ndtr(x)
 *   gelu(x) tanh             -> u = sqrt(2/pi) * (x + 0.044715 * x*x*x); e = exp(-abs(u));
 *                               f = where(u < 0, e, 1); x * f * f / (1 + e * e)
 *   attention(q, k, v)       -> softmax(causal?(q @ transpose(k) * scale)) @ v
 *   dropout(x) {p, seed}     -> where(dropout_mask(shape of x, p, seed), x * full(1 / (1 - p)), full(0))
 *   cross_entropy(x, y)      -> d = x - max(x); per row log(sum(exp(d))) - sum(where(iota == y, d, 0))
 *                               + gather(full([C], 0), y) (the label's range check); mean over rows
 * (reductions over the op's axes with keepdim=1; scalars are rank-0 `full` nodes of the
 * working dtype). The nodes an expansion makes keep the composite's location, origin and
 * origin op, except attention: each of its steps (transpose of k, q @ kT, the scale, the
 * causal mask, the softmax, @ v) gets a fresh origin from next_origin, with origin op
 * transpose / matmul / mul / causal_mask / softmax / matmul, and the mask and softmax
 * steps are expanded as above under those origins; and cross_entropy's final mean (and
 * cast back), which gets a fresh origin with origin op cross_entropy.
 *
 * Narrow floats (f16, bf16, f8): the expansion casts its float inputs to f32, computes in
 * f32 and casts the result back once, so it rounds once like the composite does. (The
 * mask only selects, so causal_mask alone stays in the input dtype: the result is the same.)
 */
#include "passes.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct Dx {
    const IrGraph *src;
    const bool *keep;      /* [IR_OP_COUNT] composites left as they are, or NULL */
    IrGraph *g;            /* the graph being built */
    int *map;              /* src value id -> g value id, -1 before it is made */
    FcErr *err;
    IrLoc loc;             /* of the node being expanded */
    int origin;            /* what every node made now gets */
    IrOp origin_op;
} Dx;

/* ---- building blocks ---------------------------------------------------------------------- */
static FcStatus emit(Dx *d, IrOp op, const int *ins, int nin, const IrAttrs *a, int *out) {
    FcStatus s = ir_add_node(d->g, op, ins, nin, a, d->loc, d->origin, d->origin_op, out, d->err);
    if (s == FC_ERR_INPUT) {
        /* the source graph was verified, so a shape rule rejecting an expansion is a bug here */
        char msg[sizeof d->err->msg];
        memcpy(msg, d->err->msg, sizeof msg);
        return fc_err_set(d->err, FC_ERR_INTERNAL, "internal error: pass_decompose: expanding '%s' made a bad '%s': %s",
                          ir_ops[d->origin_op].name, ir_ops[op].name, msg);
    }
    return s;
}

static FcStatus un(Dx *d, IrOp op, int x, int *out) { return emit(d, op, &x, 1, NULL, out); }

static FcStatus bin(Dx *d, IrOp op, int a, int b, int *out) {
    int ins[2] = {a, b};
    return emit(d, op, ins, 2, NULL, out);
}

/* A rank-0 constant of dtype t. */
static FcStatus scalar(Dx *d, FcDtype t, double v, int *out) {
    IrAttrs a = {.f = v, .dtype = t};
    return emit(d, IR_OP_FULL, NULL, 0, &a, out);
}

/* Reduction over `axes` (normalized), keepdim. */
static FcStatus reduce(Dx *d, IrOp op, int x, int64_t *axes, int naxes, int *out) {
    IrAttrs a = {.nlist = naxes, .list = axes, .i = {1}};
    return emit(d, op, &x, 1, &a, out);
}

static FcStatus cast(Dx *d, int x, FcDtype t, int *out) {
    IrAttrs a = ir_storage_cast(ir_cval(d->g, x)->dtype, t);   /* the composite's result may stay wide */
    return emit(d, IR_OP_CAST, &x, 1, &a, out);
}

static FcDtype dtype_of(const Dx *d, int v) { return ir_cval(d->g, v)->dtype; }

static bool is_narrow(FcDtype t) { return t == FC_F16 || t == FC_BF16 || t == FC_F8E4M3 || t == FC_F8E5M2; }

/* x itself, or x cast to f32 when its dtype is a narrow float. */
static FcStatus widen(Dx *d, int x, int *out) {
    if (!is_narrow(dtype_of(d, x))) {
        *out = x;
        return FC_OK;
    }
    return cast(d, x, FC_F32, out);
}

/* y cast back to t when the expansion widened. */
static FcStatus narrow_back(Dx *d, int y, FcDtype t, int *out) {
    if (dtype_of(d, y) == t) {
        *out = y;
        return FC_OK;
    }
    return cast(d, y, t, out);
}

/* ---- expansions (inputs and result are ids in d->g) ------------------------------------------ */
/* softmax or log_softmax of x (already in its working dtype) along axis. */
static FcStatus softmax_core(Dx *d, int x, int64_t axis, bool log_form, int *out) {
    int64_t ax[1] = {axis};
    int m, dv, e, s;
    FC_TRY(reduce(d, IR_OP_MAX, x, ax, 1, &m));
    FC_TRY(bin(d, IR_OP_SUB, x, m, &dv));
    FC_TRY(un(d, IR_OP_EXP, dv, &e));
    FC_TRY(reduce(d, IR_OP_SUM, e, ax, 1, &s));
    if (!log_form) return bin(d, IR_OP_DIV, e, s, out);
    int l;
    FC_TRY(un(d, IR_OP_LOG, s, &l));
    return bin(d, IR_OP_SUB, dv, l, out);
}

/* causal_mask of s [.., Tq, Tk]: keeps s[i, j] where j <= i + (Tk - Tq), else value. */
static FcStatus causal_core(Dx *d, int s, double value, int *out) {
    const IrShape *sh = &ir_cval(d->g, s)->shape;
    int64_t tq = sh->dims[sh->rank - 2], tk = sh->dims[sh->rank - 1];
    int64_t dims[2] = {tq, tk};
    IrAttrs a0 = {.nlist = 2, .list = dims, .i = {0}, .dtype = FC_I64};
    IrAttrs a1 = {.nlist = 2, .list = dims, .i = {1}, .dtype = FC_I64};
    int row, col, off, lim, keep, fill;
    FC_TRY(emit(d, IR_OP_IOTA, NULL, 0, &a0, &row));
    FC_TRY(emit(d, IR_OP_IOTA, NULL, 0, &a1, &col));
    FC_TRY(scalar(d, FC_I64, (double)(tk - tq), &off));
    FC_TRY(bin(d, IR_OP_ADD, row, off, &lim));
    FC_TRY(bin(d, IR_OP_LE, col, lim, &keep));
    FC_TRY(scalar(d, dtype_of(d, s), value, &fill));
    int ins[3] = {keep, s, fill};
    return emit(d, IR_OP_WHERE, ins, 3, NULL, out);
}

static FcStatus expand_softmax(Dx *d, const IrNode *n, int *out) {
    int x = d->map[n->in[0]], xw, y;
    FcDtype t = dtype_of(d, x);
    FC_TRY(widen(d, x, &xw));
    FC_TRY(softmax_core(d, xw, n->a.i[0], n->op == IR_OP_LOG_SOFTMAX, &y));
    return narrow_back(d, y, t, out);
}

static FcStatus expand_norm(Dx *d, const IrNode *n, int *out) {
    bool ln = n->op == IR_OP_LAYERNORM;
    bool has_g = n->a.i[0] != 0, has_b = ln && n->a.i[1] != 0;
    int x = d->map[n->in[0]], xw, y, r, ve, eps;
    FcDtype t = dtype_of(d, x);
    FC_TRY(widen(d, x, &xw));
    FcDtype w = dtype_of(d, xw);
    int centered = xw, var;
    if (ln) {
        int mu, sq;
        FC_TRY(reduce(d, IR_OP_MEAN, xw, n->a.list, n->a.nlist, &mu));
        FC_TRY(bin(d, IR_OP_SUB, xw, mu, &centered));
        FC_TRY(bin(d, IR_OP_MUL, centered, centered, &sq));
        FC_TRY(reduce(d, IR_OP_MEAN, sq, n->a.list, n->a.nlist, &var));
    } else {
        int sq;
        FC_TRY(bin(d, IR_OP_MUL, xw, xw, &sq));
        FC_TRY(reduce(d, IR_OP_MEAN, sq, n->a.list, n->a.nlist, &var));
    }
    FC_TRY(scalar(d, w, n->a.f, &eps));
    FC_TRY(bin(d, IR_OP_ADD, var, eps, &ve));
    FC_TRY(un(d, IR_OP_RSQRT, ve, &r));
    FC_TRY(bin(d, IR_OP_MUL, centered, r, &y));
    if (has_g) {
        int gw;
        FC_TRY(widen(d, d->map[n->in[1]], &gw));
        FC_TRY(bin(d, IR_OP_MUL, y, gw, &y));
    }
    if (has_b) {
        int bw;
        FC_TRY(widen(d, d->map[n->in[has_g ? 2 : 1]], &bw));
        FC_TRY(bin(d, IR_OP_ADD, y, bw, &y));
    }
    return narrow_back(d, y, t, out);
}

/* gelu without cancellation: the textbook forms 0.5 x (1 + erf(x / sqrt 2)) and
 * 0.5 x (1 + tanh u) subtract nearly equal numbers for negative x (and return -0 once erf or
 * tanh rounds to -1), while x ndtr(x) and x sigmoid(2u) are accurate over the whole range.
 * sigmoid(2u) is written with e = exp(-|u|) so nothing overflows: 1 / (1 + e^2) for u >= 0 and
 * e^2 / (1 + e^2) for u < 0, with x multiplied by e twice there so that results in the
 * subnormal range are not flushed early (exp(-2u) itself overflows from x = -10.05 on, where
 * gelu is still about -3e-38). */
static FcStatus expand_gelu(Dx *d, const IrNode *n, int *out) {
    int x = d->map[n->in[0]], xw, y;
    FcDtype t = dtype_of(d, x);
    FC_TRY(widen(d, x, &xw));
    FcDtype w = dtype_of(d, xw);
    if (n->a.i[0] == IR_APPROX_TANH) {
        int x2, x3, c1, a, b, c2, u, au, nu, e, e2, one, den, zero, neg, f, xf, xff;
        FC_TRY(bin(d, IR_OP_MUL, xw, xw, &x2));
        FC_TRY(bin(d, IR_OP_MUL, x2, xw, &x3));
        FC_TRY(scalar(d, w, 0.044715, &c1));
        FC_TRY(bin(d, IR_OP_MUL, c1, x3, &a));
        FC_TRY(bin(d, IR_OP_ADD, xw, a, &b));
        FC_TRY(scalar(d, w, sqrt(2.0 / M_PI), &c2));
        FC_TRY(bin(d, IR_OP_MUL, c2, b, &u));
        FC_TRY(un(d, IR_OP_ABS, u, &au));
        FC_TRY(un(d, IR_OP_NEG, au, &nu));
        FC_TRY(un(d, IR_OP_EXP, nu, &e));
        FC_TRY(bin(d, IR_OP_MUL, e, e, &e2));
        FC_TRY(scalar(d, w, 1.0, &one));
        FC_TRY(bin(d, IR_OP_ADD, one, e2, &den));
        FC_TRY(scalar(d, w, 0.0, &zero));
        FC_TRY(bin(d, IR_OP_LT, u, zero, &neg));
        int sel[3] = {neg, e, one};
        FC_TRY(emit(d, IR_OP_WHERE, sel, 3, NULL, &f));
        FC_TRY(bin(d, IR_OP_MUL, xw, f, &xf));
        FC_TRY(bin(d, IR_OP_MUL, xf, f, &xff));
        FC_TRY(bin(d, IR_OP_DIV, xff, den, &y));
    } else {
        int p;
        FC_TRY(un(d, IR_OP_NDTR, xw, &p));
        FC_TRY(bin(d, IR_OP_MUL, xw, p, &y));
    }
    return narrow_back(d, y, t, out);
}

/* dropout(x) {p, seed}: where(dropout_mask(shape of x, p, seed), x * scale, 0) with the scale
 * 1 / (1 - p) a constant of x's dtype (the product rounds once, as the composite does). */
static FcStatus expand_dropout(Dx *d, const IrNode *n, int *out) {
    int x = d->map[n->in[0]], keep, scale, kept, zero;
    FcDtype t = dtype_of(d, x);
    IrShape s = ir_cval(d->g, x)->shape;
    IrAttrs ma = {.nlist = s.rank, .list = s.dims, .f = n->a.f, .i = {n->a.i[0]}};
    FC_TRY(emit(d, IR_OP_DROPOUT_MASK, NULL, 0, &ma, &keep));
    FC_TRY(scalar(d, t, 1.0 / (1.0 - n->a.f), &scale));
    FC_TRY(bin(d, IR_OP_MUL, x, scale, &kept));
    FC_TRY(scalar(d, t, 0.0, &zero));
    int ins[3] = {keep, kept, zero};
    return emit(d, IR_OP_WHERE, ins, 3, NULL, out);
}

/* cross_entropy(logits [.., C], labels [..]): per row (keepdim shapes [.., 1]) with
 * d = x - max(x), loss = log(sum(exp(d))) - sum(where(iota == label, d, 0)) + gather(zeros[C],
 * label); the gather adds 0 and fails the run for a label outside [0, C) (its range check).
 * Then the mean over every row, under a fresh origin (same origin op) so that eager runs the
 * row losses and the mean as two kernels, not one serial kernel. */
static FcStatus expand_cross_entropy(Dx *d, const IrNode *n, int *out) {
    int x = d->map[n->in[0]], y = d->map[n->in[1]], xw;
    FcDtype t = dtype_of(d, x), yt = dtype_of(d, y);
    IrShape xs = ir_cval(d->g, x)->shape;
    int r = xs.rank;
    int64_t ax[1] = {r - 1}, rows[IR_MAX_RANK], all[IR_MAX_RANK], C = xs.dims[r - 1];
    for (int i = 0; i < r; i++) {
        rows[i] = i < r - 1 ? xs.dims[i] : 1;
        all[i] = i;
    }
    FC_TRY(widen(d, x, &xw));
    FcDtype w = dtype_of(d, xw);
    int m, dv, e, s, lse, y1, io, hot, zero, pick, picked, tab, chk, diff, loss, mean;
    FC_TRY(reduce(d, IR_OP_MAX, xw, ax, 1, &m));
    FC_TRY(bin(d, IR_OP_SUB, xw, m, &dv));
    FC_TRY(un(d, IR_OP_EXP, dv, &e));
    FC_TRY(reduce(d, IR_OP_SUM, e, ax, 1, &s));
    FC_TRY(un(d, IR_OP_LOG, s, &lse));
    IrAttrs ra = {.nlist = r, .list = rows};
    FC_TRY(emit(d, IR_OP_RESHAPE, &y, 1, &ra, &y1));
    IrAttrs ia = {.nlist = r, .list = xs.dims, .i = {r - 1}, .dtype = yt};
    FC_TRY(emit(d, IR_OP_IOTA, NULL, 0, &ia, &io));
    FC_TRY(bin(d, IR_OP_EQ, io, y1, &hot));
    FC_TRY(scalar(d, w, 0.0, &zero));
    int sel[3] = {hot, dv, zero};
    FC_TRY(emit(d, IR_OP_WHERE, sel, 3, NULL, &pick));
    FC_TRY(reduce(d, IR_OP_SUM, pick, ax, 1, &picked));
    IrAttrs fa = {.nlist = 1, .list = &C, .dtype = w};
    FC_TRY(emit(d, IR_OP_FULL, NULL, 0, &fa, &tab));
    int gi[2] = {tab, y1};
    FC_TRY(emit(d, IR_OP_GATHER, gi, 2, NULL, &chk));
    FC_TRY(bin(d, IR_OP_SUB, lse, picked, &diff));
    FC_TRY(bin(d, IR_OP_ADD, diff, chk, &loss));
    d->origin = d->g->next_origin++;
    IrAttrs ma = {.nlist = r, .list = all};
    FC_TRY(emit(d, IR_OP_MEAN, &loss, 1, &ma, &mean));
    return narrow_back(d, mean, t, out);
}

static FcStatus expand_causal_mask(Dx *d, const IrNode *n, int *out) {
    return causal_core(d, d->map[n->in[0]], n->a.f, out);
}

/* Starts a fresh origin for one step of attention. */
static void step(Dx *d, IrOp op) {
    d->origin = d->g->next_origin++;
    d->origin_op = op;
}

static FcStatus expand_attention(Dx *d, const IrNode *n, int *out) {
    int q = d->map[n->in[0]], k = d->map[n->in[1]], v = d->map[n->in[2]];
    FcDtype t = dtype_of(d, q);
    int r = ir_cval(d->g, k)->shape.rank;
    int64_t perm[IR_MAX_RANK];
    for (int i = 0; i < r; i++) perm[i] = i;
    perm[r - 2] = r - 1;
    perm[r - 1] = r - 2;
    IrAttrs pa = {.nlist = r, .list = perm};
    int kw, kt, qw, s, c, p, vw, o;

    step(d, IR_OP_TRANSPOSE);
    FC_TRY(widen(d, k, &kw));
    FC_TRY(emit(d, IR_OP_TRANSPOSE, &kw, 1, &pa, &kt));

    step(d, IR_OP_MATMUL);
    FC_TRY(widen(d, q, &qw));
    FC_TRY(bin(d, IR_OP_MATMUL, qw, kt, &s));

    step(d, IR_OP_MUL);
    FC_TRY(scalar(d, dtype_of(d, s), n->a.f, &c));
    FC_TRY(bin(d, IR_OP_MUL, s, c, &s));

    if (n->a.i[0]) {
        step(d, IR_OP_CAUSAL_MASK);
        FC_TRY(causal_core(d, s, -INFINITY, &s));
    }

    step(d, IR_OP_SOFTMAX);
    if (d->keep && d->keep[IR_OP_SOFTMAX]) {
        IrAttrs sa = {.i = {ir_cval(d->g, s)->shape.rank - 1}};
        FC_TRY(emit(d, IR_OP_SOFTMAX, &s, 1, &sa, &p));
    } else {
        FC_TRY(softmax_core(d, s, ir_cval(d->g, s)->shape.rank - 1, false, &p));
    }

    step(d, IR_OP_MATMUL);
    FC_TRY(widen(d, v, &vw));
    FC_TRY(bin(d, IR_OP_MATMUL, p, vw, &o));
    return narrow_back(d, o, t, out);
}

static FcStatus expand_split(Dx *d, const IrNode *n) {
    int x = d->map[n->in[0]];
    int64_t off = 0;
    for (int k = 0; k < n->nout; k++) {
        IrAttrs a = {.i = {n->a.i[0], off, off + n->a.list[k], 1}};
        FC_TRY(emit(d, IR_OP_SLICE, &x, 1, &a, &d->map[n->out[k]]));
        off += n->a.list[k];
    }
    return FC_OK;
}

/* A node that stays as it is, with its inputs renamed. */
static FcStatus copy_node(Dx *d, const IrNode *n) {
    int *ins = fc_calloc((size_t)(n->nin > 0 ? n->nin : 1), sizeof *ins);
    if (!ins) return FC_OOM(d->err);
    for (int k = 0; k < n->nin; k++) ins[k] = d->map[n->in[k]];
    int first;
    FcStatus s = emit(d, n->op, ins, n->nin, &n->a, &first);
    fc_free(ins);
    if (s != FC_OK) return s;
    FC_CHECK(d->err, d->g->nodes.data[d->g->nodes.len - 1].nout == n->nout);
    for (int k = 0; k < n->nout; k++) d->map[n->out[k]] = first + k;
    return FC_OK;
}

static FcStatus run_node(Dx *d, const IrNode *n) {
    for (int k = 0; k < n->nin; k++) FC_CHECK(d->err, n->in[k] >= 0 && n->in[k] < d->src->values.len && d->map[n->in[k]] >= 0);
    d->loc = n->loc;
    d->origin = n->origin;
    d->origin_op = n->origin_op;
    int r = -1;
    if (d->keep && d->keep[n->op]) return copy_node(d, n);
    switch (n->op) {
    case IR_OP_SPLIT: FC_TRY(expand_split(d, n)); break;
    case IR_OP_SOFTMAX:
    case IR_OP_LOG_SOFTMAX: FC_TRY(expand_softmax(d, n, &r)); break;
    case IR_OP_LAYERNORM:
    case IR_OP_RMSNORM: FC_TRY(expand_norm(d, n, &r)); break;
    case IR_OP_CAUSAL_MASK: FC_TRY(expand_causal_mask(d, n, &r)); break;
    case IR_OP_ATTENTION: FC_TRY(expand_attention(d, n, &r)); break;
    case IR_OP_GELU: FC_TRY(expand_gelu(d, n, &r)); break;
    case IR_OP_DROPOUT: FC_TRY(expand_dropout(d, n, &r)); break;
    case IR_OP_CROSS_ENTROPY: FC_TRY(expand_cross_entropy(d, n, &r)); break;
    default:
        FC_CHECK(d->err, ir_ops[n->op].cat != IR_CAT_COMPOSITE); /* a new composite needs an expansion here */
        FC_TRY(copy_node(d, n));
        break;
    }
    if (r >= 0) d->map[n->out[0]] = r;
    /* results keep their source names */
    for (int k = 0; k < n->nout; k++) {
        const char *nm = ir_cval(d->src, n->out[k])->name;
        if (nm && !(ir_val(d->g, d->map[n->out[k]])->name = arena_strdup(&d->g->arena, nm))) return FC_OOM(d->err);
    }
    return FC_OK;
}

static FcStatus run(Dx *d) {
    const IrGraph *src = d->src;
    FC_TRY(ir_copy_inputs(d->g, src, NULL, d->map, d->err));
    for (int i = 0; i < src->nodes.len; i++) FC_TRY(run_node(d, &src->nodes.data[i]));
    FC_TRY(ir_copy_outputs(d->g, src, d->map, d->err));
    return ir_verify(d->g, d->err);
}

FcStatus pass_decompose(const IrGraph *in, IrGraph **out, FcErr *err) {
    return pass_decompose_keep(in, NULL, out, err);
}

FcStatus pass_decompose_keep(const IrGraph *in, const bool *keep, IrGraph **out, FcErr *err) {
    *out = NULL;
    FC_CHECK(err, in != NULL);
    Dx d = {.src = in, .keep = keep, .err = err};
    d.g = ir_graph_new(in->name, in->file);
    d.map = fc_calloc((size_t)(in->values.len > 0 ? in->values.len : 1), sizeof *d.map);
    FcStatus s = d.g && d.map ? run(&d) : FC_OOM(err);
    fc_free(d.map);
    if (s != FC_OK) {
        ir_graph_free(d.g);
        return s;
    }
    *out = d.g;
    return FC_OK;
}
