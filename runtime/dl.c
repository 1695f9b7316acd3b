/* dl.c: see dl.h. */
#include "dl.h"

#include <dlfcn.h>
#include <string.h>

bool rt_dl_fn(void *lib, const char *name, void *fnptr, size_t fnsize) {
    void *sym = dlsym(lib, name);
    if (!sym) return false;
    memcpy(fnptr, &sym, fnsize);
    return true;
}

bool rt_dl_no_room(const char *e) {
    return e && (strstr(e, "failed to map segment") || strcasestr(e, "cannot allocate memory"));
}
