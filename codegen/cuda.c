/* cuda.c: the kernel IR printed as CUDA C (cg_cuda_kernels) and as an ahead-of-time
 * translation unit with its host launcher (cg_cuda_aot), or with the forward and backward
 * launchers of a training plan (cg_cuda_aot_train). Mapping: docs/cuda.md.
 *
 * The printer decides nothing: grid, block, loops, barriers and reductions are those of the
 * KirKernel. It checks that the IR is printable (types agree, variables are used in the
 * scope that declares them, thread loops do not nest, barriers and reductions sit at block
 * level, names are generated identifiers) and returns FC_ERR_INTERNAL otherwise.
 *
 * Invariants of the output:
 *   - Self-contained: no #include in the kernel part; the storage conversions (f16, bf16,
 *     f8) are the device's cvt instructions (inline asm; f8 below sm_89 integer code) in a
 *     preamble that holds only the helpers used.
 *   - Identifiers are generated: p<N> params, v<N> variables, sh<N> shared arrays, ta<N>
 *     thread arrays, fc_* helpers; kernel names come from KirKernel.name after a check.
 *     Text from the user (block and tensor names) appears only inside comments, filtered.
 *   - Warning-free under nvcc -Werror all-warnings: variables, shared and thread arrays
 *     that are never read are not declared (their defining expressions become (void)(...)).
 *   - A vec thread loop (KirStmt.vec) runs groups of W iterations a thread: a full group
 *     whose vec accesses are 16-byte aligned moves them as 16-byte vectors around W unrolled
 *     lanes; any other group runs one iteration at a time (put_vec_for).
 *   - A block reduction's order is a fixed function of the kernel: per-thread strided
 *     partials, a halving tree over the 32 lanes of each warp, then a halving tree over the
 *     warps' results (missing lanes and warps count as the identity).
 */
#include "codegen.h"
#include "vecmath_consts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CG_MAX_EXPR_NODES 2000000   /* printed expression nodes per kernel (tree size) */
#define CG_MAX_EXPR_DEPTH 2000
#define CG_MAX_STATIC_SHARED 49152  /* bytes of static __shared__ per block */
#define CG_MAX_DYNAMIC_SHARED 232448 /* opt-in dynamic shared memory of sm_90 (the largest target) */
#define CG_RED_SCRATCH_MAX 1280      /* static reduction scratch at most: 5 types x 32 warps x 8 bytes */
#define CG_MAX_GRID 2147483647LL    /* CUDA's gridDim.x limit */

/* Preamble helpers, emitted only when used (an unused static function is a warning; the
 * few that an `#if __CUDA_ARCH__` branch may leave unused are marked unused).
 *
 * Storage conversions use the device's cvt instructions: `cvt.rn.bf16x2.f32` and
 * `cvt.rn.f16x2.f32` (two values a register, sm_80 and up), `cvt.f32.f16`, and on sm_89/sm_90
 * `cvt.rn.satfinite.e4m3x2.f32` / `.e5m2x2.f32` and `cvt.rn.f16x2.e4m3x2`; below sm_89 the f8
 * conversions are integer code (fc_round_bits). Each cvt has one wrapper, fc_cvt_*, with the
 * instruction's own operand order (its first source goes to the upper half); the emulation
 * harness (tests/cuda_emu/fusec_cuda_emu.h) defines FCEMU_PTX_CVT and models the instructions
 * itself. The vec path stores pairs of lanes with one x2 conversion (fc_pack_*), and decodes
 * E4M3 loads in pairs (fc_unpack_f8e4m3: one cvt.rn.f16x2.e4m3x2 for two lanes). */
enum {
    H_CVT_BF16X2, H_CVT_F16X2, H_CVT_F32_F16, H_CVT_E4M3X2, H_CVT_E5M2X2, H_CVT_F16X2_E4M3X2,
    H_F16_TO_F32, H_F32_TO_F16, H_BF16_TO_F32, H_F32_TO_BF16, H_F8E4M3_TO_F32, H_F32_TO_F8E4M3,
    H_F8E5M2_TO_F32, H_F32_TO_F8E5M2, H_ROUND_BITS,
    H_PACK_BF16, H_PACK_F16, H_PACK_F8E4M3, H_PACK_F8E5M2, H_UNPACK_F8E4M3,
    H_F32_TO_I32, H_F32_TO_I64, H_F64_TO_I32, H_F64_TO_I64,
    H_MAX_F32, H_MIN_F32, H_MAX_F64, H_MIN_F64, H_MAX_I32, H_MIN_I32, H_MAX_I64, H_MIN_I64,
    H_PHILOX, H_AMAX_FLUSH, H_NDTR,
    H_COUNT
};

#define FC_SM89 "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890\n"
static const char *const helper_text[H_COUNT] = {
    [H_CVT_BF16X2] =
        "#ifndef FCEMU_PTX_CVT\n"
        "static __device__ __forceinline__ __attribute__((unused)) unsigned int fc_cvt_bf16x2(float hi, float lo)\n"
        "{\n"
        "    unsigned int d;\n"
        "    asm(\"cvt.rn.bf16x2.f32 %0, %1, %2;\" : \"=r\"(d) : \"f\"(hi), \"f\"(lo));\n"
        "    return d;\n"
        "}\n"
        "#endif\n",
    [H_CVT_F16X2] =
        "#ifndef FCEMU_PTX_CVT\n"
        "static __device__ __forceinline__ __attribute__((unused)) unsigned int fc_cvt_f16x2(float hi, float lo)\n"
        "{\n"
        "    unsigned int d;\n"
        "    asm(\"cvt.rn.f16x2.f32 %0, %1, %2;\" : \"=r\"(d) : \"f\"(hi), \"f\"(lo));\n"
        "    return d;\n"
        "}\n"
        "#endif\n",
    [H_CVT_F32_F16] =
        "#ifndef FCEMU_PTX_CVT\n"
        "static __device__ __forceinline__ __attribute__((unused)) float fc_cvt_f32_f16(unsigned short a)\n"
        "{\n"
        "    float d;\n"
        "    asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(d) : \"h\"(a));\n"
        "    return d;\n"
        "}\n"
        "#endif\n",
    [H_CVT_E4M3X2] =
        "#if !defined(FCEMU_PTX_CVT) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890\n"
        "static __device__ __forceinline__ __attribute__((unused)) unsigned short fc_cvt_e4m3x2(float hi, float lo)\n"
        "{\n"
        "    unsigned short d;\n"
        "    asm(\"cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\" : \"=h\"(d) : \"f\"(hi), \"f\"(lo));\n"
        "    return d;\n"
        "}\n"
        "#endif\n",
    [H_CVT_E5M2X2] =
        "#if !defined(FCEMU_PTX_CVT) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890\n"
        "static __device__ __forceinline__ __attribute__((unused)) unsigned short fc_cvt_e5m2x2(float hi, float lo)\n"
        "{\n"
        "    unsigned short d;\n"
        "    asm(\"cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;\" : \"=h\"(d) : \"f\"(hi), \"f\"(lo));\n"
        "    return d;\n"
        "}\n"
        "#endif\n",
    [H_CVT_F16X2_E4M3X2] =
        "#if !defined(FCEMU_PTX_CVT) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890\n"
        "static __device__ __forceinline__ __attribute__((unused)) unsigned int fc_cvt_f16x2_e4m3x2(unsigned short a)\n"
        "{\n"
        "    unsigned int d;\n"
        "    asm(\"cvt.rn.f16x2.e4m3x2 %0, %1;\" : \"=r\"(d) : \"h\"(a));\n"
        "    return d;\n"
        "}\n"
        "#endif\n",
    [H_F16_TO_F32] =
        "static __device__ __forceinline__ float fc_f16_to_f32(unsigned short h)\n"
        "{\n"
        "    return fc_cvt_f32_f16(h);\n"
        "}\n",
    [H_ROUND_BITS] =
        "/* |x| (f32 bits ax, finite) rounded to nearest even into a format with mb mantissa bits\n"
        " * and exponent bias `bias`, as that format's magnitude code; the caller saturates codes\n"
        " * beyond the largest finite value. (f8 below sm_89, which has no f8 cvt.) */\n"
        "static __device__ __forceinline__ __attribute__((unused)) unsigned int fc_round_bits(unsigned int ax, int mb, int bias)\n"
        "{\n"
        "    int e = (int)(ax >> 23);\n"
        "    if (e == 0) return 0u; /* f32 subnormals are far below half the smallest target value */\n"
        "    unsigned int m = (ax & 0x7fffffu) | 0x800000u;\n"
        "    int te = e - 127 + bias; /* the target's biased exponent */\n"
        "    int shift = 23 - mb + (te >= 1 ? 0 : 1 - te);\n"
        "    if (shift > 24) return 0u;\n"
        "    unsigned int q = m >> shift;\n"
        "    unsigned int rem = m & ((1u << shift) - 1u);\n"
        "    unsigned int half = 1u << (shift - 1);\n"
        "    if (rem > half || (rem == half && (q & 1u) != 0u)) q++;\n"
        "    if (te >= 1) q += (unsigned int)(te - 1) << mb;\n"
        "    return q;\n"
        "}\n",
    [H_F32_TO_F16] =
        "static __device__ __forceinline__ unsigned short fc_f32_to_f16(float f)\n"
        "{\n"
        "    return (unsigned short)fc_cvt_f16x2(0.0f, f);\n"
        "}\n",
    [H_BF16_TO_F32] =
        "static __device__ __forceinline__ float fc_bf16_to_f32(unsigned short h)\n"
        "{\n"
        "    return __uint_as_float((unsigned int)h << 16);\n"
        "}\n",
    [H_F32_TO_BF16] =
        "static __device__ __forceinline__ unsigned short fc_f32_to_bf16(float f)\n"
        "{\n"
        "    return (unsigned short)fc_cvt_bf16x2(0.0f, f);\n"
        "}\n",
    [H_F8E4M3_TO_F32] =
        "static __device__ __forceinline__ float fc_f8e4m3_to_f32(unsigned char b)\n"
        "{\n"
        FC_SM89
        "    return fc_cvt_f32_f16((unsigned short)fc_cvt_f16x2_e4m3x2((unsigned short)b));\n"
        "#else\n"
        "    unsigned int sign = ((unsigned int)b & 0x80u) << 24;\n"
        "    unsigned int e = ((unsigned int)b >> 3) & 0xfu;\n"
        "    unsigned int m = (unsigned int)b & 0x7u;\n"
        "    if (e == 0xfu && m == 0x7u) return __uint_as_float(sign | 0x7fc00000u);\n"
        "    if (e == 0u) {\n"
        "        float r = (float)m * 0.001953125f; /* m * 2^-9, exact */\n"
        "        return sign ? -r : r;\n"
        "    }\n"
        "    return __uint_as_float(sign | ((e + 120u) << 23) | (m << 20));\n"
        "#endif\n"
        "}\n",
    [H_F32_TO_F8E4M3] =
        "static __device__ __forceinline__ unsigned char fc_f32_to_f8e4m3(float f)\n"
        "{\n"
        FC_SM89
        "    return (unsigned char)fc_cvt_e4m3x2(0.0f, f); /* satfinite: inf gives 448, as e4m3 has none */\n"
        "#else\n"
        "    unsigned int x = __float_as_uint(f);\n"
        "    unsigned int sign = (x >> 24) & 0x80u;\n"
        "    unsigned int ax = x & 0x7fffffffu;\n"
        "    if (ax > 0x7f800000u) return (unsigned char)(sign | 0x7fu);\n"
        "    unsigned int q = fc_round_bits(ax, 3, 7);\n"
        "    if (q > 0x7eu) q = 0x7eu; /* saturate to 448 (inf too: e4m3 has none) */\n"
        "    return (unsigned char)(sign | q);\n"
        "#endif\n"
        "}\n",
    [H_F8E5M2_TO_F32] =
        "static __device__ __forceinline__ float fc_f8e5m2_to_f32(unsigned char b)\n"
        "{\n"
        "    return fc_f16_to_f32((unsigned short)((unsigned int)b << 8));\n"
        "}\n",
    [H_F32_TO_F8E5M2] =
        "static __device__ __forceinline__ unsigned char fc_f32_to_f8e5m2(float f)\n"
        "{\n"
        "    unsigned int x = __float_as_uint(f);\n"
        "    unsigned int sign = (x >> 24) & 0x80u;\n"
        "    unsigned int ax = x & 0x7fffffffu;\n"
        "    if (ax == 0x7f800000u) return (unsigned char)(sign | 0x7cu); /* inf stays inf */\n"
        FC_SM89
        "    return (unsigned char)fc_cvt_e5m2x2(0.0f, f); /* finite values saturate to 57344 */\n"
        "#else\n"
        "    if (ax > 0x7f800000u) return (unsigned char)(sign | 0x7eu);\n"
        "    unsigned int q = fc_round_bits(ax, 2, 15);\n"
        "    if (q > 0x7bu) q = 0x7bu; /* finite values saturate to 57344 */\n"
        "    return (unsigned char)(sign | q);\n"
        "#endif\n"
        "}\n",
    [H_PACK_BF16] =
        "static __device__ __forceinline__ unsigned int fc_pack_bf16(float lo, float hi)\n"
        "{\n"
        "    return fc_cvt_bf16x2(hi, lo);\n"
        "}\n",
    [H_PACK_F16] =
        "static __device__ __forceinline__ unsigned int fc_pack_f16(float lo, float hi)\n"
        "{\n"
        "    return fc_cvt_f16x2(hi, lo);\n"
        "}\n",
    [H_PACK_F8E4M3] =
        "static __device__ __forceinline__ unsigned int fc_pack_f8e4m3(float lo, float hi)\n"
        "{\n"
        FC_SM89
        "    return (unsigned int)fc_cvt_e4m3x2(hi, lo);\n"
        "#else\n"
        "    return (unsigned int)fc_f32_to_f8e4m3(lo) | ((unsigned int)fc_f32_to_f8e4m3(hi) << 8);\n"
        "#endif\n"
        "}\n",
    [H_UNPACK_F8E4M3] =
        "static __device__ __forceinline__ void fc_unpack_f8e4m3(unsigned short b, float *lo, float *hi)\n"
        "{\n"
        FC_SM89
        "    const unsigned int h = fc_cvt_f16x2_e4m3x2(b);\n"
        "    *lo = fc_cvt_f32_f16((unsigned short)h);\n"
        "    *hi = fc_cvt_f32_f16((unsigned short)(h >> 16));\n"
        "#else\n"
        "    *lo = fc_f8e4m3_to_f32((unsigned char)b);\n"
        "    *hi = fc_f8e4m3_to_f32((unsigned char)(b >> 8));\n"
        "#endif\n"
        "}\n",
    [H_PACK_F8E5M2] =
        "static __device__ __forceinline__ unsigned int fc_pack_f8e5m2(float lo, float hi)\n"
        "{\n"
        FC_SM89
        "    if ((__float_as_uint(lo) & 0x7fffffffu) != 0x7f800000u && (__float_as_uint(hi) & 0x7fffffffu) != 0x7f800000u)\n"
        "        return (unsigned int)fc_cvt_e5m2x2(hi, lo); /* no inf: satfinite would not keep it */\n"
        "#endif\n"
        "    return (unsigned int)fc_f32_to_f8e5m2(lo) | ((unsigned int)fc_f32_to_f8e5m2(hi) << 8);\n"
        "}\n",
    [H_F32_TO_I32] =
        "static __device__ __forceinline__ int fc_f32_to_i32(float a)\n"
        "{\n"
        "    if (!(a == a)) return 0;\n"
        "    if (a >= 2147483648.0f) return 2147483647;\n"
        "    if (a <= -2147483648.0f) return -2147483647 - 1;\n"
        "    return (int)a;\n"
        "}\n",
    [H_F32_TO_I64] =
        "static __device__ __forceinline__ long long fc_f32_to_i64(float a)\n"
        "{\n"
        "    if (!(a == a)) return 0;\n"
        "    if (a >= 9223372036854775808.0f) return 9223372036854775807LL;\n"
        "    if (a <= -9223372036854775808.0f) return -9223372036854775807LL - 1;\n"
        "    return (long long)a;\n"
        "}\n",
    [H_F64_TO_I32] =
        "static __device__ __forceinline__ int fc_f64_to_i32(double a)\n"
        "{\n"
        "    if (!(a == a)) return 0;\n"
        "    if (a >= 2147483648.0) return 2147483647;\n"
        "    if (a <= -2147483648.0) return -2147483647 - 1;\n"
        "    return (int)a;\n"
        "}\n",
    [H_F64_TO_I64] =
        "static __device__ __forceinline__ long long fc_f64_to_i64(double a)\n"
        "{\n"
        "    if (!(a == a)) return 0;\n"
        "    if (a >= 9223372036854775808.0) return 9223372036854775807LL;\n"
        "    if (a <= -9223372036854775808.0) return -9223372036854775807LL - 1;\n"
        "    return (long long)a;\n"
        "}\n",
    [H_MAX_F32] =
        "static __device__ __forceinline__ float fc_max_f32(float a, float b)\n"
        "{\n"
        "    return a != a ? a : (b != b ? b : fmaxf(a, b));\n"
        "}\n",
    [H_MIN_F32] =
        "static __device__ __forceinline__ float fc_min_f32(float a, float b)\n"
        "{\n"
        "    return a != a ? a : (b != b ? b : fminf(a, b));\n"
        "}\n",
    [H_MAX_F64] =
        "static __device__ __forceinline__ double fc_max_f64(double a, double b)\n"
        "{\n"
        "    return a != a ? a : (b != b ? b : fmax(a, b));\n"
        "}\n",
    [H_MIN_F64] =
        "static __device__ __forceinline__ double fc_min_f64(double a, double b)\n"
        "{\n"
        "    return a != a ? a : (b != b ? b : fmin(a, b));\n"
        "}\n",
    [H_MAX_I32] = "static __device__ __forceinline__ int fc_max_i32(int a, int b) { return a > b ? a : b; }\n",
    [H_MIN_I32] = "static __device__ __forceinline__ int fc_min_i32(int a, int b) { return a < b ? a : b; }\n",
    [H_MAX_I64] =
        "static __device__ __forceinline__ long long fc_max_i64(long long a, long long b) { return a > b ? a : b; }\n",
    [H_MIN_I64] =
        "static __device__ __forceinline__ long long fc_min_i64(long long a, long long b) { return a < b ? a : b; }\n",
    [H_PHILOX] =
        "/* word 0 of Philox-4x32-10 (Random123): counter words (c0, c1) the low and high halves of a,\n"
        " * (c2, c3) of b, key words those of k; the key is bumped between rounds */\n"
        "static __device__ __forceinline__ long long fc_philox(long long a, long long b, long long k)\n"
        "{\n"
        "    unsigned int c0 = (unsigned int)a, c1 = (unsigned int)((unsigned long long)a >> 32);\n"
        "    unsigned int c2 = (unsigned int)b, c3 = (unsigned int)((unsigned long long)b >> 32);\n"
        "    unsigned int k0 = (unsigned int)k, k1 = (unsigned int)((unsigned long long)k >> 32);\n"
        "#pragma unroll\n"
        "    for (int r = 0; r < 10; r++) {\n"
        "        if (r > 0) {\n"
        "            k0 += 0x9E3779B9u;\n"
        "            k1 += 0xBB67AE85u;\n"
        "        }\n"
        "        unsigned int h0 = __umulhi(0xD2511F53u, c0), l0 = 0xD2511F53u * c0;\n"
        "        unsigned int h1 = __umulhi(0xCD9E8D57u, c2), l1 = 0xCD9E8D57u * c2;\n"
        "        c0 = h1 ^ c1 ^ k0;\n"
        "        c1 = l1;\n"
        "        c2 = h0 ^ c3 ^ k1;\n"
        "        c3 = l0;\n"
        "    }\n"
        "    return (long long)c0;\n"
        "}\n",
    [H_AMAX_FLUSH] =
        "/* KS_AMAX: the largest acc of the calling lanes (converged: every thread of the block is at the\n"
        " * end of the body) into the block's slot *s (shared memory), by one shared atomic max per warp;\n"
        " * 0 (+0, or nothing seen) changes nothing. The bits of magnitudes order them as numbers, a NaN\n"
        " * above inf */\n"
        "static __device__ __forceinline__ void fc_amax_flush(unsigned int *s, unsigned int acc)\n"
        "{\n"
        "    unsigned int m = __activemask();\n"
        "    unsigned int v = __reduce_max_sync(m, acc);\n"
        "    if ((int)(threadIdx.x & 31u) == __ffs((int)m) - 1 && v != 0u) atomicMax(s, v);\n"
        "}\n",
    [H_NDTR] =
        "/* ndtr x in f32, the standard normal CDF (the exact GELU's), as the CPU backend computes it\n"
        " * (codegen/llvm.c vndtr, docs/passes.md): T(a) = ndtr(-a) = e^(-a^2/2) R(a) with a = |x|,\n"
        " * R = Q / (k a Q + P) (rational of degree 5 over 4, k = sqrt(2 pi)), a^2 split exactly into\n"
        " * h + l, e^(-h/2) by n = rint(-h/2 log2 e), a two-part ln 2 and a degree-4 polynomial whose\n"
        " * 1 + q is scaled by R (1 - l/2) in one fused multiply-add, then by 2^n in two steps (a\n"
        " * subnormal result rounds once). The same operations in the same order as the CPU's, every\n"
        " * one rounded as written (__fmaf_rn, __fmul_rn; the division correctly rounded), with the\n"
        " * same constants (codegen/vecmath_consts.h): 3.14 ulp at most (every f32 with |x| in\n"
        " * [2^-30, 16), tests/unit/test_vecmath.c), and about 50 instructions of sm_90 against about\n"
        " * 70 for CUDA's normcdff (5 ulp documented). */\n"
        "static __device__ __forceinline__ float fc_ndtr(float x)\n"
        "{\n",   /* the body: put_ndtr_body */
};

static const char *const ctype_names[KT_COUNT] = {"bool", "int", "long long", "float", "double"};

/* C storage type of a buffer element. */
static const char *storage_ctype(FcDtype t) {
    switch (t) {
    case FC_F64: return "double";
    case FC_F32: return "float";
    case FC_F16: case FC_BF16: return "unsigned short";
    case FC_F8E4M3: case FC_F8E5M2: case FC_BOOL: return "unsigned char";
    case FC_I8: return "signed char";
    case FC_I32: return "int";
    case FC_I64: return "long long";
    default: return NULL;
    }
}

/* ---- printer state ----------------------------------------------------------------------- */
typedef struct Cg {
    const KirKernel *k;
    StrBuf *o;
    FcErr *err;
    FcStatus st;               /* the first error; FC_OK while printing goes well */
    bool *helpers;             /* [H_COUNT] helpers used by everything printed so far */
    unsigned char *visible;    /* [vars] 1 while a variable is declared in an open scope */
    bool *var_read;            /* [vars] some reachable expression reads it */
    bool *sh_read, *ta_read;   /* [shared], [tarrays] some reachable expression loads it */
    bool *expr_seen;           /* [exprs] reachability marks */
    long nodes;                /* expression nodes printed in this kernel */
    int in_threads;            /* > 0 inside a thread loop or a reduction body */
    bool red_type[KT_COUNT];   /* reductions of this type need __shared__ scratch */
    /* the vec thread loop being printed (KirStmt.vec; see put_vec_for) */
    int vec_var;               /* its variable, or -1 outside a vec loop */
    int vec_w;                 /* its width */
    bool vec_subst;            /* print vec_var as fc_g (a group's first iteration) */
    bool in_lanes;             /* printing the lanes of the full-vector path */
    long vec_var_prints;       /* times vec_var was printed (to declare it only when read) */
    struct VecSlot *slots;     /* the loop's vec accesses */
    int nslots;
    int fma_expr;              /* the accumulation printed as fmaf/fma in this statement, or -1 */
    bool in_tail;              /* printing the tail: loads of written params read through volatile
                                * (other blocks wrote them; no stale L1 line may serve them) */
} Cg;

/* One vec access of a vec loop: W elements of a param or shared array at index idx (the
 * index at the group's first iteration), read before the lanes run (loads) or written after
 * them (stores), through the local array fc_v<slot>[W]. */
typedef struct VecSlot {
    bool shared, store;
    bool packed;   /* a store to a 16/8-bit float param: the lanes keep f32, pairs are converted at once;
                    * a load of an E4M3 param: decoded to f32 in pairs as it is read */
    int ref, idx;
} VecSlot;

static void cg_fail(Cg *c, FcStatus s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void cg_fail(Cg *c, FcStatus s, const char *fmt, ...) {
    if (c->st != FC_OK) return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    c->st = fc_err_set(c->err, s, "cuda codegen: kernel %s: %s", c->k->name, buf);
}

static void ind(Cg *c, int d) {
    for (int i = 0; i < d; i++) sb_puts(c->o, "    ");
}

/* Text from outside the compiler, made safe for a C comment: printable ASCII only, no "*" + "/",
 * no backslash (so no line splicing), newlines and tabs become spaces. */
static void put_comment_text(StrBuf *o, const char *s, size_t max) {
    if (!s) { sb_puts(o, "?"); return; }
    char prev = 0;
    for (size_t i = 0; s[i] && i < max; i++) {
        char ch = s[i];
        if ((unsigned char)ch < 0x20 || (unsigned char)ch > 0x7e || ch == '\\') ch = '?';
        if (ch == '/' && prev == '*') ch = '?';
        sb_putc(o, ch);
        prev = ch;
    }
    if (strlen(s) > max) sb_puts(o, "...");
}

static bool is_keyword(const char *s) {
    static const char *const kw[] = {
        "auto", "bool", "break", "case", "char", "class", "const", "continue", "default", "delete",
        "do", "double", "else", "enum", "extern", "float", "for", "goto", "if", "inline", "int",
        "long", "new", "operator", "private", "public", "register", "return", "short", "signed",
        "sizeof", "static", "struct", "switch", "template", "this", "typedef", "union",
        "unsigned", "void", "volatile", "while", "true", "false", "main", NULL};
    for (int i = 0; kw[i]; i++)
        if (!strcmp(s, kw[i])) return true;
    return false;
}

/* A name the compiler generated: [A-Za-z][A-Za-z0-9_]*, not reserved, not ours, <= 200 chars. */
static bool generated_ident(const char *s) {
    if (!s || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z'))) return false;
    size_t n = 0;
    for (const char *p = s; *p; p++, n++) {
        char ch = *p;
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_'))
            return false;
        if (ch == '_' && p[1] == '_') return false;
    }
    if (n > 200 || is_keyword(s)) return false;
    if (!strncmp(s, "fc_", 3) || !strncmp(s, "fusec_", 6) || !strncmp(s, "cuda", 4)) return false;
    return true;
}

/* ---- reachability: what is read, so that nothing unread is declared ----------------------- */
static void mark_expr(Cg *c, int id, int depth) {
    const KirKernel *k = c->k;
    if (id < 0 || id >= k->exprs.len || depth > CG_MAX_EXPR_DEPTH) return; /* reported later */
    if (c->expr_seen[id]) return;
    c->expr_seen[id] = true;
    const KirExpr *e = &k->exprs.data[id];
    switch (e->kind) {
    case KE_VAR: if (e->ref >= 0 && e->ref < k->vars.len) c->var_read[e->ref] = true; break;
    case KE_SHLOAD: if (e->ref >= 0 && e->ref < k->shared.len) c->sh_read[e->ref] = true; break;
    case KE_TLOAD: if (e->ref >= 0 && e->ref < k->tarrays.len) c->ta_read[e->ref] = true; break;
    default: break;
    }
    /* operands always have smaller ids (the builder makes them first); checked when printed */
    if (e->a >= 0 && e->a < id) mark_expr(c, e->a, depth + 1);
    if (e->b >= 0 && e->b < id) mark_expr(c, e->b, depth + 1);
    if (e->c >= 0 && e->c < id) mark_expr(c, e->c, depth + 1);
}

static void mark_list(Cg *c, int s, int depth) {
    const KirKernel *k = c->k;
    long guard = 0;
    for (; s >= 0 && s < k->stmts.len && depth < 64 && guard <= k->stmts.len; s = k->stmts.data[s].next, guard++) {
        const KirStmt *st = &k->stmts.data[s];
        mark_expr(c, st->a, 0);
        mark_expr(c, st->b, 0);
        mark_expr(c, st->c, 0);
        if (st->kind == KS_FOR || st->kind == KS_IF || st->kind == KS_REDUCE) {
            mark_list(c, st->body, depth + 1);
            mark_list(c, st->body2, depth + 1);
        }
    }
}

/* ---- expressions -------------------------------------------------------------------------- */
static void put_float_lit(Cg *c, KirType t, double v) {
    StrBuf *o = c->o;
    char buf[64];
    if (v != v) {
        sb_puts(o, t == KT_F32 ? "__uint_as_float(0x7fc00000u)" : "__longlong_as_double(0x7ff8000000000000LL)");
        return;
    }
    if (v == __builtin_inf() || v == -__builtin_inf()) {
        if (v < 0) sb_puts(o, "(-");
        sb_puts(o, t == KT_F32 ? "__uint_as_float(0x7f800000u)" : "__longlong_as_double(0x7ff0000000000000LL)");
        if (v < 0) sb_putc(o, ')');
        return;
    }
    if (t == KT_F32) {
        float f = (float)v;
        if (f == __builtin_inff() || f == -__builtin_inff()) { put_float_lit(c, t, (double)f); return; }
        for (int prec = 6; prec <= 9; prec++) {
            snprintf(buf, sizeof buf, "%.*g", prec, (double)f);
            if (strtof(buf, NULL) == f) break;
        }
    } else {
        fc_fmt_double(buf, sizeof buf, v);
    }
    if (!strpbrk(buf, ".e")) strcat(buf, ".0");
    if (buf[0] == '-') sb_putc(o, '(');
    sb_puts(o, buf);
    if (t == KT_F32) sb_putc(o, 'f');
    if (buf[0] == '-') sb_putc(o, ')');
}

static void put_int_lit(Cg *c, KirType t, int64_t v) {
    if (t == KT_BOOL) { sb_puts(c->o, v ? "true" : "false"); return; }
    if (t == KT_I32) {
        if (v < INT32_MIN || v > INT32_MAX) { cg_fail(c, FC_ERR_INTERNAL, "i32 constant %lld out of range", (long long)v); return; }
        if (v == INT32_MIN) sb_puts(c->o, "(-2147483647 - 1)");
        else if (v < 0) sb_printf(c->o, "(%lld)", (long long)v);
        else sb_printf(c->o, "%lld", (long long)v);
        return;
    }
    if (v == INT64_MIN) sb_puts(c->o, "(-9223372036854775807LL - 1)");
    else if (v < 0) sb_printf(c->o, "(%lldLL)", (long long)v);
    else sb_printf(c->o, "%lldLL", (long long)v);
}

/* Marks helper h and the helpers it calls as used. */
static void use(Cg *c, int h) {
#define D(x) ((x) + 1)   /* 0: no dependency */
    static const int deps[H_COUNT][2] = {
        [H_F16_TO_F32] = {D(H_CVT_F32_F16)},
        [H_F32_TO_F16] = {D(H_CVT_F16X2)},
        [H_F32_TO_BF16] = {D(H_CVT_BF16X2)},
        [H_F8E4M3_TO_F32] = {D(H_CVT_F16X2_E4M3X2), D(H_CVT_F32_F16)},
        [H_F32_TO_F8E4M3] = {D(H_CVT_E4M3X2), D(H_ROUND_BITS)},
        [H_F8E5M2_TO_F32] = {D(H_F16_TO_F32)},
        [H_F32_TO_F8E5M2] = {D(H_CVT_E5M2X2), D(H_ROUND_BITS)},
        [H_PACK_BF16] = {D(H_CVT_BF16X2)},
        [H_PACK_F16] = {D(H_CVT_F16X2)},
        [H_PACK_F8E4M3] = {D(H_CVT_E4M3X2), D(H_F32_TO_F8E4M3)},
        [H_PACK_F8E5M2] = {D(H_CVT_E5M2X2), D(H_F32_TO_F8E5M2)},
        [H_UNPACK_F8E4M3] = {D(H_CVT_F16X2_E4M3X2), D(H_F8E4M3_TO_F32)},
    };
#undef D
    c->helpers[h] = true;
    for (int i = 0; i < 2; i++)
        if (deps[h][i] && !c->helpers[deps[h][i] - 1]) use(c, deps[h][i] - 1);
}

/* The helper that decodes (to f32) or encodes (from f32) a narrow float, or -1. */
static int narrow_helper(FcDtype t, bool encode) {
    switch (t) {
    case FC_F16: return encode ? H_F32_TO_F16 : H_F16_TO_F32;
    case FC_BF16: return encode ? H_F32_TO_BF16 : H_BF16_TO_F32;
    case FC_F8E4M3: return encode ? H_F32_TO_F8E4M3 : H_F8E4M3_TO_F32;
    case FC_F8E5M2: return encode ? H_F32_TO_F8E5M2 : H_F8E5M2_TO_F32;
    default: return -1;
    }
}
/* The helper that converts two f32 lanes of a 16/8-bit float to their packed bits, or -1. */
static int pack_helper(FcDtype t) {
    switch (t) {
    case FC_F16: return H_PACK_F16;
    case FC_BF16: return H_PACK_BF16;
    case FC_F8E4M3: return H_PACK_F8E4M3;
    case FC_F8E5M2: return H_PACK_F8E5M2;
    default: return -1;
    }
}
static const char *helper_name(int h) {
    static const char *const names[H_COUNT] = {
        "fc_cvt_bf16x2", "fc_cvt_f16x2", "fc_cvt_f32_f16", "fc_cvt_e4m3x2", "fc_cvt_e5m2x2", "fc_cvt_f16x2_e4m3x2",
        "fc_f16_to_f32", "fc_f32_to_f16", "fc_bf16_to_f32", "fc_f32_to_bf16", "fc_f8e4m3_to_f32",
        "fc_f32_to_f8e4m3", "fc_f8e5m2_to_f32", "fc_f32_to_f8e5m2", "fc_round_bits",
        "fc_pack_bf16", "fc_pack_f16", "fc_pack_f8e4m3", "fc_pack_f8e5m2", "fc_unpack_f8e4m3",
        "fc_f32_to_i32", "fc_f32_to_i64", "fc_f64_to_i32", "fc_f64_to_i64",
        "fc_max_f32", "fc_min_f32", "fc_max_f64", "fc_min_f64", "fc_max_i32", "fc_min_i32",
        "fc_max_i64", "fc_min_i64", "fc_philox", "fc_amax_flush", "fc_ndtr"};
    return names[h];
}

static bool is_float(KirType t) { return t == KT_F32 || t == KT_F64; }
static bool is_int(KirType t) { return t == KT_I32 || t == KT_I64; }

/* The max/min helper for a type (op: KB_MAX or KB_MIN), or -1 for bool. */
static int maxmin_helper(KirType t, bool is_max) {
    switch (t) {
    case KT_F32: return is_max ? H_MAX_F32 : H_MIN_F32;
    case KT_F64: return is_max ? H_MAX_F64 : H_MIN_F64;
    case KT_I32: return is_max ? H_MAX_I32 : H_MIN_I32;
    case KT_I64: return is_max ? H_MAX_I64 : H_MIN_I64;
    default: return -1;
    }
}

static KirType expr_type(const Cg *c, int id) { return c->k->exprs.data[id].type; }

static void put_expr(Cg *c, int id, int parent, int depth);

/* The slot of a vec access of the loop being printed, or -1 (and a failure). */
static int vec_slot(Cg *c, bool shared, bool store, int ref, int idx) {
    for (int i = 0; i < c->nslots; i++) {
        const VecSlot *v = &c->slots[i];
        if (v->shared == shared && v->store == store && v->ref == ref && v->idx == idx) return i;
    }
    cg_fail(c, FC_ERR_INTERNAL, "vec access of %s%d without a slot", shared ? "sh" : "p", ref);
    return -1;
}

static bool operand_ok(Cg *c, int id, int parent) {
    if (id < 0 || id >= c->k->exprs.len || (parent >= 0 && id >= parent)) {
        cg_fail(c, FC_ERR_INTERNAL, "expression e%d: bad operand e%d", parent, id);
        return false;
    }
    return true;
}

static const char *unop_f32[KU_COUNT] = {
    [KU_ABS] = "fabsf", [KU_EXP] = "expf", [KU_LOG] = "logf", [KU_SQRT] = "sqrtf",
    [KU_RSQRT] = "rsqrtf", [KU_TANH] = "tanhf", [KU_ERF] = "erff", [KU_NDTR] = "fc_ndtr", [KU_SIN] = "sinf",
    [KU_COS] = "cosf", [KU_FLOOR] = "floorf"};
static const char *unop_f64[KU_COUNT] = {
    [KU_ABS] = "fabs", [KU_EXP] = "exp", [KU_LOG] = "log", [KU_SQRT] = "sqrt",
    [KU_RSQRT] = "rsqrt", [KU_TANH] = "tanh", [KU_ERF] = "erf", [KU_NDTR] = "normcdf", [KU_SIN] = "sin",
    [KU_COS] = "cos", [KU_FLOOR] = "floor"};
static const char *binop_c[KB_COUNT] = {
    [KB_ADD] = "+", [KB_SUB] = "-", [KB_MUL] = "*", [KB_DIV] = "/", [KB_REM] = "%",
    [KB_LT] = "<", [KB_LE] = "<=", [KB_GT] = ">", [KB_GE] = ">=", [KB_EQ] = "==", [KB_NE] = "!=",
    [KB_AND] = "&&", [KB_OR] = "||"};

/* ---- contraction --------------------------------------------------------------------------
 * The generated code never leaves contraction to the compiler: nvcc and NVRTC contract a*b + c
 * into an FMA by default (--fmad=true), which makes x - mean of a one-element normalization
 * the rounding error of a product instead of 0, and differs from the CPU backend, which never
 * contracts. So every float multiply is printed as __fmul_rn / __dmul_rn (never merged into an
 * FMA, under any flags), and the one place where an FMA is wanted says so: an accumulation
 * `acc = acc + x*y` (a matmul tile's inner loop), printed as fmaf(x, y, acc). Its rounding
 * differs from the CPU's by one rounding of a product per term, which is inside the
 * accumulation term of the tolerance (docs/tolerances.md); the library GEMMs use FMAs too. */
static bool is_mul(Cg *c, int id) {
    const KirExpr *e = &c->k->exprs.data[id];
    return e->kind == KE_BINARY && e->op == KB_MUL && is_float(e->type);
}

/* Does expression id read what statement st writes (the same variable, or the same
 * thread-array element)? */
static bool reads_target(Cg *c, const KirStmt *st, int id) {
    const KirExpr *e = &c->k->exprs.data[id];
    if (st->kind == KS_ASSIGN) return e->kind == KE_VAR && e->ref == st->var;
    if (st->kind != KS_TSTORE || e->kind != KE_TLOAD || e->ref != st->ref) return false;
    if (e->a == st->a) return true;
    const KirExpr *i = &c->k->exprs.data[e->a], *j = &c->k->exprs.data[st->a];
    return i->kind == KE_CONST && j->kind == KE_CONST && i->ival == j->ival;
}

/* The accumulation `target + x*y` (or `x*y + target`) that statement st stores, printed as an
 * FMA, or -1. */
static int accumulation(Cg *c, const KirStmt *st, int value) {
    if (value < 0 || value >= c->k->exprs.len) return -1;
    const KirExpr *e = &c->k->exprs.data[value];
    if (e->kind != KE_BINARY || e->op != KB_ADD || !is_float(e->type)) return -1;
    if (e->a < 0 || e->b < 0 || e->a >= value || e->b >= value) return -1;
    int m = is_mul(c, e->b) && reads_target(c, st, e->a) ? e->b
          : is_mul(c, e->a) && reads_target(c, st, e->b) ? e->a : -1;
    if (m < 0) return -1;
    const KirExpr *x = &c->k->exprs.data[m];
    if (x->a < 0 || x->b < 0 || x->a >= m || x->b >= m || x->type != e->type ||
        c->k->exprs.data[x->a].type != e->type || c->k->exprs.data[x->b].type != e->type)
        return -1;   /* printed as a plain add, whose checks report it */
    return value;
}

static void put_index(Cg *c, int id, int parent, int depth) {
    if (!operand_ok(c, id, parent)) return;
    if (!is_int(expr_type(c, id))) cg_fail(c, FC_ERR_INTERNAL, "expression e%d: index is not an integer", parent);
    put_expr(c, id, parent, depth + 1);
}

static void put_expr(Cg *c, int id, int parent, int depth) {
    const KirKernel *k = c->k;
    StrBuf *o = c->o;
    if (c->st != FC_OK) return;
    if (!operand_ok(c, id, parent)) return;
    if (depth > CG_MAX_EXPR_DEPTH || ++c->nodes > CG_MAX_EXPR_NODES) {
        cg_fail(c, FC_ERR_UNSUPPORTED, "expression too large to print (over %d deep or %d nodes)",
                CG_MAX_EXPR_DEPTH, CG_MAX_EXPR_NODES);
        return;
    }
    const KirExpr *e = &k->exprs.data[id];
    if ((unsigned)e->type >= KT_COUNT) { cg_fail(c, FC_ERR_INTERNAL, "expression e%d: bad type", id); return; }
    switch (e->kind) {
    case KE_CONST:
        if (is_float(e->type)) put_float_lit(c, e->type, e->fval);
        else put_int_lit(c, e->type, e->ival);
        break;
    case KE_VAR:
        if (c->vec_subst && e->ref == c->vec_var) { sb_puts(o, "fc_g"); break; }
        if (e->ref == c->vec_var) c->vec_var_prints++;
        if (e->ref < 0 || e->ref >= k->vars.len || !c->visible[e->ref]) {
            cg_fail(c, FC_ERR_INTERNAL, "expression e%d reads v%d outside the scope that declares it", id, e->ref);
            return;
        }
        sb_printf(o, "v%d", e->ref);
        break;
    case KE_LOAD: {
        if (e->ref < 0 || e->ref >= k->params.len) { cg_fail(c, FC_ERR_INTERNAL, "load of bad param p%d", e->ref); return; }
        FcDtype dt = k->params.data[e->ref].dtype;
        int h = narrow_helper(dt, false);
        if (e->vec && c->vec_var < 0) { cg_fail(c, FC_ERR_INTERNAL, "vec load e%d outside a vec thread loop", id); return; }
        if (e->vec && c->in_lanes) {   /* the lane's element of the group's vector */
            int sl = vec_slot(c, false, false, e->ref, e->a);
            if (sl < 0) return;
            if (c->slots[sl].packed) sb_printf(o, "fc_v%d[fc_j]", sl);   /* decoded at the vector load */
            else if (h >= 0) { use(c, h); sb_printf(o, "%s(fc_v%d[fc_j])", helper_name(h), sl); }
            else if (dt == FC_BOOL) sb_printf(o, "(fc_v%d[fc_j] != 0)", sl);
            else sb_printf(o, "fc_v%d[fc_j]", sl);
            break;
        }
        char ptr[64];
        if (c->in_tail && k->params.data[e->ref].written)
            snprintf(ptr, sizeof ptr, "((const volatile %s *)p%d)", storage_ctype(dt), e->ref);
        else
            snprintf(ptr, sizeof ptr, "p%d", e->ref);
        if (h >= 0) { use(c, h); sb_printf(o, "%s(%s[", helper_name(h), ptr); }
        else if (dt == FC_BOOL) sb_printf(o, "(%s[", ptr);
        else sb_printf(o, "%s[", ptr);
        put_index(c, e->a, id, depth);
        sb_puts(o, h >= 0 ? "])" : dt == FC_BOOL ? "] != 0)" : "]");
        break;
    }
    case KE_SHLOAD:
        if (e->ref < 0 || e->ref >= k->shared.len) { cg_fail(c, FC_ERR_INTERNAL, "load of bad shared sh%d", e->ref); return; }
        if (e->vec && c->vec_var < 0) { cg_fail(c, FC_ERR_INTERNAL, "vec load e%d outside a vec thread loop", id); return; }
        if (e->vec && c->in_lanes) {
            int sl = vec_slot(c, true, false, e->ref, e->a);
            if (sl >= 0) sb_printf(o, "fc_v%d[fc_j]", sl);
            break;
        }
        sb_printf(o, "sh%d[", e->ref); put_index(c, e->a, id, depth); sb_putc(o, ']');
        break;
    case KE_TLOAD:
        if (e->ref < 0 || e->ref >= k->tarrays.len) { cg_fail(c, FC_ERR_INTERNAL, "load of bad thread array ta%d", e->ref); return; }
        if (!c->in_threads) { cg_fail(c, FC_ERR_INTERNAL, "thread array ta%d read outside a thread loop", e->ref); return; }
        sb_printf(o, "ta%d[", e->ref); put_index(c, e->a, id, depth); sb_putc(o, ']');
        break;
    case KE_UNARY: {
        if (!operand_ok(c, e->a, id)) return;
        KirType t = expr_type(c, e->a);
        const char *fn = NULL;
        if ((unsigned)e->op >= KU_COUNT) { cg_fail(c, FC_ERR_INTERNAL, "bad unary op %d", e->op); return; }
        if (e->op == KU_NOT) {
            if (t != KT_BOOL) { cg_fail(c, FC_ERR_INTERNAL, "not of a non-bool (e%d)", id); return; }
            sb_puts(o, "(!"); put_expr(c, e->a, id, depth + 1); sb_putc(o, ')');
        } else if (e->op == KU_NEG && t != KT_BOOL) {
            sb_puts(o, "(-"); put_expr(c, e->a, id, depth + 1); sb_putc(o, ')');
        } else if (e->op == KU_RECIP && is_float(t)) {
            sb_puts(o, t == KT_F32 ? "(1.0f / " : "(1.0 / "); put_expr(c, e->a, id, depth + 1); sb_putc(o, ')');
        } else if (e->op == KU_ABS && is_int(t)) {
            /* |a| = max(a, -a); the most negative value stays itself, as in NumPy */
            int h = maxmin_helper(t, true);
            use(c, h);
            sb_printf(o, "%s(", helper_name(h)); put_expr(c, e->a, id, depth + 1); sb_puts(o, ", -(");
            put_expr(c, e->a, id, depth + 1); sb_puts(o, "))");
        } else if (t == KT_F32 && (fn = unop_f32[e->op]) != NULL) {
            if (e->op == KU_NDTR) use(c, H_NDTR);
            sb_printf(o, "%s(", fn); put_expr(c, e->a, id, depth + 1); sb_putc(o, ')');
        } else if (t == KT_F64 && (fn = unop_f64[e->op]) != NULL) {
            sb_printf(o, "%s(", fn); put_expr(c, e->a, id, depth + 1); sb_putc(o, ')');
        } else {
            cg_fail(c, FC_ERR_INTERNAL, "unary %s of %s (e%d)", kir_unop_name((KirUnOp)e->op), kir_type_name(t), id);
            return;
        }
        if (e->type != (e->op == KU_NOT ? KT_BOOL : t)) cg_fail(c, FC_ERR_INTERNAL, "unary e%d: result type", id);
        break;
    }
    case KE_BINARY: {
        if (!operand_ok(c, e->a, id) || !operand_ok(c, e->b, id)) return;
        KirType t = expr_type(c, e->a);
        if (t != expr_type(c, e->b) || (unsigned)e->op >= KB_COUNT) {
            cg_fail(c, FC_ERR_INTERNAL, "binary e%d: operand types differ or bad op", id);
            return;
        }
        KirBinOp op = (KirBinOp)e->op;
        bool cmp = op >= KB_LT && op <= KB_NE;
        bool ok = (op == KB_AND || op == KB_OR) ? t == KT_BOOL
                : (op == KB_EQ || op == KB_NE) ? true
                : op == KB_REM ? is_int(t)
                : op == KB_POW ? is_float(t)
                : t != KT_BOOL;
        if (!ok || e->type != (cmp ? KT_BOOL : t)) {
            cg_fail(c, FC_ERR_INTERNAL, "binary %s of %s (e%d)", kir_binop_name(op), kir_type_name(t), id);
            return;
        }
        if (op == KB_POW || op == KB_MAX || op == KB_MIN) {
            const char *fn;
            if (op == KB_POW) fn = t == KT_F32 ? "powf" : "pow";
            else { int h = maxmin_helper(t, op == KB_MAX); use(c, h); fn = helper_name(h); }
            sb_printf(o, "%s(", fn); put_expr(c, e->a, id, depth + 1); sb_puts(o, ", ");
            put_expr(c, e->b, id, depth + 1); sb_putc(o, ')');
        } else if (id == c->fma_expr) {
            /* acc + x*y where acc is the location the statement updates (see accumulation) */
            const KirExpr *m = &k->exprs.data[is_mul(c, e->b) ? e->b : e->a];
            int acc = is_mul(c, e->b) ? e->a : e->b;
            sb_puts(o, t == KT_F32 ? "fmaf(" : "fma(");
            put_expr(c, m->a, id, depth + 1); sb_puts(o, ", ");
            put_expr(c, m->b, id, depth + 1); sb_puts(o, ", ");
            put_expr(c, acc, id, depth + 1); sb_putc(o, ')');
        } else if (op == KB_MUL && is_float(t)) {
            /* never contracted into an FMA, whatever the compiler's flags (docs/cuda.md) */
            sb_puts(o, t == KT_F32 ? "__fmul_rn(" : "__dmul_rn(");
            put_expr(c, e->a, id, depth + 1); sb_puts(o, ", ");
            put_expr(c, e->b, id, depth + 1); sb_putc(o, ')');
        } else {
            sb_putc(o, '('); put_expr(c, e->a, id, depth + 1); sb_printf(o, " %s ", binop_c[op]);
            put_expr(c, e->b, id, depth + 1); sb_putc(o, ')');
        }
        break;
    }
    case KE_SELECT:
        if (!operand_ok(c, e->a, id) || !operand_ok(c, e->b, id) || !operand_ok(c, e->c, id)) return;
        if (expr_type(c, e->a) != KT_BOOL || expr_type(c, e->b) != expr_type(c, e->c) ||
            e->type != expr_type(c, e->b)) {
            cg_fail(c, FC_ERR_INTERNAL, "select e%d: operand types", id);
            return;
        }
        sb_putc(o, '('); put_expr(c, e->a, id, depth + 1); sb_puts(o, " ? ");
        put_expr(c, e->b, id, depth + 1); sb_puts(o, " : "); put_expr(c, e->c, id, depth + 1);
        sb_putc(o, ')');
        break;
    case KE_CAST: {
        if (!operand_ok(c, e->a, id)) return;
        KirType from = expr_type(c, e->a), to = e->type;
        if (is_float(from) && is_int(to)) {
            int h = from == KT_F32 ? (to == KT_I32 ? H_F32_TO_I32 : H_F32_TO_I64)
                                   : (to == KT_I32 ? H_F64_TO_I32 : H_F64_TO_I64);
            use(c, h);
            sb_printf(o, "%s(", helper_name(h)); put_expr(c, e->a, id, depth + 1); sb_putc(o, ')');
        } else if (to == KT_BOOL && from != KT_BOOL) {
            sb_putc(o, '('); put_expr(c, e->a, id, depth + 1);
            sb_puts(o, from == KT_F32 ? " != 0.0f)" : from == KT_F64 ? " != 0.0)" : " != 0)");
        } else {
            sb_printf(o, "((%s)", ctype_names[to]); put_expr(c, e->a, id, depth + 1); sb_putc(o, ')');
        }
        break;
    }
    case KE_ROUND: {
        if (!operand_ok(c, e->a, id)) return;
        int enc = narrow_helper(e->dtype, true), dec = narrow_helper(e->dtype, false);
        if (enc < 0 || expr_type(c, e->a) != KT_F32 || e->type != KT_F32) {
            cg_fail(c, FC_ERR_INTERNAL, "round e%d: needs an f32 operand and a narrow float dtype", id);
            return;
        }
        use(c, enc);
        use(c, dec);
        sb_printf(o, "%s(%s(", helper_name(dec), helper_name(enc));
        put_expr(c, e->a, id, depth + 1);
        sb_puts(o, "))");
        break;
    }
    case KE_BLOCK_IDX: sb_puts(o, "((long long)blockIdx.x)"); break;
    case KE_PHILOX:
        if (!operand_ok(c, e->a, id) || !operand_ok(c, e->b, id) || !operand_ok(c, e->c, id)) return;
        if (e->type != KT_I64 || expr_type(c, e->a) != KT_I64 || expr_type(c, e->b) != KT_I64 ||
            expr_type(c, e->c) != KT_I64) {
            cg_fail(c, FC_ERR_INTERNAL, "philox e%d: operands and result must be i64", id);
            return;
        }
        use(c, H_PHILOX);
        sb_printf(o, "%s(", helper_name(H_PHILOX)); put_expr(c, e->a, id, depth + 1); sb_puts(o, ", ");
        put_expr(c, e->b, id, depth + 1); sb_puts(o, ", "); put_expr(c, e->c, id, depth + 1); sb_putc(o, ')');
        break;
    default: cg_fail(c, FC_ERR_INTERNAL, "bad expression kind %d (e%d)", (int)e->kind, id); break;
    }
}

/* An expression that must have type t (statement operands). */
static void put_typed(Cg *c, int id, KirType t, const char *what) {
    if (!operand_ok(c, id, -1)) return;
    if (expr_type(c, id) != t) {
        cg_fail(c, FC_ERR_INTERNAL, "%s has type %s, expected %s", what, kir_type_name(expr_type(c, id)),
                kir_type_name(t));
        return;
    }
    put_expr(c, id, -1, 0);
}

/* ---- statements ---------------------------------------------------------------------------- */
static bool var_ok(Cg *c, int v) {
    if (v < 0 || v >= c->k->vars.len || (unsigned)c->k->vars.data[v].type >= KT_COUNT) {
        cg_fail(c, FC_ERR_INTERNAL, "bad variable v%d", v);
        return false;
    }
    return true;
}

static void put_list(Cg *c, int s, int d, const KirStmt *red);

/* Brings v into scope for the rest of the list whose declared-set is `declared`. */
static bool declare(Cg *c, int v, int **declared, int *ndecl) {
    if (c->visible[v]) {
        cg_fail(c, FC_ERR_INTERNAL, "v%d declared twice in one scope chain", v);
        return false;
    }
    int *grown = fc_realloc(*declared, (size_t)(*ndecl + 1) * sizeof(int));
    if (!grown) { if (c->st == FC_OK) c->st = FC_OOM(c->err); return false; }
    *declared = grown;
    grown[(*ndecl)++] = v;
    c->visible[v] = 1;
    return true;
}

/* The combine of a reduction, as text around two operands: pre a mid b post. */
static void red_combine(Cg *c, KirRedOp op, KirType t, const char *a, const char *b) {
    if (op == KR_SUM) { sb_printf(c->o, "%s + %s", a, b); return; }
    int h = maxmin_helper(t, op == KR_MAX);
    use(c, h);
    sb_printf(c->o, "%s(%s, %s)", helper_name(h), a, b);
}

static void put_red_identity(Cg *c, KirRedOp op, KirType t) {
    if (op == KR_SUM) {
        sb_puts(c->o, t == KT_F32 ? "0.0f" : t == KT_F64 ? "0.0" : t == KT_I32 ? "0" : "0LL");
    } else if (is_float(t)) {
        put_float_lit(c, t, op == KR_MAX ? -__builtin_inf() : __builtin_inf());
    } else {
        bool mx = op == KR_MAX;
        put_int_lit(c, t, t == KT_I32 ? (mx ? INT32_MIN : INT32_MAX) : (mx ? INT64_MIN : INT64_MAX));
    }
}

static void put_reduce(Cg *c, const KirStmt *st, int d) {
    const KirKernel *k = c->k;
    StrBuf *o = c->o;
    if (!var_ok(c, st->var) || !var_ok(c, st->loop_var)) return;
    KirType t = k->vars.data[st->var].type, lt = k->vars.data[st->loop_var].type;
    if (!is_float(t) && !is_int(t)) { cg_fail(c, FC_ERR_INTERNAL, "reduction of %s", kir_type_name(t)); return; }
    if ((unsigned)st->redop >= KR_COUNT || !is_int(lt)) { cg_fail(c, FC_ERR_INTERNAL, "bad reduction"); return; }
    if (c->in_threads) { cg_fail(c, FC_ERR_INTERNAL, "a reduction inside a thread loop"); return; }
    if (c->visible[st->loop_var]) { cg_fail(c, FC_ERR_INTERNAL, "loop variable v%d already declared", st->loop_var); return; }
    c->red_type[t] = true;
    const char *ct = ctype_names[t];
    int nw = (k->block + 31) / 32;
    bool partial = k->block % 32 != 0;
    bool keep = c->var_read[st->var];
    if (keep) { ind(c, d); sb_printf(o, "%s v%d;\n", ct, st->var); }
    ind(c, d); sb_printf(o, "{ /* v%d = reduce_%s over v%d in threads */\n", st->var, kir_redop_name(st->redop), st->loop_var);
    ind(c, d + 1); sb_printf(o, "%s fc_acc = ", ct); put_red_identity(c, st->redop, t); sb_puts(o, ";\n");
    ind(c, d + 1);
    /* threads from `lanes` on (KirStmt.lanes) keep the identity */
    int stride = st->lanes > 0 && st->lanes < k->block ? st->lanes : k->block;
    sb_printf(o, "for (%s v%d = ", ctype_names[lt], st->loop_var);
    put_typed(c, st->a, lt, "reduction bound");
    sb_printf(o, " + (%s)threadIdx.x; ", ctype_names[lt]);
    if (stride < k->block) sb_printf(o, "threadIdx.x < %du && ", stride);
    sb_printf(o, "v%d < ", st->loop_var);
    put_typed(c, st->b, lt, "reduction bound");
    sb_printf(o, "; v%d += %d) {\n", st->loop_var, stride);
    c->visible[st->loop_var] = 1;
    c->in_threads++;
    put_list(c, st->body, d + 2, st);   /* ends with the accumulation of the yield */
    c->in_threads--;
    c->visible[st->loop_var] = 0;
    ind(c, d + 1); sb_puts(o, "}\n");
    /* the 32 lanes of a warp: a halving tree (lane 0 holds the warp's result) */
    for (int off = 16; off >= 1; off /= 2) {
        ind(c, d + 1);
        if (!partial) {
            sb_puts(o, "fc_acc = ");
            char sh[64];
            snprintf(sh, sizeof sh, "__shfl_xor_sync(0xffffffffu, fc_acc, %d)", off);
            red_combine(c, st->redop, t, "fc_acc", sh);
            sb_puts(o, ";\n");
        } else {
            sb_printf(o, "{ %s fc_o = __shfl_xor_sync(fc_mask, fc_acc, %d); if ((fc_lane ^ %du) < fc_nact) fc_acc = ",
                      ct, off, off);
            red_combine(c, st->redop, t, "fc_acc", "fc_o");
            sb_puts(o, "; }\n");
        }
    }
    ind(c, d + 1); sb_printf(o, "if (fc_lane == 0u) fc_red_%s[fc_warp] = fc_acc;\n", kir_type_name(t));
    ind(c, d + 1); sb_puts(o, "__syncthreads();\n");
    /* the warps' results: every thread runs the same halving tree over them */
    if (keep) {
        for (int w = 0; w < nw; w++) {
            ind(c, d + 1); sb_printf(o, "%s fc_w%d = fc_red_%s[%d];\n", ct, w, kir_type_name(t), w);
        }
        for (int off = 16; off >= 1; off /= 2)
            for (int i = 0; i < off && i + off < nw; i++) {
                char a[16], b[16];
                snprintf(a, sizeof a, "fc_w%d", i);
                snprintf(b, sizeof b, "fc_w%d", i + off);
                ind(c, d + 1); sb_printf(o, "%s = ", a); red_combine(c, st->redop, t, a, b); sb_puts(o, ";\n");
            }
        ind(c, d + 1); sb_printf(o, "v%d = fc_w0;\n", st->var);
    }
    ind(c, d + 1); sb_puts(o, "__syncthreads(); /* the scratch may be reused */\n");
    ind(c, d); sb_puts(o, "}\n");
}

/* The accumulation of a reduction's yield into fc_acc, inside the body's scope (the yield may
 * read variables the body declares). */
static void put_accumulate(Cg *c, const KirStmt *st, int d) {
    StrBuf *o = c->o;
    KirType t = c->k->vars.data[st->var].type;
    ind(c, d); sb_puts(o, "fc_acc = ");
    if (st->redop == KR_SUM) {
        sb_puts(o, "fc_acc + ");
        put_typed(c, st->c, t, "reduction value");
    } else {
        int h = maxmin_helper(t, st->redop == KR_MAX);
        use(c, h);
        sb_printf(o, "%s(fc_acc, ", helper_name(h));
        put_typed(c, st->c, t, "reduction value");
        sb_putc(o, ')');
    }
    sb_puts(o, ";\n");
}

/* ---- vec thread loops ------------------------------------------------------------------------ */
static bool vec_add(Cg *c, bool shared, bool store, int ref, int idx) {
    for (int i = 0; i < c->nslots; i++) {
        const VecSlot *v = &c->slots[i];
        if (v->shared == shared && v->ref == ref) {
            if (v->store != store) {
                cg_fail(c, FC_ERR_INTERNAL, "vec loop both reads and writes %s%d", shared ? "sh" : "p", ref);
                return false;
            }
            if (v->idx == idx) return true;
        }
    }
    VecSlot *grown = fc_realloc(c->slots, (size_t)(c->nslots + 1) * sizeof *grown);
    if (!grown) { if (c->st == FC_OK) c->st = FC_OOM(c->err); return false; }
    c->slots = grown;
    c->slots[c->nslots++] = (VecSlot){.shared = shared, .store = store, .ref = ref, .idx = idx};
    return true;
}

static void vec_collect_expr(Cg *c, int id, unsigned char *seen, int depth) {
    const KirKernel *k = c->k;
    if (id < 0 || id >= k->exprs.len || depth > CG_MAX_EXPR_DEPTH || seen[id] || c->st != FC_OK) return;
    seen[id] = 1;
    const KirExpr *e = &k->exprs.data[id];
    if (e->vec && e->kind == KE_LOAD && e->ref >= 0 && e->ref < k->params.len) vec_add(c, false, false, e->ref, e->a);
    else if (e->vec && e->kind == KE_SHLOAD && e->ref >= 0 && e->ref < k->shared.len) vec_add(c, true, false, e->ref, e->a);
    else if (e->vec) { cg_fail(c, FC_ERR_INTERNAL, "vec flag on expression e%d", id); return; }
    if (e->a >= 0 && e->a < id) vec_collect_expr(c, e->a, seen, depth + 1);
    if (e->b >= 0 && e->b < id) vec_collect_expr(c, e->b, seen, depth + 1);
    if (e->c >= 0 && e->c < id) vec_collect_expr(c, e->c, seen, depth + 1);
}

/* The vec accesses of a vec loop's body (stores only in the body itself, not nested). */
static void vec_collect(Cg *c, int s, bool top, unsigned char *seen, int depth) {
    const KirKernel *k = c->k;
    long guard = 0;
    for (; s >= 0 && s < k->stmts.len && depth < 64 && guard <= k->stmts.len && c->st == FC_OK;
         s = k->stmts.data[s].next, guard++) {
        const KirStmt *st = &k->stmts.data[s];
        vec_collect_expr(c, st->a, seen, 0);
        vec_collect_expr(c, st->b, seen, 0);
        vec_collect_expr(c, st->c, seen, 0);
        if ((st->kind == KS_STORE || st->kind == KS_SHSTORE) && st->vec) {
            bool sh = st->kind == KS_SHSTORE;
            if (!top || st->ref < 0 || st->ref >= (sh ? k->shared.len : k->params.len)) {
                cg_fail(c, FC_ERR_INTERNAL, "vec store not in its vec loop's body");
                return;
            }
            if (!sh || c->sh_read[st->ref]) vec_add(c, sh, true, st->ref, st->a);   /* else (void) */
        } else if (st->vec && st->kind != KS_FOR) {
            cg_fail(c, FC_ERR_INTERNAL, "vec flag on a statement that is not a store");
            return;
        }
        if (st->kind == KS_FOR || st->kind == KS_IF || st->kind == KS_REDUCE) {
            vec_collect(c, st->body, false, seen, depth + 1);
            vec_collect(c, st->body2, false, seen, depth + 1);
        }
    }
}

/* A slot's element: C type, size, and the 16-byte vector type that carries it. */
static bool slot_types(Cg *c, const VecSlot *v, const char **elem, int *size, const char **vt) {
    const KirKernel *k = c->k;
    if (v->shared) {
        KirType t = k->shared.data[v->ref].type;
        if (t == KT_BOOL || (unsigned)t >= KT_COUNT) { cg_fail(c, FC_ERR_INTERNAL, "vec access of a bool shared array"); return false; }
        *elem = ctype_names[t];
        *size = t == KT_F32 || t == KT_I32 ? 4 : 8;
        *vt = t == KT_F32 ? "float4" : t == KT_I32 ? "int4" : t == KT_F64 ? "double2" : "longlong2";
    } else {
        FcDtype dt = k->params.data[v->ref].dtype;
        *elem = storage_ctype(dt);
        *size = (int)fc_dtype_size(dt);
        *vt = dt == FC_F32 ? "float4" : dt == FC_I32 ? "int4" : dt == FC_F64 ? "double2" : dt == FC_I64 ? "longlong2" : "uint4";
    }
    if ((c->vec_w * *size) % 16 != 0) {
        cg_fail(c, FC_ERR_INTERNAL, "vec access of %s%d: %d x %d bytes is not a multiple of 16", v->shared ? "sh" : "p",
                v->ref, c->vec_w, *size);
        return false;
    }
    return true;
}

/* The address of a slot's first element: (pN + index at fc_g). */
static void put_slot_addr(Cg *c, const VecSlot *v) {
    sb_printf(c->o, "(%s%d + ", v->shared ? "sh" : "p", v->ref);
    c->vec_subst = true;
    put_index(c, v->idx, -1, 0);
    c->vec_subst = false;
    sb_putc(c->o, ')');
}

/* Element e of a 16-byte vector fc_q of type vt whose elements have `size` bytes. */
static void put_vec_elem(StrBuf *o, const char *vt, int size, int e, const char *elem) {
    static const char comp[] = "xyzw";
    if (size >= 4 || strcmp(vt, "uint4") != 0) { sb_printf(o, "fc_q.%c", comp[e]); return; }
    int per = 4 / size;   /* elements per 32-bit component */
    int shift = (e % per) * size * 8;
    if (shift) sb_printf(o, "(%s)(fc_q.%c >> %d)", elem, comp[e / per], shift);
    else sb_printf(o, "(%s)fc_q.%c", elem, comp[e / per]);
}

/* A thread loop with vec W (KirStmt.vec): each thread takes groups of W consecutive
 * iterations. A whole group whose vec accesses are all 16-byte aligned (the lowering makes
 * them so for buffers at 256-byte boundaries; the check keeps other pointers correct) reads
 * its vec loads as 16-byte vectors, runs the W lanes (unrolled), and writes its vec stores as
 * 16-byte vectors; the last partial group, or a misaligned one, runs iteration by iteration. */
static void put_vec_for(Cg *c, const KirStmt *st, int d) {
    const KirKernel *k = c->k;
    StrBuf *o = c->o;
    KirType lt = k->vars.data[st->var].type;
    const char *T = ctype_names[lt];
    int W = st->vec;
    if (c->vec_var >= 0) { cg_fail(c, FC_ERR_INTERNAL, "nested vec loops"); return; }
    unsigned char *seen = fc_calloc((size_t)k->exprs.len + 1, 1);
    if (!seen) { if (c->st == FC_OK) c->st = FC_OOM(c->err); return; }
    c->vec_var = st->var;
    c->vec_w = W;
    c->nslots = 0;
    vec_collect(c, st->body, true, seen, 0);
    fc_free(seen);
    const char *elem[64], *vt[64];
    int size[64];
    if (c->nslots > 64) cg_fail(c, FC_ERR_UNSUPPORTED, "a vec loop with more than 64 vector accesses");
    for (int i = 0; i < c->nslots && c->st == FC_OK; i++) {
        VecSlot *v = &c->slots[i];
        slot_types(c, v, &elem[i], &size[i], &vt[i]);
        FcDtype pt = v->shared ? FC_F32 : k->params.data[v->ref].dtype;
        v->packed = !v->shared && (v->store ? pack_helper(pt) >= 0 : pt == FC_F8E4M3);
    }
    if (c->st != FC_OK) goto done;

    ind(c, d); sb_printf(o, "{ /* v%d: %d consecutive iterations a thread; 16-byte accesses when aligned */\n", st->var, W);
    ind(c, d + 1); sb_printf(o, "const %s fc_lo = ", T); put_typed(c, st->a, lt, "loop bound"); sb_puts(o, ";\n");
    ind(c, d + 1); sb_printf(o, "const %s fc_hi = ", T); put_typed(c, st->b, lt, "loop bound"); sb_puts(o, ";\n");
    ind(c, d + 1);
    sb_printf(o, "for (%s fc_g = fc_lo + (%s)threadIdx.x * %d; fc_g < fc_hi; fc_g += %d) {\n", T, T, W, k->block * W);
    /* the iteration-by-iteration path first: a partial or misaligned group */
    ind(c, d + 2); sb_printf(o, "if (fc_g + %d > fc_hi", W);
    if (c->nslots) {
        sb_puts(o, " || ((");
        for (int i = 0; i < c->nslots; i++) {
            if (i) sb_puts(o, " | ");
            sb_puts(o, "(unsigned long long)");
            put_slot_addr(c, &c->slots[i]);
        }
        sb_puts(o, ") & 15ull) != 0ull");
    }
    sb_puts(o, ") {\n");
    ind(c, d + 3);
    sb_printf(o, "for (%s v%d = fc_g; v%d < fc_hi && v%d < fc_g + %d; v%d++) {\n", T, st->var, st->var, st->var, W, st->var);
    c->visible[st->var] = 1;
    c->in_threads++;
    put_list(c, st->body, d + 4, NULL);
    c->in_threads--;
    c->visible[st->var] = 0;
    ind(c, d + 3); sb_puts(o, "}\n");
    ind(c, d + 2); sb_puts(o, "} else {\n");
    /* the vec loads, 16 bytes at a time */
    for (int i = 0; i < c->nslots; i++) {
        const VecSlot *v = &c->slots[i];
        ind(c, d + 3); sb_printf(o, "%s fc_v%d[%d];\n", v->packed ? "float" : elem[i], i, W);
        if (v->store) continue;
        ind(c, d + 3); sb_printf(o, "{\n");
        ind(c, d + 4); sb_printf(o, "const %s *fc_a = reinterpret_cast<const %s *>", vt[i], vt[i]);
        put_slot_addr(c, v); sb_puts(o, ";\n");
        int per = 16 / size[i];
        if (v->packed) use(c, H_UNPACK_F8E4M3);
        for (int q = 0; q < W / per; q++) {
            ind(c, d + 4); sb_printf(o, "{ const %s fc_q = fc_a[%d];", vt[i], q);
            for (int e = 0; e < per; e += v->packed ? 2 : 1) {
                if (v->packed) {   /* two E4M3 bytes, decoded at once */
                    sb_printf(o, " %s((unsigned short)(fc_q.%c >> %d), &fc_v%d[%d], &fc_v%d[%d]);", helper_name(H_UNPACK_F8E4M3),
                              "xyzw"[e / 4], (e % 4) * 8, i, q * per + e, i, q * per + e + 1);
                    continue;
                }
                sb_printf(o, " fc_v%d[%d] = ", i, q * per + e);
                put_vec_elem(o, vt[i], size[i], e, elem[i]);
                sb_putc(o, ';');
            }
            sb_puts(o, " }\n");
        }
        ind(c, d + 3); sb_puts(o, "}\n");
    }
    /* the lanes: printed first into their own buffer, to declare the variable only if read */
    {
        StrBuf lanes = {0};
        c->o = &lanes;
        c->in_lanes = true;
        c->vec_var_prints = 0;
        c->visible[st->var] = 1;
        c->in_threads++;
        put_list(c, st->body, d + 4, NULL);
        c->in_threads--;
        c->visible[st->var] = 0;
        c->in_lanes = false;
        c->o = o;
        ind(c, d + 3); sb_puts(o, "#pragma unroll\n");
        ind(c, d + 3); sb_printf(o, "for (int fc_j = 0; fc_j < %d; fc_j++) {\n", W);
        if (c->vec_var_prints) { ind(c, d + 4); sb_printf(o, "const %s v%d = fc_g + (%s)fc_j;\n", T, st->var, T); }
        if (lanes.failed) { if (c->st == FC_OK) c->st = FC_OOM(c->err); }
        else if (lanes.data) sb_puts(o, lanes.data);
        sb_free(&lanes);
        ind(c, d + 3); sb_puts(o, "}\n");
    }
    /* the vec stores */
    for (int i = 0; i < c->nslots; i++) {
        const VecSlot *v = &c->slots[i];
        if (!v->store) continue;
        ind(c, d + 3); sb_printf(o, "{\n");
        ind(c, d + 4); sb_printf(o, "%s *fc_a = reinterpret_cast<%s *>", vt[i], vt[i]);
        put_slot_addr(c, v); sb_puts(o, ";\n");
        int per = 16 / size[i];
        int ph = v->packed ? pack_helper(k->params.data[v->ref].dtype) : -1;
        if (ph >= 0) use(c, ph);
        for (int q = 0; q < W / per; q++) {
            ind(c, d + 4); sb_printf(o, "{ %s fc_q;", vt[i]);
            if (ph >= 0) {   /* f32 lanes, two at a time through one x2 conversion */
                int pc = 4 / size[i];
                for (int comp = 0; comp < 4; comp++) {
                    int e0 = q * per + comp * pc;
                    sb_printf(o, " fc_q.%c = ", "xyzw"[comp]);
                    for (int e = 0; e < pc; e += 2) {
                        if (e) sb_puts(o, " | (");
                        sb_printf(o, "%s(fc_v%d[%d], fc_v%d[%d])", helper_name(ph), i, e0 + e, i, e0 + e + 1);
                        if (e) sb_printf(o, " << %d)", e * size[i] * 8);
                    }
                    sb_putc(o, ';');
                }
            } else if (size[i] >= 4 || strcmp(vt[i], "uint4") != 0) {
                for (int e = 0; e < per; e++) sb_printf(o, " fc_q.%c = fc_v%d[%d];", "xyzw"[e], i, q * per + e);
            } else {
                int pc = 4 / size[i];
                for (int comp = 0; comp < 4; comp++) {
                    sb_printf(o, " fc_q.%c = ", "xyzw"[comp]);
                    for (int e = 0; e < pc; e++) {
                        int shift = e * size[i] * 8;
                        if (e) sb_puts(o, " | ");
                        /* a signed element's bits only (a sign extension would spill into the next) */
                        const char *u = strcmp(elem[i], "signed char") == 0 ? "(unsigned char)" : "";
                        if (shift) sb_printf(o, "((unsigned int)%sfc_v%d[%d] << %d)", u, i, q * per + comp * pc + e, shift);
                        else sb_printf(o, "(unsigned int)%sfc_v%d[%d]", u, i, q * per + comp * pc + e);
                    }
                    sb_putc(o, ';');
                }
            }
            sb_printf(o, " fc_a[%d] = fc_q; }\n", q);
        }
        ind(c, d + 3); sb_puts(o, "}\n");
    }
    ind(c, d + 2); sb_puts(o, "}\n");
    ind(c, d + 1); sb_puts(o, "}\n");
    ind(c, d); sb_puts(o, "}\n");
done:
    c->vec_var = -1;
    c->vec_w = 0;
    c->nslots = 0;
}

/* Prints a statement list at depth d; `red`, when not NULL, is the reduction whose body this
 * is: its accumulation ends the list. */
static void put_list(Cg *c, int s, int d, const KirStmt *red) {
    const KirKernel *k = c->k;
    StrBuf *o = c->o;
    int *declared = NULL, ndecl = 0;
    long guard = 0;
    if (d > 60) { cg_fail(c, FC_ERR_UNSUPPORTED, "statements nested too deeply"); return; }
    for (; s >= 0 && c->st == FC_OK; s = k->stmts.data[s].next) {
        if (s >= k->stmts.len || ++guard > k->stmts.len) { cg_fail(c, FC_ERR_INTERNAL, "bad statement list"); break; }
        const KirStmt *st = &k->stmts.data[s];
        switch (st->kind) {
        case KS_LET:
        case KS_ASSIGN: {
            if (!var_ok(c, st->var)) break;
            KirType t = k->vars.data[st->var].type;
            if (st->kind == KS_ASSIGN && !c->visible[st->var]) {
                cg_fail(c, FC_ERR_INTERNAL, "assignment to v%d outside the scope that declares it", st->var);
                break;
            }
            ind(c, d);
            if (!c->var_read[st->var]) {
                sb_printf(o, "(void)(");
                put_typed(c, st->a, t, "assigned value");
                sb_printf(o, "); /* v%d is never read */\n", st->var);
            } else {
                if (st->kind == KS_LET) sb_printf(o, "%s ", ctype_names[t]);
                sb_printf(o, "v%d = ", st->var);
                c->fma_expr = accumulation(c, st, st->a);
                put_typed(c, st->a, t, "assigned value");
                c->fma_expr = -1;
                sb_puts(o, ";\n");
            }
            if (st->kind == KS_LET) declare(c, st->var, &declared, &ndecl);
            break;
        }
        case KS_STORE: {
            if (st->ref < 0 || st->ref >= k->params.len) { cg_fail(c, FC_ERR_INTERNAL, "store to bad param p%d", st->ref); break; }
            const KirParam *prm = &k->params.data[st->ref];
            if (!prm->written) { cg_fail(c, FC_ERR_INTERNAL, "store to p%d, a param not marked written", st->ref); break; }
            int h = narrow_helper(prm->dtype, true);
            if (st->vec && c->vec_var < 0) { cg_fail(c, FC_ERR_INTERNAL, "vec store to p%d outside a vec thread loop", st->ref); break; }
            ind(c, d);
            if (st->vec && c->in_lanes) {   /* the lane's element of the group's vector */
                int sl = vec_slot(c, false, true, st->ref, st->a);
                if (sl < 0) break;
                sb_printf(o, "fc_v%d[fc_j] = ", sl);
                if (c->slots[sl].packed) {   /* converted in pairs at the vector store */
                    put_typed(c, st->b, KT_F32, "stored value");
                    sb_puts(o, ";\n");
                    break;
                }
            } else {
                sb_printf(o, "p%d[", st->ref);
                put_index(c, st->a, -1, 0);
                sb_puts(o, "] = ");
            }
            if (h >= 0) { use(c, h); sb_printf(o, "%s(", helper_name(h)); }
            else if (prm->dtype == FC_BOOL) sb_puts(o, "(unsigned char)(");
            else if (prm->dtype == FC_I8) sb_puts(o, "(signed char)(");   /* in [-128, 127]: the cast saturated it */
            put_typed(c, st->b, kir_compute_type(prm->dtype), "stored value");
            sb_puts(o, h >= 0 || prm->dtype == FC_BOOL || prm->dtype == FC_I8 ? ");\n" : ";\n");
            break;
        }
        case KS_SHSTORE:
        case KS_TSTORE: {
            bool sh = st->kind == KS_SHSTORE;
            int n = sh ? k->shared.len : k->tarrays.len;
            if (st->ref < 0 || st->ref >= n) { cg_fail(c, FC_ERR_INTERNAL, "store to bad %s %d", sh ? "shared" : "thread array", st->ref); break; }
            if (!sh && !c->in_threads) { cg_fail(c, FC_ERR_INTERNAL, "thread array ta%d written outside a thread loop", st->ref); break; }
            KirType t = sh ? k->shared.data[st->ref].type : k->tarrays.data[st->ref].type;
            if (st->vec && (!sh || c->vec_var < 0)) { cg_fail(c, FC_ERR_INTERNAL, "vec store outside a vec thread loop"); break; }
            ind(c, d);
            if (st->vec && c->in_lanes && c->sh_read[st->ref]) {
                int sl = vec_slot(c, true, true, st->ref, st->a);
                if (sl < 0) break;
                sb_printf(o, "fc_v%d[fc_j] = ", sl);
                put_typed(c, st->b, t, "stored value");
                sb_puts(o, ";\n");
            } else if (!(sh ? c->sh_read : c->ta_read)[st->ref]) {
                sb_puts(o, "(void)(");
                put_index(c, st->a, -1, 0);
                sb_puts(o, "); (void)(");
                put_typed(c, st->b, t, "stored value");
                sb_printf(o, "); /* %s%d is never read */\n", sh ? "sh" : "ta", st->ref);
            } else {
                sb_printf(o, "%s%d[", sh ? "sh" : "ta", st->ref);
                put_index(c, st->a, -1, 0);
                sb_puts(o, "] = ");
                c->fma_expr = accumulation(c, st, st->b);
                put_typed(c, st->b, t, "stored value");
                c->fma_expr = -1;
                sb_puts(o, ";\n");
            }
            break;
        }
        case KS_FOR: {
            if (!var_ok(c, st->var)) break;
            KirType lt = k->vars.data[st->var].type;
            if (!is_int(lt)) { cg_fail(c, FC_ERR_INTERNAL, "loop variable v%d is not an integer", st->var); break; }
            if (c->visible[st->var]) { cg_fail(c, FC_ERR_INTERNAL, "loop variable v%d already declared", st->var); break; }
            bool thr = st->loop == KIR_LOOP_THREADS;
            if (thr && c->in_threads) { cg_fail(c, FC_ERR_INTERNAL, "nested thread loops"); break; }
            if (st->vec < 0 || (st->vec > 1 && !(thr && (st->vec == 2 || st->vec == 4 || st->vec == 8 || st->vec == 16)))) {
                cg_fail(c, FC_ERR_INTERNAL, "loop v%d: vec width %d", st->var, st->vec);
                break;
            }
            if (thr && st->vec > 1) { put_vec_for(c, st, d); break; }
            ind(c, d);
            sb_printf(o, "for (%s v%d = ", ctype_names[lt], st->var);
            put_typed(c, st->a, lt, "loop bound");
            if (thr) sb_printf(o, " + (%s)threadIdx.x", ctype_names[lt]);
            sb_printf(o, "; v%d < ", st->var);
            put_typed(c, st->b, lt, "loop bound");
            if (thr) sb_printf(o, "; v%d += %d) {\n", st->var, k->block);
            else sb_printf(o, "; v%d++) {\n", st->var);
            c->visible[st->var] = 1;
            if (thr) c->in_threads++;
            put_list(c, st->body, d + 1, NULL);
            if (thr) c->in_threads--;
            c->visible[st->var] = 0;
            ind(c, d); sb_puts(o, "}\n");
            break;
        }
        case KS_IF:
            ind(c, d); sb_puts(o, "if (");
            put_typed(c, st->a, KT_BOOL, "condition");
            sb_puts(o, ") {\n");
            put_list(c, st->body, d + 1, NULL);
            if (st->body2 >= 0) {
                ind(c, d); sb_puts(o, "} else {\n");
                put_list(c, st->body2, d + 1, NULL);
            }
            ind(c, d); sb_puts(o, "}\n");
            break;
        case KS_REDUCE:
            put_reduce(c, st, d);
            if (c->st == FC_OK) declare(c, st->var, &declared, &ndecl);
            break;
        case KS_BARRIER:
            if (c->in_threads) { cg_fail(c, FC_ERR_INTERNAL, "a barrier inside a thread loop"); break; }
            ind(c, d); sb_puts(o, "__syncthreads();\n");
            break;
        case KS_ERROR:
            if (!k->uses_status) { cg_fail(c, FC_ERR_INTERNAL, "error_if in a kernel without uses_status"); break; }
            if (st->code <= 0) { cg_fail(c, FC_ERR_INTERNAL, "error_if with status code %d", st->code); break; }
            ind(c, d); sb_puts(o, "if (");
            put_typed(c, st->a, KT_BOOL, "error condition");
            sb_printf(o, ") atomicExch(status, %d); /* %s */\n", st->code, fc_status_name((FcStatus)st->code));
            break;
        case KS_AMAX:
            /* this thread's maximum of the magnitudes' bits (the sign cleared by a mask: PTX does not
             * promise that abs.f32 keeps a NaN's payload); merged at the end of the body (put_amax_flush) */
            if (c->in_tail) { cg_fail(c, FC_ERR_INTERNAL, "an amax in the tail"); break; }
            if (kir_amax_element(k, st) < 0) {
                cg_fail(c, FC_ERR_INTERNAL, "an amax not at an i64 constant element of an f32 param marked written");
                break;
            }
            ind(c, d); sb_printf(o, "fc_amax%d = max(fc_amax%d, __float_as_uint(", s, s);
            put_typed(c, st->b, KT_F32, "amax value");
            sb_puts(o, ") & 0x7fffffffu);\n");
            break;
        default: cg_fail(c, FC_ERR_INTERNAL, "bad statement kind %d", (int)st->kind); break;
        }
    }
    if (red && c->st == FC_OK) put_accumulate(c, red, d);
    for (int i = 0; i < ndecl; i++) c->visible[declared[i]] = 0;
    fc_free(declared);
}

/* ---- kernels ------------------------------------------------------------------------------- */
/* The end of the body, where every thread of the block arrives (before the tail's ticket): each
 * KS_AMAX's per-thread maximum merged into its element: per warp into the block's slot
 * fc_amax_blk[i] in shared memory (fc_amax_flush), then by thread 0 into the element with one
 * global atomic per block (same-address atomics serialize in L2: one a warp was 8 a block),
 * skipped when the element already holds as much: it only grows during a launch, so a value
 * read (however stale) is a lower bound of what the atomic would meet, and once the largest
 * magnitudes are in, most blocks write nothing. */
static int amax_count(const KirKernel *k) {
    int n = 0;
    for (int s = 0; s < k->stmts.len; s++) n += k->stmts.data[s].kind == KS_AMAX;
    return n;
}
static void put_amax_flush(Cg *c) {
    const KirKernel *k = c->k;
    int na = amax_count(k);
    if (na == 0) return;
    sb_printf(c->o, "    /* the amaxes: every thread of the block is here; per warp into the block's slots, then one\n"
                    "     * atomic per block */\n"
                    "    for (unsigned int fc_i = threadIdx.x; fc_i < %du; fc_i += blockDim.x) fc_amax_blk[fc_i] = 0u;\n"
                    "    __syncthreads();\n", na);
    use(c, H_AMAX_FLUSH);
    for (int s = 0, i = 0; s < k->stmts.len; s++) {
        const KirStmt *st = &k->stmts.data[s];
        if (st->kind != KS_AMAX) continue;
        if (kir_amax_element(k, st) < 0) {
            cg_fail(c, FC_ERR_INTERNAL, "an amax not at an i64 constant element of an f32 param marked written");
            return;
        }
        sb_printf(c->o, "    %s(fc_amax_blk + %d, fc_amax%d);\n", helper_name(H_AMAX_FLUSH), i++, s);
    }
    sb_puts(c->o, "    __syncthreads();\n"
                  "    if (threadIdx.x == 0) {\n");
    for (int s = 0, i = 0; s < k->stmts.len; s++) {
        const KirStmt *st = &k->stmts.data[s];
        if (st->kind != KS_AMAX) continue;
        long long e = (long long)kir_amax_element(k, st);
        sb_printf(c->o, "        if (fc_amax_blk[%d] > *reinterpret_cast<volatile unsigned int *>(p%d + %lldLL)) "
                        "atomicMax(reinterpret_cast<unsigned int *>(p%d + %lldLL), fc_amax_blk[%d]);\n",
                  i, st->ref, e, st->ref, e, i);
        i++;
    }
    sb_puts(c->o, "    }\n");
}

static bool has_reduce(const KirKernel *k) {
    for (int i = 0; i < k->stmts.len; i++)
        if (k->stmts.data[i].kind == KS_REDUCE) return true;
    return false;
}

static FcStatus check_kernel_header(const KirKernel *k, FcErr *err) {
    if (!kir_kernel_ok(k))
        return fc_err_set(err, FC_ERR_INTERNAL, "cuda codegen: kernel %s is incomplete (builder failure)",
                          k && generated_ident(k->name) ? k->name : "?");
    if (!generated_ident(k->name))
        return fc_err_set(err, FC_ERR_INTERNAL, "cuda codegen: kernel name is not a generated identifier");
    if (k->block < 1 || k->block > 1024)
        return fc_err_set(err, FC_ERR_INTERNAL, "cuda codegen: kernel %s: block of %d threads (1..1024)",
                          k->name, k->block);
    if (k->grid < 1)
        return fc_err_set(err, FC_ERR_INTERNAL, "cuda codegen: kernel %s: grid of %lld blocks", k->name,
                          (long long)k->grid);
    for (int i = 0; i < k->params.len; i++)
        if (!storage_ctype(k->params.data[i].dtype))
            return fc_err_set(err, FC_ERR_INTERNAL, "cuda codegen: kernel %s: p%d has a bad dtype", k->name, i);
    return FC_OK;
}

/* Shared array i has vec accesses (its storage must be 16-byte aligned). */
static bool shared_vec(const KirKernel *k, int i) {
    for (int e = 0; e < k->exprs.len; e++)
        if (k->exprs.data[e].kind == KE_SHLOAD && k->exprs.data[e].vec && k->exprs.data[e].ref == i) return true;
    for (int s = 0; s < k->stmts.len; s++)
        if (k->stmts.data[s].kind == KS_SHSTORE && k->stmts.data[s].vec && k->stmts.data[s].ref == i) return true;
    return false;
}

/* Prints kernel k (its text into `body`, helpers it needs into `helpers`). */
/* Shared arrays beyond static shared memory live in one dynamic buffer (`extern __shared__`),
 * each at a 16-byte aligned offset in array order; cg_cuda_dynamic_shared gives its size (0: the
 * arrays are static). Reduction scratch, the tail's flag and the amax slots stay static (small). */
static int64_t shared_array_bytes(const KirShared *s) {
    int64_t es = s->type == KT_BOOL ? 1 : s->type == KT_I32 || s->type == KT_F32 ? 4 : 8, b;
    return (unsigned)s->type < KT_COUNT && s->count >= 1 && fc_mul64(s->count, es, &b) && b <= INT64_MAX - 15 ? b : -1;
}
int64_t cg_cuda_dynamic_shared(const KirKernel *k) {
    int64_t total = 0;
    for (int i = 0; i < k->shared.len; i++) {
        int64_t b = shared_array_bytes(&k->shared.data[i]);
        if (b < 0 || !fc_add64(total, (b + 15) / 16 * 16, &total)) return -1;
    }
    /* beside them, static: the reduction scratch, the tail's flag and the block's amaxes */
    return total + CG_RED_SCRATCH_MAX + 16 + 4 * (int64_t)amax_count(k) > CG_MAX_STATIC_SHARED ? total : 0;
}

/* Does k divide floats (a division or a reciprocal in f32/f64)? In a training unit such a kernel
 * is declared __launch_bounds__(BLOCK, 1): ptxas compiles IEEE division's slow path as a call,
 * and with the block size alone it spilled values live across that call in kernels of the
 * examples' training units (docs/cuda.md, "Training"). */
static bool divides_floats(const KirKernel *k) {
    for (int i = 0; i < k->exprs.len; i++) {
        const KirExpr *e = &k->exprs.data[i];
        if (is_float(e->type) && ((e->kind == KE_BINARY && e->op == KB_DIV) || (e->kind == KE_UNARY && e->op == KU_RECIP)))
            return true;
    }
    return false;
}

static FcStatus put_kernel(const KirKernel *k, const char *prefix, bool train, StrBuf *out, bool *helpers, FcErr *err) {
    FC_TRY(check_kernel_header(k, err));
    Cg c = {.k = k, .o = out, .err = err, .st = FC_OK, .helpers = helpers, .vec_var = -1, .fma_expr = -1};
    int nv = k->vars.len, ne = k->exprs.len;
    c.visible = fc_calloc((size_t)nv + 1, 1);
    c.var_read = fc_calloc((size_t)nv + 1, sizeof(bool));
    c.sh_read = fc_calloc((size_t)k->shared.len + 1, sizeof(bool));
    c.ta_read = fc_calloc((size_t)k->tarrays.len + 1, sizeof(bool));
    c.expr_seen = fc_calloc((size_t)ne + 1, sizeof(bool));
    StrBuf body = {0};
    FcStatus st = FC_OK;
    if (!c.visible || !c.var_read || !c.sh_read || !c.ta_read || !c.expr_seen) { st = FC_OOM(err); goto done; }
    mark_list(&c, k->body, 0);
    mark_list(&c, k->tail, 0);

    /* the body first, into its own buffer: the declarations depend on what it uses */
    c.o = &body;
    put_list(&c, k->body, 1, NULL);
    if (c.st == FC_OK) put_amax_flush(&c);
    if (k->tail >= 0 && c.st == FC_OK) {
        /* the tail (kir.h): run by the block that finishes last. Every thread's stores are made
         * visible device-wide, then thread 0 takes a ticket on the sync word (zero at launch);
         * the block with the last ticket runs the tail and leaves the word zero */
        sb_puts(&body, "    /* the tail: the last block to finish runs it */\n"
                       "    __threadfence();\n"
                       "    __syncthreads();\n"
                       "    if (threadIdx.x == 0) fc_last[0] = atomicAdd(fc_sync, 1u) == gridDim.x - 1u;\n"
                       "    __syncthreads();\n"
                       "    if (fc_last[0]) {\n"
                       "        __threadfence();\n");
        c.in_tail = true;
        put_list(&c, k->tail, 2, NULL);
        c.in_tail = false;
        sb_puts(&body, "        if (threadIdx.x == 0) *fc_sync = 0u;\n"
                       "    }\n");
    }
    c.o = out;
    if (c.st != FC_OK) { st = c.st; goto done; }

    int nw = (k->block + 31) / 32;
    for (int i = 0; i < k->shared.len; i++)
        if (shared_array_bytes(&k->shared.data[i]) < 0) {
            st = fc_err_set(err, FC_ERR_INTERNAL, "cuda codegen: kernel %s: bad shared array sh%d", k->name, i);
            goto done;
        }
    int64_t dyn = cg_cuda_dynamic_shared(k);
    if (dyn < 0 || dyn > CG_MAX_DYNAMIC_SHARED) {
        st = fc_err_set(err, FC_ERR_UNSUPPORTED,
                        "cuda codegen: kernel %s needs %lld bytes of shared memory; a block may have at most %d "
                        "(sm_90's opt-in dynamic shared memory)", k->name, (long long)dyn, CG_MAX_DYNAMIC_SHARED);
        goto done;
    }
    for (int i = 0; i < k->tarrays.len; i++)
        if ((unsigned)k->tarrays.data[i].type >= KT_COUNT || k->tarrays.data[i].count < 1) {
            st = fc_err_set(err, FC_ERR_INTERNAL, "cuda codegen: kernel %s: bad thread array ta%d", k->name, i);
            goto done;
        }

    /* the comment: what the kernel is and how to launch it */
    sb_printf(out, "/* %s%s: kind ", prefix, k->name);
    put_comment_text(out, k->kind, 64);
    sb_puts(out, ", ops [");
    put_comment_text(out, k->ops, 400);
    sb_printf(out, "]\n * launch: grid %lld, block %d", (long long)k->grid, k->block);
    if (dyn > 0) sb_printf(out, ", %lld bytes of dynamic shared memory", (long long)dyn);
    sb_printf(out, "%s\n", k->grid > CG_MAX_GRID ? " (over CUDA's gridDim.x limit of 2^31-1: cannot be launched)" : "");
    for (int i = 0; i < k->params.len; i++) {
        const KirParam *p = &k->params.data[i];
        sb_printf(out, " * p%d: %s[%lld]%s\n", i, fc_dtype_name(p->dtype), (long long)p->numel,
                  p->written ? " written" : "");
    }
    if (k->uses_status) sb_puts(out, " * status: int, set to a nonzero FcStatus on a data error\n");
    if (k->tail >= 0) sb_puts(out, " * sync: unsigned int, zero at launch (the tail's ticket; the kernel leaves it zero)\n");
    sb_printf(out, " * modelled: %lld bytes read, %lld bytes written, %lld flops */\n", (long long)k->bytes_read,
              (long long)k->bytes_written, (long long)k->flops);

    sb_printf(out, "extern \"C\" __global__ void __launch_bounds__(%d%s) %s%s(", k->block,
              train && divides_floats(k) ? ", 1" : "", prefix, k->name);
    for (int i = 0; i < k->params.len; i++) {
        const KirParam *p = &k->params.data[i];
        sb_printf(out, "%s%s%s* __restrict__ p%d", i ? ", " : "", p->written ? "" : "const ",
                  storage_ctype(p->dtype), i);
    }
    if (k->uses_status) sb_printf(out, "%sint* status", k->params.len ? ", " : "");
    if (k->tail >= 0) sb_printf(out, "%sunsigned int* fc_sync", k->params.len || k->uses_status ? ", " : "");
    if (!k->params.len && !k->uses_status && k->tail < 0) sb_puts(out, "void");
    sb_puts(out, ")\n{\n");
    if (dyn > 0) sb_printf(out, "    extern __shared__ uint4 fc_dyn[]; /* %lld bytes, launched with them */\n", (long long)dyn);
    int64_t off = 0;
    for (int i = 0; i < k->shared.len; i++) {
        const KirShared *sa = &k->shared.data[i];
        int64_t at = off;
        off += (shared_array_bytes(sa) + 15) / 16 * 16;
        if (!c.sh_read[i]) continue;
        if (dyn > 0) {
            sb_printf(out, "    %s *const sh%d = reinterpret_cast<%s *>(reinterpret_cast<char *>(fc_dyn) + %lld);\n",
                      ctype_names[sa->type], i, ctype_names[sa->type], (long long)at);
            continue;
        }
        if (shared_vec(k, i)) {
            /* 16-byte vector accesses: 16-byte aligned storage, used through a typed pointer */
            int64_t bytes = sa->count * (sa->type == KT_F32 || sa->type == KT_I32 ? 4 : 8);
            sb_printf(out, "    __shared__ uint4 fc_sh%d[%lld];\n", i, (long long)((bytes + 15) / 16));
            sb_printf(out, "    %s *const sh%d = reinterpret_cast<%s *>(fc_sh%d);\n", ctype_names[sa->type], i,
                      ctype_names[sa->type], i);
        } else {
            sb_printf(out, "    __shared__ %s sh%d[%lld];\n", ctype_names[sa->type], i, (long long)sa->count);
        }
    }
    for (int t = 0; t < KT_COUNT; t++)
        if (c.red_type[t])
            sb_printf(out, "    __shared__ %s fc_red_%s[%d]; /* one slot per warp */\n", ctype_names[t],
                      kir_type_name((KirType)t), nw);
    for (int i = 0; i < k->tarrays.len; i++)
        if (c.ta_read[i])
            sb_printf(out, "    %s ta%d[%d];\n", ctype_names[k->tarrays.data[i].type], i, k->tarrays.data[i].count);
    if (k->tail >= 0) sb_puts(out, "    __shared__ unsigned int fc_last[1]; /* this block runs the tail */\n");
    if (amax_count(k) > 0)
        sb_printf(out, "    __shared__ unsigned int fc_amax_blk[%d]; /* the block's amaxes, as bits */\n", amax_count(k));
    for (int s = 0; s < k->stmts.len; s++)
        if (k->stmts.data[s].kind == KS_AMAX)
            sb_printf(out, "    unsigned int fc_amax%d = 0u; /* this thread's amax of p%d[%lld], as bits */\n", s,
                      k->stmts.data[s].ref, (long long)kir_amax_element(k, &k->stmts.data[s]));
    if (has_reduce(k)) {
        sb_puts(out, "    const unsigned int fc_lane = threadIdx.x & 31u;\n");
        sb_puts(out, "    const unsigned int fc_warp = threadIdx.x >> 5;\n");
        if (k->block % 32 != 0) {
            /* the last warp is partial: lanes past the block hold no value (the identity) */
            sb_printf(out, "    const unsigned int fc_nact = %du - (threadIdx.x & ~31u) < 32u ? %du - (threadIdx.x & ~31u) : 32u;\n",
                      k->block, k->block);
            sb_puts(out, "    const unsigned int fc_mask = fc_nact == 32u ? 0xffffffffu : (1u << fc_nact) - 1u;\n");
        }
    }
    if (body.failed) { st = FC_OOM(err); goto done; }
    if (body.data) sb_puts(out, body.data);
    sb_puts(out, "}\n");
done:
    sb_free(&body);
    fc_free(c.visible);
    fc_free(c.var_read);
    fc_free(c.sh_read);
    fc_free(c.ta_read);
    fc_free(c.expr_seen);
    fc_free(c.slots);
    return st;
}

/* An f32 constant as a C literal that reads back exactly (9 significant digits, a point or an
 * exponent, the f suffix). */
static void put_f32(StrBuf *out, float v) {
    char b[40];
    snprintf(b, sizeof b, "%.9g", (double)v);
    sb_printf(out, "%s%sf", b, strpbrk(b, ".en") ? "" : ".0");
}
/* c[n-1] a^(n-1) + ... + c[0] by Horner into the variable v (declared) */
static void put_horner(StrBuf *out, const char *v, const char *a, const float *c, int n) {
    sb_printf(out, "    float %s = ", v);
    put_f32(out, c[n - 1]);
    sb_puts(out, ";\n");
    for (int i = n - 2; i >= 0; i--) {
        sb_printf(out, "    %s = __fmaf_rn(%s, %s, ", v, v, a);
        put_f32(out, c[i]);
        sb_puts(out, ");\n");
    }
}
/* fc_ndtr's body after helper_text[H_NDTR], its constants vecmath_consts.h's, as vndtr and
 * vexp_core_scaled use them */
static void put_ndtr_body(StrBuf *out) {
    sb_puts(out, "    const float a = fminf(fabsf(x), ");
    put_f32(out, FC_NDTR_CLAMP);
    sb_puts(out, "); /* NaN: the clamp, the NaN restored at the end */\n");
    put_horner(out, "q", "a", fc_ndtr_q, FC_NDTR_NQ);
    put_horner(out, "p", "a", fc_ndtr_p, FC_NDTR_NP);
    sb_puts(out, "    const float rr = q / __fmaf_rn(__fmul_rn(a, ");
    put_f32(out, FC_NDTR_SQRT_2PI);
    sb_puts(out, "), q, p);\n"
                 "    const float h = __fmul_rn(a, a), l = __fmaf_rn(a, a, -h);\n"
                 "    const float y = __fmul_rn(h, -0.5f), m = __fmul_rn(l, -0.5f);\n"
                 "    const float n = rintf(__fmul_rn(y, ");
    put_f32(out, FC_EXP_LOG2E);
    sb_puts(out, "));\n    float r = __fmaf_rn(-n, ");
    put_f32(out, FC_EXP_LN2_HI);
    sb_puts(out, ", y);\n    r = __fmaf_rn(-n, ");
    put_f32(out, FC_EXP_LN2_LO);
    sb_puts(out, ", r);\n");
    put_horner(out, "e", "r", fc_exp_p, FC_EXP_NP);
    sb_puts(out, "    float t = __fmaf_rn(__fmul_rn(r, r), e, r);\n"
                 "    t = __fmaf_rn(t, m, __fadd_rn(t, m));\n"
                 "    t = __fmaf_rn(rr, t, rr);\n"
                 "    const int ni = (int)n, n1 = ni >> 1, n2 = ni - n1;\n"
                 "    t = __fmul_rn(__fmul_rn(t, __int_as_float((n1 + 127) << 23)), __int_as_float((n2 + 127) << 23));\n"
                 "    return x != x ? x : x < 0.0f ? t : 1.0f - t;\n"
                 "}\n");
}

static void put_preamble(StrBuf *out, const bool *helpers) {
    bool any = false;
    for (int h = 0; h < H_COUNT; h++) any |= helpers[h];
    if (!any) return;
    sb_puts(out, "/* ---- helpers: storage conversions (round to nearest even; f8 saturating), float to\n"
                 " * int (truncating, saturating, NaN -> 0), NaN-propagating max/min ---- */\n");
    /* order: dependencies first */
    static const int order[H_COUNT] = {
        H_CVT_BF16X2, H_CVT_F16X2, H_CVT_F32_F16, H_CVT_E4M3X2, H_CVT_E5M2X2, H_CVT_F16X2_E4M3X2,
        H_F16_TO_F32, H_ROUND_BITS, H_F32_TO_F16, H_BF16_TO_F32, H_F32_TO_BF16, H_F8E4M3_TO_F32,
        H_F32_TO_F8E4M3, H_F8E5M2_TO_F32, H_F32_TO_F8E5M2, H_PACK_BF16, H_PACK_F16, H_PACK_F8E4M3,
        H_PACK_F8E5M2, H_UNPACK_F8E4M3, H_F32_TO_I32, H_F32_TO_I64, H_F64_TO_I32,
        H_F64_TO_I64, H_MAX_F32, H_MIN_F32, H_MAX_F64, H_MIN_F64, H_MAX_I32, H_MIN_I32, H_MAX_I64,
        H_MIN_I64, H_PHILOX, H_AMAX_FLUSH, H_NDTR};
    for (int i = 0; i < H_COUNT; i++)
        if (helpers[order[i]]) {
            sb_puts(out, helper_text[order[i]]);
            if (order[i] == H_NDTR) put_ndtr_body(out);
        }
    sb_putc(out, '\n');
}

/* Is a1 a2 (concatenated) the same string as b1 b2? */
static bool concat_eq(const char *a1, const char *a2, const char *b1, const char *b2) {
    const char *a = a1, *b = b1;
    for (;;) {
        if (!*a && a2) { a = a2; a2 = NULL; continue; }
        if (!*b && b2) { b = b2; b2 = NULL; continue; }
        if (*a != *b) return false;
        if (!*a) return true;
        a++, b++;
    }
}

/* All kernels of the n programs ps (helpers first, once) into out; the kernels of ps[i] are
 * named prefixes[i] + KirKernel.name, and no two names may be equal. */
static FcStatus put_kernels_of(const KirProgram *const *ps, const char *const *prefixes, int n, bool train,
                               StrBuf *out, FcErr *err) {
    bool helpers[H_COUNT] = {0};
    StrBuf ks = {0};
    FcStatus st = FC_OK;
    for (int q = 0; q < n && st == FC_OK; q++) {
        const KirProgram *p = ps[q];
        for (int i = 0; i < p->kernels.len && st == FC_OK; i++) {
            const KirKernel *k = p->kernels.data[i];
            if (!k) { st = fc_err_set(err, FC_ERR_INTERNAL, "cuda codegen: kernel %d is NULL", i); break; }
            for (int j = 0; j < i; j++)
                if (k->name && p->kernels.data[j]->name && !strcmp(k->name, p->kernels.data[j]->name)) {
                    st = fc_err_set(err, FC_ERR_INTERNAL, "cuda codegen: two kernels named %s",
                                    generated_ident(k->name) ? k->name : "?");
                    break;
                }
            for (int q2 = 0; q2 < q && st == FC_OK; q2++)   /* another program's (their names are checked) */
                for (int j = 0; j < ps[q2]->kernels.len; j++)
                    if (k->name && ps[q2]->kernels.data[j]->name &&
                        concat_eq(prefixes[q], k->name, prefixes[q2], ps[q2]->kernels.data[j]->name)) {
                        st = fc_err_set(err, FC_ERR_INTERNAL, "cuda codegen: two kernels named %s%s", prefixes[q],
                                        generated_ident(k->name) ? k->name : "?");
                        break;
                    }
            if (st != FC_OK) break;
            if (k->library) continue;   /* a library call: no kernel text */
            if (ks.len) sb_putc(&ks, '\n');
            st = put_kernel(k, prefixes[q], train, &ks, helpers, err);
        }
    }
    if (st == FC_OK) {
        if (ks.failed) st = FC_OOM(err);
        else {
            put_preamble(out, helpers);
            if (ks.data) sb_puts(out, ks.data);
        }
    }
    sb_free(&ks);
    return st;
}

/* All kernels of p (helpers first) into out. */
static FcStatus put_kernels(const KirProgram *p, StrBuf *out, FcErr *err) {
    const char *none = "";
    return put_kernels_of(&p, &none, 1, false, out, err);
}

FcStatus cg_cuda_kernels(const KirProgram *p, StrBuf *out, FcErr *err) {
    FC_CHECK(err, p && out);
    sb_puts(out, "/* CUDA C generated by fusec " FUSEC_VERSION " for block ");
    put_comment_text(out, p->block_name, 80);
    sb_printf(out, ": %d kernel%s.\n", p->kernels.len, p->kernels.len == 1 ? "" : "s");
    sb_puts(out, " * Self-contained (it includes no header): compiles under NVRTC with no include paths.\n"
                 " * Each kernel: extern \"C\", parameters in KirParam order, then int* status when it\n"
                 " * reports data errors; launch it with the grid and block stated above it. */\n\n");
    FC_TRY(put_kernels(p, out, err));
    if (out->failed) return FC_OOM(err);
    return FC_OK;
}

/* ---- the AOT translation unit --------------------------------------------------------------- */
static bool c_ident(const char *s) {
    if (!s || !s[0] || (s[0] >= '0' && s[0] <= '9')) return false;
    for (const char *q = s; *q; q++)
        if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') || *q == '_'))
            return false;
    return strlen(s) <= 200;
}

static void put_shape(StrBuf *o, FcDtype t, const IrShape *s) {
    sb_printf(o, "%s[", fc_dtype_name(t) ? fc_dtype_name(t) : "?");
    for (int i = 0; i < s->rank && i < IR_MAX_RANK; i++) sb_printf(o, "%s%lld", i ? ", " : "", (long long)s->dims[i]);
    sb_putc(o, ']');
}

/* The unit's arguments: the block's inputs in0.. and outputs out0.. (in declaration order), in
 * training also the saved buffers (at 256-byte aligned offsets in `saved`) and the gradients
 * grad_outJ / grad_inI of the float outputs and inputs. */
typedef struct Aot {
    const CgIoDesc *io;
    int nio;
    int *arg_of;              /* [nio] io index -> in/out number */
    int *in_io, *out_io;      /* in number -> io index; out number -> io index */
    int nin, nout;
    bool train;
    const CgIoDesc *saved;
    int nsaved;
    int64_t *saved_off;       /* [nsaved] byte offsets in `saved` */
    int64_t saved_bytes;      /* the end of the last one */
    int64_t fp8_floats;       /* --precision f8: the f8 state argument's floats (kir.h KIR_BUF_STATE); 0: none */
} Aot;

/* One host entry point: a program and where each of its input and output buffers lives. */
typedef struct AotFn {
    const KirProgram *p;
    const char *prefix;       /* of its kernels' names */
    const CgArg *in, *out;    /* [npin], [npout] */
    int npin, npout;
    bool backward;            /* reads `saved` (else writes it) */
    /* found by aot_check */
    int64_t need, status_off;
    bool any_status, any_sync, too_big, any_gemm, uses_ws, uses_saved;
} AotFn;

static void aot_free(Aot *a) {
    fc_free(a->arg_of);
    fc_free(a->in_io);
    fc_free(a->out_io);
    fc_free(a->saved_off);
}

/* Fills a from io (and the saved buffers); FC_OK or an error. */
static FcStatus aot_init(Aot *a, const CgIoDesc *io, int nio, const CgIoDesc *saved, int nsaved, FcErr *err) {
    memset(a, 0, sizeof *a);
    a->io = io;
    a->nio = nio;
    a->saved = saved;
    a->nsaved = nsaved;
    a->arg_of = fc_calloc((size_t)nio + 1, sizeof(int));
    a->in_io = fc_calloc((size_t)nio + 1, sizeof(int));
    a->out_io = fc_calloc((size_t)nio + 1, sizeof(int));
    a->saved_off = fc_calloc((size_t)nsaved + 1, sizeof(int64_t));
    if (!a->arg_of || !a->in_io || !a->out_io || !a->saved_off) return FC_OOM(err);
    for (int i = 0; i < nio; i++) {
        if (!storage_ctype(io[i].dtype)) return fc_err_set(err, FC_ERR_INTERNAL, "cuda codegen: io %d has a bad dtype", i);
        if (io[i].is_output) a->out_io[a->arg_of[i] = a->nout++] = i;
        else a->in_io[a->arg_of[i] = a->nin++] = i;
    }
    for (int k = 0; k < nsaved; k++) {
        int64_t numel, bytes, at = (a->saved_bytes + 255) / 256 * 256;
        if (!storage_ctype(saved[k].dtype) || !ir_shape_numel(&saved[k].shape, &numel) ||
            !fc_mul64(numel, (int64_t)fc_dtype_size(saved[k].dtype), &bytes) || at < a->saved_bytes ||
            !fc_add64(at, bytes, &a->saved_bytes))
            return fc_err_set(err, FC_ERR_INTERNAL, "cuda codegen: saved buffer %d: bad dtype or size", k);
        a->saved_off[k] = at;
    }
    return FC_OK;
}

/* The description of argument x, or NULL when it does not exist. */
static const CgIoDesc *arg_desc(const Aot *a, CgArg x) {
    switch (x.kind) {
    case CG_ARG_INPUT: case CG_ARG_GRAD_INPUT: return x.index >= 0 && x.index < a->nin ? &a->io[a->in_io[x.index]] : NULL;
    case CG_ARG_OUTPUT: case CG_ARG_GRAD_OUTPUT: return x.index >= 0 && x.index < a->nout ? &a->io[a->out_io[x.index]] : NULL;
    case CG_ARG_SAVED: return x.index >= 0 && x.index < a->nsaved ? &a->saved[x.index] : NULL;
    }
    return NULL;
}

/* Checks f's program against its arguments: inputs and outputs match their descriptions, temps
 * lie in the workspace, launches fit their kernels; then its workspace size. */
static FcStatus aot_check(const Aot *a, AotFn *f, FcErr *err) {
    const KirProgram *p = f->p;
    const int64_t ws = p->workspace_bytes;
    if (ws < 0) return fc_err_set(err, FC_ERR_INTERNAL, "cuda codegen: negative workspace");
    for (int b = 0; b < p->buffers.len; b++) {
        const KirBuffer *buf = &p->buffers.data[b];
        int64_t bytes, end;
        if (!storage_ctype(buf->dtype) || buf->numel < 0 ||
            !fc_mul64(buf->numel, (int64_t)fc_dtype_size(buf->dtype), &bytes))
            return fc_err_set(err, FC_ERR_INTERNAL, "cuda codegen: buffer b%d: bad dtype or size", b);
        if (buf->kind == KIR_BUF_TEMP) {
            if (buf->offset < 0 || buf->offset % 256 || !fc_add64(buf->offset, bytes, &end) || end > ws)
                return fc_err_set(err, FC_ERR_INTERNAL, "cuda codegen: temp b%d [%lld, +%lld) outside the workspace of %lld bytes",
                                  b, (long long)buf->offset, (long long)bytes, (long long)ws);
            f->uses_ws = true;
            continue;
        }
        if (buf->kind == KIR_BUF_STATE) {
            if (buf->dtype != FC_F32 || buf->numel != a->fp8_floats || buf->numel % KIR_FP8_STRIDE)
                return fc_err_set(err, FC_ERR_INTERNAL, "cuda codegen: the f8 state b%d is malformed", b);
            continue;
        }
        bool want_out = buf->kind == KIR_BUF_OUTPUT;
        const CgIoDesc *d = NULL;
        if (buf->index >= 0 && buf->index < (want_out ? f->npout : f->npin)) {
            CgArg x = (want_out ? f->out : f->in)[buf->index];
            d = arg_desc(a, x);
            f->uses_saved |= x.kind == CG_ARG_SAVED;
        }
        int64_t numel = -1;
        if (!d || d->dtype != buf->dtype || !ir_shape_numel(&d->shape, &numel) || numel != buf->numel)
            return fc_err_set(err, FC_ERR_INTERNAL, "cuda codegen: buffer b%d does not match %s %d", b,
                              want_out ? "output" : "input", buf->index);
    }
    for (int l = 0; l < p->launches.len; l++) {
        const KirLaunch *la = &p->launches.data[l];
        if (la->kernel < 0 || la->kernel >= p->kernels.len) return fc_err_set(err, FC_ERR_INTERNAL, "cuda codegen: launch %d: bad kernel", l);
        const KirKernel *k = p->kernels.data[la->kernel];
        if (la->nargs != k->params.len) return fc_err_set(err, FC_ERR_INTERNAL, "cuda codegen: launch %d: %d args for %d params", l, la->nargs, k->params.len);
        for (int i = 0; i < la->nargs; i++) {
            int b = la->args[i];
            const KirParam *prm = &k->params.data[i];
            if (b < 0 || b >= p->buffers.len) return fc_err_set(err, FC_ERR_INTERNAL, "cuda codegen: launch %d: bad buffer", l);
            const KirBuffer *buf = &p->buffers.data[b];
            if (buf->dtype != prm->dtype || buf->numel < prm->numel || (prm->written && buf->kind == KIR_BUF_INPUT))
                return fc_err_set(err, FC_ERR_INTERNAL, "cuda codegen: launch %d: b%d does not fit p%d of %s", l, b, i,
                                  generated_ident(k->name) ? k->name : "?");
            for (int i2 = 0; i2 < i; i2++)   /* params are __restrict__: no aliasing with a write */
                if (la->args[i2] == b && (prm->written || k->params.data[i2].written))
                    return fc_err_set(err, FC_ERR_INTERNAL, "cuda codegen: launch %d binds b%d to two params, one written", l, b);
        }
        f->any_status |= k->uses_status;
        f->any_sync |= k->tail >= 0;
        f->any_gemm |= k->library;
        if (k->library && (k->gemm.m > INT32_MAX || k->gemm.n > INT32_MAX || k->gemm.k > INT32_MAX ||
                           k->gemm.batch > INT32_MAX || k->gemm.panel_k > 0))   /* panels: the CPU's */
            return fc_err_set(err, FC_ERR_INTERNAL, "cuda codegen: launch %d: a library product too large", l);
        f->too_big |= k->grid > CG_MAX_GRID;
    }
    /* after the workspace proper, 256-byte aligned: the status word, then the sync word of the
     * kernels with a tail (zeroed by the entry before the launches; each tail leaves it zero) */
    f->uses_ws |= f->any_status || f->any_sync;
    f->status_off = 0;
    f->need = ws;
    if ((f->any_status || f->any_sync) &&
        (!fc_add64(ws, 255, &f->status_off) || !fc_add64(f->status_off / 256 * 256, 8, &f->need)))
        return fc_err_set(err, FC_ERR_INTERNAL, "cuda codegen: workspace size overflows");
    f->status_off = f->status_off / 256 * 256;
    return FC_OK;
}

/* A tensor argument's C name: in0, out0, grad_out0, grad_in0. */
static void put_arg_name(StrBuf *o, CgArg x) {
    static const char *const names[] = {[CG_ARG_INPUT] = "in", [CG_ARG_OUTPUT] = "out", [CG_ARG_SAVED] = "saved",
                                        [CG_ARG_GRAD_OUTPUT] = "grad_out", [CG_ARG_GRAD_INPUT] = "grad_in"};
    sb_printf(o, "%s%d", names[x.kind], x.index);
}

/* The parameters of the forward or the backward: the tensors (inputs then outputs; all read by
 * the backward), then in training `saved` (and in the backward the gradients of the float
 * outputs, then of the float inputs), then the workspace and the stream; `sep` between these
 * groups. */
static void put_params(StrBuf *o, const Aot *a, bool backward, const char *sep) {
    int cnt = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < a->nio; i++)
            if (a->io[i].is_output == (pass == 1)) {
                sb_printf(o, "%s%s%s *", cnt++ ? ", " : "", pass && !backward ? "" : "const ", storage_ctype(a->io[i].dtype));
                put_arg_name(o, (CgArg){pass ? CG_ARG_OUTPUT : CG_ARG_INPUT, a->arg_of[i]});
            }
    if (cnt) sb_puts(o, sep);
    if (backward) {
        sb_puts(o, "const void *saved");
        for (int pass = 0; pass < 2; pass++)
            for (int i = 0; i < a->nio; i++)
                if (a->io[i].is_output == (pass == 0) && ir_dtype_is_float(a->io[i].dtype)) {
                    sb_printf(o, ", %s%s *", pass ? "" : "const ", storage_ctype(a->io[i].dtype));
                    put_arg_name(o, (CgArg){pass ? CG_ARG_GRAD_INPUT : CG_ARG_GRAD_OUTPUT, a->arg_of[i]});
                }
        sb_puts(o, sep);
    } else if (a->train) {
        sb_puts(o, "void *saved, ");
    }
    if (a->fp8_floats) sb_puts(o, "float *fp8_state, ");
    sb_puts(o, "void *workspace, size_t workspace_bytes, cudaStream_t stream");
}

/* `if (!in0 || ...) return 2;` over the tensor arguments of the forward or the backward. */
static void put_null_checks(StrBuf *o, const Aot *a, bool backward) {
    /* inputs, outputs, then (backward) the gradients of the outputs and of the inputs */
    static const CgArgKind kinds[4] = {CG_ARG_INPUT, CG_ARG_OUTPUT, CG_ARG_GRAD_OUTPUT, CG_ARG_GRAD_INPUT};
    int cnt = 0;
    for (int pass = 0; pass < (backward ? 4 : 2); pass++)
        for (int i = 0; i < a->nio; i++) {
            bool is_out = kinds[pass] == CG_ARG_OUTPUT || kinds[pass] == CG_ARG_GRAD_OUTPUT;
            if (a->io[i].is_output != is_out || (pass >= 2 && !ir_dtype_is_float(a->io[i].dtype))) continue;
            sb_puts(o, cnt++ ? " || !" : "    if (!");
            put_arg_name(o, (CgArg){kinds[pass], a->arg_of[i]});
        }
    if (cnt) sb_puts(o, ") return 2;\n");
    if (a->fp8_floats) sb_puts(o, "    if (!fp8_state) return 2;\n");
}

/* A launch argument: the C expression of buffer buf of f's program (a pointer to its storage
 * type; for a library call, a plain pointer). */
static void put_buffer_arg(StrBuf *o, const Aot *a, const AotFn *f, const KirBuffer *buf, bool library) {
    if (buf->kind == KIR_BUF_STATE) {
        sb_puts(o, "fp8_state");
        return;
    }
    if (buf->kind == KIR_BUF_TEMP) {
        if (library) sb_printf(o, "fc_ws + %lld", (long long)buf->offset);
        else sb_printf(o, "(%s *)(fc_ws + %lld)", storage_ctype(buf->dtype), (long long)buf->offset);
        return;
    }
    CgArg x = (buf->kind == KIR_BUF_OUTPUT ? f->out : f->in)[buf->index];
    if (x.kind != CG_ARG_SAVED) { put_arg_name(o, x); return; }
    long long at = (long long)a->saved_off[x.index];
    if (library) sb_printf(o, "fc_saved + %lld", at);
    else sb_printf(o, "(%s%s *)(fc_saved + %lld)", f->backward ? "const " : "", storage_ctype(buf->dtype), at);
}

/* The body of f's entry point after its argument checks: the workspace check, the launches, the
 * status word; up to and with the closing brace. */
static void put_entry_body(StrBuf *out, const Aot *a, const AotFn *f) {
    const KirProgram *p = f->p;
    if (f->need > 0)
        sb_printf(out, "    if (workspace_bytes < (size_t)%lldULL || !workspace || ((size_t)workspace & 255u) != 0) return 2;\n",
                  (long long)f->need);
    else
        sb_puts(out, "    (void)workspace;\n    (void)workspace_bytes;\n");
    if (f->too_big) {
        sb_puts(out, "    (void)stream;\n    return 10; /* a kernel's grid exceeds 2^31-1 blocks */\n}\n");
        return;
    }
    if (f->uses_ws) sb_puts(out, "    char *fc_ws = (char *)workspace;\n");
    if (f->uses_saved)
        sb_puts(out, f->backward ? "    const char *fc_saved = (const char *)saved;\n" : "    char *fc_saved = (char *)saved;\n");
    int nkernel_launches = 0;
    for (int l = 0; l < p->launches.len; l++) nkernel_launches += !p->kernels.data[p->launches.data[l].kernel]->library;
    if (nkernel_launches || f->any_status) sb_puts(out, "    cudaError_t fc_e;\n");
    if (f->any_sync) {
        sb_printf(out, "    unsigned int *fc_sync = (unsigned int *)(fc_ws + %lld);\n", (long long)f->status_off + 4);
        sb_puts(out, "    fc_e = cudaMemsetAsync(fc_sync, 0, sizeof(unsigned int), stream);\n    if (fc_e != cudaSuccess) return 7;\n");
    }
    if (f->any_status) {
        sb_printf(out, "    int *fc_status = (int *)(fc_ws + %lld);\n", (long long)f->status_off);
        sb_puts(out, "    fc_e = cudaMemsetAsync(fc_status, 0, sizeof(int), stream);\n    if (fc_e != cudaSuccess) return 7;\n");
    }
    if (!p->launches.len && !f->any_status) sb_puts(out, "    (void)stream;\n");
    for (int l = 0; l < p->launches.len; l++) {
        const KirLaunch *la = &p->launches.data[l];
        const KirKernel *k = p->kernels.data[la->kernel];
        if (k->library) {
            const KirGemm *g = &k->gemm;
            FcDtype ab = kir_gemm_ab_dtype(g);
            sb_printf(out, "    if (fc_lt_gemm(stream, %s, %s, %d, %d, %lldLL, %lldLL, %lldLL, %lldLL, %lldLL, %lldLL, %lldLL",
                      g->dtype == FC_F64 ? "CUDA_R_64F" : "CUDA_R_32F",
                      ab == FC_F64 ? "CUDA_R_64F" : ab == FC_BF16 ? "CUDA_R_16BF" : ab == FC_F16 ? "CUDA_R_16F" : "CUDA_R_32F",
                      g->trans_a, g->trans_b, (long long)g->m, (long long)g->n, (long long)g->k,
                      (long long)g->batch, (long long)g->stride_a, (long long)g->stride_b, (long long)g->stride_c);
            for (int i = 0; i < 3; i++) {
                sb_puts(out, ", ");
                put_buffer_arg(out, a, f, &p->buffers.data[la->args[i]], true);
            }
            sb_printf(out, ") != 0) return 7; /* %s%s */\n", f->prefix, k->name);
            continue;
        }
        int64_t dyn = cg_cuda_dynamic_shared(k);
        if (dyn > CG_MAX_STATIC_SHARED)   /* once per process: allow the kernel its dynamic shared memory */
            sb_printf(out, "    static const cudaError_t fc_attr_%d = cudaFuncSetAttribute(%s%s, "
                           "cudaFuncAttributeMaxDynamicSharedMemorySize, %lld);\n"
                           "    if (fc_attr_%d != cudaSuccess) return 7;\n",
                      l, f->prefix, k->name, (long long)dyn, l);
        sb_printf(out, "    %s%s<<<%lldu, %du, %lld, stream>>>(", f->prefix, k->name, (long long)k->grid, k->block,
                  (long long)(dyn > 0 ? dyn : 0));
        for (int i = 0; i < la->nargs; i++) {
            if (i) sb_puts(out, ", ");
            put_buffer_arg(out, a, f, &p->buffers.data[la->args[i]], false);
        }
        if (k->uses_status) sb_printf(out, "%sfc_status", la->nargs ? ", " : "");
        if (k->tail >= 0) sb_printf(out, "%sfc_sync", la->nargs || k->uses_status ? ", " : "");
        sb_puts(out, ");\n    fc_e = cudaGetLastError();\n    if (fc_e != cudaSuccess) return 7;\n");
    }
    if (f->any_status) {
        sb_puts(out, "    int fc_host_status = 0;\n"
                     "    fc_e = cudaMemcpyAsync(&fc_host_status, fc_status, sizeof(int), cudaMemcpyDeviceToHost, stream);\n"
                     "    if (fc_e != cudaSuccess) return 7;\n"
                     "    fc_e = cudaStreamSynchronize(stream);\n"
                     "    if (fc_e != cudaSuccess) return 7;\n"
                     "    return fc_host_status;\n");
    } else {
        sb_puts(out, "    return 0;\n");
    }
    sb_puts(out, "}\n");
}

static const char lt_gemm_text[] =
    "/* C = A @ B, row-major, `batch` products `s*` elements apart (0: shared), through\n"
    " * cuBLASLt: as column-major, C^T = B^T A^T, so cuBLASLt's A is our B and its B our A.\n"
    " * C is of type dt (f32 or f64, the accumulation's too); A and B of abt: dt, or bf16/f16\n"
    " * with f32 C (the tensor cores' products, accumulated in f32). */\n"
    "static int fc_lt_gemm(cudaStream_t stream, cudaDataType_t dt, cudaDataType_t abt, int ta, int tb,\n"
    "                      long long m, long long n, long long k, long long batch, long long sa,\n"
    "                      long long sb, long long sc, const void *A, const void *B, void *C)\n"
    "{\n"
    "    static cublasLtHandle_t handle = 0;\n"
    "    static const bool have = cublasLtCreate(&handle) == CUBLAS_STATUS_SUCCESS;\n"
    "    if (!have) return 7;\n"
    "    const bool f64 = dt == CUDA_R_64F;\n"
    "    const cublasComputeType_t ct = f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;\n"
    "    const cublasOperation_t opa = tb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = ta ? CUBLAS_OP_T : CUBLAS_OP_N;\n"
    "    const int32_t nbatch = (int32_t)batch;\n"
    "    const int64_t stride_a = sb, stride_b = sa, stride_c = sc;\n"
    "    const double one64 = 1.0, zero64 = 0.0;\n"
    "    const float one32 = 1.0f, zero32 = 0.0f;\n"
    "    cublasLtMatmulDesc_t op = 0;\n"
    "    cublasLtMatrixLayout_t la = 0, lb = 0, lc = 0;\n"
    "    int rc = 7;\n"
    "    if (cublasLtMatmulDescCreate(&op, ct, dt) == CUBLAS_STATUS_SUCCESS &&\n"
    "        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa) == CUBLAS_STATUS_SUCCESS &&\n"
    "        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb) == CUBLAS_STATUS_SUCCESS &&\n"
    "        cublasLtMatrixLayoutCreate(&la, abt, (uint64_t)(tb ? k : n), (uint64_t)(tb ? n : k), (int64_t)(tb ? k : n)) == CUBLAS_STATUS_SUCCESS &&\n"
    "        cublasLtMatrixLayoutCreate(&lb, abt, (uint64_t)(ta ? m : k), (uint64_t)(ta ? k : m), (int64_t)(ta ? m : k)) == CUBLAS_STATUS_SUCCESS &&\n"
    "        cublasLtMatrixLayoutCreate(&lc, dt, (uint64_t)n, (uint64_t)m, (int64_t)n) == CUBLAS_STATUS_SUCCESS &&\n"
    "        cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &nbatch, sizeof nbatch) == CUBLAS_STATUS_SUCCESS &&\n"
    "        cublasLtMatrixLayoutSetAttribute(lb, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &nbatch, sizeof nbatch) == CUBLAS_STATUS_SUCCESS &&\n"
    "        cublasLtMatrixLayoutSetAttribute(lc, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &nbatch, sizeof nbatch) == CUBLAS_STATUS_SUCCESS &&\n"
    "        cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride_a, sizeof stride_a) == CUBLAS_STATUS_SUCCESS &&\n"
    "        cublasLtMatrixLayoutSetAttribute(lb, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride_b, sizeof stride_b) == CUBLAS_STATUS_SUCCESS &&\n"
    "        cublasLtMatrixLayoutSetAttribute(lc, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride_c, sizeof stride_c) == CUBLAS_STATUS_SUCCESS &&\n"
    "        cublasLtMatmul(handle, op, f64 ? (const void *)&one64 : (const void *)&one32, B, la, A, lb,\n"
    "                       f64 ? (const void *)&zero64 : (const void *)&zero32, C, lc, C, lc, 0, 0, 0, stream) == CUBLAS_STATUS_SUCCESS)\n"
    "        rc = 0;\n"
    "    if (lc) cublasLtMatrixLayoutDestroy(lc);\n"
    "    if (lb) cublasLtMatrixLayoutDestroy(lb);\n"
    "    if (la) cublasLtMatrixLayoutDestroy(la);\n"
    "    if (op) cublasLtMatmulDescDestroy(op);\n"
    "    return rc;\n"
    "}\n\n";

/* The comment's list of the block's inputs and outputs (and in training their gradients). */
static void put_arg_lines(StrBuf *out, const Aot *a) {
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < a->nio; i++) {
            if (a->io[i].is_output != (pass == 1)) continue;
            sb_printf(out, " *   %s%d  ", pass ? "out" : "in", a->arg_of[i]);
            put_shape(out, a->io[i].dtype, &a->io[i].shape);
            sb_puts(out, "  ");
            put_comment_text(out, a->io[i].name, 100);
            sb_puts(out, pass ? "  (output)\n" : "  (input)\n");
        }
    if (a->nio == 0) sb_puts(out, " *   (none)\n");
    for (int pass = 0; pass < 2 && a->train; pass++)
        for (int i = 0; i < a->nio; i++) {
            if (a->io[i].is_output != (pass == 0) || !ir_dtype_is_float(a->io[i].dtype)) continue;
            sb_printf(out, " *   grad_%s%d  ", pass ? "in" : "out", a->arg_of[i]);
            put_shape(out, a->io[i].dtype, &a->io[i].shape);
            sb_puts(out, "  the gradient of ");
            put_comment_text(out, a->io[i].name, 100);
            sb_puts(out, pass ? "  (backward output)\n" : "  (backward input)\n");
        }
}

static const char status_text[] =
    " *   f16/bf16 are passed as their 16-bit patterns (unsigned short), f8 as bytes, bool as\n"
    " *   one byte 0/1, i8 as signed char. Inputs and outputs must not overlap each other or the\n"
    " *   workspace.\n"
    " *\n * Both functions return 0 on success, else an FcStatus code:\n"
    " *   2  a NULL tensor pointer, or a workspace too small, NULL or misaligned\n"
    " *   7  a CUDA call or a kernel launch failed (cudaGetLastError after each launch)\n"
    " *   9  bad data found while running (e.g. a gather index out of range); the outputs\n"
    " *      are unspecified then (no access outside a tensor is made)\n"
    " *  10  a kernel's grid exceeds CUDA's limit of 2^31-1 blocks\n";

/* The comment at the top of a training unit, after the signatures. */
/* The f8 state argument's lines of the interface comment (none without it). */
static void put_fp8_comment(StrBuf *out, const Aot *a, const char *entry) {
    if (!a->fp8_floats) return;
    sb_printf(out, " *   fp8_state: --precision f8's delayed scaling (%lld floats, %lld f8 tensors): the\n"
                   " *              scales and amax histories, kept from call to call; make it once with\n"
                   " *              fusec_%s_fp8_state_init(fp8_state, stream) (every scale 1, no history).\n"
                   " *              Each forward first sets every scale from the history, then records its\n"
                   " *              amaxes (a backward reads its forward's scales); run a call or a few to\n"
                   " *              calibrate before the calls that count.\n",
              (long long)a->fp8_floats, (long long)(a->fp8_floats / KIR_FP8_STRIDE), entry);
    bool io8 = false;
    for (int i = 0; i < a->nio; i++) io8 |= a->io[i].fp8_slot >= 0;
    if (io8)
        sb_printf(out, " *              The f8 inputs and outputs carry a scale (element q is the value\n"
                       " *              q / scale): before a call give each input's with\n"
                       " *              fusec_%s_fp8_set_input_scale(fp8_state, INPUT, scale, stream); after\n"
                       " *              it read each output's with fusec_%s_fp8_output_scale(fp8_state,\n"
                       " *              OUTPUT, &scale, stream) (it waits for the stream).\n", entry, entry);
}

/* --precision f8 at the interface: the host functions that set an input's scale in the state and
 * read an output's (their slots; the block's own inputs and outputs, in and out numbers). */
static void put_fp8_io_fns(StrBuf *out, const Aot *a, const char *entry) {
    bool io8 = false;
    for (int i = 0; i < a->nio; i++) io8 |= a->io[i].fp8_slot >= 0;
    if (!io8) return;
    for (int pass = 0; pass < 2; pass++) {
        sb_printf(out, pass ? "extern \"C\" int fusec_%s_fp8_output_scale(const float *fp8_state, int output, float *scale, "
                              "cudaStream_t stream)\n{\n    int slot = -1;\n    if (!fp8_state || !scale) return 2;\n"
                            : "extern \"C\" int fusec_%s_fp8_set_input_scale(float *fp8_state, int input, float scale, "
                              "cudaStream_t stream)\n{\n    int slot = -1;\n    if (!fp8_state) return 2;\n", entry);
        sb_printf(out, "    switch (%s) {\n", pass ? "output" : "input");
        for (int i = 0; i < a->nio; i++)
            if (a->io[i].is_output == (pass == 1) && a->io[i].fp8_slot >= 0)
                sb_printf(out, "    case %d: slot = %d; break;\n", a->arg_of[i], a->io[i].fp8_slot);
        sb_puts(out, "    default: return 2;\n    }\n");
        if (pass)
            sb_printf(out, "    if (cudaMemcpyAsync(scale, fp8_state + (size_t)slot * %d, sizeof *scale, cudaMemcpyDeviceToHost, stream) != "
                           "cudaSuccess) return 7;\n    return cudaStreamSynchronize(stream) == cudaSuccess ? 0 : 7;\n}\n\n",
                      KIR_FP8_STRIDE);
        else   /* a power of two in [2^-126, 2^126], as fc_tensor_set_scale takes */
            sb_printf(out, "    int e = 0;\n    if (!(scale > 0.0f) || frexpf(scale, &e) != 0.5f || e < -125 || e > 127) return 2;\n"
                           "    static float s[%d];\n    s[slot] = scale;\n"
                           "    return cudaMemcpyAsync(fp8_state + (size_t)slot * %d, &s[slot], sizeof scale, cudaMemcpyHostToDevice, stream) "
                           "== cudaSuccess ? 0 : 7;\n}\n\n", (int)(a->fp8_floats / KIR_FP8_STRIDE), KIR_FP8_STRIDE);
    }
}

static void put_train_comment(StrBuf *out, const Aot *a, const AotFn *fw, const AotFn *bw, const char *entry) {
    sb_puts(out, " *\n * Arguments:\n");
    put_arg_lines(out, a);
    put_fp8_comment(out, a, entry);
    sb_printf(out, " *   saved: at least fusec_%s_saved_bytes() bytes (%lld), 256-byte aligned (cudaMalloc memory\n"
                   " *          is); may be NULL when that size is 0. The forward writes it, its backward reads it.\n",
              entry, (long long)a->saved_bytes);
    sb_printf(out, " *   workspace: at least fusec_%s_workspace_size() bytes (%lld) for the forward and\n"
                   " *              fusec_%s_backward_workspace_size() bytes (%lld) for the backward, 256-byte\n"
                   " *              aligned (cudaMalloc memory is); may be NULL when that size is 0. Nothing in it\n"
                   " *              is kept from one call to the next: one workspace of the larger size serves both.\n",
              entry, (long long)fw->need, entry, (long long)bw->need);
    sb_puts(out, " *   f16/bf16 are passed as their 16-bit patterns (unsigned short), f8 as bytes, bool as\n"
                 " *   one byte 0/1, i8 as signed char. No two of the tensors, `saved` and the workspace\n"
                 " *   may overlap.\n"
                 " *   The backward writes (does not accumulate into) the gradient of every float input.\n"
                 " *\n * The backward reads these values of its forward, which the caller keeps unchanged from\n"
                 " * the forward until the backward has run:\n");
    int listed = 0;
    for (int m = 0; m < bw->npin; m++) {
        CgArg x = bw->in[m];
        const CgIoDesc *d = arg_desc(a, x);
        if (x.kind == CG_ARG_GRAD_OUTPUT) continue;
        listed++;
        if (x.kind == CG_ARG_SAVED) sb_printf(out, " *   saved + %lld  ", (long long)a->saved_off[x.index]);
        else {
            sb_puts(out, " *   ");
            put_arg_name(out, x);
            sb_puts(out, "  ");
        }
        put_shape(out, d->dtype, &d->shape);
        sb_puts(out, "  ");
        put_comment_text(out, d->name, 100);
        sb_puts(out, x.kind == CG_ARG_SAVED ? "  (written by the forward)\n" : x.kind == CG_ARG_INPUT
                                                                                 ? "  (an input, passed again)\n"
                                                                                 : "  (an output, passed again)\n");
    }
    if (!listed) sb_puts(out, " *   (nothing)\n");
    sb_puts(out, " *\n * Every function returns 0 on success, else an FcStatus code:\n"
                 " *   2  a NULL tensor pointer, `saved` NULL or misaligned, or a workspace too small, NULL\n"
                 " *      or misaligned\n"
                 " *   7  a CUDA call or a kernel launch failed (cudaGetLastError after each launch)\n"
                 " *   9  bad data found while running (e.g. a gather index out of range); the outputs\n"
                 " *      are unspecified then (no access outside a tensor is made)\n"
                 " *  10  a kernel's grid exceeds CUDA's limit of 2^31-1 blocks\n"
                 " * The forward and the backward run asynchronously on `stream` (run a backward on the\n"
                 " * stream of its forward, or after it has finished)");
    if (fw->any_status || bw->any_status)
        sb_printf(out, ";\n * %s then synchronize%s it to read the status word kept at the end of the workspace",
                  fw->any_status && bw->any_status ? "both" : fw->any_status ? "the forward" : "the backward",
                  fw->any_status && bw->any_status ? "" : "s");
}

/* The unit of the n entry points fns (1: the forward; 2: training's forward and backward). */
static FcStatus put_aot(Aot *a, AotFn *fns, int n, const char *entry, StrBuf *out, FcErr *err) {
    bool any_gemm = false;
    for (int i = 0; i < n; i++)
        for (int b = 0; b < fns[i].p->buffers.len; b++)
            if (fns[i].p->buffers.data[b].kind == KIR_BUF_STATE) a->fp8_floats = fns[i].p->buffers.data[b].numel;
    for (int i = 0; i < n; i++) {
        FC_TRY(aot_check(a, &fns[i], err));
        any_gemm |= fns[i].any_gemm;
    }
    const AotFn *fw = &fns[0], *bw = n > 1 ? &fns[1] : NULL;

    /* ---- the comment at the top ---- */
    sb_puts(out, "/* CUDA C++ generated by fusec " FUSEC_VERSION " for block ");
    put_comment_text(out, fw->p->block_name, 80);
    sb_printf(out, ": an ahead-of-time unit%s.\n *\n * Interface (all pointers are device pointers to dense row-major tensors):\n",
              bw ? " for training" : "");
    sb_printf(out, " *   extern \"C\" int fusec_%s_workspace_size(size_t *bytes);\n", entry);
    if (bw) sb_printf(out, " *   extern \"C\" int fusec_%s_saved_bytes(size_t *bytes);\n", entry);
    if (a->fp8_floats)
        sb_printf(out, " *   extern \"C\" int fusec_%s_fp8_state_size(size_t *bytes);\n"
                       " *   extern \"C\" int fusec_%s_fp8_state_init(float *fp8_state, cudaStream_t stream);\n", entry, entry);
    sb_printf(out, " *   extern \"C\" int fusec_%s_forward(", entry);
    put_params(out, a, false, ",\n *           ");
    sb_puts(out, ");\n");
    if (bw) {
        sb_printf(out, " *   extern \"C\" int fusec_%s_backward_workspace_size(size_t *bytes);\n", entry);
        sb_printf(out, " *   extern \"C\" int fusec_%s_backward(", entry);
        put_params(out, a, true, ",\n *           ");
        sb_puts(out, ");\n");
        put_train_comment(out, a, fw, bw, entry);
    } else {
        sb_puts(out, " *\n * Arguments:\n");
        put_arg_lines(out, a);
        put_fp8_comment(out, a, entry);
        sb_printf(out, " *   workspace: at least fusec_%s_workspace_size() bytes (%lld), 256-byte aligned\n"
                       " *              (cudaMalloc memory is); may be NULL when that size is 0.\n", entry, (long long)fw->need);
        sb_puts(out, status_text);
        sb_puts(out, " * The forward runs asynchronously on `stream`");
        if (fw->any_status) sb_puts(out, ", then synchronizes it to read the status word\n * kept at the end of the workspace");
    }
    sb_puts(out, ".\n *\n * Build: nvcc -arch=sm_90 -c this.cu -o this.o; link with -lcudart");
    if (any_gemm) sb_puts(out, " -lcublasLt\n * (matrix products run through cuBLASLt; a cuBLASLt failure returns 7)");
    sb_puts(out, "\n * (nvcc links cudart by default). Its kernels alone also compile under NVRTC. */\n");
    sb_puts(out, "#if !defined(__CUDACC_RTC__)\n#include <cuda_runtime.h>\n");
    if (any_gemm) sb_puts(out, "#include <cublasLt.h>\n");
    sb_puts(out, "#endif\n\n");

    const KirProgram *ps[2];
    const char *prefixes[2];
    for (int i = 0; i < n; i++) ps[i] = fns[i].p, prefixes[i] = fns[i].prefix;
    FC_TRY(put_kernels_of(ps, prefixes, n, a->train, out, err));

    /* ---- host code ---- */
    sb_puts(out, "\n#if !defined(__CUDACC_RTC__)\n");
    if (any_gemm) sb_puts(out, lt_gemm_text);
    for (int i = 0; i < n; i++) {
        const AotFn *f = &fns[i];
        const char *ws_fn = f->backward ? "backward_workspace_size" : "workspace_size";
        if (f->backward) sb_puts(out, "\n");
        sb_printf(out, "extern \"C\" int fusec_%s_%s(size_t *bytes)\n{\n"
                       "    if (!bytes) return 2;\n    *bytes = (size_t)%lldULL;\n    return 0;\n}\n\n",
                  entry, ws_fn, (long long)f->need);
        if (a->fp8_floats && !f->backward) {
            sb_printf(out, "extern \"C\" int fusec_%s_fp8_state_size(size_t *bytes)\n{\n"
                           "    if (!bytes) return 2;\n    *bytes = (size_t)%lldULL;\n    return 0;\n}\n\n",
                      entry, (long long)(a->fp8_floats * 4));
            /* every slot [scale 1, amax 0, history 0...] (kir.h KIR_BUF_STATE) */
            sb_printf(out, "extern \"C\" int fusec_%s_fp8_state_init(float *fp8_state, cudaStream_t stream)\n{\n"
                           "    static float init[%lld];\n    if (!fp8_state) return 2;\n"
                           "    for (int k = 0; k < %lld; k++) init[k * %d] = 1.0f;\n"
                           "    return cudaMemcpyAsync(fp8_state, init, sizeof init, cudaMemcpyHostToDevice, stream) == cudaSuccess ? 0 : 7;\n}\n\n",
                      entry, (long long)a->fp8_floats, (long long)(a->fp8_floats / KIR_FP8_STRIDE), KIR_FP8_STRIDE);
            put_fp8_io_fns(out, a, entry);
        }
        if (bw && !f->backward)
            sb_printf(out, "extern \"C\" int fusec_%s_saved_bytes(size_t *bytes)\n{\n"
                           "    if (!bytes) return 2;\n    *bytes = (size_t)%lldULL;\n    return 0;\n}\n\n",
                      entry, (long long)a->saved_bytes);
        sb_printf(out, "extern \"C\" int fusec_%s_%s(", entry, f->backward ? "backward" : "forward");
        put_params(out, a, f->backward, ", ");
        sb_puts(out, ")\n{\n");
        put_null_checks(out, a, f->backward);
        if (bw && a->saved_bytes > 0) sb_puts(out, "    if (!saved || ((size_t)saved & 255u) != 0) return 2;\n");
        else if (bw) sb_puts(out, "    (void)saved;\n");
        put_entry_body(out, a, f);
    }
    sb_puts(out, "#endif\n");
    if (out->failed) return FC_OOM(err);
    return FC_OK;
}

FcStatus cg_cuda_aot(const KirProgram *p, const char *entry, const CgIoDesc *io, int nio,
                     StrBuf *out, FcErr *err) {
    FC_CHECK(err, p && out && (io || nio == 0) && nio >= 0);
    if (!c_ident(entry))
        return fc_err_set(err, FC_ERR_USAGE, "cuda codegen: the entry name is not a C identifier");
    Aot a;
    FcStatus st = aot_init(&a, io, nio, NULL, 0, err);
    /* inputs and outputs: argument names in0.., out0.. in declaration order, bound one to one */
    AotFn f = {.p = p, .prefix = "", .npin = a.nin, .npout = a.nout};
    CgArg *in = fc_calloc((size_t)a.nin + 1, sizeof *in), *outs = fc_calloc((size_t)a.nout + 1, sizeof *outs);
    if (st == FC_OK && (!in || !outs)) st = FC_OOM(err);
    if (st == FC_OK) {
        for (int i = 0; i < a.nin; i++) in[i] = (CgArg){CG_ARG_INPUT, i};
        for (int j = 0; j < a.nout; j++) outs[j] = (CgArg){CG_ARG_OUTPUT, j};
        f.in = in;
        f.out = outs;
        st = put_aot(&a, &f, 1, entry, out, err);
    }
    fc_free(in);
    fc_free(outs);
    aot_free(&a);
    return st;
}

FcStatus cg_cuda_aot_train(const KirProgram *fwd, const CgTrain *t, const char *entry, const CgIoDesc *io, int nio,
                           StrBuf *out, FcErr *err) {
    FC_CHECK(err, fwd && t && t->bwd && out && (io || nio == 0) && nio >= 0 && t->nsaved >= 0 &&
                      (t->saved || t->nsaved == 0) && t->nbwd_in >= 0 && (t->bwd_in || t->nbwd_in == 0) &&
                      t->nbwd_out >= 0 && (t->bwd_out || t->nbwd_out == 0));
    if (!c_ident(entry))
        return fc_err_set(err, FC_ERR_USAGE, "cuda codegen: the entry name is not a C identifier");
    Aot a;
    FcStatus st = aot_init(&a, io, nio, t->saved, t->nsaved, err);
    a.train = true;
    AotFn f[2] = {{.p = fwd, .prefix = "", .npin = a.nin, .npout = a.nout + t->nsaved},
                  {.p = t->bwd, .prefix = "bwd_", .in = t->bwd_in, .npin = t->nbwd_in, .npout = t->nbwd_out,
                   .backward = true}};
    CgArg *in = fc_calloc((size_t)a.nin + 1, sizeof *in), *outs = fc_calloc((size_t)f[0].npout + 1, sizeof *outs);
    CgArg *grads = fc_calloc((size_t)t->nbwd_out + 1, sizeof *grads);
    if (st == FC_OK && (!in || !outs || !grads)) st = FC_OOM(err);
    if (st == FC_OK) {
        /* the forward writes the block's outputs, then the saved buffers */
        for (int i = 0; i < a.nin; i++) in[i] = (CgArg){CG_ARG_INPUT, i};
        for (int j = 0; j < f[0].npout; j++) outs[j] = j < a.nout ? (CgArg){CG_ARG_OUTPUT, j} : (CgArg){CG_ARG_SAVED, j - a.nout};
        f[0].in = in;
        f[0].out = outs;
        /* the backward reads inputs, outputs, saved buffers and the float outputs' gradients, and
         * writes each float input's gradient once */
        for (int m = 0; m < t->nbwd_in && st == FC_OK; m++) {
            CgArg x = t->bwd_in[m];
            const CgIoDesc *d = x.kind != CG_ARG_GRAD_INPUT ? arg_desc(&a, x) : NULL;
            if (!d || (x.kind == CG_ARG_GRAD_OUTPUT && !ir_dtype_is_float(d->dtype)))
                st = fc_err_set(err, FC_ERR_INTERNAL, "cuda codegen: backward input %d has no argument", m);
        }
        for (int m = 0; m < t->nbwd_out && st == FC_OK; m++) {
            grads[m] = (CgArg){CG_ARG_GRAD_INPUT, t->bwd_out[m]};
            const CgIoDesc *d = arg_desc(&a, grads[m]);
            for (int m2 = 0; m2 < m && d; m2++)
                if (t->bwd_out[m2] == t->bwd_out[m]) d = NULL;
            if (!d || !ir_dtype_is_float(d->dtype))
                st = fc_err_set(err, FC_ERR_INTERNAL, "cuda codegen: backward output %d is not the gradient of a float input", m);
        }
        int nfloat = 0;
        for (int i = 0; i < nio; i++) nfloat += !io[i].is_output && ir_dtype_is_float(io[i].dtype);
        if (st == FC_OK && nfloat != t->nbwd_out)
            st = fc_err_set(err, FC_ERR_INTERNAL, "cuda codegen: %d backward outputs for %d float inputs", t->nbwd_out, nfloat);
        f[1].out = grads;
        if (st == FC_OK) st = put_aot(&a, f, 2, entry, out, err);
    }
    fc_free(in);
    fc_free(outs);
    fc_free(grads);
    aot_free(&a);
    return st;
}
