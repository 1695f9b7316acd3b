/* lower.c: the AST of a parsed program to the graph IR of one block.
 *
 * Entry point: fe_lower. It checks the top-level namespace (duplicates, blocks named
 * like ops), binds dims (defaults, then -D overrides), picks the block, and lowers it:
 * - names resolve to locals/parameters, then dims and consts (a warning when a local
 *   shadows one); consts are evaluated once, lazily, with cycle detection;
 * - constant expressions fold in f64; integer-valued constants also keep an exact
 *   int64 (overflow-checked) so that sizes are exact; an inexact integer `/` keeps both
 *   operands so that a size position can show them;
 * - block calls are inlined (arguments checked against the parameter types; recursion
 *   is an error naming the cycle);
 * - scalars meeting tensors become rank-0 `full` nodes typed by the weak-literal rule;
 *   two tensor dtypes are promoted with casts; every node made for one source operator
 *   or call shares a fresh origin;
 * - shape rules (ir/shape.c) check each node; their messages get the call's location.
 * Errors are reported and lowering continues with the next statement; a value that
 * failed is "poison" and silently poisons what uses it (no cascades).
 * Recursion is bounded: expression depth by the parser, block nesting by
 * MAX_INLINE, and the total by MAX_LOWER_DEPTH.
 */
#include "ast.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define MAX_INLINE 16          /* nested block calls */
#define MAX_LOWER_DEPTH 512    /* nested expression lowering, across inlined blocks */
#define MAX_NODES 200000       /* graph nodes a block may expand to */
#define MAX_SPLIT 4096         /* results of one split */

typedef enum LvKind {
    LV_NONE, LV_POISON, LV_TENSOR, LV_SCALAR, LV_BOOL, LV_STR, LV_DTYPE, LV_LIST, LV_MULTI
} LvKind;

/* A lowered expression. */
typedef struct LVal {
    LvKind kind;
    FeLoc loc;
    int id;                 /* TENSOR: value id */
    int input;              /* TENSOR bound to a block input: its index, else -1 */
    bool isint;             /* SCALAR: integer-kind (for weak typing) */
    bool hasint;            /* SCALAR: i holds the exact integer value */
    int64_t i;              /* SCALAR (hasint), BOOL, DTYPE */
    double f;               /* SCALAR value */
    bool inexact;           /* SCALAR: an inexact integer division went into it */
    int64_t div_a, div_b;
    FeLoc div_loc;
    const char *div_const;  /* SCALAR (inexact): the const it was read from, if any */
    const char *str;        /* STR */
    struct LVal *items;     /* LIST, MULTI (scratch arena) */
    int n;
    const char *what;       /* MULTI: what produced it, for messages */
} LVal;

typedef struct Scope {
    FeMap names;            /* name -> index into vals */
    FC_VEC(LVal) vals;
    FeDecl *block;
} Scope;

typedef struct Lower {
    FeParser *p;
    FeDiag *d;
    IrGraph *g;
    FcErr *err;
    FcStatus status;        /* FC_ERR_NOMEM / FC_ERR_INTERNAL: stop */
    bool abort;             /* a user error that ends lowering (node cap) */
    Arena scratch;
    FeMap globals;          /* name -> index into decls */
    FeDecl **decls;
    FC_VEC(FeDecl *) stack; /* blocks being inlined, outermost first */
    int depth;
    FC_VEC(size_t) inexact_said;  /* offsets of the inexact '/' already reported */
    bool *input_used;
    int ninputs;
} Lower;

static LVal lower_expr(Lower *L, Scope *S, FeExpr *e);

/* ---- small helpers ---------------------------------------------------------------------- */
static bool stop(const Lower *L) { return L->status != FC_OK || L->abort || L->d->stopped; }
static LVal poison(FeLoc loc) { return (LVal){.kind = LV_POISON, .loc = loc, .input = -1}; }
static LVal tensor(int id, FeLoc loc) { return (LVal){.kind = LV_TENSOR, .loc = loc, .id = id, .input = -1}; }
static LVal scalar_int(int64_t v, FeLoc loc) {
    return (LVal){.kind = LV_SCALAR, .loc = loc, .isint = true, .hasint = true, .i = v, .f = (double)v, .input = -1};
}
static LVal scalar_float(double v, FeLoc loc) { return (LVal){.kind = LV_SCALAR, .loc = loc, .f = v, .input = -1}; }
static IrLoc irloc(FeLoc l) { return (IrLoc){l.line, l.col}; }
static void oom(Lower *L) {
    if (L->status == FC_OK) L->status = FC_OOM(L->err);
}
static void *scratch(Lower *L, size_t n) {
    void *q = arena_alloc(&L->scratch, n ? n : 1);
    if (!q) oom(L);
    return q;
}
static const FcDtype *vdt(Lower *L, int id) { return &ir_val(L->g, id)->dtype; }
static const IrShape *vsh(Lower *L, int id) { return &ir_val(L->g, id)->shape; }
static void tstr(Lower *L, int id, char *buf, size_t n) { ir_type_str(*vdt(L, id), vsh(L, id), buf, n); }

static void fmt_scalar(const LVal *v, char *buf, size_t n) {
    if (v->hasint) snprintf(buf, n, "%lld", (long long)v->i);
    else fc_fmt_double(buf, n, v->f);
}

/* Describes a value for "got ..." in messages. */
static void describe(Lower *L, const LVal *v, char *buf, size_t n) {
    char t[300];
    switch (v->kind) {
    case LV_TENSOR: tstr(L, v->id, t, sizeof t); snprintf(buf, n, "a tensor %s", t); break;
    case LV_SCALAR: fmt_scalar(v, t, sizeof t); snprintf(buf, n, "the number %s", t); break;
    case LV_BOOL: snprintf(buf, n, "%s", v->i ? "true" : "false"); break;
    case LV_STR: snprintf(buf, n, "the string \"%.60s\"", v->str); break;
    case LV_DTYPE: snprintf(buf, n, "the dtype %s", fc_dtype_name((FcDtype)v->i)); break;
    case LV_LIST: snprintf(buf, n, "a list of %d item%s", v->n, v->n == 1 ? "" : "s"); break;
    case LV_MULTI: snprintf(buf, n, "%d results of %s", v->n, v->what); break;
    default: snprintf(buf, n, "nothing"); break;
    }
}

/* Adds a node; returns its first result's value id, or -1 (error reported). */
static int add_node(Lower *L, IrOp op, const int *ins, int nin, const IrAttrs *a, FeLoc loc, int origin, IrOp oop) {
    if (stop(L)) return -1;
    if (L->g->nodes.len >= MAX_NODES) {
        fe_error(L->d, loc, "the block expands to more than %d graph nodes; expected a smaller program (block calls are inlined)",
                 MAX_NODES);
        L->abort = true;
        return -1;
    }
    int out = -1;
    FcStatus s = ir_add_node(L->g, op, ins, nin, a, irloc(loc), origin, oop, &out, L->err);
    if (s == FC_ERR_INPUT) {
        fe_error(L->d, loc, "%s", L->err->msg);
        fc_err_clear(L->err);
        return -1;
    }
    if (s != FC_OK) {
        L->status = s;
        return -1;
    }
    return out;
}

static int cast_to(Lower *L, int id, FcDtype t, FeLoc loc, int origin, IrOp oop) {
    if (id < 0 || *vdt(L, id) == t) return id;
    IrAttrs a = {.dtype = t};
    return add_node(L, IR_OP_CAST, &id, 1, &a, loc, origin, oop);
}

static int make_full(Lower *L, double v, FcDtype t, FeLoc loc, int origin, IrOp oop) {
    IrAttrs a = {.nlist = 0, .f = v, .dtype = t};
    return add_node(L, IR_OP_FULL, NULL, 0, &a, loc, origin, oop);
}

static int new_origin(Lower *L) { return L->g->next_origin++; }

/* ---- dtypes ------------------------------------------------------------------------------- */
static FcDtype promote(FcDtype a, FcDtype b) {
    if (a == b) return a;
    bool fa = ir_dtype_is_float(a), fb = ir_dtype_is_float(b);
    if (fa && fb) return (a == FC_F64 || b == FC_F64) ? FC_F64 : FC_F32;
    if (fa) return a;
    if (fb) return b;
    if (a == FC_BOOL) return b;
    if (b == FC_BOOL) return a;
    return FC_I64;
}

/* The dtype a weak scalar takes when it meets a tensor of dtype t. */
static FcDtype weak_dtype(const LVal *s, FcDtype t) {
    if (s->kind == LV_BOOL) return t;
    if (!s->isint) return ir_dtype_is_float(t) ? t : FC_F32;
    return t == FC_BOOL ? FC_I32 : t;
}

/* Checks that an integer scalar fits the integer dtype it becomes. */
static bool fits(Lower *L, const LVal *s, FcDtype t) {
    if (s->kind != LV_SCALAR || !s->hasint) return true;
    if (t == FC_I32 && (s->i < INT32_MIN || s->i > INT32_MAX)) {
        fe_error(L->d, s->loc, "integer %lld does not fit in i32 (the dtype of the other operand); expected -2147483648..2147483647",
                 (long long)s->i);
        return false;
    }
    return true;
}

/* Makes a rank-0 full of dtype t from a scalar or bool. */
static int scalar_node(Lower *L, const LVal *s, FcDtype t, int origin, IrOp oop) {
    if (!fits(L, s, t)) return -1;
    double v = s->kind == LV_BOOL ? (double)s->i : s->f;
    return make_full(L, v, t, s->loc, origin, oop);
}

/* ---- extracting arguments ----------------------------------------------------------------- */

static bool want_tensor(Lower *L, const LVal *v, const char *what, int *id) {
    if (v->kind == LV_POISON) return false;
    if (v->kind == LV_TENSOR) { *id = v->id; return true; }
    if (v->kind == LV_MULTI && v->n == 1 && v->items[0].kind == LV_TENSOR) { *id = v->items[0].id; return true; }
    char b[400];
    describe(L, v, b, sizeof b);
    fe_error(L->d, v->loc, "expected a tensor for %s; got %s", what, b);
    return false;
}

static bool want_int(Lower *L, const LVal *v, const char *what, int64_t *out) {
    if (v->kind == LV_POISON) return false;
    if (v->kind == LV_SCALAR) {
        if (v->hasint) { *out = v->i; return true; }
        if (v->inexact) {
            /* once per '/', at the '/': a const used in several sizes is one mistake */
            for (int i = 0; i < L->inexact_said.len; i++)
                if (L->inexact_said.data[i] == v->div_loc.off) return false;
            if (!FC_VEC_PUSH(&L->inexact_said, v->div_loc.off)) oom(L);
            char b[64];
            fc_fmt_double(b, sizeof b, (double)v->div_a / (double)v->div_b);
            fe_error(L->d, v->div_loc, "%lld / %lld is not an exact integer (%s); expected a division without remainder for %s",
                     (long long)v->div_a, (long long)v->div_b, b, what);
            if (v->div_const) fe_note(L->d, v->loc, "const '%s' is used here", v->div_const);
            return false;
        }
        if (v->f == trunc(v->f) && v->f > -9.2e18 && v->f < 9.2e18) { *out = (int64_t)v->f; return true; }
    }
    char b[400];
    describe(L, v, b, sizeof b);
    fe_error(L->d, v->loc, "expected an integer for %s; got %s", what, b);
    return false;
}

static bool want_size(Lower *L, const LVal *v, const char *what, int64_t *out) {
    if (!want_int(L, v, what, out)) return false;
    if (*out < 1) {
        fe_error(L->d, v->loc, "%s is %lld; expected a size of at least 1", what, (long long)*out);
        return false;
    }
    return true;
}

static bool want_float(Lower *L, const LVal *v, const char *what, double *out) {
    if (v->kind == LV_POISON) return false;
    if (v->kind == LV_SCALAR) { *out = v->f; return true; }
    char b[400];
    describe(L, v, b, sizeof b);
    fe_error(L->d, v->loc, "expected a number for %s; got %s", what, b);
    return false;
}

/* dropout's p: a number in [0, 1). */
static bool want_probability(Lower *L, const LVal *v, const char *what, double *out) {
    if (!want_float(L, v, what, out)) return false;
    if (*out >= 0 && *out < 1) return true;
    char b[400];
    describe(L, v, b, sizeof b);
    fe_error(L->d, v->loc, "%s is %s; expected a probability in [0, 1)", what, b);
    return false;
}

static bool want_bool(Lower *L, const LVal *v, const char *what, bool *out) {
    if (v->kind == LV_POISON) return false;
    if (v->kind == LV_BOOL) { *out = v->i != 0; return true; }
    char b[400];
    describe(L, v, b, sizeof b);
    fe_error(L->d, v->loc, "expected true or false for %s; got %s", what, b);
    return false;
}

static bool want_dtype(Lower *L, const LVal *v, const char *what, FcDtype *out) {
    if (v->kind == LV_POISON) return false;
    if (v->kind == LV_DTYPE) { *out = (FcDtype)v->i; return true; }
    char b[400];
    describe(L, v, b, sizeof b);
    fe_error(L->d, v->loc, "expected a dtype name (f32, bf16, i32, ...) for %s; got %s", what, b);
    return false;
}

/* An int or a list of ints (axes, shapes); at most `maxn` entries. Sizes: each >= 1 unless
 * allow_neg1 (one -1 allowed, checked by the shape rule) or axes (any sign). */
enum { INTS_AXES, INTS_SIZES, INTS_RESHAPE };
static bool want_ints(Lower *L, const LVal *v, const char *what, int mode, int maxn, int64_t **out, int *n) {
    if (v->kind == LV_POISON) return false;
    const LVal *items = v;
    int cnt = 1;
    if (v->kind == LV_LIST) {
        items = v->items;
        cnt = v->n;
    } else if (v->kind != LV_SCALAR) {
        char b[400];
        describe(L, v, b, sizeof b);
        fe_error(L->d, v->loc, "expected an integer or a list of integers for %s; got %s", what, b);
        return false;
    }
    if (cnt > maxn) {
        fe_error(L->d, v->loc, "%s has %d entries; expected at most %d", what, cnt, maxn);
        return false;
    }
    int64_t *r = scratch(L, sizeof(int64_t) * (size_t)(cnt ? cnt : 1));
    if (!r) return false;
    bool ok = true;
    for (int i = 0; i < cnt; i++) {
        if (!want_int(L, &items[i], what, &r[i])) { ok = false; continue; }
        if (mode == INTS_SIZES && r[i] < 1) {
            fe_error(L->d, items[i].loc, "%s has the size %lld; expected a size of at least 1", what, (long long)r[i]);
            ok = false;
        } else if (mode == INTS_RESHAPE && r[i] < 1 && r[i] != -1) {
            fe_error(L->d, items[i].loc, "%s has the size %lld; expected a size of at least 1, or -1 once", what,
                     (long long)r[i]);
            ok = false;
        }
    }
    *out = r;
    *n = cnt;
    return ok;
}

/* ---- constant folding --------------------------------------------------------------------- */
static LVal fold_check(Lower *L, LVal r, FeLoc loc, const char *what) {
    if (isnan(r.f)) {
        fe_error(L->d, loc, "constant %s gives NaN; expected a number", what);
        return poison(loc);
    }
    return r;
}

static LVal fold_binary(Lower *L, IrOp op, const LVal *a, const LVal *b, FeLoc loc) {
    LVal r = {.kind = LV_SCALAR, .loc = loc, .input = -1};
    if (a->inexact) { r.inexact = true; r.div_a = a->div_a; r.div_b = a->div_b; r.div_loc = a->div_loc; }
    else if (b->inexact) { r.inexact = true; r.div_a = b->div_a; r.div_b = b->div_b; r.div_loc = b->div_loc; }
    bool ints = a->hasint && b->hasint;
    char sa[64], sb[64];
    fmt_scalar(a, sa, sizeof sa);
    fmt_scalar(b, sb, sizeof sb);
    switch (op) {
    case IR_OP_ADD: case IR_OP_SUB: case IR_OP_MUL:
        if (ints) {
            int64_t v = 0;
            bool ok = op == IR_OP_ADD ? fc_add64(a->i, b->i, &v)
                    : op == IR_OP_SUB ? !__builtin_sub_overflow(a->i, b->i, &v)
                                      : fc_mul64(a->i, b->i, &v);
            if (!ok) {
                fe_error(L->d, loc, "integer overflow: %s %s %s does not fit in 64 bits; expected a smaller value", sa,
                         op == IR_OP_ADD ? "+" : op == IR_OP_SUB ? "-" : "*", sb);
                return poison(loc);
            }
            r.isint = a->isint && b->isint;
            r.hasint = true;
            r.i = v;
            r.f = (double)v;
            return r;
        }
        r.f = op == IR_OP_ADD ? a->f + b->f : op == IR_OP_SUB ? a->f - b->f : a->f * b->f;
        return fold_check(L, r, loc, "arithmetic");
    case IR_OP_DIV:
        if (b->f == 0) {
            fe_error(L->d, loc, "division by zero in a constant expression (%s / %s); expected a non-zero divisor", sa, sb);
            return poison(loc);
        }
        if (ints) {
            if (a->i % b->i == 0 && !(a->i == INT64_MIN && b->i == -1)) {
                r.hasint = true;
                r.i = a->i / b->i;
                r.f = (double)r.i;
                return r;
            }
            r.f = (double)a->i / (double)b->i;
            if (!r.inexact) { r.inexact = true; r.div_a = a->i; r.div_b = b->i; r.div_loc = loc; }
            return r;
        }
        r.f = a->f / b->f;
        return fold_check(L, r, loc, "division");
    case IR_OP_POW:
        r.f = pow(a->f, b->f);
        return fold_check(L, r, loc, "'pow'");
    case IR_OP_MAXIMUM: case IR_OP_MINIMUM: {
        bool first = op == IR_OP_MAXIMUM ? a->f >= b->f : a->f <= b->f;
        r = first ? *a : *b;
        r.loc = loc;
        r.isint = a->isint && b->isint;
        return r;
    }
    default:
        fe_error(L->d, loc, "'%s' of two constants; expected at least one tensor operand", ir_ops[op].name);
        return poison(loc);
    }
}

static LVal fold_unary(Lower *L, IrOp op, const LVal *x, FeLoc loc) {
    LVal r = {.kind = LV_SCALAR, .loc = loc, .input = -1};
    double v = x->f;
    if (x->hasint && (op == IR_OP_NEG || op == IR_OP_ABS || op == IR_OP_SQUARE || op == IR_OP_RELU)) {
        int64_t i = x->i, o = 0;
        bool ok = true;
        if (op == IR_OP_NEG) ok = !__builtin_sub_overflow((int64_t)0, i, &o);
        else if (op == IR_OP_ABS) ok = !__builtin_sub_overflow((int64_t)0, i, &o), o = i < 0 ? o : i;
        else if (op == IR_OP_SQUARE) ok = fc_mul64(i, i, &o);
        else o = i > 0 ? i : 0;
        if (!ok) {
            fe_error(L->d, loc, "integer overflow in '%s' of %lld; expected a smaller value", ir_ops[op].name, (long long)i);
            return poison(loc);
        }
        r.isint = x->isint;
        r.hasint = true;
        r.i = o;
        r.f = (double)o;
        return r;
    }
    switch (op) {
    case IR_OP_NEG: r.f = -v; break;
    case IR_OP_ABS: r.f = fabs(v); break;
    case IR_OP_EXP: r.f = exp(v); break;
    case IR_OP_LOG: r.f = log(v); break;
    case IR_OP_SQRT: r.f = sqrt(v); break;
    case IR_OP_RSQRT: r.f = 1.0 / sqrt(v); break;
    case IR_OP_RECIP: r.f = 1.0 / v; break;
    case IR_OP_SQUARE: r.f = v * v; break;
    case IR_OP_TANH: r.f = tanh(v); break;
    case IR_OP_SIGMOID: r.f = 1.0 / (1.0 + exp(-v)); break;
    case IR_OP_RELU: r.f = v > 0 ? v : 0; break;
    case IR_OP_SILU: r.f = v / (1.0 + exp(-v)); break;
    case IR_OP_ERF: r.f = erf(v); break;
    case IR_OP_NDTR: r.f = 0.5 * erfc(-v * M_SQRT1_2); break;
    case IR_OP_SIN: r.f = sin(v); break;
    case IR_OP_COS: r.f = cos(v); break;
    default: break;
    }
    if (isnan(r.f)) {
        char b[64];
        fmt_scalar(x, b, sizeof b);
        fe_error(L->d, loc, "'%s' of %s is not a number (NaN); expected an argument in its domain", ir_ops[op].name, b);
        return poison(loc);
    }
    return r;
}

/* ---- elementwise ops ------------------------------------------------------------------------ */
static bool numeric_operand(Lower *L, const LVal *v, const char *opname) {
    if (v->kind == LV_TENSOR || v->kind == LV_SCALAR || v->kind == LV_BOOL) return true;
    if (v->kind == LV_MULTI && v->n == 1) return true;
    if (v->kind == LV_POISON) return false;
    char b[400];
    describe(L, v, b, sizeof b);
    fe_error(L->d, v->loc, "'%s' expects tensors or numbers; got %s", opname, b);
    return false;
}

static LVal unwrap(LVal v) { return v.kind == LV_MULTI && v.n == 1 ? v.items[0] : v; }

/* i8 is a storage type (docs/language.md): an i8 tensor given to an op other than cast, an
 * index map, gather (its table) or where (both data operands i8) is an error at the op, before
 * any implicit cast could hide it. */
static bool is_i8(Lower *L, const LVal *v) {
    LVal u = unwrap(*v);
    return u.kind == LV_TENSOR && *vdt(L, u.id) == FC_I8;
}
static bool reject_i8(Lower *L, const LVal *v, const char *opname, FeLoc loc) {
    bool any = is_i8(L, v);
    for (int i = 0; v->kind == LV_LIST && i < v->n; i++) any = any || is_i8(L, &v->items[i]);
    if (any) fe_error(L->d, loc, IR_I8_OPERAND_MSG, opname);
    return any;
}

/* a OP b for an elementwise binary op or comparison, with weak scalars and promotion. */
static LVal binary(Lower *L, IrOp op, LVal a, LVal b, FeLoc loc, const char *opname) {
    bool oka = numeric_operand(L, &a, opname), okb = numeric_operand(L, &b, opname);
    if (!oka || !okb) return poison(loc);
    a = unwrap(a);
    b = unwrap(b);
    if (reject_i8(L, &a, opname, loc) || reject_i8(L, &b, opname, loc)) return poison(loc);
    bool cmp = ir_ops[op].cat == IR_CAT_COMPARE;
    if (a.kind != LV_TENSOR && b.kind != LV_TENSOR) {
        if (a.kind == LV_SCALAR && b.kind == LV_SCALAR && !cmp) return fold_binary(L, op, &a, &b, loc);
        fe_error(L->d, loc, "'%s' of two constants; expected at least one tensor operand", opname);
        return poison(loc);
    }
    FcDtype t;
    if (a.kind == LV_TENSOR && b.kind == LV_TENSOR) t = promote(*vdt(L, a.id), *vdt(L, b.id));
    else if (a.kind == LV_TENSOR) t = weak_dtype(&b, *vdt(L, a.id));
    else t = weak_dtype(&a, *vdt(L, b.id));
    if (op == IR_OP_DIV && !ir_dtype_is_float(t)) t = FC_F32;
    int origin = new_origin(L);
    int ia = a.kind == LV_TENSOR ? cast_to(L, a.id, t, loc, origin, op) : scalar_node(L, &a, t, origin, op);
    int ib = b.kind == LV_TENSOR ? cast_to(L, b.id, t, loc, origin, op) : scalar_node(L, &b, t, origin, op);
    if (ia < 0 || ib < 0) return poison(loc);
    int ins[2] = {ia, ib};
    int r = add_node(L, op, ins, 2, NULL, loc, origin, op);
    return r < 0 ? poison(loc) : tensor(r, loc);
}

static LVal matmul(Lower *L, LVal a, LVal b, FeLoc loc, const char *opname) {
    int ia, ib;
    if (reject_i8(L, &a, opname, loc) || reject_i8(L, &b, opname, loc)) return poison(loc);
    bool oka = want_tensor(L, &a, "an operand of '@'", &ia);
    bool okb = want_tensor(L, &b, "an operand of '@'", &ib);
    if (!oka || !okb) return poison(loc);
    IrShape sa = *vsh(L, ia), sb = *vsh(L, ib);
    char ta[300], tb[300];
    tstr(L, ia, ta, sizeof ta);
    tstr(L, ib, tb, sizeof tb);
    if (sa.rank == 0 || sb.rank == 0) {
        fe_error(L->d, loc, "matrix product of %s @ %s; expected operands of rank >= 1", ta, tb);
        return poison(loc);
    }
    int64_t ka = sa.dims[sa.rank - 1], kb = sb.rank == 1 ? sb.dims[0] : sb.dims[sb.rank - 2];
    if (ka != kb) {
        fe_error(L->d, loc, "matrix product inner sizes differ: %s @ %s (%lld vs %lld)", ta, tb, (long long)ka, (long long)kb);
        return poison(loc);
    }
    int origin = new_origin(L);
    FcDtype t = promote(*vdt(L, ia), *vdt(L, ib));
    ia = cast_to(L, ia, t, loc, origin, IR_OP_MATMUL);
    ib = cast_to(L, ib, t, loc, origin, IR_OP_MATMUL);
    if (ia < 0 || ib < 0) return poison(loc);
    if (sa.rank == 1) {
        int64_t sh[2] = {1, ka};
        IrAttrs at = {.nlist = 2, .list = sh};
        ia = add_node(L, IR_OP_RESHAPE, &ia, 1, &at, loc, origin, IR_OP_MATMUL);
    }
    if (sb.rank == 1) {
        int64_t sh[2] = {kb, 1};
        IrAttrs at = {.nlist = 2, .list = sh};
        ib = add_node(L, IR_OP_RESHAPE, &ib, 1, &at, loc, origin, IR_OP_MATMUL);
    }
    if (ia < 0 || ib < 0) return poison(loc);
    int ins[2] = {ia, ib};
    int r = add_node(L, IR_OP_MATMUL, ins, 2, NULL, loc, origin, IR_OP_MATMUL);
    if (r < 0) return poison(loc);
    if (sa.rank == 1 || sb.rank == 1) {
        IrShape o = *vsh(L, r);
        int64_t sh[IR_MAX_RANK];
        int k = 0;
        for (int d = 0; d < o.rank; d++) {
            if (sa.rank == 1 && d == o.rank - 2) continue;
            if (sb.rank == 1 && d == o.rank - 1) continue;
            sh[k++] = o.dims[d];
        }
        IrAttrs at = {.nlist = k, .list = sh};
        r = add_node(L, IR_OP_RESHAPE, &r, 1, &at, loc, origin, IR_OP_MATMUL);
        if (r < 0) return poison(loc);
    }
    return tensor(r, loc);
}

/* ---- ops by name ---------------------------------------------------------------------------- */
typedef enum OpKind {
    K_UNARY, K_BINARY, K_MATMUL, K_WHERE, K_CAST, K_REDUCE, K_SOFTMAX, K_LAYERNORM, K_RMSNORM,
    K_CAUSAL, K_ATTENTION, K_GELU, K_RESHAPE, K_TRANSPOSE, K_BROADCAST, K_CONCAT, K_SPLIT, K_SLICE,
    K_IOTA, K_FULL, K_GATHER, K_SCATTER_ADD, K_DROPOUT, K_DROPOUT_MASK, K_CROSS_ENTROPY,
    K_INTERNAL   /* made by the compiler, never called in source: its name is not an op's */
} OpKind;

#define MAX_ARGS 6
typedef struct OpSpec {
    const char *name;
    IrOp op;
    OpKind kind;
    int nreq;
    const char *args[MAX_ARGS];
} OpSpec;

/* The source name of each op (ops.def), as constants the table below can point at. */
#define OP(ID, NAME, MININ, MAXIN, NOUT, CAT, ATTRS, SHAPE, FLOPS) static const char op_name_##ID[] = NAME;
#include "ops.def"
#undef OP

/* One entry per row of opsig.def: the op's argument names and how many are required. */
static const OpSpec op_specs[] = {
#define SIG(ID, KIND, NREQ, DEFAULTS, DTYPES, RESULT, MEANING, ...) \
    {op_name_##ID, IR_OP_##ID, K_##KIND, NREQ, {__VA_ARGS__}},
#include "opsig.def"
#undef SIG
};

static const OpSpec *find_op(const char *name) {
    for (size_t i = 0; i < sizeof op_specs / sizeof op_specs[0]; i++)
        if (op_specs[i].kind != K_INTERNAL && strcmp(op_specs[i].name, name) == 0) return &op_specs[i];
    return NULL;
}

/* Names other frameworks give some of these ops, for "did you mean" only: too far from
 * ours by spelling to be found by edit distance (`swish` is `silu`). Each target is an op. */
static const struct { const char *other, *op; } op_other_names[] = {
    {"swish", "silu"}, {"reciprocal", "recip"}, {"permute", "transpose"}, {"cat", "concat"},
    {"view", "reshape"}, {"expand", "broadcast"}, {"broadcast_to", "broadcast"},
    {"embedding", "gather"}, {"mm", "matmul"}, {"bmm", "matmul"}, {"arange", "iota"},
    {"scaled_dot_product_attention", "attention"}, {"power", "pow"},
};

/* "; did you mean 'best'?" (q the quote: '\'' for names, '"' for strings), or "". */
static const char *did_you_mean(const FeSuggest *s, char q, char *buf, size_t n) {
    if (!s->best) return "";
    snprintf(buf, n, "; did you mean %c%s%c?", q, s->best, q);
    return buf;
}

/* Matches a call's arguments to parameter names: out[i] is the expression for names[i]
 * (NULL when absent). Reports every positional overflow, unknown name, duplicate and
 * missing required argument. `what` is "'softmax'" or "block 'mlp'". */
static bool bind_args(Lower *L, FeExpr *call, const char *what, const char *const *names, int nnames, int nreq,
                      FeExpr **out) {
    bool ok = true;
    for (int i = 0; i < nnames; i++) out[i] = NULL;
    int pos = 0;
    for (FeArg *a = call->args; a; a = a->next) {
        int k = -1;
        FeLoc at = a->key ? a->key_loc : a->val->loc;
        if (!a->key) {
            if (pos >= nnames) {
                fe_error(L->d, at, "%s takes at most %d argument%s; got more", what, nnames, nnames == 1 ? "" : "s");
                ok = false;
                break;
            }
            k = pos++;
        } else {
            for (int i = 0; i < nnames; i++)
                if (strcmp(names[i], a->key) == 0) k = i;
            if (k < 0) {
                char list[600];
                size_t off = 0;
                list[0] = 0;
                for (int i = 0; i < nnames && off < sizeof list; i++)
                    off += (size_t)snprintf(list + off, sizeof list - off, "%s%s", i ? ", " : "", names[i]);
                FeSuggest sg = {.name = a->key};
                for (int i = 0; i < nnames; i++) fe_suggest(&sg, names[i]);
                char dym[FE_SUGGEST_MAX + 32];
                fe_error(L->d, at, "%s has no argument named '%s'; expected one of: %s%s", what, a->key, list,
                         did_you_mean(&sg, '\'', dym, sizeof dym));
                ok = false;
                continue;
            }
        }
        if (out[k]) {
            fe_error(L->d, at, "argument '%s' of %s is given twice; expected it once", names[k], what);
            ok = false;
            continue;
        }
        out[k] = a->val;
    }
    for (int i = 0; i < nreq; i++)
        if (!out[i] && ok) {
            fe_error(L->d, call->loc, "%s is missing its argument '%s'; expected it by position or as %s=...", what,
                     names[i], names[i]);
            ok = false;
        }
    return ok;
}

static LVal lower_op(Lower *L, Scope *S, FeExpr *call, const OpSpec *spec) {
    FeLoc loc = call->loc;
    char what[64];
    snprintf(what, sizeof what, "'%s'", spec->name);
    int nn = 0;
    while (nn < MAX_ARGS && spec->args[nn]) nn++;
    FeExpr *ex[MAX_ARGS];
    if (!bind_args(L, call, what, spec->args, nn, spec->nreq, ex)) return poison(loc);
    LVal av[MAX_ARGS];
    bool bad = false;
    for (int i = 0; i < nn; i++) {
        av[i] = ex[i] ? lower_expr(L, S, ex[i]) : (LVal){.kind = LV_NONE, .loc = loc, .input = -1};
        if (av[i].kind == LV_POISON) bad = true;
    }
    if (bad || stop(L)) return poison(loc);
    switch (spec->kind) {   /* which arguments may be i8 (docs/language.md) */
    case K_BINARY: case K_MATMUL: break;   /* binary() and matmul() check theirs */
    case K_CAST: case K_RESHAPE: case K_TRANSPOSE: case K_BROADCAST: case K_SPLIT: case K_SLICE: break;
    case K_CONCAT:   /* all i8 or none: no implicit cast from i8 */
        for (int i = 0; av[0].kind == LV_LIST && i < av[0].n; i++)
            if (is_i8(L, &av[0].items[i]) != is_i8(L, &av[0].items[0]) && reject_i8(L, &av[0], spec->name, loc))
                return poison(loc);
        break;
    case K_GATHER:
        if (reject_i8(L, &av[1], spec->name, loc)) return poison(loc);
        break;
    case K_WHERE:   /* both data operands i8 tensors, or neither: a constant is never i8 */
        if (reject_i8(L, &av[0], spec->name, loc)) return poison(loc);
        if (is_i8(L, &av[1]) != is_i8(L, &av[2]) && (reject_i8(L, &av[1], spec->name, loc) || reject_i8(L, &av[2], spec->name, loc)))
            return poison(loc);
        break;
    default:
        for (int i = 0; i < nn; i++)
            if (reject_i8(L, &av[i], spec->name, loc)) return poison(loc);
        break;
    }
    char an[MAX_ARGS][96];   /* "'axis' of 'softmax'" */
    for (int i = 0; i < nn; i++) snprintf(an[i], sizeof an[i], "'%s' of '%s'", spec->args[i], spec->name);
    IrOp op = spec->op;
    IrAttrs at = {0};
    int ins[3], nin = 0, x = -1;

    switch (spec->kind) {
    case K_UNARY:
        if (av[0].kind == LV_SCALAR) return fold_unary(L, op, &av[0], loc);
        if (!want_tensor(L, &av[0], an[0], &x)) return poison(loc);
        {
            int origin = new_origin(L);
            if (ir_ops[op].shape == ir_ops[IR_OP_EXP].shape && ir_dtype_is_int(*vdt(L, x)))
                x = cast_to(L, x, FC_F32, loc, origin, op);
            if (x < 0) return poison(loc);
            int r = add_node(L, op, &x, 1, NULL, loc, origin, op);
            return r < 0 ? poison(loc) : tensor(r, loc);
        }
    case K_BINARY: return binary(L, op, av[0], av[1], loc, spec->name);
    case K_MATMUL: return matmul(L, av[0], av[1], loc, spec->name);
    case K_WHERE: {
        int c;
        if (!want_tensor(L, &av[0], an[0], &c)) return poison(loc);
        LVal a = unwrap(av[1]), b = unwrap(av[2]);
        if (!numeric_operand(L, &a, "where") || !numeric_operand(L, &b, "where")) return poison(loc);
        FcDtype t;
        if (a.kind == LV_TENSOR && b.kind == LV_TENSOR) t = promote(*vdt(L, a.id), *vdt(L, b.id));
        else if (a.kind == LV_TENSOR) t = weak_dtype(&b, *vdt(L, a.id));
        else if (b.kind == LV_TENSOR) t = weak_dtype(&a, *vdt(L, b.id));
        else if (a.kind == LV_BOOL && b.kind == LV_BOOL) t = FC_BOOL;
        else t = ((a.kind == LV_SCALAR && !a.isint) || (b.kind == LV_SCALAR && !b.isint)) ? FC_F32 : FC_I32;
        int origin = new_origin(L);
        int ia = a.kind == LV_TENSOR ? cast_to(L, a.id, t, a.loc, origin, op) : scalar_node(L, &a, t, origin, op);
        int ib = b.kind == LV_TENSOR ? cast_to(L, b.id, t, b.loc, origin, op) : scalar_node(L, &b, t, origin, op);
        if (ia < 0 || ib < 0) return poison(loc);
        ins[0] = c; ins[1] = ia; ins[2] = ib;
        int r = add_node(L, op, ins, 3, NULL, loc, origin, op);
        return r < 0 ? poison(loc) : tensor(r, loc);
    }
    case K_CAST: {
        FcDtype t;
        if (!want_dtype(L, &av[1], an[1], &t)) return poison(loc);
        if (av[0].kind == LV_SCALAR || av[0].kind == LV_BOOL) {
            if (t == FC_I8) {
                fe_error(L->d, loc, "'cast' of a constant to i8: a constant is never i8 (a storage type); cast a tensor to i8");
                return poison(loc);
            }
            int r = scalar_node(L, &av[0], t, new_origin(L), IR_OP_FULL);
            return r < 0 ? poison(loc) : tensor(r, loc);
        }
        if (!want_tensor(L, &av[0], an[0], &x)) return poison(loc);
        at.dtype = t;
        int r = add_node(L, op, &x, 1, &at, loc, -1, op);
        return r < 0 ? poison(loc) : tensor(r, loc);
    }
    case K_REDUCE: {
        if (!want_tensor(L, &av[0], an[0], &x)) return poison(loc);
        bool keep = false;
        if (av[2].kind != LV_NONE && !want_bool(L, &av[2], an[2], &keep)) return poison(loc);
        int64_t all[IR_MAX_RANK];
        int rank = vsh(L, x)->rank;
        if (av[1].kind == LV_NONE) {
            if (rank == 0) {
                fe_error(L->d, loc, "'%s' of a rank-0 tensor has no axis to reduce; expected a tensor of rank >= 1", spec->name);
                return poison(loc);
            }
            for (int i = 0; i < rank; i++) all[i] = i;
            at.list = all;
            at.nlist = rank;
        } else if (!want_ints(L, &av[1], an[1], INTS_AXES, IR_MAX_RANK, &at.list, &at.nlist)) {
            return poison(loc);
        }
        at.i[0] = keep;
        int origin = new_origin(L);
        if (op == IR_OP_MEAN && ir_dtype_is_int(*vdt(L, x))) x = cast_to(L, x, FC_F32, loc, origin, op);
        if (x < 0) return poison(loc);
        int r = add_node(L, op, &x, 1, &at, loc, origin, op);
        return r < 0 ? poison(loc) : tensor(r, loc);
    }
    case K_SOFTMAX: {
        if (!want_tensor(L, &av[0], an[0], &x)) return poison(loc);
        at.i[0] = -1;
        if (av[1].kind != LV_NONE && !want_int(L, &av[1], an[1], &at.i[0])) return poison(loc);
        int r = add_node(L, op, &x, 1, &at, loc, -1, op);
        return r < 0 ? poison(loc) : tensor(r, loc);
    }
    case K_LAYERNORM: case K_RMSNORM: {
        bool ln = spec->kind == K_LAYERNORM;
        int ia = ln ? 3 : 2, ie = ln ? 4 : 3;
        if (!want_tensor(L, &av[0], an[0], &x)) return poison(loc);
        int gi = -1, bi = -1;
        if (av[1].kind != LV_NONE && !want_tensor(L, &av[1], an[1], &gi)) return poison(loc);
        if (ln && av[2].kind != LV_NONE) {
            if (!want_tensor(L, &av[2], an[2], &bi)) return poison(loc);
            if (gi < 0) {
                fe_error(L->d, av[2].loc, "'layernorm' bias 'b' is given without the gain 'g'; expected g as well (or neither)");
                return poison(loc);
            }
        }
        int64_t last = -1;
        at.list = &last;
        at.nlist = 1;
        if (av[ia].kind != LV_NONE && !want_ints(L, &av[ia], an[ia], INTS_AXES, IR_MAX_RANK, &at.list, &at.nlist))
            return poison(loc);
        at.f = ln ? 1e-5 : 1e-6;
        if (av[ie].kind != LV_NONE && !want_float(L, &av[ie], an[ie], &at.f)) return poison(loc);
        int origin = new_origin(L);
        FcDtype t = *vdt(L, x);
        ins[nin++] = x;
        if (gi >= 0) ins[nin++] = cast_to(L, gi, t, av[1].loc, origin, op);
        if (bi >= 0) ins[nin++] = cast_to(L, bi, t, av[2].loc, origin, op);
        for (int i = 0; i < nin; i++)
            if (ins[i] < 0) return poison(loc);
        at.i[0] = gi >= 0;
        at.i[1] = bi >= 0;
        int r = add_node(L, op, ins, nin, &at, loc, origin, op);
        return r < 0 ? poison(loc) : tensor(r, loc);
    }
    case K_CAUSAL: {
        if (!want_tensor(L, &av[0], an[0], &x)) return poison(loc);
        at.f = -INFINITY;
        if (av[1].kind != LV_NONE && !want_float(L, &av[1], an[1], &at.f)) return poison(loc);
        int r = add_node(L, op, &x, 1, &at, loc, -1, op);
        return r < 0 ? poison(loc) : tensor(r, loc);
    }
    case K_ATTENTION: {
        bool ok = true;
        for (int i = 0; i < 3; i++) ok = want_tensor(L, &av[i], an[i], &ins[i]) && ok;
        if (!ok) return poison(loc);
        bool causal = false;
        if (av[3].kind != LV_NONE && !want_bool(L, &av[3], an[3], &causal)) return poison(loc);
        const IrShape *qs = vsh(L, ins[0]);
        at.f = qs->rank >= 1 ? 1.0 / sqrt((double)qs->dims[qs->rank - 1]) : 1.0;
        if (av[4].kind != LV_NONE && !want_float(L, &av[4], an[4], &at.f)) return poison(loc);
        at.i[0] = causal;
        int origin = new_origin(L);
        FcDtype t = promote(promote(*vdt(L, ins[0]), *vdt(L, ins[1])), *vdt(L, ins[2]));
        for (int i = 0; i < 3; i++) {
            ins[i] = cast_to(L, ins[i], t, av[i].loc, origin, op);
            if (ins[i] < 0) return poison(loc);
        }
        int r = add_node(L, op, ins, 3, &at, loc, origin, op);
        return r < 0 ? poison(loc) : tensor(r, loc);
    }
    case K_GELU: {
        if (!want_tensor(L, &av[0], an[0], &x)) return poison(loc);
        at.i[0] = IR_APPROX_NONE;
        if (av[1].kind != LV_NONE) {
            if (av[1].kind == LV_STR && strcmp(av[1].str, "none") == 0) at.i[0] = IR_APPROX_NONE;
            else if (av[1].kind == LV_STR && strcmp(av[1].str, "tanh") == 0) at.i[0] = IR_APPROX_TANH;
            else {
                char b[400];
                describe(L, &av[1], b, sizeof b);
                FeSuggest sg = {.name = av[1].kind == LV_STR ? av[1].str : NULL};
                fe_suggest(&sg, "none");
                fe_suggest(&sg, "tanh");
                char dym[FE_SUGGEST_MAX + 32];
                fe_error(L->d, av[1].loc, "'approx' of 'gelu' must be \"none\" or \"tanh\"; got %s%s", b,
                         did_you_mean(&sg, '"', dym, sizeof dym));
                return poison(loc);
            }
        }
        int origin = new_origin(L);
        if (ir_dtype_is_int(*vdt(L, x))) x = cast_to(L, x, FC_F32, loc, origin, op);
        if (x < 0) return poison(loc);
        int r = add_node(L, op, &x, 1, &at, loc, origin, op);
        return r < 0 ? poison(loc) : tensor(r, loc);
    }
    case K_RESHAPE: case K_BROADCAST: {
        if (!want_tensor(L, &av[0], an[0], &x)) return poison(loc);
        if (!want_ints(L, &av[1], an[1], spec->kind == K_RESHAPE ? INTS_RESHAPE : INTS_SIZES, IR_MAX_RANK, &at.list,
                       &at.nlist))
            return poison(loc);
        int r = add_node(L, op, &x, 1, &at, loc, -1, op);
        return r < 0 ? poison(loc) : tensor(r, loc);
    }
    case K_TRANSPOSE: {
        if (!want_tensor(L, &av[0], an[0], &x)) return poison(loc);
        int64_t perm[IR_MAX_RANK];
        if (av[1].kind == LV_NONE) {
            int r = vsh(L, x)->rank;
            if (r < 2) {
                char t[300];
                tstr(L, x, t, sizeof t);
                fe_error(L->d, loc, "'transpose' without 'perm' swaps the last two dims; expected a tensor of rank >= 2, got %s", t);
                return poison(loc);
            }
            for (int i = 0; i < r; i++) perm[i] = i;
            perm[r - 2] = r - 1;
            perm[r - 1] = r - 2;
            at.list = perm;
            at.nlist = r;
        } else if (!want_ints(L, &av[1], an[1], INTS_AXES, IR_MAX_RANK, &at.list, &at.nlist)) {
            return poison(loc);
        }
        int r = add_node(L, op, &x, 1, &at, loc, -1, op);
        return r < 0 ? poison(loc) : tensor(r, loc);
    }
    case K_CONCAT: {
        if (av[0].kind != LV_LIST || av[0].n < 1) {
            char b[400];
            describe(L, &av[0], b, sizeof b);
            fe_error(L->d, av[0].loc, "expected a non-empty list of tensors for %s; got %s", an[0], b);
            return poison(loc);
        }
        at.i[0] = -1;
        if (av[1].kind != LV_NONE && !want_int(L, &av[1], an[1], &at.i[0])) return poison(loc);
        int n = av[0].n;
        int *xs = scratch(L, sizeof(int) * (size_t)n);
        if (!xs) return poison(loc);
        bool ok = true;
        for (int i = 0; i < n; i++) ok = want_tensor(L, &av[0].items[i], "an item of 'xs' of 'concat'", &xs[i]) && ok;
        if (!ok) return poison(loc);
        FcDtype t = *vdt(L, xs[0]);
        for (int i = 1; i < n; i++) t = promote(t, *vdt(L, xs[i]));
        int origin = new_origin(L);
        for (int i = 0; i < n; i++) {
            xs[i] = cast_to(L, xs[i], t, av[0].items[i].loc, origin, op);
            if (xs[i] < 0) return poison(loc);
        }
        int r = add_node(L, op, xs, n, &at, loc, origin, op);
        return r < 0 ? poison(loc) : tensor(r, loc);
    }
    case K_SPLIT: {
        if (!want_tensor(L, &av[0], an[0], &x)) return poison(loc);
        at.i[0] = -1;
        if (av[2].kind != LV_NONE && !want_int(L, &av[2], an[2], &at.i[0])) return poison(loc);
        const IrShape *xs = vsh(L, x);
        if (av[1].kind == LV_LIST) {
            if (!want_ints(L, &av[1], an[1], INTS_SIZES, MAX_SPLIT, &at.list, &at.nlist)) return poison(loc);
        } else {
            int64_t n;
            if (!want_int(L, &av[1], an[1], &n)) return poison(loc);
            int64_t ax = at.i[0];
            if (ax < -xs->rank || ax >= xs->rank || xs->rank == 0) {
                fe_error(L->d, loc, "axis %lld is out of range for 'split' of a rank-%d tensor (expected %d..%d)", (long long)ax,
                         xs->rank, -xs->rank, xs->rank - 1);
                return poison(loc);
            }
            if (ax < 0) ax += xs->rank;
            int64_t size = xs->dims[ax];
            if (n < 1 || n > MAX_SPLIT) {
                fe_error(L->d, av[1].loc, "'split' into %lld sections; expected a count from 1 to %d", (long long)n, MAX_SPLIT);
                return poison(loc);
            }
            if (size % n != 0) {
                fe_error(L->d, av[1].loc, "'split' into %lld sections of axis %lld with size %lld; expected a count that divides the size exactly",
                         (long long)n, (long long)ax, (long long)size);
                return poison(loc);
            }
            at.list = scratch(L, sizeof(int64_t) * (size_t)n);
            if (!at.list) return poison(loc);
            for (int64_t i = 0; i < n; i++) at.list[i] = size / n;
            at.nlist = (int)n;
        }
        int r = add_node(L, op, &x, 1, &at, loc, -1, op);
        if (r < 0) return poison(loc);
        int nout = L->g->nodes.data[L->g->nodes.len - 1].nout;
        LVal m = {.kind = LV_MULTI, .loc = loc, .n = nout, .what = "'split'", .input = -1};
        m.items = scratch(L, sizeof(LVal) * (size_t)nout);
        if (!m.items) return poison(loc);
        for (int i = 0; i < nout; i++) m.items[i] = tensor(r + i, loc);
        return m;
    }
    case K_SLICE: {
        if (!want_tensor(L, &av[0], an[0], &x)) return poison(loc);
        at.i[3] = 1;
        bool ok = want_int(L, &av[1], an[1], &at.i[0]);
        ok = want_int(L, &av[2], an[2], &at.i[1]) && ok;
        ok = want_int(L, &av[3], an[3], &at.i[2]) && ok;
        if (av[4].kind != LV_NONE) ok = want_int(L, &av[4], an[4], &at.i[3]) && ok;
        if (!ok) return poison(loc);
        int r = add_node(L, op, &x, 1, &at, loc, -1, op);
        return r < 0 ? poison(loc) : tensor(r, loc);
    }
    case K_IOTA: case K_FULL: {
        bool iota = spec->kind == K_IOTA;
        if (!want_ints(L, &av[0], an[0], INTS_SIZES, IR_MAX_RANK, &at.list, &at.nlist)) return poison(loc);
        at.dtype = iota ? FC_I32 : FC_F32;
        if (av[2].kind != LV_NONE && !want_dtype(L, &av[2], an[2], &at.dtype)) return poison(loc);
        if (iota) {
            if (!want_int(L, &av[1], an[1], &at.i[0])) return poison(loc);
        } else if (av[1].kind == LV_BOOL) {
            at.f = (double)av[1].i;
        } else {
            if (!want_float(L, &av[1], an[1], &at.f)) return poison(loc);
            if (!fits(L, &av[1], at.dtype)) return poison(loc);
        }
        int r = add_node(L, op, NULL, 0, &at, loc, -1, op);
        return r < 0 ? poison(loc) : tensor(r, loc);
    }
    case K_GATHER: case K_CROSS_ENTROPY: {   /* two tensors; the shape rule checks them */
        bool ok = want_tensor(L, &av[0], an[0], &ins[0]);
        ok = want_tensor(L, &av[1], an[1], &ins[1]) && ok;
        if (!ok) return poison(loc);
        int r = add_node(L, op, ins, 2, NULL, loc, -1, op);
        return r < 0 ? poison(loc) : tensor(r, loc);
    }
    case K_SCATTER_ADD: {   /* two tensors and the result's row count */
        bool ok = want_tensor(L, &av[0], an[0], &ins[0]);
        ok = want_tensor(L, &av[1], an[1], &ins[1]) && ok;
        ok = want_int(L, &av[2], an[2], &at.i[0]) && ok;
        if (!ok) return poison(loc);
        int r = add_node(L, op, ins, 2, &at, loc, -1, op);
        return r < 0 ? poison(loc) : tensor(r, loc);
    }
    case K_DROPOUT: case K_DROPOUT_MASK: {
        bool mask = spec->kind == K_DROPOUT_MASK;
        bool ok = mask ? want_ints(L, &av[0], an[0], INTS_SIZES, IR_MAX_RANK, &at.list, &at.nlist)
                       : want_tensor(L, &av[0], an[0], &x);
        ok = want_probability(L, &av[1], an[1], &at.f) && ok;
        ok = want_int(L, &av[2], an[2], &at.i[0]) && ok;
        if (!ok) return poison(loc);
        int r = add_node(L, op, mask ? NULL : &x, mask ? 0 : 1, &at, loc, -1, op);
        return r < 0 ? poison(loc) : tensor(r, loc);
    }
    case K_INTERNAL: break;   /* find_op never returns one */
    }
    return poison(loc);
}

/* ---- names, dims, consts -------------------------------------------------------------------- */
static const char *decl_kind(const FeDecl *d) {
    return d->kind == FE_D_DIM ? "dim" : d->kind == FE_D_CONST ? "const" : "block";
}

static FeDecl *global(Lower *L, const char *name) {
    int i;
    return fe_map_get(&L->globals, name, &i) ? L->decls[i] : NULL;
}

/* Offers the file's declarations of the kinds in `kinds` (bits 1 << FE_D_...) to sg. */
static void suggest_decls(Lower *L, FeSuggest *sg, unsigned kinds) {
    for (int i = 0; i < L->p->ndecls; i++)
        if (kinds & (1u << L->decls[i]->kind)) fe_suggest(sg, L->decls[i]->name);
}

static LVal const_value(Lower *L, FeDecl *c, FeLoc use) {
    c->used = true;
    if (c->lstate == 2) {
        LVal v = *(LVal *)c->lval;
        v.loc = use;
        if (v.inexact) v.div_const = c->name;
        return v;
    }
    if (c->lstate == 3) return poison(use);
    if (c->lstate == 1) {
        fe_error(L->d, use, "const '%s' is defined in terms of itself; expected a value that does not depend on '%s'", c->name,
                 c->name);
        c->lstate = 3;
        return poison(use);
    }
    c->lstate = 1;
    LVal v = lower_expr(L, NULL, c->expr);
    if (c->lstate == 3) return poison(use);
    if (v.kind != LV_SCALAR) {
        if (v.kind != LV_POISON) {
            char b[400];
            describe(L, &v, b, sizeof b);
            fe_error(L->d, c->expr->loc, "const '%s' must be a number; got %s", c->name, b);
        }
        c->lstate = 3;
        return poison(use);
    }
    LVal *keep = scratch(L, sizeof *keep);
    if (!keep) return poison(use);
    *keep = v;
    c->lval = keep;
    c->lstate = 2;
    v.loc = use;
    if (v.inexact) v.div_const = c->name;
    return v;
}

static LVal lookup(Lower *L, Scope *S, FeExpr *e) {
    int idx;
    if (S && fe_map_get(&S->names, e->name, &idx)) {
        LVal v = S->vals.data[idx];
        if (v.input >= 0 && v.input < L->ninputs) L->input_used[v.input] = true;
        if (v.kind == LV_POISON) return poison(e->loc);
        v.loc = e->loc;
        return v;
    }
    FeDecl *d = global(L, e->name);
    if (d && d->kind == FE_D_DIM) {
        d->used = true;
        if (d->bound) return scalar_int(d->bound_value, e->loc);
        if (!d->reported)
            fe_error(L->d, e->loc, "dim '%s' has no value; expected a default (dim %s = SIZE) or an override (-D %s=SIZE)",
                     e->name, e->name, e->name);
        d->reported = true;
        return poison(e->loc);
    }
    if (d && d->kind == FE_D_CONST) return const_value(L, d, e->loc);
    if (d && d->kind == FE_D_BLOCK)
        fe_error(L->d, e->loc, "'%s' is a block; expected a value (a block is called: %s(...))", e->name, e->name);
    else if (find_op(e->name))
        fe_error(L->d, e->loc, "'%s' is an op; expected a value (an op is called: %s(...))", e->name, e->name);
    else {
        FeSuggest sg = {.name = e->name};
        /* not the poison that stands for an undefined name (bound below) */
        for (int i = 0; S && i < S->names.cap; i++)
            if (S->names.keys[i] && S->vals.data[S->names.vals[i]].kind != LV_POISON) fe_suggest(&sg, S->names.keys[i]);
        suggest_decls(L, &sg, 1u << FE_D_DIM | 1u << FE_D_CONST);
        char dym[FE_SUGGEST_MAX + 32];
        fe_error(L->d, e->loc, "undefined name '%s'; expected a parameter, a name bound earlier, a dim or a const%s", e->name,
                 did_you_mean(&sg, '\'', dym, sizeof dym));
    }
    /* bind it as poison so that later uses do not report again */
    if (S) {
        LVal pv = poison(e->loc);
        if (!FC_VEC_PUSH(&S->vals, pv) || !fe_map_put(&S->names, e->name, S->vals.len - 1)) oom(L);
    }
    return poison(e->loc);
}

/* ---- types ------------------------------------------------------------------------------------ */
static bool eval_type(Lower *L, FeType *t, IrShape *out) {
    if (t->ndims > IR_MAX_RANK) {
        fe_error(L->d, t->loc, "type of rank %d; expected at most %d dims", t->ndims, IR_MAX_RANK);
        return false;
    }
    out->rank = t->ndims;
    bool ok = true;
    int i = 0;
    for (FeExpr *e = t->dims; e; e = e->next, i++) {
        LVal v = lower_expr(L, NULL, e);
        char what[64];
        snprintf(what, sizeof what, "dim %d of the type", i);
        if (!want_size(L, &v, what, &out->dims[i])) ok = false;
    }
    if (!ok) return false;
    int64_t nb;
    if (!ir_shape_nbytes(out, t->dtype, &nb)) {
        char b[300];
        ir_type_str(t->dtype, out, b, sizeof b);
        fe_error(L->d, t->loc, "type %s is too large: its size in bytes overflows 64 bits; expected smaller sizes", b);
        return false;
    }
    return true;
}

/* ---- blocks ----------------------------------------------------------------------------------- */
static void shadow_check(Lower *L, Scope *S, const char *name, FeLoc loc) {
    int idx;
    if (!S->block || S->block->warned || fe_map_get(&S->names, name, &idx)) return;
    FeDecl *d = global(L, name);
    if (d && d->kind != FE_D_BLOCK)
        fe_warning(L->d, loc, "'%s' shadows the %s declared at line %d", name, decl_kind(d), d->loc.line);
}

static bool bind(Lower *L, Scope *S, const char *name, LVal v) {
    int idx;
    if (fe_map_get(&S->names, name, &idx)) {
        S->vals.data[idx] = v;
        return true;
    }
    if (!FC_VEC_PUSH(&S->vals, v) || !fe_map_put(&S->names, name, S->vals.len - 1)) {
        oom(L);
        return false;
    }
    return true;
}

static void scope_free(Scope *S) {
    fe_map_free(&S->names);
    FC_VEC_FREE(&S->vals);
}

/* Lowers a block's statements in scope S. *ret gets the returned values (a LIST of
 * nret items, poison on error) and *ret_stmt the return statement. */
static void lower_body(Lower *L, FeDecl *b, Scope *S, LVal **ret, int *nret, FeStmt **ret_stmt) {
    *ret = NULL;
    *nret = 0;
    *ret_stmt = NULL;
    bool after_reported = false;
    for (FeStmt *st = b->body; st && !stop(L); st = st->next) {
        if (*ret_stmt && !after_reported) {
            fe_error(L->d, st->loc, "statement after 'return'; expected 'return' to be the last statement of block '%s'", b->name);
            after_reported = true;
        }
        if (st->kind == FE_S_RETURN) {
            if (*ret_stmt) continue;
            *ret_stmt = st;
            LVal *vals = scratch(L, sizeof(LVal) * (size_t)st->nvalues);
            if (!vals) return;
            int k = 0;
            for (FeExpr *e = st->values; e; e = e->next, k++) {
                LVal v = unwrap(lower_expr(L, S, e));
                if (v.kind != LV_TENSOR && v.kind != LV_POISON) {
                    char d[400];
                    describe(L, &v, d, sizeof d);
                    fe_error(L->d, e->loc, "a block returns tensors; got %s", d);
                    v = poison(e->loc);
                }
                vals[k] = v;
            }
            *ret = vals;
            *nret = st->nvalues;
            continue;
        }
        LVal v = lower_expr(L, S, st->values);
        if (st->ntargets == 1) {
            if (v.kind == LV_MULTI && v.n != 1) {
                fe_error(L->d, st->loc, "%s gives %d results; expected %d names on the left of '=', found 1", v.what, v.n, v.n);
                v = poison(st->loc);
            }
            v = unwrap(v);
            shadow_check(L, S, st->targets->name, st->targets->loc);
            if (!bind(L, S, st->targets->name, v)) return;
        } else {
            if (v.kind != LV_POISON && (v.kind != LV_MULTI || v.n != st->ntargets)) {
                if (v.kind == LV_MULTI)
                    fe_error(L->d, st->loc, "%s gives %d results; expected as many names on the left of '=', found %d", v.what,
                             v.n, st->ntargets);
                else
                    fe_error(L->d, st->loc, "the right side gives one value; expected %d values for the %d names on the left of '='",
                             st->ntargets, st->ntargets);
                v = poison(st->loc);
            }
            int k = 0;
            for (FeName *n = st->targets; n; n = n->next, k++) {
                shadow_check(L, S, n->name, n->loc);
                if (!bind(L, S, n->name, v.kind == LV_MULTI ? v.items[k] : poison(n->loc))) return;
            }
        }
    }
    if (!*ret_stmt && !stop(L))
        fe_error(L->d, b->end_loc, "block '%s' has no 'return'; expected 'return' as its last statement", b->name);
    if (*ret_stmt && b->results && !stop(L)) {
        FeStmt *rs = *ret_stmt;
        if (b->nresults != rs->nvalues) {
            fe_error(L->d, rs->loc, "block '%s' returns %d value%s; its declared result types list %d", b->name, rs->nvalues,
                     rs->nvalues == 1 ? "" : "s", b->nresults);
        } else {
            int k = 0;
            FeExpr *e = rs->values;
            for (FeType *t = b->results; t && e; t = t->next, e = e->next, k++) {
                IrShape s;
                if (!eval_type(L, t, &s)) continue;
                LVal *v = &(*ret)[k];
                if (v->kind != LV_TENSOR) continue;
                if (*vdt(L, v->id) != t->dtype || !ir_shape_eq(vsh(L, v->id), &s)) {
                    char got[300], want[300];
                    tstr(L, v->id, got, sizeof got);
                    ir_type_str(t->dtype, &s, want, sizeof want);
                    fe_error(L->d, e->loc, "returned value %d of block '%s' has type %s; expected the declared result type %s", k,
                             b->name, got, want);
                    *v = poison(v->loc);
                }
            }
        }
    }
}

static LVal call_block(Lower *L, Scope *S, FeExpr *call, FeDecl *b) {
    FeLoc loc = call->loc;
    if (b->lstate) {
        char cyc[800];
        size_t off = 0;
        cyc[0] = 0;
        int from = 0;
        for (int i = 0; i < L->stack.len; i++)
            if (L->stack.data[i] == b) from = i;
        for (int i = from; i < L->stack.len && off < sizeof cyc; i++)
            off += (size_t)snprintf(cyc + off, sizeof cyc - off, "%s -> ", L->stack.data[i]->name);
        if (off < sizeof cyc) snprintf(cyc + off, sizeof cyc - off, "%s", b->name);
        fe_error(L->d, loc, "block '%s' is called recursively (%s); expected calls without cycles", b->name, cyc);
        return poison(loc);
    }
    if (L->stack.len >= MAX_INLINE) {
        fe_error(L->d, loc, "block calls nested too deeply (limit %d); expected fewer nested block calls", MAX_INLINE);
        return poison(loc);
    }
    char what[300];
    snprintf(what, sizeof what, "block '%s'", b->name);
    const char **names = scratch(L, sizeof(char *) * (size_t)(b->nparams + 1));
    FeExpr **ex = scratch(L, sizeof(FeExpr *) * (size_t)(b->nparams + 1));
    LVal *av = scratch(L, sizeof(LVal) * (size_t)(b->nparams + 1));
    if (!names || !ex || !av) return poison(loc);
    int k = 0;
    for (FeParam *pm = b->params; pm; pm = pm->next) names[k++] = pm->name;
    if (!bind_args(L, call, what, names, b->nparams, b->nparams, ex)) return poison(loc);
    bool ok = true;
    k = 0;
    for (FeParam *pm = b->params; pm; pm = pm->next, k++) {
        av[k] = unwrap(lower_expr(L, S, ex[k]));
        if (av[k].kind == LV_POISON) { ok = false; continue; }
        IrShape s;
        if (!eval_type(L, pm->type, &s)) { ok = false; continue; }
        if ((av[k].kind == LV_SCALAR || av[k].kind == LV_BOOL) && s.rank == 0) {
            int r = scalar_node(L, &av[k], pm->type->dtype, new_origin(L), IR_OP_FULL);
            if (r < 0) { ok = false; continue; }
            av[k] = tensor(r, av[k].loc);
        }
        char an[400];
        snprintf(an, sizeof an, "argument '%s' of block '%s'", pm->name, b->name);
        int id;
        if (!want_tensor(L, &av[k], an, &id)) { ok = false; continue; }
        if (*vdt(L, id) != pm->type->dtype || !ir_shape_eq(vsh(L, id), &s)) {
            char got[300], want[300];
            tstr(L, id, got, sizeof got);
            ir_type_str(pm->type->dtype, &s, want, sizeof want);
            fe_error(L->d, av[k].loc, "argument '%s' of block '%s' has type %s; expected %s (the declared parameter type)",
                     pm->name, b->name, got, want);
            ok = false;
        }
        av[k].input = -1;
    }
    if (!ok || stop(L)) return poison(loc);
    Scope cs = {.block = b};
    k = 0;
    for (FeParam *pm = b->params; pm; pm = pm->next, k++) {
        shadow_check(L, &cs, pm->name, pm->loc);
        if (!bind(L, &cs, pm->name, av[k])) { scope_free(&cs); return poison(loc); }
    }
    b->lstate = 1;
    if (!FC_VEC_PUSH(&L->stack, b)) { oom(L); b->lstate = 0; scope_free(&cs); return poison(loc); }
    LVal *ret;
    int nret;
    FeStmt *rs;
    lower_body(L, b, &cs, &ret, &nret, &rs);
    L->stack.len--;
    b->lstate = 0;
    b->warned = true;
    scope_free(&cs);
    if (!rs || !ret) return poison(loc);
    for (int i = 0; i < nret; i++)
        if (ret[i].kind != LV_TENSOR) return poison(loc);
    if (nret == 1) return tensor(ret[0].id, loc);
    LVal m = {.kind = LV_MULTI, .loc = loc, .n = nret, .items = ret, .input = -1};
    char *w = scratch(L, strlen(what) + 1);
    if (!w) return poison(loc);
    memcpy(w, what, strlen(what) + 1);
    m.what = w;
    for (int i = 0; i < nret; i++) m.items[i].loc = loc;
    return m;
}

/* ---- expressions -------------------------------------------------------------------------------- */
static IrOp binop_ir(FeBinOp op) {
    static const IrOp t[] = {IR_OP_ADD, IR_OP_SUB, IR_OP_MUL, IR_OP_DIV, IR_OP_MATMUL, IR_OP_LT,
                             IR_OP_LE, IR_OP_GT, IR_OP_GE, IR_OP_EQ, IR_OP_NE};
    return t[op];
}

static LVal lower_expr_inner(Lower *L, Scope *S, FeExpr *e) {
    switch (e->kind) {
    case FE_E_INT: return scalar_int(e->ival, e->loc);
    case FE_E_FLOAT: return scalar_float(e->fval, e->loc);
    case FE_E_BOOL: return (LVal){.kind = LV_BOOL, .loc = e->loc, .i = e->ival, .input = -1};
    case FE_E_STR: return (LVal){.kind = LV_STR, .loc = e->loc, .str = e->name, .input = -1};
    case FE_E_DTYPE: return (LVal){.kind = LV_DTYPE, .loc = e->loc, .i = e->ival, .input = -1};
    case FE_E_NAME: return lookup(L, S, e);
    case FE_E_LIST: {
        LVal v = {.kind = LV_LIST, .loc = e->loc, .n = e->nitems, .input = -1};
        v.items = scratch(L, sizeof(LVal) * (size_t)(e->nitems ? e->nitems : 1));
        if (!v.items) return poison(e->loc);
        bool bad = false;
        int k = 0;
        for (FeExpr *x = e->items; x; x = x->next, k++) {
            v.items[k] = unwrap(lower_expr(L, S, x));
            if (v.items[k].kind == LV_POISON) bad = true;
        }
        return bad ? poison(e->loc) : v;
    }
    case FE_E_NEG: {
        LVal x = lower_expr(L, S, e->lhs);
        if (x.kind == LV_POISON) return x;
        if (e->ival % 2 == 0) return x;
        if (!numeric_operand(L, &x, "-") || reject_i8(L, &x, "-", e->loc)) return poison(e->loc);
        x = unwrap(x);
        if (x.kind == LV_SCALAR) return fold_unary(L, IR_OP_NEG, &x, e->loc);
        if (x.kind != LV_TENSOR) {
            fe_error(L->d, e->loc, "unary '-' of %s; expected a number or a tensor", x.i ? "true" : "false");
            return poison(e->loc);
        }
        int r = add_node(L, IR_OP_NEG, &x.id, 1, NULL, e->loc, -1, IR_OP_NEG);
        return r < 0 ? poison(e->loc) : tensor(r, e->loc);
    }
    case FE_E_BIN: {
        LVal a = lower_expr(L, S, e->lhs);
        LVal b = lower_expr(L, S, e->rhs);
        if (a.kind == LV_POISON || b.kind == LV_POISON) return poison(e->loc);
        if (e->op == FE_MATMUL) return matmul(L, a, b, e->loc, "@");
        return binary(L, binop_ir(e->op), a, b, e->loc, fe_binop_str(e->op));
    }
    case FE_E_CALL: {
        FeDecl *d = global(L, e->name);
        if (d && d->kind == FE_D_BLOCK) return call_block(L, S, e, d);
        const OpSpec *spec = find_op(e->name);
        if (spec) return lower_op(L, S, e, spec);
        if (d)
            fe_error(L->d, e->loc, "'%s' is a %s, not a function; expected an op or a block name before '('", e->name,
                     decl_kind(d));
        else {
            FeSuggest sg = {.name = e->name};
            for (size_t i = 0; i < sizeof op_other_names / sizeof op_other_names[0]; i++)
                if (strcmp(op_other_names[i].other, e->name) == 0) sg.best = op_other_names[i].op;
            if (!sg.best) {
                /* the file's own blocks first: they win a tie with an op */
                suggest_decls(L, &sg, 1u << FE_D_BLOCK);
                for (size_t i = 0; i < sizeof op_specs / sizeof op_specs[0]; i++)
                    if (op_specs[i].kind != K_INTERNAL) fe_suggest(&sg, op_specs[i].name);
            }
            char dym[FE_SUGGEST_MAX + 32];
            fe_error(L->d, e->loc, "unknown function '%s'; expected an op or a block declared in this file%s", e->name,
                     did_you_mean(&sg, '\'', dym, sizeof dym));
        }
        return poison(e->loc);
    }
    }
    return poison(e->loc);
}

static LVal lower_expr(Lower *L, Scope *S, FeExpr *e) {
    if (stop(L)) return poison(e->loc);
    if (L->depth >= MAX_LOWER_DEPTH) {
        fe_error(L->d, e->loc, "expressions nested too deeply across block calls (limit %d); expected simpler nesting",
                 MAX_LOWER_DEPTH);
        L->abort = true;
        return poison(e->loc);
    }
    L->depth++;
    LVal v = lower_expr_inner(L, S, e);
    L->depth--;
    return v;
}

/* ---- the top level -------------------------------------------------------------------------------- */
/* Marks the dims and consts that a used const's expression refers to (consts are folded
 * once, so their dims are found here rather than at each use). */
static void mark_const_deps(Lower *L, FeExpr *e) {
    if (!e) return;
    if (e->kind == FE_E_NAME) {
        FeDecl *d = global(L, e->name);
        if (d && d->kind == FE_D_DIM) d->used = true;
        if (d && d->kind == FE_D_CONST && d->lstate != 4) {
            d->lstate = 4;   /* visited */
            mark_const_deps(L, d->expr);
        }
    }
    mark_const_deps(L, e->lhs);
    mark_const_deps(L, e->rhs);
    for (FeExpr *x = e->items; x; x = x->next) mark_const_deps(L, x);
    for (FeArg *a = e->args; a; a = a->next) mark_const_deps(L, a->val);
}

static FcStatus finish(Lower *L, FcStatus s) {
    arena_free(&L->scratch);
    fe_map_free(&L->globals);
    FC_VEC_FREE(&L->stack);
    FC_VEC_FREE(&L->inexact_said);
    fc_free(L->decls);
    fc_free(L->input_used);
    return s;
}

FcStatus fe_lower(FeParser *p, const FeOptions *opt, IrGraph **out, FcErr *err) {
    *out = NULL;
    Lower L0 = {.p = p, .d = p->diag, .err = err}, *L = &L0;
    L->decls = fc_calloc((size_t)(p->ndecls + 1), sizeof *L->decls);
    if (!L->decls) return finish(L, FC_OOM(err));
    int i = 0;
    FeDecl *last_block = NULL;
    for (FeDecl *d = p->decls; d; d = d->next, i++) {
        L->decls[i] = d;
        int prev;
        if (fe_map_get(&L->globals, d->name, &prev)) {
            FeDecl *o = L->decls[prev];
            fe_error(L->d, d->loc, "'%s' is already declared (as a %s at line %d); expected a new name for this %s", d->name,
                     decl_kind(o), o->loc.line, decl_kind(d));
            continue;
        }
        if (d->kind == FE_D_BLOCK && find_op(d->name)) {
            fe_error(L->d, d->loc, "block name '%s' is the name of a built-in op; expected another name", d->name);
            continue;
        }
        if (!fe_map_put(&L->globals, d->name, i)) return finish(L, FC_OOM(err));
        if (d->kind == FE_D_DIM && d->has_value) {
            d->bound = true;
            d->bound_value = d->value;
        }
        if (d->kind == FE_D_BLOCK) last_block = d;
    }
    for (int k = 0; opt && k < opt->ndims; k++) {
        const FeDimBinding *b = &opt->dims[k];
        const char *nm = b->name ? b->name : "";
        FeDecl *d = global(L, nm);
        if (!d || d->kind != FE_D_DIM) {
            FeSuggest sg = {.name = nm};
            suggest_decls(L, &sg, 1u << FE_D_DIM);
            char list[600], dym[FE_SUGGEST_MAX + 32];
            size_t off = 0;
            list[0] = 0;
            for (FeDecl *dd = p->decls; dd && off < sizeof list; dd = dd->next)
                if (dd->kind == FE_D_DIM) off += (size_t)snprintf(list + off, sizeof list - off, "%s%s", off ? ", " : "", dd->name);
            fe_error_noloc(L->d, "-D %s: no dim named '%s' is declared; expected one of: %s%s", nm, nm, off ? list : "(none)",
                           did_you_mean(&sg, '\'', dym, sizeof dym));
            continue;
        }
        if (b->value < 1) {
            fe_error_noloc(L->d, "-D %s=%lld: expected a size of at least 1", nm, (long long)b->value);
            continue;
        }
        d->bound = true;
        d->bound_value = b->value;
    }
    FeDecl *blk = last_block;
    if (opt && opt->block) {
        blk = global(L, opt->block);
        if (!blk || blk->kind != FE_D_BLOCK) {
            char list[600];
            size_t off = 0;
            list[0] = 0;
            for (FeDecl *d = p->decls; d && off < sizeof list; d = d->next)
                if (d->kind == FE_D_BLOCK) off += (size_t)snprintf(list + off, sizeof list - off, "%s%s", off ? ", " : "", d->name);
            FeSuggest sg = {.name = opt->block};
            suggest_decls(L, &sg, 1u << FE_D_BLOCK);
            char dym[FE_SUGGEST_MAX + 32];
            fe_error_noloc(L->d, "no block named '%s' in the file; expected one of: %s%s", opt->block, off ? list : "(none)",
                           did_you_mean(&sg, '\'', dym, sizeof dym));
            return finish(L, FC_OK);
        }
    }
    if (!blk) {
        fe_error_noloc(L->d, "no block in the file; expected at least one 'block NAME(...) { ... }'");
        return finish(L, FC_OK);
    }

    L->g = ir_graph_new(blk->name, L->d->file);
    if (!L->g) return finish(L, FC_OOM(err));
    L->ninputs = blk->nparams;
    L->input_used = fc_calloc((size_t)blk->nparams + 1, sizeof(bool));
    if (!L->input_used) { ir_graph_free(L->g); return finish(L, FC_OOM(err)); }

    Scope S = {.block = blk};
    i = 0;
    for (FeParam *pm = blk->params; pm && !stop(L); pm = pm->next, i++) {
        int dummy;
        if (fe_map_get(&S.names, pm->name, &dummy)) {
            fe_error(L->d, pm->loc, "parameter '%s' is declared twice in block '%s'; expected distinct names", pm->name, blk->name);
            continue;
        }
        IrShape s;
        LVal v = poison(pm->loc);
        if (eval_type(L, pm->type, &s)) {
            int id = ir_add_input(L->g, pm->name, pm->type->dtype, &s, pm->is_param);
            if (id < 0) { oom(L); break; }
            v = tensor(id, pm->loc);
            v.input = L->g->inputs.len - 1;
        }
        shadow_check(L, &S, pm->name, pm->loc);
        if (!bind(L, &S, pm->name, v)) break;
    }
    LVal *ret = NULL;
    int nret = 0;
    FeStmt *rs = NULL;
    blk->lstate = 1;
    if (!FC_VEC_PUSH(&L->stack, blk)) oom(L);
    if (!stop(L)) lower_body(L, blk, &S, &ret, &nret, &rs);
    blk->lstate = 0;
    scope_free(&S);

    if (!stop(L) && rs && ret && L->d->nerrors == 0) {
        FeExpr *e = rs->values;
        for (int k = 0; k < nret && e; k++, e = e->next) {
            char name[300];
            bool plain = e->kind == FE_E_NAME;
            for (int j = 0; plain && j < L->g->output_names.len; j++)
                if (strcmp(L->g->output_names.data[j], e->name) == 0) plain = false;
            if (plain) {
                snprintf(name, sizeof name, "%s", e->name);
            } else {
                snprintf(name, sizeof name, "out%d", k);
                for (int tries = 2;; tries++) {
                    bool taken = false;
                    for (int j = 0; j < L->g->output_names.len; j++)
                        if (strcmp(L->g->output_names.data[j], name) == 0) taken = true;
                    if (!taken) break;
                    snprintf(name, sizeof name, "out%d_%d", k, tries);
                }
            }
            FcStatus s = ir_add_output(L->g, ret[k].id, name, err);
            if (s != FC_OK) { L->status = s; break; }
        }
    }
    if (L->status == FC_OK && L->d->nerrors == 0) {
        /* warnings only for programs without errors: an error can hide a use */
        for (int k = 0; k < p->ndecls; k++)
            if (L->decls[k]->kind == FE_D_CONST && L->decls[k]->used && L->decls[k]->lstate != 4) {
                L->decls[k]->lstate = 4;
                mark_const_deps(L, L->decls[k]->expr);
            }
        i = 0;
        for (FeParam *pm = blk->params; pm; pm = pm->next, i++)
            if (i < L->ninputs && !L->input_used[i])
                fe_warning(L->d, pm->loc, "input '%s' is not used by block '%s'", pm->name, blk->name);
        for (int k = 0; k < p->ndecls; k++) {
            FeDecl *d = L->decls[k];
            if (d->kind == FE_D_DIM && !d->used && global(L, d->name) == d)
                fe_warning(L->d, d->loc, "dim '%s' is declared but not used by block '%s'", d->name, blk->name);
        }
    }
    if (L->status != FC_OK || L->d->nerrors) {
        ir_graph_free(L->g);
        return finish(L, L->status);
    }
    *out = L->g;
    return finish(L, FC_OK);
}
