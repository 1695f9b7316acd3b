/* difftest.c: the random-graph differential tester (entry point main; the generator is gen.c).
 *
 * For each of --count graphs (seeded by --seed): generate a random .tf program (gen.c),
 * compile it fused and eager (fc_options_set_fuse), run both on FC_DEVICE_CPU and the
 * source graph on FC_DEVICE_REFERENCE with the same seeded inputs (fc_block_random_input,
 * the inputs `fusec run --random SEED` uses), outputs poisoned (NaN; 0x5A bytes for
 * integers and bools) before every run, and compare fused vs reference, eager vs reference
 * and fused vs eager with fc_tensor_compare against fc_block_check_tolerances (the
 * per-dtype rule widened by the rounding spread of 16/8-bit intermediates on these inputs,
 * docs/tolerances.md). Every --nvrtc-every'th graph is also compiled to PTX for sm_80 and
 * sm_90 through NVRTC (fc_block_emit; skipped where NVRTC is absent). Every --emu-every'th
 * graph that passed is also run as CUDA on the CPU emulation (emu_graphs: its fused, eager and
 * GPU-shaped AOT units, through the runner shared with test_cuda_emu, tests/cuda_emu/
 * emu_runner.c), after the CPU checks, the units of many graphs compiled together. With
 * --device cuda the fused and eager programs also run on a real GPU (cuda_check), compared as
 * the CPU's are; without a GPU difftest exits 77 (skipped).
 *
 * Each graph runs in a forked child (unless --no-fork), so a crash, a sanitizer report or a
 * hang (--timeout) is one failed graph, not a dead tester. A mismatch is first checked for
 * ill-conditioning: the reference runs two noisy variants of the program (dt_render_noisy:
 * rounding-level noise injected into every computed float value); if that moves the output by at
 * least 1/4 of the observed error, the graph is counted as ill-conditioned, not failed (the
 * generator keeps this rare: 3 of the 300 graphs of difftest_cpu). Any other failure (frontend error on a generated
 * program = generator bug, internal error, crash, run error, mismatch, NVRTC error, CUDA
 * emulation mismatch or error) is
 * minimized (delete statements, turn values into inputs, drop outputs and inputs, shrink
 * dims, while the same failure persists) and written as a .tf reproducer to --out (default
 * $FUSEC_DIFFTEST_OUT, else BUILD/difftest-failures), whose header says what failed, the
 * numbers, and the `fusec run` command that shows it.
 *
 * Training (--train: every graph; else every --train-every'th, default 10th): the generator makes
 * a program worth differentiating (gen.c), compiled with fc_options_set_train three ways: fused
 * with --remat auto, eager (--no-fuse) with --remat none, fused with --remat full. Each runs its
 * forward and fc_program_backward on the CPU with the same inputs and seeded output gradients
 * (fc_block_random_grad_output); the forward outputs are compared with the oracle's, every
 * gradient between the three programs within fc_block_check_grad_tolerances (the forward's rule
 * applied to the backward), and with the reference device's backward where it returns FC_OK
 * (FC_ERR_UNSUPPORTED: skipped, counted as "oracle backward unavailable"). Every
 * --budget-every'th training graph also sweeps --mem-budget from the floor to what --remat none
 * saves (budget_sweep). NVRTC compiles the backward's kernels too; the emulation runs the
 * AOT training unit, fused and eager, run as its forward then its backward (emu_add_train_block).
 *
 * --self-check perturbs one element of the fused result (a training check: of its first
 * gradient) before comparing: every graph must then fail and be minimized to a reproducer,
 * proving that the harness can fail; --self-check-emu does the same to the emulated fused unit's
 * result (a training program's backward unit).
 * SIGTERM or SIGINT (a time limit's `timeout`, a ^C) stops the run after the graphs in flight: the
 * checks the signal reached are dropped, not counted, and the summary covers the graphs finished
 * (a GPU session's run cut at its limit still says how it stood).
 * Exit status: 0 all graphs passed (ill-conditioned ones allowed), 1 a failure, 2 usage, 3 stopped
 * by a signal before the end with no failure among the graphs finished.
 */
#include "difftest.h"
#include "emu_runner.h"
#include "host.h"
#include "nvrtc.h"
#include "frontend.h"
#include "interp.h"
#include "passes.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef FUSEC_BINARY_DIR
#define FUSEC_BINARY_DIR "."
#endif
#ifndef FUSEC_SOURCE_DIR
#define FUSEC_SOURCE_DIR "."
#endif
#ifndef FUSEC_CXX
#define FUSEC_CXX "c++"
#endif
#define DT_EMU_DIR FUSEC_SOURCE_DIR "/tests/cuda_emu"
#define DT_EMU_PER_BATCH 6     /* units per C++ file, as test_cuda_emu */
#define DT_PROGRESS_S 60.0     /* seconds between progress lines (progress) */
#define DT_EMU_CHUNK 48        /* graphs emulated per runner (bounds memory on long runs) */

#if defined(__SANITIZE_ADDRESS__)
#define DT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DT_ASAN 1
#endif
#endif
#ifndef DT_ASAN
#define DT_ASAN 0
#endif
#if DT_ASAN
#include <sanitizer/lsan_interface.h>
#endif

/* ---- options ------------------------------------------------------------------------------- */
typedef struct Opts {
    uint64_t seed;
    int count;
    int first;             /* index of the first graph (--first: rerun graph G of a seed) */
    int nvrtc_every;       /* 0: never */
    int emu_every;         /* 0: never; else every K'th graph through the CUDA emulation */
    bool self_check_emu;   /* corrupt one element of every emulated fused result */
    int emu_min_checks;    /* minimization budget for an emulation failure (a C++ compile each) */
    const char *out;
    bool fork;
    bool minimize;
    bool self_check;
    bool verbose;
    int jobs;
    int timeout_s;
    int max_minimize;      /* failures minimized per run; the rest are written as generated */
    const char *replay;    /* run this .tf file instead of generated ones */
    uint64_t input_seed;
    bool print_only;
    bool verify_noisy;     /* only compile every graph's noisy variants (a check of gen.c) */
    bool train;            /* --train: every graph a training program, checked with its gradients */
    int train_every;       /* else every K'th graph (gi % K == K - 1) is one; 0: none */
    int budget_every;      /* the --mem-budget sweep on every K'th training graph; 0: none */
    DtGenConfig gen;
} Opts;

/* ---- one run: compile, run the programs, compare ---------------------------------------------- */
enum { DR_OK, DR_ILLCOND, DR_GENBUG, DR_COMPILE, DR_PROGRAM, DR_RUN, DR_MISMATCH, DR_NVRTC, DR_EMU_MISMATCH, DR_EMU_ERROR,
       DR_BUDGET, DR_CRASH, DR_TIMEOUT, DR_KERNEL, DR_STRICT, DR_NCLASS };
static const char *const cls_name[DR_NCLASS] = {"ok", "ill-conditioned", "generator bug (frontend rejected a generated program)",
                                               "compile error", "program (JIT) error", "run error", "mismatch", "NVRTC error",
                                               "CUDA emulation mismatch", "CUDA emulation error", "memory budget error", "crash",
                                               "timeout", "kernel over its bound (fc_program_check_kernels)",
                                               "--strict-rounding not the eager program's bits (--strict)"};

/* The programs of a check. A forward check runs the first three; a training check (--train) all
 * four, each block compiled with fc_options_set_train: fused with --remat auto, eager (--no-fuse)
 * with --remat none (as eager autograd saves), the reference (the fused block on
 * FC_DEVICE_REFERENCE), and fused with --remat full (only the inputs saved). */
enum { P_FUSED, P_EAGER, P_REF, P_FULL, NPROG };
/* --device cuda: also the fused and eager programs of the same blocks on the GPU */
enum { P_GFUSED = NPROG, P_GEAGER, NALL };
static const char *const who_name[NALL] = {"fused", "eager", "reference", "remat-full", "fused CUDA", "eager CUDA"};
static const char *const remat_of[NPROG] = {"auto", "none", "auto", "full"};

/* The comparisons, in the order they are made; Result.which of a mismatch is the index. Every
 * one is "two programs with each other" (fc_tensor_compare within the tolerance): forward
 * outputs within fc_block_check_tolerances, gradients within fc_block_check_grad_tolerances.
 * The relative error is over max |b| (two programs' outputs: or max |ref|, where larger); for
 * gradients of two CPU programs over max |eager's|: the
 * spread that widens the tolerance is measured from the every-op rounding, eager's meaning, and a
 * gradient summed from many terms can be much smaller in one meaning than in the other (an f8
 * adjoint summed over a broadcast: 0.74 eager, 0.10 remat-full; spread 0.865). */
typedef struct Pair { int a, b; bool grad; const char *name; } Pair;
enum { PAIR_BUDGET_OUT = 10, PAIR_BUDGET_GRAD = 11 };
static const Pair pairs[] = {
    {P_FUSED, P_REF, false, "fused CPU vs reference"},
    {P_EAGER, P_REF, false, "eager CPU vs reference"},
    {P_FUSED, P_EAGER, false, "fused CPU vs eager CPU"},
    {P_FULL, P_REF, false, "remat-full CPU vs reference"},
    {P_FUSED, P_REF, true, "gradients: fused CPU vs reference backward"},
    {P_EAGER, P_REF, true, "gradients: eager CPU vs reference backward"},
    {P_FULL, P_REF, true, "gradients: remat-full CPU vs reference backward"},
    {P_FUSED, P_EAGER, true, "gradients: fused CPU vs eager CPU"},
    {P_FUSED, P_FULL, true, "gradients: fused CPU vs remat-full CPU"},
    {P_EAGER, P_FULL, true, "gradients: eager CPU vs remat-full CPU"},
    {P_FUSED, P_REF, false, "fused CPU with --mem-budget vs reference"},
    {P_FUSED, P_FUSED, true, "gradients: fused CPU with --mem-budget vs fused CPU"},
    {P_GFUSED, P_REF, false, "fused CUDA vs reference"},
    {P_GEAGER, P_REF, false, "eager CUDA vs reference"},
    {P_GFUSED, P_GEAGER, false, "fused CUDA vs eager CUDA"},
    {P_GFUSED, P_REF, true, "gradients: fused CUDA vs reference backward"},
    {P_GEAGER, P_REF, true, "gradients: eager CUDA vs reference backward"},
    {P_GFUSED, P_GEAGER, true, "gradients: fused CUDA vs eager CUDA"},
};
static const int fwd_pairs[] = {0, 1, 2}, train_pairs[] = {0, 1, 3, 2, 4, 5, 6, 7, 8, 9};
static const int gpu_fwd_pairs[] = {12, 13, 14}, gpu_train_pairs[] = {12, 13, 14, 15, 16, 17};

typedef struct Result {
    int cls;
    int which;             /* compile/program/run: the program (P_*); mismatch: the pair */
    int status;            /* FcStatus, or the signal for a crash */
    int output;            /* mismatching output (a gradient: its input) */
    char out_name[64];
    char out_type[96];
    double rel, abs, tol, sens;
    double spread;         /* the output's rounding spread (fc_block_check_tolerances) */
    int64_t worst;         /* flat index of the worst element */
    double got, want;
    int nvrtc;             /* 0 not tried, 1 compiled, 2 skipped (NVRTC unavailable) */
    int emu;               /* 0 not tried, 1 emulated, 2 skipped (no C++ compiler) */
    int emu_units;         /* units emulated */
    bool train;            /* a training check */
    int grad_oracle;       /* training: 1 the reference backward compared, 2 unavailable (FC_ERR_UNSUPPORTED) */
    int budget_points;     /* training: --mem-budget points checked by the sweep */
    long long budget;      /* the --mem-budget of a failing budgeted program (-1 none) */
    char msg[3072];
} Result;

/* What one check does. */
typedef struct Check {
    bool train;            /* the training check */
    bool nvrtc;            /* also compile to PTX through NVRTC */
    bool sweep;            /* training: the --mem-budget sweep */
    bool self_check;       /* corrupt one fused result: the forward's output 0, or the first gradient */
    int grad_sens;         /* training: j + 1 measures only how much rounding noise moves the gradient
                            * of input j (into Result.sens; an emulated unit's mismatch), 0 checks */
} Check;

static bool is_float(FcDtype t) { return t <= FC_F8E5M2; }

/* Graph gi of a run: a training program (generated with DtGenConfig.train and checked with its
 * gradients), and what its check does. */
static bool is_train(const Opts *o, int gi) { return o->train || (o->train_every > 0 && gi % o->train_every == o->train_every - 1); }
static DtGenConfig gen_config(const Opts *o, int gi) {
    DtGenConfig c = o->gen;
    c.train = is_train(o, gi);
    return c;
}
/* The --mem-budget sweep runs on every --budget-every'th *training* graph: counted among the
 * training graphs (graph gi is training graph gi / train_every under --train-every), not by gi,
 * which under --train-every 10 is always odd and never a multiple of 4. */
static Check check_of(const Opts *o, int gi) {
    bool t = is_train(o, gi);
    int ti = o->train ? gi : gi / (o->train_every > 0 ? o->train_every : 1);
    return (Check){t, o->nvrtc_every > 0 && gi % o->nvrtc_every == 0, t && o->budget_every > 0 && ti % o->budget_every == 0,
                   o->self_check, 0};
}

static void poison(FcTensor *t, FcDtype dt, size_t nbytes) {
    void *buf = malloc(nbytes ? nbytes : 1);
    if (!buf) return;
    if (is_float(dt)) {
        int64_t n = (int64_t)(nbytes / fc_dtype_size(dt));
        for (int64_t i = 0; i < n; i++) rt_host_store(dt, buf, i, NAN);
    } else {
        memset(buf, 0x5A, nbytes);
    }
    fc_tensor_copy_from_host(t, buf, nbytes);
    free(buf);
}

static void *to_host(const FcTensor *t) {
    size_t n = fc_tensor_nbytes(t);
    void *b = malloc(n ? n : 1);
    if (b) fc_tensor_copy_to_host(t, b, n);
    return b;
}

/* the element with the largest difference (or the first non-finite disagreement) */
static void worst_element(FcDtype dt, const FcTensor *got, const FcTensor *ref, Result *r) {
    void *g = to_host(got), *f = to_host(ref);
    int64_t n = (int64_t)(fc_tensor_nbytes(got) / fc_dtype_size(dt));
    double best = -1;
    r->worst = 0;
    for (int64_t i = 0; g && f && i < n; i++) {
        double a = rt_host_load(dt, g, i), b = rt_host_load(dt, f, i);
        double d;
        if (isfinite(a) && isfinite(b)) d = fabs(a - b);
        else if ((isnan(a) && isnan(b)) || a == b) d = 0;
        else d = INFINITY;
        if (d > best) { best = d; r->worst = i; r->got = a; r->want = b; }
        if (isinf(d)) break;
    }
    free(g);
    free(f);
}

static void msgf(Result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void msgf(Result *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    size_t l = strlen(r->msg);
    vsnprintf(r->msg + l, sizeof r->msg - l, fmt, ap);
    va_end(ap);
}

/* r's out_name and out_type: output j, or (grad) the gradient of input j */
static void out_desc(FcBlock *b, int j, bool grad, Result *r) {
    FcTensorInfo ti;
    if ((grad ? fc_block_input_info(b, j, &ti) : fc_block_output_info(b, j, &ti)) != FC_OK) return;
    snprintf(r->out_name, sizeof r->out_name, "%s%s", grad ? "grad_" : "", ti.name ? ti.name : "?");
    size_t k = (size_t)snprintf(r->out_type, sizeof r->out_type, "%s[", fc_dtype_name(ti.dtype));
    for (int i = 0; i < ti.rank && k < sizeof r->out_type; i++)
        k += (size_t)snprintf(r->out_type + k, sizeof r->out_type - k, "%s%lld", i ? ", " : "", (long long)ti.dims[i]);
    if (k < sizeof r->out_type) snprintf(r->out_type + k, sizeof r->out_type - k, "]");
}

/* --precision (NULL: keep): every program of a run, its noisy variants and its emulated units are
 * compiled at it, and the reference runs the block as the library lowered it (pass_precision) */
static const char *g_precision;
static bool g_cuda;   /* --device cuda */
static bool g_strict; /* --strict: also the fused block with --strict-rounding, bit for bit against eager */
/* the emulated units of a graph: with --strict the fused unit with --strict-rounding too */
static unsigned emu_all_variants(void) { return EMU_ALL_VARIANTS | (g_strict ? 1u << EMU_V_STRICT : 0); }

/* Compiles src: fused (fuse 1; 2: fused with --strict-rounding) or eager (0), for arch (NULL:
 * the default), with training when remat is not NULL (that --remat mode; budget >= 0: that
 * --mem-budget). */
static FcStatus compile_opts(const char *src, int fuse, const char *arch, const char *remat, long long budget, FcBlock **b) {
    FcOptions *o = NULL;
    FcStatus s = fc_options_new(&o);
    if (s == FC_OK) s = fc_options_set_fuse(o, fuse != 0);
    if (s == FC_OK && fuse == 2) s = fc_options_set_strict_rounding(o, 1);
    if (s == FC_OK && g_precision) s = fc_options_set_precision(o, g_precision);
    if (s == FC_OK && arch) s = fc_options_set_arch(o, arch);
    if (s == FC_OK && remat) s = fc_options_set_train(o, 1);
    if (s == FC_OK && remat) s = fc_options_set_remat(o, remat);
    if (s == FC_OK && budget >= 0) s = fc_options_set_mem_budget(o, budget);
    if (s == FC_OK) s = fc_compile_string(src, "difftest.tf", o, b);
    fc_options_free(o);
    return s;
}
static FcStatus compile(const char *src, int fuse, const char *arch, FcBlock **b) {
    return compile_opts(src, fuse, arch, NULL, -1, b);
}

typedef struct Run {
    const char *src;       /* the program's text */
    bool train;
    int nprog;             /* 3, or NPROG for a training check */
    FcBlock *blk[NPROG];   /* the reference runs blk[P_FUSED] */
    FcDevice *cpu, *ref, *gpu;
    FcProgram *prog[NALL];
    int nin, nout;
    FcTensor **in, **out[NALL], **tmp;
    FcTensor **gout;       /* training: [nout] the outputs' gradients, NULL for an output that is not a float */
    FcTensor **gin[NALL];  /* training: [nin] the inputs' gradients, NULL for an input that is not a float */
    FcTensor **gpu_in, **gpu_gout;   /* --device cuda: copies of in and gout on the GPU */
    bool ref_bwd;          /* the reference backward ran: gin[P_REF] holds its gradients */
    double *tol, *spread;  /* [nout] */
    double *gtol, *gspread;/* [nin] */
    double *fp8_scale;     /* [nfp8] --precision f8: the blocks' calibrated scales, which the oracle's
                            * noisy runs (on graphs made afresh) take too */
    int nfp8;
} Run;

/* --precision f8: a graph made afresh (emu_unit_graph) rounds with scales 1; the oracle's runs
 * compared with a program's take the scales that program's block calibrated */
static void use_scales(IrGraph *g, const double *sc, int n) {
    for (int k = 0; k < n && k < g->fp8.len; k++) g->fp8.data[k].scale = sc[k];
}

static void free_tensors(FcTensor **t, int n) {
    for (int i = 0; t && i < n; i++) fc_tensor_free(t[i]);
    free(t);
}

static void run_free(Run *u) {
    for (int k = 0; k < NALL; k++) {
        free_tensors(u->out[k], u->nout);
        free_tensors(u->gin[k], u->nin);
        fc_program_free(u->prog[k]);
        if (k < NPROG) fc_block_free(u->blk[k]);
    }
    free_tensors(u->in, u->nin);
    free_tensors(u->gpu_in, u->nin);
    free_tensors(u->gpu_gout, u->nout);
    free_tensors(u->tmp, u->nout);
    free_tensors(u->gout, u->nout);
    free(u->tol);
    free(u->spread);
    free(u->gtol);
    free(u->gspread);
    free(u->fp8_scale);
    fc_device_free(u->cpu);
    fc_device_free(u->ref);
    fc_device_free(u->gpu);
}

/* [n] tensors on d of b's outputs (outputs) or of its float inputs' gradients (NULL for the
 * others); NULL if one cannot be made. */
static FcTensor **new_tensors(FcDevice *d, FcBlock *b, bool outputs) {
    int n = outputs ? fc_block_num_outputs(b) : fc_block_num_inputs(b);
    FcTensor **t = calloc((size_t)n + 1, sizeof *t);
    for (int i = 0; t && i < n; i++) {
        FcTensorInfo ti;
        if ((outputs ? fc_block_output_info(b, i, &ti) : fc_block_input_info(b, i, &ti)) != FC_OK) goto fail;
        if (!outputs && !is_float(ti.dtype)) continue;
        if (fc_tensor_new(d, ti.dtype, ti.rank, ti.dims, &t[i]) != FC_OK) goto fail;
    }
    return t;
fail:
    free_tensors(t, n);
    return NULL;
}

/* Poisons t[0..n) (outputs, or the gradients of b's inputs): NaN, 0x5A bytes for integers and bools. */
static void poison_set(FcBlock *b, FcTensor **t, bool outputs) {
    int n = outputs ? fc_block_num_outputs(b) : fc_block_num_inputs(b);
    for (int i = 0; t && i < n; i++) {
        FcTensorInfo ti;
        if (t[i] && (outputs ? fc_block_output_info(b, i, &ti) : fc_block_input_info(b, i, &ti)) == FC_OK)
            poison(t[i], ti.dtype, fc_tensor_nbytes(t[i]));
    }
}

/* Runs the forward of program k on the inputs `in` (outputs poisoned first), then for a training
 * check (grads) its backward from the outputs' gradients gout (gradients poisoned first) into gin.
 * Under loss scaling (the fused program at --precision f16, as `fusec run` scales) the gradients
 * are divided by the scale, in place. */
static FcStatus run_prog(Run *u, FcProgram *p, FcTensor *const *in, FcTensor *const *gout, FcTensor **out, FcTensor **gin,
                         bool grads) {
    poison_set(u->blk[P_FUSED], out, true);
    FcStatus s = fc_program_run(p, in, out);
    if (s != FC_OK || !grads) return s;
    poison_set(u->blk[P_FUSED], gin, false);
    if ((s = fc_program_backward(p, gout, gin)) != FC_OK) return s;
    double scale = 1;
    fc_program_loss_scale(p, &scale, NULL);
    for (int i = 0; scale != 1 && i < u->nin && s == FC_OK; i++)
        if (gin[i]) s = fc_tensor_convert(gin[i], gin[i], 1 / scale);
    return s;
}

/* The largest finite |value| of tensor t of dtype dt (an f8 tensor's values: q / scale). */
static double value_max_abs(FcDtype dt, const FcTensor *t) {
    double s = 1;
    if (fc_tensor_scale(t, &s) != FC_OK || !(s > 0)) s = 1;
    void *h = to_host(t);
    double m = 0;
    int64_t n = (int64_t)(fc_tensor_nbytes(t) / fc_dtype_size(dt));
    for (int64_t k = 0; h && k < n; k++) {
        double v = fabs(rt_host_load(dt, h, k)) / s;
        if (isfinite(v) && v > m) m = v;
    }
    free(h);
    return m;
}

/* ... of t, the gradient of b's input i */
static double max_abs(FcBlock *b, int i, const FcTensor *t) {
    FcTensorInfo ti;
    fc_block_input_info(b, i, &ti);
    return value_max_abs(ti.dtype, t);
}

/* Host copies of the block's inputs, in[i] malloc'd (the caller frees them). */
static FcStatus inputs_to_host(const Run *u, void **in) {
    FcStatus st = FC_OK;
    for (int i = 0; i < u->nin && st == FC_OK; i++) {
        size_t nb = fc_tensor_nbytes(u->in[i]);
        if (!(in[i] = malloc(nb ? nb : 1))) st = FC_ERR_NOMEM;
        else st = fc_tensor_copy_to_host(u->in[i], in[i], nb);
    }
    return st;
}

/* The relative change of output j when the reference interpreter runs the program's
 * *decomposed* graph with rounding-level noise on every computing node (rt_interp_run_noisy):
 * the composites' inner steps (a layernorm's mean, a log_softmax's log of a sum near 1), which
 * the noisy texts cannot reach (their noise is per statement). in: the block's inputs on the
 * host (nin of them, at least the graph's); tmp and want: tensors of output j's type, want the
 * reference's value. NAN when it cannot be run. */
static double inner_sens(const char *src, bool train, const double *sc, int nsc, void *const *in, int nin, int j,
                         FcTensor *tmp, const FcTensor *want, uint64_t seed) {
    IrGraph *g = NULL, *dg = NULL;
    FcErr err = {0};
    double a = NAN, rel = NAN;
    void **out = NULL;
    FcStatus st = emu_unit_graph(src, "difftest.tf", &(FeOptions){0}, train, &g, &err);
    if (st == FC_OK) use_scales(g, sc, nsc);
    if (st == FC_OK) st = pass_decompose(g, &dg, &err);
    if (st == FC_OK && (dg->inputs.len > nin || j >= dg->outputs.len)) st = FC_ERR_INTERNAL;
    size_t nout = st == FC_OK ? dg->outputs.len : 0;
    if (st == FC_OK && !(out = calloc(nout + 1, sizeof *out))) st = FC_ERR_NOMEM;
    for (size_t k = 0; k < nout && st == FC_OK; k++) {
        const IrValue *v = ir_cval(dg, dg->outputs.data[k]);
        int64_t m = 1;
        ir_shape_numel(&v->shape, &m);
        size_t nb = (size_t)(m ? m : 1) * 8;   /* room for any dtype */
        if (!(out[k] = malloc(nb))) st = FC_ERR_NOMEM;
    }
    if (st == FC_OK) st = rt_interp_run_noisy(dg, (const void *const *)in, out, seed, &err);
    if (st == FC_OK) st = fc_tensor_copy_from_host(tmp, out[j], fc_tensor_nbytes(tmp));
    double ws = 1;   /* an f8 output at the interface: stored with the reference's scale (the same slots' sc) */
    if (st == FC_OK && fc_tensor_scale(want, &ws) == FC_OK && ws != 1) st = fc_tensor_set_scale(tmp, ws);
    if (st == FC_OK) fc_tensor_compare(tmp, want, &a, &rel);
    for (size_t k = 0; out && k < nout; k++) free(out[k]);
    free(out);
    ir_graph_free(dg);
    ir_graph_free(g);
    return st == FC_OK ? rel : NAN;
}

static double inner_sensitivity(Run *u, int j, uint64_t seed) {
    void **in = calloc((size_t)u->nin + 1, sizeof *in);
    FcStatus st = in ? inputs_to_host(u, in) : FC_ERR_NOMEM;
    double rel = st == FC_OK ? inner_sens(u->src, u->train, u->fp8_scale, u->nfp8, in, u->nin, j, u->tmp[j], u->out[P_REF][j], seed) : NAN;
    for (int i = 0; in && i < u->nin; i++) free(in[i]);
    free(in);
    return rel;
}

/* The relative change of input j's gradient when the oracle's backward runs with rounding-level
 * noise on every value's gradient (rt_interp_grad_noisy): what keeping a gradient in its
 * value's dtype (an f8 value's gradient in f8) may do, which the forward's noise cannot. NAN
 * when it cannot be run. */
static double grad_noise_sensitivity(Run *u, int j, uint64_t seed) {
    IrGraph *g = NULL;
    FcErr err = {0};
    double a = NAN, rel = NAN;
    FcTensor *t = NULL;
    void **in = calloc((size_t)u->nin + 1, sizeof *in);
    double **gout = calloc((size_t)u->nout + 1, sizeof *gout), **gin = calloc((size_t)u->nin + 1, sizeof *gin);
    void *host = NULL;
    FcStatus st = in && gout && gin ? emu_unit_graph(u->src, "difftest.tf", &(FeOptions){0}, true, &g, &err) : FC_ERR_NOMEM;
    if (st == FC_OK) use_scales(g, u->fp8_scale, u->nfp8);
    if (st == FC_OK && (g->inputs.len != u->nin || g->outputs.len != u->nout || !u->gin[P_REF] || !u->gin[P_REF][j]))
        st = FC_ERR_INTERNAL;
    if (st == FC_OK) st = inputs_to_host(u, in);
    for (int k = 0; k < u->nout && st == FC_OK; k++) {
        if (!u->gout || !u->gout[k]) continue;
        const IrValue *v = ir_cval(g, g->outputs.data[k]);
        int64_t m = 1;
        ir_shape_numel(&v->shape, &m);
        size_t nb = fc_tensor_nbytes(u->gout[k]);
        void *b = malloc(nb ? nb : 1);
        if (!b || !(gout[k] = malloc(sizeof(double) * (size_t)(m ? m : 1)))) { free(b); st = FC_ERR_NOMEM; break; }
        st = fc_tensor_copy_to_host(u->gout[k], b, nb);
        for (int64_t e = 0; st == FC_OK && e < m; e++) gout[k][e] = rt_host_load(v->dtype, b, e);
        free(b);
    }
    const IrValue *x = st == FC_OK ? ir_cval(g, g->inputs.data[j]) : NULL;
    int64_t mx = 1;
    if (x) ir_shape_numel(&x->shape, &mx);
    if (st == FC_OK && !(gin[j] = malloc(sizeof(double) * (size_t)(mx ? mx : 1)))) st = FC_ERR_NOMEM;
    if (st == FC_OK)
        st = rt_interp_grad_noisy(g, (const void *const *)in, NULL, (const double *const *)gout, gin, seed, &err);
    size_t nbx = st == FC_OK ? fc_tensor_nbytes(u->gin[P_REF][j]) : 0;
    if (st == FC_OK && !(host = malloc(nbx ? nbx : 1))) st = FC_ERR_NOMEM;
    for (int64_t e = 0; st == FC_OK && e < mx; e++) rt_host_store(x->dtype, host, e, gin[j][e]);
    if (st == FC_OK) {
        FcTensorInfo ti;
        fc_block_input_info(u->blk[P_FUSED], j, &ti);
        st = fc_tensor_new(u->ref, ti.dtype, ti.rank, ti.dims, &t);
    }
    if (st == FC_OK) st = fc_tensor_copy_from_host(t, host, nbx);
    if (st == FC_OK) fc_tensor_compare(t, u->gin[P_REF][j], &a, &rel);
    fc_tensor_free(t);
    free(host);
    for (int i = 0; in && i < u->nin; i++) free(in[i]);
    for (int k = 0; gout && k < u->nout; k++) free(gout[k]);
    for (int i = 0; gin && i < u->nin; i++) free(gin[i]);
    free(in);
    free(gout);
    free(gin);
    ir_graph_free(g);
    return st == FC_OK ? rel : NAN;
}

/* How much rounding noise alone moves output j (grad: the gradient of input j): the largest
 * relative change over the noisy variants of the program (dt_render_noisy: rounding-level noise
 * injected after every computed float value). An output through the oracle; a gradient through
 * the reference backward where it ran, else through the eager CPU program (--remat none), whose
 * own rounding then counts too. NAN when no noisy variant is available or one does not compile
 * (the conditioning is then unknown). */
static double sensitivity(Run *u, bool grad, int j, const char *const *noisy) {
    double worst = 0;
    int base = !grad || u->ref_bwd ? P_REF : P_EAGER;
    for (int trial = 0; trial < 2; trial++) {
        if (!noisy || !noisy[trial]) break;   /* a replayed file has no noisy texts */
        FcBlock *b = NULL;
        FcProgram *pr = NULL;
        FcTensor **gin = NULL, **out = NULL, **seeds = NULL;
        FcDevice *dev = base == P_REF ? u->ref : u->cpu;
        FcStatus st = grad ? compile_opts(noisy[trial], base != P_EAGER, NULL, remat_of[base], -1, &b) : compile(noisy[trial], 1, NULL, &b);
        if (st == FC_OK && fc_block_num_fp8_slots(b) > 0) st = fc_block_calibrate_fp8(b, u->in);
        if (st == FC_OK) st = fc_program_new(b, dev, &pr);
        if (st == FC_OK && (fc_block_num_outputs(b) != u->nout || fc_block_num_inputs(b) != u->nin)) st = FC_ERR_INTERNAL;
        /* the noisy block's own outputs and seeds: noise on a kept-f32 value (a mean) makes it a
         * computed one, stored in the narrow type at --precision (converted back to compare) */
        if (st == FC_OK && !(out = new_tensors(dev, b, true))) st = FC_ERR_NOMEM;
        if (st == FC_OK && grad && (!(gin = new_tensors(dev, b, false)) || !(seeds = new_tensors(u->cpu, b, true)))) st = FC_ERR_NOMEM;
        for (int k = 0; st == FC_OK && seeds && k < u->nout; k++) {
            if (seeds[k] && u->gout[k]) st = fc_tensor_convert(seeds[k], u->gout[k], 1);
            else fc_tensor_free(seeds[k]), seeds[k] = NULL;   /* no gradient for this output */
        }
        if (st == FC_OK) {
            poison_set(b, out, true);
            st = fc_program_run(pr, u->in, out);
        }
        if (st == FC_OK && grad) {
            poison_set(b, gin, false);
            st = fc_program_backward(pr, seeds, gin);
        }
        if (st == FC_OK && !grad) st = fc_tensor_convert(u->tmp[j], out[j], 1);
        double a = NAN, r = NAN;
        if (st == FC_OK) fc_tensor_compare(grad ? gin[j] : u->tmp[j], grad ? u->gin[base][j] : u->out[P_REF][j], &a, &r);
        free_tensors(gin, u->nin);
        free_tensors(out, u->nout);
        free_tensors(seeds, u->nout);
        fc_program_free(pr);
        fc_block_free(b);
        if (st != FC_OK) return NAN;
        if (r > worst) worst = r;
    }
    /* the forward: also the composites' inner roundings (the reference device runs the source
     * graph, composites whole) */
    for (int trial = 0; !grad && trial < 2; trial++) {
        double r = inner_sensitivity(u, j, dt_mix(0xD1Bull + (uint64_t)trial));
        if (isnan(r)) return NAN;
        if (r > worst) worst = r;
    }
    /* a gradient: also the roundings of the gradients themselves (the oracle's backward with
     * noise), where the reference backward ran */
    if (grad && !u->ref_bwd) return noisy && noisy[0] ? worst : NAN;
    for (int trial = 0; grad && trial < RT_GRAD_NOISE_TRIALS; trial++) {
        double r = grad_noise_sensitivity(u, j, dt_mix(0x6AD1ull + (uint64_t)trial));
        if (isnan(r)) return NAN;
        if (r > worst) worst = r;
    }
    return worst;
}

/* Compares ta[j] with tb[j] for every output j (a gradient pair: every float input's gradient)
 * within its tolerance (fc_block_check_tolerances, fc_block_check_grad_tolerances), as pair p says; on the first disagreement fills r (a mismatch, or
 * ill-conditioned when rounding noise explains it) and returns false. */
static bool compare_sets(Run *u, int p, FcTensor *const *ta, FcTensor *const *tb, const char *const *noisy, Result *r) {
    bool grad = pairs[p].grad;
    int n = grad ? u->nin : u->nout;
    const double *tols = grad ? u->gtol : u->tol, *spread = grad ? u->gspread : u->spread;
    for (int j = 0; j < n; j++) {
        if (!ta[j] || !tb[j]) continue;
        double tol = tols[j], ab = 0, rel = 0;
        fc_tensor_compare(ta[j], tb[j], &ab, &rel);
        /* two programs' gradients: relative to the eager one's largest magnitude (rel is inf
         * where the other's are all 0; a NaN or an infinity in either keeps compare's verdict) */
        if (grad && pairs[p].b != P_REF && isfinite(ab)) {
            FcTensorInfo gi;
            fc_block_input_info(u->blk[P_FUSED], j, &gi);
            double m = fmax(max_abs(u->blk[P_FUSED], j, u->gin[P_EAGER][j]), rt_host_min_normal(gi.dtype));
            rel = m > 0 ? ab / m : ab > 0 ? INFINITY : 0;
        }
        /* two programs' outputs: over max |b| or, where the reference's are larger, max |ref|, the
         * magnitude the tolerance and its spread are measured against (fused and eager both within
         * tol of the reference: fused -1.5e-4 and eager 0 where the reference has -0.0137, a rounding
         * residue, f8 seed 2026112820 graph 730, was 320 over max |eager| = 0) */
        if (!grad && pairs[p].b != P_REF && isfinite(rel) && rel > 0) {
            FcTensorInfo oi;
            fc_block_output_info(u->blk[P_FUSED], j, &oi);
            double mr = value_max_abs(oi.dtype, u->out[P_REF][j]);
            if (mr > ab / rel) rel = ab / mr;
        }
        if (rel <= tol) continue;
        FcTensorInfo ti;
        if (grad) fc_block_input_info(u->blk[P_FUSED], j, &ti);
        else fc_block_output_info(u->blk[P_FUSED], j, &ti);
        r->cls = DR_MISMATCH;
        r->which = p;
        r->output = j;
        r->rel = rel;
        r->abs = ab;
        r->tol = tol;
        r->spread = spread[j];
        double base = 0;
        if (grad) fc_block_grad_tolerance(u->blk[P_FUSED], j, &base);
        else fc_block_output_tolerance(u->blk[P_FUSED], j, &base);
        out_desc(u->blk[P_FUSED], j, grad, r);
        worst_element(ti.dtype, ta[j], tb[j], r);
        r->sens = sensitivity(u, grad, j, noisy);
        if (r->sens * 4 >= rel) r->cls = DR_ILLCOND;
        const char *wa = p == PAIR_BUDGET_OUT || p == PAIR_BUDGET_GRAD ? "budgeted" : who_name[pairs[p].a], *wb = who_name[pairs[p].b];
        msgf(r, "%s, %s %d '%s' %s: max_rel %.3g%s (tol %.3g = %.3g + 2 x rounding spread %.3g), max_abs %.3g; worst element [%lld]: %s %.9g, %s %.9g; %s change under rounding noise %.3g",
             pairs[p].name, grad ? "gradient of input" : "output", j, r->out_name, r->out_type, rel,
             grad && pairs[p].b != P_REF ? " (of max |eager|)" : "", tol, base, spread[j], ab,
             (long long)r->worst, wa, r->got, wb, r->want, grad && !u->ref_bwd ? "eager CPU" : "oracle", r->sens);
        return false;
    }
    return true;
}

/* The --mem-budget sweep of a training check (docs/difftest.md): the plans' invariants (the floor
 * is the same in every mode and below every plan's saved bytes); fused --remat auto with a budget
 * at points from the floor to what --remat none saves: each plan saves at most its budget, and
 * its outputs and gradients match (the reference's, the unbudgeted fused program's); a budget
 * below the floor is refused with FC_ERR_INPUT naming the floor. Fills r on a failure. */
static void budget_sweep(const char *src, Run *u, const char *const *noisy, Result *r) {
    FcTrainInfo ti[NPROG];
    static const int modes[3] = {P_FUSED, P_EAGER, P_FULL};
    for (int m = 0; m < 3; m++) {
        int k = modes[m];
        if (fc_block_train_info(u->blk[k], &ti[k]) != FC_OK) {
            r->cls = DR_BUDGET;
            msgf(r, "fc_block_train_info of the %s block: %s", who_name[k], fc_block_last_error(u->blk[k]));
            return;
        }
        if (ti[k].floor_bytes != ti[P_FUSED].floor_bytes || ti[k].floor_bytes > ti[k].saved_bytes) {
            r->cls = DR_BUDGET;
            msgf(r, "--remat %s saves %lld bytes, its floor is %lld; --remat auto's floor is %lld (the floor is the least any "
                 "choice saves, the same in every mode)", remat_of[k], (long long)ti[k].saved_bytes, (long long)ti[k].floor_bytes,
                 (long long)ti[P_FUSED].floor_bytes);
            return;
        }
    }
    long long lo = ti[P_FUSED].floor_bytes, hi = ti[P_EAGER].saved_bytes, pts[4];
    int np = 0;
    for (int i = 0; i < 4; i++) {
        long long b = lo + (hi - lo) * i / 3;
        if (np == 0 || b != pts[np - 1]) pts[np++] = b;
    }
    FcTensor **out = new_tensors(u->cpu, u->blk[P_FUSED], true), **gin = new_tensors(u->cpu, u->blk[P_FUSED], false);
    for (int i = 0; i < np && r->cls == DR_OK && out && gin; i++) {
        FcBlock *b = NULL;
        FcProgram *pr = NULL;
        FcTrainInfo bi;
        r->budget = pts[i];
        FcStatus s = compile_opts(src, 1, NULL, "auto", pts[i], &b);
        if (s == FC_OK) s = fc_block_train_info(b, &bi);
        /* f8: scaled as the programs it is compared with (run_one) */
        if (s == FC_OK && fc_block_num_fp8_slots(b) > 0) s = fc_block_calibrate_fp8(b, u->in);
        if (s != FC_OK) {
            r->cls = DR_BUDGET;
            r->status = s;
            msgf(r, "--mem-budget %lld (the floor %lld, --remat none saves %lld): %s: %s", pts[i], lo, hi, fc_status_name(s),
                 b ? fc_block_last_error(b) : "");
        } else if (bi.saved_bytes > pts[i]) {
            r->cls = DR_BUDGET;
            msgf(r, "--mem-budget %lld (the floor %lld, --remat none saves %lld): the plan saves %lld bytes", pts[i], lo, hi,
                 (long long)bi.saved_bytes);
        } else if ((s = fc_program_new(b, u->cpu, &pr)) != FC_OK || (s = run_prog(u, pr, u->in, u->gout, out, gin, true)) != FC_OK) {
            r->cls = DR_RUN;
            r->which = P_FUSED;
            r->status = s;
            msgf(r, "fused --mem-budget %lld: %s: %s", pts[i], fc_status_name(s), pr ? fc_program_last_error(pr) : fc_block_last_error(b));
        } else if (compare_sets(u, PAIR_BUDGET_OUT, out, u->out[P_REF], noisy, r) &&
                   compare_sets(u, PAIR_BUDGET_GRAD, gin, u->gin[P_FUSED], noisy, r)) {
            r->budget_points++;
            r->budget = -1;
        } else {
            msgf(r, " (--mem-budget %lld: the plan saves %lld bytes; the floor %lld, --remat none saves %lld)", pts[i],
                 (long long)bi.saved_bytes, lo, hi);
        }
        fc_program_free(pr);
        fc_block_free(b);
    }
    free_tensors(out, u->nout);
    free_tensors(gin, u->nin);
    if (r->cls != DR_OK || lo == 0) return;
    /* a budget below the floor: refused, naming the floor */
    FcBlock *b = NULL;
    r->budget = lo - 1;
    FcStatus s = compile_opts(src, 1, NULL, "auto", lo - 1, &b);
    char floor_txt[32];
    snprintf(floor_txt, sizeof floor_txt, "%lld", lo);
    if (s != FC_ERR_INPUT || !strstr(fc_block_last_error(b), floor_txt)) {
        r->cls = DR_BUDGET;
        r->status = s;
        msgf(r, "--mem-budget %lld, below the floor %lld: expected an input error naming the floor, got %s: %s", lo - 1, lo,
             fc_status_name(s), b ? fc_block_last_error(b) : "");
    } else {
        r->budget = -1;
    }
    fc_block_free(b);
}

/* The per-kernel check of the fused program (fc_program_check_kernels): every value a kernel
 * leaves in memory within the bound it would have as an output. The outputs passed, so a kernel
 * over its bound is a wrong intermediate that the outputs did not show (masked by a later op),
 * or an intermediate worse conditioned than the outputs. */
typedef struct KernelCtx { Result *r; int which; } KernelCtx;
static int kernel_cb(const FcKernelCheck *k, void *ctx) {
    KernelCtx *kc = ctx;
    Result *r = kc->r;
    if (k->ok) return 0;
    r->cls = DR_KERNEL;
    r->which = kc->which;
    r->rel = k->max_rel_err;
    r->tol = k->tol;
    msgf(r, "%s %skernel %s (%s): %s%s%s at %d:%d: max_rel_err=%.3g tol=%.3g", who_name[kc->which], k->backward ? "backward " : "", k->kernel,
         k->ops, k->op, strcmp(k->op, k->source_op) ? " of " : "", strcmp(k->op, k->source_op) ? k->source_op : "", k->line,
         k->col, k->max_rel_err, k->tol);
    return 1;
}
static void check_kernels(Run *u, int k, FcTensor *const *in, FcTensor *const *gout, bool train, Result *r) {
    poison_set(u->blk[P_FUSED], u->out[k], true);
    if (train) poison_set(u->blk[P_FUSED], u->gin[k], false);
    KernelCtx kc = {r, k};
    FcStatus s = fc_program_check_kernels(u->prog[k], in, u->out[k], train ? gout : NULL, train ? u->gin[k] : NULL, kernel_cb,
                                          &kc, NULL);
    if (s != FC_OK && r->cls == DR_OK) {
        r->cls = DR_RUN;
        r->which = k;
        r->status = s;
        msgf(r, "%s per-kernel check: %s: %s", who_name[k], fc_status_name(s), fc_program_last_error(u->prog[k]));
    }
}

/* Compares the pairs pl[0..npl) in order (pairs[], compare_sets) until one fails; a gradient
 * pair with the reference is skipped where the reference backward did not run. */
static void compare_pairs(Run *u, const int *pl, int npl, const char *const *noisy, Result *r) {
    for (int i = 0; i < npl && r->cls == DR_OK; i++) {
        const Pair *p = &pairs[pl[i]];
        if (p->grad && p->b == P_REF && !u->ref_bwd) continue;
        compare_sets(u, pl[i], p->grad ? u->gin[p->a] : u->out[p->a], p->grad ? u->gin[p->b] : u->out[p->b], noisy, r);
    }
}

/* f16 training as `fusec run` does it: a fused program with dynamic loss scaling (a program that
 * does not support it runs without) */
static FcStatus f16_loss_scaling(FcProgram *p, bool train) {
    if (!train || !g_precision || strcmp(g_precision, "f16") != 0) return FC_OK;
    FcStatus s = fc_program_set_loss_scaling(p, 65536, 0);
    return s == FC_ERR_UNSUPPORTED ? FC_OK : s;
}

/* Copies on device d of src, b's inputs (outputs: the outputs' gradients; NULL stays NULL): the
 * same bytes and f8 scales. */
static FcTensor **copy_tensors(FcDevice *d, FcBlock *b, FcTensor *const *src, bool outputs) {
    int n = outputs ? fc_block_num_outputs(b) : fc_block_num_inputs(b);
    FcTensor **t = calloc((size_t)n + 1, sizeof *t);
    for (int i = 0; t && i < n; i++) {
        if (!src[i]) continue;
        FcTensorInfo ti;
        double sc = 1;
        void *h = NULL;
        FcStatus s = outputs ? fc_block_output_info(b, i, &ti) : fc_block_input_info(b, i, &ti);
        if (s == FC_OK) s = fc_tensor_new(d, ti.dtype, ti.rank, ti.dims, &t[i]);
        if (s == FC_OK && !(h = to_host(src[i]))) s = FC_ERR_NOMEM;
        if (s == FC_OK) s = fc_tensor_copy_from_host(t[i], h, fc_tensor_nbytes(src[i]));
        if (s == FC_OK && (s = fc_tensor_scale(src[i], &sc)) == FC_OK && sc != 1) s = fc_tensor_set_scale(t[i], sc);
        free(h);
        if (s != FC_OK) {
            free_tensors(t, n);
            return NULL;
        }
    }
    return t;
}

/* --self-check: corrupts one element of program k's results (the forward's output 0, or for a
 * training check the first gradient): the harness must see it. A float result's element of the
 * largest magnitude is negated (exact in every float type, an error of twice the result's
 * largest magnitude, over any tolerance; 1 where all are 0): adding 1 + |v| / 2 to its middle
 * element, as before, hid under an f8 gradient's tolerance of 0.26 relative (seed 7, graph 1
 * once the generator made more attentions). */
static void corrupt_set(FcBlock *b0, FcTensor **out, FcTensor **gin, bool train, int nin) {
    FcTensor *t = out[0];
    FcTensorInfo ti;
    fc_block_output_info(b0, 0, &ti);
    for (int i = 0; train && i < nin; i++)
        if (gin[i]) {
            t = gin[i];
            fc_block_input_info(b0, i, &ti);
            break;
        }
    void *h = to_host(t);
    int64_t n = (int64_t)(fc_tensor_nbytes(t) / fc_dtype_size(ti.dtype));
    if (h && n > 0) {
        bool fl = is_float(ti.dtype);
        int64_t i = n / 2;
        double best = fabs(rt_host_load(ti.dtype, h, i));
        for (int64_t e = 0; fl && e < n; e++) {
            double a = fabs(rt_host_load(ti.dtype, h, e));
            if (isfinite(a) && (!isfinite(best) || a > best)) {
                i = e;
                best = a;
            }
        }
        double v = rt_host_load(ti.dtype, h, i);
        rt_host_store(ti.dtype, h, i, ti.dtype == FC_BOOL ? (v == 0) : !fl ? -v - 1 : isfinite(v) && v != 0 ? -v : 1.0);
        fc_tensor_copy_from_host(t, h, fc_tensor_nbytes(t));
    }
    free(h);
}
static void corrupt(Run *u, int k) { corrupt_set(u->blk[P_FUSED], u->out[k], u->gin[k], u->train, u->nin); }

/* --device cuda: the fused and eager programs of the same blocks (so with the same f8 scales) on
 * the GPU, on copies of the same inputs (and outputs' gradients), compared with the reference
 * (and its backward) and with each other as the CPU's programs are, then the fused program's
 * per-kernel check on the GPU. Fills r on a failure. */
static void cuda_check(Run *u, const Check *c, const char *const *noisy, Result *r) {
    FcStatus s = fc_device_open(FC_DEVICE_CUDA, 0, &u->gpu);
    if (s != FC_OK) {
        r->cls = DR_PROGRAM;
        r->which = P_GFUSED;
        r->status = s;
        msgf(r, "CUDA device: %s: %s", fc_status_name(s), fc_device_last_error(u->gpu));
        return;
    }
    if (!(u->gpu_in = copy_tensors(u->gpu, u->blk[P_FUSED], u->in, false)) ||
        (c->train && !(u->gpu_gout = copy_tensors(u->gpu, u->blk[P_FUSED], u->gout, true)))) {
        r->cls = DR_RUN;
        r->which = P_GFUSED;
        msgf(r, "the inputs' copies on the GPU could not be made");
        return;
    }
    for (int k = P_GFUSED; k <= P_GEAGER; k++) {
        const char *step = "program";
        int from = k == P_GFUSED ? P_FUSED : P_EAGER;
        s = fc_program_new(u->blk[from], u->gpu, &u->prog[k]);
        if (s == FC_OK && (!(u->out[k] = new_tensors(u->gpu, u->blk[from], true)) ||
                           (c->train && !(u->gin[k] = new_tensors(u->gpu, u->blk[from], false)))))
            s = FC_ERR_NOMEM;
        if (s == FC_OK && k == P_GFUSED) s = f16_loss_scaling(u->prog[k], c->train);
        if (s == FC_OK) {
            step = "run";
            s = run_prog(u, u->prog[k], u->gpu_in, u->gpu_gout, u->out[k], u->gin[k], c->train);
        }
        if (s != FC_OK) {
            r->cls = step[0] == 'p' ? DR_PROGRAM : DR_RUN;
            r->which = k;
            r->status = s;
            msgf(r, "%s %s%s: %s: %s", who_name[k], step, c->train ? " (forward and backward)" : "", fc_status_name(s),
                 u->prog[k] ? fc_program_last_error(u->prog[k]) : fc_block_last_error(u->blk[from]));
            return;
        }
    }
    if (c->self_check) corrupt(u, P_GFUSED);
    if (c->train) compare_pairs(u, gpu_train_pairs, (int)(sizeof gpu_train_pairs / sizeof gpu_train_pairs[0]), noisy, r);
    else compare_pairs(u, gpu_fwd_pairs, (int)(sizeof gpu_fwd_pairs / sizeof gpu_fwd_pairs[0]), noisy, r);
    if (!c->self_check && r->cls == DR_OK) check_kernels(u, P_GFUSED, u->gpu_in, u->gpu_gout, c->train, r);
}

/* --strict (at a --precision): the fused block compiled with --strict-rounding (with --train:
 * --remat none, eager's: what a training program saves between its forward and its backward is
 * stored, so rounded, and the split is the --remat mode's), calibrated and run on the same
 * inputs (and output gradients), must give the eager program's outputs and gradients bit for
 * bit (docs/precision.md; NaN for NaN) and, at f8, with the same scales. */
static void strict_check(Run *u, const Check *c, Result *r) {
    FcBlock *b = NULL;
    FcProgram *p = NULL;
    FcTensor **out = NULL, **gin = NULL;
    FcStatus s = compile_opts(u->src, 2, NULL, c->train ? remat_of[P_EAGER] : NULL, -1, &b);
    const char *what = "compile";
    if (s == FC_OK && fc_block_num_fp8_slots(b) > 0) {
        what = "f8 calibration";
        s = c->train ? fc_block_calibrate_fp8_grads(b, u->in, u->gout) : fc_block_calibrate_fp8(b, u->in);
    }
    if (s == FC_OK) { what = "program"; s = fc_program_new(b, u->cpu, &p); }
    if (s == FC_OK) {
        what = "run";
        out = new_tensors(u->cpu, b, true);
        gin = c->train ? new_tensors(u->cpu, b, false) : NULL;
        s = out && (!c->train || gin) ? run_prog(u, p, u->in, u->gout, out, gin, c->train) : FC_ERR_NOMEM;
        /* --strict --self-check: this result, not the fused one, corrupted (the harness must see it) */
        if (s == FC_OK && c->self_check) corrupt_set(b, out, gin, c->train, u->nin);
    }
    if (s != FC_OK) {
        r->cls = DR_STRICT;
        r->which = P_FUSED;
        r->status = s;
        msgf(r, "the fused block with --strict-rounding: %s: %s: %s", what, fc_status_name(s),
             p ? fc_program_last_error(p) : b ? fc_block_last_error(b) : "");
        goto done;
    }
    for (int k = 0; k < (c->train ? 2 : 1) && r->cls == DR_OK; k++) {
        int n = k ? u->nin : u->nout;
        FcTensor **mine = k ? gin : out, **eager = k ? u->gin[P_EAGER] : u->out[P_EAGER];
        for (int j = 0; j < n && r->cls == DR_OK; j++) {
            if (!mine[j] || !eager[j]) continue;
            FcTensorInfo ti;
            if (k) fc_block_input_info(b, j, &ti);
            else fc_block_output_info(b, j, &ti);
            double sa = 1, sb = 1;
            fc_tensor_scale(mine[j], &sa);
            fc_tensor_scale(eager[j], &sb);
            unsigned char *ha = to_host(mine[j]), *hb = to_host(eager[j]);
            size_t ne = fc_tensor_nbytes(mine[j]) / fc_dtype_size(ti.dtype), bad = 0, first = 0;
            for (size_t i = 0; ha && hb && i < ne; i++)
                if (!emu_same_element(ti.dtype, ha, hb, i) && bad++ == 0) first = i;
            if (bad || sa != sb || !ha || !hb) {
                r->cls = DR_STRICT;
                r->which = P_FUSED;
                r->output = j;
                uint64_t x = 0, y = 0;
                size_t es = fc_dtype_size(ti.dtype);
                if (ha && hb && bad) { memcpy(&x, ha + first * es, es); memcpy(&y, hb + first * es, es); }
                msgf(r, "%s%s %s[%zu elements]: %zu element(s) differ, the first [%zu]: 0x%llx with --strict-rounding, "
                        "0x%llx eager; scales %g and %g",
                     k ? "gradient of input " : "output ", ti.name ? ti.name : "?", fc_dtype_name(ti.dtype), ne, bad, first,
                     (unsigned long long)x, (unsigned long long)y, sa, sb);
                snprintf(r->out_name, sizeof r->out_name, "%s%s", k ? "grad_" : "", ti.name ? ti.name : "?");
            }
            free(ha);
            free(hb);
        }
    }
done:
    if (out) free_tensors(out, fc_block_num_outputs(b));
    if (gin) free_tensors(gin, fc_block_num_inputs(b));
    fc_program_free(p);
    fc_block_free(b);
}

/* The whole check of one program; fills *r. */
static void check_program(const char *src, const char *const *noisy, uint64_t in_seed, const Check *c, Result *r) {
    memset(r, 0, sizeof *r);
    r->train = c->train;
    r->budget = -1;
    Run u = {.src = src, .train = c->train, .nprog = c->train ? NPROG : 3};
    FcStatus s;
    for (int k = 0; k < u.nprog; k++) {
        if (k == P_REF) continue;
        s = compile_opts(src, k != P_EAGER, NULL, c->train ? remat_of[k] : NULL, -1, &u.blk[k]);
        if (s != FC_OK) {
            const char *diag = u.blk[k] ? fc_block_diagnostics(u.blk[k]) : "";
            r->cls = s == FC_ERR_INPUT && diag[0] ? DR_GENBUG : DR_COMPILE;
            r->which = k;
            r->status = s;
            msgf(r, "%s compile%s: %s: %s%s%s", who_name[k], c->train ? " (training)" : "", fc_status_name(s),
                 u.blk[k] ? fc_block_last_error(u.blk[k]) : "", diag[0] ? "\n" : "", diag);
            goto done;
        }
    }
    if ((s = fc_device_open(FC_DEVICE_CPU, 0, &u.cpu)) != FC_OK || (s = fc_device_open(FC_DEVICE_REFERENCE, 0, &u.ref)) != FC_OK) {
        r->cls = DR_PROGRAM;
        r->status = s;
        msgf(r, "device: %s", fc_device_last_error(u.cpu ? u.cpu : u.ref));
        goto done;
    }
    FcBlock *b0 = u.blk[P_FUSED];
    u.nin = fc_block_num_inputs(b0);
    u.nout = fc_block_num_outputs(b0);
    u.in = calloc((size_t)u.nin + 1, sizeof *u.in);
    u.tmp = new_tensors(u.ref, b0, true);
    u.tol = calloc((size_t)u.nout + 1, sizeof *u.tol);
    u.spread = calloc((size_t)u.nout + 1, sizeof *u.spread);
    u.gtol = calloc((size_t)u.nin + 1, sizeof *u.gtol);
    u.gspread = calloc((size_t)u.nin + 1, sizeof *u.gspread);
    bool ok = u.in && u.tmp && u.tol && u.spread && u.gtol && u.gspread;
    for (int k = 0; k < u.nprog && ok; k++) {
        FcDevice *d = k == P_REF ? u.ref : u.cpu;
        ok = (u.out[k] = new_tensors(d, b0, true)) != NULL && (!c->train || (u.gin[k] = new_tensors(d, b0, false)) != NULL);
    }
    if (ok && c->train) ok = (u.gout = calloc((size_t)u.nout + 1, sizeof *u.gout)) != NULL;
    if (!ok) { r->cls = DR_RUN; msgf(r, "out of memory (or a tensor could not be made)"); goto done; }
    /* the inputs, and the outputs' gradients: seeded, as `fusec run [--train] --random SEED`
     * makes them */
    for (int i = 0; i < u.nin + (c->train ? u.nout : 0); i++) {
        bool g = i >= u.nin;
        int j = g ? i - u.nin : i;
        FcTensorInfo ti;
        if (g) fc_block_output_info(b0, j, &ti);
        else fc_block_input_info(b0, j, &ti);
        if (g && !is_float(ti.dtype)) continue;
        FcTensor **t = g ? &u.gout[j] : &u.in[j];
        if ((s = fc_tensor_new(u.cpu, ti.dtype, ti.rank, ti.dims, t)) != FC_OK ||
            (s = g ? fc_block_random_grad_output(b0, j, in_seed, *t) : fc_block_random_input(b0, j, in_seed, *t)) != FC_OK) {
            r->cls = DR_RUN;
            r->which = P_REF;
            r->status = s;
            msgf(r, "%s %d: %s", g ? "the gradient of output" : "input", j, fc_block_last_error(b0));
            goto done;
        }
    }
    /* --precision f8: every block scales as the reference interpreter would after one run on
     * these inputs (fc_block_calibrate_fp8); the programs made now start from those scales and
     * keep them in their one run, so fused, eager and the reference round alike */
    for (int k = 0; k < u.nprog && fc_block_num_fp8_slots(b0) > 0; k++)
        if (k != P_REF && (s = c->train ? fc_block_calibrate_fp8_grads(u.blk[k], u.in, u.gout)   /* the gradients' too */
                                         : fc_block_calibrate_fp8(u.blk[k], u.in)) != FC_OK) {
            r->cls = DR_RUN;
            r->which = k;
            r->status = s;
            msgf(r, "%s: f8 calibration: %s: %s", who_name[k], fc_status_name(s), fc_block_last_error(u.blk[k]));
            goto done;
        }
    for (int k = 0; k < u.nprog; k++) {
        FcBlock *b = u.blk[k == P_REF ? P_FUSED : k];
        s = fc_program_new(b, k == P_REF ? u.ref : u.cpu, &u.prog[k]);
        if (s != FC_OK) {
            r->cls = DR_PROGRAM;
            r->which = k;
            r->status = s;
            msgf(r, "%s program: %s: %s", who_name[k], fc_status_name(s), u.prog[k] ? fc_program_last_error(u.prog[k]) : fc_block_last_error(b));
            goto done;
        }
    }
    if ((u.nfp8 = fc_block_num_fp8_slots(b0)) > 0 &&
        (!(u.fp8_scale = calloc((size_t)u.nfp8, sizeof *u.fp8_scale)) ||
         fc_program_fp8_scales(u.prog[P_REF], u.fp8_scale, u.nfp8) != FC_OK)) {
        r->cls = DR_RUN;
        r->which = P_REF;
        msgf(r, "reading the f8 scales: %s", fc_program_last_error(u.prog[P_REF]));
        goto done;
    }
    if ((s = f16_loss_scaling(u.prog[P_FUSED], c->train)) != FC_OK) {
        r->cls = DR_PROGRAM;
        r->which = P_FUSED;
        r->status = s;
        msgf(r, "fused program: loss scaling: %s", fc_program_last_error(u.prog[P_FUSED]));
        goto done;
    }
    /* reference first, then fused, eager (and remat-full); every output and gradient poisoned
     * before every run. The reference backward may not be there yet: FC_ERR_UNSUPPORTED skips
     * the comparisons with it (counted as "oracle backward unavailable"). */
    static const int order[NPROG] = {P_REF, P_FUSED, P_EAGER, P_FULL};
    for (int oi = 0; oi < u.nprog; oi++) {
        int k = order[oi];
        s = run_prog(&u, u.prog[k], u.in, u.gout, u.out[k], u.gin[k], c->train);
        if (k == P_REF && c->train && s == FC_ERR_UNSUPPORTED) {
            r->grad_oracle = 2;
            s = FC_OK;
        } else if (k == P_REF && c->train && s == FC_OK) {
            r->grad_oracle = 1;
            u.ref_bwd = true;
        }
        if (s != FC_OK) {
            r->cls = DR_RUN;
            r->which = k;
            r->status = s;
            msgf(r, "%s run%s: %s: %s", who_name[k], c->train ? " (forward and backward)" : "", fc_status_name(s),
                 fc_program_last_error(u.prog[k]));
            goto done;
        }
    }
    /* --self-check: the fused result corrupted (with --device cuda the GPU's, below) */
    if (c->self_check && !g_cuda && !g_strict) corrupt(&u, P_FUSED);
    /* the tolerances for these inputs, widened by the rounding spread of 16/8-bit
     * intermediates (both legal meanings; docs/tolerances.md) */
    if ((s = fc_block_check_tolerances(b0, u.in, u.tol, u.spread)) != FC_OK ||
        (c->train && (s = fc_block_check_grad_tolerances(b0, u.in, u.gout, u.gtol, u.gspread)) != FC_OK)) {
        r->cls = DR_RUN;
        r->which = P_REF;
        r->status = s;
        msgf(r, "tolerances: %s: %s", fc_status_name(s), fc_block_last_error(b0));
        goto done;
    }
    if (c->grad_sens > 0) {
        r->sens = sensitivity(&u, true, c->grad_sens - 1, noisy);
        goto done;
    }
    if (c->train) compare_pairs(&u, train_pairs, (int)(sizeof train_pairs / sizeof train_pairs[0]), noisy, r);
    else compare_pairs(&u, fwd_pairs, (int)(sizeof fwd_pairs / sizeof fwd_pairs[0]), noisy, r);
    if (c->train && c->sweep && r->cls == DR_OK) budget_sweep(src, &u, noisy, r);
    if (!c->self_check && r->cls == DR_OK) check_kernels(&u, P_FUSED, u.in, u.gout, c->train, r);
    if (g_strict && r->cls == DR_OK) strict_check(&u, c, r);
    if (g_cuda && r->cls == DR_OK) cuda_check(&u, c, noisy, r);
    if (c->nvrtc && r->cls == DR_OK) {
        static const char *arch[2] = {"sm_80", "sm_90"};
        r->nvrtc = 1;
        for (int a = 0; a < 2 && r->cls == DR_OK && r->nvrtc == 1; a++) {
            /* the forward's kernels (a training block's: its forward program), then a training
             * block's backward program's (emu_train_kernels: the library has no emit kind for it) */
            FcBlock *b = NULL;
            s = compile_opts(src, 1, arch[a], c->train ? "auto" : NULL, -1, &b);
            char *data = NULL, *bk = NULL, why[1024] = "";
            size_t len = 0;
            FcErr err = {0};
            if (s == FC_OK) s = fc_block_emit(b, FC_EMIT_PTX, &data, &len);
            if (s != FC_OK) snprintf(err.msg, sizeof err.msg, "%s", b ? fc_block_last_error(b) : "");
            if (s == FC_OK && c->train) {
                fc_buffer_free(data);
                data = NULL;
                if (!(bk = emu_train_kernels(src, "difftest.tf", true, "auto", 1, why, sizeof why))) {
                    s = FC_ERR_INTERNAL;
                    snprintf(err.msg, sizeof err.msg, "%s", why);
                } else {
                    s = rt_nvrtc_compile(bk, arch[a], false, &data, &len, NULL, &err);
                }
            }
            if (s == FC_ERR_UNAVAILABLE) r->nvrtc = 2;
            else if (s != FC_OK) {
                r->cls = DR_NVRTC;
                r->status = s;
                msgf(r, "NVRTC %s%s: %s: %.2500s", arch[a], bk ? " (the backward program)" : "", fc_status_name(s), err.msg);
            }
            free(bk);
            fc_buffer_free(data);
            fc_block_free(b);
        }
    }
done:
    run_free(&u);
}

/* ---- isolation: one child process per check ------------------------------------------------------
 * The child writes its Result, then one trailer byte: 'K', or 'L' where LeakSanitizer found a leak.
 * Under ASan the child runs the leak check itself (__lsan_do_recoverable_leak_check) between the
 * two and leaves with _exit, so the exit-time check does not run a second time. A child whose
 * Result arrived whole but whose trailer did not died in LeakSanitizer itself (GCC 12's tracer
 * thread dies, "Tracer caught signal 11", scanning a misread dynamic-TLS range once NVRTC is
 * loaded, which cmake/lsan_defaults.c prevents with use_tls=0); should that come back, the report
 * says so in those words rather than blaming the program. */
typedef struct Child { pid_t pid; int fd; } Child;

static void write_all(int fd, const void *buf, size_t len) {
    const char *p = buf;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        p += w;
        len -= (size_t)w;
    }
}

static Child start_check(const char *src, const char *const *noisy, uint64_t in_seed, const Check *ck, const Opts *o) {
    Child c = {-1, -1};
    int fds[2];
    if (pipe(fds) != 0) return c;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        alarm((unsigned)(ck->train ? 3 * o->timeout_s : o->timeout_s));   /* a training check compiles six programs */
        Result r;
        check_program(src, noisy, in_seed, ck, &r);
        write_all(fds[1], &r, sizeof r);
        fflush(NULL);
#if DT_ASAN
        char trailer = __lsan_do_recoverable_leak_check() ? 'L' : 'K';
#else
        char trailer = 'K';
#endif
        write_all(fds[1], &trailer, 1);
        close(fds[1]);
        _exit(0);
    }
    close(fds[1]);
    if (pid < 0) { close(fds[0]); return c; }
    c.pid = pid;
    c.fd = fds[0];
    return c;
}

static void finish_check(Child c, Result *r) {
    memset(r, 0, sizeof *r);
    if (c.pid < 0) { r->cls = DR_CRASH; snprintf(r->msg, sizeof r->msg, "fork failed: %s", strerror(errno)); return; }
    char buf[sizeof *r + 1];
    size_t got = 0;
    for (;;) {
        ssize_t n = read(c.fd, buf + got, sizeof buf - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += (size_t)n;
        if (got == sizeof buf) break;
    }
    close(c.fd);
    if (got >= sizeof *r) memcpy(r, buf, sizeof *r);
    int st = 0;
    while (waitpid(c.pid, &st, 0) < 0 && errno == EINTR) {}
    if (WIFSIGNALED(st)) {
        memset(r, 0, sizeof *r);
        r->cls = WTERMSIG(st) == SIGALRM ? DR_TIMEOUT : DR_CRASH;
        r->status = WTERMSIG(st);
        snprintf(r->msg, sizeof r->msg, "child killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
        return;
    }
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (got == sizeof buf && buf[sizeof *r] == 'L') {
        memset(r, 0, sizeof *r);
        r->cls = DR_CRASH;
        r->status = 1000 + code;
        snprintf(r->msg, sizeof r->msg, "the child leaked memory (LeakSanitizer's report is on stderr)");
        return;
    }
    if (got == sizeof buf && code == 0) return;
    bool lsan_died = got == sizeof *r && code != 0;
    memset(r, 0, sizeof *r);
    r->cls = DR_CRASH;
    r->status = 1000 + code;
    if (lsan_died)
        snprintf(r->msg, sizeof r->msg, "the check finished, then LeakSanitizer itself died in the child (status %d): "
                 "a sanitizer fault, not a finding about the program; see stderr", code);
    else
        snprintf(r->msg, sizeof r->msg, "child exited with status %d (a sanitizer report or an abort; see stderr)", code);
}

static void run_check(const char *src, const char *const *noisy, uint64_t in_seed, const Check *ck, const Opts *o, Result *r) {
    if (!o->fork) { check_program(src, noisy, in_seed, ck, r); return; }
    finish_check(start_check(src, noisy, in_seed, ck, o), r);
    r->train = ck->train;   /* also for a crash or a timeout (the child said nothing): a reproducer says so */
}

/* the two noisy variants of p (freed with free_noisy) */
static void make_noisy(const DtProg *p, uint64_t seed, char **noisy) {
    noisy[0] = dt_render_noisy(p, dt_mix(seed ^ 0xA11CEull));
    noisy[1] = dt_render_noisy(p, dt_mix(seed ^ 0xB0Bull));
}
static void free_noisy(char **noisy) { free(noisy[0]); free(noisy[1]); noisy[0] = noisy[1] = NULL; }

static bool is_failure(int cls) { return cls != DR_OK && cls != DR_ILLCOND; }

/* ---- the CUDA emulation of a sample of the graphs (tests/cuda_emu/emu_runner.c) ---------------- */
/* The emulated graphs' AOT units (fused and eager, cg_cuda_aot, and where a matrix product is a
 * cuBLASLt call also the GPU-shaped units) are compiled by the host C++ compiler in batches
 * (DT_EMU_PER_BATCH units a file, --jobs compiles at a time) and run forward and in reverse
 * thread order, each run in a child process; both must match the reference interpreter within
 * fc_block_check_tolerances and each other bit for bit. Runs in the parent, after the CPU
 * checks: the batches span graphs. */
static EmuRunner g_emu;
static int g_emu_state;          /* 0 not started, 1 ready, 2 no C++ compiler, -1 cannot start */
static int g_emu_names;          /* unique case names */
static double g_emu_run_s;       /* seconds in emu_check */
static char g_emu_why[1024];
static bool g_emu_contract;      /* --emu-contract: the units compiled with contraction everywhere */

static int emu_start(void) {
    if (g_emu_state) return g_emu_state;
    int st = emu_init(&g_emu, FUSEC_CXX, DT_EMU_DIR, FUSEC_BINARY_DIR, g_emu_why, sizeof g_emu_why);
    g_emu_state = st == 0 ? 1 : st == 77 ? 2 : -1;
    g_emu.contract = g_emu_contract;
    return g_emu_state;
}

static double g_emu_compile_s;
static int g_emu_compiles;

static void emu_stop(bool keep) {
    if (g_emu_state == 1) {
        g_emu_compile_s += g_emu.t_compile;
        g_emu_compiles += g_emu.n_compiles;
        emu_free(&g_emu, keep);
    }
    g_emu_state = 0;
}

/* How much rounding noise alone moves output j of the oracle (as sensitivity(), on the emulated
 * case's inputs and references); NAN when unknown. The case's first outputs must be the block's
 * (a training program's forward unit has its saved values after them: none for those). */
static double emu_sensitivity(const char *src, const EmuCase *c, int j, const char *const *noisy) {
    double worst = 0;
    /* a training unit's first train_nin inputs and train_nout outputs are the block's (the rest:
     * the outputs' and the inputs' gradients); a gradient is emu_grad_sensitivity's */
    int nin = c->train ? c->train_nin : c->nin;
    if (c->train && j >= c->train_nout) return NAN;
    for (int trial = 0; trial < 2; trial++) {
        if (!noisy || !noisy[trial]) break;   /* a replayed file has no noisy texts */
        FcBlock *b = NULL;
        FcProgram *pr = NULL;
        FcTensor *in[DT_MAXIN + 1] = {0}, *out[DT_MAXOUT + 1] = {0}, *want = NULL;
        FcStatus st = compile(noisy[trial], 1, NULL, &b);
        int nb = fc_block_num_outputs(b);
        if (st == FC_OK) st = fc_program_new(b, g_emu.ref, &pr);
        if (st == FC_OK && (fc_block_num_inputs(b) != nin || nb > c->nout || j >= nb || nin > DT_MAXIN || nb > DT_MAXOUT))
            st = FC_ERR_INTERNAL;
        for (int i = 0; st == FC_OK && i < nin; i++) {
            FcTensorInfo ti;
            fc_block_input_info(b, i, &ti);
            st = fc_tensor_new(g_emu.ref, ti.dtype, ti.rank, ti.dims, &in[i]);
            if (st == FC_OK) st = fc_tensor_copy_from_host(in[i], c->in[i], fc_tensor_nbytes(in[i]));
        }
        for (int k = 0; st == FC_OK && k < nb; k++) {
            FcTensorInfo ti;
            fc_block_output_info(b, k, &ti);
            st = fc_tensor_new(g_emu.ref, ti.dtype, ti.rank, ti.dims, &out[k]);
            if (st == FC_OK) poison(out[k], ti.dtype, fc_tensor_nbytes(out[k]));
            if (st == FC_OK && k == j) {
                st = fc_tensor_new(g_emu.ref, ti.dtype, ti.rank, ti.dims, &want);
                if (st == FC_OK) st = fc_tensor_copy_from_host(want, c->want[j], fc_tensor_nbytes(want));
            }
        }
        if (st == FC_OK) st = fc_program_run(pr, in, out);
        double a = NAN, r = NAN;
        if (st == FC_OK) fc_tensor_compare(out[j], want, &a, &r);
        for (int i = 0; i < nin && i <= DT_MAXIN; i++) fc_tensor_free(in[i]);
        for (int k = 0; k < nb && k <= DT_MAXOUT; k++) fc_tensor_free(out[k]);
        fc_tensor_free(want);
        fc_program_free(pr);
        fc_block_free(b);
        if (st != FC_OK) return NAN;
        if (r > worst) worst = r;
    }
    /* the composites' inner roundings, as sensitivity() measures them */
    FcTensor *tmp = NULL, *want = NULL;
    int64_t dims[1] = {c->out_n[j]};
    FcStatus st = fc_tensor_new(g_emu.ref, c->out_dt[j], 1, dims, &tmp);
    if (st == FC_OK) st = fc_tensor_new(g_emu.ref, c->out_dt[j], 1, dims, &want);
    if (st == FC_OK) st = fc_tensor_copy_from_host(want, c->want[j], fc_tensor_nbytes(want));
    for (int trial = 0; trial < 2 && st == FC_OK; trial++) {
        double r = inner_sens(src, c->train, c->fp8_scale, c->nfp8, c->in, nin, j, tmp, want, dt_mix(0xD1Bull + (uint64_t)trial));
        if (isnan(r)) st = FC_ERR_INTERNAL;
        else if (r > worst) worst = r;
    }
    fc_tensor_free(tmp);
    fc_tensor_free(want);
    return st == FC_OK ? worst : NAN;
}

typedef struct EmuJob {
    const char *src;
    const char *const *noisy;   /* the two noisy variants, or NULL */
    uint64_t in_seed;
    unsigned mask;              /* EMU_V_* bits: the variants to emulate */
    bool train;                 /* a training program: one training unit per variant, run as its
                                 * forward then its backward (emu_add_train_block) */
    int ids[EMU_NVARIANTS];     /* the case of each variant's unit, -1 if none */
    Result *r;                  /* zeroed by the caller */
} EmuJob;

/* How much rounding noise moves the gradient that output `output` of training case c is (its
 * outputs: the block's, then the float inputs' gradients in order), measured as the CPU check
 * measures it (sensitivity) on the same inputs, in a child; NAN when it is not a gradient or
 * cannot be measured. */
static double emu_grad_sensitivity(const Opts *o, const EmuJob *job, const EmuCase *c, int output) {
    int k = output - c->train_nout;
    for (int i = 0; k >= 0 && i < c->train_nin; i++) {
        if (!is_float(c->in_dt[i]) || k-- > 0) continue;
        Check ck = {true, false, false, false, i + 1};
        Result rr;
        run_check(job->src, job->noisy, job->in_seed, &ck, o, &rr);
        return rr.cls == DR_OK ? rr.sens : NAN;
    }
    return NAN;
}

/* Emulates the n programs (their units compiled together) and fills each job's result:
 * r->emu 1 emulated, 2 skipped (no C++ compiler); a failure's class, variant (which) and
 * message. An emulation mismatch with the oracle that rounding noise explains is DR_ILLCOND. */
static void emu_graphs(const Opts *o, EmuJob *jobs, int n) {
    for (int k = 0; k < n; k++) {
        Result *r = jobs[k].r;
        for (int v = 0; v < EMU_NVARIANTS; v++) jobs[k].ids[v] = -1;
        int st = emu_start();
        if (st == 2) { r->emu = 2; continue; }
        if (st != 1) {
            r->cls = DR_EMU_ERROR;
            r->which = -1;
            msgf(r, "the emulation runner cannot start: %s", g_emu_why);
            continue;
        }
        char name[32], why[2048];
        snprintf(name, sizeof name, "g%d", g_emu_names++);
        bool made = true;
        if (jobs[k].train) {
            /* the AOT training unit (fusec --train --emit cuda: forward, then backward from its
             * saved buffer), fused and eager, against the CPU device's training programs; it
             * calls cuBLASLt where the GPU does, so it is also the GPU-shaped variant */
            static const int tv[2] = {EMU_V_FUSED, EMU_V_EAGER};
            for (int t = 0; t < 2 && made; t++) {
                if (!(jobs[k].mask & (3u << tv[t]))) continue;
                char cname[48];
                snprintf(cname, sizeof cname, "%s_%s", name, tv[t] == EMU_V_FUSED ? "fused" : "eager");
                EmuCase *c = emu_add_train_block(&g_emu, cname, jobs[k].src, NULL, tv[t] == EMU_V_FUSED, jobs[k].in_seed, 0, why,
                                                 sizeof why);
                if (c) jobs[k].ids[tv[t]] = c->id;
                else made = false;
            }
        } else {
            made = emu_add_block_variants(&g_emu, name, jobs[k].src, NULL, jobs[k].in_seed, 0, jobs[k].mask, jobs[k].ids, why,
                                          sizeof why);
        }
        /* --strict: the fused unit with --strict-rounding (a training one for a training graph),
         * bit for bit against the eager one */
        if (made && g_strict && (jobs[k].mask & (1u << EMU_V_STRICT)) && jobs[k].ids[EMU_V_EAGER] >= 0) {
            EmuCase *c = emu_add_strict_variant(&g_emu, jobs[k].ids[EMU_V_EAGER], jobs[k].src, "difftest.tf", NULL, why, sizeof why);
            if (c) jobs[k].ids[EMU_V_STRICT] = c->id;
            else made = false;
        }
        if (!made) {
            r->cls = DR_EMU_ERROR;
            r->which = -1;
            msgf(r, "making the CUDA units%s: %.2900s", jobs[k].train ? " (training)" : "", why);
        }
        /* self-check: the fused unit (--strict: the --strict-rounding one) */
        int sc = jobs[k].ids[g_strict && jobs[k].ids[EMU_V_STRICT] >= 0 ? EMU_V_STRICT : EMU_V_FUSED];
        if (o->self_check_emu && sc >= 0) g_emu.cases[sc].corrupt = true;
    }
    if (g_emu_state == 1) emu_build(&g_emu, DT_EMU_PER_BATCH, o->jobs < 2 ? 2 : o->jobs);
    for (int k = 0; k < n; k++) {
        Result *r = jobs[k].r;
        r->train = jobs[k].train;
        for (int v = 0; v < EMU_NVARIANTS; v++) {
            int id = jobs[k].ids[v];
            if (id < 0) continue;
            char vn[64];
            snprintf(vn, sizeof vn, "%s%s", emu_variant_names[v], jobs[k].train ? " training" : "");
            r->emu = 1;
            r->emu_units++;
            if (r->cls != DR_OK) continue;
            EmuReport rep;
            double t = emu_now_s();
            EmuVerdict ev = emu_check(&g_emu, id, &rep);
            g_emu_run_s += emu_now_s() - t;
            if (ev == EMU_PASS) continue;
            r->which = v;
            if (ev == EMU_ERROR) {
                r->cls = DR_EMU_ERROR;
                msgf(r, "the %s unit, emulated: %.2900s", vn, rep.why);
                continue;
            }
            r->cls = DR_EMU_MISMATCH;
            r->output = rep.output;
            r->rel = rep.rel;
            r->tol = rep.tol;
            r->worst = rep.at;
            r->got = rep.got;
            r->want = rep.want;
            bool vs_oracle = !rep.between_orders && rep.rel >= 0;
            r->sens = vs_oracle ? emu_sensitivity(jobs[k].src, &g_emu.cases[id], rep.output, jobs[k].noisy) : 0;
            /* a training unit's gradient: as the CPU check measures it (its inputs are the
             * same: seed step 0), in a child */
            if (jobs[k].train && vs_oracle && isnan(r->sens)) r->sens = emu_grad_sensitivity(o, &jobs[k], &g_emu.cases[id], rep.output);
            bool none = jobs[k].train && vs_oracle && isnan(r->sens);
            if (none) r->sens = 0;
            if (vs_oracle && r->sens * 4 >= rep.rel) r->cls = DR_ILLCOND;
            msgf(r, "the %s unit, emulated, vs the reference: %.2800s; oracle change under rounding noise %.3g%s", vn, rep.why, r->sens,
                 none ? " (none measured for a training unit)" : "");
        }
    }
}

/* ---- minimization ---------------------------------------------------------------------------------- */
static bool same_failure(const Result *a, const Result *b) {
    if (a->cls != b->cls) return false;
    switch (a->cls) {
    case DR_MISMATCH: case DR_EMU_MISMATCH: return a->which == b->which && !isnan(b->sens);
    case DR_EMU_ERROR: return a->which == b->which;
    case DR_COMPILE: case DR_PROGRAM: case DR_RUN: return a->which == b->which && a->status == b->status;
    case DR_CRASH: return a->status == b->status;
    default: return true;
    }
}

typedef struct Min {
    const Opts *o;
    const Result *want;
    uint64_t in_seed;
    Check ck;
    int checks, budget;
    Result last;
    bool shrinking;
    bool emu;              /* an emulation failure: check by emulating the variants in emu_mask */
    unsigned emu_mask;
} Min;

static bool still_fails(Min *m, const DtProg *p) {
    if (m->checks >= m->budget) return false;
    m->checks++;
    char *src = dt_render(p, NULL), *noisy[2] = {NULL, NULL};
    if (!src) return false;
    if (!m->shrinking) make_noisy(p, m->in_seed, noisy);
    Result r;
    if (m->emu) {
        memset(&r, 0, sizeof r);
        EmuJob j = {src, (const char *const *)noisy, m->in_seed, m->emu_mask, m->ck.train, {0}, &r};
        emu_graphs(m->o, &j, 1);
    } else {
        run_check(src, (const char *const *)noisy, m->in_seed, &m->ck, m->o, &r);
    }
    free(src);
    free_noisy(noisy);
    /* while dims shrink the tracked types are stale and there is no noisy variant: accept a
     * mismatch only if it is far beyond the tolerance */
    if (m->shrinking && (r.cls == DR_MISMATCH || r.cls == DR_EMU_MISMATCH) && isnan(r.sens) && r.rel > 1e-2 && r.rel > 100 * r.tol)
        r.sens = 0;
    if (!same_failure(&r, m->want)) return false;
    m->last = r;
    return true;
}

static bool used_later(const DtProg *p, int v, int from) {
    for (int i = from; i < p->ns; i++)
        for (int k = 0; k < p->s[i].nops; k++) if (p->s[i].ops[k] == v) return true;
    for (int i = 0; i < p->nout; i++) if (p->out[i] == v) return true;
    return false;
}

static void remove_stmt(DtProg *p, int i) {
    memmove(&p->s[i], &p->s[i + 1], sizeof p->s[0] * (size_t)(p->ns - i - 1));
    p->ns--;
}

/* statement i deleted; its used results become inputs of the same type */
static bool delete_stmt(DtProg *p, int i) {
    DtStmt s = p->s[i];
    for (int r = 0; r < s.nres; r++) {
        if (!used_later(p, s.res[r], i + 1)) continue;
        if (p->nin >= DT_MAXIN) return false;
        p->v[s.res[r]].input = true;
        p->in[p->nin++] = s.res[r];
    }
    remove_stmt(p, i);
    return true;
}

static void drop_unused_inputs_of(DtProg *p, DtProg *q) {
    *q = *p;
    q->nin = 0;
    for (int i = 0; i < p->nin; i++)
        if (used_later(p, p->in[i], 0)) q->in[q->nin++] = p->in[i];
}

static void minimize(DtProg *p, Min *m) {
    DtProg *c = malloc(sizeof *c);
    if (!c) return;
    bool progress = true;
    for (int round = 0; progress && round < 6; round++) {
        progress = false;
        /* fewer outputs */
        for (int i = p->nout - 1; i >= 0 && p->nout > 1; i--) {
            *c = *p;
            memmove(&c->out[i], &c->out[i + 1], sizeof c->out[0] * (size_t)(c->nout - i - 1));
            c->nout--;
            if (still_fails(m, c)) { *p = *c; progress = true; }
        }
        /* an output replaced by another statement result (earlier ones first: shorter programs) */
        for (int k = 0; k < p->nout; k++) {
            bool better = false;
            for (int i = 0; i < p->ns && !better; i++) {
                for (int r = 0; r < p->s[i].nres && !better; r++) {
                    int v = p->s[i].res[r];
                    bool dup = false;
                    for (int kk = 0; kk < p->nout; kk++) dup |= p->out[kk] == v;
                    if (dup || v >= p->out[k]) continue;
                    *c = *p;
                    c->out[k] = v;
                    if (still_fails(m, c)) { *p = *c; progress = better = true; }
                }
            }
        }
        /* dead statements, all at once */
        *c = *p;
        bool any = false;
        for (int i = c->ns - 1; i >= 0; i--) {
            bool live = false;
            for (int r = 0; r < c->s[i].nres; r++) live |= used_later(c, c->s[i].res[r], i + 1);
            if (!live) { remove_stmt(c, i); any = true; }
        }
        if (any && c->ns > 0 && still_fails(m, c)) { *p = *c; progress = true; }
        /* each statement: delete it, its results becoming inputs */
        for (int i = p->ns - 1; i >= 0; i--) {
            if (p->ns <= 1) break;
            *c = *p;
            bool out_of_last = false;
            for (int r = 0; r < c->s[i].nres; r++)
                for (int k = 0; k < c->nout; k++) out_of_last |= c->out[k] == c->s[i].res[r];
            if (out_of_last && c->ns == 1) continue;
            if (!delete_stmt(c, i)) continue;
            /* an output that became an input: return something computed instead if possible */
            bool ok = true;
            for (int k = 0; k < c->nout; k++) if (c->v[c->out[k]].input) ok = false;
            if (!ok) continue;
            if (still_fails(m, c)) { *p = *c; progress = true; }
        }
        /* each operand that is computed: replace it by a new input of its type */
        for (int i = 0; i < p->ns; i++) {
            for (int k = 0; k < p->s[i].nops; k++) {
                int v = p->s[i].ops[k];
                if (p->v[v].input || p->nv >= DT_MAXV || p->nin >= DT_MAXIN) continue;
                *c = *p;
                int nvid = c->nv++;
                c->v[nvid] = c->v[v];
                c->v[nvid].input = true;
                c->in[c->nin++] = nvid;
                for (int kk = 0; kk < c->s[i].nops; kk++) if (c->s[i].ops[kk] == v) c->s[i].ops[kk] = nvid;
                if (still_fails(m, c)) { *p = *c; progress = true; }
            }
        }
        /* unused inputs */
        drop_unused_inputs_of(p, c);
        if (c->nin != p->nin && still_fails(m, c)) { *p = *c; progress = true; }
        /* inputs merged: an input replaced by an earlier input of the same type */
        for (int i = p->nin - 1; i > 0; i--) {
            for (int j = 0; j < i; j++) {
                const DtVal *a = &p->v[p->in[i]], *b = &p->v[p->in[j]];
                if (a->dt != b->dt || a->rank != b->rank || memcmp(a->d, b->d, sizeof(int64_t) * (size_t)a->rank) != 0) continue;
                *c = *p;
                for (int s = 0; s < c->ns; s++)
                    for (int k = 0; k < c->s[s].nops; k++) if (c->s[s].ops[k] == p->in[i]) c->s[s].ops[k] = p->in[j];
                memmove(&c->in[i], &c->in[i + 1], sizeof c->in[0] * (size_t)(c->nin - i - 1));
                c->nin--;
                if (still_fails(m, c)) { *p = *c; progress = true; break; }
            }
        }
    }
    /* shrink input dims last (intermediate types are not re-derived after this): one dim of one
     * input, or every occurrence of a size in every input; templates holding literal sizes may
     * make a candidate invalid, which then does not fail the same way and is dropped */
    m->shrinking = true;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < p->nin; i++) {
            for (int a = 0; a < p->v[p->in[i]].rank; a++) {
                int64_t d = p->v[p->in[i]].d[a];
                int64_t cand[3] = {1, d / 2, d - 1};
                for (int k = 0; k < 3; k++) {
                    if (cand[k] < 1 || cand[k] >= d) continue;
                    *c = *p;
                    if (pass == 0) c->v[c->in[i]].d[a] = cand[k];
                    else
                        for (int ii = 0; ii < c->nin; ii++)
                            for (int aa = 0; aa < c->v[c->in[ii]].rank; aa++)
                                if (c->v[c->in[ii]].d[aa] == d) c->v[c->in[ii]].d[aa] = cand[k];
                    if (still_fails(m, c)) { *p = *c; break; }
                }
            }
        }
    }
    free(c);
}

/* ---- reporting ------------------------------------------------------------------------------------- */
static void describe(const Result *r, char *buf, size_t n) {
    if (r->cls == DR_MISMATCH || r->cls == DR_ILLCOND) snprintf(buf, n, "%s: %s", cls_name[r->cls], r->msg);
    else snprintf(buf, n, "%s: %s", cls_name[r->cls], r->msg);
}

static int mkdirs(const char *path) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *q = tmp + 1; *q; q++)
        if (*q == '/') { *q = 0; mkdir(tmp, 0777); *q = '/'; }
    if (mkdir(tmp, 0777) != 0 && errno != EEXIST) return -1;
    return 0;
}

/* Writes the reproducer; returns its path (static buffer) or NULL. */
static const char *write_repro(const Opts *o, const DtProg *p, const Result *r, uint64_t gseed, int gi, int orig_stmts) {
    static char path[4096];
    if (mkdirs(o->out) != 0) { fprintf(stderr, "difftest: cannot create %s: %s\n", o->out, strerror(errno)); return NULL; }
    bool emu = r->cls == DR_EMU_MISMATCH || r->cls == DR_EMU_ERROR;
    snprintf(path, sizeof path, "%s/difftest-%llu-%d%s.tf", o->out, (unsigned long long)o->seed, gi, emu ? "-emu" : "");
    char hdr[8192], what[4000];
    describe(r, what, sizeof what);
    /* comment every line of the message */
    char cm[6000];
    size_t k = 0;
    for (const char *c = what; *c && k + 4 < sizeof cm; c++) {
        cm[k++] = *c;
        if (*c == '\n' && c[1]) { cm[k++] = '#'; cm[k++] = ' '; }
    }
    cm[k] = 0;
    while (k > 0 && cm[k - 1] == '\n') cm[--k] = 0;
    int ev = r->which;   /* the emulated variant */
    bool prog_fail = r->cls == DR_COMPILE || r->cls == DR_PROGRAM || r->cls == DR_RUN || r->cls == DR_KERNEL;
    int failed = r->cls == DR_MISMATCH ? pairs[r->which].a : prog_fail ? r->which : -1;   /* the program that failed */
    bool eager = ((r->cls == DR_MISMATCH || prog_fail) && (failed == P_EAGER || failed == P_GEAGER)) ||
                 (emu && (ev == EMU_V_EAGER || ev == EMU_V_EAGER_GPU));
    bool gpu = failed >= NPROG;
    char how[900];
    if (r->cls == DR_STRICT) {
        snprintf(how, sizeof how, "difftest --replay FILE --input-seed %llu\n"
                 "#  or: fusec run FILE%s --strict-rounding --random %llu --out-dir s; fusec run FILE%s --no-fuse --random %llu "
                 "--out-dir e; cmp each s/NAME.npy e/NAME.npy",
                 (unsigned long long)gseed, r->train ? " --train --remat none" : "", (unsigned long long)gseed,
                 r->train ? " --train --remat none" : "", (unsigned long long)gseed);
    } else if (r->train && !emu) {
        /* the two programs of a mismatch (one for another failure), as `fusec run --train` runs them */
        int ks[2] = {r->which, -1}, nk = 1;
        if (r->cls == DR_MISMATCH) { ks[0] = pairs[r->which].a; ks[1] = pairs[r->which].b; nk = 2; }
        if (r->cls == DR_BUDGET) ks[0] = P_FUSED;
        size_t len = (size_t)snprintf(how, sizeof how, "difftest --replay FILE --input-seed %llu", (unsigned long long)gseed);
        for (int i = 0; i < nk && ks[i] >= 0 && ks[i] < NALL && len < sizeof how; i++) {
            if (i == 1 && ks[1] == ks[0] && r->which != PAIR_BUDGET_GRAD) break;
            char bud[48] = "";
            if (r->budget >= 0 && i == 0) snprintf(bud, sizeof bud, " --mem-budget %lld", r->budget);
            len += (size_t)snprintf(how + len, sizeof how - len, "\n#  %s: fusec run FILE --device %s --train%s%s --random %llu",
                                    i ? "with" : "the program", ks[i] == P_REF ? "reference" : ks[i] >= NPROG ? "cuda" : "cpu",
                                    ks[i] == P_EAGER || ks[i] == P_GEAGER ? " --no-fuse --remat none" : ks[i] == P_FULL ? " --remat full" : "", bud,
                                    (unsigned long long)gseed);
        }
    } else if (emu && r->train)
        snprintf(how, sizeof how, "difftest --replay FILE --emu-every 1%s --input-seed %llu\n"
                 "#  the unit: fusec FILE --train --emit cuda%s, run as its forward then its backward "
                 "(tests/cuda_emu/emu_runner.c emu_add_train_block)",
                 g_emu_contract ? " --emu-contract" : "", (unsigned long long)gseed, eager ? " --no-fuse" : "");
    else if (emu)
        snprintf(how, sizeof how, "difftest --replay FILE --emu-every 1%s --input-seed %llu\n"
                 "#  the unit: fusec FILE --emit cuda%s%s (docs/cuda_emu.md)",
                 g_emu_contract ? " --emu-contract" : "", (unsigned long long)gseed, eager ? " --no-fuse" : "",
                 r->which == EMU_V_FUSED_GPU || r->which == EMU_V_EAGER_GPU ? "; GPU-shaped: matrix products as generated kernels"
                 : r->which == EMU_V_STRICT ? " --strict-rounding, whose outputs must be the eager unit's (--no-fuse) bits" : "");
    else
        snprintf(how, sizeof how, "%s%llu%s\n#        or: difftest --replay FILE%s --input-seed %llu",
                 r->cls == DR_NVRTC ? "fusec FILE --emit ptx --arch sm_80 (and sm_90) -o /dev/null  # inputs unused; seed "
                 : gpu              ? "fusec run FILE --device cuda --check --random "
                                    : "fusec run FILE --device cpu --check --random ",
                 (unsigned long long)gseed, eager ? " --no-fuse" : "", g_cuda ? " --device cuda" : "", (unsigned long long)gseed);
    snprintf(hdr, sizeof hdr,
             "# difftest reproducer (tests/difftest, docs/difftest.md)\n"
             "# graph %d of --seed %llu; %d statements minimized to %d%s\n"
             "# %s\n"
             "# input-seed=%llu\n%s%s%s%s%s"
             "# reproduce: %s\n",
             gi, (unsigned long long)o->seed, orig_stmts, p->ns,
             o->self_check && !emu ? (g_strict ? " (--self-check: the --strict-rounding result was corrupted on purpose)" : " (--self-check: the fused result was corrupted on purpose)")
             : o->self_check_emu && emu ? (g_strict ? " (--self-check-emu: the emulated --strict-rounding result was corrupted on purpose)"
                                                    : " (--self-check-emu: the emulated fused result was corrupted on purpose)") : "",
             cm, (unsigned long long)gseed, r->train ? "# mode=train (a training check: fusec --train, docs/difftest.md)\n" : "",
             g_precision ? "# precision=" : "", g_precision ? g_precision : "", g_precision ? " (add --precision to every command below; a replay reads it here)\n" : "",
             g_strict ? "# strict=1 (--strict: also --strict-rounding against eager, bit for bit; a replay reads it here)\n" : "", how);
    char *src = dt_render(p, hdr);
    FILE *f = src ? fopen(path, "w") : NULL;
    if (!f) { free(src); fprintf(stderr, "difftest: cannot write %s\n", path); return NULL; }
    fputs(src, f);
    fclose(f);
    free(src);
    return path;
}

/* Prints a failed graph, minimizes it (the first --max-minimize of a run) and writes the
 * reproducer; true if it was written. */
static bool report_failure(const Opts *o, const DtProg *p, const char *src, const Result *r, uint64_t gs, int gi, int *minimized) {
    int orig = p->ns;
    printf("\n=== graph %d (input seed %llu): %s\n%s\n--- program:\n%s", gi, (unsigned long long)gs, cls_name[r->cls], r->msg, src);
    DtProg *mp = malloc(sizeof *mp);
    if (!mp) return false;
    *mp = *p;
    Result fin = *r;
    if (o->minimize && *minimized < o->max_minimize) {
        bool emu = r->cls == DR_EMU_MISMATCH || r->cls == DR_EMU_ERROR;
        Check ck = check_of(o, gi);
        ck.train = r->train;
        ck.nvrtc = r->cls == DR_NVRTC;
        ck.sweep = r->train && (r->cls == DR_BUDGET || r->budget >= 0);
        Min m = {o, r, gs, ck, 0, emu ? o->emu_min_checks : 250, *r, false, emu,
                 emu && r->which == EMU_V_STRICT ? 1u << EMU_V_STRICT | 1u << EMU_V_EAGER
                 : emu && r->which >= 0 ? 1u << r->which : emu_all_variants()};
        double tm = emu_now_s();
        minimize(mp, &m);
        fin = m.last;
        (*minimized)++;
        printf("--- minimized in %d checks, %.1f s: %d -> %d statements\n", m.checks, emu_now_s() - tm, orig, mp->ns);
    }
    const char *path = write_repro(o, mp, &fin, gs, gi, orig);
    if (path) {
        char *msrc = dt_render(mp, NULL);
        printf("--- reproducer %s:\n%s--- %s\n", path, msrc ? msrc : "", fin.msg);
        free(msrc);
    }
    free(mp);
    fflush(stdout);
    return path != NULL;
}

/* ---- main -------------------------------------------------------------------------------------------- */
/* --device cuda: whether a GPU answers, asked in a child process: the children that run the checks
 * open the driver themselves, which they could not do after the parent had (CUDA does not survive
 * a fork). True if it does; else why not, in why. */
static bool cuda_probe(char *why, size_t n) {
    int fds[2];
    snprintf(why, n, "the probe could not start: %s", strerror(errno));
    if (pipe(fds) != 0) return false;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        alarm(120);
        FcDevice *d = NULL;
        char msg[1024];
        FcStatus s = fc_device_open(FC_DEVICE_CUDA, 0, &d);
        snprintf(msg, sizeof msg, "%s", s == FC_OK ? fc_device_description(d) : fc_device_last_error(d));
        write_all(fds[1], msg, strlen(msg));
        fc_device_free(d);
        _exit(s == FC_OK ? 0 : 1);
    }
    close(fds[1]);
    if (pid < 0) { close(fds[0]); return false; }
    size_t got = 0;
    for (;;) {
        ssize_t k = read(fds[0], why + got, n - 1 - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
        if (got >= n - 1) break;
    }
    why[got] = 0;
    close(fds[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        printf("difftest: --device cuda: %s\n", why);
        return true;
    }
    if (!got) snprintf(why, n, "the probe died (status %d)", st);
    return false;
}

static int usage(void) {
    fprintf(stderr,
            "usage: difftest [--seed S | --seed-from STRING] [--count N] [--first G] [--nvrtc-every K] [--emu-every K] [--out DIR] [--jobs J]\n"
            "                [--exclude OP,OP...] [--min-stmts N] [--max-stmts N] [--timeout S]\n"
            "                [--no-minimize] [--max-minimize N] [--emu-min-checks N] [--emu-contract] [--no-fork]\n"
            "                [--self-check] [--self-check-emu] [--verbose] [--precision bf16|f16|f8 [--strict]]\n"
            "                [--train | --train-every K] [--budget-every K]\n"
            "                [--device cpu|cuda] [--print] [--replay FILE.tf [--input-seed S]]\n"
            "ops for --exclude:");
    for (int i = 0; i < DT_OP_COUNT; i++) fprintf(stderr, " %s", dt_op_names[i]);
    fprintf(stderr, "\n");
    return 2;
}

static bool parse_u64(const char *s, uint64_t *v) {
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || !*s || *end || *s == '-') return false;
    *v = x;
    return true;
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) { free(b); b = NULL; }
    if (b) b[n] = 0;
    fclose(f);
    return b;
}

static int replay(const Opts *o) {
    char *src = read_file(o->replay);
    if (!src) { fprintf(stderr, "difftest: cannot read %s\n", o->replay); return 2; }
    uint64_t seed = o->input_seed;
    const char *hs = strstr(src, "# input-seed=");
    if (hs && o->input_seed == UINT64_MAX) {
        char num[32];
        size_t n = strcspn(hs + 13, "\n");
        snprintf(num, sizeof num, "%.*s", (int)(n < 31 ? n : 31), hs + 13);
        if (!parse_u64(num, &seed)) seed = UINT64_MAX;
    }
    if (seed == UINT64_MAX) seed = 0;
    /* a reproducer of a training check says so in its header (every training check of a
     * replay sweeps --mem-budget too) */
    bool train = o->train || strstr(src, "# mode=train") != NULL;
    /* and one checked at a --precision, which (unless given) the replay uses too */
    const char *hp = strstr(src, "# precision=");
    if (hp && !g_precision)
        g_precision = emu_precision = !strncmp(hp + 12, "bf16", 4) ? "bf16" : !strncmp(hp + 12, "f16", 3) ? "f16"
                                    : !strncmp(hp + 12, "f8", 2) ? "f8" : NULL;
    if (strstr(src, "# strict=1")) g_strict = true;
    if (g_strict && !g_precision) { fprintf(stderr, "difftest: --strict needs --precision\n"); free(src); return 2; }
    Check ck = {train, o->nvrtc_every > 0, train && o->budget_every > 0, o->self_check, 0};
    Result r;
    run_check(src, NULL, seed, &ck, o, &r);
    if (r.train)
        printf("%s: training check: reference backward %s, %d --mem-budget point(s)\n", o->replay,
               r.grad_oracle == 1 ? "compared" : "unavailable", r.budget_points);
    if (o->emu_every > 0 && r.cls == DR_OK) {
        Result er;
        memset(&er, 0, sizeof er);
        EmuJob j = {src, NULL, seed, emu_all_variants(), train, {0}, &er};
        emu_graphs(o, &j, 1);
        if (er.emu == 2) printf("%s: CUDA emulation skipped: %s\n", o->replay, g_emu_why);
        else printf("%s: CUDA emulation of %d unit(s): %s\n", o->replay, er.emu_units, cls_name[er.cls]);
        const char *keep = getenv("FUSEC_EMU_KEEP");
        emu_stop((is_failure(er.cls) && !o->self_check_emu) || (keep && keep[0] == '1'));
        if (er.cls != DR_OK) r = er;
    }
    free(src);
    char what[4000];
    describe(&r, what, sizeof what);
    printf("%s (input seed %llu): %s\n", o->replay, (unsigned long long)seed, what);
    return is_failure(r.cls) ? 1 : 0;
}

/* Set by SIGTERM or SIGINT: the run stops after the graphs in flight (main). A forked check
 * inherits the handler, so the signal a time limit sends to the whole process group lets it
 * finish rather than die as a "crash". */
static volatile sig_atomic_t g_stop;
static void on_stop(int sig) { g_stop = sig; }

/* The failures counted so far (every class but ok and ill-conditioned). */
static int failures_of(const int *counts) {
    int n = 0;
    for (int c = 0; c < DR_NCLASS; c++) n += is_failure(c) ? counts[c] : 0;
    return n;
}

/* A line at most every DT_PROGRESS_S seconds while a long run goes on, so that a run stopped at
 * a time limit (a GPU session's, CI's) still says how far it got and how it stood. */
static void progress(double *last, double t0, const char *what, int done, int total, int ok, int illcond, int failed) {
    double now = emu_now_s();
    if (done >= total || now - *last < DT_PROGRESS_S) return;
    *last = now;
    printf("difftest: progress: %d of %d %s in %.0f s: %d ok, %d ill-conditioned, %d failed\n", done, total, what, now - t0,
           ok, illcond, failed);
}

int main(int argc, char **argv) {
    static char outbuf[4096];
    /* a line at a time: a run stopped at a time limit still shows the failures it printed */
    setvbuf(stdout, NULL, _IOLBF, 0);
    Opts o = {.seed = 20240601, .count = DT_ASAN ? 40 : 300, .nvrtc_every = 10, .emu_min_checks = 60, .fork = true, .minimize = true, .jobs = 1,
              .timeout_s = DT_ASAN ? 300 : 60, .max_minimize = 5, .input_seed = UINT64_MAX, .train_every = 10, .budget_every = 4,
              .gen = {.min_stmts = 3, .max_stmts = 25}};
    const char *env = getenv("FUSEC_DIFFTEST_OUT");
    snprintf(outbuf, sizeof outbuf, "%s", env && *env ? env : FUSEC_BINARY_DIR "/difftest-failures");
    o.out = outbuf;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t x;
#define NEEDV() do { if (!v) return usage(); i++; } while (0)
        if (!strcmp(a, "--seed")) { NEEDV(); if (!parse_u64(v, &o.seed)) return usage(); }
        else if (!strcmp(a, "--seed-from")) {
            /* a seed derived from a string (CI: the commit hash), so that every commit explores
             * new graphs; printed first thing, so that a failure reproduces with --seed */
            NEEDV();
            if (!*v) return usage();
            uint64_t h = 1469598103934665603ull;  /* FNV-1a */
            for (const char *c = v; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
            o.seed = dt_mix(h) % 1000000000ull;
            printf("difftest: seed %llu from \"%s\" (reproduce with --seed %llu)\n", (unsigned long long)o.seed, v,
                   (unsigned long long)o.seed);
        }
        else if (!strcmp(a, "--count")) { NEEDV(); if (!parse_u64(v, &x) || x > 10000000) return usage(); o.count = (int)x; }
        else if (!strcmp(a, "--first")) { NEEDV(); if (!parse_u64(v, &x) || x > 100000000) return usage(); o.first = (int)x; }
        else if (!strcmp(a, "--nvrtc-every")) { NEEDV(); if (!parse_u64(v, &x) || x > 1000000) return usage(); o.nvrtc_every = (int)x; }
        else if (!strcmp(a, "--emu-every")) { NEEDV(); if (!parse_u64(v, &x) || x > 1000000) return usage(); o.emu_every = (int)x; }
        else if (!strcmp(a, "--emu-min-checks")) { NEEDV(); if (!parse_u64(v, &x) || x > 100000) return usage(); o.emu_min_checks = (int)x; }
        else if (!strcmp(a, "--out")) { NEEDV(); o.out = v; }
        else if (!strcmp(a, "--jobs")) { NEEDV(); if (!parse_u64(v, &x) || x < 1 || x > 64) return usage(); o.jobs = (int)x; }
        else if (!strcmp(a, "--timeout")) { NEEDV(); if (!parse_u64(v, &x) || x < 1 || x > 100000) return usage(); o.timeout_s = (int)x; }
        else if (!strcmp(a, "--min-stmts")) { NEEDV(); if (!parse_u64(v, &x) || x < 1 || x > 60) return usage(); o.gen.min_stmts = (int)x; }
        else if (!strcmp(a, "--max-stmts")) { NEEDV(); if (!parse_u64(v, &x) || x < 1 || x > 60) return usage(); o.gen.max_stmts = (int)x; }
        else if (!strcmp(a, "--max-minimize")) { NEEDV(); if (!parse_u64(v, &x) || x > 100000) return usage(); o.max_minimize = (int)x; }
        else if (!strcmp(a, "--input-seed")) { NEEDV(); if (!parse_u64(v, &o.input_seed)) return usage(); }
        else if (!strcmp(a, "--replay")) { NEEDV(); o.replay = v; }
        else if (!strcmp(a, "--exclude")) {
            NEEDV();
            char *dup = strdup(v);
            for (char *t = strtok(dup, ","); t; t = strtok(NULL, ",")) {
                int op = dt_op_by_name(t);
                if (op == DT_OP_COUNT) { fprintf(stderr, "difftest: unknown op '%s' in --exclude\n", t); free(dup); return usage(); }
                o.gen.exclude[op] = true;
            }
            free(dup);
        }
        else if (!strcmp(a, "--no-minimize")) o.minimize = false;
        else if (!strcmp(a, "--no-fork")) o.fork = false;
        else if (!strcmp(a, "--emu-contract")) g_emu_contract = true;
        else if (!strcmp(a, "--precision")) {
            NEEDV();
            if (strcmp(v, "bf16") && strcmp(v, "f16") && strcmp(v, "f8") && strcmp(v, "keep")) return usage();
            g_precision = emu_precision = strcmp(v, "keep") ? v : NULL;
        }
        else if (!strcmp(a, "--device")) {
            NEEDV();
            if (strcmp(v, "cpu") && strcmp(v, "cuda")) return usage();
            g_cuda = !strcmp(v, "cuda");
        }
        else if (!strcmp(a, "--strict")) g_strict = true;
        else if (!strcmp(a, "--self-check")) o.self_check = true;
        else if (!strcmp(a, "--self-check-emu")) o.self_check_emu = true;
        else if (!strcmp(a, "--verbose")) o.verbose = true;
        else if (!strcmp(a, "--print")) o.print_only = true;
        else if (!strcmp(a, "--verify-noisy")) o.verify_noisy = true;
        else if (!strcmp(a, "--train")) o.train = true;
        else if (!strcmp(a, "--train-every")) { NEEDV(); if (!parse_u64(v, &x) || x > 1000000) return usage(); o.train_every = (int)x; }
        else if (!strcmp(a, "--budget-every")) { NEEDV(); if (!parse_u64(v, &x) || x > 1000000) return usage(); o.budget_every = (int)x; }
        else return usage();
#undef NEEDV
    }
    if (g_strict && !g_precision && !o.replay) {
        fprintf(stderr, "difftest: --strict needs --precision bf16, f16 or f8 (at keep there is nothing to round)\n");
        return 2;
    }
    if (o.gen.max_stmts < o.gen.min_stmts) o.gen.max_stmts = o.gen.min_stmts;
    if (!o.fork) o.jobs = 1;
    if (o.self_check_emu && o.emu_every == 0) o.emu_every = 1;
#if defined(__x86_64__) || defined(__i386__)
    if (g_emu_contract && !__builtin_cpu_supports("fma")) {
        fprintf(stderr, "difftest: --emu-contract needs a CPU with FMA instructions\n");
        return 2;
    }
#endif
    if (g_cuda && !o.print_only && !o.verify_noisy) {
        char why[1024];
        if (!cuda_probe(why, sizeof why)) {
            printf("difftest: --device cuda: no GPU: %s (skipped)\n", why);
            return 77;
        }
    }
    if (o.replay) return replay(&o);
    if (o.verify_noisy) {
        int bad = 0;
        DtProg *p = malloc(sizeof *p);
        for (int gi = o.first; p && gi < o.first + o.count; gi++) {
            uint64_t gs = dt_mix(o.seed * 1000003ull + (uint64_t)gi);
            DtGenConfig gc = gen_config(&o, gi);
            dt_generate(p, gs, &gc);
            char *nz[2] = {NULL, NULL};
            make_noisy(p, gs, nz);
            for (int k = 0; k < 2; k++) {
                FcBlock *b = NULL;
                if (compile(nz[k], 1, NULL, &b) != FC_OK) {
                    if (bad++ < 3) printf("graph %d: noisy variant %d does not compile:\n%s\n%s\n", gi, k, fc_block_diagnostics(b), nz[k]);
                }
                fc_block_free(b);
            }
            free_noisy(nz);
        }
        free(p);
        printf("difftest --verify-noisy: %d of %d noisy variants failed to compile\n", bad, 2 * o.count);
        return bad ? 1 : 0;
    }

    double t0 = emu_now_s(), last_progress = t0;
    int counts[DR_NCLASS] = {0}, nvrtc_done = 0, nvrtc_skipped = 0, minimized = 0, stmts = 0;
    int op_graphs[DT_OP_COUNT] = {0};
    int rowview_graphs = 0, repeat_graphs = 0, ties_graphs = 0, i8_inputs = 0, i8_quant = 0, i8_dequant = 0;
    int train_graphs = 0, oracle_bwd = 0, oracle_bwd_unavail = 0, budget_graphs = 0, budget_points = 0;
    int self_written = 0;
    int nemu = 0, *emu_gi = calloc((size_t)(o.emu_every > 0 ? o.count / o.emu_every + 2 : 1), sizeof *emu_gi);
    DtProg *progs = calloc((size_t)o.jobs, sizeof *progs);
    char **srcs = calloc((size_t)o.jobs, sizeof *srcs);
    char **noisyv = calloc((size_t)o.jobs * 2, sizeof *noisyv);
    Child *kids = calloc((size_t)o.jobs, sizeof *kids);
    if (!progs || !srcs || !kids || !noisyv || !emu_gi) { fprintf(stderr, "difftest: out of memory\n"); return 1; }
    char trainw[96] = "";
    if (o.train) snprintf(trainw, sizeof trainw, ", TRAINING programs (--mem-budget sweep every %d)", o.budget_every);
    else if (o.train_every) snprintf(trainw, sizeof trainw, ", every %d a training program (--mem-budget sweep every %d)", o.train_every,
                                     o.budget_every);
    printf("difftest: seed %llu, %d graphs%s%s%s%s%s, nvrtc every %d, CUDA emulation every %d, %d job(s), out %s%s%s\n",
           (unsigned long long)o.seed, o.count, trainw, g_precision ? ", --precision " : "", g_precision ? g_precision : "",
           g_strict ? " (--strict: and --strict-rounding bit for bit against eager)" : "", g_cuda ? ", every graph also on the GPU (fused and eager)" : "",
           o.nvrtc_every, o.emu_every, o.jobs, o.out,
           o.self_check ? (g_strict ? ", SELF-CHECK (--strict-rounding results corrupted on purpose)" : ", SELF-CHECK (fused results corrupted on purpose)") : "",
           o.self_check_emu ? ", SELF-CHECK-EMU (emulated fused results corrupted on purpose)" : "");
    fflush(stdout);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    /* graphs are started in order, up to `jobs` at once, and collected in order */
    int next = 0, done = 0;
    while (done < o.count) {
        if (g_stop) {   /* the checks still running: stopped and not counted */
            for (int g = done; g < next && o.fork; g++) {
                Result drop;
                if (kids[g % o.jobs].pid > 0) kill(kids[g % o.jobs].pid, SIGKILL);
                finish_check(kids[g % o.jobs], &drop);
            }
            break;
        }
        while (next < o.count && next - done < o.jobs) {
            int slot = next % o.jobs;
            uint64_t gs = dt_mix(o.seed * 1000003ull + (uint64_t)(o.first + next));
            DtGenConfig gc = gen_config(&o, o.first + next);
            dt_generate(&progs[slot], gs, &gc);
            free(srcs[slot]);
            srcs[slot] = dt_render(&progs[slot], NULL);
            if (o.print_only) {
                printf("# graph %d (input seed %llu; %d row-view pattern(s)%s)\n%s\n", o.first + next, (unsigned long long)gs,
                       progs[slot].nrowview, gc.train ? "; a training program" : "", srcs[slot]);
                next++;
                done++;
                continue;
            }
            Check ck = check_of(&o, o.first + next);
            free_noisy(&noisyv[2 * slot]);
            make_noisy(&progs[slot], gs, &noisyv[2 * slot]);
            if (o.fork) kids[slot] = start_check(srcs[slot], (const char *const *)&noisyv[2 * slot], gs, &ck, &o);
            next++;
        }
        if (o.print_only) { if (done >= o.count) break; continue; }
        int slot = done % o.jobs, gi = o.first + done;
        uint64_t gs = dt_mix(o.seed * 1000003ull + (uint64_t)gi);
        Check ck = check_of(&o, gi);
        DtProg *p = &progs[slot];
        Result r;
        if (o.fork) finish_check(kids[slot], &r);
        else check_program(srcs[slot], (const char *const *)&noisyv[2 * slot], gs, &ck, &r);
        if (ck.train) r.train = true;   /* also for a crash or a timeout (the child said nothing) */
        done++;
        train_graphs += ck.train;
        oracle_bwd += r.grad_oracle == 1;
        oracle_bwd_unavail += r.grad_oracle == 2;
        budget_graphs += r.budget_points > 0;
        budget_points += r.budget_points;
        ties_graphs += p->nties > 0;
        repeat_graphs += p->nrepeat > 0;
        bool i8_in = false, i8_q = false, i8_d = false;   /* gen.c g_i8 */
        for (int i = 0; i < p->nin; i++) i8_in |= p->v[p->in[i]].dt == FC_I8;
        for (int i = 0; i < p->ns; i++) {
            i8_q |= strstr(p->s[i].tmpl, ", i8)") != NULL;
            for (int k = 0; k < p->s[i].nops; k++) i8_d |= p->v[p->s[i].ops[k]].dt == FC_I8;
        }
        i8_inputs += i8_in;
        i8_quant += i8_q;
        i8_dequant += i8_d;
        counts[r.cls]++;
        stmts += p->ns;
        bool seen[DT_OP_COUNT] = {0};
        for (int i = 0; i < p->ns; i++) seen[p->s[i].op] = true;
        for (int i = 0; i < DT_OP_COUNT; i++) op_graphs[i] += seen[i];
        rowview_graphs += p->nrowview > 0;
        if (r.nvrtc == 1) nvrtc_done++;
        if (r.nvrtc == 2) nvrtc_skipped++;
        if (o.verbose) printf("graph %d: %s\n%s", gi, cls_name[r.cls], srcs[slot]);
        if (r.cls == DR_ILLCOND && o.verbose) printf("graph %d: ill-conditioned, not counted: %s\n", gi, r.msg);
        if (r.cls == DR_OK && o.emu_every > 0 && gi % o.emu_every == 0) emu_gi[nemu++] = gi;
        progress(&last_progress, t0, "graphs", done, o.count, counts[DR_OK], counts[DR_ILLCOND], failures_of(counts));
        if (!is_failure(r.cls)) continue;
        if (report_failure(&o, p, srcs[slot], &r, gs, gi, &minimized)) self_written++;
    }
    if (o.print_only) return 0;
    /* the CUDA emulation of the sampled graphs that passed, DT_EMU_CHUNK graphs per runner */
    double t_emu = emu_now_s();
    int emu_done = 0, emu_skipped = 0, emu_units = 0, emu_illcond = 0, emu_failed = 0, emu_written = 0;
    DtProg *ep = nemu ? calloc(DT_EMU_CHUNK, sizeof *ep) : NULL;
    if (nemu && !ep) { fprintf(stderr, "difftest: out of memory\n"); return 1; }
    for (int c0 = 0; c0 < nemu && !g_stop; c0 += DT_EMU_CHUNK) {
        int k = nemu - c0 < DT_EMU_CHUNK ? nemu - c0 : DT_EMU_CHUNK;
        EmuJob jobs[DT_EMU_CHUNK];
        Result er[DT_EMU_CHUNK];
        char *esrc[DT_EMU_CHUNK], *enoisy[2 * DT_EMU_CHUNK];
        for (int i = 0; i < k; i++) {
            uint64_t gs = dt_mix(o.seed * 1000003ull + (uint64_t)emu_gi[c0 + i]);
            DtGenConfig gc = gen_config(&o, emu_gi[c0 + i]);
            dt_generate(&ep[i], gs, &gc);
            esrc[i] = dt_render(&ep[i], NULL);
            make_noisy(&ep[i], gs, &enoisy[2 * i]);
            memset(&er[i], 0, sizeof er[i]);
            jobs[i] = (EmuJob){esrc[i], (const char *const *)&enoisy[2 * i], gs, emu_all_variants(), is_train(&o, emu_gi[c0 + i]), {0}, &er[i]};
        }
        emu_graphs(&o, jobs, k);
        bool chunk_failed = false;
        for (int i = 0; i < k && !g_stop; i++) {   /* a chunk the signal reached is not counted */
            Result *r = &er[i];
            int gi = emu_gi[c0 + i];
            if (r->emu == 1) { emu_done++; emu_units += r->emu_units; }
            if (r->emu == 2) emu_skipped++;
            if (r->cls == DR_ILLCOND) {
                emu_illcond++;
                if (o.verbose) printf("graph %d: emulation ill-conditioned, not counted: %s\n", gi, r->msg);
            }
            if (!is_failure(r->cls)) continue;
            counts[r->cls]++;
            emu_failed++;
            chunk_failed = true;
            uint64_t gs = dt_mix(o.seed * 1000003ull + (uint64_t)gi);
            if (report_failure(&o, &ep[i], esrc[i], r, gs, gi, &minimized)) emu_written++;
        }
        for (int i = 0; i < k; i++) { free(esrc[i]); free_noisy(&enoisy[2 * i]); }
        progress(&last_progress, t0, "emulated graphs", c0 + k, nemu, emu_done, emu_illcond, emu_failed);
        const char *keep = getenv("FUSEC_EMU_KEEP");
        emu_stop((chunk_failed && !o.self_check_emu) || (keep && keep[0] == '1'));
    }
    free(ep);
    t_emu = emu_now_s() - t_emu;
    double el = emu_now_s() - t0;
    int failures = failures_of(counts);
    if (g_stop)
        printf("\ndifftest: stopped by %s after %d of %d graphs (the checks in flight dropped, not counted)\n", strsignal(g_stop),
               done, o.count);
    printf("\ndifftest: %d graphs (%d statements) in %.1f s: %d ok, %d ill-conditioned (not counted), %d failed\n", done, stmts, el,
           counts[DR_OK], counts[DR_ILLCOND], failures);
    for (int c = 2; c < DR_NCLASS; c++) if (counts[c]) printf("  %s: %d\n", cls_name[c], counts[c]);
    printf("  NVRTC: %d graphs compiled for sm_80 and sm_90, %d skipped (NVRTC unavailable)\n", nvrtc_done, nvrtc_skipped);
    if (o.emu_every > 0)
        printf("  CUDA emulation: %d graphs (%d units: fused, eager, GPU-shaped) in %.1f s (%d C++ compiles, %.1f s; running %.1f s), "
               "%d failed, %d ill-conditioned (not counted)%s%s\n",
               emu_done, emu_units, t_emu, g_emu_compiles, g_emu_compile_s, g_emu_run_s, emu_failed, emu_illcond,
               emu_skipped ? "; skipped: " : "", emu_skipped ? g_emu_why : "");
    printf("  graphs with a row reduction and a view returned beside it (gen.c g_rowview): %d; with a statement made "
           "again (gen.c g_repeat, what pass_cse merges): %d\n", rowview_graphs, repeat_graphs);
    if (train_graphs)
        printf("  training programs: %d (gradients fused --remat auto vs eager --remat none vs --remat full); reference backward: "
               "%d compared, %d oracle backward unavailable (FC_ERR_UNSUPPORTED); --mem-budget sweep: %d graphs, %d budgets; "
               "with ties (gen.c g_ties): %d\n",
               train_graphs, oracle_bwd, oracle_bwd_unavail, budget_graphs, budget_points, ties_graphs);
    printf("  i8 (gen.c g_i8): %d graphs with an i8 input, %d quantizing a float to i8, %d casting an i8 value\n", i8_inputs,
           i8_quant, i8_dequant);
    printf("  graphs using each op:");
    for (int i = 0; i < DT_OP_COUNT; i++) printf(" %s=%d", dt_op_names[i], op_graphs[i]);
    printf("\n");
    for (int i = 0; i < o.jobs; i++) { free(srcs[i]); free_noisy(&noisyv[2 * i]); }
    free(noisyv);
    free(srcs);
    free(progs);
    free(kids);
    free(emu_gi);
    if (o.self_check_emu) {
        /* every emulated graph must have been caught, and reproducers written; nothing else fails */
        bool ok = emu_done > 0 && counts[DR_EMU_MISMATCH] == emu_done && emu_written == emu_done && failures == emu_done;
        printf("difftest self-check-emu: %s (%d of %d corrupted emulated results caught, %d reproducers written)\n",
               ok ? "PASS" : "FAIL", counts[DR_EMU_MISMATCH], emu_done, emu_written);
        return ok ? 0 : 1;
    }
    if (o.self_check) {
        /* every graph must have been caught, and reproducers written */
        int want = g_strict ? DR_STRICT : DR_MISMATCH;   /* --strict: the --strict-rounding result was corrupted */
        bool ok = counts[want] == o.count && self_written == o.count;
        printf("difftest self-check: %s (%d of %d corrupted results caught, %d reproducers written)\n", ok ? "PASS" : "FAIL",
               counts[want], o.count, self_written);
        return ok ? 0 : 1;
    }
    return failures ? 1 : g_stop ? 3 : 0;
}
