/* test_interp_grad.c: the gradient oracle (rt_interp_grad, runtime/interp_grad.c) against
 * central finite differences of the forward, and its tie, edge and error rules by hand.
 *
 * The check (grad_error): for a graph with f64 float inputs filled with fresh random data (never
 * 0; kinks and ties kept at least 0.015 away unless a test is about them), random weights w_j
 * per float output define the scalar L = sum_j sum(out_j * w_j). rt_interp_grad with
 * grad_outputs = w gives dL/dx for every float input; each element of each float input is then
 * moved by +-h, h = 1e-6 |x| (the step actually taken, (x+h) - (x-h), is used), and
 *     fd = (L(x+h) - L(x-h)) / (2h)
 * with L summed in long double. Per input the error is max|grad - fd| / max|fd| (the
 * max-normalized metric of docs/tolerances.md; an input whose gradient is tiny or zero is
 * normalized by 1e-3 of the largest gradient of the graph instead) and must be <= FD_BOUND.
 *
 * Why FD_BOUND = 1e-6: the truncation error of the central difference is h^2 |f'''| / 6, about
 * 1e-13 for these O(1) smooth functions at h = 1e-6; the rounding error is that of L, a few
 * units of 2^-53 times the sum of |terms| (forward ops in f64, L in long double), divided by
 * 2h and by the gradient's size: about 1e-16 * 100 / 2e-6 = 5e-9 for an O(1) gradient, more
 * where an input's gradients are small (attention's projections in llama_layer, erf' near
 * x = 2.5). Measured: 7e-9 at the default seed, at most 2e-7 over 500 other seeds; 1e-6 leaves
 * a factor of 5 over that worst case. Any wrong rule (a missing factor, a wrong sign, a
 * broadcast not summed back, the other gelu form, a 1e-4 slip in one element) is at least 1e-4
 * off and is caught: test_harness_fails shows that the check does fail on such gradients.
 * IGRAD_VERBOSE=1 prints every case above 1e-8.
 *
 * Every op of ops.def appears in some graph (the final loop checks the table add() fills);
 * multi-op graphs come from .tf source through the frontend (an inline GPT-2 MLP and the
 * examples/ programs in f64 with small dims). dropout and cross_entropy are built as IR (the
 * frontend refuses them) and checked against the oracle's own forward where interp.c refuses
 * them. Seed: IGRAD_SEED (environment) or a fixed default, printed on failure.
 */
#include "frontend.h"
#include "host.h"
#include "interp.h"
#include "interp_priv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ir_build.h"

enum { MAXIN = 32 };
static const double FD_BOUND = 1e-6;

static bool covered[IR_OP_COUNT];
static IrGraph *g;
static uint64_t rng_state = 0x1d2a3b4c5e6f7081ull, seed0;
static double worst_seen;
static int cases_checked;
static long elements_checked;

/* ---- random data -------------------------------------------------------------------------- */
static uint64_t rnd64(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double unif(double lo, double hi) { return lo + (hi - lo) * ((double)(rnd64() >> 11) * 0x1p-53); }
static double sign(void) { return rnd64() & 1 ? 1.0 : -1.0; }

/* How an input is filled. */
typedef enum Gen {
    G_SIGNED,  /* +-[0.2, 1.2] */
    G_POS,     /* [0.3, 1.5]: log, sqrt, pow's base */
    G_WIDE,    /* +-[0.1, 2.5]: gelu, erf, tanh ... over their curved range (not yet flat) */
    G_GRID_A,  /* distinct values on a 0.1 grid, offset 0.025, jitter +-0.01 (max/min, ties) */
    G_GRID_B,  /* the same grid offset 0.075: never within 0.03 of a G_GRID_A value */
    G_IDS,     /* integers in [0, hi) */
    G_BOOL,    /* 0 or 1 */
} Gen;
static Gen gen_of[MAXIN];
static int64_t hi_of[MAXIN];

static void fill(Gen gen, int64_t hi, double *x, int64_t n) {
    if (gen == G_GRID_A || gen == G_GRID_B) {
        for (int64_t i = 0; i < n; i++) x[i] = (double)i;
        for (int64_t i = n - 1; i > 0; i--) { /* a random permutation of the grid points */
            int64_t j = (int64_t)(rnd64() % (uint64_t)(i + 1));
            double t = x[i];
            x[i] = x[j], x[j] = t;
        }
        for (int64_t i = 0; i < n; i++)
            x[i] = (x[i] - (double)(n / 2)) * 0.1 + (gen == G_GRID_A ? 0.025 : 0.075) + unif(-0.01, 0.01);
        return;
    }
    for (int64_t i = 0; i < n; i++) switch (gen) {
        case G_SIGNED: x[i] = sign() * unif(0.2, 1.2); break;
        case G_POS: x[i] = unif(0.3, 1.5); break;
        case G_WIDE: x[i] = sign() * unif(0.1, 2.5); break;
        case G_IDS: x[i] = (double)(rnd64() % (uint64_t)hi); break;
        case G_BOOL: x[i] = (double)(rnd64() & 1); break;
        default: x[i] = 0; break;
        }
}

/* ---- graph building ---------------------------------------------------------------------------- */
#define INS(...) (const int[]){__VA_ARGS__}, (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int))
static const IrShape SCALAR = {0};

static void new_graph(void) {
    ir_graph_free(g);
    g = ir_graph_new("t", "t.tf");
    REQUIRE(g);
}
static int input_gen(FcDtype t, IrShape s, Gen gen, int64_t hi) {
    REQUIRE(g->inputs.len < MAXIN);
    gen_of[g->inputs.len] = gen;
    hi_of[g->inputs.len] = hi;
    int v = ir_add_input(g, NULL, t, &s, false);
    REQUIRE(v >= 0);
    return v;
}
static int input(IrShape s, Gen gen) { return input_gen(FC_F64, s, gen, 0); }
static int add(IrOp op, const int *ins, int nin, IrAttrs a) {
    FcErr err = {0};
    int out = -1;
    FcStatus st = ir_add_node(g, op, ins, nin, &a, (IrLoc){3, 7}, -1, op, &out, &err);
    if (st != FC_OK) fprintf(stderr, "ir_add_node(%s): %s\n", ir_ops[op].name, err.msg);
    REQUIRE(st == FC_OK);
    covered[op] = true;
    return out;
}
static int add1(IrOp op, int x) { return add(op, INS(x), (IrAttrs){0}); }
static int add2(IrOp op, int x, int y) { return add(op, INS(x, y), (IrAttrs){0}); }
static void output(int v) {
    FcErr err = {0};
    REQUIRE(ir_add_output(g, v, NULL, &err) == FC_OK);
}
static int64_t numel_of(int v) {
    int64_t n;
    REQUIRE(ir_shape_numel(&ir_cval(g, v)->shape, &n));
    return n;
}
static FcDtype in_dtype(int i) { return ir_cval(g, g->inputs.data[i])->dtype; }
static FcDtype out_dtype(int j) { return ir_cval(g, g->outputs.data[j])->dtype; }

/* Compiles .tf source (dims overridden) into g; every input filled with gen. */
static void graph_from_source(const char *name, const char *src, const FeDimBinding *dims, int ndims, Gen gen) {
    ir_graph_free(g);
    g = NULL;
    FeOptions fo = {.dims = dims, .ndims = ndims};
    StrBuf diags = {0};
    FcErr err = {0};
    FcStatus st = fe_compile(src, strlen(src), name, &fo, &g, &diags, &err);
    if (st != FC_OK) fprintf(stderr, "%s: %s\n%s", name, err.msg, diags.data ? diags.data : "");
    sb_free(&diags);
    REQUIRE(st == FC_OK && g);
    REQUIRE(g->inputs.len <= MAXIN);
    for (int i = 0; i < g->inputs.len; i++) gen_of[i] = gen;
    for (int k = 0; k < g->nodes.len; k++) covered[g->nodes.data[k].op] = true;
}

/* ---- running ----------------------------------------------------------------------------------- */
/* Input i's bytes in its dtype from doubles (an f64 input is its data itself). */
static void *pack(int i, double *x) {
    FcDtype t = in_dtype(i);
    if (t == FC_F64) return x;
    int64_t n = numel_of(g->inputs.data[i]);
    void *b = malloc((size_t)n * fc_dtype_size(t) + 1);
    REQUIRE(b);
    for (int64_t e = 0; e < n; e++) rt_host_store(t, b, e, x[e]);
    return b;
}

/* Output buffers for g (freed by free_outputs). */
static void **new_outputs(void) {
    void **ob = calloc((size_t)g->outputs.len + 1, sizeof *ob);
    REQUIRE(ob);
    for (int j = 0; j < g->outputs.len; j++) {
        ob[j] = malloc((size_t)numel_of(g->outputs.data[j]) * fc_dtype_size(out_dtype(j)) + 1);
        REQUIRE(ob[j]);
    }
    return ob;
}
static void free_outputs(void **ob) {
    for (int j = 0; j < g->outputs.len; j++) free(ob[j]);
    free(ob);
}

/* L = sum_j sum(out_j * w_j) over the float outputs; the forward is rt_interp_run, or the
 * oracle's own where interp.c refuses an op (dropout, cross_entropy). */
static long double scalar_of(void *const *ins, const double *const *w, void **ob) {
    FcErr err = {0};
    FcStatus st = rt_interp_run(g, (const void *const *)ins, ob, &err);
    if (st == FC_ERR_UNSUPPORTED) st = rt_interp_grad(g, (const void *const *)ins, ob, NULL, NULL, &err);
    EXPECT(st == FC_OK, "forward: %s", err.msg);
    long double L = 0;
    for (int j = 0; j < g->outputs.len; j++) {
        if (!w[j]) continue;
        int64_t n = numel_of(g->outputs.data[j]);
        for (int64_t e = 0; e < n; e++) L += (long double)rt_host_load(out_dtype(j), ob[j], e) * w[j][e];
    }
    return L;
}

/* Changes the analytic gradient before the comparison (test_harness_fails). */
typedef void (*Corrupt)(void *const *ins, const double *const *w, double *const *ga);

/* The worst per-input error of rt_interp_grad against central differences (see the top). */
static double grad_error(const char *name, Corrupt corrupt) {
    int ni = g->inputs.len, no = g->outputs.len;
    double *x[MAXIN] = {0}, *ga[MAXIN] = {0}, *fd[MAXIN] = {0}, *w[MAXIN] = {0};
    void *ins[MAXIN] = {0};
    REQUIRE(no <= MAXIN);
    for (int i = 0; i < ni; i++) {
        int64_t n = numel_of(g->inputs.data[i]);
        x[i] = malloc(sizeof(double) * (size_t)n);
        REQUIRE(x[i]);
        fill(gen_of[i], hi_of[i], x[i], n);
        ins[i] = pack(i, x[i]);
        if (ir_dtype_is_float(in_dtype(i))) {
            REQUIRE(in_dtype(i) == FC_F64);
            ga[i] = malloc(sizeof(double) * (size_t)n);
            fd[i] = malloc(sizeof(double) * (size_t)n);
            REQUIRE(ga[i] && fd[i]);
            for (int64_t e = 0; e < n; e++) ga[i][e] = NAN;
        }
    }
    for (int j = 0; j < no; j++) {
        if (!ir_dtype_is_float(out_dtype(j))) continue;
        int64_t n = numel_of(g->outputs.data[j]);
        w[j] = malloc(sizeof(double) * (size_t)n);
        REQUIRE(w[j]);
        for (int64_t e = 0; e < n; e++) w[j][e] = sign() * unif(0.5, 1.5);
    }
    FcErr err = {0};
    FcStatus st = rt_interp_grad(g, (const void *const *)ins, NULL, (const double *const *)w, ga, &err);
    EXPECT(st == FC_OK, "%s: rt_interp_grad: %s", name, err.msg);
    if (corrupt) corrupt(ins, (const double *const *)w, ga);
    void **ob = new_outputs();
    double global = 0;
    for (int i = 0; i < ni; i++) {
        if (!ga[i]) continue;
        int64_t n = numel_of(g->inputs.data[i]);
        for (int64_t e = 0; e < n; e++) {
            double x0 = x[i][e], h = 1e-6 * fabs(x0);
            double xp = x0 + h, xm = x0 - h;
            x[i][e] = xp;
            long double Lp = scalar_of(ins, (const double *const *)w, ob);
            x[i][e] = xm;
            long double Lm = scalar_of(ins, (const double *const *)w, ob);
            x[i][e] = x0;
            fd[i][e] = (double)((Lp - Lm) / (long double)(xp - xm));
            global = fmax(global, fabs(fd[i][e]));
            elements_checked++;
        }
    }
    double worst = 0;
    for (int i = 0; i < ni; i++) {
        if (!ga[i]) continue;
        int64_t n = numel_of(g->inputs.data[i]), at = 0;
        double num = 0, den = 0;
        for (int64_t e = 0; e < n; e++) {
            double d = fabs(ga[i][e] - fd[i][e]);
            if (!(d <= num)) num = d, at = e; /* NaN counts as the worst */
            den = fmax(den, fabs(fd[i][e]));
        }
        double rel = num / fmax(den, 1e-3 * global);
        if (!(global > 0)) rel = num == 0 ? 0 : INFINITY; /* no gradient at all (all dropped) */
        if (isnan(num)) rel = INFINITY;
        if ((rel > FD_BOUND || (getenv("IGRAD_VERBOSE") && rel > 5e-8)) && !corrupt)
            fprintf(stderr, "%s: input %d element %lld: grad %.17g, finite differences %.17g (rel %.3g)\n", name, i,
                    (long long)at, ga[i][at], fd[i][at], rel);
        worst = fmax(worst, rel);
    }
    free_outputs(ob);
    for (int i = 0; i < ni; i++) {
        if (ins[i] != x[i]) free(ins[i]);
        free(x[i]), free(ga[i]), free(fd[i]);
    }
    for (int j = 0; j < no; j++) free(w[j]);
    return worst;
}

static void check_grad(const char *name) {
    double e = grad_error(name, NULL);
    EXPECT(e <= FD_BOUND, "%s: gradient off finite differences by %.3g (bound %g, IGRAD_SEED=%llu)", name, e,
           FD_BOUND, (unsigned long long)seed0);
    if (e <= FD_BOUND) worst_seen = fmax(worst_seen, e);
    if (getenv("IGRAD_VERBOSE") && e > 1e-8) fprintf(stderr, "  %s: %.3g\n", name, e);
    cases_checked++;
}

/* ---- elementwise ---------------------------------------------------------------------------------- */
static void test_unary(void) {
    static const struct { IrOp op; Gen gen; } ops[] = {
        {IR_OP_NEG, G_SIGNED},  {IR_OP_ABS, G_SIGNED},    {IR_OP_EXP, G_SIGNED},   {IR_OP_LOG, G_POS},
        {IR_OP_SQRT, G_POS},    {IR_OP_RSQRT, G_POS},     {IR_OP_RECIP, G_SIGNED}, {IR_OP_SQUARE, G_SIGNED},
        {IR_OP_TANH, G_WIDE},   {IR_OP_SIGMOID, G_WIDE},  {IR_OP_RELU, G_SIGNED},  {IR_OP_SILU, G_WIDE},
        {IR_OP_ERF, G_WIDE},    {IR_OP_NDTR, G_WIDE},     {IR_OP_SIN, G_WIDE},     {IR_OP_COS, G_WIDE},
    };
    const IrShape shapes[] = {SH(3, 5), SH(7), SCALAR, SH(2, 1, 3)};
    for (size_t c = 0; c < sizeof ops / sizeof ops[0]; c++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            new_graph();
            int x = input(shapes[s], ops[c].gen);
            output(add1(ops[c].op, x));
            char name[64];
            snprintf(name, sizeof name, "%s shape %zu", ir_ops[ops[c].op].name, s);
            check_grad(name);
        }
    /* gelu, both forms, and a chain of unary ops on one value */
    for (int approx = 0; approx < 2; approx++) {
        new_graph();
        int x = input(SH(4, 5), G_WIDE);
        output(add(IR_OP_GELU, INS(x), (IrAttrs){.i = {approx}}));
        check_grad(approx ? "gelu tanh" : "gelu");
    }
    new_graph();
    int x = input(SH(6), G_POS);
    output(add1(IR_OP_SIN, add1(IR_OP_LOG, add1(IR_OP_SQRT, add1(IR_OP_EXP, x)))));
    check_grad("sin(log(sqrt(exp x)))");
}

static void test_binary(void) {
    static const struct { IrOp op; Gen ga, gb; } ops[] = {
        {IR_OP_ADD, G_SIGNED, G_SIGNED}, {IR_OP_SUB, G_SIGNED, G_SIGNED},  {IR_OP_MUL, G_SIGNED, G_SIGNED},
        {IR_OP_DIV, G_SIGNED, G_SIGNED}, {IR_OP_POW, G_POS, G_SIGNED},     {IR_OP_MAXIMUM, G_GRID_A, G_GRID_B},
        {IR_OP_MINIMUM, G_GRID_A, G_GRID_B},
    };
    /* same shapes, both broadcast, a scalar, a size-1 dim against a missing one */
    const IrShape sa[] = {SH(2, 3), SH(2, 1, 3), SH(3, 4), SCALAR, SH(5, 1)};
    const IrShape sb[] = {SH(2, 3), SH(4, 1), SCALAR, SH(2, 3), SH(4, 1, 3)};
    for (size_t c = 0; c < sizeof ops / sizeof ops[0]; c++)
        for (size_t s = 0; s < sizeof sa / sizeof sa[0]; s++) {
            new_graph();
            int a = input(sa[s], ops[c].ga), b = input(sb[s], ops[c].gb);
            output(add2(ops[c].op, a, b));
            char name[64];
            snprintf(name, sizeof name, "%s shapes %zu", ir_ops[ops[c].op].name, s);
            check_grad(name);
        }
    /* one value read twice: both terms add up */
    static const IrOp twice[] = {IR_OP_MUL, IR_OP_DIV, IR_OP_POW, IR_OP_SUB};
    for (size_t c = 0; c < sizeof twice / sizeof twice[0]; c++) {
        new_graph();
        int a = input(SH(5), G_POS), b = input(SH(5), G_POS);
        output(add2(IR_OP_ADD, add2(twice[c], a, a), b));
        check_grad(ir_ops[twice[c]].name);
    }
}

static void test_where_compare_cast(void) {
    /* where with a broadcast condition and broadcast data; none to the condition */
    new_graph();
    int c = input_gen(FC_BOOL, SH(2, 1, 3), G_BOOL, 0), a = input(SH(4, 1), G_SIGNED), b = input(SH(3), G_SIGNED);
    output(add(IR_OP_WHERE, INS(c, a, b), (IrAttrs){0}));
    check_grad("where broadcast");
    /* comparisons choose, but carry nothing: where(cmp(a, b), a * 2, b * b) */
    static const IrOp cmps[] = {IR_OP_LT, IR_OP_LE, IR_OP_GT, IR_OP_GE, IR_OP_EQ, IR_OP_NE};
    for (size_t k = 0; k < sizeof cmps / sizeof cmps[0]; k++) {
        new_graph();
        int x = input(SH(3, 4), G_GRID_A), y = input(SH(4), G_GRID_B);
        int cond = add2(cmps[k], x, y);
        output(add(IR_OP_WHERE, INS(cond, add2(IR_OP_MUL, x, x), add1(IR_OP_SQUARE, y)), (IrAttrs){0}));
        output(cond); /* a bool output: no gradient, no weight */
        check_grad(ir_ops[cmps[k]].name);
    }
    /* float -> float casts pass through inside a graph (f64 -> f64 through a cast to f64 of an
     * f64 value is the only FD-exact one; the others are checked exactly below) */
    new_graph();
    int x = input(SH(2, 3), G_SIGNED);
    output(add1(IR_OP_TANH, add(IR_OP_CAST, INS(x), (IrAttrs){.dtype = FC_F64})));
    check_grad("cast f64 -> f64");
}

/* Casts, exactly: f64 -> f32 -> f64 passes w; a detour through i32 carries nothing; a
 * grad_outputs entry for an integer output is ignored. */
static void test_cast_exact(void) {
    new_graph();
    int x = input(SH(3), G_SIGNED);
    int f32v = add(IR_OP_CAST, INS(x), (IrAttrs){.dtype = FC_F32});
    int back = add(IR_OP_CAST, INS(f32v), (IrAttrs){.dtype = FC_F64});
    int viaint = add(IR_OP_CAST, INS(add(IR_OP_CAST, INS(x), (IrAttrs){.dtype = FC_I32})), (IrAttrs){.dtype = FC_F64});
    output(back);
    output(viaint);
    output(add(IR_OP_CAST, INS(x), (IrAttrs){.dtype = FC_I64}));
    output(f32v);
    double xv[3] = {1.25, -2.75, 0.3}, gx[3];
    const double w0[3] = {0.5, -1, 2}, w1[3] = {7, 7, 7}, w2[3] = {NAN, NAN, NAN}, w3[3] = {1, 2, 3};
    const double *gw[] = {w0, w1, w2, w3};
    double *gi[] = {gx};
    void *ob[4];
    for (int j = 0; j < 4; j++) REQUIRE((ob[j] = malloc(64)));
    FcErr err = {0};
    const void *ins[] = {xv};
    REQUIRE(rt_interp_grad(g, ins, ob, gw, gi, &err) == FC_OK);
    for (int e = 0; e < 3; e++) EXPECT(gx[e] == w0[e] + w3[e], "cast gradient %d: %g", e, gx[e]);
    float f;
    memcpy(&f, (char *)ob[3] + 4, 4);
    EXPECT(f == -2.75f, "cast outputs are returned: %g", f);
    for (int j = 0; j < 4; j++) free(ob[j]);
}

/* f8 scaling, exactly: straight through the rounding, times the scale into fp8_quant's x, over
 * it out of fp8_dequant's q (so a quantize-dequantize pair passes the gradient unchanged); the
 * scale, state, gets none. x -> q = fp8_quant(x, 8) -> outputs fp8_dequant(q) and q, with the
 * outputs' gradients w0 and w1: q's gradient is w0 / 8 + w1 = 1.0625, 1.875, 3.25, and x's is 8
 * times that. With a gradient slot (--train at f8; E5M2, scale 4: grad5 true) the gradient
 * passed to x, 8.5, 15, 26, is stored in E5M2: rounded as 8.5 * 4 = 34, 60, 104 to 32, 64 and
 * 96 (down, then two ties to even), 8, 16, 24. */
static void fp8_grad_case(bool grad5, const double want[3]) {
    new_graph();
    REQUIRE(ir_add_fp8_slot(g, FC_F8E4M3) == 0 && ir_add_fp8_slot(g, FC_F8E5M2) == 1);
    g->fp8.data[0].scale = 8;
    g->fp8.data[0].grad = grad5 ? 1 : -1;
    g->fp8.data[1].scale = 4;
    int x = input(SH(3), G_SIGNED);
    int xf = add(IR_OP_CAST, INS(x), (IrAttrs){.dtype = FC_F32});
    int s = add(IR_OP_FP8_SCALE, NULL, 0, (IrAttrs){.i = {0}});
    int q = add(IR_OP_FP8_QUANT, INS(xf, s), (IrAttrs){.i = {0}});
    output(add(IR_OP_CAST, INS(add(IR_OP_FP8_DEQUANT, INS(q, s), (IrAttrs){.dtype = FC_F32})), (IrAttrs){.dtype = FC_F64}));
    output(q);
    double xv[3] = {1.25, -2.75, 0.3}, gx[3];
    const double w0[3] = {0.5, -1, 2}, w1[3] = {1, 2, 3};
    const double *gw[] = {w0, w1};
    double *gi[] = {gx};
    void *ob[2];
    for (int j = 0; j < 2; j++) REQUIRE((ob[j] = malloc(64)));
    FcErr err = {0};
    const void *ins[] = {xv};
    REQUIRE(rt_interp_grad(g, ins, ob, gw, gi, &err) == FC_OK);
    for (int e = 0; e < 3; e++) EXPECT(gx[e] == want[e], "fp8 gradient %d%s: %g, not %g", e, grad5 ? " (E5M2)" : "", gx[e], want[e]);
    for (int j = 0; j < 2; j++) free(ob[j]);
}
static void test_fp8_exact(void) {
    fp8_grad_case(false, (const double[]){8.5, 15, 26});
    fp8_grad_case(true, (const double[]){8, 16, 24});
}

/* ---- reductions ------------------------------------------------------------------------------------ */
static void test_reductions(void) {
    static const IrOp ops[] = {IR_OP_SUM, IR_OP_MEAN, IR_OP_MAX, IR_OP_MIN};
    static const struct { int n; int64_t axes[3]; } ax[] = {{1, {0}}, {1, {1}}, {1, {2}}, {2, {0, 2}}, {3, {0, 1, 2}}};
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
        for (size_t a = 0; a < sizeof ax / sizeof ax[0]; a++)
            for (int keep = 0; keep < 2; keep++) {
                new_graph();
                int x = input(SH(3, 4, 5), o >= 2 ? G_GRID_A : G_SIGNED);
                output(add(ops[o], INS(x), (IrAttrs){.nlist = ax[a].n, .list = (int64_t *)ax[a].axes, .i = {keep}}));
                char name[64];
                snprintf(name, sizeof name, "%s axes %zu keepdim %d", ir_ops[ops[o]].name, a, keep);
                check_grad(name);
            }
    /* a negative axis (normalized by the shape rule) on an odd shape */
    new_graph();
    int x = input(SH(7, 3), G_GRID_A);
    output(add(IR_OP_MAX, INS(x), (IrAttrs){LIST(-1)}));
    output(add(IR_OP_MEAN, INS(x), (IrAttrs){LIST(-2), .i = {1}}));
    check_grad("max axis -1, mean axis -2");
}

/* Equal splitting of ties, relu'(0) = abs'(0) = 0 and pow's edges, by hand. */
static void grad1(const double *const *xs, const double *const *ws, double **gx) {
    FcErr err = {0};
    FcStatus st = rt_interp_grad(g, (const void *const *)xs, NULL, ws, gx, &err);
    EXPECT(st == FC_OK, "rt_interp_grad: %s", err.msg);
}
static bool same(double got, double want) { return isnan(want) ? isnan(got) : fabs(got - want) <= 1e-15 * fmax(1, fabs(want)); }

static void test_ties(void) {
    /* max over axis 1 of [[1 3 3 2] [5 5 5 0.5]]: w0 split in halves, w1 in thirds */
    for (int is_max = 0; is_max < 2; is_max++) {
        new_graph();
        int x = input(SH(2, 4), G_SIGNED);
        output(add(is_max ? IR_OP_MAX : IR_OP_MIN, INS(x), (IrAttrs){LIST(1)}));
        double s = is_max ? 1 : -1, xv[8] = {1, 3, 3, 2, 5, 5, 5, 0.5}, w[2] = {0.9, -1.7}, gx[8];
        for (int e = 0; e < 8; e++) xv[e] *= s;
        double want[8] = {0, 0.45, 0.45, 0, -1.7 / 3, -1.7 / 3, -1.7 / 3, 0};
        grad1((const double *[]){xv}, (const double *[]){w}, (double *[]){gx});
        for (int e = 0; e < 8; e++) EXPECT(same(gx[e], want[e]), "%s tie %d: %.17g want %.17g", is_max ? "max" : "min", e, gx[e], want[e]);
        /* over all axes: the three 5s (or -5s) share it */
        new_graph();
        x = input(SH(2, 4), G_SIGNED);
        output(add(is_max ? IR_OP_MAX : IR_OP_MIN, INS(x), (IrAttrs){LIST(0, 1)}));
        double w1[1] = {3};
        grad1((const double *[]){xv}, (const double *[]){w1}, (double *[]){gx});
        for (int e = 0; e < 8; e++) EXPECT(same(gx[e], e >= 4 && e < 7 ? 1.0 : 0.0), "%s all tie %d: %g", is_max ? "max" : "min", e, gx[e]);
    }
    /* maximum/minimum(a, b) with a == b gives half to each, also through broadcasting */
    for (int is_max = 0; is_max < 2; is_max++) {
        new_graph();
        int a = input(SH(3), G_SIGNED), b = input(SCALAR, G_SIGNED);
        output(add2(is_max ? IR_OP_MAXIMUM : IR_OP_MINIMUM, a, b));
        double av[3] = {1, 2, 3}, bv[1] = {2}, w[3] = {0.5, 0.25, 4}, ga[3], gb[1];
        grad1((const double *[]){av, bv}, (const double *[]){w}, (double *[]){ga, gb});
        double wa[3] = {is_max ? 0 : 0.5, 0.125, is_max ? 4 : 0}, wb = 0.125 + (is_max ? 0.5 : 4);
        for (int e = 0; e < 3; e++) EXPECT(same(ga[e], wa[e]), "%s a %d: %g want %g", is_max ? "maximum" : "minimum", e, ga[e], wa[e]);
        EXPECT(same(gb[0], wb), "%s b: %g want %g", is_max ? "maximum" : "minimum", gb[0], wb);
    }
    /* relu'(0) = 0, abs'(0) = 0 (and -0) */
    new_graph();
    int x = input(SH(4), G_SIGNED);
    output(add1(IR_OP_RELU, x));
    output(add1(IR_OP_ABS, x));
    double xv[4] = {0, -0.0, 2, -3}, w[4] = {1, 1, 1, 1}, gx[4];
    grad1((const double *[]){xv}, (const double *[]){w, w}, (double *[]){gx});
    double want[4] = {0, 0, 2, -1};
    for (int e = 0; e < 4; e++) EXPECT(same(gx[e], want[e]), "relu+abs at %g: %g want %g", xv[e], gx[e], want[e]);
    /* pow: d/db NaN for a < 0; 0 at a = 0 with b >= 0; d/da 0 at b = 0 */
    new_graph();
    int a = input(SH(4), G_SIGNED), b = input(SH(4), G_SIGNED);
    output(add2(IR_OP_POW, a, b));
    double av[4] = {-2, 0, 0, 3}, bv[4] = {2, 2, 0, 0}, w4[4] = {1, 1, 1, 1}, ga[4], gb[4];
    grad1((const double *[]){av, bv}, (const double *[]){w4}, (double *[]){ga, gb});
    EXPECT(same(ga[0], -4) && isnan(gb[0]), "pow(-2, 2): %g %g", ga[0], gb[0]);
    EXPECT(same(ga[1], 0) && same(gb[1], 0), "pow(0, 2): %g %g", ga[1], gb[1]);
    EXPECT(same(ga[2], 0) && same(gb[2], 0), "pow(0, 0): %g %g", ga[2], gb[2]);
    EXPECT(same(ga[3], 0) && same(gb[3], log(3.0)), "pow(3, 0): %g %g", ga[3], gb[3]);
}

/* ---- composites ------------------------------------------------------------------------------------ */
static void test_softmax(void) {
    for (int log_form = 0; log_form < 2; log_form++)
        for (int axis = -1; axis < 3; axis++) {
            new_graph();
            int x = input(SH(3, 4, 5), G_WIDE);
            output(add(log_form ? IR_OP_LOG_SOFTMAX : IR_OP_SOFTMAX, INS(x), (IrAttrs){.i = {axis}}));
            char name[64];
            snprintf(name, sizeof name, "%s axis %d", log_form ? "log_softmax" : "softmax", axis);
            check_grad(name);
        }
    new_graph();
    int x = input(SH(6), G_WIDE);
    output(add(IR_OP_SOFTMAX, INS(x), (IrAttrs){.i = {0}}));
    check_grad("softmax rank 1");
}

static void test_norms(void) {
    /* layernorm: trailing 1 or 2 axes, with gain and bias, gain only, neither; rmsnorm likewise */
    for (int rms = 0; rms < 2; rms++)
        for (int naxes = 1; naxes <= 2; naxes++)
            for (int parts = 0; parts < (rms ? 2 : 3); parts++) {
                new_graph();
                int x = input(SH(3, 4, 5), G_SIGNED), ins[3] = {x}, nin = 1;
                IrShape ps = naxes == 1 ? SH(5) : SH(4, 5);
                if (parts >= 1) ins[nin++] = input(ps, G_SIGNED);
                if (parts >= 2) ins[nin++] = input(ps, G_SIGNED);
                IrAttrs a = {.nlist = naxes, .list = naxes == 1 ? (int64_t[]){-1} : (int64_t[]){-2, -1},
                             .i = {parts >= 1, parts >= 2}, .f = naxes == 1 ? 1e-5 : 0.1};
                output(add(rms ? IR_OP_RMSNORM : IR_OP_LAYERNORM, ins, nin, a));
                char name[64];
                snprintf(name, sizeof name, "%s axes %d parts %d", rms ? "rmsnorm" : "layernorm", naxes, parts);
                check_grad(name);
            }
    /* all axes of a rank-2 tensor */
    new_graph();
    int x = input(SH(3, 7), G_SIGNED);
    output(add(IR_OP_LAYERNORM, INS(x), (IrAttrs){LIST(0, 1), .f = 1e-5}));
    check_grad("layernorm all axes");
}

static void test_masks_attention(void) {
    /* causal_mask: square and Tq < Tk (the last queries), a batch dim */
    const IrShape ms[] = {SH(2, 4, 4), SH(3, 5), SH(1, 2, 3)};
    for (size_t s = 0; s < sizeof ms / sizeof ms[0]; s++) {
        new_graph();
        int x = input(ms[s], G_SIGNED);
        output(add(IR_OP_CAUSAL_MASK, INS(x), (IrAttrs){.f = -3.5}));
        check_grad("causal_mask");
    }
    new_graph();
    int x = input(SH(2, 4, 4), G_SIGNED);
    output(add(IR_OP_SOFTMAX, INS(add(IR_OP_CAUSAL_MASK, INS(x), (IrAttrs){.f = -INFINITY})), (IrAttrs){.i = {-1}}));
    check_grad("softmax(causal_mask(x, -inf))");
    /* attention: q [.., Tq, D], k [.., Tk, D], v [.., Tk, Dv]; batch dims broadcast */
    const struct { IrShape q, k, v; int causal; double scale; } at[] = {
        {SH(3, 4), SH(5, 4), SH(5, 2), 0, 0.5},
        {SH(2, 3, 4), SH(2, 5, 4), SH(2, 5, 6), 0, 0.7},
        {SH(2, 4, 3), SH(2, 4, 3), SH(2, 4, 2), 1, 0.57735026918962584},
        {SH(3, 5), SH(6, 5), SH(6, 3), 1, 0.45},                        /* Tq < Tk: the last queries */
        {SH(2, 1, 3, 4), SH(1, 3, 5, 4), SH(2, 3, 5, 2), 1, 0.5},       /* batch broadcast, each side */
        {SH(1, 2, 4, 3), SH(3, 1, 4, 3), SH(3, 2, 4, 2), 0, 1.1},
    };
    for (size_t c = 0; c < sizeof at / sizeof at[0]; c++) {
        new_graph();
        int q = input(at[c].q, G_SIGNED), k = input(at[c].k, G_SIGNED), v = input(at[c].v, G_SIGNED);
        output(add(IR_OP_ATTENTION, INS(q, k, v), (IrAttrs){.i = {at[c].causal}, .f = at[c].scale}));
        char name[64];
        snprintf(name, sizeof name, "attention case %zu", c);
        check_grad(name);
    }
}

/* ---- shape ops, generators, gather, matmul ------------------------------------------------------------- */
static void test_shape_ops(void) {
    new_graph();
    int x = input(SH(2, 6), G_SIGNED);
    output(add1(IR_OP_SIN, add(IR_OP_RESHAPE, INS(x), (IrAttrs){LIST(3, 2, 2)})));
    check_grad("reshape");
    static const struct { int n; int64_t perm[3]; } perms[] = {{3, {2, 0, 1}}, {3, {0, 2, 1}}, {3, {1, 2, 0}}};
    for (size_t p = 0; p < sizeof perms / sizeof perms[0]; p++) {
        new_graph();
        x = input(SH(2, 3, 4), G_SIGNED);
        output(add1(IR_OP_SIN, add(IR_OP_TRANSPOSE, INS(x), (IrAttrs){.nlist = 3, .list = (int64_t *)perms[p].perm})));
        check_grad("transpose");
    }
    new_graph();
    x = input(SH(3, 1), G_SIGNED);
    int y = input(SH(4), G_SIGNED);
    output(add1(IR_OP_SIN, add(IR_OP_BROADCAST, INS(x), (IrAttrs){LIST(2, 3, 5)})));
    output(add1(IR_OP_SQUARE, add(IR_OP_BROADCAST, INS(y), (IrAttrs){LIST(3, 4)})));
    check_grad("broadcast");
    for (int axis = 0; axis < 2; axis++) {
        new_graph();
        int a = input(axis ? SH(3, 2) : SH(2, 4), G_SIGNED), b = input(axis ? SH(3, 1) : SH(1, 4), G_SIGNED);
        output(add1(IR_OP_SIN, add(IR_OP_CONCAT, INS(a, b, a), (IrAttrs){.i = {axis}})));
        check_grad("concat (one value twice)");
    }
    /* split: equal and unequal sections; one result unused, one used twice */
    new_graph();
    x = input(SH(3, 7), G_SIGNED);
    int s0 = add(IR_OP_SPLIT, INS(x), (IrAttrs){LIST(2, 4, 1), .i = {1}});
    output(add1(IR_OP_SIN, s0));
    output(add2(IR_OP_MUL, s0 + 2, s0 + 2));
    check_grad("split unequal");
    new_graph();
    x = input(SH(4, 3), G_SIGNED);
    s0 = add(IR_OP_SPLIT, INS(x), (IrAttrs){LIST(2, 2), .i = {0}});
    output(add2(IR_OP_MUL, s0, s0 + 1));
    check_grad("split equal");
    /* slice: steps 1, 2, 3, -1, -2, negative bounds (normalized by the shape rule) */
    static const int64_t sl[][3] = {{1, 5, 1}, {0, 7, 2}, {-6, -1, 3}, {6, -8, -1}, {-2, 0, -2}, {5, 1, -3}};
    for (size_t c = 0; c < sizeof sl / sizeof sl[0]; c++) {
        new_graph();
        x = input(SH(3, 7, 2), G_SIGNED);
        output(add1(IR_OP_SIN, add(IR_OP_SLICE, INS(x), (IrAttrs){.i = {1, sl[c][0], sl[c][1], sl[c][2]}})));
        char name[64];
        snprintf(name, sizeof name, "slice %lld:%lld:%lld", (long long)sl[c][0], (long long)sl[c][1], (long long)sl[c][2]);
        check_grad(name);
    }
}

static void test_generators_gather_matmul(void) {
    /* iota and full: constants, no gradient to anything */
    new_graph();
    int x = input(SH(2, 3), G_SIGNED);
    int io = add(IR_OP_IOTA, NULL, 0, (IrAttrs){LIST(2, 3), .i = {1}, .dtype = FC_F64});
    int fu = add(IR_OP_FULL, NULL, 0, (IrAttrs){LIST(3), .f = 0.75, .dtype = FC_F64});
    output(add2(IR_OP_MUL, add2(IR_OP_ADD, x, io), add2(IR_OP_SUB, x, fu)));
    check_grad("iota, full");
    /* dropout_mask: a bool generator selecting, no gradient of its own */
    new_graph();
    x = input(SH(4, 5), G_SIGNED);
    int mk = add(IR_OP_DROPOUT_MASK, NULL, 0, (IrAttrs){LIST(4, 5), .f = 0.5, .i = {3}});
    int z = add(IR_OP_FULL, NULL, 0, (IrAttrs){LIST(4, 5), .f = 0.0, .dtype = FC_F64});
    output(add1(IR_OP_SIN, add(IR_OP_WHERE, INS(mk, x, z), (IrAttrs){0})));
    check_grad("dropout_mask");
    /* gather: rows picked several times add up; i32 and i64 ids; a rank-1 table */
    for (int t = 0; t < 2; t++) {
        new_graph();
        int tab = input(t ? SH(5) : SH(5, 3), G_SIGNED);
        int ids = input_gen(t ? FC_I64 : FC_I32, SH(2, 4), G_IDS, 5);
        output(add1(IR_OP_SIN, add2(IR_OP_GATHER, tab, ids)));
        check_grad("gather");
    }
    /* scatter_add: rows named several times, rows never named; its src gets a gather */
    for (int t = 0; t < 2; t++) {
        new_graph();
        int src = input(t ? SH(2, 4) : SH(2, 4, 3), G_SIGNED);
        int ids = input_gen(t ? FC_I64 : FC_I32, SH(2, 4), G_IDS, 5);
        output(add1(IR_OP_SIN, add(IR_OP_SCATTER_ADD, INS(src, ids), (IrAttrs){.i = {6}})));
        check_grad("scatter_add");
    }
    /* matmul: plain, one side batched, both batched with broadcast batch dims */
    const struct { IrShape a, b; } mm[] = {
        {SH(3, 4), SH(4, 5)}, {SH(2, 3, 4), SH(4, 5)}, {SH(3, 4), SH(2, 4, 2)},
        {SH(2, 1, 3, 4), SH(1, 3, 4, 2)}, {SH(5, 1, 2), SH(5, 2, 3)}, {SH(1, 1), SH(1, 1)},
    };
    for (size_t c = 0; c < sizeof mm / sizeof mm[0]; c++) {
        new_graph();
        int a = input(mm[c].a, G_SIGNED), b = input(mm[c].b, G_SIGNED);
        output(add2(IR_OP_MATMUL, a, b));
        char name[64];
        snprintf(name, sizeof name, "matmul case %zu", c);
        check_grad(name);
    }
}

/* ---- training ops ---------------------------------------------------------------------------------------- */
/* Random123's known answers for philox4x32-10 (kat_vectors). */
static void test_philox(void) {
    uint32_t out[4];
    rt_interp_grad_philox((const uint32_t[]){0, 0, 0, 0}, (const uint32_t[]){0, 0}, out);
    EXPECT(out[0] == 0x6627e8d5u && out[1] == 0xe169c58du && out[2] == 0xbc57ac4cu && out[3] == 0x9b00dbd8u,
           "philox(0, 0): %08x %08x %08x %08x", out[0], out[1], out[2], out[3]);
    rt_interp_grad_philox((const uint32_t[]){0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                          (const uint32_t[]){0xa4093822u, 0x299f31d0u}, out);
    EXPECT(out[0] == 0xd16cfe09u && out[1] == 0x94fdccebu && out[2] == 0x5001e420u && out[3] == 0x24126ea1u,
           "philox(pi): %08x %08x %08x %08x", out[0], out[1], out[2], out[3]);
}

static void test_dropout(void) {
    static const struct { double p; int64_t seed; } cases[] = {{0.3, 12345}, {0.5, (int64_t)0x123456789abcull}, {0.0, 7}, {0.9, -1}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        new_graph();
        int x = input(SH(4, 6), G_SIGNED);
        output(add1(IR_OP_SIN, add(IR_OP_DROPOUT, INS(x), (IrAttrs){.f = cases[c].p, .i = {cases[c].seed}})));
        char name[64];
        snprintf(name, sizeof name, "dropout p=%g", cases[c].p);
        check_grad(name);
    }
    /* the mask itself: y = x / (1 - p) or 0 exactly, the gradient zero exactly where y is; the
     * kept fraction within 5 sigma of 1 - p */
    enum { N = 20000 };
    double p = 0.25;
    new_graph();
    int x = input(SH(N), G_SIGNED);
    output(add(IR_OP_DROPOUT, INS(x), (IrAttrs){.f = p, .i = {99}}));
    double *xv = malloc(sizeof(double) * N), *yv = malloc(sizeof(double) * N), *w = malloc(sizeof(double) * N),
           *gx = malloc(sizeof(double) * N);
    REQUIRE(xv && yv && w && gx);
    fill(G_SIGNED, 0, xv, N);
    for (int e = 0; e < N; e++) w[e] = 1;
    FcErr err = {0};
    FcStatus st = rt_interp_grad(g, (const void *const[]){xv}, (void *const[]){yv}, (const double *const[]){w},
                                 (double *const[]){gx}, &err);
    EXPECT(st == FC_OK, "dropout mask: %s", err.msg);
    int kept = 0, bad = 0;
    for (int e = 0; st == FC_OK && e < N; e++) {
        bool k = yv[e] != 0;
        kept += k;
        /* the forward scales by 1/(1-p) (docs/language.md): x * (1/(1-p)), which may differ from
         * x / (1-p) in the last bit */
        double sc = 1 / (1 - p);
        bad += k ? !(fabs(yv[e] - xv[e] * sc) <= 0x1p-52 * fabs(xv[e] * sc) && fabs(gx[e] - sc) <= 0x1p-52 * sc)
                 : gx[e] != 0;
    }
    EXPECT(bad == 0, "dropout: %d elements neither x/(1-p) with gradient 1/(1-p) nor 0 with 0", bad);
    double sd = sqrt(p * (1 - p) / N);
    EXPECT(fabs((double)kept / N - (1 - p)) < 5 * sd, "dropout kept %d of %d at p = %g", kept, N, p);
    free(xv), free(yv), free(w), free(gx);
}

static void test_cross_entropy(void) {
    const struct { IrShape l, y; FcDtype t; } cases[] = {
        {SH(4, 5), SH(4), FC_I32}, {SH(2, 3, 5), SH(2, 3), FC_I64}, {SH(7), SCALAR, FC_I32},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        new_graph();
        int l = input(cases[c].l, G_WIDE);
        int y = input_gen(cases[c].t, cases[c].y, G_IDS, cases[c].l.dims[cases[c].l.rank - 1]);
        output(add2(IR_OP_CROSS_ENTROPY, l, y));
        check_grad("cross_entropy");
    }
    /* a composite training graph: cross_entropy(dropout(x) @ w, labels) */
    new_graph();
    int x = input(SH(3, 4), G_SIGNED), w = input(SH(4, 6), G_SIGNED), y = input_gen(FC_I32, SH(3), G_IDS, 6);
    int d = add(IR_OP_DROPOUT, INS(x), (IrAttrs){.f = 0.2, .i = {5}});
    output(add2(IR_OP_CROSS_ENTROPY, add2(IR_OP_MATMUL, d, w), y));
    check_grad("cross_entropy(dropout(x) @ w)");
}

/* ---- errors, f32, allocation failures ------------------------------------------------------------------------ */
static void test_errors(void) {
    FcErr err = {0};
    /* gather id out of range, cross_entropy label out of range: FC_ERR_RUNTIME_DATA */
    new_graph();
    int t = input(SH(3, 2), G_SIGNED), ids = input_gen(FC_I32, SH(2), G_IDS, 3);
    output(add2(IR_OP_GATHER, t, ids));
    double tv[6] = {1, 2, 3, 4, 5, 6}, gt[6], w[4] = {1, 1, 1, 1};
    int32_t idv[2] = {1, 3};
    FcStatus st = rt_interp_grad(g, (const void *const[]){tv, idv}, NULL, (const double *const[]){w},
                                 (double *const[]){gt, NULL}, &err);
    EXPECT(st == FC_ERR_RUNTIME_DATA && strstr(err.msg, "t.tf:3:7: gather: id 3 at ids[1] is out of range [0, 3)"),
           "gather out of range: %d %s", st, err.msg);
    /* an integer input with a gradient buffer: a usage error */
    double gi[2];
    st = rt_interp_grad(g, (const void *const[]){tv, (int32_t[]){0, 1}}, NULL, (const double *const[]){w},
                        (double *const[]){gt, gi}, &err);
    EXPECT(st == FC_ERR_USAGE && strstr(err.msg, "i32"), "int input gradient: %d %s", st, err.msg);
    new_graph();
    int l = input(SH(2, 3), G_SIGNED), y = input_gen(FC_I64, SH(2), G_IDS, 3);
    output(add2(IR_OP_CROSS_ENTROPY, l, y));
    double lv[6] = {1, 2, 3, 4, 5, 6}, gl[6], one[1] = {1};
    st = rt_interp_grad(g, (const void *const[]){lv, (int64_t[]){2, -1}}, NULL, (const double *const[]){one},
                        (double *const[]){gl, NULL}, &err);
    EXPECT(st == FC_ERR_RUNTIME_DATA && strstr(err.msg, "label -1") && strstr(err.msg, "out of range [0, 3)"),
           "cross_entropy label: %d %s", st, err.msg);
    /* no gradient wanted: a plain forward run */
    double out[1];
    st = rt_interp_grad(g, (const void *const[]){lv, (int64_t[]){2, 0}}, (void *const[]){out}, NULL, NULL, &err);
    double want = (log(exp(1) + exp(2) + exp(3)) - 3 + log(exp(4) + exp(5) + exp(6)) - 4) / 2;
    EXPECT(st == FC_OK && fabs(out[0] - want) < 1e-14, "cross_entropy forward: %.17g want %.17g", out[0], want);
}

/* An f32 graph: forward values rounded to f32, derivatives at those values, in f64. The gradient
 * of sum(w * tanh(a * b)) agrees with the f64 graph's on the same (f32-exact) data to f32's
 * rounding of a * b (a few 2^-24). */
static void test_f32(void) {
    double got[2][6];
    double av[6], bv[6], w[6];
    for (int e = 0; e < 6; e++) av[e] = (float)unif(0.2, 1.2), bv[e] = (float)unif(0.2, 1.2), w[e] = unif(0.5, 1.5);
    for (int t = 0; t < 2; t++) {
        FcDtype dt = t ? FC_F32 : FC_F64;
        new_graph();
        int a = input_gen(dt, SH(6), G_SIGNED, 0), b = input_gen(dt, SH(6), G_SIGNED, 0);
        output(add1(IR_OP_TANH, add2(IR_OP_MUL, a, b)));
        float af[6], bf[6];
        for (int e = 0; e < 6; e++) af[e] = (float)av[e], bf[e] = (float)bv[e];
        const void *ins[] = {t ? (const void *)af : av, t ? (const void *)bf : bv};
        FcErr err = {0};
        EXPECT(rt_interp_grad(g, ins, NULL, (const double *const[]){w}, (double *const[]){got[t], NULL}, &err) == FC_OK,
               "f32: %s", err.msg);
    }
    for (int e = 0; e < 6; e++) EXPECT(fabs(got[1][e] - got[0][e]) <= 1e-6 * fabs(got[0][e]), "f32 %d: %g vs %g", e, got[1][e], got[0][e]);
}

/* Every allocation failure inside rt_interp_grad is reported as FC_ERR_NOMEM (and, in a
 * sanitizer build, leaks nothing). */
static void test_alloc_failures(void) {
    new_graph();
    int x = input(SH(2, 3, 4), G_SIGNED), gn = input(SH(4), G_SIGNED);
    int h = add(IR_OP_LAYERNORM, INS(x, gn), (IrAttrs){LIST(-1), .i = {1}, .f = 1e-5});
    int m = add(IR_OP_MAX, INS(h), (IrAttrs){LIST(1), .i = {1}});
    int at = add(IR_OP_ATTENTION, INS(h, h, add2(IR_OP_SUB, h, m)), (IrAttrs){.i = {1}, .f = 0.5});
    int s0 = add(IR_OP_SPLIT, INS(at), (IrAttrs){LIST(1, 3), .i = {2}});
    output(add(IR_OP_SOFTMAX, INS(s0 + 1), (IrAttrs){.i = {-1}}));
    double xv[24], gv[4], w[18], gx[24], gg[4];
    fill(G_SIGNED, 0, xv, 24), fill(G_SIGNED, 0, gv, 4), fill(G_SIGNED, 0, w, 18);
    FcStatus st = FC_ERR_NOMEM;
    int n;
    for (n = 1; n < 10000 && st == FC_ERR_NOMEM; n++) {
        FcErr err = {0};
        fc_alloc_fail_at(n);
        st = rt_interp_grad(g, (const void *const[]){xv, gv}, NULL, (const double *const[]){w},
                            (double *const[]){gx, gg}, &err);
        fc_alloc_fail_at(0);
        EXPECT(st == FC_OK || st == FC_ERR_NOMEM, "allocation %d failing: status %d: %s", n, st, err.msg);
    }
    EXPECT(st == FC_OK && n > 10, "allocation failures: done after %d (status %d)", n, st);
}

/* ---- the harness can fail ----------------------------------------------------------------------------------- */
static void slip_one(void *const *ins, const double *const *w, double *const *ga) {
    (void)ins, (void)w;
    double mx = 0;
    for (int e = 0; e < 20; e++) mx = fmax(mx, fabs(ga[0][e]));
    ga[0][3] += 1e-4 * mx; /* one element off by 1e-4 of the largest */
}
static void flip_sign(void *const *ins, const double *const *w, double *const *ga) {
    (void)ins, (void)w;
    for (int e = 0; e < 20; e++) ga[0][e] = -ga[0][e];
}
static IrGraph *other;
/* the gradient of another graph on the same data and weights */
static void other_graph(void *const *ins, const double *const *w, double *const *ga) {
    FcErr err = {0};
    EXPECT(rt_interp_grad(other, (const void *const *)ins, NULL, w, ga, &err) == FC_OK, "%s", err.msg);
}
/* broadcasting not undone: y's gradient taken from the first row only */
static void no_bcast_sum(void *const *ins, const double *const *w, double *const *ga) {
    (void)ins;
    for (int e = 0; e < 5; e++) ga[1][e] = w[0][e];
}

static void test_harness_fails(void) {
    new_graph();
    int x = input(SH(4, 5), G_WIDE);
    output(add(IR_OP_GELU, INS(x), (IrAttrs){.i = {IR_APPROX_NONE}}));
    double e = grad_error("gelu, one element slipped", slip_one);
    EXPECT(e > 10 * FD_BOUND, "a gradient with one element 1e-4 off passed (%g)", e);
    e = grad_error("gelu, sign flipped", flip_sign);
    EXPECT(e > 1, "a sign-flipped gradient passed (%g)", e);
    /* the tanh form's gradient against the exact form's differences (they differ by ~1e-3) */
    other = g;
    g = NULL;
    new_graph();
    x = input(SH(4, 5), G_WIDE);
    output(add(IR_OP_GELU, INS(x), (IrAttrs){.i = {IR_APPROX_TANH}}));
    e = grad_error("gelu tanh vs exact", other_graph);
    EXPECT(e > 10 * FD_BOUND, "gelu's tanh-form gradient passed for the exact form (%g)", e);
    ir_graph_free(other);
    new_graph();
    x = input(SH(3, 5), G_SIGNED);
    int y = input(SH(5), G_SIGNED);
    output(add2(IR_OP_ADD, x, y));
    e = grad_error("broadcast not summed", no_bcast_sum);
    EXPECT(e > 100 * FD_BOUND, "a broadcast gradient not summed back passed (%g)", e);
}

/* ---- multi-op graphs from source ---------------------------------------------------------------------------- */
static const char *mlp_src =
    "dim T = 3, C = 4\n"
    "block mlp(x: f64[T, C], param g: f64[C], param b: f64[C], param w_fc: f64[C, 4*C], param b_fc: f64[4*C],\n"
    "          param w_proj: f64[4*C, C], param b_proj: f64[C]) -> f64[T, C]\n"
    "{\n"
    "    h = layernorm(x, g, b, eps=1e-5)\n"
    "    u = gelu(h @ w_fc + b_fc, approx=\"tanh\")\n"
    "    return x + u @ w_proj + b_proj\n"
    "}\n";

static const char *misc_src =
    "dim N = 3, K = 5\n"
    "block misc(x: f64[N, K], y: f64[K], ids: i32[4]) -> f64[N], f64[4, K], f64[]\n"
    "{\n"
    "    z = maximum(x, y) - minimum(x + 0.2, y) / (abs(y) + 1)\n"
    "    s = sum(softmax(z, axis=0) * log_softmax(x, axis=-1), axis=-1)\n"
    "    e = gather(concat([x, z], axis=0), ids)\n"
    "    return s, e * sigmoid(e), mean(square(rmsnorm(x, y)) + relu(z) + silu(x))\n"
    "}\n";

/* An examples/ program with every f32 made f64 (FD needs f64) and small dims. */
static char *example_f64(const char *file) {
    char path[512], *text = NULL;
    size_t len = 0;
    FcErr err = {0};
    snprintf(path, sizeof path, "%s/examples/%s", FUSEC_SOURCE_DIR, file);
    REQUIRE(fc_read_file(path, 1 << 20, &text, &len, &err) == FC_OK);
    for (char *p = text; (p = strstr(p, "f32")) != NULL; p += 3) p[2] = '4', p[1] = '6';
    return text;
}

static void test_sources(void) {
    graph_from_source("mlp.tf", mlp_src, NULL, 0, G_SIGNED);
    check_grad("GPT-2 MLP from source");
    graph_from_source("misc.tf", misc_src, NULL, 0, G_GRID_A);
    hi_of[2] = 6, gen_of[2] = G_IDS;
    gen_of[1] = G_GRID_B;
    check_grad("misc from source");
    static const struct { const char *file; FeDimBinding dims[5]; int ndims; } ex[] = {
        {"gpt2_mlp.tf", {{"B", 2}, {"T", 3}, {"C", 4}}, 3},
        {"gpt2_attn.tf", {{"B", 1}, {"T", 3}, {"C", 4}, {"H", 2}}, 4},
        {"gpt2_block.tf", {{"B", 1}, {"T", 3}, {"C", 4}, {"H", 2}}, 4},
        {"llama_layer.tf", {{"B", 1}, {"T", 3}, {"C", 4}, {"H", 2}, {"F", 6}}, 5},
    };
    for (size_t c = 0; c < sizeof ex / sizeof ex[0]; c++) {
        char *src = example_f64(ex[c].file);
        graph_from_source(ex[c].file, src, ex[c].dims, ex[c].ndims, G_SIGNED);
        fc_free(src);
        check_grad(ex[c].file);
    }
}

int main(void) {
    const char *s = getenv("IGRAD_SEED");
    if (s && *s) rng_state = strtoull(s, NULL, 0);
    seed0 = rng_state;
    test_philox();
    test_unary();
    test_binary();
    test_where_compare_cast();
    test_cast_exact();
    test_fp8_exact();
    test_reductions();
    test_ties();
    test_softmax();
    test_norms();
    test_masks_attention();
    test_shape_ops();
    test_generators_gather_matmul();
    test_dropout();
    test_cross_entropy();
    test_errors();
    test_f32();
    test_alloc_failures();
    test_harness_fails();
    test_sources();
    int ops = 0;
    for (int op = 0; op < IR_OP_COUNT; op++) {
        EXPECT(covered[op], "op '%s' has no gradient test", ir_ops[op].name);
        ops += covered[op];
    }
    ir_graph_free(g);
    printf("test_interp_grad: %d ops, %d graphs, %ld elements against finite differences, worst error %.3g "
           "(bound %g), seed %llu: %s\n",
           ops, cases_checked, elements_checked, worst_seen, FD_BOUND, (unsigned long long)seed0,
           failures ? "FAILED" : "ok");
    return failures != 0;
}
