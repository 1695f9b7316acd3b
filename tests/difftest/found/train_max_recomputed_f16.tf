# difftest found: gradient of max over erf of an f16 value: 0 with --mem-budget 102 (the backward recomputed erf, kept in f32 in a fused kernel, and compared it with the forward's saved f16 max)
#   difftest --replay tests/difftest/found/train_max_recomputed_f16.tf --input-seed 3604272634461984709
# Status: fixed in passes/autodiff.c (commits f90a822, 8946ef0): the max/min rule reduces x
# again in the backward and compares x with that maximum, both computed from the same bits (for
# 16/8-bit dtypes explicitly rounded), instead of with the forward's saved result. The file stays
# as a regression test (ctest difftest_found_train_max_recomputed_f16).
# Kept from difftest-795531109-152.tf by tests/difftest/keep.sh (difftest --seed 795531109, graph 152).
# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 152 of --seed 795531109; 20 statements minimized to 4
# mismatch: gradients: fused CPU with --mem-budget vs fused CPU, gradient of input 0 'grad_x6' f32[1]: max_rel 1 (of max |eager|) (tol 0.00437 = 0.00391 + 2 x rounding spread 0.000232), max_abs 3.22; worst element [0]: budgeted 0, fused -3.21500444; eager CPU change under rounding noise nan (--mem-budget 102: the plan saves 44 bytes; the floor 4, --remat none saves 300)
# input-seed=3604272634461984709
# mode=train (a training check: fusec --train, docs/difftest.md)
# reproduce: difftest --replay FILE --input-seed 3604272634461984709
#  the program: fusec run FILE --device cpu --train --mem-budget 102 --random 3604272634461984709
#  with: fusec run FILE --device cpu --train --random 3604272634461984709
block g(x6: f32[1]) {
    v14 = broadcast(x6, [2, 5, 10])
    v15 = cast(v14, f16)
    v16 = erf(v15)
    v17 = max(v16, axis=2, keepdim=true)
    return v17
}
