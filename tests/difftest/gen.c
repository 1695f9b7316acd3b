/* gen.c: the random-program generator of the differential tester (entry point dt_generate)
 * and the renderer of a program as .tf source (dt_render).
 *
 * A program is a block with 1-4 inputs of small random shapes (ranks 0-4, dims 1..13, sizes of
 * 1 included), dtypes about half f32, the rest f64, f16, bf16, i32 and bool, then 3-25
 * statements, each one op of the language applied to earlier values (the latest ones more
 * often: chains; older ones too: diamonds), and a return of 1-4 values. It favours what found
 * bugs: square trailing dims, 16-bit floats, several outputs, and g_rowview's pattern (a row
 * reduction with a view of a value it stages returned beside it, or left dead).
 *
 * The generator tracks every value's dtype and shape by the language's rules (promotion,
 * broadcasting, the shape rules of ir/shape.c), so every program it makes must compile; a
 * frontend error on one is a generator bug that the driver reports. It also keeps the numbers
 * tame, so that a mismatch means a bug and not an ill-conditioned computation:
 * - every value carries a rough magnitude bound; operands of exp/sin/cos/square/pow/matmul are
 *   scaled down by a power of two when their bound is large;
 * - log/sqrt/rsqrt/recip/div/pow work on abs(x) + 0.5;
 * - values are marked `exact` when every path computes the same bits (inputs, iota, full,
 *   neg/abs/relu/maximum/minimum/where/casts/shape ops/gather/max/min reductions of exact
 *   values, integer arithmetic (scatter_add of integers included), scaling of f32/f64 by a power of two). Comparisons and
 *   float-to-int casts take exact operands only, so no path can flip a bool or an integer by a
 *   rounding difference;
 * - integer ranges are tracked exactly so that nothing overflows and gather and scatter_add ids
 *   stay in range;
 * - layernorm is not applied over axes along which a value is known to be constant (its
 *   variance would be rounding noise).
 *
 * Training programs (DtGenConfig.train, `difftest --train`): the same statements, and
 * - some float inputs of rank >= 1 are `param`s (weights: remat.c does not count their bytes);
 * - g_ties: values quantized by a round trip through a narrow float (cast(cast(x, f8e4m3),
 *   f32): distinct elements become equal while the derivative passes through), then maximum /
 *   minimum of two such values (or of one with a literal on their grid, or with its own
 *   transpose) or max / min over axes: ties, where autodiff.c splits the gradient (half to each
 *   operand, equal shares among tied maxima). Only exact values, so every path sees the same ties;
 * - no sum or mean over the axis of a softmax (the gradient of a constant: rounding noise) and
 *   no rmsnorm over 1 element nor layernorm over 2 (a sign function: the derivative, eps /
 *   (...)^1.5, is computed by cancellation);
 * - the outputs are float values that depend on a float input where there are such, so that
 *   gradients flow.
 */
#include "difftest.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const dt_op_names[DT_OP_COUNT] = {
#define DT_NAME(ID, NAME) NAME,
    DT_OPS(DT_NAME)
#undef DT_NAME
};

int dt_op_by_name(const char *name) {
    for (int i = 0; i < DT_OP_COUNT; i++)
        if (strcmp(dt_op_names[i], name) == 0) return i;
    return DT_OP_COUNT;
}

uint64_t dt_mix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* ---- generator state ------------------------------------------------------------------------ */
typedef struct Gen {
    uint64_t s;
    DtProg *p;
    const DtGenConfig *cfg;
    /* set by g_rowview to steer the statement makers it reuses (so that their conditioning
     * rules apply unchanged): the next pick() takes value `force` (or fails if it does not fit),
     * reductions and softmax work on trailing axes and transposes mostly swap the last two, casts
     * go to `cast_to` */
    int force;
    bool trailing;
    int cast_to;
    int want_out[2 * DT_MAXOUT]; /* values g_rowview asks to return (latest last) */
    int nwant;
} Gen;

static uint64_t rnd(Gen *g) { return g->s = dt_mix(g->s); }
/* uniform integer in [lo, hi] */
static int64_t ri(Gen *g, int64_t lo, int64_t hi) { return hi <= lo ? lo : lo + (int64_t)(rnd(g) % (uint64_t)(hi - lo + 1)); }
static bool chance(Gen *g, double p) { return (double)(rnd(g) >> 11) * (1.0 / 9007199254740992.0) < p; }

static bool isf(FcDtype t) { return t == FC_F64 || t == FC_F32 || t == FC_F16 || t == FC_BF16 || t == FC_F8E4M3 || t == FC_F8E5M2; }
static bool isint(FcDtype t) { return t == FC_I32 || t == FC_I64; }
static bool isnum(FcDtype t) { return t != FC_BOOL; }
/* the dtype a float unary function gives */
static FcDtype floatof(FcDtype t) { return isf(t) ? t : FC_F32; }
static bool wide(FcDtype t) { return t == FC_F32 || t == FC_F64; }

static int64_t numel(const DtVal *v) {
    int64_t n = 1;
    for (int i = 0; i < v->rank; i++) n *= v->d[i];
    return n;
}

/* The language's promotion of two tensor dtypes (docs/language.md). */
static FcDtype promote(FcDtype a, FcDtype b) {
    if (a == b) return a;
    if (a == FC_BOOL) return b;
    if (b == FC_BOOL) return a;
    if (isf(a) && isf(b)) return (a == FC_F64 || b == FC_F64) ? FC_F64 : FC_F32;
    if (isf(a)) return a;
    if (isf(b)) return b;
    return FC_I64;
}

/* NumPy broadcasting of shapes a and b into *o; false when incompatible. */
static bool bcast(const DtVal *a, const DtVal *b, DtVal *o) {
    int r = a->rank > b->rank ? a->rank : b->rank;
    o->rank = r;
    for (int i = 0; i < r; i++) {
        int ia = a->rank - r + i, ib = b->rank - r + i;
        int64_t x = ia >= 0 ? a->d[ia] : 1, y = ib >= 0 ? b->d[ib] : 1;
        if (x != y && x != 1 && y != 1) return false;
        o->d[i] = x > y ? x : y;
    }
    return true;
}

/* Const-along-axis bits of a broadcast result: an axis is constant when every operand is
 * constant there, has size 1 there or lacks it. */
static unsigned bcast_const(const DtVal *o, const DtVal *const *ops, int n) {
    unsigned m = 0;
    for (int i = 0; i < o->rank; i++) {
        bool c = true;
        for (int k = 0; k < n && c; k++) {
            int ia = ops[k]->rank - o->rank + i;
            if (ia >= 0 && ops[k]->d[ia] != 1 && !(ops[k]->constax >> ia & 1)) c = false;
        }
        if (c && o->d[i] > 1) m |= 1u << i;
    }
    return m;
}

static void fmt_shape(char *b, size_t n, int rank, const int64_t *d) {
    size_t k = (size_t)snprintf(b, n, "[");
    for (int i = 0; i < rank && k < n; i++) k += (size_t)snprintf(b + k, n - k, "%s%lld", i ? ", " : "", (long long)d[i]);
    if (k < n) snprintf(b + k, n - k, "]");
}

/* A float literal that the lexer reads as a float (has '.' or 'e'). */
static void fmt_float(char *b, size_t n, double v) {
    snprintf(b, n, "%.9g", v);
    if (!strpbrk(b, ".en")) strncat(b, ".0", n - strlen(b) - 1);
}

static int new_val(Gen *g, FcDtype dt, int rank, const int64_t *d) {
    DtProg *p = g->p;
    DtVal *v = &p->v[p->nv];
    memset(v, 0, sizeof *v);
    v->dt = dt;
    v->rank = rank;
    for (int i = 0; i < rank; i++) v->d[i] = d[i];
    v->mag = 1;
    return p->nv++;
}

static void set_int_range(DtVal *v, int64_t lo, int64_t hi) {
    v->lo = lo;
    v->hi = hi;
    v->mag = (double)(llabs(lo) > llabs(hi) ? llabs(lo) : llabs(hi));
}

static int add_stmt(Gen *g, int op, const char *tmpl, const int *ops, int nops, const int *res, int nres) {
    DtProg *p = g->p;
    DtStmt *s = &p->s[p->ns++];
    memset(s, 0, sizeof *s);
    snprintf(s->tmpl, sizeof s->tmpl, "%s", tmpl);
    s->nops = nops;
    for (int i = 0; i < nops; i++) s->ops[i] = ops[i];
    s->nres = nres;
    for (int i = 0; i < nres; i++) s->res[i] = res[i];
    s->op = op;
    return res[0];
}

/* ---- operand choice ------------------------------------------------------------------------ */
typedef bool (*Pred)(const DtVal *v, const void *ctx);

static bool p_i8(const DtVal *v, const void *c) { (void)c; return v->dt == FC_I8; }

/* Picks a value satisfying f: half the time one of the three latest (chains), else any (diamonds).
 * An i8 value (a storage type: casts and index maps only) only for p_i8, g_i8's. */
static int pick(Gen *g, Pred f, const void *ctx) {
    if (g->force >= 0) {
        int v = g->force;
        g->force = -1;
        return f(&g->p->v[v], ctx) && (g->p->v[v].dt != FC_I8 || f == p_i8) ? v : -1;
    }
    int cand[DT_MAXV], n = 0;
    for (int i = 0; i < g->p->nv; i++)
        if (f(&g->p->v[i], ctx) && (g->p->v[i].dt != FC_I8 || f == p_i8)) cand[n++] = i;
    if (n == 0) return -1;
    if (chance(g, 0.5)) return cand[n - 1 - ri(g, 0, (n < 3 ? n : 3) - 1)];
    return cand[ri(g, 0, n - 1)];
}

static bool p_num(const DtVal *v, const void *c) { (void)c; return isnum(v->dt); }
static bool p_any(const DtVal *v, const void *c) { (void)c; (void)v; return true; }
static bool p_rank1(const DtVal *v, const void *c) { (void)c; return v->rank >= 1; }
static bool p_num_rank1(const DtVal *v, const void *c) { (void)c; return isnum(v->dt) && v->rank >= 1; }
static bool p_float_rank1(const DtVal *v, const void *c) { (void)c; return isf(v->dt) && v->rank >= 1; }
static bool p_float_rank2(const DtVal *v, const void *c) { (void)c; return isf(v->dt) && v->rank >= 2; }
static bool p_float_any(const DtVal *v, const void *c) { (void)c; return isf(v->dt); }
static bool p_bool(const DtVal *v, const void *c) { (void)c; return v->dt == FC_BOOL; }
static bool p_int(const DtVal *v, const void *c) { (void)c; return isint(v->dt); }
static bool p_exact_num(const DtVal *v, const void *c) { (void)c; return v->exact && isnum(v->dt); }

/* a numeric value whose shape broadcasts with ctx's */
static bool p_bcast_num(const DtVal *v, const void *c) {
    DtVal o;
    return isnum(v->dt) && bcast(v, (const DtVal *)c, &o) && numel(&o) <= DT_MAXNUMEL;
}
static bool p_bcast_exact(const DtVal *v, const void *c) { return v->exact && p_bcast_num(v, c); }

/* Operand text for value id `v` in slot k, scaled by a power of two when its magnitude exceeds
 * maxmag; *mag gets the scaled bound, *dt the operand's dtype (an int scaled becomes f32). */
static void operand(Gen *g, int v, int k, double maxmag, char *buf, size_t n, double *mag, FcDtype *dt, bool *exact) {
    const DtVal *x = &g->p->v[v];
    *mag = x->mag;
    *dt = x->dt;
    if (exact) *exact = x->exact;
    if (x->mag <= maxmag || x->dt == FC_BOOL) {
        snprintf(buf, n, "{%d}", k);
        return;
    }
    int e = 0;
    double m = x->mag;
    while (m > maxmag && e < 40) { m *= 0.5; e++; }
    char lit[32];
    fmt_float(lit, sizeof lit, ldexp(1.0, -e));
    snprintf(buf, n, "({%d} * %s)", k, lit);
    *mag = m;
    *dt = floatof(x->dt);
    if (exact) *exact = x->exact && wide(*dt) && isf(x->dt);
}

/* ---- statements ------------------------------------------------------------------------------- */
static bool too_big(const DtVal *v) { return numel(v) > DT_MAXNUMEL; }

/* unary float functions (and gelu) */
static bool g_unary_float(Gen *g, int op) {
    int x = pick(g, p_num, NULL);
    if (x < 0) return false;
    char a[64], t[DT_TMPL];
    double m;
    FcDtype dt;
    const DtVal *X = &g->p->v[x];
    double outmag = 1;
    switch (op) {
    case DT_OP_EXP:
        operand(g, x, 0, 3, a, sizeof a, &m, &dt, NULL);
        snprintf(t, sizeof t, "exp(%s)", a);
        outmag = exp(m);
        break;
    case DT_OP_LOG:
        snprintf(t, sizeof t, "log(abs({0}) + 0.5)");
        outmag = fmax(0.7, log(X->mag + 0.5));
        break;
    case DT_OP_SQRT:
        snprintf(t, sizeof t, "sqrt(abs({0}) + 0.5)");
        outmag = sqrt(X->mag + 0.5);
        break;
    case DT_OP_RSQRT: snprintf(t, sizeof t, "rsqrt(abs({0}) + 0.5)"); outmag = 1.5; break;
    case DT_OP_RECIP:
        snprintf(t, sizeof t, chance(g, 0.5) ? "recip(abs({0}) + 0.5)" : "recip(1.0 + {0} * {0})");
        if (strchr(t, '*') && X->mag > 100) snprintf(t, sizeof t, "recip(abs({0}) + 0.5)");
        outmag = 2;
        break;
    case DT_OP_TANH: snprintf(t, sizeof t, "tanh({0})"); break;
    case DT_OP_SIGMOID: snprintf(t, sizeof t, "sigmoid({0})"); break;
    case DT_OP_ERF: snprintf(t, sizeof t, "erf({0})"); break;
    case DT_OP_NDTR: snprintf(t, sizeof t, "ndtr({0})"); break;
    case DT_OP_SILU: snprintf(t, sizeof t, "silu({0})"); outmag = X->mag; break;
    case DT_OP_GELU:
        snprintf(t, sizeof t, "%s", chance(g, 0.5) ? "gelu({0}, approx=\"tanh\")" : chance(g, 0.5) ? "gelu({0})" : "gelu({0}, approx=\"none\")");
        outmag = X->mag;
        break;
    case DT_OP_SIN:
    case DT_OP_COS:
        operand(g, x, 0, 8, a, sizeof a, &m, &dt, NULL);
        snprintf(t, sizeof t, "%s(%s)", op == DT_OP_SIN ? "sin" : "cos", a);
        break;
    default: return false;
    }
    int y = new_val(g, floatof(X->dt), X->rank, X->d);
    g->p->v[y].mag = outmag;
    g->p->v[y].constax = X->constax;
    add_stmt(g, op, t, &x, 1, &y, 1);
    return true;
}

/* neg abs square relu: numeric, ints too */
static bool g_unary_num(Gen *g, int op) {
    int x = pick(g, p_num, NULL);
    if (x < 0) return false;
    const DtVal *X = &g->p->v[x];
    if (op == DT_OP_SQUARE && X->mag > (isint(X->dt) ? 1000 : 30)) return false;
    if (op == DT_OP_SQUARE && X->dt == FC_F16 && X->mag > 200) return false;
    static const char *fn[] = {[DT_OP_NEG] = "neg", [DT_OP_ABS] = "abs", [DT_OP_SQUARE] = "square", [DT_OP_RELU] = "relu"};
    char t[DT_TMPL];
    if (op == DT_OP_NEG && chance(g, 0.5)) snprintf(t, sizeof t, "-{0}");
    else snprintf(t, sizeof t, "%s({0})", fn[op]);
    int y = new_val(g, X->dt, X->rank, X->d);
    DtVal *Y = &g->p->v[y];
    X = &g->p->v[x];
    Y->constax = X->constax;
    if (op == DT_OP_NEG) Y->centax = X->centax;   /* -x sums to -(the constant) */
    if (isint(X->dt)) {
        int64_t lo = X->lo, hi = X->hi, m = llabs(lo) > llabs(hi) ? llabs(lo) : llabs(hi);
        switch (op) {
        case DT_OP_NEG: set_int_range(Y, -hi, -lo); break;
        case DT_OP_ABS: set_int_range(Y, lo >= 0 ? lo : (hi <= 0 ? -hi : 0), m); break;
        case DT_OP_SQUARE: set_int_range(Y, 0, m * m); break;
        default: set_int_range(Y, lo > 0 ? lo : 0, hi > 0 ? hi : 0); break;
        }
        Y->exact = X->exact;
    } else {
        Y->mag = op == DT_OP_SQUARE ? X->mag * X->mag : X->mag;
        Y->exact = X->exact && op != DT_OP_SQUARE;
    }
    add_stmt(g, op, t, &x, 1, &y, 1);
    return true;
}

/* add sub mul div pow maximum minimum, with broadcasting and mixed dtypes */
static bool g_binary(Gen *g, int op) {
    int a = pick(g, p_num, NULL);
    if (a < 0) return false;
    DtVal A = g->p->v[a];
    int b = chance(g, 0.75) ? pick(g, p_bcast_num, &A) : -1;
    if (b >= 0 && g->p->v[b].dt == FC_BOOL) b = -1;
    char t[DT_TMPL], sa[64], sb[64], lit[32];
    double ma, mb;
    FcDtype da, db;
    bool ea, eb;
    int ops[2] = {a, b};
    int nops = b >= 0 ? 2 : 1;
    double maxm = op == DT_OP_MUL ? 64 : op == DT_OP_POW ? 8 : 1e6;
    operand(g, a, 0, maxm, sa, sizeof sa, &ma, &da, &ea);
    DtVal B = {0};
    if (b >= 0) {
        B = g->p->v[b];
        operand(g, b, 1, op == DT_OP_POW ? 2 : maxm, sb, sizeof sb, &mb, &db, &eb);
    } else {
        /* a literal: weakly typed */
        static const double lits[] = {0.5, 1.5, 2.0, 0.25, 3.0, 0.75, 1.25};
        double lv = lits[ri(g, 0, 6)];
        bool intlit = isint(da) && op != DT_OP_POW && chance(g, 0.6);
        if (intlit) {
            lv = (double)ri(g, 1, 3);
            snprintf(lit, sizeof lit, "%d", (int)lv);
            db = da;
        } else {
            fmt_float(lit, sizeof lit, lv);
            db = isf(da) ? da : FC_F32;
        }
        snprintf(sb, sizeof sb, "%s", lit);
        mb = lv;
        eb = true;
        B.rank = 0;
        B.dt = db;
        B.lo = B.hi = (int64_t)lv;
        B.exact = true;
    }
    FcDtype rt = promote(da, db);
    if (b < 0 && isint(da) && !isint(db)) rt = FC_F32;
    DtVal o;
    if (!bcast(&A, &B, &o)) return false;
    bool intop = isint(rt);
    bool exact = false;
    double mag = 1;
    int64_t lo = 0, hi = 0;
    const char *opsym = NULL, *fname = NULL;
    switch (op) {
    case DT_OP_ADD: opsym = "+"; fname = "add"; mag = ma + mb; break;
    case DT_OP_SUB: opsym = "-"; fname = "sub"; mag = ma + mb; break;
    case DT_OP_MUL: opsym = "*"; fname = "mul"; mag = ma * mb; break;
    case DT_OP_MAXIMUM: fname = "maximum"; mag = fmax(ma, mb); exact = ea && eb; break;
    case DT_OP_MINIMUM: fname = "minimum"; mag = fmax(ma, mb); exact = ea && eb; break;
    default: break;
    }
    if (intop && (op == DT_OP_ADD || op == DT_OP_SUB || op == DT_OP_MUL || op == DT_OP_MAXIMUM || op == DT_OP_MINIMUM)) {
        const DtVal *AV = &g->p->v[a];
        int64_t al = AV->lo, ah = AV->hi, bl = B.lo, bh = b >= 0 ? g->p->v[b].hi : B.hi;
        if (b >= 0) bl = g->p->v[b].lo;
        if (!isint(da)) { al = -(int64_t)ma; ah = (int64_t)ma; }
        int64_t c[4];
        switch (op) {
        case DT_OP_ADD: lo = al + bl; hi = ah + bh; break;
        case DT_OP_SUB: lo = al - bh; hi = ah - bl; break;
        case DT_OP_MUL:
            c[0] = al * bl; c[1] = al * bh; c[2] = ah * bl; c[3] = ah * bh;
            lo = hi = c[0];
            for (int i = 1; i < 4; i++) { if (c[i] < lo) lo = c[i]; if (c[i] > hi) hi = c[i]; }
            break;
        case DT_OP_MAXIMUM: lo = al > bl ? al : bl; hi = ah > bh ? ah : bh; break;
        default: lo = al < bl ? al : bl; hi = ah < bh ? ah : bh; break;
        }
        if (llabs(lo) > (1 << 20) || llabs(hi) > (1 << 20)) return false;
        exact = ea && eb;
    }
    if (op == DT_OP_MUL && !intop && b < 0 && isf(rt) && wide(rt) && ea) {
        /* a power of two keeps exactness */
        double lv = mb;
        int e;
        if (frexp(lv, &e) == 0.5) exact = true;
    }
    if (op == DT_OP_DIV) {
        if (b >= 0) snprintf(t, sizeof t, isint(db) ? "%s / (abs(%s) + 1)" : "%s / (abs(%s) + 0.5)", sa, sb);
        else snprintf(t, sizeof t, chance(g, 0.5) ? "%s / %s" : "div(%s, %s)", sa, sb);
        if (isint(rt) || rt == FC_BOOL) rt = FC_F32;
        if (!isf(rt)) rt = FC_F32;
        mag = b >= 0 ? ma * 2 : ma / mb;
        if (isint(da) && b >= 0 && isint(db)) rt = FC_F32;
    } else if (op == DT_OP_POW) {
        if (!isf(da) && !(b >= 0 && isf(db))) return false;
        if (b >= 0 && !isf(promote(floatof(da), db))) return false;
        char e[64];
        double em = 2;
        if (b >= 0) { snprintf(e, sizeof e, "%s", sb); em = mb; }
        else {
            static const char *ex[] = {"2", "3", "0.5", "-0.5", "1.5", "-2.0"};
            static const double exv[] = {2, 3, 0.5, 0.5, 1.5, 2};
            int k = (int)ri(g, 0, 5);
            snprintf(e, sizeof e, "%s", ex[k]);
            em = exv[k];
        }
        bool sq = ma <= 4 && chance(g, 0.3);
        if (sq) snprintf(t, sizeof t, "pow(%s * %s + 0.5, %s)", sa, sa, e);
        else snprintf(t, sizeof t, "pow(abs(%s) + 0.5, %s)", sa, e);
        mag = sq ? pow(ma * ma + 0.5, em) : pow(ma + 0.5, em);
        if (mag < 4) mag = 4;
        rt = b >= 0 ? promote(floatof(da), db) : floatof(da);
    } else if (opsym && chance(g, 0.7)) {
        if (b < 0 && chance(g, 0.3)) snprintf(t, sizeof t, "%s %s %s", sb, opsym, sa);
        else snprintf(t, sizeof t, "%s %s %s", sa, opsym, sb);
    } else {
        snprintf(t, sizeof t, "%s(%s, %s)", fname, sa, sb);
    }
    if (rt == FC_F16 && mag > 3e4) return false;
    if (mag > 1e12) return false;
    if (too_big(&o)) return false;
    int y = new_val(g, rt, o.rank, o.d);
    DtVal *Y = &g->p->v[y];
    const DtVal *opv[2] = {&g->p->v[a], &B};
    Y->constax = bcast_const(Y, opv, b >= 0 ? 2 : 1);
    if (isint(rt)) { set_int_range(Y, lo, hi); }
    else Y->mag = mag;
    Y->exact = exact && (isint(rt) || isf(rt));
    add_stmt(g, op, t, ops, nops, &y, 1);
    return true;
}

static bool g_compare(Gen *g) {
    int a = pick(g, p_exact_num, NULL);
    if (a < 0) return false;
    DtVal A = g->p->v[a];
    int b = chance(g, 0.7) ? pick(g, p_bcast_exact, &A) : -1;
    static const char *ops[] = {"<", "<=", ">", ">=", "==", "!="};
    static const char *fns[] = {"lt", "le", "gt", "ge", "eq", "ne"};
    int k = (int)ri(g, 0, 5);
    if (!isint(A.dt) && (k >= 4) && b < 0) k = (int)ri(g, 0, 3);  /* float == literal is rarely true */
    char t[DT_TMPL], lit[32];
    DtVal B = {0};
    if (b >= 0) {
        B = g->p->v[b];
        if (B.dt == FC_BOOL && A.dt != FC_BOOL) return false;
        snprintf(lit, sizeof lit, "{1}");
    } else {
        if (isint(A.dt)) snprintf(lit, sizeof lit, "%d", (int)ri(g, A.lo, A.hi));
        else fmt_float(lit, sizeof lit, (double)ri(g, -4, 4) * 0.25 + 0.125);
        B.rank = 0;
    }
    DtVal o;
    if (!bcast(&A, &B, &o) || too_big(&o)) return false;
    if (chance(g, 0.8)) snprintf(t, sizeof t, "{0} %s %s", ops[k], lit);
    else snprintf(t, sizeof t, "%s({0}, %s)", fns[k], lit);
    int opsv[2] = {a, b};
    int y = new_val(g, FC_BOOL, o.rank, o.d);
    DtVal *Y = &g->p->v[y];
    const DtVal *opv[2] = {&g->p->v[a], &B};
    Y->constax = bcast_const(Y, opv, b >= 0 ? 2 : 1);
    set_int_range(Y, 0, 1);
    Y->exact = true;
    add_stmt(g, DT_OP_CMP, t, opsv, b >= 0 ? 2 : 1, &y, 1);
    return true;
}

static bool g_where(Gen *g) {
    int c = pick(g, p_bool, NULL);
    char cs[64];
    DtVal C;
    int ops[3], nops = 0;
    if (c >= 0) {
        C = g->p->v[c];
        snprintf(cs, sizeof cs, "{0}");
        ops[nops++] = c;
    } else {
        int x = pick(g, p_exact_num, NULL);
        if (x < 0) return false;
        C = g->p->v[x];
        if (isint(C.dt)) snprintf(cs, sizeof cs, "{0} > %d", (int)ri(g, C.lo, C.hi));
        else snprintf(cs, sizeof cs, "{0} > 0.125");
        ops[nops++] = x;
        C.dt = FC_BOOL;
        C.exact = true;
    }
    int a = pick(g, p_bcast_num, &C);
    if (a < 0) return false;
    DtVal A = g->p->v[a], t1;
    if (!bcast(&C, &A, &t1)) return false;
    int b = chance(g, 0.6) ? pick(g, p_bcast_num, &t1) : -1;
    DtVal B = {0}, o;
    char t[DT_TMPL], bs[32];
    ops[nops++] = a;
    if (b >= 0) {
        B = g->p->v[b];
        snprintf(bs, sizeof bs, "{%d}", nops);
        ops[nops++] = b;
    } else {
        if (isint(A.dt)) { int lv = (int)ri(g, 0, 3); snprintf(bs, sizeof bs, "%d", lv); B.lo = B.hi = lv; }
        else fmt_float(bs, sizeof bs, chance(g, 0.5) ? 0.0 : -1.5);
        B.dt = A.dt;
        B.rank = 0;
        B.exact = true;
        B.mag = 1.5;
    }
    if (!bcast(&t1, &B, &o) || too_big(&o)) return false;
    FcDtype rt = promote(A.dt, B.dt);
    if (rt == FC_BOOL) return false;
    snprintf(t, sizeof t, "where(%s, {%d}, %s)", cs, nops - (b >= 0 ? 2 : 1), bs);
    int y = new_val(g, rt, o.rank, o.d);
    DtVal *Y = &g->p->v[y];
    const DtVal *opv[3] = {&C, &A, &B};
    Y->constax = bcast_const(Y, opv, 3);
    Y->exact = C.exact && A.exact && B.exact;
    if (isint(rt)) set_int_range(Y, A.lo < B.lo ? A.lo : B.lo, A.hi > B.hi ? A.hi : B.hi);
    else Y->mag = fmax(A.mag, B.mag);
    add_stmt(g, DT_OP_WHERE, t, ops, nops, &y, 1);
    return true;
}

static bool g_cast(Gen *g) {
    int x = pick(g, p_any, NULL);
    if (x < 0) return false;
    const DtVal *X = &g->p->v[x];
    static const FcDtype tos[] = {FC_F32, FC_F32, FC_F64, FC_F16, FC_BF16, FC_I32, FC_I32, FC_I64, FC_F8E4M3, FC_F8E5M2};
    FcDtype to = tos[ri(g, 0, 9)];
    if (g->cast_to >= 0) to = (FcDtype)g->cast_to;
    char t[DT_TMPL];
    int64_t lo = 0, hi = 0;
    if (isint(to)) {
        if (isf(X->dt)) {
            if (!X->exact || X->mag > 1e4) return false;
            /* scale by a power of two first (exact in f32/f64) to get a spread of integers */
            if (wide(X->dt) && X->mag < 8 && chance(g, 0.7)) {
                snprintf(t, sizeof t, "cast({0} * 4.0, %s)", fc_dtype_name(to));
                lo = -(int64_t)(X->mag * 4) - 1; hi = -lo;
            } else {
                snprintf(t, sizeof t, "cast({0}, %s)", fc_dtype_name(to));
                lo = -(int64_t)X->mag - 1; hi = -lo;
            }
        } else {
            snprintf(t, sizeof t, "cast({0}, %s)", fc_dtype_name(to));
            lo = X->lo; hi = X->hi;
        }
    } else {
        if (to == FC_F16 && X->mag > 3e4) return false;
        if ((to == FC_F8E4M3 || to == FC_F8E5M2) && !chance(g, 0.3) && g->cast_to < 0) to = FC_BF16;
        snprintf(t, sizeof t, "cast({0}, %s)", fc_dtype_name(to));
    }
    int y = new_val(g, to, X->rank, X->d);
    DtVal *Y = &g->p->v[y];
    X = &g->p->v[x];
    Y->constax = X->constax;
    /* a cast of a centred value still sums to ~0 over its centring axes (seed 7072 graph 188:
     * layernorm, cast to f64, sum over the row) */
    Y->centax = isint(to) || to == FC_BOOL ? 0 : X->centax;
    Y->exact = X->exact;
    if (isint(to)) set_int_range(Y, lo, hi);
    else Y->mag = X->mag;
    add_stmt(g, DT_OP_CAST, t, &x, 1, &y, 1);
    return true;
}

/* a random non-empty axis set; *text gets the argument ("axis=1", "axis=[0, -1]", "" = all) */
static int rand_axes(Gen *g, int rank, bool *ax, char *text, size_t n, bool allow_all) {
    memset(ax, 0, sizeof(bool) * DT_MAXRANK);
    if (allow_all && chance(g, 0.15)) {
        for (int i = 0; i < rank; i++) ax[i] = true;
        text[0] = 0;
        return rank;
    }
    int cnt = 0;
    if (chance(g, 0.6)) { ax[ri(g, 0, rank - 1)] = true; cnt = 1; }
    else for (int i = 0; i < rank; i++) if (chance(g, 0.5)) { ax[i] = true; cnt++; }
    if (cnt == 0) { ax[rank - 1] = true; cnt = 1; }
    size_t k = 0;
    if (cnt == 1 && chance(g, 0.6)) {
        for (int i = 0; i < rank; i++)
            if (ax[i]) snprintf(text, n, "axis=%d", chance(g, 0.5) ? i : i - rank);
        return cnt;
    }
    k += (size_t)snprintf(text + k, n - k, "axis=[");
    bool first = true;
    for (int i = 0; i < rank; i++)
        if (ax[i]) {
            k += (size_t)snprintf(text + k, n - k, "%s%d", first ? "" : ", ", chance(g, 0.7) ? i : i - rank);
            first = false;
        }
    snprintf(text + k, n - k, "]");
    return cnt;
}

static bool g_reduce(Gen *g, int op) {
    int x = pick(g, p_num_rank1, NULL);
    if (x < 0) return false;
    const DtVal X = g->p->v[x];
    bool ax[DT_MAXRANK];
    char at[64], t[DT_TMPL];
    if (g->trailing) {
        /* the last axis (or the last two): a row reduction, one block per row on a GPU */
        memset(ax, 0, sizeof ax);
        ax[X.rank - 1] = true;
        if (X.rank >= 3 && chance(g, 0.25)) {
            ax[X.rank - 2] = true;
            snprintf(at, sizeof at, "axis=[-2, -1]");
        } else snprintf(at, sizeof at, "axis=%d", chance(g, 0.5) ? -1 : X.rank - 1);
    } else rand_axes(g, X.rank, ax, at, sizeof at, true);
    bool keep = chance(g, 0.5);
    int64_t d[DT_MAXRANK], K = 1;
    int r = 0;
    unsigned cm = 0;
    for (int i = 0; i < X.rank; i++) {
        if (ax[i]) { K *= X.d[i]; if (keep) d[r++] = 1; }
        else { if (X.constax >> i & 1) cm |= 1u << r; d[r++] = X.d[i]; }
    }
    const char *fn = dt_op_names[op];
    if (at[0]) snprintf(t, sizeof t, "%s({0}, %s%s)", fn, at, keep ? ", keepdim=true" : chance(g, 0.3) ? ", keepdim=false" : "");
    else snprintf(t, sizeof t, "%s({0}%s)", fn, keep ? ", keepdim=true" : "");
    FcDtype rt = op == DT_OP_MEAN ? floatof(X.dt) : X.dt;
    if (op == DT_OP_SUM && isint(X.dt) && (llabs(X.lo) * K > (1 << 20) || llabs(X.hi) * K > (1 << 20))) return false;
    if (op == DT_OP_SUM && X.dt == FC_F16 && X.mag * K > 3e4) return false;
    /* the sum of a centred value over its centring axes is 0 up to rounding: ill-conditioned */
    unsigned rm = 0;
    for (int i = 0; i < X.rank; i++) rm |= ax[i] ? 1u << i : 0;
    if ((op == DT_OP_SUM || op == DT_OP_MEAN) && X.centax && (X.centax & ~rm) == 0) return false;
    int y = new_val(g, rt, r, d);
    DtVal *Y = &g->p->v[y];
    Y->constax = cm;
    if (op == DT_OP_SUM) {
        if (isint(rt)) set_int_range(Y, X.lo < 0 ? X.lo * K : X.lo, X.hi > 0 ? X.hi * K : X.hi);
        else Y->mag = X.mag * sqrt((double)K) * 2;
        Y->exact = isint(rt) && X.exact;
    } else if (op == DT_OP_MEAN) {
        Y->mag = X.mag;
    } else {
        if (isint(rt)) set_int_range(Y, X.lo, X.hi);
        else Y->mag = X.mag;
        Y->exact = X.exact;
    }
    add_stmt(g, op, t, &x, 1, &y, 1);
    return true;
}

static bool g_softmax(Gen *g, int op) {
    int x = pick(g, p_float_rank1, NULL);
    if (x < 0) return false;
    const DtVal X = g->p->v[x];
    char t[DT_TMPL], a[64];
    double m;
    FcDtype dt;
    operand(g, x, 0, 1e4, a, sizeof a, &m, &dt, NULL);
    int ax = g->trailing ? X.rank - 1 : (int)ri(g, 0, X.rank - 1);
    const char *fn = op == DT_OP_SOFTMAX ? "softmax" : "log_softmax";
    if (ax == X.rank - 1 && chance(g, 0.4)) snprintf(t, sizeof t, "%s(%s)", fn, a);
    else if (chance(g, 0.5)) snprintf(t, sizeof t, "%s(%s, axis=%d)", fn, a, chance(g, 0.5) ? ax : ax - X.rank);
    else snprintf(t, sizeof t, "%s(%s, %d)", fn, a, ax);
    int y = new_val(g, X.dt, X.rank, X.d);
    DtVal *Y = &g->p->v[y];
    Y->constax = X.constax;
    Y->mag = op == DT_OP_SOFTMAX ? 1 : 2 * m + log((double)X.d[ax]) + 1;
    if (op == DT_OP_SOFTMAX && g->cfg->train) Y->centax = 1u << ax;   /* sums to 1 along ax */
    add_stmt(g, op, t, &x, 1, &y, 1);
    return true;
}

typedef struct ShapeCtx { int rank; const int64_t *d; } ShapeCtx;
static bool p_float_shape(const DtVal *v, const void *c) {
    const ShapeCtx *s = c;
    if (!isf(v->dt) || v->rank != s->rank) return false;
    for (int i = 0; i < s->rank; i++) if (v->d[i] != s->d[i]) return false;
    return true;
}

static bool g_norm(Gen *g, int op) {
    int x = pick(g, p_float_rank1, NULL);
    if (x < 0) return false;
    const DtVal X = g->p->v[x];
    int na = X.rank >= 2 && chance(g, 0.3) ? 2 : 1;
    if (na == 2 && X.rank >= 3 && chance(g, 0.2)) na = 3;
    int64_t nd[DT_MAXRANK], nn = 1;
    for (int i = 0; i < na; i++) {
        int a = X.rank - na + i;
        nd[i] = X.d[a];
        nn *= nd[i];
        if (op == DT_OP_LAYERNORM && (X.constax >> a & 1)) return false;
    }
    /* training: a norm over too few elements is a sign function whose derivative is eps /
     * (...)^1.5, rounding noise (rmsnorm over 1 element, layernorm over 2: y = +-1) */
    if (g->cfg->train && nn < (op == DT_OP_LAYERNORM ? 3 : 2)) return false;
    /* any graph: a layernorm over 2 elements is +-g / sqrt(1 + eps / delta^2), exactly
     * antisymmetric but for the rounding of the mean; a later norm (rmsnorm, layernorm) that
     * undoes the scale leaves only that rounding (seed 9106 graph 90: 1.7e-5 in f32), which the
     * per-statement noise cannot see */
    if (op == DT_OP_LAYERNORM && nn == 2) return false;
    char axt[64], t[DT_TMPL], gb[160] = "", eps[48] = "";
    if (na == 1) {
        int k = (int)ri(g, 0, 2);
        if (k == 0) axt[0] = 0;
        else snprintf(axt, sizeof axt, ", axis=%d", k == 1 ? -1 : X.rank - 1);
    } else {
        size_t k = (size_t)snprintf(axt, sizeof axt, ", axis=[");
        bool neg = chance(g, 0.5);
        for (int i = 0; i < na; i++) k += (size_t)snprintf(axt + k, sizeof axt - k, "%s%d", i ? ", " : "", neg ? i - na : X.rank - na + i);
        snprintf(axt + k, sizeof axt - k, "]");
    }
    ShapeCtx sc = {na, nd};
    int ops[3] = {x, -1, -1}, nops = 1;
    double gm = 1, bm = 0;
    bool const_gain = true;
    int ngb = op == DT_OP_LAYERNORM ? (int)ri(g, 0, 2) : (int)ri(g, 0, 1);
    for (int i = 0; i < ngb; i++) {
        int p = chance(g, 0.8) ? pick(g, p_float_shape, &sc) : -1;
        char sh[64];
        fmt_shape(sh, sizeof sh, na, nd);
        size_t l = strlen(gb);
        if (p >= 0 && p != x && g->p->v[p].mag < 100) {
            snprintf(gb + l, sizeof gb - l, ", {%d}", nops);
            ops[nops++] = p;
            if (i == 0) gm = g->p->v[p].mag; else bm = g->p->v[p].mag;
            if (i == 0) const_gain = false;
        } else {
            snprintf(gb + l, sizeof gb - l, ", full(%s, %s)", sh, i == 0 ? "1.5" : "-0.25");
            if (i == 0) gm = 1.5; else bm = 0.25;
        }
    }
    if (chance(g, 0.4)) snprintf(eps, sizeof eps, ", eps=%s", chance(g, 0.5) ? "1e-5" : "0.01");
    snprintf(t, sizeof t, "%s({0}%s%s%s)", op == DT_OP_LAYERNORM ? "layernorm" : "rmsnorm", gb, axt, eps);
    int y = new_val(g, X.dt, X.rank, X.d);
    DtVal *Y = &g->p->v[y];
    int64_t N = 1;
    for (int i = 0; i < na; i++) N *= nd[i];
    Y->mag = sqrt((double)N) * gm + bm;
    if (op == DT_OP_LAYERNORM && const_gain && ngb < 2)
        for (int i = 0; i < na; i++) Y->centax |= 1u << (X.rank - na + i);
    add_stmt(g, op, t, ops, nops, &y, 1);
    return true;
}

static bool g_causal(Gen *g) {
    int x = pick(g, p_float_rank2, NULL);
    if (x < 0) return false;
    const DtVal X = g->p->v[x];
    int64_t tq = X.d[X.rank - 2], tk = X.d[X.rank - 1];
    char t[DT_TMPL];
    double mag = X.mag;
    bool sm = tq <= tk && chance(g, 0.6);
    if (sm) {
        snprintf(t, sizeof t, chance(g, 0.5) ? "softmax(causal_mask({0}))" : "softmax(causal_mask({0}, value=-inf), axis=-1)");
        mag = 1;
    } else {
        static const char *vals[] = {"-100.0", "0.0", "-1e4", "2.5"};
        static const double vm[] = {100, 0, 1e4, 2.5};
        int k = (int)ri(g, 0, 3);
        if (X.dt == FC_F16 && k == 2) k = 0;
        snprintf(t, sizeof t, "causal_mask({0}, %s)", vals[k]);
        mag = fmax(mag, vm[k]);
    }
    int y = new_val(g, X.dt, X.rank, X.d);
    g->p->v[y].mag = mag;
    g->p->v[y].exact = X.exact && !sm;
    add_stmt(g, DT_OP_CAUSAL_MASK, t, &x, 1, &y, 1);
    return true;
}

static bool allowed(const Gen *g, int op) { return !g->cfg->exclude[op]; }

/* A value for attention's k or v made from x (q for k, k for v) when the pool has none of the
 * shape: x with the axis `from_end` from the last sliced (k: a key length of its own, v: a head
 * size of its own) or tanh of it (other values of the same shape); -1 where neither op may be
 * generated or the program is full. Without it most attentions were attention(q, q, q). */
static int att_derive(Gen *g, int x, int from_end) {
    DtProg *p = g->p;
    if (p->ns + 1 >= DT_MAXS || p->nv + 1 >= DT_MAXV - DT_MAXRES - 1) return -1;
    const DtVal X = p->v[x];
    int ax = X.rank - from_end;
    int64_t len = X.d[ax], d[DT_MAXRANK];
    memcpy(d, X.d, sizeof d);
    char t[DT_TMPL];
    bool slice = allowed(g, DT_OP_SLICE) && len > 1 && (chance(g, 0.6) || !allowed(g, DT_OP_TANH));
    if (!slice && !allowed(g, DT_OP_TANH)) return -1;
    if (slice) {
        int64_t st = ri(g, 0, len - 1), en = ri(g, st + 1, len);
        snprintf(t, sizeof t, "slice({0}, %d, %lld, %lld)", -from_end, (long long)st, (long long)en);
        d[ax] = en - st;
    } else {
        snprintf(t, sizeof t, "tanh({0})");
    }
    int y = new_val(g, X.dt, X.rank, d);
    DtVal *Y = &p->v[y];
    Y->mag = slice ? X.mag : fmin(X.mag, 1.0);
    Y->exact = slice && X.exact;
    Y->constax = X.constax;
    add_stmt(g, slice ? DT_OP_SLICE : DT_OP_TANH, t, &x, 1, &y, 1);
    return y;
}

/* attention: k and v from the pool where shapes allow, else made from q (att_derive), else q */
typedef struct AttCtx { const DtVal *q; int which; int64_t tk; } AttCtx;
static bool p_att(const DtVal *v, const void *c) {
    const AttCtx *a = c;
    if (!isf(v->dt) || v->rank != a->q->rank || v->mag > 4) return false;
    int r = v->rank;
    for (int i = 0; i < r - 2; i++)
        if (v->d[i] != a->q->d[i] && v->d[i] != 1 && a->q->d[i] != 1) return false;
    if (a->which == 1) return v->d[r - 1] == a->q->d[r - 1];
    return v->d[r - 2] == a->tk;
}
static bool g_attention(Gen *g) {
    int q = pick(g, p_float_rank2, NULL);
    if (q < 0) return false;
    const DtVal Q = g->p->v[q];
    if (Q.mag > 4) return false;
    AttCtx ac = {&Q, 1, 0};
    int ns0 = g->p->ns;   /* a failure drops the statements att_derive made (the caller their values) */
    int k = chance(g, 0.5) ? pick(g, p_att, &ac) : -1;
    if (k < 0 && chance(g, 0.7)) k = att_derive(g, q, 2);
    if (k < 0) k = q;
    const DtVal K = g->p->v[k];
    ac.which = 2;
    ac.tk = K.d[K.rank - 2];
    int v = chance(g, 0.5) ? pick(g, p_att, &ac) : -1;
    if (v < 0 && chance(g, 0.7)) v = att_derive(g, k, 1);
    if (v < 0) v = k;
    const DtVal V = g->p->v[v];
    int r = Q.rank;
    DtVal o = {.rank = r};
    for (int i = 0; i < r - 2; i++) {
        int64_t m = Q.d[i];
        if (K.d[i] > m) m = K.d[i];
        if (V.d[i] > m) m = V.d[i];
        if ((Q.d[i] != m && Q.d[i] != 1) || (K.d[i] != m && K.d[i] != 1) || (V.d[i] != m && V.d[i] != 1)) {
            g->p->ns = ns0;
            return false;
        }
        o.d[i] = m;
    }
    o.d[r - 2] = Q.d[r - 2];
    o.d[r - 1] = V.d[r - 1];
    DtVal sc = o;
    sc.d[r - 1] = K.d[r - 2];
    if (too_big(&o) || too_big(&sc)) {
        g->p->ns = ns0;
        return false;
    }
    bool causal = chance(g, 0.5) && Q.d[r - 2] <= K.d[r - 2];
    char t[DT_TMPL];
    const char *scale = chance(g, 0.3) ? ", scale=0.5" : "";
    snprintf(t, sizeof t, "attention({0}, {1}, {2}%s%s)", causal ? (chance(g, 0.5) ? ", causal=true" : ", true") : (chance(g, 0.2) ? ", causal=false" : ""), scale);
    FcDtype rt = promote(promote(Q.dt, K.dt), V.dt);
    int ops[3] = {q, k, v};
    int y = new_val(g, rt, o.rank, o.d);
    g->p->v[y].mag = V.mag;
    add_stmt(g, DT_OP_ATTENTION, t, ops, 3, &y, 1);
    return true;
}

static bool g_reshape(Gen *g) {
    int x = pick(g, p_any, NULL);
    if (x < 0) return false;
    const DtVal X = g->p->v[x];
    /* a centred value's centring axes do not survive a reshape (which axes of the result hold a
     * whole normalized row?), so a later sum over them could not be refused (seed 908, graph 138
     * of the generator before this rule: layernorm, reshape, sum over the row) */
    if (X.centax) return false;
    int64_t n = numel(&X), d[DT_MAXRANK];
    int r = (int)ri(g, 1, 4);
    int64_t rest = n;
    for (int i = 0; i < r - 1; i++) {
        /* a random divisor of rest */
        int64_t divs[64];
        int nd = 0;
        for (int64_t k = 1; k <= rest && nd < 64; k++) if (rest % k == 0) divs[nd++] = k;
        d[i] = divs[ri(g, 0, nd - 1)];
        rest /= d[i];
    }
    d[r - 1] = rest;
    /* shuffle so the remainder is not always last */
    for (int i = r - 1; i > 0; i--) { int j = (int)ri(g, 0, i); int64_t tmp = d[i]; d[i] = d[j]; d[j] = tmp; }
    char t[DT_TMPL], sh[96];
    int neg = chance(g, 0.4) ? (int)ri(g, 0, r - 1) : -1;
    size_t k = (size_t)snprintf(sh, sizeof sh, "[");
    for (int i = 0; i < r; i++) k += (size_t)snprintf(sh + k, sizeof sh - k, "%s%lld", i ? ", " : "", i == neg ? -1LL : (long long)d[i]);
    snprintf(sh + k, sizeof sh - k, "]");
    if (r == 1 && neg < 0 && chance(g, 0.3)) snprintf(t, sizeof t, "reshape({0}, %lld)", (long long)d[0]);
    else snprintf(t, sizeof t, "reshape({0}, %s)", sh);
    int y = new_val(g, X.dt, r, d);
    DtVal *Y = &g->p->v[y];
    Y->mag = X.mag; Y->lo = X.lo; Y->hi = X.hi; Y->exact = X.exact;
    Y->constax = X.constax ? (1u << r) - 1 : 0;
    add_stmt(g, DT_OP_RESHAPE, t, &x, 1, &y, 1);
    return true;
}

static bool g_transpose(Gen *g) {
    int x = pick(g, p_rank1, NULL);
    if (x < 0) return false;
    const DtVal X = g->p->v[x];
    int r = X.rank, perm[DT_MAXRANK];
    char t[DT_TMPL];
    if (r >= 2 && (chance(g, 0.3) || (g->trailing && chance(g, 0.8)))) {
        for (int i = 0; i < r; i++) perm[i] = i;
        perm[r - 2] = r - 1; perm[r - 1] = r - 2;
        snprintf(t, sizeof t, "transpose({0})");
    } else {
        for (int i = 0; i < r; i++) perm[i] = i;
        for (int i = r - 1; i > 0; i--) { int j = (int)ri(g, 0, i); int tmp = perm[i]; perm[i] = perm[j]; perm[j] = tmp; }
        size_t k = (size_t)snprintf(t, sizeof t, "transpose({0}, [");
        for (int i = 0; i < r; i++) k += (size_t)snprintf(t + k, sizeof t - k, "%s%d", i ? ", " : "", chance(g, 0.2) ? perm[i] - r : perm[i]);
        snprintf(t + k, sizeof t - k, "])");
    }
    int64_t d[DT_MAXRANK];
    unsigned cm = 0;
    for (int i = 0; i < r; i++) { d[i] = X.d[perm[i]]; if (X.constax >> perm[i] & 1) cm |= 1u << i; }
    int y = new_val(g, X.dt, r, d);
    DtVal *Y = &g->p->v[y];
    Y->mag = X.mag; Y->lo = X.lo; Y->hi = X.hi; Y->exact = X.exact; Y->constax = cm;
    add_stmt(g, DT_OP_TRANSPOSE, t, &x, 1, &y, 1);
    return true;
}

static bool g_broadcast(Gen *g) {
    int x = pick(g, p_any, NULL);
    if (x < 0) return false;
    const DtVal X = g->p->v[x];
    int add = (int)ri(g, 0, DT_MAXRANK - X.rank);
    int r = X.rank + add;
    if (r == 0) return false;
    int64_t d[DT_MAXRANK];
    unsigned cm = 0;
    for (int i = 0; i < r; i++) {
        int xi = i - add;
        if (xi < 0) { d[i] = ri(g, 1, 5); cm |= d[i] > 1 ? 1u << i : 0; }
        else if (X.d[xi] == 1) { d[i] = chance(g, 0.6) ? ri(g, 2, 7) : 1; cm |= d[i] > 1 ? 1u << i : 0; }
        else { d[i] = X.d[xi]; cm |= (X.constax >> xi & 1) << i; }
    }
    DtVal o = {.rank = r};
    memcpy(o.d, d, sizeof d);
    if (too_big(&o)) return false;
    char t[DT_TMPL], sh[96];
    fmt_shape(sh, sizeof sh, r, d);
    snprintf(t, sizeof t, "broadcast({0}, %s)", sh);
    int y = new_val(g, X.dt, r, d);
    DtVal *Y = &g->p->v[y];
    Y->mag = X.mag; Y->lo = X.lo; Y->hi = X.hi; Y->exact = X.exact; Y->constax = cm;
    add_stmt(g, DT_OP_BROADCAST, t, &x, 1, &y, 1);
    return true;
}

typedef struct CatCtx { const DtVal *a; int ax; } CatCtx;
static bool p_cat(const DtVal *v, const void *c) {
    const CatCtx *k = c;
    if (v->dt != k->a->dt || v->rank != k->a->rank) return false;
    for (int i = 0; i < v->rank; i++) if (i != k->ax && v->d[i] != k->a->d[i]) return false;
    return true;
}
static bool g_concat(Gen *g) {
    int a = pick(g, p_rank1, NULL);
    if (a < 0) return false;
    const DtVal A = g->p->v[a];
    int ax = (int)ri(g, 0, A.rank - 1);
    CatCtx cc = {&A, ax};
    int ops[DT_MAXOPS] = {a}, nops = 1;
    int n = (int)ri(g, 2, 3);
    char parts[256] = "{0}";
    int64_t tot = A.d[ax];
    double mag = A.mag;
    bool exact = A.exact;
    int64_t lo = A.lo, hi = A.hi;
    unsigned cm = A.constax;
    for (int i = 1; i < n; i++) {
        int b = pick(g, p_cat, &cc);
        size_t l = strlen(parts);
        if (b < 0 || chance(g, 0.2)) {
            if (isnum(A.dt) && A.dt != FC_BOOL && chance(g, 0.5)) {
                snprintf(parts + l, sizeof parts - l, ", -{0}");
                lo = lo < -hi ? lo : -hi; hi = hi > -A.lo ? hi : -A.lo;
            } else snprintf(parts + l, sizeof parts - l, ", {0}");
            tot += A.d[ax];
            continue;
        }
        const DtVal *B = &g->p->v[b];
        snprintf(parts + l, sizeof parts - l, ", {%d}", nops);
        ops[nops++] = b;
        tot += B->d[ax];
        mag = fmax(mag, B->mag);
        exact = exact && B->exact;
        if (B->lo < lo) lo = B->lo;
        if (B->hi > hi) hi = B->hi;
        cm |= B->constax;
    }
    DtVal o = A;
    o.d[ax] = tot;
    if (too_big(&o)) return false;
    char t[DT_TMPL];
    if (ax == A.rank - 1 && chance(g, 0.3)) snprintf(t, sizeof t, "concat([%s])", parts);
    else snprintf(t, sizeof t, "concat([%s], axis=%d)", parts, chance(g, 0.5) ? ax : ax - A.rank);
    int y = new_val(g, A.dt, o.rank, o.d);
    DtVal *Y = &g->p->v[y];
    Y->mag = mag; Y->exact = exact; Y->lo = lo; Y->hi = hi; Y->constax = cm;
    if (isint(A.dt)) set_int_range(Y, lo, hi);
    add_stmt(g, DT_OP_CONCAT, t, ops, nops, &y, 1);
    return true;
}

static bool g_split(Gen *g) {
    int x = pick(g, p_rank1, NULL);
    if (x < 0) return false;
    const DtVal X = g->p->v[x];
    int ax = -1;
    for (int tries = 0; tries < 8 && ax < 0; tries++) {
        int a = (int)ri(g, 0, X.rank - 1);
        if (X.d[a] >= 2) ax = a;
    }
    if (ax < 0) return false;
    int64_t len = X.d[ax], sz[DT_MAXRES];
    int n = 0;
    char t[DT_TMPL], sec[96];
    /* an even count that divides, or a list */
    int cnts[3], nc = 0;
    for (int c = 2; c <= 4; c++) if (len % c == 0) cnts[nc++] = c;
    if (nc && chance(g, 0.5)) {
        n = cnts[ri(g, 0, nc - 1)];
        for (int i = 0; i < n; i++) sz[i] = len / n;
        snprintf(sec, sizeof sec, "%d", n);
    } else {
        n = (int)ri(g, 2, len < 4 ? len : 4);
        int64_t rest = len;
        for (int i = 0; i < n - 1; i++) { sz[i] = ri(g, 1, rest - (n - 1 - i)); rest -= sz[i]; }
        sz[n - 1] = rest;
        size_t k = (size_t)snprintf(sec, sizeof sec, "[");
        for (int i = 0; i < n; i++) k += (size_t)snprintf(sec + k, sizeof sec - k, "%s%lld", i ? ", " : "", (long long)sz[i]);
        snprintf(sec + k, sizeof sec - k, "]");
    }
    int axv = chance(g, 0.5) ? ax : ax - X.rank;
    if (ax == X.rank - 1 && chance(g, 0.3)) snprintf(t, sizeof t, "split({0}, %s)", sec);
    else if (chance(g, 0.5)) snprintf(t, sizeof t, "split({0}, %s, axis=%d)", sec, axv);
    else snprintf(t, sizeof t, "split({0}, %s, %d)", sec, axv);
    int res[DT_MAXRES];
    for (int i = 0; i < n; i++) {
        int64_t d[DT_MAXRANK];
        memcpy(d, X.d, sizeof d);
        d[ax] = sz[i];
        res[i] = new_val(g, X.dt, X.rank, d);
        DtVal *Y = &g->p->v[res[i]];
        Y->mag = X.mag; Y->lo = X.lo; Y->hi = X.hi; Y->exact = X.exact; Y->constax = X.constax;
    }
    add_stmt(g, DT_OP_SPLIT, t, &x, 1, res, n);
    return true;
}

/* Python's slice.indices count, as ir/shape.c's rule */
static int64_t slice_count(int64_t len, int64_t start, int64_t end, int64_t step) {
    if (step > 0) {
        start = start < 0 ? (start + len < 0 ? 0 : start + len) : (start > len ? len : start);
        end = end < 0 ? (end + len < 0 ? 0 : end + len) : (end > len ? len : end);
        return end > start ? (end - start + step - 1) / step : 0;
    }
    start = start < 0 ? (start + len < 0 ? -1 : start + len) : (start >= len ? len - 1 : start);
    end = end < 0 ? (end + len < 0 ? -1 : end + len) : (end >= len ? len - 1 : end);
    return start > end ? (start - end + (-step) - 1) / (-step) : 0;
}

static bool g_slice(Gen *g) {
    int x = pick(g, p_rank1, NULL);
    if (x < 0) return false;
    const DtVal X = g->p->v[x];
    int ax = (int)ri(g, 0, X.rank - 1);
    int64_t len = X.d[ax];
    static const int steps[] = {1, 1, 1, 2, 3, -1, -2};
    for (int tries = 0; tries < 20; tries++) {
        int64_t step = steps[ri(g, 0, 6)];
        int64_t st = ri(g, -len - 1, len + 1), en = ri(g, -len - 1, len + 1);
        int64_t cnt = slice_count(len, st, en, step);
        if (cnt < 1) continue;
        char t[DT_TMPL];
        int axv = chance(g, 0.5) ? ax : ax - X.rank;
        if (step == 1 && chance(g, 0.5)) snprintf(t, sizeof t, "slice({0}, %d, %lld, %lld)", axv, (long long)st, (long long)en);
        else if (chance(g, 0.5)) snprintf(t, sizeof t, "slice({0}, %d, %lld, %lld, %lld)", axv, (long long)st, (long long)en, (long long)step);
        else snprintf(t, sizeof t, "slice({0}, axis=%d, start=%lld, end=%lld, step=%lld)", axv, (long long)st, (long long)en, (long long)step);
        int64_t d[DT_MAXRANK];
        memcpy(d, X.d, sizeof d);
        d[ax] = cnt;
        int y = new_val(g, X.dt, X.rank, d);
        DtVal *Y = &g->p->v[y];
        Y->mag = X.mag; Y->lo = X.lo; Y->hi = X.hi; Y->exact = X.exact; Y->constax = X.constax;
        add_stmt(g, DT_OP_SLICE, t, &x, 1, &y, 1);
        return true;
    }
    return false;
}

/* a shape for a generator: the shape of an existing value (to combine with it) or a fresh one */
static int gen_shape(Gen *g, int64_t *d) {
    if (g->p->nv && chance(g, 0.7)) {
        const DtVal *v = &g->p->v[ri(g, 0, g->p->nv - 1)];
        if (v->rank >= 1) {
            int r = v->rank;
            memcpy(d, v->d, sizeof(int64_t) * (size_t)r);
            if (chance(g, 0.3)) d[ri(g, 0, r - 1)] = 1;
            return r;
        }
    }
    int r = (int)ri(g, 1, 3);
    for (;;) {
        int64_t n = 1;
        for (int i = 0; i < r; i++) { d[i] = chance(g, 0.2) ? 1 : ri(g, 2, 13); n *= d[i]; }
        if (n <= DT_MAXNUMEL) return r;
    }
}

static bool g_iota(Gen *g) {
    int64_t d[DT_MAXRANK];
    int r = gen_shape(g, d);
    int ax = (int)ri(g, 0, r - 1);
    static const FcDtype dts[] = {FC_I32, FC_I32, FC_I64, FC_F32, FC_F16};
    FcDtype dt = dts[ri(g, 0, 4)];
    char t[DT_TMPL], sh[96];
    fmt_shape(sh, sizeof sh, r, d);
    if (dt == FC_I32 && chance(g, 0.5)) snprintf(t, sizeof t, "iota(%s, %d)", sh, ax);
    else snprintf(t, sizeof t, "iota(%s, axis=%d, dtype=%s)", sh, chance(g, 0.5) ? ax : ax - r, fc_dtype_name(dt));
    int y = new_val(g, dt, r, d);
    DtVal *Y = &g->p->v[y];
    set_int_range(Y, 0, d[ax] - 1);
    if (!isint(dt)) Y->mag = (double)d[ax];
    Y->exact = true;
    for (int i = 0; i < r; i++) if (i != ax && d[i] > 1) Y->constax |= 1u << i;
    add_stmt(g, DT_OP_IOTA, t, NULL, 0, &y, 1);
    return true;
}

static bool g_full(Gen *g) {
    int64_t d[DT_MAXRANK];
    int r = gen_shape(g, d);
    static const FcDtype dts[] = {FC_F32, FC_F32, FC_F16, FC_BF16, FC_F64, FC_I32, FC_BOOL};
    FcDtype dt = dts[ri(g, 0, 6)];
    char t[DT_TMPL], sh[96], val[32];
    fmt_shape(sh, sizeof sh, r, d);
    double v = 0;
    if (dt == FC_BOOL) snprintf(val, sizeof val, chance(g, 0.5) ? "true" : "false");
    else if (isint(dt)) { v = (double)ri(g, -3, 5); snprintf(val, sizeof val, "%d", (int)v); }
    else { v = (double)ri(g, -8, 8) * 0.375 + 0.1; fmt_float(val, sizeof val, v); }
    if (dt == FC_F32 && chance(g, 0.5)) snprintf(t, sizeof t, "full(%s, %s)", sh, val);
    else snprintf(t, sizeof t, "full(%s, %s, dtype=%s)", sh, val, fc_dtype_name(dt));
    int y = new_val(g, dt, r, d);
    DtVal *Y = &g->p->v[y];
    if (dt == FC_BOOL) set_int_range(Y, 0, 1);
    else if (isint(dt)) set_int_range(Y, (int64_t)v, (int64_t)v);
    else Y->mag = fabs(v) + 0.1;
    Y->exact = true;
    for (int i = 0; i < r; i++) if (d[i] > 1) Y->constax |= 1u << i;
    add_stmt(g, DT_OP_FULL, t, NULL, 0, &y, 1);
    return true;
}

/* The ids operand {1} for integer value id that must index n rows: an input (fc_block_random_input
 * keeps an input that feeds a gather, scatter_add or cross_entropy below its rows), a value in
 * range already, or one clamped into [0, n). */
static void ids_operand(Gen *g, int id, int64_t n, char *l, size_t len) {
    DtVal *I = &g->p->v[id];
    if (I->input) {
        int64_t hi = (n < 16 ? n : 16) - 1;
        if (I->hi > hi) set_int_range(I, 0, hi);
        snprintf(l, len, "{1}");
    } else if (I->lo >= 0 && I->hi <= n - 1) {
        snprintf(l, len, "{1}");
    } else {
        snprintf(l, len, "minimum(maximum({1}, 0), %lld)", (long long)(n - 1));
    }
}

static bool g_gather(Gen *g) {
    int tb = pick(g, p_rank1, NULL);
    if (tb < 0) return false;
    const DtVal T = g->p->v[tb];
    int64_t N = T.d[0];
    int id = pick(g, p_int, NULL);
    char t[DT_TMPL];
    int ops[2] = {tb, id};
    DtVal I;
    if (id >= 0 && chance(g, 0.85)) {
        I = g->p->v[id];
        if (I.rank + T.rank - 1 > DT_MAXRANK) return false;
    } else {
        int64_t d[DT_MAXRANK];
        int r = (int)ri(g, 1, DT_MAXRANK - T.rank + 1);
        if (r < 1) return false;
        for (int i = 0; i < r; i++) d[i] = ri(g, 1, 6);
        int ax = (int)ri(g, 0, r - 1);
        if (d[ax] > N) d[ax] = N;
        char sh[96];
        fmt_shape(sh, sizeof sh, r, d);
        snprintf(t, sizeof t, "gather({0}, iota(%s, %d%s))", sh, ax, chance(g, 0.3) ? ", dtype=i64" : "");
        I.rank = r;
        memcpy(I.d, d, sizeof d);
        ops[1] = -1;
    }
    DtVal o = {.rank = I.rank + T.rank - 1};
    for (int i = 0; i < I.rank; i++) o.d[i] = I.d[i];
    for (int i = 1; i < T.rank; i++) o.d[I.rank + i - 1] = T.d[i];
    if (too_big(&o)) return false;
    if (ops[1] >= 0) {   /* only now: ids_operand may narrow an input's range */
        char l[96];
        ids_operand(g, id, N, l, sizeof l);
        snprintf(t, sizeof t, "gather({0}, %s)", l);
    }
    int y = new_val(g, T.dt, o.rank, o.d);
    DtVal *Y = &g->p->v[y];
    Y->mag = T.mag; Y->lo = T.lo; Y->hi = T.hi; Y->exact = T.exact;
    Y->constax = (T.constax || (ops[1] < 0)) ? (1u << o.rank) - 1 : 0;
    add_stmt(g, DT_OP_GATHER, t, ops, ops[1] >= 0 ? 2 : 1, &y, 1);
    return true;
}

/* ---- the training ops ------------------------------------------------------------------------- */
/* dropout's p (0 sometimes, else up to 0.9) and seed (small, or any 64-bit pattern) as text */
static double rand_p(Gen *g) { return chance(g, 0.1) ? 0 : (double)ri(g, 1, 90) / 100.0; }
static void rand_seed(Gen *g, char *b, size_t n) {
    int64_t s = chance(g, 0.5) ? ri(g, -1000, 1000) : (int64_t)rnd(g);
    snprintf(b, n, "%lld", (long long)(s == INT64_MIN ? 0 : s));
}

/* dropout(x, p, seed): exact where x is an exact f32/f64 (one product with the same constant
 * on every path); f16 kept away from overflow */
static bool g_dropout(Gen *g) {
    int x = pick(g, p_float_any, NULL);
    if (x < 0) return false;
    const DtVal X = g->p->v[x];
    double p = rand_p(g), scale = 1 / (1 - p);
    if (X.dt == FC_F16 && X.mag * scale > 1e4) return false;
    char t[DT_TMPL], seed[32], pt[32];
    rand_seed(g, seed, sizeof seed);
    fmt_float(pt, sizeof pt, p);
    snprintf(t, sizeof t, chance(g, 0.5) ? "dropout({0}, %s, seed=%s)" : "dropout({0}, %s, %s)", pt, seed);
    int y = new_val(g, X.dt, X.rank, X.d);
    DtVal *Y = &g->p->v[y];
    Y->mag = X.mag * scale;
    Y->exact = X.exact && wide(X.dt);
    Y->constax = p == 0 ? X.constax : 0;
    add_stmt(g, DT_OP_DROPOUT, t, &x, 1, &y, 1);
    return true;
}

/* dropout_mask(shape, p, seed): bool, exact */
static bool g_dropout_mask(Gen *g) {
    int64_t d[DT_MAXRANK];
    int r = gen_shape(g, d);
    char t[DT_TMPL], sh[96], seed[32], pt[32];
    fmt_shape(sh, sizeof sh, r, d);
    rand_seed(g, seed, sizeof seed);
    fmt_float(pt, sizeof pt, rand_p(g));
    snprintf(t, sizeof t, "dropout_mask(%s, %s, seed=%s)", sh, pt, seed);
    int y = new_val(g, FC_BOOL, r, d);
    DtVal *Y = &g->p->v[y];
    set_int_range(Y, 0, 1);
    Y->exact = true;
    add_stmt(g, DT_OP_DROPOUT_MASK, t, NULL, 0, &y, 1);
    return true;
}

/* an integer value of the shape ctx names */
static bool p_int_shape(const DtVal *v, const void *c) {
    const ShapeCtx *s = c;
    if (!isint(v->dt) || v->rank != s->rank) return false;
    for (int i = 0; i < s->rank; i++) if (v->d[i] != s->d[i]) return false;
    return true;
}

/* cross_entropy(logits, labels): C >= 2 classes and logits scaled to |x| <= 1, so that no row's
 * loss is near 0 (it is at least log(1 + e^-2) then; a loss near 0 is the rounding of
 * log(1 + tiny), all noise); labels
 * an integer value of the leading shape (an input, kept below C by fc_block_random_input; in
 * range already; or clamped), else an iota (clamped) or a constant for one row */
static bool g_cross_entropy(Gen *g) {
    int x = pick(g, p_float_rank1, NULL);
    if (x < 0) return false;
    const DtVal X = g->p->v[x];
    int64_t C = X.d[X.rank - 1];
    if (C < 2) return false;
    ShapeCtx lead = {X.rank - 1, X.d};
    int lab = chance(g, 0.7) ? pick(g, p_int_shape, &lead) : -1;
    char a[64], t[DT_TMPL], l[160];
    double m;
    FcDtype dt;
    operand(g, x, 0, 1.0, a, sizeof a, &m, &dt, NULL);
    int ops[2] = {x, lab};
    if (lab >= 0) {
        ids_operand(g, lab, C, l, sizeof l);
    } else if (X.rank == 1) {
        snprintf(l, sizeof l, "cast(%lld, %s)", (long long)ri(g, 0, C - 1), chance(g, 0.5) ? "i32" : "i64");
    } else {
        char sh[96];
        int ax = (int)ri(g, 0, X.rank - 2);
        fmt_shape(sh, sizeof sh, X.rank - 1, X.d);
        snprintf(l, sizeof l, X.d[ax] > C ? "minimum(iota(%s, %d%s), %lld)" : "iota(%s, %d%s)", sh, ax,
                 chance(g, 0.3) ? ", dtype=i64" : "", (long long)(C - 1));
    }
    snprintf(t, sizeof t, "cross_entropy(%s, %s)", a, l);
    int y = new_val(g, dt, 0, X.d);
    g->p->v[y].mag = 2 * m + log((double)C) + 1;
    add_stmt(g, DT_OP_CROSS_ENTROPY, t, ops, lab >= 0 ? 2 : 1, &y, 1);
    return true;
}

/* scatter_add(src, ids, rows): ids of src's leading shape (an integer value of that shape: an
 * input, kept below rows by fc_block_random_input; in range already; or clamped), else an iota
 * clamped to rows - 1; few rows, so that ids repeat and rows are left empty. A src whose sums
 * are constant over a leading axis (centax) is not taken: the rows redistribute those sums. */
static bool g_scatter_add(Gen *g) {
    int x = pick(g, p_num_rank1, NULL);
    if (x < 0) return false;
    const DtVal S = g->p->v[x];
    int k = (int)ri(g, 1, S.rank);
    if (S.centax & ((1u << k) - 1)) return false;
    int64_t N = ri(g, 1, 6), M = 1;
    for (int i = 0; i < k; i++) M *= S.d[i];
    ShapeCtx lead = {k, S.d};
    int id = chance(g, 0.7) ? pick(g, p_int_shape, &lead) : -1;
    char t[DT_TMPL], l[160];
    int ops[2] = {x, id};
    if (id >= 0) {
        ids_operand(g, id, N, l, sizeof l);
    } else {
        char sh[96];
        fmt_shape(sh, sizeof sh, k, S.d);
        snprintf(l, sizeof l, "minimum(iota(%s, %d%s), %lld)", sh, (int)ri(g, 0, k - 1),
                 chance(g, 0.3) ? ", dtype=i64" : "", (long long)(N - 1));
    }
    snprintf(t, sizeof t, "scatter_add({0}, %s, %lld)", l, (long long)N);
    int64_t d[DT_MAXRANK] = {N};
    for (int i = k; i < S.rank; i++) d[i - k + 1] = S.d[i];
    int y = new_val(g, S.dt, S.rank - k + 1, d);
    DtVal *Y = &g->p->v[y];
    Y->mag = S.mag * (double)M;
    if (isint(S.dt)) set_int_range(Y, S.lo < 0 ? S.lo * M : 0, S.hi > 0 ? S.hi * M : 0);
    Y->exact = isint(S.dt) && S.exact;
    Y->constax = (S.constax >> k) << 1;
    Y->centax = (S.centax >> k) << 1;
    add_stmt(g, DT_OP_SCATTER_ADD, t, ops, id >= 0 ? 2 : 1, &y, 1);
    return true;
}

typedef struct MmCtx { const DtVal *a; } MmCtx;
static bool p_mm(const DtVal *v, const void *c) {
    const DtVal *a = ((const MmCtx *)c)->a;
    if (!isnum(v->dt) || v->rank < 1 || v->mag > 64) return false;
    if (isint(v->dt) != isint(a->dt)) return false;
    int64_t K = a->d[a->rank - 1];
    if (v->rank == 1) return v->d[0] == K;
    if (v->d[v->rank - 2] != K) return false;
    int ra = a->rank - 2, rb = v->rank - 2, r = ra > rb ? ra : rb;
    for (int i = 0; i < r; i++) {
        int ia = ra - r + i, ib = rb - r + i;
        int64_t x = ia >= 0 ? a->d[ia] : 1, y = ib >= 0 ? v->d[ib] : 1;
        if (x != y && x != 1 && y != 1) return false;
    }
    return true;
}
/* Const-along-axis bits of a @ b (b = transpose(a) when bt): a row index is constant where a
 * is constant along its rows, a column index where b is along its columns, a batch axis where
 * both are (or lack it); rank-1 operands give none. (Found as seed 410970772 graph 77: a
 * layernorm over the columns of x @ transpose(x), x constant along its rows, normalized
 * rounding noise.) */
static unsigned mm_const(const DtVal *a, const DtVal *b, bool bt, const DtVal *o) {
    if (a->rank < 2 || b->rank < 2) return 0;
    int r = o->rank;
    unsigned m = 0;
    bool bcols = bt ? (a->constax >> (a->rank - 2) & 1) : (b->constax >> (b->rank - 1) & 1);
    if ((a->constax >> (a->rank - 2) & 1) && o->d[r - 2] > 1) m |= 1u << (r - 2);
    if (bcols && o->d[r - 1] > 1) m |= 1u << (r - 1);
    for (int i = 0; i < r - 2; i++) {
        int ia = a->rank - 2 - (r - 2) + i, ib = b->rank - 2 - (r - 2) + i;
        bool ca = ia < 0 || a->d[ia] == 1 || (a->constax >> ia & 1);
        bool cb = ib < 0 || b->d[ib] == 1 || (b->constax >> ib & 1);
        if (ca && cb && o->d[i] > 1) m |= 1u << i;
    }
    return m;
}

static bool g_matmul(Gen *g) {
    int a = pick(g, p_num_rank1, NULL);
    if (a < 0) return false;
    const DtVal A = g->p->v[a];
    if (A.mag > 64 || (isint(A.dt) && !chance(g, 0.2))) return false;
    MmCtx mc = {&A};
    int b = chance(g, 0.8) ? pick(g, p_mm, &mc) : -1;
    char t[DT_TMPL];
    DtVal B;
    int ops[2] = {a, b}, nops = 2;
    if (b < 0) {
        if (A.rank < 2) return false;
        B = A;
        B.d[A.rank - 2] = A.d[A.rank - 1];
        B.d[A.rank - 1] = A.d[A.rank - 2];
        snprintf(t, sizeof t, chance(g, 0.5) ? "{0} @ transpose({0})" : "matmul({0}, transpose({0}))");
        nops = 1;
    } else {
        B = g->p->v[b];
        snprintf(t, sizeof t, chance(g, 0.8) ? "{0} @ {1}" : "matmul({0}, {1})");
    }
    /* shapes as NumPy matmul */
    DtVal o = {0};
    int64_t K = A.d[A.rank - 1];
    if (A.rank == 1 && B.rank == 1) o.rank = 0;
    else if (A.rank == 1) { o = B; o.d[B.rank - 2] = B.d[B.rank - 1]; o.rank = B.rank - 1; }
    else if (B.rank == 1) { o = A; o.rank = A.rank - 1; }
    else {
        int ra = A.rank - 2, rb = B.rank - 2, r = ra > rb ? ra : rb;
        o.rank = r + 2;
        for (int i = 0; i < r; i++) {
            int ia = ra - r + i, ib = rb - r + i;
            int64_t x = ia >= 0 ? A.d[ia] : 1, y = ib >= 0 ? B.d[ib] : 1;
            o.d[i] = x > y ? x : y;
        }
        o.d[r] = A.d[A.rank - 2];
        o.d[r + 1] = B.d[B.rank - 1];
    }
    if (too_big(&o)) return false;
    FcDtype rt = promote(A.dt, B.dt);
    if (rt == FC_BOOL) return false;
    double mag = A.mag * B.mag * sqrt((double)K) * 2;
    if (isint(rt)) {
        int64_t m = (int64_t)(A.mag * B.mag) * K;
        if (m > (1 << 20)) return false;
    }
    if (rt == FC_F16 && mag > 3e4) return false;
    int y = new_val(g, rt, o.rank, o.d);
    DtVal *Y = &g->p->v[y];
    if (isint(rt)) { int64_t m = (int64_t)(A.mag * B.mag) * K; set_int_range(Y, -m, m); Y->exact = A.exact && B.exact; }
    else Y->mag = mag;
    Y->constax = mm_const(&A, &B, nops == 1, Y);
    add_stmt(g, DT_OP_MATMUL, t, ops, nops, &y, 1);
    return true;
}

/* ---- the row-kernel pattern ------------------------------------------------------------------ */

/* a float value whose last two dims are equal (a transpose keeps its shape) */
static bool p_float_square(const DtVal *v, const void *c) {
    (void)c;
    return isf(v->dt) && v->rank >= 2 && v->d[v->rank - 1] == v->d[v->rank - 2] && v->d[v->rank - 1] > 1;
}

/* One statement maker, with its first operand forced to value v. */
static bool make_forced(Gen *g, int op, int v) {
    int nv0 = g->p->nv, ns0 = g->p->ns;
    g->force = v;
    bool ok = false;
    switch (op) {
    case DT_OP_EXP: case DT_OP_TANH: case DT_OP_SIGMOID: case DT_OP_SILU: case DT_OP_ERF: case DT_OP_NDTR:
    case DT_OP_GELU: case DT_OP_SIN: case DT_OP_LOG: case DT_OP_SQRT: ok = g_unary_float(g, op); break;
    case DT_OP_NEG: case DT_OP_ABS: case DT_OP_SQUARE: case DT_OP_RELU: ok = g_unary_num(g, op); break;
    case DT_OP_ADD: case DT_OP_SUB: case DT_OP_MUL: case DT_OP_MAXIMUM: ok = g_binary(g, op); break;
    case DT_OP_CAST: ok = g_cast(g); break;
    case DT_OP_SUM: case DT_OP_MEAN: case DT_OP_MAX: case DT_OP_MIN: ok = g_reduce(g, op); break;
    case DT_OP_SOFTMAX: case DT_OP_LOG_SOFTMAX: ok = g_softmax(g, op); break;
    case DT_OP_LAYERNORM: case DT_OP_RMSNORM: ok = g_norm(g, op); break;
    case DT_OP_TRANSPOSE: ok = g_transpose(g); break;
    case DT_OP_SLICE: ok = g_slice(g); break;
    case DT_OP_GATHER: ok = g_gather(g); break;
    case DT_OP_RESHAPE: ok = g_reshape(g); break;
    case DT_OP_BROADCAST: ok = g_broadcast(g); break;
    case DT_OP_CONCAT: ok = g_concat(g); break;
    case DT_OP_SPLIT: ok = g_split(g); break;
    default: break;
    }
    g->force = -1;
    if (!ok || g->p->ns == ns0 || g->p->s[g->p->ns - 1].ops[0] != v) {
        g->p->nv = nv0;   /* a failed maker may have made values but no statement */
        g->p->ns = ns0;
        return false;
    }
    return true;
}

/* the first result of the last statement */
static int last_res(const Gen *g) { return g->p->s[g->p->ns - 1].res[0]; }

/* Picks an allowed op from list (n entries); -1 if none. */
static int pick_op(Gen *g, const int *list, int n) {
    int ok[32], k = 0;
    for (int i = 0; i < n && k < 32; i++) if (allowed(g, list[i])) ok[k++] = list[i];
    return k ? ok[ri(g, 0, k - 1)] : -1;
}

/* The pattern that found the row-kernel miscompiles: a reduction or norm over the trailing
 * axes of a float X (one block per row on a GPU, one row loop on the CPU) and, returned beside
 * it, a view (transpose, slice, gather, reshape, broadcast, concat, split) of X, of an
 * elementwise function of X, or of an elementwise function of both: a fused row kernel that
 * stages that value must not let the view read another row's element. Sometimes X is first cast
 * to bf16/f16 (16-bit chains), sometimes the reduction is left dead (no output reaches it).
 * Every step is made by the ordinary statement makers (their conditioning rules hold), steered
 * by Gen.force/trailing/cast_to. Up to 5 statements; all or nothing. */
static bool g_rowview(Gen *g) {
    DtProg *p = g->p;
    if (p->nv + 5 * DT_MAXRES + 2 >= DT_MAXV || p->ns + 5 > DT_MAXS) return false;
    int x = chance(g, 0.85) ? pick(g, p_float_square, NULL) : -1;
    if (x < 0 && chance(g, 0.85)) x = pick(g, p_float_rank2, NULL);
    if (x < 0) x = pick(g, p_float_rank1, NULL);
    if (x < 0) return false;
    int ns0 = p->ns, nv0 = p->nv;
    bool ok = true;
    /* a 16-bit chain */
    if (chance(g, 0.25) && allowed(g, DT_OP_CAST) && p->v[x].dt != FC_F16 && p->v[x].dt != FC_BF16) {
        g->cast_to = chance(g, 0.5) ? FC_BF16 : FC_F16;
        ok = make_forced(g, DT_OP_CAST, x);
        g->cast_to = -1;
        if (ok) x = last_res(g);
    }
    /* f = an elementwise function of x (or x itself) */
    /* mostly transcendental: a value costly enough that a row kernel stages it, not recomputes it */
    static const int fops[] = {DT_OP_TANH, DT_OP_TANH, DT_OP_EXP, DT_OP_EXP, DT_OP_SIGMOID, DT_OP_ERF, DT_OP_SILU,
                               DT_OP_GELU, DT_OP_SIN, DT_OP_SQUARE, DT_OP_MUL, DT_OP_ADD};
    int f = x;
    if (ok && chance(g, 0.1) && allowed(g, DT_OP_CAST)) {
        /* a dtype change between the row's value and its view: cast(x, f64) (or to f32) */
        g->cast_to = p->v[x].dt == FC_F64 ? FC_F32 : FC_F64;
        if (make_forced(g, DT_OP_CAST, x)) f = last_res(g);
        g->cast_to = -1;
    } else if (ok && chance(g, 0.9)) {
        int op = pick_op(g, fops, (int)(sizeof fops / sizeof fops[0]));
        if (op >= 0 && make_forced(g, op, x)) f = last_res(g);
    }
    /* r = a reduction or norm over the trailing axes of f or x */
    static const int rops[] = {DT_OP_SUM, DT_OP_MEAN, DT_OP_MAX, DT_OP_SOFTMAX, DT_OP_SOFTMAX, DT_OP_LOG_SOFTMAX,
                               DT_OP_LAYERNORM, DT_OP_LAYERNORM, DT_OP_RMSNORM};
    int r = -1;
    if (ok) {
        int op = pick_op(g, rops, (int)(sizeof rops / sizeof rops[0]));
        g->trailing = true;
        ok = op >= 0 && make_forced(g, op, chance(g, 0.8) ? f : x);
        g->trailing = false;
        if (ok) r = last_res(g);
    }
    /* w = a view of x, of f, or of an elementwise function of both */
    int src = chance(g, 0.4) ? f : x;
    if (ok && chance(g, 0.7)) {
        static const int eops[] = {DT_OP_ADD, DT_OP_MUL, DT_OP_SQUARE, DT_OP_EXP, DT_OP_SUB, DT_OP_NEG, DT_OP_TANH};
        int op = pick_op(g, eops, (int)(sizeof eops / sizeof eops[0]));
        /* the binary ops take f and (often) x: pick()'s chains favour the latest values */
        if (op >= 0 && make_forced(g, op, f)) src = last_res(g);
    }
    static const int vops[] = {DT_OP_TRANSPOSE, DT_OP_TRANSPOSE, DT_OP_TRANSPOSE, DT_OP_TRANSPOSE, DT_OP_TRANSPOSE,
                               DT_OP_SLICE, DT_OP_SLICE, DT_OP_GATHER, DT_OP_GATHER, DT_OP_RESHAPE, DT_OP_BROADCAST,
                               DT_OP_CONCAT, DT_OP_SPLIT};
    int w = -1;
    if (ok) {
        int op = pick_op(g, vops, (int)(sizeof vops / sizeof vops[0]));
        g->trailing = true;   /* a transpose swaps the last two axes (mostly): the shape stays when square */
        ok = op >= 0 && make_forced(g, op, src);
        g->trailing = false;
        if (ok) {
            const DtStmt *s = &p->s[p->ns - 1];
            w = s->res[ri(g, 0, s->nres - 1)];
        }
    }
    if (!ok) {
        p->ns = ns0;
        p->nv = nv0;
        return false;
    }
    /* return the view; the reduction too, unless it is left dead */
    const int cap = (int)(sizeof g->want_out / sizeof g->want_out[0]);
    if (g->nwant + 2 > cap) {   /* keep the latest */
        memmove(g->want_out, g->want_out + 2, sizeof g->want_out[0] * (size_t)(cap - 2));
        g->nwant = cap - 2;
    }
    p->nrowview++;
    if (chance(g, 0.8)) g->want_out[g->nwant++] = r;
    g->want_out[g->nwant++] = w;
    return true;
}

/* ---- ties (training programs) ----------------------------------------------------------------- */
#define DT_TIES (DT_OP_COUNT + 1)   /* its entry in dt_generate's weights */
static bool p_exact_float(const DtVal *v, const void *c) { (void)c; return v->exact && isf(v->dt) && v->mag < 1e4; }
static bool p_bcast_exact_float(const DtVal *v, const void *c) { return isf(v->dt) && p_bcast_exact(v, c) && v->mag < 1e4; }

/* x quantized: cast(cast(x, Q), back) with Q a narrow float (f8 mostly: many equal elements),
 * back x's dtype where it is f32/f64, else f32. Exact when x is. -1 if not made. */
static int quantized(Gen *g, int x) {
    static const FcDtype qs[] = {FC_F8E4M3, FC_F8E4M3, FC_F8E4M3, FC_F8E5M2, FC_F8E5M2, FC_BF16, FC_BF16, FC_F16};
    FcDtype back = wide(g->p->v[x].dt) ? g->p->v[x].dt : FC_F32;
    g->cast_to = qs[ri(g, 0, 7)];
    bool ok = make_forced(g, DT_OP_CAST, x);
    int q = ok ? last_res(g) : -1;
    g->cast_to = back;
    ok = ok && make_forced(g, DT_OP_CAST, q);
    g->cast_to = -1;
    return ok ? last_res(g) : -1;
}

/* Ties: maximum/minimum of a quantized exact float with another one, with a literal on the
 * grid of every narrow float (0.5, 1.0, 0.75, 1.5 and their negatives) or with its own transpose,
 * or max/min over axes of it. All or nothing. */
static bool g_ties(Gen *g) {
    DtProg *p = g->p;
    if (p->nv + 8 >= DT_MAXV || p->ns + 5 > DT_MAXS || !allowed(g, DT_OP_CAST)) return false;
    int x = pick(g, p_exact_float, NULL);
    if (x < 0) return false;
    int ns0 = p->ns, nv0 = p->nv;
    int q = quantized(g, x), y = -1;
    bool red = q >= 0 && p->v[q].rank >= 1 && chance(g, 0.55);
    int rop = chance(g, 0.6) ? DT_OP_MAX : DT_OP_MIN, bop = chance(g, 0.6) ? DT_OP_MAXIMUM : DT_OP_MINIMUM;
    if (red && allowed(g, rop)) {
        if (make_forced(g, rop, q)) y = last_res(g);
    } else if (q >= 0 && allowed(g, bop)) {
        const DtVal Q = p->v[q];
        int ops[2] = {q, -1}, nops = 1, k = (int)ri(g, 0, 9);
        char t[DT_TMPL], lit[32];
        DtVal o = Q;
        bool square = Q.rank >= 2 && Q.d[Q.rank - 1] == Q.d[Q.rank - 2];
        if (k < 5) {
            int x2 = pick(g, p_bcast_exact_float, &Q);
            int q2 = x2 >= 0 ? quantized(g, x2) : -1;
            if (q2 >= 0 && bcast(&Q, &p->v[q2], &o) && !too_big(&o)) {
                ops[nops++] = q2;
                snprintf(t, sizeof t, "%s({0}, {1})", dt_op_names[bop]);
            } else k = 5;
        }
        if (k >= 5 && k < 7 && square) {
            snprintf(t, sizeof t, "%s({0}, transpose({0}))", dt_op_names[bop]);
        } else if (k >= 5) {
            static const double lits[] = {0.5, 1.0, 0.75, 1.5, -0.5, -1.0, -0.75, -1.5};
            fmt_float(lit, sizeof lit, lits[ri(g, 0, 7)]);
            /* both operand orders: on a tie each side gets half */
            if (chance(g, 0.5)) snprintf(t, sizeof t, "%s({0}, %s)", dt_op_names[bop], lit);
            else snprintf(t, sizeof t, "%s(%s, {0})", dt_op_names[bop], lit);
        }
        y = new_val(g, Q.dt == FC_F64 || (nops > 1 && p->v[ops[1]].dt == FC_F64) ? FC_F64 : Q.dt, o.rank, o.d);
        DtVal *Y = &p->v[y];
        Y->mag = Q.mag;
        Y->exact = true;
        /* constant axes: an operand's (a superset is safe: it only keeps norms off them; seed
         * 20261124 graph 2949, a layernorm over an axis of maximum(q, q') with q a broadcast) */
        unsigned cm = 0;
        for (int i = 0; i < o.rank; i++)
            for (int j = 0; j < nops; j++) {
                const DtVal *v = &p->v[ops[j]];
                int ia = v->rank - o.rank + i;
                if (ia >= 0 && (v->constax >> ia & 1) && o.d[i] > 1) cm |= 1u << i;
            }
        if (strstr(t, "transpose(") && (cm >> (o.rank - 1) & 1 || cm >> (o.rank - 2) & 1))
            cm |= 3u << (o.rank - 2);
        Y->constax = cm;
        add_stmt(g, bop, t, ops, nops, &y, 1);
    }
    if (y < 0) {
        p->ns = ns0;
        p->nv = nv0;
        return false;
    }
    p->nties++;
    const int cap = (int)(sizeof g->want_out / sizeof g->want_out[0]);
    if (g->nwant + 1 > cap) {
        memmove(g->want_out, g->want_out + 1, sizeof g->want_out[0] * (size_t)(cap - 1));
        g->nwant = cap - 1;
    }
    g->want_out[g->nwant++] = y;
    return true;
}

/* ---- i8 (weight-only quantization) ---------------------------------------------------------- */
#define DT_I8 (DT_OP_COUNT + 2)   /* its entry in dt_generate's weights */

/* One cast statement, so that i8 values meet only casts and index maps (docs/language.md):
 * - an i8 value (an input, or a float quantized by an earlier one) dequantized: cast to f32, f16
 *   or bf16, sometimes of its flattened view, sometimes times a power of two (the scale: exact);
 * - an exact float (a float-to-int cast must not see rounding differences) quantized:
 *   cast(x [* 2^k], i8), saturating where x 2^k leaves [-128, 127], kept as an i8 value (returned
 *   as an i8 output, or dequantized later) or cast straight back to float. */
static bool g_i8(Gen *g, bool dequant) {
    DtProg *p = g->p;
    char t[DT_TMPL], lit[32];
    int q = dequant || chance(g, 0.6) ? pick(g, p_i8, NULL) : -1;
    if (dequant && q < 0) return false;
    if (q >= 0) {
        const DtVal Q = p->v[q];
        static const FcDtype to[] = {FC_F32, FC_F32, FC_F16, FC_BF16};
        FcDtype dt = to[ri(g, 0, 3)];
        bool flat = Q.rank >= 2 && chance(g, 0.3);
        int e = chance(g, 0.5) ? (int)ri(g, 1, 7) : 0;
        fmt_float(lit, sizeof lit, ldexp(1.0, -e));
        snprintf(t, sizeof t, "cast(%s, %s)%s%s", flat ? "reshape({0}, [-1])" : "{0}", fc_dtype_name(dt), e ? " * " : "",
                 e ? lit : "");
        int64_t n = numel(&Q);
        int y = new_val(g, dt, flat ? 1 : Q.rank, flat ? &n : Q.d);
        DtVal *Y = &p->v[y];
        Y->constax = flat ? 0 : Q.constax;
        Y->exact = Q.exact;
        Y->mag = ldexp(fmax(fabs((double)Q.lo), fabs((double)Q.hi)), -e);
        if (Y->mag == 0) Y->mag = 1;
        add_stmt(g, DT_OP_CAST, t, &q, 1, &y, 1);
        return true;
    }
    int x = pick(g, p_exact_float, NULL);
    if (x < 0) return false;
    const DtVal X = p->v[x];
    int e = wide(X.dt) ? (int)ri(g, 0, 6) : 0;   /* 2^6: mostly saturating */
    fmt_float(lit, sizeof lit, ldexp(1.0, e));
    double m = ldexp(X.mag, e) + 1;
    int64_t lo = m >= 128 ? -128 : -(int64_t)m, hi = m >= 127 ? 127 : (int64_t)m;
    bool back = chance(g, 0.5);
    snprintf(t, sizeof t, "%scast({0}%s%s, i8)%s", back ? "cast(" : "", e ? " * " : "", e ? lit : "", back ? ", f32)" : "");
    int y = new_val(g, back ? FC_F32 : FC_I8, X.rank, X.d);
    DtVal *Y = &p->v[y];
    Y->constax = X.constax;
    Y->exact = true;
    set_int_range(Y, lo, hi);
    if (Y->mag == 0) Y->mag = 1;
    add_stmt(g, DT_OP_CAST, t, &x, 1, &y, 1);
    return true;
}

/* ---- the program ---------------------------------------------------------------------------- */
static FcDtype rand_dtype(Gen *g) {
    int k = (int)ri(g, 0, 99);
    if (k < 52) return FC_F32;
    if (k < 60) return FC_F64;
    if (k < 72) return FC_F16;
    if (k < 84) return FC_BF16;
    if (k < 95) return FC_I32;
    return FC_BOOL;
}

static int rand_dim(Gen *g) { return chance(g, 0.18) ? 1 : (int)ri(g, 2, 13); }

static void make_inputs(Gen *g) {
    DtProg *p = g->p;
    int64_t base[DT_MAXRANK];
    int br;
    static const int rw[] = {0, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4};
    for (;;) {
        br = rw[ri(g, 0, 12)];
        if (chance(g, 0.04)) br = 0;
        int64_t n = 1;
        for (int i = 0; i < br; i++) { base[i] = rand_dim(g); n *= base[i]; }
        if (n <= DT_MAXNUMEL) break;
    }
    /* square trailing dims (N, N) often: a transpose then keeps the shape, so its result can
     * meet the untransposed value in one elementwise kernel or one row kernel */
    if (br >= 2 && chance(g, 0.4)) {
        if (base[br - 2] == 1) base[br - 2] = ri(g, 2, 13);
        base[br - 1] = base[br - 2];
        int64_t n = 1;
        for (int i = 0; i < br; i++) n *= base[i];
        if (n > DT_MAXNUMEL) base[0] = 1;
    }
    int nin = (int)ri(g, 1, 4);
    bool anyfloat = false;
    for (int i = 0; i < nin; i++) {
        int64_t d[DT_MAXRANK];
        int r = br;
        memcpy(d, base, sizeof d);
        int k = i == 0 ? 0 : (int)ri(g, 0, 9);
        if (k >= 4 && k < 6 && br > 0) {            /* a suffix of the base shape */
            int drop = (int)ri(g, 1, br);
            r = br - drop;
            memmove(d, base + drop, sizeof(int64_t) * (size_t)r);
        } else if (k >= 6 && k < 8) {                /* base with some dims set to 1 */
            for (int j = 0; j < r; j++) if (chance(g, 0.5)) d[j] = 1;
        } else if (k >= 8) {                         /* an unrelated shape */
            for (;;) {
                r = (int)ri(g, 0, 4);
                int64_t n = 1;
                for (int j = 0; j < r; j++) { d[j] = rand_dim(g); n *= d[j]; }
                if (n <= DT_MAXNUMEL) break;
            }
        }
        FcDtype dt = rand_dtype(g);
        if (i == nin - 1 && !anyfloat && !isf(dt)) dt = FC_F32;
        if (isf(dt)) anyfloat = true;
        int v = new_val(g, dt, r, d);
        DtVal *X = &p->v[v];
        X->input = true;
        X->exact = true;
        X->mag = 4;
        if (isint(dt)) set_int_range(X, 0, 15);
        if (dt == FC_BOOL) set_int_range(X, 0, 1);
        X->param = g->cfg->train && isf(dt) && r >= 1 && chance(g, 0.3);
        p->in[p->nin++] = v;
    }
    /* a quantized weight sometimes: an i8 input (a param half the time), not the first input,
     * of the base shape or a suffix of it; g_i8 dequantizes it */
    if (chance(g, 0.2) && !g->cfg->exclude[DT_OP_CAST]) {
        int drop = br > 0 && chance(g, 0.4) ? (int)ri(g, 1, br) : 0;
        int v = new_val(g, FC_I8, br - drop, base + drop);
        DtVal *X = &p->v[v];
        X->input = true;
        X->exact = true;
        set_int_range(X, -127, 127);
        X->param = chance(g, 0.5);
        p->in[p->nin++] = v;
    }
}

/* ---- repeats ----------------------------------------------------------------------------- */
#define DT_REPEAT (DT_OP_COUNT + 3)   /* its entry in dt_generate's weights */

/* An earlier statement made again on the same operands: one value computed twice, which
 * pass_cse merges in the fused program (docs/passes.md) and the eager program computes twice,
 * so later statements and the outputs read either copy (two outputs may then be one value in
 * the fused program). Statements with several results (split) are not repeated. */
static bool g_repeat(Gen *g) {
    DtProg *p = g->p;
    if (p->ns == 0 || p->nv + 1 >= DT_MAXV || p->ns + 1 > DT_MAXS) return false;
    DtStmt s = p->s[ri(g, 0, p->ns - 1)];   /* a copy: add_stmt writes into p->s */
    if (s.nres != 1) return false;
    int y = new_val(g, FC_F32, 0, NULL);
    p->v[y] = p->v[s.res[0]];
    p->v[y].input = p->v[y].param = false;
    add_stmt(g, s.op, s.tmpl, s.ops, s.nops, &y, 1);
    p->nrepeat++;
    return true;
}

void dt_generate(DtProg *p, uint64_t seed, const DtGenConfig *cfg) {
    memset(p, 0, sizeof *p);
    Gen g = {dt_mix(seed ^ 0x5EEDF00Dull), p, cfg, .force = -1, .cast_to = -1};
    make_inputs(&g);
    /* an i8 input is dequantized first, mostly (nothing else may read it) */
    for (int i = 0; i < p->nin; i++)
        if (p->v[p->in[i]].dt == FC_I8 && chance(&g, 0.8)) {
            g.force = p->in[i];
            g_i8(&g, true);
        }
    int want = (int)ri(&g, cfg->min_stmts, cfg->max_stmts);
    /* op weights: elementwise most, everything present */
    static const struct { int op; int w; } W[] = {
        {DT_OP_NEG, 2}, {DT_OP_ABS, 2}, {DT_OP_EXP, 3}, {DT_OP_LOG, 2}, {DT_OP_SQRT, 2}, {DT_OP_RSQRT, 2},
        {DT_OP_RECIP, 2}, {DT_OP_SQUARE, 2}, {DT_OP_TANH, 3}, {DT_OP_SIGMOID, 2}, {DT_OP_RELU, 2},
        {DT_OP_SILU, 2}, {DT_OP_ERF, 2}, {DT_OP_NDTR, 2}, {DT_OP_SIN, 2}, {DT_OP_COS, 2}, {DT_OP_GELU, 3}, {DT_OP_ADD, 8},
        {DT_OP_SUB, 5}, {DT_OP_MUL, 7}, {DT_OP_DIV, 3}, {DT_OP_POW, 2}, {DT_OP_MAXIMUM, 2}, {DT_OP_MINIMUM, 2},
        {DT_OP_CMP, 4}, {DT_OP_WHERE, 4}, {DT_OP_CAST, 4}, {DT_OP_SUM, 4}, {DT_OP_MEAN, 3}, {DT_OP_MAX, 3},
        {DT_OP_MIN, 2}, {DT_OP_SOFTMAX, 3}, {DT_OP_LOG_SOFTMAX, 2}, {DT_OP_LAYERNORM, 3}, {DT_OP_RMSNORM, 3},
        {DT_OP_CAUSAL_MASK, 2}, {DT_OP_ATTENTION, 3}, {DT_OP_RESHAPE, 4}, {DT_OP_TRANSPOSE, 4},
        {DT_OP_BROADCAST, 3}, {DT_OP_CONCAT, 3}, {DT_OP_SPLIT, 3}, {DT_OP_SLICE, 4}, {DT_OP_IOTA, 2},
        {DT_OP_FULL, 1}, {DT_OP_GATHER, 3}, {DT_OP_SCATTER_ADD, 2}, {DT_OP_MATMUL, 5}, {DT_OP_DROPOUT, 2}, {DT_OP_DROPOUT_MASK, 1},
        {DT_OP_CROSS_ENTROPY, 2},
        {DT_OP_COUNT, 14},  /* g_rowview: a row reduction with a view returned beside it */
        {DT_TIES, 8},       /* g_ties, training programs only */
        {DT_I8, 3},         /* g_i8: quantization to i8 and dequantization */
        {DT_REPEAT, 4},     /* g_repeat: an earlier statement again (what pass_cse merges) */
    };
    int nw = (int)(sizeof W / sizeof W[0]), total = 0;
#define EXCLUDED(op) (((op) < DT_OP_COUNT && cfg->exclude[op]) || ((op) == DT_TIES && !cfg->train) || \
                      ((op) == DT_I8 && cfg->exclude[DT_OP_CAST]))
    for (int i = 0; i < nw; i++) if (!EXCLUDED(W[i].op)) total += W[i].w;
    int tries = 0;
    while (p->ns < want && tries < 400 && total > 0 && p->nv < DT_MAXV - DT_MAXRES - 1 && p->ns < DT_MAXS) {
        tries++;
        int k = (int)ri(&g, 0, total - 1), op = -1;
        for (int i = 0; i < nw; i++) {
            if (EXCLUDED(W[i].op)) continue;
            if (k < W[i].w) { op = W[i].op; break; }
            k -= W[i].w;
        }
        int nv0 = p->nv;
        bool ok = false;
        switch (op) {
        case DT_OP_EXP: case DT_OP_LOG: case DT_OP_SQRT: case DT_OP_RSQRT: case DT_OP_RECIP: case DT_OP_TANH:
        case DT_OP_SIGMOID: case DT_OP_SILU: case DT_OP_ERF: case DT_OP_NDTR: case DT_OP_SIN: case DT_OP_COS:
        case DT_OP_GELU: ok = g_unary_float(&g, op); break;
        case DT_OP_NEG: case DT_OP_ABS: case DT_OP_SQUARE: case DT_OP_RELU: ok = g_unary_num(&g, op); break;
        case DT_OP_ADD: case DT_OP_SUB: case DT_OP_MUL: case DT_OP_DIV: case DT_OP_POW: case DT_OP_MAXIMUM:
        case DT_OP_MINIMUM: ok = g_binary(&g, op); break;
        case DT_OP_CMP: ok = g_compare(&g); break;
        case DT_OP_WHERE: ok = g_where(&g); break;
        case DT_OP_CAST: ok = g_cast(&g); break;
        case DT_OP_SUM: case DT_OP_MEAN: case DT_OP_MAX: case DT_OP_MIN: ok = g_reduce(&g, op); break;
        case DT_OP_SOFTMAX: case DT_OP_LOG_SOFTMAX: ok = g_softmax(&g, op); break;
        case DT_OP_LAYERNORM: case DT_OP_RMSNORM: ok = g_norm(&g, op); break;
        case DT_OP_CAUSAL_MASK: ok = g_causal(&g); break;
        case DT_OP_ATTENTION: ok = g_attention(&g); break;
        case DT_OP_RESHAPE: ok = g_reshape(&g); break;
        case DT_OP_TRANSPOSE: ok = g_transpose(&g); break;
        case DT_OP_BROADCAST: ok = g_broadcast(&g); break;
        case DT_OP_CONCAT: ok = g_concat(&g); break;
        case DT_OP_SPLIT: ok = g_split(&g); break;
        case DT_OP_SLICE: ok = g_slice(&g); break;
        case DT_OP_IOTA: ok = g_iota(&g); break;
        case DT_OP_FULL: ok = g_full(&g); break;
        case DT_OP_GATHER: ok = g_gather(&g); break;
        case DT_OP_SCATTER_ADD: ok = g_scatter_add(&g); break;
        case DT_OP_MATMUL: ok = g_matmul(&g); break;
        case DT_OP_DROPOUT: ok = g_dropout(&g); break;
        case DT_OP_DROPOUT_MASK: ok = g_dropout_mask(&g); break;
        case DT_OP_CROSS_ENTROPY: ok = g_cross_entropy(&g); break;
        case DT_OP_COUNT: ok = g_rowview(&g); break;
        case DT_TIES: ok = g_ties(&g); break;
        case DT_I8: ok = g_i8(&g, false); break;
        case DT_REPEAT: ok = g_repeat(&g); break;
        default: break;
        }
        if (!ok) p->nv = nv0;   /* a failed attempt may have made no statement; drop its values */
    }
    if (p->ns == 0) {
        /* every op excluded or none applicable: a plain copy keeps the program valid */
        int x = p->in[0];
        int y = new_val(&g, p->v[x].dt, p->v[x].rank, p->v[x].d);
        p->v[y] = p->v[x];
        p->v[y].input = false;
        add_stmt(&g, DT_OP_RESHAPE, p->v[x].rank ? "reshape({0}, [-1])" : "reshape({0}, [1])", &x, 1, &y, 1);
        p->v[y].rank = 1;
        p->v[y].d[0] = 1;
        for (int i = 0; i < p->v[x].rank; i++) p->v[y].d[0] *= p->v[x].d[i];
    }
#undef EXCLUDED
    /* outputs: the last statement's first result; what g_rowview asked for (the latest
     * first: a view and the reduction beside it); then up to two more statement results
     * (multi-output groups are where fusion bugs hide) */
    /* training: rg[v], v is a float value that depends on a float input (a gradient reaches
     * it); the outputs are such values where there are some */
    bool rg[DT_MAXV] = {0}, anyrg = false;
    for (int i = 0; cfg->train && i < p->nin; i++) rg[p->in[i]] = isf(p->v[p->in[i]].dt);
    for (int i = 0; cfg->train && i < p->ns; i++) {
        bool any = false;
        for (int k = 0; k < p->s[i].nops; k++) any |= rg[p->s[i].ops[k]];
        for (int r = 0; r < p->s[i].nres; r++) anyrg |= rg[p->s[i].res[r]] = any && isf(p->v[p->s[i].res[r]].dt);
    }
#define OUT_OK(v) (!anyrg || rg[v])
    const DtStmt *last = &p->s[p->ns - 1];
    int first = last->res[0];
    for (int i = p->ns - 1; i >= 0 && !OUT_OK(first); i--) first = p->s[i].res[0];
    for (int i = p->ns - 1; i >= 0 && !OUT_OK(first); i--)
        for (int r = 0; r < p->s[i].nres; r++) if (rg[p->s[i].res[r]]) first = p->s[i].res[r];
    p->out[p->nout++] = first;
    int cap = 1 + (int)ri(&g, 0, DT_MAXOUT - 1);
    if (cap < 2 && chance(&g, 0.5)) cap = 2;
    for (int i = g.nwant - 1; i >= 0 && p->nout < cap; i--) {
        bool dup = false;
        for (int j = 0; j < p->nout; j++) dup |= p->out[j] == g.want_out[i];
        if (!dup && OUT_OK(g.want_out[i])) p->out[p->nout++] = g.want_out[i];
    }
    for (int k = 0; k < 3 * DT_MAXOUT && p->nout < cap; k++) {
        const DtStmt *s = &p->s[ri(&g, 0, p->ns - 1)];
        int v = s->res[ri(&g, 0, s->nres - 1)];
        bool dup = false;
        for (int j = 0; j < p->nout; j++) dup |= p->out[j] == v;
        if (!dup && OUT_OK(v)) p->out[p->nout++] = v;
    }
#undef OUT_OK
}

/* ---- rendering -------------------------------------------------------------------------------- */
typedef struct Buf { char *p; size_t len, cap; } Buf;
static void bput(Buf *b, const char *fmt, ...) {
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if (b->p && b->len + (size_t)n < b->cap) { b->len += (size_t)n; return; }
        size_t nc = (b->cap ? b->cap * 2 : 1024) + (size_t)n;
        char *q = realloc(b->p, nc);
        if (!q) return;
        b->p = q;
        b->cap = nc;
    }
}

static void vname(const DtProg *p, int v, char *buf, size_t n) {
    snprintf(buf, n, "%s%d", p->v[v].input ? "x" : "v", v);
}

static void type_text(const DtVal *v, char *buf, size_t n) {
    size_t k = (size_t)snprintf(buf, n, "%s[", fc_dtype_name(v->dt));
    for (int i = 0; i < v->rank && k < n; i++) k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)v->d[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

/* The noise line after a statement result (see dt_render_noisy). */
static void noise_line(Buf *b, const DtProg *p, int v, uint64_t seed, const char *dst, const char *src) {
    const DtVal *x = &p->v[v];
    if (!isf(x->dt) || (x->exact && !dst)) return;
    double u = x->dt == FC_F64 ? ldexp(1, -53) : x->dt == FC_F32 ? ldexp(1, -24) : x->dt == FC_F16 ? ldexp(1, -11)
             : x->dt == FC_BF16 ? ldexp(1, -8) : x->dt == FC_F8E4M3 ? ldexp(1, -4) : ldexp(1, -3);
    double delta = wide(x->dt) ? 4 * u : 2 * u;
    char nm[16], dl[32], ph[32];
    snprintf(nm, sizeof nm, "v%d", v);
    fmt_float(dl, sizeof dl, delta);
    fmt_float(ph, sizeof ph, (double)(dt_mix(seed + (uint64_t)v) % 1000) * 0.00631);
    bput(b, "    %s = %s * (1.0 + %s * cast(sin(%s", dst ? dst : nm, src ? src : nm, dl, ph);
    static const double co[DT_MAXRANK] = {1.37, 2.71, 0.91, 3.33};
    char sh[128];
    fmt_shape(sh, sizeof sh, x->rank, x->d);
    for (int a = 0; a < x->rank; a++) bput(b, " + iota(%s, axis=%d, dtype=f32) * %g", sh, a, co[a] + (double)(seed % 7) * 0.1);
    bput(b, "), %s))\n", fc_dtype_name(x->dt));
}

static bool accumulates(int op) {
    return op == DT_OP_SUM || op == DT_OP_MEAN || op == DT_OP_MATMUL || op == DT_OP_SOFTMAX || op == DT_OP_LOG_SOFTMAX ||
           op == DT_OP_LAYERNORM || op == DT_OP_RMSNORM || op == DT_OP_ATTENTION || op == DT_OP_CAUSAL_MASK ||
           op == DT_OP_CROSS_ENTROPY || op == DT_OP_SCATTER_ADD;
}

static char *render(const DtProg *p, const char *header, bool noisy, uint64_t seed);
char *dt_render(const DtProg *p, const char *header) { return render(p, header, false, 0); }
char *dt_render_noisy(const DtProg *p, uint64_t seed) { return render(p, NULL, true, seed); }

static char *render(const DtProg *p, const char *header, bool noisy, uint64_t seed) {
    Buf b = {0};
    if (header) bput(&b, "%s", header);
    bput(&b, "block g(");
    for (int i = 0; i < p->nin; i++) {
        char nm[16], ty[96];
        vname(p, p->in[i], nm, sizeof nm);
        type_text(&p->v[p->in[i]], ty, sizeof ty);
        bput(&b, "%s%s%s: %s", i ? ", " : "", p->v[p->in[i]].param ? "param " : "", nm, ty);
    }
    bput(&b, ") {\n");
    for (int i = 0; i < p->ns; i++) {
        const DtStmt *s = &p->s[i];
        /* noise on the exact float operands of an op that accumulates: its summation order
         * differs between paths */
        for (int k = 0; noisy && accumulates(s->op) && k < s->nops; k++) {
            if (!isf(p->v[s->ops[k]].dt) || !p->v[s->ops[k]].exact) continue;
            char dst[32], src[32];
            snprintf(dst, sizeof dst, "n%d_%d", i, k);
            vname(p, s->ops[k], src, sizeof src);
            noise_line(&b, p, s->ops[k], seed ^ (uint64_t)(i * 31 + k), dst, src);
        }
        bput(&b, "    ");
        for (int r = 0; r < s->nres; r++) {
            char nm[16];
            vname(p, s->res[r], nm, sizeof nm);
            bput(&b, "%s%s", r ? ", " : "", nm);
        }
        bput(&b, " = ");
        for (const char *c = s->tmpl; *c; c++) {
            if (*c == '{') {
                int k = atoi(c + 1);
                char nm[24];
                vname(p, s->ops[k], nm, sizeof nm);
                if (noisy && accumulates(s->op) && isf(p->v[s->ops[k]].dt) && p->v[s->ops[k]].exact)
                    snprintf(nm, sizeof nm, "n%d_%d", i, k);
                bput(&b, "%s", nm);
                c = strchr(c, '}');
            } else {
                bput(&b, "%c", *c);
            }
        }
        bput(&b, "\n");
        for (int r = 0; noisy && r < s->nres; r++) noise_line(&b, p, s->res[r], seed, NULL, NULL);
    }
    bput(&b, "    return ");
    for (int i = 0; i < p->nout; i++) {
        char nm[16];
        vname(p, p->out[i], nm, sizeof nm);
        bput(&b, "%s%s", i ? ", " : "", nm);
    }
    bput(&b, "\n}\n");
    return b.p;
}
