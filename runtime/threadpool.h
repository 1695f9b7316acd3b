/* threadpool.h: a small persistent pthread pool for the CPU device (runtime/cpu.c).
 *
 * rt_pool_new starts nthreads - 1 workers; rt_pool_parallel_for(n, fn, ctx) runs
 * fn(ctx, 0..n-1), each chunk exactly once, on the workers and the calling thread, and returns
 * when all are done. Idle workers sleep on a condition variable (no spinning). Which thread runs
 * which chunk is not fixed, so fn must make each chunk's result independent of that (the CPU
 * kernels do: a chunk is a fixed range of blocks). One parallel_for at a time per pool.
 */
#ifndef FUSEC_THREADPOOL_H
#define FUSEC_THREADPOOL_H

#include "support.h"

typedef struct RtPool RtPool;
typedef void (*RtPoolFn)(void *ctx, int64_t chunk);

/* nthreads >= 1 counts the calling thread; stack_bytes: each worker's stack (0: default). */
FcStatus rt_pool_new(int nthreads, size_t stack_bytes, RtPool **out, FcErr *err);
void rt_pool_free(RtPool *p);                 /* joins the workers; NULL does nothing */
int rt_pool_threads(const RtPool *p);
void rt_pool_parallel_for(RtPool *p, int64_t n_chunks, RtPoolFn fn, void *ctx);

#endif
