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
/* The same, leaving the composites op with keep[op] true as they are (for autodiff, which has
 * rules of its own for softmax and log_softmax). keep NULL: decompose everything. */
FcStatus pass_decompose_keep(const IrGraph *in, const bool *keep, IrGraph **out, FcErr *err);

/* precision.c: storage precision (--precision bf16|f16|f8): every value declared or computed as
 * f32 is stored as p (FC_BF16 or FC_F16), but the results of sum, mean, cross_entropy, full and
 * iota, which stay f32 and whose consumers read their lowered operands widened to f32; a cast to
 * f32 becomes a cast to p. p = FC_F8E4M3: the interface and outputs bf16, every other such value
 * E4M3 with an f8 slot of its own (fp8_quant, fp8_dequant; precision.c's header), and with train
 * an E5M2 slot for its gradient (IrFp8Slot.grad). Requires: a
 * verified graph without f8 slots. Leaves: a verified graph with the same inputs and outputs
 * (names, shapes, order), their f32 dtypes lowered. */
FcStatus pass_precision(const IrGraph *in, FcDtype p, bool train, IrGraph **out, FcErr *err);

/* libgemm.c: where products are library calls (PassOptions.library_gemm), every matmul of
 * f16, bf16 or f8 operands becomes cast-to-f32 operands, an f32 matmul and a cast of the result
 * back: the same numbers, and the BLAS / cuBLASLt instead of a generated kernel. Requires: a
 * verified graph. Leaves: a verified graph with the same inputs and outputs, or *out NULL when
 * the graph has no such product (nothing to change). `cpu`: the library takes only f32 (the
 * BLAS), and an A read transposed is widened before the transpose, so the library reads the
 * f32 copy with its transpose flag. */
FcStatus pass_library_products(const IrGraph *in, bool cpu, IrGraph **out, FcErr *err);

/* dequant.c: every fp8_dequant read by more than one node gets a copy for each reader after the
 * first (under that reader's origin), so that fusion keeps each with its reader and the f8
 * value crosses kernel boundaries in f8 (a backward's E5M2 gradient, which its producer's rule
 * reads several times). Requires: a verified graph. Leaves: a verified graph with the same
 * inputs and outputs; *out NULL where no dequant has two readers (keep `in`). */
FcStatus pass_split_dequant(const IrGraph *in, IrGraph **out, FcErr *err);

/* cse.c: merges every node that computes what an earlier node computes (same op, inputs and
 * attributes; not dropout, dropout_mask, fp8_quant, views, casts, gathers or scatters) into
 * that one, its readers and outputs reading the earlier node's results. Requires: a verified graph. Leaves: a verified graph with
 * the kept nodes in their order, the same inputs and outputs; *out NULL where nothing merges
 * (keep `in`). Fused programs only (pipeline.c). */
FcStatus pass_cse(const IrGraph *in, IrGraph **out, FcErr *err);

/* dce.c: removes every node from which no block output can be reached (a value that reaches
 * no output reaches no kernel). Requires: a verified graph. Leaves: a verified graph with the
 * live nodes in their order, all the inputs and the same outputs. */
FcStatus pass_dce(const IrGraph *in, IrGraph **out, FcErr *err);

/* autodiff.c: reverse-mode autodiff. From a verified graph decomposed but for softmax and
 * log_softmax, builds the joint forward+backward graph: inputs are the block's inputs, then one
 * gradient (`grad_<output>`) per float output; nodes the forward's, copied in order, then the
 * backward's; outputs the block's outputs, then the gradient (`grad_<input>`) of every float
 * input (zeros when nothing reaches it). The rules are listed in autodiff.c and
 * docs/training.md. Free with ad_joint_free (also after a failure). */
typedef struct AdJoint {
    IrGraph *graph;
    int nfwd_inputs;          /* the block's inputs come first */
    int nfwd_outputs;         /* the block's outputs come first */
    int *grad_in_of_output;   /* [nfwd_outputs] joint input index of the output's gradient, -1 */
    int *grad_out_of_input;   /* [nfwd_inputs] joint output index of the input's gradient, -1 */
    int first_bwd_origin;     /* node origins below this are the forward's source ops
                               * (decomposition keeps origins); the backward's nodes have origins
                               * of their own, from here up */
} AdJoint;
FcStatus pass_autodiff(const IrGraph *in, AdJoint *out, FcErr *err);
void ad_joint_free(AdJoint *j);

/* remat.c: recompute-vs-store. Splits a decomposed joint graph into the forward program's graph
 * (the block's inputs -> its outputs, then one output per saved value that is neither an input
 * nor an output) and the backward's (the saved values in order, then the outputs' gradients ->
 * the float inputs' gradients), choosing what to save by a minimum cut weighted by bytes and
 * recomputed flops (remat.c's comment; docs/training.md). budget < 0: none. */
typedef enum PassRemat { PASS_REMAT_AUTO, PASS_REMAT_NONE, PASS_REMAT_FULL } PassRemat;
enum { REMAT_SAVED_INPUT, REMAT_SAVED_OUTPUT, REMAT_SAVED_BUFFER };
typedef struct RematSaved {
    int value;         /* in the joint graph */
    int kind;          /* REMAT_SAVED_*: a block input, a block output or a saved buffer */
    int index;         /* which input, output or buffer (the forward's extra output index) */
    int64_t bytes;     /* counted against the budget (0 for a param) */
    int reader;        /* the joint node that needs it in the backward (a backward node, or a
                        * recomputed one); for the report */
    bool reader_recomputed;   /* reader is a forward node the backward recomputes */
} RematSaved;
typedef struct RematPoint { int64_t bytes, flops; } RematPoint;
typedef struct RematPlan {
    IrGraph *fwd, *bwd;
    FC_VEC(RematSaved) saved;
    PassRemat mode;
    int64_t budget;
    int64_t saved_bytes, recompute_flops, forward_flops, backward_flops;
    int64_t floor_bytes;      /* the least bytes any choice saves */
    int nrecomputed;          /* forward nodes the backward computes again */
    FC_VEC(RematPoint) pareto; /* saved bytes against recomputed flops over the weight sweep
                                * and the chosen plan, sorted by bytes (ascending), dominated
                                * points dropped */
} RematPlan;
FcStatus pass_remat(const AdJoint *j, PassRemat mode, int64_t budget, RematPlan *out, FcErr *err);
void remat_plan_free(RematPlan *p);

/* The CPU that CPU-shaped schedules are made for: its budgets. runtime/cpu.c fills it from
 * the host (rt_cpu_host); zeros mean unknown and give the defaults of lower.c. */
typedef struct PassCpu {
    int64_t l1d_bytes;      /* data cache per core */
    int64_t l2_bytes;       /* per core */
    int64_t llc_bytes;      /* last level, shared */
    int vector_bytes;       /* widest SIMD register LLVM uses for the host: 16, 32 or 64 */
} PassCpu;

/* Options that reach the kernel plan. */
typedef struct PassOptions {
    bool fuse;              /* false: the eager plan of docs/cli.md's --no-fuse */
    bool strict_rounding;   /* round every intermediate to its dtype */
    bool train;             /* a training block's forward or backward: f8 values round wherever
                             * computed (lower.c, emit_fp8), also inside a fused kernel */
    int sm;                 /* target compute capability for budgets: 80, 86, 89, 90 */
    bool library_gemm;      /* f32/f64 matrix products as library calls (BLAS, cuBLASLt);
                             * else the generated tiled kernel */
    bool cpu;               /* CPU-shaped schedules (block sizes for the CPU backend); the
                             * GPU-shaped program also runs on the CPU, for testing */
    PassCpu host;           /* with cpu: the machine's caches and vector width */
} PassOptions;

/* libgemm.c: the 16-bit type (FC_BF16 or FC_F16) in which the library reads the operands of
 * product node mm, else -1. Where the GPU's library (cuBLASLt) makes the products
 * (library_gemm, not cpu), an f32 product both of whose operands are widening casts from
 * one 16-bit float type (what pass_library_products makes of a bf16/f16 product) reads the
 * casts' inputs: 16-bit operands, f32 accumulation and result, the same numbers as f32
 * operands (every bf16/f16 value is an f32 one; the products of two are exact in f32), half
 * the operand bytes and the tensor cores. fuse.c keeps such casts in the product's kernel and
 * lower.c hands the library their inputs (KirGemm.ab16). The CPU's BLAS has no 16-bit
 * product (OpenBLAS 0.3.21 lacks sbgemm), so there the operands stay f32. */
int pass_narrow_product(const IrGraph *g, const PassOptions *opt, int mm);

/* fuse.c: the grouping of nodes into kernels (eager: one group per source op; fused: the
 * greedy byte-saving merges described in fuse.c), and why each edge between groups is left.
 * group_of_node has g->nodes.len entries; group ids are node indices (representatives). */
typedef struct FuseEdge {
    int value;            /* the value crossing between kernels */
    int consumer;         /* the node reading it */
    const char *reason;   /* static text */
} FuseEdge;
typedef FC_VEC(FuseEdge) FuseEdges;
FcStatus pass_fuse(const IrGraph *g, const PassOptions *opt, int *group_of_node, FuseEdges *edges,
                   FcErr *err);

/* lower.c: turns each group of the decomposed graph (group_of_node from pass_fuse) into a
 * kernel with its schedule in the kernel IR, plus the buffer plan and the launch list.
 * node_kernel, if not NULL (g->nodes.len entries), receives the kernel that computes each
 * node (-1 for views and dead nodes), for reports. */
FcStatus pass_lower(const IrGraph *g, const PassOptions *opt, const int *group_of_node,
                    KirProgram **out, int *node_kernel, FcErr *err);

/* memplan.c: places a kernel program's temporaries in its workspace by liveness (two share
 * bytes only when no launch needs both live), so that workspace_bytes is the plan's peak.
 * Requires: a program from pass_lower. */
FcStatus pass_memplan(KirProgram *p, FcErr *err);

/* pipeline.c: the whole road from a source graph to a kernel program; the caller frees
 * *out with pass_result_free (also after a failure). */
typedef struct PassResult {
    IrGraph *graph;        /* after all graph passes (--emit ir) */
    KirProgram *prog;
    int *node_kernel;      /* [graph nodes] kernel computing each node, -1 for none */
    FuseEdges edges;       /* edges left between kernels, with reasons */
} PassResult;
FcStatus pass_pipeline(const IrGraph *src, const PassOptions *opt, PassResult *out, FcErr *err);
void pass_result_free(PassResult *r);
/* Training: decompose (softmax kept) -> dce -> autodiff -> decompose -> remat, leaving the
 * joint graph and the plan (its fwd and bwd graphs then go through pass_pipeline each). */
FcStatus pass_train(const IrGraph *src, PassRemat mode, int64_t budget, AdJoint *joint, RematPlan *plan,
                    FcErr *err);

/* report.c: --emit report, --emit roofline and --emit dot, from the decomposed graph and its
 * program. A target is one roofline: bandwidth and f32 peak (both > 0), with where each
 * figure comes from (static or caller-owned text, printed in the header and escaped in SVG). */
typedef struct PassTarget {
    const char *name;        /* "sm_90", "cpu" */
    double gbps;             /* memory bandwidth, GB/s */
    double gflops;           /* f32 peak, GFLOP/s */
    const char *gbps_src;    /* e.g. "datasheet, A100 80GB SXM", "measured: STREAM copy, 2 threads" */
    const char *gflops_src;  /* e.g. "datasheet", "measured: FMA loop (AVX-512), 2 threads" */
} PassTarget;
/* The table: per launch, bytes, flops, intensity, shared memory and the predicted time
 * max(bytes / bandwidth, flops / peak) on each of targets[0..ntargets), marked memory- or
 * compute-bound; then totals and the unfused edges. chosen: the --arch target (marked). */
FcStatus pass_report(const PassResult *r, const PassTarget *targets, int ntargets, int chosen,
                     StrBuf *out, FcErr *err);
/* An SVG roofline chart: log-log axes (flop/byte vs GFLOP/s), every target's roof, and one
 * point per launch at its intensity and attainable GFLOP/s on targets[chosen]. */
FcStatus pass_roofline_svg(const PassResult *r, const PassTarget *targets, int ntargets, int chosen,
                           StrBuf *out, FcErr *err);
FcStatus pass_dot(const PassResult *r, StrBuf *out, FcErr *err);
/* The training plan for --emit report: every saved value with its bytes, where it is held and
 * which backward op reads it; the count of recomputed ops; the Pareto points. */
FcStatus pass_report_remat(const AdJoint *j, const RematPlan *plan, StrBuf *out, FcErr *err);


#endif
