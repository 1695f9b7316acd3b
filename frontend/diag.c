/* diag.c: diagnostics in the command line's format.
 *
 *     FILE:LINE:COL: error: MESSAGE
 *     <the source line, verbatim>
 *     <the same line's bytes up to COL as spaces (tabs kept)>^
 *
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
    if (d->stopped) return false;
    if (d->nerrors >= FE_MAX_ERRORS) {
        sb_printf(d->out, "%s: too many errors; stopping\n", d->file);
        d->stopped = true;
        return false;
    }
    d->nerrors++;
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
