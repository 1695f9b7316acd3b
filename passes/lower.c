/* lower.c: the decomposed graph to the kernel IR: groups, buffers, schedules, launches.
 *
 * Entry point: pass_lower. Requires a decomposed, verified graph (no composite ops, no
 * split). Leaves a KirProgram whose launches, run in order, compute the block's outputs.
 *
 * 1. Groups. Each group of nodes becomes one kernel. Eager (--no-fuse): one group per
 *    source op (the nodes' `origin`), so a layernorm is one kernel and each attention step
 *    another. A group that is a lone reshape is a view: its result aliases its input's
 *    buffer and no kernel runs (reshape of contiguous data is free).
 * 2. Buffers. A value gets a buffer when a node of another group or the block's outputs
 *    read it: block inputs and outputs are the caller's; the rest are temporaries in one
 *    workspace (256-byte aligned offsets, no reuse yet). An output that is an input, a
 *    view, or an earlier output gets a copy kernel.
 * 3. Schedules, one per group kind, written into the kernel IR:
 *    - pointwise: a 1-D grid over the outputs' elements, CHUNK per block, spread over the
 *      block's threads; every value of the group computed inline ("emit") at the element's
 *      index, index maps (reshape, transpose, broadcast, slice, concat, gather) included;
 *    - row reduction: when every reduction in the group reduces the same trailing axes of
 *      tensors of one shape X and every output has shape X or the reduced shape: one block
 *      per row, one block reduction (KS_REDUCE) per reduction node in order, then a thread
 *      loop writing the outputs (layernorm, softmax, rmsnorm, log_softmax, sum, mean ...);
 *      with a tail (fuse.c: reductions over every row's value, cross_entropy's mean), each
 *      block also stores those per-row values and the kernel's tail (KirKernel.tail)
 *      reduces them once after every row (schedule_tail);
 *    - any other group with reductions: pointwise over the outputs with each reduction
 *      computed by a serial loop at the element (correct for any axes, not fast);
 *    - matmul: 16x16 output tiles per block of 256 threads, K in steps of 16 through shared
 *      memory, the operands' producers in the group inlined into the tile loads and the
 *      consumers (reshape, elementwise of the same size) applied before the store.
 *    Within a kernel, `emit` caches each (value, index) it computed in a variable of the
 *    current scope, and index expressions are hash-consed so equal indices share ids.
 *    GPU-shaped programs only: the flat pointwise loop, the row staging loops and the row
 *    output loop are vec thread loops (KirStmt.vec, docs/kir.md) where alignment allows
 *    (chunk starts and, for rows, N multiples of the width), with the accesses at the loop's
 *    own index marked vec; CPU-shaped schedules never get widths.
 * 4. Cost: bytes read (each external input once) and written (each output once), flops
 *    from the op table.
 */
#include "passes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PW_BLOCK = 256, MM_TILE = 16, MAX_MEMO_IDX = IR_MAX_RANK };

/* ---- budgets from the target ------------------------------------------------------------
 * GPU (PassOptions.sm): a row kernel stages its rows in shared memory up to a budget that
 * keeps two blocks resident per SM (so one block's loads overlap the other's arithmetic):
 * half the shared memory of an SM, within what one block may opt in to, less 1 KiB for the
 * reductions' scratch. sm_80 (A100: 164 KiB per SM, 163 KiB a block): 81 KiB; sm_86 and
 * sm_89 (100 KiB, 99 KiB): 49 KiB; sm_90 (H100: 228 KiB, 227 KiB): 113 KiB. Shared arrays
 * beyond the 48 KiB of static shared memory become dynamic shared memory (codegen/cuda.c,
 * cg_cuda_dynamic_shared), which the launchers opt in to.
 * CPU (PassOptions.host, read off the machine by the runtime; zeros = unknown):
 *  - a pointwise block (one task of an OS thread) covers L2 / 16 bytes of each operand,
 *    16 KiB to 256 KiB (64 KiB with a 1 MiB L2: 16384 f32 elements), so the operands of a
 *    few tasks in flight stay in L2 while cutting the per-task overhead;
 *  - a row reduction keeps 4 vector registers of partial sums: 4 x lanes "threads" (64 f32
 *    partials with 512-bit vectors, 32 with 256-bit, 16 with 128-bit);
 *  - a kernel that writes more than half the last-level cache marks its written-only params
 *    `stream` (KirParam): the next kernel cannot find such results in the cache anyway, and
 *    non-temporal stores skip reading each line before writing it (a third of the traffic of
 *    a kernel that reads two arrays and writes two). */
static int64_t row_smem_budget(const PassOptions *o) {
    int64_t per_sm, optin;
    switch (o->sm) {
    case 80: per_sm = 164 * 1024; optin = 163 * 1024; break;
    case 86: case 89: per_sm = 100 * 1024; optin = 99 * 1024; break;
    case 90: per_sm = 228 * 1024; optin = 227 * 1024; break;
    default: per_sm = 96 * 1024; optin = 48 * 1024; break;   /* unknown: static shared memory only */
    }
    int64_t b = (per_sm / 2 < optin ? per_sm / 2 : optin) - 1024;
    return b > 0 ? b : 0;
}

/* The host's L2 bytes (unknown: 1 MiB) and last-level cache bytes (unknown: 8 MiB). */
static int64_t host_l2(const PassOptions *o) { return o->host.l2_bytes > 0 ? o->host.l2_bytes : 1 << 20; }
static int64_t host_llc(const PassOptions *o) { return o->host.llc_bytes > 0 ? o->host.llc_bytes : 8 << 20; }

/* Elements per block of a pointwise kernel: 4 per thread on a GPU; on the CPU, see above. */
static int64_t pw_chunk(const PassOptions *o) {
    if (!o->cpu) return 1024;
    int64_t l2 = host_l2(o);
    int64_t bytes = l2 / 16 < 16384 ? 16384 : l2 / 16 > 262144 ? 262144 : l2 / 16;
    return bytes / 4;
}
/* Threads of a row-reduction block: on the CPU, the number of partial sums (see above); on a
 * GPU up to 256 threads, a multiple of the warp. */
static int row_block(const PassOptions *o, int64_t N) {
    int vb = o->host.vector_bytes == 16 || o->host.vector_bytes == 32 ? o->host.vector_bytes : 64;
    int lanes = vb / 4;   /* f32 lanes of a vector register */
    int max = o->cpu ? 4 * lanes : 256;
    return N >= max ? max : (int)((N + 31) / 32 * 32);
}
/* Whether a launch's written-only params are `stream`: on the CPU, when the launch writes more
 * than half the last-level cache, or reads and writes more than all of it. Past the cache's
 * size, of the W bytes a launch writes about W * LLC / (R + W) are still in the cache when it
 * ends (its last LLC bytes of traffic), so non-temporal stores save the W bytes of reads for
 * ownership and cost the next kernel at most that fraction of W: a gain whenever R + W > LLC.
 * Before, only the bytes written counted, so an eager bf16 `x + y` [8192, 1024] (32 MiB read,
 * 16 MiB written, a 32 MiB L3) paid the reads for ownership that its f32 twin did not (2-core
 * Zen 3, 2 threads: 1.9-2.5 ms against 1.4-1.8 streaming, docs/cpu.md).
 * Not a param the kernel stores a vector of less than a cache line to (the host's f32 lanes
 * times the param's element size: a loop vectorized at f32 width stores that much a step) in a
 * loop that computes a transcendental (transcendental_stores): a non-temporal store fills a
 * write-combining buffer, and a partial line held across the long steps of such a loop costs
 * more than the read for ownership it saves. On a 2-core Zen 3 (AVX2, 32-byte f32 and 16-byte
 * bf16 vectors), 2 threads: residual_ln_gelu [8192, 1024] fused 30.5-37.0 ms streaming against
 * 14.7-15.3 without at bf16 (f32: no difference beyond the noise); `gelu(x), x + 1` at bf16
 * 24.8-26.7 against 13.2-14.5; at AVX-512 an f32 vector is a whole line and the same kernel
 * streams (6.0-7.3 ms to 3.8-4.0 on a Zen 4, docs/cpu.md); cheap kernels stream at any width
 * (`x*2+1*0.5` at f32 on the Zen 3: 6.8-9.6 ms against 9.9-12.8 without). */
static bool launch_streams(const PassOptions *o, const KirKernel *k) {
    int64_t llc = o->host.llc_bytes;
    if (!o->cpu || llc <= 0) return false;
    return k->bytes_written > llc / 2 || k->bytes_read > llc - k->bytes_written;
}
static bool is_transcendental(const KirExpr *x) {
    return x->kind == KE_UNARY && (x->op == KU_EXP || x->op == KU_LOG || x->op == KU_TANH || x->op == KU_ERF ||
                                   x->op == KU_SIN || x->op == KU_COS || x->op == KU_NDTR);
}
/* Loop-scan state: the variables a loop sets (its own, and every one a statement of its body
 * sets) and, per expression, 0 not seen, 1 varies along the loop, 2 does not. */
typedef struct LoopScan { bool *set; char *varies, *trans; } LoopScan;
static void mark_set(const KirKernel *k, int s, LoopScan *ls) {
    for (; s >= 0 && s < k->stmts.len; s = k->stmts.data[s].next) {
        const KirStmt *st = &k->stmts.data[s];
        if (st->var >= 0 && st->var < k->vars.len) ls->set[st->var] = true;
        if (st->loop_var >= 0 && st->loop_var < k->vars.len) ls->set[st->loop_var] = true;
        mark_set(k, st->body, ls);
        mark_set(k, st->body2, ls);
    }
}
/* Whether e's value can change along the loop: it reads a variable the loop sets, or memory. */
static bool expr_varies(const KirKernel *k, int e, LoopScan *ls) {
    if (e < 0 || e >= k->exprs.len) return false;
    if (ls->varies[e]) return ls->varies[e] == 1;
    const KirExpr *x = &k->exprs.data[e];
    bool v = x->kind == KE_LOAD || x->kind == KE_SHLOAD || x->kind == KE_TLOAD ||
             (x->kind == KE_VAR && (x->ref < 0 || x->ref >= k->vars.len || ls->set[x->ref])) ||
             expr_varies(k, x->a, ls) || expr_varies(k, x->b, ls) || expr_varies(k, x->c, ls);
    ls->varies[e] = v ? 1 : 2;
    return v;
}
/* Whether expression e computes a transcendental of something that varies along the loop (one
 * of a block-uniform value, log(sum) in a log_softmax's output loop, is computed once) */
static bool expr_transcendental(const KirKernel *k, int e, LoopScan *ls) {
    if (e < 0 || e >= k->exprs.len) return false;
    if (ls->trans[e]) return ls->trans[e] == 1;
    const KirExpr *x = &k->exprs.data[e];
    bool t = (is_transcendental(x) && expr_varies(k, x->a, ls)) ||
             (expr_varies(k, e, ls) && (expr_transcendental(k, x->a, ls) || expr_transcendental(k, x->b, ls) ||
                                        expr_transcendental(k, x->c, ls)));
    ls->trans[e] = t ? 1 : 2;
    return t;
}
/* Whether the statements of list s (nested lists included) compute such a transcendental. */
static bool list_transcendental(const KirKernel *k, int s, LoopScan *ls) {
    for (; s >= 0 && s < k->stmts.len; s = k->stmts.data[s].next) {
        const KirStmt *st = &k->stmts.data[s];
        if (expr_transcendental(k, st->a, ls) || expr_transcendental(k, st->b, ls) ||
            expr_transcendental(k, st->c, ls) || list_transcendental(k, st->body, ls) ||
            list_transcendental(k, st->body2, ls))
            return true;
    }
    return false;
}
/* Marks heavy[p] for each param p that list s stores to (nested lists included). */
static void list_stores(const KirKernel *k, int s, bool *heavy) {
    for (; s >= 0 && s < k->stmts.len; s = k->stmts.data[s].next) {
        const KirStmt *st = &k->stmts.data[s];
        if (st->kind == KS_STORE && st->ref >= 0 && st->ref < k->params.len) heavy[st->ref] = true;
        list_stores(k, st->body, heavy);
        list_stores(k, st->body2, heavy);
    }
}
/* heavy[p]: param p is stored to in a loop (a thread loop or a reduction, the body's or the
 * tail's) that also computes a transcendental, or at block level in a kernel that computes one
 * anywhere. A softmax's output loop divides a kept row by its sum, the exp being in the
 * reduction before it: its stores stream. */
static void transcendental_stores(const KirKernel *k, bool *heavy, LoopScan *ls) {
    bool any = false;
    for (int e = 0; e < k->exprs.len && !any; e++) any = is_transcendental(&k->exprs.data[e]);
    if (!any) return;
    for (int top = 0; top < 2; top++)
        for (int s = top ? k->tail : k->body; s >= 0 && s < k->stmts.len; s = k->stmts.data[s].next) {
            const KirStmt *st = &k->stmts.data[s];
            bool loop = st->kind == KS_REDUCE || (st->kind == KS_FOR && st->loop == KIR_LOOP_THREADS);
            if (!loop) {   /* block level: any transcendental of the kernel may be held across it */
                if (st->kind == KS_STORE && st->ref >= 0 && st->ref < k->params.len) heavy[st->ref] = true;
                if (st->kind != KS_STORE) {
                    list_stores(k, st->body, heavy);
                    list_stores(k, st->body2, heavy);
                }
                continue;
            }
            memset(ls->set, 0, sizeof(bool) * (size_t)k->vars.len);
            memset(ls->varies, 0, (size_t)k->exprs.len);
            memset(ls->trans, 0, (size_t)k->exprs.len);
            int lv = st->kind == KS_REDUCE ? st->loop_var : st->var;
            if (lv >= 0 && lv < k->vars.len) ls->set[lv] = true;
            mark_set(k, st->body, ls);
            if (expr_transcendental(k, st->c, ls) || list_transcendental(k, st->body, ls)) list_stores(k, st->body, heavy);
        }
}

typedef struct Memo {
    int value;
    int n;
    int idx[MAX_MEMO_IDX];
    int var;          /* kernel variable holding it */
    int depth;        /* scope depth where the variable was declared */
} Memo;

typedef struct Lower {
    const IrGraph *g;
    const PassOptions *opt;
    KirProgram *p;
    FcErr *err;
    FcStatus st;             /* first failure, sticky */

    int ngroups;
    int *group_of_node;      /* [nodes] */
    int *group_first;        /* [groups] first node index */
    int *group_origin_op;    /* [groups] */
    bool *group_is_view;     /* [groups] a lone reshape */
    bool *used_outside;      /* [values] read by another group or a block output */
    int *buf_of_val;         /* [values] buffer id, or -1 */
    int plant;               /* FUSEC_PLANT_BUG's value (plant_target), or -1 */
    int state_buf;           /* the f8 scaling state (KIR_BUF_STATE), or -1 when the graph has no slot */

    /* the kernel being built */
    KirKernel *k;
    int cur_group;
    int *param_of_buf;       /* [buffers] param id in k, or -1 */
    int *bound;              /* [values] expr id standing for the value, or -1 */
    bool *force_load;        /* [values] read from its buffer even inside its group (the
                              * product of a library matmul, read by its epilogue) */
    int *row_shared;         /* [values] shared array holding this row of the value, or -1 */
    int *whole_shared;       /* [values] shared array holding the whole value, staged before the
                              * rows (stage_whole, the CPU), or -1 */
    bool *tail_node;         /* [nodes] runs in the row kernel's tail (row_shape; fuse.c's mark 2) */
    bool *deq_only;          /* [values] read by fp8_dequants alone (fp8_inline) */
    bool *eager_stored;      /* [values] --strict-rounding: what the eager program stores (a block
                              * output, or a value read by a node of another of eager's groups) */
    int *red_block;          /* [nodes] or NULL: receives the thread count of each row reduction's
                              * kernel, its tail's included (reduce_order; 0 elsewhere) */
    int *eager_red_block;    /* [nodes] --strict-rounding: red_block of the eager program, whose
                              * reduction orders the fused kernels reproduce (KirStmt.lanes) */
    int *scatter_index;      /* [nodes] a scatter_add's index buffer (scatter_index_kernels), or -1 */
    int64_t pw_rows;         /* > 0: the rows a block of schedule_pointwise_rows takes (an
                              * epilogue run a block of C at a time, epilogue_rows) */
    int group_kernel;        /* the kernel lower_group built for the group's nodes (the first of
                              * a library product's, after any scatter_add index kernels) */
    int row_lead;            /* rank of the row index (leading dims) while row_shared is used */
    IrShape row_red;         /* the reduced dims */
    bool in_rows;            /* a row kernel is being built: row_shared and the reductions' bound
                              * values hold the block's own row, and only that row */
    int row_var;             /* its row (the block index) */
    int row_lead_vars[IR_MAX_RANK]; /* the row's index in the leading dims, one variable each */
    IrShape row_lead_shape;  /* the leading dims */
    /* A causal row kernel (schedule_rows, causal_rows): its rows' causal masks, of shape
     * mask_shape and offsets up to mask_off. While fcol >= 0 (an expression: the column index
     * being computed) the columns are past every such mask, and forced_where gives each mask
     * its fill without computing its x; the rows the reductions kept (row_shared) hold only
     * the columns before, so values of the group are computed again there. */
    int fcol;
    const IrShape *mask_shape;
    int64_t mask_off;
    KirTail *tail_from;      /* [values] a causal row kernel's output stored with one value per
                              * row past its masks (align 0: not such a value) */
    int kept_var;            /* the kernel's variable of the columns before the masks, or -1 */
    int64_t kept_elems;      /* the elements of a row-shaped value (mask_numel) those columns */
    int64_t mask_numel;      /* hold in all */
    FC_VEC(Memo) memo;
    int depth;
    /* GPU vectorization (KirStmt.vec): while a vec thread loop is built, its variable and
     * width; loads and stores whose index is the variable (plus a multiple of the width) are
     * marked vec. fold_*: the multi-index that delinearizing the loop variable gave for the
     * trailing fold_rank dims of fold_shape, so that a value of that shape read at it is
     * read at the loop variable again instead of at linearize(delinearize(v)). */
    int vec_var, vec_w;
    const IrShape *fold_shape;
    int fold_rank, fold_lin;
    int fold_idx[IR_MAX_RANK];
    FC_VEC(KirExpr) hc_keys; /* hash-consing: parallel to hc_ids */
    FC_VEC(int) hc_ids;
} Lower;

static bool failed(Lower *L) { return L->st != FC_OK; }
static void fail_oom(Lower *L) {
    if (L->st == FC_OK) L->st = FC_OOM(L->err);
}
static void fail_internal(Lower *L, const char *what, int line) {
    if (L->st == FC_OK)
        L->st = fc_err_set(L->err, FC_ERR_INTERNAL, "internal error: %s:%d: %s", __FILE__, line, what);
}
#define LCHECK(L, cond) \
    do { if (!(cond)) { fail_internal((L), "check failed: " #cond, __LINE__); return -1; } } while (0)

static const IrValue *val(const Lower *L, int v) { return ir_cval(L->g, v); }
static const IrNode *node_of(const Lower *L, int v) {
    int n = val(L, v)->node;
    return n >= 0 ? &L->g->nodes.data[n] : NULL;
}
static KirType ctype(FcDtype t) { return kir_compute_type(t); }
static KirType acc_type(FcDtype t) {
    KirType c = ctype(t);
    return (c == KT_I32 || c == KT_I64) ? KT_I64 : c;
}

/* ---- expression helpers with hash-consing and folding of index math ---------------------- */
static int hc(Lower *L, KirExpr e, int (*make)(Lower *, const KirExpr *)) {
    if (failed(L)) return -1;
    for (int i = L->hc_keys.len - 1; i >= 0; i--) {
        const KirExpr *q = &L->hc_keys.data[i];
        if (q->kind == e.kind && q->type == e.type && q->a == e.a && q->b == e.b && q->c == e.c &&
            q->ref == e.ref && q->op == e.op && q->ival == e.ival &&
            memcmp(&q->fval, &e.fval, sizeof e.fval) == 0)
            return L->hc_ids.data[i];
    }
    int id = make(L, &e);
    if (id < 0) { fail_oom(L); return -1; }
    if (!FC_VEC_PUSH(&L->hc_keys, e)) { fail_oom(L); return -1; }
    if (!FC_VEC_PUSH(&L->hc_ids, id)) {
        L->hc_keys.len--;   /* keep the two arrays in step */
        fail_oom(L);
        return -1;
    }
    return id;
}
static int mk_const_i(Lower *L, const KirExpr *e) { return kir_const_i(L->k, e->type, e->ival); }
static int mk_bin(Lower *L, const KirExpr *e) { return kir_bin(L->k, (KirBinOp)e->op, e->a, e->b); }

static int mk_var(Lower *L, const KirExpr *e) { return kir_var_ref(L->k, e->ref); }
/* A reference to a variable, hash-consed so equal indices share expression ids. */
static int vref(Lower *L, int var) {
    if (var < 0 || var >= L->k->vars.len) return -1;
    KirExpr e = {.kind = KE_VAR, .type = L->k->vars.data[var].type, .a = -1, .b = -1, .c = -1, .ref = var};
    return hc(L, e, mk_var);
}

static int ci(Lower *L, int64_t v) {
    KirExpr e = {.kind = KE_CONST, .type = KT_I64, .a = -1, .b = -1, .c = -1, .ref = -1, .ival = v};
    return hc(L, e, mk_const_i);
}
static bool is_const_i(Lower *L, int e, int64_t *v) {
    if (e < 0) return false;
    const KirExpr *x = &L->k->exprs.data[e];
    if (x->kind != KE_CONST || x->type != KT_I64) return false;
    *v = x->ival;
    return true;
}
/* i64 index arithmetic, folded where an operand is a constant */
static int ib(Lower *L, KirBinOp op, int a, int b) {
    if (a < 0 || b < 0) return -1;
    int64_t va = 0, vb = 0;
    bool ca = is_const_i(L, a, &va), cb = is_const_i(L, b, &vb);
    if (ca && cb) {
        switch (op) {
        case KB_ADD: return ci(L, va + vb);
        case KB_SUB: return ci(L, va - vb);
        case KB_MUL: return ci(L, va * vb);
        case KB_DIV: if (vb) return ci(L, va / vb); break;
        case KB_REM: if (vb) return ci(L, va % vb); break;
        case KB_MAX: return ci(L, va > vb ? va : vb);
        case KB_MIN: return ci(L, va < vb ? va : vb);
        default: break;
        }
    }
    if (op == KB_ADD && ca && va == 0) return b;
    if ((op == KB_ADD || op == KB_SUB) && cb && vb == 0) return a;
    if (op == KB_MUL && ((ca && va == 0) || (cb && vb == 0))) return ci(L, 0);
    if (op == KB_MUL && ca && va == 1) return b;
    if ((op == KB_MUL || op == KB_DIV) && cb && vb == 1) return a;
    if (op == KB_REM && cb && vb == 1) return ci(L, 0);
    KirExpr e = {.kind = KE_BINARY, .type = (op >= KB_LT && op <= KB_NE) ? KT_BOOL : KT_I64,
                 .a = a, .b = b, .c = -1, .ref = -1, .op = op};
    return hc(L, e, mk_bin);
}

/* Linear index of idx (rank r) in a row-major tensor of shape s. */
static int linearize(Lower *L, const IrShape *s, const int *idx) {
    int lin = ci(L, 0);
    for (int d = 0; d < s->rank; d++) lin = ib(L, KB_ADD, ib(L, KB_MUL, lin, ci(L, s->dims[d])), idx[d]);
    return lin;
}
/* Multi-index of linear index lin in shape s. */
static void delinearize(Lower *L, const IrShape *s, int lin, int *idx) {
    for (int d = s->rank - 1; d >= 0; d--) {
        if (s->dims[d] == 1) { idx[d] = ci(L, 0); continue; }
        idx[d] = d == 0 ? lin : ib(L, KB_REM, lin, ci(L, s->dims[d]));
        lin = ib(L, KB_DIV, lin, ci(L, s->dims[d]));
    }
}
/* The index in shape `in` of the element at index `idx` of its reshape to `out`. The two
 * shapes are cut into aligned blocks (runs of dims whose sizes multiply to the same number on
 * both sides: a merge, a split or a one-to-one dim), and each block is linearized and
 * delinearized on its own, so a reshape that only merges or splits dims costs no division of
 * the whole linear index (a split costs one per split dim, a merge none). */
static void reshape_index(Lower *L, const IrShape *out, const int *idx, const IrShape *in, int *res) {
    int i = 0, o = 0;
    while (i < in->rank || o < out->rank) {
        /* size-1 dims on either side stand alone */
        if (i < in->rank && in->dims[i] == 1) { res[i++] = ci(L, 0); continue; }
        if (o < out->rank && out->dims[o] == 1) { o++; continue; }
        int i0 = i, o0 = o;
        int64_t pi = in->dims[i++], po = out->dims[o++];
        while (pi != po) {
            if (pi < po) pi *= in->dims[i++];
            else po *= out->dims[o++];
        }
        IrShape ob = {.rank = o - o0}, ib2 = {.rank = i - i0};
        memcpy(ob.dims, out->dims + o0, sizeof(int64_t) * (size_t)ob.rank);
        memcpy(ib2.dims, in->dims + i0, sizeof(int64_t) * (size_t)ib2.rank);
        delinearize(L, &ib2, linearize(L, &ob, idx + o0), res + i0);
    }
}

/* Index into an operand of shape u broadcast to an element of shape o. */
static void bcast_index(Lower *L, const IrShape *o, const IrShape *u, const int *idx, int *out) {
    int off = o->rank - u->rank;
    for (int d = 0; d < u->rank; d++) out[d] = u->dims[d] == 1 ? ci(L, 0) : idx[d + off];
}

/* ---- scopes and the per-kernel value cache ------------------------------------------------ */
static void scope_open(Lower *L) { L->depth++; }
static void scope_close(Lower *L) {
    L->depth--;
    while (L->memo.len > 0 && L->memo.data[L->memo.len - 1].depth > L->depth) L->memo.len--;
}
static void k_for(Lower *L, KirLoopKind kind, int var, int lo, int hi) {
    kir_for(L->k, kind, var, lo, hi);
    scope_open(L);
}
static void k_if(Lower *L, int cond) {
    kir_if(L->k, cond);
    scope_open(L);
}
static void k_end(Lower *L) {
    scope_close(L);
    kir_end(L->k);
}
/* Hash-consed index expressions may refer to loop variables of a closed scope; drop all of
 * them when a scope that declared variables closes. Index expressions are cheap to rebuild. */
static void hc_reset(Lower *L) {
    L->hc_keys.len = 0;
    L->hc_ids.len = 0;
}
/* After a loop opened when the table had `mark` entries closes: drops only what was made
 * inside it (what came before cannot refer to its variables), so the caller's index
 * expressions keep their ids and the value cache (keyed by them) still finds what was
 * computed before the loop. hc_reset instead would make every later use of a value computed
 * with an inner loop (a serial reduction, a scatter_add's row walk) compute it again, and a
 * value read several times by what reads it several times (gelu's x) again and again. */
static void hc_trunc(Lower *L, int mark) {
    if (mark < L->hc_keys.len) {
        L->hc_keys.len = mark;
        L->hc_ids.len = mark;
    }
}

static int memo_find(Lower *L, int v, int n, const int *idx) {
    for (int i = L->memo.len - 1; i >= 0; i--) {
        const Memo *m = &L->memo.data[i];
        if (m->value == v && m->n == n && memcmp(m->idx, idx, sizeof(int) * (size_t)n) == 0)
            return vref(L, m->var);
    }
    return -1;
}
/* Binds expression e to a fresh variable in the current scope and remembers it. */
static int memo_put(Lower *L, int v, int n, const int *idx, int e) {
    if (e < 0) return -1;
    const KirExpr *x = &L->k->exprs.data[e];
    if (x->kind == KE_CONST) return e;   /* nothing to save */
    /* a variable is remembered as itself (an f8 value kept wide is its x: emit_fp8 records its
     * amax once) */
    int var = x->kind == KE_VAR ? x->ref : kir_var(L->k, x->type);
    if (x->kind != KE_VAR) kir_let(L->k, var, e);
    Memo m = {.value = v, .n = n, .var = var, .depth = L->depth};
    memcpy(m.idx, idx, sizeof(int) * (size_t)n);
    if (!FC_VEC_PUSH(&L->memo, m)) { fail_oom(L); return -1; }
    return vref(L, var);
}

/* lo, hi: new variables holding this block's part [block * chunk, min(block * chunk + chunk, n))
 * of a 1-D range of n (the grid of a chunked kernel). */
static void block_range(Lower *L, int64_t chunk, int64_t n, int *lo, int *hi) {
    *lo = kir_var(L->k, KT_I64);
    *hi = kir_var(L->k, KT_I64);
    kir_let(L->k, *lo, ib(L, KB_MUL, kir_block_idx(L->k), ci(L, chunk)));
    kir_let(L->k, *hi, kir_bin(L->k, KB_MIN, ib(L, KB_ADD, vref(L, *lo), ci(L, chunk)), ci(L, n)));
}

/* An id read for `rows` rows (gather, scatter_add): fails the run with a data error when it
 * is outside [0, rows); returns that condition. */
static int check_id(Lower *L, int id, int64_t rows) {
    int bad = kir_bin(L->k, KB_OR, kir_bin(L->k, KB_LT, id, ci(L, 0)), kir_bin(L->k, KB_GE, id, ci(L, rows)));
    kir_error_if(L->k, bad, FC_ERR_RUNTIME_DATA);
    return bad;
}

/* ---- buffers as kernel parameters ---------------------------------------------------------- */
static int param_for_buf(Lower *L, int buf, bool written) {
    if (L->param_of_buf[buf] < 0) {
        const KirBuffer *b = &L->p->buffers.data[buf];
        L->param_of_buf[buf] = kir_param(L->k, b->dtype, b->numel, written);
    } else if (written) {
        L->k->params.data[L->param_of_buf[buf]].written = true;
    }
    return L->param_of_buf[buf];
}

/* ---- emitting a value at an index ------------------------------------------------------------ */
static int emit(Lower *L, int v, const int *idx);
static bool causal_where(const Lower *L, const IrNode *w, const IrShape *o, int64_t *off);
static bool forced_where(Lower *L, const IrNode *n, const IrShape *s, const int *idx);

static int fconst(Lower *L, KirType t, double x) { return kir_const_f(L->k, t, x); }

static int zero_of(Lower *L, KirType t) {
    return (t == KT_F32 || t == KT_F64) ? fconst(L, t, 0.0) : kir_const_i(L->k, t, 0);
}

static int reduce_identity(Lower *L, IrOp op, KirType t) {
    if (op == IR_OP_SUM || op == IR_OP_MEAN) return zero_of(L, t);
    bool isf = t == KT_F32 || t == KT_F64;
    if (op == IR_OP_MAX) return isf ? fconst(L, t, -INFINITY) : kir_const_i(L->k, t, INT64_MIN);
    return isf ? fconst(L, t, INFINITY) : kir_const_i(L->k, t, INT64_MAX);
}
static KirBinOp reduce_binop(IrOp op) {
    return op == IR_OP_MAX ? KB_MAX : op == IR_OP_MIN ? KB_MIN : KB_ADD;
}
static KirRedOp reduce_redop(IrOp op) {
    return op == IR_OP_MAX ? KR_MAX : op == IR_OP_MIN ? KR_MIN : KR_SUM;
}

/* Index of the reduction input for output index idx (output shape o) and reduced index r
 * (one entry per reduced axis). */
static void reduce_in_index(const IrNode *n, const IrShape *in, const int *out_idx, const int *r,
                            int *idx) {
    int j = 0, o = 0;
    for (int d = 0; d < in->rank; d++) {
        bool red = j < n->a.nlist && n->a.list[j] == d;
        if (red) {
            idx[d] = r[j++];
            if (n->a.i[0]) o++;   /* keepdim: the output has a size-1 dim here */
        } else {
            idx[d] = out_idx[o++];
        }
    }
}

/* A reduction computed by a serial loop at one output element (the general fallback). */
static int emit_reduce_serial(Lower *L, const IrNode *n, int v, const int *idx) {
    const IrValue *x = val(L, n->in[0]);
    IrShape rs = {.rank = n->a.nlist};
    int64_t count = 1;
    for (int j = 0; j < n->a.nlist; j++) {
        rs.dims[j] = x->shape.dims[n->a.list[j]];
        count *= rs.dims[j];
    }
    KirType at = acc_type(x->dtype);
    int acc = kir_var(L->k, at);
    kir_let(L->k, acc, reduce_identity(L, n->op, at));
    int r = kir_var(L->k, KT_I64), lim = ci(L, count), mark = L->hc_keys.len;
    k_for(L, KIR_LOOP_SERIAL, r, ci(L, 0), lim);
    int ridx[IR_MAX_RANK], iidx[IR_MAX_RANK];
    delinearize(L, &rs, vref(L, r), ridx);
    reduce_in_index(n, &x->shape, idx, ridx, iidx);
    int xv = kir_cast(L->k, at, emit(L, n->in[0], iidx));
    kir_assign(L->k, acc, kir_bin(L->k, reduce_binop(n->op), vref(L, acc), xv));
    k_end(L);
    hc_trunc(L, mark);
    int res = vref(L, acc);
    if (n->op == IR_OP_MEAN) res = kir_bin(L->k, KB_DIV, res, fconst(L, at, (double)count));
    (void)v;
    return kir_cast(L->k, ctype(val(L, v)->dtype), res);
}

/* The values of an integer dtype (the bounds a cast to it saturates to); false for the others. */
static bool int_bounds(FcDtype t, int64_t *lo, int64_t *hi) {
    switch (t) {
    case FC_I8: *lo = INT8_MIN; *hi = INT8_MAX; return true;
    case FC_I32: *lo = INT32_MIN; *hi = INT32_MAX; return true;
    case FC_I64: *lo = INT64_MIN; *hi = INT64_MAX; return true;
    default: return false;
    }
}

/* A cast (docs/language.md): to an integer, floats truncate toward zero and saturate (NaN 0:
 * the kernel IR's float-to-int cast), and a wider integer saturates to the narrower one's range
 * (clamped in its own type, then converted); to bool, x != 0. */
static int emit_cast(Lower *L, int x, FcDtype from, FcDtype to, bool wide) {
    KirType tt = ctype(to);
    if (to == FC_BOOL) {
        if (from == FC_BOOL) return x;
        KirType ft = ctype(from);
        return kir_bin(L->k, KB_NE, x, zero_of(L, ft));
    }
    int64_t tlo, thi, flo, fhi;
    if (int_bounds(to, &tlo, &thi)) {
        if (ir_dtype_is_float(from)) {   /* saturated to the compute type's range (i32 or i64) */
            x = kir_cast(L->k, tt, x);
            from = tt == KT_I64 ? FC_I64 : FC_I32;
        }
        if (int_bounds(from, &flo, &fhi) && (flo < tlo || fhi > thi)) {
            KirType ft = ctype(from);
            x = kir_bin(L->k, KB_MAX, kir_bin(L->k, KB_MIN, x, kir_const_i(L->k, ft, thi)), kir_const_i(L->k, ft, tlo));
        }
        return kir_cast(L->k, tt, x);
    }
    int y = kir_cast(L->k, tt, x);
    /* a storage cast stays f32 inside the kernel (rounded where stored), as a computing op's
     * narrow result does; the source's casts round here */
    if (ir_dtype_is_float(to) && !wide) y = kir_round(L->k, to, y);
    return y;
}

static int emit_unary(Lower *L, IrOp op, int x, KirType t) {
    KirKernel *k = L->k;
    bool isf = t == KT_F32 || t == KT_F64;
    switch (op) {
    case IR_OP_NEG: return kir_un(k, KU_NEG, x);
    case IR_OP_ABS: return kir_un(k, KU_ABS, x);
    case IR_OP_EXP: return kir_un(k, KU_EXP, x);
    case IR_OP_LOG: return kir_un(k, KU_LOG, x);
    case IR_OP_SQRT: return kir_un(k, KU_SQRT, x);
    case IR_OP_RSQRT: return kir_un(k, KU_RSQRT, x);
    case IR_OP_RECIP: return kir_un(k, KU_RECIP, x);
    case IR_OP_SQUARE: return kir_bin(k, KB_MUL, x, x);
    case IR_OP_TANH: return kir_un(k, KU_TANH, x);
    case IR_OP_ERF: return kir_un(k, KU_ERF, x);
    case IR_OP_NDTR: return kir_un(k, KU_NDTR, x);
    case IR_OP_SIN: return kir_un(k, KU_SIN, x);
    case IR_OP_COS: return kir_un(k, KU_COS, x);
    case IR_OP_RELU: return kir_bin(k, KB_MAX, x, zero_of(L, t));
    case IR_OP_SIGMOID:
    case IR_OP_SILU: {
        /* with e = exp(-|x|) <= 1, nothing overflows: sigmoid = 1 / (1 + e) for x >= 0 and
         * e / (1 + e) below, so that e^x keeps its subnormals (1 / (1 + exp(-x)) gave 0 for
         * x < -88.7 in f32, where e^x is still about 3.8e-44 at x = -100: the per-kernel check
         * found it, difftest seed 20261307 graph 1250); silu = x sigmoid(x) likewise.
         * silu's x e, though, must not hold a subnormal e before its last rounding: e^-100
         * rounded to the f32 subnormal grid (an absolute 2^-150) and multiplied by x = -100 was
         * off by 45 units of that grid (-3.7835e-42 for -3.7204e-42; difftest seed 2026112871
         * graph 220, tests/difftest/found/silu_subnormal_exp.tf). So for x < -B silu takes the
         * exponential at B + x (exact: B an integer on x's grid) and divides x e^(B+x) by e^B
         * instead of 1 + e (1 + e^x is 1 there): one rounding, at the end. B = 87 in f32
         * (e^-87 is still normal; e^(87+x) stays normal down to x = -174, past the -107 where
         * silu rounds to 0; e^87 = 6.1e37 is finite), 708 in f64. One constant, B, is the
         * threshold and the shift, to keep the loop's vector registers few (an AVX2 loop of
         * silu spills past 16). sigmoid's e / (1 + e) there is e itself, rounded once already. */
        int a = kir_un(k, KU_ABS, x);
        if (op == IR_OP_SIGMOID) {
            int e = kir_un(k, KU_EXP, kir_un(k, KU_NEG, a));
            int num = kir_select(k, kir_bin(k, KB_GE, x, zero_of(L, t)), fconst(L, t, 1.0), e);
            return kir_bin(k, KB_DIV, num, kir_bin(k, KB_ADD, fconst(L, t, 1.0), e));
        }
        int neg = kir_bin(k, KB_LT, x, zero_of(L, t));
        int mb = fconst(L, t, t == KT_F64 ? -708.0 : -87.0);
        int sh = kir_bin(k, KB_LT, x, mb);
        /* -|x| - (-B) where shifted, -|x| - 0 elsewhere: exact either way */
        int e = kir_un(k, KU_EXP, kir_bin(k, KB_SUB, kir_un(k, KU_NEG, a), kir_select(k, sh, mb, zero_of(L, t))));
        int den = kir_select(k, sh, fconst(L, t, t == KT_F64 ? exp(708.0) : (double)(float)exp(87.0)),
                             kir_bin(k, KB_ADD, fconst(L, t, 1.0), e));
        return kir_bin(k, KB_DIV, kir_select(k, neg, kir_bin(k, KB_MUL, x, e), x), den);
    }
    default: break;
    }
    (void)isf;
    fail_internal(L, "unary op without a lowering", __LINE__);
    return -1;
}

static int emit_binary(Lower *L, IrOp op, int a, int b) {
    static const KirBinOp map[IR_OP_COUNT] = {
        [IR_OP_ADD] = KB_ADD, [IR_OP_SUB] = KB_SUB, [IR_OP_MUL] = KB_MUL, [IR_OP_DIV] = KB_DIV,
        [IR_OP_POW] = KB_POW, [IR_OP_MAXIMUM] = KB_MAX, [IR_OP_MINIMUM] = KB_MIN,
        [IR_OP_LT] = KB_LT, [IR_OP_LE] = KB_LE, [IR_OP_GT] = KB_GT, [IR_OP_GE] = KB_GE,
        [IR_OP_EQ] = KB_EQ, [IR_OP_NE] = KB_NE};
    return kir_bin(L->k, map[op], a, b);
}

/* ---- vectorization (GPU) -------------------------------------------------------------------- */
/* e is a block-uniform multiple of m: a constant multiple, a product with one, a sum of two. */
static bool aligned_uniform(Lower *L, int e, int64_t m, int depth) {
    if (e < 0 || depth > 32) return false;
    const KirExpr *x = &L->k->exprs.data[e];
    if (x->kind == KE_CONST) return x->type == KT_I64 && x->ival % m == 0;
    if (x->kind != KE_BINARY || x->type != KT_I64) return false;
    if (x->op == KB_ADD) return aligned_uniform(L, x->a, m, depth + 1) && aligned_uniform(L, x->b, m, depth + 1);
    if (x->op != KB_MUL) return false;
    const KirExpr *a = &L->k->exprs.data[x->a], *b = &L->k->exprs.data[x->b];
    int other = -1;
    if (b->kind == KE_CONST && b->type == KT_I64 && b->ival % m == 0) other = x->a;
    else if (a->kind == KE_CONST && a->type == KT_I64 && a->ival % m == 0) other = x->b;
    if (other < 0) return false;
    /* the other factor: block-uniform (variables declared before the vec loop's) */
    int stack[64], n = 0;
    stack[n++] = other;
    while (n > 0) {
        const KirExpr *y = &L->k->exprs.data[stack[--n]];
        if (y->kind == KE_VAR && y->ref >= L->vec_var) return false;
        if (y->kind != KE_VAR && y->kind != KE_CONST && y->kind != KE_BLOCK_IDX && y->kind != KE_BINARY) return false;
        if (y->kind == KE_BINARY) {
            if (n + 2 > 64) return false;
            stack[n++] = y->a;
            stack[n++] = y->b;
        }
    }
    return true;
}
/* An access of elements of `size` bytes at index e can be a vec access of the loop being
 * built: e is its variable v or add(B, v), B a block-uniform multiple of the width, and the
 * width's bytes are 16, 32 or 64 (one to four 16-byte vectors). */
static bool vec_index(Lower *L, int e, int size) {
    if (L->vec_var < 0 || e < 0 || (L->vec_w * size) % 16 != 0 || L->vec_w * size > 64) return false;
    int v = vref(L, L->vec_var);
    if (e == v) return true;
    const KirExpr *x = &L->k->exprs.data[e];
    if (x->kind != KE_BINARY || x->op != KB_ADD) return false;
    if (x->b == v) return aligned_uniform(L, x->a, L->vec_w, 0);
    if (x->a == v) return aligned_uniform(L, x->b, L->vec_w, 0);
    return false;
}
/* Opens a thread loop, a vec loop of width w when w > 1 (the caller ends it with vec_end). */
static void vec_for(Lower *L, int var, int lo, int hi, int w) {
    if (w > 1) {
        kir_for_vec(L->k, var, lo, hi, w);
        scope_open(L);
        L->vec_var = var;
        L->vec_w = w;
    } else {
        k_for(L, KIR_LOOP_THREADS, var, lo, hi);
    }
}
static void vec_end(Lower *L) {
    k_end(L);
    L->vec_var = -1;
    L->vec_w = 0;
    L->fold_shape = NULL;
    L->fold_rank = 0;
}
/* Records that idx (rank r, the trailing dims of shape s) was delinearized from lin. */
static void fold_set(Lower *L, const IrShape *s, int r, const int *idx, int lin) {
    if (L->opt->cpu) return;
    L->fold_shape = s;
    L->fold_rank = r;
    L->fold_lin = lin;
    memcpy(L->fold_idx, idx, sizeof(int) * (size_t)r);
}

/* In a row kernel: index idx (of a value whose leading dims are the rows') names an element
 * of the block's own row. Only then may a staged or kept row, or a reduction's per-row result,
 * stand for the value: a consumer behind a view (transpose, slice, gather, reshape, concat,
 * broadcast) may ask for another row's element. The test is on the index expressions: each
 * leading index is the row's own variable, or the dim has size 1 (any index in it is 0). A
 * different expression that happens to equal it only costs a reload. */
static bool row_current(Lower *L, const int *idx) {
    for (int d = 0; d < L->row_lead; d++) {
        if (L->row_lead_shape.dims[d] == 1) continue;
        if (idx[d] < 0) return false;
        const KirExpr *x = &L->k->exprs.data[idx[d]];
        if (x->kind != KE_VAR || x->ref != L->row_lead_vars[d]) return false;
    }
    return true;
}

/* Reads this row's element idx of v from the shared array holding the row, with the view (the
 * element's linear index in v) for the verifier. */
static int emit_shared_load(Lower *L, int v, const int *idx) {
    int off = linearize(L, &L->row_red, idx + L->row_lead);
    if (L->fold_shape && L->fold_rank == L->row_red.rank &&
        !memcmp(idx + L->row_lead, L->fold_idx, sizeof(int) * (size_t)L->fold_rank))
        off = L->fold_lin;
    int sh = L->row_shared[v];
    KirType t = L->k->shared.data[sh].type;
    int e = t != KT_BOOL && vec_index(L, off, t == KT_F32 || t == KT_I32 ? 4 : 8) ? kir_shload_vec(L->k, sh, off)
                                                                                   : kir_shload(L->k, sh, off);
    if (e >= 0) kir_set_view(L->k, e, linearize(L, &val(L, v)->shape, idx));
    return e;
}

/* Reads element idx of v from the shared array holding all of v (stage_whole). */
static int emit_whole_load(Lower *L, int v, const int *idx) {
    int off = linearize(L, &val(L, v)->shape, idx);
    int sh = L->whole_shared[v];
    int e = vec_index(L, off, 4) ? kir_shload_vec(L->k, sh, off) : kir_shload(L->k, sh, off);
    if (e >= 0) kir_set_view(L->k, e, off);
    return e;
}

/* The linear index of idx in shape s: the vec loop's own variable again where idx is what
 * delinearizing it gave (see fold_*), else linearize(s, idx). */
static int folded_linear(Lower *L, const IrShape *s, const int *idx) {
    if (!L->fold_shape || !ir_shape_eq(s, L->fold_shape) ||
        memcmp(idx + s->rank - L->fold_rank, L->fold_idx, sizeof(int) * (size_t)L->fold_rank) != 0)
        return linearize(L, s, idx);
    IrShape lead = *s;
    lead.rank = s->rank - L->fold_rank;
    int64_t tn = 1;
    for (int d = lead.rank; d < s->rank; d++) tn *= s->dims[d];
    return ib(L, KB_ADD, ib(L, KB_MUL, linearize(L, &lead, idx), ci(L, tn)), L->fold_lin);
}

/* Loads a value that lives in a buffer (computed by an earlier kernel, or a block input). */
static int emit_load(Lower *L, int v, const int *idx) {
    int buf = L->buf_of_val[v];
    LCHECK(L, buf >= 0);
    int prm = param_for_buf(L, buf, false);
    const IrShape *s = &val(L, v)->shape;
    int lin = folded_linear(L, s, idx);
    int e = prm >= 0 && !L->k->params.data[prm].written && vec_index(L, lin, (int)fc_dtype_size(L->p->buffers.data[buf].dtype))
                ? kir_load_vec(L->k, prm, lin)
                : kir_load(L->k, prm, lin);
    int plain = linearize(L, s, idx);
    if (e >= 0 && plain != lin) kir_set_view(L->k, e, plain);   /* a folded index: the verifier checks it */
    return e;
}

/* Constants and iotas are computed where they are used, in every kernel: never loaded. */
static bool is_generated(const Lower *L, int v) {
    const IrValue *x = val(L, v);
    return x->node >= 0 && ir_ops[L->g->nodes.data[x->node].op].cat == IR_CAT_GENERATOR;
}
static bool in_group(const Lower *L, int v) {
    const IrValue *x = val(L, v);
    return x->node >= 0 && (L->group_of_node[x->node] == L->cur_group || is_generated(L, v));
}

/* dropout_mask at idx: word 0 of Philox-4x32-10 with the element's row-major index as the
 * counter (c2 = c3 = 0) and the seed as the key, >= floor(p * 2^32) (docs/language.md). */
static int emit_dropout_mask(Lower *L, const IrNode *n, const IrShape *s, const int *idx) {
    int r0 = kir_philox(L->k, folded_linear(L, s, idx), ci(L, 0), ci(L, n->a.i[0]));
    return kir_bin(L->k, KB_GE, r0, ci(L, (int64_t)floor(n->a.f * 4294967296.0)));
}

/* scatter_add(src, ids, rows) at idx: row idx[0] of the result walks its list in the index
 * buffer (scatter_index_kernels: count, first position, next position), adding the src rows
 * it names in the ids' order, the same order on every backend and for every element. */
static int emit_scatter_add(Lower *L, const IrNode *n, int v, const int *idx) {
    int nd = (int)(n - L->g->nodes.data), buf = L->scatter_index[nd];
    LCHECK(L, buf >= 0);
    const IrValue *x = val(L, n->in[0]);
    const IrShape *is = &val(L, n->in[1])->shape;
    int64_t rows = n->a.i[0];
    int prm = param_for_buf(L, buf, false);
    KirType at = acc_type(x->dtype);
    int acc = kir_var(L->k, at), j = kir_var(L->k, KT_I64), cnt = kir_var(L->k, KT_I64), k = kir_var(L->k, KT_I64);
    kir_let(L->k, cnt, kir_load(L->k, prm, idx[0]));
    kir_let(L->k, j, kir_load(L->k, prm, ib(L, KB_ADD, ci(L, rows), idx[0])));
    kir_let(L->k, acc, zero_of(L, at));
    int lim = vref(L, cnt), mark = L->hc_keys.len;
    k_for(L, KIR_LOOP_SERIAL, k, ci(L, 0), lim);
    int sidx[IR_MAX_RANK];
    delinearize(L, is, vref(L, j), sidx);
    for (int d = 1; d < val(L, v)->shape.rank; d++) sidx[is->rank + d - 1] = idx[d];
    int xv = kir_cast(L->k, at, emit(L, n->in[0], sidx));
    kir_assign(L->k, acc, kir_bin(L->k, KB_ADD, vref(L, acc), xv));
    kir_assign(L->k, j, kir_load(L->k, prm, ib(L, KB_ADD, ci(L, 2 * rows), vref(L, j))));
    k_end(L);
    hc_trunc(L, mark);
    return kir_cast(L->k, ctype(val(L, v)->dtype), vref(L, acc));
}

/* Whether f8 value q (an fp8_quant's result) stays f32 in the kernels that compute it: in a
 * block that is not trained, without --strict-rounding, a value no kernel stores (no buffer:
 * every kernel that computes it keeps it to itself) is x * s unrounded, as a fused kernel keeps
 * a 16-bit intermediate (the reference's other legal meaning, RT_ROUND_AT_OUTPUTS). Every
 * kernel that computes it computes the same f32 value, and a stored one is rounded everywhere,
 * so no reader mixes the two. A training block rounds them all: its backward recomputes the
 * forward's values in other kernels and programs, and the forward's unrounded values mixed
 * with rounded ones (3 bits: 6 % apart) made examples/keywords.tf's fused step 116 % off. */
static bool fp8_wide(const Lower *L, int q) {
    if (L->opt->train) return false;
    /* --strict-rounding: wide where the eager program keeps it (eager's own kernels: wide where
     * they do not store it) */
    if (L->opt->strict_rounding) return !L->eager_stored[q];
    return L->buf_of_val[q] < 0;
}

/* A wide q the kernel computes (never loaded: it has no buffer) that only fp8_dequants read (not
 * a view of it: a split or a reshape carries q itself) is emitted as x, its amax recorded, and
 * its dequants take it as it is instead of x * s * (1 / s): two multiplies no compiler may
 * fold, which give x back but where x * s leaves f32's normal range. A row a reduction keeps of
 * q (keep_row) holds x as well. */
static bool fp8_inline(const Lower *L, int q) {
    return fp8_wide(L, q) && L->deq_only[q] && in_group(L, q) && !L->force_load[q];
}

/* fp8_quant(x, s) at idx: x * s rounded to the slot's format, saturating, wherever it is computed
 * (as a cast is: every kernel that reads the f8 value or computes it again, a backward's
 * recomputation included, sees the same value; round false: the caller's store rounds it), or
 * unrounded where fp8_wide says so, and |x| into the slot's amax of this run (KS_AMAX, wherever
 * the kernel computes it, stored, rounded or not: the scale follows the tensor in every
 * program). fp8_dequant(q, s): q * (1 / s), exact (of a wide q, x again, unless x * s leaves
 * f32's normal range). s is a scalar: it broadcasts. */
static int emit_fp8(Lower *L, const IrNode *n, const int *idx, bool round) {
    const IrShape *os = &val(L, n->out[0])->shape;
    int ii[IR_MAX_RANK], none[1] = {0};
    bcast_index(L, os, &val(L, n->in[0])->shape, idx, ii);
    int x = emit(L, n->in[0], ii);
    /* q * (1 / s): exact as q / s is (s a power of two), and the reciprocal of the scale, loop
     * invariant, leaves the loop with its load: a multiply an element instead of a divide */
    if (n->op == IR_OP_FP8_DEQUANT) {
        const IrNode *qn = node_of(L, n->in[0]);
        if (qn && qn->op == IR_OP_FP8_QUANT && fp8_inline(L, n->in[0])) return x;   /* q emitted as x */
        return kir_bin(L->k, KB_MUL, x, kir_un(L->k, KU_RECIP, emit(L, n->in[1], none)));
    }
    LCHECK(L, L->state_buf >= 0 && !L->k->in_tail && n->a.i[0] < L->g->fp8.len);
    /* (a store, round false, rounds q itself; a wide q is stored only under --strict-rounding,
     * into an f32 temporary: unrounded, as eager keeps it) */
    bool wide = fp8_wide(L, n->out[0]);
    /* a 16-bit x (a value the graph stores in bf16 or f16 before E4M3) is rounded to its type
     * first, here as in every program: eager's kernel, which computes x and quantizes it in
     * registers, then gives the bits --strict-rounding gives (a wide q keeps x as it is, as
     * the fused kernel keeps x's other readers' x) */
    FcDtype xt = val(L, n->in[0])->dtype;
    if (xt != FC_F32 && !wide) x = kir_round(L->k, xt, x);
    if (!L->g->fp8.data[n->a.i[0]].read_only)
        kir_amax(L->k, param_for_buf(L, L->state_buf, true), ci(L, n->a.i[0] * KIR_FP8_STRIDE + 1), x);
    if (wide && round && fp8_inline(L, n->out[0])) return x;
    int q = kir_bin(L->k, KB_MUL, x, emit(L, n->in[1], none));
    return round && !wide ? kir_round(L->k, val(L, n->out[0])->dtype, q) : q;
}

static int emit_node(Lower *L, const IrNode *n, int v, const int *idx) {
    const IrValue *o = val(L, v);
    KirType t = ctype(o->dtype);
    int ii[IR_MAX_RANK], jj[IR_MAX_RANK];
    switch (ir_ops[n->op].cat) {
    case IR_CAT_UNARY: {
        bcast_index(L, &o->shape, &val(L, n->in[0])->shape, idx, ii);
        return emit_unary(L, n->op, emit(L, n->in[0], ii), t);
    }
    case IR_CAT_BINARY:
    case IR_CAT_COMPARE: {
        if (n->op == IR_OP_FP8_QUANT || n->op == IR_OP_FP8_DEQUANT) return emit_fp8(L, n, idx, true);
        bcast_index(L, &o->shape, &val(L, n->in[0])->shape, idx, ii);
        bcast_index(L, &o->shape, &val(L, n->in[1])->shape, idx, jj);
        int a = emit(L, n->in[0], ii), b = emit(L, n->in[1], jj);
        return emit_binary(L, n->op, a, b);
    }
    case IR_CAT_SELECT: {
        int kk[IR_MAX_RANK];
        bcast_index(L, &o->shape, &val(L, n->in[0])->shape, idx, ii);
        bcast_index(L, &o->shape, &val(L, n->in[1])->shape, idx, jj);
        bcast_index(L, &o->shape, &val(L, n->in[2])->shape, idx, kk);
        if (forced_where(L, n, &o->shape, idx)) return emit(L, n->in[2], kk);
        int c = emit(L, n->in[0], ii), a = emit(L, n->in[1], jj), b = emit(L, n->in[2], kk);
        return kir_select(L->k, c, a, b);
    }
    case IR_CAT_CAST:
        return emit_cast(L, emit(L, n->in[0], idx), val(L, n->in[0])->dtype, o->dtype, n->a.i[0] != 0);
    case IR_CAT_REDUCE:
        return emit_reduce_serial(L, n, v, idx);
    case IR_CAT_GENERATOR:
        if (n->op == IR_OP_FP8_SCALE) {   /* the slot's scale in this run, from the state */
            LCHECK(L, L->state_buf >= 0);
            return kir_load(L->k, param_for_buf(L, L->state_buf, false), ci(L, n->a.i[0] * KIR_FP8_STRIDE));
        }
        if (n->op == IR_OP_DROPOUT_MASK) return emit_dropout_mask(L, n, &o->shape, idx);
        if (n->op == IR_OP_FULL) {
            if (t == KT_F32 || t == KT_F64) return kir_round(L->k, o->dtype, fconst(L, t, n->a.f));
            if (t == KT_BOOL) return kir_const_i(L->k, KT_BOOL, n->a.f != 0);
            return kir_const_i(L->k, t, (int64_t)n->a.f);
        }
        return kir_round(L->k, o->dtype, kir_cast(L->k, t, idx[n->a.i[0]]));
    case IR_CAT_SHAPE: {
        const IrValue *x = val(L, n->in[0]);
        switch (n->op) {
        case IR_OP_RESHAPE:
            reshape_index(L, &o->shape, idx, &x->shape, ii);
            return emit(L, n->in[0], ii);
        case IR_OP_TRANSPOSE:
            for (int d = 0; d < o->shape.rank; d++) ii[n->a.list[d]] = idx[d];
            return emit(L, n->in[0], ii);
        case IR_OP_BROADCAST:
            bcast_index(L, &o->shape, &x->shape, idx, ii);
            return emit(L, n->in[0], ii);
        case IR_OP_SLICE:
            memcpy(ii, idx, sizeof(int) * (size_t)o->shape.rank);
            ii[n->a.i[0]] = ib(L, KB_ADD, ci(L, n->a.i[1]), ib(L, KB_MUL, idx[n->a.i[0]], ci(L, n->a.i[3])));
            return emit(L, n->in[0], ii);
        case IR_OP_CONCAT: {
            int ax = (int)n->a.i[0];
            int64_t off[4096 + 1];
            LCHECK(L, n->nin <= 4096);
            off[0] = 0;
            for (int p = 0; p < n->nin; p++) off[p + 1] = off[p] + val(L, n->in[p])->shape.dims[ax];
            int res = -1;
            for (int p = n->nin - 1; p >= 0; p--) {
                int64_t size = val(L, n->in[p])->shape.dims[ax];
                memcpy(ii, idx, sizeof(int) * (size_t)o->shape.rank);
                int local = ib(L, KB_SUB, idx[ax], ci(L, off[p]));
                ii[ax] = ib(L, KB_MIN, ib(L, KB_MAX, local, ci(L, 0)), ci(L, size - 1));
                int pv = emit(L, n->in[p], ii);
                res = res < 0 ? pv : kir_select(L->k, ib(L, KB_LT, idx[ax], ci(L, off[p + 1])), pv, res);
            }
            return res;
        }
        default: break;
        }
        break;
    }
    case IR_CAT_GATHER: {
        const IrValue *tab = val(L, n->in[0]), *ids = val(L, n->in[1]);
        int id = kir_cast(L->k, KT_I64, emit(L, n->in[1], idx));
        int64_t rows = tab->shape.dims[0];
        check_id(L, id, rows);
        ii[0] = kir_bin(L->k, KB_MIN, kir_bin(L->k, KB_MAX, id, ci(L, 0)), ci(L, rows - 1));
        for (int d = 1; d < tab->shape.rank; d++) ii[d] = idx[ids->shape.rank + d - 1];
        return emit(L, n->in[0], ii);
    }
    case IR_CAT_SCATTER: return emit_scatter_add(L, n, v, idx);
    default: break;
    }
    fail_internal(L, "op cannot be computed inline in this kernel kind", __LINE__);
    return -1;
}

/* Whether a node of the current kernel's group reads v. */
static bool read_in_group(Lower *L, int v) {
    for (int i = 0; i < L->g->nodes.len; i++) {
        const IrNode *n = &L->g->nodes.data[i];
        if (L->group_of_node[i] != L->cur_group) continue;
        for (int j = 0; j < n->nin; j++)
            if (n->in[j] == v) return true;
    }
    return false;
}

/* Whether v is rounded where it is computed: a 16-bit value this kernel also stores and reads
 * itself. round_stored rounds e, v computed in f32, to v's type then, so that the kernel's own
 * readers see the bits every later kernel reads from memory. Otherwise a backward recomputing
 * from a saved value departs from the forward that saved it (a recip saved in f16 but read
 * unrounded by the forward's tanh; the backward's recomputed tanh then missed the forward's
 * max, whose gradient went to no element: difftest seed 20261126 graph 264). Values the kernel
 * keeps to itself stay f32; f8 values are rounded wherever computed (emit_fp8).
 * --strict-rounding rounds, wherever it is computed, every 16- or 8-bit value the eager program
 * stores (eager_stored) and nothing else: eager runs each source op as a kernel of its own,
 * which keeps the op's own intermediates (a composite's steps, a backward rule's) in f32 and
 * rounds what it writes, so the fused program then computes eager's bits. (Rounding after every
 * elementwise op instead, as it did before 2026-11-28, differed from eager wherever one source
 * op is several: silu's backward rule, a norm: 11 of 60 random graphs at bf16, difftest
 * --strict.) */
static bool narrow_float(FcDtype t) { return t == FC_BF16 || t == FC_F16 || t == FC_F8E4M3 || t == FC_F8E5M2; }
static bool rounds_stored(Lower *L, int v) {
    FcDtype t = val(L, v)->dtype;
    if (L->opt->strict_rounding)   /* (an fp8_quant rounds itself: emit_fp8) */
        return narrow_float(t) && L->eager_stored[v] && !(val(L, v)->node >= 0 && node_of(L, v)->op == IR_OP_FP8_QUANT);
    return (t == FC_BF16 || t == FC_F16) && L->buf_of_val[v] >= 0 && read_in_group(L, v);
}
static int round_stored(Lower *L, int v, int e) {
    return e >= 0 && rounds_stored(L, v) ? kir_round(L->k, val(L, v)->dtype, e) : e;
}

static int emit(Lower *L, int v, const int *idx) {
    if (failed(L)) return -1;
    if (L->bound[v] >= 0) {
        /* a reduction's result in a row kernel is this row's: fusion lets only elementwise ops
         * read it, so it is never asked for at another row; check rather than miscompile */
        LCHECK(L, !L->in_rows || row_current(L, idx));
        return L->bound[v];
    }
    int rank = val(L, v)->shape.rank;
    int e = memo_find(L, v, rank, idx);
    if (e >= 0) return e;
    if (L->row_shared[v] >= 0 && row_current(L, idx) && !(L->fcol >= 0 && in_group(L, v))) e = emit_shared_load(L, v, idx);
    else if (L->whole_shared[v] >= 0) e = emit_whole_load(L, v, idx);
    else if (!in_group(L, v) || L->force_load[v]) e = emit_load(L, v, idx);
    else e = round_stored(L, v, emit_node(L, node_of(L, v), v, idx));   /* kept rows are recomputed at another row */
    if (v == L->plant && e >= 0) e = kir_bin(L->k, KB_MUL, e, kir_const_f(L->k, ctype(val(L, v)->dtype), 1.0625));
    return memo_put(L, v, rank, idx, e);
}

/* ---- kernels ------------------------------------------------------------------------------------ */
static void kernel_begin(Lower *L, int group, const char *kind, int64_t grid, int block) {
    char name[96];
    snprintf(name, sizeof name, "k%d_%s", L->p->kernels.len,
             group >= 0 ? ir_ops[L->group_origin_op[group]].name : "copy");
    L->k = kir_kernel_new(L->p, name, grid, block);
    if (!L->k) { fail_oom(L); return; }
    L->k->kind = kind;
    L->cur_group = group;
    for (int b = 0; b < L->p->buffers.len; b++) L->param_of_buf[b] = -1;
    for (int v = 0; v < L->g->values.len; v++) L->bound[v] = L->row_shared[v] = L->whole_shared[v] = -1;
    L->memo.len = 0;
    L->depth = 0;
    L->vec_var = -1;
    L->vec_w = 0;
    L->fold_shape = NULL;
    L->fold_rank = 0;
    L->in_rows = false;
    L->row_lead = 0;
    L->fcol = -1;
    L->mask_shape = NULL;
    L->kept_var = -1;
    hc_reset(L);
}

/* Whether expression e, or one under it, loads param prm. */
static bool expr_loads(const KirKernel *k, int e, int prm, int depth) {
    if (e < 0 || e >= k->exprs.len || depth > 200) return false;
    const KirExpr *x = &k->exprs.data[e];
    if (x->kind == KE_LOAD && x->ref == prm) return true;
    return expr_loads(k, x->a, prm, depth + 1) || expr_loads(k, x->b, prm, depth + 1) ||
           expr_loads(k, x->c, prm, depth + 1);
}
/* Whether statement list s loads param prm outside the loops that end at variable kept (a
 * causal row kernel's columns before its masks). */
static bool loads_past(const KirKernel *k, int s, int prm, int kept, bool inside) {
    for (; s >= 0 && s < k->stmts.len; s = k->stmts.data[s].next) {
        const KirStmt *st = &k->stmts.data[s];
        bool loop = st->kind == KS_REDUCE || st->kind == KS_FOR;
        const KirExpr *hi = loop && st->b >= 0 && st->b < k->exprs.len ? &k->exprs.data[st->b] : NULL;
        bool in = inside || (hi && hi->kind == KE_VAR && hi->ref == kept);   /* the loop's body and value */
        if ((!inside && (expr_loads(k, st->a, prm, 0) || expr_loads(k, st->b, prm, 0))) ||
            (!in && expr_loads(k, st->c, prm, 0)) || loads_past(k, st->body, prm, kept, in) ||
            loads_past(k, st->body2, prm, kept, in))
            return true;
    }
    return false;
}

/* Adds the launch of L->k with its buffers, the cost, and checks the kernel. */
static void kernel_end(Lower *L, const char *ops) {
    if (failed(L)) return;
    KirKernel *k = L->k;
    if (!kir_kernel_ok(k)) { fail_oom(L); return; }
    k->ops = arena_strdup(&L->p->arena, ops);
    KirLaunch la = {.kernel = L->p->kernels.len - 1, .nargs = k->params.len};
    la.args = arena_alloc(&L->p->arena, sizeof(int) * (size_t)(k->params.len ? k->params.len : 1));
    if (!k->ops || !la.args) { fail_oom(L); return; }
    for (int b = 0; b < L->p->buffers.len; b++) {
        int prm = L->param_of_buf[b];
        if (prm < 0) continue;
        la.args[prm] = b;
        if (L->p->buffers.data[b].kind == KIR_BUF_STATE) continue;   /* a scale and an amax: not modelled */
        int64_t bytes = L->p->buffers.data[b].numel * (int64_t)fc_dtype_size(L->p->buffers.data[b].dtype);
        /* a causal row kernel reads a row-shaped value read only before the masks in part */
        if (L->kept_var >= 0 && !k->params.data[prm].written && k->params.data[prm].numel == L->mask_numel &&
            !loads_past(k, k->body, prm, L->kept_var, false) && !loads_past(k, k->tail, prm, L->kept_var, false))
            bytes = L->kept_elems * (int64_t)fc_dtype_size(L->p->buffers.data[b].dtype);
        if (k->params.data[prm].written) k->bytes_written += bytes;
        else k->bytes_read += bytes;
    }
    if (!FC_VEC_PUSH(&L->p->launches, la)) { fail_oom(L); return; }
    if (launch_streams(L->opt, k)) {
        bool *heavy = fc_calloc((size_t)k->params.len + 1, sizeof(bool));
        LoopScan ls = {fc_calloc((size_t)k->vars.len + 1, sizeof(bool)), fc_calloc((size_t)k->exprs.len + 1, 1),
                       fc_calloc((size_t)k->exprs.len + 1, 1)};
        if (!heavy || !ls.set || !ls.varies || !ls.trans) {
            fc_free(heavy); fc_free(ls.set); fc_free(ls.varies); fc_free(ls.trans);
            fail_oom(L);
            return;
        }
        transcendental_stores(k, heavy, &ls);
        int lanes = (L->opt->host.vector_bytes > 0 ? L->opt->host.vector_bytes : 16) / 4;   /* f32 lanes */
        for (int prm = 0; prm < k->params.len; prm++)
            k->params.data[prm].stream = k->params.data[prm].written &&
                                         (!heavy[prm] || lanes * (int)fc_dtype_size(k->params.data[prm].dtype) >= 64);
        fc_free(heavy);
        fc_free(ls.set);
        fc_free(ls.varies);
        fc_free(ls.trans);
        for (int e = 0; e < k->exprs.len; e++)   /* read as well as written: not stream */
            if (k->exprs.data[e].kind == KE_LOAD && k->exprs.data[e].ref >= 0 && k->exprs.data[e].ref < k->params.len)
                k->params.data[k->exprs.data[e].ref].stream = false;
    }
    FcErr e2 = {0};
    FcStatus vs = kir_verify(k, &e2);
    if (vs == FC_ERR_NOMEM) L->st = fc_err_set(L->err, FC_ERR_NOMEM, "%s", e2.msg);
    else if (vs != FC_OK) L->st = fc_err_set(L->err, FC_ERR_INTERNAL, "internal error: kernel %s: %s", k->name, e2.msg);
}

/* The group's outputs: values produced in it that another group or the block reads. */
static int group_outputs(Lower *L, int group, int *outs, int cap) {
    int n = 0;
    for (int i = 0; i < L->g->nodes.len; i++) {
        if (L->group_of_node[i] != group) continue;
        const IrNode *nd = &L->g->nodes.data[i];
        for (int r = 0; r < nd->nout; r++)
            if (L->used_outside[nd->out[r]] && n < cap) outs[n++] = nd->out[r];
    }
    return n;
}

static int64_t numel_of(const Lower *L, int v) {
    int64_t n = 1;
    ir_shape_numel(&val(L, v)->shape, &n);
    return n;
}

/* Stores value v at linear index lin of its buffer (computed at multi-index idx). */
static void store_value(Lower *L, int v, int lin, const int *idx) {
    /* v = cast(x) to the buffer's own narrow float type, x computed in f32: store x, which the
     * store converts to that type exactly as the cast would round it (to nearest even), rather
     * than round it, widen it and convert it again (pass_precision puts such a cast at every
     * lowered kernel output) */
    int src = v, e = -1;
    FcDtype bt = L->p->buffers.data[L->buf_of_val[v]].dtype;   /* v's, or f32 (--strict-rounding) */
    if (in_group(L, v) && !L->force_load[v] && L->bound[v] < 0 && L->row_shared[v] < 0) {
        const IrNode *n = node_of(L, v);
        FcDtype to = val(L, v)->dtype;
        if (n->op == IR_OP_CAST && to == bt && to != FC_F32 && to != FC_F64 && ir_dtype_is_float(to) &&
            ctype(val(L, n->in[0])->dtype) == KT_F32 && ir_dtype_is_float(val(L, n->in[0])->dtype))
            src = n->in[0];
        /* likewise an f8 value: the store rounds x * s as the quant would (one conversion to
         * E4M3, not a rounding and then the store's) */
        if (n->op == IR_OP_FP8_QUANT) e = emit_fp8(L, n, idx, false);
    }
    if (e < 0) e = emit(L, src, idx);
    int prm = param_for_buf(L, L->buf_of_val[v], true);
    if (vec_index(L, lin, (int)fc_dtype_size(bt))) kir_store_vec(L->k, prm, lin, e);
    else kir_store(L->k, prm, lin, e);
}

/* Opens the row loops of a CPU row schedule over values of shapes S[0..ns) ([.., C], their
 * leading dims the rows; all of the same C and the same number of rows, so element r * C + c is
 * the same in each): block b takes rows [b * rpb, (b + 1) * rpb), a serial loop walks them (each
 * shape's leading indices computed once a row) and a thread loop (a vector loop on the CPU) its
 * C columns. Sets idx[s] to the element's multi-index in S[s] and *lin to its linear index
 * r * C + c; the caller closes both loops (k_end twice). */
static void rows_loop(Lower *L, const IrShape *const *S, int ns, int64_t rpb, int (*idx)[IR_MAX_RANK], int *lin) {
    int64_t C = S[0]->dims[S[0]->rank - 1], R = 1;
    for (int d = 0; d < S[0]->rank - 1; d++) R *= S[0]->dims[d];
    int r0 = kir_var(L->k, KT_I64), r1 = kir_var(L->k, KT_I64), r = kir_var(L->k, KT_I64), c = kir_var(L->k, KT_I64);
    kir_let(L->k, r0, kir_bin(L->k, KB_MIN, ib(L, KB_MUL, kir_block_idx(L->k), ci(L, rpb)), ci(L, R)));
    kir_let(L->k, r1, kir_bin(L->k, KB_MIN, ib(L, KB_ADD, vref(L, r0), ci(L, rpb)), ci(L, R)));
    k_for(L, KIR_LOOP_SERIAL, r, vref(L, r0), vref(L, r1));
    int lvars[64][IR_MAX_RANK];
    for (int s = 0; s < ns && s < 64; s++) {
        IrShape lead = *S[s];
        lead.rank--;
        int lidx[IR_MAX_RANK];
        delinearize(L, &lead, vref(L, r), lidx);
        for (int d = 0; d < lead.rank; d++) {
            lvars[s][d] = kir_var(L->k, KT_I64);
            kir_let(L->k, lvars[s][d], lidx[d]);
        }
    }
    int rowbase = kir_var(L->k, KT_I64);
    kir_let(L->k, rowbase, ib(L, KB_MUL, vref(L, r), ci(L, C)));
    k_for(L, KIR_LOOP_THREADS, c, ci(L, 0), ci(L, C));
    for (int s = 0; s < ns && s < 64; s++) {
        for (int d = 0; d < S[s]->rank - 1; d++) idx[s][d] = vref(L, lvars[s][d]);
        idx[s][S[s]->rank - 1] = vref(L, c);
    }
    *lin = ib(L, KB_ADD, vref(L, rowbase), vref(L, c));
}

/* pointwise: outputs grouped by element count, a thread loop per count. */
/* The CPU-shaped pointwise schedule: outputs are grouped by their rows, the same last dim C and
 * element count (one shape, or reshapes of it that keep C: a [B, T, C] value and its [B * T, C]
 * view for a product); for each group a block takes a range of rows, a serial loop walks them
 * and a thread loop (a vector loop on the CPU) walks the last dim, so operands broadcast along
 * the rows (a bias [C]) are read at the column index without per-element division, and what the
 * group's outputs share is computed once an element (a loop per shape computed the backward
 * GELU of a 16-bit MLP twice, for its bf16 [B * T, 4C] and its f32 [B, T, 4C]). Returns false
 * (nothing emitted) when some output has rank < 2 or short rows. */
static bool schedule_pointwise_rows(Lower *L, int group, const int *outs, int nouts, const char *kind) {
    int64_t grid = 1;
    for (int i = 0; i < nouts; i++) {
        const IrShape *S = &val(L, outs[i])->shape;
        if (S->rank < 2 || S->dims[S->rank - 1] < 16) return false;
        int64_t C = S->dims[S->rank - 1], R = numel_of(L, outs[i]) / C;
        int64_t rpb = L->pw_rows > 0 ? L->pw_rows : pw_chunk(L->opt) / C > 1 ? pw_chunk(L->opt) / C : 1;
        if ((R + rpb - 1) / rpb > grid) grid = (R + rpb - 1) / rpb;
    }
    kernel_begin(L, group, kind, grid, PW_BLOCK);
    if (failed(L)) return true;
    bool done[64] = {0};
    for (int i = 0; i < nouts && !failed(L); i++) {
        if (done[i]) continue;
        const IrShape *S = &val(L, outs[i])->shape;
        int64_t C = S->dims[S->rank - 1], n = numel_of(L, outs[i]);
        int64_t rpb = L->pw_rows > 0 ? L->pw_rows : pw_chunk(L->opt) / C > 1 ? pw_chunk(L->opt) / C : 1;
        const IrShape *shapes[64];
        int of[64], ns = 0;   /* output j of the group: its shape among shapes[]; -1 not of it */
        for (int j = i; j < nouts; j++) {
            const IrShape *Sj = &val(L, outs[j])->shape;
            of[j] = -1;
            if (done[j] || Sj->dims[Sj->rank - 1] != C || numel_of(L, outs[j]) != n) continue;
            done[j] = true;
            for (int t = 0; t < ns && of[j] < 0; t++)
                if (ir_shape_eq(shapes[t], Sj)) of[j] = t;
            if (of[j] < 0) { of[j] = ns; shapes[ns++] = Sj; }
        }
        int idx[64][IR_MAX_RANK], lin;
        rows_loop(L, shapes, ns, rpb, idx, &lin);
        for (int j = i; j < nouts; j++)
            if (of[j] >= 0) store_value(L, outs[j], lin, idx[of[j]]);
        k_end(L);
        k_end(L);
        hc_reset(L);
    }
    return true;
}

/* The vec width of a GPU thread loop over n elements that stores outputs outs[] of n
 * elements: 16 bytes of the narrowest of those outputs and of the group's inputs of n
 * elements (the operands that can be read at the loop's index); 0 on the CPU. */
static int vec_width(Lower *L, int group, const int *outs, int nouts, int64_t n) {
    if (L->opt->cpu) return 0;
    int minsize = 16;
    for (int i = 0; i < nouts; i++)
        if (numel_of(L, outs[i]) == n && (int)fc_dtype_size(val(L, outs[i])->dtype) < minsize)
            minsize = (int)fc_dtype_size(val(L, outs[i])->dtype);
    for (int i = 0; i < L->g->nodes.len; i++) {
        if (L->group_of_node[i] != group) continue;
        const IrNode *nd = &L->g->nodes.data[i];
        for (int j = 0; j < nd->nin; j++) {
            int u = nd->in[j];
            if ((in_group(L, u) && !L->force_load[u]) || L->buf_of_val[u] < 0 || numel_of(L, u) != n) continue;
            if ((int)fc_dtype_size(val(L, u)->dtype) < minsize) minsize = (int)fc_dtype_size(val(L, u)->dtype);
        }
    }
    return 16 / minsize >= 2 ? 16 / minsize : 0;
}

static void schedule_pointwise(Lower *L, int group, const int *outs, int nouts, const char *kind) {
    if (L->opt->cpu && schedule_pointwise_rows(L, group, outs, nouts, kind)) return;
    int64_t maxn = 1;
    for (int i = 0; i < nouts; i++)
        if (numel_of(L, outs[i]) > maxn) maxn = numel_of(L, outs[i]);
    int64_t chunk = pw_chunk(L->opt);
    /* GPU: a block covers W elements a thread, W the group's vec width (16 bytes of its
     * narrowest operand): at 4 (f32) 1024 elements; at bf16 (8) 2048 and at f8 (16) 4096, so
     * that every thread of the block has its 16 bytes (with 1024 only half or a quarter did,
     * halving the bytes in flight: 83 % of the H100's copy bandwidth at bf16 against 92 % at
     * f32, 10 % at f8) */
    int wmax = L->opt->cpu ? 0 : vec_width(L, group, outs, nouts, maxn);
    if (wmax > 4 && chunk % ((int64_t)PW_BLOCK * wmax) != 0) chunk = (int64_t)PW_BLOCK * wmax;
    int64_t grid = (maxn + chunk - 1) / chunk;
    int block = maxn < PW_BLOCK ? (int)((maxn + 31) / 32 * 32) : PW_BLOCK;
    kernel_begin(L, group, kind, grid, block);
    if (failed(L)) return;
    bool done[64] = {0};
    for (int i = 0; i < nouts && !failed(L); i++) {
        if (done[i]) continue;
        int64_t n = numel_of(L, outs[i]);
        int lo, hi;
        block_range(L, chunk, n, &lo, &hi);
        int it = kir_var(L->k, KT_I64);
        /* GPU: W consecutive elements a thread (chunk starts are multiples of W) */
        int w = chunk % 16 == 0 ? vec_width(L, group, outs, nouts, n) : 0;
        vec_for(L, it, vref(L, lo), vref(L, hi), w);
        for (int j = i; j < nouts; j++) {
            if (done[j] || numel_of(L, outs[j]) != n) continue;
            done[j] = true;
            int idx[IR_MAX_RANK];
            int lin = vref(L, it);
            const IrShape *os = &val(L, outs[j])->shape;
            delinearize(L, os, lin, idx);
            fold_set(L, os, os->rank, idx, lin);
            store_value(L, outs[j], lin, idx);
        }
        vec_end(L);
        hc_reset(L);
    }
}

/* Row reduction: see the file comment for when it applies. Returns false if it does not.
 * X: the input of the group's reduction with the most elements (the first of those). Sets
 * L->tail_node for the group's nodes: a reduction over every axis of a per-row value computed
 * in the group (R elements, another shape than X), and what is computed from such results,
 * run once after every row (KirKernel.tail; fuse.c allows them only as scalars nothing
 * per-row reads). */
static bool row_shape(Lower *L, int group, const int *outs, int nouts, IrShape *X, int *nred) {
    int first = -1;
    int64_t best = -1;
    for (int i = 0; i < L->g->nodes.len; i++) {
        L->tail_node[i] = false;
        if (L->group_of_node[i] != group) continue;
        const IrNode *n = &L->g->nodes.data[i];
        if (ir_ops[n->op].cat == IR_CAT_MATMUL) return false;
        if (ir_ops[n->op].cat != IR_CAT_REDUCE) continue;
        int64_t xn = numel_of(L, n->in[0]);
        if (xn > best) { best = xn; first = i; }
    }
    if (first < 0) return false;
    const IrNode *r0 = &L->g->nodes.data[first];
    *X = val(L, r0->in[0])->shape;
    *nred = r0->a.nlist;
    int64_t xn = 1, rn = 1;
    ir_shape_numel(X, &xn);
    for (int d = 0; d < X->rank - *nred; d++) rn *= X->dims[d];
    for (int i = 0; i < L->g->nodes.len; i++) {
        if (L->group_of_node[i] != group) continue;
        const IrNode *n = &L->g->nodes.data[i];
        bool tail = false;
        for (int j = 0; j < n->nin; j++) {
            const IrValue *u = val(L, n->in[j]);
            tail |= u->node >= 0 && L->group_of_node[u->node] == group && L->tail_node[u->node];
        }
        if (ir_ops[n->op].cat == IR_CAT_REDUCE && !tail) {
            const IrValue *u = val(L, n->in[0]);
            if (!ir_shape_eq(&u->shape, X)) {
                if (numel_of(L, n->in[0]) != rn || n->a.nlist != u->shape.rank || u->node < 0 ||
                    L->group_of_node[u->node] != group)
                    return false;
                tail = true;
            } else {
                if (n->a.nlist != *nred) return false;
                for (int j = 0; j < n->a.nlist; j++)
                    if (n->a.list[j] != X->rank - n->a.nlist + j) return false;
            }
        }
        L->tail_node[i] = tail;
    }
    for (int i = 0; i < nouts; i++) {
        const IrValue *o = val(L, outs[i]);
        if (L->tail_node[o->node]) continue;
        int64_t n = numel_of(L, outs[i]);
        if (n != xn && n != rn) return false;
        if (n == xn && !ir_shape_eq(&o->shape, X)) return false;
    }
    return true;
}

/* On a GPU, a row kernel reads its X-shaped inputs once from memory into shared arrays
 * (when they fit the shared-memory budget) and every pass over the row (each reduction, the
 * final writes) reads them there: one pass over memory. Only inputs that every reader in the
 * group reads at the element's own index (elementwise of shape X, or the reductions) are
 * staged. The CPU keeps the row in its caches instead. */
/* Whether every reader of v in the group reads it at the element's own index of the row
 * (elementwise ops of shape X, or the reductions): then a row of v kept in shared memory can
 * serve them all. *read: some reader other than node `skip` exists. */
static bool row_local_readers(const Lower *L, int group, int v, const IrShape *X, int skip, bool *read) {
    const IrGraph *g = L->g;
    *read = false;
    for (int i = 0; i < g->nodes.len; i++) {
        if (L->group_of_node[i] != group) continue;
        const IrNode *n = &g->nodes.data[i];
        for (int j = 0; j < n->nin; j++) {
            if (n->in[j] != v) continue;
            if (i != skip) *read = true;
            IrCategory c = ir_ops[n->op].cat;
            bool ew = ir_op_elementwise(n->op);
            if (!(c == IR_CAT_REDUCE || (ew && ir_shape_eq(&val(L, n->out[0])->shape, X)))) return false;
        }
    }
    return true;
}

/* Bytes of the shared arrays kernel k has so far. */
static int64_t shared_used(const KirKernel *k) {
    int64_t b = 0;
    for (int i = 0; i < k->shared.len; i++)
        b += k->shared.data[i].count * (k->shared.data[i].type == KT_F64 || k->shared.data[i].type == KT_I64 ? 8 : 4);
    return b;
}

/* A transcendental computed in a reduction's body and read again by the outputs (softmax's
 * exp(x - max): summed, then divided by the sum) is kept: the reduction stores the row of it
 * in a shared array (a stack array on the CPU, in L1 or L2) and the later passes read it back
 * instead of computing it again. Returns the array, or -1 (not worth it, or over budget:
 * GPU, the row staging budget with what is staged already; CPU, a quarter of L2). */
/* An f8 value the kernel computes (fp8_quant q, in the group, row-shaped, read only elementwise
 * in the row) under the dequant u, or -1. */
static int quant_under(Lower *L, int group, int u, const IrShape *X) {
    const IrNode *d = in_group(L, u) && !L->force_load[u] ? node_of(L, u) : NULL;
    if (!d || d->op != IR_OP_FP8_DEQUANT || L->row_shared[u] >= 0) return -1;
    int q = d->in[0];
    const IrNode *qn = in_group(L, q) && !L->force_load[q] ? node_of(L, q) : NULL;
    bool read = false;
    if (!qn || qn->op != IR_OP_FP8_QUANT || L->row_shared[q] >= 0 || !ir_shape_eq(&val(L, q)->shape, X) ||
        !ir_shape_eq(&val(L, u)->shape, X) || !row_local_readers(L, group, q, X, -1, &read) ||
        !row_local_readers(L, group, u, X, -1, &read))
        return -1;
    return q;
}

/* Whether reduction `node`'s operand v (of KIR type t) is worth keeping (above): *kv the value
 * whose row is kept (v, or the quant under it), *also a second value the same row holds. No
 * budget here (keep_row's). */
static bool keep_choice(Lower *L, int group, int node, int v, const IrShape *X, KirType t, int *also, int *kv) {
    *also = -1;
    *kv = v;
    if (!in_group(L, v) || is_generated(L, v) || L->row_shared[v] >= 0 || !ir_shape_eq(&val(L, v)->shape, X)) return false;
    const IrNode *p = node_of(L, v);
    if (!p) return false;
    switch (p->op) {
    case IR_OP_EXP: case IR_OP_LOG: case IR_OP_TANH: case IR_OP_SIGMOID: case IR_OP_SILU: case IR_OP_ERF:
    case IR_OP_NDTR: case IR_OP_SIN: case IR_OP_COS: case IR_OP_POW: break;
    case IR_OP_CAST: {
        /* the widening of a 16-bit value the kernel stores and reads (rounds_stored: rounded
         * where computed: the residual sum a layernorm normalizes): kept with its rounding
         * done once, the value itself read back from the row too (exact: f32 holds it) */
        int u = p->in[0], q = -1;
        if (val(L, v)->dtype == FC_F32 && in_group(L, u) && !L->force_load[u] && L->row_shared[u] < 0 &&
            ir_shape_eq(&val(L, u)->shape, X) && rounds_stored(L, u)) {
            *also = u;
            break;
        }
        /* the widening of a dequantized f8 value the kernel computes (--precision f8: the
         * residual sum a layernorm normalizes is an fp8_quant): its quant q is kept, the value
         * x * s rounded to E4M3 with x's amax recorded (x itself where q is kept wide,
         * fp8_inline), once instead of at every pass over the row (and at the store of q); the
         * dequant, a multiply (none for a wide q), is done again from the row */
        if (val(L, v)->dtype == FC_F32 && (q = quant_under(L, group, u, X)) >= 0) {
            *kv = q;
            break;
        }
        return false;
    }
    case IR_OP_FP8_DEQUANT: {   /* a dequant to f32 itself: as above */
        int q = quant_under(L, group, v, X);
        if (q < 0) return false;
        *kv = q;
        break;
    }
    default: return false;
    }
    bool read = false;
    return row_local_readers(L, group, v, X, node, &read) && read && t != KT_BOOL;
}

static int keep_row(Lower *L, int group, int node, int v, const IrShape *X, int64_t N, KirType t, int *also, int *kv) {
    if (!keep_choice(L, group, node, v, X, t, also, kv)) return -1;
    int64_t bytes = N * (t == KT_F64 || t == KT_I64 ? 8 : 4);
    int64_t budget = L->opt->cpu ? host_l2(L->opt) / 4 : row_smem_budget(L->opt) - shared_used(L->k);
    if (bytes > budget) return -1;
    int sh = kir_shared(L->k, t, N);
    if (sh >= 0) kir_shared_base(L->k, sh, ib(L, KB_MUL, vref(L, L->row_var), ci(L, N)));
    return sh;
}

/* Whether a pass computing root reads v (read_by_passes): the values under root, through the
 * group's nodes, short of what stop[] marks (seen[] == gen: already pushed, each value once). */
static bool pass_reaches(Lower *L, int root, int v, const bool *stop, int *seen, int gen, int *stack) {
    int sp = 0;
    seen[root] = gen;
    stack[sp++] = root;
    while (sp > 0) {
        int w = stack[--sp];
        if (w == v) return true;
        if (stop[w] || !in_group(L, w) || L->force_load[w] || is_generated(L, w)) continue;
        const IrNode *n = node_of(L, w);
        for (int j = 0; n && j < n->nin; j++)
            if (seen[n->in[j]] != gen) {
                seen[n->in[j]] = gen;
                stack[sp++] = n->in[j];
            }
    }
    return false;
}

/* Whether the passes of group's row kernel read the block input v more than once: one pass per
 * reduction (its operand), then the loop over the row's outputs, then the per-row results'. A
 * pass computes what it needs from the inputs up, stopping at the results of earlier
 * reductions and at the rows they keep (keep_choice: the residual sum a layernorm normalizes
 * is read back from its row, not added again from x and y). An estimate for staging on the
 * CPU (stage_rows): reading an input once, the pass converts it once either way, and the
 * staged copy would only add a store and a load. */
static bool read_by_passes(Lower *L, int group, int v, const IrShape *X, int64_t N) {
    const IrGraph *g = L->g;
    int nv = g->values.len, passes = 0;
    bool *stop = fc_calloc((size_t)nv + 1, sizeof(bool));
    int *seen = fc_calloc((size_t)nv + 1, sizeof(int)), *stack = fc_calloc((size_t)nv + 1, sizeof(int));
    if (!stop || !seen || !stack) { fc_free(stop); fc_free(seen); fc_free(stack); return true; }
    int gen = 0;
    for (int i = 0; i < g->nodes.len; i++) {
        if (L->group_of_node[i] != group) continue;
        const IrNode *n = &g->nodes.data[i];
        if (ir_ops[n->op].cat != IR_CAT_REDUCE || L->tail_node[i]) continue;
        passes += pass_reaches(L, n->in[0], v, stop, seen, ++gen, stack);
        int also, kv;
        if (keep_choice(L, group, i, n->in[0], X, ctype(val(L, n->in[0])->dtype), &also, &kv) &&
            N * 4 <= host_l2(L->opt) / 4) {
            stop[kv] = true;
            if (also >= 0) stop[also] = true;
        }
        stop[n->out[0]] = true;
    }
    /* the outputs' loops: those of shape X, then the others (per-row results, tail operands) */
    for (int full = 1; full >= 0; full--) {
        bool hit = false;
        gen++;
        for (int i = 0; i < g->nodes.len && !hit; i++) {
            if (L->group_of_node[i] != group) continue;
            const IrNode *n = &g->nodes.data[i];
            for (int r = 0; r < n->nout && !hit; r++) {
                int o = n->out[r];
                bool tail_op = L->tail_node[i] && ir_ops[n->op].cat == IR_CAT_REDUCE;
                bool read_out = L->used_outside[o] || tail_op;
                if (!read_out || (ir_shape_eq(&val(L, tail_op ? n->in[0] : o)->shape, X) && !tail_op) != full) continue;
                hit = pass_reaches(L, tail_op ? n->in[0] : o, v, stop, seen, gen, stack);
            }
        }
        passes += hit;
    }
    fc_free(stop); fc_free(seen); fc_free(stack);
    return passes > 1;
}

/* Whether every reader of v in the group is elementwise of shape X (so reads v at the row's own
 * positions), or a cast of v's own shape (a layernorm widening its weight) whose readers are. */
static bool read_rowwise(const Lower *L, int group, int v, const IrShape *X, int depth, bool *read) {
    const IrGraph *g = L->g;
    for (int i = 0; i < g->nodes.len; i++) {
        if (L->group_of_node[i] != group) continue;
        const IrNode *n = &g->nodes.data[i];
        IrCategory c = ir_ops[n->op].cat;
        bool ew = ir_op_elementwise(n->op);
        for (int j = 0; j < n->nin; j++) {
            if (n->in[j] != v) continue;
            *read = true;
            if (ew && ir_shape_eq(&val(L, n->out[0])->shape, X)) continue;
            if (!(c == IR_CAT_CAST && depth < 4 && ir_shape_eq(&val(L, n->out[0])->shape, &val(L, v)->shape) &&
                  read_rowwise(L, group, n->out[0], X, depth + 1, read)))
                return false;
        }
    }
    return true;
}

/* The CPU: a 16- or 8-bit input that every row reads whole, at the row's own positions (a
 * layernorm's weight and bias, a bias: [C] broadcast over the rows [R, C]), is staged widened
 * before the first row, into an array based at 0: nothing of it depends on the row, so the CPU
 * backend runs that loop once per chunk of rows, not per row (codegen/llvm.c, invariant_head_end),
 * and the rows read f32 instead of converting the weights again in each. Emitted before
 * anything of the row. */
static void stage_whole(Lower *L, int group, const IrShape *X, int nred, int64_t N) {
    const IrGraph *g = L->g;
    int64_t used = 0, budget = host_l2(L->opt) / 8;
    bool any = false;
    for (int v = 0; v < g->values.len && !failed(L); v++) {
        const IrValue *x = val(L, v);
        if (in_group(L, v) || L->buf_of_val[v] < 0 || fc_dtype_size(x->dtype) >= 4 || !ir_dtype_is_float(x->dtype))
            continue;
        /* f16 where the host has F16C (every AVX2 level): its load is one instruction, as cheap as
         * the staged copy's, and with the copy LLVM vectorized a layernorm's output loop at 4
         * lanes instead of 16 (f16 [8192, 1024], one thread, in cache: 66-87 us against 60-71) */
        if (x->dtype == FC_F16 && L->opt->host.vector_bytes >= 32) continue;
        /* the shape: the row's dims, with leading dims of size 1 at most */
        int lead = x->shape.rank - nred;
        bool shaped = lead >= 0 && x->shape.rank <= X->rank;
        for (int d = 0; d < x->shape.rank && shaped; d++)
            shaped = d < lead ? x->shape.dims[d] == 1 : x->shape.dims[d] == X->dims[X->rank - nred + d - lead];
        if (!shaped || used + N * 4 > budget) continue;
        bool read = false;
        if (!read_rowwise(L, group, v, X, 0, &read) || !read) continue;
        used += N * 4;
        int sh = kir_shared(L->k, ctype(x->dtype), N);
        if (sh >= 0) kir_shared_base(L->k, sh, ci(L, 0));
        int it = kir_var(L->k, KT_I64);
        vec_for(L, it, ci(L, 0), ci(L, N), 0);
        int idx[IR_MAX_RANK];
        delinearize(L, &x->shape, vref(L, it), idx);
        kir_shstore(L->k, sh, vref(L, it), emit_load(L, v, idx));
        vec_end(L);
        hc_reset(L);
        L->whole_shared[v] = sh;
        any = true;
    }
    if (any) kir_barrier(L->k);
}

static void stage_rows(Lower *L, int group, const IrShape *X, int nred, const int *lead_vars, int64_t N) {
    const IrGraph *g = L->g;
    int64_t used = 0;
    /* the CPU reads an f32 row from its caches at each pass as cheaply as a staged copy; a 16-
     * or 8-bit row is staged widened, so that the passes do not convert it again (a quarter of
     * L2 at most) */
    int64_t budget = L->opt->cpu ? host_l2(L->opt) / 4 : row_smem_budget(L->opt);
    for (int v = 0; v < g->values.len && !failed(L); v++) {
        const IrValue *x = val(L, v);
        if (in_group(L, v) || L->buf_of_val[v] < 0 || !ir_shape_eq(&x->shape, X)) continue;
        if (L->opt->cpu && (fc_dtype_size(x->dtype) >= 4 || !ir_dtype_is_float(x->dtype))) continue;
        bool read = false, ok = row_local_readers(L, group, v, X, -1, &read);
        KirType t = ctype(x->dtype);
        int64_t bytes = N * (t == KT_F64 || t == KT_I64 ? 8 : 4);
        if (!read || !ok || used + bytes > budget || (L->opt->cpu && !read_by_passes(L, group, v, X, N))) continue;
        used += bytes;
        int sh = kir_shared(L->k, t, N);
        if (sh >= 0) kir_shared_base(L->k, sh, ib(L, KB_MUL, vref(L, L->row_var), ci(L, N)));
        int it = kir_var(L->k, KT_I64);
        /* GPU: W consecutive elements a thread when rows start at multiples of W (N % W == 0);
         * the CPU's thread loops are vectorized by LLVM */
        int w = L->opt->cpu ? 0 : 16 / (int)fc_dtype_size(x->dtype);
        vec_for(L, it, ci(L, 0), ci(L, N), w >= 2 && N % w == 0 ? w : 0);
        int idx[IR_MAX_RANK];
        for (int d = 0; d < X->rank - nred; d++) idx[d] = vref(L, lead_vars[d]);
        delinearize(L, &L->row_red, vref(L, it), idx + (X->rank - nred));
        fold_set(L, X, nred, idx + (X->rank - nred), vref(L, it));
        int e = emit_load(L, v, idx);
        if (t != KT_BOOL && vec_index(L, vref(L, it), t == KT_F32 || t == KT_I32 ? 4 : 8))
            kir_shstore_vec(L->k, sh, vref(L, it), e);
        else
            kir_shstore(L->k, sh, vref(L, it), e);
        vec_end(L);
        hc_reset(L);
        L->row_shared[v] = sh;
    }
    if (used) kir_barrier(L->k);
}

static int add_temp(Lower *L, FcDtype dt, int64_t numel, int value);

/* Binds reduction n's result to the block reduction's variable `res` (accumulated in type at
 * over `count` elements): a mean divides by count; cast to the result's compute type. */
static void bind_reduction(Lower *L, const IrNode *n, int res, KirType at, int64_t count) {
    int r = vref(L, res);
    if (n->op == IR_OP_MEAN) r = kir_bin(L->k, KB_DIV, r, fconst(L, at, (double)count));
    int fin = kir_var(L->k, ctype(val(L, n->out[0])->dtype));
    kir_let(L->k, fin, round_stored(L, n->out[0], kir_cast(L->k, ctype(val(L, n->out[0])->dtype), r)));
    L->bound[n->out[0]] = vref(L, fin);
}

/* After the kir_reduce of node i in a row kernel (its body or its tail): records the kernel's
 * thread count (red_block) and, with --strict-rounding, gives the reduction the eager kernel's
 * (lanes, when fewer than this kernel's; schedule_rows makes the block at least as large) */
static void reduce_order(Lower *L, int i) {
    int block = L->k->block, lanes = L->eager_red_block ? L->eager_red_block[i] : 0;
    if (L->red_block) L->red_block[i] = block;
    if (lanes <= 0 || lanes >= block) return;
    if (lanes % 32 != 0) { fail_internal(L, "eager reduction lanes", __LINE__); return; }
    kir_reduce_lanes(L->k, lanes);
}

/* The tail of a row kernel (KirKernel.tail): once, after every row. Each tail reduction
 * reduces the R per-row values its operand's buffer got from the rows, in row order; then the
 * tail's outputs (scalars) are computed from the results and stored. Nothing of the body is
 * visible here: its variables, bound values and staged rows are dropped. */
/* Opens the kernel's tail (kir_begin_tail): nothing of the body stays visible. */
static void begin_tail(Lower *L) {
    kir_begin_tail(L->k);
    L->in_rows = false;
    L->memo.len = 0;
    L->fold_shape = NULL;
    L->fold_rank = 0;
    for (int v = 0; v < L->g->values.len; v++) L->bound[v] = L->row_shared[v] = L->whole_shared[v] = -1;
    hc_reset(L);
}

static void schedule_tail(Lower *L, int group, const int *outs, int nouts, int64_t R) {
    begin_tail(L);
    for (int i = 0; i < L->g->nodes.len && !failed(L); i++) {
        const IrNode *n = &L->g->nodes.data[i];
        if (L->group_of_node[i] != group || !L->tail_node[i] || ir_ops[n->op].cat != IR_CAT_REDUCE) continue;
        int u = n->in[0];
        KirType at = acc_type(val(L, u)->dtype);
        int res = kir_var(L->k, at), it = kir_var(L->k, KT_I64);
        kir_reduce(L->k, reduce_redop(n->op), res, it, ci(L, 0), ci(L, R));
        reduce_order(L, i);
        scope_open(L);
        int xe = kir_load(L->k, param_for_buf(L, L->buf_of_val[u], true), vref(L, it));
        int xv = kir_cast(L->k, at, xe);
        scope_close(L);
        kir_end_reduce(L->k, xv);
        hc_reset(L);
        bind_reduction(L, n, res, at, R);
    }
    int it = kir_var(L->k, KT_I64);
    k_for(L, KIR_LOOP_THREADS, it, ci(L, 0), ci(L, 1));
    for (int i = 0; i < nouts; i++) {
        if (!L->tail_node[val(L, outs[i])->node]) continue;
        int idx[IR_MAX_RANK];
        for (int d = 0; d < val(L, outs[i])->shape.rank; d++) idx[d] = ci(L, 0);
        store_value(L, outs[i], ci(L, 0), idx);
    }
    k_end(L);
    hc_reset(L);
}

/* Column reduction: a group that is one reduction over the leading axes [0, k) of its input
 * X (fuse.c gives such a reduction a kernel of its own: a bias's or a norm gain's gradient,
 * the sum over the rows of [B*T, C]). X is R rows of C columns. Returns false if the group is
 * not that. */
static bool col_shape(Lower *L, int group, const IrNode **red, int64_t *R, int64_t *C) {
    const IrNode *n = NULL;
    for (int i = 0; i < L->g->nodes.len; i++) {
        if (L->group_of_node[i] != group) continue;
        if (n) return false;
        n = &L->g->nodes.data[i];
    }
    if (!n || ir_ops[n->op].cat != IR_CAT_REDUCE) return false;
    const IrShape *x = &val(L, n->in[0])->shape;
    int k = n->a.nlist;
    if (k >= x->rank) return false;
    for (int j = 0; j < k; j++)
        if (n->a.list[j] != j) return false;
    *R = 1;
    *C = 1;
    for (int d = 0; d < x->rank; d++) *(d < k ? R : C) *= x->dims[d];
    *red = n;
    return true;
}

/* X's element at row r and column c of a column reduction (lead: X's first k dims, trail the
 * rest), converted to the accumulator type. */
static int col_element(Lower *L, const IrNode *n, const IrShape *lead, const IrShape *trail, int r, int c, KirType at) {
    int idx[IR_MAX_RANK];
    delinearize(L, lead, r, idx);
    delinearize(L, trail, c, idx + lead->rank);
    return kir_cast(L->k, at, emit(L, n->in[0], idx));
}

/* Stores the column reduction's result for column c from its accumulated value res. */
static void col_store(Lower *L, const IrNode *n, int c, int res, KirType at, int64_t R) {
    if (n->op == IR_OP_MEAN) res = kir_bin(L->k, KB_DIV, res, fconst(L, at, (double)R));
    kir_store(L->k, param_for_buf(L, L->buf_of_val[n->out[0]], true), c,
              kir_cast(L->k, ctype(val(L, n->out[0])->dtype), res));
}

/* The column reduction's kernel (col_reduce): blocks of TC columns by RC rows; each block
 * reduces its rows of its columns and stores the partial to a workspace temporary [P, C] (P
 * row chunks); the tail reduces each column's P partials in chunk order and stores the
 * result. One launch, deterministic (the order is the kernel's, not the blocks' finishing
 * order), P * Q blocks instead of the one block of C threads that walked all R rows
 * (serial_reduce). A GPU block is a thread a column with a serial loop over its rows (loads
 * coalesced along the columns, the accumulator in a register; P = 1: no tail, the block
 * stores the result); on the CPU the rows are the outer loop and a vector loop over the
 * columns adds each row into the block's partial row (in cache), so the loads stream. */
static void schedule_cols(Lower *L, int group, const IrNode *n, int64_t R, int64_t C) {
    const IrValue *x = val(L, n->in[0]);
    int k = n->a.nlist;
    bool cpu = L->opt->cpu;
    IrShape lead = {.rank = k}, trail = {.rank = x->shape.rank - k};
    for (int d = 0; d < x->shape.rank; d++) {
        if (d < k) lead.dims[d] = x->shape.dims[d];
        else trail.dims[d - k] = x->shape.dims[d];
    }
    int64_t TC = cpu ? C : C < 256 ? (C + 31) / 32 * 32 : 256;
    int64_t Q = (C + TC - 1) / TC, minrows = 16;
    int64_t P = ((cpu ? 64 : 512) + Q - 1) / Q;
    if (P > (R + minrows - 1) / minrows) P = (R + minrows - 1) / minrows;
    if (P < 1 || (cpu && P < 2)) P = cpu && R > 1 ? 2 : 1;   /* the CPU accumulates in the partials */
    int64_t RC = (R + P - 1) / P;
    P = (R + RC - 1) / RC;
    KirType at = acc_type(x->dtype);
    FcDtype adt = at == KT_F64 ? FC_F64 : at == KT_I64 ? FC_I64 : at == KT_I32 ? FC_I32 : FC_F32;
    int part = -1;
    if (P > 1 && (part = add_temp(L, adt, P * C, -1)) < 0) return;
    kernel_begin(L, group, P > 1 ? "col_reduce_tail" : "col_reduce", P * Q, (int)TC < 1024 ? (int)TC : 1024);
    if (failed(L)) return;
    int blk = kir_var(L->k, KT_I64), r0 = kir_var(L->k, KT_I64), r1 = kir_var(L->k, KT_I64),
        c0 = kir_var(L->k, KT_I64), c1 = kir_var(L->k, KT_I64), base = kir_var(L->k, KT_I64),
        c = kir_var(L->k, KT_I64), r = kir_var(L->k, KT_I64);
    kir_let(L->k, blk, kir_block_idx(L->k));
    kir_let(L->k, r0, ib(L, KB_MUL, ib(L, KB_DIV, vref(L, blk), ci(L, Q)), ci(L, RC)));
    kir_let(L->k, r1, kir_bin(L->k, KB_MIN, ib(L, KB_ADD, vref(L, r0), ci(L, RC)), ci(L, R)));
    kir_let(L->k, c0, ib(L, KB_MUL, ib(L, KB_REM, vref(L, blk), ci(L, Q)), ci(L, TC)));
    kir_let(L->k, c1, kir_bin(L->k, KB_MIN, ib(L, KB_ADD, vref(L, c0), ci(L, TC)), ci(L, C)));
    if (P > 1) kir_let(L->k, base, ib(L, KB_MUL, ib(L, KB_DIV, vref(L, blk), ci(L, Q)), ci(L, C)));   /* the partial row */
    int prm = part >= 0 ? param_for_buf(L, part, true) : -1;
    if (cpu && P > 1) {
        k_for(L, KIR_LOOP_THREADS, c, vref(L, c0), vref(L, c1));
        kir_store(L->k, prm, ib(L, KB_ADD, vref(L, base), vref(L, c)), reduce_identity(L, n->op, at));
        k_end(L);
        hc_reset(L);
        int c2 = kir_var(L->k, KT_I64);
        k_for(L, KIR_LOOP_SERIAL, r, vref(L, r0), vref(L, r1));
        k_for(L, KIR_LOOP_THREADS, c2, vref(L, c0), vref(L, c1));
        int xv = col_element(L, n, &lead, &trail, vref(L, r), vref(L, c2), at);
        int e = ib(L, KB_ADD, vref(L, base), vref(L, c2));
        kir_store(L->k, prm, e, kir_bin(L->k, reduce_binop(n->op), kir_load(L->k, prm, e), xv));
        k_end(L);
        k_end(L);
        hc_reset(L);
    } else {
        int acc = kir_var(L->k, at);
        k_for(L, KIR_LOOP_THREADS, c, vref(L, c0), vref(L, c1));
        kir_let(L->k, acc, reduce_identity(L, n->op, at));
        k_for(L, KIR_LOOP_SERIAL, r, vref(L, r0), vref(L, r1));
        int xv = col_element(L, n, &lead, &trail, vref(L, r), vref(L, c), at);
        kir_assign(L->k, acc, kir_bin(L->k, reduce_binop(n->op), vref(L, acc), xv));
        k_end(L);
        hc_reset(L);
        if (P > 1) kir_store(L->k, prm, ib(L, KB_ADD, vref(L, base), vref(L, c)), vref(L, acc));
        else col_store(L, n, vref(L, c), vref(L, acc), at, R);
        k_end(L);
        hc_reset(L);
    }
    if (P == 1) return;
    begin_tail(L);
    int tc = kir_var(L->k, KT_I64), p = kir_var(L->k, KT_I64), tacc = kir_var(L->k, at);
    k_for(L, KIR_LOOP_THREADS, tc, ci(L, 0), ci(L, C));
    kir_let(L->k, tacc, reduce_identity(L, n->op, at));
    k_for(L, KIR_LOOP_SERIAL, p, ci(L, 0), ci(L, P));
    int pv = kir_load(L->k, prm, ib(L, KB_ADD, ib(L, KB_MUL, vref(L, p), ci(L, C)), vref(L, tc)));
    kir_assign(L->k, tacc, kir_bin(L->k, reduce_binop(n->op), vref(L, tacc), pv));
    k_end(L);
    hc_reset(L);
    col_store(L, n, vref(L, tc), vref(L, tacc), at, R);
    k_end(L);
    hc_reset(L);
}

/* ---- causal rows (docs/cpu.md, "Causal rows") --------------------------------------------- */
/* A row kernel whose rows hold causal masks (a causal softmax: where(j <= i + c, x, fill) of the
 * row's shape, i the row's index in dim -2, j the column) computes a row's columns in two
 * ranges: [0, e) as ever and [e, N), e = clamp(i + c + 1, 0, N) for the largest c, past every
 * mask, where each mask gives its fill without computing its x (forced_where), so the scores
 * there are never read. A reduction over the row reduces [0, e) and adds the rest: when the
 * value reduced is the same at every column past the masks (col_invariant: the fill, and what
 * is computed from it and from per-row values), once, as count * value for a sum (exact for
 * the +0 a softmax's exp(-inf - max) gives, and for the NaN of a row whose max is not finite)
 * and the value itself for a max or min; else a second reduction over [e, N). The outputs'
 * loop is split alike, a value the same at every column past the masks computed once. The
 * CPU only (the GPU program keeps its thread layout), not with --strict-rounding (eager
 * reduces whole rows, in its own order). */

/* The split column's multiple in rows of at least CAUSAL_ALIGN_ROW columns (shorter rows: any
 * column, so that the random graphs' small rows have columns past their masks too) */
enum { CAUSAL_ALIGN = 32, CAUSAL_ALIGN_ROW = 256 };

/* Whether node n is one of the causal row kernel's masks: a where of the row's shape keeping its
 * x where j <= i + off, off <= L->mask_off. */
static bool row_mask(const Lower *L, const IrNode *n) {
    int64_t off;
    return n->op == IR_OP_WHERE && L->mask_shape && ir_shape_eq(&val(L, n->out[0])->shape, L->mask_shape) &&
           causal_where(L, n, L->mask_shape, &off) && off <= L->mask_off;
}

/* Whether where node n, emitted at idx of shape s, is one of the row's causal masks at a
 * column past them all (L->fcol). */
static bool forced_where(Lower *L, const IrNode *n, const IrShape *s, const int *idx) {
    return L->fcol >= 0 && row_mask(L, n) && idx[s->rank - 1] == L->fcol && row_current(L, idx);
}

/* Whether value v, emitted at (this row, a column past the masks) as forced_where has it, is the
 * same at every such column: what does not vary along the columns (a size-1 last dim: a row's
 * reduction kept as [.., 1], a scalar), a constant, a mask's fill, and elementwise ops of the
 * row's shape over such values. Anything else (a value read from memory, an index) varies. */
static bool col_invariant(const Lower *L, int v, int depth) {
    const IrValue *x = val(L, v);
    const IrShape *X = L->mask_shape;
    if (x->shape.rank > X->rank) return false;
    if (x->shape.rank == 0 || x->shape.dims[x->shape.rank - 1] == 1) return true;
    const IrNode *n = node_of(L, v);
    if (!n || depth > 32 || !in_group(L, v) || L->force_load[v]) return false;
    if (n->op == IR_OP_FULL) return true;
    if (!ir_shape_eq(&x->shape, X)) return false;
    if (row_mask(L, n)) return col_invariant(L, n->in[2], depth + 1);
    IrCategory c = ir_ops[n->op].cat;
    if (!(c == IR_CAT_UNARY || c == IR_CAT_BINARY || c == IR_CAT_COMPARE || c == IR_CAT_SELECT || c == IR_CAT_CAST) ||
        n->op == IR_OP_FP8_QUANT || n->op == IR_OP_FP8_DEQUANT)
        return false;
    for (int j = 0; j < n->nin; j++)
        if (!col_invariant(L, n->in[j], depth + 1)) return false;
    return true;
}

/* Whether value v is computed in the kernel from one of its causal masks (seen: values already
 * visited). A reduction of a value that is not reads its whole row as before. */
static bool reaches_mask(const Lower *L, int v, char *seen, int depth) {
    const IrNode *n = node_of(L, v);
    if (seen[v] || !n || !in_group(L, v) || L->force_load[v] || depth > 256) return false;
    seen[v] = 1;
    if (row_mask(L, n)) return true;
    for (int j = 0; j < n->nin; j++)
        if (reaches_mask(L, n->in[j], seen, depth + 1)) return true;
    return false;
}

/* Whether the rows of group's row kernel (shape X, nred reduced dims) are split at their causal
 * masks; *off the largest mask offset. Not when a mask keeps every column of every row, nor
 * with an f8 op (its amax reads every element) or a gather (its index check) in the group. */
static bool causal_rows(Lower *L, int group, const IrShape *X, int nred, int64_t *off) {
    if (!L->opt->cpu || L->opt->strict_rounding || nred != 1 || X->rank < 2) return false;
    bool any = false;
    for (int i = 0; i < L->g->nodes.len; i++) {
        if (L->group_of_node[i] != group) continue;
        const IrNode *n = &L->g->nodes.data[i];
        if (n->op == IR_OP_FP8_QUANT || n->op == IR_OP_FP8_DEQUANT || ir_ops[n->op].cat == IR_CAT_GATHER ||
            ir_ops[n->op].cat == IR_CAT_SCATTER)
            return false;
        int64_t w;
        if (n->op == IR_OP_WHERE && ir_shape_eq(&val(L, n->out[0])->shape, X) && causal_where(L, n, X, &w)) {
            if (!any || w > *off) *off = w;
            any = true;
        }
    }
    if (any && *off < -X->dims[X->rank - 2] - 1) *off = -X->dims[X->rank - 2] - 1;   /* no row keeps a column */
    return any && *off < X->dims[X->rank - 1] - 1;
}

/* The rest of reduction n of a causal row kernel past the masks, combined with `res`, the
 * reduction over [0, kept): a new variable. fc: a column past the masks (or the last). */
static int causal_rest(Lower *L, const IrNode *n, int res, KirType at, int kept, int fc, int64_t N) {
    KirRedOp op = reduce_redop(n->op);
    KirBinOp bop = op == KR_SUM ? KB_ADD : op == KR_MAX ? KB_MAX : KB_MIN;
    int lead = L->row_lead, idx[IR_MAX_RANK];
    for (int d = 0; d < lead; d++) idx[d] = vref(L, L->row_lead_vars[d]);
    int rest, out = kir_var(L->k, at);
    if ((at == KT_F32 || at == KT_F64) && col_invariant(L, n->in[0], 0)) {
        scope_open(L);
        idx[lead] = L->fcol = vref(L, fc);
        int c = kir_cast(L->k, at, emit(L, n->in[0], idx));
        L->fcol = -1;
        scope_close(L);
        int cnt = ib(L, KB_SUB, ci(L, N), vref(L, kept));
        rest = op == KR_SUM ? kir_bin(L->k, KB_MUL, c, kir_cast(L->k, at, cnt)) : c;
        /* no column past the masks (the row's last ones keep all): nothing to add, not 0 * c */
        rest = kir_select(L->k, ib(L, KB_GT, cnt, ci(L, 0)), kir_bin(L->k, bop, vref(L, res), rest), vref(L, res));
    } else {
        int r2 = kir_var(L->k, at), it = kir_var(L->k, KT_I64);
        kir_reduce(L->k, op, r2, it, vref(L, kept), ci(L, N));
        scope_open(L);
        idx[lead] = L->fcol = vref(L, it);
        int xv = kir_cast(L->k, at, emit(L, n->in[0], idx));
        L->fcol = -1;
        scope_close(L);
        kir_end_reduce(L->k, xv);
        hc_reset(L);
        rest = kir_bin(L->k, bop, vref(L, res), vref(L, r2));   /* an empty range: the identity */
    }
    kir_let(L->k, out, rest);
    return out;
}

/* Whether group output v is of the row's shape X (R rows of N: written by the thread loop over
 * the row, not by the tail or the per-row outputs). */
static bool row_output(const Lower *L, int v, const IrShape *X, int64_t RN) {
    return numel_of(L, v) == RN && ir_shape_eq(&val(L, v)->shape, X) && !L->tail_node[val(L, v)->node];
}

static void schedule_rows(Lower *L, int group, const int *outs, int nouts, const IrShape *X, int nred) {
    IrShape lead = {.rank = X->rank - nred}, red = {.rank = nred};
    int64_t R = 1, N = 1;
    for (int d = 0; d < lead.rank; d++) { lead.dims[d] = X->dims[d]; R *= X->dims[d]; }
    for (int d = 0; d < nred; d++) { red.dims[d] = X->dims[lead.rank + d]; N *= red.dims[d]; }
    int block = row_block(L->opt, N);
    /* GPU: a thread a vector of W elements of the row (W the group's vec width, 16 bytes of
     * its narrowest operand) rather than 256 threads whatever W: a row of 1024 at bf16 (W = 8)
     * takes 128 threads, every one with its 16 bytes in the staging and output loops (with
     * 256 half had none: 51 % of the H100's copy bandwidth against f32's 89 %), and twice the
     * rows are resident per SM */
    if (!L->opt->cpu) {
        int w = vec_width(L, group, outs, nouts, R * N);
        if (w > 4 && N % w == 0 && N / w < block) block = row_block(L->opt, N / w);
    }
    /* --strict-rounding: a block reduction's order is its kernel's thread count, which W makes
     * the group's, not the reduction's: eager's backward of a `sub` that also writes a bf16
     * gradient took 32 threads for an f64 sum that the fused kernel, all f64, summed with 128
     * (other bits). Each reduction, the tail's too, takes the eager kernel's count as its
     * lanes (reduce_order), the block the largest of them (more than one when the group joins
     * reductions of eager kernels with different counts); equal counts need no lanes. */
    if (L->eager_red_block) {
        int most = 0;
        for (int i = 0; i < L->g->nodes.len; i++)
            if (L->group_of_node[i] == group && ir_ops[L->g->nodes.data[i].op].cat == IR_CAT_REDUCE &&
                L->eager_red_block[i] > most)
                most = L->eager_red_block[i];
        if (most > 0) block = most;
    }
    bool has_tail = false;
    for (int i = 0; i < L->g->nodes.len; i++) has_tail |= L->group_of_node[i] == group && L->tail_node[i];
    kernel_begin(L, group, has_tail ? "row_reduce_tail" : "row_reduce", R, block);
    if (failed(L)) return;
    if (L->opt->cpu) stage_whole(L, group, X, nred, N);
    L->row_lead = lead.rank;
    L->row_red = red;
    int row = kir_var(L->k, KT_I64);
    kir_let(L->k, row, kir_block_idx(L->k));
    int lidx[IR_MAX_RANK];
    delinearize(L, &lead, vref(L, row), lidx);
    /* block-uniform index expressions must survive thread-loop scopes: keep them out of the
     * hash-cons table, which is reset when a loop closes */
    int lead_vars[IR_MAX_RANK];
    for (int d = 0; d < lead.rank; d++) {
        lead_vars[d] = kir_var(L->k, KT_I64);
        kir_let(L->k, lead_vars[d], lidx[d]);
        L->row_lead_vars[d] = lead_vars[d];
    }
    L->in_rows = true;
    L->row_var = row;
    L->row_lead_shape = lead;
    hc_reset(L);
    /* causal rows: kept = the columns before the masks' first dropped one, in a long row
     * rounded up to a multiple of CAUSAL_ALIGN (the loops past it start at a 64-byte line of a
     * row of 16-bit values or wider, so that their vector stores can be non-temporal, which the
     * CPU backend makes only of stores it can prove aligned; the columns in between are
     * computed as before), fc = a column past them (the last when there is none) */
    int64_t moff = 0, al = 1;
    int kept = -1, fc = -1;
    if (causal_rows(L, group, X, nred, &moff)) {
        L->mask_shape = X;
        L->mask_off = moff;
        kept = kir_var(L->k, KT_I64);
        fc = kir_var(L->k, KT_I64);
        al = N >= CAUSAL_ALIGN_ROW ? CAUSAL_ALIGN : 1;
        int e = ib(L, KB_MAX, ib(L, KB_ADD, vref(L, lead_vars[lead.rank - 1]), ci(L, moff + al)), ci(L, 0));
        e = ib(L, KB_MUL, ib(L, KB_DIV, e, ci(L, al)), ci(L, al));
        kir_let(L->k, kept, ib(L, KB_MIN, e, ci(L, N)));
        kir_let(L->k, fc, ib(L, KB_MIN, vref(L, kept), ci(L, N - 1)));
        /* for the bytes read (kernel_end): the columns before the masks in each matrix's rows */
        int64_t m = X->dims[X->rank - 2], sum = 0;
        KirTail t = {.off = moff, .align = al};
        for (int64_t r = 0; r < m; r++) sum += kir_tail_col(&t, r, N);
        L->kept_var = kept;
        L->kept_elems = R / m * sum;
        L->mask_numel = R * N;
    }
    stage_rows(L, group, X, nred, lead_vars, N);
    /* one block reduction per reduction node, in order */
    for (int i = 0; i < L->g->nodes.len && !failed(L); i++) {
        if (L->group_of_node[i] != group) continue;
        const IrNode *n = &L->g->nodes.data[i];
        if (ir_ops[n->op].cat != IR_CAT_REDUCE || L->tail_node[i]) continue;
        KirType at = acc_type(val(L, n->in[0])->dtype);
        int res = kir_var(L->k, at), it = kir_var(L->k, KT_I64);
        bool split = kept >= 0 && ir_shape_eq(&val(L, n->in[0])->shape, X);
        if (split) {
            char *seen = fc_calloc((size_t)L->g->values.len + 1, 1);
            if (!seen) { fail_oom(L); return; }
            split = reaches_mask(L, n->in[0], seen, 0);
            fc_free(seen);
        }
        kir_reduce(L->k, reduce_redop(n->op), res, it, ci(L, 0), split ? vref(L, kept) : ci(L, N));
        reduce_order(L, i);
        scope_open(L);
        int idx[IR_MAX_RANK], ridx[IR_MAX_RANK];
        for (int d = 0; d < lead.rank; d++) idx[d] = vref(L, lead_vars[d]);
        delinearize(L, &red, vref(L, it), ridx);
        memcpy(idx + lead.rank, ridx, sizeof(int) * (size_t)nred);
        int xe = emit(L, n->in[0], idx);
        int also = -1, kv = n->in[0];
        int keep = xe >= 0 ? keep_row(L, group, i, n->in[0], X, N, L->k->exprs.data[xe].type, &also, &kv) : -1;
        /* the kept value: the reduction's input, or the quant under it (computed for xe: the
         * memo gives its expression back) */
        int ke = kv == n->in[0] ? xe : keep >= 0 ? emit(L, kv, idx) : -1;
        if (keep >= 0 && ke >= 0) kir_shstore(L->k, keep, vref(L, it), ke);
        int xv = kir_cast(L->k, at, xe);
        scope_close(L);
        kir_end_reduce(L->k, xv);
        if (keep >= 0) {   /* later passes read the kept row (other threads' elements on a GPU) */
            kir_barrier(L->k);
            L->row_shared[kv] = keep;
            if (also >= 0) L->row_shared[also] = keep;
        }
        hc_reset(L);
        if (split) res = causal_rest(L, n, res, at, kept, fc, N);
        bind_reduction(L, n, res, at, N);
    }
    /* the tail's inputs: each tail reduction's per-row operand is stored at the row's index
     * (its own buffer when it leaves the kernel anyway, else a temporary of R elements) and
     * read back by the tail; they join the per-row outputs */
    int routs[128], nrouts = 0;
    for (int i = 0; i < nouts; i++) {
        int nd = val(L, outs[i])->node;
        if (L->tail_node[nd] || row_output(L, outs[i], X, R * N)) continue;
        routs[nrouts++] = outs[i];
    }
    for (int i = 0; i < L->g->nodes.len && has_tail && !failed(L); i++) {
        const IrNode *n = &L->g->nodes.data[i];
        if (L->group_of_node[i] != group || !L->tail_node[i] || ir_ops[n->op].cat != IR_CAT_REDUCE) continue;
        int u = n->in[0];
        if (L->tail_node[val(L, u)->node]) continue;
        bool have = false;
        for (int j = 0; j < nrouts; j++) have |= routs[j] == u;
        if (have) continue;
        if (L->buf_of_val[u] < 0) L->buf_of_val[u] = add_temp(L, val(L, u)->dtype, R, numel_of(L, u) == R ? u : -1);
        if (L->buf_of_val[u] < 0 || nrouts >= 128) { if (!failed(L)) fail_internal(L, "tail operands", __LINE__); return; }
        routs[nrouts++] = u;
    }
    if (failed(L)) return;
    /* outputs of shape X: a thread loop over the row */
    bool any_full = false, any_red = nrouts > 0;
    for (int i = 0; i < nouts; i++)
        any_full |= row_output(L, outs[i], X, R * N);
    if (any_full) {
        int it = kir_var(L->k, KT_I64);
        /* GPU: W consecutive elements a thread when rows start at multiples of W */
        int w = vec_width(L, group, outs, nouts, R * N);
        /* causal rows: the columns before the masks, then those past them (forced), where an
         * output the same at every such column is computed once, before the loop */
        int fixed[128];
        for (int part = 0; part < (kept >= 0 ? 2 : 1) && !failed(L); part++) {
            for (int i = 0; i < nouts && part == 1; i++) {
                fixed[i] = -1;
                if (i >= 128 || !row_output(L, outs[i], X, R * N) || !col_invariant(L, outs[i], 0)) continue;
                int idx[IR_MAX_RANK];
                for (int d = 0; d < lead.rank; d++) idx[d] = vref(L, lead_vars[d]);
                scope_open(L);
                idx[lead.rank] = L->fcol = vref(L, fc);
                fixed[i] = emit(L, outs[i], idx);
                L->fcol = -1;
                scope_close(L);
                L->tail_from[outs[i]] = (KirTail){.off = moff, .align = al};
            }
            if (part == 1) it = kir_var(L->k, KT_I64);
            vec_for(L, it, part == 0 ? ci(L, 0) : vref(L, kept), part == 0 && kept >= 0 ? vref(L, kept) : ci(L, N),
                    w >= 2 && N % w == 0 ? w : 0);
            for (int i = 0; i < nouts; i++) {
                if (!row_output(L, outs[i], X, R * N)) continue;
                int idx[IR_MAX_RANK], ridx[IR_MAX_RANK];
                for (int d = 0; d < lead.rank; d++) idx[d] = vref(L, lead_vars[d]);
                delinearize(L, &red, vref(L, it), ridx);
                memcpy(idx + lead.rank, ridx, sizeof(int) * (size_t)nred);
                fold_set(L, X, nred, ridx, vref(L, it));
                int lin = ib(L, KB_ADD, ib(L, KB_MUL, vref(L, row), ci(L, N)), vref(L, it));
                int was = L->bound[outs[i]];
                if (part == 1) L->fcol = vref(L, it);
                if (part == 1 && i < 128 && fixed[i] >= 0) L->bound[outs[i]] = fixed[i];
                store_value(L, outs[i], lin, idx);
                L->bound[outs[i]] = was;
                L->fcol = -1;
            }
            vec_end(L);
            hc_reset(L);
        }
    }
    if (any_red) {
        int it = kir_var(L->k, KT_I64);
        k_for(L, KIR_LOOP_THREADS, it, ci(L, 0), ci(L, 1));
        for (int i = 0; i < nrouts; i++) {
            /* the reduced shape, with or without kept size-1 dims: the row's index (its own
             * variables, so that per-row values may be used); another shape of R elements: the
             * row's linear index delinearized */
            const IrShape *s = &val(L, routs[i])->shape;
            int idx[IR_MAX_RANK];
            bool lead_like = s->rank >= lead.rank;
            for (int d = 0; d < s->rank && lead_like; d++)
                lead_like = d < lead.rank ? s->dims[d] == lead.dims[d] : s->dims[d] == 1;
            if (lead_like) {
                for (int d = 0; d < s->rank; d++) idx[d] = d < lead.rank ? vref(L, lead_vars[d]) : ci(L, 0);
            } else {
                delinearize(L, s, vref(L, row), idx);
            }
            store_value(L, routs[i], vref(L, row), idx);
        }
        k_end(L);
        hc_reset(L);
    }
    if (has_tail) schedule_tail(L, group, outs, nouts, R);
}

/* matmul: see the file comment. */
static void schedule_matmul(Lower *L, int group, const IrNode *mm, const int *outs, int nouts) {
    const IrValue *A = val(L, mm->in[0]), *B = val(L, mm->in[1]), *O = val(L, mm->out[0]);
    int r = O->shape.rank;
    int64_t M = O->shape.dims[r - 2], N = O->shape.dims[r - 1], K = A->shape.dims[A->shape.rank - 1];
    IrShape bsh = {.rank = r - 2};
    int64_t nb = 1;
    for (int d = 0; d < r - 2; d++) { bsh.dims[d] = O->shape.dims[d]; nb *= O->shape.dims[d]; }
    /* consumers in the group must keep the element count (reshape, elementwise) */
    for (int i = 0; i < nouts; i++)
        if (numel_of(L, outs[i]) != numel_of(L, mm->out[0])) {
            fail_internal(L, "matmul group output of another size", __LINE__);
            return;
        }
    int64_t tm = (M + MM_TILE - 1) / MM_TILE, tn = (N + MM_TILE - 1) / MM_TILE;
    int64_t tk = (K + MM_TILE - 1) / MM_TILE;
    kernel_begin(L, group, "matmul", nb * tm * tn, MM_TILE * MM_TILE);
    if (failed(L)) return;
    KirKernel *k = L->k;
    KirType at = acc_type(O->dtype);
    int As = kir_shared(k, at, MM_TILE * MM_TILE), Bs = kir_shared(k, at, MM_TILE * MM_TILE);
    int acc = kir_tarray(k, at, 1);
    int bid = kir_block_idx(k);
    int vb = kir_var(k, KT_I64), vm0 = kir_var(k, KT_I64), vn0 = kir_var(k, KT_I64);
    kir_let(k, vb, ib(L, KB_DIV, bid, ci(L, tm * tn)));
    kir_let(k, vm0, ib(L, KB_MUL, ib(L, KB_DIV, ib(L, KB_REM, bid, ci(L, tm * tn)), ci(L, tn)), ci(L, MM_TILE)));
    kir_let(k, vn0, ib(L, KB_MUL, ib(L, KB_REM, bid, ci(L, tn)), ci(L, MM_TILE)));
    int bvars[IR_MAX_RANK];
    {
        int bidx[IR_MAX_RANK];
        delinearize(L, &bsh, vref(L, vb), bidx);
        for (int d = 0; d < bsh.rank; d++) {
            bvars[d] = kir_var(k, KT_I64);
            kir_let(k, bvars[d], bidx[d]);
        }
    }
    hc_reset(L);
    int t = kir_var(k, KT_I64);
    k_for(L, KIR_LOOP_THREADS, t, ci(L, 0), ci(L, MM_TILE * MM_TILE));
    kir_tstore(k, acc, ci(L, 0), zero_of(L, at));
    k_end(L);
    hc_reset(L);

    int kt = kir_var(k, KT_I64);
    k_for(L, KIR_LOOP_SERIAL, kt, ci(L, 0), ci(L, tk));
    /* load the tiles */
    for (int which = 0; which < 2 && !failed(L); which++) {
        const IrValue *X = which == 0 ? A : B;
        int xv = mm->in[which];
        int tt = kir_var(k, KT_I64);
        k_for(L, KIR_LOOP_THREADS, tt, ci(L, 0), ci(L, MM_TILE * MM_TILE));
        int row = ib(L, KB_DIV, vref(L, tt), ci(L, MM_TILE));
        int col = ib(L, KB_REM, vref(L, tt), ci(L, MM_TILE));
        int kbase = ib(L, KB_MUL, vref(L, kt), ci(L, MM_TILE));
        int i0, i1;      /* indices in the last two dims of X */
        int64_t n0, n1;  /* their sizes */
        if (which == 0) { i0 = ib(L, KB_ADD, vref(L, vm0), row); i1 = ib(L, KB_ADD, kbase, col); n0 = M; n1 = K; }
        else { i0 = ib(L, KB_ADD, kbase, row); i1 = ib(L, KB_ADD, vref(L, vn0), col); n0 = K; n1 = N; }
        int ok = kir_bin(k, KB_AND, kir_bin(k, KB_LT, i0, ci(L, n0)), kir_bin(k, KB_LT, i1, ci(L, n1)));
        int idx[IR_MAX_RANK];
        int xr = X->shape.rank, off = bsh.rank - (xr - 2);
        for (int d = 0; d < xr - 2; d++)
            idx[d] = X->shape.dims[d] == 1 ? ci(L, 0) : vref(L, bvars[d + off]);
        idx[xr - 2] = ib(L, KB_MIN, i0, ci(L, n0 - 1));
        idx[xr - 1] = ib(L, KB_MIN, i1, ci(L, n1 - 1));
        int x = kir_cast(k, at, emit(L, xv, idx));
        kir_shstore(k, which == 0 ? As : Bs, vref(L, tt), kir_select(k, ok, x, zero_of(L, at)));
        k_end(L);
        hc_reset(L);
    }
    kir_barrier(k);
    {
        int tt = kir_var(k, KT_I64);
        k_for(L, KIR_LOOP_THREADS, tt, ci(L, 0), ci(L, MM_TILE * MM_TILE));
        int row = ib(L, KB_DIV, vref(L, tt), ci(L, MM_TILE));
        int col = ib(L, KB_REM, vref(L, tt), ci(L, MM_TILE));
        int kk = kir_var(k, KT_I64);
        k_for(L, KIR_LOOP_SERIAL, kk, ci(L, 0), ci(L, MM_TILE));
        int a = kir_shload(k, As, ib(L, KB_ADD, ib(L, KB_MUL, row, ci(L, MM_TILE)), vref(L, kk)));
        int b = kir_shload(k, Bs, ib(L, KB_ADD, ib(L, KB_MUL, vref(L, kk), ci(L, MM_TILE)), col));
        kir_tstore(k, acc, ci(L, 0), kir_bin(k, KB_ADD, kir_tload(k, acc, ci(L, 0)), kir_bin(k, KB_MUL, a, b)));
        k_end(L);
        k_end(L);
        hc_reset(L);
    }
    kir_barrier(k);
    k_end(L);
    hc_reset(L);

    /* epilogue and stores */
    int tt = kir_var(k, KT_I64);
    k_for(L, KIR_LOOP_THREADS, tt, ci(L, 0), ci(L, MM_TILE * MM_TILE));
    int m = ib(L, KB_ADD, vref(L, vm0), ib(L, KB_DIV, vref(L, tt), ci(L, MM_TILE)));
    int n = ib(L, KB_ADD, vref(L, vn0), ib(L, KB_REM, vref(L, tt), ci(L, MM_TILE)));
    k_if(L, kir_bin(k, KB_AND, kir_bin(k, KB_LT, m, ci(L, M)), kir_bin(k, KB_LT, n, ci(L, N))));
    L->bound[mm->out[0]] = round_stored(L, mm->out[0], kir_cast(k, ctype(O->dtype), kir_tload(k, acc, ci(L, 0))));
    int oidx[IR_MAX_RANK];
    for (int d = 0; d < bsh.rank; d++) oidx[d] = vref(L, bvars[d]);
    oidx[r - 2] = m;
    oidx[r - 1] = n;
    int lin = linearize(L, &O->shape, oidx);
    for (int i = 0; i < nouts; i++) {
        int idx[IR_MAX_RANK];
        delinearize(L, &val(L, outs[i])->shape, lin, idx);
        store_value(L, outs[i], lin, idx);
    }
    k_end(L);
    k_end(L);
    hc_reset(L);
}

/* ---- matrix products through a library ------------------------------------------------------ */
static void group_ops(Lower *L, int group, char *buf, size_t len);
/* Names the kernel being built kN_TAG (TAG: an op name or a fixed word, never user text). */
static void rename_kernel(Lower *L, const char *tag) {
    char name[96];
    snprintf(name, sizeof name, "k%d_%s", L->p->kernels.len - 1, tag);
    const char *n = arena_strdup(&L->p->arena, name);
    if (!n) { fail_oom(L); return; }
    L->k->name = n;
}

/* A temporary of the workspace, added while kernels are lowered; value: the graph value it
 * holds (KirBuffer.value), or -1. */
static int add_temp(Lower *L, FcDtype dt, int64_t numel, int value) {
    int64_t bytes, aligned, end;
    if (!fc_mul64(numel, (int64_t)fc_dtype_size(dt), &bytes) || !fc_add64(bytes, 255, &aligned) ||
        !fc_add64(L->p->workspace_bytes, aligned / 256 * 256, &end)) {
        if (L->st == FC_OK) L->st = fc_err_set(L->err, FC_ERR_INPUT, "the workspace overflows a 64-bit byte count");
        return -1;
    }
    KirBuffer b = {.kind = KIR_BUF_TEMP, .index = -1, .dtype = dt, .numel = numel, .offset = L->p->workspace_bytes,
                   .value = value};
    if (!FC_VEC_PUSH(&L->p->buffers, b)) { fail_oom(L); return -1; }
    L->p->workspace_bytes = end;
    int *np = fc_realloc(L->param_of_buf, sizeof(int) * (size_t)(L->p->buffers.len + 1));
    if (!np) { fail_oom(L); return -1; }
    L->param_of_buf = np;
    np[L->p->buffers.len - 1] = -1;   /* not a param of the kernel being built yet */
    return L->p->buffers.len - 1;
}

typedef struct Operand {
    int buf;          /* buffer holding it */
    FcDtype dtype;    /* its type there: the product's, or the 16-bit one the library reads */
    bool trans;       /* stored as the transpose of its last two dims */
    int64_t stride;   /* elements between products, 0 if shared by all */
} Operand;

/* The batch stride of an operand with batch dims `xb` (of shape x) in a product whose
 * output batch dims are `ob`; -1 if the pattern is not a plain stride. */
static int64_t batch_stride(const IrShape *x, const IrShape *ob) {
    int64_t xn = 1;
    for (int d = 0; d < x->rank - 2; d++) xn *= x->dims[d];
    if (xn == 1) return 0;
    if (x->rank - 2 != ob->rank) return -1;
    for (int d = 0; d < ob->rank; d++)
        if (x->dims[d] != ob->dims[d]) return -1;
    return x->dims[x->rank - 2] * x->dims[x->rank - 1];
}

/* Where operand xv of the product can be read from directly: an outside value, read through
 * the in-group views fuse.c leaves with the product (its view_node): swaps of the last two dims
 * (the transpose flag) and, where the library reads the operands in 16 bits (narrow: the
 * type, pass_narrow_product; else -1), the widening cast on top. False if it must be computed
 * first; *o's dtype is the type the library reads either way. */
static bool operand_direct(Lower *L, int xv, const IrShape *ob, int narrow, Operand *o) {
    const IrValue *x = val(L, xv);
    int src = xv;
    o->trans = false;
    o->dtype = x->dtype;
    for (int d = 0; in_group(L, src) && !is_generated(L, src); d++) {
        const IrNode *n = node_of(L, src);
        if (d < 3 && ir_swaps_last_two(n, x->shape.rank)) {
            o->trans = !o->trans;
        } else if (d == 0 && narrow >= 0 && n->op == IR_OP_CAST && val(L, n->in[0])->dtype == (FcDtype)narrow) {
            o->dtype = (FcDtype)narrow;
        } else {
            return false;
        }
        src = n->in[0];
    }
    if (is_generated(L, src)) return false;
    o->buf = L->buf_of_val[src];
    o->stride = batch_stride(&x->shape, ob);
    return o->buf >= 0 && o->stride >= 0;
}

/* Computes operand xv, broadcast to the product's batch dims, into a new temporary; with
 * panel_rows > 0 (B in panels, panel_rows_for) into a temporary of panel_rows rows of
 * panel_cols columns (all of them: 0), each block block_rows rows of a chunk of panel_cols
 * columns, chunk after chunk, so that the runtime runs the blocks of one panel at a time;
 * `passes`: how many times the runtime makes all of B (KirGemm.panel_m), for its bytes; tr:
 * made transposed (b_transposed), the buffer and its panels B^T's, read transposed. */
static bool operand_materialize(Lower *L, int group, int xv, const IrShape *ob, int64_t panel_rows, int64_t block_rows,
                                int64_t panel_cols, int64_t passes, bool tr, int narrow, Operand *o) {
    if (narrow >= 0 && in_group(L, xv) && node_of(L, xv)->op == IR_OP_CAST)   /* in the 16-bit type the library reads */
        xv = node_of(L, xv)->in[0];
    const IrValue *x = val(L, xv);
    IrShape P = *ob;
    bool shared = true;   /* the same matrix for every product of the batch (a weight): made once */
    for (int d = 0; d < x->shape.rank - 2; d++) shared = shared && x->shape.dims[d] == 1;
    if (panel_rows > 0 || shared) P.rank = 0;   /* one B for every product (the batch folded into A's rows) */
    P.dims[P.rank++] = x->shape.dims[x->shape.rank - 2];
    P.dims[P.rank++] = x->shape.dims[x->shape.rank - 1];
    IrShape PB = P;   /* the operand's shape; P the buffer's: swapped when made transposed (tr) */
    if (tr) {
        P.dims[P.rank - 2] = PB.dims[P.rank - 1];
        P.dims[P.rank - 1] = PB.dims[P.rank - 2];
    }
    int64_t n = 1, cols = P.dims[P.rank - 1];
    ir_shape_numel(&P, &n);
    int64_t width = panel_cols > 0 && panel_cols < cols ? panel_cols : cols, nch = (cols + width - 1) / width;
    int buf = panel_rows > 0 ? add_temp(L, x->dtype, panel_rows * width, -1)
                             : add_temp(L, x->dtype, n, n == numel_of(L, xv) && !tr ? xv : -1);   /* B^T: not B's value */
    if (buf < 0) return false;
    int64_t chunk = panel_rows > 0 ? block_rows * cols : pw_chunk(L->opt);
    int64_t grid = panel_rows > 0 ? (P.dims[0] + block_rows - 1) / block_rows * nch : (n + chunk - 1) / chunk;
    kernel_begin(L, group, "pointwise", grid, n < PW_BLOCK ? (int)((n + 31) / 32 * 32) : PW_BLOCK);
    if (failed(L)) return false;
    rename_kernel(L, "operand");
    int idx[IR_MAX_RANK], xi[IR_MAX_RANK], prm = param_for_buf(L, buf, true);
    if (panel_rows > 0) {
        /* block_rows rows a block, each a contiguous loop over its columns (as the CPU's row
         * schedule of a pointwise kernel: no division per element); it indexes all of B. With
         * chunks of columns, block b is rows (b mod RB) * block_rows on of chunk b / RB, and
         * element [r, c] of a chunk [c0, c1) lands at r * (c1 - c0) + c - c0: the chunk's
         * panels are panel_rows x (c1 - c0), row after row. */
        L->k->params.data[prm].numel = n;
        int64_t R = P.dims[0], RB = (R + block_rows - 1) / block_rows;
        int r0 = kir_var(L->k, KT_I64), r1 = kir_var(L->k, KT_I64), rr = kir_var(L->k, KT_I64), c = kir_var(L->k, KT_I64);
        int rb = kir_block_idx(L->k), c0 = ci(L, 0), c1 = ci(L, cols), w = ci(L, cols);
        if (nch > 1) {
            int j = kir_var(L->k, KT_I64), b = kir_var(L->k, KT_I64), cv0 = kir_var(L->k, KT_I64), cv1 = kir_var(L->k, KT_I64);
            kir_let(L->k, j, ib(L, KB_DIV, kir_block_idx(L->k), ci(L, RB)));
            kir_let(L->k, b, ib(L, KB_SUB, kir_block_idx(L->k), ib(L, KB_MUL, vref(L, j), ci(L, RB))));
            kir_let(L->k, cv0, ib(L, KB_MUL, vref(L, j), ci(L, width)));
            kir_let(L->k, cv1, kir_bin(L->k, KB_MIN, ib(L, KB_ADD, vref(L, cv0), ci(L, width)), ci(L, cols)));
            rb = vref(L, b);
            c0 = vref(L, cv0);
            c1 = vref(L, cv1);
            w = ib(L, KB_SUB, c1, c0);
        }
        kir_let(L->k, r0, kir_bin(L->k, KB_MIN, ib(L, KB_MUL, rb, ci(L, block_rows)), ci(L, R)));
        kir_let(L->k, r1, kir_bin(L->k, KB_MIN, ib(L, KB_ADD, vref(L, r0), ci(L, block_rows)), ci(L, R)));
        k_for(L, KIR_LOOP_SERIAL, rr, vref(L, r0), vref(L, r1));
        int rowbase = kir_var(L->k, KT_I64);
        kir_let(L->k, rowbase, nch > 1 ? ib(L, KB_SUB, ib(L, KB_MUL, vref(L, rr), w), c0) : ib(L, KB_MUL, vref(L, rr), w));
        k_for(L, KIR_LOOP_THREADS, c, c0, c1);
        idx[tr ? 1 : 0] = vref(L, rr);
        idx[tr ? 0 : 1] = vref(L, c);
        bcast_index(L, &PB, &x->shape, idx, xi);
        kir_store(L->k, prm, ib(L, KB_ADD, vref(L, rowbase), vref(L, c)), emit(L, xv, xi));
        k_end(L);
    } else {
        int lo, hi;
        block_range(L, chunk, n, &lo, &hi);
        int it = kir_var(L->k, KT_I64);
        k_for(L, KIR_LOOP_THREADS, it, vref(L, lo), vref(L, hi));
        delinearize(L, &P, vref(L, it), idx);
        if (tr) {
            int t = idx[P.rank - 2];
            idx[P.rank - 2] = idx[P.rank - 1];
            idx[P.rank - 1] = t;
        }
        bcast_index(L, &PB, &x->shape, idx, xi);
        kir_store(L->k, prm, vref(L, it), emit(L, xv, xi));
    }
    k_end(L);
    hc_reset(L);
    if (failed(L)) return false;
    L->k->flops = 0;
    kernel_end(L, "matmul operand");
    if (panel_rows > 0 && !failed(L)) {   /* the panel stays in the cache: no bytes to memory, no streaming */
        L->k->bytes_written -= panel_rows * width * (int64_t)fc_dtype_size(x->dtype);
        L->k->params.data[prm].stream = false;
        /* run once per block of C's rows (KirGemm.panel_m): its reads that many times */
        if (passes > 1 && __builtin_mul_overflow(L->k->bytes_read, passes, &L->k->bytes_read) && L->st == FC_OK)
            L->st = fc_err_set(L->err, FC_ERR_INPUT, "a product's operand bytes overflow a 64-bit count");
    }
    o->buf = buf;
    o->dtype = x->dtype;
    o->trans = tr;
    o->stride = n == P.dims[P.rank - 2] * P.dims[P.rank - 1] ? 0 : P.dims[P.rank - 2] * P.dims[P.rank - 1];
    return !failed(L);
}

/* B in panels (KirGemm.panel_k; docs/cpu.md, "Products of narrow weights"): where the CPU must
 * compute B [k, n] before the library call (a weight stored as i8, f8 or 16 bits, made f32 by
 * an operand kernel), B is made and multiplied a panel of rows at a time into a buffer that
 * stays in the cache, so that the f32 B never reaches memory: the weight's own bytes are all the
 * product reads of it. Each panel adds C += A[:, rows] @ panel, which reads C again.
 *  - C no taller than a panel of half the L2 cache: panels of that size (C stays in the cache
 *    too, and its extra traffic is at most the f32 B's).
 *  - A taller C: panels of an eighth of the last-level cache, of at least PANEL_MIN_K rows (the
 *    BLAS's own blocking of k is a few hundred: panels of 80 rows, 38 calls, ran a [1024, 3072]
 *    @ [3072, 768] product about 20 % slower than one call on the f32 B, 340 to 1360 rows as
 *    fast within the noise: docs/cpu.md),
 *    and C in blocks of *c_rows rows, a block a quarter of that cache and at least PANEL_MIN_M
 *    rows, each block over every panel, the panels made again for each block (one conversion per
 *    2 * 128 flops of the product at least); a C that fits is one block (*c_rows 0). A B too
 *    wide for panels of PANEL_MIN_K rows has its columns in chunks of *chunk_cols (equal, a
 *    multiple of 16; 0: none), PANEL_MIN_K rows of a chunk an eighth of the cache, each chunk
 *    its own panels and its own columns of C. Only a cache too small for chunks of 16 columns
 *    leaves no panels: the f32 B written whole, once.
 * A B that fits one panel is one (made into the cache, then read from it: no extra C traffic,
 * whatever m). The operand kernel's blocks are block_rows rows of a chunk (about pw_chunk
 * elements), a panel a multiple of them. Returns the panel's rows (*blocks: the operand
 * kernel's blocks a panel), 0 for no panels. */
enum { PANEL_MIN_K = 256, PANEL_MIN_M = 128 };
/* For panels of kp rows in the last-level cache (of k; n columns of es bytes): C's blocks of
 * rows, *c_rows (equal, a multiple of 16; 0 when one panel or C fits), up to a quarter of the
 * cache. False where the panels or the blocks would be under PANEL_MIN_K or PANEL_MIN_M. */
static bool llc_c_blocks(const Lower *L, int64_t m, int64_t k, int64_t kp, int64_t n, int64_t es, int64_t *c_rows) {
    if (kp >= k) return true;
    int64_t mb = host_llc(L->opt) / 4 / (n * es) / 16 * 16;
    if (kp < PANEL_MIN_K || mb < PANEL_MIN_M) return false;
    if (mb < m) {
        int64_t nblk = (m + mb - 1) / mb;
        *c_rows = ((m + nblk - 1) / nblk + 15) / 16 * 16;
    }
    return true;
}
static int64_t panel_rows_for(const Lower *L, int64_t m, int64_t k, int64_t n, FcDtype dt, int64_t *block_rows,
                              int64_t *blocks, int64_t *c_rows, int64_t *chunk_cols) {
    *c_rows = *chunk_cols = 0;
    if (!L->opt->cpu || m < 1 || k < 1 || n < 1) return 0;
    int64_t es = (int64_t)fc_dtype_size(dt), llc = host_llc(L->opt);
    int64_t br = pw_chunk(L->opt) / n > 1 ? pw_chunk(L->opt) / n : 1, rows = host_l2(L->opt) / 2 / (n * es);
    int64_t kp = rows / br > 1 ? rows / br * br : br;
    *block_rows = br;
    if (m > kp && kp < k) {   /* a taller C: panels in the last-level cache, C in blocks */
        rows = llc / 8 / (n * es);
        if (rows < PANEL_MIN_K && rows < k) {   /* too wide: B's columns in equal chunks */
            int64_t w = llc / 8 / (PANEL_MIN_K * es) / 16 * 16;
            if (w < 16) return 0;   /* a tiny cache */
            int64_t nch = (n + w - 1) / w;
            w = ((n + nch - 1) / nch + 15) / 16 * 16;
            *chunk_cols = n = w;
            rows = llc / 8 / (n * es);
            br = pw_chunk(L->opt) / n > 1 ? pw_chunk(L->opt) / n : 1;
            *block_rows = br;
        }
        kp = rows / br * br;
        if (!llc_c_blocks(L, m, k, kp, n, es, c_rows)) {
            *chunk_cols = 0;
            return 0;
        }
    }
    /* --strict-rounding: the eager program multiplies all of B in one call; several panels
     * would sum each element in other parts (C += A[:, rows] @ panel), other bits (chunks of
     * columns are left out with them) */
    if (L->opt->strict_rounding && (kp < k || *chunk_cols > 0)) {
        *c_rows = *chunk_cols = 0;
        return 0;
    }
    if (kp >= k) {
        *blocks = (k + br - 1) / br;
        return k;
    }
    /* panels of equal size, a multiple of the operand's blocks (panels of 340, 340 and 88 rows
     * are 256, 256 and 256; in the LLC at least half of PANEL_MIN_K then, as 288 and 37 rows
     * become 180 and 145) */
    int64_t np = (k + kp - 1) / kp;
    kp = ((k + np - 1) / np + br - 1) / br * br;
    *blocks = kp / br;
    return kp;
}

/* Whether the product's B (value v, a matrix made in this group) is best made transposed: made
 * in the group from a swap of the last two dims of a matrix, under widening casts alone (fuse.c's
 * mark_b_operand: the backward's dX = dY @ w^T of a weight made f32 here, cast(w^T) at 16 bits).
 * Made as B^T, the kernel reads the matrix along its rows, and the library reads B^T
 * transposed. */
static bool b_transposed(const Lower *L, int v) {
    if (val(L, v)->shape.rank != 2) return false;
    for (int d = 0; d < 4; d++) {
        const IrNode *n = node_of(L, v);
        if (!n || !in_group(L, v) || is_generated(L, v)) return false;
        if (ir_swaps_last_two(n, 2)) return true;
        if (n->op != IR_OP_CAST) return false;
        v = n->in[0];
    }
    return false;
}

/* Panels of B made transposed (b_transposed; B^T [n, k]): chunks of kp of B^T's columns, each
 * with all n of its rows, an n x kp panel the library reads transposed (rows [k0, k0 + kp) of
 * B).
 * Their sizes as panel_rows_for's: half the L2 while C is no taller than a panel, else an
 * eighth of the last-level cache with C in blocks (*c_rows), at least PANEL_MIN_K and
 * PANEL_MIN_M; equal; none where the panel or the block would be shorter (a very wide n: its
 * columns are not cut). The operand kernel's blocks are *block_rows rows of y of a chunk,
 * *blocks of them a chunk. Returns kp, 0 for no panels. */
static int64_t panel_cols_t(const Lower *L, int64_t m, int64_t k, int64_t n, FcDtype dt, int64_t *block_rows,
                            int64_t *blocks, int64_t *c_rows) {
    *c_rows = 0;
    if (!L->opt->cpu || m < 1 || k < 1 || n < 1) return 0;
    int64_t es = (int64_t)fc_dtype_size(dt), llc = host_llc(L->opt);
    int64_t kp = host_l2(L->opt) / 2 / (n * es);
    if (m > kp && kp < k) {
        kp = llc / 8 / (n * es);
        if (!llc_c_blocks(L, m, k, kp, n, es, c_rows)) return 0;
    }
    if (kp < 1 || (kp < k && L->opt->strict_rounding)) {   /* --strict-rounding: see panel_rows_for */
        *c_rows = 0;
        return 0;
    }
    if (kp >= k) kp = k;
    else kp = (k + (k + kp - 1) / kp - 1) / ((k + kp - 1) / kp);   /* equal: ceil(k / chunks) */
    *block_rows = pw_chunk(L->opt) / kp > 1 ? pw_chunk(L->opt) / kp : 1;
    *blocks = (n + *block_rows - 1) / *block_rows;
    return kp;
}

/* ---- causal products (docs/cpu.md, "Causal products") ------------------------------------ */
/* Whether integer index value v, read at an element of shape o (v broadcast to o), is idx[*axis] +
 * *c (*axis a dim of o) or the constant *c (*axis -1): iotas and integral constants, their sums
 * and differences; in i32 only while dims and constants stay below 2^29 (no sum can wrap). */
static bool index_affine(const Lower *L, int v, const IrShape *o, int *axis, int64_t *c, int depth) {
    const IrValue *x = val(L, v);
    const IrNode *n = node_of(L, v);
    if (!n || depth > 8 || (x->dtype != FC_I64 && x->dtype != FC_I32) || x->shape.rank > o->rank) return false;
    bool narrow = x->dtype == FC_I32;   /* kept far from wrapping: small dims and constants */
    for (int d = 0; d < o->rank && narrow; d++)
        if (o->dims[d] >= ((int64_t)1 << 29)) return false;
    switch (n->op) {
    case IR_OP_IOTA: {
        int a = (int)n->a.i[0], od = o->rank - x->shape.rank + a;
        if (a < 0 || a >= x->shape.rank || x->shape.dims[a] != o->dims[od]) return false;
        *axis = od;
        *c = 0;
        return true;
    }
    case IR_OP_FULL:   /* |value| < 2^40: eight sums of them stay far inside 64 bits */
        if (!(fabs(n->a.f) < 0x1p40) || n->a.f != floor(n->a.f)) return false;
        *axis = -1;
        *c = (int64_t)n->a.f;
        return !narrow || (*c > -((int64_t)1 << 29) && *c < ((int64_t)1 << 29));
    case IR_OP_ADD:
    case IR_OP_SUB: {
        int a0, a1;
        int64_t c0, c1;
        if (!index_affine(L, n->in[0], o, &a0, &c0, depth + 1) || !index_affine(L, n->in[1], o, &a1, &c1, depth + 1))
            return false;
        if (a1 >= 0 && (n->op == IR_OP_SUB || a0 >= 0)) return false;
        *axis = a0 >= 0 ? a0 : a1;
        *c = n->op == IR_OP_SUB ? c0 - c1 : c0 + c1;
        return !narrow || (*c > -((int64_t)1 << 29) && *c < ((int64_t)1 << 29));
    }
    default: return false;
    }
}

/* Whether where node w keeps its x exactly where j <= i + *off, (i, j) the last two dims of its
 * shape o: its condition compares the column index with the row index, each plus a constant
 * (col <= row + c, col < row + c, or the same written with >= or >). */
static bool causal_where(const Lower *L, const IrNode *w, const IrShape *o, int64_t *off) {
    const IrNode *c = node_of(L, w->in[0]);
    if (o->rank < 2 || !c) return false;
    bool swap = c->op == IR_OP_GE || c->op == IR_OP_GT, strict = c->op == IR_OP_LT || c->op == IR_OP_GT;
    if (c->op != IR_OP_LE && c->op != IR_OP_LT && !swap) return false;
    int ac, ar;
    int64_t cc, cr;
    if (!index_affine(L, c->in[swap ? 1 : 0], o, &ac, &cc, 0) || !index_affine(L, c->in[swap ? 0 : 1], o, &ar, &cr, 0))
        return false;
    if (ac != o->rank - 1 || ar != o->rank - 2) return false;
    *off = cr - cc - (strict ? 1 : 0);
    return true;
}

/* Whether every read of v (of shape o, in group `group`) discards the elements (.., i, j) with
 * j > i + *off: each reader is a where of that group taking v as its x under a causal condition
 * (causal_where; *off the largest such offset), or an elementwise op of that group (unary,
 * binary but not the f8 ones, whose amax reads every element; a cast) of result shape o, which
 * nothing outside the kernel reads and which no buffer holds, whose own reads do the same.
 * seen: values already shown to (the graph is a DAG). */
static bool masked_only(const Lower *L, int v, int group, const IrShape *o, int64_t *off, bool *any, char *seen,
                        int depth) {
    if (seen[v]) return true;
    if (depth > 64) return false;
    for (int i = 0; i < L->g->nodes.len; i++) {
        const IrNode *n = &L->g->nodes.data[i];
        bool reads = false;
        for (int j = 0; j < n->nin; j++) reads |= n->in[j] == v;
        if (!reads) continue;
        if (L->group_of_node[i] != group || n->nout != 1 || !ir_shape_eq(&val(L, n->out[0])->shape, o)) return false;
        if (n->op == IR_OP_WHERE) {
            int64_t w;
            if (n->in[0] == v || n->in[2] == v || !causal_where(L, n, o, &w)) return false;
            if (!*any || w > *off) *off = w;
            *any = true;
            continue;
        }
        IrCategory cat = ir_ops[n->op].cat;
        if (!(cat == IR_CAT_UNARY || cat == IR_CAT_BINARY || cat == IR_CAT_CAST) || n->op == IR_OP_FP8_QUANT ||
            n->op == IR_OP_FP8_DEQUANT)
            return false;
        int u = n->out[0];
        if (L->used_outside[u] || L->buf_of_val[u] >= 0 || !masked_only(L, u, group, o, off, any, seen, depth + 1))
            return false;
    }
    seen[v] = 1;
    return true;
}

/* A causal product: product mm's C is read by one kernel only (its epilogue, or another kernel),
 * through causal masks alone (masked_only); *off the offset C is needed up to. Not with
 * --strict-rounding (the eager program computes all of C, and a BLAS need not give the same
 * bits for a narrower product), nor where C is a block output. */
static bool causal_product(Lower *L, const IrNode *mm, int64_t *off) {
    int s = mm->out[0];
    const IrShape *o = &val(L, s)->shape;
    if (!L->opt->cpu || L->opt->strict_rounding || o->rank < 2) return false;
    for (int j = 0; j < L->g->outputs.len; j++)
        if (L->g->outputs.data[j] == s) return false;
    int rg = -1;
    for (int i = 0; i < L->g->nodes.len; i++)
        for (int j = 0; j < L->g->nodes.data[i].nin; j++)
            if (L->g->nodes.data[i].in[j] == s) {
                if (rg >= 0 && L->group_of_node[i] != rg) return false;
                rg = L->group_of_node[i];
            }
    if (rg < 0) return false;
    char *seen = fc_calloc((size_t)L->g->values.len + 1, 1);
    if (!seen) { fail_oom(L); return false; }
    bool any = false, ok = masked_only(L, s, rg, o, off, &any, seen, 0) && any;
    fc_free(seen);
    if (!ok) return false;
    int64_t m = o->dims[o->rank - 2], n = o->dims[o->rank - 1];
    if (*off < -m) *off = -m;   /* no row needs a column / every column is needed */
    if (*off > n) *off = n;
    return true;
}

/* Whether A of product mm may end its rows in zeros: the kernel that computes it (behind casts)
 * holds a causal where of its shape, as a causal softmax's probabilities are (KirGemm.zero_tail,
 * a hint the runtime checks on the values). */
static bool zero_tail_operand(const Lower *L, const IrNode *mm) {
    int a = mm->in[0];
    for (int d = 0; d < 8 && node_of(L, a) && node_of(L, a)->op == IR_OP_CAST; d++) a = node_of(L, a)->in[0];
    const IrValue *x = val(L, a);
    if (x->node < 0 || x->shape.rank < 2) return false;
    int gr = L->group_of_node[x->node];
    for (int i = 0; i < L->g->nodes.len; i++) {
        const IrNode *n = &L->g->nodes.data[i];
        int64_t off;
        if (L->group_of_node[i] == gr && n->op == IR_OP_WHERE && ir_shape_eq(&val(L, n->out[0])->shape, &x->shape) &&
            causal_where(L, n, &x->shape, &off))
            return true;
    }
    return false;
}

/* Products in blocks of C's rows (the CPU; docs/cpu.md, "Epilogues in the cache" and "A in
 * blocks"). A product whose group goes on after it (a bias, an activation, a residual, the
 * rounding to the storage type: the epilogue) runs the epilogue's blocks for each block's rows
 * right after the block, so that the epilogue reads C from the cache and C never goes to memory
 * (its buffer holds one block: KirGemm.epi_rows, c_block); a product whose A is a 16-bit value
 * widened here (fuse.c's a_operand_cast) makes each block's rows of A just before the block,
 * into the cache (operand_rows, KirGemm.a_rows), so that the f32 A never goes to memory either.
 * The blocks (block_rows_for): B's panels' (panel_m) where B is made in several panels; else
 * (B whole or one panel) all of C where C and A's block fit a quarter of the last-level cache,
 * or blocks of that size, equal, a multiple of 16 and at least PANEL_MIN_M rows, or 1024 and
 * 4 x k where B is larger than half the L2 (the library packs B again for each call); none
 * where they would be smaller, and under --strict-rounding none but all of C (the eager
 * program's one call). Returns the blocks' rows (m: one block), 0 for none. a_k: A's columns
 * when A is made in the blocks, else 0. */
static int64_t block_rows_for(const Lower *L, int64_t m, int64_t n, int64_t a_k, int64_t panel_k, int64_t k,
                              int64_t panel_m, int64_t panel_n, FcDtype dt) {
    if (!L->opt->cpu || m < 1) return 0;
    if (panel_k > 0 && (panel_m > 0 || panel_k < k || panel_n > 0)) return panel_m > 0 ? panel_m : m;
    int64_t es = (int64_t)fc_dtype_size(dt), cap = host_llc(L->opt) / 4 / ((n + a_k) * es) / 16 * 16;
    if (cap >= m) return m;
    /* each call packs B again (per thread): a B out of the L2 (whole, or one panel made once)
     * only for blocks of at least 1024 rows and 4 x k (blocks of 128 rows of [4096, 64] @ [64,
     * 4096] ran 15-30 % slower than one call, of 160 rows of [1024, 768] @ [768, 3072] 15 %, of
     * 512 rows of the first at bf16 5-15 %: docs/cpu.md) */
    int64_t least = PANEL_MIN_M;
    if (k * n * es > host_l2(L->opt) / 2) least = 4 * k > 1024 ? 4 * k : 1024;
    if (cap < least || L->opt->strict_rounding) return 0;
    int64_t nblk = (m + cap - 1) / cap;
    return ((m + nblk - 1) / nblk + 15) / 16 * 16;
}

/* The rows a block of a kernel over the rows of C takes in blocks of mb rows (mb < m) or in one
 * (mb = m): about pw_chunk elements of `cols` columns, a divisor of mb. */
static int64_t rows_per_block(const Lower *L, int64_t mb, int64_t m, int64_t cols) {
    int64_t r = pw_chunk(L->opt) / cols > 1 ? pw_chunk(L->opt) / cols : 1;
    while (mb < m && mb % r != 0) r--;
    return r;
}

/* The epilogue in C's blocks of mb rows (block_rows_for; 0: none): only for a single product
 * (the batch folded into the rows), not a causal or zero-tail one, with every epilogue output of
 * C's rows (its last dim C's n, at least 16: the CPU's row schedule). Returns the epilogue's rows
 * a block, 0 for none: C written whole, the epilogue after it. */
static int64_t epilogue_rows(const Lower *L, const KirGemm *g, const int *outs, int nouts, int64_t mb) {
    if (!L->opt->cpu || mb < 1 || nouts < 1 || g->batch != 1 || g->causal || g->zero_tail || g->n < 16) return 0;
    for (int i = 0; i < nouts; i++) {
        const IrShape *s = &val(L, outs[i])->shape;
        if (s->rank < 2 || s->dims[s->rank - 1] != g->n || numel_of(L, outs[i]) != g->m * g->n) return 0;
    }
    return rows_per_block(L, mb, g->m, g->n);
}

/* A made in blocks of C's rows (KirGemm.a_rows): operand xv [.., rows, k] (its leading dims
 * the product's rows, the batch folded in) computed by a kernel whose block b is rows
 * [b * ar, (b + 1) * ar) of A, each a contiguous loop over its k columns, stored at r * k + c
 * (the param indexes all of A; the rows loop of schedule_pointwise_rows, rows_loop) into a
 * buffer of mb rows that stays in the cache: the runtime bases the param the block's first row
 * earlier. */
static bool operand_rows(Lower *L, int group, int xv, int64_t mb, int64_t ar, Operand *o) {
    const IrValue *x = val(L, xv);
    int64_t K = x->shape.dims[x->shape.rank - 1], R = numel_of(L, xv) / K;
    int buf = add_temp(L, x->dtype, mb * K, -1);
    if (buf < 0) return false;
    kernel_begin(L, group, "pointwise", (R + ar - 1) / ar, PW_BLOCK);
    if (failed(L)) return false;
    rename_kernel(L, "operand");
    int prm = param_for_buf(L, buf, true);
    L->k->params.data[prm].numel = R * K;
    int idx[1][IR_MAX_RANK], lin;
    const IrShape *xs = &x->shape;
    rows_loop(L, &xs, 1, ar, idx, &lin);
    kir_store(L->k, prm, lin, emit(L, xv, idx[0]));
    k_end(L);
    k_end(L);
    hc_reset(L);
    if (failed(L)) return false;
    L->k->flops = 0;
    kernel_end(L, "matmul operand");
    if (failed(L)) return false;
    /* the block stays in the cache: no bytes to memory, no streaming */
    L->k->bytes_written -= mb * K * (int64_t)fc_dtype_size(x->dtype);
    L->k->params.data[prm].stream = false;
    o->buf = buf;
    o->dtype = x->dtype;
    o->trans = false;
    o->stride = 0;
    return true;
}

/* The product as a library call, then (if the group has more outputs) its epilogue as a
 * pointwise kernel that reads the product back (on the CPU a block of C at a time where it can,
 * with A made the same way: block_rows_for). Returns false, having emitted nothing,
 * when the product is not of a library dtype. */
static bool schedule_matmul_library(Lower *L, int group, const IrNode *mm, const int *outs, int nouts,
                                    int64_t epi_flops) {
    const IrValue *A = val(L, mm->in[0]), *B = val(L, mm->in[1]), *O = val(L, mm->out[0]);
    if (O->dtype != FC_F32 && O->dtype != FC_F64) return false;
    int64_t on = numel_of(L, mm->out[0]), kk = A->shape.dims[A->shape.rank - 1];
    if (on > INT32_MAX || kk > INT32_MAX || numel_of(L, mm->in[0]) > INT32_MAX || numel_of(L, mm->in[1]) > INT32_MAX)
        return false;   /* BLAS sizes are 32-bit */
    int r = O->shape.rank;
    IrShape ob = {.rank = r - 2};
    int64_t nb = 1;
    for (int d = 0; d < r - 2; d++) { ob.dims[d] = O->shape.dims[d]; nb *= ob.dims[d]; }
    /* 16-bit operands (pass_narrow_product) where fuse.c kept both widening casts here */
    int narrow = pass_narrow_product(L->g, L->opt, (int)(mm - L->g->nodes.data));
    if (narrow >= 0 && !(in_group(L, mm->in[0]) && in_group(L, mm->in[1]))) narrow = -1;
    Operand oa, obb;
    int64_t M = O->shape.dims[r - 2], N = O->shape.dims[r - 1], kp = 0, br = 0, bpp = 0, mb = 0, nc = 0, coff = 0;
    int mmv = mm->out[0];
    /* A made here (not read through views) in blocks of C's rows (operand_rows): its leading
     * dims the product's rows, the batch folded into them (B one matrix) */
    bool a_made = !operand_direct(L, mm->in[0], &ob, narrow, &oa);
    bool a_rows = a_made && L->opt->cpu && narrow < 0 && A->shape.rank == r && batch_stride(&B->shape, &ob) == 0 &&
                  numel_of(L, mm->in[0]) == nb * M * kk;
    if (a_rows) oa = (Operand){.buf = -1, .dtype = A->dtype, .trans = false, .stride = nb > 1 ? M * kk : 0};
    bool bt = b_transposed(L, mm->in[1]);   /* B made here as B^T, read transposed */
    /* a causal product, or one whose A has a zero tail, leaves work out that panels of B would
     * not (the runtime's causal and zero-tail paths take B whole, and A): those come first */
    bool causal = causal_product(L, mm, &coff);
    bool ztail = L->opt->cpu && !L->opt->strict_rounding && !oa.trans && zero_tail_operand(L, mm);
    if (failed(L)) return true;
    bool b_made = !operand_direct(L, mm->in[1], &ob, narrow, &obb);
    /* the batch folded into the rows: B one matrix for every product */
    bool folds = nb == 1 || (!oa.trans && oa.stride == M * kk && (b_made ? numel_of(L, mm->in[1]) == kk * N : obb.stride == 0));
    if (b_made && numel_of(L, mm->in[1]) == kk * N && folds && !causal && !ztail)   /* B in panels */
        kp = bt ? panel_cols_t(L, nb * M, kk, N, O->dtype, &br, &bpp, &mb)
                : panel_rows_for(L, nb * M, kk, N, O->dtype, &br, &bpp, &mb, &nc);
    /* the epilogue: what the group computes after the product; run block by block of C, C in
     * the cache (not where C itself leaves the group) */
    int rest[64], nrest = 0;
    for (int i = 0; i < nouts; i++)
        if (outs[i] != mmv) rest[nrest++] = outs[i];
    bool epi = nrest > 0 && L->buf_of_val[mmv] < 0;
    int64_t ublk = 0, ar = 0;   /* C's blocks' rows (block_rows_for), A's operand kernel's rows a block */
    if (folds && !causal && !ztail && (a_rows || epi))
        ublk = block_rows_for(L, nb * M, N, a_rows ? kk : 0, kp, kk, mb, nc, O->dtype);
    if (a_rows && ublk > 0) {
        ar = rows_per_block(L, ublk, nb * M, kk);
        if (!operand_rows(L, group, mm->in[0], ublk, ar, &oa)) return true;
        oa.stride = nb > 1 ? M * kk : 0;   /* the batch's rows one after another: folded below */
    } else if (a_made && !operand_materialize(L, group, mm->in[0], &ob, 0, 0, 0, 1, false, narrow, &oa)) {
        return true;
    }
    if (b_made) {
        int64_t passes = mb > 0 ? (nb * M + mb - 1) / mb : 1;   /* B made once per block of C */
        /* B^T [N, k] whole, or in chunks of kp columns (all N rows): panels of B^T */
        if (!operand_materialize(L, group, mm->in[1], &ob, bt && kp > 0 ? N : kp, br, bt ? kp : nc, passes, bt, narrow,
                                 &obb))
            return true;
    }
    if (oa.dtype != obb.dtype || (oa.dtype != O->dtype && oa.dtype != (FcDtype)narrow)) {
        if (L->st == FC_OK)
            L->st = fc_err_set(L->err, FC_ERR_INTERNAL, "internal error: %s:%d: a library product's operands are %s and %s",
                               __FILE__, __LINE__, fc_dtype_name(oa.dtype), fc_dtype_name(obb.dtype));
        return true;
    }
    KirGemm gm = {.batch = nb, .m = M, .n = N,
                  .k = A->shape.dims[A->shape.rank - 1], .stride_a = oa.stride, .stride_b = obb.stride,
                  .stride_c = nb > 1 ? O->shape.dims[r - 2] * O->shape.dims[r - 1] : 0,
                  .trans_a = oa.trans, .trans_b = obb.trans, .dtype = O->dtype,
                  .ab16 = oa.dtype != O->dtype ? (int)oa.dtype : 0};
    (void)B;
    /* one product of a taller A when every product shares B: [batch*m, k] @ [k, n] */
    if (gm.batch > 1 && gm.stride_b == 0 && !gm.trans_a && gm.stride_a == gm.m * gm.k) {
        gm.m *= gm.batch;
        gm.batch = 1;
        gm.stride_a = gm.stride_c = 0;
    }
    if (gm.batch == 1) gm.stride_a = gm.stride_b = gm.stride_c = 0;
    if (kp > 0) {   /* kir_verify refuses panels of a batched product */
        gm.panel_k = kp;
        gm.panel_blocks = bpp;
        gm.panel_m = mb;
        gm.panel_n = nc;
    }
    /* a causal product computes only the part of C its readers keep (not with B in panels, nor
     * with the batch folded into the rows, whose row index is no longer the mask's) */
    if (kp == 0 && gm.m == M && causal) {
        gm.causal = true;
        gm.causal_off = coff;
    }
    gm.zero_tail = kp == 0 && !gm.trans_a && ztail;
    /* A read as a causal row kernel stored it, one value a row from a known column on: the
     * runtime reads that value instead of scanning the row (not with the batch folded into the
     * rows, whose index is then not the mask's) */
    int av = L->p->buffers.data[oa.buf].value;
    if (gm.zero_tail && !oa.trans && gm.m == M && av >= 0 && L->tail_from[av].align > 0 &&
        L->p->buffers.data[oa.buf].dtype == gm.dtype)
        gm.tail = L->tail_from[av];
    int64_t erows = epi ? epilogue_rows(L, &gm, rest, nrest, ublk) : 0;
    if (erows > 0) {
        gm.epi_rows = erows;
        gm.c_block = true;
    }
    if (ar > 0) gm.a_rows = ar;
    if ((ar > 0 || erows > 0) && ublk < gm.m) gm.panel_m = ublk;
    int cbuf = L->buf_of_val[mmv];
    if (gm.c_block) cbuf = add_temp(L, O->dtype, kir_gemm_block_rows(&gm) * gm.n, -1);
    else if (cbuf < 0) cbuf = add_temp(L, O->dtype, numel_of(L, mmv), O->dtype == val(L, mmv)->dtype ? mmv : -1);
    if (cbuf < 0) return true;
    /* C holds only part of the value: the per-kernel check (fusec run --check) cannot compare it */
    if (gm.causal) L->p->buffers.data[cbuf].value = -1;
    char name[96];
    snprintf(name, sizeof name, "k%d_matmul", L->p->kernels.len);
    KirKernel *k = kir_gemm_new(L->p, name, &gm);
    if (!k) { fail_oom(L); return true; }
    L->k = k;
    k->ops = "matmul";
    KirLaunch la = {.kernel = L->p->kernels.len - 1, .nargs = 3};
    la.args = arena_alloc(&L->p->arena, sizeof(int) * 3);
    if (!la.args) { fail_oom(L); return true; }
    la.args[0] = oa.buf;
    la.args[1] = obb.buf;
    la.args[2] = cbuf;
    if (!FC_VEC_PUSH(&L->p->launches, la)) { fail_oom(L); return true; }
    /* the epilogue */
    if (nrest == 0) return true;
    int saved = L->buf_of_val[mmv];
    L->buf_of_val[mmv] = cbuf;
    L->force_load[mmv] = true;
    L->pw_rows = erows;
    schedule_pointwise(L, group, rest, nrest, "pointwise");
    L->pw_rows = 0;
    L->force_load[mmv] = false;
    L->buf_of_val[mmv] = saved;
    if (failed(L)) return true;
    int cprm = L->param_of_buf[cbuf];
    if (gm.c_block && cprm >= 0) L->k->params.data[cprm].numel = gm.m * gm.n;   /* indexes all of C */
    L->k->flops = epi_flops;
    char ops[512];
    group_ops(L, group, ops, sizeof ops);
    /* the epilogue runs what the group does after the product */
    const char *after = strstr(ops, "matmul,");
    after = after ? after + 7 : ops;
    char tag[64];
    snprintf(tag, sizeof tag, "%.*s", (int)strcspn(after, ","), after);
    rename_kernel(L, tag);
    kernel_end(L, after);
    if (gm.c_block && cprm >= 0 && !failed(L))   /* C read in the cache, a block at a time */
        L->k->bytes_read -= L->p->buffers.data[cbuf].numel * (int64_t)fc_dtype_size(O->dtype);
    return true;
}

/* The ops a group runs, for reports: its source op names, comma-separated. */
static void group_ops(Lower *L, int group, char *buf, size_t len) {
    buf[0] = 0;
    int last_origin = -1;
    size_t off = 0;
    for (int i = 0; i < L->g->nodes.len; i++) {
        const IrNode *n = &L->g->nodes.data[i];
        if (L->group_of_node[i] != group || n->origin == last_origin) continue;
        last_origin = n->origin;
        int w = snprintf(buf + off, len - off, "%s%s", off ? "," : "", ir_ops[n->origin_op].name);
        if (w < 0 || (size_t)w >= len - off) break;
        off += (size_t)w;
    }
}

/* scatter_index on the CPU: one block, one thread, the positions in order (scatter_index_kernels). */
static void scatter_index_serial(Lower *L, int group, int ids, const IrShape *is, int64_t rows, int64_t M, int buf) {
    kernel_begin(L, group, "scatter_index", 1, 32);
    if (failed(L)) return;
    rename_kernel(L, "scatter_index");
    int prm = param_for_buf(L, buf, true);
    int one = kir_var(L->k, KT_I64), m = kir_var(L->k, KT_I64), id = kir_var(L->k, KT_I64), c = kir_var(L->k, KT_I64);
    int64_t nxt = 2 * rows, last = 2 * rows + M;
    k_for(L, KIR_LOOP_THREADS, one, ci(L, 0), ci(L, 1));
    k_for(L, KIR_LOOP_SERIAL, m, ci(L, 0), ci(L, M));
    int ii[IR_MAX_RANK];
    delinearize(L, is, vref(L, m), ii);
    kir_let(L->k, id, kir_cast(L->k, KT_I64, emit(L, ids, ii)));
    int bad = check_id(L, vref(L, id), rows);
    kir_store(L->k, prm, ib(L, KB_ADD, ci(L, nxt), vref(L, m)), ci(L, M));
    k_if(L, kir_un(L->k, KU_NOT, bad));
    kir_let(L->k, c, kir_load(L->k, prm, vref(L, id)));
    kir_if(L->k, kir_bin(L->k, KB_EQ, vref(L, c), ci(L, 0)));   /* the row's first: its head */
    kir_store(L->k, prm, ib(L, KB_ADD, ci(L, rows), vref(L, id)), vref(L, m));
    kir_else(L->k);                                               /* else after its last */
    kir_store(L->k, prm, ib(L, KB_ADD, ci(L, nxt), kir_load(L->k, prm, ib(L, KB_ADD, ci(L, last), vref(L, id)))),
              vref(L, m));
    kir_end(L->k);
    kir_store(L->k, prm, ib(L, KB_ADD, ci(L, last), vref(L, id)), vref(L, m));
    kir_store(L->k, prm, vref(L, id), ib(L, KB_ADD, vref(L, c), ci(L, 1)));
    k_end(L);
    k_end(L);
    k_end(L);
    hc_reset(L);
    kernel_end(L, "scatter_add index: counts, first and next positions");
}

/* The index of scatter_add node nd, in a workspace temporary of 2 rows + M i64 (M the ids'
 * elements; on the CPU rows more): [0, rows) how many ids name each row, [rows, 2 rows) the
 * first position that names it, [2 rows, +M) for each position the next one with the same id
 * (M after the last). Two kernels before the group's: scatter_init zeroes the counts;
 * scatter_index flags an id outside [0, rows) as a data error (and stores nothing for it) and
 * fills the rest. On a GPU each position is a thread that scans the ids (M^2 compares in all,
 * in parallel: no atomics, no sort, one writer per word: the first position of an id writes
 * that row's count and first position). On the CPU one task walks the positions in order,
 * appending each to its row's list through a last-position array ([2 rows + M, +rows)): O(M),
 * where the scan would be M^2 / cores. The kernel that computes the sums then reads ids and
 * src once each. */
static void scatter_index_kernels(Lower *L, int group, int nd) {
    const IrNode *n = &L->g->nodes.data[nd];
    int ids = n->in[1];
    const IrShape *is = &val(L, ids)->shape;
    int64_t rows = n->a.i[0], M = numel_of(L, ids), len;
    if (!fc_mul64(rows, L->opt->cpu ? 3 : 2, &len) || !fc_add64(len, M, &len)) {
        if (L->st == FC_OK) L->st = fc_err_set(L->err, FC_ERR_INPUT, "a scatter_add index overflows a 64-bit count");
        return;
    }
    int buf = add_temp(L, FC_I64, len, -1);
    if (failed(L)) return;
    L->scatter_index[nd] = buf;
    int64_t chunk = pw_chunk(L->opt);
    kernel_begin(L, group, "scatter_index", (rows + chunk - 1) / chunk, rows < PW_BLOCK ? (int)((rows + 31) / 32 * 32) : PW_BLOCK);
    if (failed(L)) return;
    rename_kernel(L, "scatter_init");
    int prm = param_for_buf(L, buf, true);
    int lo, hi;
    block_range(L, chunk, rows, &lo, &hi);
    int it = kir_var(L->k, KT_I64);
    k_for(L, KIR_LOOP_THREADS, it, vref(L, lo), vref(L, hi));
    kir_store(L->k, prm, vref(L, it), ci(L, 0));
    k_end(L);
    kernel_end(L, "scatter_add index: zero the counts");
    if (failed(L)) return;

    if (L->opt->cpu) {
        scatter_index_serial(L, group, ids, is, rows, M, buf);
        return;
    }
    enum { SC_CHUNK = 128 };   /* positions a block: M^2 / 128 compares each */
    kernel_begin(L, group, "scatter_index", (M + SC_CHUNK - 1) / SC_CHUNK, SC_CHUNK);
    if (failed(L)) return;
    rename_kernel(L, "scatter_index");
    prm = param_for_buf(L, buf, true);
    int m = kir_var(L->k, KT_I64), id = kir_var(L->k, KT_I64), cnt = kir_var(L->k, KT_I64),
        prev = kir_var(L->k, KT_I64), nx = kir_var(L->k, KT_I64), m2 = kir_var(L->k, KT_I64);
    block_range(L, SC_CHUNK, M, &lo, &hi);
    k_for(L, KIR_LOOP_THREADS, m, vref(L, lo), vref(L, hi));
    int ii[IR_MAX_RANK];
    delinearize(L, is, vref(L, m), ii);
    kir_let(L->k, id, kir_cast(L->k, KT_I64, emit(L, ids, ii)));
    int bad = check_id(L, vref(L, id), rows);
    kir_let(L->k, cnt, ci(L, 0));
    kir_let(L->k, prev, ci(L, 0));
    kir_let(L->k, nx, ci(L, M));
    k_for(L, KIR_LOOP_SERIAL, m2, ci(L, 0), ci(L, M));
    delinearize(L, is, vref(L, m2), ii);
    int same = kir_bin(L->k, KB_EQ, kir_cast(L->k, KT_I64, emit(L, ids, ii)), vref(L, id));
    int one = kir_select(L->k, same, ci(L, 1), ci(L, 0));
    kir_assign(L->k, cnt, ib(L, KB_ADD, vref(L, cnt), one));
    kir_assign(L->k, prev, ib(L, KB_ADD, vref(L, prev),
                              kir_select(L->k, kir_bin(L->k, KB_LT, vref(L, m2), vref(L, m)), one, ci(L, 0))));
    int later = kir_bin(L->k, KB_AND, same, kir_bin(L->k, KB_GT, vref(L, m2), vref(L, m)));
    kir_assign(L->k, nx, kir_bin(L->k, KB_MIN, vref(L, nx), kir_select(L->k, later, vref(L, m2), ci(L, M))));
    k_end(L);
    hc_reset(L);
    kir_store(L->k, prm, ib(L, KB_ADD, ci(L, 2 * rows), vref(L, m)), vref(L, nx));
    k_if(L, kir_bin(L->k, KB_AND, kir_un(L->k, KU_NOT, bad), kir_bin(L->k, KB_EQ, vref(L, prev), ci(L, 0))));
    kir_store(L->k, prm, vref(L, id), vref(L, cnt));
    kir_store(L->k, prm, ib(L, KB_ADD, ci(L, rows), vref(L, id)), vref(L, m));
    k_end(L);
    k_end(L);
    hc_reset(L);
    kernel_end(L, "scatter_add index: counts, first and next positions");
}

static void lower_group(Lower *L, int group) {
    L->cur_group = group;
    int outs[64];
    int nouts = group_outputs(L, group, outs, 64);
    if (nouts == 0) return;          /* dead group */
    if (nouts >= 64) { fail_internal(L, "group with more than 63 outputs", __LINE__); return; }
    const IrNode *mm = NULL;
    bool has_reduce = false;
    int64_t flops = 0, mm_flops = 0;
    for (int i = 0; i < L->g->nodes.len; i++) {
        if (L->group_of_node[i] != group) continue;
        const IrNode *n = &L->g->nodes.data[i];
        IrCategory c = ir_ops[n->op].cat;
        if (c == IR_CAT_MATMUL) {
            if (mm) { fail_internal(L, "two matrix products in one group", __LINE__); return; }
            mm = n;
            mm_flops = ir_node_flops(L->g, n);
        }
        has_reduce |= c == IR_CAT_REDUCE;
        flops += ir_node_flops(L->g, n);
    }
    for (int i = 0; i < L->g->nodes.len && !failed(L); i++)
        if (L->group_of_node[i] == group && ir_ops[L->g->nodes.data[i].op].cat == IR_CAT_SCATTER)
            scatter_index_kernels(L, group, i);
    if (failed(L)) return;
    L->group_kernel = L->p->kernels.len;   /* the group's own kernel, after those index kernels */
    IrShape X;
    int nred = 0;
    const IrNode *cred = NULL;
    int64_t cR = 0, cC = 0;
    if (mm) {
        if (has_reduce) { fail_internal(L, "reduction in a matmul group", __LINE__); return; }
        if (L->opt->library_gemm && schedule_matmul_library(L, group, mm, outs, nouts, flops - mm_flops)) return;
        schedule_matmul(L, group, mm, outs, nouts);
    } else if (has_reduce && row_shape(L, group, outs, nouts, &X, &nred)) {
        schedule_rows(L, group, outs, nouts, &X, nred);
    } else if (has_reduce && col_shape(L, group, &cred, &cR, &cC)) {
        schedule_cols(L, group, cred, cR, cC);
    } else {
        schedule_pointwise(L, group, outs, nouts, has_reduce ? "serial_reduce" : "pointwise");
    }
    if (failed(L)) return;
    L->k->flops = flops;
    char ops[512];
    group_ops(L, group, ops, sizeof ops);
    kernel_end(L, ops);
}

/* A copy kernel for block output j whose value already lives in another buffer. */
static void lower_output_copy(Lower *L, int v, int outbuf) {
    int save = L->buf_of_val[v];
    const IrValue *x = val(L, v);
    int64_t n = numel_of(L, v);
    int64_t chunk = pw_chunk(L->opt);
    kernel_begin(L, -1, "copy", (n + chunk - 1) / chunk, n < PW_BLOCK ? (int)((n + 31) / 32 * 32) : PW_BLOCK);
    if (failed(L)) return;
    int lo, hi;
    block_range(L, chunk, n, &lo, &hi);
    int it = kir_var(L->k, KT_I64);
    k_for(L, KIR_LOOP_THREADS, it, vref(L, lo), vref(L, hi));
    int idx[IR_MAX_RANK];
    delinearize(L, &x->shape, vref(L, it), idx);
    int e = emit_load(L, v, idx);
    kir_store(L->k, param_for_buf(L, outbuf, true), vref(L, it), e);
    k_end(L);
    L->buf_of_val[v] = save;
    kernel_end(L, "copy");
}

static int add_buffer(Lower *L, KirBufKind kind, int index, int v) {
    KirBuffer b = {.kind = kind, .index = index, .dtype = val(L, v)->dtype, .numel = numel_of(L, v), .value = v};
    if (!FC_VEC_PUSH(&L->p->buffers, b)) { fail_oom(L); return -1; }
    return L->p->buffers.len - 1;
}

/* The f8 scaling update, the program's first launch (kir.h, KIR_BUF_STATE): for each slot this
 * graph quantizes with and owns (not read_only), the amax of the last run pushed into the
 * history (newest first, the oldest dropped) and reset to 0, and the scale set to the largest
 * power of two s with
 * s * max(history) <= the format's largest finite value (found by halving and doubling, exact),
 * kept where that maximum is 0 or not finite. One thread a slot: the statements are
 * block-uniform, and a GPU's threads would otherwise race on the history's shift. On a GPU a
 * block a slot (`if (block == k)`), since the search is a serial chain of about 300 dependent
 * steps: one thread doing every slot's took 55 us for the ten slots of the GPT-2 MLP on an H100,
 * a sixth of its forward; on the CPU one block does them all (no thread dispatch). */
static void lower_fp8_update(Lower *L) {
    const IrGraph *g = L->g;
    int nslots = 0;
    for (int i = 0; i < g->nodes.len; i++)
        nslots += g->nodes.data[i].op == IR_OP_FP8_QUANT && !g->fp8.data[g->nodes.data[i].a.i[0]].read_only;
    if (nslots == 0) return;
    bool per_block = !L->opt->cpu;
    kernel_begin(L, -1, "fp8_update", per_block ? nslots : 1, 1);
    if (failed(L)) return;
    rename_kernel(L, "fp8_update");
    int st = param_for_buf(L, L->state_buf, true);
    int blk = -1;
    if (per_block) {
        blk = kir_var(L->k, KT_I64);
        kir_let(L->k, blk, kir_block_idx(L->k));
    }
    for (int i = 0, k = 0; i < g->nodes.len && !failed(L); i++) {
        const IrNode *n = &g->nodes.data[i];
        if (n->op != IR_OP_FP8_QUANT || g->fp8.data[n->a.i[0]].read_only) continue;
        if (per_block) kir_if(L->k, kir_bin(L->k, KB_EQ, vref(L, blk), ci(L, k)));
        k++;
        int64_t base = n->a.i[0] * KIR_FP8_STRIDE;
        double fmax = g->fp8.data[n->a.i[0]].fmt == FC_F8E4M3 ? 448.0 : 57344.0;
        int h[KIR_FP8_HISTORY + 1], m = kir_var(L->k, KT_F32), sv = kir_var(L->k, KT_F32);
        for (int j = 0; j <= KIR_FP8_HISTORY; j++) {   /* h[0]: this run's amax, h[j]: history[j - 1] */
            h[j] = kir_var(L->k, KT_F32);
            kir_let(L->k, h[j], kir_load(L->k, st, ci(L, base + 1 + j)));
        }
        kir_let(L->k, m, vref(L, h[0]));
        for (int j = 1; j < KIR_FP8_HISTORY; j++)   /* the history after the push: h[0 .. H) */
            kir_assign(L->k, m, kir_bin(L->k, KB_MAX, vref(L, m), vref(L, h[j])));
        kir_let(L->k, sv, kir_load(L->k, st, ci(L, base)));
        int F = fconst(L, KT_F32, fmax), half = fconst(L, KT_F32, 0.5);
        int ok = kir_bin(L->k, KB_AND, kir_bin(L->k, KB_GT, vref(L, m), fconst(L, KT_F32, 0.0)),
                         kir_bin(L->k, KB_LT, vref(L, m), fconst(L, KT_F32, INFINITY)));
        kir_if(L->k, ok);
        /* the largest power of two s <= 2^126 with s m <= fmax (api.c fp8_scale_for's rule: from 1,
         * halve while s m > fmax, then double while 2 s m <= fmax), in 15 steps instead of 286:
         * down by 2^64 ... 2^1 while s m stays above fmax, then once more if it is; else up by
         * 2^64 ... 2^1 while it stays at most fmax and s at most 2^126. Every product is exact
         * (a power of two times m, m > fmax when going down), or inf, which compares above. */
        kir_assign(L->k, sv, fconst(L, KT_F32, 1.0));
        for (int e = 64; e >= 1; e /= 2) {
            int dn = kir_bin(L->k, KB_MUL, vref(L, sv), fconst(L, KT_F32, ldexp(1.0, -e)));
            kir_assign(L->k, sv, kir_select(L->k, kir_bin(L->k, KB_GT, kir_bin(L->k, KB_MUL, dn, vref(L, m)), F), dn,
                                            vref(L, sv)));
        }
        kir_assign(L->k, sv, kir_select(L->k, kir_bin(L->k, KB_GT, kir_bin(L->k, KB_MUL, vref(L, sv), vref(L, m)), F),
                                        kir_bin(L->k, KB_MUL, vref(L, sv), half), vref(L, sv)));
        for (int e = 64; e >= 1; e /= 2) {
            int up = kir_bin(L->k, KB_MUL, vref(L, sv), fconst(L, KT_F32, ldexp(1.0, e)));
            int fits = kir_bin(L->k, KB_AND, kir_bin(L->k, KB_LE, kir_bin(L->k, KB_MUL, up, vref(L, m)), F),
                               kir_bin(L->k, KB_LE, up, fconst(L, KT_F32, 0x1p126)));
            kir_assign(L->k, sv, kir_select(L->k, fits, up, vref(L, sv)));
        }
        kir_end(L->k);
        kir_store(L->k, st, ci(L, base), vref(L, sv));
        kir_store(L->k, st, ci(L, base + 1), fconst(L, KT_F32, 0.0));
        for (int j = 0; j < KIR_FP8_HISTORY; j++) kir_store(L->k, st, ci(L, base + 2 + j), vref(L, h[j]));
        if (per_block) kir_end(L->k);
        hc_reset(L);
    }
    kernel_end(L, "fp8_update");
}

/* A planted miscompile, for the tests of the tools that find one (fusec run --check, --bisect;
 * docs/testing.md): with FUSEC_PLANT_BUG=OP in the environment, a fused program computes the
 * first result of the graph's first elementwise node of op OP times 1 + 2^-4, wherever a kernel
 * computes it (stored, or recomputed inline). The unfused program and the graph are untouched,
 * so the reference interpreter and the per-kernel check's reference are right. */
static FcStatus plant_target(const IrGraph *g, const PassOptions *opt, int *value, FcErr *err) {
    *value = -1;
    const char *e = opt->fuse ? getenv("FUSEC_PLANT_BUG") : NULL;
    if (!e || !*e) return FC_OK;
    int op = ir_op_lookup(e);
    if (op < 0) return fc_err_set(err, FC_ERR_USAGE, "FUSEC_PLANT_BUG='%.64s' names no op", e);
    for (int i = 0; i < g->nodes.len && *value < 0; i++) {
        const IrNode *n = &g->nodes.data[i];
        IrCategory c = ir_ops[n->op].cat;
        if ((int)n->op == op && (c == IR_CAT_UNARY || c == IR_CAT_BINARY) && ir_dtype_is_float(ir_cval(g, n->out[0])->dtype))
            *value = n->out[0];
    }
    return FC_OK;
}

/* pass_lower, and red_block (NULL, or [nodes] zeroed) receives each row reduction's thread
 * count (Lower.red_block) */
static FcStatus lower_program(const IrGraph *g, const PassOptions *opt, const int *group_of_node,
                              KirProgram **out, int *node_kernel, int *red_block, FcErr *err) {
    *out = NULL;
    Lower L = {.g = g, .opt = opt, .err = err, .red_block = red_block};
    int nn = g->nodes.len, nv = g->values.len;
    L.p = kir_program_new(g->name);
    if (L.p && opt->cpu) L.p->vector_bytes = opt->host.vector_bytes;
    L.group_of_node = fc_calloc((size_t)nn + 1, sizeof(int));
    L.group_first = fc_calloc((size_t)nn + 1, sizeof(int));
    L.group_origin_op = fc_calloc((size_t)nn + 1, sizeof(int));
    L.group_is_view = fc_calloc((size_t)nn + 1, sizeof(bool));
    L.used_outside = fc_calloc((size_t)nv + 1, sizeof(bool));
    L.buf_of_val = fc_calloc((size_t)nv + 1, sizeof(int));
    L.bound = fc_calloc((size_t)nv + 1, sizeof(int));
    L.force_load = fc_calloc((size_t)nv + 1, sizeof(bool));
    L.row_shared = fc_calloc((size_t)nv + 1, sizeof(int));
    L.whole_shared = fc_calloc((size_t)nv + 1, sizeof(int));
    L.tail_node = fc_calloc((size_t)nn + 1, sizeof(bool));
    L.scatter_index = fc_calloc((size_t)nn + 1, sizeof(int));
    L.deq_only = fc_calloc((size_t)nv + 1, sizeof(bool));
    L.eager_stored = fc_calloc((size_t)nv + 1, sizeof(bool));
    L.tail_from = fc_calloc((size_t)nv + 1, sizeof(KirTail));
    if (!L.eager_stored || !L.tail_from || !L.p || !L.group_of_node || !L.group_first || !L.group_origin_op || !L.group_is_view ||
        !L.used_outside || !L.buf_of_val || !L.bound || !L.force_load || !L.row_shared || !L.whole_shared || !L.tail_node || !L.scatter_index ||
        !L.deq_only) {
        fail_oom(&L);
        goto done;
    }
    for (int i = 0; i < nn; i++) L.scatter_index[i] = -1;
    for (int v = 0; v < nv; v++) L.deq_only[v] = true;
    for (int i = 0; i < g->outputs.len; i++) L.deq_only[g->outputs.data[i]] = false;
    for (int i = 0; i < nn; i++)
        for (int j = 0; j < g->nodes.data[i].nin; j++)
            if (g->nodes.data[i].op != IR_OP_FP8_DEQUANT || j != 0) L.deq_only[g->nodes.data[i].in[j]] = false;
    if (opt->strict_rounding) {
        /* eager's kernels: the groups fuse.c makes without fusion (the nodes of one source op,
         * split where one kernel cannot hold them: an elementwise op and a column reduction of a
         * backward rule); what crosses between them, or leaves the block, eager stores */
        PassOptions eo = *opt;
        eo.fuse = false;
        int *eg = fc_calloc((size_t)nn + 1, sizeof(int));
        if (!eg) { fail_oom(&L); goto done; }
        if ((L.st = pass_fuse(g, &eo, eg, NULL, err)) != FC_OK) { fc_free(eg); goto done; }
        for (int i = 0; i < g->outputs.len; i++) L.eager_stored[g->outputs.data[i]] = true;
        for (int i = 0; i < nn; i++)
            for (int j = 0; j < g->nodes.data[i].nin; j++) {
                int p = g->values.data[g->nodes.data[i].in[j]].node;
                if (p >= 0 && eg[p] != eg[i]) L.eager_stored[g->nodes.data[i].in[j]] = true;
            }
        /* and the eager kernels' reduction orders: the eager program itself, lowered (its
         * thread counts come out of its own schedules) */
        eo.strict_rounding = false;
        L.eager_red_block = fc_calloc((size_t)nn + 1, sizeof(int));
        KirProgram *ep = NULL;
        if (!L.eager_red_block) L.st = FC_OOM(err);
        else L.st = lower_program(g, &eo, eg, &ep, NULL, L.eager_red_block, err);
        kir_program_free(ep);
        fc_free(eg);
        if (L.st != FC_OK) goto done;
    }
    if ((L.st = plant_target(g, opt, &L.plant, err)) != FC_OK) goto done;

    /* 1. groups, numbered in a topological order of the group graph: a group comes after
     * every group it reads (Kahn's algorithm over groups, smallest first node first) */
    {
        int *rep_group = fc_calloc((size_t)nn + 1, sizeof(int));
        int *indeg = fc_calloc((size_t)nn + 1, sizeof(int));
        bool *placed = fc_calloc((size_t)nn + 1, sizeof(bool));
        if (!rep_group || !indeg || !placed) {
            fc_free(rep_group); fc_free(indeg); fc_free(placed);
            fail_oom(&L);
            goto done;
        }
        for (int i = 0; i < nn; i++) rep_group[i] = -1;
        int nrep = 0;
        for (int i = 0; i < nn; i++) {
            int r = group_of_node[i];
            if (r < 0 || r >= nn) { fail_internal(&L, "bad group id", __LINE__); break; }
            if (rep_group[r] < 0) rep_group[r] = nrep++;
        }
        /* count, per group, the nodes of other groups it reads (with repeats) */
        for (int i = 0; i < nn && !failed(&L); i++) {
            const IrNode *n = &g->nodes.data[i];
            for (int j = 0; j < n->nin; j++) {
                int p = val(&L, n->in[j])->node;
                if (p >= 0 && group_of_node[p] != group_of_node[i]) indeg[rep_group[group_of_node[i]]]++;
            }
        }
        while (!failed(&L) && L.ngroups < nrep) {
            int pick = -1;
            for (int i = 0; i < nn; i++) {
                int gi = rep_group[group_of_node[i]];
                if (!placed[gi] && indeg[gi] == 0) { pick = gi; break; }
            }
            if (pick < 0) { fail_internal(&L, "the groups form a cycle", __LINE__); break; }
            placed[pick] = true;
            int gnum = L.ngroups++;
            bool first = true;
            for (int i = 0; i < nn; i++) {
                if (rep_group[group_of_node[i]] != pick) continue;
                L.group_of_node[i] = gnum;
                if (first) {
                    L.group_first[gnum] = i;
                    L.group_origin_op[gnum] = g->nodes.data[i].origin_op;
                    first = false;
                }
            }
            for (int i = 0; i < nn; i++) {
                const IrNode *n = &g->nodes.data[i];
                for (int j = 0; j < n->nin; j++) {
                    int p = val(&L, n->in[j])->node;
                    if (p >= 0 && rep_group[group_of_node[p]] == pick && group_of_node[i] != group_of_node[p])
                        indeg[rep_group[group_of_node[i]]]--;
                }
            }
        }
        fc_free(rep_group);
        fc_free(indeg);
        fc_free(placed);
        if (failed(&L)) goto done;
        /* a kernel is named for its heaviest source op: a matmul, else a reduction's op */
        for (int i = 0; i < nn; i++) {
            const IrNode *n = &g->nodes.data[i];
            int gr = L.group_of_node[i];
            IrCategory c = ir_ops[n->op].cat, cur = ir_ops[L.group_origin_op[gr]].cat;
            if (c == IR_CAT_MATMUL || (c == IR_CAT_REDUCE && cur != IR_CAT_MATMUL && n->origin_op != IR_OP_MATMUL))
                L.group_origin_op[gr] = c == IR_CAT_MATMUL ? IR_OP_MATMUL : n->origin_op;
        }
        /* lone reshapes are views */
        int *count = fc_calloc((size_t)L.ngroups + 1, sizeof(int));
        if (!count) { fail_oom(&L); goto done; }
        for (int i = 0; i < nn; i++) count[L.group_of_node[i]]++;
        for (int gr = 0; gr < L.ngroups; gr++)
            L.group_is_view[gr] = count[gr] == 1 && g->nodes.data[L.group_first[gr]].op == IR_OP_RESHAPE &&
                                  !is_generated(&L, g->nodes.data[L.group_first[gr]].in[0]);
        fc_free(count);
    }
    if (failed(&L)) goto done;

    /* 2. which values cross a group boundary */
    for (int i = 0; i < nn; i++) {
        const IrNode *n = &g->nodes.data[i];
        for (int j = 0; j < n->nin; j++) {
            int u = n->in[j];
            int p = val(&L, u)->node;
            if (is_generated(&L, u)) continue;
            if (p < 0 || L.group_of_node[p] != L.group_of_node[i]) L.used_outside[u] = true;
        }
    }
    for (int j = 0; j < g->outputs.len; j++) L.used_outside[g->outputs.data[j]] = true;

    /* 3. buffers: inputs, outputs, views, temporaries */
    for (int v = 0; v < nv; v++) L.buf_of_val[v] = -1;
    for (int i = 0; i < g->inputs.len; i++)
        L.buf_of_val[g->inputs.data[i]] = add_buffer(&L, KIR_BUF_INPUT, i, g->inputs.data[i]);
    int *out_buf = fc_calloc((size_t)g->outputs.len + 1, sizeof(int));
    bool *out_copy = fc_calloc((size_t)g->outputs.len + 1, sizeof(bool));
    if (!out_buf || !out_copy) { fc_free(out_buf); fc_free(out_copy); fail_oom(&L); goto done; }
    for (int j = 0; j < g->outputs.len && !failed(&L); j++) {
        int v = g->outputs.data[j];
        const IrValue *x = val(&L, v);
        bool is_view = x->node >= 0 && L.group_is_view[L.group_of_node[x->node]];
        out_buf[j] = add_buffer(&L, KIR_BUF_OUTPUT, j, v);
        if (x->node < 0 || is_view || L.buf_of_val[v] >= 0) out_copy[j] = true;
        else L.buf_of_val[v] = out_buf[j];
    }
    L.state_buf = -1;
    if (g->fp8.len > 0 && !failed(&L)) {   /* a few slots: no overflow */
        KirBuffer b = {.kind = KIR_BUF_STATE, .index = 0, .dtype = FC_F32, .numel = (int64_t)g->fp8.len * KIR_FP8_STRIDE,
                       .value = -1};
        if (!FC_VEC_PUSH(&L.p->buffers, b)) fail_oom(&L);
        L.state_buf = L.p->buffers.len - 1;
    }
    int64_t ws = 0;
    for (int v = 0; v < nv && !failed(&L); v++) {
        const IrValue *x = val(&L, v);
        if (x->node < 0 || L.buf_of_val[v] >= 0) continue;
        int gr = L.group_of_node[x->node];
        if (L.group_is_view[gr]) {
            /* aliases its input's buffer (inputs come first: nodes are in order) */
            const IrNode *n = &g->nodes.data[x->node];
            L.buf_of_val[v] = L.buf_of_val[n->in[0]];
            continue;
        }
        if (!L.used_outside[v]) continue;
        int b = add_buffer(&L, KIR_BUF_TEMP, -1, v);
        if (b < 0) break;
        /* --strict-rounding: a 16- or 8-bit value that crosses between this program's kernels
         * but not between eager's (one source op made of several kernels here: a backward rule
         * split by a reduction) keeps its f32 bits in memory, as eager keeps it in registers;
         * not a rounded fp8_quant, whose store is its rounding (emit_fp8; a wide one is x * s) */
        if (opt->strict_rounding && narrow_float(x->dtype) && !L.eager_stored[v] &&
            (g->nodes.data[x->node].op != IR_OP_FP8_QUANT || fp8_wide(&L, v)))
            L.p->buffers.data[b].dtype = FC_F32;
        int64_t bytes, aligned;
        if (!ir_shape_nbytes(&x->shape, L.p->buffers.data[b].dtype, &bytes) || !fc_add64(bytes, 255, &aligned) ||
            !fc_add64(ws, aligned / 256 * 256, &ws)) {
            L.st = fc_err_set(err, FC_ERR_INPUT, "the workspace of block '%s' overflows a 64-bit byte count", g->name);
            break;
        }
        L.p->buffers.data[b].offset = ws - aligned / 256 * 256;
        L.buf_of_val[v] = b;
    }
    L.p->workspace_bytes = ws;
    /* views whose input got its buffer after them (view of a view) resolve in order */
    for (int v = 0; v < nv; v++) {
        const IrValue *x = val(&L, v);
        if (x->node >= 0 && L.group_is_view[L.group_of_node[x->node]] && L.buf_of_val[v] < 0)
            L.buf_of_val[v] = L.buf_of_val[g->nodes.data[x->node].in[0]];
    }
    L.param_of_buf = fc_calloc((size_t)L.p->buffers.len + 1, sizeof(int));
    if (!L.param_of_buf) fail_oom(&L);

    /* 4. kernels, in group order, then the output copies */
    if (node_kernel)
        for (int i = 0; i < nn; i++) node_kernel[i] = -1;
    if (L.state_buf >= 0 && !failed(&L)) lower_fp8_update(&L);
    for (int gr = 0; gr < L.ngroups && !failed(&L); gr++) {
        if (L.group_is_view[gr]) continue;
        int before = L.p->kernels.len;
        lower_group(&L, gr);
        if (node_kernel && L.p->kernels.len > before)
            for (int i = 0; i < nn; i++)
                if (L.group_of_node[i] == gr) node_kernel[i] = L.group_kernel;
    }
    for (int j = 0; j < g->outputs.len && !failed(&L); j++)
        if (out_copy[j]) lower_output_copy(&L, g->outputs.data[j], out_buf[j]);
    fc_free(out_buf);
    fc_free(out_copy);

done:
    fc_free(L.group_of_node);
    fc_free(L.group_first);
    fc_free(L.group_origin_op);
    fc_free(L.group_is_view);
    fc_free(L.used_outside);
    fc_free(L.buf_of_val);
    fc_free(L.bound);
    fc_free(L.force_load);
    fc_free(L.tail_from);
    fc_free(L.deq_only);
    fc_free(L.eager_stored);
    fc_free(L.eager_red_block);
    fc_free(L.row_shared);
    fc_free(L.whole_shared);
    fc_free(L.tail_node);
    fc_free(L.scatter_index);
    fc_free(L.param_of_buf);
    FC_VEC_FREE(&L.memo);
    FC_VEC_FREE(&L.hc_keys);
    FC_VEC_FREE(&L.hc_ids);
    if (L.st != FC_OK) {
        kir_program_free(L.p);
        return L.st;
    }
    *out = L.p;
    return FC_OK;
}

FcStatus pass_lower(const IrGraph *g, const PassOptions *opt, const int *group_of_node,
                    KirProgram **out, int *node_kernel, FcErr *err) {
    return lower_program(g, opt, group_of_node, out, node_kernel, NULL, err);
}
