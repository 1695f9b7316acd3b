/* main.c: the `fusec` command-line driver.
 *
 * Owns: argument parsing (GNU conventions), the four commands (compile, `run`, `bench`, `mem`),
 * writing outputs atomically, printing diagnostics, and mapping library statuses to the exit
 * statuses of docs/cli.md. Entry point: main().
 *
 * Invariants:
 * - Uses nothing but the public API (fusec.h) and the C library / POSIX: the driver is the
 *   proof that the public API is complete.
 * - Never crashes on any argument: every value is checked (digits, range, overflow, empty).
 * - Every non-zero exit prints at least one line `fusec: error: ...` on stderr.
 * - Output files are written whole or not at all: a temporary file in the target directory is
 *   renamed over the target only after every byte was written; the temporary is removed on any
 *   failure (including SIGINT/SIGTERM/SIGHUP/SIGQUIT while it exists).
 * - Every handle is freed on every path (the sanitizer build checks for leaks).
 *
 * The exit statuses and the mapping of FcStatus to them are documented in docs/cli.md.
 */
#include "fusec.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* ---- exit statuses (docs/cli.md) ------------------------------------------------------- */
enum {
    EX_SUCCESS = 0,
    EX_INPUT = 1,      /* source, shapes, tensors, unwritable output, missing file */
    EX_USAGE_ = 2,     /* bad command line */
    EX_UNAVAIL = 3,    /* the device or its libraries are absent */
    EX_CHECK = 4,      /* a failed --check */
    EX_INTERNAL = 70   /* a bug in fusec */
};

#define BENCH_WARMUP 3
#define BENCH_REPEAT_DEFAULT 20
#define BENCH_REPEAT_MAX 1000000
#define STDIN_SOURCE_MAX ((size_t)64 << 20) /* bytes of source read from standard input */

/* ---- small utilities --------------------------------------------------------------------- */

static void err_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void err_line(const char *fmt, ...) {
    va_list ap;
    fputs("fusec: error: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static void warn_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void warn_line(const char *fmt, ...) {
    va_list ap;
    fputs("fusec: warning: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* A usage error: the message and the GNU hint; returns exit status 2. */
static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...) {
    va_list ap;
    fputs("fusec: error: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nTry 'fusec --help' for more information.\n", stderr);
    return EX_USAGE_;
}

/* malloc'ed printf; NULL when out of memory (the caller reports it). */
static char *xfmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xfmt(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return NULL;
    char *s = malloc((size_t)n + 1);
    if (!s) return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

static int oom(void) {
    err_line("out of memory");
    return EX_INPUT;
}

static int is_ident(const char *s) {
    if (!s || !(*s == '_' || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z'))) return 0;
    for (const char *p = s + 1; *p; p++)
        if (!(*p == '_' || (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
              (*p >= '0' && *p <= '9')))
            return 0;
    return 1;
}

/* Parses an unsigned decimal integer (digits only, no sign, no space) not above max. */
static int parse_u64(const char *s, uint64_t max, uint64_t *out) {
    if (!s || !*s) return 0;
    uint64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9') return 0;
        unsigned d = (unsigned)(*p - '0');
        if (v > (max - d) / 10) return 0;
        v = v * 10 + d;
    }
    *out = v;
    return 1;
}

/* A byte count: decimal digits, optionally followed by one binary suffix K M G T (KiB ...). */
static int parse_bytes(const char *s, int64_t *out) {
    if (!s || !*s) return 0;
    size_t n = strlen(s);
    unsigned shift = 0;
    char last = s[n - 1];
    switch (last) {
    case 'k': case 'K': shift = 10; break;
    case 'm': case 'M': shift = 20; break;
    case 'g': case 'G': shift = 30; break;
    case 't': case 'T': shift = 40; break;
    default: break;
    }
    char digits[32];
    size_t nd = shift ? n - 1 : n;
    if (nd == 0 || nd >= sizeof digits) return 0;
    memcpy(digits, s, nd);
    digits[nd] = '\0';
    uint64_t v;
    if (!parse_u64(digits, (uint64_t)INT64_MAX >> shift, &v)) return 0;
    *out = (int64_t)(v << shift);
    return 1;
}

/* ---- command-line model -------------------------------------------------------------------- */

typedef enum { MODE_COMPILE, MODE_RUN, MODE_BENCH, MODE_MEM } Mode;
enum { M_C = 1, M_R = 2, M_B = 4, M_M = 8, M_ALL = 15 };
typedef enum { OPTIM_ADAMW, OPTIM_SGD, OPTIM_NONE } Optim;
static const char *const k_optims[] = {"adamw", "sgd", "none"};

typedef struct DimArg {
    char *name;          /* malloc'ed copy of NAME */
    int64_t value;       /* >= 1 */
} DimArg;

typedef struct InputArg {
    char *name;          /* malloc'ed copy of NAME */
    const char *path;    /* points into argv */
    int used;            /* matched an input of the block */
} InputArg;

typedef struct Args {
    Mode mode;
    const char *file;          /* FILE; "-" is standard input */
    const char *out;           /* -o; NULL: next to the input */
    const char *block;         /* --block */
    DimArg *dims; int ndims;   /* -D, in order (a later one overrides an earlier one) */
    FcEmitKind emit;
    const char *arch;          /* --arch; NULL: the library's default (sm_90) */
    int no_fuse, strict, train;
    int64_t mem_budget; int mem_budget_set;
    const char *precision;     /* --precision; NULL: keep */
    const char *entry;         /* --entry */
    FcDeviceKind device;
    InputArg *inputs; int ninputs;
    InputArg *grads; int ngrads;   /* --grad-output */
    const char *remat;         /* --remat; NULL: auto */
    const char *loss_scale;    /* --loss-scale dynamic|off; NULL: dynamic at --precision f16, else off */
    uint64_t seed;
    const char *out_dir;       /* --out-dir; default "." */
    int check;
    int bisect;                /* --bisect (with --check) */
    int repeat;                /* --repeat; default BENCH_REPEAT_DEFAULT */
    int json;
    int64_t layers;            /* mem --layers; default 1 */
    Optim optimizer;           /* mem --optimizer; default adamw */
    int zero;                  /* mem --zero: the ZeRO stage, 0..3 */
    int64_t devices;           /* mem --devices; default 1 */
} Args;

typedef enum {
    OPT_OUT, OPT_BLOCK, OPT_DEF, OPT_EMIT, OPT_ARCH, OPT_NO_FUSE, OPT_PRECISION, OPT_STRICT,
    OPT_TRAIN, OPT_MEM_BUDGET, OPT_ENTRY, OPT_DEVICE, OPT_INPUT, OPT_RANDOM, OPT_OUT_DIR,
    OPT_CHECK, OPT_REPEAT, OPT_JSON, OPT_HELP, OPT_VERSION, OPT_GRAD_OUTPUT, OPT_REMAT,
    OPT_LAYERS, OPT_OPTIMIZER, OPT_ZERO, OPT_DEVICES, OPT_BISECT, OPT_LOSS_SCALE
} OptId;

typedef struct OptDef {
    const char *name;    /* "--block" or "-o" */
    OptId id;
    int has_arg;
    int modes;           /* M_C | M_R | M_B | M_M: where the option is valid */
} OptDef;

static const OptDef k_opts[] = {
    {"-o", OPT_OUT, 1, M_C},
    {"--output", OPT_OUT, 1, M_C},
    {"-D", OPT_DEF, 1, M_ALL},
    {"--block", OPT_BLOCK, 1, M_ALL},
    {"--emit", OPT_EMIT, 1, M_C},
    {"--arch", OPT_ARCH, 1, M_ALL},
    {"--no-fuse", OPT_NO_FUSE, 0, M_C | M_R},
    {"--precision", OPT_PRECISION, 1, M_ALL},
    {"--strict-rounding", OPT_STRICT, 0, M_ALL},
    {"--train", OPT_TRAIN, 0, M_ALL},
    {"--mem-budget", OPT_MEM_BUDGET, 1, M_ALL},
    {"--entry", OPT_ENTRY, 1, M_ALL},
    {"--device", OPT_DEVICE, 1, M_R | M_B},
    {"--input", OPT_INPUT, 1, M_R},
    {"--grad-output", OPT_GRAD_OUTPUT, 1, M_R},
    {"--loss-scale", OPT_LOSS_SCALE, 1, M_R},
    {"--remat", OPT_REMAT, 1, M_ALL},
    {"--random", OPT_RANDOM, 1, M_R},
    {"--out-dir", OPT_OUT_DIR, 1, M_R},
    {"--check", OPT_CHECK, 0, M_R},
    {"--bisect", OPT_BISECT, 0, M_R},
    {"--repeat", OPT_REPEAT, 1, M_B},
    {"--json", OPT_JSON, 0, M_B | M_M},
    {"--layers", OPT_LAYERS, 1, M_M},
    {"--optimizer", OPT_OPTIMIZER, 1, M_M},
    {"--zero", OPT_ZERO, 1, M_M},
    {"--devices", OPT_DEVICES, 1, M_M},
    {"-h", OPT_HELP, 0, M_ALL},
    {"--help", OPT_HELP, 0, M_ALL},
    {"--version", OPT_VERSION, 0, M_ALL},
};

static const struct { const char *name; const char *ext; } k_emit[FC_EMIT_KIND_COUNT] = {
    [FC_EMIT_CUDA] = {"cuda", ".cu"},   [FC_EMIT_PTX] = {"ptx", ".ptx"},
    [FC_EMIT_CUBIN] = {"cubin", ".cubin"}, [FC_EMIT_IR] = {"ir", ".ir"},
    [FC_EMIT_KIR] = {"kir", ".kir"},    [FC_EMIT_LLVM] = {"llvm", ".ll"},
    [FC_EMIT_DOT] = {"dot", ".dot"},    [FC_EMIT_REPORT] = {"report", ".txt"},
    [FC_EMIT_ROOFLINE] = {"roofline", ".svg"},
};

static const char *const k_archs[] = {"sm_80", "sm_86", "sm_89", "sm_90"};
static const char *const k_precisions[] = {"keep", "bf16", "f16", "f8"};

static const char *mode_name(Mode m) {
    return m == MODE_RUN ? "fusec run" : m == MODE_BENCH ? "fusec bench" : m == MODE_MEM ? "fusec mem" : "fusec FILE";
}

static void print_help(void) {
    static const char *const lines[] = {
        "Usage: fusec FILE.tf [compile options] [-o OUT] [--emit KIND]",
        "       fusec run FILE.tf [--device cpu|cuda] [--input NAME=PATH.npy]... [--random SEED]",
        "                 [--out-dir DIR] [--check] [--no-fuse] [compile options]",
        "       fusec bench FILE.tf [--device cpu|cuda] [--repeat N] [--json] [compile options]",
        "       fusec mem FILE.tf [--layers L] [--optimizer adamw|sgd|none] [--zero 0|1|2|3]",
        "                 [--devices N] [--remat none|auto|full] [--mem-budget BYTES] [--json]",
        "                 [compile options]",
        "       fusec --help | --version",
        "",
        "Compiles a transformer block written in the .tf language into fused kernels; runs it,",
        "checks it against the reference interpreter, benchmarks it against eager execution, or",
        "tells the memory of training it as one layer of a model (mem).",
        "FILE '-' reads the source from standard input.",
        "",
        "Compile (default command):",
        "  -o OUT, -oOUT, --output=OUT  write to OUT; '-' is standard output. Default: next to",
        "                          FILE with the extension of the kind (.cu .ptx .cubin .ir .kir",
        "                          .ll .dot .txt .svg); standard output when FILE is '-'",
        "  --emit KIND             cuda (default: a self-contained CUDA C++ file), ptx, cubin",
        "                          (through NVRTC for --arch), ir (graph IR after all passes),",
        "                          kir (kernel IR), llvm (the CPU backend's LLVM IR), dot",
        "                          (Graphviz, fused kernels as clusters), report (per-kernel",
        "                          table: ops, bytes, flops, intensity, shared memory, and the",
        "                          predicted time on sm_80, sm_90, --arch and this CPU), roofline",
        "                          (SVG chart: the targets' roofs, the kernels on --arch's)",
        "",
        "Compile options (all commands):",
        "  --block NAME            the block to compile (default: the last block in FILE)",
        "  -D NAME=VALUE, -DNAME=VALUE",
        "                          bind or override `dim NAME`; VALUE a positive decimal integer",
        "  --arch ARCH             sm_80, sm_86, sm_89 or sm_90 (default sm_90)",
        "  --no-fuse               compile eagerly: one launch per source op (compile and run)",
        "  --precision P           keep (default), bf16 or f16 (values stored in 16 bits,",
        "                          computed in f32), f8 (E4M3 with a scale per tensor, inputs,",
        "                          weights and outputs too; with --train the interface bf16",
        "                          and the gradients E5M2)",
        "  --strict-rounding       round each value where the eager program stores it (with",
        "                          --train: at the same --remat), giving its bits",
        "  --train                 also compile the backward: run writes grad_NAME.npy for every",
        "                          float input and param (docs/training.md)",
        "  --remat none|auto|full  with --train, what the forward saves: every value the backward",
        "                          reads (none, as eager autograd), the fewest bytes (auto, default),",
        "                          or only the block's inputs (full)",
        "  --mem-budget BYTES      cap on saved activations with --train; a decimal integer,",
        "                          optionally with a binary suffix K, M, G or T",
        "  --entry NAME            AOT entry name fusec_NAME_forward (a C identifier;",
        "                          default: the block's name)",
        "",
        "Run options:",
        "  --device DEV            cpu (default), cuda, or reference (the interpreter)",
        "  --input NAME=PATH       read input NAME from a .npy file (repeatable)",
        "  --grad-output NAME=PATH with --train, the gradient of output NAME from a .npy file",
        "                          (repeatable; default: seeded N(0, 1) from --random)",
        "  --loss-scale MODE       with --train: dynamic (the default at --precision f16: the",
        "                          outputs' gradients scaled by a power of two, halved when a",
        "                          gradient overflows; gradients written as f32, unscaled) or off",
        "  --random SEED           seed for inputs not given with --input: an unsigned 64-bit",
        "                          decimal integer (default 0); floats N(0,1) (param matrices",
        "                          [.., in, out]: N(0,1/in)), integers uniform in a range",
        "                          valid for every op, bools fair coin flips",
        "  --out-dir DIR           write each output as DIR/NAME.npy (default '.', the current",
        "                          directory; DIR is made, with its parents, when missing)",
        "  --check                 also run the reference interpreter on the same inputs and",
        "                          print per output: max_abs_err, max_rel_err (max abs error over",
        "                          max abs reference value), the tolerance, ok or FAIL",
        "  --bisect                with --check: check every value of the block in order (the",
        "                          prefix of the block that ends at it, compiled and run alone)",
        "                          and stop at the first one over its tolerance, naming its",
        "                          op, source location and kernel; with --train, the joint",
        "                          graph's values, the backward's after the forward's",
        "",
        "Bench options:",
        "  --device DEV            as for run",
        "  --repeat N              timed runs after 3 warm-up runs (default 20, 1..1000000)",
        "  --json                  print one JSON object instead of the table",
        "",
        "Mem options (mem compiles for training: --train is implied; docs/training.md):",
        "  --layers L              the model has L such layers (default 1; 1..2^63-1)",
        "  --optimizer OPT         adamw (default: m and v in f32, an f32 master copy of 16- and",
        "                          8-bit params), sgd (no momentum: only the master copy), none",
        "  --zero STAGE            ZeRO stage 0 (default), 1 (optimizer state sharded over the",
        "                          devices), 2 (also the gradients) or 3 (also the params)",
        "  --devices N             data-parallel devices the states are sharded over (default 1)",
        "  --json                  print one JSON object instead of the table",
        "",
        "Other:",
        "  -h, --help              print this help and exit",
        "  --version               print the version and exit",
        "  --                      end of options: the next argument is FILE",
        "  Options may come before or after FILE; --opt=VALUE and --opt VALUE are the same.",
        "  'run', 'bench' and 'mem' are commands only as the first argument.",
        "",
        "Exit status:",
        "  0   success",
        "  1   an error in the input: source, shapes, tensors or .npy files, a missing input",
        "      file, an unwritable output, out of memory, a failed device or library call",
        "  2   bad command-line usage (unknown option, missing or bad value, no FILE or more",
        "      than one, an unknown --input NAME, a -D dim the block does not declare)",
        "  3   the requested device or its libraries (libcuda, NVRTC) are not available",
        "  4   run --check found an output over its tolerance (the outputs are still written)",
        "  70  an internal error (a bug in fusec; the message says where)",
        "",
        "Environment:",
        "  FUSEC_NUM_THREADS       CPU threads (default: all cores); for a fixed count, results",
        "                          are the same bit for bit from run to run",
        "  FUSEC_CPU               the x86 level the cpu kernels are compiled for: native",
        "                          (default), x86-64-v2, x86-64-v3 (AVX2) or x86-64-v4",
        "                          (AVX-512), at most what the machine runs",
        "  FUSEC_CACHE_DIR         kernel cache directory (default $XDG_CACHE_HOME/fusec, else",
        "                          ~/.cache/fusec)",
        "  CUDA_HOME               where to look for the CUDA toolkit (NVRTC) before the",
        "                          default locations",
        "  FUSEC_CPU_GBPS, FUSEC_CPU_GFLOPS",
        "                          the cpu target's bandwidth (GB/s) and f32 peak (GFLOP/s) in",
        "                          --emit report/roofline, instead of measuring them (a STREAM",
        "                          copy and an FMA loop with FUSEC_NUM_THREADS threads);",
        "                          FUSEC_CPU_GBPS is also bench's STREAM figure on the cpu",
        "",
        "Full reference: docs/cli.md.",
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        fputs(lines[i], stdout);
        fputc('\n', stdout);
    }
}

static void args_free(Args *a) {
    for (int i = 0; i < a->ndims; i++) free(a->dims[i].name);
    for (int i = 0; i < a->ninputs; i++) free(a->inputs[i].name);
    for (int i = 0; i < a->ngrads; i++) free(a->grads[i].name);
    free(a->dims);
    free(a->inputs);
    free(a->grads);
}

/* Adds NAME=PATH (an --input or a --grad-output) to arr. Returns 0 or an exit status. */
static int add_named(InputArg *arr, int *n, const char *v, const char *opt, const char *what) {
    const char *eq = strchr(v, '=');
    if (!eq || eq == v || !eq[1]) return usage_error("bad %s argument '%s': expected NAME=PATH.npy", opt, v);
    size_t nlen = (size_t)(eq - v);
    char *name = malloc(nlen + 1);
    if (!name) return oom();
    memcpy(name, v, nlen);
    name[nlen] = '\0';
    for (int k = 0; k < *n; k++)
        if (strcmp(arr[k].name, name) == 0) {
            int rc = usage_error("%s '%s' given twice with %s", what, name, opt);
            free(name);
            return rc;
        }
    arr[*n].name = name;
    arr[*n].path = eq + 1;
    arr[*n].used = 0;
    (*n)++;
    return 0;
}

/* Applies one option with its value (NULL when it takes none). Returns 0 or an exit status. */
static int apply_opt(Args *a, const OptDef *o, const char *spelled, const char *v) {
    switch (o->id) {
    case OPT_OUT:
        if (!*v) return usage_error("option '%s' needs a non-empty file name", spelled);
        a->out = v;
        return 0;
    case OPT_BLOCK:
        if (!is_ident(v)) return usage_error("invalid block name '%s': not an identifier", v);
        a->block = v;
        return 0;
    case OPT_DEF: {
        const char *eq = strchr(v, '=');
        if (!eq) return usage_error("bad -D argument '%s': expected NAME=VALUE", v);
        size_t nlen = (size_t)(eq - v);
        char *name = malloc(nlen + 1);
        if (!name) return oom();
        memcpy(name, v, nlen);
        name[nlen] = '\0';
        if (!is_ident(name)) {
            int rc = usage_error("bad -D argument '%s': '%s' is not an identifier", v, name);
            free(name);
            return rc;
        }
        uint64_t val;
        if (!parse_u64(eq + 1, (uint64_t)INT64_MAX, &val) || val == 0) {
            free(name);
            return usage_error("bad -D argument '%s': VALUE must be a positive decimal integer "
                               "no larger than %" PRId64, v, INT64_MAX);
        }
        a->dims[a->ndims].name = name;
        a->dims[a->ndims].value = (int64_t)val;
        a->ndims++;
        return 0;
    }
    case OPT_EMIT:
        for (int k = 0; k < FC_EMIT_KIND_COUNT; k++)
            if (strcmp(v, k_emit[k].name) == 0) { a->emit = (FcEmitKind)k; return 0; }
        return usage_error("invalid --emit value '%s' (expected cuda, ptx, cubin, ir, kir, "
                           "llvm, dot, report or roofline)", v);
    case OPT_ARCH:
        for (size_t k = 0; k < sizeof k_archs / sizeof k_archs[0]; k++)
            if (strcmp(v, k_archs[k]) == 0) { a->arch = k_archs[k]; return 0; }
        return usage_error("invalid --arch value '%s' (expected sm_80, sm_86, sm_89 or sm_90)",
                           v);
    case OPT_NO_FUSE: a->no_fuse = 1; return 0;
    case OPT_PRECISION:
        for (size_t k = 0; k < sizeof k_precisions / sizeof k_precisions[0]; k++)
            if (strcmp(v, k_precisions[k]) == 0) { a->precision = k_precisions[k]; return 0; }
        return usage_error("invalid --precision value '%s' (expected keep, bf16, f16 or f8)", v);
    case OPT_STRICT: a->strict = 1; return 0;
    case OPT_TRAIN: a->train = 1; return 0;
    case OPT_MEM_BUDGET:
        if (!parse_bytes(v, &a->mem_budget))
            return usage_error("invalid --mem-budget value '%s' (expected a byte count: decimal "
                               "digits, optionally followed by K, M, G or T, at most %" PRId64
                               " bytes)", v, INT64_MAX);
        a->mem_budget_set = 1;
        return 0;
    case OPT_ENTRY:
        if (!is_ident(v))
            return usage_error("invalid --entry name '%s': not a valid C identifier", v);
        if (strlen(v) > 200) return usage_error("--entry name too long (at most 200 characters)");
        a->entry = v;
        return 0;
    case OPT_DEVICE:
        if (strcmp(v, "cpu") == 0) a->device = FC_DEVICE_CPU;
        else if (strcmp(v, "cuda") == 0) a->device = FC_DEVICE_CUDA;
        else if (strcmp(v, "reference") == 0) a->device = FC_DEVICE_REFERENCE;
        else return usage_error("invalid --device value '%s' (expected cpu or cuda)", v);
        return 0;
    case OPT_INPUT: return add_named(a->inputs, &a->ninputs, v, "--input", "input");
    case OPT_GRAD_OUTPUT: return add_named(a->grads, &a->ngrads, v, "--grad-output", "the gradient of output");
    case OPT_LOSS_SCALE:
        if (strcmp(v, "dynamic") && strcmp(v, "off"))
            return usage_error("invalid --loss-scale value '%s' (expected dynamic or off)", v);
        a->loss_scale = v;
        return 0;
    case OPT_REMAT:
        if (strcmp(v, "none") && strcmp(v, "auto") && strcmp(v, "full"))
            return usage_error("invalid --remat value '%s' (expected none, auto or full)", v);
        a->remat = v;
        return 0;
    case OPT_RANDOM:
        if (!parse_u64(v, UINT64_MAX, &a->seed))
            return usage_error("invalid --random seed '%s' (expected an unsigned 64-bit decimal "
                               "integer)", v);
        return 0;
    case OPT_OUT_DIR:
        if (!*v) return usage_error("option '--out-dir' needs a non-empty directory name");
        a->out_dir = v;
        return 0;
    case OPT_CHECK: a->check = 1; return 0;
    case OPT_BISECT: a->bisect = 1; return 0;
    case OPT_REPEAT: {
        uint64_t n;
        if (!parse_u64(v, BENCH_REPEAT_MAX, &n) || n == 0)
            return usage_error("invalid --repeat value '%s' (expected an integer from 1 to %d)",
                               v, BENCH_REPEAT_MAX);
        a->repeat = (int)n;
        return 0;
    }
    case OPT_JSON: a->json = 1; return 0;
    case OPT_LAYERS:
    case OPT_DEVICES: {
        uint64_t n;
        if (!parse_u64(v, (uint64_t)INT64_MAX, &n) || n == 0)
            return usage_error("invalid %s value '%s' (expected an integer from 1 to %" PRId64 ")", o->name, v,
                               INT64_MAX);
        *(o->id == OPT_LAYERS ? &a->layers : &a->devices) = (int64_t)n;
        return 0;
    }
    case OPT_OPTIMIZER:
        for (size_t k = 0; k < sizeof k_optims / sizeof k_optims[0]; k++)
            if (strcmp(v, k_optims[k]) == 0) { a->optimizer = (Optim)k; return 0; }
        return usage_error("invalid --optimizer value '%s' (expected adamw, sgd or none)", v);
    case OPT_ZERO:
        if (strlen(v) != 1 || v[0] < '0' || v[0] > '3')
            return usage_error("invalid --zero value '%s' (expected a ZeRO stage: 0, 1, 2 or 3)", v);
        a->zero = v[0] - '0';
        return 0;
    case OPT_HELP:
    case OPT_VERSION: break;
    }
    return 0;
}

/* Parses argv into *a. Returns -1 to go on, else the exit status (help/version print here). */
static int parse_args(int argc, char **argv, Args *a) {
    memset(a, 0, sizeof *a);
    a->emit = FC_EMIT_CUDA;
    a->device = FC_DEVICE_CPU;
    a->repeat = BENCH_REPEAT_DEFAULT;
    a->layers = 1;
    a->devices = 1;
    a->dims = calloc((size_t)argc + 1, sizeof *a->dims);
    a->inputs = calloc((size_t)argc + 1, sizeof *a->inputs);
    a->grads = calloc((size_t)argc + 1, sizeof *a->grads);
    if (!a->dims || !a->inputs || !a->grads) return oom();

    int i = 1;
    if (argc > 1 && strcmp(argv[1], "run") == 0) { a->mode = MODE_RUN; i = 2; }
    else if (argc > 1 && strcmp(argv[1], "bench") == 0) { a->mode = MODE_BENCH; i = 2; }
    else if (argc > 1 && strcmp(argv[1], "mem") == 0) { a->mode = MODE_MEM; i = 2; }
    int mode_bit = a->mode == MODE_RUN ? M_R : a->mode == MODE_BENCH ? M_B : a->mode == MODE_MEM ? M_M : M_C;
    int end_of_opts = 0;

    for (; i < argc; i++) {
        const char *arg = argv[i];
        if (end_of_opts || arg[0] != '-' || arg[1] == '\0') {
            if (a->file)
                return usage_error("more than one input file ('%s' and '%s')", a->file, arg);
            if (!*arg) return usage_error("empty input file name");
            a->file = arg;
            continue;
        }
        if (strcmp(arg, "--") == 0) { end_of_opts = 1; continue; }

        const OptDef *o = NULL;
        const char *val = NULL;
        char spelled[64];
        if (arg[1] == '-') {
            const char *eq = strchr(arg, '=');
            size_t nlen = eq ? (size_t)(eq - arg) : strlen(arg);
            for (size_t k = 0; k < sizeof k_opts / sizeof k_opts[0]; k++)
                if (k_opts[k].name[1] == '-' && strlen(k_opts[k].name) == nlen &&
                    strncmp(k_opts[k].name, arg, nlen) == 0)
                    o = &k_opts[k];
            if (!o) {
                if (nlen > 48) return usage_error("unrecognized option '%.48s...'", arg);
                return usage_error("unrecognized option '%.*s'", (int)nlen, arg);
            }
            snprintf(spelled, sizeof spelled, "%s", o->name);
            if (eq) {
                if (!o->has_arg)
                    return usage_error("option '%s' doesn't allow an argument", o->name);
                val = eq + 1;
            }
        } else {
            for (size_t k = 0; k < sizeof k_opts / sizeof k_opts[0]; k++)
                if (k_opts[k].name[1] == arg[1] && k_opts[k].name[2] == '\0') o = &k_opts[k];
            if (!o) return usage_error("unrecognized option '-%c'", arg[1]);
            snprintf(spelled, sizeof spelled, "%s", o->name);
            if (arg[2]) {
                if (!o->has_arg)
                    return usage_error("option '%s' doesn't allow an argument (got '%s')",
                                       o->name, arg);
                val = arg + 2;
            }
        }
        if (o->id == OPT_HELP) { print_help(); return EX_SUCCESS; }
        if (o->id == OPT_VERSION) { printf("fusec %s\n", fc_version()); return EX_SUCCESS; }
        if (o->has_arg && !val) {
            if (i + 1 >= argc) return usage_error("option '%s' requires an argument", o->name);
            val = argv[++i];
        }
        if (!(o->modes & mode_bit)) {
            static const char *const names[] = {"compiling", "'fusec run'", "'fusec bench'", "'fusec mem'"};
            char where[96] = "";
            int n = 0, total = 0;
            for (int k = 0; k < 4; k++) total += (o->modes >> k) & 1;
            for (int k = 0; k < 4; k++)
                if ((o->modes >> k) & 1) {
                    size_t l = strlen(where);
                    snprintf(where + l, sizeof where - l, "%s%s", n == 0 ? "" : n + 1 == total ? " and " : ", ",
                             names[k]);
                    n++;
                }
            return usage_error("option '%s' is not valid with '%s' (only with %s)", o->name,
                               mode_name(a->mode), where);
        }
        int rc = apply_opt(a, o, spelled, val);
        if (rc) return rc;
    }
    if (!a->file) return usage_error("no input file");
    if (a->mode == MODE_MEM) a->train = 1;   /* mem is about training */
    if (a->ngrads && !a->train) return usage_error("--grad-output needs --train");
    if (a->loss_scale && !a->train) return usage_error("--loss-scale needs --train");
    if (a->bisect && !a->check) return usage_error("--bisect needs --check");
    return -1;
}

/* ---- status mapping ------------------------------------------------------------------------ */

static int exit_for(FcStatus s) {
    switch (s) {
    case FC_OK: return EX_SUCCESS;
    case FC_ERR_USAGE: return EX_USAGE_;
    case FC_ERR_UNAVAILABLE: return EX_UNAVAIL;
    case FC_ERR_INPUT:
    case FC_ERR_NOMEM:
    case FC_ERR_IO:
    case FC_ERR_DEVICE:
    case FC_ERR_DEVICE_LOST:
    case FC_ERR_RUNTIME_DATA:
    case FC_ERR_UNSUPPORTED: return EX_INPUT;
    case FC_ERR_INTERNAL: return EX_INTERNAL;
    }
    return EX_INTERNAL;
}

/* Reports a failed library call: `fusec: error: CONTEXT: MESSAGE`. `usage_ok` says whether an
 * FC_ERR_USAGE can come from the command line here (options, -D, --block); elsewhere it means
 * the driver misused the API, a bug (exit 70). Returns the exit status. */
static int starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

static int report(FcStatus s, const char *context, const char *msg, int usage_ok) {
    if (!msg || !*msg) msg = fc_status_name(s);
    if (!msg) msg = "unknown error";
    /* No word twice: a message that starts with the context (a .npy error names its file)
     * or with the status's words (the library's "out of memory ...") does not get them again. */
    size_t nc = strlen(context);
    if (strncmp(msg, context, nc) == 0 && msg[nc] == ':') {
        msg += nc + 1;
        while (*msg == ' ') msg++;
    }
    switch (s) {
    case FC_ERR_NOMEM:
        if (starts_with(msg, "out of memory")) err_line("%s: %s", context, msg);
        else err_line("%s: out of memory: %s", context, msg);
        break;
    case FC_ERR_UNAVAILABLE:
        if (starts_with(msg, "not available")) err_line("%s: %s", context, msg);
        else err_line("%s: not available: %s", context, msg);
        break;
    case FC_ERR_INTERNAL:
        if (strncmp(msg, "internal error: ", 16) == 0) msg += 16;
        err_line("internal error: %s: %s", context, msg);
        fputs("fusec: note: this is a bug in fusec; please report it\n", stderr);
        break;
    case FC_ERR_USAGE:
        if (!usage_ok) {
            err_line("internal error: %s: the driver misused the API: %s", context, msg);
            return EX_INTERNAL;
        }
        err_line("%s: %s", context, msg);
        fputs("Try 'fusec --help' for more information.\n", stderr);
        break;
    default: err_line("%s: %s", context, msg); break;
    }
    int rc = exit_for(s);
    return rc == EX_SUCCESS ? EX_INTERNAL : rc;
}

/* ---- atomic output --------------------------------------------------------------------------- */

/* The temporary file being written, removed by the signal handler if we are interrupted. */
static char g_tmp_path[PATH_MAX + 64];
static volatile sig_atomic_t g_tmp_active;

static void on_fatal_signal(int sig) {
    if (g_tmp_active) unlink(g_tmp_path);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void install_signal_handlers(void) {
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_fatal_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
}

/* Out of memory inside LLVM (C++, the CPU code generator): its operator new throws
 * std::bad_alloc, which nothing catches, and its own allocators write "LLVM ERROR: out of
 * memory" and abort(): either way the driver died by SIGABRT (exit 134) where it should report
 * and exit 1 (`fusec run` under `ulimit -v`, tests/cli/limits.sh). The driver, which owns its
 * process, installs both handlers, found at run time (it is C; libstdc++ and LLVM are loaded
 * with the library): std::set_new_handler and llvm::install_bad_alloc_error_handler. They
 * report and _exit: nothing can be freed or unwound from inside an allocation that failed, and
 * no output file is being written then (outputs are written whole from memory, after the run;
 * a temporary in flight is removed all the same). A host program of libfusec owns its own
 * process's handlers. */
static void oom_exit(const char *reason) {
    static const char head[] = "fusec: error: out of memory: the CPU code generator (LLVM) could not allocate";
    if (g_tmp_active) unlink(g_tmp_path);
    fflush(stdout);
    (void)!write(2, head, sizeof head - 1);
    if (reason && *reason) {
        (void)!write(2, " (", 2);
        (void)!write(2, reason, strlen(reason));
        (void)!write(2, ")", 1);
    }
    (void)!write(2, "\n", 1);
    _exit(EX_INPUT);
}
static void on_new_failure(void) { oom_exit(NULL); }
static void on_llvm_bad_alloc(void *data, const char *reason, bool gen_crash_diag) {
    (void)data;
    (void)gen_crash_diag;
    oom_exit(reason);
}
static void install_oom_handlers(void) {
    typedef void (*NewHandler)(void);
    typedef void (*BadAllocHandler)(void *, const char *, bool);
    NewHandler (*set_new)(NewHandler) = NULL;
    void (*set_bad_alloc)(BadAllocHandler, void *) = NULL;
    void *a = dlsym(RTLD_DEFAULT, "_ZSt15set_new_handlerPFvvE");
    void *b = dlsym(RTLD_DEFAULT, "_ZN4llvm31install_bad_alloc_error_handlerEPFvPvPKcbES0_");
    if (a) {
        memcpy(&set_new, &a, sizeof set_new);
        set_new(on_new_failure);
    }
    if (b) {
        memcpy(&set_bad_alloc, &b, sizeof set_bad_alloc);
        set_bad_alloc(on_llvm_bad_alloc, NULL);
    }
}

static int write_all(int fd, const void *data, size_t len) {
    const char *p = data;
    while (len > 0) {
        ssize_t n = write(fd, p, len > ((size_t)1 << 30) ? ((size_t)1 << 30) : len);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Writes data to path whole or not at all. "-" is standard output; an existing non-regular
 * file (a device such as /dev/null, a FIFO) is written in place, since it cannot be replaced;
 * a symbolic link is followed. Returns 0 or an exit status (after printing the error). */
static int write_output(const char *path, const void *data, size_t len) {
    if (strcmp(path, "-") == 0) {
        if (len && fwrite(data, 1, len, stdout) != len) goto stdout_fail;
        if (fflush(stdout) != 0) goto stdout_fail;
        return 0;
    stdout_fail:
        err_line("writing to standard output: %s", strerror(errno));
        return EX_INPUT;
    }

    char *target = NULL;
    struct stat st;
    int exists = 0;
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) target = realpath(path, NULL);
    if (!target) target = strdup(path);
    if (!target) return oom();
    if (stat(target, &st) == 0) {
        exists = 1;
        if (S_ISDIR(st.st_mode)) {
            err_line("cannot write '%s': Is a directory", path);
            free(target);
            return EX_INPUT;
        }
        if (!S_ISREG(st.st_mode)) {
            int fd = open(target, O_WRONLY | O_TRUNC | O_CLOEXEC);
            int ok = fd >= 0 && write_all(fd, data, len) == 0;
            int e = errno;
            if (fd >= 0 && close(fd) != 0 && ok) { ok = 0; e = errno; }
            free(target);
            if (!ok) {
                err_line("cannot write '%s': %s", path, strerror(e));
                return EX_INPUT;
            }
            return 0;
        }
    }

    /* The temporary lives in the target's directory, so rename() is atomic. */
    const char *slash = strrchr(target, '/');
    size_t dlen = slash ? (size_t)(slash - target) + 1 : 0;
    const char *base = slash ? slash + 1 : target;
    if (dlen + strlen(base) + 16 > sizeof g_tmp_path) {
        err_line("cannot write '%s': %s", path, strerror(ENAMETOOLONG));
        free(target);
        return EX_INPUT;
    }
    memcpy(g_tmp_path, target, dlen);
    /* A long base name would make the temporary's name exceed NAME_MAX: use a fixed one. */
    snprintf(g_tmp_path + dlen, sizeof g_tmp_path - dlen, ".%s.tmpXXXXXX",
             strlen(base) > 200 ? "fusec" : base);

    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    sigaddset(&block, SIGQUIT);
    sigprocmask(SIG_BLOCK, &block, &old);
    int fd = mkstemp(g_tmp_path);
    if (fd >= 0) g_tmp_active = 1;
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (fd < 0) {
        err_line("cannot write '%s': %s", path, strerror(errno));
        free(target);
        return EX_INPUT;
    }

    mode_t mode;
    if (exists) {
        mode = st.st_mode & 07777;
    } else {
        mode_t mask = umask(0);
        umask(mask);
        mode = 0666 & ~mask;
    }
    int ok = write_all(fd, data, len) == 0 && fchmod(fd, mode) == 0 && fsync(fd) == 0;
    int e = errno;
    if (close(fd) != 0 && ok) { ok = 0; e = errno; }
    if (ok && rename(g_tmp_path, target) != 0) { ok = 0; e = errno; }
    sigprocmask(SIG_BLOCK, &block, &old);
    if (!ok) unlink(g_tmp_path);
    g_tmp_active = 0;
    sigprocmask(SIG_SETMASK, &old, NULL);
    free(target);
    if (!ok) {
        err_line("cannot write '%s': %s", path, strerror(e));
        return EX_INPUT;
    }
    return 0;
}

/* ---- compiling ------------------------------------------------------------------------------- */

static int set_opt(FcStatus s, FcOptions *o, const char *what) {
    if (s == FC_OK) return 0;
    return report(s, what, fc_options_last_error(o), 1);
}

/* Builds FcOptions from the command line; fuse = 0 forces eager. */
static int make_options(const Args *a, int fuse, FcOptions **out) {
    FcOptions *o = NULL;
    *out = NULL;
    FcStatus s = fc_options_new(&o);
    if (s != FC_OK) {
        fc_options_free(o);
        return report(s, "creating options", NULL, 0);
    }
    int rc = 0;
    for (int i = 0; !rc && i < a->ndims; i++) {
        char what[96];
        snprintf(what, sizeof what, "-D %.60s", a->dims[i].name);
        rc = set_opt(fc_options_set_dim(o, a->dims[i].name, a->dims[i].value), o, what);
    }
    if (!rc && a->block) rc = set_opt(fc_options_set_block(o, a->block), o, "--block");
    if (!rc) rc = set_opt(fc_options_set_fuse(o, fuse), o, "--no-fuse");
    if (!rc && a->arch) rc = set_opt(fc_options_set_arch(o, a->arch), o, "--arch");
    if (!rc && a->entry) rc = set_opt(fc_options_set_entry(o, a->entry), o, "--entry");
    if (!rc && a->precision)
        rc = set_opt(fc_options_set_precision(o, a->precision), o, "--precision");
    if (!rc && a->strict)
        rc = set_opt(fc_options_set_strict_rounding(o, 1), o, "--strict-rounding");
    if (!rc && a->train) rc = set_opt(fc_options_set_train(o, 1), o, "--train");
    if (!rc && a->mem_budget_set)
        rc = set_opt(fc_options_set_mem_budget(o, a->mem_budget), o, "--mem-budget");
    if (!rc && a->remat) rc = set_opt(fc_options_set_remat(o, a->remat), o, "--remat");
    if (rc) {
        fc_options_free(o);
        return rc;
    }
    *out = o;
    return 0;
}

/* Reads all of standard input into a NUL-terminated buffer. */
static int read_stdin(char **out) {
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    if (!buf) return oom();
    for (;;) {
        if (len + 1 >= cap) {
            if (cap >= STDIN_SOURCE_MAX) {
                free(buf);
                err_line("<stdin>: source larger than %zu bytes", STDIN_SOURCE_MAX);
                return EX_INPUT;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) { free(buf); return oom(); }
            buf = nb;
            cap *= 2;
        }
        size_t n = fread(buf + len, 1, cap - 1 - len, stdin);
        len += n;
        if (n == 0) break;
    }
    if (ferror(stdin)) {
        err_line("reading standard input: %s", strerror(errno));
        free(buf);
        return EX_INPUT;
    }
    buf[len] = '\0';
    if (memchr(buf, '\0', len)) {
        err_line("<stdin>: the source contains a NUL byte");
        free(buf);
        return EX_INPUT;
    }
    *out = buf;
    return 0;
}

static void print_text(FILE *f, const char *s) {
    if (!s || !*s) return;
    fputs(s, f);
    if (s[strlen(s) - 1] != '\n') fputc('\n', f);
}

/* Whether the library's one-line summary `msg` ("FIRST ERROR (and N more errors)") is one of
 * the diagnostics printed: then the summary would only repeat them. */
static int in_diagnostics(const char *diag, const char *msg) {
    size_t n = strlen(msg);
    const char *more = NULL;
    for (const char *p = msg; (p = strstr(p, " (and ")) != NULL; p++) more = p;
    if (more && msg[n - 1] == ')' && strstr(more, " more error")) n = (size_t)(more - msg);
    if (n == 0) return 0;
    for (const char *p = diag; *p; p++)
        if (strncmp(p, msg, n) == 0) return 1;
    return 0;
}

/* Standard input's source, read once: bench and mem compile FILE '-' twice. Freed by main. */
static char *g_stdin_src;

/* Compiles FILE with the command line's options (fuse = 0: eager). Prints the diagnostics
 * (errors and warnings) when print_diag. Returns 0 with *out set, or an exit status. */
static int compile(const Args *a, int fuse, int print_diag, FcBlock **out) {
    *out = NULL;
    int from_stdin = strcmp(a->file, "-") == 0;
    if (!from_stdin) {
        struct stat st;
        if (stat(a->file, &st) != 0) {
            err_line("%s: %s", a->file, strerror(errno));
            return EX_INPUT;
        }
        if (S_ISDIR(st.st_mode)) {
            err_line("%s: Is a directory", a->file);
            return EX_INPUT;
        }
    }
    FcOptions *o;
    int rc = make_options(a, fuse, &o);
    if (rc) return rc;
    FcBlock *b = NULL;
    FcStatus s;
    if (from_stdin) {
        if (!g_stdin_src && (rc = read_stdin(&g_stdin_src)) != 0) {
            fc_options_free(o);
            return rc;
        }
        s = fc_compile_string(g_stdin_src, "<stdin>", o, &b);
    } else {
        s = fc_compile_file(a->file, o, &b);
    }
    fc_options_free(o);
    const char *diag = b ? fc_block_diagnostics(b) : NULL;
    if (print_diag || s != FC_OK) print_text(stderr, diag);
    if (s != FC_OK) {
        const char *msg = b ? fc_block_last_error(b) : NULL;
        const char *file = from_stdin ? "<stdin>" : a->file;
        if ((s == FC_ERR_INPUT || s == FC_ERR_UNSUPPORTED) && diag && *diag && (!msg || !*msg || in_diagnostics(diag, msg))) {
            /* the diagnostics above say it all */
            err_line("%s: compilation failed", file);
            rc = exit_for(s);
        } else {
            rc = report(s, file, msg, 1);
        }
        fc_block_free(b);
        return rc;
    }
    if (!b) {
        err_line("internal error: fc_compile_file returned no block");
        return EX_INTERNAL;
    }
    *out = b;
    return 0;
}

/* ---- the compile command --------------------------------------------------------------------- */

/* FILE with its last extension replaced by ext ("dir/a.tf" -> "dir/a.cu"). */
static char *default_output_path(const char *in, const char *ext) {
    const char *slash = strrchr(in, '/');
    const char *base = slash ? slash + 1 : in;
    const char *dot = strrchr(base, '.');
    size_t stem = dot && dot != base ? (size_t)(dot - in) : strlen(in);
    return xfmt("%.*s%s", (int)stem, in, ext);
}

static int same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

static int cmd_compile(const Args *a) {
    int from_stdin = strcmp(a->file, "-") == 0;
    char *out = NULL;
    if (a->out) out = strdup(a->out);
    else if (from_stdin) out = strdup("-");
    else out = default_output_path(a->file, k_emit[a->emit].ext);
    if (!out) return oom();
    if (!from_stdin && strcmp(out, "-") != 0 && same_file(out, a->file)) {
        int rc = usage_error("output file '%s' is the input file; choose another with -o", out);
        free(out);
        return rc;
    }
    FcBlock *b;
    int rc = compile(a, !a->no_fuse, 1, &b);
    if (rc) {
        free(out);
        return rc;
    }
    char *data = NULL;
    size_t len = 0;
    FcStatus s = fc_block_emit(b, a->emit, &data, &len);
    if (s != FC_OK) {
        char what[64];
        snprintf(what, sizeof what, "--emit %s", k_emit[a->emit].name);
        rc = report(s, what, fc_block_last_error(b), 1);
    } else if (!data && len) {
        err_line("internal error: fc_block_emit returned no data");
        rc = EX_INTERNAL;
    } else {
        rc = write_output(out, data ? data : "", len);
    }
    fc_buffer_free(data);
    fc_block_free(b);
    free(out);
    return rc;
}

/* ---- running ------------------------------------------------------------------------------------ */

static void shape_str(const FcTensorInfo *ti, char *buf, size_t n) {
    const char *dt = fc_dtype_name(ti->dtype);
    size_t k = (size_t)snprintf(buf, n, "%s[", dt ? dt : "?");
    for (int d = 0; d < ti->rank && d < FC_MAX_RANK && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "%s%" PRId64, d ? "," : "", ti->dims[d]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

/* Everything one program on one device owns; freed by bound_free. */
typedef struct Bound {
    FcDevice *dev;       /* not owned when shared */
    FcProgram *prog;
    FcTensor **in;       /* [num_inputs] */
    FcTensor **out;      /* [num_outputs] */
    int nin, nout;
} Bound;

static void bound_free(Bound *bd) {
    if (bd->in)
        for (int i = 0; i < bd->nin; i++) fc_tensor_free(bd->in[i]);
    if (bd->out)
        for (int i = 0; i < bd->nout; i++) fc_tensor_free(bd->out[i]);
    free(bd->in);
    free(bd->out);
    fc_program_free(bd->prog);
    memset(bd, 0, sizeof *bd);
}

static const char *device_name(FcDeviceKind k) {
    return k == FC_DEVICE_CUDA ? "cuda" : k == FC_DEVICE_REFERENCE ? "reference" : "cpu";
}

static int open_device(FcDeviceKind kind, FcDevice **out) {
    FcDevice *d = NULL;
    FcStatus s = fc_device_open(kind, 0, &d);
    if (s != FC_OK) {
        char what[64];
        snprintf(what, sizeof what, "device '%s'", device_name(kind));
        /* FC_ERR_USAGE here comes from the environment (e.g. a bad FUSEC_NUM_THREADS). */
        int rc = report(s, what, d ? fc_device_last_error(d) : NULL, 1);
        fc_device_free(d);
        *out = NULL;
        return rc;
    }
    *out = d;
    return 0;
}

static int tensor_fail(FcStatus s, FcTensor *t, FcDevice *d, const char *what) {
    const char *msg = t ? fc_tensor_last_error(t) : d ? fc_device_last_error(d) : NULL;
    return report(s, what, msg, 0);
}

/* Fills t with 0xFF bytes (NaN in every float dtype), so that an element a program does not
 * write shows up; best effort. */
static void poison(FcTensor *t) {
    size_t nb = fc_tensor_nbytes(t);
    void *p = nb ? malloc(nb) : NULL;
    if (!p) return;
    memset(p, 0xFF, nb);
    fc_tensor_copy_from_host(t, p, nb);
    free(p);
}

/* Loads the block on dev with fresh input and output tensors (outputs poisoned with 0xFF
 * bytes, NaN in every float dtype, so an element the program does not write shows up). */
static int bind(FcBlock *b, FcDevice *dev, Bound *bd) {
    memset(bd, 0, sizeof *bd);
    bd->dev = dev;
    bd->nin = fc_block_num_inputs(b);
    bd->nout = fc_block_num_outputs(b);
    if (bd->nin < 0 || bd->nout < 0) {
        err_line("internal error: negative input or output count");
        return EX_INTERNAL;
    }
    bd->in = calloc((size_t)bd->nin + 1, sizeof *bd->in);
    bd->out = calloc((size_t)bd->nout + 1, sizeof *bd->out);
    if (!bd->in || !bd->out) return oom();
    FcStatus s = fc_program_new(b, dev, &bd->prog);
    if (s != FC_OK) {
        int rc = report(s, "loading the program",
                        bd->prog ? fc_program_last_error(bd->prog) : fc_device_last_error(dev), 0);
        fc_program_free(bd->prog);
        bd->prog = NULL;
        return rc;
    }
    for (int io = 0; io < 2; io++) {
        int n = io ? bd->nout : bd->nin;
        for (int i = 0; i < n; i++) {
            FcTensorInfo ti;
            s = io ? fc_block_output_info(b, i, &ti) : fc_block_input_info(b, i, &ti);
            if (s != FC_OK) return report(s, "reading the block's signature",
                                          fc_block_last_error(b), 0);
            FcTensor **slot = io ? &bd->out[i] : &bd->in[i];
            s = fc_tensor_new(dev, ti.dtype, ti.rank, ti.dims, slot);
            if (s != FC_OK) {
                char what[160];
                snprintf(what, sizeof what, "creating %s '%.100s'", io ? "output" : "input",
                         ti.name ? ti.name : "?");
                int rc = tensor_fail(s, *slot, dev, what);
                fc_tensor_free(*slot);
                *slot = NULL;
                return rc;
            }
            if (io) poison(*slot);
        }
    }
    return 0;
}

/* Copies tensor src (any device) into dst (any device) through host memory. */
static int copy_via_host(FcTensor *src, FcTensor *dst, const char *what) {
    size_t nb = fc_tensor_nbytes(src);
    if (nb != fc_tensor_nbytes(dst)) {
        err_line("internal error: %s: sizes differ (%zu and %zu bytes)", what, nb,
                 fc_tensor_nbytes(dst));
        return EX_INTERNAL;
    }
    void *buf = malloc(nb ? nb : 1);
    if (!buf) return oom();
    FcStatus s = fc_tensor_copy_to_host(src, buf, nb);
    int rc = 0;
    if (s != FC_OK) rc = tensor_fail(s, src, NULL, what);
    else if ((s = fc_tensor_copy_from_host(dst, buf, nb)) != FC_OK)
        rc = tensor_fail(s, dst, NULL, what);
    double sc = 1;   /* an f8 tensor's scale goes with its bytes */
    if (!rc && fc_tensor_scale(src, &sc) == FC_OK && sc != 1 && (s = fc_tensor_set_scale(dst, sc)) != FC_OK)
        rc = tensor_fail(s, dst, NULL, what);
    free(buf);
    return rc;
}

/* A file name for output i: its source name when that is an identifier not used by an earlier
 * output, else "outI" (made unique with a suffix). */
static char *output_file_stem(char **taken, int i, const char *name) {
    char *stem = is_ident(name) ? strdup(name) : xfmt("out%d", i);
    for (int tries = 0; stem; tries++) {
        int clash = 0;
        for (int k = 0; k < i; k++)
            if (taken[k] && strcmp(taken[k], stem) == 0) clash = 1;
        if (!clash) break;
        free(stem);
        stem = tries == 0 ? xfmt("out%d", i) : xfmt("out%d_%d", i, tries);
    }
    return stem;
}

/* Checks the output directory before anything runs: an existing one must be a writable
 * directory; a missing one (*missing = 1) must be makeable, i.e. its nearest existing
 * ancestor a writable directory. Returns 0 or an exit status (reported). */
static int check_out_dir(const char *dir, int *missing) {
    struct stat st;
    *missing = 0;
    if (stat(dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode)) {
            err_line("output directory '%s': Not a directory", dir);
            return EX_INPUT;
        }
        if (access(dir, W_OK | X_OK) != 0) {
            err_line("output directory '%s': %s", dir, strerror(errno));
            return EX_INPUT;
        }
        return 0;
    }
    if (errno != ENOENT) {
        err_line("output directory '%s': %s", dir, strerror(errno));
        return EX_INPUT;
    }
    *missing = 1;
    char *up = strdup(dir);
    if (!up) return oom();
    int rc = 0;
    for (;;) {
        size_t n = strlen(up);
        while (n > 1 && up[n - 1] == '/') up[--n] = 0;
        char *slash = strrchr(up, '/');
        if (!slash) strcpy(up, ".");
        else if (slash == up) up[1] = 0;
        else *slash = 0;
        if (stat(up, &st) != 0) {
            if (errno == ENOENT && strcmp(up, ".") != 0 && strcmp(up, "/") != 0) continue;
            err_line("output directory '%s': cannot make it in '%s': %s", dir, up, strerror(errno));
            rc = EX_INPUT;
        } else if (!S_ISDIR(st.st_mode)) {
            err_line("output directory '%s': cannot make it in '%s': Not a directory", dir, up);
            rc = EX_INPUT;
        } else if (access(up, W_OK | X_OK) != 0) {
            err_line("output directory '%s': cannot make it in '%s': %s", dir, up, strerror(errno));
            rc = EX_INPUT;
        }
        break;
    }
    free(up);
    return rc;
}

/* mkdir -p DIR. Returns 0 or an exit status (reported). */
static int make_out_dir(const char *dir) {
    char *p = strdup(dir);
    if (!p) return oom();
    int rc = 0;
    for (char *c = p + 1;; c++) {
        if (*c != '/' && *c != 0) continue;
        char keep = *c;
        *c = 0;
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            err_line("output directory '%s': cannot make '%s': %s", dir, p, strerror(errno));
            rc = EX_INPUT;
            break;
        }
        *c = keep;
        if (!keep) break;
    }
    free(p);
    return rc;
}

/* Training: the gradient tensors of a run. gout[j] for each float output (from --grad-output,
 * else seeded N(0, 1)), gin[i] for each float input (poisoned like outputs); NULL elsewhere. */
typedef struct Grads {
    FcTensor **gout, **gin;
    FcTensor **f32;   /* under loss scaling: each gradient in f32, divided by the scale */
    int nin, nout;
} Grads;

static void grads_free(Grads *g) {
    for (int i = 0; g->f32 && i < g->nin; i++) fc_tensor_free(g->f32[i]);
    free(g->f32);
    for (int j = 0; g->gout && j < g->nout; j++) fc_tensor_free(g->gout[j]);
    for (int i = 0; g->gin && i < g->nin; i++) fc_tensor_free(g->gin[i]);
    free(g->gout);
    free(g->gin);
    memset(g, 0, sizeof *g);
}

static int is_float(FcDtype t) { return t == FC_F64 || t == FC_F32 || t == FC_F16 || t == FC_BF16 || t == FC_F8E4M3 || t == FC_F8E5M2; }

/* Makes the gradient tensors on dev; with a (not NULL), fills the outputs' from --grad-output or
 * from the seed; else leaves them to be copied in. */
static int grads_make(FcBlock *b, FcDevice *dev, const Args *a, Grads *g) {
    memset(g, 0, sizeof *g);
    g->nin = fc_block_num_inputs(b);
    g->nout = fc_block_num_outputs(b);
    g->gout = calloc((size_t)g->nout + 1, sizeof *g->gout);
    g->gin = calloc((size_t)g->nin + 1, sizeof *g->gin);
    if (!g->gout || !g->gin) return oom();
    for (int io = 0; io < 2; io++) {
        int n = io ? g->nin : g->nout;
        for (int i = 0; i < n; i++) {
            FcTensorInfo ti;
            FcStatus s = io ? fc_block_input_info(b, i, &ti) : fc_block_output_info(b, i, &ti);
            if (s != FC_OK) return report(s, "reading the block's signature", fc_block_last_error(b), 0);
            if (!is_float(ti.dtype)) continue;
            FcTensor **slot = io ? &g->gin[i] : &g->gout[i];
            s = fc_tensor_new(dev, ti.dtype, ti.rank, ti.dims, slot);
            if (s != FC_OK) return tensor_fail(s, *slot, dev, "creating a gradient tensor");
            if (io) {
                poison(*slot);
                continue;
            }
            if (!a) continue;
            const char *path = NULL;
            for (int k = 0; k < a->ngrads; k++)
                if (ti.name && strcmp(a->grads[k].name, ti.name) == 0) {
                    path = a->grads[k].path;
                    a->grads[k].used = 1;
                }
            s = path ? fc_tensor_load_npy(*slot, path) : fc_block_random_grad_output(b, i, a->seed, *slot);
            if (s != FC_OK) {
                char *what = xfmt("the gradient of output '%s'", ti.name ? ti.name : "?");
                const char *m = path ? fc_tensor_last_error(*slot) : fc_block_last_error(b);
                int rc = report(s, what ? what : "a gradient", m, 0);
                free(what);
                return rc;
            }
        }
    }
    for (int k = 0; a && k < a->ngrads; k++) {   /* a is NULL for --check's reference gradients */
        if (a->grads[k].used) continue;
        fprintf(stderr, "fusec: error: --grad-output '%s': block '%s' has no float output of that name; its float outputs are:",
                a->grads[k].name, fc_block_name(b) ? fc_block_name(b) : "?");
        int any = 0;
        for (int j = 0; j < g->nout; j++) {
            FcTensorInfo ti;
            if (fc_block_output_info(b, j, &ti) == FC_OK && is_float(ti.dtype))
                fprintf(stderr, "%s %s", any++ ? "," : "", ti.name ? ti.name : "?");
        }
        fputs(any ? "\nTry 'fusec --help' for more information.\n" : " (none)\nTry 'fusec --help' for more information.\n", stderr);
        return EX_USAGE_;
    }
    return 0;
}

/* --check: one line per kernel (fc_program_check_kernels). */
typedef struct KernelPrint { const char *file; int nkernels; char first_bad[160]; } KernelPrint;

static int kernel_print(const FcKernelCheck *k, void *ctx) {
    KernelPrint *kp = ctx;
    const char *file = kp->file;
    kp->nkernels++;
    if (!k->ok && !kp->first_bad[0]) snprintf(kp->first_bad, sizeof kp->first_bad, "%s%s", k->backward ? "backward " : "", k->kernel);
    printf("  %s%s (%s): %d value%s, worst max_rel_err=%.2e tol=%.1e (%s", k->backward ? "backward " : "", k->kernel,
           k->ops, k->nvalues, k->nvalues == 1 ? "" : "s", k->max_rel_err, k->tol, k->op);
    if (strcmp(k->op, k->source_op) != 0) printf(" of %s", k->source_op);
    if (k->line > 0) printf(" at %s:%d:%d", file, k->line, k->col);
    if (k->name) printf(" '%s'", k->name);
    printf(") %s", k->ok ? "ok" : "FAIL");
    if (k->illcond) printf(" (%d ill-conditioned: over the bound by what rounding noise moves)", k->illcond);
    printf("\n");
    return 0;
}

/* --bisect: one line per value checked (fc_block_bisect). */
static void bisect_where(const FcBisectStep *st, const char *file, char *buf, size_t n) {
    char op[96];
    if (strcmp(st->op, st->source_op) != 0) snprintf(op, sizeof op, "%s (of %s)", st->op, st->source_op);
    else snprintf(op, sizeof op, "%s", st->op);
    if (st->line > 0)
        snprintf(buf, n, "%s%s at %s:%d:%d", st->backward ? "backward " : "", op, file, st->line, st->col);
    else
        snprintf(buf, n, "%s%s", st->backward ? "backward " : "", op);
}

static int bisect_print(const FcBisectStep *st, void *ctx) {
    const char *file = ctx;
    char where[512];
    bisect_where(st, file, where, sizeof where);
    printf("  %3d %s%s%s%s: ", st->step, where, st->name ? " '" : "", st->name ? st->name : "", st->name ? "'" : "");
    if (st->kernel[0]) printf("kernel %s (%s) ", st->kernel, st->kernel_ops);
    printf("max_rel_err=%.2e tol=%.1e %s\n", st->max_rel_err, st->tol, st->ok ? "ok" : "FAIL");
    if (!st->ok) {
        printf("bisect: the first value over its tolerance: %s%s%s%s", where, st->name ? " ('" : "",
               st->name ? st->name : "", st->name ? "')" : "");
        if (st->kernel[0]) printf(", written by kernel %s", st->kernel);
        printf("\n");
        if (st->unfused_ok == 1)
            printf("bisect: the unfused program computes it within tolerance: look at how fusion and lowering combine it with the ops before it\n");
        else if (st->unfused_ok == 0)
            printf("bisect: the unfused program gets it wrong too: look at the op's own lowering (or its inputs' conditioning)\n");
    }
    fflush(stdout);
    return 0;
}

static int run_bisect(const Args *a, FcBlock *b, FcDevice *dev, FcTensor *const *in, FcTensor *const *gout) {
    const char *file = strcmp(a->file, "-") == 0 ? "<stdin>" : a->file;
    printf("bisect: each value in order: the prefix of the block that ends at it, %s on %s, against the reference\n",
           a->no_fuse ? "unfused" : "fused", device_name(a->device));
    if (a->train) printf("bisect: the joint graph (forward, then backward), each prefix compiled as a forward program\n");
    fflush(stdout);
    int first = -1;
    FcStatus s = fc_block_bisect(b, dev, in, a->train ? gout : NULL, bisect_print, (void *)file, &first);
    if (s != FC_OK) return report(s, "bisecting", fc_block_last_error(b), 0);
    if (first < 0) printf("bisect: every value is within its tolerance\n");
    fflush(stdout);
    return 0;
}

static int cmd_run(const Args *a) {
    const char *dir = a->out_dir ? a->out_dir : ".";
    int missing;
    int crc = check_out_dir(dir, &missing);
    if (crc) return crc;

    FcBlock *b = NULL;
    FcDevice *dev = NULL, *rdev = NULL;
    Bound bd = {0}, rb = {0};
    Grads gr = {0}, rgr = {0};
    int *given = NULL;
    char **stems = NULL;
    int nout = 0;
    int rc = compile(a, !a->no_fuse, 1, &b);
    if (rc) goto done;

    /* --input names against the block's inputs (before opening any device). */
    int nin = fc_block_num_inputs(b);
    nout = fc_block_num_outputs(b);
    given = calloc((size_t)(nin > 0 ? nin : 0) + 1, sizeof *given);
    stems = calloc((size_t)(nout > 0 ? nout : 0) + 1, sizeof *stems);
    if (!given || !stems) { rc = oom(); goto done; }
    for (int i = 0; i < nin; i++) given[i] = -1;
    for (int k = 0; k < a->ninputs; k++) {
        int found = -1;
        for (int i = 0; i < nin; i++) {
            FcTensorInfo ti;
            if (fc_block_input_info(b, i, &ti) == FC_OK && ti.name &&
                strcmp(ti.name, a->inputs[k].name) == 0)
                found = i;
        }
        if (found < 0) {
            fprintf(stderr, "fusec: error: block '%s' has no input named '%s'; its inputs are:",
                    fc_block_name(b) ? fc_block_name(b) : "?", a->inputs[k].name);
            for (int i = 0; i < nin; i++) {
                FcTensorInfo ti;
                if (fc_block_input_info(b, i, &ti) == FC_OK)
                    fprintf(stderr, "%s %s", i ? "," : "", ti.name ? ti.name : "?");
            }
            fputs(nin ? "\nTry 'fusec --help' for more information.\n"
                      : " (none)\nTry 'fusec --help' for more information.\n", stderr);
            rc = EX_USAGE_;
            goto done;
        }
        given[found] = k;
    }

    rc = open_device(a->device, &dev);
    if (rc) goto done;
    rc = bind(b, dev, &bd);
    if (rc) goto done;

    /* Inputs: from .npy files, else seeded random data. */
    for (int i = 0; i < nin; i++) {
        FcTensorInfo ti;
        FcStatus s = fc_block_input_info(b, i, &ti);
        if (s != FC_OK) { rc = report(s, "reading the inputs", fc_block_last_error(b), 0); goto done; }
        if (given[i] >= 0) {
            const char *path = a->inputs[given[i]].path;
            /* an f8 input at the interface: the file's values with the scale that fits them */
            FcTensor *f = NULL, *t = bd.in[i];
            if (ti.scaled && (s = fc_tensor_new(dev, FC_F64, ti.rank, ti.dims, &f)) != FC_OK) {
                rc = report(s, "reading the inputs", fc_device_last_error(dev), 0);
                goto done;
            }
            if (f) t = f;
            s = fc_tensor_load_npy(t, path);
            if (s == FC_OK && f && (s = fc_tensor_quantize(bd.in[i], f)) != FC_OK) t = bd.in[i];
            if (s != FC_OK) {
                const char *m = fc_tensor_last_error(t);
                fc_tensor_free(f);
                /* the library's messages name the file; say it once */
                char *what = m && strstr(m, path) ? xfmt("input '%s'", ti.name ? ti.name : "?")
                                                  : xfmt("input '%s' from '%s'", ti.name ? ti.name : "?", path);
                rc = report(s, what ? what : path, m, 0);
                free(what);
                goto done;
            }
            fc_tensor_free(f);
        } else {
            s = fc_block_random_input(b, i, a->seed, bd.in[i]);
            if (s != FC_OK) {
                char *what = xfmt("random input '%s'", ti.name ? ti.name : "?");
                const char *m = fc_block_last_error(b);
                if (!m || !*m) m = fc_tensor_last_error(bd.in[i]);
                rc = report(s, what ? what : "random input", m, 0);
                free(what);
                goto done;
            }
        }
    }

    const char *desc = fc_device_description(dev);
    printf("block %s on %s (%d launch%s)\n", fc_block_name(b) ? fc_block_name(b) : "?",
           desc && *desc ? desc : device_name(a->device), fc_program_num_launches(bd.prog),
           fc_program_num_launches(bd.prog) == 1 ? "" : "es");
    for (int i = 0; i < nin; i++) {
        FcTensorInfo ti;
        char shp[256];
        if (fc_block_input_info(b, i, &ti) != FC_OK) continue;
        shape_str(&ti, shp, sizeof shp);
        const char *nm = ti.name ? ti.name : "?";
        char scl[64] = "";
        double isc = 1;
        if (ti.scaled && fc_tensor_scale(bd.in[i], &isc) == FC_OK)
            snprintf(scl, sizeof scl, ", scale 2^%d", (int)lround(log2(isc)));
        if (given[i] >= 0)
            printf("  input  %s %s from %s%s\n", nm, shp, a->inputs[given[i]].path, scl);
        else
            printf("  input  %s %s random (seed %" PRIu64 ")%s\n", nm, shp, a->seed, scl);
    }

    /* f8: delayed scaling sets each slot's scale from earlier runs' amax, so the block runs
     * until the scales settle (a run at scale 1 saturates what lies above 448, and what is
     * computed from a saturated tensor is too small until that tensor's scale falls: a chain
     * of k f8 tensors settles in at most k + 1 runs); the run written out and checked is the
     * next one, with the settled scales (docs/precision.md, "f8"). Training runs whole steps,
     * so that the gradients' E5M2 scales settle too. */
    int nslots = fc_block_num_fp8_slots(b), ncal = 0;
    bool f8 = nslots > 0 && a->device != FC_DEVICE_REFERENCE;
    double *sc = f8 ? calloc((size_t)nslots * 2, sizeof *sc) : NULL;
    if (f8 && !sc) { rc = oom(); goto done; }
    if (a->train && (rc = grads_make(b, dev, a, &gr)) != 0) { free(sc); goto done; }
    FcStatus s = FC_OK;
    for (bool settled = !f8; !settled && s == FC_OK && ncal < nslots + 2;) {
        s = fc_program_run(bd.prog, bd.in, bd.out);
        if (s == FC_OK && a->train) s = fc_program_backward(bd.prog, gr.gout, gr.gin);
        if (s == FC_OK && ++ncal > 1) s = fc_program_fp8_scales(bd.prog, sc + nslots, nslots);
        settled = ncal > 2 && memcmp(sc, sc + nslots, sizeof *sc * (size_t)nslots) == 0;
        if (ncal > 1) memcpy(sc, sc + nslots, sizeof *sc * (size_t)nslots);
    }
    if (s == FC_OK) s = fc_program_run(bd.prog, bd.in, bd.out);
    if (s != FC_OK) { free(sc); rc = report(s, "running the block", fc_program_last_error(bd.prog), 0); goto done; }
    if (f8) {
        /* the reference interpreter rounds each f8 value with the scale this run used */
        s = fc_program_fp8_scales(bd.prog, sc, nslots);
        if (s == FC_OK) s = fc_block_set_fp8_scales(b, sc, nslots);
        /* the values' slots (E4M3) and, with --train, their gradients' (E5M2); the inputs'
         * scales are the caller's (above) */
        int cnt[2] = {0, 0}, nio = 0;
        double lo[2] = {0, 0}, hi[2] = {0, 0};
        for (int i = 0; i < nin; i++) {
            FcTensorInfo ti;
            nio += fc_block_input_info(b, i, &ti) == FC_OK && ti.scaled;
        }
        for (int k = 0; s == FC_OK && k < nslots; k++) {
            FcDtype t = FC_F8E4M3;
            if ((s = fc_block_fp8_slot_dtype(b, k, &t)) != FC_OK) break;
            if (k < nio) continue;
            int j = t == FC_F8E5M2;
            if (!cnt[j]++ || sc[k] < lo[j]) lo[j] = sc[k];
            if (cnt[j] == 1 || sc[k] > hi[j]) hi[j] = sc[k];
        }
        free(sc);
        if (s != FC_OK) { rc = report(s, "reading the f8 scales", fc_program_last_error(bd.prog), 0); goto done; }
        printf("  f8     %d tensor%s in E4M3, scales 2^%d .. 2^%d", cnt[0], cnt[0] == 1 ? "" : "s",
               (int)lround(log2(lo[0])), (int)lround(log2(hi[0])));
        if (cnt[1])
            printf("; %d gradient%s in E5M2, scales 2^%d .. 2^%d", cnt[1], cnt[1] == 1 ? "" : "s",
                   (int)lround(log2(lo[1])), (int)lround(log2(hi[1])));
        printf(" (delayed scaling, settled after %d %s%s)\n", ncal, a->train ? "step" : "run", ncal == 1 ? "" : "s");
    }
    /* made only now, so that a run that fails leaves nothing behind */
    if (missing && (rc = make_out_dir(dir)) != 0) goto done;

    /* Outputs, each written atomically by the library. */
    for (int i = 0; i < nout; i++) {
        FcTensorInfo ti;
        s = fc_block_output_info(b, i, &ti);
        if (s != FC_OK) { rc = report(s, "reading the outputs", fc_block_last_error(b), 0); goto done; }
        stems[i] = output_file_stem(stems, i, ti.name);
        if (!stems[i]) { rc = oom(); goto done; }
        if (!ti.name || strcmp(stems[i], ti.name) != 0)
            warn_line("output %d ('%s') is written as '%s.npy'", i, ti.name ? ti.name : "",
                      stems[i]);
        char *path = xfmt("%s/%s.npy", dir, stems[i]);
        if (!path) { rc = oom(); goto done; }
        s = fc_tensor_save_npy(bd.out[i], path);
        if (s != FC_OK) {
            const char *m = fc_tensor_last_error(bd.out[i]);
            char *what = m && strstr(m, path) ? xfmt("output '%s'", ti.name ? ti.name : stems[i]) : NULL;
            rc = report(s, what ? what : path, m, 0);
            free(what);
            free(path);
            goto done;
        }
        char shp[256], scl[80] = "";
        shape_str(&ti, shp, sizeof shp);
        double osc = 1;
        if (ti.scaled && fc_tensor_scale(bd.out[i], &osc) == FC_OK)
            snprintf(scl, sizeof scl, " (scale 2^%d; the file holds its values in f32)", (int)lround(log2(osc)));
        printf("  output %s %s -> %s%s\n", ti.name ? ti.name : stems[i], shp, path, scl);
        free(path);
    }
    fflush(stdout);

    /* Training: the backward, and the gradient of every float input as grad_NAME.npy. */
    if (a->train) {
        /* dynamic loss scaling: by default at f16, whose gradients underflow below 6e-8 */
        bool scaling = a->loss_scale ? strcmp(a->loss_scale, "dynamic") == 0
                                     : a->precision && strcmp(a->precision, "f16") == 0;
        if (scaling && (s = fc_program_set_loss_scaling(bd.prog, 65536, 2000)) != FC_OK) {
            if (s != FC_ERR_UNSUPPORTED || a->loss_scale) {   /* asked for: an error */
                rc = report(s, "--loss-scale dynamic", fc_program_last_error(bd.prog), 0);
                goto done;
            }
            warn_line("no loss scaling: %s", fc_program_last_error(bd.prog));   /* the f16 default */
            scaling = false;
        }
        s = fc_program_backward(bd.prog, gr.gout, gr.gin);
        if (s != FC_OK) { rc = report(s, "running the backward", fc_program_last_error(bd.prog), 0); goto done; }
        double lscale = 1;
        int backoffs = 0;
        if (scaling) {
            fc_program_loss_scale(bd.prog, &lscale, &backoffs);
            if (!(gr.f32 = calloc((size_t)nin + 1, sizeof *gr.f32))) { rc = oom(); goto done; }
            for (int i = 0; i < nin; i++) {
                FcTensorInfo ti;
                if (!gr.gin[i] || fc_block_input_info(b, i, &ti) != FC_OK) continue;
                if ((s = fc_tensor_new(dev, FC_F32, ti.rank, ti.dims, &gr.f32[i])) != FC_OK ||
                    (s = fc_tensor_convert(gr.f32[i], gr.gin[i], 1 / lscale)) != FC_OK) {
                    rc = report(s, "unscaling a gradient", gr.f32[i] ? fc_tensor_last_error(gr.f32[i]) : fc_device_last_error(dev), 0);
                    goto done;
                }
            }
        }
        for (int i = 0; i < nin; i++) {
            FcTensorInfo ti;
            if (!gr.gin[i] || fc_block_input_info(b, i, &ti) != FC_OK) continue;
            char *path = xfmt("%s/grad_%s.npy", dir, ti.name ? ti.name : "input");
            if (!path) { rc = oom(); goto done; }
            FcTensor *gt = gr.f32 ? gr.f32[i] : gr.gin[i];
            s = fc_tensor_save_npy(gt, path);
            if (s != FC_OK) {
                rc = report(s, path, fc_tensor_last_error(gt), 0);
                free(path);
                goto done;
            }
            char shp[256];
            shape_str(&ti, shp, sizeof shp);
            printf("  grad   %s %s -> %s\n", ti.name ? ti.name : "?", shp, path);
            free(path);
        }
        if (scaling)
            printf("  loss scale %g (dynamic: the outputs' gradients were multiplied by it; %d backoff%s; the gradients "
                   "are written as f32, divided by it)\n", lscale, backoffs, backoffs == 1 ? "" : "s");
        FcTrainInfo tinfo;
        if (fc_block_train_info(b, &tinfo) == FC_OK)
            printf("  saved  %d values, %" PRId64 " bytes; recomputed %d ops, %" PRId64 " flops\n", tinfo.nsaved,
                   tinfo.saved_bytes, tinfo.nrecomputed, tinfo.recompute_flops);
        fflush(stdout);
    }

    if (a->check) {
        rc = open_device(FC_DEVICE_REFERENCE, &rdev);
        if (rc) goto done;
        rc = bind(b, rdev, &rb);
        if (rc) goto done;
        for (int i = 0; i < nin; i++) {
            rc = copy_via_host(bd.in[i], rb.in[i], "copying an input to the reference device");
            if (rc) goto done;
        }
        s = fc_program_run(rb.prog, rb.in, rb.out);
        if (s != FC_OK) {
            rc = report(s, "running the reference interpreter", fc_program_last_error(rb.prog), 0);
            goto done;
        }
        /* the tolerances for these inputs: they widen with the rounding spread of 16/8-bit
         * intermediates (docs/tolerances.md) */
        double *tols = calloc((size_t)nout + 1, sizeof *tols), *spread = calloc((size_t)nout + 1, sizeof *spread);
        if (!tols || !spread) { free(tols); free(spread); rc = oom(); goto done; }
        s = fc_block_check_tolerances(b, rb.in, tols, spread);
        if (s != FC_OK) {
            free(tols);
            free(spread);
            rc = report(s, "computing the tolerances", fc_block_last_error(b), 0);
            goto done;
        }
        int failed = 0;
        for (int i = 0; i < nout; i++) {
            FcTensorInfo ti;
            double abs_err = 0, rel_err = 0, tol = tols[i], base = 0;
            s = fc_block_output_info(b, i, &ti);
            if (s == FC_OK) s = fc_block_output_tolerance(b, i, &base);
            if (s != FC_OK) { free(tols); free(spread); rc = report(s, "reading the tolerance", fc_block_last_error(b), 0); goto done; }
            s = fc_tensor_compare(bd.out[i], rb.out[i], &abs_err, &rel_err);
            if (s != FC_OK) {
                free(tols);
                free(spread);
                rc = report(s, "comparing with the reference", fc_tensor_last_error(bd.out[i]), 0);
                goto done;
            }
            int ok = rel_err <= tol; /* false for NaN */
            failed += !ok;
            printf("check %s: max_abs_err=%.2e max_rel_err=%.2e tol=%.1e %s\n",
                   stems[i], abs_err, rel_err, tol, ok ? "ok" : "FAIL");
            if (spread[i] != 0)
                printf("  (%s: tol = %.1e + 2 x %.2e, the rounding spread of its 16/8-bit intermediates)\n",
                       stems[i], base, spread[i]);
        }
        free(tols);
        free(spread);
        int nchecked = nout, kfailed = 0, nkernels = 0;
        if (a->train) {
            rc = grads_make(b, rdev, NULL, &rgr);
            if (rc) goto done;
            for (int j = 0; j < nout; j++)
                if (gr.gout[j] && (rc = copy_via_host(gr.gout[j], rgr.gout[j], "copying a gradient to the reference device")))
                    goto done;
            s = fc_program_backward(rb.prog, rgr.gout, rgr.gin);
            if (s != FC_OK) { rc = report(s, "running the reference backward", fc_program_last_error(rb.prog), 0); goto done; }
            /* the gradients' tolerances for these inputs and outputs' gradients, widened as the
             * outputs' are by the rounding spread of 16/8-bit intermediates: a gradient through
             * a kink (abs, relu, max at 0) can take either side where the two legal roundings
             * put its argument on either side of it (docs/tolerances.md) */
            double *gtols = calloc((size_t)nin + 1, sizeof *gtols), *gspread = calloc((size_t)nin + 1, sizeof *gspread);
            if (!gtols || !gspread) { free(gtols); free(gspread); rc = oom(); goto done; }
            s = fc_block_check_grad_tolerances(b, rb.in, rgr.gout, gtols, gspread);
            if (s != FC_OK) {
                free(gtols);
                free(gspread);
                rc = report(s, "computing the gradients' tolerances", fc_block_last_error(b), 0);
                goto done;
            }
            for (int i = 0; i < nin; i++) {
                FcTensorInfo ti;
                double abs_err = 0, rel_err = 0, tol = gtols[i], base = 0;
                if (!gr.gin[i] || fc_block_input_info(b, i, &ti) != FC_OK) continue;
                s = fc_block_grad_tolerance(b, i, &base);
                FcTensor *rf = NULL;   /* under loss scaling the unscaled f32 gradients, against the reference's in f32 */
                if (s == FC_OK && gr.f32) {
                    s = fc_tensor_new(rdev, FC_F32, ti.rank, ti.dims, &rf);
                    if (s == FC_OK) s = fc_tensor_convert(rf, rgr.gin[i], 1);
                }
                if (s == FC_OK) s = fc_tensor_compare(gr.f32 ? gr.f32[i] : gr.gin[i], gr.f32 ? rf : rgr.gin[i], &abs_err, &rel_err);
                fc_tensor_free(rf);
                if (s != FC_OK) {
                    free(gtols);
                    free(gspread);
                    rc = report(s, "comparing a gradient with the reference", fc_tensor_last_error(gr.gin[i]), 0);
                    goto done;
                }
                /* over it: how much keeping the gradients in their dtypes moves the reference's (two
                 * contributions to an f8 gradient that cancel: docs/tolerances.md), if more */
                double noise = 0;
                if (!(rel_err <= tol) && (s = fc_block_grad_noise_spread(b, rb.in, rgr.gout, i, &noise)) != FC_OK) {
                    free(gtols);
                    free(gspread);
                    rc = report(s, "measuring how rounding the gradients moves the reference's", fc_block_last_error(b), 0);
                    goto done;
                }
                bool widened = isfinite(noise) && noise > gspread[i];
                if (widened) tol = base + 2 * noise;
                int ok = rel_err <= tol;
                failed += !ok;
                nchecked++;
                printf("check grad_%s: max_abs_err=%.2e max_rel_err=%.2e tol=%.1e %s\n", ti.name ? ti.name : "?", abs_err,
                       rel_err, tol, ok ? "ok" : "FAIL");
                if (widened)
                    printf("  (grad_%s: tol = %.1e + 2 x %.2e, how much rounding the gradients in their dtypes moves the "
                           "reference's)\n", ti.name ? ti.name : "?", base, noise);
                else if (gspread[i] != 0)
                    printf("  (grad_%s: tol = %.1e + 2 x %.2e, the rounding spread of its 16/8-bit intermediates)\n",
                           ti.name ? ti.name : "?", base, gspread[i]);
            }
            free(gtols);
            free(gspread);
        }
        if (a->device != FC_DEVICE_REFERENCE) {
            printf("check kernels: every value each kernel leaves in memory, within its own bound\n");
            KernelPrint kp = {strcmp(a->file, "-") == 0 ? "<stdin>" : a->file, 0, ""};
            s = fc_program_check_kernels(bd.prog, bd.in, bd.out, a->train ? gr.gout : NULL, a->train ? gr.gin : NULL,
                                         kernel_print, &kp, &kfailed);
            if (s != FC_OK) { rc = report(s, "checking each kernel", fc_program_last_error(bd.prog), 0); goto done; }
            if (kfailed)
                printf("check kernels: %d of %d kernel%s over the bound; the first is %s (the later ones may only have "
                       "read its results)\n", kfailed, kp.nkernels, kp.nkernels == 1 ? "" : "s", kp.first_bad);
            nkernels = kp.nkernels;
        }
        fflush(stdout);
        if (a->bisect && (rc = run_bisect(a, b, dev, bd.in, a->train ? gr.gout : NULL)) != 0) goto done;
        if (failed || kfailed) {
            if (!kfailed)
                err_line("check failed: %d of %d output%s over tolerance", failed, nchecked, nchecked == 1 ? "" : "s");
            else
                err_line("check failed: %d of %d output%s and %d of %d kernel%s over tolerance", failed, nchecked,
                         nchecked == 1 ? "" : "s", kfailed, nkernels, nkernels == 1 ? "" : "s");
            rc = EX_CHECK;
            goto done;
        }
    }
    rc = 0;
done:
    grads_free(&rgr);
    grads_free(&gr);
    bound_free(&rb);
    bound_free(&bd);
    fc_device_free(rdev);
    fc_device_free(dev);
    fc_block_free(b);
    if (stems)
        for (int i = 0; i < nout; i++) free(stems[i]);
    free(stems);
    free(given);
    return rc;
}

/* ---- bench ---------------------------------------------------------------------------------- */

/* Writes s as a JSON string: quotes, backslashes and control characters escaped; bytes that
 * are not valid UTF-8 become U+FFFD. */
static void json_str(FILE *f, const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    if (!s) n = 0;
    fputc('"', f);
    for (size_t i = 0; i < n;) {
        unsigned c = p[i];
        if (c == '"' || c == '\\') { fputc('\\', f); fputc((int)c, f); i++; continue; }
        if (c < 0x20) {
            switch (c) {
            case '\n': fputs("\\n", f); break;
            case '\t': fputs("\\t", f); break;
            case '\r': fputs("\\r", f); break;
            default: fprintf(f, "\\u%04x", c); break;
            }
            i++;
            continue;
        }
        if (c < 0x80) { fputc((int)c, f); i++; continue; }
        size_t len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
                   : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        int valid = len && i + len <= n;
        for (size_t k = 1; valid && k < len; k++) valid = (p[i + k] & 0xC0) == 0x80;
        if (valid && len == 3) {
            unsigned cp = ((c & 0x0Fu) << 12) | ((p[i + 1] & 0x3Fu) << 6);
            valid = cp >= 0x800 && !(cp >= 0xD800 && cp <= 0xDFFF);
        }
        if (valid && len == 4) {
            unsigned cp = ((c & 0x07u) << 18) | ((p[i + 1] & 0x3Fu) << 12);
            valid = cp >= 0x10000 && cp <= 0x10FFFF;
        }
        if (!valid) { fputs("\\ufffd", f); i++; continue; }
        fwrite(p + i, 1, len, f);
        i += len;
    }
    fputc('"', f);
}

static void json_num(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, "%.9g", v);
    else fputs("null", f);
}

/* One timed program: its launches and medians. */
typedef struct Timed {
    Bound bd;
    Grads gr;               /* training: the gradients */
    FcDevice *own;          /* training: a device handle of its own, to measure its peak */
    int64_t saved_bytes, planned_bytes, peak_bytes;
    int nl;                 /* launches */
    FcLaunchInfo *li;       /* [nl] */
    double *ms;             /* [nl], per-launch medians in milliseconds */
    double total_ms;        /* median of the whole forward, milliseconds */
    int64_t bytes;          /* sum of the launches' modelled bytes */
} Timed;

static void timed_free(Timed *t) {
    grads_free(&t->gr);
    bound_free(&t->bd);
    fc_device_free(t->own);
    free(t->li);
    free(t->ms);
    memset(t, 0, sizeof *t);
}

static double gbps_of(int64_t bytes, double ms) {
    return ms > 0 ? (double)bytes / (ms * 1e-3) / 1e9 : NAN;
}

/* Loads the block on dev and reads its launches (no timing yet). */
static int prepare_program(FcBlock *b, FcDevice *dev, Timed *t) {
    memset(t, 0, sizeof *t);
    int rc = bind(b, dev, &t->bd);
    if (rc) return rc;
    t->nl = fc_program_num_launches(t->bd.prog);
    if (t->nl < 0) t->nl = 0;
    t->li = calloc((size_t)t->nl + 1, sizeof *t->li);
    t->ms = calloc((size_t)t->nl + 1, sizeof *t->ms);
    if (!t->li || !t->ms) return oom();
    for (int i = 0; i < t->nl; i++) {
        FcStatus s = fc_program_launch_info(t->bd.prog, i, &t->li[i]);
        if (s != FC_OK)
            return report(s, "reading launch info", fc_program_last_error(t->bd.prog), 0);
        if (t->li[i].bytes > 0 && t->bytes <= INT64_MAX - t->li[i].bytes)
            t->bytes += t->li[i].bytes;
    }
    return 0;
}

/* Times the program on the given inputs: BENCH_WARMUP runs, then `repeat` timed ones (in
 * training, whole steps: forward and backward, then the memory figures). */
static int time_program(Timed *t, FcTensor **in, int repeat, const char *what) {
    FcStatus s = t->gr.gout ? fc_program_time_train(t->bd.prog, in, t->bd.out, t->gr.gout, t->gr.gin, BENCH_WARMUP, repeat,
                                                    &t->total_ms, t->ms)
                            : fc_program_time(t->bd.prog, in, t->bd.out, BENCH_WARMUP, repeat, &t->total_ms, t->ms);
    if (s != FC_OK) return report(s, what, fc_program_last_error(t->bd.prog), 0);
    if (t->gr.gout) {
        s = fc_program_planned_bytes(t->bd.prog, &t->planned_bytes);
        if (s == FC_OK) s = fc_device_memory(t->bd.dev, NULL, &t->peak_bytes);
        if (s != FC_OK) return report(s, what, fc_program_last_error(t->bd.prog), 0);
    }
    return 0;
}

static void json_program(FILE *f, const Timed *t, double stream) {
    fputs("{\"median_ms\": ", f);
    json_num(f, t->total_ms);
    if (t->gr.gout)
        fprintf(f, ", \"saved_bytes\": %" PRId64 ", \"planned_peak_bytes\": %" PRId64 ", \"peak_bytes\": %" PRId64,
                t->saved_bytes, t->planned_bytes, t->peak_bytes);
    fprintf(f, ", \"bytes\": %" PRId64 ", \"launches\": %d, \"gbps\": ", t->bytes, t->nl);
    json_num(f, gbps_of(t->bytes, t->total_ms));
    fputs(", \"kernels\": [", f);
    for (int i = 0; i < t->nl; i++) {
        const FcLaunchInfo *l = &t->li[i];
        fputs(i ? ", {\"name\": " : "{\"name\": ", f);
        json_str(f, l->name, l->name ? strlen(l->name) : 0);
        fputs(", \"ops\": [", f);
        const char *p = l->ops ? l->ops : "";
        int first = 1;
        while (*p) {
            const char *e = strchr(p, ',');
            size_t n = e ? (size_t)(e - p) : strlen(p);
            const char *q = p;
            size_t m = n;
            while (m && (*q == ' ' || *q == '\t')) { q++; m--; }
            while (m && (q[m - 1] == ' ' || q[m - 1] == '\t')) m--;
            if (m) {
                if (!first) fputs(", ", f);
                json_str(f, q, m);
                first = 0;
            }
            p += n;
            if (*p == ',') p++;
        }
        fprintf(f, "], \"bytes\": %" PRId64 ", \"flops\": %" PRId64 ", \"median_ms\": ", l->bytes,
                l->flops);
        json_num(f, t->ms[i]);
        fputs(", \"gbps\": ", f);
        double g = gbps_of(l->bytes, t->ms[i]);
        json_num(f, g);
        fputs(", \"roofline_fraction\": ", f);
        json_num(f, stream > 0 ? g / stream : NAN);
        fprintf(f, ", \"in_cache\": %s, \"runs_in\": %d}", g > stream ? "true" : "false", l->runs_in);
    }
    fputs("]}", f);
}

/* The roofline column: achieved GB/s as a percentage of the STREAM copy's, or "in cache" when
 * it beats it. A kernel faster than DRAM allows took its bytes from the caches (or wrote them
 * with non-temporal stores, which the STREAM copy does not use), so a fraction of the DRAM
 * roofline says nothing about it. Returns true for "in cache" (the table's footnote then). */
static bool roofline_cell(double gbps, double stream, char *buf, size_t n) {
    if (gbps > stream) {
        snprintf(buf, n, "%8s", "in cache");
        return true;
    }
    snprintf(buf, n, "%7.1f%%", stream > 0 ? 100.0 * gbps / stream : NAN);
    return false;
}

/* Prints one program's table; true when a line says "in cache". */
static bool table_program(const char *title, const Timed *t, double stream) {
    bool cached = false;
    char cell[32];
    printf("%s: %d launch%s\n", title, t->nl, t->nl == 1 ? "" : "es");
    printf("  %-4s %-28s %14s %12s %9s %8s  %s\n", "#", "kernel", "bytes", "median_us", "GB/s",
           "roofline", "ops");
    bool inside = false;
    for (int i = 0; i < t->nl; i++) {
        const FcLaunchInfo *l = &t->li[i];
        if (l->runs_in >= 0 && l->runs_in < t->nl) {   /* timed with the product that runs it */
            snprintf(cell, sizeof cell, "in #%d", l->runs_in);
            printf("  %-4d %-28s %14" PRId64 " %12s %9s %8s  %s\n", i, l->name ? l->name : "?", l->bytes, cell, "", "",
                   l->ops ? l->ops : "");
            inside = true;
            continue;
        }
        /* a product running others: their bytes and its own in its time */
        int64_t bytes = l->bytes;
        for (int j = 0; j < t->nl; j++)
            if (t->li[j].runs_in == i) bytes += t->li[j].bytes;
        double g = gbps_of(bytes, t->ms[i]);
        cached |= roofline_cell(g, stream, cell, sizeof cell);
        printf("  %-4d %-28s %14" PRId64 " %12.3f %9.2f %s  %s\n", i, l->name ? l->name : "?", l->bytes,
               1e3 * t->ms[i], g, cell, l->ops ? l->ops : "");
    }
    double g = gbps_of(t->bytes, t->total_ms);
    cached |= roofline_cell(g, stream, cell, sizeof cell);
    printf("  %-4s %-28s %14" PRId64 " %12.3f %9.2f %s\n", "", "total", t->bytes, 1e3 * t->total_ms, g, cell);
    if (inside)
        puts("  in #N: run by launch N, a product making its operands or running its epilogue a block of\n"
             "  rows at a time in the cache: timed in N's time, whose GB/s counts their bytes with its own");
    if (t->gr.gout)
        printf("  memory: saved %" PRId64 " bytes; planned peak %" PRId64 " bytes; measured peak %" PRId64 " bytes\n",
               t->saved_bytes, t->planned_bytes, t->peak_bytes);
    return cached;
}

/* Training: each program on a device handle of its own (so that its peak is its own), its
 * gradients seeded alike, its saved bytes. */
static int prepare_train(FcBlock *b, const Args *a, Timed *t) {
    FcDevice *own = NULL;
    int rc = open_device(a->device, &own);
    if (rc) return rc;
    rc = prepare_program(b, own, t);   /* clears *t */
    t->own = own;
    if (rc) return rc;
    for (int i = 0; i < t->bd.nin; i++) {
        FcStatus s = fc_block_random_input(b, i, 0, t->bd.in[i]);
        if (s != FC_OK) return report(s, "random input", fc_block_last_error(b), 0);
    }
    rc = grads_make(b, t->own, a, &t->gr);
    if (rc) return rc;
    FcTrainInfo ti;
    FcStatus s = fc_block_train_info(b, &ti);
    if (s != FC_OK) return report(s, "reading the training plan", fc_block_last_error(b), 0);
    t->saved_bytes = ti.saved_bytes;
    return 0;
}

static int cmd_bench(const Args *a) {
    FcBlock *bf = NULL, *be = NULL;
    FcDevice *dev = NULL;
    Timed tf = {0}, te = {0};
    int rc = compile(a, 1, 1, &bf);
    /* the eager baseline of training is eager autograd: every value the backward reads saved */
    Args ea = *a;
    if (a->train) ea.remat = "none";
    if (!rc) rc = compile(&ea, 0, 0, &be);
    if (rc) goto done;

    /* Both compilations must have the same signature: they run on the same tensors. */
    int nin = fc_block_num_inputs(bf), nout = fc_block_num_outputs(bf);
    if (nin != fc_block_num_inputs(be) || nout != fc_block_num_outputs(be)) {
        err_line("internal error: fused and eager compilations differ in their signature");
        rc = EX_INTERNAL;
        goto done;
    }
    rc = open_device(a->device, &dev);
    if (rc) goto done;
    /* A device that cannot measure it (the reference interpreter) gets no roofline. */
    double stream = NAN;
    FcStatus s = fc_device_stream_bandwidth(dev, &stream);
    if ((s == FC_ERR_USAGE || s == FC_ERR_UNSUPPORTED) && a->device == FC_DEVICE_REFERENCE) {
        warn_line("no STREAM bandwidth on this device: %s", fc_device_last_error(dev));
        stream = NAN;
    } else if (s != FC_OK) {
        /* FC_ERR_USAGE here: a bad FUSEC_CPU_GBPS (exit 2) */
        rc = report(s, "measuring the STREAM bandwidth", fc_device_last_error(dev), 1);
        goto done;
    }
    const char *given = a->device == FC_DEVICE_CPU ? getenv("FUSEC_CPU_GBPS") : NULL;

    if (a->train) {
        rc = prepare_train(bf, a, &tf);
        if (!rc) rc = prepare_train(be, a, &te);
        if (!rc) rc = time_program(&tf, tf.bd.in, a->repeat, "timing the fused training step");
        if (!rc) rc = time_program(&te, te.bd.in, a->repeat, "timing the eager training step");
        if (rc) goto done;
    } else {
        rc = prepare_program(bf, dev, &tf);
        if (!rc) rc = prepare_program(be, dev, &te);
        if (rc) goto done;
        /* The same random inputs (seed 0) feed both programs. */
        for (int i = 0; i < nin; i++) {
            s = fc_block_random_input(bf, i, 0, tf.bd.in[i]);
            if (s != FC_OK) { rc = report(s, "random input", fc_block_last_error(bf), 0); goto done; }
        }
        rc = time_program(&tf, tf.bd.in, a->repeat, "timing the fused block");
        if (!rc) rc = time_program(&te, tf.bd.in, a->repeat, "timing the eager block");
        if (rc) goto done;
    }

    double speedup = tf.total_ms > 0 ? te.total_ms / tf.total_ms : NAN;
    const char *desc = fc_device_description(dev);
    if (!desc || !*desc) desc = device_name(a->device);
    if (a->json) {
        fputs("{\"device\": ", stdout);
        json_str(stdout, desc, strlen(desc));
        fputs(", \"block\": ", stdout);
        const char *bn = fc_block_name(bf) ? fc_block_name(bf) : "";
        json_str(stdout, bn, strlen(bn));
        fprintf(stdout, ", \"warmup\": %d, \"repeat\": %d, ", BENCH_WARMUP, a->repeat);
        if (a->train) fputs("\"train\": true, ", stdout);
        fputs("\"fused\": ", stdout);
        json_program(stdout, &tf, stream);
        fputs(", \"eager\": ", stdout);
        json_program(stdout, &te, stream);
        fputs(", \"speedup\": ", stdout);
        json_num(stdout, speedup);
        fputs(", \"stream_gbps\": ", stdout);
        json_num(stdout, stream);
        fputs("}\n", stdout);
    } else {
        printf("device: %s\n", desc);
        printf("block %s: median of %d runs after %d warm-up runs; ", fc_block_name(bf) ? fc_block_name(bf) : "?",
               a->repeat, BENCH_WARMUP);
        if (given) printf("STREAM %g GB/s (given: FUSEC_CPU_GBPS)\n", stream);
        else printf("STREAM copy %.2f GB/s\n", stream);
        bool cached = table_program("fused", &tf, stream);
        cached |= table_program("eager", &te, stream);
        if (cached)
            puts("in cache: faster than the STREAM copy, so the bytes came from the caches (or were written with\n"
                 "  non-temporal stores, which the copy does not use), not DRAM; --json gives achieved / STREAM\n"
                 "  as roofline_fraction");
        printf("speedup fused over eager: %.2fx (%.3f us vs %.3f us)\n", speedup,
               1e3 * tf.total_ms, 1e3 * te.total_ms);
    }
    if (fflush(stdout) != 0) {
        err_line("writing to standard output: %s", strerror(errno));
        rc = EX_INPUT;
        goto done;
    }
    rc = 0;
done:
    timed_free(&te);
    timed_free(&tf);
    fc_device_free(dev);
    fc_block_free(be);
    fc_block_free(bf);
    return rc;
}

/* ---- memory of training (fusec mem) ------------------------------------------------------------ */

/* Overflow-checked arithmetic on byte counts: 0 on overflow. */
static int add64(int64_t a, int64_t b, int64_t *out) { return !__builtin_add_overflow(a, b, out); }
static int mul64(int64_t a, int64_t b, int64_t *out) { return !__builtin_mul_overflow(a, b, out); }
static int64_t ceil_div(int64_t a, int64_t n) { return a / n + (a % n != 0); }   /* a >= 0, n >= 1 */

/* Bytes per element of a param's gradient and optimizer state (docs/training.md): the gradient
 * has the param's dtype; AdamW keeps m and v in f32 (f64 for an f64 param) and an f32 master
 * copy of a param narrower than 4 bytes; SGD (no momentum) only that master copy; none
 * nothing. An integer param has no gradient and no state. */
static void state_bytes(FcDtype t, Optim opt, int64_t *grad, int64_t *optim) {
    int64_t sz = (int64_t)fc_dtype_size(t);
    int64_t master = sz < 4 ? 4 : 0, moment = sz > 4 ? sz : 4;
    int fl = is_float(t);
    *grad = fl ? sz : 0;
    *optim = !fl ? 0 : opt == OPTIM_ADAMW ? master + 2 * moment : opt == OPTIM_SGD ? master : 0;
}

typedef struct MemModel {
    /* one layer */
    int64_t params, param_bytes, grad_bytes, optim_bytes, state_bytes;
    FcTrainInfo ti;
    int nsaved_act;             /* saved values with bytes (params are kept by reference) */
    FcPlanMemory fwd;           /* the inference compile's forward plan */
    int64_t fwd_peak;           /* its inputs + outputs + workspace */
    int64_t bwd_workspace, out_grads, in_grads, transient;
    /* all layers, per device */
    int64_t param_dev, grad_dev, optim_dev, states_dev, act_dev, peak;
} MemModel;

/* Sums of one layer: 1 on success, 0 on overflow. */
static int mem_layer(FcBlock *bt, const Args *a, MemModel *m) {
    for (int i = 0; i < fc_block_num_inputs(bt); i++) {
        FcTensorInfo ti;
        if (fc_block_input_info(bt, i, &ti) != FC_OK) return 0;
        int64_t n = 1, g, o, x;
        for (int d = 0; d < ti.rank; d++)
            if (!mul64(n, ti.dims[d], &n)) return 0;
        if (!ti.is_param) {
            if (is_float(ti.dtype) && (!mul64(n, (int64_t)fc_dtype_size(ti.dtype), &x) || !add64(m->in_grads, x, &m->in_grads)))
                return 0;
            continue;
        }
        state_bytes(ti.dtype, a->optimizer, &g, &o);
        if (!add64(m->params, n, &m->params) || !mul64(n, (int64_t)fc_dtype_size(ti.dtype), &x) ||
            !add64(m->param_bytes, x, &m->param_bytes) || !mul64(n, g, &x) || !add64(m->grad_bytes, x, &m->grad_bytes) ||
            !mul64(n, o, &x) || !add64(m->optim_bytes, x, &m->optim_bytes))
            return 0;
    }
    for (int j = 0; j < fc_block_num_outputs(bt); j++) {
        FcTensorInfo ti;
        if (fc_block_output_info(bt, j, &ti) != FC_OK) return 0;
        if (!is_float(ti.dtype)) continue;
        int64_t x = (int64_t)fc_dtype_size(ti.dtype);
        for (int d = 0; d < ti.rank; d++)
            if (!mul64(x, ti.dims[d], &x)) return 0;
        if (!add64(m->out_grads, x, &m->out_grads)) return 0;
    }
    return add64(m->param_bytes, m->grad_bytes, &m->state_bytes) && add64(m->state_bytes, m->optim_bytes, &m->state_bytes);
}

/* The totals of --layers layers per device under ZeRO stage --zero: 1, or 0 on overflow. */
static int mem_model(const Args *a, MemModel *m) {
    int64_t L = a->layers, N = a->devices, p, g, o;
    if (!mul64(m->param_bytes, L, &p) || !mul64(m->grad_bytes, L, &g) || !mul64(m->optim_bytes, L, &o) ||
        !mul64(m->ti.saved_bytes, L, &m->act_dev))
        return 0;
    m->param_dev = a->zero >= 3 ? ceil_div(p, N) : p;
    m->grad_dev = a->zero >= 2 ? ceil_div(g, N) : g;
    m->optim_dev = a->zero >= 1 ? ceil_div(o, N) : o;
    /* the transient of one layer's backward: its workspace, the gradient flowing in and the one
     * flowing out, one layer's full gradients before they are reduce-scattered (stage >= 2) and
     * one layer's params gathered (stage 3) */
    m->transient = 0;
    if (!add64(m->bwd_workspace, m->out_grads, &m->transient) || !add64(m->transient, m->in_grads, &m->transient) ||
        (a->zero >= 2 && !add64(m->transient, m->grad_bytes, &m->transient)) ||
        (a->zero >= 3 && !add64(m->transient, m->param_bytes, &m->transient)))
        return 0;
    return add64(m->param_dev, m->grad_dev, &m->states_dev) && add64(m->states_dev, m->optim_dev, &m->states_dev) &&
           add64(m->states_dev, m->act_dev, &m->peak) && add64(m->peak, m->transient, &m->peak);
}

/* "3.38 GiB" */
static void human_bytes(int64_t b, char *buf, size_t n) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 6) { v /= 1024; u++; }
    if (u == 0) snprintf(buf, n, "%" PRId64 " B", b);
    else snprintf(buf, n, "%.2f %s", v, units[u]);
}

static double pct(int64_t part, int64_t whole) { return whole > 0 ? 100.0 * (double)part / (double)whole : 0.0; }

/* Prints a line of the table without its trailing spaces. */
static void put_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void put_line(const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    size_t n = strlen(buf);
    while (n > 0 && buf[n - 1] == ' ') n--;
    printf("%.*s\n", (int)n, buf);
}

/* One row of the table: a label, the bytes of one layer and per device (-1: blank). */
static void mem_row(const char *label, int64_t one, int64_t dev, const char *note) {
    char o[24] = "", d[24] = "", h[32] = "";
    if (one >= 0) snprintf(o, sizeof o, "%" PRId64, one);
    if (dev >= 0) {
        snprintf(d, sizeof d, "%" PRId64, dev);
        human_bytes(dev, h, sizeof h);
    }
    put_line("%-30s %18s %18s  %-11s %s", label, o, d, h, note);
}

static int mem_print_json(const Args *a, FcBlock *bt, const MemModel *m) {
    const char *bn = fc_block_name(bt) ? fc_block_name(bt) : "";
    fputs("{\"block\": ", stdout);
    json_str(stdout, bn, strlen(bn));
    printf(", \"layers\": %" PRId64 ", \"optimizer\": \"%s\", \"zero\": %d, \"devices\": %" PRId64 ", \"remat\": \"%s\", "
           "\"mem_budget\": ", a->layers, k_optims[a->optimizer], a->zero, a->devices, a->remat ? a->remat : "auto");
    if (a->mem_budget_set) printf("%" PRId64, a->mem_budget);
    else fputs("null", stdout);
    printf(", \"params\": %" PRId64 ", \"param_bytes\": %" PRId64 ", \"grad_bytes\": %" PRId64
           ", \"optimizer_bytes\": %" PRId64 ", \"model_state_bytes\": %" PRId64,
           m->params, m->param_bytes, m->grad_bytes, m->optim_bytes, m->state_bytes);
    printf(", \"param_bytes_per_device\": %" PRId64 ", \"grad_bytes_per_device\": %" PRId64
           ", \"optimizer_bytes_per_device\": %" PRId64 ", \"model_state_bytes_per_device\": %" PRId64,
           m->param_dev, m->grad_dev, m->optim_dev, m->states_dev);
    printf(", \"saved_activation_bytes\": %" PRId64 ", \"saved_values\": %d, \"saved_activation_values\": %d"
           ", \"floor_bytes\": %" PRId64 ", \"activation_bytes_per_device\": %" PRId64,
           m->ti.saved_bytes, m->ti.nsaved, m->nsaved_act, m->ti.floor_bytes, m->act_dev);
    printf(", \"recompute_flops\": %" PRId64 ", \"recomputed_ops\": %d, \"forward_flops\": %" PRId64
           ", \"backward_flops\": %" PRId64, m->ti.recompute_flops, m->ti.nrecomputed, m->ti.forward_flops,
           m->ti.backward_flops);
    printf(", \"backward_workspace_bytes\": %" PRId64 ", \"output_grad_bytes\": %" PRId64 ", \"input_grad_bytes\": %" PRId64
           ", \"backward_transient_bytes\": %" PRId64 ", \"peak_bytes_per_device\": %" PRId64,
           m->bwd_workspace, m->out_grads, m->in_grads, m->transient, m->peak);
    printf(", \"forward_input_bytes\": %" PRId64 ", \"forward_output_bytes\": %" PRId64
           ", \"forward_workspace_bytes\": %" PRId64 ", \"forward_peak_bytes\": %" PRId64,
           m->fwd.input_bytes, m->fwd.output_bytes, m->fwd.workspace_bytes, m->fwd_peak);
    fputs(", \"saved\": [", stdout);
    for (int i = 0; i < fc_block_train_num_saved(bt); i++) {
        FcSavedInfo si;
        if (fc_block_train_saved(bt, i, &si) != FC_OK) return report(FC_ERR_INTERNAL, "fusec mem", "reading a saved value", 0);
        const char *nm = si.tensor.name ? si.tensor.name : "";
        const char *dt = fc_dtype_name(si.tensor.dtype);
        fputs(i ? ", {\"name\": " : "{\"name\": ", stdout);
        json_str(stdout, nm, strlen(nm));
        printf(", \"op\": \"%s\", \"line\": %d, \"col\": %d, \"dtype\": \"%s\", \"shape\": [", si.op ? si.op : "", si.line,
               si.col, dt ? dt : "?");
        for (int d = 0; d < si.tensor.rank; d++) printf("%s%" PRId64, d ? ", " : "", si.tensor.dims[d]);
        printf("], \"param\": %s, \"bytes\": %" PRId64 "}", si.tensor.is_param ? "true" : "false", si.bytes);
    }
    fputs("], \"pareto\": [", stdout);
    for (int i = 0; i < fc_block_train_pareto_count(bt); i++) {
        int64_t b, f;
        if (fc_block_train_pareto(bt, i, &b, &f) != FC_OK) return report(FC_ERR_INTERNAL, "fusec mem", "reading the Pareto front", 0);
        printf("%s{\"bytes\": %" PRId64 ", \"flops\": %" PRId64 "}", i ? ", " : "", b, f);
    }
    fputs("]}\n", stdout);
    return 0;
}

static int mem_print_text(const Args *a, FcBlock *bt, const MemModel *m) {
    static const char *const stage_what[] = {"nothing sharded", "optimizer state sharded",
                                             "optimizer state and gradients sharded", "all model states sharded"};
    char label[96], dev[32];
    printf("block %s: %" PRId64 " layer%s; optimizer %s; ZeRO stage %d over %" PRId64 " device%s (%s); --remat %s",
           fc_block_name(bt), a->layers, a->layers == 1 ? "" : "s", k_optims[a->optimizer], a->zero, a->devices,
           a->devices == 1 ? "" : "s", stage_what[a->zero], a->remat ? a->remat : "auto");
    if (a->mem_budget_set) printf(" --mem-budget %" PRId64, a->mem_budget);
    printf("\n\n%-30s %18s %18s\n", "bytes", "one layer", "per device");
    snprintf(label, sizeof label, "params (%" PRId64 " elements)", m->params);
    mem_row(label, m->param_bytes, m->param_dev, a->zero >= 3 ? "sharded" : "");
    mem_row("gradients", m->grad_bytes, m->grad_dev, a->zero >= 2 ? "sharded" : "");
    mem_row("optimizer state", m->optim_bytes, m->optim_dev, a->zero >= 1 ? "sharded" : "");
    mem_row("model states", m->state_bytes, m->states_dev, "");
    snprintf(label, sizeof label, "saved activations (%d values)", m->nsaved_act);
    mem_row(label, m->ti.saved_bytes, m->act_dev, "every layer's, not sharded");
    mem_row("backward transient", -1, m->transient, "one layer's backward at a time");
    mem_row("peak", -1, m->peak, "model states + activations + transient");
    mem_row("forward peak (inference)", m->fwd_peak, -1, "inputs + outputs + workspace of the forward plan");
    int64_t total = 0;
    if (!add64(m->ti.forward_flops, m->ti.backward_flops, &total)) total = INT64_MAX;
    printf("\nflops of one layer: forward %" PRId64 ", backward %" PRId64 " (recompute included), recompute %" PRId64
           " = %.2f%% of forward + backward\n", m->ti.forward_flops, m->ti.backward_flops, m->ti.recompute_flops,
           pct(m->ti.recompute_flops, total));
    printf("\nsaved for the backward of one layer (%d values; params are kept by reference, 0 bytes):\n", m->ti.nsaved);
    for (int i = 0; i < fc_block_train_num_saved(bt); i++) {
        FcSavedInfo si;
        char shp[256], where[64] = "";
        if (fc_block_train_saved(bt, i, &si) != FC_OK) return report(FC_ERR_INTERNAL, "fusec mem", "reading a saved value", 0);
        shape_str(&si.tensor, shp, sizeof shp);
        if (si.line > 0) snprintf(where, sizeof where, " at %d:%d", si.line, si.col);
        human_bytes(si.bytes, dev, sizeof dev);
        put_line("  %-12s %-28s %14" PRId64 "  %-11s %s%s", si.tensor.name ? si.tensor.name : "?", shp, si.bytes, dev,
                 si.op ? si.op : "?", where);
    }
    int np = fc_block_train_pareto_count(bt);
    int64_t base = total - m->ti.recompute_flops;   /* forward + backward without recomputation */
    printf("\nPareto front of one layer: saved bytes against recomputed flops (--remat auto with\n"
           "--mem-budget takes the point with the fewest flops under the budget):\n");
    printf("  %18s %18s %12s\n", "saved bytes", "recompute flops", "of fwd+bwd");
    for (int i = 0; i < np; i++) {
        int64_t b, f, t;
        if (fc_block_train_pareto(bt, i, &b, &f) != FC_OK) return report(FC_ERR_INTERNAL, "fusec mem", "reading the Pareto front", 0);
        if (!add64(base, f, &t)) t = INT64_MAX;
        human_bytes(b, dev, sizeof dev);
        put_line("  %18" PRId64 " %18" PRId64 " %11.2f%%  %-11s %s", b, f, pct(f, t), dev,
                 b == m->ti.saved_bytes && f == m->ti.recompute_flops ? "<- this plan" : "");
    }
    return 0;
}

static int cmd_mem(const Args *a) {
    FcBlock *bt = NULL, *bi = NULL;
    MemModel m;
    memset(&m, 0, sizeof m);
    Args inf = *a;   /* the same block compiled for inference: the forward's own peak */
    inf.train = 0;
    inf.remat = NULL;
    inf.mem_budget_set = 0;
    int rc = compile(a, 1, 1, &bt);
    if (!rc) rc = compile(&inf, 1, 0, &bi);
    if (rc) goto done;
    FcStatus s = fc_block_train_info(bt, &m.ti);
    FcPlanMemory bwd;
    if (s == FC_OK) s = fc_block_plan_memory(bt, 1, &bwd);
    if (s == FC_OK) s = fc_block_plan_memory(bi, 0, &m.fwd);
    if (s != FC_OK) {
        rc = report(s, "fusec mem", fc_block_last_error(bt), 0);
        goto done;
    }
    m.bwd_workspace = bwd.workspace_bytes;
    for (int i = 0; i < fc_block_train_num_saved(bt); i++) {
        FcSavedInfo si;
        if (fc_block_train_saved(bt, i, &si) == FC_OK && si.bytes > 0) m.nsaved_act++;
    }
    if (!mem_layer(bt, a, &m) || !add64(m.fwd.input_bytes, m.fwd.output_bytes, &m.fwd_peak) ||
        !add64(m.fwd_peak, m.fwd.workspace_bytes, &m.fwd_peak)) {
        err_line("fusec mem: the memory of one layer of block '%s' overflows a 64-bit byte count", fc_block_name(bt));
        rc = EX_INPUT;
        goto done;
    }
    if (!mem_model(a, &m)) {
        rc = usage_error("--layers %" PRId64 ": the memory of %" PRId64 " layers of block '%s' overflows a 64-bit byte count",
                         a->layers, a->layers, fc_block_name(bt));
        goto done;
    }
    rc = a->json ? mem_print_json(a, bt, &m) : mem_print_text(a, bt, &m);
    if (!rc && fflush(stdout) != 0) {
        err_line("writing to standard output: %s", strerror(errno));
        rc = EX_INPUT;
    }
done:
    fc_block_free(bi);
    fc_block_free(bt);
    return rc;
}

/* ---- main ------------------------------------------------------------------------------------- */

int main(int argc, char **argv) {
    Args a;
    int rc = parse_args(argc, argv, &a);
    if (rc < 0) {
        if (a.mem_budget_set && !a.train)
            warn_line("--mem-budget has no effect without --train");
        if (a.remat && !a.train)
            warn_line("--remat has no effect without --train");
        install_signal_handlers();
        install_oom_handlers();
        switch (a.mode) {
        case MODE_COMPILE: rc = cmd_compile(&a); break;
        case MODE_RUN: rc = cmd_run(&a); break;
        case MODE_BENCH: rc = cmd_bench(&a); break;
        case MODE_MEM: rc = cmd_mem(&a); break;
        }
    }
    args_free(&a);
    free(g_stdin_src);
    if (fflush(stdout) != 0 && rc == 0) {
        err_line("writing to standard output: %s", strerror(errno));
        rc = EX_INPUT;
    }
    return rc;
}
