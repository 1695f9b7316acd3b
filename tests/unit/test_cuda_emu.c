/* test_cuda_emu.c: the CUDA emulation harness (docs/cuda_emu.md).
 *
 * Every AOT unit (.cu) that the tests below make is compiled by the host C++ compiler against
 * tests/cuda_emu/fusec_cuda_emu.h (threads as fibers, shared memory poisoned with 0xFF and
 * guarded, barriers and warp operations checked) and run on the CPU, in thread order and in
 * reverse thread (and block) order; results are compared with the oracle and with each other:
 *   1. the hand-built programs of kir_samples.h (against their plain-C references);
 *   2. every examples/NAME.tf at small, odd dims, fused and eager (against the reference
 *      interpreter, within fc_block_output_tolerance);
 *   3. small blocks that together use every op of the language, fused and eager;
 *   4. planted bugs that the harness must catch: a __syncthreads deleted from a tiled matrix
 *      product (after the loads; before the next loads), an index off by one in a pointwise
 *      kernel (a store, a load);
 *   5. the emulator's own checks (tests/cuda_emu/selftest.cc): shuffles, votes, atomics,
 *      dynamic shared memory, launch bounds, and the errors it must report (barrier
 *      divergence, a deadlock, a shared index past the end, a mask without the caller,
 *      a thread's stack overflow, lanes at different shuffles).
 * Each run happens in a child process, so a fault on a guard page becomes a message ("out of
 * bounds: ... 4 bytes past the end of output 0") rather than a crash. Forward and reverse
 * runs must agree bit for bit.
 *
 * The generated text needs two rewrites before a C++ compiler takes it (rewrite_cu):
 * launches `k<<<g, b, s, st>>>(...)` and `__shared__` declarations; units are then wrapped in
 * a namespace each (their `extern "C"` dropped) so that several share one compile.
 * Exits 77 when no C++ compiler is found. The work folder ($TMPDIR, else the build tree) is
 * kept when something fails, or with FUSEC_EMU_KEEP=1; FUSEC_EMU_CXX picks the compiler.
 */
#include "codegen.h"
#include "frontend.h"
#include "passes.h"
#include "kir_samples.h"
#include "fusec.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef FUSEC_CXX
#define FUSEC_CXX "c++"
#endif
#define EMU_DIR FUSEC_SOURCE_DIR "/tests/cuda_emu"
#define CASES_PER_BATCH 6
#define RUN_TIMEOUT_S 60

#include "check.h"

static char workdir[256];
static const char *cxx;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *xcalloc(size_t n, size_t s) {
    void *p = calloc(n ? n : 1, s ? s : 1);
    if (!p) { fprintf(stderr, "out of memory\n"); exit(1); }
    return p;
}

static char *xstrdup(const char *s) {
    char *d = xcalloc(strlen(s) + 1, 1);
    memcpy(d, s, strlen(s) + 1);
    return d;
}

static bool write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return false;
    bool ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok;
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = xcalloc((size_t)n + 1, 1);
    size_t got = fread(s, 1, (size_t)n, f);
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
            /* __launch_bounds__(N) NAME: remember N for NAME's launches */
            int bound = 0, used = 0;
            if (sscanf(s + i, "(%d)%n", &bound, &used) == 1 && nb < 256) {
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

/* ---- cases ------------------------------------------------------------------------------------ */
typedef enum { CMP_BLOCK, CMP_SAMPLE, CMP_SELFTEST } CmpKind;
typedef struct Case {
    char name[128];
    char *cu;                 /* the AOT unit as emitted */
    CmpKind cmp;
    int nin, nout;
    FcDtype *in_dt, *out_dt;
    int64_t *in_n, *out_n;    /* elements */
    void **in;                /* host inputs */
    void **want;              /* reference outputs (CMP_BLOCK) */
    double *tol;              /* CMP_BLOCK: per output */
    KsSample sample;          /* CMP_SAMPLE */
    void **sample_want;       /* CMP_SAMPLE: all buffers of the reference run */
    int want_status;
    const char *planted;      /* a planted bug: the harness must report a failure */
    bool shares;              /* a variant of another case: its inputs and references are that case's */
    const char *expect_msg;   /* CMP_SELFTEST: the failure text expected, NULL for success */
    int selftest;             /* CMP_SELFTEST: which */
    int batch, id;
    void *lib;
} Case;

static Case *cases;
static int ncases, cap_cases;

static Case *new_case(const char *name) {
    if (ncases == cap_cases) {
        cap_cases = cap_cases ? 2 * cap_cases : 64;
        cases = realloc(cases, (size_t)cap_cases * sizeof *cases);
        if (!cases) { fprintf(stderr, "out of memory\n"); exit(1); }
    }
    Case *c = &cases[ncases];
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    c->id = ncases++;
    return c;
}

static void alloc_io(Case *c, int nin, int nout) {
    c->nin = nin;
    c->nout = nout;
    c->in_dt = xcalloc((size_t)nin, sizeof(FcDtype));
    c->out_dt = xcalloc((size_t)nout, sizeof(FcDtype));
    c->in_n = xcalloc((size_t)nin, sizeof(int64_t));
    c->out_n = xcalloc((size_t)nout, sizeof(int64_t));
    c->in = xcalloc((size_t)nin, sizeof(void *));
    c->want = xcalloc((size_t)nout, sizeof(void *));
    c->tol = xcalloc((size_t)nout, sizeof(double));
}

static const char *ctype_of(FcDtype t) {
    switch (t) {
    case FC_F64: return "double";
    case FC_F32: return "float";
    case FC_F16: case FC_BF16: return "unsigned short";
    case FC_I32: return "int";
    case FC_I64: return "long long";
    default: return "unsigned char";
    }
}

/* 1. a kir sample: its AOT unit; inputs from its fill, outputs from its reference */
static void add_sample(int i) {
    KsSample s;
    if (!ks_sample(i, &s)) { EXPECT(0, "sample %d: out of memory", i); return; }
    char name[128];
    snprintf(name, sizeof name, "sample_%s", s.name);
    Case *c = new_case(name);
    c->cmp = CMP_SAMPLE;
    c->sample = s;
    const KirProgram *p = s.prog;
    int nin = 0, nout = 0;
    for (int b = 0; b < p->buffers.len; b++) {
        if (p->buffers.data[b].kind == KIR_BUF_INPUT) nin++;
        if (p->buffers.data[b].kind == KIR_BUF_OUTPUT) nout++;
    }
    alloc_io(c, nin, nout);
    CgIoDesc *io = xcalloc((size_t)(nin + nout), sizeof(CgIoDesc));
    void **bufs = ks_alloc_buffers(p), **want = ks_alloc_buffers(p);
    s.fill(bufs, p, 1234 + (uint64_t)i);
    ks_copy_inputs(p, bufs, want);
    c->want_status = s.reference(want, p);
    for (int b = 0; b < p->buffers.len; b++) {
        const KirBuffer *kb = &p->buffers.data[b];
        if (kb->kind == KIR_BUF_TEMP) continue;
        bool out = kb->kind == KIR_BUF_OUTPUT;
        CgIoDesc *d = &io[out ? nin + kb->index : kb->index];
        d->name = out ? "out" : "in";
        d->dtype = kb->dtype;
        d->shape.rank = 1;
        d->shape.dims[0] = kb->numel;
        d->is_output = out;
        if (out) { c->out_dt[kb->index] = kb->dtype; c->out_n[kb->index] = kb->numel; }
        else {
            c->in_dt[kb->index] = kb->dtype;
            c->in_n[kb->index] = kb->numel;
            size_t bytes = (size_t)kb->numel * fc_dtype_size(kb->dtype);
            c->in[kb->index] = xcalloc(bytes, 1);
            memcpy(c->in[kb->index], bufs[b], bytes);
        }
    }
    c->sample_want = want;
    ks_free_buffers(p, bufs);
    StrBuf sb = {0};
    FcErr err = {0};
    FcStatus st = cg_cuda_aot(p, "emu", io, nin + nout, &sb, &err);
    EXPECT(st == FC_OK, "%s: cg_cuda_aot: %s", name, err.msg);
    c->cu = st == FC_OK && !sb.failed ? xstrdup(sb.data) : NULL;
    sb_free(&sb);
    free(io);
}

/* 2, 3. a block: compile, emit its AOT unit, random inputs, reference outputs */
typedef struct Dim { const char *name; int64_t v; } Dim;

static FcDevice *ref_dev;

static char *compile_block(const char *src, const char *file, const Dim *dims, bool fuse, FcBlock **blk_out) {
    FcOptions *opt = NULL;
    FcBlock *blk = NULL;
    char *data = NULL;
    size_t len = 0;
    *blk_out = NULL;
    if (fc_options_new(&opt) != FC_OK) return NULL;
    for (int d = 0; dims && dims[d].name; d++) fc_options_set_dim(opt, dims[d].name, dims[d].v);
    fc_options_set_fuse(opt, fuse);
    fc_options_set_entry(opt, "emu");
    FcStatus st = fc_compile_string(src, file, opt, &blk);
    EXPECT(st == FC_OK, "%s: compile: %s %s", file, blk ? fc_block_last_error(blk) : "", blk ? fc_block_diagnostics(blk) : "");
    if (st == FC_OK) {
        st = fc_block_emit(blk, FC_EMIT_CUDA, &data, &len);
        EXPECT(st == FC_OK, "%s: emit cuda: %s", file, fc_block_last_error(blk));
    }
    fc_options_free(opt);
    if (st != FC_OK) { fc_block_free(blk); return NULL; }
    *blk_out = blk;
    return data;
}

static Case *add_block(const char *name, const char *src, const Dim *dims, bool fuse, uint64_t seed) {
    FcBlock *blk;
    char *cu = compile_block(src, name, dims, fuse, &blk);
    if (!cu) return NULL;
    char cname[128];
    snprintf(cname, sizeof cname, "%s_%s", name, fuse ? "fused" : "eager");
    Case *c = new_case(cname);
    c->cmp = CMP_BLOCK;
    c->cu = xstrdup(cu);
    fc_buffer_free(cu);
    int nin = fc_block_num_inputs(blk), nout = fc_block_num_outputs(blk);
    alloc_io(c, nin, nout);
    FcProgram *prog = NULL;
    FcTensor **ti = xcalloc((size_t)nin, sizeof(FcTensor *)), **to = xcalloc((size_t)nout, sizeof(FcTensor *));
    bool ok = fc_program_new(blk, ref_dev, &prog) == FC_OK;
    EXPECT(ok, "%s: reference program: %s", cname, prog ? fc_program_last_error(prog) : "");
    for (int i = 0; i < nin && ok; i++) {
        FcTensorInfo info;
        fc_block_input_info(blk, i, &info);
        ok = fc_tensor_new(ref_dev, info.dtype, info.rank, info.dims, &ti[i]) == FC_OK &&
             fc_block_random_input(blk, i, seed + (uint64_t)i, ti[i]) == FC_OK;
        c->in_dt[i] = info.dtype;
        c->in_n[i] = 1;
        for (int d = 0; d < info.rank; d++) c->in_n[i] *= info.dims[d];
        size_t bytes = fc_tensor_nbytes(ti[i]);
        c->in[i] = xcalloc(bytes, 1);
        ok = ok && fc_tensor_copy_to_host(ti[i], c->in[i], bytes) == FC_OK;
    }
    for (int i = 0; i < nout && ok; i++) {
        FcTensorInfo info;
        fc_block_output_info(blk, i, &info);
        ok = fc_tensor_new(ref_dev, info.dtype, info.rank, info.dims, &to[i]) == FC_OK &&
             fc_block_output_tolerance(blk, i, &c->tol[i]) == FC_OK;
        c->out_dt[i] = info.dtype;
        c->out_n[i] = 1;
        for (int d = 0; d < info.rank; d++) c->out_n[i] *= info.dims[d];
    }
    FcStatus rs = ok ? fc_program_run(prog, ti, to) : FC_ERR_INTERNAL;
    EXPECT(rs == FC_OK, "%s: reference run: %s", cname, prog ? fc_program_last_error(prog) : "");
    for (int i = 0; i < nout && rs == FC_OK; i++) {
        size_t bytes = fc_tensor_nbytes(to[i]);
        c->want[i] = xcalloc(bytes, 1);
        fc_tensor_copy_to_host(to[i], c->want[i], bytes);
    }
    for (int i = 0; i < nin; i++) fc_tensor_free(ti[i]);
    for (int i = 0; i < nout; i++) fc_tensor_free(to[i]);
    free(ti);
    free(to);
    fc_program_free(prog);
    fc_block_free(blk);
    if (rs != FC_OK) { free(c->cu); c->cu = NULL; }
    return c;
}

/* The unit of the GPU-shaped program, as the CUDA device runs it: every matrix product a
 * generated (tiled, shared-memory) kernel instead of a cuBLASLt call. NULL on failure. */
static char *gpu_unit(const char *src, const char *name, const Dim *dims, bool fuse) {
    FeDimBinding fd[8];
    int nd = 0;
    for (; dims && dims[nd].name && nd < 8; nd++) fd[nd] = (FeDimBinding){dims[nd].name, dims[nd].v};
    FeOptions fo = {.block = NULL, .dims = fd, .ndims = nd};
    IrGraph *g = NULL;
    StrBuf diags = {0}, sb = {0};
    FcErr err = {0};
    PassResult res;
    memset(&res, 0, sizeof res);
    char *out = NULL;
    FcStatus st = fe_compile(src, strlen(src), name, &fo, &g, &diags, &err);
    PassOptions po = {.fuse = fuse, .sm = 90, .library_gemm = false};
    if (st == FC_OK) st = pass_pipeline(g, &po, &res, &err);
    if (st == FC_OK) {
        int nio = g->inputs.len + g->outputs.len;
        CgIoDesc *io = xcalloc((size_t)nio, sizeof(CgIoDesc));
        for (int i = 0; i < nio; i++) {
            bool o = i >= g->inputs.len;
            const IrValue *v = ir_cval(g, o ? g->outputs.data[i - g->inputs.len] : g->inputs.data[i]);
            io[i] = (CgIoDesc){o ? "out" : "in", v->dtype, v->shape, o};
        }
        st = cg_cuda_aot(res.prog, "emu", io, nio, &sb, &err);
        free(io);
        if (st == FC_OK && !sb.failed) out = xstrdup(sb.data);
    }
    EXPECT(st == FC_OK, "%s: the GPU-shaped unit: %s", name, err.msg);
    sb_free(&sb);
    sb_free(&diags);
    pass_result_free(&res);
    ir_graph_free(g);
    return out;
}

/* ---- batches: namespaced units, one compile each ------------------------------------------------ */
static void put_wrapper(StrBuf *o, const Case *c) {
    sb_printf(o, "extern \"C\" int fcemu_ws_%d(size_t *b) { return fcemu_c%d::fusec_emu_workspace_size(b); }\n", c->id, c->id);
    sb_printf(o, "extern \"C\" int fcemu_run_%d(void *const *in, void *const *out, void *ws, size_t wsb) {\n"
                 "    (void)in; (void)out;\n    return fcemu_c%d::fusec_emu_forward(", c->id, c->id);
    for (int i = 0; i < c->nin; i++) sb_printf(o, "(const %s *)in[%d], ", ctype_of(c->in_dt[i]), i);
    for (int i = 0; i < c->nout; i++) sb_printf(o, "(%s *)out[%d], ", ctype_of(c->out_dt[i]), i);
    sb_puts(o, "ws, wsb, (cudaStream_t)0);\n}\n");
}

typedef struct Job { char cmd[2048]; char log[300]; int rc; } Job;

/* Runs the jobs, at most `par` at a time; each job's rc is its exit status. */
static void run_jobs(Job *jobs, int n, int par) {
    pid_t *pids = xcalloc((size_t)n, sizeof(pid_t));
    int next = 0, running = 0;
    while (next < n || running > 0) {
        while (running < par && next < n) {
            pid_t p = fork();
            if (p == 0) {
                execl("/bin/sh", "sh", "-c", jobs[next].cmd, (char *)NULL);
                _exit(127);
            }
            pids[next++] = p;
            running++;
        }
        int status;
        pid_t done = wait(&status);
        if (done < 0) break;
        for (int i = 0; i < next; i++)
            if (pids[i] == done) jobs[i].rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
        running--;
    }
    free(pids);
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
static bool run_case(Case *c, int reverse, void ***outs_ret, RunResult *res) {
    memset(res, 0, sizeof *res);
    int nreg = c->nin + c->nout + 1;
    Region *reg = xcalloc((size_t)nreg, sizeof(Region));
    RunResult *shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    void **ins = xcalloc((size_t)c->nin, sizeof(void *)), **outs = xcalloc((size_t)c->nout, sizeof(void *));
    bool ok = shared != MAP_FAILED;
    size_t ws_bytes = 0;
    char fn[64];
    snprintf(fn, sizeof fn, "fcemu_ws_%d", c->id);
    WsFn wsf = c->cmp == CMP_SELFTEST ? NULL : (WsFn)(uintptr_t)dlsym(c->lib, fn);
    snprintf(fn, sizeof fn, c->cmp == CMP_SELFTEST ? "fcemu_selftest" : "fcemu_run_%d", c->id);
    void *runsym = dlsym(c->lib, fn);
    void (*set_rev)(int) = (void (*)(int))(uintptr_t)dlsym(c->lib, "fcemu_set_reverse");
    const char *(*last_err)(void) = (const char *(*)(void))(uintptr_t)dlsym(c->lib, "fcemu_last_error");
    if (!runsym || !set_rev || !last_err || (c->cmp != CMP_SELFTEST && !wsf)) {
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
            alarm(RUN_TIMEOUT_S);
            set_rev(reverse);
            int st;
            if (c->cmp == CMP_SELFTEST) st = ((SelfFn)(uintptr_t)runsym)(c->selftest);
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
                snprintf(res->msg, sizeof res->msg, "timeout: still running after %d s", RUN_TIMEOUT_S);
            else if (!res->finished && WIFSIGNALED(wst))
                snprintf(res->msg, sizeof res->msg, "crashed with signal %d", WTERMSIG(wst));
            else if (!res->finished && !res->msg[0])
                snprintf(res->msg, sizeof res->msg, "the child exited with status %d", WEXITSTATUS(wst));
        }
    }
    if (ok && res->finished) {
        void **copy = xcalloc((size_t)c->nout, sizeof(void *));
        for (int i = 0; i < c->nout; i++) {
            size_t bytes = (size_t)c->out_n[i] * fc_dtype_size(c->out_dt[i]);
            copy[i] = xcalloc(bytes, 1);
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

static void free_outs(const Case *c, void **o) {
    if (!o) return;
    for (int i = 0; i < c->nout; i++) free(o[i]);
    free(o);
}

/* Compares one run's outputs with the oracle: "" when they agree, else why not. */
static void compare(Case *c, void **got, char *why, size_t n) {
    why[0] = 0;
    if (c->cmp == CMP_SAMPLE) {
        const KirProgram *p = c->sample.prog;
        void **bufs = xcalloc((size_t)p->buffers.len, sizeof(void *));
        for (int b = 0; b < p->buffers.len; b++) {
            const KirBuffer *kb = &p->buffers.data[b];
            if (kb->kind == KIR_BUF_INPUT) bufs[b] = c->in[kb->index];
            if (kb->kind == KIR_BUF_OUTPUT) bufs[b] = got[kb->index];
        }
        char msg[512];
        long bad = ks_compare(p, bufs, c->sample_want, c->sample.rtol, msg, sizeof msg);
        if (bad) snprintf(why, n, "%ld elements differ from the reference; first: %s", bad, msg);
        free(bufs);
        return;
    }
    for (int i = 0; i < c->nout; i++) {
        FcTensor *g = NULL, *w = NULL;
        int64_t dims[1] = {c->out_n[i]};
        size_t bytes = (size_t)c->out_n[i] * fc_dtype_size(c->out_dt[i]);
        double abs_err = 0, rel = 0;
        bool ok = fc_tensor_new(ref_dev, c->out_dt[i], 1, dims, &g) == FC_OK &&
                  fc_tensor_new(ref_dev, c->out_dt[i], 1, dims, &w) == FC_OK &&
                  fc_tensor_copy_from_host(g, got[i], bytes) == FC_OK &&
                  fc_tensor_copy_from_host(w, c->want[i], bytes) == FC_OK &&
                  fc_tensor_compare(g, w, &abs_err, &rel) == FC_OK;
        if (!ok) snprintf(why, n, "output %d: comparison failed", i);
        else if (!(rel <= c->tol[i])) {
            /* say where: the first element that is off by more than the tolerance */
            int64_t at = -1;
            double gv = 0, wv = 0, maxref = 0;
            for (int64_t j = 0; j < c->out_n[i]; j++) {
                double r = ks_get(c->out_dt[i], c->want[i], j);
                if (isfinite(r) && fabs(r) > maxref) maxref = fabs(r);
            }
            for (int64_t j = 0; j < c->out_n[i] && at < 0; j++) {
                gv = ks_get(c->out_dt[i], got[i], j);
                wv = ks_get(c->out_dt[i], c->want[i], j);
                bool same_nf = (isnan(gv) && isnan(wv)) || (isinf(gv) && gv == wv);
                if (!same_nf && (!isfinite(gv) || !isfinite(wv) || fabs(gv - wv) > c->tol[i] * maxref)) at = j;
            }
            snprintf(why, n, "output %d: max error / max |ref| = %.3g over the tolerance %.3g (element %lld: got %.9g, want %.9g)",
                     i, rel, c->tol[i], (long long)at, gv, wv);
        }
        fc_tensor_free(g);
        fc_tensor_free(w);
        if (why[0]) return;
    }
}

/* Runs a case forward and in reverse, checks everything; returns "" or the failure. */
static void check_case(Case *c, char *why, size_t n) {
    RunResult r[2];
    void **outs[2] = {NULL, NULL};
    why[0] = 0;
    for (int rev = 0; rev < 2 && !why[0]; rev++) {
        bool ran = run_case(c, rev, &outs[rev], &r[rev]);
        const char *order = rev ? "reverse order" : "forward order";
        if (c->cmp == CMP_SELFTEST) {
            if (!ran && !c->expect_msg) snprintf(why, n, "%s: %s", order, r[rev].msg);
            else if (ran && r[rev].status != 0 && !c->expect_msg)
                snprintf(why, n, "%s: failed with %d: %s", order, r[rev].status, r[rev].msg);
            else if (c->expect_msg && (ran && r[rev].status == 0))
                snprintf(why, n, "%s: expected the failure \"%s\", but it passed", order, c->expect_msg);
            else if (c->expect_msg && !strstr(r[rev].msg, c->expect_msg))
                snprintf(why, n, "%s: expected a failure with \"%s\", got: %s", order, c->expect_msg, r[rev].msg);
            else if (c->expect_msg && rev == 0)
                printf("         reported: %s\n", r[rev].msg);
            continue;
        }
        if (!ran) { snprintf(why, n, "%s: %s", order, r[rev].msg); break; }
        if (r[rev].status != c->want_status) {
            snprintf(why, n, "%s: the forward returned %d (want %d)%s%s", order, r[rev].status, c->want_status,
                     r[rev].msg[0] ? ": " : "", r[rev].msg);
            break;
        }
        compare(c, outs[rev], why, n);
        if (why[0]) {
            char tmp[1024];
            snprintf(tmp, sizeof tmp, "%s", why);
            snprintf(why, n, "%s: %s", order, tmp);
        }
    }
    if (!why[0] && c->cmp != CMP_SELFTEST)
        for (int i = 0; i < c->nout; i++)
            if (memcmp(outs[0][i], outs[1][i], (size_t)c->out_n[i] * fc_dtype_size(c->out_dt[i])) != 0) {
                int64_t j = 0;
                size_t es = fc_dtype_size(c->out_dt[i]);
                while (memcmp((char *)outs[0][i] + j * (int64_t)es, (char *)outs[1][i] + j * (int64_t)es, es) == 0) j++;
                snprintf(why, n, "output %d differs between forward and reverse order at element %lld (%.9g vs %.9g)", i,
                         (long long)j, ks_get(c->out_dt[i], outs[0][i], j), ks_get(c->out_dt[i], outs[1][i], j));
                break;
            }
    free_outs(c, outs[0]);
    free_outs(c, outs[1]);
}

/* ---- planted bugs -------------------------------------------------------------------------------- */
/* The text of the kernel whose header comment says `kind <kind>` and that contains `need`:
 * [*b, *e) (from its comment to the end of its body). */
static bool find_kernel(const char *cu, const char *kind, const char *need, const char **b, const char **e) {
    char key[64];
    snprintf(key, sizeof key, ": kind %s,", kind);
    for (const char *p = strstr(cu, key); p; p = strstr(p + 1, key)) {
        const char *body = strstr(p, "\n{\n");
        const char *end = body ? strstr(body, "\n}\n") : NULL;
        if (!end) return false;
        const char *hit = strstr(body, need);
        if (hit && hit < end) { *b = p; *e = end; return true; }
    }
    return false;
}

/* cu with [at, at + cut) replaced by ins (a fresh string). */
static char *splice(const char *cu, const char *at, size_t cut, const char *ins) {
    size_t pre = (size_t)(at - cu), n = strlen(cu) - cut + strlen(ins);
    char *s = xcalloc(n + 1, 1);
    memcpy(s, cu, pre);
    strcpy(s + pre, ins);
    strcat(s, at + cut);
    return s;
}

static Case *clone_case(const Case *from, const char *name, char *cu, const char *planted) {
    char *keep_name = xstrdup(name);
    Case tmp = *from;
    Case *c = new_case(keep_name);   /* may move `cases` */
    int id = c->id;
    *c = tmp;
    snprintf(c->name, sizeof c->name, "%s", keep_name);
    c->id = id;
    c->cu = cu;
    c->planted = planted;
    c->shares = true;
    free(keep_name);
    return c;
}

static void add_planted(int mm, int pw) {
    const char *b, *e;
    /* a barrier deleted from a tiled matrix product: the first, then the second one */
    for (int which = 0; which < 2 && mm >= 0; which++) {
        const char *cu = cases[mm].cu;
        if (!cu || !find_kernel(cu, "matmul", "__shared__", &b, &e)) { EXPECT(0, "no matmul kernel with shared memory found"); break; }
        const char *bar = strstr(b, "__syncthreads();");
        if (which == 1 && bar) bar = strstr(bar + 1, "__syncthreads();");
        if (!bar || bar > e) { EXPECT(0, "the matmul kernel has fewer than 2 barriers"); break; }
        char *bad = splice(cu, bar, strlen("__syncthreads();"), "/* planted: barrier removed */");
        clone_case(&cases[mm], which ? "planted_no_barrier_before_reload" : "planted_no_barrier_after_load", bad,
                   which ? "the __syncthreads before the next tile's loads deleted" : "the __syncthreads after the tile loads deleted");
    }
    /* an index off by one in a pointwise kernel: a store, then a load */
    for (int which = 0; which < 2 && pw >= 0; which++) {
        const char *cu = cases[pw].cu;
        if (!cu || !find_kernel(cu, "pointwise", which ? " = p0[" : "] = ", &b, &e)) {
            EXPECT(0, "no pointwise kernel with a %s found", which ? "load" : "store");
            break;
        }
        const char *at = strstr(strstr(b, "\n{\n"), which ? " = p0[" : "] = ");
        if (which) {   /* the load's closing bracket */
            at += strlen(" = p0[");
            int depth = 1;
            while (*at && depth) { if (*at == '[') depth++; if (*at == ']') depth--; if (depth) at++; }
        }
        char *bad = splice(cu, at, 0, " + 1");
        clone_case(&cases[pw], which ? "planted_load_index_plus_one" : "planted_store_index_plus_one", bad,
                   which ? "a load index + 1" : "a store index + 1");
    }
}

/* A block fused and eager, each as the AOT unit (matrix products through cuBLASLt) and, where
 * it differs, as the GPU-shaped unit (matrix products as generated kernels). */
static void add_block_variants(const char *name, const char *src, const Dim *dims, uint64_t seed) {
    for (int fuse = 1; fuse >= 0; fuse--) {
        Case *c = add_block(name, src, dims, fuse, seed);
        if (!c || !c->cu) continue;
        int id = c->id;
        if (!strstr(cases[id].cu, "fc_lt_gemm(")) continue;   /* no library call: the same kernels */
        char *gu = gpu_unit(src, name, dims, fuse);
        if (gu) {
            char vname[160];
            snprintf(vname, sizeof vname, "%s_gpu", cases[id].name);
            clone_case(&cases[id], vname, gu, NULL);
        }
    }
}

/* ---- the emulator's self-test ------------------------------------------------------------------------- */
static void add_selftests(void) {
    static const struct { const char *name; const char *expect; } t[] = {
        {"selftest_warp_ops", NULL},            /* 0 */
        {"selftest_atomics", NULL},             /* 1 */
        {"selftest_dynamic_shared", NULL},      /* 2 */
        {"selftest_block_3d", NULL},            /* 3 */
        {"selftest_divergent_barrier", "a barrier in divergent code"},
        {"selftest_different_barriers", "threads wait at different __syncthreads"},
        {"selftest_deadlock", "deadlock"},
        {"selftest_shared_past_end", "guard page after shared array"},
        {"selftest_mask_without_caller", "does not include the calling lane"},
        {"selftest_launch_bounds", "over its __launch_bounds__"},
        {"selftest_stack_overflow", "stack"},
        {"selftest_dynamic_shared_past_end", "dynamic shared memory"},
        {"selftest_different_shuffles", "meet at different warp operations"},
    };
    char *src = read_text(EMU_DIR "/selftest.cc");
    EXPECT(src, "cannot read %s", EMU_DIR "/selftest.cc");
    if (!src) return;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        Case *c = new_case(t[i].name);
        c->cmp = CMP_SELFTEST;
        c->selftest = (int)i;
        c->expect_msg = t[i].expect;
        c->cu = i == 0 ? src : NULL;   /* compiled once, in the last batch */
    }
}

/* ---- the graphs ----------------------------------------------------------------------------------- */
static const struct Example { const char *file; Dim dims[6]; } examples[] = {
    {"gpt2_attn", {{"B", 1}, {"T", 7}, {"C", 40}, {"H", 4}}},
    {"gpt2_block", {{"B", 2}, {"T", 5}, {"C", 24}, {"H", 2}}},
    {"gpt2_mlp", {{"B", 1}, {"T", 5}, {"C", 40}}},
    {"keywords", {{"N", 7}, {"M", 33}}},
    {"llama_layer", {{"B", 1}, {"T", 5}, {"C", 40}, {"H", 2}, {"F", 50}}},
    {"residual_ln_gelu", {{"N", 9}, {"C", 100}}},
    {"softmax_logits", {{"B", 3}, {"V", 1001}}},
};

/* Small blocks that, together, use every op of LANGUAGE.md and every dtype. */
static const struct Extra { const char *name; const char *src; } extras[] = {
    {"ops_unary",
     "block u(x: f32[3, 37]) -> f32[3, 37], f32[3, 37], f32[3, 37], f32[3, 37], f32[3, 37], f32[3, 37]\n"
     "{\n"
     "    p = abs(x) + 0.5\n"
     "    a = neg(x) + exp(x) + log(p) + sqrt(p) + rsqrt(p) + recip(p)\n"
     "    b = square(x) + tanh(x) + sigmoid(x) + relu(x) + silu(x) + erf(x)\n"
     "    c = sin(x) + cos(x) + gelu(x) + gelu(x, approx=\"tanh\")\n"
     "    return a, b, c, exp(-x * x), -x, abs(x)\n"
     "}\n"},
    {"ops_binary",
     "block bi(x: f32[4, 1, 9], y: f32[5, 9], i: i32[5, 9], j: i64[9]) -> f32[4, 5, 9], f32[4, 5, 9], bool[4, 5, 9], i32[5, 9], i64[5, 9], f32[5, 9]\n"
     "{\n"
     "    p = abs(y) + 0.25\n"
     "    a = x + y - x * y / p + pow(p, x) + maximum(x, y) - minimum(x, y)\n"
     "    b = where(x < y, x, y) + where(x >= y, 1.0, 2.0)\n"
     "    m = (x <= y) == (x > y * 0.5)\n"
     "    k = i * 3 + i - 7\n"
     "    l = j + i * 2\n"
     "    return a, b, m != (x == y), maximum(k, i), l, i / 3\n"
     "}\n"},
    {"ops_cast",
     "block ca(x: f32[6, 11], h: f16[11], b: bf16[6, 11], e: f8e4m3[11], f: f8e5m2[11], d: f64[6, 11]) ->\n"
     "    f16[6, 11], bf16[6, 11], f8e4m3[6, 11], f8e5m2[6, 11], i32[6, 11], i64[6, 11], bool[6, 11], f64[6, 11], f32[6, 11]\n"
     "{\n"
     "    s = x * 300.0\n"
     "    return cast(s, f16) + h, b * 2.0 + cast(x, bf16), cast(s, f8e4m3) + e, cast(s * 100.0, f8e5m2) + f, cast(s, i32), cast(d * 1e3, i64), cast(x, bool), d * 2.0 + cast(x, f64), cast(h, f32) + cast(b, f32)\n"
     "}\n"},
    {"ops_reduce",
     "block re(x: f32[5, 7, 33]) -> f32[5, 7], f32[5, 1, 33], f32[7], f32[], f32[5, 7, 33], f32[5, 7, 33], f32[5, 7, 33]\n"
     "{\n"
     "    return sum(x, axis=-1), mean(x, axis=1, keepdim=true), max(x, axis=[0, 2]), min(x), softmax(x, axis=0), log_softmax(x, axis=-1), x - mean(x, axis=-1, keepdim=true)\n"
     "}\n"},
    {"ops_norm",
     "block no(x: f32[3, 4, 50], g: f32[50], b: f32[50], g2: f32[4, 50]) -> f32[3, 4, 50], f32[3, 4, 50], f32[3, 4, 50], f32[3, 4, 50]\n"
     "{\n"
     "    return layernorm(x, g, b, eps=1e-5), rmsnorm(x, g), layernorm(x, axis=[1, 2]), rmsnorm(x, g2, axis=[-2, -1])\n"
     "}\n"},
    {"ops_shape",
     "block sh(x: f32[2, 3, 10], t: f32[7, 5], ids: i64[4, 2], ids32: i32[3]) -> f32[3, 2, 10], f32[2, 3, 20], f32[2, 3, 5],\n"
     "    f32[2, 3, 3], f32[4, 2, 5], f32[3, 5], i32[6, 4], f32[2, 4, 10], f32[6, 10], f32[2, 3, 2]\n"
     "{\n"
     "    a, b = split(x, 2, axis=-1)\n"
     "    c, d, e = split(x, [3, 3, 4], axis=-1)\n"
     "    return transpose(x, [1, 0, 2]), concat([x, -x], axis=-1), a * b, slice(x, -1, 1, 8, 3) + d, gather(t, ids), gather(t, ids32), iota([6, 4], 1) + iota([6, 4], 0, dtype=i32), broadcast(slice(x, 1, 0, 1), [2, 4, 10]) + full([2, 4, 10], 1.5), reshape(x, [-1, 10]), slice(e, 2, -4, -1, 2) + slice(c, 2, 0, 2)\n"
     "}\n"},
    {"ops_matmul",
     "block mm(a: f32[2, 3, 17, 37], b: f32[37, 19], v: f32[37], w: f32[3, 19, 1], one: f32[1, 1]) -> f32[2, 3, 17, 19], f32[2, 3, 17], f32[2, 3, 17, 1], f32[1, 1]\n"
     "{\n"
     "    c = a @ b\n"
     "    return c, a @ v, c @ w, one @ one\n"
     "}\n"},
    {"ops_attention",
     "block at(q: f32[2, 3, 6, 8], k: f32[2, 3, 9, 8], v: f32[2, 3, 9, 5], s: f32[2, 6, 9]) -> f32[2, 3, 6, 5], f32[2, 3, 6, 5], f32[2, 6, 9]\n"
     "{\n"
     "    return attention(q, k, v), attention(q, k, v, causal=true, scale=0.3), softmax(causal_mask(s))\n"
     "}\n"},
    {"ops_narrow",
     "block na(x: bf16[5, 40], w: bf16[40, 21], g: f16[40], y: f16[5, 40]) -> bf16[5, 21], f16[5, 40], bf16[5], f32[5, 40]\n"
     "{\n"
     "    h = layernorm(x, eps=1e-5)\n"
     "    return h @ w, rmsnorm(y, g), sum(x, axis=-1), softmax(cast(y, f32) * 2.0)\n"
     "}\n"},
    {"ops_size_one",
     "block one(x: f32[1, 1], y: f32[1], z: f32[1, 5, 1]) -> f32[1, 1], f32[1], f32[1, 5, 1], f32[1, 1], f32[]\n"
     "{\n"
     "    return softmax(x), layernorm(y), z * x + y, x @ x, sum(z)\n"
     "}\n"},
    {"ops_pointwise_chain",
     "block pw(x: f32[37, 5]) -> f32[37, 5]\n"
     "{\n"
     "    return x * 2.0 + 1.0\n"
     "}\n"},
};

int main(void) {
    double t0 = now_s();
    const char *env_cxx = getenv("FUSEC_EMU_CXX");
    cxx = env_cxx && env_cxx[0] ? env_cxx : FUSEC_CXX;
    {
        char probe[600];
        snprintf(probe, sizeof probe, "%s --version > /dev/null 2>&1", cxx);
        if (system(probe) != 0) {
            printf("SKIP: no C++ compiler (%s)\n", cxx);
            return 77;
        }
    }
    /* in $TMPDIR, else in the build tree (not /tmp: it may be mounted noexec, and dlopen needs exec) */
    snprintf(workdir, sizeof workdir, "%s/fusec_emu.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : FUSEC_BINARY_DIR);
    if (!mkdtemp(workdir)) { perror("mkdtemp"); return 1; }
    if (fc_device_open(FC_DEVICE_REFERENCE, 0, &ref_dev) != FC_OK) { fprintf(stderr, "no reference device\n"); return 1; }

    /* ---- the cases ---- */
    for (int i = 0; i < KS_NUM_SAMPLES; i++) add_sample(i);
    int mm = -1, pw = -1;
    for (size_t e = 0; e < sizeof examples / sizeof examples[0]; e++) {
        char path[512];
        snprintf(path, sizeof path, "%s/examples/%s.tf", FUSEC_SOURCE_DIR, examples[e].file);
        char *src = read_text(path);
        EXPECT(src, "cannot read %s", path);
        if (!src) continue;
        int first = ncases;
        add_block_variants(examples[e].file, src, examples[e].dims, 100 + e);
        for (int i = first; i < ncases; i++)   /* K = 40: three tiles of 16, the last partial */
            if (!strcmp(cases[i].name, "gpt2_mlp_fused_gpu")) mm = i;
        free(src);
    }
    for (size_t e = 0; e < sizeof extras / sizeof extras[0]; e++) {
        int first = ncases;
        add_block_variants(extras[e].name, extras[e].src, NULL, 500 + e);
        for (int i = first; i < ncases; i++) {
            if (!strcmp(cases[i].name, "ops_pointwise_chain_fused")) pw = i;
        }
    }
    int first_planted = ncases;
    add_planted(mm, pw);
    int nplanted = ncases - first_planted;
    add_selftests();
    double t_cases = now_s();

    /* ---- compile: the runtime once, then batches of units ---- */
    int nbatch = 0;
    for (int i = 0; i < ncases; i++) {
        if (cases[i].cmp == CMP_SELFTEST) continue;
        cases[i].batch = i / CASES_PER_BATCH;
        if (cases[i].batch + 1 > nbatch) nbatch = cases[i].batch + 1;
    }
    int self_batch = nbatch++;
    for (int i = 0; i < ncases; i++)
        if (cases[i].cmp == CMP_SELFTEST) cases[i].batch = self_batch;
    Job *jobs = xcalloc((size_t)nbatch + 1, sizeof(Job));
    const char *flags = "-std=c++17 -O1 -g0 -fPIC -fno-strict-aliasing -I" EMU_DIR;
    snprintf(jobs[0].log, sizeof jobs[0].log, "%s/rt.log", workdir);
    snprintf(jobs[0].cmd, sizeof jobs[0].cmd, "%s %s -Wall -Wextra -Werror -c %s/fusec_cuda_emu.cc -o %s/rt.o > %s 2>&1", cxx,
             flags, EMU_DIR, workdir, jobs[0].log);
    for (int bt = 0; bt < nbatch; bt++) {
        StrBuf o = {0};
        sb_puts(&o, "#include \"fusec_cuda_emu.h\"\n#include \"fusec_cublaslt_emu.h\"\n");
        for (int i = 0; i < ncases; i++) {
            Case *c = &cases[i];
            if (c->batch != bt || !c->cu) continue;
            if (c->cmp == CMP_SELFTEST) {
                char why[256];
                sb_puts(&o, "#line 1 \"" EMU_DIR "/selftest.cc\"\n");
                if (!rewrite_cu(c->cu, true, &o, why, sizeof why)) EXPECT(0, "selftest: rewrite: %s", why);
                continue;
            }
            /* line numbers (compiler messages, the emulator's reports) are those of NAME.cu,
             * written beside the batch: the rewrite keeps every line where it was */
            char why[256], cu_path[400];
            snprintf(cu_path, sizeof cu_path, "%s/%s.cu", workdir, c->name);
            EXPECT(write_text(cu_path, c->cu), "cannot write %s", cu_path);
            sb_printf(&o, "\n/* ==== case %d: %s ==== */\nnamespace fcemu_c%d {\n#line 1 \"%s.cu\"\n", c->id, c->name,
                      c->id, c->name);
            if (!rewrite_cu(c->cu, false, &o, why, sizeof why)) { EXPECT(0, "%s: rewrite: %s", c->name, why); c->cu = NULL; }
            long lines = 1;
            for (const char *q = o.data; q && *q; q++) lines += *q == '\n';
            sb_printf(&o, "\n#line %ld \"batch%d.cc\"\n} /* namespace fcemu_c%d */\n", lines + 1, bt, c->id);
            put_wrapper(&o, c);
        }
        char path[400];
        snprintf(path, sizeof path, "%s/batch%d.cc", workdir, bt);
        EXPECT(!o.failed && write_text(path, o.data), "cannot write %s", path);
        sb_free(&o);
        Job *j = &jobs[bt + 1];
        snprintf(j->log, sizeof j->log, "%s/batch%d.log", workdir, bt);
        snprintf(j->cmd, sizeof j->cmd, "%s %s -c %s -o %s/batch%d.o > %s 2>&1", cxx, flags, path, workdir, bt, j->log);
    }
    run_jobs(jobs, nbatch + 1, 2);
    for (int k = 0; k <= nbatch; k++) {
        if (jobs[k].rc == 0) continue;
        char *log = read_text(jobs[k].log);
        EXPECT(0, "compile failed: %s\n%.6000s", jobs[k].cmd, log ? log : "");
        free(log);
    }
    for (int bt = 0; bt < nbatch && jobs[0].rc == 0; bt++) {
        if (jobs[bt + 1].rc != 0) continue;
        char so[400], cmd[1400];
        snprintf(so, sizeof so, "%s/batch%d.so", workdir, bt);
        snprintf(cmd, sizeof cmd, "%s -shared -Wl,-Bsymbolic -o %s %s/batch%d.o %s/rt.o -lpthread", cxx, so, workdir, bt, workdir);
        if (system(cmd) != 0) { EXPECT(0, "link failed: %s", cmd); continue; }
        void *lib = dlopen(so, RTLD_NOW | RTLD_LOCAL);
        EXPECT(lib, "dlopen %s: %s", so, dlerror());
        for (int i = 0; i < ncases; i++)
            if (cases[i].batch == bt) cases[i].lib = lib;
    }
    double t_compile = now_s();

    /* ---- run and check ---- */
    int passed = 0, caught = 0;
    for (int i = 0; i < ncases; i++) {
        Case *c = &cases[i];
        if (!c->lib || (!c->cu && c->cmp != CMP_SELFTEST)) { EXPECT(0, "%s: not built", c->name); continue; }
        char why[4096];
        double ts = now_s();
        check_case(c, why, sizeof why);
        double dt = now_s() - ts;
        if (c->planted) {
            EXPECT(why[0], "%s (%s): the harness did not catch the planted bug", c->name, c->planted);
            if (why[0]) { caught++; printf("caught   %-36s %s: %s\n", c->name, c->planted, why); }
        } else {
            EXPECT(!why[0], "%s: %s", c->name, why);
            if (!why[0]) { passed++; printf("ok       %-36s %.2f s\n", c->name, dt); }
        }
    }
    double t_end = now_s();
    printf("cuda emulation: %d of %d cases passed, %d of %d planted bugs caught; building cases %.1f s, "
           "compiling %.1f s, running %.1f s\n",
           passed, ncases - nplanted, caught, nplanted, t_cases - t0, t_compile - t_cases, t_end - t_compile);

    /* ---- cleanup ---- */
    const char *keep = getenv("FUSEC_EMU_KEEP");
    if ((keep && keep[0] == '1') || failures) printf("work folder kept: %s\n", workdir);
    else {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", workdir);
        if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", workdir);
    }
    for (int i = 0; i < ncases; i++) {
        Case *c = &cases[i];
        bool clone = c->shares;
        if (c->cmp == CMP_SELFTEST) { if (c->selftest == 0) free(c->cu); continue; }
        free(c->cu);
        if (clone) continue;   /* shares the rest with its original */
        for (int k = 0; k < c->nin; k++) free(c->in[k]);
        for (int k = 0; k < c->nout; k++) free(c->want[k]);
        free(c->in); free(c->want); free(c->tol); free(c->in_dt); free(c->out_dt); free(c->in_n); free(c->out_n);
        if (c->cmp == CMP_SAMPLE) {
            ks_free_buffers(c->sample.prog, c->sample_want);
            ks_sample_free(&c->sample);
        }
    }
    free(cases);
    free(jobs);
    fc_device_free(ref_dev);
    if (failures) { fprintf(stderr, "%d failure(s)\n", failures); return 1; }
    return 0;
}
