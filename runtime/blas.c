/* blas.c: KirGemm on the CPU through CBLAS (OpenBLAS from Debian's libopenblas0).
 *
 * Row-major throughout: C[m, n] = A[m, k] @ B[k, n] per product, A or B read transposed when
 * the kernel says so, products `stride` elements apart (0: shared). OpenBLAS runs its own
 * threads spin for a while after each call, which slows the kernels fusec runs next; so
 * OpenBLAS runs single-threaded and the CPU device splits each product's rows over its own
 * thread pool (rt_blas_gemm_part).
 *
 * OpenBLAS is loaded on first use (dlopen), not linked, and under OPENBLAS_NUM_THREADS=1 when
 * fusec is the one loading it: linked, its constructor starts a thread per core before main,
 * each of which allocates a buffer of 128 MiB at start, and OpenBLAS 0.3.21 (Debian 12) retries
 * a failed allocation forever (fixed upstream in 0.3.30): under `ulimit -v` fusec printed its
 * out-of-memory error and then never exited, exit() waiting for that thread. Each call takes
 * such a buffer too (one per call in flight, kept for later calls), so under an address-space
 * or data limit, or strict overcommit, a product first checks that the buffers its threads
 * will take can be mapped (rt_blas_ready): a clear out-of-memory error instead of a spin. */
#include "blas.h"

#include "dl.h"

#include <cblas.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

typedef void (*SgemmFn)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint, blasint, blasint, float,
                        const float *, blasint, const float *, blasint, float, float *, blasint);
typedef void (*DgemmFn)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint, blasint, blasint, double,
                        const double *, blasint, const double *, blasint, double, double *, blasint);

/* What one call in flight maps: OpenBLAS's buffer (BUFFER_SIZE, 32 << 22 bytes on x86-64 and
 * arm64, plus a page); and once, the 64 MiB heap glibc's malloc reserves for a thread's first
 * allocation when it makes the thread an arena. */
#define BLAS_CALL_BYTES (((size_t)128 << 20) + 65536)
#define BLAS_ARENA_BYTES ((size_t)64 << 20)

static struct {
    pthread_mutex_t load_mu;   /* loading (again after a failure: memory may be there later) */
    atomic_bool loaded;
    void *lib;
    SgemmFn sgemm;
    DgemmFn dgemm;
    char *(*config)(void);
    pthread_mutex_t mu;        /* the check of rt_blas_ready */
    atomic_int in_flight;      /* calls now */
    atomic_int most;           /* the most calls ever in flight at once: buffers OpenBLAS keeps */
} blas = {.load_mu = PTHREAD_MUTEX_INITIALIZER, .mu = PTHREAD_MUTEX_INITIALIZER};

static const char *const blas_names[] = {"libopenblas.so.0", "libopenblas.so"};

/* dlopen of the first name that loads; else NULL with why[] the first failure that wanted
 * memory (rt_dl_no_room: *no_room set), or the first's. */
static void *open_first(int flags, char *why, size_t cap, bool *no_room) {
    int n = (int)(sizeof blas_names / sizeof blas_names[0]);
    why[0] = 0;
    *no_room = false;
    for (int i = 0; i < n; i++) {
        void *lib = dlopen(blas_names[i], flags);
        if (lib) return lib;
        const char *e = dlerror();
        if (!e) e = "unknown error";
        bool room = rt_dl_no_room(e);
        if (!why[0] || (room && !*no_room)) snprintf(why, cap, "%s", e);
        *no_room = *no_room || room;
    }
    return NULL;
}

/* Loads the BLAS if it is not loaded yet; FC_OK, or FC_ERR_NOMEM (it could not be mapped) or
 * FC_ERR_UNAVAILABLE (not installed, or not a CBLAS) with the reason in why. */
static FcStatus blas_load(char *why, size_t cap) {
    if (atomic_load(&blas.loaded)) return FC_OK;
    pthread_mutex_lock(&blas.load_mu);
    if (atomic_load(&blas.loaded)) {   /* another thread loaded it meanwhile */
        pthread_mutex_unlock(&blas.load_mu);
        return FC_OK;
    }
    FcStatus st = FC_OK;
    bool no_room = false;
    void *lib = dlopen(blas_names[0], RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (!lib) lib = dlopen(blas_names[1], RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (!lib) {   /* not in the process yet: it reads the variable while it loads */
        const char *old = getenv("OPENBLAS_NUM_THREADS");
        char *saved = old ? strdup(old) : NULL;
        bool restore = !old || saved;
        setenv("OPENBLAS_NUM_THREADS", "1", 1);
        lib = open_first(RTLD_NOW | RTLD_LOCAL, why, cap, &no_room);
        if (restore && saved) setenv("OPENBLAS_NUM_THREADS", saved, 1);
        else if (restore) unsetenv("OPENBLAS_NUM_THREADS");
        free(saved);
        if (!lib) st = no_room ? FC_ERR_NOMEM : FC_ERR_UNAVAILABLE;
    }
    if (lib) {
        void (*set_threads)(int) = NULL;
        if (!rt_dl_fn(lib, "cblas_sgemm", &blas.sgemm, sizeof blas.sgemm) ||
            !rt_dl_fn(lib, "cblas_dgemm", &blas.dgemm, sizeof blas.dgemm)) {
            snprintf(why, cap, "%s has no cblas_sgemm or cblas_dgemm", blas_names[0]);
            st = FC_ERR_UNAVAILABLE;
        } else {
            if (rt_dl_fn(lib, "openblas_set_num_threads", &set_threads, sizeof set_threads)) set_threads(1);
            if (!rt_dl_fn(lib, "openblas_get_config", &blas.config, sizeof blas.config)) blas.config = NULL;
            blas.lib = lib;
            atomic_store(&blas.loaded, true);
        }
    }
    pthread_mutex_unlock(&blas.load_mu);
    return st;
}

const char *rt_blas_name(void) {
    char why[256];
    if (blas_load(why, sizeof why) != FC_OK) return "no BLAS";
    return blas.config ? blas.config() : "a CBLAS";
}

/* Whether a mapping can fail for want of address space while memory is there: a limit on
 * the address space or the data segment, or overcommit mode 2 (every private writable page
 * counted at mmap). */
static bool mapping_limited(void) {
    struct rlimit r;
    if (getrlimit(RLIMIT_AS, &r) == 0 && r.rlim_cur != RLIM_INFINITY) return true;
    if (getrlimit(RLIMIT_DATA, &r) == 0 && r.rlim_cur != RLIM_INFINITY) return true;
    static atomic_int strict = -1;   /* /proc/sys/vm/overcommit_memory is 2: read once */
    int s = atomic_load(&strict);
    if (s < 0) {
        FILE *f = fopen("/proc/sys/vm/overcommit_memory", "r");
        int c = f ? fgetc(f) : EOF;
        if (f) fclose(f);
        s = c == '2';
        atomic_store(&strict, s);
    }
    return s == 1;
}

FcStatus rt_blas_ready(int calls, const char *kernel, FcErr *err) {
    char why[256];
    FcStatus st = blas_load(why, sizeof why);
    if (st == FC_ERR_NOMEM)
        return fc_err_set(err, st, "out of memory: cpu: kernel %s: the BLAS (OpenBLAS) cannot be loaded: %s", kernel, why);
    if (st != FC_OK)
        return fc_err_set(err, st, "cpu: kernel %s: the BLAS cannot be loaded (%s); install OpenBLAS (apt-get install libopenblas0)",
                          kernel, why);
    if (calls <= atomic_load(&blas.most) || !mapping_limited()) return FC_OK;
    pthread_mutex_lock(&blas.mu);
    int missing = calls - atomic_load(&blas.most);
    size_t bytes = missing > 0 ? (size_t)missing * BLAS_CALL_BYTES + BLAS_ARENA_BYTES : 0;
    void *p = bytes ? mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) : NULL;
    pthread_mutex_unlock(&blas.mu);
    if (p == MAP_FAILED)
        return fc_err_set(err, FC_ERR_NOMEM,
                          "out of memory: cpu: kernel %s: the BLAS takes a buffer of 128 MiB for each of the %d "
                          "threads that run its product, and %zu MiB more cannot be mapped under this process's "
                          "limits (ulimit -v or -d, or strict overcommit); FUSEC_NUM_THREADS=1 takes one",
                          kernel, calls, bytes >> 20);
    if (p) munmap(p, bytes);
    return FC_OK;
}

/* Count the calls in flight (around each call): the most ever at once is how many buffers
 * OpenBLAS holds at least (it frees none), which rt_blas_ready need not find room for again. */
static void call_begin(void) {
    int now = atomic_fetch_add(&blas.in_flight, 1) + 1;
    int most = atomic_load(&blas.most);
    while (now > most && !atomic_compare_exchange_weak(&blas.most, &most, now)) {}
}
static void call_end(void) { atomic_fetch_sub(&blas.in_flight, 1); }

/* rows [r0, r1) of product i, over columns [k0, k0 + kc) of A and rows [k0, k0 + kc) of B (b
 * holding those rows alone when `panel`, ncols wide; transposed, kc wide), added to C when
 * k0 > 0; columns [c0, c0 + ncols) of C (c0 > 0 only for a panel) */
static void gemm_rows(const KirGemm *g, const void *a, const void *b, void *c, int64_t i, int64_t r0, int64_t r1,
                      int64_t k0, int64_t kc, bool panel, int64_t c0, int64_t ncols) {
    const int lda = (int)(g->trans_a ? g->m : g->k), ldc = (int)g->n;
    const int ldb = (int)(panel ? (g->trans_b ? kc : ncols) : g->trans_b ? g->k : g->n);
    const enum CBLAS_TRANSPOSE ta = g->trans_a ? CblasTrans : CblasNoTrans;
    const enum CBLAS_TRANSPOSE tb = g->trans_b ? CblasTrans : CblasNoTrans;
    const int rows = (int)(r1 - r0);
    /* row r of A is at r*lda (plain) or column r (transposed); its column k0 k0 further along
     * (plain) or k0 rows down (transposed); row k0 of B (plain) k0*ldb in, or at 0 in a panel */
    const int64_t aoff = (g->trans_a ? r0 : r0 * lda) + (g->trans_a ? k0 * lda : k0);
    const int64_t boff = panel ? 0 : g->trans_b ? k0 : k0 * ldb;
    if (g->dtype == FC_F64) {
        const double *pa = (const double *)a + i * g->stride_a + aoff, *pb = (const double *)b + i * g->stride_b + boff;
        double *pc = (double *)c + i * g->stride_c + r0 * ldc + c0;
        blas.dgemm(CblasRowMajor, ta, tb, rows, (int)ncols, (int)kc, 1.0, pa, lda, pb, ldb, k0 > 0 ? 1.0 : 0.0, pc, ldc);
    } else {
        const float *pa = (const float *)a + i * g->stride_a + aoff, *pb = (const float *)b + i * g->stride_b + boff;
        float *pc = (float *)c + i * g->stride_c + r0 * ldc + c0;
        blas.sgemm(CblasRowMajor, ta, tb, rows, (int)ncols, (int)kc, 1.0f, pa, lda, pb, ldb, k0 > 0 ? 1.0f : 0.0f, pc, ldc);
    }
}

/* A causal product (KirGemm.causal): rows in panels of CAUSAL_PANEL, each panel over the
 * columns its last row needs (docs/cpu.md, "Causal products": at T = 2048, panels of 64 rows
 * compute 3 % more than the triangle and ran as fast as 128, faster than 32 or 256, on a 2-core
 * Zen 3). The zero tails' panels (below) are the same. */
enum { CAUSAL_PANEL = 64 };
/* The first row (of the batch x rows) before which the needed columns sum to at least `cost`. */
static int64_t causal_row(const KirGemm *g, int64_t cost) {
    int64_t per = kir_gemm_cols_before(g, g->m), lo = 0, hi = g->batch * g->m;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int64_t before = (mid / g->m) * per + kir_gemm_cols_before(g, mid % g->m);
        if (before >= cost) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}
static void causal_part(const KirGemm *g, const void *a, const void *b, void *c, int64_t part, int64_t nparts) {
    /* the parts split the needed elements evenly (a part of the first rows would have little to do) */
    int64_t total = g->batch * kir_gemm_cols_before(g, g->m);
    int64_t lo = part == 0 ? 0 : causal_row(g, total * part / nparts);
    int64_t hi = part == nparts - 1 ? g->batch * g->m : causal_row(g, total * (part + 1) / nparts);
    while (lo < hi) {
        int64_t i = lo / g->m, r0 = lo % g->m, r1 = r0 + CAUSAL_PANEL - r0 % CAUSAL_PANEL;
        if (r1 > g->m) r1 = g->m;
        if (r1 - r0 > hi - lo) r1 = r0 + (hi - lo);
        int64_t ncols = kir_gemm_cols(g, r1 - 1);   /* the panel's last row needs the most */
        if (ncols > 0) gemm_rows(g, a, b, c, i, r0, r1, 0, g->k, false, 0, ncols);
        lo += r1 - r0;
    }
}

/* A zero tail (KirGemm.zero_tail): 1 + the index of the last element of a row of A that is not
 * a zero of either sign (a NaN is not), 16 at a time while they are all zeros. */
static int64_t row_end(const KirGemm *g, const void *a, int64_t i, int64_t r) {
    int64_t j = g->k, lda = g->k;
    if (g->dtype == FC_F64) {
        const uint64_t *row = (const uint64_t *)a + i * g->stride_a + r * lda;
        for (; j >= 16; j -= 16) {
            uint64_t acc = 0;
            for (int t = 1; t <= 16; t++) acc |= row[j - t] << 1;
            if (acc) break;
        }
        while (j > 0 && !(row[j - 1] << 1)) j--;
        return j;
    }
    const uint32_t *row = (const uint32_t *)a + i * g->stride_a + r * lda;
    for (; j >= 16; j -= 16) {
        uint32_t acc = 0;
        for (int t = 1; t <= 16; t++) acc |= row[j - t] << 1;
        if (acc) break;
    }
    while (j > 0 && !(row[j - 1] << 1)) j--;
    return j;
}
/* 1 + the last row of product i's B ([k, n], or [n, k] transposed) holding an infinity or a NaN
 * (0 when none does): the rows from there on may be left out where A is zero (0 * finite = 0). */
static int64_t last_bad_row(const KirGemm *g, const void *b, int64_t i) {
    for (int64_t r = g->k - 1; r >= 0; r--)
        for (int64_t j = 0; j < g->n; j++) {
            int64_t e = i * g->stride_b + (g->trans_b ? j * g->k + r : r * g->n + j);
            double v = g->dtype == FC_F64 ? ((const double *)b)[e] : ((const float *)b)[e];
            if (!isfinite(v)) return r + 1;
        }
    return 0;
}
/* With a known tail (KirGemm.tail): the column from which rows [p0, p1) of product i's A are zero,
 * from the value each row holds past its tail column (one read a row), or -1 when a row's is not
 * a zero of either sign (then the rows are scanned). */
static int64_t known_end(const KirGemm *g, const void *a, int64_t i, int64_t p0, int64_t p1) {
    int64_t e = 0;
    for (int64_t r = p0; r < p1; r++) {
        int64_t f = kir_tail_col(&g->tail, r, g->k);
        if (f >= g->k) return g->k;
        size_t at = (size_t)(i * g->stride_a + r * g->k + g->k - 1);
        uint64_t bits = g->dtype == FC_F64 ? ((const uint64_t *)a)[at] << 1 : (uint64_t)(((const uint32_t *)a)[at] << 1);
        if (bits) return -1;
        e = f > e ? f : e;
    }
    return e;
}
/* Rows [r0, r1) of product i with a zero tail: in panels of CAUSAL_PANEL rows, a panel whose A
 * ends in zeros from column e on, where B's rows from e on are finite, multiplies only the first
 * e (none: its C is zero); runs of other panels are one product, so a dense A costs a scan of
 * one element a row. */
static void zero_tail_rows(const KirGemm *g, const void *a, const void *b, void *c, int64_t i, int64_t r0, int64_t r1) {
    int64_t bad = -1, run = r0;
    for (int64_t p0 = r0; p0 < r1;) {
        int64_t p1 = p0 + CAUSAL_PANEL - p0 % CAUSAL_PANEL;
        if (p1 > r1) p1 = r1;
        int64_t e = g->tail.align > 0 ? known_end(g, a, i, p0, p1) : -1;
        if (e < 0) {   /* not known: scanned */
            e = 0;
            for (int64_t r = p0; r < p1 && e < g->k; r++) {
                int64_t re = row_end(g, a, i, r);
                e = re > e ? re : e;
            }
        }
        if (e < g->k && bad < 0) bad = last_bad_row(g, b, i);
        if (e < g->k && bad <= e) {
            if (run < p0) gemm_rows(g, a, b, c, i, run, p0, 0, g->k, false, 0, g->n);
            if (e > 0) gemm_rows(g, a, b, c, i, p0, p1, 0, e, false, 0, g->n);
            else
                for (int64_t r = p0; r < p1; r++)
                    memset((char *)c + (size_t)((i * g->stride_c + r * g->n) * (int64_t)fc_dtype_size(g->dtype)), 0,
                           (size_t)g->n * fc_dtype_size(g->dtype));
            run = p1;
        }
        p0 = p1;
    }
    if (run < r1) gemm_rows(g, a, b, c, i, run, r1, 0, g->k, false, 0, g->n);
}

void rt_blas_gemm_part(const KirGemm *g, const void *a, const void *b, void *c, int64_t part, int64_t nparts) {
    call_begin();
    if (g->causal) {
        causal_part(g, a, b, c, part, nparts);
        call_end();
        return;
    }
    /* the batch x rows, cut into nparts contiguous ranges of whole rows */
    int64_t total = g->batch * g->m;
    int64_t lo = total * part / nparts, hi = total * (part + 1) / nparts;
    while (lo < hi) {
        int64_t i = lo / g->m, r0 = lo % g->m, r1 = r0 + (hi - lo);
        if (r1 > g->m) r1 = g->m;
        if (g->zero_tail) zero_tail_rows(g, a, b, c, i, r0, r1);
        else gemm_rows(g, a, b, c, i, r0, r1, 0, g->k, false, 0, g->n);
        lo += r1 - r0;
    }
    call_end();
}
void rt_blas_gemm_panel(const KirGemm *g, const void *a, const void *panel, void *c, int64_t k0, int64_t kc, int64_t r0,
                        int64_t r1, int64_t c0, int64_t c1, int64_t part, int64_t nparts) {
    int64_t lo = r0 + (r1 - r0) * part / nparts, hi = r0 + (r1 - r0) * (part + 1) / nparts;
    call_begin();
    if (lo < hi) gemm_rows(g, a, panel, c, 0, lo, hi, k0, kc, true, c0, c1 - c0);
    call_end();
}
