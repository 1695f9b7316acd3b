/* printer.c: the text form of the graph IR (ir_print); parse.c reads it back.
 *
 * The form shows everything a graph holds, one line per item, in a fixed order
 * (docs/ir.md has the grammar):
 *
 *     block "mlp" file "mlp.tf" next_origin=4
 *       input %0 "x": f32[4, 768]
 *       param %1 "g": f32[768]
 *       %2 = layernorm(%0, %1) {axes=[1], gain=1, bias=0, eps=1.0000000000000001e-05} : f32[4, 768] @9:9 #0
 *       %3 "a", %4 = split(%2) {sizes=[384, 384], axis=1} : f32[4, 384], f32[4, 384] @4:15 #3
 *       output %3 "out0"
 *
 * Inputs come first in declaration order, then nodes in topological (array) order, then
 * outputs. A node shows its result ids (with their source names when set), the op, the
 * input ids, the attributes its ATTRS string in ops.def names (in that order), the
 * result types, the source location `@line:col` (0:0 when unknown), the origin `#N` and,
 * when it differs from the op, the origin op's name. Floats are printed with
 * fc_fmt_double, so they parse back bit for bit (inf, -inf, nan included). Strings are
 * always quoted; bytes outside printable ASCII, `"` and `\` are escaped.
 *
 * The printer never fails on a malformed graph (it is the tool for looking at one): an
 * id out of range prints as itself, a type it cannot find as `?`.
 */
#include "ir.h"

#include <stdio.h>
#include <string.h>

/* Appends s as a quoted string: printable ASCII as is, `"` and `\` escaped with a
 * backslash, every other byte as \xHH. */
static void put_quoted(StrBuf *sb, const char *s) {
    sb_putc(sb, '"');
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\') {
            sb_putc(sb, '\\');
            sb_putc(sb, (char)*p);
        } else if (*p >= 0x20 && *p < 0x7f) {
            sb_putc(sb, (char)*p);
        } else {
            sb_printf(sb, "\\x%02x", *p);
        }
    }
    sb_putc(sb, '"');
}

static void put_type(StrBuf *sb, const IrGraph *g, int v) {
    if (v < 0 || v >= g->values.len) {
        sb_puts(sb, "?");
        return;
    }
    const IrValue *val = ir_cval(g, v);
    const char *dn = fc_dtype_name(val->dtype);
    sb_puts(sb, dn ? dn : "?");
    sb_putc(sb, '[');
    int rank = val->shape.rank < 0 ? 0 : val->shape.rank > IR_MAX_RANK ? IR_MAX_RANK : val->shape.rank;
    for (int i = 0; i < rank; i++) sb_printf(sb, "%s%lld", i ? ", " : "", (long long)val->shape.dims[i]);
    sb_putc(sb, ']');
}

static void put_double(StrBuf *sb, double v) {
    char buf[64];
    fc_fmt_double(buf, sizeof buf, v);
    sb_puts(sb, buf);
}

/* The int slot of "i2:..." or "s0:..." (0..3). */
static int slot_index(const char *slot) {
    int k = slot[1] - '0';
    return k >= 0 && k < 4 ? k : 0;
}

/* Prints the attributes named by the op's ATTRS string, " {name=value, ...}", or nothing
 * when the op has none. */
static void put_attrs(StrBuf *sb, const IrNode *n) {
    const char *p = ir_ops[n->op].attrs;
    bool first = true;
    while (*p) {
        while (*p == ' ') p++;
        if (!*p) break;
        const char *slot = p;
        const char *colon = strchr(p, ':');
        if (!colon) break;
        const char *name = colon + 1;
        size_t nlen = strcspn(name, " ");
        p = name + nlen;
        sb_puts(sb, first ? " {" : ", ");
        first = false;
        sb_printf(sb, "%.*s=", (int)nlen, name);
        switch (slot[0]) {
        case 'L':
            sb_putc(sb, '[');
            for (int i = 0; i < n->a.nlist; i++)
                sb_printf(sb, "%s%lld", i ? ", " : "", n->a.list ? (long long)n->a.list[i] : 0LL);
            sb_putc(sb, ']');
            break;
        case 'i':
            sb_printf(sb, "%lld", (long long)n->a.i[slot_index(slot)]);
            break;
        case 'f':
            put_double(sb, n->a.f);
            break;
        case 'd': {
            const char *dn = fc_dtype_name(n->a.dtype);
            sb_puts(sb, dn ? dn : "?");
            break;
        }
        case 's': {
            int64_t v = n->a.i[slot_index(slot)];
            if (v == IR_APPROX_NONE) sb_puts(sb, "\"none\"");
            else if (v == IR_APPROX_TANH) sb_puts(sb, "\"tanh\"");
            else sb_printf(sb, "%lld", (long long)v);
            break;
        }
        default:
            sb_puts(sb, "?");
            break;
        }
    }
    if (!first) sb_putc(sb, '}');
}

void ir_print(const IrGraph *g, StrBuf *out) {
    sb_puts(out, "block ");
    put_quoted(out, g->name);
    sb_puts(out, " file ");
    put_quoted(out, g->file);
    sb_printf(out, " next_origin=%d\n", g->next_origin);

    for (int k = 0; k < g->fp8.len; k++) {
        const char *fn = fc_dtype_name(g->fp8.data[k].fmt);
        sb_printf(out, "  fp8 slot %d: %s scale=", k, fn ? fn : "?");
        put_double(out, g->fp8.data[k].scale);
        if (g->fp8.data[k].grad >= 0) sb_printf(out, " grad=%d", g->fp8.data[k].grad);
        if (g->fp8.data[k].input >= 0) sb_printf(out, " input=%d", g->fp8.data[k].input);
        if (g->fp8.data[k].read_only) sb_puts(out, " read_only");
        sb_putc(out, '\n');
    }

    for (int i = 0; i < g->inputs.len; i++) {
        int v = g->inputs.data[i];
        bool param = i < g->is_param.len && g->is_param.data[i];
        sb_printf(out, "  %s %%%d", param ? "param" : "input", v);
        if (v >= 0 && v < g->values.len && ir_cval(g, v)->name) {
            sb_putc(out, ' ');
            put_quoted(out, ir_cval(g, v)->name);
        }
        sb_puts(out, ": ");
        put_type(out, g, v);
        sb_putc(out, '\n');
    }

    for (int i = 0; i < g->nodes.len; i++) {
        const IrNode *n = &g->nodes.data[i];
        sb_puts(out, "  ");
        for (int k = 0; k < n->nout; k++) {
            int v = n->out[k];
            sb_printf(out, "%s%%%d", k ? ", " : "", v);
            if (v >= 0 && v < g->values.len && ir_cval(g, v)->name) {
                sb_putc(out, ' ');
                put_quoted(out, ir_cval(g, v)->name);
            }
        }
        bool op_ok = (unsigned)n->op < IR_OP_COUNT;
        sb_printf(out, " = %s(", op_ok ? ir_ops[n->op].name : "?");
        for (int k = 0; k < n->nin; k++) sb_printf(out, "%s%%%d", k ? ", " : "", n->in[k]);
        sb_putc(out, ')');
        if (op_ok) put_attrs(out, n);
        sb_puts(out, " : ");
        for (int k = 0; k < n->nout; k++) {
            if (k) sb_puts(out, ", ");
            put_type(out, g, n->out[k]);
        }
        sb_printf(out, " @%d:%d #%d", n->loc.line, n->loc.col, n->origin);
        if (n->origin_op != n->op)
            sb_printf(out, " %s", (unsigned)n->origin_op < IR_OP_COUNT ? ir_ops[n->origin_op].name : "?");
        sb_putc(out, '\n');
    }

    for (int i = 0; i < g->outputs.len; i++) {
        sb_printf(out, "  output %%%d ", g->outputs.data[i]);
        put_quoted(out, i < g->output_names.len ? g->output_names.data[i] : "");
        sb_putc(out, '\n');
    }
}
