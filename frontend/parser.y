/* parser.y: the grammar of the block language (docs/language.md), building the AST.
 *
 * A pure (reentrant) bison parser with locations; the flex scanner is passed as %param
 * and the parse context (FeParser: arena, diagnostics, results) as %parse-param.
 * Precedence is spelled out as grammar levels, lowest first:
 *     expr  := arith [cmp arith]          comparisons, non-associative
 *     arith := arith (+|-) term
 *     term  := term (*|/|@) unary
 *     unary := '-'* postfix               a run of minus signs is one node (no deep stack)
 *     postfix := name | call | literal | ( expr ) | [ list ]
 * Every left-recursive rule keeps the parser stack flat; the lexer limits ( and [
 * nesting, so the stack stays far below YYMAXDEPTH.
 * Error recovery: a bad statement is skipped up to the next newline or ';' (stmt: error),
 * a bad declaration up to the next `dim`, `const` or `block` (decl: error). Syntax errors
 * read "unexpected FOUND; expected A, B or C" (yyreport_syntax_error below), except where
 * an open ( or [ was never closed: that is reported at the ( with the place the parser
 * gave up as a note.
 */
%code top {
#include <stdio.h>
#include <string.h>
}

%code requires {
#include "ast.h"
#ifndef YY_TYPEDEF_YY_SCANNER_T
#define YY_TYPEDEF_YY_SCANNER_T
typedef void *yyscan_t;
#endif
}

%code {
int yylex(YYSTYPE *lvalp, YYLTYPE *llocp, yyscan_t scanner);
static void yyerror(YYLTYPE *loc, yyscan_t scanner, FeParser *p, const char *msg);
#define YYMALLOC fc_alloc
#define YYFREE fc_free
#define YYMAXDEPTH 20000
#define YYLLOC_DEFAULT(Cur, Rhs, N)                                       \
    do {                                                                  \
        if (N) {                                                          \
            (Cur) = YYRHSLOC(Rhs, 1);                                     \
            (Cur).end = YYRHSLOC(Rhs, N).end;                             \
        } else {                                                          \
            (Cur) = YYRHSLOC(Rhs, 0);                                     \
            (Cur).off = (Cur).end;                                        \
        }                                                                 \
    } while (0)

static FeDecl *new_decl(FeParser *p, FeDeclKind kind, const char *name, FeLoc loc) {
    FeDecl *d = fe_new(p, sizeof *d);
    if (!d) return NULL;
    d->kind = kind;
    d->name = name;
    d->loc = loc;
    return d;
}
static void add_decl(FeParser *p, FeDecl *d) {
    if (!d) return;
    if (p->decls_tail) p->decls_tail->next = d;
    else p->decls = d;
    p->decls_tail = d;
    p->ndecls++;
}
static FeExpr *leaf(FeParser *p, FeExprKind k, FeLoc loc) { return fe_expr(p, k, loc); }
static void add_dim(FeParser *p, const char *name, FeLoc loc, bool has, int64_t v, FeLoc vloc) {
    FeDecl *d = new_decl(p, FE_D_DIM, name, loc);
    if (!d) return;
    if (has && v < 1)
        fe_error(p->diag, vloc, "dim '%s' = %lld: a size must be at least 1", name, (long long)v);
    d->has_value = has;
    d->value = v;
    d->value_loc = vloc;
    add_decl(p, d);
}
static FeName *new_name(FeParser *p, const char *s, FeLoc loc) {
    FeName *n = fe_new(p, sizeof *n);
    if (!n) return NULL;
    n->name = s;
    n->loc = loc;
    return n;
}
static void names_add(FeNameList *l, FeName *n) {
    if (!n) return;
    if (l->tail) l->tail->next = n;
    else l->head = n;
    l->tail = n;
    l->n++;
}
}

%define api.pure full
%define api.location.type {FeLoc}
%define parse.error custom
%define parse.lac full
%locations
%param {yyscan_t scanner}
%parse-param {FeParser *p}

%union {
    int64_t ival;
    double fval;
    const char *str;
    FeExpr *expr;
    FeExprList elist;
    FeArg *arg;
    FeArgList args;
    FeNameList names;
    FeParam *param;
    FeParamList params;
    FeType *type;
    FeTypeList types;
    FeStmt *stmt;
    FeStmtList stmts;
    FeNeg neg;
    int op;
}

%token <str> IDENT "name"
%token <ival> INT "integer"
%token <fval> FLOAT "number"
%token <str> STRING "string"
%token <ival> DTYPE "dtype name"
%token DIM "'dim'" CONST "'const'" BLOCK "'block'" PARAM "'param'" RETURN "'return'"
%token TRUE "'true'" FALSE "'false'"
%token SEP "end of line"
%token ARROW "'->'" LE "'<='" GE "'>='" EQEQ "'=='" NE "'!='"

%type <expr> expr arith term unary postfix
%type <elist> expr_list dim_exprs
%type <arg> arg
%type <args> args arg_list
%type <names> name_list
%type <param> param
%type <params> params param_list
%type <type> type
%type <types> results type_list
%type <stmt> stmt
%type <stmts> body stmts stmt_seq
%type <neg> negs
%type <op> cmp

%%

program: decls ;

decls
    : %empty
    | decls decl
    ;

decl
    : DIM dim_items
    | CONST IDENT '=' expr {
          FeDecl *d = new_decl(p, FE_D_CONST, $2, @2);
          if (d) { d->expr = $4; add_decl(p, d); }
      }
    | BLOCK IDENT '(' params ')' results body {
          FeDecl *d = new_decl(p, FE_D_BLOCK, $2, @2);
          if (d) {
              d->params = $4.head; d->nparams = $4.n;
              d->results = $6.head; d->nresults = $6.n;
              d->body = $7.head;
              d->end_loc = $7.close;
              add_decl(p, d);
          }
      }
    | error
    ;

dim_items: dim_item | dim_items ',' dim_item ;

dim_item
    : IDENT                 { add_dim(p, $1, @1, false, 0, @1); }
    | IDENT '=' INT         { add_dim(p, $1, @1, true, $3, @3); }
    | IDENT '=' '-' INT     { add_dim(p, $1, @1, true, -$4, @3); }
    ;

params
    : %empty                { $$ = (FeParamList){0}; }
    | param_list
    | param_list ','
    ;

param_list
    : param                 { $$ = (FeParamList){0}; if ($1) { $$.head = $$.tail = $1; $$.n = 1; } }
    | param_list ',' param  { $$ = $1; if ($3) { if ($$.tail) $$.tail->next = $3; else $$.head = $3; $$.tail = $3; $$.n++; } }
    ;

param
    : IDENT ':' type        { $$ = fe_new(p, sizeof(FeParam)); if ($$) { $$->name = $1; $$->loc = @1; $$->type = $3; } }
    | PARAM IDENT ':' type  { $$ = fe_new(p, sizeof(FeParam)); if ($$) { $$->name = $2; $$->loc = @2; $$->type = $4; $$->is_param = true; } }
    ;

type
    : DTYPE '[' dim_exprs ']' {
          $$ = fe_new(p, sizeof(FeType));
          if ($$) { $$->dtype = (FcDtype)$1; $$->dims = $3.head; $$->ndims = $3.n; $$->loc = @$; }
      }
    ;

dim_exprs
    : %empty                { $$ = (FeExprList){0}; }
    | expr_list
    | expr_list ','
    ;

results
    : %empty                { $$ = (FeTypeList){0}; }
    | ARROW type_list       { $$ = $2; }
    ;

type_list
    : type                  { $$ = (FeTypeList){0}; if ($1) { $$.head = $$.tail = $1; $$.n = 1; } }
    | type_list ',' type    { $$ = $1; if ($3) { if ($$.tail) $$.tail->next = $3; else $$.head = $3; $$.tail = $3; $$.n++; } }
    ;

body
    : '{' stmts '}'         { $$ = $2; $$.close = @3; }
    ;

stmts
    : opt_seps                      { $$ = (FeStmtList){0}; }
    | opt_seps stmt_seq opt_seps    { $$ = $2; }
    ;

stmt_seq
    : stmt                  { $$ = (FeStmtList){0}; if ($1) { $$.head = $$.tail = $1; $$.n = 1; } }
    | stmt_seq seps stmt    { $$ = $1; if ($3) { if ($$.tail) $$.tail->next = $3; else $$.head = $3; $$.tail = $3; $$.n++; } }
    ;

seps: SEP | seps SEP ;
opt_seps: %empty | seps ;

stmt
    : IDENT '=' expr {
          $$ = fe_new(p, sizeof(FeStmt));
          FeName *n = new_name(p, $1, @1);
          if ($$ && n && $3) {
              $$->kind = FE_S_ASSIGN; $$->loc = @1;
              $$->targets = n; $$->ntargets = 1;
              $$->values = $3; $$->nvalues = 1;
          } else $$ = NULL;
      }
    | IDENT ',' name_list '=' expr {
          $$ = fe_new(p, sizeof(FeStmt));
          FeName *n = new_name(p, $1, @1);
          if ($$ && n && $5) {
              n->next = $3.head;
              $$->kind = FE_S_ASSIGN; $$->loc = @1;
              $$->targets = n; $$->ntargets = 1 + $3.n;
              $$->values = $5; $$->nvalues = 1;
          } else $$ = NULL;
      }
    | RETURN expr_list {
          $$ = fe_new(p, sizeof(FeStmt));
          if ($$) {
              $$->kind = FE_S_RETURN; $$->loc = @1;
              $$->values = $2.head; $$->nvalues = $2.n;
          }
      }
    | error                 { $$ = NULL; }
    ;

name_list
    : IDENT                 { $$ = (FeNameList){0}; names_add(&$$, new_name(p, $1, @1)); }
    | name_list ',' IDENT   { $$ = $1; names_add(&$$, new_name(p, $3, @3)); }
    ;

expr_list
    : expr                  { $$ = (FeExprList){0}; fe_exprlist_add(&$$, $1); }
    | expr_list ',' expr    { $$ = $1; fe_exprlist_add(&$$, $3); }
    ;

expr
    : arith
    | arith cmp arith       { $$ = fe_binary(p, (FeBinOp)$2, @2, $1, $3); }
    ;

cmp
    : '<'                   { $$ = FE_LT; }
    | LE                    { $$ = FE_LE; }
    | '>'                   { $$ = FE_GT; }
    | GE                    { $$ = FE_GE; }
    | EQEQ                  { $$ = FE_EQ; }
    | NE                    { $$ = FE_NE; }
    ;

arith
    : term
    | arith '+' term        { $$ = fe_binary(p, FE_ADD, @2, $1, $3); }
    | arith '-' term        { $$ = fe_binary(p, FE_SUB, @2, $1, $3); }
    ;

term
    : unary
    | term '*' unary        { $$ = fe_binary(p, FE_MUL, @2, $1, $3); }
    | term '/' unary        { $$ = fe_binary(p, FE_DIV, @2, $1, $3); }
    | term '@' unary        { $$ = fe_binary(p, FE_MATMUL, @2, $1, $3); }
    ;

unary
    : postfix
    | negs postfix          { $$ = fe_neg(p, $1, $2); }
    ;

negs
    : '-'                   { $$.n = 1; $$.loc = @1; }
    | negs '-'              { $$ = $1; if ($$.n < 1000000) $$.n++; }
    ;

postfix
    : IDENT                 { $$ = leaf(p, FE_E_NAME, @1); if ($$) $$->name = $1; }
    | IDENT '(' args ')'    { $$ = fe_call(p, $1, @1, $3); }
    | INT                   { $$ = leaf(p, FE_E_INT, @1); if ($$) $$->ival = $1; }
    | FLOAT                 { $$ = leaf(p, FE_E_FLOAT, @1); if ($$) $$->fval = $1; }
    | STRING                { $$ = leaf(p, FE_E_STR, @1); if ($$) $$->name = $1; }
    | TRUE                  { $$ = leaf(p, FE_E_BOOL, @1); if ($$) $$->ival = 1; }
    | FALSE                 { $$ = leaf(p, FE_E_BOOL, @1); if ($$) $$->ival = 0; }
    | DTYPE                 { $$ = leaf(p, FE_E_DTYPE, @1); if ($$) $$->ival = $1; }
    | '(' expr ')'          { $$ = $2; }
    | '[' ']'               { $$ = fe_list(p, @1, (FeExprList){0}); }
    | '[' expr_list ']'     { $$ = fe_list(p, @1, $2); }
    | '[' expr_list ',' ']' { $$ = fe_list(p, @1, $2); }
    ;

args
    : %empty                { $$ = (FeArgList){0}; }
    | arg_list
    | arg_list ','
    ;

arg_list
    : arg                   { $$ = (FeArgList){0}; fe_arglist_add(p, &$$, $1); }
    | arg_list ',' arg      { $$ = $1; fe_arglist_add(p, &$$, $3); }
    ;

arg
    : expr                  { $$ = fe_new(p, sizeof(FeArg)); if ($$) $$->val = $1; }
    | IDENT '=' expr        { $$ = fe_new(p, sizeof(FeArg)); if ($$) { $$->key = $1; $$->key_loc = @1; $$->val = $3; } }
    ;

%%

static void yyerror(YYLTYPE *loc, yyscan_t scanner, FeParser *p, const char *msg) {
    (void)scanner;
    (void)loc;
    (void)msg;
    /* bison calls this only for "memory exhausted": the stack could not grow */
    p->oom = true;
}

/* How a token looks in "unexpected ..." (found) and "expected ..." lists. */
static const char *token_name(yysymbol_kind_t k) {
    switch (k) {
    case YYSYMBOL_YYEOF: return "end of file";
    case YYSYMBOL_IDENT: return "a name";
    case YYSYMBOL_INT: return "an integer";
    case YYSYMBOL_FLOAT: return "a number";
    case YYSYMBOL_STRING: return "a string";
    case YYSYMBOL_DTYPE: return "a dtype name";
    case YYSYMBOL_SEP: return "end of line";
    default: return yysymbol_name(k);
    }
}

static bool is_expr_start(yysymbol_kind_t k) {
    switch (k) {
    case YYSYMBOL_IDENT: case YYSYMBOL_INT: case YYSYMBOL_FLOAT: case YYSYMBOL_STRING:
    case YYSYMBOL_DTYPE: case YYSYMBOL_TRUE: case YYSYMBOL_FALSE:
        return true;
    default: {
        const char *s = yysymbol_name(k);
        return strcmp(s, "'('") == 0 || strcmp(s, "'['") == 0 || strcmp(s, "'-'") == 0;
    }
    }
}

static bool is_operator(yysymbol_kind_t k) {
    switch (k) {
    case YYSYMBOL_LE: case YYSYMBOL_GE: case YYSYMBOL_EQEQ: case YYSYMBOL_NE:
        return true;
    default: {
        const char *s = yysymbol_name(k);
        return strlen(s) == 3 && s[0] == '\'' && strchr("<>+-*/@", s[1]);
    }
    }
}

/* The innermost open ( or [ when a syntax error at `found` means that it was never closed,
 * else NULL. That is the case when `found` cannot be inside brackets (a keyword that starts
 * a statement or declaration, a brace, the end of the file), or when it starts a line below
 * the bracket: the bracket's line then ended the statement as the writer meant it. */
static const FeLoc *unclosed(const FeParser *p, yysymbol_kind_t found, const FeLoc *loc) {
    const char *s = yysymbol_name(found);
    bool brace = strcmp(s, "'{'") == 0 || strcmp(s, "'}'") == 0;
    int depth = brace ? p->depth_at_brace : p->paren_depth;
    if (strcmp(s, "'('") == 0 || strcmp(s, "'['") == 0) depth--;   /* `found` opened one */
    if (depth < 1 || depth > FE_MAX_DEPTH) return NULL;
    const FeLoc *open = &p->open_at[depth - 1];
    bool outside = brace || found == YYSYMBOL_YYEOF || found == YYSYMBOL_RETURN || found == YYSYMBOL_DIM ||
                   found == YYSYMBOL_CONST || found == YYSYMBOL_BLOCK;
    if (!outside && loc->line > open->line) {
        size_t i = loc->off;
        while (i > 0 && (p->diag->src[i - 1] == ' ' || p->diag->src[i - 1] == '\t')) i--;
        outside = i == 0 || p->diag->src[i - 1] == '\n';
    }
    return outside ? open : NULL;
}

/* "unexpected FOUND; expected A, B or C". Expression starts are summarized as
 * "an expression" and binary operators as "an operator". */
static int yyreport_syntax_error(const yypcontext_t *ctx, yyscan_t scanner, FeParser *p) {
    (void)scanner;
    if (p->fatal) return 0;
    yysymbol_kind_t found = yypcontext_token(ctx);
    const YYLTYPE *loc = yypcontext_location(ctx);
    char fbuf[128];
    const char *ftext = p->diag->src + loc->off;
    size_t flen = loc->end > loc->off ? loc->end - loc->off : 0;
    switch (found) {
    case YYSYMBOL_IDENT:
        snprintf(fbuf, sizeof fbuf, "name '%.*s%s'", (int)(flen > 40 ? 40 : flen), ftext, flen > 40 ? "..." : "");
        break;
    case YYSYMBOL_INT: case YYSYMBOL_FLOAT:
        snprintf(fbuf, sizeof fbuf, "number '%.*s%s'", (int)(flen > 40 ? 40 : flen), ftext, flen > 40 ? "..." : "");
        break;
    case YYSYMBOL_DTYPE:
        snprintf(fbuf, sizeof fbuf, "dtype name '%.*s'", (int)(flen > 40 ? 40 : flen), ftext);
        break;
    case YYSYMBOL_SEP:
        snprintf(fbuf, sizeof fbuf, "%s", flen == 1 && ftext[0] == ';' ? "';'" : "end of line");
        break;
    case YYSYMBOL_DIM: case YYSYMBOL_CONST: case YYSYMBOL_BLOCK: case YYSYMBOL_PARAM:
    case YYSYMBOL_RETURN: case YYSYMBOL_TRUE: case YYSYMBOL_FALSE:
        snprintf(fbuf, sizeof fbuf, "keyword %s", yysymbol_name(found));
        break;
    default:
        snprintf(fbuf, sizeof fbuf, "%s", token_name(found));
        break;
    }
    yysymbol_kind_t exp[YYNTOKENS];
    int n = yypcontext_expected_tokens(ctx, exp, YYNTOKENS);
    const char *names[YYNTOKENS + 2];
    int k = 0;
    bool has_id = false, has_int = false, has_paren = false, has_plus = false, has_star = false;
    for (int i = 0; i < n; i++) {
        if (exp[i] == YYSYMBOL_IDENT) has_id = true;
        if (exp[i] == YYSYMBOL_INT) has_int = true;
        const char *s = yysymbol_name(exp[i]);
        if (strcmp(s, "'('") == 0) has_paren = true;
        if (strcmp(s, "'+'") == 0) has_plus = true;
        if (strcmp(s, "'*'") == 0) has_star = true;
    }
    bool sum_expr = has_id && has_int && has_paren;
    bool sum_ops = has_plus && has_star;
    if (sum_expr) names[k++] = "an expression";
    if (sum_ops) names[k++] = "an operator";
    for (int i = 0; i < n; i++) {
        if (sum_expr && is_expr_start(exp[i])) continue;
        if (sum_ops && is_operator(exp[i])) continue;
        names[k++] = token_name(exp[i]);
    }
    char msg[900];
    size_t off = (size_t)snprintf(msg, sizeof msg, "unexpected %s", fbuf);
    for (int i = 0; i < k && off < sizeof msg; i++)
        off += (size_t)snprintf(msg + off, sizeof msg - off, "%s%s", i == 0 ? "; expected " : i == k - 1 ? " or " : ", ",
                                names[i]);
    const FeLoc *open = unclosed(p, found, loc);
    if (open) {
        char c = p->diag->src[open->off];
        fe_error(p->diag, *open, "'%c' is not closed; expected a matching '%c'", c, c == '(' ? ')' : ']');
        fe_note(p->diag, *loc, "the parser gave up here: %s", msg);
        /* the newlines after it separate statements again, so that recovery resumes at the
         * next statement rather than at the end of the block */
        p->paren_depth = 0;
        return 0;
    }
    fe_error(p->diag, *loc, "%s", msg);
    return 0;
}
