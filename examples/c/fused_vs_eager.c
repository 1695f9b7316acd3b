/* fused_vs_eager.c: a host program over the public API (fusec.h) and nothing else.
 *
 * It compiles one block twice, fused (the default) and eager (fc_options_set_fuse(opt, 0):
 * one launch per source op, as PyTorch eager would run it), loads both on one device (CUDA
 * when present, else the CPU), runs both on the same random inputs, checks that they agree,
 * and times both with fc_program_time: a table per program with one row per launch (its
 * ops, modelled bytes, median time, achieved GB/s), the totals, and the speedup of fused
 * over eager.
 *
 *   usage: fused_vs_eager [FILE.tf] [-D NAME=VALUE]... [--block NAME] [--device auto|cpu|cuda]
 *                         [--warmup N] [--repeat N] [--seed N]
 *   FILE.tf defaults to ../gpt2_block.tf (or what the build defined as FUSEC_EXAMPLE_TF).
 *   exit status: 0 ok; 1 an error (message on stderr); 2 bad usage; 3 the requested device
 *   is unavailable; 4 the fused and eager outputs disagree.
 *
 * The agreement check: each program is within fc_block_output_tolerance of the f64 oracle
 * (max |err| / max |ref|), so the two differ from each other by at most twice that.
 * Times are wall-clock medians in milliseconds (printed in microseconds); per-launch times
 * are taken launch by launch inside further runs of the whole program (fc_program_time), so
 * they add up to about the total.
 */
#define EXAMPLE_NAME "fused_vs_eager"
#include "example_common.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Args {
    const char *path;
    const char *device;    /* auto | cpu | cuda */
    int warmup, repeat;
    uint64_t seed;
} Args;

static void usage(FILE *f) {
    fprintf(f, "usage: fused_vs_eager [FILE.tf] [-D NAME=VALUE]... [--block NAME] [--device auto|cpu|cuda]\n"
               "                      [--warmup N] [--repeat N] [--seed N]\n"
               "Times a block (default %s) fused and eager and prints the speedup.\n",
            FUSEC_EXAMPLE_TF);
}

static int parse_int(const char *flag, const char *s, long long lo, long long hi, long long *v) {
    char *end;
    *v = strtoll(s, &end, 10);
    if (!*s || *end || *v < lo || *v > hi) {
        fprintf(stderr, "fused_vs_eager: %s needs an integer in %lld..%lld, got '%s'\n", flag, lo, hi, s);
        return EXIT_USAGE;
    }
    return 0;
}

static int parse_args(int argc, char **argv, Args *a, FcOptions *opt) {
    long long v;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        FcStatus st = FC_OK;
        if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0) {
            usage(stdout);
            return -1;
        } else if (strncmp(s, "-D", 2) == 0) {
            const char *def = s[2] ? s + 2 : (i + 1 < argc ? argv[++i] : NULL);
            const char *eq = def ? strchr(def, '=') : NULL;
            char name[128];
            if (!eq || eq == def || (size_t)(eq - def) >= sizeof name) {
                fprintf(stderr, "fused_vs_eager: -D needs NAME=VALUE\n");
                return EXIT_USAGE;
            }
            memcpy(name, def, (size_t)(eq - def));
            name[eq - def] = 0;
            if (parse_int("-D", eq + 1, INT64_MIN, INT64_MAX, &v)) return EXIT_USAGE;
            st = fc_options_set_dim(opt, name, (int64_t)v);
        } else if (strcmp(s, "--block") == 0 && i + 1 < argc) {
            st = fc_options_set_block(opt, argv[++i]);
        } else if (strcmp(s, "--device") == 0 && i + 1 < argc) {
            a->device = argv[++i];
            if (strcmp(a->device, "auto") && strcmp(a->device, "cpu") && strcmp(a->device, "cuda")) {
                fprintf(stderr, "fused_vs_eager: --device must be auto, cpu or cuda\n");
                return EXIT_USAGE;
            }
        } else if (strcmp(s, "--warmup") == 0 && i + 1 < argc) {
            if (parse_int(s, argv[++i], 0, 1000000, &v)) return EXIT_USAGE;
            a->warmup = (int)v;
        } else if (strcmp(s, "--repeat") == 0 && i + 1 < argc) {
            if (parse_int(s, argv[++i], 1, 1000000, &v)) return EXIT_USAGE;
            a->repeat = (int)v;
        } else if (strcmp(s, "--seed") == 0 && i + 1 < argc) {
            if (parse_int(s, argv[++i], 0, INT64_MAX, &v)) return EXIT_USAGE;
            a->seed = (uint64_t)v;
        } else if (s[0] == '-' && s[1]) {
            fprintf(stderr, "fused_vs_eager: unknown option '%s'\n", s);
            usage(stderr);
            return EXIT_USAGE;
        } else {
            a->path = s;
        }
        if (st != FC_OK) return report(s, st, fc_options_last_error(opt));
    }
    return 0;
}


/* One compiled variant (fused or eager) loaded on the device, with its outputs. */
typedef struct Variant {
    const char *label;
    FcBlock *blk;
    FcProgram *prog;
    FcTensor **out;          /* [nout] */
    double total_ms;
    double *launch_ms;       /* [fc_program_num_launches] */
} Variant;

typedef struct Run {
    FcOptions *opt;
    FcDevice *dev;
    Variant v[2];            /* fused, eager */
    int nin, nout;
    FcTensor **in;           /* [nin], shared by both variants */
} Run;

static void cleanup(Run *r) {
    for (int k = 0; k < 2; k++) {
        free_tensors(r->v[k].out, r->nout);
        free(r->v[k].launch_ms);
        fc_program_free(r->v[k].prog);
        fc_block_free(r->v[k].blk);
    }
    free_tensors(r->in, r->nin);
    fc_device_free(r->dev);
    fc_options_free(r->opt);
}

static int compile_variant(const char *path, FcOptions *opt, int fuse, Variant *v) {
    FcStatus s = fc_options_set_fuse(opt, fuse);
    if (s != FC_OK) return report("fc_options_set_fuse", s, fc_options_last_error(opt));
    s = fc_compile_file(path, opt, &v->blk);
    if (v->blk && *fc_block_diagnostics(v->blk)) fputs(fc_block_diagnostics(v->blk), stderr);
    if (s != FC_OK) return report(v->label, s, v->blk ? fc_block_last_error(v->blk) : NULL);
    return 0;
}


/* Input i as a tensor on dev, filled with fc_block_random_input: the data is made in a
 * tensor on `host` (the reference device: host memory) and copied over through a host
 * buffer, which works whatever kind dev is. */
static int make_input(FcBlock *blk, FcDevice *host, FcDevice *dev, int i, uint64_t seed, FcTensor **out) {
    FcTensorInfo ti;
    FcTensor *h = NULL;
    void *buf = NULL;
    FcStatus s;
    int rc = 0;
    if ((s = fc_block_input_info(blk, i, &ti)) != FC_OK) return report("fc_block_input_info", s, fc_block_last_error(blk));
    if ((rc = new_tensor(host, &ti, &h)) != 0 || (rc = new_tensor(dev, &ti, out)) != 0) goto done;
    if ((s = fc_block_random_input(blk, i, seed, h)) != FC_OK) {
        rc = report("fc_block_random_input", s, fc_block_last_error(blk));
        goto done;
    }
    size_t n = fc_tensor_nbytes(h);
    if (!(buf = malloc(n))) {
        fprintf(stderr, "fused_vs_eager: out of host memory (%zu bytes)\n", n);
        rc = EXIT_ERROR;
    } else if ((s = fc_tensor_copy_to_host(h, buf, n)) != FC_OK) {
        rc = report("fc_tensor_copy_to_host", s, fc_tensor_last_error(h));
    } else if ((s = fc_tensor_copy_from_host(*out, buf, n)) != FC_OK) {
        rc = report("fc_tensor_copy_from_host", s, fc_tensor_last_error(*out));
    }
done:
    free(buf);
    fc_tensor_free(h);
    return rc;   /* *out, if made, belongs to the caller even on failure */
}

static int print_table(const Variant *v) {
    int nl = fc_program_num_launches(v->prog);
    printf("%s: %d launch%s\n", v->label, nl, nl == 1 ? "" : "es");
    printf("  %-4s %-24s %12s %12s %9s  %s\n", "#", "kernel", "bytes", "median_us", "GB/s", "ops");
    int64_t total_bytes = 0;
    for (int l = 0; l < nl; l++) {
        FcLaunchInfo li;
        FcStatus s = fc_program_launch_info(v->prog, l, &li);
        if (s != FC_OK) return report("fc_program_launch_info", s, fc_program_last_error(v->prog));
        double ms = v->launch_ms[l];
        total_bytes += li.bytes;
        if (li.runs_in >= 0) {   /* run (and timed) inside launch runs_in, a CPU product */
            printf("  %-4d %-24s %12lld %9s #%-2d %9s  %s\n", l, li.name, (long long)li.bytes, "in", li.runs_in, "",
                   li.ops);
            continue;
        }
        printf("  %-4d %-24s %12lld %12.3f %9.2f  %s\n", l, li.name, (long long)li.bytes, ms * 1e3,
               ms > 0 ? (double)li.bytes / (ms * 1e6) : 0.0, li.ops);
    }
    printf("  %-4s %-24s %12lld %12.3f %9.2f\n", "", "total", (long long)total_bytes, v->total_ms * 1e3,
           v->total_ms > 0 ? (double)total_bytes / (v->total_ms * 1e6) : 0.0);
    return 0;
}

static int run(const Args *a, Run *r) {
    int rc;
    FcStatus s;
    r->v[0].label = "fused";
    r->v[1].label = "eager";
    for (int k = 0; k < 2; k++)
        if ((rc = compile_variant(a->path, r->opt, k == 0, &r->v[k])) != 0) return rc;
    FcBlock *blk = r->v[0].blk;
    r->nin = fc_block_num_inputs(blk);
    r->nout = fc_block_num_outputs(blk);
    if (fc_block_num_inputs(r->v[1].blk) != r->nin || fc_block_num_outputs(r->v[1].blk) != r->nout) {
        fprintf(stderr, "fused_vs_eager: the fused and eager blocks differ in their inputs or outputs\n");
        return EXIT_ERROR;
    }
    /* both variants run on the same tensors: each name must sit at the same position in the
     * eager block as in the fused one */
    for (int i = 0; i < r->nin + r->nout; i++) {
        FcTensorInfo ti;
        int j = i < r->nin ? i : i - r->nin, k = -1;
        s = i < r->nin ? fc_block_input_info(blk, j, &ti) : fc_block_output_info(blk, j, &ti);
        if (s == FC_OK && i < r->nin) s = fc_block_input_index(r->v[1].blk, ti.name, &k);
        else if (s == FC_OK) s = fc_block_output_index(r->v[1].blk, ti.name, &k);
        if (s != FC_OK) return report("looking up a tensor of the eager block", s, fc_block_last_error(r->v[1].blk));
        if (k != j) {
            fprintf(stderr, "fused_vs_eager: '%s' is at %d in the fused block, at %d in the eager one\n", ti.name, j,
                    k);
            return EXIT_ERROR;
        }
    }
    if ((rc = open_device(a->device, &r->dev)) != 0) return rc;
    printf("block %s on %s\n", fc_block_name(blk), fc_device_description(r->dev));
    for (int k = 0; k < 2; k++) {
        Variant *v = &r->v[k];
        if ((s = fc_program_new(v->blk, r->dev, &v->prog)) != FC_OK)
            return report(v->label, s, v->prog ? fc_program_last_error(v->prog) : fc_block_last_error(v->blk));
        v->launch_ms = calloc((size_t)fc_program_num_launches(v->prog) + 1, sizeof *v->launch_ms);
        v->out = calloc((size_t)r->nout + 1, sizeof *v->out);
        if (!v->launch_ms || !v->out) {
            fprintf(stderr, "fused_vs_eager: out of host memory\n");
            return EXIT_ERROR;
        }
    }

    /* inputs: seeded random data made on the host (a reference-device tensor), then copied */
    FcDevice *host = NULL;
    r->in = calloc((size_t)r->nin + 1, sizeof *r->in);
    if (!r->in) {
        fprintf(stderr, "fused_vs_eager: out of host memory\n");
        return EXIT_ERROR;
    }
    if ((s = fc_device_open(FC_DEVICE_REFERENCE, 0, &host)) != FC_OK) {
        rc = report("opening the reference device", s, host ? fc_device_last_error(host) : NULL);
        fc_device_free(host);
        return rc;
    }
    rc = 0;
    for (int i = 0; i < r->nin && rc == 0; i++) rc = make_input(blk, host, r->dev, i, a->seed, &r->in[i]);
    fc_device_free(host);
    if (rc) return rc;

    /* outputs, one set per variant */
    for (int j = 0; j < r->nout; j++) {
        FcTensorInfo ti;
        if ((s = fc_block_output_info(blk, j, &ti)) != FC_OK)
            return report("fc_block_output_info", s, fc_block_last_error(blk));
        for (int k = 0; k < 2; k++)
            if ((rc = new_tensor(r->dev, &ti, &r->v[k].out[j])) != 0) return rc;
    }

    /* time: fc_program_time runs `warmup` + `repeat` times; medians in ms */
    printf("median of %d runs after %d warm-up runs\n", a->repeat, a->warmup);
    for (int k = 0; k < 2; k++) {
        Variant *v = &r->v[k];
        if ((s = fc_program_time(v->prog, r->in, v->out, a->warmup, a->repeat, &v->total_ms, v->launch_ms)) != FC_OK)
            return report(v->label, s, fc_program_last_error(v->prog));
        if ((rc = print_table(v)) != 0) return rc;
    }
    if (r->v[0].total_ms > 0)
        printf("speedup fused over eager: %.2fx (%.3f us vs %.3f us; %d vs %d launches)\n",
               r->v[1].total_ms / r->v[0].total_ms, r->v[0].total_ms * 1e3, r->v[1].total_ms * 1e3,
               fc_program_num_launches(r->v[0].prog), fc_program_num_launches(r->v[1].prog));

    /* the two must compute the same function */
    int bad = 0;
    for (int j = 0; j < r->nout; j++) {
        FcTensorInfo ti;
        double tol, max_abs, max_rel;
        if ((s = fc_block_output_info(blk, j, &ti)) != FC_OK)
            return report("fc_block_output_info", s, fc_block_last_error(blk));
        if ((s = fc_block_output_tolerance(blk, j, &tol)) != FC_OK)
            return report("fc_block_output_tolerance", s, fc_block_last_error(blk));
        if ((s = fc_tensor_compare(r->v[0].out[j], r->v[1].out[j], &max_abs, &max_rel)) != FC_OK)
            return report("fc_tensor_compare", s, fc_tensor_last_error(r->v[0].out[j]));
        int ok = max_rel <= 2 * tol;
        bad += !ok;
        printf("output %s: fused vs eager max_abs=%.3g max_rel=%.3g (limit %.3g) %s\n", ti.name, max_abs, max_rel,
               2 * tol, ok ? "ok" : "MISMATCH");
    }
    return bad ? EXIT_MISMATCH : 0;
}

int main(int argc, char **argv) {
    Run r;
    memset(&r, 0, sizeof r);
    Args a = {FUSEC_EXAMPLE_TF, "auto", 3, 20, 0};
    FcStatus s = fc_options_new(&r.opt);
    if (s != FC_OK) return report("fc_options_new", s, NULL);
    int rc = parse_args(argc, argv, &a, r.opt);
    if (rc == 0) rc = run(&a, &r);
    cleanup(&r);
    return rc < 0 ? 0 : rc;
}
