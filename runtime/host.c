/* host.c: host-side dtype helpers (see host.h): loads/stores with fusec's rounding rules,
 * bulk conversion, seeded random fill, comparison, and the --check tolerance rule.
 *
 * The narrow floats (f16, bf16, f8e4m3, f8e5m2) are converted with integer arithmetic on
 * the bits of the double: the significand is shifted right to the target's precision and
 * rounded to nearest even from the bits shifted out. (The interpreter uses a different,
 * arithmetic method on purpose; test_interp compares the two.)
 */
#include "host.h"

#include <math.h>
#include <string.h>

/* ---- narrow float formats ------------------------------------------------------------ */
typedef struct Fmt {
    int ebits, mbits;   /* exponent and stored mantissa bits */
    int bias;
    bool has_inf;       /* IEEE-style inf/NaN in the top exponent (else E4M3FN: NaN only) */
    bool saturate;      /* finite overflow saturates (f8) instead of giving inf */
} Fmt;

static const Fmt FMT_F16 = {5, 10, 15, true, false};
static const Fmt FMT_BF16 = {8, 7, 127, true, false};
static const Fmt FMT_E4M3 = {4, 3, 7, false, true};
static const Fmt FMT_E5M2 = {5, 2, 15, true, true};

static const Fmt *fmt_of(FcDtype t) {
    switch (t) {
    case FC_F16: return &FMT_F16;
    case FC_BF16: return &FMT_BF16;
    case FC_F8E4M3: return &FMT_E4M3;
    case FC_F8E5M2: return &FMT_E5M2;
    default: return NULL;
    }
}

static uint32_t fmt_max_finite(const Fmt *f) {
    uint32_t emax = (1u << f->ebits) - 1, mmask = (1u << f->mbits) - 1;
    if (f->has_inf) return ((emax - 1) << f->mbits) | mmask;
    return (emax << f->mbits) | (mmask - 1); /* E4M3FN: all ones is NaN */
}

static uint32_t fmt_nan(const Fmt *f) {
    uint32_t emax = (1u << f->ebits) - 1;
    if (f->has_inf) return (emax << f->mbits) | (1u << (f->mbits - 1)); /* quiet NaN */
    return (emax << f->mbits) | ((1u << f->mbits) - 1);
}

static uint32_t fmt_encode(const Fmt *f, double x) {
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    uint32_t sign = (uint32_t)(b >> 63) << (f->ebits + f->mbits);
    int dexp = (int)((b >> 52) & 0x7ff);
    uint64_t dman = b & ((UINT64_C(1) << 52) - 1);
    uint32_t emax = (1u << f->ebits) - 1;
    if (dexp == 0x7ff) {
        if (dman) return fmt_nan(f);
        return sign | (f->has_inf ? emax << f->mbits : fmt_max_finite(f));
    }
    if (dexp == 0) return sign; /* zero, or a double subnormal: far below any target's range */
    int e = dexp - 1023, emin = 1 - f->bias;
    int eq = e < emin ? emin : e;                 /* exponent of the result's leading bit slot */
    int shift = 52 - f->mbits + (eq - e);
    uint64_t sig = (UINT64_C(1) << 52) | dman, q = 0;
    if (shift < 64) {
        q = sig >> shift;
        uint64_t rem = sig & ((UINT64_C(1) << shift) - 1), half = UINT64_C(1) << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
    }
    if (q >> (f->mbits + 1)) { /* rounding carried into a new leading bit */
        q >>= 1;
        eq++;
    }
    int64_t ef;
    uint32_t mf;
    if (q >> f->mbits) {
        ef = (int64_t)eq + f->bias;
        mf = (uint32_t)(q - (UINT64_C(1) << f->mbits));
    } else {
        ef = 0;
        mf = (uint32_t)q;
    }
    bool over = f->has_inf ? ef >= (int64_t)emax
                           : (ef > (int64_t)emax || (ef == (int64_t)emax && mf == (1u << f->mbits) - 1));
    if (over) return sign | (f->saturate ? fmt_max_finite(f) : emax << f->mbits);
    return sign | ((uint32_t)ef << f->mbits) | mf;
}

static double fmt_decode(const Fmt *f, uint32_t bits) {
    uint32_t emax = (1u << f->ebits) - 1, mmask = (1u << f->mbits) - 1;
    bool neg = (bits >> (f->ebits + f->mbits)) & 1;
    uint32_t ef = (bits >> f->mbits) & emax, mf = bits & mmask;
    double v;
    if (f->has_inf && ef == emax) {
        if (mf) return NAN;
        v = INFINITY;
    } else if (!f->has_inf && ef == emax && mf == mmask) {
        return NAN;
    } else if (ef == 0) {
        v = ldexp((double)mf, 1 - f->bias - f->mbits);
    } else {
        v = ldexp((double)(mf | (1u << f->mbits)), (int)ef - f->bias - f->mbits);
    }
    return neg ? -v : v;
}

/* ---- integers ------------------------------------------------------------------------ */
static int64_t to_i64(double v) {
    if (isnan(v)) return 0;
    if (v >= 9223372036854775808.0) return INT64_MAX;
    if (v <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)v;
}
/* i8 (a storage type): truncated toward zero and saturated, NaN 0, as every cast to it */
static int8_t to_i8(double v) {
    if (isnan(v)) return 0;
    if (v >= 127.0) return INT8_MAX;
    if (v <= -128.0) return INT8_MIN;
    return (int8_t)v;
}
static int32_t to_i32(double v) {
    if (isnan(v)) return 0;
    if (v >= 2147483648.0) return INT32_MAX;
    if (v <= -2147483649.0) return INT32_MIN;
    return (int32_t)v;
}

/* ---- loads and stores ---------------------------------------------------------------- */
double rt_host_load(FcDtype t, const void *base, int64_t i) {
    const unsigned char *p = base;
    switch (t) {
    case FC_F64: { double v; memcpy(&v, p + i * 8, 8); return v; }
    case FC_F32: { float v; memcpy(&v, p + i * 4, 4); return v; }
    case FC_F16:
    case FC_BF16: { uint16_t v; memcpy(&v, p + i * 2, 2); return fmt_decode(fmt_of(t), v); }
    case FC_F8E4M3:
    case FC_F8E5M2: return fmt_decode(fmt_of(t), p[i]);
    case FC_I32: { int32_t v; memcpy(&v, p + i * 4, 4); return v; }
    case FC_I64: { int64_t v; memcpy(&v, p + i * 8, 8); return (double)v; }
    case FC_BOOL: return p[i] != 0;
    case FC_I8: return (int8_t)p[i];
    default: return NAN;
    }
}

void rt_host_store(FcDtype t, void *base, int64_t i, double v) {
    unsigned char *p = base;
    switch (t) {
    case FC_F64: memcpy(p + i * 8, &v, 8); break;
    case FC_F32: { float x = (float)v; memcpy(p + i * 4, &x, 4); break; }
    case FC_F16:
    case FC_BF16: { uint16_t x = (uint16_t)fmt_encode(fmt_of(t), v); memcpy(p + i * 2, &x, 2); break; }
    case FC_F8E4M3:
    case FC_F8E5M2: p[i] = (unsigned char)fmt_encode(fmt_of(t), v); break;
    case FC_I32: { int32_t x = to_i32(v); memcpy(p + i * 4, &x, 4); break; }
    case FC_I64: { int64_t x = to_i64(v); memcpy(p + i * 8, &x, 8); break; }
    case FC_BOOL: p[i] = v != 0; break;
    case FC_I8: { int8_t x = to_i8(v); memcpy(p + i, &x, 1); break; }
    default: break;
    }
}

double rt_host_round(FcDtype t, double v) {
    unsigned char buf[8];
    rt_host_store(t, buf, 0, v);
    return rt_host_load(t, buf, 0);
}

void rt_host_convert(FcDtype dst, void *d, FcDtype src, const void *s, int64_t n) {
    if (dst == src) {
        if (n > 0) memcpy(d, s, (size_t)n * fc_dtype_size(dst));
        return;
    }
    if (src == FC_I64 && dst == FC_I32) { /* exact, without the trip through double */
        for (int64_t i = 0; i < n; i++) {
            int64_t v;
            memcpy(&v, (const char *)s + i * 8, 8);
            int32_t x = v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : (int32_t)v;
            memcpy((char *)d + i * 4, &x, 4);
        }
        return;
    }
    if (src == FC_I32 && dst == FC_I64) {
        for (int64_t i = 0; i < n; i++) {
            int32_t v;
            memcpy(&v, (const char *)s + i * 4, 4);
            int64_t x = v;
            memcpy((char *)d + i * 8, &x, 8);
        }
        return;
    }
    for (int64_t i = 0; i < n; i++) rt_host_store(dst, d, i, rt_host_load(src, s, i));
}

/* ---- random fill --------------------------------------------------------------------- */
static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}
/* Output number ctr of splitmix64 started from a hashed seed: a pure function of both. */
static uint64_t rnd_at(uint64_t seed, uint64_t ctr) {
    return mix64(mix64(seed) + (ctr + 1) * UINT64_C(0x9E3779B97F4A7C15));
}

void rt_host_fill_normal(FcDtype t, void *data, int64_t n, uint64_t seed) {
    if (!ir_dtype_is_float(t)) {
        rt_host_fill_uniform_int(t, data, n, 0, 16, seed);
        return;
    }
    const double two_pi = 6.283185307179586476925286766559;
    for (int64_t i = 0; i < n; i++) {
        uint64_t r1 = rnd_at(seed, 2 * (uint64_t)i), r2 = rnd_at(seed, 2 * (uint64_t)i + 1);
        double u1 = (double)((r1 >> 11) + 1) * 0x1p-53; /* (0, 1]: log is finite */
        double u2 = (double)(r2 >> 11) * 0x1p-53;       /* [0, 1) */
        rt_host_store(t, data, i, sqrt(-2.0 * log(u1)) * cos(two_pi * u2));
    }
}

void rt_host_fill_uniform_int(FcDtype t, void *data, int64_t n, int64_t lo, int64_t hi,
                              uint64_t seed) {
    /* modulo reduction: the bias is below range / 2^64, negligible for test ranges */
    uint64_t range = hi > lo ? (uint64_t)hi - (uint64_t)lo : 0;
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = rnd_at(seed, (uint64_t)i);
        if (t == FC_BOOL) {
            ((unsigned char *)data)[i] = (unsigned char)(r >> 63);
            continue;
        }
        int64_t v = range ? (int64_t)((uint64_t)lo + r % range) : lo;
        if (t == FC_I64) memcpy((char *)data + i * 8, &v, 8);
        else rt_host_store(t, data, i, (double)v);
    }
}

/* ---- comparison ---------------------------------------------------------------------- */
static int fp_kind(double v) { return isnan(v) ? 1 : v == INFINITY ? 2 : v == -INFINITY ? 3 : 0; }

void rt_host_compare(FcDtype t, const void *got, const void *ref, int64_t n, double *max_abs,
                     double *max_rel) {
    rt_host_compare_floor(t, got, ref, n, rt_host_min_normal(t), max_abs, max_rel);
}

void rt_host_compare_floor(FcDtype t, const void *got, const void *ref, int64_t n, double floor,
                           double *max_abs, double *max_rel) {
    double ma = 0, mref = 0;
    bool bad = false;
    for (int64_t i = 0; i < n; i++) {
        double g = rt_host_load(t, got, i), r = rt_host_load(t, ref, i);
        int kg = fp_kind(g), kr = fp_kind(r);
        if (kg || kr) {
            if (kg != kr) bad = true;
            continue;
        }
        double d = fabs(g - r);
        if (d > ma) ma = d;
        if (fabs(r) > mref) mref = fabs(r);
    }
    if (bad) {
        *max_abs = *max_rel = INFINITY;
        return;
    }
    *max_abs = ma;
    /* below the normal range a float's spacing is absolute: a tensor all of whose reference
     * values are subnormal (a softmax of entries 100 below the max, e^-100 = 3.7e-44 in f32)
     * holds a few significant bits at most, and a last-place difference there is 1/26 of
     * the value; measured against the smallest normal instead, it is what it is in absolute
     * terms */
    if (mref < floor) mref = floor;
    *max_rel = ma == 0 ? 0 : mref == 0 ? INFINITY : ma / mref;
}

double rt_host_min_normal(FcDtype t) {
    switch (t) {
    case FC_F64: return 0x1p-1022;
    case FC_F32: case FC_BF16: return 0x1p-126;
    case FC_F16: case FC_F8E5M2: return 0x1p-14;
    case FC_F8E4M3: return 0x1p-6;
    default: return 0;
    }
}

/* ---- tolerance (docs/tolerances.md) ---------------------------------------------------- */
double rt_host_tolerance(FcDtype t, int64_t K) {
    double u, a, uacc = 0x1p-24;
    switch (t) {
    case FC_F64: u = 0x1p-53; a = 64; uacc = 0x1p-53; break;
    case FC_F32: u = 0x1p-24; a = 64; break;
    case FC_F16: u = 0x1p-11; a = 8; break;
    case FC_BF16: u = 0x1p-8; a = 8; break;
    case FC_F8E4M3: u = 0x1p-4; a = 4; break;
    case FC_F8E5M2: u = 0x1p-3; a = 4; break;
    default: return 0; /* integers and bool: exact */
    }
    double k = K < 1 ? 1.0 : (double)K;
    return a * u + 4.0 * uacc * sqrt(k);
}
