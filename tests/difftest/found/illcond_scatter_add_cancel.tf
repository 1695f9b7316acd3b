# difftest found: a scatter_add of concat([x, -x]): exactly 0 in f64, 1.8e-6 in f32 (fused and eager alike); the tester's noise did not count scatter_add as accumulating, nor perturb neg
#   fusec run tests/difftest/found/illcond_scatter_add_cancel.tf --device cpu --check --random 6019373517470700263
# Status: the tester's, fixed (docs/difftest.md, "Ill-conditioned graphs"): ill-conditioned now.
# A regression test
# (ctest difftest_found_illcond_scatter_add_cancel).
# Kept from difftest-11263-44.tf by tests/difftest/keep.sh (difftest --seed 11263, graph 44).
# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 44 of --seed 11263; 8 statements minimized to 2
# mismatch: fused CPU vs reference, output 0 'v9' f32[3, 1]: max_rel inf (tol 7.52e-06 = 7.52e-06 + 2 x rounding spread 0), max_abs 1.79e-06; worst element [2]: fused -1.78813934e-06, reference 0; oracle change under rounding noise 0
# input-seed=6019373517470700263
# reproduce: fusec run FILE --device cpu --check --random 6019373517470700263
#        or: difftest --replay FILE --input-seed 6019373517470700263
block g(x2: f32[11, 11, 1]) {
    v4 = concat([x2, -x2], axis=-2)
    v9 = scatter_add(v4, minimum(iota([11, 22], 0), 2), 3)
    return v9
}
