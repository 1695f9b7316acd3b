/* dl.h: the helpers the runtime's dlopen users (cuda.c, nvrtc.c, cublaslt.c, blas.c) share. */
#ifndef FUSEC_DL_H
#define FUSEC_DL_H

#include "support.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

/* dlsym(lib, name) stored into the function pointer at fnptr (fnsize bytes) without the
 * object-to-function pointer cast ISO C forbids; false when the symbol is missing. */
bool rt_dl_fn(void *lib, const char *name, void *fnptr, size_t fnsize);
/* Whether a failed dlopen (dlerror's text) wanted memory: the file is there but could not be
 * mapped (glibc: "failed to map segment from shared object", "cannot allocate memory"; under
 * `ulimit -v` or strict overcommit), not missing or unusable. The loaders then report out of
 * memory and try again next time, where memory may be there. */
bool rt_dl_no_room(const char *dlerror_text);

/* A library loaded once per process (cuda.c, nvrtc.c, cublaslt.c): `load` runs under the lock,
 * sets `loaded` when it succeeds (never cleared: the library stays loaded), and when it fails
 * writes its message to `error` and sets `no_room` if it wanted memory (rt_dl_no_room). Another
 * failure is final for the process; a want of memory is tried again by the next call, where
 * memory may be there. */
typedef struct RtDlOnce {
    pthread_mutex_t mu;
    bool tried;          /* load ran */
    bool loaded;
    bool no_room;
    const char *error;   /* the load's message buffer */
} RtDlOnce;
#define RT_DL_ONCE(errbuf) {PTHREAD_MUTEX_INITIALIZER, false, false, false, (errbuf)}
/* Runs load (once, or again after a want of memory) unless the library is loaded; FC_OK, or
 * FC_ERR_NOMEM (it wanted memory) or FC_ERR_UNAVAILABLE with the load's message (read under
 * the lock: another thread may be loading again). */
FcStatus rt_dl_once(RtDlOnce *o, void (*load)(void), FcErr *err);

#endif
