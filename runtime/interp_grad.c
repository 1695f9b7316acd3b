/* interp_grad.c: the reference interpreter's backward pass, the gradient oracle (see
 * rt_interp_grad in interp.h; the rules are docs/training.md, "Gradient rules").
 *
 * Entry point: rt_interp_grad. The forward is interp.c's own (rt_interp_forward_keep,
 * interp_priv.h: every value kept as f64, rounded to its dtype after each op), with this file's
 * forward of the training ops dropout and cross_entropy where interp.c refuses them. The
 * backward then walks the nodes in reverse and applies one hand-written rule per source-level
 * op (composites included: softmax, layernorm, attention, gelu ... have analytic rules here,
 * never their decomposition), all in f64:
 * - a rule reads the forward values of its node's inputs (derivatives are evaluated there, in
 *   f64; an op's own rounded result is not reused) and the gradients of its results, and ADDS
 *   into its inputs' gradient buffers (a value read twice, mul(x, x), gets both terms);
 * - the rounding of each result to its dtype is taken as the identity (straight-through), so is
 *   a float->float cast; integer and bool values carry no gradient at all;
 * - broadcasting is undone by summing: every rule maps an output element to the input element
 *   it read and accumulates there.
 * Only values that depend on a requested input through float values get a gradient buffer.
 *
 * Invariants: bw_table has an entry for every op of ops.def (built from the X-macro, checked at
 * compile time); this file shares no code with passes/ (the autodiff pass it checks),
 * codegen/, ir/kir.* or runtime/host.c, and only the forward driver with interp.c. Memory:
 * every buffer is freed on every path; a result's gradient is freed once its node is done.
 */
#include "interp.h"
#include "interp_priv.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- index helpers (div/mod from the flat index: slow and obviously right) ------------------- */
static const IrShape *vshape(const IrGraph *g, int id) { return &ir_cval(g, id)->shape; }

static int64_t numel(const IrShape *s) {
    int64_t m = 1;
    for (int d = 0; d < s->rank; d++) m *= s->dims[d];
    return m;
}
static int64_t numel_range(const IrShape *s, int lo, int hi) {
    int64_t m = 1;
    for (int d = lo; d < hi; d++) m *= s->dims[d];
    return m;
}

/* Element i (row-major over odims[0..orank)) read from an operand whose dims sdims[0..srank)
 * broadcast to odims (aligned right, a size-1 dim repeats): the operand's offset, in units of
 * unit elements (1 for an elementwise operand, a matrix's size for a batch). */
static int64_t bc_off(const int64_t *odims, int orank, const int64_t *sdims, int srank, int64_t unit, int64_t i) {
    int64_t off = 0, mul = unit;
    for (int d = orank - 1, e = srank - 1; d >= 0; d--, e--) {
        int64_t k = i % odims[d];
        i /= odims[d];
        if (e < 0) continue;
        if (sdims[e] != 1) off += k * mul;
        mul *= sdims[e];
    }
    return off;
}
static int64_t bcast_off(const IrShape *os, const IrShape *s, int64_t i) {
    return bc_off(os->dims, os->rank, s->dims, s->rank, 1, i);
}
/* Batch z (over the nb leading dims of os) of an operand whose last two dims are a matrix. */
static int64_t batch_off(const IrShape *os, int nb, const IrShape *s, int64_t z) {
    return bc_off(os->dims, nb, s->dims, s->rank - 2, s->dims[s->rank - 2] * s->dims[s->rank - 1], z);
}

/* ---- the training ops' forward (used while interp.c refuses them) ----------------------------- */
void rt_interp_grad_philox(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3], k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; r++) {
        if (r > 0) {
            k0 += 0x9E3779B9u; /* the Weyl key schedule, bumped before rounds 2..10 */
            k1 += 0xBB67AE85u;
        }
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

/* dropout's mask: element idx of x is kept iff word 0 of Philox(counter idx, key seed) is at
 * least floor(p * 2^32). */
static bool dropout_kept(double p, int64_t seed, int64_t idx) {
    uint64_t s = (uint64_t)seed, i = (uint64_t)idx;
    const uint32_t key[2] = {(uint32_t)s, (uint32_t)(s >> 32)};
    const uint32_t ctr[4] = {(uint32_t)i, (uint32_t)(i >> 32), 0, 0};
    uint32_t r[4];
    rt_interp_grad_philox(ctr, key, r);
    return (uint64_t)r[0] >= (uint64_t)floor(p * 0x1p32);
}

/* Rows of cross_entropy's logits [.., C] (the labels' element count) and C. */
static void ce_dims(const IrGraph *g, const IrNode *n, int64_t *rows, int64_t *classes) {
    const IrShape *ls = vshape(g, n->in[0]);
    *classes = ls->dims[ls->rank - 1];
    *rows = numel_range(ls, 0, ls->rank - 1);
}

/* Label r must be an index into the classes. */
static FcStatus ce_label(const IrGraph *g, const IrNode *n, const double *labels, int64_t r, int64_t classes,
                         FcErr *err) {
    double id = labels[r];
    if (id >= 0 && id < (double)classes) return FC_OK;
    char loc[320] = "";
    if (n->loc.line > 0)
        snprintf(loc, sizeof loc, "%.256s:%d:%d: ", g->file ? g->file : "<input>", n->loc.line, n->loc.col);
    return fc_err_set(err, FC_ERR_RUNTIME_DATA, "%scross_entropy: label %.0f of row %lld is out of range [0, %lld)",
                      loc, id, (long long)r, (long long)classes);
}

/* log(sum(exp(x[0..c)))), shifted by the maximum. */
static double logsumexp(const double *x, int64_t c) {
    double mx = -INFINITY, s = 0;
    for (int64_t k = 0; k < c; k++) mx = x[k] > mx ? x[k] : mx;
    for (int64_t k = 0; k < c; k++) s += exp(x[k] - mx);
    return mx + log(s);
}

static FcStatus training_forward(const IrGraph *g, const IrNode *n, const double *const *in,
                                 double *const *out, FcErr *err) {
    if (n->op == IR_OP_DROPOUT) {
        double p = n->a.f;
        int64_t m = numel(vshape(g, n->out[0]));
        for (int64_t i = 0; i < m; i++) out[0][i] = dropout_kept(p, n->a.i[0], i) ? in[0][i] / (1.0 - p) : 0.0;
        return FC_OK;
    }
    if (n->op == IR_OP_CROSS_ENTROPY) {
        int64_t rows, c;
        ce_dims(g, n, &rows, &c);
        double loss = 0;
        for (int64_t r = 0; r < rows; r++) {
            FC_TRY(ce_label(g, n, in[1], r, c, err));
            loss += logsumexp(in[0] + r * c, c) - in[0][r * c + (int64_t)in[1][r]];
        }
        out[0][0] = loss / (double)rows;
        return FC_OK;
    }
    return fc_err_set(err, FC_ERR_UNSUPPORTED, "the reference interpreter does not run '%s'", ir_ops[n->op].name);
}

/* ---- the rule table ------------------------------------------------------------------------------ */
/* One node's backward: x[i] the forward value of input i, gy[k] the gradient of result k (never
 * NULL: zeros where none flows), gx[i] the gradient buffer of input i to add into, or NULL where
 * input i needs none (not float, or not on a path from a requested input). */
typedef struct Bw {
    const IrGraph *g;
    const IrNode *n;
    const double *const *x;
    const double *const *gy;
    double *const *gx;
    const uint64_t *noise;   /* rt_interp_grad_noisy's seed, or NULL */
    int node;                /* n's index (the noise's phase) */
} Bw;
typedef FcStatus (*BwFn)(const Bw *b, FcErr *err);
#define BW(ID) static FcStatus bw_##ID(const Bw *b, FcErr *err)

#define OP(ID, NAME, MININ, MAXIN, NOUT, CAT, ATTRS, SHAPE, FLOPS) BW(ID);
#include "ops.def"
#undef OP

static const BwFn bw_table[] = {
#define OP(ID, NAME, MININ, MAXIN, NOUT, CAT, ATTRS, SHAPE, FLOPS) [IR_OP_##ID] = bw_##ID,
#include "ops.def"
#undef OP
};
_Static_assert(sizeof bw_table / sizeof bw_table[0] == IR_OP_COUNT,
               "the gradient oracle must have a rule for every op of ops.def");

static const IrShape *bin_shape(const Bw *b, int i) { return vshape(b->g, b->n->in[i]); }
static const IrShape *bout_shape(const Bw *b, int k) { return vshape(b->g, b->n->out[k]); }

/* Ops without a gradient: comparisons (bool results), generators (no inputs). */
#define BW_NONE(ID)                                                                            \
    BW(ID) {                                                                                   \
        (void)b, (void)err;                                                                    \
        return FC_OK;                                                                          \
    }
BW_NONE(LT)
BW_NONE(LE)
BW_NONE(GT)
BW_NONE(GE)
BW_NONE(EQ)
BW_NONE(NE)
BW_NONE(IOTA)
BW_NONE(FULL)
BW_NONE(DROPOUT_MASK)
BW_NONE(FP8_SCALE)

/* ---- elementwise unary: gx += gy * f'(x) --------------------------------------------------------- */
static FcStatus unary_bw(const Bw *b, double (*d)(double)) {
    if (!b->gx[0]) return FC_OK;
    int64_t m = numel(bout_shape(b, 0));
    for (int64_t i = 0; i < m; i++) b->gx[0][i] += b->gy[0][i] * d(b->x[0][i]);
    return FC_OK;
}

static const double SQRT_2_OVER_PI = 0.79788456080286535588, INV_SQRT_2PI = 0.39894228040143267794;
static const double TWO_OVER_SQRT_PI = 1.12837916709551257390, GELU_K1 = 0.044715;

static double sigm(double x) { return 1.0 / (1.0 + exp(-x)); }
static double d_neg(double x) { (void)x; return -1.0; }
static double d_abs(double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; } /* abs'(0) = 0 */
static double d_exp(double x) { return exp(x); }
static double d_log(double x) { return 1.0 / x; }
static double d_sqrt(double x) { return 0.5 / sqrt(x); }
static double d_rsqrt(double x) { return -0.5 / (x * sqrt(x)); }
static double d_recip(double x) { return -1.0 / (x * x); }
static double d_square(double x) { return 2.0 * x; }
static double d_tanh(double x) { double t = tanh(x); return 1.0 - t * t; }
static double d_sigmoid(double x) { double s = sigm(x); return s * (1.0 - s); }
static double d_relu(double x) { return x > 0 ? 1.0 : 0.0; } /* relu'(0) = 0 */
static double d_silu(double x) { double s = sigm(x); return s * (1.0 + x * (1.0 - s)); }
static double d_erf(double x) { return TWO_OVER_SQRT_PI * exp(-x * x); }
static double d_ndtr(double x) { return INV_SQRT_2PI * exp(-0.5 * x * x); }
static double d_sin(double x) { return cos(x); }
static double d_cos(double x) { return -sin(x); }
/* x Phi(x): Phi(x) + x phi(x) */
static double d_gelu(double x) { return 0.5 * erfc(-x * 0.70710678118654752440) + x * INV_SQRT_2PI * exp(-0.5 * x * x); }
/* x sigmoid(2u), u = sqrt(2/pi) (x + k1 x^3): s + x 2 s (1 - s) u' */
static double d_gelu_tanh(double x) {
    double s = sigm(2.0 * SQRT_2_OVER_PI * (x + GELU_K1 * x * x * x));
    return s + x * 2.0 * s * (1.0 - s) * SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_K1 * x * x);
}

#define BW_UNARY(ID, D)                                                                        \
    BW(ID) {                                                                                   \
        (void)err;                                                                             \
        return unary_bw(b, D);                                                                 \
    }
BW_UNARY(NEG, d_neg)
BW_UNARY(ABS, d_abs)
BW_UNARY(EXP, d_exp)
BW_UNARY(LOG, d_log)
BW_UNARY(SQRT, d_sqrt)
BW_UNARY(RSQRT, d_rsqrt)
BW_UNARY(RECIP, d_recip)
BW_UNARY(SQUARE, d_square)
/* tanh and sigmoid: a program's backward computes 1 - y^2 and y (1 - y) from the y it saved,
 * rounded to the type it was stored in (an f8 tensor's format where an fp8_quant reads y), and
 * near saturation those cancel: a tanh near 0.99 stored as E4M3 reads back as 1, and its
 * gradient is 0 where the oracle's is not (difftest seed 2026112632 graph 446). With noise the
 * oracle therefore derives from y moved by one rounding of that type, so that the conditioning
 * check sees how much that rounding moves the gradient; without noise, from x as the other
 * rules do. */
/* The type a program's backward reads n's result y in: y's own, or the f8 format of the
 * fp8_quant that reads y (--train at f8: passes/autodiff.c reads y from its E4M3 copy). */
static FcDtype stored_dtype(const Bw *b) {
    int out = b->n->out[0];
    FcDtype t = ir_cval(b->g, out)->dtype;
    for (int k = 0; k < b->g->nodes.len; k++) {
        const IrNode *u = &b->g->nodes.data[k];
        if (u->op == IR_OP_FP8_QUANT && u->in[0] == out && u->a.i[0] >= 0 && u->a.i[0] < b->g->fp8.len)
            t = b->g->fp8.data[u->a.i[0]].fmt;
    }
    return t;
}
static FcStatus saturating_bw(const Bw *b, bool sigmoid, FcErr *err) {
    if (!b->gx[0]) return FC_OK;
    if (!b->noise) return unary_bw(b, sigmoid ? d_sigmoid : d_tanh);
    int64_t m = numel(bout_shape(b, 0));
    FcDtype t = stored_dtype(b);
    double *y = fc_calloc((size_t)(m > 0 ? m : 1), sizeof(double));
    if (!y) return FC_OOM(err);
    for (int64_t i = 0; i < m; i++) y[i] = sigmoid ? sigm(b->x[0][i]) : tanh(b->x[0][i]);
    rt_interp_perturb(y, m, t, *b->noise, b->node, 200, 1);
    for (int64_t i = 0; i < m; i++) b->gx[0][i] += b->gy[0][i] * (sigmoid ? y[i] * (1.0 - y[i]) : 1.0 - y[i] * y[i]);
    fc_free(y);
    return FC_OK;
}
BW(TANH) { return saturating_bw(b, false, err); }
BW(SIGMOID) { return saturating_bw(b, true, err); }
BW_UNARY(RELU, d_relu)
BW_UNARY(SILU, d_silu)
BW_UNARY(ERF, d_erf)
BW_UNARY(NDTR, d_ndtr)
BW_UNARY(SIN, d_sin)
BW_UNARY(COS, d_cos)

BW(GELU) {
    (void)err;
    return unary_bw(b, b->n->a.i[0] == IR_APPROX_TANH ? d_gelu_tanh : d_gelu);
}

/* float -> float: the gradient passes (the rounding is the identity); float <-> int: none (an
 * integer side has no buffer, so the rule is never reached from or into it). */
BW(CAST) {
    (void)err;
    if (!b->gx[0] || !ir_dtype_is_float(ir_cval(b->g, b->n->out[0])->dtype)) return FC_OK;
    int64_t m = numel(bout_shape(b, 0));
    for (int64_t i = 0; i < m; i++) b->gx[0][i] += b->gy[0][i];
    return FC_OK;
}

/* ---- elementwise binary: partials at (a, b), summed back over broadcast dims --------------------- */
static FcStatus binary_bw(const Bw *b, void (*d)(double x, double y, double *dx, double *dy)) {
    const IrShape *os = bout_shape(b, 0), *as = bin_shape(b, 0), *bs = bin_shape(b, 1);
    int64_t m = numel(os);
    for (int64_t i = 0; i < m; i++) {
        int64_t oa = bcast_off(os, as, i), ob = bcast_off(os, bs, i);
        double da, db;
        d(b->x[0][oa], b->x[1][ob], &da, &db);
        if (b->gx[0]) b->gx[0][oa] += b->gy[0][i] * da;
        if (b->gx[1]) b->gx[1][ob] += b->gy[0][i] * db;
    }
    return FC_OK;
}

static void p_add(double x, double y, double *dx, double *dy) { (void)x, (void)y, *dx = 1, *dy = 1; }
static void p_sub(double x, double y, double *dx, double *dy) { (void)x, (void)y, *dx = 1, *dy = -1; }
static void p_mul(double x, double y, double *dx, double *dy) { *dx = y, *dy = x; }
static void p_div(double x, double y, double *dx, double *dy) { *dx = 1.0 / y, *dy = -x / (y * y); }
/* d/dx = y x^(y-1) (0 where y = 0), d/dy = x^y log(x) (0 where x = 0 and y >= 0; NaN for x < 0),
 * as PyTorch's pow backward */
static void p_pow(double x, double y, double *dx, double *dy) {
    *dx = y == 0 ? 0.0 : y * pow(x, y - 1.0);
    *dy = x == 0 && y >= 0 ? 0.0 : pow(x, y) * log(x);
}
/* ties split equally */
static void p_max(double x, double y, double *dx, double *dy) {
    *dx = x > y ? 1.0 : x == y ? 0.5 : 0.0;
    *dy = y > x ? 1.0 : x == y ? 0.5 : 0.0;
}
static void p_min(double x, double y, double *dx, double *dy) {
    *dx = x < y ? 1.0 : x == y ? 0.5 : 0.0;
    *dy = y < x ? 1.0 : x == y ? 0.5 : 0.0;
}

#define BW_BINARY(ID, D)                                                                       \
    BW(ID) {                                                                                   \
        (void)err;                                                                             \
        return binary_bw(b, D);                                                                \
    }
BW_BINARY(ADD, p_add)
BW_BINARY(SUB, p_sub)
BW_BINARY(MUL, p_mul)
BW_BINARY(DIV, p_div)
BW_BINARY(POW, p_pow)
BW_BINARY(MAXIMUM, p_max)
BW_BINARY(MINIMUM, p_min)
/* f8 scaling: straight through the rounding (the format's rounding has no useful derivative;
 * the scales are state, never differentiated) */
static void p_fp8_quant(double x, double s, double *dx, double *ds) { (void)x, *dx = s, *ds = 0; }
static void p_fp8_dequant(double q, double s, double *dq, double *ds) { (void)q, *dq = 1.0 / s, *ds = 0; }
BW_BINARY(FP8_QUANT, p_fp8_quant)
BW_BINARY(FP8_DEQUANT, p_fp8_dequant)

/* where(c, a, b): the gradient goes to a where c holds, to b elsewhere; none to c. */
BW(WHERE) {
    (void)err;
    const IrShape *os = bout_shape(b, 0);
    int64_t m = numel(os);
    for (int64_t i = 0; i < m; i++) {
        int k = b->x[0][bcast_off(os, bin_shape(b, 0), i)] != 0 ? 1 : 2;
        if (b->gx[k]) b->gx[k][bcast_off(os, bin_shape(b, k), i)] += b->gy[0][i];
    }
    return FC_OK;
}

/* ---- reductions ------------------------------------------------------------------------------------ */
/* The result element that input element i of x reduces into (the kept dims, row-major). */
static int64_t red_off(const IrShape *xs, const IrNode *n, int64_t i) {
    int64_t off = 0, mul = 1;
    for (int d = xs->rank - 1; d >= 0; d--) {
        int64_t k = i % xs->dims[d];
        i /= xs->dims[d];
        bool reduced = false;
        for (int j = 0; j < n->a.nlist; j++) reduced = reduced || n->a.list[j] == d;
        if (reduced) continue;
        off += k * mul;
        mul *= xs->dims[d];
    }
    return off;
}

static FcStatus sum_like_bw(const Bw *b, bool mean) {
    const IrShape *xs = bin_shape(b, 0);
    int64_t total = numel(xs), m = numel(bout_shape(b, 0));
    double scale = mean ? 1.0 / (double)(total / m) : 1.0;
    if (b->gx[0])
        for (int64_t i = 0; i < total; i++) b->gx[0][i] += b->gy[0][red_off(xs, b->n, i)] * scale;
    return FC_OK;
}
BW(SUM) { (void)err; return sum_like_bw(b, false); }
BW(MEAN) { (void)err; return sum_like_bw(b, true); }

/* max/min: the gradient of a result is split equally among the elements equal to it. */
static FcStatus extreme_bw(const Bw *b, bool is_max, FcErr *err) {
    const IrShape *xs = bin_shape(b, 0);
    int64_t total = numel(xs), m = numel(bout_shape(b, 0));
    if (!b->gx[0]) return FC_OK;
    double *ext = fc_alloc(sizeof(double) * (size_t)m), *ties = fc_calloc((size_t)m, sizeof(double));
    if (!ext || !ties) {
        fc_free(ext);
        fc_free(ties);
        return FC_OOM(err);
    }
    for (int64_t o = 0; o < m; o++) ext[o] = is_max ? -INFINITY : INFINITY;
    for (int64_t i = 0; i < total; i++) {
        double x = b->x[0][i], *e = &ext[red_off(xs, b->n, i)];
        if (is_max ? x > *e : x < *e) *e = x;
    }
    for (int64_t i = 0; i < total; i++) {
        int64_t o = red_off(xs, b->n, i);
        if (b->x[0][i] == ext[o]) ties[o] += 1;
    }
    for (int64_t i = 0; i < total; i++) {
        int64_t o = red_off(xs, b->n, i);
        if (b->x[0][i] == ext[o]) b->gx[0][i] += b->gy[0][o] / ties[o];
    }
    fc_free(ext);
    fc_free(ties);
    return FC_OK;
}
BW(MAX) { return extreme_bw(b, true, err); }
BW(MIN) { return extreme_bw(b, false, err); }

/* ---- composites ------------------------------------------------------------------------------------- */
/* softmax: gx = y (gy - sum(gy y)); log_softmax: gx = gy - softmax(x) sum(gy). With noise, the
 * softmax a program's backward reads is moved by one rounding of the type it stored y in
 * (stored_dtype): a softmax's y itself; a log_softmax's y = log p before its exp, whose rounding
 * is absolute |y| u, not relative to p (at f8, y from 3 significand bits: exp(y) no longer sums
 * to 1, and a gradient that is 0 by shift invariance, the sum of gx, is that residue times
 * sum(gy): f8 difftest seed 2026112850 graph 814). */
static FcStatus softmax_bw(const Bw *b, bool log_form, FcErr *err) {
    const IrShape *s = bin_shape(b, 0);
    int ax = (int)b->n->a.i[0];
    FC_CHECK(err, ax >= 0 && ax < s->rank);
    if (!b->gx[0]) return FC_OK;
    int64_t outer = numel_range(s, 0, ax), len = s->dims[ax], inner = numel_range(s, ax + 1, s->rank);
    FcDtype t = stored_dtype(b);
    double *row = fc_alloc(sizeof(double) * (size_t)len);
    if (!row) return FC_OOM(err);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < inner; j++) {
            int64_t at = o * len * inner + j;
            const double *x = b->x[0] + at, *gy = b->gy[0] + at;
            double *gx = b->gx[0] + at;
            for (int64_t k = 0; k < len; k++) row[k] = x[k * inner];
            double lse = logsumexp(row, len), dot = 0;
            for (int64_t k = 0; k < len; k++) row[k] -= lse;   /* log_softmax */
            /* noise: a program's backward reads the y it rounded to its stored type (near
             * one-hot, y (g - sum(g y)) then moves by far more than the rounding of x) */
            if (b->noise && log_form) rt_interp_perturb(row, len, t, *b->noise, b->node, (int)(o * inner + j) + 1, 1);
            for (int64_t k = 0; k < len; k++) row[k] = exp(row[k]); /* softmax */
            if (b->noise && !log_form) rt_interp_perturb(row, len, t, *b->noise, b->node, (int)(o * inner + j) + 1, 1);
            for (int64_t k = 0; k < len; k++) dot += log_form ? gy[k * inner] : gy[k * inner] * row[k];
            for (int64_t k = 0; k < len; k++)
                gx[k * inner] += log_form ? gy[k * inner] - row[k] * dot : row[k] * (gy[k * inner] - dot);
        }
    fc_free(row);
    return FC_OK;
}
BW(SOFTMAX) { return softmax_bw(b, false, err); }
BW(LOG_SOFTMAX) { return softmax_bw(b, true, err); }

/* layernorm/rmsnorm over the trailing axes: xhat = (x - mean) r (rms: x r), r = 1/sqrt(var + eps),
 * y = xhat gain + bias. d gain += gy xhat, d bias += gy, and with h = gy gain,
 * dx = r (h - mean(h) - xhat mean(h xhat))   (rms: without the mean(h) term). */
static FcStatus norm_bw(const Bw *b, bool rms, FcErr *err) {
    const IrNode *n = b->n;
    const IrShape *s = bin_shape(b, 0);
    FC_CHECK(err, n->a.nlist >= 1 && n->a.nlist <= s->rank);
    int64_t inner = numel_range(s, s->rank - n->a.nlist, s->rank), outer = numel(s) / inner;
    int k = 1, gi = n->a.i[0] ? k++ : -1, bi = !rms && n->a.i[1] ? k++ : -1;
    FC_CHECK(err, k == n->nin);
    double *xhat = fc_alloc(sizeof(double) * (size_t)inner), *h = fc_alloc(sizeof(double) * (size_t)inner);
    if (!xhat || !h) {
        fc_free(xhat);
        fc_free(h);
        return FC_OOM(err);
    }
    for (int64_t o = 0; o < outer; o++) {
        const double *x = b->x[0] + o * inner, *gy = b->gy[0] + o * inner;
        double mean = 0, var = 0, hm = 0, hx = 0;
        if (!rms) {
            for (int64_t j = 0; j < inner; j++) mean += x[j];
            mean /= (double)inner;
        }
        for (int64_t j = 0; j < inner; j++) var += (x[j] - mean) * (x[j] - mean);
        double r = 1.0 / sqrt(var / (double)inner + n->a.f);
        for (int64_t j = 0; j < inner; j++) xhat[j] = (x[j] - mean) * r;
        /* noise: a program's backward reads the normalized row it rounded to f32 (the sum of
         * dx over a row that is one scalar times a fixed pattern cancels to eps's effect) */
        if (b->noise) rt_interp_perturb(xhat, inner, ir_cval(b->g, b->n->out[0])->dtype, *b->noise, b->node, (int)o + 1, 1);
        for (int64_t j = 0; j < inner; j++) {
            h[j] = gi >= 0 ? gy[j] * b->x[gi][j] : gy[j];
            if (gi >= 0 && b->gx[gi]) b->gx[gi][j] += gy[j] * xhat[j];
            if (bi >= 0 && b->gx[bi]) b->gx[bi][j] += gy[j];
            hm += h[j];
            hx += h[j] * xhat[j];
        }
        hm = rms ? 0.0 : hm / (double)inner;
        hx /= (double)inner;
        if (b->gx[0])
            for (int64_t j = 0; j < inner; j++) b->gx[0][o * inner + j] += r * (h[j] - hm - xhat[j] * hx);
    }
    fc_free(xhat);
    fc_free(h);
    return FC_OK;
}
BW(LAYERNORM) { return norm_bw(b, false, err); }
BW(RMSNORM) { return norm_bw(b, true, err); }

/* Whether causal masking keeps score (i, j) of a [tq, tk] block (the last tq queries). */
static bool causal_keeps(int64_t i, int64_t j, int64_t tq, int64_t tk) { return j <= i + (tk - tq); }

BW(CAUSAL_MASK) {
    const IrShape *s = bin_shape(b, 0);
    FC_CHECK(err, s->rank >= 2);
    if (!b->gx[0]) return FC_OK;
    int64_t tq = s->dims[s->rank - 2], tk = s->dims[s->rank - 1], m = numel(s);
    for (int64_t at = 0; at < m; at++)
        if (causal_keeps(at / tk % tq, at % tk, tq, tk)) b->gx[0][at] += b->gy[0][at];
    return FC_OK;
}

/* o = softmax(mask(scale q k^T)) v per batch (batch dims broadcast): with P the probabilities,
 * dv += P^T go, dP = go v^T, dS = P (dP - rowsum(dP P)), dq += scale dS k, dk += scale dS^T q. */
BW(ATTENTION) {
    const IrShape *qs = bin_shape(b, 0), *ks = bin_shape(b, 1), *vs = bin_shape(b, 2), *os = bout_shape(b, 0);
    int r = os->rank, nb = r - 2;
    FC_CHECK(err, r >= 2 && qs->rank == r && ks->rank == r && vs->rank == r);
    int64_t tq = qs->dims[r - 2], d = qs->dims[r - 1], tk = ks->dims[r - 2], dv = vs->dims[r - 1];
    FC_CHECK(err, ks->dims[r - 1] == d && vs->dims[r - 2] == tk);
    double scale = b->n->a.f;
    bool causal = b->n->a.i[0] != 0;
    double *p = fc_alloc(sizeof(double) * (size_t)tk), *dp = fc_alloc(sizeof(double) * (size_t)tk);
    if (!p || !dp) {
        fc_free(p);
        fc_free(dp);
        return FC_OOM(err);
    }
    int64_t nbatch = numel_range(os, 0, nb);
    for (int64_t z = 0; z < nbatch; z++) {
        int64_t oq = batch_off(os, nb, qs, z), ok = batch_off(os, nb, ks, z), ov = batch_off(os, nb, vs, z);
        const double *q = b->x[0] + oq, *k = b->x[1] + ok, *v = b->x[2] + ov, *go = b->gy[0] + z * tq * dv;
        double *gq = b->gx[0] ? b->gx[0] + oq : NULL, *gk = b->gx[1] ? b->gx[1] + ok : NULL;
        double *gv = b->gx[2] ? b->gx[2] + ov : NULL;
        for (int64_t i = 0; i < tq; i++) {
            for (int64_t j = 0; j < tk; j++) {
                double sc = 0;
                for (int64_t c = 0; c < d; c++) sc += q[i * d + c] * k[j * d + c];
                p[j] = causal && !causal_keeps(i, j, tq, tk) ? -INFINITY : sc * scale;
            }
            double lse = logsumexp(p, tk), dot = 0;
            for (int64_t j = 0; j < tk; j++) {
                p[j] = exp(p[j] - lse);
                dp[j] = 0;
                for (int64_t c = 0; c < dv; c++) {
                    dp[j] += go[i * dv + c] * v[j * dv + c];
                    if (gv) gv[j * dv + c] += p[j] * go[i * dv + c];
                }
                dot += dp[j] * p[j];
            }
            for (int64_t j = 0; j < tk; j++) {
                double ds = p[j] * (dp[j] - dot) * scale;
                for (int64_t c = 0; c < d; c++) {
                    if (gq) gq[i * d + c] += ds * k[j * d + c];
                    if (gk) gk[j * d + c] += ds * q[i * d + c];
                }
            }
        }
    }
    fc_free(p);
    fc_free(dp);
    return FC_OK;
}

/* ---- shape ops: the gradient goes back to the element that was read ----------------------------------- */
BW(RESHAPE) {
    (void)err;
    int64_t m = numel(bout_shape(b, 0));
    if (b->gx[0])
        for (int64_t i = 0; i < m; i++) b->gx[0][i] += b->gy[0][i];
    return FC_OK;
}

BW(TRANSPOSE) {
    const IrShape *xs = bin_shape(b, 0), *os = bout_shape(b, 0);
    FC_CHECK(err, b->n->a.nlist == xs->rank && os->rank == xs->rank);
    if (!b->gx[0]) return FC_OK;
    int64_t xst[IR_MAX_RANK], acc = 1;
    for (int d = xs->rank - 1; d >= 0; d--) {
        xst[d] = acc;
        acc *= xs->dims[d];
    }
    int64_t m = numel(os);
    for (int64_t i = 0; i < m; i++) {
        int64_t rest = i, off = 0;
        for (int d = os->rank - 1; d >= 0; d--) {
            off += rest % os->dims[d] * xst[b->n->a.list[d]]; /* result dim d is input dim perm[d] */
            rest /= os->dims[d];
        }
        b->gx[0][off] += b->gy[0][i];
    }
    return FC_OK;
}

BW(BROADCAST) {
    (void)err;
    const IrShape *xs = bin_shape(b, 0), *os = bout_shape(b, 0);
    int64_t m = numel(os);
    if (b->gx[0])
        for (int64_t i = 0; i < m; i++) b->gx[0][bcast_off(os, xs, i)] += b->gy[0][i];
    return FC_OK;
}

BW(CONCAT) {
    const IrShape *os = bout_shape(b, 0);
    int ax = (int)b->n->a.i[0];
    FC_CHECK(err, ax >= 0 && ax < os->rank);
    int64_t outer = numel_range(os, 0, ax), inner = numel_range(os, ax + 1, os->rank), at = 0;
    for (int64_t o = 0; o < outer; o++)
        for (int i = 0; i < b->n->nin; i++) {
            int64_t chunk = bin_shape(b, i)->dims[ax] * inner;
            for (int64_t t = 0; t < chunk && b->gx[i]; t++) b->gx[i][o * chunk + t] += b->gy[0][at + t];
            at += chunk;
        }
    FC_CHECK(err, at == numel(os));
    return FC_OK;
}

BW(SPLIT) {
    const IrShape *xs = bin_shape(b, 0);
    int ax = (int)b->n->a.i[0];
    FC_CHECK(err, ax >= 0 && ax < xs->rank);
    if (!b->gx[0]) return FC_OK;
    int64_t outer = numel_range(xs, 0, ax), inner = numel_range(xs, ax + 1, xs->rank), at = 0;
    for (int64_t o = 0; o < outer; o++)
        for (int k = 0; k < b->n->nout; k++) {
            int64_t chunk = bout_shape(b, k)->dims[ax] * inner;
            for (int64_t t = 0; t < chunk; t++) b->gx[0][at + t] += b->gy[k][o * chunk + t];
            at += chunk;
        }
    FC_CHECK(err, at == numel(xs));
    return FC_OK;
}

/* slice picks index start + k step (k < count) of its axis; step may be negative */
BW(SLICE) {
    const IrShape *xs = bin_shape(b, 0), *os = bout_shape(b, 0);
    int ax = (int)b->n->a.i[0];
    FC_CHECK(err, ax >= 0 && ax < xs->rank);
    if (!b->gx[0]) return FC_OK;
    int64_t outer = numel_range(xs, 0, ax), inner = numel_range(xs, ax + 1, xs->rank);
    int64_t len = xs->dims[ax], cnt = os->dims[ax], start = b->n->a.i[1], step = b->n->a.i[3];
    FC_CHECK(err, start >= 0 && start < len && start + (cnt - 1) * step >= 0 && start + (cnt - 1) * step < len);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < cnt; k++)
            for (int64_t j = 0; j < inner; j++)
                b->gx[0][(o * len + start + k * step) * inner + j] += b->gy[0][(o * cnt + k) * inner + j];
    return FC_OK;
}

/* gather(table, ids): scatter-add into the rows read; none to the ids (the forward checked them) */
BW(GATHER) {
    const IrShape *ts = bin_shape(b, 0);
    FC_CHECK(err, ts->rank >= 1);
    if (!b->gx[0]) return FC_OK;
    int64_t rows = ts->dims[0], row = numel_range(ts, 1, ts->rank), m = numel(bin_shape(b, 1));
    for (int64_t p = 0; p < m; p++) {
        double id = b->x[1][p];
        FC_CHECK(err, id >= 0 && id < (double)rows);
        for (int64_t j = 0; j < row; j++) b->gx[0][(int64_t)id * row + j] += b->gy[0][p * row + j];
    }
    return FC_OK;
}

/* scatter_add(src, ids, rows): src row p gets the gradient's row ids[p] (a gather); none to
 * the ids */
BW(SCATTER_ADD) {
    const IrShape *os = bout_shape(b, 0);
    if (!b->gx[0]) return FC_OK;
    int64_t rows = os->dims[0], row = numel_range(os, 1, os->rank), m = numel(bin_shape(b, 1));
    for (int64_t p = 0; p < m; p++) {
        double id = b->x[1][p];
        FC_CHECK(err, id >= 0 && id < (double)rows);
        for (int64_t j = 0; j < row; j++) b->gx[0][p * row + j] += b->gy[0][(int64_t)id * row + j];
    }
    return FC_OK;
}

/* c = a b per batch (batch dims broadcast): da += gc b^T, db += a^T gc, summed over the batches
 * that a broadcast operand served. */
BW(MATMUL) {
    const IrShape *as = bin_shape(b, 0), *bs = bin_shape(b, 1), *os = bout_shape(b, 0);
    FC_CHECK(err, as->rank >= 2 && bs->rank >= 2 && os->rank >= 2);
    int64_t M = as->dims[as->rank - 2], K = as->dims[as->rank - 1], N = bs->dims[bs->rank - 1];
    FC_CHECK(err, bs->dims[bs->rank - 2] == K);
    int nb = os->rank - 2;
    int64_t nbatch = numel_range(os, 0, nb);
    for (int64_t z = 0; z < nbatch; z++) {
        int64_t oa = batch_off(os, nb, as, z), ob = batch_off(os, nb, bs, z);
        const double *A = b->x[0] + oa, *B = b->x[1] + ob, *G = b->gy[0] + z * M * N;
        for (int64_t i = 0; i < M; i++)
            for (int64_t k = 0; k < K; k++)
                for (int64_t j = 0; j < N; j++) {
                    if (b->gx[0]) b->gx[0][oa + i * K + k] += G[i * N + j] * B[k * N + j];
                    if (b->gx[1]) b->gx[1][ob + k * N + j] += A[i * K + k] * G[i * N + j];
                }
    }
    return FC_OK;
}

/* ---- training ops ------------------------------------------------------------------------------------ */
BW(DROPOUT) {
    (void)err;
    double p = b->n->a.f;
    int64_t m = numel(bout_shape(b, 0));
    if (b->gx[0])
        for (int64_t i = 0; i < m; i++)
            if (dropout_kept(p, b->n->a.i[0], i)) b->gx[0][i] += b->gy[0][i] / (1.0 - p);
    return FC_OK;
}

/* mean over rows of logsumexp(row) - row[label]: d logits = g (softmax - onehot(label)) / rows */
BW(CROSS_ENTROPY) {
    if (!b->gx[0]) return FC_OK;
    int64_t rows, c;
    ce_dims(b->g, b->n, &rows, &c);
    double g = b->gy[0][0] / (double)rows;
    for (int64_t r = 0; r < rows; r++) {
        FC_TRY(ce_label(b->g, b->n, b->x[1], r, c, err));
        const double *x = b->x[0] + r * c;
        double lse = logsumexp(x, c);
        for (int64_t k = 0; k < c; k++)
            b->gx[0][r * c + k] += g * (exp(x[k] - lse) - (k == (int64_t)b->x[1][r] ? 1.0 : 0.0));
    }
    return FC_OK;
}

/* ---- the driver ---------------------------------------------------------------------------------------- */
/* A zeroed gradient buffer for value v (its size was checked when the forward allocated it). */
static FcStatus grad_buf(const IrGraph *g, int v, double **out, FcErr *err) {
    if (*out) return FC_OK;
    *out = fc_calloc((size_t)numel(vshape(g, v)) + 1, sizeof(double));
    return *out ? FC_OK : FC_OOM(err);
}

/* The backward of node n: gradient buffers for its inputs that need one, zeros for results
 * without a gradient, then its rule. */
static FcStatus node_bw(const IrGraph *g, const IrNode *n, double **val, double **gr, const bool *need,
                        const uint64_t *noise, FcErr *err) {
    enum { FAST = 16 };
    const double *gy_fast[FAST];
    double *gx_fast[FAST];
    const double **gy = gy_fast;
    double **gx = gx_fast;
    FcStatus st = FC_OK;
    if (n->nin > FAST || n->nout > FAST) {
        gy = fc_calloc((size_t)n->nout + 1, sizeof *gy);
        gx = fc_calloc((size_t)n->nin + 1, sizeof *gx);
        if (!gy || !gx) st = FC_OOM(err);
    }
    for (int k = 0; st == FC_OK && k < n->nout; k++) {
        st = grad_buf(g, n->out[k], &gr[n->out[k]], err);
        if (st == FC_OK) gy[k] = gr[n->out[k]];
    }
    for (int i = 0; st == FC_OK && i < n->nin; i++) {
        gx[i] = NULL;
        if (need[n->in[i]] && (st = grad_buf(g, n->in[i], &gr[n->in[i]], err)) == FC_OK) gx[i] = gr[n->in[i]];
    }
    if (st == FC_OK) {
        Bw b = {g, n, (const double *const *)val, gy, gx, noise, (int)(n - g->nodes.data)};
        const double *xs_fast[FAST];
        const double **xs = n->nin > FAST ? fc_calloc((size_t)n->nin, sizeof *xs) : xs_fast;
        if (!xs) st = FC_OOM(err);
        for (int i = 0; st == FC_OK && i < n->nin; i++) xs[i] = val[n->in[i]];
        b.x = xs;
        if (st == FC_OK) st = bw_table[n->op](&b, err);
        if (xs != xs_fast) fc_free((void *)xs);
    }
    if (gy != gy_fast) fc_free((void *)gy);
    if (gx != gx_fast) fc_free(gx);
    return st;
}

/* The dtype a program keeps result r of node n's gradient in: the value's, but for an f8 value of
 * --precision f8 (an fp8_quant's result, or an index map of one) the type it was quantized from,
 * whose gradient it carries (passes/autodiff.c ADT): its scale is the forward tensor's. */
static FcDtype grad_dtype(const IrGraph *g, const IrNode *n, int r) {
    while (ir_ops[n->op].cat == IR_CAT_SHAPE && n->nin == 1) {
        const IrValue *x = ir_cval(g, n->in[0]);
        if (x->node < 0) break;
        n = &g->nodes.data[x->node];
        r = 0;
    }
    if (n->op == IR_OP_FP8_QUANT) return ir_cval(g, n->in[0])->dtype;
    return ir_cval(g, n->out[r])->dtype;
}

/* The dtype a program keeps value v's gradient in (grad_dtype of its producer; an input's own). */
static FcDtype value_grad_dtype(const IrGraph *g, int v) {
    const IrValue *x = ir_cval(g, v);
    if (x->node < 0) return x->dtype;
    const IrNode *p = &g->nodes.data[x->node];
    for (int r = 0; r < p->nout; r++)
        if (p->out[r] == v) return grad_dtype(g, p, r);
    return x->dtype;
}

/* node_bw with noise on each contribution (noise only): what node k adds to an f32, 16- or 8-bit
 * gradient is moved by one rounding's worth of that gradient's dtype, and an f8 one rounded to
 * f8, before it joins the sum. f32 too: an f32 value read as f64 and as f32 (cast(x, f64) - x)
 * gets two contributions of |g| each that cancel, each rounded to f32, and a result 100 times
 * smaller (difftest seed 20261201 graph 27: 1.2e-7 on -0.0187, 6.6e-6 against the tolerance
 * 4.05e-6, with no noise on it before). An autograd engine (fused and eager alike, passes/autodiff.c accumulate)
 * keeps each contribution in the value's dtype and adds them there, so two contributions that
 * cancel each carry their own rounding, which rounding their sum once does not show (found
 * needed as seed 2026112618 graph 115 at bf16, kept as found/illcond_f8_grad_contributions.tf:
 * a gradient of 2 and one of -2.24 into an e5m2 value, -2.24 stored as -2, summed to 0 where
 * the f64 oracle has -0.24). */
static FcStatus node_bw_noisy(const IrGraph *g, const IrNode *n, int k, double **val, double **gr, const bool *need,
                              const uint64_t *noise, FcErr *err) {
    double **old = fc_calloc((size_t)n->nin + 1, sizeof *old);
    bool *mine = fc_calloc((size_t)n->nin + 1, sizeof *mine);
    FcStatus st = old && mine ? FC_OK : FC_OOM(err);
    for (int i = 0; st == FC_OK && i < n->nin; i++) {
        int v = n->in[i];
        FcDtype t = value_grad_dtype(g, v);
        mine[i] = need[v] && ir_dtype_is_float(t) && t != FC_F64;
        for (int j = 0; mine[i] && j < i; j++) mine[i] = n->in[j] != v;   /* mul(x, x): one contribution */
        if (!mine[i] || !gr[v]) continue;
        int64_t m = numel(vshape(g, v));
        if (!(old[i] = fc_alloc((size_t)m * sizeof(double) + 1))) st = FC_OOM(err);
        else memcpy(old[i], gr[v], (size_t)m * sizeof(double));
    }
    if (st == FC_OK) st = node_bw(g, n, val, gr, need, noise, err);
    for (int i = 0; st == FC_OK && i < n->nin; i++) {
        int v = n->in[i];
        if (!mine[i] || !gr[v]) continue;
        FcDtype t = value_grad_dtype(g, v);
        int64_t m = numel(vshape(g, v));
        double *c = fc_alloc((size_t)m * sizeof(double) + 1);
        if (!c) {
            st = FC_OOM(err);
            break;
        }
        for (int64_t e = 0; e < m; e++) c[e] = gr[v][e] - (old[i] ? old[i][e] : 0.0);
        rt_interp_perturb(c, m, t, *noise, k, 64 + i, 1);
        for (int64_t e = 0; e < m; e++)
            gr[v][e] = (old[i] ? old[i][e] : 0.0) + (t == FC_F8E4M3 || t == FC_F8E5M2 ? rt_interp_round(t, c[e]) : c[e]);
        fc_free(c);
    }
    for (int i = 0; old && i < n->nin; i++) fc_free(old[i]);
    fc_free(old);
    fc_free(mine);
    return st;
}

static FcStatus interp_grad(const IrGraph *g, const void *const *inputs, void *const *outputs,
                            const double *const *grad_outputs, double *const *grad_inputs, const uint64_t *noise,
                            double *grad_amax, FcErr *err);

FcStatus rt_interp_grad(const IrGraph *g, const void *const *inputs, void *const *outputs,
                        const double *const *grad_outputs, double *const *grad_inputs, FcErr *err) {
    return interp_grad(g, inputs, outputs, grad_outputs, grad_inputs, NULL, NULL, err);
}

FcStatus rt_interp_grad_noisy(const IrGraph *g, const void *const *inputs, void *const *outputs,
                              const double *const *grad_outputs, double *const *grad_inputs, uint64_t seed,
                              FcErr *err) {
    return interp_grad(g, inputs, outputs, grad_outputs, grad_inputs, &seed, NULL, err);
}

FcStatus rt_interp_grad_fp8_amax(const IrGraph *g, const void *const *inputs, const double *const *grad_outputs,
                                 double *amax, FcErr *err) {
    FC_CHECK(err, g != NULL && amax != NULL);
    for (int k = 0; k < g->fp8.len; k++) amax[k] = 0;
    /* every float input's gradient asked for, so that the whole backward runs */
    int ni = g->inputs.len;
    double **gi = fc_calloc((size_t)ni + 1, sizeof *gi);
    FcStatus s = gi ? FC_OK : FC_OOM(err);
    for (int i = 0; s == FC_OK && i < ni; i++) {
        const IrValue *x = ir_cval(g, g->inputs.data[i]);
        if (!ir_dtype_is_float(x->dtype)) continue;
        if (!(gi[i] = fc_calloc((size_t)numel(&x->shape) + 1, sizeof(double)))) s = FC_OOM(err);
    }
    if (s == FC_OK) s = interp_grad(g, inputs, NULL, grad_outputs, gi, NULL, amax, err);
    for (int i = 0; gi && i < ni; i++) fc_free(gi[i]);
    fc_free(gi);
    return s;
}

static FcStatus interp_grad(const IrGraph *g, const void *const *inputs, void *const *outputs,
                            const double *const *grad_outputs, double *const *grad_inputs, const uint64_t *noise,
                            double *grad_amax, FcErr *err) {
    FC_CHECK(err, g != NULL);
    int nv = g->values.len, nn = g->nodes.len, ni = g->inputs.len;
    for (int i = 0; grad_inputs && i < ni; i++) {
        const IrValue *v = ir_cval(g, g->inputs.data[i]);
        if (grad_inputs[i] && !ir_dtype_is_float(v->dtype))
            return fc_err_set(err, FC_ERR_USAGE,
                              "rt_interp_grad: input %d%s%s is %s: integer and bool inputs get no gradient "
                              "(their grad_inputs entry must be NULL)",
                              i, v->name ? " " : "", v->name ? v->name : "", fc_dtype_name(v->dtype));
    }
    FcStatus st = FC_OK;
    double **val = fc_calloc((size_t)nv + 1, sizeof *val), **gr = fc_calloc((size_t)nv + 1, sizeof *gr);
    bool *need = fc_calloc((size_t)nv + 1, sizeof *need);
    if (!val || !gr || !need) {
        st = FC_OOM(err);
        goto done;
    }
    /* noise: the forward too (rt_interp_run_noisy's), since the backward reads forward values
     * that a program computes with roundings of its own (a softmax near one-hot: y (g - sum(g y))
     * cancels, and one rounding of y moves the gradient by far more than rounding g does) */
    if ((st = rt_interp_forward_keep(g, inputs, outputs, training_forward, val, noise, err)) != FC_OK) goto done;

    /* which values need a gradient: float values on a path from a requested input */
    for (int i = 0; grad_inputs && i < ni; i++) {
        int v = g->inputs.data[i];
        need[v] = grad_inputs[i] != NULL && ir_dtype_is_float(ir_cval(g, v)->dtype);
    }
    for (int k = 0; k < nn; k++) {
        const IrNode *n = &g->nodes.data[k];
        bool any = false;
        for (int i = 0; i < n->nin; i++) any = any || need[n->in[i]];
        for (int r = 0; r < n->nout; r++) need[n->out[r]] = any && ir_dtype_is_float(ir_cval(g, n->out[r])->dtype);
    }

    /* seed the outputs' gradients (an output listed twice gets both) */
    for (int j = 0; grad_outputs && j < g->outputs.len; j++) {
        int v = g->outputs.data[j];
        if (!need[v] || !grad_outputs[j]) continue;
        if ((st = grad_buf(g, v, &gr[v], err)) != FC_OK) goto done;
        int64_t m = numel(vshape(g, v));
        for (int64_t e = 0; e < m; e++) gr[v][e] += grad_outputs[j][e];
    }

    for (int k = nn - 1; k >= 0; k--) {
        const IrNode *n = &g->nodes.data[k];
        bool flows = false, wanted = false;
        for (int r = 0; r < n->nout; r++) flows = flows || gr[n->out[r]] != NULL;
        for (int i = 0; i < n->nin; i++) wanted = wanted || need[n->in[i]];
        /* noise: each result's whole gradient moved by one rounding's worth of its dtype, as a
         * program that stores the gradient of a value in the value's dtype may round it; an f8
         * value's gradient is rounded to f8 itself (a store and a load: to nearest even,
         * saturating at 448 for e4m3 and 57344 for e5m2), which with 3 or 2 significand bits
         * moves a sum of such gradients far more than a perturbation shows */
        for (int r = 0; noise && r < n->nout; r++) {
            int v = n->out[r];
            if (!gr[v]) continue;
            FcDtype t = grad_dtype(g, n, r);
            int64_t m = numel(vshape(g, v));
            rt_interp_perturb(gr[v], m, t, *noise, k, r, 1);
            for (int64_t j = 0; (t == FC_F8E4M3 || t == FC_F8E5M2) && j < m; j++) gr[v][j] = rt_interp_round(t, gr[v][j]);
        }
        /* --train at f8: an fp8_quant whose slot has a gradient slot passes x the gradient g s
         * stored in E5M2 with that slot's scale s5 (passes/autodiff.c): g rounded as g s s5 (s,
         * s5 powers of two: the same rounding) */
        int gs = n->op == IR_OP_FP8_QUANT && n->a.i[0] >= 0 && n->a.i[0] < g->fp8.len ? g->fp8.data[n->a.i[0]].grad : -1;
        if (gs >= 0 && gs < g->fp8.len && gr[n->out[0]] && val[n->in[1]]) {
            double f = val[n->in[1]][0] * g->fp8.data[gs].scale;
            int64_t m = numel(vshape(g, n->out[0]));
            /* the largest magnitude the backward's quant of slot gs takes: x's gradient g s */
            for (int64_t j = 0; grad_amax && j < m; j++) {
                double a = fabs(gr[n->out[0]][j] * val[n->in[1]][0]);
                if (!isnan(grad_amax[gs]) && (isnan(a) || a > grad_amax[gs])) grad_amax[gs] = a;
            }
            for (int64_t j = 0; j < m; j++) gr[n->out[0]][j] = rt_interp_round(FC_F8E5M2, gr[n->out[0]][j] * f) / f;
        }
        if (flows && wanted &&
            (st = noise ? node_bw_noisy(g, n, k, val, gr, need, noise, err) : node_bw(g, n, val, gr, need, noise, err)) != FC_OK)
            goto done;
        for (int r = 0; r < n->nout; r++) {
            fc_free(gr[n->out[r]]);
            gr[n->out[r]] = NULL;
        }
    }

    for (int i = 0; grad_inputs && i < ni; i++) {
        if (!grad_inputs[i]) continue;
        int v = g->inputs.data[i];
        int64_t m = numel(vshape(g, v));
        for (int64_t e = 0; e < m; e++) grad_inputs[i][e] = gr[v] ? gr[v][e] : 0.0;
    }
done:
    for (int v = 0; v < nv; v++) {
        if (val) fc_free(val[v]);
        if (gr) fc_free(gr[v]);
    }
    fc_free(val);
    fc_free(gr);
    fc_free(need);
    return st;
}
