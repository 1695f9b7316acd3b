/* test_alloc_fail.c: fault injection over the public API (fusec.h) with fc_alloc_fail_at.
 *
 * A small block (layernorm, gelu, matmul; odd sizes) goes through whole scenarios, each from
 * fc_options_new to the last _free:
 *   reference  compile, run on the reference interpreter, read the output
 *   cpu        compile, JIT on the CPU device, run, fc_program_time (per launch), read
 *   emit       compile, fc_block_emit of every text kind that needs no NVRTC
 *   cuda       as cpu, on the CUDA device: skipped where fc_device_open(FC_DEVICE_CUDA)
 *              fails (no driver or GPU), since then no fusec allocation happens on it
 * First each scenario runs clean and fc_alloc_count() gives the number T of fusec's own
 * allocations (fc_alloc/fc_calloc/fc_realloc, arenas included; LLVM's, NVRTC's and libc's
 * own allocations are outside fc_alloc and never fail here). Then, for N = 1..T (or a spread
 * sample of FUSEC_ALLOC_FAIL_SAMPLES values when T is larger: default 2000, 600 in a
 * sanitizer build, which is ~10x slower; first and last always included), the scenario runs
 * again with the Nth allocation failing, and:
 *   - the first call that fails returns FC_ERR_NOMEM, and its handle's last-error text (where
 *     a handle came back) is not empty; any other status is a failure (an FC_ERR_INTERNAL
 *     here means an out-of-memory turned into a "bug", which leaves the handle unusable);
 *   - a scenario that still returns FC_OK must give exactly the clean run's output bits
 *     (never FC_OK with wrong results; the CPU device is deterministic at a fixed thread
 *     count, FUSEC_NUM_THREADS=2 is set here);
 *   - nothing crashes, and, in a LeakSanitizer build (-DFUSEC_SANITIZE=address,...), nothing
 *     leaks: after each N, all handles freed, __lsan_do_recoverable_leak_check must find no
 *     unreachable block (the test first checks that it does find a deliberately dropped one).
 * The points run in forked children, batches of 64 in-process: a child that crashes or leaks
 * stops there, the point is reported with the sanitizer's report (and stack) just above on
 * stderr, and a new child goes on with the next point. The parent never calls into fusec, so
 * it has no threads when it forks. FUSEC_ALLOC_FAIL_NOFORK=1 runs everything in-process (for
 * a debugger), FUSEC_ALLOC_FAIL_ONLY=SCENARIO:N runs one point, e.g. cpu:585.
 * Exit: 0 pass, 1 fail, 77 if no scenario could run at all.
 */
#include "fusec.h"
#include "support.h"

#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define HAVE_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(leak_sanitizer)
#define HAVE_LSAN 1
#endif
#endif
#ifndef HAVE_LSAN
#define HAVE_LSAN 0
#endif
#if HAVE_LSAN
#include <sanitizer/lsan_interface.h>
#endif
/* The child's exit status when LeakSanitizer found leaks (its own default exit status under
 * AddressSanitizer is 1, which a UBSan report also gives, so the child checks explicitly). */
#define LSAN_EXIT 23

/* In a sanitizer build, UndefinedBehaviorSanitizer's reports carry the stack (the runtime
 * calls this hook at start-up; UBSAN_OPTIONS still overrides it). Unused otherwise. */
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void) { return "print_stacktrace=1"; }

static const char SOURCE[] =
    "# layernorm + gelu + matmul, sizes not multiples of any vector width\n"
    "dim B = 2, T = 3, C = 5, N = 7\n"
    "block small(x: f32[B, T, C], param g: f32[C], param b: f32[C], param w: f32[C, N]) -> f32[B, T, N]\n"
    "{\n"
    "    h = layernorm(x, g, b, eps=1e-5)\n"
    "    return gelu(h, approx=\"tanh\") @ w\n"
    "}\n";
#define OUT_ELEMS (2 * 3 * 7)

typedef enum { SC_REFERENCE, SC_CPU, SC_EMIT, SC_CUDA, SC_COUNT } Scenario;
static const char *const sc_name[SC_COUNT] = {"reference", "cpu", "emit", "cuda"};

/* What one run of a scenario reports (lives in shared memory when forked). */
typedef struct Result {
    int done;                 /* the child reached the end of the scenario */
    FcStatus status;          /* of the first failing call, else FC_OK */
    char step[64];            /* that call */
    char msg[512];            /* its handle's last error ("" if no handle came back) */
    int have_handle;          /* a handle existed to carry the message */
    long count;               /* fc_alloc_count() at the end */
    float out[OUT_ELEMS];     /* the output, when status == FC_OK */
    size_t emitted;           /* emit: total bytes produced */
} Result;

/* ---- the scenarios ------------------------------------------------------------------------- */
typedef struct Ctx {
    FcOptions *opt;
    FcBlock *blk;
    FcDevice *dev, *host;
    FcProgram *prog;
    FcTensor *in[4], *hin[4], *out;
    Result *r;
} Ctx;

/* Records a failing call: its status, name, and the text of the handle it was made on. */
static bool failed(Ctx *c, FcStatus s, const char *step, const char *msg, bool have_handle) {
    if (s == FC_OK) return false;
    c->r->status = s;
    snprintf(c->r->step, sizeof c->r->step, "%s", step);
    snprintf(c->r->msg, sizeof c->r->msg, "%s", msg ? msg : "");
    c->r->have_handle = have_handle;
    return true;
}

static void ctx_free(Ctx *c) {
    for (int i = 0; i < 4; i++) {
        fc_tensor_free(c->in[i]);
        fc_tensor_free(c->hin[i]);
    }
    fc_tensor_free(c->out);
    fc_program_free(c->prog);
    fc_device_free(c->dev);
    fc_device_free(c->host);
    fc_block_free(c->blk);
    fc_options_free(c->opt);
}

static void run_emit(Ctx *c) {
    static const FcEmitKind kinds[] = {FC_EMIT_IR, FC_EMIT_KIR, FC_EMIT_LLVM, FC_EMIT_DOT, FC_EMIT_REPORT,
                                       FC_EMIT_CUDA};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        char *data = NULL;
        size_t len = 0;
        FcStatus s = fc_block_emit(c->blk, kinds[k], &data, &len);
        char step[32];
        snprintf(step, sizeof step, "fc_block_emit(%d)", (int)kinds[k]);
        if (failed(c, s, step, fc_block_last_error(c->blk), true)) {
            fc_buffer_free(data);
            return;
        }
        c->r->emitted += len;
        fc_buffer_free(data);
    }
}

static void run_device(Ctx *c, Scenario sc) {
    FcStatus s;
    FcDeviceKind kind = sc == SC_CPU ? FC_DEVICE_CPU : sc == SC_CUDA ? FC_DEVICE_CUDA : FC_DEVICE_REFERENCE;
    s = fc_device_open(kind, 0, &c->dev);
    if (failed(c, s, "fc_device_open", c->dev ? fc_device_last_error(c->dev) : NULL, c->dev != NULL)) return;
    s = fc_device_open(FC_DEVICE_REFERENCE, 0, &c->host);
    if (failed(c, s, "fc_device_open(host)", c->host ? fc_device_last_error(c->host) : NULL, c->host != NULL)) return;
    s = fc_program_new(c->blk, c->dev, &c->prog);
    /* with no program handle (its own allocation failed) there is no handle to hold a message */
    if (failed(c, s, "fc_program_new", c->prog ? fc_program_last_error(c->prog) : fc_block_last_error(c->blk),
               c->prog != NULL))
        return;
    int nin = fc_block_num_inputs(c->blk);
    if (nin != 4 || fc_block_num_outputs(c->blk) != 1) {
        failed(c, FC_ERR_INTERNAL, "block shape", "the test block should have 4 inputs and 1 output", true);
        return;
    }
    /* inputs: random data in host tensors, copied into the device's tensors */
    for (int i = 0; i < nin; i++) {
        FcTensorInfo ti;
        float buf[64];
        s = fc_block_input_info(c->blk, i, &ti);
        if (failed(c, s, "fc_block_input_info", fc_block_last_error(c->blk), true)) return;
        s = fc_tensor_new(c->host, ti.dtype, ti.rank, ti.dims, &c->hin[i]);
        if (failed(c, s, "fc_tensor_new(host)", fc_device_last_error(c->host), true)) return;
        s = fc_tensor_new(c->dev, ti.dtype, ti.rank, ti.dims, &c->in[i]);
        if (failed(c, s, "fc_tensor_new", fc_device_last_error(c->dev), true)) return;
        s = fc_block_random_input(c->blk, i, 42, c->hin[i]);
        if (failed(c, s, "fc_block_random_input", fc_block_last_error(c->blk), true)) return;
        size_t n = fc_tensor_nbytes(c->hin[i]);
        if (n > sizeof buf) {
            failed(c, FC_ERR_INTERNAL, "input size", "an input is larger than the test's buffer", true);
            return;
        }
        s = fc_tensor_copy_to_host(c->hin[i], buf, n);
        if (failed(c, s, "fc_tensor_copy_to_host", fc_tensor_last_error(c->hin[i]), true)) return;
        s = fc_tensor_copy_from_host(c->in[i], buf, n);
        if (failed(c, s, "fc_tensor_copy_from_host", fc_tensor_last_error(c->in[i]), true)) return;
    }
    FcTensorInfo to;
    s = fc_block_output_info(c->blk, 0, &to);
    if (failed(c, s, "fc_block_output_info", fc_block_last_error(c->blk), true)) return;
    s = fc_tensor_new(c->dev, to.dtype, to.rank, to.dims, &c->out);
    if (failed(c, s, "fc_tensor_new(out)", fc_device_last_error(c->dev), true)) return;
    float poison[OUT_ELEMS];
    memset(poison, 0xFF, sizeof poison);   /* NaN */
    if (fc_tensor_nbytes(c->out) != sizeof poison) {
        failed(c, FC_ERR_INTERNAL, "output size", "the output is not f32[2,3,7]", true);
        return;
    }
    s = fc_tensor_copy_from_host(c->out, poison, sizeof poison);
    if (failed(c, s, "fc_tensor_copy_from_host(out)", fc_tensor_last_error(c->out), true)) return;
    s = fc_program_run(c->prog, c->in, &c->out);
    if (failed(c, s, "fc_program_run", fc_program_last_error(c->prog), true)) return;
    if (sc != SC_REFERENCE) {
        double total, per[64];
        int nl = fc_program_num_launches(c->prog);
        s = fc_program_time(c->prog, c->in, &c->out, 0, 1, &total, nl <= 64 ? per : NULL);
        if (failed(c, s, "fc_program_time", fc_program_last_error(c->prog), true)) return;
    }
    s = fc_tensor_copy_to_host(c->out, c->r->out, sizeof c->r->out);
    failed(c, s, "fc_tensor_copy_to_host(out)", fc_tensor_last_error(c->out), true);
}

static void run_scenario(Scenario sc, Result *r) {
    Ctx c;
    memset(&c, 0, sizeof c);
    memset(r, 0, sizeof *r);
    c.r = r;
    FcStatus s = fc_options_new(&c.opt);
    if (!failed(&c, s, "fc_options_new", c.opt ? fc_options_last_error(c.opt) : NULL, c.opt != NULL)) {
        s = fc_options_set_dim(c.opt, "T", 3);
        if (!failed(&c, s, "fc_options_set_dim", fc_options_last_error(c.opt), true)) {
            s = fc_compile_string(SOURCE, "small.tf", c.opt, &c.blk);
            if (!failed(&c, s, "fc_compile_string", c.blk ? fc_block_last_error(c.blk) : NULL, c.blk != NULL)) {
                if (sc == SC_EMIT)
                    run_emit(&c);
                else
                    run_device(&c, sc);
            }
        }
    }
    ctx_free(&c);
    r->count = fc_alloc_count();
    r->done = 1;
}

/* ---- the sweep ------------------------------------------------------------------------------ */
static int failures;
static bool use_fork = true;

/* Shared with the children: per failure point, its result; `cur` is the index of the point a
 * child is running (so that a crash is attributed to it). */
typedef struct Shared {
    volatile long cur;
    Result res[];
} Shared;

/* A child runs points [from, to) in turn, in-process. After each, in a LeakSanitizer build, a
 * leak check: everything the scenario made has been freed, so whatever is unreachable now has
 * leaked. The child stops at the first leak (exit LSAN_EXIT, cur = the next point), so that a
 * leak is never blamed on a later point; _exit skips LeakSanitizer's own check at exit. */
static void child_batch(Scenario sc, const long *ns, long from, long to, Shared *sh) {
    for (long k = from; k < to; k++) {
        sh->cur = k;
        fc_alloc_fail_at(ns[k]);
        run_scenario(sc, &sh->res[k]);
        fc_alloc_fail_at(0);
#if HAVE_LSAN
        if (__lsan_do_recoverable_leak_check()) {
            sh->cur = k + 1;
            fflush(stderr);
            _exit(LSAN_EXIT);
        }
#endif
    }
    sh->cur = to;
    fflush(stdout);
    fflush(stderr);
    _exit(0);
}

/* Runs points [from, to) in a child; returns how far it got and, through *code, how it ended:
 * 0 normally, LSAN_EXIT after a leak at the point before the returned one, else the point at
 * the returned index crashed (-signal, or the exit status a sanitizer report gives). */
static long run_batch(Scenario sc, const long *ns, long from, long to, Shared *sh, int *code) {
    sh->cur = from;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        *code = -1000;
        return from;
    }
    if (pid == 0) child_batch(sc, ns, from, to, sh);
    int st;
    while (waitpid(pid, &st, 0) < 0) {
    }
    *code = WIFSIGNALED(st) ? -WTERMSIG(st) : WEXITSTATUS(st);
    return sh->cur;
}

/* Runs points [0, n) of ns into sh->res, reporting crashes and leaks as they happen. */
static void run_points(Scenario sc, const long *ns, long n, Shared *sh) {
    if (!use_fork) {
        for (long k = 0; k < n; k++) {
            fc_alloc_fail_at(ns[k]);
            run_scenario(sc, &sh->res[k]);
            fc_alloc_fail_at(0);
        }
        return;
    }
    enum { BATCH = 64 };
    long k = 0;
    while (k < n) {
        int code;
        long to = k + BATCH < n ? k + BATCH : n;
        long at = run_batch(sc, ns, k, to, sh, &code);
        if (code == 0 && at == to) {
            k = to;
        } else if (code == LSAN_EXIT && HAVE_LSAN) {
            const Result *r = &sh->res[at - 1];
            failures++;
            fprintf(stderr, "FAIL %s N=%ld: leak (LeakSanitizer's report above); the first failing call: %s: %s\n",
                    sc_name[sc], ns[at - 1], r->step, fc_status_name(r->status));
            k = at;
        } else {
            failures++;
            fprintf(stderr, "FAIL %s N=%ld: %s %d (the sanitizer's report with the stack is above, in a sanitizer build)\n",
                    sc_name[sc], ns[at], code < 0 ? "crash: signal" : "died with exit status", code < 0 ? -code : code);
            sh->res[at].done = -1;   /* reported */
            k = at + 1;
        }
    }
}

#if HAVE_LSAN
/* The leak check must be able to fail: a child that drops an fc_alloc'd block. */
static __attribute__((noinline)) void drop_a_block(void) {
    void *volatile p = fc_alloc(24);
    p = NULL;
    (void)p;
}
static bool leak_check_works(void) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);   /* the expected report is noise */
        if (fd >= 0) dup2(fd, 2);
        drop_a_block();
        _exit(__lsan_do_recoverable_leak_check() ? LSAN_EXIT : 0);
    }
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) < 0) return false;
    return WIFEXITED(st) && WEXITSTATUS(st) == LSAN_EXIT;
}
#endif

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static bool same_bits(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof *a) == 0; }

static Shared *shared_new(long n) {
    size_t bytes = sizeof(Shared) + (size_t)n * sizeof(Result);
    Shared *sh = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        perror("mmap");
        return NULL;
    }
    return sh;   /* zeroed */
}
static void shared_free(Shared *sh, long n) { munmap(sh, sizeof(Shared) + (size_t)n * sizeof(Result)); }

/* Sweeps one scenario; returns false if it could not run at all (a skip). */
static bool sweep(Scenario sc, long max_samples, long only) {
    /* the clean run, in a child too: the parent stays free of threads and LLVM */
    Shared *sh = shared_new(1);
    long zero = 0;
    if (!sh) {
        failures++;
        return true;
    }
    run_points(sc, &zero, 1, sh);
    Result clean = sh->res[0];
    shared_free(sh, 1);
    if (clean.done != 1) {
        failures++;
        fprintf(stderr, "FAIL %s: the clean run did not finish\n", sc_name[sc]);
        return true;
    }
    if (clean.status != FC_OK) {
        if (sc == SC_CUDA && clean.status == FC_ERR_UNAVAILABLE) {
            printf("skip %s: %s (no fusec allocation on this device to fail)\n", sc_name[sc], clean.msg);
            return false;
        }
        failures++;
        fprintf(stderr, "FAIL %s: the clean run failed at %s: %s: %s\n", sc_name[sc], clean.step,
                fc_status_name(clean.status), clean.msg);
        return true;
    }

    /* the points: N = 1, 1 + step, 1 + 2 step, ..., and always the last one */
    long total = clean.count;
    long step = total > max_samples ? (total + max_samples - 1) / max_samples : 1;
    long *ns = calloc((size_t)total + 2, sizeof *ns), n = 0;
    if (!ns) {
        failures++;
        return true;
    }
    for (long v = 1; v <= total; v = v < total && v + step > total ? total : v + step)
        if (only <= 0 || v == only) ns[n++] = v;
    if (!(sh = shared_new(n))) {
        free(ns);
        failures++;
        return true;
    }
    double t0 = now_s();
    run_points(sc, ns, n, sh);

    long nok = 0, nnomem = 0;
    for (long k = 0; k < n; k++) {
        const Result *r = &sh->res[k];
        if (r->done != 1) continue;   /* crashed or leaked: reported already */
        if (r->status == FC_OK) {
            /* the failed allocation was absorbed: only the exact clean result is acceptable */
            bool same = sc == SC_EMIT ? r->emitted == clean.emitted : same_bits(r->out, clean.out, OUT_ELEMS);
            if (!same) {
                failures++;
                fprintf(stderr, "FAIL %s N=%ld: FC_OK but the result differs from the clean run\n", sc_name[sc], ns[k]);
            }
            nok++;
        } else if (r->status != FC_ERR_NOMEM) {
            failures++;
            fprintf(stderr, "FAIL %s N=%ld: %s returned %s, expected out of memory: %s\n", sc_name[sc], ns[k], r->step,
                    fc_status_name(r->status), r->msg);
        } else if (r->have_handle && !r->msg[0]) {
            failures++;
            fprintf(stderr, "FAIL %s N=%ld: %s returned out of memory with an empty last-error text\n", sc_name[sc],
                    ns[k], r->step);
        } else {
            nnomem++;
        }
    }
    printf("%s: %ld allocations; %ld failure points tested (every %ld%s): %ld out of memory, %ld absorbed with the "
           "exact result; %.1f s\n",
           sc_name[sc], total, n, step, step > 1 ? ", a spread sample" : "", nnomem, nok, now_s() - t0);
    shared_free(sh, n);
    free(ns);
    return true;
}

int main(void) {
    setenv("FUSEC_NUM_THREADS", "2", 1);
    const char *e = getenv("FUSEC_ALLOC_FAIL_NOFORK");
    use_fork = !(e && *e && strcmp(e, "0") != 0);
    /* every N in a plain build (~4 s); a spread sample under the sanitizers (~40 s) */
    long max_samples = HAVE_LSAN ? 600 : 2000;
    if ((e = getenv("FUSEC_ALLOC_FAIL_SAMPLES")) && atol(e) > 0) max_samples = atol(e);
    Scenario only_sc = SC_COUNT;
    long only_n = 0;
    if ((e = getenv("FUSEC_ALLOC_FAIL_ONLY"))) {
        const char *colon = strchr(e, ':');
        for (int s = 0; s < SC_COUNT; s++)
            if (colon && strncmp(e, sc_name[s], (size_t)(colon - e)) == 0 && strlen(sc_name[s]) == (size_t)(colon - e))
                only_sc = (Scenario)s;
        only_n = colon ? atol(colon + 1) : 0;
        if (only_sc == SC_COUNT || only_n < 1) {
            fprintf(stderr, "FUSEC_ALLOC_FAIL_ONLY must be SCENARIO:N (reference, cpu, emit, cuda)\n");
            return 2;
        }
    }
#if HAVE_LSAN
    if (use_fork && !leak_check_works()) {
        fprintf(stderr, "FAIL: the leak check did not see a deliberately leaked block\n");
        failures++;
    }
#else
    printf("note: not a LeakSanitizer build; leaks are checked only in the sanitizer build\n");
#endif
    int ran = 0;
    for (int s = 0; s < SC_COUNT; s++) {
        if (only_sc != SC_COUNT && s != (int)only_sc) continue;
        ran += sweep((Scenario)s, max_samples, only_n);
    }
    if (failures) {
        fprintf(stderr, "%d failure%s\n", failures, failures == 1 ? "" : "s");
        return 1;
    }
    if (!ran) return 77;
    printf("ok\n");
    return 0;
}
