/* npy.c: reading and writing NumPy .npy files (declared in host.h).
 *
 * Entry points: rt_npy_read, rt_npy_write.
 *
 * The format: the magic "\x93NUMPY", a major and minor version byte, the header length
 * (2 bytes little-endian in version 1.0, 4 bytes in 2.0 and 3.0), then the header, a Python
 * dict literal such as {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
 * padded with spaces and ending in '\n', then the raw data in C order.
 *
 * The reader never trusts the file: every length is bounded (the header at 1 MiB, the
 * data by the expected shape, overflow-checked), the header is parsed by a small strict
 * recursive-descent parser over exactly its bytes (known keys only, each once; strings,
 * True/False and tuples of non-negative integers; anything else is an error naming the byte
 * offset), and data shorter or longer than the header says is an error. Every message
 * starts with the path.
 */
#include "host.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

enum { NPY_MAX_HEADER = 1 << 20, NPY_MAX_DESCR = 32, NPY_MAX_DIMS = 32 };

static const char NPY_MAGIC[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

/* ---- header parsing ----------------------------------------------------------------------- */
typedef struct HdrParser {
    const char *s, *p, *end;   /* header text [s, end); p the cursor */
    const char *path;
    FcErr *err;
} HdrParser;

typedef struct NpyHeader {
    char descr[NPY_MAX_DESCR + 1];
    bool fortran;
    int rank;
    int64_t dims[NPY_MAX_DIMS];
    bool has_descr, has_fortran, has_shape;
} NpyHeader;

static FcStatus hdr_error(HdrParser *hp, const char *what) {
    return fc_err_set(hp->err, FC_ERR_INPUT, "%s: malformed .npy header at byte %ld: expected %s", hp->path,
                      (long)(hp->p - hp->s), what);
}

static void skip_ws(HdrParser *hp) {
    while (hp->p < hp->end && (*hp->p == ' ' || *hp->p == '\t' || *hp->p == '\n' || *hp->p == '\r')) hp->p++;
}

static bool accept(HdrParser *hp, char c) {
    skip_ws(hp);
    if (hp->p < hp->end && *hp->p == c) {
        hp->p++;
        return true;
    }
    return false;
}

/* A Python string literal in single or double quotes without escapes, at most cap chars. */
static FcStatus parse_string(HdrParser *hp, char *out, size_t cap) {
    skip_ws(hp);
    if (hp->p >= hp->end || (*hp->p != '\'' && *hp->p != '"')) return hdr_error(hp, "a quoted string");
    char q = *hp->p++;
    size_t n = 0;
    while (hp->p < hp->end && *hp->p != q) {
        if (*hp->p == '\\' || *hp->p == '\n') return hdr_error(hp, "a plain string (no escapes or line breaks)");
        if (n + 1 >= cap) return hdr_error(hp, "a shorter string");
        out[n++] = *hp->p++;
    }
    if (hp->p >= hp->end) return hdr_error(hp, "the closing quote of a string");
    hp->p++;
    out[n] = 0;
    return FC_OK;
}

static bool accept_word(HdrParser *hp, const char *w) {
    skip_ws(hp);
    size_t n = strlen(w);
    if ((size_t)(hp->end - hp->p) >= n && memcmp(hp->p, w, n) == 0) {
        const char *after = hp->p + n;
        if (after < hp->end && ((*after >= 'a' && *after <= 'z') || (*after >= 'A' && *after <= 'Z') ||
                                (*after >= '0' && *after <= '9') || *after == '_'))
            return false;
        hp->p = after;
        return true;
    }
    return false;
}

/* A tuple of non-negative integers: () (3,) (3, 4) (3, 4,) */
static FcStatus parse_shape(HdrParser *hp, NpyHeader *h) {
    if (!accept(hp, '(')) return hdr_error(hp, "'(' starting the shape tuple");
    h->rank = 0;
    if (accept(hp, ')')) return FC_OK;
    for (;;) {
        skip_ws(hp);
        if (hp->p >= hp->end || *hp->p < '0' || *hp->p > '9') return hdr_error(hp, "a non-negative integer in the shape");
        int64_t v = 0;
        int digits = 0;
        while (hp->p < hp->end && *hp->p >= '0' && *hp->p <= '9') {
            if (++digits > 18) return hdr_error(hp, "a dimension below 10^18");
            v = v * 10 + (*hp->p++ - '0');
        }
        if (hp->p < hp->end && *hp->p == 'L') hp->p++; /* Python 2 long suffix, old NumPy */
        if (h->rank >= NPY_MAX_DIMS) return hdr_error(hp, "at most 32 dimensions");
        h->dims[h->rank++] = v;
        bool comma = accept(hp, ',');
        skip_ws(hp);
        if (hp->p < hp->end && *hp->p == ')') {
            if (h->rank == 1 && !comma) return hdr_error(hp, "',' in a one-element tuple");
            hp->p++;
            return FC_OK;
        }
        if (!comma) return hdr_error(hp, "',' or ')' in the shape tuple");
    }
}

static FcStatus parse_header(HdrParser *hp, NpyHeader *h) {
    if (!accept(hp, '{')) return hdr_error(hp, "'{'");
    for (;;) {
        if (accept(hp, '}')) break;
        char key[64];
        FC_TRY(parse_string(hp, key, sizeof key));
        if (!accept(hp, ':')) return hdr_error(hp, "':' after a key");
        if (strcmp(key, "descr") == 0) {
            if (h->has_descr) return fc_err_set(hp->err, FC_ERR_INPUT, "%s: key 'descr' appears twice in the .npy header", hp->path);
            skip_ws(hp);
            if (hp->p < hp->end && *hp->p == '[')
                return fc_err_set(hp->err, FC_ERR_INPUT, "%s: structured dtypes are not supported", hp->path);
            FC_TRY(parse_string(hp, h->descr, sizeof h->descr));
            h->has_descr = true;
        } else if (strcmp(key, "fortran_order") == 0) {
            if (h->has_fortran) return fc_err_set(hp->err, FC_ERR_INPUT, "%s: key 'fortran_order' appears twice in the .npy header", hp->path);
            if (accept_word(hp, "True")) h->fortran = true;
            else if (accept_word(hp, "False")) h->fortran = false;
            else return hdr_error(hp, "True or False");
            h->has_fortran = true;
        } else if (strcmp(key, "shape") == 0) {
            if (h->has_shape) return fc_err_set(hp->err, FC_ERR_INPUT, "%s: key 'shape' appears twice in the .npy header", hp->path);
            FC_TRY(parse_shape(hp, h));
            h->has_shape = true;
        } else {
            return fc_err_set(hp->err, FC_ERR_INPUT, "%s: unknown key '%s' in the .npy header", hp->path, key);
        }
        if (accept(hp, '}')) break;
        if (!accept(hp, ',')) return hdr_error(hp, "',' or '}' after a value");
    }
    skip_ws(hp);
    if (hp->p != hp->end) return hdr_error(hp, "only spaces after the closing '}'");
    const char *missing = !h->has_descr ? "descr" : !h->has_fortran ? "fortran_order" : !h->has_shape ? "shape" : NULL;
    if (missing) return fc_err_set(hp->err, FC_ERR_INPUT, "%s: the .npy header has no '%s'", hp->path, missing);
    return FC_OK;
}

/* ---- dtypes ----------------------------------------------------------------------------------- */
static bool host_little_endian(void) {
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* Integer data: i8, i32, i64 (not bool). */
static bool int_data(FcDtype t) { return ir_dtype_is_int(t) || t == FC_I8; }

/* The fusec dtype of a descr, or an error that names it. */
static FcStatus descr_dtype(const char *path, const char *d, FcDtype *out, FcErr *err) {
    static const struct { const char *code; FcDtype t; } known[] = {
        {"f8", FC_F64}, {"f4", FC_F32}, {"f2", FC_F16}, {"i4", FC_I32}, {"i8", FC_I64}, {"b1", FC_BOOL},
        {"i1", FC_I8}};
    const char *supported = "<f8 <f4 <f2 <i4 <i8 |b1 |i1";
    char order = d[0];
    if (order == '<' || order == '>' || order == '|' || order == '=') {
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
            if (strcmp(d + 1, known[i].code) != 0) continue;
            bool one_byte = fc_dtype_size(known[i].t) == 1;
            if (order == '>' && !one_byte)
                return fc_err_set(err, FC_ERR_INPUT, "%s: big-endian data ('%s') is not supported; save it little-endian (a.astype('<%s'))",
                                  path, d, d + 1);
            if ((order == '|' && !one_byte) || (order == '=' && !one_byte && !host_little_endian()))
                break;
            *out = known[i].t;
            return FC_OK;
        }
    }
    return fc_err_set(err, FC_ERR_INPUT, "%s: unsupported dtype '%s' (supported: %s)", path, d, supported);
}

static void shape_str(const int64_t *dims, int rank, char *buf, size_t n) {
    size_t at = 0;
    int w = snprintf(buf, n, "[");
    at = w > 0 ? (size_t)w : 0;
    for (int i = 0; i < rank && at < n; i++) {
        w = snprintf(buf + at, n - at, "%s%lld", i ? ", " : "", (long long)dims[i]);
        if (w < 0) return;
        at += (size_t)w;
    }
    if (at < n) snprintf(buf + at, n - at, "]");
}

/* ---- reading ---------------------------------------------------------------------------------- */
static void read_exact(FILE *f, void *buf, size_t n, size_t *got) { *got = n ? fread(buf, 1, n, f) : 0; }

FcStatus rt_npy_read(const char *path, FcDtype want, const IrShape *want_shape, void **data,
                     FcErr *err) {
    *data = NULL;
    if ((unsigned)want >= FC_DTYPE_COUNT || !want_shape || want_shape->rank < 0 || want_shape->rank > IR_MAX_RANK)
        return fc_err_set(err, FC_ERR_USAGE, "%s: bad target dtype or shape", path);
    FILE *f = fopen(path, "rb");
    if (!f) return fc_err_set(err, FC_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    FcStatus st = FC_OK;
    char *hdr = NULL, *tmp = NULL, *out = NULL;
    unsigned char pre[12];
    size_t got;
    read_exact(f, pre, 8, &got);
    if (got < 8 || memcmp(pre, NPY_MAGIC, 6) != 0) {
        st = fc_err_set(err, FC_ERR_INPUT, "%s: not a .npy file (it does not start with \\x93NUMPY)", path);
        goto done;
    }
    int major = pre[6], minor = pre[7];
    if (major < 1 || major > 3 || minor != 0) {
        st = fc_err_set(err, FC_ERR_INPUT, "%s: unsupported .npy format version %d.%d (1.0, 2.0 and 3.0 are supported)",
                        path, major, minor);
        goto done;
    }
    size_t lenbytes = major == 1 ? 2 : 4;
    read_exact(f, pre + 8, lenbytes, &got);
    if (got < lenbytes) {
        st = fc_err_set(err, FC_ERR_INPUT, "%s: truncated .npy file (it ends inside the header length)", path);
        goto done;
    }
    uint32_t hlen = major == 1 ? (uint32_t)pre[8] | (uint32_t)pre[9] << 8
                               : (uint32_t)pre[8] | (uint32_t)pre[9] << 8 | (uint32_t)pre[10] << 16 | (uint32_t)pre[11] << 24;
    if (hlen > NPY_MAX_HEADER) {
        st = fc_err_set(err, FC_ERR_INPUT, "%s: .npy header length %lu exceeds the limit of %d bytes", path,
                        (unsigned long)hlen, NPY_MAX_HEADER);
        goto done;
    }
    hdr = fc_alloc(hlen + 1);
    if (!hdr) {
        st = FC_OOM(err);
        goto done;
    }
    read_exact(f, hdr, hlen, &got);
    if (got < hlen) {
        st = fc_err_set(err, FC_ERR_INPUT, "%s: truncated .npy header (expected %lu bytes, found %lu)", path,
                        (unsigned long)hlen, (unsigned long)got);
        goto done;
    }
    hdr[hlen] = 0;
    NpyHeader h;
    memset(&h, 0, sizeof h);
    HdrParser hp = {hdr, hdr, hdr + hlen, path, err};
    if ((st = parse_header(&hp, &h)) != FC_OK) goto done;
    FcDtype ft = FC_F32;
    if ((st = descr_dtype(path, h.descr, &ft, err)) != FC_OK) goto done;
    bool scalar_like = true; /* a Fortran-order array with at most one dim > 1 is also C order */
    for (int i = 0, big = 0; i < h.rank; i++)
        if (h.dims[i] > 1 && ++big > 1) scalar_like = false;
    if (h.fortran && !scalar_like) {
        st = fc_err_set(err, FC_ERR_INPUT, "%s: Fortran-order data is not supported; save it in C order (np.ascontiguousarray)",
                        path);
        goto done;
    }
    bool same = h.rank == want_shape->rank;
    for (int i = 0; same && i < h.rank; i++) same = h.dims[i] == want_shape->dims[i];
    if (!same) {
        char a[40 * NPY_MAX_DIMS], b[40 * IR_MAX_RANK];
        shape_str(h.dims, h.rank, a, sizeof a);
        shape_str(want_shape->dims, want_shape->rank, b, sizeof b);
        st = fc_err_set(err, FC_ERR_INPUT, "%s: shape %s does not match the expected %s", path, a, b);
        goto done;
    }
    /* integer data goes into a float or an integer tensor (i8 one of them), float data into a
     * float tensor, bool into bool */
    bool ok = (ir_dtype_is_float(want) && (ir_dtype_is_float(ft) || int_data(ft))) ||
              (int_data(want) && int_data(ft)) || (want == FC_BOOL && ft == FC_BOOL);
    if (!ok) {
        const char *kind = ir_dtype_is_float(ft) ? "float" : ft == FC_BOOL ? "bool" : "integer";
        st = fc_err_set(err, FC_ERR_INPUT, "%s: cannot load %s data (%s) into a tensor of dtype %s", path, kind,
                        fc_dtype_name(ft), fc_dtype_name(want));
        goto done;
    }
    int64_t numel = 1, fbytes, obytes;
    for (int i = 0; i < h.rank; i++) numel *= h.dims[i]; /* equal to the target's: fits */
    if (!fc_mul64(numel, (int64_t)fc_dtype_size(ft), &fbytes) || !fc_mul64(numel, (int64_t)fc_dtype_size(want), &obytes) ||
        (uint64_t)fbytes > SIZE_MAX / 2 || (uint64_t)obytes > SIZE_MAX / 2) {
        st = fc_err_set(err, FC_ERR_INPUT, "%s: tensor too large", path);
        goto done;
    }
    out = fc_alloc(obytes > 0 ? (size_t)obytes : 1);
    if (ft != want) tmp = fc_alloc(fbytes > 0 ? (size_t)fbytes : 1);
    char *raw = ft == want ? out : tmp;
    if (!out || !raw) {
        st = FC_OOM(err);
        goto done;
    }
    read_exact(f, raw, (size_t)fbytes, &got);
    if (got < (size_t)fbytes) {
        st = fc_err_set(err, FC_ERR_INPUT, "%s: truncated .npy data (expected %lld bytes after the header, found %lu)",
                        path, (long long)fbytes, (unsigned long)got);
        goto done;
    }
    if (fgetc(f) != EOF) {
        st = fc_err_set(err, FC_ERR_INPUT, "%s: the file is longer than its header says (data beyond %lld bytes)",
                        path, (long long)fbytes);
        goto done;
    }
    if (ferror(f)) {
        st = fc_err_set(err, FC_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
        goto done;
    }
    if (ft == FC_BOOL) { /* any non-zero byte is true */
        for (int64_t i = 0; i < numel; i++) ((unsigned char *)out)[i] = ((unsigned char *)raw)[i] != 0;
    } else if (int_data(ft) && int_data(want) && fc_dtype_size(want) < fc_dtype_size(ft)) {
        int64_t lo = want == FC_I8 ? INT8_MIN : INT32_MIN, hi = want == FC_I8 ? INT8_MAX : INT32_MAX;
        for (int64_t i = 0; i < numel; i++) {
            int64_t v;
            if (ft == FC_I64) memcpy(&v, raw + i * 8, 8);
            else { int32_t w; memcpy(&w, raw + i * 4, 4); v = w; }
            if (v < lo || v > hi) {
                st = fc_err_set(err, FC_ERR_INPUT, "%s: value %lld at index %lld does not fit in %s", path, (long long)v,
                                (long long)i, fc_dtype_name(want));
                goto done;
            }
        }
        rt_host_convert(want, out, ft, raw, numel);
    } else if (ft != want) {
        rt_host_convert(want, out, ft, raw, numel);
    }
    *data = out;
    out = NULL;
done:
    fc_free(tmp);
    fc_free(out);
    fc_free(hdr);
    fclose(f);
    return st;
}

/* ---- writing ------------------------------------------------------------------------------------ */
FcStatus rt_npy_write(const char *path, FcDtype t, const IrShape *shape, const void *data,
                      FcErr *err) {
    if ((unsigned)t >= FC_DTYPE_COUNT || !shape || shape->rank < 0 || shape->rank > IR_MAX_RANK)
        return fc_err_set(err, FC_ERR_USAGE, "%s: bad dtype or shape to write", path);
    FcDtype ft = (t == FC_BF16 || t == FC_F8E4M3 || t == FC_F8E5M2) ? FC_F32 : t;
    const char *descr = ft == FC_F64 ? "<f8" : ft == FC_F32 ? "<f4" : ft == FC_F16 ? "<f2"
                      : ft == FC_I32 ? "<i4" : ft == FC_I64 ? "<i8" : ft == FC_I8 ? "|i1" : "|b1";
    char dict[512], dims[40 * IR_MAX_RANK] = "";
    size_t at = 0;
    for (int i = 0; i < shape->rank; i++) {
        int w = snprintf(dims + at, sizeof dims - at, "%s%lld", i ? ", " : "", (long long)shape->dims[i]);
        if (w < 0 || (size_t)w >= sizeof dims - at) return fc_err_set(err, FC_ERR_USAGE, "%s: bad shape to write", path);
        at += (size_t)w;
    }
    int dl = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%s%s), }", descr, dims,
                      shape->rank == 1 ? "," : "");
    if (dl < 0 || (size_t)dl >= sizeof dict) return fc_err_set(err, FC_ERR_USAGE, "%s: bad shape to write", path);
    size_t hlen = (size_t)dl + 1; /* + '\n' */
    hlen += (64 - (10 + hlen) % 64) % 64;
    int64_t numel, dbytes, total;
    if (!ir_shape_numel(shape, &numel) || !fc_mul64(numel, (int64_t)fc_dtype_size(ft), &dbytes) ||
        !fc_add64(dbytes, 10 + (int64_t)hlen, &total) || (uint64_t)total > SIZE_MAX / 2)
        return fc_err_set(err, FC_ERR_INPUT, "%s: tensor too large to write", path);
    unsigned char *buf = fc_alloc((size_t)total);
    if (!buf) return FC_OOM(err);
    memcpy(buf, NPY_MAGIC, 6);
    buf[6] = 1;
    buf[7] = 0;
    buf[8] = (unsigned char)(hlen & 0xff);
    buf[9] = (unsigned char)(hlen >> 8);
    memset(buf + 10, ' ', hlen);
    memcpy(buf + 10, dict, (size_t)dl);
    buf[10 + hlen - 1] = '\n';
    rt_host_convert(ft, buf + 10 + hlen, t, data, numel);
    FcStatus st = fc_write_file_atomic(path, buf, (size_t)total, err);
    fc_free(buf);
    return st;
}
