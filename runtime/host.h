/* host.h: host-side tensor helpers for the library and the tests: per-dtype loads and
 * stores with fusec's rounding rules, bulk conversion, seeded random fill, comparison,
 * the --check tolerance rule (host.c) and a graph's tolerances (tolerance.c), and .npy
 * reading/writing (npy.c).
 *
 * Not used by the reference interpreter (interp.c), which keeps its own private copy of
 * the rounding rules so that a bug here cannot hide in the oracle; test_interp checks the
 * two against each other on every narrow-float bit pattern.
 *
 * Rounding when storing a double v into dtype t (the rules of docs/language.md's cast):
 *   f64: exact.  f32: round to nearest even (overflow gives inf).
 *   f16, bf16: round to nearest even; overflow gives inf; NaN stays NaN.
 *   f8e4m3 (OCP E4M3FN: bias 7, max 448, no inf, NaN 0x7F/0xFF) and f8e5m2 (OCP E5M2:
 *   bias 15, max 57344, inf): round to nearest even; a finite value beyond the largest
 *   finite one saturates to it (sign kept); f8e5m2 keeps +-inf; f8e4m3 has no inf and
 *   saturates +-inf to +-448 too (CUDA's __NV_SATFINITE behaviour).
 *   i32, i64: truncate toward zero, saturate to the type's range (+-inf too), NaN gives 0.
 *   bool: 1 for any non-zero value (NaN included: it is not zero), else 0.
 * Storage: f16/bf16 as uint16 bit patterns, f8 as uint8, bool as one byte 0/1.
 */
#ifndef FUSEC_HOST_H
#define FUSEC_HOST_H

#include "ir.h"

/* Element i of a dense array of dtype t, as a double (exact for every dtype but i64
 * values beyond 2^53, which are rounded). A bool byte other than 0 reads as 1. */
double rt_host_load(FcDtype t, const void *base, int64_t i);
/* Stores v into element i of a dense array of dtype t, rounded by the rules above. */
void rt_host_store(FcDtype t, void *base, int64_t i, double v);
/* v rounded to dtype t and read back as a double (store + load without the memory). */
double rt_host_round(FcDtype t, double v);
/* Converts n elements of dtype src at s into dtype dst at d (buffers must not overlap). */
void rt_host_convert(FcDtype dst, void *d, FcDtype src, const void *s, int64_t n);

/* Seeded random fill; element i is a pure function of (seed, i) (counter-based, splitmix64).
 * Float dtypes: N(0, 1) (Box-Muller) rounded to the dtype; i32/i64: uniform in [0, 16);
 * bool: fair coin flips. */
void rt_host_fill_normal(FcDtype t, void *data, int64_t n, uint64_t seed);
/* Integers uniform in [lo, hi) (lo when hi <= lo), stored in dtype t (a float dtype gets the
 * integer values rounded to it); bool gets coin flips whatever lo and hi. */
void rt_host_fill_uniform_int(FcDtype t, void *data, int64_t n, int64_t lo, int64_t hi,
                              uint64_t seed);

/* fc_tensor_compare's rule on n elements of dtype t: *max_abs = max |got - ref| over the
 * positions where both are finite; *max_rel = *max_abs / max(max |ref| over finite ref, the
 * smallest normal of t) (0/0 is 0; x/0, for an integer t, is inf). A non-finite value on
 * either side must be matched by the same kind (NaN, +inf, -inf) at the same position on the
 * other, else both results are +inf. */
/* The smallest positive normal value of a float dtype (f32 and bf16 2^-126, f16 and f8e5m2
 * 2^-14, f8e4m3 2^-6, f64 2^-1022); 0 for the others. */
double rt_host_min_normal(FcDtype t);
void rt_host_compare(FcDtype t, const void *got, const void *ref, int64_t n, double *max_abs,
                     double *max_rel);
/* The same with the floor of max |ref| given: for values of f8 tensors with scales (decoded to
 * f64), the smallest normal of the format divided by the coarser tensor's scale. */
void rt_host_compare_floor(FcDtype t, const void *got, const void *ref, int64_t n, double floor,
                           double *max_abs, double *max_rel);

/* The --check tolerance (docs/tolerances.md): the largest allowed max|err| / max|ref| for an
 * output of dtype t whose longest feeding reduction has K terms (K < 1 counts as 1).
 *   rel_tol = a(t) * u(t) + 4 * u_acc(t) * sqrt(K)
 * u: unit roundoff of t; u_acc: 2^-53 for f64, else 2^-24 (accumulation in f32);
 * a: 64 for f64/f32, 8 for f16/bf16, 4 for f8e4m3/f8e5m2. Integer and bool outputs: 0 (exact). */
double rt_host_tolerance(FcDtype t, int64_t K);

/* ---- a graph's tolerances (tolerance.c) ------------------------------------------------------ */
/* The safety factor on the rounding spread: the spread is one sample (these inputs, these
 * rounding errors) of the effect of rounding at every op, and a fused program rounds at a
 * subset of those points (its kernels' outputs), whose partial effect can exceed the whole
 * where the terms of different roundings cancel (docs/tolerances.md). */
#define RT_CHECK_SPREAD_FACTOR 2.0
/* tol[j] for each output j of g: rt_host_tolerance of the least precise float dtype on its path
 * and the total length of the reductions feeding it. */
FcStatus rt_graph_tolerances(const IrGraph *g, double *tol, FcErr *err);
/* The --check tolerances of g's outputs for these inputs (host data in the inputs' dtypes):
 * tol[j] = rt_graph_tolerances' + RT_CHECK_SPREAD_FACTOR * spread[j], spread[j] = the larger of
 * max |f - e| / max |e| and max |s - e| / max |e| for the reference interpreter's roundings of
 * 16/8-bit float intermediates (e every op, f at the outputs, s where stored: interp.h
 * RtRounding; 0 without such intermediates, when nothing runs). spread may be NULL. */
FcStatus rt_graph_check_tolerances(const IrGraph *g, const void *const *inputs, double *tol, double *spread,
                                   FcErr *err);

/* ---- .npy files (npy.c) ------------------------------------------------------------------ */
/* Reads a .npy file (format 1.0, 2.0 or 3.0; little-endian or byte-order-free; C order) of
 * dtype f64 f32 f16 i32 i64 or bool whose shape must equal *want_shape, into a new buffer
 * (*data, fc_alloc'd, caller frees with fc_free) of dtype `want`. Conversions: float file to
 * any float dtype (round to nearest even), integer file to a float dtype (rounded), integer
 * to integer (a value out of the target's range is an error naming it), bool to bool only.
 * Float to integer is an error. Messages start with the path.
 * FC_ERR_IO: cannot open/read; FC_ERR_INPUT: malformed file or mismatch; FC_ERR_NOMEM. */
FcStatus rt_npy_read(const char *path, FcDtype want, const IrShape *want_shape, void **data,
                     FcErr *err);
/* Writes format 1.0 atomically: dtype t where NumPy has it (f64 f32 f16 i32 i64 bool), else
 * (bf16, f8) converted to f32 (exactly: every bf16/f8 value is an f32). */
FcStatus rt_npy_write(const char *path, FcDtype t, const IrShape *shape, const void *data,
                      FcErr *err);

#endif
