/* emu_runner.h: building, compiling and running CUDA units on the CPU emulation
 * (docs/cuda_emu.md), shared by the harness's runner (tests/unit/test_cuda_emu.c) and the
 * random-graph differential tester (tests/difftest/difftest.c).
 *
 * An EmuRunner holds cases; a case is one CUDA unit (the AOT unit of cg_cuda_aot, the
 * `fusec --emit cuda` output) with its host inputs and what it must produce. Flow:
 *   emu_init                      work folder, C++ compiler (77: none)
 *   emu_add_block_variants / emu_add_block / emu_new_case + emu_alloc_io / emu_clone_case
 *   emu_build                     the not yet built cases: rewritten (launches, __shared__),
 *                                 namespaced, PER_BATCH to a C++ file, compiled PAR at a
 *                                 time with the emulator's runtime, linked, dlopen'ed; a
 *                                 batch that fails is compiled again case by case, so that a
 *                                 compile error is charged to its unit only
 *   emu_check                     one case, in thread order and in reverse order, each run in
 *                                 a forked child on fresh guarded buffers (outputs poisoned);
 *                                 both must match the oracle and each other bit for bit
 *   emu_free                      libraries, cases, the work folder (kept if asked)
 * emu_build may be called again after more cases are added (difftest's minimizer does): the
 * runtime is compiled once.
 *
 * Invariants: case ids are indices into EmuRunner.cases (which moves when cases are added, so
 * keep ids, not pointers, across emu_new_case); a clone (`shares`) uses the inputs and
 * references of the case it was cloned from, which must outlive it; the runner never exits
 * the process (errors are messages), except on out-of-memory (a test harness).
 */
#ifndef FUSEC_EMU_RUNNER_H
#define FUSEC_EMU_RUNNER_H

#include "frontend.h"
#include "fusec.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct EmuCase EmuCase;

/* A comparison of one run's outputs other than "every output within tol of want":
 * leaves why empty when they agree. */
typedef void (*EmuCompareFn)(const EmuCase *c, void *const *got, char *why, size_t n);

struct EmuCase {
    char name[128];           /* also the NAME.cu written to the work folder */
    char *cu;                 /* the unit as emitted (owned); NULL: nothing to build */
    bool handwritten;         /* emulator self-test source: compiled as is, in a batch of its own */
    const char *path;         /* handwritten: the file cu was read from (for #line) */
    int selftest;             /* handwritten: the argument of fcemu_selftest */
    const char *expect_msg;   /* handwritten: the failure text expected, NULL for success */
    int nin, nout;
    FcDtype *in_dt, *out_dt;
    int64_t *in_n, *out_n;    /* elements */
    void **in;                /* host inputs */
    void **want;              /* reference outputs (default comparison) */
    double *tol;              /* per output, for fc_tensor_compare's relative error */
    int want_status;          /* what the forward must return */
    EmuCompareFn compare;     /* NULL: the default comparison */
    void *user;               /* the caller's */
    bool corrupt;             /* self-checks: one element of output 0 altered after each run */
    bool shares;              /* a clone: in/want/tol/... belong to another case */
    int id, batch;            /* batch -1: not built yet */
    bool tried;               /* emu_build has tried it */
    void *lib;                /* the loaded batch, NULL if it did not build */
    char *build_err;          /* why it did not build (owned) */
    /* a training unit (fusec --train --emit cuda), run as its forward then its backward: the
     * first train_nin inputs are the block's, the rest the float outputs' gradients; the first
     * train_nout outputs are the block's, the rest the float inputs' gradients */
    bool train;
    int train_nin, train_nout;
    /* --precision f8: the unit takes the f8 state; each run starts from a fresh one with these
     * scales (the block's, calibrated on the case's inputs), which the reference used too */
    int nfp8;
    double *fp8_scale;        /* [nfp8] */
    /* f8 at the interface: the slot of each input's and output's scale, -1 none; the wrapper
     * sets the inputs' with the unit's fusec_emu_fp8_set_input_scale (their slots start at 0)
     * and checks the outputs' with fusec_emu_fp8_output_scale (status 3 when one differs) */
    int *in_slot, *out_slot;
    /* keep_outputs: emu_check keeps the forward-order run's outputs in kept (owned), for a
     * later case to compare with (emu_add_strict_variant) */
    bool keep_outputs;
    void **kept;
};

typedef struct EmuRunner {
    char workdir[256];
    char cxx[256];
    char emu_dir[512];
    EmuCase *cases;
    int ncases, cap;
    FcDevice *ref;            /* the reference device, for fc_tensor_compare and oracle runs */
    int nbatch;
    int rt_state;             /* 0 not built, 1 built, -1 failed */
    char *rt_err;
    void **libs;
    int nlibs, cap_libs;
    int run_timeout_s;        /* per run (default 60) */
    double t_compile;         /* seconds spent in emu_build */
    int n_compiles;           /* C++ compilations started */
    bool contract;            /* compile the units with contraction everywhere (as nvcc's
                                 --fmad=true would treat plain a*b + c); set before emu_build */
    FcDevice *cpu;            /* the CPU device, for training references (opened when first needed) */
    char cache_dir[512];      /* $FUSEC_EMU_CACHE_DIR: compiled batches kept by content ("" none) */
    uint8_t cache_seed[32];   /* SHA-256 of the compiler, its version, the flags and the emulator */
    int n_cached;             /* compilations the cache answered */
} EmuRunner;

typedef enum EmuVerdict { EMU_PASS, EMU_MISMATCH, EMU_ERROR } EmuVerdict;

/* What emu_check found. MISMATCH: a comparison with the oracle (output, rel, tol, at, got,
 * want; rel < 0 for a custom comparison) or between the two orders (between_orders).
 * ERROR: not built, a fault, a timeout, a forward status other than want_status. */
typedef struct EmuReport {
    EmuVerdict verdict;
    int order;                /* 0 forward, 1 reverse */
    bool between_orders;
    int output;
    double rel, tol, got, want;
    long long at;
    char why[4096];
} EmuReport;

/* A dim override (NULL-name terminated arrays). */
typedef struct EmuDim { const char *name; int64_t v; } EmuDim;

/* The examples/NAME.tf files at small odd dims (partial vectors, tiles and warps), with which
 * the harness runs them (EmuDim arrays end at a NULL name). */
typedef struct EmuExample { const char *file; EmuDim dims[6]; } EmuExample;
extern const EmuExample emu_examples[];
extern const int emu_nexamples;
/* The text of SOURCE_DIR/examples/<emu_examples[e].file>.tf (free it), NULL if unreadable. */
char *emu_example_source(const char *source_dir, int e);

/* Which variants emu_add_block_variants makes (ids[] index = bit); EMU_V_STRICT is made by
 * emu_add_strict_variant, not by it. */
enum { EMU_V_FUSED, EMU_V_FUSED_GPU, EMU_V_EAGER, EMU_V_EAGER_GPU, EMU_V_STRICT, EMU_NVARIANTS };
#define EMU_ALL_VARIANTS 0xFu
extern const char *const emu_variant_names[EMU_NVARIANTS];

/* Picks the compiler ($FUSEC_EMU_CXX, else default_cxx) and makes the work folder
 * (fusec_emu.XXXXXX in $TMPDIR, else in fallback_dir). 0: ready; 77: no C++ compiler;
 * 1: another error (why). */
int emu_init(EmuRunner *r, const char *default_cxx, const char *emu_dir, const char *fallback_dir, char *why, size_t n);

EmuCase *emu_new_case(EmuRunner *r, const char *name);
void emu_alloc_io(EmuCase *c, int nin, int nout);
/* A variant of case `from` (another unit, same inputs and references); takes cu. */
EmuCase *emu_clone_case(EmuRunner *r, int from, const char *name, char *cu);

/* The AOT unit of src (entry "emu", dims overridden), fused or eager; *blk receives the block
 * (caller frees). NULL with why on failure. Free the text with free(). */
/* The storage precision every unit is compiled at (as fc_options_set_precision: "bf16", "f16";
 * NULL keeps the declared dtypes), for all the builders below. */
extern const char *emu_precision;

/* The frontend's graph of src (fo: its block and dims), at emu_precision (pass_precision), as the
 * library compiles it (train: for training, at f8 with its gradients' slots). */
FcStatus emu_unit_graph(const char *src, const char *file, const FeOptions *fo, bool train, IrGraph **g, FcErr *err);

char *emu_block_unit(const char *src, const char *file, const EmuDim *dims, bool fuse, FcBlock **blk, char *why, size_t n);
/* The unit of the GPU-shaped program, as the CUDA device runs it (pass_pipeline with
 * cpu = false, library_gemm = false: matrix products as generated tiled kernels). */
char *emu_gpu_unit(const char *src, const char *file, const EmuDim *dims, bool fuse, char *why, size_t n);
/* A case for the unit cu (taken) of blk: inputs from fc_block_random_input(blk, i,
 * seed + i * seed_step), references from the reference interpreter, tolerances from
 * fc_block_check_tolerances. NULL with why when the reference cannot run. */
EmuCase *emu_add_block(EmuRunner *r, const char *name, char *cu, FcBlock *blk, uint64_t seed, uint64_t seed_step, char *why,
                       size_t n);
/* The block fused (NAME_fused) and eager (NAME_eager) and, where the unit calls cuBLASLt, their
 * GPU-shaped units (NAME_fused_gpu, NAME_eager_gpu), restricted to the variants in mask (a GPU
 * variant still builds the references of its base, without building its unit). ids[v] gets
 * the case id of variant v, -1 if not made. Returns false with why (the first error) if
 * something could not be made; the cases that could are kept. */
bool emu_add_block_variants(EmuRunner *r, const char *name, const char *src, const EmuDim *dims, uint64_t seed,
                            uint64_t seed_step, unsigned mask, int ids[EMU_NVARIANTS], char *why, size_t n);

/* The fused unit of src compiled with --strict-rounding (a training unit where eager_id is
 * one: emu_add_train_block's, at the same --remat), run on the inputs of eager case eager_id (a
 * clone of it) after it: its outputs (and gradients) must be the eager unit's bits (NaN for
 * NaN; emu_same_element), which that case keeps (keep_outputs is set here). NULL with why. */
EmuCase *emu_add_strict_variant(EmuRunner *r, int eager_id, const char *src, const char *file, const EmuDim *dims, char *why,
                                size_t n);
/* Whether element i of two arrays of dtype t holds the same bits, or a NaN in both. */
bool emu_same_element(FcDtype t, const void *a, const void *b, size_t i);

extern const char *const emu_train_part_names[2];   /* "forward", "backward" */
/* The kernels (cg_cuda_kernels: what NVRTC compiles) of a training block's forward (part 0) or
 * backward (part 1) program, GPU-shaped with library matrix products as the CUDA device runs it
 * (fused with --remat remat, or eager). NULL with why. Free with free(). */
char *emu_train_kernels(const char *src, const char *file, bool fuse, const char *remat, int part, char *why, size_t n);

/* A training case: the unit of `fusec --train --emit cuda` for src (entry "emu", dims
 * overridden, fused or eager), which the run calls as its forward, then (the workspace refilled
 * with 0xFF bytes in between: nothing may survive in it) its backward. Inputs: the block's, from
 * fc_block_random_input(blk, i, seed + i * seed_step), then the float outputs' gradients from
 * fc_block_random_grad_output(blk, j, seed), as `fusec run --train --random SEED` makes them
 * with seed_step 0; outputs: the block's, then the float inputs' gradients, compared with the
 * reference device's fc_program_run and fc_program_backward (the interpreter's f64 backward)
 * within fc_block_check_tolerances and fc_block_check_grad_tolerances; where the reference has
 * no backward (FC_ERR_UNSUPPORTED), with the CPU device's, within twice those. NULL with why on
 * failure. */
EmuCase *emu_add_train_block(EmuRunner *r, const char *name, const char *src, const EmuDim *dims, bool fuse, uint64_t seed,
                             uint64_t seed_step, char *why, size_t n);

/* Compiles every case not tried yet (per_batch units to a C++ file, par compiles at a time).
 * Returns how many of them did not build (their build_err says why). */
int emu_build(EmuRunner *r, int per_batch, int par);

/* Runs case id forward and in reverse and checks it. */
EmuVerdict emu_check(EmuRunner *r, int id, EmuReport *rep);

/* Unloads, frees, removes the work folder unless keep (then prints where it is). */
void emu_free(EmuRunner *r, bool keep);

/* The C type of a buffer of dtype t in a generated unit's signature. */
const char *emu_ctype(FcDtype t);

/* Small helpers the runner's users share: a monotonic clock in seconds; calloc and strdup that
 * exit(1) when out of memory (tests only); a whole file as a NUL-terminated string (NULL if it
 * cannot be read; free it). */
double emu_now_s(void);
void *emu_xcalloc(size_t n, size_t s);
char *emu_xstrdup(const char *s);
char *emu_read_text(const char *path);

#endif
