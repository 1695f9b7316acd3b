/* passes.h: the passes over the graph IR and the lowering into the kernel IR.
 * Each pass is one file with one entry point; passes/pipeline.c runs them in order. */
#ifndef FUSEC_PASSES_H
#define FUSEC_PASSES_H

#include "ir.h"
#include "kir.h"

/* decompose.c: replaces every composite op (softmax, log_softmax, layernorm, rmsnorm,
 * causal_mask, attention, gelu) and split by primitives. Every new node keeps the
 * `origin`/`origin_op` of the source op it came from, so eager lowering can still run each
 * source op as one kernel. Requires: a verified graph. Leaves: a verified graph with no
 * IR_CAT_COMPOSITE op and no split; same inputs and outputs. */
FcStatus pass_decompose(const IrGraph *in, IrGraph **out, FcErr *err);

/* Options that reach the kernel plan. */
typedef struct PassOptions {
    bool fuse;              /* false: the eager plan of CLI.md's --no-fuse */
    bool strict_rounding;   /* round every intermediate to its dtype */
    int sm;                 /* target compute capability for budgets: 80, 86, 89, 90 */
} PassOptions;

/* lower.c: groups the decomposed graph into kernels (eager: one group per source op, by
 * origin; fused: the fusion pass's groups) and writes each group's schedule into the
 * kernel IR, plus the buffer plan and the launch list. Requires: a decomposed graph. */
FcStatus pass_lower(const IrGraph *g, const PassOptions *opt, KirProgram **out, FcErr *err);

/* pipeline.c: the whole road from a source graph to a kernel program. *decomposed (the
 * graph after all graph passes, for --emit ir) and *prog are owned by the caller. */
FcStatus pass_pipeline(const IrGraph *src, const PassOptions *opt, IrGraph **decomposed,
                       KirProgram **prog, FcErr *err);

#endif
