/* graph.c: the op table, dtype and shape helpers, and the graph builder (see ir.h). */
#include "ir.h"

#include <stdio.h>
#include <string.h>

/* Shape rules live in shape.c. */
#define OP(ID, NAME, MININ, MAXIN, NOUT, CAT, ATTRS, SHAPE, FLOPS)                           \
    FcStatus ir_rule_##SHAPE(const IrGraph *g, IrNode *n, FcDtype *out_dtype, IrShape *out_shape, \
                              int *nout, FcErr *err);
#include "ops.def"
#undef OP

const IrOpInfo ir_ops[IR_OP_COUNT] = {
#define OP(ID, NAME, MININ, MAXIN, NOUT, CAT, ATTRS, SHAPE, FLOPS)                           \
    [IR_OP_##ID] = {NAME, MININ, MAXIN, NOUT, CAT, ATTRS, ir_rule_##SHAPE, FLOPS},
#include "ops.def"
#undef OP
};

int ir_op_lookup(const char *name) {
    for (int i = 0; i < IR_OP_COUNT; i++)
        if (strcmp(ir_ops[i].name, name) == 0) return i;
    return -1;
}

/* ---- dtypes ----------------------------------------------------------------------------- */
static const char *const dtype_names[FC_DTYPE_COUNT] = {
    "f64", "f32", "f16", "bf16", "f8e4m3", "f8e5m2", "i32", "i64", "bool", "i8"};
static const size_t dtype_sizes[FC_DTYPE_COUNT] = {8, 4, 2, 2, 1, 1, 4, 8, 1, 1};

const char *fc_dtype_name(FcDtype t) { return (unsigned)t < FC_DTYPE_COUNT ? dtype_names[t] : NULL; }
size_t fc_dtype_size(FcDtype t) { return (unsigned)t < FC_DTYPE_COUNT ? dtype_sizes[t] : 0; }
int ir_dtype_lookup(const char *name) {
    for (int i = 0; i < FC_DTYPE_COUNT; i++)
        if (strcmp(dtype_names[i], name) == 0) return i;
    return -1;
}
bool ir_dtype_is_float(FcDtype t) { return t <= FC_F8E5M2; }

bool ir_op_elementwise(IrOp op) {
    IrCategory c = ir_ops[op].cat;
    return c == IR_CAT_UNARY || c == IR_CAT_BINARY || c == IR_CAT_COMPARE || c == IR_CAT_SELECT || c == IR_CAT_CAST;
}

bool ir_swaps_last_two(const IrNode *n, int rank) {
    if (n->op != IR_OP_TRANSPOSE || rank < 2 || n->a.nlist != rank || n->a.list[rank - 2] != rank - 1 ||
        n->a.list[rank - 1] != rank - 2)
        return false;
    for (int d = 0; d < rank - 2; d++)
        if (n->a.list[d] != d) return false;
    return true;
}

bool ir_cast_may_stay_wide(FcDtype from, FcDtype to) {
    return ir_dtype_is_float(from) && (to == FC_BF16 || to == FC_F16);
}

IrAttrs ir_storage_cast(FcDtype from, FcDtype to) {
    return (IrAttrs){.dtype = to, .i = {ir_cast_may_stay_wide(from, to)}};
}
bool ir_dtype_is_int(FcDtype t) { return t == FC_I32 || t == FC_I64; }

/* ---- shapes --------------------------------------------------------------------------------- */
bool ir_shape_numel(const IrShape *s, int64_t *numel) {
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++)
        if (!fc_mul64(n, s->dims[i], &n)) return false;
    *numel = n;
    return true;
}
bool ir_shape_nbytes(const IrShape *s, FcDtype t, int64_t *nbytes) {
    int64_t n;
    return ir_shape_numel(s, &n) && fc_mul64(n, (int64_t)fc_dtype_size(t), nbytes);
}
bool ir_shape_eq(const IrShape *a, const IrShape *b) {
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}
void ir_type_str(FcDtype t, const IrShape *s, char *buf, size_t n) {
    size_t off = 0;
    int w = snprintf(buf, n, "%s[", fc_dtype_name(t) ? fc_dtype_name(t) : "?");
    if (w < 0) return;
    off = (size_t)w;
    for (int i = 0; i < s->rank && off < n; i++) {
        w = snprintf(buf + off, n - off, "%s%lld", i ? ", " : "", (long long)s->dims[i]);
        if (w < 0) return;
        off += (size_t)w;
    }
    if (off < n) snprintf(buf + off, n - off, "]");
}
bool ir_shape_broadcast(const IrShape *a, const IrShape *b, IrShape *out) {
    int r = a->rank > b->rank ? a->rank : b->rank;
    IrShape o = {.rank = r};
    for (int i = 0; i < r; i++) {
        int ia = a->rank - r + i, ib = b->rank - r + i;
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1) return false;
        o.dims[i] = da == 1 ? db : da;
    }
    *out = o;
    return true;
}

/* ---- graph ----------------------------------------------------------------------------------- */
IrGraph *ir_graph_new(const char *name, const char *file) {
    IrGraph *g = fc_calloc(1, sizeof *g);
    if (!g) return NULL;
    g->name = arena_strdup(&g->arena, name ? name : "block");
    g->file = arena_strdup(&g->arena, file ? file : "<input>");
    if (!g->name || !g->file) { ir_graph_free(g); return NULL; }
    return g;
}

void ir_graph_free(IrGraph *g) {
    if (!g) return;
    FC_VEC_FREE(&g->values);
    FC_VEC_FREE(&g->nodes);
    FC_VEC_FREE(&g->inputs);
    FC_VEC_FREE(&g->is_param);
    FC_VEC_FREE(&g->outputs);
    FC_VEC_FREE(&g->output_names);
    FC_VEC_FREE(&g->fp8);
    arena_free(&g->arena);
    fc_free(g);
}

int ir_add_fp8_slot(IrGraph *g, FcDtype fmt) {
    IrFp8Slot sl = {fmt, 1.0, false, -1, -1};
    return FC_VEC_PUSH(&g->fp8, sl) ? g->fp8.len - 1 : -1;
}

int ir_fp8_slot_of(const IrGraph *g, int v) {
    for (int hops = 0; v >= 0 && v < g->values.len && hops <= g->nodes.len; hops++) {
        const IrValue *x = ir_cval(g, v);
        if (x->dtype != FC_F8E4M3 && x->dtype != FC_F8E5M2) return -1;
        if (x->node < 0) {
            for (int k = 0; k < g->fp8.len; k++)
                if (g->fp8.data[k].input == x->result) return k;
            return -1;
        }
        const IrNode *n = &g->nodes.data[x->node];
        if (n->op == IR_OP_FP8_QUANT) return (int)n->a.i[0];
        if (ir_ops[n->op].cat != IR_CAT_SHAPE || n->nin != 1) return -1;
        v = n->in[0];
    }
    return -1;
}

int ir_add_input(IrGraph *g, const char *name, FcDtype t, const IrShape *s, bool is_param) {
    IrValue v = {.dtype = t, .shape = *s, .node = -1, .result = g->inputs.len, .name = NULL};
    if (name && !(v.name = arena_strdup(&g->arena, name))) return -1;
    if (!FC_VEC_PUSH(&g->values, v)) return -1;
    int id = g->values.len - 1;
    if (!FC_VEC_PUSH(&g->inputs, id)) return -1;
    if (!FC_VEC_PUSH(&g->is_param, is_param)) return -1;
    return id;
}

FcStatus ir_add_node(IrGraph *g, IrOp op, const int *ins, int nin, const IrAttrs *attrs,
                     IrLoc loc, int origin, IrOp origin_op, int *out0, FcErr *err) {
    FC_CHECK(err, (unsigned)op < IR_OP_COUNT);
    const IrOpInfo *info = &ir_ops[op];
    FC_CHECK(err, nin >= info->min_in && (info->max_in < 0 || nin <= info->max_in));
    for (int i = 0; i < nin; i++) FC_CHECK(err, ins[i] >= 0 && ins[i] < g->values.len);

    IrNode n = {.op = op, .nin = nin, .loc = loc};
    if (attrs) n.a = *attrs;
    n.a.list = NULL;
    if (nin > 0) {
        n.in = arena_alloc(&g->arena, sizeof(int) * (size_t)nin);
        if (!n.in) return FC_OOM(err);
        memcpy(n.in, ins, sizeof(int) * (size_t)nin);
    }
    if (attrs && attrs->nlist > 0) {
        FC_CHECK(err, attrs->nlist <= 4096);
        n.a.list = arena_alloc(&g->arena, sizeof(int64_t) * (size_t)attrs->nlist);
        if (!n.a.list) return FC_OOM(err);
        memcpy(n.a.list, attrs->list, sizeof(int64_t) * (size_t)attrs->nlist);
    }
    /* split may produce up to 4096 results; everything else at most a few */
    int cap = op == IR_OP_SPLIT ? (n.a.nlist > 0 ? n.a.nlist : 1) : 4;
    FcDtype *dt = fc_calloc((size_t)cap, sizeof *dt);
    IrShape *sh = fc_calloc((size_t)cap, sizeof *sh);
    if (!dt || !sh) { fc_free(dt); fc_free(sh); return FC_OOM(err); }
    int nout = info->nout > 0 ? info->nout : 0;
    FcStatus s = ir_check_storage_operands(g, &n, err);
    if (s == FC_OK) s = info->shape(g, &n, dt, sh, &nout, err);
    if (s == FC_OK && (nout < 1 || nout > cap))
        s = fc_err_set(err, FC_ERR_INTERNAL, "internal error: %s:%d: shape rule of %s gave %d results",
                       __FILE__, __LINE__, info->name, nout);
    for (int k = 0; s == FC_OK && k < nout; k++) {
        int64_t nbytes;
        if (sh[k].rank > IR_MAX_RANK) {
            s = fc_err_set(err, FC_ERR_INPUT, "result of '%s' would have rank %d; at most %d is supported",
                           info->name, sh[k].rank, IR_MAX_RANK);
        } else if (!ir_shape_nbytes(&sh[k], dt[k], &nbytes)) {
            char t[256];
            ir_type_str(dt[k], &sh[k], t, sizeof t);
            s = fc_err_set(err, FC_ERR_INPUT, "result of '%s' is too large: %s overflows a 64-bit byte count",
                           info->name, t);
        }
    }
    if (s != FC_OK) { fc_free(dt); fc_free(sh); return s; }

    int node_id = g->nodes.len;
    n.nout = nout;
    n.out = arena_alloc(&g->arena, sizeof(int) * (size_t)nout);
    if (!n.out) { fc_free(dt); fc_free(sh); return FC_OOM(err); }
    int first = g->values.len;
    for (int k = 0; k < nout; k++) {
        IrValue v = {.dtype = dt[k], .shape = sh[k], .node = node_id, .result = k};
        if (!FC_VEC_PUSH(&g->values, v)) { fc_free(dt); fc_free(sh); return FC_OOM(err); }
        n.out[k] = first + k;
    }
    fc_free(dt);
    fc_free(sh);
    if (origin < 0) {
        n.origin = g->next_origin++;
        n.origin_op = op;
    } else {
        n.origin = origin;
        n.origin_op = origin_op;
        if (origin >= g->next_origin) g->next_origin = origin + 1;
    }
    if (!FC_VEC_PUSH(&g->nodes, n)) return FC_OOM(err);
    if (out0) *out0 = first;
    return FC_OK;
}

FcStatus ir_add_output(IrGraph *g, int value, const char *name, FcErr *err) {
    FC_CHECK(err, value >= 0 && value < g->values.len);
    const char *nm = arena_strdup(&g->arena, name ? name : "out");
    if (!nm || !FC_VEC_PUSH(&g->outputs, value) || !FC_VEC_PUSH(&g->output_names, nm))
        return FC_OOM(err);
    return FC_OK;
}

FcStatus ir_copy_fp8_slots(IrGraph *dst, const IrGraph *src, FcErr *err) {
    FC_CHECK(err, dst->fp8.len == 0);
    for (int k = 0; k < src->fp8.len; k++) {
        if (ir_add_fp8_slot(dst, src->fp8.data[k].fmt) < 0) return FC_OOM(err);
        dst->fp8.data[k].scale = src->fp8.data[k].scale;
        dst->fp8.data[k].read_only = src->fp8.data[k].read_only;
        dst->fp8.data[k].grad = src->fp8.data[k].grad;
        dst->fp8.data[k].input = src->fp8.data[k].input;
    }
    return FC_OK;
}

FcStatus ir_copy_inputs(IrGraph *dst, const IrGraph *src, const int *retype, int *map, FcErr *err) {
    for (int v = 0; v < src->values.len; v++) map[v] = -1;
    dst->next_origin = src->next_origin;
    FC_TRY(ir_copy_fp8_slots(dst, src, err));
    for (int i = 0; i < src->inputs.len; i++) {
        int v = src->inputs.data[i];
        FC_CHECK(err, v >= 0 && v < src->values.len && i < src->is_param.len);
        const IrValue *x = ir_cval(src, v);
        FcDtype t = retype && retype[x->dtype] >= 0 ? (FcDtype)retype[x->dtype] : x->dtype;
        if ((map[v] = ir_add_input(dst, x->name, t, &x->shape, src->is_param.data[i])) < 0) return FC_OOM(err);
    }
    return FC_OK;
}

FcStatus ir_map_results(IrGraph *dst, const IrGraph *src, const IrNode *n, int first, int *map, FcErr *err) {
    for (int r = 0; r < n->nout; r++) {
        map[n->out[r]] = first + r;
        const char *nm = ir_cval(src, n->out[r])->name;
        if (nm && !(ir_val(dst, first + r)->name = arena_strdup(&dst->arena, nm))) return FC_OOM(err);
    }
    return FC_OK;
}

FcStatus ir_copy_outputs(IrGraph *dst, const IrGraph *src, const int *map, FcErr *err) {
    for (int i = 0; i < src->outputs.len; i++) {
        int v = src->outputs.data[i];
        FC_CHECK(err, v >= 0 && v < src->values.len && map[v] >= 0);
        FC_TRY(ir_add_output(dst, map[v], src->output_names.data[i], err));
    }
    return FC_OK;
}

FcStatus ir_readd_node(IrGraph *dst, const IrNode *n, IrOp op, const int *ins, int nin, const IrAttrs *a,
                       const char *who, int *out0, FcErr *err) {
    FcStatus s = ir_add_node(dst, op, ins, nin, a, n->loc, n->origin, n->origin_op, out0, err);
    if (s == FC_ERR_INPUT) {
        char msg[sizeof err->msg];
        memcpy(msg, err->msg, sizeof msg);
        return fc_err_set(err, FC_ERR_INTERNAL, "internal error: %s: a bad '%s': %s", who, ir_ops[op].name, msg);
    }
    return s;
}

static FcStatus copy_with_outputs(const IrGraph *src, int last, const int *vals, int nvals, IrGraph *g, int *map,
                                  FcErr *err) {
    FC_TRY(ir_copy_inputs(g, src, NULL, map, err));
    for (int i = 0; i <= last; i++) {
        const IrNode *n = &src->nodes.data[i];
        int ins[8], first = -1;
        int *in = n->nin <= 8 ? ins : fc_calloc((size_t)n->nin, sizeof *in);
        if (!in) return FC_OOM(err);
        for (int k = 0; k < n->nin; k++) in[k] = map[n->in[k]];
        FcStatus s = ir_readd_node(g, n, n->op, in, n->nin, &n->a, "ir_graph_with_outputs", &first, err);
        if (in != ins) fc_free(in);
        FC_TRY(s);
        FC_TRY(ir_map_results(g, src, n, first, map, err));
    }
    for (int k = 0; k < nvals; k++) {
        FC_CHECK(err, vals[k] >= 0 && vals[k] < src->values.len && map[vals[k]] >= 0);
        char name[32];
        if (k == 0) snprintf(name, sizeof name, "value");
        else snprintf(name, sizeof name, "value%d", k);
        FC_TRY(ir_add_output(g, map[vals[k]], name, err));
    }
    return FC_OK;
}

FcStatus ir_graph_with_outputs(const IrGraph *src, int last, const int *vals, int n, IrGraph **out, FcErr *err) {
    *out = NULL;
    FC_CHECK(err, last >= -1 && last < src->nodes.len && n >= 0);
    IrGraph *g = ir_graph_new(src->name, src->file);
    int *map = fc_calloc((size_t)src->values.len + 1, sizeof *map);
    FcStatus s = g && map ? copy_with_outputs(src, last, vals, n, g, map, err) : FC_OOM(err);
    fc_free(map);
    if (s != FC_OK) {
        ir_graph_free(g);
        return s;
    }
    *out = g;
    return FC_OK;
}

FcStatus ir_graph_prefix(const IrGraph *src, int last, IrGraph **out, FcErr *err) {
    *out = NULL;
    FC_CHECK(err, last >= 0 && last < src->nodes.len);
    const IrNode *n = &src->nodes.data[last];
    int *vals = fc_calloc((size_t)n->nout + 1, sizeof *vals), nv = 0;
    if (!vals) return FC_OOM(err);
    for (int r = 0; r < n->nout; r++)
        if (ir_dtype_is_float(ir_cval(src, n->out[r])->dtype)) vals[nv++] = n->out[r];
    FcStatus s = nv ? ir_graph_with_outputs(src, last, vals, nv, out, err) : FC_OK;
    fc_free(vals);
    return s;
}

int64_t ir_node_flops(const IrGraph *g, const IrNode *n) {
    int64_t e = 0, f = 0;
    IrCategory c = ir_ops[n->op].cat;
    if (c == IR_CAT_MATMUL) {
        const IrValue *a = ir_cval(g, n->in[0]);
        if (!ir_shape_numel(&ir_cval(g, n->out[0])->shape, &e) || !fc_mul64(e, 2, &e) ||
            !fc_mul64(e, a->shape.dims[a->shape.rank - 1], &f))
            return INT64_MAX;
        return f;
    }
    int64_t total = 0;
    bool per_in = c == IR_CAT_REDUCE || c == IR_CAT_SCATTER;   /* an add per input element */
    for (int r = 0; r < (per_in ? 1 : n->nout); r++) {
        int v = per_in ? n->in[0] : n->out[r];
        if (!ir_shape_numel(&ir_cval(g, v)->shape, &e) || !fc_mul64(e, ir_ops[n->op].flops, &f) ||
            !fc_add64(total, f, &total))
            return INT64_MAX;
    }
    return total;
}
