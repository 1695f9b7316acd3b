/* kir.c: building and printing the kernel IR (see kir.h).
 *
 * The builder appends statements to the innermost open scope (for/if/reduce), kept as a
 * small stack in the kernel. Allocation failures set k->failed and make every later
 * call a no-op returning -1; callers check kir_kernel_ok once at the end.
 */
#include "kir.h"

#include <stdio.h>
#include <string.h>

static const char *const type_names[KT_COUNT] = {"bool", "i32", "i64", "f32", "f64"};
static const char *const unop_names[KU_COUNT] = {
    "neg", "abs", "exp", "log", "sqrt", "rsqrt", "recip", "tanh", "erf", "sin", "cos", "not", "floor", "ndtr"};
static const char *const binop_names[KB_COUNT] = {
    "add", "sub", "mul", "div", "rem", "pow", "max", "min",
    "lt",  "le",  "gt",  "ge",  "eq",  "ne",  "and", "or"};
static const char *const redop_names[KR_COUNT] = {"sum", "max", "min"};

const char *kir_type_name(KirType t) { return (unsigned)t < KT_COUNT ? type_names[t] : "?"; }
const char *kir_unop_name(KirUnOp op) { return (unsigned)op < KU_COUNT ? unop_names[op] : "?"; }
const char *kir_binop_name(KirBinOp op) { return (unsigned)op < KB_COUNT ? binop_names[op] : "?"; }
const char *kir_redop_name(KirRedOp op) { return (unsigned)op < KR_COUNT ? redop_names[op] : "?"; }

KirType kir_compute_type(FcDtype t) {
    switch (t) {
    case FC_F64: return KT_F64;
    case FC_I32: case FC_I8: return KT_I32;   /* i8: stored in 1 byte, loaded sign-extended */
    case FC_I64: return KT_I64;
    case FC_BOOL: return KT_BOOL;
    default: return KT_F32;
    }
}

/* ---- program ------------------------------------------------------------------------- */
KirProgram *kir_program_new(const char *block_name) {
    KirProgram *p = fc_calloc(1, sizeof *p);
    if (!p) return NULL;
    p->block_name = arena_strdup(&p->arena, block_name ? block_name : "block");
    if (!p->block_name) { fc_free(p); return NULL; }
    return p;
}

static void kernel_free(KirKernel *k) {
    if (!k) return;
    FC_VEC_FREE(&k->params);
    FC_VEC_FREE(&k->exprs);
    FC_VEC_FREE(&k->stmts);
    FC_VEC_FREE(&k->vars);
    FC_VEC_FREE(&k->shared);
    FC_VEC_FREE(&k->tarrays);
    fc_free(k);
}

void kir_program_free(KirProgram *p) {
    if (!p) return;
    for (int i = 0; i < p->kernels.len; i++) kernel_free(p->kernels.data[i]);
    FC_VEC_FREE(&p->kernels);
    FC_VEC_FREE(&p->buffers);
    FC_VEC_FREE(&p->launches);
    arena_free(&p->arena);
    fc_free(p);
}

KirKernel *kir_kernel_new(KirProgram *p, const char *name, int64_t grid, int block) {
    KirKernel *k = fc_calloc(1, sizeof *k);
    if (!k) return NULL;
    k->name = arena_strdup(&p->arena, name);
    k->ops = "";
    k->kind = "";
    k->grid = grid;
    k->block = block;
    k->body = -1;
    k->tail = -1;
    k->top_tail = -1;
    if (!k->name || !FC_VEC_PUSH(&p->kernels, k)) { kernel_free(k); return NULL; }
    return k;
}

int64_t kir_gemm_cols(const KirGemm *g, int64_t r) {
    if (!g->causal) return g->n;
    int64_t c = r + g->causal_off + 1;
    return c < 0 ? 0 : c > g->n ? g->n : c;
}
/* Rows [0, lo) need no column, rows [lo, hi) r + off + 1, rows [hi, r) all n (the verifier keeps
 * off in [-m, n], and m n fits 32 bits: no product here overflows). */
int64_t kir_gemm_cols_before(const KirGemm *g, int64_t r) {
    if (!g->causal) return r * g->n;
    int64_t off = g->causal_off, lo = -off > 0 ? -off : 0;
    if (lo > r) lo = r;
    int64_t hi = g->n - off - 1 > lo ? g->n - off - 1 : lo;
    if (hi > r) hi = r;
    int64_t cnt = hi - lo;
    return cnt * (off + 1) + cnt * (lo + hi - 1) / 2 + (r - hi) * g->n;
}

int64_t kir_tail_col(const KirTail *t, int64_t r, int64_t cols) {
    if (t->align <= 0) return cols;
    int64_t c = r + t->off + t->align;   /* the verifier keeps off in [-2^40, 2^40] */
    c = c <= 0 ? 0 : c / t->align * t->align;
    return c < cols ? c : cols;
}

KirKernel *kir_gemm_new(KirProgram *p, const char *name, const KirGemm *g) {
    KirKernel *k = kir_kernel_new(p, name, 1, 1);
    if (!k) return NULL;
    k->library = true;
    k->gemm = *g;
    k->kind = "library_gemm";
    /* A in blocks: made and read in the cache (its value's bytes are the operand kernel's) */
    int64_t na = g->a_rows > 0 ? 0 : g->stride_a ? g->batch * g->m * g->k : g->m * g->k;
    /* B in panels: made and read in the cache, one panel at a time (its weight's bytes are the
     * operand kernel's); C (or the block of C's rows, panel_m) stays there between them */
    int64_t nb = g->panel_k > 0 ? 0 : g->stride_b ? g->batch * g->k * g->n : g->k * g->n;
    FcDtype ab = kir_gemm_ab_dtype(g);
    kir_param(k, ab, g->stride_a ? (g->batch - 1) * g->stride_a + g->m * g->k : g->m * g->k, false);
    kir_param(k, ab, g->panel_k > 0 ? g->panel_k * (g->panel_n > 0 ? g->panel_n : g->n)
                     : g->stride_b ? (g->batch - 1) * g->stride_b + g->k * g->n : g->k * g->n, false);
    kir_param(k, g->dtype, g->stride_c ? (g->batch - 1) * g->stride_c + g->m * g->n : g->m * g->n, true);
    int64_t es = (int64_t)fc_dtype_size(g->dtype);
    k->bytes_read = (na + nb) * (int64_t)fc_dtype_size(ab);
    /* a causal product writes only the elements its readers keep */
    k->bytes_written = g->batch * kir_gemm_cols_before(g, g->m) * es;
    if (g->c_block) k->bytes_written = 0;   /* C in the cache, a block at a time, read there by the epilogue */
    k->flops = 2 * g->batch * kir_gemm_cols_before(g, g->m) * g->k;
    return k->failed ? NULL : k;
}

void kir_launch_unit(const KirProgram *p, int li, int *lo, int *hi) {
    *lo = *hi = li;
    for (int j = li - 1; j <= li + 2; j++) {   /* the product: li, or a launch near it */
        if (j < 0 || j >= p->launches.len) continue;
        const KirKernel *k = p->kernels.data[p->launches.data[j].kernel];
        if (!k->library) continue;
        int a = j - (k->gemm.panel_k > 0) - (k->gemm.a_rows > 0), b = k->gemm.epi_rows > 0 ? j + 1 : j;
        if (a < 0) a = 0;
        if (b >= p->launches.len) b = p->launches.len - 1;
        if (a <= li && li <= b) {
            *lo = a;
            *hi = b;
            return;
        }
    }
}

/* ---- declarations ---------------------------------------------------------------------- */
int kir_param(KirKernel *k, FcDtype dtype, int64_t numel, bool written) {
    KirParam prm = {dtype, numel, written, false};
    if (k->failed || !FC_VEC_PUSH(&k->params, prm)) { k->failed = true; return -1; }
    return k->params.len - 1;
}
int kir_var(KirKernel *k, KirType t) {
    KirVar v = {t};
    if (k->failed || !FC_VEC_PUSH(&k->vars, v)) { k->failed = true; return -1; }
    return k->vars.len - 1;
}
int kir_shared(KirKernel *k, KirType t, int64_t count) {
    KirShared s = {t, count, -1};
    if (k->failed || !FC_VEC_PUSH(&k->shared, s)) { k->failed = true; return -1; }
    return k->shared.len - 1;
}
int kir_tarray(KirKernel *k, KirType t, int count) {
    KirTArray s = {t, count};
    if (k->failed || !FC_VEC_PUSH(&k->tarrays, s)) { k->failed = true; return -1; }
    return k->tarrays.len - 1;
}

void kir_shared_base(KirKernel *k, int shared, int base) {
    if (k->failed || shared < 0 || shared >= k->shared.len || base < 0 || base >= k->exprs.len) {
        k->failed = true;
        return;
    }
    k->shared.data[shared].base = base;
}
void kir_set_view(KirKernel *k, int load, int view) {
    if (k->failed || load < 0 || load >= k->exprs.len || view < 0 || view >= k->exprs.len ||
        (k->exprs.data[load].kind != KE_LOAD && k->exprs.data[load].kind != KE_SHLOAD)) {
        k->failed = true;
        return;
    }
    k->exprs.data[load].view = view;
}

/* ---- expressions ------------------------------------------------------------------------ */
static int add_expr(KirKernel *k, KirExpr e) {
    e.view = -1;   /* set afterwards by kir_set_view */
    if (k->failed || !FC_VEC_PUSH(&k->exprs, e)) { k->failed = true; return -1; }
    return k->exprs.len - 1;
}
static KirType etype(const KirKernel *k, int e) { return e >= 0 ? k->exprs.data[e].type : KT_I64; }
/* A bad operand (an earlier failure, or a builder misuse) poisons the kernel. */
static bool bad(KirKernel *k, int e) {
    if (e < 0 || e >= k->exprs.len) { k->failed = true; return true; }
    return false;
}

int kir_const_i(KirKernel *k, KirType t, int64_t v) {
    KirExpr e = {.kind = KE_CONST, .type = t, .a = -1, .b = -1, .c = -1, .ref = -1, .ival = v,
                 .fval = (double)v};
    return add_expr(k, e);
}
int kir_const_f(KirKernel *k, KirType t, double v) {
    KirExpr e = {.kind = KE_CONST, .type = t, .a = -1, .b = -1, .c = -1, .ref = -1, .fval = v,
                 .ival = (int64_t)0};
    return add_expr(k, e);
}
int kir_var_ref(KirKernel *k, int var) {
    if (var < 0 || var >= k->vars.len) { k->failed = true; return -1; }
    KirExpr e = {.kind = KE_VAR, .type = k->vars.data[var].type, .a = -1, .b = -1, .c = -1,
                 .ref = var};
    return add_expr(k, e);
}
int kir_load(KirKernel *k, int param, int idx) {
    if (bad(k, idx) || param < 0 || param >= k->params.len) { k->failed = true; return -1; }
    KirExpr e = {.kind = KE_LOAD, .type = kir_compute_type(k->params.data[param].dtype),
                 .a = idx, .b = -1, .c = -1, .ref = param};
    return add_expr(k, e);
}
int kir_shload(KirKernel *k, int shared, int idx) {
    if (bad(k, idx) || shared < 0 || shared >= k->shared.len) { k->failed = true; return -1; }
    KirExpr e = {.kind = KE_SHLOAD, .type = k->shared.data[shared].type, .a = idx, .b = -1,
                 .c = -1, .ref = shared};
    return add_expr(k, e);
}
int kir_tload(KirKernel *k, int tarray, int idx) {
    if (bad(k, idx) || tarray < 0 || tarray >= k->tarrays.len) { k->failed = true; return -1; }
    KirExpr e = {.kind = KE_TLOAD, .type = k->tarrays.data[tarray].type, .a = idx, .b = -1,
                 .c = -1, .ref = tarray};
    return add_expr(k, e);
}
int kir_un(KirKernel *k, KirUnOp op, int a) {
    if (bad(k, a)) return -1;
    KirType t = op == KU_NOT ? KT_BOOL : etype(k, a);
    KirExpr e = {.kind = KE_UNARY, .type = t, .a = a, .b = -1, .c = -1, .ref = -1, .op = op};
    return add_expr(k, e);
}
int kir_bin(KirKernel *k, KirBinOp op, int a, int b) {
    if (bad(k, a) || bad(k, b)) return -1;
    KirType t = (op >= KB_LT && op <= KB_NE) ? KT_BOOL : etype(k, a);
    KirExpr e = {.kind = KE_BINARY, .type = t, .a = a, .b = b, .c = -1, .ref = -1, .op = op};
    return add_expr(k, e);
}
int kir_select(KirKernel *k, int c, int a, int b) {
    if (bad(k, c) || bad(k, a) || bad(k, b)) return -1;
    KirExpr e = {.kind = KE_SELECT, .type = etype(k, a), .a = c, .b = a, .c = b, .ref = -1};
    return add_expr(k, e);
}
int kir_cast(KirKernel *k, KirType t, int a) {
    if (bad(k, a)) return -1;
    if (etype(k, a) == t) return a;
    KirExpr e = {.kind = KE_CAST, .type = t, .a = a, .b = -1, .c = -1, .ref = -1};
    return add_expr(k, e);
}
int kir_round(KirKernel *k, FcDtype storage, int a) {
    if (bad(k, a)) return -1;
    if (storage == FC_F32 || storage == FC_F64 || !ir_dtype_is_float(storage)) return a;
    /* rounding is idempotent: a value rounded to `storage` already (a widened 16-bit value a
     * cast rounds again, the lowering's round of a stored value it reads back) stays as it is */
    const KirExpr *x = &k->exprs.data[a];
    if (x->kind == KE_ROUND && x->dtype == storage) return a;
    KirExpr e = {.kind = KE_ROUND, .type = etype(k, a), .a = a, .b = -1, .c = -1, .ref = -1,
                 .dtype = storage};
    return add_expr(k, e);
}
int kir_block_idx(KirKernel *k) {
    KirExpr e = {.kind = KE_BLOCK_IDX, .type = KT_I64, .a = -1, .b = -1, .c = -1, .ref = -1};
    return add_expr(k, e);
}
int kir_philox(KirKernel *k, int ctr_lo, int ctr_hi, int key) {
    if (bad(k, ctr_lo) || bad(k, ctr_hi) || bad(k, key)) return -1;
    KirExpr e = {.kind = KE_PHILOX, .type = KT_I64, .a = ctr_lo, .b = ctr_hi, .c = key, .ref = -1};
    return add_expr(k, e);
}

/* ---- statements ------------------------------------------------------------------------- */
static int add_stmt(KirKernel *k, KirStmt s) {
    if (k->failed) return -1;
    s.next = -1;
    if (!FC_VEC_PUSH(&k->stmts, s)) { k->failed = true; return -1; }
    int id = k->stmts.len - 1;
    if (k->nscope == 0) {
        if (k->top_tail < 0) *(k->in_tail ? &k->tail : &k->body) = id;
        else k->stmts.data[k->top_tail].next = id;
        k->top_tail = id;
    } else {
        int sc = k->nscope - 1;
        KirStmt *owner = &k->stmts.data[k->scope[sc].stmt];
        if (k->scope[sc].tail < 0) {
            if (k->scope[sc].in_else) owner->body2 = id;
            else owner->body = id;
        } else {
            k->stmts.data[k->scope[sc].tail].next = id;
        }
        k->scope[sc].tail = id;
    }
    return id;
}
static KirStmt stmt0(KirStmtKind kind) {
    KirStmt s = {.kind = kind, .var = -1, .loop_var = -1, .ref = -1, .a = -1, .b = -1, .c = -1,
                 .body = -1, .body2 = -1, .next = -1};
    return s;
}
static void open_scope(KirKernel *k, int id) {
    if (id < 0) return;
    if (k->nscope >= (int)(sizeof k->scope / sizeof k->scope[0])) { k->failed = true; return; }
    k->scope[k->nscope].stmt = id;
    k->scope[k->nscope].tail = -1;
    k->scope[k->nscope].in_else = 0;
    k->nscope++;
}

void kir_let(KirKernel *k, int var, int value) {
    if (bad(k, value)) return;
    KirStmt s = stmt0(KS_LET); s.var = var; s.a = value;
    add_stmt(k, s);
}
void kir_assign(KirKernel *k, int var, int value) {
    if (bad(k, value)) return;
    KirStmt s = stmt0(KS_ASSIGN); s.var = var; s.a = value;
    add_stmt(k, s);
}
void kir_store(KirKernel *k, int param, int idx, int value) {
    if (bad(k, idx) || bad(k, value)) return;
    KirStmt s = stmt0(KS_STORE); s.ref = param; s.a = idx; s.b = value;
    add_stmt(k, s);
}
void kir_shstore(KirKernel *k, int shared, int idx, int value) {
    if (bad(k, idx) || bad(k, value)) return;
    KirStmt s = stmt0(KS_SHSTORE); s.ref = shared; s.a = idx; s.b = value;
    add_stmt(k, s);
}
void kir_tstore(KirKernel *k, int tarray, int idx, int value) {
    if (bad(k, idx) || bad(k, value)) return;
    KirStmt s = stmt0(KS_TSTORE); s.ref = tarray; s.a = idx; s.b = value;
    add_stmt(k, s);
}
void kir_barrier(KirKernel *k) { add_stmt(k, stmt0(KS_BARRIER)); }
void kir_error_if(KirKernel *k, int cond, FcStatus code) {
    if (bad(k, cond)) return;
    KirStmt s = stmt0(KS_ERROR); s.a = cond; s.code = (int)code;
    k->uses_status = true;
    add_stmt(k, s);
}
void kir_amax(KirKernel *k, int param, int idx, int value) {
    if (bad(k, idx) || bad(k, value)) return;
    KirStmt s = stmt0(KS_AMAX); s.ref = param; s.a = idx; s.b = value;
    add_stmt(k, s);
}
int64_t kir_amax_element(const KirKernel *k, const KirStmt *st) {
    if (st->kind != KS_AMAX || st->ref < 0 || st->ref >= k->params.len || st->a < 0 || st->a >= k->exprs.len) return -1;
    const KirParam *prm = &k->params.data[st->ref];
    const KirExpr *ix = &k->exprs.data[st->a];
    if (!prm->written || prm->dtype != FC_F32 || ix->kind != KE_CONST || ix->type != KT_I64 || ix->ival < 0 ||
        ix->ival >= prm->numel)
        return -1;
    return ix->ival;
}
void kir_for(KirKernel *k, KirLoopKind kind, int var, int lo, int hi) {
    if (bad(k, lo) || bad(k, hi)) return;
    KirStmt s = stmt0(KS_FOR); s.var = var; s.a = lo; s.b = hi; s.loop = kind;
    open_scope(k, add_stmt(k, s));
}
void kir_if(KirKernel *k, int cond) {
    if (bad(k, cond)) return;
    KirStmt s = stmt0(KS_IF); s.a = cond;
    open_scope(k, add_stmt(k, s));
}
void kir_else(KirKernel *k) {
    if (k->failed) return;
    if (k->nscope == 0 || k->stmts.data[k->scope[k->nscope - 1].stmt].kind != KS_IF ||
        k->scope[k->nscope - 1].in_else) { k->failed = true; return; }
    k->scope[k->nscope - 1].in_else = 1;
    k->scope[k->nscope - 1].tail = -1;
}
void kir_reduce(KirKernel *k, KirRedOp op, int result_var, int loop_var, int lo, int hi) {
    if (bad(k, lo) || bad(k, hi)) return;
    KirStmt s = stmt0(KS_REDUCE); s.var = result_var; s.loop_var = loop_var; s.a = lo; s.b = hi;
    s.redop = op;
    open_scope(k, add_stmt(k, s));
}
void kir_reduce_lanes(KirKernel *k, int lanes) {
    if (k->failed) return;
    if (k->nscope == 0 || k->stmts.data[k->scope[k->nscope - 1].stmt].kind != KS_REDUCE) { k->failed = true; return; }
    k->stmts.data[k->scope[k->nscope - 1].stmt].lanes = lanes;
}
void kir_end_reduce(KirKernel *k, int value) {
    if (k->failed) return;
    if (k->nscope == 0 || bad(k, value)) { k->failed = true; return; }
    KirStmt *s = &k->stmts.data[k->scope[k->nscope - 1].stmt];
    if (s->kind != KS_REDUCE) { k->failed = true; return; }
    s->c = value;
    k->nscope--;
}
void kir_end(KirKernel *k) {
    if (k->failed) return;
    if (k->nscope == 0) { k->failed = true; return; }
    if (k->stmts.data[k->scope[k->nscope - 1].stmt].kind == KS_REDUCE) { k->failed = true; return; }
    k->nscope--;
}
void kir_begin_tail(KirKernel *k) {
    if (k->failed) return;
    if (k->nscope != 0 || k->in_tail) { k->failed = true; return; }
    k->in_tail = true;
    k->top_tail = -1;
}
bool kir_kernel_ok(const KirKernel *k) { return k && !k->failed && k->nscope == 0; }

/* ---- vectorization hints ---------------------------------------------------------------- */
void kir_for_vec(KirKernel *k, int var, int lo, int hi, int width) {
    if (bad(k, lo) || bad(k, hi)) return;
    KirStmt s = stmt0(KS_FOR); s.var = var; s.a = lo; s.b = hi; s.loop = KIR_LOOP_THREADS;
    s.vec = width > 1 ? width : 0;
    open_scope(k, add_stmt(k, s));
}
int kir_load_vec(KirKernel *k, int param, int idx) {
    int e = kir_load(k, param, idx);
    if (e >= 0) k->exprs.data[e].vec = true;
    return e;
}
int kir_shload_vec(KirKernel *k, int shared, int idx) {
    int e = kir_shload(k, shared, idx);
    if (e >= 0) k->exprs.data[e].vec = true;
    return e;
}
void kir_store_vec(KirKernel *k, int param, int idx, int value) {
    if (bad(k, idx) || bad(k, value)) return;
    KirStmt s = stmt0(KS_STORE); s.ref = param; s.a = idx; s.b = value; s.vec = 1;
    add_stmt(k, s);
}
void kir_shstore_vec(KirKernel *k, int shared, int idx, int value) {
    if (bad(k, idx) || bad(k, value)) return;
    KirStmt s = stmt0(KS_SHSTORE); s.ref = shared; s.a = idx; s.b = value; s.vec = 1;
    add_stmt(k, s);
}

/* ---- printer ----------------------------------------------------------------------------- */
static void print_expr(const KirKernel *k, int id, StrBuf *o) {
    if (id < 0 || id >= k->exprs.len) { sb_puts(o, "<bad>"); return; }
    const KirExpr *e = &k->exprs.data[id];
    char num[64];
    switch (e->kind) {
    case KE_CONST:
        if (e->type == KT_F32 || e->type == KT_F64) {
            fc_fmt_double(num, sizeof num, e->fval);
            sb_printf(o, "%s:%s", num, type_names[e->type]);
        } else if (e->type == KT_BOOL) {
            sb_puts(o, e->ival ? "true" : "false");
        } else {
            sb_printf(o, "%lld", (long long)e->ival);
            if (e->type == KT_I32) sb_puts(o, ":i32");
        }
        break;
    case KE_VAR: sb_printf(o, "v%d", e->ref); break;
    case KE_LOAD:
    case KE_SHLOAD:
        sb_printf(o, "%s%d[%s", e->kind == KE_LOAD ? "p" : "sh", e->ref, e->vec ? "vec " : "");
        print_expr(k, e->a, o);
        if (e->view >= 0) { sb_puts(o, " view "); print_expr(k, e->view, o); }
        sb_putc(o, ']');
        break;
    case KE_TLOAD: sb_printf(o, "ta%d[", e->ref); print_expr(k, e->a, o); sb_putc(o, ']'); break;
    case KE_UNARY:
        sb_printf(o, "%s(", unop_names[e->op]); print_expr(k, e->a, o); sb_putc(o, ')');
        break;
    case KE_BINARY:
        sb_printf(o, "%s(", binop_names[e->op]); print_expr(k, e->a, o); sb_puts(o, ", ");
        print_expr(k, e->b, o); sb_putc(o, ')');
        break;
    case KE_SELECT:
        sb_puts(o, "select("); print_expr(k, e->a, o); sb_puts(o, ", "); print_expr(k, e->b, o);
        sb_puts(o, ", "); print_expr(k, e->c, o); sb_putc(o, ')');
        break;
    case KE_CAST: sb_printf(o, "%s(", type_names[e->type]); print_expr(k, e->a, o); sb_putc(o, ')'); break;
    case KE_ROUND:
        sb_printf(o, "round_%s(", fc_dtype_name(e->dtype)); print_expr(k, e->a, o); sb_putc(o, ')');
        break;
    case KE_BLOCK_IDX: sb_puts(o, "block_idx"); break;
    case KE_PHILOX:
        sb_puts(o, "philox("); print_expr(k, e->a, o); sb_puts(o, ", "); print_expr(k, e->b, o);
        sb_puts(o, ", "); print_expr(k, e->c, o); sb_putc(o, ')');
        break;
    default: sb_puts(o, "<?>"); break;
    }
}

static void indent(StrBuf *o, int d) { for (int i = 0; i < d; i++) sb_puts(o, "  "); }

static void print_list(const KirKernel *k, int s, int d, StrBuf *o) {
    for (; s >= 0; s = k->stmts.data[s].next) {
        const KirStmt *st = &k->stmts.data[s];
        indent(o, d);
        switch (st->kind) {
        case KS_LET:
            sb_printf(o, "let v%d: %s = ", st->var, type_names[k->vars.data[st->var].type]);
            print_expr(k, st->a, o); sb_putc(o, '\n');
            break;
        case KS_ASSIGN: sb_printf(o, "v%d = ", st->var); print_expr(k, st->a, o); sb_putc(o, '\n'); break;
        case KS_STORE:
            sb_printf(o, "p%d[%s", st->ref, st->vec ? "vec " : ""); print_expr(k, st->a, o); sb_puts(o, "] = ");
            print_expr(k, st->b, o); sb_putc(o, '\n');
            break;
        case KS_SHSTORE:
            sb_printf(o, "sh%d[%s", st->ref, st->vec ? "vec " : ""); print_expr(k, st->a, o); sb_puts(o, "] = ");
            print_expr(k, st->b, o); sb_putc(o, '\n');
            break;
        case KS_TSTORE:
            sb_printf(o, "ta%d[", st->ref); print_expr(k, st->a, o); sb_puts(o, "] = ");
            print_expr(k, st->b, o); sb_putc(o, '\n');
            break;
        case KS_FOR:
            sb_printf(o, "for%s v%d in [", st->loop == KIR_LOOP_THREADS ? " threads" : "", st->var);
            print_expr(k, st->a, o); sb_puts(o, ", "); print_expr(k, st->b, o); sb_putc(o, ')');
            if (st->loop == KIR_LOOP_THREADS && st->vec > 1) sb_printf(o, " vec %d", st->vec);
            sb_puts(o, " {\n");
            print_list(k, st->body, d + 1, o);
            indent(o, d); sb_puts(o, "}\n");
            break;
        case KS_IF:
            sb_puts(o, "if "); print_expr(k, st->a, o); sb_puts(o, " {\n");
            print_list(k, st->body, d + 1, o);
            if (st->body2 >= 0) {
                indent(o, d); sb_puts(o, "} else {\n");
                print_list(k, st->body2, d + 1, o);
            }
            indent(o, d); sb_puts(o, "}\n");
            break;
        case KS_REDUCE:
            sb_printf(o, "let v%d: %s = reduce_%s threads v%d in [", st->var,
                      type_names[k->vars.data[st->var].type], redop_names[st->redop], st->loop_var);
            print_expr(k, st->a, o); sb_puts(o, ", "); print_expr(k, st->b, o); sb_putc(o, ')');
            if (st->lanes) sb_printf(o, " lanes %d", st->lanes);
            sb_puts(o, " {\n");
            print_list(k, st->body, d + 1, o);
            indent(o, d + 1); sb_puts(o, "yield "); print_expr(k, st->c, o); sb_putc(o, '\n');
            indent(o, d); sb_puts(o, "}\n");
            break;
        case KS_BARRIER: sb_puts(o, "barrier\n"); break;
        case KS_ERROR:
            sb_printf(o, "error_if(%s) ", fc_status_name((FcStatus)st->code));
            print_expr(k, st->a, o); sb_putc(o, '\n');
            break;
        case KS_AMAX:
            sb_printf(o, "amax p%d[", st->ref); print_expr(k, st->a, o); sb_puts(o, "] <- |");
            print_expr(k, st->b, o); sb_puts(o, "|\n");
            break;
        default: sb_puts(o, "<?>\n"); break;
        }
    }
}

void kir_print_kernel(const KirKernel *k, StrBuf *o) {
    if (k->library) {
        const KirGemm *g = &k->gemm;
        sb_printf(o, "library %s gemm %s%s%s batch=%lld m=%lld n=%lld k=%lld trans_a=%d trans_b=%d "
                     "stride_a=%lld stride_b=%lld stride_c=%lld ops=[%s]\n",
                  k->name, fc_dtype_name(g->dtype), g->ab16 ? " operands=" : "",
                  g->ab16 ? fc_dtype_name(kir_gemm_ab_dtype(g)) : "", (long long)g->batch, (long long)g->m, (long long)g->n,
                  (long long)g->k, g->trans_a, g->trans_b, (long long)g->stride_a, (long long)g->stride_b,
                  (long long)g->stride_c, k->ops);
        if (g->panel_k > 0)
            sb_printf(o, "  # B in panels of %lld rows, %lld blocks of the operand kernel each\n", (long long)g->panel_k,
                      (long long)g->panel_blocks);
        if (g->panel_n > 0)
            sb_printf(o, "  # B's columns in chunks of %lld, a panel of each chunk at a time\n", (long long)g->panel_n);
        if (g->panel_m > 0 && g->panel_k > 0)
            sb_printf(o, "  # C in blocks of %lld rows, each over every panel (the panels made again for each)\n",
                      (long long)g->panel_m);
        else if (g->panel_m > 0)
            sb_printf(o, "  # C in blocks of %lld rows\n", (long long)g->panel_m);
        if (g->a_rows > 0)
            sb_printf(o, "  # A made in the cache a block of C at a time, %lld rows a block of its kernel\n",
                      (long long)g->a_rows);
        if (g->epi_rows > 0)
            sb_printf(o, "  # the epilogue (the next launch) after each block of C, %lld rows a block of it; C %s\n",
                      (long long)g->epi_rows, g->c_block ? "in the cache, one block at a time" : "in memory whole");
        if (g->causal)
            sb_printf(o, "  # causal: C[i, j] only where j <= i + %lld, the rest left unwritten\n", (long long)g->causal_off);
        if (g->zero_tail) sb_puts(o, "  # zero tail: A's rows may end in zeros, not multiplied\n");
        if (g->tail.align > 0)
            sb_printf(o, "  # A's row i one value from column i + %lld + 1 (rounded up to a multiple of %lld) on\n",
                      (long long)g->tail.off, (long long)g->tail.align);
        sb_printf(o, "  # bytes_read=%lld bytes_written=%lld flops=%lld\n", (long long)k->bytes_read,
                  (long long)k->bytes_written, (long long)k->flops);
        return;
    }
    sb_printf(o, "kernel %s grid=%lld block=%d kind=%s ops=[%s]\n", k->name, (long long)k->grid,
              k->block, k->kind, k->ops);
    sb_printf(o, "  # bytes_read=%lld bytes_written=%lld flops=%lld\n", (long long)k->bytes_read,
              (long long)k->bytes_written, (long long)k->flops);
    for (int i = 0; i < k->params.len; i++)
        sb_printf(o, "  param p%d: %s[%lld]%s%s\n", i, fc_dtype_name(k->params.data[i].dtype),
                  (long long)k->params.data[i].numel, k->params.data[i].written ? " out" : "",
                  k->params.data[i].stream ? " stream" : "");
    for (int i = 0; i < k->shared.len; i++) {
        sb_printf(o, "  shared sh%d: %s[%lld]", i, type_names[k->shared.data[i].type],
                  (long long)k->shared.data[i].count);
        if (k->shared.data[i].base >= 0) { sb_puts(o, " row at "); print_expr(k, k->shared.data[i].base, o); }
        sb_putc(o, '\n');
    }
    for (int i = 0; i < k->tarrays.len; i++)
        sb_printf(o, "  thread ta%d: %s[%d]\n", i, type_names[k->tarrays.data[i].type],
                  k->tarrays.data[i].count);
    sb_puts(o, "{\n");
    print_list(k, k->body, 1, o);
    if (k->tail >= 0) {
        sb_puts(o, "} tail (once, after every block) {\n");
        print_list(k, k->tail, 1, o);
    }
    sb_puts(o, "}\n");
}

void kir_print_program(const KirProgram *p, StrBuf *o) {
    static const char *const kinds[] = {"input", "output", "temp", "state"};
    sb_printf(o, "program %s workspace=%lld", p->block_name, (long long)p->workspace_bytes);
    if (p->vector_bytes > 0) sb_printf(o, " vector_bytes=%d", p->vector_bytes);
    sb_puts(o, "\n");
    for (int i = 0; i < p->buffers.len; i++) {
        const KirBuffer *b = &p->buffers.data[i];
        sb_printf(o, "buffer b%d: %s %s[%lld]", i, kinds[b->kind], fc_dtype_name(b->dtype),
                  (long long)b->numel);
        if (b->kind == KIR_BUF_TEMP) sb_printf(o, " offset=%lld", (long long)b->offset);
        else sb_printf(o, " index=%d", b->index);
        if (b->value >= 0) sb_printf(o, " value=%%%d", b->value);
        sb_putc(o, '\n');
    }
    for (int i = 0; i < p->launches.len; i++) {
        const KirLaunch *l = &p->launches.data[i];
        sb_printf(o, "launch %s(", p->kernels.data[l->kernel]->name);
        for (int j = 0; j < l->nargs; j++) sb_printf(o, "%sb%d", j ? ", " : "", l->args[j]);
        sb_puts(o, ")\n");
    }
    for (int i = 0; i < p->kernels.len; i++) {
        sb_putc(o, '\n');
        kir_print_kernel(p->kernels.data[i], o);
    }
}

/* ---- verifier ------------------------------------------------------------------------------ */
typedef struct Verify {
    const KirKernel *k;
    FcErr *err;
    int *var_state;      /* [vars]: 0 undefined, 1 block-uniform, 2 thread-scoped */
    int *decl_stack;     /* vars declared, in order */
    int ndecl;
    int *stamp;          /* [exprs] visit stamp */
    int cur_stamp;
    int in_threads;      /* inside a thread loop or a reduce body */
    bool in_tail;        /* checking the tail: no block index */
    int vec_var;         /* the loop variable of the enclosing vec thread loop, or -1 */
    int vec_w;           /* its width */
    int vec_depth;       /* the nesting depth of its body's statement list */
} Verify;

static FcStatus vfail(Verify *v, const char *what, int id) {
    return fc_err_set(v->err, FC_ERR_INTERNAL, "kernel IR of %s is malformed: %s (id %d)", v->k->name, what, id);
}

/* e reads only constants, block_idx and block-uniform variables. */
static bool vuniform(const Verify *v, int e, int depth) {
    const KirKernel *k = v->k;
    if (e < 0 || e >= k->exprs.len || depth > 64) return false;
    const KirExpr *x = &k->exprs.data[e];
    switch (x->kind) {
    case KE_CONST: case KE_BLOCK_IDX: return true;
    case KE_VAR: return x->ref >= 0 && x->ref < k->vars.len && v->var_state[x->ref] == 1;
    case KE_UNARY: case KE_CAST: return vuniform(v, x->a, depth + 1);
    case KE_BINARY: return vuniform(v, x->a, depth + 1) && vuniform(v, x->b, depth + 1);
    case KE_PHILOX:
        return vuniform(v, x->a, depth + 1) && vuniform(v, x->b, depth + 1) && vuniform(v, x->c, depth + 1);
    default: return false;
    }
}
static int type_bytes(KirType t) { return t == KT_BOOL ? 1 : (t == KT_I32 || t == KT_F32) ? 4 : 8; }
/* A vec access of elements of `size` bytes at index idx (see KirExpr.vec). */
static FcStatus vvec(Verify *v, int idx, int size, int id) {
    const KirKernel *k = v->k;
    if (v->vec_var < 0) return vfail(v, "vec access outside a vec thread loop", id);
    if ((v->vec_w * size) % 16 != 0) return vfail(v, "vec access not a multiple of 16 bytes", id);
    if (idx < 0 || idx >= k->exprs.len) return vfail(v, "bad expression id", idx);
    const KirExpr *x = &k->exprs.data[idx];
    bool isv = x->kind == KE_VAR && x->ref == v->vec_var;
    if (!isv && x->kind == KE_BINARY && x->op == KB_ADD && x->a >= 0 && x->b >= 0 && x->a < k->exprs.len &&
        x->b < k->exprs.len) {
        const KirExpr *a = &k->exprs.data[x->a], *b = &k->exprs.data[x->b];
        if (b->kind == KE_VAR && b->ref == v->vec_var) isv = vuniform(v, x->a, 0);
        else if (a->kind == KE_VAR && a->ref == v->vec_var) isv = vuniform(v, x->b, 0);
    }
    if (!isv) return vfail(v, "vec access whose index is not v or add(block-uniform, v)", id);
    return FC_OK;
}

static FcStatus vexpr(Verify *v, int id, int limit);
/* A load's view: an i64 index expression over variables in scope (it is made after the load,
 * so its id may be larger). */
static FcStatus vview(Verify *v, int view, int id) {
    if (view >= v->k->exprs.len || v->k->exprs.data[view].type != KT_I64) return vfail(v, "bad view of a load", id);
    return vexpr(v, view, v->k->exprs.len);
}

static FcStatus vexpr(Verify *v, int id, int limit) {
    const KirKernel *k = v->k;
    if (id < 0 || id >= k->exprs.len || id >= limit) return vfail(v, "bad expression id", id);
    if (v->stamp[id] == v->cur_stamp) return FC_OK;
    v->stamp[id] = v->cur_stamp;
    const KirExpr *e = &k->exprs.data[id];
    switch (e->kind) {
    case KE_CONST: return FC_OK;
    case KE_BLOCK_IDX: return v->in_tail ? vfail(v, "the block index read in the tail", id) : FC_OK;
    case KE_VAR:
        if (e->ref < 0 || e->ref >= k->vars.len || v->var_state[e->ref] == 0)
            return vfail(v, "variable used outside its scope", e->ref);
        return FC_OK;
    case KE_LOAD:
        if (e->ref < 0 || e->ref >= k->params.len) return vfail(v, "bad param", e->ref);
        if (e->vec && k->params.data[e->ref].written) return vfail(v, "vec load of a written param", id);
        if (k->params.data[e->ref].stream) return vfail(v, "load of a stream param", id);
        if (e->vec) FC_TRY(vvec(v, e->a, (int)fc_dtype_size(k->params.data[e->ref].dtype), id));
        if (e->view >= 0) FC_TRY(vview(v, e->view, id));
        return vexpr(v, e->a, id);
    case KE_SHLOAD:
        if (e->ref < 0 || e->ref >= k->shared.len) return vfail(v, "bad shared array", e->ref);
        if (e->vec) FC_TRY(vvec(v, e->a, type_bytes(k->shared.data[e->ref].type), id));
        if (e->view >= 0) FC_TRY(vview(v, e->view, id));
        return vexpr(v, e->a, id);
    case KE_TLOAD:
        if (e->ref < 0 || e->ref >= k->tarrays.len) return vfail(v, "bad thread array", e->ref);
        if (!v->in_threads) return vfail(v, "thread array read outside a thread loop", id);
        return vexpr(v, e->a, id);
    case KE_UNARY: case KE_CAST: case KE_ROUND: return vexpr(v, e->a, id);
    case KE_BINARY:
        FC_TRY(vexpr(v, e->a, id));
        FC_TRY(vexpr(v, e->b, id));
        if (k->exprs.data[e->a].type != k->exprs.data[e->b].type) return vfail(v, "binary operands of different types", id);
        return FC_OK;
    case KE_SELECT:
        FC_TRY(vexpr(v, e->a, id));
        FC_TRY(vexpr(v, e->b, id));
        FC_TRY(vexpr(v, e->c, id));
        if (k->exprs.data[e->a].type != KT_BOOL) return vfail(v, "select condition is not bool", id);
        if (k->exprs.data[e->b].type != k->exprs.data[e->c].type) return vfail(v, "select arms of different types", id);
        return FC_OK;
    case KE_PHILOX:
        FC_TRY(vexpr(v, e->a, id));
        FC_TRY(vexpr(v, e->b, id));
        FC_TRY(vexpr(v, e->c, id));
        if (e->type != KT_I64 || k->exprs.data[e->a].type != KT_I64 || k->exprs.data[e->b].type != KT_I64 ||
            k->exprs.data[e->c].type != KT_I64)
            return vfail(v, "philox operands and result are not i64", id);
        return FC_OK;
    default: return vfail(v, "unknown expression kind", id);
    }
}
static FcStatus vuse(Verify *v, int id) {
    v->cur_stamp++;
    return vexpr(v, id, v->k->exprs.len);
}
static FcStatus vdeclare(Verify *v, int var) {
    if (var < 0 || var >= v->k->vars.len) return vfail(v, "bad variable", var);
    if (v->var_state[var] != 0) return vfail(v, "variable declared twice", var);
    v->var_state[var] = v->in_threads ? 2 : 1;
    v->decl_stack[v->ndecl++] = var;
    return FC_OK;
}
static void vpop(Verify *v, int mark) {
    while (v->ndecl > mark) v->var_state[v->decl_stack[--v->ndecl]] = 0;
}

static FcStatus vlist_open(Verify *v, int s, int depth);
/* A statement list in its own scope. */
static FcStatus vlist(Verify *v, int s, int depth) {
    int mark = v->ndecl;
    FcStatus st = vlist_open(v, s, depth);
    vpop(v, mark);
    return st;
}
/* A statement list whose declarations stay visible to the caller (who pops them). */
static FcStatus vlist_open(Verify *v, int s, int depth) {
    const KirKernel *k = v->k;
    if (depth > 64) return vfail(v, "statements nested too deeply", s);
    for (int guard = 0; s >= 0; s = k->stmts.data[s].next, guard++) {
        if (s >= k->stmts.len || guard > k->stmts.len) return vfail(v, "bad statement id", s);
        const KirStmt *st = &k->stmts.data[s];
        switch (st->kind) {
        case KS_LET:
            FC_TRY(vuse(v, st->a));
            FC_TRY(vdeclare(v, st->var));
            if (k->vars.data[st->var].type != k->exprs.data[st->a].type) return vfail(v, "let of another type", s);
            break;
        case KS_ASSIGN:
            FC_TRY(vuse(v, st->a));
            if (st->var < 0 || st->var >= k->vars.len || v->var_state[st->var] == 0)
                return vfail(v, "assignment to an undeclared variable", s);
            if (v->in_threads && v->var_state[st->var] == 1)
                return vfail(v, "thread code assigns a block-uniform variable", s);
            if (k->vars.data[st->var].type != k->exprs.data[st->a].type) return vfail(v, "assignment of another type", s);
            break;
        case KS_STORE:
            if (st->ref < 0 || st->ref >= k->params.len || !k->params.data[st->ref].written)
                return vfail(v, "store to a param not marked written", s);
            if (st->vec && depth != v->vec_depth) return vfail(v, "vec store not in its vec loop's body", s);
            if (st->vec) FC_TRY(vvec(v, st->a, (int)fc_dtype_size(k->params.data[st->ref].dtype), s));
            FC_TRY(vuse(v, st->a));
            FC_TRY(vuse(v, st->b));
            break;
        case KS_SHSTORE:
            if (st->ref < 0 || st->ref >= k->shared.len) return vfail(v, "bad shared array", s);
            if (st->vec && depth != v->vec_depth) return vfail(v, "vec store not in its vec loop's body", s);
            if (st->vec) FC_TRY(vvec(v, st->a, type_bytes(k->shared.data[st->ref].type), s));
            FC_TRY(vuse(v, st->a));
            FC_TRY(vuse(v, st->b));
            break;
        case KS_TSTORE:
            if (st->ref < 0 || st->ref >= k->tarrays.len) return vfail(v, "bad thread array", s);
            if (!v->in_threads) return vfail(v, "thread array written outside a thread loop", s);
            FC_TRY(vuse(v, st->a));
            FC_TRY(vuse(v, st->b));
            break;
        case KS_FOR: {
            FC_TRY(vuse(v, st->a));
            FC_TRY(vuse(v, st->b));
            int m = v->ndecl;
            bool threads = st->loop == KIR_LOOP_THREADS;
            if (threads && v->in_threads) return vfail(v, "nested thread loops", s);
            bool vec = threads && st->vec > 1;
            if (st->vec < 0 || (st->vec > 1 && !(vec && (st->vec == 2 || st->vec == 4 || st->vec == 8 || st->vec == 16))))
                return vfail(v, "vec width not 2, 4, 8 or 16 on a thread loop", s);
            if (threads) v->in_threads = 1;
            FC_TRY(vdeclare(v, st->var));
            if (vec) { v->vec_var = st->var; v->vec_w = st->vec; v->vec_depth = depth + 1; }
            FC_TRY(vlist(v, st->body, depth + 1));
            if (vec) { v->vec_var = -1; v->vec_w = 0; v->vec_depth = -1; }
            if (threads) v->in_threads = 0;
            vpop(v, m);
            break;
        }
        case KS_IF:
            FC_TRY(vuse(v, st->a));
            FC_TRY(vlist(v, st->body, depth + 1));
            FC_TRY(vlist(v, st->body2, depth + 1));
            break;
        case KS_REDUCE: {
            if (v->in_threads) return vfail(v, "block reduction inside a thread loop", s);
            if (st->lanes != 0 && (st->lanes < 32 || st->lanes % 32 != 0 || st->lanes >= k->block))
                return vfail(v, "reduction lanes not a multiple of 32 below the block", s);
            FC_TRY(vuse(v, st->a));
            FC_TRY(vuse(v, st->b));
            int m = v->ndecl;
            v->in_threads = 1;
            FC_TRY(vdeclare(v, st->loop_var));
            FC_TRY(vlist_open(v, st->body, depth + 1));
            FC_TRY(vuse(v, st->c));
            v->in_threads = 0;
            vpop(v, m);
            FC_TRY(vdeclare(v, st->var));
            if (k->vars.data[st->var].type != k->exprs.data[st->c].type) return vfail(v, "reduction of another type", s);
            break;
        }
        case KS_BARRIER:
            if (v->in_threads) return vfail(v, "barrier inside a thread loop", s);
            break;
        case KS_ERROR: FC_TRY(vuse(v, st->a)); break;
        case KS_AMAX:
            if (v->in_tail) return vfail(v, "amax in the tail", s);
            FC_TRY(vuse(v, st->a));
            FC_TRY(vuse(v, st->b));
            if (kir_amax_element(k, st) < 0)
                return vfail(v, "amax not at an i64 constant element of an f32 param marked written", s);
            if (k->exprs.data[st->b].type != KT_F32) return vfail(v, "amax of a value that is not f32", s);
            break;
        default: return vfail(v, "unknown statement kind", s);
        }
    }
    return FC_OK;
}

/* ---- the view check (see kir_verify) -------------------------------------------------------
 * An interpreter of the kernel's index arithmetic: i64, i32 and bool values of variables and
 * expressions, with "unknown" for anything that depends on data (loads, floats). It walks the
 * statements of sample blocks with sample loop iterations and checks, at every load that carries
 * a view, that the index reads the element the view names. */
enum { VC_BUDGET = 400000, VC_SAMPLES = 8 };
typedef struct VCheck {
    const KirKernel *k;
    FcErr *err;
    FcStatus st;
    int64_t block;
    int64_t *var_val;
    bool *var_known;
    int64_t *e_val;          /* [exprs] cached per statement (stamp) */
    int *e_stamp;            /* [exprs] */
    unsigned char *e_known;  /* [exprs] */
    int stamp;
    int64_t steps;
} VCheck;

static bool vc_int(KirType t) { return t == KT_I64 || t == KT_I32 || t == KT_BOOL; }
static int64_t vc_wrap(KirType t, uint64_t x) {
    if (t == KT_BOOL) return x != 0;
    if (t == KT_I32) return (int64_t)(int32_t)(uint32_t)x;
    return (int64_t)x;
}
static bool vc_eval(VCheck *c, int id, int depth, int64_t *out);
static void vc_fail(VCheck *c, int id, const char *what, int64_t got, int64_t want) {
    if (c->st != FC_OK) return;
    c->st = fc_err_set(c->err, FC_ERR_INTERNAL,
                       "kernel IR of %s reads the wrong element: %s (expression %d): in block %lld it reads "
                       "element %lld where the consumer's view maps it to element %lld",
                       c->k->name, what, id, (long long)c->block, (long long)got, (long long)want);
}
static bool vc_eval_uncached(VCheck *c, int id, int depth, int64_t *out) {
    const KirKernel *k = c->k;
    const KirExpr *e = &k->exprs.data[id];
    int64_t a = 0, b = 0, x = 0;
    bool ka, kb;
    switch (e->kind) {
    case KE_CONST: *out = e->ival; return vc_int(e->type);
    case KE_BLOCK_IDX: *out = c->block; return true;
    case KE_VAR:
        if (e->ref < 0 || e->ref >= k->vars.len || !c->var_known[e->ref]) return false;
        *out = c->var_val[e->ref];
        return true;
    case KE_LOAD:
    case KE_SHLOAD: {
        ka = vc_eval(c, e->a, depth + 1, &a);
        const KirShared *sh = e->kind == KE_SHLOAD ? &k->shared.data[e->ref] : NULL;
        if (sh && sh->base >= 0 && e->view < 0) {
            vc_fail(c, id, "a load of a staged row with no view", a, -1);
            return false;
        }
        if (e->view < 0) return false;
        bool kv = vc_eval(c, e->view, depth + 1, &x);
        if (!ka || !kv) return false;
        if (!sh) {
            if (a != x) vc_fail(c, id, "a load", a, x);
        } else if (sh->base >= 0) {
            if (a < 0 || a >= sh->count) {
                vc_fail(c, id, "a load of a staged row outside the row", a, x);
            } else if (vc_eval(c, sh->base, depth + 1, &b) && (int64_t)((uint64_t)b + (uint64_t)a) != x) {
                vc_fail(c, id, "a load of a staged row", (int64_t)((uint64_t)b + (uint64_t)a), x);
            }
        }
        return false;   /* data */
    }
    case KE_TLOAD: vc_eval(c, e->a, depth + 1, &a); return false;
    case KE_ROUND: vc_eval(c, e->a, depth + 1, &a); return false;
    case KE_PHILOX:   /* random bits: never an index */
        vc_eval(c, e->a, depth + 1, &a);
        vc_eval(c, e->b, depth + 1, &a);
        vc_eval(c, e->c, depth + 1, &a);
        return false;
    case KE_CAST:
        ka = vc_eval(c, e->a, depth + 1, &a);
        if (!ka || !vc_int(e->type) || !vc_int(k->exprs.data[e->a].type)) return false;
        *out = vc_wrap(e->type, (uint64_t)a);
        return true;
    case KE_UNARY:
        ka = vc_eval(c, e->a, depth + 1, &a);
        if (!ka || !vc_int(e->type)) return false;
        if (e->op == KU_NEG) *out = vc_wrap(e->type, 0 - (uint64_t)a);
        else if (e->op == KU_ABS) *out = vc_wrap(e->type, a < 0 ? 0 - (uint64_t)a : (uint64_t)a);
        else if (e->op == KU_NOT) *out = !a;
        else return false;
        return true;
    case KE_SELECT: {
        int64_t cv = 0;
        bool kc = vc_eval(c, e->a, depth + 1, &cv);
        ka = vc_eval(c, e->b, depth + 1, &a);
        kb = vc_eval(c, e->c, depth + 1, &b);
        if (!vc_int(e->type)) return false;
        if (kc) { *out = cv ? a : b; return cv ? ka : kb; }
        *out = a;
        return ka && kb && a == b;
    }
    case KE_BINARY: {
        ka = vc_eval(c, e->a, depth + 1, &a);
        kb = vc_eval(c, e->b, depth + 1, &b);
        KirType ot = k->exprs.data[e->a].type;
        if (!ka || !kb || !vc_int(ot)) return false;
        uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
        switch ((KirBinOp)e->op) {
        case KB_ADD: *out = vc_wrap(ot, ua + ub); return true;
        case KB_SUB: *out = vc_wrap(ot, ua - ub); return true;
        case KB_MUL: *out = vc_wrap(ot, ua * ub); return true;
        case KB_DIV:
        case KB_REM:
            if (b == 0 || (b == -1 && a == INT64_MIN)) return false;
            *out = vc_wrap(ot, (uint64_t)(e->op == KB_DIV ? a / b : a % b));
            return true;
        case KB_MAX: *out = a > b ? a : b; return true;
        case KB_MIN: *out = a < b ? a : b; return true;
        case KB_LT: *out = a < b; return true;
        case KB_LE: *out = a <= b; return true;
        case KB_GT: *out = a > b; return true;
        case KB_GE: *out = a >= b; return true;
        case KB_EQ: *out = a == b; return true;
        case KB_NE: *out = a != b; return true;
        case KB_AND: *out = a && b; return true;
        case KB_OR: *out = a || b; return true;
        default: return false;
        }
    }
    default: return false;
    }
}
static bool vc_eval(VCheck *c, int id, int depth, int64_t *out) {
    if (id < 0 || id >= c->k->exprs.len || depth > 256 || c->st != FC_OK || c->steps > VC_BUDGET) return false;
    if (c->e_stamp[id] == c->stamp) {
        *out = c->e_val[id];
        return c->e_known[id];
    }
    c->steps++;
    int64_t v = 0;
    bool kn = vc_eval_uncached(c, id, depth, &v);
    c->e_stamp[id] = c->stamp;
    c->e_val[id] = v;
    c->e_known[id] = kn;
    *out = v;
    return kn;
}
/* Evaluates expression id afresh (variables may have changed since the last statement). */
static bool vc_use(VCheck *c, int id, int64_t *out) {
    c->stamp++;
    *out = 0;
    return vc_eval(c, id, 0, out);
}
static void vc_set(VCheck *c, int var, int expr) {
    int64_t x = 0;
    bool kn = vc_use(c, expr, &x);
    if (var < 0 || var >= c->k->vars.len) return;
    c->var_known[var] = kn && vc_int(c->k->vars.data[var].type);
    c->var_val[var] = x;
}
static void vc_list(VCheck *c, int s, int depth);
/* Runs body with loop variable var over sample iterations of [lo, hi): all of them when there
 * are at most VC_SAMPLES, else the first three, the last three and two in between. */
static void vc_loop(VCheck *c, int var, int lo_e, int hi_e, int body, int value, int depth) {
    int64_t lo = 0, hi = 0;
    if (!vc_use(c, lo_e, &lo) || !vc_use(c, hi_e, &hi) || hi <= lo) return;
    uint64_t n = (uint64_t)hi - (uint64_t)lo;
    for (int j = 0; j < VC_SAMPLES && (uint64_t)j < n && c->st == FC_OK && c->steps <= VC_BUDGET; j++) {
        uint64_t off = n <= VC_SAMPLES ? (uint64_t)j
                       : j < 3         ? (uint64_t)j
                       : j < 6         ? n - 1 - (uint64_t)(j - 3)
                                       : n / 3 * (uint64_t)(j - 5);
        c->var_val[var] = (int64_t)((uint64_t)lo + off);
        c->var_known[var] = true;
        vc_list(c, body, depth + 1);
        if (value >= 0) {
            int64_t x;
            vc_use(c, value, &x);
        }
    }
    c->var_known[var] = false;
}
static void vc_list(VCheck *c, int s, int depth) {
    const KirKernel *k = c->k;
    int64_t x = 0;
    for (; s >= 0 && s < k->stmts.len && c->st == FC_OK && c->steps <= VC_BUDGET && depth <= 64;
         s = k->stmts.data[s].next) {
        const KirStmt *st = &k->stmts.data[s];
        switch (st->kind) {
        case KS_LET: case KS_ASSIGN: vc_set(c, st->var, st->a); break;
        case KS_STORE: case KS_SHSTORE: case KS_TSTORE: case KS_AMAX:
            vc_use(c, st->a, &x);
            vc_use(c, st->b, &x);
            break;
        case KS_FOR: vc_loop(c, st->var, st->a, st->b, st->body, -1, depth); break;
        case KS_IF:
            if (vc_use(c, st->a, &x)) {
                vc_list(c, x ? st->body : st->body2, depth + 1);
            } else {
                vc_list(c, st->body, depth + 1);
                vc_list(c, st->body2, depth + 1);
            }
            break;
        case KS_REDUCE:
            vc_loop(c, st->loop_var, st->a, st->b, st->body, st->c, depth);
            if (st->var >= 0 && st->var < k->vars.len) c->var_known[st->var] = false;
            break;
        case KS_ERROR: vc_use(c, st->a, &x); break;
        default: break;
        }
    }
}
static FcStatus kir_check_views(const KirKernel *k, FcErr *err) {
    bool any = false;
    for (int i = 0; i < k->shared.len && !any; i++) any = k->shared.data[i].base >= 0;
    for (int i = 0; i < k->exprs.len && !any; i++) any = k->exprs.data[i].view >= 0;
    if (!any) return FC_OK;
    VCheck c = {.k = k, .err = err, .st = FC_OK};
    size_t nv = (size_t)k->vars.len + 1, ne = (size_t)k->exprs.len + 1;
    c.var_val = fc_calloc(nv, sizeof(int64_t));
    c.var_known = fc_calloc(nv, sizeof(bool));
    c.e_val = fc_calloc(ne, sizeof(int64_t));
    c.e_stamp = fc_calloc(ne, sizeof(int));
    c.e_known = fc_calloc(ne, 1);
    if (!c.var_val || !c.var_known || !c.e_val || !c.e_stamp || !c.e_known) {
        c.st = FC_OOM(err);
    } else {
        int64_t blocks[4] = {0, 1, k->grid / 2, k->grid - 1};
        for (int b = 0; b < 4 && c.st == FC_OK; b++) {
            bool seen = blocks[b] >= k->grid;
            for (int b2 = 0; b2 < b; b2++) seen |= blocks[b2] == blocks[b];
            if (seen) continue;
            c.block = blocks[b];
            memset(c.var_known, 0, nv * sizeof(bool));
            vc_list(&c, k->body, 0);
        }
        if (c.st == FC_OK && k->tail >= 0) {   /* the tail: once, reading no block index */
            c.block = -1;
            memset(c.var_known, 0, nv * sizeof(bool));
            vc_list(&c, k->tail, 0);
        }
    }
    fc_free(c.var_val);
    fc_free(c.var_known);
    fc_free(c.e_val);
    fc_free(c.e_stamp);
    fc_free(c.e_known);
    return c.st;
}

FcStatus kir_verify(const KirKernel *k, FcErr *err) {
    if (!kir_kernel_ok(k)) return fc_err_set(err, FC_ERR_INTERNAL, "kernel IR of %s is incomplete", k ? k->name : "?");
    if (k->library) {
        const KirGemm *g = &k->gemm;
        if (k->params.len != 3 || k->body >= 0 || (g->dtype != FC_F32 && g->dtype != FC_F64) ||
            (g->ab16 && ((g->ab16 != FC_BF16 && g->ab16 != FC_F16) || g->dtype != FC_F32 || g->panel_k > 0)) || g->batch < 1 ||
            g->m < 1 || g->n < 1 || g->k < 1 || g->stride_a < 0 || g->stride_b < 0 || g->stride_c < 0 ||
            g->panel_k < 0 || (g->panel_k > 0 && (g->batch != 1 || g->panel_k > g->k || g->panel_blocks < 1)) ||
            (g->trans_b && g->panel_n > 0) ||
            g->panel_m < 0 || (g->panel_m > 0 && ((g->panel_k == 0 && g->epi_rows == 0 && g->a_rows == 0) || g->panel_m >= g->m)) ||
            g->a_rows < 0 || (g->a_rows > 0 && (g->batch != 1 || g->trans_a || g->causal || g->zero_tail || g->ab16 ||
                                                g->panel_m % g->a_rows != 0)) ||
            g->epi_rows < 0 || (g->epi_rows > 0 && (g->batch != 1 || g->causal || g->zero_tail ||
                                                    g->panel_m % g->epi_rows != 0)) ||
            (g->c_block && g->epi_rows == 0) ||
            g->panel_n < 0 || (g->panel_n > 0 && (g->panel_k == 0 || g->panel_n >= g->n)) ||
            (g->causal && (g->panel_k > 0 || g->causal_off < -g->m || g->causal_off > g->n)) ||
            (g->zero_tail && (g->panel_k > 0 || g->trans_a)) || g->tail.align < 0 || g->tail.align > (1 << 20) ||
            (g->tail.align > 0 && (!g->zero_tail || g->tail.off < -((int64_t)1 << 40) || g->tail.off > ((int64_t)1 << 40))))
            return fc_err_set(err, FC_ERR_INTERNAL, "library kernel %s is malformed", k->name);
        return FC_OK;
    }
    if (k->block < 1 || k->block > 1024 || k->grid < 1)
        return fc_err_set(err, FC_ERR_INTERNAL, "kernel %s: launch shape %lld x %d out of range", k->name,
                          (long long)k->grid, k->block);
    for (int i = 0; i < k->params.len; i++)
        if (k->params.data[i].stream && !k->params.data[i].written)
            return fc_err_set(err, FC_ERR_INTERNAL, "kernel %s: p%d is stream but not written", k->name, i);
    Verify v = {.k = k, .err = err, .vec_var = -1, .vec_depth = -1};
    v.var_state = fc_calloc((size_t)k->vars.len + 1, sizeof(int));
    v.decl_stack = fc_calloc((size_t)k->vars.len + 1, sizeof(int));
    v.stamp = fc_calloc((size_t)k->exprs.len + 1, sizeof(int));
    FcStatus s;
    if (!v.var_state || !v.decl_stack || !v.stamp) s = FC_OOM(err);
    else s = vlist(&v, k->body, 0);
    if (s == FC_OK && k->tail >= 0) {   /* its own scope: none of the body's variables */
        v.in_tail = true;
        s = vlist(&v, k->tail, 0);
    }
    for (int i = 0; s == FC_OK && i < k->shared.len; i++) {
        int b = k->shared.data[i].base;
        if (b >= k->exprs.len || (b >= 0 && k->exprs.data[b].type != KT_I64))
            s = fc_err_set(err, FC_ERR_INTERNAL, "kernel IR of %s is malformed: bad row base of sh%d", k->name, i);
    }
    fc_free(v.var_state);
    fc_free(v.decl_stack);
    fc_free(v.stamp);
    if (s == FC_OK) s = kir_check_views(k, err);
    return s;
}

FcStatus kir_check_program(const KirProgram *p, const char *who, int64_t temp_align, bool restrict_args,
                           int *max_args, FcErr *err) {
    *max_args = 1;
    if (p->workspace_bytes < 0) return fc_err_set(err, FC_ERR_INTERNAL, "%s: negative workspace size", who);
    for (int i = 0; i < p->buffers.len; i++) {
        const KirBuffer *b = &p->buffers.data[i];
        size_t es = fc_dtype_size(b->dtype);
        int64_t bytes, end;
        if (es == 0 || b->numel < 0 || !fc_mul64(b->numel, (int64_t)es, &bytes))
            return fc_err_set(err, FC_ERR_INTERNAL, "%s: buffer b%d has a bad dtype or size", who, i);
        if (b->kind == KIR_BUF_TEMP) {
            if (b->offset < 0 || b->offset % temp_align != 0 || !fc_add64(b->offset, bytes, &end) ||
                end > p->workspace_bytes)
                return fc_err_set(err, FC_ERR_INTERNAL, "%s: temp buffer b%d lies outside the workspace or is not "
                                  "%lld-byte aligned", who, i, (long long)temp_align);
        } else if (b->kind == KIR_BUF_STATE ? b->index != 0 || b->dtype != FC_F32 || b->numel % KIR_FP8_STRIDE != 0
                                             : b->index < 0 || (b->kind != KIR_BUF_INPUT && b->kind != KIR_BUF_OUTPUT)) {
            return fc_err_set(err, FC_ERR_INTERNAL, "%s: buffer b%d has a bad kind or index", who, i);
        }
    }
    for (int li = 0; li < p->launches.len; li++) {
        const KirLaunch *l = &p->launches.data[li];
        if (l->kernel < 0 || l->kernel >= p->kernels.len)
            return fc_err_set(err, FC_ERR_INTERNAL, "%s: launch %d names no kernel", who, li);
        const KirKernel *k = p->kernels.data[l->kernel];
        /* B in panels: made by the launch before, a generated kernel writing B's buffer alone
         * (its blocks, panel_blocks a panel, cover B's rows in order) */
        if (k->library && k->gemm.panel_k > 0) {
            const KirLaunch *ol = li > 0 ? &p->launches.data[li - 1] : NULL;
            const KirKernel *opk = ol && ol->kernel >= 0 && ol->kernel < p->kernels.len ? p->kernels.data[ol->kernel] : NULL;
            int nw = 0, wb = -1;
            for (int a = 0; opk && a < ol->nargs && a < opk->params.len; a++)
                if (opk->params.data[a].written) nw++, wb = ol->args[a];
            /* chunk after chunk of B's columns, each ceil(k / panel_k) panels of panel_blocks blocks
             * (the last panel fewer) */
            int64_t P = (k->gemm.k + k->gemm.panel_k - 1) / k->gemm.panel_k, nc = kir_gemm_chunks(&k->gemm);
            int64_t rb = opk ? opk->grid / nc : 0;
            if (!opk || opk->library || opk->tail >= 0 || nw != 1 || l->nargs != 3 || wb != l->args[1] ||
                opk->grid % nc != 0 || rb > P * k->gemm.panel_blocks || rb <= (P - 1) * k->gemm.panel_blocks)
                return fc_err_set(err, FC_ERR_INTERNAL, "%s: launch %d of %s takes B in panels from a launch that does "
                                  "not make it", who, li, k->name);
        }
        /* A in blocks: made by a generated kernel before (before B's operand kernel with panels)
         * writing A's buffer alone, its blocks a_rows rows of A each */
        if (k->library && k->gemm.a_rows > 0) {
            int ai = li - 1 - (k->gemm.panel_k > 0);
            const KirLaunch *al = ai >= 0 ? &p->launches.data[ai] : NULL;
            const KirKernel *ak = al && al->kernel >= 0 && al->kernel < p->kernels.len ? p->kernels.data[al->kernel] : NULL;
            int nw = 0, wb = -1;
            for (int a = 0; ak && a < al->nargs && a < ak->params.len; a++)
                if (ak->params.data[a].written) nw++, wb = al->args[a];
            if (!ak || ak->library || ak->tail >= 0 || nw != 1 || l->nargs != 3 || wb != l->args[0] ||
                ak->grid != (k->gemm.m + k->gemm.a_rows - 1) / k->gemm.a_rows)
                return fc_err_set(err, FC_ERR_INTERNAL, "%s: launch %d of %s takes A in blocks from a launch that does "
                                  "not make it", who, li, k->name);
        }
        /* the epilogue in the cache: the launch after, a generated kernel reading C (not writing
         * it), its blocks epi_rows rows of C each */
        if (k->library && k->gemm.epi_rows > 0) {
            const KirLaunch *el = li + 1 < p->launches.len ? &p->launches.data[li + 1] : NULL;
            const KirKernel *ek = el && el->kernel >= 0 && el->kernel < p->kernels.len ? p->kernels.data[el->kernel] : NULL;
            bool reads = false, writes = false;
            for (int a = 0; ek && l->nargs == 3 && a < el->nargs && a < ek->params.len; a++)
                if (el->args[a] == l->args[2]) {
                    reads = true;
                    writes |= ek->params.data[a].written;
                }
            if (!ek || ek->library || ek->tail >= 0 || !reads || writes ||
                ek->grid != (k->gemm.m + k->gemm.epi_rows - 1) / k->gemm.epi_rows)
                return fc_err_set(err, FC_ERR_INTERNAL, "%s: launch %d of %s runs an epilogue that launch %d is not", who,
                                  li, k->name, li + 1);
        }
        if (l->nargs != k->params.len)
            return fc_err_set(err, FC_ERR_INTERNAL, "%s: launch %d of %s binds %d buffers to %d params", who, li,
                              k->name, l->nargs, k->params.len);
        for (int a = 0; a < l->nargs; a++) {
            int bi = l->args[a];
            if (bi < 0 || bi >= p->buffers.len)
                return fc_err_set(err, FC_ERR_INTERNAL, "%s: launch %d of %s: bad buffer id %d", who, li, k->name, bi);
            const KirBuffer *b = &p->buffers.data[bi];
            const KirParam *prm = &k->params.data[a];
            /* the operand kernel of a product with B in panels indexes all of B through its
             * panel buffer (KirGemm.panel_k) */
            const KirLaunch *nl = li + 1 < p->launches.len ? &p->launches.data[li + 1] : NULL;
            const KirKernel *nk = nl && nl->kernel >= 0 && nl->kernel < p->kernels.len ? p->kernels.data[nl->kernel] : NULL;
            bool panel = nk && nk->library && nk->gemm.panel_k > 0 && nl->nargs == 3 && nl->args[1] == bi && prm->written &&
                         prm->numel == nk->gemm.k * nk->gemm.n &&
                         b->numel >= nk->gemm.panel_k * (nk->gemm.panel_n > 0 ? nk->gemm.panel_n : nk->gemm.n);
            /* C in the cache a block at a time (KirGemm.c_block): the product's C and its epilogue's
             * read of it index all of C through a buffer of one block */
            const KirLaunch *pl = li > 0 ? &p->launches.data[li - 1] : NULL;
            const KirKernel *pk = pl && pl->kernel >= 0 && pl->kernel < p->kernels.len ? p->kernels.data[pl->kernel] : NULL;
            const KirGemm *cg = k->library && a == 2 ? &k->gemm : pk && pk->library && pl->nargs == 3 && pl->args[2] == bi ? &pk->gemm : NULL;
            bool cblock = cg && cg->c_block && !(cg != &k->gemm && prm->written) && prm->numel == cg->m * cg->n &&
                          b->numel >= kir_gemm_block_rows(cg) * cg->n;
            /* A made in blocks (KirGemm.a_rows): the product's A and its operand kernel's store
             * index all of A through a buffer of one block */
            const KirGemm *ag = NULL;
            if (k->library && a == 0) ag = &k->gemm;
            for (int d = 1; d <= 2 && !ag && !k->library && prm->written; d++) {
                const KirLaunch *ql = li + d < p->launches.len ? &p->launches.data[li + d] : NULL;
                const KirKernel *qk = ql && ql->kernel >= 0 && ql->kernel < p->kernels.len ? p->kernels.data[ql->kernel] : NULL;
                if (qk && qk->library && qk->gemm.a_rows > 0 && ql->nargs == 3 && ql->args[0] == bi &&
                    d == 1 + (qk->gemm.panel_k > 0))
                    ag = &qk->gemm;
            }
            cblock = cblock || (ag && ag->a_rows > 0 && prm->numel == ag->m * ag->k && b->numel >= kir_gemm_block_rows(ag) * ag->k);
            if (b->dtype != prm->dtype || (b->numel < prm->numel && !panel && !cblock))
                return fc_err_set(err, FC_ERR_INTERNAL,
                                  "%s: launch %d of %s: buffer b%d (%s[%lld]) does not fit param p%d (%s[%lld])", who,
                                  li, k->name, bi, fc_dtype_name(b->dtype), (long long)b->numel, a,
                                  fc_dtype_name(prm->dtype), (long long)prm->numel);
            if (b->kind == KIR_BUF_INPUT && prm->written)
                return fc_err_set(err, FC_ERR_INTERNAL, "%s: launch %d of %s writes input buffer b%d", who, li,
                                  k->name, bi);
            for (int a2 = 0; restrict_args && a2 < a; a2++)
                if (l->args[a2] == bi && (prm->written || k->params.data[a2].written))
                    return fc_err_set(err, FC_ERR_INTERNAL, "%s: launch %d of %s binds buffer b%d to p%d and p%d, "
                                      "one written (params are __restrict__)", who, li, k->name, bi, a2, a);
        }
        if (l->nargs > *max_args) *max_args = l->nargs;
    }
    return FC_OK;
}
