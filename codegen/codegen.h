/* codegen.h: printers of the kernel IR. They decide nothing: every schedule decision is in
 * the KirProgram they are given. */
#ifndef FUSEC_CODEGEN_H
#define FUSEC_CODEGEN_H

#include "kir.h"

/* cuda.c ------------------------------------------------------------------------------------
 * The kernels of p as CUDA C, self-contained (no #include: storage conversions for
 * f16/bf16/f8 are defined in the preamble), each `extern "C" __global__`, named
 * kir->name, parameters in KirParam order (then `int *status` if uses_status), launched
 * with grid = k->grid blocks of k->block threads. NVRTC compiles this text alone. */
FcStatus cg_cuda_kernels(const KirProgram *p, StrBuf *out, FcErr *err);
/* Bytes of dynamic shared memory a launch of k needs: its shared arrays when they do not fit
 * in static shared memory (48 KiB), laid out in one `extern __shared__` buffer; 0 when they
 * do (static arrays); -1 for a malformed kernel. The launcher must pass it and, above 48 KiB,
 * raise the kernel's MAX_DYNAMIC_SHARED_SIZE_BYTES first. */
int64_t cg_cuda_dynamic_shared(const KirKernel *k);
/* The AOT translation unit of docs/cli.md: the kernels plus extern "C" host functions
 * fusec_<entry>_workspace_size(size_t *bytes) and fusec_<entry>_forward(inputs..., outputs...,
 * void *workspace, size_t workspace_bytes, cudaStream_t stream), with a comment at the top
 * giving the signatures, each argument's source name, dtype and shape, and how to link.
 * `io` describes the block's inputs and outputs (names are validated C-comment-safe by
 * the caller; they appear only in comments). */
typedef struct CgIoDesc {
    const char *name;     /* source name, for comments */
    FcDtype dtype;
    IrShape shape;
    bool is_output;
    int fp8_slot;         /* an f8 tensor at the interface: its slot of the f8 state, else -1 */
} CgIoDesc;
FcStatus cg_cuda_aot(const KirProgram *p, const char *entry, const CgIoDesc *io, int nio,
                     StrBuf *out, FcErr *err);
/* Training (`fusec --train --emit cuda`, docs/cuda.md): one unit with the forward program fwd
 * and the backward program t->bwd: fusec_<entry>_workspace_size, _saved_bytes, _forward(inputs...,
 * outputs..., void *saved, workspace...), _backward_workspace_size and _backward(inputs...,
 * outputs..., const void *saved, grad_outputs... (one per float output), grad_inputs... (one per
 * float input), workspace...). fwd writes the block's outputs, then t->nsaved saved buffers
 * (t->saved: their dtypes and shapes, names for comments), laid out in `saved` at 256-byte
 * aligned offsets in that order. The backward's kernels are named "bwd_" + KirKernel.name. */
typedef enum CgArgKind {
    CG_ARG_INPUT,         /* in<index>: a block input */
    CG_ARG_OUTPUT,        /* out<index>: a block output */
    CG_ARG_SAVED,         /* saved buffer <index> */
    CG_ARG_GRAD_OUTPUT,   /* grad_out<index>: the gradient of (float) block output <index> */
    CG_ARG_GRAD_INPUT     /* grad_in<index>: the gradient of (float) block input <index> */
} CgArgKind;
typedef struct CgArg { CgArgKind kind; int index; } CgArg;
typedef struct CgTrain {
    const KirProgram *bwd;
    const CgIoDesc *saved;   /* [nsaved] fwd's outputs after the block's */
    int nsaved;
    const CgArg *bwd_in;     /* [nbwd_in] what each input of bwd is (not a CG_ARG_GRAD_INPUT) */
    int nbwd_in;
    const int *bwd_out;      /* [nbwd_out] the block input whose gradient each output of bwd is:
                              * every float input once */
    int nbwd_out;
} CgTrain;
FcStatus cg_cuda_aot_train(const KirProgram *fwd, const CgTrain *t, const char *entry, const CgIoDesc *io, int nio,
                           StrBuf *out, FcErr *err);

/* llvm.c ------------------------------------------------------------------------------------
 * Each kernel k becomes a function
 *     void <k->name>(void **params, int64_t block_begin, int64_t block_end, int32_t *status)
 * that runs blocks [block_begin, block_end) one after the other (threads of a block as plain
 * loops), params in KirParam order. The runtime splits the grid over its thread pool.
 * cg_llvm_module builds the module in the given context (types from llvm-c/Core.h, passed as
 * void* so this header does not need LLVM's); cg_llvm_text prints it (--emit llvm). */
FcStatus cg_llvm_module(const KirProgram *p, void *llvm_context, void **llvm_module, FcErr *err);
FcStatus cg_llvm_text(const KirProgram *p, StrBuf *out, FcErr *err);
/* After optimization: makes the stores of stream params (KirParam.stream) non-temporal where
 * the optimizer proved them aligned (see llvm.c); returns how many. The module must have its
 * data layout set. */
int cg_llvm_stream_stores(void *llvm_module);

#endif
