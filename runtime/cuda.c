/* cuda.c: the CUDA device (entry points: rt_cuda_open, rt_cuda_compile, rt_cuda_run; see
 * cuda.h and docs/cuda_runtime.md).
 *
 * The driver (libcuda.so.1, or $FUSEC_LIBCUDA) is loaded once per process with dlopen and
 * cuInit runs with it (rt_dl_once: again only after a failure for want of memory, which is
 * FC_ERR_NOMEM, not "no driver"); the prototypes below are our own (no CUDA header at
 * build time) and match the driver's C ABI (the _v2 entry points where the driver has them).
 *
 * Invariants:
 *   - Every driver call goes through CU(), which on failure records the call, file:line and
 *     the driver's error name and text, and returns a status; nothing here ignores a result
 *     except the clean-up calls of _free/_close.
 *   - A sticky error (the context is corrupt: illegal address, launch failure, ...) marks the
 *     GPU's ordinal lost for the process (the primary context is shared by all handles of an
 *     ordinal); every later entry point checks that first and returns FC_ERR_DEVICE_LOST
 *     without calling the driver.
 *   - Public entry points take the handle's mutex and make its context current, then call a
 *     *_locked helper that may return early.
 *   - A program's device workspace holds the temps at their KirBuffer offsets, then (at the
 *     next 256-byte boundary) one int32 status word per launch of a kernel that uses_status,
 *     then, where a kernel has a tail (kir.h), one sync word: zeroed with the status words
 *     before a run, and left zero by every tail kernel, so it is zero at each one's launch.
 */
#include "dl.h"
#include "cuda.h"
#include "cublaslt.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "codegen.h"

/* ---- the driver API, as far as we use it ---------------------------------------------------------- */
typedef int CUresult;                    /* CUDA_SUCCESS = 0 */
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;  /* 64-bit on every supported platform */
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;

enum {
    CU_OUT_OF_MEMORY = 2,
    ATTR_MAX_THREADS_PER_BLOCK = 1,
    ATTR_MAX_GRID_DIM_X = 5,
    ATTR_MAX_SHARED_PER_BLOCK = 8,
    ATTR_MAX_SHARED_PER_BLOCK_OPTIN = 97,
    FUNC_ATTR_MAX_DYNAMIC_SHARED = 8,    /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */
    ATTR_SM_COUNT = 16,
    ATTR_CC_MAJOR = 75,
    ATTR_CC_MINOR = 76,
    MAX_ORDINALS = 64,
    STATUS_ALIGN = 256,
};

typedef struct CuApi {
    CUresult (*cuInit)(unsigned flags);
    CUresult (*cuDeviceGet)(CUdevice *dev, int ordinal);
    CUresult (*cuDeviceGetCount)(int *count);
    CUresult (*cuDeviceGetName)(char *name, int len, CUdevice dev);
    CUresult (*cuDeviceGetAttribute)(int *value, int attrib, CUdevice dev);
    CUresult (*cuDeviceTotalMem_v2)(size_t *bytes, CUdevice dev);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
    CUresult (*cuDevicePrimaryCtxRelease_v2)(CUdevice dev);
    CUresult (*cuCtxSetCurrent)(CUcontext ctx);
    CUresult (*cuStreamCreate)(CUstream *s, unsigned flags);
    CUresult (*cuStreamDestroy_v2)(CUstream s);
    CUresult (*cuStreamSynchronize)(CUstream s);
    CUresult (*cuModuleLoadData)(CUmodule *m, const void *image);
    CUresult (*cuModuleUnload)(CUmodule m);
    CUresult (*cuModuleGetFunction)(CUfunction *f, CUmodule m, const char *name);
    CUresult (*cuFuncSetAttribute)(CUfunction f, int attrib, int value);
    CUresult (*cuLaunchKernel)(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                              unsigned bz, unsigned shared_bytes, CUstream s, void **params, void **extra);
    CUresult (*cuMemAlloc_v2)(CUdeviceptr *p, size_t bytes);
    CUresult (*cuMemFree_v2)(CUdeviceptr p);
    CUresult (*cuMemcpyHtoD_v2)(CUdeviceptr dst, const void *src, size_t bytes);
    CUresult (*cuMemcpyDtoH_v2)(void *dst, CUdeviceptr src, size_t bytes);
    CUresult (*cuMemcpyDtoD_v2)(CUdeviceptr dst, CUdeviceptr src, size_t bytes);
    CUresult (*cuMemcpyDtoHAsync_v2)(void *dst, CUdeviceptr src, size_t bytes, CUstream s);
    CUresult (*cuMemsetD8_v2)(CUdeviceptr dst, unsigned char v, size_t n);
    CUresult (*cuMemsetD8Async)(CUdeviceptr dst, unsigned char v, size_t n, CUstream s);
    CUresult (*cuEventCreate)(CUevent *e, unsigned flags);
    CUresult (*cuEventRecord)(CUevent e, CUstream s);
    CUresult (*cuEventSynchronize)(CUevent e);
    CUresult (*cuEventElapsedTime)(float *ms, CUevent start, CUevent end);
    CUresult (*cuEventDestroy_v2)(CUevent e);
    CUresult (*cuGetErrorString)(CUresult r, const char **s);
    CUresult (*cuGetErrorName)(CUresult r, const char **s);
} CuApi;

static CuApi cu;
static CUresult cu_init_result; /* cuInit(0), when loaded */
static char cu_load_error[1024];
static RtDlOnce cu_once = RT_DL_ONCE(cu_load_error);   /* .loaded: the library and every entry point */
static char cu_path[512];

/* Lost ordinals: set by a sticky error, never cleared (the process must restart). */
static pthread_mutex_t lost_mu = PTHREAD_MUTEX_INITIALIZER;
static bool lost[MAX_ORDINALS];
static char lost_msg[MAX_ORDINALS][600];


static void load(void) {
    const char *pin = getenv("FUSEC_LIBCUDA");
    const char *path = pin && pin[0] ? pin : "libcuda.so.1";
    snprintf(cu_path, sizeof cu_path, "%s", path);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    cu_once.no_room = false;
    if (!lib) {
        const char *e = dlerror();
        if (rt_dl_no_room(e)) {
            cu_once.no_room = true;
            snprintf(cu_load_error, sizeof cu_load_error,
                     "out of memory: the CUDA driver %s cannot be mapped (%s)", path, e ? e : "?");
        } else if (pin && pin[0])
            snprintf(cu_load_error, sizeof cu_load_error, "no CUDA driver: FUSEC_LIBCUDA=%s cannot be loaded (%s)",
                     pin, e ? e : "?");
        else
            snprintf(cu_load_error, sizeof cu_load_error,
                     "no CUDA driver on this machine: libcuda.so.1 cannot be loaded (%s); install the NVIDIA "
                     "driver, or run on the CPU device", e ? e : "?");
        return;
    }
    CuApi a;
    memset(&a, 0, sizeof a);
    const char *missing = NULL;
#define RES(sym) if (!missing && !rt_dl_fn(lib, #sym, &a.sym, sizeof a.sym)) missing = #sym
    RES(cuInit);
    RES(cuDeviceGet);
    RES(cuDeviceGetCount);
    RES(cuDeviceGetName);
    RES(cuDeviceGetAttribute);
    RES(cuDeviceTotalMem_v2);
    RES(cuDevicePrimaryCtxRetain);
    /* _v2 since CUDA 11; the plain name has the same signature */
    if (!missing && !rt_dl_fn(lib, "cuDevicePrimaryCtxRelease_v2", &a.cuDevicePrimaryCtxRelease_v2,
                             sizeof a.cuDevicePrimaryCtxRelease_v2) &&
        !rt_dl_fn(lib, "cuDevicePrimaryCtxRelease", &a.cuDevicePrimaryCtxRelease_v2, sizeof a.cuDevicePrimaryCtxRelease_v2))
        missing = "cuDevicePrimaryCtxRelease_v2";
    RES(cuCtxSetCurrent);
    RES(cuStreamCreate);
    RES(cuStreamDestroy_v2);
    RES(cuStreamSynchronize);
    RES(cuModuleLoadData);
    RES(cuModuleUnload);
    RES(cuModuleGetFunction);
    RES(cuLaunchKernel);
    RES(cuFuncSetAttribute);
    RES(cuMemAlloc_v2);
    RES(cuMemFree_v2);
    RES(cuMemcpyHtoD_v2);
    RES(cuMemcpyDtoH_v2);
    RES(cuMemcpyDtoD_v2);
    RES(cuMemcpyDtoHAsync_v2);
    RES(cuMemsetD8_v2);
    RES(cuMemsetD8Async);
    RES(cuEventCreate);
    RES(cuEventRecord);
    RES(cuEventSynchronize);
    RES(cuEventElapsedTime);
    RES(cuEventDestroy_v2);
    RES(cuGetErrorString);
    RES(cuGetErrorName);
#undef RES
    if (missing) {
        snprintf(cu_load_error, sizeof cu_load_error,
                 "no usable CUDA driver: %s lacks the entry point %s (driver too old?)", path, missing);
        dlclose(lib);
        return;
    }
    cu = a;
    cu_once.loaded = true;   /* kept loaded for the life of the process */
    cu_init_result = cu.cuInit(0);
}

/* The driver's name and text for r ("CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory ..."). */
static void error_text(CUresult r, const char **name, const char **text) {
    *name = NULL;
    *text = NULL;
    if (cu.cuGetErrorName && cu.cuGetErrorName(r, name) != 0) *name = NULL;
    if (cu.cuGetErrorString && cu.cuGetErrorString(r, text) != 0) *text = NULL;
    if (!*name) *name = "CUDA_ERROR_UNKNOWN_CODE";
    if (!*text) *text = "no description from the driver";
}

/* Errors after which the context cannot be used again (the CUDA documentation's list of
 * errors that leave "the process in an inconsistent state"). */
static bool is_sticky(CUresult r) {
    switch (r) {
    case 214:   /* ECC_UNCORRECTABLE */
    case 700:   /* ILLEGAL_ADDRESS */
    case 702:   /* LAUNCH_TIMEOUT */
    case 709:   /* CONTEXT_IS_DESTROYED */
    case 710:   /* ASSERT */
    case 714:   /* HARDWARE_STACK_ERROR */
    case 715:   /* ILLEGAL_INSTRUCTION */
    case 716:   /* MISALIGNED_ADDRESS */
    case 717:   /* INVALID_ADDRESS_SPACE */
    case 718:   /* INVALID_PC */
    case 719:   /* LAUNCH_FAILED */
        return true;
    default:
        return false;
    }
}

/* ---- handles -------------------------------------------------------------------------------------- */
struct RtCuda {
    int ordinal;
    CUdevice dev;
    CUcontext ctx;           /* the primary context, retained */
    CUstream stream;         /* blocking (flags 0): ordered with the legacy default stream */
    pthread_mutex_t mu;
    char name[256];
    char arch[16];           /* "sm_90" */
    char desc[400];
    char cache_note[600];
    int cc_major, cc_minor, sm_count, max_threads;
    int64_t max_grid_x;      /* blocks */
    int64_t max_shared;      /* bytes of static shared memory a block */
    int64_t max_shared_optin; /* bytes of (dynamic) shared memory a block may opt in to */
    int64_t total_mem;       /* bytes */
    RtCache *cache;          /* NULL: compile without caching (cache_note says why) */
    bool cache_tried;
    void *lt;                /* cuBLASLt handle, made by the first program with library products */
};

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static bool ordinal_lost(int ordinal, char *msg, size_t n) {
    pthread_mutex_lock(&lost_mu);
    bool l = lost[ordinal];
    if (l && msg) snprintf(msg, n, "%s", lost_msg[ordinal]);
    pthread_mutex_unlock(&lost_mu);
    return l;
}

/* Records a failed driver call; returns its status. `call` is the call's text ("cu.cuMemAlloc_v2(&p, n)":
 * reported as "cuMemAlloc_v2") or a name; `what` (may be NULL) says what it was doing. */
static FcStatus cu_fail(RtCuda *d, FcErr *err, CUresult r, const char *call, const char *what, const char *file,
                        int line) {
    const char *name, *text;
    error_text(r, &name, &text);
    int ordinal = d ? d->ordinal : 0;
    char fn[96];
    if (strncmp(call, "cu.", 3) == 0) {
        call += 3;
        snprintf(fn, sizeof fn, "%.*s", (int)strcspn(call, "("), call);
    } else {
        snprintf(fn, sizeof fn, "%s", call);
    }
    char first[600];
    snprintf(first, sizeof first, "cuda:%d: %s failed at %s:%d%s%.200s: %s (%d): %s", ordinal, fn, base_name(file), line,
             what ? " while " : "", what ? what : "", name, r, text);
    if (is_sticky(r)) {
        pthread_mutex_lock(&lost_mu);
        if (!lost[ordinal]) {
            lost[ordinal] = true;
            snprintf(lost_msg[ordinal], sizeof lost_msg[ordinal], "%s", first);
        }
        pthread_mutex_unlock(&lost_mu);
        return fc_err_set(err, FC_ERR_DEVICE_LOST, "%s; this error is sticky: the GPU's context is lost and every "
                          "later call on cuda:%d fails (restart the process)", first, ordinal);
    }
    return fc_err_set(err, r == CU_OUT_OF_MEMORY ? FC_ERR_NOMEM : FC_ERR_DEVICE, "%s", first);
}

/* Every driver call: on failure, record it and return from the enclosing function. */
#define CU(d, err, call)                                                                   \
    do {                                                                                   \
        CUresult cu_r_ = (call);                                                           \
        if (cu_r_ != 0) return cu_fail((d), (err), cu_r_, #call, NULL, __FILE__, __LINE__);\
    } while (0)

/* The first thing of every locked entry point: refuse a lost device, make the context current. */
static FcStatus enter(RtCuda *d, FcErr *err) {
    char msg[600];
    if (ordinal_lost(d->ordinal, msg, sizeof msg))
        return fc_err_set(err, FC_ERR_DEVICE_LOST, "cuda:%d: the GPU's context was lost earlier (%s); restart the "
                          "process", d->ordinal, msg);
    CU(d, err, cu.cuCtxSetCurrent(d->ctx));
    return FC_OK;
}

FcStatus rt_cuda_available(int *count, FcErr *err) {
    if (count) *count = 0;
    FC_TRY(rt_dl_once(&cu_once, load, err));
    if (cu_init_result != 0) {
        const char *name, *text;
        error_text(cu_init_result, &name, &text);
        return fc_err_set(err, FC_ERR_UNAVAILABLE, "no usable CUDA GPU: cuInit failed: %s (%d): %s (driver %s)", name,
                          cu_init_result, text, cu_path);
    }
    int n = 0;
    CUresult r = cu.cuDeviceGetCount(&n);
    if (r != 0) {
        const char *name, *text;
        error_text(r, &name, &text);
        return fc_err_set(err, FC_ERR_UNAVAILABLE, "no usable CUDA GPU: cuDeviceGetCount failed: %s (%d): %s", name, r,
                          text);
    }
    if (n < 1) return fc_err_set(err, FC_ERR_UNAVAILABLE, "no CUDA GPU on this machine (the driver found none)");
    if (count) *count = n;
    return FC_OK;
}

static FcStatus open_locked(RtCuda *d, FcErr *err) {
    CU(d, err, cu.cuDeviceGet(&d->dev, d->ordinal));
    CU(d, err, cu.cuDeviceGetName(d->name, (int)sizeof d->name - 1, d->dev));
    d->name[sizeof d->name - 1] = 0;
    int v = 0;
    CU(d, err, cu.cuDeviceGetAttribute(&d->cc_major, ATTR_CC_MAJOR, d->dev));
    CU(d, err, cu.cuDeviceGetAttribute(&d->cc_minor, ATTR_CC_MINOR, d->dev));
    CU(d, err, cu.cuDeviceGetAttribute(&d->sm_count, ATTR_SM_COUNT, d->dev));
    CU(d, err, cu.cuDeviceGetAttribute(&d->max_threads, ATTR_MAX_THREADS_PER_BLOCK, d->dev));
    CU(d, err, cu.cuDeviceGetAttribute(&v, ATTR_MAX_GRID_DIM_X, d->dev));
    d->max_grid_x = v;
    CU(d, err, cu.cuDeviceGetAttribute(&v, ATTR_MAX_SHARED_PER_BLOCK, d->dev));
    d->max_shared = v;
    v = 0;
    CU(d, err, cu.cuDeviceGetAttribute(&v, ATTR_MAX_SHARED_PER_BLOCK_OPTIN, d->dev));
    d->max_shared_optin = v > d->max_shared ? v : d->max_shared;
    size_t mem = 0;
    CU(d, err, cu.cuDeviceTotalMem_v2(&mem, d->dev));
    d->total_mem = (int64_t)mem;
    if (d->cc_major < 1 || d->cc_major > 99 || d->cc_minor < 0 || d->cc_minor > 9)
        return fc_err_set(err, FC_ERR_DEVICE, "cuda:%d: the driver reports compute capability %d.%d", d->ordinal,
                          d->cc_major, d->cc_minor);
    snprintf(d->arch, sizeof d->arch, "sm_%d%d", d->cc_major, d->cc_minor);
    snprintf(d->desc, sizeof d->desc, "cuda:%d: %s, %s, %d SMs, %.1f GiB", d->ordinal, d->name, d->arch, d->sm_count,
             (double)d->total_mem / (1024.0 * 1024.0 * 1024.0));
    CU(d, err, cu.cuDevicePrimaryCtxRetain(&d->ctx, d->dev));
    FcStatus s = enter(d, err);
    if (s == FC_OK) {
        CUresult r = cu.cuStreamCreate(&d->stream, 0);
        if (r != 0) s = cu_fail(d, err, r, "cuStreamCreate", NULL, __FILE__, __LINE__);
    }
    if (s != FC_OK) {
        cu.cuDevicePrimaryCtxRelease_v2(d->dev);
        d->ctx = NULL;
        d->stream = NULL;
    }
    return s;
}

FcStatus rt_cuda_open(int ordinal, RtCuda **out, FcErr *err) {
    if (!out) return fc_err_set(err, FC_ERR_USAGE, "rt_cuda_open: out is NULL");
    *out = NULL;
    FcErr ignored = {0};   /* rt_cuda_available below reports it */
    bool loaded = rt_dl_once(&cu_once, load, &ignored) == FC_OK;
    char msg[600];
    if (loaded && ordinal >= 0 && ordinal < MAX_ORDINALS && ordinal_lost(ordinal, msg, sizeof msg))
        return fc_err_set(err, FC_ERR_DEVICE_LOST, "cuda:%d: the GPU's context was lost earlier (%s); restart the "
                          "process", ordinal, msg);
    int n = 0;
    FC_TRY(rt_cuda_available(&n, err));
    if (ordinal < 0 || ordinal >= n)
        return fc_err_set(err, FC_ERR_USAGE, "CUDA device %d does not exist (this machine has %d: 0..%d)", ordinal, n,
                          n - 1);
    if (ordinal >= MAX_ORDINALS)
        return fc_err_set(err, FC_ERR_UNSUPPORTED, "CUDA device %d: at most %d GPUs are supported", ordinal,
                          MAX_ORDINALS);
    RtCuda *d = fc_calloc(1, sizeof *d);
    if (!d) return FC_OOM(err);
    d->ordinal = ordinal;
    if (pthread_mutex_init(&d->mu, NULL) != 0) {
        fc_free(d);
        return fc_err_set(err, FC_ERR_NOMEM, "cuda: cannot create a mutex");
    }
    FcStatus s = open_locked(d, err);
    if (s != FC_OK) {
        pthread_mutex_destroy(&d->mu);
        fc_free(d);
        return s;
    }
    *out = d;
    return FC_OK;
}

void rt_cuda_close(RtCuda *d) {
    if (!d) return;
    if (!ordinal_lost(d->ordinal, NULL, 0) && cu.cuCtxSetCurrent(d->ctx) == 0) {
        rt_lt_destroy(d->lt);
        if (d->stream) cu.cuStreamDestroy_v2(d->stream);
    }
    if (d->ctx) cu.cuDevicePrimaryCtxRelease_v2(d->dev);   /* also after a loss: lets the driver drop the context */
    rt_cache_free(d->cache);
    pthread_mutex_destroy(&d->mu);
    fc_free(d);
}

const char *rt_cuda_description(const RtCuda *d) { return d ? d->desc : ""; }
const char *rt_cuda_name(const RtCuda *d) { return d ? d->name : ""; }
const char *rt_cuda_arch(const RtCuda *d) { return d ? d->arch : ""; }
void rt_cuda_compute_capability(const RtCuda *d, int *major, int *minor) {
    if (major) *major = d ? d->cc_major : 0;
    if (minor) *minor = d ? d->cc_minor : 0;
}
int64_t rt_cuda_total_memory(const RtCuda *d) { return d ? d->total_mem : 0; }
int rt_cuda_sm_count(const RtCuda *d) { return d ? d->sm_count : 0; }
int rt_cuda_ordinal(const RtCuda *d) { return d ? d->ordinal : -1; }
bool rt_cuda_lost(const RtCuda *d) { return d && ordinal_lost(d->ordinal, NULL, 0); }
const char *rt_cuda_cache_note(const RtCuda *d) { return d ? d->cache_note : ""; }

/* ---- memory ------------------------------------------------------------------------------------------- */
static CUdeviceptr dptr(const void *p) { return (CUdeviceptr)(uintptr_t)p; }

static FcStatus alloc_locked(RtCuda *d, size_t bytes, void **ptr, FcErr *err) {
    FC_TRY(enter(d, err));
    CUdeviceptr p = 0;
    CUresult r = cu.cuMemAlloc_v2(&p, bytes);
    if (r != 0) {
        char what[64];
        snprintf(what, sizeof what, "allocating %zu bytes", bytes);
        return cu_fail(d, err, r, "cuMemAlloc_v2", what, __FILE__, __LINE__);
    }
    *ptr = (void *)(uintptr_t)p;
    return FC_OK;
}

FcStatus rt_cuda_alloc(RtCuda *d, size_t bytes, void **ptr, FcErr *err) {
    if (!d || !ptr) return fc_err_set(err, FC_ERR_USAGE, "rt_cuda_alloc: NULL argument");
    *ptr = NULL;
    if (bytes == 0) return FC_OK;
    pthread_mutex_lock(&d->mu);
    FcStatus s = alloc_locked(d, bytes, ptr, err);
    pthread_mutex_unlock(&d->mu);
    return s;
}

void rt_cuda_free(RtCuda *d, void *ptr) {
    if (!d || !ptr) return;
    pthread_mutex_lock(&d->mu);
    FcErr ignored;
    if (enter(d, &ignored) == FC_OK) cu.cuMemFree_v2(dptr(ptr));
    pthread_mutex_unlock(&d->mu);
}

typedef enum { COPY_HTOD, COPY_DTOH, COPY_DTOD, COPY_SET } CopyKind;

static FcStatus copy_locked(RtCuda *d, CopyKind kind, void *dst, const void *src, uint8_t value, size_t bytes,
                            FcErr *err) {
    FC_TRY(enter(d, err));
    switch (kind) {
    case COPY_HTOD: CU(d, err, cu.cuMemcpyHtoD_v2(dptr(dst), src, bytes)); break;
    case COPY_DTOH: CU(d, err, cu.cuMemcpyDtoH_v2(dst, dptr(src), bytes)); break;
    case COPY_DTOD:
        CU(d, err, cu.cuMemcpyDtoD_v2(dptr(dst), dptr(src), bytes));
        CU(d, err, cu.cuStreamSynchronize(NULL));   /* device-to-device copies return early */
        break;
    case COPY_SET:
        CU(d, err, cu.cuMemsetD8Async(dptr(dst), value, bytes, d->stream));
        CU(d, err, cu.cuStreamSynchronize(d->stream));
        break;
    }
    return FC_OK;
}

static FcStatus copy_common(RtCuda *d, CopyKind kind, void *dst, const void *src, uint8_t value, size_t bytes,
                            FcErr *err) {
    static const char *const names[] = {"rt_cuda_copy_htod", "rt_cuda_copy_dtoh", "rt_cuda_copy_dtod",
                                        "rt_cuda_memset"};
    if (!d) return fc_err_set(err, FC_ERR_USAGE, "%s: no device", names[kind]);
    if (bytes == 0) return FC_OK;
    if (!dst || (kind != COPY_SET && !src)) return fc_err_set(err, FC_ERR_USAGE, "%s: NULL pointer", names[kind]);
    pthread_mutex_lock(&d->mu);
    FcStatus s = copy_locked(d, kind, dst, src, value, bytes, err);
    pthread_mutex_unlock(&d->mu);
    return s;
}

FcStatus rt_cuda_copy_htod(RtCuda *d, void *dst, const void *src, size_t bytes, FcErr *err) {
    return copy_common(d, COPY_HTOD, dst, src, 0, bytes, err);
}
FcStatus rt_cuda_copy_dtoh(RtCuda *d, void *dst, const void *src, size_t bytes, FcErr *err) {
    return copy_common(d, COPY_DTOH, dst, src, 0, bytes, err);
}
FcStatus rt_cuda_copy_dtod(RtCuda *d, void *dst, const void *src, size_t bytes, FcErr *err) {
    return copy_common(d, COPY_DTOD, dst, src, 0, bytes, err);
}
FcStatus rt_cuda_memset(RtCuda *d, void *dst, uint8_t value, size_t bytes, FcErr *err) {
    return copy_common(d, COPY_SET, dst, NULL, value, bytes, err);
}

static FcStatus sync_locked(RtCuda *d, FcErr *err) {
    FC_TRY(enter(d, err));
    CU(d, err, cu.cuStreamSynchronize(d->stream));
    return FC_OK;
}

FcStatus rt_cuda_synchronize(RtCuda *d, FcErr *err) {
    if (!d) return fc_err_set(err, FC_ERR_USAGE, "rt_cuda_synchronize: no device");
    pthread_mutex_lock(&d->mu);
    FcStatus s = sync_locked(d, err);
    pthread_mutex_unlock(&d->mu);
    return s;
}

/* Events: created and destroyed around each measurement. */
typedef struct EventPair { CUevent start, stop; } EventPair;

static FcStatus events_new(RtCuda *d, EventPair *e, FcErr *err) {
    e->start = e->stop = NULL;
    CU(d, err, cu.cuEventCreate(&e->start, 0));
    CU(d, err, cu.cuEventCreate(&e->stop, 0));
    return FC_OK;
}
static void events_free(RtCuda *d, EventPair *e) {
    if (ordinal_lost(d->ordinal, NULL, 0)) return;
    if (e->start) cu.cuEventDestroy_v2(e->start);
    if (e->stop) cu.cuEventDestroy_v2(e->stop);
    e->start = e->stop = NULL;
}
static FcStatus events_elapsed(RtCuda *d, EventPair *e, double *ms, FcErr *err) {
    float f = 0;
    CU(d, err, cu.cuEventSynchronize(e->stop));
    CU(d, err, cu.cuEventElapsedTime(&f, e->start, e->stop));
    *ms = f;
    return FC_OK;
}

static FcStatus gbps_locked(RtCuda *d, CUdeviceptr a, CUdeviceptr b, size_t n, double *gbps, FcErr *err) {
    EventPair e;
    FcStatus s = events_new(d, &e, err);
    double best = 0;
    for (int i = 0; i < 6 && s == FC_OK; i++) {   /* the first is a warm-up */
        double ms = 0;
        CUresult r = cu.cuEventRecord(e.start, NULL);
        if (r == 0) r = cu.cuMemcpyDtoD_v2(b, a, n);
        if (r == 0) r = cu.cuEventRecord(e.stop, NULL);
        if (r != 0) s = cu_fail(d, err, r, "cuEventRecord/cuMemcpyDtoD_v2", "measuring the copy bandwidth", __FILE__, __LINE__);
        if (s == FC_OK) s = events_elapsed(d, &e, &ms, err);
        double g = ms > 0 ? 2.0 * (double)n / (ms * 1e6) : 0;
        if (s == FC_OK && i > 0 && g > best) best = g;
    }
    events_free(d, &e);
    *gbps = best;
    return s;
}

FcStatus rt_cuda_copy_gbps(RtCuda *d, double *gbps, FcErr *err) {
    if (!d || !gbps) return fc_err_set(err, FC_ERR_USAGE, "rt_cuda_copy_gbps: NULL argument");
    *gbps = 0;
    size_t n = (size_t)256 << 20;
    if (d->total_mem > 0 && (int64_t)n > d->total_mem / 8) n = (size_t)(d->total_mem / 8);
    if (n < 4096) n = 4096;
    void *a = NULL, *b = NULL;
    FcStatus s = rt_cuda_alloc(d, n, &a, err);
    if (s == FC_OK) s = rt_cuda_alloc(d, n, &b, err);
    if (s == FC_OK) s = rt_cuda_memset(d, a, 0x3c, n, err);
    if (s == FC_OK) {
        pthread_mutex_lock(&d->mu);
        s = enter(d, err);
        if (s == FC_OK) s = gbps_locked(d, dptr(a), dptr(b), n, gbps, err);
        pthread_mutex_unlock(&d->mu);
    }
    rt_cuda_free(d, b);
    rt_cuda_free(d, a);
    return s;
}

/* ---- programs ------------------------------------------------------------------------------------------- */
struct RtCudaProgram {
    RtCuda *d;
    const KirProgram *p;
    CUmodule module;
    CUfunction *fns;         /* [kernels] */
    int64_t *buf_bytes;      /* [buffers] bytes of each buffer */
    int *status_slot;        /* [launches] index of the launch's status word, -1 if none */
    int nstatus;
    bool has_sync;           /* some kernel has a tail: one sync word after the status words */
    CUdeviceptr ws;          /* the workspace allocation (0 when empty) */
    int64_t status_offset;   /* bytes from ws to the status words */
    int32_t *status_host;    /* [nstatus] read back after a run */
    CUdeviceptr *args;       /* [max_args + 3] argument values of one launch (+ status, sync) */
    void **argp;             /* [max_args + 3] pointers to them, NULL-ended (cuLaunchKernel's kernelParams) */
    CUdeviceptr state;       /* the f8 scaling state (KIR_BUF_STATE), the caller's; 0: none */
};

RtCuda *rt_cuda_program_device(const RtCudaProgram *cp) { return cp ? cp->d : NULL; }
void rt_cuda_set_state(RtCudaProgram *cp, void *dev_state) { cp->state = dptr(dev_state); }
void *rt_cuda_workspace(const RtCudaProgram *cp) { return cp && cp->ws ? (void *)(uintptr_t)cp->ws : NULL; }

/* The program's structure (kir_check_program, as the CPU device checks it; bugs upstream are
 * FC_ERR_INTERNAL), then its kernels against this GPU's limits. */
static FcStatus check_program(const RtCuda *d, const KirProgram *p, int *max_args, FcErr *err) {
    FC_TRY(kir_check_program(p, "cuda", STATUS_ALIGN, true, max_args, err));
    for (int ki = 0; ki < p->kernels.len; ki++) {
        const KirKernel *k = p->kernels.data[ki];
        if (k->library) {   /* a cuBLASLt call (cublaslt.c) */
            const KirGemm *g = &k->gemm;
            if (k->params.len != 3 || g->batch < 1 || g->batch > INT32_MAX || (g->dtype != FC_F32 && g->dtype != FC_F64) ||
                (g->ab16 && g->dtype != FC_F32) || g->panel_k > 0)   /* B in panels: the CPU's schedule */
                return fc_err_set(err, FC_ERR_INTERNAL, "cuda: library kernel %s is malformed", k->name);
            continue;
        }
        if (k->block < 1 || k->block > 1024)
            return fc_err_set(err, FC_ERR_INTERNAL, "cuda: kernel %s has %d threads a block", k->name, k->block);
        if (k->block > d->max_threads)
            return fc_err_set(err, FC_ERR_UNSUPPORTED, "cuda: kernel %s needs %d threads a block; %s allows %d",
                              k->name, k->block, d->name, d->max_threads);
        int64_t dyn = cg_cuda_dynamic_shared(k);
        if (dyn < 0) return fc_err_set(err, FC_ERR_INTERNAL, "cuda: kernel %s has a malformed shared array", k->name);
        if (dyn > d->max_shared_optin)
            return fc_err_set(err, FC_ERR_UNSUPPORTED,
                              "cuda: kernel %s needs %lld bytes of shared memory; %s allows %lld a block (compile "
                              "for this GPU's --arch)", k->name, (long long)dyn, d->name, (long long)d->max_shared_optin);
    }
    return FC_OK;
}

void rt_cuda_program_free(RtCudaProgram *cp) {
    if (!cp) return;
    RtCuda *d = cp->d;
    pthread_mutex_lock(&d->mu);
    FcErr ignored;
    if ((cp->module || cp->ws) && enter(d, &ignored) == FC_OK) {
        if (cp->ws) cu.cuMemFree_v2(cp->ws);
        if (cp->module) cu.cuModuleUnload(cp->module);
    }
    pthread_mutex_unlock(&d->mu);
    fc_free(cp->fns);
    fc_free(cp->buf_bytes);
    fc_free(cp->status_slot);
    fc_free(cp->status_host);
    fc_free(cp->args);
    fc_free(cp->argp);
    fc_free(cp);
}

/* The cache is opened on first use; a refusal is remembered and compiles go uncached. */
static void open_cache(RtCuda *d) {
    if (d->cache_tried) return;
    d->cache_tried = true;
    FcErr e = {0};
    if (rt_cache_open(&d->cache, &e) != FC_OK)
        snprintf(d->cache_note, sizeof d->cache_note, "kernels are compiled without the on-disk cache: %.540s", e.msg);
}

static FcStatus load_locked(RtCudaProgram *cp, const char *bin, FcErr *err) {
    RtCuda *d = cp->d;
    const KirProgram *p = cp->p;
    FC_TRY(enter(d, err));
    CU(d, err, cu.cuModuleLoadData(&cp->module, bin));
    bool library = false;
    for (int ki = 0; ki < p->kernels.len; ki++) {
        const char *name = p->kernels.data[ki]->name;
        if (p->kernels.data[ki]->library) { library = true; continue; }   /* no code in the module */
        CUresult r = cu.cuModuleGetFunction(&cp->fns[ki], cp->module, name);
        if (r != 0) {
            char what[160];
            snprintf(what, sizeof what, "looking up kernel %.100s in the module", name);
            return cu_fail(d, err, r, "cuModuleGetFunction", what, __FILE__, __LINE__);
        }
        int64_t dyn = cg_cuda_dynamic_shared(p->kernels.data[ki]);
        if (dyn > d->max_shared) {   /* opt in to more than the default dynamic shared memory */
            r = cu.cuFuncSetAttribute(cp->fns[ki], FUNC_ATTR_MAX_DYNAMIC_SHARED, (int)dyn);
            if (r != 0) {
                char what[200];
                snprintf(what, sizeof what, "allowing kernel %.100s %lld bytes of dynamic shared memory", name,
                         (long long)dyn);
                return cu_fail(d, err, r, "cuFuncSetAttribute", what, __FILE__, __LINE__);
            }
        }
    }
    if (library && !d->lt) FC_TRY(rt_lt_create(&d->lt, err));
    int64_t total = 0;
    if (cp->nstatus > 0 || cp->has_sync || p->workspace_bytes > 0) {
        cp->status_offset = (p->workspace_bytes + STATUS_ALIGN - 1) / STATUS_ALIGN * STATUS_ALIGN;
        total = cp->status_offset + 4 * ((int64_t)cp->nstatus + cp->has_sync);
    }
    if (total > 0) {
        CUresult r = cu.cuMemAlloc_v2(&cp->ws, (size_t)total);
        if (r != 0) {
            char what[96];
            snprintf(what, sizeof what, "allocating the %lld-byte workspace", (long long)total);
            return cu_fail(d, err, r, "cuMemAlloc_v2", what, __FILE__, __LINE__);
        }
    }
    return FC_OK;
}

FcStatus rt_cuda_compile(RtCuda *d, const KirProgram *p, RtCudaProgram **out, bool *cache_hit, FcErr *err) {
    if (cache_hit) *cache_hit = false;
    if (!out) return fc_err_set(err, FC_ERR_USAGE, "rt_cuda_compile: out is NULL");
    *out = NULL;
    if (!d || !p) return fc_err_set(err, FC_ERR_USAGE, "rt_cuda_compile: NULL argument");
    int max_args = 1;
    FC_TRY(check_program(d, p, &max_args, err));
    if (ordinal_lost(d->ordinal, NULL, 0)) {
        pthread_mutex_lock(&d->mu);
        FcStatus s = enter(d, err);
        pthread_mutex_unlock(&d->mu);
        return s;
    }

    RtCudaProgram *cp = fc_calloc(1, sizeof *cp);
    if (!cp) return FC_OOM(err);
    cp->d = d;
    cp->p = p;
    cp->fns = fc_calloc((size_t)p->kernels.len + 1, sizeof *cp->fns);
    cp->buf_bytes = fc_calloc((size_t)p->buffers.len + 1, sizeof *cp->buf_bytes);
    cp->status_slot = fc_calloc((size_t)p->launches.len + 1, sizeof *cp->status_slot);
    cp->args = fc_calloc((size_t)max_args + 3, sizeof *cp->args);   /* + status, sync, NULL */
    cp->argp = fc_calloc((size_t)max_args + 3, sizeof *cp->argp);
    if (!cp->fns || !cp->buf_bytes || !cp->status_slot || !cp->args || !cp->argp) {
        rt_cuda_program_free(cp);
        return FC_OOM(err);
    }
    for (int i = 0; i < p->buffers.len; i++)
        cp->buf_bytes[i] = p->buffers.data[i].numel * (int64_t)fc_dtype_size(p->buffers.data[i].dtype);
    for (int li = 0; li < p->launches.len; li++)
        cp->status_slot[li] = p->kernels.data[p->launches.data[li].kernel]->uses_status ? cp->nstatus++ : -1;
    for (int ki = 0; ki < p->kernels.len; ki++) cp->has_sync |= p->kernels.data[ki]->tail >= 0;
    if (cp->nstatus > 0 && !(cp->status_host = fc_calloc((size_t)cp->nstatus, sizeof(int32_t)))) {
        rt_cuda_program_free(cp);
        return FC_OOM(err);
    }

    StrBuf src = {0};
    FcStatus s = cg_cuda_kernels(p, &src, err);
    if (s == FC_OK && (src.failed || !src.data)) s = FC_OOM(err);
    char *bin = NULL;
    size_t binlen = 0;
    if (s == FC_OK) {
        pthread_mutex_lock(&d->mu);
        open_cache(d);
        RtCache *cache = d->cache;
        pthread_mutex_unlock(&d->mu);
        /* a cache handle is only read after opening, so it can be shared while compiling */
        s = rt_cache_compile(cache, src.data, d->arch, true, &bin, &binlen, cache_hit, err);
    }
    sb_free(&src);
    if (s == FC_OK) {
        pthread_mutex_lock(&d->mu);
        s = load_locked(cp, bin, err);
        pthread_mutex_unlock(&d->mu);
    }
    fc_free(bin);
    if (s != FC_OK) {
        rt_cuda_program_free(cp);
        return s;
    }
    *out = cp;
    return FC_OK;
}

/* The device address of buffer b for this run, or 0 (and an error) when the caller gave none. */
static FcStatus bind(const RtCudaProgram *cp, int b, void *const *in, void *const *out, CUdeviceptr *addr,
                     FcErr *err) {
    const KirBuffer *kb = &cp->p->buffers.data[b];
    void *ptr;
    if (kb->kind == KIR_BUF_TEMP) {
        *addr = cp->ws + (CUdeviceptr)kb->offset;
        return FC_OK;
    }
    if (kb->kind == KIR_BUF_STATE) {
        if (!cp->state) return fc_err_set(err, FC_ERR_INTERNAL, "cuda: the program's f8 state is not bound");
        *addr = cp->state;
        return FC_OK;
    }
    ptr = kb->kind == KIR_BUF_INPUT ? (in ? in[kb->index] : NULL) : (out ? out[kb->index] : NULL);
    if (!ptr && kb->numel > 0)
        return fc_err_set(err, FC_ERR_USAGE, "cuda: %s %d of the block is a NULL pointer",
                          kb->kind == KIR_BUF_INPUT ? "input" : "output", kb->index);
    *addr = dptr(ptr);
    return FC_OK;
}

/* Before anything is launched: no block output overlapping an input or another output (a
 * kernel may read an input after another wrote an output), grids CUDA can run, every pointer
 * given, no written argument overlapping another argument of its launch. */
static FcStatus check_launches(RtCudaProgram *cp, int first, int last, void *const *in, void *const *out,
                               FcErr *err) {
    const KirProgram *p = cp->p;
    for (int i = 0; i < p->buffers.len; i++) {
        const KirBuffer *x = &p->buffers.data[i];
        if (x->kind != KIR_BUF_OUTPUT || cp->buf_bytes[i] == 0) continue;
        CUdeviceptr xa, ya;
        FC_TRY(bind(cp, i, in, out, &xa, err));
        for (int j = 0; j < p->buffers.len; j++) {
            const KirBuffer *y = &p->buffers.data[j];
            if (y->kind == KIR_BUF_TEMP || y->kind == KIR_BUF_STATE || cp->buf_bytes[j] == 0 ||
                (y->kind == x->kind && y->index == x->index))
                continue;
            FC_TRY(bind(cp, j, in, out, &ya, err));
            if (xa < ya + (CUdeviceptr)cp->buf_bytes[j] && ya < xa + (CUdeviceptr)cp->buf_bytes[i])
                return fc_err_set(err, FC_ERR_USAGE, "cuda: output %d of the block overlaps %s %d in device memory "
                                  "(pass distinct tensors)", x->index, y->kind == KIR_BUF_INPUT ? "input" : "output",
                                  y->index);
        }
    }
    for (int li = first; li < last; li++) {
        const KirLaunch *l = &p->launches.data[li];
        const KirKernel *k = p->kernels.data[l->kernel];
        int64_t limit = cp->d->max_grid_x > 0 && cp->d->max_grid_x < INT32_MAX ? cp->d->max_grid_x : INT32_MAX;
        if (k->grid > limit)
            return fc_err_set(err, FC_ERR_UNSUPPORTED, "cuda: kernel %s has a grid of %lld blocks; CUDA launches at "
                              "most %lld (nothing was launched)", k->name, (long long)k->grid, (long long)limit);
        for (int a = 0; a < l->nargs; a++) {
            FC_TRY(bind(cp, l->args[a], in, out, &cp->args[a], err));
            const KirParam *pa = &k->params.data[a];
            int64_t na = cp->buf_bytes[l->args[a]];
            for (int a2 = 0; a2 < a; a2++) {
                const KirParam *pb = &k->params.data[a2];
                int64_t nb = cp->buf_bytes[l->args[a2]];
                if (!(pa->written || pb->written) || na == 0 || nb == 0) continue;
                CUdeviceptr x = cp->args[a], y = cp->args[a2];
                if (x < y + (CUdeviceptr)nb && y < x + (CUdeviceptr)na)
                    return fc_err_set(err, FC_ERR_USAGE, "cuda: kernel %s: the memory of argument %d overlaps that of "
                                      "argument %d, and one of them is written (pass distinct tensors)", k->name, a2,
                                      a);
            }
        }
    }
    return FC_OK;
}

static FcStatus run_locked(RtCudaProgram *cp, int first, int last, void *const *in, void *const *out, double *ms,
                           FcErr *err) {
    RtCuda *d = cp->d;
    const KirProgram *p = cp->p;
    FC_TRY(enter(d, err));
    FC_TRY(check_launches(cp, first, last, in, out, err));
    bool any_status = false, any_sync = false;
    for (int li = first; li < last; li++) {
        any_status |= cp->status_slot[li] >= 0;
        any_sync |= p->kernels.data[p->launches.data[li].kernel]->tail >= 0;
    }
    CUdeviceptr status = cp->ws + (CUdeviceptr)cp->status_offset;
    CUdeviceptr sync = status + 4 * (CUdeviceptr)cp->nstatus;   /* zero at each tail kernel's launch: each leaves it zero */
    if (any_status || any_sync)
        CU(d, err, cu.cuMemsetD8Async(status, 0, 4 * ((size_t)cp->nstatus + cp->has_sync), d->stream));

    EventPair ev = {NULL, NULL};
    FcStatus s = FC_OK;
    if (ms) {
        s = events_new(d, &ev, err);
        if (s == FC_OK) {
            CUresult r = cu.cuEventRecord(ev.start, d->stream);
            if (r != 0) s = cu_fail(d, err, r, "cuEventRecord", NULL, __FILE__, __LINE__);
        }
    }
    for (int li = first; li < last && s == FC_OK; li++) {
        const KirLaunch *l = &p->launches.data[li];
        const KirKernel *k = p->kernels.data[l->kernel];
        if (k->grid < 1) continue;
        int n = l->nargs;
        for (int a = 0; a < n; a++) {
            s = bind(cp, l->args[a], in, out, &cp->args[a], err);
            cp->argp[a] = &cp->args[a];
        }
        if (cp->status_slot[li] >= 0) {
            cp->args[n] = status + 4 * (CUdeviceptr)cp->status_slot[li];
            cp->argp[n] = &cp->args[n];
            n++;
        }
        if (k->tail >= 0) {
            cp->args[n] = sync;
            cp->argp[n] = &cp->args[n];
            n++;
        }
        cp->argp[n] = NULL;
        if (s != FC_OK) break;
        if (k->library) {
            s = rt_lt_gemm(d->lt, d->stream, &k->gemm, cp->args[0], cp->args[1], cp->args[2], err);
            continue;
        }
        int64_t dyn = cg_cuda_dynamic_shared(k);
        CUresult r = cu.cuLaunchKernel(cp->fns[l->kernel], (unsigned)k->grid, 1, 1, (unsigned)k->block, 1, 1,
                                      (unsigned)(dyn > 0 ? dyn : 0), d->stream, cp->argp, NULL);
        if (r != 0) {
            char what[200];
            snprintf(what, sizeof what, "launching kernel %.100s (grid %lld, block %d)", k->name, (long long)k->grid,
                     k->block);
            s = cu_fail(d, err, r, "cuLaunchKernel", what, __FILE__, __LINE__);
        }
    }
    if (s == FC_OK && ms) {
        CUresult r = cu.cuEventRecord(ev.stop, d->stream);
        if (r != 0) s = cu_fail(d, err, r, "cuEventRecord", NULL, __FILE__, __LINE__);
    }
    if (s == FC_OK && any_status) {
        CUresult r = cu.cuMemcpyDtoHAsync_v2(cp->status_host, status, 4 * (size_t)cp->nstatus, d->stream);
        if (r != 0) s = cu_fail(d, err, r, "cuMemcpyDtoHAsync_v2", "reading the status words back", __FILE__, __LINE__);
    }
    if (s == FC_OK) {
        /* errors of the kernels themselves (illegal address, ...) surface here */
        CUresult r = cu.cuStreamSynchronize(d->stream);
        if (r != 0) s = cu_fail(d, err, r, "cuStreamSynchronize", "waiting for the kernels", __FILE__, __LINE__);
    }
    if (s == FC_OK && ms) s = events_elapsed(d, &ev, ms, err);
    if (ms) events_free(d, &ev);
    if (s != FC_OK || !any_status) return s;
    for (int li = first; li < last; li++) {
        int slot = cp->status_slot[li];
        if (slot < 0 || cp->status_host[slot] == 0) continue;
        const KirKernel *k = p->kernels.data[p->launches.data[li].kernel];
        int32_t code = cp->status_host[slot];
        const char *name = fc_status_name((FcStatus)code);
        if (strcmp(name, "unknown status") == 0)
            return fc_err_set(err, FC_ERR_INTERNAL, "cuda: kernel %s reported status %d", k->name, (int)code);
        return fc_err_set(err, (FcStatus)code, "cuda: kernel %s: a run-time check failed (%s)", k->name, name);
    }
    return FC_OK;
}

static FcStatus run_common(RtCudaProgram *cp, int first, int last, void *const *in, void *const *out, double *ms,
                           FcErr *err) {
    pthread_mutex_lock(&cp->d->mu);
    FcStatus s = run_locked(cp, first, last, in, out, ms, err);
    pthread_mutex_unlock(&cp->d->mu);
    return s;
}

FcStatus rt_cuda_run(RtCudaProgram *cp, void *const *dev_inputs, void *const *dev_outputs, FcErr *err) {
    if (!cp) return fc_err_set(err, FC_ERR_USAGE, "rt_cuda_run: no program");
    return run_common(cp, 0, cp->p->launches.len, dev_inputs, dev_outputs, NULL, err);
}

FcStatus rt_cuda_run_launch(RtCudaProgram *cp, int i, void *const *dev_inputs, void *const *dev_outputs, double *ms,
                            FcErr *err) {
    if (ms) *ms = 0;
    if (!cp) return fc_err_set(err, FC_ERR_USAGE, "rt_cuda_run_launch: no program");
    if (i < 0 || i >= cp->p->launches.len)
        return fc_err_set(err, FC_ERR_USAGE, "cuda: launch %d does not exist (the program has %d)", i,
                          cp->p->launches.len);
    return run_common(cp, i, i + 1, dev_inputs, dev_outputs, ms, err);
}

FcStatus rt_cuda_time_run(RtCudaProgram *cp, void *const *dev_inputs, void *const *dev_outputs, double *ms,
                          FcErr *err) {
    if (!cp || !ms) return fc_err_set(err, FC_ERR_USAGE, "rt_cuda_time_run: NULL argument");
    *ms = 0;
    return run_common(cp, 0, cp->p->launches.len, dev_inputs, dev_outputs, ms, err);
}
