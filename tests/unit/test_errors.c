/* test_errors.c: the frontend's error catalog, tests/errors/NAME.tf with NAME.err.
 *
 * Each NAME.tf is compiled by fe_compile (file name "NAME.tf"); its diagnostics must equal
 * NAME.err byte for byte and the status must be an error. A first line
 * "#! -D NAME=VALUE ... --block NAME" gives options. FUSEC_UPDATE_GOLDEN=1 rewrites the
 * .err files (review the diff). Generated cases: 200,000 nested parentheses, and 4 KiB of
 * random bytes for several fixed seeds (an error with a location, no crash).
 */
#include "frontend.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (!b || fread(b, 1, (size_t)n, f) != (size_t)n) { fclose(f); free(b); return NULL; }
    fclose(f);
    b[n] = 0;
    *len = (size_t)n;
    return b;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Options from a "#! ..." first line. */
static void parse_opts(const char *src, FeOptions *o, FeDimBinding *dims, char store[][128]) {
    memset(o, 0, sizeof *o);
    if (strncmp(src, "#!", 2) != 0) return;
    const char *end = strchr(src, '\n');
    char line[512];
    size_t n = end ? (size_t)(end - src) : strlen(src);
    if (n >= sizeof line) n = sizeof line - 1;
    memcpy(line, src + 2, n - 2);
    line[n - 2] = 0;
    int ns = 0;
    for (char *tok = strtok(line, " "); tok; tok = strtok(NULL, " ")) {
        if (strcmp(tok, "-D") == 0 && (tok = strtok(NULL, " "))) {
            char *eq = strchr(tok, '=');
            if (!eq) continue;
            *eq = 0;
            snprintf(store[ns], 128, "%s", tok);
            dims[o->ndims].name = store[ns++];
            dims[o->ndims++].value = atoll(eq + 1);
        } else if (strcmp(tok, "--block") == 0 && (tok = strtok(NULL, " "))) {
            snprintf(store[ns], 128, "%s", tok);
            o->block = store[ns++];
        }
    }
    o->dims = dims;
}

static FcStatus compile(const char *src, size_t len, const char *name, const FeOptions *o, StrBuf *sb) {
    IrGraph *g = NULL;
    FcErr err = {0};
    FcStatus s = fe_compile(src, len, name, o, &g, sb, &err);
    if (g) ir_graph_free(g);
    if (s != FC_OK && err.msg[0] == 0) {
        fprintf(stderr, "%s: status %d without a message\n", name, s);
        failures++;
    }
    return s;
}

static void run_catalog(void) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tests/errors", FUSEC_SOURCE_DIR);
    DIR *d = opendir(dir);
    EXPECT(d != NULL, "cannot open %s", dir);
    if (!d) return;
    char *names[1024];
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < 1024;) {
        size_t l = strlen(e->d_name);
        if (l > 3 && strcmp(e->d_name + l - 3, ".tf") == 0) names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], cmp_str);
    bool update = getenv("FUSEC_UPDATE_GOLDEN") && strcmp(getenv("FUSEC_UPDATE_GOLDEN"), "1") == 0;
    EXPECT(n >= 30, "only %d cases in the catalog", n);
    for (int i = 0; i < n; i++) {
        char path[4200], epath[4200];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        snprintf(epath, sizeof epath, "%s/%.*s.err", dir, (int)strlen(names[i]) - 3, names[i]);
        size_t len, elen = 0;
        char *src = slurp(path, &len);
        EXPECT(src != NULL, "cannot read %s", path);
        if (!src) continue;
        FeOptions o;
        FeDimBinding dims[16];
        char store[32][128];
        parse_opts(src, &o, dims, store);
        StrBuf sb = {0};
        FcStatus s = compile(src, len, names[i], &o, &sb);
        const char *got = sb.data ? sb.data : "";
        EXPECT(s == FC_ERR_INPUT || s == FC_ERR_UNSUPPORTED, "%s: status %d, expected an error", names[i], s);
        if (update) {
            FILE *f = fopen(epath, "wb");
            EXPECT(f != NULL, "cannot write %s", epath);
            if (f) { fputs(got, f); fclose(f); }
        } else {
            char *want = slurp(epath, &elen);
            EXPECT(want != NULL, "missing %s (run with FUSEC_UPDATE_GOLDEN=1)", epath);
            if (want) {
                EXPECT(strcmp(got, want) == 0, "%s: diagnostics differ\n--- expected\n%s--- got\n%s", names[i], want, got);
                free(want);
            }
        }
        sb_free(&sb);
        free(src);
        free(names[i]);
    }
}

/* 200,000 nested parentheses: one clean error, no stack overflow. */
static void run_nested(void) {
    size_t depth = 200000;
    const char *head = "dim N = 4\nblock b(x: f32[N]) {\n    y = ";
    const char *tail = "\n    return y\n}\n";
    size_t len = strlen(head) + 2 * depth + 1 + strlen(tail);
    char *src = malloc(len + 1);
    size_t k = 0;
    memcpy(src, head, strlen(head)); k += strlen(head);
    memset(src + k, '(', depth); k += depth;
    src[k++] = 'x';
    memset(src + k, ')', depth); k += depth;
    memcpy(src + k, tail, strlen(tail)); k += strlen(tail);
    StrBuf sb = {0};
    FcStatus s = compile(src, k, "nested.tf", NULL, &sb);
    EXPECT(s == FC_ERR_INPUT, "nested: status %d", s);
    const char *want = "nested.tf:3:265: error: expression nested too deeply (limit 256)";
    EXPECT(sb.data && strncmp(sb.data, want, strlen(want)) == 0, "nested: got %.300s", sb.data ? sb.data : "");
    int nerr = 0;
    for (const char *q = sb.data; q && (q = strstr(q, ": error: ")); q++) nerr++;
    EXPECT(nerr == 1, "nested: %d errors", nerr);
    sb_free(&sb);
    /* the same with brackets, and a long chain of binary operators */
    for (size_t i = 0; i < depth; i++) { src[strlen(head) + i] = '['; src[strlen(head) + depth + 1 + i] = ']'; }
    s = compile(src, k, "nested.tf", NULL, &sb);
    EXPECT(s == FC_ERR_INPUT && sb.data && strstr(sb.data, "nested too deeply"), "brackets: %.300s", sb.data ? sb.data : "");
    sb_free(&sb);
    free(src);
    size_t terms = 100000;
    src = malloc(strlen(head) + 4 * terms + strlen(tail) + 8);
    k = 0;
    memcpy(src, head, strlen(head)); k += strlen(head);
    for (size_t i = 0; i < terms; i++) { memcpy(src + k, i ? " + x" : "x", i ? 4 : 1); k += i ? 4 : 1; }
    memcpy(src + k, tail, strlen(tail)); k += strlen(tail);
    s = compile(src, k, "chain.tf", NULL, &sb);
    EXPECT(s == FC_ERR_INPUT && sb.data && strstr(sb.data, "nested too deeply"), "chain: %.300s", sb.data ? sb.data : "");
    sb_free(&sb);
    /* a long run of unary minus signs is one node */
    k = 0;
    memcpy(src, head, strlen(head)); k += strlen(head);
    memset(src + k, '-', terms); k += terms;
    src[k++] = 'x';
    memcpy(src + k, tail, strlen(tail)); k += strlen(tail);
    s = compile(src, k, "minus.tf", NULL, &sb);
    EXPECT(s == FC_OK, "minus: %d %.300s", s, sb.data ? sb.data : "");
    sb_free(&sb);
    free(src);
}

/* 4 KiB of random bytes (fixed seeds): an error with a location, never a crash. */
static void run_random(void) {
    uint64_t st = 0x9E3779B97F4A7C15ull;
    for (int seed = 0; seed < 64; seed++) {
        char buf[4096];
        for (size_t i = 0; i < sizeof buf; i++) {
            st ^= st << 13; st ^= st >> 7; st ^= st << 17;
            buf[i] = (char)(st >> 24);
        }
        StrBuf sb = {0};
        FcStatus s = compile(buf, sizeof buf, "random.tf", NULL, &sb);
        EXPECT(s == FC_ERR_INPUT, "random seed %d: status %d", seed, s);
        int line = 0, col = 0;
        EXPECT(sb.data && sscanf(sb.data, "random.tf:%d:%d: error: ", &line, &col) == 2 && line >= 1 && col >= 1,
               "random seed %d: %.200s", seed, sb.data ? sb.data : "");
        sb_free(&sb);
    }
}

int main(void) {
    run_catalog();
    run_nested();
    run_random();
    if (failures) fprintf(stderr, "%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
