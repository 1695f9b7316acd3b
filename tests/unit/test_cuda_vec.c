/* test_cuda_vec.c: 16-byte global accesses of pointwise and row kernels (KirStmt.vec).
 *
 *   1. the lowering marks vec loops where alignment allows: GPU-shaped programs of a few
 *      blocks (the residual/layernorm/GELU example at N=4, C=256 fused and eager, a layernorm,
 *      a bf16 pointwise, an f64 pointwise, a bool-output compare) have `vec W` thread loops of
 *      the width of their narrowest operand; a row of C=100 bf16 (200 bytes, not a multiple of
 *      16) and of C=101 f32 has none in its row kernel, a row of C=100 f32 has width 4; the
 *      CPU-shaped program of the same block has none;
 *   2. the kernels compile under NVRTC for sm_80 and sm_90 (PTX and cubin) without warnings,
 *      and the sm_90 PTX holds the vector instructions: ld.global(.nc).v4 and st.global.v4
 *      (v2 for f64; bf16 and bytes move as v4 of 32-bit words), and none in the row kernels
 *      that are not vectorized;
 *   3. with nvcc: each AOT unit compiles with -Werror all-warnings and ptxas -v shows no spills;
 *   4. malformed vec IR is refused by kir_verify and by the printer (a vec load outside a vec
 *      loop, an index that is not v or add(uniform, v), a bad width, a nested vec store, a vec
 *      load of a written param).
 * Correctness of the emitted vector code (both paths) is checked by test_cuda_emu, which runs
 * every example and op block through the CUDA emulation against the reference.
 * Exits 77 when NVRTC is absent (after the checks that need nothing).
 */
#include "codegen.h"
#include "frontend.h"
#include "nvrtc.h"
#include "passes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static char tmpdir[256];

static const char *src_ln =
    "dim N = 4, C = 256\n"
    "block ln(x: f32[N, C], param g: f32[C], param b: f32[C]) -> f32[N, C]\n"
    "{\n"
    "    return layernorm(x, g, b, eps=1e-5)\n"
    "}\n";
static const char *src_ln_bf16 =
    "dim N = 4, C = 256\n"
    "block lnb(x: bf16[N, C], param g: bf16[C], param b: bf16[C]) -> bf16[N, C]\n"
    "{\n"
    "    return layernorm(x, g, b, eps=1e-5)\n"
    "}\n";
static const char *src_pw_bf16 =
    "dim N = 4, C = 256\n"
    "block pwb(x: bf16[N, C], y: bf16[N, C]) -> bf16[N, C]\n"
    "{\n"
    "    return x * y + 1.0\n"
    "}\n";
static const char *src_pw_f64 =
    "block pwd(x: f64[3, 1000], y: f64[3, 1000]) -> f64[3, 1000]\n"
    "{\n"
    "    return x * y - x\n"
    "}\n";
static const char *src_cmp =
    "block cmp(x: f32[4, 256], y: f32[4, 256]) -> bool[4, 256]\n"
    "{\n"
    "    return x < y\n"
    "}\n";

typedef struct Dim1 { const char *name; int64_t v; } Dim1;

/* The GPU-shaped (or CPU-shaped) program of a block. */
static KirProgram *program_of(const char *src, const char *name, const Dim1 *dims, int ndims, bool fuse, bool cpu,
                              PassResult *res, IrGraph **g) {
    FeDimBinding fd[4];
    for (int i = 0; i < ndims; i++) fd[i] = (FeDimBinding){dims[i].name, dims[i].v};
    FeOptions fo = {.block = NULL, .dims = fd, .ndims = ndims};
    StrBuf diags = {0};
    FcErr err = {0};
    memset(res, 0, sizeof *res);
    *g = NULL;
    FcStatus st = fe_compile(src, strlen(src), name, &fo, g, &diags, &err);
    PassOptions po = {.fuse = fuse, .sm = 90, .library_gemm = false, .cpu = cpu};
    if (st == FC_OK) st = pass_pipeline(*g, &po, res, &err);
    EXPECT(st == FC_OK, "%s: %s %s", name, err.msg, diags.data ? diags.data : "");
    sb_free(&diags);
    return st == FC_OK ? res->prog : NULL;
}

/* The vec width of kernel k's thread loops: the largest, 0 when none. */
static int max_vec(const KirKernel *k) {
    int w = 0;
    for (int i = 0; i < k->stmts.len; i++)
        if (k->stmts.data[i].kind == KS_FOR && k->stmts.data[i].vec > w) w = k->stmts.data[i].vec;
    return w;
}
static const KirKernel *kernel_of_kind(const KirProgram *p, const char *kind) {
    for (int i = 0; i < p->kernels.len; i++)
        if (!strcmp(p->kernels.data[i]->kind, kind)) return p->kernels.data[i];
    return NULL;
}

static bool write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return false;
    bool ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok;
}
static char *read_all(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    StrBuf sb = {0};
    char buf[4097];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf - 1, f)) > 0) {
        buf[n] = 0;
        sb_puts(&sb, buf);
    }
    fclose(f);
    return sb.data;
}
static int run_cmd(const char *cmd, const char *log) {
    char full[4096];
    snprintf(full, sizeof full, "%s > %s 2>&1", cmd, log);
    int rc = system(full);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* NVRTC for sm_80 and sm_90, PTX and cubin, no warnings; returns the sm_90 PTX (caller frees). */
static char *nvrtc_all(const char *name, const char *src) {
    char *ptx90 = NULL;
    for (int a = 0; a < 2; a++)
        for (int cubin = 0; cubin < 2; cubin++) {
            char *out = NULL, *log = NULL;
            size_t len = 0;
            FcErr err = {0};
            const char *arch = a ? "sm_90" : "sm_80";
            FcStatus st = rt_nvrtc_compile(src, arch, cubin, &out, &len, &log, &err);
            EXPECT(st == FC_OK, "%s %s %s: %s", name, arch, cubin ? "cubin" : "ptx", err.msg);
            EXPECT(!log || !strstr(log, "warning"), "%s %s: NVRTC warns:\n%.2000s", name, arch, log);
            if (st == FC_OK && a == 1 && !cubin) {
                ptx90 = fc_alloc(len + 1);
                if (ptx90) { memcpy(ptx90, out, len); ptx90[len] = 0; }
            }
            fc_free(out);
            fc_free(log);
        }
    return ptx90;
}

/* The PTX text of the kernel named kname: from its .entry to the next .entry. */
static char *ptx_kernel(const char *ptx, const char *kname) {
    char key[256];
    snprintf(key, sizeof key, ".entry %s(", kname);
    const char *b = ptx ? strstr(ptx, key) : NULL;
    if (!b) return NULL;
    const char *e = strstr(b + 1, ".entry ");
    size_t n = e ? (size_t)(e - b) : strlen(b);
    char *s = fc_alloc(n + 1);
    if (!s) return NULL;
    memcpy(s, b, n);
    s[n] = 0;
    return s;
}
static bool has_vld(const char *t, const char *w) {
    char a[64], b[64];
    snprintf(a, sizeof a, "ld.global.nc.%s.", w);
    snprintf(b, sizeof b, "ld.global.%s.", w);
    return t && (strstr(t, a) || strstr(t, b));
}
static bool has_vst(const char *t, const char *w) {
    char a[64];
    snprintf(a, sizeof a, "st.global.%s.", w);
    return t && strstr(t, a);
}

/* The AOT unit through nvcc -Werror all-warnings, ptxas -v without spills. */
static void nvcc_unit(const char *nvcc, const char *name, const KirProgram *p, const IrGraph *g) {
    int nio = g->inputs.len + g->outputs.len;
    CgIoDesc io[32];
    if (nio > 32) return;
    for (int i = 0; i < nio; i++) {
        bool o = i >= g->inputs.len;
        const IrValue *v = ir_cval(g, o ? g->outputs.data[i - g->inputs.len] : g->inputs.data[i]);
        io[i] = (CgIoDesc){o ? "out" : "in", v->dtype, v->shape, o, -1};
    }
    StrBuf sb = {0};
    FcErr err = {0};
    FcStatus st = cg_cuda_aot(p, "vec", io, nio, &sb, &err);
    EXPECT(st == FC_OK, "%s aot: %s", name, err.msg);
    if (st == FC_OK) {
        char cu[512], obj[512], log[512], cmd[2048];
        snprintf(cu, sizeof cu, "%s/%s.cu", tmpdir, name);
        snprintf(obj, sizeof obj, "%s/%s.o", tmpdir, name);
        snprintf(log, sizeof log, "%s/%s.log", tmpdir, name);
        EXPECT(write_file(cu, sb.data), "write %s", cu);
        snprintf(cmd, sizeof cmd, "%s -arch=sm_90 -Werror all-warnings -Xptxas -v -c %s -o %s", nvcc, cu, obj);
        int rc = run_cmd(cmd, log);
        char *text = read_all(log);
        EXPECT(rc == 0, "%s: nvcc failed:\n%s", name, text ? text : "");
        int nlines = 0;
        for (const char *q = text; q && (q = strstr(q, "bytes spill stores")) != NULL; q++, nlines++) {
            const char *line = q;
            while (line > text && line[-1] != '\n') line--;
            EXPECT(!strncmp(strstr(line, "bytes stack frame, ") + strlen("bytes stack frame, "),
                            "0 bytes spill stores, 0 bytes spill loads", 40),
                   "%s: spills: %.120s", name, line);
        }
        EXPECT(rc != 0 || nlines > 0, "%s: no ptxas -v report", name);
        fc_free(text);
    }
    sb_free(&sb);
}

typedef struct Case {
    const char *name;
    const char *src;
    Dim1 dims[2];
    int ndims;
    bool fuse;
    const char *kind;     /* the kernel to check ("pointwise", "row_reduce") */
    int want_w;           /* its vec width (0: none) */
    const char *vw;       /* the PTX vector width of its global accesses: "v4", "v2"; NULL: none */
} Case;

static void test_programs(bool have_nvrtc, const char *nvcc) {
    char *src_rlg = read_all(FUSEC_SOURCE_DIR "/examples/residual_ln_gelu.tf");
    EXPECT(src_rlg != NULL, "cannot read examples/residual_ln_gelu.tf");
    if (!src_rlg) return;
    static const Case cases[] = {
        {"rlg_fused", NULL, {{"N", 4}, {"C", 256}}, 2, true, "row_reduce", 4, "v4"},
        {"rlg_eager", NULL, {{"N", 4}, {"C", 256}}, 2, false, "pointwise", 4, "v4"},
        {"ln", NULL, {{0}}, 0, true, "row_reduce", 4, "v4"},
        {"ln_bf16", NULL, {{0}}, 0, true, "row_reduce", 8, "v4"},
        {"pw_bf16", NULL, {{0}}, 0, true, "pointwise", 8, "v4"},
        {"pw_f64", NULL, {{0}}, 0, true, "pointwise", 2, "v2"},
        {"cmp_bool", NULL, {{0}}, 0, true, "pointwise", 16, "v4"},
        /* rows that are not a multiple of 16 bytes: no vectorization of the row kernel */
        {"ln_bf16_c100", NULL, {{"C", 100}}, 1, true, "row_reduce", 0, NULL},
        {"ln_c101", NULL, {{"C", 101}}, 1, true, "row_reduce", 0, NULL},
        /* 400 bytes a row: width 4 */
        {"ln_c100", NULL, {{"C", 100}}, 1, true, "row_reduce", 4, "v4"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const Case *c = &cases[i];
        const char *src = !strncmp(c->name, "rlg", 3) ? src_rlg
                        : !strncmp(c->name, "ln_bf16", 7) ? src_ln_bf16
                        : !strncmp(c->name, "ln", 2) ? src_ln
                        : !strcmp(c->name, "pw_bf16") ? src_pw_bf16
                        : !strcmp(c->name, "pw_f64") ? src_pw_f64 : src_cmp;
        PassResult res;
        IrGraph *g = NULL;
        KirProgram *p = program_of(src, c->name, c->dims, c->ndims, c->fuse, false, &res, &g);
        if (!p) { pass_result_free(&res); ir_graph_free(g); continue; }
        const KirKernel *k = kernel_of_kind(p, c->kind);
        EXPECT(k != NULL, "%s: no %s kernel", c->name, c->kind);
        if (k) EXPECT(max_vec(k) == c->want_w, "%s: %s has vec %d, want %d", c->name, k->name, max_vec(k), c->want_w);
        /* the CPU-shaped program of the same block has no vec loops */
        {
            PassResult rc;
            IrGraph *gc = NULL;
            KirProgram *pc = program_of(src, c->name, c->dims, c->ndims, c->fuse, true, &rc, &gc);
            for (int j = 0; pc && j < pc->kernels.len; j++)
                EXPECT(max_vec(pc->kernels.data[j]) == 0, "%s: CPU kernel %s has vec loops", c->name, pc->kernels.data[j]->name);
            pass_result_free(&rc);
            ir_graph_free(gc);
        }
        StrBuf sb = {0};
        FcErr err = {0};
        FcStatus st = cg_cuda_kernels(p, &sb, &err);
        EXPECT(st == FC_OK, "%s: %s", c->name, err.msg);
        if (st == FC_OK && have_nvrtc) {
            char *ptx = nvrtc_all(c->name, sb.data);
            char *kp = k ? ptx_kernel(ptx, k->name) : NULL;
            EXPECT(kp != NULL, "%s: kernel not found in the PTX", c->name);
            if (kp && c->vw) {
                EXPECT(has_vld(kp, c->vw), "%s: no ld.global(.nc).%s in %s", c->name, c->vw, k->name);
                EXPECT(has_vst(kp, c->vw), "%s: no st.global.%s in %s", c->name, c->vw, k->name);
            } else if (kp) {
                EXPECT(!has_vld(kp, "v4") && !has_vld(kp, "v2") && !has_vst(kp, "v4") && !has_vst(kp, "v2"),
                       "%s: vector accesses in %s, which is not vectorized", c->name, k->name);
            }
            fc_free(kp);
            fc_free(ptx);
        }
        sb_free(&sb);
        if (nvcc) nvcc_unit(nvcc, c->name, p, g);
        pass_result_free(&res);
        ir_graph_free(g);
    }
    fc_free(src_rlg);
}

/* ---- malformed vec IR ------------------------------------------------------------------------- */
/* p0 (f32[n]) -> p1 (f32[n]) in one vec loop; `bad` picks what is broken. */
static KirProgram *vec_program(int bad) {
    KirProgram *p = kir_program_new("vecbad");
    KirKernel *k = kir_kernel_new(p, "k0_vec", 1, 64);
    int p0 = kir_param(k, FC_F32, 256, bad == 5), p1 = kir_param(k, FC_F32, 256, true);
    int v = kir_var(k, KT_I64), t = kir_var(k, KT_I64);
    kir_let(k, t, kir_const_i(k, KT_I64, 0));
    if (bad == 1) kir_let(k, kir_var(k, KT_F32), kir_load_vec(k, p0, kir_var_ref(k, t)));   /* outside a vec loop */
    kir_for_vec(k, v, kir_const_i(k, KT_I64, 0), kir_const_i(k, KT_I64, 256), bad == 3 ? 3 : 4);
    int vr = kir_var_ref(k, v);
    int idx = bad == 2 ? kir_bin(k, KB_MUL, vr, kir_const_i(k, KT_I64, 2)) : kir_bin(k, KB_ADD, kir_var_ref(k, t), vr);
    int x = kir_var(k, KT_F32);
    kir_let(k, x, kir_load_vec(k, p0, idx));
    if (bad == 4) {
        kir_if(k, kir_bin(k, KB_LT, vr, kir_const_i(k, KT_I64, 9)));
        kir_store_vec(k, p1, vr, kir_var_ref(k, x));
        kir_end(k);
    } else {
        kir_store_vec(k, p1, vr, kir_var_ref(k, x));
    }
    kir_end(k);
    KirLaunch la = {.kernel = 0, .nargs = 2};
    la.args = arena_alloc(&p->arena, 2 * sizeof(int));
    if (la.args) { la.args[0] = 0; la.args[1] = 1; }
    FC_VEC_PUSH(&p->launches, la);
    return p;
}

static void test_malformed(void) {
    static const char *const want[] = {NULL, "vec access outside a vec thread loop",
                                       "not v or add(block-uniform, v)", "vec width",
                                       "vec store not in its vec loop's body", "vec load of a written param"};
    for (int bad = 0; bad < 6; bad++) {
        KirProgram *p = vec_program(bad);
        FcErr err = {0};
        FcStatus st = kir_verify(p->kernels.data[0], &err);
        if (bad == 0) EXPECT(st == FC_OK, "the good vec kernel: %s", err.msg);
        else EXPECT(st == FC_ERR_INTERNAL && strstr(err.msg, want[bad]), "bad %d: %d %s", bad, (int)st, err.msg);
        StrBuf sb = {0};
        st = cg_cuda_kernels(p, &sb, &err);
        if (bad == 0) {
            EXPECT(st == FC_OK && strstr(sb.data, "reinterpret_cast<const float4 *>(p0 + (v1 + fc_g))") &&
                       strstr(sb.data, "reinterpret_cast<float4 *>(p1 + fc_g)") && strstr(sb.data, "#pragma unroll"),
                   "the good vec kernel: %s\n%s", err.msg, sb.data ? sb.data : "");
        } else if (bad != 2 && bad != 5) {   /* the printer checks placement and width; the verifier the rest */
            EXPECT(st == FC_ERR_INTERNAL, "bad %d: the printer accepted it", bad);
        }
        sb_free(&sb);
        kir_program_free(p);
    }
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/fusec_vec_XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }
    test_malformed();
    FcErr err = {0};
    bool have_nvrtc = rt_nvrtc_available(&err) == FC_OK;
    if (!have_nvrtc) printf("NVRTC absent: %s\n", err.msg);
    /* FUSEC_TEST_NO_NVCC (a sanitizer build's tests, tests/CMakeLists.txt): nvcc's time is the
     * CUDA toolchain's, on the units the plain build's run compiles (the same bytes) */
    const char *nvcc = access("/usr/local/cuda/bin/nvcc", X_OK) == 0 && !getenv("FUSEC_TEST_NO_NVCC") ? "/usr/local/cuda/bin/nvcc" : NULL;
    if (!nvcc) printf("nvcc not found or FUSEC_TEST_NO_NVCC set: the AOT compile checks are skipped\n");
    test_programs(have_nvrtc, nvcc);
    if (!failures) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    } else {
        fprintf(stderr, "%d failure(s); files kept in %s\n", failures, tmpdir);
        return 1;
    }
    if (!have_nvrtc) return 77;
    puts("test_cuda_vec: ok");
    return 0;
}
