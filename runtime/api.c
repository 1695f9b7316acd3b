/* api.c: the public C API (fusec.h) over the frontend, the passes, the code generators
 * and the devices.
 *
 * Handles: FcOptions, FcBlock (a compiled block: source graph, decomposed graph, kernel
 * program), FcDevice (CPU, CUDA, reference interpreter), FcTensor (dense data on a device),
 * FcProgram (a block loaded on a device). Each keeps its last error. No global state but
 * the allocation counters, the one-time initializations inside the devices and the CPU
 * figures of the report targets (measured once per process).
 */
#include "fusec.h"

#include <ctype.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "codegen.h"
#include "cpu.h"
#include "cublaslt.h"
#include "cuda.h"
#include "frontend.h"
#include "host.h"
#include "interp.h"
#include "nvrtc.h"
#include "passes.h"
#include "support.h"

#define SOURCE_LIMIT (16u << 20)   /* bytes of .tf source accepted */

const char *fc_version(void) { return FUSEC_VERSION_STRING; }

const char *fc_status_name(FcStatus s) {
    switch (s) {
    case FC_OK: return "ok";
    case FC_ERR_INPUT: return "input error";
    case FC_ERR_USAGE: return "usage error";
    case FC_ERR_UNAVAILABLE: return "unavailable";
    case FC_ERR_NOMEM: return "out of memory";
    case FC_ERR_IO: return "i/o error";
    case FC_ERR_DEVICE: return "device error";
    case FC_ERR_DEVICE_LOST: return "device lost";
    case FC_ERR_RUNTIME_DATA: return "run-time data error";
    case FC_ERR_UNSUPPORTED: return "unsupported";
    case FC_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

static bool valid_ident(const char *s) {
    if (!s || !(isalpha((unsigned char)s[0]) || s[0] == '_')) return false;
    for (const char *p = s; *p; p++)
        if (!(isalnum((unsigned char)*p) || *p == '_')) return false;
    return strlen(s) <= 64;
}

/* ---- options ------------------------------------------------------------------------------ */
struct FcOptions {
    FcErr err;
    FC_VEC(FeDimBinding) dims;   /* names fc_alloc'd */
    char *block;
    char *entry;
    int fuse;
    int sm;
    char arch[8];
    char precision[8];
    int strict_rounding;
    int train;
    int64_t mem_budget;
    bool mem_budget_set;
    int remat;             /* PassRemat */
};

FcStatus fc_options_new(FcOptions **out) {
    if (!out) return FC_ERR_USAGE;
    FcOptions *o = fc_calloc(1, sizeof *o);
    *out = o;
    if (!o) return FC_ERR_NOMEM;
    o->fuse = 1;
    o->sm = 90;
    strcpy(o->arch, "sm_90");
    strcpy(o->precision, "keep");
    return FC_OK;
}
void fc_options_free(FcOptions *o) {
    if (!o) return;
    for (int i = 0; i < o->dims.len; i++) fc_free((char *)o->dims.data[i].name);
    FC_VEC_FREE(&o->dims);
    fc_free(o->block);
    fc_free(o->entry);
    fc_free(o);
}
const char *fc_options_last_error(const FcOptions *o) { return o ? o->err.msg : "no options handle"; }

FcStatus fc_options_set_dim(FcOptions *o, const char *name, int64_t value) {
    if (!o) return FC_ERR_USAGE;
    if (!valid_ident(name)) return fc_err_set(&o->err, FC_ERR_USAGE, "-D: '%s' is not a dim name", name ? name : "(null)");
    if (value < 1) return fc_err_set(&o->err, FC_ERR_USAGE, "-D %s=%lld: a dim must be >= 1", name, (long long)value);
    for (int i = 0; i < o->dims.len; i++)
        if (strcmp(o->dims.data[i].name, name) == 0) {
            o->dims.data[i].value = value;
            return FC_OK;
        }
    FeDimBinding b = {fc_strdup(name), value};
    if (!b.name || !FC_VEC_PUSH(&o->dims, b)) {
        fc_free((char *)b.name);
        return FC_OOM(&o->err);
    }
    return FC_OK;
}
static FcStatus set_str(FcOptions *o, char **dst, const char *s) {
    char *c = fc_strdup(s);
    if (!c) return FC_OOM(&o->err);
    fc_free(*dst);
    *dst = c;
    return FC_OK;
}
FcStatus fc_options_set_block(FcOptions *o, const char *name) {
    if (!o) return FC_ERR_USAGE;
    if (!valid_ident(name)) return fc_err_set(&o->err, FC_ERR_USAGE, "--block: '%s' is not a block name", name ? name : "(null)");
    return set_str(o, &o->block, name);
}
FcStatus fc_options_set_entry(FcOptions *o, const char *name) {
    if (!o) return FC_ERR_USAGE;
    if (!valid_ident(name))
        return fc_err_set(&o->err, FC_ERR_USAGE, "--entry: '%s' is not a valid C identifier", name ? name : "(null)");
    return set_str(o, &o->entry, name);
}
FcStatus fc_options_set_fuse(FcOptions *o, int fuse) {
    if (!o) return FC_ERR_USAGE;
    o->fuse = fuse != 0;
    return FC_OK;
}
FcStatus fc_options_set_arch(FcOptions *o, const char *arch) {
    if (!o) return FC_ERR_USAGE;
    static const char *const ok[] = {"sm_80", "sm_86", "sm_89", "sm_90"};
    for (int i = 0; i < 4; i++)
        if (arch && strcmp(arch, ok[i]) == 0) {
            strcpy(o->arch, arch);
            o->sm = atoi(arch + 3);
            return FC_OK;
        }
    return fc_err_set(&o->err, FC_ERR_USAGE, "--arch: '%s' is not one of sm_80, sm_86, sm_89, sm_90", arch ? arch : "(null)");
}
FcStatus fc_options_set_precision(FcOptions *o, const char *p) {
    if (!o) return FC_ERR_USAGE;
    static const char *const ok[] = {"keep", "bf16", "f16", "f8"};
    for (int i = 0; i < 4; i++)
        if (p && strcmp(p, ok[i]) == 0) {
            strcpy(o->precision, p);
            return FC_OK;
        }
    return fc_err_set(&o->err, FC_ERR_USAGE, "--precision: '%s' is not one of keep, bf16, f16, f8", p ? p : "(null)");
}
FcStatus fc_options_set_strict_rounding(FcOptions *o, int on) {
    if (!o) return FC_ERR_USAGE;
    o->strict_rounding = on != 0;
    return FC_OK;
}
FcStatus fc_options_set_train(FcOptions *o, int on) {
    if (!o) return FC_ERR_USAGE;
    o->train = on != 0;
    return FC_OK;
}
FcStatus fc_options_set_mem_budget(FcOptions *o, int64_t bytes) {
    if (!o) return FC_ERR_USAGE;
    if (bytes < 0) return fc_err_set(&o->err, FC_ERR_USAGE, "--mem-budget must be >= 0");
    o->mem_budget = bytes;
    o->mem_budget_set = true;
    return FC_OK;
}
FcStatus fc_options_set_remat(FcOptions *o, const char *mode) {
    if (!o) return FC_ERR_USAGE;
    static const char *const names[] = {"auto", "none", "full"};
    for (int i = 0; i < 3; i++)
        if (mode && strcmp(mode, names[i]) == 0) {
            o->remat = i;   /* PassRemat's order */
            return FC_OK;
        }
    return fc_err_set(&o->err, FC_ERR_USAGE, "--remat: '%s' is not a mode (expected none, auto or full)", mode ? mode : "(null)");
}

/* ---- blocks ---------------------------------------------------------------------------------- */
/* One program of a block through the passes: the graph they compile (the source graph; in
 * training, the forward's or the backward's graph of the remat plan) and its kernel programs
 * for each target shape, made when first needed and kept until the block is freed (programs
 * point into them). */
typedef struct Unit {
    const IrGraph *graph;
    PassResult res;        /* after all passes, GPU-shaped: graph, kernel program, edges */
    KirProgram *prog;      /* = res.prog */
    PassResult res_cpu;    /* the CPU-shaped program */
    bool have_cpu;
    PassResult res_gen;    /* GPU-shaped with generated matrix kernels (the CUDA device without cuBLASLt) */
    bool have_gen;
    /* for CUDA devices whose compute capability is not --arch's (budgets follow the GPU) */
    PassResult res_dev[4];
    int res_dev_sm[4];
    bool res_dev_lib[4];
    int n_res_dev;
} Unit;

struct FcBlock {
    FcErr err;
    char *diags;           /* all diagnostics, "" when none */
    IrGraph *src;          /* the graph from the frontend (the oracle runs it) */
    Unit fwd;              /* the forward program (in training, it also writes the saved values) */
    Unit bwd;              /* training only: the backward program */
    bool train;
    AdJoint joint;         /* training: the joint graph, decomposed */
    RematPlan plan;        /* training: what is saved, the two graphs */
    PassOptions popt;
    char arch[8];
    char *entry;
    double *tol;           /* [outputs] --check tolerance */
    double *gtol;          /* training: [inputs] the --check tolerance of each gradient */
    bool narrow_mid;       /* a computing op has a 16/8-bit float result (rt_interp_has_narrow_intermediates) */
    bool narrow_grad;      /* training: the same of the joint graph */
    bool unusable;         /* an internal error happened */
};

static FcStatus block_fail(FcBlock *b, FcStatus s) {
    if (s == FC_ERR_INTERNAL) b->unusable = true;
    return s;
}

static FcStatus compute_tolerances(FcBlock *b) {
    const IrGraph *g = b->src;
    b->tol = fc_calloc((size_t)g->outputs.len + 1, sizeof(double));
    if (!b->tol) return FC_OOM(&b->err);
    FC_TRY(rt_graph_tolerances(g, b->tol, &b->err));
    b->narrow_mid = rt_interp_has_narrow_intermediates(g);
    if (!b->train) return FC_OK;
    /* the gradients: over the joint graph, whose outputs after the block's are the gradients */
    const IrGraph *jg = b->joint.graph;
    double *t = fc_calloc((size_t)jg->outputs.len + 1, sizeof(double));
    b->gtol = fc_calloc((size_t)g->inputs.len + 1, sizeof(double));
    if (!t || !b->gtol) { fc_free(t); return FC_OOM(&b->err); }
    FcStatus s = rt_graph_tolerances(jg, t, &b->err);
    b->narrow_grad = rt_interp_has_narrow_intermediates(jg);
    for (int i = 0; i < g->inputs.len; i++) {
        int k = b->joint.grad_out_of_input[i];
        b->gtol[i] = k >= 0 ? t[k] : 0;
    }
    fc_free(t);
    return s;
}

static FcStatus compile_source(const char *src, size_t len, const char *filename, const FcOptions *opts,
                               FcBlock **out) {
    FcBlock *b = fc_calloc(1, sizeof *b);
    *out = b;
    if (!b) return FC_ERR_NOMEM;
    b->popt.fuse = opts ? opts->fuse : true;
    b->popt.strict_rounding = opts ? opts->strict_rounding : false;
    b->popt.train = opts ? opts->train : false;
    b->popt.sm = opts ? opts->sm : 90;
    b->popt.library_gemm = true;   /* f32/f64 products through cuBLASLt (AOT) and the BLAS (CPU) */
    strcpy(b->arch, opts ? opts->arch : "sm_90");
    FeOptions fo = {0};
    if (opts) {
        fo.block = opts->block;
        fo.dims = opts->dims.data;
        fo.ndims = opts->dims.len;
    }
    StrBuf diags = {0};
    FcStatus s = fe_compile(src, len, filename ? filename : "<string>", &fo, &b->src, &diags, &b->err);
    b->diags = sb_take(&diags);
    if (!b->diags) b->diags = fc_strdup("");
    if (s != FC_OK) return block_fail(b, s);
    if (opts && strcmp(opts->precision, "keep") != 0) {
        IrGraph *low = NULL;
        FcDtype p = strcmp(opts->precision, "bf16") == 0 ? FC_BF16 : strcmp(opts->precision, "f16") == 0 ? FC_F16 : FC_F8E4M3;
        s = pass_precision(b->src, p, opts->train, &low, &b->err);
        if (s != FC_OK) return block_fail(b, s);
        ir_graph_free(b->src);
        b->src = low;
    }
    const char *entry = opts && opts->entry ? opts->entry : b->src->name;
    b->entry = fc_strdup(valid_ident(entry) ? entry : "block");
    if (!b->entry) return FC_OOM(&b->err);
    b->fwd.graph = b->src;
    if (opts && opts->train) {
        b->train = true;
        s = pass_train(b->src, (PassRemat)opts->remat, opts->mem_budget_set ? opts->mem_budget : -1, &b->joint,
                       &b->plan, &b->err);
        if (s != FC_OK) return block_fail(b, s);
        b->fwd.graph = b->plan.fwd;
        b->bwd.graph = b->plan.bwd;
        s = pass_pipeline(b->bwd.graph, &b->popt, &b->bwd.res, &b->err);
        if (s != FC_OK) return block_fail(b, s);
        b->bwd.prog = b->bwd.res.prog;
    }
    s = pass_pipeline(b->fwd.graph, &b->popt, &b->fwd.res, &b->err);
    if (s != FC_OK) return block_fail(b, s);
    b->fwd.prog = b->fwd.res.prog;
    return block_fail(b, compute_tolerances(b));
}

FcStatus fc_compile_string(const char *source, const char *filename, const FcOptions *opts, FcBlock **out) {
    if (!out) return FC_ERR_USAGE;
    *out = NULL;
    if (!source) {
        FcStatus s = compile_source("", 0, filename, opts, out);
        if (*out) return fc_err_set(&(*out)->err, FC_ERR_USAGE, "fc_compile_string: source is NULL");
        return s;
    }
    size_t len = strlen(source);
    if (len > SOURCE_LIMIT) {
        FcBlock *b = fc_calloc(1, sizeof *b);
        *out = b;
        if (!b) return FC_ERR_NOMEM;
        b->diags = fc_strdup("");
        return fc_err_set(&b->err, FC_ERR_INPUT, "%s: source is larger than %u bytes", filename ? filename : "<string>",
                          SOURCE_LIMIT);
    }
    return compile_source(source, len, filename, opts, out);
}

FcStatus fc_compile_file(const char *path, const FcOptions *opts, FcBlock **out) {
    if (!out) return FC_ERR_USAGE;
    *out = NULL;
    char *data = NULL;
    size_t len = 0;
    FcErr e = {0};
    FcStatus s = path ? fc_read_file(path, SOURCE_LIMIT, &data, &len, &e)
                      : fc_err_set(&e, FC_ERR_USAGE, "fc_compile_file: path is NULL");
    if (s != FC_OK) {
        FcBlock *b = fc_calloc(1, sizeof *b);
        *out = b;
        if (!b) return FC_ERR_NOMEM;
        b->diags = fc_strdup("");
        b->err = e;
        return s == FC_ERR_IO ? fc_err_set(&b->err, FC_ERR_INPUT, "%s", e.msg) : s;
    }
    s = compile_source(data, len, path, opts, out);
    fc_free(data);
    return s;
}

static void unit_free(Unit *u) {
    pass_result_free(&u->res);
    pass_result_free(&u->res_cpu);
    pass_result_free(&u->res_gen);
    for (int i = 0; i < u->n_res_dev; i++) pass_result_free(&u->res_dev[i]);
}

void fc_block_free(FcBlock *b) {
    if (!b) return;
    fc_free(b->diags);
    ir_graph_free(b->src);
    unit_free(&b->fwd);
    unit_free(&b->bwd);
    ad_joint_free(&b->joint);
    remat_plan_free(&b->plan);
    fc_free(b->entry);
    fc_free(b->tol);
    fc_free(b->gtol);
    fc_free(b);
}
const char *fc_block_diagnostics(const FcBlock *b) { return b && b->diags ? b->diags : ""; }
const char *fc_block_last_error(const FcBlock *b) { return b ? b->err.msg : "no block handle"; }
const char *fc_block_name(const FcBlock *b) { return b && b->src ? b->src->name : ""; }

/* FUSEC_CPU's level (rt_cpu_level: 0 native, 2-4 x86-64-vN; *name its value where name is not
 * NULL); -1 after a usage error in err where the machine does not run it or it names none. */
static int cpu_level(FcErr *err, const char **name) {
    const char *lname = NULL;
    int level = rt_cpu_level(&lname);
    if (name) *name = lname;
    if (level < 0)
        fc_err_set(err, FC_ERR_USAGE,
                   "FUSEC_CPU='%.64s' is not native, x86-64-v2, x86-64-v3 or x86-64-v4 that this machine runs", lname);
    return level;
}

static bool block_ready(const FcBlock *b) { return b && b->src && b->fwd.prog && !b->unusable; }

/* The program the CPU device runs: CPU-shaped schedules, or the GPU-shaped program itself
 * when FUSEC_CPU_SCHEDULE=gpu (to run the GPU's schedule on the CPU). */
static FcStatus block_cpu_program(FcBlock *b, Unit *u, const KirProgram **out) {
    const char *e = getenv("FUSEC_CPU_SCHEDULE");
    bool gpu = e && strcmp(e, "gpu") == 0;
    if (!u->have_cpu) {
        PassOptions po = b->popt;
        po.cpu = !gpu;
        po.library_gemm = !gpu;   /* the GPU's generated kernels, matrix products included */
        /* the program depends on the level's vectors */
        if (po.cpu && cpu_level(&b->err, NULL) < 0) return FC_ERR_USAGE;
        if (po.cpu) rt_cpu_host(&po.host);
        FcStatus s = pass_pipeline(u->graph, &po, &u->res_cpu, &b->err);
        if (s != FC_OK) {
            pass_result_free(&u->res_cpu);
            return block_fail(b, s);
        }
        u->have_cpu = true;
    }
    *out = u->res_cpu.prog;
    return FC_OK;
}

/* The GPU-shaped program for a CUDA device of compute capability `sm` (not --arch's): with
 * library products (lib) or generated ones. */
static FcStatus block_dev_program(FcBlock *b, Unit *u, int sm, bool lib, const KirProgram **out) {
    for (int i = 0; i < u->n_res_dev; i++)
        if (u->res_dev_sm[i] == sm && u->res_dev_lib[i] == lib) {
            *out = u->res_dev[i].prog;
            return FC_OK;
        }
    if (u->n_res_dev == (int)(sizeof u->res_dev / sizeof u->res_dev[0]))
        return fc_err_set(&b->err, FC_ERR_UNSUPPORTED, "one block can be loaded on CUDA devices of at most %d compute "
                          "capabilities besides --arch's", u->n_res_dev);
    PassOptions po = b->popt;
    po.cpu = false;
    po.library_gemm = lib;
    po.sm = sm;
    PassResult *r = &u->res_dev[u->n_res_dev];
    FcStatus s = pass_pipeline(u->graph, &po, r, &b->err);
    if (s != FC_OK) {
        pass_result_free(r);
        return block_fail(b, s);
    }
    u->res_dev_sm[u->n_res_dev] = sm;
    u->res_dev_lib[u->n_res_dev] = lib;
    u->n_res_dev++;
    *out = r->prog;
    return FC_OK;
}

/* GPU-shaped, every kernel generated, matrix products included: what the CUDA device runs
 * where cuBLASLt cannot be loaded (or with FUSEC_CUDA_GEMM=generated). */
static FcStatus block_gen_program(FcBlock *b, Unit *u, const KirProgram **out) {
    if (!u->have_gen) {
        PassOptions po = b->popt;
        po.cpu = false;
        po.library_gemm = false;
        FcStatus s = pass_pipeline(u->graph, &po, &u->res_gen, &b->err);
        if (s != FC_OK) {
            pass_result_free(&u->res_gen);
            return block_fail(b, s);
        }
        u->have_gen = true;
    }
    *out = u->res_gen.prog;
    return FC_OK;
}

FcStatus fc_block_train_info(const FcBlock *b, FcTrainInfo *info) {
    if (!b || !info) return FC_ERR_USAGE;
    if (!b->train || !block_ready(b)) return FC_ERR_USAGE;
    const RematPlan *p = &b->plan;
    *info = (FcTrainInfo){p->saved_bytes, p->floor_bytes, p->recompute_flops, p->forward_flops, p->backward_flops,
                          p->saved.len, p->nrecomputed};
    return FC_OK;
}

int fc_block_num_inputs(const FcBlock *b) { return b && b->src ? b->src->inputs.len : 0; }
int fc_block_num_outputs(const FcBlock *b) { return b && b->src ? b->src->outputs.len : 0; }

static void fill_info(const IrGraph *g, int v, const char *name, FcTensorInfo *info) {
    const IrValue *x = ir_cval(g, v);
    memset(info, 0, sizeof *info);
    info->name = name;
    info->dtype = x->dtype;
    info->rank = x->shape.rank;
    memcpy(info->dims, x->shape.dims, sizeof(int64_t) * (size_t)x->shape.rank);
    info->fp8_slot = ir_fp8_slot_of(g, v);
    info->scaled = info->fp8_slot >= 0;
}
FcStatus fc_block_input_info(const FcBlock *b, int i, FcTensorInfo *info) {
    if (!b || !b->src || !info || i < 0 || i >= b->src->inputs.len) return FC_ERR_USAGE;
    int v = b->src->inputs.data[i];
    fill_info(b->src, v, ir_cval(b->src, v)->name, info);
    info->is_param = b->src->is_param.data[i];
    return FC_OK;
}
FcStatus fc_block_output_info(const FcBlock *b, int i, FcTensorInfo *info) {
    if (!b || !b->src || !info || i < 0 || i >= b->src->outputs.len) return FC_ERR_USAGE;
    fill_info(b->src, b->src->outputs.data[i], b->src->output_names.data[i], info);
    return FC_OK;
}
/* Input or output `name`'s index; the names a block has are listed in the error (they are
 * few: a block's signature). */
static FcStatus block_index(const FcBlock *b, const char *name, bool output, int *index) {
    if (index) *index = -1;
    if (!b || !b->src || !name || !index) return FC_ERR_USAGE;
    const IrGraph *g = b->src;
    int n = output ? g->outputs.len : g->inputs.len;
    for (int i = 0; i < n; i++) {
        const char *s = output ? g->output_names.data[i] : ir_cval(g, g->inputs.data[i])->name;
        if (s && strcmp(s, name) == 0) {
            *index = i;
            return FC_OK;
        }
    }
    char names[512] = "";
    size_t len = 0;
    for (int i = 0; i < n && len < sizeof names; i++) {
        const char *s = output ? g->output_names.data[i] : ir_cval(g, g->inputs.data[i])->name;
        int w = snprintf(names + len, sizeof names - len, "%s'%s'", i ? ", " : "", s ? s : "?");
        if (w < 0) break;
        len += (size_t)w;
    }
    if (len >= sizeof names) memcpy(names + sizeof names - 4, "...", 4);
    return fc_err_set((FcErr *)&b->err, FC_ERR_USAGE, "block '%s' has no %s named '%.64s'; its %ss: %s", g->name,
                      output ? "output" : "input", name, output ? "output" : "input", n ? names : "(none)");
}
FcStatus fc_block_input_index(const FcBlock *b, const char *name, int *index) {
    return block_index(b, name, false, index);
}
FcStatus fc_block_output_index(const FcBlock *b, const char *name, int *index) {
    return block_index(b, name, true, index);
}
FcStatus fc_block_output_tolerance(const FcBlock *b, int i, double *rel_tol) {
    if (!block_ready(b) || !rel_tol || i < 0 || i >= b->src->outputs.len) return FC_ERR_USAGE;
    *rel_tol = b->tol[i];
    return FC_OK;
}

/* ---- report targets (--emit report, --emit roofline) ------------------------------------------ */
/* The GPUs' datasheet figures: memory bandwidth and f32 (non-tensor-core) peak. sm_80 and
 * sm_90 are always in the report; sm_86 / sm_89 when --arch names them. */
static const PassTarget k_gpu_targets[] = {
    {"sm_80", 2039.0, 19500.0, "datasheet, A100 80GB SXM", "datasheet, A100 80GB SXM"},
    {"sm_86", 600.0, 31200.0, "datasheet, A10", "datasheet, A10"},
    {"sm_89", 300.0, 30300.0, "datasheet, L4", "datasheet, L4"},
    {"sm_90", 3350.0, 66900.0, "datasheet, H100 SXM", "datasheet, H100 SXM"},
};
#define N_GPU_TARGETS ((int)(sizeof k_gpu_targets / sizeof k_gpu_targets[0]))

typedef struct ReportTargets {
    PassTarget t[N_GPU_TARGETS + 1];
    int n, chosen;
    char gbps_src[96], gflops_src[96];
} ReportTargets;

static int cpu_threads(void);

/* An override from the environment: a positive finite decimal number. */
static FcStatus env_figure(const char *name, double *v, bool *given, FcErr *err) {
    const char *e = getenv(name);
    *given = false;
    if (!e) return FC_OK;
    char *end = NULL;
    double x = strtod(e, &end);
    if (end == e || *end != 0 || !(x > 0) || !isfinite(x))
        return fc_err_set(err, FC_ERR_USAGE, "%s='%.32s' is not a positive number", name, e);
    *v = x;
    *given = true;
    return FC_OK;
}

/* The CPU's STREAM copy bandwidth with nt threads, measured once per process and thread
 * count (rt_cpu_peak_gflops caches its own figure). 0 when the arrays cannot be allocated. */
static double cpu_stream_cached(int nt) {
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static int cached_nt = 0;
    static double cached = 0.0;
    pthread_mutex_lock(&mu);
    double v = cached_nt == nt ? cached : 0.0;
    if (!(v > 0)) {
        v = rt_cpu_stream_gbps(nt);
        if (v > 0) {
            cached_nt = nt;
            cached = v;
        }
    }
    pthread_mutex_unlock(&mu);
    return v;
}

/* sm_80, the --arch GPU if another, sm_90 (datasheet), then the CPU: its bandwidth and peak
 * measured with the CPU device's threads, or FUSEC_CPU_GBPS / FUSEC_CPU_GFLOPS. */
static FcStatus report_targets(FcBlock *b, ReportTargets *rt) {
    memset(rt, 0, sizeof *rt);
    rt->chosen = -1;
    for (int i = 0; i < N_GPU_TARGETS; i++) {
        const PassTarget *t = &k_gpu_targets[i];
        bool is_arch = strcmp(t->name, b->arch) == 0;
        if (!is_arch && strcmp(t->name, "sm_80") != 0 && strcmp(t->name, "sm_90") != 0) continue;
        if (is_arch) rt->chosen = rt->n;
        rt->t[rt->n++] = *t;
    }
    FC_CHECK(&b->err, rt->chosen >= 0);
    PassTarget *c = &rt->t[rt->n++];
    *c = (PassTarget){"cpu", 0, 0, rt->gbps_src, rt->gflops_src};
    bool gbps_given, gflops_given;
    FC_TRY(env_figure("FUSEC_CPU_GBPS", &c->gbps, &gbps_given, &b->err));
    FC_TRY(env_figure("FUSEC_CPU_GFLOPS", &c->gflops, &gflops_given, &b->err));
    int nt = 0;
    if (!gbps_given || !gflops_given) {
        nt = cpu_threads();
        if (nt < 0)
            return fc_err_set(&b->err, FC_ERR_USAGE, "FUSEC_NUM_THREADS='%s' is not an integer in 1..1024",
                              getenv("FUSEC_NUM_THREADS"));
    }
    if (gbps_given) {
        snprintf(rt->gbps_src, sizeof rt->gbps_src, "given: FUSEC_CPU_GBPS");
    } else {
        c->gbps = cpu_stream_cached(nt);
        if (!(c->gbps > 0))
            return fc_err_set(&b->err, FC_ERR_NOMEM, "could not allocate the STREAM arrays to measure the cpu's "
                                                     "bandwidth (FUSEC_CPU_GBPS skips the measurement)");
        snprintf(rt->gbps_src, sizeof rt->gbps_src, "measured: STREAM copy, %d thread%s", nt, nt == 1 ? "" : "s");
    }
    if (gflops_given) {
        snprintf(rt->gflops_src, sizeof rt->gflops_src, "given: FUSEC_CPU_GFLOPS");
    } else {
        const char *isa = "";
        c->gflops = rt_cpu_peak_gflops(nt, &isa);
        if (!(c->gflops > 0))
            return fc_err_set(&b->err, FC_ERR_NOMEM, "could not start the threads to measure the cpu's f32 peak "
                                                     "(FUSEC_CPU_GFLOPS skips the measurement)");
        snprintf(rt->gflops_src, sizeof rt->gflops_src, "measured: %s loop, %d thread%s", isa, nt,
                 nt == 1 ? "" : "s");
    }
    return FC_OK;
}

/* Training: the forward and the backward in one unit. The forward's outputs after the block's
 * are the saved buffers; the backward's inputs are the plan's saved values (each a block input,
 * a block output or a saved buffer), then the gradients of the float outputs; its outputs the
 * gradients of the float inputs, in order. */
static FcStatus emit_cuda_aot_train(FcBlock *b, const CgIoDesc *io, int nio, StrBuf *sb) {
    const IrGraph *g = b->src, *f = b->plan.fwd, *bg = b->plan.bwd;
    int nsaved = f->outputs.len - g->outputs.len;
    CgIoDesc *saved = fc_calloc((size_t)nsaved + 1, sizeof *saved);
    CgArg *bin = fc_calloc((size_t)bg->inputs.len + 1, sizeof *bin);
    int *bout = fc_calloc((size_t)g->inputs.len + 1, sizeof *bout);
    FcStatus s = saved && bin && bout ? FC_OK : FC_OOM(&b->err);
    for (int k = 0; k < nsaved && s == FC_OK; k++) {
        const IrValue *x = ir_cval(f, f->outputs.data[g->outputs.len + k]);
        saved[k] = (CgIoDesc){f->output_names.data[g->outputs.len + k], x->dtype, x->shape, true, -1};
    }
    int nbin = 0, nbout = 0;
    for (int k = 0; k < b->plan.saved.len && s == FC_OK; k++) {
        const RematSaved *sv = &b->plan.saved.data[k];
        CgArgKind kind = sv->kind == REMAT_SAVED_INPUT ? CG_ARG_INPUT : sv->kind == REMAT_SAVED_OUTPUT ? CG_ARG_OUTPUT : CG_ARG_SAVED;
        bin[nbin++] = (CgArg){kind, sv->index};
    }
    for (int j = 0; j < g->outputs.len && s == FC_OK; j++)
        if (ir_dtype_is_float(ir_cval(g, g->outputs.data[j])->dtype)) bin[nbin++] = (CgArg){CG_ARG_GRAD_OUTPUT, j};
    for (int i = 0; i < g->inputs.len && s == FC_OK; i++)
        if (ir_dtype_is_float(ir_cval(g, g->inputs.data[i])->dtype)) bout[nbout++] = i;
    if (s == FC_OK && (nbin != bg->inputs.len || nbout != bg->outputs.len))
        s = fc_err_set(&b->err, FC_ERR_INTERNAL, "the backward has %d inputs and %d outputs; the plan says %d and %d",
                       bg->inputs.len, bg->outputs.len, nbin, nbout);
    if (s == FC_OK) {
        CgTrain t = {b->bwd.prog, saved, nsaved, bin, nbin, bout, nbout};
        s = cg_cuda_aot_train(b->fwd.prog, &t, b->entry, io, nio, sb, &b->err);
    }
    fc_free(saved);
    fc_free(bin);
    fc_free(bout);
    return s;
}

static FcStatus emit_cuda_aot(FcBlock *b, StrBuf *sb) {
    const IrGraph *g = b->src;   /* in training the saved buffers are described apart (emit_cuda_aot_train) */
    int nio = g->inputs.len + g->outputs.len;
    CgIoDesc *io = fc_calloc((size_t)nio + 1, sizeof *io);
    if (!io) return FC_OOM(&b->err);
    for (int i = 0; i < g->inputs.len; i++) {
        const IrValue *x = ir_cval(g, g->inputs.data[i]);
        io[i] = (CgIoDesc){x->name, x->dtype, x->shape, false, ir_fp8_slot_of(g, g->inputs.data[i])};
    }
    for (int j = 0; j < g->outputs.len; j++) {
        const IrValue *x = ir_cval(g, g->outputs.data[j]);
        io[g->inputs.len + j] = (CgIoDesc){g->output_names.data[j], x->dtype, x->shape, true, ir_fp8_slot_of(g, g->outputs.data[j])};
    }
    FcStatus s = b->train ? emit_cuda_aot_train(b, io, nio, sb) : cg_cuda_aot(b->fwd.prog, b->entry, io, nio, sb, &b->err);
    fc_free(io);
    return s;
}

/* --emit ir / kir: in training, the forward's then the backward's, each under a heading line. */
static void emit_ir(FcBlock *b, StrBuf *sb) {
    if (b->train) sb_puts(sb, "# forward\n");
    ir_print(b->fwd.res.graph, sb);
    if (!b->train) return;
    sb_puts(sb, "# backward\n");
    ir_print(b->bwd.res.graph, sb);
}
static void emit_kir(FcBlock *b, StrBuf *sb) {
    if (b->train) sb_puts(sb, "# forward\n");
    kir_print_program(b->fwd.prog, sb);
    if (!b->train) return;
    sb_puts(sb, "# backward\n");
    kir_print_program(b->bwd.prog, sb);
}

FcStatus fc_block_emit(FcBlock *b, FcEmitKind kind, char **data, size_t *len) {
    if (!data || !len) return b ? fc_err_set(&b->err, FC_ERR_USAGE, "fc_block_emit: data and len are required") : FC_ERR_USAGE;
    *data = NULL;
    *len = 0;
    if (!b) return FC_ERR_USAGE;
    if (b->unusable) return fc_err_set(&b->err, FC_ERR_INTERNAL, "this block hit an internal error earlier");
    if (!block_ready(b)) return fc_err_set(&b->err, FC_ERR_USAGE, "the block did not compile");
    StrBuf sb = {0};
    FcStatus s = FC_OK;
    switch (kind) {
    case FC_EMIT_IR: emit_ir(b, &sb); break;
    case FC_EMIT_KIR: emit_kir(b, &sb); break;
    case FC_EMIT_CUDA: s = emit_cuda_aot(b, &sb); break;
    case FC_EMIT_LLVM: {
        const KirProgram *cp = NULL;
        s = block_cpu_program(b, &b->fwd, &cp);
        if (s == FC_OK) s = cg_llvm_text(cp, &sb, &b->err);
        break;
    }
    case FC_EMIT_REPORT:
    case FC_EMIT_ROOFLINE: {
        ReportTargets rt;
        s = report_targets(b, &rt);
        if (s == FC_OK && kind == FC_EMIT_REPORT) {
            if (b->train) sb_puts(&sb, "# forward\n");
            s = pass_report(&b->fwd.res, rt.t, rt.n, rt.chosen, &sb, &b->err);
            if (s == FC_OK && b->train) {
                sb_puts(&sb, "# backward\n");
                s = pass_report(&b->bwd.res, rt.t, rt.n, rt.chosen, &sb, &b->err);
            }
            if (s == FC_OK && b->train) s = pass_report_remat(&b->joint, &b->plan, &sb, &b->err);
        }
        else if (s == FC_OK) s = pass_roofline_svg(&b->fwd.res, rt.t, rt.n, rt.chosen, &sb, &b->err);
        break;
    }
    case FC_EMIT_DOT: s = pass_dot(&b->fwd.res, &sb, &b->err); break;
    case FC_EMIT_PTX:
    case FC_EMIT_CUBIN: {
        s = cg_cuda_kernels(b->fwd.prog, &sb, &b->err);
        if (s != FC_OK) break;
        char *bin = NULL;
        size_t n = 0;
        /* through the kernel cache the CUDA device keeps its NVRTC results in (runtime/cache.h;
         * the key holds the source, the architecture, ptx or cubin and NVRTC's version); no
         * usable cache folder: NVRTC alone, as the device does */
        RtCache *cache = NULL;
        FcErr ignored = {0};
        if (rt_cache_open(&cache, &ignored) != FC_OK) cache = NULL;
        s = rt_cache_compile(cache, sb.data ? sb.data : "", b->arch, kind == FC_EMIT_CUBIN, &bin, &n, NULL, &b->err);
        rt_cache_free(cache);
        sb_free(&sb);
        if (s != FC_OK) return block_fail(b, s);
        *data = bin;
        *len = n;
        return FC_OK;
    }
    default:
        return fc_err_set(&b->err, FC_ERR_USAGE, "fc_block_emit: unknown kind %d", (int)kind);
    }
    if (s != FC_OK) {
        sb_free(&sb);
        return block_fail(b, s);
    }
    size_t n = sb.len;
    char *text = sb_take(&sb);
    if (!text) return FC_OOM(&b->err);
    *data = text;
    *len = n;
    return FC_OK;
}
void fc_buffer_free(void *p) { fc_free(p); }

/* ---- devices ------------------------------------------------------------------------------------ */
struct FcDevice {
    FcDeviceKind kind;
    FcErr err;
    int nthreads;
    char desc[256];
    RtCuda *cuda;          /* FC_DEVICE_CUDA */
    /* the bytes this handle's tensors and programs hold on the device, and their high-water
     * mark (fc_device_memory) */
    _Atomic int64_t mem_live, mem_peak;
};

/* Counts an allocation (bytes > 0) or a release (bytes < 0) on d. */
static void dev_count(FcDevice *d, int64_t bytes) {
    int64_t now = atomic_fetch_add(&d->mem_live, bytes) + bytes;
    int64_t peak = atomic_load(&d->mem_peak);
    while (now > peak && !atomic_compare_exchange_weak(&d->mem_peak, &peak, now)) {
    }
}

FcStatus fc_device_memory(FcDevice *d, int64_t *live_bytes, int64_t *peak_bytes) {
    if (!d) return FC_ERR_USAGE;
    if (live_bytes) *live_bytes = atomic_load(&d->mem_live);
    if (peak_bytes) *peak_bytes = atomic_load(&d->mem_peak);
    return FC_OK;
}
FcStatus fc_device_reset_peak(FcDevice *d) {
    if (!d) return FC_ERR_USAGE;
    atomic_store(&d->mem_peak, atomic_load(&d->mem_live));
    return FC_OK;
}

static int cpu_threads(void) {
    const char *e = getenv("FUSEC_NUM_THREADS");
    if (e && *e) {
        char *end;
        long v = strtol(e, &end, 10);
        if (*end == 0 && v >= 1 && v <= 1024) return (int)v;
        return -1;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n >= 1 && n <= 1024 ? (int)n : 1;
}

static void cpu_model(char *buf, size_t n) {
    snprintf(buf, n, "x86-64");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *c = strchr(line, ':');
            if (c) {
                c++;
                while (*c == ' ') c++;
                c[strcspn(c, "\n")] = 0;
                snprintf(buf, n, "%s", c);
            }
            break;
        }
    }
    fclose(f);
}

FcStatus fc_device_open(FcDeviceKind kind, int ordinal, FcDevice **out) {
    if (!out) return FC_ERR_USAGE;
    FcDevice *d = fc_calloc(1, sizeof *d);
    *out = d;
    if (!d) return FC_ERR_NOMEM;
    d->kind = kind;
    if (ordinal != 0 && kind != FC_DEVICE_CUDA)
        return fc_err_set(&d->err, FC_ERR_USAGE, "device ordinal %d: the CPU and reference devices have only ordinal 0", ordinal);
    switch (kind) {
    case FC_DEVICE_CPU: {
        d->nthreads = cpu_threads();
        if (d->nthreads < 0)
            return fc_err_set(&d->err, FC_ERR_USAGE, "FUSEC_NUM_THREADS='%s' is not an integer in 1..1024",
                              getenv("FUSEC_NUM_THREADS"));
        const char *lname = NULL;
        int level = cpu_level(&d->err, &lname);
        if (level < 0) return FC_ERR_USAGE;
        char model[160];
        cpu_model(model, sizeof model);
        snprintf(d->desc, sizeof d->desc, "cpu: %s, %d thread%s%s%s", model, d->nthreads, d->nthreads == 1 ? "" : "s",
                 level > 0 ? ", kernels for " : "", level > 0 ? lname : "");
        return FC_OK;
    }
    case FC_DEVICE_REFERENCE:
        snprintf(d->desc, sizeof d->desc, "reference interpreter (f64)");
        return FC_OK;
    case FC_DEVICE_CUDA: {
        FcStatus s = rt_cuda_open(ordinal, &d->cuda, &d->err);
        if (s != FC_OK) return s;
        snprintf(d->desc, sizeof d->desc, "%s", rt_cuda_description(d->cuda));
        return FC_OK;
    }
    }
    return fc_err_set(&d->err, FC_ERR_USAGE, "unknown device kind %d", (int)kind);
}
void fc_device_free(FcDevice *d) {
    if (!d) return;
    rt_cuda_close(d->cuda);
    fc_free(d);
}
const char *fc_device_last_error(const FcDevice *d) { return d ? d->err.msg : "no device handle"; }
const char *fc_device_description(const FcDevice *d) { return d ? d->desc : ""; }
FcStatus fc_device_stream_bandwidth(FcDevice *d, double *gbps) {
    if (!d || !gbps) return FC_ERR_USAGE;
    if (d->kind == FC_DEVICE_CUDA) return rt_cuda_copy_gbps(d->cuda, gbps, &d->err);
    if (d->kind != FC_DEVICE_CPU)
        return fc_err_set(&d->err, FC_ERR_USAGE, "stream bandwidth is measured on the CPU and CUDA devices only");
    /* the figure --emit report takes for the cpu target, so that tests get a fixed roofline */
    bool given = false;
    FC_TRY(env_figure("FUSEC_CPU_GBPS", gbps, &given, &d->err));
    if (given) return FC_OK;
    *gbps = rt_cpu_stream_gbps(d->nthreads);
    if (!(*gbps > 0)) return fc_err_set(&d->err, FC_ERR_NOMEM, "could not allocate the STREAM arrays");
    return FC_OK;
}

/* ---- tensors ---------------------------------------------------------------------------------------- */
struct FcTensor {
    FcDevice *dev;
    FcErr err;
    FcDtype dtype;
    IrShape shape;
    int64_t nbytes;
    void *data;            /* 64-byte aligned (2 MiB from 2 MiB on: rt_cpu_alloc) */
    void *raw;             /* what fc_alloc returned, when owned */
    bool owned;
    /* A wrapped pointer the device cannot use in place (wrap_align): programs run on this
     * aligned copy, filled from data before each run and copied back after (outputs). */
    void *stage;
    void *stage_raw;       /* host devices: what rt_cpu_alloc returned */
    int64_t counted;       /* bytes counted on the device (fc_device_memory) */
    double scale;          /* f8: the value of element q is q / scale (a power of two; 1 unless set) */
};

static bool pow2_scale(double s);
static double fp8_scale_for(double amax, FcDtype fmt, double old);
static FcStatus block_take_input_scales(FcBlock *b, FcTensor *const *inputs);
static int input_slot(const IrGraph *g, int i);
static bool is_f8(FcDtype t) { return t == FC_F8E4M3 || t == FC_F8E5M2; }
/* The value element i of t (host memory h) stands for: q / scale for f8. */
static double tensor_value(const FcTensor *t, const void *h, int64_t i) {
    double q = rt_host_load(t->dtype, h, i);
    return is_f8(t->dtype) ? q / t->scale : q;
}

static FcStatus tensor_make(FcDevice *d, FcDtype dtype, int rank, const int64_t *dims, FcTensor **out) {
    if (!out) return FC_ERR_USAGE;
    *out = NULL;
    if (!d) return FC_ERR_USAGE;
    if ((unsigned)dtype >= FC_DTYPE_COUNT) return fc_err_set(&d->err, FC_ERR_USAGE, "bad dtype %d", (int)dtype);
    if (rank < 0 || rank > FC_MAX_RANK || (rank > 0 && !dims))
        return fc_err_set(&d->err, FC_ERR_USAGE, "bad rank %d (0..%d)", rank, FC_MAX_RANK);
    if (d->kind == FC_DEVICE_CUDA && !d->cuda) return fc_err_set(&d->err, FC_ERR_UNAVAILABLE, "no CUDA device");
    FcTensor *t = fc_calloc(1, sizeof *t);
    if (!t) return FC_OOM(&d->err);
    t->dev = d;
    t->dtype = dtype;
    t->scale = 1;
    t->shape.rank = rank;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 1) {
            fc_free(t);
            return fc_err_set(&d->err, FC_ERR_USAGE, "dim %d is %lld; sizes must be >= 1", i, (long long)dims[i]);
        }
        t->shape.dims[i] = dims[i];
    }
    if (!ir_shape_nbytes(&t->shape, dtype, &t->nbytes)) {
        fc_free(t);
        return fc_err_set(&d->err, FC_ERR_USAGE, "tensor size overflows");
    }
    *out = t;
    return FC_OK;
}

FcStatus fc_tensor_new(FcDevice *d, FcDtype dtype, int rank, const int64_t *dims, FcTensor **out) {
    FC_TRY(tensor_make(d, dtype, rank, dims, out));
    FcTensor *t = *out;
    if (d->kind == FC_DEVICE_CUDA) {
        FcStatus s = rt_cuda_alloc(d->cuda, (size_t)t->nbytes, &t->data, &d->err);
        if (s != FC_OK) {
            fc_free(t);
            *out = NULL;
            return s;
        }
        t->owned = true;
        dev_count(d, t->counted = t->nbytes);
        return FC_OK;
    }
    if ((uint64_t)t->nbytes > SIZE_MAX - 128 || !(t->data = rt_cpu_alloc((size_t)t->nbytes, &t->raw))) {
        long long nb = (long long)t->nbytes;
        fc_free(t);
        *out = NULL;
        return fc_err_set(&d->err, FC_ERR_NOMEM, "out of memory allocating a tensor of %lld bytes", nb);
    }
    t->owned = true;
    dev_count(d, t->counted = t->nbytes);
    return FC_OK;
}
/* The alignment a device's programs use a buffer at. The CPU's JIT code accesses tensors with
 * their element's alignment (unaligned vector moves; the non-temporal copy of a kernel is chosen
 * at run time, for 64-byte aligned buffers only), as do the interpreter and OpenBLAS. On CUDA,
 * scalar accesses need element alignment and cuBLASLt, whose alignment preferences are left at
 * their defaults, assumes 256 bytes (what cuMemAlloc gives); the generated kernels' 16-byte
 * vector paths check alignment at run time. */
static size_t wrap_align(const FcDevice *d, FcDtype dtype) {
    return d->kind == FC_DEVICE_CUDA ? 256 : fc_dtype_size(dtype);
}
FcStatus fc_tensor_wrap(FcDevice *d, FcDtype dtype, int rank, const int64_t *dims, void *data, FcTensor **out) {
    if (!data) {
        if (out) *out = NULL;
        if (d) return fc_err_set(&d->err, FC_ERR_USAGE, "fc_tensor_wrap: data must be non-NULL");
        return FC_ERR_USAGE;
    }
    FC_TRY(tensor_make(d, dtype, rank, dims, out));
    FcTensor *t = *out;
    t->data = data;
    if ((uintptr_t)data % wrap_align(d, dtype) == 0) return FC_OK;
    FcStatus s = FC_OK;
    if (d->kind == FC_DEVICE_CUDA) s = rt_cuda_alloc(d->cuda, (size_t)t->nbytes, &t->stage, &d->err);
    else if ((uint64_t)t->nbytes > SIZE_MAX - 128 || !(t->stage = rt_cpu_alloc((size_t)t->nbytes, &t->stage_raw)))
        s = fc_err_set(&d->err, FC_ERR_NOMEM, "out of memory allocating the aligned copy of a wrapped tensor "
                                              "(%lld bytes)", (long long)t->nbytes);
    if (s != FC_OK) {
        fc_free(t);
        *out = NULL;
        return s;
    }
    dev_count(d, t->counted = t->nbytes);
    return s;
}
void fc_tensor_free(FcTensor *t) {
    if (!t) return;
    dev_count(t->dev, -t->counted);
    if (t->owned && t->dev->kind == FC_DEVICE_CUDA) rt_cuda_free(t->dev->cuda, t->data);
    else if (t->owned) fc_free(t->raw);
    if (t->stage && t->dev->kind == FC_DEVICE_CUDA) rt_cuda_free(t->dev->cuda, t->stage);
    else if (t->stage) fc_free(t->stage_raw);
    fc_free(t);
}
/* Copies between a wrapped tensor's memory and its aligned copy (to_stage: data -> stage). */
static FcStatus stage_copy(FcTensor *t, bool to_stage, FcErr *err) {
    void *dst = to_stage ? t->stage : t->data;
    const void *src = to_stage ? t->data : t->stage;
    if (t->dev->kind == FC_DEVICE_CUDA) return rt_cuda_copy_dtod(t->dev->cuda, dst, src, (size_t)t->nbytes, err);
    memcpy(dst, src, (size_t)t->nbytes);
    return FC_OK;
}
size_t fc_tensor_nbytes(const FcTensor *t) { return t ? (size_t)t->nbytes : 0; }
const char *fc_tensor_last_error(const FcTensor *t) { return t ? t->err.msg : "no tensor handle"; }
FcStatus fc_tensor_copy_from_host(FcTensor *t, const void *src, size_t nbytes) {
    if (!t) return FC_ERR_USAGE;
    if (!src || nbytes != (size_t)t->nbytes)
        return fc_err_set(&t->err, FC_ERR_USAGE, "copy of %zu bytes into a tensor of %lld bytes", nbytes, (long long)t->nbytes);
    if (t->dev->kind == FC_DEVICE_CUDA) return rt_cuda_copy_htod(t->dev->cuda, t->data, src, nbytes, &t->err);
    memcpy(t->data, src, nbytes);
    return FC_OK;
}
FcStatus fc_tensor_copy_to_host(const FcTensor *t, void *dst, size_t nbytes) {
    if (!t) return FC_ERR_USAGE;
    if (!dst || nbytes != (size_t)t->nbytes)
        return fc_err_set((FcErr *)&t->err, FC_ERR_USAGE, "copy of %zu bytes from a tensor of %lld bytes", nbytes,
                          (long long)t->nbytes);
    if (t->dev->kind == FC_DEVICE_CUDA)
        return rt_cuda_copy_dtoh(t->dev->cuda, dst, t->data, nbytes, (FcErr *)&t->err);
    memcpy(dst, t->data, nbytes);
    return FC_OK;
}
/* Host memory holding t's data: t's own for host devices; a staged copy (fc_alloc'd) for a
 * CUDA tensor, read from the device when `fetch`. Release with host_end (writing back when
 * `store`). */
static FcStatus host_begin(const FcTensor *t, bool fetch, void **host) {
    if (t->dev->kind != FC_DEVICE_CUDA) {
        *host = t->data;
        return FC_OK;
    }
    void *h = fc_alloc((size_t)t->nbytes + 1);
    if (!h) return FC_OOM((FcErr *)&t->err);
    if (fetch) {
        FcStatus s = rt_cuda_copy_dtoh(t->dev->cuda, h, t->data, (size_t)t->nbytes, (FcErr *)&t->err);
        if (s != FC_OK) { fc_free(h); return s; }
    }
    *host = h;
    return FC_OK;
}
static FcStatus host_end(FcTensor *t, void *host, bool store) {
    if (t->dev->kind != FC_DEVICE_CUDA) return FC_OK;
    FcStatus s = store ? rt_cuda_copy_htod(t->dev->cuda, t->data, host, (size_t)t->nbytes, &t->err) : FC_OK;
    fc_free(host);
    return s;
}

FcStatus fc_tensor_set_scale(FcTensor *t, double scale) {
    if (!t) return FC_ERR_USAGE;
    if (!is_f8(t->dtype))
        return fc_err_set(&t->err, FC_ERR_USAGE, "fc_tensor_set_scale: a %s tensor has no scale (f8 tensors have)",
                          fc_dtype_name(t->dtype));
    if (!pow2_scale(scale))
        return fc_err_set(&t->err, FC_ERR_USAGE, "fc_tensor_set_scale: %g is not a power of two in [2^-126, 2^126]", scale);
    t->scale = scale;
    return FC_OK;
}
FcStatus fc_tensor_scale(const FcTensor *t, double *scale) {
    if (!t || !scale) return FC_ERR_USAGE;
    *scale = t->scale;
    return FC_OK;
}
FcStatus fc_tensor_quantize(FcTensor *dst, const FcTensor *src) {
    if (!dst || !src) return FC_ERR_USAGE;
    if (!is_f8(dst->dtype))
        return fc_err_set(&dst->err, FC_ERR_USAGE, "fc_tensor_quantize: the destination is %s, not f8e4m3 or f8e5m2",
                          fc_dtype_name(dst->dtype));
    if (!ir_shape_eq(&dst->shape, &src->shape) || src->dtype == FC_BOOL)
        return fc_err_set(&dst->err, FC_ERR_USAGE, "fc_tensor_quantize: the tensors differ in shape, or the source is bool");
    int64_t n = dst->nbytes;
    void *hs = NULL;
    FC_TRY(host_begin(src, true, &hs));
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = fabs(tensor_value(src, hs, i));
        if (v > m && isfinite(v)) m = v;
    }
    host_end((FcTensor *)src, hs, false);
    dst->scale = fp8_scale_for(m, dst->dtype, 1);
    return fc_tensor_convert(dst, src, 1);
}

FcStatus fc_tensor_load_npy(FcTensor *t, const char *path) {
    if (!t || !path) return FC_ERR_USAGE;
    void *data = NULL;
    /* f8: the file's values times the tensor's scale */
    FcStatus s = rt_npy_read(path, is_f8(t->dtype) && t->scale != 1 ? FC_F64 : t->dtype, &t->shape, &data, &t->err);
    if (s != FC_OK) return s;
    if (is_f8(t->dtype) && t->scale != 1) {
        int64_t n = t->nbytes;
        for (int64_t i = 0; i < n; i++) rt_host_store(t->dtype, data, i, ((const double *)data)[i] * t->scale);
    }
    s = fc_tensor_copy_from_host(t, data, (size_t)t->nbytes);
    fc_free(data);
    return s;
}
FcStatus fc_tensor_save_npy(const FcTensor *t, const char *path) {
    if (!t || !path) return FC_ERR_USAGE;
    void *h = NULL;
    FC_TRY(host_begin(t, true, &h));
    FcStatus s = FC_OK;
    if (is_f8(t->dtype) && t->scale != 1) {   /* NumPy has no f8: the values, in f32 */
        int64_t n = t->nbytes;
        float *f = fc_calloc((size_t)n + 1, sizeof *f);
        if (!f) s = FC_OOM((FcErr *)&t->err);
        for (int64_t i = 0; f && i < n; i++) f[i] = (float)tensor_value(t, h, i);
        if (f) s = rt_npy_write(path, FC_F32, &t->shape, f, (FcErr *)&t->err);
        fc_free(f);
    } else {
        s = rt_npy_write(path, t->dtype, &t->shape, h, (FcErr *)&t->err);
    }
    host_end((FcTensor *)t, h, false);
    return s;
}
FcStatus fc_tensor_compare(const FcTensor *got, const FcTensor *ref, double *max_abs, double *max_rel) {
    if (!got || !ref || !max_abs || !max_rel) return FC_ERR_USAGE;
    if (got->dtype != ref->dtype || !ir_shape_eq(&got->shape, &ref->shape))
        return fc_err_set((FcErr *)&got->err, FC_ERR_USAGE, "fc_tensor_compare: tensors differ in dtype or shape");
    int64_t n = 1;
    ir_shape_numel(&got->shape, &n);
    void *hg = NULL, *hr = NULL;
    FC_TRY(host_begin(got, true, &hg));
    FcStatus s = host_begin(ref, true, &hr);
    if (s == FC_OK && is_f8(got->dtype) && (got->scale != 1 || ref->scale != 1)) {
        /* f8 with scales: the values they stand for; below the smallest normal of the coarser
         * of the two (2^-6 / scale for E4M3) a value's error is absolute: an output all of whose
         * reference values are 0 at one scale, compared with the same math kept in f32 and
         * stored at a finer one, differs by what the reference cannot represent */
        double *a = fc_calloc((size_t)n + 1, sizeof *a), *c = fc_calloc((size_t)n + 1, sizeof *c);
        if (a && c) {
            for (int64_t i = 0; i < n; i++) a[i] = tensor_value(got, hg, i), c[i] = tensor_value(ref, hr, i);
            double sc = fmin(got->scale, ref->scale);
            rt_host_compare_floor(FC_F64, a, c, n, sc > 0 ? rt_host_min_normal(got->dtype) / sc : 0, max_abs, max_rel);
        } else {
            s = FC_OOM((FcErr *)&got->err);
        }
        fc_free(a);
        fc_free(c);
        host_end((FcTensor *)ref, hr, false);
    } else if (s == FC_OK) {
        rt_host_compare(got->dtype, hg, hr, n, max_abs, max_rel);
        host_end((FcTensor *)ref, hr, false);
    }
    host_end((FcTensor *)got, hg, false);
    return s;
}

FcStatus fc_tensor_convert(FcTensor *dst, const FcTensor *src, double scale) {
    if (!dst || !src) return FC_ERR_USAGE;
    if (!ir_shape_eq(&dst->shape, &src->shape))
        return fc_err_set(&dst->err, FC_ERR_USAGE, "fc_tensor_convert: the tensors differ in shape");
    if (dst->dtype == FC_BOOL || src->dtype == FC_BOOL)
        return fc_err_set(&dst->err, FC_ERR_USAGE, "fc_tensor_convert: bool tensors are not converted");
    int64_t n = dst->nbytes / (int64_t)fc_dtype_size(dst->dtype);
    void *hs = NULL, *hd = NULL;
    FC_TRY(host_begin(src, true, &hs));
    FcStatus s = host_begin(dst, false, &hd);
    if (s == FC_OK) {
        /* f8 tensors: their values (q / scale in, value * scale out) */
        double sc = scale * (is_f8(src->dtype) ? 1 / src->scale : 1) * (is_f8(dst->dtype) ? dst->scale : 1);
        if (sc == 1) {   /* rt_host_convert: exact between i32 and i64 too; in place, nothing to do */
            if (hd != hs) rt_host_convert(dst->dtype, hd, src->dtype, hs, n);
        } else {
            for (int64_t i = 0; i < n; i++) rt_host_store(dst->dtype, hd, i, rt_host_load(src->dtype, hs, i) * sc);
        }
        s = host_end(dst, hd, true);
    }
    host_end((FcTensor *)src, hs, false);
    return s;
}

/* rt_graph_check_tolerances for graph g of block b, the tensors `in` (any devices) as g's inputs. */
static FcStatus graph_check(FcBlock *b, const IrGraph *g, FcTensor *const *in, double *tol, double *spread, const char *fn) {
    int nin = g->inputs.len;
    for (int i = 0; i < nin; i++) {
        const IrValue *x = ir_cval(g, g->inputs.data[i]);
        if (!in[i] || in[i]->dtype != x->dtype || !ir_shape_eq(&in[i]->shape, &x->shape))
            return fc_err_set(&b->err, FC_ERR_USAGE, "%s: input %d ('%s') is missing or does not match the block", fn, i, x->name);
    }
    if (g == b->src) FC_TRY(block_take_input_scales(b, in));
    void **h = fc_calloc((size_t)nin + 1, sizeof *h);
    FcStatus s = h ? FC_OK : FC_OOM(&b->err);
    int fetched = 0;   /* inputs [0, fetched) hold host copies to release */
    for (int i = 0; s == FC_OK && i < nin; i++)
        if ((s = host_begin(in[i], true, &h[i])) == FC_OK) fetched = i + 1;
    if (s == FC_OK) s = rt_graph_check_tolerances(g, (const void *const *)h, tol, spread, &b->err);
    for (int i = 0; i < fetched; i++) host_end(in[i], h[i], false);
    fc_free(h);
    return block_fail(b, s);
}

FcStatus fc_block_check_tolerances(FcBlock *b, FcTensor *const *inputs, double *rel_tol, double *spread) {
    if (!block_ready(b) || !rel_tol) return FC_ERR_USAGE;
    const IrGraph *g = b->src;
    int nin = g->inputs.len, nout = g->outputs.len;
    for (int j = 0; j < nout; j++) {
        rel_tol[j] = b->tol[j];
        if (spread) spread[j] = 0;
    }
    if (!b->narrow_mid || nout == 0) return FC_OK;   /* both roundings are the same program */
    if (nin && !inputs) return fc_err_set(&b->err, FC_ERR_USAGE, "fc_block_check_tolerances: inputs are required");
    return graph_check(b, g, inputs, rel_tol, spread, "fc_block_check_tolerances");
}

FcStatus fc_block_check_grad_tolerances(FcBlock *b, FcTensor *const *inputs, FcTensor *const *grad_outputs, double *rel_tol,
                                        double *spread) {
    if (!block_ready(b) || !rel_tol || !b->train) return FC_ERR_USAGE;
    const IrGraph *g = b->src, *jg = b->joint.graph;
    int nin = g->inputs.len, nout = g->outputs.len;
    for (int i = 0; i < nin; i++) {
        rel_tol[i] = b->gtol[i];
        if (spread) spread[i] = 0;
    }
    if (!b->narrow_grad) return FC_OK;   /* both roundings are the same program */
    if ((nin && !inputs) || (nout && !grad_outputs))
        return fc_err_set(&b->err, FC_ERR_USAGE, "fc_block_check_grad_tolerances: inputs and grad_outputs are required");
    /* the joint graph's inputs: the block's, then the float outputs' gradients */
    FcTensor **all = fc_calloc((size_t)jg->inputs.len + 1, sizeof *all);
    double *t = fc_calloc((size_t)jg->outputs.len + 1, sizeof *t), *sp = fc_calloc((size_t)jg->outputs.len + 1, sizeof *sp);
    FcStatus s = all && t && sp ? FC_OK : FC_OOM(&b->err);
    for (int i = 0; s == FC_OK && i < nin; i++) all[i] = inputs[i];
    for (int j = 0; s == FC_OK && j < nout; j++)
        if (b->joint.grad_in_of_output[j] >= 0) all[b->joint.grad_in_of_output[j]] = grad_outputs[j];
    if (s == FC_OK) s = graph_check(b, jg, all, t, sp, "fc_block_check_grad_tolerances");
    for (int i = 0; s == FC_OK && i < nin; i++) {
        int k = b->joint.grad_out_of_input[i];
        if (k < 0) continue;
        rel_tol[i] = t[k];
        if (spread) spread[i] = sp[k];
    }
    fc_free(all);
    fc_free(t);
    fc_free(sp);
    return s;
}

/* The float outputs' gradients (those given) as f64 arrays for the reference backward, go[j]
 * allocated here (the caller frees them), from any device. */
static FcStatus grads_f64(const IrGraph *g, FcTensor *const *grad_outputs, double **go, FcErr *err) {
    for (int j = 0; j < g->outputs.len; j++) {
        const IrValue *y = ir_cval(g, g->outputs.data[j]);
        if (!ir_dtype_is_float(y->dtype) || !grad_outputs[j]) continue;
        int64_t n = grad_outputs[j]->nbytes / (int64_t)fc_dtype_size(y->dtype);
        void *hg = NULL;
        if (!(go[j] = fc_calloc((size_t)n + 1, sizeof(double)))) return FC_OOM(err);
        FC_TRY(host_begin(grad_outputs[j], true, &hg));
        rt_host_convert(FC_F64, go[j], y->dtype, hg, n);
        host_end(grad_outputs[j], hg, false);
    }
    return FC_OK;
}

FcStatus fc_block_grad_noise_spread(FcBlock *b, FcTensor *const *inputs, FcTensor *const *grad_outputs, int i,
                                    double *noise) {
    if (!block_ready(b) || !noise || !b->train) return FC_ERR_USAGE;
    *noise = 0;
    const IrGraph *g = b->src;
    int nin = g->inputs.len, nout = g->outputs.len;
    if (i < 0 || i >= nin || !ir_dtype_is_float(ir_cval(g, g->inputs.data[i])->dtype))
        return fc_err_set(&b->err, FC_ERR_USAGE, "fc_block_grad_noise_spread: input %d is not a float input", i);
    bool f32 = false;   /* an f32 value: its gradient's contributions are rounded to f32 */
    for (int v = 0; v < g->values.len && !f32; v++) f32 = ir_cval(g, v)->dtype == FC_F32;
    if (!b->narrow_grad && !f32) return FC_OK;   /* every gradient f64: nothing to round */
    if ((nin && !inputs) || (nout && !grad_outputs))
        return fc_err_set(&b->err, FC_ERR_USAGE, "fc_block_grad_noise_spread: inputs and grad_outputs are required");
    for (int k = 0; k < nin; k++) {
        const IrValue *x = ir_cval(g, g->inputs.data[k]);
        if (!inputs[k] || inputs[k]->dtype != x->dtype || !ir_shape_eq(&inputs[k]->shape, &x->shape))
            return fc_err_set(&b->err, FC_ERR_USAGE, "fc_block_grad_noise_spread: input %d ('%s') is missing or does not match the block",
                              k, x->name);
    }
    FC_TRY(block_take_input_scales(b, inputs));
    const IrValue *xi = ir_cval(g, g->inputs.data[i]);
    int64_t m = inputs[i]->nbytes / (int64_t)fc_dtype_size(xi->dtype);
    void **h = fc_calloc((size_t)nin + 1, sizeof *h);
    double **go = fc_calloc((size_t)nout + 1, sizeof *go), **gi = fc_calloc((size_t)nin + 1, sizeof *gi);
    void *ref = fc_alloc((size_t)inputs[i]->nbytes + 1), *got = fc_alloc((size_t)inputs[i]->nbytes + 1);
    FcStatus s = h && go && gi && ref && got ? FC_OK : FC_OOM(&b->err);
    if (s == FC_OK && !(gi[i] = fc_calloc((size_t)m + 1, sizeof(double)))) s = FC_OOM(&b->err);
    int fetched = 0;   /* inputs [0, fetched) hold host copies to release */
    for (int k = 0; s == FC_OK && k < nin; k++)
        if ((s = host_begin(inputs[k], true, &h[k])) == FC_OK) fetched = k + 1;
    for (int j = 0; s == FC_OK && j < nout; j++) {
        const IrValue *y = ir_cval(g, g->outputs.data[j]);
        if (ir_dtype_is_float(y->dtype) && grad_outputs[j] &&
            (grad_outputs[j]->dtype != y->dtype || !ir_shape_eq(&grad_outputs[j]->shape, &y->shape)))
            s = fc_err_set(&b->err, FC_ERR_USAGE, "fc_block_grad_noise_spread: the gradient of output %d does not match it", j);
    }
    if (s == FC_OK) s = grads_f64(g, grad_outputs, go, &b->err);
    /* the clean backward, then the noisy ones, each rounded to the input's dtype */
    for (int trial = -1; s == FC_OK && trial < RT_GRAD_NOISE_TRIALS; trial++) {
        s = trial < 0 ? rt_interp_grad(g, (const void *const *)h, NULL, (const double *const *)go, gi, &b->err)
                      : rt_interp_grad_noisy(g, (const void *const *)h, NULL, (const double *const *)go, gi,
                                             0x6AD1ull + (uint64_t)trial, &b->err);
        if (s != FC_OK) break;
        rt_host_convert(xi->dtype, trial < 0 ? ref : got, FC_F64, gi[i], m);
        if (trial < 0) continue;
        double a = 0, r = 0;
        rt_host_compare(xi->dtype, got, ref, m, &a, &r);
        if (!(r <= *noise)) *noise = r;   /* a NaN or an infinity stays */
    }
    for (int k = 0; k < fetched; k++) host_end(inputs[k], h[k], false);
    for (int j = 0; go && j < nout; j++) fc_free(go[j]);
    for (int k = 0; gi && k < nin; k++) fc_free(gi[k]);
    fc_free(h);
    fc_free(go);
    fc_free(gi);
    fc_free(ref);
    fc_free(got);
    return block_fail(b, s);
}

/* ids of a gather or a scatter_add: the rows bound the random values */
FcStatus fc_block_random_input(FcBlock *b, int i, uint64_t seed, FcTensor *t) {
    if (!b || !b->src || !t || i < 0 || i >= b->src->inputs.len) return FC_ERR_USAGE;
    const IrGraph *g = b->src;
    int v = g->inputs.data[i];
    const IrValue *x = ir_cval(g, v);
    if (t->dtype != x->dtype || !ir_shape_eq(&t->shape, &x->shape))
        return fc_err_set(&b->err, FC_ERR_USAGE, "fc_block_random_input: tensor does not match input %d", i);
    int64_t n = 1;
    ir_shape_numel(&x->shape, &n);
    /* a distinct stream per input */
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + (uint64_t)i * 0xBF58476D1CE4E5B9ull + 1;
    void *h = NULL;
    FC_TRY(host_begin(t, false, &h));
    if (ir_dtype_is_int(x->dtype)) {
        int64_t hi = 16;
        for (int k = 0; k < g->nodes.len; k++) {
            const IrNode *nd = &g->nodes.data[k];
            /* ids and labels in range: gather's and scatter_add's rows, cross_entropy's classes */
            if (nd->nin != 2 || nd->in[1] != v) continue;
            const IrShape *ts = &ir_cval(g, nd->in[0])->shape;
            int64_t lim = nd->op == IR_OP_GATHER          ? ts->dims[0]
                          : nd->op == IR_OP_SCATTER_ADD   ? nd->a.i[0]
                          : nd->op == IR_OP_CROSS_ENTROPY ? ts->dims[ts->rank - 1]
                                                          : hi;
            if (lim < hi) hi = lim;
        }
        rt_host_fill_uniform_int(x->dtype, h, n, 0, hi, s);
    } else if (x->dtype == FC_I8) {
        /* quantized weights: uniform in [-127, 127], never all zero */
        rt_host_fill_uniform_int(x->dtype, h, n, -127, 128, s);
        bool any = false;
        for (int64_t k = 0; k < n && !any; k++) any = ((const signed char *)h)[k] != 0;
        if (!any && n > 0) ((signed char *)h)[0] = 1;
    } else {
        /* an f8 tensor at the interface: drawn in f64, then stored with the scale that fits
         * its largest magnitude (fc_tensor_quantize's) */
        bool scaled = input_slot(g, i) >= 0;
        FcDtype dt = scaled ? FC_F64 : x->dtype;
        void *d = scaled ? fc_calloc((size_t)n + 1, sizeof(double)) : h;
        if (!d) {
            host_end(t, h, false);
            return FC_OOM(&b->err);
        }
        rt_host_fill_normal(dt, d, n, s);
        /* a weight matrix [.., in, out] declared `param` gets variance 1/in (realistic scales,
         * so that products keep unit variance); the scales of an i8 weight [.., in, out] (a
         * value multiplying its cast) 1 / (73.3^2 in), so that the dequantized weight has that
         * variance too (uniform [-127, 127] has a deviation of 73.3); everything else N(0, 1) */
        double sc = 1;
        if (g->is_param.data[i] && x->shape.rank >= 2) sc = 1.0 / sqrt((double)x->shape.dims[x->shape.rank - 2]);
        for (int k = 0; k < g->nodes.len && sc == 1; k++) {
            const IrNode *nd = &g->nodes.data[k];
            if (nd->op != IR_OP_MUL || (nd->in[0] != v && nd->in[1] != v)) continue;
            const IrValue *o = ir_cval(g, nd->in[nd->in[0] == v ? 1 : 0]);
            const IrNode *c = o->node >= 0 ? &g->nodes.data[o->node] : NULL;
            const IrValue *w = c && c->op == IR_OP_CAST ? ir_cval(g, c->in[0]) : NULL;
            if (w && w->dtype == FC_I8)
                sc = 1.0 / (73.3 * sqrt((double)(w->shape.rank >= 2 ? w->shape.dims[w->shape.rank - 2] : 1)));
        }
        if (sc != 1)
            for (int64_t k = 0; k < n; k++) rt_host_store(dt, d, k, rt_host_load(dt, d, k) * sc);
        if (scaled) {
            double m = 0;
            for (int64_t k = 0; k < n; k++) m = fmax(m, fabs(((const double *)d)[k]));
            t->scale = fp8_scale_for(m, x->dtype, 1);
            for (int64_t k = 0; k < n; k++) rt_host_store(x->dtype, h, k, ((const double *)d)[k] * t->scale);
            fc_free(d);
        }
    }
    return host_end(t, h, true);
}

FcStatus fc_block_grad_tolerance(const FcBlock *b, int i, double *rel_tol) {
    if (!b || !rel_tol || !b->train || !block_ready(b) || i < 0 || i >= b->src->inputs.len) return FC_ERR_USAGE;
    *rel_tol = b->gtol[i];
    return FC_OK;
}

FcStatus fc_block_random_grad_output(FcBlock *b, int j, uint64_t seed, FcTensor *t) {
    if (!b || !b->src || !t || j < 0 || j >= b->src->outputs.len) return FC_ERR_USAGE;
    const IrValue *y = ir_cval(b->src, b->src->outputs.data[j]);
    if (!ir_dtype_is_float(y->dtype))
        return fc_err_set(&b->err, FC_ERR_USAGE, "output %d ('%s') is not a float output: it has no gradient", j,
                          b->src->output_names.data[j]);
    if (t->dtype != y->dtype || !ir_shape_eq(&t->shape, &y->shape))
        return fc_err_set(&b->err, FC_ERR_USAGE, "fc_block_random_grad_output: tensor does not match output %d", j);
    int64_t n = 1;
    ir_shape_numel(&y->shape, &n);
    uint64_t s = seed * 0xD1B54A32D192ED03ull + (uint64_t)j * 0x94D049BB133111EBull + 0x5851F42D4C957F2Dull;
    void *h = NULL;
    FC_TRY(host_begin(t, false, &h));
    rt_host_fill_normal(y->dtype, h, n, s);
    return host_end(t, h, true);
}

/* ---- programs ------------------------------------------------------------------------------------------ */
struct FcProgram {
    FcErr err;
    FcBlock *blk;
    const KirProgram *prog;  /* what runs (the block owns it) */
    FcDevice *dev;
    RtCpuProgram *cpu;
    RtCudaProgram *cuda;
    /* training: the backward, the saved buffers the forward writes, and the tensors of the
     * last forward (the saved inputs and outputs are read from them by the backward) */
    const KirProgram *bprog;
    RtCpuProgram *bcpu;
    RtCudaProgram *bcuda;
    FcTensor **saved;        /* [plan buffers] */
    int nsaved;
    FcTensor **last_in, **last_out;
    bool have_forward;       /* a forward ran since the program was made */
    /* dynamic loss scaling (fc_program_set_loss_scaling): the scale (0: off), the growth
     * interval, finite backward passes in a row, passes run again, the scaled gradients */
    double ls_scale;
    int ls_interval, ls_good, ls_backoffs;
    FcTensor **ls_gout;
    int64_t ws_counted;      /* workspace bytes counted on the device */
    FcTensor *fp8;           /* --precision f8: the delayed-scaling state (kir.h KIR_BUF_STATE), f32
                              * [slots * KIR_FP8_STRIDE] on the device, kept between runs; NULL: none */
    bool unusable;
};

/* ---- f8 scaling state (--precision f8; docs/precision.md "f8") ----------------------------------- */
static bool pow2_scale(double s) {
    int e;
    return s > 0 && isfinite(s) && frexp(s, &e) == 0.5 && s >= 0x1p-126 && s <= 0x1p126;
}
static void graph_set_scales(const IrGraph *cg, const double *s) {
    IrGraph *g = (IrGraph *)cg;   /* the block's own graphs */
    for (int k = 0; g && k < g->fp8.len; k++) g->fp8.data[k].scale = s[k];
}
static void unit_set_scales(Unit *u, const double *s) {
    graph_set_scales(u->graph, s);
    graph_set_scales(u->res.graph, s);
    graph_set_scales(u->res_cpu.graph, s);
    graph_set_scales(u->res_gen.graph, s);
    for (int i = 0; i < u->n_res_dev; i++) graph_set_scales(u->res_dev[i].graph, s);
}

static void block_apply_scales(FcBlock *b, const double *scales) {
    graph_set_scales(b->src, scales);
    graph_set_scales(b->joint.graph, scales);
    graph_set_scales(b->plan.fwd, scales);
    graph_set_scales(b->plan.bwd, scales);
    unit_set_scales(&b->fwd, scales);
    unit_set_scales(&b->bwd, scales);
}

int fc_block_num_fp8_slots(const FcBlock *b) { return b && b->src ? b->src->fp8.len : 0; }

FcStatus fc_block_fp8_slot_dtype(FcBlock *b, int k, FcDtype *dtype) {
    if (!b || !dtype) return FC_ERR_USAGE;
    if (!block_ready(b)) return fc_err_set(&b->err, FC_ERR_USAGE, "the block did not compile");
    if (k < 0 || k >= b->src->fp8.len)
        return fc_err_set(&b->err, FC_ERR_USAGE, "fc_block_fp8_slot_dtype: slot %d; the block has %d f8 slots", k,
                          b->src->fp8.len);
    *dtype = b->src->fp8.data[k].fmt;
    return FC_OK;
}

FcStatus fc_block_set_fp8_scales(FcBlock *b, const double *scales, int n) {
    if (!b) return FC_ERR_USAGE;
    if (!block_ready(b)) return fc_err_set(&b->err, FC_ERR_USAGE, "the block did not compile");
    if (n != b->src->fp8.len || (n > 0 && !scales))
        return fc_err_set(&b->err, FC_ERR_USAGE, "fc_block_set_fp8_scales: the block has %d f8 slots; got %d scales",
                          b->src->fp8.len, n);
    for (int k = 0; k < n; k++)
        if (!pow2_scale(scales[k]))
            return fc_err_set(&b->err, FC_ERR_USAGE, "fc_block_set_fp8_scales: scale %d is %g, not a power of two in "
                              "[2^-126, 2^126]", k, scales[k]);
    block_apply_scales(b, scales);
    return FC_OK;
}

/* The slot whose scale block input i's tensor carries (an f8 tensor at the interface), -1 none. */
static int input_slot(const IrGraph *g, int i) {
    for (int k = 0; k < g->fp8.len; k++)
        if (g->fp8.data[k].input == i) return k;
    return -1;
}

/* The block's graphs given the scales the f8 input tensors carry: the reference interpreter's
 * runs (the reference device, --check, calibration, tolerances) read them there. */
static FcStatus block_take_input_scales(FcBlock *b, FcTensor *const *inputs) {
    const IrGraph *g = b->src;
    bool differ = false;
    for (int k = 0; k < g->fp8.len; k++) {
        int i = g->fp8.data[k].input;
        differ |= i >= 0 && inputs[i] && inputs[i]->scale != g->fp8.data[k].scale;
    }
    if (!differ) return FC_OK;
    double *sc = fc_calloc((size_t)g->fp8.len, sizeof *sc);
    if (!sc) return FC_OOM(&b->err);
    for (int k = 0; k < g->fp8.len; k++) {
        int i = g->fp8.data[k].input;
        sc[k] = i >= 0 && inputs[i] ? inputs[i]->scale : g->fp8.data[k].scale;
    }
    block_apply_scales(b, sc);
    fc_free(sc);
    return FC_OK;
}

/* The state of a new program: every slot's scale the block's (1 unless fc_block_set_fp8_scales
 * set others), no amax yet; bound to its kernel programs. */
static FcStatus program_fp8_state(FcProgram *p) {
    const IrGraph *g = p->blk->src;
    int n = g->fp8.len;
    if (n == 0 || p->dev->kind == FC_DEVICE_REFERENCE) return FC_OK;
    int64_t dims[1] = {(int64_t)n * KIR_FP8_STRIDE};
    float *init = fc_calloc((size_t)dims[0], sizeof *init);
    if (!init) return FC_OOM(&p->err);
    for (int k = 0; k < n; k++) init[k * KIR_FP8_STRIDE] = (float)g->fp8.data[k].scale;
    FcStatus s = fc_tensor_new(p->dev, FC_F32, 1, dims, &p->fp8);
    if (s == FC_OK) s = fc_tensor_copy_from_host(p->fp8, init, (size_t)dims[0] * sizeof *init);
    fc_free(init);
    if (s != FC_OK) return fc_err_set(&p->err, s, "allocating the f8 scaling state: %s", p->dev->err.msg);
    if (p->cpu) rt_cpu_set_state(p->cpu, p->fp8->data);
    if (p->bcpu) rt_cpu_set_state(p->bcpu, p->fp8->data);
    if (p->cuda) rt_cuda_set_state(p->cuda, p->fp8->data);
    if (p->bcuda) rt_cuda_set_state(p->bcuda, p->fp8->data);
    return FC_OK;
}

/* The scale delayed scaling sets from a history whose largest magnitude is m (the update kernel's
 * rule, passes/lower.c lower_fp8_update, in the same f32 arithmetic): the largest power of two s
 * with s * m <= fmax, at most 2^126; `old` where m is 0 or not finite. */
static double fp8_scale_for(double amax, FcDtype fmt, double old) {
    float m = (float)amax, F = fmt == FC_F8E4M3 ? 448.0f : 57344.0f, sc = 1.0f;
    if (!(m > 0) || !(m < INFINITY)) return old;
    for (int i = 0; i < 160; i++) sc = sc * m > F ? sc * 0.5f : sc;
    for (int i = 0; i < 126; i++) sc = sc * 2.0f * m <= F ? sc * 2.0f : sc;
    return sc;
}

/* One pass of calibration: each slot's largest magnitude so far (seen, grown by this pass's
 * amax: the history's maximum) gives its scale, for the slots `only` marks (every slot when
 * NULL; the others keep theirs); the block takes the scales (sc, room for every slot) when one
 * changed, and *changed says whether one did. */
static FcStatus calibrate_pass(FcBlock *b, const double *amax, double *seen, double *sc, const bool *only, bool *changed) {
    const IrGraph *g = b->src;
    *changed = false;
    for (int k = 0; k < g->fp8.len; k++) {
        sc[k] = g->fp8.data[k].scale;
        if (only && !only[k]) continue;
        if (isnan(amax[k]) || amax[k] > seen[k]) seen[k] = amax[k];
        sc[k] = fp8_scale_for(seen[k], g->fp8.data[k].fmt, g->fp8.data[k].scale);
        *changed |= sc[k] != g->fp8.data[k].scale;
    }
    return *changed ? fc_block_set_fp8_scales(b, sc, g->fp8.len) : FC_OK;
}

FcStatus fc_block_calibrate_fp8(FcBlock *b, FcTensor *const *inputs) {
    if (!b) return FC_ERR_USAGE;
    if (!block_ready(b)) return fc_err_set(&b->err, FC_ERR_USAGE, "the block did not compile");
    const IrGraph *g = b->src;
    int n = g->fp8.len, nin = g->inputs.len;
    if (n == 0) return FC_OK;
    if (nin && !inputs) return fc_err_set(&b->err, FC_ERR_USAGE, "fc_block_calibrate_fp8: inputs are required");
    for (int i = 0; i < nin; i++) {
        const IrValue *x = ir_cval(g, g->inputs.data[i]);
        if (!inputs[i] || inputs[i]->dtype != x->dtype || !ir_shape_eq(&inputs[i]->shape, &x->shape))
            return fc_err_set(&b->err, FC_ERR_USAGE, "fc_block_calibrate_fp8: input %d ('%s') is missing or does not "
                              "match the block", i, x->name);
    }
    FC_TRY(block_take_input_scales(b, inputs));
    void **h = fc_calloc((size_t)nin + 1, sizeof *h);
    double *amax = fc_calloc((size_t)n, sizeof *amax), *sc = fc_calloc((size_t)n, sizeof *sc);
    FcStatus s = h && amax && sc ? FC_OK : FC_OOM(&b->err);
    int fetched = 0;
    for (int i = 0; s == FC_OK && i < nin; i++)
        if ((s = host_begin(inputs[i], true, &h[i])) == FC_OK) fetched = i + 1;
    /* to a fixed point: a slot's tensor depends on the slots before it, which may saturate at
     * the scales of the pass before (a chain of n slots settles in at most n + 1 passes); each
     * slot's amax is the largest of every pass's, as delayed scaling's history keeps it, so the
     * scales only fall and the passes end */
    double *seen = fc_calloc((size_t)n, sizeof *seen);
    if (s == FC_OK && !seen) s = FC_OOM(&b->err);
    bool changed = true;
    for (int pass = 0; pass <= n + 1 && changed && s == FC_OK; pass++) {
        s = rt_interp_fp8_amax(g, (const void *const *)h, amax, &b->err);
        if (s == FC_OK) s = calibrate_pass(b, amax, seen, sc, NULL, &changed);
    }
    fc_free(seen);
    for (int i = 0; i < fetched; i++) host_end(inputs[i], h[i], false);
    fc_free(h);
    fc_free(amax);
    fc_free(sc);
    return block_fail(b, s);
}

FcStatus fc_block_calibrate_fp8_grads(FcBlock *b, FcTensor *const *inputs, FcTensor *const *grad_outputs) {
    if (!b) return FC_ERR_USAGE;
    if (!block_ready(b)) return fc_err_set(&b->err, FC_ERR_USAGE, "the block did not compile");
    if (!b->train)
        return fc_err_set(&b->err, FC_ERR_USAGE, "fc_block_calibrate_fp8_grads: block '%s' was not compiled for training "
                          "(--train)", b->src->name);
    const IrGraph *g = b->src;
    int n = g->fp8.len, nin = g->inputs.len, nout = g->outputs.len;
    if (nout && !grad_outputs)
        return fc_err_set(&b->err, FC_ERR_USAGE, "fc_block_calibrate_fp8_grads: grad_outputs are required");
    for (int j = 0; j < nout; j++) {
        const IrValue *y = ir_cval(g, g->outputs.data[j]);
        if (ir_dtype_is_float(y->dtype) && (!grad_outputs[j] || grad_outputs[j]->dtype != y->dtype ||
                                            !ir_shape_eq(&grad_outputs[j]->shape, &y->shape)))
            return fc_err_set(&b->err, FC_ERR_USAGE, "fc_block_calibrate_fp8_grads: the gradient of output %d ('%s') is "
                              "missing or does not match it", j, g->output_names.data[j]);
    }
    FC_TRY(fc_block_calibrate_fp8(b, inputs));   /* the values' scales first: the backward reads them */
    if (n == 0) return FC_OK;
    void **h = fc_calloc((size_t)nin + 1, sizeof *h);
    double **go = fc_calloc((size_t)nout + 1, sizeof *go);
    double *amax = fc_calloc((size_t)n, sizeof *amax), *sc = fc_calloc((size_t)n, sizeof *sc);
    double *seen = fc_calloc((size_t)n, sizeof *seen);
    bool *is_grad = fc_calloc((size_t)n, sizeof *is_grad);
    FcStatus s = h && go && amax && sc && seen && is_grad ? FC_OK : FC_OOM(&b->err);
    for (int k = 0; s == FC_OK && k < n; k++)
        if (g->fp8.data[k].grad >= 0) is_grad[g->fp8.data[k].grad] = true;
    int fetched = 0;
    for (int i = 0; s == FC_OK && i < nin; i++)
        if ((s = host_begin(inputs[i], true, &h[i])) == FC_OK) fetched = i + 1;
    for (int j = 0; s == FC_OK && j < nout; j++) {
        const IrValue *y = ir_cval(g, g->outputs.data[j]);
        if (!ir_dtype_is_float(y->dtype)) continue;
        int64_t m = grad_outputs[j]->nbytes / (int64_t)fc_dtype_size(y->dtype);
        void *hg = NULL;
        if (!(go[j] = fc_calloc((size_t)m + 1, sizeof(double)))) s = FC_OOM(&b->err);
        if (s == FC_OK && (s = host_begin(grad_outputs[j], true, &hg)) == FC_OK) {
            for (int64_t e = 0; e < m; e++) go[j][e] = tensor_value(grad_outputs[j], hg, e);
            host_end(grad_outputs[j], hg, false);
        }
    }
    /* to a fixed point, as the values' scales: a gradient computed from one that saturated
     * grows once that one's scale falls */
    bool changed = true;
    for (int pass = 0; pass <= n + 1 && changed && s == FC_OK; pass++) {
        s = rt_interp_grad_fp8_amax(g, (const void *const *)h, (const double *const *)go, amax, &b->err);
        if (s == FC_OK) s = calibrate_pass(b, amax, seen, sc, is_grad, &changed);
    }
    for (int i = 0; i < fetched; i++) host_end(inputs[i], h[i], false);
    for (int j = 0; go && j < nout; j++) fc_free(go[j]);
    fc_free(h);
    fc_free(go);
    fc_free(amax);
    fc_free(sc);
    fc_free(seen);
    fc_free(is_grad);
    return block_fail(b, s);
}

/* A copy of p's f8 state on the host (*out, the caller frees it). */
static FcStatus fp8_state_to_host(FcProgram *p, float **out) {
    size_t nf = (size_t)p->blk->src->fp8.len * KIR_FP8_STRIDE;
    float *h = fc_calloc(nf, sizeof *h);
    if (!h) return FC_OOM(&p->err);
    FcStatus s = fc_tensor_copy_to_host(p->fp8, h, nf * sizeof *h);
    if (s != FC_OK) {
        fc_free(h);
        return fc_err_set(&p->err, s, "reading the f8 scaling state: %s", fc_tensor_last_error(p->fp8));
    }
    *out = h;
    return FC_OK;
}

/* f8: the block's scales set to those p's next run will use (its first launch, fp8_update,
 * applies this rule to the state: the last run's amax pushed into the history, each scale from
 * the history's largest), so that a reference computed before that run rounds as it will. */
static FcStatus program_sync_next_scales(FcProgram *p) {
    const IrGraph *g = p->blk->src;
    int n = g->fp8.len;
    if (!p->fp8 || n == 0) return FC_OK;
    float *h = NULL;
    double *sc = fc_calloc((size_t)n, sizeof *sc);
    FcStatus s = sc ? fp8_state_to_host(p, &h) : FC_OOM(&p->err);
    for (int k = 0; s == FC_OK && k < n; k++) {
        const float *st = h + (size_t)k * KIR_FP8_STRIDE;
        float m = st[1];   /* this run's amax, then the history but its oldest */
        for (int j = 0; j < KIR_FP8_HISTORY - 1; j++) m = isnan(m) || isnan(st[2 + j]) ? NAN : st[2 + j] > m ? st[2 + j] : m;
        sc[k] = fp8_scale_for(m, g->fp8.data[k].fmt, st[0]);
    }
    if (s == FC_OK && (s = fc_block_set_fp8_scales(p->blk, sc, n)) != FC_OK && s != FC_ERR_NOMEM)
        s = fc_err_set(&p->err, s, "f8 scales: %s", p->blk->err.msg);
    fc_free(h);
    fc_free(sc);
    return s;
}

FcStatus fc_program_fp8_scales(FcProgram *p, double *scales, int n) {
    if (!p) return FC_ERR_USAGE;
    const IrGraph *g = p->blk->src;
    if (n != g->fp8.len || (n > 0 && !scales))
        return fc_err_set(&p->err, FC_ERR_USAGE, "fc_program_fp8_scales: the block has %d f8 slots; got room for %d",
                          g->fp8.len, n);
    if (!p->fp8) {   /* the reference device: the block's */
        for (int k = 0; k < n; k++) scales[k] = g->fp8.data[k].scale;
        return FC_OK;
    }
    float *h = NULL;
    FcStatus s = fp8_state_to_host(p, &h);
    for (int k = 0; s == FC_OK && k < n; k++) scales[k] = h[k * KIR_FP8_STRIDE];
    fc_free(h);
    return s;
}

/* The kernel program of unit u for device d. */
static FcStatus unit_program(FcBlock *b, Unit *u, FcDevice *d, const KirProgram **out) {
    if (d->kind == FC_DEVICE_CPU) return block_cpu_program(b, u, out);
    /* CUDA: matrix products through cuBLASLt when it loads (the program of --emit cuda), else
     * (or with FUSEC_CUDA_GEMM=generated) the generated tiled kernels; lowered for the GPU's
     * own compute capability (its shared-memory budget) */
    const char *e = getenv("FUSEC_CUDA_GEMM");
    bool lib = !(e && strcmp(e, "generated") == 0) && rt_lt_available(NULL, 0);
    int major = 0, minor = 0;
    rt_cuda_compute_capability(d->cuda, &major, &minor);
    int sm = major * 10 + minor;
    *out = u->prog;
    if (sm != b->popt.sm) return block_dev_program(b, u, sm, lib, out);
    if (!lib) return block_gen_program(b, u, out);
    return FC_OK;
}

static FcStatus program_load(FcProgram *p, Unit *u, const KirProgram **kp, RtCpuProgram **cpu, RtCudaProgram **cuda) {
    FcBlock *b = p->blk;
    FcDevice *d = p->dev;
    if (d->kind == FC_DEVICE_REFERENCE) return FC_OK;
    FcStatus s = unit_program(b, u, d, kp);
    if (s != FC_OK) return fc_err_set(&p->err, s, "%s", b->err.msg);
    if (d->kind == FC_DEVICE_CPU) s = rt_cpu_compile(*kp, d->nthreads, cpu, &p->err);
    else s = rt_cuda_compile(d->cuda, *kp, cuda, NULL, &p->err);
    if (s == FC_ERR_INTERNAL) p->unusable = true;
    return s;
}

/* The saved buffers of a training program, on its device. */
static FcStatus program_saved(FcProgram *p) {
    FcBlock *b = p->blk;
    const IrGraph *f = b->plan.fwd;
    int n = f->outputs.len - b->src->outputs.len;
    p->saved = fc_calloc((size_t)n + 1, sizeof *p->saved);
    p->last_in = fc_calloc((size_t)b->src->inputs.len + 1, sizeof *p->last_in);
    p->last_out = fc_calloc((size_t)b->src->outputs.len + 1, sizeof *p->last_out);
    if (!p->saved || !p->last_in || !p->last_out) return FC_OOM(&p->err);
    for (int k = 0; k < n; k++) {
        const IrValue *x = ir_cval(f, f->outputs.data[b->src->outputs.len + k]);
        FcStatus s = fc_tensor_new(p->dev, x->dtype, x->shape.rank, x->shape.dims, &p->saved[k]);
        if (s != FC_OK) return fc_err_set(&p->err, s, "allocating the saved values: %s", p->dev->err.msg);
        p->nsaved = k + 1;
    }
    return FC_OK;
}

FcStatus fc_program_new(FcBlock *b, FcDevice *d, FcProgram **out) {
    if (!out) return FC_ERR_USAGE;
    *out = NULL;
    if (!b || !d) return FC_ERR_USAGE;
    if (!block_ready(b)) return fc_err_set(&b->err, FC_ERR_USAGE, "the block did not compile");
    FcProgram *p = fc_calloc(1, sizeof *p);
    *out = p;
    if (!p) return FC_ERR_NOMEM;
    p->blk = b;
    p->dev = d;
    FC_TRY(program_load(p, &b->fwd, &p->prog, &p->cpu, &p->cuda));
    if (p->prog) dev_count(d, p->ws_counted = p->prog->workspace_bytes);
    if (!b->train) return program_fp8_state(p);
    FC_TRY(program_load(p, &b->bwd, &p->bprog, &p->bcpu, &p->bcuda));
    if (p->bprog) {
        /* the forward's and the backward's temporaries share one workspace on the CPU */
        int64_t wb = p->bprog->workspace_bytes, more = wb;
        if (d->kind == FC_DEVICE_CPU) {
            rt_cpu_share(p->cpu, p->bcpu);
            more = wb > p->ws_counted ? wb - p->ws_counted : 0;
        }
        dev_count(d, more);
        p->ws_counted += more;
    }
    FC_TRY(program_fp8_state(p));
    if (d->kind == FC_DEVICE_REFERENCE) {
        p->last_in = fc_calloc((size_t)b->src->inputs.len + 1, sizeof *p->last_in);
        p->last_out = fc_calloc((size_t)b->src->outputs.len + 1, sizeof *p->last_out);
        return p->last_in && p->last_out ? FC_OK : FC_OOM(&p->err);
    }
    return program_saved(p);
}
void fc_program_free(FcProgram *p) {
    if (!p) return;
    dev_count(p->dev, -p->ws_counted);
    rt_cpu_free(p->bcpu);   /* before the forward's: it may use the forward's pool */
    rt_cuda_program_free(p->bcuda);
    rt_cpu_free(p->cpu);
    rt_cuda_program_free(p->cuda);
    for (int k = 0; k < p->nsaved; k++) fc_tensor_free(p->saved[k]);
    fc_free(p->saved);
    fc_tensor_free(p->fp8);
    for (int j = 0; p->ls_gout && j < p->blk->src->outputs.len; j++) fc_tensor_free(p->ls_gout[j]);
    fc_free(p->ls_gout);
    fc_free(p->last_in);
    fc_free(p->last_out);
    fc_free(p);
}
const char *fc_program_last_error(const FcProgram *p) { return p ? p->err.msg : "no program handle"; }

static FcStatus check_args(FcProgram *p, FcTensor *const *inputs, FcTensor *const *outputs) {
    const IrGraph *g = p->blk->src;
    if ((g->inputs.len && !inputs) || (g->outputs.len && !outputs))
        return fc_err_set(&p->err, FC_ERR_USAGE, "inputs and outputs arrays are required");
    for (int i = 0; i < g->inputs.len + g->outputs.len; i++) {
        bool isin = i < g->inputs.len;
        int j = isin ? i : i - g->inputs.len;
        const FcTensor *t = isin ? inputs[j] : outputs[j];
        int v = isin ? g->inputs.data[j] : g->outputs.data[j];
        const IrValue *x = ir_cval(g, v);
        const char *name = isin ? x->name : g->output_names.data[j];
        if (!t) return fc_err_set(&p->err, FC_ERR_USAGE, "%s %d ('%s') is NULL", isin ? "input" : "output", j, name);
        if (t->dev != p->dev && !(p->dev->kind != FC_DEVICE_CUDA && t->dev->kind != FC_DEVICE_CUDA)) {
            return fc_err_set(&p->err, FC_ERR_USAGE, "%s '%s' lives on another device", isin ? "input" : "output", name);
        }
        if (t->dtype != x->dtype || !ir_shape_eq(&t->shape, &x->shape)) {
            char want[256], got[256];
            ir_type_str(x->dtype, &x->shape, want, sizeof want);
            ir_type_str(t->dtype, &t->shape, got, sizeof got);
            return fc_err_set(&p->err, FC_ERR_INPUT, "%s '%s' must be %s; got %s", isin ? "input" : "output", name, want, got);
        }
    }
    return FC_OK;
}

/* The forward's buffers: in[i] and out[j] (4096 each) the data of inputs[i] and outputs[j],
 * then (training) the saved buffers. */
static FcStatus forward_bind(FcProgram *p, FcTensor *const *inputs, FcTensor *const *outputs, void **in, void **out) {
    const IrGraph *g = p->blk->src;
    if (g->inputs.len > 4096 || g->outputs.len > 4096)
        return fc_err_set(&p->err, FC_ERR_UNSUPPORTED, "more than 4096 inputs or outputs");
    for (int i = 0; i < g->inputs.len; i++) in[i] = inputs[i]->stage ? inputs[i]->stage : inputs[i]->data;
    for (int j = 0; j < g->outputs.len; j++) out[j] = outputs[j]->stage ? outputs[j]->stage : outputs[j]->data;
    if (p->nsaved > 4096 - g->outputs.len) return fc_err_set(&p->err, FC_ERR_UNSUPPORTED, "more than 4096 saved values");
    for (int k = 0; k < p->nsaved; k++) out[g->outputs.len + k] = p->saved[k]->data;
    return FC_OK;
}

/* Runs the forward (launch < 0) or one of its launches on bound buffers. */
static FcStatus forward_once(FcProgram *p, void **in, void **out, int launch) {
    const IrGraph *g = p->blk->src;
    FcStatus s;
    switch (p->dev->kind) {
    case FC_DEVICE_CPU:
        s = launch < 0 ? rt_cpu_run(p->cpu, in, out, &p->err) : rt_cpu_run_launch(p->cpu, launch, in, out, &p->err);
        break;
    case FC_DEVICE_REFERENCE:
        s = rt_interp_run(g, (const void *const *)in, out, &p->err);
        break;
    case FC_DEVICE_CUDA:
        s = launch < 0 ? rt_cuda_run(p->cuda, in, out, &p->err)
                       : rt_cuda_run_launch(p->cuda, launch, in, out, NULL, &p->err);
        break;
    default:
        s = fc_err_set(&p->err, FC_ERR_USAGE, "unknown device");
    }
    if (s == FC_ERR_INTERNAL) p->unusable = true;
    return s;
}

static FcStatus run_once(FcProgram *p, FcTensor *const *inputs, FcTensor *const *outputs, int launch) {
    void *in[4096], *out[4096];
    FC_TRY(forward_bind(p, inputs, outputs, in, out));
    return forward_once(p, in, out, launch);
}

/* f8 at the interface (docs/precision.md "f8"): the scales the input tensors carry into the
 * program's state, where its kernels read them (on the reference device into the block's graphs);
 * an f8 input the source declared has no scale (its tensor's must be 1). */
static FcStatus put_input_scales(FcProgram *p, FcTensor *const *inputs) {
    const IrGraph *g = p->blk->src;
    for (int i = 0; i < g->inputs.len; i++)
        if (is_f8(inputs[i]->dtype) && inputs[i]->scale != 1 && input_slot(g, i) < 0)
            return fc_err_set(&p->err, FC_ERR_USAGE, "input '%s' is %s as the source declares it, without a scale: its "
                              "tensor's scale must be 1, not %g", ir_cval(g, g->inputs.data[i])->name,
                              fc_dtype_name(inputs[i]->dtype), inputs[i]->scale);
    if (!p->fp8) return block_take_input_scales(p->blk, inputs);
    for (int k = 0; k < g->fp8.len; k++) {
        int i = g->fp8.data[k].input;
        if (i < 0) continue;
        float f = (float)inputs[i]->scale;
        size_t off = (size_t)k * KIR_FP8_STRIDE * sizeof f;
        if (p->dev->kind == FC_DEVICE_CUDA)
            FC_TRY(rt_cuda_copy_htod(p->dev->cuda, (char *)p->fp8->data + off, &f, sizeof f, &p->err));
        else
            memcpy((char *)p->fp8->data + off, &f, sizeof f);
    }
    return FC_OK;
}
/* ... and after a run, each f8 output tensor the scale its values were stored with (1 for an f8
 * output the source declared). */
static FcStatus take_output_scales(FcProgram *p, FcTensor *const *outputs) {
    const IrGraph *g = p->blk->src;
    for (int j = 0; j < g->outputs.len; j++) {
        if (!is_f8(outputs[j]->dtype)) continue;
        int k = ir_fp8_slot_of(g, g->outputs.data[j]);
        float f = 1;
        if (k >= 0 && !p->fp8) {
            f = (float)g->fp8.data[k].scale;
        } else if (k >= 0) {
            size_t off = (size_t)k * KIR_FP8_STRIDE * sizeof f;
            if (p->dev->kind == FC_DEVICE_CUDA)
                FC_TRY(rt_cuda_copy_dtoh(p->dev->cuda, &f, (char *)p->fp8->data + off, sizeof f, &p->err));
            else
                memcpy(&f, (char *)p->fp8->data + off, sizeof f);
        }
        outputs[j]->scale = f;
    }
    return FC_OK;
}

/* Misaligned wrapped tensors (fc_tensor_wrap): inputs into their aligned copies before a run,
 * outputs back out of theirs after it. With them, the scales of f8 tensors. */
static FcStatus stage_inputs(FcProgram *p, FcTensor *const *inputs) {
    for (int i = 0; i < p->blk->src->inputs.len; i++)
        if (inputs[i]->stage) FC_TRY(stage_copy(inputs[i], true, &p->err));
    return put_input_scales(p, inputs);
}
static FcStatus unstage_outputs(FcProgram *p, FcTensor *const *outputs) {
    for (int j = 0; j < p->blk->src->outputs.len; j++)
        if (outputs[j]->stage) FC_TRY(stage_copy(outputs[j], false, &p->err));
    return take_output_scales(p, outputs);
}

/* After a forward: the outputs out of their staging copies, and in training the tensors the
 * backward reads. */
static FcStatus forward_done(FcProgram *p, FcTensor *const *inputs, FcTensor *const *outputs) {
    FC_TRY(unstage_outputs(p, outputs));
    if (p->blk->train) {
        const IrGraph *g = p->blk->src;
        for (int i = 0; i < g->inputs.len; i++) p->last_in[i] = inputs[i];
        for (int j = 0; j < g->outputs.len; j++) p->last_out[j] = outputs[j];
        p->have_forward = true;
    }
    return FC_OK;
}

FcStatus fc_program_run(FcProgram *p, FcTensor *const *inputs, FcTensor *const *outputs) {
    if (!p) return FC_ERR_USAGE;
    if (p->unusable) return fc_err_set(&p->err, FC_ERR_INTERNAL, "this program hit an internal error earlier");
    FC_TRY(check_args(p, inputs, outputs));
    FC_TRY(stage_inputs(p, inputs));
    p->have_forward = false;
    FC_TRY(run_once(p, inputs, outputs, -1));
    return forward_done(p, inputs, outputs);
}

static void *tdata(const FcTensor *t) { return t->stage ? t->stage : t->data; }
static double now_ms(void);
static double median(double *v, int n);

/* Checks one gradient tensor against the value it is the gradient of. */
static FcStatus check_grad(FcProgram *p, const FcTensor *t, const IrValue *x, const char *what, const char *name) {
    if (!t) return fc_err_set(&p->err, FC_ERR_USAGE, "%s of '%s' is NULL", what, name);
    if (t->dev != p->dev && !(p->dev->kind != FC_DEVICE_CUDA && t->dev->kind != FC_DEVICE_CUDA))
        return fc_err_set(&p->err, FC_ERR_USAGE, "%s of '%s' lives on another device", what, name);
    if (t->dtype != x->dtype || !ir_shape_eq(&t->shape, &x->shape)) {
        char want[256], got[256];
        ir_type_str(x->dtype, &x->shape, want, sizeof want);
        ir_type_str(t->dtype, &t->shape, got, sizeof got);
        return fc_err_set(&p->err, FC_ERR_INPUT, "%s of '%s' must be %s; got %s", what, name, want, got);
    }
    return FC_OK;
}

/* The backward's arguments: the saved values, then the outputs' gradients (in[]); the float
 * inputs' gradients (out[]); misaligned wrapped gradients staged. */
static FcStatus backward_bind(FcProgram *p, FcTensor *const *grad_outputs, FcTensor *const *grad_inputs, void **in,
                              void **out) {
    if (p->unusable) return fc_err_set(&p->err, FC_ERR_INTERNAL, "this program hit an internal error earlier");
    FcBlock *b = p->blk;
    if (!b->train) return fc_err_set(&p->err, FC_ERR_USAGE, "block '%s' was not compiled for training (--train)", b->src->name);
    if (!p->have_forward) return fc_err_set(&p->err, FC_ERR_USAGE, "the backward needs a forward run (fc_program_run) first");
    const IrGraph *g = b->src;
    if ((g->outputs.len && !grad_outputs) || (g->inputs.len && !grad_inputs))
        return fc_err_set(&p->err, FC_ERR_USAGE, "grad_outputs and grad_inputs arrays are required");
    int nin = 0, nout = 0;
    if (b->plan.saved.len + g->outputs.len > 4096 || g->inputs.len > 4096)
        return fc_err_set(&p->err, FC_ERR_UNSUPPORTED, "more than 4096 saved values and gradients");
    for (int k = 0; k < b->plan.saved.len; k++) {
        const RematSaved *sv = &b->plan.saved.data[k];
        in[nin++] = sv->kind == REMAT_SAVED_INPUT ? tdata(p->last_in[sv->index])
                  : sv->kind == REMAT_SAVED_OUTPUT ? tdata(p->last_out[sv->index])
                  : p->saved ? p->saved[sv->index]->data : NULL;
    }
    for (int j = 0; j < g->outputs.len; j++) {
        const IrValue *y = ir_cval(g, g->outputs.data[j]);
        if (!ir_dtype_is_float(y->dtype)) continue;
        FC_TRY(check_grad(p, grad_outputs[j], y, "the gradient", g->output_names.data[j]));
        if (grad_outputs[j]->stage) FC_TRY(stage_copy(grad_outputs[j], true, &p->err));
        in[nin++] = tdata(grad_outputs[j]);
    }
    for (int i = 0; i < g->inputs.len; i++) {
        const IrValue *x = ir_cval(g, g->inputs.data[i]);
        if (!ir_dtype_is_float(x->dtype)) continue;
        FC_TRY(check_grad(p, grad_inputs[i], x, "the gradient tensor", x->name));
        out[nout++] = tdata(grad_inputs[i]);
    }
    return FC_OK;
}

/* Runs the backward (launch < 0) or one of its launches. */
static FcStatus backward_once(FcProgram *p, void **in, void **out, int launch) {
    FcStatus s;
    switch (p->dev->kind) {
    case FC_DEVICE_CPU:
        s = launch < 0 ? rt_cpu_run(p->bcpu, in, out, &p->err) : rt_cpu_run_launch(p->bcpu, launch, in, out, &p->err);
        break;
    case FC_DEVICE_CUDA:
        s = launch < 0 ? rt_cuda_run(p->bcuda, in, out, &p->err)
                       : rt_cuda_run_launch(p->bcuda, launch, in, out, NULL, &p->err);
        break;
    default: s = fc_err_set(&p->err, FC_ERR_UNSUPPORTED, "the backward on the reference device is not supported yet"); break;
    }
    if (s == FC_ERR_INTERNAL) p->unusable = true;
    return s;
}

static FcStatus backward_unstage(FcProgram *p, FcTensor *const *grad_inputs) {
    const IrGraph *g = p->blk->src;
    for (int i = 0; i < g->inputs.len; i++)
        if (ir_dtype_is_float(ir_cval(g, g->inputs.data[i])->dtype) && grad_inputs[i]->stage)
            FC_TRY(stage_copy(grad_inputs[i], false, &p->err));
    return FC_OK;
}

/* The reference device's backward: the interpreter's own f64 backward (rt_interp_grad) on the
 * source graph, its gradients rounded to the inputs' dtypes. */
static FcStatus reference_backward(FcProgram *p, FcTensor *const *grad_outputs, FcTensor *const *grad_inputs) {
    const IrGraph *g = p->blk->src;
    int nin = g->inputs.len, nout = g->outputs.len;
    const void **in = fc_calloc((size_t)nin + 1, sizeof *in);
    double **go = fc_calloc((size_t)nout + 1, sizeof *go), **gi = fc_calloc((size_t)nin + 1, sizeof *gi);
    FcStatus s = in && go && gi ? FC_OK : FC_OOM(&p->err);
    for (int i = 0; i < nin && s == FC_OK; i++) {
        in[i] = tdata(p->last_in[i]);
        const IrValue *x = ir_cval(g, g->inputs.data[i]);
        if (!ir_dtype_is_float(x->dtype)) continue;
        if (!(gi[i] = fc_calloc((size_t)(p->last_in[i]->nbytes / (int64_t)fc_dtype_size(x->dtype)) + 1, sizeof(double))))
            s = FC_OOM(&p->err);
    }
    if (s == FC_OK) s = grads_f64(g, grad_outputs, go, &p->err);
    if (s == FC_OK) s = rt_interp_grad(g, in, NULL, (const double *const *)go, gi, &p->err);
    for (int i = 0; i < nin && s == FC_OK; i++)
        if (gi[i]) {
            FcTensor *t = grad_inputs[i];
            rt_host_convert(t->dtype, tdata(t), FC_F64, gi[i], t->nbytes / (int64_t)fc_dtype_size(t->dtype));
        }
    for (int i = 0; gi && i < nin; i++) fc_free(gi[i]);
    for (int j = 0; go && j < nout; j++) fc_free(go[j]);
    fc_free(gi);
    fc_free(go);
    fc_free(in);
    if (s == FC_ERR_INTERNAL) p->unusable = true;
    return s;
}

static FcStatus backward_plain(FcProgram *p, FcTensor *const *grad_outputs, FcTensor *const *grad_inputs) {
    void *in[4096], *out[4096];
    FC_TRY(backward_bind(p, grad_outputs, grad_inputs, in, out));
    if (p->dev->kind == FC_DEVICE_REFERENCE) FC_TRY(reference_backward(p, grad_outputs, grad_inputs));
    else FC_TRY(backward_once(p, in, out, -1));
    return backward_unstage(p, grad_inputs);
}

/* Whether every element of t is finite (integers and bools are). */
static FcStatus all_finite(const FcTensor *t, bool *finite) {
    *finite = true;
    if (!ir_dtype_is_float(t->dtype)) return FC_OK;
    void *h = NULL;
    FC_TRY(host_begin(t, true, &h));
    int64_t n = t->nbytes / (int64_t)fc_dtype_size(t->dtype);
    for (int64_t i = 0; i < n && *finite; i++) *finite = isfinite(rt_host_load(t->dtype, h, i));
    host_end((FcTensor *)t, h, false);
    return FC_OK;
}

/* p->ls_gout[j] = grad_outputs[j] times the loss scale, for each float output. */
static FcStatus scale_seeds(FcProgram *p, FcTensor *const *grad_outputs) {
    const IrGraph *g = p->blk->src;
    int nout = g->outputs.len;
    if (nout && !grad_outputs) return fc_err_set(&p->err, FC_ERR_USAGE, "grad_outputs and grad_inputs arrays are required");
    if (!p->ls_gout && !(p->ls_gout = fc_calloc((size_t)nout + 1, sizeof *p->ls_gout))) return FC_OOM(&p->err);
    for (int j = 0; j < nout; j++) {
        const IrValue *y = ir_cval(g, g->outputs.data[j]);
        if (!ir_dtype_is_float(y->dtype)) continue;
        FC_TRY(check_grad(p, grad_outputs[j], y, "the gradient", g->output_names.data[j]));
        FcStatus s = FC_OK;
        if (!p->ls_gout[j] && (s = fc_tensor_new(p->dev, y->dtype, y->shape.rank, y->shape.dims, &p->ls_gout[j])) != FC_OK)
            return fc_err_set(&p->err, s, "the scaled gradient of output '%s': %s", g->output_names.data[j], p->dev->err.msg);
        if ((s = fc_tensor_convert(p->ls_gout[j], grad_outputs[j], p->ls_scale)) != FC_OK)
            return fc_err_set(&p->err, s, "scaling the gradient of output '%s': %s", g->output_names.data[j],
                              p->ls_gout[j]->err.msg);
    }
    return FC_OK;
}

/* fc_program_backward under dynamic loss scaling (fc_program_set_loss_scaling). */
static FcStatus backward_scaled(FcProgram *p, FcTensor *const *grad_outputs, FcTensor *const *grad_inputs) {
    const IrGraph *g = p->blk->src;
    int nin = g->inputs.len;
    if (nin && !grad_inputs) return fc_err_set(&p->err, FC_ERR_USAGE, "grad_outputs and grad_inputs arrays are required");
    FcStatus s = FC_OK;
    for (;;) {
        s = scale_seeds(p, grad_outputs);
        if (s == FC_OK) s = backward_plain(p, p->ls_gout, grad_inputs);
        bool finite = true;
        for (int i = 0; i < nin && s == FC_OK && finite; i++)
            if (grad_inputs[i] && ir_dtype_is_float(ir_cval(g, g->inputs.data[i])->dtype)) s = all_finite(grad_inputs[i], &finite);
        if (s != FC_OK) break;
        if (finite) {
            if (p->ls_interval > 0 && ++p->ls_good >= p->ls_interval) {
                p->ls_good = 0;
                if (p->ls_scale < 0x1p100) p->ls_scale *= 2;
            }
            break;
        }
        p->ls_good = 0;
        if (p->ls_scale <= 1) break;   /* non-finite without any scale: the gradients' own */
        p->ls_scale /= 2;
        p->ls_backoffs++;
    }
    return s;
}

FcStatus fc_program_backward(FcProgram *p, FcTensor *const *grad_outputs, FcTensor *const *grad_inputs) {
    if (!p) return FC_ERR_USAGE;
    if (p->ls_scale > 0 && p->blk->train && p->have_forward) return backward_scaled(p, grad_outputs, grad_inputs);
    return backward_plain(p, grad_outputs, grad_inputs);
}

/* The first value of the backward graph that is an f8 gradient (depends on an output's gradient:
 * the backward's inputs after the saved values), or -1. f8 saturates instead of overflowing,
 * so a loss scale too large for it would go unseen. */
static int f8_gradient(const FcBlock *b) {
    const IrGraph *g = b->plan.bwd;
    bool *dep = fc_calloc((size_t)g->values.len + 1, sizeof *dep);
    if (!dep) return -2;
    int found = -1;
    for (int i = b->plan.saved.len; i < g->inputs.len; i++) dep[g->inputs.data[i]] = true;
    for (int i = b->plan.saved.len; i < g->inputs.len && found < 0; i++) {
        FcDtype t = ir_cval(g, g->inputs.data[i])->dtype;
        if (t == FC_F8E4M3 || t == FC_F8E5M2) found = g->inputs.data[i];
    }
    for (int n = 0; n < g->nodes.len && found < 0; n++) {
        const IrNode *nd = &g->nodes.data[n];
        bool d = false;
        for (int k = 0; k < nd->nin; k++) d = d || dep[nd->in[k]];
        for (int r = 0; r < nd->nout && d; r++) {
            dep[nd->out[r]] = true;
            FcDtype t = ir_cval(g, nd->out[r])->dtype;
            if ((t == FC_F8E4M3 || t == FC_F8E5M2) && found < 0) found = nd->out[r];
        }
    }
    fc_free(dep);
    return found;
}

FcStatus fc_program_set_loss_scaling(FcProgram *p, double init_scale, int growth_interval) {
    if (!p) return FC_ERR_USAGE;
    int e = 0;
    if (!(init_scale == 0 || (init_scale >= 1 && init_scale <= 0x1p100 && frexp(init_scale, &e) == 0.5)) || growth_interval < 0)
        return fc_err_set(&p->err, FC_ERR_USAGE, "loss scaling: the scale must be 0 (off) or a power of two in [1, 2^100], "
                          "and the growth interval >= 0; got %g and %d", init_scale, growth_interval);
    if (!p->blk->train)
        return fc_err_set(&p->err, FC_ERR_USAGE, "block '%s' was not compiled for training (--train)", p->blk->src->name);
    int f8 = init_scale > 0 ? f8_gradient(p->blk) : -1;
    if (f8 == -2) return FC_OOM(&p->err);
    if (f8 >= 0)
        return fc_err_set(&p->err, FC_ERR_UNSUPPORTED, "the backward stores a gradient in %s, which saturates instead of "
                          "overflowing: a loss scale too large for it would go unseen",
                          fc_dtype_name(ir_cval(p->blk->plan.bwd, f8)->dtype));
    p->ls_scale = init_scale;
    p->ls_interval = growth_interval;
    p->ls_good = p->ls_backoffs = 0;
    return FC_OK;
}

FcStatus fc_program_loss_scale(const FcProgram *p, double *scale, int *backoffs) {
    if (!p || !scale) return FC_ERR_USAGE;
    *scale = p->ls_scale > 0 ? p->ls_scale : 1;
    if (backoffs) *backoffs = p->ls_backoffs;
    return FC_OK;
}

FcStatus fc_program_time_train(FcProgram *p, FcTensor *const *inputs, FcTensor *const *outputs,
                               FcTensor *const *grad_outputs, FcTensor *const *grad_inputs, int warmup, int repeat,
                               double *total_ms, double *per_launch_ms) {
    if (!p || !total_ms) return FC_ERR_USAGE;
    if (!p->blk->train)
        return fc_err_set(&p->err, FC_ERR_USAGE, "block '%s' was not compiled for training (--train)", p->blk->src->name);
    if (warmup < 0 || repeat < 1 || repeat > 1000000)
        return fc_err_set(&p->err, FC_ERR_USAGE, "repeat must be in 1..1000000 and warmup >= 0");
    /* one forward binds the saved tensors; the copies of misaligned tensors are made outside the timing */
    FC_TRY(fc_program_run(p, inputs, outputs));
    void *in[4096], *out[4096];
    FC_TRY(backward_bind(p, grad_outputs, grad_inputs, in, out));
    double *t = fc_calloc((size_t)repeat, sizeof(double));
    if (!t) return FC_OOM(&p->err);
    FcStatus s = FC_OK;
    for (int i = 0; i < warmup + repeat && s == FC_OK; i++) {
        double t0 = now_ms();
        s = run_once(p, inputs, outputs, -1);
        if (s == FC_OK) s = backward_once(p, in, out, -1);
        if (i >= warmup) t[i - warmup] = now_ms() - t0;
    }
    if (s == FC_OK) *total_ms = median(t, repeat);
    if (s == FC_OK) s = take_output_scales(p, outputs);
    fc_free(t);
    int nf = p->prog ? p->prog->launches.len : 0, nl = fc_program_num_launches(p);
    if (s != FC_OK || !per_launch_ms || nl == 0) return s == FC_OK ? backward_unstage(p, grad_inputs) : s;
    int64_t n;
    if (!fc_mul64(repeat, nl, &n) || !(t = fc_calloc((size_t)n, sizeof(double)))) return FC_OOM(&p->err);
    for (int i = 0; i < repeat && s == FC_OK; i++)
        for (int l = 0; l < nl && s == FC_OK; l++) {
            double t0 = now_ms();
            s = l < nf ? run_once(p, inputs, outputs, l) : backward_once(p, in, out, l - nf);
            t[(size_t)l * (size_t)repeat + (size_t)i] = now_ms() - t0;
        }
    for (int l = 0; l < nl && s == FC_OK; l++) per_launch_ms[l] = median(t + (size_t)l * (size_t)repeat, repeat);
    fc_free(t);
    return s == FC_OK ? backward_unstage(p, grad_inputs) : s;
}

FcStatus fc_program_planned_bytes(const FcProgram *p, int64_t *bytes) {
    if (!p || !bytes) return FC_ERR_USAGE;
    const FcBlock *b = p->blk;
    const IrGraph *g = b->src;
    int64_t total = p->ws_counted, n;
    bool ok = true;
    for (int i = 0; i < g->inputs.len && ok; i++) {
        const IrValue *x = ir_cval(g, g->inputs.data[i]);
        int copies = b->train && ir_dtype_is_float(x->dtype) ? 2 : 1;   /* and its gradient */
        ok = ir_shape_nbytes(&x->shape, x->dtype, &n) && fc_mul64(n, copies, &n) && fc_add64(total, n, &total);
    }
    for (int j = 0; j < g->outputs.len && ok; j++) {
        const IrValue *y = ir_cval(g, g->outputs.data[j]);
        int copies = b->train && ir_dtype_is_float(y->dtype) ? 2 : 1;
        ok = ir_shape_nbytes(&y->shape, y->dtype, &n) && fc_mul64(n, copies, &n) && fc_add64(total, n, &total);
    }
    if (b->train && p->dev->kind != FC_DEVICE_REFERENCE) {
        const IrGraph *f = b->plan.fwd;
        for (int k = g->outputs.len; k < f->outputs.len && ok; k++) {
            const IrValue *x = ir_cval(f, f->outputs.data[k]);
            ok = ir_shape_nbytes(&x->shape, x->dtype, &n) && fc_add64(total, n, &total);
        }
    }
    if (!ok) return fc_err_set(&((FcProgram *)p)->err, FC_ERR_INPUT, "the planned bytes overflow a 64-bit count");
    *bytes = total;
    return FC_OK;
}

int fc_program_num_launches(const FcProgram *p) {
    if (!p) return 0;
    if (p->dev->kind == FC_DEVICE_REFERENCE || !p->prog) return 0;
    return p->prog->launches.len + (p->bprog ? p->bprog->launches.len : 0);
}
FcStatus fc_program_launch_info(const FcProgram *p, int i, FcLaunchInfo *info) {
    if (!p || !info || i < 0 || i >= fc_program_num_launches(p)) return FC_ERR_USAGE;
    const KirProgram *kp = p->prog;
    int base = 0;
    if (i >= kp->launches.len) {
        base = kp->launches.len;
        i -= kp->launches.len;
        kp = p->bprog;
    }
    const KirKernel *k = kp->kernels.data[kp->launches.data[i].kernel];
    info->name = k->name;
    info->ops = k->ops;
    info->bytes = k->bytes_read + k->bytes_written;
    info->flops = k->flops;
    info->runs_in = -1;
    int lo, hi;
    kir_launch_unit(kp, i, &lo, &hi);
    for (int j = lo; j <= hi && !k->library; j++)
        if (kp->kernels.data[kp->launches.data[j].kernel]->library) info->runs_in = base + j;
    return FC_OK;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}
static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

FcStatus fc_program_time(FcProgram *p, FcTensor *const *inputs, FcTensor *const *outputs, int warmup, int repeat,
                         double *total_ms, double *per_launch_ms) {
    if (!p || !total_ms) return FC_ERR_USAGE;
    if (p->unusable) return fc_err_set(&p->err, FC_ERR_INTERNAL, "this program hit an internal error earlier");
    if (warmup < 0 || repeat < 1 || repeat > 1000000)
        return fc_err_set(&p->err, FC_ERR_USAGE, "repeat must be in 1..1000000 and warmup >= 0");
    FC_TRY(check_args(p, inputs, outputs));
    /* the copies of misaligned wrapped tensors are made once, outside the timed runs */
    FC_TRY(stage_inputs(p, inputs));
    double *t = fc_calloc((size_t)repeat, sizeof(double));
    if (!t) return FC_OOM(&p->err);
    FcStatus s = FC_OK;
    for (int i = 0; i < warmup && s == FC_OK; i++) s = run_once(p, inputs, outputs, -1);
    for (int i = 0; i < repeat && s == FC_OK; i++) {
        double t0 = now_ms();
        s = run_once(p, inputs, outputs, -1);
        t[i] = now_ms() - t0;
    }
    if (s == FC_OK) *total_ms = median(t, repeat);
    fc_free(t);
    if (s == FC_OK) s = unstage_outputs(p, outputs);
    /* Each launch is timed inside runs of the whole program, launches in order, so that it
     * finds the caches as a real run leaves them (a launch repeated alone would find its
     * inputs in the cache when they fit, or stay there because its outputs bypass it). */
    int nl = p->dev->kind == FC_DEVICE_REFERENCE || !p->prog ? 0 : p->prog->launches.len;   /* the forward's */
    if (!per_launch_ms || nl == 0 || s != FC_OK) return s;
    int64_t n;
    if (!fc_mul64(repeat, nl, &n) || !(t = fc_calloc((size_t)n, sizeof(double)))) return FC_OOM(&p->err);
    for (int i = 0; i < repeat && s == FC_OK; i++)
        for (int l = 0; l < nl && s == FC_OK; l++) {
            double t0 = now_ms();
            s = run_once(p, inputs, outputs, l);
            t[(size_t)l * (size_t)repeat + (size_t)i] = now_ms() - t0;
        }
    for (int l = 0; l < nl && s == FC_OK; l++) per_launch_ms[l] = median(t + (size_t)l * (size_t)repeat, repeat);
    fc_free(t);
    return s;
}

/* ---- training: what is saved, the Pareto front, the memory plans (fusec mem) ---------------------- */
int fc_block_train_pareto_count(const FcBlock *b) {
    return b && b->train && block_ready(b) ? b->plan.pareto.len : 0;
}
FcStatus fc_block_train_pareto(const FcBlock *b, int i, int64_t *bytes, int64_t *flops) {
    if (!b || !bytes || !flops || !b->train || !block_ready(b) || i < 0 || i >= b->plan.pareto.len) return FC_ERR_USAGE;
    *bytes = b->plan.pareto.data[i].bytes;
    *flops = b->plan.pareto.data[i].flops;
    return FC_OK;
}

int fc_block_train_num_saved(const FcBlock *b) {
    return b && b->train && block_ready(b) ? b->plan.saved.len : 0;
}
FcStatus fc_block_train_saved(const FcBlock *b, int i, FcSavedInfo *info) {
    if (!b || !info || !b->train || !block_ready(b) || i < 0 || i >= b->plan.saved.len) return FC_ERR_USAGE;
    const RematSaved *sv = &b->plan.saved.data[i];
    const IrGraph *jg = b->joint.graph, *bg = b->plan.bwd;
    memset(info, 0, sizeof *info);
    /* the backward's first inputs are the saved values, in order, with their names */
    fill_info(jg, sv->value, i < bg->inputs.len ? ir_cval(bg, bg->inputs.data[i])->name : NULL, &info->tensor);
    info->bytes = sv->bytes;
    const IrValue *x = ir_cval(jg, sv->value);
    if (x->node < 0) {
        info->tensor.is_param = x->result < jg->inputs.len && jg->is_param.data[x->result];
        info->op = info->tensor.is_param ? "param" : "input";
    } else {
        const IrNode *n = &jg->nodes.data[x->node];
        info->op = ir_ops[n->origin_op].name;
        info->line = n->loc.line;
        info->col = n->loc.col;
    }
    return FC_OK;
}

/* The bytes of a kernel plan's inputs, outputs and workspace. */
static FcStatus plan_memory(FcBlock *b, const KirProgram *p, FcPlanMemory *m) {
    memset(m, 0, sizeof *m);
    for (int i = 0; i < p->buffers.len; i++) {
        const KirBuffer *k = &p->buffers.data[i];
        int64_t n;
        int64_t *sum = k->kind == KIR_BUF_INPUT ? &m->input_bytes : k->kind == KIR_BUF_OUTPUT ? &m->output_bytes : NULL;
        if (!sum) continue;
        if (!fc_mul64(k->numel, (int64_t)fc_dtype_size(k->dtype), &n) || !fc_add64(*sum, n, sum))
            return fc_err_set(&b->err, FC_ERR_INPUT, "the buffers of block '%s' overflow a 64-bit byte count",
                              b->src->name);
    }
    m->workspace_bytes = p->workspace_bytes;
    return FC_OK;
}
FcStatus fc_block_plan_memory(FcBlock *b, int which, FcPlanMemory *m) {
    if (!b || !m || !block_ready(b) || which < 0 || which > 1 || (which == 1 && !b->train)) return FC_ERR_USAGE;
    return plan_memory(b, which == 0 ? b->fwd.prog : b->bwd.prog, m);
}

/* ---- bisection (fc_block_bisect) ---------------------------------------------------------- */
/* A block of parent's options (fuse as given) around graph g, which it takes over: the prefixes
 * of the bisection. No training: each prefix is a forward program. */
static FcStatus block_of_graph(const FcBlock *parent, IrGraph *g, bool fuse, FcBlock **out) {
    FcBlock *b = fc_calloc(1, sizeof *b);
    *out = b;
    if (!b) {
        ir_graph_free(g);
        return FC_ERR_NOMEM;
    }
    b->src = g;
    b->popt = parent->popt;
    b->popt.fuse = fuse;
    memcpy(b->arch, parent->arch, sizeof b->arch);
    b->diags = fc_strdup("");
    b->entry = fc_strdup("bisect");
    if (!b->diags || !b->entry) return FC_OOM(&b->err);
    b->fwd.graph = g;
    FcStatus s = pass_pipeline(g, &b->popt, &b->fwd.res, &b->err);
    if (s != FC_OK) return block_fail(b, s);
    b->fwd.prog = b->fwd.res.prog;
    return block_fail(b, compute_tolerances(b));
}

typedef struct PrefixResult {
    double abs_err, rel_err, tol;
    char kernel[128], kernel_ops[512];
} PrefixResult;

static void free_tensors(FcTensor **t, int n) {
    for (int i = 0; t && i < n; i++) fc_tensor_free(t[i]);
    fc_free(t);
}

static FcStatus new_tensors(FcDevice *d, const IrGraph *g, FcTensor ***out, FcErr *err) {
    int n = g->outputs.len;
    FcTensor **t = fc_calloc((size_t)n + 1, sizeof *t);
    *out = t;
    if (!t) return FC_OOM(err);
    for (int j = 0; j < n; j++) {
        const IrValue *x = ir_cval(g, g->outputs.data[j]);
        FcStatus s = fc_tensor_new(d, x->dtype, x->shape.rank, x->shape.dims, &t[j]);
        if (s != FC_OK) return fc_err_set(err, s, "allocating a bisection output: %s", d->err.msg);
    }
    return FC_OK;
}

/* ops (comma-separated, repeats where several nodes of one source op are fused) with each name
 * once, in order of first appearance. */
static void unique_ops(const char *ops, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = 0;
    for (const char *p = ops; *p;) {
        size_t w = strcspn(p, ",");
        bool seen = false;
        for (const char *q = buf; *q && !seen;) {
            size_t wq = strcspn(q, ",");
            seen = wq == w && memcmp(q, p, w) == 0;
            q += wq + (q[wq] == ',');
        }
        if (!seen && len + w + 2 < n) {
            if (len) buf[len++] = ',';
            memcpy(buf + len, p, w);
            buf[len += w] = 0;
        }
        p += w + (p[w] == ',');
    }
}

/* The kernel of program kp that last writes output j. */
static void writer_of_output(const KirProgram *kp, int j, PrefixResult *r) {
    r->kernel[0] = r->kernel_ops[0] = 0;
    if (!kp) return;
    for (int l = 0; l < kp->launches.len; l++) {
        const KirLaunch *la = &kp->launches.data[l];
        const KirKernel *k = kp->kernels.data[la->kernel];
        for (int a = 0; a < la->nargs && a < k->params.len; a++) {
            const KirBuffer *bf = &kp->buffers.data[la->args[a]];
            if (!k->params.data[a].written || bf->kind != KIR_BUF_OUTPUT || bf->index != j) continue;
            snprintf(r->kernel, sizeof r->kernel, "%s", k->name);
            unique_ops(k->ops ? k->ops : "", r->kernel_ops, sizeof r->kernel_ops);
        }
    }
}

/* Compiles the prefix g (taken over) with parent's options, runs it on d with `in` and on the
 * reference device with `rin`, and compares: the worst output by its ratio to its tolerance. */
static FcStatus prefix_check(FcBlock *parent, IrGraph *g, bool fuse, FcDevice *d, FcTensor *const *in,
                             FcDevice *rdev, FcTensor *const *rin, PrefixResult *r) {
    FcBlock *pb = NULL;
    FcProgram *pp = NULL, *rp = NULL;
    FcTensor **out = NULL, **rout = NULL;
    double *tol = NULL;
    FcErr *err = &parent->err;
    int nout = g->outputs.len;
    FcStatus s = block_of_graph(parent, g, fuse, &pb);
    if (s != FC_OK) {
        fc_err_set(err, s, "compiling a prefix of the block: %s", pb ? pb->err.msg : "out of memory");
        goto done;
    }
    if ((s = fc_program_new(pb, d, &pp)) != FC_OK || (s = fc_program_new(pb, rdev, &rp)) != FC_OK) {
        fc_err_set(err, s, "loading a prefix of the block: %s", pp && pp->err.msg[0] ? pp->err.msg : pb->err.msg);
        goto done;
    }
    if ((s = new_tensors(d, g, &out, err)) != FC_OK || (s = new_tensors(rdev, g, &rout, err)) != FC_OK) goto done;
    if ((s = fc_program_run(pp, in, out)) != FC_OK) {
        fc_err_set(err, s, "running a prefix of the block: %s", pp->err.msg);
        goto done;
    }
    if ((s = fc_program_run(rp, rin, rout)) != FC_OK) {
        fc_err_set(err, s, "running a prefix of the block on the reference interpreter: %s", rp->err.msg);
        goto done;
    }
    tol = fc_calloc((size_t)nout + 1, sizeof *tol);
    if (!tol) {
        s = FC_OOM(err);
        goto done;
    }
    if ((s = fc_block_check_tolerances(pb, rin, tol, NULL)) != FC_OK) {
        fc_err_set(err, s, "the tolerances of a prefix of the block: %s", pb->err.msg);
        goto done;
    }
    double worst = -1;
    for (int j = 0; j < nout; j++) {
        double ae = 0, re = 0;
        if ((s = fc_tensor_compare(out[j], rout[j], &ae, &re)) != FC_OK) {
            fc_err_set(err, s, "comparing a prefix of the block: %s", out[j]->err.msg);
            goto done;
        }
        double ratio = re <= tol[j] ? (tol[j] > 0 ? re / tol[j] : 0) : INFINITY;   /* NaN: over */
        if (ratio > worst) {
            worst = ratio;
            r->abs_err = ae;
            r->rel_err = re;
            r->tol = tol[j];
            writer_of_output(pp->prog, j, r);
        }
    }
done:
    fc_free(tol);
    free_tensors(out, nout);
    free_tensors(rout, nout);
    fc_program_free(pp);
    fc_program_free(rp);
    fc_block_free(pb);
    return s;
}

/* A copy of t on the reference device. */
static FcStatus ref_copy(FcDevice *rdev, const FcTensor *t, FcTensor **out, FcErr *err) {
    FcStatus s = fc_tensor_new(rdev, t->dtype, t->shape.rank, t->shape.dims, out);
    if (s != FC_OK) return fc_err_set(err, s, "a reference copy of an input: %s", rdev->err.msg);
    void *h = NULL;
    FC_TRY(host_begin(t, true, &h));
    s = fc_tensor_copy_from_host(*out, h, (size_t)t->nbytes);
    host_end((FcTensor *)t, h, false);
    (*out)->scale = t->scale;   /* an f8 tensor's scale goes with its bytes */
    return s;
}

FcStatus fc_block_bisect(FcBlock *b, FcDevice *d, FcTensor *const *inputs, FcTensor *const *grad_outputs,
                         FcBisectFn fn, void *ctx, int *first_bad) {
    if (first_bad) *first_bad = -1;
    if (!block_ready(b) || !d || !fn || !first_bad) return FC_ERR_USAGE;
    if (grad_outputs && !b->train)
        return fc_err_set(&b->err, FC_ERR_USAGE, "fc_block_bisect: gradients given for a block compiled without training");
    const IrGraph *g = grad_outputs ? b->joint.graph : b->src;
    int nin = g->inputs.len;
    /* the graph's inputs: the block's, then (joint graph) the outputs' gradients */
    FcTensor **in = fc_calloc((size_t)nin + 1, sizeof *in), **rin = fc_calloc((size_t)nin + 1, sizeof *rin);
    FcDevice *rdev = NULL;
    FcStatus s = in && rin ? FC_OK : FC_OOM(&b->err);
    for (int i = 0; s == FC_OK && i < nin; i++) {
        if (i < b->src->inputs.len) {
            in[i] = inputs ? inputs[i] : NULL;
        } else {
            for (int j = 0; j < b->src->outputs.len; j++)
                if (b->joint.grad_in_of_output[j] == i) in[i] = grad_outputs[j];
        }
        const IrValue *x = ir_cval(g, g->inputs.data[i]);
        if (!in[i] || in[i]->dtype != x->dtype || !ir_shape_eq(&in[i]->shape, &x->shape))
            s = fc_err_set(&b->err, FC_ERR_USAGE, "fc_block_bisect: %s %d ('%s') is missing or does not match the block",
                           i < b->src->inputs.len ? "input" : "gradient", i, x->name ? x->name : "");
        else if (in[i]->dev != d && !(d->kind != FC_DEVICE_CUDA && in[i]->dev->kind != FC_DEVICE_CUDA))
            s = fc_err_set(&b->err, FC_ERR_USAGE, "fc_block_bisect: input '%s' lives on another device", x->name ? x->name : "");
    }
    if (s == FC_OK && (s = fc_device_open(FC_DEVICE_REFERENCE, 0, &rdev)) != FC_OK)
        fc_err_set(&b->err, s, "opening the reference device");
    for (int i = 0; s == FC_OK && i < nin; i++) s = ref_copy(rdev, in[i], &rin[i], &b->err);
    int step = 0;
    for (int m = 0; s == FC_OK && m < g->nodes.len; m++) {
        const IrNode *n = &g->nodes.data[m];
        IrGraph *pg = NULL;
        if ((s = ir_graph_prefix(g, m, &pg, &b->err)) != FC_OK) break;
        if (!pg) continue;   /* no float result */
        if (ir_ops[n->op].cat == IR_CAT_GENERATOR) {   /* a constant (full, iota): nothing to check */
            ir_graph_free(pg);
            continue;
        }
        PrefixResult r = {0};
        if ((s = prefix_check(b, pg, b->popt.fuse, d, in, rdev, rin, &r)) != FC_OK) break;
        FcBisectStep st = {
            .step = step, .op = ir_ops[n->op].name, .source_op = ir_ops[n->origin_op].name, .line = n->loc.line,
            .col = n->loc.col, .name = ir_cval(g, n->out[0])->name,
            .backward = grad_outputs && n->origin >= b->joint.first_bwd_origin, .kernel = r.kernel,
            .kernel_ops = r.kernel_ops, .max_abs_err = r.abs_err, .max_rel_err = r.rel_err, .tol = r.tol,
            .ok = r.rel_err <= r.tol, .unfused_ok = -1};
        if (!st.ok && b->popt.fuse) {
            PrefixResult e = {0};
            if ((s = ir_graph_prefix(g, m, &pg, &b->err)) != FC_OK) break;
            if ((s = prefix_check(b, pg, false, d, in, rdev, rin, &e)) != FC_OK) break;
            st.unfused_ok = e.rel_err <= e.tol;
        }
        if (!st.ok) *first_bad = step;
        if (fn(&st, ctx) || !st.ok) break;
        step++;
    }
    free_tensors(rin, nin);
    fc_free(in);
    fc_device_free(rdev);
    return block_fail(b, s);
}

/* ---- the error of each kernel (fc_program_check_kernels) ------------------------------------ */
/* The graph that kernel program kp of unit u was lowered from. */
static const IrGraph *unit_graph_of(const Unit *u, const KirProgram *kp) {
    if (kp == u->res.prog) return u->res.graph;
    if (u->have_cpu && kp == u->res_cpu.prog) return u->res_cpu.graph;
    if (u->have_gen && kp == u->res_gen.prog) return u->res_gen.graph;
    for (int i = 0; i < u->n_res_dev; i++)
        if (kp == u->res_dev[i].prog) return u->res_dev[i].graph;
    return NULL;
}

/* One program being checked: the forward or the backward, its buffers bound. */
typedef struct KcSide {
    const KirProgram *kp;
    const IrGraph *g;      /* what kp was lowered from */
    void **in, **out;
    bool backward;
    int launch0;           /* its first launch's number in fc_program_launch_info */
} KcSide;

typedef struct KcState {   /* what one side allocates */
    int *last, *bufs, *vals;
    const void **hin;
    void **hin_own, **ref, **noisy;   /* noisy: the reference under rounding noise (scratch) */
    double *tol, *sens;               /* sens: how far the noise moves each reference (kc_sensitivity) */
    IrGraph *og;
    int nv, nin;
} KcState;

static void kc_free(KcState *st) {
    for (int i = 0; st->hin_own && i < st->nin; i++) fc_free(st->hin_own[i]);
    for (int k = 0; st->ref && k < st->nv; k++) fc_free(st->ref[k]);
    for (int k = 0; st->noisy && k < st->nv; k++) fc_free(st->noisy[k]);
    fc_free(st->noisy);
    fc_free(st->sens);
    fc_free(st->last);
    fc_free(st->bufs);
    fc_free(st->vals);
    fc_free(st->hin);
    fc_free(st->hin_own);
    fc_free(st->ref);
    fc_free(st->tol);
    ir_graph_free(st->og);
}

static int64_t value_bytes(const IrGraph *g, int v) {
    int64_t n = 0;
    return ir_shape_nbytes(&ir_cval(g, v)->shape, ir_cval(g, v)->dtype, &n) ? n : 0;
}

/* The values to check (bufs/vals: buffer and value, last: each buffer's last writer), the
 * reference graph with them as outputs, host copies of the inputs, the tolerances and the
 * reference values. */
static FcStatus kc_prepare(FcProgram *p, const KcSide *sd, KcState *st) {
    const KirProgram *kp = sd->kp;
    const IrGraph *g = sd->g;
    int nb = kp->buffers.len;
    st->nin = g->inputs.len;
    st->last = fc_calloc((size_t)nb + 1, sizeof *st->last);
    st->bufs = fc_calloc((size_t)nb + 1, sizeof *st->bufs);
    st->vals = fc_calloc((size_t)nb + 1, sizeof *st->vals);
    st->hin = fc_calloc((size_t)st->nin + 1, sizeof *st->hin);
    st->hin_own = fc_calloc((size_t)st->nin + 1, sizeof *st->hin_own);
    if (!st->last || !st->bufs || !st->vals || !st->hin || !st->hin_own) return FC_OOM(&p->err);
    for (int b = 0; b < nb; b++) st->last[b] = -1;
    for (int l = 0; l < kp->launches.len; l++) {
        const KirLaunch *la = &kp->launches.data[l];
        const KirKernel *k = kp->kernels.data[la->kernel];
        for (int a = 0; a < la->nargs && a < k->params.len; a++)
            if (k->params.data[a].written) st->last[la->args[a]] = l;
    }
    for (int b = 0; b < nb; b++) {
        const KirBuffer *bf = &kp->buffers.data[b];
        if (bf->value < 0 || bf->value >= g->values.len || bf->kind == KIR_BUF_INPUT || st->last[b] < 0) continue;
        const IrValue *x = ir_cval(g, bf->value);
        int64_t n = 0;
        if (!ir_dtype_is_float(x->dtype) || x->dtype != bf->dtype || !ir_shape_numel(&x->shape, &n) || n != bf->numel)
            continue;
        st->bufs[st->nv] = b;
        st->vals[st->nv++] = bf->value;
    }
    if (st->nv == 0) return FC_OK;
    FC_TRY(ir_graph_with_outputs(g, g->nodes.len - 1, st->vals, st->nv, &st->og, &p->err));
    for (int i = 0; i < st->nin; i++) {
        if (p->dev->kind != FC_DEVICE_CUDA) {
            st->hin[i] = sd->in[i];
            continue;
        }
        int64_t n = value_bytes(g, g->inputs.data[i]);
        if (!(st->hin_own[i] = fc_alloc((size_t)n + 1))) return FC_OOM(&p->err);
        FC_TRY(rt_cuda_copy_dtoh(p->dev->cuda, st->hin_own[i], sd->in[i], (size_t)n, &p->err));
        st->hin[i] = st->hin_own[i];
    }
    st->tol = fc_calloc((size_t)st->nv + 1, sizeof *st->tol);
    st->ref = fc_calloc((size_t)st->nv + 1, sizeof *st->ref);
    if (!st->tol || !st->ref) return FC_OOM(&p->err);
    for (int k = 0; k < st->nv; k++)
        if (!(st->ref[k] = fc_alloc((size_t)value_bytes(g, st->vals[k]) + 1))) return FC_OOM(&p->err);
    FC_TRY(rt_graph_check_tolerances(st->og, st->hin, st->tol, NULL, &p->err));
    return rt_interp_run(st->og, st->hin, st->ref, &p->err);
}

/* Compares value k of st (its buffer's data now) with its reference: *ratio is the error over
 * the bound (inf when over it by a non-finite error). */
static FcStatus kc_compare(FcProgram *p, const KcSide *sd, const KcState *st, int k, double *ae, double *re,
                           double *ratio) {
    const KirBuffer *bf = &sd->kp->buffers.data[st->bufs[k]];
    const IrValue *x = ir_cval(sd->g, st->vals[k]);
    int64_t bytes = value_bytes(sd->g, st->vals[k]);
    void *ws = p->dev->kind == FC_DEVICE_CPU ? rt_cpu_workspace(sd->backward ? p->bcpu : p->cpu)
                                               : rt_cuda_workspace(sd->backward ? p->bcuda : p->cuda);
    const char *addr = bf->kind == KIR_BUF_OUTPUT ? (const char *)sd->out[bf->index] : (const char *)ws + bf->offset;
    void *host = NULL;
    const void *got = addr;
    if (p->dev->kind == FC_DEVICE_CUDA) {
        if (!(host = fc_alloc((size_t)bytes + 1))) return FC_OOM(&p->err);
        FcStatus s = rt_cuda_copy_dtoh(p->dev->cuda, host, addr, (size_t)bytes, &p->err);
        if (s != FC_OK) {
            fc_free(host);
            return s;
        }
        got = host;
    }
    rt_host_compare(x->dtype, got, st->ref[k], bf->numel, ae, re);
    fc_free(host);
    double t = st->tol[k];
    *ratio = isnan(*re) ? INFINITY : t > 0 ? *re / t : *re > 0 ? INFINITY : 0;
    return FC_OK;
}

/* The reference under noise: rt_interp_run_noisy with `seed` (rounding-level noise on every
 * computing op, as the random-graph tester measures an output's conditioning) on the inputs
 * perturbed at their own rounding level (f32 and f64 elements times 1 + 2u sin(0.7549 j + i +
 * seed), rounded back), so that a reduction whose terms cancel shows its condition too. */
static FcStatus kc_noisy(FcProgram *p, KcState *st, uint64_t seed, bool keep_quants) {
    const IrGraph *g = st->og;
    void **pin = fc_calloc((size_t)st->nin + 1, sizeof *pin);
    if (!pin) return FC_OOM(&p->err);
    FcStatus s = FC_OK;
    for (int i = 0; i < st->nin && s == FC_OK; i++) {
        const IrValue *x = ir_cval(g, g->inputs.data[i]);
        int64_t n = 0, bytes = value_bytes(g, g->inputs.data[i]);
        ir_shape_numel(&x->shape, &n);
        if (!(pin[i] = fc_alloc((size_t)bytes + 1))) {
            s = FC_OOM(&p->err);
            break;
        }
        memcpy(pin[i], st->hin[i], (size_t)bytes);
        double u = x->dtype == FC_F32 ? 0x1p-24 : x->dtype == FC_F64 ? 0x1p-53 : 0;
        for (int64_t j = 0; u > 0 && j < n; j++)
            rt_host_store(x->dtype, pin[i], j,
                          rt_host_load(x->dtype, pin[i], j) * (1 + 2 * u * sin(0.7549 * (double)j + i + (double)seed)));
    }
    if (s == FC_OK)
        s = rt_interp_run_noisy(g, (const void *const *)pin, st->noisy, keep_quants ? seed | RT_NOISE_KEEP_QUANTS : seed, &p->err);
    for (int i = 0; i < st->nin; i++) fc_free(pin[i]);
    fc_free(pin);
    return s;
}

/* How far that noise moves the reference of value k: the largest max |n - r| / max |r| over
 * KC_NOISE_SEEDS noisy references, all made once per program, the first time one is needed.
 * Several seeds, since where a value is a sum whose terms cancel (a gradient that is 0 but for
 * rounding) one seed's noise may cancel as well: a layernorm backward's gradient of a broadcast
 * f16 scalar, 1e-7 of noise against terms of 1, moved by 0 under seed 1 once pass_cse had
 * merged the recomputed terms that used to carry noise of their own (difftest seed 2026112921
 * graph 191; the final gradient, rounded to f16, agreed). Where the graph quantizes to f8, the
 * same seeds once more without noise on the quantizations (RT_NOISE_KEEP_QUANTS: their noise
 * can flip a choice that then masks the value). */
enum { KC_NOISE_SEEDS = 4 };
static FcStatus kc_sensitivity(FcProgram *p, const KcSide *sd, KcState *st, int k, double *sens) {
    if (!st->sens) {
        if (!(st->sens = fc_calloc((size_t)st->nv + 1, sizeof *st->sens)) ||
            !(st->noisy = fc_calloc((size_t)st->nv + 1, sizeof *st->noisy)))
            return FC_OOM(&p->err);
        for (int j = 0; j < st->nv; j++)
            if (!(st->noisy[j] = fc_alloc((size_t)value_bytes(sd->g, st->vals[j]) + 1))) return FC_OOM(&p->err);
        bool quants = false;
        for (int n = 0; n < st->og->nodes.len && !quants; n++) quants = st->og->nodes.data[n].op == IR_OP_FP8_QUANT;
        for (int keep = 0; keep <= (quants ? 1 : 0); keep++) {
            for (uint64_t seed = 1; seed <= KC_NOISE_SEEDS; seed++) {
                FC_TRY(kc_noisy(p, st, seed, keep));
                for (int j = 0; j < st->nv; j++) {
                    double ae = 0, r = 0;
                    rt_host_compare(ir_cval(sd->g, st->vals[j])->dtype, st->noisy[j], st->ref[j],
                                    sd->kp->buffers.data[st->bufs[j]].numel, &ae, &r);
                    if (!(r <= st->sens[j])) st->sens[j] = r;   /* a NaN stays */
                }
            }
        }
    }
    *sens = st->sens[k];
    return FC_OK;
}

static FcStatus kc_side(FcProgram *p, const KcSide *sd, FcKernelCheckFn fn, void *ctx, int *nfailed, bool *stop) {
    KcState st = {0};
    FcStatus s = kc_prepare(p, sd, &st);
    const KirProgram *kp = sd->kp;
    for (int l = 0; s == FC_OK && l < kp->launches.len; l++) {
        s = sd->backward ? backward_once(p, sd->in, sd->out, l) : forward_once(p, sd->in, sd->out, l);
        if (s != FC_OK || *stop) continue;
        const KirKernel *kk = kp->kernels.data[kp->launches.data[l].kernel];
        char ops[512];
        unique_ops(kk->ops ? kk->ops : "", ops, sizeof ops);
        FcKernelCheck rec = {.launch = sd->launch0 + l, .backward = sd->backward, .kernel = kk->name, .ops = ops,
                             .ok = 1, .max_rel_err = 0, .tol = 0};
        double worst = -1;
        for (int k = 0; s == FC_OK && k < st.nv; k++) {
            if (st.last[st.bufs[k]] != l) continue;
            double ae = 0, re = 0, ratio = 0;
            if ((s = kc_compare(p, sd, &st, k, &ae, &re, &ratio)) != FC_OK) break;
            rec.nvalues++;
            if (!(re <= st.tol[k])) {   /* NaN too */
                /* over its bound: wrong, or ill-conditioned (rounding noise alone moves its
                 * reference by a quarter of the error or more, the tester's rule) */
                double sens = 0;
                if ((s = kc_sensitivity(p, sd, &st, k, &sens)) != FC_OK) break;
                if (4 * sens >= re) {
                    rec.illcond++;
                    ratio = 0;
                } else {
                    rec.ok = 0;
                }
            }
            if (!(ratio <= worst)) {
                worst = ratio;
                const IrValue *x = ir_cval(sd->g, st.vals[k]);
                const IrNode *n = x->node >= 0 ? &sd->g->nodes.data[x->node] : NULL;
                rec.op = n ? ir_ops[n->op].name : "input";
                rec.source_op = n ? ir_ops[n->origin_op].name : "input";
                rec.line = n ? n->loc.line : 0;
                rec.col = n ? n->loc.col : 0;
                rec.name = x->name;
                rec.max_abs_err = ae;
                rec.max_rel_err = re;
                rec.tol = st.tol[k];
            }
        }
        if (s != FC_OK || rec.nvalues == 0) continue;
        if (!rec.ok && nfailed) (*nfailed)++;
        if (fn(&rec, ctx)) *stop = true;
    }
    kc_free(&st);
    return s;
}

FcStatus fc_program_check_kernels(FcProgram *p, FcTensor *const *inputs, FcTensor *const *outputs,
                                  FcTensor *const *grad_outputs, FcTensor *const *grad_inputs, FcKernelCheckFn fn,
                                  void *ctx, int *nfailed) {
    if (nfailed) *nfailed = 0;
    if (!p || !fn) return FC_ERR_USAGE;
    if (p->unusable) return fc_err_set(&p->err, FC_ERR_INTERNAL, "this program hit an internal error earlier");
    FcBlock *b = p->blk;
    bool grads = grad_outputs || grad_inputs;
    if (grads && !(grad_outputs && grad_inputs))
        return fc_err_set(&p->err, FC_ERR_USAGE, "fc_program_check_kernels: give both gradient arrays or neither");
    if (grads && !b->train)
        return fc_err_set(&p->err, FC_ERR_USAGE, "block '%s' was not compiled for training (--train)", b->src->name);
    if (p->dev->kind == FC_DEVICE_REFERENCE) {   /* no kernels: a plain run */
        FC_TRY(fc_program_run(p, inputs, outputs));
        return grads ? fc_program_backward(p, grad_outputs, grad_inputs) : FC_OK;
    }
    FC_TRY(check_args(p, inputs, outputs));
    FC_TRY(stage_inputs(p, inputs));
    FC_TRY(program_sync_next_scales(p));
    p->have_forward = false;
    void *in[4096], *out[4096];
    FC_TRY(forward_bind(p, inputs, outputs, in, out));
    KcSide fs = {.kp = p->prog, .g = unit_graph_of(&b->fwd, p->prog), .in = in, .out = out};
    FC_CHECK(&p->err, fs.g != NULL);
    bool stop = false;
    FC_TRY(kc_side(p, &fs, fn, ctx, nfailed, &stop));
    FC_TRY(forward_done(p, inputs, outputs));
    if (!grads) return FC_OK;
    void *bin[4096], *bout[4096];
    FcTensor *const *seeds = grad_outputs;
    if (p->ls_scale > 0) {   /* under loss scaling, the backward the program runs: scaled seeds */
        FC_TRY(scale_seeds(p, grad_outputs));
        seeds = p->ls_gout;
    }
    FC_TRY(backward_bind(p, seeds, grad_inputs, bin, bout));
    KcSide bs = {.kp = p->bprog, .g = unit_graph_of(&b->bwd, p->bprog), .in = bin, .out = bout, .backward = true,
                 .launch0 = p->prog->launches.len};
    FC_CHECK(&p->err, bs.g != NULL);
    FC_TRY(kc_side(p, &bs, fn, ctx, nfailed, &stop));
    return backward_unstage(p, grad_inputs);
}
