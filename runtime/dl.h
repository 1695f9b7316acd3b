/* dl.h: the helpers the runtime's dlopen users (cuda.c, nvrtc.c, cublaslt.c, blas.c) share. */
#ifndef FUSEC_DL_H
#define FUSEC_DL_H

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

#endif
