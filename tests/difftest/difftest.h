/* difftest.h: the random-graph differential tester's program model, shared by the generator
 * (gen.c) and the driver (difftest.c: run, compare, minimize, CLI).
 *
 * A generated program is kept as data, not only as text, so that the minimizer can delete
 * statements and replace operands and re-render: every value (input or statement result) is a
 * DtVal with its dtype and shape tracked by the language's rules (docs/language.md,
 * ir/shape.c), and every statement is an expression template whose operand slots `{k}` refer to
 * earlier values by id. dt_render turns a DtProg into .tf source, which is the reproducer.
 *
 * Invariants: operands of statement s are values defined before s (inputs or results of earlier
 * statements); value ids index DtProg.v; names are made here ("x<id>" for inputs, "v<id>" for
 * results), never taken from anywhere else.
 */
#ifndef FUSEC_DIFFTEST_H
#define FUSEC_DIFFTEST_H

#include "fusec.h"

#include <stdbool.h>
#include <stdint.h>

#define DT_MAXV 256      /* values in one program */
#define DT_MAXS 64       /* statements */
#define DT_MAXIN 16      /* inputs (the minimizer may add some) */
#define DT_MAXOPS 6      /* operand slots of one statement */
#define DT_MAXRES 4      /* results of one statement (split) */
#define DT_MAXOUT 4      /* returned values */
#define DT_MAXRANK 4
#define DT_MAXNUMEL 4096 /* elements of any tensor the generator makes */
#define DT_TMPL 512      /* bytes of an expression template */

typedef struct DtVal {
    FcDtype dt;
    int rank;
    int64_t d[DT_MAXRANK];
    double mag;         /* floats: a rough bound on |x|; ints/bools: max(|lo|, |hi|) */
    int64_t lo, hi;     /* ints and bools: the exact range of the values */
    bool exact;         /* every path (fused, eager, oracle) computes the same bits */
    unsigned constax;   /* bit a: the value is constant along axis a (broadcast, iota, full) */
    unsigned centax;    /* nonzero: the value sums to a constant over the axes of this mask (0 for
                         * a layernorm with a constant gain and no bias: a sum or mean over them
                         * is pure rounding noise; 1 for a softmax in a training program: the
                         * gradient of such a sum is 0 up to rounding), so the generator makes
                         * no sum or mean over them */
    bool input;
    bool param;         /* an input declared `param` (training programs: a weight) */
} DtVal;

typedef struct DtStmt {
    char tmpl[DT_TMPL]; /* the right-hand side; {k} is operand k */
    int nops, ops[DT_MAXOPS];
    int nres, res[DT_MAXRES];
    int op;             /* DtOp kind, for statistics */
} DtStmt;

typedef struct DtProg {
    DtVal v[DT_MAXV];
    int nv;
    int in[DT_MAXIN];   /* input value ids, in declaration order */
    int nin;
    DtStmt s[DT_MAXS];
    int ns;
    int out[DT_MAXOUT]; /* returned value ids */
    int nout;
    int nrowview;       /* row-reduction-plus-view patterns made (gen.c g_rowview; statistics) */
    int nties;          /* tie patterns made (gen.c g_ties, training programs; statistics) */
    int nrepeat;        /* statements made again (gen.c g_repeat; statistics) */
} DtProg;

/* The ops the generator can emit (one per source op of docs/ops.md). The names are the
 * language's, used by --exclude and in statistics. */
#define DT_OPS(X)                                                                             \
    X(NEG, "neg") X(ABS, "abs") X(EXP, "exp") X(LOG, "log") X(SQRT, "sqrt") X(RSQRT, "rsqrt")   \
    X(RECIP, "recip") X(SQUARE, "square") X(TANH, "tanh") X(SIGMOID, "sigmoid")                 \
    X(RELU, "relu") X(SILU, "silu") X(ERF, "erf") X(NDTR, "ndtr") X(SIN, "sin") X(COS, "cos")                   \
    X(GELU, "gelu") X(ADD, "add") X(SUB, "sub") X(MUL, "mul") X(DIV, "div") X(POW, "pow")      \
    X(MAXIMUM, "maximum") X(MINIMUM, "minimum") X(CMP, "compare") X(WHERE, "where")            \
    X(CAST, "cast") X(SUM, "sum") X(MEAN, "mean") X(MAX, "max") X(MIN, "min")                   \
    X(SOFTMAX, "softmax") X(LOG_SOFTMAX, "log_softmax") X(LAYERNORM, "layernorm")               \
    X(RMSNORM, "rmsnorm") X(CAUSAL_MASK, "causal_mask") X(ATTENTION, "attention")             \
    X(RESHAPE, "reshape") X(TRANSPOSE, "transpose") X(BROADCAST, "broadcast")                  \
    X(CONCAT, "concat") X(SPLIT, "split") X(SLICE, "slice") X(IOTA, "iota") X(FULL, "full")     \
    X(GATHER, "gather") X(SCATTER_ADD, "scatter_add") X(MATMUL, "matmul") X(DROPOUT, "dropout") X(DROPOUT_MASK, "dropout_mask")   \
    X(CROSS_ENTROPY, "cross_entropy")

typedef enum DtOp {
#define DT_ENUM(ID, NAME) DT_OP_##ID,
    DT_OPS(DT_ENUM)
#undef DT_ENUM
    DT_OP_COUNT
} DtOp;

extern const char *const dt_op_names[DT_OP_COUNT];

typedef struct DtGenConfig {
    int min_stmts, max_stmts;     /* statements per program (3..25 by default) */
    bool exclude[DT_OP_COUNT];    /* ops never generated */
    bool train;                   /* a program worth differentiating (gen.c, "Training programs") */
} DtGenConfig;

/* Fills *p with a random valid program from seed. Never fails (an op whose operands cannot be
 * found is replaced by another); the program has at least one statement and one output. */
void dt_generate(DtProg *p, uint64_t seed, const DtGenConfig *cfg);

/* Renders p as .tf source (block `g`), with `header` (may be NULL) as leading comment lines.
 * Returns a malloc'd string. */
char *dt_render(const DtProg *p, const char *header);

/* Like dt_render (no header), with noise injected for the conditioning check: after every
 * statement, each result that is a float and not exact is multiplied by
 * (1 + delta * pattern), pattern a seeded function of the element index in [-1, 1] and delta
 * 4 unit roundoffs (f32, f64) or 2 (narrower floats): rounding-level noise on every computed
 * value, which the oracle then propagates. Needs the tracked shapes (not after dims shrink). */
char *dt_render_noisy(const DtProg *p, uint64_t seed);

/* The op named `name` (DT_OP_COUNT if none). */
int dt_op_by_name(const char *name);

/* splitmix64: the PRNG step both files use. */
uint64_t dt_mix(uint64_t x);

#endif
