/* nvrtc.h: NVRTC loaded with dlopen at run time (CUDA_HOME, /usr/local/cuda, the loader
 * path), so fusec builds and runs without the CUDA toolkit. */
#ifndef FUSEC_NVRTC_H
#define FUSEC_NVRTC_H

#include "support.h"

/* FC_OK if NVRTC can be loaded; FC_ERR_UNAVAILABLE with how to get it otherwise. */
FcStatus rt_nvrtc_available(FcErr *err);
/* Compiles CUDA C for arch ("sm_80", "sm_90", ...) to PTX (cubin false) or a cubin (true).
 * *out (fc_alloc'd) holds the result; a compile failure is FC_ERR_DEVICE with NVRTC's log
 * and the numbered source in err (truncated to fit). `log` if not NULL receives the full
 * log (fc_alloc'd, caller frees) on success or failure. */
FcStatus rt_nvrtc_compile(const char *src, const char *arch, bool cubin, char **out, size_t *len,
                          char **log, FcErr *err);
/* "12.8" etc.; NULL when unavailable. */
const char *rt_nvrtc_version(void);

#endif
