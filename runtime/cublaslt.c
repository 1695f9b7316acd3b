/* cublaslt.c: cuBLASLt through dlopen (cublaslt.h). Entry points: rt_lt_available,
 * rt_lt_create, rt_lt_destroy, rt_lt_gemm.
 *
 * The types and constants below are the library's ABI, declared here so that fusec builds
 * without the CUDA toolkit; tests/unit/test_cuda_device.c checks them against cublasLt.h
 * where the toolkit is installed. The call sequence is the one the AOT unit's fc_lt_gemm
 * makes (codegen/cuda.c), which the CUDA emulation checks against its cuBLASLt model.
 */
#include "cublaslt.h"
#include "dl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int LtStatus;                      /* cublasStatus_t; 0 = CUBLAS_STATUS_SUCCESS */
typedef struct LtHandle_st *LtHandle;      /* cublasLtHandle_t */
typedef struct LtDesc_st *LtDesc;          /* cublasLtMatmulDesc_t */
typedef struct LtLayout_st *LtLayout;      /* cublasLtMatrixLayout_t */
enum {
    LT_R_32F = 0, LT_R_64F = 1, LT_R_16F = 2, LT_R_16BF = 14,   /* cudaDataType_t */
    LT_COMPUTE_32F = 68, LT_COMPUTE_64F = 70,        /* cublasComputeType_t */
    LT_OP_N = 0, LT_OP_T = 1,                        /* cublasOperation_t */
    LT_DESC_TRANSA = 3, LT_DESC_TRANSB = 4,          /* cublasLtMatmulDescAttributes_t */
    LT_LAYOUT_BATCH_COUNT = 5, LT_LAYOUT_STRIDED_BATCH_OFFSET = 6,   /* cublasLtMatrixLayoutAttribute_t */
};

typedef struct LtApi {
    LtStatus (*create)(LtHandle *);
    LtStatus (*destroy)(LtHandle);
    LtStatus (*desc_create)(LtDesc *, int compute, int scale_type);
    LtStatus (*desc_destroy)(LtDesc);
    LtStatus (*desc_set)(LtDesc, int attr, const void *buf, size_t n);
    LtStatus (*layout_create)(LtLayout *, int type, uint64_t rows, uint64_t cols, int64_t ld);
    LtStatus (*layout_destroy)(LtLayout);
    LtStatus (*layout_set)(LtLayout, int attr, const void *buf, size_t n);
    LtStatus (*matmul)(LtHandle, LtDesc, const void *alpha, const void *a, LtLayout la, const void *b, LtLayout lb,
                       const void *beta, const void *c, LtLayout lc, void *d, LtLayout ld, const void *algo,
                       void *workspace, size_t workspace_bytes, void *stream);
    const char *(*status_name)(LtStatus);   /* optional (cublasLtGetStatusName) */
} LtApi;

static LtApi lt;
static char load_error[600];
static RtDlOnce once = RT_DL_ONCE(load_error);

static void load(void) {
    const char *pin = getenv("FUSEC_LIBCUBLASLT");
    static const char *const names[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11", "libcublasLt.so"};
    void *lib = NULL;
    const char *path = NULL;
    char why[400] = "?";
    bool no_room = false;
    /* the pinned file, or the first of the names that loads; a name there but not mappable is
     * a want of memory (its message kept over a later name's "not found") */
    for (size_t i = 0; !lib && i < (pin && pin[0] ? 1 : sizeof names / sizeof names[0]); i++) {
        lib = dlopen(path = pin && pin[0] ? pin : names[i], RTLD_NOW | RTLD_LOCAL);
        if (lib) break;
        const char *e = dlerror();
        bool full = rt_dl_no_room(e);
        if (full || !no_room) snprintf(why, sizeof why, "%s", e ? e : "?");
        no_room |= full;
    }
    once.no_room = no_room;
    if (!lib) {
        snprintf(load_error, sizeof load_error, "%scuBLASLt cannot be %s (%s%s: %s)", no_room ? "out of memory: " : "",
                 no_room ? "mapped" : "loaded", pin && pin[0] ? "FUSEC_LIBCUBLASLT=" : "",
                 pin && pin[0] ? pin : "libcublasLt.so.13/.12/.11", why);
        return;
    }
    LtApi a;
    memset(&a, 0, sizeof a);
    const char *missing = NULL;
#define RES(field, name) if (!missing && !rt_dl_fn(lib, name, &a.field, sizeof a.field)) missing = name
    RES(create, "cublasLtCreate");
    RES(destroy, "cublasLtDestroy");
    RES(desc_create, "cublasLtMatmulDescCreate");
    RES(desc_destroy, "cublasLtMatmulDescDestroy");
    RES(desc_set, "cublasLtMatmulDescSetAttribute");
    RES(layout_create, "cublasLtMatrixLayoutCreate");
    RES(layout_destroy, "cublasLtMatrixLayoutDestroy");
    RES(layout_set, "cublasLtMatrixLayoutSetAttribute");
    RES(matmul, "cublasLtMatmul");
#undef RES
    if (missing) {
        snprintf(load_error, sizeof load_error, "cuBLASLt: %s lacks the entry point %s", path, missing);
        dlclose(lib);
        return;
    }
    rt_dl_fn(lib, "cublasLtGetStatusName", &a.status_name, sizeof a.status_name);
    lt = a;
    once.loaded = true;   /* kept loaded for the life of the process */
}

bool rt_lt_available(char *why, size_t n) {
    FcErr e = {0};
    bool ok = rt_dl_once(&once, load, &e) == FC_OK;
    if (!ok && why && n) snprintf(why, n, "%s", e.msg);
    return ok;
}

static FcStatus lt_fail(FcErr *err, LtStatus r, const char *call, const char *what) {
    const char *name = lt.status_name ? lt.status_name(r) : NULL;
    return fc_err_set(err, FC_ERR_DEVICE, "cuda: %s failed with status %d (%s)%s%s", call, r,
                      name ? name : "cuBLAS status", what ? " " : "", what ? what : "");
}

FcStatus rt_lt_create(void **handle, FcErr *err) {
    *handle = NULL;
    FC_TRY(rt_dl_once(&once, load, err));
    LtHandle h = NULL;
    LtStatus r = lt.create(&h);
    if (r != 0 || !h) return lt_fail(err, r, "cublasLtCreate", NULL);
    *handle = h;
    return FC_OK;
}

void rt_lt_destroy(void *handle) {
    if (handle && once.loaded) lt.destroy((LtHandle)handle);
}

FcStatus rt_lt_gemm(void *handle, void *stream, const KirGemm *g, unsigned long long a, unsigned long long b,
                    unsigned long long c, FcErr *err) {
    if (!once.loaded || !handle) return fc_err_set(err, FC_ERR_INTERNAL, "cuda: cuBLASLt used before it was loaded");
    if (g->batch < 1 || g->batch > INT32_MAX || g->m < 1 || g->n < 1 || g->k < 1 ||
        (g->dtype != FC_F32 && g->dtype != FC_F64) || (g->ab16 && (g->dtype != FC_F32 || (g->ab16 != FC_BF16 && g->ab16 != FC_F16))))
        return fc_err_set(err, FC_ERR_INTERNAL, "cuda: a library product of an unsupported shape or dtype");
    bool f64 = g->dtype == FC_F64;
    /* C (and the scale) in dtype; A and B in dtype or, with ab16, in 16 bits: f32 accumulation
     * on the tensor cores (CUBLAS_COMPUTE_32F takes 16BF x 16BF -> 32F and 16F x 16F -> 32F) */
    int dt = f64 ? LT_R_64F : LT_R_32F, ct = f64 ? LT_COMPUTE_64F : LT_COMPUTE_32F;
    int abt = g->ab16 == FC_BF16 ? LT_R_16BF : g->ab16 == FC_F16 ? LT_R_16F : dt;
    /* row-major C[m,n] = A[m,k] @ B[k,n] is column-major C^T[n,m] = B^T[n,k] @ A^T[k,m] */
    int opa = g->trans_b ? LT_OP_T : LT_OP_N, opb = g->trans_a ? LT_OP_T : LT_OP_N;
    int32_t nbatch = (int32_t)g->batch;
    int64_t stride_first = g->stride_b, stride_second = g->stride_a, stride_c = g->stride_c;
    const double one64 = 1.0, zero64 = 0.0;
    const float one32 = 1.0f, zero32 = 0.0f;
    LtDesc op = NULL;
    LtLayout la = NULL, lb = NULL, lc = NULL;
    LtStatus r = 0;
    const char *call = NULL;
#define LT(x, name) if (r == 0 && (r = (x)) != 0) call = name
    LT(lt.desc_create(&op, ct, dt), "cublasLtMatmulDescCreate");
    LT(lt.desc_set(op, LT_DESC_TRANSA, &opa, sizeof opa), "cublasLtMatmulDescSetAttribute");
    LT(lt.desc_set(op, LT_DESC_TRANSB, &opb, sizeof opb), "cublasLtMatmulDescSetAttribute");
    LT(lt.layout_create(&la, abt, (uint64_t)(g->trans_b ? g->k : g->n), (uint64_t)(g->trans_b ? g->n : g->k),
                        g->trans_b ? g->k : g->n), "cublasLtMatrixLayoutCreate");
    LT(lt.layout_create(&lb, abt, (uint64_t)(g->trans_a ? g->m : g->k), (uint64_t)(g->trans_a ? g->k : g->m),
                        g->trans_a ? g->m : g->k), "cublasLtMatrixLayoutCreate");
    LT(lt.layout_create(&lc, dt, (uint64_t)g->n, (uint64_t)g->m, g->n), "cublasLtMatrixLayoutCreate");
    LtLayout lays[3] = {la, lb, lc};
    int64_t strides[3] = {stride_first, stride_second, stride_c};
    for (int i = 0; i < 3; i++) {
        LT(lt.layout_set(lays[i], LT_LAYOUT_BATCH_COUNT, &nbatch, sizeof nbatch), "cublasLtMatrixLayoutSetAttribute");
        LT(lt.layout_set(lays[i], LT_LAYOUT_STRIDED_BATCH_OFFSET, &strides[i], sizeof strides[i]),
           "cublasLtMatrixLayoutSetAttribute");
    }
    LT(lt.matmul((LtHandle)handle, op, f64 ? (const void *)&one64 : (const void *)&one32, (const void *)(uintptr_t)b, la,
                 (const void *)(uintptr_t)a, lb, f64 ? (const void *)&zero64 : (const void *)&zero32,
                 (const void *)(uintptr_t)c, lc, (void *)(uintptr_t)c, lc, NULL, NULL, 0, stream),
       "cublasLtMatmul");
#undef LT
    if (lc) lt.layout_destroy(lc);
    if (lb) lt.layout_destroy(lb);
    if (la) lt.layout_destroy(la);
    if (op) lt.desc_destroy(op);
    if (r != 0) {
        char what[160];
        snprintf(what, sizeof what, "(a %s%s product, batch %lld, %lld x %lld x %lld)",
                 g->ab16 == FC_BF16 ? "bf16 x bf16 -> " : g->ab16 == FC_F16 ? "f16 x f16 -> " : "", f64 ? "f64" : "f32",
                 (long long)g->batch, (long long)g->m, (long long)g->n, (long long)g->k);
        return lt_fail(err, r, call, what);
    }
    return FC_OK;
}
