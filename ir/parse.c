/* parse.c: reads the text form that printer.c writes back into a graph (ir_parse).
 *
 * Grammar (one item per line; blank lines are ignored; docs/ir.md has the details):
 *
 *   file   := header NL { item NL }
 *   header := 'block' STRING 'file' STRING 'next_origin' '=' INT
 *   item   := ('input' | 'param') VALUE [STRING] ':' type
 *           | result { ',' result } '=' OPNAME '(' [VALUE { ',' VALUE }] ')'
 *             [ '{' [attr { ',' attr }] '}' ] ':' type { ',' type }
 *             '@' INT ':' INT '#' INT [OPNAME]
 *           | 'output' VALUE STRING
 *   result := VALUE [STRING]
 *   type   := DTYPE '[' [INT { ',' INT }] ']'
 *   attr   := NAME '=' ( INT | FLOAT | DTYPE | STRING | '[' [INT { ',' INT }] ']' )
 *
 * The graph is rebuilt only through ir_add_input / ir_add_node / ir_add_output, so every
 * shape rule runs again and checks the text: a declared result type that differs from what
 * the rule gives is an error. Value ids must be dense and numbered in creation order
 * (inputs in declaration order, node results in node order, interleaved by id), so the
 * rebuilt graph has the same ids, origins, locations and names, and printing it gives the
 * same text.
 *
 * Errors are FC_ERR_INPUT with "FILE:LINE:COL: error: MESSAGE" (the first error only).
 * No input text makes the parser crash, recurse or allocate in proportion to a number it
 * read (only to the text's length).
 */
#include "ir.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LIST 4096      /* ir_add_node's limit on attribute lists */
#define MAX_ID (1 << 30)   /* value ids, origins and locations stay well inside int */

/* ---- tokens -------------------------------------------------------------------------- */
typedef enum TokKind { T_EOF, T_NL, T_IDENT, T_VALUE, T_INT, T_FLOAT, T_STRING, T_PUNCT } TokKind;

typedef struct Tok {
    TokKind kind;
    int line, col;         /* 1-based */
    const char *start;     /* the token's text in the source */
    size_t len;
    int64_t ival;          /* T_INT, T_VALUE */
    double fval;           /* T_FLOAT */
    const char *str;       /* T_STRING: unescaped (scratch arena) */
    char punct;            /* T_PUNCT */
} Tok;

typedef struct Parser {
    const char *p;          /* next unread byte */
    const char *line_start; /* first byte of the current line */
    int line;
    const char *file;       /* for messages */
    Arena *scratch;         /* parse-time data; freed by ir_parse */
    FcErr *err;
    Tok tok;                /* the current token */
} Parser;

static FcStatus perr(Parser *ps, int line, int col, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static FcStatus perr(Parser *ps, int line, int col, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return fc_err_set(ps->err, FC_ERR_INPUT, "%s:%d:%d: error: %s", ps->file, line, col, msg);
}

/* A short description of a token for "expected X, found Y". */
static void tok_desc(const Tok *t, char *buf, size_t n) {
    switch (t->kind) {
    case T_EOF: snprintf(buf, n, "end of input"); break;
    case T_NL: snprintf(buf, n, "end of line"); break;
    case T_STRING: snprintf(buf, n, "a string"); break;
    case T_PUNCT: snprintf(buf, n, "'%c'", t->punct); break;
    default: snprintf(buf, n, "'%.*s'", t->len > 40 ? 40 : (int)t->len, t->start); break;
    }
}

static FcStatus expected(Parser *ps, const char *what) {
    char d[64];
    tok_desc(&ps->tok, d, sizeof d);
    return perr(ps, ps->tok.line, ps->tok.col, "expected %s, found %s", what, d);
}

static bool is_ident_start(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c); }

/* Reads a decimal integer of digits [s, e) into *v; false on overflow. */
static bool parse_digits(const char *s, const char *e, bool neg, int64_t *v) {
    int64_t x = 0;
    for (; s < e; s++) {
        if (!fc_mul64(x, 10, &x) || !fc_add64(x, neg ? -(int64_t)(*s - '0') : (int64_t)(*s - '0'), &x)) return false;
    }
    *v = x;
    return true;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Reads the string at ps->p (its opening quote) into t. Two passes over the same bytes: the
 * first validates and counts, the second writes the unescaped bytes. */
static FcStatus lex_string(Parser *ps, Tok *t) {
    char *out = NULL;
    size_t n = 0;
    const char *s = NULL;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1 && !(out = arena_alloc(ps->scratch, n + 1))) return FC_OOM(ps->err);
        s = ps->p + 1;
        n = 0;
        for (;;) {
            char c = *s, v;
            int col = (int)(s - ps->line_start) + 1;
            if (c == '\0' || c == '\n') return perr(ps, t->line, t->col, "unterminated string");
            if (c == '"') break;
            if (c == '\\') {
                if (s[1] == '"' || s[1] == '\\') {
                    v = s[1];
                    s += 2;
                } else if (s[1] == 'x' && hexval(s[2]) >= 0 && hexval(s[3]) >= 0) {
                    v = (char)(hexval(s[2]) * 16 + hexval(s[3]));
                    if (v == 0) return perr(ps, t->line, col, "a string may not contain a NUL byte");
                    s += 4;
                } else {
                    return perr(ps, t->line, col, "unknown escape in string (expected \\\", \\\\ or \\xHH)");
                }
            } else if ((unsigned char)c < 0x20) {
                return perr(ps, t->line, col, "control byte 0x%02x in string (write it as \\x%02x)",
                            (unsigned char)c, (unsigned char)c);
            } else {
                v = c;
                s++;
            }
            if (out) out[n] = v;
            n++;
        }
    }
    out[n] = '\0';
    t->kind = T_STRING;
    t->str = out;
    ps->p = s + 1;
    return FC_OK;
}

/* A number: -?digits, or a float -?digits[.digits][e[+-]digits], or -inf / -nan.
 * (inf and nan without a sign are identifiers; attribute parsing accepts them.) */
static FcStatus lex_number(Parser *ps, Tok *t) {
    const char *s = ps->p;
    bool neg = *s == '-';
    const char *q = s + neg;
    if (neg && is_ident_start(*q)) {
        const char *e = q;
        while (is_ident_char(*e)) e++;
        if (e - q == 3 && memcmp(q, "inf", 3) == 0) t->fval = -INFINITY;
        else if (e - q == 3 && memcmp(q, "nan", 3) == 0) t->fval = copysign(NAN, -1.0);
        else return perr(ps, t->line, t->col, "unexpected character '-'");
        t->kind = T_FLOAT;
        ps->p = e;
        return FC_OK;
    }
    const char *ds = q;
    while (is_digit(*q)) q++;
    const char *de = q;
    bool isfloat = false;
    int ndig = (int)(de - ds);
    if (*q == '.') {
        isfloat = true;
        q++;
        while (is_digit(*q)) { q++; ndig++; }
    }
    if (ndig == 0) return perr(ps, t->line, t->col, "malformed number");
    if (*q == 'e' || *q == 'E') {
        isfloat = true;
        q++;
        if (*q == '+' || *q == '-') q++;
        if (!is_digit(*q)) return perr(ps, t->line, t->col, "malformed number");
        while (is_digit(*q)) q++;
    }
    if (is_ident_char(*q) || *q == '.') return perr(ps, t->line, t->col, "malformed number");
    if (isfloat) {
        char buf[128];
        if ((size_t)(q - s) >= sizeof buf) return perr(ps, t->line, t->col, "number too long");
        memcpy(buf, s, (size_t)(q - s));
        buf[q - s] = '\0';
        t->kind = T_FLOAT;
        t->fval = strtod(buf, NULL);
    } else {
        t->kind = T_INT;
        if (!parse_digits(ds, de, neg, &t->ival))
            return perr(ps, t->line, t->col, "integer %.*s is out of range", (int)(q - s > 40 ? 40 : q - s), s);
    }
    ps->p = q;
    return FC_OK;
}

/* Reads the next token into ps->tok. */
static FcStatus next(Parser *ps) {
    while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\r') ps->p++;
    Tok *t = &ps->tok;
    memset(t, 0, sizeof *t);
    t->line = ps->line;
    t->col = (int)(ps->p - ps->line_start) + 1;
    t->start = ps->p;
    char c = *ps->p;
    if (c == '\0') {
        t->kind = T_EOF;
    } else if (c == '\n') {
        t->kind = T_NL;
        ps->p++;
        ps->line++;
        ps->line_start = ps->p;
    } else if (is_ident_start(c)) {
        t->kind = T_IDENT;
        while (is_ident_char(*ps->p)) ps->p++;
    } else if (c == '%') {
        const char *q = ps->p + 1, *e = q;
        while (is_digit(*e)) e++;
        if (e == q) return perr(ps, t->line, t->col, "expected a value id after '%%'");
        if (!parse_digits(q, e, false, &t->ival) || t->ival >= MAX_ID)
            return perr(ps, t->line, t->col, "value id %.*s is too large", (int)(e - q > 40 ? 40 : e - q), q);
        t->kind = T_VALUE;
        ps->p = e;
    } else if (is_digit(c) || c == '-' || c == '.') {
        FC_TRY(lex_number(ps, t));
    } else if (c == '"') {
        FC_TRY(lex_string(ps, t));
    } else if (strchr("=(){}[],:@#", c)) {
        t->kind = T_PUNCT;
        t->punct = c;
        ps->p++;
    } else if ((unsigned char)c >= 0x20 && (unsigned char)c < 0x7f) {
        return perr(ps, t->line, t->col, "unexpected character '%c'", c);
    } else {
        return perr(ps, t->line, t->col, "unexpected byte 0x%02x", (unsigned char)c);
    }
    t->len = (size_t)(ps->p - t->start);
    return FC_OK;
}

static bool is_punct(const Parser *ps, char c) { return ps->tok.kind == T_PUNCT && ps->tok.punct == c; }
static bool is_word(const Parser *ps, const char *w) {
    return ps->tok.kind == T_IDENT && ps->tok.len == strlen(w) && memcmp(ps->tok.start, w, ps->tok.len) == 0;
}

static FcStatus expect_punct(Parser *ps, char c) {
    if (!is_punct(ps, c)) {
        char what[8];
        snprintf(what, sizeof what, "'%c'", c);
        return expected(ps, what);
    }
    return next(ps);
}

static FcStatus expect_word(Parser *ps, const char *w) {
    if (!is_word(ps, w)) {
        char what[32];
        snprintf(what, sizeof what, "'%s'", w);
        return expected(ps, what);
    }
    return next(ps);
}

/* An int in [lo, hi]; `what` names it in messages. */
static FcStatus expect_int(Parser *ps, int64_t lo, int64_t hi, const char *what, int64_t *v) {
    if (ps->tok.kind != T_INT) return expected(ps, what);
    if (ps->tok.ival < lo || ps->tok.ival > hi)
        return perr(ps, ps->tok.line, ps->tok.col, "%s %lld is out of range (expected %lld..%lld)", what,
                    (long long)ps->tok.ival, (long long)lo, (long long)hi);
    *v = ps->tok.ival;
    return next(ps);
}

static FcStatus expect_value(Parser *ps, int *id) {
    if (ps->tok.kind != T_VALUE) return expected(ps, "a value id (%N)");
    *id = (int)ps->tok.ival;
    return next(ps);
}

/* The end of an item: a newline or the end of the input. */
static FcStatus expect_eol(Parser *ps) {
    if (ps->tok.kind == T_EOF) return FC_OK;
    if (ps->tok.kind != T_NL) return expected(ps, "end of line");
    return next(ps);
}

/* ---- types and attributes -------------------------------------------------------------- */
static FcStatus parse_type(Parser *ps, FcDtype *dt, IrShape *sh) {
    if (ps->tok.kind != T_IDENT) return expected(ps, "a type");
    char name[16];
    Tok at = ps->tok;
    int d = -1;
    if (ps->tok.len < sizeof name) {
        memcpy(name, ps->tok.start, ps->tok.len);
        name[ps->tok.len] = '\0';
        d = ir_dtype_lookup(name);
    }
    if (d < 0) return perr(ps, at.line, at.col, "unknown dtype '%.*s'", at.len > 40 ? 40 : (int)at.len, at.start);
    *dt = (FcDtype)d;
    FC_TRY(next(ps));
    FC_TRY(expect_punct(ps, '['));
    memset(sh, 0, sizeof *sh);
    if (!is_punct(ps, ']')) {
        for (;;) {
            if (sh->rank == IR_MAX_RANK)
                return perr(ps, ps->tok.line, ps->tok.col, "a type has at most %d dims", IR_MAX_RANK);
            if (ps->tok.kind != T_INT) return expected(ps, "a size");
            if (ps->tok.ival < 1)
                return perr(ps, ps->tok.line, ps->tok.col, "sizes must be >= 1; got %lld", (long long)ps->tok.ival);
            sh->dims[sh->rank++] = ps->tok.ival;
            FC_TRY(next(ps));
            if (!is_punct(ps, ',')) break;
            FC_TRY(next(ps));
        }
    }
    FC_TRY(expect_punct(ps, ']'));
    int64_t nbytes;
    if (!ir_shape_nbytes(sh, *dt, &nbytes))
        return perr(ps, at.line, at.col, "type is too large: its byte count overflows 64 bits");
    return FC_OK;
}

typedef struct Slot {
    char kind;        /* 'L', 'i', 'f', 'd', 's' */
    int idx;          /* int slot for 'i' and 's' */
    const char *name; /* into the ATTRS string */
    int namelen;
    bool seen;
} Slot;

/* Splits an op's ATTRS string ("L:axes i0:keepdim") into slots; returns their count. */
static int op_slots(IrOp op, Slot *s, int max) {
    const char *p = ir_ops[op].attrs;
    int n = 0;
    while (*p && n < max) {
        while (*p == ' ') p++;
        const char *colon = strchr(p, ':');
        if (!*p || !colon) break;
        s[n].kind = p[0];
        s[n].idx = (p[0] == 'i' || p[0] == 's') && p[1] >= '0' && p[1] <= '3' ? p[1] - '0' : 0;
        s[n].name = colon + 1;
        s[n].namelen = (int)strcspn(colon + 1, " ");
        s[n].seen = false;
        p = colon + 1 + s[n].namelen;
        n++;
    }
    return n;
}

static FcStatus parse_float(Parser *ps, double *v) {
    if (ps->tok.kind == T_FLOAT) *v = ps->tok.fval;
    else if (ps->tok.kind == T_INT) *v = (double)ps->tok.ival;
    else if (is_word(ps, "inf")) *v = INFINITY;
    else if (is_word(ps, "nan")) *v = NAN;
    else return expected(ps, "a number");
    return next(ps);
}

static FcStatus parse_list(Parser *ps, IrAttrs *a) {
    FC_TRY(expect_punct(ps, '['));
    /* at most MAX_LIST entries; grow a scratch copy by doubling */
    int cap = 8, n = 0;
    int64_t *list = arena_alloc(ps->scratch, sizeof(int64_t) * (size_t)cap);
    if (!list) return FC_OOM(ps->err);
    if (!is_punct(ps, ']')) {
        for (;;) {
            if (n == MAX_LIST)
                return perr(ps, ps->tok.line, ps->tok.col, "a list attribute has at most %d entries", MAX_LIST);
            if (n == cap) {
                int64_t *bigger = arena_alloc(ps->scratch, sizeof(int64_t) * (size_t)cap * 2);
                if (!bigger) return FC_OOM(ps->err);
                memcpy(bigger, list, sizeof(int64_t) * (size_t)n);
                list = bigger;
                cap *= 2;
            }
            if (ps->tok.kind != T_INT) return expected(ps, "an integer");
            list[n++] = ps->tok.ival;
            FC_TRY(next(ps));
            if (!is_punct(ps, ',')) break;
            FC_TRY(next(ps));
        }
    }
    FC_TRY(expect_punct(ps, ']'));
    a->list = list;
    a->nlist = n;
    return FC_OK;
}

/* '{' attr, ... '}' for op; every attribute the op's ATTRS names must appear once. */
static FcStatus parse_attrs(Parser *ps, IrOp op, const Tok *optok, IrAttrs *a) {
    Slot slots[8];
    int ns = op_slots(op, slots, 8);
    const char *opn = ir_ops[op].name;
    if (is_punct(ps, '{')) {
        FC_TRY(next(ps));
        while (!is_punct(ps, '}')) {
            if (ps->tok.kind != T_IDENT) return expected(ps, "an attribute name or '}'");
            Tok nt = ps->tok;
            Slot *s = NULL;
            for (int i = 0; i < ns; i++)
                if ((size_t)slots[i].namelen == nt.len && memcmp(slots[i].name, nt.start, nt.len) == 0) s = &slots[i];
            int shown = nt.len > 40 ? 40 : (int)nt.len;
            if (!s) return perr(ps, nt.line, nt.col, "'%s' has no attribute '%.*s'", opn, shown, nt.start);
            if (s->seen) return perr(ps, nt.line, nt.col, "attribute '%.*s' is given twice", shown, nt.start);
            s->seen = true;
            FC_TRY(next(ps));
            FC_TRY(expect_punct(ps, '='));
            switch (s->kind) {
            case 'L':
                FC_TRY(parse_list(ps, a));
                break;
            case 'i':
                if (ps->tok.kind != T_INT) return expected(ps, "an integer");
                a->i[s->idx] = ps->tok.ival;
                FC_TRY(next(ps));
                break;
            case 'f':
                FC_TRY(parse_float(ps, &a->f));
                break;
            case 'd': {
                int d = -1;
                char name[16];
                if (ps->tok.kind == T_IDENT && ps->tok.len < sizeof name) {
                    memcpy(name, ps->tok.start, ps->tok.len);
                    name[ps->tok.len] = '\0';
                    d = ir_dtype_lookup(name);
                }
                if (d < 0) return expected(ps, "a dtype");
                a->dtype = (FcDtype)d;
                FC_TRY(next(ps));
                break;
            }
            case 's':
                if (ps->tok.kind == T_STRING && strcmp(ps->tok.str, "none") == 0) a->i[s->idx] = IR_APPROX_NONE;
                else if (ps->tok.kind == T_STRING && strcmp(ps->tok.str, "tanh") == 0) a->i[s->idx] = IR_APPROX_TANH;
                else if (ps->tok.kind == T_INT) a->i[s->idx] = ps->tok.ival;
                else return expected(ps, "\"none\" or \"tanh\"");
                FC_TRY(next(ps));
                break;
            default:
                return fc_err_set(ps->err, FC_ERR_INTERNAL, "internal error: %s:%d: bad ATTRS slot in ops.def for '%s'",
                                  __FILE__, __LINE__, opn);
            }
            if (!is_punct(ps, ',')) break;
            FC_TRY(next(ps));
        }
        FC_TRY(expect_punct(ps, '}'));
    }
    for (int i = 0; i < ns; i++)
        if (!slots[i].seen)
            return perr(ps, optok->line, optok->col, "'%s' is missing attribute '%.*s'", opn, slots[i].namelen,
                        slots[i].name);
    return FC_OK;
}

/* ---- items ---------------------------------------------------------------------------------- */
typedef struct PInput {
    Tok at;             /* the value id token */
    int id;
    const char *name;   /* scratch or NULL */
    FcDtype dt;
    IrShape sh;
    bool param;
} PInput;

typedef struct PNode {
    Tok at;             /* the first result token */
    Tok optok;          /* the op name */
    Tok typetok;        /* the first result type */
    IrOp op;
    int nres;
    int *res;           /* result ids (scratch) */
    const char **resname;
    Tok *restok;
    int nin;
    int *in;
    Tok *intok;
    IrAttrs a;
    int ntypes;
    FcDtype *dt;
    IrShape *sh;
    IrLoc loc;
    int origin;
    IrOp origin_op;
} PNode;

typedef struct POutput {
    Tok at;
    int id;
    const char *name;
} POutput;

/* Growable scratch arrays of parsed items. */
typedef struct PSlot {
    Tok at;
    FcDtype fmt;
    double scale;
    bool read_only;
    int grad;
    Tok grad_at;
    int input;
    Tok input_at;
} PSlot;

typedef struct Items {
    FC_VEC(PSlot) slots;
    FC_VEC(PInput) inputs;
    FC_VEC(PNode) nodes;
    FC_VEC(POutput) outputs;
} Items;

static void *scratch_copy(Parser *ps, const void *src, size_t nbytes) {
    void *d = arena_alloc(ps->scratch, nbytes ? nbytes : 1);
    if (d && nbytes) memcpy(d, src, nbytes);
    return d;
}

static FcStatus parse_input(Parser *ps, Items *it) {
    PInput in = {.param = is_word(ps, "param")};
    FC_TRY(next(ps));
    in.at = ps->tok;
    FC_TRY(expect_value(ps, &in.id));
    if (ps->tok.kind == T_STRING) {
        in.name = ps->tok.str;
        FC_TRY(next(ps));
    }
    FC_TRY(expect_punct(ps, ':'));
    FC_TRY(parse_type(ps, &in.dt, &in.sh));
    FC_TRY(expect_eol(ps));
    if (!FC_VEC_PUSH(&it->inputs, in)) return FC_OOM(ps->err);
    return FC_OK;
}

/* An optional `word=N` of a slot line: *v = N (-1 when absent), *at where N is. */
static FcStatus parse_slot_field(Parser *ps, const char *word, const char *what, int *v, Tok *at) {
    *v = -1;
    if (!is_word(ps, word)) return FC_OK;
    FC_TRY(next(ps));
    FC_TRY(expect_punct(ps, '='));
    int64_t n;
    *at = ps->tok;
    FC_TRY(expect_int(ps, 0, MAX_ID, what, &n));
    *v = (int)n;
    return FC_OK;
}

/* fp8 slot K: FORMAT scale=X [grad=J] [input=I] [read_only]  (slots in order from 0) */
static FcStatus parse_slot(Parser *ps, Items *it) {
    PSlot sl = {.at = ps->tok};
    FC_TRY(next(ps));
    FC_TRY(expect_word(ps, "slot"));
    int64_t k;
    Tok kt = ps->tok;
    FC_TRY(expect_int(ps, 0, MAX_ID, "the slot", &k));
    if (k != it->slots.len)
        return perr(ps, kt.line, kt.col, "f8 slots are numbered in order: expected %d, found %lld", it->slots.len, (long long)k);
    FC_TRY(expect_punct(ps, ':'));
    Tok ft = ps->tok;
    char name[16];
    int d = -1;
    if (ft.kind == T_IDENT && ft.len < sizeof name) {
        memcpy(name, ft.start, ft.len);
        name[ft.len] = '\0';
        d = ir_dtype_lookup(name);
    }
    if (d != FC_F8E4M3 && d != FC_F8E5M2) return perr(ps, ft.line, ft.col, "an f8 slot's format is f8e4m3 or f8e5m2");
    sl.fmt = (FcDtype)d;
    FC_TRY(next(ps));
    FC_TRY(expect_word(ps, "scale"));
    FC_TRY(expect_punct(ps, '='));
    Tok st = ps->tok;
    FC_TRY(parse_float(ps, &sl.scale));
    int e;
    if (!(sl.scale > 0) || !isfinite(sl.scale) || frexp(sl.scale, &e) != 0.5)
        return perr(ps, st.line, st.col, "an f8 slot's scale is a positive finite power of two");
    FC_TRY(parse_slot_field(ps, "grad", "the gradient's slot", &sl.grad, &sl.grad_at));
    FC_TRY(parse_slot_field(ps, "input", "the input", &sl.input, &sl.input_at));
    if (is_word(ps, "read_only")) {
        sl.read_only = true;
        FC_TRY(next(ps));
    }
    FC_TRY(expect_eol(ps));
    if (!FC_VEC_PUSH(&it->slots, sl)) return FC_OOM(ps->err);
    return FC_OK;
}

static FcStatus parse_output(Parser *ps, Items *it) {
    POutput o = {0};
    FC_TRY(next(ps));
    o.at = ps->tok;
    FC_TRY(expect_value(ps, &o.id));
    if (ps->tok.kind != T_STRING) return expected(ps, "the output's name (a string)");
    o.name = ps->tok.str;
    FC_TRY(next(ps));
    FC_TRY(expect_eol(ps));
    if (!FC_VEC_PUSH(&it->outputs, o)) return FC_OOM(ps->err);
    return FC_OK;
}

static FcStatus lookup_op(Parser *ps, IrOp *op) {
    char name[32];
    Tok t = ps->tok;
    int k = -1;
    if (t.kind != T_IDENT) return expected(ps, "an op name");
    if (t.len < sizeof name) {
        memcpy(name, t.start, t.len);
        name[t.len] = '\0';
        k = ir_op_lookup(name);
    }
    if (k < 0) return perr(ps, t.line, t.col, "unknown op '%.*s'", t.len > 40 ? 40 : (int)t.len, t.start);
    *op = (IrOp)k;
    return next(ps);
}

static FcStatus parse_node(Parser *ps, Items *it) {
    PNode n = {.at = ps->tok};
    FC_VEC(int) res = {0};
    FC_VEC(const char *) names = {0};
    FC_VEC(Tok) restok = {0};
    FC_VEC(int) ins = {0};
    FC_VEC(Tok) intok = {0};
    FC_VEC(FcDtype) dts = {0};
    FC_VEC(IrShape) shs = {0};
    FcStatus s = FC_OK;
#define TRY_(e) do { s = (e); if (s != FC_OK) goto done; } while (0)
#define PUSH_(v, x) do { if (!FC_VEC_PUSH((v), (x))) { s = FC_OOM(ps->err); goto done; } } while (0)
    for (;;) {
        Tok rt = ps->tok;
        int id = 0;
        const char *nm = NULL;
        if (res.len == MAX_LIST) TRY_(perr(ps, rt.line, rt.col, "a node has at most %d results", MAX_LIST));
        TRY_(expect_value(ps, &id));
        if (ps->tok.kind == T_STRING) {
            nm = ps->tok.str;
            TRY_(next(ps));
        }
        if (res.len > 0 && id != res.data[res.len - 1] + 1)
            TRY_(perr(ps, rt.line, rt.col, "the results of a node have consecutive ids: expected %%%d, found %%%d",
                      res.data[res.len - 1] + 1, id));
        PUSH_(&res, id);
        PUSH_(&names, nm);
        PUSH_(&restok, rt);
        if (!is_punct(ps, ',')) break;
        TRY_(next(ps));
    }
    TRY_(expect_punct(ps, '='));
    n.optok = ps->tok;
    TRY_(lookup_op(ps, &n.op));
    const IrOpInfo *info = &ir_ops[n.op];
    TRY_(expect_punct(ps, '('));
    if (!is_punct(ps, ')')) {
        for (;;) {
            Tok vt = ps->tok;
            int id = 0;
            if (ins.len == MAX_LIST) TRY_(perr(ps, vt.line, vt.col, "a node has at most %d inputs", MAX_LIST));
            TRY_(expect_value(ps, &id));
            PUSH_(&ins, id);
            PUSH_(&intok, vt);
            if (!is_punct(ps, ',')) break;
            TRY_(next(ps));
        }
    }
    TRY_(expect_punct(ps, ')'));
    if (ins.len < info->min_in || (info->max_in >= 0 && ins.len > info->max_in)) {
        if (info->max_in < 0)
            TRY_(perr(ps, n.optok.line, n.optok.col, "'%s' takes at least %d input%s; got %d", info->name, info->min_in,
                      info->min_in == 1 ? "" : "s", ins.len));
        else if (info->min_in == info->max_in)
            TRY_(perr(ps, n.optok.line, n.optok.col, "'%s' takes %d input%s; got %d", info->name, info->min_in,
                      info->min_in == 1 ? "" : "s", ins.len));
        else
            TRY_(perr(ps, n.optok.line, n.optok.col, "'%s' takes %d to %d inputs; got %d", info->name, info->min_in,
                      info->max_in, ins.len));
    }
    if (info->nout > 0 && res.len != info->nout)
        TRY_(perr(ps, n.at.line, n.at.col, "'%s' has %d result%s; the line names %d", info->name, info->nout,
                  info->nout == 1 ? "" : "s", res.len));
    TRY_(parse_attrs(ps, n.op, &n.optok, &n.a));
    TRY_(expect_punct(ps, ':'));
    n.typetok = ps->tok;
    for (;;) {
        FcDtype dt;
        IrShape sh;
        TRY_(parse_type(ps, &dt, &sh));
        PUSH_(&dts, dt);
        PUSH_(&shs, sh);
        if (!is_punct(ps, ',')) break;
        TRY_(next(ps));
    }
    if (dts.len != res.len)
        TRY_(perr(ps, n.typetok.line, n.typetok.col, "%d result type%s for %d result%s", dts.len,
                  dts.len == 1 ? "" : "s", res.len, res.len == 1 ? "" : "s"));
    int64_t v;
    TRY_(expect_punct(ps, '@'));
    TRY_(expect_int(ps, 0, MAX_ID, "a line number", &v));
    n.loc.line = (int)v;
    TRY_(expect_punct(ps, ':'));
    TRY_(expect_int(ps, 0, MAX_ID, "a column number", &v));
    n.loc.col = (int)v;
    TRY_(expect_punct(ps, '#'));
    TRY_(expect_int(ps, 0, MAX_ID, "an origin", &v));
    n.origin = (int)v;
    n.origin_op = n.op;
    if (ps->tok.kind == T_IDENT) TRY_(lookup_op(ps, &n.origin_op));
    TRY_(expect_eol(ps));

    n.nres = res.len;
    n.nin = ins.len;
    n.ntypes = dts.len;
    n.res = scratch_copy(ps, res.data, sizeof(int) * (size_t)res.len);
    n.resname = scratch_copy(ps, names.data, sizeof(const char *) * (size_t)names.len);
    n.restok = scratch_copy(ps, restok.data, sizeof(Tok) * (size_t)restok.len);
    n.in = scratch_copy(ps, ins.data, sizeof(int) * (size_t)ins.len);
    n.intok = scratch_copy(ps, intok.data, sizeof(Tok) * (size_t)intok.len);
    n.dt = scratch_copy(ps, dts.data, sizeof(FcDtype) * (size_t)dts.len);
    n.sh = scratch_copy(ps, shs.data, sizeof(IrShape) * (size_t)shs.len);
    if (!n.res || !n.resname || !n.restok || !n.in || !n.intok || !n.dt || !n.sh) {
        s = FC_OOM(ps->err);
        goto done;
    }
    PUSH_(&it->nodes, n);
done:
    FC_VEC_FREE(&res);
    FC_VEC_FREE(&names);
    FC_VEC_FREE(&restok);
    FC_VEC_FREE(&ins);
    FC_VEC_FREE(&intok);
    FC_VEC_FREE(&dts);
    FC_VEC_FREE(&shs);
    return s;
#undef TRY_
#undef PUSH_
}

/* ---- building the graph -------------------------------------------------------------------- */
static FcStatus build_node(Parser *ps, IrGraph *g, const PNode *n, int total) {
    int first = g->values.len;
    for (int k = 0; k < n->nin; k++) {
        int id = n->in[k];
        if (id >= first) {
            const Tok *t = &n->intok[k];
            if (id < total) return perr(ps, t->line, t->col, "%%%d is used before its definition", id);
            return perr(ps, t->line, t->col, "%%%d is not defined", id);
        }
    }
    int out0 = -1;
    FcStatus s = ir_add_node(g, n->op, n->in, n->nin, &n->a, n->loc, n->origin, n->origin_op, &out0, ps->err);
    if (s == FC_ERR_INPUT) {
        char msg[sizeof ps->err->msg];
        memcpy(msg, ps->err->msg, sizeof msg);
        return perr(ps, n->optok.line, n->optok.col, "%s", msg);
    }
    if (s != FC_OK) return s;
    const IrNode *made = &g->nodes.data[g->nodes.len - 1];
    if (made->nout != n->nres)
        return perr(ps, n->at.line, n->at.col, "'%s' gives %d result%s here; the line names %d", ir_ops[n->op].name,
                    made->nout, made->nout == 1 ? "" : "s", n->nres);
    for (int k = 0; k < n->nres; k++) {
        IrValue *v = ir_val(g, out0 + k);
        if (v->dtype != n->dt[k] || !ir_shape_eq(&v->shape, &n->sh[k])) {
            char want[256], got[256];
            ir_type_str(n->dt[k], &n->sh[k], got, sizeof got);
            ir_type_str(v->dtype, &v->shape, want, sizeof want);
            return perr(ps, n->typetok.line, n->typetok.col,
                        "result %%%d is declared %s but the shape rule of '%s' gives %s", out0 + k, got,
                        ir_ops[n->op].name, want);
        }
        if (n->resname[k] && !(v->name = arena_strdup(&g->arena, n->resname[k]))) return FC_OOM(ps->err);
    }
    return FC_OK;
}

/* Creates values in id order: at each step the next id belongs either to the next input
 * or to the next node's first result. */
static FcStatus build(Parser *ps, IrGraph *g, const Items *it) {
    int total = it->inputs.len;
    for (int i = 0; i < it->nodes.len; i++) total += it->nodes.data[i].nres;
    int ii = 0, ni = 0;
    while (ii < it->inputs.len || ni < it->nodes.len) {
        int next_id = g->values.len;
        const PInput *pi = ii < it->inputs.len ? &it->inputs.data[ii] : NULL;
        const PNode *pn = ni < it->nodes.len ? &it->nodes.data[ni] : NULL;
        if (pi && pi->id == next_id) {
            if (ir_add_input(g, pi->name, pi->dt, &pi->sh, pi->param) < 0) return FC_OOM(ps->err);
            ii++;
        } else if (pn && pn->res[0] == next_id) {
            FC_TRY(build_node(ps, g, pn, total));
            ni++;
        } else {
            /* report at whichever pending definition comes first by id */
            const Tok *at;
            int id = 0;
            if (pi && (!pn || pi->id < pn->res[0])) at = &pi->at, id = pi->id;
            else at = &pn->at, id = pn->res[0];
            if (id < next_id) return perr(ps, at->line, at->col, "%%%d is defined twice", id);
            return perr(ps, at->line, at->col,
                        "value ids are numbered in order of definition: expected %%%d, found %%%d", next_id, id);
        }
    }
    for (int i = 0; i < it->outputs.len; i++) {
        const POutput *o = &it->outputs.data[i];
        if (o->id >= g->values.len) return perr(ps, o->at.line, o->at.col, "%%%d is not defined", o->id);
        FC_TRY(ir_add_output(g, o->id, o->name, ps->err));
    }
    return FC_OK;
}

FcStatus ir_parse(const char *text, const char *file, IrGraph **out, FcErr *err) {
    *out = NULL;
    Arena scratch = {0};
    Items it = {0};
    IrGraph *g = NULL;
    Parser ps = {.p = text ? text : "", .line = 1, .file = file ? file : "<ir>", .scratch = &scratch, .err = err};
    ps.line_start = ps.p;
    FcStatus s = FC_OK;
#define TRY_(e) do { s = (e); if (s != FC_OK) goto done; } while (0)
    TRY_(next(&ps));
    while (ps.tok.kind == T_NL) TRY_(next(&ps));
    TRY_(expect_word(&ps, "block"));
    if (ps.tok.kind != T_STRING) TRY_(expected(&ps, "the block name (a string)"));
    const char *name = ps.tok.str;
    TRY_(next(&ps));
    TRY_(expect_word(&ps, "file"));
    if (ps.tok.kind != T_STRING) TRY_(expected(&ps, "the source file name (a string)"));
    const char *srcfile = ps.tok.str;
    TRY_(next(&ps));
    Tok ntok = ps.tok;
    TRY_(expect_word(&ps, "next_origin"));
    TRY_(expect_punct(&ps, '='));
    int64_t next_origin;
    TRY_(expect_int(&ps, 0, MAX_ID, "next_origin", &next_origin));
    TRY_(expect_eol(&ps));

    for (;;) {
        if (ps.tok.kind == T_NL) TRY_(next(&ps));
        else if (ps.tok.kind == T_EOF) break;
        else if (is_word(&ps, "input") || is_word(&ps, "param")) TRY_(parse_input(&ps, &it));
        else if (is_word(&ps, "output")) TRY_(parse_output(&ps, &it));
        else if (is_word(&ps, "fp8")) TRY_(parse_slot(&ps, &it));
        else if (ps.tok.kind == T_VALUE) TRY_(parse_node(&ps, &it));
        else TRY_(expected(&ps, "'input', 'param', 'output', 'fp8' or a node"));
    }

    g = ir_graph_new(name, srcfile);
    if (!g) TRY_(FC_OOM(err));
    for (int k = 0; k < it.slots.len; k++) {
        if (ir_add_fp8_slot(g, it.slots.data[k].fmt) < 0) TRY_(FC_OOM(err));
        g->fp8.data[k].scale = it.slots.data[k].scale;
        g->fp8.data[k].read_only = it.slots.data[k].read_only;
        g->fp8.data[k].grad = it.slots.data[k].grad;
        g->fp8.data[k].input = it.slots.data[k].input;
    }
    /* a gradient slot is another slot, E5M2, with none of its own (ir_verify's rule) */
    for (int k = 0; k < it.slots.len; k++) {
        const PSlot *sl = &it.slots.data[k];
        int j = sl->grad;
        if (j >= 0 && (j >= it.slots.len || j == k || it.slots.data[j].fmt != FC_F8E5M2 || it.slots.data[j].grad != -1))
            TRY_(perr(&ps, sl->grad_at.line, sl->grad_at.col,
                      "an f8 slot's gradient slot is another slot, f8e5m2, without a gradient slot of its own"));
    }
    TRY_(build(&ps, g, &it));
    for (int k = 0; k < it.slots.len; k++) {
        const PSlot *sl = &it.slots.data[k];
        if (sl->input >= 0 && (sl->input >= g->inputs.len || ir_cval(g, g->inputs.data[sl->input])->dtype != sl->fmt))
            TRY_(perr(&ps, sl->input_at.line, sl->input_at.col, "an f8 slot's input is an input of the slot's format"));
    }
    if (next_origin < g->next_origin)
        TRY_(perr(&ps, ntok.line, ntok.col, "next_origin=%lld is not above the largest origin, %d",
                  (long long)next_origin, g->next_origin - 1));
    g->next_origin = (int)next_origin;
    /* what the line-by-line checks leave to the whole graph (a quant's scale of another slot,
     * two quants of one slot): ir_verify's rules, as errors in the text */
    FcStatus vs = ir_verify(g, err);
    if (vs == FC_ERR_INTERNAL) {
        char msg[sizeof err->msg];
        memcpy(msg, err->msg, sizeof msg);
        const char *m = strstr(msg, "': ");
        TRY_(fc_err_set(err, FC_ERR_INPUT, "%s: error: %s", ps.file, m ? m + 3 : msg));
    }
    TRY_(vs);
done:
#undef TRY_
    FC_VEC_FREE(&it.slots);
    FC_VEC_FREE(&it.inputs);
    FC_VEC_FREE(&it.nodes);
    FC_VEC_FREE(&it.outputs);
    arena_free(&scratch);
    if (s != FC_OK) {
        ir_graph_free(g);
        return s;
    }
    *out = g;
    return FC_OK;
}
