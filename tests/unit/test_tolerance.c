/* test_tolerance.c: the --check tolerance for these inputs, fc_block_check_tolerances
 * (docs/tolerances.md, "16- and 8-bit intermediates").
 *
 * (a) blocks without 16/8-bit intermediates (f32; a bf16 value made only by casts) get exactly
 *     fc_block_output_tolerance, with spread 0, and run nothing (NULL inputs are accepted);
 * (b) the bf16 chain difftest found (seed 20261124, graph 3308; tests/difftest/found/
 *     bf16_log_near_one.tf): the fused CPU result is over the per-dtype rule, as it was when
 *     found, and within the widened tolerance, as is the eager one; the spread equals the
 *     fused-vs-eager difference (the fused kernel is the "kept in f32" meaning);
 * (c) the widening is not a blank cheque: a result off by far more than it still fails, in
 *     the same chain and in a larger bf16 block whose spread is small;
 * (d) the same rule for gradients, fc_block_check_grad_tolerances (training blocks): exactly
 *     fc_block_grad_tolerance where the forward-and-backward graph has no 16/8-bit intermediate
 *     (nothing runs), widened by the spread on the bf16 chain of (b), whose spread is the
 *     difference of the fused (--remat auto) and eager (--no-fuse --remat none) gradients, as
 *     the output's is the difference of the fused and eager outputs;
 * (e) the chain of (b) written in f32 and compiled at --precision bf16: the casts the precision
 *     pass inserts are storage casts, kept in f32 by the fused kernel as (b)'s bf16 ops are, so
 *     the spread and the fused-vs-eager difference are those of (b);
 * (f) fc_block_grad_noise_spread: 0 without 16/8-bit gradients; on two contributions that cancel
 *     into an e5m2 value's gradient (difftest seed 2026112618 graph 115, tests/difftest/found/
 *     illcond_f8_grad_contributions.tf) the fused and eager gradients are 0 where the reference
 *     has -0.24, over fc_block_check_grad_tolerances, and within base + 2 x the noise spread,
 *     which the rounding spread is not; usage errors;
 * (g) f8 tensors with scales are compared by their values over the coarser scale's smallest
 *     normal: by hand (all-zero reference at scale 1 against values at 2^16; the roles swapped;
 *     both at 2^16; normal values), and the block found on an H200 (difftest seed 2026112811
 *     graph 87, tests/difftest/found/f8_zero_reference_scales.tf): a layernorm of tanh values
 *     near 1 is 0 in the reference (each rounded to 1.0) and about 0.005 in the fused kernel
 *     (kept in f32); after delayed scaling settles the fused output's scale at 2^16 it is within
 *     the tolerance, where the f64 floor made it 3e305 over;
 * (h) the third meaning, a 16-bit value rounded where it is stored and read (RT_ROUND_STORED): the
 *     mean of one f16 element, returned and subtracted from the element (difftest seed
 *     2026112883 graph 300, tests/difftest/found/stored_mean_residue.tf): the fused kernel
 *     rounds the stored mean before the subtraction and returns the residue v - round(v), where
 *     eager and the reference give 0; that is over the rule, within it widened by the spread.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fusec.h"

typedef struct Case {
    FcBlock *blk[2];          /* fused, eager */
    FcDevice *cpu, *ref;
    int nin, nout;
    FcTensor *in[4], *out[3][4];   /* [fused CPU, eager CPU, reference][output] */
    double tol[4], spread[4], base[4];
} Case;

static void case_free(Case *c) {
    for (int k = 0; k < 3; k++)
        for (int j = 0; j < c->nout; j++) fc_tensor_free(c->out[k][j]);
    for (int i = 0; i < c->nin; i++) fc_tensor_free(c->in[i]);
    fc_block_free(c->blk[0]);
    fc_block_free(c->blk[1]);
    fc_device_free(c->cpu);
    fc_device_free(c->ref);
    memset(c, 0, sizeof *c);
}

/* Compiles src fused and eager, runs both on the CPU and the reference on `fusec run
 * --random seed` inputs, and computes the tolerances (with the inputs, or NULL). */
static void case_run_at(Case *c, const char *src, uint64_t seed, int null_inputs, const char *precision) {
    memset(c, 0, sizeof *c);
    for (int k = 0; k < 2; k++) {
        FcOptions *o = NULL;
        REQUIRE(fc_options_new(&o) == FC_OK && fc_options_set_fuse(o, k == 0) == FC_OK);
        REQUIRE(fc_options_set_precision(o, precision) == FC_OK);
        FcStatus s = fc_compile_string(src, "t.tf", o, &c->blk[k]);
        fc_options_free(o);
        if (s != FC_OK) fprintf(stderr, "%s\n", fc_block_diagnostics(c->blk[k]));
        REQUIRE(s == FC_OK);
    }
    REQUIRE(fc_device_open(FC_DEVICE_CPU, 0, &c->cpu) == FC_OK && fc_device_open(FC_DEVICE_REFERENCE, 0, &c->ref) == FC_OK);
    c->nin = fc_block_num_inputs(c->blk[0]);
    c->nout = fc_block_num_outputs(c->blk[0]);
    REQUIRE(c->nin <= 4 && c->nout <= 4);
    for (int i = 0; i < c->nin; i++) {
        FcTensorInfo ti;
        REQUIRE(fc_block_input_info(c->blk[0], i, &ti) == FC_OK);
        REQUIRE(fc_tensor_new(c->cpu, ti.dtype, ti.rank, ti.dims, &c->in[i]) == FC_OK);
        REQUIRE(fc_block_random_input(c->blk[0], i, seed, c->in[i]) == FC_OK);
    }
    for (int j = 0; j < c->nout; j++) {
        FcTensorInfo ti;
        REQUIRE(fc_block_output_info(c->blk[0], j, &ti) == FC_OK);
        for (int k = 0; k < 3; k++) REQUIRE(fc_tensor_new(k == 2 ? c->ref : c->cpu, ti.dtype, ti.rank, ti.dims, &c->out[k][j]) == FC_OK);
        REQUIRE(fc_block_output_tolerance(c->blk[0], j, &c->base[j]) == FC_OK);
    }
    for (int k = 0; k < 3; k++) {
        FcProgram *p = NULL;
        REQUIRE(fc_program_new(c->blk[k == 1], k == 2 ? c->ref : c->cpu, &p) == FC_OK);
        FcStatus s = fc_program_run(p, c->in, c->out[k]);
        if (s != FC_OK) fprintf(stderr, "run: %s\n", fc_program_last_error(p));
        REQUIRE(s == FC_OK);
        fc_program_free(p);
    }
    FcStatus s = fc_block_check_tolerances(c->blk[0], null_inputs ? NULL : c->in, c->tol, c->spread);
    if (s != FC_OK) fprintf(stderr, "tolerances: %s\n", fc_block_last_error(c->blk[0]));
    REQUIRE(s == FC_OK);
}

static void case_run(Case *c, const char *src, uint64_t seed, int null_inputs) {
    case_run_at(c, src, seed, null_inputs, "keep");
}

static double rel_of(FcTensor *got, FcTensor *ref) {
    double a = 0, r = 0;
    REQUIRE(fc_tensor_compare(got, ref, &a, &r) == FC_OK);
    return r;
}

/* (a) */
static void test_no_narrow_intermediates(void) {
    static const char *const srcs[] = {
        "block g(x: f32[64]) {\n    return log(abs(x) + 0.5), exp(x) * 2.0\n}\n",
        /* bf16 only through explicit casts: every backend rounds a cast, so both meanings agree */
        "block g(x: f32[64]) {\n    return cast(cast(log(abs(x) + 0.5), bf16), f32) * 3.0\n}\n",
        /* a bf16 input read by f32 ops */
        "block g(x: bf16[64]) {\n    return log(abs(cast(x, f32)) + 0.5)\n}\n",
    };
    for (size_t i = 0; i < sizeof srcs / sizeof srcs[0]; i++) {
        Case c;
        case_run(&c, srcs[i], 5, 1);   /* NULL inputs: nothing may run */
        for (int j = 0; j < c.nout; j++) {
            EXPECT(c.tol[j] == c.base[j] && c.spread[j] == 0, "source %zu output %d: tol %g (base %g), spread %g", i, j,
                   c.tol[j], c.base[j], c.spread[j]);
            for (int k = 0; k < 2; k++)
                EXPECT(rel_of(c.out[k][j], c.out[2][j]) <= c.tol[j], "source %zu output %d: %s over the tolerance", i, j,
                       k ? "eager" : "fused");
        }
        case_free(&c);
    }
}

/* (b) and (c) on the chain of tests/difftest/found/bf16_log_near_one.tf */
static const char *const k_3308 =
    "block g(x0: bf16[]) {\n"
    "    v1 = x0 + x0\n"
    "    v2 = x0 - 1.25\n"
    "    v3 = v2 * v1\n"
    "    v5 = log(abs(v3) + 0.5)\n"
    "    return v5\n}\n";
#define SEED_3308 14810965746054394676ull

static void test_bf16_chain(void) {
    Case c;
    case_run(&c, k_3308, SEED_3308, 0);
    double fused = rel_of(c.out[0][0], c.out[2][0]), eager = rel_of(c.out[1][0], c.out[2][0]);
    double between = rel_of(c.out[0][0], c.out[1][0]);
    EXPECT(fused > c.base[0], "the fused result (rel %g) is over the bf16 rule %g, as when difftest found it", fused, c.base[0]);
    EXPECT(c.spread[0] > 0.1, "spread %g: log near 1 amplifies one bf16 rounding", c.spread[0]);
    EXPECT(c.tol[0] == c.base[0] + 2 * c.spread[0], "tol %g = %g + 2 x %g", c.tol[0], c.base[0], c.spread[0]);
    EXPECT(fused <= c.tol[0] && eager <= c.tol[0] && between <= c.tol[0], "fused %g, eager %g, fused vs eager %g; tol %g", fused,
           eager, between, c.tol[0]);
    /* the fused kernel computes the "kept in f32" meaning, eager the "rounded at every op" one */
    EXPECT(eager <= c.base[0], "eager rel %g", eager);
    EXPECT(fabs(fused - c.spread[0]) <= c.base[0], "fused rel %g vs spread %g", fused, c.spread[0]);

    /* (c) a result off by 3 x the whole tolerance fails */
    uint16_t h = 0;
    float want = 0;
    REQUIRE(fc_tensor_copy_to_host(c.out[2][0], &h, sizeof h) == FC_OK);
    uint32_t w = (uint32_t)h << 16;
    memcpy(&want, &w, sizeof want);
    float bad = want * (float)(1 + 3 * c.tol[0]);
    uint32_t bb;
    memcpy(&bb, &bad, sizeof bb);
    uint16_t hb = (uint16_t)(bb >> 16);   /* truncation: still over 2.5 x tol */
    REQUIRE(fc_tensor_copy_from_host(c.out[0][0], &hb, sizeof hb) == FC_OK);
    double r = rel_of(c.out[0][0], c.out[2][0]);
    EXPECT(r > c.tol[0], "a result off by %g (tol %g) must fail", r, c.tol[0]);
    case_free(&c);
}

/* (e) the same chain written in f32 and lowered by --precision bf16: the casts the precision
 * pass adds are storage casts (wide), so the fused kernel keeps the chain in f32 and rounds at
 * its store, eager rounds after every op, and the tolerance is widened by their spread */
static void test_storage_casts(void) {
    static const char *const src =
        "block g(x0: f32[]) {\n"
        "    v1 = x0 + x0\n"
        "    v2 = x0 - 1.25\n"
        "    v3 = v2 * v1\n"
        "    v5 = log(abs(v3) + 0.5)\n"
        "    return v5\n}\n";
    Case c;
    case_run_at(&c, src, SEED_3308, 0, "bf16");
    double fused = rel_of(c.out[0][0], c.out[2][0]), eager = rel_of(c.out[1][0], c.out[2][0]);
    double between = rel_of(c.out[0][0], c.out[1][0]);
    EXPECT(c.spread[0] > 0.1, "spread %g: the precision pass's casts are kept wide by the fused meaning", c.spread[0]);
    EXPECT(between > c.base[0], "fused and eager differ by %g (rule %g): the fused kernel does not round between ops",
           between, c.base[0]);
    EXPECT(fused <= c.tol[0] && eager <= c.tol[0], "fused %g, eager %g; tol %g", fused, eager, c.tol[0]);
    case_free(&c);
}

/* (c) in a block of 256 elements where the widening is small: one element off by 10 x the
 * tolerance (of max |ref|) fails, while the untouched fused and eager results pass */
static void test_bf16_block_still_fails(void) {
    Case c;
    case_run(&c, "block g(x: bf16[256], y: bf16[256]) {\n    return tanh(x * y + x) * 0.5 + sigmoid(y)\n}\n", 11, 0);
    EXPECT(c.spread[0] > 0 && c.spread[0] < c.base[0], "spread %g (base %g): a well-conditioned chain", c.spread[0], c.base[0]);
    EXPECT(rel_of(c.out[0][0], c.out[2][0]) <= c.tol[0] && rel_of(c.out[1][0], c.out[2][0]) <= c.tol[0], "untouched results pass");
    uint16_t h[256];
    REQUIRE(fc_tensor_copy_to_host(c.out[2][0], h, sizeof h) == FC_OK);
    float mx = 0;
    for (int i = 0; i < 256; i++) {
        uint32_t w = (uint32_t)h[i] << 16;
        float f;
        memcpy(&f, &w, sizeof f);
        if (fabsf(f) > mx) mx = fabsf(f);
    }
    uint32_t w = (uint32_t)h[100] << 16;
    float f;
    memcpy(&f, &w, sizeof f);
    f += (float)(10 * c.tol[0]) * mx;
    memcpy(&w, &f, sizeof w);
    h[100] = (uint16_t)(w >> 16);
    REQUIRE(fc_tensor_copy_from_host(c.out[0][0], h, sizeof h) == FC_OK);
    double r = rel_of(c.out[0][0], c.out[2][0]);
    EXPECT(r > c.tol[0], "one element off by %g (tol %g) must fail", r, c.tol[0]);
    case_free(&c);
}

static void test_usage(void) {
    Case c;
    case_run(&c, k_3308, SEED_3308, 0);
    double t[1];
    EXPECT(fc_block_check_tolerances(c.blk[0], NULL, t, NULL) == FC_ERR_USAGE, "inputs are required where the block has bf16 intermediates");
    EXPECT(fc_block_check_tolerances(c.blk[0], c.in, NULL, NULL) == FC_ERR_USAGE, "rel_tol is required");
    EXPECT(fc_block_check_tolerances(NULL, c.in, t, NULL) == FC_ERR_USAGE, "no block");
    EXPECT(fc_block_check_tolerances(c.blk[0], c.in, t, NULL) == FC_OK && t[0] == c.tol[0], "spread may be NULL");
    case_free(&c);
}

/* (d) gradients: fused (--remat auto) and eager (--no-fuse --remat none) training programs of
 * src on the CPU, their gradients, and the tolerances (t, spread; base: fc_block_grad_tolerance)
 * of the gradient of input 0; returns the relative difference of the two gradients. */
static double grad_case(const char *src, uint64_t seed, int null_args, double *t, double *spread, double *base) {
    FcBlock *b[2] = {NULL, NULL};
    FcDevice *cpu = NULL;
    REQUIRE(fc_device_open(FC_DEVICE_CPU, 0, &cpu) == FC_OK);
    FcTensor *in[4] = {0}, *out[2][4] = {{0}}, *gout[4] = {0}, *gin[2][4] = {{0}};
    int nin = 0, nout = 0;
    for (int k = 0; k < 2; k++) {
        FcOptions *o = NULL;
        REQUIRE(fc_options_new(&o) == FC_OK && fc_options_set_fuse(o, k == 0) == FC_OK && fc_options_set_train(o, 1) == FC_OK &&
                fc_options_set_remat(o, k ? "none" : "auto") == FC_OK);
        FcStatus s = fc_compile_string(src, "t.tf", o, &b[k]);
        fc_options_free(o);
        if (s != FC_OK) fprintf(stderr, "%s %s\n", fc_block_last_error(b[k]), fc_block_diagnostics(b[k]));
        REQUIRE(s == FC_OK);
        nin = fc_block_num_inputs(b[k]);
        nout = fc_block_num_outputs(b[k]);
        REQUIRE(nin <= 4 && nout <= 4);
        for (int i = 0; i < nin; i++) {
            FcTensorInfo ti;
            REQUIRE(fc_block_input_info(b[k], i, &ti) == FC_OK);
            if (k == 0) {
                REQUIRE(fc_tensor_new(cpu, ti.dtype, ti.rank, ti.dims, &in[i]) == FC_OK);
                REQUIRE(fc_block_random_input(b[k], i, seed, in[i]) == FC_OK);
            }
            REQUIRE(fc_tensor_new(cpu, ti.dtype, ti.rank, ti.dims, &gin[k][i]) == FC_OK);
        }
        for (int j = 0; j < nout; j++) {
            FcTensorInfo ti;
            REQUIRE(fc_block_output_info(b[k], j, &ti) == FC_OK);
            REQUIRE(fc_tensor_new(cpu, ti.dtype, ti.rank, ti.dims, &out[k][j]) == FC_OK);
            if (k == 0) {
                REQUIRE(fc_tensor_new(cpu, ti.dtype, ti.rank, ti.dims, &gout[j]) == FC_OK);
                REQUIRE(fc_block_random_grad_output(b[k], j, seed, gout[j]) == FC_OK);
            }
        }
        FcProgram *p = NULL;
        REQUIRE(fc_program_new(b[k], cpu, &p) == FC_OK);
        s = fc_program_run(p, in, out[k]);
        if (s == FC_OK) s = fc_program_backward(p, gout, gin[k]);
        if (s != FC_OK) fprintf(stderr, "run: %s\n", fc_program_last_error(p));
        REQUIRE(s == FC_OK);
        fc_program_free(p);
    }
    REQUIRE(fc_block_grad_tolerance(b[0], 0, base) == FC_OK);
    FcStatus st = fc_block_check_grad_tolerances(b[0], null_args ? NULL : in, null_args ? NULL : gout, t, spread);
    if (st != FC_OK) fprintf(stderr, "tolerances: %s\n", fc_block_last_error(b[0]));
    REQUIRE(st == FC_OK);
    double r = rel_of(gin[0][0], gin[1][0]);
    double t2[4];
    EXPECT(fc_block_check_tolerances(b[0], in, t2, NULL) == FC_OK, "a training block's outputs have their tolerances too");
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < nin; i++) fc_tensor_free(gin[k][i]);
        for (int j = 0; j < nout; j++) fc_tensor_free(out[k][j]);
        fc_block_free(b[k]);
    }
    for (int i = 0; i < nin; i++) fc_tensor_free(in[i]);
    for (int j = 0; j < nout; j++) fc_tensor_free(gout[j]);
    fc_device_free(cpu);
    return r;
}

static void test_gradients(void) {
    double t[4], sp[4], base;
    /* f32: nothing runs (NULL inputs and gradients accepted) */
    double r = grad_case("block g(x: f32[64], w: f32[64]) {\n    return tanh(x * w) + sum(exp(x * 0.5))\n}\n", 5, 1, t, sp, &base);
    EXPECT(t[0] == base && sp[0] == 0 && r <= t[0], "f32: tol %g (base %g), spread %g; fused vs eager %g", t[0], base, sp[0], r);
    /* the bf16 chain of (b): rounding at every op (eager) or in f32 (fused) differ in the gradient too */
    r = grad_case(k_3308, SEED_3308, 0, t, sp, &base);
    EXPECT(sp[0] > 0 && t[0] == base + 2 * sp[0], "bf16: tol %g = %g + 2 x %g", t[0], base, sp[0]);
    EXPECT(r <= t[0], "bf16: fused vs eager gradients %g within %g", r, t[0]);
    EXPECT(fabs(r - sp[0]) <= base, "bf16: fused vs eager gradients %g vs spread %g", r, sp[0]);
    /* no training: a usage error */
    Case c;
    case_run(&c, k_3308, SEED_3308, 0);
    EXPECT(fc_block_check_grad_tolerances(c.blk[0], c.in, NULL, t, NULL) == FC_ERR_USAGE, "a block compiled without training");
    case_free(&c);
}

/* (f) */
static FcTensor *scalar(FcDevice *d, FcDtype t, float v) {
    FcTensor *x = NULL;
    REQUIRE(fc_tensor_new(d, FC_F32, 0, NULL, &x) == FC_OK && fc_tensor_copy_from_host(x, &v, 4) == FC_OK);
    FcTensor *y = NULL;
    REQUIRE(fc_tensor_new(d, t, 0, NULL, &y) == FC_OK && fc_tensor_convert(y, x, 1) == FC_OK);
    fc_tensor_free(x);
    return y;
}
static void test_noise_spread(void) {
    static const char *const src = "block g(x1: bf16[]) {\n    v3 = cast(x1, f8e5m2)\n    v4 = cast(v3, bf16)\n"
                                   "    v5 = maximum(v4, -1.0)\n    return v5, v3, v4\n}\n";
    FcDevice *dev[2] = {NULL, NULL};
    REQUIRE(fc_device_open(FC_DEVICE_CPU, 0, &dev[0]) == FC_OK && fc_device_open(FC_DEVICE_REFERENCE, 0, &dev[1]) == FC_OK);
    FcTensor *gin[3] = {NULL, NULL, NULL};
    FcBlock *b[3] = {NULL, NULL, NULL};
    FcTensor *in[2][1], *gout[2][3], *out[2][3];
    static const FcDtype ot[3] = {FC_BF16, FC_F8E5M2, FC_BF16};
    /* fused CPU, eager CPU, the reference device */
    for (int k = 0; k < 3; k++) {
        int d = k == 2;
        FcOptions *o = NULL;
        REQUIRE(fc_options_new(&o) == FC_OK && fc_options_set_fuse(o, k == 0) == FC_OK && fc_options_set_train(o, 1) == FC_OK);
        REQUIRE(fc_compile_string(src, "t.tf", o, &b[k]) == FC_OK);
        fc_options_free(o);
        in[d][0] = scalar(dev[d], FC_BF16, 1.0f);
        static const float g[3] = {-1.0859375f, 2.0f, -1.15625f};   /* grad_v5, grad_v3, grad_v4 */
        for (int j = 0; j < 3; j++) {
            gout[d][j] = scalar(dev[d], ot[j], g[j]);
            REQUIRE(fc_tensor_new(dev[d], ot[j], 0, NULL, &out[d][j]) == FC_OK);
        }
        REQUIRE(fc_tensor_new(dev[d], FC_BF16, 0, NULL, &gin[k]) == FC_OK);
        FcProgram *p = NULL;
        REQUIRE(fc_program_new(b[k], dev[d], &p) == FC_OK);
        REQUIRE(fc_program_run(p, in[d], out[d]) == FC_OK && fc_program_backward(p, gout[d], &gin[k]) == FC_OK);
        fc_program_free(p);
        if (k < 2) {
            for (int j = 0; j < 3; j++) fc_tensor_free(out[d][j]), fc_tensor_free(gout[d][j]);
            fc_tensor_free(in[d][0]);
        }
    }
    double t = 0, sp = 0, base = 0, noise = -1;
    REQUIRE(fc_block_grad_tolerance(b[0], 0, &base) == FC_OK);
    REQUIRE(fc_block_check_grad_tolerances(b[0], in[1], gout[1], &t, &sp) == FC_OK);
    REQUIRE(fc_block_grad_noise_spread(b[0], in[1], gout[1], 0, &noise) == FC_OK);
    for (int k = 0; k < 2; k++) {
        double r = rel_of(gin[k], gin[2]);
        EXPECT(r > t, "cancelling f8 gradients, %s: %g over the rounding spread's tolerance %g (spread %g): the test shows nothing",
               k ? "eager" : "fused", r, t, sp);
        /* the noise alone covers it (rounding the summed gradient once gave 0.29) */
        EXPECT(r <= 2 * noise, "cancelling f8 gradients, %s: %g within 2 x noise %g", k ? "eager" : "fused", r, noise);
    }
    /* and stays within what a unit of noise (2u = 1/4 for e5m2) on each contribution, 2 and -2.24,
     * can make of their sum (the reference's -0.24): (2 + 2.24) / 4 / 0.24, about 4.4, plus the f8
     * rounding of the perturbed terms (4.19 over the eight seeds; 1.56 over two) */
    EXPECT(isfinite(noise) && noise < 6, "noise spread %g", noise);
    /* usage: not a float input, a block without training; nothing to round: 0 */
    EXPECT(fc_block_grad_noise_spread(b[0], in[1], gout[1], 1, &noise) == FC_ERR_USAGE, "input 1 of 1");
    Case c;
    case_run(&c, k_3308, SEED_3308, 0);
    EXPECT(fc_block_grad_noise_spread(c.blk[0], c.in, NULL, 0, &noise) == FC_ERR_USAGE, "a block compiled without training");
    case_free(&c);
    FcBlock *f32 = NULL;
    FcOptions *o = NULL;
    REQUIRE(fc_options_new(&o) == FC_OK && fc_options_set_train(o, 1) == FC_OK);
    REQUIRE(fc_compile_string("block g(x: f64[8]) {\n    return tanh(x) * x\n}\n", "t.tf", o, &f32) == FC_OK);
    noise = -1;
    EXPECT(fc_block_grad_noise_spread(f32, NULL, NULL, 0, &noise) == FC_OK && noise == 0, "f64 gradients: noise %g, nothing runs",
           noise);
    fc_block_free(f32);
    /* f32 gradients whose contributions cancel (difftest seed 20261201 graph 27): x read as f64
     * and as f32 gets 1 + 2^-30 + 0.0005 and -(1 + 2^-30), each rounded to f32: the noise shows it */
    REQUIRE(fc_compile_string("block g(x: f32[]) {\n    y = cast(x, f64)\n    return y - x, y * 0.001\n}\n", "t.tf", o, &f32) ==
            FC_OK);
    fc_options_free(o);
    FcTensor *xs = scalar(dev[1], FC_F32, 1.0f), *gy[2] = {NULL, NULL};
    const double gv[2] = {1 + 0x1p-30, 0.5};
    for (int j = 0; j < 2; j++)
        REQUIRE(fc_tensor_new(dev[1], FC_F64, 0, NULL, &gy[j]) == FC_OK && fc_tensor_copy_from_host(gy[j], &gv[j], 8) == FC_OK);
    noise = -1;
    EXPECT(fc_block_grad_noise_spread(f32, &xs, gy, 0, &noise) == FC_OK && noise > 1e-5 && noise < 1e-2,
           "f32 contributions that cancel: noise %g", noise);
    fc_tensor_free(xs);
    for (int j = 0; j < 2; j++) fc_tensor_free(gy[j]);
    fc_block_free(f32);
    for (int j = 0; j < 3; j++) fc_tensor_free(out[1][j]), fc_tensor_free(gout[1][j]);
    fc_tensor_free(in[1][0]);
    for (int k = 0; k < 3; k++) fc_tensor_free(gin[k]), fc_block_free(b[k]);
    fc_device_free(dev[0]);
    fc_device_free(dev[1]);
}

/* (g) */
static FcTensor *f8_tensor(FcDevice *d, const float *v, int n, double scale) {
    FcTensor *f = NULL, *t = NULL;
    int64_t dims[1] = {n};
    REQUIRE(fc_tensor_new(d, FC_F32, 1, dims, &f) == FC_OK && fc_tensor_new(d, FC_F8E4M3, 1, dims, &t) == FC_OK);
    REQUIRE(fc_tensor_copy_from_host(f, v, (size_t)n * sizeof *v) == FC_OK);
    REQUIRE(fc_tensor_set_scale(t, scale) == FC_OK && fc_tensor_convert(t, f, 1) == FC_OK);
    fc_tensor_free(f);
    return t;
}

static void test_f8_scaled_floor(void) {
    FcDevice *d = NULL;
    REQUIRE(fc_device_open(FC_DEVICE_CPU, 0, &d) == FC_OK);
    static const float zero[3] = {0, 0, 0}, small[3] = {0x1p-11f, -5 * 0x1p-10f, 0x1p-9f},
                       one[3] = {1, -2, 0.5f}, near[3] = {1.125f, -2, 0.5f};
    FcTensor *z1 = f8_tensor(d, zero, 3, 1), *s16 = f8_tensor(d, small, 3, 0x1p16), *z16 = f8_tensor(d, zero, 3, 0x1p16),
             *a1 = f8_tensor(d, one, 3, 1), *b8 = f8_tensor(d, near, 3, 0x1p6);
    /* max |err| 5 x 2^-10 over E4M3's 2^-6 at scale 1: 0.3125, not 5 x 2^-10 / 2^-1022 */
    double r;
    EXPECT((r = rel_of(s16, z1)) == 0.3125, "rel %g", r);
    EXPECT((r = rel_of(z1, s16)) == 0.3125, "rel %g", r);   /* the reference's 5 x 2^-10 is below the floor */
    /* both at 2^16: the floor is 2^-22, and the error relative to it */
    EXPECT((r = rel_of(s16, z16)) == 5 * 0x1p12, "rel %g", r);
    EXPECT((r = rel_of(b8, a1)) == 0.125 / 2, "rel %g", r);   /* normal values: over max |ref| = 2 */
    fc_tensor_free(z1), fc_tensor_free(s16), fc_tensor_free(z16), fc_tensor_free(a1), fc_tensor_free(b8);
    fc_device_free(d);

    static const char *src =
        "block g(x5: f16[1, 3, 2], x1: i32[]) {\n"
        "    v7 = x5 + 2.0\n"
        "    v8 = gather(v7, x1)\n"
        "    v9 = v8 @ transpose(v8)\n"
        "    v19 = tanh(v9)\n"
        "    return layernorm(v19, axis=[0, 1], eps=0.01)\n"
        "}\n";
    Case c;
    case_run_at(&c, src, 16490589664689189868ull, 0, "f8");
    FcProgram *p = NULL;
    REQUIRE(fc_program_new(c.blk[0], c.cpu, &p) == FC_OK);
    for (int k = 0; k < 3; k++) REQUIRE(fc_program_run(p, c.in, c.out[0]) == FC_OK);   /* delayed scaling settles */
    fc_program_free(p);
    double sr = 0, sf = 0, a = 0, rel = 0;
    REQUIRE(fc_tensor_scale(c.out[2][0], &sr) == FC_OK && fc_tensor_scale(c.out[0][0], &sf) == FC_OK);
    REQUIRE(fc_tensor_compare(c.out[0][0], c.out[2][0], &a, &rel) == FC_OK);
    CHECK(sf > sr);     /* the fused output at a finer scale than the reference's */
    CHECK(a > 0.003);   /* about 0.005 where the reference is 0 */
    CHECK(isfinite(rel) && rel <= c.tol[0]);
    if (!(rel <= c.tol[0])) fprintf(stderr, "  f8 zero reference: rel %g, tol %g (scales %g, %g)\n", rel, c.tol[0], sf, sr);
    case_free(&c);
}

/* (h) */
static void test_stored_meaning(void) {
    static const char *const src =
        "block g(x: f16[1, 1]) {\n"
        "    v = gelu(x, approx=\"tanh\")\n"
        "    m = mean(v, axis=1, keepdim=true)\n"
        "    return v - m, m\n}\n";
    Case c;
    case_run(&c, src, 16727204629111172382ull, 0);
    double fused = rel_of(c.out[0][0], c.out[2][0]), eager = rel_of(c.out[1][0], c.out[2][0]);
    EXPECT(fused > c.base[0], "the fused residue (rel %g) is over the f16 rule %g, as when difftest found it", fused, c.base[0]);
    EXPECT(eager == 0, "eager rounds v before its mean: v - m is 0 (rel %g)", eager);
    EXPECT(c.spread[0] > 0.1 && fabs(c.spread[0] - fused) <= c.base[0], "spread %g: the stored meaning's residue (fused %g)",
           c.spread[0], fused);
    EXPECT(fused <= c.tol[0] && c.tol[0] == c.base[0] + 2 * c.spread[0], "fused %g within tol %g = %g + 2 x %g", fused,
           c.tol[0], c.base[0], c.spread[0]);
    EXPECT(c.spread[1] == 0, "the mean itself is the same in every meaning (spread %g)", c.spread[1]);
    case_free(&c);
}

int main(void) {
    test_no_narrow_intermediates();
    test_gradients();
    test_noise_spread();
    test_bf16_chain();
    test_storage_casts();
    test_bf16_block_still_fails();
    test_usage();
    test_f8_scaled_floor();
    test_stored_meaning();
    if (failures) fprintf(stderr, "test_tolerance: %d failure(s)\n", failures);
    return failures != 0;
}
