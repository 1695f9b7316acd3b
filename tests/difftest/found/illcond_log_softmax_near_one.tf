# difftest found: gelu(log_softmax) over 2 elements 7 apart: log of a sum near 1 in f32 (1.1e-5 of a small output); now classified ill-conditioned by the decomposed-graph noise (rt_interp_run_noisy)
#   fusec run tests/difftest/found/illcond_log_softmax_near_one.tf --device cpu --check --random 8265332392475942039
# Status: not a compiler bug: the error is f32 rounding inside a composite; the conditioning
# check that perturbs the decomposed graph (rt_interp_run_noisy) must keep classifying it as
# ill-conditioned. The file stays as a regression test
# (ctest difftest_found_illcond_log_softmax_near_one).
# Kept from difftest-9102-145.tf by tests/difftest/keep.sh (difftest --seed 9102, graph 145).
# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 145 of --seed 9102; 23 statements minimized to 4
# mismatch: fused CPU vs reference, output 0 'v23' f32[1, 2]: max_rel 1.1e-05 (tol 4.45e-06 = 4.45e-06 + 2 x rounding spread 0), max_abs 9.6e-09; worst element [1]: fused -0.00087669061, reference -0.000876700215; oracle change under rounding noise nan
# input-seed=8265332392475942039
# reproduce: fusec run FILE --device cpu --check --random 8265332392475942039
#        or: difftest --replay FILE --input-seed 8265332392475942039
block g(x0: f32[1, 1], x1: f32[], x2: bf16[1, 1], x3: i32[1, 1], x13: f32[5, 2]) {
    v16 = sum(x13, axis=0, keepdim=true)
    v17 = square(v16)
    v18 = log_softmax(v17)
    v23 = gelu(v18, approx="tanh")
    return v23
}
