/* report.c: --emit report (a roofline table of the kernel plan on several targets), --emit
 * roofline (the same as an SVG chart) and --emit dot (the graph with each kernel as a
 * cluster). Entry points: pass_report, pass_roofline_svg, pass_dot.
 *
 * Predicted time of a kernel on a target = max(bytes / bandwidth, flops / peak), the
 * roofline's floor; bytes are the kernel's modelled minimum (each input buffer read once,
 * each output written once, see lower.c). A kernel is memory-bound on a target when the
 * bytes term is the larger (intensity below the target's ridge point peak / bandwidth).
 * The targets (their figures and where they come from) are the caller's (runtime/api.c).
 *
 * Invariants: every target has gbps > 0 and gflops > 0 (FC_CHECK); the SVG is well-formed
 * XML whatever the names: every piece of text in it goes through xml_text (escapes & < > " '
 * and replaces control characters and invalid UTF-8 with '?').
 */
#include "passes.h"

#include <math.h>
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

/* a + b, saturating at INT64_MAX (a total that large prints as such rather than wrapping) */
static int64_t sat_add(int64_t a, int64_t b) {
    int64_t r;
    return fc_add64(a, b, &r) ? r : INT64_MAX;
}

/* The roofline of one kernel on one target. */
typedef struct Roof {
    double us;        /* predicted time, microseconds */
    bool compute;     /* flops / peak exceeds bytes / bandwidth */
} Roof;
static Roof roof_time(int64_t bytes, int64_t flops, const PassTarget *t) {
    double tm = (double)bytes / (t->gbps * 1e3);     /* GB/s = 1e3 bytes per us */
    double tc = (double)flops / (t->gflops * 1e3);
    Roof r = {tm, false};
    if (tc > tm) { r.us = tc; r.compute = true; }
    return r;
}

static FcStatus check_targets(const PassTarget *targets, int ntargets, int chosen, FcErr *err) {
    FC_CHECK(err, targets && ntargets >= 1 && chosen >= 0 && chosen < ntargets);
    for (int t = 0; t < ntargets; t++)
        FC_CHECK(err, targets[t].name && targets[t].gbps > 0 && targets[t].gflops > 0 &&
                          isfinite(targets[t].gbps) && isfinite(targets[t].gflops));
    return FC_OK;
}

/* "figures from": one source when both figures share it, else both. */
static void target_source(StrBuf *o, const PassTarget *t) {
    const char *b = t->gbps_src ? t->gbps_src : "given", *f = t->gflops_src ? t->gflops_src : "given";
    if (strcmp(b, f) == 0) sb_puts(o, b);
    else sb_printf(o, "GB/s %s; GFLOP/s %s", b, f);
}

FcStatus pass_report(const PassResult *res, const PassTarget *targets, int ntargets, int chosen, StrBuf *o,
                     FcErr *err) {
    FC_TRY(check_targets(targets, ntargets, chosen, err));
    const IrGraph *g = res->graph;
    const KirProgram *p = res->prog;
    const int *node_kernel = res->node_kernel;
    int64_t tot_r = 0, tot_w = 0, tot_f = 0;
    double *tot_t = fc_calloc((size_t)ntargets, sizeof *tot_t);
    if (!tot_t) return FC_OOM(err);
    sb_printf(o, "# fusec report: block %s, %d launch%s; predicted time = max(bytes / bandwidth, flops / peak),"
                 " M memory-bound, C compute-bound\n",
              g->name, p->launches.len, p->launches.len == 1 ? "" : "es");
    /* fixed widths: a measured figure changes no line's length */
    sb_printf(o, "# %-8s %12s %12s %12s  %s\n", "target", "GB/s", "GFLOP/s", "ridge_flop/B", "figures from");
    for (int t = 0; t < ntargets; t++) {
        sb_printf(o, "# %-8s %12.6g %12.6g %12.3f  ", targets[t].name, targets[t].gbps, targets[t].gflops,
                  targets[t].gflops / targets[t].gbps);
        target_source(o, &targets[t]);
        sb_puts(o, t == chosen ? " [--arch]\n" : "\n");
    }
    sb_printf(o, "%-4s %-22s %-13s %14s %14s %14s %10s %10s", "#", "kernel", "kind", "bytes_read", "bytes_written",
              "flops", "flop/byte", "smem_B");
    for (int t = 0; t < ntargets; t++) {
        char col[64];
        snprintf(col, sizeof col, "%s_us", targets[t].name);
        sb_printf(o, " %14s", col);
    }
    sb_puts(o, "  ops\n");
    for (int i = 0; i < p->launches.len; i++) {
        const KirKernel *k = p->kernels.data[p->launches.data[i].kernel];
        int64_t bytes = sat_add(k->bytes_read, k->bytes_written);
        tot_r = sat_add(tot_r, k->bytes_read);
        tot_w = sat_add(tot_w, k->bytes_written);
        tot_f = sat_add(tot_f, k->flops);
        sb_printf(o, "%-4d %-22s %-13s %14lld %14lld %14lld %10.3f %10lld", i, k->name, k->kind,
                  (long long)k->bytes_read, (long long)k->bytes_written, (long long)k->flops,
                  bytes ? (double)k->flops / (double)bytes : 0.0, (long long)shared_bytes(k));
        for (int t = 0; t < ntargets; t++) {
            Roof r = roof_time(bytes, k->flops, &targets[t]);
            tot_t[t] += r.us;
            sb_printf(o, " %12.3f %c", r.us, r.compute ? 'C' : 'M');
        }
        sb_printf(o, "  %s\n", k->ops);
    }
    int64_t tot_b = sat_add(tot_r, tot_w);
    sb_printf(o, "%-4s %-22s %-13s %14lld %14lld %14lld %10.3f %10s", "", "total", "", (long long)tot_r,
              (long long)tot_w, (long long)tot_f, tot_b ? (double)tot_f / (double)tot_b : 0.0, "");
    for (int t = 0; t < ntargets; t++) sb_printf(o, " %12.3f%s", tot_t[t], t + 1 < ntargets ? "  " : "\n");
    fc_free(tot_t);
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

/* ---- the roofline chart (SVG) ---------------------------------------------------------------- */

/* Appends s as XML character data / attribute text: & < > " ' escaped, control characters
 * and bytes that are not valid UTF-8 (or not XML characters) replaced with '?'. */
static void xml_text(StrBuf *o, const char *s) {
    const unsigned char *u = (const unsigned char *)(s ? s : "");
    while (*u) {
        unsigned c = *u;
        if (c < 0x80) {
            switch (c) {
            case '&': sb_puts(o, "&amp;"); break;
            case '<': sb_puts(o, "&lt;"); break;
            case '>': sb_puts(o, "&gt;"); break;
            case '"': sb_puts(o, "&quot;"); break;
            case '\'': sb_puts(o, "&apos;"); break;
            default: sb_printf(o, "%c", (c < 0x20 && c != '\t' && c != '\n') || c == 0x7f ? '?' : (char)c);
            }
            u++;
            continue;
        }
        int n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 0;
        if (n == 3 && c > 0xEF) n = 0;
        unsigned cp = n == 2 ? c & 0x1F : n == 3 ? c & 0x0F : c & 0x07;
        for (int i = 1; i < n; i++) {
            if ((u[i] & 0xC0) != 0x80) { n = 0; break; }
            cp = (cp << 6) | (u[i] & 0x3F);
        }
        bool ok = n == 2 || (n == 3 && cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF) && cp != 0xFFFE && cp != 0xFFFF) ||
                  (n == 4 && cp >= 0x10000 && cp <= 0x10FFFF);
        if (!ok) {
            sb_puts(o, "?");
            u++;
            continue;
        }
        sb_printf(o, "%.*s", n, (const char *)u);
        u += n;
    }
}

/* The chart's geometry: plot area and log10 ranges. */
typedef struct Chart {
    double x0, y0, w, h;         /* plot area in pixels (y0 = top) */
    double lx0, lx1, ly0, ly1;   /* log10 of the axis ranges */
} Chart;
static double px(const Chart *c, double v) { return c->x0 + (log10(v) - c->lx0) / (c->lx1 - c->lx0) * c->w; }
static double py(const Chart *c, double v) { return c->y0 + c->h - (log10(v) - c->ly0) / (c->ly1 - c->ly0) * c->h; }

/* 10^e as a tick label: 0.001 .. 10000 written out, else 1e-5, 1e5 */
static const char *decade(double e, char *buf, size_t n) {
    int k = (int)lround(e);
    if (k >= -3 && k <= 4) snprintf(buf, n, "%g", pow(10, k));
    else snprintf(buf, n, "1e%d", k);
    return buf;
}

static const char *const k_colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};
#define NCOLORS ((int)(sizeof k_colors / sizeof k_colors[0]))

/* Where launch i is drawn on target t: intensity and attainable GFLOP/s, clamped into the
 * axes; *edge set when a zero (0 flops or 0 bytes) had to be clamped. */
static void launch_point(const KirKernel *k, const PassTarget *t, const Chart *c, double *x, double *y, bool *edge) {
    int64_t bytes = sat_add(k->bytes_read, k->bytes_written);
    double lo_x = pow(10, c->lx0), hi_x = pow(10, c->lx1), lo_y = pow(10, c->ly0), hi_y = pow(10, c->ly1);
    *edge = false;
    double in;
    if (bytes == 0) { in = hi_x; *edge = true; }
    else if (k->flops == 0) { in = lo_x; *edge = true; }
    else in = (double)k->flops / (double)bytes;
    double perf = k->flops == 0 ? lo_y : fmin(t->gflops, in * t->gbps);
    if (in < lo_x) in = lo_x;
    if (in > hi_x) in = hi_x;
    if (perf < lo_y) perf = lo_y;
    if (perf > hi_y) perf = hi_y;
    *x = in;
    *y = perf;
}

FcStatus pass_roofline_svg(const PassResult *res, const PassTarget *targets, int ntargets, int chosen, StrBuf *o,
                           FcErr *err) {
    FC_TRY(check_targets(targets, ntargets, chosen, err));
    const IrGraph *g = res->graph;
    const KirProgram *p = res->prog;
    const PassTarget *ct = &targets[chosen];
    /* x range: every kernel's intensity and every ridge point, with room; whole decades */
    double xmin = 1e30, xmax = 0, ymin = 1e30, ymax = 0;
    for (int i = 0; i < p->launches.len; i++) {
        const KirKernel *k = p->kernels.data[p->launches.data[i].kernel];
        int64_t bytes = sat_add(k->bytes_read, k->bytes_written);
        if (bytes == 0 || k->flops == 0) continue;
        double in = (double)k->flops / (double)bytes;
        xmin = fmin(xmin, in);
        xmax = fmax(xmax, in);
        ymin = fmin(ymin, fmin(ct->gflops, in * ct->gbps));
    }
    for (int t = 0; t < ntargets; t++) {
        double ridge = targets[t].gflops / targets[t].gbps;
        xmin = fmin(xmin, ridge);
        xmax = fmax(xmax, ridge);
        ymax = fmax(ymax, targets[t].gflops);
    }
    Chart c = {80, 50, 560, 400, 0, 0, 0, 0};
    c.lx0 = floor(log10(xmin) - 0.3);
    c.lx1 = ceil(log10(xmax) + 0.3);
    if (c.lx1 - c.lx0 < 3) c.lx1 = c.lx0 + 3;
    for (int t = 0; t < ntargets; t++) ymin = fmin(ymin, targets[t].gbps * pow(10, c.lx0));
    c.ly0 = floor(log10(ymin));
    c.ly1 = ceil(log10(ymax) + 0.2);
    if (c.ly1 - c.ly0 < 3) c.ly0 = c.ly1 - 3;
    const double W = 1000, H = 520;

    sb_puts(o, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    sb_printf(o, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\""
                 " font-family=\"sans-serif\" font-size=\"12\">\n", W, H, W, H);
    sb_puts(o, "<title>fusec roofline: block ");
    xml_text(o, g->name);
    sb_puts(o, "</title>\n<desc>source ");
    xml_text(o, g->file);
    sb_printf(o, "; %d launch%s; points at each kernel's flop/byte and attainable GFLOP/s on ", p->launches.len,
              p->launches.len == 1 ? "" : "es");
    xml_text(o, ct->name);
    sb_puts(o, " (min(peak, intensity x bandwidth))</desc>\n");
    sb_printf(o, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n", W, H);
    sb_printf(o, "<clipPath id=\"plot\"><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/></clipPath>\n",
              c.x0, c.y0, c.w, c.h);
    sb_printf(o, "<text x=\"%.1f\" y=\"28\" font-size=\"15\" text-anchor=\"middle\">Roofline of block ", c.x0 + c.w / 2);
    xml_text(o, g->name);
    sb_puts(o, ": kernels on ");
    xml_text(o, ct->name);
    sb_puts(o, "</text>\n");
    /* grid and decade ticks */
    sb_puts(o, "<g class=\"axes\" stroke=\"#dddddd\" stroke-width=\"1\">\n");
    for (double e = c.lx0; e <= c.lx1 + 1e-9; e += 1) {
        double x = px(&c, pow(10, e));
        sb_printf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", x, c.y0, x, c.y0 + c.h);
    }
    for (double e = c.ly0; e <= c.ly1 + 1e-9; e += 1) {
        double y = py(&c, pow(10, e));
        sb_printf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", c.x0, y, c.x0 + c.w, y);
    }
    char tick[32];
    sb_puts(o, "</g>\n<g class=\"ticks\" fill=\"#333333\">\n");
    for (double e = c.lx0; e <= c.lx1 + 1e-9; e += 1)
        sb_printf(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", px(&c, pow(10, e)),
                  c.y0 + c.h + 16, decade(e, tick, sizeof tick));
    for (double e = c.ly0; e <= c.ly1 + 1e-9; e += 1)
        sb_printf(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", c.x0 - 6, py(&c, pow(10, e)) + 4,
                  decade(e, tick, sizeof tick));
    sb_printf(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">arithmetic intensity (flop/byte)</text>\n",
              c.x0 + c.w / 2, c.y0 + c.h + 36);
    sb_printf(o, "<text transform=\"translate(%.1f %.1f) rotate(-90)\" text-anchor=\"middle\">GFLOP/s (f32)</text>\n",
              c.x0 - 55, c.y0 + c.h / 2);
    sb_puts(o, "</g>\n");
    sb_printf(o, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#333333\"/>\n",
              c.x0, c.y0, c.w, c.h);
    /* the roofs: bandwidth slope up to the ridge point, then the flat peak */
    sb_puts(o, "<g class=\"roofs\" fill=\"none\" clip-path=\"url(#plot)\">\n");
    double lo_x = pow(10, c.lx0), hi_x = pow(10, c.lx1);
    for (int t = 0; t < ntargets; t++) {
        const PassTarget *tg = &targets[t];
        double ridge = tg->gflops / tg->gbps;
        sb_printf(o, "<polyline class=\"roof\" stroke=\"%s\" stroke-width=\"%s\" points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\">",
                  k_colors[t % NCOLORS], t == chosen ? "2.5" : "1.5", px(&c, lo_x), py(&c, tg->gbps * lo_x),
                  px(&c, ridge), py(&c, tg->gflops), px(&c, hi_x), py(&c, tg->gflops));
        sb_puts(o, "<title>");
        xml_text(o, tg->name);
        sb_printf(o, ": %.1f GB/s, %.1f GFLOP/s, ridge at %.3f flop/byte</title></polyline>\n", tg->gbps, tg->gflops,
                  ridge);
    }
    sb_puts(o, "</g>\n");
    /* the legend: per target its name, figures, and where each figure comes from */
    sb_puts(o, "<g class=\"legend\">\n");
    for (int t = 0; t < ntargets; t++) {
        const PassTarget *tg = &targets[t];
        double y = c.y0 + 10 + 58.0 * t;
        double x = c.x0 + c.w + 20;
        sb_printf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"%s\"/>\n", x, y,
                  x + 20, y, k_colors[t % NCOLORS], t == chosen ? "2.5" : "1.5");
        sb_printf(o, "<text x=\"%.1f\" y=\"%.1f\">", x + 26, y + 4);
        xml_text(o, tg->name);
        sb_printf(o, "%s: %.1f GB/s, %.0f GFLOP/s</text>\n", t == chosen ? " (the points)" : "", tg->gbps, tg->gflops);
        const char *src[2] = {tg->gbps_src ? tg->gbps_src : "given", tg->gflops_src ? tg->gflops_src : "given"};
        bool same = strcmp(src[0], src[1]) == 0;
        for (int l = 0; l < (same ? 1 : 2); l++) {
            sb_printf(o, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" fill=\"#555555\">%s", x + 26, y + 18 + 13.0 * l,
                      same ? "" : l == 0 ? "GB/s " : "GFLOP/s ");
            xml_text(o, src[l]);
            sb_puts(o, "</text>\n");
        }
    }
    sb_puts(o, "</g>\n");
    /* one point per launch, labelled with its (generated) kernel name; each label takes the
     * first place around its point that overlaps no earlier label or point */
    int nl = p->launches.len;
    double *box = fc_calloc((size_t)2 * (size_t)nl + 1, 4 * sizeof(double));   /* x0 y0 x1 y1 */
    double *pt = fc_calloc((size_t)nl + 1, 2 * sizeof(double));
    if (!box || !pt) {
        fc_free(box);
        fc_free(pt);
        return FC_OOM(err);
    }
    int nbox = 0;
    for (int i = 0; i < nl; i++) {
        const KirKernel *k = p->kernels.data[p->launches.data[i].kernel];
        double xi, yi;
        bool edge;
        launch_point(k, ct, &c, &xi, &yi, &edge);
        pt[2 * i] = px(&c, xi);
        pt[2 * i + 1] = py(&c, yi);
        double *b = &box[4 * nbox++];
        b[0] = pt[2 * i] - 4, b[1] = pt[2 * i + 1] - 4, b[2] = pt[2 * i] + 4, b[3] = pt[2 * i + 1] + 4;
    }
    sb_printf(o, "<g class=\"points\" fill=\"%s\">\n", k_colors[chosen % NCOLORS]);
    for (int i = 0; i < nl; i++) {
        const KirKernel *k = p->kernels.data[p->launches.data[i].kernel];
        double X = pt[2 * i], Y = pt[2 * i + 1];
        int64_t bytes = sat_add(k->bytes_read, k->bytes_written);
        bool edge = bytes == 0 || k->flops == 0;
        Roof r = roof_time(bytes, k->flops, ct);
        sb_printf(o, "<circle class=\"point\" cx=\"%.1f\" cy=\"%.1f\" r=\"4\"%s>", X, Y,
                  edge ? " fill=\"white\" stroke=\"#333333\"" : "");
        sb_printf(o, "<title>launch %d, ", i);
        xml_text(o, k->name);
        sb_puts(o, " (");
        xml_text(o, k->kind);
        sb_printf(o, "): %lld bytes, %lld flops, %.3f flop/byte, %.3f us on ", (long long)bytes, (long long)k->flops,
                  bytes ? (double)k->flops / (double)bytes : 0.0, r.us);
        xml_text(o, ct->name);
        sb_printf(o, " (%s-bound)%s</title></circle>\n", r.compute ? "compute" : "memory",
                  edge ? "; drawn at the axis edge (no flops or no bytes)" : "");
        /* label candidates: right above, right below, left above, left below, then further
         * up or down on the right */
        double w = 6.2 * (double)strlen(k->name), lx = X + 6, ly = Y - 6;
        for (int cand = 0; cand < 16; cand++) {
            double cx = cand % 4 < 2 || cand >= 4 ? X + 6 : X - 6 - w;
            double cy = cand < 4 ? (cand % 2 == 0 ? Y - 6 : Y + 13)
                                 : (cand % 2 == 0 ? Y - 6 - 11.0 * (cand / 2 - 1) : Y + 13 + 11.0 * (cand / 2 - 1));
            double b0 = cx, b1 = cy - 9, b2 = cx + w, b3 = cy + 2;
            bool clash = b0 < c.x0 || b2 > c.x0 + c.w + 40 || b1 < c.y0 - 10 || b3 > c.y0 + c.h;
            for (int j = 0; j < nbox && !clash; j++)
                clash = b0 < box[4 * j + 2] && box[4 * j] < b2 && b1 < box[4 * j + 3] && box[4 * j + 1] < b3;
            if (!clash || cand == 0) lx = cx, ly = cy;
            if (!clash) break;
        }
        double *b = &box[4 * nbox++];
        b[0] = lx, b[1] = ly - 9, b[2] = lx + w, b[3] = ly + 2;
        sb_printf(o, "<text class=\"label\" x=\"%.1f\" y=\"%.1f\" font-size=\"10\" fill=\"#222222\">", lx, ly);
        xml_text(o, k->name);
        sb_puts(o, "</text>\n");
    }
    fc_free(box);
    fc_free(pt);
    sb_puts(o, "</g>\n</svg>\n");
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

/* ---- the training plan ------------------------------------------------------------------------ */
static const char *const remat_names[] = {"auto", "none", "full"};

FcStatus pass_report_remat(const AdJoint *j, const RematPlan *plan, StrBuf *o, FcErr *err) {
    FC_CHECK(err, j && j->graph && plan && (unsigned)plan->mode < 3);
    const IrGraph *g = j->graph;
    sb_printf(o, "# training plan: --remat %s", remat_names[plan->mode]);
    if (plan->budget >= 0) sb_printf(o, ", --mem-budget %lld", (long long)plan->budget);
    sb_printf(o, "; saved %d values, %lld bytes (params not counted; the least any choice saves: %lld); "
                 "recomputed %d ops, %lld flops; forward %lld flops, backward %lld flops\n",
              plan->saved.len, (long long)plan->saved_bytes, (long long)plan->floor_bytes, plan->nrecomputed,
              (long long)plan->recompute_flops, (long long)plan->forward_flops, (long long)plan->backward_flops);
    sb_puts(o, "# saved values: kept by the forward for the backward\n");
    sb_printf(o, "%-40s %14s  %-10s %s\n", "value", "bytes", "held in", "why");
    for (int k = 0; k < plan->saved.len; k++) {
        const RematSaved *sv = &plan->saved.data[k];
        char lab[320], why[320];
        value_label(g, sv->value, lab, sizeof lab);
        static const char *const where[] = {"input", "output", "buffer"};
        if (sv->reader < 0) {
            snprintf(why, sizeof why, "-");
        } else {
            const IrNode *n = &g->nodes.data[sv->reader];
            snprintf(why, sizeof why, "read by %s%s (%s '%s' at %d:%d)", sv->reader_recomputed ? "recomputed " : "",
                     ir_ops[n->op].name, sv->reader_recomputed ? "of" : "the backward of", ir_ops[n->origin_op].name,
                     n->loc.line, n->loc.col);
        }
        const IrValue *pv = ir_cval(g, sv->value);
        if (pv->node >= 0) {
            const IrNode *pn = &g->nodes.data[pv->node];
            size_t len = strlen(lab);
            snprintf(lab + len, sizeof lab - len, " = %s", ir_ops[pn->op].name);
        }
        const IrValue *x = ir_cval(g, sv->value);
        bool param = x->node < 0 && x->result < j->nfwd_inputs && g->is_param.data[x->result];
        sb_printf(o, "%-40s %14lld  %-10s %s%s\n", lab, (long long)sv->bytes, where[sv->kind], why,
                  param ? " (a param: not counted)" : "");
    }
    sb_printf(o, "# recomputed: %d forward ops the backward runs again (see --emit ir, # backward)\n", plan->nrecomputed);
    sb_puts(o, "# Pareto front (saved bytes, recomputed flops) over the cost weights:\n");
    for (int k = 0; k < plan->pareto.len; k++)
        sb_printf(o, "#   %14lld bytes  %16lld flops\n", (long long)plan->pareto.data[k].bytes,
                  (long long)plan->pareto.data[k].flops);
    return FC_OK;
}
