/* vecmath_consts.h: the constants of the f32 exp and ndtr that the CPU's vector math
 * (codegen/llvm.c vexp_core_scaled, vndtr) and CUDA's fc_ndtr (codegen/cuda.c, printed from
 * these) share, so that the two compute the same bits (docs/cuda.md; test_cuda_emu's
 * ndtr_bitwise and tools/ndtr_bitwise.sh check it). Refit ndtr's with tools/fit_ndtr.py. */
#ifndef FUSEC_VECMATH_CONSTS_H
#define FUSEC_VECMATH_CONSTS_H

/* exp: n = rint(x log2 e), r = x - n ln2 (ln2 in two parts), e^r = 1 + r + r^2 P(r) */
#define FC_EXP_LOG2E 1.44269504088896341f
#define FC_EXP_LN2_HI 0.693359375f   /* n * FC_EXP_LN2_HI is exact */
#define FC_EXP_LN2_LO -2.12194440e-4f
#define FC_EXP_NP 5
static const float fc_exp_p[FC_EXP_NP] = {0.4999999404f, 0.1666652113f, 0.04166838899f, 0.008368741721f,
                                           0.001381458482f};

/* ndtr: R(a) = Q(a) / (k a Q(a) + P(a)), k = sqrt(2 pi), a = min(|x|, FC_NDTR_CLAMP) */
#define FC_NDTR_CLAMP 14.49f
#define FC_NDTR_SQRT_2PI 2.50662827463100050f
#define FC_NDTR_NP 5
#define FC_NDTR_NQ 6
static const float fc_ndtr_p[FC_NDTR_NP] = {1.5f, 0.956916928f, 0.318190217f, 0.0576415658f, 0.00486966083f};
static const float fc_ndtr_q[FC_NDTR_NQ] = {0.75f, 0.820030689f, 0.430095911f, 0.130650192f, 0.0230031442f,
                                             0.00194257684f};

#endif
