/* frontend.h: source text to graph IR.
 *
 * fe_compile lexes and parses a .tf file (reentrant flex/bison, with locations), builds
 * an AST in an arena, and lowers the chosen block into a graph: names resolved, blocks
 * inlined, dims bound (defaults, then overrides), constant dim and scalar expressions
 * folded, weak scalar literals typed, promotion casts inserted.
 *
 * Diagnostics are appended to `diags` exactly as the command line prints them:
 *     FILE:LINE:COL: error: MESSAGE
 *       <the source line>
 *       <spaces>^
 * (warnings likewise with "warning:"), at most 20 errors, then a line
 * "FILE: too many errors; stopping". Errors that are not tied to a place (an -D for an
 * undeclared dim, no block in the file) are printed as "FILE: error: MESSAGE".
 */
#ifndef FUSEC_FRONTEND_H
#define FUSEC_FRONTEND_H

#include "ir.h"

typedef struct FeDimBinding {
    const char *name;
    int64_t value;
} FeDimBinding;

typedef struct FeOptions {
    const char *block;            /* block to compile; NULL: the last block in the file */
    const FeDimBinding *dims;     /* -D overrides */
    int ndims;
} FeOptions;

/* Compiles `len` bytes of `src` (need not be NUL-terminated; may contain any bytes).
 * On success *out is a verified graph (before decomposition). On a user error returns
 * FC_ERR_INPUT with the diagnostics in `diags` (and a one-line summary in err), *out NULL.
 * Never crashes on any input; recursion depth is bounded (deeply nested input is an error). */
FcStatus fe_compile(const char *src, size_t len, const char *filename, const FeOptions *opt,
                    IrGraph **out, StrBuf *diags, FcErr *err);

#endif
