/* ir.h: the graph IR.
 *
 * A graph is a block: typed input values, nodes in topological order, output values.
 * Values and nodes live in arrays and refer to each other by integer ids (QBE style);
 * strings and per-node arrays live in the graph's arena and go with it.
 *
 * Invariants (checked by ir_verify):
 * - nodes[i] reads only values defined by inputs or by nodes[j], j < i;
 * - every value's dtype/shape is what the op's shape rule gives for its inputs/attributes;
 * - elementwise binary ops, comparisons and where's two data inputs share one dtype
 *   (the builder inserts casts, following the language's promotion rules);
 * - attributes are normalized (axes non-negative and sorted, slice bounds clamped).
 *
 * Entry points: ir_graph_new/free, ir_add_input, ir_add_node (runs the shape rule),
 * ir_add_output; ir_print/ir_parse (printer.c, parse.c); ir_verify (verify.c).
 */
#ifndef FUSEC_IR_H
#define FUSEC_IR_H

#include "support.h"

/* ---- op table ------------------------------------------------------------------- */
typedef enum IrCategory {
    IR_CAT_UNARY, IR_CAT_BINARY, IR_CAT_COMPARE, IR_CAT_SELECT, IR_CAT_CAST,
    IR_CAT_REDUCE, IR_CAT_COMPOSITE, IR_CAT_SHAPE, IR_CAT_GENERATOR, IR_CAT_GATHER,
    IR_CAT_SCATTER, IR_CAT_MATMUL, IR_CAT_COUNT
} IrCategory;

typedef enum IrOp {
#define OP(ID, NAME, MININ, MAXIN, NOUT, CAT, ATTRS, SHAPE, FLOPS) IR_OP_##ID,
#include "ops.def"
#undef OP
    IR_OP_COUNT
} IrOp;

typedef struct IrGraph IrGraph;
typedef struct IrNode IrNode;
/* A shape rule: from the node's input values and attributes, normalizes the attributes
 * and sets out_dtype[k]/out_shape[k] for each result (and *nout when NOUT is -1).
 * On a user error returns FC_ERR_INPUT with a message (no location; the caller adds it). */
typedef struct IrShape IrShape;
typedef FcStatus (*IrShapeFn)(const IrGraph *g, IrNode *n, FcDtype *out_dtype,
                              IrShape *out_shape, int *nout, FcErr *err);

typedef struct IrOpInfo {
    const char *name;
    int min_in, max_in;    /* max_in -1: any number */
    int nout;              /* -1: from attributes */
    IrCategory cat;
    const char *attrs;     /* "slot:name ..." (ops.def) */
    IrShapeFn shape;
    int flops;             /* per output element (see ops.def) */
} IrOpInfo;
extern const IrOpInfo ir_ops[IR_OP_COUNT];
/* The op with this source name, or -1. */
int ir_op_lookup(const char *name);

/* ---- dtypes and shapes ------------------------------------------------------------ */
#define IR_MAX_RANK FC_MAX_RANK
struct IrShape {
    int rank;
    int64_t dims[IR_MAX_RANK];   /* each >= 1 */
};
bool ir_dtype_is_float(FcDtype t);
bool ir_dtype_is_int(FcDtype t);       /* i32, i64 (not bool, not i8) */
/* i8 is a storage type (docs/language.md): casts, the index maps (IR_CAT_SHAPE), where's two
 * data inputs and gather's table take i8 values; any other operand of an op is an error with
 * this message (the op's source name first), and no generator makes i8 values. */
#define IR_I8_OPERAND_MSG "'%s' does not take i8 operands: i8 is a storage type; cast it first (cast(w, f32) * scale)"
/* Checks n's inputs (and a generator's dtype) against the rule above; an FC_ERR_INPUT with
 * IR_I8_OPERAND_MSG. Run by ir_add_node and the verifier before the op's shape rule. */
FcStatus ir_check_storage_operands(const IrGraph *g, const IrNode *n, FcErr *err);
int ir_dtype_lookup(const char *name); /* FcDtype or -1 */
/* Element count; false on int64 overflow. */
bool ir_shape_numel(const IrShape *s, int64_t *numel);
bool ir_shape_eq(const IrShape *a, const IrShape *b);
/* Bytes of a tensor; false on overflow. */
bool ir_shape_nbytes(const IrShape *s, FcDtype t, int64_t *nbytes);
/* Formats "f32[4, 256, 768]" into buf. */
void ir_type_str(FcDtype t, const IrShape *s, char *buf, size_t n);
/* NumPy broadcast of a and b into out; false when incompatible. */
bool ir_shape_broadcast(const IrShape *a, const IrShape *b, IrShape *out);

/* ---- values and nodes -------------------------------------------------------------- */
typedef struct IrLoc { int line, col; } IrLoc;   /* 1-based; 0 when unknown */

typedef struct IrValue {
    FcDtype dtype;
    IrShape shape;
    int node;           /* producing node id; -1 for a block input */
    int result;         /* which result of that node; for an input, its input index */
    const char *name;   /* source name (arena) or NULL */
} IrValue;

/* Attributes; which slots an op uses is given by its ATTRS string in ops.def. */
typedef struct IrAttrs {
    int nlist;
    int64_t *list;       /* axes, perm, shape or sizes (arena) */
    int64_t i[4];
    double f;
    FcDtype dtype;
} IrAttrs;

enum { IR_APPROX_NONE = 0, IR_APPROX_TANH = 1 };

struct IrNode {
    IrOp op;
    int nin;
    int *in;             /* value ids (arena) */
    int nout;
    int *out;            /* value ids (arena) */
    IrAttrs a;
    IrLoc loc;           /* where in the source the op was written */
    int origin;          /* id of the source op this node implements (eager grouping) */
    IrOp origin_op;      /* and that op */
};

/* A cast's "wide" attribute (ops.def): a storage cast a pass inserts (a float cast to bf16 or
 * f16) may stay in f32 inside a fused kernel, as a computing op's narrow result does; the
 * source's casts round wherever they are computed. ir_cast_may_stay_wide says which casts may
 * be wide; ir_storage_cast gives a pass's cast attributes (wide where it may be). */
bool ir_cast_may_stay_wide(FcDtype from, FcDtype to);
IrAttrs ir_storage_cast(FcDtype from, FcDtype to);
/* Is n a transpose that swaps the last two dims of its rank-`rank` result and keeps the others
 * (what a matrix library reads with its transpose flag)? */
bool ir_swaps_last_two(const IrNode *n, int rank);
/* Is op elementwise (unary, binary, comparison, select, cast): element i of its result reads
 * element i of each operand, after broadcasting? */
bool ir_op_elementwise(IrOp op);

/* A slot of f8 delayed scaling (--precision f8; docs/precision.md "f8"): one per tensor stored
 * in f8. The programs keep the slot's scale and amax history in their state buffer; `scale` is
 * the scale the reference interpreter uses for fp8_scale (1 unless --check copies a program's
 * in). */
typedef struct IrFp8Slot {
    FcDtype fmt;      /* FC_F8E4M3 or FC_F8E5M2 */
    double scale;     /* a positive finite power of two */
    bool read_only;   /* this graph's program reads the slot's scale but neither records its amax
                       * nor updates it (a training step's backward, recomputing forward values:
                       * the forward's program owns the slot; the forward, for its gradients' slots) */
    int grad;         /* --train: the E5M2 slot of this tensor's gradient (passes/autodiff.c rounds
                       * the adjoint of the slot's fp8_quant with it), -1 none */
    int input;        /* the block input (index into inputs) whose scale this is: an f8 tensor at the
                       * interface, whose caller sets the scale for each run (FcTensor's scale);
                       * no fp8_quant, no amax, no update; -1 none */
} IrFp8Slot;

struct IrGraph {
    Arena arena;
    const char *name;           /* block name */
    const char *file;           /* source file, for messages */
    FC_VEC(IrValue) values;
    FC_VEC(IrNode) nodes;
    FC_VEC(int) inputs;         /* value ids, declaration order */
    FC_VEC(bool) is_param;      /* parallel to inputs */
    FC_VEC(int) outputs;        /* value ids */
    FC_VEC(const char *) output_names; /* parallel to outputs (arena) */
    int next_origin;            /* next fresh origin id */
    FC_VEC(IrFp8Slot) fp8;      /* f8 scaling slots, indexed by fp8_scale's and fp8_quant's slot */
};

IrGraph *ir_graph_new(const char *name, const char *file);  /* NULL on OOM */
void ir_graph_free(IrGraph *g);

/* Adds an f8 scaling slot of format fmt (scale 1); returns its index, or -1 on OOM. */
int ir_add_fp8_slot(IrGraph *g, FcDtype fmt);
/* The f8 slot whose scale value v is stored with: v an fp8_quant's result, an interface input
 * with a slot, or an index map (reshape, transpose, ...) of one such value; -1 none (a value
 * the source declared f8, whose scale is 1). */
int ir_fp8_slot_of(const IrGraph *g, int v);
/* Adds a block input; returns its value id, or -1 on OOM. */
int ir_add_input(IrGraph *g, const char *name, FcDtype t, const IrShape *s, bool is_param);
/* Adds a node: copies ins and attrs (list included), runs the shape rule, creates the
 * result values. origin < 0 means "a new source op" (a fresh origin id, origin_op = op).
 * On success stores the first result's value id in *out0 (results are consecutive ids).
 * FC_ERR_INPUT: the shape rule's message is in err. */
FcStatus ir_add_node(IrGraph *g, IrOp op, const int *ins, int nin, const IrAttrs *attrs,
                     IrLoc loc, int origin, IrOp origin_op, int *out0, FcErr *err);
FcStatus ir_add_output(IrGraph *g, int value, const char *name, FcErr *err);
/* Copying a graph (passes that rebuild one; the bisection's prefixes). ir_copy_inputs starts
 * dst (new, empty) as src's interface: next_origin, and every input with its name, shape, dtype
 * (retype[dtype] when retype is given and not -1) and param flag; map[v] (room for
 * src->values.len) becomes the dst id of each input and -1 elsewhere. ir_copy_outputs ends the
 * copy (every src output through map, its name kept). ir_copy_inputs also copies the f8 slots. ir_readd_node adds a node
 * for src node n (its loc, origin and origin op) with the given op, inputs (dst ids) and attrs: a
 * pass's own rewrite, so a shape rule that refuses it is an internal error naming `who`. */
FcStatus ir_copy_inputs(IrGraph *dst, const IrGraph *src, const int *retype, int *map, FcErr *err);
/* dst (with no slots yet) gets src's f8 slots, formats and scales (ir_copy_inputs does it; passes
 * that build a graph's interface their own way call it). */
FcStatus ir_copy_fp8_slots(IrGraph *dst, const IrGraph *src, FcErr *err);
FcStatus ir_copy_outputs(IrGraph *dst, const IrGraph *src, const int *map, FcErr *err);
FcStatus ir_readd_node(IrGraph *dst, const IrNode *n, IrOp op, const int *ins, int nin, const IrAttrs *a,
                       const char *who, int *out0, FcErr *err);
/* After copying src node n into dst with its results from id `first`: map[n's result r] =
 * first + r, and each result keeps its source name. */
FcStatus ir_map_results(IrGraph *dst, const IrGraph *src, const IrNode *n, int first, int *map, FcErr *err);
/* The prefix of g that ends at node `last`: every input of g (same order), nodes 0..last, and
 * as outputs the float results of node `last`, named "value", "value1", ...; NULL in *out (and
 * FC_OK) when node `last` has no float result. Value names come along. */
FcStatus ir_graph_prefix(const IrGraph *g, int last, IrGraph **out, FcErr *err);
/* The same with outputs of one's choosing: nodes 0..last of g and its values vals[0..n) (each
 * defined by an input or a node up to last) as outputs, named "value", "value1", ... */
FcStatus ir_graph_with_outputs(const IrGraph *g, int last, const int *vals, int n, IrGraph **out, FcErr *err);
/* The modelled flops of node n (ops.def's FLOPS: per output element; reductions per input
 * element; a matrix product 2 M N K per batch), saturating at INT64_MAX. */
int64_t ir_node_flops(const IrGraph *g, const IrNode *n);

static inline IrValue *ir_val(IrGraph *g, int id) { return &g->values.data[id]; }
static inline const IrValue *ir_cval(const IrGraph *g, int id) { return &g->values.data[id]; }

/* ---- printing, parsing, verifying (printer.c, parse.c, verify.c) ---------------------- */
/* The deterministic text form; everything the graph holds. */
void ir_print(const IrGraph *g, StrBuf *out);
/* Parses the printed form back (file is used in messages). */
FcStatus ir_parse(const char *text, const char *file, IrGraph **out, FcErr *err);
/* Checks the invariants above; FC_ERR_INTERNAL with the first violation. */
FcStatus ir_verify(const IrGraph *g, FcErr *err);

#endif
