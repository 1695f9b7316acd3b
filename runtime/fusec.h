/* fusec.h: the public C interface of libfusec.
 *
 * fusec compiles a transformer block written in the .tf block language into fused
 * kernels and runs them on the CPU (LLVM JIT) or a CUDA GPU (NVRTC + driver API,
 * loaded at run time), or through the reference interpreter.
 *
 * A worked example (error handling shortened; every call returns a status):
 *
 *     FcOptions *opt; fc_options_new(&opt);
 *     fc_options_set_dim(opt, "B", 2);
 *     FcBlock *blk;
 *     if (fc_compile_file("mlp.tf", opt, &blk) != FC_OK) {
 *         fputs(fc_block_diagnostics(blk), stderr);   // file:line:col: error: ...
 *         ...
 *     }
 *     FcDevice *dev; fc_device_open(FC_DEVICE_CPU, 0, &dev);
 *     FcProgram *prog; fc_program_new(blk, dev, &prog);
 *     FcTensorInfo ti; fc_block_input_info(blk, 0, &ti);      // name, dtype, shape
 *     FcTensor *x; fc_tensor_new(dev, ti.dtype, ti.rank, ti.dims, &x);
 *     fc_tensor_copy_from_host(x, host_data, nbytes);
 *     ... one tensor per input and per output ...
 *     fc_program_run(prog, inputs, outputs);
 *     fc_tensor_copy_to_host(y, host_out, nbytes);
 *     fc_tensor_free(x); ... fc_program_free(prog); fc_device_free(dev);
 *     fc_block_free(blk); fc_options_free(opt);
 *
 * Conventions:
 * - Handles are opaque. Every function that can fail returns an FcStatus.
 * - Each handle keeps the text of its last error (fc_*_last_error); the text stays
 *   valid until the next call on that handle.
 * - Functions named _free accept NULL and do nothing then.
 * - Nothing here calls exit() or abort(). An internal bug returns FC_ERR_INTERNAL and
 *   leaves that handle unusable (later calls on it return FC_ERR_INTERNAL).
 * - Distinct handles may be used from distinct threads at the same time. One handle
 *   must not be used from two threads at once.
 * - Tensor data is dense, row-major (C order).
 */
#ifndef FUSEC_H
#define FUSEC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FUSEC_VERSION_MAJOR 0
#define FUSEC_VERSION_MINOR 1
#define FUSEC_VERSION_PATCH 0
#define FUSEC_VERSION "0.1.0"
/* The version of the library actually linked, e.g. "0.1.0". */
const char *fc_version(void);

/* Status codes. Public enums only grow. */
typedef enum FcStatus {
    FC_OK = 0,
    FC_ERR_INPUT = 1,        /* bad source, shapes, tensor files or tensor arguments */
    FC_ERR_USAGE = 2,        /* bad argument to an API call or option */
    FC_ERR_UNAVAILABLE = 3,  /* the device or its libraries (libcuda, NVRTC) are absent */
    FC_ERR_NOMEM = 5,        /* an allocation failed (host or device) */
    FC_ERR_IO = 6,           /* reading or writing a file failed */
    FC_ERR_DEVICE = 7,       /* a driver, NVRTC or LLVM call failed */
    FC_ERR_DEVICE_LOST = 8,  /* an earlier sticky device error poisoned the context */
    FC_ERR_RUNTIME_DATA = 9, /* bad data found while running (e.g. a gather index out of range) */
    FC_ERR_UNSUPPORTED = 10, /* valid input that this version does not support yet */
    FC_ERR_INTERNAL = 70     /* a bug in fusec; the message says where */
} FcStatus;

/* A short fixed name for a status ("input error", ...). */
const char *fc_status_name(FcStatus s);

/* Element types. The order is fixed; a new type is added at the end. FC_I8 (signed 8-bit,
 * two's complement) is a storage type: casts, index maps, gather and where take it, arithmetic
 * does not (docs/language.md). */
typedef enum FcDtype {
    FC_F64, FC_F32, FC_F16, FC_BF16, FC_F8E4M3, FC_F8E5M2, FC_I32, FC_I64, FC_BOOL, FC_I8,
    FC_DTYPE_COUNT
} FcDtype;
const char *fc_dtype_name(FcDtype t);   /* "f32", ...; NULL for an invalid value */
size_t fc_dtype_size(FcDtype t);        /* bytes per element; 0 for an invalid value */

#define FC_MAX_RANK 8

/* ---- compile options ------------------------------------------------------ */
typedef struct FcOptions FcOptions;
FcStatus fc_options_new(FcOptions **out);
void fc_options_free(FcOptions *o);
/* Binds or overrides a dim (like -D NAME=VALUE). value must be >= 1. */
FcStatus fc_options_set_dim(FcOptions *o, const char *name, int64_t value);
FcStatus fc_options_set_block(FcOptions *o, const char *block_name); /* default: the last block */
FcStatus fc_options_set_fuse(FcOptions *o, int fuse);                /* default 1; 0 = eager */
FcStatus fc_options_set_arch(FcOptions *o, const char *arch);        /* "sm_80" ... default "sm_90" */
FcStatus fc_options_set_entry(FcOptions *o, const char *entry);      /* AOT entry name; a C identifier */
FcStatus fc_options_set_precision(FcOptions *o, const char *p);      /* keep|bf16|f16|f8 */
FcStatus fc_options_set_strict_rounding(FcOptions *o, int on);
FcStatus fc_options_set_train(FcOptions *o, int on);
FcStatus fc_options_set_mem_budget(FcOptions *o, int64_t bytes);   /* with training: cap on saved bytes */
/* With training: what the forward saves for the backward. "auto" (default): the least bytes,
 * matrix products never recomputed, then the budget met with the least recomputed flops;
 * "none": every value the backward reads, as eager autograd saves; "full": only the block's
 * inputs, everything else recomputed. */
FcStatus fc_options_set_remat(FcOptions *o, const char *mode);
const char *fc_options_last_error(const FcOptions *o);

/* ---- compiled blocks -------------------------------------------------------- */
typedef struct FcBlock FcBlock;
/* Compiles a block. On FC_ERR_INPUT (and most other failures) *out is still set, so that
 * fc_block_diagnostics can be read; it is NULL only when even that could not be allocated.
 * The caller frees *out with fc_block_free in every case. opts may be NULL (defaults). */
FcStatus fc_compile_file(const char *path, const FcOptions *opts, FcBlock **out);
/* Like fc_compile_file; filename is used in diagnostics only (may be NULL: "<string>"). */
FcStatus fc_compile_string(const char *source, const char *filename, const FcOptions *opts,
                           FcBlock **out);
void fc_block_free(FcBlock *b);
/* All diagnostics (errors and warnings) as the command line prints them; "" if none. */
const char *fc_block_diagnostics(const FcBlock *b);
const char *fc_block_last_error(const FcBlock *b);
const char *fc_block_name(const FcBlock *b);

typedef struct FcTensorInfo {
    const char *name;            /* the source name; valid while the block lives */
    FcDtype dtype;
    int rank;
    int64_t dims[FC_MAX_RANK];
    int is_param;                /* inputs only: declared with `param` */
    int scaled;                  /* an f8 tensor at the interface of a --precision f8 block: its
                                  * values are q / scale (fc_tensor_set_scale; docs/precision.md) */
    int fp8_slot;                /* scaled: its scale's slot (fc_program_fp8_scales' index); else -1 */
} FcTensorInfo;
int fc_block_num_inputs(const FcBlock *b);
int fc_block_num_outputs(const FcBlock *b);
FcStatus fc_block_input_info(const FcBlock *b, int i, FcTensorInfo *info);
FcStatus fc_block_output_info(const FcBlock *b, int i, FcTensorInfo *info);
/* The index of the input (output) whose name is `name`, as fc_block_input_info
 * (fc_block_output_info) gives it, in *index: the position in fc_program_run's inputs
 * (outputs) array. FC_ERR_USAGE when the block has no such name (*index = -1; the block's last
 * error lists the names it has). Input names are the parameters'; output names follow
 * docs/language.md ("Output names"): a returned plain name, else out0, out1, ... */
FcStatus fc_block_input_index(const FcBlock *b, const char *name, int *index);
FcStatus fc_block_output_index(const FcBlock *b, const char *name, int *index);
/* The documented --check tolerance for output i: max |err| / max |ref| must not exceed it. */
FcStatus fc_block_output_tolerance(const FcBlock *b, int i, double *rel_tol);

typedef enum FcEmitKind {
    FC_EMIT_CUDA, FC_EMIT_PTX, FC_EMIT_CUBIN, FC_EMIT_IR, FC_EMIT_KIR, FC_EMIT_LLVM,
    FC_EMIT_DOT, FC_EMIT_REPORT,
    FC_EMIT_ROOFLINE,            /* an SVG roofline chart of the kernels (added last: the values
                                  * above keep their numbers) */
    FC_EMIT_KIND_COUNT
} FcEmitKind;
/* Produces the block in the given form. *data is allocated by the library (NUL-terminated
 * for text kinds) and freed with fc_buffer_free. FC_EMIT_PTX/CUBIN need NVRTC
 * (FC_ERR_UNAVAILABLE where absent). FC_EMIT_REPORT and FC_EMIT_ROOFLINE measure the CPU's
 * bandwidth and f32 peak once per process unless FUSEC_CPU_GBPS / FUSEC_CPU_GFLOPS give them. */
FcStatus fc_block_emit(FcBlock *b, FcEmitKind kind, char **data, size_t *len);
void fc_buffer_free(void *p);

/* ---- devices ----------------------------------------------------------------- */
typedef enum FcDeviceKind {
    FC_DEVICE_CPU = 0,        /* LLVM JIT, a thread pool (FUSEC_NUM_THREADS) */
    FC_DEVICE_CUDA = 1,       /* NVRTC + driver API, loaded with dlopen */
    FC_DEVICE_REFERENCE = 2   /* the reference interpreter: plain C, f64 accumulation */
} FcDeviceKind;
typedef struct FcDevice FcDevice;
/* FC_ERR_UNAVAILABLE (with the reason) where the device or its libraries are absent. */
FcStatus fc_device_open(FcDeviceKind kind, int ordinal, FcDevice **out);
void fc_device_free(FcDevice *d);
const char *fc_device_last_error(const FcDevice *d);
const char *fc_device_description(const FcDevice *d);  /* e.g. "cpu: AMD EPYC, 2 threads" */
/* Measures a STREAM-style copy (a[i] = b[i], arrays >= 4x the last-level cache) with the
 * device's threads: bytes read plus written per second, best of several, in GB/s. On the CPU,
 * FUSEC_CPU_GBPS, when set, is the figure instead (not a positive number: FC_ERR_USAGE). */
FcStatus fc_device_stream_bandwidth(FcDevice *d, double *gbps);

/* The bytes the tensors and programs made through this handle hold on the device now, and
 * the most they held at once since the handle was opened or fc_device_reset_peak (either
 * pointer may be NULL). A program counts its workspace, and in training its saved buffers. */
FcStatus fc_device_memory(FcDevice *d, int64_t *live_bytes, int64_t *peak_bytes);
FcStatus fc_device_reset_peak(FcDevice *d);

/* ---- tensors ------------------------------------------------------------------- */
typedef struct FcTensor FcTensor;
FcStatus fc_tensor_new(FcDevice *d, FcDtype dtype, int rank, const int64_t *dims, FcTensor **out);
/* Wraps memory the caller owns (host memory for CPU/reference, device memory for CUDA):
 * dense, row-major, at least the tensor's bytes; it must outlive the tensor. Any alignment
 * is accepted. Memory aligned to the element size (CPU, reference) or to 256 bytes (CUDA) is
 * used in place. Other memory is copied: the tensor gets an aligned copy of its own (allocated
 * here: FC_ERR_NOMEM if that fails), fc_program_run and fc_program_time copy a wrapped input
 * into it before running and an output back out of it after (fc_program_time once, outside
 * the timed runs); every other call reads and writes `data` itself. */
FcStatus fc_tensor_wrap(FcDevice *d, FcDtype dtype, int rank, const int64_t *dims, void *data,
                        FcTensor **out);
void fc_tensor_free(FcTensor *t);
FcStatus fc_tensor_copy_from_host(FcTensor *t, const void *src, size_t nbytes);
FcStatus fc_tensor_copy_to_host(const FcTensor *t, void *dst, size_t nbytes);
size_t fc_tensor_nbytes(const FcTensor *t);
const char *fc_tensor_last_error(const FcTensor *t);
/* Loads a .npy file (format 1.0/2.0, little-endian, C order; f64 f32 f16 i32 i64 bool i8) into t.
 * The shape must equal t's; a float file for a float tensor of another dtype is converted
 * (rounded to nearest even), an integer one likewise between integer types (i8 included; every
 * value must fit the tensor's type); float to integer is an error. FC_ERR_INPUT / FC_ERR_IO with
 * the reason. */
FcStatus fc_tensor_load_npy(FcTensor *t, const char *path);
/* Writes t as .npy in its own dtype where NumPy has it (else as f32), atomically: no
 * partial file is left on failure. */
FcStatus fc_tensor_save_npy(const FcTensor *t, const char *path);
/* Compares `got` with `ref` (same dtype and shape, any devices): *max_abs is the largest
 * |got - ref| and *max_rel that divided by the largest |ref|, or by the dtype's smallest
 * normal value where every |ref| is below it (0/0 gives 0; f8 tensors with scales: their
 * values q / scale, and that smallest normal over the smaller scale). Non-finite
 * values must agree in position and kind, else both are set to +inf. */
FcStatus fc_tensor_compare(const FcTensor *got, const FcTensor *ref, double *max_abs,
                           double *max_rel);
/* dst = src * scale, converted to dst's dtype (same shape, any dtypes and devices): the product
 * is taken in f64 and rounded to nearest even (to f8 saturating; to an integer truncated toward
 * zero and saturated, NaN giving 0, as cast does). For example the f32 value of f16 gradients
 * that carry a loss scale S: scale 1/S. */
FcStatus fc_tensor_convert(FcTensor *dst, const FcTensor *src, double scale);
/* f8 tensors carry a scale: element q stands for the value q / scale (scale a power of two in
 * [2^-126, 2^126]; 1 for a new tensor). At --precision f8 a block's float inputs, params and
 * outputs are E4M3 tensors with scales (docs/precision.md, "f8 at the interface"): a program
 * reads its inputs' scales at each run and sets each output's to the scale its delayed scaling
 * stored it with. fc_tensor_set_scale: only for f8 tensors. fc_tensor_quantize: dst (f8) gets
 * the largest scale at which src's largest finite magnitude fits the format (448 for E4M3,
 * 57344 for E5M2; 1 when src is all zeros), then src's values times it, rounded to nearest even
 * and saturating. fc_tensor_convert, fc_tensor_compare, fc_tensor_load_npy and
 * fc_tensor_save_npy use the values (f8 with a scale other than 1 is written as f32). */
FcStatus fc_tensor_set_scale(FcTensor *t, double scale);
FcStatus fc_tensor_scale(const FcTensor *t, double *scale);
FcStatus fc_tensor_quantize(FcTensor *dst, const FcTensor *src);
/* The --check tolerance of every output for these inputs (docs/tolerances.md): rel_tol[j] =
 * fc_block_output_tolerance(b, j) + 2 * spread[j], where spread[j] is max |e - f| / max |e| for
 * the reference interpreter's two legal meanings of 16- and 8-bit float intermediates on these
 * inputs: e rounds them at every op (eager, PyTorch), f keeps them in f32 to the block's
 * outputs (a fused kernel). A block without such intermediates gets spread 0 and runs nothing;
 * otherwise the interpreter runs twice. spread is +inf (so is the tolerance) where e and f
 * disagree on which elements are non-finite. inputs: as fc_program_run's, on any device;
 * rel_tol and spread (may be NULL) have room for fc_block_num_outputs(b) numbers. Use it for
 * every comparison of a program with the reference or of two programs with each other. */
FcStatus fc_block_check_tolerances(FcBlock *b, FcTensor *const *inputs, double *rel_tol, double *spread);

/* Fills t (input i's dtype and shape) with seeded random data as `fusec run` does:
 * floats from N(0, 1), except `param` inputs of rank >= 2 (weight matrices [.., in, out])
 * from N(0, 1/in), so that products keep unit scale, and the scales of an i8 weight [.., in, out] (a float
 * multiplying its cast) from N(0, 1/(73.3^2 in)), so that the dequantized weight does too; i8 uniform in
 * [-127, 127]; integers uniform in a range that keeps every op valid (for
 * gather ids [0, rows of the table), else [0, 16)); bools fair coin flips. */
FcStatus fc_block_random_input(FcBlock *b, int i, uint64_t seed, FcTensor *t);

/* ---- programs: a block loaded on a device --------------------------------------- */
typedef struct FcProgram FcProgram;
FcStatus fc_program_new(FcBlock *b, FcDevice *d, FcProgram **out);
void fc_program_free(FcProgram *p);
const char *fc_program_last_error(const FcProgram *p);
/* Runs the forward. inputs[i] and outputs[i] follow the block's declaration order and must
 * match its dtypes and shapes exactly. */
FcStatus fc_program_run(FcProgram *p, FcTensor *const *inputs, FcTensor *const *outputs);

/* ---- training (a block compiled with fc_options_set_train) ----------------------------- */
/* In a training block fc_program_run also keeps what the backward needs: buffers of its own,
 * and references to the run's input and output tensors, which must stay alive and unchanged
 * until the backward has run. fc_program_backward then takes the gradient of every float output
 * (grad_outputs[j], the output's dtype and shape; entries of other outputs are ignored) and
 * writes the gradient of every float input and param (grad_inputs[i]; entries of integer and
 * bool inputs are ignored). */
FcStatus fc_program_backward(FcProgram *p, FcTensor *const *grad_outputs, FcTensor *const *grad_inputs);
typedef struct FcTrainInfo {
    int64_t saved_bytes;        /* activations kept for the backward (params not counted) */
    int64_t floor_bytes;        /* the least any choice can save */
    int64_t recompute_flops;    /* forward work the backward does again */
    int64_t forward_flops, backward_flops;   /* the two programs, recomputation included */
    int nsaved;                 /* saved values (inputs, outputs and buffers) */
    int nrecomputed;            /* forward nodes recomputed */
} FcTrainInfo;
/* FC_ERR_USAGE for a block compiled without training. */
FcStatus fc_block_train_info(const FcBlock *b, FcTrainInfo *info);
/* The Pareto front of the recompute-vs-store choice: saved bytes against recomputed flops, one
 * point per distinct choice of --remat auto's weight sweep (docs/training.md), and the block's
 * own plan unless a swept point dominates it. Point i of
 * fc_block_train_pareto_count(b) (0 for a block compiled without training), sorted by bytes,
 * ascending; each point recomputes fewer flops than the one before. FC_ERR_USAGE for a block
 * compiled without training or i out of range. */
int fc_block_train_pareto_count(const FcBlock *b);
FcStatus fc_block_train_pareto(const FcBlock *b, int i, int64_t *bytes, int64_t *flops);
/* What the forward keeps for the backward: value i of fc_block_train_num_saved(b) (0 without
 * training), in the plan's order (FcTrainInfo.nsaved of them). */
typedef struct FcSavedInfo {
    FcTensorInfo tensor;   /* dtype and shape; name: the source's name of the value, else
                            * "savedK"; is_param: a param, kept by reference (0 bytes) */
    int64_t bytes;         /* counted in FcTrainInfo.saved_bytes (0 for a param) */
    const char *op;        /* the source op that computes it ("layernorm", "softmax", "matmul"),
                            * or "input" / "param" for a block input; static text */
    int line, col;         /* where that op is in the source; 0 for a block input */
} FcSavedInfo;
int fc_block_train_num_saved(const FcBlock *b);
FcStatus fc_block_train_saved(const FcBlock *b, int i, FcSavedInfo *info);
/* The memory of a compiled program's kernel plan (the GPU-shaped plan for --arch, as --emit kir
 * shows it): the bytes of its input and output buffers, and of its workspace (every temporary
 * buffer at its offset; buffers are not reused yet). which: 0 the forward (in training it also
 * writes the saved values as outputs), 1 the backward (training only; its inputs are the saved
 * values, params included, and the outputs' gradients; its outputs the inputs' gradients).
 * FC_ERR_USAGE for another `which`. */
typedef struct FcPlanMemory {
    int64_t input_bytes, output_bytes, workspace_bytes;
} FcPlanMemory;
FcStatus fc_block_plan_memory(FcBlock *b, int which, FcPlanMemory *m);
/* The documented --check tolerance of the gradient of input i (a float input), as
 * fc_block_output_tolerance's rule applied to the backward: max |err| / max |ref|. */
FcStatus fc_block_grad_tolerance(const FcBlock *b, int i, double *rel_tol);
/* The --check tolerance of every gradient for these inputs and outputs' gradients, as
 * fc_block_check_tolerances's rule applied to the backward: rel_tol[i] =
 * fc_block_grad_tolerance(b, i) + 2 * spread[i], spread[i] from the reference interpreter's two
 * meanings of 16- and 8-bit float intermediates on the forward-and-backward graph (0, and nothing
 * runs, without such intermediates). inputs and grad_outputs as fc_program_run's and
 * fc_program_backward's; rel_tol and spread (may be NULL) have room for fc_block_num_inputs(b)
 * numbers (0 for inputs that are not floats). Use it for every comparison of gradients.
 * FC_ERR_USAGE for a block compiled without training. */
FcStatus fc_block_check_grad_tolerances(FcBlock *b, FcTensor *const *inputs, FcTensor *const *grad_outputs,
                                        double *rel_tol, double *spread);
/* How much keeping the gradients in their values' dtypes may move the reference gradient of
 * float input i for these inputs and outputs' gradients: the largest relative change (max |d| /
 * max |ref|, in input i's dtype) over eight runs of the reference interpreter's backward with
 * rounding-level noise (eight seeds) on every value's gradient and on each contribution to an
 * f32, 16- or 8-bit one (an f8 one rounded to f8), as an autograd engine adds contributions in the
 * value's dtype. Where two
 * contributions cancel, one rounding each moves the sum by far more than the rounding spread of
 * fc_block_check_grad_tolerances shows; `fusec run --check` widens a gradient's tolerance to
 * fc_block_grad_tolerance(b, i) + 2 * max(spread[i], *noise) when it fails the first. *noise is 0,
 * and nothing runs, for a block without f32, 16- or 8-bit values (f64 throughout). FC_ERR_USAGE for a block compiled
 * without training or an input that is not a float. */
FcStatus fc_block_grad_noise_spread(FcBlock *b, FcTensor *const *inputs, FcTensor *const *grad_outputs, int i,
                                    double *noise);
/* Fills t (output j's dtype and shape, a float output) with a seeded N(0, 1) gradient as
 * `fusec run --train` does for an output without --grad-output: a stream of its own per
 * output, distinct from the inputs' of fc_block_random_input. */
FcStatus fc_block_random_grad_output(FcBlock *b, int j, uint64_t seed, FcTensor *t);

/* The bytes a run of p holds on its device by the plan: its inputs, outputs and workspace (in
 * training: one workspace for the forward and the backward on the CPU, the larger of the two),
 * and in training the saved buffers and the gradients of the float inputs and outputs. With
 * exactly those tensors made on a device handle of its own, fc_device_memory's peak equals it. */
FcStatus fc_program_planned_bytes(const FcProgram *p, int64_t *bytes);

/* Dynamic loss scaling (mixed-precision training: f16 gradients underflow below 6e-8, and a
 * loss averaged over many elements gives gradients that small). After
 * fc_program_set_loss_scaling(p, init_scale, growth_interval), fc_program_backward multiplies
 * the outputs' gradients by the loss scale S (init_scale, a power of two >= 1; 0 turns scaling
 * off, the default) before the backward runs, so that every gradient inside the backward is S
 * times larger; when a gradient comes out non-finite, S halves and the backward runs again
 * (down to S = 1, where the gradients are returned as they come), and after growth_interval
 * backward passes in a row with finite gradients (0: never) S doubles. PyTorch's GradScaler
 * uses 65536 and 2000. The gradients fc_program_backward leaves carry the scale: divide them
 * by fc_program_loss_scale's S, in f32 (fc_tensor_convert), before an optimizer step.
 * *backoffs counts the backward passes run again since scaling was set. FC_ERR_UNSUPPORTED for a
 * block whose backward stores a gradient in f8 (which saturates instead of overflowing, so a
 * scale too large for it would go unseen). */
FcStatus fc_program_set_loss_scaling(FcProgram *p, double init_scale, int growth_interval);
FcStatus fc_program_loss_scale(const FcProgram *p, double *scale, int *backoffs);

/* f8 delayed scaling (--precision f8, docs/precision.md): every tensor stored in f8 has a slot
 * whose scale (a power of two) the program sets at the start of each run from the largest
 * magnitudes of that tensor in its last 16 runs (s * amax <= 448 for E4M3), kept in a state each
 * program owns. A new program starts with the block's scales (1 unless set below), so its first
 * run saturates what lies above 448 / s, and a tensor computed from a saturated one is then
 * too small too: run steps until fc_program_fp8_scales stops changing (a chain of k f8 tensors
 * settles in at most k + 1 runs) before the steps that count; `fusec run` does.
 * fc_block_num_fp8_slots: how many slots (0 at other precisions). fc_program_fp8_scales: the
 * scales of p's last run (the block's on the reference device), n = the slot count.
 * fc_block_set_fp8_scales: the scales the reference interpreter uses for this block (the
 * reference device, fc_block_check_tolerances, fc_program_check_kernels, fc_block_bisect) and
 * that new programs start with: copy a program's in to compare like with like (fusec run
 * --check does). Not thread-safe with other calls on the block. */
int fc_block_num_fp8_slots(const FcBlock *b);
/* Slot k's format: FC_F8E4M3 for a value's, FC_F8E5M2 for a gradient's (a training block: each
 * value's slot has one for its gradient, which the backward's own runs scale). */
FcStatus fc_block_fp8_slot_dtype(FcBlock *b, int k, FcDtype *dtype);
FcStatus fc_program_fp8_scales(FcProgram *p, double *scales, int n);
FcStatus fc_block_set_fp8_scales(FcBlock *b, const double *scales, int n);
/* Sets the block's scales (as fc_block_set_fp8_scales) from runs of the reference interpreter
 * on `inputs` (tensors of any device, the block's dtypes and shapes), repeated until the scales
 * settle (a tensor computed from one that saturated at the last run's scale grows once that
 * scale falls): what delayed scaling settles to on these inputs. Programs made afterwards
 * start with them, and their first run keeps them (its history is empty): every program of
 * the block and the reference then scale alike from the first run, which the tests use. */
FcStatus fc_block_calibrate_fp8(FcBlock *b, FcTensor *const *inputs);
/* A training block (--train): fc_block_calibrate_fp8, then the scales of the gradients' E5M2
 * slots from runs of the reference interpreter's backward on `inputs` and `grad_outputs` (as
 * fc_program_backward takes them), repeated until they settle: what the backward's delayed
 * scaling settles to, so that a new program's first backward does not run its gradients at
 * scale 1 (where those under 2^-16 are 0). FC_ERR_USAGE for a block not compiled for training. */
FcStatus fc_block_calibrate_fp8_grads(FcBlock *b, FcTensor *const *inputs, FcTensor *const *grad_outputs);

/* Times whole training steps, forward then backward, as fc_program_time does the forward:
 * `warmup` + `repeat` steps, the median in *total_ms; per_launch_ms (may be NULL) gets one
 * median per launch, the forward's then the backward's (fc_program_num_launches counts both in
 * a training program), each timed inside `repeat` more steps. Leaves the outputs and gradients
 * of the last step. */
FcStatus fc_program_time_train(FcProgram *p, FcTensor *const *inputs, FcTensor *const *outputs,
                               FcTensor *const *grad_outputs, FcTensor *const *grad_inputs, int warmup, int repeat,
                               double *total_ms, double *per_launch_ms);

/* One entry per launch, library calls included, in execution order. In a training program,
 * the forward's launches then the backward's. */
typedef struct FcLaunchInfo {
    const char *name;     /* kernel name, e.g. "k3_layernorm" */
    const char *ops;      /* the source ops it runs, comma-separated */
    int64_t bytes;        /* modelled minimum: each input read once, each output written once */
    int64_t flops;
    int runs_in;          /* -1; or the launch that runs this one itself, panel by panel or block by
                           * block (the CPU: a matrix product making its operands in the cache, or
                           * running its epilogue while C is there), whose time is the pair's */
} FcLaunchInfo;
int fc_program_num_launches(const FcProgram *p);
FcStatus fc_program_launch_info(const FcProgram *p, int i, FcLaunchInfo *info);
/* Runs `warmup` + `repeat` times and stores the median wall time of the whole forward
 * (*total_ms) and, if per_launch_ms is not NULL, of each launch (an array of
 * fc_program_num_launches doubles), each timed inside `repeat` more runs of the whole
 * program, launch by launch in order (so it sees the caches as a real run leaves them). */
FcStatus fc_program_time(FcProgram *p, FcTensor *const *inputs, FcTensor *const *outputs,
                         int warmup, int repeat, double *total_ms, double *per_launch_ms);

/* ---- the error of each kernel ------------------------------------------------------ */
/* fc_program_check_kernels runs p launch by launch on `inputs` (into `outputs`; a training
 * program then runs the backward launch by launch with grad_outputs into grad_inputs, which may
 * be NULL to check the forward only) and, after each launch, compares every value that launch
 * leaves in memory for good (an output, a saved value, a temporary a later kernel reads) with the
 * reference interpreter's value of it, each within the --check tolerance it would have as an
 * output of the program's graph (fc_block_check_tolerances' rule: the reductions and dtypes on
 * its path, widened by the rounding spread of its 16/8-bit intermediates). The backward's
 * reference starts from the backward's own inputs (the saved values the forward wrote and the
 * gradients): its kernels are judged on what they were given. A value over its bound whose
 * reference moves by at least a quarter of its error when the interpreter runs with
 * rounding-level noise on every op (rt_interp_run_noisy, the most over four seeds; with f8
 * quantizations four more that leave the quantizations alone, whose noise can flip a choice
 * that masks the value) is
 * ill-conditioned (a difference of
 * nearly equal values, such as the sum of a softmax's input gradient), counted in illcond and
 * not as a failure. fn gets one FcKernelCheck per
 * launch that leaves a value; *nfailed (may be NULL) counts the launches over their bound. Under
 * loss scaling (fc_program_set_loss_scaling) the backward runs with the scaled gradients. At
 * --precision f8 the block's scales are first set to those this run uses (as
 * fc_block_set_fp8_scales; the run's own first kernel sets them from the state). The
 * outputs and gradients are left as a run leaves them. On the reference device there are no
 * kernels: fn is never called. */
typedef struct FcKernelCheck {
    int launch;             /* fc_program_launch_info's index (the backward's after the forward's) */
    int backward;
    const char *kernel;     /* "k3_layernorm" */
    const char *ops;        /* its source ops, each once */
    int nvalues;            /* values it leaves in memory that were checked */
    const char *op;         /* the worst of them (by error over its bound): the op that makes it, */
    const char *source_op;  /* the source op that op implements, */
    int line, col;          /* where the source wrote it (0 when unknown), */
    const char *name;       /* its source name or NULL */
    double max_abs_err, max_rel_err, tol;   /* its error and bound */
    int ok;                 /* every value within its bound or ill-conditioned */
    int illcond;            /* values over their bound that rounding noise explains (not failures) */
} FcKernelCheck;
typedef int (*FcKernelCheckFn)(const FcKernelCheck *k, void *ctx);
FcStatus fc_program_check_kernels(FcProgram *p, FcTensor *const *inputs, FcTensor *const *outputs,
                                  FcTensor *const *grad_outputs, FcTensor *const *grad_inputs, FcKernelCheckFn fn,
                                  void *ctx, int *nfailed);

/* ---- bisection: which value goes wrong first ------------------------------------- */
/* fc_block_bisect checks the block's values one at a time, in the order the graph computes
 * them: for each op with a float result, the prefix of the block that ends at it (its inputs,
 * every op up to it, that op's results as the outputs) is compiled with the block's options,
 * run on device d with `inputs`, and compared with the reference interpreter within the
 * --check tolerance of that prefix (fc_block_check_tolerances' rule). `fn` gets each step;
 * the bisection stops at the first value over its tolerance (*first_bad: its step number, else
 * -1) or when fn returns nonzero. With grad_outputs (a training block: fc_program_backward's
 * gradients of the outputs) it walks the joint graph instead, the forward's primitives and then
 * the backward's, each prefix compiled as a forward program (so the gradients' ops are checked as
 * a forward program fuses them; what the remat split changes is not). */
typedef struct FcBisectStep {
    int step;               /* 0, 1, ... in graph order */
    const char *op;         /* the op ("layernorm", "mul") */
    const char *source_op;  /* the source op it implements (differs from op after decomposition) */
    int line, col;          /* where the source wrote it; 0 when unknown */
    const char *name;       /* the value's source name, or NULL */
    int backward;           /* joint graph: the op is the backward's */
    const char *kernel;     /* the kernel of the prefix's program on d that writes the value ("" on
                             * the reference device), and its ops */
    const char *kernel_ops;
    double max_abs_err, max_rel_err, tol;
    int ok;                 /* max_rel_err <= tol */
    int unfused_ok;         /* a failing step: 1 or 0, the unfused (eager) program of the same
                             * prefix within tolerance; -1 when not known (ok steps, --no-fuse) */
} FcBisectStep;
typedef int (*FcBisectFn)(const FcBisectStep *step, void *ctx);
FcStatus fc_block_bisect(FcBlock *b, FcDevice *d, FcTensor *const *inputs, FcTensor *const *grad_outputs,
                         FcBisectFn fn, void *ctx, int *first_bad);

#ifdef __cplusplus
}
#endif
#endif
