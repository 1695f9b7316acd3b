/* blas.c: KirGemm on the CPU through CBLAS (OpenBLAS from Debian's libopenblas-dev).
 *
 * Row-major throughout: C[m, n] = A[m, k] @ B[k, n] per product, A or B read transposed when
 * the kernel says so, products `stride` elements apart (0: shared). OpenBLAS runs its own
 * threads; fusec sets their number to the device's thread count before each call.
 */
#include "blas.h"

#include <cblas.h>

/* OpenBLAS's thread control (not part of CBLAS proper). */
void openblas_set_num_threads(int num_threads);
char *openblas_get_config(void);

const char *rt_blas_name(void) { return openblas_get_config(); }

void rt_blas_gemm(const KirGemm *g, const void *a, const void *b, void *c, int nthreads) {
    openblas_set_num_threads(nthreads > 0 ? nthreads : 1);
    const int lda = (int)(g->trans_a ? g->m : g->k), ldb = (int)(g->trans_b ? g->k : g->n), ldc = (int)g->n;
    const enum CBLAS_TRANSPOSE ta = g->trans_a ? CblasTrans : CblasNoTrans;
    const enum CBLAS_TRANSPOSE tb = g->trans_b ? CblasTrans : CblasNoTrans;
    for (int64_t i = 0; i < g->batch; i++) {
        if (g->dtype == FC_F64) {
            const double *pa = (const double *)a + i * g->stride_a, *pb = (const double *)b + i * g->stride_b;
            double *pc = (double *)c + i * g->stride_c;
            cblas_dgemm(CblasRowMajor, ta, tb, (int)g->m, (int)g->n, (int)g->k, 1.0, pa, lda, pb, ldb, 0.0, pc, ldc);
        } else {
            const float *pa = (const float *)a + i * g->stride_a, *pb = (const float *)b + i * g->stride_b;
            float *pc = (float *)c + i * g->stride_c;
            cblas_sgemm(CblasRowMajor, ta, tb, (int)g->m, (int)g->n, (int)g->k, 1.0f, pa, lda, pb, ldb, 0.0f, pc, ldc);
        }
    }
}
