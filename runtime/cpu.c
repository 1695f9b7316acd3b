/* cpu.c: the CPU device (see cpu.h and docs/cpu.md).
 *
 * rt_cpu_compile: checks the program's buffers and launches, builds the LLVM module
 * (codegen/llvm.c), optimizes it for the host CPU (its name and features, so AVX2/AVX-512
 * are used) with the "default<O3>" pipeline and generates its object code, or takes that
 * from the kernel cache (cache.h; "the object cache" below), hands the object to an LLJIT of
 * its own (libm and the rest of the process resolved from the process), looks up every
 * kernel, allocates the workspace (one 64-byte-aligned block) and starts a thread pool.
 * rt_cpu_run: for each launch, binds buffers (inputs/outputs from the caller, temps at
 * their workspace offsets), splits [0, grid) into min(grid, 8 x threads) contiguous chunks
 * (1 with one thread; chunk c always covers the same blocks), runs them on the pool (a free
 * thread takes the next chunk) and checks the launch's status word.
 *
 * Invariants: blocks are independent, so results do not depend on which thread runs which
 * chunk or on the thread count; a handle is used by one thread at a time, different handles
 * may be used concurrently (LLVM's native target is initialized once, with pthread_once).
 */
#include "cpu.h"
#include "blas.h"
#include "cache.h"

#include "codegen.h"
#include "threadpool.h"
#include "fusec_source_id.h"

#include <llvm-c/Core.h>
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RT_CPU_MAX_THREADS 1024
#define RT_CPU_WORKER_STACK ((size_t)16 << 20) /* > codegen's 4 MiB per-block scratch limit */
#define RT_CPU_CHUNKS 8   /* chunks per thread of a launch (1 chunk with 1 thread) */

typedef void (*KernelFn)(void **params, int64_t block_begin, int64_t block_end, int32_t *status);

struct RtCpuProgram {
    const KirProgram *p;
    LLVMOrcLLJITRef jit;
    KernelFn *fns;          /* per kernel */
    KernelFn *tails;        /* per kernel: its tail (K.tail), run once after the grid; NULL if none */
    RtPool *pool;
    bool shared_pool;       /* pool belongs to another program (rt_cpu_share) */
    int nthreads;
    void *ws_raw;           /* fc_alloc'd; ws is inside it (rt_cpu_alloc) */
    char *ws;               /* workspace, p->workspace_bytes */
    void **args;            /* per-launch argument scratch, 3 x max nargs (a product's B operand
                             * kernel's, its epilogue's, its A operand kernel's) */
    int max_args;
    int nt_stores;          /* stores made non-temporal (cg_llvm_stream_stores) */
    int table_permutes;     /* table gathers made register permutes (permute_tables) */
    float *state;           /* the f8 scaling state (KIR_BUF_STATE), the caller's; NULL: none */
    bool cache_hit;         /* the object came from the kernel cache */
};

/* ---- LLVM setup -------------------------------------------------------------------------- */
static pthread_once_t llvm_once = PTHREAD_ONCE_INIT;
static int llvm_init_failed;
static void llvm_init(void) {
    llvm_init_failed = LLVMInitializeNativeTarget() || LLVMInitializeNativeAsmPrinter();
}

static FcStatus llvm_error(FcErr *err, LLVMErrorRef e, const char *what) {
    char *msg = LLVMGetErrorMessage(e);
    FcStatus s = fc_err_set(err, FC_ERR_DEVICE, "cpu: %s: %s", what, msg ? msg : "?");
    LLVMDisposeErrorMessage(msg);
    return s;
}

int rt_cpu_level(const char **name) {
    const char *e = getenv("FUSEC_CPU");
    *name = e;
    if (!e || !*e || strcmp(e, "native") == 0) return 0;
    static const char *const lv[3] = {"x86-64-v2", "x86-64-v3", "x86-64-v4"};
    for (int i = 0; i < 3; i++) {
        if (strcmp(e, lv[i]) != 0) continue;
#if defined(__x86_64__)
        bool ok = i == 0 ? __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("popcnt")
                : i == 1 ? __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")
                         : __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
        return ok ? i + 2 : -1;
#else
        return -1;
#endif
    }
    return -1;
}

bool rt_cpu_jit_fma(void) {
    const char *name = NULL;
    int lv = rt_cpu_level(&name);
#if defined(__x86_64__)
    return lv == 0 ? __builtin_cpu_supports("fma") : lv >= 3;
#else
    (void)lv;
    return true;
#endif
}

/* Does the comma-separated LLVM feature string enable `name` ("+name" as a whole token)? */
static bool has_feature(const char *features, const char *name) {
    size_t n = strlen(name);
    for (const char *s = features; s && *s;) {
        const char *end = strchr(s, ',');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        if (len == n + 1 && s[0] == '+' && memcmp(s + 1, name, n) == 0) return true;
        s = end ? end + 1 : NULL;
    }
    return false;
}

static FcStatus host_target_machine(LLVMTargetMachineRef *out, FcErr *err) {
    const char *lname = NULL;
    int level = rt_cpu_level(&lname);
    if (level < 0)
        return fc_err_set(err, FC_ERR_USAGE, "cpu: FUSEC_CPU=%.64s: expected native, x86-64-v2, x86-64-v3 or x86-64-v4, "
                          "at most what this machine runs", lname);
    char *triple = LLVMGetDefaultTargetTriple();
    char *msg = NULL;
    LLVMTargetRef target;
    if (LLVMGetTargetFromTriple(triple, &target, &msg)) {
        FcStatus s = fc_err_set(err, FC_ERR_DEVICE, "cpu: no LLVM target for %s: %s", triple, msg ? msg : "?");
        LLVMDisposeMessage(msg);
        LLVMDisposeMessage(triple);
        return s;
    }
    /* With AVX2 but not AVX-512, LLVM vectorizes a load at a per-lane index only where the CPU's
     * tuning says gathers are fast (Intel's Skylake client on); elsewhere (AMD's AVX2 parts, the
     * generic x86-64-v3) it scalarizes it: eight loads and inserts per lane group for every
     * per-lane coefficient table of the vector math (codegen/llvm.c, vtable16), which
     * permute_tables would otherwise make one or two permutes (the exact GELU at x86-64-v3 took
     * 4x its AVX-512 time). "+fast-gather" lets the vectorizer make those gathers. */
    if (level > 0) {   /* the level's own features, none of the host's beyond them */
        *out = LLVMCreateTargetMachine(target, triple, lname, level == 3 ? "+fast-gather" : "",
                                       LLVMCodeGenLevelAggressive, LLVMRelocPIC, LLVMCodeModelJITDefault);
    } else {
        char *cpu = LLVMGetHostCPUName();
        char *features = LLVMGetHostCPUFeatures();
        bool gather = has_feature(features, "avx2") && !has_feature(features, "avx512f");
        size_t n = strlen(features ? features : "") + 16;
        char *f = fc_alloc(n);
        if (f) {
            snprintf(f, n, "%s%s", features ? features : "", gather ? ",+fast-gather" : "");
            *out = LLVMCreateTargetMachine(target, triple, cpu, f, LLVMCodeGenLevelAggressive, LLVMRelocPIC,
                                           LLVMCodeModelJITDefault);
        }
        fc_free(f);
        LLVMDisposeMessage(cpu);
        LLVMDisposeMessage(features);
        if (!f) {
            LLVMDisposeMessage(triple);
            return FC_OOM(err);
        }
    }
    LLVMDisposeMessage(triple);
    if (!*out) return fc_err_set(err, FC_ERR_DEVICE, "cpu: cannot create an LLVM target machine for the host");
    return FC_OK;
}

/* libm functions the kernels call (and that LLVM's math intrinsics lower to). */
static FcStatus define_libm(LLVMOrcLLJITRef jit, FcErr *err) {
    static const struct { const char *name; void (*addr)(void); } syms[] = {
        {"tanhf", (void (*)(void))tanhf}, {"tanh", (void (*)(void))tanh},
        {"erff", (void (*)(void))erff},   {"erf", (void (*)(void))erf}, {"erfc", (void (*)(void))erfc},
        {"expf", (void (*)(void))expf},   {"exp", (void (*)(void))exp},
        {"logf", (void (*)(void))logf},   {"log", (void (*)(void))log},
        {"sinf", (void (*)(void))sinf},   {"sin", (void (*)(void))sin},
        {"cosf", (void (*)(void))cosf},   {"cos", (void (*)(void))cos},
        {"powf", (void (*)(void))powf},   {"pow", (void (*)(void))pow},
        {"floorf", (void (*)(void))floorf}, {"floor", (void (*)(void))floor},
        {"sqrtf", (void (*)(void))sqrtf}, {"sqrt", (void (*)(void))sqrt},
    };
    enum { N = sizeof syms / sizeof syms[0] };
    LLVMOrcCSymbolMapPair pairs[N];
    LLVMOrcExecutionSessionRef es = LLVMOrcLLJITGetExecutionSession(jit);
    for (int i = 0; i < N; i++) {
        pairs[i].Name = LLVMOrcExecutionSessionIntern(es, syms[i].name);
        pairs[i].Sym.Address = (LLVMOrcExecutorAddress)(uintptr_t)syms[i].addr;
        pairs[i].Sym.Flags.GenericFlags = LLVMJITSymbolGenericFlagsExported | LLVMJITSymbolGenericFlagsCallable;
        pairs[i].Sym.Flags.TargetFlags = 0;
    }
    LLVMOrcMaterializationUnitRef mu = LLVMOrcAbsoluteSymbols(pairs, N);
    LLVMErrorRef e = LLVMOrcJITDylibDefine(LLVMOrcLLJITGetMainJITDylib(jit), mu);
    if (e) {
        LLVMOrcDisposeMaterializationUnit(mu);
        return llvm_error(err, e, "defining libm symbols");
    }
    return FC_OK;
}

/* ---- threads ------------------------------------------------------------------------------ */
static int host_cores(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) return n > RT_CPU_MAX_THREADS ? RT_CPU_MAX_THREADS : n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) return 1;
    return n > RT_CPU_MAX_THREADS ? RT_CPU_MAX_THREADS : (int)n;
}

/* nthreads <= 0: FUSEC_NUM_THREADS if set (validated), else all cores. */
static FcStatus resolve_threads(int nthreads, int *out, FcErr *err) {
    if (nthreads > RT_CPU_MAX_THREADS)
        return fc_err_set(err, FC_ERR_USAGE, "cpu: %d threads requested; at most %d", nthreads, RT_CPU_MAX_THREADS);
    if (nthreads > 0) { *out = nthreads; return FC_OK; }
    const char *env = getenv("FUSEC_NUM_THREADS");
    if (env) {
        char *end = NULL;
        errno = 0;
        long v = strtol(env, &end, 10);
        if (errno != 0 || end == env || *end != '\0' || v < 1 || v > RT_CPU_MAX_THREADS)
            return fc_err_set(err, FC_ERR_USAGE,
                              "FUSEC_NUM_THREADS must be an integer from 1 to %d (it is '%.32s')",
                              RT_CPU_MAX_THREADS, env);
        *out = (int)v;
        return FC_OK;
    }
    *out = host_cores();
    return FC_OK;
}

/* ---- compile ----------------------------------------------------------------------------- */

/* The target machine's features as a feature string: its own, or for an x86-64-vN level (whose
 * CPU name implies them; its string holds at most +fast-gather) the ones this file asks about
 * and that string. Free with LLVMDisposeMessage; NULL when out of memory. */
static char *target_features(LLVMTargetMachineRef tm) {
    char *f = LLVMGetTargetMachineFeatureString(tm);
    char *cpu = LLVMGetTargetMachineCPU(tm);
    const char *implied = !strcmp(cpu, "x86-64-v4")   ? "+avx2,+fma,+f16c,+avx512f,+avx512bw,+avx512vl,+avx512dq"
                          : !strcmp(cpu, "x86-64-v3") ? "+avx2,+fma,+f16c"
                                                      : "";
    LLVMDisposeMessage(cpu);
    if (!*implied) return f;
    /* a level: its implied features, then what the machine was made with (+fast-gather) */
    size_t n = strlen(implied) + strlen(f ? f : "") + 2;
    char *buf = fc_alloc(n), *out = NULL;
    if (buf) {
        snprintf(buf, n, "%s%s%s", implied, f && *f ? "," : "", f ? f : "");
        out = LLVMCreateMessage(buf);
        fc_free(buf);
    }
    LLVMDisposeMessage(f);
    return out;
}

/* Storage conversions the host has instructions for (docs/cpu.md, "Storage conversions"),
 * applied to codegen/llvm.c's helpers before optimization:
 * - F16C: the f16 store (fc_f32_to_f16: integer code with variable shifts, some thirty
 *   instructions a lane) becomes fptrunc (vcvtps2ph), and the f16 load (fc_f16_to_f32, some
 *   fifteen) fpext (vcvtph2ps), and so do the f8 loads after a few 16-bit operations
 *   (e4m3_load_body below);
 * - AVX-512 BF16 (with VL): the bf16 store becomes vcvtneps2bf16 (fptrunc to bfloat), nine
 *   instructions a lane down to six. That instruction reads a subnormal input as zero, so an x
 *   with |x| < 2^-126 is first moved to x + sign(x) 2^-126, a normal number in [2^-126, 2^-125)
 *   whose bf16 spacing, 2^-133, is that of bf16's subnormals: its rounding (to nearest even) is
 *   x's plus 2^-126, whose bits, 0x80, are then taken off the result. A rounding that carries
 *   to 2^-125 gives 2^-126, as it should; a zero stays a zero of its sign.
 * And the other way round, where the host lacks an instruction: without FMA, fc_sq_lo (ndtr's
 * exact square split) becomes Dekker's split (sq_lo_soft_body) instead of a call to fmaf.
 * Every value is the integer code's: finite and infinite ones exactly, rounded to nearest even
 * (MXCSR's default, which fusec never changes); a NaN stays a NaN (F16C quiets a signaling
 * one; vcvtneps2bf16 keeps the top bits and sets the quiet bit, as the integer code does).
 * Without the feature the backend would call a scalar library routine per element, so the
 * helper stays.
 *
 * The loop vectorizer prices the half and bfloat conversions as scalar work (LLVM 19 has no
 * cost for them) and would run such loops 4 lanes wide instead of 16; inlined, the optimizer
 * also moves a NaN test of a loaded value onto the `half`, with the same effect. So a converted
 * load helper or the bf16 store is kept out of line through the optimization (noinline,
 * memory(none), speculatable) with vector variants of 4, 8 and (AVX-512) 16 lanes that the
 * vectorizer calls where it widens a call ("vector-function-abi-variant"); native_inline then
 * inlines them all. Returns whether any helper was kept out of line. */
static LLVMValueRef native_variant(LLVMModuleRef mod, const char *name, LLVMTypeRef from, LLVMTypeRef to, unsigned lanes,
                                   LLVMValueRef (*body)(LLVMBuilderRef, LLVMValueRef, LLVMTypeRef)) {
    LLVMContextRef ctx = LLVMGetModuleContext(mod);
    LLVMTypeRef vf = lanes ? LLVMVectorType(from, lanes) : from, vt = lanes ? LLVMVectorType(to, lanes) : to;
    LLVMValueRef fn = LLVMGetNamedFunction(mod, name);
    if (!fn) {
        /* external until native_inline, or the optimizer drops it before the vectorizer asks */
        fn = LLVMAddFunction(mod, name, LLVMFunctionType(vt, &vf, 1, 0));
    }
    for (LLVMBasicBlockRef bb; (bb = LLVMGetFirstBasicBlock(fn));) LLVMDeleteBasicBlock(bb);
    LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
    LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(ctx, fn, "entry"));
    LLVMBuildRet(b, body(b, LLVMGetParam(fn, 0), vt));
    LLVMDisposeBuilder(b);
    return fn;
}

static LLVMValueRef splat(LLVMTypeRef t, unsigned long long v) {
    if (LLVMGetTypeKind(t) != LLVMVectorTypeKind) return LLVMConstInt(t, v, 0);
    LLVMValueRef e[16];
    unsigned n = LLVMGetVectorSize(t);
    for (unsigned i = 0; i < n && i < 16; i++) e[i] = LLVMConstInt(LLVMGetElementType(t), v, 0);
    return LLVMConstVector(e, n);
}
static LLVMTypeRef same_shape(LLVMTypeRef like, LLVMTypeRef el) {
    return LLVMGetTypeKind(like) == LLVMVectorTypeKind ? LLVMVectorType(el, LLVMGetVectorSize(like)) : el;
}

static LLVMValueRef f16_store_body(LLVMBuilderRef b, LLVMValueRef x, LLVMTypeRef to) {
    LLVMContextRef ctx = LLVMGetTypeContext(to);
    return LLVMBuildBitCast(b, LLVMBuildFPTrunc(b, x, same_shape(to, LLVMHalfTypeInContext(ctx)), ""), to, "");
}
static LLVMValueRef f16_load_body(LLVMBuilderRef b, LLVMValueRef h, LLVMTypeRef to) {
    LLVMContextRef ctx = LLVMGetTypeContext(to);
    return LLVMBuildFPExt(b, LLVMBuildBitCast(b, h, same_shape(to, LLVMHalfTypeInContext(ctx)), ""), to, "");
}
/* The f8 loads through F16C: an f8 code is moved into the f16 code of the same value (or of
 * 2^-8 times it) with a few 16-bit integer operations, which vcvtph2ps widens exactly. E5M2 is
 * f16's upper byte (the same exponent and bias, two of its mantissa bits): the code shifted up
 * by 8, subnormals, inf and NaN included. E4M3 (bias 7 against f16's 15, no inf): the code
 * sign-extended to 16 bits and shifted up by 7 puts the sign at bits 15 and 14 and the
 * exponent and mantissa at bits 13..7; clearing bit 14 leaves the f16 code of the value times
 * 2^-8, subnormals included (code m * 2^-9 becomes f16's m * 2^-17), so the float is multiplied
 * by 2^8 (exact). E4M3's NaN (exponent and mantissa all ones: 0x3F80 there, 480 once widened)
 * is turned into f16's quiet NaN 0x7E00 with its sign (an xor with 0x4180), which widens to
 * 0x7FC00000 with the sign, the integer helper's NaN. Three 16-bit operations and a widening a
 * lane for E5M2 against the helper's seventeen 32-bit ones, seven and a multiply for E4M3
 * against fifteen. */
static LLVMValueRef e5m2_load_body(LLVMBuilderRef b, LLVMValueRef x, LLVMTypeRef to) {
    LLVMContextRef ctx = LLVMGetTypeContext(to);
    LLVMTypeRef t16 = same_shape(to, LLVMInt16TypeInContext(ctx));
    LLVMValueRef h = LLVMBuildShl(b, LLVMBuildZExt(b, x, t16, ""), splat(t16, 8), "");
    return LLVMBuildFPExt(b, LLVMBuildBitCast(b, h, same_shape(to, LLVMHalfTypeInContext(ctx)), ""), to, "");
}
static LLVMValueRef e4m3_load_body(LLVMBuilderRef b, LLVMValueRef x, LLVMTypeRef to) {
    LLVMContextRef ctx = LLVMGetTypeContext(to);
    LLVMTypeRef t16 = same_shape(to, LLVMInt16TypeInContext(ctx));
    LLVMValueRef h = LLVMBuildShl(b, LLVMBuildSExt(b, x, t16, ""), splat(t16, 7), "");
    h = LLVMBuildAnd(b, h, splat(t16, 0xBFFF), "");
    LLVMValueRef nan = LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildAnd(b, h, splat(t16, 0x3F80), ""), splat(t16, 0x3F80), "");
    h = LLVMBuildXor(b, h, LLVMBuildSelect(b, nan, splat(t16, 0x4180), splat(t16, 0), ""), "");
    LLVMValueRef f = LLVMBuildFPExt(b, LLVMBuildBitCast(b, h, same_shape(to, LLVMHalfTypeInContext(ctx)), ""), to, "");
    LLVMTypeRef el = LLVMGetTypeKind(to) == LLVMVectorTypeKind ? LLVMGetElementType(to) : to;
    LLVMValueRef k = LLVMConstReal(el, 256.0);
    if (el != to) {
        LLVMValueRef e[16];
        unsigned n = LLVMGetVectorSize(to);
        for (unsigned i = 0; i < n && i < 16; i++) e[i] = k;
        k = LLVMConstVector(e, n);
    }
    return LLVMBuildFMul(b, f, k, "");
}
static LLVMValueRef bf16_store_body(LLVMBuilderRef b, LLVMValueRef x, LLVMTypeRef to) {
    LLVMContextRef ctx = LLVMGetTypeContext(to);
    LLVMTypeRef ft = LLVMTypeOf(x), it = same_shape(ft, LLVMInt32TypeInContext(ctx));
    LLVMValueRef bits = LLVMBuildBitCast(b, x, it, "");
    /* |x| < 2^-126: a subnormal or a zero (which the same steps keep), lifted by sign(x) 2^-126 */
    LLVMValueRef mag = LLVMBuildAnd(b, bits, splat(it, 0x7fffffffu), "");
    LLVMValueRef sub = LLVMBuildICmp(b, LLVMIntULT, mag, splat(it, 0x800000u), "");
    LLVMValueRef lift = LLVMBuildOr(b, LLVMBuildXor(b, bits, mag, ""), splat(it, 0x800000u), "");
    LLVMValueRef moved = LLVMBuildFAdd(b, x, LLVMBuildBitCast(b, lift, ft, ""), "");
    LLVMValueRef t = LLVMBuildSelect(b, sub, moved, x, "");
    LLVMValueRef h = LLVMBuildBitCast(b, LLVMBuildFPTrunc(b, t, same_shape(to, LLVMBFloatTypeInContext(ctx)), ""), to, "");
    return LLVMBuildSelect(b, sub, LLVMBuildSub(b, h, splat(to, 0x80), ""), h, "");
}

/* fc_sq_lo (codegen/llvm.c: a * a - fl(a * a), exactly) without FMA instructions: Dekker's
 * split, a = ah + al with ah = c - (c - a), c = a (2^12 + 1), halves of 12 bits whose products
 * are exact, then l = ((ah ah - h) + 2 ah al) + al al, each step exact (no multiply-add is
 * fused on such a target). Eleven operations a lane instead of a call to fmaf. Exact while
 * a * 4097 does not overflow (|a| below 8e34; ndtr passes at most 14.49) and a^2 is normal. */
static LLVMValueRef sq_lo_soft_body(LLVMBuilderRef b, LLVMValueRef a, LLVMTypeRef to) {
    LLVMValueRef c = LLVMBuildFMul(b, a, LLVMConstReal(to, 4097.0), "");
    LLVMValueRef ah = LLVMBuildFSub(b, c, LLVMBuildFSub(b, c, a, ""), "");
    LLVMValueRef al = LLVMBuildFSub(b, a, ah, "");
    LLVMValueRef h = LLVMBuildFMul(b, a, a, "");
    LLVMValueRef m = LLVMBuildFMul(b, ah, al, "");
    LLVMValueRef l = LLVMBuildFSub(b, LLVMBuildFMul(b, ah, ah, ""), h, "");
    l = LLVMBuildFAdd(b, l, LLVMBuildFAdd(b, m, m, ""), "");
    return LLVMBuildFAdd(b, l, LLVMBuildFMul(b, al, al, ""), "");
}

/* The helpers native_conversions replaces; `vector`: kept out of line, with vector variants
 * NAME_v4, NAME_v8 and NAME_v16 (native_inline inlines them). */
static const struct {
    const char *name;
    bool f32_in;   /* f32 -> narrow (a store), else narrow -> f32 (a load) */
    unsigned bits; /* the narrow side's: 16 or 8 */
    bool bf16;     /* needs AVX-512 BF16 and VL, else F16C */
    bool vector;
    LLVMValueRef (*body)(LLVMBuilderRef, LLVMValueRef, LLVMTypeRef);
} native_conv[] = {
    {"fc_f32_to_f16", true, 16, false, false, f16_store_body},
    {"fc_f16_to_f32", false, 16, false, true, f16_load_body},
    {"fc_f32_to_bf16", true, 16, true, true, bf16_store_body},
    {"fc_e4m3_to_f32", false, 8, false, true, e4m3_load_body},
    {"fc_e5m2_to_f32", false, 8, false, true, e5m2_load_body},
};
enum { NATIVE_CONV = sizeof native_conv / sizeof native_conv[0] };

static bool native_conversions(LLVMModuleRef mod, const char *features) {
    LLVMContextRef ctx = LLVMGetModuleContext(mod);
    LLVMTypeRef tf = LLVMFloatTypeInContext(ctx);
    bool f16c = has_feature(features, "f16c"), wide = has_feature(features, "avx512f");
    bool bf16 = has_feature(features, "avx512bf16") && has_feature(features, "avx512vl");
    bool any = false;
    LLVMValueRef sq = LLVMGetNamedFunction(mod, "fc_sq_lo");
    if (sq && LLVMGetFirstBasicBlock(sq) && !has_feature(features, "fma"))
        native_variant(mod, "fc_sq_lo", tf, tf, 0, sq_lo_soft_body);
    for (int k = 0; k < NATIVE_CONV; k++) {
        if (!(native_conv[k].bf16 ? bf16 : f16c)) continue;
        LLVMValueRef fn = LLVMGetNamedFunction(mod, native_conv[k].name);
        if (!fn || !LLVMGetFirstBasicBlock(fn)) continue;
        LLVMTypeRef tn = LLVMIntTypeInContext(ctx, native_conv[k].bits);
        LLVMTypeRef from = native_conv[k].f32_in ? tf : tn, to = native_conv[k].f32_in ? tn : tf;
        native_variant(mod, native_conv[k].name, from, to, 0, native_conv[k].body);
        if (!native_conv[k].vector) continue;
        char abi[512] = "";
        for (unsigned lanes = 4; lanes <= (wide ? 16u : 8u); lanes *= 2) {
            char vname[64];
            snprintf(vname, sizeof vname, "%s_v%u", native_conv[k].name, lanes);
            native_variant(mod, vname, from, to, lanes, native_conv[k].body);
            size_t used = strlen(abi);
            snprintf(abi + used, sizeof abi - used, "%s_ZGV_LLVM_N%uv_%s(%s)", used ? "," : "", lanes, native_conv[k].name,
                     vname);
        }
        LLVMRemoveEnumAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMGetEnumAttributeKindForName("alwaysinline", 12));
        static const char *const kinds[] = {"noinline", "nounwind", "willreturn", "speculatable", "nosync", "nofree"};
        for (size_t j = 0; j < sizeof kinds / sizeof kinds[0]; j++)
            LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                                    LLVMCreateEnumAttribute(ctx, LLVMGetEnumAttributeKindForName(kinds[j], strlen(kinds[j])), 0));
        /* memory(none): the MemoryEffects encoding of no access is 0 */
        LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                                LLVMCreateEnumAttribute(ctx, LLVMGetEnumAttributeKindForName("memory", 6), 0));
        LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                                LLVMCreateStringAttribute(ctx, "vector-function-abi-variant", 27, abi, (unsigned)strlen(abi)));
        any = true;
    }
    return any;
}

/* After the vectorizer: the out-of-line conversions and their vector variants made
 * alwaysinline and internal, inlined where they are called (the always-inline pass), and
 * dropped (globaldce). */
static LLVMErrorRef native_inline(LLVMModuleRef mod, LLVMTargetMachineRef tm) {
    LLVMContextRef ctx = LLVMGetModuleContext(mod);
    unsigned ni = LLVMGetEnumAttributeKindForName("noinline", 8), ai = LLVMGetEnumAttributeKindForName("alwaysinline", 12);
    for (int k = 0; k < NATIVE_CONV; k++)
        for (unsigned lanes = 0; lanes <= 16; lanes = lanes ? lanes * 2 : 4) {
            char name[64];
            snprintf(name, sizeof name, lanes ? "%s_v%u" : "%s", native_conv[k].name, lanes);
            LLVMValueRef fn = LLVMGetNamedFunction(mod, name);
            if (!fn || !LLVMGetFirstBasicBlock(fn)) continue;
            LLVMRemoveEnumAttributeAtIndex(fn, LLVMAttributeFunctionIndex, ni);
            LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(ctx, ai, 0));
            LLVMSetLinkage(fn, LLVMInternalLinkage);
        }
    LLVMPassBuilderOptionsRef opts = LLVMCreatePassBuilderOptions();
    LLVMErrorRef e = LLVMRunPasses(mod, "always-inline,globaldce", tm, opts);
    LLVMDisposePassBuilderOptions(opts);
    return e;
}

static LLVMValueRef call_x86(LLVMModuleRef mod, LLVMBuilderRef b, const char *name, LLVMValueRef *args, unsigned n) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    if (id == 0) return NULL;
    LLVMValueRef f = LLVMGetIntrinsicDeclaration(mod, id, NULL, 0);
    LLVMTypeRef ft = LLVMIntrinsicGetType(LLVMGetModuleContext(mod), id, NULL, 0);
    return LLVMBuildCall2(b, ft, f, args, n, "");
}

/* The gathers the loop vectorizer makes from the emitter's per-lane coefficient tables
 * (internal constant globals `fc_*` of at most 16 floats, codegen/llvm.c `vtable16`) become
 * register permutes: vpermps (AVX-512: 16 lanes, 16 entries; AVX2: 8 lanes, two permutes and
 * a blend for 16 entries). The result is the same (the indices are in range by
 * construction); a gather of 16 lanes costs about as much as 16 loads. Gathers of other shapes,
 * and hosts without AVX2, keep the gather. Returns the number rewritten. */
static int permute_tables(LLVMModuleRef mod, const char *features) {
    bool avx512 = has_feature(features, "avx512f"), avx512vl = avx512 && has_feature(features, "avx512vl");
    bool avx2 = has_feature(features, "avx2");
    if (!avx2 && !avx512) return 0;
    LLVMContextRef ctx = LLVMGetModuleContext(mod);
    LLVMTypeRef tf = LLVMFloatTypeInContext(ctx), t32 = LLVMInt32TypeInContext(ctx);
    LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
    int count = 0;
    for (LLVMValueRef fn = LLVMGetFirstFunction(mod); fn; fn = LLVMGetNextFunction(fn))
        for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb))
            for (LLVMValueRef in = LLVMGetFirstInstruction(bb), next; in; in = next) {
                next = LLVMGetNextInstruction(in);
                if (LLVMGetInstructionOpcode(in) != LLVMCall) continue;
                LLVMValueRef callee = LLVMGetCalledValue(in);
                size_t nl = 0;
                const char *cn = callee ? LLVMGetValueName2(callee, &nl) : NULL;
                if (!cn || strncmp(cn, "llvm.masked.gather.", 19) != 0 || LLVMGetNumArgOperands(in) != 4) continue;
                LLVMTypeRef rt = LLVMTypeOf(in);
                if (LLVMGetTypeKind(rt) != LLVMVectorTypeKind || LLVMGetElementType(rt) != tf) continue;
                unsigned lanes = LLVMGetVectorSize(rt);
                LLVMValueRef gep = LLVMGetOperand(in, 0);
                if (!LLVMIsAGetElementPtrInst(gep)) continue;
                LLVMValueRef gv = LLVMGetOperand(gep, 0);
                if (!LLVMIsAGlobalVariable(gv) || !LLVMIsGlobalConstant(gv)) continue;
                const char *gn = LLVMGetValueName2(gv, &nl);
                LLVMValueRef init = LLVMGetInitializer(gv);
                LLVMTypeRef gt = LLVMGlobalGetValueType(gv);
                if (!gn || strncmp(gn, "fc_", 3) != 0 || !init || LLVMGetTypeKind(gt) != LLVMArrayTypeKind ||
                    LLVMGetElementType(gt) != tf || LLVMGetArrayLength2(gt) > 16)
                    continue;
                unsigned entries = (unsigned)LLVMGetArrayLength2(gt);
                /* gep [n x float], @table, 0, <lanes x iN> idx */
                LLVMTypeRef st = LLVMGetGEPSourceElementType(gep);
                if (st != gt || LLVMGetNumOperands(gep) != 3) continue;
                LLVMValueRef z = LLVMGetOperand(gep, 1), idx = LLVMGetOperand(gep, 2);
                if (!LLVMIsAConstantInt(z) || LLVMConstIntGetZExtValue(z) != 0) continue;
                LLVMTypeRef it = LLVMTypeOf(idx);
                if (LLVMGetTypeKind(it) != LLVMVectorTypeKind || LLVMGetVectorSize(it) != lanes ||
                    LLVMGetTypeKind(LLVMGetElementType(it)) != LLVMIntegerTypeKind)
                    continue;
                bool v16 = lanes == 16 && avx512, v8 = lanes == 8 && (avx2 || avx512);
                if (!v16 && !v8) continue;
                LLVMValueRef el[16];
                for (unsigned i = 0; i < 16; i++)
                    el[i] = i < entries ? LLVMGetAggregateElement(init, i) : LLVMConstReal(tf, 0.0);
                bool ok = true;
                for (unsigned i = 0; i < 16; i++) ok = ok && el[i] != NULL;
                if (!ok) continue;
                LLVMPositionBuilderBefore(b, in);
                LLVMTypeRef vi = LLVMVectorType(t32, lanes);
                LLVMValueRef ix = LLVMGetIntTypeWidth(LLVMGetElementType(it)) == 32 ? idx
                                  : LLVMBuildTrunc(b, idx, vi, "");
                LLVMValueRef r = NULL;
                if (v16) {
                    LLVMValueRef args[2] = {LLVMConstVector(el, 16), ix};
                    r = call_x86(mod, b, "llvm.x86.avx512.permvar.sf.512", args, 2);
                } else if (entries <= 8) {
                    LLVMValueRef args[2] = {LLVMConstVector(el, 8), ix};
                    r = call_x86(mod, b, "llvm.x86.avx2.permps", args, 2);
                } else if (avx512vl) {
                    LLVMValueRef args[3] = {LLVMConstVector(el, 8), ix, LLVMConstVector(el + 8, 8)};
                    r = call_x86(mod, b, "llvm.x86.avx512.vpermi2var.ps.256", args, 3);
                } else {
                    LLVMValueRef a1[2] = {LLVMConstVector(el, 8), ix}, a2[2] = {LLVMConstVector(el + 8, 8), ix};
                    LLVMValueRef lo = call_x86(mod, b, "llvm.x86.avx2.permps", a1, 2);
                    LLVMValueRef hi = lo ? call_x86(mod, b, "llvm.x86.avx2.permps", a2, 2) : NULL;
                    LLVMValueRef seven[8];
                    for (int i = 0; i < 8; i++) seven[i] = LLVMConstInt(t32, 7, 0);
                    if (hi) r = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, ix, LLVMConstVector(seven, 8), ""), hi, lo, "");
                }
                if (!r) continue; /* an unknown intrinsic: keep the gather (dead code stays harmless) */
                /* masked-off lanes take the pass-through value */
                LLVMValueRef mask = LLVMGetOperand(in, 2), pass = LLVMGetOperand(in, 3);
                if (mask != LLVMConstAllOnes(LLVMTypeOf(mask)))
                    r = LLVMBuildSelect(b, mask, r, pass, "");
                LLVMReplaceAllUsesWith(in, r);
                LLVMInstructionEraseFromParent(in);
                if (!LLVMGetFirstUse(gep)) {
                    if (next == gep) next = LLVMGetNextInstruction(gep);
                    LLVMInstructionEraseFromParent(gep);
                }
                count++;
            }
    LLVMDisposeBuilder(b);
    return count;
}

/* ---- the object cache ----------------------------------------------------------------------- */
/* A compiled module is stored in the kernel cache (cache.h) as an ELF object under a key of
 * everything that determines it: the module as codegen/llvm.c and native_conversions leave it
 * (printed), the target machine (CPU name and feature string), LLVM's version, and
 * FUSEC_SOURCE_ID, a hash of fusec's own sources taken at build time (the optimization
 * pipeline, permute_tables and cg_llvm_stream_stores are code, not module text: a change of
 * them must not find an object built by the old code). A hit skips the optimizer and the
 * code generator, about nine tenths of a compile. The payload: "FCOBJ1\0\0", nt_stores,
 * table_permutes (u32 little-endian each), then the object. */
#define CPU_OBJ_MAGIC "FCOBJ1\0\0"
enum { CPU_OBJ_HEADER = 16 };

static bool cpu_cache_key(LLVMModuleRef mod, LLVMTargetMachineRef tm, RtCacheKey *key) {
    char *text = LLVMPrintModuleToString(mod);
    char *cpu = LLVMGetTargetMachineCPU(tm), *feat = LLVMGetTargetMachineFeatureString(tm);
    size_t n = strlen(cpu ? cpu : "") + strlen(feat ? feat : "") + 2;
    char *arch = text ? fc_alloc(n) : NULL;
    if (arch) {
        unsigned maj = 0, min = 0, patch = 0;
        char llvm[64];
        LLVMGetVersion(&maj, &min, &patch);
        snprintf(llvm, sizeof llvm, "LLVM %u.%u.%u", maj, min, patch);
        snprintf(arch, n, "%s|%s", cpu ? cpu : "", feat ? feat : "");
        rt_cache_key(key, text, strlen(text), arch, "cpu object default<O3> " FUSEC_SOURCE_ID, llvm);
    }
    fc_free(arch);
    LLVMDisposeMessage(cpu);
    LLVMDisposeMessage(feat);
    LLVMDisposeMessage(text);
    return arch != NULL;
}

/* Optimizes mod (consumed) for tm and generates its object into *obj (header and object, as
 * the cache stores them; fc_alloc'd) and *len. */
static FcStatus compile_object(RtCpuProgram *cp, LLVMModuleRef mod, LLVMTargetMachineRef tm, bool outlined,
                               unsigned char **obj, size_t *len, FcErr *err) {
    *obj = NULL;
    *len = 0;
    char *features = target_features(tm);
    LLVMPassBuilderOptionsRef opts = LLVMCreatePassBuilderOptions();
    LLVMPassBuilderOptionsSetLoopVectorization(opts, 1);
    LLVMPassBuilderOptionsSetSLPVectorization(opts, 1);
    LLVMPassBuilderOptionsSetLoopInterleaving(opts, 1);
    LLVMPassBuilderOptionsSetLoopUnrolling(opts, 1);
    LLVMErrorRef e = LLVMRunPasses(mod, "default<O3>", tm, opts);
    LLVMDisposePassBuilderOptions(opts);
    if (!e && outlined) e = native_inline(mod, tm);
    if (e) {
        LLVMDisposeMessage(features);
        LLVMDisposeModule(mod);
        return llvm_error(err, e, "optimizing the module");
    }
    cp->table_permutes = permute_tables(mod, features);
    cp->nt_stores = cg_llvm_stream_stores(mod);
    LLVMDisposeMessage(features);
    if (getenv("FUSEC_DUMP_LLVM_OPT")) { /* debugging: the optimized module, on stderr */
        char *text = LLVMPrintModuleToString(mod);
        fputs(text, stderr);
        LLVMDisposeMessage(text);
    }
    char *msg = NULL;
    LLVMMemoryBufferRef buf = NULL;
    LLVMBool bad = LLVMTargetMachineEmitToMemoryBuffer(tm, mod, LLVMObjectFile, &msg, &buf);
    LLVMDisposeModule(mod);
    if (bad || !buf) {
        FcStatus st = fc_err_set(err, FC_ERR_INTERNAL, "cpu: generating the object code: %s", msg ? msg : "?");
        LLVMDisposeMessage(msg);
        if (buf) LLVMDisposeMemoryBuffer(buf);
        return st;
    }
    size_t n = LLVMGetBufferSize(buf);
    unsigned char *o = n <= SIZE_MAX - CPU_OBJ_HEADER ? fc_alloc(CPU_OBJ_HEADER + n) : NULL;
    if (o) {
        memcpy(o, CPU_OBJ_MAGIC, 8);
        rt_put_u32le(o + 8, (uint32_t)cp->nt_stores);
        rt_put_u32le(o + 12, (uint32_t)cp->table_permutes);
        memcpy(o + CPU_OBJ_HEADER, LLVMGetBufferStart(buf), n);
    }
    LLVMDisposeMemoryBuffer(buf);
    if (!o) return FC_OOM(err);
    *obj = o;
    *len = CPU_OBJ_HEADER + n;
    return FC_OK;
}

/* A cached payload's header, checked; its counts into cp. */
static bool cached_object(RtCpuProgram *cp, const unsigned char *data, size_t len) {
    if (len <= CPU_OBJ_HEADER || memcmp(data, CPU_OBJ_MAGIC, 8) != 0) return false;
    uint32_t nt = rt_get_u32le(data + 8), tp = rt_get_u32le(data + 12);
    if (nt > INT32_MAX || tp > INT32_MAX) return false;
    cp->nt_stores = (int)nt;
    cp->table_permutes = (int)tp;
    return true;
}

/* LLVM's diagnostics while a module is optimized and compiled: remarks and warnings (the loop
 * vectorizer's "loop not vectorized" where a loop asks for a width and cannot have it, a paired
 * bf16 loop at AVX-512: docs/cpu.md) are not the user's business and are dropped; the first
 * error is kept and fails the compilation (LLVM's default handler would print it and exit). */
typedef struct CpuDiag { bool error; char msg[256]; } CpuDiag;
static void cpu_diagnostic(LLVMDiagnosticInfoRef info, void *ctx) {
    CpuDiag *d = ctx;
    if (LLVMGetDiagInfoSeverity(info) != LLVMDSError || d->error) return;
    char *m = LLVMGetDiagInfoDescription(info);
    d->error = true;
    snprintf(d->msg, sizeof d->msg, "%s", m ? m : "?");
    LLVMDisposeMessage(m);
}

static FcStatus jit_module(RtCpuProgram *cp, FcErr *err) {
    const KirProgram *p = cp->p;
    LLVMTargetMachineRef tm = NULL, tm_jit = NULL;
    LLVMOrcThreadSafeContextRef tsc = LLVMOrcCreateNewThreadSafeContext();
    LLVMContextRef ctx = LLVMOrcThreadSafeContextGetContext(tsc);
    CpuDiag diag = {0};
    LLVMContextSetDiagnosticHandler(ctx, cpu_diagnostic, &diag);
    LLVMModuleRef mod = NULL;
    RtCache *cache = NULL;
    unsigned char *obj = NULL;
    size_t objlen = 0;
    LLVMErrorRef e;
    FcStatus st = cg_llvm_module(p, ctx, (void **)&mod, err);
    if (st != FC_OK) goto fail;
    if ((st = host_target_machine(&tm, err)) != FC_OK) goto fail;
    if ((st = host_target_machine(&tm_jit, err)) != FC_OK) goto fail;

    char *triple = LLVMGetTargetMachineTriple(tm);
    LLVMSetTarget(mod, triple);
    LLVMDisposeMessage(triple);
    LLVMTargetDataRef dl = LLVMCreateTargetDataLayout(tm);
    LLVMSetModuleDataLayout(mod, dl);
    LLVMDisposeTargetData(dl);

    char *features = target_features(tm);
    bool outlined = native_conversions(mod, features);
    LLVMDisposeMessage(features);

    /* the cache: a miss, an unusable folder or a damaged entry compile as if there were none;
     * FUSEC_DUMP_LLVM_OPT compiles to print the optimized module */
    RtCacheKey key;
    bool keyed = false;
    if (!getenv("FUSEC_DUMP_LLVM_OPT")) {
        FcErr ignored = {0};
        if (rt_cache_open(&cache, &ignored) != FC_OK) cache = NULL;
        keyed = cache && cpu_cache_key(mod, tm, &key);
        void *data = NULL;
        size_t n = 0;
        if (keyed && rt_cache_get(cache, &key, "o", &data, &n)) {
            if (cached_object(cp, data, n)) {
                obj = data;
                objlen = n;
            } else {
                fc_free(data);
            }
        }
    }
    if (obj) {
        cp->cache_hit = true;
        LLVMDisposeModule(mod);
    } else {
        st = compile_object(cp, mod, tm, outlined, &obj, &objlen, err);
        if (st != FC_OK) { mod = NULL; goto fail; }
        if (diag.error) { mod = NULL; st = fc_err_set(err, FC_ERR_INTERNAL, "cpu: LLVM: %s", diag.msg); goto fail; }
        if (keyed) {
            FcErr ignored = {0};
            (void)rt_cache_put(cache, &key, "o", obj, objlen, &ignored);
        }
    }
    mod = NULL;
    LLVMDisposeTargetMachine(tm);
    tm = NULL;
    rt_cache_free(cache);
    cache = NULL;

    LLVMOrcLLJITBuilderRef builder = LLVMOrcCreateLLJITBuilder();
    LLVMOrcLLJITBuilderSetJITTargetMachineBuilder(builder, LLVMOrcJITTargetMachineBuilderCreateFromTargetMachine(tm_jit));
    tm_jit = NULL;
    e = LLVMOrcCreateLLJIT(&cp->jit, builder);
    if (e) { cp->jit = NULL; st = llvm_error(err, e, "creating the JIT"); goto fail; }

    LLVMOrcDefinitionGeneratorRef gen = NULL;
    e = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(&gen, LLVMOrcLLJITGetGlobalPrefix(cp->jit), NULL, NULL);
    if (e) { st = llvm_error(err, e, "searching the process for symbols"); goto fail; }
    LLVMOrcJITDylibAddGenerator(LLVMOrcLLJITGetMainJITDylib(cp->jit), gen);
    if ((st = define_libm(cp->jit, err)) != FC_OK) goto fail;

    /* the JIT takes the buffer (a copy of the object, which `obj` keeps the header of) */
    LLVMMemoryBufferRef buf =
        LLVMCreateMemoryBufferWithMemoryRangeCopy((const char *)obj + CPU_OBJ_HEADER, objlen - CPU_OBJ_HEADER, "fusec");
    fc_free(obj);
    obj = NULL;
    if (!buf) { st = FC_OOM(err); goto fail; }
    e = LLVMOrcLLJITAddObjectFile(cp->jit, LLVMOrcLLJITGetMainJITDylib(cp->jit), buf);
    if (e) { st = llvm_error(err, e, "adding the object to the JIT"); goto fail; }
    LLVMOrcDisposeThreadSafeContext(tsc);
    tsc = NULL;
    for (int i = 0; i < p->kernels.len; i++) {
        LLVMOrcExecutorAddress addr = 0;
        if (p->kernels.data[i]->library) continue;   /* a BLAS call, no generated code */
        e = LLVMOrcLLJITLookup(cp->jit, &addr, p->kernels.data[i]->name);
        if (e) { st = llvm_error(err, e, "compiling the kernels"); goto fail; }
        cp->fns[i] = (KernelFn)(uintptr_t)addr;
        if (p->kernels.data[i]->tail < 0) continue;
        char tname[256];
        snprintf(tname, sizeof tname, "%s.tail", p->kernels.data[i]->name);
        e = LLVMOrcLLJITLookup(cp->jit, &addr, tname);
        if (e) { st = llvm_error(err, e, "compiling the kernels"); goto fail; }
        cp->tails[i] = (KernelFn)(uintptr_t)addr;
    }
    return FC_OK;
fail:
    if (mod) LLVMDisposeModule(mod);
    if (tm) LLVMDisposeTargetMachine(tm);
    if (tm_jit) LLVMDisposeTargetMachine(tm_jit);
    if (tsc) LLVMOrcDisposeThreadSafeContext(tsc);
    rt_cache_free(cache);
    fc_free(obj);
    return st;
}

FcStatus rt_cpu_compile(const KirProgram *p, int nthreads, RtCpuProgram **out, FcErr *err) {
    *out = NULL;
    int nt = 0, max_args = 1;
    FC_TRY(resolve_threads(nthreads, &nt, err));
    FC_TRY(kir_check_program(p, "cpu", 64, false, &max_args, err));
    for (int i = 0; i < p->kernels.len; i++)
        if (p->kernels.data[i]->library && p->kernels.data[i]->gemm.ab16)   /* the GPU's program (cuBLASLt) */
            return fc_err_set(err, FC_ERR_INTERNAL, "cpu: library kernel %s has 16-bit operands, which the BLAS does not "
                              "take", p->kernels.data[i]->name);
    pthread_once(&llvm_once, llvm_init);
    if (llvm_init_failed) return fc_err_set(err, FC_ERR_DEVICE, "cpu: LLVM has no native target for this host");

    RtCpuProgram *cp = fc_calloc(1, sizeof *cp);
    if (!cp) return FC_OOM(err);
    cp->p = p;
    cp->nthreads = nt;
    cp->max_args = max_args;
    FcStatus st = FC_OK;
    cp->fns = fc_calloc((size_t)p->kernels.len + 1, sizeof *cp->fns);
    cp->tails = fc_calloc((size_t)p->kernels.len + 1, sizeof *cp->tails);
    cp->args = fc_calloc((size_t)max_args * 3, sizeof *cp->args);
    if (!cp->fns || !cp->tails || !cp->args) { st = FC_OOM(err); goto fail; }
    if (p->workspace_bytes > 0) {
        if ((uint64_t)p->workspace_bytes > SIZE_MAX - 64 || !(cp->ws = rt_cpu_alloc((size_t)p->workspace_bytes, &cp->ws_raw))) {
            st = fc_err_set(err, FC_ERR_NOMEM, "cpu: cannot allocate the %lld-byte workspace", (long long)p->workspace_bytes);
            goto fail;
        }
    }
    if ((st = jit_module(cp, err)) != FC_OK) goto fail;
    if ((st = rt_pool_new(nt, RT_CPU_WORKER_STACK, &cp->pool, err)) != FC_OK) goto fail;
    *out = cp;
    return FC_OK;
fail:
    rt_cpu_free(cp);
    return st;
}

void rt_cpu_share(RtCpuProgram *a, RtCpuProgram *b) {
    if (!a || !b || b->shared_pool || a->shared_pool) return;
    /* one pool: the threads of two pools would take turns spinning on the same cores */
    rt_pool_free(b->pool);
    b->pool = a->pool;
    b->shared_pool = true;
    RtCpuProgram *big = a->p->workspace_bytes >= b->p->workspace_bytes ? a : b, *small = big == a ? b : a;
    if (!small->ws) return;
    fc_free(small->ws_raw);
    small->ws_raw = NULL;   /* the big one owns the memory */
    small->ws = big->ws;
}

void rt_cpu_free(RtCpuProgram *cp) {
    if (!cp) return;
    if (!cp->shared_pool) rt_pool_free(cp->pool);
    if (cp->jit) {
        LLVMErrorRef e = LLVMOrcDisposeLLJIT(cp->jit);
        if (e) LLVMConsumeError(e);
    }
    fc_free(cp->fns);
    fc_free(cp->tails);
    fc_free(cp->args);
    fc_free(cp->ws_raw);
    fc_free(cp);
}

void rt_cpu_set_state(RtCpuProgram *cp, float *state) { cp->state = state; }

void *rt_cpu_workspace(const RtCpuProgram *cp) { return cp ? cp->ws : NULL; }

int rt_cpu_threads(const RtCpuProgram *cp) { return cp ? cp->nthreads : 0; }

/* ---- run ----------------------------------------------------------------------------------- */
typedef struct LaunchCtx {
    KernelFn fn;
    void **args;
    int64_t grid, nchunks;
    int32_t status;        /* written by the kernels with atomic compare-exchange */
    int64_t first;         /* the blocks run are first .. first + grid - 1 */
} LaunchCtx;

static void run_chunk(void *arg, int64_t c) {
    LaunchCtx *lc = arg;
    int64_t base = lc->grid / lc->nchunks, rem = lc->grid % lc->nchunks;
    int64_t begin = c * base + (c < rem ? c : rem);
    int64_t end = begin + base + (c < rem ? 1 : 0);
    lc->fn(lc->args, lc->first + begin, lc->first + end, &lc->status);
}

typedef struct GemmCtx {
    const KirGemm *g;
    const void *a, *b;
    void *c;
    int64_t nparts;
} GemmCtx;
/* The parts a product's `rows` rows of C are split into: at least 16 rows each, at most one
 * per thread. */
static int64_t gemm_parts(const RtCpuProgram *cp, int64_t rows) {
    return rows / 16 < cp->nthreads ? (rows / 16 > 1 ? rows / 16 : 1) : cp->nthreads;
}
static void run_gemm_part(void *arg, int64_t part) {
    GemmCtx *gc = arg;
    rt_blas_gemm_part(gc->g, gc->a, gc->b, gc->c, part, gc->nparts);
}
/* B in panels (KirGemm.panel_k): rows [k0, k0 + kc) of B in the panel b, accumulated into C
 * after the first */
typedef struct PanelCtx {
    GemmCtx gc;
    int64_t k0, kc, r0, r1, c0, c1;
} PanelCtx;
static void run_panel_part(void *arg, int64_t part) {
    PanelCtx *pc = arg;
    rt_blas_gemm_panel(pc->gc.g, pc->gc.a, pc->gc.b, pc->gc.c, pc->k0, pc->kc, pc->r0, pc->r1, pc->c0, pc->c1, part,
                       pc->gc.nparts);
}

/* Launch li's buffers into args. */
static FcStatus bind_args(RtCpuProgram *cp, int li, void *const *inputs, void *const *outputs, void **args, FcErr *err) {
    const KirProgram *p = cp->p;
    const KirLaunch *l = &p->launches.data[li];
    for (int a = 0; a < l->nargs; a++) {
        const KirBuffer *b = &p->buffers.data[l->args[a]];
        void *ptr;
        if (b->kind == KIR_BUF_TEMP) ptr = cp->ws + b->offset;
        else if (b->kind == KIR_BUF_STATE) ptr = cp->state;
        else if (b->kind == KIR_BUF_INPUT) ptr = inputs ? inputs[b->index] : NULL;
        else ptr = outputs ? outputs[b->index] : NULL;
        if (!ptr && b->numel > 0)
            return fc_err_set(err, b->kind == KIR_BUF_STATE ? FC_ERR_INTERNAL : FC_ERR_USAGE, "cpu: %s %d of the block is a NULL pointer",
                              b->kind == KIR_BUF_INPUT ? "input" : b->kind == KIR_BUF_STATE ? "the f8 state" : "output", b->index);
        args[a] = ptr;
    }
    return FC_OK;
}
/* Is launch li an operand kernel or the epilogue of a product that runs it itself, panel by
 * panel or block by block (kir_launch_unit)? */
static bool product_runs(const KirProgram *p, int li) {
    int lo, hi;
    kir_launch_unit(p, li, &lo, &hi);
    return (lo < hi) && !p->kernels.data[p->launches.data[li].kernel]->library;
}

/* Blocks [first, first + grid) of launch li's generated kernel on args, RT_CPU_CHUNKS chunks per
 * thread, taken in turn by whichever thread is free (when the machine is shared and one of our
 * threads is descheduled, the others take its share); then its tail (kir.h), once, after every
 * block (the pool's join orders the blocks' stores before it). */
static FcStatus run_blocks(RtCpuProgram *cp, int li, void **args, int64_t first, int64_t grid, FcErr *err) {
    const KirLaunch *l = &cp->p->launches.data[li];
    const KirKernel *k = cp->p->kernels.data[l->kernel];
    if (grid <= 0) return FC_OK;
    int64_t nch = cp->nthreads > 1 ? (int64_t)cp->nthreads * RT_CPU_CHUNKS : 1;
    LaunchCtx lc = {cp->fns[l->kernel], args, grid, grid < nch ? grid : nch, 0, first};
    rt_pool_parallel_for(cp->pool, lc.nchunks, run_chunk, &lc);
    if (cp->tails[l->kernel]) cp->tails[l->kernel](args, 0, 1, &lc.status);
    if (lc.status != 0) {
        const char *name = fc_status_name((FcStatus)lc.status);
        if (!name || strcmp(name, "unknown status") == 0 || lc.status == FC_OK)
            return fc_err_set(err, FC_ERR_INTERNAL, "cpu: kernel %s reported status %d", k->name, (int)lc.status);
        return fc_err_set(err, (FcStatus)lc.status, "cpu: kernel %s: a run-time check failed (%s)", k->name, name);
    }
    return FC_OK;
}

/* A product with B in panels or its epilogue in the cache: per block of C's rows (KirGemm.panel_m;
 * all of them when 0),
 *  - with B in panels, per chunk of B's columns (panel_n; all of them when 0), per panel, its
 *    operand kernel's blocks for those rows of the chunk, writing them into the panel buffer
 *    (its param based panel-rows of the chunk's width earlier, so that the kernel's index
 *    lands there), then the panel's product for the block's rows and the chunk's columns, split
 *    over the pool (the block of C outermost: its rows of A stay in the cache over the chunks;
 *    B transposed, trans_b, the kernel makes B^T, a panel being a chunk of B^T's columns with
 *    all its rows); B one panel (all of it) is made once, before the first block; else the
 *    block's product with all of B;
 *  - first (a_rows) A's operand kernel's blocks for the block's rows, into A's buffer (based the
 *    block's first row earlier, as the product's A);
 *  - then (epi_rows) the epilogue's blocks for the block's rows, while the block of C is in the
 *    cache; C's buffer holding one block (c_block), the product's and the epilogue's C based
 *    the block's first row earlier. */
static FcStatus run_product_blocks(RtCpuProgram *cp, int li, void *const *inputs, void *const *outputs, FcErr *err) {
    const KirProgram *p = cp->p;
    const KirLaunch *l = &p->launches.data[li];
    const KirKernel *k = p->kernels.data[l->kernel];
    const KirGemm *g = &k->gemm;
    void *gargs[3], **oargs = cp->args, **eargs = cp->args + cp->max_args, **aargs = cp->args + 2 * cp->max_args;
    FC_TRY(bind_args(cp, li, inputs, outputs, gargs, err));
    size_t es = fc_dtype_size(g->dtype);
    const KirKernel *opk = NULL;
    int wp = -1, cp_e = -1;
    if (g->panel_k > 0) {
        const KirLaunch *ol = &p->launches.data[li - 1];
        opk = p->kernels.data[ol->kernel];
        FC_TRY(bind_args(cp, li - 1, inputs, outputs, oargs, err));
        for (int a = 0; a < ol->nargs; a++)
            if (opk->params.data[a].written) wp = a;
    }
    int ai = li - 1 - (g->panel_k > 0), wa = -1;   /* A's operand kernel */
    if (g->a_rows > 0) {
        const KirLaunch *al = &p->launches.data[ai];
        FC_TRY(bind_args(cp, ai, inputs, outputs, aargs, err));
        for (int a = 0; a < al->nargs; a++)
            if (p->kernels.data[al->kernel]->params.data[a].written) wa = a;
    }
    if (g->epi_rows > 0) {
        const KirLaunch *el = &p->launches.data[li + 1];
        FC_TRY(bind_args(cp, li + 1, inputs, outputs, eargs, err));
        for (int a = 0; a < el->nargs; a++)
            if (el->args[a] == l->args[2]) cp_e = a;
    }
    int64_t mb = kir_gemm_block_rows(g), nc = g->panel_n > 0 ? g->panel_n : g->n;
    int64_t rb = opk ? opk->grid / kir_gemm_chunks(g) : 0;   /* the operand kernel's blocks a chunk */
    PanelCtx pc = {{g, gargs[0], gargs[1], gargs[2], gemm_parts(cp, mb)}, 0, 0, 0, 0, 0, 0};
    FC_TRY(rt_blas_ready((int)pc.gc.nparts, k->name, err));
    /* B one panel (all of it, no chunks): made once, before every block */
    bool once = opk && g->panel_k >= g->k && g->panel_n == 0;
    if (once) {
        oargs[wp] = gargs[1];
        FC_TRY(run_blocks(cp, li - 1, oargs, 0, opk->grid, err));
    }
    for (pc.r0 = 0; pc.r0 < g->m; pc.r0 = pc.r1) {
        pc.r1 = g->m - pc.r0 < mb ? g->m : pc.r0 + mb;
        pc.gc.nparts = gemm_parts(cp, pc.r1 - pc.r0);   /* no more than the first block's */
        /* C's buffer one block: its row r0 at the buffer's start */
        char *c = (char *)gargs[2] - (ptrdiff_t)(g->c_block ? (size_t)pc.r0 * (size_t)g->n * es : 0);
        pc.gc.c = c;
        if (wa >= 0) {   /* the block's rows of A, made into A's buffer (its row r0 at the start) */
            aargs[wa] = (char *)gargs[0] - (ptrdiff_t)((size_t)pc.r0 * (size_t)g->k * es);
            pc.gc.a = aargs[wa];
            int64_t a0 = pc.r0 / g->a_rows, a1 = (pc.r1 + g->a_rows - 1) / g->a_rows;
            FC_TRY(run_blocks(cp, ai, aargs, a0, a1 - a0, err));
        }
        if (!opk || once) {
            pc.k0 = 0;
            pc.kc = g->k;
            pc.c0 = 0;
            pc.c1 = g->n;
            rt_pool_parallel_for(cp->pool, pc.gc.nparts, run_panel_part, &pc);
        }
        for (int64_t j = 0; opk && !once && j * nc < g->n; j++) {
            pc.c0 = j * nc;
            pc.c1 = g->n - pc.c0 < nc ? g->n : pc.c0 + nc;
            for (int64_t k0 = 0, blk = 0; k0 < g->k; k0 += g->panel_k, blk += g->panel_blocks) {
                /* the kernel stores element [r, c] of the chunk at param + r * width + c - c0:
                 * based k0 rows of the chunk's width before the panel; B transposed, the panel is
                 * a chunk of all the rows of B^T, at the param itself */
                oargs[wp] = (char *)gargs[1] - (ptrdiff_t)(g->trans_b ? 0 : (size_t)k0 * (size_t)(pc.c1 - pc.c0) * es);
                int64_t nb = rb - blk < g->panel_blocks ? rb - blk : g->panel_blocks;
                FC_TRY(run_blocks(cp, li - 1, oargs, j * rb + blk, nb, err));
                pc.k0 = k0;
                pc.kc = g->k - k0 < g->panel_k ? g->k - k0 : g->panel_k;
                rt_pool_parallel_for(cp->pool, pc.gc.nparts, run_panel_part, &pc);
            }
        }
        if (cp_e >= 0) {
            eargs[cp_e] = c;
            int64_t e0 = pc.r0 / g->epi_rows, e1 = (pc.r1 + g->epi_rows - 1) / g->epi_rows;
            FC_TRY(run_blocks(cp, li + 1, eargs, e0, e1 - e0, err));
        }
    }
    return FC_OK;
}

static FcStatus run_one(RtCpuProgram *cp, int li, void *const *inputs, void *const *outputs, FcErr *err) {
    const KirProgram *p = cp->p;
    const KirLaunch *l = &p->launches.data[li];
    const KirKernel *k = p->kernels.data[l->kernel];
    if (product_runs(p, li)) return FC_OK;   /* the product runs it, panel by panel or block by block */
    if (k->library && (k->gemm.panel_k > 0 || k->gemm.epi_rows > 0 || k->gemm.a_rows > 0))
        return run_product_blocks(cp, li, inputs, outputs, err);
    FC_TRY(bind_args(cp, li, inputs, outputs, cp->args, err));
    if (k->library) {   /* a matrix product through the BLAS, its rows split over the pool */
        GemmCtx gc = {&k->gemm, cp->args[0], cp->args[1], cp->args[2], gemm_parts(cp, k->gemm.batch * k->gemm.m)};
        FC_TRY(rt_blas_ready((int)gc.nparts, k->name, err));
        rt_pool_parallel_for(cp->pool, gc.nparts, run_gemm_part, &gc);
        return FC_OK;
    }
    return run_blocks(cp, li, cp->args, 0, k->grid, err);
}

FcStatus rt_cpu_run(RtCpuProgram *cp, void *const *inputs, void *const *outputs, FcErr *err) {
    for (int i = 0; i < cp->p->launches.len; i++) FC_TRY(run_one(cp, i, inputs, outputs, err));
    return FC_OK;
}

FcStatus rt_cpu_run_launch(RtCpuProgram *cp, int i, void *const *inputs, void *const *outputs, FcErr *err) {
    if (i < 0 || i >= cp->p->launches.len)
        return fc_err_set(err, FC_ERR_USAGE, "cpu: launch %d does not exist (the program has %d)", i, cp->p->launches.len);
    return run_one(cp, i, inputs, outputs, err);
}

/* ---- large buffers -------------------------------------------------------------------------- */
/* A row kernel touches a new 4 KiB page of every operand per 1024-f32 row: with 4 KiB pages
 * that is a page walk per row and array. Buffers of 2 MiB or more are therefore aligned to
 * 2 MiB and advised MADV_HUGEPAGE (a hint: where transparent huge pages are "madvise" or
 * "always" the kernel backs them with 2 MiB pages; elsewhere nothing changes). Smaller ones
 * are 64-byte aligned. Measured: the fused residual/layernorm/GELU kernel 5-9% faster. */
enum { HUGE_PAGE = 2 << 20 };
void *rt_cpu_alloc(size_t bytes, void **raw) {
    size_t align = bytes >= HUGE_PAGE ? HUGE_PAGE : 64;
    *raw = NULL;
    if (bytes > SIZE_MAX - align || !(*raw = fc_alloc(bytes + align))) return NULL;
    uintptr_t p = ((uintptr_t)*raw + align - 1) & ~(uintptr_t)(align - 1);
#ifdef MADV_HUGEPAGE
    if (align == HUGE_PAGE) {
        size_t len = ((uintptr_t)*raw + bytes + align - p) / HUGE_PAGE * HUGE_PAGE;
        if (len) (void)madvise((void *)p, len, MADV_HUGEPAGE);
    }
#endif
    return (void *)p;
}

/* ---- STREAM copy --------------------------------------------------------------------------- */
/* Size of cpu0's cache of `level` (sysfs; level 0: the last level), skipping instruction
 * caches; else sysconf's figure (which on some parts reports the whole package); 0 if none. */
static int64_t cache_bytes(int level) {
    int64_t best = 0;
    int best_level = -1;
    for (int i = 0; i < 16; i++) {
        char path[128], buf[64];
        int lv = -1;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fscanf(f, "%d", &lv) != 1) lv = -1;
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        if ((f = fopen(path, "r"))) {
            bool instr = fgets(buf, sizeof buf, f) && strncmp(buf, "Instruction", 11) == 0;
            fclose(f);
            if (instr) continue;
        }
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        f = fopen(path, "r");
        if (!f) continue;
        if (fgets(buf, sizeof buf, f)) {
            char *end = NULL;
            long long n = strtoll(buf, &end, 10);
            if (end && (*end == 'K' || *end == 'k')) n *= 1024;
            else if (end && (*end == 'M' || *end == 'm')) n *= 1024 * 1024;
            if (n > 0 && (level == 0 ? lv > best_level : lv == level)) { best_level = lv; best = n; }
        }
        fclose(f);
    }
    if (best > 0) return best;
    long v = sysconf(level == 1 ? _SC_LEVEL1_DCACHE_SIZE : level == 2 ? _SC_LEVEL2_CACHE_SIZE : _SC_LEVEL3_CACHE_SIZE);
    return v > 0 ? v : 0;
}
/* The last-level cache, 32 MiB when unknown. */
static int64_t llc_bytes(void) {
    int64_t n = cache_bytes(0);
    return n > 0 ? n : (int64_t)32 << 20;
}

static PassCpu host_cpu;
static void host_init(void) {
    host_cpu.l1d_bytes = cache_bytes(1);
    host_cpu.l2_bytes = cache_bytes(2);
    host_cpu.llc_bytes = cache_bytes(0);
    /* testing aids: a small last-level cache makes small kernels stream, a small L2 makes
     * small products take B in panels (docs/cpu.md) */
    const char *e = getenv("FUSEC_CPU_LLC_BYTES");
    char *end = NULL;
    long long v = e ? strtoll(e, &end, 10) : 0;
    if (e && end && *end == '\0' && v > 0) host_cpu.llc_bytes = v;
    e = getenv("FUSEC_CPU_L2_BYTES");
    end = NULL;
    v = e ? strtoll(e, &end, 10) : 0;
    if (e && end && *end == '\0' && v > 0) host_cpu.l2_bytes = v;
    host_cpu.vector_bytes = 16;
    const char *lname = NULL;
    int level = rt_cpu_level(&lname);
    if (level > 0) {   /* FUSEC_CPU: the level's vectors */
        host_cpu.vector_bytes = level == 4 ? 64 : level == 3 ? 32 : 16;
        return;
    }
    char *f = LLVMGetHostCPUFeatures();   /* "+avx2,-avx512f,..." */
    if (f && strstr(f, "+avx512f")) host_cpu.vector_bytes = 64;
    else if (f && strstr(f, "+avx")) host_cpu.vector_bytes = 32;
    LLVMDisposeMessage(f);
}
int rt_cpu_stream_stores(const RtCpuProgram *cp) { return cp->nt_stores; }
int rt_cpu_table_permutes(const RtCpuProgram *cp) { return cp->table_permutes; }
bool rt_cpu_cache_hit(const RtCpuProgram *cp) { return cp->cache_hit; }
void rt_cpu_host(PassCpu *out) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, host_init);
    *out = host_cpu;
}

typedef struct StreamCtx { char *a, *b; int64_t bytes, nchunks; int touch; } StreamCtx;
static void stream_chunk(void *arg, int64_t c) {
    StreamCtx *s = arg;
    int64_t base = s->bytes / s->nchunks, rem = s->bytes % s->nchunks;
    int64_t begin = c * base + (c < rem ? c : rem), n = base + (c < rem ? 1 : 0);
    if (s->touch) {
        memset(s->a + begin, 0, (size_t)n);
        memset(s->b + begin, 0x3c, (size_t)n);
    } else {
        memcpy(s->a + begin, s->b + begin, (size_t)n);
    }
}
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double rt_cpu_stream_gbps(int nthreads) {
    FcErr err;
    int nt = 0;
    if (resolve_threads(nthreads, &nt, &err) != FC_OK) nt = host_cores();
    /* each array >= 4 x the last-level cache, both together <= 512 MiB */
    int64_t bytes = 4 * llc_bytes();
    if (bytes < ((int64_t)64 << 20)) bytes = (int64_t)64 << 20;
    if (bytes > ((int64_t)256 << 20)) bytes = (int64_t)256 << 20;
    void *ra = NULL, *rb = NULL;
    char *a = rt_cpu_alloc((size_t)bytes, &ra), *b = rt_cpu_alloc((size_t)bytes, &rb);
    RtPool *pool = NULL;
    double best = 0.0;
    if (a && b && rt_pool_new(nt, 0, &pool, &err) == FC_OK) {
        StreamCtx s = {a, b, bytes, nt, 1};
        rt_pool_parallel_for(pool, nt, stream_chunk, &s); /* first touch, in parallel */
        s.touch = 0;
        double tbest = 1e30;
        for (int rep = 0; rep < 5; rep++) {
            double t0 = now_s();
            rt_pool_parallel_for(pool, nt, stream_chunk, &s);
            double t = now_s() - t0;
            if (t < tbest) tbest = t;
        }
        if (tbest > 0 && tbest < 1e30) best = 2.0 * (double)bytes / tbest / 1e9;
    }
    rt_pool_free(pool);
    fc_free(ra);
    fc_free(rb);
    return best;
}

/* ---- f32 peak ------------------------------------------------------------------------------- */
/* rt_cpu_peak_gflops: every thread runs a loop of 12 independent chains of vector FMAs
 * (a = a * m + c, no loads or stores) for about 4 ms; GFLOP/s = 2 flops per lane per FMA, over
 * all threads, best of 5 runs. The widest FMA the CPU supports is picked at run time
 * (__builtin_cpu_supports: AVX-512F, else AVX2 + FMA, else SSE multiply + add; scalar
 * multiply + add off x86). Cached per process (and thread count) under a mutex. */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PEAK_CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
__attribute__((target("avx512f"))) static float peak_loop_avx512(int64_t iters) {
    const __m512 m = _mm512_set1_ps(0.9999f), c = _mm512_set1_ps(1e-4f);
#define DECL(i) __m512 a##i = _mm512_set1_ps(1.0f + 0.01f * (float)(i));
#define STEP(i) a##i = _mm512_fmadd_ps(a##i, m, c);
#define SUM(i) s = _mm512_add_ps(s, a##i);
    PEAK_CHAINS(DECL)
    for (int64_t it = 0; it < iters; it++) { PEAK_CHAINS(STEP) }
    __m512 s = _mm512_setzero_ps();
    PEAK_CHAINS(SUM)
    return _mm512_reduce_add_ps(s);
#undef DECL
#undef STEP
#undef SUM
}
__attribute__((target("avx2,fma"))) static float peak_loop_avx2(int64_t iters) {
    const __m256 m = _mm256_set1_ps(0.9999f), c = _mm256_set1_ps(1e-4f);
#define DECL(i) __m256 a##i = _mm256_set1_ps(1.0f + 0.01f * (float)(i));
#define STEP(i) a##i = _mm256_fmadd_ps(a##i, m, c);
#define SUM(i) s = _mm256_add_ps(s, a##i);
    PEAK_CHAINS(DECL)
    for (int64_t it = 0; it < iters; it++) { PEAK_CHAINS(STEP) }
    __m256 s = _mm256_setzero_ps();
    PEAK_CHAINS(SUM)
    float l[8];
    _mm256_storeu_ps(l, s);
    return l[0] + l[1] + l[2] + l[3] + l[4] + l[5] + l[6] + l[7];
#undef DECL
#undef STEP
#undef SUM
}
static float peak_loop_sse(int64_t iters) {
    const __m128 m = _mm_set1_ps(0.9999f), c = _mm_set1_ps(1e-4f);
#define DECL(i) __m128 a##i = _mm_set1_ps(1.0f + 0.01f * (float)(i));
#define STEP(i) a##i = _mm_add_ps(_mm_mul_ps(a##i, m), c);
#define SUM(i) s = _mm_add_ps(s, a##i);
    PEAK_CHAINS(DECL)
    for (int64_t it = 0; it < iters; it++) { PEAK_CHAINS(STEP) }
    __m128 s = _mm_setzero_ps();
    PEAK_CHAINS(SUM)
    float l[4];
    _mm_storeu_ps(l, s);
    return l[0] + l[1] + l[2] + l[3];
#undef DECL
#undef STEP
#undef SUM
}
#undef PEAK_CHAINS
#else
static float peak_loop_scalar(int64_t iters) {
    float a[12], s = 0;
    for (int i = 0; i < 12; i++) a[i] = 1.0f + 0.01f * (float)i;
    for (int64_t it = 0; it < iters; it++)
        for (int i = 0; i < 12; i++) a[i] = a[i] * 0.9999f + 1e-4f;
    for (int i = 0; i < 12; i++) s += a[i];
    return s;
}
#endif

typedef struct PeakCtx {
    float (*loop)(int64_t);
    int64_t iters;
    float sink[RT_CPU_MAX_THREADS];   /* keeps each chunk's result alive */
} PeakCtx;
static void peak_chunk(void *arg, int64_t c) {
    PeakCtx *p = arg;
    p->sink[c] = p->loop(p->iters);
}

/* One measurement with nt threads; 0 when the pool or the context cannot be made. */
static double peak_measure(int nt, float (*loop)(int64_t), int lanes) {
    FcErr err;
    RtPool *pool = NULL;
    PeakCtx *ctx = fc_calloc(1, sizeof *ctx);
    double best = 0.0;
    if (ctx && rt_pool_new(nt, 0, &pool, &err) == FC_OK) {
        ctx->loop = loop;
        /* calibrate on this thread: about 4 ms per run */
        ctx->iters = 4096;
        double t0 = now_s();
        peak_chunk(ctx, 0);
        double t1 = now_s() - t0;
        double want = t1 > 0 ? 4e-3 / (t1 / (double)ctx->iters) : 1e6;
        ctx->iters = want < 4096 ? 4096 : want > 1e9 ? (int64_t)1e9 : (int64_t)want;
        double tbest = 1e30;
        for (int rep = 0; rep < 5; rep++) {
            t0 = now_s();
            rt_pool_parallel_for(pool, nt, peak_chunk, ctx);
            double t = now_s() - t0;
            if (t < tbest) tbest = t;
        }
        if (tbest > 0 && tbest < 1e30)
            best = (double)nt * (double)ctx->iters * 12.0 * 2.0 * (double)lanes / tbest / 1e9;
    }
    rt_pool_free(pool);
    fc_free(ctx);
    return best;
}

double rt_cpu_peak_gflops(int nthreads, const char **isa) {
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static int cached_nt = 0;
    static double cached = 0.0;
    FcErr err;
    int nt = 0;
    if (resolve_threads(nthreads, &nt, &err) != FC_OK) nt = host_cores();
    const char *name;
    int lanes;
    float (*loop)(int64_t);
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) {
        loop = peak_loop_avx512, lanes = 16, name = "AVX-512 FMA";
    } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        loop = peak_loop_avx2, lanes = 8, name = "AVX2 FMA";
    } else {
        loop = peak_loop_sse, lanes = 4, name = "SSE multiply + add";
    }
#else
    loop = peak_loop_scalar, lanes = 1, name = "scalar multiply + add";
#endif
    if (isa) *isa = name;
    pthread_mutex_lock(&mu);
    double best = cached_nt == nt ? cached : 0.0;
    if (!(best > 0)) {
        best = peak_measure(nt, loop, lanes);
        if (best > 0) {
            cached_nt = nt;
            cached = best;
        }
    }
    pthread_mutex_unlock(&mu);
    return best;
}
