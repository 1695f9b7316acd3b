# difftest found: a softmax near one-hot: y (g - sum(g y)) cancels, and the f32 rounding of y moves the gradient by 1.5e-4 (the oracle recomputed y in f64; its noisy backward now rounds it: 6.1e-4)
#   difftest --replay tests/difftest/found/illcond_grad_softmax_one_hot.tf --input-seed 6491657548658353860
# Status: the tester's, fixed: rt_interp_grad_noisy also rounds the softmax its backward recomputes
# (and runs the forward with rt_interp_run_noisy's noise); ill-conditioned now. A regression test
# (ctest difftest_found_illcond_grad_softmax_one_hot).
# Kept from difftest-20261201-14.tf by tests/difftest/keep.sh (difftest --seed 20261201, graph 14).
# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 14 of --seed 20261201; 26 statements minimized to 3
# mismatch: gradients: fused CPU vs reference backward, gradient of input 1 'grad_x1' f32[3, 8]: max_rel 0.000154 (tol 5.32e-06 = 5.32e-06 + 2 x rounding spread 0), max_abs 1.11e-06; worst element [21]: fused 0.00276746927, reference 0.0027663596; oracle change under rounding noise 1.29e-07
# input-seed=6491657548658353860
# mode=train (a training check: fusec --train, docs/difftest.md)
# reproduce: difftest --replay FILE --input-seed 6491657548658353860
#  the program: fusec run FILE --device cpu --train --random 6491657548658353860
#  with: fusec run FILE --device reference --train --random 6491657548658353860
block g(x0: f32[1, 1], x1: f32[3, 8]) {
    v11 = matmul(x1, transpose(x1))
    v12 = broadcast(v11, [4, 5, 3, 3])
    v24 = softmax(v12, axis=3)
    return v24
}
