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

FcStatus rt_dl_once(RtDlOnce *o, void (*load)(void), FcErr *err) {
    pthread_mutex_lock(&o->mu);
    if (!o->loaded && (!o->tried || o->no_room)) {
        load();
        o->tried = true;
    }
    FcStatus st = o->loaded ? FC_OK
                            : fc_err_set(err, o->no_room ? FC_ERR_NOMEM : FC_ERR_UNAVAILABLE, "%s", o->error);
    pthread_mutex_unlock(&o->mu);
    return st;
}

bool rt_dl_no_room(const char *e) {
    return e && (strstr(e, "failed to map segment") || strcasestr(e, "cannot allocate memory"));
}
