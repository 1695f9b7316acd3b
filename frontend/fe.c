/* fe.c: fe_compile, the frontend's entry point (see frontend.h).
 *
 * Copies the source (flex needs two NUL bytes after it and writes into its buffer),
 * parses it into an AST (lexer.l, parser.y), lowers the chosen block (lower.c) unless the
 * parse reported errors, verifies the graph (ir_verify), and frees the AST. Diagnostics quote the caller's source, which
 * is never modified. Sources over FE_MAX_SOURCE bytes are refused.
 */
#include "ast.h"

#include <stdio.h>
#include <string.h>

FcStatus fe_compile(const char *src, size_t len, const char *filename, const FeOptions *opt,
                    IrGraph **out, StrBuf *diags, FcErr *err) {
    *out = NULL;
    if (!src) len = 0;
    FeDiag d = {.file = filename ? filename : "<input>", .src = src ? src : "", .len = len, .out = diags};
    if (len > FE_MAX_SOURCE) {
        fe_error_noloc(&d, "the source is %zu bytes; expected at most %u (16 MiB)", len, FE_MAX_SOURCE);
        fc_err_set(err, FC_ERR_INPUT, "%s", d.first);
        return FC_ERR_INPUT;
    }
    FeParser p = {.diag = &d, .len = len};
    char *copy = fc_alloc(len + 2);
    if (!copy) return FC_OOM(err);
    if (len) memcpy(copy, src, len);
    copy[len] = copy[len + 1] = 0;
    p.src = copy;

    FcStatus s = FC_OK;
    bool ok = fe_parse(&p);
    arena_free(&p.lexmem);
    if (!ok || p.oom) {
        s = FC_OOM(err);
    } else if (d.nerrors == 0 && !d.stopped) {
        s = fe_lower(&p, opt, out, err);
        /* the builder ran every shape rule; a verifier failure here is a frontend bug */
        if (s == FC_OK && *out) s = ir_verify(*out, err);
    }
    arena_free(&p.arena);
    fc_free(copy);
    if (s != FC_OK) {
        ir_graph_free(*out);
        *out = NULL;
        return s;
    }
    if (diags && diags->failed) {
        ir_graph_free(*out);
        *out = NULL;
        return FC_OOM(err);
    }
    if (d.nerrors || d.stopped) {
        ir_graph_free(*out);
        *out = NULL;
        FcStatus st = FC_ERR_INPUT;
        if (d.nerrors > 1)
            fc_err_set(err, st, "%s (and %d more error%s)", d.first, d.nerrors - 1, d.nerrors == 2 ? "" : "s");
        else
            fc_err_set(err, st, "%s", d.first);
        return st;
    }
    return FC_OK;
}
