/* interp.c: the reference interpreter, the oracle of every test (see interp.h).
 *
 * Entry point: rt_interp_run. It executes a graph IR (before decomposition: composites
 * are ops of their own here) node by node in plain C. Every tensor is a dense row-major
 * array of double; every op computes in double (f64 accumulation) and the driver then
 * rounds each result element to the result's dtype (op-by-op semantics):
 *   f64 exact; f32 by a (float) cast; f16/bf16/f8 round to nearest even with this file's
 *   own rounding (rnd_narrow), f8 saturating (f8e4m3 also maps +-inf to +-448, having no
 *   inf); i32/i64 truncate toward zero and saturate, NaN gives 0; bool is (v != 0).
 * rt_interp_run_rounding with RT_ROUND_AT_OUTPUTS is the other legal meaning of 16- and 8-bit
 * float intermediates, a fused kernel's: such results of computing ops stay in f32 and are
 * rounded to their dtype only at block outputs (and by explicit casts and generators);
 * RT_ROUND_STORED rounds the graph's outputs where they are computed, as a kernel that stores
 * a 16-bit value and reads it too does; the differences between the runs are the tolerance's
 * "rounding spread" (docs/tolerances.md).
 * Consequences worth knowing:
 * - integer add/sub/mul/neg/abs/square/pow saturate at the type's range (they never wrap);
 *   an integer div (the frontend never makes one) is true division truncated toward zero,
 *   x/0 saturates and 0/0 gives 0. i64 values beyond 2^53 are not exact in this oracle.
 * - a composite (softmax, layernorm, attention, ...) is computed wholly in double and
 *   rounded once, at its end.
 * - maximum/minimum and the max/min reductions propagate NaN; comparisons with NaN are false
 *   (ne: true).
 *
 * Invariants: the op table ex_table has an entry for every op of ops.def (built from the
 * X-macro; checked at compile time by the missing function and at run time for NULL);
 * this file shares no code with passes/, codegen/, ir/kir.* or runtime/host.c (it uses
 * only ir.h's graph and shape helpers). Memory: a value's buffer is freed after its last
 * use; block outputs live to the end; every path frees everything.
 */
#include "interp.h"
#include "interp_priv.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- private rounding ------------------------------------------------------------------ */
/* A narrow float format described arithmetically: p significand bits (leading one included),
 * emin the smallest normal exponent, maxv the largest finite value. */
typedef struct NFmt {
    int p, emin, bias, ebits;
    double maxv;
    bool sat;         /* finite overflow saturates to maxv (f8), else gives inf */
    bool inf_to_max;  /* +-inf becomes +-maxv (f8e4m3: no inf) */
    int emax;         /* maxv's exponent: maxv in [2^emax, 2^(emax+1)) */
} NFmt;

static const NFmt NF_F16 = {11, -14, 15, 5, 65504.0, false, false, 15};
static const NFmt NF_BF16 = {8, -126, 127, 8, 0x1.fep127, false, false, 127};
static const NFmt NF_E4M3 = {4, -6, 7, 4, 448.0, true, true, 8};
static const NFmt NF_E5M2 = {3, -14, 15, 5, 57344.0, true, false, 15};

static const NFmt *nfmt(FcDtype t) {
    return t == FC_F16 ? &NF_F16 : t == FC_BF16 ? &NF_BF16 : t == FC_F8E4M3 ? &NF_E4M3
         : t == FC_F8E5M2 ? &NF_E5M2 : NULL;
}

/* x rounded to f: to nearest even at the spacing of x's binade (of f's smallest normal one
 * below it: subnormals), then overflow to inf or saturation at maxv. The rounding is
 * (a + C) - C in f64 with C = 2^52 times that spacing, whose own spacing it is: one add
 * rounds (to nearest even, the machine's), the subtraction is exact. It is the interpreter's
 * innermost step at a narrow precision (every op's result); frexp, ldexp and a division took
 * a fifth of `fusec run --check`'s time at f16. */
static double rnd_narrow(const NFmt *f, double x) {
    if (isnan(x)) return x;
    if (isinf(x)) return f->inf_to_max ? copysign(f->maxv, x) : x;
    double a = fabs(x);
    if (a == 0) return x;
    uint64_t bits;
    memcpy(&bits, &a, sizeof bits);
    int e = (int)(bits >> 52) - 1023; /* a in [2^e, 2^(e+1)); an f64 subnormal: below emin anyway */
    double r;
    if (e > f->emax) {
        r = INFINITY;                 /* at least 2^(emax+1) > maxv */
    } else {
        int E = e < f->emin ? f->emin : e;
        uint64_t cb = (uint64_t)(E - (f->p - 1) + 52 + 1023) << 52;
        double c;
        memcpy(&c, &cb, sizeof c);
        r = (a + c) - c;
    }
    if (r > f->maxv) r = f->sat ? f->maxv : INFINITY;
    return copysign(r, x);
}

static double rnd(FcDtype t, double v) {
    switch (t) {
    case FC_F64: return v;
    case FC_F32: return (double)(float)v;
    case FC_F16: case FC_BF16: case FC_F8E4M3: case FC_F8E5M2: return rnd_narrow(nfmt(t), v);
    case FC_I32:
        if (isnan(v)) return 0;
        v = trunc(v);
        return v > 2147483647.0 ? 2147483647.0 : v < -2147483648.0 ? -2147483648.0 : v;
    case FC_I64:
        if (isnan(v)) return 0;
        v = trunc(v);
        return v > 0x1p63 ? 0x1p63 : v < -0x1p63 ? -0x1p63 : v; /* 2^63 stands for INT64_MAX */
    case FC_I8:
        if (isnan(v)) return 0;
        v = trunc(v);
        return v > 127.0 ? 127.0 : v < -128.0 ? -128.0 : v;
    case FC_BOOL: return v != 0 ? 1.0 : 0.0;
    default: return NAN;
    }
}

double rt_interp_round(FcDtype t, double v) { return rnd(t, v); }

/* Bits of an already rounded value r in format f. */
static uint32_t nenc(const NFmt *f, double r) {
    int mbits = f->p - 1;
    uint32_t sign = signbit(r) ? 1u << (f->ebits + mbits) : 0, emax = (1u << f->ebits) - 1;
    if (isnan(r)) return f->inf_to_max ? (emax << mbits) | ((1u << mbits) - 1) : (emax << mbits) | (1u << (mbits - 1));
    double a = fabs(r);
    if (isinf(a)) return sign | (emax << mbits);
    if (a == 0) return sign;
    int e;
    frexp(a, &e);
    if (e - 1 < f->emin) return sign | (uint32_t)ldexp(a, mbits - f->emin);
    return sign | ((uint32_t)(e - 1 + f->bias) << mbits) | ((uint32_t)ldexp(a, mbits - (e - 1)) - (1u << mbits));
}

static double ndec(const NFmt *f, uint32_t b) {
    int mbits = f->p - 1;
    uint32_t emax = (1u << f->ebits) - 1;
    uint32_t ef = (b >> mbits) & emax, mf = b & ((1u << mbits) - 1);
    double s = (b >> (f->ebits + mbits)) & 1 ? -1.0 : 1.0;
    if (f->inf_to_max) {
        if (ef == emax && mf == (1u << mbits) - 1) return NAN;
    } else if (ef == emax) {
        return mf ? NAN : s * INFINITY;
    }
    if (ef == 0) return s * ldexp((double)mf, f->emin - mbits);
    return s * ldexp(1.0 + ldexp((double)mf, -mbits), (int)ef - f->bias);
}

static double load_elem(FcDtype t, const void *p, int64_t i) {
    const unsigned char *b = p;
    switch (t) {
    case FC_F64: { double v; memcpy(&v, b + 8 * i, 8); return v; }
    case FC_F32: { float v; memcpy(&v, b + 4 * i, 4); return v; }
    case FC_F16: case FC_BF16: { uint16_t v; memcpy(&v, b + 2 * i, 2); return ndec(nfmt(t), v); }
    case FC_F8E4M3: case FC_F8E5M2: return ndec(nfmt(t), b[i]);
    case FC_I32: { int32_t v; memcpy(&v, b + 4 * i, 4); return v; }
    case FC_I64: { int64_t v; memcpy(&v, b + 8 * i, 8); return (double)v; }
    case FC_BOOL: return b[i] ? 1.0 : 0.0;
    case FC_I8: return (signed char)b[i];
    default: return NAN;
    }
}

/* Stores r, already rounded to t by rnd(). */
static void store_elem(FcDtype t, void *p, int64_t i, double r) {
    unsigned char *b = p;
    switch (t) {
    case FC_F64: memcpy(b + 8 * i, &r, 8); break;
    case FC_F32: { float v = (float)r; memcpy(b + 4 * i, &v, 4); break; }
    case FC_F16: case FC_BF16: { uint16_t v = (uint16_t)nenc(nfmt(t), r); memcpy(b + 2 * i, &v, 2); break; }
    case FC_F8E4M3: case FC_F8E5M2: b[i] = (unsigned char)nenc(nfmt(t), r); break;
    case FC_I32: { int32_t v = (int32_t)r; memcpy(b + 4 * i, &v, 4); break; }
    case FC_I64: { int64_t v = r >= 0x1p63 ? INT64_MAX : (int64_t)r; memcpy(b + 8 * i, &v, 8); break; }
    case FC_BOOL: b[i] = r != 0; break;
    case FC_I8: { signed char v = (signed char)r; memcpy(b + i, &v, 1); break; }
    default: break;
    }
}

/* ---- shapes and index iteration ---------------------------------------------------------- */
static const IrValue *val(const IrGraph *g, int id) { return ir_cval(g, id); }
static const IrShape *in_shape(const IrGraph *g, const IrNode *n, int i) { return &val(g, n->in[i])->shape; }
static const IrShape *out_shape(const IrGraph *g, const IrNode *n, int k) { return &val(g, n->out[k])->shape; }

/* Element count of a shape known to be valid (allocation already checked it). */
static int64_t count(const IrShape *s) {
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) n *= s->dims[i];
    return n;
}
static int64_t count_range(const IrShape *s, int lo, int hi) {
    int64_t n = 1;
    for (int i = lo; i < hi; i++) n *= s->dims[i];
    return n;
}

/* An odometer over a shape carrying up to 4 operand offsets, each with its own strides. */
enum { MAXOPS = 4 };
typedef struct Odo {
    int rank, nop;
    int64_t dims[IR_MAX_RANK], idx[IR_MAX_RANK];
    int64_t str[MAXOPS][IR_MAX_RANK];
    int64_t off[MAXOPS];
} Odo;

static void odo_init(Odo *it, const IrShape *over) {
    memset(it, 0, sizeof *it);
    it->rank = over->rank;
    memcpy(it->dims, over->dims, sizeof(int64_t) * (size_t)over->rank);
}
/* An operand of shape s read with NumPy broadcasting (aligned right, size-1 dims repeat). */
static void odo_add_bcast(Odo *it, const IrShape *s) {
    int64_t *st = it->str[it->nop++], acc = 1;
    for (int d = s->rank - 1; d >= 0; d--) {
        int o = d + it->rank - s->rank;
        if (o >= 0) st[o] = s->dims[d] == 1 ? 0 : acc;
        acc *= s->dims[d];
    }
}
static void odo_add_strides(Odo *it, const int64_t *st) {
    memcpy(it->str[it->nop++], st, sizeof(int64_t) * (size_t)it->rank);
}
static void odo_next(Odo *it) {
    for (int d = it->rank - 1; d >= 0; d--) {
        it->idx[d]++;
        for (int k = 0; k < it->nop; k++) it->off[k] += it->str[k][d];
        if (it->idx[d] < it->dims[d]) return;
        for (int k = 0; k < it->nop; k++) it->off[k] -= it->str[k][d] * it->dims[d];
        it->idx[d] = 0;
    }
}

static void contiguous_strides(const IrShape *s, int64_t *st) {
    int64_t acc = 1;
    for (int d = s->rank - 1; d >= 0; d--) {
        st[d] = acc;
        acc *= s->dims[d];
    }
}

/* Strides over the nb leading (batch) dims of an output for an operand whose last two dims
 * are a matrix and whose batch dims broadcast to the output's. */
static void batch_strides(const IrShape *s, int nb, int64_t *st) {
    int64_t full[IR_MAX_RANK];
    contiguous_strides(s, full);
    int sb = s->rank - 2;
    for (int i = 0; i < nb; i++) {
        int j = i - (nb - sb);
        st[i] = (j < 0 || s->dims[j] == 1) ? 0 : full[j];
    }
}

/* ---- the op table -------------------------------------------------------------------------- */
typedef FcStatus (*ExFn)(const IrGraph *g, const IrNode *n, const double *const *in,
                         double *const *out, FcErr *err);
#define EX(ID)                                                                                 \
    static FcStatus ex_##ID(const IrGraph *g, const IrNode *n, const double *const *in,        \
                            double *const *out, FcErr *err)

#define OP(ID, NAME, MININ, MAXIN, NOUT, CAT, ATTRS, SHAPE, FLOPS) EX(ID);
#include "ops.def"
#undef OP

static const ExFn ex_table[] = {
#define OP(ID, NAME, MININ, MAXIN, NOUT, CAT, ATTRS, SHAPE, FLOPS) [IR_OP_##ID] = ex_##ID,
#include "ops.def"
#undef OP
};
_Static_assert(sizeof ex_table / sizeof ex_table[0] == IR_OP_COUNT,
               "the interpreter's table must have an entry for every op of ops.def");

/* ---- elementwise ---------------------------------------------------------------------------- */
static FcStatus unary(const IrGraph *g, const IrNode *n, const double *const *in,
                      double *const *out, double (*f)(double)) {
    int64_t m = count(out_shape(g, n, 0));
    for (int64_t i = 0; i < m; i++) out[0][i] = f(in[0][i]);
    return FC_OK;
}

static double u_neg(double x) { return -x; }
static double u_abs(double x) { return fabs(x); }
static double u_exp(double x) { return exp(x); }
static double u_log(double x) { return log(x); }
static double u_sqrt(double x) { return sqrt(x); }
static double u_rsqrt(double x) { return 1.0 / sqrt(x); }
static double u_recip(double x) { return 1.0 / x; }
static double u_square(double x) { return x * x; }
static double u_tanh(double x) { return tanh(x); }
static double u_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static double u_relu(double x) { return x < 0 ? 0.0 : x; } /* NaN stays NaN */
static double u_silu(double x) { return x / (1.0 + exp(-x)); }
static double u_erf(double x) { return erf(x); }
/* the standard normal CDF through erfc: no cancellation in either tail (erfc(-z) = 1 + erf(z)) */
static double u_ndtr(double x) { return 0.5 * erfc(-x * 0.70710678118654752440); }
static double u_sin(double x) { return sin(x); }
static double u_cos(double x) { return cos(x); }

#define EX_UNARY(ID, F)                                                                        \
    EX(ID) {                                                                                   \
        (void)err;                                                                             \
        return unary(g, n, in, out, F);                                                        \
    }
EX_UNARY(NEG, u_neg)
EX_UNARY(ABS, u_abs)
EX_UNARY(EXP, u_exp)
EX_UNARY(LOG, u_log)
EX_UNARY(SQRT, u_sqrt)
EX_UNARY(RSQRT, u_rsqrt)
EX_UNARY(RECIP, u_recip)
EX_UNARY(SQUARE, u_square)
EX_UNARY(TANH, u_tanh)
EX_UNARY(SIGMOID, u_sigmoid)
EX_UNARY(RELU, u_relu)
EX_UNARY(SILU, u_silu)
EX_UNARY(ERF, u_erf)
EX_UNARY(NDTR, u_ndtr)
EX_UNARY(SIN, u_sin)
EX_UNARY(COS, u_cos)

static FcStatus binary(const IrGraph *g, const IrNode *n, const double *const *in,
                       double *const *out, double (*f)(double, double)) {
    Odo it;
    odo_init(&it, out_shape(g, n, 0));
    odo_add_bcast(&it, in_shape(g, n, 0));
    odo_add_bcast(&it, in_shape(g, n, 1));
    int64_t m = count(out_shape(g, n, 0));
    for (int64_t i = 0; i < m; i++, odo_next(&it)) out[0][i] = f(in[0][it.off[0]], in[1][it.off[1]]);
    return FC_OK;
}

static double b_add(double a, double b) { return a + b; }
static double b_sub(double a, double b) { return a - b; }
static double b_mul(double a, double b) { return a * b; }
static double b_div(double a, double b) { return a / b; }
static double b_pow(double a, double b) { return pow(a, b); }
static double b_max(double a, double b) { return isnan(a) || isnan(b) ? NAN : a > b ? a : b; }
static double b_min(double a, double b) { return isnan(a) || isnan(b) ? NAN : a < b ? a : b; }
static double c_lt(double a, double b) { return a < b; }
static double c_le(double a, double b) { return a <= b; }
static double c_gt(double a, double b) { return a > b; }
static double c_ge(double a, double b) { return a >= b; }
static double c_eq(double a, double b) { return a == b; }
static double c_ne(double a, double b) { return a != b; }

#define EX_BINARY(ID, F)                                                                       \
    EX(ID) {                                                                                   \
        (void)err;                                                                             \
        return binary(g, n, in, out, F);                                                       \
    }
EX_BINARY(ADD, b_add)
EX_BINARY(SUB, b_sub)
EX_BINARY(MUL, b_mul)
EX_BINARY(DIV, b_div)
EX_BINARY(POW, b_pow)
EX_BINARY(MAXIMUM, b_max)
EX_BINARY(MINIMUM, b_min)
EX_BINARY(LT, c_lt)
EX_BINARY(LE, c_le)
EX_BINARY(GT, c_gt)
EX_BINARY(GE, c_ge)
EX_BINARY(EQ, c_eq)
EX_BINARY(NE, c_ne)

EX(WHERE) {
    (void)err;
    Odo it;
    odo_init(&it, out_shape(g, n, 0));
    for (int k = 0; k < 3; k++) odo_add_bcast(&it, in_shape(g, n, k));
    int64_t m = count(out_shape(g, n, 0));
    for (int64_t i = 0; i < m; i++, odo_next(&it))
        out[0][i] = in[0][it.off[0]] != 0 ? in[1][it.off[1]] : in[2][it.off[2]];
    return FC_OK;
}

/* The conversion itself is the driver's rounding to the target dtype. */
EX(CAST) {
    (void)err;
    memcpy(out[0], in[0], sizeof(double) * (size_t)count(out_shape(g, n, 0)));
    return FC_OK;
}

/* ---- reductions ------------------------------------------------------------------------------ */
enum { RED_SUM, RED_MEAN, RED_MAX, RED_MIN };

static FcStatus reduce(const IrGraph *g, const IrNode *n, const double *const *in,
                       double *const *out, int kind, FcErr *err) {
    const IrShape *xs = in_shape(g, n, 0);
    /* output offset strides over the input's dims: 0 on reduced dims, row-major over the kept
     * dims (the kept size-1 dims of keepdim do not change the layout) */
    int64_t ost[IR_MAX_RANK], acc = 1;
    for (int d = xs->rank - 1; d >= 0; d--) {
        bool red = false;
        for (int j = 0; j < n->a.nlist; j++) red = red || n->a.list[j] == d;
        ost[d] = red ? 0 : acc;
        if (!red) acc *= xs->dims[d];
    }
    int64_t m = count(out_shape(g, n, 0)), total = count(xs);
    FC_CHECK(err, acc == m && m > 0 && total % m == 0);
    double init = kind == RED_MAX ? -INFINITY : kind == RED_MIN ? INFINITY : 0.0;
    for (int64_t i = 0; i < m; i++) out[0][i] = init;
    Odo it;
    odo_init(&it, xs);
    odo_add_strides(&it, ost);
    for (int64_t i = 0; i < total; i++, odo_next(&it)) {
        double x = in[0][i], *o = &out[0][it.off[0]];
        switch (kind) {
        case RED_SUM: case RED_MEAN: *o += x; break;
        case RED_MAX: if (!isnan(*o) && (isnan(x) || x > *o)) *o = x; break;
        case RED_MIN: if (!isnan(*o) && (isnan(x) || x < *o)) *o = x; break;
        default: break;
        }
    }
    if (kind == RED_MEAN)
        for (int64_t i = 0; i < m; i++) out[0][i] /= (double)(total / m);
    return FC_OK;
}

EX(SUM) { return reduce(g, n, in, out, RED_SUM, err); }
EX(MEAN) { return reduce(g, n, in, out, RED_MEAN, err); }
EX(MAX) { return reduce(g, n, in, out, RED_MAX, err); }
EX(MIN) { return reduce(g, n, in, out, RED_MIN, err); }

/* ---- composites -------------------------------------------------------------------------------- */
static FcStatus softmax_like(const IrGraph *g, const IrNode *n, const double *const *in,
                             double *const *out, bool log_form, FcErr *err) {
    const IrShape *s = in_shape(g, n, 0);
    int ax = (int)n->a.i[0];
    FC_CHECK(err, ax >= 0 && ax < s->rank);
    int64_t outer = count_range(s, 0, ax), len = s->dims[ax], inner = count_range(s, ax + 1, s->rank);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < inner; j++) {
            const double *x = in[0] + o * len * inner + j;
            double *y = out[0] + o * len * inner + j;
            double mx = -INFINITY, sum = 0;
            for (int64_t k = 0; k < len; k++) mx = b_max(mx, x[k * inner]);
            for (int64_t k = 0; k < len; k++) sum += exp(x[k * inner] - mx);
            for (int64_t k = 0; k < len; k++)
                y[k * inner] = log_form ? x[k * inner] - mx - log(sum) : exp(x[k * inner] - mx) / sum;
        }
    return FC_OK;
}
EX(SOFTMAX) { return softmax_like(g, n, in, out, false, err); }
EX(LOG_SOFTMAX) { return softmax_like(g, n, in, out, true, err); }

static FcStatus norm(const IrGraph *g, const IrNode *n, const double *const *in,
                     double *const *out, bool rms, FcErr *err) {
    const IrShape *s = in_shape(g, n, 0);
    FC_CHECK(err, n->a.nlist >= 1 && n->a.nlist <= s->rank);
    int64_t inner = count_range(s, s->rank - n->a.nlist, s->rank), outer = count(s) / inner;
    int k = 1;
    const double *gain = n->a.i[0] ? in[k++] : NULL;
    const double *bias = !rms && n->a.i[1] ? in[k++] : NULL;
    FC_CHECK(err, k == n->nin);
    for (int i = 1; i < n->nin; i++) FC_CHECK(err, count(in_shape(g, n, i)) == inner);
    for (int64_t o = 0; o < outer; o++) {
        const double *x = in[0] + o * inner;
        double *y = out[0] + o * inner;
        double mean = 0, ms = 0;
        if (!rms) {
            for (int64_t j = 0; j < inner; j++) mean += x[j];
            mean /= (double)inner;
        }
        for (int64_t j = 0; j < inner; j++) ms += (x[j] - mean) * (x[j] - mean);
        double r = 1.0 / sqrt(ms / (double)inner + n->a.f);
        for (int64_t j = 0; j < inner; j++) {
            double v = (x[j] - mean) * r;
            if (gain) v *= gain[j];
            if (bias) v += bias[j];
            y[j] = v;
        }
    }
    return FC_OK;
}
EX(LAYERNORM) { return norm(g, n, in, out, false, err); }
EX(RMSNORM) { return norm(g, n, in, out, true, err); }

EX(CAUSAL_MASK) {
    const IrShape *s = in_shape(g, n, 0);
    FC_CHECK(err, s->rank >= 2);
    int64_t tq = s->dims[s->rank - 2], tk = s->dims[s->rank - 1], b = count(s) / (tq * tk);
    for (int64_t z = 0; z < b; z++)
        for (int64_t i = 0; i < tq; i++)
            for (int64_t j = 0; j < tk; j++) {
                int64_t at = (z * tq + i) * tk + j;
                out[0][at] = j <= i + (tk - tq) ? in[0][at] : n->a.f;
            }
    return FC_OK;
}

/* softmax(causal?(q @ k^T * scale)) @ v, batch dims broadcast; all in double. */
EX(ATTENTION) {
    const IrShape *qs = in_shape(g, n, 0), *ks = in_shape(g, n, 1), *vs = in_shape(g, n, 2);
    const IrShape *os = out_shape(g, n, 0);
    int r = os->rank, nb = r - 2;
    FC_CHECK(err, r >= 2 && qs->rank == r && ks->rank == r && vs->rank == r);
    int64_t tq = qs->dims[r - 2], d = qs->dims[r - 1], tk = ks->dims[r - 2], dv = vs->dims[r - 1];
    FC_CHECK(err, ks->dims[r - 1] == d && vs->dims[r - 2] == tk && os->dims[r - 2] == tq && os->dims[r - 1] == dv);
    double *p = fc_alloc(sizeof(double) * (size_t)tk);
    if (!p) return FC_OOM(err);
    int64_t sq[IR_MAX_RANK], sk[IR_MAX_RANK], sv[IR_MAX_RANK];
    batch_strides(qs, nb, sq);
    batch_strides(ks, nb, sk);
    batch_strides(vs, nb, sv);
    IrShape bs = {.rank = nb};
    memcpy(bs.dims, os->dims, sizeof(int64_t) * (size_t)nb);
    Odo it;
    odo_init(&it, &bs);
    odo_add_strides(&it, sq);
    odo_add_strides(&it, sk);
    odo_add_strides(&it, sv);
    int64_t nbatch = count(&bs);
    for (int64_t z = 0; z < nbatch; z++, odo_next(&it)) {
        const double *q = in[0] + it.off[0], *k = in[1] + it.off[1], *v = in[2] + it.off[2];
        double *o = out[0] + z * tq * dv;
        for (int64_t i = 0; i < tq; i++) {
            double mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j < tk; j++) {
                double s = 0;
                for (int64_t c = 0; c < d; c++) s += q[i * d + c] * k[j * d + c];
                s *= n->a.f;
                if (n->a.i[0] && j > i + (tk - tq)) s = -INFINITY;
                p[j] = s;
                mx = b_max(mx, s);
            }
            for (int64_t j = 0; j < tk; j++) sum += (p[j] = exp(p[j] - mx));
            for (int64_t c = 0; c < dv; c++) o[i * dv + c] = 0;
            for (int64_t j = 0; j < tk; j++) {
                double w = p[j] / sum;
                for (int64_t c = 0; c < dv; c++) o[i * dv + c] += w * v[j * dv + c];
            }
        }
    }
    fc_free(p);
    return FC_OK;
}

EX(GELU) {
    (void)err;
    int64_t m = count(out_shape(g, n, 0));
    const double k0 = 0.79788456080286535588, k1 = 0.044715; /* sqrt(2/pi) */
    const double rs2 = 0.70710678118654752440;               /* 1/sqrt(2) */
    for (int64_t i = 0; i < m; i++) {
        double x = in[0][i];
        /* x ndtr(x) and x sigmoid(2u): the forms 0.5 x (1 + erf) and 0.5 x (1 + tanh) cancel
         * for negative x, even in f64 (1 + erf is 0 below about x = -8.3) */
        out[0][i] = n->a.i[0] == IR_APPROX_TANH ? x / (1.0 + exp(-2.0 * k0 * (x + k1 * x * x * x)))
                                               : 0.5 * x * erfc(-x * rs2);
    }
    return FC_OK;
}

/* ---- shape ops ----------------------------------------------------------------------------------- */
EX(RESHAPE) {
    (void)err;
    memcpy(out[0], in[0], sizeof(double) * (size_t)count(out_shape(g, n, 0)));
    return FC_OK;
}

EX(TRANSPOSE) {
    const IrShape *xs = in_shape(g, n, 0), *os = out_shape(g, n, 0);
    FC_CHECK(err, n->a.nlist == xs->rank && os->rank == xs->rank);
    int64_t xst[IR_MAX_RANK], st[IR_MAX_RANK];
    contiguous_strides(xs, xst);
    for (int i = 0; i < os->rank; i++) {
        FC_CHECK(err, n->a.list[i] >= 0 && n->a.list[i] < xs->rank);
        st[i] = xst[n->a.list[i]];
    }
    Odo it;
    odo_init(&it, os);
    odo_add_strides(&it, st);
    int64_t m = count(os);
    for (int64_t i = 0; i < m; i++, odo_next(&it)) out[0][i] = in[0][it.off[0]];
    return FC_OK;
}

EX(BROADCAST) {
    (void)err;
    Odo it;
    odo_init(&it, out_shape(g, n, 0));
    odo_add_bcast(&it, in_shape(g, n, 0));
    int64_t m = count(out_shape(g, n, 0));
    for (int64_t i = 0; i < m; i++, odo_next(&it)) out[0][i] = in[0][it.off[0]];
    return FC_OK;
}

EX(CONCAT) {
    const IrShape *os = out_shape(g, n, 0);
    int ax = (int)n->a.i[0];
    FC_CHECK(err, ax >= 0 && ax < os->rank);
    int64_t outer = count_range(os, 0, ax), inner = count_range(os, ax + 1, os->rank), at = 0;
    for (int64_t o = 0; o < outer; o++)
        for (int i = 0; i < n->nin; i++) {
            int64_t chunk = in_shape(g, n, i)->dims[ax] * inner;
            memcpy(out[0] + at, in[i] + o * chunk, sizeof(double) * (size_t)chunk);
            at += chunk;
        }
    FC_CHECK(err, at == count(os));
    return FC_OK;
}

EX(SPLIT) {
    const IrShape *xs = in_shape(g, n, 0);
    int ax = (int)n->a.i[0];
    FC_CHECK(err, ax >= 0 && ax < xs->rank && n->nout == n->a.nlist);
    int64_t outer = count_range(xs, 0, ax), inner = count_range(xs, ax + 1, xs->rank), at = 0;
    for (int64_t o = 0; o < outer; o++)
        for (int k = 0; k < n->nout; k++) {
            int64_t chunk = out_shape(g, n, k)->dims[ax] * inner;
            memcpy(out[k] + o * chunk, in[0] + at, sizeof(double) * (size_t)chunk);
            at += chunk;
        }
    FC_CHECK(err, at == count(xs));
    return FC_OK;
}

EX(SLICE) {
    const IrShape *xs = in_shape(g, n, 0), *os = out_shape(g, n, 0);
    int ax = (int)n->a.i[0];
    FC_CHECK(err, ax >= 0 && ax < xs->rank);
    int64_t outer = count_range(xs, 0, ax), inner = count_range(xs, ax + 1, xs->rank);
    int64_t len = xs->dims[ax], cnt = os->dims[ax], start = n->a.i[1], step = n->a.i[3];
    /* every picked index must be inside the axis (the shape rule clamped the bounds) */
    FC_CHECK(err, step != 0 && start >= 0 && start < len && start + (cnt - 1) * step >= 0 &&
                      start + (cnt - 1) * step < len);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < cnt; k++)
            memcpy(out[0] + (o * cnt + k) * inner, in[0] + (o * len + start + k * step) * inner,
                   sizeof(double) * (size_t)inner);
    return FC_OK;
}

/* ---- generators ------------------------------------------------------------------------------------ */
EX(IOTA) {
    (void)in;
    const IrShape *os = out_shape(g, n, 0);
    int ax = (int)n->a.i[0];
    FC_CHECK(err, ax >= 0 && ax < os->rank);
    int64_t outer = count_range(os, 0, ax), len = os->dims[ax], inner = count_range(os, ax + 1, os->rank);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < len; k++)
            for (int64_t j = 0; j < inner; j++) out[0][(o * len + k) * inner + j] = (double)k;
    return FC_OK;
}

EX(FULL) {
    (void)in, (void)err;
    int64_t m = count(out_shape(g, n, 0));
    for (int64_t i = 0; i < m; i++) out[0][i] = n->a.f;
    return FC_OK;
}

/* ---- f8 scaling (ops.def) ---------------------------------------------------------------------
 * fp8_scale: the scale the graph's slot table holds (the program's, when --check copied it in).
 * fp8_quant: x * s; the driver's rounding to the slot's format (saturating) follows, or with
 * RT_ROUND_AT_OUTPUTS f32's, as for a computing op's 16-bit result: a fused kernel keeps an f8
 * value it does not store in f32 (passes/lower.c, fp8_wide; a training block's kernels round
 * them all, which the spread of the two meanings covers too).
 * fp8_dequant: q / s, exact for a power-of-two s. */
EX(FP8_SCALE) {
    (void)in;
    int64_t k = n->a.i[0];
    if (k < 0 || k >= g->fp8.len) return fc_err_set(err, FC_ERR_INTERNAL, "internal error: fp8_scale of slot %lld", (long long)k);
    out[0][0] = g->fp8.data[k].scale;
    return FC_OK;
}
static double b_fp8_quant(double x, double s) { return x * s; }
static double b_fp8_dequant(double q, double s) { return q / s; }
EX(FP8_QUANT) {
    (void)err;
    return binary(g, n, in, out, b_fp8_quant);
}
EX(FP8_DEQUANT) {
    (void)err;
    return binary(g, n, in, out, b_fp8_dequant);
}

/* Philox-4x32-10 as Random123 defines it: 10 rounds, the key bumped by the Weyl constants
 * between rounds. */
void rt_interp_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
    uint32_t c[4] = {ctr[0], ctr[1], ctr[2], ctr[3]}, k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; r++) {
        if (r > 0) {
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        uint64_t p0 = (uint64_t)0xD2511F53u * c[0], p1 = (uint64_t)0xCD9E8D57u * c[2];
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c[1] ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c[3] ^ k1;
        c[0] = n0;
        c[1] = (uint32_t)p1;
        c[2] = n2;
        c[3] = (uint32_t)p0;
    }
    memcpy(out, c, sizeof c);
}

/* dropout's mask at flat index i: kept iff word 0 of Philox(counter (i, 0), key seed) >=
 * floor(p * 2^32); the seed's 64-bit two's-complement pattern is the key. */
static bool dropout_kept(double p, int64_t seed, int64_t i) {
    uint64_t s = (uint64_t)seed, u = (uint64_t)i;
    uint32_t ctr[4] = {(uint32_t)u, (uint32_t)(u >> 32), 0, 0}, key[2] = {(uint32_t)s, (uint32_t)(s >> 32)}, r[4];
    rt_interp_philox4x32_10(ctr, key, r);
    return (uint64_t)r[0] >= (uint64_t)floor(p * 4294967296.0);
}

EX(DROPOUT_MASK) {
    (void)in;
    FC_CHECK(err, n->a.f >= 0 && n->a.f < 1);
    int64_t m = count(out_shape(g, n, 0));
    for (int64_t i = 0; i < m; i++) out[0][i] = dropout_kept(n->a.f, n->a.i[0], i);
    return FC_OK;
}

/* ---- data-dependent reads ------------------------------------------------------------------------------ */
/* "FILE:LINE:COL: " of node n (empty when it has no location) and the multi-index of flat
 * position p in shape s, "1, 2", for the run-time data errors. */
static void data_error_place(const IrGraph *g, const IrNode *n, const IrShape *s, int64_t p, char *loc, size_t nloc,
                             char *pos, size_t npos) {
    int64_t idx[IR_MAX_RANK], rest = p;
    size_t at = 0;
    loc[0] = pos[0] = 0;
    for (int d = s->rank - 1; d >= 0; d--) {
        idx[d] = rest % s->dims[d];
        rest /= s->dims[d];
    }
    for (int d = 0; d < s->rank && at < npos; d++)
        at += (size_t)snprintf(pos + at, npos - at, "%s%lld", d ? ", " : "", (long long)idx[d]);
    if (n->loc.line > 0)
        snprintf(loc, nloc, "%.256s:%d:%d: ", g->file ? g->file : "<input>", n->loc.line, n->loc.col);
}

/* ids[p] (of shape is) of gather or scatter_add node n must be in [0, rows): else a data error */
static FcStatus check_id(const IrGraph *g, const IrNode *n, const IrShape *is, int64_t p, double id, int64_t rows,
                         FcErr *err) {
    if (id >= 0 && id < (double)rows) return FC_OK;
    char pos[32 * IR_MAX_RANK + 4], loc[320];
    data_error_place(g, n, is, p, loc, sizeof loc, pos, sizeof pos);
    return fc_err_set(err, FC_ERR_RUNTIME_DATA, "%s%s: id %.0f at ids[%s] is out of range [0, %lld)", loc,
                      ir_ops[n->op].name, id, pos, (long long)rows);
}

EX(GATHER) {
    const IrShape *ts = in_shape(g, n, 0), *is = in_shape(g, n, 1);
    FC_CHECK(err, ts->rank >= 1);
    int64_t rows = ts->dims[0], row = count_range(ts, 1, ts->rank), m = count(is);
    for (int64_t p = 0; p < m; p++) {
        double id = in[1][p];
        FC_TRY(check_id(g, n, is, p, id, rows, err));
        memcpy(out[0] + p * row, in[0] + (int64_t)id * row, sizeof(double) * (size_t)row);
    }
    return FC_OK;
}

/* scatter_add(src, ids, rows): out[id] += src row p, in p's order; an id outside [0, rows) is a
 * data error (as a gather id is) */
EX(SCATTER_ADD) {
    const IrShape *is = in_shape(g, n, 1), *os = out_shape(g, n, 0);
    int64_t rows = os->dims[0], row = count_range(os, 1, os->rank), m = count(is);
    memset(out[0], 0, sizeof(double) * (size_t)(rows * row));
    for (int64_t p = 0; p < m; p++) {
        double id = in[1][p];
        FC_TRY(check_id(g, n, is, p, id, rows, err));
        double *o = out[0] + (int64_t)id * row;
        const double *x = in[0] + p * row;
        for (int64_t j = 0; j < row; j++) o[j] += x[j];
    }
    return FC_OK;
}

/* ---- matrix product --------------------------------------------------------------------------------------- */
EX(MATMUL) {
    const IrShape *as = in_shape(g, n, 0), *bs = in_shape(g, n, 1), *os = out_shape(g, n, 0);
    FC_CHECK(err, as->rank >= 2 && bs->rank >= 2 && os->rank >= 2);
    int64_t M = as->dims[as->rank - 2], K = as->dims[as->rank - 1], N = bs->dims[bs->rank - 1];
    FC_CHECK(err, bs->dims[bs->rank - 2] == K && os->dims[os->rank - 2] == M && os->dims[os->rank - 1] == N);
    int nb = os->rank - 2;
    int64_t sa[IR_MAX_RANK], sb[IR_MAX_RANK];
    batch_strides(as, nb, sa);
    batch_strides(bs, nb, sb);
    IrShape bsh = {.rank = nb};
    memcpy(bsh.dims, os->dims, sizeof(int64_t) * (size_t)nb);
    Odo it;
    odo_init(&it, &bsh);
    odo_add_strides(&it, sa);
    odo_add_strides(&it, sb);
    int64_t nbatch = count(&bsh);
    for (int64_t z = 0; z < nbatch; z++, odo_next(&it)) {
        const double *a = in[0] + it.off[0], *b = in[1] + it.off[1];
        double *c = out[0] + z * M * N;
        for (int64_t i = 0; i < M; i++) {
            double *ci = c + i * N;
            for (int64_t j = 0; j < N; j++) ci[j] = 0;
            for (int64_t k = 0; k < K; k++) {
                double aik = a[i * K + k];
                const double *bk = b + k * N;
                for (int64_t j = 0; j < N; j++) ci[j] += aik * bk[j];
            }
        }
    }
    return FC_OK;
}

/* ---- training ops --------------------------------------------------------------------------------------------- */
/* kept ? x * scale : 0, the scale 1 / (1 - p) rounded to x's dtype (the driver rounds the
 * product); dropped elements are +0 whatever x is (NaN and -0 included). */
EX(DROPOUT) {
    FC_CHECK(err, n->a.f >= 0 && n->a.f < 1);
    double scale = rnd(val(g, n->in[0])->dtype, 1.0 / (1.0 - n->a.f));
    int64_t m = count(out_shape(g, n, 0));
    for (int64_t i = 0; i < m; i++) out[0][i] = dropout_kept(n->a.f, n->a.i[0], i) ? in[0][i] * scale : 0.0;
    return FC_OK;
}

/* mean over rows of log(sum(exp(x - max))) - (x[label] - max), in f64; a label outside
 * [0, C) is a data error (as a gather id is). */
EX(CROSS_ENTROPY) {
    const IrShape *ls = in_shape(g, n, 0), *ys = in_shape(g, n, 1);
    FC_CHECK(err, ls->rank >= 1 && ys->rank == ls->rank - 1);
    int64_t C = ls->dims[ls->rank - 1], rows = count(ys);
    FC_CHECK(err, count(ls) == rows * C);
    double total = 0;
    for (int64_t r = 0; r < rows; r++) {
        const double *x = in[0] + r * C;
        double y = in[1][r], mx = -INFINITY, sum = 0;
        if (!(y >= 0 && y < (double)C)) {
            char pos[32 * IR_MAX_RANK + 4], loc[320];
            data_error_place(g, n, ys, r, loc, sizeof loc, pos, sizeof pos);
            return fc_err_set(err, FC_ERR_RUNTIME_DATA, "%scross_entropy: label %.0f at labels[%s] is out of range [0, %lld)",
                              loc, y, pos, (long long)C);
        }
        for (int64_t k = 0; k < C; k++) mx = b_max(mx, x[k]);
        for (int64_t k = 0; k < C; k++) sum += exp(x[k] - mx);
        total += log(sum) - (x[(int64_t)y] - mx);
    }
    out[0][0] = total / (double)rows;
    return FC_OK;
}

/* ---- the driver ------------------------------------------------------------------------------------------------ */
/* Bytes of a value's double buffer; false when too large. */
static bool value_bytes(const IrValue *v, size_t *bytes) {
    int64_t m, b;
    if (!ir_shape_numel(&v->shape, &m) || !fc_mul64(m, (int64_t)sizeof(double), &b) || (uint64_t)b > SIZE_MAX)
        return false;
    *bytes = b > 0 ? (size_t)b : sizeof(double);
    return true;
}

static FcStatus alloc_value(const IrGraph *g, int id, double **out, FcErr *err) {
    size_t bytes;
    if (!value_bytes(val(g, id), &bytes)) {
        char t[256];
        ir_type_str(val(g, id)->dtype, &val(g, id)->shape, t, sizeof t);
        return fc_err_set(err, FC_ERR_NOMEM, "reference interpreter: tensor %s is too large", t);
    }
    *out = fc_alloc(bytes);
    if (!*out) return FC_OOM(err);
    return FC_OK;
}

/* A 16- or 8-bit float: the dtypes whose intermediates the two roundings treat differently. */
static bool is_narrow_float(FcDtype t) { return t == FC_F16 || t == FC_BF16 || t == FC_F8E4M3 || t == FC_F8E5M2; }

bool rt_interp_has_narrow_intermediates(const IrGraph *g) {
    for (int k = 0; k < g->nodes.len; k++) {
        const IrNode *n = &g->nodes.data[k];
        IrCategory c = ir_ops[n->op].cat;
        if ((c == IR_CAT_CAST && !n->a.i[0]) || c == IR_CAT_GENERATOR || c == IR_CAT_SHAPE) continue;
        for (int r = 0; r < n->nout; r++)
            if (is_narrow_float(val(g, n->out[r])->dtype)) return true;
    }
    return false;
}

static FcStatus run_graph(const IrGraph *g, const void *const *inputs, void *const *outputs,
                          RtRounding rounding, RtInterpOpFn fallback, double **keep, const uint64_t *noise,
                          FcErr *err);

FcStatus rt_interp_run(const IrGraph *g, const void *const *inputs, void *const *outputs,
                       FcErr *err) {
    return rt_interp_run_rounding(g, inputs, outputs, RT_ROUND_EVERY_OP, err);
}

FcStatus rt_interp_run_rounding(const IrGraph *g, const void *const *inputs, void *const *outputs,
                                RtRounding rounding, FcErr *err) {
    return run_graph(g, inputs, outputs, rounding, NULL, NULL, NULL, err);
}

FcStatus rt_interp_run_noisy(const IrGraph *g, const void *const *inputs, void *const *outputs, uint64_t seed,
                             FcErr *err) {
    return run_graph(g, inputs, outputs, RT_ROUND_EVERY_OP, NULL, NULL, &seed, err);
}

static double unit_roundoff(FcDtype t) {
    switch (t) {
    case FC_F64: return ldexp(1, -53);
    case FC_F32: return ldexp(1, -24);
    case FC_F16: return ldexp(1, -11);
    case FC_BF16: return ldexp(1, -8);
    case FC_F8E4M3: return ldexp(1, -4);
    case FC_F8E5M2: return ldexp(1, -3);
    default: return 0;
    }
}

void rt_interp_perturb(double *d, int64_t m, FcDtype t, uint64_t seed, int node, int out, int ulps) {
    double delta = 2 * unit_roundoff(t) * (ulps > 1 ? ulps : 1);
    if (!(delta > 0)) return;
    uint64_t h = (seed + 0x9E3779B97F4A7C15ull * (uint64_t)(node + 1) + (uint64_t)out) * 0xBF58476D1CE4E5B9ull;
    double phase = (double)((h ^ (h >> 31)) % 1000) * 0.00631;
    /* sin(phase + 0.7548776662 j) by rotation, from sin and cos taken every 256 elements (a
     * sin an element was a quarter of `fusec run --check`'s time where it measures noise) */
    const double step = 0.7548776662, cs = cos(step), sn = sin(step);
    for (int64_t j0 = 0; j0 < m; j0 += 256) {
        double s = sin(phase + step * (double)j0), c = cos(phase + step * (double)j0);
        int64_t end = j0 + 256 < m ? j0 + 256 : m;
        for (int64_t j = j0; j < end; j++) {
            d[j] *= 1 + delta * s;
            double s2 = s * cs + c * sn;
            c = c * cs - s * sn;
            s = s2;
        }
    }
}

FcStatus rt_interp_forward_keep(const IrGraph *g, const void *const *inputs, void *const *outputs,
                                RtInterpOpFn fallback, double **keep, const uint64_t *noise, FcErr *err) {
    FC_CHECK(err, keep != NULL);
    return run_graph(g, inputs, outputs, RT_ROUND_EVERY_OP, fallback, keep, noise, err);
}

/* How many units in the last place an f32 or f64 result of op may be off on some backend: the
 * CUDA C++ Programming Guide's maximum errors for the functions the lowering calls (f32: powf 4,
 * expf/tanhf/erff/sinf/cosf/rsqrtf 2, normcdff 5, kept for ndtr though both backends now compute
 * their own (codegen/llvm.c vndtr, CUDA's fc_ndtr: 3.14 ulp measured, 3.95 without FMA); f64:
 * pow/sin/cos/tanh/erf 2, normcdf 5;
 * sigmoid and silu an exp, an add and a correctly rounded division: one more than exp), 1 for
 * what every backend rounds correctly. A 16- or 8-bit result is stored rounded to its type,
 * whose rounding dwarfs the f32 function's error: 1. */
static int device_ulps(IrOp op, FcDtype t) {
    if (t != FC_F32 && t != FC_F64) return 1;
    bool f = t == FC_F32;
    switch (op) {
    case IR_OP_POW: return f ? 4 : 2;
    case IR_OP_NDTR: return 5;
    case IR_OP_SIGMOID: case IR_OP_SILU: return f ? 3 : 2;
    case IR_OP_EXP: case IR_OP_RSQRT: return f ? 2 : 1;
    case IR_OP_TANH: case IR_OP_ERF: case IR_OP_SIN: case IR_OP_COS: return 2;
    default: return 1;
    }
}

FcStatus rt_interp_fp8_amax(const IrGraph *g, const void *const *inputs, double *amax, FcErr *err) {
    double **keep = fc_calloc((size_t)g->values.len + 1, sizeof *keep);
    if (!keep) return FC_OOM(err);
    for (int k = 0; k < g->fp8.len; k++) amax[k] = 0;
    FcStatus st = rt_interp_forward_keep(g, inputs, NULL, NULL, keep, NULL, err);
    for (int i = 0; st == FC_OK && i < g->nodes.len; i++) {
        const IrNode *n = &g->nodes.data[i];
        if (n->op != IR_OP_FP8_QUANT) continue;
        const double *x = keep[n->in[0]];
        int64_t m = count(&val(g, n->in[0])->shape);
        double a = amax[n->a.i[0]];
        for (int64_t j = 0; x && j < m; j++) a = isnan(a) || isnan(x[j]) ? NAN : fabs(x[j]) > a ? fabs(x[j]) : a;
        amax[n->a.i[0]] = a;
    }
    for (int v = 0; v < g->values.len; v++) fc_free(keep[v]);
    fc_free(keep);
    return st;
}

/* Does op get noise? Not abs, relu and the max/min family: exact everywhere, and noise on
 * them would untie ties (whose gradient split the check must see); nor fp8_dequant, a division
 * by a power of two. neg is exact too but keeps
 * its noise: it stands for the rounding of the sum that adds it (x + (-x) summed in another
 * order is not 0), which output noise on that sum (0 times anything) cannot show. */
static bool rounds(IrOp op) {
    switch (ir_ops[op].cat) {
    case IR_CAT_UNARY: case IR_CAT_BINARY: case IR_CAT_REDUCE: case IR_CAT_MATMUL: case IR_CAT_COMPOSITE:
    case IR_CAT_SCATTER:
        return op != IR_OP_ABS && op != IR_OP_RELU && op != IR_OP_MAXIMUM && op != IR_OP_MINIMUM &&
               op != IR_OP_MAX && op != IR_OP_MIN && op != IR_OP_FP8_DEQUANT;
    default: return false;
    }
}

/* Is node n exact on every backend whatever its inputs? A reduction over one element (a sum, a
 * mean of one value: a layernorm or a log_softmax over a size-1 axis, whose x - mean is exactly
 * 0 everywhere; noise there makes a 0 nonzero and hides a backend that gets it wrong). */
static bool exact_node(const IrGraph *g, const IrNode *n) {
    return ir_ops[n->op].cat == IR_CAT_REDUCE && count(&val(g, n->in[0])->shape) == count(&val(g, n->out[0])->shape);
}

/* The driver. keep == NULL: rt_interp_run_rounding. Else (interp_priv.h) every buffer is kept
 * and handed over in keep[] on success, outputs may be NULL, and `fallback` runs a node that
 * ex_table refuses with FC_ERR_UNSUPPORTED. */
static FcStatus run_graph(const IrGraph *g, const void *const *inputs, void *const *outputs,
                          RtRounding rounding, RtInterpOpFn fallback, double **keep, const uint64_t *noise,
                          FcErr *err) {
    for (int op = 0; op < IR_OP_COUNT; op++) FC_CHECK(err, ex_table[op] != NULL);
    FC_CHECK(err, g != NULL);
    FC_CHECK(err, g->inputs.len == 0 || inputs != NULL);
    FC_CHECK(err, g->outputs.len == 0 || outputs != NULL || keep != NULL);
    int nv = g->values.len, nn = g->nodes.len;
    FcStatus st = FC_OK;
    double **buf = fc_calloc((size_t)(nv > 0 ? nv : 1), sizeof *buf);
    int *last = fc_calloc((size_t)(nv > 0 ? nv : 1), sizeof *last);
    if (!buf || !last) {
        st = FC_OOM(err);
        goto done;
    }
#define CHECK_OR_FAIL(cond)                                                                     \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            st = fc_err_set(err, FC_ERR_INTERNAL, "internal error: %s:%d: check failed: %s",    \
                            __FILE__, __LINE__, #cond);                                         \
            goto done;                                                                          \
        }                                                                                       \
    } while (0)

    /* last use of every value: the index of the last node reading it; outputs live to the end */
    for (int v = 0; v < nv; v++) last[v] = -1;
    for (int k = 0; k < nn; k++) {
        const IrNode *n = &g->nodes.data[k];
        CHECK_OR_FAIL((unsigned)n->op < IR_OP_COUNT);
        for (int i = 0; i < n->nin; i++) {
            CHECK_OR_FAIL(n->in[i] >= 0 && n->in[i] < nv);
            last[n->in[i]] = k;
        }
        for (int i = 0; i < n->nout; i++) CHECK_OR_FAIL(n->out[i] >= 0 && n->out[i] < nv);
    }
    for (int o = 0; o < g->outputs.len; o++) {
        CHECK_OR_FAIL(g->outputs.data[o] >= 0 && g->outputs.data[o] < nv);
        last[g->outputs.data[o]] = nn;
    }

    /* block inputs in, as doubles */
    for (int i = 0; i < g->inputs.len; i++) {
        int v = g->inputs.data[i];
        CHECK_OR_FAIL(v >= 0 && v < nv);
        if (last[v] < 0 || buf[v]) continue;
        CHECK_OR_FAIL(inputs[i] != NULL);
        if ((st = alloc_value(g, v, &buf[v], err)) != FC_OK) goto done;
        int64_t m = count(&val(g, v)->shape);
        for (int64_t j = 0; j < m; j++) buf[v][j] = load_elem(val(g, v)->dtype, inputs[i], j);
    }

    enum { MAXIN_FAST = 16 };
    for (int k = 0; k < nn; k++) {
        const IrNode *n = &g->nodes.data[k];
        const double *ins_fast[MAXIN_FAST];
        double *outs_fast[MAXIN_FAST];
        const double **ins = ins_fast;
        double **outs = outs_fast;
        if (n->nin > MAXIN_FAST || n->nout > MAXIN_FAST) {
            ins = fc_calloc((size_t)(n->nin > 0 ? n->nin : 1), sizeof *ins);
            outs = fc_calloc((size_t)(n->nout > 0 ? n->nout : 1), sizeof *outs);
            if (!ins || !outs) {
                if (ins != ins_fast) fc_free((void *)ins);
                if (outs != outs_fast) fc_free(outs);
                st = FC_OOM(err);
                goto done;
            }
        }
        for (int i = 0; i < n->nin; i++) {
            ins[i] = buf[n->in[i]];
            if (!ins[i]) st = fc_err_set(err, FC_ERR_INTERNAL, "internal error: %s:%d: node %d reads value %d before it is defined",
                                         __FILE__, __LINE__, k, n->in[i]);
        }
        for (int r = 0; st == FC_OK && r < n->nout; r++) {
            int v = n->out[r];
            if (buf[v]) st = fc_err_set(err, FC_ERR_INTERNAL, "internal error: %s:%d: value %d defined twice", __FILE__, __LINE__, v);
            else st = alloc_value(g, v, &buf[v], err);
            outs[r] = buf[v];
        }
        if (st == FC_OK) st = ex_table[n->op](g, n, ins, outs, err);
        if (st == FC_ERR_UNSUPPORTED && fallback) {
            fc_err_clear(err);
            st = fallback(g, n, ins, outs, err);
        }
        if (ins != ins_fast) fc_free((void *)ins);
        if (outs != outs_fast) fc_free(outs);
        if (st != FC_OK) goto done;
        /* op-by-op semantics: every result element rounded to its dtype; with
         * RT_ROUND_AT_OUTPUTS a 16/8-bit float result of a computing op or a storage cast (wide,
         * ops.def) is kept in f32 instead (a fused kernel's register), while the source's casts
         * and generators still round (every backend rounds them) */
        IrCategory cat = ir_ops[n->op].cat;
        bool keep_wide = rounding != RT_ROUND_EVERY_OP && (cat != IR_CAT_CAST || n->a.i[0]) &&
                         cat != IR_CAT_GENERATOR;
        bool perturb = noise && rounds(n->op) && !(n->op == IR_OP_FP8_QUANT && (*noise & RT_NOISE_KEEP_QUANTS));
        for (int r = 0; r < n->nout; r++) {
            const IrValue *v = val(g, n->out[r]);
            double *d = buf[n->out[r]];
            int64_t m = count(&v->shape);
            if (perturb && !exact_node(g, n)) {
                rt_interp_perturb(d, m, v->dtype, *noise, k, 0, device_ulps(n->op, v->dtype));
                /* exp(0) = cos(0) = 1 exactly on every backend (CUDA documents it) */
                const double *x = buf[n->in[0]];
                if ((n->op == IR_OP_EXP || n->op == IR_OP_COS) && count(&val(g, n->in[0])->shape) == m)
                    for (int64_t j = 0; j < m; j++)
                        if (x[j] == 0) d[j] = 1;
            }
            /* RT_ROUND_STORED: a graph output (last use nn) is rounded where it is computed */
            bool wide = keep_wide && !(rounding == RT_ROUND_STORED && last[n->out[r]] == nn);
            FcDtype rt = wide && is_narrow_float(v->dtype) ? FC_F32 : v->dtype;
            if (rt != FC_F64)
                for (int64_t j = 0; j < m; j++) d[j] = rnd(rt, d[j]);
        }
        /* free what is no longer needed: inputs at their last use, results never used */
        for (int i = 0; i < n->nin && !keep; i++)
            if (last[n->in[i]] == k) {
                fc_free(buf[n->in[i]]);
                buf[n->in[i]] = NULL;
            }
        for (int r = 0; r < n->nout && !keep; r++)
            if (last[n->out[r]] < 0) {
                fc_free(buf[n->out[r]]);
                buf[n->out[r]] = NULL;
            }
    }

    for (int o = 0; o < g->outputs.len && outputs; o++) {
        int v = g->outputs.data[o];
        CHECK_OR_FAIL(buf[v] != NULL && outputs[o] != NULL);
        int64_t m = count(&val(g, v)->shape);
        FcDtype t = val(g, v)->dtype;
        /* kept-wide values are rounded here, at the block's output */
        if (rounding != RT_ROUND_EVERY_OP && is_narrow_float(t))
            for (int64_t j = 0; j < m; j++) store_elem(t, outputs[o], j, rnd(t, buf[v][j]));
        else
            for (int64_t j = 0; j < m; j++) store_elem(t, outputs[o], j, buf[v][j]);
    }
#undef CHECK_OR_FAIL
done:
    if (buf)
        for (int v = 0; v < nv; v++) {
            if (keep && st == FC_OK) keep[v] = buf[v];
            else fc_free(buf[v]);
        }
    fc_free(buf);
    fc_free(last);
    return st;
}
