/* api.c: the public C API (fusec.h). */
#include "support.h"
const char *fc_version(void) { return FUSEC_VERSION_STRING; }
const char *fc_status_name(FcStatus s) {
    switch (s) {
    case FC_OK: return "ok";
    case FC_ERR_INPUT: return "input error";
    case FC_ERR_USAGE: return "usage error";
    case FC_ERR_UNAVAILABLE: return "unavailable";
    case FC_ERR_NOMEM: return "out of memory";
    case FC_ERR_IO: return "i/o error";
    case FC_ERR_DEVICE: return "device error";
    case FC_ERR_DEVICE_LOST: return "device lost";
    case FC_ERR_RUNTIME_DATA: return "run-time data error";
    case FC_ERR_UNSUPPORTED: return "unsupported";
    case FC_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}
