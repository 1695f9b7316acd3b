#!/usr/bin/env bash
# tools/ndtr_bitwise.sh [BUILD_DIR=build]: every f32 bit pattern through the CPU device's ndtr
# (codegen/llvm.c vndtr, JIT-compiled) and through CUDA's fc_ndtr (codegen/cuda.c, the helper text
# of a generated unit compiled for the host as C, every operation rounded as written), compared
# bit for bit (NaN with NaN). They must agree where the CPU fuses its multiply-adds (x86-64-v3 and
# up: run it without FUSEC_CPU, or with FUSEC_CPU=x86-64-v3/v4). About 5 minutes on one thread of a
# Zen 3; prints "every f32: 0 differ, 16777214 NaN pairs" and exits 0 when they agree.
# test_cuda_emu's ndtr_bitwise case checks 16384 points of the emulated unit on every run
# (docs/cuda.md); this is the whole range, not part of the suite.
set -euo pipefail
build=${1:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
printf 'block nd(x: f32[16]) {\n    return ndtr(x)\n}\n' > "$work/t.tf"
"$top/$build/fusec" "$work/t.tf" -o "$work/t.cu"
awk '/static __device__ __forceinline__ float fc_ndtr/,/^}/' "$work/t.cu" > "$work/helper.inc"
[ -s "$work/helper.inc" ] || { echo "ndtr_bitwise: no fc_ndtr in the generated unit" >&2; exit 1; }
cat > "$work/ndall.c" <<'C'
#include "fusec.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define __device__
#define __forceinline__ inline
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline float __fmul_rn(float a, float b) { volatile float r = a * b; return r; }
static inline float __fadd_rn(float a, float b) { volatile float r = a + b; return r; }
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
#include "helper.inc"
#define N (1 << 24)
int main(void) {
    char src[128];
    snprintf(src, sizeof src, "block nd(x: f32[%d]) {\n    return ndtr(x)\n}\n", N);
    FcOptions *o; FcBlock *b; FcDevice *d; FcProgram *p; FcTensor *x, *y;
    int64_t dims[1] = {N};
    if (fc_options_new(&o) || fc_compile_string(src, "nd.tf", o, &b) || fc_device_open(FC_DEVICE_CPU, 0, &d) ||
        fc_program_new(b, d, &p) || fc_tensor_new(d, FC_F32, 1, dims, &x) || fc_tensor_new(d, FC_F32, 1, dims, &y)) {
        fprintf(stderr, "ndtr_bitwise: setting up the CPU device failed\n");
        return 1;
    }
    uint32_t *in = malloc((size_t)N * 4), *out = malloc((size_t)N * 4);
    if (!in || !out) return 1;
    long long diff = 0, nan = 0;
    for (uint64_t c = 0; c < (1ull << 32) / N; c++) {
        for (uint32_t i = 0; i < N; i++) in[i] = (uint32_t)(c * N + i);
        FcTensor *ins[1] = {x}, *outs[1] = {y};
        if (fc_tensor_copy_from_host(x, in, (size_t)N * 4) || fc_program_run(p, ins, outs) ||
            fc_tensor_copy_to_host(y, out, (size_t)N * 4)) { fprintf(stderr, "ndtr_bitwise: a run failed\n"); return 1; }
        for (uint32_t i = 0; i < N; i++) {
            float xv, w, g = fc_ndtr(__int_as_float((int)in[i]));
            uint32_t gb;
            memcpy(&xv, &in[i], 4); memcpy(&w, &out[i], 4); memcpy(&gb, &g, 4);
            if (g != g && w != w) { nan++; continue; }
            if (gb != out[i] && diff++ < 5) printf("x = %a: CUDA's fc_ndtr %a, the CPU's %a\n", (double)xv, (double)g, (double)w);
        }
    }
    printf("every f32: %lld differ, %lld NaN pairs\n", diff, nan);
    return diff != 0;
}
C
${CC:-cc} -O2 -ffp-contract=off -std=c11 -I"$top/runtime" -I"$work" "$work/ndall.c" -o "$work/ndall" \
    -L"$top/$build" -lfusec -lm -Wl,-rpath,"$top/$build"
FUSEC_NUM_THREADS=${FUSEC_NUM_THREADS:-1} "$work/ndall"
