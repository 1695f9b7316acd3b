/* shape.c: the shape and dtype rule of every op (named by the SHAPE column of ops.def).
 *
 * Each rule checks its inputs and attributes, normalizes the attributes (axes
 * non-negative and sorted, reshape's -1 resolved, slice bounds clamped) and writes the
 * result types. Errors are user errors (FC_ERR_INPUT) with a message that names what was
 * found and what was expected; the caller adds the source location.
 */
#include "ir.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define RULE(NAME)                                                                            \
    FcStatus ir_rule_##NAME(const IrGraph *g, IrNode *n, FcDtype *odt, IrShape *osh, int *nout, \
                             FcErr *err)
/* all rules are declared by graph.c through the X-macro; repeat the prototypes here */
#define OP(ID, NAME, MININ, MAXIN, NOUT, CAT, ATTRS, SHAPE, FLOPS) RULE(SHAPE);
#include "ops.def"
#undef OP

static const IrValue *in(const IrGraph *g, const IrNode *n, int i) { return ir_cval(g, n->in[i]); }
static const char *opname(const IrNode *n) { return ir_ops[n->op].name; }
static void tstr(const IrValue *v, char *buf, size_t len) { ir_type_str(v->dtype, &v->shape, buf, len); }

/* Normalizes axis `ax` for a tensor of rank `rank` (negative counts from the end). */
static FcStatus norm_axis(const IrNode *n, int64_t ax, int rank, int64_t *out, FcErr *err) {
    if (ax < -rank || ax >= rank || rank == 0)
        return fc_err_set(err, FC_ERR_INPUT, "axis %lld is out of range for '%s' of a rank-%d tensor (expected %d..%d)",
                          (long long)ax, opname(n), rank, -rank, rank - 1);
    *out = ax < 0 ? ax + rank : ax;
    return FC_OK;
}

/* Normalizes and sorts the node's axis list; rejects repeats. */
static FcStatus norm_axes(IrNode *n, int rank, FcErr *err) {
    for (int i = 0; i < n->a.nlist; i++) FC_TRY(norm_axis(n, n->a.list[i], rank, &n->a.list[i], err));
    for (int i = 1; i < n->a.nlist; i++) {
        int64_t v = n->a.list[i];
        int j = i - 1;
        while (j >= 0 && n->a.list[j] > v) { n->a.list[j + 1] = n->a.list[j]; j--; }
        n->a.list[j + 1] = v;
    }
    for (int i = 1; i < n->a.nlist; i++)
        if (n->a.list[i] == n->a.list[i - 1])
            return fc_err_set(err, FC_ERR_INPUT, "axis %lld is repeated in '%s'", (long long)n->a.list[i], opname(n));
    return FC_OK;
}

static FcStatus need_float(const IrNode *n, const IrValue *v, FcErr *err) {
    if (!ir_dtype_is_float(v->dtype))
        return fc_err_set(err, FC_ERR_INPUT, "'%s' expects a floating-point tensor; got %s", opname(n),
                          fc_dtype_name(v->dtype));
    return FC_OK;
}

static FcStatus same_dtype(const IrNode *n, const IrValue *a, const IrValue *b, FcErr *err) {
    if (a->dtype != b->dtype)
        return fc_err_set(err, FC_ERR_INPUT, "'%s' operands have different dtypes: %s and %s", opname(n),
                          fc_dtype_name(a->dtype), fc_dtype_name(b->dtype));
    return FC_OK;
}

static FcStatus bcast(const IrNode *n, const IrShape *a, const IrShape *b, IrShape *o, FcErr *err) {
    if (!ir_shape_broadcast(a, b, o)) {
        char sa[256], sb[256];
        ir_type_str(FC_F32, a, sa, sizeof sa);
        ir_type_str(FC_F32, b, sb, sizeof sb);
        /* print the shapes without the dtype */
        return fc_err_set(err, FC_ERR_INPUT, "shapes %s and %s cannot be broadcast together in '%s'",
                          strchr(sa, '['), strchr(sb, '['), opname(n));
    }
    return FC_OK;
}

/* dropout's and dropout_mask's probability: in [0, 1) (1 would drop everything and scale by
 * infinity; NaN is refused too). */
static FcStatus dropout_p(const IrNode *n, FcErr *err) {
    if (!(n->a.f >= 0 && n->a.f < 1)) {
        char b[40];
        fc_fmt_double(b, sizeof b, n->a.f);
        return fc_err_set(err, FC_ERR_INPUT, "'%s' probability p must be in [0, 1); got %s", opname(n), b);
    }
    return FC_OK;
}

FcStatus ir_check_storage_operands(const IrGraph *g, const IrNode *n, FcErr *err) {
    IrCategory cat = ir_ops[n->op].cat;
    if (cat == IR_CAT_GENERATOR && (n->op == IR_OP_FULL || n->op == IR_OP_IOTA) && n->a.dtype == FC_I8)
        return fc_err_set(err, FC_ERR_INPUT, "'%s' does not make i8 values: i8 is a storage type; cast a tensor to it (cast(x, i8))",
                          opname(n));
    if (cat == IR_CAT_CAST || cat == IR_CAT_SHAPE) return FC_OK;
    for (int i = 0; i < n->nin; i++) {
        if (in(g, n, i)->dtype != FC_I8) continue;
        if ((cat == IR_CAT_SELECT && i > 0) || (cat == IR_CAT_GATHER && i == 0)) continue;
        return fc_err_set(err, FC_ERR_INPUT, IR_I8_OPERAND_MSG, opname(n));
    }
    return FC_OK;
}

RULE(same) {
    (void)nout;
    const IrValue *x = in(g, n, 0);
    if (n->op == IR_OP_SOFTMAX || n->op == IR_OP_LOG_SOFTMAX) {
        FC_TRY(need_float(n, x, err));
        FC_TRY(norm_axis(n, n->a.i[0], x->shape.rank, &n->a.i[0], err));
    }
    if (n->op == IR_OP_DROPOUT) {
        FC_TRY(need_float(n, x, err));
        FC_TRY(dropout_p(n, err));
    }
    odt[0] = x->dtype;
    osh[0] = x->shape;
    return FC_OK;
}

RULE(unary) {
    (void)nout;
    const IrValue *x = in(g, n, 0);
    if (x->dtype == FC_BOOL)
        return fc_err_set(err, FC_ERR_INPUT, "'%s' expects a numeric tensor; got bool", opname(n));
    odt[0] = x->dtype;
    osh[0] = x->shape;
    return FC_OK;
}

RULE(unary_float) {
    (void)nout;
    const IrValue *x = in(g, n, 0);
    FC_TRY(need_float(n, x, err));
    if (n->op == IR_OP_GELU && n->a.i[0] != IR_APPROX_NONE && n->a.i[0] != IR_APPROX_TANH)
        return fc_err_set(err, FC_ERR_INPUT, "gelu approx must be \"none\" or \"tanh\"");
    odt[0] = x->dtype;
    osh[0] = x->shape;
    return FC_OK;
}

RULE(binary) {
    (void)nout;
    const IrValue *a = in(g, n, 0), *b = in(g, n, 1);
    FC_TRY(same_dtype(n, a, b, err));
    if (a->dtype == FC_BOOL)
        return fc_err_set(err, FC_ERR_INPUT, "'%s' expects numeric tensors; got bool", opname(n));
    FC_TRY(bcast(n, &a->shape, &b->shape, &osh[0], err));
    odt[0] = a->dtype;
    return FC_OK;
}

RULE(compare) {
    (void)nout;
    const IrValue *a = in(g, n, 0), *b = in(g, n, 1);
    FC_TRY(same_dtype(n, a, b, err));
    FC_TRY(bcast(n, &a->shape, &b->shape, &osh[0], err));
    odt[0] = FC_BOOL;
    return FC_OK;
}

RULE(where) {
    (void)nout;
    const IrValue *c = in(g, n, 0), *a = in(g, n, 1), *b = in(g, n, 2);
    if (c->dtype != FC_BOOL)
        return fc_err_set(err, FC_ERR_INPUT, "'where' condition must be bool; got %s", fc_dtype_name(c->dtype));
    FC_TRY(same_dtype(n, a, b, err));
    IrShape t;
    FC_TRY(bcast(n, &c->shape, &a->shape, &t, err));
    FC_TRY(bcast(n, &t, &b->shape, &osh[0], err));
    odt[0] = a->dtype;
    return FC_OK;
}

RULE(cast) {
    (void)nout;
    if ((unsigned)n->a.dtype >= FC_DTYPE_COUNT)
        return fc_err_set(err, FC_ERR_INPUT, "'cast' needs a dtype");
    if (n->a.i[0] != 0 && (n->a.i[0] != 1 || !ir_cast_may_stay_wide(in(g, n, 0)->dtype, n->a.dtype)))
        return fc_err_set(err, FC_ERR_INPUT, "'cast' wide=%lld: only a float cast to bf16 or f16 may be wide (1)",
                          (long long)n->a.i[0]);
    odt[0] = n->a.dtype;
    osh[0] = in(g, n, 0)->shape;
    return FC_OK;
}

RULE(reduce) {
    (void)nout;
    const IrValue *x = in(g, n, 0);
    if (x->dtype == FC_BOOL)
        return fc_err_set(err, FC_ERR_INPUT, "'%s' expects a numeric tensor; got bool", opname(n));
    if (n->op == IR_OP_MEAN) FC_TRY(need_float(n, x, err));
    if (n->a.nlist == 0)
        return fc_err_set(err, FC_ERR_INPUT, "'%s' needs at least one axis", opname(n));
    FC_TRY(norm_axes(n, x->shape.rank, err));
    IrShape o = {0};
    for (int d = 0, j = 0; d < x->shape.rank; d++) {
        bool red = j < n->a.nlist && n->a.list[j] == d;
        if (red) j++;
        if (!red) o.dims[o.rank++] = x->shape.dims[d];
        else if (n->a.i[0]) o.dims[o.rank++] = 1;
    }
    odt[0] = x->dtype;
    osh[0] = o;
    return FC_OK;
}

/* layernorm(x, g?, b?) and rmsnorm(x, g?): normalized axes must be the trailing ones. */
RULE(norm) {
    (void)nout;
    const IrValue *x = in(g, n, 0);
    FC_TRY(need_float(n, x, err));
    int rank = x->shape.rank;
    if (n->a.nlist == 0)
        return fc_err_set(err, FC_ERR_INPUT, "'%s' needs at least one axis", opname(n));
    FC_TRY(norm_axes(n, rank, err));
    for (int i = 0; i < n->a.nlist; i++)
        if (n->a.list[i] != rank - n->a.nlist + i)
            return fc_err_set(err, FC_ERR_INPUT, "'%s' normalizes trailing axes only; axis %lld is not among the last %d",
                              opname(n), (long long)n->a.list[i], n->a.nlist);
    if (!(n->a.f > 0) || !isfinite(n->a.f))
        return fc_err_set(err, FC_ERR_INPUT, "'%s' eps must be a positive finite number; got %g", opname(n), n->a.f);
    int want = 1 + (n->a.i[0] != 0) + (n->op == IR_OP_LAYERNORM && n->a.i[1] != 0);
    if (n->nin != want)
        return fc_err_set(err, FC_ERR_INPUT, "internal error: %s:%d: '%s' has %d inputs, flags say %d",
                          __FILE__, __LINE__, opname(n), n->nin, want);
    IrShape ns = {.rank = n->a.nlist};
    for (int i = 0; i < n->a.nlist; i++) ns.dims[i] = x->shape.dims[rank - n->a.nlist + i];
    for (int i = 1; i < n->nin; i++) {
        const IrValue *p = in(g, n, i);
        const char *what = i == 1 ? "gain" : "bias";
        if (!ir_shape_eq(&p->shape, &ns)) {
            char a[256], b[256];
            tstr(p, a, sizeof a);
            ir_type_str(p->dtype, &ns, b, sizeof b);
            return fc_err_set(err, FC_ERR_INPUT, "'%s' %s must have the shape of the normalized dims, %s; got %s",
                              opname(n), what, strchr(b, '['), a);
        }
        FC_TRY(same_dtype(n, x, p, err));
    }
    odt[0] = x->dtype;
    osh[0] = x->shape;
    return FC_OK;
}

RULE(causal_mask) {
    (void)nout;
    const IrValue *s = in(g, n, 0);
    FC_TRY(need_float(n, s, err));
    if (s->shape.rank < 2)
        return fc_err_set(err, FC_ERR_INPUT, "'causal_mask' needs a tensor of rank >= 2; got rank %d", s->shape.rank);
    odt[0] = s->dtype;
    osh[0] = s->shape;
    return FC_OK;
}

RULE(attention) {
    (void)nout;
    const IrValue *q = in(g, n, 0), *k = in(g, n, 1), *v = in(g, n, 2);
    FC_TRY(need_float(n, q, err));
    FC_TRY(same_dtype(n, q, k, err));
    FC_TRY(same_dtype(n, q, v, err));
    int r = q->shape.rank;
    if (r < 2 || k->shape.rank != r || v->shape.rank != r) {
        char a[256], b[256], c[256];
        tstr(q, a, sizeof a); tstr(k, b, sizeof b); tstr(v, c, sizeof c);
        return fc_err_set(err, FC_ERR_INPUT, "'attention' needs q, k, v of one rank >= 2; got %s, %s, %s", a, b, c);
    }
    int64_t tq = q->shape.dims[r - 2], d = q->shape.dims[r - 1];
    int64_t tk = k->shape.dims[r - 2], dk = k->shape.dims[r - 1];
    int64_t tv = v->shape.dims[r - 2];
    if (dk != d || tv != tk) {
        char a[256], b[256], c[256];
        tstr(q, a, sizeof a); tstr(k, b, sizeof b); tstr(v, c, sizeof c);
        return fc_err_set(err, FC_ERR_INPUT,
                          "'attention' expects q [.., Tq, D], k [.., Tk, D], v [.., Tk, Dv]; got %s, %s, %s", a, b, c);
    }
    IrShape bq = {.rank = r - 2}, bk = {.rank = r - 2}, bv = {.rank = r - 2}, t, o;
    memcpy(bq.dims, q->shape.dims, sizeof(int64_t) * (size_t)(r - 2));
    memcpy(bk.dims, k->shape.dims, sizeof(int64_t) * (size_t)(r - 2));
    memcpy(bv.dims, v->shape.dims, sizeof(int64_t) * (size_t)(r - 2));
    FC_TRY(bcast(n, &bq, &bk, &t, err));
    FC_TRY(bcast(n, &t, &bv, &o, err));
    if (!isfinite(n->a.f))
        return fc_err_set(err, FC_ERR_INPUT, "'attention' scale must be finite");
    o.dims[o.rank++] = tq;
    o.dims[o.rank++] = v->shape.dims[r - 1];
    odt[0] = q->dtype;
    osh[0] = o;
    return FC_OK;
}

RULE(reshape) {
    (void)nout;
    const IrValue *x = in(g, n, 0);
    int64_t numel, known = 1;
    if (!ir_shape_numel(&x->shape, &numel)) return fc_err_set(err, FC_ERR_INPUT, "reshape of a tensor too large");
    if (n->a.nlist > IR_MAX_RANK)
        return fc_err_set(err, FC_ERR_INPUT, "'reshape' to rank %d; at most %d is supported", n->a.nlist, IR_MAX_RANK);
    int neg = -1;
    for (int i = 0; i < n->a.nlist; i++) {
        int64_t d = n->a.list[i];
        if (d == -1) {
            if (neg >= 0) return fc_err_set(err, FC_ERR_INPUT, "'reshape' allows at most one -1 in the shape");
            neg = i;
        } else if (d < 1) {
            return fc_err_set(err, FC_ERR_INPUT, "'reshape' sizes must be >= 1 (or one -1); got %lld", (long long)d);
        } else if (!fc_mul64(known, d, &known)) {
            return fc_err_set(err, FC_ERR_INPUT, "'reshape' shape overflows a 64-bit element count");
        }
    }
    char xs[256];
    tstr(x, xs, sizeof xs);
    if (neg >= 0) {
        if (numel % known != 0)
            return fc_err_set(err, FC_ERR_INPUT, "cannot reshape %s (%lld elements): the other sizes multiply to %lld, which does not divide it",
                              xs, (long long)numel, (long long)known);
        n->a.list[neg] = numel / known;
    } else if (known != numel) {
        return fc_err_set(err, FC_ERR_INPUT, "cannot reshape %s (%lld elements) to a shape of %lld elements", xs,
                          (long long)numel, (long long)known);
    }
    osh[0].rank = n->a.nlist;
    if (n->a.nlist) memcpy(osh[0].dims, n->a.list, sizeof(int64_t) * (size_t)n->a.nlist);
    odt[0] = x->dtype;
    return FC_OK;
}

RULE(transpose) {
    (void)nout;
    const IrValue *x = in(g, n, 0);
    int r = x->shape.rank;
    if (n->a.nlist != r)
        return fc_err_set(err, FC_ERR_INPUT, "'transpose' permutation has %d entries; the tensor has rank %d", n->a.nlist, r);
    bool seen[IR_MAX_RANK] = {0};
    for (int i = 0; i < r; i++) {
        int64_t p = 0;
        FC_TRY(norm_axis(n, n->a.list[i], r, &p, err));
        if (seen[p]) return fc_err_set(err, FC_ERR_INPUT, "'transpose' permutation repeats axis %lld", (long long)p);
        seen[p] = true;
        n->a.list[i] = p;
        osh[0].dims[i] = x->shape.dims[p];
    }
    osh[0].rank = r;
    odt[0] = x->dtype;
    return FC_OK;
}

RULE(broadcast) {
    (void)nout;
    const IrValue *x = in(g, n, 0);
    IrShape t = {.rank = n->a.nlist}, o;
    if (n->a.nlist > IR_MAX_RANK)
        return fc_err_set(err, FC_ERR_INPUT, "'broadcast' to rank %d; at most %d is supported", n->a.nlist, IR_MAX_RANK);
    for (int i = 0; i < n->a.nlist; i++) {
        if (n->a.list[i] < 1)
            return fc_err_set(err, FC_ERR_INPUT, "'broadcast' sizes must be >= 1; got %lld", (long long)n->a.list[i]);
        t.dims[i] = n->a.list[i];
    }
    if (x->shape.rank > t.rank || !ir_shape_broadcast(&x->shape, &t, &o) || !ir_shape_eq(&o, &t)) {
        char a[256], b[256];
        tstr(x, a, sizeof a);
        ir_type_str(x->dtype, &t, b, sizeof b);
        return fc_err_set(err, FC_ERR_INPUT, "cannot broadcast %s to %s", a, strchr(b, '['));
    }
    osh[0] = t;
    odt[0] = x->dtype;
    return FC_OK;
}

RULE(concat) {
    (void)nout;
    const IrValue *x0 = in(g, n, 0);
    int r = x0->shape.rank;
    int64_t ax = 0;
    FC_TRY(norm_axis(n, n->a.i[0], r, &ax, err));
    n->a.i[0] = ax;
    IrShape o = x0->shape;
    for (int i = 1; i < n->nin; i++) {
        const IrValue *x = in(g, n, i);
        FC_TRY(same_dtype(n, x0, x, err));
        bool ok = x->shape.rank == r;
        for (int d = 0; ok && d < r; d++)
            if (d != ax && x->shape.dims[d] != x0->shape.dims[d]) ok = false;
        if (!ok) {
            char a[256], b[256];
            tstr(x0, a, sizeof a);
            tstr(x, b, sizeof b);
            return fc_err_set(err, FC_ERR_INPUT, "'concat' along axis %lld needs equal other dims; got %s and %s",
                              (long long)ax, a, b);
        }
        if (!fc_add64(o.dims[ax], x->shape.dims[ax], &o.dims[ax]))
            return fc_err_set(err, FC_ERR_INPUT, "'concat' size overflows");
    }
    osh[0] = o;
    odt[0] = x0->dtype;
    return FC_OK;
}

RULE(split) {
    const IrValue *x = in(g, n, 0);
    int64_t ax = 0;
    FC_TRY(norm_axis(n, n->a.i[0], x->shape.rank, &ax, err));
    n->a.i[0] = ax;
    int64_t total = 0;
    if (n->a.nlist < 1) return fc_err_set(err, FC_ERR_INPUT, "'split' needs at least one section");
    for (int i = 0; i < n->a.nlist; i++) {
        if (n->a.list[i] < 1)
            return fc_err_set(err, FC_ERR_INPUT, "'split' section sizes must be >= 1; got %lld", (long long)n->a.list[i]);
        if (!fc_add64(total, n->a.list[i], &total)) return fc_err_set(err, FC_ERR_INPUT, "'split' sizes overflow");
    }
    if (total != x->shape.dims[ax])
        return fc_err_set(err, FC_ERR_INPUT, "'split' sections add up to %lld; axis %lld has size %lld", (long long)total,
                          (long long)ax, (long long)x->shape.dims[ax]);
    for (int i = 0; i < n->a.nlist; i++) {
        osh[i] = x->shape;
        osh[i].dims[ax] = n->a.list[i];
        odt[i] = x->dtype;
    }
    *nout = n->a.nlist;
    return FC_OK;
}

/* Python slice semantics (slice.indices) on one axis; an empty result is an error. */
RULE(slice) {
    (void)nout;
    const IrValue *x = in(g, n, 0);
    int64_t ax = 0;
    FC_TRY(norm_axis(n, n->a.i[0], x->shape.rank, &ax, err));
    int64_t len = x->shape.dims[ax], start = n->a.i[1], end = n->a.i[2], step = n->a.i[3];
    if (step == 0) return fc_err_set(err, FC_ERR_INPUT, "'slice' step must not be 0");
    if (step > 0) {
        start = start < 0 ? (start + len < 0 ? 0 : start + len) : (start > len ? len : start);
        end = end < 0 ? (end + len < 0 ? 0 : end + len) : (end > len ? len : end);
    } else {
        start = start < 0 ? (start + len < 0 ? -1 : start + len) : (start >= len ? len - 1 : start);
        end = end < 0 ? (end + len < 0 ? -1 : end + len) : (end >= len ? len - 1 : end);
    }
    int64_t cnt = 0;
    if (step > 0 && end > start) cnt = (end - start + step - 1) / step;
    if (step < 0 && start > end) cnt = (start - end + (-step) - 1) / (-step);
    if (cnt < 1)
        return fc_err_set(err, FC_ERR_INPUT, "'slice' of axis %lld (size %lld) from %lld to %lld step %lld is empty",
                          (long long)ax, (long long)len, (long long)n->a.i[1], (long long)n->a.i[2], (long long)step);
    n->a.i[0] = ax;
    n->a.i[1] = start;
    n->a.i[2] = (step < 0 && end < 0) ? -len - 1 : end;  /* idempotent: -1 would read as len-1 */
    osh[0] = x->shape;
    osh[0].dims[ax] = cnt;
    odt[0] = x->dtype;
    return FC_OK;
}

static FcStatus shape_from_list(const IrNode *n, IrShape *o, FcErr *err) {
    if (n->a.nlist > IR_MAX_RANK)
        return fc_err_set(err, FC_ERR_INPUT, "'%s' shape has rank %d; at most %d is supported", opname(n), n->a.nlist, IR_MAX_RANK);
    o->rank = n->a.nlist;
    for (int i = 0; i < n->a.nlist; i++) {
        if (n->a.list[i] < 1)
            return fc_err_set(err, FC_ERR_INPUT, "'%s' sizes must be >= 1; got %lld", opname(n), (long long)n->a.list[i]);
        o->dims[i] = n->a.list[i];
    }
    return FC_OK;
}

RULE(iota) {
    (void)g; (void)nout;
    FC_TRY(shape_from_list(n, &osh[0], err));
    int64_t ax = 0;
    FC_TRY(norm_axis(n, n->a.i[0], osh[0].rank, &ax, err));
    n->a.i[0] = ax;
    if ((unsigned)n->a.dtype >= FC_DTYPE_COUNT || n->a.dtype == FC_BOOL)
        return fc_err_set(err, FC_ERR_INPUT, "'iota' dtype must be numeric");
    odt[0] = n->a.dtype;
    return FC_OK;
}

RULE(full) {
    (void)g; (void)nout;
    FC_TRY(shape_from_list(n, &osh[0], err));
    if ((unsigned)n->a.dtype >= FC_DTYPE_COUNT)
        return fc_err_set(err, FC_ERR_INPUT, "'full' needs a dtype");
    odt[0] = n->a.dtype;
    return FC_OK;
}

/* dropout_mask: bool, true where the element is kept (ops.def; the mask's definition is
 * docs/language.md's). */
RULE(dropout_mask) {
    (void)g; (void)nout;
    FC_TRY(shape_from_list(n, &osh[0], err));
    FC_TRY(dropout_p(n, err));
    odt[0] = FC_BOOL;
    return FC_OK;
}

RULE(gather) {
    (void)nout;
    const IrValue *t = in(g, n, 0), *ids = in(g, n, 1);
    if (t->shape.rank < 1) return fc_err_set(err, FC_ERR_INPUT, "'gather' table must have rank >= 1");
    if (!ir_dtype_is_int(ids->dtype))
        return fc_err_set(err, FC_ERR_INPUT, "'gather' ids must be integer; got %s", fc_dtype_name(ids->dtype));
    if (ids->shape.rank + t->shape.rank - 1 > IR_MAX_RANK)
        return fc_err_set(err, FC_ERR_INPUT, "'gather' result would have rank %d; at most %d is supported",
                          ids->shape.rank + t->shape.rank - 1, IR_MAX_RANK);
    IrShape o = ids->shape;
    for (int i = 1; i < t->shape.rank; i++) o.dims[o.rank++] = t->shape.dims[i];
    osh[0] = o;
    odt[0] = t->dtype;
    return FC_OK;
}

/* scatter_add(src, ids, rows): src is ids.shape + a row shape; the result is [rows] + the row
 * shape, row r the sum of the src rows whose id is r (gather's adjoint). */
RULE(scatter_add) {
    (void)nout;
    const IrValue *x = in(g, n, 0), *ids = in(g, n, 1);
    char sx[256], si[256];
    tstr(x, sx, sizeof sx);
    tstr(ids, si, sizeof si);
    if (!ir_dtype_is_int(ids->dtype))
        return fc_err_set(err, FC_ERR_INPUT, "'scatter_add' ids must be integer; got %s", fc_dtype_name(ids->dtype));
    if (x->dtype == FC_BOOL) return fc_err_set(err, FC_ERR_INPUT, "'scatter_add' expects a numeric src; got bool");
    bool lead = x->shape.rank >= ids->shape.rank;
    for (int d = 0; lead && d < ids->shape.rank; d++) lead = x->shape.dims[d] == ids->shape.dims[d];
    if (!lead)
        return fc_err_set(err, FC_ERR_INPUT, "'scatter_add' src %s must begin with the ids' shape (ids %s)", sx, si);
    if (n->a.i[0] < 1 || n->a.i[0] > INT32_MAX)
        return fc_err_set(err, FC_ERR_INPUT, "'scatter_add' rows must be in 1..%d; got %lld", INT32_MAX,
                          (long long)n->a.i[0]);
    if (x->shape.rank - ids->shape.rank + 1 > IR_MAX_RANK)
        return fc_err_set(err, FC_ERR_INPUT, "'scatter_add' result would have rank %d; at most %d is supported",
                          x->shape.rank - ids->shape.rank + 1, IR_MAX_RANK);
    IrShape o = {.rank = 1, .dims = {n->a.i[0]}};
    for (int d = ids->shape.rank; d < x->shape.rank; d++) o.dims[o.rank++] = x->shape.dims[d];
    osh[0] = o;
    odt[0] = x->dtype;
    return FC_OK;
}

RULE(matmul) {
    (void)nout;
    const IrValue *a = in(g, n, 0), *b = in(g, n, 1);
    FC_TRY(same_dtype(n, a, b, err));
    if (a->dtype == FC_BOOL) return fc_err_set(err, FC_ERR_INPUT, "matrix product of bool tensors");
    int ra = a->shape.rank, rb = b->shape.rank;
    char sa[256], sb[256];
    tstr(a, sa, sizeof sa);
    tstr(b, sb, sizeof sb);
    if (ra < 2 || rb < 2)
        return fc_err_set(err, FC_ERR_INPUT, "internal error: %s:%d: matmul operands must have rank >= 2; got %s and %s",
                          __FILE__, __LINE__, sa, sb);
    if (a->shape.dims[ra - 1] != b->shape.dims[rb - 2])
        return fc_err_set(err, FC_ERR_INPUT, "matrix product inner sizes differ: %s @ %s (%lld vs %lld)", sa, sb,
                          (long long)a->shape.dims[ra - 1], (long long)b->shape.dims[rb - 2]);
    IrShape ba = {.rank = ra - 2}, bb = {.rank = rb - 2}, o;
    memcpy(ba.dims, a->shape.dims, sizeof(int64_t) * (size_t)(ra - 2));
    memcpy(bb.dims, b->shape.dims, sizeof(int64_t) * (size_t)(rb - 2));
    if (!ir_shape_broadcast(&ba, &bb, &o))
        return fc_err_set(err, FC_ERR_INPUT, "matrix product batch dims cannot be broadcast: %s @ %s", sa, sb);
    o.dims[o.rank++] = a->shape.dims[ra - 2];
    o.dims[o.rank++] = b->shape.dims[rb - 1];
    osh[0] = o;
    odt[0] = a->dtype;
    return FC_OK;
}

RULE(cross_entropy) {
    (void)nout;
    const IrValue *l = in(g, n, 0), *y = in(g, n, 1);
    FC_TRY(need_float(n, l, err));
    if (!ir_dtype_is_int(y->dtype))
        return fc_err_set(err, FC_ERR_INPUT, "'cross_entropy' labels must be integer (i32 or i64); got %s",
                          fc_dtype_name(y->dtype));
    bool ok = l->shape.rank >= 1 && y->shape.rank == l->shape.rank - 1;
    for (int i = 0; ok && i < y->shape.rank; i++) ok = y->shape.dims[i] == l->shape.dims[i];
    if (!ok) {
        char a[256], b[256];
        tstr(l, a, sizeof a);
        tstr(y, b, sizeof b);
        return fc_err_set(err, FC_ERR_INPUT,
                          "'cross_entropy' expects logits [.., C] and labels [..] with the logits' leading dims; got %s and %s",
                          a, b);
    }
    osh[0].rank = 0;
    odt[0] = l->dtype;
    return FC_OK;
}

/* ---- f8 scaling (ops.def) ------------------------------------------------------------------ */
static FcStatus fp8_slot(const IrGraph *g, const IrNode *n, FcErr *err) {
    if (n->a.i[0] < 0 || n->a.i[0] >= g->fp8.len)
        return fc_err_set(err, FC_ERR_INPUT, "'%s' names f8 slot %lld; the graph has %d", opname(n),
                          (long long)n->a.i[0], g->fp8.len);
    return FC_OK;
}

/* s: the f32 scalar scale of fp8_quant and fp8_dequant */
static FcStatus fp8_scale_input(const IrGraph *g, const IrNode *n, FcErr *err) {
    const IrValue *s = in(g, n, 1);
    if (s->dtype != FC_F32 || s->shape.rank != 0) {
        char t[128];
        tstr(s, t, sizeof t);
        return fc_err_set(err, FC_ERR_INPUT, "'%s' expects an f32[] scale; got %s", opname(n), t);
    }
    return FC_OK;
}

RULE(fp8_scale) {
    (void)nout;
    FC_TRY(fp8_slot(g, n, err));
    osh[0].rank = 0;
    odt[0] = FC_F32;
    return FC_OK;
}

RULE(fp8_quant) {
    (void)nout;
    FC_TRY(fp8_slot(g, n, err));
    FC_TRY(fp8_scale_input(g, n, err));
    const IrValue *x = in(g, n, 0);
    if (x->dtype != FC_F32 && x->dtype != FC_BF16 && x->dtype != FC_F16)
        return fc_err_set(err, FC_ERR_INPUT, "'fp8_quant' expects f32, bf16 or f16 x; got %s", fc_dtype_name(x->dtype));
    osh[0] = x->shape;
    odt[0] = g->fp8.data[n->a.i[0]].fmt;
    return FC_OK;
}

RULE(fp8_dequant) {
    (void)nout;
    FC_TRY(fp8_scale_input(g, n, err));
    const IrValue *q = in(g, n, 0);
    if (q->dtype != FC_F8E4M3 && q->dtype != FC_F8E5M2)
        return fc_err_set(err, FC_ERR_INPUT, "'fp8_dequant' expects an f8 q; got %s", fc_dtype_name(q->dtype));
    if (n->a.dtype != FC_F32 && n->a.dtype != FC_BF16 && n->a.dtype != FC_F16)
        return fc_err_set(err, FC_ERR_INPUT, "'fp8_dequant' makes f32, bf16 or f16; got %s",
                          fc_dtype_name(n->a.dtype) ? fc_dtype_name(n->a.dtype) : "?");
    osh[0] = q->shape;
    odt[0] = n->a.dtype;
    return FC_OK;
}
