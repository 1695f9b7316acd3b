# difftest found: f8 --train, seed 2026112850 graph 814 (CUDA emulation on): grad_x1 is 0 in exact arithmetic (log_softmax does not move when x1 shifts every element) and 0 in the reference, while fused and eager give -0.0088, 144x the f16 floor against a conditioning measure of 33 (4x: 134)
#   fusec run tests/difftest/found/illcond_f8_log_softmax_grad_sum.tf --device cpu --check --random 5594866063883599152 --train --precision f8
# Status: fixed in the gradient oracle's noise (runtime/interp_grad.c softmax_bw): at f8 the
# backward reads the log_softmax y from its E4M3 copy (passes/autodiff.c), so exp(y) sums to 1
# only within y's rounding and the sum of the gradients, which x1's is, is that residue times
# sum(gy). The noisy oracle moved the softmax by a relative rounding of f16 (the result's
# dtype); it now moves y itself by a rounding of the type it is stored in (E4M3 here: the
# measure is 2310, the error 144, ill-conditioned). `fusec run --check` reported FAIL before;
# kept as a regression test (ctest difftest_found_illcond_f8_log_softmax_grad_sum).
# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 814 of --seed 2026112850; minimized to 3 statements
# input-seed=5594866063883599152
# mode=train (a training check: fusec --train, docs/difftest.md)
# precision=f8 (add --precision to every command below; a replay reads it here)
# reproduce: fusec run FILE --device cpu --check --random 5594866063883599152
#        or: difftest --replay FILE --input-seed 5594866063883599152
block g(param x0: f16[3], x1: f16[]) {
    v5 = x1 - x0
    v10 = log_softmax(v5, 0)
    v14 = layernorm(x0, v10, x0, axis=0)
    return v14
}
