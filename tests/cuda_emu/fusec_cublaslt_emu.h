/* fusec_cublaslt_emu.h: the part of cuBLASLt that the AOT unit calls (codegen/cuda.c's
 * fc_lt_gemm), on the CPU, for the CUDA emulation (docs/cuda_emu.md). Replaces
 * `#include <cublasLt.h>` (tests/unit/test_cuda_emu.c drops that line and includes this).
 *
 * Semantics are cuBLASLt's: column-major matrices described by layouts (rows, cols, leading
 * dimension, batch count, strided batch offset), D = alpha * op(A) @ op(B) + beta * C with
 * op() chosen by the descriptor's TRANSA / TRANSB. Every argument is checked the way the
 * library would refuse it (dimensions that do not chain, a leading dimension shorter than
 * the rows, batch counts that differ, types the library does not combine), returning
 * CUBLAS_STATUS_INVALID_VALUE / NOT_SUPPORTED, so a wrong call in generated code fails the
 * test rather than computing something plausible. Types: C and D of the scale type (f32 with
 * CUBLAS_COMPUTE_32F, f64 with CUBLAS_COMPUTE_64F); A and B of the scale type or, with f32,
 * both bf16 or both f16 (CUDA_R_16BF / CUDA_R_16F, read as their bit patterns). Products
 * accumulate in f64 (cuBLAS uses the compute type; the tolerance rule covers either).
 */
#ifndef FUSEC_CUBLASLT_EMU_H
#define FUSEC_CUBLASLT_EMU_H

#include "fusec_cuda_emu.h"

typedef enum cublasStatus_t {
    CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_NOT_INITIALIZED = 1, CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7, CUBLAS_STATUS_NOT_SUPPORTED = 15
} cublasStatus_t;
typedef enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_64F = 1, CUDA_R_16F = 2, CUDA_R_16BF = 14 } cudaDataType_t;
typedef enum cublasComputeType_t { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_64F = 70 } cublasComputeType_t;
typedef enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum cublasLtMatmulDescAttributes_t {
    CUBLASLT_MATMUL_DESC_TRANSA = 3, CUBLASLT_MATMUL_DESC_TRANSB = 4
} cublasLtMatmulDescAttributes_t;
typedef enum cublasLtMatrixLayoutAttribute_t {
    CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6
} cublasLtMatrixLayoutAttribute_t;

struct fcemu_lt_handle { int magic; };
struct fcemu_lt_desc { cublasComputeType_t compute; cudaDataType_t scale; cublasOperation_t ta, tb; };
struct fcemu_lt_layout { cudaDataType_t type; unsigned long long rows, cols; long long ld; int batch; long long stride; };
typedef fcemu_lt_handle *cublasLtHandle_t;
typedef fcemu_lt_desc *cublasLtMatmulDesc_t;
typedef fcemu_lt_layout *cublasLtMatrixLayout_t;
typedef struct cublasLtMatmulAlgo_t { unsigned long long data[8]; } cublasLtMatmulAlgo_t;

static inline cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) {
    static fcemu_lt_handle the = {0x4c74};
    if (!h) return CUBLAS_STATUS_INVALID_VALUE;
    *h = &the;
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) { (void)h; return CUBLAS_STATUS_SUCCESS; }
static inline cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t c, cudaDataType_t s) {
    if (!d) return CUBLAS_STATUS_INVALID_VALUE;
    if (!((c == CUBLAS_COMPUTE_32F && s == CUDA_R_32F) || (c == CUBLAS_COMPUTE_64F && s == CUDA_R_64F)))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    *d = new fcemu_lt_desc{c, s, CUBLAS_OP_N, CUBLAS_OP_N};
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) { delete d; return CUBLAS_STATUS_SUCCESS; }
static inline cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a,
                                                            const void *buf, size_t n) {
    if (!d || !buf || n != sizeof(cublasOperation_t)) return CUBLAS_STATUS_INVALID_VALUE;
    cublasOperation_t op;
    std::memcpy(&op, buf, n);
    if (op != CUBLAS_OP_N && op != CUBLAS_OP_T) return CUBLAS_STATUS_INVALID_VALUE;
    if (a == CUBLASLT_MATMUL_DESC_TRANSA) d->ta = op;
    else if (a == CUBLASLT_MATMUL_DESC_TRANSB) d->tb = op;
    else return CUBLAS_STATUS_INVALID_VALUE;
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType_t t, uint64_t rows,
                                                        uint64_t cols, int64_t ld) {
    if (!l || rows < 1 || cols < 1 || ld < (int64_t)rows) return CUBLAS_STATUS_INVALID_VALUE;
    *l = new fcemu_lt_layout{t, rows, cols, ld, 1, 0};
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) { delete l; return CUBLAS_STATUS_SUCCESS; }
static inline cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t a,
                                                              const void *buf, size_t n) {
    if (!l || !buf) return CUBLAS_STATUS_INVALID_VALUE;
    if (a == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT) {
        int32_t v;
        if (n != sizeof v) return CUBLAS_STATUS_INVALID_VALUE;
        std::memcpy(&v, buf, n);
        if (v < 1) return CUBLAS_STATUS_INVALID_VALUE;
        l->batch = v;
    } else if (a == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET) {
        int64_t v;
        if (n != sizeof v) return CUBLAS_STATUS_INVALID_VALUE;
        std::memcpy(&v, buf, n);
        l->stride = v;
    } else {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    return CUBLAS_STATUS_SUCCESS;
}

/* element i of an A or B of type t */
static inline double fcemu_lt_at(const void *p, cudaDataType_t t, long long i) {
    switch (t) {
    case CUDA_R_64F: return ((const double *)p)[i];
    case CUDA_R_32F: return ((const float *)p)[i];
    case CUDA_R_16BF: return ::fcemu::bf16_bits_to_f32(((const unsigned short *)p)[i]);
    default: return ::fcemu::f16_bits_to_f32(((const unsigned short *)p)[i]);
    }
}

template <class T>
static inline void fcemu_lt_gemm(const fcemu_lt_desc *d, T alpha, const void *A, const fcemu_lt_layout *la, const void *B,
                                 const fcemu_lt_layout *lb, T beta, const T *C, const fcemu_lt_layout *lc, T *D,
                                 const fcemu_lt_layout *ld, long long m, long long n, long long k) {
    for (int b = 0; b < lc->batch; b++) {
        long long ao = (long long)b * la->stride, bo = (long long)b * lb->stride;
        const T *Cb = C + (long long)b * lc->stride;
        T *Db = D + (long long)b * ld->stride;
        for (long long j = 0; j < n; j++)
            for (long long i = 0; i < m; i++) {
                double acc = 0;
                for (long long q = 0; q < k; q++) {
                    double a = fcemu_lt_at(A, la->type, ao + (d->ta == CUBLAS_OP_N ? i + q * la->ld : q + i * la->ld));
                    double bv = fcemu_lt_at(B, lb->type, bo + (d->tb == CUBLAS_OP_N ? q + j * lb->ld : j + q * lb->ld));
                    acc += a * bv;
                }
                double c = beta != (T)0 ? (double)beta * (double)Cb[i + j * lc->ld] : 0.0;
                Db[i + j * ld->ld] = (T)((double)alpha * acc + c);
            }
    }
}

static inline cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void *alpha, const void *A,
                                            cublasLtMatrixLayout_t la, const void *B, cublasLtMatrixLayout_t lb,
                                            const void *beta, const void *C, cublasLtMatrixLayout_t lc, void *D,
                                            cublasLtMatrixLayout_t ld, const cublasLtMatmulAlgo_t *algo, void *ws,
                                            size_t ws_bytes, cudaStream_t stream) {
    (void)algo;
    (void)ws;
    (void)ws_bytes;
    (void)stream;
    if (!h || !d || !alpha || !beta || !A || !B || !C || !D || !la || !lb || !lc || !ld) return CUBLAS_STATUS_INVALID_VALUE;
    cudaDataType_t t = d->scale;
    bool ab16 = t == CUDA_R_32F && (la->type == CUDA_R_16BF || la->type == CUDA_R_16F);
    if ((la->type != t && !ab16) || lb->type != la->type || lc->type != t || ld->type != t) return CUBLAS_STATUS_NOT_SUPPORTED;
    long long m = (long long)(d->ta == CUBLAS_OP_N ? la->rows : la->cols);
    long long k = (long long)(d->ta == CUBLAS_OP_N ? la->cols : la->rows);
    long long k2 = (long long)(d->tb == CUBLAS_OP_N ? lb->rows : lb->cols);
    long long n = (long long)(d->tb == CUBLAS_OP_N ? lb->cols : lb->rows);
    if (k != k2 || (long long)lc->rows != m || (long long)lc->cols != n || ld->rows != lc->rows || ld->cols != lc->cols)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (la->batch != lc->batch || lb->batch != lc->batch || ld->batch != lc->batch) return CUBLAS_STATUS_INVALID_VALUE;
    if (C != D && ld->ld != lc->ld) return CUBLAS_STATUS_INVALID_VALUE;
    if (t == CUDA_R_32F)
        fcemu_lt_gemm<float>(d, *(const float *)alpha, A, la, B, lb, *(const float *)beta, (const float *)C, lc, (float *)D,
                             ld, m, n, k);
    else
        fcemu_lt_gemm<double>(d, *(const double *)alpha, A, la, B, lb, *(const double *)beta, (const double *)C, lc,
                              (double *)D, ld, m, n, k);
    return CUBLAS_STATUS_SUCCESS;
}

#endif
