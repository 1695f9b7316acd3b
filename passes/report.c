/* report.c: --emit report (a roofline table of the kernel plan) and --emit dot (the graph
 * with each kernel as a cluster). Entry points: pass_report, pass_dot.
 *
 * Predicted time of a kernel on a target = max(bytes / bandwidth, flops / peak), the
 * roofline's floor; bytes are the kernel's modelled minimum (each input buffer read once,
 * each output written once, see lower.c).
 */
#include "passes.h"

#include <stdio.h>
#include <string.h>

static int64_t shared_bytes(const KirKernel *k) {
    static const int tsize[KT_COUNT] = {1, 4, 8, 4, 8};
    int64_t b = 0;
    for (int i = 0; i < k->shared.len; i++) b += k->shared.data[i].count * tsize[k->shared.data[i].type];
    return b;
}

static void value_label(const IrGraph *g, int v, char *buf, size_t n) {
    const IrValue *x = ir_cval(g, v);
    char t[256];
    ir_type_str(x->dtype, &x->shape, t, sizeof t);
    snprintf(buf, n, "%%%d%s%s %s", v, x->name ? " " : "", x->name ? x->name : "", t);
}

FcStatus pass_report(const PassResult *res, const PassTarget *tg, StrBuf *o, FcErr *err) {
    const IrGraph *g = res->graph;
    const KirProgram *p = res->prog;
    const int *node_kernel = res->node_kernel;
    int64_t tot_r = 0, tot_w = 0, tot_f = 0;
    double tot_t = 0;
    sb_printf(o, "# fusec report: block %s, target %s (%.0f GB/s, %.0f GFLOP/s f32), %d launches\n",
              g->name, tg->name, tg->gbps, tg->gflops, p->launches.len);
    sb_printf(o, "%-4s %-22s %-13s %14s %14s %14s %10s %10s %12s  %s\n", "#", "kernel", "kind", "bytes_read",
              "bytes_written", "flops", "flop/byte", "smem_B", "predicted_us", "ops");
    for (int i = 0; i < p->launches.len; i++) {
        const KirKernel *k = p->kernels.data[p->launches.data[i].kernel];
        int64_t bytes = k->bytes_read + k->bytes_written;
        double t = (double)bytes / (tg->gbps * 1e3);          /* us */
        double tf = (double)k->flops / (tg->gflops * 1e3);
        if (tf > t) t = tf;
        tot_r += k->bytes_read;
        tot_w += k->bytes_written;
        tot_f += k->flops;
        tot_t += t;
        sb_printf(o, "%-4d %-22s %-13s %14lld %14lld %14lld %10.3f %10lld %12.3f  %s\n", i, k->name, k->kind,
                  (long long)k->bytes_read, (long long)k->bytes_written, (long long)k->flops,
                  bytes ? (double)k->flops / (double)bytes : 0.0, (long long)shared_bytes(k), t, k->ops);
    }
    sb_printf(o, "%-4s %-22s %-13s %14lld %14lld %14lld %10.3f %10s %12.3f\n", "", "total", "", (long long)tot_r,
              (long long)tot_w, (long long)tot_f, tot_r + tot_w ? (double)tot_f / (double)(tot_r + tot_w) : 0.0, "",
              tot_t);
    /* edges between kernels: every value that one kernel writes and another reads */
    sb_puts(o, "# unfused edges (value: producer -> consumer: reason)\n");
    int nedges = 0;
    for (int e = 0; e < res->edges.len; e++) {
        const FuseEdge *fe = &res->edges.data[e];
        const IrValue *x = ir_cval(g, fe->value);
        int kp = node_kernel[x->node], kc = node_kernel[fe->consumer];
        if (kp == kc || kc < 0) continue;
        char lab[320];
        value_label(g, fe->value, lab, sizeof lab);
        sb_printf(o, "%s: %s -> %s: %s\n", lab, kp >= 0 ? p->kernels.data[kp]->name : "(view)",
                  p->kernels.data[kc]->name, kp >= 0 ? fe->reason : "a view of the producer's buffer");
        nedges++;
    }
    if (nedges == 0) sb_puts(o, "(none)\n");
    if (o->failed) return FC_OOM(err);
    return FC_OK;
}

FcStatus pass_dot(const PassResult *res, StrBuf *o, FcErr *err) {
    const IrGraph *g = res->graph;
    const KirProgram *p = res->prog;
    const int *node_kernel = res->node_kernel;
    sb_printf(o, "digraph \"%s\" {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n",
              g->name);
    for (int i = 0; i < g->inputs.len; i++) {
        char lab[320];
        value_label(g, g->inputs.data[i], lab, sizeof lab);
        sb_printf(o, "  v%d [shape=ellipse, label=\"%s%s\"];\n", g->inputs.data[i],
                  g->is_param.data[i] ? "param " : "", lab);
    }
    for (int kidx = -1; kidx < p->kernels.len; kidx++) {
        if (kidx >= 0)
            sb_printf(o, "  subgraph cluster_%d {\n    label=\"%s (%s)\";\n    style=rounded;\n", kidx,
                      p->kernels.data[kidx]->name, p->kernels.data[kidx]->kind);
        for (int i = 0; i < g->nodes.len; i++) {
            if (node_kernel[i] != kidx) continue;
            const IrNode *n = &g->nodes.data[i];
            char t[256];
            const IrValue *x = ir_cval(g, n->out[0]);
            ir_type_str(x->dtype, &x->shape, t, sizeof t);
            sb_printf(o, "    n%d [label=\"%s\\n%s%s\"];\n", i, ir_ops[n->op].name, t, kidx < 0 ? "\\n(view)" : "");
        }
        if (kidx >= 0) sb_puts(o, "  }\n");
    }
    for (int i = 0; i < g->nodes.len; i++) {
        const IrNode *n = &g->nodes.data[i];
        for (int j = 0; j < n->nin; j++) {
            const IrValue *x = ir_cval(g, n->in[j]);
            if (x->node < 0) sb_printf(o, "  v%d -> n%d;\n", n->in[j], i);
            else sb_printf(o, "  n%d -> n%d%s;\n", x->node, i,
                           node_kernel[x->node] != node_kernel[i] ? " [color=red]" : "");
        }
    }
    for (int j = 0; j < g->outputs.len; j++) {
        int v = g->outputs.data[j];
        const IrValue *x = ir_cval(g, v);
        sb_printf(o, "  out%d [shape=ellipse, label=\"output %s\"];\n", j, g->output_names.data[j]);
        if (x->node < 0) sb_printf(o, "  v%d -> out%d;\n", v, j);
        else sb_printf(o, "  n%d -> out%d;\n", x->node, j);
    }
    sb_puts(o, "}\n");
    if (o->failed) return FC_OOM(err);
    return FC_OK;
}
