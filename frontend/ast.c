/* ast.c: AST constructors for the parser, and the string-keyed hash map.
 *
 * Constructors compute each expression's depth; the first node deeper than
 * FE_MAX_DEPTH reports "expression nested too deeply" (nodes above it inherit the
 * excess silently), so no later recursive walk can run deep.
 */
#include "ast.h"

#include <string.h>

void *fe_new(FeParser *p, size_t size) {
    void *q = arena_alloc(&p->arena, size);
    if (!q) p->oom = true;
    return q;
}

static void check_depth(FeParser *p, FeExpr *e) {
    if (e->depth == FE_MAX_DEPTH + 1)
        fe_error(p->diag, e->loc, "expression nested too deeply (limit %d); expected at most %d levels of operators, calls and lists",
                 FE_MAX_DEPTH, FE_MAX_DEPTH);
}

static int maxi(int a, int b) { return a > b ? a : b; }
/* depth saturates just above the limit so that only the first crossing reports */
static int deeper(int d) { return d > FE_MAX_DEPTH ? FE_MAX_DEPTH + 2 : d + 1; }

FeExpr *fe_expr(FeParser *p, FeExprKind kind, FeLoc loc) {
    FeExpr *e = fe_new(p, sizeof *e);
    if (!e) return NULL;
    e->kind = kind;
    e->loc = loc;
    e->depth = 1;
    return e;
}

FeExpr *fe_binary(FeParser *p, FeBinOp op, FeLoc loc, FeExpr *a, FeExpr *b) {
    if (!a || !b) return NULL;
    FeExpr *e = fe_expr(p, FE_E_BIN, loc);
    if (!e) return NULL;
    e->op = op;
    e->lhs = a;
    e->rhs = b;
    e->depth = deeper(maxi(a->depth, b->depth));
    check_depth(p, e);
    return e;
}

FeExpr *fe_neg(FeParser *p, FeNeg neg, FeExpr *x) {
    if (!x) return NULL;
    FeExpr *e = fe_expr(p, FE_E_NEG, neg.loc);
    if (!e) return NULL;
    e->ival = neg.n;
    e->lhs = x;
    e->depth = deeper(x->depth);
    check_depth(p, e);
    return e;
}

FeExpr *fe_call(FeParser *p, const char *name, FeLoc loc, FeArgList args) {
    FeExpr *e = fe_expr(p, FE_E_CALL, loc);
    if (!e) return NULL;
    e->name = name;
    e->args = args.head;
    e->nargs = args.n;
    int d = 0;
    for (FeArg *a = args.head; a; a = a->next)
        if (a->val) d = maxi(d, a->val->depth);
    e->depth = deeper(d);
    check_depth(p, e);
    return e;
}

FeExpr *fe_list(FeParser *p, FeLoc loc, FeExprList items) {
    FeExpr *e = fe_expr(p, FE_E_LIST, loc);
    if (!e) return NULL;
    e->items = items.head;
    e->nitems = items.n;
    int d = 0;
    for (FeExpr *x = items.head; x; x = x->next) d = maxi(d, x->depth);
    e->depth = deeper(d);
    check_depth(p, e);
    return e;
}

void fe_exprlist_add(FeExprList *l, FeExpr *e) {
    if (!e) return;
    e->next = NULL;
    if (l->tail) l->tail->next = e;
    else l->head = e;
    l->tail = e;
    l->n++;
}

void fe_arglist_add(FeParser *p, FeArgList *l, FeArg *a) {
    if (!a || !a->val) return;
    if (!a->key && l->tail && l->tail->key && !l->positional_after_key) {
        l->positional_after_key = true;
        fe_error(p->diag, a->val->loc, "positional argument after a keyword argument; expected name=value here");
    }
    if (l->tail) l->tail->next = a;
    else l->head = a;
    l->tail = a;
    l->n++;
}

const char *fe_binop_str(FeBinOp op) {
    static const char *const s[] = {"+", "-", "*", "/", "@", "<", "<=", ">", ">=", "==", "!="};
    return s[op];
}

/* ---- map ---------------------------------------------------------------------------------- */
static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

bool fe_map_get(const FeMap *m, const char *key, int *val) {
    if (!m->cap) return false;
    size_t mask = (size_t)m->cap - 1;
    for (size_t i = hash_str(key) & mask;; i = (i + 1) & mask) {
        if (!m->keys[i]) return false;
        if (strcmp(m->keys[i], key) == 0) {
            *val = m->vals[i];
            return true;
        }
    }
}

bool fe_map_put(FeMap *m, const char *key, int val) {
    if ((m->len + 1) * 2 > m->cap) {
        int ncap = m->cap ? m->cap * 2 : 16;
        const char **nk = fc_calloc((size_t)ncap, sizeof *nk);
        int *nv = fc_calloc((size_t)ncap, sizeof *nv);
        if (!nk || !nv) { fc_free(nk); fc_free(nv); return false; }
        size_t mask = (size_t)ncap - 1;
        for (int j = 0; j < m->cap; j++) {
            if (!m->keys[j]) continue;
            size_t i = hash_str(m->keys[j]) & mask;
            while (nk[i]) i = (i + 1) & mask;
            nk[i] = m->keys[j];
            nv[i] = m->vals[j];
        }
        fc_free(m->keys);
        fc_free(m->vals);
        m->keys = nk;
        m->vals = nv;
        m->cap = ncap;
    }
    size_t mask = (size_t)m->cap - 1;
    size_t i = hash_str(key) & mask;
    for (; m->keys[i]; i = (i + 1) & mask)
        if (strcmp(m->keys[i], key) == 0) {
            m->vals[i] = val;
            return true;
        }
    m->keys[i] = key;
    m->vals[i] = val;
    m->len++;
    return true;
}

void fe_map_free(FeMap *m) {
    fc_free(m->keys);
    fc_free(m->vals);
    m->keys = NULL;
    m->vals = NULL;
    m->cap = m->len = 0;
}
