/* test_decompose.c: pass_decompose (passes/decompose.c).
 *
 * For every composite op and split: the result has only primitives, passes ir_verify, keeps
 * inputs and outputs (names included), gives every new node the composite's origin, location
 * and origin op (attention: one fresh origin per step, 5 or 6 of them, with the specified
 * origin ops), and computes what the composite means. The meaning is checked with a small
 * evaluator private to this test (it does not depend on the reference interpreter) against
 * direct implementations of the definitions in docs/language.md, on seeded random inputs, in
 * f64, f32 and bf16 (where the expansion must compute in f32 and round once at the end).
 * (dropout_mask, a primitive generator, is evaluated with the reference interpreter's Philox,
 * whose known answers test_interp checks; the expansion of dropout is what is tested here.)
 */
#include "passes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ir_build.h"
#include "dropout_ref.h"



static int node(IrGraph *g, IrOp op, int nin, const int *ins, IrAttrs a, IrLoc loc) {
    FcErr err = {0};
    int out = -1;
    if (ir_add_node(g, op, ins, nin, &a, loc, -1, 0, &out, &err) != FC_OK) {
        fprintf(stderr, "ir_add_node(%s): %s\n", ir_ops[op].name, err.msg);
        failures++;
    }
    return out;
}
#define N(g, op, a, ...) \
    node(g, op, (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)), (int[]){__VA_ARGS__}, a, (IrLoc){7, 3})

/* ---- random numbers -------------------------------------------------------------------- */
static uint64_t rng_state = 0x243F6A8885A308D3ull;
static double urand(double lo, double hi) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return lo + (hi - lo) * (double)(rng_state >> 11) / 9007199254740992.0;
}

/* ---- a tiny evaluator for the primitives the expansions use ------------------------------------ */
static bool data_error;   /* the last eval stopped at a gather id out of range */

static double round_bf16(double v) {
    float f = (float)v;
    if (isnan(f)) return f;
    uint32_t b;
    memcpy(&b, &f, 4);
    b += 0x7FFFu + ((b >> 16) & 1u);
    b &= 0xFFFF0000u;
    memcpy(&f, &b, 4);
    return f;
}

static double round_to(FcDtype t, double v) {
    switch (t) {
    case FC_F64: return v;
    case FC_F32: return (float)v;
    case FC_BF16: return round_bf16(v);
    case FC_I32: case FC_I64: return isnan(v) ? 0 : trunc(v);
    case FC_BOOL: return v != 0;
    default: return NAN; /* not needed by these tests */
    }
}

typedef struct Ten {
    IrShape sh;
    int64_t n;
    double *d;   /* n values, already rounded to the value's dtype */
} Ten;

static void unravel(const IrShape *s, int64_t flat, int64_t *idx) {
    for (int d = s->rank - 1; d >= 0; d--) {
        idx[d] = flat % s->dims[d];
        flat /= s->dims[d];
    }
}
/* Offset in `in` of the broadcast element at output index idx (shapes aligned right). */
static int64_t boff(const IrShape *in, int orank, const int64_t *idx) {
    int64_t off = 0;
    for (int d = 0; d < in->rank; d++) off = off * in->dims[d] + (in->dims[d] == 1 ? 0 : idx[d + orank - in->rank]);
    return off;
}
static int64_t offset(const IrShape *s, const int64_t *idx) {
    int64_t off = 0;
    for (int d = 0; d < s->rank; d++) off = off * s->dims[d] + idx[d];
    return off;
}

static bool eval_node(const IrGraph *g, const IrNode *n, Ten *v) {
    Ten *o = &v[n->out[0]];
    const Ten *a = n->nin > 0 ? &v[n->in[0]] : NULL, *b = n->nin > 1 ? &v[n->in[1]] : NULL;
    int64_t idx[IR_MAX_RANK], j[IR_MAX_RANK];
    int r = o->sh.rank;
    for (int64_t f = 0; f < o->n; f++) {
        unravel(&o->sh, f, idx);
        IrCategory cat = ir_ops[n->op].cat;
        bool ew = cat == IR_CAT_UNARY || cat == IR_CAT_BINARY || cat == IR_CAT_COMPARE || cat == IR_CAT_SELECT ||
                  cat == IR_CAT_CAST; /* inputs broadcast to the result */
        double x = ew ? a->d[boff(&a->sh, r, idx)] : 0, y = ew && b ? b->d[boff(&b->sh, r, idx)] : 0, z;
        switch (n->op) {
        case IR_OP_NEG: z = -x; break;
        case IR_OP_EXP: z = exp(x); break;
        case IR_OP_LOG: z = log(x); break;
        case IR_OP_RSQRT: z = 1 / sqrt(x); break;
        case IR_OP_TANH: z = tanh(x); break;
        case IR_OP_ERF: z = erf(x); break;
        case IR_OP_NDTR: z = 0.5 * erfc(-x / sqrt(2)); break;
        case IR_OP_ABS: z = fabs(x); break;
        case IR_OP_LT: z = x < y; break;
        case IR_OP_ADD: z = x + y; break;
        case IR_OP_SUB: z = x - y; break;
        case IR_OP_MUL: z = x * y; break;
        case IR_OP_DIV: z = x / y; break;
        case IR_OP_LE: z = x <= y; break;
        case IR_OP_EQ: z = x == y; break;
        case IR_OP_RESHAPE: z = a->d[f]; break;
        case IR_OP_DROPOUT_MASK: z = dropout_ref_kept(n->a.f, n->a.i[0], f); break;
        case IR_OP_GATHER: {   /* ids of any rank, table [R, ...] */
            int64_t row = a->n / a->sh.dims[0], id = (int64_t)b->d[f / row];
            if (id < 0 || id >= a->sh.dims[0]) {
                data_error = true;
                return false;
            }
            z = a->d[id * row + f % row];
            break;
        }
        case IR_OP_WHERE: z = x ? y : v[n->in[2]].d[boff(&v[n->in[2]].sh, r, idx)]; break;
        case IR_OP_CAST: z = x; break;
        case IR_OP_FULL: z = n->a.f; break;
        case IR_OP_IOTA: z = (double)idx[n->a.i[0]]; break;
        case IR_OP_TRANSPOSE:
            for (int d = 0; d < r; d++) j[n->a.list[d]] = idx[d];
            z = a->d[offset(&a->sh, j)];
            break;
        case IR_OP_SLICE:
            memcpy(j, idx, sizeof j);
            j[n->a.i[0]] = n->a.i[1] + idx[n->a.i[0]] * n->a.i[3];
            z = a->d[offset(&a->sh, j)];
            break;
        case IR_OP_MATMUL: {
            /* batch dims broadcast; a [.., M, K], b [.., K, N] */
            IrShape ab = a->sh, bb = b->sh;
            int64_t K = a->sh.dims[a->sh.rank - 1];
            ab.rank -= 2;
            bb.rank -= 2;
            int64_t ao = boff(&ab, r - 2, idx), bo = boff(&bb, r - 2, idx);
            int64_t M = a->sh.dims[a->sh.rank - 2], Nn = b->sh.dims[b->sh.rank - 1];
            int64_t m = idx[r - 2], c = idx[r - 1];
            z = 0;
            for (int64_t k = 0; k < K; k++) z += a->d[(ao * M + m) * K + k] * b->d[(bo * K + k) * Nn + c];
            break;
        }
        case IR_OP_SUM: case IR_OP_MEAN: case IR_OP_MAX: z = 0; break; /* below */
        default:
            fprintf(stderr, "evaluator: op '%s' not supported\n", ir_ops[n->op].name);
            return false;
        }
        o->d[f] = round_to(ir_cval(g, n->out[0])->dtype, z);
    }
    if (n->op == IR_OP_SUM || n->op == IR_OP_MEAN || n->op == IR_OP_MAX) {
        int64_t cnt = a->n / o->n;
        for (int64_t f = 0; f < o->n; f++) o->d[f] = n->op == IR_OP_MAX ? -INFINITY : 0;
        for (int64_t f = 0; f < a->n; f++) {
            unravel(&a->sh, f, idx);
            int k = 0, li = 0;
            for (int d = 0; d < a->sh.rank; d++) {
                bool red = li < n->a.nlist && n->a.list[li] == d;
                if (red) li++;
                if (!red) j[k++] = idx[d];
                else if (n->a.i[0]) j[k++] = 0;
            }
            double *acc = &o->d[offset(&o->sh, j)], x = a->d[f];
            if (n->op == IR_OP_MAX) *acc = (isnan(x) || x > *acc) ? x : *acc;
            else *acc += x;
        }
        for (int64_t f = 0; f < o->n; f++)
            o->d[f] = round_to(ir_cval(g, n->out[0])->dtype, n->op == IR_OP_MEAN ? o->d[f] / (double)cnt : o->d[f]);
    }
    return true;
}

/* Runs g on inputs[i] (already rounded to the inputs' dtypes); returns output k (malloc'd). */
static double *eval(const IrGraph *g, double *const *inputs, int k) {
    Ten *v = calloc((size_t)g->values.len, sizeof *v);
    double *res = NULL;
    for (int i = 0; i < g->values.len; i++) {
        v[i].sh = ir_cval(g, i)->shape;
        ir_shape_numel(&v[i].sh, &v[i].n);
        v[i].d = malloc(sizeof(double) * (size_t)v[i].n);
        for (int64_t f = 0; f < v[i].n; f++) v[i].d[f] = NAN; /* poison */
    }
    for (int i = 0; i < g->inputs.len; i++)
        memcpy(v[g->inputs.data[i]].d, inputs[i], sizeof(double) * (size_t)v[g->inputs.data[i]].n);
    bool ok = true;
    data_error = false;
    for (int i = 0; ok && i < g->nodes.len; i++) ok = eval_node(g, &g->nodes.data[i], v);
    if (ok) {
        Ten *o = &v[g->outputs.data[k]];
        res = malloc(sizeof(double) * (size_t)o->n);
        memcpy(res, o->d, sizeof(double) * (size_t)o->n);
    } else if (!data_error) {
        failures++;
    }
    for (int i = 0; i < g->values.len; i++) free(v[i].d);
    free(v);
    return res;
}

/* Mismatches of got against want: |got - want| <= atol + rtol |want|; non-finite values must
 * be equal (NaN with NaN). */
static int64_t mismatches(const double *got, const double *want, int64_t n, double rtol, double atol) {
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double g = got[i], w = want[i];
        bool ok = isfinite(w) ? isfinite(g) && fabs(g - w) <= atol + rtol * fabs(w) : (isnan(w) ? isnan(g) : g == w);
        if (!ok && bad++ < 3) fprintf(stderr, "  element %lld: got %.17g, want %.17g\n", (long long)i, g, w);
    }
    return bad;
}

/* ---- reference definitions (straight from docs/language.md, in double) ------------------------------ */
/* Splits shape around `axis` into outer x len x inner. */
static void around(const IrShape *s, int axis, int64_t *outer, int64_t *len, int64_t *inner) {
    *outer = *inner = 1;
    for (int d = 0; d < axis; d++) *outer *= s->dims[d];
    for (int d = axis + 1; d < s->rank; d++) *inner *= s->dims[d];
    *len = s->dims[axis];
}

static void ref_softmax(const double *x, double *y, const IrShape *s, int axis, bool log_form) {
    int64_t O, L, I;
    around(s, axis, &O, &L, &I);
    for (int64_t o = 0; o < O; o++)
        for (int64_t i = 0; i < I; i++) {
            double m = -INFINITY, sum = 0;
            for (int64_t l = 0; l < L; l++) m = fmax(m, x[(o * L + l) * I + i]);
            for (int64_t l = 0; l < L; l++) sum += exp(x[(o * L + l) * I + i] - m);
            for (int64_t l = 0; l < L; l++) {
                double d = x[(o * L + l) * I + i] - m;
                y[(o * L + l) * I + i] = log_form ? d - log(sum) : exp(d) / sum;
            }
        }
}

/* layernorm (rms=false) or rmsnorm over the last `cols` elements of each row. */
static void ref_norm(const double *x, const double *g, const double *b, double *y, int64_t rows, int64_t cols,
                     double eps, bool rms) {
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * cols;
        double mu = 0, var = 0;
        if (!rms) {
            for (int64_t c = 0; c < cols; c++) mu += xr[c];
            mu /= (double)cols;
        }
        for (int64_t c = 0; c < cols; c++) var += (xr[c] - mu) * (xr[c] - mu);
        var /= (double)cols;
        for (int64_t c = 0; c < cols; c++)
            y[r * cols + c] = (xr[c] - mu) / sqrt(var + eps) * (g ? g[c] : 1) + (b ? b[c] : 0);
    }
}

static double ref_gelu(double x, bool tanh_form) {
    if (tanh_form) return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    return 0.5 * x * (1 + erf(x / sqrt(2)));
}

static void ref_causal(const double *s, double *y, const IrShape *sh, double value) {
    int64_t tq = sh->dims[sh->rank - 2], tk = sh->dims[sh->rank - 1], n;
    ir_shape_numel(sh, &n);
    for (int64_t f = 0; f < n; f++) {
        int64_t jj = f % tk, ii = (f / tk) % tq;
        y[f] = jj <= ii + (tk - tq) ? s[f] : value;
    }
}

/* q [B, Tq, D] k [1 or B, Tk, D] v [B, Tk, Dv] (batch dims of size 1 broadcast) */
static void ref_attention(const double *q, const double *k, const double *v, double *o, int64_t B, int64_t kb,
                          int64_t tq, int64_t tk, int64_t D, int64_t dv, bool causal, double scale) {
    double *s = malloc(sizeof(double) * (size_t)tk);
    for (int64_t bb = 0; bb < B; bb++) {
        const double *kk = k + (kb == 1 ? 0 : bb) * tk * D;
        for (int64_t i = 0; i < tq; i++) {
            double m = -INFINITY, sum = 0;
            for (int64_t jj = 0; jj < tk; jj++) {
                double acc = 0;
                for (int64_t d = 0; d < D; d++) acc += q[(bb * tq + i) * D + d] * kk[jj * D + d];
                s[jj] = causal && jj > i + (tk - tq) ? -INFINITY : acc * scale;
                m = fmax(m, s[jj]);
            }
            for (int64_t jj = 0; jj < tk; jj++) sum += exp(s[jj] - m);
            for (int64_t c = 0; c < dv; c++) {
                double acc = 0;
                for (int64_t jj = 0; jj < tk; jj++) acc += exp(s[jj] - m) / sum * v[(bb * tk + jj) * dv + c];
                o[(bb * tq + i) * dv + c] = acc;
            }
        }
    }
    free(s);
}

/* ---- helpers ------------------------------------------------------------------------------------- */
static double *rand_input(const IrGraph *g, int input, double lo, double hi) {
    const IrValue *v = ir_cval(g, g->inputs.data[input]);
    int64_t n;
    ir_shape_numel(&v->shape, &n);
    double *d = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) d[i] = round_to(v->dtype, urand(lo, hi));
    return d;
}

static int64_t numel_of(const IrGraph *g, int v) {
    int64_t n;
    ir_shape_numel(&ir_cval(g, v)->shape, &n);
    return n;
}

static IrGraph *decompose(const IrGraph *src) {
    FcErr err = {0};
    IrGraph *out = NULL;
    if (pass_decompose(src, &out, &err) != FC_OK) {
        fprintf(stderr, "pass_decompose: %s\n", err.msg);
        failures++;
        return NULL;
    }
    CHECK(ir_verify(out, &err) == FC_OK);
    for (int i = 0; i < out->nodes.len; i++) {
        IrOp op = out->nodes.data[i].op;
        if (ir_ops[op].cat == IR_CAT_COMPOSITE || op == IR_OP_SPLIT) {
            fprintf(stderr, "decomposed graph still has '%s'\n", ir_ops[op].name);
            failures++;
        }
    }
    /* same inputs and outputs */
    CHECK(out->inputs.len == src->inputs.len && out->outputs.len == src->outputs.len);
    for (int i = 0; i < src->inputs.len && i < out->inputs.len; i++) {
        const IrValue *a = ir_cval(src, src->inputs.data[i]), *b = ir_cval(out, out->inputs.data[i]);
        CHECK(a->dtype == b->dtype && ir_shape_eq(&a->shape, &b->shape));
        CHECK((!a->name && !b->name) || (a->name && b->name && strcmp(a->name, b->name) == 0));
        CHECK(src->is_param.data[i] == out->is_param.data[i]);
    }
    for (int i = 0; i < src->outputs.len && i < out->outputs.len; i++) {
        CHECK(strcmp(src->output_names.data[i], out->output_names.data[i]) == 0);
        const IrValue *a = ir_cval(src, src->outputs.data[i]), *b = ir_cval(out, out->outputs.data[i]);
        CHECK(a->dtype == b->dtype && ir_shape_eq(&a->shape, &b->shape));
    }
    CHECK(out->next_origin >= src->next_origin);
    return out;
}

/* Every node of d implements the single node of s (origin, origin op, location). */
static void check_same_origin(const IrGraph *s, const IrGraph *d) {
    const IrNode *c = &s->nodes.data[s->nodes.len - 1];
    for (int i = 0; i < d->nodes.len; i++) {
        const IrNode *n = &d->nodes.data[i];
        if (n->origin != c->origin || n->origin_op != c->op || n->loc.line != c->loc.line || n->loc.col != c->loc.col) {
            fprintf(stderr, "node %d ('%s') of the expansion of '%s' has origin #%d %s\n", i, ir_ops[n->op].name,
                    ir_ops[c->op].name, n->origin, ir_ops[n->origin_op].name);
            failures++;
        }
    }
    CHECK(d->next_origin == s->next_origin);
}

/* Narrow inputs: the first node is a cast to f32, the last the cast back, all else f32. */
static void check_widened(const IrGraph *d, FcDtype narrow) {
    const IrNode *first = &d->nodes.data[0], *last = &d->nodes.data[d->nodes.len - 1];
    CHECK(first->op == IR_OP_CAST && first->a.dtype == FC_F32);
    CHECK(last->op == IR_OP_CAST && last->a.dtype == narrow);
    for (int i = 0; i + 1 < d->nodes.len; i++) {
        FcDtype t = ir_cval(d, d->nodes.data[i].out[0])->dtype;
        CHECK(t == FC_F32 || t == FC_BOOL || t == FC_I64 || t == FC_I32);   /* integers: indices, labels */
    }
}

/* Tolerances per dtype: f64 and f32 near their epsilon (tiny reductions); bf16 one ulp
 * (2^-8 relative) plus slack for a rounding tie going the other way. */
static double rtol_of(FcDtype t) { return t == FC_F64 ? 1e-12 : t == FC_F32 ? 2e-6 : 1.0 / 128; }
static double atol_of(FcDtype t) { return t == FC_F64 ? 1e-13 : t == FC_F32 ? 1e-6 : 1e-3; }

static void round_all(double *y, int64_t n, FcDtype t) {
    for (int64_t i = 0; i < n; i++) y[i] = round_to(t, y[i]);
}

/* ---- tests ------------------------------------------------------------------------------------------ */
static void test_softmax(FcDtype t, IrShape sh, int axis, bool log_form) {
    IrGraph *g = ir_graph_new("sm", "sm.tf");
    int x = inp(g, "x", t, sh, false);
    int y = N(g, log_form ? IR_OP_LOG_SOFTMAX : IR_OP_SOFTMAX, ((IrAttrs){.i = {axis}}), x);
    FcErr err = {0};
    CHECK(ir_add_output(g, y, "y", &err) == FC_OK);
    IrGraph *d = decompose(g);
    if (d) {
        check_same_origin(g, d);
        if (t == FC_BF16) check_widened(d, t);
        double *in = rand_input(g, 0, -3, 3);
        int64_t n = numel_of(g, y);
        double *want = malloc(sizeof(double) * (size_t)n);
        ref_softmax(in, want, &sh, axis < 0 ? axis + sh.rank : axis, log_form);
        round_all(want, n, t);
        double *got = eval(d, &in, 0);
        if (got && mismatches(got, want, n, rtol_of(t), atol_of(t))) {
            fprintf(stderr, "%s (%s) differs from its definition\n", log_form ? "log_softmax" : "softmax", fc_dtype_name(t));
            failures++;
        }
        /* the harness can fail: softmax is not log_softmax */
        if (got && t == FC_F64) {
            ref_softmax(in, want, &sh, axis < 0 ? axis + sh.rank : axis, !log_form);
            int64_t bad = 0;
            for (int64_t i = 0; i < n; i++) bad += fabs(got[i] - want[i]) > 1e-3;
            CHECK(bad > 0);
        }
        free(in);
        free(want);
        free(got);
    }
    ir_graph_free(d);
    ir_graph_free(g);
}

static void test_norm(FcDtype t, IrShape sh, int naxes, bool rms, bool has_g, bool has_b) {
    IrGraph *g = ir_graph_new("norm", "n.tf");
    int x = inp(g, "x", t, sh, false);
    IrShape ns = {.rank = naxes};
    int64_t axes[IR_MAX_RANK], cols = 1, n;
    for (int i = 0; i < naxes; i++) {
        axes[i] = sh.rank - naxes + i;
        ns.dims[i] = sh.dims[sh.rank - naxes + i];
        cols *= ns.dims[i];
    }
    int ins[3] = {x}, nin = 1;
    if (has_g) ins[nin++] = inp(g, "g", t, ns, true);
    if (has_b) ins[nin++] = inp(g, "b", t, ns, true);
    double eps = rms ? 1e-6 : 1e-5;
    IrAttrs a = {.nlist = naxes, .list = axes, .i = {has_g, has_b}, .f = eps};
    int y = node(g, rms ? IR_OP_RMSNORM : IR_OP_LAYERNORM, nin, ins, a, (IrLoc){4, 11});
    FcErr err = {0};
    CHECK(ir_add_output(g, y, "y", &err) == FC_OK);
    IrGraph *d = decompose(g);
    if (d) {
        check_same_origin(g, d);
        if (t == FC_BF16) check_widened(d, t);
        double *in[3] = {rand_input(g, 0, -2, 3), NULL, NULL};
        for (int i = 1; i < nin; i++) in[i] = rand_input(g, i, 0.5, 1.5);
        n = numel_of(g, y);
        double *want = malloc(sizeof(double) * (size_t)n);
        ref_norm(in[0], has_g ? in[1] : NULL, has_b ? in[has_g ? 2 : 1] : NULL, want, n / cols, cols, eps, rms);
        round_all(want, n, t);
        double *got = eval(d, in, 0);
        if (got && mismatches(got, want, n, rtol_of(t), atol_of(t))) {
            fprintf(stderr, "%s (%s) differs from its definition\n", rms ? "rmsnorm" : "layernorm", fc_dtype_name(t));
            failures++;
        }
        /* without gain and bias, layernorm rows have mean 0 and variance 1 - eps/var */
        if (got && !rms && !has_g && !has_b && t == FC_F64) {
            for (int64_t r = 0; r < n / cols; r++) {
                double mu = 0, var = 0;
                for (int64_t c = 0; c < cols; c++) mu += got[r * cols + c];
                mu /= (double)cols;
                for (int64_t c = 0; c < cols; c++) var += (got[r * cols + c] - mu) * (got[r * cols + c] - mu);
                var /= (double)cols;
                CHECK(fabs(mu) < 1e-12);
                CHECK(cols == 1 ? var == 0 : fabs(var - 1) < 1e-4); /* one element: x - mean = 0 */
            }
        }
        for (int i = 0; i < nin; i++) free(in[i]);
        free(want);
        free(got);
    }
    ir_graph_free(d);
    ir_graph_free(g);
}

static void test_gelu(FcDtype t, bool tanh_form) {
    IrGraph *g = ir_graph_new("gelu", "g.tf");
    IrShape sh = SH(5, 1, 9);
    int x = inp(g, "x", t, sh, false);
    int y = N(g, IR_OP_GELU, ((IrAttrs){.i = {tanh_form}}), x);
    FcErr err = {0};
    CHECK(ir_add_output(g, y, "y", &err) == FC_OK);
    IrGraph *d = decompose(g);
    if (d) {
        check_same_origin(g, d);
        if (t == FC_BF16) check_widened(d, t);
        /* x*x*x, not pow */
        for (int i = 0; i < d->nodes.len; i++) CHECK(d->nodes.data[i].op != IR_OP_POW);
        double *in = rand_input(g, 0, -4, 4);
        int64_t n = numel_of(g, y);
        double *want = malloc(sizeof(double) * (size_t)n);
        for (int64_t i = 0; i < n; i++) want[i] = round_to(t, ref_gelu(in[i], tanh_form));
        double *got = eval(d, &in, 0);
        if (got && mismatches(got, want, n, rtol_of(t), atol_of(t))) {
            fprintf(stderr, "gelu %s (%s) differs from its definition\n", tanh_form ? "tanh" : "none", fc_dtype_name(t));
            failures++;
        }
        free(got);
        /* far in the negative tail (x down to -14.6, where f32 gelu reaches the subnormals):
         * the expansion must not cancel; in f64 the textbook forms are 0 or wrong here. (In
         * f32 this evaluator's roundings are amplified in the tail; tests/unit/test_vecmath.c
         * holds the f32 bounds.) */
        for (int64_t i = 0; i < n && t == FC_F64; i++) {
            double xi = -6.0 - 8.6 * (double)i / (double)(n - 1);
            in[i] = xi;
            double u = sqrt(2 / M_PI) * (xi + 0.044715 * xi * xi * xi);
            want[i] = round_to(t, tanh_form ? xi / (1 + exp(-2 * u)) : 0.5 * xi * erfc(-xi / sqrt(2)));
        }
        got = t == FC_F64 ? eval(d, &in, 0) : NULL;
        if (got && mismatches(got, want, n, 1e-12, 0)) {
            fprintf(stderr, "gelu %s (%s) loses the negative tail\n", tanh_form ? "tanh" : "none", fc_dtype_name(t));
            failures++;
        }
        free(in);
        free(want);
        free(got);
    }
    ir_graph_free(d);
    ir_graph_free(g);
}

static void test_causal_mask(FcDtype t, IrShape sh, double value) {
    IrGraph *g = ir_graph_new("cm", "c.tf");
    int x = inp(g, "s", t, sh, false);
    int y = N(g, IR_OP_CAUSAL_MASK, ((IrAttrs){.f = value}), x);
    FcErr err = {0};
    CHECK(ir_add_output(g, y, "y", &err) == FC_OK);
    IrGraph *d = decompose(g);
    if (d) {
        check_same_origin(g, d);
        double *in = rand_input(g, 0, -3, 3);
        int64_t n = numel_of(g, y);
        double *want = malloc(sizeof(double) * (size_t)n);
        ref_causal(in, want, &sh, value);
        round_all(want, n, t);
        double *got = eval(d, &in, 0);
        if (got && mismatches(got, want, n, 0, 0)) {
            fprintf(stderr, "causal_mask (%s) differs from its definition\n", fc_dtype_name(t));
            failures++;
        }
        free(in);
        free(want);
        free(got);
    }
    ir_graph_free(d);
    ir_graph_free(g);
}

static void test_attention(FcDtype t, bool causal, int64_t B, int64_t kb, int64_t tq, int64_t tk, int64_t D,
                           int64_t dv) {
    IrGraph *g = ir_graph_new("att", "a.tf");
    int q = inp(g, "q", t, SH(B, tq, D), false);
    int k = inp(g, "k", t, SH(kb, tk, D), false);
    int v = inp(g, "v", t, SH(B, tk, dv), false);
    int pre = N(g, IR_OP_NEG, ((IrAttrs){0}), q);   /* an unrelated node before it */
    double scale = 1 / sqrt((double)D);
    int y = N(g, IR_OP_ATTENTION, ((IrAttrs){.i = {causal}, .f = scale}), q, k, v);
    FcErr err = {0};
    CHECK(ir_add_output(g, y, "o", &err) == FC_OK);
    CHECK(ir_add_output(g, pre, "negq", &err) == FC_OK);
    IrGraph *d = decompose(g);
    if (d) {
        /* the neg node keeps its origin; attention's steps get fresh ones, in this order */
        static const IrOp steps_causal[] = {IR_OP_TRANSPOSE, IR_OP_MATMUL, IR_OP_MUL, IR_OP_CAUSAL_MASK, IR_OP_SOFTMAX,
                                            IR_OP_MATMUL};
        static const IrOp steps_plain[] = {IR_OP_TRANSPOSE, IR_OP_MATMUL, IR_OP_MUL, IR_OP_SOFTMAX, IR_OP_MATMUL};
        const IrOp *steps = causal ? steps_causal : steps_plain;
        int nsteps = causal ? 6 : 5;
        CHECK(d->nodes.data[0].op == IR_OP_NEG && d->nodes.data[0].origin == g->nodes.data[0].origin &&
              d->nodes.data[0].origin_op == IR_OP_NEG);
        int seen[8], nseen = 0;
        for (int i = 1; i < d->nodes.len; i++) {
            const IrNode *n = &d->nodes.data[i];
            if (nseen == 0 || seen[nseen - 1] != n->origin) {
                for (int s = 0; s < nseen; s++) CHECK(seen[s] != n->origin); /* steps are contiguous */
                if (nseen < 8) seen[nseen] = n->origin;
                if (nseen < nsteps) CHECK(n->origin_op == steps[nseen]);
                nseen++;
            } else if (nseen <= nsteps) {
                CHECK(n->origin_op == steps[nseen - 1]);
            }
            CHECK(n->origin >= g->next_origin);
            CHECK(n->loc.line == 7 && n->loc.col == 3);
        }
        CHECK(nseen == nsteps);
        CHECK(d->next_origin == g->next_origin + nsteps);
        if (t == FC_BF16) {
            CHECK(d->nodes.data[d->nodes.len - 1].op == IR_OP_CAST);
            CHECK(ir_cval(d, d->outputs.data[0])->dtype == FC_BF16);
        }
        double *in[3] = {rand_input(g, 0, -2, 2), rand_input(g, 1, -2, 2), rand_input(g, 2, -2, 2)};
        int64_t n = numel_of(g, y);
        double *want = malloc(sizeof(double) * (size_t)n);
        ref_attention(in[0], in[1], in[2], want, B, kb, tq, tk, D, dv, causal, scale);
        round_all(want, n, t);
        double *got = eval(d, in, 0);
        if (got && mismatches(got, want, n, rtol_of(t), atol_of(t))) {
            fprintf(stderr, "attention (%s, causal=%d) differs from its definition\n", fc_dtype_name(t), causal);
            failures++;
        }
        for (int i = 0; i < 3; i++) free(in[i]);
        free(want);
        free(got);
    }
    ir_graph_free(d);
    ir_graph_free(g);
}

/* dropout: where(mask, x * scale, 0) with the mask of docs/language.md and the scale rounded to
 * x's dtype; every node carries dropout's origin; p = 0 is the identity. */
static void test_dropout(FcDtype t, IrShape sh, double p, int64_t seed) {
    IrGraph *g = ir_graph_new("dr", "d.tf");
    int x = inp(g, "x", t, sh, false);
    int y = N(g, IR_OP_DROPOUT, ((IrAttrs){.f = p, .i = {seed}}), x);
    FcErr err = {0};
    CHECK(ir_add_output(g, y, "y", &err) == FC_OK);
    IrGraph *d = decompose(g);
    if (d) {
        check_same_origin(g, d);
        int masks = 0;
        for (int i = 0; i < d->nodes.len; i++) {
            const IrNode *n = &d->nodes.data[i];
            if (n->op != IR_OP_DROPOUT_MASK) continue;
            masks++;
            CHECK(n->a.f == p && n->a.i[0] == seed && ir_shape_eq(&ir_cval(d, n->out[0])->shape, &sh));
        }
        CHECK(masks == 1);
        double *in = rand_input(g, 0, -3, 3);
        int64_t n = numel_of(g, y), nkept = 0;
        double *want = malloc(sizeof(double) * (size_t)n), scale = round_to(t, 1.0 / (1.0 - p));
        for (int64_t i = 0; i < n; i++) {
            bool k = dropout_ref_kept(p, seed, i);
            nkept += k;
            want[i] = round_to(t, k ? in[i] * scale : 0.0);
        }
        double *got = eval(d, &in, 0);
        if (got && mismatches(got, want, n, 0, 0)) {
            fprintf(stderr, "dropout (%s, p=%g) differs from its definition\n", fc_dtype_name(t), p);
            failures++;
        }
        for (int64_t i = 0; got && p == 0 && i < n; i++) CHECK(got[i] == in[i]);
        CHECK(p > 0 || nkept == n);
        free(in);
        free(want);
        free(got);
    }
    ir_graph_free(d);
    ir_graph_free(g);
}

/* cross_entropy: mean over rows of log(sum(exp(x - max))) - (x[label] - max), computed in f32
 * for bf16 and rounded once; the row part under the composite's origin, the mean (and the
 * cast back) under one fresh origin with origin op cross_entropy; a label outside [0, C)
 * stops the evaluation at the gather's range check. */
static void test_cross_entropy(FcDtype t, FcDtype lt, IrShape sh) {
    IrGraph *g = ir_graph_new("ce", "c.tf");
    IrShape ls = sh;
    ls.rank--;
    int x = inp(g, "x", t, sh, false), lab = inp(g, "y", lt, ls, false);
    int y = N(g, IR_OP_CROSS_ENTROPY, ((IrAttrs){0}), x, lab);
    FcErr err = {0};
    CHECK(ir_add_output(g, y, "loss", &err) == FC_OK);
    IrGraph *d = decompose(g);
    if (d) {
        const IrNode *c = &g->nodes.data[0];
        bool fresh = false;
        for (int i = 0; i < d->nodes.len; i++) {
            const IrNode *n = &d->nodes.data[i];
            CHECK(n->origin_op == IR_OP_CROSS_ENTROPY && n->loc.line == c->loc.line && n->loc.col == c->loc.col);
            if (n->origin != c->origin) {
                CHECK(n->origin == g->next_origin);
                fresh = true;
            } else {
                CHECK(!fresh);   /* the row part first, then the mean */
            }
        }
        CHECK(fresh && d->next_origin == g->next_origin + 1);
        if (t == FC_BF16) check_widened(d, t);
        int64_t C = sh.dims[sh.rank - 1], rows = numel_of(g, lab);
        double *in[2] = {rand_input(g, 0, -4, 4), malloc(sizeof(double) * (size_t)rows)};
        for (int64_t r = 0; r < rows; r++) in[1][r] = (double)((r * 7 + 3) % C);
        double want = 0;
        for (int64_t r = 0; r < rows; r++) {
            const double *xr = in[0] + r * C;
            double m = -INFINITY, s = 0;
            for (int64_t k = 0; k < C; k++) m = fmax(m, xr[k]);
            for (int64_t k = 0; k < C; k++) s += exp(xr[k] - m);
            want += log(s) - (xr[(int64_t)in[1][r]] - m);
        }
        want = round_to(t, want / (double)rows);
        double *got = eval(d, in, 0);
        if (got && mismatches(got, &want, 1, rtol_of(t), atol_of(t))) {
            fprintf(stderr, "cross_entropy (%s) differs from its definition\n", fc_dtype_name(t));
            failures++;
        }
        free(got);
        for (int bad = 0; bad < 2; bad++) {
            in[1][rows - 1] = bad ? (double)C : -1.0;
            got = eval(d, in, 0);
            CHECK(!got && data_error);
            free(got);
        }
        free(in[0]);
        free(in[1]);
    }
    ir_graph_free(d);
    ir_graph_free(g);
}

static void test_split(void) {
    IrGraph *g = ir_graph_new("sp", "s.tf");
    int x = inp(g, "x", FC_F32, SH(3, 7), false);
    int s = N(g, IR_OP_SPLIT, ((IrAttrs){LIST(2, 4, 1), .i = {-1}}), x);
    ir_val(g, s + 1)->name = "mid";
    FcErr err = {0};
    for (int k = 0; k < 3; k++) {
        char name[16];
        snprintf(name, sizeof name, "p%d", k);
        CHECK(ir_add_output(g, s + k, name, &err) == FC_OK);
    }
    IrGraph *d = decompose(g);
    if (d) {
        check_same_origin(g, d);
        CHECK(d->nodes.len == 3);
        CHECK(strcmp(ir_cval(d, d->outputs.data[1])->name, "mid") == 0);
        double *in = rand_input(g, 0, -1, 1);
        int64_t off = 0, sizes[3] = {2, 4, 1};
        for (int k = 0; k < 3; k++) {
            double *got = eval(d, &in, k);
            for (int64_t r = 0; got && r < 3; r++)
                for (int64_t c = 0; c < sizes[k]; c++) CHECK(got[r * sizes[k] + c] == in[r * 7 + off + c]);
            off += sizes[k];
            free(got);
        }
        free(in);
    }
    ir_graph_free(d);
    ir_graph_free(g);
}

/* Nodes that are not composites are copied through with their origin, location and names;
 * the output graph's origins stay unique. */
static void test_passthrough(void) {
    IrGraph *g = ir_graph_new("mix", "m.tf");
    int x = inp(g, "x", FC_F32, SH(2, 5), false);
    int b = inp(g, "b", FC_F32, SH(5), true);
    int a = node(g, IR_OP_ADD, 2, (int[]){x, b}, (IrAttrs){0}, (IrLoc){3, 9});
    ir_val(g, a)->name = "h";
    int s = node(g, IR_OP_SOFTMAX, 1, (int[]){a}, (IrAttrs){.i = {1}}, (IrLoc){4, 5});
    ir_val(g, s)->name = "p";
    int e = node(g, IR_OP_EXP, 1, (int[]){s}, (IrAttrs){0}, (IrLoc){5, 1});
    FcErr err = {0};
    CHECK(ir_add_output(g, e, "out0", &err) == FC_OK);
    CHECK(ir_add_output(g, x, "x", &err) == FC_OK);
    IrGraph *d = decompose(g);
    if (d) {
        const IrNode *first = &d->nodes.data[0], *last = &d->nodes.data[d->nodes.len - 1];
        CHECK(first->op == IR_OP_ADD && first->origin == 0 && first->loc.line == 3 && first->loc.col == 9);
        CHECK(strcmp(ir_cval(d, first->out[0])->name, "h") == 0);
        CHECK(last->op == IR_OP_EXP && last->origin == 2 && last->origin_op == IR_OP_EXP && last->loc.line == 5);
        CHECK(strcmp(ir_cval(d, last->in[0])->name, "p") == 0);
        for (int i = 1; i + 1 < d->nodes.len; i++)
            CHECK(d->nodes.data[i].origin == 1 && d->nodes.data[i].origin_op == IR_OP_SOFTMAX);
        CHECK(d->outputs.data[1] == d->inputs.data[0]);
        CHECK(strcmp(d->output_names.data[0], "out0") == 0 && strcmp(d->output_names.data[1], "x") == 0);
        /* the text form of the result parses back */
        StrBuf sb = {0};
        ir_print(d, &sb);
        IrGraph *p = NULL;
        CHECK(ir_parse(sb.data, "d.ir", &p, &err) == FC_OK);
        ir_graph_free(p);
        sb_free(&sb);
    }
    ir_graph_free(d);
    ir_graph_free(g);
}

/* Allocation failures at every point of the pass are reported and leak nothing. */
static void test_alloc_failures(void) {
    IrGraph *g = ir_graph_new("f", "f.tf");
    int q = inp(g, "q", FC_BF16, SH(2, 3, 4), false);
    int x = N(g, IR_OP_ATTENTION, ((IrAttrs){.i = {1}, .f = 0.5}), q, q, q);
    int y = N(g, IR_OP_LAYERNORM, ((IrAttrs){LIST(2), .f = 1e-5}), x);
    int s = N(g, IR_OP_SPLIT, ((IrAttrs){LIST(1, 3), .i = {2}}), y);
    FcErr err = {0};
    CHECK(ir_add_output(g, s + 1, "o", &err) == FC_OK);
    for (long n = 1;; n++) {
        IrGraph *d = NULL;
        fc_alloc_fail_at(n);
        FcStatus st = pass_decompose(g, &d, &err);
        fc_alloc_fail_at(0);
        if (st == FC_OK) {
            ir_graph_free(d);
            break;
        }
        if (st != FC_ERR_NOMEM || d) {
            fprintf(stderr, "decompose with allocation %ld failing: status %d: %s\n", n, (int)st, err.msg);
            failures++;
            ir_graph_free(d);
            break;
        }
    }
    ir_graph_free(g);
}

int main(void) {
    test_softmax(FC_F64, SH(3, 1, 5), 2, false);
    test_softmax(FC_F64, SH(3, 1, 5), 0, false);
    test_softmax(FC_F64, SH(4, 7), -1, true);
    test_softmax(FC_F32, SH(2, 9, 3), 1, false);
    test_softmax(FC_F32, SH(1, 1), 1, true);
    test_softmax(FC_BF16, SH(3, 17), 1, false);
    test_softmax(FC_BF16, SH(3, 17), 1, true);

    test_norm(FC_F64, SH(3, 5, 7), 1, false, true, true);
    test_norm(FC_F64, SH(3, 5, 7), 2, false, false, false);
    test_norm(FC_F64, SH(4, 1), 1, false, false, false);
    test_norm(FC_F32, SH(6, 11), 1, false, false, true);
    test_norm(FC_F32, SH(6, 11), 1, false, true, false);
    test_norm(FC_BF16, SH(5, 13), 1, false, true, true);
    test_norm(FC_F64, SH(3, 5, 7), 1, true, true, false);
    test_norm(FC_F32, SH(2, 3, 5), 2, true, false, false);
    test_norm(FC_BF16, SH(5, 13), 1, true, true, false);

    test_gelu(FC_F64, false);
    test_gelu(FC_F64, true);
    test_gelu(FC_F32, false);
    test_gelu(FC_F32, true);
    test_gelu(FC_BF16, false);
    test_gelu(FC_BF16, true);

    test_causal_mask(FC_F32, SH(2, 3, 5), -INFINITY);
    test_causal_mask(FC_F64, SH(4, 4), -1e4);
    test_causal_mask(FC_F32, SH(5, 3), 0.25);
    test_causal_mask(FC_BF16, SH(1, 2, 1, 1), -1e4);

    test_attention(FC_F64, false, 2, 1, 3, 5, 4, 6);
    test_attention(FC_F64, true, 2, 2, 5, 5, 3, 2);
    test_attention(FC_F64, true, 1, 1, 3, 7, 2, 1);
    test_attention(FC_F32, true, 3, 3, 1, 1, 5, 3);
    test_attention(FC_BF16, true, 2, 2, 4, 6, 8, 5);

    test_dropout(FC_F64, SH(3, 1, 5), 0.3, 7);
    test_dropout(FC_F32, SH(4, 33), 0.5, -1);
    test_dropout(FC_F32, SH(1), 0.9, 0);
    test_dropout(FC_BF16, SH(5, 13), 0.1, 4294967297);
    test_dropout(FC_F32, SH(2, 7), 0, 3);

    test_cross_entropy(FC_F64, FC_I64, SH(3, 1, 5));
    test_cross_entropy(FC_F32, FC_I32, SH(4, 33));
    test_cross_entropy(FC_F32, FC_I64, SH(9));
    test_cross_entropy(FC_BF16, FC_I32, SH(5, 13));
    test_cross_entropy(FC_F32, FC_I32, SH(6, 1));

    test_split();
    test_passthrough();
    test_alloc_failures();

    if (failures) {
        fprintf(stderr, "test_decompose: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_decompose: ok\n");
    return 0;
}
