/* precision.c: storage precision (pass_precision, see passes.h; docs/precision.md).
 *
 * Requires: a verified graph (the frontend's). Leaves: a verified graph with the same inputs
 * (names, shapes, param flags, order; f32 dtypes lowered) and outputs (names), where every value
 * the source declared or computed as f32 is stored as the narrow float p (bf16 or f16), except
 * the values kept wide:
 *   - the results of sum and mean (a norm's statistics, a softmax's sum, a mean loss written by
 *     hand): rounding a statistic to 8 bits of significand and then subtracting it from values
 *     near it is where a narrow format loses everything; they are small (reduced) tensors;
 *   - the result of cross_entropy (the loss);
 *   - constants (full, iota): a literal such as a norm's eps keeps the value f32 gives it (1e-5
 *     is a subnormal in f16), and a generator is made in registers, never stored, unless it is
 *     a block output.
 * attention(q, k, v) becomes its steps, each result stored in p (attention_steps).
 * A wide op's lowered inputs are widened to f32 first (a cast, exact), and so are the lowered
 * inputs of any op that also reads a wide value (x - mean(x) is computed from f32 operands);
 * such an op's f32 result is then cast to p. f64 and the narrow types the source declared itself
 * are left as they are; integers and bools too. A cast to f32 becomes a storage cast to p
 * (wide: the f32 value the source asked for stays f32 in a kernel and is rounded to p where
 * stored, as every f32 value this pass lowers; a rounding cast there rounded an f16 value to
 * bf16 between fused ops, difftest f8 seed 2026112820 graph 730).
 *
 * Arithmetic stays f32: code generation computes every narrow value in f32 registers and
 * rounds only where a value is stored (a kernel's output, or every op under --strict-rounding),
 * and the composites widen their own inputs (pass_decompose). So each cast this pass adds is
 * elementwise next to its producer or its consumer, under that op's origin: fusion puts it in
 * the producer's or the consumer's kernel, the eager program in that op's kernel, and a value
 * crosses a kernel boundary in p, never in f32 and then again in p.
 *
 * f8 (p = FC_F8E4M3; docs/precision.md "f8"): the graph is bf16's (the interface and the block
 * outputs bf16, or the 16-bit type the source declared; the wide values f32), and every value bf16
 * would store (and, at f8, every value the source declared or computed as bf16 or f16) but a
 * block output and the logits of softmax, log_softmax and cross_entropy (their results depend on
 * the logits' differences, which 3 bits lose; also what makes them through index maps, the
 * causal mask, casts, + - * / and a matrix product: attention's scores) is stored in E4M3 with a slot of its own
 * (IrGraph.fp8): q = fp8_quant(v, fp8_scale(slot)) under v's producer's origin, read by each
 * reader as fp8_dequant(q, s) in the 16-bit type v would have been stored in, under the reader's
 * origin (fusion keeps the dequant with its reader: the value crosses a kernel boundary as q).
 * So the ops run as at bf16 and their gradients are bf16. An index map (reshape, transpose,
 * slice, split, broadcast) of one f8 value is applied to q itself and keeps its scale. With
 * train, each such slot gets a second, E5M2 one for the tensor's gradient (IrFp8Slot.grad):
 * pass_autodiff rounds q's adjoint to E5M2 with it, so the backward's gradients are f8 where the
 * forward's values are.
 * attention(q, k, v) becomes its steps as at bf16, its operands read back as bf16, its scores
 * (softmax's logits) bf16 and its probabilities E4M3 (attention_steps), as the attention
 * written out op by op stores them.
 * f8 without train (Px.io): the interface is f8 too. Each float input the pass lowers (but a
 * param of rank < 2 and the softmax's logits) becomes an E4M3 input with a slot of its own,
 * IrFp8Slot.input, the first slots in input order: its caller sets the scale at each run, and
 * each reader makes its own fp8_scale of it (read_scale); the block outputs are quantized like
 * any other value, so each carries its slot's scale out (ir_fp8_slot_of). */
#include "passes.h"

#include <math.h>
#include <string.h>

typedef struct Px {
    const IrGraph *src;
    IrGraph *g;
    int *map;          /* src value id -> g value id */
    FcDtype p;         /* the storage type (at f8: bf16, the interface's and the outputs') */
    bool f8;           /* --precision f8: intermediates are fp8_quant values */
    bool train;        /* f8: every slot gets an E5M2 slot for its tensor's gradient */
    bool io;           /* f8 without train: the interface (inputs, params, outputs) is f8 too */
    int *scale_of;     /* [g values] f8: the fp8_scale value of an fp8_quant result; -2 - K for an
                        * f8 input of slot K (its readers make their own fp8_scale); else -1 */
    FcDtype *deq_dt;   /* [g values] f8: the type its readers read it back as (bf16, or f16) */
    int cap;           /* scale_of's room */
    bool *is_output;   /* [src values] a block output */
    bool *keep_bf16;   /* [src values] f8: stored bf16, not E4M3 (the logits of a softmax) */
    FcErr *err;
    const IrNode *n;   /* the node being copied */
    IrLoc loc;         /* what every node made now gets: n's location, origin and origin op, */
    int origin;        /* or an attention step's own origin */
    IrOp origin_op;
} Px;

static bool wide_op(IrOp op) {
    return op == IR_OP_SUM || op == IR_OP_MEAN || op == IR_OP_CROSS_ENTROPY || op == IR_OP_FULL || op == IR_OP_IOTA;
}

static FcStatus emit(Px *x, IrOp op, const int *ins, int nin, const IrAttrs *a, int *out) {
    FcStatus s = ir_add_node(x->g, op, ins, nin, a, x->loc, x->origin, x->origin_op, out, x->err);
    if (s == FC_ERR_INPUT) {
        char msg[sizeof x->err->msg];
        memcpy(msg, x->err->msg, sizeof msg);
        return fc_err_set(x->err, FC_ERR_INTERNAL, "internal error: pass_precision: '%s' became a bad '%s': %s",
                          ir_ops[x->n->op].name, ir_ops[op].name, msg);
    }
    return s;
}

/* v cast to t (v itself when it is of dtype t). */
static FcStatus cast_to(Px *x, int v, FcDtype t, int *out) {
    if (ir_cval(x->g, v)->dtype == t) {
        *out = v;
        return FC_OK;
    }
    IrAttrs a = ir_storage_cast(ir_cval(x->g, v)->dtype, t);
    return emit(x, IR_OP_CAST, &v, 1, &a, out);
}

/* f8: value v of g is f8 with scale sc (an fp8_scale value) */
static FcStatus set_scale(Px *x, int v, int sc, FcDtype dt) {
    if (v >= x->cap) {
        int cap = 2 * v + 16, *bigger = fc_calloc((size_t)cap, sizeof *bigger);
        FcDtype *dts = fc_calloc((size_t)cap, sizeof *dts);
        if (!bigger || !dts) {
            fc_free(bigger);
            fc_free(dts);
            return FC_OOM(x->err);
        }
        for (int i = 0; i < cap; i++) bigger[i] = i < x->cap ? x->scale_of[i] : -1;
        if (x->cap) memcpy(dts, x->deq_dt, sizeof *dts * (size_t)x->cap);
        fc_free(x->scale_of);
        fc_free(x->deq_dt);
        x->scale_of = bigger;
        x->deq_dt = dts;
        x->cap = cap;
    }
    x->scale_of[v] = sc;
    x->deq_dt[v] = dt;
    return FC_OK;
}

/* f8: v stored as E4M3 with a slot of its own: q = fp8_quant(v, fp8_scale(slot)), under the
 * producer's origin (its kernel stores q and records the amax); its readers read it back as dt
 * (the 16-bit type v would have been stored in). */
static FcStatus quantize(Px *x, int v, FcDtype dt, int *out) {
    int slot = ir_add_fp8_slot(x->g, FC_F8E4M3), sc, q;
    if (slot < 0) return FC_OOM(x->err);
    if (x->train) {
        int gs = ir_add_fp8_slot(x->g, FC_F8E5M2);
        if (gs < 0) return FC_OOM(x->err);
        x->g->fp8.data[slot].grad = gs;
    }
    IrAttrs a = {.i = {slot}};
    FC_TRY(emit(x, IR_OP_FP8_SCALE, NULL, 0, &a, &sc));
    FC_TRY(emit(x, IR_OP_FP8_QUANT, (int[]){v, sc}, 2, &a, &q));
    *out = q;
    return set_scale(x, q, sc, dt);
}
static int scale_of(const Px *x, int v) { return x->f8 && v < x->cap ? x->scale_of[v] : -1; }
/* f8 value v's scale as a value of g: the fp8_quant's, or for an f8 input a fresh fp8_scale of
 * its slot under the reader's origin (a generator: lower.c makes it in each kernel that reads
 * it, and an eager kernel keeps it with the op that reads it) */
static FcStatus read_scale(Px *x, int v, int *sc) {
    *sc = scale_of(x, v);
    if (*sc >= -1) return FC_OK;
    IrAttrs a = {.i = {-2 - *sc}};
    return emit(x, IR_OP_FP8_SCALE, NULL, 0, &a, sc);
}
/* Does the pass lower a source value of dtype t? f32 at every precision; at f8 also the 16-bit
 * types the source declared (a block written in bf16 stores its intermediates in E4M3 too). */
static bool narrowable(const Px *x, FcDtype t) {
    return t == FC_F32 || (x->f8 && (t == FC_BF16 || t == FC_F16));
}

/* Operand v as its reader reads it: an f8 value dequantized (under the reader's origin, so that
 * fusion keeps the conversion with its reader) to the 16-bit type it would have had; else v. */
static FcStatus read_value(Px *x, int v, int *out) {
    int sc = scale_of(x, v);
    *out = v;
    if (sc == -1) return FC_OK;
    IrAttrs da = {.dtype = x->deq_dt[v]};
    FC_TRY(read_scale(x, v, &sc));
    return emit(x, IR_OP_FP8_DEQUANT, (int[]){v, sc}, 2, &da, out);
}

/* Source value sv, computed as v of g by an op (wide: a wide_op), as the graph stores it: an
 * f32 result in p, but a wide op's; at f8 (which takes 16-bit values too) in E4M3, but a block
 * output's, a softmax's logits and a wide op's, which keep p or the 16-bit type the source
 * declared. */
static FcStatus store_result(Px *x, int sv, bool wide, int v, int *out) {
    FcDtype sd = ir_cval(x->src, sv)->dtype, t = sd == FC_F32 ? x->p : sd;
    *out = v;
    if (!narrowable(x, sd)) return FC_OK;
    if (wide) return sd != FC_F32 ? cast_to(x, v, sd, out) : FC_OK;
    if (x->f8 && (!x->is_output[sv] || x->io) && !x->keep_bf16[sv]) return quantize(x, v, t, out);
    return cast_to(x, v, t, out);
}

/* attention(q, k, v) with q, k, v lowered (of type p, or at f8 E4M3 values read back as p): its
 * steps as ops of their own, each with a fresh origin (as pass_decompose's), every step's result
 * stored in p: the scores q @ kT, scaled (in f32, then p), masked, their softmax (the composite
 * computes in f32 and rounds once) and the product with v. The composite would keep the scores
 * and probabilities f32 from end to end, and a [.., T, T] tensor is the largest an attention block
 * stores between kernels (and saves for the backward); the math attention of mixed-precision
 * training stores them narrow too. At f8 the steps are those of the attention written out: the
 * scores (softmax's logits) stay p, the probabilities are stored in E4M3 with a slot of their own
 * (and, with train, an E5M2 one for their gradient), and each step reads an f8 operand back as
 * p under its own origin. The result is p; run_node stores it as any op's. */
static FcStatus attention_steps(Px *x, const IrNode *n, int *out) {
    int q = x->map[n->in[0]], k = x->map[n->in[1]], v = x->map[n->in[2]];
    int r = ir_cval(x->g, k)->shape.rank;
    int64_t perm[IR_MAX_RANK];
    for (int i = 0; i < r; i++) perm[i] = i;
    perm[r - 2] = r - 1;
    perm[r - 1] = r - 2;
    IrAttrs pa = {.nlist = r, .list = perm}, ca = {.f = n->a.f, .dtype = FC_F32}, wa = {.dtype = FC_F32},
            na = ir_storage_cast(FC_F32, x->p), ma = {.f = -INFINITY}, sa = {.i = {r - 1}};
    int kt, s, c, sw, p;
    x->origin = x->g->next_origin++, x->origin_op = IR_OP_TRANSPOSE;
    FC_TRY(read_value(x, k, &k));
    FC_TRY(emit(x, IR_OP_TRANSPOSE, &k, 1, &pa, &kt));
    x->origin = x->g->next_origin++, x->origin_op = IR_OP_MATMUL;
    FC_TRY(read_value(x, q, &q));
    int qk[2] = {q, kt};
    FC_TRY(emit(x, IR_OP_MATMUL, qk, 2, NULL, &s));
    x->origin = x->g->next_origin++, x->origin_op = IR_OP_MUL;
    FC_TRY(emit(x, IR_OP_FULL, NULL, 0, &ca, &c));
    FC_TRY(emit(x, IR_OP_CAST, &s, 1, &wa, &sw));
    int sc[2] = {sw, c};
    FC_TRY(emit(x, IR_OP_MUL, sc, 2, NULL, &sw));
    FC_TRY(emit(x, IR_OP_CAST, &sw, 1, &na, &s));
    if (n->a.i[0]) {
        x->origin = x->g->next_origin++, x->origin_op = IR_OP_CAUSAL_MASK;
        FC_TRY(emit(x, IR_OP_CAUSAL_MASK, &s, 1, &ma, &s));
    }
    x->origin = x->g->next_origin++, x->origin_op = IR_OP_SOFTMAX;
    FC_TRY(emit(x, IR_OP_SOFTMAX, &s, 1, &sa, &p));
    if (x->f8) FC_TRY(quantize(x, p, x->p, &p));
    x->origin = x->g->next_origin++, x->origin_op = IR_OP_MATMUL;
    FC_TRY(read_value(x, p, &p));
    FC_TRY(read_value(x, v, &v));
    int pv[2] = {p, v};
    return emit(x, IR_OP_MATMUL, pv, 2, NULL, out);
}

static FcStatus run_node(Px *x, const IrNode *n) {
    x->n = n;
    x->loc = n->loc;
    x->origin = n->origin;
    x->origin_op = n->origin_op;
    if (n->op == IR_OP_ATTENTION) {
        /* its operands lowered to p (at f8: E4M3 values read back as p) */
        bool low = true;
        for (int k = 0; k < 3; k++) {
            int m = x->map[n->in[k]];
            low = low && m >= 0 && (scale_of(x, m) != -1 ? x->deq_dt[m] : ir_cval(x->g, m)->dtype) == x->p;
        }
        if (low) {
            int o = -1;
            FC_TRY(attention_steps(x, n, &o));
            /* (stored under the last step's origin, its producer's) */
            FC_TRY(store_result(x, n->out[0], false, o, &o));
            x->map[n->out[0]] = o;
            const char *nm = ir_cval(x->src, n->out[0])->name;
            if (nm && !(ir_val(x->g, o)->name = arena_strdup(&x->g->arena, nm))) return FC_OOM(x->err);
            return FC_OK;
        }
    }
    /* f8: an index map of one f8 value moves the f8 bytes, under the same scale (no slot of its
     * own, no rounding again), unless a result is a block output (bf16) */
    if (x->f8 && ir_ops[n->op].cat == IR_CAT_SHAPE && n->nin == 1 && scale_of(x, x->map[n->in[0]]) != -1) {
        bool out = false;
        for (int k = 0; k < n->nout; k++) out |= x->is_output[n->out[k]] && !x->io;
        if (!out) {
            int sc, first = -1;
            FC_TRY(read_scale(x, x->map[n->in[0]], &sc));
            FC_TRY(emit(x, n->op, &x->map[n->in[0]], 1, &n->a, &first));
            FcDtype dt = x->deq_dt[x->map[n->in[0]]];
            for (int k = 0; k < n->nout; k++) {
                x->map[n->out[k]] = first + k;
                FC_TRY(set_scale(x, first + k, sc, dt));
                const char *nm = ir_cval(x->src, n->out[k])->name;
                if (nm && !(ir_val(x->g, first + k)->name = arena_strdup(&x->g->arena, nm))) return FC_OOM(x->err);
            }
            return FC_OK;
        }
    }
    int *ins = fc_calloc((size_t)(n->nin > 0 ? n->nin : 1), sizeof *ins);
    if (!ins) return FC_OOM(x->err);
    /* f8: an f8 operand is read back (dequantized, under this op's origin so that fusion keeps
     * the conversion with its reader) as the 16-bit type it would have had; the op then runs as
     * at bf16 */
    bool widen = wide_op(n->op);
    FcStatus s = FC_OK;
    for (int k = 0; k < n->nin && s == FC_OK; k++) {
        FC_CHECK(x->err, n->in[k] >= 0 && n->in[k] < x->src->values.len && x->map[n->in[k]] >= 0);
        ins[k] = x->map[n->in[k]];
        /* an f32 operand that stayed f32 (a wide value): the lowered ones meet it in f32 */
        if (ir_cval(x->src, n->in[k])->dtype == FC_F32 && ir_cval(x->g, ins[k])->dtype == FC_F32) widen = true;
        bool again = false;
        for (int j = 0; j < k && !again; j++)   /* read twice (x * x): one dequant */
            if (n->in[j] == n->in[k]) ins[k] = ins[j], again = true;
        if (!again) s = read_value(x, ins[k], &ins[k]);
    }
    for (int k = 0; k < n->nin && s == FC_OK && widen; k++)
        if (narrowable(x, ir_cval(x->src, n->in[k])->dtype)) s = cast_to(x, ins[k], FC_F32, &ins[k]);
    IrAttrs a = n->a;
    if (n->op == IR_OP_CAST && a.dtype == FC_F32 && !widen) a = ir_storage_cast(ir_cval(x->g, ins[0])->dtype, x->p);
    int first = -1;
    if (s == FC_OK) s = emit(x, n->op, ins, n->nin, &a, &first);
    fc_free(ins);
    if (s != FC_OK) return s;
    FC_CHECK(x->err, x->g->nodes.data[x->g->nodes.len - 1].nout == n->nout);
    for (int k = 0; k < n->nout; k++) {
        int v = first + k;
        FC_TRY(store_result(x, n->out[k], wide_op(n->op), v, &v));
        x->map[n->out[k]] = v;
        const char *nm = ir_cval(x->src, n->out[k])->name;
        if (nm && !(ir_val(x->g, v)->name = arena_strdup(&x->g->arena, nm))) return FC_OOM(x->err);
    }
    return FC_OK;
}

static FcStatus run(Px *x) {
    const IrGraph *src = x->src;
    int retype[FC_DTYPE_COUNT];
    for (int t = 0; t < FC_DTYPE_COUNT; t++) retype[t] = t == FC_F32 ? (int)x->p : -1;
    FC_TRY(ir_copy_inputs(x->g, src, retype, x->map, x->err));
    /* f8 at the interface: a float input the pass lowers is an E4M3 tensor with a slot whose
     * scale its caller sets (IrFp8Slot.input), read back as the 16-bit type it would have had;
     * but a param of rank 0 or 1 (a norm's gain, a bias: few bytes, and a gain near 1 would
     * move by up to 6 %), as FP8 inference keeps them 16-bit */
    for (int i = 0; x->io && i < src->inputs.len; i++) {
        const IrValue *sv = ir_cval(src, src->inputs.data[i]);
        if (!narrowable(x, sv->dtype) || x->keep_bf16[src->inputs.data[i]]) continue;
        if (src->is_param.data[i] && sv->shape.rank < 2) continue;
        int slot = ir_add_fp8_slot(x->g, FC_F8E4M3), v = x->map[src->inputs.data[i]];
        if (slot < 0) return FC_OOM(x->err);
        x->g->fp8.data[slot].input = i;
        ir_val(x->g, v)->dtype = FC_F8E4M3;
        FC_TRY(set_scale(x, v, -2 - slot, sv->dtype == FC_F32 ? x->p : sv->dtype));
    }
    for (int i = 0; i < src->nodes.len; i++) FC_TRY(run_node(x, &src->nodes.data[i]));
    FC_TRY(ir_copy_outputs(x->g, src, x->map, x->err));
    return ir_verify(x->g, x->err);
}

FcStatus pass_precision(const IrGraph *in, FcDtype p, bool train, IrGraph **out, FcErr *err) {
    *out = NULL;
    FC_CHECK(err, in != NULL && (p == FC_BF16 || p == FC_F16 || p == FC_F8E4M3));
    FC_CHECK(err, in->fp8.len == 0);
    Px x = {.src = in, .p = p == FC_F8E4M3 ? FC_BF16 : p, .f8 = p == FC_F8E4M3, .train = train,
            .io = p == FC_F8E4M3 && !train, .err = err};
    x.g = ir_graph_new(in->name, in->file);
    x.map = fc_calloc((size_t)(in->values.len > 0 ? in->values.len : 1), sizeof *x.map);
    x.is_output = fc_calloc((size_t)in->values.len + 1, sizeof *x.is_output);
    FcStatus s = x.g && x.map && x.is_output ? FC_OK : FC_OOM(err);
    for (int i = 0; s == FC_OK && i < in->outputs.len; i++) x.is_output[in->outputs.data[i]] = true;
    /* f8: the logits of softmax, log_softmax and cross_entropy stay bf16: their results depend
     * on the differences of the logits, and E4M3's 3 bits leave logits of magnitude 10 an error
     * of about 0.6, which moves a probability by half (examples/softmax_logits.tf: 67 %); as FP8
     * attention keeps its scores wide */
    x.keep_bf16 = x.f8 && s == FC_OK ? fc_calloc((size_t)in->values.len + 1, sizeof *x.keep_bf16) : NULL;
    if (x.f8 && s == FC_OK && !x.keep_bf16) s = FC_OOM(err);
    for (int i = in->nodes.len - 1; x.keep_bf16 && i >= 0; i--) {
        const IrNode *n = &in->nodes.data[i];
        if (n->op == IR_OP_SOFTMAX || n->op == IR_OP_LOG_SOFTMAX || n->op == IR_OP_CROSS_ENTROPY) {
            x.keep_bf16[n->in[0]] = true;
            continue;
        }
        /* and what makes them through ops that carry their values over: index maps, the causal
         * mask, casts, sums, differences, products and quotients (the scaled scores q @ kT *
         * scale of an attention written out) */
        IrCategory c = ir_ops[n->op].cat;
        bool carry = c == IR_CAT_SHAPE || c == IR_CAT_CAST || n->op == IR_OP_CAUSAL_MASK || n->op == IR_OP_NEG ||
                     n->op == IR_OP_ADD || n->op == IR_OP_SUB || n->op == IR_OP_MUL || n->op == IR_OP_DIV ||
                     n->op == IR_OP_MATMUL;
        bool kept = false;
        for (int r = 0; r < n->nout; r++) kept |= x.keep_bf16[n->out[r]];
        for (int k = 0; carry && kept && k < n->nin; k++) x.keep_bf16[n->in[k]] = true;
    }
    if (s == FC_OK) s = run(&x);
    fc_free(x.map);
    fc_free(x.is_output);
    fc_free(x.keep_bf16);
    fc_free(x.scale_of);
    fc_free(x.deq_dt);
    if (s != FC_OK) {
        ir_graph_free(x.g);
        return s;
    }
    *out = x.g;
    return FC_OK;
}
