/* libgemm.c: narrow-float matrix products as f32 library products (pass_library_products, see
 * passes.h).
 *
 * Requires: a verified graph. Leaves: a verified graph with the same inputs and outputs where
 * every matmul of f16, bf16 or f8 operands reads them cast to f32, and its f32 result is cast
 * back to the operands' type. Run only when products are library calls (PassOptions.library_gemm:
 * the CPU's BLAS, the AOT unit's cuBLASLt), which take f32: without it a narrow product is a
 * generated tiled kernel, 20 to 60 times slower on the CPU than the BLAS (examples/gpt2_mlp.tf at
 * bf16: 4.4 ms and 3.6 ms for its two products, against 0.18 ms each at f32).
 *
 * The numbers do not change: a narrow value widens to f32 exactly, the generated kernel
 * accumulated in f32 as the library does (only the order of the sum differs, which the
 * tolerances allow for any product), and the result is rounded to the narrow type once. The
 * casts carry the product's location and origin, so the eager program keeps them in the
 * product's kernels; fusion gives the library call its f32 operands from memory (an operand
 * kernel, or its producer's kernel) and rounds the result in the epilogue.
 *
 * On the CPU an A that is a transpose of a narrow value, transpose(x) (a backward's
 * dW = X^T @ dY), is widened below the transpose: transpose(cast(x)), the same numbers. The
 * BLAS then reads the f32 copy with its transpose flag (fuse.c's operand views), and the copy is
 * made in x's own order, by x's producer's kernel or an operand kernel reading x row by row;
 * cast(transpose(x)) made it in A's order, each element a strided read of x (a column of x a
 * row of A): the backward GELU kernel of examples/gpt2_mlp.tf at bf16 spent about half of its
 * 11 ms there. The GPU's library reads a 16-bit A itself (pass_narrow_product: the cast and the
 * transpose both views), so it keeps the cast on top. */
#include "passes.h"

#include <string.h>

static bool narrow(FcDtype t) { return t == FC_F16 || t == FC_BF16 || t == FC_F8E4M3 || t == FC_F8E5M2; }

static FcStatus add(IrGraph *g, const IrNode *n, IrOp op, const int *ins, int nin, const IrAttrs *a, int *out,
                    FcErr *err) {
    return ir_readd_node(g, n, op, ins, nin, a, "pass_library_products", out, err);
}

/* A: the transpose (swap of the last two dims) the product reads as A, or -1. */
static int transposed_a(const IrGraph *src, const IrNode *mm) {
    const IrValue *a = ir_cval(src, mm->in[0]);
    if (a->node < 0) return -1;
    const IrNode *t = &src->nodes.data[a->node];
    return ir_swaps_last_two(t, a->shape.rank) ? a->node : -1;
}

static FcStatus run(const IrGraph *src, IrGraph *g, int *map, bool cpu, FcErr *err) {
    FC_TRY(ir_copy_inputs(g, src, NULL, map, err));
    for (int i = 0; i < src->nodes.len; i++) {
        const IrNode *n = &src->nodes.data[i];
        int ins[8], first = -1;
        int *in = n->nin <= 8 ? ins : fc_calloc((size_t)n->nin, sizeof *in);
        if (!in) return FC_OOM(err);
        for (int k = 0; k < n->nin; k++) in[k] = map[n->in[k]];
        FcStatus s = FC_OK;
        FcDtype t = n->nout > 0 ? ir_cval(src, n->out[0])->dtype : FC_F32;
        if (n->op == IR_OP_MATMUL && narrow(t)) {
            IrAttrs wide = {.dtype = FC_F32}, back = ir_storage_cast(FC_F32, t);
            int ta = cpu ? transposed_a(src, n) : -1;
            if (ta >= 0) {   /* A = transpose(x): widen x, then transpose (see the file comment) */
                const IrNode *tn = &src->nodes.data[ta];
                int wx = -1;
                s = add(g, n, IR_OP_CAST, &map[tn->in[0]], 1, &wide, &wx, err);
                if (s == FC_OK) s = add(g, n, IR_OP_TRANSPOSE, &wx, 1, &tn->a, &in[0], err);
            }
            for (int k = ta >= 0 ? 1 : 0; k < 2 && s == FC_OK; k++)
                s = add(g, n, IR_OP_CAST, &in[k], 1, &wide, &in[k], err);
            int p = -1;
            if (s == FC_OK) s = add(g, n, IR_OP_MATMUL, in, 2, &n->a, &p, err);
            if (s == FC_OK) s = add(g, n, IR_OP_CAST, &p, 1, &back, &first, err);
        } else {
            s = add(g, n, n->op, in, n->nin, &n->a, &first, err);
        }
        if (in != ins) fc_free(in);
        if (s != FC_OK) return s;
        FC_TRY(ir_map_results(g, src, n, first, map, err));
    }
    FC_TRY(ir_copy_outputs(g, src, map, err));
    return ir_verify(g, err);
}

/* the 16-bit float type x is widened from by a cast to f32, else -1 */
static int widened_from(const IrGraph *g, int x) {
    const IrValue *v = ir_cval(g, x);
    if (v->node < 0 || v->dtype != FC_F32) return -1;
    const IrNode *c = &g->nodes.data[v->node];
    if (c->op != IR_OP_CAST) return -1;
    FcDtype t = ir_cval(g, c->in[0])->dtype;
    return t == FC_BF16 || t == FC_F16 ? (int)t : -1;
}

int pass_narrow_product(const IrGraph *g, const PassOptions *opt, int mm) {
    if (!opt->library_gemm || opt->cpu || mm < 0 || mm >= g->nodes.len) return -1;
    const IrNode *n = &g->nodes.data[mm];
    if (n->op != IR_OP_MATMUL || ir_cval(g, n->out[0])->dtype != FC_F32) return -1;
    int a = widened_from(g, n->in[0]);
    return a >= 0 && widened_from(g, n->in[1]) == a ? a : -1;
}

FcStatus pass_library_products(const IrGraph *in, bool cpu, IrGraph **out, FcErr *err) {
    *out = NULL;
    FC_CHECK(err, in != NULL);
    bool any = false;   /* most graphs have no narrow product: no copy for them */
    for (int i = 0; i < in->nodes.len && !any; i++)
        any = in->nodes.data[i].op == IR_OP_MATMUL && narrow(ir_cval(in, in->nodes.data[i].out[0])->dtype);
    if (!any) return FC_OK;
    IrGraph *g = ir_graph_new(in->name, in->file);
    int *map = fc_calloc((size_t)(in->values.len > 0 ? in->values.len : 1), sizeof *map);
    FcStatus s = g && map ? run(in, g, map, cpu, err) : FC_OOM(err);
    fc_free(map);
    if (s != FC_OK) {
        ir_graph_free(g);
        return s;
    }
    *out = g;
    return FC_OK;
}
