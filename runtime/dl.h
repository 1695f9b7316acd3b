/* dl.h: the one helper the runtime's dlopen users (cuda.c, nvrtc.c, cublaslt.c) share. */
#ifndef FUSEC_DL_H
#define FUSEC_DL_H

#include <stdbool.h>
#include <stddef.h>

/* dlsym(lib, name) stored into the function pointer at fnptr (fnsize bytes) without the
 * object-to-function pointer cast ISO C forbids; false when the symbol is missing. */
bool rt_dl_fn(void *lib, const char *name, void *fnptr, size_t fnsize);

#endif
