/* test_cse.c: pass_cse (passes/cse.c) and its place in the pipeline.
 *
 * For each block: the decomposed graph through pass_cse has the expected number of nodes of an
 * op (merged or kept), passes ir_verify, keeps the inputs and outputs (names), and computes
 * what the graph before it computes, bit for bit (the reference interpreter on both, seeded
 * random inputs); a graph with nothing to merge gives *out NULL. Then the pipeline: softmax
 * and log_softmax of one input reduce each row twice fused (four times eager, which does not
 * merge), and two outputs that merge into one value still give two buffers.
 */
#include "frontend.h"
#include "interp.h"
#include "passes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double urand(void) {
    rng ^= rng >> 12; rng ^= rng << 25; rng ^= rng >> 27;
    return (double)((rng * 0x2545f4914f6cdd1dull) >> 11) * (1.0 / 9007199254740992.0);
}

static IrGraph *decomposed(const char *text) {
    FeOptions fo = {0};
    StrBuf diags = {0};
    FcErr err = {0};
    IrGraph *src = NULL, *dec = NULL, *live = NULL;
    if (fe_compile(text, strlen(text), "t.tf", &fo, &src, &diags, &err) != FC_OK) fprintf(stderr, "%s\n%s", err.msg, diags.data ? diags.data : "");
    sb_free(&diags);
    if (src && pass_decompose(src, &dec, &err) != FC_OK) fprintf(stderr, "decompose: %s\n", err.msg);
    if (dec && pass_dce(dec, &live, &err) != FC_OK) fprintf(stderr, "dce: %s\n", err.msg);
    ir_graph_free(src);
    ir_graph_free(dec);
    return live;
}

static int count_op(const IrGraph *g, IrOp op) {
    int n = 0;
    for (int i = 0; i < g->nodes.len; i++) n += g->nodes.data[i].op == op;
    return n;
}

/* outputs of g on seeded f32 inputs (every input f32), as bytes; NULL on a failure */
static float **run(const IrGraph *g, uint64_t seed) {
    rng = seed;
    int ni = g->inputs.len, no = g->outputs.len;
    void **in = calloc((size_t)ni + 1, sizeof *in);
    float **out = calloc((size_t)no + 1, sizeof *out);
    bool ok = in && out;
    for (int i = 0; ok && i < ni; i++) {
        int64_t m = 1;
        ir_shape_numel(&ir_cval(g, g->inputs.data[i])->shape, &m);
        float *x = malloc(sizeof(float) * (size_t)m);
        ok = x != NULL;
        for (int64_t e = 0; ok && e < m; e++) x[e] = (float)(4 * urand() - 2);
        in[i] = x;
    }
    for (int j = 0; ok && j < no; j++) {
        int64_t m = 1;
        ir_shape_numel(&ir_cval(g, g->outputs.data[j])->shape, &m);
        ok = (out[j] = malloc(sizeof(float) * (size_t)m)) != NULL;
        for (int64_t e = 0; ok && e < m; e++) out[j][e] = NAN;   /* poisoned */
    }
    FcErr err = {0};
    if (ok && rt_interp_run(g, (const void *const *)in, (void *const *)out, &err) != FC_OK) {
        fprintf(stderr, "interp: %s\n", err.msg);
        ok = false;
    }
    for (int i = 0; in && i < ni; i++) free(in[i]);
    free(in);
    if (!ok) {
        for (int j = 0; out && j < no; j++) free(out[j]);
        free(out);
        return NULL;
    }
    return out;
}

/* pass_cse on block `text`: op `op` counted before and after, the interface kept and the outputs
 * the same bits as before; merges: whether anything merged (*out not NULL) */
static void check_block(const char *what, const char *text, IrOp op, int before, int after, bool merges) {
    IrGraph *g = decomposed(text), *c = NULL;
    EXPECT(g != NULL, "%s: compile", what);
    if (!g) return;
    FcErr err = {0};
    EXPECT(pass_cse(g, &c, &err) == FC_OK, "%s: pass_cse: %s", what, err.msg);
    EXPECT((c != NULL) == merges, "%s: merged something: %d, expected %d", what, c != NULL, merges);
    const IrGraph *r = c ? c : g;
    EXPECT(count_op(g, op) == before, "%s: %d '%s' nodes before, expected %d", what, count_op(g, op), ir_ops[op].name, before);
    EXPECT(count_op(r, op) == after, "%s: %d '%s' nodes after, expected %d", what, count_op(r, op), ir_ops[op].name, after);
    EXPECT(ir_verify(r, &err) == FC_OK, "%s: verify: %s", what, err.msg);
    EXPECT(r->inputs.len == g->inputs.len && r->outputs.len == g->outputs.len, "%s: interface", what);
    for (int j = 0; j < r->outputs.len && j < g->outputs.len; j++)
        EXPECT(strcmp(r->output_names.data[j], g->output_names.data[j]) == 0, "%s: output %d named %s, was %s", what, j,
               r->output_names.data[j], g->output_names.data[j]);
    float **a = run(g, 0x1234), **b = run(r, 0x1234);
    EXPECT(a && b, "%s: interpreter", what);
    for (int j = 0; a && b && j < g->outputs.len; j++) {
        int64_t m = 1;
        ir_shape_numel(&ir_cval(g, g->outputs.data[j])->shape, &m);
        EXPECT(memcmp(a[j], b[j], sizeof(float) * (size_t)m) == 0, "%s: output %d differs after the merge", what, j);
    }
    for (int j = 0; j < g->outputs.len; j++) {
        if (a) free(a[j]);
        if (b) free(b[j]);
    }
    free(a);
    free(b);
    ir_graph_free(c);
    ir_graph_free(g);
}

/* the printed kernel IR of block `text` through the pipeline, fused or eager */
static char *kir_of(const char *text, bool fuse, int *nlaunch) {
    FeOptions fo = {0};
    StrBuf diags = {0}, out = {0};
    FcErr err = {0};
    IrGraph *src = NULL;
    PassResult res = {0};
    PassOptions po = {.fuse = fuse, .sm = 90, .library_gemm = true, .cpu = true};
    po.host = (PassCpu){.l1d_bytes = 32768, .l2_bytes = 1 << 20, .llc_bytes = 0, .vector_bytes = 32};
    if (fe_compile(text, strlen(text), "t.tf", &fo, &src, &diags, &err) == FC_OK && pass_pipeline(src, &po, &res, &err) == FC_OK) {
        kir_print_program(res.prog, &out);
        *nlaunch = res.prog->launches.len;
    } else {
        fprintf(stderr, "pipeline: %s\n", err.msg);
    }
    sb_free(&diags);
    pass_result_free(&res);
    ir_graph_free(src);
    return out.data;
}

static int count_str(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s ? strstr(s, needle) : NULL; p; p = strstr(p + 1, needle)) n++;
    return n;
}

int main(void) {
    static const char *const smx = "block f(x: f32[6, 40]) {\n    z = x * 3.0\n    return softmax(z, axis=-1), log_softmax(z, axis=-1)\n}\n";
    /* softmax and log_softmax share the max, the shifted row, its exp and their sum */
    check_block("softmax and log_softmax", smx, IR_OP_MAX, 2, 1, true);
    check_block("softmax and log_softmax (sum)", smx, IR_OP_SUM, 2, 1, true);
    check_block("softmax and log_softmax (exp)", smx, IR_OP_EXP, 2, 1, true);
    /* a chain merges once its inputs have: tanh(x * 2) twice */
    check_block("chain", "block f(x: f32[8, 8]) {\n    a = tanh(x * 2.0)\n    b = tanh(x * 2.0)\n    return a + b\n}\n", IR_OP_TANH, 2, 1, true);
    /* two outputs of one value: both kept, named as before */
    check_block("outputs", "block f(x: f32[8]) -> f32[8], f32[8] {\n    return exp(x), exp(x)\n}\n", IR_OP_EXP, 2, 1, true);
    /* attributes differ: not merged (axis; a constant's value, -0 against 0) */
    check_block("axes", "block f(x: f32[4, 8]) {\n    return sum(x, axis=0), sum(x, axis=1)\n}\n", IR_OP_SUM, 2, 2, false);
    check_block("constants", "block f(x: f32[8]) {\n    return x * 0.0, x * -0.0\n}\n", IR_OP_MUL, 2, 2, false);
    /* not merged: views, casts and random draws (dropout's scale constant merges) */
    check_block("transposes", "block f(x: f32[4, 8]) {\n    return transpose(x) * 2.0, transpose(x) + 1.0\n}\n", IR_OP_TRANSPOSE, 2,
                2, false);
    check_block("casts", "block f(x: f32[8]) {\n    return cast(x, bf16), cast(x, bf16)\n}\n", IR_OP_CAST, 2, 2, false);
    check_block("dropout", "block f(x: f32[64]) {\n    return dropout(x, 0.5, seed=3) + dropout(x, 0.5, seed=3)\n}\n",
                IR_OP_DROPOUT_MASK, 2, 2, true);

    /* the pipeline: two row reductions fused instead of four; eager keeps each op's own */
    int nf = 0, ne = 0;
    char *fused = kir_of(smx, true, &nf), *eager = kir_of(smx, false, &ne);
    EXPECT(fused && count_str(fused, "= reduce_") == 2, "fused softmax and log_softmax: %d row reductions, expected 2",
           count_str(fused, "= reduce_"));
    EXPECT(nf == 1, "fused: %d launches", nf);
    EXPECT(eager && count_str(eager, "= reduce_") == 4, "eager: %d row reductions, expected 4", count_str(eager, "= reduce_"));
    free(fused);
    free(eager);
    /* two outputs on one value: two output buffers, both written */
    char *two = kir_of("block f(x: f32[8]) -> f32[8], f32[8] {\n    return exp(x), exp(x)\n}\n", true, &nf);
    EXPECT(two && count_str(two, " output ") == 2, "two outputs: %d output buffers", count_str(two, " output "));
    free(two);
    /* the harness can fail: different blocks give different bits */
    IrGraph *g1 = decomposed("block f(x: f32[8]) {\n    return exp(x)\n}\n"), *g2 = decomposed("block f(x: f32[8]) {\n    return tanh(x)\n}\n");
    float **a = g1 ? run(g1, 7) : NULL, **b = g2 ? run(g2, 7) : NULL;
    EXPECT(a && b && memcmp(a[0], b[0], sizeof(float) * 8) != 0, "exp and tanh agree: the comparison shows nothing");
    if (a) free(a[0]);
    if (b) free(b[0]);
    free(a);
    free(b);
    ir_graph_free(g1);
    ir_graph_free(g2);
    if (!failures) printf("test_cse: ok\n");
    return failures != 0;
}
