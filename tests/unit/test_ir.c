/* test_ir.c: the graph IR's text form and verifier (ir/printer.c, ir/parse.c, ir/verify.c).
 *
 * - golden: a small hand-built graph prints to an exact expected text;
 * - round trip: a graph using every op in ops.def (multi-result split, list, dtype and
 *   string attributes, special floats) prints, parses back and prints identically;
 * - parse errors: each bad text gives its exact diagnostic;
 * - robustness: thousands of mutated texts parse or fail cleanly; allocation failures at
 *   every point of a parse and of a verify are reported, never crash (ASan checks leaks);
 * - verifier: planted violations are each caught with their message.
 * - copies (ir_graph_prefix, ir_graph_with_outputs): every prefix of the all-ops graph is a
 *   verified graph with every input, the nodes up to its last (same ops, attributes,
 *   locations, origins, names) and that node's float results as outputs named value,
 *   value1, ...; a node with no float result gives none; bad arguments are internal errors.
 */
#include "ir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ir_build.h"
#define CHECK_OK(s, err)                                                                     \
    do {                                                                                     \
        if ((s) != FC_OK) {                                                                  \
            fprintf(stderr, "%s:%d: status %d: %s\n", __FILE__, __LINE__, (int)(s), (err).msg); \
            failures++;                                                                      \
        }                                                                                    \
    } while (0)



/* Adds a node and returns its first result (or -1 after reporting). */
static int add(IrGraph *g, IrOp op, int nin, const int *ins, IrAttrs a, IrLoc loc, int origin, IrOp origin_op) {
    FcErr err = {0};
    int out = -1;
    FcStatus s = ir_add_node(g, op, ins, nin, &a, loc, origin, origin_op, &out, &err);
    if (s != FC_OK) {
        fprintf(stderr, "ir_add_node(%s): %s\n", ir_ops[op].name, err.msg);
        failures++;
        return -1;
    }
    return out;
}
#define N(g, op, a, ...) \
    add(g, op, (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)), (int[]){__VA_ARGS__}, a, (IrLoc){0}, -1, 0)
#define N0(g, op, a) add(g, op, 0, NULL, a, (IrLoc){0}, -1, 0)
#define NOATTR ((IrAttrs){0})

static char *print_graph(const IrGraph *g) {
    StrBuf sb = {0};
    ir_print(g, &sb);
    CHECK(!sb.failed);
    return sb_take(&sb);
}

static void output(IrGraph *g, int v, const char *name) {
    FcErr err = {0};
    CHECK_OK(ir_add_output(g, v, name, &err), err);
}

/* ---- golden ---------------------------------------------------------------------------- */
static IrGraph *tiny_graph(void) {
    IrGraph *g = ir_graph_new("tiny", "dir/t \"1\".tf");
    int x = inp(g, "x", FC_F32, SH(2, 3), false);
    int gn = inp(g, "we\"ird\\\n", FC_F32, SH(3), true);
    int m = add(g, IR_OP_MUL, 2, (int[]){x, gn}, NOATTR, (IrLoc){1, 5}, -1, 0);
    int s = add(g, IR_OP_SUM, 1, (int[]){m}, (IrAttrs){LIST(-1), .i = {1}}, (IrLoc){2, 3}, -1, 0);
    ir_val(g, s)->name = "s";
    int f = add(g, IR_OP_FULL, 0, NULL, (IrAttrs){.f = -INFINITY, .dtype = FC_BF16}, (IrLoc){0, 0}, 7, IR_OP_CAUSAL_MASK);
    int sp = add(g, IR_OP_SPLIT, 1, (int[]){x}, (IrAttrs){LIST(1, 2), .i = {-1}}, (IrLoc){3, 14}, 1, IR_OP_SUM);
    output(g, s, "s");
    output(g, f, "out1");
    output(g, sp + 1, "b");
    return g;
}

static const char tiny_golden[] =
    "block \"tiny\" file \"dir/t \\\"1\\\".tf\" next_origin=8\n"
    "  input %0 \"x\": f32[2, 3]\n"
    "  param %1 \"we\\\"ird\\\\\\x0a\": f32[3]\n"
    "  %2 = mul(%0, %1) : f32[2, 3] @1:5 #0\n"
    "  %3 \"s\" = sum(%2) {axes=[1], keepdim=1} : f32[2, 1] @2:3 #1\n"
    "  %4 = full() {shape=[], value=-inf, dtype=bf16} : bf16[] @0:0 #7 causal_mask\n"
    "  %5, %6 = split(%0) {sizes=[1, 2], axis=1} : f32[2, 1], f32[2, 2] @3:14 #1 sum\n"
    "  output %3 \"s\"\n"
    "  output %4 \"out1\"\n"
    "  output %6 \"b\"\n";

static void test_golden(void) {
    IrGraph *g = tiny_graph();
    char *txt = print_graph(g);
    if (strcmp(txt, tiny_golden) != 0) {
        fprintf(stderr, "golden mismatch; got:\n%s\nexpected:\n%s\n", txt, tiny_golden);
        failures++;
    }
    FcErr err = {0};
    CHECK_OK(ir_verify(g, &err), err);
    /* it parses back to the same graph: names, origins, locations */
    IrGraph *h = NULL;
    CHECK_OK(ir_parse(txt, "t.ir", &h, &err), err);
    if (h) {
        CHECK(strcmp(h->name, "tiny") == 0 && strcmp(h->file, "dir/t \"1\".tf") == 0);
        CHECK(strcmp(ir_val(h, 1)->name, "we\"ird\\\n") == 0 && h->is_param.data[1]);
        CHECK(h->nodes.data[2].origin == 7 && h->nodes.data[2].origin_op == IR_OP_CAUSAL_MASK);
        CHECK(h->nodes.data[1].loc.line == 2 && h->nodes.data[1].loc.col == 3);
        CHECK(h->next_origin == 8);
        CHECK(isinf(h->nodes.data[2].a.f) && h->nodes.data[2].a.f < 0);
        char *again = print_graph(h);
        CHECK(strcmp(again, txt) == 0);
        fc_free(again);
    }
    ir_graph_free(h);
    fc_free(txt);
    ir_graph_free(g);
}

/* ---- a graph with every op -------------------------------------------------------------------- */
static IrGraph *all_ops_graph(void) {
    IrGraph *g = ir_graph_new("all", "all.tf");
    int x = inp(g, "x", FC_F32, SH(2, 3, 4), false);
    int y = inp(g, "y", FC_F32, SH(2, 3, 4), false);
    int gn = inp(g, "gn", FC_F32, SH(4), true);
    int bn = inp(g, "bn", FC_F32, SH(4), true);
    int ids = inp(g, "ids", FC_I64, SH(2, 3), false);
    int tab = inp(g, "tab", FC_F32, SH(5, 4), true);
    int q = inp(g, "q", FC_F32, SH(2, 3, 4), false);
    int k = inp(g, "k", FC_F32, SH(1, 5, 4), false);
    int v = inp(g, "v", FC_F32, SH(2, 5, 6), false);
    int xb = inp(g, NULL, FC_BF16, SH(2, 3, 4), false);
    int lab = inp(g, "lab", FC_I32, SH(2), false);
    int lg = inp(g, "logits", FC_F64, SH(2, 7), false);
    int x8 = inp(g, "x8", FC_F8E4M3, SH(2, 3, 4), false);   /* input 12: f8 at the interface */
    int last = x;
    for (int op = 0; op < IR_OP_COUNT; op++)
        if (ir_ops[op].cat == IR_CAT_UNARY) last = N(g, (IrOp)op, NOATTR, x);
    for (int op = 0; op < IR_OP_COUNT; op++)
        if (ir_ops[op].cat == IR_CAT_BINARY && op != IR_OP_FP8_QUANT && op != IR_OP_FP8_DEQUANT)
            last = N(g, (IrOp)op, NOATTR, last, y);
    /* f8 scaling: an E4M3 slot read back, an E5M2 slot stored as it is */
    CHECK(ir_add_fp8_slot(g, FC_F8E4M3) == 0 && ir_add_fp8_slot(g, FC_F8E5M2) == 1);
    g->fp8.data[0].scale = 0.25;
    g->fp8.data[1].scale = 0x1p40;
    g->fp8.data[0].grad = 1;   /* slot 0's tensor has its gradient in slot 1 (--train at f8) */
    int s0 = N0(g, IR_OP_FP8_SCALE, ((IrAttrs){.i = {0}})), s1 = N0(g, IR_OP_FP8_SCALE, ((IrAttrs){.i = {1}}));
    output(g, N(g, IR_OP_FP8_DEQUANT, ((IrAttrs){.dtype = FC_F32}), N(g, IR_OP_FP8_QUANT, ((IrAttrs){.i = {0}}), last, s0), s0), "dq");
    int yb = N(g, IR_OP_CAST, ((IrAttrs){.dtype = FC_BF16}), y);
    output(g, N(g, IR_OP_FP8_DEQUANT, ((IrAttrs){.dtype = FC_BF16}), N(g, IR_OP_FP8_QUANT, ((IrAttrs){.i = {1}}), yb, s1), s1), "dqb");
    CHECK(ir_add_fp8_slot(g, FC_F8E5M2) == 2);
    int s2 = N0(g, IR_OP_FP8_SCALE, ((IrAttrs){.i = {2}}));
    output(g, N(g, IR_OP_FP8_QUANT, ((IrAttrs){.i = {2}}), y, s2), "q5");
    g->fp8.data[2].read_only = true;
    CHECK(ir_add_fp8_slot(g, FC_F8E4M3) == 3);
    g->fp8.data[3].input = 12;
    g->fp8.data[3].scale = 0x1p-3;
    int s3 = N0(g, IR_OP_FP8_SCALE, ((IrAttrs){.i = {3}}));
    output(g, N(g, IR_OP_FP8_DEQUANT, ((IrAttrs){.dtype = FC_BF16}), x8, s3), "dq8");
    int c = x;
    for (int op = 0; op < IR_OP_COUNT; op++)
        if (ir_ops[op].cat == IR_CAT_COMPARE) c = N(g, (IrOp)op, NOATTR, x, y);
    output(g, N(g, IR_OP_WHERE, NOATTR, c, x, last), "w");
    output(g, N(g, IR_OP_CAST, ((IrAttrs){.dtype = FC_BF16}), x), "cb");
    output(g, N(g, IR_OP_CAST, ((IrAttrs){.dtype = FC_I32}), xb), "ci");
    output(g, N(g, IR_OP_CAST, ((IrAttrs){.dtype = FC_F8E5M2}), c), "c8");
    output(g, N(g, IR_OP_SUM, ((IrAttrs){LIST(0, 2), .i = {0}}), x), "sum");
    output(g, N(g, IR_OP_MEAN, ((IrAttrs){LIST(-1), .i = {1}}), x), "mean");
    output(g, N(g, IR_OP_MAX, ((IrAttrs){LIST(2, 0, 1), .i = {1}}), x), "max");
    output(g, N(g, IR_OP_MIN, ((IrAttrs){LIST(1), .i = {0}}), ids), "min");
    output(g, N(g, IR_OP_SOFTMAX, ((IrAttrs){.i = {-1}}), x), "sm");
    output(g, N(g, IR_OP_LOG_SOFTMAX, ((IrAttrs){.i = {1}}), xb), "lsm");
    output(g, N(g, IR_OP_LAYERNORM, ((IrAttrs){LIST(-1), .i = {1, 1}, .f = 1e-5}), x, gn, bn), "ln");
    output(g, N(g, IR_OP_LAYERNORM, ((IrAttrs){LIST(-1), .i = {0, 1}, .f = 1e-5}), x, bn), "ln_b");
    output(g, N(g, IR_OP_LAYERNORM, ((IrAttrs){LIST(1, 2), .i = {0, 0}, .f = 0.1}), x), "ln2");
    output(g, N(g, IR_OP_RMSNORM, ((IrAttrs){LIST(2), .i = {1}, .f = 1e-6}), x, gn), "rms");
    output(g, N(g, IR_OP_RMSNORM, ((IrAttrs){LIST(2), .i = {0}, .f = 3}), x), "rms0");
    output(g, N(g, IR_OP_CAUSAL_MASK, ((IrAttrs){.f = -INFINITY}), x), "cm");
    output(g, N(g, IR_OP_CAUSAL_MASK, ((IrAttrs){.f = -1e4}), xb), "cm2");
    output(g, N(g, IR_OP_ATTENTION, ((IrAttrs){.i = {1}, .f = 0.5}), q, k, v), "att");
    output(g, N(g, IR_OP_ATTENTION, ((IrAttrs){.i = {0}, .f = 1.0 / 3.0}), q, k, v), "att2");
    output(g, N(g, IR_OP_GELU, ((IrAttrs){.i = {IR_APPROX_NONE}}), x), "gelu");
    output(g, N(g, IR_OP_GELU, ((IrAttrs){.i = {IR_APPROX_TANH}}), xb), "gelu_t");
    output(g, N(g, IR_OP_RESHAPE, ((IrAttrs){LIST(-1, 4)}), x), "rs");
    output(g, N(g, IR_OP_TRANSPOSE, ((IrAttrs){LIST(2, 0, -2)}), x), "tr");
    output(g, N(g, IR_OP_BROADCAST, ((IrAttrs){LIST(2, 3, 4)}), gn), "bc");
    output(g, N(g, IR_OP_CONCAT, ((IrAttrs){.i = {-1}}), x, y, q), "cat");
    int sp = N(g, IR_OP_SPLIT, ((IrAttrs){LIST(1, 2, 1), .i = {2}}), x);
    output(g, sp + 2, "s2");
    output(g, sp, "s0");
    output(g, N(g, IR_OP_SLICE, ((IrAttrs){.i = {1, -2, 99, 1}}), x), "sl");
    output(g, N(g, IR_OP_SLICE, ((IrAttrs){.i = {2, 3, 0, -2}}), x), "slr");
    output(g, N0(g, IR_OP_IOTA, ((IrAttrs){LIST(3, 4), .i = {-1}, .dtype = FC_I64})), "io");
    output(g, N0(g, IR_OP_FULL, ((IrAttrs){LIST(2), .f = INFINITY, .dtype = FC_F16})), "finf");
    output(g, N0(g, IR_OP_FULL, ((IrAttrs){.f = NAN, .dtype = FC_F32})), "fnan");
    output(g, N0(g, IR_OP_FULL, ((IrAttrs){.f = -0.0, .dtype = FC_F64})), "fnz");
    output(g, N0(g, IR_OP_FULL, ((IrAttrs){.f = copysign(NAN, -1.0), .dtype = FC_F64})), "fnegnan");
    output(g, N0(g, IR_OP_FULL, ((IrAttrs){.f = -INFINITY, .dtype = FC_F8E5M2})), "fninf");
    output(g, N0(g, IR_OP_FULL, ((IrAttrs){.f = 0.1, .dtype = FC_F8E4M3})), "f01");
    output(g, N0(g, IR_OP_FULL, ((IrAttrs){.f = 5e-324, .dtype = FC_F64})), "fden");
    output(g, N0(g, IR_OP_FULL, ((IrAttrs){.f = 1.7976931348623157e308, .dtype = FC_F64})), "fmax");
    output(g, N0(g, IR_OP_FULL, ((IrAttrs){.f = 3, .dtype = FC_BOOL})), "fb");
    output(g, N(g, IR_OP_GATHER, NOATTR, tab, ids), "ga");
    output(g, N(g, IR_OP_SCATTER_ADD, ((IrAttrs){.i = {9}}), N(g, IR_OP_GATHER, NOATTR, tab, ids), ids), "sc");
    int yt = N(g, IR_OP_TRANSPOSE, ((IrAttrs){LIST(0, 2, 1)}), y);
    output(g, N(g, IR_OP_MATMUL, NOATTR, x, yt), "mm");
    output(g, N(g, IR_OP_DROPOUT, ((IrAttrs){.f = 0.1, .i = {42}}), x), "dr");
    output(g, N0(g, IR_OP_DROPOUT_MASK, ((IrAttrs){LIST(3, 5), .f = 0.999999, .i = {INT64_MIN}})), "dm");
    output(g, N0(g, IR_OP_DROPOUT_MASK, ((IrAttrs){.f = 0, .i = {-1}})), "dm0");
    output(g, N(g, IR_OP_CROSS_ENTROPY, NOATTR, lg, lab), "ce");
    output(g, x, "x");
    /* a location, an explicit origin with another origin op, a result name */
    int e = add(g, IR_OP_EXP, 1, (int[]){x}, NOATTR, (IrLoc){12, 9}, 3, IR_OP_SOFTMAX);
    ir_val(g, e)->name = "e";
    output(g, e, "e");
    g->next_origin += 5;
    return g;
}

static void test_round_trip(void) {
    IrGraph *g = all_ops_graph();
    FcErr err = {0};
    CHECK_OK(ir_verify(g, &err), err);
    bool seen[IR_OP_COUNT] = {0};
    for (int i = 0; i < g->nodes.len; i++) seen[g->nodes.data[i].op] = true;
    for (int op = 0; op < IR_OP_COUNT; op++)
        if (!seen[op]) {
            fprintf(stderr, "round trip does not cover op '%s'\n", ir_ops[op].name);
            failures++;
        }
    char *t1 = print_graph(g);
    if (getenv("TEST_IR_DUMP")) fputs(t1, stdout);
    IrGraph *h = NULL;
    CHECK_OK(ir_parse(t1, "all.ir", &h, &err), err);
    if (h) {
        CHECK_OK(ir_verify(h, &err), err);
        char *t2 = print_graph(h);
        if (strcmp(t1, t2) != 0) {
            fprintf(stderr, "round trip differs:\n%s\n---\n%s\n", t1, t2);
            failures++;
        }
        CHECK(h->values.len == g->values.len && h->nodes.len == g->nodes.len);
        /* floats come back bit for bit */
        for (int i = 0; i < g->nodes.len && i < h->nodes.len; i++)
            CHECK(memcmp(&g->nodes.data[i].a.f, &h->nodes.data[i].a.f, sizeof(double)) == 0 ||
                  (isnan(g->nodes.data[i].a.f) && isnan(h->nodes.data[i].a.f) &&
                   signbit(g->nodes.data[i].a.f) == signbit(h->nodes.data[i].a.f)));
        fc_free(t2);
    }
    /* spot checks of the text */
    CHECK(strstr(t1, "= split(%0) {sizes=[1, 2, 1], axis=2} : f32[2, 3, 1], f32[2, 3, 2], f32[2, 3, 1]"));
    CHECK(strstr(t1, "{axes=[0, 1, 2], keepdim=1}"));
    CHECK(strstr(t1, "{approx=\"tanh\"}"));
    CHECK(strstr(t1, "{shape=[], value=nan, dtype=f32} : f32[]"));
    CHECK(strstr(t1, "value=-0.0,"));
    CHECK(strstr(t1, "value=-nan,") && strstr(t1, "value=-inf,"));
    CHECK(strstr(t1, "value=4.94065646e-324,"));
    CHECK(strstr(t1, "{axis=2, start=3, end=0, step=-2}"));
    CHECK(strstr(t1, "input %9: bf16[2, 3, 4]"));
    CHECK(strstr(t1, "\"e\" = exp(%0) : f32[2, 3, 4] @12:9 #3 softmax"));
    ir_graph_free(h);
    fc_free(t1);
    ir_graph_free(g);
}

/* Value ids need not put all inputs first; the parser rebuilds the same numbering. */
static void test_interleaved_ids(void) {
    IrGraph *g = ir_graph_new("mix", "m.tf");
    FcErr err = {0};
    int a = inp(g, "a", FC_F32, SH(3), false);
    int n = N(g, IR_OP_NEG, NOATTR, a);
    int b = inp(g, "b", FC_F32, SH(3), false);
    output(g, N(g, IR_OP_ADD, NOATTR, n, b), "out");
    CHECK_OK(ir_verify(g, &err), err);
    char *t1 = print_graph(g);
    IrGraph *h = NULL;
    CHECK_OK(ir_parse(t1, "m.ir", &h, &err), err);
    if (h) {
        char *t2 = print_graph(h);
        CHECK(strcmp(t1, t2) == 0);
        CHECK(h->inputs.data[1] == 2);
        fc_free(t2);
    }
    ir_graph_free(h);
    fc_free(t1);
    ir_graph_free(g);
}

/* Names full of escapes (each printed as 2 or 4 bytes) come back intact. */
static void test_escaped_names(void) {
    char name[400];
    int n = 0;
    for (int i = 0; i < 99; i++) {
        name[n++] = "\"\\\x7f"[i % 3];
    }
    name[n] = '\0';
    IrGraph *g = ir_graph_new(name, name);
    FcErr err = {0};
    int a = inp(g, name, FC_F32, SH(3), false);
    int b = inp(g, "after", FC_F32, SH(3), false);
    output(g, N(g, IR_OP_ADD, NOATTR, a, b), name);
    char *t1 = print_graph(g);
    IrGraph *h = NULL;
    CHECK_OK(ir_parse(t1, "n.ir", &h, &err), err);
    if (h) {
        CHECK(strcmp(h->name, name) == 0 && strcmp(h->file, name) == 0);
        CHECK(strcmp(ir_val(h, 0)->name, name) == 0 && strcmp(ir_val(h, 1)->name, "after") == 0);
        CHECK(strcmp(h->output_names.data[0], name) == 0);
    }
    ir_graph_free(h);
    fc_free(t1);
    ir_graph_free(g);
}

/* ---- parse errors ------------------------------------------------------------------------------- */
#define HDR "block \"b\" file \"b.tf\" next_origin=9\n  input %0 \"x\": f32[2, 3]\n"
static const struct {
    const char *text, *msg;
} parse_errors[] = {
    {"", "e.ir:1:1: error: expected 'block', found end of input"},
    {"\n\nblok \"b\"", "e.ir:3:1: error: expected 'block', found 'blok'"},
    {"block b file \"f\" next_origin=0", "e.ir:1:7: error: expected the block name (a string), found 'b'"},
    {"block \"b\" file \"f\"\n", "e.ir:1:19: error: expected 'next_origin', found end of line"},
    {"block \"b\" file \"f\" next_origin=-1", "e.ir:1:32: error: next_origin -1 is out of range (expected 0..1073741824)"},
    {"block \"b\" file \"f\" next_origin=0 x", "e.ir:1:34: error: expected end of line, found 'x'"},
    {"block \"b\nx\" file", "e.ir:1:7: error: unterminated string"},
    {"block \"b\\n\" file", "e.ir:1:9: error: unknown escape in string (expected \\\", \\\\ or \\xHH)"},
    {"block \"b\\x00\" file", "e.ir:1:9: error: a string may not contain a NUL byte"},
    {"block \"b\tc\" file", "e.ir:1:9: error: control byte 0x09 in string (write it as \\x09)"},
    {HDR "  %1 = frob(%0) : f32[2, 3] @0:0 #0\n", "e.ir:3:8: error: unknown op 'frob'"},
    {HDR "  %1 = neg(%0) : f32[3, 2] @0:0 #0\n",
     "e.ir:3:18: error: result %1 is declared f32[3, 2] but the shape rule of 'neg' gives f32[2, 3]"},
    {HDR "  %1 = neg(%0) : i32[2, 3] @0:0 #0\n",
     "e.ir:3:18: error: result %1 is declared i32[2, 3] but the shape rule of 'neg' gives f32[2, 3]"},
    {HDR "  %1 = neg(%2) : f32[2, 3] @0:0 #0\n  %2 = neg(%0) : f32[2, 3] @0:0 #0\n",
     "e.ir:3:12: error: %2 is used before its definition"},
    {HDR "  %1 = neg(%7) : f32[2, 3] @0:0 #0\n", "e.ir:3:12: error: %7 is not defined"},
    {HDR "  output %1 \"o\"\n", "e.ir:3:10: error: %1 is not defined"},
    {HDR "  output %0\n", "e.ir:3:12: error: expected the output's name (a string), found end of line"},
    {HDR "  %1 = add(%0) : f32[2, 3] @0:0 #0\n", "e.ir:3:8: error: 'add' takes 2 inputs; got 1"},
    {HDR "  %1 = concat() {axis=0} : f32[2, 3] @0:0 #0\n", "e.ir:3:8: error: 'concat' takes at least 1 input; got 0"},
    {HDR "  %1 = layernorm(%0, %0, %0, %0) : f32[2, 3] @0:0 #0\n", "e.ir:3:8: error: 'layernorm' takes 1 to 3 inputs; got 4"},
    {HDR "  %1, %2 = neg(%0) : f32[2, 3] @0:0 #0\n", "e.ir:3:3: error: 'neg' has 1 result; the line names 2"},
    {HDR "  %1 = neg(%0) : f32[2, 3], f32[2, 3] @0:0 #0\n", "e.ir:3:18: error: 2 result types for 1 result"},
    {HDR "  %1, %3 = split(%0) {sizes=[1, 2], axis=1} : f32[2, 1], f32[2, 2] @0:0 #0\n",
     "e.ir:3:7: error: the results of a node have consecutive ids: expected %2, found %3"},
    {HDR "  %1, %2, %3 = split(%0) {sizes=[1, 2], axis=1} : f32[2, 1], f32[2, 2], f32[2, 1] @0:0 #0\n",
     "e.ir:3:3: error: 'split' gives 2 results here; the line names 3"},
    {HDR "  %1 = sum(%0) {axes=[1]} : f32[2] @0:0 #0\n", "e.ir:3:8: error: 'sum' is missing attribute 'keepdim'"},
    {HDR "  %1 = sum(%0) {axes=[1], axes=[1]} : f32[2] @0:0 #0\n", "e.ir:3:27: error: attribute 'axes' is given twice"},
    {HDR "  %1 = sum(%0) {axis=[1]} : f32[2] @0:0 #0\n", "e.ir:3:17: error: 'sum' has no attribute 'axis'"},
    {HDR "  %1 = neg(%0) {} : f32[2, 3] @0:0 #0\n  %2 = neg(%0) {x=1} : f32[2, 3] @0:0 #0\n",
     "e.ir:4:17: error: 'neg' has no attribute 'x'"},
    {HDR "  %1 = sum(%0) {axes=[5], keepdim=0} : f32[2] @0:0 #0\n",
     "e.ir:3:8: error: axis 5 is out of range for 'sum' of a rank-2 tensor (expected -2..1)"},
    {HDR "  %1 = sum(%0) {axes=1, keepdim=0} : f32[2] @0:0 #0\n", "e.ir:3:22: error: expected '[', found '1'"},
    {HDR "  %1 = sum(%0) {axes=[1], keepdim=1.5} : f32[2] @0:0 #0\n", "e.ir:3:35: error: expected an integer, found '1.5'"},
    {HDR "  %1 = cast(%0) {dtype=f33, wide=0} : f32[2, 3] @0:0 #0\n", "e.ir:3:24: error: expected a dtype, found 'f33'"},
    {HDR "  %1 = cast(%0) {dtype=bf16} : bf16[2, 3] @0:0 #0\n", "e.ir:3:8: error: 'cast' is missing attribute 'wide'"},
    {HDR "  %1 = cast(%0) {dtype=bf16, wide=2} : bf16[2, 3] @0:0 #0\n",
     "e.ir:3:8: error: 'cast' wide=2: only a float cast to bf16 or f16 may be wide (1)"},
    {HDR "  %1 = cast(%0) {dtype=i32, wide=1} : i32[2, 3] @0:0 #0\n",
     "e.ir:3:8: error: 'cast' wide=1: only a float cast to bf16 or f16 may be wide (1)"},
    {HDR "  %1 = gelu(%0) {approx=\"fast\"} : f32[2, 3] @0:0 #0\n",
     "e.ir:3:25: error: expected \"none\" or \"tanh\", found a string"},
    {HDR "  %1 = gelu(%0) {approx=5} : f32[2, 3] @0:0 #0\n", "e.ir:3:8: error: gelu approx must be \"none\" or \"tanh\""},
    {HDR "  %1 = full() {shape=[], value=x, dtype=f32} : f32[] @0:0 #0\n", "e.ir:3:32: error: expected a number, found 'x'"},
    {HDR "  %1 = neg(%0) : f32[2, 3] @0:0\n", "e.ir:3:32: error: expected '#', found end of line"},
    {HDR "  %1 = neg(%0) : f32[2, 3] @0:0 #-1\n", "e.ir:3:34: error: an origin -1 is out of range (expected 0..1073741824)"},
    {HDR "  %1 = neg(%0) : f32[2, 3] @0:0 #0 frob\n", "e.ir:3:36: error: unknown op 'frob'"},
    {HDR "  %1 = neg(%0) : f32[2, 3] @0:0 #9\n", "e.ir:1:23: error: next_origin=9 is not above the largest origin, 9"},
    {HDR "  %2 = neg(%0) : f32[2, 3] @0:0 #0\n",
     "e.ir:3:3: error: value ids are numbered in order of definition: expected %1, found %2"},
    {HDR "  input %0 \"y\": f32[2]\n", "e.ir:3:9: error: %0 is defined twice"},
    {HDR "  input %1: f32[0]\n", "e.ir:3:17: error: sizes must be >= 1; got 0"},
    {HDR "  input %1: f32[1, 1, 1, 1, 1, 1, 1, 1, 1]\n", "e.ir:3:41: error: a type has at most 8 dims"},
    {HDR "  input %1: f32[4294967296, 4294967296]\n", "e.ir:3:13: error: type is too large: its byte count overflows 64 bits"},
    {HDR "  input %1: f32[99999999999999999999]\n", "e.ir:3:17: error: integer 99999999999999999999 is out of range"},
    {HDR "  input %1: float[2]\n", "e.ir:3:13: error: unknown dtype 'float'"},
    {HDR "  input %99999999999: f32[2]\n", "e.ir:3:9: error: value id 99999999999 is too large"},
    {HDR "  input %x: f32[2]\n", "e.ir:3:9: error: expected a value id after '%'"},
    {HDR "  %1 = full() {shape=[], value=1.5.2, dtype=f32} : f32[] @0:0 #0\n", "e.ir:3:32: error: malformed number"},
    {HDR "  %1 = full() {shape=[], value=-x, dtype=f32} : f32[] @0:0 #0\n", "e.ir:3:32: error: unexpected character '-'"},
    {HDR "  $\n", "e.ir:3:3: error: unexpected character '$'"},
    {HDR "  \xc3\xa9\n", "e.ir:3:3: error: unexpected byte 0xc3"},
    {HDR "  neg\n", "e.ir:3:3: error: expected 'input', 'param', 'output', 'fp8' or a node, found 'neg'"},
    {HDR "  %1 = matmul(%0, %0) : f32[2, 2] @0:0 #0\n",
     "e.ir:3:8: error: matrix product inner sizes differ: f32[2, 3] @ f32[2, 3] (3 vs 2)"},
    {HDR "  fp8 slot 1: f8e4m3 scale=1\n", "e.ir:3:12: error: f8 slots are numbered in order: expected 0, found 1"},
    {HDR "  fp8 slot 0: bf16 scale=1\n", "e.ir:3:15: error: an f8 slot's format is f8e4m3 or f8e5m2"},
    {HDR "  fp8 slot 0: f8e4m3 scale=3\n", "e.ir:3:28: error: an f8 slot's scale is a positive finite power of two"},
    {HDR "  fp8 slot 0: f8e4m3 scale=-0.5\n", "e.ir:3:28: error: an f8 slot's scale is a positive finite power of two"},
    {HDR "  fp8 slot 0: f8e4m3\n", "e.ir:3:21: error: expected 'scale', found end of line"},
    {HDR "  %1 = fp8_scale() {slot=0} : f32[] @0:0 #0\n", "e.ir:3:8: error: 'fp8_scale' names f8 slot 0; the graph has 0"},
    {HDR "  fp8 slot 0: f8e5m2 scale=1\n  %1 = fp8_scale() {slot=0} : f32[] @0:0 #0\n"
         "  %2 = fp8_quant(%0, %0) {slot=0} : f8e5m2[2, 3] @0:0 #0\n",
     "e.ir:5:8: error: 'fp8_quant' expects an f32[] scale; got f32[2, 3]"},
    {HDR "  fp8 slot 0: f8e5m2 scale=1\n  %1 = fp8_scale() {slot=0} : f32[] @0:0 #0\n"
         "  %2 = fp8_dequant(%0, %1) {dtype=f32} : f32[2, 3] @0:0 #0\n",
     "e.ir:5:8: error: 'fp8_dequant' expects an f8 q; got f32"},
    {HDR "  fp8 slot 0: f8e5m2 scale=1\n  %1 = fp8_scale() {slot=0} : f32[] @0:0 #0\n"
         "  %2 = fp8_quant(%0, %1) {slot=0} : f8e5m2[2, 3] @0:0 #0\n  %3 = fp8_dequant(%2, %1) {dtype=i32} : i32[2, 3] @0:0 #0\n",
     "e.ir:6:8: error: 'fp8_dequant' makes f32, bf16 or f16; got i32"},
    {HDR "  input %1: i8[2, 3]\n  %2 = add(%1, %1) : i8[2, 3] @0:0 #0\n",
     "e.ir:4:8: error: 'add' does not take i8 operands: i8 is a storage type; cast it first (cast(w, f32) * scale)"},
    {HDR "  input %1: i8[2, 3]\n  %2 = sum(%1) {axes=[1], keepdim=0} : i8[2] @0:0 #0\n",
     "e.ir:4:8: error: 'sum' does not take i8 operands: i8 is a storage type; cast it first (cast(w, f32) * scale)"},
    {HDR "  %1 = full() {shape=[2], value=1, dtype=i8} : i8[2] @0:0 #0\n",
     "e.ir:3:8: error: 'full' does not make i8 values: i8 is a storage type; cast a tensor to it (cast(x, i8))"},
    {HDR "  fp8 slot 0: f8e5m2 scale=1 writable\n", "e.ir:3:30: error: expected end of line, found 'writable'"},
    {HDR "  fp8 slot 0: f8e4m3 scale=1 grad=x\n", "e.ir:3:35: error: expected the gradient's slot, found 'x'"},
    {HDR "  fp8 slot 0: f8e4m3 scale=1 grad=3\n",
     "e.ir:3:35: error: an f8 slot's gradient slot is another slot, f8e5m2, without a gradient slot of its own"},
    {HDR "  fp8 slot 0: f8e4m3 scale=1 grad=1\n  fp8 slot 1: f8e5m2 scale=2 grad=0\n",
     "e.ir:3:35: error: an f8 slot's gradient slot is another slot, f8e5m2, without a gradient slot of its own"},
    {HDR "  fp8 slot 0: f8e4m3 scale=1 input=0\n", "e.ir:3:36: error: an f8 slot's input is an input of the slot's format"},
    {HDR "  fp8 slot 0: f8e4m3 scale=1 input=4\n", "e.ir:3:36: error: an f8 slot's input is an input of the slot's format"},
    {HDR "  fp8 slot 0: f8e4m3 scale=1 input=-1\n", "e.ir:3:36: error: the input -1 is out of range (expected 0..1073741824)"},
    {HDR "  fp8 slot 0: f8e4m3 scale=1\n  fp8 slot 1: f8e4m3 scale=1\n  %1 = fp8_scale() {slot=1} : f32[] @0:0 #0\n"
         "  %2 = fp8_quant(%0, %1) {slot=0} : f8e4m3[2, 3] @0:0 #0\n",
     "e.ir: error: node 1 (%2 = fp8_quant): its scale %1 is not an fp8_scale of its slot"},
};

static void test_parse_errors(void) {
    for (size_t i = 0; i < sizeof parse_errors / sizeof parse_errors[0]; i++) {
        FcErr err = {0};
        IrGraph *g = (IrGraph *)1;
        FcStatus s = ir_parse(parse_errors[i].text, "e.ir", &g, &err);
        if (s != FC_ERR_INPUT || g != NULL || strcmp(err.msg, parse_errors[i].msg) != 0) {
            fprintf(stderr, "parse error case %zu: status %d\n  got:      %s\n  expected: %s\n", i, (int)s, err.msg,
                    parse_errors[i].msg);
            failures++;
        }
        ir_graph_free(g == (IrGraph *)1 ? NULL : g);
    }
    /* accepted variants: blank lines, no trailing newline, ints for floats, inf/nan words,
     * explicit origin op equal to the op, attributes in another order */
    const char *ok = "\n\nblock \"b\" file \"f\" next_origin=3\n\n"
                     "  input %0: f32[2, 3]\r\n"
                     "  %1 = full() {dtype=f32, value=inf, shape=[2]} : f32[2] @0:0 #0 full\n"
                     "  %2 = full() {shape=[2], value=2, dtype=f32} : f32[2] @0:0 #1\n"
                     "  %3 = reshape(%0) {shape=[-1]} : f32[6] @0:0 #2\n"
                     "  %4 = cast(%0) {dtype=i8, wide=0} : i8[2, 3] @0:0 #2\n"
                     "  %5 = transpose(%4) {perm=[1, 0]} : i8[3, 2] @0:0 #2\n"
                     "  %6 = cast(%5) {wide=0, dtype=f32} : f32[3, 2] @0:0 #2\n"
                     "  output %3 \"o\"\n"
                     "  output %6 \"q\"";
    FcErr err = {0};
    IrGraph *g = NULL;
    CHECK_OK(ir_parse(ok, "ok.ir", &g, &err), err);
    if (g) {
        CHECK(g->nodes.data[0].a.f == INFINITY && g->nodes.data[1].a.f == 2.0);
        CHECK(g->nodes.data[2].a.list[0] == 6); /* normalized by the shape rule */
        CHECK(g->next_origin == 3);
    }
    ir_graph_free(g);
}

/* ---- robustness ------------------------------------------------------------------------------- */
static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void test_mutations(void) {
    IrGraph *g = all_ops_graph();
    char *base = print_graph(g);
    ir_graph_free(g);
    size_t len = strlen(base);
    static const char alphabet[] = "%#@:,=()[]{}\"\\\n -.0123456789einafx";
    char *buf = malloc(len + 64);
    int parsed = 0;
    for (int it = 0; it < 3000; it++) {
        memcpy(buf, base, len + 1);
        size_t n = len;
        int edits = 1 + (int)(rnd() % 3);
        for (int e = 0; e < edits; e++) {
            size_t at = (size_t)(rnd() % n);
            switch (rnd() % 4) {
            case 0: buf[at] = alphabet[rnd() % (sizeof alphabet - 1)]; break;
            case 1: memmove(buf + at, buf + at + 1, n - at); n--; break;   /* delete (NUL moves too) */
            case 2: buf[at] = (char)(rnd() % 255 + 1); break;
            default: buf[at] = '\0'; n = at; break;                         /* truncate */
            }
            if (n == 0) break;
        }
        FcErr err = {0};
        IrGraph *h = NULL;
        FcStatus s = ir_parse(buf, "m.ir", &h, &err);
        if (s == FC_OK) {
            parsed++;
            CHECK_OK(ir_verify(h, &err), err);
            char *t1 = print_graph(h);
            IrGraph *h2 = NULL;
            CHECK_OK(ir_parse(t1, "m.ir", &h2, &err), err);
            if (h2) {
                char *t2 = print_graph(h2);
                CHECK(strcmp(t1, t2) == 0);
                fc_free(t2);
            }
            ir_graph_free(h2);
            fc_free(t1);
        } else {
            CHECK(s == FC_ERR_INPUT && h == NULL && strncmp(err.msg, "m.ir:", 5) == 0);
        }
        ir_graph_free(h);
    }
    CHECK(parsed > 0);   /* some mutations are harmless (a name, a digit of a location) */
    free(buf);
    fc_free(base);
}

/* Every allocation of a parse and of a verify can fail: the failure is reported, nothing leaks. */
static void test_alloc_failures(void) {
    IrGraph *g = all_ops_graph();
    char *txt = print_graph(g);
    for (long n = 1;; n++) {
        FcErr err = {0};
        IrGraph *h = NULL;
        fc_alloc_fail_at(n);
        FcStatus s = ir_parse(txt, "f.ir", &h, &err);
        fc_alloc_fail_at(0);
        if (s == FC_OK) {
            ir_graph_free(h);
            break;
        }
        if (s != FC_ERR_NOMEM) {
            fprintf(stderr, "parse with allocation %ld failing: status %d: %s\n", n, (int)s, err.msg);
            failures++;
            break;
        }
        CHECK(h == NULL);
    }
    for (long n = 1;; n++) {
        FcErr err = {0};
        fc_alloc_fail_at(n);
        FcStatus s = ir_verify(g, &err);
        fc_alloc_fail_at(0);
        if (s == FC_OK) break;
        if (s != FC_ERR_NOMEM) {
            fprintf(stderr, "verify with allocation %ld failing: status %d: %s\n", n, (int)s, err.msg);
            failures++;
            break;
        }
    }
    fc_free(txt);
    ir_graph_free(g);
}

/* ---- verifier ----------------------------------------------------------------------------------- */
/* x:f32[2,3], y:f32[2,3]; %2 = add(x, y); %3 = sum(%2) {axes=[1]}; %4 = neg(%3) */
static IrGraph *small_graph(void) {
    IrGraph *g = ir_graph_new("small", "s.tf");
    int x = inp(g, "x", FC_F32, SH(2, 3), false);
    int y = inp(g, "y", FC_F32, SH(2, 3), false);
    int a = N(g, IR_OP_ADD, NOATTR, x, y);
    int s = N(g, IR_OP_SUM, ((IrAttrs){LIST(1), .i = {0}}), a);
    output(g, N(g, IR_OP_NEG, NOATTR, s), "o");
    return g;
}

static int64_t list_neg1[1] = {-1};
static int ins_bad[2] = {0, 99};
static int ins_fwd[1] = {4};

static void plant(int which, IrGraph *g) {
    IrNode *add_n = &g->nodes.data[0], *sum_n = &g->nodes.data[1], *neg_n = &g->nodes.data[2];
    switch (which) {
    case 0: ir_val(g, 2)->dtype = FC_F64; break;                 /* wrong result dtype */
    case 1: ir_val(g, 3)->shape.dims[0] = 5; break;              /* wrong result shape */
    case 2: add_n->in = ins_bad; break;                          /* id out of range */
    case 3: sum_n->in = ins_fwd; break;                          /* use before definition */
    case 4: ir_val(g, 1)->dtype = FC_F16; break;                 /* binary dtypes differ */
    case 5: sum_n->a.list = list_neg1; break;                    /* axes not normalized */
    case 6: add_n->a.f = 1.0; break;                             /* slot add does not use */
    case 7: neg_n->origin = 99; break;                           /* origin >= next_origin */
    case 8: add_n->nin = 1; break;                               /* arity */
    case 9: g->outputs.data[0] = 42; break;                      /* output id out of range */
    case 10: ir_val(g, 3)->result = 1; break;                    /* back link wrong */
    case 11: sum_n->a.i[0] = 1; break;                           /* keepdim changes the shape */
    case 12: g->inputs.data[1] = 0; break;                       /* an input listed twice */
    case 13: sum_n->a.i[2] = 7; break;                           /* unused int slot */
    case 14: neg_n->op = IR_OP_SPLIT; break;                     /* result count for split */
    default: {   /* f8: slot 0 (E4M3) and slot 1, x quantized with slot 0 */
        FcErr err = {0};
        CHECK(ir_add_fp8_slot(g, FC_F8E4M3) == 0 && ir_add_fp8_slot(g, FC_F8E4M3) == 1);
        int s0 = N0(g, IR_OP_FP8_SCALE, ((IrAttrs){.i = {0}})), s1 = N0(g, IR_OP_FP8_SCALE, ((IrAttrs){.i = {1}}));
        int q = N(g, IR_OP_FP8_QUANT, ((IrAttrs){.i = {0}}), 0, s0);
        CHECK_OK(ir_verify(g, &err), err);
        if (which == 15) g->fp8.data[0].scale = 3;
        if (which == 16) g->fp8.data[0].fmt = FC_F32;
        if (which == 17) g->nodes.data[5].in[1] = s1;                        /* another slot's scale */
        if (which == 19) g->fp8.data[0].grad = 1;                           /* a gradient slot not E5M2 */
        if (which == 18) {                                                   /* a second quant of slot 0 */
            int q2 = N(g, IR_OP_FP8_QUANT, ((IrAttrs){.i = {1}}), 1, s1);
            g->nodes.data[ir_cval(g, q2)->node].a.i[0] = 0;
            g->nodes.data[ir_cval(g, q2)->node].in[1] = s0;
        }
        (void)q;
        break;
    }
    }
}

static const char *const plant_msgs[] = {
    "internal error: ir_verify: block 'small': node 0 (%2 = add): result %2 has type f64[2, 3]; its shape rule gives f32[2, 3]",
    "internal error: ir_verify: block 'small': node 1 (%3 = sum): result %3 has type f32[5]; its shape rule gives f32[2]",
    "internal error: ir_verify: block 'small': node 0 (%2 = add): input id %99 is out of range",
    "internal error: ir_verify: block 'small': node 1 (%3 = sum): input %4 is defined by node 2, not before its use",
    "internal error: ir_verify: block 'small': node 0 (%2 = add): inputs %0 and %1 have different dtypes, f32 and f16",
    "internal error: ir_verify: block 'small': node 1 (%3 = sum): attributes are not normalized (the shape rule changes them)",
    "internal error: ir_verify: block 'small': node 0 (%2 = add): attribute slot f is set but 'add' does not use it",
    "internal error: ir_verify: block 'small': node 2 (%4 = neg): origin #99 is outside [0, next_origin=3)",
    "internal error: ir_verify: block 'small': node 0 (%2 = add): has 1 inputs; 'add' takes 2 to 2",
    "internal error: ir_verify: block 'small': output 0: id %42 is out of range",
    "internal error: ir_verify: block 'small': value %3 says it is result 1 of node 1, which it is not",
    "internal error: ir_verify: block 'small': node 1 (%3 = sum): result %3 has type f32[2]; its shape rule gives f32[2, 1]",
    "internal error: ir_verify: block 'small': input 1: value %0 says it comes from node -1, result 0",
    "internal error: ir_verify: block 'small': node 1 (%3 = sum): attribute slot i2 is 7 but 'sum' does not use it",
    "internal error: ir_verify: block 'small': node 2 (%4 = split): has 1 results; expected 0",
    "internal error: ir_verify: block 'small': f8 slot 0's scale 3 is not a positive finite power of two",
    "internal error: ir_verify: block 'small': f8 slot 0 has format 1, not an f8 type",
    "internal error: ir_verify: block 'small': node 5 (%7 = fp8_quant): its scale %6 is not an fp8_scale of its slot",
    "internal error: ir_verify: block 'small': nodes 5 and 6 both quantize with f8 slot 0",
    "internal error: ir_verify: block 'small': f8 slot 0's gradient slot 1 is not another E5M2 slot without one of its own",
};

static void test_verifier(void) {
    IrGraph *g = small_graph();
    FcErr err = {0};
    CHECK_OK(ir_verify(g, &err), err);
    ir_graph_free(g);
    for (int i = 0; i < (int)(sizeof plant_msgs / sizeof plant_msgs[0]); i++) {
        g = small_graph();
        plant(i, g);
        FcStatus s = ir_verify(g, &err);
        if (s != FC_ERR_INTERNAL || strcmp(err.msg, plant_msgs[i]) != 0) {
            fprintf(stderr, "planted bug %d: status %d\n  got:      %s\n  expected: %s\n", i, (int)s, err.msg, plant_msgs[i]);
            failures++;
        }
        /* restore pointers into static storage before freeing */
        ir_graph_free(g);
    }
}

static void test_copies(void) {
    IrGraph *g = all_ops_graph();
    FcErr err = {0};
    int prefixes = 0, none = 0;
    for (int m = 0; m < g->nodes.len; m++) {
        IrGraph *p = NULL;
        CHECK_OK(ir_graph_prefix(g, m, &p, &err), err);
        const IrNode *n = &g->nodes.data[m];
        int nfloat = 0;
        for (int r = 0; r < n->nout; r++) nfloat += ir_dtype_is_float(ir_cval(g, n->out[r])->dtype);
        if (!p) {
            CHECK(nfloat == 0);
            none++;
            continue;
        }
        prefixes++;
        CHECK_OK(ir_verify(p, &err), err);
        CHECK(p->inputs.len == g->inputs.len && p->nodes.len == m + 1 && p->outputs.len == nfloat);
        for (int i = 0; i <= m && i < p->nodes.len; i++) {
            const IrNode *a = &g->nodes.data[i], *b = &p->nodes.data[i];
            CHECK(a->op == b->op && a->nin == b->nin && a->loc.line == b->loc.line && a->loc.col == b->loc.col &&
                  a->origin == b->origin && a->origin_op == b->origin_op && a->a.nlist == b->a.nlist);
            const char *na = ir_cval(g, a->out[0])->name, *nb = ir_cval(p, b->out[0])->name;
            CHECK((!na && !nb) || (na && nb && strcmp(na, nb) == 0));
        }
        for (int k = 0; k < p->outputs.len; k++) {
            char want[32];
            snprintf(want, sizeof want, k ? "value%d" : "value", k);
            EXPECT(strcmp(p->output_names.data[k], want) == 0, "prefix %d output %d is '%s'", m, k, p->output_names.data[k]);
        }
        ir_graph_free(p);
    }
    CHECK(prefixes > 40 && none > 0);   /* the comparisons give bools: no prefix */
    /* outputs of one's choosing: an input and a value, at the last node */
    int vals[2] = {g->inputs.data[0], g->nodes.data[3].out[0]};
    IrGraph *w = NULL;
    CHECK_OK(ir_graph_with_outputs(g, g->nodes.len - 1, vals, 2, &w, &err), err);
    if (w) {
        CHECK_OK(ir_verify(w, &err), err);
        CHECK(w->outputs.len == 2 && w->outputs.data[0] == w->inputs.data[0] && w->nodes.len == g->nodes.len);
    }
    ir_graph_free(w);
    /* a value defined after the last node copied, and a node past the end: internal errors */
    int late = g->nodes.data[5].out[0];
    CHECK(ir_graph_with_outputs(g, 2, &late, 1, &w, &err) == FC_ERR_INTERNAL && !w);
    CHECK(ir_graph_prefix(g, g->nodes.len, &w, &err) == FC_ERR_INTERNAL && !w);
    ir_graph_free(g);
}

int main(void) {
    test_golden();
    test_copies();
    test_round_trip();
    test_interleaved_ids();
    test_escaped_names();
    test_parse_errors();
    test_mutations();
    test_alloc_failures();
    test_verifier();
    if (failures) {
        fprintf(stderr, "test_ir: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_ir: ok\n");
    return 0;
}
