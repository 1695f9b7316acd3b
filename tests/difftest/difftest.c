/* difftest.c: the random-graph differential tester (entry point main; the generator is gen.c).
 *
 * For each of --count graphs (seeded by --seed): generate a random .tf program (gen.c),
 * compile it fused and eager (fc_options_set_fuse), run both on FC_DEVICE_CPU and the
 * source graph on FC_DEVICE_REFERENCE with the same seeded inputs (fc_block_random_input,
 * the inputs `fusec run --random SEED` uses), outputs poisoned (NaN; 0x5A bytes for
 * integers and bools) before every run, and compare fused vs reference, eager vs reference
 * and fused vs eager with fc_tensor_compare against fc_block_check_tolerances (the
 * per-dtype rule widened by the rounding spread of 16/8-bit intermediates on these inputs,
 * docs/tolerances.md). Every --nvrtc-every'th graph is also compiled to PTX for sm_80 and
 * sm_90 through NVRTC (fc_block_emit; skipped where NVRTC is absent). Every --emu-every'th
 * graph that passed is also run as CUDA on the CPU emulation (emu_graphs: its fused, eager and
 * GPU-shaped AOT units, through the runner shared with test_cuda_emu, tests/cuda_emu/
 * emu_runner.c), after the CPU checks, the units of many graphs compiled together.
 *
 * Each graph runs in a forked child (unless --no-fork), so a crash, a sanitizer report or a
 * hang (--timeout) is one failed graph, not a dead tester. A mismatch is first checked for
 * ill-conditioning: the reference runs two noisy variants of the program (dt_render_noisy:
 * rounding-level noise injected into every computed float value); if that moves the output by at
 * least 1/4 of the observed error, the graph is counted as ill-conditioned, not failed (the
 * generator keeps this rare: 3 of the 300 graphs of difftest_cpu). Any other failure (frontend error on a generated
 * program = generator bug, internal error, crash, run error, mismatch, NVRTC error, CUDA
 * emulation mismatch or error) is
 * minimized (delete statements, turn values into inputs, drop outputs and inputs, shrink
 * dims, while the same failure persists) and written as a .tf reproducer to --out (default
 * $FUSEC_DIFFTEST_OUT, else BUILD/difftest-failures), whose header says what failed, the
 * numbers, and the `fusec run` command that shows it.
 *
 * --self-check perturbs one element of the fused result before comparing: every graph must
 * then fail and be minimized to a reproducer, proving that the harness can fail;
 * --self-check-emu does the same to the emulated fused unit's result.
 * Exit status: 0 all graphs passed (ill-conditioned ones allowed), 1 a failure, 2 usage.
 */
#include "difftest.h"
#include "emu_runner.h"
#include "host.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef FUSEC_BINARY_DIR
#define FUSEC_BINARY_DIR "."
#endif
#ifndef FUSEC_SOURCE_DIR
#define FUSEC_SOURCE_DIR "."
#endif
#ifndef FUSEC_CXX
#define FUSEC_CXX "c++"
#endif
#define DT_EMU_DIR FUSEC_SOURCE_DIR "/tests/cuda_emu"
#define DT_EMU_PER_BATCH 6     /* units per C++ file, as test_cuda_emu */
#define DT_EMU_CHUNK 48        /* graphs emulated per runner (bounds memory on long runs) */

#if defined(__SANITIZE_ADDRESS__)
#define DT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DT_ASAN 1
#endif
#endif
#ifndef DT_ASAN
#define DT_ASAN 0
#endif

/* ---- options ------------------------------------------------------------------------------- */
typedef struct Opts {
    uint64_t seed;
    int count;
    int first;             /* index of the first graph (--first: rerun graph G of a seed) */
    int nvrtc_every;       /* 0: never */
    int emu_every;         /* 0: never; else every K'th graph through the CUDA emulation */
    bool self_check_emu;   /* corrupt one element of every emulated fused result */
    int emu_min_checks;    /* minimization budget for an emulation failure (a C++ compile each) */
    const char *out;
    bool fork;
    bool minimize;
    bool self_check;
    bool verbose;
    int jobs;
    int timeout_s;
    int max_minimize;      /* failures minimized per run; the rest are written as generated */
    const char *replay;    /* run this .tf file instead of generated ones */
    uint64_t input_seed;
    bool print_only;
    bool verify_noisy;     /* only compile every graph's noisy variants (a check of gen.c) */
    DtGenConfig gen;
} Opts;

/* ---- one run: compile, run three ways, compare ----------------------------------------------- */
enum { DR_OK, DR_ILLCOND, DR_GENBUG, DR_COMPILE, DR_PROGRAM, DR_RUN, DR_MISMATCH, DR_NVRTC, DR_EMU_MISMATCH, DR_EMU_ERROR,
       DR_CRASH, DR_TIMEOUT, DR_NCLASS };
static const char *const cls_name[DR_NCLASS] = {"ok", "ill-conditioned", "generator bug (frontend rejected a generated program)",
                                               "compile error", "program (JIT) error", "run error", "mismatch", "NVRTC error",
                                               "CUDA emulation mismatch", "CUDA emulation error", "crash", "timeout"};
static const char *const who_name[] = {"fused", "eager", "reference"};
static const char *const pair_name[] = {"fused CPU vs reference", "eager CPU vs reference", "fused CPU vs eager CPU"};

typedef struct Result {
    int cls;
    int which;             /* compile/program/run: 0 fused 1 eager 2 reference; mismatch: pair */
    int status;            /* FcStatus, or the signal for a crash */
    int output;            /* mismatching output */
    char out_name[64];
    char out_type[96];
    double rel, abs, tol, sens;
    double spread;         /* the output's rounding spread (fc_block_check_tolerances) */
    int64_t worst;         /* flat index of the worst element */
    double got, want;
    int nvrtc;             /* 0 not tried, 1 compiled, 2 skipped (NVRTC unavailable) */
    int emu;               /* 0 not tried, 1 emulated, 2 skipped (no C++ compiler) */
    int emu_units;         /* units emulated */
    char msg[3072];
} Result;


static void poison(FcTensor *t, FcDtype dt, size_t nbytes) {
    void *buf = malloc(nbytes ? nbytes : 1);
    if (!buf) return;
    if (dt == FC_F32 || dt == FC_F64 || dt == FC_F16 || dt == FC_BF16 || dt == FC_F8E4M3 || dt == FC_F8E5M2) {
        int64_t n = (int64_t)(nbytes / fc_dtype_size(dt));
        for (int64_t i = 0; i < n; i++) rt_host_store(dt, buf, i, NAN);
    } else {
        memset(buf, 0x5A, nbytes);
    }
    fc_tensor_copy_from_host(t, buf, nbytes);
    free(buf);
}

static void *to_host(const FcTensor *t) {
    size_t n = fc_tensor_nbytes(t);
    void *b = malloc(n ? n : 1);
    if (b) fc_tensor_copy_to_host(t, b, n);
    return b;
}

/* the element with the largest difference (or the first non-finite disagreement) */
static void worst_element(FcDtype dt, const FcTensor *got, const FcTensor *ref, Result *r) {
    void *g = to_host(got), *f = to_host(ref);
    int64_t n = (int64_t)(fc_tensor_nbytes(got) / fc_dtype_size(dt));
    double best = -1;
    r->worst = 0;
    for (int64_t i = 0; g && f && i < n; i++) {
        double a = rt_host_load(dt, g, i), b = rt_host_load(dt, f, i);
        double d;
        if (isfinite(a) && isfinite(b)) d = fabs(a - b);
        else if ((isnan(a) && isnan(b)) || a == b) d = 0;
        else d = INFINITY;
        if (d > best) { best = d; r->worst = i; r->got = a; r->want = b; }
        if (isinf(d)) break;
    }
    free(g);
    free(f);
}

static void msgf(Result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void msgf(Result *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    size_t l = strlen(r->msg);
    vsnprintf(r->msg + l, sizeof r->msg - l, fmt, ap);
    va_end(ap);
}

static void out_desc(FcBlock *b, int j, Result *r) {
    FcTensorInfo ti;
    if (fc_block_output_info(b, j, &ti) != FC_OK) return;
    snprintf(r->out_name, sizeof r->out_name, "%s", ti.name ? ti.name : "?");
    size_t k = (size_t)snprintf(r->out_type, sizeof r->out_type, "%s[", fc_dtype_name(ti.dtype));
    for (int i = 0; i < ti.rank && k < sizeof r->out_type; i++)
        k += (size_t)snprintf(r->out_type + k, sizeof r->out_type - k, "%s%lld", i ? ", " : "", (long long)ti.dims[i]);
    if (k < sizeof r->out_type) snprintf(r->out_type + k, sizeof r->out_type - k, "]");
}

static FcStatus compile(const char *src, int fuse, const char *arch, FcBlock **b) {
    FcOptions *o = NULL;
    FcStatus s = fc_options_new(&o);
    if (s == FC_OK) s = fc_options_set_fuse(o, fuse);
    if (s == FC_OK && arch) s = fc_options_set_arch(o, arch);
    if (s == FC_OK) s = fc_compile_string(src, "difftest.tf", o, b);
    fc_options_free(o);
    return s;
}

typedef struct Run {
    FcBlock *blk[2];       /* fused, eager */
    FcDevice *cpu, *ref;
    FcProgram *prog[3];    /* fused CPU, eager CPU, reference */
    int nin, nout;
    FcTensor **in, **out[3], **tmp;
} Run;

static void run_free(Run *u) {
    for (int k = 0; k < 3; k++) {
        for (int j = 0; u->out[k] && j < u->nout; j++) fc_tensor_free(u->out[k][j]);
        free(u->out[k]);
        fc_program_free(u->prog[k]);
    }
    for (int i = 0; u->in && i < u->nin; i++) fc_tensor_free(u->in[i]);
    for (int j = 0; u->tmp && j < u->nout; j++) fc_tensor_free(u->tmp[j]);
    free(u->in);
    free(u->tmp);
    fc_device_free(u->cpu);
    fc_device_free(u->ref);
    fc_block_free(u->blk[0]);
    fc_block_free(u->blk[1]);
}

/* Runs the oracle on the noisy variants of the program (dt_render_noisy: rounding-level noise
 * injected after every computed float value) and returns the largest relative change of output
 * j: how much rounding noise alone moves it. NAN when no noisy variant is available or one does
 * not compile (the conditioning is then unknown). */
static double sensitivity(Run *u, int j, const char *const *noisy) {
    double worst = 0;
    for (int trial = 0; trial < 2; trial++) {
        if (!noisy || !noisy[trial]) return NAN;
        FcBlock *b = NULL;
        FcProgram *pr = NULL;
        FcStatus st = compile(noisy[trial], 1, NULL, &b);
        if (st == FC_OK) st = fc_program_new(b, u->ref, &pr);
        if (st == FC_OK && fc_block_num_outputs(b) != u->nout) st = FC_ERR_INTERNAL;
        for (int k = 0; st == FC_OK && k < u->nout; k++) {
            FcTensorInfo ti;
            fc_block_output_info(u->blk[0], k, &ti);
            poison(u->tmp[k], ti.dtype, fc_tensor_nbytes(u->tmp[k]));
        }
        if (st == FC_OK) st = fc_program_run(pr, u->in, u->tmp);
        double a = NAN, r = NAN;
        if (st == FC_OK) fc_tensor_compare(u->tmp[j], u->out[2][j], &a, &r);
        fc_program_free(pr);
        fc_block_free(b);
        if (st != FC_OK) return NAN;
        if (r > worst) worst = r;
    }
    return worst;
}

/* The whole check of one program; fills *r. */
static void check_program(const char *src, const char *const *noisy, uint64_t in_seed, bool nvrtc, bool self_check, Result *r) {
    memset(r, 0, sizeof *r);
    Run u = {0};
    FcStatus s;
    for (int k = 0; k < 2; k++) {
        s = compile(src, k == 0, NULL, &u.blk[k]);
        if (s != FC_OK) {
            const char *diag = u.blk[k] ? fc_block_diagnostics(u.blk[k]) : "";
            r->cls = s == FC_ERR_INPUT && diag[0] ? DR_GENBUG : DR_COMPILE;
            r->which = k;
            r->status = s;
            msgf(r, "%s compile: %s: %s%s%s", who_name[k], fc_status_name(s), u.blk[k] ? fc_block_last_error(u.blk[k]) : "",
                 diag[0] ? "\n" : "", diag);
            goto done;
        }
    }
    if ((s = fc_device_open(FC_DEVICE_CPU, 0, &u.cpu)) != FC_OK || (s = fc_device_open(FC_DEVICE_REFERENCE, 0, &u.ref)) != FC_OK) {
        r->cls = DR_PROGRAM;
        r->status = s;
        msgf(r, "device: %s", fc_device_last_error(u.cpu ? u.cpu : u.ref));
        goto done;
    }
    for (int k = 0; k < 3; k++) {
        s = fc_program_new(u.blk[k == 1], k == 2 ? u.ref : u.cpu, &u.prog[k]);
        if (s != FC_OK) {
            r->cls = DR_PROGRAM;
            r->which = k;
            r->status = s;
            msgf(r, "%s program: %s: %s", who_name[k], fc_status_name(s),
                 u.prog[k] ? fc_program_last_error(u.prog[k]) : fc_block_last_error(u.blk[k == 1]));
            goto done;
        }
    }
    u.nin = fc_block_num_inputs(u.blk[0]);
    u.nout = fc_block_num_outputs(u.blk[0]);
    u.in = calloc((size_t)u.nin + 1, sizeof *u.in);
    u.tmp = calloc((size_t)u.nout + 1, sizeof *u.tmp);
    for (int k = 0; k < 3; k++) u.out[k] = calloc((size_t)u.nout + 1, sizeof *u.out[k]);
    if (!u.in || !u.tmp || !u.out[0] || !u.out[1] || !u.out[2]) { r->cls = DR_RUN; msgf(r, "out of memory"); goto done; }
    for (int i = 0; i < u.nin; i++) {
        FcTensorInfo ti;
        fc_block_input_info(u.blk[0], i, &ti);
        if ((s = fc_tensor_new(u.cpu, ti.dtype, ti.rank, ti.dims, &u.in[i])) != FC_OK ||
            (s = fc_block_random_input(u.blk[0], i, in_seed, u.in[i])) != FC_OK) {
            r->cls = DR_RUN;
            r->which = 2;
            r->status = s;
            msgf(r, "input %d: %s", i, fc_block_last_error(u.blk[0]));
            goto done;
        }
    }
    for (int j = 0; j < u.nout; j++) {
        FcTensorInfo ti;
        fc_block_output_info(u.blk[0], j, &ti);
        for (int k = 0; k < 3; k++) fc_tensor_new(k == 2 ? u.ref : u.cpu, ti.dtype, ti.rank, ti.dims, &u.out[k][j]);
        fc_tensor_new(u.ref, ti.dtype, ti.rank, ti.dims, &u.tmp[j]);
    }
    /* reference first, then fused, then eager; every output poisoned before every run */
    static const int order[3] = {2, 0, 1};
    for (int oi = 0; oi < 3; oi++) {
        int k = order[oi];
        for (int j = 0; j < u.nout; j++) {
            FcTensorInfo ti;
            fc_block_output_info(u.blk[0], j, &ti);
            poison(u.out[k][j], ti.dtype, fc_tensor_nbytes(u.out[k][j]));
        }
        s = fc_program_run(u.prog[k], u.in, u.out[k]);
        if (s != FC_OK) {
            r->cls = DR_RUN;
            r->which = k;
            r->status = s;
            msgf(r, "%s run: %s: %s", who_name[k], fc_status_name(s), fc_program_last_error(u.prog[k]));
            goto done;
        }
    }
    if (self_check) {
        /* corrupt one element of the fused result: the harness must see it */
        FcTensorInfo ti;
        fc_block_output_info(u.blk[0], 0, &ti);
        void *h = to_host(u.out[0][0]);
        int64_t n = (int64_t)(fc_tensor_nbytes(u.out[0][0]) / fc_dtype_size(ti.dtype));
        if (h && n > 0) {
            int64_t i = n / 2;
            double v = rt_host_load(ti.dtype, h, i);
            rt_host_store(ti.dtype, h, i, ti.dtype == FC_BOOL ? (v == 0) : isfinite(v) ? v + 1 + 0.5 * fabs(v) : 1.0);
            fc_tensor_copy_from_host(u.out[0][0], h, fc_tensor_nbytes(u.out[0][0]));
        }
        free(h);
    }
    /* the tolerances for these inputs, widened by the rounding spread of 16/8-bit
     * intermediates (both legal meanings; docs/tolerances.md) */
    double *tols = calloc((size_t)u.nout + 1, sizeof *tols), *spread = calloc((size_t)u.nout + 1, sizeof *spread);
    if (!tols || !spread) { free(tols); free(spread); r->cls = DR_RUN; msgf(r, "out of memory"); goto done; }
    if ((s = fc_block_check_tolerances(u.blk[0], u.in, tols, spread)) != FC_OK) {
        r->cls = DR_RUN;
        r->which = 2;
        r->status = s;
        msgf(r, "tolerances: %s: %s", fc_status_name(s), fc_block_last_error(u.blk[0]));
    }
    static const int pa[3] = {0, 1, 0}, pb[3] = {2, 2, 1};
    for (int p = 0; p < 3 && r->cls == DR_OK; p++) {
        for (int j = 0; j < u.nout; j++) {
            double tol = tols[j], ab = 0, rel = 0;
            fc_tensor_compare(u.out[pa[p]][j], u.out[pb[p]][j], &ab, &rel);
            if (!(rel <= tol)) {
                FcTensorInfo ti;
                fc_block_output_info(u.blk[0], j, &ti);
                r->cls = DR_MISMATCH;
                r->which = p;
                r->output = j;
                r->rel = rel;
                r->abs = ab;
                r->tol = tol;
                r->spread = spread[j];
                double base = 0;
                fc_block_output_tolerance(u.blk[0], j, &base);
                out_desc(u.blk[0], j, r);
                worst_element(ti.dtype, u.out[pa[p]][j], u.out[pb[p]][j], r);
                r->sens = sensitivity(&u, j, noisy);
                if (r->sens * 4 >= rel) r->cls = DR_ILLCOND;
                msgf(r, "%s, output %d '%s' %s: max_rel %.3g (tol %.3g = %.3g + 2 x rounding spread %.3g), max_abs %.3g; worst element [%lld]: %s %.9g, %s %.9g; oracle change under rounding noise %.3g",
                     pair_name[p], j, r->out_name, r->out_type, rel, tol, base, spread[j], ab, (long long)r->worst,
                     who_name[pa[p]], r->got, who_name[pb[p]], r->want, r->sens);
                break;
            }
        }
    }
    free(tols);
    free(spread);
    if (nvrtc && r->cls == DR_OK) {
        static const char *arch[2] = {"sm_80", "sm_90"};
        r->nvrtc = 1;
        for (int a = 0; a < 2 && r->cls == DR_OK && r->nvrtc == 1; a++) {
            FcBlock *b = NULL;
            s = compile(src, 1, arch[a], &b);
            char *data = NULL;
            size_t len = 0;
            if (s == FC_OK) s = fc_block_emit(b, FC_EMIT_PTX, &data, &len);
            if (s == FC_ERR_UNAVAILABLE) r->nvrtc = 2;
            else if (s != FC_OK) {
                r->cls = DR_NVRTC;
                r->status = s;
                msgf(r, "NVRTC %s: %s: %.2500s", arch[a], fc_status_name(s), b ? fc_block_last_error(b) : "");
            }
            fc_buffer_free(data);
            fc_block_free(b);
        }
    }
done:
    run_free(&u);
}

/* ---- isolation: one child process per check ------------------------------------------------------ */
typedef struct Child { pid_t pid; int fd; } Child;

static Child start_check(const char *src, const char *const *noisy, uint64_t in_seed, bool nvrtc, const Opts *o) {
    Child c = {-1, -1};
    int fds[2];
    if (pipe(fds) != 0) return c;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        alarm((unsigned)o->timeout_s);
        Result r;
        check_program(src, noisy, in_seed, nvrtc, o->self_check, &r);
        const char *p = (const char *)&r;
        size_t left = sizeof r;
        while (left > 0) {
            ssize_t w = write(fds[1], p, left);
            if (w <= 0) break;
            p += w;
            left -= (size_t)w;
        }
        close(fds[1]);
        exit(0);
    }
    close(fds[1]);
    if (pid < 0) { close(fds[0]); return c; }
    c.pid = pid;
    c.fd = fds[0];
    return c;
}

static void finish_check(Child c, Result *r) {
    memset(r, 0, sizeof *r);
    if (c.pid < 0) { r->cls = DR_CRASH; snprintf(r->msg, sizeof r->msg, "fork failed: %s", strerror(errno)); return; }
    size_t got = 0;
    char *p = (char *)r;
    for (;;) {
        ssize_t n = read(c.fd, p + got, sizeof *r - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += (size_t)n;
        if (got == sizeof *r) break;
    }
    close(c.fd);
    int st = 0;
    while (waitpid(c.pid, &st, 0) < 0 && errno == EINTR) {}
    if (WIFSIGNALED(st)) {
        memset(r, 0, sizeof *r);
        r->cls = WTERMSIG(st) == SIGALRM ? DR_TIMEOUT : DR_CRASH;
        r->status = WTERMSIG(st);
        snprintf(r->msg, sizeof r->msg, "child killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    } else if (got != sizeof *r || (WIFEXITED(st) && WEXITSTATUS(st) != 0)) {
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        memset(r, 0, sizeof *r);
        r->cls = DR_CRASH;
        r->status = 1000 + code;
        snprintf(r->msg, sizeof r->msg, "child exited with status %d (a sanitizer report or an abort; see stderr)", code);
    }
}

static void run_check(const char *src, const char *const *noisy, uint64_t in_seed, bool nvrtc, const Opts *o, Result *r) {
    if (!o->fork) { check_program(src, noisy, in_seed, nvrtc, o->self_check, r); return; }
    finish_check(start_check(src, noisy, in_seed, nvrtc, o), r);
}

/* the two noisy variants of p (freed with free_noisy) */
static void make_noisy(const DtProg *p, uint64_t seed, char **noisy) {
    noisy[0] = dt_render_noisy(p, dt_mix(seed ^ 0xA11CEull));
    noisy[1] = dt_render_noisy(p, dt_mix(seed ^ 0xB0Bull));
}
static void free_noisy(char **noisy) { free(noisy[0]); free(noisy[1]); noisy[0] = noisy[1] = NULL; }

static bool is_failure(int cls) { return cls != DR_OK && cls != DR_ILLCOND; }

/* ---- the CUDA emulation of a sample of the graphs (tests/cuda_emu/emu_runner.c) ---------------- */
/* The emulated graphs' AOT units (fused and eager, cg_cuda_aot, and where a matrix product is a
 * cuBLASLt call also the GPU-shaped units) are compiled by the host C++ compiler in batches
 * (DT_EMU_PER_BATCH units a file, --jobs compiles at a time) and run forward and in reverse
 * thread order, each run in a child process; both must match the reference interpreter within
 * fc_block_check_tolerances and each other bit for bit. Runs in the parent, after the CPU
 * checks: the batches span graphs. */
static EmuRunner g_emu;
static int g_emu_state;          /* 0 not started, 1 ready, 2 no C++ compiler, -1 cannot start */
static int g_emu_names;          /* unique case names */
static double g_emu_run_s;       /* seconds in emu_check */
static char g_emu_why[1024];
static bool g_emu_contract;      /* --emu-contract: the units compiled with contraction everywhere */

static int emu_start(void) {
    if (g_emu_state) return g_emu_state;
    int st = emu_init(&g_emu, FUSEC_CXX, DT_EMU_DIR, FUSEC_BINARY_DIR, g_emu_why, sizeof g_emu_why);
    g_emu_state = st == 0 ? 1 : st == 77 ? 2 : -1;
    g_emu.contract = g_emu_contract;
    return g_emu_state;
}

static double g_emu_compile_s;
static int g_emu_compiles;

static void emu_stop(bool keep) {
    if (g_emu_state == 1) {
        g_emu_compile_s += g_emu.t_compile;
        g_emu_compiles += g_emu.n_compiles;
        emu_free(&g_emu, keep);
    }
    g_emu_state = 0;
}

/* How much rounding noise alone moves output j of the oracle (as sensitivity(), on the emulated
 * case's inputs and references); NAN when unknown. */
static double emu_sensitivity(const EmuCase *c, int j, const char *const *noisy) {
    double worst = 0;
    for (int trial = 0; trial < 2; trial++) {
        if (!noisy || !noisy[trial]) return NAN;
        FcBlock *b = NULL;
        FcProgram *pr = NULL;
        FcTensor *in[DT_MAXIN + 1] = {0}, *out[DT_MAXOUT + 1] = {0}, *want = NULL;
        FcStatus st = compile(noisy[trial], 1, NULL, &b);
        if (st == FC_OK) st = fc_program_new(b, g_emu.ref, &pr);
        if (st == FC_OK && (fc_block_num_inputs(b) != c->nin || fc_block_num_outputs(b) != c->nout || c->nin > DT_MAXIN ||
                            c->nout > DT_MAXOUT))
            st = FC_ERR_INTERNAL;
        for (int i = 0; st == FC_OK && i < c->nin; i++) {
            FcTensorInfo ti;
            fc_block_input_info(b, i, &ti);
            st = fc_tensor_new(g_emu.ref, ti.dtype, ti.rank, ti.dims, &in[i]);
            if (st == FC_OK) st = fc_tensor_copy_from_host(in[i], c->in[i], fc_tensor_nbytes(in[i]));
        }
        for (int k = 0; st == FC_OK && k < c->nout; k++) {
            FcTensorInfo ti;
            fc_block_output_info(b, k, &ti);
            st = fc_tensor_new(g_emu.ref, ti.dtype, ti.rank, ti.dims, &out[k]);
            if (st == FC_OK) poison(out[k], ti.dtype, fc_tensor_nbytes(out[k]));
            if (st == FC_OK && k == j) {
                st = fc_tensor_new(g_emu.ref, ti.dtype, ti.rank, ti.dims, &want);
                if (st == FC_OK) st = fc_tensor_copy_from_host(want, c->want[j], fc_tensor_nbytes(want));
            }
        }
        if (st == FC_OK) st = fc_program_run(pr, in, out);
        double a = NAN, r = NAN;
        if (st == FC_OK) fc_tensor_compare(out[j], want, &a, &r);
        for (int i = 0; i < c->nin; i++) fc_tensor_free(in[i]);
        for (int k = 0; k < c->nout; k++) fc_tensor_free(out[k]);
        fc_tensor_free(want);
        fc_program_free(pr);
        fc_block_free(b);
        if (st != FC_OK) return NAN;
        if (r > worst) worst = r;
    }
    return worst;
}

typedef struct EmuJob {
    const char *src;
    const char *const *noisy;   /* the two noisy variants, or NULL */
    uint64_t in_seed;
    unsigned mask;              /* EMU_V_* bits: the variants to emulate */
    int ids[EMU_NVARIANTS];
    Result *r;                  /* zeroed by the caller */
} EmuJob;

/* Emulates the n programs (their units compiled together) and fills each job's result:
 * r->emu 1 emulated, 2 skipped (no C++ compiler); a failure's class, variant (which) and
 * message. An emulation mismatch with the oracle that rounding noise explains is DR_ILLCOND. */
static void emu_graphs(const Opts *o, EmuJob *jobs, int n) {
    for (int k = 0; k < n; k++) {
        Result *r = jobs[k].r;
        for (int v = 0; v < EMU_NVARIANTS; v++) jobs[k].ids[v] = -1;
        int st = emu_start();
        if (st == 2) { r->emu = 2; continue; }
        if (st != 1) {
            r->cls = DR_EMU_ERROR;
            r->which = -1;
            msgf(r, "the emulation runner cannot start: %s", g_emu_why);
            continue;
        }
        char name[32], why[2048];
        snprintf(name, sizeof name, "g%d", g_emu_names++);
        if (!emu_add_block_variants(&g_emu, name, jobs[k].src, NULL, jobs[k].in_seed, 0, jobs[k].mask, jobs[k].ids, why,
                                    sizeof why)) {
            r->cls = DR_EMU_ERROR;
            r->which = -1;
            msgf(r, "making the CUDA units: %.2900s", why);
        }
        if (o->self_check_emu && jobs[k].ids[EMU_V_FUSED] >= 0) g_emu.cases[jobs[k].ids[EMU_V_FUSED]].corrupt = true;
    }
    if (g_emu_state == 1) emu_build(&g_emu, DT_EMU_PER_BATCH, o->jobs < 2 ? 2 : o->jobs);
    for (int k = 0; k < n; k++) {
        Result *r = jobs[k].r;
        for (int v = 0; v < EMU_NVARIANTS; v++) {
            int id = jobs[k].ids[v];
            if (id < 0) continue;
            r->emu = 1;
            r->emu_units++;
            if (r->cls != DR_OK) continue;
            EmuReport rep;
            double t = emu_now_s();
            EmuVerdict ev = emu_check(&g_emu, id, &rep);
            g_emu_run_s += emu_now_s() - t;
            if (ev == EMU_PASS) continue;
            r->which = v;
            if (ev == EMU_ERROR) {
                r->cls = DR_EMU_ERROR;
                msgf(r, "the %s unit, emulated: %.2900s", emu_variant_names[v], rep.why);
                continue;
            }
            r->cls = DR_EMU_MISMATCH;
            r->output = rep.output;
            r->rel = rep.rel;
            r->tol = rep.tol;
            r->worst = rep.at;
            r->got = rep.got;
            r->want = rep.want;
            bool vs_oracle = !rep.between_orders && rep.rel >= 0;
            r->sens = vs_oracle ? emu_sensitivity(&g_emu.cases[id], rep.output, jobs[k].noisy) : 0;
            if (vs_oracle && r->sens * 4 >= rep.rel) r->cls = DR_ILLCOND;
            msgf(r, "the %s unit, emulated, vs the reference: %.2800s; oracle change under rounding noise %.3g", emu_variant_names[v],
                 rep.why, r->sens);
        }
    }
}

/* ---- minimization ---------------------------------------------------------------------------------- */
static bool same_failure(const Result *a, const Result *b) {
    if (a->cls != b->cls) return false;
    switch (a->cls) {
    case DR_MISMATCH: case DR_EMU_MISMATCH: return a->which == b->which && !isnan(b->sens);
    case DR_EMU_ERROR: return a->which == b->which;
    case DR_COMPILE: case DR_PROGRAM: case DR_RUN: return a->which == b->which && a->status == b->status;
    case DR_CRASH: return a->status == b->status;
    default: return true;
    }
}

typedef struct Min {
    const Opts *o;
    const Result *want;
    uint64_t in_seed;
    bool nvrtc;
    int checks, budget;
    Result last;
    bool shrinking;
    bool emu;              /* an emulation failure: check by emulating the variants in emu_mask */
    unsigned emu_mask;
} Min;

static bool still_fails(Min *m, const DtProg *p) {
    if (m->checks >= m->budget) return false;
    m->checks++;
    char *src = dt_render(p, NULL), *noisy[2] = {NULL, NULL};
    if (!src) return false;
    if (!m->shrinking) make_noisy(p, m->in_seed, noisy);
    Result r;
    if (m->emu) {
        memset(&r, 0, sizeof r);
        EmuJob j = {src, (const char *const *)noisy, m->in_seed, m->emu_mask, {0}, &r};
        emu_graphs(m->o, &j, 1);
    } else {
        run_check(src, (const char *const *)noisy, m->in_seed, m->nvrtc, m->o, &r);
    }
    free(src);
    free_noisy(noisy);
    /* while dims shrink the tracked types are stale and there is no noisy variant: accept a
     * mismatch only if it is far beyond the tolerance */
    if (m->shrinking && (r.cls == DR_MISMATCH || r.cls == DR_EMU_MISMATCH) && isnan(r.sens) && r.rel > 1e-2 && r.rel > 100 * r.tol)
        r.sens = 0;
    if (!same_failure(&r, m->want)) return false;
    m->last = r;
    return true;
}

static bool used_later(const DtProg *p, int v, int from) {
    for (int i = from; i < p->ns; i++)
        for (int k = 0; k < p->s[i].nops; k++) if (p->s[i].ops[k] == v) return true;
    for (int i = 0; i < p->nout; i++) if (p->out[i] == v) return true;
    return false;
}

static void remove_stmt(DtProg *p, int i) {
    memmove(&p->s[i], &p->s[i + 1], sizeof p->s[0] * (size_t)(p->ns - i - 1));
    p->ns--;
}

/* statement i deleted; its used results become inputs of the same type */
static bool delete_stmt(DtProg *p, int i) {
    DtStmt s = p->s[i];
    for (int r = 0; r < s.nres; r++) {
        if (!used_later(p, s.res[r], i + 1)) continue;
        if (p->nin >= DT_MAXIN) return false;
        p->v[s.res[r]].input = true;
        p->in[p->nin++] = s.res[r];
    }
    remove_stmt(p, i);
    return true;
}

static void drop_unused_inputs_of(DtProg *p, DtProg *q) {
    *q = *p;
    q->nin = 0;
    for (int i = 0; i < p->nin; i++)
        if (used_later(p, p->in[i], 0)) q->in[q->nin++] = p->in[i];
}

static void minimize(DtProg *p, Min *m) {
    DtProg *c = malloc(sizeof *c);
    if (!c) return;
    bool progress = true;
    for (int round = 0; progress && round < 6; round++) {
        progress = false;
        /* fewer outputs */
        for (int i = p->nout - 1; i >= 0 && p->nout > 1; i--) {
            *c = *p;
            memmove(&c->out[i], &c->out[i + 1], sizeof c->out[0] * (size_t)(c->nout - i - 1));
            c->nout--;
            if (still_fails(m, c)) { *p = *c; progress = true; }
        }
        /* an output replaced by another statement result (earlier ones first: shorter programs) */
        for (int k = 0; k < p->nout; k++) {
            bool better = false;
            for (int i = 0; i < p->ns && !better; i++) {
                for (int r = 0; r < p->s[i].nres && !better; r++) {
                    int v = p->s[i].res[r];
                    bool dup = false;
                    for (int kk = 0; kk < p->nout; kk++) dup |= p->out[kk] == v;
                    if (dup || v >= p->out[k]) continue;
                    *c = *p;
                    c->out[k] = v;
                    if (still_fails(m, c)) { *p = *c; progress = better = true; }
                }
            }
        }
        /* dead statements, all at once */
        *c = *p;
        bool any = false;
        for (int i = c->ns - 1; i >= 0; i--) {
            bool live = false;
            for (int r = 0; r < c->s[i].nres; r++) live |= used_later(c, c->s[i].res[r], i + 1);
            if (!live) { remove_stmt(c, i); any = true; }
        }
        if (any && c->ns > 0 && still_fails(m, c)) { *p = *c; progress = true; }
        /* each statement: delete it, its results becoming inputs */
        for (int i = p->ns - 1; i >= 0; i--) {
            if (p->ns <= 1) break;
            *c = *p;
            bool out_of_last = false;
            for (int r = 0; r < c->s[i].nres; r++)
                for (int k = 0; k < c->nout; k++) out_of_last |= c->out[k] == c->s[i].res[r];
            if (out_of_last && c->ns == 1) continue;
            if (!delete_stmt(c, i)) continue;
            /* an output that became an input: return something computed instead if possible */
            bool ok = true;
            for (int k = 0; k < c->nout; k++) if (c->v[c->out[k]].input) ok = false;
            if (!ok) continue;
            if (still_fails(m, c)) { *p = *c; progress = true; }
        }
        /* each operand that is computed: replace it by a new input of its type */
        for (int i = 0; i < p->ns; i++) {
            for (int k = 0; k < p->s[i].nops; k++) {
                int v = p->s[i].ops[k];
                if (p->v[v].input || p->nv >= DT_MAXV || p->nin >= DT_MAXIN) continue;
                *c = *p;
                int nvid = c->nv++;
                c->v[nvid] = c->v[v];
                c->v[nvid].input = true;
                c->in[c->nin++] = nvid;
                for (int kk = 0; kk < c->s[i].nops; kk++) if (c->s[i].ops[kk] == v) c->s[i].ops[kk] = nvid;
                if (still_fails(m, c)) { *p = *c; progress = true; }
            }
        }
        /* unused inputs */
        drop_unused_inputs_of(p, c);
        if (c->nin != p->nin && still_fails(m, c)) { *p = *c; progress = true; }
        /* inputs merged: an input replaced by an earlier input of the same type */
        for (int i = p->nin - 1; i > 0; i--) {
            for (int j = 0; j < i; j++) {
                const DtVal *a = &p->v[p->in[i]], *b = &p->v[p->in[j]];
                if (a->dt != b->dt || a->rank != b->rank || memcmp(a->d, b->d, sizeof(int64_t) * (size_t)a->rank) != 0) continue;
                *c = *p;
                for (int s = 0; s < c->ns; s++)
                    for (int k = 0; k < c->s[s].nops; k++) if (c->s[s].ops[k] == p->in[i]) c->s[s].ops[k] = p->in[j];
                memmove(&c->in[i], &c->in[i + 1], sizeof c->in[0] * (size_t)(c->nin - i - 1));
                c->nin--;
                if (still_fails(m, c)) { *p = *c; progress = true; break; }
            }
        }
    }
    /* shrink input dims last (intermediate types are not re-derived after this): one dim of one
     * input, or every occurrence of a size in every input; templates holding literal sizes may
     * make a candidate invalid, which then does not fail the same way and is dropped */
    m->shrinking = true;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < p->nin; i++) {
            for (int a = 0; a < p->v[p->in[i]].rank; a++) {
                int64_t d = p->v[p->in[i]].d[a];
                int64_t cand[3] = {1, d / 2, d - 1};
                for (int k = 0; k < 3; k++) {
                    if (cand[k] < 1 || cand[k] >= d) continue;
                    *c = *p;
                    if (pass == 0) c->v[c->in[i]].d[a] = cand[k];
                    else
                        for (int ii = 0; ii < c->nin; ii++)
                            for (int aa = 0; aa < c->v[c->in[ii]].rank; aa++)
                                if (c->v[c->in[ii]].d[aa] == d) c->v[c->in[ii]].d[aa] = cand[k];
                    if (still_fails(m, c)) { *p = *c; break; }
                }
            }
        }
    }
    free(c);
}

/* ---- reporting ------------------------------------------------------------------------------------- */
static void describe(const Result *r, char *buf, size_t n) {
    if (r->cls == DR_MISMATCH || r->cls == DR_ILLCOND) snprintf(buf, n, "%s: %s", cls_name[r->cls], r->msg);
    else snprintf(buf, n, "%s: %s", cls_name[r->cls], r->msg);
}

static int mkdirs(const char *path) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *q = tmp + 1; *q; q++)
        if (*q == '/') { *q = 0; mkdir(tmp, 0777); *q = '/'; }
    if (mkdir(tmp, 0777) != 0 && errno != EEXIST) return -1;
    return 0;
}

/* Writes the reproducer; returns its path (static buffer) or NULL. */
static const char *write_repro(const Opts *o, const DtProg *p, const Result *r, uint64_t gseed, int gi, int orig_stmts) {
    static char path[4096];
    if (mkdirs(o->out) != 0) { fprintf(stderr, "difftest: cannot create %s: %s\n", o->out, strerror(errno)); return NULL; }
    bool emu = r->cls == DR_EMU_MISMATCH || r->cls == DR_EMU_ERROR;
    snprintf(path, sizeof path, "%s/difftest-%llu-%d%s.tf", o->out, (unsigned long long)o->seed, gi, emu ? "-emu" : "");
    char hdr[8192], what[4000];
    describe(r, what, sizeof what);
    /* comment every line of the message */
    char cm[6000];
    size_t k = 0;
    for (const char *c = what; *c && k + 4 < sizeof cm; c++) {
        cm[k++] = *c;
        if (*c == '\n' && c[1]) { cm[k++] = '#'; cm[k++] = ' '; }
    }
    cm[k] = 0;
    while (k > 0 && cm[k - 1] == '\n') cm[--k] = 0;
    bool eager = (r->cls == DR_MISMATCH && r->which == 1) ||
                 ((r->cls == DR_COMPILE || r->cls == DR_PROGRAM || r->cls == DR_RUN) && r->which == 1) ||
                 (emu && (r->which == EMU_V_EAGER || r->which == EMU_V_EAGER_GPU));
    char how[600];
    if (emu)
        snprintf(how, sizeof how, "difftest --replay FILE --emu-every 1%s --input-seed %llu\n"
                 "#  the unit: fusec FILE --emit cuda%s%s (docs/cuda_emu.md)",
                 g_emu_contract ? " --emu-contract" : "", (unsigned long long)gseed, eager ? " --no-fuse" : "",
                 r->which == EMU_V_FUSED_GPU || r->which == EMU_V_EAGER_GPU ? "; GPU-shaped: matrix products as generated kernels" : "");
    else
        snprintf(how, sizeof how, "%s%llu%s\n#        or: difftest --replay FILE --input-seed %llu",
                 r->cls == DR_NVRTC ? "fusec FILE --emit ptx --arch sm_80 (and sm_90) -o /dev/null  # inputs unused; seed "
                                    : "fusec run FILE --device cpu --check --random ",
                 (unsigned long long)gseed, eager ? " --no-fuse" : "", (unsigned long long)gseed);
    snprintf(hdr, sizeof hdr,
             "# difftest reproducer (tests/difftest, docs/difftest.md)\n"
             "# graph %d of --seed %llu; %d statements minimized to %d%s\n"
             "# %s\n"
             "# input-seed=%llu\n"
             "# reproduce: %s\n",
             gi, (unsigned long long)o->seed, orig_stmts, p->ns,
             o->self_check && !emu ? " (--self-check: the fused result was corrupted on purpose)"
             : o->self_check_emu && emu ? " (--self-check-emu: the emulated fused result was corrupted on purpose)" : "",
             cm, (unsigned long long)gseed, how);
    char *src = dt_render(p, hdr);
    FILE *f = src ? fopen(path, "w") : NULL;
    if (!f) { free(src); fprintf(stderr, "difftest: cannot write %s\n", path); return NULL; }
    fputs(src, f);
    fclose(f);
    free(src);
    return path;
}

/* Prints a failed graph, minimizes it (the first --max-minimize of a run) and writes the
 * reproducer; true if it was written. */
static bool report_failure(const Opts *o, const DtProg *p, const char *src, const Result *r, uint64_t gs, int gi, int *minimized) {
    int orig = p->ns;
    printf("\n=== graph %d (input seed %llu): %s\n%s\n--- program:\n%s", gi, (unsigned long long)gs, cls_name[r->cls], r->msg, src);
    DtProg *mp = malloc(sizeof *mp);
    if (!mp) return false;
    *mp = *p;
    Result fin = *r;
    if (o->minimize && *minimized < o->max_minimize) {
        bool emu = r->cls == DR_EMU_MISMATCH || r->cls == DR_EMU_ERROR;
        Min m = {o, r, gs, r->cls == DR_NVRTC, 0, emu ? o->emu_min_checks : 250, *r, false, emu,
                 emu && r->which >= 0 ? 1u << r->which : EMU_ALL_VARIANTS};
        double tm = emu_now_s();
        minimize(mp, &m);
        fin = m.last;
        (*minimized)++;
        printf("--- minimized in %d checks, %.1f s: %d -> %d statements\n", m.checks, emu_now_s() - tm, orig, mp->ns);
    }
    const char *path = write_repro(o, mp, &fin, gs, gi, orig);
    if (path) {
        char *msrc = dt_render(mp, NULL);
        printf("--- reproducer %s:\n%s--- %s\n", path, msrc ? msrc : "", fin.msg);
        free(msrc);
    }
    free(mp);
    fflush(stdout);
    return path != NULL;
}

/* ---- main -------------------------------------------------------------------------------------------- */
static int usage(void) {
    fprintf(stderr,
            "usage: difftest [--seed S | --seed-from STRING] [--count N] [--first G] [--nvrtc-every K] [--emu-every K] [--out DIR] [--jobs J]\n"
            "                [--exclude OP,OP...] [--min-stmts N] [--max-stmts N] [--timeout S]\n"
            "                [--no-minimize] [--max-minimize N] [--emu-min-checks N] [--emu-contract] [--no-fork]\n"
            "                [--self-check] [--self-check-emu] [--verbose]\n"
            "                [--print] [--replay FILE.tf [--input-seed S]]\n"
            "ops for --exclude:");
    for (int i = 0; i < DT_OP_COUNT; i++) fprintf(stderr, " %s", dt_op_names[i]);
    fprintf(stderr, "\n");
    return 2;
}

static bool parse_u64(const char *s, uint64_t *v) {
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || !*s || *end || *s == '-') return false;
    *v = x;
    return true;
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) { free(b); b = NULL; }
    if (b) b[n] = 0;
    fclose(f);
    return b;
}

static int replay(const Opts *o) {
    char *src = read_file(o->replay);
    if (!src) { fprintf(stderr, "difftest: cannot read %s\n", o->replay); return 2; }
    uint64_t seed = o->input_seed;
    const char *hs = strstr(src, "# input-seed=");
    if (hs && o->input_seed == UINT64_MAX) {
        char num[32];
        size_t n = strcspn(hs + 13, "\n");
        snprintf(num, sizeof num, "%.*s", (int)(n < 31 ? n : 31), hs + 13);
        if (!parse_u64(num, &seed)) seed = UINT64_MAX;
    }
    if (seed == UINT64_MAX) seed = 0;
    Result r;
    run_check(src, NULL, seed, o->nvrtc_every > 0, o, &r);
    if (o->emu_every > 0 && r.cls == DR_OK) {
        Result er;
        memset(&er, 0, sizeof er);
        EmuJob j = {src, NULL, seed, EMU_ALL_VARIANTS, {0}, &er};
        emu_graphs(o, &j, 1);
        if (er.emu == 2) printf("%s: CUDA emulation skipped: %s\n", o->replay, g_emu_why);
        else printf("%s: CUDA emulation of %d unit(s): %s\n", o->replay, er.emu_units, cls_name[er.cls]);
        const char *keep = getenv("FUSEC_EMU_KEEP");
        emu_stop((is_failure(er.cls) && !o->self_check_emu) || (keep && keep[0] == '1'));
        if (er.cls != DR_OK) r = er;
    }
    free(src);
    char what[4000];
    describe(&r, what, sizeof what);
    printf("%s (input seed %llu): %s\n", o->replay, (unsigned long long)seed, what);
    return is_failure(r.cls) ? 1 : 0;
}

int main(int argc, char **argv) {
    static char outbuf[4096];
    Opts o = {.seed = 20240601, .count = DT_ASAN ? 40 : 300, .nvrtc_every = 10, .emu_min_checks = 60, .fork = true, .minimize = true, .jobs = 1,
              .timeout_s = DT_ASAN ? 300 : 60, .max_minimize = 5, .input_seed = UINT64_MAX,
              .gen = {.min_stmts = 3, .max_stmts = 25}};
    const char *env = getenv("FUSEC_DIFFTEST_OUT");
    snprintf(outbuf, sizeof outbuf, "%s", env && *env ? env : FUSEC_BINARY_DIR "/difftest-failures");
    o.out = outbuf;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t x;
#define NEEDV() do { if (!v) return usage(); i++; } while (0)
        if (!strcmp(a, "--seed")) { NEEDV(); if (!parse_u64(v, &o.seed)) return usage(); }
        else if (!strcmp(a, "--seed-from")) {
            /* a seed derived from a string (CI: the commit hash), so that every commit explores
             * new graphs; printed first thing, so that a failure reproduces with --seed */
            NEEDV();
            if (!*v) return usage();
            uint64_t h = 1469598103934665603ull;  /* FNV-1a */
            for (const char *c = v; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
            o.seed = dt_mix(h) % 1000000000ull;
            printf("difftest: seed %llu from \"%s\" (reproduce with --seed %llu)\n", (unsigned long long)o.seed, v,
                   (unsigned long long)o.seed);
        }
        else if (!strcmp(a, "--count")) { NEEDV(); if (!parse_u64(v, &x) || x > 10000000) return usage(); o.count = (int)x; }
        else if (!strcmp(a, "--first")) { NEEDV(); if (!parse_u64(v, &x) || x > 100000000) return usage(); o.first = (int)x; }
        else if (!strcmp(a, "--nvrtc-every")) { NEEDV(); if (!parse_u64(v, &x) || x > 1000000) return usage(); o.nvrtc_every = (int)x; }
        else if (!strcmp(a, "--emu-every")) { NEEDV(); if (!parse_u64(v, &x) || x > 1000000) return usage(); o.emu_every = (int)x; }
        else if (!strcmp(a, "--emu-min-checks")) { NEEDV(); if (!parse_u64(v, &x) || x > 100000) return usage(); o.emu_min_checks = (int)x; }
        else if (!strcmp(a, "--out")) { NEEDV(); o.out = v; }
        else if (!strcmp(a, "--jobs")) { NEEDV(); if (!parse_u64(v, &x) || x < 1 || x > 64) return usage(); o.jobs = (int)x; }
        else if (!strcmp(a, "--timeout")) { NEEDV(); if (!parse_u64(v, &x) || x < 1 || x > 100000) return usage(); o.timeout_s = (int)x; }
        else if (!strcmp(a, "--min-stmts")) { NEEDV(); if (!parse_u64(v, &x) || x < 1 || x > 60) return usage(); o.gen.min_stmts = (int)x; }
        else if (!strcmp(a, "--max-stmts")) { NEEDV(); if (!parse_u64(v, &x) || x < 1 || x > 60) return usage(); o.gen.max_stmts = (int)x; }
        else if (!strcmp(a, "--max-minimize")) { NEEDV(); if (!parse_u64(v, &x) || x > 100000) return usage(); o.max_minimize = (int)x; }
        else if (!strcmp(a, "--input-seed")) { NEEDV(); if (!parse_u64(v, &o.input_seed)) return usage(); }
        else if (!strcmp(a, "--replay")) { NEEDV(); o.replay = v; }
        else if (!strcmp(a, "--exclude")) {
            NEEDV();
            char *dup = strdup(v);
            for (char *t = strtok(dup, ","); t; t = strtok(NULL, ",")) {
                int op = dt_op_by_name(t);
                if (op == DT_OP_COUNT) { fprintf(stderr, "difftest: unknown op '%s' in --exclude\n", t); free(dup); return usage(); }
                o.gen.exclude[op] = true;
            }
            free(dup);
        }
        else if (!strcmp(a, "--no-minimize")) o.minimize = false;
        else if (!strcmp(a, "--no-fork")) o.fork = false;
        else if (!strcmp(a, "--emu-contract")) g_emu_contract = true;
        else if (!strcmp(a, "--self-check")) o.self_check = true;
        else if (!strcmp(a, "--self-check-emu")) o.self_check_emu = true;
        else if (!strcmp(a, "--verbose")) o.verbose = true;
        else if (!strcmp(a, "--print")) o.print_only = true;
        else if (!strcmp(a, "--verify-noisy")) o.verify_noisy = true;
        else return usage();
#undef NEEDV
    }
    if (o.gen.max_stmts < o.gen.min_stmts) o.gen.max_stmts = o.gen.min_stmts;
    if (!o.fork) o.jobs = 1;
    if (o.self_check_emu && o.emu_every == 0) o.emu_every = 1;
#if defined(__x86_64__) || defined(__i386__)
    if (g_emu_contract && !__builtin_cpu_supports("fma")) {
        fprintf(stderr, "difftest: --emu-contract needs a CPU with FMA instructions\n");
        return 2;
    }
#endif
    if (o.replay) return replay(&o);
    if (o.verify_noisy) {
        int bad = 0;
        DtProg *p = malloc(sizeof *p);
        for (int gi = o.first; p && gi < o.first + o.count; gi++) {
            uint64_t gs = dt_mix(o.seed * 1000003ull + (uint64_t)gi);
            dt_generate(p, gs, &o.gen);
            char *nz[2] = {NULL, NULL};
            make_noisy(p, gs, nz);
            for (int k = 0; k < 2; k++) {
                FcBlock *b = NULL;
                if (compile(nz[k], 1, NULL, &b) != FC_OK) {
                    if (bad++ < 3) printf("graph %d: noisy variant %d does not compile:\n%s\n%s\n", gi, k, fc_block_diagnostics(b), nz[k]);
                }
                fc_block_free(b);
            }
            free_noisy(nz);
        }
        free(p);
        printf("difftest --verify-noisy: %d of %d noisy variants failed to compile\n", bad, 2 * o.count);
        return bad ? 1 : 0;
    }

    double t0 = emu_now_s();
    int counts[DR_NCLASS] = {0}, nvrtc_done = 0, nvrtc_skipped = 0, minimized = 0, stmts = 0;
    int op_graphs[DT_OP_COUNT] = {0};
    int rowview_graphs = 0;
    int self_written = 0;
    int nemu = 0, *emu_gi = calloc((size_t)(o.emu_every > 0 ? o.count / o.emu_every + 2 : 1), sizeof *emu_gi);
    DtProg *progs = calloc((size_t)o.jobs, sizeof *progs);
    char **srcs = calloc((size_t)o.jobs, sizeof *srcs);
    char **noisyv = calloc((size_t)o.jobs * 2, sizeof *noisyv);
    Child *kids = calloc((size_t)o.jobs, sizeof *kids);
    if (!progs || !srcs || !kids || !noisyv || !emu_gi) { fprintf(stderr, "difftest: out of memory\n"); return 1; }
    printf("difftest: seed %llu, %d graphs, nvrtc every %d, CUDA emulation every %d, %d job(s), out %s%s%s\n",
           (unsigned long long)o.seed, o.count, o.nvrtc_every, o.emu_every, o.jobs, o.out,
           o.self_check ? ", SELF-CHECK (fused results corrupted on purpose)" : "",
           o.self_check_emu ? ", SELF-CHECK-EMU (emulated fused results corrupted on purpose)" : "");
    fflush(stdout);
    /* graphs are started in order, up to `jobs` at once, and collected in order */
    int next = 0, done = 0;
    while (done < o.count) {
        while (next < o.count && next - done < o.jobs) {
            int slot = next % o.jobs;
            uint64_t gs = dt_mix(o.seed * 1000003ull + (uint64_t)(o.first + next));
            dt_generate(&progs[slot], gs, &o.gen);
            free(srcs[slot]);
            srcs[slot] = dt_render(&progs[slot], NULL);
            if (o.print_only) {
                printf("# graph %d (input seed %llu; %d row-view pattern(s))\n%s\n", o.first + next, (unsigned long long)gs,
                       progs[slot].nrowview, srcs[slot]);
                next++;
                done++;
                continue;
            }
            bool nv = o.nvrtc_every > 0 && (o.first + next) % o.nvrtc_every == 0;
            free_noisy(&noisyv[2 * slot]);
            make_noisy(&progs[slot], gs, &noisyv[2 * slot]);
            if (o.fork) kids[slot] = start_check(srcs[slot], (const char *const *)&noisyv[2 * slot], gs, nv, &o);
            next++;
        }
        if (o.print_only) { if (done >= o.count) break; continue; }
        int slot = done % o.jobs, gi = o.first + done;
        uint64_t gs = dt_mix(o.seed * 1000003ull + (uint64_t)gi);
        bool nv = o.nvrtc_every > 0 && gi % o.nvrtc_every == 0;
        DtProg *p = &progs[slot];
        Result r;
        if (o.fork) finish_check(kids[slot], &r);
        else check_program(srcs[slot], (const char *const *)&noisyv[2 * slot], gs, nv, o.self_check, &r);
        done++;
        counts[r.cls]++;
        stmts += p->ns;
        bool seen[DT_OP_COUNT] = {0};
        for (int i = 0; i < p->ns; i++) seen[p->s[i].op] = true;
        for (int i = 0; i < DT_OP_COUNT; i++) op_graphs[i] += seen[i];
        rowview_graphs += p->nrowview > 0;
        if (r.nvrtc == 1) nvrtc_done++;
        if (r.nvrtc == 2) nvrtc_skipped++;
        if (o.verbose) printf("graph %d: %s\n%s", gi, cls_name[r.cls], srcs[slot]);
        if (r.cls == DR_ILLCOND && o.verbose) printf("graph %d: ill-conditioned, not counted: %s\n", gi, r.msg);
        if (r.cls == DR_OK && o.emu_every > 0 && gi % o.emu_every == 0) emu_gi[nemu++] = gi;
        if (!is_failure(r.cls)) continue;
        if (report_failure(&o, p, srcs[slot], &r, gs, gi, &minimized)) self_written++;
    }
    if (o.print_only) return 0;
    /* the CUDA emulation of the sampled graphs that passed, DT_EMU_CHUNK graphs per runner */
    double t_emu = emu_now_s();
    int emu_done = 0, emu_skipped = 0, emu_units = 0, emu_illcond = 0, emu_failed = 0, emu_written = 0;
    DtProg *ep = nemu ? calloc(DT_EMU_CHUNK, sizeof *ep) : NULL;
    if (nemu && !ep) { fprintf(stderr, "difftest: out of memory\n"); return 1; }
    for (int c0 = 0; c0 < nemu; c0 += DT_EMU_CHUNK) {
        int k = nemu - c0 < DT_EMU_CHUNK ? nemu - c0 : DT_EMU_CHUNK;
        EmuJob jobs[DT_EMU_CHUNK];
        Result er[DT_EMU_CHUNK];
        char *esrc[DT_EMU_CHUNK], *enoisy[2 * DT_EMU_CHUNK];
        for (int i = 0; i < k; i++) {
            uint64_t gs = dt_mix(o.seed * 1000003ull + (uint64_t)emu_gi[c0 + i]);
            dt_generate(&ep[i], gs, &o.gen);
            esrc[i] = dt_render(&ep[i], NULL);
            make_noisy(&ep[i], gs, &enoisy[2 * i]);
            memset(&er[i], 0, sizeof er[i]);
            jobs[i] = (EmuJob){esrc[i], (const char *const *)&enoisy[2 * i], gs, EMU_ALL_VARIANTS, {0}, &er[i]};
        }
        emu_graphs(&o, jobs, k);
        bool chunk_failed = false;
        for (int i = 0; i < k; i++) {
            Result *r = &er[i];
            int gi = emu_gi[c0 + i];
            if (r->emu == 1) { emu_done++; emu_units += r->emu_units; }
            if (r->emu == 2) emu_skipped++;
            if (r->cls == DR_ILLCOND) {
                emu_illcond++;
                if (o.verbose) printf("graph %d: emulation ill-conditioned, not counted: %s\n", gi, r->msg);
            }
            if (!is_failure(r->cls)) continue;
            counts[r->cls]++;
            emu_failed++;
            chunk_failed = true;
            uint64_t gs = dt_mix(o.seed * 1000003ull + (uint64_t)gi);
            if (report_failure(&o, &ep[i], esrc[i], r, gs, gi, &minimized)) emu_written++;
        }
        for (int i = 0; i < k; i++) { free(esrc[i]); free_noisy(&enoisy[2 * i]); }
        const char *keep = getenv("FUSEC_EMU_KEEP");
        emu_stop((chunk_failed && !o.self_check_emu) || (keep && keep[0] == '1'));
    }
    free(ep);
    t_emu = emu_now_s() - t_emu;
    double el = emu_now_s() - t0;
    int failures = 0;
    for (int c = 0; c < DR_NCLASS; c++) if (is_failure(c)) failures += counts[c];
    printf("\ndifftest: %d graphs (%d statements) in %.1f s: %d ok, %d ill-conditioned (not counted), %d failed\n", o.count, stmts, el,
           counts[DR_OK], counts[DR_ILLCOND], failures);
    for (int c = 2; c < DR_NCLASS; c++) if (counts[c]) printf("  %s: %d\n", cls_name[c], counts[c]);
    printf("  NVRTC: %d graphs compiled for sm_80 and sm_90, %d skipped (NVRTC unavailable)\n", nvrtc_done, nvrtc_skipped);
    if (o.emu_every > 0)
        printf("  CUDA emulation: %d graphs (%d units: fused, eager, GPU-shaped) in %.1f s (%d C++ compiles, %.1f s; running %.1f s), "
               "%d failed, %d ill-conditioned (not counted)%s%s\n",
               emu_done, emu_units, t_emu, g_emu_compiles, g_emu_compile_s, g_emu_run_s, emu_failed, emu_illcond,
               emu_skipped ? "; skipped: " : "", emu_skipped ? g_emu_why : "");
    printf("  graphs with a row reduction and a view returned beside it (gen.c g_rowview): %d\n", rowview_graphs);
    printf("  graphs using each op:");
    for (int i = 0; i < DT_OP_COUNT; i++) printf(" %s=%d", dt_op_names[i], op_graphs[i]);
    printf("\n");
    for (int i = 0; i < o.jobs; i++) { free(srcs[i]); free_noisy(&noisyv[2 * i]); }
    free(noisyv);
    free(srcs);
    free(progs);
    free(kids);
    free(emu_gi);
    if (o.self_check_emu) {
        /* every emulated graph must have been caught, and reproducers written; nothing else fails */
        bool ok = emu_done > 0 && counts[DR_EMU_MISMATCH] == emu_done && emu_written == emu_done && failures == emu_done;
        printf("difftest self-check-emu: %s (%d of %d corrupted emulated results caught, %d reproducers written)\n",
               ok ? "PASS" : "FAIL", counts[DR_EMU_MISMATCH], emu_done, emu_written);
        return ok ? 0 : 1;
    }
    if (o.self_check) {
        /* every graph must have been caught, and reproducers written */
        bool ok = counts[DR_MISMATCH] == o.count && self_written == o.count;
        printf("difftest self-check: %s (%d of %d corrupted results caught, %d reproducers written)\n", ok ? "PASS" : "FAIL",
               counts[DR_MISMATCH], o.count, self_written);
        return ok ? 0 : 1;
    }
    return failures ? 1 : 0;
}
