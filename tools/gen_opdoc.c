/* gen_opdoc.c: prints docs/ops.md, the language reference's list of ops, from the op table
 * (ir/ops.def: name, inputs, results, category, IR attributes, shape rule, flops) and the
 * source signatures (frontend/opsig.def: argument names, defaults, dtypes, result, meaning).
 * The page is generated so that it cannot drift from what the compiler accepts: the frontend
 * binds arguments with the same opsig.def rows.
 *
 * usage: gen_opdoc [-o FILE]        write the page (stdout without -o)
 *        gen_opdoc --check FILE     exit 1 with a diff hint when FILE differs from the page
 * Exits 2 when the tables disagree (an op without a signature row, an optional argument
 * without a default, a default for no such argument).
 */
#include "ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIG_ARGS 8

typedef struct Sig {
    const char *kind, *defaults, *dtypes, *result, *meaning;
    int nreq, nargs;
    const char *args[MAX_SIG_ARGS];
    int rows;   /* how many opsig.def rows name this op (must be 1) */
} Sig;

typedef struct Op {
    const char *name, *cat, *attrs, *shape;
    int min_in, max_in, nout, flops;
} Op;

static const Op ops[IR_OP_COUNT] = {
#define OP(ID, NAME, MININ, MAXIN, NOUT, CAT, ATTRS, SHAPE, FLOPS) \
    [IR_OP_##ID] = {NAME, #CAT, ATTRS, #SHAPE, MININ, MAXIN, NOUT, FLOPS},
#include "ops.def"
#undef OP
};

static Sig sigs[IR_OP_COUNT];

static void add_sig(IrOp id, const char *kind, int nreq, const char *defaults, const char *dtypes,
                    const char *result, const char *meaning, const char *const *args, int nargs) {
    Sig *s = &sigs[id];
    s->rows++;
    s->kind = kind, s->nreq = nreq, s->defaults = defaults, s->dtypes = dtypes;
    s->result = result, s->meaning = meaning, s->nargs = nargs;
    for (int i = 0; i < nargs && i < MAX_SIG_ARGS; i++) s->args[i] = args[i];
}

static void load_sigs(void) {
#define SIG(ID, KIND, NREQ, DEFAULTS, DTYPES, RESULT, MEANING, ...)                                  \
    do {                                                                                          \
        static const char *const a_[] = {__VA_ARGS__};                                            \
        add_sig(IR_OP_##ID, #KIND, NREQ, DEFAULTS, DTYPES, RESULT, MEANING, a_, (int)(sizeof a_ / sizeof a_[0])); \
    } while (0);
#include "opsig.def"
#undef SIG
}

/* The default of argument `arg` from a "name=value; name=value" list, into buf; false if none. */
static int find_default(const char *defaults, const char *arg, char *buf, size_t len) {
    size_t n = strlen(arg);
    for (const char *p = defaults; *p;) {
        const char *end = strstr(p, "; ");
        size_t item = end ? (size_t)(end - p) : strlen(p);
        if (item > n && strncmp(p, arg, n) == 0 && p[n] == '=') {
            snprintf(buf, len, "%.*s", (int)(item - n - 1), p + n + 1);
            return 1;
        }
        p += item + (end ? 2 : 0);
    }
    return 0;
}

/* Checks that the two tables agree; prints every disagreement. */
static int check_tables(void) {
    int bad = 0;
    char d[256];
    for (int i = 0; i < IR_OP_COUNT; i++) {
        const Sig *s = &sigs[i];
        if (s->rows != 1) {
            fprintf(stderr, "gen_opdoc: op '%s' of ir/ops.def has %d rows in frontend/opsig.def; expected 1\n",
                    ops[i].name, s->rows);
            bad = 1;
            continue;
        }
        if (s->nargs > MAX_SIG_ARGS || s->nreq > s->nargs) {
            fprintf(stderr, "gen_opdoc: op '%s': %d arguments, %d required\n", ops[i].name, s->nargs, s->nreq);
            bad = 1;
            continue;
        }
        for (int a = s->nreq; a < s->nargs; a++)
            if (!find_default(s->defaults, s->args[a], d, sizeof d)) {
                fprintf(stderr, "gen_opdoc: op '%s': optional argument '%s' has no default in opsig.def\n",
                        ops[i].name, s->args[a]);
                bad = 1;
            }
        /* every default names an optional argument */
        for (const char *p = s->defaults; *p;) {
            const char *eq = strchr(p, '='), *end = strstr(p, "; ");
            size_t item = end ? (size_t)(end - p) : strlen(p);
            int found = 0;
            for (int a = s->nreq; a < s->nargs && eq; a++)
                if (strlen(s->args[a]) == (size_t)(eq - p) && strncmp(s->args[a], p, (size_t)(eq - p)) == 0) found = 1;
            if (!found) {
                fprintf(stderr, "gen_opdoc: op '%s': default '%.*s' names no optional argument\n", ops[i].name,
                        (int)item, p);
                bad = 1;
            }
            p += item + (end ? 2 : 0);
        }
    }
    return bad;
}

static const struct { const char *cat, *title, *note; } sections[] = {
    {"IR_CAT_UNARY", "Elementwise, one operand", "Also usable on constants, folded at compile time."},
    {"IR_CAT_BINARY", "Elementwise, two operands", "`+ - * /` are `add sub mul div`. Operands broadcast as in NumPy."},
    {"IR_CAT_COMPARE", "Comparisons", "`< <= > >= == !=` are `lt le gt ge eq ne`."},
    {"IR_CAT_SELECT", "Selection", ""},
    {"IR_CAT_CAST", "Conversion", ""},
    {"IR_CAT_REDUCE", "Reductions", "`axis` is an int or a list of ints; negative axes count from the end."},
    {"IR_CAT_COMPOSITE", "Composite ops",
     "Defined by their expansion into the ops above (passes/decompose.c); the compiler may fuse them."},
    {"IR_CAT_SHAPE", "Shape ops", "Index maps over their input: they move no data when fused."},
    {"IR_CAT_GENERATOR", "Generators", "No tensor input; `shape` is a list of sizes or one integer."},
    {"IR_CAT_GATHER", "Data-dependent reads", ""},
    {"IR_CAT_SCATTER", "Data-dependent writes", ""},
    {"IR_CAT_MATMUL", "Matrix product", ""},
};

/* Prints a table cell's text, escaping the `|` that would end the cell. */
static void cell(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '|') putc('\\', f);
        putc(*s, f);
    }
}

static void print_page(FILE *f) {
    fprintf(f, "<!-- Generated by tools/gen_opdoc.c from ir/ops.def and frontend/opsig.def; do not edit.\n"
               "     Update with: cmake --build build --target update_ops_doc -->\n");
    fprintf(f, "# Ops\n\n"
               "Every op of the block language, with its arguments in positional order (each may also be\n"
               "given by name), the defaults of the optional ones, the dtypes it takes, and its result.\n"
               "The rules shared by all ops (promotion, weak literals, broadcasting) are in\n"
               "[language.md](language.md). `i8` is a storage type: only `cast`, the shape ops, `gather`'s\n"
               "table and `where` take it, where their rows below say so; any other op given an i8\n"
               "tensor is an error.\n");
    char d[256];
    for (size_t c = 0; c < sizeof sections / sizeof sections[0]; c++) {
        fprintf(f, "\n## %s\n\n", sections[c].title);
        if (sections[c].note[0]) fprintf(f, "%s\n\n", sections[c].note);
        fprintf(f, "| call | computes | dtypes | result |\n| --- | --- | --- | --- |\n");
        for (int i = 0; i < IR_OP_COUNT; i++) {
            if (strcmp(ops[i].cat, sections[c].cat) != 0 || strcmp(sigs[i].kind, "INTERNAL") == 0) continue;
            const Sig *s = &sigs[i];
            fprintf(f, "| `%s(", ops[i].name);
            for (int a = 0; a < s->nargs; a++) {
                fprintf(f, "%s%s", a ? ", " : "", s->args[a]);
                if (a >= s->nreq && find_default(s->defaults, s->args[a], d, sizeof d) && d[0] != '(' &&
                    !strchr(d, ' '))
                    fprintf(f, "=%s", d);
                else if (a >= s->nreq)
                    fprintf(f, "?");
            }
            fprintf(f, ")` | ");
            cell(f, s->meaning);
            /* defaults that do not fit in the call's text: spelled out */
            int first = 1;
            for (int a = s->nreq; a < s->nargs; a++)
                if (find_default(s->defaults, s->args[a], d, sizeof d) && (d[0] == '(' || strchr(d, ' '))) {
                    fprintf(f, "%s`%s` omitted: %s", first ? ". " : "; ", s->args[a], d);
                    first = 0;
                }
            fprintf(f, " | ");
            cell(f, s->dtypes);
            fprintf(f, " | ");
            cell(f, s->result);
            fprintf(f, " |\n");
        }
    }
    fprintf(f, "\n## Made by the compiler\n\n"
               "Ops that passes put in the graph and the language does not have (their names are free for\n"
               "blocks and values). They appear in `--emit ir`.\n\n"
               "| op | inputs | computes | dtypes | result |\n| --- | --- | --- | --- | --- |\n");
    for (int i = 0; i < IR_OP_COUNT; i++) {
        const Sig *s = &sigs[i];
        if (strcmp(s->kind, "INTERNAL") != 0) continue;
        fprintf(f, "| `%s` | ", ops[i].name);
        for (int a = 0; a < s->nargs; a++) fprintf(f, "%s%s", a ? ", " : "", s->args[a]);
        fprintf(f, " | ");
        cell(f, s->meaning);
        fprintf(f, " | ");
        cell(f, s->dtypes);
        fprintf(f, " | ");
        cell(f, s->result);
        fprintf(f, " |\n");
    }
    fprintf(f, "\n## In the graph IR\n\n"
               "How each op appears in `--emit ir`: its tensor inputs, its results, the attributes it\n"
               "carries (slot:name, see docs/ir.md), the shape rule that checks it (ir/shape.c) and the\n"
               "flops the cost model counts per output element (reductions and scatter_add: per input element).\n\n"
               "| op | inputs | results | attributes | shape rule | flops |\n| --- | --- | --- | --- | --- | --- |\n");
    for (int i = 0; i < IR_OP_COUNT; i++) {
        const Op *o = &ops[i];
        char in[32], out[32];
        if (o->max_in < 0) snprintf(in, sizeof in, "%d or more", o->min_in);
        else if (o->min_in == o->max_in) snprintf(in, sizeof in, "%d", o->min_in);
        else snprintf(in, sizeof in, "%d to %d", o->min_in, o->max_in);
        if (o->nout < 0) snprintf(out, sizeof out, "from attributes");
        else snprintf(out, sizeof out, "%d", o->nout);
        char flops[48];
        if (i == IR_OP_MATMUL) snprintf(flops, sizeof flops, "2 per multiply-add");
        else snprintf(flops, sizeof flops, "%d", o->flops);
        fprintf(f, "| `%s` | %s | %s | %s%s%s | `%s` | %s |\n", o->name, in, out, o->attrs[0] ? "`" : "",
                o->attrs[0] ? o->attrs : "none", o->attrs[0] ? "`" : "", o->shape, flops);
    }
}

int main(int argc, char **argv) {
    load_sigs();
    if (check_tables()) return 2;
    if (argc == 3 && strcmp(argv[1], "--check") == 0) {
        char *want = NULL, *have = NULL;
        size_t nw = 0, nh = 0;
        FILE *m = open_memstream(&want, &nw);
        if (!m) return 2;
        print_page(m);
        fclose(m);
        FILE *f = fopen(argv[2], "rb");
        if (f) {
            FILE *h = open_memstream(&have, &nh);
            int ch;
            while (h && (ch = getc(f)) != EOF) putc(ch, h);
            fclose(f);
            if (h) fclose(h);
        }
        int same = have && nh == nw && memcmp(have, want, nw) == 0;
        if (!same)
            fprintf(stderr,
                    "%s is stale: it differs from what ir/ops.def and frontend/opsig.def give.\n"
                    "Update it with: cmake --build build --target update_ops_doc (then review the diff)\n",
                    argv[2]);
        free(want);
        free(have);
        return same ? 0 : 1;
    }
    if (argc == 3 && strcmp(argv[1], "-o") == 0) {
        FILE *f = fopen(argv[2], "wb");
        if (!f) { perror(argv[2]); return 2; }
        print_page(f);
        return fclose(f) == 0 ? 0 : 2;
    }
    if (argc != 1) {
        fprintf(stderr, "usage: gen_opdoc [-o FILE] | --check FILE\n");
        return 2;
    }
    print_page(stdout);
    return 0;
}
