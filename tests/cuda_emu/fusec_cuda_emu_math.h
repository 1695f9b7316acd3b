/* fusec_cuda_emu_math.h: the device's math functions, for the emulated units (docs/cuda_emu.md).
 *
 * CUDA's expf, logf, tanhf, erff, sinf, cosf, powf, rsqrtf (and the double versions) are not
 * the host's: the CUDA C++ Programming Guide ("Mathematical Functions", standard functions)
 * documents their maximum error in ulp against the correctly rounded result. The emulation
 * models the device as the worst case it may be: each call returns the host's result moved by
 * exactly that many ulp, up or down as a hash of the function and its arguments says
 * (deterministic: both emulated thread orders, and reruns, see the same values). The host's own
 * error (glibc: under 1 ulp for these in f32, 1-2 for tanhf/erff) comes on top, so the model
 * is at least as far from the exact result as the device is allowed to be. Not moved: results
 * that are not finite or are zero, the exact special values CUDA documents (exp(±0) = 1,
 * pow(x, ±0) = 1, pow(1, y) = 1), results at an end of the function's range (tanh and erf
 * saturated at ±1: the device's implementations return it exactly), and results are kept
 * inside that range (a move never crosses zero or overflows).
 *
 * sqrtf and division are correctly rounded on the device (-prec-sqrt / -prec-div, the
 * defaults) and fabsf/floorf are exact: those stay the host's. The batch includes this header
 * after every other one, just before the generated units: the names are macros, so that the
 * units' unqualified calls reach the model and nothing else does.
 */
#ifndef FUSEC_CUDA_EMU_MATH_H
#define FUSEC_CUDA_EMU_MATH_H

#include <cmath>
#include <cstdint>
#include <cstring>

namespace fcemu {
namespace devmath {

/* documented maximum errors, ulp (CUDA C++ Programming Guide, tables of the standard
 * single- and double-precision functions, without -use_fast_math) */
enum { EXPF = 2, LOGF = 1, SINF = 2, COSF = 2, TANHF = 2, ERFF = 2, ERFCF = 4, NORMCDFF = 5, POWF = 4,
       RSQRTF = 2, EXP = 1, LOG = 1, SIN = 2, COS = 2, TANH = 2, ERF = 2, ERFC = 5, NORMCDF = 5, POW = 2,
       RSQRT = 1 };

static inline uint64_t mix(uint64_t z) {   /* splitmix64's finalizer */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static inline uint64_t bits(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static inline uint64_t bits(double x) { uint64_t u; memcpy(&u, &x, 8); return u; }

/* r moved by n ulp, up or down by the hash h, inside [lo, hi], never to zero, the other sign
 * or infinity. */
template <class T> static inline T move(T r, uint64_t h, int n, T lo, T hi) {
    /* at an end of its range (tanh, erf saturated at ±1) the device returns the end exactly */
    if (!std::isfinite(r) || r == (T)0 || r == lo || r == hi) return r;
    T to = (mix(h) & 1) ? (T)INFINITY : -(T)INFINITY;
    T v = r;
    for (int i = 0; i < n; i++) {
        T w = std::nextafter(v, to);
        if (!std::isfinite(w) || w == (T)0 || (w < 0) != (r < 0) || w < lo || w > hi) break;
        v = w;
    }
    return v;
}

#define FCEMU_DEV1(NAME, HOST, T, N, LO, HI)                                                   \
    static inline T NAME(T x) {                                                                \
        return move<T>(HOST(x), bits(x) * 0x9e3779b97f4a7c15ull + __LINE__, N, LO, HI);        \
    }
static const float FINF = INFINITY;
static const double DINF = INFINITY;
static inline float host_rsqrtf(float x) { return 1.0f / std::sqrt(x); }
static inline double host_rsqrt(double x) { return 1.0 / std::sqrt(x); }
/* the standard normal CDF (ndtr, GELU's exact form), correctly rounded to f32 from f64 */
static inline double host_normcdf(double x) { return 0.5 * std::erfc(-x * 0.70710678118654752440); }
static inline float host_normcdff(float x) { return (float)host_normcdf((double)x); }
static inline float exp_f(float x) { return x == 0.0f ? 1.0f : move<float>(std::exp(x), bits(x) * 3 + 1, EXPF, 0.0f, FINF); }
static inline double exp_d(double x) { return x == 0.0 ? 1.0 : move<double>(std::exp(x), bits(x) * 3 + 1, EXP, 0.0, DINF); }
FCEMU_DEV1(log_f, std::log, float, LOGF, -FINF, FINF)
FCEMU_DEV1(sin_f, std::sin, float, SINF, -1.0f, 1.0f)
FCEMU_DEV1(cos_f, std::cos, float, COSF, -1.0f, 1.0f)
FCEMU_DEV1(tanh_f, std::tanh, float, TANHF, -1.0f, 1.0f)
FCEMU_DEV1(erf_f, std::erf, float, ERFF, -1.0f, 1.0f)
FCEMU_DEV1(erfc_f, std::erfc, float, ERFCF, 0.0f, 2.0f)
FCEMU_DEV1(rsqrt_f, host_rsqrtf, float, RSQRTF, 0.0f, FINF)
FCEMU_DEV1(normcdf_f, host_normcdff, float, NORMCDFF, 0.0f, 1.0f)
FCEMU_DEV1(log_d, std::log, double, LOG, -DINF, DINF)
FCEMU_DEV1(sin_d, std::sin, double, SIN, -1.0, 1.0)
FCEMU_DEV1(cos_d, std::cos, double, COS, -1.0, 1.0)
FCEMU_DEV1(tanh_d, std::tanh, double, TANH, -1.0, 1.0)
FCEMU_DEV1(erf_d, std::erf, double, ERF, -1.0, 1.0)
FCEMU_DEV1(erfc_d, std::erfc, double, ERFC, 0.0, 2.0)
FCEMU_DEV1(rsqrt_d, host_rsqrt, double, RSQRT, 0.0, DINF)
FCEMU_DEV1(normcdf_d, host_normcdf, double, NORMCDF, 0.0, 1.0)
#undef FCEMU_DEV1
static inline float pow_f(float x, float y) {
    float r = std::pow(x, y);
    if (y == 0.0f || x == 1.0f) return r;   /* exactly 1 */
    return move<float>(r, bits(x) * 0x9e3779b97f4a7c15ull ^ bits(y), POWF, -FINF, FINF);
}
static inline double pow_d(double x, double y) {
    double r = std::pow(x, y);
    if (y == 0.0 || x == 1.0) return r;
    return move<double>(r, bits(x) * 0x9e3779b97f4a7c15ull ^ bits(y), POW, -DINF, DINF);
}

} /* namespace devmath */
} /* namespace fcemu */

#define expf(x) ::fcemu::devmath::exp_f(x)
#define logf(x) ::fcemu::devmath::log_f(x)
#define sinf(x) ::fcemu::devmath::sin_f(x)
#define cosf(x) ::fcemu::devmath::cos_f(x)
#define tanhf(x) ::fcemu::devmath::tanh_f(x)
#define erff(x) ::fcemu::devmath::erf_f(x)
#define erfcf(x) ::fcemu::devmath::erfc_f(x)
#define powf(x, y) ::fcemu::devmath::pow_f(x, y)
#define rsqrtf(x) ::fcemu::devmath::rsqrt_f(x)
#define normcdff(x) ::fcemu::devmath::normcdf_f(x)
#define normcdf(x) ::fcemu::devmath::normcdf_d(x)
#define exp(x) ::fcemu::devmath::exp_d(x)
#define log(x) ::fcemu::devmath::log_d(x)
#define sin(x) ::fcemu::devmath::sin_d(x)
#define cos(x) ::fcemu::devmath::cos_d(x)
#define tanh(x) ::fcemu::devmath::tanh_d(x)
#define erf(x) ::fcemu::devmath::erf_d(x)
#define erfc(x) ::fcemu::devmath::erfc_d(x)
#define pow(x, y) ::fcemu::devmath::pow_d(x, y)
#define rsqrt(x) ::fcemu::devmath::rsqrt_d(x)

#endif
