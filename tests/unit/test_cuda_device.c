/* test_cuda_device.c: the CUDA device (runtime/cuda.c).
 *
 * Without a GPU (always):
 *   - the driver's absence is FC_ERR_UNAVAILABLE with a clear message, never a crash;
 *   - a stub driver (FUSEC_LIBCUDA): a small C library written and compiled by this test
 *     (with $CC or cc) whose cu* functions work on host memory and fail on request
 *     (FAKECU_FAIL_<function>=<CUresult>, read at every call; a sticky code keeps being
 *     returned, as the real driver does). Each scenario runs in its own process (the driver
 *     is loaded once per process): cuInit failing, no devices, a missing entry point, device
 *     properties, memory and copies, out-of-memory and other error messages (call, file:line,
 *     the driver's name and text), programs (compiled by NVRTC when present: arguments of
 *     every launch, the workspace and status words, a kernel's run-time check, the cache, a
 *     grid over 2^31-1, overlapping arguments, events), and sticky errors: after
 *     CUDA_ERROR_ILLEGAL_ADDRESS from cuLaunchKernel or CUDA_ERROR_LAUNCH_FAILED from
 *     cuStreamSynchronize every call returns FC_ERR_DEVICE_LOST and the driver is not called;
 *   - cuBLASLt absent is "cannot be loaded"; the toolkit's cuBLASLt under an address-space
 *     limit is out of memory ("cannot be mapped"), and loads when asked again without it.
 * With a GPU: every sample of kir_samples.h runs on it against its reference (fresh random
 * inputs, outputs poisoned), timings, and a real illegal address in a child process.
 * Exit: 1 on any failure; else 77 when no real GPU was found (the GPU part skipped), else 0.
 */
#include "codegen.h"
#include "cuda.h"
#include "fusec.h"
#include "cublaslt.h"

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kir_samples.h"
#include "nvrtc.h"

#include "check.h"

/* ---- the stub driver ----------------------------------------------------------------------------- */
static const char *const fake_src[] = {
    "#include <stdlib.h>\n#include <string.h>\n#include <stdio.h>\n#include <stdint.h>\n",
    "typedef int CUresult; typedef unsigned long long CUdeviceptr;\n",
    "static int calls, poisoned, nlaunch; static CUdeviceptr last_alloc;\n",
    "static struct { char name[128]; unsigned grid, block, shared; int nargs; CUdeviceptr args[64]; } log_[256];\n",
    "static char dyn_fn[64][128]; static int dyn_max[64], ndyn;\n",
    "static char fnames[256][128]; static int nfn;\n",
    "static int sticky(int r) { return r == 700 || r == 719 || r == 716 || r == 715 || r == 714; }\n",
    "static int fail_code(const char *fn) { char v[160]; snprintf(v, sizeof v, \"FAKECU_FAIL_%s\", fn);\n",
    "  const char *e = getenv(v); return e ? atoi(e) : 0; }\n",
    "#define ENTER(fn) do { calls++; if (poisoned) return poisoned; int f_ = fail_code(#fn);\\\n",
    "  if (f_) { if (sticky(f_)) poisoned = f_; return f_; } } while (0)\n",
    "int fakecu_calls(void) { return calls; }\n",
    "int fakecu_nlaunch(void) { return nlaunch; }\n",
    "CUdeviceptr fakecu_last_alloc(void) { return last_alloc; }\n",
    "int fakecu_launch(int i, char *name, unsigned *grid, unsigned *block, CUdeviceptr *args) {\n",
    "  if (i < 0 || i >= nlaunch || i >= 256) return -1; strcpy(name, log_[i].name); *grid = log_[i].grid;\n",
    "  *block = log_[i].block; memcpy(args, log_[i].args, sizeof log_[i].args); return log_[i].nargs; }\n",
    "CUresult cuInit(unsigned f) { (void)f; calls++; const char *e = getenv(\"FAKECU_INIT\"); return e ? atoi(e) : 0; }\n",
    "CUresult cuDeviceGetCount(int *n) { ENTER(cuDeviceGetCount); const char *e = getenv(\"FAKECU_COUNT\");\n",
    "  *n = e ? atoi(e) : 1; return 0; }\n",
    "CUresult cuDeviceGet(int *d, int o) { ENTER(cuDeviceGet); *d = o; return 0; }\n",
    "CUresult cuDeviceGetName(char *s, int n, int d) { ENTER(cuDeviceGetName); (void)d; snprintf(s, (size_t)n, \"Fake GPU\"); return 0; }\n",
    "CUresult cuDeviceGetAttribute(int *v, int a, int d) { ENTER(cuDeviceGetAttribute); (void)d;\n",
    "  const char *cc = getenv(\"FAKECU_CC\");\n",
    "  switch (a) { case 75: *v = cc ? atoi(cc) / 10 : 9; break; case 76: *v = cc ? atoi(cc) % 10 : 0; break;\n",
    "  case 16: *v = 4; break; case 1: *v = 1024; break;\n",
    "  case 5: *v = 2147483647; break; case 8: *v = 49152; break;\n",
    "  case 97: { const char *e = getenv(\"FAKECU_OPTIN\"); *v = e ? atoi(e) : 232448; break; } default: *v = 0; } return 0; }\n",
    "CUresult cuDeviceTotalMem_v2(size_t *b, int d) { ENTER(cuDeviceTotalMem_v2); (void)d; *b = (size_t)1 << 30; return 0; }\n",
    "static void *allocs[4096]; static int nalloc, retained;\n",
    "CUresult cuDevicePrimaryCtxRetain(void **c, int d) { ENTER(cuDevicePrimaryCtxRetain); (void)d; *c = (void *)16;\n",
    "  retained++; return 0; }\n",
    "/* the context goes with the last release, and its memory with it (as in the real driver) */\n",
    "CUresult cuDevicePrimaryCtxRelease_v2(int d) { calls++; (void)d; if (--retained == 0) {\n",
    "  for (int i = 0; i < nalloc; i++) free(allocs[i]); nalloc = 0; poisoned = 0; } return 0; }\n",
    "CUresult cuCtxSetCurrent(void *c) { ENTER(cuCtxSetCurrent); return c == (void *)16 ? 0 : 201; }\n",
    "CUresult cuStreamCreate(void **s, unsigned f) { ENTER(cuStreamCreate); (void)f; *s = (void *)32; return 0; }\n",
    "CUresult cuStreamDestroy_v2(void *s) { ENTER(cuStreamDestroy_v2); (void)s; return 0; }\n",
    "CUresult cuStreamSynchronize(void *s) { ENTER(cuStreamSynchronize); (void)s; return 0; }\n",
    "CUresult cuModuleLoadData(void **m, const void *img) { ENTER(cuModuleLoadData);\n",
    "  if (memcmp(img, \"\\x7f\" \"ELF\", 4) != 0) return 200; *m = (void *)64; return 0; }\n",
    "CUresult cuModuleUnload(void *m) { ENTER(cuModuleUnload); return m == (void *)64 ? 0 : 400; }\n",
    "CUresult cuModuleGetFunction(void **f, void *m, const char *name) { ENTER(cuModuleGetFunction); (void)m;\n",
    "  if (nfn >= 256) return 2; snprintf(fnames[nfn], 128, \"%s\", name); *f = fnames[nfn++]; return 0; }\n",
    "CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,\n",
    "  unsigned sh, void *s, void **params, void **extra) { ENTER(cuLaunchKernel); (void)s; (void)extra;\n",
    "  if (gy != 1 || gz != 1 || by != 1 || bz != 1 || !params) return 1;\n",
    "  if (sh > 49152) { int ok = 0; for (int i = 0; i < ndyn; i++) ok |= !strcmp(dyn_fn[i], (const char *)f) && dyn_max[i] >= (int)sh;\n",
    "    if (!ok) return 1; }\n",
    "  int n = 0; CUdeviceptr a[64]; while (n < 64 && params[n]) { a[n] = *(CUdeviceptr *)params[n]; n++; }\n",
    "  if (nlaunch < 256) { snprintf(log_[nlaunch].name, 128, \"%s\", (const char *)f); log_[nlaunch].grid = gx;\n",
    "    log_[nlaunch].block = bx; log_[nlaunch].shared = sh; log_[nlaunch].nargs = n; memcpy(log_[nlaunch].args, a, sizeof a); }\n",
    "  nlaunch++;\n",
    "  const char *st = getenv(\"FAKECU_STATUS\"); size_t ln = strlen((const char *)f);\n",
    "  if (st && n > 0 && strncmp(st, (const char *)f, ln) == 0 && st[ln] == ':') *(int *)(uintptr_t)a[n - 1] = atoi(st + ln + 1);\n",
    "  return 0; }\n",
    "CUresult cuFuncSetAttribute(void *f, int a, int v) { ENTER(cuFuncSetAttribute); if (a != 8 || ndyn >= 64) return 1;\n",
    "  snprintf(dyn_fn[ndyn], 128, \"%s\", (const char *)f); dyn_max[ndyn++] = v; return 0; }\n",
    "unsigned fakecu_launch_shared(int i) { return i >= 0 && i < nlaunch && i < 256 ? log_[i].shared : 0u; }\n",
    "CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) { ENTER(cuMemAlloc_v2); void *m = aligned_alloc(256, (n + 255) / 256 * 256);\n",
    "  if (!m || nalloc >= 4096) { free(m); return 2; } allocs[nalloc++] = m;\n",
    "  memset(m, 0xa5, n); *p = last_alloc = (CUdeviceptr)(uintptr_t)m; return 0; }\n",
    "CUresult cuMemFree_v2(CUdeviceptr p) { ENTER(cuMemFree_v2); for (int i = 0; i < nalloc; i++)\n",
    "  if (allocs[i] == (void *)(uintptr_t)p) { free(allocs[i]); allocs[i] = allocs[--nalloc]; return 0; } return 1; }\n",
    "CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) { ENTER(cuMemcpyHtoD_v2); memcpy((void *)(uintptr_t)d, s, n); return 0; }\n",
    "CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) { ENTER(cuMemcpyDtoH_v2); memcpy(d, (void *)(uintptr_t)s, n); return 0; }\n",
    "CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) { ENTER(cuMemcpyDtoD_v2); memmove((void *)(uintptr_t)d, (void *)(uintptr_t)s, n); return 0; }\n",
    "CUresult cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t n, void *st) { ENTER(cuMemcpyDtoHAsync_v2); (void)st; memcpy(d, (void *)(uintptr_t)s, n); return 0; }\n",
    "CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) { ENTER(cuMemsetD8_v2); memset((void *)(uintptr_t)d, v, n); return 0; }\n",
    "CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, void *s) { ENTER(cuMemsetD8Async); (void)s; memset((void *)(uintptr_t)d, v, n); return 0; }\n",
    "CUresult cuEventCreate(void **e, unsigned f) { ENTER(cuEventCreate); (void)f; *e = malloc(8); return 0; }\n",
    "CUresult cuEventRecord(void *e, void *s) { ENTER(cuEventRecord); (void)e; (void)s; return 0; }\n",
    "CUresult cuEventSynchronize(void *e) { ENTER(cuEventSynchronize); (void)e; return 0; }\n",
    "CUresult cuEventElapsedTime(float *ms, void *a, void *b) { ENTER(cuEventElapsedTime); (void)a; (void)b; *ms = 0.5f; return 0; }\n",
    "CUresult cuEventDestroy_v2(void *e) { ENTER(cuEventDestroy_v2); free(e); return 0; }\n",
    "static const char *text(int r, int name) { switch (r) {\n",
    "  case 1: return name ? \"CUDA_ERROR_INVALID_VALUE\" : \"invalid argument\";\n",
    "  case 2: return name ? \"CUDA_ERROR_OUT_OF_MEMORY\" : \"out of memory\";\n",
    "  case 100: return name ? \"CUDA_ERROR_NO_DEVICE\" : \"no CUDA-capable device is detected\";\n",
    "  case 200: return name ? \"CUDA_ERROR_INVALID_IMAGE\" : \"device kernel image is invalid\";\n",
    "  case 700: return name ? \"CUDA_ERROR_ILLEGAL_ADDRESS\" : \"an illegal memory access was encountered\";\n",
    "  case 719: return name ? \"CUDA_ERROR_LAUNCH_FAILED\" : \"unspecified launch failure\";\n",
    "  default: return 0; } }\n",
    "CUresult cuGetErrorName(CUresult r, const char **s) { *s = text(r, 1); return *s ? 0 : 1; }\n",
    "CUresult cuGetErrorString(CUresult r, const char **s) { *s = text(r, 0); return *s ? 0 : 1; }\n",
    NULL,
};

/* ---- the stub cuBLASLt ------------------------------------------------------------------------ */
/* Column-major D = op(A) op(B) on host memory (the stub driver's device memory), written from
 * cuBLASLt's documentation independently of runtime/cublaslt.c: a wrong mapping of fusec's
 * row-major products onto it gives wrong numbers. FAKELT_FAIL=<status> makes cublasLtMatmul
 * fail; FAKELT_NOCREATE=<status> makes cublasLtCreate fail. */
static const char *const fake_lt_src[] = {
    "#include <stdint.h>\n#include <stdlib.h>\n#include <string.h>\n",
    "typedef struct { int compute, scale, ta, tb; } Desc;\n",
    "typedef struct { int type; uint64_t rows, cols; int64_t ld; int32_t batch; int64_t stride; } Lay;\n",
    "static int nmatmul;\n",
    "int fakelt_nmatmul(void) { return nmatmul; }\n",
    "int cublasLtCreate(void **h) { const char *e = getenv(\"FAKELT_NOCREATE\"); if (e) return atoi(e); *h = malloc(8); return 0; }\n",
    "int cublasLtDestroy(void *h) { free(h); return 0; }\n",
    "int cublasLtMatmulDescCreate(Desc **d, int c, int s) { *d = calloc(1, sizeof **d); (*d)->compute = c; (*d)->scale = s; return 0; }\n",
    "int cublasLtMatmulDescDestroy(Desc *d) { free(d); return 0; }\n",
    "int cublasLtMatmulDescSetAttribute(Desc *d, int a, const void *b, size_t n) { if (n != 4) return 7;\n",
    "  if (a == 3) memcpy(&d->ta, b, 4); else if (a == 4) memcpy(&d->tb, b, 4); else return 7; return 0; }\n",
    "int cublasLtMatrixLayoutCreate(Lay **l, int t, uint64_t r, uint64_t c, int64_t ld) {\n",
    "  if (ld < (int64_t)r) return 7; *l = calloc(1, sizeof **l); (*l)->type = t; (*l)->rows = r; (*l)->cols = c;\n",
    "  (*l)->ld = ld; (*l)->batch = 1; return 0; }\n",
    "int cublasLtMatrixLayoutDestroy(Lay *l) { free(l); return 0; }\n",
    "int cublasLtMatrixLayoutSetAttribute(Lay *l, int a, const void *b, size_t n) {\n",
    "  if (a == 5 && n == 4) memcpy(&l->batch, b, 4); else if (a == 6 && n == 8) memcpy(&l->stride, b, 8); else return 7; return 0; }\n",
    "static double at(const void *p, int t, int64_t i) {\n",
    "  if (t == 1) return ((const double *)p)[i]; if (t == 0) return ((const float *)p)[i];\n",
    "  uint16_t h = ((const uint16_t *)p)[i];\n",
    "  if (t == 14) { uint32_t b = (uint32_t)h << 16; float f; memcpy(&f, &b, 4); return f; }\n",
    "  int e = (h >> 10) & 31, x = e ? e - 25 : -24; double v = e ? 1024 + (h & 1023) : (h & 1023);\n",
    "  for (; x < 0; x++) v *= 0.5; for (; x > 0; x--) v *= 2; return h >> 15 ? -v : v; }\n",
    "int cublasLtMatmul(void *h, Desc *d, const void *al, const void *A, Lay *la, const void *B, Lay *lb, const void *be,\n",
    "  const void *C, Lay *lc, void *D, Lay *ld, const void *algo, void *ws, size_t wsn, void *stream) {\n",
    "  (void)h; (void)al; (void)be; (void)C; (void)algo; (void)ws; (void)wsn; (void)stream;\n",
    "  const char *e = getenv(\"FAKELT_FAIL\"); if (e) return atoi(e); nmatmul++;\n",
    "  int t = ld->type, ab = la->type; if (lb->type != ab || (ab != t && !(t == 0 && (ab == 14 || ab == 2))) ||\n",
    "    lc->type != t || d->scale != t || d->compute != (t ? 70 : 68)) return 7;\n",
    "  uint64_t m = ld->rows, n = ld->cols, k = d->ta ? la->rows : la->cols;\n",
    "  if ((d->ta ? la->cols : la->rows) != m || (d->tb ? lb->rows : lb->cols) != n || (d->tb ? lb->cols : lb->rows) != k) return 7;\n",
    "  if (la->batch != ld->batch || lb->batch != ld->batch) return 7;\n",
    "  for (int32_t q = 0; q < ld->batch; q++)\n",
    "    for (uint64_t j = 0; j < n; j++) for (uint64_t i = 0; i < m; i++) { double acc = 0;\n",
    "      for (uint64_t p = 0; p < k; p++) {\n",
    "        int64_t ia = q * la->stride + (int64_t)(d->ta ? i * la->ld + p : p * la->ld + i);\n",
    "        int64_t ib = q * lb->stride + (int64_t)(d->tb ? p * lb->ld + j : j * lb->ld + p);\n",
    "        acc += at(A, ab, ia) * at(B, ab, ib); }\n",
    "      int64_t id = q * ld->stride + (int64_t)(j * ld->ld + i);\n",
    "      if (t) ((double *)D)[id] = acc; else ((float *)D)[id] = (float)acc; }\n",
    "  return 0; }\n",
    "const char *cublasLtGetStatusName(int s) { return s == 13 ? \"CUBLAS_STATUS_EXECUTION_FAILED\" : \"CUBLAS_STATUS_?\"; }\n",
    NULL,
};
static char fake_lt[600];

static char root[256];
static char fake_lib[600], fake_lib_nolaunch[600];

/* Writes the stub and compiles it twice (the second without cuLaunchKernel); false if no
 * compiler works here. */
static bool build_fake(void) {
    char src[600], cmd[2400];
    snprintf(src, sizeof src, "%s/fakecuda.c", root);
    FILE *f = fopen(src, "w");
    if (!f) return false;
    for (int i = 0; fake_src[i]; i++) fputs(fake_src[i], f);
    fclose(f);
    const char *cc = getenv("CC");
    if (!cc || !cc[0]) cc = "cc";
    snprintf(fake_lib, sizeof fake_lib, "%s/libfakecuda.so", root);
    snprintf(fake_lib_nolaunch, sizeof fake_lib_nolaunch, "%s/libfakecuda_nolaunch.so", root);
    snprintf(cmd, sizeof cmd, "%s -shared -fPIC -O1 -o '%s' '%s' 2>&1", cc, fake_lib, src);
    if (system(cmd) != 0) return false;
    char lt_src[600];
    snprintf(lt_src, sizeof lt_src, "%s/fakecublaslt.c", root);
    if (!(f = fopen(lt_src, "w"))) return false;
    for (int i = 0; fake_lt_src[i]; i++) fputs(fake_lt_src[i], f);
    fclose(f);
    snprintf(fake_lt, sizeof fake_lt, "%s/libfakecublaslt.so", root);
    snprintf(cmd, sizeof cmd, "%s -shared -fPIC -O1 -o '%s' '%s' 2>&1", cc, fake_lt, lt_src);
    if (system(cmd) != 0) return false;
    /* the same without cuLaunchKernel: rename it away */
    snprintf(cmd, sizeof cmd, "%s -shared -fPIC -O1 -DcuLaunchKernel=cuLaunchKernel_renamed -o '%s' '%s' 2>&1", cc,
             fake_lib_nolaunch, src);
    return system(cmd) == 0;
}

/* The stub's own functions, from the copy the runtime loaded (dlopen returns that handle). */
static void *fake_sym(const char *name) {
    const char *path = getenv("FUSEC_LIBCUDA");
    void *h = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
    return h ? dlsym(h, name) : NULL;
}
static int fake_calls(void) {
    int (*fn)(void);
    void *s = fake_sym("fakecu_calls");
    if (!s) return -1;
    memcpy(&fn, &s, sizeof fn);
    return fn();
}
static int fake_nlaunch(void) {
    int (*fn)(void);
    void *s = fake_sym("fakecu_nlaunch");
    if (!s) return -1;
    memcpy(&fn, &s, sizeof fn);
    return fn();
}
static unsigned long long fake_last_alloc(void) {
    unsigned long long (*fn)(void);
    void *s = fake_sym("fakecu_last_alloc");
    if (!s) return 0;
    memcpy(&fn, &s, sizeof fn);
    return fn();
}
static int fake_launch(int i, char *name, unsigned *grid, unsigned *block, unsigned long long *args) {
    int (*fn)(int, char *, unsigned *, unsigned *, unsigned long long *);
    void *s = fake_sym("fakecu_launch");
    if (!s) return -1;
    memcpy(&fn, &s, sizeof fn);
    return fn(i, name, grid, block, args);
}

#define HAS(msg, needle) (strstr((msg), (needle)) != NULL)

/* ---- scenarios (each in its own process) ------------------------------------------------------------ */
static void scenario_unavailable(const char *needle) {
    FcErr err = {0};
    RtCuda *d = (RtCuda *)1;
    FcStatus st = rt_cuda_open(0, &d, &err);
    EXPECT(st == FC_ERR_UNAVAILABLE && d == NULL && HAS(err.msg, needle), "open: %d %s (want '%s')", (int)st, err.msg,
           needle);
    int n = -1;
    st = rt_cuda_available(&n, &err);
    EXPECT(st == FC_ERR_UNAVAILABLE && n == 0 && HAS(err.msg, needle), "available: %d %s", (int)st, err.msg);
}

static void scenario_basic(void) {
    FcErr err = {0};
    RtCuda *d = NULL;
    FcStatus st = rt_cuda_open(0, &d, &err);
    EXPECT(st == FC_OK && d, "open: %s", err.msg);
    if (!d) return;
    EXPECT(strcmp(rt_cuda_description(d), "cuda:0: Fake GPU, sm_90, 4 SMs, 1.0 GiB") == 0, "description: %s",
           rt_cuda_description(d));
    int ma = 0, mi = -1;
    rt_cuda_compute_capability(d, &ma, &mi);
    EXPECT(ma == 9 && mi == 0 && strcmp(rt_cuda_arch(d), "sm_90") == 0 && strcmp(rt_cuda_name(d), "Fake GPU") == 0,
           "cc %d.%d arch %s", ma, mi, rt_cuda_arch(d));
    EXPECT(rt_cuda_total_memory(d) == (int64_t)1 << 30 && rt_cuda_sm_count(d) == 4 && rt_cuda_ordinal(d) == 0 &&
           !rt_cuda_lost(d), "properties");
    RtCuda *d2 = (RtCuda *)1;
    st = rt_cuda_open(1, &d2, &err);
    EXPECT(st == FC_ERR_USAGE && !d2 && HAS(err.msg, "CUDA device 1 does not exist (this machine has 1: 0..0)"),
           "ordinal 1: %d %s", (int)st, err.msg);
    st = rt_cuda_open(-1, &d2, &err);
    EXPECT(st == FC_ERR_USAGE, "ordinal -1: %d", (int)st);
    /* a second handle on the same GPU works independently */
    st = rt_cuda_open(0, &d2, &err);
    EXPECT(st == FC_OK && d2, "second handle: %s", err.msg);
    rt_cuda_close(d2);

    /* memory round trip through the stub (its "device" memory is host memory) */
    enum { N = 1001 };
    unsigned char host[N], back[N];
    for (int i = 0; i < N; i++) host[i] = (unsigned char)(i * 7 + 3);
    void *a = NULL, *b = NULL, *z = (void *)1;
    EXPECT(rt_cuda_alloc(d, N, &a, &err) == FC_OK && a && ((uintptr_t)a & 255) == 0, "alloc: %s", err.msg);
    EXPECT(rt_cuda_alloc(d, N, &b, &err) == FC_OK && b, "alloc: %s", err.msg);
    EXPECT(rt_cuda_alloc(d, 0, &z, &err) == FC_OK && z == NULL, "alloc 0");
    EXPECT(rt_cuda_copy_htod(d, a, host, N, &err) == FC_OK, "htod: %s", err.msg);
    EXPECT(rt_cuda_copy_dtod(d, b, a, N, &err) == FC_OK, "dtod: %s", err.msg);
    memset(back, 0, N);
    EXPECT(rt_cuda_copy_dtoh(d, back, b, N, &err) == FC_OK && memcmp(back, host, N) == 0, "dtoh: %s", err.msg);
    EXPECT(rt_cuda_memset(d, b, 0x3c, N, &err) == FC_OK, "memset: %s", err.msg);
    EXPECT(rt_cuda_copy_dtoh(d, back, b, N, &err) == FC_OK && back[0] == 0x3c && back[N - 1] == 0x3c, "memset result");
    EXPECT(rt_cuda_copy_htod(d, NULL, host, N, &err) == FC_ERR_USAGE, "NULL dst");
    EXPECT(rt_cuda_copy_htod(d, a, host, 0, &err) == FC_OK, "0 bytes");
    EXPECT(rt_cuda_synchronize(d, &err) == FC_OK, "sync: %s", err.msg);
    double gbps = 0;
    EXPECT(rt_cuda_copy_gbps(d, &gbps, &err) == FC_OK && gbps > 0, "copy gbps: %s", err.msg);

    /* driver errors: the call, file:line, the driver's name and text; not sticky */
    setenv("FAKECU_FAIL_cuMemAlloc_v2", "2", 1);
    void *c = (void *)1;
    st = rt_cuda_alloc(d, 100, &c, &err);
    EXPECT(st == FC_ERR_NOMEM && c == NULL &&
               HAS(err.msg, "cuda:0: cuMemAlloc_v2 failed at cuda.c:") &&
               HAS(err.msg, " while allocating 100 bytes: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory"),
           "oom: %d %s", (int)st, err.msg);
    unsetenv("FAKECU_FAIL_cuMemAlloc_v2");
    setenv("FAKECU_FAIL_cuMemcpyHtoD_v2", "1", 1);
    st = rt_cuda_copy_htod(d, a, host, N, &err);
    EXPECT(st == FC_ERR_DEVICE && HAS(err.msg, "cuMemcpyHtoD_v2 failed at cuda.c:") &&
               HAS(err.msg, "CUDA_ERROR_INVALID_VALUE (1): invalid argument"), "htod error: %d %s", (int)st, err.msg);
    unsetenv("FAKECU_FAIL_cuMemcpyHtoD_v2");
    setenv("FAKECU_FAIL_cuMemsetD8Async", "4242", 1);
    st = rt_cuda_memset(d, a, 0, N, &err);
    EXPECT(st == FC_ERR_DEVICE && HAS(err.msg, "CUDA_ERROR_UNKNOWN_CODE (4242): no description from the driver"),
           "unknown code: %d %s", (int)st, err.msg);
    unsetenv("FAKECU_FAIL_cuMemsetD8Async");
    setenv("FAKECU_FAIL_cuCtxSetCurrent", "201", 1);
    st = rt_cuda_synchronize(d, &err);
    EXPECT(st == FC_ERR_DEVICE && HAS(err.msg, "cuCtxSetCurrent failed"), "ctx: %d %s", (int)st, err.msg);
    unsetenv("FAKECU_FAIL_cuCtxSetCurrent");
    EXPECT(!rt_cuda_lost(d) && rt_cuda_copy_htod(d, a, host, N, &err) == FC_OK, "a non-sticky error stuck: %s", err.msg);
    /* failures while opening leave nothing behind */
    setenv("FAKECU_FAIL_cuStreamCreate", "2", 1);
    d2 = (RtCuda *)1;
    st = rt_cuda_open(0, &d2, &err);
    EXPECT(st == FC_ERR_NOMEM && !d2 && HAS(err.msg, "cuStreamCreate failed"), "open: %d %s", (int)st, err.msg);
    unsetenv("FAKECU_FAIL_cuStreamCreate");
    for (long n = 1; n <= 2; n++) {
        fc_alloc_fail_at(n);
        d2 = NULL;
        st = rt_cuda_open(0, &d2, &err);
        fc_alloc_fail_at(0);
        EXPECT((st == FC_OK) == (d2 != NULL) && (st == FC_OK || st == FC_ERR_NOMEM), "alloc failure %ld: %d", n, (int)st);
        rt_cuda_close(d2);
    }

    /* sticky: CUDA_ERROR_LAUNCH_FAILED from a synchronize, then nothing reaches the driver */
    setenv("FAKECU_FAIL_cuStreamSynchronize", "719", 1);
    st = rt_cuda_synchronize(d, &err);
    EXPECT(st == FC_ERR_DEVICE_LOST && HAS(err.msg, "CUDA_ERROR_LAUNCH_FAILED (719): unspecified launch failure") &&
               HAS(err.msg, "sticky"), "sticky: %d %s", (int)st, err.msg);
    unsetenv("FAKECU_FAIL_cuStreamSynchronize");
    int calls = fake_calls();
    EXPECT(rt_cuda_lost(d), "not marked lost");
    st = rt_cuda_copy_htod(d, a, host, N, &err);
    EXPECT(st == FC_ERR_DEVICE_LOST && HAS(err.msg, "was lost earlier") && HAS(err.msg, "CUDA_ERROR_LAUNCH_FAILED"),
           "after loss: %d %s", (int)st, err.msg);
    EXPECT(rt_cuda_alloc(d, 10, &c, &err) == FC_ERR_DEVICE_LOST, "alloc after loss");
    EXPECT(rt_cuda_synchronize(d, &err) == FC_ERR_DEVICE_LOST, "sync after loss");
    EXPECT(rt_cuda_open(0, &d2, &err) == FC_ERR_DEVICE_LOST && !d2, "open after loss: %s", err.msg);
    rt_cuda_free(d, a);
    rt_cuda_free(d, b);
    EXPECT(fake_calls() == calls, "the driver was called %d times after the loss", fake_calls() - calls);
    rt_cuda_close(d);
}

/* Device buffers for the block inputs/outputs of p (temps live in the program's workspace), as
 * many as its largest input and output index needs ('pointwise' has 10 inputs and 9 outputs). */
typedef struct DevBufs { void **in, **out; int nin, nout; } DevBufs;
static bool dev_bufs(RtCuda *d, const KirProgram *p, DevBufs *b, FcErr *err) {
    memset(b, 0, sizeof *b);
    for (int i = 0; i < p->buffers.len; i++) {
        const KirBuffer *kb = &p->buffers.data[i];
        int *n = kb->kind == KIR_BUF_INPUT ? &b->nin : kb->kind == KIR_BUF_OUTPUT ? &b->nout : NULL;
        if (n && kb->index + 1 > *n) *n = kb->index + 1;
    }
    b->in = calloc((size_t)b->nin + 1, sizeof *b->in);
    b->out = calloc((size_t)b->nout + 1, sizeof *b->out);
    if (!b->in || !b->out) { snprintf(err->msg, sizeof err->msg, "out of host memory"); return false; }
    for (int i = 0; i < p->buffers.len; i++) {
        const KirBuffer *kb = &p->buffers.data[i];
        if (kb->kind != KIR_BUF_INPUT && kb->kind != KIR_BUF_OUTPUT) continue;
        void **slot = kb->kind == KIR_BUF_INPUT ? &b->in[kb->index] : &b->out[kb->index];
        if (rt_cuda_alloc(d, (size_t)kb->numel * fc_dtype_size(kb->dtype), slot, err) != FC_OK) return false;
    }
    return true;
}
static void dev_bufs_free(RtCuda *d, DevBufs *b) {
    for (int i = 0; b->in && i < b->nin; i++) rt_cuda_free(d, b->in[i]);
    for (int i = 0; b->out && i < b->nout; i++) rt_cuda_free(d, b->out[i]);
    free(b->in);
    free(b->out);
    memset(b, 0, sizeof *b);
}

static void scenario_program(void) {
    FcErr err = {0};
    if (rt_nvrtc_available(&err) != FC_OK) {
        printf("NVRTC absent: the program scenario is skipped\n");
        return;
    }
    RtCuda *d = NULL;
    if (rt_cuda_open(0, &d, &err) != FC_OK) {
        EXPECT(0, "open: %s", err.msg);
        return;
    }
    KsSample ga, ts;
    if (!ks_sample(6, &ga) || !ks_sample(8, &ts)) {
        EXPECT(0, "out of memory");
        return;
    }
    /* two_stage: two launches through a temp at a workspace offset */
    RtCudaProgram *cp = NULL;
    bool hit = true;
    FcStatus st = rt_cuda_compile(d, ts.prog, &cp, &hit, &err);
    EXPECT(st == FC_OK && cp && !hit && rt_cuda_program_device(cp) == d, "compile: %d %s", (int)st, err.msg);
    EXPECT(strcmp(rt_cuda_cache_note(d), "") == 0, "cache note: %s", rt_cuda_cache_note(d));
    unsigned long long ws = fake_last_alloc();
    DevBufs b;
    EXPECT(dev_bufs(d, ts.prog, &b, &err), "buffers: %s", err.msg);
    int n0 = fake_nlaunch();
    st = cp ? rt_cuda_run(cp, b.in, b.out, &err) : FC_ERR_INTERNAL;
    EXPECT(st == FC_OK, "run: %s", err.msg);
    EXPECT(fake_nlaunch() == n0 + 2, "launches: %d", fake_nlaunch() - n0);
    for (int li = 0; li < 2 && st == FC_OK; li++) {
        const KirLaunch *l = &ts.prog->launches.data[li];
        const KirKernel *k = ts.prog->kernels.data[l->kernel];
        char name[128];
        unsigned grid = 0, block = 0;
        unsigned long long args[64];
        int nargs = fake_launch(n0 + li, name, &grid, &block, args);
        EXPECT(nargs == l->nargs && strcmp(name, k->name) == 0 && grid == (unsigned)k->grid &&
                   block == (unsigned)k->block, "launch %d: %s grid %u block %u nargs %d", li, name, grid, block, nargs);
        for (int a = 0; a < l->nargs && a < nargs; a++) {
            const KirBuffer *kb = &ts.prog->buffers.data[l->args[a]];
            unsigned long long want = kb->kind == KIR_BUF_TEMP ? ws + (unsigned long long)kb->offset
                                      : (unsigned long long)(uintptr_t)(kb->kind == KIR_BUF_INPUT ? b.in[kb->index]
                                                                                                  : b.out[kb->index]);
            EXPECT(args[a] == want, "launch %d arg %d: %llx, want %llx", li, a, args[a], want);
        }
    }
    /* per-launch and whole-run timing through events */
    double ms = -1;
    EXPECT(cp && rt_cuda_run_launch(cp, 1, b.in, b.out, &ms, &err) == FC_OK && ms == 0.5, "run_launch: %g %s", ms,
           err.msg);
    EXPECT(cp && rt_cuda_run_launch(cp, 2, b.in, b.out, &ms, &err) == FC_ERR_USAGE && HAS(err.msg, "launch 2 does not exist"),
           "bad launch: %s", err.msg);
    EXPECT(cp && rt_cuda_time_run(cp, b.in, b.out, &ms, &err) == FC_OK && ms == 0.5, "time_run: %s", err.msg);
    /* arguments: NULL, overlapping, too large a grid (nothing launched) */
    int n1 = fake_nlaunch();
    void *null_in[8] = {0};
    st = cp ? rt_cuda_run(cp, null_in, b.out, &err) : FC_ERR_INTERNAL;
    EXPECT(st == FC_ERR_USAGE && HAS(err.msg, "input 0 of the block is a NULL pointer"), "NULL input: %d %s", (int)st,
           err.msg);
    void *alias_out[8] = {b.in[0]};
    st = cp ? rt_cuda_run(cp, b.in, alias_out, &err) : FC_ERR_INTERNAL;
    EXPECT(st == FC_ERR_USAGE && HAS(err.msg, "overlaps"), "aliasing: %d %s", (int)st, err.msg);
    KirKernel *k1 = ts.prog->kernels.data[1];
    int64_t grid = k1->grid;
    k1->grid = (int64_t)1 << 31;
    st = cp ? rt_cuda_run(cp, b.in, b.out, &err) : FC_ERR_INTERNAL;
    EXPECT(st == FC_ERR_UNSUPPORTED && HAS(err.msg, "has a grid of 2147483648 blocks; CUDA launches at most 2147483647 "
                                                    "(nothing was launched)"), "grid: %d %s", (int)st, err.msg);
    k1->grid = grid;
    EXPECT(fake_nlaunch() == n1, "something was launched by a refused run");
    /* the second compile of the same program comes from the cache */
    RtCudaProgram *cp2 = NULL;
    EXPECT(rt_cuda_compile(d, ts.prog, &cp2, &hit, &err) == FC_OK && hit, "no cache hit: %s", err.msg);
    rt_cuda_program_free(cp2);
    cp2 = NULL;
    /* a module the driver refuses */
    setenv("FAKECU_FAIL_cuModuleLoadData", "200", 1);
    st = rt_cuda_compile(d, ts.prog, &cp2, &hit, &err);
    EXPECT(st == FC_ERR_DEVICE && !cp2 && HAS(err.msg, "cuModuleLoadData failed at cuda.c:") &&
               HAS(err.msg, "CUDA_ERROR_INVALID_IMAGE (200): device kernel image is invalid"), "module: %d %s", (int)st,
           err.msg);
    unsetenv("FAKECU_FAIL_cuModuleLoadData");
    setenv("FAKECU_FAIL_cuMemAlloc_v2", "2", 1);
    st = rt_cuda_compile(d, ts.prog, &cp2, &hit, &err);
    EXPECT(st == FC_ERR_NOMEM && !cp2 && HAS(err.msg, "while allocating the 2048-byte workspace"), "workspace: %d %s",
           (int)st, err.msg);
    unsetenv("FAKECU_FAIL_cuMemAlloc_v2");

    /* gather: a status word; a kernel's run-time check fails the run and names the kernel */
    RtCudaProgram *gp = NULL;
    st = rt_cuda_compile(d, ga.prog, &gp, NULL, &err);
    EXPECT(st == FC_OK && gp, "compile gather: %s", err.msg);
    unsigned long long gws = fake_last_alloc();
    DevBufs g;
    EXPECT(dev_bufs(d, ga.prog, &g, &err), "buffers: %s", err.msg);
    int n2 = fake_nlaunch();
    EXPECT(gp && rt_cuda_run(gp, g.in, g.out, &err) == FC_OK, "gather run: %s", err.msg);
    char name[128];
    unsigned gr, bl;
    unsigned long long args[64];
    int nargs = fake_launch(n2, name, &gr, &bl, args);
    EXPECT(nargs == 4 && args[3] == gws, "status word: nargs %d, %llx want %llx", nargs, args[3], gws);
    setenv("FAKECU_STATUS", "k0_gather:9", 1);
    st = gp ? rt_cuda_run(gp, g.in, g.out, &err) : FC_ERR_INTERNAL;
    EXPECT(st == FC_ERR_RUNTIME_DATA && strcmp(err.msg, "cuda: kernel k0_gather: a run-time check failed (run-time "
                                                        "data error)") == 0, "status: %d %s", (int)st, err.msg);
    setenv("FAKECU_STATUS", "k0_gather:12345", 1);
    st = gp ? rt_cuda_run(gp, g.in, g.out, &err) : FC_ERR_INTERNAL;
    EXPECT(st == FC_ERR_INTERNAL && HAS(err.msg, "reported status 12345"), "bad status: %d %s", (int)st, err.msg);
    unsetenv("FAKECU_STATUS");
    EXPECT(gp && rt_cuda_run(gp, g.in, g.out, &err) == FC_OK, "status not zeroed before a run: %s", err.msg);

    /* sticky: CUDA_ERROR_ILLEGAL_ADDRESS from cuLaunchKernel; afterwards no call reaches the driver */
    setenv("FAKECU_FAIL_cuLaunchKernel", "700", 1);
    st = cp ? rt_cuda_run(cp, b.in, b.out, &err) : FC_ERR_INTERNAL;
    EXPECT(st == FC_ERR_DEVICE_LOST && HAS(err.msg, "cuLaunchKernel failed at cuda.c:") &&
               HAS(err.msg, "while launching kernel k0_scale (grid 4, block 256)") &&
               HAS(err.msg, "CUDA_ERROR_ILLEGAL_ADDRESS (700): an illegal memory access was encountered") &&
               HAS(err.msg, "sticky"), "illegal address: %d %s", (int)st, err.msg);
    unsetenv("FAKECU_FAIL_cuLaunchKernel");
    int calls = fake_calls();
    EXPECT(rt_cuda_lost(d), "not lost");
    st = cp ? rt_cuda_run(cp, b.in, b.out, &err) : FC_ERR_INTERNAL;
    EXPECT(st == FC_ERR_DEVICE_LOST && HAS(err.msg, "CUDA_ERROR_ILLEGAL_ADDRESS"), "run after loss: %d %s", (int)st,
           err.msg);
    EXPECT(gp && rt_cuda_run_launch(gp, 0, g.in, g.out, NULL, &err) == FC_ERR_DEVICE_LOST, "run_launch after loss");
    EXPECT(rt_cuda_compile(d, ts.prog, &cp2, &hit, &err) == FC_ERR_DEVICE_LOST && !cp2, "compile after loss: %s", err.msg);
    unsigned char host[16] = {1};
    EXPECT(rt_cuda_copy_dtoh(d, host, b.out[0], 16, &err) == FC_ERR_DEVICE_LOST, "copy after loss");
    double gbps;
    EXPECT(rt_cuda_copy_gbps(d, &gbps, &err) == FC_ERR_DEVICE_LOST, "gbps after loss");
    rt_cuda_program_free(cp);
    rt_cuda_program_free(gp);
    dev_bufs_free(d, &b);
    dev_bufs_free(d, &g);
    EXPECT(fake_calls() == calls, "the driver was called %d times after the loss", fake_calls() - calls);
    rt_cuda_close(d);
    ks_sample_free(&ga);
    ks_sample_free(&ts);
}

/* ---- a real GPU ------------------------------------------------------------------------------------- */
static void real_samples(RtCuda *d) {
    for (int si = 0; si < KS_NUM_SAMPLES; si++) {
        KsSample s;
        if (!ks_sample(si, &s)) { EXPECT(0, "sample %d: out of memory", si); continue; }
        FcErr err = {0};
        RtCudaProgram *cp = NULL;
        FcStatus st = rt_cuda_compile(d, s.prog, &cp, NULL, &err);
        EXPECT(st == FC_OK, "%s: compile: %s", s.name, err.msg);
        void **got = ks_alloc_buffers(s.prog), **want = ks_alloc_buffers(s.prog);
        DevBufs b = {0};
        bool ok = cp && got && want && dev_bufs(d, s.prog, &b, &err);
        EXPECT(ok, "%s: buffers: %s", s.name, err.msg);
        int want_status = 0;   /* a sample with bad data ('gather_bad_ids') fails its run-time check */
        for (int rep = 0; rep < 2 && ok; rep++) {
            s.fill(got, s.prog, 1234 + (uint64_t)rep);
            ks_copy_inputs(s.prog, got, want);
            ks_poison_outputs(s.prog, got);
            for (int i = 0; i < s.prog->buffers.len; i++) {
                const KirBuffer *kb = &s.prog->buffers.data[i];
                size_t n = (size_t)kb->numel * fc_dtype_size(kb->dtype);
                if (kb->kind != KIR_BUF_TEMP)
                    rt_cuda_copy_htod(d, kb->kind == KIR_BUF_INPUT ? b.in[kb->index] : b.out[kb->index], got[i], n, &err);
            }
            st = rt_cuda_run(cp, b.in, b.out, &err);
            want_status = s.reference(want, s.prog);
            EXPECT((int)st == want_status, "%s: status %d (%s), want %d", s.name, (int)st, err.msg, want_status);
            if (want_status != 0) continue;   /* outputs are unspecified then */
            for (int i = 0; i < s.prog->buffers.len; i++) {
                const KirBuffer *kb = &s.prog->buffers.data[i];
                if (kb->kind == KIR_BUF_OUTPUT)
                    rt_cuda_copy_dtoh(d, got[i], b.out[kb->index], (size_t)kb->numel * fc_dtype_size(kb->dtype), &err);
            }
            char msg[256];
            long bad = ks_compare(s.prog, got, want, s.rtol, msg, sizeof msg);
            EXPECT(bad == 0, "%s: %ld mismatches: %s", s.name, bad, msg);
        }
        if (ok) {
            /* timing runs the program as a run does: the same status */
            double ms = 0;
            st = rt_cuda_time_run(cp, b.in, b.out, &ms, &err);
            EXPECT((int)st == want_status || s.prog->launches.len == 0, "%s: time: status %d (%s), want %d", s.name, (int)st,
                   err.msg, want_status);
            ms = 0;
            st = rt_cuda_run_launch(cp, 0, b.in, b.out, &ms, &err);
            EXPECT((int)st == want_status && ms > 0, "%s: run_launch: status %d (%s), want %d", s.name, (int)st, err.msg,
                   want_status);
        }
        dev_bufs_free(d, &b);
        rt_cuda_program_free(cp);
        ks_free_buffers(s.prog, got);
        ks_free_buffers(s.prog, want);
        ks_sample_free(&s);
    }
}

/* A kernel that stores far outside its buffer: the GPU reports an illegal address. */
static int child_real_illegal(void) {
    FcErr err = {0};
    RtCuda *d = NULL;
    if (rt_cuda_open(0, &d, &err) != FC_OK) return 2;
    KirProgram *p = kir_program_new("illegal");
    KirKernel *k = p ? kir_kernel_new(p, "k0_wild", 1, 32) : NULL;
    if (!k) return 3;
    kir_param(k, FC_F32, 1, true);
    kir_store(k, 0, kir_const_i(k, KT_I64, (int64_t)1 << 40), kir_const_f(k, KT_F32, 1.0));
    ks_buffer(p, KIR_BUF_OUTPUT, 0, FC_F32, 1, 0);
    if (!kir_kernel_ok(k) || !ks_launch_identity(p, 1)) return 4;
    RtCudaProgram *cp = NULL;
    if (rt_cuda_compile(d, p, &cp, NULL, &err) != FC_OK) { fprintf(stderr, "%s\n", err.msg); return 5; }
    void *out[1] = {NULL};
    if (rt_cuda_alloc(d, 4, &out[0], &err) != FC_OK) return 6;
    FcStatus st = rt_cuda_run(cp, NULL, out, &err);
    int rc = st == FC_ERR_DEVICE_LOST && HAS(err.msg, "CUDA_ERROR_ILLEGAL_ADDRESS") ? 0 : 7;
    if (rc) fprintf(stderr, "illegal: %d %s\n", (int)st, err.msg);
    if (rc == 0 && rt_cuda_synchronize(d, &err) != FC_ERR_DEVICE_LOST) rc = 8;
    rt_cuda_program_free(cp);
    rt_cuda_free(d, out[0]);
    rt_cuda_close(d);
    kir_program_free(p);
    return rc;
}

/* ---- driver ------------------------------------------------------------------------------------------ */
/* Runs this program again as `argv1` with the given environment additions; its exit status. */
static int run_child(const char *argv1, const char *const *env) {
    pid_t pid = fork();
    if (pid == 0) {
        for (int i = 0; env && env[i]; i += 2) setenv(env[i], env[i + 1], 1);
        char *argv[] = {"test_cuda_device", (char *)argv1, NULL};
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    int ws = 0;
    if (pid < 0 || waitpid(pid, &ws, 0) != pid) return -1;
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + (WIFSIGNALED(ws) ? WTERMSIG(ws) : 0);
}

/* The toolkit's cuBLASLt (a file of over 100 MiB), or NULL */
static const char *big_cublaslt(void) {
    static char path[600];
    const char *home = getenv("CUDA_HOME");
    const char *dirs[] = {home && home[0] ? home : "/usr/local/cuda", "/usr/local/cuda"};
    static const char *const names[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11"};
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < 3; i++) {
            struct stat st;
            snprintf(path, sizeof path, "%s/lib64/%s", dirs[d], names[i]);
            if (stat(path, &st) == 0 && st.st_size > ((off_t)100 << 20)) return path;
        }
    return NULL;
}

/* Library products through the stub cuBLASLt (FUSEC_LIBCUBLASLT): every layout fusec emits
 * (transposed operands, batches with strides, a shared operand, f32 and f64, bf16 and f16
 * operands of an f32 product) against a row-major reference, and a failing cublasLtMatmul. */
typedef struct LtCase { FcDtype t; int64_t batch, m, n, k, sa, sb, sc; bool ta, tb; int ab16; } LtCase;
static void scenario_lt(void) {
    FcErr err = {0};
    if (rt_nvrtc_available(&err) != FC_OK) {
        printf("NVRTC absent: the cuBLASLt scenario is skipped\n");
        return;
    }
    RtCuda *d = NULL;
    if (rt_cuda_open(0, &d, &err) != FC_OK) {
        EXPECT(0, "open: %s", err.msg);
        return;
    }
    static const LtCase cases[] = {
        {FC_F32, 1, 5, 7, 3, 0, 0, 0, false, false, 0},
        {FC_F32, 1, 4, 6, 5, 0, 0, 0, true, false, 0},
        {FC_F32, 1, 4, 6, 5, 0, 0, 0, false, true, 0},
        {FC_F32, 3, 2, 5, 4, 8, 20, 10, false, false, 0},
        {FC_F32, 2, 3, 4, 6, 18, 0, 12, true, false, 0},
        {FC_F64, 2, 3, 2, 4, 12, 8, 6, true, true, 0},
        {FC_F32, 1, 5, 7, 3, 0, 0, 0, false, false, FC_BF16},
        {FC_F32, 2, 3, 4, 6, 18, 0, 12, true, false, FC_F16},
        {FC_F32, 3, 2, 5, 4, 8, 20, 10, false, true, FC_BF16},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const LtCase *q = &cases[c];
        KirProgram *p = kir_program_new("lt");
        KirGemm g = {.batch = q->batch, .m = q->m, .n = q->n, .k = q->k, .stride_a = q->sa, .stride_b = q->sb,
                     .stride_c = q->sc, .trans_a = q->ta, .trans_b = q->tb, .dtype = q->t, .ab16 = q->ab16};
        KirKernel *k = p ? kir_gemm_new(p, "k0_matmul", &g) : NULL;
        if (!k) { EXPECT(0, "out of memory"); kir_program_free(p); break; }
        int64_t n[3] = {k->params.data[0].numel, k->params.data[1].numel, k->params.data[2].numel};
        for (int i = 0; i < 3; i++) {
            KirBuffer b = {i < 2 ? KIR_BUF_INPUT : KIR_BUF_OUTPUT, i < 2 ? i : 0, i < 2 ? kir_gemm_ab_dtype(&g) : q->t, n[i], 0, -1};
            if (!FC_VEC_PUSH(&p->buffers, b)) exit(2);
        }
        KirLaunch l = {0, 3, arena_alloc(&p->arena, 3 * sizeof(int))};
        if (!l.args || !FC_VEC_PUSH(&p->launches, l)) exit(2);
        for (int i = 0; i < 3; i++) l.args[i] = i;
        size_t es = fc_dtype_size(q->t);
        double *h[3];
        void *dv[3] = {NULL, NULL, NULL};
        for (int i = 0; i < 3; i++) {
            h[i] = calloc((size_t)n[i], sizeof(double));
            EXPECT(rt_cuda_alloc(d, (size_t)n[i] * (i < 2 && q->ab16 ? 2 : es), &dv[i], &err) == FC_OK, "alloc: %s", err.msg);
        }
        char *stage = malloc((size_t)(n[0] + n[1] + n[2]) * es);
        for (int i = 0; i < 2; i++) {
            for (int64_t e = 0; e < n[i]; e++) {
                /* exact in f32; with 16-bit operands multiples of 1/4 up to 5/4, exact in both */
                h[i][e] = (double)((e * 7 + i * 3) % 11) / 4.0 - (q->ab16 ? 1.25 : 1.3);
                float f = (float)h[i][e];
                uint32_t fb;
                memcpy(&fb, &f, 4);
                if (q->t == FC_F64) ((double *)stage)[e] = h[i][e];
                else if (q->ab16 == FC_BF16) ((uint16_t *)stage)[e] = (uint16_t)(fb >> 16);
                else if (q->ab16 == FC_F16)   /* a normal f16 (|x| >= 1/4) or zero */
                    ((uint16_t *)stage)[e] = f == 0 ? 0 : (uint16_t)(((fb >> 16) & 0x8000) | ((((fb >> 23) & 255) - 112) << 10) | ((fb >> 13) & 1023));
                else ((float *)stage)[e] = f;
            }
            rt_cuda_copy_htod(d, dv[i], stage, (size_t)n[i] * (q->ab16 ? 2 : es), &err);
        }
        memset(stage, 0xFF, (size_t)n[2] * es);   /* poison: NaN */
        rt_cuda_copy_htod(d, dv[2], stage, (size_t)n[2] * es, &err);
        RtCudaProgram *cp = NULL;
        FcStatus st = rt_cuda_compile(d, p, &cp, NULL, &err);
        EXPECT(st == FC_OK, "case %zu: compile: %s", c, err.msg);
        void *in[2] = {dv[0], dv[1]}, *out[1] = {dv[2]};
        if (st == FC_OK) st = rt_cuda_run(cp, in, out, &err);
        EXPECT(st == FC_OK, "case %zu: run: %s", c, err.msg);
        rt_cuda_copy_dtoh(d, stage, dv[2], (size_t)n[2] * es, &err);
        int bad = 0;
        for (int64_t b = 0; b < q->batch; b++)
            for (int64_t i = 0; i < q->m; i++)
                for (int64_t j = 0; j < q->n; j++) {
                    double want = 0;
                    for (int64_t r = 0; r < q->k; r++) {
                        double av = h[0][b * q->sa + (q->ta ? r * q->m + i : i * q->k + r)];
                        double bv = h[1][b * q->sb + (q->tb ? j * q->k + r : r * q->n + j)];
                        want += av * bv;
                    }
                    int64_t o = b * q->sc + i * q->n + j;
                    double got = q->t == FC_F64 ? ((double *)stage)[o] : ((float *)stage)[o];
                    bad += !(fabs(got - want) <= 1e-5 * (1 + fabs(want)));
                }
        EXPECT(bad == 0, "case %zu (batch %lld, %lldx%lldx%lld, ta %d, tb %d, ab16 %d): %d wrong", c, (long long)q->batch,
               (long long)q->m, (long long)q->n, (long long)q->k, q->ta, q->tb, q->ab16, bad);
        if (c == 0 && st == FC_OK) {   /* a failing cublasLtMatmul is an error that names it */
            setenv("FAKELT_FAIL", "13", 1);
            st = rt_cuda_run(cp, in, out, &err);
            unsetenv("FAKELT_FAIL");
            EXPECT(st == FC_ERR_DEVICE && HAS(err.msg, "cublasLtMatmul failed with status 13 (CUBLAS_STATUS_EXECUTION_FAILED)"),
                   "failing matmul: %d %s", (int)st, err.msg);
        }
        rt_cuda_program_free(cp);
        for (int i = 0; i < 3; i++) {
            rt_cuda_free(d, dv[i]);
            free(h[i]);
        }
        free(stage);
        kir_program_free(p);
    }
    rt_cuda_close(d);
}

/* A kernel whose shared array (20000 f32 = 80000 bytes) is over static shared memory: it is
 * launched with that much dynamic shared memory after cuFuncSetAttribute raised its limit
 * (the stub refuses a launch over 48 KiB without it), and refused at compile time on a GPU
 * that allows less (FAKECU_OPTIN). */
static KirProgram *big_shared_program(void) {
    KirProgram *p = kir_program_new("dyn");
    KirKernel *k = p ? kir_kernel_new(p, "k0_big", 1, 256) : NULL;
    if (!k) exit(2);
    int o = kir_param(k, FC_F32, 20000, true), sh = kir_shared(k, KT_F32, 20000);
    int i = kir_var(k, KT_I64), j = kir_var(k, KT_I64);
    kir_for(k, KIR_LOOP_THREADS, i, kir_const_i(k, KT_I64, 0), kir_const_i(k, KT_I64, 20000));
    kir_shstore(k, sh, kir_var_ref(k, i), kir_cast(k, KT_F32, kir_var_ref(k, i)));
    kir_end(k);
    kir_barrier(k);
    kir_for(k, KIR_LOOP_THREADS, j, kir_const_i(k, KT_I64, 0), kir_const_i(k, KT_I64, 20000));
    kir_store(k, o, kir_var_ref(k, j), kir_shload(k, sh, kir_var_ref(k, j)));
    kir_end(k);
    KirBuffer b = {KIR_BUF_OUTPUT, 0, FC_F32, 20000, 0, -1};
    if (!FC_VEC_PUSH(&p->buffers, b)) exit(2);
    KirLaunch l = {0, 1, arena_alloc(&p->arena, sizeof(int))};
    if (!l.args || !FC_VEC_PUSH(&p->launches, l)) exit(2);
    l.args[0] = 0;
    return p;
}
static void scenario_dynamic_shared(bool small_gpu) {
    FcErr err = {0};
    if (rt_nvrtc_available(&err) != FC_OK) {
        printf("NVRTC absent: the dynamic shared memory scenario is skipped\n");
        return;
    }
    RtCuda *d = NULL;
    if (rt_cuda_open(0, &d, &err) != FC_OK) {
        EXPECT(0, "open: %s", err.msg);
        return;
    }
    KirProgram *p = big_shared_program();
    EXPECT(cg_cuda_dynamic_shared(p->kernels.data[0]) == 80000, "dynamic bytes %lld",
           (long long)cg_cuda_dynamic_shared(p->kernels.data[0]));
    RtCudaProgram *cp = NULL;
    FcStatus st = rt_cuda_compile(d, p, &cp, NULL, &err);
    if (small_gpu) {
        EXPECT(st == FC_ERR_UNSUPPORTED && HAS(err.msg, "cuda: kernel k0_big needs 80000 bytes of shared memory; Fake GPU "
                                                          "allows 65536 a block"),
               "small GPU: %d %s", (int)st, err.msg);
    } else {
        EXPECT(st == FC_OK, "compile: %s", err.msg);
        void *out = NULL;
        EXPECT(rt_cuda_alloc(d, 80000, &out, &err) == FC_OK, "alloc: %s", err.msg);
        int n0 = fake_nlaunch();
        void *outs[1] = {out};
        if (st == FC_OK) st = rt_cuda_run(cp, NULL, outs, &err);
        EXPECT(st == FC_OK, "run: %s", err.msg);
        unsigned (*shared_of)(int) = NULL;
        void *sym = fake_sym("fakecu_launch_shared");
        if (sym) memcpy(&shared_of, &sym, sizeof shared_of);
        EXPECT(shared_of && fake_nlaunch() == n0 + 1 && shared_of(n0) == 80000, "launch with %u bytes",
               shared_of ? shared_of(n0) : 0u);
        rt_cuda_free(d, out);
    }
    rt_cuda_program_free(cp);
    kir_program_free(p);
    rt_cuda_close(d);
}

/* Through the public API on an "sm_86" stub GPU (99 KiB of opt-in shared memory): a block whose
 * rows (26000 f32, 104000 bytes) fit sm_90's staging budget, the default --arch, but not
 * this GPU's is lowered again for sm_86 and loads; compiled for sm_86 it loads as well. */
static void scenario_device_arch(void) {
    FcErr err = {0};
    if (rt_nvrtc_available(&err) != FC_OK) {
        printf("NVRTC absent: the device arch scenario is skipped\n");
        return;
    }
    static const char *src = "block wide(x: f32[3, 26000]) -> f32[3, 26000] {\n    return softmax(x, axis=1)\n}\n";
    FcDevice *dev = NULL;
    FcStatus st = fc_device_open(FC_DEVICE_CUDA, 0, &dev);
    EXPECT(st == FC_OK && HAS(fc_device_description(dev), "sm_86"), "open: %d %s", (int)st,
           dev ? fc_device_description(dev) : "");
    for (int pass = 0; pass < 2 && st == FC_OK; pass++) {
        FcOptions *o = NULL;
        fc_options_new(&o);
        if (pass == 1) fc_options_set_arch(o, "sm_86");
        FcBlock *b = NULL;
        EXPECT(fc_compile_string(src, "wide.tf", o, &b) == FC_OK, "compile: %s", fc_block_last_error(b));
        FcProgram *p = NULL;
        FcStatus ps = fc_program_new(b, dev, &p);
        EXPECT(ps == FC_OK, "%s: program: %d %s", pass ? "--arch sm_86" : "default --arch", (int)ps,
               p ? fc_program_last_error(p) : fc_block_last_error(b));
        fc_program_free(p);
        fc_block_free(b);
        fc_options_free(o);
    }
    fc_device_free(dev);
}

/* Without the library: a clear FC_ERR_UNAVAILABLE from rt_lt_create's caller. */
static void scenario_lt_absent(void) {
    char why[600] = "";
    EXPECT(!rt_lt_available(why, sizeof why) && HAS(why, "cuBLASLt cannot be loaded (FUSEC_LIBCUBLASLT=/nonexistent"),
           "absent cuBLASLt: %s", why);
}

/* A cuBLASLt that is there but cannot be mapped (FUSEC_LIBCUBLASLT: the toolkit's, over 100 MiB,
 * under an address-space limit 64 MiB above what the process maps now) is out of memory, not
 * absent, and the next call, with the limit lifted, loads it. Not in a sanitizer build (ASan's
 * shadow needs more address space than any such limit leaves). */
static void scenario_lt_no_room(void) {
#if defined(__SANITIZE_ADDRESS__)
    printf("sanitizer build: the cuBLASLt no-room scenario is skipped\n");
#else
    long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%ld", &pages) != 1) pages = 0;
    if (f) fclose(f);
    struct rlimit old, lim;
    if (pages <= 0 || getrlimit(RLIMIT_AS, &old) != 0 || old.rlim_cur != RLIM_INFINITY) {
        printf("no /proc/self/statm, or a limit on the address space already: the cuBLASLt no-room scenario is skipped\n");
        return;
    }
    lim = old;
    lim.rlim_cur = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + ((rlim_t)64 << 20);
    EXPECT(setrlimit(RLIMIT_AS, &lim) == 0, "setrlimit: %s", strerror(errno));
    char why[600] = "";
    bool ok = rt_lt_available(why, sizeof why);
    EXPECT(setrlimit(RLIMIT_AS, &old) == 0, "setrlimit back: %s", strerror(errno));
    EXPECT(!ok && HAS(why, "out of memory: cuBLASLt cannot be mapped (FUSEC_LIBCUBLASLT="), "cuBLASLt under a limit: %s",
           ok ? "loaded" : why);
    why[0] = 0;
    EXPECT(rt_lt_available(why, sizeof why), "cuBLASLt without the limit, tried again: %s", why);
#endif
}

static int child_main(const char *what) {
    if (!strcmp(what, "--absent")) scenario_unavailable("no CUDA driver: FUSEC_LIBCUDA=/nonexistent/libcuda.so.1 cannot be loaded");
    else if (!strcmp(what, "--init-fails"))
        scenario_unavailable("no usable CUDA GPU: cuInit failed: CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected");
    else if (!strcmp(what, "--no-devices")) scenario_unavailable("no CUDA GPU on this machine (the driver found none)");
    else if (!strcmp(what, "--missing-symbol")) scenario_unavailable("lacks the entry point cuLaunchKernel (driver too old?)");
    else if (!strcmp(what, "--basic")) scenario_basic();
    else if (!strcmp(what, "--program")) scenario_program();
    else if (!strcmp(what, "--lt")) scenario_lt();
    else if (!strcmp(what, "--lt-absent")) scenario_lt_absent();
    else if (!strcmp(what, "--lt-no-room")) scenario_lt_no_room();
    else if (!strcmp(what, "--dynamic-shared")) scenario_dynamic_shared(false);
    else if (!strcmp(what, "--dynamic-shared-small")) scenario_dynamic_shared(true);
    else if (!strcmp(what, "--device-arch")) scenario_device_arch();
    else if (!strcmp(what, "--real-illegal")) return child_real_illegal();
    else return 99;
    return failures ? 1 : 0;
}

/* runtime/cublaslt.c and runtime/cuda.c declare the constants of cuBLASLt and the driver they
 * use themselves (fusec builds without the toolkit); where the toolkit's headers are
 * installed, they must agree. */
static void check_lt_abi(const char *dir) {
    const char *home = getenv("CUDA_HOME");
    char inc[400], hdr[460], src[600], cmd[1600];
    snprintf(inc, sizeof inc, "%s/include", home && home[0] ? home : "/usr/local/cuda");
    snprintf(hdr, sizeof hdr, "%s/cublasLt.h", inc);
    struct stat stt;
    if (stat(hdr, &stt) != 0) {
        printf("no cublasLt.h: the cuBLASLt ABI check is skipped\n");
        return;
    }
    snprintf(src, sizeof src, "%s/ltabi.c", dir);
    FILE *f = fopen(src, "w");
    if (!f) { EXPECT(0, "cannot write %s", src); return; }
    fputs("#include <cuda.h>\n"
          "_Static_assert(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN == 97, \"runtime/cuda.c: optin\");\n"
          "_Static_assert(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES == 8, \"runtime/cuda.c: dynamic shared\");\n"
          "#include <cublasLt.h>\n"
          "_Static_assert(CUDA_R_32F == 0 && CUDA_R_64F == 1 && CUDA_R_16F == 2 && CUDA_R_16BF == 14, \"data types\");\n"
          "_Static_assert(CUBLAS_COMPUTE_32F == 68 && CUBLAS_COMPUTE_64F == 70, \"compute types\");\n"
          "_Static_assert(CUBLAS_OP_N == 0 && CUBLAS_OP_T == 1, \"operations\");\n"
          "_Static_assert(CUBLASLT_MATMUL_DESC_TRANSA == 3 && CUBLASLT_MATMUL_DESC_TRANSB == 4, \"desc\");\n"
          "_Static_assert(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT == 5 && CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET == 6, \"layout\");\n"
          "_Static_assert(CUBLAS_STATUS_SUCCESS == 0, \"status\");\n", f);
    fclose(f);
    const char *cc = getenv("CC");
    snprintf(cmd, sizeof cmd, "%s -std=c11 -fsyntax-only -I'%s' '%s' 2>&1", cc && cc[0] ? cc : "cc", inc, src);
    EXPECT(system(cmd) == 0, "runtime/cublaslt.c's or cuda.c's constants disagree with %s or cuda.h", hdr);
}

int main(int argc, char **argv) {
    /* --write-stub DIR: only write and compile the stub driver into DIR (libfakecuda.so), for
     * tests/difftest/cuda_stub.sh; 77 without a C compiler */
    if (argc == 3 && !strcmp(argv[1], "--write-stub")) {
        snprintf(root, sizeof root, "%s", argv[2]);
        if (!build_fake()) {
            printf("no C compiler: the stub driver cannot be built\n");
            return 77;
        }
        printf("%s\n", fake_lib);
        return 0;
    }
    if (argc > 1) return child_main(argv[1]);
    snprintf(root, sizeof root, "/tmp/fusec-test-cuda-XXXXXX");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    char cache[400];
    snprintf(cache, sizeof cache, "%s/cache", root);

    /* the real driver, whatever this machine has: a GPU, or a clean FC_ERR_UNAVAILABLE */
    FcErr err = {0};
    RtCuda *d = NULL;
    FcStatus st = rt_cuda_open(0, &d, &err);
    bool have_gpu = st == FC_OK;
    EXPECT(st == FC_OK || st == FC_ERR_UNAVAILABLE, "open: %d %s", (int)st, err.msg);
    if (st == FC_ERR_UNAVAILABLE) {
        EXPECT(err.msg[0] != 0 && d == NULL, "no message");
        printf("no GPU: %s\n", err.msg);
    }

    const char *absent[] = {"FUSEC_LIBCUDA", "/nonexistent/libcuda.so.1", NULL};
    EXPECT(run_child("--absent", absent) == 0, "absent driver");
    if (build_fake()) {
        const char *init[] = {"FUSEC_LIBCUDA", fake_lib, "FAKECU_INIT", "100", NULL};
        const char *none[] = {"FUSEC_LIBCUDA", fake_lib, "FAKECU_COUNT", "0", NULL};
        const char *nolaunch[] = {"FUSEC_LIBCUDA", fake_lib_nolaunch, NULL};
        const char *fake[] = {"FUSEC_LIBCUDA", fake_lib, "FUSEC_CACHE_DIR", cache, NULL};
        EXPECT(run_child("--init-fails", init) == 0, "cuInit failing");
        EXPECT(run_child("--no-devices", none) == 0, "no devices");
        EXPECT(run_child("--missing-symbol", nolaunch) == 0, "missing entry point");
        EXPECT(run_child("--basic", fake) == 0, "stub driver: basics and errors");
        EXPECT(run_child("--program", fake) == 0, "stub driver: programs");
        const char *lt[] = {"FUSEC_LIBCUDA", fake_lib, "FUSEC_LIBCUBLASLT", fake_lt, "FUSEC_CACHE_DIR", cache, NULL};
        const char *lt_absent[] = {"FUSEC_LIBCUBLASLT", "/nonexistent/libcublasLt.so", NULL};
        EXPECT(run_child("--lt", lt) == 0, "stub driver and stub cuBLASLt: library products");
        EXPECT(run_child("--lt-absent", lt_absent) == 0, "cuBLASLt absent");
        const char *big = big_cublaslt();
        if (big) {
            const char *lt_big[] = {"FUSEC_LIBCUBLASLT", big, NULL};
            EXPECT(run_child("--lt-no-room", lt_big) == 0, "cuBLASLt that cannot be mapped");
        } else {
            printf("no libcublasLt.so.* in $CUDA_HOME/lib64 or /usr/local/cuda/lib64: the no-room scenario is skipped\n");
        }
        const char *small[] = {"FUSEC_LIBCUDA", fake_lib, "FUSEC_CACHE_DIR", cache, "FAKECU_OPTIN", "65536", NULL};
        EXPECT(run_child("--dynamic-shared", fake) == 0, "dynamic shared memory");
        EXPECT(run_child("--dynamic-shared-small", small) == 0, "dynamic shared memory over the GPU's");
        const char *sm86[] = {"FUSEC_LIBCUDA", fake_lib, "FUSEC_CACHE_DIR", cache, "FAKECU_CC", "86",
                              "FAKECU_OPTIN", "101376", "FUSEC_LIBCUBLASLT", "/nonexistent/libcublasLt.so", NULL};
        EXPECT(run_child("--device-arch", sm86) == 0, "a block lowered for its GPU's compute capability");
        check_lt_abi(root);
    } else {
        printf("no C compiler: the stub-driver scenarios are skipped\n");
    }

    if (d) {
        printf("GPU: %s\n", rt_cuda_description(d));
        real_samples(d);
        double gbps = 0;
        EXPECT(rt_cuda_copy_gbps(d, &gbps, &err) == FC_OK && gbps > 0, "copy bandwidth: %s", err.msg);
        printf("device copy: %.0f GB/s\n", gbps);
        rt_cuda_close(d);
        EXPECT(run_child("--real-illegal", NULL) == 0, "a real illegal address");
    }
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
    if (failures) {
        fprintf(stderr, "test_cuda_device: %d failure(s)\n", failures);
        return 1;
    }
    if (!have_gpu) {
        printf("test_cuda_device: no-GPU checks passed; the GPU checks are skipped\n");
        return 77;
    }
    printf("test_cuda_device: ok\n");
    return 0;
}
