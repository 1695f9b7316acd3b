/* emu_runner.c: the CUDA emulation runner shared by test_cuda_emu and difftest (interface and
 * flow in emu_runner.h; what the emulation checks in docs/cuda_emu.md).
 *
 * Entry points: emu_init, emu_add_block_variants (and the pieces it is made of), emu_build,
 * emu_check, emu_free. The generated text needs two rewrites before a C++ compiler takes it
 * (rewrite_cu): launches `k<<<g, b, s, st>>>(...)` and `__shared__` declarations; units are
 * then wrapped in a namespace each (their `extern "C"` dropped) with a C wrapper
 * (fcemu_run_ID, fcemu_ws_ID), so that several share one compile. `#line` directives make
 * every message refer to NAME.cu, written beside the batch.
 *
 * Invariants: each run happens in a child process (fork) on fresh buffers that end at a guard
 * page, so a fault becomes a message ("4 bytes past the end of output 0") and a hang a
 * timeout; forward and reverse runs must agree bit for bit. Test code: memory comes from
 * calloc (out of memory ends the process), not from the library's allocator.
 */
#include "emu_runner.h"

#include "cache.h"

#include "codegen.h"
#include "frontend.h"
#include "host.h"
#include "interp.h"
#include "passes.h"

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

const char *const emu_variant_names[EMU_NVARIANTS] = {"fused", "fused GPU-shaped", "eager", "eager GPU-shaped",
                                                     "fused --strict-rounding"};

const EmuExample emu_examples[] = {
    {"gpt2_attn", {{"B", 1}, {"T", 7}, {"C", 40}, {"H", 4}}},
    {"gpt2_block", {{"B", 2}, {"T", 5}, {"C", 24}, {"H", 2}}},
    {"gpt2_mlp", {{"B", 1}, {"T", 5}, {"C", 40}}},
    {"keywords", {{"N", 7}, {"M", 33}}},
    {"llama_layer", {{"B", 1}, {"T", 5}, {"C", 40}, {"H", 2}, {"F", 50}}},
    {"quant_mlp", {{"B", 1}, {"T", 5}, {"C", 40}}},
    {"residual_ln_gelu", {{"N", 9}, {"C", 100}}},
    {"softmax_logits", {{"B", 3}, {"V", 1001}}},
};
const int emu_nexamples = (int)(sizeof emu_examples / sizeof emu_examples[0]);

char *emu_example_source(const char *source_dir, int e) {
    char path[512];
    snprintf(path, sizeof path, "%s/examples/%s.tf", source_dir, emu_examples[e].file);
    return emu_read_text(path);
}

double emu_now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void *emu_xcalloc(size_t n, size_t s) {
    void *p = calloc(n ? n : 1, s ? s : 1);
    if (!p) { fprintf(stderr, "emu_runner: out of memory\n"); exit(1); }
    return p;
}

char *emu_xstrdup(const char *s) {
    char *d = emu_xcalloc(strlen(s) + 1, 1);
    memcpy(d, s, strlen(s) + 1);
    return d;
}

static bool write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return false;
    bool ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok;
}

char *emu_read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = emu_xcalloc((size_t)(n > 0 ? n : 0) + 1, 1);
    size_t got = fread(s, 1, (size_t)(n > 0 ? n : 0), f);
    s[got] = 0;
    fclose(f);
    return s;
}

/* ---- the text rewrite ------------------------------------------------------------------------ */
/* Rewrites a CUDA unit for the emulator (see fusec_cuda_emu.h): launches, __shared__
 * declarations; for generated units also `extern "C"` dropped (each unit gets a namespace)
 * and the cuda_runtime.h / cublasLt.h includes dropped (the batch includes the emulation's
 * once). Comments and strings are copied untouched (user text lives only in comments).
 * Returns false with a reason on anything it does not understand. */
typedef struct Bound { char name[128]; int n; } Bound;

static bool is_id(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; }

static bool rewrite_cu(const char *s, bool handwritten, StrBuf *o, char *why, size_t whylen) {
    Bound bounds[256];
    int nb = 0, depth = 0;
    size_t i = 0, n = strlen(s);
    while (i < n) {
        if (s[i] == '/' && s[i + 1] == '*') {
            const char *e = strstr(s + i + 2, "*/");
            size_t len = e ? (size_t)(e + 2 - (s + i)) : n - i;
            for (size_t k = 0; k < len; k++) sb_putc(o, s[i + k]);
            i += len;
            continue;
        }
        if (s[i] == '/' && s[i + 1] == '/') {
            while (i < n && s[i] != '\n') sb_putc(o, s[i++]);
            continue;
        }
        if (s[i] == '"' || s[i] == '\'') {
            char q = s[i];
            sb_putc(o, s[i++]);
            while (i < n && s[i] != q) {
                if (s[i] == '\\' && i + 1 < n) sb_putc(o, s[i++]);
                sb_putc(o, s[i++]);
            }
            if (i < n) sb_putc(o, s[i++]);
            continue;
        }
        if (s[i] == '#' && !strncmp(s + i, "#include", 8)) {
            /* the emulation's headers are included once, at the top of the batch */
            if (!strncmp(s + i, "#include <cuda_runtime.h>", 25)) { i += 25; continue; }
            if (!strncmp(s + i, "#include <cublasLt.h>", 21)) { i += 21; continue; }
            if (!handwritten && strncmp(s + i, "#include \"fusec_cuda_emu.h\"", 26) != 0) {
                snprintf(why, whylen, "an include the emulation does not provide: %.40s", s + i);
                return false;
            }
        }
        if (s[i] == '{') depth++;
        if (s[i] == '}') depth--;
        if (!is_id(s[i]) || (i > 0 && is_id(s[i - 1]))) {
            sb_putc(o, s[i++]);
            continue;
        }
        size_t b = i;
        while (i < n && is_id(s[i])) i++;
        size_t idlen = i - b;
        const char *id = s + b;
        size_t j = i;
        while (j < n && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n')) j++;
        if (!handwritten && idlen == 6 && !strncmp(id, "extern", 6) && !strncmp(s + j, "\"C\"", 3)) {
            i = j + 3;   /* extern "C": namespaced instead */
            while (i < n && s[i] == ' ') i++;
            continue;
        }
        bool ext = idlen == 6 && !strncmp(id, "extern", 6) && !strncmp(s + j, "__shared__", 10) && !is_id(s[j + 10]);
        if (ext || (idlen == 10 && !strncmp(id, "__shared__", 10))) {
            size_t start = ext ? j + 10 : i;
            const char *semi = strchr(s + start, ';');
            const char *br = strchr(s + start, '[');
            if (!semi || !br || br > semi) { snprintf(why, whylen, "a __shared__ declaration without [size]"); return false; }
            size_t ne = (size_t)(br - s);
            while (ne > start && s[ne - 1] == ' ') ne--;
            size_t nbeg = ne;
            while (nbeg > start && is_id(s[nbeg - 1])) nbeg--;
            size_t tb = start;
            while (tb < nbeg && s[tb] == ' ') tb++;
            size_t te = nbeg;
            while (te > tb && s[te - 1] == ' ') te--;
            if (nbeg == ne || te == tb || depth <= 0) {
                snprintf(why, whylen, "a __shared__ declaration the rewrite does not understand (%.40s)", s + b);
                return false;
            }
            if (ext) {
                if (strncmp(br, "[]", 2) != 0) { snprintf(why, whylen, "extern __shared__ with a size"); return false; }
                sb_printf(o, "FCEMU_DYN_SHARED(%.*s, %.*s);", (int)(te - tb), s + tb, (int)(ne - nbeg), s + nbeg);
            } else {
                size_t de = (size_t)(semi - s);
                while (de > (size_t)(br - s) && s[de - 1] == ' ') de--;
                sb_printf(o, "FCEMU_SHARED(%.*s, %.*s, %.*s);", (int)(te - tb), s + tb, (int)(ne - nbeg), s + nbeg,
                          (int)(de - (size_t)(br - s)), br);
            }
            i = (size_t)(semi - s) + 1;
            continue;
        }
        if (idlen == 17 && !strncmp(id, "__launch_bounds__", 17)) {
            /* __launch_bounds__(N) NAME or __launch_bounds__(N, MIN_BLOCKS) NAME: remember N for
             * NAME's launches */
            int bound = 0, used = 0, min_blocks = 0;
            if (sscanf(s + i, "(%d)%n", &bound, &used) < 1 || used == 0)
                if (sscanf(s + i, "(%d, %d)%n", &bound, &min_blocks, &used) < 2) used = 0;
            if (used > 0 && nb < 256) {
                size_t k = i + (size_t)used;
                while (k < n && s[k] == ' ') k++;
                size_t kb = k;
                while (k < n && is_id(s[k])) k++;
                if (k > kb && k - kb < sizeof bounds[0].name) {
                    snprintf(bounds[nb].name, sizeof bounds[nb].name, "%.*s", (int)(k - kb), s + kb);
                    bounds[nb++].n = bound;
                }
            }
            for (size_t k = b; k < i; k++) sb_putc(o, s[k]);
            continue;
        }
        if (!strncmp(s + j, "<<<", 3)) {
            const char *e = strstr(s + j + 3, ">>>");
            if (!e) { snprintf(why, whylen, "a launch without >>>"); return false; }
            int bound = 0;
            for (int k = 0; k < nb; k++)
                if (strlen(bounds[k].name) == idlen && !strncmp(bounds[k].name, id, idlen)) bound = bounds[k].n;
            sb_printf(o, "::fcemu::launcher(%.*s, \"%.*s\", %du, %.*s)", (int)idlen, id, (int)idlen, id, bound,
                      (int)(e - (s + j + 3)), s + j + 3);
            i = (size_t)(e + 3 - s);
            continue;
        }
        for (size_t k = b; k < i; k++) sb_putc(o, s[k]);
    }
    if (o->failed) { snprintf(why, whylen, "out of memory"); return false; }
    return true;
}

#define EMU_FLAGS "-std=c++17 -g0 -fPIC -fno-strict-aliasing"
/* How the units' floating point is compiled. By default as the generated code says: its
 * __fmul_rn / __dmul_rn are never contracted (an asm barrier in fusec_cuda_emu.h), its fmaf
 * is an FMA, and the compiler contracts nothing else. The units are compiled at -O0: half the
 * compile time of -O1 (9.5 s to 4.6 s for the largest batch of test_cuda_emu at f8, GCC 12),
 * which is most of the emulation's time, and no slower to run at the tests' sizes (difftest's
 * 40 emulated graphs: 2.4 s at -O1, 1.4 s at -O0); IEEE arithmetic gives the same bits at
 * either level. The contraction mode models a GPU compiler free to contract every a*b + c
 * (nvcc's default --fmad=true on code without the intrinsics, which is what the generated code
 * was before it said where contraction is allowed): the intrinsics become plain operators
 * (FCEMU_CONTRACT_EVERYWHERE) and the host compiler contracts across statements
 * (-ffp-contract=fast; GCC contracts only when it optimizes, at -O1 only with
 * -fexpensive-optimizations) into the host's FMA instructions. The emulator's runtime
 * (fusec_cuda_emu.cc: the scheduler every unit runs under) is compiled at -O1 (EMU_RT_OPT). */
#define EMU_FP_STRICT "-O0 -ffp-contract=off"
#define EMU_RT_OPT "-O1"
#if defined(__x86_64__) || defined(__i386__)
#define EMU_FP_CONTRACT "-O1 -DFCEMU_CONTRACT_EVERYWHERE -ffp-contract=fast -fexpensive-optimizations -mfma"
#else
#define EMU_FP_CONTRACT "-O1 -DFCEMU_CONTRACT_EVERYWHERE -ffp-contract=fast -fexpensive-optimizations"
#endif

/* ---- the compile cache --------------------------------------------------------------------------- */
/* $FUSEC_EMU_CACHE_DIR (the test suite sets it, tests/CMakeLists.txt) keeps each compiled batch
 * under the SHA-256 of its source and of everything else the object depends on: the compiler's
 * path and `--version`, the flags, and every file of the emulator (the headers the batch
 * includes). The same units compiled again (a sanitizer build's suite after the plain one's, a
 * test run twice) are copied instead of compiled. A failed compile is never kept. */
static void hash_file(RtSha256 *s, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) { rt_sha256_update(s, "-", 1); return; }
    char buf[8192];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0) rt_sha256_update(s, buf, k);
    fclose(f);
}

static int mkdir_p(const char *dir) {
    char path[256];
    snprintf(path, sizeof path, "%s", dir);
    for (char *q = path + 1;; q++) {
        bool end = *q == 0;
        if (*q == '/' || end) {
            *q = 0;
            if (mkdir(path, 0700) != 0 && errno != EEXIST) return -1;
            if (end) break;
            *q = '/';
        }
    }
    return 0;
}

static void cache_init(EmuRunner *r) {
    r->cache_dir[0] = 0;
    const char *dir = getenv("FUSEC_EMU_CACHE_DIR");
    if (!dir || !dir[0] || strlen(dir) > 200 || strchr(dir, '\'') || mkdir_p(dir) != 0) return;
    RtSha256 s;
    rt_sha256_init(&s);
    rt_sha256_update(&s, "fusec emu compile v1\0", 21);
    rt_sha256_update(&s, r->cxx, strlen(r->cxx) + 1);
    rt_sha256_update(&s, EMU_FLAGS, sizeof EMU_FLAGS);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "%s --version 2>&1", r->cxx);
    FILE *p = popen(cmd, "r");
    if (!p) return;
    char buf[4096];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, p)) > 0) rt_sha256_update(&s, buf, k);
    if (pclose(p) != 0) return;
    static const char *const files[] = {"fusec_cuda_emu.h", "fusec_cublaslt_emu.h", "fusec_cuda_emu_math.h",
                                        "fusec_ptx_cvt.h", "fusec_cuda_emu.cc"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[700];
        snprintf(path, sizeof path, "%s/%s", r->emu_dir, files[i]);
        rt_sha256_update(&s, files[i], strlen(files[i]) + 1);
        hash_file(&s, path);
    }
    rt_sha256_final(&s, r->cache_seed);
    snprintf(r->cache_dir, sizeof r->cache_dir, "%s", dir);
}

/* Wraps the compile `cmd` of `src` into `obj` (flags: what else the command passes) in a
 * lookup of the cache: the object is copied from it when there, else compiled and stored
 * (written beside, then renamed: readers see whole files). Unchanged without a cache, or when
 * the wrapped command would not fit. */
static void cache_wrap(EmuRunner *r, char *cmd, size_t cmdlen, const char *src, const char *flags, const char *obj) {
    if (!r->cache_dir[0]) return;
    RtSha256 s;
    rt_sha256_init(&s);
    rt_sha256_update(&s, r->cache_seed, sizeof r->cache_seed);
    rt_sha256_update(&s, flags, strlen(flags) + 1);
    hash_file(&s, src);
    uint8_t key[32];
    rt_sha256_final(&s, key);
    char hex[65];
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", key[i]);
    char out[2048];
    int w = snprintf(out, sizeof out,
                     "if cp '%s/%s.o' '%s' 2>/dev/null; then exit 0; fi; %s && "
                     "{ cp '%s' '%s/.%s.$$' && mv -f '%s/.%s.$$' '%s/%s.o'; true; }",
                     r->cache_dir, hex, obj, cmd, obj, r->cache_dir, hex, r->cache_dir, hex, r->cache_dir, hex);
    if (w < 0 || (size_t)w >= sizeof out || (size_t)w >= cmdlen) return;
    memcpy(cmd, out, (size_t)w + 1);
    char entry[700];
    snprintf(entry, sizeof entry, "%s/%s.o", r->cache_dir, hex);
    r->n_cached += access(entry, R_OK) == 0;
}

/* ---- cases ------------------------------------------------------------------------------------ */
int emu_init(EmuRunner *r, const char *default_cxx, const char *emu_dir, const char *fallback_dir, char *why, size_t n) {
    memset(r, 0, sizeof *r);
    r->run_timeout_s = 60;
    why[0] = 0;
    const char *env_cxx = getenv("FUSEC_EMU_CXX");
    snprintf(r->cxx, sizeof r->cxx, "%s", env_cxx && env_cxx[0] ? env_cxx : default_cxx);
    snprintf(r->emu_dir, sizeof r->emu_dir, "%s", emu_dir);
    char probe[600];
    snprintf(probe, sizeof probe, "%s --version > /dev/null 2>&1", r->cxx);
    if (system(probe) != 0) { snprintf(why, n, "no C++ compiler (%s)", r->cxx); return 77; }
    /* in $TMPDIR, else in the build tree (not /tmp: it may be mounted noexec, and dlopen needs exec) */
    const char *tmp = getenv("TMPDIR");
    snprintf(r->workdir, sizeof r->workdir, "%s/fusec_emu.XXXXXX", tmp && tmp[0] ? tmp : fallback_dir);
    if (!mkdtemp(r->workdir)) { snprintf(why, n, "mkdtemp %s: %s", r->workdir, strerror(errno)); r->workdir[0] = 0; return 1; }
    if (fc_device_open(FC_DEVICE_REFERENCE, 0, &r->ref) != FC_OK) { snprintf(why, n, "no reference device"); return 1; }
    cache_init(r);
    return 0;
}

EmuCase *emu_new_case(EmuRunner *r, const char *name) {
    if (r->ncases == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 64;
        r->cases = realloc(r->cases, (size_t)r->cap * sizeof *r->cases);
        if (!r->cases) { fprintf(stderr, "emu_runner: out of memory\n"); exit(1); }
    }
    EmuCase *c = &r->cases[r->ncases];
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    c->id = r->ncases++;
    c->batch = -1;
    return c;
}

void emu_alloc_io(EmuCase *c, int nin, int nout) {
    c->nin = nin;
    c->nout = nout;
    c->in_dt = emu_xcalloc((size_t)nin, sizeof(FcDtype));
    c->out_dt = emu_xcalloc((size_t)nout, sizeof(FcDtype));
    c->in_n = emu_xcalloc((size_t)nin, sizeof(int64_t));
    c->out_n = emu_xcalloc((size_t)nout, sizeof(int64_t));
    c->in = emu_xcalloc((size_t)nin, sizeof(void *));
    c->want = emu_xcalloc((size_t)nout, sizeof(void *));
    c->tol = emu_xcalloc((size_t)nout, sizeof(double));
    c->in_slot = emu_xcalloc((size_t)nin + 1, sizeof(int));
    c->out_slot = emu_xcalloc((size_t)nout + 1, sizeof(int));
    for (int i = 0; i < nin; i++) c->in_slot[i] = -1;
    for (int j = 0; j < nout; j++) c->out_slot[j] = -1;
}

EmuCase *emu_clone_case(EmuRunner *r, int from, const char *name, char *cu) {
    char keep_name[128];
    snprintf(keep_name, sizeof keep_name, "%s", name);
    EmuCase *c = emu_new_case(r, keep_name);   /* may move r->cases */
    int id = c->id;
    *c = r->cases[from];
    snprintf(c->name, sizeof c->name, "%s", keep_name);
    c->id = id;
    c->cu = cu;
    c->shares = true;
    c->batch = -1;
    c->tried = false;
    c->lib = NULL;
    c->build_err = NULL;
    c->corrupt = false;
    return c;
}

const char *emu_ctype(FcDtype t) {
    switch (t) {
    case FC_F64: return "double";
    case FC_F32: return "float";
    case FC_F16: case FC_BF16: return "unsigned short";
    case FC_I32: return "int";
    case FC_I64: return "long long";
    case FC_I8: return "signed char";
    default: return "unsigned char";
    }
}

/* ---- blocks: compile, emit the AOT unit, random inputs, reference outputs ------------------------ */
const char *emu_precision;

/* An options object as every unit is compiled: dims, fused or eager, entry "emu", emu_precision. */
/* fuse: 0 eager, 1 fused, 2 fused with --strict-rounding */
static FcOptions *unit_options(const EmuDim *dims, int fuse) {
    FcOptions *opt = NULL;
    if (fc_options_new(&opt) != FC_OK) return NULL;
    for (int d = 0; dims && dims[d].name; d++) fc_options_set_dim(opt, dims[d].name, dims[d].v);
    fc_options_set_fuse(opt, fuse != 0);
    if (fuse == 2) fc_options_set_strict_rounding(opt, 1);
    fc_options_set_entry(opt, "emu");
    if (emu_precision) fc_options_set_precision(opt, emu_precision);
    return opt;
}

FcStatus emu_unit_graph(const char *src, const char *file, const FeOptions *fo, bool train, IrGraph **g, FcErr *err) {
    StrBuf diags = {0};
    FcStatus st = fe_compile(src, strlen(src), file, fo, g, &diags, err);
    sb_free(&diags);
    if (st != FC_OK || !emu_precision || !strcmp(emu_precision, "keep")) return st;
    IrGraph *low = NULL;
    st = pass_precision(*g, !strcmp(emu_precision, "bf16") ? FC_BF16 : !strcmp(emu_precision, "f16") ? FC_F16 : FC_F8E4M3,
                        train, &low, err);
    ir_graph_free(*g);
    *g = low;
    return st;
}
/* The CUDA unit of src as unit_options compiles it (train: the training unit, its forward and
 * backward), its block in *blk_out; NULL (why set) on failure. */
static char *block_unit(const char *src, const char *file, const EmuDim *dims, int fuse, bool train, FcBlock **blk_out,
                        char *why, size_t n) {
    FcOptions *opt = NULL;
    FcBlock *blk = NULL;
    char *data = NULL;
    size_t len = 0;
    *blk_out = NULL;
    if (!(opt = unit_options(dims, fuse))) { snprintf(why, n, "%s: out of memory", file); return NULL; }
    FcStatus st = train ? fc_options_set_train(opt, 1) : FC_OK;
    if (st == FC_OK) st = fc_compile_string(src, file, opt, &blk);
    if (st != FC_OK)
        snprintf(why, n, "%s: compile: %s %s", file, blk ? fc_block_last_error(blk) : "", blk ? fc_block_diagnostics(blk) : "");
    if (st == FC_OK) {
        st = fc_block_emit(blk, FC_EMIT_CUDA, &data, &len);
        if (st != FC_OK) snprintf(why, n, "%s: emit cuda: %s", file, fc_block_last_error(blk));
    }
    fc_options_free(opt);
    if (st != FC_OK) { fc_block_free(blk); return NULL; }
    char *out = emu_xcalloc(len + 1, 1);
    memcpy(out, data, len);
    fc_buffer_free(data);
    *blk_out = blk;
    return out;
}
char *emu_block_unit(const char *src, const char *file, const EmuDim *dims, bool fuse, FcBlock **blk_out, char *why, size_t n) {
    return block_unit(src, file, dims, fuse ? 1 : 0, false, blk_out, why, n);
}

bool emu_same_element(FcDtype t, const void *pa, const void *pb, size_t i) {
    size_t es = fc_dtype_size(t);
    const unsigned char *a = pa, *b = pb;
    if (!memcmp(a + i * es, b + i * es, es)) return true;
    uint64_t x = 0, y = 0;
    memcpy(&x, a + i * es, es);
    memcpy(&y, b + i * es, es);
    switch (t) {
    case FC_F64: return (x & 0x7fffffffffffffffull) > 0x7ff0000000000000ull && (y & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
    case FC_F32: return (x & 0x7fffffff) > 0x7f800000 && (y & 0x7fffffff) > 0x7f800000;
    case FC_F16: return (x & 0x7fff) > 0x7c00 && (y & 0x7fff) > 0x7c00;
    case FC_BF16: return (x & 0x7fff) > 0x7f80 && (y & 0x7fff) > 0x7f80;
    case FC_F8E4M3: return (x & 0x7f) == 0x7f && (y & 0x7f) == 0x7f;
    case FC_F8E5M2: return (x & 0x7f) > 0x7c && (y & 0x7f) > 0x7c;
    default: return false;
    }
}

/* emu_add_strict_variant's comparison: the eager case's kept outputs, bit for bit */
typedef struct StrictRef { const EmuRunner *r; int eager_id; } StrictRef;
static void compare_strict(const EmuCase *c, void *const *got, char *why, size_t n) {
    const StrictRef *sr = c->user;
    const EmuCase *e = &sr->r->cases[sr->eager_id];
    if (!e->kept) {
        snprintf(why, n, "the eager unit's outputs are not there to compare with (it failed or did not run)");
        return;
    }
    for (int i = 0; i < c->nout; i++)
        for (int64_t j = 0; j < c->out_n[i]; j++)
            if (!emu_same_element(c->out_dt[i], got[i], e->kept[i], (size_t)j)) {
                snprintf(why, n, "output %d: not the eager unit's bits, first at element %lld (%.9g, eager %.9g)", i, (long long)j,
                         rt_host_load(c->out_dt[i], got[i], j), rt_host_load(c->out_dt[i], e->kept[i], j));
                return;
            }
}

EmuCase *emu_add_strict_variant(EmuRunner *r, int eager_id, const char *src, const char *file, const EmuDim *dims, char *why,
                                size_t n) {
    FcBlock *blk = NULL;
    /* (a training unit: --remat as the eager one's, the default) */
    char *cu = block_unit(src, file, dims, 2, r->cases[eager_id].train, &blk, why, n);
    fc_block_free(blk);
    if (!cu) return NULL;
    char name[160];
    snprintf(name, sizeof name, "%s_strict", r->cases[eager_id].name);
    r->cases[eager_id].keep_outputs = true;
    EmuCase *c = emu_clone_case(r, eager_id, name, cu);
    StrictRef *sr = emu_xcalloc(1, sizeof *sr);
    *sr = (StrictRef){r, eager_id};
    c->user = sr;
    c->compare = compare_strict;
    c->keep_outputs = false;
    c->kept = NULL;
    return c;
}

/* The AOT unit (cg_cuda_aot, entry "emu") of the program res made from graph g: its buffers
 * are g's inputs, then its outputs. NULL (err set) on failure. */
static char *aot_unit(const IrGraph *g, const PassResult *res, FcErr *err) {
    int nio = g->inputs.len + g->outputs.len;
    CgIoDesc *io = emu_xcalloc((size_t)nio, sizeof(CgIoDesc));
    for (int i = 0; i < nio; i++) {
        bool o = i >= g->inputs.len;
        int id = o ? g->outputs.data[i - g->inputs.len] : g->inputs.data[i];
        const IrValue *v = ir_cval(g, id);
        io[i] = (CgIoDesc){o ? "out" : "in", v->dtype, v->shape, o, ir_fp8_slot_of(g, id)};
    }
    StrBuf sb = {0};
    char *out = NULL;
    FcStatus st = cg_cuda_aot(res->prog, "emu", io, nio, &sb, err);
    free(io);
    if (st == FC_OK && sb.failed) fc_err_set(err, FC_ERR_NOMEM, "out of memory");
    else if (st == FC_OK) out = emu_xstrdup(sb.data);
    sb_free(&sb);
    return out;
}

char *emu_gpu_unit(const char *src, const char *file, const EmuDim *dims, bool fuse, char *why, size_t n) {
    FeDimBinding fd[8];
    int nd = 0;
    for (; dims && dims[nd].name && nd < 8; nd++) fd[nd] = (FeDimBinding){dims[nd].name, dims[nd].v};
    FeOptions fo = {.block = NULL, .dims = fd, .ndims = nd};
    IrGraph *g = NULL;
    FcErr err = {0};
    PassResult res;
    memset(&res, 0, sizeof res);
    char *out = NULL;
    FcStatus st = emu_unit_graph(src, file, &fo, false, &g, &err);
    PassOptions po = {.fuse = fuse, .sm = 90, .library_gemm = false};
    if (st == FC_OK) st = pass_pipeline(g, &po, &res, &err);
    if (st == FC_OK) out = aot_unit(g, &res, &err);
    if (!out) snprintf(why, n, "%s: the GPU-shaped unit: %s", file, err.msg);
    pass_result_free(&res);
    ir_graph_free(g);
    return out;
}

EmuCase *emu_add_block(EmuRunner *r, const char *name, char *cu, FcBlock *blk, uint64_t seed, uint64_t seed_step, char *why,
                       size_t n) {
    EmuCase *c = emu_new_case(r, name);
    c->cu = cu;
    int nin = fc_block_num_inputs(blk), nout = fc_block_num_outputs(blk);
    emu_alloc_io(c, nin, nout);
    FcProgram *prog = NULL;
    FcTensor **ti = emu_xcalloc((size_t)nin, sizeof(FcTensor *)), **to = emu_xcalloc((size_t)nout, sizeof(FcTensor *));
    bool ok = fc_program_new(blk, r->ref, &prog) == FC_OK;
    if (!ok) snprintf(why, n, "%s: reference program: %s", name, prog ? fc_program_last_error(prog) : fc_block_last_error(blk));
    for (int i = 0; i < nin && ok; i++) {
        FcTensorInfo info;
        fc_block_input_info(blk, i, &info);
        ok = fc_tensor_new(r->ref, info.dtype, info.rank, info.dims, &ti[i]) == FC_OK &&
             fc_block_random_input(blk, i, seed + (uint64_t)i * seed_step, ti[i]) == FC_OK;
        c->in_dt[i] = info.dtype;
        c->in_slot[i] = info.fp8_slot;
        c->in_n[i] = 1;
        for (int d = 0; d < info.rank; d++) c->in_n[i] *= info.dims[d];
        size_t bytes = ti[i] ? fc_tensor_nbytes(ti[i]) : 0;
        c->in[i] = emu_xcalloc(bytes, 1);
        ok = ok && fc_tensor_copy_to_host(ti[i], c->in[i], bytes) == FC_OK;
        if (!ok) snprintf(why, n, "%s: input %d: %s", name, i, fc_block_last_error(blk));
    }
    for (int i = 0; i < nout && ok; i++) {
        FcTensorInfo info;
        fc_block_output_info(blk, i, &info);
        ok = fc_tensor_new(r->ref, info.dtype, info.rank, info.dims, &to[i]) == FC_OK &&
             fc_block_output_tolerance(blk, i, &c->tol[i]) == FC_OK;
        c->out_dt[i] = info.dtype;
        c->out_slot[i] = info.fp8_slot;
        c->out_n[i] = 1;
        for (int d = 0; d < info.rank; d++) c->out_n[i] *= info.dims[d];
        if (!ok) snprintf(why, n, "%s: output %d: %s", name, i, fc_block_last_error(blk));
    }
    /* f8: the scales one run on these inputs sets (the reference's and the unit's) */
    c->nfp8 = fc_block_num_fp8_slots(blk);
    if (ok && c->nfp8 > 0) {
        c->fp8_scale = emu_xcalloc((size_t)c->nfp8, sizeof *c->fp8_scale);
        ok = fc_block_calibrate_fp8(blk, ti) == FC_OK && fc_program_fp8_scales(prog, c->fp8_scale, c->nfp8) == FC_OK;
        if (!ok) snprintf(why, n, "%s: f8 calibration: %s", name, fc_block_last_error(blk));
    }
    FcStatus rs = ok ? fc_program_run(prog, ti, to) : FC_ERR_INTERNAL;
    if (ok && rs != FC_OK) snprintf(why, n, "%s: reference run: %s", name, fc_program_last_error(prog));
    /* the tolerances for these inputs (widened by the rounding spread of 16/8-bit intermediates) */
    if (rs == FC_OK && (rs = fc_block_check_tolerances(blk, ti, c->tol, NULL)) != FC_OK)
        snprintf(why, n, "%s: tolerances: %s", name, fc_block_last_error(blk));
    for (int i = 0; i < nout && rs == FC_OK; i++) {
        size_t bytes = fc_tensor_nbytes(to[i]);
        c->want[i] = emu_xcalloc(bytes, 1);
        fc_tensor_copy_to_host(to[i], c->want[i], bytes);
    }
    for (int i = 0; i < nin; i++) fc_tensor_free(ti[i]);
    for (int i = 0; i < nout; i++) fc_tensor_free(to[i]);
    free(ti);
    free(to);
    fc_program_free(prog);
    if (rs != FC_OK) {   /* nothing to compare with: not built, and the caller is told */
        free(c->cu);
        c->cu = NULL;
        return NULL;
    }
    return c;
}

bool emu_add_block_variants(EmuRunner *r, const char *name, const char *src, const EmuDim *dims, uint64_t seed,
                            uint64_t seed_step, unsigned mask, int ids[EMU_NVARIANTS], char *why, size_t n) {
    bool ok = true;
    why[0] = 0;
    for (int v = 0; v < EMU_NVARIANTS; v++) ids[v] = -1;
    for (int fuse = 1; fuse >= 0; fuse--) {
        int vb = fuse ? EMU_V_FUSED : EMU_V_EAGER, vg = vb + 1;
        if (!(mask & (3u << vb))) continue;
        char tmp[1024];
        tmp[0] = 0;
        FcBlock *blk = NULL;
        char *cu = emu_block_unit(src, name, dims, fuse, &blk, tmp, sizeof tmp);
        EmuCase *c = NULL;
        if (cu) {
            char cname[128];
            snprintf(cname, sizeof cname, "%s_%s", name, fuse ? "fused" : "eager");
            c = emu_add_block(r, cname, cu, blk, seed, seed_step, tmp, sizeof tmp);
        }
        fc_block_free(blk);
        if (!c) {
            if (ok) snprintf(why, n, "%s", tmp);
            ok = false;
            continue;
        }
        int id = c->id;
        if (mask & (1u << vb)) ids[vb] = id;
        bool lib_call = strstr(c->cu, "fc_lt_gemm(") != NULL;   /* else the GPU-shaped unit has the same kernels */
        if (lib_call && (mask & (1u << vg))) {
            char *gu = emu_gpu_unit(src, name, dims, fuse, tmp, sizeof tmp);
            if (gu) {
                char vname[160];
                snprintf(vname, sizeof vname, "%s_gpu", r->cases[id].name);
                ids[vg] = emu_clone_case(r, id, vname, gu)->id;
            } else {
                if (ok) snprintf(why, n, "%s", tmp);
                ok = false;
            }
        }
        if (!(mask & (1u << vb))) {   /* only its references are wanted */
            free(r->cases[id].cu);
            r->cases[id].cu = NULL;
            r->cases[id].tried = true;
        }
    }
    return ok;
}

/* ---- training: the forward and backward units ---------------------------------------------------- */
const char *const emu_train_part_names[2] = {"forward", "backward"};

/* A training block's two programs as a CUDA device runs them: the source graph through pass_train
 * (--remat mode, no budget; as fc_options_set_train), then each graph of the plan through
 * pass_pipeline GPU-shaped (lib: matrix products through cuBLASLt, the program of `fusec --emit
 * cuda`; else the generated kernels: the GPU-shaped variant). */
typedef struct TrainProg {
    IrGraph *src;
    AdJoint joint;
    RematPlan plan;
    PassResult res[2];        /* the forward's, the backward's */
} TrainProg;

static void train_prog_free(TrainProg *t) {
    ir_graph_free(t->src);
    ad_joint_free(&t->joint);
    remat_plan_free(&t->plan);
    pass_result_free(&t->res[0]);
    pass_result_free(&t->res[1]);
    memset(t, 0, sizeof *t);
}

static bool train_prog(const char *src, const char *file, bool fuse, const char *remat, bool lib, TrainProg *t, char *why, size_t n) {
    memset(t, 0, sizeof *t);
    FeOptions fo = {0};
    FcErr err = {0};
    PassRemat mode = !strcmp(remat, "none") ? PASS_REMAT_NONE : !strcmp(remat, "full") ? PASS_REMAT_FULL : PASS_REMAT_AUTO;
    FcStatus st = emu_unit_graph(src, file, &fo, true, &t->src, &err);
    if (st == FC_OK) st = pass_train(t->src, mode, -1, &t->joint, &t->plan, &err);
    PassOptions po = {.fuse = fuse, .sm = 90, .library_gemm = lib, .train = true};
    if (st == FC_OK) st = pass_pipeline(t->plan.fwd, &po, &t->res[0], &err);
    if (st == FC_OK) st = pass_pipeline(t->plan.bwd, &po, &t->res[1], &err);
    if (st != FC_OK) {
        snprintf(why, n, "%s: the training programs (%s, --remat %s%s): %s", file, fuse ? "fused" : "eager", remat,
                 lib ? "" : ", GPU-shaped", err.msg);
        train_prog_free(t);
        return false;
    }
    return true;
}

char *emu_train_kernels(const char *src, const char *file, bool fuse, const char *remat, int part, char *why, size_t n) {
    TrainProg t;
    if (!train_prog(src, file, fuse, remat, true, &t, why, n)) return NULL;
    StrBuf sb = {0};
    FcErr err = {0};
    char *out = NULL;
    FcStatus st = cg_cuda_kernels(t.res[part].prog, &sb, &err);
    if (st == FC_OK && !sb.failed) out = emu_xstrdup(sb.data ? sb.data : "");
    else snprintf(why, n, "%s: the %s program's kernels: %s", file, emu_train_part_names[part], st != FC_OK ? err.msg : "out of memory");
    sb_free(&sb);
    train_prog_free(&t);
    return out;
}

/* A training case (emu_runner.h): the AOT training unit run as its forward then its backward. */
EmuCase *emu_add_train_block(EmuRunner *r, const char *name, const char *src, const EmuDim *dims, bool fuse, uint64_t seed,
                             uint64_t seed_step, char *why, size_t n) {
    FcBlock *blk = NULL;
    why[0] = 0;
    char *cu = block_unit(src, name, dims, fuse ? 1 : 0, true, &blk, why, n);
    if (!cu) return NULL;
    if (!r->cpu && fc_device_open(FC_DEVICE_CPU, 0, &r->cpu) != FC_OK) {
        snprintf(why, n, "%s: no CPU device", name);
        free(cu);
        fc_block_free(blk);
        return NULL;
    }
    int nin = fc_block_num_inputs(blk), nout = fc_block_num_outputs(blk), nfi = 0, nfo = 0;
    FcTensorInfo *ii = emu_xcalloc((size_t)nin + 1, sizeof *ii), *oi = emu_xcalloc((size_t)nout + 1, sizeof *oi);
    for (int i = 0; i < nin; i++) fc_block_input_info(blk, i, &ii[i]), nfi += ir_dtype_is_float(ii[i].dtype);
    for (int j = 0; j < nout; j++) fc_block_output_info(blk, j, &oi[j]), nfo += ir_dtype_is_float(oi[j].dtype);
    EmuCase *c = emu_new_case(r, name);
    c->cu = cu;
    c->train = true;
    c->train_nin = nin;
    c->train_nout = nout;
    emu_alloc_io(c, nin + nfo, nout + nfi);
    /* the references: x, y = forward(x); gx = backward(gy) on the reference device (the
     * interpreter, its backward in f64), within the --check tolerances of these inputs, as the
     * CPU's are checked. Where the reference has no backward for an op (FC_ERR_UNSUPPORTED), the
     * CPU device's fused program instead, and then twice the tolerances: two results each within
     * them of the exact one. */
    FcDevice *dev = r->ref;
    FcTensor **x = emu_xcalloc((size_t)nin + 1, sizeof *x), **gx = emu_xcalloc((size_t)nin + 1, sizeof *gx);
    FcTensor **y = emu_xcalloc((size_t)nout + 1, sizeof *y), **gy = emu_xcalloc((size_t)nout + 1, sizeof *gy);
    double *tin = emu_xcalloc((size_t)nin + 1, sizeof *tin), *tout = emu_xcalloc((size_t)nout + 1, sizeof *tout);
    FcProgram *prog = NULL;
    bool ok = true;
    for (int attempt = 0; attempt < 2 && ok; attempt++) {
        for (int i = 0; i < nin; i++) fc_tensor_free(x[i]), fc_tensor_free(gx[i]), x[i] = gx[i] = NULL;
        for (int j = 0; j < nout; j++) fc_tensor_free(y[j]), fc_tensor_free(gy[j]), y[j] = gy[j] = NULL;
        fc_program_free(prog);
        prog = NULL;
        ok = fc_program_new(blk, dev, &prog) == FC_OK;
        if (!ok) snprintf(why, n, "%s: %s program: %s", name, attempt ? "CPU" : "reference",
                          prog ? fc_program_last_error(prog) : fc_block_last_error(blk));
        for (int i = 0; i < nin && ok; i++) {
            ok = fc_tensor_new(dev, ii[i].dtype, ii[i].rank, ii[i].dims, &x[i]) == FC_OK &&
                 fc_block_random_input(blk, i, seed + (uint64_t)i * seed_step, x[i]) == FC_OK;
            if (ok && ir_dtype_is_float(ii[i].dtype)) ok = fc_tensor_new(dev, ii[i].dtype, ii[i].rank, ii[i].dims, &gx[i]) == FC_OK;
            if (!ok) snprintf(why, n, "%s: input %d: %s", name, i, fc_block_last_error(blk));
        }
        for (int j = 0; j < nout && ok; j++) {
            ok = fc_tensor_new(dev, oi[j].dtype, oi[j].rank, oi[j].dims, &y[j]) == FC_OK;
            if (ok && ir_dtype_is_float(oi[j].dtype))
                ok = fc_tensor_new(dev, oi[j].dtype, oi[j].rank, oi[j].dims, &gy[j]) == FC_OK &&
                     fc_block_random_grad_output(blk, j, seed, gy[j]) == FC_OK;
            if (!ok) snprintf(why, n, "%s: output %d: %s", name, j, fc_block_last_error(blk));
        }
        /* f8: the scales one run on these inputs sets (the reference's and the unit's); the CPU
         * program of a second attempt is made after them, so its first run keeps them */
        c->nfp8 = fc_block_num_fp8_slots(blk);
        if (ok && c->nfp8 > 0 && attempt == 0) {
            c->fp8_scale = emu_xcalloc((size_t)c->nfp8, sizeof *c->fp8_scale);
            ok = fc_block_calibrate_fp8(blk, x) == FC_OK && fc_program_fp8_scales(prog, c->fp8_scale, c->nfp8) == FC_OK;
            if (!ok) snprintf(why, n, "%s: f8 calibration: %s", name, fc_block_last_error(blk));
        }
        if (ok && fc_program_run(prog, x, y) != FC_OK) {
            snprintf(why, n, "%s: %s forward: %s", name, attempt ? "CPU" : "reference", fc_program_last_error(prog));
            ok = false;
        }
        FcStatus bs = ok ? fc_program_backward(prog, gy, gx) : FC_OK;
        if (bs == FC_ERR_UNSUPPORTED && attempt == 0) {   /* no reference backward: the CPU's (opened above) */
            dev = r->cpu;
            continue;
        }
        if (bs != FC_OK) {
            snprintf(why, n, "%s: %s backward: %s", name, attempt ? "CPU" : "reference", fc_program_last_error(prog));
            ok = false;
        }
        if (ok && (fc_block_check_tolerances(blk, x, tout, NULL) != FC_OK ||
                   fc_block_check_grad_tolerances(blk, x, gy, tin, NULL) != FC_OK)) {
            snprintf(why, n, "%s: tolerances: %s", name, fc_block_last_error(blk));
            ok = false;
        }
        break;
    }
    double widen = dev == r->ref ? 1 : 2;
    for (int i = 0, k = 0; i < nin && ok; i++) {
        c->in_dt[i] = ii[i].dtype;
        c->in_n[i] = (int64_t)(fc_tensor_nbytes(x[i]) / fc_dtype_size(ii[i].dtype));
        c->in[i] = emu_xcalloc((size_t)c->in_n[i] * fc_dtype_size(ii[i].dtype) + 1, 1);
        ok = fc_tensor_copy_to_host(x[i], c->in[i], fc_tensor_nbytes(x[i])) == FC_OK;
        if (gx[i]) {   /* output nout + k: the gradient of input i */
            c->out_dt[nout + k] = ii[i].dtype;
            c->out_n[nout + k] = c->in_n[i];
            c->tol[nout + k] = widen * tin[i];
            k++;
        }
    }
    for (int j = 0, k = 0; j < nout && ok; j++) {
        c->tol[j] = widen * tout[j];
        c->out_dt[j] = oi[j].dtype;
        c->out_n[j] = (int64_t)(fc_tensor_nbytes(y[j]) / fc_dtype_size(oi[j].dtype));
        if (gy[j]) {   /* input nin + k: the gradient of output j */
            c->in_dt[nin + k] = oi[j].dtype;
            c->in_n[nin + k] = c->out_n[j];
            c->in[nin + k] = emu_xcalloc(fc_tensor_nbytes(y[j]) + 1, 1);
            ok = fc_tensor_copy_to_host(gy[j], c->in[nin + k], fc_tensor_nbytes(y[j])) == FC_OK;
            k++;
        }
    }
    for (int j = 0; j < nout && ok; j++) {
        c->want[j] = emu_xcalloc(fc_tensor_nbytes(y[j]) + 1, 1);
        ok = fc_tensor_copy_to_host(y[j], c->want[j], fc_tensor_nbytes(y[j])) == FC_OK;
    }
    for (int i = 0, k = 0; i < nin && ok; i++) {
        if (!gx[i]) continue;
        c->want[nout + k] = emu_xcalloc(fc_tensor_nbytes(gx[i]) + 1, 1);
        ok = fc_tensor_copy_to_host(gx[i], c->want[nout + k], fc_tensor_nbytes(gx[i])) == FC_OK;
        k++;
    }
    free(tin);
    free(tout);
    if (!ok && !why[0]) snprintf(why, n, "%s: reading the references back failed", name);
    for (int i = 0; i < nin; i++) fc_tensor_free(x[i]), fc_tensor_free(gx[i]);
    for (int j = 0; j < nout; j++) fc_tensor_free(y[j]), fc_tensor_free(gy[j]);
    free(x); free(gx); free(y); free(gy); free(ii); free(oi);
    fc_program_free(prog);
    fc_block_free(blk);
    if (!ok) {   /* nothing to compare with: not built, and the caller is told */
        free(c->cu);
        c->cu = NULL;
        c->tried = true;
        return NULL;
    }
    return c;
}

/* ---- batches: namespaced units, one compile each ------------------------------------------------ */
/* --precision f8: `st8`, a fresh f8 state for one run: the case's scales, no history (kir.h
 * KIR_BUF_STATE), so that the unit's first kernel keeps the scales the reference used. */
static void put_fp8_state(StrBuf *o, const EmuCase *c) {
    if (c->nfp8 <= 0) return;
    sb_printf(o, "    static float st8[%d];\n    for (int k = 0; k < %d; k++) st8[k] = 0.0f;\n", c->nfp8 * KIR_FP8_STRIDE,
              c->nfp8 * KIR_FP8_STRIDE);
    for (int k = 0; k < c->nfp8; k++) {
        bool in = false;
        for (int i = 0; i < c->nin && c->in_slot; i++) in |= c->in_slot[i] == k;
        if (!in) sb_printf(o, "    st8[%d] = (float)(%.17g);\n", k * KIR_FP8_STRIDE, c->fp8_scale[k]);
    }
    for (int i = 0; i < c->nin && c->in_slot; i++)
        if (c->in_slot[i] >= 0)
            sb_printf(o, "    if (fcemu_c%d::fusec_emu_fp8_set_input_scale(st8, %d, (float)(%.17g), (cudaStream_t)0)) return 2;\n",
                      c->id, i, c->fp8_scale[c->in_slot[i]]);
}

/* A training case's wrapper: one workspace region holds the larger of the two workspaces, then
 * `saved` (so that the saved buffers end near the region's guard page). */
static void put_train_wrapper(StrBuf *o, const EmuCase *c) {
    sb_printf(o, "static int fcemu_sizes_%d(size_t *w, size_t *s)\n{\n"
                 "    size_t f = 0, g = 0;\n"
                 "    if (fcemu_c%d::fusec_emu_workspace_size(&f) || fcemu_c%d::fusec_emu_backward_workspace_size(&g) ||\n"
                 "        fcemu_c%d::fusec_emu_saved_bytes(s)) return 2;\n"
                 "    *w = ((f > g ? f : g) + 255) / 256 * 256;\n    return 0;\n}\n",
              c->id, c->id, c->id, c->id);
    sb_printf(o, "extern \"C\" int fcemu_ws_%d(size_t *b)\n{\n    size_t w = 0, s = 0;\n"
                 "    if (fcemu_sizes_%d(&w, &s)) return 2;\n    *b = w + s;\n    return 0;\n}\n", c->id, c->id);
    sb_printf(o, "extern \"C\" int fcemu_run_%d(void *const *in, void *const *out, void *ws, size_t wsb) {\n"
                 "    size_t w = 0, s = 0;\n"
                 "    if (fcemu_sizes_%d(&w, &s) || wsb < w + s) return 2;\n"
                 "    void *saved = s ? (void *)((char *)ws + w) : (void *)0, *work = w ? ws : (void *)0;\n", c->id, c->id);
    put_fp8_state(o, c);
    sb_printf(o, "    int st = fcemu_c%d::fusec_emu_forward(", c->id);
    for (int i = 0; i < c->train_nin; i++) sb_printf(o, "(const %s *)in[%d], ", emu_ctype(c->in_dt[i]), i);
    for (int i = 0; i < c->train_nout; i++) sb_printf(o, "(%s *)out[%d], ", emu_ctype(c->out_dt[i]), i);
    sb_puts(o, c->nfp8 > 0 ? "saved, st8, work, w, (cudaStream_t)0);\n" : "saved, work, w, (cudaStream_t)0);\n");
    sb_puts(o, "    if (st != 0) return st;\n"
               "    for (size_t k = 0; k < w; k++) ((unsigned char *)work)[k] = 0xff;   /* nothing survives in the workspace */\n"
               "    return fcemu_c");
    sb_printf(o, "%d::fusec_emu_backward(", c->id);
    for (int i = 0; i < c->train_nin; i++) sb_printf(o, "(const %s *)in[%d], ", emu_ctype(c->in_dt[i]), i);
    for (int i = 0; i < c->train_nout; i++) sb_printf(o, "(const %s *)out[%d], ", emu_ctype(c->out_dt[i]), i);
    sb_puts(o, "saved, ");
    for (int i = c->train_nin; i < c->nin; i++) sb_printf(o, "(const %s *)in[%d], ", emu_ctype(c->in_dt[i]), i);
    for (int i = c->train_nout; i < c->nout; i++) sb_printf(o, "(%s *)out[%d], ", emu_ctype(c->out_dt[i]), i);
    sb_puts(o, c->nfp8 > 0 ? "st8, work, w, (cudaStream_t)0);\n}\n" : "work, w, (cudaStream_t)0);\n}\n");
}

static void put_wrapper(StrBuf *o, const EmuCase *c) {
    if (c->train) { put_train_wrapper(o, c); return; }
    sb_printf(o, "extern \"C\" int fcemu_ws_%d(size_t *b) { return fcemu_c%d::fusec_emu_workspace_size(b); }\n", c->id, c->id);
    sb_printf(o, "extern \"C\" int fcemu_run_%d(void *const *in, void *const *out, void *ws, size_t wsb) {\n"
                 "    (void)in; (void)out;\n", c->id);
    put_fp8_state(o, c);
    sb_printf(o, "    int st = fcemu_c%d::fusec_emu_forward(", c->id);
    for (int i = 0; i < c->nin; i++) sb_printf(o, "(const %s *)in[%d], ", emu_ctype(c->in_dt[i]), i);
    for (int i = 0; i < c->nout; i++) sb_printf(o, "(%s *)out[%d], ", emu_ctype(c->out_dt[i]), i);
    sb_puts(o, c->nfp8 > 0 ? "st8, ws, wsb, (cudaStream_t)0);\n" : "ws, wsb, (cudaStream_t)0);\n");
    for (int j = 0; j < c->nout && c->out_slot; j++)
        if (c->out_slot[j] >= 0)
            sb_printf(o, "    if (st == 0) {\n        float s8 = 0;\n"
                         "        if (fcemu_c%d::fusec_emu_fp8_output_scale(st8, %d, &s8, (cudaStream_t)0) || s8 != (float)(%.17g)) return 3;\n"
                         "    }\n", c->id, j, c->fp8_scale[c->out_slot[j]]);
    sb_puts(o, "    return st;\n}\n");
}

typedef struct Job { char cmd[2048]; char log[300]; int rc; } Job;

/* Runs the jobs, at most `par` at a time; each job's rc is its exit status. */
static void run_jobs(Job *jobs, int n, int par) {
    pid_t *pids = emu_xcalloc((size_t)n, sizeof(pid_t));
    int next = 0, running = 0;
    if (par < 1) par = 1;
    while (next < n || running > 0) {
        while (running < par && next < n) {
            fflush(NULL);
            pid_t p = fork();
            if (p == 0) {
                execl("/bin/sh", "sh", "-c", jobs[next].cmd, (char *)NULL);
                _exit(127);
            }
            if (p < 0) { jobs[next++].rc = 126; continue; }
            pids[next++] = p;
            running++;
        }
        if (running == 0) break;
        int status;
        pid_t done = wait(&status);
        if (done < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (int i = 0; i < next; i++)
            if (pids[i] == done) {
                jobs[i].rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
                running--;
            }
    }
    free(pids);
}

/* Writes batch file bt with the cases of batch bt; false (and build_err) if a rewrite failed. */
static bool write_batch(EmuRunner *r, int bt, char *path, size_t pathlen) {
    StrBuf o = {0};
    bool ok = true;
    /* the device's math functions last: they are macros (fusec_cuda_emu_math.h) */
    sb_puts(&o, "#include \"fusec_cuda_emu.h\"\n#include \"fusec_cublaslt_emu.h\"\n#include \"fusec_cuda_emu_math.h\"\n");
    for (int i = 0; i < r->ncases; i++) {
        EmuCase *c = &r->cases[i];
        if (c->batch != bt || !c->cu) continue;
        char why[256];
        if (c->handwritten) {
            sb_printf(&o, "#line 1 \"%s\"\n", c->path ? c->path : "selftest.cc");
            if (!rewrite_cu(c->cu, true, &o, why, sizeof why)) {
                c->build_err = emu_xstrdup(why);
                ok = false;
            }
            continue;
        }
        /* line numbers (compiler messages, the emulator's reports) are those of NAME.cu,
         * written beside the batch: the rewrite keeps every line where it was */
        char cu_path[400];
        snprintf(cu_path, sizeof cu_path, "%s/%s.cu", r->workdir, c->name);
        if (!write_text(cu_path, c->cu)) fprintf(stderr, "emu_runner: cannot write %s\n", cu_path);
        StrBuf u = {0};
        if (!rewrite_cu(c->cu, false, &u, why, sizeof why)) {
            char m[400];
            snprintf(m, sizeof m, "rewrite: %s", why);
            c->build_err = emu_xstrdup(m);
            c->batch = -2;   /* left out of the compile */
            ok = false;
            sb_free(&u);
            continue;
        }
        sb_printf(&o, "\n/* ==== case %d: %s ==== */\nnamespace fcemu_c%d {\n#line 1 \"%s.cu\"\n", c->id, c->name, c->id, c->name);
        sb_puts(&o, u.data ? u.data : "");
        sb_free(&u);
        long lines = 1;
        for (const char *q = o.data; q && *q; q++) lines += *q == '\n';
        sb_printf(&o, "\n#line %ld \"batch%d.cc\"\n} /* namespace fcemu_c%d */\n", lines + 1, bt, c->id);
        put_wrapper(&o, c);
    }
    snprintf(path, pathlen, "%s/batch%d.cc", r->workdir, bt);
    bool wrote = !o.failed && write_text(path, o.data);
    sb_free(&o);
    if (!wrote) fprintf(stderr, "emu_runner: cannot write %s\n", path);
    return ok && wrote;
}

static void set_job(EmuRunner *r, Job *j, int bt, const char *path) {
    const char *fp = r->contract ? EMU_FP_CONTRACT : EMU_FP_STRICT;
    char obj[300];
    snprintf(obj, sizeof obj, "%s/batch%d.o", r->workdir, bt);
    snprintf(j->log, sizeof j->log, "%s/batch%d.log", r->workdir, bt);
    snprintf(j->cmd, sizeof j->cmd, "%s " EMU_FLAGS " %s -I%s -c %s -o %s > %s 2>&1", r->cxx, fp, r->emu_dir, path, obj,
             j->log);
    cache_wrap(r, j->cmd, sizeof j->cmd, path, fp, obj);
    r->n_compiles++;
}

/* Links batch bt with the runtime and loads it; the library or NULL with *err. */
static void *link_batch(EmuRunner *r, int bt, char **err) {
    char so[400], cmd[1400];
    snprintf(so, sizeof so, "%s/batch%d.so", r->workdir, bt);
    snprintf(cmd, sizeof cmd, "%s -shared -Wl,-Bsymbolic -o %s %s/batch%d.o %s/rt.o -lpthread", r->cxx, so, r->workdir, bt,
             r->workdir);
    if (system(cmd) != 0) {
        char m[1600];
        snprintf(m, sizeof m, "link failed: %s", cmd);
        *err = emu_xstrdup(m);
        return NULL;
    }
    void *lib = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        char m[1600];
        snprintf(m, sizeof m, "dlopen %s: %s", so, dlerror());
        *err = emu_xstrdup(m);
        return NULL;
    }
    if (r->nlibs == r->cap_libs) {
        r->cap_libs = r->cap_libs ? 2 * r->cap_libs : 16;
        r->libs = realloc(r->libs, (size_t)r->cap_libs * sizeof *r->libs);
        if (!r->libs) { fprintf(stderr, "emu_runner: out of memory\n"); exit(1); }
    }
    r->libs[r->nlibs++] = lib;
    return lib;
}

static char *compile_failure(const Job *j) {
    char *log = emu_read_text(j->log);
    size_t n = strlen(j->cmd) + (log ? strlen(log) : 0) + 64;
    char *m = emu_xcalloc(n > 8192 ? 8192 : n, 1);
    snprintf(m, n > 8192 ? 8192 : n, "compile failed: %s\n%s", j->cmd, log ? log : "");
    free(log);
    return m;
}

int emu_build(EmuRunner *r, int per_batch, int par) {
    double t0 = emu_now_s();
    if (per_batch < 1) per_batch = 1;
    /* the batches: generated units per_batch at a time; handwritten sources in one of their own */
    int first = r->nbatch, k = 0, hand = -1;
    bool *mine = emu_xcalloc((size_t)r->ncases, sizeof(bool));
    for (int i = 0; i < r->ncases; i++) {
        EmuCase *c = &r->cases[i];
        if (c->tried) continue;
        c->tried = mine[i] = true;
        if (c->handwritten) {
            if (hand < 0) hand = -2;
            continue;
        }
        if (!c->cu) continue;
        c->batch = first + k++ / per_batch;
    }
    int nb = (k + per_batch - 1) / per_batch;
    if (hand == -2) {
        hand = first + nb++;
        for (int i = 0; i < r->ncases; i++)
            if (r->cases[i].handwritten && r->cases[i].batch < 0) r->cases[i].batch = hand;
    }
    r->nbatch = first + nb;
    Job *jobs = emu_xcalloc((size_t)nb + 1, sizeof(Job));
    int nj = 0, rt_job = -1;
    if (r->rt_state == 0) {
        rt_job = nj++;
        snprintf(jobs[rt_job].log, sizeof jobs[rt_job].log, "%s/rt.log", r->workdir);
        snprintf(jobs[rt_job].cmd, sizeof jobs[rt_job].cmd, "%s " EMU_FLAGS " " EMU_RT_OPT " -I%s -Wall -Wextra -Werror -c %s/fusec_cuda_emu.cc -o %s/rt.o > %s 2>&1",
                 r->cxx, r->emu_dir, r->emu_dir, r->workdir, jobs[rt_job].log);
        char src[700], obj[300];
        snprintf(src, sizeof src, "%s/fusec_cuda_emu.cc", r->emu_dir);
        snprintf(obj, sizeof obj, "%s/rt.o", r->workdir);
        cache_wrap(r, jobs[rt_job].cmd, sizeof jobs[rt_job].cmd, src, "runtime " EMU_RT_OPT " -Wall -Wextra -Werror", obj);
        r->n_compiles++;
    }
    for (int b = 0; b < nb; b++) {
        char path[400];
        write_batch(r, first + b, path, sizeof path);   /* a case it could not take has its build_err */
        set_job(r, &jobs[nj++], first + b, path);
    }
    run_jobs(jobs, nj, par);
    if (rt_job >= 0) {
        r->rt_state = jobs[rt_job].rc == 0 ? 1 : -1;
        if (r->rt_state < 0) r->rt_err = compile_failure(&jobs[rt_job]);
    }
    /* a batch of several units that fails: compile each of them alone */
    int nsingle = 0;
    Job *single = NULL;
    int *single_case = NULL;
    for (int b = 0; b < nb; b++) {
        const Job *j = &jobs[(rt_job >= 0) + b];
        int bt = first + b, members = 0;
        for (int i = 0; i < r->ncases; i++) members += r->cases[i].batch == bt && r->cases[i].cu;
        if (j->rc == 0 || bt == hand) continue;
        if (members <= 1) {
            for (int i = 0; i < r->ncases; i++)
                if (r->cases[i].batch == bt && !r->cases[i].build_err) r->cases[i].build_err = compile_failure(j);
            continue;
        }
        if (!single) {
            single = emu_xcalloc((size_t)r->ncases, sizeof(Job));
            single_case = emu_xcalloc((size_t)r->ncases, sizeof(int));
        }
        for (int i = 0; i < r->ncases; i++) {
            EmuCase *c = &r->cases[i];
            if (c->batch != bt || !c->cu) continue;
            c->batch = r->nbatch++;
            char path[400];
            if (!write_batch(r, c->batch, path, sizeof path)) continue;
            set_job(r, &single[nsingle], c->batch, path);
            single_case[nsingle++] = i;
        }
    }
    if (nsingle) run_jobs(single, nsingle, par);
    /* link and load */
    for (int b = 0; b < nb && r->rt_state > 0; b++) {
        int bt = first + b;
        if (jobs[(rt_job >= 0) + b].rc != 0) {
            if (bt == hand)
                for (int i = 0; i < r->ncases; i++)
                    if (r->cases[i].batch == bt && !r->cases[i].build_err) r->cases[i].build_err = compile_failure(&jobs[(rt_job >= 0) + b]);
            continue;
        }
        char *err = NULL;
        void *lib = link_batch(r, bt, &err);
        for (int i = 0; i < r->ncases; i++) {
            EmuCase *c = &r->cases[i];
            if (c->batch != bt || c->build_err) continue;
            c->lib = lib;
            if (!lib) c->build_err = emu_xstrdup(err);
        }
        free(err);
    }
    for (int s = 0; s < nsingle && r->rt_state > 0; s++) {
        EmuCase *c = &r->cases[single_case[s]];
        if (single[s].rc != 0) { if (!c->build_err) c->build_err = compile_failure(&single[s]); continue; }
        char *err = NULL;
        c->lib = link_batch(r, c->batch, &err);
        if (!c->lib) c->build_err = err;
        else free(err);
    }
    /* what did not build, and why */
    int failed = 0;
    for (int i = 0; i < r->ncases; i++) {
        EmuCase *c = &r->cases[i];
        if (!mine[i] || c->batch == -1 || c->lib) continue;
        if (!c->build_err) c->build_err = emu_xstrdup(r->rt_state < 0 && r->rt_err ? r->rt_err : "not built");
        failed++;
    }
    free(mine);
    free(jobs);
    free(single);
    free(single_case);
    r->t_compile += emu_now_s() - t0;
    return failed;
}
/* ---- running a case in a child ----------------------------------------------------------------- */
typedef struct Region { char *base; size_t map_bytes; char *data; size_t bytes; char label[64]; } Region;

/* Memory shared with the child, `bytes` of data (aligned to `align`) ending at a guard page. */
static bool region_new(Region *r, size_t bytes, size_t align, const char *label) {
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    size_t span = (bytes + align + ps - 1) / ps * ps;
    r->map_bytes = span + ps;
    r->base = mmap(NULL, r->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (r->base == MAP_FAILED) return false;
    if (mprotect(r->base + span, ps, PROT_NONE) != 0) return false;
    r->data = (char *)(((uintptr_t)(r->base + span) - bytes) & ~(uintptr_t)(align - 1));
    r->bytes = bytes;
    snprintf(r->label, sizeof r->label, "%s", label);
    return true;
}
static void region_free(Region *r) {
    if (r->base && r->base != MAP_FAILED) munmap(r->base, r->map_bytes);
    memset(r, 0, sizeof *r);
}

typedef struct RunResult {
    int finished;             /* the child got to the end */
    int status;               /* the forward's return code */
    char msg[4096];
} RunResult;

static Region *g_regions;     /* the child's view, for its fault handler */
static int g_nregions;
static RunResult *g_result;
static int (*g_describe)(const void *, char *, size_t);

static void on_fault(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    char *m = g_result->msg;
    size_t len = sizeof g_result->msg;
    const char *a = si->si_addr;
    int o = snprintf(m, len, "out-of-bounds access (%s at %p)", sig == SIGSEGV ? "SIGSEGV" : "SIGBUS", si->si_addr);
    for (int i = 0; i < g_nregions; i++) {
        Region *r = &g_regions[i];
        if (a >= r->data + r->bytes && a < r->base + r->map_bytes)
            o += snprintf(m + o, len - (size_t)o, ": %ld bytes past the end of %s", (long)(a - (r->data + r->bytes)), r->label);
        else if (a >= r->base && a < r->data)
            o += snprintf(m + o, len - (size_t)o, ": %ld bytes before %s", (long)(r->data - a), r->label);
    }
    if (g_describe && o < (int)len - 10) {
        o += snprintf(m + o, len - (size_t)o, "; ");
        g_describe(a, m + o, len - (size_t)o);
    }
    _exit(99);
}

typedef int (*RunFn)(void *const *, void *const *, void *, size_t);
typedef int (*WsFn)(size_t *);
typedef int (*SelfFn)(int);

/* Poison pattern of an output before a run: NaN for floats, 0x5a bytes otherwise. */
static void poison(void *p, FcDtype t, int64_t n) {
    for (int64_t j = 0; j < n; j++) {
        switch (t) {
        case FC_F64: ((double *)p)[j] = NAN; break;
        case FC_F32: ((float *)p)[j] = NAN; break;
        case FC_F16: ((uint16_t *)p)[j] = 0x7e00; break;
        case FC_BF16: ((uint16_t *)p)[j] = 0x7fc0; break;
        case FC_F8E4M3: case FC_F8E5M2: ((uint8_t *)p)[j] = 0x7f; break;
        default: memset((char *)p + (size_t)j * fc_dtype_size(t), 0x5a, fc_dtype_size(t)); break;
        }
    }
}

/* Runs case c once (reverse order or not) in a child. outs receives the outputs (caller frees). */
static bool run_case(EmuRunner *r, EmuCase *c, int reverse, void ***outs_ret, RunResult *res) {
    memset(res, 0, sizeof *res);
    int nreg = c->nin + c->nout + 1;
    Region *reg = emu_xcalloc((size_t)nreg, sizeof(Region));
    RunResult *shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    void **ins = emu_xcalloc((size_t)c->nin, sizeof(void *)), **outs = emu_xcalloc((size_t)c->nout, sizeof(void *));
    bool ok = shared != MAP_FAILED;
    size_t ws_bytes = 0;
    char fn[64];
    snprintf(fn, sizeof fn, "fcemu_ws_%d", c->id);
    WsFn wsf = c->handwritten ? NULL : (WsFn)(uintptr_t)dlsym(c->lib, fn);
    snprintf(fn, sizeof fn, c->handwritten ? "fcemu_selftest" : "fcemu_run_%d", c->id);
    void *runsym = dlsym(c->lib, fn);
    void (*set_rev)(int) = (void (*)(int))(uintptr_t)dlsym(c->lib, "fcemu_set_reverse");
    const char *(*last_err)(void) = (const char *(*)(void))(uintptr_t)dlsym(c->lib, "fcemu_last_error");
    if (!runsym || !set_rev || !last_err || (!c->handwritten && !wsf)) {
        snprintf(res->msg, sizeof res->msg, "symbol %s missing: %s", fn, dlerror());
        ok = false;
    }
    if (ok && wsf && wsf(&ws_bytes) != 0) { snprintf(res->msg, sizeof res->msg, "workspace size failed"); ok = false; }
    for (int i = 0; i < c->nin && ok; i++) {
        size_t es = fc_dtype_size(c->in_dt[i]), bytes = (size_t)c->in_n[i] * es;
        char label[64];
        snprintf(label, sizeof label, "input %d", i);
        ok = region_new(&reg[i], bytes, es, label);
        if (ok) { memcpy(reg[i].data, c->in[i], bytes); ins[i] = reg[i].data; }
    }
    for (int i = 0; i < c->nout && ok; i++) {
        size_t es = fc_dtype_size(c->out_dt[i]), bytes = (size_t)c->out_n[i] * es;
        char label[64];
        snprintf(label, sizeof label, "output %d", i);
        ok = region_new(&reg[c->nin + i], bytes, es, label);
        if (ok) { poison(reg[c->nin + i].data, c->out_dt[i], c->out_n[i]); outs[i] = reg[c->nin + i].data; }
    }
    void *ws = NULL;
    if (ok && ws_bytes) {
        size_t wsr = (ws_bytes + 255) / 256 * 256;   /* the unit wants 256-byte alignment */
        ok = region_new(&reg[nreg - 1], wsr, 256, "the workspace");
        if (ok) { memset(reg[nreg - 1].data, 0xff, wsr); ws = reg[nreg - 1].data; }
    }
    if (ok) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            g_regions = reg;
            g_nregions = nreg;
            g_result = shared;
            g_describe = (int (*)(const void *, char *, size_t))(uintptr_t)dlsym(c->lib, "fcemu_describe_fault");
            struct sigaction sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_sigaction = on_fault;
            sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
            sigaction(SIGSEGV, &sa, NULL);
            sigaction(SIGBUS, &sa, NULL);
            alarm((unsigned)r->run_timeout_s);
            set_rev(reverse);
            int st;
            if (c->handwritten) st = ((SelfFn)(uintptr_t)runsym)(c->selftest);
            else st = ((RunFn)(uintptr_t)runsym)(ins, outs, ws, ws_bytes);
            shared->status = st;
            snprintf(shared->msg, sizeof shared->msg, "%s", last_err());
            shared->finished = 1;
            _exit(0);
        }
        int wst = 0;
        if (pid < 0 || waitpid(pid, &wst, 0) != pid) {
            snprintf(res->msg, sizeof res->msg, "fork failed");
            ok = false;
        } else {
            *res = *shared;
            if (!res->finished && WIFSIGNALED(wst) && WTERMSIG(wst) == SIGALRM)
                snprintf(res->msg, sizeof res->msg, "timeout: still running after %d s", r->run_timeout_s);
            else if (!res->finished && WIFSIGNALED(wst))
                snprintf(res->msg, sizeof res->msg, "crashed with signal %d", WTERMSIG(wst));
            else if (!res->finished && !res->msg[0])
                snprintf(res->msg, sizeof res->msg, "the child exited with status %d", WEXITSTATUS(wst));
        }
    }
    if (ok && res->finished) {
        void **copy = emu_xcalloc((size_t)c->nout, sizeof(void *));
        for (int i = 0; i < c->nout; i++) {
            size_t bytes = (size_t)c->out_n[i] * fc_dtype_size(c->out_dt[i]);
            copy[i] = emu_xcalloc(bytes, 1);
            memcpy(copy[i], outs[i], bytes);
        }
        *outs_ret = copy;
    }
    for (int i = 0; i < nreg; i++) region_free(&reg[i]);
    free(reg);
    free(ins);
    free(outs);
    if (shared != MAP_FAILED) munmap(shared, sizeof *shared);
    return ok && res->finished;
}

static void free_outs(const EmuCase *c, void **o) {
    if (!o) return;
    for (int i = 0; i < c->nout; i++) free(o[i]);
    free(o);
}

/* One element of output 0 altered (self-checks: the comparison must see it). */
static void corrupt_output(const EmuCase *c, void **got) {
    if (c->nout < 1 || c->out_n[0] < 1) return;
    int64_t i = c->out_n[0] / 2;
    FcDtype t = c->out_dt[0];
    double v = rt_host_load(t, got[0], i);
    rt_host_store(t, got[0], i, t == FC_BOOL ? (v == 0) : t == FC_I8 ? -v - 1 : isfinite(v) ? v + 1 + 0.5 * fabs(v) : 1.0);
}

/* Compares one run's outputs with the oracle; rep->why "" when they agree. */
static void compare(EmuRunner *r, const EmuCase *c, void **got, EmuReport *rep) {
    char *why = rep->why;
    size_t n = sizeof rep->why;
    why[0] = 0;
    if (c->compare) {
        c->compare(c, got, why, n);
        rep->rel = -1;
        return;
    }
    for (int i = 0; i < c->nout; i++) {
        FcTensor *g = NULL, *w = NULL;
        int64_t dims[1] = {c->out_n[i]};
        size_t bytes = (size_t)c->out_n[i] * fc_dtype_size(c->out_dt[i]);
        double abs_err = 0, rel = 0;
        bool ok = c->want[i] && fc_tensor_new(r->ref, c->out_dt[i], 1, dims, &g) == FC_OK &&
                  fc_tensor_new(r->ref, c->out_dt[i], 1, dims, &w) == FC_OK &&
                  fc_tensor_copy_from_host(g, got[i], bytes) == FC_OK &&
                  fc_tensor_copy_from_host(w, c->want[i], bytes) == FC_OK &&
                  fc_tensor_compare(g, w, &abs_err, &rel) == FC_OK;
        if (!ok) snprintf(why, n, "output %d: comparison failed", i);
        else if (!(rel <= c->tol[i])) {
            /* say where: the first element that is off by more than the tolerance */
            int64_t at = -1;
            double gv = 0, wv = 0, maxref = 0;
            for (int64_t j = 0; j < c->out_n[i]; j++) {
                double rv = rt_host_load(c->out_dt[i], c->want[i], j);
                if (isfinite(rv) && fabs(rv) > maxref) maxref = fabs(rv);
            }
            for (int64_t j = 0; j < c->out_n[i] && at < 0; j++) {
                gv = rt_host_load(c->out_dt[i], got[i], j);
                wv = rt_host_load(c->out_dt[i], c->want[i], j);
                bool same_nf = (isnan(gv) && isnan(wv)) || (isinf(gv) && gv == wv);
                if (!same_nf && (!isfinite(gv) || !isfinite(wv) || fabs(gv - wv) > c->tol[i] * maxref)) at = j;
            }
            snprintf(why, n, "output %d: max error / max |ref| = %.3g over the tolerance %.3g (element %lld: got %.9g, want %.9g)",
                     i, rel, c->tol[i], (long long)at, gv, wv);
            rep->output = i;
            rep->rel = rel;
            rep->tol = c->tol[i];
            rep->at = (long long)at;
            rep->got = gv;
            rep->want = wv;
        }
        fc_tensor_free(g);
        fc_tensor_free(w);
        if (why[0]) return;
    }
}

EmuVerdict emu_check(EmuRunner *r, int id, EmuReport *rep) {
    EmuCase *c = &r->cases[id];
    memset(rep, 0, sizeof *rep);
    char *why = rep->why;
    size_t n = sizeof rep->why;
    if (!c->lib) {
        snprintf(why, n, "not built: %s", c->build_err ? c->build_err : c->cu || c->handwritten ? "not compiled" : "no unit");
        return rep->verdict = EMU_ERROR;
    }
    RunResult res[2];
    void **outs[2] = {NULL, NULL};
    EmuVerdict v = EMU_PASS;
    for (int rev = 0; rev < 2 && !why[0]; rev++) {
        bool ran = run_case(r, c, rev, &outs[rev], &res[rev]);
        const char *order = rev ? "reverse order" : "forward order";
        rep->order = rev;
        if (c->handwritten) {
            if (!ran && !c->expect_msg) snprintf(why, n, "%s: %.3900s", order, res[rev].msg);
            else if (ran && res[rev].status != 0 && !c->expect_msg)
                snprintf(why, n, "%s: failed with %d: %.3900s", order, res[rev].status, res[rev].msg);
            else if (c->expect_msg && (ran && res[rev].status == 0))
                snprintf(why, n, "%s: expected the failure \"%s\", but it passed", order, c->expect_msg);
            else if (c->expect_msg && !strstr(res[rev].msg, c->expect_msg))
                snprintf(why, n, "%s: expected a failure with \"%s\", got: %.3900s", order, c->expect_msg, res[rev].msg);
            else if (c->expect_msg && rev == 0)
                printf("         reported: %s\n", res[rev].msg);
            if (why[0]) v = EMU_ERROR;
            continue;
        }
        if (!ran) { snprintf(why, n, "%s: %.3900s", order, res[rev].msg); v = EMU_ERROR; break; }
        if (res[rev].status != c->want_status) {
            snprintf(why, n, "%s: the forward returned %d (want %d)%s%.3900s", order, res[rev].status, c->want_status,
                     res[rev].msg[0] ? ": " : "", res[rev].msg);
            v = EMU_ERROR;
            break;
        }
        if (c->corrupt) corrupt_output(c, outs[rev]);
        compare(r, c, outs[rev], rep);
        if (why[0]) {
            char tmp[sizeof rep->why];
            memcpy(tmp, why, sizeof tmp);
            snprintf(why, n, "%s: %.4000s", order, tmp);
            v = EMU_MISMATCH;
        }
    }
    if (!why[0] && !c->handwritten)
        for (int i = 0; i < c->nout; i++)
            if (memcmp(outs[0][i], outs[1][i], (size_t)c->out_n[i] * fc_dtype_size(c->out_dt[i])) != 0) {
                int64_t j = 0;
                size_t es = fc_dtype_size(c->out_dt[i]);
                while (memcmp((char *)outs[0][i] + j * (int64_t)es, (char *)outs[1][i] + j * (int64_t)es, es) == 0) j++;
                snprintf(why, n, "output %d differs between forward and reverse order at element %lld (%.9g vs %.9g)", i,
                         (long long)j, rt_host_load(c->out_dt[i], outs[0][i], j), rt_host_load(c->out_dt[i], outs[1][i], j));
                rep->between_orders = true;
                rep->output = i;
                rep->at = (long long)j;
                v = EMU_MISMATCH;
                break;
            }
    if (c->keep_outputs && outs[0]) {
        free_outs(c, c->kept);
        c->kept = outs[0];
        outs[0] = NULL;
    }
    free_outs(c, outs[0]);
    free_outs(c, outs[1]);
    return rep->verdict = v;
}

void emu_free(EmuRunner *r, bool keep) {
    if (r->workdir[0]) {
        if (keep) printf("work folder kept: %s\n", r->workdir);
        else {
            char cmd[400];
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", r->workdir);
            if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", r->workdir);
        }
    }
    for (int i = 0; i < r->nlibs; i++) dlclose(r->libs[i]);
    free(r->libs);
    for (int i = 0; i < r->ncases; i++) {
        EmuCase *c = &r->cases[i];
        free(c->cu);
        free(c->build_err);
        free_outs(c, c->kept);
        if (c->compare == compare_strict) free(c->user);
        if (c->shares) continue;   /* the rest belongs to its original */
        for (int k = 0; c->in && k < c->nin; k++) free(c->in[k]);
        for (int k = 0; c->want && k < c->nout; k++) free(c->want[k]);
        free(c->in); free(c->want); free(c->tol); free(c->in_dt); free(c->out_dt); free(c->in_n); free(c->out_n);
        free(c->fp8_scale);
        free(c->in_slot);
        free(c->out_slot);
    }
    free(r->cases);
    free(r->rt_err);
    fc_device_free(r->ref);
    fc_device_free(r->cpu);
    memset(r, 0, sizeof *r);
}
