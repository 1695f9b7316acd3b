/* test_interp.c: the reference interpreter (runtime/interp.c) against hand-computed cases.
 *
 * Every op of ops.def has at least one case (a final loop checks the coverage table that
 * add() fills). Cases cover NumPy broadcasting, normalized negative axes, keepdim, NaN
 * propagation, rounding to bf16/f16/f8 and saturating int casts, gather's and cross_entropy's
 * out-of-range errors, Philox's known answers and dropout's mask; composites are cross-checked against their primitive
 * expansions run through the same interpreter on random inputs; the interpreter's private
 * rounding is checked against host.c's (a different method) on every narrow bit pattern;
 * and a fault-injection loop shows every allocation failure is reported and leaks nothing.
 */
#include "host.h"
#include "interp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "dropout_ref.h"
#include "ir_build.h"
static bool covered[IR_OP_COUNT];
static IrGraph *g;


/* ---- graph building -------------------------------------------------------------------- */
static const IrShape SCALAR = {0};
#define INS(...) (const int[]){__VA_ARGS__}, (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int))

static void new_graph(void) {
    ir_graph_free(g);
    g = ir_graph_new("t", "t.tf");
    REQUIRE(g);
}
static int input(FcDtype t, IrShape s) {
    int v = ir_add_input(g, NULL, t, &s, false);
    REQUIRE(v >= 0);
    return v;
}
static int add(IrOp op, const int *ins, int nin, IrAttrs a) {
    FcErr err = {0};
    int out = -1;
    FcStatus st = ir_add_node(g, op, ins, nin, &a, (IrLoc){3, 7}, -1, op, &out, &err);
    if (st != FC_OK) fprintf(stderr, "ir_add_node(%s): %s\n", ir_ops[op].name, err.msg);
    REQUIRE(st == FC_OK);
    covered[op] = true;
    return out;
}
static void output(int v) {
    FcErr err = {0};
    REQUIRE(ir_add_output(g, v, NULL, &err) == FC_OK);
}
static int64_t numel_of(int v) {
    int64_t n;
    REQUIRE(ir_shape_numel(&ir_cval(g, v)->shape, &n));
    return n;
}

/* Runs g: inputs given as doubles (stored in each input's dtype with host.c), outputs poisoned
 * (all bytes 0xFF: NaN for floats) and read back as doubles into outs[k] (malloc'd). */
static FcStatus run_mode(const double *const *ins, double **outs, RtRounding mode, FcErr *err);
static FcStatus run(const double *const *ins, double **outs, FcErr *err) {
    return run_mode(ins, outs, RT_ROUND_EVERY_OP, err);
}
static FcStatus run_mode(const double *const *ins, double **outs, RtRounding mode, FcErr *err) {
    int ni = g->inputs.len, no = g->outputs.len;
    void **ib = calloc((size_t)ni + 1, sizeof *ib), **ob = calloc((size_t)no + 1, sizeof *ob);
    REQUIRE(ib && ob);
    for (int i = 0; i < ni; i++) {
        const IrValue *v = ir_cval(g, g->inputs.data[i]);
        int64_t n = numel_of(g->inputs.data[i]);
        ib[i] = malloc((size_t)n * fc_dtype_size(v->dtype) + 1);
        REQUIRE(ib[i]);
        for (int64_t j = 0; j < n; j++) rt_host_store(v->dtype, ib[i], j, ins[i][j]);
    }
    for (int k = 0; k < no; k++) {
        const IrValue *v = ir_cval(g, g->outputs.data[k]);
        size_t bytes = (size_t)numel_of(g->outputs.data[k]) * fc_dtype_size(v->dtype);
        ob[k] = malloc(bytes + 1);
        REQUIRE(ob[k]);
        memset(ob[k], 0xFF, bytes);
    }
    FcStatus st = rt_interp_run_rounding(g, (const void *const *)ib, ob, mode, err);
    for (int k = 0; k < no; k++) {
        const IrValue *v = ir_cval(g, g->outputs.data[k]);
        int64_t n = numel_of(g->outputs.data[k]);
        if (outs) {
            outs[k] = malloc(sizeof(double) * (size_t)n);
            REQUIRE(outs[k]);
            for (int64_t j = 0; j < n; j++) outs[k][j] = rt_host_load(v->dtype, ob[k], j);
        }
        free(ob[k]);
    }
    for (int i = 0; i < ni; i++) free(ib[i]);
    free(ib);
    free(ob);
    return st;
}

static bool close_enough(double got, double want, double tol) {
    if (isnan(want)) return isnan(got);
    if (isinf(want)) return got == want;
    return fabs(got - want) <= tol * (1 + fabs(want));
}

/* Runs g (one output) and compares with want[]. */
static void check1(const char *what, const double *const *ins, const double *want, double tol) {
    FcErr err = {0};
    double *out = NULL;
    FcStatus st = run(ins, &out, &err);
    EXPECT(st == FC_OK, "%s: status %d: %s", what, st, err.msg);
    int64_t n = numel_of(g->outputs.data[0]);
    for (int64_t i = 0; st == FC_OK && i < n; i++)
        EXPECT(close_enough(out[i], want[i], tol), "%s: element %lld: got %.17g, want %.17g", what, (long long)i,
               out[i], want[i]);
    free(out);
}

/* ---- elementwise ------------------------------------------------------------------------- */
static void test_unary(void) {
    static const struct { IrOp op; double x[4], want[4]; } cases[] = {
        {IR_OP_NEG, {-1.5, 0.25, 2, 0}, {1.5, -0.25, -2, 0}},
        {IR_OP_ABS, {-1.5, 0.25, -2, 3}, {1.5, 0.25, 2, 3}},
        {IR_OP_EXP, {0, 1, -1, 2}, {1, 2.718281828459045, 0.36787944117144233, 7.38905609893065}},
        {IR_OP_LOG, {1, 2.718281828459045, 0.25, 100}, {0, 1, -1.3862943611198906, 4.605170185988092}},
        {IR_OP_SQRT, {0.25, 1, 4, 9}, {0.5, 1, 2, 3}},
        {IR_OP_RSQRT, {0.25, 1, 4, 16}, {2, 1, 0.5, 0.25}},
        {IR_OP_RECIP, {0.25, -1, 4, 8}, {4, -1, 0.25, 0.125}},
        {IR_OP_SQUARE, {-1.5, 0.5, 3, -2}, {2.25, 0.25, 9, 4}},
        {IR_OP_TANH, {0, 1, -0.5, 3}, {0, 0.7615941559557649, -0.46211715726000974, 0.9950547536867305}},
        {IR_OP_SIGMOID, {0, 1, -2, 5}, {0.5, 0.7310585786300049, 0.11920292202211755, 0.9933071490757153}},
        {IR_OP_RELU, {-1.5, 0.25, NAN, -0.0}, {0, 0.25, NAN, 0}},
        {IR_OP_SILU, {0, 1, -2, 5}, {0, 0.7310585786300049, -0.2384058440442351, 4.966535745378576}},
        {IR_OP_ERF, {0, 0.5, -1, 2}, {0, 0.5204998778130465, -0.8427007929497149, 0.9953222650189527}},
        {IR_OP_NDTR, {0, 1, -2, -10}, {0.5, 0.8413447460685429, 0.02275013194817921, 7.619853024160525e-24}},
        {IR_OP_SIN, {0, 1, -0.5, 3.141592653589793}, {0, 0.8414709848078965, -0.479425538604203, 1.2246467991473532e-16}},
        {IR_OP_COS, {0, 1, -0.5, 3.141592653589793}, {1, 0.5403023058681398, 0.8775825618903728, -1}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        /* f64: exact formulas; f32: the same rounded to f32 */
        for (int t = 0; t < 2; t++) {
            FcDtype dt = t ? FC_F32 : FC_F64;
            new_graph();
            int x = input(dt, SH(2, 2));
            output(add(cases[c].op, INS(x), (IrAttrs){0}));
            double want[4];
            for (int i = 0; i < 4; i++) want[i] = t ? (double)(float)cases[c].want[i] : cases[c].want[i];
            const double *ins[] = {cases[c].x};
            check1(ir_ops[cases[c].op].name, ins, want, t ? 1e-7 : 1e-15);
        }
    }
    /* integer unary ops saturate instead of wrapping */
    new_graph();
    int x = input(FC_I32, SH(3));
    output(add(IR_OP_NEG, INS(x), (IrAttrs){0}));
    output(add(IR_OP_ABS, INS(x), (IrAttrs){0}));
    output(add(IR_OP_SQUARE, INS(x), (IrAttrs){0}));
    output(add(IR_OP_RELU, INS(x), (IrAttrs){0}));
    double *o[4];
    FcErr err = {0};
    const double *ins[] = {(const double[]){-2147483648.0, 7, -50000}};
    REQUIRE(run(ins, o, &err) == FC_OK);
    EXPECT(o[0][0] == 2147483647.0 && o[0][1] == -7 && o[0][2] == 50000, "int neg");
    EXPECT(o[1][0] == 2147483647.0 && o[1][1] == 7 && o[1][2] == 50000, "int abs");
    EXPECT(o[2][0] == 2147483647.0 && o[2][1] == 49 && o[2][2] == 2147483647.0, "int square: %g %g %g", o[2][0], o[2][1], o[2][2]);
    EXPECT(o[3][0] == 0 && o[3][1] == 7 && o[3][2] == 0, "int relu");
    for (int k = 0; k < 4; k++) free(o[k]);
}

static void test_binary(void) {
    /* broadcasting: a [2,1,3] op b [4,1] -> [2,4,3] */
    double a[6], b[4];
    for (int i = 0; i < 6; i++) a[i] = 1.5 + i;
    for (int i = 0; i < 4; i++) b[i] = 0.25 - i;
    static const IrOp ops[] = {IR_OP_ADD, IR_OP_SUB, IR_OP_MUL, IR_OP_DIV, IR_OP_POW, IR_OP_MAXIMUM, IR_OP_MINIMUM};
    for (size_t c = 0; c < sizeof ops / sizeof ops[0]; c++) {
        new_graph();
        int x = input(FC_F64, SH(2, 1, 3)), y = input(FC_F64, SH(4, 1));
        int z = add(ops[c], INS(x, y), (IrAttrs){0});
        EXPECT(ir_shape_eq(&ir_cval(g, z)->shape, &(IrShape){3, {2, 4, 3}}), "broadcast shape");
        output(z);
        double want[24];
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 4; j++)
                for (int k = 0; k < 3; k++) {
                    double p = a[i * 3 + k], q = b[j], r = 0;
                    switch (ops[c]) {
                    case IR_OP_ADD: r = p + q; break;
                    case IR_OP_SUB: r = p - q; break;
                    case IR_OP_MUL: r = p * q; break;
                    case IR_OP_DIV: r = p / q; break;
                    case IR_OP_POW: r = pow(p, q); break;
                    case IR_OP_MAXIMUM: r = p > q ? p : q; break;
                    default: r = p < q ? p : q; break;
                    }
                    want[(i * 4 + j) * 3 + k] = r;
                }
        const double *ins[] = {a, b};
        check1(ir_ops[ops[c]].name, ins, want, 1e-15);
    }
    /* NaN propagation of maximum/minimum; pow of a negative base */
    new_graph();
    int x = input(FC_F32, SH(4)), y = input(FC_F32, SH(4));
    output(add(IR_OP_MAXIMUM, INS(x, y), (IrAttrs){0}));
    output(add(IR_OP_MINIMUM, INS(x, y), (IrAttrs){0}));
    output(add(IR_OP_POW, INS(x, y), (IrAttrs){0}));
    double *o[3];
    FcErr err = {0};
    const double *ins[] = {(const double[]){1, NAN, 3, -8}, (const double[]){2, 0, NAN, 0.5}};
    REQUIRE(run(ins, o, &err) == FC_OK);
    EXPECT(o[0][0] == 2 && isnan(o[0][1]) && isnan(o[0][2]) && o[0][3] == 0.5, "maximum NaN");
    EXPECT(o[1][0] == 1 && isnan(o[1][1]) && isnan(o[1][2]) && o[1][3] == -8, "minimum NaN");
    EXPECT(o[2][0] == 1 && o[2][1] == 1 && isnan(o[2][2]) && isnan(o[2][3]), "pow");
    for (int k = 0; k < 3; k++) free(o[k]);
    /* integer add saturates; integer div truncates toward zero */
    new_graph();
    x = input(FC_I32, SH(3));
    y = input(FC_I32, SH(3));
    output(add(IR_OP_ADD, INS(x, y), (IrAttrs){0}));
    output(add(IR_OP_DIV, INS(x, y), (IrAttrs){0}));
    output(add(IR_OP_SUB, INS(x, y), (IrAttrs){0}));
    const double *ins2[] = {(const double[]){2147483647.0, -7, 0}, (const double[]){1, 2, 0}};
    REQUIRE(run(ins2, o, &err) == FC_OK);
    EXPECT(o[0][0] == 2147483647.0 && o[0][1] == -5 && o[0][2] == 0, "int add");
    EXPECT(o[1][0] == 2147483647.0 && o[1][1] == -3 && o[1][2] == 0, "int div: %g %g %g", o[1][0], o[1][1], o[1][2]);
    EXPECT(o[2][0] == 2147483646.0 && o[2][1] == -9, "int sub");
    for (int k = 0; k < 3; k++) free(o[k]);
}

static void test_compare_where(void) {
    static const IrOp ops[] = {IR_OP_LT, IR_OP_LE, IR_OP_GT, IR_OP_GE, IR_OP_EQ, IR_OP_NE};
    static const double want[6][4] = {{1, 0, 0, 0}, {1, 1, 0, 0}, {0, 0, 1, 0}, {0, 1, 1, 0}, {0, 1, 0, 0}, {1, 0, 1, 1}};
    for (int c = 0; c < 6; c++) {
        new_graph();
        int x = input(FC_F32, SH(4)), y = input(FC_F32, SCALAR); /* rank-0 broadcasts */
        int z = add(ops[c], INS(x, y), (IrAttrs){0});
        EXPECT(ir_cval(g, z)->dtype == FC_BOOL, "compare dtype");
        output(z);
        const double *ins[] = {(const double[]){1, 2, 3, NAN}, (const double[]){2}};
        check1(ir_ops[ops[c]].name, ins, want[c], 0);
    }
    /* where: cond [2,1], a [1,3], b [] -> [2,3] */
    new_graph();
    int c = input(FC_BOOL, SH(2, 1)), a = input(FC_F64, SH(1, 3)), b = input(FC_F64, SCALAR);
    output(add(IR_OP_WHERE, INS(c, a, b), (IrAttrs){0}));
    const double *ins[] = {(const double[]){1, 0}, (const double[]){10, 20, 30}, (const double[]){-1}};
    check1("where", ins, (const double[]){10, 20, 30, -1, -1, -1}, 0);
}

/* Casts from f64 to every dtype: RNE, f8 saturation, int truncation/saturation, NaN -> 0. */
static void test_cast(void) {
    static const double x[] = {1 + 0x1p-9, 1 + 0x1p-8, 1 + 3 * 0x1p-8, 1 + 3 * 0x1p-9, 500, -1000, 17, 0.0009,
                               65519, 65520, 1e-8, 3.9, -3.9, NAN, INFINITY, -INFINITY, 1e10, -1e10, 1e19, 0.5};
    enum { N = sizeof x / sizeof x[0] };
    static const struct { FcDtype t; double want[N]; } cases[] = {
        {FC_BF16, {1, 1, 1 + 0x1p-6, 1 + 0x1p-7, 500, -1000, 17, 0x1.d8p-11, 65536, 65536, 0x1.58p-27, 3.90625,
                   -3.90625, NAN, INFINITY, -INFINITY, 0x1.2ap33, -0x1.2ap33, 0x1.16p63, 0.5}},
        {FC_F16, {1 + 0x1p-9, 1 + 0x1p-8, 1 + 3 * 0x1p-8, 1 + 3 * 0x1p-9, 500, -1000, 17, 0x1.d7cp-11, 65504, INFINITY,
                  0, 3.900390625, -3.900390625, NAN, INFINITY, -INFINITY, INFINITY, -INFINITY, INFINITY, 0.5}},
        {FC_F8E4M3, {1, 1, 1, 1, 448, -448, 16, 0x1p-10 * 0, 448, 448, 0, 4, -4, NAN, 448, -448, 448, -448, 448, 0.5}},
        {FC_F8E5M2, {1, 1, 1, 1, 512, -1024, 16, 0x1.cp-11, 57344, 57344, 0, 4, -4, NAN, INFINITY, -INFINITY, 57344,
                     -57344, 57344, 0.5}},
        {FC_I32, {1, 1, 1, 1, 500, -1000, 17, 0, 65519, 65520, 0, 3, -3, 0, 2147483647.0, -2147483648.0, 2147483647.0,
                  -2147483648.0, 2147483647.0, 0}},
        {FC_I64, {1, 1, 1, 1, 500, -1000, 17, 0, 65519, 65520, 0, 3, -3, 0, 0x1p63, -0x1p63, 1e10, -1e10, 0x1p63, 0}},
        {FC_I8, {1, 1, 1, 1, 127, -128, 17, 0, 127, 127, 0, 3, -3, 0, 127, -128, 127, -128, 127, 0}},
        {FC_BOOL, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
        {FC_F32, {1 + 0x1p-9, 1 + 0x1p-8, 1 + 3 * 0x1p-8, 1 + 3 * 0x1p-9, 500, -1000, 17, (float)0.0009, 65519, 65520,
                  (float)1e-8, (float)3.9, (float)-3.9, NAN, INFINITY, -INFINITY, 1e10, -1e10, (float)1e19, 0.5}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        new_graph();
        int v = input(FC_F64, SH(N));
        output(add(IR_OP_CAST, INS(v), (IrAttrs){.dtype = cases[c].t}));
        char what[64];
        snprintf(what, sizeof what, "cast to %s", fc_dtype_name(cases[c].t));
        const double *ins[] = {x};
        check1(what, ins, cases[c].want, 0);
    }
    /* exact storage bits: f8e4m3 448 is 0x7E, its NaN 0x7F; bf16 1 is 0x3F80 */
    new_graph();
    int v = input(FC_F64, SH(3));
    output(add(IR_OP_CAST, INS(v), (IrAttrs){.dtype = FC_F8E4M3}));
    output(add(IR_OP_CAST, INS(v), (IrAttrs){.dtype = FC_BF16}));
    double in3[] = {500, NAN, -448};
    void *ib[] = {in3};
    unsigned char o8[3];
    uint16_t o16[3];
    void *ob[] = {o8, o16};
    FcErr err = {0};
    REQUIRE(rt_interp_run(g, (const void *const *)ib, ob, &err) == FC_OK);
    EXPECT(o8[0] == 0x7E && (o8[1] & 0x7F) == 0x7F && o8[2] == 0xFE, "f8e4m3 bits %02x %02x %02x", o8[0], o8[1], o8[2]);
    EXPECT(o16[0] == 0x43FA && (o16[1] & 0x7FFF) > 0x7F80 && o16[2] == 0xC3E0, "bf16 bits %04x %04x %04x", o16[0], o16[1], o16[2]);
    /* i8: the edges of the saturating, truncating cast (and its bytes), integers saturating
     * into it, and back to f32 exactly */
    new_graph();
    v = input(FC_F64, SH(6));
    int vi = input(FC_I32, SH(6));
    int q = add(IR_OP_CAST, INS(v), (IrAttrs){.dtype = FC_I8});
    output(q);
    output(add(IR_OP_CAST, INS(vi), (IrAttrs){.dtype = FC_I8}));
    output(add(IR_OP_CAST, INS(q), (IrAttrs){.dtype = FC_F32}));
    double e6[] = {127.9, -128.9, 300, -1e10, NAN, -0.7}, i6[] = {1000, -1000, 128, -129, 127, -128};
    void *ib8[] = {e6, (int32_t[]){1000, -1000, 128, -129, 127, -128}};
    signed char q8[6], qi8[6];
    float qf[6];
    void *ob8[] = {q8, qi8, qf};
    REQUIRE(rt_interp_run(g, (const void *const *)ib8, ob8, &err) == FC_OK);
    static const signed char want8[] = {127, -128, 127, -128, 0, 0}, wanti8[] = {127, -128, 127, -128, 127, -128};
    for (int j = 0; j < 6; j++)
        EXPECT(q8[j] == want8[j] && qi8[j] == wanti8[j] && qf[j] == (float)want8[j], "i8 cast %d: %g -> %d, %g -> %d, back %g",
               j, e6[j], q8[j], i6[j], qi8[j], (double)qf[j]);
    /* bool and int to float */
    new_graph();
    v = input(FC_BOOL, SH(2));
    output(add(IR_OP_CAST, INS(v), (IrAttrs){.dtype = FC_F32}));
    check1("bool to f32", (const double *const[]){(const double[]){1, 0}}, (const double[]){1, 0}, 0);
}

/* ---- reductions -------------------------------------------------------------------------- */
static void test_reduce(void) {
    double x[24];
    for (int i = 0; i < 24; i++) x[i] = (i % 7) - 2.5 + 0.125 * i;
    static const IrOp ops[] = {IR_OP_SUM, IR_OP_MEAN, IR_OP_MAX, IR_OP_MIN};
    for (int c = 0; c < 4; c++)
        for (int keep = 0; keep < 2; keep++) {
            new_graph();
            int v = input(FC_F64, SH(2, 3, 4));
            /* axes given negative and unsorted: the shape rule normalizes them to {0, 2} */
            IrAttrs a = {LIST(-1, 0), .i = {keep}};
            int r = add(ops[c], INS(v), a);
            const IrNode *n = &g->nodes.data[g->nodes.len - 1];
            EXPECT(n->a.list[0] == 0 && n->a.list[1] == 2, "normalized axes");
            IrShape want_shape = keep ? SH(1, 3, 1) : SH(3);
            EXPECT(ir_shape_eq(&ir_cval(g, r)->shape, &want_shape), "reduce shape");
            output(r);
            double want[3];
            for (int j = 0; j < 3; j++) {
                double s = 0, mx = -INFINITY, mn = INFINITY;
                for (int i = 0; i < 2; i++)
                    for (int k = 0; k < 4; k++) {
                        double e = x[(i * 3 + j) * 4 + k];
                        s += e;
                        mx = e > mx ? e : mx;
                        mn = e < mn ? e : mn;
                    }
                want[j] = c == 0 ? s : c == 1 ? s / 8 : c == 2 ? mx : mn;
            }
            const double *ins[] = {x};
            check1(ir_ops[ops[c]].name, ins, want, 1e-15);
        }
    /* NaN propagates through max/min only in its own group; sum of i32 saturates */
    new_graph();
    int v = input(FC_F32, SH(2, 3));
    output(add(IR_OP_MAX, INS(v), (IrAttrs){LIST(1)}));
    output(add(IR_OP_MIN, INS(v), (IrAttrs){LIST(1)}));
    int w = input(FC_I32, SH(3));
    output(add(IR_OP_SUM, INS(w), (IrAttrs){LIST(0), .i = {1}}));
    double *o[3];
    FcErr err = {0};
    const double *ins[] = {(const double[]){1, NAN, 3, -1, -5, 2}, (const double[]){2e9, 2e9, 5}};
    REQUIRE(run(ins, o, &err) == FC_OK);
    EXPECT(isnan(o[0][0]) && o[0][1] == 2, "max NaN");
    EXPECT(isnan(o[1][0]) && o[1][1] == -5, "min NaN");
    EXPECT(o[2][0] == 2147483647.0, "i32 sum saturates: %g", o[2][0]);
    for (int k = 0; k < 3; k++) free(o[k]);
    /* reduce in bf16: the f64 sum is rounded once */
    new_graph();
    v = input(FC_BF16, SH(3));
    output(add(IR_OP_SUM, INS(v), (IrAttrs){LIST(0)}));
    check1("bf16 sum", (const double *const[]){(const double[]){256, 1, 1}}, (const double[]){258}, 0);
}

/* ---- composites -------------------------------------------------------------------------- */
static void test_composites(void) {
    /* softmax / log_softmax along axis 0 of [2, 2] */
    double x[4] = {1, 2, 3, 0};
    double e0 = 1 / (1 + exp(2)), e1 = 1 / (1 + exp(-2));
    new_graph();
    int v = input(FC_F64, SH(2, 2));
    output(add(IR_OP_SOFTMAX, INS(v), (IrAttrs){.i = {-2}}));
    check1("softmax", (const double *const[]){x}, (const double[]){e0, e1, 1 - e0, 1 - e1}, 1e-15);
    new_graph();
    v = input(FC_F64, SH(2, 2));
    output(add(IR_OP_LOG_SOFTMAX, INS(v), (IrAttrs){.i = {0}}));
    check1("log_softmax", (const double *const[]){x}, (const double[]){log(e0), log(e1), log(1 - e0), log(1 - e1)}, 1e-14);
    /* softmax with -inf entries and a NaN row */
    new_graph();
    v = input(FC_F32, SH(2, 2));
    output(add(IR_OP_SOFTMAX, INS(v), (IrAttrs){.i = {-1}}));
    check1("softmax -inf/NaN", (const double *const[]){(const double[]){-INFINITY, 5, NAN, 1}}, (const double[]){0, 1, NAN, NAN}, 0);

    /* layernorm over the last axis with gain and bias; biased variance */
    double lx[8] = {1, 2, 3, 6, -1, 0, 0, 5}, lg[4] = {1, 2, 0.5, -1}, lb[4] = {0.5, 0, -1, 2}, lw[8];
    for (int r = 0; r < 2; r++) {
        double m = 0, var = 0;
        for (int j = 0; j < 4; j++) m += lx[r * 4 + j] / 4;
        for (int j = 0; j < 4; j++) var += (lx[r * 4 + j] - m) * (lx[r * 4 + j] - m) / 4;
        for (int j = 0; j < 4; j++) lw[r * 4 + j] = (lx[r * 4 + j] - m) / sqrt(var + 1e-5) * lg[j] + lb[j];
    }
    new_graph();
    v = input(FC_F64, SH(2, 4));
    int gg = input(FC_F64, SH(4)), bb = input(FC_F64, SH(4));
    output(add(IR_OP_LAYERNORM, INS(v, gg, bb), (IrAttrs){LIST(-1), .i = {1, 1}, .f = 1e-5}));
    check1("layernorm", (const double *const[]){lx, lg, lb}, lw, 1e-14);
    /* over two trailing axes, no gain or bias: [2, 2, 2] normalizing [2, 2] */
    for (int r = 0; r < 2; r++) {
        double m = 0, var = 0;
        for (int j = 0; j < 4; j++) m += lx[r * 4 + j] / 4;
        for (int j = 0; j < 4; j++) var += (lx[r * 4 + j] - m) * (lx[r * 4 + j] - m) / 4;
        for (int j = 0; j < 4; j++) lw[r * 4 + j] = (lx[r * 4 + j] - m) / sqrt(var + 0.25);
    }
    new_graph();
    v = input(FC_F64, SH(2, 2, 2));
    output(add(IR_OP_LAYERNORM, INS(v), (IrAttrs){LIST(-1, -2), .f = 0.25}));
    check1("layernorm 2 axes", (const double *const[]){lx}, lw, 1e-14);
    /* bias without gain */
    for (int r = 0; r < 2; r++) {
        double m = 0, var = 0;
        for (int j = 0; j < 4; j++) m += lx[r * 4 + j] / 4;
        for (int j = 0; j < 4; j++) var += (lx[r * 4 + j] - m) * (lx[r * 4 + j] - m) / 4;
        for (int j = 0; j < 4; j++) lw[r * 4 + j] = (lx[r * 4 + j] - m) / sqrt(var + 1e-5) + lb[j];
    }
    new_graph();
    v = input(FC_F64, SH(2, 4));
    bb = input(FC_F64, SH(4));
    output(add(IR_OP_LAYERNORM, INS(v, bb), (IrAttrs){LIST(1), .i = {0, 1}, .f = 1e-5}));
    check1("layernorm bias only", (const double *const[]){lx, lb}, lw, 1e-14);

    /* rmsnorm with gain */
    for (int r = 0; r < 2; r++) {
        double ms = 0;
        for (int j = 0; j < 4; j++) ms += lx[r * 4 + j] * lx[r * 4 + j] / 4;
        for (int j = 0; j < 4; j++) lw[r * 4 + j] = lx[r * 4 + j] / sqrt(ms + 1e-6) * lg[j];
    }
    new_graph();
    v = input(FC_F64, SH(2, 4));
    gg = input(FC_F64, SH(4));
    output(add(IR_OP_RMSNORM, INS(v, gg), (IrAttrs){LIST(-1), .i = {1}, .f = 1e-6}));
    check1("rmsnorm", (const double *const[]){lx, lg}, lw, 1e-14);

    /* causal_mask on [3, 4] (Tq=3, Tk=4): keep j <= i + 1 */
    double cm[12], cw[12];
    for (int i = 0; i < 12; i++) cm[i] = i + 0.5;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) cw[i * 4 + j] = j <= i + 1 ? cm[i * 4 + j] : -1e4;
    new_graph();
    v = input(FC_F32, SH(1, 3, 4));
    output(add(IR_OP_CAUSAL_MASK, INS(v), (IrAttrs){.f = -1e4}));
    check1("causal_mask", (const double *const[]){cm}, cw, 0);

    /* gelu exact and tanh */
    new_graph();
    v = input(FC_F64, SH(2));
    output(add(IR_OP_GELU, INS(v), (IrAttrs){.i = {IR_APPROX_NONE}}));
    check1("gelu", (const double *const[]){(const double[]){1, -0.5}}, (const double[]){0.8413447460685429, -0.15426876936299344}, 1e-15);
    new_graph();
    v = input(FC_F64, SH(2));
    output(add(IR_OP_GELU, INS(v), (IrAttrs){.i = {IR_APPROX_TANH}}));
    check1("gelu tanh", (const double *const[]){(const double[]){1, -0.5}}, (const double[]){0.8411919906082768, -0.15428599017485606}, 1e-15);
}

/* attention by hand: q [2, 1, 2, 2] (batch 2 broadcast against k/v's 1), k [1, 1, 3, 2], v [1, 1, 3, 1] */
static void test_attention(void) {
    double q[8] = {1, 0, 0, 1, 0.5, 0.5, -1, 2}, k[6] = {1, 1, 0, 2, -1, 0}, vv[3] = {1, 10, 100};
    for (int causal = 0; causal < 2; causal++) {
        double want[4];
        for (int b = 0; b < 2; b++)
            for (int i = 0; i < 2; i++) {
                double s[3], mx = -INFINITY, sum = 0, o = 0;
                for (int j = 0; j < 3; j++) {
                    s[j] = 0.75 * (q[(b * 2 + i) * 2] * k[j * 2] + q[(b * 2 + i) * 2 + 1] * k[j * 2 + 1]);
                    if (causal && j > i + 1) s[j] = -INFINITY;
                    if (s[j] > mx) mx = s[j];
                }
                for (int j = 0; j < 3; j++) sum += exp(s[j] - mx);
                for (int j = 0; j < 3; j++) o += exp(s[j] - mx) / sum * vv[j];
                want[b * 2 + i] = o;
            }
        new_graph();
        int a = input(FC_F64, SH(2, 1, 2, 2)), b = input(FC_F64, SH(1, 1, 3, 2)), c = input(FC_F64, SH(1, 1, 3, 1));
        int o = add(IR_OP_ATTENTION, INS(a, b, c), (IrAttrs){.i = {causal}, .f = 0.75});
        EXPECT(ir_shape_eq(&ir_cval(g, o)->shape, &(IrShape){4, {2, 1, 2, 1}}), "attention shape");
        output(o);
        check1(causal ? "attention causal" : "attention", (const double *const[]){q, k, vv}, want, 1e-14);
    }
}

/* ---- shape ops, generators, gather, matmul ------------------------------------------------- */
static void test_shape_ops(void) {
    double x[24];
    for (int i = 0; i < 24; i++) x[i] = i * 1.5 - 7;
    /* reshape keeps the row-major order */
    new_graph();
    int v = input(FC_F32, SH(2, 3, 4));
    output(add(IR_OP_RESHAPE, INS(v), (IrAttrs){LIST(4, -1)}));
    check1("reshape", (const double *const[]){x}, x, 0);
    /* transpose [2,3,4] by [2,0,1] -> [4,2,3]; out[a][b][c] = x[b][c][a] */
    double w[24];
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 2; b++)
            for (int c = 0; c < 3; c++) w[(a * 2 + b) * 3 + c] = x[(b * 3 + c) * 4 + a];
    new_graph();
    v = input(FC_F64, SH(2, 3, 4));
    output(add(IR_OP_TRANSPOSE, INS(v), (IrAttrs){LIST(-1, 0, 1)}));
    check1("transpose", (const double *const[]){x}, w, 0);
    /* broadcast [3,1] -> [2,3,4] */
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 4; c++) w[(a * 3 + b) * 4 + c] = x[b];
    new_graph();
    v = input(FC_F64, SH(3, 1));
    output(add(IR_OP_BROADCAST, INS(v), (IrAttrs){LIST(2, 3, 4)}));
    check1("broadcast", (const double *const[]){x}, w, 0);
    /* concat [2,1] and [2,2] along axis -1 */
    new_graph();
    v = input(FC_F64, SH(2, 1));
    int u = input(FC_F64, SH(2, 2));
    output(add(IR_OP_CONCAT, INS(v, u), (IrAttrs){.i = {-1}}));
    check1("concat", (const double *const[]){(const double[]){1, 2}, (const double[]){3, 4, 5, 6}}, (const double[]){1, 3, 4, 2, 5, 6}, 0);
    /* split [2,5] into 2 + 3 along axis 1 (two results) */
    new_graph();
    v = input(FC_F64, SH(2, 5));
    int s0 = add(IR_OP_SPLIT, INS(v), (IrAttrs){LIST(2, 3), .i = {-1}});
    output(s0);
    output(s0 + 1);
    double *o[2];
    FcErr err = {0};
    REQUIRE(run((const double *const[]){x}, o, &err) == FC_OK);
    static const int w0[] = {0, 1, 5, 6}, w1[] = {2, 3, 4, 7, 8, 9};
    for (int i = 0; i < 4; i++) EXPECT(o[0][i] == x[w0[i]], "split 0 [%d]", i);
    for (int i = 0; i < 6; i++) EXPECT(o[1][i] == x[w1[i]], "split 1 [%d]", i);
    free(o[0]);
    free(o[1]);
    /* slice with a negative step: x[5:-8:-2] on [7] -> indices 5, 3, 1 */
    new_graph();
    v = input(FC_F64, SH(7));
    output(add(IR_OP_SLICE, INS(v), (IrAttrs){.i = {0, 5, -8, -2}}));
    check1("slice negative step", (const double *const[]){x}, (const double[]){x[5], x[3], x[1]}, 0);
    /* slice axis -1 of [2,5] from -4 to 100 step 2 -> columns 1, 3 */
    new_graph();
    v = input(FC_F64, SH(2, 5));
    output(add(IR_OP_SLICE, INS(v), (IrAttrs){.i = {-1, -4, 100, 2}}));
    check1("slice", (const double *const[]){x}, (const double[]){x[1], x[3], x[6], x[8]}, 0);
}

static void test_generators(void) {
    new_graph();
    output(add(IR_OP_IOTA, NULL, 0, (IrAttrs){LIST(2, 3), .i = {1}, .dtype = FC_I32}));
    output(add(IR_OP_IOTA, NULL, 0, (IrAttrs){LIST(2, 3), .i = {-2}, .dtype = FC_F32}));
    output(add(IR_OP_FULL, NULL, 0, (IrAttrs){LIST(2), .f = 2.5, .dtype = FC_F32}));
    output(add(IR_OP_FULL, NULL, 0, (IrAttrs){.nlist = 0, .f = 1 + 0x1p-9, .dtype = FC_BF16}));
    double *o[4];
    FcErr err = {0};
    REQUIRE(run(NULL, o, &err) == FC_OK);
    static const double i1[] = {0, 1, 2, 0, 1, 2}, i0[] = {0, 0, 0, 1, 1, 1};
    for (int i = 0; i < 6; i++) EXPECT(o[0][i] == i1[i] && o[1][i] == i0[i], "iota [%d]", i);
    EXPECT(o[2][0] == 2.5 && o[2][1] == 2.5, "full");
    EXPECT(o[3][0] == 1, "full bf16 rounds 1+2^-9 to 1: %.17g", o[3][0]);
    for (int k = 0; k < 4; k++) free(o[k]);
}

/* f8 scaling: x * s rounded to the slot's format (saturating), q / s back; the scale is the
 * graph's slot table's; a fused kernel's meaning (RT_ROUND_AT_OUTPUTS) keeps q in f32 inside
 * the block and rounds it at an output. */
static void test_fp8(void) {
    new_graph();
    REQUIRE(ir_add_fp8_slot(g, FC_F8E4M3) == 0 && ir_add_fp8_slot(g, FC_F8E5M2) == 1);
    g->fp8.data[0].scale = 4;
    g->fp8.data[1].scale = 0x1p-4;
    int x = input(FC_F32, SH(5)), y = input(FC_F32, SH(2));
    int s0 = add(IR_OP_FP8_SCALE, NULL, 0, (IrAttrs){.i = {0}}), s1 = add(IR_OP_FP8_SCALE, NULL, 0, (IrAttrs){.i = {1}});
    int q = add(IR_OP_FP8_QUANT, INS(x, s0), (IrAttrs){.i = {0}});
    output(add(IR_OP_FP8_DEQUANT, INS(q, s0), (IrAttrs){.dtype = FC_F32}));
    output(q);
    output(s0);
    output(add(IR_OP_FP8_QUANT, INS(y, s1), (IrAttrs){.i = {1}}));
    static const double xv[] = {1.0, 0.3, -100, 200, 0.02}, yv[] = {2e6, -3};
    const double *ins[] = {xv, yv};
    /* x * 4 = 4, 1.2, -400, 800, 0.08 in E4M3: 4, 1.25, -384 (a tie, to even), 448 (saturated),
     * 0.078125 (10 quanta of 2^-7) */
    static const double want_q[] = {4, 1.25, -384, 448, 0.078125};
    double *o[4], *w[4];
    FcErr err = {0};
    REQUIRE(run(ins, o, &err) == FC_OK);
    for (int i = 0; i < 5; i++) {
        EXPECT(o[1][i] == want_q[i], "fp8_quant [%d]: got %.17g, want %.17g", i, o[1][i], want_q[i]);
        EXPECT(o[0][i] == want_q[i] / 4, "fp8_dequant [%d]: got %.17g, want %.17g", i, o[0][i], want_q[i] / 4);
    }
    EXPECT(o[2][0] == 4, "fp8_scale: %g", o[2][0]);
    /* y / 16 = 125000 (saturated to E5M2's 57344, not inf), -0.1875 (exact in E5M2) */
    EXPECT(o[3][0] == 57344 && o[3][1] == -0.1875, "fp8_quant e5m2: %.17g %.17g", o[3][0], o[3][1]);
    /* a fused kernel's meaning keeps q = x * 4 in f32 (unsaturated), so its dequant is x as
     * f32 holds it; q itself, a block output, is rounded there */
    REQUIRE(run_mode(ins, w, RT_ROUND_AT_OUTPUTS, &err) == FC_OK);
    for (int i = 0; i < 5; i++) {
        EXPECT(w[0][i] == (double)(float)xv[i], "fp8_dequant in a kernel [%d]: got %.17g", i, w[0][i]);
        EXPECT(w[1][i] == want_q[i], "fp8_quant at an output [%d]: got %.17g", i, w[1][i]);
    }
    /* another scale in the table, another result: the reference uses the program's scales */
    g->fp8.data[0].scale = 0.5;
    double *h[4];
    REQUIRE(run(ins, h, &err) == FC_OK);
    EXPECT(h[1][3] == 96 && h[0][3] == 192, "scale 0.5: 200 -> %g -> %g", h[1][3], h[0][3]);
    for (int k = 0; k < 4; k++) free(o[k]), free(w[k]), free(h[k]);
}

static void test_gather(void) {
    double table[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    new_graph();
    int t = input(FC_F32, SH(4, 2)), ids = input(FC_I32, SH(2, 2));
    output(add(IR_OP_GATHER, INS(t, ids), (IrAttrs){0}));
    check1("gather", (const double *const[]){table, (const double[]){3, 0, 1, 3}}, (const double[]){7, 8, 1, 2, 3, 4, 7, 8}, 0);
    FcErr err = {0};
    FcStatus st = run((const double *const[]){table, (const double[]){3, 0, 1, 4}}, NULL, &err);
    EXPECT(st == FC_ERR_RUNTIME_DATA, "status %d", st);
    EXPECT(strcmp(err.msg, "t.tf:3:7: gather: id 4 at ids[1, 1] is out of range [0, 4)") == 0, "message: %s", err.msg);
    /* i64 ids, negative, rank-1 table */
    new_graph();
    t = input(FC_F64, SH(4));
    ids = input(FC_I64, SH(3));
    output(add(IR_OP_GATHER, INS(t, ids), (IrAttrs){0}));
    st = run((const double *const[]){table, (const double[]){0, -1, 2}}, NULL, &err);
    EXPECT(st == FC_ERR_RUNTIME_DATA && strcmp(err.msg, "t.tf:3:7: gather: id -1 at ids[1] is out of range [0, 4)") == 0,
           "message: %s", err.msg);
}

static void test_scatter_add(void) {
    /* rows 0 and 2 named twice (summed in the ids' order), row 1 never (0) */
    double src[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    new_graph();
    int x = input(FC_F32, SH(2, 2, 2)), ids = input(FC_I32, SH(2, 2));
    output(add(IR_OP_SCATTER_ADD, INS(x, ids), (IrAttrs){.i = {4}}));
    check1("scatter_add", (const double *const[]){src, (const double[]){2, 0, 2, 3}},
           (const double[]){3, 4, 0, 0, 6, 8, 7, 8}, 0);
    FcErr err = {0};
    FcStatus st = run((const double *const[]){src, (const double[]){2, 0, 4, 3}}, NULL, &err);
    EXPECT(st == FC_ERR_RUNTIME_DATA, "status %d", st);
    EXPECT(strcmp(err.msg, "t.tf:3:7: scatter_add: id 4 at ids[1, 0] is out of range [0, 4)") == 0, "message: %s",
           err.msg);
    /* rank-1 src, i64 ids, a negative id */
    new_graph();
    x = input(FC_F64, SH(3));
    ids = input(FC_I64, SH(3));
    output(add(IR_OP_SCATTER_ADD, INS(x, ids), (IrAttrs){.i = {2}}));
    check1("scatter_add rank 1", (const double *const[]){src, (const double[]){1, 1, 0}}, (const double[]){3, 3}, 0);
    st = run((const double *const[]){src, (const double[]){0, -1, 1}}, NULL, &err);
    EXPECT(st == FC_ERR_RUNTIME_DATA &&
               strcmp(err.msg, "t.tf:3:7: scatter_add: id -1 at ids[1] is out of range [0, 2)") == 0,
           "message: %s", err.msg);
}

static void test_matmul(void) {
    /* a [2, 2, 3] @ b [3, 2]: b broadcast over the batch */
    double a[12], b[6], w[8];
    for (int i = 0; i < 12; i++) a[i] = i - 5.5;
    for (int i = 0; i < 6; i++) b[i] = 0.5 * i - 1;
    for (int z = 0; z < 2; z++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) {
                double s = 0;
                for (int k = 0; k < 3; k++) s += a[(z * 2 + i) * 3 + k] * b[k * 2 + j];
                w[(z * 2 + i) * 2 + j] = s;
            }
    new_graph();
    int x = input(FC_F64, SH(2, 2, 3)), y = input(FC_F64, SH(3, 2));
    output(add(IR_OP_MATMUL, INS(x, y), (IrAttrs){0}));
    check1("matmul", (const double *const[]){a, b}, w, 1e-15);
    /* [1, 2, 3] @ [2, 3, 1]: both batch dims broadcast -> [2, 2, 1] */
    double w2[4];
    for (int z = 0; z < 2; z++)
        for (int i = 0; i < 2; i++) {
            double s = 0;
            for (int k = 0; k < 3; k++) s += a[i * 3 + k] * b[z * 3 + k];
            w2[z * 2 + i] = s;
        }
    new_graph();
    x = input(FC_F64, SH(1, 2, 3));
    y = input(FC_F64, SH(2, 3, 1));
    output(add(IR_OP_MATMUL, INS(x, y), (IrAttrs){0}));
    check1("matmul batch broadcast", (const double *const[]){a, b}, w2, 1e-15);
    /* f16: the f64 dot product rounded once: 2048 + 1 + 1 = 2050 exactly */
    new_graph();
    x = input(FC_F16, SH(1, 3));
    y = input(FC_F16, SH(3, 1));
    output(add(IR_OP_MATMUL, INS(x, y), (IrAttrs){0}));
    check1("matmul f16", (const double *const[]){(const double[]){2048, 1, 1}, (const double[]){1, 1, 1}}, (const double[]){2050}, 0);
}

/* Equal doubles, -0 told from +0, any NaN equal to any NaN. */
static bool same_bits(double a, double b) { return isnan(a) ? isnan(b) : a == b && signbit(a) == signbit(b); }

/* Random123's known answers for philox4x32-10: counter, key, the four output words. */
static void test_philox(void) {
    static const uint32_t kat[3][10] = {
        {0, 0, 0, 0, 0, 0, 0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u},
        {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu,
         0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu},
        {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u,
         0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u},
    };
    for (int v = 0; v < 3; v++) {
        uint32_t r[4];
        rt_interp_philox4x32_10(kat[v], kat[v] + 4, r);
        for (int w = 0; w < 4; w++) EXPECT(r[w] == kat[v][6 + w], "philox vector %d word %d: %08x, want %08x", v, w, r[w], kat[v][6 + w]);
    }
}

static void test_training(void) {
    /* dropout_mask: word 0 of Philox(0, key 0) is 0x6627e8d5: kept at p = that / 2^32, not above */
    new_graph();
    output(add(IR_OP_DROPOUT_MASK, NULL, 0, (IrAttrs){LIST(1), .f = 0x6627e8d5 / 4294967296.0, .i = {0}}));
    output(add(IR_OP_DROPOUT_MASK, NULL, 0, (IrAttrs){LIST(1), .f = (0x6627e8d5 + 1) / 4294967296.0, .i = {0}}));
    output(add(IR_OP_DROPOUT_MASK, NULL, 0, (IrAttrs){LIST(3, 7), .f = 0.4, .i = {-5}}));
    double *o[3];
    FcErr err = {0};
    REQUIRE(run(NULL, o, &err) == FC_OK);
    EXPECT(o[0][0] == 1 && o[1][0] == 0, "threshold at the known answer: %g %g", o[0][0], o[1][0]);
    for (int i = 0; i < 21; i++) EXPECT(o[2][i] == dropout_ref_kept(0.4, -5, i), "mask [%d]", i);
    for (int k = 0; k < 3; k++) free(o[k]);

    /* dropout: kept ? x * scale : +0 with the scale rounded to x's dtype; p = 0 is the identity */
    double x[8] = {1.5, -2, 3.25, -0.0, NAN, 7, -1e30, 0.125};
    new_graph();
    int a = input(FC_F32, SH(2, 4)), b = input(FC_F64, SH(8));
    output(add(IR_OP_DROPOUT, INS(a), (IrAttrs){.f = 0.3, .i = {11}}));
    output(add(IR_OP_DROPOUT, INS(b), (IrAttrs){.f = 0, .i = {11}}));
    output(add(IR_OP_DROPOUT, INS(b), (IrAttrs){.f = 0.7, .i = {-3}}));
    REQUIRE(run((const double *const[]){x, x}, o, &err) == FC_OK);
    double s32 = (float)(1 / 0.7), s64 = 1 / (1 - 0.7);
    int dropped = 0;
    for (int i = 0; i < 8; i++) {
        double w32 = dropout_ref_kept(0.3, 11, i) ? (double)(float)((double)(float)x[i] * s32) : 0.0;
        double w64 = dropout_ref_kept(0.7, -3, i) ? x[i] * s64 : 0.0;
        dropped += !dropout_ref_kept(0.7, -3, i);
        EXPECT(same_bits(o[0][i], w32), "dropout f32 [%d]: %.17g want %.17g", i, o[0][i], w32);
        EXPECT(same_bits(o[1][i], x[i]), "dropout p=0 [%d]: %.17g", i, o[1][i]);
        EXPECT(same_bits(o[2][i], w64), "dropout f64 [%d]: %.17g want %.17g", i, o[2][i], w64);
    }
    EXPECT(dropped > 0 && dropped < 8, "p = 0.7 dropped %d of 8", dropped);
    for (int k = 0; k < 3; k++) free(o[k]);

    /* cross_entropy: mean over rows of logsumexp(row) - row[label] */
    double lg[6] = {1, 2, 3, -1, 0.5, 4}, lab[2] = {0, 2};
    double want = 0;
    for (int r = 0; r < 2; r++) {
        double se = 0;
        for (int k = 0; k < 3; k++) se += exp(lg[3 * r + k]);
        want += (log(se) - lg[3 * r + (int)lab[r]]) / 2;
    }
    new_graph();
    int l = input(FC_F64, SH(2, 3)), y = input(FC_I32, SH(2));
    output(add(IR_OP_CROSS_ENTROPY, INS(l, y), (IrAttrs){0}));
    check1("cross_entropy", (const double *const[]){lg, lab}, (const double[]){want}, 1e-15);
    /* rank-1 logits, a rank-0 label; huge logits (max-subtracted) */
    new_graph();
    l = input(FC_F32, SH(3));
    y = input(FC_I64, SCALAR);
    output(add(IR_OP_CROSS_ENTROPY, INS(l, y), (IrAttrs){0}));
    check1("cross_entropy rank 1", (const double *const[]){(const double[]){1000, 1001, 999}, (const double[]){1}},
           (const double[]){(float)(log(exp(-1.0) + 1 + exp(-2.0)))}, 0);
    /* a label outside [0, C) is a data error naming it */
    new_graph();
    l = input(FC_F32, SH(2, 2, 3));
    y = input(FC_I32, SH(2, 2));
    output(add(IR_OP_CROSS_ENTROPY, INS(l, y), (IrAttrs){0}));
    double big[12] = {0};
    FcStatus st = run((const double *const[]){big, (const double[]){0, 2, 3, 1}}, NULL, &err);
    EXPECT(st == FC_ERR_RUNTIME_DATA && strcmp(err.msg, "t.tf:3:7: cross_entropy: label 3 at labels[1, 0] is out of range [0, 3)") == 0,
           "%d %s", st, err.msg);
    st = run((const double *const[]){big, (const double[]){-1, 0, 0, 0}}, NULL, &err);
    EXPECT(st == FC_ERR_RUNTIME_DATA && strcmp(err.msg, "t.tf:3:7: cross_entropy: label -1 at labels[0, 0] is out of range [0, 3)") == 0,
           "%d %s", st, err.msg);
}

/* ---- composites against their primitive expansions, on random inputs ------------------------- */
static double *randn(int64_t n, uint64_t seed) {
    double *p = malloc(sizeof(double) * (size_t)n);
    REQUIRE(p);
    rt_host_fill_normal(FC_F64, p, n, seed);
    return p;
}

static void expect_outputs_agree(const char *what, const double *const *ins, double tol) {
    double *o[2];
    FcErr err = {0};
    FcStatus st = run(ins, o, &err);
    EXPECT(st == FC_OK, "%s: %s", what, err.msg);
    if (st != FC_OK) return;
    int64_t n = numel_of(g->outputs.data[0]);
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(o[0][i] - o[1][i]) / (1 + fabs(o[1][i]));
        if (!(d <= worst)) worst = d;
    }
    EXPECT(worst <= tol, "%s: composite and expansion differ by %g", what, worst);
    free(o[0]);
    free(o[1]);
}

static void test_cross_checks(void) {
    IrAttrs none = {0};
    /* softmax(x, axis=1) of [3, 7, 5] vs exp(x - max) / sum */
    new_graph();
    int x = input(FC_F64, SH(3, 7, 5));
    output(add(IR_OP_SOFTMAX, INS(x), (IrAttrs){.i = {1}}));
    int m = add(IR_OP_MAX, INS(x), (IrAttrs){LIST(1), .i = {1}});
    int e = add(IR_OP_EXP, INS(add(IR_OP_SUB, INS(x, m), none)), none);
    int s = add(IR_OP_SUM, INS(e), (IrAttrs){LIST(1), .i = {1}});
    output(add(IR_OP_DIV, INS(e, s), none));
    double *r = randn(105, 11);
    expect_outputs_agree("softmax", (const double *const[]){r}, 1e-15);
    /* log_softmax: x - max - log(sum(exp(x - max))) */
    new_graph();
    x = input(FC_F64, SH(3, 7, 5));
    output(add(IR_OP_LOG_SOFTMAX, INS(x), (IrAttrs){.i = {-1}}));
    m = add(IR_OP_MAX, INS(x), (IrAttrs){LIST(2), .i = {1}});
    int d = add(IR_OP_SUB, INS(x, m), none);
    s = add(IR_OP_SUM, INS(add(IR_OP_EXP, INS(d), none)), (IrAttrs){LIST(2), .i = {1}});
    output(add(IR_OP_SUB, INS(d, add(IR_OP_LOG, INS(s), none)), none));
    expect_outputs_agree("log_softmax", (const double *const[]){r}, 1e-14);
    /* layernorm over the last two axes with gain and bias */
    new_graph();
    x = input(FC_F64, SH(3, 7, 5));
    int gg = input(FC_F64, SH(7, 5)), bb = input(FC_F64, SH(7, 5));
    output(add(IR_OP_LAYERNORM, INS(x, gg, bb), (IrAttrs){LIST(1, 2), .i = {1, 1}, .f = 1e-5}));
    m = add(IR_OP_MEAN, INS(x), (IrAttrs){LIST(1, 2), .i = {1}});
    d = add(IR_OP_SUB, INS(x, m), none);
    int var = add(IR_OP_MEAN, INS(add(IR_OP_SQUARE, INS(d), none)), (IrAttrs){LIST(1, 2), .i = {1}});
    int eps = add(IR_OP_FULL, NULL, 0, (IrAttrs){.f = 1e-5, .dtype = FC_F64});
    int rs = add(IR_OP_RSQRT, INS(add(IR_OP_ADD, INS(var, eps), none)), none);
    output(add(IR_OP_ADD, INS(add(IR_OP_MUL, INS(add(IR_OP_MUL, INS(d, rs), none), gg), none), bb), none));
    double *r2 = randn(35, 12), *r3 = randn(35, 13);
    expect_outputs_agree("layernorm", (const double *const[]){r, r2, r3}, 1e-13);
    /* rmsnorm */
    new_graph();
    x = input(FC_F64, SH(3, 7, 5));
    gg = input(FC_F64, SH(5));
    output(add(IR_OP_RMSNORM, INS(x, gg), (IrAttrs){LIST(2), .i = {1}, .f = 1e-6}));
    var = add(IR_OP_MEAN, INS(add(IR_OP_MUL, INS(x, x), none)), (IrAttrs){LIST(2), .i = {1}});
    eps = add(IR_OP_FULL, NULL, 0, (IrAttrs){.f = 1e-6, .dtype = FC_F64});
    rs = add(IR_OP_RSQRT, INS(add(IR_OP_ADD, INS(var, eps), none)), none);
    output(add(IR_OP_MUL, INS(add(IR_OP_MUL, INS(x, rs), none), gg), none));
    expect_outputs_agree("rmsnorm", (const double *const[]){r, r2}, 1e-13);
    /* gelu tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
    new_graph();
    x = input(FC_F64, SH(105));
    output(add(IR_OP_GELU, INS(x), (IrAttrs){.i = {IR_APPROX_TANH}}));
    int c1 = add(IR_OP_FULL, NULL, 0, (IrAttrs){.f = 0.044715, .dtype = FC_F64});
    int c2 = add(IR_OP_FULL, NULL, 0, (IrAttrs){.f = sqrt(2 / 3.14159265358979323846), .dtype = FC_F64});
    int c3 = add(IR_OP_FULL, NULL, 0, (IrAttrs){.f = 0.5, .dtype = FC_F64});
    int one = add(IR_OP_FULL, NULL, 0, (IrAttrs){.f = 1, .dtype = FC_F64});
    int x3 = add(IR_OP_MUL, INS(add(IR_OP_MUL, INS(x, x), none), x), none);
    int in = add(IR_OP_MUL, INS(c2, add(IR_OP_ADD, INS(x, add(IR_OP_MUL, INS(c1, x3), none)), none)), none);
    int t = add(IR_OP_ADD, INS(one, add(IR_OP_TANH, INS(in), none)), none);
    output(add(IR_OP_MUL, INS(add(IR_OP_MUL, INS(c3, x), none), t), none));
    expect_outputs_agree("gelu tanh", (const double *const[]){r}, 1e-15);
    /* causal attention [2, 3, 5, 4] x [2, 3, 6, 4] x [2, 3, 6, 3] vs its definition */
    new_graph();
    int q = input(FC_F64, SH(2, 3, 5, 4)), k = input(FC_F64, SH(2, 3, 6, 4)), v = input(FC_F64, SH(2, 3, 6, 3));
    output(add(IR_OP_ATTENTION, INS(q, k, v), (IrAttrs){.i = {1}, .f = 0.5}));
    int kt = add(IR_OP_TRANSPOSE, INS(k), (IrAttrs){LIST(0, 1, 3, 2)});
    int sc = add(IR_OP_MUL, INS(add(IR_OP_MATMUL, INS(q, kt), none), add(IR_OP_FULL, NULL, 0, (IrAttrs){.f = 0.5, .dtype = FC_F64})), none);
    int p = add(IR_OP_SOFTMAX, INS(add(IR_OP_CAUSAL_MASK, INS(sc), (IrAttrs){.f = -INFINITY})), (IrAttrs){.i = {-1}});
    output(add(IR_OP_MATMUL, INS(p, v), none));
    double *qa = randn(120, 21), *ka = randn(144, 22), *va = randn(108, 23);
    expect_outputs_agree("attention", (const double *const[]){qa, ka, va}, 1e-13);
    free(qa);
    free(ka);
    free(va);
    free(r);
    free(r2);
    free(r3);
}

/* ---- rounding: the interpreter's private rounding against host.c's ------------------------- */
static void test_rounding_agrees_with_host(void) {
    /* every bit pattern decodes alike: cast narrow -> f64 through the interpreter */
    static const FcDtype narrow[] = {FC_F16, FC_BF16, FC_F8E4M3, FC_F8E5M2};
    for (int c = 0; c < 4; c++) {
        FcDtype t = narrow[c];
        int64_t n = fc_dtype_size(t) == 2 ? 65536 : 256;
        new_graph();
        int x = input(t, SH(n));
        output(add(IR_OP_CAST, INS(x), (IrAttrs){.dtype = FC_F64}));
        output(add(IR_OP_CAST, INS(add(IR_OP_CAST, INS(x), (IrAttrs){.dtype = FC_F64})), (IrAttrs){.dtype = t}));
        unsigned char *bits = malloc((size_t)n * 2), *back = malloc((size_t)n * 2);
        double *dec = malloc(sizeof(double) * (size_t)n);
        REQUIRE(bits && back && dec);
        for (int64_t i = 0; i < n; i++) {
            if (n == 256) bits[i] = (unsigned char)i;
            else { uint16_t b16 = (uint16_t)i; memcpy(bits + 2 * i, &b16, 2); }
        }
        void *ib[] = {bits}, *ob[] = {dec, back};
        FcErr err = {0};
        REQUIRE(rt_interp_run(g, (const void *const *)ib, ob, &err) == FC_OK);
        int bad = 0;
        for (int64_t i = 0; i < n; i++) {
            double h = rt_host_load(t, bits, i);
            if (!(h == dec[i] || (isnan(h) && isnan(dec[i])))) bad++;
            if (!isnan(h) && memcmp(back + i * (int64_t)fc_dtype_size(t), bits + i * (int64_t)fc_dtype_size(t), fc_dtype_size(t)) != 0) bad++;
        }
        EXPECT(bad == 0, "%s: %d bit patterns decode or round-trip differently", fc_dtype_name(t), bad);
        free(bits);
        free(back);
        free(dec);
    }
    /* random doubles over a wide exponent range, and the midpoints between neighbours,
     * round alike to every dtype */
    enum { N = 20000 };
    double *x = malloc(sizeof(double) * N);
    REQUIRE(x);
    rt_host_fill_normal(FC_F64, x, N, 99);
    for (int i = 0; i < N; i++) {
        if (i % 4 == 1) x[i] = ldexp(x[i], (i % 97) - 60);
        if (i % 4 == 2) x[i] = ldexp(x[i], (i % 41) - 20);
        if (i % 4 == 3) { /* an exact tie in bf16/f8 */
            double b = rt_host_round(FC_BF16, x[i] * 100);
            x[i] = b + 0.5 * (rt_host_round(FC_BF16, b * (1 + 0x1p-7)) - b);
        }
    }
    for (int t = FC_F32; t < FC_DTYPE_COUNT; t++) {
        new_graph();
        int v = input(FC_F64, SH(N));
        output(add(IR_OP_CAST, INS(v), (IrAttrs){.dtype = (FcDtype)t}));
        double *o[1];
        FcErr err = {0};
        REQUIRE(run((const double *const[]){x}, o, &err) == FC_OK);
        int bad = 0;
        for (int i = 0; i < N; i++) {
            double h = rt_host_round((FcDtype)t, x[i]);
            if (!(h == o[0][i] || (isnan(h) && isnan(o[0][i])))) {
                if (bad < 3) fprintf(stderr, "%s: %.17g -> interp %.17g, host %.17g\n", fc_dtype_name((FcDtype)t), x[i], o[0][i], h);
                bad++;
            }
        }
        EXPECT(bad == 0, "%s: %d values round differently", fc_dtype_name((FcDtype)t), bad);
        free(o[0]);
    }
    free(x);
}

/* ---- memory: values shared, outputs that are inputs, fault injection ------------------------- */
static void build_mixed_graph(void) {
    new_graph();
    int x = input(FC_F32, SH(3, 5)), w = input(FC_BF16, SH(5, 4)), t = input(FC_F32, SH(6, 4)), ids = input(FC_I32, SH(2));
    IrAttrs none = {0};
    int sq = add(IR_OP_MUL, INS(x, x), none); /* one value read twice by one node */
    int ln = add(IR_OP_LAYERNORM, INS(sq), (IrAttrs){LIST(-1), .f = 1e-5});
    int mm = add(IR_OP_MATMUL, INS(add(IR_OP_CAST, INS(ln), (IrAttrs){.dtype = FC_BF16}), w), none);
    int ga = add(IR_OP_GATHER, INS(t, ids), none);
    int c = add(IR_OP_CONCAT, INS(add(IR_OP_CAST, INS(mm), (IrAttrs){.dtype = FC_F32}), ga), (IrAttrs){.i = {0}});
    add(IR_OP_EXP, INS(c), none); /* a dead value */
    output(add(IR_OP_SOFTMAX, INS(c), (IrAttrs){.i = {-1}}));
    output(x); /* a block input returned as is */
    output(sq);
}

static void test_memory(void) {
    double *xs = randn(15, 1), *ws = randn(20, 2), *ts = randn(24, 3);
    const double ids[] = {5, 0};
    const double *ins[] = {xs, ws, ts, ids};
    build_mixed_graph();
    double *o[3];
    FcErr err = {0};
    REQUIRE(run(ins, o, &err) == FC_OK);
    for (int i = 0; i < 15; i++) EXPECT(o[1][i] == (double)(float)xs[i] && o[2][i] == (double)(float)((float)xs[i] * (float)xs[i]), "passthrough");
    for (int k = 0; k < 3; k++) free(o[k]);
    /* fail every allocation in turn: each failure is FC_ERR_NOMEM, then success (leaks show in ASan) */
    int fails = 0;
    for (long n = 1; n < 200; n++) {
        fc_alloc_fail_at(n);
        FcStatus st = run(ins, NULL, &err);
        fc_alloc_fail_at(0);
        if (st == FC_OK) break;
        EXPECT(st == FC_ERR_NOMEM, "alloc %ld: status %d: %s", n, st, err.msg);
        fails++;
    }
    EXPECT(fails > 10, "only %d allocations", fails);
    free(xs);
    free(ws);
    free(ts);
}

/* rt_interp_run_noisy: every computing node's result moved by at most 2u relative (then
 * rounded), deterministic for a seed, different for another; casts and shape ops untouched. */
static void test_noisy(void) {
    new_graph();
    IrShape s = {1, {64}};
    int x = input(FC_F64, s);
    int e = add(IR_OP_EXP, INS(x), (IrAttrs){0});
    int y = add(IR_OP_MUL, INS(e, x), (IrAttrs){0});
    output(y);
    double *xs = randn(64, 7);
    void *in[1] = {xs};
    double clean[64], n1[64], n1b[64], n2[64];
    FcErr err = {0};
    void *o0[1] = {clean}, *o1[1] = {n1}, *o1b[1] = {n1b}, *o2[1] = {n2};
    REQUIRE(rt_interp_run(g, (const void *const *)in, o0, &err) == FC_OK);
    REQUIRE(rt_interp_run_noisy(g, (const void *const *)in, o1, 5, &err) == FC_OK);
    REQUIRE(rt_interp_run_noisy(g, (const void *const *)in, o1b, 5, &err) == FC_OK);
    REQUIRE(rt_interp_run_noisy(g, (const void *const *)in, o2, 6, &err) == FC_OK);
    double worst = 0;
    int moved = 0, differ = 0;
    for (int j = 0; j < 64; j++) {
        double r = fabs(n1[j] - clean[j]) / fabs(clean[j]);
        if (r > worst) worst = r;
        moved += n1[j] != clean[j];
        differ += n1[j] != n2[j];
        EXPECT(n1[j] == n1b[j], "noisy run not deterministic at %d", j);
    }
    /* two perturbed ops (exp, mul), 2u each in f64 (1 + 2u sin rounds to 1 where |sin| < 1/2) */
    EXPECT(worst <= 4.5 * ldexp(1, -53) && moved > 16, "noise: worst %g, %d moved", worst, moved);
    EXPECT(differ > 16, "another seed, other noise: %d differ", differ);
    free(xs);
}

int main(void) {
    test_noisy();
    test_unary();
    test_binary();
    test_compare_where();
    test_cast();
    test_reduce();
    test_composites();
    test_attention();
    test_shape_ops();
    test_generators();
    test_fp8();
    test_gather();
    test_scatter_add();
    test_matmul();
    test_philox();
    test_training();
    test_cross_checks();
    test_rounding_agrees_with_host();
    test_memory();
    for (int op = 0; op < IR_OP_COUNT; op++) EXPECT(covered[op], "op '%s' has no test case", ir_ops[op].name);
    ir_graph_free(g);
    if (failures) {
        fprintf(stderr, "test_interp: %d failures\n", failures);
        return 1;
    }
    printf("test_interp: all passed\n");
    return 0;
}
