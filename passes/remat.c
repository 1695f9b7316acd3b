/* remat.c: recompute-vs-store (pass_remat, see passes.h).
 *
 * Requires: a joint graph from pass_autodiff, decomposed (no composite). Leaves: a forward
 * graph (the block's inputs -> its outputs, then the saved values that are not already inputs
 * or outputs) and a backward graph (the saved values, then the outputs' gradients -> the float
 * inputs' gradients), with the list of saved values and the flops and bytes of the choice.
 *
 * The choice is a minimum s-t cut (the formulation of Jain et al., "Checkmate", and of
 * PyTorch's min-cut partitioner), on a network with two vertices per forward value v:
 *   source -> v_in   the cost of recomputing v in the backward: its node's flops x WF
 *                    (infinite for block inputs, which cannot be recomputed, and for values
 *                    the mode forbids recomputing);
 *   v_in -> v_out    the cost of saving v: its bytes x WB (0 for a `param`, which the caller
 *                    keeps anyway);
 *   u_out -> v_in    infinite, for each input u of v's node (recomputing v needs u);
 *   v_out -> sink    infinite, for each value a backward node reads.
 * A value whose v_in stays on the source side is computed by the forward; one whose v_out is
 * cut off from it is saved; one whose v_in is on the sink side is recomputed by the backward
 * from saved values. The cut's weight is WB x saved bytes + WF x recomputed flops.
 *
 * Modes (docs/training.md):
 *   none  eager autograd: a value that leaves its source op (read by another source op of
 *         the forward, or an output) is never recomputed, nor is a matrix product, a dropout
 *         mask or a reduction (a row statistic, which a native kernel returns with its result);
 *         only a source op's elementwise internals are (a layernorm saves its input and its
 *         two row statistics, not its centred f32 copy; a bf16 gelu its bf16 input, not the f32
 *         cast of it); least bytes under those rules. The backward's nodes, even those of the
 *         op's own rule, have origins of their own (autodiff.c): their reads make no boundary.
 *   full  only the block's inputs are saved; everything else is recomputed.
 *   auto  least bytes, matrix products never recomputed (WB >> WF, WF breaking ties); with a
 *         budget, the least recomputed flops whose saved bytes fit: every WF/WB in a
 *         geometric sweep (matrix products allowed) gives a point of the Pareto front, and
 *         the one with the fewest flops under the budget wins. A budget below the least bytes
 *         any choice can save (the floor) is an error that names the floor.
 * Generators (iota, full, dropout masks) cost nothing to recompute (but for dropout masks in
 * none, which eager stores, one byte per element).
 */
#include "passes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INF (INT64_MAX / 8)

static int64_t sat_add(int64_t a, int64_t b) {
    int64_t r;
    return fc_add64(a, b, &r) && r < INF ? r : INF;
}
static int64_t sat_mul(int64_t a, int64_t b) {
    int64_t r;
    return fc_mul64(a, b, &r) && r < INF ? r : INF;
}

/* ---- max flow (Dinic) -------------------------------------------------------------------------- */
typedef struct Edge { int to; int64_t cap; } Edge;
typedef struct Net {
    int n;
    FC_VEC(Edge) e;        /* edge 2k and its reverse 2k+1 */
    FC_VEC(int) next;      /* [edges] next edge of the same vertex */
    int *head, *level, *it, *queue;
} Net;

static bool net_init(Net *f, int n) {
    memset(f, 0, sizeof *f);
    f->n = n;
    f->head = fc_calloc((size_t)n, sizeof(int));
    f->level = fc_calloc((size_t)n, sizeof(int));
    f->it = fc_calloc((size_t)n, sizeof(int));
    f->queue = fc_calloc((size_t)n, sizeof(int));
    if (!f->head || !f->level || !f->it || !f->queue) return false;
    for (int i = 0; i < n; i++) f->head[i] = -1;
    return true;
}
static void net_free(Net *f) {
    FC_VEC_FREE(&f->e);
    FC_VEC_FREE(&f->next);
    fc_free(f->head); fc_free(f->level); fc_free(f->it); fc_free(f->queue);
}
static bool net_edge(Net *f, int a, int b, int64_t cap) {
    Edge x = {b, cap}, y = {a, 0};
    int k = f->e.len;
    if (!FC_VEC_PUSH(&f->e, x) || !FC_VEC_PUSH(&f->e, y)) return false;
    if (!FC_VEC_PUSH(&f->next, f->head[a]) || !FC_VEC_PUSH(&f->next, f->head[b])) return false;
    f->head[a] = k;
    f->head[b] = k + 1;
    return true;
}
static bool bfs(Net *f, int s, int t) {
    for (int i = 0; i < f->n; i++) f->level[i] = -1;
    int qh = 0, qt = 0;
    f->queue[qt++] = s;
    f->level[s] = 0;
    while (qh < qt) {
        int u = f->queue[qh++];
        for (int k = f->head[u]; k >= 0; k = f->next.data[k]) {
            Edge *e = &f->e.data[k];
            if (e->cap > 0 && f->level[e->to] < 0) {
                f->level[e->to] = f->level[u] + 1;
                f->queue[qt++] = e->to;
            }
        }
    }
    return f->level[t] >= 0;
}
/* Iterative blocking-flow augmentation along level-increasing paths. */
static int64_t augment(Net *f, int s, int t) {
    int64_t total = 0;
    int *path = f->queue;   /* edge stack; bfs is done with the queue */
    for (;;) {
        int depth = 0, u = s;
        bool found = false;
        while (!found) {
            if (u == t) { found = true; break; }
            int k;
            for (k = f->it[u]; k >= 0; k = f->next.data[k]) {
                Edge *e = &f->e.data[k];
                if (e->cap > 0 && f->level[e->to] == f->level[u] + 1) break;
            }
            f->it[u] = k;
            if (k < 0) {
                if (depth == 0) return total;
                f->level[u] = -1;   /* dead end */
                depth--;
                u = f->e.data[path[depth] ^ 1].to;
                continue;
            }
            path[depth++] = k;
            u = f->e.data[k].to;
        }
        int64_t push = INF;
        for (int i = 0; i < depth; i++)
            if (f->e.data[path[i]].cap < push) push = f->e.data[path[i]].cap;
        for (int i = 0; i < depth; i++) {
            f->e.data[path[i]].cap -= push;
            f->e.data[path[i] ^ 1].cap += push;
        }
        total = sat_add(total, push);
    }
}
static void max_flow(Net *f, int s, int t) {
    while (bfs(f, s, t)) {
        for (int i = 0; i < f->n; i++) f->it[i] = f->head[i];
        augment(f, s, t);
    }
    bfs(f, s, t);   /* level >= 0: reachable from s in the residual network (the source side) */
}

/* ---- the choice ---------------------------------------------------------------------------------- */
typedef struct Cost {
    int64_t wb, wf;        /* weights of a saved byte and of a recomputed flop */
    bool ban_matmul;       /* never recompute a matrix product */
    bool eager;            /* --remat none's rules */
    bool inputs_only;      /* --remat full: save nothing but block inputs */
} Cost;

typedef struct Rm {
    const AdJoint *j;
    const IrGraph *g;
    int nfv;               /* values of the joint graph */
    bool *fwd;             /* [nfv] a forward value: a block input, or computed without any
                            * output gradient (a node reading no value that depends on one) */
    bool *fwd_node;        /* [nodes] computes forward values */
    bool *needed;          /* [nfv] read by a backward node */
    bool *boundary;        /* [nfv] read by another source op than its own, or an output */
    bool *mask;            /* [nfv] a dropout mask (or computed from generators only: constant) */
    bool *constant;        /* [nfv] computed from generators only */
    int64_t *bytes;        /* [nfv] save cost (0 for params) */
    int64_t *flops;        /* [nfv] recompute cost of the producing node */
    FcErr *err;
} Rm;

static bool is_grad_input(const Rm *r, int v) {
    const IrValue *x = ir_cval(r->g, v);
    return x->node < 0 && x->result >= r->j->nfwd_inputs;
}

/* One choice: saved[v] and recomputed[v] for the forward values. */
typedef struct Choice {
    bool *saved, *recomputed;
    int64_t bytes, flops;
} Choice;
static bool rec_node(const Rm *r, const Choice *c, int i);

/* Whether value m is computed from value x (x itself excluded) in graph g of n values; seen and
 * stack: n entries of scratch. */
static bool derived_from(const IrGraph *g, int m, int x, char *seen, int *stack, int n) {
    memset(seen, 0, (size_t)n);
    int sp = 0;
    stack[sp++] = m;
    seen[m] = 1;
    bool found = false;
    while (sp > 0 && !found) {
        const IrValue *v = ir_cval(g, stack[--sp]);
        if (v->node < 0) continue;
        const IrNode *nd = &g->nodes.data[v->node];
        for (int k = 0; k < nd->nin; k++) {
            int u = nd->in[k];
            if (u == x) found = true;
            if (u < n && !seen[u]) {
                seen[u] = 1;
                stack[sp++] = u;
            }
        }
    }
    return found;
}

static FcStatus solve(Rm *r, const Cost *c, Choice *out) {
    const IrGraph *g = r->g;
    int n = r->nfv, S = 2 * n, T = 2 * n + 1;
    Net f;
    if (!net_init(&f, 2 * n + 2)) { net_free(&f); return FC_OOM(r->err); }
    bool ok = true;
    for (int v = 0; v < n && ok; v++) {
        if (!r->fwd[v]) continue;
        const IrValue *x = ir_cval(g, v);
        /* saving a computed value also costs the forward its write (ties go to inputs) */
        int64_t save = sat_add(sat_mul(r->bytes[v], c->wb), x->node >= 0 ? sat_mul(r->bytes[v], c->wf) : 0), rec;
        if (x->node < 0) {
            rec = INF;
        } else {
            const IrNode *nd = &g->nodes.data[x->node];
            rec = sat_mul(r->flops[v], c->wf);
            if (r->constant[v] && !r->mask[v]) rec = 0;
            if (r->mask[v]) rec = c->eager ? INF : 0;
            if (c->ban_matmul && nd->op == IR_OP_MATMUL) rec = INF;
            if (c->eager && (r->boundary[v] || ir_ops[nd->op].cat == IR_CAT_REDUCE) && !r->constant[v]) rec = INF;
            if (c->inputs_only) { rec = r->constant[v] && !r->mask[v] ? 0 : 1; save = INF; }
            for (int k = 0; k < nd->nin && ok; k++) ok = net_edge(&f, 2 * nd->in[k] + 1, 2 * v, INF);
        }
        if (c->inputs_only && x->node < 0) save = r->bytes[v];
        ok = ok && net_edge(&f, S, 2 * v, rec) && net_edge(&f, 2 * v, 2 * v + 1, save);
        if (ok && r->needed[v]) ok = net_edge(&f, 2 * v + 1, T, INF);
    }
    /* A value compared for equality with one computed from it (the max and min rules' eq(x,
     * max(x))) is not recomputed while the other is computed by the forward: a 16-bit value
     * recomputed by the backward can differ from the forward's in its last bit (the two
     * programs' fused kernels keep different intermediates unrounded), and compared with the
     * max the forward took of its own bits it then matched no element: the max's gradient went
     * nowhere (difftest seed 2026113001 graph 1574, a bf16 max under --mem-budget). Saved x
     * and max recomputed from it, or both recomputed, are the same bits. */
    char *dseen = fc_calloc((size_t)n + 1, 1);
    int *dstack = fc_calloc((size_t)n + 1, sizeof(int));
    ok = ok && dseen && dstack;
    for (int i = 0; i < g->nodes.len && ok; i++) {
        const IrNode *nd = &g->nodes.data[i];
        if ((nd->op != IR_OP_EQ && nd->op != IR_OP_NE) || nd->nin != 2) continue;
        for (int s = 0; s < 2 && ok; s++) {
            int x = nd->in[s], m = nd->in[1 - s];   /* m computed from x: m_in on the source side
                                                      * and x_in on the sink side is cut off */
            if (x >= n || m >= n || !r->fwd[x] || !r->fwd[m] || ir_cval(g, x)->node < 0 || r->constant[x] ||
                !derived_from(g, m, x, dseen, dstack, n))
                continue;
            ok = net_edge(&f, 2 * m, 2 * x, INF);
        }
    }
    fc_free(dseen);
    fc_free(dstack);
    if (!ok) { net_free(&f); return FC_OOM(r->err); }
    max_flow(&f, S, T);
    out->bytes = out->flops = 0;
    /* recomputed: what the backward must compute again, walking back from what it reads */
    for (int v = 0; v < n; v++) {
        out->saved[v] = false;
        out->recomputed[v] = false;
    }
    int *stack = fc_calloc((size_t)n + 1, sizeof(int));
    if (!stack) { net_free(&f); return FC_OOM(r->err); }
    int sp = 0;
    bool *seen = out->recomputed;   /* reused as the visited mark: only recomputed nodes are pushed */
    for (int v = 0; v < n; v++)
        if (r->needed[v]) stack[sp++] = v;
    bool bad = false;
    bool *pushed = fc_calloc((size_t)n + 1, sizeof(bool));
    if (!pushed) { fc_free(stack); net_free(&f); return FC_OOM(r->err); }
    for (int i = 0; i < sp; i++) pushed[stack[i]] = true;
    while (sp > 0) {
        int v = stack[--sp];
        bool in_src = f.level[2 * v] >= 0;
        if (in_src) {   /* computed by the forward: saved */
            if (!out->saved[v]) {
                out->saved[v] = true;
                out->bytes = sat_add(out->bytes, r->bytes[v]);
            }
            continue;
        }
        const IrValue *x = ir_cval(g, v);
        if (x->node < 0) { bad = true; break; }
        seen[v] = true;
        if (g->nodes.data[x->node].origin < r->j->first_bwd_origin)   /* forward work done again */
            out->flops = sat_add(out->flops, r->flops[v]);
        const IrNode *nd = &g->nodes.data[x->node];
        for (int k = 0; k < nd->nin; k++)
            if (!pushed[nd->in[k]]) {
                pushed[nd->in[k]] = true;
                stack[sp++] = nd->in[k];
            }
    }
    fc_free(stack);
    fc_free(pushed);
    net_free(&f);
    if (bad) return fc_err_set(r->err, FC_ERR_INTERNAL, "internal error: pass_remat: the cut recomputes a block input");
    return FC_OK;
}

static FcStatus choice_new(Rm *r, Choice *c) {
    c->saved = fc_calloc((size_t)r->nfv + 1, sizeof(bool));
    c->recomputed = fc_calloc((size_t)r->nfv + 1, sizeof(bool));
    return c->saved && c->recomputed ? FC_OK : FC_OOM(r->err);
}
static void choice_free(Choice *c) {
    fc_free(c->saved);
    fc_free(c->recomputed);
    c->saved = c->recomputed = NULL;
}
static void choice_copy(const Rm *r, Choice *dst, const Choice *src) {
    memcpy(dst->saved, src->saved, sizeof(bool) * (size_t)r->nfv);
    memcpy(dst->recomputed, src->recomputed, sizeof(bool) * (size_t)r->nfv);
    dst->bytes = src->bytes;
    dst->flops = src->flops;
}

static FcStatus analyse(Rm *r) {
    const IrGraph *g = r->g;
    const AdJoint *j = r->j;
    int n = r->nfv;
    r->needed = fc_calloc((size_t)n + 1, sizeof(bool));
    r->boundary = fc_calloc((size_t)n + 1, sizeof(bool));
    r->mask = fc_calloc((size_t)n + 1, sizeof(bool));
    r->constant = fc_calloc((size_t)n + 1, sizeof(bool));
    r->bytes = fc_calloc((size_t)n + 1, sizeof(int64_t));
    r->flops = fc_calloc((size_t)n + 1, sizeof(int64_t));
    r->fwd = fc_calloc((size_t)n + 1, sizeof(bool));
    r->fwd_node = fc_calloc((size_t)g->nodes.len + 1, sizeof(bool));
    if (!r->needed || !r->boundary || !r->mask || !r->constant || !r->bytes || !r->flops || !r->fwd || !r->fwd_node)
        return FC_OOM(r->err);
    for (int i = 0; i < j->nfwd_inputs; i++) r->fwd[g->inputs.data[i]] = true;
    for (int i = 0; i < g->nodes.len; i++) {
        const IrNode *nd = &g->nodes.data[i];
        bool f = true;
        for (int k = 0; k < nd->nin; k++) {
            const IrValue *x = ir_cval(g, nd->in[k]);
            f &= x->node < 0 ? !is_grad_input(r, nd->in[k]) : r->fwd_node[x->node];
        }
        r->fwd_node[i] = f;
        for (int k = 0; k < nd->nout; k++) r->fwd[nd->out[k]] = f;
    }
    for (int v = 0; v < n; v++) {
        const IrValue *x = ir_cval(g, v);
        int64_t b = 0;
        if (!ir_shape_nbytes(&x->shape, x->dtype, &b)) b = INF;
        bool param = x->node < 0 && x->result < j->nfwd_inputs && g->is_param.data[x->result];
        r->bytes[v] = param ? 0 : b;
        if (x->node >= 0) {
            const IrNode *nd = &g->nodes.data[x->node];
            r->flops[v] = ir_node_flops(g, nd);
            bool cst = true;
            for (int k = 0; k < nd->nin; k++) cst &= nd->in[k] < n && r->constant[nd->in[k]];
            r->constant[v] = cst;
            r->mask[v] = nd->op == IR_OP_DROPOUT_MASK;
        }
    }
    for (int i = 0; i < g->nodes.len; i++) {
        const IrNode *nd = &g->nodes.data[i];
        for (int k = 0; k < nd->nin; k++) {
            int u = nd->in[k];
            if (!r->fwd[u]) continue;
            if (!r->fwd_node[i]) r->needed[u] = true;
            /* only a forward source op's read makes a boundary: the backward's nodes (also those
             * that read no gradient, such as a rule's exp(-x*x/2)) have origins of their own,
             * even those of the op's own backward */
            if (nd->origin >= j->first_bwd_origin) continue;
            const IrValue *x = ir_cval(g, u);
            if (x->node >= 0 && g->nodes.data[x->node].origin != nd->origin) r->boundary[u] = true;
        }
    }
    for (int k = 0; k < g->outputs.len; k++) {
        int v = g->outputs.data[k];
        if (r->fwd[v]) {
            if (k < j->nfwd_outputs) r->boundary[v] = true;
            else r->needed[v] = true;   /* a gradient that is a forward value (never in practice) */
        }
    }
    return FC_OK;
}

/* ---- building the two graphs ------------------------------------------------------------------- */
static FcStatus copy_node(IrGraph *dst, const IrNode *n, const int *map, int *omap, FcErr *err) {
    int ins[64];
    FC_CHECK(err, n->nin <= 64);
    for (int k = 0; k < n->nin; k++) {
        FC_CHECK(err, map[n->in[k]] >= 0);
        ins[k] = map[n->in[k]];
    }
    int first;
    FcStatus s = ir_add_node(dst, n->op, ins, n->nin, &n->a, n->loc, n->origin, n->origin_op, &first, err);
    if (s == FC_ERR_INPUT) return fc_err_set(err, FC_ERR_INTERNAL, "internal error: pass_remat: copying '%s'", ir_ops[n->op].name);
    FC_TRY(s);
    for (int r = 0; r < n->nout; r++) omap[n->out[r]] = first + r;
    return FC_OK;
}

static FcStatus build(Rm *r, const Choice *c, RematPlan *p) {
    const IrGraph *g = r->g;
    const AdJoint *j = r->j;
    FcErr *err = r->err;
    int nv = g->values.len;
    int *fm = fc_calloc((size_t)nv + 1, sizeof(int)), *bm = fc_calloc((size_t)nv + 1, sizeof(int));
    IrGraph *F = ir_graph_new(g->name, g->file), *B = ir_graph_new(g->name, g->file);
    FcStatus s = fm && bm && F && B ? FC_OK : FC_OOM(err);
    for (int v = 0; v < nv && s == FC_OK; v++) fm[v] = bm[v] = -1;
    if (s == FC_OK) F->next_origin = B->next_origin = g->next_origin;
    if (s == FC_OK) s = ir_copy_fp8_slots(F, g, err);
    if (s == FC_OK) s = ir_copy_fp8_slots(B, g, err);
    /* the backward reads the forward's scales (fixed from one forward's start to the next's);
     * the forward's program records the amaxes and updates them. The gradients' slots (another
     * slot's grad) are the backward's own, and read-only in the forward (which never uses them) */
    for (int k = 0; s == FC_OK && k < B->fp8.len; k++) B->fp8.data[k].read_only = true;
    for (int k = 0; s == FC_OK && k < g->fp8.len; k++) {
        int gs = g->fp8.data[k].grad;
        if (gs >= 0 && gs < g->fp8.len) B->fp8.data[gs].read_only = false, F->fp8.data[gs].read_only = true;
    }
    /* forward: the block's inputs and the forward's nodes */
    for (int i = 0; i < j->nfwd_inputs && s == FC_OK; i++) {
        const IrValue *x = ir_cval(g, g->inputs.data[i]);
        fm[g->inputs.data[i]] = ir_add_input(F, x->name, x->dtype, &x->shape, g->is_param.data[i]);
        if (fm[g->inputs.data[i]] < 0) s = FC_OOM(err);
    }
    for (int i = 0; i < g->nodes.len && s == FC_OK; i++)
        if (r->fwd_node[i]) s = copy_node(F, &g->nodes.data[i], fm, fm, err);
    for (int k = 0; k < j->nfwd_outputs && s == FC_OK; k++)
        s = ir_add_output(F, fm[g->outputs.data[k]], g->output_names.data[k], err);
    /* the saved values, in value order: where each one lives */
    for (int v = 0; v < r->nfv && s == FC_OK; v++) {
        if (!c->saved[v]) continue;
        const IrValue *x = ir_cval(g, v);
        RematSaved sv = {.value = v, .bytes = r->bytes[v], .kind = REMAT_SAVED_BUFFER, .index = -1};
        if (x->node < 0) {
            sv.kind = REMAT_SAVED_INPUT;
            sv.index = x->result;
        } else {
            for (int k = 0; k < j->nfwd_outputs; k++)
                if (g->outputs.data[k] == v) { sv.kind = REMAT_SAVED_OUTPUT; sv.index = k; break; }
        }
        if (sv.kind == REMAT_SAVED_BUFFER) {
            char name[32];
            snprintf(name, sizeof name, "saved%d", p->saved.len);
            sv.index = F->outputs.len - j->nfwd_outputs;
            s = ir_add_output(F, fm[v], name, err);
        }
        /* why: the first backward node that reads it, else a recomputed one */
        sv.reader = -1;
        for (int pass = 0; pass < 2 && sv.reader < 0; pass++)
            for (int i = 0; i < g->nodes.len && sv.reader < 0; i++) {
                const IrNode *nd = &g->nodes.data[i];
                if (pass == 0 ? r->fwd_node[i] : !rec_node(r, c, i)) continue;
                for (int k = 0; k < nd->nin; k++)
                    if (nd->in[k] == v) {
                        sv.reader = i;
                        sv.reader_recomputed = pass == 1 && nd->origin < j->first_bwd_origin;
                        break;
                    }
            }
        if (s == FC_OK && !FC_VEC_PUSH(&p->saved, sv)) s = FC_OOM(err);
    }
    /* backward: saved values and the outputs' gradients in; recomputed nodes, then the backward's */
    for (int k = 0; k < p->saved.len && s == FC_OK; k++) {
        int v = p->saved.data[k].value;
        const IrValue *x = ir_cval(g, v);
        char name[280];
        if (x->name) snprintf(name, sizeof name, "%s", x->name);
        else snprintf(name, sizeof name, "saved%d", k);
        bool param = x->node < 0 && g->is_param.data[x->result];
        bm[v] = ir_add_input(B, name, x->dtype, &x->shape, param);
        if (bm[v] < 0) s = FC_OOM(err);
    }
    for (int i = j->nfwd_inputs; i < g->inputs.len && s == FC_OK; i++) {
        const IrValue *x = ir_cval(g, g->inputs.data[i]);
        bm[g->inputs.data[i]] = ir_add_input(B, x->name, x->dtype, &x->shape, false);
        if (bm[g->inputs.data[i]] < 0) s = FC_OOM(err);
    }
    for (int i = 0; i < g->nodes.len && s == FC_OK; i++) {
        const IrNode *nd = &g->nodes.data[i];
        if (r->fwd_node[i] && !rec_node(r, c, i)) continue;
        s = copy_node(B, nd, bm, bm, err);
    }
    for (int k = j->nfwd_outputs; k < g->outputs.len && s == FC_OK; k++)
        s = ir_add_output(B, bm[g->outputs.data[k]], g->output_names.data[k], err);
    /* each program without what it does not need */
    if (s == FC_OK) s = pass_dce(F, &p->fwd, err);
    if (s == FC_OK) s = pass_dce(B, &p->bwd, err);
    ir_graph_free(F);
    ir_graph_free(B);
    fc_free(fm);
    fc_free(bm);
    if (s != FC_OK) return s;
    p->saved_bytes = c->bytes;
    p->recompute_flops = c->flops;
    p->forward_flops = p->backward_flops = 0;
    for (int i = 0; i < p->fwd->nodes.len; i++)
        p->forward_flops = sat_add(p->forward_flops, ir_node_flops(p->fwd, &p->fwd->nodes.data[i]));
    for (int i = 0; i < p->bwd->nodes.len; i++)
        p->backward_flops = sat_add(p->backward_flops, ir_node_flops(p->bwd, &p->bwd->nodes.data[i]));
    p->nrecomputed = 0;
    for (int v = 0; v < r->nfv; v++) {
        const IrValue *x = ir_cval(g, v);
        p->nrecomputed += c->recomputed[v] && g->nodes.data[x->node].origin < j->first_bwd_origin;
    }
    return FC_OK;
}

/* Is node i a forward node the backward computes again? */
static bool rec_node(const Rm *r, const Choice *c, int i) {
    const IrNode *nd = &r->g->nodes.data[i];
    for (int k = 0; k < nd->nout; k++)
        if (c->recomputed[nd->out[k]]) return true;
    return false;
}

/* Pareto points: sweeps WF/WB over 2^-12 .. 2^24 (matrix products allowed). */
#define SWEEP_LO (-12)
#define SWEEP_HI 24

static bool better(const Choice *a, const Choice *b) {
    return a->flops < b->flops || (a->flops == b->flops && a->bytes < b->bytes);
}

/* The front sorted by saved bytes (ascending), without dominated points: each point then
 * recomputes strictly fewer flops than the one before. */
static int cmp_point(const void *a, const void *b) {
    const RematPoint *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? -1 : 1;
    return x->flops < y->flops ? -1 : x->flops > y->flops;
}
static void pareto_sort(RematPlan *p) {
    if (p->pareto.len == 0) return;
    qsort(p->pareto.data, (size_t)p->pareto.len, sizeof(RematPoint), cmp_point);
    int n = 0;
    for (int i = 0; i < p->pareto.len; i++)
        if (n == 0 || p->pareto.data[i].flops < p->pareto.data[n - 1].flops) p->pareto.data[n++] = p->pareto.data[i];
    p->pareto.len = n;
}

static FcStatus choose(Rm *r, PassRemat mode, int64_t budget, Choice *best, RematPlan *p) {
    Choice c = {0};
    FcStatus s = choice_new(r, &c);
    Cost auto_cost = {.wb = 1 << 16, .wf = 1, .ban_matmul = true};
    Cost floor_cost = {.wb = 1 << 20, .wf = 1};
    if (s == FC_OK && mode == PASS_REMAT_NONE) {
        Cost k = {.wb = 1 << 16, .wf = 1, .ban_matmul = true, .eager = true};
        s = solve(r, &k, best);
    } else if (s == FC_OK && mode == PASS_REMAT_FULL) {
        Cost k = {.wb = 1, .wf = 0, .inputs_only = true};
        s = solve(r, &k, best);
    } else if (s == FC_OK) {
        s = solve(r, &auto_cost, best);
    }
    /* the floor: the least bytes of any choice */
    if (s == FC_OK) s = solve(r, &floor_cost, &c);
    if (s == FC_OK) p->floor_bytes = c.bytes;
    /* the Pareto sweep (also for the table of `fusec mem`) */
    for (int e = SWEEP_LO; e <= SWEEP_HI && s == FC_OK; e += 2) {
        Cost k = {.wb = e < 0 ? (int64_t)1 << -e : 1, .wf = e > 0 ? (int64_t)1 << e : 1};
        s = solve(r, &k, &c);
        if (s != FC_OK) break;
        RematPoint pt = {c.bytes, c.flops};
        bool dup = false;
        for (int i = 0; i < p->pareto.len; i++) dup |= p->pareto.data[i].bytes == pt.bytes && p->pareto.data[i].flops == pt.flops;
        if (!dup && !FC_VEC_PUSH(&p->pareto, pt)) s = FC_OOM(r->err);
        if (mode == PASS_REMAT_AUTO && budget >= 0 && c.bytes <= budget && (best->bytes > budget || better(&c, best)))
            choice_copy(r, best, &c);
    }
    if (s == FC_OK && mode == PASS_REMAT_AUTO && budget >= 0 && best->bytes > budget) {
        if (p->floor_bytes > budget) {
            s = fc_err_set(r->err, FC_ERR_INPUT, "--mem-budget %lld bytes is below what block '%s' must save: at least "
                           "%lld bytes (the floor; --remat full saves %s)",
                           (long long)budget, r->g->name, (long long)p->floor_bytes, "only the block's inputs");
        } else {
            s = solve(r, &floor_cost, best);
        }
    }
    choice_free(&c);
    return s;
}

void remat_plan_free(RematPlan *p) {
    if (!p) return;
    ir_graph_free(p->fwd);
    ir_graph_free(p->bwd);
    FC_VEC_FREE(&p->saved);
    FC_VEC_FREE(&p->pareto);
    memset(p, 0, sizeof *p);
}

FcStatus pass_remat(const AdJoint *j, PassRemat mode, int64_t budget, RematPlan *out, FcErr *err) {
    memset(out, 0, sizeof *out);
    FC_CHECK(err, j && j->graph);
    Rm r = {.j = j, .g = j->graph, .err = err};
    r.nfv = j->graph->values.len;
    Choice best = {0};
    FcStatus s = analyse(&r);
    if (s == FC_OK) s = choice_new(&r, &best);
    if (s == FC_OK) s = choose(&r, mode, budget, &best, out);
    if (s == FC_OK) s = build(&r, &best, out);
    /* the chosen plan is a point of the front too, unless a swept one dominates it */
    RematPoint own = {out->saved_bytes, out->recompute_flops};
    if (s == FC_OK && !FC_VEC_PUSH(&out->pareto, own)) s = FC_OOM(err);
    if (s == FC_OK) pareto_sort(out);
    out->mode = mode;
    out->budget = budget;
    choice_free(&best);
    fc_free(r.needed); fc_free(r.boundary); fc_free(r.mask); fc_free(r.constant);
    fc_free(r.bytes); fc_free(r.flops); fc_free(r.fwd); fc_free(r.fwd_node);
    if (s != FC_OK) remat_plan_free(out);
    return s;
}
