/* test_npy.c: runtime/npy.c: round trips for every dtype, files written by NumPy (when
 * `python3 -c 'import numpy'` works; that part is skipped otherwise) and ours read by NumPy,
 * conversions, and each bad file with its exact message; truncations and corruptions at
 * every byte never crash (run under the sanitizer build too). */
#include "host.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
static char dir[256];

static const char *path_of(const char *name) {
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    REQUIRE(f);
    REQUIRE(fwrite(p, 1, n, f) == n);
    fclose(f);
}

/* A .npy file with the given version, header text (unpadded) and data. */
static void write_npy(const char *name, int major, const char *header, const void *data, size_t dlen) {
    size_t hl = strlen(header), pre = major == 1 ? 10 : 12;
    unsigned char *buf = malloc(pre + hl + dlen + 1);
    REQUIRE(buf);
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (unsigned char)major;
    buf[7] = 0;
    for (size_t i = 0; i < pre - 8; i++) buf[8 + i] = (unsigned char)(hl >> (8 * i));
    memcpy(buf + pre, header, hl);
    if (dlen) memcpy(buf + pre + hl, data, dlen);
    write_bytes(path_of(name), buf, pre + hl + dlen);
    free(buf);
}

/* Reads name expecting failure with status st and message "<path>: msg" (or msg exactly when
 * it contains the path itself). */
static void expect_error(const char *name, FcDtype want, IrShape shape, FcStatus st, const char *msg) {
    FcErr err = {0};
    void *data = (void *)1;
    const char *path = path_of(name);
    FcStatus got = rt_npy_read(path, want, &shape, &data, &err);
    char full[1024];
    snprintf(full, sizeof full, "%s: %s", path, msg);
    EXPECT(got == st, "%s: status %d, want %d (%s)", name, got, st, err.msg);
    EXPECT(strcmp(err.msg, full) == 0, "%s:\n  got  '%s'\n  want '%s'", name, err.msg, full);
    EXPECT(data == NULL, "%s: data must be NULL on failure", name);
}

static IrShape sh2(int64_t a, int64_t b) { return (IrShape){2, {a, b}}; }

static void test_round_trips(void) {
    static const IrShape shapes[] = {{2, {3, 5}}, {0, {0}}, {1, {7}}, {4, {1, 2, 1, 3}}};
    for (int t = 0; t < FC_DTYPE_COUNT; t++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int64_t n;
            REQUIRE(ir_shape_numel(&shapes[s], &n));
            size_t bytes = (size_t)n * fc_dtype_size((FcDtype)t);
            void *a = malloc(bytes), *b = NULL;
            REQUIRE(a);
            rt_host_fill_normal((FcDtype)t, a, n, (uint64_t)(t * 10 + (int)s));
            FcErr err = {0};
            const char *p = path_of("rt.npy");
            FcStatus st = rt_npy_write(p, (FcDtype)t, &shapes[s], a, &err);
            EXPECT(st == FC_OK, "%s write: %s", fc_dtype_name((FcDtype)t), err.msg);
            st = rt_npy_read(p, (FcDtype)t, &shapes[s], &b, &err);
            EXPECT(st == FC_OK, "%s read: %s", fc_dtype_name((FcDtype)t), err.msg);
            EXPECT(st != FC_OK || memcmp(a, b, bytes) == 0, "%s rank %d: round trip differs", fc_dtype_name((FcDtype)t), shapes[s].rank);
            /* the header: 64-byte aligned data, NumPy's dict */
            FILE *f = fopen(p, "rb");
            REQUIRE(f);
            unsigned char head[10];
            REQUIRE(fread(head, 1, 10, f) == 10);
            fclose(f);
            EXPECT((10 + (head[8] | head[9] << 8)) % 64 == 0 && head[6] == 1, "header alignment");
            fc_free(b);
            free(a);
        }
    /* exact header text */
    float v[6] = {1, 2, 3, 4, 5, 6};
    FcErr err = {0};
    IrShape s = sh2(2, 3);
    REQUIRE(rt_npy_write(path_of("h.npy"), FC_F32, &s, v, &err) == FC_OK);
    char buf[129] = {0};
    FILE *f = fopen(path_of("h.npy"), "rb");
    REQUIRE(f && fread(buf, 1, 128, f) == 128);
    fclose(f);
    const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    EXPECT(memcmp(buf + 10, dict, strlen(dict)) == 0 && buf[10 + strlen(dict)] == ' ' && buf[127] == '\n',
           "header %s", buf + 10);
    /* bf16 is written as f32, exactly */
    uint16_t bf[2] = {0x3F81, 0xC000};
    IrShape s1 = {1, {2}};
    REQUIRE(rt_npy_write(path_of("bf.npy"), FC_BF16, &s1, bf, &err) == FC_OK);
    float *back = NULL;
    REQUIRE(rt_npy_read(path_of("bf.npy"), FC_F32, &s1, (void **)&back, &err) == FC_OK);
    EXPECT(back[0] == 1 + 0x1p-7f && back[1] == -2, "bf16 as f32");
    fc_free(back);
    /* a write into a missing folder fails with the path named and leaves nothing */
    FcStatus st = rt_npy_write("/nonexistent-dir/x.npy", FC_F32, &s1, v, &err);
    EXPECT(st == FC_ERR_IO && strstr(err.msg, "/nonexistent-dir/x.npy"), "%s", err.msg);
}

static void test_conversions(void) {
    FcErr err = {0};
    IrShape s = {1, {3}};
    double d[3] = {1 + 0x1p-9, -2.5, 1e30};
    write_npy("f8.npy", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }\n", d, sizeof d);
    uint16_t *bf = NULL;
    REQUIRE(rt_npy_read(path_of("f8.npy"), FC_BF16, &s, (void **)&bf, &err) == FC_OK);
    EXPECT(bf[0] == 0x3F80 && bf[1] == 0xC020, "f64 -> bf16 RNE: %#x %#x", bf[0], bf[1]);
    fc_free(bf);
    unsigned char *e4 = NULL;
    REQUIRE(rt_npy_read(path_of("f8.npy"), FC_F8E4M3, &s, (void **)&e4, &err) == FC_OK);
    EXPECT(e4[2] == 0x7E, "f64 -> f8e4m3 saturates");
    fc_free(e4);
    int32_t iv[3] = {-7, 0, 123456789};
    write_npy("i4.npy", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", iv, sizeof iv);
    int64_t *i8 = NULL;
    REQUIRE(rt_npy_read(path_of("i4.npy"), FC_I64, &s, (void **)&i8, &err) == FC_OK);
    EXPECT(i8[0] == -7 && i8[2] == 123456789, "i32 -> i64");
    fc_free(i8);
    float *fv = NULL;
    REQUIRE(rt_npy_read(path_of("i4.npy"), FC_F32, &s, (void **)&fv, &err) == FC_OK);
    EXPECT(fv[0] == -7 && fv[2] == 123456792.0f, "i32 -> f32 rounds");
    fc_free(fv);
    int64_t big[3] = {1, 3000000000LL, 2};
    write_npy("i8.npy", 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", big, sizeof big);
    expect_error("i8.npy", FC_I32, s, FC_ERR_INPUT, "value 3000000000 at index 1 does not fit in i32");
    expect_error("f8.npy", FC_I32, s, FC_ERR_INPUT, "cannot load float data (f64) into a tensor of dtype i32");
    expect_error("i4.npy", FC_BOOL, s, FC_ERR_INPUT, "cannot load integer data (i32) into a tensor of dtype bool");
    unsigned char bb[3] = {1, 0, 2};
    write_npy("b1.npy", 1, "{\"descr\": \"|b1\", \"fortran_order\": False, \"shape\": (3,)}", bb, 3);
    unsigned char *bo = NULL;
    REQUIRE(rt_npy_read(path_of("b1.npy"), FC_BOOL, &s, (void **)&bo, &err) == FC_OK);
    EXPECT(bo[0] == 1 && bo[1] == 0 && bo[2] == 1, "bool bytes normalized");
    fc_free(bo);
    expect_error("b1.npy", FC_F32, s, FC_ERR_INPUT, "cannot load bool data (bool) into a tensor of dtype f32");
    /* i8 ('|i1', '<i1' and '>i1' alike: one byte): signed bytes, exact into any float; integer
     * data into i8 must fit (as into i32), float data not at all; ours is written '|i1' */
    signed char q[3] = {-128, 127, -1};
    const char *i1s[] = {"|i1", "<i1", ">i1"};
    for (int k = 0; k < 3; k++) {
        char hdr[128];
        snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (3,), }", i1s[k]);
        write_npy("i1.npy", 1, hdr, q, sizeof q);
        signed char *qi = NULL;
        REQUIRE(rt_npy_read(path_of("i1.npy"), FC_I8, &s, (void **)&qi, &err) == FC_OK);
        EXPECT(qi[0] == -128 && qi[1] == 127 && qi[2] == -1, "%s -> i8: %d %d %d", i1s[k], qi[0], qi[1], qi[2]);
        fc_free(qi);
    }
    REQUIRE(rt_npy_read(path_of("i1.npy"), FC_F32, &s, (void **)&fv, &err) == FC_OK);
    EXPECT(fv[0] == -128 && fv[1] == 127 && fv[2] == -1, "i8 -> f32: %g %g %g", fv[0], fv[1], fv[2]);
    fc_free(fv);
    REQUIRE(rt_npy_read(path_of("i1.npy"), FC_I32, &s, (void **)&fv, &err) == FC_OK);
    EXPECT(((int32_t *)fv)[0] == -128 && ((int32_t *)fv)[2] == -1, "i8 -> i32");
    fc_free(fv);
    int32_t small[3] = {-128, 127, 0}, wide[3] = {0, -129, 0};
    write_npy("i4s.npy", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", small, sizeof small);
    signed char *qs = NULL;
    REQUIRE(rt_npy_read(path_of("i4s.npy"), FC_I8, &s, (void **)&qs, &err) == FC_OK);
    EXPECT(qs[0] == -128 && qs[1] == 127 && qs[2] == 0, "i32 -> i8 in range");
    fc_free(qs);
    write_npy("i4w.npy", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", wide, sizeof wide);
    expect_error("i4w.npy", FC_I8, s, FC_ERR_INPUT, "value -129 at index 1 does not fit in i8");
    expect_error("i8.npy", FC_I8, s, FC_ERR_INPUT, "value 3000000000 at index 1 does not fit in i8");
    expect_error("f8.npy", FC_I8, s, FC_ERR_INPUT, "cannot load float data (f64) into a tensor of dtype i8");
    expect_error("i1.npy", FC_BOOL, s, FC_ERR_INPUT, "cannot load integer data (i8) into a tensor of dtype bool");
    IrShape s3 = {1, {3}};
    REQUIRE(rt_npy_write(path_of("w1.npy"), FC_I8, &s3, q, &err) == FC_OK);
    char wbuf[64] = {0};
    FILE *wf = fopen(path_of("w1.npy"), "rb");
    REQUIRE(wf && fread(wbuf, 1, 63, wf) == 63);
    fclose(wf);
    EXPECT(strstr(wbuf + 10, "'descr': '|i1'") != NULL, "i8 written as |i1: %s", wbuf + 10);
    /* version 2.0 and 3.0 headers */
    write_npy("v2.npy", 2, "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }\n", d, sizeof d);
    write_npy("v3.npy", 3, "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }\n", d, sizeof d);
    double *dv = NULL;
    REQUIRE(rt_npy_read(path_of("v2.npy"), FC_F64, &s, (void **)&dv, &err) == FC_OK);
    EXPECT(dv[1] == -2.5, "v2");
    fc_free(dv);
    REQUIRE(rt_npy_read(path_of("v3.npy"), FC_F64, &s, (void **)&dv, &err) == FC_OK);
    fc_free(dv);
    /* a Fortran-order file with a single non-trivial dim is also C order */
    write_npy("f1.npy", 1, "{'descr': '<f8', 'fortran_order': True, 'shape': (1, 3), }", d, sizeof d);
    IrShape s13 = sh2(1, 3);
    REQUIRE(rt_npy_read(path_of("f1.npy"), FC_F64, &s13, (void **)&dv, &err) == FC_OK);
    fc_free(dv);
}

static void test_bad_files(void) {
    float d[6] = {1, 2, 3, 4, 5, 6};
    IrShape s = sh2(2, 3);
    const char *good = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    write_bytes(path_of("magic.npy"), "\x93NUMPX\x01\x00", 8);
    expect_error("magic.npy", FC_F32, s, FC_ERR_INPUT, "not a .npy file (it does not start with \\x93NUMPY)");
    write_bytes(path_of("empty.npy"), "", 0);
    expect_error("empty.npy", FC_F32, s, FC_ERR_INPUT, "not a .npy file (it does not start with \\x93NUMPY)");
    write_npy("v4.npy", 4, good, d, sizeof d);
    expect_error("v4.npy", FC_F32, s, FC_ERR_INPUT, "unsupported .npy format version 4.0 (1.0, 2.0 and 3.0 are supported)");
    write_bytes(path_of("hl.npy"), "\x93NUMPY\x01\x00\x40", 9);
    expect_error("hl.npy", FC_F32, s, FC_ERR_INPUT, "truncated .npy file (it ends inside the header length)");
    write_bytes(path_of("th.npy"), "\x93NUMPY\x01\x00\x64\x00{'descr': '<f4', 'fo", 30);
    expect_error("th.npy", FC_F32, s, FC_ERR_INPUT, "truncated .npy header (expected 100 bytes, found 20)");
    write_bytes(path_of("huge.npy"), "\x93NUMPY\x02\x00\xff\xff\xff\x7f{", 13);
    expect_error("huge.npy", FC_F32, s, FC_ERR_INPUT, ".npy header length 2147483647 exceeds the limit of 1048576 bytes");

    static const struct { const char *name, *header, *msg; } hdrs[] = {
        {"key.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'foo': 1}", "unknown key 'foo' in the .npy header"},
        {"dup.npy", "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}", "key 'descr' appears twice in the .npy header"},
        {"noshape.npy", "{'descr': '<f4', 'fortran_order': False}", "the .npy header has no 'shape'"},
        {"maybe.npy", "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2, 3), }", "malformed .npy header at byte 34: expected True or False"},
        {"trueish.npy", "{'descr': '<f4', 'fortran_order': Truex, 'shape': (2, 3), }", "malformed .npy header at byte 34: expected True or False"},
        {"brace.npy", "['descr', '<f4']", "malformed .npy header at byte 0: expected '{'"},
        {"tail.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } x", "malformed .npy header at byte 60: expected only spaces after the closing '}'"},
        {"open.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)", "malformed .npy header at byte 56: expected ',' or '}' after a value"},
        {"quote.npy", "{'descr: '<f4'}", "malformed .npy header at byte 10: expected ':' after a key"},
        {"unterminated.npy", "{'descr': '<f4", "malformed .npy header at byte 14: expected the closing quote of a string"},
        {"negdim.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", "malformed .npy header at byte 54: expected a non-negative integer in the shape"},
        {"onetuple.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (6), }", "malformed .npy header at byte 52: expected ',' in a one-element tuple"},
        {"bigdim.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", "malformed .npy header at byte 69: expected a dimension below 10^18"},
        {"struct.npy", "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2, 3), }", "structured dtypes are not supported"},
        {"u2.npy", "{'descr': '<u2', 'fortran_order': False, 'shape': (2, 3), }", "unsupported dtype '<u2' (supported: <f8 <f4 <f2 <i4 <i8 |b1 |i1)"},
        {"pipe.npy", "{'descr': '|f4', 'fortran_order': False, 'shape': (2, 3), }", "unsupported dtype '|f4' (supported: <f8 <f4 <f2 <i4 <i8 |b1 |i1)"},
        {"be.npy", "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", "big-endian data ('>f4') is not supported; save it little-endian (a.astype('<f4'))"},
        {"fortran.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", "Fortran-order data is not supported; save it in C order (np.ascontiguousarray)"},
        {"shape.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }", "shape [3, 2] does not match the expected [2, 3]"},
        {"rank.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", "shape [6] does not match the expected [2, 3]"},
        {"zero.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }", "shape [0, 3] does not match the expected [2, 3]"},
    };
    for (size_t i = 0; i < sizeof hdrs / sizeof hdrs[0]; i++) {
        write_npy(hdrs[i].name, 1, hdrs[i].header, d, sizeof d);
        expect_error(hdrs[i].name, FC_F32, s, FC_ERR_INPUT, hdrs[i].msg);
    }
    write_npy("short.npy", 1, good, d, 10);
    expect_error("short.npy", FC_F32, s, FC_ERR_INPUT, "truncated .npy data (expected 24 bytes after the header, found 10)");
    float d7[7] = {0};
    write_npy("long.npy", 1, good, d7, sizeof d7);
    expect_error("long.npy", FC_F32, s, FC_ERR_INPUT, "the file is longer than its header says (data beyond 24 bytes)");
    FcErr err = {0};
    void *data = NULL;
    FcStatus st = rt_npy_read(path_of("missing.npy"), FC_F32, &s, &data, &err);
    char want[600];
    snprintf(want, sizeof want, "cannot open '%s': No such file or directory", path_of("missing.npy"));
    EXPECT(st == FC_ERR_IO && strcmp(err.msg, want) == 0, "%s", err.msg);

    /* every truncation and every single-byte corruption of a good file: no crash, and a
     * truncated file is always an error */
    write_npy("good.npy", 1, good, d, sizeof d);
    FILE *f = fopen(path_of("good.npy"), "rb");
    unsigned char full[256];
    size_t n = fread(full, 1, sizeof full, f);
    fclose(f);
    for (size_t len = 0; len < n; len++) {
        write_bytes(path_of("cut.npy"), full, len);
        st = rt_npy_read(path_of("cut.npy"), FC_F32, &s, &data, &err);
        EXPECT(st == FC_ERR_INPUT, "truncated at %zu: status %d", len, st);
        if (st == FC_OK) fc_free(data);
    }
    static const unsigned char junk[] = {0, '\'', '"', '(', ')', ',', ':', '{', '}', '9', 'L', 0xff, ' ', '\n'};
    for (size_t at = 0; at < n - sizeof d; at++)
        for (size_t j = 0; j < sizeof junk; j++) {
            unsigned char c[256];
            memcpy(c, full, n);
            c[at] = junk[j];
            write_bytes(path_of("flip.npy"), c, n);
            data = NULL;
            st = rt_npy_read(path_of("flip.npy"), FC_F32, &s, &data, &err);
            if (st == FC_OK) fc_free(data);
            else EXPECT(data == NULL && strncmp(err.msg, path_of("flip.npy"), strlen(path_of("flip.npy"))) == 0, "%s", err.msg);
        }
}

/* Files written by NumPy, and ours read by NumPy. */
static void test_numpy(void) {
    if (system("python3 -c 'import numpy' >/dev/null 2>&1") != 0) {
        printf("test_npy: NumPy not available; skipping the NumPy interoperability part\n");
        return;
    }
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && python3 -c \""
             "import numpy as np\n"
             "a = (np.arange(12).reshape(3, 4) * 0.5 - 2.25)\n"
             "for t in ['f8', 'f4', 'f2', 'i4', 'i8', 'i1']: np.save('np_' + t + '.npy', a.astype(t))\n"
             "np.save('np_b1.npy', a > 0)\n"
             "np.save('np_scalar.npy', np.float32(3.5))\n"
             "np.save('np_fortran.npy', np.asfortranarray(a.astype('f4')))\n"
             "np.save('np_be.npy', a.astype('>f4'))\n"
             "np.lib.format.write_array(open('np_v2.npy', 'wb'), a.astype('f4'), version=(2, 0))\n"
             "\"",
             dir);
    REQUIRE(system(cmd) == 0);
    IrShape s = sh2(3, 4);
    FcErr err = {0};
    static const struct { const char *file; FcDtype t; } files[] = {
        {"np_f8.npy", FC_F64}, {"np_f4.npy", FC_F32}, {"np_f2.npy", FC_F16}, {"np_i4.npy", FC_I32},
        {"np_i8.npy", FC_I64}, {"np_b1.npy", FC_BOOL}, {"np_v2.npy", FC_F32}, {"np_i1.npy", FC_I8}};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        void *data = NULL;
        FcStatus st = rt_npy_read(path_of(files[i].file), files[i].t, &s, &data, &err);
        EXPECT(st == FC_OK, "%s: %s", files[i].file, err.msg);
        if (st != FC_OK) continue;
        for (int k = 0; k < 12; k++) {
            double want = k * 0.5 - 2.25;
            want = files[i].t == FC_BOOL ? want > 0 : ir_dtype_is_int(files[i].t) || files[i].t == FC_I8 ? trunc(want) : want;
            double got = rt_host_load(files[i].t, data, k);
            EXPECT(got == want, "%s[%d] = %g, want %g", files[i].file, k, got, want);
        }
        fc_free(data);
    }
    void *data = NULL;
    IrShape s0 = {0};
    REQUIRE(rt_npy_read(path_of("np_scalar.npy"), FC_F32, &s0, &data, &err) == FC_OK);
    EXPECT(*(float *)data == 3.5f, "scalar");
    fc_free(data);
    expect_error("np_fortran.npy", FC_F32, s, FC_ERR_INPUT, "Fortran-order data is not supported; save it in C order (np.ascontiguousarray)");
    expect_error("np_be.npy", FC_F32, s, FC_ERR_INPUT, "big-endian data ('>f4') is not supported; save it little-endian (a.astype('<f4'))");
    expect_error("np_f4.npy", FC_I32, s, FC_ERR_INPUT, "cannot load float data (f32) into a tensor of dtype i32");
    expect_error("np_f4.npy", FC_F32, sh2(4, 3), FC_ERR_INPUT, "shape [3, 4] does not match the expected [4, 3]");

    /* ours, read by NumPy */
    static const FcDtype ts[] = {FC_F64, FC_F32, FC_F16, FC_BF16, FC_F8E4M3, FC_F8E5M2, FC_I32, FC_I64, FC_BOOL, FC_I8};
    static const char *np_names[] = {"float64", "float32", "float16", "float32", "float32", "float32", "int32", "int64", "bool", "int8"};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
        unsigned char buf[12 * 8];
        for (int k = 0; k < 12; k++) rt_host_store(ts[i], buf, k, k * 0.5 - 2.25);
        char name[64];
        snprintf(name, sizeof name, "ours_%s.npy", fc_dtype_name(ts[i]));
        REQUIRE(rt_npy_write(path_of(name), ts[i], &s, buf, &err) == FC_OK);
        char want[400] = "[";
        for (int k = 0; k < 12; k++) {
            size_t at = strlen(want);
            snprintf(want + at, sizeof want - at, "%s%.17g", k ? ", " : "", rt_host_load(ts[i], buf, k));
        }
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && python3 -c \"import numpy as np\n"
                 "a = np.load('%s')\n"
                 "assert a.dtype == np.dtype('%s') and a.shape == (3, 4), (a.dtype, a.shape)\n"
                 "assert (a.astype('f8').ravel() == np.array(%s])).all(), a\n\"",
                 dir, name, np_names[i], want);
        EXPECT(system(cmd) == 0, "NumPy reads %s", name);
    }
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/fusec_test_npy_XXXXXX");
    REQUIRE(mkdtemp(dir));
    test_round_trips();
    test_conversions();
    test_bad_files();
    test_numpy();
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    if (failures) {
        fprintf(stderr, "test_npy: %d failures\n", failures);
        return 1;
    }
    printf("test_npy: all passed\n");
    return 0;
}
