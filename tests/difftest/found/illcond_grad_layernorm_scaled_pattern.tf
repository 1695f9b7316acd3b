# difftest found: the gradient w.r.t. a scalar c of layernorm(c * dropout pattern): scale-invariant, ~eps's effect (2e-6) from terms of order 1; 3% in f32
#   difftest --replay tests/difftest/found/illcond_grad_layernorm_scaled_pattern.tf --input-seed 17754956114897506331
# Status: the tester's, fixed (docs/difftest.md, "Ill-conditioned graphs"): ill-conditioned now.
# A regression test
# (ctest difftest_found_illcond_grad_layernorm_scaled_pattern).
# Kept from difftest-11262-3479.tf by tests/difftest/keep.sh (difftest --seed 11262, graph 3479).
# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 3479 of --seed 11262; 16 statements minimized to 4
# mismatch: gradients: fused CPU vs reference backward, gradient of input 0 'grad_x0' f32[]: max_rel 0.03 (tol 5.32e-06 = 5.32e-06 + 2 x rounding spread 0), max_abs 6.58e-08; worst element [0]: fused 2.12771351e-06, reference 2.19355707e-06; oracle change under rounding noise 2.07e-06
# input-seed=17754956114897506331
# mode=train (a training check: fusec --train, docs/difftest.md)
# reproduce: difftest --replay FILE --input-seed 17754956114897506331
#  the program: fusec run FILE --device cpu --train --random 17754956114897506331
#  with: fusec run FILE --device reference --train --random 17754956114897506331
block g(x0: f32[]) {
    v3 = broadcast(x0, [4, 4])
    v4 = dropout(v3, 0.48, seed=8016147664268114419)
    v5 = layernorm(v4, full([4], 1.5), full([4], -0.25), axis=1)
    v6 = min(v5, axis=[1], keepdim=true)
    return v6
}
