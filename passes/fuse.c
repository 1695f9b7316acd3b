/* fuse.c: which nodes run together in one kernel.
 *
 * Entry point: pass_fuse. Requires a decomposed, verified graph. Leaves a grouping of its
 * nodes (group_of_node) that pass_lower turns into kernels, and, for every edge left
 * between kernels, the reason it was not fused.
 *
 * Eager (--no-fuse): one group per source op (the nodes' origin), the baseline.
 * Fused: every node starts alone; then, in topological order, each node's group absorbs
 * the groups producing its inputs (vertical fusion; an fp8_dequant does not absorb its f8
 * input's producer but waits to be absorbed by its reader, which then takes that producer
 * too where it can, so that an f8 value crosses a kernel boundary in f8, never dequantized
 * to f32), then groups that read the same value
 * merge (sibling fusion, a multi-output kernel), each merge taken only when
 *   - the merged group is schedulable by one of lower.c's schedules:
 *       pointwise  elementwise ops, broadcasts and index maps (reshape, transpose, slice,
 *                  concat, gather, iota, full) of any shapes; and scatter_add, whose src and
 *                  ids come from memory (lower.c builds its row index in kernels of their
 *                  own first) and which shares no kernel with a reduction or a product;
 *       row        reductions of one shape X over the same trailing axes; what is computed
 *                  from a reduction is elementwise, and combines reduced values with keepdim
 *                  shape (per row) with X-shaped ones; outputs are X-shaped or per-row.
 *                  Plus a tail: reductions over every axis of a per-row value computed from
 *                  the row reductions (cross_entropy's mean of the row losses) and elementwise
 *                  ops on their scalar results, which nothing per-row reads; lower.c runs
 *                  them once after every row in the same launch (KirKernel.tail);
 *       matmul     one matrix product; its operands' producers are inlined into its tile
 *                  loads; what consumes it keeps its element count (bias, activation,
 *                  residual: the epilogue); every output is the product or its epilogue.
 *                  An f32/f64 product done by a library (BLAS, cuBLASLt) stays alone: its
 *                  result goes to memory anyway, so its neighbours fuse with each other;
 *                  alone but for the views the call reads through (operand_view: swaps of
 *                  the last two dims, and on CUDA the widening casts of 16-bit operands);
 *                  on the CPU but for B's producers (mark_b_operand), A's widening cast
 *                  (a_operand_cast) and, in a last phase, its elementwise epilogue
 *                  (mark_epilogue), which lower.c runs by blocks of C's rows in the cache;
 *   - and it makes no cycle between groups (no path leaves the pair and comes back).
 * Cost: a fused edge is a value no longer written by one kernel and read by another; no
 * merge adds a read or a write, since a group reads each outside value once and writes
 * each value that leaves it once (lower.c's byte model), so bytes moved never grow.
 */
#include "passes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Fuse {
    const IrGraph *g;
    const PassOptions *opt;
    int n;                 /* nodes */
    int *grp;              /* [n] group id (a representative node) */
    int *mark;             /* [n] scratch */
    bool *used_outside;    /* [values] scratch for the candidate group */
    bool eager;            /* merge only nodes of one source op */
    bool epilogues;        /* the last phase: CPU library products take their epilogues */
    FcErr *err;
} Fuse;

static const IrValue *V(const Fuse *f, int v) { return ir_cval(f->g, v); }
/* constants and iotas are inlined wherever they are used (lower.c): never a fusion edge */
static bool generated(const Fuse *f, int v) {
    int p = V(f, v)->node;
    return p >= 0 && ir_ops[f->g->nodes.data[p].op].cat == IR_CAT_GENERATOR;
}
static int64_t numel(const IrShape *s) {
    int64_t n = 1;
    ir_shape_numel(s, &n);
    return n;
}

/* Is node i in the candidate group (groups a and b)? */
static bool in_cand(const Fuse *f, int i, int a, int b) { return f->grp[i] == a || f->grp[i] == b; }

/* Can node x be read through by the library product mm (lower.c's operand_direct), the call
 * reading x's input in its place: a swap of the last two dims (the library's transpose flag)
 * or, read by mm itself (top), the widening cast of an operand the library reads in 16 bits
 * (pass_narrow_product)? */
static bool view_node(const Fuse *f, int x, int mm, bool top) {
    const IrNode *n = &f->g->nodes.data[x];
    if (n->op == IR_OP_CAST) return top && pass_narrow_product(f->g, f->opt, mm) >= 0;
    return ir_swaps_last_two(n, V(f, n->out[0])->shape.rank);
}

/* Is value v read by node r alone, and not returned by the block? */
static bool only_reader(const Fuse *f, int v, int r) {
    const IrGraph *g = f->g;
    for (int k = 0; k < g->outputs.len; k++)
        if (g->outputs.data[k] == v) return false;
    for (int c = 0; c < f->n; c++) {
        if (c == r) continue;
        const IrNode *u = &g->nodes.data[c];
        for (int j = 0; j < u->nin; j++)
            if (u->in[j] == v) return false;
    }
    return true;
}

/* The views under operand s of the matrix product mm (view_node, at most three, each read
 * only by the one above), top first, into chain; returns how many. *bottom: the node making
 * the value the last one reads (-1 for a block input). */
static int view_chain(const Fuse *f, int mm, int s, int chain[3], int *bottom) {
    int reader = mm, v = f->g->nodes.data[mm].in[s], x = V(f, v)->node, n = 0;
    while (n < 3 && x >= 0 && view_node(f, x, mm, n == 0) && only_reader(f, v, reader)) {
        chain[n++] = x;
        reader = x;
        v = f->g->nodes.data[x].in[0];
        x = V(f, v)->node;
    }
    *bottom = x;
    return n;
}

/* Is node i one of the views between an operand of the matrix product mm and a value from
 * outside the candidate (groups a and b)? The library call then reads that value with the
 * views' transpose flag and 16-bit type (lower.c's operand_direct) and runs no kernel for
 * them. */
static bool operand_view(const Fuse *f, int i, int mm, int a, int b) {
    for (int s = 0; s < 2; s++) {
        int chain[3], bottom, n = view_chain(f, mm, s, chain, &bottom);
        for (int k = 0; k < n; k++)
            if (chain[k] == i && !(bottom >= 0 && in_cand(f, bottom, a, b))) return true;
    }
    return false;
}

/* Is node i a view read, through views each read only by the next, by one f32/f64 matrix
 * product as its operand_view? Such a node waits for the product (vertical fusion). */
static bool feeds_library_product(const Fuse *f, int i) {
    const IrGraph *g = f->g;
    for (int x = i, d = 0; d < 3; d++) {
        int v = g->nodes.data[x].out[0], r = -1;
        for (int c = x + 1; c < f->n; c++) {
            const IrNode *u = &g->nodes.data[c];
            for (int j = 0; j < u->nin; j++)
                if (u->in[j] == v) {
                    if (r >= 0 && r != c) return false;
                    r = c;
                }
        }
        if (r < 0) return false;
        if (g->nodes.data[r].op == IR_OP_MATMUL) {
            FcDtype t = V(f, g->nodes.data[r].out[0])->dtype;
            return (t == FC_F32 || t == FC_F64) && operand_view(f, i, r, f->grp[i], f->grp[i]);
        }
        x = r;
    }
    return false;
}

/* f->used_outside: the values the candidate (groups a and b) computes that something outside
 * it reads, or the block returns. */
static void mark_used_outside(Fuse *f, int a, int b) {
    const IrGraph *g = f->g;
    memset(f->used_outside, 0, sizeof(bool) * (size_t)g->values.len);
    for (int i = 0; i < f->n; i++) {
        const IrNode *n = &g->nodes.data[i];
        for (int j = 0; j < n->nin; j++) {
            int p = V(f, n->in[j])->node;
            if (p >= 0 && in_cand(f, p, a, b) && !in_cand(f, i, a, b)) f->used_outside[n->in[j]] = true;
        }
    }
    for (int j = 0; j < g->outputs.len; j++) f->used_outside[g->outputs.data[j]] = true;
}

/* The CPU's library products take B in panels (lower.c, panel_rows_for): B's elementwise
 * producers (an i8 weight's cast and scale, an f8 weight's dequant) then join the product's
 * group, so that lower.c computes B in the product's own operand kernel, panel by panel, and
 * the f32 B never goes to memory. Marks (f->mark) the candidate's nodes that are such: not
 * the product, elementwise (not an fp8_quant), no block output, every result read only as the
 * product's B (and not its A) or by other marked nodes; and a transpose of a matrix among them,
 * of a marked node's value or read by a marked node (the backward's dX = dY @ w^T, w^T or its
 * widening: lower.c's b_transposed makes B^T, which the library reads transposed). */
static void mark_b_operand(Fuse *f, int mm, int a, int b) {
    const IrGraph *g = f->g;
    const IrNode *m = &g->nodes.data[mm];
    for (int i = 0; i < f->n; i++) {
        const IrNode *u = &g->nodes.data[i];
        /* not an fp8_quant: its kernel records an amax (a write of the state) and its value
         * crosses in 1 byte anyway */
        f->mark[i] = i != mm && in_cand(f, i, a, b) && u->nout == 1 && !f->used_outside[u->out[0]] &&
                     ((ir_op_elementwise(u->op) && u->op != IR_OP_FP8_QUANT) ||
                      (V(f, u->out[0])->shape.rank == 2 && ir_swaps_last_two(u, 2)));
    }
    for (bool changed = true; changed;) {
        changed = false;
        for (int i = 0; i < f->n; i++) {
            if (!f->mark[i]) continue;
            const IrNode *t = &g->nodes.data[i];
            int v = t->out[0];
            bool ok = m->in[0] != v;
            if (!ir_op_elementwise(t->op)) {   /* a transpose: of a marked node's value, or read by one
                                                 * (else it is a view the library reads through) */
                int p = V(f, t->in[0])->node;
                ok = ok && ((p >= 0 && in_cand(f, p, a, b) && f->mark[p]) || m->in[1] != v);
            }
            for (int c = i + 1; c < f->n && ok; c++) {
                const IrNode *u = &g->nodes.data[c];
                for (int j = 0; j < u->nin && ok; j++)
                    if (u->in[j] == v) ok = c == mm ? j == 1 : f->mark[c];
            }
            if (!ok) f->mark[i] = 0, changed = true;
        }
    }
}

/* Is node i a widening cast of a 16-bit value read only as A by one f32 library product whose B
 * is one matrix for all its rows (the CPU: lower.c makes A there a block of C's rows at a time,
 * into the cache, operand_rows), not a block output, not of a swap of the last two dims (A read
 * transposed), nor of a row kernel with a where (a causal softmax, whose zeros the product
 * skips as that kernel stores them)? Such a cast waits for its product (vertical fusion), so
 * that the value crosses the kernel boundary in 16 bits. */
static bool a_operand_cast(const Fuse *f, int i) {
    const IrGraph *g = f->g;
    const IrNode *n = &g->nodes.data[i];
    if (!f->opt->cpu || !f->opt->library_gemm || n->op != IR_OP_CAST || V(f, n->out[0])->dtype != FC_F32) return false;
    FcDtype from = V(f, n->in[0])->dtype;
    int p = V(f, n->in[0])->node;
    if ((from != FC_BF16 && from != FC_F16) || V(f, n->out[0])->shape.rank < 2) return false;
    if (p >= 0 && (generated(f, n->in[0]) || ir_swaps_last_two(&g->nodes.data[p], V(f, n->in[0])->shape.rank)))
        return false;
    /* not of a row kernel with a where (a causal softmax): the product reads that kernel's
     * zeros as it stores them (lower.c's zero tail, KirGemm.tail) */
    bool where = false, red = false;
    for (int x = 0; p >= 0 && x < f->n; x++)
        if (f->grp[x] == f->grp[p]) {
            where |= g->nodes.data[x].op == IR_OP_WHERE;
            red |= ir_ops[g->nodes.data[x].op].cat == IR_CAT_REDUCE;
        }
    if (where && red) return false;
    int r = -1;
    for (int c = i + 1; c < f->n; c++) {
        const IrNode *u = &g->nodes.data[c];
        for (int j = 0; j < u->nin; j++)
            if (u->in[j] == n->out[0]) {
                if (r >= 0 || u->op != IR_OP_MATMUL || j != 0) return false;
                r = c;
            }
    }
    if (r < 0 || !only_reader(f, n->out[0], r)) return false;
    const IrNode *m = &g->nodes.data[r];
    return V(f, m->out[0])->dtype == FC_F32 && V(f, m->in[1])->shape.rank == 2;
}

/* The CPU's library products run their epilogue block by block of C's rows, while the block is
 * in the cache (lower.c, epilogue_rows): what the product's group computes after the product
 * then joins it. Marks (f->mark, leaving B's and A's marks) the candidate's nodes that are such:
 * the product's descendants in it (the general matmul check below then asks them to be
 * elementwise and of the product's size), and elementwise nodes computed from outside values
 * alone (a bias's widening cast) whose every reader in the candidate is one of these. */
static void mark_epilogue(Fuse *f, int mm, int a, int b) {
    const IrGraph *g = f->g;
    enum { EPI = 4 };   /* a mark of its own, beside mark_b_operand's 1 */
    for (int i = mm + 1; i < f->n; i++) {
        if (!in_cand(f, i, a, b) || f->mark[i]) continue;
        const IrNode *u = &g->nodes.data[i];
        for (int j = 0; j < u->nin; j++) {
            int p = V(f, u->in[j])->node;
            if (p >= 0 && in_cand(f, p, a, b) && (p == mm || f->mark[p] == EPI)) f->mark[i] = EPI;
        }
    }
    /* the pure ones (mark PURE while undecided): not the product's, not B's, read only by the
     * epilogue or by each other, their producers in the candidate pure too */
    enum { PURE = 5 };
    for (int i = 0; i < f->n; i++) {
        const IrNode *u = &g->nodes.data[i];
        if (i != mm && in_cand(f, i, a, b) && !f->mark[i] && u->nout == 1 && ir_op_elementwise(u->op) &&
            u->op != IR_OP_FP8_QUANT && !f->used_outside[u->out[0]])
            f->mark[i] = PURE;
    }
    for (bool changed = true; changed;) {
        changed = false;
        for (int i = 0; i < f->n; i++) {
            if (f->mark[i] != PURE) continue;
            const IrNode *u = &g->nodes.data[i];
            bool ok = true, read = false;
            for (int j = 0; j < u->nin && ok; j++) {
                int p = V(f, u->in[j])->node;
                ok = p < 0 || !in_cand(f, p, a, b) || generated(f, u->in[j]) || f->mark[p] == PURE;
            }
            for (int c = i + 1; c < f->n && ok; c++) {
                const IrNode *r = &g->nodes.data[c];
                for (int j = 0; j < r->nin; j++)
                    if (r->in[j] == u->out[0]) {
                        read = true;
                        ok = ok && in_cand(f, c, a, b) && (f->mark[c] == EPI || f->mark[c] == PURE);
                    }
            }
            if (!ok || !read) f->mark[i] = 0, changed = true;
        }
    }
    for (int i = 0; i < f->n; i++)
        if (f->mark[i] == PURE) f->mark[i] = EPI;
}

/* Checks that groups a and b together can be scheduled as one kernel. Returns NULL if so,
 * else the reason. */
static const char *schedulable(Fuse *f, int a, int b) {
    const IrGraph *g = f->g;
    int nmm = 0, nred = 0, nsc = 0, mm = -1, red0 = -1;
    for (int i = 0; i < f->n; i++) {
        if (!in_cand(f, i, a, b)) continue;
        IrCategory c = ir_ops[g->nodes.data[i].op].cat;
        if (c == IR_CAT_MATMUL) { nmm++; mm = i; }
        if (c == IR_CAT_REDUCE) { nred++; if (red0 < 0) red0 = i; }
        if (c == IR_CAT_SCATTER) {
            nsc++;
            const IrNode *n = &g->nodes.data[i];
            for (int j = 0; j < n->nin; j++) {
                int p = V(f, n->in[j])->node;
                if (p >= 0 && in_cand(f, p, a, b) && !generated(f, n->in[j]))
                    return "a scatter-add reads its operands from memory (its index kernels read the ids first)";
            }
        }
    }
    if (nsc && (nmm || nred)) return "a scatter-add fuses only with elementwise work";
    if (nmm > 1) return "two matrix products cannot share a kernel";
    if (nmm && f->opt->library_gemm) {
        /* a product through the BLAS / cuBLASLt writes its result to memory anyway: its
         * producers and consumers fuse with their other neighbours instead; on the CPU but
         * B's own producers (mark_b_operand), A's widening cast (a_operand_cast, mark 3) and,
         * in the last phase, its epilogue (mark_epilogue) */
        const IrValue *o = V(f, g->nodes.data[mm].out[0]);
        int cnt = 0;
        memset(f->mark, 0, sizeof(int) * (size_t)f->n);
        if (f->opt->cpu) {
            mark_used_outside(f, a, b);
            mark_b_operand(f, mm, a, b);
            /* A's widening cast, waiting for it (a_operand_cast) */
            int av = V(f, g->nodes.data[mm].in[0])->node;
            if (av >= 0 && in_cand(f, av, a, b) && a_operand_cast(f, av)) {
                int p = V(f, g->nodes.data[av].in[0])->node;
                if (p < 0 || !in_cand(f, p, a, b)) f->mark[av] = 3;
            }
            if (f->epilogues) mark_epilogue(f, mm, a, b);
        }
        for (int i = 0; i < f->n; i++) cnt += in_cand(f, i, a, b) && !f->mark[i] && !operand_view(f, i, mm, a, b);
        if ((o->dtype == FC_F32 || o->dtype == FC_F64) && cnt > 1)
            return "a matrix product through the library runs as its own call";
    }
    if (nmm && nred) return "a matrix product and a reduction cannot share a kernel";
    mark_used_outside(f, a, b);

    /* descendants (within the candidate) of the matmul or of the reductions */
    memset(f->mark, 0, sizeof(int) * (size_t)f->n);
    for (int i = 0; i < f->n; i++) {
        if (!in_cand(f, i, a, b)) continue;
        const IrNode *n = &g->nodes.data[i];
        IrCategory c = ir_ops[n->op].cat;
        if (c == IR_CAT_MATMUL || c == IR_CAT_REDUCE) { f->mark[i] = 1; continue; }
        for (int j = 0; j < n->nin; j++) {
            int p = V(f, n->in[j])->node;
            if (p >= 0 && in_cand(f, p, a, b) && f->mark[p]) f->mark[i] = 1;
        }
    }
    if (nmm) {
        int64_t mn = numel(&V(f, g->nodes.data[mm].out[0])->shape);
        for (int i = 0; i < f->n; i++) {
            if (!in_cand(f, i, a, b)) continue;
            const IrNode *n = &g->nodes.data[i];
            if (f->mark[i] && i != mm) {
                if (!(ir_op_elementwise(n->op) || n->op == IR_OP_RESHAPE) || numel(&V(f, n->out[0])->shape) != mn)
                    return "the matrix product's consumer changes the element count";
            }
            for (int r = 0; r < n->nout; r++)
                if (f->used_outside[n->out[r]] && !f->mark[i])
                    return "a value computed before the matrix product would leave its kernel";
        }
        return NULL;
    }
    if (nred) {
        /* X: the input of the reduction with the most elements (the first of those) */
        for (int i = 0; i < f->n; i++)
            if (in_cand(f, i, a, b) && ir_ops[g->nodes.data[i].op].cat == IR_CAT_REDUCE &&
                numel(&V(f, g->nodes.data[i].in[0])->shape) > numel(&V(f, g->nodes.data[red0].in[0])->shape))
                red0 = i;
        const IrNode *r0 = &g->nodes.data[red0];
        IrShape X = V(f, r0->in[0])->shape;
        int k = r0->a.nlist;
        for (int j = 0; j < k; j++)
            if (r0->a.list[j] != X.rank - k + j) return "a reduction over leading axes needs its own kernel";
        IrShape keep = X;
        int64_t R = 1;
        for (int d = X.rank - k; d < X.rank; d++) keep.dims[d] = 1;
        for (int d = 0; d < X.rank - k; d++) R *= X.dims[d];
        /* the tail (mark 2): a reduction over every axis of a per-row value computed from the
         * row reductions (cross_entropy's mean of the row losses), and what is computed from
         * such results; lower.c runs it once after every row (KirKernel.tail) */
        for (int i = 0; i < f->n; i++) {
            if (!in_cand(f, i, a, b)) continue;
            const IrNode *n = &g->nodes.data[i];
            bool tail = false;
            for (int j = 0; j < n->nin; j++) {
                int p = V(f, n->in[j])->node;
                tail |= p >= 0 && in_cand(f, p, a, b) && f->mark[p] == 2;
            }
            if (!tail && ir_ops[n->op].cat == IR_CAT_REDUCE && !ir_shape_eq(&V(f, n->in[0])->shape, &X)) {
                const IrValue *u = V(f, n->in[0]);
                tail = numel(&u->shape) == R && n->a.nlist == u->shape.rank && u->node >= 0 &&
                       in_cand(f, u->node, a, b) && f->mark[u->node] == 1;
            }
            if (tail) f->mark[i] = 2;
        }
        for (int i = 0; i < f->n; i++) {
            if (!in_cand(f, i, a, b)) continue;
            const IrNode *n = &g->nodes.data[i];
            if (f->mark[i] == 2) {
                if (n->op == IR_OP_FP8_QUANT) return "an f8 store records its amax in a kernel's body, not its tail";
                if (ir_ops[n->op].cat == IR_CAT_REDUCE) {
                    int p = V(f, n->in[0])->node;
                    if (p < 0 || !in_cand(f, p, a, b) || f->mark[p] != 1)
                        return "a reduction of a reduction over every row needs its own kernel";
                } else {
                    if (!ir_op_elementwise(n->op) || numel(&V(f, n->out[0])->shape) != 1)
                        return "a reduction over every row is read by the rows";
                    for (int j = 0; j < n->nin; j++) {
                        int p = V(f, n->in[j])->node;
                        if (p >= 0 && in_cand(f, p, a, b) && f->mark[p] != 2 && !generated(f, n->in[j]))
                            return "a reduction over every row is combined with a per-row value";
                    }
                }
            } else if (ir_ops[n->op].cat == IR_CAT_REDUCE) {
                if (!ir_shape_eq(&V(f, n->in[0])->shape, &X) || n->a.nlist != k)
                    return "reductions of different shapes cannot share a kernel";
                for (int j = 0; j < k; j++)
                    if (n->a.list[j] != X.rank - k + j) return "reductions over different axes cannot share a kernel";
            } else if (f->mark[i]) {
                /* computed from a reduction: per-row values combined with the row */
                if (!ir_op_elementwise(n->op)) return "an index map of a reduced value needs its own kernel";
                const IrShape *os = &V(f, n->out[0])->shape;
                for (int j = 0; j < n->nin; j++) {
                    int p = V(f, n->in[j])->node;
                    if (p < 0 || !in_cand(f, p, a, b) || !f->mark[p]) continue;
                    const IrShape *us = &V(f, n->in[j])->shape;
                    bool row_keep = ir_shape_eq(us, &keep) || (numel(us) == R && ir_shape_eq(os, us));
                    if (!ir_shape_eq(us, os) && !(ir_shape_eq(os, &X) && row_keep))
                        return "a reduced value is broadcast across rows";
                }
            }
            for (int r = 0; r < n->nout; r++) {
                if (!f->used_outside[n->out[r]] || f->mark[i] == 2) continue;
                const IrShape *s = &V(f, n->out[r])->shape;
                if (!ir_shape_eq(s, &X) && numel(s) != R) return "an output of another shape than the rows";
            }
        }
        return NULL;
    }
    return NULL;
}

/* Would merging groups a and b make a cycle? True if a path of groups leaves one of them
 * and reaches the other through a third group. The walk is over groups, not nodes: a path
 * that enters a group at one node may leave it from any other (they run as one kernel). */
static bool reaches(Fuse *f, int from, int to, int a, int b) {
    const IrGraph *g = f->g;
    memset(f->mark, 0, sizeof(int) * (size_t)f->n);   /* mark[group id]: reached */
    for (bool changed = true; changed;) {
        changed = false;
        for (int i = 0; i < f->n; i++) {
            const IrNode *n = &g->nodes.data[i];
            int gi = f->grp[i];
            for (int j = 0; j < n->nin; j++) {
                int p = V(f, n->in[j])->node;
                if (p < 0) continue;
                int gp = f->grp[p];
                if (gp == gi) continue;
                bool via_other = f->mark[gp] && gp != a && gp != b;
                if (gp != from && !via_other) continue;
                if (gi == to && via_other) return true;
                if (gi != a && gi != b && !f->mark[gi]) {
                    f->mark[gi] = 1;
                    changed = true;
                }
            }
        }
    }
    return false;
}
static bool makes_cycle(Fuse *f, int a, int b) { return reaches(f, a, b, a, b) || reaches(f, b, a, a, b); }

static void merge(Fuse *f, int a, int b) {
    int keep = a < b ? a : b, drop = a < b ? b : a;
    for (int i = 0; i < f->n; i++)
        if (f->grp[i] == drop) f->grp[i] = keep;
}

#define EAGER_REASON "eager (--no-fuse): one kernel per source op"

/* --strict-rounding: a kernel with a reduction holds the nodes of one source op only, as eager's
 * does, since a reduction's order of summation is its kernel's (the block size, a tail, a serial
 * loop: docs/cpu.md, "Reduction order"), and the fused program must give eager's bits; kernels
 * without one fuse as usual. (A cross_entropy's mean of the row losses ran in the row kernel's
 * tail, 32 threads, where eager's kernel of its own had 96: other bits on the GPU.) */
#define STRICT_REASON "--strict-rounding: a reduction runs in a kernel of its source op's alone, as eager's"
static const char *strict_split(const Fuse *f, int a, int b) {
    if (!f->opt->strict_rounding || f->eager) return NULL;
    const IrGraph *g = f->g;
    bool red = false, multi = false;
    int origin = -1;
    for (int i = 0; i < f->n; i++) {
        if (!in_cand(f, i, a, b)) continue;
        const IrNode *n = &g->nodes.data[i];
        if (ir_ops[n->op].cat == IR_CAT_GENERATOR) continue;   /* inlined wherever read */
        red |= ir_ops[n->op].cat == IR_CAT_REDUCE;
        if (origin < 0) origin = n->origin;
        else multi |= n->origin != origin;
    }
    return red && multi ? STRICT_REASON : NULL;
}

/* Why groups a and b cannot be one kernel (NULL: they can). An eager group holds one origin, so
 * its first node's is the group's. */
static const char *why_apart(Fuse *f, int a, int b) {
    if (f->eager && f->g->nodes.data[a].origin != f->g->nodes.data[b].origin) return EAGER_REASON;
    const char *why = strict_split(f, a, b);
    if (!why) why = schedulable(f, a, b);
    if (!why && makes_cycle(f, a, b)) why = "fusing would make a cycle between kernels";
    return why;
}

/* Is group a elementwise work alone (no reduction, product, scatter or index map)? */
static bool pointwise_group(const Fuse *f, int a) {
    for (int i = 0; i < f->n; i++)
        if (f->grp[i] == a && !ir_op_elementwise(f->g->nodes.data[i].op) && f->g->nodes.data[i].op != IR_OP_RESHAPE)
            return false;
    return true;
}

static const char *try_merge(Fuse *f, int a, int b) {
    if (a == b) return NULL;
    const char *why = why_apart(f, a, b);
    if (!why) merge(f, a, b);
    return why;
}

FcStatus pass_fuse(const IrGraph *g, const PassOptions *opt, int *group_of_node, FuseEdges *edges, FcErr *err) {
    Fuse f = {.g = g, .opt = opt, .n = g->nodes.len, .grp = group_of_node, .err = err};
    if (edges) edges->len = 0;
    f.mark = fc_calloc((size_t)f.n + 1, sizeof(int));
    f.used_outside = fc_calloc((size_t)g->values.len + 1, sizeof(bool));
    if (!f.mark || !f.used_outside) {
        fc_free(f.mark); fc_free(f.used_outside);
        return FC_OOM(err);
    }
    f.eager = !opt->fuse;
    for (int i = 0; i < f.n; i++) f.grp[i] = i;
    /* vertical: each node absorbs its producers (but a transpose that a library product will
     * read with its transpose flag waits for that product) */
    for (int i = 0; i < f.n; i++) {
        const IrNode *n = &g->nodes.data[i];
        if (opt->library_gemm && feeds_library_product(&f, i)) continue;
        if (n->op == IR_OP_FP8_DEQUANT) continue;   /* waits for its reader, below */
        if (a_operand_cast(&f, i)) continue;         /* waits for its product */
        for (int j = 0; j < n->nin; j++) {
            int p = ir_cval(g, n->in[j])->node;
            if (p < 0 || generated(&f, n->in[j])) continue;
            try_merge(&f, f.grp[p], f.grp[i]);
            /* an f8 value's dequant goes with its reader, and through it the reader takes the
             * quant's group where it can; where it cannot, the value crosses in f8 */
            const IrNode *d = &g->nodes.data[p];
            int q = d->op == IR_OP_FP8_DEQUANT ? ir_cval(g, d->in[0])->node : -1;
            if (q >= 0 && f.grp[p] == f.grp[i]) try_merge(&f, f.grp[q], f.grp[i]);
        }
        /* a library product also takes the views below its operands' (a transpose under a
         * widening cast) */
        for (int s = 0; opt->library_gemm && n->op == IR_OP_MATMUL && s < 2; s++) {
            int chain[3], bottom, nv = view_chain(&f, i, s, chain, &bottom);
            for (int k = 1; k < nv; k++) try_merge(&f, f.grp[chain[k]], f.grp[i]);
            /* on the CPU, B's producer under its transpose too (mark_b_operand: a weight made
             * here, in panels of B^T; schedulable refuses any other) */
            if (opt->cpu && s == 1 && nv > 0 && bottom >= 0 && !generated(&f, g->nodes.data[chain[nv - 1]].in[0]))
                try_merge(&f, f.grp[bottom], f.grp[i]);
        }
    }
    /* sibling: groups reading the same value */
    for (int v = 0; v < g->values.len; v++) {
        if (generated(&f, v)) continue;
        for (int i = 0; i < f.n; i++) {
            const IrNode *n = &g->nodes.data[i];
            bool reads = false;
            for (int j = 0; j < n->nin; j++) reads |= n->in[j] == v;
            if (!reads) continue;
            for (int i2 = i + 1; i2 < f.n; i2++) {
                const IrNode *n2 = &g->nodes.data[i2];
                bool reads2 = false;
                for (int j = 0; j < n2->nin; j++) reads2 |= n2->in[j] == v;
                if (reads2 && f.grp[i] != f.grp[i2]) try_merge(&f, f.grp[i], f.grp[i2]);
            }
        }
    }
    /* last, on the CPU: a library product takes the elementwise kernels reading its result (its
     * epilogue: a bias, an activation, a residual, the storage type's rounding), which lower.c
     * runs a block of C's rows at a time while the block is in the cache (epilogue_rows). Last,
     * so that a row kernel has taken what it reads first (a causal softmax its scores' mask:
     * lower.c's causal products and zero tails need it there) */
    if (opt->cpu && opt->library_gemm && !f.eager) {
        f.epilogues = true;
        for (int i = 0; i < f.n; i++) {
            const IrNode *m = &g->nodes.data[i];
            if (m->op != IR_OP_MATMUL) continue;
            for (int c = i + 1; c < f.n; c++) {
                const IrNode *r = &g->nodes.data[c];
                bool reads = false;
                for (int j = 0; j < r->nin; j++) reads |= r->in[j] == m->out[0];
                if (reads && f.grp[c] != f.grp[i] && pointwise_group(&f, f.grp[c])) try_merge(&f, f.grp[i], f.grp[c]);
            }
        }
        f.epilogues = false;
    }
    /* eager: a constant or iota of a source op runs inside that op's kernel (as written) */
    if (f.eager)
        for (int i = 0; i < f.n; i++) {
            const IrNode *n = &g->nodes.data[i];
            if (ir_ops[n->op].cat != IR_CAT_GENERATOR || f.grp[i] != i) continue;
            for (int c = i + 1; c < f.n; c++) {
                const IrNode *m = &g->nodes.data[c];
                bool reads = false;
                for (int j = 0; j < m->nin; j++) reads |= m->in[j] == n->out[0];
                if (reads && m->origin == n->origin) {
                    merge(&f, f.grp[c], i);
                    break;
                }
            }
        }
    if (getenv("FUSEC_DEBUG_FUSE"))
        for (int i = 0; i < f.n; i++) fprintf(stderr, "node %d %s -> group %d\n", i, ir_ops[g->nodes.data[i].op].name, f.grp[i]);
    /* the reasons for the edges left */
    FcStatus s = FC_OK;
    if (edges) {
        for (int i = 0; i < f.n && s == FC_OK; i++) {
            const IrNode *n = &g->nodes.data[i];
            for (int j = 0; j < n->nin; j++) {
                int p = ir_cval(g, n->in[j])->node;
                if (p < 0 || f.grp[p] == f.grp[i] || generated(&f, n->in[j])) continue;
                const char *why = why_apart(&f, f.grp[p], f.grp[i]);
                if (!why) why = "not merged by the greedy order";
                FuseEdge e = {n->in[j], i, why};
                if (!FC_VEC_PUSH(edges, e)) { s = FC_OOM(err); break; }
            }
        }
    }
    fc_free(f.mark);
    fc_free(f.used_outside);
    return s;
}
