/* blas.h: library matrix products (KirGemm) on the CPU through a CBLAS (OpenBLAS). */
#ifndef FUSEC_BLAS_H
#define FUSEC_BLAS_H

#include "kir.h"

/* C = A @ B as g describes (row-major, batched with strides). a, b, c are the buffers bound
 * to the kernel's params. Runs with the BLAS's own threads (set to nthreads). */
void rt_blas_gemm(const KirGemm *g, const void *a, const void *b, void *c, int nthreads);
/* "OpenBLAS 0.3.21 ..." or another description of the BLAS in use. */
const char *rt_blas_name(void);

#endif
