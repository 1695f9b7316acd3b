/* cuda.h: the CUDA device: the driver API (libcuda.so.1, loaded with dlopen) runs the
 * kernels of a KirProgram compiled by NVRTC (through the kernel cache, cache.h).
 *
 * Use (errors shortened; every call returns an FcStatus and fills err):
 *
 *     RtCuda *d;
 *     if (rt_cuda_open(0, &d, &err) == FC_ERR_UNAVAILABLE) ... no driver or no GPU ...
 *     RtCudaProgram *cp;
 *     rt_cuda_compile(d, kir_program, &cp, &err);          // NVRTC for the device's sm_XY
 *     void *x, *y;                                         // device pointers
 *     rt_cuda_alloc(d, nx, &x, &err); rt_cuda_alloc(d, ny, &y, &err);
 *     rt_cuda_copy_htod(d, x, host_x, nx, &err);
 *     rt_cuda_run(cp, (void *[]){x}, (void *[]){y}, &err); // synchronous
 *     rt_cuda_copy_dtoh(d, host_y, y, ny, &err);
 *     rt_cuda_free(d, y); rt_cuda_free(d, x); rt_cuda_program_free(cp); rt_cuda_close(d);
 *
 * Error model (docs/cuda_runtime.md):
 *   - FC_ERR_UNAVAILABLE: libcuda.so.1 cannot be loaded, lacks an entry point, cuInit fails
 *     or there is no GPU; the message says which.
 *   - FC_ERR_DEVICE: a driver call failed; the message names the call, file:line and the
 *     driver's error name and text ("CUDA_ERROR_INVALID_VALUE: invalid argument").
 *   - FC_ERR_NOMEM: device memory exhausted (CUDA_ERROR_OUT_OF_MEMORY).
 *   - FC_ERR_DEVICE_LOST: a sticky error (illegal address, launch failure, misaligned address,
 *     illegal instruction, hardware stack error, ...) was reported by some call; the primary
 *     context of that GPU is unusable for the rest of the process, so every later call on any
 *     handle of that ordinal returns FC_ERR_DEVICE_LOST without calling the driver (the
 *     message repeats the first error).
 *   - FC_ERR_RUNTIME_DATA: a kernel's run-time check fired (its KS_ERROR status word was set);
 *     the message names the kernel. Outputs are then unspecified.
 *   - FC_ERR_UNSUPPORTED: a kernel's grid exceeds 2^31-1 blocks or its block the device's
 *     limit (refused before anything is launched).
 *
 * Threads: handles are independent; cuInit runs once per process. Each handle has a mutex, so
 * a handle and its programs may be used from several threads (calls are serialized). Every
 * entry point makes the handle's context current on the calling thread.
 *
 * Environment: FUSEC_LIBCUDA=<path> loads exactly that file instead of libcuda.so.1 (the
 * tests use a stub library to exercise error paths on machines without a GPU).
 */
#ifndef FUSEC_CUDA_H
#define FUSEC_CUDA_H

#include "kir.h"

typedef struct RtCuda RtCuda;
typedef struct RtCudaProgram RtCudaProgram;

/* FC_OK if libcuda loads and cuInit succeeds and at least one GPU exists (then *count, may
 * be NULL, is the number of GPUs); FC_ERR_UNAVAILABLE with the reason otherwise. */
FcStatus rt_cuda_available(int *count, FcErr *err);

/* Opens GPU `ordinal` (0-based): retains its primary context, creates a stream. *out is NULL
 * on failure. FC_ERR_UNAVAILABLE as above; FC_ERR_USAGE for an ordinal that does not exist. */
FcStatus rt_cuda_open(int ordinal, RtCuda **out, FcErr *err);
/* Destroys the stream and releases the context. Memory from rt_cuda_alloc must be freed
 * first (the context lives on while other handles of the GPU use it). NULL: nothing. */
void rt_cuda_close(RtCuda *d);

/* ---- what the device is ------------------------------------------------------------------------ */
/* "cuda:0: NVIDIA H100 80GB HBM3, sm_90, 132 SMs, 79.1 GiB" (valid while d lives). */
const char *rt_cuda_description(const RtCuda *d);
/* "NVIDIA H100 80GB HBM3" */
const char *rt_cuda_name(const RtCuda *d);
/* The NVRTC target of the device's compute capability: "sm_90", "sm_89", "sm_120", ... */
const char *rt_cuda_arch(const RtCuda *d);
void rt_cuda_compute_capability(const RtCuda *d, int *major, int *minor);
int64_t rt_cuda_total_memory(const RtCuda *d);      /* bytes of device memory */
int rt_cuda_sm_count(const RtCuda *d);              /* streaming multiprocessors */
int rt_cuda_ordinal(const RtCuda *d);
/* True once a sticky error poisoned this GPU's context (see above). */
bool rt_cuda_lost(const RtCuda *d);
/* Why kernels are compiled without the on-disk cache ("" while the cache is in use or not yet
 * opened; the cache is opened by the first rt_cuda_compile). */
const char *rt_cuda_cache_note(const RtCuda *d);

/* ---- memory (device pointers are plain void *; they are not host-addressable) ---------------- */
/* bytes == 0 gives *ptr = NULL and FC_OK. Allocations are at least 256-byte aligned. */
FcStatus rt_cuda_alloc(RtCuda *d, size_t bytes, void **ptr, FcErr *err);
/* Frees a pointer from rt_cuda_alloc (NULL: nothing). Errors are ignored (nothing to do). */
void rt_cuda_free(RtCuda *d, void *ptr);
/* Copies are synchronous and ordered after all work queued on the device's stream. */
FcStatus rt_cuda_copy_htod(RtCuda *d, void *dst, const void *src, size_t bytes, FcErr *err);
FcStatus rt_cuda_copy_dtoh(RtCuda *d, void *dst, const void *src, size_t bytes, FcErr *err);
FcStatus rt_cuda_copy_dtod(RtCuda *d, void *dst, const void *src, size_t bytes, FcErr *err);
/* Sets bytes bytes at dst to value (synchronous, ordered as the copies). */
FcStatus rt_cuda_memset(RtCuda *d, void *dst, uint8_t value, size_t bytes, FcErr *err);
/* Waits for all work queued on the device's stream. */
FcStatus rt_cuda_synchronize(RtCuda *d, FcErr *err);
/* Device-to-device copy bandwidth in GB/s (bytes read + written), best of several copies of
 * a 256 MiB buffer (smaller when memory is short), timed with events. */
FcStatus rt_cuda_copy_gbps(RtCuda *d, double *gbps, FcErr *err);

/* ---- programs ------------------------------------------------------------------------------------ */
/* Prints p's kernels (cg_cuda_kernels), compiles them for rt_cuda_arch(d) through the kernel
 * cache (rt_cache_compile: a cubin), loads the module, resolves every kernel, and allocates
 * the device workspace (p->workspace_bytes, plus one int32 status word per launch of a kernel
 * that uses_status). p and d must outlive the result. NVRTC failures are FC_ERR_DEVICE with
 * NVRTC's log and the numbered source; a malformed program is FC_ERR_INTERNAL. *hit (may be
 * NULL) tells whether the cubin came from the cache. */
FcStatus rt_cuda_compile(RtCuda *d, const KirProgram *p, RtCudaProgram **out, bool *cache_hit, FcErr *err);
void rt_cuda_program_free(RtCudaProgram *cp);
/* Binds the program's f8 scaling state (KIR_BUF_STATE: device memory of at least that buffer's
 * size, the caller's, kept between runs); a program with a state buffer needs it to run. */
void rt_cuda_set_state(RtCudaProgram *cp, void *dev_state);
/* The device address of the program's workspace (temporaries at their KirBuffer offsets); NULL
 * when it has none. */
void *rt_cuda_workspace(const RtCudaProgram *cp);
/* The handle the program runs on. */
RtCuda *rt_cuda_program_device(const RtCudaProgram *cp);

/* Runs every launch in order and waits for them. dev_inputs/dev_outputs: device pointers per
 * block input/output (KirBuffer.index), each at least the buffer's bytes; temps live in the
 * program's workspace. The status words are zeroed before the launches and read back after;
 * a non-zero one is returned (FC_ERR_RUNTIME_DATA) with the first such kernel's name.
 * Refused before anything is launched: a NULL pointer or a block output overlapping an input
 * or another output (FC_ERR_USAGE), a grid over 2^31-1 blocks (FC_ERR_UNSUPPORTED). Calls on
 * one device are serialized by its mutex. */
FcStatus rt_cuda_run(RtCudaProgram *cp, void *const *dev_inputs, void *const *dev_outputs, FcErr *err);
/* Runs launch i alone (for per-kernel timing); buffers as for rt_cuda_run. *ms (may be NULL)
 * receives the kernel's time in milliseconds, measured with events around the launch. */
FcStatus rt_cuda_run_launch(RtCudaProgram *cp, int i, void *const *dev_inputs, void *const *dev_outputs,
                            double *ms, FcErr *err);
/* rt_cuda_run with *ms = the time from before the first launch to after the last, measured
 * with events on the stream (milliseconds; excludes the host-side status readback). */
FcStatus rt_cuda_time_run(RtCudaProgram *cp, void *const *dev_inputs, void *const *dev_outputs, double *ms,
                          FcErr *err);

#endif
