# difftest found: a layernorm over 2 elements then an rmsnorm: 1.7e-5 in f32 from the rounding of the mean, which per-statement noise cannot see; now classified ill-conditioned by the decomposed-graph noise (rt_interp_run_noisy)
#   fusec run tests/difftest/found/illcond_layernorm_two_rmsnorm.tf --device cpu --check --random 2092582009089528131
# Status: not a compiler bug: the error is f32 rounding inside a composite; the conditioning
# check that perturbs the decomposed graph (rt_interp_run_noisy) must keep classifying it as
# ill-conditioned. The file stays as a regression test
# (ctest difftest_found_illcond_layernorm_two_rmsnorm).
# Kept from difftest-9106-90.tf by tests/difftest/keep.sh (difftest --seed 9106, graph 90).
# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 90 of --seed 9106; 13 statements minimized to 3
# mismatch: fused CPU vs reference, output 0 'v8' f32[10, 1, 2]: max_rel 1.72e-05 (tol 4.29e-06 = 4.29e-06 + 2 x rounding spread 0), max_abs 1.72e-05; worst element [12]: fused 1.00000763, reference 0.999990463; oracle change under rounding noise nan
# input-seed=2092582009089528131
# reproduce: fusec run FILE --device cpu --check --random 2092582009089528131
#        or: difftest --replay FILE --input-seed 2092582009089528131
block g(x0: f32[10, 1, 2]) {
    v4 = rsqrt(abs(x0) + 0.5)
    v5 = layernorm(v4, full([2], 1.5), axis=2)
    v8 = rmsnorm(v5, axis=2, eps=1e-5)
    return v8
}
