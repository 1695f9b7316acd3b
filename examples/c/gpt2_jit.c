/* gpt2_jit.c: a host program over the public API (fusec.h) and nothing else.
 *
 * It JIT-compiles a GPT-2 block from a .tf file, loads it on the best device present (CUDA
 * when fc_device_open(FC_DEVICE_CUDA) succeeds, else the CPU), fills the inputs with seeded
 * random data, runs it, prints every output's shape and checksums, and checks each output
 * against the reference interpreter (FC_DEVICE_REFERENCE: plain C, f64 accumulation) with
 * the block's own tolerance (fc_block_output_tolerance).
 *
 *   usage: gpt2_jit [FILE.tf] [-D NAME=VALUE]... [--block NAME] [--device auto|cpu|cuda]
 *                   [--no-fuse] [--seed N]
 *   FILE.tf defaults to ../gpt2_block.tf (or what the build defined as FUSEC_EXAMPLE_TF).
 *   exit status: 0 all outputs within tolerance; 1 an error (message on stderr); 2 bad
 *   usage; 3 the requested device is unavailable; 4 an output over its tolerance.
 *
 * Ownership, as fusec.h states it: every handle this program gets it frees, on every path,
 * with the matching _free (which accept NULL). fc_compile_file and fc_program_new may hand
 * back a handle together with an error status, so that its error text can be read; it is
 * freed all the same.
 */
#define EXAMPLE_NAME "gpt2_jit"
#include "example_common.h"

#include <math.h>   /* NAN, INFINITY, isfinite: macros, no libm needed */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- host-side element access (for checksums): every FcDtype ------------------------------- */
static double pow2(int e) {
    double r = 1.0;
    for (; e > 0; e--) r *= 2.0;
    for (; e < 0; e++) r *= 0.5;
    return r;
}
static double nan_value(void) { return (double)NAN; }
static double inf_value(void) { return (double)INFINITY; }

/* A float with `mbits` mantissa bits, exponent field `e` (bias `bias`) and mantissa `m`. */
static double decode_float(int neg, int e, int m, int mbits, int bias) {
    double v = e == 0 ? (double)m * pow2(1 - bias - mbits) : (double)(m + (1 << mbits)) * pow2(e - bias - mbits);
    return neg ? -v : v;
}

static double load_elem(FcDtype t, const void *data, size_t i) {
    const unsigned char *p = data;
    switch (t) {
    case FC_F64: { double v; memcpy(&v, p + 8 * i, 8); return v; }
    case FC_F32: { float v; memcpy(&v, p + 4 * i, 4); return v; }
    case FC_BF16: {
        uint16_t h; memcpy(&h, p + 2 * i, 2);
        uint32_t w = (uint32_t)h << 16;
        float v; memcpy(&v, &w, 4);
        return v;
    }
    case FC_F16: {
        uint16_t h; memcpy(&h, p + 2 * i, 2);
        int e = (h >> 10) & 31, m = h & 1023;
        if (e == 31) return m ? nan_value() : (h >> 15 ? -inf_value() : inf_value());
        return decode_float(h >> 15, e, m, 10, 15);
    }
    case FC_F8E4M3: {   /* no infinities; S.1111.111 is NaN */
        unsigned b = p[i];
        if ((b & 0x7F) == 0x7F) return nan_value();
        return decode_float((int)(b >> 7), (int)(b >> 3) & 15, (int)b & 7, 3, 7);
    }
    case FC_F8E5M2: {
        unsigned b = p[i];
        int e = (int)(b >> 2) & 31, m = (int)b & 3;
        if (e == 31) return m ? nan_value() : (b >> 7 ? -inf_value() : inf_value());
        return decode_float((int)(b >> 7), e, m, 2, 15);
    }
    case FC_I32: { int32_t v; memcpy(&v, p + 4 * i, 4); return (double)v; }
    case FC_I64: { int64_t v; memcpy(&v, p + 8 * i, 8); return (double)v; }
    case FC_BOOL: return p[i] ? 1.0 : 0.0;
    case FC_I8: { int8_t v; memcpy(&v, p + i, 1); return (double)v; }
    default: return nan_value();
    }
}

static void print_type(const FcTensorInfo *ti) {
    printf("%s[", fc_dtype_name(ti->dtype));
    for (int d = 0; d < ti->rank; d++) printf("%s%lld", d ? "," : "", (long long)ti->dims[d]);
    printf("]");
}

/* ---- the program --------------------------------------------------------------------------- */
typedef struct Args {
    const char *path;
    const char *block;
    const char *device;    /* auto | cpu | cuda */
    int fuse;
    uint64_t seed;
} Args;

static void usage(FILE *f) {
    fprintf(f, "usage: gpt2_jit [FILE.tf] [-D NAME=VALUE]... [--block NAME] [--device auto|cpu|cuda]\n"
               "                [--no-fuse] [--seed N]\n"
               "JIT-compiles a block (default %s), runs it on the best device present and\n"
               "checks every output against the reference interpreter.\n",
            FUSEC_EXAMPLE_TF);
}

/* Parses argv into *a and the dims into opt. Returns 0, or an exit status. */
static int parse_args(int argc, char **argv, Args *a, FcOptions *opt) {
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0) {
            usage(stdout);
            return -1;
        } else if (strncmp(s, "-D", 2) == 0) {
            const char *def = s[2] ? s + 2 : (i + 1 < argc ? argv[++i] : NULL);
            const char *eq = def ? strchr(def, '=') : NULL;
            if (!eq || eq == def || !eq[1]) {
                fprintf(stderr, "gpt2_jit: -D needs NAME=VALUE\n");
                return EXIT_USAGE;
            }
            char name[128], *end;
            if ((size_t)(eq - def) >= sizeof name) {
                fprintf(stderr, "gpt2_jit: -D %s: name too long\n", def);
                return EXIT_USAGE;
            }
            memcpy(name, def, (size_t)(eq - def));
            name[eq - def] = 0;
            long long v = strtoll(eq + 1, &end, 10);
            if (*end) {
                fprintf(stderr, "gpt2_jit: -D %s: '%s' is not an integer\n", name, eq + 1);
                return EXIT_USAGE;
            }
            FcStatus st = fc_options_set_dim(opt, name, (int64_t)v);
            if (st != FC_OK) return report("-D", st, fc_options_last_error(opt));
        } else if (strcmp(s, "--block") == 0 && i + 1 < argc) {
            a->block = argv[++i];
            FcStatus st = fc_options_set_block(opt, a->block);
            if (st != FC_OK) return report("--block", st, fc_options_last_error(opt));
        } else if (strcmp(s, "--device") == 0 && i + 1 < argc) {
            a->device = argv[++i];
            if (strcmp(a->device, "auto") && strcmp(a->device, "cpu") && strcmp(a->device, "cuda")) {
                fprintf(stderr, "gpt2_jit: --device must be auto, cpu or cuda\n");
                return EXIT_USAGE;
            }
        } else if (strcmp(s, "--seed") == 0 && i + 1 < argc) {
            char *end;
            a->seed = strtoull(argv[++i], &end, 10);
            if (*end) {
                fprintf(stderr, "gpt2_jit: --seed needs an integer\n");
                return EXIT_USAGE;
            }
        } else if (strcmp(s, "--no-fuse") == 0) {
            a->fuse = 0;
            FcStatus st = fc_options_set_fuse(opt, 0);
            if (st != FC_OK) return report("--no-fuse", st, fc_options_last_error(opt));
        } else if (s[0] == '-' && s[1]) {
            fprintf(stderr, "gpt2_jit: unknown option '%s'\n", s);
            usage(stderr);
            return EXIT_USAGE;
        } else {
            a->path = s;
        }
    }
    return 0;
}


/* The state of one run; everything in it is freed by cleanup(). */
typedef struct Run {
    FcOptions *opt;
    FcBlock *blk;
    FcDevice *dev, *ref;
    FcProgram *prog, *refprog;
    int nin, nout;
    FcTensor **in, **out;          /* [nin], [nout] on dev */
    FcTensor **rin, **rout;        /* [nin], [nout] on the reference device */
    void *buf;                     /* host staging buffer */
} Run;

static void cleanup(Run *r) {
    free_tensors(r->in, r->nin);
    free_tensors(r->out, r->nout);
    free_tensors(r->rin, r->nin);
    free_tensors(r->rout, r->nout);
    free(r->buf);
    fc_program_free(r->prog);
    fc_program_free(r->refprog);
    fc_device_free(r->dev);
    fc_device_free(r->ref);
    fc_block_free(r->blk);
    fc_options_free(r->opt);
}


/* Grows r->buf to n bytes. */
static int staging(Run *r, size_t n, size_t *cap) {
    if (n <= *cap) return 0;
    void *p = realloc(r->buf, n);
    if (!p) {
        fprintf(stderr, "gpt2_jit: out of host memory (%zu bytes)\n", n);
        return EXIT_ERROR;
    }
    r->buf = p;
    *cap = n;
    return 0;
}

static int run(const Args *a, Run *r) {
    int rc;
    FcStatus s;

    /* compile: on failure the block still carries its diagnostics (file:line:col: error: ...) */
    printf("compiling %s (%s)\n", a->path, a->fuse ? "fused" : "eager");
    s = fc_compile_file(a->path, r->opt, &r->blk);
    if (r->blk && *fc_block_diagnostics(r->blk)) fputs(fc_block_diagnostics(r->blk), stderr);
    if (s != FC_OK) return report("compile", s, r->blk ? fc_block_last_error(r->blk) : NULL);
    r->nin = fc_block_num_inputs(r->blk);
    r->nout = fc_block_num_outputs(r->blk);
    printf("block %s: %d inputs, %d outputs\n", fc_block_name(r->blk), r->nin, r->nout);

    if ((rc = open_device(a->device, &r->dev)) != 0) return rc;
    if ((s = fc_device_open(FC_DEVICE_REFERENCE, 0, &r->ref)) != FC_OK)
        return report("opening the reference device", s, r->ref ? fc_device_last_error(r->ref) : NULL);
    printf("device: %s\n", fc_device_description(r->dev));

    /* JIT: fc_program_new compiles the kernels for the device */
    if ((s = fc_program_new(r->blk, r->dev, &r->prog)) != FC_OK)
        return report("loading the block", s, r->prog ? fc_program_last_error(r->prog) : fc_block_last_error(r->blk));
    if ((s = fc_program_new(r->blk, r->ref, &r->refprog)) != FC_OK)
        return report("loading the block on the reference device", s,
                      r->refprog ? fc_program_last_error(r->refprog) : fc_block_last_error(r->blk));
    int nl = fc_program_num_launches(r->prog);
    printf("%d launch%s:", nl, nl == 1 ? "" : "es");
    for (int l = 0; l < nl; l++) {
        FcLaunchInfo li;
        if ((s = fc_program_launch_info(r->prog, l, &li)) != FC_OK)
            return report("fc_program_launch_info", s, fc_program_last_error(r->prog));
        printf(" %s", li.name);
    }
    printf("\n");

    r->in = calloc((size_t)r->nin + 1, sizeof *r->in);
    r->rin = calloc((size_t)r->nin + 1, sizeof *r->rin);
    r->out = calloc((size_t)r->nout + 1, sizeof *r->out);
    r->rout = calloc((size_t)r->nout + 1, sizeof *r->rout);
    if (!r->in || !r->rin || !r->out || !r->rout) {
        fprintf(stderr, "gpt2_jit: out of host memory\n");
        return EXIT_ERROR;
    }
    size_t cap = 0;

    /* inputs: random data made on the reference device (host memory), staged through a host
     * buffer into the device's tensor, which works for every device kind */
    for (int i = 0; i < r->nin; i++) {
        FcTensorInfo ti;
        if ((s = fc_block_input_info(r->blk, i, &ti)) != FC_OK)
            return report("fc_block_input_info", s, fc_block_last_error(r->blk));
        if ((rc = new_tensor(r->ref, &ti, &r->rin[i])) != 0 || (rc = new_tensor(r->dev, &ti, &r->in[i])) != 0)
            return rc;
        if ((s = fc_block_random_input(r->blk, i, a->seed, r->rin[i])) != FC_OK)
            return report("fc_block_random_input", s, fc_block_last_error(r->blk));
        size_t n = fc_tensor_nbytes(r->rin[i]);
        if ((rc = staging(r, n, &cap)) != 0) return rc;
        if ((s = fc_tensor_copy_to_host(r->rin[i], r->buf, n)) != FC_OK)
            return report("fc_tensor_copy_to_host", s, fc_tensor_last_error(r->rin[i]));
        if ((s = fc_tensor_copy_from_host(r->in[i], r->buf, n)) != FC_OK)
            return report("fc_tensor_copy_from_host", s, fc_tensor_last_error(r->in[i]));
        printf("  input  %-10s %s", ti.name, ti.is_param ? "param " : "");
        print_type(&ti);
        printf("\n");
    }
    /* outputs: poisoned (all bytes 0xFF: NaN in every float dtype) so that an element the
     * run does not write cannot pass the check */
    for (int j = 0; j < r->nout; j++) {
        FcTensorInfo ti;
        if ((s = fc_block_output_info(r->blk, j, &ti)) != FC_OK)
            return report("fc_block_output_info", s, fc_block_last_error(r->blk));
        if ((rc = new_tensor(r->ref, &ti, &r->rout[j])) != 0 || (rc = new_tensor(r->dev, &ti, &r->out[j])) != 0)
            return rc;
        size_t n = fc_tensor_nbytes(r->out[j]);
        if ((rc = staging(r, n, &cap)) != 0) return rc;
        memset(r->buf, 0xFF, n);
        if ((s = fc_tensor_copy_from_host(r->out[j], r->buf, n)) != FC_OK)
            return report("fc_tensor_copy_from_host", s, fc_tensor_last_error(r->out[j]));
        if ((s = fc_tensor_copy_from_host(r->rout[j], r->buf, n)) != FC_OK)
            return report("fc_tensor_copy_from_host", s, fc_tensor_last_error(r->rout[j]));
    }

    if ((s = fc_program_run(r->prog, r->in, r->out)) != FC_OK)
        return report("run", s, fc_program_last_error(r->prog));
    if ((s = fc_program_run(r->refprog, r->rin, r->rout)) != FC_OK)
        return report("reference run", s, fc_program_last_error(r->refprog));

    int bad = 0;
    for (int j = 0; j < r->nout; j++) {
        FcTensorInfo ti;
        double tol, max_abs, max_rel;
        if ((s = fc_block_output_info(r->blk, j, &ti)) != FC_OK)
            return report("fc_block_output_info", s, fc_block_last_error(r->blk));
        size_t n = fc_tensor_nbytes(r->out[j]);
        if ((s = fc_tensor_copy_to_host(r->out[j], r->buf, n)) != FC_OK)
            return report("fc_tensor_copy_to_host", s, fc_tensor_last_error(r->out[j]));
        double sum = 0, asum = 0;
        size_t count = n / fc_dtype_size(ti.dtype), nonfinite = 0;
        for (size_t k = 0; k < count; k++) {
            double v = load_elem(ti.dtype, r->buf, k);
            if (!isfinite(v)) {
                nonfinite++;
                continue;
            }
            sum += v;
            asum += v < 0 ? -v : v;
        }
        if ((s = fc_block_output_tolerance(r->blk, j, &tol)) != FC_OK)
            return report("fc_block_output_tolerance", s, fc_block_last_error(r->blk));
        if ((s = fc_tensor_compare(r->out[j], r->rout[j], &max_abs, &max_rel)) != FC_OK)
            return report("fc_tensor_compare", s, fc_tensor_last_error(r->out[j]));
        int ok = max_rel <= tol;
        bad += !ok;
        printf("  output %-10s ", ti.name);
        print_type(&ti);
        printf(" sum=%.6g sum|x|=%.6g non-finite=%zu\n", sum, asum, nonfinite);
        printf("    vs reference: max_abs_err=%.3g max_rel_err=%.3g tol=%.3g %s\n", max_abs, max_rel, tol,
               ok ? "ok" : "MISMATCH");
    }
    if (bad) {
        fprintf(stderr, "gpt2_jit: %d output%s over tolerance\n", bad, bad == 1 ? "" : "s");
        return EXIT_MISMATCH;
    }
    printf("all %d output%s match the reference\n", r->nout, r->nout == 1 ? "" : "s");
    return 0;
}

int main(int argc, char **argv) {
    Run r;
    memset(&r, 0, sizeof r);
    Args a = {FUSEC_EXAMPLE_TF, NULL, "auto", 1, 0};
    printf("fusec %s (header %s)\n", fc_version(), FUSEC_VERSION);
    FcStatus s = fc_options_new(&r.opt);
    if (s != FC_OK) return report("fc_options_new", s, NULL);
    int rc = parse_args(argc, argv, &a, r.opt);
    if (rc == 0) rc = run(&a, &r);
    cleanup(&r);
    return rc < 0 ? 0 : rc;
}
