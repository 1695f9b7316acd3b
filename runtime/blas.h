/* blas.h: library matrix products (KirGemm) on the CPU through a CBLAS (OpenBLAS, loaded on
 * first use). */
#ifndef FUSEC_BLAS_H
#define FUSEC_BLAS_H

#include "kir.h"

/* Part `part` of `nparts` of C = A @ B as g describes (row-major, batched with strides): the
 * parts split the batch x rows of C into contiguous slices, so callers run the parts on their
 * own threads. a, b, c are the buffers bound to the kernel's params. The BLAS runs
 * single-threaded (its own threads would spin after each call and slow fusec's kernels). */
void rt_blas_gemm_part(const KirGemm *g, const void *a, const void *b, void *c, int64_t part, int64_t nparts);
/* B in panels (KirGemm.panel_k; batch 1, B not transposed): part `part` of `nparts` of C's rows
 * [r0, r1), its columns [c0, c1), (+)= A[r0:r1, k0:k0+kc] @ panel, panel holding B's rows [k0,
 * k0 + kc) of those columns ([kc, c1 - c0]); C is set by the first panel (k0 = 0) and added to
 * by the others. */
void rt_blas_gemm_panel(const KirGemm *g, const void *a, const void *panel, void *c, int64_t k0, int64_t kc, int64_t r0,
                        int64_t r1, int64_t c0, int64_t c1, int64_t part, int64_t nparts);
/* Before a product of `calls` parts run at once (on as many threads): loads the BLAS (first
 * time; FC_ERR_UNAVAILABLE where it cannot be loaded) and, where the process's mappings are
 * limited (ulimit -v or -d, strict overcommit), checks that the buffers the BLAS will take for
 * calls it has not yet run at once can be mapped (FC_ERR_NOMEM naming `kernel` otherwise):
 * OpenBLAS retries a failed allocation forever. */
FcStatus rt_blas_ready(int calls, const char *kernel, FcErr *err);
/* "OpenBLAS 0.3.21 ..." or another description of the BLAS in use. */
const char *rt_blas_name(void);

#endif
