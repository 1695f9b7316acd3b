/* support.c: allocation with fault injection, arenas, vectors, errors, string buffers,
 * atomic file writes. See support.h. */
#include "support.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- allocation ------------------------------------------------------------------------ */
static _Atomic long alloc_calls;
static _Atomic long alloc_fail_at;

void fc_alloc_fail_at(long n) {
    atomic_store(&alloc_calls, 0);
    atomic_store(&alloc_fail_at, n);
}
long fc_alloc_count(void) { return atomic_load(&alloc_calls); }

static bool inject_failure(void) {
    long n = atomic_fetch_add(&alloc_calls, 1) + 1;
    long at = atomic_load(&alloc_fail_at);
    return at > 0 && n == at;
}

void *fc_alloc(size_t nbytes) {
    if (inject_failure()) return NULL;
    return malloc(nbytes ? nbytes : 1);
}
void *fc_calloc(size_t n, size_t size) {
    if (inject_failure()) return NULL;
    return calloc(n ? n : 1, size ? size : 1);
}
void *fc_realloc(void *p, size_t nbytes) {
    if (inject_failure()) return NULL;
    return realloc(p, nbytes ? nbytes : 1);
}
void fc_free(void *p) { free(p); }
char *fc_strndup(const char *s, size_t n) {
    char *d = fc_alloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}
char *fc_strdup(const char *s) { return fc_strndup(s, strlen(s)); }

/* ---- arena ------------------------------------------------------------------------------ */
struct ArenaChunk {
    ArenaChunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

void *arena_alloc(Arena *a, size_t nbytes) {
    if (a->failed) return NULL;
    size_t need = (nbytes + 15) & ~(size_t)15;
    if (need < nbytes) { a->failed = true; return NULL; }
    ArenaChunk *c = a->head;
    if (!c || c->cap - c->used < need) {
        size_t cap = need > 65536 - sizeof(ArenaChunk) ? need : 65536 - sizeof(ArenaChunk);
        c = fc_alloc(sizeof(ArenaChunk) + cap);
        if (!c) { a->failed = true; return NULL; }
        c->next = a->head;
        c->used = 0;
        c->cap = cap;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += need;
    memset(p, 0, need);
    return p;
}
char *arena_strndup(Arena *a, const char *s, size_t n) {
    char *d = arena_alloc(a, n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}
char *arena_strdup(Arena *a, const char *s) { return arena_strndup(a, s, strlen(s)); }
void arena_free(Arena *a) {
    for (ArenaChunk *c = a->head, *n; c; c = n) {
        n = c->next;
        fc_free(c);
    }
    a->head = NULL;
    a->failed = false;
}

/* ---- vectors ------------------------------------------------------------------------------ */
bool fc_vec_grow(void **data, int *cap, int need, size_t elem) {
    if (need <= *cap) return true;
    if (need > (1 << 30)) return false;
    int ncap = *cap ? *cap : 8;
    while (ncap < need) ncap *= 2;
    void *p = fc_realloc(*data, (size_t)ncap * elem);
    if (!p) return false;
    *data = p;
    *cap = ncap;
    return true;
}

/* ---- errors -------------------------------------------------------------------------------- */
FcStatus fc_err_vset(FcErr *e, FcStatus status, const char *fmt, va_list ap) {
    if (!e) return status;
    e->status = status;
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    return status;
}
FcStatus fc_err_set(FcErr *e, FcStatus status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fc_err_vset(e, status, fmt, ap);
    va_end(ap);
    return status;
}
void fc_err_clear(FcErr *e) {
    if (!e) return;
    e->status = FC_OK;
    e->msg[0] = 0;
}

/* ---- string buffers ------------------------------------------------------------------------ */
static bool sb_reserve(StrBuf *sb, size_t extra) {
    if (sb->failed) return false;
    if (sb->len + extra + 1 <= sb->cap) return true;
    size_t ncap = sb->cap ? sb->cap : 256;
    while (ncap < sb->len + extra + 1) {
        if (ncap > SIZE_MAX / 2) { sb->failed = true; return false; }
        ncap *= 2;
    }
    char *p = fc_realloc(sb->data, ncap);
    if (!p) { sb->failed = true; return false; }
    sb->data = p;
    sb->cap = ncap;
    return true;
}
void sb_vprintf(StrBuf *sb, const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0) { sb->failed = true; return; }
    if (!sb_reserve(sb, (size_t)n)) return;
    vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
    sb->len += (size_t)n;
}
void sb_printf(StrBuf *sb, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(sb, fmt, ap);
    va_end(ap);
}
void sb_puts(StrBuf *sb, const char *s) {
    size_t n = strlen(s);
    if (!sb_reserve(sb, n)) return;
    memcpy(sb->data + sb->len, s, n + 1);
    sb->len += n;
}
void sb_putc(StrBuf *sb, char c) {
    if (!sb_reserve(sb, 1)) return;
    sb->data[sb->len++] = c;
    sb->data[sb->len] = 0;
}
void sb_free(StrBuf *sb) {
    fc_free(sb->data);
    sb->data = NULL;
    sb->len = sb->cap = 0;
    sb->failed = false;
}
char *sb_take(StrBuf *sb) {
    if (sb->failed) { sb_free(sb); return NULL; }
    if (!sb->data && !sb_reserve(sb, 0)) return NULL;
    if (sb->len == 0) sb->data[0] = 0;
    char *p = sb->data;
    sb->data = NULL;
    sb->len = sb->cap = 0;
    return p;
}

/* ---- files ------------------------------------------------------------------------------------ */
FcStatus fc_write_file_atomic(const char *path, const void *data, size_t len, FcErr *err) {
    size_t n = strlen(path);
    char *tmp = fc_alloc(n + 32);
    if (!tmp) return FC_OOM(err);
    snprintf(tmp, n + 32, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        FcStatus s = fc_err_set(err, FC_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
        fc_free(tmp);
        return s;
    }
    const char *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0) {
            if (errno == EINTR) continue;
            FcStatus s = fc_err_set(err, FC_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
            close(fd);
            unlink(tmp);
            fc_free(tmp);
            return s;
        }
        p += w;
        left -= (size_t)w;
    }
    if (close(fd) != 0 || rename(tmp, path) != 0) {
        FcStatus s = fc_err_set(err, FC_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
        unlink(tmp);
        fc_free(tmp);
        return s;
    }
    fc_free(tmp);
    return FC_OK;
}

FcStatus fc_read_file(const char *path, size_t max_bytes, char **data, size_t *len, FcErr *err) {
    *data = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return fc_err_set(err, FC_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        return fc_err_set(err, FC_ERR_IO, "cannot read '%s': is a directory", path);
    }
    StrBuf sb = {0};
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        if (sb.len + n > max_bytes) {
            fclose(f);
            sb_free(&sb);
            return fc_err_set(err, FC_ERR_INPUT, "'%s' is larger than the limit of %zu bytes", path,
                              max_bytes);
        }
        if (!sb_reserve(&sb, n)) break;
        memcpy(sb.data + sb.len, buf, n);
        sb.len += n;
        sb.data[sb.len] = 0;
    }
    bool ioerr = ferror(f);
    fclose(f);
    if (ioerr) {
        sb_free(&sb);
        return fc_err_set(err, FC_ERR_IO, "cannot read '%s'", path);
    }
    size_t total = sb.len;
    char *p = sb_take(&sb);
    if (!p) return FC_OOM(err);
    *data = p;
    *len = total;
    return FC_OK;
}

void fc_fmt_double(char *buf, size_t n, double v) {
    for (int prec = 9; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    /* make sure a float reads back as a float: "1" -> "1.0" (inf/nan stay as they are) */
    if (!strpbrk(buf, ".eEni")) {
        size_t l = strlen(buf);
        if (l + 2 < n) memcpy(buf + l, ".0", 3);
    }
}
