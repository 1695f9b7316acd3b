/* ast.h: the frontend's internal interface: source locations, the AST, the parse
 * context shared by the flex lexer and the bison parser, diagnostics, and a small
 * string-keyed hash map.
 *
 * Lifetimes: every AST node and string lives in FeParser.arena, which fe_compile frees
 * after lowering. The AST is a tree of singly linked lists (declarations, statements,
 * list items, arguments); nothing in it points back.
 *
 * Invariants:
 * - every FeExpr has depth <= FE_MAX_DEPTH + 1; a node that first crosses the limit
 *   reported an error when it was built (so lowering never runs on it);
 * - lexer parenthesis/bracket nesting never exceeds FE_MAX_DEPTH (the lexer stops the
 *   parse with an error), so the bison stack stays small.
 * Entry points: fe_parse (lexer.l), fe_lower (lower.c), fe_diag_* (diag.c).
 */
#ifndef FUSEC_FE_AST_H
#define FUSEC_FE_AST_H

#include <setjmp.h>

#include "frontend.h"

#define FE_MAX_DEPTH 256          /* nesting of ( [ and depth of expression trees */
#define FE_MAX_ERRORS 20          /* errors reported before "too many errors; stopping" */
#define FE_MAX_SOURCE (16u << 20) /* bytes of source accepted */

/* A source range: line/col (1-based, col in bytes) of its first byte, byte offsets. */
typedef struct FeLoc {
    int line, col;
    size_t off, end;    /* [off, end) in the source */
} FeLoc;

/* ---- diagnostics (diag.c) ------------------------------------------------------------ */
typedef struct FeDiag {
    const char *file;
    const char *src;    /* the whole source, len bytes */
    size_t len;
    StrBuf *out;        /* where the text goes */
    int nerrors;        /* errors reported (not counting suppressed ones) */
    bool stopped;       /* the error cap was hit; report nothing more */
    bool last_shown;    /* the last error was printed (so its notes are) */
    char first[512];    /* first error line, for the one-line summary */
} FeDiag;
void fe_error(FeDiag *d, FeLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void fe_warning(FeDiag *d, FeLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void fe_error_noloc(FeDiag *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A note on the error just reported ("FILE:LINE:COL: note: ..." with its source line). */
void fe_note(FeDiag *d, FeLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* "Did you mean": fe_suggest offers each candidate name for `name` (a misspelt op,
 * argument, string value, block, dim ...); `best` ends as the closest one that is near
 * enough to be a slip of the keyboard (see diag.c), NULL when none is. Names longer than
 * FE_SUGGEST_MAX bytes are never suggested. */
#define FE_SUGGEST_MAX 64
typedef struct FeSuggest {
    const char *name;
    const char *best;
    int dist;
} FeSuggest;
void fe_suggest(FeSuggest *s, const char *cand);
/* Writes a byte as it should appear quoted in a message: 'a', '\xff', '\n'. */
void fe_fmt_byte(char *buf, size_t n, unsigned char c);

/* ---- string map ------------------------------------------------------------------------ */
typedef struct FeMap {
    const char **keys;  /* open addressing, NULL = empty */
    int *vals;
    int cap, len;
} FeMap;
bool fe_map_get(const FeMap *m, const char *key, int *val);
bool fe_map_put(FeMap *m, const char *key, int val);   /* false on OOM */
void fe_map_free(FeMap *m);

/* ---- AST ---------------------------------------------------------------------------------- */
typedef enum FeExprKind {
    FE_E_NAME, FE_E_INT, FE_E_FLOAT, FE_E_STR, FE_E_BOOL, FE_E_DTYPE, FE_E_LIST,
    FE_E_CALL, FE_E_BIN, FE_E_NEG
} FeExprKind;

typedef enum FeBinOp {
    FE_ADD, FE_SUB, FE_MUL, FE_DIV, FE_MATMUL, FE_LT, FE_LE, FE_GT, FE_GE, FE_EQ, FE_NE
} FeBinOp;

typedef struct FeExpr FeExpr;
typedef struct FeArg {
    const char *key;        /* NULL: positional */
    FeLoc key_loc;
    FeExpr *val;
    struct FeArg *next;
} FeArg;

struct FeExpr {
    FeExprKind kind;
    FeLoc loc;              /* BIN: the operator; CALL: the callee name; NEG: the first '-' */
    int depth;              /* 1 for leaves */
    const char *name;       /* NAME; CALL callee; STR contents (unescaped) */
    int64_t ival;           /* INT value; BOOL 0/1; DTYPE FcDtype; NEG count of '-' */
    double fval;            /* FLOAT value */
    FeBinOp op;             /* BIN */
    FeExpr *lhs, *rhs;      /* BIN operands; NEG operand in lhs */
    FeExpr *items;          /* LIST items, linked by next */
    int nitems;
    FeArg *args;            /* CALL arguments */
    int nargs;
    FeExpr *next;           /* next item of the list this expression is in */
};

typedef struct FeType {
    FcDtype dtype;
    FeExpr *dims;           /* linked by next; NULL for rank 0 */
    int ndims;
    FeLoc loc;
    struct FeType *next;    /* next result type */
} FeType;

typedef struct FeParam {
    const char *name;
    FeLoc loc;
    bool is_param;          /* declared with `param` */
    FeType *type;
    struct FeParam *next;
} FeParam;

typedef struct FeName {
    const char *name;
    FeLoc loc;
    struct FeName *next;
} FeName;

typedef enum FeStmtKind { FE_S_ASSIGN, FE_S_RETURN } FeStmtKind;
typedef struct FeStmt {
    FeStmtKind kind;
    FeLoc loc;              /* first token */
    FeName *targets;        /* ASSIGN */
    int ntargets;
    FeExpr *values;         /* ASSIGN: one; RETURN: the list, linked by next */
    int nvalues;
    struct FeStmt *next;
} FeStmt;

typedef enum FeDeclKind { FE_D_DIM, FE_D_CONST, FE_D_BLOCK } FeDeclKind;
typedef struct FeDecl {
    FeDeclKind kind;
    const char *name;
    FeLoc loc;              /* the name */
    /* dim */
    bool has_value;
    int64_t value;
    FeLoc value_loc;
    /* const */
    FeExpr *expr;
    /* block */
    FeParam *params;
    int nparams;
    FeType *results;        /* NULL: not declared */
    int nresults;
    FeStmt *body;
    FeLoc end_loc;          /* the closing brace */
    struct FeDecl *next;

    /* lowering state (lower.c) */
    int lstate;             /* const: 0 new, 1 evaluating, 2 done, 3 failed; block: active */
    bool used;              /* dim: used by the compiled block */
    bool bound;             /* dim: has a value (default or override) */
    int64_t bound_value;
    bool reported;          /* dim: "no value" already reported */
    bool isint;             /* const value */
    int64_t ival;
    double fval;
    bool warned;            /* block: shadowing warnings already given */
    void *lval;             /* const: its folded value (lower.c's LVal) */
} FeDecl;

/* List builders used by the parser (head/tail/count). */
typedef struct FeExprList { FeExpr *head, *tail; int n; } FeExprList;
typedef struct FeArgList { FeArg *head, *tail; int n; FeLoc bad; bool positional_after_key; } FeArgList;
typedef struct FeNameList { FeName *head, *tail; int n; } FeNameList;
typedef struct FeParamList { FeParam *head, *tail; int n; } FeParamList;
typedef struct FeTypeList { FeType *head, *tail; int n; } FeTypeList;
typedef struct FeStmtList { FeStmt *head, *tail; int n; FeLoc close; } FeStmtList;
typedef struct FeNeg { int n; FeLoc loc; } FeNeg;

/* ---- the parse context ------------------------------------------------------------------ */
typedef struct FeParser {
    Arena arena;            /* AST and strings */
    Arena lexmem;           /* flex's own allocations */
    FeDiag *diag;
    const char *src;        /* the source, with two NUL bytes after len (flex needs them) */
    size_t len;
    /* lexer position and state */
    int line, col;
    size_t off;
    int paren_depth;        /* open ( and [ */
    FeLoc open_at[FE_MAX_DEPTH];  /* where each of them is */
    int depth_at_brace;     /* paren_depth before the last '{' or '}' reset it */
    int brace_depth;        /* open { */
    int last_tok;           /* last token returned (to collapse separators) */
    bool fatal;             /* stop parsing: suppress further syntax errors */
    bool oom;
    jmp_buf oom_jmp;        /* flex's fatal-error hook jumps here (only allocation fails) */
    /* results */
    FeDecl *decls, *decls_tail;
    int ndecls;
} FeParser;

/* Parses p->src into p->decls (lexer.l). Returns false on out-of-memory; syntax errors
 * are reported through p->diag. */
bool fe_parse(FeParser *p);

/* AST constructors (ast.c); they return NULL only on OOM (p->oom set). */
void *fe_new(FeParser *p, size_t size);
FeExpr *fe_expr(FeParser *p, FeExprKind kind, FeLoc loc);
FeExpr *fe_binary(FeParser *p, FeBinOp op, FeLoc loc, FeExpr *a, FeExpr *b);
FeExpr *fe_neg(FeParser *p, FeNeg neg, FeExpr *x);
FeExpr *fe_call(FeParser *p, const char *name, FeLoc loc, FeArgList args);
FeExpr *fe_list(FeParser *p, FeLoc loc, FeExprList items);
void fe_exprlist_add(FeExprList *l, FeExpr *e);
void fe_arglist_add(FeParser *p, FeArgList *l, FeArg *a);
const char *fe_binop_str(FeBinOp op);

/* Lowers the chosen block of a parsed program into a graph (lower.c). Errors go to
 * p->diag; returns FC_OK (check diag->nerrors), or FC_ERR_NOMEM / FC_ERR_INTERNAL. */
FcStatus fe_lower(FeParser *p, const FeOptions *opt, IrGraph **out, FcErr *err);

#endif
