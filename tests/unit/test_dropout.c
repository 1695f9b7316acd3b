/* test_dropout.c: dropout's mask and cross_entropy's label check through the public API, on the
 * reference interpreter and the CPU backend (fused and eager, CPU- and GPU-shaped schedules):
 *   - the known answer through a graph: word 0 of Philox-4x32-10 at counter 0, key 0 is
 *     0x6627e8d5, so dropout_mask([1], p, seed=0) is true at p = 0x6627e8d5 / 2^32 and false
 *     at the next p up;
 *   - the kept fraction of 10^6 elements is within 5 standard deviations of 1 - p (p = 0.1,
 *     0.5, 0.9), and p = 0 keeps every element;
 *   - on seeded random shapes (rank 0 to 4), p and seeds (negative and beyond 32 bits
 *     included), every device's mask equals the definition computed here from the
 *     interpreter's Philox (whose known answers test_interp checks), and dropout's outputs are
 *     bit-identical across the devices;
 *   - p = 0 is the identity bit for bit, NaN and -0 included;
 *   - a cross_entropy label outside [0, C) fails the run with FC_ERR_RUNTIME_DATA everywhere.
 * The CUDA emulation runs such masks in test_cuda_emu (ops_training, dropout_random_shapes).
 */
#include "fusec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "dropout_ref.h"

/* ---- devices and runs ------------------------------------------------------------------------ */
enum { V_REF, V_FUSED, V_EAGER, V_FUSED_GPU, V_EAGER_GPU, NV };
static const char *const vname[NV] = {"reference", "cpu fused", "cpu eager", "cpu fused, gpu schedule",
                                      "cpu eager, gpu schedule"};
static FcDevice *cpu, *ref;

/* Compiles src for variant v and runs it on host inputs; outs[j] receives output j (malloc'd).
 * Returns the run's status (the compile must succeed). */
static FcStatus run_variant(const char *src, int v, void *const *ins, void **outs, char *msg, size_t nmsg) {
    if (v == V_FUSED_GPU || v == V_EAGER_GPU) setenv("FUSEC_CPU_SCHEDULE", "gpu", 1);
    else unsetenv("FUSEC_CPU_SCHEDULE");
    FcOptions *o = NULL;
    REQUIRE(fc_options_new(&o) == FC_OK);
    fc_options_set_fuse(o, v == V_FUSED || v == V_FUSED_GPU);
    FcBlock *b = NULL;
    FcStatus s = fc_compile_string(src, "d.tf", o, &b);
    fc_options_free(o);
    if (s != FC_OK) fprintf(stderr, "compile: %s\n%s\n%s", fc_block_last_error(b), fc_block_diagnostics(b), src);
    REQUIRE(s == FC_OK);
    FcDevice *d = v == V_REF ? ref : cpu;
    int ni = fc_block_num_inputs(b), no = fc_block_num_outputs(b);
    FcTensor *ti[8] = {0}, *to[8] = {0};
    REQUIRE(ni <= 8 && no <= 8);
    for (int i = 0; i < ni; i++) {
        FcTensorInfo info;
        fc_block_input_info(b, i, &info);
        REQUIRE(fc_tensor_new(d, info.dtype, info.rank, info.dims, &ti[i]) == FC_OK);
        REQUIRE(fc_tensor_copy_from_host(ti[i], ins[i], fc_tensor_nbytes(ti[i])) == FC_OK);
    }
    for (int j = 0; j < no; j++) {
        FcTensorInfo info;
        fc_block_output_info(b, j, &info);
        REQUIRE(fc_tensor_new(d, info.dtype, info.rank, info.dims, &to[j]) == FC_OK);
    }
    FcProgram *p = NULL;
    REQUIRE(fc_program_new(b, d, &p) == FC_OK);
    s = fc_program_run(p, ti, to);
    if (msg) snprintf(msg, nmsg, "%s", s == FC_OK ? "" : fc_program_last_error(p));
    for (int j = 0; j < no; j++) {
        size_t n = fc_tensor_nbytes(to[j]);
        outs[j] = malloc(n ? n : 1);
        REQUIRE(outs[j]);
        if (s == FC_OK) REQUIRE(fc_tensor_copy_to_host(to[j], outs[j], n) == FC_OK);
    }
    fc_program_free(p);
    for (int i = 0; i < ni; i++) fc_tensor_free(ti[i]);
    for (int j = 0; j < no; j++) fc_tensor_free(to[j]);
    fc_block_free(b);
    unsetenv("FUSEC_CPU_SCHEDULE");
    return s;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next64(void) {
    uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* ---- the known answer through a graph ---------------------------------------------------------- */
static void test_known_answer(void) {
    const char *src = "block k() -> bool[1], bool[1] {\n"
                      "    return dropout_mask([1], 1713891541 / 4294967296, seed=0), dropout_mask(1, 1713891542 / 4294967296, seed=0)\n"
                      "}\n";
    for (int v = 0; v < NV; v++) {
        void *o[2];
        EXPECT(run_variant(src, v, NULL, o, NULL, 0) == FC_OK, "%s", vname[v]);
        unsigned char a = *(unsigned char *)o[0], b = *(unsigned char *)o[1];
        EXPECT(a == 1 && b == 0, "%s: word 0 of Philox(0, 0) against its threshold: %d %d (want 1 0)", vname[v], a, b);
        free(o[0]);
        free(o[1]);
    }
}

/* ---- the kept fraction ------------------------------------------------------------------------- */
static void test_fraction(void) {
    static const double ps[] = {0.1, 0.5, 0.9, 0};
    const int64_t n = 1000000;
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        char src[256];
        snprintf(src, sizeof src, "block f() { return dropout_mask([1000, 1000], %.17g, seed=%d) }\n", ps[k], 1234 + (int)k);
        for (int v = 0; v <= V_FUSED; v++) {   /* the reference once, the CPU */
            void *o[1];
            REQUIRE(run_variant(src, v, NULL, o, NULL, 0) == FC_OK);
            int64_t cnt = 0;
            for (int64_t i = 0; i < n; i++) cnt += ((unsigned char *)o[0])[i];
            double want = (double)n * (1 - ps[k]), sigma = sqrt((double)n * ps[k] * (1 - ps[k]));
            EXPECT(fabs((double)cnt - want) <= 5 * sigma, "%s: p=%g kept %lld of %lld; want %.0f +- %.0f (5 sigma)",
                   vname[v], ps[k], (long long)cnt, (long long)n, want, 5 * sigma);
            if (v == V_FUSED)
                printf("p=%.1f: kept %lld of 10^6 (1 - p: %.0f, %.2f sigma off)\n", ps[k], (long long)cnt, want,
                       sigma > 0 ? fabs((double)cnt - want) / sigma : 0.0);
            free(o[0]);
        }
    }
}

/* ---- random shapes: every device gives the definition's mask, dropout bit-identical ---------------- */
static void test_random_shapes(void) {
    static const FcDtype dts[] = {FC_F32, FC_F64, FC_BF16, FC_F16};
    static const double exact_p[] = {0, 0.5, 0.75, 0.2};   /* scales 1, 2, 4, 1.25: exact in every dtype */
    for (int c = 0; c < 24; c++) {
        int rank = (int)(next64() % 5);
        int64_t dims[4], numel = 1;
        char shape[128] = "", *at = shape;
        for (int d = 0; d < rank; d++) {
            dims[d] = 1 + (int64_t)(next64() % (d == rank - 1 ? 67 : 9));
            numel *= dims[d];
            at += sprintf(at, "%s%lld", d ? ", " : "", (long long)dims[d]);
        }
        FcDtype t = dts[c % 4];
        double p = t == FC_F32 || t == FC_F64 ? (double)(next64() % 1000) / 1000.0 : exact_p[next64() % 4];
        int64_t seed = (int64_t)next64();
        if (seed == INT64_MIN) seed = 0;
        if (c % 3 == 0) seed %= 1000;   /* small ones too, negative half the time */
        char src[512];
        snprintf(src, sizeof src, "block f(x: %s[%s]) {\n    return dropout_mask([%s], %.17g, seed=%lld), dropout(x, %.17g, seed=%lld)\n}\n",
                 fc_dtype_name(t), shape, shape, p, (long long)seed, p, (long long)seed);
        size_t es = t == FC_F64 ? 8 : t == FC_F32 ? 4 : 2;
        unsigned char *x = malloc((size_t)numel * es);
        REQUIRE(x);
        for (int64_t i = 0; i < numel; i++) {   /* random bit patterns of finite values */
            uint64_t r = next64();
            if (t == FC_F64) { double v = ldexp((double)(r >> 11), -50) - 4; memcpy(x + 8 * i, &v, 8); }
            else if (t == FC_F32) { float v = (float)(ldexp((double)(r >> 40), -20) - 8); memcpy(x + 4 * i, &v, 4); }
            else { uint16_t v = (uint16_t)((r & 0xBFFF) | (t == FC_BF16 ? 0x3000 : 0x2000)); memcpy(x + 2 * i, &v, 2); }
        }
        void *ins[1] = {x}, *first[2] = {NULL, NULL};
        int64_t nkept = 0;
        for (int v = 0; v < NV; v++) {
            void *o[2];
            EXPECT(run_variant(src, v, ins, o, NULL, 0) == FC_OK, "%s", vname[v]);
            int bad = 0;
            for (int64_t i = 0; i < numel; i++) {
                bool k = dropout_ref_kept(p, seed, i);
                nkept += v == 0 && k;
                if (((unsigned char *)o[0])[i] != k && bad++ < 3)
                    fprintf(stderr, "%s: [%s] p=%g seed=%lld: mask element %lld is %d, want %d\n", vname[v], shape, p,
                            (long long)seed, (long long)i, ((unsigned char *)o[0])[i], k);
            }
            EXPECT(bad == 0, "%s: %d mask elements differ from the definition", vname[v], bad);
            if (v == 0) {
                first[0] = o[0];
                first[1] = o[1];
                continue;
            }
            EXPECT(memcmp(o[1], first[1], (size_t)numel * es) == 0, "%s: dropout %s[%s] p=%g is not bit-identical to the reference",
                   vname[v], fc_dtype_name(t), shape, p);
            free(o[0]);
            free(o[1]);
        }
        if (p == 0) EXPECT(nkept == numel, "p = 0 dropped %lld", (long long)(numel - nkept));
        if (p == 0) EXPECT(memcmp(first[1], x, (size_t)numel * es) == 0, "p = 0 is not the identity");
        free(first[0]);
        free(first[1]);
        free(x);
    }
}

/* ---- p = 0: the identity, NaN and -0 included ------------------------------------------------------ */
static void test_identity(void) {
    const char *src = "block f(x: f32[6]) { return dropout(x, 0, seed=5) }\n";
    float x[6] = {-0.0f, 1.5f, NAN, -INFINITY, 1e-40f, -3.25f};
    void *ins[1] = {x};
    for (int v = 0; v < NV; v++) {
        void *o[1];
        EXPECT(run_variant(src, v, ins, o, NULL, 0) == FC_OK, "%s", vname[v]);
        EXPECT(memcmp(o[0], x, sizeof x) == 0 || (isnan(((float *)o[0])[2]) &&
                                                  memcmp(o[0], x, 2 * sizeof(float)) == 0 &&
                                                  memcmp((float *)o[0] + 3, x + 3, 3 * sizeof(float)) == 0),
               "%s: dropout(x, 0) is not x", vname[v]);
        free(o[0]);
    }
}

/* ---- cross_entropy: a label out of range is a data error on every device -------------------------- */
static void test_bad_label(void) {
    const char *src = "block f(x: f32[3, 4], y: i32[3]) { return cross_entropy(x, y) }\n";
    float x[12] = {0};
    int32_t good[3] = {0, 3, 2}, bad_hi[3] = {0, 4, 2}, bad_lo[3] = {0, 1, -1};
    for (int v = 0; v < NV; v++) {
        void *o[1];
        char msg[512];
        void *ins[2] = {x, good};
        EXPECT(run_variant(src, v, ins, o, msg, sizeof msg) == FC_OK, "%s: %s", vname[v], msg);
        EXPECT(fabsf(*(float *)o[0] - logf(4)) < 1e-6f, "%s: uniform logits give log 4: %g", vname[v], *(float *)o[0]);
        free(o[0]);
        for (int k = 0; k < 2; k++) {
            ins[1] = k ? bad_lo : bad_hi;
            FcStatus s = run_variant(src, v, ins, o, msg, sizeof msg);
            EXPECT(s == FC_ERR_RUNTIME_DATA, "%s: label %d: status %d (%s)", vname[v], k ? -1 : 4, (int)s, msg);
            if (v == V_REF)
                EXPECT(strstr(msg, k ? "cross_entropy: label -1 at labels[2] is out of range [0, 4)"
                                     : "cross_entropy: label 4 at labels[1] is out of range [0, 4)"),
                       "message: %s", msg);
            free(o[0]);
        }
    }
}

int main(void) {
    REQUIRE(fc_device_open(FC_DEVICE_CPU, 0, &cpu) == FC_OK && fc_device_open(FC_DEVICE_REFERENCE, 0, &ref) == FC_OK);
    test_known_answer();
    test_fraction();
    test_random_shapes();
    test_identity();
    test_bad_label();
    fc_device_free(cpu);
    fc_device_free(ref);
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "ok", failures);
    return failures ? 1 : 0;
}
