/* test_frontend.c: valid programs through fe_compile, checked on the graph: shapes, dtypes,
 * inserted casts, weak literals, constant folding, inlining, -D overrides, output names,
 * origins, warnings; and allocation-failure injection (no crash, a clean status).
 */
#include "frontend.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

static char diag_text[65536];

static IrGraph *compile_opts(const char *src, const FeOptions *o) {
    IrGraph *g = NULL;
    StrBuf sb = {0};
    FcErr err = {0};
    FcStatus s = fe_compile(src, strlen(src), "t.tf", o, &g, &sb, &err);
    snprintf(diag_text, sizeof diag_text, "%s", sb.data ? sb.data : "");
    sb_free(&sb);
    if (s != FC_OK) {
        fprintf(stderr, "compile failed (%d): %s\n%s", s, err.msg, diag_text);
        failures++;
        return NULL;
    }
    return g;
}
static IrGraph *compile(const char *src) { return compile_opts(src, NULL); }

static int count_op(const IrGraph *g, IrOp op) {
    int n = 0;
    for (int i = 0; i < g->nodes.len; i++) n += g->nodes.data[i].op == op;
    return n;
}
static const IrNode *find_op(const IrGraph *g, IrOp op, int k) {
    for (int i = 0; i < g->nodes.len; i++)
        if (g->nodes.data[i].op == op && k-- == 0) return &g->nodes.data[i];
    return NULL;
}
static const IrValue *out_val(IrGraph *g, int k) { return ir_val(g, g->outputs.data[k]); }
static bool type_is(const IrValue *v, const char *want) {
    char b[256];
    ir_type_str(v->dtype, &v->shape, b, sizeof b);
    if (strcmp(b, want) != 0) fprintf(stderr, "  type %s, expected %s\n", b, want);
    return strcmp(b, want) == 0;
}

static const char *MLP =
    "# GPT-2 MLP sub-block with its pre-norm and residual\n"
    "dim B = 4, T = 256, C = 768\n"
    "\n"
    "block mlp(x: f32[B, T, C],\n"
    "          param g: f32[C], param b: f32[C],\n"
    "          param w_fc: f32[C, 4*C], param b_fc: f32[4*C],\n"
    "          param w_proj: f32[4*C, C], param b_proj: f32[C]) -> f32[B, T, C]\n"
    "{\n"
    "    h = layernorm(x, g, b, eps=1e-5)\n"
    "    u = gelu(h @ w_fc + b_fc, approx=\"tanh\")\n"
    "    return x + u @ w_proj + b_proj\n"
    "}\n";

static const char *ATTN =
    "dim B = 4, T = 256, C = 768, H = 12\n"
    "block attn(x: f32[B, T, C], param w_qkv: f32[C, 3*C], param b_qkv: f32[3*C],\n"
    "           param w_o: f32[C, C], param b_o: f32[C]) -> f32[B, T, C]\n"
    "{\n"
    "    q, k, v = split(x @ w_qkv + b_qkv, 3, axis=-1)\n"
    "    q = transpose(reshape(q, [B, T, H, C/H]), [0, 2, 1, 3])\n"
    "    k = transpose(reshape(k, [B, T, H, C/H]), [0, 2, 1, 3])\n"
    "    v = transpose(reshape(v, [B, T, H, C/H]), [0, 2, 1, 3])\n"
    "    s = q @ transpose(k) * rsqrt(C/H)\n"
    "    o = softmax(causal_mask(s)) @ v\n"
    "    o = reshape(transpose(o, [0, 2, 1, 3]), [B, T, C])\n"
    "    return o @ w_o + b_o\n"
    "}\n";

static const char *LLAMA =
    "dim B = 2, T = 16, C = 64, H = 4, F = 172\n"
    "const D = C / H\n"
    "const eps = 1e-6\n"
    "block rope(x: bf16[B, H, T, D], cos_t: f32[T, D/2], sin_t: f32[T, D/2]) -> bf16[B, H, T, D] {\n"
    "    x1, x2 = split(x, 2)\n"
    "    c = cast(cos_t, bf16); s = cast(sin_t, bf16)\n"
    "    return concat([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)\n"
    "}\n"
    "block heads(t: bf16[B, T, C]) -> bf16[B, H, T, D] {\n"
    "    return transpose(reshape(t, [B, T, H, D]), [0, 2, 1, 3])\n"
    "}\n"
    "block layer(x: bf16[B, T, C], cos_t: f32[T, D/2], sin_t: f32[T, D/2],\n"
    "            param g_attn: bf16[C], param wq: bf16[C, C], param wk: bf16[C, C],\n"
    "            param wv: bf16[C, C], param wo: bf16[C, C],\n"
    "            param g_mlp: bf16[C], param w_gate: bf16[C, F], param w_up: bf16[C, F],\n"
    "            param w_down: bf16[F, C]) -> bf16[B, T, C]\n"
    "{\n"
    "    h = rmsnorm(x, g_attn, eps=eps)\n"
    "    q = rope(heads(h @ wq), cos_t, sin_t)\n"
    "    k = rope(heads(h @ wk), cos_t, sin_t)\n"
    "    v = heads(h @ wv)\n"
    "    o = attention(q, k, v, causal=true)\n"
    "    o = reshape(transpose(o, [0, 2, 1, 3]), [B, T, C])\n"
    "    x = x + o @ wo\n"
    "    h = rmsnorm(x, g_mlp, axis=[-1])\n"
    "    m = silu(h @ w_gate) * (h @ w_up)\n"
    "    return x + m @ w_down\n"
    "}\n";

static void test_examples(void) {
    IrGraph *g = compile(MLP);
    if (g) {
        EXPECT(g->inputs.len == 7 && !g->is_param.data[0] && g->is_param.data[1], "inputs");
        EXPECT(g->outputs.len == 1 && strcmp(g->output_names.data[0], "out0") == 0, "output name");
        EXPECT(type_is(out_val(g, 0), "f32[4, 256, 768]"), "mlp type");
        const IrNode *ln = find_op(g, IR_OP_LAYERNORM, 0), *ge = find_op(g, IR_OP_GELU, 0);
        EXPECT(ln && ln->nin == 3 && ln->a.i[0] == 1 && ln->a.i[1] == 1 && ln->a.f == 1e-5 && ln->a.nlist == 1 && ln->a.list[0] == 2,
               "layernorm attrs");
        EXPECT(ge && ge->a.i[0] == IR_APPROX_TANH, "gelu approx");
        EXPECT(count_op(g, IR_OP_MATMUL) == 2 && count_op(g, IR_OP_ADD) == 3 && count_op(g, IR_OP_CAST) == 0, "ops");
        EXPECT(ln && ln->loc.line == 9 && ln->loc.col == 9, "layernorm loc %d:%d", ln ? ln->loc.line : 0, ln ? ln->loc.col : 0);
        EXPECT(diag_text[0] == 0, "no warnings: %s", diag_text);
        ir_graph_free(g);
    }
    g = compile(ATTN);
    if (g) {
        const IrNode *sp = find_op(g, IR_OP_SPLIT, 0), *fu = find_op(g, IR_OP_FULL, 0), *sm = find_op(g, IR_OP_SOFTMAX, 0);
        EXPECT(sp && sp->nout == 3 && sp->a.nlist == 3 && sp->a.list[0] == 768 && sp->a.i[0] == 2, "split");
        EXPECT(fu && fu->a.f == 0.125 && fu->a.dtype == FC_F32 && fu->a.nlist == 0, "rsqrt(C/H) folded to 0.125");
        EXPECT(sm && sm->a.i[0] == 3, "softmax axis normalized");
        const IrNode *tr = find_op(g, IR_OP_TRANSPOSE, 3);
        EXPECT(tr && tr->a.nlist == 4 && tr->a.list[2] == 3 && tr->a.list[3] == 2, "transpose default swaps the last two");
        EXPECT(type_is(out_val(g, 0), "f32[4, 256, 768]"), "attn type");
        ir_graph_free(g);
    }
    g = compile(LLAMA);
    if (g) {
        const IrNode *at = find_op(g, IR_OP_ATTENTION, 0);
        EXPECT(at && at->a.i[0] == 1 && at->a.f == 0.25, "attention causal, scale 1/sqrt(16)");
        EXPECT(count_op(g, IR_OP_RMSNORM) == 2 && count_op(g, IR_OP_CONCAT) == 2 && count_op(g, IR_OP_SPLIT) == 2, "inlined");
        EXPECT(type_is(out_val(g, 0), "bf16[2, 16, 64]"), "llama type");
        const IrNode *rn = find_op(g, IR_OP_RMSNORM, 0);
        EXPECT(rn && rn->a.f == 1e-6 && rn->a.i[0] == 1, "rmsnorm eps from a const");
        EXPECT(count_op(g, IR_OP_CAST) == 4, "cos/sin casts in each of two rope calls: %d", count_op(g, IR_OP_CAST));
        ir_graph_free(g);
    }
    g = compile("dim N = 8\n"
                "block int(float: f32[N], threadIdx: f32[N]) -> f32[N] {\n"
                "    __global__ = float * threadIdx\n"
                "    main = __global__ + 1\n"
                "    return main\n"
                "}\n"
                "block main(__global__: f32[N]) {\n"
                "    int = int(__global__, __global__)\n"
                "    return int, __global__ * 2\n"
                "}\n");
    if (g) {
        EXPECT(strcmp(g->name, "main") == 0 && g->outputs.len == 2, "block main");
        EXPECT(strcmp(g->output_names.data[0], "int") == 0 && strcmp(g->output_names.data[1], "out1") == 0, "names %s %s",
               g->output_names.data[0], g->output_names.data[1]);
        ir_graph_free(g);
    }
}

static void test_weak_and_promotion(void) {
    IrGraph *g = compile("block f(x: bf16[3], i: i32[3], h: f16[3], d: f64[3], l: i64[3]) {\n"
                         "    a = x * 0.5\n"          /* bf16, no cast */
                         "    b = i * 0.5\n"          /* i -> f32 */
                         "    c = i + 1\n"            /* i32 literal */
                         "    e = i / 2\n"            /* f32 */
                         "    k = h + x\n"            /* f32 */
                         "    m = d + h\n"            /* f64 */
                         "    n = i + l\n"            /* i64 */
                         "    o = i < h\n"            /* bool */
                         "    p = mean(i)\n"          /* f32 */
                         "    q = exp(i)\n"           /* f32 */
                         "    return a, b, c, e, k, m, n, o, p, q\n"
                         "}\n");
    if (!g) return;
    const char *want[] = {"bf16[3]", "f32[3]", "i32[3]", "f32[3]", "f32[3]", "f64[3]", "i64[3]", "bool[3]", "f32[]", "f32[3]"};
    for (int k = 0; k < 10; k++) EXPECT(type_is(out_val(g, k), want[k]), "output %d", k);
    const IrNode *mul = find_op(g, IR_OP_MUL, 0), *full = find_op(g, IR_OP_FULL, 0);
    EXPECT(full && full->a.dtype == FC_BF16 && full->a.f == 0.5 && full->origin == mul->origin && full->origin_op == IR_OP_MUL,
           "weak literal full shares the op's origin");
    const IrNode *c0 = find_op(g, IR_OP_CAST, 0);
    EXPECT(c0 && c0->a.dtype == FC_F32 && c0->origin_op == IR_OP_MUL, "i32 -> f32 cast for i * 0.5");
    const IrNode *full2 = find_op(g, IR_OP_FULL, 2);
    EXPECT(full2 && full2->a.dtype == FC_I32 && full2->a.f == 1, "int literal takes i32");
    EXPECT(strcmp(g->output_names.data[0], "a") == 0 && strcmp(g->output_names.data[9], "q") == 0, "plain names");
    ir_graph_free(g);

    g = compile("block f(c: bool[2, 3], x: f16[3], y: f32[2, 1]) {\n"
                "    return where(c, x, 0.0), where(c, x, y), where(x > 0, 1, 0)\n"
                "}\n");
    if (g) {
        EXPECT(type_is(out_val(g, 0), "f16[2, 3]") && type_is(out_val(g, 1), "f32[2, 3]") && type_is(out_val(g, 2), "i32[3]"),
               "where types");
        ir_graph_free(g);
    }
}

static void test_dims_and_folding(void) {
    FeDimBinding d[2] = {{"B", 7}, {"T", 5}};
    FeOptions o = {.dims = d, .ndims = 2};
    IrGraph *g = compile_opts("dim B = 4, T\nconst half = T / 2\nconst neg = -inf\n"
                              "block f(x: f32[B, T * 2]) {\n"
                              "    y = reshape(x, [B, -1, T])\n"
                              "    return causal_mask(y * half, neg)\n"
                              "}\n", &o);
    if (g) {
        EXPECT(type_is(ir_val(g, g->inputs.data[0]), "f32[7, 10]"), "-D overrides and binds");
        EXPECT(type_is(out_val(g, 0), "f32[7, 2, 5]"), "reshape -1 resolved");
        const IrNode *fu = find_op(g, IR_OP_FULL, 0), *cm = find_op(g, IR_OP_CAUSAL_MASK, 0);
        EXPECT(fu && fu->a.f == 2.5, "T / 2 is a weak float 2.5");
        EXPECT(cm && isinf(cm->a.f) && cm->a.f < 0, "const -inf");
        ir_graph_free(g);
    }
    /* shadowing and unused warnings do not fail the compile */
    g = compile("dim B = 2, Z = 3\nblock f(B: f32[2], u: f32[2]) {\n    x = B + 1\n    return x\n}\n");
    if (g) {
        EXPECT(strstr(diag_text, "t.tf:2:9: warning: 'B' shadows the dim declared at line 1"), "shadow warning: %s", diag_text);
        EXPECT(strstr(diag_text, "warning: input 'u' is not used by block 'f'"), "unused input: %s", diag_text);
        EXPECT(strstr(diag_text, "warning: dim 'Z' is declared but not used by block 'f'"), "unused dim: %s", diag_text);
        EXPECT(strstr(diag_text, "dim 'B' is declared but not used"), "B is shadowed, so unused: %s", diag_text);
        ir_graph_free(g);
    }
}

static void test_ops(void) {
    IrGraph *g = compile("dim N = 5, M = 3\n"
                         "block f(x: f32[N, M], v: f32[M], w: f32[M], ids: i32[2, 4], g: bf16[M]) {\n"
                         "    a = x @ v\n"                      /* [N] */
                         "    b = v @ w\n"                      /* [] */
                         "    c = sum(x)\n"                     /* all axes */
                         "    d = max(x, axis=[0], keepdim=true)\n"
                         "    e0, e1 = split(x, [1, 4], axis=0)\n"
                         "    s = slice(x, 0, -3, 5, 2)\n"
                         "    t = iota([2, 3], 1)\n"
                         "    u = full([2], 7, dtype=i64)\n"
                         "    r = gather(x, ids)\n"
                         "    k = concat([x, cast(x, f16)], axis=0)\n"
                         "    l = layernorm(x, g)\n"
                         "    m = broadcast(v, [2, M])\n"
                         "    n = log_softmax(x, 0)\n"
                         "    o = gelu(iota([4], 0))\n"
                         "    p = --x\n"
                         "    return a, b, c, d, e1, s, t, u, r, k, l, m, n, o, p\n"
                         "}\n");
    if (!g) return;
    const char *want[] = {"f32[5]", "f32[]", "f32[]", "f32[1, 3]", "f32[4, 3]", "f32[2, 3]", "i32[2, 3]", "i64[2]",
                          "f32[2, 4, 3]", "f32[10, 3]", "f32[5, 3]", "f32[2, 3]", "f32[5, 3]", "f32[4]", "f32[5, 3]"};
    for (int k = 0; k < 15; k++) EXPECT(type_is(out_val(g, k), want[k]), "output %d", k);
    const IrNode *mm = find_op(g, IR_OP_MATMUL, 0), *rs = find_op(g, IR_OP_RESHAPE, 0);
    EXPECT(rs && mm && rs->origin == mm->origin && rs->origin_op == IR_OP_MATMUL, "matmul reshapes share its origin");
    EXPECT(count_op(g, IR_OP_RESHAPE) == 5, "rank-1 matmul reshapes: %d", count_op(g, IR_OP_RESHAPE));
    const IrNode *su = find_op(g, IR_OP_SUM, 0);
    EXPECT(su && su->a.nlist == 2, "sum over all axes");
    const IrNode *ln = find_op(g, IR_OP_LAYERNORM, 0);
    EXPECT(ln && ln->nin == 2 && ln->a.i[0] == 1 && ln->a.i[1] == 0, "layernorm gain only");
    const IrNode *gc = find_op(g, IR_OP_CAST, 2);
    EXPECT(gc && gc->a.dtype == FC_F32 && gc->origin == ln->origin, "bf16 gain cast to x's dtype");
    EXPECT(count_op(g, IR_OP_NEG) == 0, "--x is x");
    const IrNode *sl = find_op(g, IR_OP_SLICE, 0);
    EXPECT(sl && sl->a.i[1] == 2 && sl->a.i[3] == 2, "slice normalized");
    EXPECT(strcmp(g->output_names.data[4], "e1") == 0, "split result name");
    ir_graph_free(g);

    g = compile("block f(x: f32[2]) {\n    s = x * 2\n    return s, x + 1, s, x\n}\n");
    if (g) {
        EXPECT(g->outputs.len == 4 && strcmp(g->output_names.data[0], "s") == 0 && strcmp(g->output_names.data[1], "out1") == 0 &&
                   strcmp(g->output_names.data[2], "out2") == 0 && strcmp(g->output_names.data[3], "x") == 0,
               "output naming");
        ir_graph_free(g);
    }
}

/* Every allocation failure gives a clean status and no crash (leaks: run under ASan). */
static void test_alloc_failures(void) {
    for (long n = 1; n < 100000; n++) {
        fc_alloc_fail_at(n);
        IrGraph *g = NULL;
        StrBuf sb = {0};
        FcErr err = {0};
        FcStatus s = fe_compile(LLAMA, strlen(LLAMA), "t.tf", NULL, &g, &sb, &err);
        fc_alloc_fail_at(0);
        sb_free(&sb);
        EXPECT(s == FC_OK || s == FC_ERR_NOMEM, "fail at %ld: status %d %s", n, s, err.msg);
        EXPECT((s == FC_OK) == (g != NULL), "graph only on success");
        ir_graph_free(g);
        if (s == FC_OK) break;
    }
}

int main(void) {
    test_examples();
    test_weak_and_promotion();
    test_dims_and_folding();
    test_ops();
    test_alloc_failures();
    if (failures) fprintf(stderr, "%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
