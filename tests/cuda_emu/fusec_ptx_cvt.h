/* fusec_ptx_cvt.h: the PTX conversion instructions that generated CUDA uses, on the host.
 *
 * codegen/cuda.c wraps each cvt instruction it emits in one function (fc_cvt_*, in the
 * instruction's own operand order: an x2 form puts its FIRST source in the UPPER half of the
 * result) and skips those wrappers when FCEMU_PTX_CVT is defined. This header defines it and
 * models the instructions from the PTX ISA's definition, with double arithmetic rather than
 * bit manipulation, so it shares nothing with the generated integer code (sm_80's f8) or with
 * the reference's encoders (tests/unit/kir_samples.h, runtime/host.c):
 *   cvt.rn.bf16x2.f32, cvt.rn.f16x2.f32   round to nearest even; overflow gives inf; NaN the
 *                                          canonical NaN (0x7fff)
 *   cvt.f32.f16                           exact
 *   cvt.rn.satfinite.e4m3x2.f32           round to nearest even; beyond the largest finite
 *   cvt.rn.satfinite.e5m2x2.f32           value (inf too) the largest finite value (448,
 *                                          57344); NaN 0x7f
 *   cvt.rn.f16x2.e4m3x2                   exact (every E4M3 value is an f16 value)
 * Used by the emulation harness (fusec_cuda_emu.h) and by test_cuda_codegen's check of the
 * generated conversion helpers against kir_samples.h's encoders on 700,000 values.
 */
#ifndef FUSEC_PTX_CVT_H
#define FUSEC_PTX_CVT_H

#include <cmath>
#include <cstdint>
#include <cstring>

#define FCEMU_PTX_CVT 1

namespace fcemu_cvt {

struct Fmt {
    int ebits, mbits;  /* exponent and mantissa bits */
    int emin;          /* the exponent of the smallest normal value */
    double maxv;       /* the largest finite value */
    uint32_t nan;      /* the canonical NaN the instruction writes */
};
static const Fmt kBF16 = {8, 7, -126, 3.3895313892515355e38, 0x7fffu};
static const Fmt kF16 = {5, 10, -14, 65504.0, 0x7fffu};
static const Fmt kE4M3 = {4, 3, -6, 448.0, 0x7fu};
static const Fmt kE5M2 = {5, 2, -14, 57344.0, 0x7fu};

/* x rounded to nearest even with f's precision and subnormal range, unbounded above. */
inline double round_to(double x, const Fmt &f) {
    if (x == 0 || std::isnan(x) || std::isinf(x)) return x;
    int e;
    std::frexp(std::fabs(x), &e);   /* |x| in [2^(e-1), 2^e) */
    int ex = e - 1 < f.emin ? f.emin : e - 1;
    double q = std::ldexp(std::fabs(x), f.mbits - ex);   /* one unit in the last place is 1 */
    return std::copysign(std::ldexp(std::nearbyint(q), ex - f.mbits), x);   /* default mode: even */
}

/* The bits of v, a finite value of f (or an infinity where f has them), sign included. */
inline uint32_t bits_of(double v, const Fmt &f) {
    uint32_t sign = std::signbit(v) ? 1u << (f.ebits + f.mbits) : 0u;
    double a = std::fabs(v);
    if (std::isinf(a)) return sign | (((1u << f.ebits) - 1u) << f.mbits);
    if (a == 0) return sign;
    int e;
    std::frexp(a, &e);
    int ex = e - 1;
    if (ex < f.emin) return sign | (uint32_t)std::ldexp(a, f.mbits - f.emin);   /* subnormal */
    uint32_t m = (uint32_t)std::ldexp(a, f.mbits - ex) - (1u << f.mbits);
    return sign | ((uint32_t)(ex + 1 - f.emin) << f.mbits) | m;
}

/* The value of bits b in f (an f with infinities: all-ones exponent is inf or NaN; E4M3:
 * only S.1111.111 is NaN). */
inline double value_of(uint32_t b, const Fmt &f) {
    uint32_t emask = (1u << f.ebits) - 1u, mmask = (1u << f.mbits) - 1u;
    uint32_t e = (b >> f.mbits) & emask, m = b & mmask;
    double s = (b >> (f.ebits + f.mbits)) & 1u ? -1.0 : 1.0;
    if (f.ebits == 4 && e == emask && m == mmask) return NAN;
    if (f.ebits != 4 && e == emask) return m ? NAN : s * INFINITY;
    if (e == 0) return s * std::ldexp((double)m, f.emin - f.mbits);
    return s * std::ldexp((double)(m | (1u << f.mbits)), (int)e - 1 + f.emin - f.mbits);
}

/* cvt.rn[.satfinite] of one f32 to f. */
inline uint32_t cvt(float x, const Fmt &f, bool satfinite) {
    if (std::isnan(x)) return f.nan;
    double r = round_to((double)x, f);
    if (std::fabs(r) > f.maxv) r = satfinite ? std::copysign(f.maxv, r) : std::copysign(INFINITY, r);
    return bits_of(r, f);
}

}  // namespace fcemu_cvt

static inline unsigned int fc_cvt_bf16x2(float hi, float lo) {
    return fcemu_cvt::cvt(hi, fcemu_cvt::kBF16, false) << 16 | fcemu_cvt::cvt(lo, fcemu_cvt::kBF16, false);
}
static inline unsigned int fc_cvt_f16x2(float hi, float lo) {
    return fcemu_cvt::cvt(hi, fcemu_cvt::kF16, false) << 16 | fcemu_cvt::cvt(lo, fcemu_cvt::kF16, false);
}
static inline float fc_cvt_f32_f16(unsigned short a) { return (float)fcemu_cvt::value_of(a, fcemu_cvt::kF16); }
static inline unsigned short fc_cvt_e4m3x2(float hi, float lo) {
    return (unsigned short)(fcemu_cvt::cvt(hi, fcemu_cvt::kE4M3, true) << 8 | fcemu_cvt::cvt(lo, fcemu_cvt::kE4M3, true));
}
static inline unsigned short fc_cvt_e5m2x2(float hi, float lo) {
    return (unsigned short)(fcemu_cvt::cvt(hi, fcemu_cvt::kE5M2, true) << 8 | fcemu_cvt::cvt(lo, fcemu_cvt::kE5M2, true));
}
static inline unsigned int fc_cvt_f16x2_e4m3x2(unsigned short a) {
    unsigned int r = 0;
    for (int k = 0; k < 2; k++) {
        double v = fcemu_cvt::value_of((a >> (8 * k)) & 0xffu, fcemu_cvt::kE4M3);
        r |= (std::isnan(v) ? fcemu_cvt::kF16.nan : fcemu_cvt::bits_of(v, fcemu_cvt::kF16)) << (16 * k);
    }
    return r;
}

#endif
