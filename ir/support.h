/* support.h: the small pieces every folder uses.
 *
 * - fc_alloc/fc_free: every allocation fusec makes goes through these, so the
 *   fault-injection tests can fail the Nth one (fc_alloc_fail_at).
 * - Arena: bump allocator, one per lifetime (AST, graph, pass scratch).
 * - Vec: growable arrays of plain data (FC_VEC_PUSH).
 * - Checked int64 arithmetic for shapes and byte counts.
 * - FcStatus and a per-handle error buffer (FcErr) that every layer fills.
 * - FC_CHECK: an internal-consistency check that stays on in release builds and
 *   returns FC_ERR_INTERNAL with file:line instead of aborting.
 */
#ifndef FUSEC_SUPPORT_H
#define FUSEC_SUPPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdarg.h>

#include "fusec.h" /* FcStatus codes are public */

/* ---- allocation ---------------------------------------------------------- */
void *fc_alloc(size_t nbytes);                 /* NULL on failure (or injected failure) */
void *fc_calloc(size_t n, size_t size);        /* zeroed; NULL on overflow or failure */
void *fc_realloc(void *p, size_t nbytes);      /* NULL on failure; p untouched then */
void fc_free(void *p);
char *fc_strdup(const char *s);
char *fc_strndup(const char *s, size_t n);
/* Fault injection: the Nth call (1-based) of fc_alloc/fc_calloc/fc_realloc from now
 * fails; 0 disables. fc_alloc_count() is the number of calls since the last reset. */
void fc_alloc_fail_at(long n);
long fc_alloc_count(void);

/* ---- arena --------------------------------------------------------------- */
typedef struct ArenaChunk ArenaChunk;
typedef struct Arena {
    ArenaChunk *head;
    bool failed;         /* an allocation failed; everything after returns NULL */
} Arena;
void *arena_alloc(Arena *a, size_t nbytes);    /* zeroed, 16-byte aligned; NULL on failure */
char *arena_strdup(Arena *a, const char *s);
char *arena_strndup(Arena *a, const char *s, size_t n);
void arena_free(Arena *a);                     /* frees everything; the arena is reusable */

/* ---- growable arrays ------------------------------------------------------ */
/* A Vec of T is a struct { T *data; int len, cap; }. Push returns false on OOM. */
#define FC_VEC(T) struct { T *data; int len, cap; }
bool fc_vec_grow(void **data, int *cap, int need, size_t elem);
#define FC_VEC_PUSH(v, x)                                                              \
    (((v)->len < (v)->cap ||                                                           \
      fc_vec_grow((void **)&(v)->data, &(v)->cap, (v)->len + 1, sizeof(*(v)->data)))   \
         ? ((v)->data[(v)->len++] = (x), true)                                         \
         : false)
#define FC_VEC_FREE(v) (fc_free((v)->data), (v)->data = NULL, (v)->len = (v)->cap = 0)

/* ---- checked arithmetic ---------------------------------------------------- */
/* Each returns false (and leaves *out unspecified) on signed 64-bit overflow. */
static inline bool fc_mul64(int64_t a, int64_t b, int64_t *out) { return !__builtin_mul_overflow(a, b, out); }
static inline bool fc_add64(int64_t a, int64_t b, int64_t *out) { return !__builtin_add_overflow(a, b, out); }

/* ---- errors ---------------------------------------------------------------- */
/* The text of the last error, kept per handle. */
typedef struct FcErr {
    FcStatus status;
    char msg[4096];
} FcErr;
/* Records status and a printf-style message (replacing the previous one); returns status. */
FcStatus fc_err_set(FcErr *e, FcStatus status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
FcStatus fc_err_vset(FcErr *e, FcStatus status, const char *fmt, va_list ap);
void fc_err_clear(FcErr *e);

/* An internal invariant: stays on in release builds. Returns FC_ERR_INTERNAL from the
 * enclosing function (which must return FcStatus) with file:line in the message. */
#define FC_CHECK(err, cond)                                                             \
    do {                                                                                \
        if (!(cond))                                                                    \
            return fc_err_set((err), FC_ERR_INTERNAL,                                   \
                              "internal error: %s:%d: check failed: %s", __FILE__,      \
                              __LINE__, #cond);                                         \
    } while (0)
/* Propagate a non-OK status. */
#define FC_TRY(expr)                                                                    \
    do {                                                                                \
        FcStatus fc_try_s_ = (expr);                                                    \
        if (fc_try_s_ != FC_OK) return fc_try_s_;                                       \
    } while (0)
#define FC_OOM(err) fc_err_set((err), FC_ERR_NOMEM, "out of memory (%s:%d)", __FILE__, __LINE__)

/* ---- growable string buffer ----------------------------------------------- */
typedef struct StrBuf {
    char *data;   /* NUL-terminated while !failed */
    size_t len, cap;
    bool failed;  /* an allocation failed; contents are incomplete */
} StrBuf;
void sb_printf(StrBuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_vprintf(StrBuf *sb, const char *fmt, va_list ap);
void sb_puts(StrBuf *sb, const char *s);
void sb_putc(StrBuf *sb, char c);
void sb_free(StrBuf *sb);
char *sb_take(StrBuf *sb);    /* returns the fc_alloc'd string (caller frees) or NULL if failed */

/* Writes `len` bytes to `path` atomically (temporary file in the same folder, then rename):
 * never leaves a partial file. Returns FC_ERR_IO with the reason in err. */
FcStatus fc_write_file_atomic(const char *path, const void *data, size_t len, FcErr *err);
/* Reads a whole file (adds a NUL). Caps the size at max_bytes (FC_ERR_INPUT beyond). */
FcStatus fc_read_file(const char *path, size_t max_bytes, char **data, size_t *len, FcErr *err);

/* Prints a double so that it parses back to the same value (shortest of %.9g..%.17g). */
void fc_fmt_double(char *buf, size_t n, double v);

#endif
