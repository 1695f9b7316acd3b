/* llvm.c: the kernel IR as LLVM IR for the CPU backend (entry points cg_llvm_module and
 * cg_llvm_text, see codegen.h; the mapping is written up in docs/cpu.md).
 *
 * Each KirKernel K becomes two functions:
 *   void @K(ptr params, i64 block_begin, i64 block_end, ptr status)      (external)
 *       loads the buffer pointers params[0..n) once (invariant loads) and calls
 *   void @K.body(ptr noalias p0, ..., i64 block_begin, i64 block_end, ptr status)  (internal)
 *       which runs blocks [block_begin, block_end) one after the other.
 * A kernel with a tail (kir.h) also gets @K.tail, the same wrapper around @K.tail.body, which
 * runs the tail list once; the runtime calls it after the grid.
 * The `noalias` parameters give every buffer its own alias scope after inlining, which is
 * what lets the loop vectorizer work on thread loops. They are dropped for a kernel that some
 * launch binds to overlapping buffers.
 *
 * Execution model on the CPU (kir.h): block-uniform statements run once per block; a
 * KIR_LOOP_THREADS loop is a plain loop over [lo, hi); a thread loop that touches a thread
 * array is split into rounds of `block` iterations so that iteration i uses thread slot
 * (i - lo) % block; KS_BARRIER emits nothing; KS_REDUCE keeps `block` per-thread partials
 * (thread t accumulates iterations lo+t, lo+t+block, ... in order; `lanes` of them and a
 * stride of `lanes` where the statement has KirStmt.lanes) and combines them with
 * the fixed tree of docs/cpu.md. Shared and thread arrays are allocas of the body function.
 * KS_ERROR sets a per-statement flag; at the end of the chunk the first flag that fired (in
 * statement order) is stored to *status with a compare-exchange from 0 (sticky). KS_AMAX
 * keeps a per-statement i32 maximum of the magnitudes' bits over the chunk, merged at the end
 * of the chunk into its element with an `atomicrmw umax` (chunks run concurrently).
 *
 * Storage conversions (f16, bf16, f8e4m3, f8e5m2 <-> f32) are small always-inline helper
 * functions written below as LLVM IR text, parsed into the module before the kernels are
 * built: integer bit manipulation, round to nearest even, f8 saturating.
 *
 * Invariants: every name in the module is generated here (kernel names are checked to be
 * plain identifiers that clash with nothing); the module is verified before it is returned;
 * nothing is decided here that the kernel IR does not say.
 */
#include "codegen.h"
#include "vecmath_consts.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/DebugInfo.h>
#include <llvm-c/IRReader.h>
#include <llvm-c/Target.h>

#include <stdio.h>
#include <string.h>

/* Per-block scratch (shared arrays, thread arrays, reduction partials) lives on the stack of
 * the thread running the block; the runtime gives its workers stacks well above this. */
#define CG_SCRATCH_LIMIT ((int64_t)4 << 20)

/* ---- storage conversion helpers (LLVM IR text) ------------------------------------------- */
static const char *const helper_ir[] = {
    /* f32 -> f16: RNE, overflow to inf, NaN -> quiet NaN with the sign. Normal results (|x| >=
     * 2^-14): RNE on 13 bits in one add, as bf16's (a carry bumps the exponent, up to inf),
     * rebased from f32's exponent bias to f16's. Subnormal ones: |x| + 0.5 in f32 rounds |x| to
     * a multiple of 2^-24 (RNE, the adder's), whose count is then the low bits; 2^-14 itself
     * comes out as 0x400, the smallest normal. Only constant shifts (no variable shift, which
     * SSE cannot vectorize: 8x slower than f32 at x86-64-v2), as the f8 stores; with F16C
     * runtime/cpu.c replaces it by vcvtps2ph. */
    "define internal i16 @fc_f32_to_f16(float %f) #0 {\n",
    "  %b = bitcast float %f to i32\n",
    "  %a = and i32 %b, 2147483647\n",
    "  %sh = lshr i32 %b, 16\n",
    "  %sign = and i32 %sh, 32768\n",
    "  %q = lshr i32 %a, 13\n",
    "  %odd = and i32 %q, 1\n",
    "  %bias = add i32 %odd, 4095\n",
    "  %sum = add i32 %a, %bias\n",
    "  %r = lshr i32 %sum, 13\n",
    "  %rn = add i32 %r, -114688\n",
    "  %af = bitcast i32 %a to float\n",
    "  %half = fadd float %af, 0.5\n",
    "  %hb = bitcast float %half to i32\n",
    "  %rs = add i32 %hb, -1056964608\n",
    "  %isn = icmp uge i32 %a, 947912704\n",
    "  %r1 = select i1 %isn, i32 %rn, i32 %rs\n",
    "  %big = icmp uge i32 %a, 1199566848\n",
    "  %r2 = select i1 %big, i32 31744, i32 %r1\n",
    "  %nan = fcmp uno float %f, %f\n",
    "  %r3 = select i1 %nan, i32 32256, i32 %r2\n",
    "  %r4 = or i32 %r3, %sign\n",
    "  %h = trunc i32 %r4 to i16\n",
    "  ret i16 %h\n",
    "}\n",
    /* f32 -> bf16: RNE, overflow to inf, NaN stays NaN (quiet bit set). Adding 0x7FFF plus the
     * kept part's lowest bit rounds to nearest even in one add: a tie (low half 0x8000) carries
     * only when the kept part is odd; a carry out of the significand bumps the exponent, up to
     * inf. Only constant shifts, so it vectorizes on every x86 level. */
    "define internal i16 @fc_f32_to_bf16(float %f) #0 {\n",
    "  %b = bitcast float %f to i32\n",
    "  %q = lshr i32 %b, 16\n",
    "  %odd = and i32 %q, 1\n",
    "  %bias = add i32 %odd, 32767\n",
    "  %sum = add i32 %b, %bias\n",
    "  %r = lshr i32 %sum, 16\n",
    "  %qn = or i32 %q, 64\n",
    "  %nan = fcmp uno float %f, %f\n",   /* one vcmpunordps (docs/cpu.md) */
    "  %r2 = select i1 %nan, i32 %qn, i32 %r\n",
    "  %h = trunc i32 %r2 to i16\n",
    "  ret i16 %h\n",
    "}\n",
    /* KE_ROUND to bf16, f32 to f32: the value the store and then the load above give, bit
     * for bit (NaN payloads included), without going through the code. bf16 shares f32's
     * exponent range, so RNE on the bits in one add serves subnormals too and carries into
     * inf. (The f8 types' stores and roundings: f8_helpers below.) */
    "define internal float @fc_round_bf16(float %f) #0 {\n",
    "  %b = bitcast float %f to i32\n",
    "  %q = lshr i32 %b, 16\n",
    "  %odd = and i32 %q, 1\n",
    "  %bias = add i32 %odd, 32767\n",
    "  %sum = add i32 %b, %bias\n",
    "  %r = and i32 %sum, -65536\n",
    "  %hi = and i32 %b, -65536\n",
    "  %qn = or i32 %hi, 4194304\n",
    "  %nan = fcmp uno float %f, %f\n",
    "  %r2 = select i1 %nan, i32 %qn, i32 %r\n",
    "  %o = bitcast i32 %r2 to float\n",
    "  ret float %o\n",
    "}\n",
    /* loads: exact */
    "define internal float @fc_f16_to_f32(i16 %h) #0 {\n",
    "  %x = zext i16 %h to i32\n",
    "  %s = and i32 %x, 32768\n",
    "  %sign = shl i32 %s, 16\n",
    "  %em = and i32 %x, 32767\n",
    "  %e = and i32 %x, 31744\n",
    "  %m = and i32 %x, 1023\n",
    "  %nb0 = shl i32 %em, 13\n",
    "  %nb = add i32 %nb0, 939524096\n",
    "  %ib = or i32 %nb0, 2139095040\n",
    "  %isinf = icmp eq i32 %e, 31744\n",
    "  %r1 = select i1 %isinf, i32 %ib, i32 %nb\n",
    "  %mf = uitofp i32 %m to float\n",
    "  %sf = fmul float %mf, 0x3E70000000000000\n",
    "  %sb = bitcast float %sf to i32\n",
    "  %sub = icmp eq i32 %e, 0\n",
    "  %r2 = select i1 %sub, i32 %sb, i32 %r1\n",
    "  %r3 = or i32 %r2, %sign\n",
    "  %f = bitcast i32 %r3 to float\n",
    "  ret float %f\n",
    "}\n",
    "define internal float @fc_bf16_to_f32(i16 %h) #0 {\n",
    "  %x = zext i16 %h to i32\n",
    "  %b = shl i32 %x, 16\n",
    "  %f = bitcast i32 %b to float\n",
    "  ret float %f\n",
    "}\n",
    "define internal float @fc_e4m3_to_f32(i8 %h) #0 {\n",
    "  %x = zext i8 %h to i32\n",
    "  %s = and i32 %x, 128\n",
    "  %sign = shl i32 %s, 24\n",
    "  %em = and i32 %x, 127\n",
    "  %e = and i32 %x, 120\n",
    "  %m = and i32 %x, 7\n",
    "  %nb0 = shl i32 %em, 20\n",
    "  %nb = add i32 %nb0, 1006632960\n",
    "  %mf = uitofp i32 %m to float\n",
    "  %sf = fmul float %mf, 0x3F60000000000000\n",
    "  %sb = bitcast float %sf to i32\n",
    "  %sub = icmp eq i32 %e, 0\n",
    "  %r1 = select i1 %sub, i32 %sb, i32 %nb\n",
    "  %nan = icmp eq i32 %em, 127\n",
    "  %r2 = select i1 %nan, i32 2143289344, i32 %r1\n",
    "  %r3 = or i32 %r2, %sign\n",
    "  %f = bitcast i32 %r3 to float\n",
    "  ret float %f\n",
    "}\n",
    "define internal float @fc_e5m2_to_f32(i8 %h) #0 {\n",
    "  %x = zext i8 %h to i32\n",
    "  %s = and i32 %x, 128\n",
    "  %sign = shl i32 %s, 24\n",
    "  %em = and i32 %x, 127\n",
    "  %e = and i32 %x, 124\n",
    "  %m = and i32 %x, 3\n",
    "  %nb0 = shl i32 %em, 21\n",
    "  %nb = add i32 %nb0, 939524096\n",
    "  %ib = or i32 %nb0, 2139095040\n",
    "  %isinf = icmp eq i32 %e, 124\n",
    "  %r1 = select i1 %isinf, i32 %ib, i32 %nb\n",
    "  %mf = uitofp i32 %m to float\n",
    "  %sf = fmul float %mf, 0x3EF0000000000000\n",
    "  %sb = bitcast float %sf to i32\n",
    "  %sub = icmp eq i32 %e, 0\n",
    "  %r2 = select i1 %sub, i32 %sb, i32 %r1\n",
    "  %r3 = or i32 %r2, %sign\n",
    "  %f = bitcast i32 %r3 to float\n",
    "  ret float %f\n",
    "}\n",
    /* a * a - fl(a * a), exactly (the low part of a's square; ndtr): one fused multiply-add.
     * Where the target has no FMA instructions runtime/cpu.c gives it Dekker's split instead
     * (the fma would be a call to the C library's fmaf for every lane). */
    "define internal float @fc_sq_lo(float %a) #0 {\n",
    "  %h = fmul float %a, %a\n",
    "  %nh = fneg float %h\n",
    "  %l = call float @llvm.fma.f32(float %a, float %a, float %nh)\n",
    "  ret float %l\n",
    "}\n",
    "declare float @llvm.fma.f32(float, float, float)\n",
    "declare i32 @llvm.umin.i32(i32, i32)\n",
    "declare i32 @llvm.umax.i32(i32, i32)\n",
    "attributes #0 = { alwaysinline nounwind }\n"};

/* The f8 stores (f32 -> f8e4m3 / f8e5m2 code) and KE_ROUND to them (f32 -> f32: the value the
 * store and then the load give, bit for bit, NaN payloads included, without the code; an f8
 * kernel of a training block rounds at every fp8_quant it computes). Both round by the adder: with
 * m = min(|x|, max) taken on the bits (one vpminud; inf and NaN become max, a NaN is put back
 * at the end), (m + C) - C with C = 2^(e+S) for m in [2^e, 2^(e+1)) (S = 20 for E4M3's 3
 * mantissa bits, 21 for E5M2's 2: C's spacing is the type's in that binade, m + C stays in C's
 * binade, the subtraction is exact) and C at least Cmin (2^14, 128: the spacing of the type's
 * subnormals, 2^-9, 2^-16) is m rounded to nearest even, saturated. C is m's exponent bits
 * plus S (an and, an add, a vpmaxud). The store's code is then, for a normal result, the
 * rounded value's f32 bits rebased from f32's exponent bias to the type's, for a subnormal
 * one the low bits of m + Cmin (the count of the subnormal spacing); the sign and NaN (0x7F)
 * or (E5M2) inf (0x7C) after. The same bits as the integer rounding they replaced (RNE in one
 * add on 20 or 21 bits, |x| + Cmin beside it, the saturation after) on all 2^32 inputs, in
 * 17-19 operations to 20-22 for a store and 12-14 to 17-19 for a rounding; only constant
 * shifts, so they vectorize at every x86 level. */
typedef struct F8Helper {
    const char *name;       /* e4m3, e5m2 */
    unsigned maxbits;       /* the largest finite value's bits: 448, 57344 */
    unsigned cshift;        /* S << 23 */
    unsigned cminbits;      /* Cmin's bits */
    unsigned minnormal;     /* the smallest normal value's bits: 2^-6, 2^-14 */
    int mshift, rebias;     /* a normal code: (bits(r) >> mshift) - rebias */
    bool inf;               /* E5M2 keeps inf (code 0x7C) */
    unsigned qnan;          /* KE_ROUND's NaN: the load's of code 0x7F */
} F8Helper;

static const F8Helper f8_helper[2] = {
    {"e4m3", 0x43e00000u, 20u << 23, 0x46800000u, 0x3c800000u, 20, 960, false, 0x7fc00000u},
    {"e5m2", 0x47600000u, 21u << 23, 0x43000000u, 0x38800000u, 21, 448, true, 0x7fe00000u},
};

/* m, C, t = m + C and rb = bits((m + C) - C) from %a (|x|'s bits). */
static void f8_round_core(StrBuf *o, const F8Helper *h) {
    sb_printf(o,
              "  %%m = call i32 @llvm.umin.i32(i32 %%a, i32 %u)\n"
              "  %%e = and i32 %%m, 2139095040\n"
              "  %%ce = add i32 %%e, %u\n"
              "  %%c = call i32 @llvm.umax.i32(i32 %%ce, i32 %u)\n"
              "  %%mf = bitcast i32 %%m to float\n"
              "  %%cf = bitcast i32 %%c to float\n"
              "  %%t = fadd float %%mf, %%cf\n"
              "  %%r = fsub float %%t, %%cf\n"
              "  %%rb = bitcast float %%r to i32\n",
              h->maxbits, h->cshift, h->cminbits);
}

static void f8_helpers(StrBuf *o) {
    for (int k = 0; k < 2; k++) {
        const F8Helper *h = &f8_helper[k];
        sb_printf(o, "define internal i8 @fc_f32_to_%s(float %%f) #0 {\n"
                     "  %%b = bitcast float %%f to i32\n"
                     "  %%a = and i32 %%b, 2147483647\n"
                     "  %%sh = lshr i32 %%b, 24\n"
                     "  %%sign = and i32 %%sh, 128\n", h->name);
        f8_round_core(o, h);
        sb_printf(o, "  %%q = lshr i32 %%rb, %d\n"
                     "  %%rn = sub i32 %%q, %d\n"
                     "  %%tb = bitcast float %%t to i32\n"
                     "  %%rs = sub i32 %%tb, %u\n"
                     "  %%isn = icmp uge i32 %%m, %u\n"
                     "  %%r1 = select i1 %%isn, i32 %%rn, i32 %%rs\n", h->mshift, h->rebias, h->cminbits, h->minnormal);
        sb_puts(o, h->inf ? "  %inf = icmp eq i32 %a, 2139095040\n  %r2 = select i1 %inf, i32 124, i32 %r1\n"
                          : "  %r2 = or i32 %r1, 0\n");
        sb_puts(o, "  %nan = fcmp uno float %f, %f\n"
                   "  %r3 = select i1 %nan, i32 127, i32 %r2\n"
                   "  %r4 = or i32 %r3, %sign\n"
                   "  %h = trunc i32 %r4 to i8\n"
                   "  ret i8 %h\n}\n");
        sb_printf(o, "define internal float @fc_round_%s(float %%f) #0 {\n"
                     "  %%b = bitcast float %%f to i32\n"
                     "  %%a = and i32 %%b, 2147483647\n"
                     "  %%sign = xor i32 %%b, %%a\n", h->name);
        f8_round_core(o, h);
        sb_puts(o, h->inf ? "  %inf = icmp eq i32 %a, 2139095040\n  %r2 = select i1 %inf, i32 2139095040, i32 %rb\n"
                          : "  %r2 = or i32 %rb, 0\n");
        sb_printf(o, "  %%nan = fcmp uno float %%f, %%f\n"
                     "  %%r3 = select i1 %%nan, i32 %u, i32 %%r2\n"
                     "  %%r4 = or i32 %%r3, %%sign\n"
                     "  %%o = bitcast i32 %%r4 to float\n"
                     "  ret float %%o\n}\n", h->qnan);
    }
}

/* Names the backend may emit or call; a kernel may not be named like one of them. */
static const char *const reserved_names[] = {
    "tanhf", "tanh", "erff", "erf", "erfc", "expf", "exp", "logf", "log", "sinf", "sin", "cosf",
    "cos", "powf", "pow", "sqrtf", "sqrt", "floorf", "floor", "memcpy", "memset", "memmove",
    "exp2", "exp2f", "ldexp", "ldexpf", "sincos", "sincosf", "__powisf2", "__powidf2"};

/* ---- the emitter state --------------------------------------------------------------------- */
/* Streaming stores (KirParam.stream, docs/cpu.md "Non-temporal stores"): the body's copy for
 * aligned buffers marks its stream params with this attribute and `align NT_ALIGN`. */
#define NT_ATTR "fusec-stream"
enum { NT_ALIGN = 64 };
/* Prefetch ranges (see "prefetching the next block" below): an access of the next block. */
enum { PF_MAX_BYTES = 16384, PF_MAX = 32, PF_STRIP = 64, PF_DIST = 2 };
typedef struct Aff { uint64_t a, b, c; } Aff;   /* wrapping: a wrong guess only prefetches the wrong line */
typedef struct Pf { int param; bool write; Aff f; int64_t lo, hi; } Pf;
typedef struct Cg {
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;           /* code */
    LLVMBuilderRef ab;          /* allocas and their initial stores, at the end of the entry block */
    FcErr *err;
    FcStatus st;                /* first failure */
    const KirKernel *k;
    LLVMValueRef fn;            /* the body function */
    LLVMTypeRef tv, t1, t8, t16, t32, t64, tf, td, tp;
    LLVMValueRef *prm;          /* buffer base pointers (body arguments), per param */
    LLVMValueRef *var;          /* allocas, per var */
    signed char *var_level;     /* per var: 0 block-uniform, 1 per thread, -1 not declared yet */
    LLVMValueRef *sh;           /* allocas, per shared array */
    LLVMValueRef *ta;           /* allocas, per thread array ([block * count]) */
    LLVMValueRef *acc;          /* per statement: what the chunk merges when it ends (chunk_acc): the
                                 * i1 flag of a KS_ERROR, the i32 maximum of a KS_AMAX; else NULL */
    unsigned char *seen;        /* per statement: emitted already (guards against cycles) */
    LLVMValueRef *memo;         /* per expression: value emitted for statement `gen` */
    int *memo_gen;
    int gen;
    LLVMValueRef blk;           /* alloca i64: the current block index */
    LLVMValueRef slot;          /* alloca i64: the current thread slot (in split thread loops) */
    bool slot_valid;            /* inside a thread loop that was split into rounds */
    bool tail;                  /* emitting the tail's body function */
    int level;                  /* 0 at block level, 1 inside a thread loop or reduction */
    Pf pf[PF_MAX];              /* prefetch ranges of the next block */
    int pf_n;
    int pf_loop;                /* the thread loop that issues them, strip by strip (-1: at block start) */
    int64_t pf_trips;           /* its iterations (constant bounds) */
    LLVMValueRef pf_base[PF_MAX]; /* per range: its first byte in the next block */
    bool noalias;               /* the body's params are noalias (no launch binds overlapping buffers) */
    int vector_bytes;           /* KirProgram.vector_bytes */
    int pair_lane;              /* in a paired bf16 loop (pair_loop): 1 the even element, 2 the odd one */
    unsigned char *pair_load;   /* per expression: a paired bf16 load (of the loop pair_loop accepted) */
    unsigned char *pair_store;  /* per statement: a paired bf16 store */
    LLVMValueRef *pair_word;    /* per expression: the paired load's i32 word (lane 1) */
    LLVMValueRef *pair_code;    /* per statement: the even element's bf16 code of a paired store */
    LLVMValueRef *pair_addr;    /* per statement: the paired store's address (the even element) */
} Cg;

static bool failf(Cg *g, FcStatus s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool failf(Cg *g, FcStatus s, const char *fmt, ...) {
    if (g->st == FC_OK) {
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        g->st = fc_err_set(g->err, s, "llvm codegen: kernel %s: %s", g->k ? g->k->name : "?", msg);
    }
    return false;
}
#define BAD(g, ...) (failf((g), FC_ERR_INTERNAL, __VA_ARGS__), (LLVMValueRef)NULL)

static bool is_float(KirType t) { return t == KT_F32 || t == KT_F64; }
static bool is_int(KirType t) { return t == KT_I32 || t == KT_I64; }

static LLVMTypeRef ktype(Cg *g, KirType t) {
    switch (t) {
    case KT_BOOL: return g->t1;
    case KT_I32: return g->t32;
    case KT_I64: return g->t64;
    case KT_F32: return g->tf;
    case KT_F64: return g->td;
    default: return NULL;
    }
}
static LLVMTypeRef stype(Cg *g, FcDtype d) {
    switch (d) {
    case FC_F64: return g->td;
    case FC_F32: return g->tf;
    case FC_F16: case FC_BF16: return g->t16;
    case FC_F8E4M3: case FC_F8E5M2: case FC_BOOL: case FC_I8: return g->t8;
    case FC_I32: return g->t32;
    case FC_I64: return g->t64;
    default: return NULL;
    }
}
static bool dtype_needs_helpers(FcDtype d) {
    return d == FC_F16 || d == FC_BF16 || d == FC_F8E4M3 || d == FC_F8E5M2;
}

static LLVMValueRef ci(LLVMTypeRef t, int64_t v) { return LLVMConstInt(t, (unsigned long long)v, 1); }

static LLVMValueRef call_intr(Cg *g, const char *name, LLVMTypeRef *tys, unsigned ntys,
                              LLVMValueRef *args, unsigned nargs) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    if (id == 0) return BAD(g, "unknown intrinsic %s", name);
    LLVMValueRef f = LLVMGetIntrinsicDeclaration(g->mod, id, tys, ntys);
    LLVMTypeRef ft = LLVMIntrinsicGetType(g->ctx, id, tys, ntys);
    return LLVMBuildCall2(g->b, ft, f, args, nargs, "");
}
static LLVMValueRef intr1(Cg *g, const char *name, LLVMValueRef a) {
    LLVMTypeRef t = LLVMTypeOf(a);
    return call_intr(g, name, &t, 1, &a, 1);
}
static LLVMValueRef intr2(Cg *g, const char *name, LLVMValueRef a, LLVMValueRef b) {
    LLVMTypeRef t = LLVMTypeOf(a);
    LLVMValueRef args[2] = {a, b};
    return call_intr(g, name, &t, 1, args, 2);
}
/* A call to a libm function resolved from the process by the JIT. */
static LLVMValueRef call_libm(Cg *g, const char *name, LLVMValueRef a) {
    LLVMTypeRef t = LLVMTypeOf(a);
    LLVMTypeRef ft = LLVMFunctionType(t, &t, 1, 0);
    LLVMValueRef f = LLVMGetNamedFunction(g->mod, name);
    if (!f) {
        f = LLVMAddFunction(g->mod, name, ft);
        LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex,
                                LLVMCreateEnumAttribute(g->ctx, LLVMGetEnumAttributeKindForName("nounwind", 8), 0));
    }
    return LLVMBuildCall2(g->b, ft, f, &a, 1, "");
}
static LLVMValueRef call_helper(Cg *g, const char *name, LLVMValueRef a) {
    LLVMValueRef f = LLVMGetNamedFunction(g->mod, name);
    if (!f) return BAD(g, "conversion helper %s missing", name);
    return LLVMBuildCall2(g->b, LLVMGlobalGetValueType(f), f, &a, 1, "");
}

static LLVMValueRef entry_alloca(Cg *g, LLVMTypeRef t, int64_t count, const char *name) {
    LLVMValueRef a = count == 1 ? LLVMBuildAlloca(g->ab, t, name)
                                : LLVMBuildAlloca(g->ab, LLVMArrayType2(t, (uint64_t)count), name);
    if (count > 1) LLVMSetAlignment(a, 64);
    return a;
}
/* Statement s's per-chunk accumulator (Cg.acc): an alloca of integer type t, zero when the chunk
 * starts, made on first use. */
static LLVMValueRef chunk_acc(Cg *g, int s, LLVMTypeRef t, const char *name) {
    if (!g->acc[s]) {
        g->acc[s] = entry_alloca(g, t, 1, name);
        LLVMBuildStore(g->ab, LLVMConstInt(t, 0, 0), g->acc[s]);
    }
    return g->acc[s];
}

/* ---- storage conversions ------------------------------------------------------------------ */
static LLVMValueRef load_conv(Cg *g, FcDtype d, LLVMValueRef raw) {
    switch (d) {
    case FC_F16: return call_helper(g, "fc_f16_to_f32", raw);
    case FC_BF16: return call_helper(g, "fc_bf16_to_f32", raw);
    case FC_F8E4M3: return call_helper(g, "fc_e4m3_to_f32", raw);
    case FC_F8E5M2: return call_helper(g, "fc_e5m2_to_f32", raw);
    case FC_BOOL: return LLVMBuildICmp(g->b, LLVMIntNE, raw, ci(g->t8, 0), "");
    case FC_I8: return LLVMBuildSExt(g->b, raw, g->t32, "");   /* computed as i32 */
    default: return raw;
    }
}
static LLVMValueRef store_conv(Cg *g, FcDtype d, LLVMValueRef v) {
    switch (d) {
    case FC_F16: return call_helper(g, "fc_f32_to_f16", v);
    case FC_BF16: return call_helper(g, "fc_f32_to_bf16", v);
    case FC_F8E4M3: return call_helper(g, "fc_f32_to_e4m3", v);
    case FC_F8E5M2: return call_helper(g, "fc_f32_to_e5m2", v);
    case FC_BOOL: return LLVMBuildZExt(g->b, v, g->t8, "");
    case FC_I8: return LLVMBuildTrunc(g->b, v, g->t8, "");   /* in [-128, 127]: the cast saturated it */
    default: return v;
    }
}

/* ---- expressions ------------------------------------------------------------------------- */
static LLVMValueRef ex(Cg *g, int id);

static KirType etype(Cg *g, int id) { return g->k->exprs.data[id].type; }

/* An operand of expression `parent` (ids only point backwards, so evaluation terminates). */
static LLVMValueRef operand(Cg *g, int parent, int id) {
    if (id < 0 || id >= parent) return BAD(g, "expression e%d has a bad operand e%d", parent, id);
    return ex(g, id);
}
static LLVMValueRef index_of(Cg *g, int parent, int id) {
    LLVMValueRef v = operand(g, parent, id);
    if (!v) return NULL;
    KirType t = etype(g, id);
    if (t == KT_I64) return v;
    if (t == KT_I32) return LLVMBuildSExt(g->b, v, g->t64, "");
    return BAD(g, "expression e%d: index is %s, not an integer", parent, kir_type_name(t));
}

static LLVMValueRef int_divrem(Cg *g, bool rem, LLVMValueRef a, LLVMValueRef d) {
    LLVMTypeRef t = LLVMTypeOf(a);
    if (LLVMIsAConstantInt(d)) {
        long long v = LLVMConstIntGetSExtValue(d);
        if (v != 0 && v != -1) return rem ? LLVMBuildSRem(g->b, a, d, "") : LLVMBuildSDiv(g->b, a, d, "");
    }
    /* x / 0 and x % 0 give 0; x / -1 is -x (wrapping) and x % -1 is 0: never a trap. */
    LLVMValueRef isz = LLVMBuildICmp(g->b, LLVMIntEQ, d, ci(t, 0), "");
    LLVMValueRef ism1 = LLVMBuildICmp(g->b, LLVMIntEQ, d, ci(t, -1), "");
    LLVMValueRef bad = LLVMBuildOr(g->b, isz, ism1, "");
    LLVMValueRef sd = LLVMBuildSelect(g->b, bad, ci(t, 1), d, "");
    if (rem) return LLVMBuildSelect(g->b, bad, ci(t, 0), LLVMBuildSRem(g->b, a, sd, ""), "");
    LLVMValueRef q = LLVMBuildSDiv(g->b, a, sd, "");
    q = LLVMBuildSelect(g->b, ism1, LLVMBuildNeg(g->b, a, ""), q, "");
    return LLVMBuildSelect(g->b, isz, ci(t, 0), q, "");
}

/* a op b for two values of type t (also used by reductions). */
static LLVMValueRef binop(Cg *g, KirBinOp op, KirType t, LLVMValueRef a, LLVMValueRef b) {
    bool f = is_float(t), i = is_int(t), bo = t == KT_BOOL;
    bool wide = t == KT_I64; /* index arithmetic: no signed overflow (shapes are checked) */
    switch (op) {
    case KB_ADD:
        if (f) return LLVMBuildFAdd(g->b, a, b, "");
        if (i) return wide ? LLVMBuildNSWAdd(g->b, a, b, "") : LLVMBuildAdd(g->b, a, b, "");
        break;
    case KB_SUB:
        if (f) return LLVMBuildFSub(g->b, a, b, "");
        if (i) return wide ? LLVMBuildNSWSub(g->b, a, b, "") : LLVMBuildSub(g->b, a, b, "");
        break;
    case KB_MUL:
        if (f) return LLVMBuildFMul(g->b, a, b, "");
        if (i) return wide ? LLVMBuildNSWMul(g->b, a, b, "") : LLVMBuildMul(g->b, a, b, "");
        break;
    case KB_DIV:
        if (f) return LLVMBuildFDiv(g->b, a, b, "");
        if (i) return int_divrem(g, false, a, b);
        break;
    case KB_REM:
        if (i) return int_divrem(g, true, a, b);
        break;
    case KB_POW:
        if (f) return intr2(g, "llvm.pow", a, b);
        break;
    case KB_MAX:
        if (f) return intr2(g, "llvm.maximum", a, b);
        if (i) return intr2(g, "llvm.smax", a, b);
        if (bo) return LLVMBuildOr(g->b, a, b, "");
        break;
    case KB_MIN:
        if (f) return intr2(g, "llvm.minimum", a, b);
        if (i) return intr2(g, "llvm.smin", a, b);
        if (bo) return LLVMBuildAnd(g->b, a, b, "");
        break;
    case KB_LT: case KB_LE: case KB_GT: case KB_GE: case KB_EQ: case KB_NE: {
        static const LLVMRealPredicate fp[] = {LLVMRealOLT, LLVMRealOLE, LLVMRealOGT,
                                               LLVMRealOGE, LLVMRealOEQ, LLVMRealUNE};
        static const LLVMIntPredicate ip[] = {LLVMIntSLT, LLVMIntSLE, LLVMIntSGT,
                                              LLVMIntSGE, LLVMIntEQ, LLVMIntNE};
        static const LLVMIntPredicate bp[] = {LLVMIntULT, LLVMIntULE, LLVMIntUGT,
                                              LLVMIntUGE, LLVMIntEQ, LLVMIntNE};
        int j = (int)op - (int)KB_LT;
        if (f) return LLVMBuildFCmp(g->b, fp[j], a, b, "");
        if (i) return LLVMBuildICmp(g->b, ip[j], a, b, "");
        if (bo) return LLVMBuildICmp(g->b, bp[j], a, b, "");
        break;
    }
    case KB_AND:
        if (i || bo) return LLVMBuildAnd(g->b, a, b, "");
        break;
    case KB_OR:
        if (i || bo) return LLVMBuildOr(g->b, a, b, "");
        break;
    default: break;
    }
    return BAD(g, "binary %s is not defined on %s", kir_binop_name(op), kir_type_name(t));
}

/* ---- vectorizable f32 math ------------------------------------------------------------------
 * exp, log, tanh, erf, sin and cos of f32 values are emitted inline as plain arithmetic,
 * compares, selects and integer bit operations (no calls), so the loop vectorizer turns them
 * into AVX2/AVX-512 code. Range reduction plus polynomials fitted for this file (weighted least
 * squares towards minimax of the relative error, coefficients rounded to f32); error bounds in
 * docs/cpu.md, checked by tests/unit/test_vecmath.c against f64 libm. f64 keeps libm. */
static LLVMValueRef vf(Cg *g, float v) { return LLVMConstReal(g->tf, (double)v); }
static LLVMValueRef vmadd(Cg *g, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c) {
    LLVMTypeRef t = g->tf;
    LLVMValueRef args[3] = {a, b, c};
    return call_intr(g, "llvm.fmuladd", &t, 1, args, 3);
}
/* c[0] + c[1] x + ... + c[n-1] x^(n-1), Horner */
static LLVMValueRef vpoly(Cg *g, LLVMValueRef x, const float *c, int n) {
    LLVMValueRef p = vf(g, c[n - 1]);
    for (int i = n - 2; i >= 0 && p; i--) p = vmadd(g, p, x, vf(g, c[i]));
    return p;
}
static LLVMValueRef vfmul(Cg *g, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFMul(g->b, a, b, ""); }
static LLVMValueRef vfadd(Cg *g, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFAdd(g->b, a, b, ""); }
static LLVMValueRef vfsub(Cg *g, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFSub(g->b, a, b, ""); }
static LLVMValueRef vsel(Cg *g, LLVMValueRef c, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildSelect(g->b, c, a, b, ""); }
static LLVMValueRef vcmp(Cg *g, LLVMRealPredicate p, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFCmp(g->b, p, a, b, ""); }
/* min/max that map NaN to the constant bound (callers restore NaN at the end) */
static LLVMValueRef vclamp(Cg *g, LLVMValueRef x, float lo, float hi) {
    LLVMValueRef a = intr2(g, "llvm.maxnum", x, vf(g, lo));
    return a ? intr2(g, "llvm.minnum", a, vf(g, hi)) : NULL;
}
/* x is NaN ? x : r */
static LLVMValueRef vkeep_nan(Cg *g, LLVMValueRef x, LLVMValueRef r) {
    return vsel(g, vcmp(g, LLVMRealUNO, x, x), x, r);
}
/* 2^n for integer-valued f32 n in [-126, 127], through the exponent bits */
static LLVMValueRef vpow2i(Cg *g, LLVMValueRef ni) {
    LLVMValueRef e = LLVMBuildAdd(g->b, ni, ci(g->t32, 127), "");
    return LLVMBuildBitCast(g->b, LLVMBuildShl(g->b, e, ci(g->t32, 23), ""), g->tf, "");
}

/* e^x for x in [-104, 88.73] (callers clamp; NaN must not reach it). n = rint(x log2 e),
 * r = x - n ln2 (ln2 in two parts, each step a fused multiply-add: n * 0.693359375 is exact),
 * e^r = 1 + q with q = r + r^2 P(r), P of degree 4 (relative error 3.7e-9 on [-ln2/2, ln2/2]; the
 * degree-5 P before gave nothing f32 can hold and cost a multiply-add), times 2^n as
 * 2^(n>>1) * 2^(n - (n>>1)) so that subnormal results round once, correctly. */
static LLVMValueRef vexp_core_scaled(Cg *g, LLVMValueRef x, LLVMValueRef s, LLVMValueRef m);
static LLVMValueRef vexp_core(Cg *g, LLVMValueRef x) { return vexp_core_scaled(g, x, NULL, NULL); }
/* s (1 + m) e^x for a normal s of magnitude at most 1 and a small m (|m| < 2^-17; NULL: 0), or
 * e^x (s NULL): s e^r (1 + m) is s + s q' with q' = q + m + q m, one rounding at full size (a
 * fused multiply-add) instead of three (1 + q, times 1 + m, times s); the scaling by 2^n comes
 * after, so a subnormal result still rounds once at the end. */
static LLVMValueRef vexp_core_scaled(Cg *g, LLVMValueRef x, LLVMValueRef s, LLVMValueRef m) {
    LLVMValueRef n = intr1(g, "llvm.rint", vfmul(g, x, vf(g, FC_EXP_LOG2E)));
    if (!n) return NULL;
    LLVMValueRef nn = LLVMBuildFNeg(g->b, n, "");
    LLVMValueRef r = vmadd(g, nn, vf(g, FC_EXP_LN2_HI), x);
    r = vmadd(g, nn, vf(g, FC_EXP_LN2_LO), r);
    LLVMValueRef p = vpoly(g, r, fc_exp_p, FC_EXP_NP);
    if (!p) return NULL;
    LLVMValueRef q = vmadd(g, vfmul(g, r, r), p, r);
    if (!s) {
        p = vfadd(g, q, vf(g, 1.0f));
    } else {
        if (m) q = vmadd(g, q, m, vfadd(g, q, m));
        p = vmadd(g, s, q, s);
    }
    LLVMValueRef ni = LLVMBuildFPToSI(g->b, n, g->t32, "");
    LLVMValueRef n1 = LLVMBuildAShr(g->b, ni, ci(g->t32, 1), "");
    LLVMValueRef n2 = LLVMBuildSub(g->b, ni, n1, "");
    return vfmul(g, vfmul(g, p, vpow2i(g, n1)), vpow2i(g, n2));
}
static LLVMValueRef vexp(Cg *g, LLVMValueRef x) {
    /* at or below -104 the result rounds to +0 (e^-104 = 6.9e-46, under half of 2^-149), above
     * 88.73 to +inf (the core gets there itself). The core would get to 0 too, but through a
     * multiply whose result underflows, which costs an x86 core a microcode assist a lane (on
     * a Zen 3: softmax of logits scaled by 1000, most of them far below the row's max, ran at
     * half speed; a causal mask's -inf likewise): those lanes compute e^0 and are replaced. */
    LLVMValueRef xc = vclamp(g, x, -104.0f, 88.75f);
    LLVMValueRef zero = xc ? vcmp(g, LLVMRealOLE, xc, vf(g, -104.0f)) : NULL;
    LLVMValueRef r = zero ? vexp_core(g, vsel(g, zero, vf(g, 0.0f), xc)) : NULL;
    return r ? vkeep_nan(g, x, vsel(g, zero, vf(g, 0.0f), r)) : NULL;
}

/* log x: x = m 2^e with m in [sqrt(1/2), sqrt(2)), log(m) = f - f^2/2 + f^3 Q(f) with f = m - 1,
 * plus e ln2 in two parts. Subnormals are scaled by 2^23 first. */
static LLVMValueRef vlog(Cg *g, LLVMValueRef x) {
    static const float Q[9] = {0.3333333117f, -0.2499999401f, 0.2000071478f, -0.1666805620f,
                               0.1424932086f, -0.1242017233f, 0.1167705066f, -0.1151441435f,
                               0.07037300253f};
    LLVMValueRef sub = vcmp(g, LLVMRealOLT, x, vf(g, 1.17549435e-38f));
    LLVMValueRef xs = vsel(g, sub, vfmul(g, x, vf(g, 8388608.0f)), x);
    LLVMValueRef b = LLVMBuildBitCast(g->b, xs, g->t32, "");
    LLVMValueRef e = LLVMBuildSub(g->b, LLVMBuildLShr(g->b, b, ci(g->t32, 23), ""), ci(g->t32, 126), "");
    e = LLVMBuildSub(g->b, e, vsel(g, sub, ci(g->t32, 23), ci(g->t32, 0)), "");
    LLVMValueRef mb = LLVMBuildOr(g->b, LLVMBuildAnd(g->b, b, ci(g->t32, 0x007fffff), ""), ci(g->t32, 0x3f000000), "");
    LLVMValueRef m = LLVMBuildBitCast(g->b, mb, g->tf, ""); /* [0.5, 1) */
    LLVMValueRef lt = vcmp(g, LLVMRealOLT, m, vf(g, 0.707106781f));
    e = LLVMBuildSub(g->b, e, LLVMBuildZExt(g->b, lt, g->t32, ""), "");
    LLVMValueRef f = vfsub(g, vsel(g, lt, vfadd(g, m, m), m), vf(g, 1.0f));
    LLVMValueRef z = vfmul(g, f, f);
    LLVMValueRef q = vpoly(g, f, Q, 9);
    if (!q) return NULL;
    LLVMValueRef ef = LLVMBuildSIToFP(g->b, e, g->tf, "");
    LLVMValueRef y = vfmul(g, vfmul(g, f, z), q);
    y = vmadd(g, ef, vf(g, -2.12194440e-4f), y);
    y = vmadd(g, z, vf(g, -0.5f), y);
    LLVMValueRef r = vfadd(g, f, y);
    r = vmadd(g, ef, vf(g, 0.693359375f), r);
    /* log(+inf) = +inf, log(+-0) = -inf, log(x < 0) = NaN, log(NaN) = NaN */
    r = vsel(g, vcmp(g, LLVMRealOEQ, x, vf(g, __builtin_inff())), x, r);
    r = vsel(g, vcmp(g, LLVMRealOEQ, x, vf(g, 0.0f)), vf(g, -__builtin_inff()), r);
    return vsel(g, vcmp(g, LLVMRealULT, x, vf(g, 0.0f)), vf(g, __builtin_nanf("")), r);
}

/* tanh x: x + x^3 P(x^2) for |x| < 0.625, else sign(x) (1 - 2 / (e^(2|x|) + 1)) with |x|
 * clamped to 9.02 (tanh rounds to 1 from 9.01 on). */
static LLVMValueRef vtanh(Cg *g, LLVMValueRef x) {
    static const float P[5] = {-0.3333332895f, 0.1333277005f, -0.05385094973f, 0.02099734251f,
                               -0.006096922569f};
    LLVMValueRef a = intr1(g, "llvm.fabs", x);
    if (!a) return NULL;
    LLVMValueRef z = vfmul(g, x, x);
    LLVMValueRef p = vpoly(g, z, P, 5);
    if (!p) return NULL;
    LLVMValueRef small = vmadd(g, vfmul(g, x, z), p, x);
    LLVMValueRef ac = vclamp(g, a, 0.0f, 9.02f);
    LLVMValueRef e = ac ? vexp_core(g, vfadd(g, ac, ac)) : NULL;
    if (!e) return NULL;
    LLVMValueRef big = vfsub(g, vf(g, 1.0f), LLVMBuildFDiv(g->b, vf(g, 2.0f), vfadd(g, e, vf(g, 1.0f)), ""));
    LLVMTypeRef t = g->tf;
    LLVMValueRef args[2] = {big, x};
    big = call_intr(g, "llvm.copysign", &t, 1, args, 2);
    if (!big) return NULL;
    LLVMValueRef r = vsel(g, vcmp(g, LLVMRealOLT, a, vf(g, 0.625f)), small, big);
    LLVMValueRef args2[2] = {r, x}; /* tanh(-0) = -0 */
    r = call_intr(g, "llvm.copysign", &t, 1, args2, 2);
    return r ? vkeep_nan(g, x, r) : NULL;
}

/* A lookup in a 16-entry f32 table (an internal constant global `name`, created on first use):
 * table[k] for an i32 k in [0, 16) that the caller guarantees. Vectorized, it is a gather from
 * the table; the CPU runtime turns such gathers into register permutes (runtime/cpu.c,
 * `permute_tables`), which is what makes per-lane coefficient tables cheap. */
static LLVMValueRef vtable16(Cg *g, const char *name, const float *vals, LLVMValueRef k) {
    LLVMTypeRef at = LLVMArrayType2(g->tf, 16);
    LLVMValueRef gv = LLVMGetNamedGlobal(g->mod, name);
    if (!gv) {
        LLVMValueRef el[16];
        for (int i = 0; i < 16; i++) el[i] = vf(g, vals[i]);
        gv = LLVMAddGlobal(g->mod, at, name);
        LLVMSetInitializer(gv, LLVMConstArray2(g->tf, el, 16));
        LLVMSetGlobalConstant(gv, 1);
        LLVMSetLinkage(gv, LLVMInternalLinkage);
        LLVMSetUnnamedAddress(gv, LLVMGlobalUnnamedAddr);
        LLVMSetAlignment(gv, 64);
    }
    LLVMValueRef idx[2] = {ci(g->t32, 0), k};
    LLVMValueRef p = LLVMBuildInBoundsGEP2(g->b, at, gv, idx, 2, "");
    return LLVMBuildLoad2(g->b, g->tf, p, "");
}

/* erf x on 16 pieces of |x|: a = min(|x|, 3.92) (NaN gives 3.92, restored at the end),
 * k = (int)(4 a) in [0, 15], t = a - centre[k]; piece 0 ([0, 0.25)) is erf = a + a P0(t) with
 * P0 fitting erf(a)/a - 1 (relative accuracy for tiny |x|); pieces 1..15 are erf = Pk(t)
 * directly (values in [0.27, 1]); each Pk has 6 coefficients, looked up per lane. erf rounds
 * to 1 from |x| = 3.84 on; the last piece gives exactly 1 at the clamp 3.92. Coefficients:
 * weighted least squares towards minimax of the error in ulps, rounded to f32 one at a time
 * (each fit after rounding the previous ones). */
/* A piecewise degree-5 polynomial from per-lane table lookups (erf, ndtr): piece k of a,
 * p5 t^5 + ... + p1 t + p0 with t = a - c[k]; tab rows are c, p0, ..., p5, names the rows'
 * globals. */
static LLVMValueRef vpiece_poly(Cg *g, const char *const names[7], const float tab[7][16], LLVMValueRef k,
                                LLVMValueRef a) {
    LLVMValueRef t = vfsub(g, a, vtable16(g, names[0], tab[0], k));
    LLVMValueRef p = vtable16(g, names[6], tab[6], k);
    for (int j = 5; j >= 1 && p; j--) p = vmadd(g, p, t, vtable16(g, names[j], tab[j], k));
    return p;
}
static const float ERF_TAB[7][16] = {
    /* centres */
    {0.0f, 0.375f, 0.625f, 0.875f, 1.125f, 1.375f, 1.625f, 1.875f, 2.125f, 2.375f, 2.625f, 2.875f,
      3.125f, 3.375f, 3.625f, 3.875f},
    /* c0 */
    {0.128379166f, 0.404116899f, 0.623240888f, 0.784075081f, 0.888388216f, 0.948170066f,
      0.978443742f, 0.99199003f, 0.997345984f, 0.999217033f, 0.999794602f, 0.999952137f,
      0.999990106f, 0.999998212f, 0.999999702f, 0.99999994f},
    /* c1 */
    {-5.01291993e-07f, 0.980352819f, 0.763499558f, 0.524745047f, 0.318273962f, 0.170359775f,
      0.0804722607f, 0.0335458294f, 0.0123408204f, 0.004006478f, 0.0011478751f, 0.000290228287f,
      6.47586858e-05f, 1.27517405e-05f, 2.21592018e-06f, 3.39829711e-07f},
    /* c2 */
    {-0.376094639f, -0.367622048f, -0.477184892f, -0.459160954f, -0.358052433f, -0.234244317f,
      -0.13077338f, -0.0628847107f, -0.0262308381f, -0.00950050261f, -0.00300172763f,
      -0.000830339559f, -0.000203522082f, -5.68843097e-05f, -6.55506392e-06f, 2.45970532e-05f},
    /* c3 */
    {-0.000610504299f, -0.234877154f, -0.0556776859f, 0.0929208696f, 0.162450477f, 0.157937646f,
      0.114840858f, 0.0674415305f, 0.0330376811f, 0.0137304924f, 0.00489035016f, 0.00150247186f,
      0.000399985933f, 9.25704517e-05f, 1.86698944e-05f, 9.8197539e-05f},
    /* c4 */
    {0.117890619f, 0.165128231f, 0.175677016f, 0.112812065f, 0.0278456174f, -0.0301790424f,
      -0.0491125174f, -0.0430727452f, -0.0259671751f, -0.0141336685f, -0.00618143613f,
      -0.00215973565f, -0.000491036801f, 0.000741520722f, -0.000126306448f, -0.00504585449f},
    /* c5 */
    {-0.0189777073f, 0.0452180952f, -0.0269131605f, -0.0667586699f, -0.0610672906f, -0.030630948f,
      -0.00225342833f, 0.0113536995f, 0.0124493893f, 0.0083612632f, 0.00423347997f, 0.00172560872f,
      0.000583287503f, 0.000166176833f, 4.03340782e-05f, -0.034233544f},
};
static LLVMValueRef verf(Cg *g, LLVMValueRef x) {
    static const char *const names[7] = {"fc_erf_c", "fc_erf_p0", "fc_erf_p1", "fc_erf_p2",
                                         "fc_erf_p3", "fc_erf_p4", "fc_erf_p5"};
    LLVMValueRef a = intr1(g, "llvm.fabs", x);
    LLVMValueRef ac = a ? intr2(g, "llvm.minnum", a, vf(g, 3.92f)) : NULL;
    if (!ac) return NULL;
    LLVMValueRef k = LLVMBuildFPToSI(g->b, vfmul(g, ac, vf(g, 4.0f)), g->t32, "");
    LLVMValueRef p = vpiece_poly(g, names, ERF_TAB, k, ac);
    if (!p) return NULL;
    /* piece 0: a + a p; else p (fma(1, p, 0) is p exactly) */
    LLVMValueRef p0 = LLVMBuildICmp(g->b, LLVMIntEQ, k, ci(g->t32, 0), "");
    LLVMValueRef r = vmadd(g, vsel(g, p0, ac, vf(g, 1.0f)), p, vsel(g, p0, ac, vf(g, 0.0f)));
    LLVMTypeRef ty = g->tf;
    LLVMValueRef args[2] = {r, x}; /* erf(-x) = -erf(x), erf(-0) = -0 */
    r = r ? call_intr(g, "llvm.copysign", &ty, 1, args, 2) : NULL;
    return r ? vkeep_nan(g, x, r) : NULL;
}

/* ndtr x, the standard normal CDF: with a = |x|, T(a) = ndtr(-a) = e^(-a^2/2) R(a), and
 * ndtr x = T(a) for x < 0, 1 - T(a) otherwise (T <= 1/2, so no cancellation either side).
 * R(a) = T(a) e^(a^2/2) is smooth and slowly varying (0.5 at 0, about 1/(a sqrt(2 pi)) for large
 * a); with k = sqrt(2 pi), 1/R(a) = k (a + G(a)) where G (Mills's ratio's correction, sqrt(2/pi)
 * at 0, about 1/a for large a) is the rational P(a) / (k Q(a)) of degree 4 over 5, so
 * R = Q / (k a Q + P): a = min(|x|, 14.49) (NaN gives 14.49, restored at the end; T rounds to 0
 * from a = 14.2 on), Q and P by Horner (positive coefficients: no cancellation at a >= 0), one
 * fused multiply-add and one division. An error in P or Q moves R by its share of the
 * denominator, P / (k a Q + P), which falls as 1/a^2: the last steps' roundings are what is
 * left. P and Q are scaled by 3/4 (P(0) = 1.5 and Q(0) = 0.75 exactly, R(0) = 1/2): near 0 they
 * then sit inside their binades rather than just above a power of two, where a rounding is the
 * largest fraction of the value (unscaled, the worst error was 3.8 ulp, at x = -0.0021; scaled,
 * 3.14 at -9.3). No tables, no lookups: the 16-piece polynomial this replaced spent 14 register
 * permutes and 7 blends per 8 lanes on AVX2 and took 1.4-2x the time. a^2 is split exactly into h + l
 * (l by a fused multiply-add, fc_sq_lo), e^(-a^2/2) = e^(-h/2) (1 - l/2), and R and (1 - l/2) scale the
 * exponential's polynomial before its 2^n (vexp_core_scaled), so subnormal results round once.
 * Working from x itself (not x / sqrt 2) means no rounded argument whose error the tail would
 * amplify by a^2. Coefficients: tools/fit_ndtr.py (least squares on R's relative error,
 * towards minimax, iteratively reweighted, rounded to f32 one at a time, each fit after
 * rounding the previous ones, then scaled); the fit's own error is 3e-9. Errors: docs/cpu.md. */
static LLVMValueRef vndtr(Cg *g, LLVMValueRef x) {
    LLVMValueRef a = intr1(g, "llvm.fabs", x);
    LLVMValueRef ac = a ? intr2(g, "llvm.minnum", a, vf(g, FC_NDTR_CLAMP)) : NULL;
    if (!ac) return NULL;
    LLVMValueRef q = vpoly(g, ac, fc_ndtr_q, FC_NDTR_NQ), p = vpoly(g, ac, fc_ndtr_p, FC_NDTR_NP);
    if (!q || !p) return NULL;
    LLVMValueRef den = vmadd(g, vfmul(g, ac, vf(g, FC_NDTR_SQRT_2PI)), q, p);
    LLVMValueRef rr = LLVMBuildFDiv(g->b, q, den, "");
    LLVMValueRef h = vfmul(g, ac, ac), l = call_helper(g, "fc_sq_lo", ac); /* a^2 - h exactly */
    if (!l) return NULL;
    LLVMValueRef tv = vexp_core_scaled(g, vfmul(g, h, vf(g, -0.5f)), rr, vfmul(g, l, vf(g, -0.5f)));
    if (!tv) return NULL;
    LLVMValueRef r = vsel(g, vcmp(g, LLVMRealOLT, x, vf(g, 0.0f)), tv, vfsub(g, vf(g, 1.0f), tv));
    return vkeep_nan(g, x, r);
}

/* sin x, cos x: j = rint(x 2/pi) and r = x - j pi/2 in f64 (pi/2 in two parts, fused
 * multiply-adds), so r is accurate while j pi/2 is (|x| < 2^24 at least, see docs/cpu.md);
 * then sin(r) = r + r^3 S(r^2), cos(r) = 1 - r^2/2 + r^4 C(r^2) and a quadrant select. */
static LLVMValueRef vsincos(Cg *g, LLVMValueRef x, bool cosine) {
    static const float S[4] = {-0.1666666666f, 0.008333331941f, -0.0001984010692f, 2.725172038e-06f};
    static const float C[4] = {0.04166666667f, -0.001388888691f, 2.480010129e-05f, -2.723680641e-07f};
    LLVMTypeRef td = g->td;
    /* |x| above 2^26 is clamped to keep the reduction in range (results there are not accurate) */
    LLVMValueRef xc = vclamp(g, x, -67108864.0f, 67108864.0f);
    LLVMValueRef xd = xc ? LLVMBuildFPExt(g->b, xc, td, "") : NULL;
    if (!xd) return NULL;
    LLVMValueRef j = intr1(g, "llvm.rint", LLVMBuildFMul(g->b, xd, LLVMConstReal(td, 0.63661977236758134308), ""));
    if (!j) return NULL;
    LLVMValueRef nj = LLVMBuildFNeg(g->b, j, "");
    LLVMValueRef a1[3] = {nj, LLVMConstReal(td, 1.5707963267948966), xd};
    LLVMValueRef r = call_intr(g, "llvm.fma", &td, 1, a1, 3);
    if (!r) return NULL;
    LLVMValueRef a2[3] = {nj, LLVMConstReal(td, 6.123233995736766e-17), r};
    r = call_intr(g, "llvm.fma", &td, 1, a2, 3);
    if (!r) return NULL;
    LLVMValueRef rf = LLVMBuildFPTrunc(g->b, r, g->tf, "");
    LLVMValueRef q = LLVMBuildFPToSI(g->b, j, g->t64, ""); /* |j| < 2^26 */
    if (cosine) q = LLVMBuildAdd(g->b, q, ci(g->t64, 1), "");
    q = LLVMBuildTrunc(g->b, q, g->t32, "");
    LLVMValueRef z = vfmul(g, rf, rf);
    LLVMValueRef sp = vpoly(g, z, S, 4), cp = sp ? vpoly(g, z, C, 4) : NULL;
    if (!cp) return NULL;
    LLVMValueRef s = vmadd(g, vfmul(g, rf, z), sp, rf);
    LLVMValueRef c = vmadd(g, vfmul(g, z, z), cp, vmadd(g, z, vf(g, -0.5f), vf(g, 1.0f)));
    LLVMValueRef odd = LLVMBuildTrunc(g->b, q, g->t1, "");
    LLVMValueRef neg = LLVMBuildTrunc(g->b, LLVMBuildLShr(g->b, q, ci(g->t32, 1), ""), g->t1, "");
    LLVMValueRef v = vsel(g, odd, c, s);
    v = vsel(g, neg, LLVMBuildFNeg(g->b, v, ""), v);
    if (!cosine) v = vsel(g, vcmp(g, LLVMRealOEQ, x, vf(g, 0.0f)), x, v); /* sin(-0) = -0 */
    /* sin/cos of +-inf and NaN are NaN */
    LLVMValueRef fin = vcmp(g, LLVMRealOLT, intr1(g, "llvm.fabs", x), vf(g, __builtin_inff()));
    return vsel(g, fin, v, vf(g, __builtin_nanf("")));
}

static LLVMValueRef unop(Cg *g, KirUnOp op, KirType t, LLVMValueRef a) {
    bool f = is_float(t), i = is_int(t);
    bool d = t == KT_F64;
    switch (op) {
    case KU_NEG:
        if (f) return LLVMBuildFNeg(g->b, a, "");
        if (i) return LLVMBuildNeg(g->b, a, "");
        break;
    case KU_ABS:
        if (f) return intr1(g, "llvm.fabs", a);
        if (i) return intr2(g, "llvm.abs", a, LLVMConstInt(g->t1, 0, 0));
        break;
    case KU_EXP: if (f) return d ? intr1(g, "llvm.exp", a) : vexp(g, a); break;
    case KU_LOG: if (f) return d ? intr1(g, "llvm.log", a) : vlog(g, a); break;
    case KU_SQRT: if (f) return intr1(g, "llvm.sqrt", a); break;
    case KU_SIN: if (f) return d ? intr1(g, "llvm.sin", a) : vsincos(g, a, false); break;
    case KU_COS: if (f) return d ? intr1(g, "llvm.cos", a) : vsincos(g, a, true); break;
    case KU_FLOOR: if (f) return intr1(g, "llvm.floor", a); break;
    case KU_RSQRT:
        if (f) {
            LLVMValueRef s = intr1(g, "llvm.sqrt", a);
            return s ? LLVMBuildFDiv(g->b, LLVMConstReal(LLVMTypeOf(a), 1.0), s, "") : NULL;
        }
        break;
    case KU_RECIP:
        if (f) return LLVMBuildFDiv(g->b, LLVMConstReal(LLVMTypeOf(a), 1.0), a, "");
        break;
    case KU_TANH: if (f) return d ? call_libm(g, "tanh", a) : vtanh(g, a); break;
    case KU_ERF: if (f) return d ? call_libm(g, "erf", a) : verf(g, a); break;
    case KU_NDTR:
        if (f && d) { /* 0.5 erfc(-x / sqrt 2) */
            LLVMValueRef z = LLVMBuildFMul(g->b, a, LLVMConstReal(g->td, -0.70710678118654752440), "");
            LLVMValueRef e = call_libm(g, "erfc", z);
            return e ? LLVMBuildFMul(g->b, e, LLVMConstReal(g->td, 0.5), "") : NULL;
        }
        if (f) return vndtr(g, a);
        break;
    case KU_NOT:
        if (t == KT_BOOL) return LLVMBuildXor(g->b, a, LLVMConstInt(g->t1, 1, 0), "");
        break;
    default: break;
    }
    return BAD(g, "unary %s is not defined on %s", kir_unop_name(op), kir_type_name(t));
}

static LLVMValueRef cast(Cg *g, LLVMValueRef v, KirType from, KirType to) {
    LLVMTypeRef tt = ktype(g, to);
    if (from == to) return v;
    if (is_float(from) && is_float(to))
        return to == KT_F64 ? LLVMBuildFPExt(g->b, v, tt, "") : LLVMBuildFPTrunc(g->b, v, tt, "");
    if (is_float(from) && is_int(to)) {
        /* truncate toward zero, saturating, NaN -> 0 */
        LLVMTypeRef tys[2] = {tt, LLVMTypeOf(v)};
        return call_intr(g, "llvm.fptosi.sat", tys, 2, &v, 1);
    }
    if (is_float(from) && to == KT_BOOL)
        return LLVMBuildFCmp(g->b, LLVMRealUNE, v, LLVMConstReal(LLVMTypeOf(v), 0.0), "");
    if (is_int(from) && is_float(to)) return LLVMBuildSIToFP(g->b, v, tt, "");
    if (from == KT_BOOL && is_float(to)) return LLVMBuildUIToFP(g->b, v, tt, "");
    if (is_int(from) && is_int(to))
        return to == KT_I64 ? LLVMBuildSExt(g->b, v, tt, "") : LLVMBuildTrunc(g->b, v, tt, "");
    if (from == KT_BOOL && is_int(to)) return LLVMBuildZExt(g->b, v, tt, "");
    if (is_int(from) && to == KT_BOOL) return LLVMBuildICmp(g->b, LLVMIntNE, v, ci(LLVMTypeOf(v), 0), "");
    return BAD(g, "cast from %s to %s", kir_type_name(from), kir_type_name(to));
}

static LLVMValueRef round_to(Cg *g, FcDtype d, KirType t, LLVMValueRef v) {
    if (!is_float(t)) return BAD(g, "round of a %s value", kir_type_name(t));
    if (d == FC_F64) return v;
    LLVMValueRef x = t == KT_F64 ? LLVMBuildFPTrunc(g->b, v, g->tf, "") : v;
    const char *direct = d == FC_BF16 ? "fc_round_bf16" : d == FC_F8E4M3 ? "fc_round_e4m3"
                       : d == FC_F8E5M2 ? "fc_round_e5m2" : NULL;
    if (direct) {   /* the store's then the load's value in one helper (f16: the pair, which F16C makes two instructions) */
        x = call_helper(g, direct, x);
        if (!x) return NULL;
    } else if (dtype_needs_helpers(d)) {
        x = store_conv(g, d, x);
        if (!x) return NULL;
        x = load_conv(g, d, x);
        if (!x) return NULL;
    } else if (d != FC_F32) {
        return BAD(g, "round to %s", fc_dtype_name(d) ? fc_dtype_name(d) : "?");
    }
    return t == KT_F64 ? LLVMBuildFPExt(g->b, x, g->td, "") : x;
}

static LLVMValueRef thread_slot(Cg *g, int parent) {
    if (!g->slot_valid)
        return BAD(g, "expression e%d: thread array used outside a thread loop", parent);
    return LLVMBuildLoad2(g->b, g->t64, g->slot, "");
}

/* &tarray[ref][slot * count + idx] */
static LLVMValueRef ta_addr(Cg *g, int parent, int ref, LLVMValueRef idx) {
    if (ref < 0 || ref >= g->k->tarrays.len) return BAD(g, "bad thread array %d", ref);
    LLVMValueRef s = thread_slot(g, parent);
    if (!s) return NULL;
    int64_t count = g->k->tarrays.data[ref].count;
    LLVMValueRef off = LLVMBuildNSWAdd(g->b, LLVMBuildNSWMul(g->b, s, ci(g->t64, count), ""), idx, "");
    LLVMTypeRef et = ktype(g, g->k->tarrays.data[ref].type);
    return LLVMBuildInBoundsGEP2(g->b, et, g->ta[ref], &off, 1, "");
}
static LLVMValueRef sh_addr(Cg *g, int ref, LLVMValueRef idx) {
    if (ref < 0 || ref >= g->k->shared.len) return BAD(g, "bad shared array %d", ref);
    LLVMTypeRef et = ktype(g, g->k->shared.data[ref].type);
    return LLVMBuildInBoundsGEP2(g->b, et, g->sh[ref], &idx, 1, "");
}
static LLVMValueRef buf_addr(Cg *g, int ref, LLVMValueRef idx) {
    if (ref < 0 || ref >= g->k->params.len) return BAD(g, "bad param %d", ref);
    return LLVMBuildInBoundsGEP2(g->b, stype(g, g->k->params.data[ref].dtype), g->prm[ref], &idx, 1, "");
}

/* Index math: is expression `id` the integer constant v (any id; constants are not always
 * shared)? */
static bool const_int(const KirKernel *k, int id, int64_t *v) {
    if (id < 0 || id >= k->exprs.len || k->exprs.data[id].kind != KE_CONST || !is_int(k->exprs.data[id].type)) return false;
    *v = k->exprs.data[id].ival;
    return true;
}
static bool binary_of(const KirKernel *k, int id, KirBinOp op) {
    return id >= 0 && id < k->exprs.len && k->exprs.data[id].kind == KE_BINARY && k->exprs.data[id].op == (int)op;
}
/* (x / c) * c + x % c is x for truncating division and any c != 0 (C's identity). The
 * lowering writes flat indices this way; LLVM does not fold it, and the per-element vector
 * division it leaves turns contiguous loads into gathers. Returns x's id or -1. */
static int divrem_identity(const KirKernel *k, const KirExpr *e) {
    if (e->kind != KE_BINARY || e->op != KB_ADD || !is_int(e->type)) return -1;
    for (int swap = 0; swap < 2; swap++) {
        int m = swap ? e->b : e->a, r = swap ? e->a : e->b;
        if (!binary_of(k, m, KB_MUL) || !binary_of(k, r, KB_REM)) continue;
        const KirExpr *me = &k->exprs.data[m], *re = &k->exprs.data[r];
        for (int ms = 0; ms < 2; ms++) {
            int d = ms ? me->b : me->a, c = ms ? me->a : me->b;
            int64_t cv, dv, rv;
            if (!binary_of(k, d, KB_DIV) || !const_int(k, c, &cv) || cv == 0) continue;
            const KirExpr *de = &k->exprs.data[d];
            if (!const_int(k, de->b, &dv) || !const_int(k, re->b, &rv) || dv != cv || rv != cv) continue;
            if (de->a != re->a || k->exprs.data[de->a].type != e->type) continue;
            return de->a;
        }
    }
    return -1;
}

/* ---- Philox-4x32-10 (KE_PHILOX) ------------------------------------------------------------
 * Random123's rounds, unrolled: each multiplies two 32-bit words by the Philox constants as
 * 64-bit products (zero-extended, so the loop vectorizer uses 32x32->64 vector multiplies),
 * the key bumped by the Weyl constants between rounds (constants when the key is). */
static LLVMValueRef lo32(Cg *g, LLVMValueRef x) { return LLVMBuildTrunc(g->b, x, g->t32, ""); }
static LLVMValueRef hi32(Cg *g, LLVMValueRef x) { return lo32(g, LLVMBuildLShr(g->b, x, ci(g->t64, 32), "")); }
static LLVMValueRef philox_r0(Cg *g, LLVMValueRef ctr_lo, LLVMValueRef ctr_hi, LLVMValueRef key) {
    LLVMValueRef c0 = lo32(g, ctr_lo), c1 = hi32(g, ctr_lo), c2 = lo32(g, ctr_hi), c3 = hi32(g, ctr_hi);
    LLVMValueRef k0 = lo32(g, key), k1 = hi32(g, key);
    for (int r = 0; r < 10; r++) {
        if (r > 0) {
            k0 = LLVMBuildAdd(g->b, k0, ci(g->t32, 0x9E3779B9), "");
            k1 = LLVMBuildAdd(g->b, k1, ci(g->t32, 0xBB67AE85), "");
        }
        LLVMValueRef p0 = LLVMBuildMul(g->b, LLVMBuildZExt(g->b, c0, g->t64, ""), ci(g->t64, 0xD2511F53), "");
        LLVMValueRef p1 = LLVMBuildMul(g->b, LLVMBuildZExt(g->b, c2, g->t64, ""), ci(g->t64, 0xCD9E8D57), "");
        LLVMValueRef n0 = LLVMBuildXor(g->b, LLVMBuildXor(g->b, hi32(g, p1), c1, ""), k0, "");
        LLVMValueRef n2 = LLVMBuildXor(g->b, LLVMBuildXor(g->b, hi32(g, p0), c3, ""), k1, "");
        c0 = n0;
        c1 = lo32(g, p1);
        c2 = n2;
        c3 = lo32(g, p0);
    }
    return LLVMBuildZExt(g->b, c0, g->t64, "");
}

static LLVMValueRef ex_uncached(Cg *g, int id) {
    const KirExpr *e = &g->k->exprs.data[id];
    LLVMTypeRef t = ktype(g, e->type);
    if (!t) return BAD(g, "expression e%d has a bad type", id);
    switch (e->kind) {
    case KE_CONST:
        if (is_float(e->type)) return LLVMConstReal(t, e->fval);
        if (e->type == KT_BOOL) return LLVMConstInt(t, e->ival != 0, 0);
        return ci(t, e->ival);
    case KE_VAR: {
        if (e->ref < 0 || e->ref >= g->k->vars.len) return BAD(g, "e%d: bad var", id);
        if (g->var_level[e->ref] < 0) return BAD(g, "v%d used before it is declared", e->ref);
        if (g->var_level[e->ref] > g->level)
            return BAD(g, "v%d, declared inside a thread loop, used at block level", e->ref);
        if (g->k->vars.data[e->ref].type != e->type) return BAD(g, "e%d: var type mismatch", id);
        return LLVMBuildLoad2(g->b, t, g->var[e->ref], "");
    }
    case KE_LOAD: {
        LLVMValueRef idx = index_of(g, id, e->a);
        if (!idx) return NULL;
        if (e->ref < 0 || e->ref >= g->k->params.len) return BAD(g, "e%d: bad param", id);
        FcDtype d = g->k->params.data[e->ref].dtype;
        if (kir_compute_type(d) != e->type) return BAD(g, "e%d: load type mismatch", id);
        if (g->pair_lane == 2 && g->pair_load[id]) {
            /* the odd element: the top half of the word the even one loaded, in place */
            if (!g->pair_word[id]) return BAD(g, "e%d: paired load without its word", id);
            return LLVMBuildBitCast(g->b, LLVMBuildAnd(g->b, g->pair_word[id], ci(g->t32, (int64_t)0xffff0000), ""), g->tf, "");
        }
        LLVMValueRef p = buf_addr(g, e->ref, idx);
        if (!p) return NULL;
        if (g->pair_lane == 1 && g->pair_load[id]) {
            /* both elements in one i32 (little-endian: the even one in the low half) */
            LLVMValueRef w = LLVMBuildLoad2(g->b, g->t32, p, "");
            LLVMSetAlignment(w, 2);
            g->pair_word[id] = w;
            return LLVMBuildBitCast(g->b, LLVMBuildShl(g->b, w, ci(g->t32, 16), ""), g->tf, "");
        }
        return load_conv(g, d, LLVMBuildLoad2(g->b, stype(g, d), p, ""));
    }
    case KE_SHLOAD: {
        LLVMValueRef idx = index_of(g, id, e->a);
        LLVMValueRef p = idx ? sh_addr(g, e->ref, idx) : NULL;
        if (!p) return NULL;
        if (g->k->shared.data[e->ref].type != e->type) return BAD(g, "e%d: shared type mismatch", id);
        return LLVMBuildLoad2(g->b, t, p, "");
    }
    case KE_TLOAD: {
        LLVMValueRef idx = index_of(g, id, e->a);
        LLVMValueRef p = idx ? ta_addr(g, id, e->ref, idx) : NULL;
        if (!p) return NULL;
        if (g->k->tarrays.data[e->ref].type != e->type) return BAD(g, "e%d: thread array type mismatch", id);
        return LLVMBuildLoad2(g->b, t, p, "");
    }
    case KE_UNARY: {
        LLVMValueRef a = operand(g, id, e->a);
        if (!a) return NULL;
        KirType at = etype(g, e->a);
        if (e->type != at || (e->op == KU_NOT && at != KT_BOOL))
            return BAD(g, "e%d: unary %s result type mismatch", id, kir_unop_name((KirUnOp)e->op));
        if ((unsigned)e->op >= KU_COUNT) return BAD(g, "e%d: bad unary op", id);
        return unop(g, (KirUnOp)e->op, at, a);
    }
    case KE_BINARY: {
        int same = divrem_identity(g->k, e);
        if (same >= 0) return operand(g, id, same);
        LLVMValueRef a = operand(g, id, e->a), b = a ? operand(g, id, e->b) : NULL;
        if (!b) return NULL;
        KirType at = etype(g, e->a);
        if (at != etype(g, e->b)) return BAD(g, "e%d: operands of %s differ in type", id, kir_binop_name((KirBinOp)e->op));
        if ((unsigned)e->op >= KB_COUNT) return BAD(g, "e%d: bad binary op", id);
        bool cmp = e->op >= KB_LT && e->op <= KB_NE;
        if (e->type != (cmp ? KT_BOOL : at)) return BAD(g, "e%d: binary result type mismatch", id);
        return binop(g, (KirBinOp)e->op, at, a, b);
    }
    case KE_SELECT: {
        LLVMValueRef c = operand(g, id, e->a);
        LLVMValueRef a = c ? operand(g, id, e->b) : NULL;
        LLVMValueRef b = a ? operand(g, id, e->c) : NULL;
        if (!b) return NULL;
        if (etype(g, e->a) != KT_BOOL || etype(g, e->b) != e->type || etype(g, e->c) != e->type)
            return BAD(g, "e%d: select types", id);
        return LLVMBuildSelect(g->b, c, a, b, "");
    }
    case KE_CAST: {
        LLVMValueRef a = operand(g, id, e->a);
        return a ? cast(g, a, etype(g, e->a), e->type) : NULL;
    }
    case KE_ROUND: {
        LLVMValueRef a = operand(g, id, e->a);
        if (!a) return NULL;
        if (etype(g, e->a) != e->type) return BAD(g, "e%d: round type mismatch", id);
        return round_to(g, e->dtype, e->type, a);
    }
    case KE_BLOCK_IDX:
        if (e->type != KT_I64) return BAD(g, "e%d: block index must be i64", id);
        return LLVMBuildLoad2(g->b, g->t64, g->blk, "");
    case KE_PHILOX: {
        LLVMValueRef a = operand(g, id, e->a);
        LLVMValueRef b = a ? operand(g, id, e->b) : NULL;
        LLVMValueRef c = b ? operand(g, id, e->c) : NULL;
        if (!c) return NULL;
        if (e->type != KT_I64 || etype(g, e->a) != KT_I64 || etype(g, e->b) != KT_I64 || etype(g, e->c) != KT_I64)
            return BAD(g, "e%d: philox operands and result must be i64", id);
        return philox_r0(g, a, b, c);
    }
    default: break;
    }
    return BAD(g, "expression e%d has an unknown kind", id);
}

static LLVMValueRef ex(Cg *g, int id) {
    if (g->st != FC_OK) return NULL;
    if (id < 0 || id >= g->k->exprs.len) return BAD(g, "bad expression id %d", id);
    if (g->memo_gen[id] == g->gen) return g->memo[id];
    LLVMValueRef v = ex_uncached(g, id);
    if (v) { g->memo[id] = v; g->memo_gen[id] = g->gen; }
    return v;
}
/* The value of a statement operand of the expected type. */
static LLVMValueRef ex_typed(Cg *g, int id, KirType want, const char *what) {
    LLVMValueRef v = ex(g, id);
    if (!v) return NULL;
    if (etype(g, id) != want)
        return BAD(g, "%s is %s, expected %s", what, kir_type_name(etype(g, id)), kir_type_name(want));
    return v;
}

/* ---- loops ------------------------------------------------------------------------------ */
/* for (*ctr = lo; *ctr < hi; *ctr += step) body: open with loop_open, close with loop_close. */
typedef struct Loop { LLVMBasicBlockRef cond, body, exit; LLVMValueRef ctr; LLVMTypeRef t; } Loop;
static void loop_open(Cg *g, Loop *L, LLVMValueRef ctr, LLVMTypeRef t, LLVMValueRef lo, LLVMValueRef hi) {
    L->ctr = ctr;
    L->t = t;
    L->cond = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "loop.cond");
    L->body = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "loop.body");
    L->exit = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "loop.end");
    LLVMBuildStore(g->b, lo, ctr);
    LLVMBuildBr(g->b, L->cond);
    LLVMPositionBuilderAtEnd(g->b, L->cond);
    LLVMValueRef i = LLVMBuildLoad2(g->b, t, ctr, "");
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, i, hi, ""), L->body, L->exit);
    LLVMPositionBuilderAtEnd(g->b, L->body);
}
static LLVMValueRef loop_close(Cg *g, Loop *L, int64_t step) {
    LLVMValueRef i = LLVMBuildLoad2(g->b, L->t, L->ctr, "");
    LLVMBuildStore(g->b, LLVMBuildNSWAdd(g->b, i, ci(L->t, step), ""), L->ctr);
    LLVMValueRef br = LLVMBuildBr(g->b, L->cond);
    LLVMPositionBuilderAtEnd(g->b, L->exit);
    return br;
}
/* !llvm.loop !{self, !{"llvm.loop.unroll.disable"}} on a loop's back edge. The inner loop of
 * a split thread loop has at most `block` iterations; fully unrolled (odd block sizes) it
 * makes the SLP vectorizer take seconds. The loop vectorizer still vectorizes it. */
static LLVMMetadataRef md_str_node(Cg *g, const char *s) {
    LLVMMetadataRef str = LLVMMDStringInContext2(g->ctx, s, strlen(s));
    return LLVMMDNodeInContext2(g->ctx, &str, 1);
}
/* `unroll_vectorized`: the loop the vectorizer makes of it (a few vector iterations when the
 * block is small) gets no attributes, so the default unroller unrolls it fully when its trip
 * count is a small constant; the reduction partials indexed by the thread slot then have
 * constant offsets and SROA keeps them in vector registers. Its scalar epilogue stays rolled.
 * (`llvm.loop.unroll.full` would warn on stderr wherever the trip count is not constant.) */
/* The loop ID !{self, attrs...} on a loop's back edge. */
static void loop_md(Cg *g, LLVMValueRef latch, const LLVMMetadataRef *attrs, unsigned nattrs) {
    LLVMMetadataRef ops[4];
    if (nattrs > 3) nattrs = 3;
    LLVMMetadataRef tmp = LLVMTemporaryMDNode(g->ctx, NULL, 0);
    ops[0] = tmp;
    for (unsigned i = 0; i < nattrs; i++) ops[1 + i] = attrs[i];
    LLVMMetadataRef loop = LLVMMDNodeInContext2(g->ctx, ops, 1 + nattrs);
    LLVMMetadataReplaceAllUsesWith(tmp, loop);
    LLVMSetMetadata(latch, LLVMGetMDKindIDInContext(g->ctx, "llvm.loop", 9), LLVMMetadataAsValue(g->ctx, loop));
}
static void no_unroll(Cg *g, LLVMValueRef latch, bool unroll_vectorized) {
    LLVMMetadataRef attrs[3] = {md_str_node(g, "llvm.loop.unroll.disable"), NULL, NULL};
    unsigned n = 1;
    if (unroll_vectorized) {
        LLVMMetadataRef v[1] = {LLVMMDStringInContext2(g->ctx, "llvm.loop.vectorize.followup_vectorized", 39)};
        LLVMMetadataRef e[2] = {LLVMMDStringInContext2(g->ctx, "llvm.loop.vectorize.followup_epilogue", 37),
                                md_str_node(g, "llvm.loop.unroll.disable")};
        attrs[n++] = LLVMMDNodeInContext2(g->ctx, v, 1);
        attrs[n++] = LLVMMDNodeInContext2(g->ctx, e, 2);
    }
    loop_md(g, latch, attrs, n);
}

/* Interleaving a pointwise kernel's vector loop (llvm.loop.interleave.count). The inline vector
 * math (exp, log, tanh, erf, ndtr, sin, cos, pow: codegen's vexp_core_scaled, vndtr, ...) is a
 * dependence chain of 60-90 cycles an element group; a loop body around it is 60-180
 * instructions, so the out-of-order window holds about two iterations and the core waits on the
 * chain with its floating-point pipes half idle (llvm-mca -mcpu=znver3: the exact GELU's loop 28
 * cycles an iteration where its busiest pipe needs 16). LLVM's cost model keeps such a loop at
 * one copy for its register pressure; four copies side by side let the scheduler overlap them:
 * docs/cpu.md "Interleaved vector math" has the measurements (the exact GELU 14-28 % faster
 * at x86-64-v2 and v3, f32 and bf16). Row kernels are left alone: their loops sit between
 * reductions over the same row, and four copies made the bf16 perf chain's row kernel slower;
 * so is the paired 16-bit loop at AVX-512 (pair_emit). */
enum { INTERLEAVE = 4 };
/* Is expression e such vector math itself? */
static bool chain_op(const KirExpr *e) {
    if (e->kind == KE_BINARY) return e->type == KT_F32 && e->op == KB_POW;
    if (e->kind != KE_UNARY || e->type != KT_F32) return false;
    switch ((KirUnOp)e->op) {
    case KU_EXP: case KU_LOG: case KU_TANH: case KU_ERF: case KU_NDTR: case KU_SIN: case KU_COS: return true;
    default: return false;
    }
}
/* Does a statement of the list (or of a list under it) compute an expression marked in `under`? */
static bool list_chain(const KirKernel *k, const bool *under, int s, int *budget) {
    for (; s >= 0 && s < k->stmts.len && (*budget)-- > 0; s = k->stmts.data[s].next) {
        const KirStmt *st = &k->stmts.data[s];
        int ops[3] = {st->a, st->b, st->c};
        for (int j = 0; j < 3; j++)
            if (ops[j] >= 0 && ops[j] < k->exprs.len && under[ops[j]]) return true;
        if (list_chain(k, under, st->body, budget) || list_chain(k, under, st->body2, budget)) return true;
    }
    return false;
}
/* The interleave count of a pointwise kernel's thread loop `st` whose vector iteration covers
 * `words` loop iterations a copy (1: none). Only a loop of constant bounds whose trip count is a
 * multiple of the four copies' step, or at least 32 of them: interleaving lengthens the step,
 * and what is left over runs as scalar code (the scalar GELU is 10x the vector's time an
 * element), so a short row (C = 40 at 8 lanes: 5 vector iterations, or 1 and 8 scalar) keeps
 * its one copy. */
static int interleave_count(Cg *g, const KirStmt *st, int64_t words) {
    const KirKernel *k = g->k;
    if (!k->kind || strcmp(k->kind, "pointwise") != 0 || words <= 0) return 1;
    const KirExpr *lo = st->a >= 0 && st->a < k->exprs.len ? &k->exprs.data[st->a] : NULL;
    const KirExpr *hi = st->b >= 0 && st->b < k->exprs.len ? &k->exprs.data[st->b] : NULL;
    if (!lo || !hi || lo->kind != KE_CONST || hi->kind != KE_CONST) return 1;
    int64_t trip = hi->ival - lo->ival, step = words * INTERLEAVE;
    if (trip <= 0 || (trip % step != 0 && trip < 32 * step)) return 1;
    /* under[e]: e is such math or has it among its operands, at any depth (operands have
     * smaller ids: one pass) */
    bool *under = fc_calloc((size_t)k->exprs.len + 1, sizeof *under);
    if (!under) return 1;   /* one copy: the same program, only slower */
    for (int e = 0; e < k->exprs.len; e++) {
        const KirExpr *x = &k->exprs.data[e];
        int ops[3] = {x->a, x->b, x->c};
        under[e] = chain_op(x);
        for (int j = 0; j < 3 && !under[e]; j++) under[e] = ops[j] >= 0 && ops[j] < e && under[ops[j]];
    }
    int budget = k->stmts.len + 1;
    bool any = list_chain(k, under, st->body, &budget);
    fc_free(under);
    return any ? INTERLEAVE : 1;
}
/* The loop ID of a thread loop: its interleave count (> 1), and (`width` > 0) the vector width. */
static void thread_loop_md(Cg *g, LLVMValueRef latch, int count, int width) {
    LLVMMetadataRef attrs[2];
    unsigned n = 0;
    if (count > 1) {
        LLVMMetadataRef c[2] = {LLVMMDStringInContext2(g->ctx, "llvm.loop.interleave.count", 26),
                                LLVMValueAsMetadata(ci(g->t32, count))};
        attrs[n++] = LLVMMDNodeInContext2(g->ctx, c, 2);
    }
    if (width > 0) {
        LLVMMetadataRef w[2] = {LLVMMDStringInContext2(g->ctx, "llvm.loop.vectorize.width", 25),
                                LLVMValueAsMetadata(ci(g->t32, width))};
        attrs[n++] = LLVMMDNodeInContext2(g->ctx, w, 2);
    }
    if (n) loop_md(g, latch, attrs, n);
}

/* Does the statement list (or an expression in it) touch a thread array? */
static bool expr_uses_ta(const KirKernel *k, int id) {
    if (id < 0 || id >= k->exprs.len) return false;
    const KirExpr *e = &k->exprs.data[id];
    if (e->kind == KE_TLOAD) return true;
    int ops[3] = {e->a, e->b, e->c};
    for (int j = 0; j < 3; j++)
        if (ops[j] >= 0 && ops[j] < id && expr_uses_ta(k, ops[j])) return true;
    return false;
}
static bool list_uses_ta(const KirKernel *k, int s, int *budget) {
    for (; s >= 0 && s < k->stmts.len && (*budget)-- > 0; s = k->stmts.data[s].next) {
        const KirStmt *st = &k->stmts.data[s];
        if (st->kind == KS_TSTORE) return true;
        if (expr_uses_ta(k, st->a) || expr_uses_ta(k, st->b) || expr_uses_ta(k, st->c)) return true;
        if (list_uses_ta(k, st->body, budget) || list_uses_ta(k, st->body2, budget)) return true;
    }
    return false;
}

/* ---- prefetching the next block (row kernels) ----------------------------------------------
 * A block of a row-reduction kernel reads its rows, reduces, and only then computes and
 * writes: while it computes, no load of the next row is in flight, and the hardware prefetchers
 * (which stop at 4 KiB pages; a row is often exactly a page) do not fetch it either, so memory
 * and arithmetic alternate instead of overlapping. In kernels with a block reduction, each
 * block therefore prefetches what block + PF_DIST of its chunk will read (prefetch) and write
 * (prefetchw) in its top-level thread loops and reductions. Every access whose index is affine,
 * a*block + b*i + c with i the loop variable over constant bounds [lo, hi), b >= 0 and a != 0,
 * gives a byte range of that block (ranges deduplicated, at most PF_MAX_BYTES each). The
 * prefetches go to L2 (locality 2: next to the current rows of x, y, r and the result and the
 * parameter rows, the next rows would overflow L1's 8 ways) and are spread over the strips of
 * the last top-level thread loop (st_for), else issued when the block starts. A prefetch has
 * no effect on results. */
typedef struct PfScan { const KirKernel *k; const int *defs; Pf pf[PF_MAX]; int n; } PfScan;

/* expression id as a*block + b*var(lv) + c; false when it is not of that form */
static bool aff_of(const KirKernel *k, const int *defs, int id, int lv, int depth, Aff *out) {
    if (id < 0 || id >= k->exprs.len || depth > 64) return false;
    const KirExpr *e = &k->exprs.data[id];
    Aff x, y;
    switch (e->kind) {
    case KE_CONST:
        if (!is_int(e->type)) return false;
        *out = (Aff){0, 0, (uint64_t)e->ival};
        return true;
    case KE_BLOCK_IDX: *out = (Aff){1, 0, 0}; return true;
    case KE_VAR:
        if (e->ref == lv) { *out = (Aff){0, 1, 0}; return true; }
        if (e->ref < 0 || e->ref >= k->vars.len || defs[e->ref] < 0) return false;
        return aff_of(k, defs, defs[e->ref], lv, depth + 1, out);
    case KE_CAST:
        return is_int(e->type) && e->a >= 0 && e->a < k->exprs.len && is_int(k->exprs.data[e->a].type) &&
               aff_of(k, defs, e->a, lv, depth + 1, out);
    case KE_BINARY: {
        int same = divrem_identity(k, e);
        if (same >= 0) return aff_of(k, defs, same, lv, depth + 1, out);
        if (!is_int(e->type) || !aff_of(k, defs, e->a, lv, depth + 1, &x) || !aff_of(k, defs, e->b, lv, depth + 1, &y))
            return false;
        if (e->op == KB_ADD) { *out = (Aff){x.a + y.a, x.b + y.b, x.c + y.c}; return true; }
        if (e->op == KB_SUB) { *out = (Aff){x.a - y.a, x.b - y.b, x.c - y.c}; return true; }
        if (e->op == KB_MUL) {
            if (x.a == 0 && x.b == 0) { *out = (Aff){y.a * x.c, y.b * x.c, y.c * x.c}; return true; }
            if (y.a == 0 && y.b == 0) { *out = (Aff){x.a * y.c, x.b * y.c, x.c * y.c}; return true; }
        }
        return false;
    }
    default: return false;
    }
}

static void pf_add(PfScan *s, int param, bool write, int idx, int lv, int64_t lo, int64_t hi) {
    Aff f;
    if (param < 0 || param >= s->k->params.len || !aff_of(s->k, s->defs, idx, lv, 0, &f)) return;
    if (f.a == 0 || (int64_t)f.b < 0 || (int64_t)f.b > PF_MAX_BYTES || hi - lo > PF_MAX_BYTES) return;
    int64_t es = (int64_t)fc_dtype_size(s->k->params.data[param].dtype);
    if (es <= 0 || (int64_t)f.b * (hi - 1 - lo) + 1 > PF_MAX_BYTES / es) return;
    for (int i = 0; i < s->n; i++) {
        Pf *q = &s->pf[i];
        if (q->param == param && q->f.a == f.a && q->f.b == f.b && q->f.c == f.c && q->lo == lo && q->hi == hi) {
            q->write = q->write || write;
            return;
        }
    }
    if (s->n < PF_MAX) s->pf[s->n++] = (Pf){param, write, f, lo, hi};
}
static void pf_expr(PfScan *s, int id, int lv, int64_t lo, int64_t hi, int depth) {
    if (id < 0 || id >= s->k->exprs.len || depth > 256) return;
    const KirExpr *e = &s->k->exprs.data[id];
    if (e->kind == KE_LOAD) pf_add(s, e->ref, false, e->a, lv, lo, hi);
    int ops[3] = {e->a, e->b, e->c};
    for (int j = 0; j < 3; j++)
        if (ops[j] >= 0 && ops[j] < id && e->kind != KE_CONST) pf_expr(s, ops[j], lv, lo, hi, depth + 1);
}
/* the accesses of one thread loop's body (lv over [lo, hi)) */
static void pf_body(PfScan *s, int st, int lv, int64_t lo, int64_t hi, int *budget) {
    for (; st >= 0 && st < s->k->stmts.len && (*budget)-- > 0; st = s->k->stmts.data[st].next) {
        const KirStmt *x = &s->k->stmts.data[st];
        if (x->kind == KS_STORE) pf_add(s, x->ref, true, x->a, lv, lo, hi);
        pf_expr(s, x->a, lv, lo, hi, 0);
        pf_expr(s, x->b, lv, lo, hi, 0);
        pf_expr(s, x->c, lv, lo, hi, 0);
        pf_body(s, x->body, lv, lo, hi, budget);
        pf_body(s, x->body2, lv, lo, hi, budget);
    }
}
/* Whether expression id is a value KE_ROUND made to bf16 (and so exactly a bf16 value, a NaN
 * quiet with a zero low half): the rounding itself, a variable let once (and never assigned) to
 * one, a shared array every store of which writes one (a kept row of a rounded sum). */
static bool exact_bf16(const KirKernel *k, int id, int depth) {
    if (id < 0 || id >= k->exprs.len || depth > 8) return false;
    const KirExpr *e = &k->exprs.data[id];
    if (e->kind == KE_ROUND) return e->dtype == FC_BF16 && e->type == KT_F32;
    if (e->kind == KE_VAR) {
        int def = -1, lets = 0;
        for (int s = 0; s < k->stmts.len; s++) {
            const KirStmt *x = &k->stmts.data[s];
            if (x->var != e->ref) continue;
            if (x->kind == KS_LET) { def = x->a; lets++; }
            else if (x->kind == KS_ASSIGN || x->kind == KS_FOR || x->kind == KS_REDUCE) return false;
        }
        return lets == 1 && exact_bf16(k, def, depth + 1);
    }
    if (e->kind == KE_SHLOAD) {
        int stores = 0;
        for (int s = 0; s < k->stmts.len; s++) {
            const KirStmt *x = &k->stmts.data[s];
            if (x->kind != KS_SHSTORE || x->ref != e->ref) continue;
            if (!exact_bf16(k, x->b, depth + 1)) return false;
            stores++;
        }
        return stores > 0;
    }
    return false;
}

/* ---- block-invariant staging ---------------------------------------------------------------
 * A statement at the head of a kernel's body that depends on nothing of the block: a thread
 * loop whose body only stores to shared arrays based at a constant (KirShared.base) that no
 * other statement writes, from expressions of its own variable, constants and loads of params
 * the kernel does not write (the lowering's stage_whole: a row kernel's weights staged widened).
 * Each block would store the same values, so the CPU runs it once per chunk, before the loop
 * over the blocks; a barrier between such loops goes with them. */
static bool invariant_expr(const KirKernel *k, int id, int lv, int depth) {
    if (id < 0 || id >= k->exprs.len || depth > 64) return false;
    const KirExpr *e = &k->exprs.data[id];
    switch (e->kind) {
    case KE_CONST: return true;
    case KE_VAR: return e->ref == lv;
    case KE_LOAD:
        if (e->ref < 0 || e->ref >= k->params.len || k->params.data[e->ref].written) return false;
        return invariant_expr(k, e->a, lv, depth + 1);
    case KE_UNARY: case KE_CAST: case KE_ROUND: return invariant_expr(k, e->a, lv, depth + 1);
    case KE_BINARY: return invariant_expr(k, e->a, lv, depth + 1) && invariant_expr(k, e->b, lv, depth + 1);
    case KE_SELECT:
        return invariant_expr(k, e->a, lv, depth + 1) && invariant_expr(k, e->b, lv, depth + 1) &&
               invariant_expr(k, e->c, lv, depth + 1);
    default: return false;   /* the block index, shared and thread arrays, Philox */
    }
}
static bool invariant_stmt(const KirKernel *k, int s) {
    if (s < 0 || s >= k->stmts.len) return false;
    const KirStmt *x = &k->stmts.data[s];
    if (x->kind == KS_BARRIER) return true;
    if (x->kind != KS_FOR || x->loop != KIR_LOOP_THREADS || x->body < 0 || !invariant_expr(k, x->a, -1, 0) ||
        !invariant_expr(k, x->b, -1, 0))
        return false;
    for (int b = x->body, n = 0; b >= 0; b = k->stmts.data[b].next, n++) {
        if (b >= k->stmts.len || n > k->stmts.len) return false;
        const KirStmt *y = &k->stmts.data[b];
        if (y->kind != KS_SHSTORE || y->ref < 0 || y->ref >= k->shared.len) return false;
        int base = k->shared.data[y->ref].base;
        if (base < 0 || base >= k->exprs.len || k->exprs.data[base].kind != KE_CONST) return false;
        if (!invariant_expr(k, y->a, x->var, 0) || !invariant_expr(k, y->b, x->var, 0)) return false;
        for (int t = 0; t < k->stmts.len; t++)   /* the only writer of its array */
            if (t != b && k->stmts.data[t].kind == KS_SHSTORE && k->stmts.data[t].ref == y->ref) return false;
    }
    return true;
}
/* The first statement of the body after its block-invariant head (the body itself if none). */
static int invariant_head_end(const KirKernel *k) {
    int s = k->body, n = 0;
    while (s >= 0 && s < k->stmts.len && n++ <= k->stmts.len && invariant_stmt(k, s)) s = k->stmts.data[s].next;
    return s;
}

/* Collects the prefetch ranges of a kernel with a block reduction (none otherwise); -1 when
 * out of memory. */
static int pf_scan(const KirKernel *k, int first, bool nt, Pf *out, int *strip_loop, int64_t *trips) {
    *strip_loop = -1;
    bool red = false;
    for (int i = 0; i < k->stmts.len; i++) red = red || k->stmts.data[i].kind == KS_REDUCE;
    if (!red) return 0;
    int *defs = fc_calloc((size_t)k->vars.len + 1, sizeof *defs);
    if (!defs) return -1;   /* out of memory: fail, so the output never depends on it */
    for (int i = 0; i < k->vars.len; i++) defs[i] = -1;
    for (int s = k->body, n = 0; s >= 0 && s < k->stmts.len && n < k->stmts.len; s = k->stmts.data[s].next, n++)
        if (k->stmts.data[s].kind == KS_LET && k->stmts.data[s].var >= 0 && k->stmts.data[s].var < k->vars.len)
            defs[k->stmts.data[s].var] = defs[k->stmts.data[s].var] == -1 ? k->stmts.data[s].a : -2;
    for (int i = 0; i < k->stmts.len; i++)   /* reassigned variables are not affine facts */
        if (k->stmts.data[i].kind == KS_ASSIGN && k->stmts.data[i].var >= 0 && k->stmts.data[i].var < k->vars.len)
            defs[k->stmts.data[i].var] = -2;
    PfScan s = {k, defs, {{0}}, 0};
    int budget = k->stmts.len + 1;
    for (int st = first, n = 0; st >= 0 && st < k->stmts.len && n < k->stmts.len; st = k->stmts.data[st].next, n++) {
        const KirStmt *x = &k->stmts.data[st];
        bool loop = (x->kind == KS_FOR && x->loop == KIR_LOOP_THREADS) || x->kind == KS_REDUCE;
        int lv = x->kind == KS_REDUCE ? x->loop_var : x->var;
        Aff lo, hi;
        if (!loop || !aff_of(k, defs, x->a, -1, 0, &lo) || !aff_of(k, defs, x->b, -1, 0, &hi) || lo.a || hi.a ||
            (int64_t)lo.c >= (int64_t)hi.c)
            continue;
        pf_body(&s, x->body, lv, (int64_t)lo.c, (int64_t)hi.c, &budget);
        if (x->kind == KS_REDUCE) pf_expr(&s, x->c, lv, (int64_t)lo.c, (int64_t)hi.c, 0);
        int tb = k->stmts.len + 1;
        if (x->kind == KS_FOR && !list_uses_ta(k, x->body, &tb) && (int64_t)hi.c - (int64_t)lo.c >= 2 * PF_STRIP) {
            *strip_loop = st;
            *trips = (int64_t)hi.c - (int64_t)lo.c;
        }
    }
    fc_free(defs);
    int n = 0;
    for (int i = 0; i < s.n; i++)   /* non-temporal stores do not want their lines in a cache */
        if (!(nt && s.pf[i].write && k->params.data[s.pf[i].param].stream)) out[n++] = s.pf[i];
    return n;
}
static LLVMValueRef pf_call(Cg *g, LLVMValueRef p, bool write) {
    LLVMTypeRef tp = g->tp;
    LLVMValueRef args[4] = {p, ci(g->t32, write ? 1 : 0), ci(g->t32, 2), ci(g->t32, 1)};
    return call_intr(g, "llvm.prefetch", &tp, 1, args, 4);
}
static int64_t pf_bytes(Cg *g, const Pf *p) {
    return ((int64_t)p->f.b * (p->hi - 1 - p->lo) + 1) * (int64_t)fc_dtype_size(g->k->params.data[p->param].dtype);
}
/* At block start: the first byte of each range in block + PF_DIST; without a strip loop, all
 * the prefetches at once (if that block is in this chunk). */
static void pf_block_start(Cg *g, LLVMValueRef block_end) {
    if (g->pf_n == 0) return;
    LLVMValueRef nb = LLVMBuildAdd(g->b, LLVMBuildLoad2(g->b, g->t64, g->blk, ""), ci(g->t64, PF_DIST), "");
    for (int i = 0; i < g->pf_n; i++) {
        const Pf *p = &g->pf[i];
        int64_t es = (int64_t)fc_dtype_size(g->k->params.data[p->param].dtype);
        LLVMValueRef first = LLVMBuildAdd(g->b, LLVMBuildMul(g->b, nb, ci(g->t64, (int64_t)p->f.a), ""),
                                          ci(g->t64, (int64_t)(p->f.b * (uint64_t)p->lo + p->f.c)), "");
        LLVMValueRef off = LLVMBuildMul(g->b, first, ci(g->t64, es), "");
        g->pf_base[i] = LLVMBuildGEP2(g->b, g->t8, g->prm[p->param], &off, 1, "");
    }
    if (g->pf_loop >= 0) return;
    LLVMBasicBlockRef yes = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "pf");
    LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "pf.end");
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, nb, block_end, ""), yes, join);
    LLVMPositionBuilderAtEnd(g->b, yes);
    for (int i = 0; i < g->pf_n; i++)
        for (int64_t off = 0; off < pf_bytes(g, &g->pf[i]); off += 64)
            pf_call(g, LLVMBuildGEP2(g->b, g->t8, g->pf_base[i], (LLVMValueRef[]){ci(g->t64, off)}, 1, ""), g->pf[i].write);
    LLVMBuildBr(g->b, join);
    LLVMPositionBuilderAtEnd(g->b, join);
}
/* Strip j of `nstrips` of the strip loop: lines [j q, (j + 1) q) of each range, q = its lines
 * / nstrips rounded up (a few lines past a range's end may be prefetched: harmless). */
static void pf_strip(Cg *g, LLVMValueRef j, int64_t nstrips) {
    for (int i = 0; i < g->pf_n; i++) {
        int64_t lines = (pf_bytes(g, &g->pf[i]) + 63) / 64, q = (lines + nstrips - 1) / nstrips;
        LLVMValueRef first = LLVMBuildMul(g->b, j, ci(g->t64, q * 64), "");
        for (int64_t m = 0; m < q; m++) {
            LLVMValueRef off = LLVMBuildAdd(g->b, first, ci(g->t64, m * 64), "");
            pf_call(g, LLVMBuildGEP2(g->b, g->t8, g->pf_base[i], &off, 1, ""), g->pf[i].write);
        }
    }
}

/* ---- statements ------------------------------------------------------------------------- */
static bool st_list(Cg *g, int s);

static bool declare(Cg *g, int var, KirType t) {
    if (var < 0 || var >= g->k->vars.len) return failf(g, FC_ERR_INTERNAL, "bad var %d", var);
    if (g->k->vars.data[var].type != t)
        return failf(g, FC_ERR_INTERNAL, "v%d is %s, given %s", var,
                     kir_type_name(g->k->vars.data[var].type), kir_type_name(t));
    g->var_level[var] = (signed char)g->level;
    return true;
}

/* A thread loop split into rounds of `block` iterations: slot t = (i - lo) % block.
 * `per_iter` runs for each iteration with var = base + t (and the slot set). */
typedef bool (*IterFn)(Cg *g, const KirStmt *st, void *ctx);
static bool iter_reduce(Cg *g, const KirStmt *st, void *ctx);
static bool split_thread_loop(Cg *g, int var, LLVMValueRef lo, LLVMValueRef hi, IterFn fn,
                              const KirStmt *st, void *ctx) {
    LLVMTypeRef t = ktype(g, g->k->vars.data[var].type);
    int block = g->k->block;
    /* a reduction of fewer lanes (KirStmt.lanes): rounds of `lanes`, the other slots keep the
     * identity */
    if (fn == iter_reduce && st->lanes > 0 && st->lanes < block) block = st->lanes;
    LLVMValueRef base = entry_alloca(g, t, 1, "round");
    LLVMValueRef tc = entry_alloca(g, t, 1, "tid");
    Loop outer, inner;
    loop_open(g, &outer, base, t, lo, hi);
    LLVMValueRef b0 = LLVMBuildLoad2(g->b, t, base, "");
    LLVMValueRef n = intr2(g, "llvm.smin", LLVMBuildNSWSub(g->b, hi, b0, ""), ci(t, block));
    if (!n) return false;
    loop_open(g, &inner, tc, t, ci(t, 0), n);
    LLVMValueRef tv = LLVMBuildLoad2(g->b, t, tc, "");
    LLVMValueRef b1 = LLVMBuildLoad2(g->b, t, base, "");
    LLVMBuildStore(g->b, LLVMBuildNSWAdd(g->b, b1, tv, ""), g->var[var]);
    LLVMBuildStore(g->b, t == g->t64 ? tv : LLVMBuildSExt(g->b, tv, g->t64, ""), g->slot);
    bool was = g->slot_valid;
    g->slot_valid = true;
    bool ok = fn(g, st, ctx);
    g->slot_valid = was;
    if (!ok) return false;
    no_unroll(g, loop_close(g, &inner, 1), fn == iter_reduce && block <= 64);
    loop_close(g, &outer, block);
    return true;
}
static bool iter_body(Cg *g, const KirStmt *st, void *ctx) {
    (void)ctx;
    return st_list(g, st->body);
}

/* ---- bf16 pairs (docs/cpu.md "bf16 in pairs") ----------------------------------------------
 * A thread loop whose only accesses along its variable are bf16 loads and stores at unit stride
 * (index = var + something the loop does not change) runs two iterations at a time: each such
 * load reads both elements as one i32 word (the even element is the low half: w << 16, the odd
 * one w & 0xffff0000, each already the f32 value), the body is emitted once per element, and
 * each store writes both codes as one word. Vectorized, that is one plain vector load and a
 * shift or an and per vector of values, and an or per two vectors stored, where the one-element
 * form widens (vpmovzxwd, two shuffle-port uops, and a shift) and narrows (vpackusdw and vpermq
 * at AVX2): llvm-mca (znver3) puts the bf16 chain kernel at 0.50 cycles an element against 0.68
 * at x86-64-v3. Every element gets exactly the value it gets one at a time: the pair's order is
 * the loop's, a load's word is the two elements' bits (the host is little-endian: the even one
 * is the low half), and the body (lets and stores only) is the same code. Not paired: loops with
 * other statements, other unit-stride accesses (an f32 load there would become an interleaved
 * load), a stored param that is also read, or params that may overlap. */
enum { PAIR_INV = 0, PAIR_UNIT = 1, PAIR_NO = -1 };
/* index expression id as a function of the loop variable lv: invariant, lv + invariant, or
 * anything else; defs: the expression each let of the body gives its variable (-1 none, -2 two) */
static int pair_index(const KirKernel *k, const int *defs, int lv, int id, int depth) {
    if (id < 0 || id >= k->exprs.len || depth > 64) return PAIR_NO;
    const KirExpr *e = &k->exprs.data[id];
    switch (e->kind) {
    case KE_CONST: case KE_BLOCK_IDX: return PAIR_INV;
    case KE_VAR:
        if (e->ref == lv) return is_int(e->type) ? PAIR_UNIT : PAIR_NO;
        if (e->ref < 0 || e->ref >= k->vars.len || defs[e->ref] == -2) return PAIR_NO;
        return defs[e->ref] >= 0 ? pair_index(k, defs, lv, defs[e->ref], depth + 1) : PAIR_INV;
    case KE_BINARY: {
        int same = divrem_identity(k, e);
        if (same >= 0) return pair_index(k, defs, lv, same, depth + 1);
        int x = pair_index(k, defs, lv, e->a, depth + 1), y = pair_index(k, defs, lv, e->b, depth + 1);
        if (x == PAIR_NO || y == PAIR_NO) return PAIR_NO;
        if (x == PAIR_INV && y == PAIR_INV) return PAIR_INV;
        if (!is_int(e->type)) return PAIR_NO;
        if (e->op == KB_ADD && x + y == PAIR_UNIT) return PAIR_UNIT;
        if (e->op == KB_SUB && x == PAIR_UNIT && y == PAIR_INV) return PAIR_UNIT;
        return PAIR_NO;
    }
    case KE_CAST: {   /* an integer widening of lv + c: both elements' indices are in range */
        int x = pair_index(k, defs, lv, e->a, depth + 1);
        return x == PAIR_UNIT && !(is_int(e->type) && is_int(k->exprs.data[e->a].type)) ? PAIR_NO : x;
    }
    case KE_LOAD: return pair_index(k, defs, lv, e->a, depth + 1) == PAIR_INV ? PAIR_INV : PAIR_NO;
    case KE_UNARY: case KE_ROUND: case KE_SELECT: case KE_PHILOX: {
        int ops[3] = {e->a, e->b, e->c};
        for (int j = 0; j < 3; j++)
            if (ops[j] >= 0 && pair_index(k, defs, lv, ops[j], depth + 1) != PAIR_INV) return PAIR_NO;
        return PAIR_INV;
    }
    default: return PAIR_NO;   /* shared and thread arrays */
    }
}
/* Marks the loads of expression id; false where the loop cannot be paired. `written`: per
 * param, stored by the body. */
static bool pair_expr(Cg *g, const int *defs, const unsigned char *written, int lv, int id, int depth) {
    const KirKernel *k = g->k;
    if (id < 0) return true;
    if (id >= k->exprs.len || depth > 256) return false;
    const KirExpr *e = &k->exprs.data[id];
    if (e->kind == KE_SHLOAD || e->kind == KE_TLOAD) return false;
    if (e->kind == KE_LOAD) {
        if (e->ref < 0 || e->ref >= k->params.len || written[e->ref]) return false;
        int c = pair_index(k, defs, lv, e->a, 0);
        if (c == PAIR_NO || (c == PAIR_UNIT && k->params.data[e->ref].dtype != FC_BF16)) return false;
        g->pair_load[id] = c == PAIR_UNIT;
    }
    if (e->kind == KE_CONST) return true;
    int ops[3] = {e->a, e->b, e->c};
    for (int j = 0; j < 3; j++)
        if (ops[j] >= 0 && !pair_expr(g, defs, written, lv, ops[j], depth + 1)) return false;
    return true;
}
static bool pair_loop(Cg *g, const KirStmt *st) {
    const KirKernel *k = g->k;
    const union { uint16_t u; unsigned char c[2]; } host = {1};
    if (host.c[0] != 1 || !g->noalias || st->loop != KIR_LOOP_THREADS || st->body < 0) return false;
    int *defs = fc_calloc((size_t)k->vars.len + 1, sizeof *defs);
    unsigned char *written = fc_calloc((size_t)k->params.len + 1, 1);
    bool ok = defs && written, any = false;
    for (int i = 0; ok && i < k->vars.len; i++) defs[i] = -1;
    memset(g->pair_load, 0, (size_t)k->exprs.len);
    int n = 0;
    for (int s = st->body; ok && s >= 0; s = k->stmts.data[s].next, n++) {
        if (s >= k->stmts.len || n > k->stmts.len) { ok = false; break; }
        const KirStmt *x = &k->stmts.data[s];
        if (x->kind == KS_LET && x->var >= 0 && x->var < k->vars.len && x->var != st->var)
            defs[x->var] = defs[x->var] == -1 ? x->a : -2;
        else if (x->kind == KS_STORE && x->ref >= 0 && x->ref < k->params.len)
            written[x->ref] = 1;
        else
            ok = false;
    }
    for (int s = st->body; ok && s >= 0; s = k->stmts.data[s].next) {
        const KirStmt *x = &k->stmts.data[s];
        g->pair_store[s] = 0;
        if (x->kind == KS_STORE) {
            int c = pair_index(k, defs, st->var, x->a, 0);
            if (c != PAIR_UNIT || k->params.data[x->ref].dtype != FC_BF16) { ok = false; break; }
            g->pair_store[s] = 1;
            any = true;
        }
        ok = pair_expr(g, defs, written, st->var, x->a, 0) && pair_expr(g, defs, written, st->var, x->b, 0);
    }
    for (int i = 0; ok && !any && i < k->exprs.len; i++) any = g->pair_load[i];
    fc_free(defs);
    fc_free(written);
    return ok && any;
}
/* The body of the paired loop, emitted once more: its statements may be reached again. */
static bool pair_body(Cg *g, const KirStmt *st, int lane) {
    for (int s = st->body; s >= 0; s = g->k->stmts.data[s].next) g->seen[s] = 0;
    g->pair_lane = lane;
    bool ok = st_list(g, st->body);
    g->pair_lane = 0;
    return ok;
}
/* pair_emit sets the paired loop's vector width at AVX-512: 16 words, each half a zmm of f32.
 * The vectorizer sizes vectors by the narrowest type, the i16 codes before pairing and the i32
 * words now; with 256-bit vectors preferred (x86-64-v4 and AVX-512 hosts) it would run the
 * arithmetic in ymm instead of zmm, half the work an instruction. At AVX2 and SSE its own choice (8 and 4 words)
 * is the one-element loop's width; forcing 16 there ran a GELU-tanh kernel 1.3x slower at
 * x86-64-v3 (two copies of the body at twice the width spill; interleaving, below, is not
 * that: four copies at the chosen width, in pointwise kernels with vector math only). */
/* for (v = lo; v + 1 < hi; v += 2) { even; odd }  if (v < hi) { one } */
static bool pair_emit(Cg *g, const KirStmt *st, LLVMValueRef lo, LLVMValueRef hi) {
    LLVMTypeRef t = ktype(g, g->k->vars.data[st->var].type);
    LLVMValueRef n = intr2(g, "llvm.smax", LLVMBuildNSWSub(g->b, hi, lo, ""), ci(t, 0));
    if (!n) return false;
    LLVMValueRef even_hi = LLVMBuildNSWAdd(g->b, lo, LLVMBuildAnd(g->b, n, ci(t, -2), ""), "");
    LLVMValueRef ctr = g->var[st->var];
    Loop L;
    loop_open(g, &L, ctr, t, lo, even_hi);
    if (!pair_body(g, st, 1)) return false;
    LLVMBuildStore(g->b, LLVMBuildNSWAdd(g->b, LLVMBuildLoad2(g->b, t, ctr, ""), ci(t, 1), ""), ctr);
    if (!pair_body(g, st, 2)) return false;
    LLVMValueRef latch = loop_close(g, &L, 1);
    /* a vector iteration of the paired loop covers vector_bytes / 4 pairs (the vectorizer's
     * choice: a vector of i32 words), the trip count is in elements. At AVX-512 (16 words, two
     * bodies in zmm) it keeps one copy: llvm-mca (icelake-server, sapphirerapids, znver4) puts
     * the bf16 GELU's loop at 83-84 cycles per 32 elements with one copy, 85-90 with four (spills) */
    if (g->vector_bytes == 64) thread_loop_md(g, latch, 1, 16);
    else thread_loop_md(g, latch, interleave_count(g, st, 2 * (int64_t)(g->vector_bytes / 4)), 0);
    LLVMBasicBlockRef one = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "pair.last");
    LLVMBasicBlockRef end = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "pair.end");
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, even_hi, hi, ""), one, end);
    LLVMPositionBuilderAtEnd(g->b, one);
    LLVMBuildStore(g->b, even_hi, ctr);
    if (!pair_body(g, st, 0)) return false;
    LLVMBuildBr(g->b, end);
    LLVMPositionBuilderAtEnd(g->b, end);
    return true;
}

static bool st_for(Cg *g, const KirStmt *st) {
    const KirKernel *k = g->k;
    if (st->var < 0 || st->var >= k->vars.len) return failf(g, FC_ERR_INTERNAL, "bad loop var");
    KirType vt = k->vars.data[st->var].type;
    if (!is_int(vt)) return failf(g, FC_ERR_INTERNAL, "loop var v%d is not an integer", st->var);
    LLVMValueRef lo = ex_typed(g, st->a, vt, "loop bound");
    LLVMValueRef hi = lo ? ex_typed(g, st->b, vt, "loop bound") : NULL;
    if (!hi) return false;
    bool threads = st->loop == KIR_LOOP_THREADS;
    if (threads && g->level != 0) return failf(g, FC_ERR_INTERNAL, "thread loops nest");
    int saved = g->level;
    if (threads) g->level = 1;
    bool ok = declare(g, st->var, vt);
    if (ok && threads) {
        int budget = k->stmts.len + 1;
        if (list_uses_ta(k, st->body, &budget)) {
            ok = split_thread_loop(g, st->var, lo, hi, iter_body, st, NULL);
            g->level = saved;
            return ok;
        }
    }
    if (ok && g->pf_n > 0 && g->pf_loop >= 0 && st == &k->stmts.data[g->pf_loop]) {
        /* the loop that prefetches the next block: strips of PF_STRIP iterations, each
         * issuing its share of the prefetches (a prefetch inside the vectorized loop would
         * stop vectorization); the bounds are constants here (pf_scan) */
        LLVMTypeRef t = ktype(g, vt);
        int64_t nstrips = (g->pf_trips + PF_STRIP - 1) / PF_STRIP;
        LLVMValueRef sv = entry_alloca(g, t, 1, "strip");
        Loop O, L;
        loop_open(g, &O, sv, t, lo, hi);
        LLVMValueRef c = LLVMBuildLoad2(g->b, t, sv, "");
        LLVMValueRef j = LLVMBuildUDiv(g->b, LLVMBuildSub(g->b, c, lo, ""), ci(t, PF_STRIP), "");
        pf_strip(g, t == g->t64 ? j : LLVMBuildZExt(g->b, j, g->t64, ""), nstrips);
        LLVMValueRef e = intr2(g, "llvm.smin", LLVMBuildNSWAdd(g->b, c, ci(t, PF_STRIP), ""), hi);
        ok = e != NULL;
        if (ok) {
            loop_open(g, &L, g->var[st->var], t, c, e);
            ok = st_list(g, st->body);
            if (ok) loop_close(g, &L, 1);
            if (ok) loop_close(g, &O, PF_STRIP);
        }
    } else if (ok && threads && pair_loop(g, st)) {
        ok = pair_emit(g, st, lo, hi);
    } else if (ok) {
        Loop L;
        loop_open(g, &L, g->var[st->var], ktype(g, vt), lo, hi);
        ok = st_list(g, st->body);
        if (ok) {
            LLVMValueRef latch = loop_close(g, &L, 1);
            if (threads) thread_loop_md(g, latch, interleave_count(g, st, g->vector_bytes / 4), 0);
        }
    }
    g->level = saved;
    return ok;
}

/* ---- block reductions -------------------------------------------------------------------- */
typedef struct RedCtx { LLVMValueRef part; KirType t; LLVMTypeRef lt; } RedCtx;

static LLVMValueRef red_identity(Cg *g, KirRedOp op, KirType t) {
    LLVMTypeRef lt = ktype(g, t);
    if (is_float(t)) {
        if (op == KR_SUM) return LLVMConstReal(lt, 0.0); /* as the CUDA backend */
        return LLVMConstReal(lt, op == KR_MAX ? -__builtin_inf() : __builtin_inf());
    }
    if (is_int(t)) {
        if (op == KR_SUM) return ci(lt, 0);
        int64_t mx = t == KT_I32 ? INT32_MAX : INT64_MAX;
        int64_t mn = t == KT_I32 ? INT32_MIN : INT64_MIN;
        return ci(lt, op == KR_MAX ? mn : mx);
    }
    if (t == KT_BOOL && op != KR_SUM) return LLVMConstInt(lt, op == KR_MIN, 0);
    return BAD(g, "reduce_%s of %s", kir_redop_name(op), kir_type_name(t));
}
static LLVMValueRef red_op(Cg *g, KirRedOp op, KirType t, LLVMValueRef a, LLVMValueRef b) {
    KirBinOp bop = op == KR_SUM ? KB_ADD : op == KR_MAX ? KB_MAX : KB_MIN;
    if (t == KT_I64 && op == KR_SUM) return LLVMBuildAdd(g->b, a, b, ""); /* data: may wrap */
    return binop(g, bop, t, a, b);
}

static LLVMValueRef slot_gep(Cg *g, RedCtx *r, LLVMValueRef arr, LLVMValueRef i) {
    return LLVMBuildInBoundsGEP2(g->b, r->lt, arr, &i, 1, "");
}

static bool iter_reduce(Cg *g, const KirStmt *st, void *ctx) {
    RedCtx *r = ctx;
    if (!st_list(g, st->body)) return false;
    g->gen++;
    LLVMValueRef v = ex_typed(g, st->c, r->t, "reduced value");
    if (!v) return false;
    LLVMValueRef p = slot_gep(g, r, r->part, LLVMBuildLoad2(g->b, g->t64, g->slot, ""));
    LLVMValueRef acc = LLVMBuildLoad2(g->b, r->lt, p, "");
    LLVMValueRef nv = red_op(g, st->redop, r->t, acc, v);
    if (!nv) return false;
    LLVMBuildStore(g->b, nv, p);
    return true;
}

/* The halving tree over `count` (1..32) lanes arr[base + 0 .. count): for off = 16, 8, 4, 2, 1,
 * lane l < off takes op(lane l, lane l + off) where lane l + off exists. Lane 0 then holds what
 * a warp's shuffle-xor butterfly leaves in lane 0 (ops are commutative), skipped lanes
 * included, exactly as the CUDA backend computes it. */
static LLVMValueRef tree32(Cg *g, RedCtx *r, KirRedOp op, LLVMValueRef arr, LLVMValueRef base, int count) {
    if (count == 32 && r->t != KT_BOOL) {
        /* a full warp as one <32 x T> value: at each level lane l takes op(lane l, lane l + off)
         * (a shuffle brings lane l + off down), the same operations in the same order as the
         * scalar tree below for the lanes that matter (l < off); lanes past 32 - off are poison
         * and never read. The backend makes it a few extract/permute + op steps per level
         * instead of the scalar chain that SLP leaves of the loop below. */
        LLVMTypeRef vt = LLVMVectorType(r->lt, 32);
        LLVMValueRef v = LLVMBuildLoad2(g->b, vt, slot_gep(g, r, arr, base), "");
        LLVMSetAlignment(v, (unsigned)LLVMABIAlignmentOfType(LLVMGetModuleDataLayout(g->mod), r->lt));
        LLVMValueRef mask[32];
        for (int off = 16; off >= 1 && v; off /= 2) {
            for (int l = 0; l < 32; l++) mask[l] = l + off < 32 ? ci(g->t32, l + off) : LLVMGetUndef(g->t32);
            LLVMValueRef sh = LLVMBuildShuffleVector(g->b, v, LLVMGetPoison(vt), LLVMConstVector(mask, 32), "");
            v = red_op(g, op, r->t, v, sh);
        }
        return v ? LLVMBuildExtractElement(g->b, v, ci(g->t32, 0), "") : NULL;
    }
    for (int off = 16; off >= 1; off /= 2) {
        for (int l = 0; l < off && l + off < count; l++) {
            LLVMValueRef pa = slot_gep(g, r, arr, LLVMBuildNSWAdd(g->b, base, ci(g->t64, l), ""));
            LLVMValueRef pb = slot_gep(g, r, arr, LLVMBuildNSWAdd(g->b, base, ci(g->t64, l + off), ""));
            LLVMValueRef x = LLVMBuildLoad2(g->b, r->lt, pa, "");
            LLVMValueRef y = LLVMBuildLoad2(g->b, r->lt, pb, "");
            LLVMValueRef z = red_op(g, op, r->t, x, y);
            if (!z) return NULL;
            LLVMBuildStore(g->b, z, pa);
        }
    }
    return LLVMBuildLoad2(g->b, r->lt, slot_gep(g, r, arr, base), "");
}

static bool st_reduce(Cg *g, const KirStmt *st) {
    const KirKernel *k = g->k;
    if (g->level != 0) return failf(g, FC_ERR_INTERNAL, "reduction inside a thread loop");
    if (st->var < 0 || st->var >= k->vars.len || st->loop_var < 0 || st->loop_var >= k->vars.len)
        return failf(g, FC_ERR_INTERNAL, "reduction with a bad var");
    if ((unsigned)st->redop >= KR_COUNT) return failf(g, FC_ERR_INTERNAL, "bad reduction op");
    KirType vt = k->vars.data[st->loop_var].type;
    if (!is_int(vt)) return failf(g, FC_ERR_INTERNAL, "reduction loop var is not an integer");
    RedCtx r = {NULL, k->vars.data[st->var].type, ktype(g, k->vars.data[st->var].type)};
    LLVMValueRef ident = red_identity(g, st->redop, r.t);
    if (!ident) return false;
    LLVMValueRef lo = ex_typed(g, st->a, vt, "reduction bound");
    LLVMValueRef hi = lo ? ex_typed(g, st->b, vt, "reduction bound") : NULL;
    if (!hi) return false;

    int block = k->block, nwarps = (block + 31) / 32;
    r.part = entry_alloca(g, r.lt, (int64_t)nwarps * 32, "part");
    /* partials start at the identity (lanes past `block` keep it) */
    LLVMValueRef ic = entry_alloca(g, g->t64, 1, "ri");
    Loop L;
    loop_open(g, &L, ic, g->t64, ci(g->t64, 0), ci(g->t64, (int64_t)nwarps * 32));
    LLVMBuildStore(g->b, ident, slot_gep(g, &r, r.part, LLVMBuildLoad2(g->b, g->t64, ic, "")));
    loop_close(g, &L, 1);

    g->level = 1;
    bool ok = declare(g, st->loop_var, vt) &&
              split_thread_loop(g, st->loop_var, lo, hi, iter_reduce, st, &r);
    g->level = 0;
    if (!ok) return false;

    /* full warps in a loop, a partial last warp on its own, then the tree over the warps */
    int nfull = block / 32, tail = block % 32;
    LLVMValueRef wt = entry_alloca(g, r.lt, 32, "warps");
    if (nfull > 0) {
        Loop W;
        loop_open(g, &W, ic, g->t64, ci(g->t64, 0), ci(g->t64, nfull));
        LLVMValueRef w = LLVMBuildLoad2(g->b, g->t64, ic, "");
        LLVMValueRef tot = tree32(g, &r, st->redop, r.part, LLVMBuildNSWMul(g->b, w, ci(g->t64, 32), ""), 32);
        if (!tot) return false;
        LLVMBuildStore(g->b, tot, slot_gep(g, &r, wt, w));
        loop_close(g, &W, 1);
    }
    if (tail > 0) {
        LLVMValueRef tot = tree32(g, &r, st->redop, r.part, ci(g->t64, (int64_t)nfull * 32), tail);
        if (!tot) return false;
        LLVMBuildStore(g->b, tot, slot_gep(g, &r, wt, ci(g->t64, nfull)));
    }
    LLVMValueRef result = tree32(g, &r, st->redop, wt, ci(g->t64, 0), nwarps);
    if (!result || !declare(g, st->var, r.t)) return false;
    LLVMBuildStore(g->b, result, g->var[st->var]);
    return true;
}

static bool st_one(Cg *g, int s) {
    const KirKernel *k = g->k;
    const KirStmt *st = &k->stmts.data[s];
    g->gen++;
    switch (st->kind) {
    case KS_LET:
    case KS_ASSIGN: {
        if (st->var < 0 || st->var >= k->vars.len) return failf(g, FC_ERR_INTERNAL, "s%d: bad var", s);
        KirType t = k->vars.data[st->var].type;
        LLVMValueRef v = ex_typed(g, st->a, t, "assigned value");
        if (!v) return false;
        if (st->kind == KS_LET) {
            if (!declare(g, st->var, t)) return false;
        } else {
            if (g->var_level[st->var] < 0)
                return failf(g, FC_ERR_INTERNAL, "v%d assigned before it is declared", st->var);
            if (g->var_level[st->var] < g->level)
                return failf(g, FC_ERR_INTERNAL,
                             "v%d, declared at block level, is assigned inside a thread loop "
                             "(per-thread state must be a thread array)", st->var);
        }
        LLVMBuildStore(g->b, v, g->var[st->var]);
        return true;
    }
    case KS_STORE: {
        if (st->ref < 0 || st->ref >= k->params.len) return failf(g, FC_ERR_INTERNAL, "s%d: bad param", s);
        FcDtype d = k->params.data[st->ref].dtype;
        LLVMValueRef idx = ex(g, st->a);
        if (!idx) return false;
        if (etype(g, st->a) == KT_I32) idx = LLVMBuildSExt(g->b, idx, g->t64, "");
        else if (etype(g, st->a) != KT_I64) return failf(g, FC_ERR_INTERNAL, "s%d: index type", s);
        LLVMValueRef v = ex_typed(g, st->b, kir_compute_type(d), "stored value");
        if (!v) return false;
        bool exact = d == FC_BF16 && exact_bf16(k, st->b, 0);
        if (g->pair_lane == 2 && g->pair_store[s]) {
            /* the even element's code (lane 1) in the low half, this one's in the high half: the
             * bits of its rounding to bf16, whose low half is zero (fc_round_bf16: the code the
             * store gives, shifted, one shift fewer) */
            if (!g->pair_code[s] || !g->pair_addr[s]) return failf(g, FC_ERR_INTERNAL, "s%d: paired store without its half", s);
            LLVMValueRef r = exact ? v : call_helper(g, "fc_round_bf16", v);
            if (!r) return false;
            LLVMValueRef lo = LLVMBuildZExt(g->b, g->pair_code[s], g->t32, "");
            LLVMValueRef w = LLVMBuildStore(g->b, LLVMBuildOr(g->b, lo, LLVMBuildBitCast(g->b, r, g->t32, ""), ""), g->pair_addr[s]);
            LLVMSetAlignment(w, 2);
            return true;
        }
        /* a value already rounded to bf16 (exact_bf16): its top half, the bits the conversion
         * would give (a NaN out of the rounding is already quiet with a zero low half) */
        LLVMValueRef raw = exact ? LLVMBuildTrunc(g->b, LLVMBuildLShr(g->b, LLVMBuildBitCast(g->b, v, g->t32, ""), ci(g->t32, 16), ""),
                                                  LLVMInt16TypeInContext(g->ctx), "")
                                 : store_conv(g, d, v);
        LLVMValueRef p = raw ? buf_addr(g, st->ref, idx) : NULL;
        if (!p) return false;
        if (g->pair_lane == 1 && g->pair_store[s]) {
            g->pair_code[s] = raw;
            g->pair_addr[s] = p;
            return true;
        }
        LLVMBuildStore(g->b, raw, p);
        return true;
    }
    case KS_SHSTORE:
    case KS_TSTORE: {
        bool sh = st->kind == KS_SHSTORE;
        int n = sh ? k->shared.len : k->tarrays.len;
        if (st->ref < 0 || st->ref >= n) return failf(g, FC_ERR_INTERNAL, "s%d: bad array", s);
        KirType t = sh ? k->shared.data[st->ref].type : k->tarrays.data[st->ref].type;
        LLVMValueRef idx = ex(g, st->a);
        if (!idx) return false;
        if (etype(g, st->a) == KT_I32) idx = LLVMBuildSExt(g->b, idx, g->t64, "");
        else if (etype(g, st->a) != KT_I64) return failf(g, FC_ERR_INTERNAL, "s%d: index type", s);
        LLVMValueRef v = ex_typed(g, st->b, t, "stored value");
        if (!v) return false;
        LLVMValueRef p = sh ? sh_addr(g, st->ref, idx) : ta_addr(g, st->b, st->ref, idx);
        if (!p) return false;
        LLVMBuildStore(g->b, v, p);
        return true;
    }
    case KS_FOR: return st_for(g, st);
    case KS_IF: {
        LLVMValueRef c = ex_typed(g, st->a, KT_BOOL, "if condition");
        if (!c) return false;
        LLVMBasicBlockRef bt = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "if.then");
        LLVMBasicBlockRef be = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "if.else");
        LLVMBasicBlockRef bj = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "if.end");
        LLVMBuildCondBr(g->b, c, bt, be);
        LLVMPositionBuilderAtEnd(g->b, bt);
        if (!st_list(g, st->body)) return false;
        LLVMBuildBr(g->b, bj);
        LLVMPositionBuilderAtEnd(g->b, be);
        if (!st_list(g, st->body2)) return false;
        LLVMBuildBr(g->b, bj);
        LLVMPositionBuilderAtEnd(g->b, bj);
        return true;
    }
    case KS_REDUCE: return st_reduce(g, st);
    case KS_BARRIER:
        if (g->level != 0) return failf(g, FC_ERR_INTERNAL, "barrier inside a thread loop");
        return true; /* thread loops already run one after the other */
    case KS_ERROR: {
        LLVMValueRef c = ex_typed(g, st->a, KT_BOOL, "error condition");
        if (!c) return false;
        if (st->code <= 0 || st->code > 127) return failf(g, FC_ERR_INTERNAL, "s%d: bad status code", s);
        LLVMValueRef acc = chunk_acc(g, s, g->t1, "err");
        LLVMValueRef f = LLVMBuildLoad2(g->b, g->t1, acc, "");
        LLVMBuildStore(g->b, LLVMBuildOr(g->b, f, c, ""), acc);
        return true;
    }
    case KS_AMAX: {
        /* acc = umax(acc, bits of |b|): the order of the magnitudes, a NaN above inf (kir.h) */
        if (g->tail) return failf(g, FC_ERR_INTERNAL, "s%d: amax in the tail", s);
        if (kir_amax_element(k, st) < 0)
            return failf(g, FC_ERR_INTERNAL, "s%d: amax not at an i64 constant element of an f32 param marked written", s);
        LLVMValueRef v = ex_typed(g, st->b, KT_F32, "amax value");
        LLVMValueRef a = v ? intr1(g, "llvm.fabs", v) : NULL;
        if (!a) return false;
        LLVMValueRef acc = chunk_acc(g, s, g->t32, "amax");
        LLVMValueRef m = intr2(g, "llvm.umax", LLVMBuildLoad2(g->b, g->t32, acc, ""), LLVMBuildBitCast(g->b, a, g->t32, ""));
        if (!m) return false;
        LLVMBuildStore(g->b, m, acc);
        return true;
    }
    default: break;
    }
    return failf(g, FC_ERR_INTERNAL, "statement s%d has an unknown kind", s);
}

static bool st_list(Cg *g, int s) {
    for (; s >= 0; s = g->k->stmts.data[s].next) {
        if (s >= g->k->stmts.len) return failf(g, FC_ERR_INTERNAL, "bad statement id %d", s);
        if (g->seen[s]) return failf(g, FC_ERR_INTERNAL, "statement s%d reached twice", s);
        g->seen[s] = 1;
        if (!st_one(g, s)) return false;
    }
    return true;
}

/* ---- kernels ------------------------------------------------------------------------------ */
static bool valid_name(const char *s) {
    if (!s || !(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z'))) return false;
    size_t n = 0;
    for (const char *c = s; *c; c++, n++)
        if (!(*c == '_' || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9')))
            return false;
    if (n > 200 || strncmp(s, "fc_", 3) == 0 || strncmp(s, "llvm", 4) == 0) return false;
    for (size_t i = 0; i < sizeof reserved_names / sizeof reserved_names[0]; i++)
        if (strcmp(s, reserved_names[i]) == 0) return false;
    return true;
}

/* Bytes of per-block scratch the kernel needs, or -1 past the limit. */
static int64_t scratch_bytes(const KirKernel *k) {
    static const int64_t tsize[KT_COUNT] = {1, 4, 8, 4, 8};
    int64_t total = 0, x;
    for (int i = 0; i < k->shared.len; i++) {
        if (k->shared.data[i].count < 0 || (unsigned)k->shared.data[i].type >= KT_COUNT) return -1;
        if (!fc_mul64(k->shared.data[i].count, tsize[k->shared.data[i].type], &x) || !fc_add64(total, x, &total)) return -1;
    }
    for (int i = 0; i < k->tarrays.len; i++) {
        if (k->tarrays.data[i].count < 0 || (unsigned)k->tarrays.data[i].type >= KT_COUNT) return -1;
        if (!fc_mul64((int64_t)k->tarrays.data[i].count * k->block, tsize[k->tarrays.data[i].type], &x) ||
            !fc_add64(total, x, &total)) return -1;
    }
    for (int i = 0; i < k->stmts.len; i++)
        if (k->stmts.data[i].kind == KS_REDUCE) {
            int v = k->stmts.data[i].var;
            if (v < 0 || v >= k->vars.len) return -1;
            if (!fc_add64(total, ((int64_t)(k->block + 31) / 32 * 32 + 32) * 8, &total)) return -1;
        }
    return total > CG_SCRATCH_LIMIT ? -1 : total;
}

/* May the kernel's buffer params be noalias? Not if a launch binds overlapping buffers. */
static bool launches_disjoint(const KirProgram *p, int ki) {
    for (int li = 0; li < p->launches.len; li++) {
        const KirLaunch *l = &p->launches.data[li];
        if (l->kernel != ki) continue;
        for (int a = 0; a < l->nargs; a++)
            for (int b = a + 1; b < l->nargs; b++) {
                int x = l->args[a], y = l->args[b];
                if (x < 0 || y < 0 || x >= p->buffers.len || y >= p->buffers.len) return false;
                if (x == y) return false;
                const KirBuffer *bx = &p->buffers.data[x], *by = &p->buffers.data[y];
                if (bx->kind == KIR_BUF_TEMP && by->kind == KIR_BUF_TEMP) {
                    int64_t ex_, ey;
                    if (!fc_mul64(bx->numel, (int64_t)fc_dtype_size(bx->dtype), &ex_) ||
                        !fc_mul64(by->numel, (int64_t)fc_dtype_size(by->dtype), &ey) ||
                        !fc_add64(ex_, bx->offset, &ex_) || !fc_add64(ey, by->offset, &ey))
                        return false;
                    if (bx->offset < ey && by->offset < ex_) return false;
                } else if (bx->kind == by->kind && bx->kind != KIR_BUF_TEMP && bx->index == by->index) {
                    return false;
                }
            }
    }
    return true;
}

/* Is param i the target of a KS_AMAX? Other chunks update its element while this one runs, so it
 * is not `noalias` (which promises that nothing else touches what the body reaches through it). */
static bool amax_param(const KirKernel *k, int i) {
    for (int s = 0; s < k->stmts.len; s++)
        if (k->stmts.data[s].kind == KS_AMAX && k->stmts.data[s].ref == i) return true;
    return false;
}

static LLVMAttributeRef attr(Cg *g, const char *name) {
    return LLVMCreateEnumAttribute(g->ctx, LLVMGetEnumAttributeKindForName(name, strlen(name)), 0);
}

/* The body function of kernel g->k (see the top of this file); nt: the copy for buffers that
 * are 64-byte aligned, whose stream params carry `align 64` and NT_ATTR (the stores that
 * cg_llvm_stream_stores makes non-temporal after optimization). */
static FcStatus emit_body(Cg *g, bool noalias, bool nt, bool tail, LLVMValueRef *fn_out, LLVMTypeRef *ft_out) {
    const KirKernel *k = g->k;
    int np = k->params.len;
    LLVMTypeRef *pt = fc_calloc((size_t)np + 3, sizeof *pt);
    if (!pt) return FC_OOM(g->err);
    for (int i = 0; i < np; i++) pt[i] = g->tp;
    pt[np] = g->t64; pt[np + 1] = g->t64; pt[np + 2] = g->tp;
    LLVMTypeRef bft = LLVMFunctionType(g->tv, pt, (unsigned)np + 3, 0);
    fc_free(pt);
    char name[256];
    snprintf(name, sizeof name, "%s.%s%s", k->name, tail ? "tail.body" : "body", nt ? ".nt" : "");
    LLVMValueRef body = LLVMAddFunction(g->mod, name, bft);
    *fn_out = body;
    *ft_out = bft;
    LLVMSetLinkage(body, LLVMInternalLinkage);
    LLVMAddAttributeAtIndex(body, LLVMAttributeFunctionIndex, attr(g, "nounwind"));
    /* the streaming copy stays a function of its own, so that its `align` facts survive
     * until the vectorized stores get their alignment (inlining would drop them) */
    if (nt) LLVMAddAttributeAtIndex(body, LLVMAttributeFunctionIndex, attr(g, "noinline"));
    for (int i = 0; i < np; i++) {
        if (noalias && !amax_param(k, i)) LLVMAddAttributeAtIndex(body, (unsigned)i + 1, attr(g, "noalias"));
        LLVMAddAttributeAtIndex(body, (unsigned)i + 1, attr(g, "nocapture"));
        if (!k->params.data[i].written) LLVMAddAttributeAtIndex(body, (unsigned)i + 1, attr(g, "readonly"));
        if (nt && k->params.data[i].stream) {
            LLVMAddAttributeAtIndex(body, (unsigned)i + 1,
                                    LLVMCreateEnumAttribute(g->ctx, LLVMGetEnumAttributeKindForName("align", 5), NT_ALIGN));
            LLVMAddAttributeAtIndex(body, (unsigned)i + 1, LLVMCreateStringAttribute(g->ctx, NT_ATTR, (unsigned)strlen(NT_ATTR), "", 0));
        }
        snprintf(name, sizeof name, "p%d", i);
        LLVMSetValueName2(LLVMGetParam(body, (unsigned)i), name, strlen(name));
    }
    LLVMSetValueName2(LLVMGetParam(body, (unsigned)np), "block_begin", 11);
    LLVMSetValueName2(LLVMGetParam(body, (unsigned)np + 1), "block_end", 9);
    LLVMSetValueName2(LLVMGetParam(body, (unsigned)np + 2), "status", 6);

    /* state */
    g->fn = body;
    g->st = FC_OK;
    g->gen = 0;
    g->slot_valid = false;
    g->tail = tail;
    g->level = 0;
    g->pf_loop = -1;
    /* the body's block-invariant head runs once for the chunk (not where a launch binds
     * overlapping buffers: a write of one block could then change what a later block's head
     * reads); the rest, from `rest` on, in the block loop */
    int rest = tail ? k->tail : noalias ? invariant_head_end(k) : k->body;
    g->pf_n = tail ? 0 : pf_scan(k, rest, nt, g->pf, &g->pf_loop, &g->pf_trips);
    g->prm = fc_calloc((size_t)np + 1, sizeof *g->prm);
    g->var = fc_calloc((size_t)k->vars.len + 1, sizeof *g->var);
    g->var_level = fc_calloc((size_t)k->vars.len + 1, 1);
    g->sh = fc_calloc((size_t)k->shared.len + 1, sizeof *g->sh);
    g->ta = fc_calloc((size_t)k->tarrays.len + 1, sizeof *g->ta);
    g->acc = fc_calloc((size_t)k->stmts.len + 1, sizeof *g->acc);
    g->seen = fc_calloc((size_t)k->stmts.len + 1, 1);
    g->memo = fc_calloc((size_t)k->exprs.len + 1, sizeof *g->memo);
    g->memo_gen = fc_calloc((size_t)k->exprs.len + 1, sizeof *g->memo_gen);
    g->noalias = noalias;
    g->pair_lane = 0;
    g->pair_load = fc_calloc((size_t)k->exprs.len + 1, 1);
    g->pair_store = fc_calloc((size_t)k->stmts.len + 1, 1);
    g->pair_word = fc_calloc((size_t)k->exprs.len + 1, sizeof *g->pair_word);
    g->pair_code = fc_calloc((size_t)k->stmts.len + 1, sizeof *g->pair_code);
    g->pair_addr = fc_calloc((size_t)k->stmts.len + 1, sizeof *g->pair_addr);
    FcStatus st = FC_OK;
    if (g->pf_n < 0 || !g->prm || !g->var || !g->var_level || !g->sh || !g->ta || !g->acc || !g->seen || !g->memo ||
        !g->memo_gen || !g->pair_load || !g->pair_store || !g->pair_word || !g->pair_code || !g->pair_addr) {
        g->pf_n = 0;
        st = FC_OOM(g->err);
        goto done;
    }
    for (int i = 0; i < k->exprs.len; i++) g->memo_gen[i] = -1;
    for (int i = 0; i < k->vars.len; i++) g->var_level[i] = -1;
    for (int i = 0; i < np; i++) g->prm[i] = LLVMGetParam(body, (unsigned)i);

    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(g->ctx, body, "entry");
    LLVMBasicBlockRef start = LLVMAppendBasicBlockInContext(g->ctx, body, "blocks");
    LLVMPositionBuilderAtEnd(g->ab, entry);
    LLVMPositionBuilderAtEnd(g->b, start);
    for (int i = 0; i < k->vars.len; i++) {
        LLVMTypeRef t = ktype(g, k->vars.data[i].type);
        if (!t) { st = fc_err_set(g->err, FC_ERR_INTERNAL, "llvm codegen: kernel %s: v%d has a bad type", k->name, i); goto done; }
        snprintf(name, sizeof name, "v%d", i);
        g->var[i] = entry_alloca(g, t, 1, name);
    }
    for (int i = 0; i < k->shared.len; i++) {
        snprintf(name, sizeof name, "sh%d", i);
        g->sh[i] = entry_alloca(g, ktype(g, k->shared.data[i].type), k->shared.data[i].count > 0 ? k->shared.data[i].count : 1, name);
    }
    for (int i = 0; i < k->tarrays.len; i++) {
        snprintf(name, sizeof name, "ta%d", i);
        int64_t n = (int64_t)k->tarrays.data[i].count * k->block;
        g->ta[i] = entry_alloca(g, ktype(g, k->tarrays.data[i].type), n > 0 ? n : 1, name);
    }
    g->blk = entry_alloca(g, g->t64, 1, "block");
    g->slot = entry_alloca(g, g->t64, 1, "slot");

    for (int s = tail ? rest : k->body; s != rest; s = k->stmts.data[s].next) {
        g->seen[s] = 1;
        if (!st_one(g, s)) {
            st = g->st != FC_OK ? g->st : fc_err_set(g->err, FC_ERR_INTERNAL, "llvm codegen: kernel %s failed", k->name);
            goto done;
        }
    }
    /* for (block = begin; block < end; block++) body */
    Loop B;
    loop_open(g, &B, g->blk, g->t64, LLVMGetParam(body, (unsigned)np), LLVMGetParam(body, (unsigned)np + 1));
    pf_block_start(g, LLVMGetParam(body, (unsigned)np + 1));
    if (!st_list(g, rest)) {
        st = g->st != FC_OK ? g->st : fc_err_set(g->err, FC_ERR_INTERNAL, "llvm codegen: kernel %s failed", k->name);
        goto done;
    }
    loop_close(g, &B, 1);
    /* what the chunk merges, statement by statement: its errors (*status = code if it is still 0,
     * so the first statement's code wins) and its amaxes (an atomic max of the bits into the
     * element, when the chunk saw more than +0) */
    LLVMValueRef status = LLVMGetParam(body, (unsigned)np + 2);
    for (int s = 0; s < k->stmts.len; s++) {
        if (!g->acc[s]) continue;
        const KirStmt *x = &k->stmts.data[s];
        bool amax = x->kind == KS_AMAX;
        LLVMValueRef v = LLVMBuildLoad2(g->b, amax ? g->t32 : g->t1, g->acc[s], "");
        LLVMBasicBlockRef set = LLVMAppendBasicBlockInContext(g->ctx, body, amax ? "amax.set" : "err.set");
        LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(g->ctx, body, amax ? "amax.next" : "err.next");
        LLVMBuildCondBr(g->b, amax ? LLVMBuildICmp(g->b, LLVMIntNE, v, ci(g->t32, 0), "") : v, set, next);
        LLVMPositionBuilderAtEnd(g->b, set);
        if (amax)
            LLVMBuildAtomicRMW(g->b, LLVMAtomicRMWBinOpUMax, buf_addr(g, x->ref, ci(g->t64, kir_amax_element(k, x))), v,
                               LLVMAtomicOrderingMonotonic, 0);
        else
            LLVMBuildAtomicCmpXchg(g->b, status, ci(g->t32, 0), ci(g->t32, x->code), LLVMAtomicOrderingMonotonic,
                                   LLVMAtomicOrderingMonotonic, 0);
        LLVMBuildBr(g->b, next);
        LLVMPositionBuilderAtEnd(g->b, next);
    }
    /* non-temporal stores are weakly ordered: complete them before the chunk ends */
    if (nt) LLVMBuildFence(g->b, LLVMAtomicOrderingSequentiallyConsistent, 0, "");
    LLVMBuildRetVoid(g->b);
    LLVMPositionBuilderAtEnd(g->ab, entry);
    LLVMBuildBr(g->ab, start);

done:
    fc_free(g->prm); fc_free(g->var); fc_free(g->var_level); fc_free(g->sh); fc_free(g->ta);
    fc_free(g->acc); fc_free(g->seen); fc_free(g->memo); fc_free(g->memo_gen);
    fc_free(g->pair_load); fc_free(g->pair_store); fc_free(g->pair_word); fc_free(g->pair_code); fc_free(g->pair_addr);
    g->prm = NULL; g->var = NULL; g->var_level = NULL; g->sh = NULL; g->ta = NULL;
    g->acc = NULL; g->seen = NULL; g->memo = NULL; g->memo_gen = NULL;
    g->pair_load = NULL; g->pair_store = NULL; g->pair_word = NULL; g->pair_code = NULL; g->pair_addr = NULL;
    return st;
}

/* The exported wrapper `name`: void (ptr params, i64 block_begin, i64 block_end, ptr status),
 * calling body (or body_nt when every stream buffer is 64-byte aligned). */
static FcStatus emit_wrapper(Cg *g, const char *wname, LLVMValueRef body, LLVMValueRef body_nt, LLVMTypeRef bft) {
    const KirKernel *k = g->k;
    int np = k->params.len;
    char name[256];
    /* the exported wrapper: void K(ptr params, i64 block_begin, i64 block_end, ptr status) */
    {
        LLVMTypeRef wt[4] = {g->tp, g->t64, g->t64, g->tp};
        LLVMValueRef w = LLVMAddFunction(g->mod, wname, LLVMFunctionType(g->tv, wt, 4, 0));
        LLVMAddAttributeAtIndex(w, LLVMAttributeFunctionIndex, attr(g, "nounwind"));
        LLVMAddAttributeAtIndex(w, 1, attr(g, "nocapture"));
        LLVMAddAttributeAtIndex(w, 1, attr(g, "readonly"));
        LLVMAddAttributeAtIndex(w, 4, attr(g, "nocapture"));
        LLVMSetValueName2(LLVMGetParam(w, 0), "params", 6);
        LLVMSetValueName2(LLVMGetParam(w, 1), "block_begin", 11);
        LLVMSetValueName2(LLVMGetParam(w, 2), "block_end", 9);
        LLVMSetValueName2(LLVMGetParam(w, 3), "status", 6);
        LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, w, "entry"));
        LLVMValueRef *args = fc_calloc((size_t)np + 3, sizeof *args);
        if (!args) return FC_OOM(g->err);
        unsigned inv = LLVMGetMDKindIDInContext(g->ctx, "invariant.load", 14);
        LLVMValueRef empty = LLVMMetadataAsValue(g->ctx, LLVMMDNodeInContext2(g->ctx, NULL, 0));
        for (int i = 0; i < np; i++) {
            LLVMValueRef ix = ci(g->t64, i);
            LLVMValueRef a = LLVMBuildInBoundsGEP2(g->b, g->tp, LLVMGetParam(w, 0), &ix, 1, "");
            snprintf(name, sizeof name, "p%d", i);
            args[i] = LLVMBuildLoad2(g->b, g->tp, a, name);
            LLVMSetAlignment(args[i], 8);
            LLVMSetMetadata(args[i], inv, empty);
        }
        args[np] = LLVMGetParam(w, 1);
        args[np + 1] = LLVMGetParam(w, 2);
        args[np + 2] = LLVMGetParam(w, 3);
        if (!body_nt) {
            LLVMBuildCall2(g->b, bft, body, args, (unsigned)np + 3, "");
        } else {
            /* every stream buffer 64-byte aligned: the streaming copy, else the plain one */
            LLVMValueRef ok = LLVMConstInt(g->t1, 1, 0);
            for (int i = 0; i < np; i++) {
                if (!k->params.data[i].stream) continue;
                LLVMValueRef lo = LLVMBuildAnd(g->b, LLVMBuildPtrToInt(g->b, args[i], g->t64, ""), ci(g->t64, NT_ALIGN - 1), "");
                ok = LLVMBuildAnd(g->b, ok, LLVMBuildICmp(g->b, LLVMIntEQ, lo, ci(g->t64, 0), ""), "");
            }
            LLVMBasicBlockRef yes = LLVMAppendBasicBlockInContext(g->ctx, w, "aligned");
            LLVMBasicBlockRef no = LLVMAppendBasicBlockInContext(g->ctx, w, "unaligned");
            LLVMBasicBlockRef out = LLVMAppendBasicBlockInContext(g->ctx, w, "ret");
            LLVMBuildCondBr(g->b, ok, yes, no);
            LLVMPositionBuilderAtEnd(g->b, yes);
            LLVMBuildCall2(g->b, bft, body_nt, args, (unsigned)np + 3, "");
            LLVMBuildBr(g->b, out);
            LLVMPositionBuilderAtEnd(g->b, no);
            LLVMBuildCall2(g->b, bft, body, args, (unsigned)np + 3, "");
            LLVMBuildBr(g->b, out);
            LLVMPositionBuilderAtEnd(g->b, out);
        }
        LLVMBuildRetVoid(g->b);
        fc_free(args);
    }
    return FC_OK;
}

static FcStatus emit_kernel(Cg *g, const KirProgram *p, int ki) {
    const KirKernel *k = p->kernels.data[ki];
    g->k = k;
    if (!valid_name(k->name) || LLVMGetNamedFunction(g->mod, k->name))
        return fc_err_set(g->err, FC_ERR_INTERNAL, "llvm codegen: kernel name '%.64s' is not a fresh identifier", k->name ? k->name : "");
    if (k->block < 1 || k->block > 1024 || k->grid < 0)
        return fc_err_set(g->err, FC_ERR_INTERNAL, "llvm codegen: kernel %s: bad grid/block", k->name);
    if (!kir_kernel_ok(k)) return fc_err_set(g->err, FC_ERR_INTERNAL, "llvm codegen: kernel %s was not built completely", k->name);
    int64_t scratch = scratch_bytes(k);
    if (scratch < 0)
        return fc_err_set(g->err, FC_ERR_UNSUPPORTED,
                          "llvm codegen: kernel %s needs more than %lld bytes of per-block scratch "
                          "(shared arrays, thread arrays, reductions), the CPU backend's limit",
                          k->name, (long long)CG_SCRATCH_LIMIT);
    int np = k->params.len;
    for (int i = 0; i < np; i++)
        if (!stype(g, k->params.data[i].dtype))
            return fc_err_set(g->err, FC_ERR_INTERNAL, "llvm codegen: kernel %s: param %d has a bad dtype", k->name, i);
    bool noalias = launches_disjoint(p, ki);
    bool stream = false;
    for (int i = 0; i < np; i++) stream = stream || k->params.data[i].stream;
    LLVMValueRef body = NULL, body_nt = NULL, tail = NULL;
    LLVMTypeRef bft = NULL, tft = NULL;
    FcStatus st = emit_body(g, noalias, false, false, &body, &bft);
    if (st == FC_OK && stream) st = emit_body(g, noalias, true, false, &body_nt, &bft);
    if (st == FC_OK && k->tail >= 0) st = emit_body(g, noalias, false, true, &tail, &tft);
    if (st != FC_OK) return st;
    st = emit_wrapper(g, k->name, body, body_nt, bft);
    if (st == FC_OK && tail) {
        char name[256];
        snprintf(name, sizeof name, "%s.tail", k->name);
        st = emit_wrapper(g, name, tail, NULL, tft);
    }
    return st;
}
static bool program_needs_helpers(const KirProgram *p) {
    for (int i = 0; i < p->kernels.len; i++) {
        const KirKernel *k = p->kernels.data[i];
        for (int j = 0; j < k->params.len; j++)
            if (dtype_needs_helpers(k->params.data[j].dtype)) return true;
        for (int j = 0; j < k->exprs.len; j++) {
            const KirExpr *e = &k->exprs.data[j];
            if (e->kind == KE_ROUND || (e->kind == KE_UNARY && e->op == KU_NDTR)) return true;   /* fc_sq_lo */
        }
    }
    return false;
}

FcStatus cg_llvm_module(const KirProgram *p, void *llvm_context, void **llvm_module, FcErr *err) {
    *llvm_module = NULL;
    Cg g = {0};
    g.ctx = (LLVMContextRef)llvm_context;
    g.err = err;
    g.vector_bytes = p->vector_bytes;
    if (program_needs_helpers(p)) {
        StrBuf text = {0};
        for (size_t i = 0; i < sizeof helper_ir / sizeof helper_ir[0]; i++) sb_puts(&text, helper_ir[i]);
        f8_helpers(&text);
        if (text.failed) { sb_free(&text); return FC_OOM(err); }
        LLVMMemoryBufferRef mb = LLVMCreateMemoryBufferWithMemoryRangeCopy(text.data, text.len, "fusec");
        sb_free(&text);
        char *msg = NULL;
        if (LLVMParseIRInContext(g.ctx, mb, &g.mod, &msg)) {
            FcStatus s = fc_err_set(err, FC_ERR_INTERNAL, "llvm codegen: conversion helpers: %s", msg ? msg : "?");
            LLVMDisposeMessage(msg);
            return s;
        }
        LLVMSetModuleIdentifier(g.mod, "fusec", 5);
        LLVMSetSourceFileName(g.mod, "fusec", 5);
    } else {
        g.mod = LLVMModuleCreateWithNameInContext("fusec", g.ctx);
    }
    g.b = LLVMCreateBuilderInContext(g.ctx);
    g.ab = LLVMCreateBuilderInContext(g.ctx);
    g.tv = LLVMVoidTypeInContext(g.ctx);
    g.t1 = LLVMInt1TypeInContext(g.ctx);
    g.t8 = LLVMInt8TypeInContext(g.ctx);
    g.t16 = LLVMInt16TypeInContext(g.ctx);
    g.t32 = LLVMInt32TypeInContext(g.ctx);
    g.t64 = LLVMInt64TypeInContext(g.ctx);
    g.tf = LLVMFloatTypeInContext(g.ctx);
    g.td = LLVMDoubleTypeInContext(g.ctx);
    g.tp = LLVMPointerTypeInContext(g.ctx, 0);
    FcStatus st = FC_OK;
    for (int i = 0; i < p->kernels.len && st == FC_OK; i++)
        if (!p->kernels.data[i]->library) st = emit_kernel(&g, p, i);   /* library calls: no code */
    LLVMDisposeBuilder(g.b);
    LLVMDisposeBuilder(g.ab);
    if (st == FC_OK) {
        char *msg = NULL;
        if (LLVMVerifyModule(g.mod, LLVMReturnStatusAction, &msg))
            st = fc_err_set(err, FC_ERR_INTERNAL, "llvm codegen: the module does not verify: %s", msg ? msg : "?");
        LLVMDisposeMessage(msg);
    }
    if (st != FC_OK) {
        LLVMDisposeModule(g.mod);
        return st;
    }
    *llvm_module = g.mod;
    return FC_OK;
}

FcStatus cg_llvm_text(const KirProgram *p, StrBuf *out, FcErr *err) {
    LLVMContextRef ctx = LLVMContextCreate();
    void *mod = NULL;
    FcStatus st = cg_llvm_module(p, ctx, &mod, err);
    if (st == FC_OK) {
        char *text = LLVMPrintModuleToString((LLVMModuleRef)mod);
        sb_puts(out, text);
        LLVMDisposeMessage(text);
        LLVMDisposeModule((LLVMModuleRef)mod);
        if (out->failed) st = FC_OOM(err);
    }
    LLVMContextDispose(ctx);
    return st;
}

/* Stores through a param marked NT_ATTR (directly or through GEPs) whose alignment is at least
 * their size, 16 bytes or more: the vectorized stores of the streaming copy, once the
 * optimizer has proven their alignment from `align NT_ALIGN`, become non-temporal. Done after
 * optimization because the loop vectorizer does not vectorize loops with non-temporal scalar
 * stores it cannot prove aligned; an under-aligned store is left as it is (the backend would
 * split it into scalar non-temporal stores). */
static int nt_mark_uses(LLVMValueRef v, unsigned kind, LLVMValueRef md, LLVMTargetDataRef dl, int depth) {
    int n = 0;
    if (depth > 8) return 0;
    for (LLVMUseRef u = LLVMGetFirstUse(v); u; u = LLVMGetNextUse(u)) {
        LLVMValueRef user = LLVMGetUser(u);
        if (LLVMIsAGetElementPtrInst(user) && LLVMGetOperand(user, 0) == v) {
            n += nt_mark_uses(user, kind, md, dl, depth + 1);
        } else if (LLVMIsAStoreInst(user) && LLVMGetOperand(user, 1) == v) {
            unsigned long long size = LLVMStoreSizeOfType(dl, LLVMTypeOf(LLVMGetOperand(user, 0)));
            if (size >= 16 && LLVMGetAlignment(user) >= size) {
                LLVMSetMetadata(user, kind, md);
                n++;
            }
        }
    }
    return n;
}
int cg_llvm_stream_stores(void *llvm_module) {
    LLVMModuleRef mod = (LLVMModuleRef)llvm_module;
    LLVMContextRef ctx = LLVMGetModuleContext(mod);
    LLVMTargetDataRef dl = LLVMGetModuleDataLayout(mod);
    unsigned kind = LLVMGetMDKindIDInContext(ctx, "nontemporal", 11);
    LLVMMetadataRef one = LLVMValueAsMetadata(LLVMConstInt(LLVMInt32TypeInContext(ctx), 1, 0));
    LLVMValueRef md = LLVMMetadataAsValue(ctx, LLVMMDNodeInContext2(ctx, &one, 1));
    int n = 0;
    for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f)) {
        unsigned np = LLVMCountParams(f);
        for (unsigned i = 0; i < np; i++)
            if (LLVMGetStringAttributeAtIndex(f, i + 1, NT_ATTR, (unsigned)strlen(NT_ATTR)))
                n += nt_mark_uses(LLVMGetParam(f, i), kind, md, dl, 0);
    }
    return n;
}
