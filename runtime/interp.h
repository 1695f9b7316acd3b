/* interp.h: the reference interpreter, the oracle of every test.
 *
 * Runs a graph IR op by op in plain C with f64 accumulation, on the graph *before*
 * decomposition, with its own implementation of every op in the table (composites
 * included). It shares no code with decomposition, the kernel IR or the backends.
 * Every value is rounded to its dtype after each op (the op-by-op meaning of a program).
 */
#ifndef FUSEC_INTERP_H
#define FUSEC_INTERP_H

#include "ir.h"

/* inputs[i]: the i-th block input's data in its dtype (dense, row-major);
 * outputs[i]: room for the i-th output in its dtype. A gather index or a cross_entropy label
 * out of range gives FC_ERR_RUNTIME_DATA. */
FcStatus rt_interp_run(const IrGraph *g, const void *const *inputs, void *const *outputs,
                       FcErr *err);

/* Where 16- and 8-bit float intermediates are rounded to their dtype (docs/tolerances.md):
 * EVERY_OP is eager's meaning (and PyTorch's), rt_interp_run's; AT_OUTPUTS is a fused
 * kernel's: results of computing ops of those dtypes (fp8_quant's too) are kept in f32 and
 * rounded only at block outputs; explicit casts and generators round in both. STORED is a fused
 * program's as its kernels compute it: as AT_OUTPUTS, but a 16/8-bit value that is an output of
 * the graph is rounded where it is computed, so that the ops reading it see its stored bits (the
 * lowering's rounds_stored: a kernel that stores a 16-bit value and reads it too rounds it
 * first). f32/f64/integer values are rounded after every op in all three. */
typedef enum RtRounding { RT_ROUND_EVERY_OP, RT_ROUND_AT_OUTPUTS, RT_ROUND_STORED } RtRounding;
FcStatus rt_interp_run_rounding(const IrGraph *g, const void *const *inputs, void *const *outputs,
                                RtRounding rounding, FcErr *err);
/* rt_interp_run with rounding-level noise: the result of every rounding node (unary, binary,
 * reduction, matrix product, composite, scatter_add; not a cast, generator, comparison, select
 * or shape op, nor abs, relu, maximum, minimum, max or min, which are exact everywhere and
 * keep ties tied) is multiplied element j by 1 + 2u sin(phase + 0.7549 j) before it is rounded to its dtype (u:
 * the dtype's unit roundoff, 2^-24 for f32; phase from `seed` and the node), or for an f32/f64
 * function result by as many times that as the function's documented ulp error on the device
 * (pow 4, exp 2, ...: interp.c device_ulps). Run on a
 * decomposed graph, it perturbs the composites' inner steps too (a layernorm's mean, a
 * log_softmax's log of the sum), which is how the random-graph tester tells an output that
 * rounding alone moves from a wrong one (docs/difftest.md). */
FcStatus rt_interp_run_noisy(const IrGraph *g, const void *const *inputs, void *const *outputs, uint64_t seed,
                             FcErr *err);
/* A seed with this bit set leaves fp8_quant without noise. Its noise stands for a program that
 * keeps an f8 value wide instead of rounding it (passes/lower.c fp8_inline), up to a rounding of
 * the format (2u: 12.5 % at E4M3); it also moves every discrete choice after it (which of two
 * quantized copies of one value a minimum takes), which can hide how much the rounding noise
 * moves a value that choice then masks: a minimum's gradient g (1 - mask) where g is a rounding
 * residue that the flipped mask zeroes (f8 difftest seed 2026112870 graph 171: the fused
 * kernel's residue, one bf16 ulp, against a reference of 0 that no noisy run moved). */
#define RT_NOISE_KEEP_QUANTS (1ull << 63)
/* The largest magnitude each f8 slot's tensor takes in a run of g (rt_interp_run's, with the
 * scales of g's slot table): amax[k] = max |x| over the input x of slot k's fp8_quant (0 for a
 * slot nothing quantizes with; NaN propagates). amax: g->fp8.len entries. For calibrating the
 * scales (fc_block_calibrate_fp8). */
FcStatus rt_interp_fp8_amax(const IrGraph *g, const void *const *inputs, double *amax, FcErr *err);
/* Whether some computing op (not a cast, generator, shape op or fp8_quant) of g has a 16- or 8-bit float
 * result: only then do the two roundings differ. */
bool rt_interp_has_narrow_intermediates(const IrGraph *g);

/* The gradient oracle (runtime/interp_grad.c; the rules are docs/training.md's "Gradient
 * rules"). Runs the source graph g (composites included, before decomposition) forward as
 * rt_interp_run does (values rounded to their dtypes after each op), then backward in f64 with
 * its own per-op rules. grad_outputs[j]: the gradient of output j, dense f64 (NULL: zero;
 * ignored for integer/bool outputs; grad_outputs itself NULL: all zero). grad_inputs[i]: room
 * for the f64 gradient of input i, or NULL to skip (grad_inputs itself NULL: skip all);
 * integer and bool inputs get no gradient (their entry must be NULL, else FC_ERR_USAGE).
 * outputs: as rt_interp_run (may be NULL to not return them). Errors as rt_interp_run (gather
 * id out of range ...). It runs dropout and cross_entropy forward itself where interp.c does
 * not. Shares no code with the autodiff pass. */
FcStatus rt_interp_grad(const IrGraph *g, const void *const *inputs, void *const *outputs,
                        const double *const *grad_outputs, double *const *grad_inputs, FcErr *err);
/* rt_interp_grad with rounding-level noise: the forward as rt_interp_run_noisy runs it (the
 * backward reads forward values that a program computes with roundings of its own), and on the
 * backward the whole gradient of every node's result multiplied element e by 1 + 2u sin(phase +
 * 0.7549 e) (u: the unit roundoff of the value's dtype; phase from `seed` and the node) before it
 * flows on, as a program that keeps a value's gradient in the value's dtype may round it (an f8
 * gradient rounded to f8); so is each contribution a node adds to an f32, 16- or 8-bit gradient, an f8
 * one rounded to f8 before it joins the sum, as an autograd engine adds them in that dtype. The
 * random-graph tester's conditioning check of a gradient (docs/difftest.md). Run it with
 * RT_GRAD_NOISE_TRIALS seeds and take the largest change: an f8 contribution perturbed by less
 * than half its ulp rounds back to where it was, so one seed can move a sum of cancelling f8
 * contributions by a tenth of what another does (f8 seed 2026112809 graph 425: over 40 seeds
 * 0.025 to 8.0 of the gradient, 12 of them under 0.65, both of the first two among them). */
enum { RT_GRAD_NOISE_TRIALS = 8 };
FcStatus rt_interp_grad_noisy(const IrGraph *g, const void *const *inputs, void *const *outputs,
                              const double *const *grad_outputs, double *const *grad_inputs, uint64_t seed,
                              FcErr *err);
/* --train at f8: rt_interp_grad's backward, recording for each gradient slot k (an E5M2 slot
 * some slot's .grad names) the largest magnitude its backward quant takes (x's gradient, before
 * the scale; 0 for other slots; NaN propagates), at the scales of g's slot table. For
 * calibrating the gradients' scales (fc_block_calibrate_fp8_grads). */
FcStatus rt_interp_grad_fp8_amax(const IrGraph *g, const void *const *inputs, const double *const *grad_outputs,
                                 double *amax, FcErr *err);
/* Philox-4x32-10 (Random123's philox4x32 with 10 rounds): the four output words for counter
 * ctr and key key. The interpreter's own implementation, which dropout's mask uses
 * (docs/language.md); exported for the known-answer tests. */
void rt_interp_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

#endif
