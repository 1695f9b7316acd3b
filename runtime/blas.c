/* blas.c: KirGemm on the CPU through CBLAS (OpenBLAS from Debian's libopenblas-dev).
 *
 * Row-major throughout: C[m, n] = A[m, k] @ B[k, n] per product, A or B read transposed when
 * the kernel says so, products `stride` elements apart (0: shared). OpenBLAS runs its own
 * threads spin for a while after each call, which slows the kernels fusec runs next; so
 * OpenBLAS runs single-threaded and the CPU device splits each product's rows over its own
 * thread pool (rt_blas_gemm_part).
 */
#include "blas.h"

#include <cblas.h>
#include <pthread.h>

/* OpenBLAS's thread control (not part of CBLAS proper). */
void openblas_set_num_threads(int num_threads);
char *openblas_get_config(void);

const char *rt_blas_name(void) { return openblas_get_config(); }

static pthread_once_t once = PTHREAD_ONCE_INIT;
static void single_threaded(void) { openblas_set_num_threads(1); }

/* rows [r0, r1) of product i, over columns [k0, k0 + kc) of A and rows [k0, k0 + kc) of B (b
 * holding those rows alone when `panel`), added to C when k0 > 0 */
static void gemm_rows(const KirGemm *g, const void *a, const void *b, void *c, int64_t i, int64_t r0, int64_t r1,
                      int64_t k0, int64_t kc, bool panel) {
    const int lda = (int)(g->trans_a ? g->m : g->k), ldb = (int)(g->trans_b ? g->k : g->n), ldc = (int)g->n;
    const enum CBLAS_TRANSPOSE ta = g->trans_a ? CblasTrans : CblasNoTrans;
    const enum CBLAS_TRANSPOSE tb = g->trans_b ? CblasTrans : CblasNoTrans;
    const int rows = (int)(r1 - r0);
    /* row r of A is at r*lda (plain) or column r (transposed); its column k0 k0 further along
     * (plain) or k0 rows down (transposed); row k0 of B (plain) k0*ldb in, or at 0 in a panel */
    const int64_t aoff = (g->trans_a ? r0 : r0 * lda) + (g->trans_a ? k0 * lda : k0);
    const int64_t boff = panel ? 0 : g->trans_b ? k0 : k0 * ldb;
    if (g->dtype == FC_F64) {
        const double *pa = (const double *)a + i * g->stride_a + aoff, *pb = (const double *)b + i * g->stride_b + boff;
        double *pc = (double *)c + i * g->stride_c + r0 * ldc;
        cblas_dgemm(CblasRowMajor, ta, tb, rows, (int)g->n, (int)kc, 1.0, pa, lda, pb, ldb, k0 > 0 ? 1.0 : 0.0, pc, ldc);
    } else {
        const float *pa = (const float *)a + i * g->stride_a + aoff, *pb = (const float *)b + i * g->stride_b + boff;
        float *pc = (float *)c + i * g->stride_c + r0 * ldc;
        cblas_sgemm(CblasRowMajor, ta, tb, rows, (int)g->n, (int)kc, 1.0f, pa, lda, pb, ldb, k0 > 0 ? 1.0f : 0.0f, pc, ldc);
    }
}

void rt_blas_gemm_part(const KirGemm *g, const void *a, const void *b, void *c, int64_t part, int64_t nparts) {
    pthread_once(&once, single_threaded);
    /* the batch x rows, cut into nparts contiguous ranges of whole rows */
    int64_t total = g->batch * g->m;
    int64_t lo = total * part / nparts, hi = total * (part + 1) / nparts;
    while (lo < hi) {
        int64_t i = lo / g->m, r0 = lo % g->m, r1 = r0 + (hi - lo);
        if (r1 > g->m) r1 = g->m;
        gemm_rows(g, a, b, c, i, r0, r1, 0, g->k, false);
        lo += r1 - r0;
    }
}
void rt_blas_gemm_panel(const KirGemm *g, const void *a, const void *panel, void *c, int64_t k0, int64_t kc, int64_t part,
                        int64_t nparts) {
    pthread_once(&once, single_threaded);
    int64_t lo = g->m * part / nparts, hi = g->m * (part + 1) / nparts;
    if (lo < hi) gemm_rows(g, a, panel, c, 0, lo, hi, k0, kc, true);
}
