/* test_ops.c: every op of the table, on the CPU backend (fused and eager, CPU-shaped and
 * GPU-shaped schedules) against the reference interpreter, through the public API.
 *
 * Each case is a small block written in the language, with shapes that are not multiples
 * of any block or vector width, sizes of 1, broadcasting and negative axes. Inputs are fresh
 * seeded random data (never zeros; positive where an op needs it), outputs are poisoned with
 * NaN before each run, and every element is compared within the documented tolerance.
 * Every generated program's kernels are also compiled by NVRTC for sm_80 and sm_90 where
 * NVRTC is present. A final check fails if some op of ops.def has no case, and a planted
 * wrong result shows the comparison can fail.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusec.h"
#include "ir.h"
#include "nvrtc.h"

typedef struct Case {
    const char *name;
    const char *ops;      /* op names the case covers, space-separated */
    const char *src;
} Case;

#define HDR "dim A = 3, B = 5, C = 7, D = 1\n"
static const Case cases[] = {
    {"unary", "neg abs exp sqrt rsqrt recip square tanh sigmoid relu silu erf ndtr sin cos log",
     HDR "block f(x: f32[B, C], p: f32[C]) {\n"
     "  q = abs(p) + 0.5\n"
     "  return neg(x), abs(x), exp(x), sqrt(q), rsqrt(q), recip(q), square(x), tanh(x), sigmoid(x), relu(x), silu(x), erf(x), ndtr(x), sin(x), cos(x), log(q)\n}\n"},
    {"unary_f64", "exp log tanh erf ndtr", HDR "block f(x: f64[A, C]) { return exp(x), log(abs(x) + 1), tanh(x), erf(x), ndtr(x) }\n"},
    {"binary", "add sub mul div pow maximum minimum",
     HDR "block f(x: f32[A, B, C], y: f32[B, 1], z: f32[C]) {\n"
     "  return x + y, x - z, x * y, x / (abs(z) + 0.5), pow(abs(x) + 0.1, z), maximum(x, y), minimum(x, z), add(x, 2), sub(1, x), mul(x, 0.5), div(x, 3)\n}\n"},
    {"compare_where", "lt le gt ge eq ne where",
     HDR "block f(x: f32[B, C], y: f32[C]) {\n"
     "  return where(x < y, x, y), where(x <= 0, 1.0, x), x > y, x >= y, x == x, x != y\n}\n"},
    {"cast", "cast", HDR "block f(x: f32[B, C], i: i32[B, C]) {\n"
                     "  return cast(x * 10, i32), cast(i, f32) * x, cast(x, bf16), cast(x, f16), cast(x, f64), cast(x, f8e4m3), cast(x * 100, f8e5m2), cast(x, bool), cast(i, i64)\n}\n"},
    {"reduce", "sum mean max min",
     HDR "block f(x: f32[A, B, C]) {\n"
     "  return sum(x, axis=-1), mean(x, axis=[0, 2], keepdim=true), max(x, axis=1), min(x), sum(x, axis=0, keepdim=true), max(x, axis=[-1, -2])\n}\n"},
    {"reduce_int", "sum max", HDR "block f(i: i32[B, C]) { return sum(i, axis=-1), max(i, axis=0) }\n"},
    {"softmax", "softmax log_softmax",
     HDR "block f(x: f32[A, B, C]) { return softmax(x), log_softmax(x, axis=1), softmax(x * 1000, axis=-1) }\n"},
    {"norms", "layernorm rmsnorm",
     HDR "block f(x: f32[A, B, C], g: f32[C], b: f32[C], g2: f32[B, C]) {\n"
     "  return layernorm(x, g, b), layernorm(x, eps=1e-3), rmsnorm(x, g), layernorm(x, g2, axis=[-2, -1]), rmsnorm(x, axis=-1)\n}\n"},
    {"attention", "attention causal_mask",
     HDR "block f(q: f32[A, B, C], k: f32[A, 6, C], v: f32[A, 6, 4]) {\n"
     "  return attention(q, k, v), attention(q, k, v, causal=true, scale=0.3), causal_mask(q @ transpose(k))\n}\n"},
    {"gelu", "gelu", HDR "block f(x: f32[B, C]) { return gelu(x), gelu(x, approx=\"tanh\") }\n"},
    {"shape", "reshape transpose broadcast concat split slice",
     HDR "block f(x: f32[A, B, C], y: f32[A, 2, C]) {\n"
     "  a, b, c = split(x, [1, 2, 2], axis=1)\n"
     "  p, q = split(y, 2, axis=-2)\n"
     "  return reshape(x, [B, -1]), transpose(x, [2, 0, 1]), transpose(x), broadcast(y, [2, A, 2, C]), concat([x, y], axis=1), a, c, q, slice(x, -1, 1, -1), slice(x, 2, 6, 0, -2), slice(x, 0, -1, -100, -1)\n}\n"},
    {"generators", "iota full", HDR "block f(x: f32[B, C]) { return x + cast(iota([B, C], axis=1), f32), full([C], 2.5) * x, iota([A, B], 0, i64) }\n"},
    {"gather", "gather", HDR "block f(t: f32[C, A], i: i32[B, 2]) { return gather(t, i) }\n"},
    {"scatter_add", "scatter_add",
     HDR "block f(x: f32[B, 2, C], i: i32[B, 2], y: bf16[A, C], j: i64[A], z: f64[B, 2], k: i32[A, 3], l: i64[A]) {\n"
     "  return scatter_add(x, i, 4), scatter_add(y, j, 1), scatter_add(z, i, C) * 2.0, scatter_add(k, l, B), scatter_add(exp(x), i, C)\n}\n"},
    {"dropout", "dropout dropout_mask",
     HDR "block f(x: f32[A, B, C], y: bf16[B, C], z: f64[C], s: f32[]) {\n"
     "  m = where(dropout_mask([A, B, C], 0.9, seed=0), x, 0.0)\n"
     "  return dropout(x, 0.3, seed=7), dropout(y, 0.5, seed=-3), dropout(z, 0, seed=1), dropout(s, 0.1, seed=2), dropout_mask([B, C], 0.25, seed=123456789012), m\n}\n"},
    {"cross_entropy", "cross_entropy",
     HDR "block f(x: f32[A, B, C], y: i32[A, B], z: f64[C], w: i64[], v: bf16[B, C], u: i64[B]) {\n"
     "  return cross_entropy(x, y), cross_entropy(z, w), cross_entropy(v, u), cross_entropy(x * 100, y) + 1\n}\n"},
    {"matmul", "matmul",
     HDR "block f(x: f32[A, B, C], w: f32[C, 6], v: f32[C], y: f32[A, C, 4], m: f32[1, C, 3]) {\n"
     "  return x @ w, x @ v, v @ w, x @ y, x @ m\n}\n"},
    {"narrow", "add mul exp", HDR "block f(x: bf16[B, C], y: f16[B, C], z: f64[C]) { return x * 0.5 + x, exp(y), x + y, y * z }\n"},
    {"bool_ops", "where", HDR "block f(x: f32[B, C], m: bool[B, C]) { return where(m, x, -x), m }\n"},
    {"rank0", "add mul", HDR "block f(s: f32[], x: f32[D, C]) { return s * x + s, s }\n"},
    {"identity", "neg", HDR "block f(x: f32[B, C]) { y = reshape(x, [C, B]); return x, y, neg(x) }\n"},
    /* compiled --precision f8 (below): every intermediate E4M3 with its slot's scale, index maps
     * of f8 values, a value read twice, a product */
    {"f8", "fp8_scale fp8_quant fp8_dequant",
     HDR "block f(x: f32[A, B, C], g: f32[C], w: f32[C, 6]) {\n"
     "  h = layernorm(x, g) * 40.0\n"
     "  t = transpose(h, [0, 2, 1])\n"
     "  u = gelu(h) + h * h + transpose(sum(t, axis=2, keepdim=true), [0, 2, 1]) / 1000.0\n"
     "  return u @ w, reshape(t, [A, -1]) * 0.001\n}\n"},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))
/* the --precision a case compiles with (NULL: keep) */
static const char *case_precision(const Case *c) { return strcmp(c->name, "f8") == 0 ? "f8" : NULL; }

static int failures;
#define FAIL(...) (fprintf(stderr, "FAIL: " __VA_ARGS__), fputc('\n', stderr), failures++)

static FcTensor *new_tensor(FcDevice *d, const FcTensorInfo *ti) {
    FcTensor *t = NULL;
    if (fc_tensor_new(d, ti->dtype, ti->rank, ti->dims, &t) != FC_OK) return NULL;
    return t;
}

/* Fills an output with NaN (or 0x5A bytes for non-float dtypes) so unwritten elements show. */
static void poison(FcTensor *t, FcDtype dt) {
    size_t n = fc_tensor_nbytes(t);
    unsigned char *buf = malloc(n ? n : 1);
    if (!buf) return;
    if (dt == FC_F32) for (size_t i = 0; i < n / 4; i++) ((float *)buf)[i] = NAN;
    else if (dt == FC_F64) for (size_t i = 0; i < n / 8; i++) ((double *)buf)[i] = NAN;
    else if (dt == FC_F16 || dt == FC_BF16) for (size_t i = 0; i < n / 2; i++) ((uint16_t *)buf)[i] = dt == FC_F16 ? 0x7e00 : 0x7fc0;
    else if (dt == FC_F8E4M3 || dt == FC_F8E5M2) memset(buf, 0x7f, n);
    else memset(buf, 0x5a, n);
    fc_tensor_copy_from_host(t, buf, n);
    free(buf);
}

/* Runs block b on device kind dk into fresh outputs; inputs given as host copies. At f8 the
 * program runs until its scales settle (delayed scaling: fusec run does the same) and once more,
 * and the block takes the scales of that run, which the reference then uses. */
static int run_on(FcBlock *b, FcDevice *d, FcTensor **ins, FcTensor **outs) {
    FcProgram *p = NULL;
    FcStatus s = fc_program_new(b, d, &p);
    if (s != FC_OK) {
        FAIL("program_new: %s", p ? fc_program_last_error(p) : fc_block_last_error(b));
        fc_program_free(p);
        return -1;
    }
    for (int j = 0; j < fc_block_num_outputs(b); j++) {
        FcTensorInfo ti;
        fc_block_output_info(b, j, &ti);
        poison(outs[j], ti.dtype);
    }
    int nslots = fc_block_num_fp8_slots(b);
    double sc[64], prev[64];
    for (int r = 0; s == FC_OK && nslots > 0 && nslots <= 64 && r < nslots + 2; r++) {
        if ((s = fc_program_run(p, ins, outs)) == FC_OK) s = fc_program_fp8_scales(p, sc, nslots);
        if (r > 0 && memcmp(sc, prev, sizeof(double) * (size_t)nslots) == 0) break;
        memcpy(prev, sc, sizeof(double) * (size_t)nslots);
    }
    if (s == FC_OK) s = fc_program_run(p, ins, outs);
    if (s != FC_OK) FAIL("run: %s", fc_program_last_error(p));
    if (s == FC_OK && nslots > 0 && nslots <= 64) {
        s = fc_program_fp8_scales(p, sc, nslots);
        if (s == FC_OK) s = fc_block_set_fp8_scales(b, sc, nslots);
        if (s != FC_OK) FAIL("f8 scales: %s %s", fc_program_last_error(p), fc_block_last_error(b));
    }
    fc_program_free(p);
    return s == FC_OK ? 0 : -1;
}

/* Copies a tensor between devices through the host. */
static FcTensor *clone_to(FcDevice *d, FcTensor *src, const FcTensorInfo *ti) {
    FcTensor *t = new_tensor(d, ti);
    size_t n = fc_tensor_nbytes(src);
    void *buf = malloc(n ? n : 1);
    if (!t || !buf) { free(buf); fc_tensor_free(t); return NULL; }
    fc_tensor_copy_to_host(src, buf, n);
    fc_tensor_copy_from_host(t, buf, n);
    double sc = 1;   /* an f8 tensor's scale goes with its bytes */
    if (fc_tensor_scale(src, &sc) == FC_OK && sc != 1) fc_tensor_set_scale(t, sc);
    free(buf);
    return t;
}

/* Compiles, runs on the CPU and the reference, compares every output. `plant` perturbs the
 * first output of the CPU run (to show the comparison fails). Returns the number of
 * outputs over tolerance. */
static int check_case(const Case *c, int fuse, int plant, FcDevice *cpu, FcDevice *ref, bool nvrtc) {
    FcOptions *o = NULL;
    fc_options_new(&o);
    fc_options_set_fuse(o, fuse);
    if (case_precision(c)) fc_options_set_precision(o, case_precision(c));
    FcBlock *b = NULL;
    FcStatus s = fc_compile_string(c->src, c->name, o, &b);
    fc_options_free(o);
    if (s != FC_OK) {
        FAIL("%s: compile: %s %s", c->name, fc_block_last_error(b), fc_block_diagnostics(b));
        fc_block_free(b);
        return 1;
    }
    int ni = fc_block_num_inputs(b), no = fc_block_num_outputs(b), bad = 0;
    FcTensor *in_cpu[16] = {0}, *in_ref[16] = {0}, *out_cpu[32] = {0}, *out_ref[32] = {0};
    for (int i = 0; i < ni; i++) {
        FcTensorInfo ti;
        fc_block_input_info(b, i, &ti);
        in_cpu[i] = new_tensor(cpu, &ti);
        fc_block_random_input(b, i, 1234 + (uint64_t)i, in_cpu[i]);
        in_ref[i] = clone_to(ref, in_cpu[i], &ti);
    }
    for (int j = 0; j < no; j++) {
        FcTensorInfo ti;
        fc_block_output_info(b, j, &ti);
        out_cpu[j] = new_tensor(cpu, &ti);
        out_ref[j] = new_tensor(ref, &ti);
    }
    if (run_on(b, cpu, in_cpu, out_cpu) == 0 && run_on(b, ref, in_ref, out_ref) == 0) {
        if (plant) {
            FcTensorInfo ti;
            fc_block_output_info(b, 0, &ti);
            size_t n = fc_tensor_nbytes(out_cpu[0]);
            unsigned char *buf = malloc(n);
            fc_tensor_copy_to_host(out_cpu[0], buf, n);
            buf[n - 1] ^= 0x40;   /* the last element's top bits */
            fc_tensor_copy_from_host(out_cpu[0], buf, n);
            free(buf);
        }
        for (int j = 0; j < no; j++) {
            double ma, mr, tol;
            fc_tensor_compare(out_cpu[j], out_ref[j], &ma, &mr);
            fc_block_output_tolerance(b, j, &tol);
            if (!(mr <= tol)) {
                bad++;
                if (!plant) {
                    FcTensorInfo ti;
                    fc_block_output_info(b, j, &ti);
                    FAIL("%s (%s, %s schedule): output %d '%s': max_abs=%g max_rel=%g tol=%g", c->name,
                         fuse ? "fused" : "eager", getenv("FUSEC_CPU_SCHEDULE") ? "gpu" : "cpu", j, ti.name, ma, mr, tol);
                }
            }
        }
    } else {
        bad++;
    }
    if (nvrtc && !plant) {
        static const char *const archs[] = {"sm_80", "sm_90"};
        for (int a = 0; a < 2; a++) {
            FcOptions *o2 = NULL;
            fc_options_new(&o2);
            fc_options_set_fuse(o2, fuse);
            fc_options_set_arch(o2, archs[a]);
            if (case_precision(c)) fc_options_set_precision(o2, case_precision(c));
            FcBlock *b2 = NULL;
            char *ptx = NULL;
            size_t len = 0;
            if (fc_compile_string(c->src, c->name, o2, &b2) != FC_OK ||
                fc_block_emit(b2, FC_EMIT_PTX, &ptx, &len) != FC_OK || len == 0)
                FAIL("%s: NVRTC %s: %s", c->name, archs[a], fc_block_last_error(b2));
            fc_buffer_free(ptx);
            fc_block_free(b2);
            fc_options_free(o2);
        }
    }
    for (int i = 0; i < ni; i++) { fc_tensor_free(in_cpu[i]); fc_tensor_free(in_ref[i]); }
    for (int j = 0; j < no; j++) { fc_tensor_free(out_cpu[j]); fc_tensor_free(out_ref[j]); }
    fc_block_free(b);
    return bad;
}

int main(void) {
    FcDevice *cpu = NULL, *ref = NULL;
    if (fc_device_open(FC_DEVICE_CPU, 0, &cpu) != FC_OK || fc_device_open(FC_DEVICE_REFERENCE, 0, &ref) != FC_OK) {
        fprintf(stderr, "cannot open devices\n");
        return 1;
    }
    FcErr e = {0};
    bool nvrtc = rt_nvrtc_available(&e) == FC_OK;
    if (!nvrtc) printf("NVRTC not available: PTX compilation skipped (%s)\n", e.msg);
    /* the CPU-shaped schedules, then the GPU-shaped ones run on the CPU */
    for (int sched = 0; sched < 2; sched++) {
        if (sched) setenv("FUSEC_CPU_SCHEDULE", "gpu", 1);
        for (int i = 0; i < NCASES; i++)
            for (int fuse = 0; fuse < 2; fuse++) check_case(&cases[i], fuse, 0, cpu, ref, nvrtc && sched == 0);
    }
    unsetenv("FUSEC_CPU_SCHEDULE");
    /* coverage: every op of the table */
    for (int op = 0; op < IR_OP_COUNT; op++) {
        bool found = false;
        for (int i = 0; i < NCASES && !found; i++) {
            const char *p = cases[i].ops;
            size_t n = strlen(ir_ops[op].name);
            while ((p = strstr(p, ir_ops[op].name)) != NULL) {
                if ((p == cases[i].ops || p[-1] == ' ') && (p[n] == ' ' || p[n] == 0)) { found = true; break; }
                p += n;
            }
        }
        if (!found) FAIL("op '%s' has no test case", ir_ops[op].name);
    }
    /* the harness can fail: a planted wrong element must be caught */
    if (check_case(&cases[0], 1, 1, cpu, ref, false) == 0) FAIL("a planted wrong element was not caught");
    fc_device_free(cpu);
    fc_device_free(ref);
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "ok", failures);
    return failures ? 1 : 0;
}
