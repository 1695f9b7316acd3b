/* test_capi.c: the public API's lookups and tensor wrapping.
 *
 * - fc_block_input_index / fc_block_output_index: every name of a block (parameters, plain
 *   returned names, generated outK) maps to its position; an absent name is FC_ERR_USAGE with
 *   index -1 and an error that lists the names the block has.
 * - fc_tensor_wrap at any alignment: inputs and outputs (f32, f16, f64; a matrix product that
 *   goes through the CPU's BLAS, a reduction) wrapped at 0, 1, 2, 4 and 8 bytes past a 64-byte
 *   boundary give the same bits as a run on tensors from fc_tensor_new, on the CPU and the
 *   reference device, through fc_program_run and fc_program_time. Outputs are poisoned before
 *   each run, so a copy back that did not happen fails (checked once by making the copy back
 *   do nothing: 48 failures); inputs must come back unchanged.
 * - fc_program_check_kernels and fc_block_bisect: on a correct block every kernel and value is
 *   within its bound, and the outputs equal fc_program_run's bit for bit (also when the callback
 *   stops early); with a planted miscompile (FUSEC_PLANT_BUG=tanh) the kernel that computes the
 *   tanh is over its bound and the bisection stops at the tanh, with the unfused program right;
 *   the argument errors.
 * - f8 slots (--precision f8): a training block's slots alternate a value's (E4M3) and its
 *   gradient's (E5M2, fc_block_fp8_slot_dtype); forward runs set only the E4M3 scales, the
 *   backward's runs the E5M2 ones (by E5M2's largest value, 57344); the argument errors.
 * - delayed scaling's update (the fp8_update kernel, passes/lower.c): after runs whose amax
 *   rises, each E4M3 output's scale is the largest power of two s <= 2^126 with s m <= 448 for
 *   the largest amax m, computed here by the rule's own loops (halve from 1 while s m > 448,
 *   then double while 2 s m <= 448), for m from 2^-133 to 2^126 and at 448's boundaries
 *   (m = 1.75 x 2^e exactly, one ulp above and below).
 * - fc_program_set_loss_scaling: the scale doubles after growth_interval finite backward passes,
 *   halves (and the pass runs again) when a gradient overflows, the gradients carry it
 *   (fc_tensor_convert by 1/S gives the unscaled ones, equal to an unscaled run's), and its
 *   argument errors.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fusec.h"

static const char *const src =
    "dim N = 37, K = 5\n"
    "block f(x: f32[N, K], h: f16[N, K], d: f64[N, K], param w: f32[K, 3]) {\n"
    "  y = tanh(x) * 2 + 1\n"
    "  m = x @ w\n"
    "  return y, m, h * h + h, exp(d) - sum(d, axis=-1, keepdim=true)\n"
    "}\n";

static void test_names(FcBlock *b) {
    static const char *const in[] = {"x", "h", "d", "w"};
    static const char *const out[] = {"y", "m", "out2", "out3"};
    REQUIRE(fc_block_num_inputs(b) == 4 && fc_block_num_outputs(b) == 4);
    for (int i = 0; i < 4; i++) {
        int k = 99;
        EXPECT(fc_block_input_index(b, in[i], &k) == FC_OK && k == i, "input '%s': %d", in[i], k);
        FcTensorInfo ti;
        CHECK(fc_block_input_info(b, k, &ti) == FC_OK && strcmp(ti.name, in[i]) == 0);
        k = 99;
        EXPECT(fc_block_output_index(b, out[i], &k) == FC_OK && k == i, "output '%s': %d", out[i], k);
        CHECK(fc_block_output_info(b, k, &ti) == FC_OK && strcmp(ti.name, out[i]) == 0);
    }
    int k = 99;
    CHECK(fc_block_input_index(b, "y", &k) == FC_ERR_USAGE && k == -1);   /* an output's name */
    EXPECT(strcmp(fc_block_last_error(b), "block 'f' has no input named 'y'; its inputs: 'x', 'h', 'd', 'w'") == 0,
           "%s", fc_block_last_error(b));
    k = 99;
    CHECK(fc_block_output_index(b, "X", &k) == FC_ERR_USAGE && k == -1);  /* names are case-sensitive */
    EXPECT(strcmp(fc_block_last_error(b), "block 'f' has no output named 'X'; its outputs: 'y', 'm', 'out2', 'out3'") == 0,
           "%s", fc_block_last_error(b));
    CHECK(fc_block_input_index(b, NULL, &k) == FC_ERR_USAGE && k == -1);
    CHECK(fc_block_input_index(b, "x", NULL) == FC_ERR_USAGE);
    CHECK(fc_block_output_index(NULL, "y", &k) == FC_ERR_USAGE && k == -1);
}

enum { NT = 8 };   /* 4 inputs, 4 outputs */

typedef struct Buf {
    unsigned char *raw;
    size_t nbytes;
} Buf;

/* poison: all-ones bytes (NaN for floats) */
static void poison(FcTensor *t) {
    size_t n = fc_tensor_nbytes(t);
    unsigned char *p = malloc(n);
    REQUIRE(p);
    memset(p, 0xff, n);
    REQUIRE(fc_tensor_copy_from_host(t, p, n) == FC_OK);
    free(p);
}

/* Runs b on dev with every tensor wrapped at `off` bytes past a 64-byte boundary and compares
 * the outputs bit for bit with ref (the outputs of a run on fc_tensor_new tensors). */
static void run_offset(FcBlock *b, FcDevice *dev, const char *dname, FcTensor **aligned, unsigned char **ref, int off,
                       int timed) {
    FcProgram *p = NULL;
    REQUIRE(fc_program_new(b, dev, &p) == FC_OK);
    FcTensor *t[NT] = {0};
    Buf buf[NT] = {{0}};
    for (int i = 0; i < NT; i++) {
        FcTensorInfo ti;
        REQUIRE((i < 4 ? fc_block_input_info(b, i, &ti) : fc_block_output_info(b, i - 4, &ti)) == FC_OK);
        buf[i].nbytes = fc_tensor_nbytes(aligned[i]);
        REQUIRE((buf[i].raw = aligned_alloc(64, (buf[i].nbytes + 64 + 63) / 64 * 64)));
        unsigned char *data = buf[i].raw + off;
        FcStatus s = fc_tensor_wrap(dev, ti.dtype, ti.rank, ti.dims, data, &t[i]);
        REQUIRE(s == FC_OK);
        if (i < 4) REQUIRE(fc_tensor_copy_to_host(aligned[i], data, buf[i].nbytes) == FC_OK);
        else poison(t[i]);
    }
    FcStatus s = timed ? fc_program_time(p, t, t + 4, 1, 2, &(double){0}, NULL) : fc_program_run(p, t, t + 4);
    EXPECT(s == FC_OK, "%s, offset %d: %s", dname, off, fc_program_last_error(p));
    for (int i = 0; i < NT; i++) {
        unsigned char *data = buf[i].raw + off;
        if (i >= 4) {
            EXPECT(memcmp(data, ref[i - 4], buf[i].nbytes) == 0, "%s%s, offset %d: output %d differs from the aligned run",
                   dname, timed ? " (timed)" : "", off, i - 4);
        } else {
            /* fc_tensor_copy_to_host reads the caller's memory too */
            unsigned char *back = malloc(buf[i].nbytes);
            REQUIRE(back);
            REQUIRE(fc_tensor_copy_to_host(aligned[i], back, buf[i].nbytes) == FC_OK);
            EXPECT(memcmp(data, back, buf[i].nbytes) == 0, "%s, offset %d: input %d changed", dname, off, i);
            REQUIRE(fc_tensor_copy_to_host(t[i], back, buf[i].nbytes) == FC_OK);
            EXPECT(memcmp(data, back, buf[i].nbytes) == 0, "%s, offset %d: input %d reads back wrong", dname, off, i);
            free(back);
        }
    }
    for (int i = 0; i < NT; i++) {
        fc_tensor_free(t[i]);
        free(buf[i].raw);
    }
    fc_program_free(p);
}

static void test_wrap(FcBlock *b, FcDeviceKind kind, const char *dname) {
    FcDevice *dev = NULL;
    REQUIRE(fc_device_open(kind, 0, &dev) == FC_OK);
    FcProgram *p = NULL;
    REQUIRE(fc_program_new(b, dev, &p) == FC_OK);
    FcTensor *aligned[NT] = {0};
    unsigned char *ref[4] = {0};
    for (int i = 0; i < NT; i++) {
        FcTensorInfo ti;
        REQUIRE((i < 4 ? fc_block_input_info(b, i, &ti) : fc_block_output_info(b, i - 4, &ti)) == FC_OK);
        REQUIRE(fc_tensor_new(dev, ti.dtype, ti.rank, ti.dims, &aligned[i]) == FC_OK);
        if (i < 4) REQUIRE(fc_block_random_input(b, i, 7, aligned[i]) == FC_OK);
    }
    REQUIRE(fc_program_run(p, aligned, aligned + 4) == FC_OK);
    for (int j = 0; j < 4; j++) {
        size_t n = fc_tensor_nbytes(aligned[4 + j]);
        REQUIRE((ref[j] = malloc(n)));
        REQUIRE(fc_tensor_copy_to_host(aligned[4 + j], ref[j], n) == FC_OK);
    }
    static const int offsets[] = {0, 1, 2, 4, 8, 16, 33};
    for (size_t o = 0; o < sizeof offsets / sizeof offsets[0]; o++)
        for (int timed = 0; timed < 2; timed++) run_offset(b, dev, dname, aligned, ref, offsets[o], timed);
    for (int i = 0; i < NT; i++) fc_tensor_free(aligned[i]);
    for (int j = 0; j < 4; j++) free(ref[j]);
    fc_program_free(p);
    fc_device_free(dev);
}

/* A misaligned wrap's copies read the caller's memory, not its aligned copy; NULL data stays an
 * error. */
static void test_wrap_misc(FcBlock *b) {
    FcDevice *dev = NULL;
    REQUIRE(fc_device_open(FC_DEVICE_CPU, 0, &dev) == FC_OK);
    FcTensorInfo ti;
    REQUIRE(fc_block_output_info(b, 0, &ti) == FC_OK);
    float host[37 * 5], back[37 * 5];
    for (int i = 0; i < 37 * 5; i++) host[i] = (float)i + 0.25f;
    unsigned char *raw = aligned_alloc(64, (sizeof host + 64 + 63) / 64 * 64);
    REQUIRE(raw);
    memcpy(raw + 3, host, sizeof host);
    FcTensor *t = NULL;
    REQUIRE(fc_tensor_wrap(dev, ti.dtype, ti.rank, ti.dims, raw + 3, &t) == FC_OK);
    REQUIRE(fc_tensor_copy_to_host(t, back, sizeof back) == FC_OK);
    CHECK(memcmp(back, host, sizeof host) == 0);
    fc_tensor_free(t);
    free(raw);
    /* NULL data stays an error */
    t = (FcTensor *)1;
    CHECK(fc_tensor_wrap(dev, ti.dtype, ti.rank, ti.dims, NULL, &t) == FC_ERR_USAGE && t == NULL);
    fc_device_free(dev);
}

typedef struct Seen { int n, bad, stop_after; char first_bad[64]; } Seen;
static int seen_kernel(const FcKernelCheck *k, void *ctx) {
    Seen *s = ctx;
    s->n++;
    if (!k->ok && !s->bad++) snprintf(s->first_bad, sizeof s->first_bad, "%s", k->op);
    CHECK(k->nvalues >= 1 && k->kernel && k->ops && k->op && k->source_op && !k->backward);
    return s->stop_after > 0 && s->n >= s->stop_after;
}
static int seen_step(const FcBisectStep *st, void *ctx) {
    Seen *s = ctx;
    s->n++;
    if (!st->ok && !s->bad++) snprintf(s->first_bad, sizeof s->first_bad, "%s/%d", st->op, st->unfused_ok);
    return 0;
}

/* Runs block src's checks on the CPU: kernels over their bound, the bisection's first bad step. */
static void run_checks(const char *planted, int want_bad) {
    if (planted) setenv("FUSEC_PLANT_BUG", planted, 1);
    FcBlock *b = NULL;
    FcStatus s = fc_compile_string(src, "capi.tf", NULL, &b);   /* planted while the programs compile */
    REQUIRE(s == FC_OK);
    FcDevice *dev = NULL;
    FcProgram *p = NULL;
    REQUIRE(fc_device_open(FC_DEVICE_CPU, 0, &dev) == FC_OK && fc_program_new(b, dev, &p) == FC_OK);
    FcTensor *t[NT] = {0}, *u[4] = {0};
    for (int i = 0; i < NT; i++) {
        FcTensorInfo ti;
        REQUIRE((i < 4 ? fc_block_input_info(b, i, &ti) : fc_block_output_info(b, i - 4, &ti)) == FC_OK);
        REQUIRE(fc_tensor_new(dev, ti.dtype, ti.rank, ti.dims, &t[i]) == FC_OK);
        if (i < 4) REQUIRE(fc_block_random_input(b, i, 11, t[i]) == FC_OK);
        else REQUIRE(fc_tensor_new(dev, ti.dtype, ti.rank, ti.dims, &u[i - 4]) == FC_OK);
    }
    REQUIRE(fc_program_run(p, t, u) == FC_OK);
    for (int stop = 0; stop < 2; stop++) {
        Seen k = {.stop_after = stop};
        int nfailed = -1;
        CHECK(fc_program_check_kernels(p, t, t + 4, NULL, NULL, seen_kernel, &k, &nfailed) == FC_OK);
        EXPECT(stop ? k.n == 1 : k.n >= 3, "kernels reported: %d", k.n);
        if (!stop) EXPECT(nfailed == want_bad && k.bad == want_bad, "planted %s: %d kernels over (%d seen)", planted ? planted : "nothing", nfailed, k.bad);
        if (!stop && want_bad) EXPECT(strcmp(k.first_bad, "mul") == 0 || strcmp(k.first_bad, "add") == 0, "worst op %s", k.first_bad);
        for (int j = 0; j < 4; j++) {   /* the outputs are a run's */
            size_t n = fc_tensor_nbytes(u[j]);
            unsigned char *x = malloc(n), *y = malloc(n);
            REQUIRE(x && y);
            REQUIRE(fc_tensor_copy_to_host(t[4 + j], x, n) == FC_OK && fc_tensor_copy_to_host(u[j], y, n) == FC_OK);
            EXPECT(memcmp(x, y, n) == 0, "output %d after the per-kernel check differs from a run's", j);
            free(x);
            free(y);
        }
    }
    Seen st = {0};
    int first = 99;
    CHECK(fc_block_bisect(b, dev, t, NULL, seen_step, &st, &first) == FC_OK);
    if (want_bad) EXPECT(first == 0 && strcmp(st.first_bad, "tanh/1") == 0, "bisect: first %d, %s", first, st.first_bad);
    else EXPECT(first == -1 && st.n >= 6, "bisect: first %d after %d steps", first, st.n);
    /* the argument errors */
    CHECK(fc_block_bisect(b, dev, t, NULL, NULL, NULL, &first) == FC_ERR_USAGE && first == -1);
    CHECK(fc_block_bisect(b, dev, t, t + 4, seen_step, &st, &first) == FC_ERR_USAGE);
    EXPECT(strcmp(fc_block_last_error(b), "fc_block_bisect: gradients given for a block compiled without training") == 0, "%s",
           fc_block_last_error(b));
    FcTensor *swapped[4] = {t[1], t[0], t[2], t[3]};
    CHECK(fc_block_bisect(b, dev, swapped, NULL, seen_step, &st, &first) == FC_ERR_USAGE);
    EXPECT(strcmp(fc_block_last_error(b), "fc_block_bisect: input 0 ('x') is missing or does not match the block") == 0, "%s",
           fc_block_last_error(b));
    CHECK(fc_program_check_kernels(p, t, t + 4, NULL, NULL, NULL, NULL, NULL) == FC_ERR_USAGE);
    CHECK(fc_program_check_kernels(p, t, t + 4, t + 4, NULL, seen_kernel, &st, NULL) == FC_ERR_USAGE);
    EXPECT(strcmp(fc_program_last_error(p), "fc_program_check_kernels: give both gradient arrays or neither") == 0, "%s",
           fc_program_last_error(p));
    for (int i = 0; i < NT; i++) fc_tensor_free(t[i]);
    for (int j = 0; j < 4; j++) fc_tensor_free(u[j]);
    fc_program_free(p);
    fc_device_free(dev);
    fc_block_free(b);
    unsetenv("FUSEC_PLANT_BUG");
}

static void test_loss_scaling(void) {
    FcOptions *o = NULL;
    REQUIRE(fc_options_new(&o) == FC_OK && fc_options_set_train(o, 1) == FC_OK && fc_options_set_precision(o, "f16") == FC_OK);
    FcBlock *b = NULL;
    REQUIRE(fc_compile_string("block s(x: f32[4, 8]) -> f32[4, 8] { return x * 100 }\n", "s.tf", o, &b) == FC_OK);
    FcDevice *dev = NULL;
    FcProgram *p = NULL;
    REQUIRE(fc_device_open(FC_DEVICE_CPU, 0, &dev) == FC_OK && fc_program_new(b, dev, &p) == FC_OK);
    int64_t dims[2] = {4, 8};
    FcTensor *x, *y, *gy, *gx, *gx0, *f, *f0;
    REQUIRE(fc_tensor_new(dev, FC_F16, 2, dims, &x) == FC_OK && fc_tensor_new(dev, FC_F16, 2, dims, &y) == FC_OK &&
            fc_tensor_new(dev, FC_F16, 2, dims, &gy) == FC_OK && fc_tensor_new(dev, FC_F16, 2, dims, &gx) == FC_OK &&
            fc_tensor_new(dev, FC_F16, 2, dims, &gx0) == FC_OK && fc_tensor_new(dev, FC_F32, 2, dims, &f) == FC_OK &&
            fc_tensor_new(dev, FC_F32, 2, dims, &f0) == FC_OK);
    REQUIRE(fc_block_random_input(b, 0, 3, x) == FC_OK && fc_block_random_grad_output(b, 0, 3, gy) == FC_OK);
    REQUIRE(fc_program_run(p, &x, &y) == FC_OK && fc_program_backward(p, &gy, &gx0) == FC_OK);   /* unscaled */
    double S = 0;
    int back = -1;
    CHECK(fc_program_loss_scale(p, &S, &back) == FC_OK && S == 1 && back == 0);
    /* growth: 2 -> 4 after two finite passes, -> 8 after two more */
    REQUIRE(fc_program_set_loss_scaling(p, 2, 2) == FC_OK);
    for (int k = 0; k < 4; k++) REQUIRE(fc_program_backward(p, &gy, &gx) == FC_OK);
    CHECK(fc_program_loss_scale(p, &S, &back) == FC_OK && S == 8 && back == 0);
    /* backoff: 2^40 overflows f16 at once; the pass is run again at half the scale until the
     * gradients (100 x seed x S) are finite */
    REQUIRE(fc_program_set_loss_scaling(p, 0x1p40, 0) == FC_OK);
    REQUIRE(fc_program_backward(p, &gy, &gx) == FC_OK);
    CHECK(fc_program_loss_scale(p, &S, &back) == FC_OK && S >= 16 && S <= 256 && back == 40 - (int)log2(S));
    REQUIRE(fc_tensor_convert(f, gx, 1 / S) == FC_OK && fc_tensor_convert(f0, gx0, 1) == FC_OK);
    double ae = -1, re = -1;
    CHECK(fc_tensor_compare(f, f0, &ae, &re) == FC_OK && re == 0);   /* x 100 and powers of two: exact */
    /* errors */
    CHECK(fc_program_set_loss_scaling(p, 3, 0) == FC_ERR_USAGE);
    EXPECT(strcmp(fc_program_last_error(p), "loss scaling: the scale must be 0 (off) or a power of two in [1, 2^100], and the "
                                            "growth interval >= 0; got 3 and 0") == 0, "%s", fc_program_last_error(p));
    CHECK(fc_program_set_loss_scaling(p, 0.5, 0) == FC_ERR_USAGE && fc_program_set_loss_scaling(p, 4, -1) == FC_ERR_USAGE);
    CHECK(fc_program_loss_scale(p, NULL, NULL) == FC_ERR_USAGE && fc_program_set_loss_scaling(NULL, 2, 0) == FC_ERR_USAGE);
    CHECK(fc_tensor_convert(f, NULL, 1) == FC_ERR_USAGE);
    FcTensor *bad = NULL;
    int64_t d3[1] = {32};
    REQUIRE(fc_tensor_new(dev, FC_F32, 1, d3, &bad) == FC_OK);
    CHECK(fc_tensor_convert(bad, gx, 1) == FC_ERR_USAGE);
    EXPECT(strcmp(fc_tensor_last_error(bad), "fc_tensor_convert: the tensors differ in shape") == 0, "%s", fc_tensor_last_error(bad));
    FcTensor *all[] = {x, y, gy, gx, gx0, f, f0, bad};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) fc_tensor_free(all[i]);
    fc_program_free(p);
    fc_block_free(b);
    /* f8 gradients saturate instead of overflowing: no scaling (the seed of an f8 output, and a
     * gradient through an f8 value) */
    static const char *const f8src[] = {"block s(x: f32[4]) -> f8e4m3[4] { return cast(x, f8e4m3) }\n",
                                        "block s(x: f32[4]) -> f32[4] { return cast(cast(x, f8e5m2), f32) * 2 }\n"};
    for (int k = 0; k < 2; k++) {
        REQUIRE(fc_compile_string(f8src[k], "s.tf", o, &b) == FC_OK);
        REQUIRE(fc_program_new(b, dev, &p) == FC_OK);
        CHECK(fc_program_set_loss_scaling(p, 2, 0) == FC_ERR_UNSUPPORTED);
        EXPECT(strstr(fc_program_last_error(p), k ? "stores a gradient in f8e5m2, which saturates" : "stores a gradient in f8e4m3"),
               "%s", fc_program_last_error(p));
        CHECK(fc_program_set_loss_scaling(p, 0, 0) == FC_OK);   /* off is always fine */
        fc_program_free(p);
        fc_block_free(b);
    }
    /* a forward-only block has no backward to scale */
    REQUIRE(fc_compile_string("block s(x: f32[4]) -> f32[4] { return x }\n", "s.tf", NULL, &b) == FC_OK);
    REQUIRE(fc_program_new(b, dev, &p) == FC_OK);
    CHECK(fc_program_set_loss_scaling(p, 2, 0) == FC_ERR_USAGE);
    EXPECT(strcmp(fc_program_last_error(p), "block 's' was not compiled for training (--train)") == 0, "%s", fc_program_last_error(p));
    fc_program_free(p);
    fc_block_free(b);
    fc_device_free(dev);
    fc_options_free(o);
}

static void test_fp8_slots(void) {
    static const char *const f8src = "block s(x: f32[4, 8], param w: f32[8, 8]) { h = tanh(x @ w)\n return h * 2 }\n";
    FcOptions *o = NULL;
    FcBlock *b = NULL, *bf = NULL;
    REQUIRE(fc_options_new(&o) == FC_OK && fc_options_set_precision(o, "f8") == FC_OK);
    /* forward only: E4M3 slots alone, x's and w's (the interface) first, then x @ w, h, h * 2 */
    REQUIRE(fc_compile_string(f8src, "s.tf", o, &bf) == FC_OK);
    FcDtype t = FC_F32;
    CHECK(fc_block_num_fp8_slots(bf) == 5 && fc_block_fp8_slot_dtype(bf, 4, &t) == FC_OK && t == FC_F8E4M3);
    REQUIRE(fc_options_set_train(o, 1) == FC_OK && fc_compile_string(f8src, "s.tf", o, &b) == FC_OK);
    int n = fc_block_num_fp8_slots(b);
    REQUIRE(n == 4);
    for (int k = 0; k < n; k++)
        EXPECT(fc_block_fp8_slot_dtype(b, k, &t) == FC_OK && t == (k % 2 ? FC_F8E5M2 : FC_F8E4M3), "slot %d: %d", k, (int)t);
    CHECK(fc_block_fp8_slot_dtype(b, 4, &t) == FC_ERR_USAGE);
    EXPECT(strcmp(fc_block_last_error(b), "fc_block_fp8_slot_dtype: slot 4; the block has 4 f8 slots") == 0, "%s",
           fc_block_last_error(b));
    CHECK(fc_block_fp8_slot_dtype(b, -1, &t) == FC_ERR_USAGE && fc_block_fp8_slot_dtype(b, 0, NULL) == FC_ERR_USAGE &&
          fc_block_fp8_slot_dtype(NULL, 0, &t) == FC_ERR_USAGE);
    FcDevice *dev = NULL;
    FcProgram *p = NULL;
    REQUIRE(fc_device_open(FC_DEVICE_CPU, 0, &dev) == FC_OK && fc_program_new(b, dev, &p) == FC_OK);
    int64_t dx[2] = {4, 8}, dw[2] = {8, 8};
    FcTensor *in[2], *y, *gy, *gin[2];
    REQUIRE(fc_tensor_new(dev, FC_BF16, 2, dx, &in[0]) == FC_OK && fc_tensor_new(dev, FC_BF16, 2, dw, &in[1]) == FC_OK &&
            fc_tensor_new(dev, FC_BF16, 2, dx, &y) == FC_OK && fc_tensor_new(dev, FC_BF16, 2, dx, &gy) == FC_OK &&
            fc_tensor_new(dev, FC_BF16, 2, dx, &gin[0]) == FC_OK && fc_tensor_new(dev, FC_BF16, 2, dw, &gin[1]) == FC_OK);
    REQUIRE(fc_block_random_input(b, 0, 5, in[0]) == FC_OK && fc_block_random_input(b, 1, 5, in[1]) == FC_OK &&
            fc_block_random_grad_output(b, 0, 5, gy) == FC_OK);
    double sc[4];
    /* forwards alone: the E4M3 scales leave 1 (the second run's update reads the first's amax),
     * the gradients' stay 1 */
    for (int r = 0; r < 2; r++) REQUIRE(fc_program_run(p, in, &y) == FC_OK);
    REQUIRE(fc_program_fp8_scales(p, sc, 4) == FC_OK);
    EXPECT(sc[0] != 1 && sc[2] != 1 && sc[1] == 1 && sc[3] == 1, "after forwards: %g %g %g %g", sc[0], sc[1], sc[2], sc[3]);
    /* two backwards: the E5M2 scales are set from the first one's amax against 57344 (tanh's
     * gradients are O(1): 2^14 or so, beyond what E4M3's 448 would allow) */
    for (int r = 0; r < 2; r++) REQUIRE(fc_program_backward(p, &gy, gin) == FC_OK);
    REQUIRE(fc_program_fp8_scales(p, sc, 4) == FC_OK);
    EXPECT(sc[1] >= 0x1p10 && sc[3] >= 0x1p10 && sc[1] <= 0x1p20 && sc[3] <= 0x1p20, "after backwards: %g %g", sc[1], sc[3]);
    /* calibrated from the reference's backward, a new program's first backward runs at the
     * scales delayed scaling settled to above (within a factor 2: the reference's amax), not 1 */
    double cal[4];
    FcProgram *p2 = NULL;
    REQUIRE(fc_block_calibrate_fp8_grads(b, in, &gy) == FC_OK && fc_program_new(b, dev, &p2) == FC_OK);
    REQUIRE(fc_program_run(p2, in, &y) == FC_OK && fc_program_backward(p2, &gy, gin) == FC_OK);
    REQUIRE(fc_program_fp8_scales(p2, cal, 4) == FC_OK);
    EXPECT(cal[1] != 1 && cal[3] != 1 && fabs(log2(cal[1] / sc[1])) <= 1 && fabs(log2(cal[3] / sc[3])) <= 1,
           "calibrated: %g %g, settled %g %g", cal[1], cal[3], sc[1], sc[3]);
    fc_program_free(p2);
    CHECK(fc_block_calibrate_fp8_grads(bf, in, &gy) == FC_ERR_USAGE);
    EXPECT(strcmp(fc_block_last_error(bf), "fc_block_calibrate_fp8_grads: block 's' was not compiled for training (--train)") == 0,
           "%s", fc_block_last_error(bf));
    CHECK(fc_block_calibrate_fp8_grads(b, in, NULL) == FC_ERR_USAGE);
    FcTensor *all[] = {in[0], in[1], y, gy, gin[0], gin[1]};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) fc_tensor_free(all[i]);
    fc_program_free(p);
    fc_device_free(dev);
    fc_block_free(b);
    fc_block_free(bf);
    fc_options_free(o);
}

/* f8 at the interface (forward programs): inputs, weights and outputs are E4M3 tensors with
 * scales; a program reads its inputs' scales at each run and gives each output the scale it
 * stored it with. */
static void test_fp8_interface(void) {
    static const char *const f8src = "block s(x: f32[4, 8], param w: f32[8, 8], param b: f32[8]) { return tanh(x @ w + b) }\n";
    FcOptions *o = NULL;
    FcBlock *b = NULL;
    REQUIRE(fc_options_new(&o) == FC_OK && fc_options_set_precision(o, "f8") == FC_OK);
    REQUIRE(fc_compile_string(f8src, "s.tf", o, &b) == FC_OK);
    FcTensorInfo ti;
    CHECK(fc_block_input_info(b, 0, &ti) == FC_OK && ti.dtype == FC_F8E4M3 && ti.scaled);
    CHECK(fc_block_input_info(b, 1, &ti) == FC_OK && ti.dtype == FC_F8E4M3 && ti.scaled && ti.is_param);
    CHECK(fc_block_input_info(b, 2, &ti) == FC_OK && ti.dtype == FC_BF16 && !ti.scaled);   /* a bias stays 16-bit */
    CHECK(fc_block_output_info(b, 0, &ti) == FC_OK && ti.dtype == FC_F8E4M3 && ti.scaled);
    FcDevice *dev = NULL, *ref = NULL;
    FcProgram *p = NULL, *rp = NULL;
    REQUIRE(fc_device_open(FC_DEVICE_CPU, 0, &dev) == FC_OK && fc_device_open(FC_DEVICE_REFERENCE, 0, &ref) == FC_OK);
    REQUIRE(fc_program_new(b, dev, &p) == FC_OK);
    int64_t dx[2] = {4, 8}, dw[2] = {8, 8}, db[1] = {8};
    FcTensor *in[3], *xf, *y, *yr, *y1, *back;
    REQUIRE(fc_tensor_new(dev, FC_F8E4M3, 2, dx, &in[0]) == FC_OK && fc_tensor_new(dev, FC_F8E4M3, 2, dw, &in[1]) == FC_OK &&
            fc_tensor_new(dev, FC_BF16, 1, db, &in[2]) == FC_OK && fc_tensor_new(dev, FC_F32, 2, dx, &xf) == FC_OK &&
            fc_tensor_new(dev, FC_F8E4M3, 2, dx, &y) == FC_OK && fc_tensor_new(dev, FC_F8E4M3, 2, dx, &yr) == FC_OK &&
            fc_tensor_new(dev, FC_F8E4M3, 2, dx, &y1) == FC_OK && fc_tensor_new(dev, FC_F32, 2, dx, &back) == FC_OK);
    /* x quantized by hand: values up to 100 fit E4M3's 448 at scale 4 */
    float xv[32];
    for (int i = 0; i < 32; i++) xv[i] = (float)((i % 7) - 3) * 100.0f / 3.0f + 0.25f;
    REQUIRE(fc_tensor_copy_from_host(xf, xv, sizeof xv) == FC_OK && fc_tensor_quantize(in[0], xf) == FC_OK);
    double s = 0;
    CHECK(fc_tensor_scale(in[0], &s) == FC_OK && s == 4);
    double ea = 1, er = 1;
    REQUIRE(fc_tensor_convert(back, in[0], 1) == FC_OK && fc_tensor_compare(back, xf, &ea, &er) == FC_OK);
    EXPECT(er > 0 && er <= 0.0625, "E4M3 round trip: %g", er);   /* u = 2^-4 of the largest */
    REQUIRE(fc_block_random_input(b, 1, 3, in[1]) == FC_OK && fc_block_random_input(b, 2, 3, in[2]) == FC_OK);
    CHECK(fc_tensor_scale(in[1], &s) == FC_OK && s >= 64 && s <= 1024);   /* N(0, 1/8): max ~1, 448 / max */
    for (int r = 0; r < 3; r++) REQUIRE(fc_program_run(p, in, &y) == FC_OK);
    int n = fc_block_num_fp8_slots(b);
    double sc[8] = {0};
    REQUIRE(n <= 8 && fc_program_fp8_scales(p, sc, n) == FC_OK);
    CHECK(sc[0] == 4 && fc_tensor_scale(y, &s) == FC_OK && s == sc[n - 1] && s > 1);   /* tanh's <= 1 */
    /* the reference at the scales the run used, on the same tensors */
    REQUIRE(fc_block_set_fp8_scales(b, sc, n) == FC_OK && fc_program_new(b, ref, &rp) == FC_OK);
    REQUIRE(fc_program_run(rp, in, &yr) == FC_OK);
    double tol = 0;
    REQUIRE(fc_block_output_tolerance(b, 0, &tol) == FC_OK && fc_tensor_compare(y, yr, &ea, &er) == FC_OK);
    EXPECT(er <= tol, "f8 interface: %g > %g", er, tol);
    /* the kernels read x's scale: the same bytes at twice the scale are half the values */
    REQUIRE(fc_tensor_set_scale(in[0], 8) == FC_OK && fc_program_run(p, in, &y1) == FC_OK);
    REQUIRE(fc_tensor_compare(y1, y, &ea, &er) == FC_OK);
    EXPECT(er > 0.1, "x at twice its scale changed the output by %g", er);
    REQUIRE(fc_program_fp8_scales(p, sc, n) == FC_OK && fc_block_set_fp8_scales(b, sc, n) == FC_OK);
    REQUIRE(fc_program_run(rp, in, &yr) == FC_OK && fc_tensor_compare(y1, yr, &ea, &er) == FC_OK);
    EXPECT(er <= tol, "f8 interface at a new scale: %g > %g", er, tol);
    /* scales: f8 tensors only, powers of two */
    CHECK(fc_tensor_set_scale(in[2], 2) == FC_ERR_USAGE);
    EXPECT(strcmp(fc_tensor_last_error(in[2]), "fc_tensor_set_scale: a bf16 tensor has no scale (f8 tensors have)") == 0,
           "%s", fc_tensor_last_error(in[2]));
    CHECK(fc_tensor_set_scale(in[0], 3) == FC_ERR_USAGE && fc_tensor_set_scale(in[0], 0) == FC_ERR_USAGE &&
          fc_tensor_set_scale(in[0], INFINITY) == FC_ERR_USAGE && fc_tensor_set_scale(NULL, 1) == FC_ERR_USAGE);
    EXPECT(strcmp(fc_tensor_last_error(in[0]), "fc_tensor_set_scale: inf is not a power of two in [2^-126, 2^126]") == 0,
           "%s", fc_tensor_last_error(in[0]));
    CHECK(fc_tensor_quantize(xf, in[0]) == FC_ERR_USAGE);   /* into f32 */
    FcTensor *all[] = {in[0], in[1], in[2], xf, y, yr, y1, back};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) fc_tensor_free(all[i]);
    fc_program_free(rp);
    fc_program_free(p);
    fc_block_free(b);
    /* an f8 input the source declares has no scale: its tensor's must be 1 */
    REQUIRE(fc_compile_string("block d(x: f8e4m3[4]) -> f32[4] { return cast(x, f32) * 2 }\n", "d.tf", NULL, &b) == FC_OK);
    CHECK(fc_block_input_info(b, 0, &ti) == FC_OK && !ti.scaled && fc_block_num_fp8_slots(b) == 0);
    FcTensor *x8, *o32;
    int64_t d4[1] = {4};
    REQUIRE(fc_tensor_new(dev, FC_F8E4M3, 1, d4, &x8) == FC_OK && fc_tensor_new(dev, FC_F32, 1, d4, &o32) == FC_OK);
    REQUIRE(fc_program_new(b, dev, &p) == FC_OK && fc_tensor_set_scale(x8, 2) == FC_OK);
    CHECK(fc_program_run(p, &x8, &o32) == FC_ERR_USAGE);
    EXPECT(strcmp(fc_program_last_error(p), "input 'x' is f8e4m3 as the source declares it, without a scale: its "
                  "tensor's scale must be 1, not 2") == 0, "%s", fc_program_last_error(p));
    REQUIRE(fc_tensor_set_scale(x8, 1) == FC_OK);
    CHECK(fc_program_run(p, &x8, &o32) == FC_OK);
    fc_tensor_free(x8);
    fc_tensor_free(o32);
    fc_program_free(p);
    fc_block_free(b);
    fc_device_free(dev);
    fc_device_free(ref);
    fc_options_free(o);
}

/* the update rule as api.c's fp8_scale_for states it, in f32 */
static double scale_rule(float m, float F) {
    float sc = 1.0f;
    for (int i = 0; i < 160; i++) sc = sc * m > F ? sc * 0.5f : sc;
    for (int i = 0; i < 126; i++) sc = sc * 2.0f * m <= F ? sc * 2.0f : sc;
    return sc;
}

static void test_fp8_update(void) {
    static const char *const usrc = "block u(x: f32[2]) { return x * 1.0, x * 1.00000012, x * 0.99999994 }\n";
    static const float C[3] = {1.0f, 1.00000012f, 0.99999994f};
    FcOptions *o = NULL;
    FcBlock *b = NULL;
    FcDevice *dev = NULL;
    FcProgram *p = NULL;
    REQUIRE(fc_options_new(&o) == FC_OK && fc_options_set_precision(o, "f8") == FC_OK);
    REQUIRE(fc_compile_string(usrc, "u.tf", o, &b) == FC_OK);
    REQUIRE(fc_device_open(FC_DEVICE_CPU, 0, &dev) == FC_OK && fc_program_new(b, dev, &p) == FC_OK);
    int64_t d2[1] = {2};
    FcTensor *xf, *x, *y[3];
    REQUIRE(fc_tensor_new(dev, FC_F32, 1, d2, &xf) == FC_OK && fc_tensor_new(dev, FC_F8E4M3, 1, d2, &x) == FC_OK);
    for (int j = 0; j < 3; j++) REQUIRE(fc_tensor_new(dev, FC_F8E4M3, 1, d2, &y[j]) == FC_OK);
    int slot[3], n = fc_block_num_fp8_slots(b), checked = 0;
    for (int j = 0; j < 3; j++) {
        FcTensorInfo ti;
        REQUIRE(fc_block_output_info(b, j, &ti) == FC_OK && ti.fp8_slot >= 0 && ti.fp8_slot < n);
        slot[j] = ti.fp8_slot;
    }
    double sc[16];
    REQUIRE(n <= 16);
    /* rising amax: the history's largest is this run's */
    for (int e = -133; e <= 126; e++) {
        static const float M[3] = {1.0f, 1.75f, 1.875f};
        for (int k = 0; k < 3; k++) {
            float v = ldexpf(M[k], e), xv[2] = {v, 0};
            if (!isfinite(v) || v * 1.00000012f > 3e38f) continue;
            REQUIRE(fc_tensor_copy_from_host(xf, xv, sizeof xv) == FC_OK && fc_tensor_quantize(x, xf) == FC_OK);
            for (int r = 0; r < 2; r++) REQUIRE(fc_program_run(p, &x, y) == FC_OK);   /* the second run's update reads the first's amax */
            REQUIRE(fc_program_fp8_scales(p, sc, n) == FC_OK);
            for (int j = 0; j < 3; j++) {
                float m = v * C[j];
                double want = scale_rule(m, 448.0f);
                EXPECT(sc[slot[j]] == want, "amax %a (x %a times %a): scale %a, the rule's %a", (double)m, (double)v, (double)C[j],
                       sc[slot[j]], want);
                checked++;
            }
        }
    }
    CHECK(checked > 700);
    fc_tensor_free(xf);
    fc_tensor_free(x);
    for (int j = 0; j < 3; j++) fc_tensor_free(y[j]);
    fc_program_free(p);
    fc_device_free(dev);
    fc_block_free(b);
    fc_options_free(o);
}

int main(void) {
    FcBlock *b = NULL;
    FcStatus s = fc_compile_string(src, "capi.tf", NULL, &b);
    if (s != FC_OK) fputs(b ? fc_block_diagnostics(b) : "no block\n", stderr);
    REQUIRE(s == FC_OK);
    test_names(b);
    test_wrap(b, FC_DEVICE_CPU, "cpu");
    test_wrap(b, FC_DEVICE_REFERENCE, "reference");
    test_wrap_misc(b);
    fc_block_free(b);
    run_checks(NULL, 0);
    run_checks("tanh", 1);
    test_loss_scaling();
    test_fp8_slots();
    test_fp8_interface();
    test_fp8_update();
    if (failures) fprintf(stderr, "%d failure(s)\n", failures);
    else printf("test_capi: ok\n");
    return failures != 0;
}
