/* nvrtc.c: NVRTC loaded with dlopen at run time, so that fusec builds and runs where the
 * CUDA toolkit is absent (entry points: rt_nvrtc_available, rt_nvrtc_compile,
 * rt_nvrtc_version; see nvrtc.h and docs/cuda.md).
 *
 * Loading happens once per process and the library stays loaded; a load that failed for want
 * of memory (the file there but not mappable: rt_dl_no_room) is FC_ERR_NOMEM, not "no
 * NVRTC", and is tried again by the next call. The search:
 *   1. $FUSEC_NVRTC_LIBRARY, when set: exactly that file and nothing else (tests, pinning);
 *   2. $CUDA_HOME/lib64/libnvrtc.so*, then $CUDA_HOME/lib/libnvrtc.so* (pip's
 *      nvidia-cuda-nvrtc-cu12 wheel has lib/; point CUDA_HOME at .../nvidia/cuda_nvrtc);
 *   3. /usr/local/cuda/lib64/libnvrtc.so*;
 *   4. the dynamic loader's path: libnvrtc.so, libnvrtc.so.13, .12, .11.
 * Within one folder "libnvrtc.so" is tried first, then versioned names, newest first.
 * The prototypes below are our own (no CUDA header at build time); they match NVRTC's C ABI,
 * which has been stable since CUDA 11.
 */
#include "dl.h"
#include "nvrtc.h"

#include <dlfcn.h>
#include <glob.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvrtcResult;                 /* NVRTC_SUCCESS = 0 */
typedef struct nvrtcProgramOpaque *nvrtcProgram;

typedef struct NvrtcApi {
    nvrtcResult (*create)(nvrtcProgram *prog, const char *src, const char *name, int num_headers,
                          const char *const *headers, const char *const *include_names);
    nvrtcResult (*compile)(nvrtcProgram prog, int num_options, const char *const *options);
    nvrtcResult (*log_size)(nvrtcProgram prog, size_t *size);
    nvrtcResult (*log)(nvrtcProgram prog, char *log);
    nvrtcResult (*ptx_size)(nvrtcProgram prog, size_t *size);
    nvrtcResult (*ptx)(nvrtcProgram prog, char *ptx);
    nvrtcResult (*cubin_size)(nvrtcProgram prog, size_t *size);
    nvrtcResult (*cubin)(nvrtcProgram prog, char *cubin);
    nvrtcResult (*destroy)(nvrtcProgram *prog);
    nvrtcResult (*version)(int *major, int *minor);
    const char *(*error_string)(nvrtcResult r);
} NvrtcApi;

static NvrtcApi api;
static char load_error[1024];
static RtDlOnce once = RT_DL_ONCE(load_error);   /* once.no_room: the last load wanted memory somewhere */
static char version_text[32];
static char loaded_path[512];

#define HOW_TO_GET                                                                          \
    "install the CUDA toolkit (NVRTC is in /usr/local/cuda/lib64), or `pip install "       \
    "nvidia-cuda-nvrtc-cu12` and set CUDA_HOME to its nvidia/cuda_nvrtc folder"


static bool try_open(const char *path, char *why, size_t whylen) {
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        if (rt_dl_no_room(e)) once.no_room = true;
        else if (once.no_room) return false;   /* keep the message of the want of memory */
        snprintf(why, whylen, "%s", e ? e : path);
        return false;
    }
    NvrtcApi a;
    memset(&a, 0, sizeof a);
    const char *missing = NULL;
#define RES(field, sym) if (!missing && !rt_dl_fn(lib, sym, &a.field, sizeof a.field)) missing = sym
    RES(create, "nvrtcCreateProgram");
    RES(compile, "nvrtcCompileProgram");
    RES(log_size, "nvrtcGetProgramLogSize");
    RES(log, "nvrtcGetProgramLog");
    RES(ptx_size, "nvrtcGetPTXSize");
    RES(ptx, "nvrtcGetPTX");
    RES(cubin_size, "nvrtcGetCUBINSize");
    RES(cubin, "nvrtcGetCUBIN");
    RES(destroy, "nvrtcDestroyProgram");
    RES(version, "nvrtcVersion");
    RES(error_string, "nvrtcGetErrorString");
#undef RES
    int major = 0, minor = 0;
    if (missing) {
        snprintf(why, whylen, "%s lacks %s (NVRTC older than CUDA 11?)", path, missing);
        dlclose(lib);
        return false;
    }
    if (a.version(&major, &minor) != 0) {
        snprintf(why, whylen, "%s: nvrtcVersion failed", path);
        dlclose(lib);
        return false;
    }
    api = a;
    snprintf(version_text, sizeof version_text, "%d.%d", major, minor);
    snprintf(loaded_path, sizeof loaded_path, "%s", path);
    return true;   /* never closed: kept for the life of the process */
}

/* Versioned names newest first: "libnvrtc.so.12.8" before "libnvrtc.so.12". */
static int cmp_desc(const void *a, const void *b) {
    return strverscmp(*(const char *const *)b, *(const char *const *)a);
}

static bool try_folder(const char *dir, char *why, size_t whylen) {
    char pat[1024];
    if (!dir || !dir[0]) return false;
    if ((size_t)snprintf(pat, sizeof pat, "%s/libnvrtc.so", dir) < sizeof pat && try_open(pat, why, whylen))
        return true;
    if ((size_t)snprintf(pat, sizeof pat, "%s/libnvrtc.so.*", dir) >= sizeof pat) return false;
    glob_t g;
    bool ok = false;
    if (glob(pat, 0, NULL, &g) == 0) {
        qsort(g.gl_pathv, g.gl_pathc, sizeof(char *), cmp_desc);
        for (size_t i = 0; i < g.gl_pathc && !ok; i++) ok = try_open(g.gl_pathv[i], why, whylen);
        globfree(&g);
    }
    return ok;
}

static void load(void) {
    char why[512] = "not found";
    once.no_room = false;
    const char *pin = getenv("FUSEC_NVRTC_LIBRARY");
    if (pin && pin[0]) {
        once.loaded = try_open(pin, why, sizeof why);
        if (!once.loaded && once.no_room)
            snprintf(load_error, sizeof load_error, "out of memory: NVRTC (FUSEC_NVRTC_LIBRARY=%s) cannot be mapped (%s)",
                     pin, why);
        else if (!once.loaded)
            snprintf(load_error, sizeof load_error,
                     "NVRTC is unavailable: FUSEC_NVRTC_LIBRARY=%s cannot be loaded (%s); " HOW_TO_GET, pin, why);
        return;
    }
    const char *home = getenv("CUDA_HOME");
    char dir[768];
    if (home && home[0]) {
        snprintf(dir, sizeof dir, "%s/lib64", home);
        if ((once.loaded = try_folder(dir, why, sizeof why))) return;
        snprintf(dir, sizeof dir, "%s/lib", home);
        if ((once.loaded = try_folder(dir, why, sizeof why))) return;
    }
    if ((once.loaded = try_folder("/usr/local/cuda/lib64", why, sizeof why))) return;
    static const char *const names[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if ((once.loaded = try_open(names[i], why, sizeof why))) return;
    if (once.no_room)
        snprintf(load_error, sizeof load_error, "out of memory: NVRTC cannot be mapped (%s)", why);
    else
        snprintf(load_error, sizeof load_error,
                 "NVRTC is unavailable: no libnvrtc.so in $CUDA_HOME/lib64, /usr/local/cuda/lib64 or the "
                 "loader path (last error: %s); " HOW_TO_GET, why);
}

/* Loads NVRTC unless it is loaded or failed for a reason other than a want of memory (rt_dl_once) */
static FcStatus ensure_loaded(FcErr *err) { return rt_dl_once(&once, load, err); }

FcStatus rt_nvrtc_available(FcErr *err) { return ensure_loaded(err); }

const char *rt_nvrtc_version(void) {
    FcErr e = {0};
    return ensure_loaded(&e) == FC_OK ? version_text : NULL;
}

/* "sm_80", "sm_90a", ...: two or three digits, optionally one lowercase letter. */
static bool valid_arch(const char *arch) {
    if (!arch || strncmp(arch, "sm_", 3) != 0) return false;
    const char *p = arch + 3;
    int digits = 0;
    while (*p >= '0' && *p <= '9') { p++; digits++; }
    if (digits < 2 || digits > 3) return false;
    if (*p >= 'a' && *p <= 'z') p++;
    return *p == 0;
}

/* The first line number NVRTC's log names in an error ("fusec.cu(12): error ..."), or 0. */
static long first_error_line(const char *log) {
    for (const char *p = log; p && (p = strstr(p, "fusec.cu(")) != NULL; p++) {
        char *end;
        long line = strtol(p + 9, &end, 10);
        if (end[0] == ')' && strncmp(end + 1, ": error", 7) == 0) return line;
    }
    return 0;
}

/* The source with line numbers, lines [from, to] (1-based, inclusive; to < 1: all). */
static void number_lines(StrBuf *o, const char *src, long from, long to) {
    long line = 1;
    const char *p = src;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if (line >= from && (to < 1 || line <= to)) sb_printf(o, "%5ld| %.*s\n", line, (int)n, p);
        line++;
        if (!nl) break;
        p = nl + 1;
    }
}

FcStatus rt_nvrtc_compile(const char *src, const char *arch, bool cubin, char **out, size_t *len,
                          char **log, FcErr *err) {
    if (out) *out = NULL;
    if (len) *len = 0;
    if (log) *log = NULL;
    if (!src || !out || !len) return fc_err_set(err, FC_ERR_USAGE, "rt_nvrtc_compile: NULL argument");
    if (!valid_arch(arch))
        return fc_err_set(err, FC_ERR_USAGE, "unknown GPU architecture '%.40s' (expected sm_80, sm_90, ...)",
                          arch ? arch : "(null)");
    FC_TRY(rt_nvrtc_available(err));

    char archopt[64];
    /* PTX for the virtual architecture (compute_XX), a cubin for the real one (sm_XX) */
    snprintf(archopt, sizeof archopt, "--gpu-architecture=%s%s", cubin ? "sm_" : "compute_", arch + 3);
    const char *opts[] = {archopt, "--std=c++17"};
    nvrtcProgram prog = NULL;
    nvrtcResult r = api.create(&prog, src, "fusec.cu", 0, NULL, NULL);
    if (r != 0)
        return fc_err_set(err, FC_ERR_DEVICE, "nvrtcCreateProgram failed: %s", api.error_string(r));

    FcStatus st = FC_OK;
    char *logtext = NULL;
    char *bin = NULL;
    size_t logsz = 0, binsz = 0;
    nvrtcResult rc = api.compile(prog, (int)(sizeof opts / sizeof opts[0]), opts);
    r = api.log_size(prog, &logsz);
    if (r != 0) { st = fc_err_set(err, FC_ERR_DEVICE, "nvrtcGetProgramLogSize failed: %s", api.error_string(r)); goto done; }
    logtext = fc_alloc(logsz + 1);
    if (!logtext) { st = FC_OOM(err); goto done; }
    logtext[0] = 0;
    if (logsz > 0 && (r = api.log(prog, logtext)) != 0) {
        st = fc_err_set(err, FC_ERR_DEVICE, "nvrtcGetProgramLog failed: %s", api.error_string(r));
        goto done;
    }
    logtext[logsz] = 0;

    if (rc != 0) {
        /* the full text (log + numbered source) to `log`; as much as fits to err */
        StrBuf full = {0};
        sb_printf(&full, "NVRTC %s: compiling for %s failed (%s):\n%s\n---- source ----\n", version_text, arch,
                  api.error_string(rc), logtext);
        number_lines(&full, src, 1, 0);
        StrBuf brief = {0};
        long eline = first_error_line(logtext);
        sb_printf(&brief, "NVRTC %s: compiling for %s failed (%s):\n%.2400s%s\n", version_text, arch,
                  api.error_string(rc), logtext, strlen(logtext) > 2400 ? "\n..." : "");
        if (eline > 0) {
            sb_printf(&brief, "---- source around line %ld ----\n", eline);
            number_lines(&brief, src, eline > 6 ? eline - 6 : 1, eline + 6);
        } else {
            sb_puts(&brief, "---- source ----\n");
            number_lines(&brief, src, 1, 20);
        }
        st = fc_err_set(err, FC_ERR_DEVICE, "%s", brief.data ? brief.data : "NVRTC compile failed");
        sb_free(&brief);
        if (log) {
            char *t = sb_take(&full);
            if (t) { fc_free(logtext); logtext = t; }
        } else {
            sb_free(&full);
        }
        goto done;
    }

    r = cubin ? api.cubin_size(prog, &binsz) : api.ptx_size(prog, &binsz);
    if (r != 0) { st = fc_err_set(err, FC_ERR_DEVICE, "nvrtcGet%sSize failed: %s", cubin ? "CUBIN" : "PTX", api.error_string(r)); goto done; }
    bin = fc_alloc(binsz + 1);
    if (!bin) { st = FC_OOM(err); goto done; }
    r = cubin ? api.cubin(prog, bin) : api.ptx(prog, bin);
    if (r != 0) { st = fc_err_set(err, FC_ERR_DEVICE, "nvrtcGet%s failed: %s", cubin ? "CUBIN" : "PTX", api.error_string(r)); goto done; }
    bin[binsz] = 0;
    /* PTX's size counts its terminating NUL; report the text length */
    if (!cubin && binsz > 0 && bin[binsz - 1] == 0) binsz--;
    *out = bin;
    *len = binsz;
    bin = NULL;
done:
    api.destroy(&prog);
    fc_free(bin);
    if (log && logtext) *log = logtext;
    else fc_free(logtext);
    return st;
}
