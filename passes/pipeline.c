/* pipeline.c: the ordered list of passes, from a source graph to a kernel program.
 *
 *   verify(source) -> decompose -> verify -> dce -> verify -> cse (fused, not --strict-rounding)
 *   -> split_dequant -> library_products -> fuse (groups) -> lower -> memplan
 *
 * (dce verifies its result itself; lower builds the schedules and buffers.)
 *
 * Every stage is checked: the graph verifier after each graph pass, the kernel IR verifier
 * on every kernel (inside pass_lower).
 */
#include "passes.h"

#include <string.h>

void pass_result_free(PassResult *r) {
    if (!r) return;
    ir_graph_free(r->graph);
    kir_program_free(r->prog);
    fc_free(r->node_kernel);
    FC_VEC_FREE(&r->edges);
    r->graph = NULL;
    r->prog = NULL;
    r->node_kernel = NULL;
}

FcStatus pass_pipeline(const IrGraph *src, const PassOptions *opt, PassResult *out, FcErr *err) {
    PassResult r = {0};
    *out = r;
    FC_TRY(ir_verify(src, err));
    FC_TRY(pass_decompose(src, &r.graph, err));
    FcStatus s = ir_verify(r.graph, err);
    if (s == FC_OK) {
        IrGraph *live = NULL;
        s = pass_dce(r.graph, &live, err);
        if (s == FC_OK) {
            ir_graph_free(r.graph);
            r.graph = live;
        }
    }
    /* what two composites share, computed once; not with --strict-rounding, whose rounding
     * points are the eager program's, which computes each op's own (a value two source ops
     * share would cross from one to the other: rounded, where eager keeps each in f32) */
    if (s == FC_OK && opt->fuse && !opt->strict_rounding) {
        IrGraph *merged = NULL;
        s = pass_cse(r.graph, &merged, err);
        if (s == FC_OK && merged) {
            ir_graph_free(r.graph);
            r.graph = merged;
        }
    }
    if (s == FC_OK) {   /* an f8 value read back once per reader */
        IrGraph *split = NULL;
        s = pass_split_dequant(r.graph, &split, err);
        if (s == FC_OK && split) {
            ir_graph_free(r.graph);
            r.graph = split;
        }
    }
    if (s == FC_OK && opt->library_gemm) {   /* narrow products as f32 library calls */
        IrGraph *lib = NULL;
        s = pass_library_products(r.graph, opt->cpu, &lib, err);
        if (s == FC_OK && lib) {
            ir_graph_free(r.graph);
            r.graph = lib;
        }
    }
    int *groups = NULL;
    if (s == FC_OK) {
        groups = fc_calloc((size_t)r.graph->nodes.len + 1, sizeof(int));
        r.node_kernel = fc_calloc((size_t)r.graph->nodes.len + 1, sizeof(int));
        s = groups && r.node_kernel ? FC_OK : FC_OOM(err);
    }
    if (s == FC_OK) s = pass_fuse(r.graph, opt, groups, &r.edges, err);
    if (s == FC_OK) s = pass_lower(r.graph, opt, groups, &r.prog, r.node_kernel, err);
    if (s == FC_OK) s = pass_memplan(r.prog, err);
    fc_free(groups);
    *out = r;
    return s;
}

FcStatus pass_train(const IrGraph *src, PassRemat mode, int64_t budget, AdJoint *joint, RematPlan *plan,
                    FcErr *err) {
    memset(joint, 0, sizeof *joint);
    memset(plan, 0, sizeof *plan);
    FC_TRY(ir_verify(src, err));
    bool keep[IR_OP_COUNT] = {0};
    keep[IR_OP_SOFTMAX] = keep[IR_OP_LOG_SOFTMAX] = true;
    IrGraph *dec = NULL, *live = NULL, *jd = NULL;
    FcStatus s = pass_decompose_keep(src, keep, &dec, err);
    if (s == FC_OK) s = pass_dce(dec, &live, err);
    if (s == FC_OK) s = pass_autodiff(live, joint, err);
    /* softmax and log_softmax had their own rules; now they go too */
    if (s == FC_OK) s = pass_decompose(joint->graph, &jd, err);
    if (s == FC_OK) {
        ir_graph_free(joint->graph);
        joint->graph = jd;
        s = pass_remat(joint, mode, budget, plan, err);
    }
    ir_graph_free(dec);
    ir_graph_free(live);
    return s;
}
