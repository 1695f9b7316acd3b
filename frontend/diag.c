/* diag.c: diagnostics in the command line's format.
 *
 *     FILE:LINE:COL: error: MESSAGE
 *     <the source line, verbatim>
 *     <the same line's bytes up to COL as spaces (tabs kept)>^
 *
 * A note (fe_note) follows the error it explains, in the same form with "note:"; it is
 * dropped when that error was (the cap below).
 * At most FE_MAX_ERRORS errors; the next one prints "FILE: too many errors; stopping"
 * instead and sets `stopped`, after which nothing more is reported. The source line is
 * found from the location's byte offset. Lines longer than SHOW_MAX bytes are shown as a
 * window around the column (the caret still points at the right byte); a NUL byte in an
 * echoed line is shown as '?' and a trailing CR is dropped, so the text stays a C string.
 */
#include "ast.h"

#include <stdio.h>
#include <string.h>

#define SHOW_MAX 4096  /* bytes of a source line shown at most */

void fe_fmt_byte(char *buf, size_t n, unsigned char c) {
    if (c == '\n') snprintf(buf, n, "'\\n'");
    else if (c == '\t') snprintf(buf, n, "'\\t'");
    else if (c == '\'') snprintf(buf, n, "'\\''");
    else if (c == '\\') snprintf(buf, n, "'\\\\'");
    else if (c >= 0x20 && c < 0x7f) snprintf(buf, n, "'%c'", c);
    else snprintf(buf, n, "'\\x%02x'", c);
}

/* Appends the source line holding `loc` and the caret line. */
static void show_line(FeDiag *d, FeLoc loc) {
    size_t off = loc.off <= d->len ? loc.off : d->len;
    size_t start = off, end = off;
    while (start > 0 && d->src[start - 1] != '\n') start--;
    while (end < d->len && d->src[end] != '\n') end++;
    if (end > start && d->src[end - 1] == '\r' && end - 1 > off) end--;
    size_t from = start;
    if (off - start > SHOW_MAX / 2) from = off - SHOW_MAX / 4;
    size_t to = end - from > SHOW_MAX ? from + SHOW_MAX : end;
    for (size_t i = from; i < to; i++) sb_putc(d->out, d->src[i] ? d->src[i] : '?');
    sb_putc(d->out, '\n');
    for (size_t i = from; i < off; i++) sb_putc(d->out, d->src[i] == '\t' ? '\t' : ' ');
    sb_puts(d->out, "^\n");
}

static bool count_error(FeDiag *d) {
    d->last_shown = false;
    if (d->stopped) return false;
    if (d->nerrors >= FE_MAX_ERRORS) {
        sb_printf(d->out, "%s: too many errors; stopping\n", d->file);
        d->stopped = true;
        return false;
    }
    d->nerrors++;
    d->last_shown = true;
    return true;
}

static void report(FeDiag *d, const FeLoc *loc, const char *kind, const char *fmt, va_list ap) {
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    char head[1400];
    if (loc) snprintf(head, sizeof head, "%s:%d:%d: %s: %s", d->file, loc->line, loc->col, kind, msg);
    else snprintf(head, sizeof head, "%s: %s: %s", d->file, kind, msg);
    if (kind[0] == 'e' && !d->first[0]) {
        size_t n = strlen(head);
        if (n >= sizeof d->first) n = sizeof d->first - 1;
        memcpy(d->first, head, n);
        d->first[n] = 0;
    }
    sb_puts(d->out, head);
    sb_putc(d->out, '\n');
    if (loc) show_line(d, *loc);
}

void fe_error(FeDiag *d, FeLoc loc, const char *fmt, ...) {
    if (!count_error(d)) return;
    va_list ap;
    va_start(ap, fmt);
    report(d, &loc, "error", fmt, ap);
    va_end(ap);
}

void fe_error_noloc(FeDiag *d, const char *fmt, ...) {
    if (!count_error(d)) return;
    va_list ap;
    va_start(ap, fmt);
    report(d, NULL, "error", fmt, ap);
    va_end(ap);
}

void fe_warning(FeDiag *d, FeLoc loc, const char *fmt, ...) {
    if (d->stopped) return;
    va_list ap;
    va_start(ap, fmt);
    report(d, &loc, "warning", fmt, ap);
    va_end(ap);
}

void fe_note(FeDiag *d, FeLoc loc, const char *fmt, ...) {
    if (d->stopped || !d->last_shown) return;
    va_list ap;
    va_start(ap, fmt);
    report(d, &loc, "note", fmt, ap);
    va_end(ap);
}

/* ---- "did you mean" ------------------------------------------------------------------------ */

static int lower_ascii(int c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

/* Edit distance between a and b (at most FE_SUGGEST_MAX bytes each): insertions, deletions,
 * substitutions and swaps of two neighbours cost 1, a change of case alone 0 (the optimal
 * string alignment distance, ignoring case). */
static int edit_distance(const char *a, size_t na, const char *b, size_t nb) {
    int rows[3][FE_SUGGEST_MAX + 1];
    int *pp = rows[0], *prev = rows[1], *cur = rows[2];
    for (size_t j = 0; j <= nb; j++) prev[j] = (int)j;
    for (size_t i = 1; i <= na; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= nb; j++) {
            int ca = lower_ascii((unsigned char)a[i - 1]), cb = lower_ascii((unsigned char)b[j - 1]);
            int best = prev[j - 1] + (ca != cb);
            if (prev[j] + 1 < best) best = prev[j] + 1;
            if (cur[j - 1] + 1 < best) best = cur[j - 1] + 1;
            if (i > 1 && j > 1 && ca == lower_ascii((unsigned char)b[j - 2]) &&
                lower_ascii((unsigned char)a[i - 2]) == cb && pp[j - 2] + 1 < best)
                best = pp[j - 2] + 1;
            cur[j] = best;
        }
        int *t = pp;
        pp = prev;
        prev = cur;
        cur = t;
    }
    return prev[nb];
}

void fe_suggest(FeSuggest *s, const char *cand) {
    if (!cand || !s->name || strcmp(cand, s->name) == 0) return;
    size_t na = strlen(s->name), nb = strlen(cand);
    if (na > FE_SUGGEST_MAX || nb > FE_SUGGEST_MAX) return;
    /* A likely slip, not another word: the edits allowed grow with the name's length, and
     * names of one or two bytes get only a change of case. */
    int limit = na <= 2 ? 0 : na <= 5 ? 1 : na <= 9 ? 2 : 3;
    int dist = edit_distance(s->name, na, cand, nb);
    if (dist > limit || (s->best && dist >= s->dist)) return;
    s->best = cand;
    s->dist = dist;
}
