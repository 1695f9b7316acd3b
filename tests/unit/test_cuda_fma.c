/* test_cuda_fma.c: the generated CUDA says where a*b + c may become an FMA (docs/cuda.md).
 *
 * nvcc and NVRTC contract a*b + c into an FMA by default (--fmad=true): in PTX a plain
 * `mul.f32` may be merged by ptxas with an add, `mul.rn.f32` never is. The generated code
 * prints every float multiply as __fmul_rn/__dmul_rn (PTX `mul.rn`) and the accumulation of a
 * matmul tile as fmaf (PTX `fma.rn`), so what runs does not depend on compiler flags:
 *   1. the printer: an accumulation `ta[0] = ta[0] + x*y` (the matmul tile loop) is printed as
 *      fmaf, a multiply elsewhere as __fmul_rn, never `*` on floats;
 *   2. NVRTC (sm_90 PTX, default options) of the GPU-shaped programs of a layernorm, a
 *      pointwise x*y + 1 in f32 and f64, and a matmul: no plain mul.f32/mul.f64 anywhere, no
 *      fma in the layernorm and pointwise kernels, fma.rn.f32 in the matmul kernel; and the
 *      check can fail: a hand-written `a*b - c` does give a contractible mul.f32 under the same options;
 *   3. nvcc with its default flags (as a user compiles the `fusec --emit cuda` unit): the same
 *      PTX checks on the AOT unit of the layernorm.
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

static const char *src_ln =
    "block ln(x: f32[4, 1], param g: f32[1], param b: f32[1]) -> f32[4, 1]\n"
    "{\n"
    "    return layernorm(x * g, g, b, eps=1e-5)\n"
    "}\n";
static const char *src_pw =
    "block pw(x: f32[4, 256], y: f32[4, 256], z: f64[3, 100]) -> f32[4, 256], f64[3, 100]\n"
    "{\n"
    "    return x * y + 1.0, z * z - z\n"
    "}\n";
static const char *src_mm =
    "block mm(a: f32[40, 40], b: f32[40, 24]) -> f32[40, 24]\n"
    "{\n"
    "    return a @ b\n"
    "}\n";

static KirProgram *program_of(const char *src, const char *name, PassResult *res, IrGraph **g) {
    FeOptions fo = {0};
    StrBuf diags = {0};
    FcErr err = {0};
    memset(res, 0, sizeof *res);
    *g = NULL;
    FcStatus st = fe_compile(src, strlen(src), name, &fo, g, &diags, &err);
    PassOptions po = {.fuse = true, .sm = 90, .library_gemm = false, .cpu = false};
    if (st == FC_OK) st = pass_pipeline(*g, &po, res, &err);
    EXPECT(st == FC_OK, "%s: %s %s", name, err.msg, diags.data ? diags.data : "");
    sb_free(&diags);
    return st == FC_OK ? res->prog : NULL;
}

static char *ptx_of(const char *name, const char *src) {
    char *out = NULL, *log = NULL;
    size_t len = 0;
    FcErr err = {0};
    FcStatus st = rt_nvrtc_compile(src, "sm_90", false, &out, &len, &log, &err);
    EXPECT(st == FC_OK, "%s: %s", name, err.msg);
    fc_free(log);
    if (st != FC_OK) return NULL;
    char *s = fc_alloc(len + 1);
    if (s) { memcpy(s, out, len); s[len] = 0; }
    fc_free(out);
    return s;
}

/* The PTX of kernel kname (from its .entry to the next). */
static const char *ptx_kernel(const char *ptx, const char *kname, size_t *n) {
    char key[256];
    snprintf(key, sizeof key, ".entry %s(", kname);
    const char *b = ptx ? strstr(ptx, key) : NULL;
    if (!b) return NULL;
    const char *e = strstr(b + 1, ".entry ");
    *n = e ? (size_t)(e - b) : strlen(b);
    return b;
}
static bool has_in(const char *b, size_t n, const char *what) {
    size_t w = strlen(what);
    for (size_t i = 0; i + w <= n; i++)
        if (!memcmp(b + i, what, w)) return true;
    return false;
}

/* Checks every kernel of p in ptx: no contractible multiply; an FMA only in matmul kernels. */
static void check_ptx(const char *name, const KirProgram *p, const char *ptx) {
    EXPECT(!strstr(ptx, "mul.f32") && !strstr(ptx, "mul.f64"), "%s: a contractible multiply in the PTX", name);
    for (int i = 0; i < p->kernels.len; i++) {
        const KirKernel *k = p->kernels.data[i];
        size_t n = 0;
        const char *b = ptx_kernel(ptx, k->name, &n);
        EXPECT(b != NULL, "%s: kernel %s not in the PTX", name, k->name);
        if (!b) continue;
        bool mm = !strcmp(k->kind, "matmul");
        bool fma = has_in(b, n, "fma.rn.f32") || has_in(b, n, "fma.rn.f64");
        EXPECT(fma == mm, "%s: kernel %s (%s) %s an FMA", name, k->name, k->kind, fma ? "has" : "lacks");
    }
}

static void test_printer(void) {
    PassResult res;
    IrGraph *g;
    KirProgram *p = program_of(src_mm, "mm", &res, &g);
    if (p) {
        StrBuf sb = {0};
        FcErr err = {0};
        EXPECT(cg_cuda_kernels(p, &sb, &err) == FC_OK, "%s", err.msg);
        EXPECT(sb.data && strstr(sb.data, "ta0[0LL] = fmaf(sh0["), "no fmaf accumulation:\n%s", sb.data);
        sb_free(&sb);
    }
    pass_result_free(&res);
    ir_graph_free(g);
    p = program_of(src_pw, "pw", &res, &g);
    if (p) {
        StrBuf sb = {0};
        FcErr err = {0};
        EXPECT(cg_cuda_kernels(p, &sb, &err) == FC_OK, "%s", err.msg);
        EXPECT(sb.data && strstr(sb.data, "__fmul_rn(") && strstr(sb.data, "__dmul_rn(") && !strstr(sb.data, "fmaf("),
               "pw:\n%s", sb.data);
        sb_free(&sb);
    }
    pass_result_free(&res);
    ir_graph_free(g);
}

static void test_ptx(const char *nvcc) {
    const char *srcs[] = {src_ln, src_pw, src_mm}, *names[] = {"ln", "pw", "mm"};
    for (int i = 0; i < 3; i++) {
        PassResult res;
        IrGraph *g;
        KirProgram *p = program_of(srcs[i], names[i], &res, &g);
        StrBuf sb = {0};
        FcErr err = {0};
        if (p && cg_cuda_kernels(p, &sb, &err) == FC_OK) {
            char *ptx = ptx_of(names[i], sb.data);
            if (ptx) check_ptx(names[i], p, ptx);
            fc_free(ptx);
        }
        sb_free(&sb);
        if (p && nvcc && i == 0) {   /* the AOT unit under nvcc's default flags (--fmad=true) */
            int nio = g->inputs.len + g->outputs.len;
            CgIoDesc io[8];
            for (int j = 0; j < nio && j < 8; j++) {
                bool o = j >= g->inputs.len;
                const IrValue *v = ir_cval(g, o ? g->outputs.data[j - g->inputs.len] : g->inputs.data[j]);
                io[j] = (CgIoDesc){o ? "out" : "in", v->dtype, v->shape, o, -1};
            }
            StrBuf u = {0};
            EXPECT(cg_cuda_aot(p, "ln", io, nio, &u, &err) == FC_OK, "%s", err.msg);
            char dir[] = "/tmp/fusec_fma_XXXXXX", cmd[1024], path[300];
            if (u.data && mkdtemp(dir)) {
                snprintf(path, sizeof path, "%s/ln.cu", dir);
                FILE *f = fopen(path, "w");
                if (f) { fputs(u.data, f); fclose(f); }
                snprintf(cmd, sizeof cmd, "timeout 120 %s -arch=sm_90 -ptx %s -o %s/ln.ptx > %s/log 2>&1", nvcc, path, dir, dir);
                int rc = system(cmd);
                EXPECT(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "nvcc failed (%s)", dir);
                snprintf(path, sizeof path, "%s/ln.ptx", dir);
                f = fopen(path, "rb");
                static char buf[1 << 20];
                size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
                if (f) fclose(f);
                buf[n] = 0;
                EXPECT(n > 0, "no PTX from nvcc");
                if (n > 0) check_ptx("ln (nvcc)", p, buf);
                snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
                if (!failures && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
            }
            sb_free(&u);
        }
        pass_result_free(&res);
        ir_graph_free(g);
    }
    /* the check can fail: under the same options a plain a*b - c is a mul.f32, which ptxas may
     * merge with the sub (PTX ISA: mul/add without a rounding modifier may be contracted) */
    char *ptx = ptx_of("plain", "extern \"C\" __global__ void k(const float *a, float *o)\n"
                                "{ float p = a[0] * a[1]; o[0] = p - a[2]; }\n");
    EXPECT(ptx && strstr(ptx, "mul.f32"), "a plain multiply is no longer contractible:\n%s", ptx ? ptx : "");
    fc_free(ptx);
}

int main(void) {
    test_printer();
    FcErr err = {0};
    bool have_nvrtc = rt_nvrtc_available(&err) == FC_OK;
    if (!have_nvrtc) printf("NVRTC absent: %s\n", err.msg);
    const char *nvcc = access("/usr/local/cuda/bin/nvcc", X_OK) == 0 ? "/usr/local/cuda/bin/nvcc" : NULL;
    if (have_nvrtc) test_ptx(nvcc);
    if (failures) return 1;
    if (!have_nvrtc) return 77;
    puts("test_cuda_fma: ok");
    return 0;
}
