/* cublaslt.h: cuBLASLt, loaded with dlopen, for the library matrix products (KirGemm) of the
 * programs the CUDA device runs (docs/cuda_runtime.md "Matrix products").
 *
 * The library (libcublasLt.so.13, .so.12, .so.11 or .so; $FUSEC_LIBCUBLASLT loads exactly
 * that file, for tests) is loaded once per process. When it cannot be loaded, or lacks an
 * entry point, rt_lt_available says why and the CUDA device runs the generated tiled kernels
 * instead (the fallback, also what the CUDA emulation tests run).
 *
 * A product C = A @ B of row-major matrices (KirGemm: batch, m, n, k, strides, transposed
 * operands) is one cublasLtMatmul of column-major C^T = B^T A^T: no copies, f32 with f32
 * accumulation (CUBLAS_COMPUTE_32F, no TF32), f64 with f64, on the device's stream. With
 * KirGemm.ab16, A and B are bf16 or f16 (CUDA_R_16BF / CUDA_R_16F layouts) and C f32, still
 * CUBLAS_COMPUTE_32F: the tensor cores' 16-bit products, accumulated in f32.
 */
#ifndef FUSEC_CUBLASLT_H
#define FUSEC_CUBLASLT_H

#include "kir.h"

/* true when the library and every entry point loaded; else false and `why` (n bytes) says
 * what is missing. */
bool rt_lt_available(char *why, size_t n);
/* A cuBLASLt handle (cublasLtCreate, in the current CUDA context); FC_ERR_DEVICE on failure. */
FcStatus rt_lt_create(void **handle, FcErr *err);
void rt_lt_destroy(void *handle);
/* Enqueues C = A @ B as `g` says on `stream` (a CUstream); A, B, C are device addresses. */
FcStatus rt_lt_gemm(void *handle, void *stream, const KirGemm *g, unsigned long long a, unsigned long long b,
                    unsigned long long c, FcErr *err);

#endif
