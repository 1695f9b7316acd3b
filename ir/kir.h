/* kir.h: the kernel IR, a target-neutral loop-level IR ("structured SIMT").
 *
 * A KirProgram is what a compiled block runs: buffers (inputs, outputs, workspace
 * temporaries), kernels, and an ordered list of launches binding buffers to kernels.
 *
 * A KirKernel runs on a 1-D grid of `grid` blocks of `block` threads. Its body is run
 * once per block (the block index is KE_BLOCK_IDX). Parallelism inside a block is
 * structured:
 *   - Statements outside any KS_FOR/THREADS loop are *block-uniform*: every thread of the
 *     block computes the same value (a GPU runs them redundantly in each thread; the CPU
 *     once per block).
 *   - KS_FOR with kind KIR_LOOP_THREADS spreads iterations [lo, hi) over the block's
 *     threads: iteration i runs on thread (i - lo) % block. A GPU runs
 *     `for (i = lo + tid; i < hi; i += block)`, the CPU a plain loop. Thread loops do not nest.
 *   - KS_BARRIER separates phases (a __syncthreads() on the GPU; nothing on the CPU, where
 *     thread loops run one after the other). Lowering puts a barrier between a thread
 *     loop that writes shared memory and any later one that reads it.
 *   - KS_REDUCE is a block-level reduction: `var = op over i in threads [lo, hi) of value`,
 *     where the body statements run before `value` in each iteration; the result is
 *     block-uniform. Its accumulation order is fixed by the kernel (per-thread strided
 *     partials, then a tree over threads), the same on every backend.
 *   - Shared arrays (KirShared) are per block; thread arrays (KirTArray) are per thread and
 *     live across thread loops (accumulators of a tiled matrix product); a thread array is
 *     used only inside thread loops.
 *   - The tail (KirKernel.tail, optional): a second statement list that runs once per launch,
 *     after every block has run the body, as one block of `block` threads (thread loops,
 *     reductions and barriers as in the body; no KE_BLOCK_IDX, and none of the body's
 *     variables). What the body stored is visible to it. A reduction of per-block results in
 *     one launch: each block stores its partial, the tail reduces them in a fixed order (the
 *     result does not depend on which block finishes when). A GPU runs it in the block that
 *     finishes last (a __threadfence, an atomic ticket on a zeroed sync word the launcher
 *     provides, and a __syncthreads: the CUDA threadFenceReduction pattern); the CPU runs it
 *     after the grid.
 *   - KS_AMAX records a largest magnitude (the amax of f8 delayed scaling, docs/precision.md)
 *     from any schedule, with no tail and no partial buffers: after the launch, element `a` of
 *     an f32 param holds the maximum of its value before the launch and |b| over every
 *     evaluation of the statement during the launch (every block, thread and iteration). The
 *     order is that of the IEEE-754 bit patterns of the magnitudes read as unsigned 32-bit
 *     integers: the numeric order for non-negative floats, with a NaN (its sign cleared by the
 *     |.|) above +inf, so one NaN makes the element NaN. The caller keeps the element's prior
 *     value non-negative or NaN. A maximum does not depend on the order of evaluation, so for
 *     the same values the result is the same bits on every run and backend. Backends keep an
 *     accumulator per statement (per thread on a GPU, per chunk of blocks on the CPU) and
 *     merge it into the element once, at the end of the body, with an atomic max of the bits.
 * Emitters (codegen/cuda.c, codegen/llvm.c) print this IR and decide nothing.
 *
 * Types: compute types are KirType. Buffers have a storage FcDtype; a load converts
 * storage to compute type (f16/bf16/f8 -> f32, bool -> bool, ...) and a store converts
 * back (rounding to nearest even; to f8 saturating). Index arithmetic is i64.
 *
 * Expressions and statements live in per-kernel arrays and are referred to by id.
 * Statement lists are first-child / next-sibling chains (-1 ends a chain).
 */
#ifndef FUSEC_KIR_H
#define FUSEC_KIR_H

#include "support.h"
#include "ir.h"

typedef enum KirType { KT_BOOL, KT_I32, KT_I64, KT_F32, KT_F64, KT_COUNT } KirType;
const char *kir_type_name(KirType t);
/* The compute type of a storage dtype: f16/bf16/f8/f32 -> f32, f64 -> f64, ... */
KirType kir_compute_type(FcDtype t);

typedef enum KirUnOp {
    KU_NEG, KU_ABS, KU_EXP, KU_LOG, KU_SQRT, KU_RSQRT, KU_RECIP, KU_TANH, KU_ERF,
    KU_SIN, KU_COS, KU_NOT, KU_FLOOR, KU_NDTR, KU_COUNT
} KirUnOp;
typedef enum KirBinOp {
    KB_ADD, KB_SUB, KB_MUL, KB_DIV,   /* int DIV truncates; operands are non-negative in index math */
    KB_REM,                           /* int only */
    KB_POW, KB_MAX, KB_MIN,           /* MAX/MIN propagate NaN (NumPy's maximum/minimum) */
    KB_LT, KB_LE, KB_GT, KB_GE, KB_EQ, KB_NE,   /* result KT_BOOL */
    KB_AND, KB_OR,                    /* bool */
    KB_COUNT
} KirBinOp;
const char *kir_unop_name(KirUnOp op);
const char *kir_binop_name(KirBinOp op);

typedef enum KirExprKind {
    KE_CONST,      /* type, ival (ints, bool) or fval (floats) */
    KE_VAR,        /* var */
    KE_LOAD,       /* param (buffer), a = element index (i64) */
    KE_SHLOAD,     /* shared array, a = index */
    KE_TLOAD,      /* thread array, a = index (within this thread's slots) */
    KE_UNARY,      /* unop, a */
    KE_BINARY,     /* binop, a, b */
    KE_SELECT,     /* a = cond, b = if true, c = if false */
    KE_CAST,       /* a converted to `type` (float->int truncates toward zero, saturating, NaN->0) */
    KE_ROUND,      /* a (f32) rounded to the precision of storage dtype `dtype`, still f32 */
    KE_BLOCK_IDX,  /* this block's index, i64 */
    KE_PHILOX,     /* word 0 of Philox-4x32-10 (Random123), as an i64 in [0, 2^32): counter words
                    * (c0, c1) = low and high 32 bits of a, (c2, c3) of b, key (k0, k1) of c;
                    * a, b, c are i64 (dropout's mask, docs/language.md) */
    KE_COUNT
} KirExprKind;

typedef struct KirExpr {
    KirExprKind kind;
    KirType type;        /* the expression's result type */
    int a, b, c;         /* operand expr ids */
    int ref;             /* var / param / shared / thread-array id */
    int op;              /* KirUnOp or KirBinOp */
    FcDtype dtype;       /* KE_ROUND */
    int64_t ival;
    double fval;
    int view;            /* KE_LOAD/KE_SHLOAD of a tensor value (-1: none, the default): the linear
                          * element index, in the value's own row-major shape, that the consumer's
                          * view (transpose, slice, broadcast, gather, ...) maps this read to, as
                          * the lowering derived it from the consumer's index. A load whose index
                          * `a` was computed another way (a shared row, a folded vec index) carries
                          * it, and the verifier checks that the index reads that element: for a
                          * LOAD, a == view; for a SHLOAD of a staged array, base + a == view. */
    bool vec;            /* KE_LOAD/KE_SHLOAD inside a thread loop with vec W > 1 (see KirStmt.vec):
                          * the index is the loop variable v, or add(B, v) with B block-uniform, so
                          * iteration v + j reads element index(v) + j; a backend may read the W
                          * elements of one thread's group at once. false: an ordinary access */
} KirExpr;

typedef enum KirLoopKind { KIR_LOOP_SERIAL, KIR_LOOP_THREADS } KirLoopKind;
typedef enum KirRedOp { KR_SUM, KR_MAX, KR_MIN, KR_COUNT } KirRedOp;
const char *kir_redop_name(KirRedOp op);

typedef enum KirStmtKind {
    KS_LET,        /* var = a (declares var) */
    KS_ASSIGN,     /* var = a */
    KS_STORE,      /* param[a] = b (converted to the buffer's dtype) */
    KS_SHSTORE,    /* shared[ref][a] = b */
    KS_TSTORE,     /* thread array[ref][a] = b */
    KS_FOR,        /* for var in [a, b): body; loop kind */
    KS_IF,         /* if a: body else: body2 */
    KS_REDUCE,     /* var = redop over loop_var in threads [a, b) of (body; value c) */
    KS_BARRIER,
    KS_ERROR,      /* if a: the run fails with status code `code` (sticky; execution goes on) */
    KS_AMAX,       /* param[a] = max(param[a], |b|) over the launch (see above): ref = an f32 param
                    * marked written; a = a KE_CONST of type i64 in [0, numel); b = f32. Anywhere
                    * in the body (block-uniform, thread loops, serial loops, if and reduce
                    * bodies); never in the tail */
    KS_COUNT
} KirStmtKind;

typedef struct KirStmt {
    KirStmtKind kind;
    int var;             /* LET/ASSIGN/FOR loop var/REDUCE result */
    int loop_var;        /* REDUCE: the iteration variable */
    int ref;             /* STORE, AMAX: param; SHSTORE: shared; TSTORE: thread array */
    int a, b, c;         /* expr ids (see kinds) */
    KirLoopKind loop;    /* FOR */
    KirRedOp redop;      /* REDUCE */
    int code;            /* ERROR: an FcStatus */
    int body, body2;     /* first statement of the body / else-body, -1 if empty */
    int next;            /* next statement in the list, -1 at the end */
    int vec;             /* FOR threads: 0 (or 1) an ordinary thread loop; W in {2, 4, 8, 16}: each
                          * thread takes W consecutive iterations at a time (iterations are
                          * independent; the result is that of the ordinary loop), and the loop's
                          * vec accesses may be done as 16-byte vectors (W x element size is a
                          * multiple of 16). STORE/SHSTORE: nonzero marks a vec store, written
                          * like a vec load's read (a statement of the vec loop's own body, not
                          * nested). Builders that never set it get ordinary loops. */
    int lanes;           /* REDUCE: 0, the kernel's block; else a multiple of 32 below it: iteration
                          * i runs on thread (i - lo) % lanes and the threads from `lanes` on hold
                          * the identity, so the result has the bits a `lanes`-thread block gives
                          * (the tree's extra steps add exact identities). --strict-rounding gives
                          * a fused kernel's reduction the order of the eager kernel's. */
} KirStmt;

typedef struct KirVar { KirType type; } KirVar;
/* A shared array. base -1: scratch (matrix tiles, whatever the kernel keeps there). base >= 0:
 * a staged row: an i64 block-uniform expression such that, in each block, element j of the array
 * holds element base + j of one tensor value (a row staged from memory or kept by a reduction);
 * every SHLOAD of it must carry a view (KirExpr.view), which the verifier checks. */
typedef struct KirShared { KirType type; int64_t count; int base; } KirShared;
typedef struct KirTArray { KirType type; int count; } KirTArray;

typedef struct KirParam {
    FcDtype dtype;       /* storage dtype */
    int64_t numel;       /* elements the kernel may touch: [0, numel) */
    bool written;        /* the kernel stores to it */
    bool stream;         /* written only, and more than the target's caches hold: stores may
                          * bypass the caches (CPU: non-temporal stores, docs/cpu.md). A hint:
                          * results do not depend on it */
} KirParam;

/* Where each row of a matrix holds one value from a column on: row r from column
 * min(cols, ceil(max(r + off + 1, 0) / align) * align) (kir_tail_col); align 0: nothing known. */
typedef struct KirTail { int64_t off; int64_t align; } KirTail;
int64_t kir_tail_col(const KirTail *t, int64_t r, int64_t cols);

/* A matrix product done by a library (a CPU BLAS, cuBLASLt): C = A @ B for each of `batch`
 * products, row-major. A is [m, k] ([k, m] when trans_a), B is [k, n] ([n, k] when trans_b),
 * C is [m, n]; consecutive products are stride_* elements apart (0: the same matrix). */
typedef struct KirGemm {
    int64_t batch, m, n, k;
    int64_t stride_a, stride_b, stride_c;
    bool trans_a, trans_b;
    FcDtype dtype;       /* f32 or f64: C's type, the accumulation's, and A's and B's unless ab16 */
    int ab16;            /* FC_BF16 or FC_F16: A and B are of that type, read as such by the library
                          * (cuBLASLt; dtype f32; passes.h, pass_narrow_product); 0: of dtype */
    /* B in panels (the CPU; docs/cpu.md, "Products of narrow weights"): > 0 when B is made by
     * the launch just before this one (a "matmul operand" kernel, e.g. an i8 or f8 weight
     * dequantized), panel_k rows of B at a time, into a buffer of panel_k x n that stays in the
     * cache: for each panel, that kernel's panel_blocks blocks for those rows (its store param
     * indexes all of B; its buffer is the panel, based so that the panel's rows land in it),
     * then C (+)= A[:, rows] @ panel. batch 1. B is never in memory whole. With trans_b the
     * kernel makes B^T [n, k], a panel panel_k of its columns with all n rows (panel_blocks
     * blocks, no chunks), read transposed.
     * panel_m > 0 (less than m): C in blocks of panel_m rows, each block over every panel of B
     * (the panels made again for each block), so that the block of C the panels add to stays in
     * the cache between them; 0: all of C's rows at once. panel_n > 0 (less than n): B's columns
     * in chunks of panel_n (the last one narrower), a panel panel_k x (its chunk's width), row
     * after row; the operand kernel's blocks then go chunk after chunk, panel_blocks a panel
     * within each, and C's columns of a chunk are multiplied with its panels; 0: all n. */
    int64_t panel_k, panel_blocks, panel_m, panel_n;
    /* The epilogue in the cache (the CPU; docs/cpu.md, "Epilogues in the cache"): epi_rows > 0
     * when the launch just after this one is the product's epilogue (a generated kernel reading
     * C, its block b C's rows [b * epi_rows, (b + 1) * epi_rows)), which the runtime runs block
     * of C by block of C (panel_m rows, a multiple of epi_rows; all of C when 0), each block's
     * rows right after the block is computed. B in panels or whole. c_block: C's buffer holds
     * one block of rows (panel_m, or m, times n), based for each block so that the block's rows
     * land in it: C is never in memory whole (its param and the epilogue's index all of C). */
    int64_t epi_rows;
    bool c_block;
    /* A in blocks (the CPU; docs/cpu.md, "A in blocks"): a_rows > 0 when A is made by a
     * generated kernel launched just before this one (before B's operand kernel with panels),
     * its block b A's rows [b * a_rows, (b + 1) * a_rows) (its store param indexes all of A),
     * into a buffer of one block of C's rows (panel_m, or m, times k) that the runtime bases for
     * each block so that the block's rows land in it, and fills just before the block's product:
     * A is never in memory whole. batch 1, A not transposed. */
    int64_t a_rows;
    /* A causal product (the CPU; docs/cpu.md, "Causal products"): element (i, j) of each C is
     * needed only where j <= i + causal_off, every reader of C discarding the others (a causal
     * mask's where, through elementwise ops of one kernel); the runtime leaves them unwritten,
     * computing C in panels of rows over the columns the panel needs. Not with panels of B, nor a
     * batch folded into the rows. */
    bool causal;
    int64_t causal_off;
    /* A's rows may end in zeros (the probabilities of a causal softmax; the CPU, docs/cpu.md
     * "Causal products"): per panel of rows the runtime finds the column after which the panel
     * of A is all zero and, where B's rows from there on are finite, multiplies only the columns
     * before it (the rest adds exact zeros). A hint: the result is the product's either way, up
     * to the sign of a zero. Not with A transposed or panels of B. With `tail` (align > 0) each
     * row r of A is known to hold one value from column kir_tail_col(&tail, r, k) on (a causal
     * row kernel's output, docs/cpu.md "Causal rows"): the runtime reads that value, not the
     * row, and where it is a zero the columns from there on are the row's zeros. */
    bool zero_tail;
    KirTail tail;
} KirGemm;
/* the type of a library product's operands A and B */
static inline FcDtype kir_gemm_ab_dtype(const KirGemm *g) { return g->ab16 ? (FcDtype)g->ab16 : g->dtype; }
/* Columns of row r of each C the product computes: n, or for a causal product min(n, max(0, r +
 * causal_off + 1)); and their sum over rows [0, r) (closed form). */
int64_t kir_gemm_cols(const KirGemm *g, int64_t r);
int64_t kir_gemm_cols_before(const KirGemm *g, int64_t r);
/* The rows of C's blocks (KirGemm.panel_m): m when C is one block */
static inline int64_t kir_gemm_block_rows(const KirGemm *g) { return g->panel_m > 0 ? g->panel_m : g->m; }
/* The chunks of B's columns a product with B in panels takes (KirGemm.panel_n): 1 when whole */
static inline int64_t kir_gemm_chunks(const KirGemm *g) { return g->panel_n > 0 ? (g->n + g->panel_n - 1) / g->panel_n : 1; }

struct KirProgram;
/* The launches the CPU runtime runs interleaved, as one, with launch li (li among them): a
 * product making A in blocks, with A's operand kernel before it (KirGemm.a_rows); taking B in
 * panels, with B's operand kernel just before it (panel_k); running its epilogue a block of C at
 * a time, with the epilogue just after it (epi_rows). *lo..*hi, li..li for any other launch. A
 * buffer any of them binds lives over all of them (pass_memplan). */
void kir_launch_unit(const struct KirProgram *p, int li, int *lo, int *hi);

typedef struct KirKernel {
    const char *name;    /* generated identifier, e.g. "k3_layernorm" */
    bool library;        /* a library call, not generated code: params are A, B, C of `gemm`;
                          * no body; emitters print no kernel for it */
    KirGemm gemm;
    const char *ops;     /* the source ops it runs, comma-separated (for reports) */
    const char *kind;    /* schedule used: "pointwise", "row_reduce", "matmul", ... */
    int64_t grid;        /* blocks (>= 1) */
    int block;           /* threads per block, 1..1024 */
    FC_VEC(KirParam) params;
    FC_VEC(KirExpr) exprs;
    FC_VEC(KirStmt) stmts;
    FC_VEC(KirVar) vars;
    FC_VEC(KirShared) shared;
    FC_VEC(KirTArray) tarrays;
    int body;            /* first statement, -1 if empty */
    int tail;            /* first statement of the tail (see above), -1 if none */
    bool uses_status;    /* has KS_ERROR: takes an extra int32 status pointer */
    int64_t bytes_read, bytes_written, flops;   /* modelled minimum for one launch */
    /* builder state (kir.c) */
    struct { int stmt; int tail; int in_else; } scope[32]; /* open for/if/reduce */
    int nscope;
    int top_tail;        /* last statement of the top-level list being built, -1 if none */
    bool in_tail;        /* top-level statements go to the tail (kir_begin_tail) */
    bool failed;         /* an allocation failed or scopes were misused */
} KirKernel;

/* STATE: the program's f8 scaling state (--precision f8; docs/precision.md "f8"), one f32
 * array that outlives runs, shared by a training step's forward and backward programs and
 * bound by the device (index 0). Per slot k of IrGraph.fp8, at k * KIR_FP8_STRIDE:
 *   [0] the scale the kernels use in this run (a power of two; 1 before the first update),
 *   [1] the amax of this run (max |x| of the slot's tensor, KS_AMAX; 0 after the update),
 *   [2 .. 2 + KIR_FP8_HISTORY) the amax of earlier runs, newest first.
 * A program whose graph quantizes with slot k updates it in its first launch (the kernel
 * "fp8_update": the run's amax pushed into the history, the scale set from the history). */
typedef enum KirBufKind { KIR_BUF_INPUT, KIR_BUF_OUTPUT, KIR_BUF_TEMP, KIR_BUF_STATE } KirBufKind;
#define KIR_FP8_HISTORY 16
#define KIR_FP8_STRIDE (2 + KIR_FP8_HISTORY)
typedef struct KirBuffer {
    KirBufKind kind;
    int index;           /* INPUT/OUTPUT: the block's input/output index; STATE: 0 */
    FcDtype dtype;
    int64_t numel;
    int64_t offset;      /* TEMP: byte offset in the workspace (256-byte aligned) */
    int value;           /* the graph value it holds, in that value's own row-major layout, once
                          * the last launch that writes it has run (-1: none, such as a row's
                          * partial sums or an operand copied transposed); for reports and the
                          * per-kernel check. An output buffer holds its output's value */
} KirBuffer;

typedef struct KirLaunch {
    int kernel;
    int nargs;
    int *args;           /* buffer ids, one per kernel param (arena) */
} KirLaunch;

typedef struct KirProgram {
    Arena arena;
    const char *block_name;
    FC_VEC(KirKernel *) kernels;
    FC_VEC(KirBuffer) buffers;
    FC_VEC(KirLaunch) launches;
    int64_t workspace_bytes;
    int vector_bytes;    /* a CPU-shaped program: the host's widest vector (PassCpu), which sizes
                          * codegen/llvm.c's paired bf16 loops; 0 otherwise */
} KirProgram;

/* ---- building (kir.c) ----------------------------------------------------------------- */
KirProgram *kir_program_new(const char *block_name);
void kir_program_free(KirProgram *p);
/* A new empty kernel owned by p (name copied). NULL on OOM. */
KirKernel *kir_kernel_new(KirProgram *p, const char *name, int64_t grid, int block);
/* A library matrix product (see KirGemm) with its three params A, B, C. NULL on OOM. */
KirKernel *kir_gemm_new(KirProgram *p, const char *name, const KirGemm *g);

int kir_param(KirKernel *k, FcDtype dtype, int64_t numel, bool written);
int kir_var(KirKernel *k, KirType t);
int kir_shared(KirKernel *k, KirType t, int64_t count);
int kir_tarray(KirKernel *k, KirType t, int count);
/* Marks shared array `shared` a staged row whose element j holds element base + j of a value
 * (KirShared.base), and records on load expression `load` the element its consumer's view maps
 * it to (KirExpr.view). */
void kir_shared_base(KirKernel *k, int shared, int base);
void kir_set_view(KirKernel *k, int load, int view);

/* Expressions; each returns an id (or -1 after an allocation failure, which sticks:
 * check kir_kernel_ok before using the kernel). */
int kir_const_i(KirKernel *k, KirType t, int64_t v);
int kir_const_f(KirKernel *k, KirType t, double v);
int kir_var_ref(KirKernel *k, int var);
int kir_load(KirKernel *k, int param, int idx);
int kir_shload(KirKernel *k, int shared, int idx);
int kir_tload(KirKernel *k, int tarray, int idx);
int kir_un(KirKernel *k, KirUnOp op, int a);
int kir_bin(KirKernel *k, KirBinOp op, int a, int b);   /* a, b of one type */
int kir_select(KirKernel *k, int c, int a, int b);
int kir_cast(KirKernel *k, KirType t, int a);           /* no-op when already t */
int kir_round(KirKernel *k, FcDtype storage, int a);
int kir_block_idx(KirKernel *k);
int kir_philox(KirKernel *k, int ctr_lo, int ctr_hi, int key);   /* KE_PHILOX; operands i64 */

/* Statements are appended to the innermost open scope. */
void kir_let(KirKernel *k, int var, int value);
void kir_assign(KirKernel *k, int var, int value);
void kir_store(KirKernel *k, int param, int idx, int value);
void kir_shstore(KirKernel *k, int shared, int idx, int value);
void kir_tstore(KirKernel *k, int tarray, int idx, int value);
void kir_barrier(KirKernel *k);
void kir_error_if(KirKernel *k, int cond, FcStatus code);
/* KS_AMAX: element idx (an i64 constant) of f32 param `param` takes the largest |value|. */
void kir_amax(KirKernel *k, int param, int idx, int value);
/* The element a KS_AMAX statement updates when its target is well formed (an f32 param marked
 * written, an index that is an i64 constant inside it), else -1. */
int64_t kir_amax_element(const KirKernel *k, const KirStmt *st);
/* Opens a loop; its body is what is appended until kir_end. */
void kir_for(KirKernel *k, KirLoopKind kind, int var, int lo, int hi);
void kir_if(KirKernel *k, int cond);
void kir_else(KirKernel *k);                  /* switches the open if to its else-body */
/* Opens a block reduction; append the body, then close with kir_end_reduce(value). */
void kir_reduce(KirKernel *k, KirRedOp op, int result_var, int loop_var, int lo, int hi);
/* The open reduction's lanes (KirStmt.lanes); call right after kir_reduce. */
void kir_reduce_lanes(KirKernel *k, int lanes);
void kir_end_reduce(KirKernel *k, int value);
void kir_end(KirKernel *k);                   /* closes the innermost for/if */
/* Ends the body: top-level statements appended from now on form the tail (KirKernel.tail).
 * Only with no scope open, once. */
void kir_begin_tail(KirKernel *k);
/* Vectorization hints (KirStmt.vec, KirExpr.vec); a backend may ignore them. */
void kir_for_vec(KirKernel *k, int var, int lo, int hi, int width);  /* a thread loop, vec width */
int kir_load_vec(KirKernel *k, int param, int idx);
int kir_shload_vec(KirKernel *k, int shared, int idx);
void kir_store_vec(KirKernel *k, int param, int idx, int value);
void kir_shstore_vec(KirKernel *k, int shared, int idx, int value);
bool kir_kernel_ok(const KirKernel *k);       /* no allocation failed, scopes balanced */

/* ---- printing and checking ------------------------------------------------------------- */
void kir_print_kernel(const KirKernel *k, StrBuf *out);
void kir_print_program(const KirProgram *p, StrBuf *out);
/* Structural checks: types agree, vars defined before use, thread arrays only inside
 * thread loops, thread loops not nested, barriers only at block level; stores and amaxes only
 * to params marked written, an amax of an f32 into an f32 param at a constant element in
 * range, never in the tail; vec accesses only in
 * a vec loop, with an index of the form v or add(B, v), 16-byte multiples, vec stores in the
 * loop's own body and vec loads not of a written param.
 * Then the view check, when the kernel has staged rows or views: the index arithmetic is run
 * for sample blocks (first, second, middle, last) and sample iterations of every loop (all of
 * a short loop; the first, last and a few middle ones of a long one), and every load that
 * carries a view must read the element the view names (a staged row's load must carry one,
 * and its index must lie in the array). Indices that depend on loaded data (a gather's ids)
 * are not known and not checked. */
FcStatus kir_verify(const KirKernel *k, FcErr *err);
/* The structure of a program as a device checks it before compiling (bugs upstream are
 * FC_ERR_INTERNAL; messages start with `who`, e.g. "cpu"): buffer dtypes and sizes, temps
 * inside the workspace at multiples of temp_align, inputs and outputs with an index, launches
 * that name a kernel and bind one buffer that fits each param, no input written, and with
 * restrict_args no buffer bound twice in a launch when one binding is written. *max_args:
 * the most buffers one launch binds (at least 1). */
FcStatus kir_check_program(const KirProgram *p, const char *who, int64_t temp_align, bool restrict_args,
                           int *max_args, FcErr *err);

#endif
