/* interp_priv.h: what the gradient oracle (runtime/interp_grad.c) uses of the reference
 * interpreter's forward run (runtime/interp.c). Private to runtime/; not an API. */
#ifndef FUSEC_INTERP_PRIV_H
#define FUSEC_INTERP_PRIV_H

#include "interp.h"

/* One op run on dense f64 buffers, as interp.c's op table runs it: in[i] is input i, out[k]
 * room for result k; the driver rounds the results to their dtypes afterwards. */
typedef FcStatus (*RtInterpOpFn)(const IrGraph *g, const IrNode *n, const double *const *in,
                                 double *const *out, FcErr *err);

/* rt_interp_run's forward (RT_ROUND_EVERY_OP, the same code), keeping every value: on success
 * keep[v] (g->values.len entries) is value v's f64 buffer, rounded to its dtype (fc_alloc'd; the
 * caller frees each), or NULL for a block input that no node reads; on failure keep[] is left
 * untouched and nothing is kept. outputs may be NULL (not stored). A node whose op interp.c
 * refuses with FC_ERR_UNSUPPORTED (the training ops, until interp.c runs them) is run by
 * `fallback` instead when it is not NULL. noise (may be NULL): rt_interp_run_noisy's noise on
 * every rounding result, with that seed. */
/* The noise of rt_interp_run_noisy and rt_interp_grad_noisy: d[j] *= 1 + 2u n sin(phase + 0.7549 j)
 * for j < m (u: t's unit roundoff, 2^-24 for f32; nothing for a non-float t; n = ulps, at least
 * 1: how many ulp the op's result may be off on a backend), the phase drawn from seed, the
 * node's index and which of its results (out). */
void rt_interp_perturb(double *d, int64_t m, FcDtype t, uint64_t seed, int node, int out, int ulps);
/* v rounded to dtype t by the interpreter's own rules (interp.c's rnd: not host.c's, so that a
 * rounding bug there cannot hide in the oracle). */
double rt_interp_round(FcDtype t, double v);
FcStatus rt_interp_forward_keep(const IrGraph *g, const void *const *inputs, void *const *outputs,
                                RtInterpOpFn fallback, double **keep, const uint64_t *noise, FcErr *err);

/* interp_grad.c's own Philox-4x32-10 (Random123's philox4x32, 10 rounds): out = the block for
 * counter ctr and key key. Exposed for its known-answer test only. */
void rt_interp_grad_philox(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

#endif
