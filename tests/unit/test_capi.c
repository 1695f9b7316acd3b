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
 */
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
    if (failures) fprintf(stderr, "%d failure(s)\n", failures);
    else printf("test_capi: ok\n");
    return failures != 0;
}
