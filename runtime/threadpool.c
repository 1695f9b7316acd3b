/* threadpool.c: a persistent pthread pool (see threadpool.h).
 *
 * A job is published under the mutex with a new generation number; workers wake on
 * `work_cv`, take chunks from an atomic counter until none are left, and the last one out
 * signals `done_cv`. The caller takes chunks too, then waits for `busy` to reach 0, so a
 * job never overlaps the next one.
 */
#include "threadpool.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

struct RtPool {
    int nthreads;                /* including the caller */
    int nworkers;                /* started workers */
    pthread_t *threads;          /* [nthreads - 1] */
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    uint64_t generation;         /* bumped per job (under mu) */
    bool stop;
    int busy;                    /* workers still in the current job (under mu) */
    RtPoolFn fn;                 /* the current job */
    void *ctx;
    int64_t n_chunks;
    _Atomic int64_t next;        /* next chunk to take */
};

static void run_chunks(RtPool *p) {
    for (;;) {
        int64_t c = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (c >= p->n_chunks) return;
        p->fn(p->ctx, c);
    }
}

static void *worker(void *arg) {
    RtPool *p = arg;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->generation == seen) pthread_cond_wait(&p->work_cv, &p->mu);
        if (p->stop) break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        run_chunks(p);
        pthread_mutex_lock(&p->mu);
        if (--p->busy == 0) pthread_cond_signal(&p->done_cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void stop_workers(RtPool *p) {
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->nworkers; i++) pthread_join(p->threads[i], NULL);
    p->nworkers = 0;
}

FcStatus rt_pool_new(int nthreads, size_t stack_bytes, RtPool **out, FcErr *err) {
    *out = NULL;
    if (nthreads < 1) return fc_err_set(err, FC_ERR_USAGE, "thread pool: %d threads", nthreads);
    RtPool *p = fc_calloc(1, sizeof *p);
    if (!p) return FC_OOM(err);
    p->nthreads = nthreads;
    if (nthreads > 1 && !(p->threads = fc_calloc((size_t)nthreads - 1, sizeof *p->threads))) {
        fc_free(p);
        return FC_OOM(err);
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work_cv, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    atomic_init(&p->next, 0);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    if (stack_bytes) pthread_attr_setstacksize(&attr, stack_bytes);
    for (int i = 0; i < nthreads - 1; i++) {
        int rc = pthread_create(&p->threads[i], &attr, worker, p);
        if (rc != 0) {
            pthread_attr_destroy(&attr);
            /* EAGAIN: no room for its stack (ulimit -v) or a limit on threads */
            FcStatus s = rc == EAGAIN || rc == ENOMEM
                             ? fc_err_set(err, FC_ERR_NOMEM,
                                          "out of memory: thread pool: cannot start thread %d of %d (%s: no room "
                                          "for its stack, or a limit on threads); FUSEC_NUM_THREADS=1 runs without one",
                                          i + 2, nthreads, strerror(rc))
                             : fc_err_set(err, FC_ERR_DEVICE, "thread pool: cannot start thread %d of %d: %s", i + 2,
                                          nthreads, strerror(rc));
            rt_pool_free(p);
            return s;
        }
        p->nworkers++;
    }
    pthread_attr_destroy(&attr);
    *out = p;
    return FC_OK;
}

void rt_pool_free(RtPool *p) {
    if (!p) return;
    stop_workers(p);
    pthread_cond_destroy(&p->work_cv);
    pthread_cond_destroy(&p->done_cv);
    pthread_mutex_destroy(&p->mu);
    fc_free(p->threads);
    fc_free(p);
}

int rt_pool_threads(const RtPool *p) { return p ? p->nthreads : 0; }

void rt_pool_parallel_for(RtPool *p, int64_t n_chunks, RtPoolFn fn, void *ctx) {
    if (n_chunks <= 0) return;
    if (p->nworkers == 0 || n_chunks == 1) {
        for (int64_t c = 0; c < n_chunks; c++) fn(ctx, c);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n_chunks = n_chunks;
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    p->busy = p->nworkers;
    p->generation++;
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
    run_chunks(p);
    pthread_mutex_lock(&p->mu);
    while (p->busy > 0) pthread_cond_wait(&p->done_cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
