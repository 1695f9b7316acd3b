/* test_host.c: runtime/host.c: dtype loads/stores and their rounding rules, bulk conversion,
 * the seeded generators, the comparison rule of fc_tensor_compare, and the tolerance rule
 * of docs/tolerances.md. (test_interp checks host.c's rounding against the interpreter's
 * independent implementation on every narrow bit pattern.) */
#include "host.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static uint32_t bits_of(FcDtype t, double v) {
    unsigned char b[8] = {0};
    rt_host_store(t, b, 0, v);
    uint32_t r = 0;
    memcpy(&r, b, fc_dtype_size(t) < 4 ? fc_dtype_size(t) : 4);
    return r;
}

static void test_store_rules(void) {
    static const struct { FcDtype t; double v; uint32_t bits; } cases[] = {
        {FC_BF16, 1 + 0x1p-9, 0x3F80},      {FC_BF16, 1 + 0x1p-8, 0x3F80},  {FC_BF16, 1 + 3 * 0x1p-8, 0x3F82},
        {FC_BF16, -2.0, 0xC000},            {FC_BF16, 1e39, 0x7F80},        {FC_BF16, 0x1p-133, 0x0001},
        {FC_F16, 65504, 0x7BFF},            {FC_F16, 65519.99, 0x7BFF},     {FC_F16, 65520, 0x7C00},
        {FC_F16, -INFINITY, 0xFC00},        {FC_F16, 0x1p-24, 0x0001},      {FC_F16, 0x1p-25, 0x0000},
        {FC_F16, 0x1.8p-25, 0x0001},        {FC_F16, -0.0, 0x8000},         {FC_F16, 1.0, 0x3C00},
        {FC_F8E4M3, 448, 0x7E},             {FC_F8E4M3, 500, 0x7E},         {FC_F8E4M3, -1e30, 0xFE},
        {FC_F8E4M3, INFINITY, 0x7E},        {FC_F8E4M3, 0x1p-9, 0x01},      {FC_F8E4M3, 17, 0x58},
        {FC_F8E4M3, 1.0, 0x38},             {FC_F8E5M2, 57344, 0x7B},       {FC_F8E5M2, 1e6, 0x7B},
        {FC_F8E5M2, INFINITY, 0x7C},        {FC_F8E5M2, -INFINITY, 0xFC},   {FC_F8E5M2, 1.0, 0x3C},
        {FC_F8E5M2, 0x1p-16, 0x01},         {FC_BOOL, NAN, 1},              {FC_BOOL, -0.0, 0},
        {FC_BOOL, 0.25, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint32_t b = bits_of(cases[i].t, cases[i].v);
        EXPECT(b == cases[i].bits, "%s(%g): bits %#x, want %#x", fc_dtype_name(cases[i].t), cases[i].v, b, cases[i].bits);
    }
    EXPECT(isnan(rt_host_round(FC_F8E4M3, NAN)) && bits_of(FC_F8E4M3, NAN) == 0x7F, "e4m3 NaN");
    EXPECT(isnan(rt_host_round(FC_BF16, NAN)) && isnan(rt_host_round(FC_F16, NAN)) && isnan(rt_host_round(FC_F8E5M2, NAN)), "NaN kept");
    EXPECT(rt_host_round(FC_I32, NAN) == 0 && rt_host_round(FC_I32, 1e10) == 2147483647.0 &&
           rt_host_round(FC_I32, -1e10) == -2147483648.0 && rt_host_round(FC_I32, -3.9) == -3, "i32 rules");
    int64_t v;
    unsigned char b8[8];
    rt_host_store(FC_I64, b8, 0, -1e19);
    memcpy(&v, b8, 8);
    EXPECT(v == INT64_MIN, "i64 saturates low");
    rt_host_store(FC_I64, b8, 0, INFINITY);
    memcpy(&v, b8, 8);
    EXPECT(v == INT64_MAX, "i64 saturates high");
    /* every narrow pattern round-trips through load/store (NaN to a NaN) */
    for (int t = FC_F16; t <= FC_F8E5M2; t++) {
        int n = fc_dtype_size((FcDtype)t) == 2 ? 65536 : 256, bad = 0;
        for (int i = 0; i < n; i++) {
            unsigned char in[2] = {(unsigned char)(i & 0xff), (unsigned char)(i >> 8)}, out[2] = {0, 0};
            double d = rt_host_load((FcDtype)t, in, 0);
            rt_host_store((FcDtype)t, out, 0, d);
            if (isnan(d) ? !isnan(rt_host_load((FcDtype)t, out, 0)) : memcmp(in, out, fc_dtype_size((FcDtype)t)) != 0) bad++;
        }
        EXPECT(bad == 0, "%s: %d patterns do not round-trip", fc_dtype_name((FcDtype)t), bad);
    }
    /* bulk conversion equals element stores; i64 -> i32 saturates */
    double src[5] = {1.5, -2.25, 1e6, 3.3333, -0.0};
    uint16_t a[5], bsame[5];
    rt_host_convert(FC_BF16, a, FC_F64, src, 5);
    for (int i = 0; i < 5; i++) rt_host_store(FC_BF16, bsame, i, src[i]);
    EXPECT(memcmp(a, bsame, sizeof a) == 0, "convert");
    int64_t big[2] = {INT64_MAX, -5};
    int32_t small[2];
    rt_host_convert(FC_I32, small, FC_I64, big, 2);
    EXPECT(small[0] == INT32_MAX && small[1] == -5, "i64 -> i32");
}

static void test_random(void) {
    enum { N = 100000 };
    float *a = malloc(sizeof(float) * N), *b = malloc(sizeof(float) * N);
    rt_host_fill_normal(FC_F32, a, N, 42);
    rt_host_fill_normal(FC_F32, b, 10, 42);
    EXPECT(memcmp(a, b, 10 * sizeof(float)) == 0, "element i depends only on (seed, i)");
    rt_host_fill_normal(FC_F32, b, N, 43);
    int same = 0, zeros = 0;
    double s = 0, s2 = 0;
    for (int i = 0; i < N; i++) {
        same += a[i] == b[i];
        zeros += a[i] == 0;
        s += a[i];
        s2 += (double)a[i] * a[i];
    }
    EXPECT(same < 10 && zeros == 0, "seeds differ: %d equal, %d zeros", same, zeros);
    EXPECT(fabs(s / N) < 0.02 && fabs(s2 / N - 1) < 0.03, "N(0,1): mean %g, var %g", s / N, s2 / N);
    int32_t ints[1000];
    rt_host_fill_uniform_int(FC_I32, ints, 1000, 3, 9, 7);
    int seen[6] = {0}, out = 0;
    for (int i = 0; i < 1000; i++) {
        if (ints[i] < 3 || ints[i] >= 9) out++;
        else seen[ints[i] - 3]++;
    }
    EXPECT(out == 0 && seen[0] && seen[5], "uniform [3, 9)");
    unsigned char bools[200];
    rt_host_fill_normal(FC_BOOL, bools, 200, 1);
    int ones = 0, other = 0;
    for (int i = 0; i < 200; i++) {
        ones += bools[i] == 1;
        other += bools[i] > 1;
    }
    EXPECT(ones > 60 && ones < 140 && other == 0, "coin flips: %d ones", ones);
    free(a);
    free(b);
}

static void test_compare(void) {
    double ma, mr;
    float r[4] = {1, -4, 2, NAN}, g1[4] = {1.5, -4, 2, NAN}, g2[4] = {1, -4, 2, 0};
    rt_host_compare(FC_F32, g1, r, 4, &ma, &mr);
    EXPECT(ma == 0.5 && mr == 0.125, "%g %g", ma, mr);
    rt_host_compare(FC_F32, g2, r, 4, &ma, &mr);
    EXPECT(isinf(ma) && isinf(mr), "NaN against a number is inf");
    float p[2] = {INFINITY, 1}, q[2] = {-INFINITY, 1}, z[2] = {0, 0};
    rt_host_compare(FC_F32, p, q, 2, &ma, &mr);
    EXPECT(isinf(ma) && isinf(mr), "inf kinds must agree");
    rt_host_compare(FC_F32, p, p, 2, &ma, &mr);
    EXPECT(ma == 0 && mr == 0, "same non-finite positions are fine");
    rt_host_compare(FC_F32, z, z, 2, &ma, &mr);
    EXPECT(ma == 0 && mr == 0, "0/0 is 0");
    /* a float reference of 0 counts as the smallest normal (x/0 is inf only for integers) */
    rt_host_compare(FC_F32, p + 1, z, 1, &ma, &mr);
    EXPECT(ma == 1 && mr == 0x1p126, "x against 0 in f32: %g", mr);
    int32_t i1[1] = {3}, i0[1] = {0};
    rt_host_compare(FC_I32, i1, i0, 1, &ma, &mr);
    EXPECT(ma == 3 && isinf(mr), "x/0 is inf for integers");
    /* all-subnormal references: the error over the smallest normal (one unit of 2^-149 apart is
     * 2^-23, not 1/26); a normal value beside them and the floor does nothing */
    float sr[2] = {26 * 0x1p-149f, 57 * 0x1p-149f}, sg[2] = {27 * 0x1p-149f, 57 * 0x1p-149f};
    rt_host_compare(FC_F32, sg, sr, 2, &ma, &mr);
    EXPECT(ma == 0x1p-149 && mr == 0x1p-23, "subnormal f32: %g %g", ma, mr);
    float nr[2] = {26 * 0x1p-149f, 0x1p-120f}, ng[2] = {27 * 0x1p-149f, 0x1p-120f};
    rt_host_compare(FC_F32, ng, nr, 2, &ma, &mr);
    EXPECT(mr == 0x1p-29, "a normal reference beside: %g", mr);
    EXPECT(rt_host_min_normal(FC_F16) == 0x1p-14 && rt_host_min_normal(FC_F8E4M3) == 0x1p-6 &&
           rt_host_min_normal(FC_BF16) == 0x1p-126 && rt_host_min_normal(FC_F64) == 0x1p-1022 && rt_host_min_normal(FC_I64) == 0,
           "smallest normals");
}

static void test_tolerance(void) {
    EXPECT(rt_host_tolerance(FC_I32, 100) == 0 && rt_host_tolerance(FC_BOOL, 1) == 0, "ints exact");
    double f1 = rt_host_tolerance(FC_F32, 1), f768 = rt_host_tolerance(FC_F32, 768);
    EXPECT(fabs(f1 - (64 + 4) * 0x1p-24) < 1e-20, "f32 K=1: %g", f1);
    EXPECT(f768 > 9e-6 && f768 < 1.1e-5, "f32 K=768: %g", f768);
    EXPECT(rt_host_tolerance(FC_F32, 0) == f1, "K < 1 counts as 1");
    for (int t = FC_F64; t <= FC_F8E5M2; t++)
        EXPECT(rt_host_tolerance((FcDtype)t, 4096) > rt_host_tolerance((FcDtype)t, 64), "grows with K");
    EXPECT(rt_host_tolerance(FC_BF16, 768) > rt_host_tolerance(FC_F16, 768) &&
           rt_host_tolerance(FC_F16, 768) > rt_host_tolerance(FC_F32, 768) &&
           rt_host_tolerance(FC_F32, 768) > rt_host_tolerance(FC_F64, 768), "ordered by precision");
    EXPECT(rt_host_tolerance(FC_F8E5M2, 1 << 20) < 1, "f8 still catches an unwritten output");
}

int main(void) {
    test_store_rules();
    test_random();
    test_compare();
    test_tolerance();
    if (failures) {
        fprintf(stderr, "test_host: %d failures\n", failures);
        return 1;
    }
    printf("test_host: all passed\n");
    return 0;
}
