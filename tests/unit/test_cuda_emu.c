/* test_cuda_emu.c: the CUDA emulation harness (docs/cuda_emu.md).
 *
 * Every AOT unit (.cu) that the tests below make is compiled by the host C++ compiler against
 * tests/cuda_emu/fusec_cuda_emu.h (threads as fibers, shared memory poisoned with 0xFF and
 * guarded, barriers and warp operations checked) and run on the CPU, in thread order and in
 * reverse thread (and block) order; results are compared with the oracle and with each other:
 *   1. the hand-built programs of kir_samples.h (against their plain-C references);
 *   2. every examples/NAME.tf at small, odd dims, fused and eager (against the reference
 *      interpreter, within fc_block_output_tolerance);
 *   3. small blocks that together use every op of the language, fused and eager;
 *   4. planted bugs that the harness must catch: a __syncthreads deleted from a tiled matrix
 *      product (after the loads; before the next loads), an index off by one in a pointwise
 *      kernel (a store, a load), an amax merged without its warp reduction;
 *   5. the emulator's own checks (tests/cuda_emu/selftest.cc): shuffles, votes, atomics,
 *      dynamic shared memory, launch bounds, and the errors it must report (barrier
 *      divergence, a deadlock, a shared index past the end, a mask without the caller,
 *      a thread's stack overflow, lanes at different shuffles, a reduction over lanes that do
 *      not exist);
 *   6. the generated fc_ndtr against the CPU device's ndtr and gelu, bit for bit (add_ndtr_bitwise).
 * Building the units, compiling them in batches, running each case in a child process (so a
 * fault on a guard page becomes a message rather than a crash) and comparing is the shared
 * runner's (tests/cuda_emu/emu_runner.c, also used by difftest); this file makes the cases.
 * Exits 77 when no C++ compiler is found. The work folder ($TMPDIR, else the build tree) is
 * kept when something fails, or with FUSEC_EMU_KEEP=1; FUSEC_EMU_CXX picks the compiler.
 */
#include "emu_runner.h"
#include "kir_samples.h"
#include "codegen.h"
#include "cpu.h"
#include "fusec.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef FUSEC_CXX
#define FUSEC_CXX "c++"
#endif
#define EMU_DIR FUSEC_SOURCE_DIR "/tests/cuda_emu"
#define CASES_PER_BATCH 6

#include "check.h"

static EmuRunner emu;


/* What this file keeps per case beside the runner's (EmuCase.user). */
typedef struct CaseInfo {
    KsSample sample;          /* a kir sample: the program */
    void **sample_want;       /* its reference run, every buffer */
    bool is_sample;
    const char *planted;      /* a planted bug: the harness must report a failure */
} CaseInfo;

static const char *planted_of(const EmuCase *c) { return c->user ? ((const CaseInfo *)c->user)->planted : NULL; }

/* 1. a kir sample: its AOT unit; inputs from its fill, outputs from its reference */
static void sample_compare(const EmuCase *c, void *const *got, char *why, size_t n) {
    const CaseInfo *x = c->user;
    const KirProgram *p = x->sample.prog;
    void **bufs = emu_xcalloc((size_t)p->buffers.len, sizeof(void *));
    for (int b = 0; b < p->buffers.len; b++) {
        const KirBuffer *kb = &p->buffers.data[b];
        if (kb->kind == KIR_BUF_INPUT) bufs[b] = c->in[kb->index];
        if (kb->kind == KIR_BUF_OUTPUT) bufs[b] = got[kb->index];
    }
    char msg[512];
    long bad = ks_compare(p, bufs, x->sample_want, x->sample.rtol, msg, sizeof msg);
    if (bad) snprintf(why, n, "%ld elements differ from the reference; first: %s", bad, msg);
    free(bufs);
}

static void add_sample(int i) {
    KsSample s;
    if (!ks_sample(i, &s)) { EXPECT(0, "sample %d: out of memory", i); return; }
    char name[128];
    snprintf(name, sizeof name, "sample_%s", s.name);
    EmuCase *c = emu_new_case(&emu, name);
    CaseInfo *x = emu_xcalloc(1, sizeof *x);
    x->sample = s;
    x->is_sample = true;
    c->user = x;
    c->compare = sample_compare;
    const KirProgram *p = s.prog;
    int nin = 0, nout = 0;
    for (int b = 0; b < p->buffers.len; b++) {
        if (p->buffers.data[b].kind == KIR_BUF_INPUT) nin++;
        if (p->buffers.data[b].kind == KIR_BUF_OUTPUT) nout++;
    }
    emu_alloc_io(c, nin, nout);
    CgIoDesc *io = emu_xcalloc((size_t)(nin + nout), sizeof(CgIoDesc));
    void **bufs = ks_alloc_buffers(p), **want = ks_alloc_buffers(p);
    s.fill(bufs, p, 1234 + (uint64_t)i);
    ks_copy_inputs(p, bufs, want);
    c->want_status = s.reference(want, p);
    for (int b = 0; b < p->buffers.len; b++) {
        const KirBuffer *kb = &p->buffers.data[b];
        if (kb->kind == KIR_BUF_TEMP) continue;
        bool out = kb->kind == KIR_BUF_OUTPUT;
        CgIoDesc *d = &io[out ? nin + kb->index : kb->index];
        d->name = out ? "out" : "in";
        d->dtype = kb->dtype;
        d->shape.rank = 1;
        d->shape.dims[0] = kb->numel;
        d->is_output = out;
        if (out) { c->out_dt[kb->index] = kb->dtype; c->out_n[kb->index] = kb->numel; }
        else {
            c->in_dt[kb->index] = kb->dtype;
            c->in_n[kb->index] = kb->numel;
            size_t bytes = (size_t)kb->numel * fc_dtype_size(kb->dtype);
            c->in[kb->index] = emu_xcalloc(bytes, 1);
            memcpy(c->in[kb->index], bufs[b], bytes);
        }
    }
    x->sample_want = want;
    ks_free_buffers(p, bufs);
    StrBuf sb = {0};
    FcErr err = {0};
    FcStatus st = cg_cuda_aot(p, "emu", io, nin + nout, &sb, &err);
    EXPECT(st == FC_OK, "%s: cg_cuda_aot: %s", name, err.msg);
    c->cu = st == FC_OK && !sb.failed ? emu_xstrdup(sb.data) : NULL;
    sb_free(&sb);
    free(io);
}

/* 2, 3. a block fused and eager, each as the AOT unit (matrix products through cuBLASLt) and,
 * where it differs, as the GPU-shaped unit (matrix products as generated kernels); input i
 * from seed + i */
static void add_block_variants(const char *name, const char *src, const EmuDim *dims, uint64_t seed) {
    int ids[EMU_NVARIANTS];
    char why[2048];
    bool ok = emu_add_block_variants(&emu, name, src, dims, seed, 1, EMU_ALL_VARIANTS, ids, why, sizeof why);
    EXPECT(ok, "%s", why);
}

/* ---- planted bugs -------------------------------------------------------------------------------- */
/* The text of the kernel whose header comment says `kind <kind>` and that contains `need`:
 * [*b, *e) (from its comment to the end of its body). */
static bool find_kernel(const char *cu, const char *kind, const char *need, const char **b, const char **e) {
    char key[64];
    snprintf(key, sizeof key, ": kind %s,", kind);
    for (const char *p = strstr(cu, key); p; p = strstr(p + 1, key)) {
        const char *body = strstr(p, "\n{\n");
        const char *end = body ? strstr(body, "\n}\n") : NULL;
        if (!end) return false;
        const char *hit = strstr(body, need);
        if (hit && hit < end) { *b = p; *e = end; return true; }
    }
    return false;
}

/* cu with [at, at + cut) replaced by ins (a fresh string). */
static char *splice(const char *cu, const char *at, size_t cut, const char *ins) {
    size_t pre = (size_t)(at - cu), n = strlen(cu) - cut + strlen(ins);
    char *s = emu_xcalloc(n + 1, 1);
    memcpy(s, cu, pre);
    strcpy(s + pre, ins);
    strcat(s, at + cut);
    return s;
}

/* A clone of case from with the unit cu (taken) that carries a planted bug; a sample's clone
 * compares with the sample's reference (which the original case owns and frees). */
static void plant(int from, const char *name, char *cu, const char *planted) {
    const CaseInfo *src = emu.cases[from].user;
    CaseInfo *x = emu_xcalloc(1, sizeof *x);
    if (src) *x = *src;
    x->is_sample = false;
    x->planted = planted;
    EmuCase *c = emu_clone_case(&emu, from, name, cu);
    c->user = x;
}

static void add_planted(int mm, int pw, int am) {
    const char *b, *e;
    /* a barrier deleted from a tiled matrix product: the first, then the second one */
    for (int which = 0; which < 2 && mm >= 0; which++) {
        const char *cu = emu.cases[mm].cu;
        if (!cu || !find_kernel(cu, "matmul", "__shared__", &b, &e)) { EXPECT(0, "no matmul kernel with shared memory found"); break; }
        const char *bar = strstr(b, "__syncthreads();");
        if (which == 1 && bar) bar = strstr(bar + 1, "__syncthreads();");
        if (!bar || bar > e) { EXPECT(0, "the matmul kernel has fewer than 2 barriers"); break; }
        char *bad = splice(cu, bar, strlen("__syncthreads();"), "/* planted: barrier removed */");
        plant(mm, which ? "planted_no_barrier_before_reload" : "planted_no_barrier_after_load", bad,
                   which ? "the __syncthreads before the next tile's loads deleted" : "the __syncthreads after the tile loads deleted");
    }
    /* an index off by one in a pointwise kernel: a store, then a load */
    for (int which = 0; which < 2 && pw >= 0; which++) {
        const char *cu = emu.cases[pw].cu;
        if (!cu || !find_kernel(cu, "pointwise", which ? " = p0[" : "] = ", &b, &e)) {
            EXPECT(0, "no pointwise kernel with a %s found", which ? "load" : "store");
            break;
        }
        const char *at = strstr(strstr(b, "\n{\n"), which ? " = p0[" : "] = ");
        if (which) {   /* the load's closing bracket */
            at += strlen(" = p0[");
            int depth = 1;
            while (*at && depth) { if (*at == '[') depth++; if (*at == ']') depth--; if (depth) at++; }
        }
        char *bad = splice(cu, at, 0, " + 1");
        plant(pw, which ? "planted_load_index_plus_one" : "planted_store_index_plus_one", bad,
                   which ? "a load index + 1" : "a store index + 1");
    }
    /* an amax merge without the warp's reduction: the first lane stores only its own maximum */
    const char *cu = am >= 0 ? emu.cases[am].cu : NULL;
    const char *red = cu ? strstr(cu, "__reduce_max_sync(m, acc)") : NULL;
    if (!red) EXPECT(0, "no amax merge with a warp reduction found");
    else plant(am, "planted_amax_no_warp_reduce", splice(cu, red, strlen("__reduce_max_sync(m, acc)"), "acc"),
               "the amax merge's warp reduction deleted");
}

/* ---- a data error: a cross_entropy label out of range -------------------------------------------------- */
static void outputs_unspecified(const EmuCase *c, void *const *got, char *why, size_t n) {
    (void)c, (void)got, (void)why, (void)n;
}

/* The unit of case `from` (ops_training_fused) on its inputs with the label y[0, 4] = 17 = C:
 * the forward must return FC_ERR_RUNTIME_DATA (the gather's range check in the expansion). */
static void add_bad_label(int from) {
    if (from < 0 || !emu.cases[from].cu) { EXPECT(0, "no ops_training_fused case to break"); return; }
    char *cu = emu_xstrdup(emu.cases[from].cu);
    EmuCase *c = emu_new_case(&emu, "cross_entropy_bad_label");   /* may move emu.cases */
    const EmuCase *f = &emu.cases[from];
    c->cu = cu;
    emu_alloc_io(c, f->nin, f->nout);
    for (int i = 0; i < f->nin; i++) {
        size_t bytes = (size_t)f->in_n[i] * fc_dtype_size(f->in_dt[i]);
        c->in_dt[i] = f->in_dt[i];
        c->in_n[i] = f->in_n[i];
        c->in[i] = emu_xcalloc(bytes, 1);
        memcpy(c->in[i], f->in[i], bytes);
    }
    for (int i = 0; i < f->nout; i++) {
        c->out_dt[i] = f->out_dt[i];
        c->out_n[i] = f->out_n[i];
    }
    EXPECT(f->nin >= 2 && f->in_dt[1] == FC_I32 && f->in_n[1] == 15, "ops_training's labels are not i32[3, 5]");
    if (f->nin >= 2 && f->in_dt[1] == FC_I32 && f->in_n[1] == 15) ((int32_t *)c->in[1])[4] = 17;
    c->want_status = FC_ERR_RUNTIME_DATA;
    c->compare = outputs_unspecified;
    if (f->nfp8 > 0) {   /* the same unit: the same f8 state */
        c->nfp8 = f->nfp8;
        c->fp8_scale = emu_xcalloc((size_t)f->nfp8, sizeof *c->fp8_scale);
        memcpy(c->fp8_scale, f->fp8_scale, (size_t)f->nfp8 * sizeof *c->fp8_scale);
    }
}

/* ---- the emulator's self-test ------------------------------------------------------------------------- */
static void add_selftests(void) {
    static const struct { const char *name; const char *expect; } t[] = {
        {"selftest_warp_ops", NULL},            /* 0 */
        {"selftest_atomics", NULL},             /* 1 */
        {"selftest_dynamic_shared", NULL},      /* 2 */
        {"selftest_block_3d", NULL},            /* 3 */
        {"selftest_divergent_barrier", "a barrier in divergent code"},
        {"selftest_different_barriers", "threads wait at different __syncthreads"},
        {"selftest_deadlock", "deadlock"},
        {"selftest_shared_past_end", "guard page after shared array"},
        {"selftest_mask_without_caller", "does not include the calling lane"},
        {"selftest_launch_bounds", "over its __launch_bounds__"},
        {"selftest_stack_overflow", "stack"},
        {"selftest_dynamic_shared_past_end", "dynamic shared memory"},
        {"selftest_different_shuffles", "meet at different warp operations"},
        {"selftest_reduce_missing_lanes", "names lanes that do not exist"},
    };
    char *src = emu_read_text(EMU_DIR "/selftest.cc");
    EXPECT(src, "cannot read %s", EMU_DIR "/selftest.cc");
    if (!src) return;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        EmuCase *c = emu_new_case(&emu, t[i].name);
        c->handwritten = true;
        c->path = EMU_DIR "/selftest.cc";
        c->selftest = (int)i;
        c->expect_msg = t[i].expect;
        c->cu = i == 0 ? src : NULL;   /* compiled once, in a batch of its own */
    }
}

/* ---- the graphs ----------------------------------------------------------------------------------- */

/* Small blocks that, together, use every op of docs/ops.md and every dtype. */
static const struct Extra { const char *name; const char *src; } extras[] = {
    {"ops_unary",
     "block u(x: f32[3, 37]) -> f32[3, 37], f32[3, 37], f32[3, 37], f32[3, 37], f32[3, 37], f32[3, 37]\n"
     "{\n"
     "    p = abs(x) + 0.5\n"
     "    a = neg(x) + exp(x) + log(p) + sqrt(p) + rsqrt(p) + recip(p)\n"
     "    b = square(x) + tanh(x) + sigmoid(x) + relu(x) + silu(x) + erf(x)\n"
     "    c = sin(x) + cos(x) + gelu(x) + gelu(x, approx=\"tanh\")\n"
     "    return a, b, c, exp(-x * x), -x, abs(x)\n"
     "}\n"},
    {"ops_binary",
     "block bi(x: f32[4, 1, 9], y: f32[5, 9], i: i32[5, 9], j: i64[9]) -> f32[4, 5, 9], f32[4, 5, 9], bool[4, 5, 9], i32[5, 9], i64[5, 9], f32[5, 9]\n"
     "{\n"
     "    p = abs(y) + 0.25\n"
     "    a = x + y - x * y / p + pow(p, x) + maximum(x, y) - minimum(x, y)\n"
     "    b = where(x < y, x, y) + where(x >= y, 1.0, 2.0)\n"
     "    m = (x <= y) == (x > y * 0.5)\n"
     "    k = i * 3 + i - 7\n"
     "    l = j + i * 2\n"
     "    return a, b, m != (x == y), maximum(k, i), l, i / 3\n"
     "}\n"},
    {"ops_cast",
     "block ca(x: f32[6, 11], h: f16[11], b: bf16[6, 11], e: f8e4m3[11], f: f8e5m2[11], d: f64[6, 11]) ->\n"
     "    f16[6, 11], bf16[6, 11], f8e4m3[6, 11], f8e5m2[6, 11], i32[6, 11], i64[6, 11], bool[6, 11], f64[6, 11], f32[6, 11]\n"
     "{\n"
     "    s = x * 300.0\n"
     "    return cast(s, f16) + h, b * 2.0 + cast(x, bf16), cast(s, f8e4m3) + e, cast(s * 100.0, f8e5m2) + f, cast(s, i32), cast(d * 1e3, i64), cast(x, bool), d * 2.0 + cast(x, f64), cast(h, f32) + cast(b, f32)\n"
     "}\n"},
    /* i8 storage: float -> i8 saturating (x * 100 reaches past both ends), i64 -> i8 and -> i32
     * saturating, bool -> i8, i8 weights dequantized into a product, a gather of i8 rows, i8
     * index maps and where; 37 columns: whole and partial 16-byte vectors of i8 */
    {"ops_i8",
     "block q8(x: f32[6, 37], w: i8[37, 5], s: f32[5], t: i8[9, 37], ids: i32[4], l: i64[6, 37], c: bool[6, 37]) ->\n"
     "    i8[6, 37], f32[6, 5], i8[4, 37], f32[6, 37], i8[6, 37], i32[6, 37], i8[6, 37], i8[37, 6]\n"
     "{\n"
     "    q = cast(x * 100.0, i8)\n"
     "    r = slice(t, 0, 0, 6)\n"
     "    return q, x @ (cast(w, f32) * s), gather(t, ids), cast(q, f32) * 0.5 + cast(r, f32), cast(l * 20 - 150, i8), cast(l * 1000000000000 - 7000000000000, i32), where(c, q, cast(c, i8)), transpose(r)\n"
     "}\n"},
    {"ops_reduce",
     "block re(x: f32[5, 7, 33]) -> f32[5, 7], f32[5, 1, 33], f32[7], f32[], f32[5, 7, 33], f32[5, 7, 33], f32[5, 7, 33]\n"
     "{\n"
     "    return sum(x, axis=-1), mean(x, axis=1, keepdim=true), max(x, axis=[0, 2]), min(x), softmax(x, axis=0), log_softmax(x, axis=-1), x - mean(x, axis=-1, keepdim=true)\n"
     "}\n"},
    {"ops_norm",
     "block no(x: f32[3, 4, 50], g: f32[50], b: f32[50], g2: f32[4, 50]) -> f32[3, 4, 50], f32[3, 4, 50], f32[3, 4, 50], f32[3, 4, 50]\n"
     "{\n"
     "    return layernorm(x, g, b, eps=1e-5), rmsnorm(x, g), layernorm(x, axis=[1, 2]), rmsnorm(x, g2, axis=[-2, -1])\n"
     "}\n"},
    {"ops_shape",
     "block sh(x: f32[2, 3, 10], t: f32[7, 5], ids: i64[4, 2], ids32: i32[3]) -> f32[3, 2, 10], f32[2, 3, 20], f32[2, 3, 5],\n"
     "    f32[2, 3, 3], f32[4, 2, 5], f32[3, 5], i32[6, 4], f32[2, 4, 10], f32[6, 10], f32[2, 3, 2]\n"
     "{\n"
     "    a, b = split(x, 2, axis=-1)\n"
     "    c, d, e = split(x, [3, 3, 4], axis=-1)\n"
     "    return transpose(x, [1, 0, 2]), concat([x, -x], axis=-1), a * b, slice(x, -1, 1, 8, 3) + d, gather(t, ids), gather(t, ids32), iota([6, 4], 1) + iota([6, 4], 0, dtype=i32), broadcast(slice(x, 1, 0, 1), [2, 4, 10]) + full([2, 4, 10], 1.5), reshape(x, [-1, 10]), slice(e, 2, -4, -1, 2) + slice(c, 2, 0, 2)\n"
     "}\n"},
    {"ops_matmul",
     "block mm(a: f32[2, 3, 17, 37], b: f32[37, 19], v: f32[37], w: f32[3, 19, 1], one: f32[1, 1]) -> f32[2, 3, 17, 19], f32[2, 3, 17], f32[2, 3, 17, 1], f32[1, 1]\n"
     "{\n"
     "    c = a @ b\n"
     "    return c, a @ v, c @ w, one @ one\n"
     "}\n"},
    {"ops_attention",
     "block at(q: f32[2, 3, 6, 8], k: f32[2, 3, 9, 8], v: f32[2, 3, 9, 5], s: f32[2, 6, 9]) -> f32[2, 3, 6, 5], f32[2, 3, 6, 5], f32[2, 6, 9]\n"
     "{\n"
     "    return attention(q, k, v), attention(q, k, v, causal=true, scale=0.3), softmax(causal_mask(s))\n"
     "}\n"},
    {"ops_narrow",
     "block na(x: bf16[5, 40], w: bf16[40, 21], g: f16[40], y: f16[5, 40]) -> bf16[5, 21], f16[5, 40], bf16[5], f32[5, 40]\n"
     "{\n"
     "    h = layernorm(x, eps=1e-5)\n"
     "    return h @ w, rmsnorm(y, g), sum(x, axis=-1), softmax(cast(y, f32) * 2.0)\n"
     "}\n"},
    {"ops_size_one",
     "block one(x: f32[1, 1], y: f32[1], z: f32[1, 5, 1]) -> f32[1, 1], f32[1], f32[1, 5, 1], f32[1, 1], f32[]\n"
     "{\n"
     "    return softmax(x), layernorm(y), z * x + y, x @ x, sum(z)\n"
     "}\n"},
    /* the training ops: dropout's mask (bool outputs compare exactly) and cross_entropy; the
     * last two outputs are Random123's known answer through a graph: word 0 of Philox at
     * counter 0, key 0 is 0x6627e8d5 = 1713891541, kept at p = that / 2^32, dropped above */
    {"ops_training",
     "block tr(x: f32[3, 5, 17], y: i32[3, 5], h: bf16[4, 9], z: f64[7], w: i64[], v: f16[6, 33], u: i64[6]) ->\n"
     "    f32[3, 5, 17], bf16[4, 9], bool[3, 5, 17], bool[1000], f32[], f64[], f16[], f32[], bool[1], bool[1]\n"
     "{\n"
     "    return dropout(x, 0.25, seed=-77), dropout(h, 0.5, seed=3), dropout_mask([3, 5, 17], 0.6, seed=9007199254740993), dropout_mask(1000, 0.1, seed=0), cross_entropy(x, y), cross_entropy(z, w), cross_entropy(v, u), cross_entropy(x * 30.0, y) + 1.0, dropout_mask(1, 1713891541 / 4294967296, seed=0), dropout_mask(1, 1713891542 / 4294967296, seed=0)\n"
     "}\n"},
    {"ops_pointwise_chain",
     "block pw(x: f32[37, 5]) -> f32[37, 5]\n"
     "{\n"
     "    return x * 2.0 + 1.0\n"
     "}\n"},
    /* rows of 13001 f32 (52004 bytes) staged in shared memory: over the 48 KiB of static shared
     * memory, so the row kernel uses dynamic shared memory, opted in with cudaFuncSetAttribute */
    {"wide_rows_dynamic_shared",
     "block wide(x: f32[2, 13001], g: f32[13001], b: f32[13001]) -> f32[2, 13001], f32[2, 13001]\n"
     "{\n"
     "    return softmax(x, axis=1), layernorm(x, g, b)\n"
     "}\n"},
};

/* dropout masks of seeded random shapes (rank 0 to 4), p and seeds, and dropout of an f32 input
 * of the last shape: bool outputs compare exactly with the interpreter's masks. */
static void add_dropout_shapes(void) {
    uint64_t s = 20261201;
    char src[4096], ret[2048] = "", shape[128] = "";
    size_t at = 0;
    for (int k = 0; k < 6; k++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        int rank = (int)((s >> 33) % 5), n = 0;
        shape[0] = 0;
        for (int d = 0; d < rank; d++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            n += snprintf(shape + n, sizeof shape - (size_t)n, "%s%d", d ? ", " : "", 1 + (int)((s >> 33) % (d == rank - 1 ? 300 : 5)));
        }
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        at += (size_t)snprintf(ret + at, sizeof ret - at, "%sdropout_mask([%s], %g, seed=%lld)", k ? ", " : "", shape,
                               (double)((s >> 33) % 1000) / 1000.0, (long long)(int64_t)s);
    }
    snprintf(src, sizeof src, "block dr(x: f32[%s]) {\n    return %s, dropout(x, 0.375, seed=-9)\n}\n", shape, ret);
    add_block_variants("dropout_random_shapes", src, NULL, 900);
}

/* 6. the device's ndtr (fc_ndtr, codegen/cuda.c) is the CPU backend's (codegen/llvm.c vndtr),
 * bit for bit: the same operations in the same order, each rounded as written. The emulated
 * unit's ndtr(x) and gelu(x) over special values and a sweep of every binade of |x| in
 * [2^-30, 16) against the CPU device's, where the CPU's multiply-adds are fused (a host with
 * FMA and no FUSEC_CPU level below x86-64-v3; without FMA its results differ by design). */
#define NDTR_N 16384
static const char ndtr_src[] = "block nd(x: f32[16384]) -> f32[16384], f32[16384]\n{\n    return ndtr(x), gelu(x)\n}\n";
static float *ndtr_cpu[2];   /* the CPU device's outputs, NULL where the comparison is skipped */

static void ndtr_fill(float *x) {
    static const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 14.49f, -14.49f, 14.5f, -14.5f,
                                    -14.2f, -13.2f, -9.3f, -0.0021f, 1e-40f, -1e-40f, 100.0f, -100.0f,
                                    3.4e38f, -3.4e38f, 1.0f, -1.0f, 0.5f, -0.5f, 2.0f, -2.0f};
    int ns = (int)(sizeof special / sizeof special[0]);
    uint64_t r = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < NDTR_N; i++) {
        if (i < ns) { x[i] = special[i]; continue; }
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        double u = (double)(r >> 11) * 0x1p-53;       /* |x| = 2^(-30 + 34 u): every binade alike */
        float v = (float)ldexp(1.0 + u, (int)(-30 + 34 * ((double)(i - ns) / (NDTR_N - ns))));
        x[i] = (i & 1) ? -v : v;
    }
}

static void ndtr_compare(const EmuCase *c, void *const *got, char *why, size_t n) {
    if (!ndtr_cpu[0]) return;
    for (int o = 0; o < 2; o++)
        for (int i = 0; i < NDTR_N; i++) {
            float g = ((const float *)got[o])[i], w = ndtr_cpu[o][i];
            uint32_t gb, wb;
            memcpy(&gb, &g, 4);
            memcpy(&wb, &w, 4);
            if (gb != wb && !(g != g && w != w)) {
                snprintf(why, n, "%s: output %d, x = %a: CUDA %a, CPU %a (bits differ)", c->name, o,
                         (double)((const float *)c->in[0])[i], (double)g, (double)w);
                return;
            }
        }
}

static void add_ndtr_bitwise(void) {
    int ids[EMU_NVARIANTS];
    char why[1024];
    if (!emu_add_block_variants(&emu, "ndtr_bitwise", ndtr_src, NULL, 700, 1, 1u << EMU_V_FUSED, ids, why, sizeof why)) {
        EXPECT(0, "%s", why);
        return;
    }
    EmuCase *c = &emu.cases[ids[EMU_V_FUSED]];
    ndtr_fill(c->in[0]);
    c->compare = ndtr_compare;
    if (!rt_cpu_jit_fma()) { printf("ndtr_bitwise: the CPU's multiply-adds are not fused here; compared for running only\n"); return; }
    FcOptions *opt = NULL;
    FcBlock *b = NULL;
    FcDevice *d = NULL;
    FcProgram *p = NULL;
    FcTensor *t[3] = {0};
    int64_t dims[1] = {NDTR_N};
    bool ok = fc_options_new(&opt) == FC_OK && fc_compile_string(ndtr_src, "ndtr.tf", opt, &b) == FC_OK &&
              fc_device_open(FC_DEVICE_CPU, 0, &d) == FC_OK && fc_program_new(b, d, &p) == FC_OK;
    for (int i = 0; i < 3 && ok; i++) ok = fc_tensor_new(d, FC_F32, 1, dims, &t[i]) == FC_OK;
    ok = ok && fc_tensor_copy_from_host(t[0], c->in[0], NDTR_N * sizeof(float)) == FC_OK &&
         fc_program_run(p, &t[0], &t[1]) == FC_OK;
    for (int o = 0; o < 2 && ok; o++) {
        ndtr_cpu[o] = emu_xcalloc(NDTR_N, sizeof(float));
        ok = fc_tensor_copy_to_host(t[1 + o], ndtr_cpu[o], NDTR_N * sizeof(float)) == FC_OK;
    }
    EXPECT(ok, "ndtr_bitwise: the CPU device's run failed");
    if (!ok) ndtr_cpu[0] = NULL;
    for (int i = 0; i < 3; i++) fc_tensor_free(t[i]);
    fc_program_free(p);
    fc_device_free(d);
    fc_block_free(b);
    fc_options_free(opt);
}

int main(void) {
    emu_precision = getenv("FUSEC_EMU_PRECISION");   /* the units at --precision (ctest *_bf16/_f16) */
    double t0 = emu_now_s();
    char why[1024];
    int st = emu_init(&emu, FUSEC_CXX, EMU_DIR, FUSEC_BINARY_DIR, why, sizeof why);
    if (st == 77) { printf("SKIP: %s\n", why); return 77; }
    if (st != 0) { fprintf(stderr, "%s\n", why); return 1; }

    /* ---- the cases ---- */
    int mm = -1, pw = -1, tr = -1, am = -1;
    for (int i = 0; i < KS_NUM_SAMPLES; i++) add_sample(i);
    for (int i = 0; i < emu.ncases; i++)
        if (!strcmp(emu.cases[i].name, "sample_amax_b100")) am = i;
    for (int e = 0; e < emu_nexamples; e++) {
        char *src = emu_example_source(FUSEC_SOURCE_DIR, e);
        EXPECT(src, "cannot read examples/%s.tf", emu_examples[e].file);
        if (!src) continue;
        int first = emu.ncases;
        add_block_variants(emu_examples[e].file, src, emu_examples[e].dims, 100 + (uint64_t)e);
        for (int i = first; i < emu.ncases; i++)   /* K = 40: three tiles of 16, the last partial */
            if (!strcmp(emu.cases[i].name, "gpt2_mlp_fused_gpu")) mm = i;
        free(src);
    }
    for (size_t e = 0; e < sizeof extras / sizeof extras[0]; e++) {
        int first = emu.ncases;
        add_block_variants(extras[e].name, extras[e].src, NULL, 500 + e);
        for (int i = first; i < emu.ncases; i++)
            if (!strcmp(emu.cases[i].name, "ops_pointwise_chain_fused")) pw = i;
            else if (!strcmp(emu.cases[i].name, "ops_training_fused")) tr = i;
    }
    add_bad_label(tr);
    add_dropout_shapes();
    if (!emu_precision) add_ndtr_bitwise();
    int first_planted = emu.ncases;
    /* the planted bugs test the harness, on the units as declared: their patterns (a load
     * `= p0[`) are the f32 units' */
    if (!emu_precision) add_planted(mm, pw, am);
    int nplanted = emu.ncases - first_planted;
    add_selftests();
    double t_cases = emu_now_s();

    /* ---- compile: the runtime once, then batches of units, two compiles at a time ---- */
    int unbuilt = emu_build(&emu, CASES_PER_BATCH, 2);
    EXPECT(unbuilt == 0, "%d case(s) did not build", unbuilt);
    double t_compile = emu_now_s();

    /* ---- run and check ---- */
    int passed = 0, caught = 0;
    for (int i = 0; i < emu.ncases; i++) {
        EmuCase *c = &emu.cases[i];
        if (!c->cu && !c->handwritten) { EXPECT(0, "%s: not built", c->name); continue; }
        EmuReport rep;
        double ts = emu_now_s();
        emu_check(&emu, i, &rep);
        double dt = emu_now_s() - ts;
        const char *planted = planted_of(c);
        if (planted) {
            EXPECT(rep.why[0], "%s (%s): the harness did not catch the planted bug", c->name, planted);
            if (rep.why[0]) { caught++; printf("caught   %-36s %s: %s\n", c->name, planted, rep.why); }
        } else {
            EXPECT(!rep.why[0], "%s: %s", c->name, rep.why);
            if (!rep.why[0]) { passed++; printf("ok       %-36s %.2f s\n", c->name, dt); }
        }
    }
    double t_end = emu_now_s();
    printf("cuda emulation: %d of %d cases passed, %d of %d planted bugs caught; building cases %.1f s, "
           "compiling %.1f s (%d C++ compiles, %d from the cache), running %.1f s\n",
           passed, emu.ncases - nplanted, caught, nplanted, t_cases - t0, t_compile - t_cases, emu.n_compiles, emu.n_cached,
           t_end - t_compile);

    /* ---- cleanup ---- */
    const char *keep = getenv("FUSEC_EMU_KEEP");
    for (int i = 0; i < emu.ncases; i++) {
        EmuCase *c = &emu.cases[i];
        if (c->handwritten) { if (c->selftest != 0) c->cu = NULL; continue; }   /* the source: freed by emu_free */
        CaseInfo *x = c->user;
        if (!x) continue;
        if (x->is_sample) {
            ks_free_buffers(x->sample.prog, x->sample_want);
            ks_sample_free(&x->sample);
        }
        free(x);
        c->user = NULL;
    }
    emu_free(&emu, (keep && keep[0] == '1') || failures);
    if (failures) { fprintf(stderr, "%d failure(s)\n", failures); return 1; }
    return 0;
}
