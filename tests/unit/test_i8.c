/* test_i8.c: the i8 storage type end to end through the C API: every cast to and from i8 at
 * its edges (docs/language.md: a float truncates toward zero and saturates to [-128, 127], NaN
 * gives 0; a wider integer saturates; bool gives 0/1; i8 to anything is exact) and i64 -> i32
 * saturating, on the reference interpreter and the CPU device (fused, eager, and the GPU's
 * schedules run on the CPU: FUSEC_CPU_SCHEDULE=gpu), against fixed expected values; random i8
 * inputs; an i8 input without a gradient in training. */
#include "fusec.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

enum { K = 12, REP = 5, N = K * REP };   /* N = 60: whole 16-element vectors and a partial one */

static const char *SRC =
    "dim N = 60\n"
    "block c(x: f32[N], d: f64[N], i: i32[N], l: i64[N], b: bool[N], q: i8[N])\n"
    "    -> i8[N], i8[N], i8[N], i8[N], i8[N], f32[N], f64[N], i32[N], i64[N], i32[N], f32[N], i8[N] {\n"
    "    qx = cast(x, i8)\n"
    "    qt = reshape(transpose(reshape(q, [REPS, 12])), [N])\n"
    "    a = cast(q, f32)\n"
    "    e = cast(q, f64)\n"
    "    return qx, cast(d, i8), cast(i, i8), cast(l, i8), cast(b, i8), a, e, cast(q, i32), cast(q, i64), cast(l, i32), cast(qx, f32) * 2, qt\n"
    "}\n";

static const float X[K] = {127.9f, -128.9f, 300, -1e10f, NAN, -0.7f, 0.7f, 126.5f, -127.5f, INFINITY, -INFINITY, 1e30f};
static const int8_t X_I8[K] = {127, -128, 127, -128, 0, 0, 0, 126, -127, 127, -128, 127};
static const int32_t I[K] = {1000, -1000, 127, -128, 128, -129, 0, 5, -5, INT32_MAX, INT32_MIN, 1};
static const int8_t I_I8[K] = {127, -128, 127, -128, 127, -128, 0, 5, -5, 127, -128, 1};
static const int64_t L[K] = {1000000000000LL, -1000000000000LL, 127, -128, 300, -300, 0, 1, -1, INT64_MAX, INT64_MIN, 7};
static const int8_t L_I8[K] = {127, -128, 127, -128, 127, -128, 0, 1, -1, 127, -128, 7};
static const int32_t L_I32[K] = {INT32_MAX, INT32_MIN, 127, -128, 300, -300, 0, 1, -1, INT32_MAX, INT32_MIN, 7};
static const int8_t Q[K] = {-128, 127, -1, 0, 1, -2, 100, -100, 64, -64, 3, -3};

typedef struct Run { const char *name; FcDeviceKind dev; int fuse; const char *sched; } Run;

static void run_one(const Run *r) {
    if (r->sched) setenv("FUSEC_CPU_SCHEDULE", r->sched, 1);
    else unsetenv("FUSEC_CPU_SCHEDULE");
    FcOptions *o = NULL;
    REQUIRE(fc_options_new(&o) == FC_OK && fc_options_set_fuse(o, r->fuse) == FC_OK);
    REQUIRE(fc_options_set_dim(o, "N", N) == FC_OK);
    FcBlock *b = NULL;
    char src[1024];
    snprintf(src, sizeof src, "const REPS = %d\n%s", REP, SRC);
    FcStatus s = fc_compile_string(src, "i8.tf", o, &b);
    EXPECT(s == FC_OK, "%s: compile: %s %s", r->name, b ? fc_block_last_error(b) : "", b ? fc_block_diagnostics(b) : "");
    fc_options_free(o);
    if (s != FC_OK) { fc_block_free(b); return; }
    FcDevice *dev = NULL;
    FcProgram *p = NULL;
    REQUIRE(fc_device_open(r->dev, 0, &dev) == FC_OK);
    s = fc_program_new(b, dev, &p);
    EXPECT(s == FC_OK, "%s: program: %s", r->name, fc_block_last_error(b));
    if (s != FC_OK) { fc_block_free(b); fc_device_free(dev); return; }
    static const FcDtype in_t[6] = {FC_F32, FC_F64, FC_I32, FC_I64, FC_BOOL, FC_I8};
    static const FcDtype out_t[12] = {FC_I8, FC_I8, FC_I8, FC_I8, FC_I8, FC_F32, FC_F64, FC_I32, FC_I64, FC_I32, FC_F32, FC_I8};
    float x[N];
    double d[N];
    int32_t iv[N];
    int64_t lv[N];
    unsigned char bv[N];
    int8_t qv[N];
    for (int j = 0; j < N; j++) {
        x[j] = X[j % K];
        d[j] = (double)X[j % K];
        iv[j] = I[j % K];
        lv[j] = L[j % K];
        bv[j] = (unsigned char)(j % 3 == 0);
        qv[j] = Q[j % K];
    }
    const void *host_in[6] = {x, d, iv, lv, bv, qv};
    int64_t dims[1] = {N};
    FcTensor *in[6], *out[12];
    for (int k = 0; k < 6; k++) {
        REQUIRE(fc_tensor_new(dev, in_t[k], 1, dims, &in[k]) == FC_OK);
        REQUIRE(fc_tensor_copy_from_host(in[k], host_in[k], (size_t)N * fc_dtype_size(in_t[k])) == FC_OK);
    }
    for (int k = 0; k < 12; k++) REQUIRE(fc_tensor_new(dev, out_t[k], 1, dims, &out[k]) == FC_OK);
    s = fc_program_run(p, in, out);
    EXPECT(s == FC_OK, "%s: run: %s", r->name, fc_program_last_error(p));
    int8_t o8[5][N], perm[N];
    float of[N], o2[N];
    double od[N];
    int32_t oi[N], oli[N];
    int64_t ol[N];
    for (int k = 0; k < 5; k++) REQUIRE(fc_tensor_copy_to_host(out[k], o8[k], N) == FC_OK);
    REQUIRE(fc_tensor_copy_to_host(out[5], of, sizeof of) == FC_OK && fc_tensor_copy_to_host(out[6], od, sizeof od) == FC_OK);
    REQUIRE(fc_tensor_copy_to_host(out[7], oi, sizeof oi) == FC_OK && fc_tensor_copy_to_host(out[8], ol, sizeof ol) == FC_OK);
    REQUIRE(fc_tensor_copy_to_host(out[9], oli, sizeof oli) == FC_OK && fc_tensor_copy_to_host(out[10], o2, sizeof o2) == FC_OK);
    REQUIRE(fc_tensor_copy_to_host(out[11], perm, sizeof perm) == FC_OK);
    int bad = 0;
    for (int j = 0; j < N && s == FC_OK; j++) {
        int m = j % K;
        /* the transpose of q seen as [REP, K]: element j = (c, r) of [K, REP] is q[r * K + c] */
        int8_t want_perm = qv[(j % REP) * K + j / REP];
        bool ok = o8[0][j] == X_I8[m] && o8[1][j] == X_I8[m] && o8[2][j] == I_I8[m] && o8[3][j] == L_I8[m] &&
                  o8[4][j] == (j % 3 == 0) && of[j] == (float)Q[m] && od[j] == (double)Q[m] && oi[j] == Q[m] &&
                  ol[j] == Q[m] && oli[j] == L_I32[m] && o2[j] == 2.0f * X_I8[m] && perm[j] == want_perm;
        if (!ok && bad++ < 4)
            fprintf(stderr, "%s: element %d (x=%g i=%d l=%lld q=%d): f32 %d f64 %d i32 %d i64 %d bool %d | %g %g %d %lld | "
                            "i64->i32 %d, 2*f32(i8) %g, transposed %d (want %d)\n",
                    r->name, j, (double)X[m], I[m], (long long)L[m], Q[m], o8[0][j], o8[1][j], o8[2][j], o8[3][j], o8[4][j],
                    (double)of[j], od[j], oi[j], (long long)ol[j], oli[j], (double)o2[j], perm[j], want_perm);
    }
    EXPECT(bad == 0, "%s: %d elements wrong", r->name, bad);
    for (int k = 0; k < 6; k++) fc_tensor_free(in[k]);
    for (int k = 0; k < 12; k++) fc_tensor_free(out[k]);
    fc_program_free(p);
    fc_device_free(dev);
    fc_block_free(b);
}

/* Random i8 inputs: uniform integers in [-127, 127] (never -128), every value seen. */
static void test_random_input(void) {
    FcBlock *b = NULL;
    REQUIRE(fc_compile_string("block r(w: i8[64, 64]) { return cast(w, f32) }\n", "r.tf", NULL, &b) == FC_OK);
    FcDevice *dev = NULL;
    REQUIRE(fc_device_open(FC_DEVICE_REFERENCE, 0, &dev) == FC_OK);
    int64_t dims[2] = {64, 64};
    FcTensor *w = NULL;
    REQUIRE(fc_tensor_new(dev, FC_I8, 2, dims, &w) == FC_OK);
    REQUIRE(fc_block_random_input(b, 0, 7, w) == FC_OK);
    int8_t h[64 * 64];
    REQUIRE(fc_tensor_copy_to_host(w, h, sizeof h) == FC_OK);
    int seen[256] = {0}, nz = 0;
    for (int j = 0; j < 64 * 64; j++) {
        seen[h[j] + 128]++;
        nz += h[j] != 0;
    }
    int distinct = 0;
    for (int v = -127; v <= 127; v++) distinct += seen[v + 128] > 0;
    EXPECT(seen[0] == 0 && distinct == 255 && nz > 0, "random i8: -128 seen %d times, %d of 255 values", seen[0], distinct);
    fc_tensor_free(w);
    fc_device_free(dev);
    fc_block_free(b);
}

/* Training: an i8 input (a quantized weight) gets no gradient (its entry of grad_inputs is
 * ignored: a tensor given there is left as it was); its scale and x get theirs. */
static void test_train(void) {
    FcOptions *o = NULL;
    REQUIRE(fc_options_new(&o) == FC_OK && fc_options_set_train(o, 1) == FC_OK);
    FcBlock *b = NULL;
    REQUIRE(fc_compile_string("block t(x: f32[4, 8], param w: i8[8, 3], param s: f32[3]) -> f32[4, 3] {\n"
                              "    return x @ (cast(w, f32) * s)\n}\n", "t.tf", o, &b) == FC_OK);
    fc_options_free(o);
    FcDevice *dev = NULL;
    FcProgram *p = NULL;
    REQUIRE(fc_device_open(FC_DEVICE_CPU, 0, &dev) == FC_OK && fc_program_new(b, dev, &p) == FC_OK);
    FcTensor *in[3], *gin[3], *out, *gout;
    for (int i = 0; i < 3; i++) {
        FcTensorInfo ti;
        REQUIRE(fc_block_input_info(b, i, &ti) == FC_OK);
        REQUIRE(fc_tensor_new(dev, ti.dtype, ti.rank, ti.dims, &in[i]) == FC_OK);
        REQUIRE(fc_tensor_new(dev, ti.dtype, ti.rank, ti.dims, &gin[i]) == FC_OK);
        REQUIRE(fc_block_random_input(b, i, 5, in[i]) == FC_OK);
    }
    int64_t od[2] = {4, 3};
    REQUIRE(fc_tensor_new(dev, FC_F32, 2, od, &out) == FC_OK && fc_tensor_new(dev, FC_F32, 2, od, &gout) == FC_OK);
    REQUIRE(fc_block_random_grad_output(b, 0, 5, gout) == FC_OK);
    int8_t poison[24], back[24];
    memset(poison, 0x5a, sizeof poison);
    REQUIRE(fc_tensor_copy_from_host(gin[1], poison, sizeof poison) == FC_OK);
    EXPECT(fc_program_run(p, in, &out) == FC_OK, "train forward: %s", fc_program_last_error(p));
    EXPECT(fc_program_backward(p, &gout, gin) == FC_OK, "backward: %s", fc_program_last_error(p));
    REQUIRE(fc_tensor_copy_to_host(gin[1], back, sizeof back) == FC_OK);
    EXPECT(memcmp(back, poison, sizeof back) == 0, "the i8 input's gradient entry was written");
    float gs[3];
    REQUIRE(fc_tensor_copy_to_host(gin[2], gs, sizeof gs) == FC_OK);
    EXPECT(gs[0] != 0 && isfinite(gs[0]), "the scale's gradient: %g", (double)gs[0]);
    for (int i = 0; i < 3; i++) { fc_tensor_free(in[i]); fc_tensor_free(gin[i]); }
    fc_tensor_free(out);
    fc_tensor_free(gout);
    fc_program_free(p);
    fc_device_free(dev);
    fc_block_free(b);
}

int main(void) {
    static const Run runs[] = {
        {"reference", FC_DEVICE_REFERENCE, 1, NULL},
        {"cpu fused", FC_DEVICE_CPU, 1, NULL},
        {"cpu eager", FC_DEVICE_CPU, 0, NULL},
        {"cpu, GPU schedules, fused", FC_DEVICE_CPU, 1, "gpu"},
        {"cpu, GPU schedules, eager", FC_DEVICE_CPU, 0, "gpu"},
    };
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) run_one(&runs[k]);
    unsetenv("FUSEC_CPU_SCHEDULE");
    test_random_input();
    test_train();
    if (failures) {
        fprintf(stderr, "test_i8: %d failures\n", failures);
        return 1;
    }
    printf("test_i8: all passed\n");
    return 0;
}
