# difftest found: gradient of max over a recomputed bf16 matmul: 0 with --mem-budget 69 (the backward compared the recomputed matmul with the forward's saved max: no element equal)
#   difftest --replay tests/difftest/found/train_max_recomputed_matmul.tf --input-seed 13599737691945550827
# Status: fixed in passes/autodiff.c (commits f90a822, 8946ef0): the max/min rule reduces x
# again in the backward and compares x with that maximum, both computed from the same bits (for
# 16/8-bit dtypes explicitly rounded), instead of with the forward's saved result. The file stays
# as a regression test (ctest difftest_found_train_max_recomputed_matmul).
# Kept from difftest-795531108-220.tf by tests/difftest/keep.sh (difftest --seed 795531108, graph 220).
# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 220 of --seed 795531108; 15 statements minimized to 2
# mismatch: gradients: fused CPU with --mem-budget vs fused CPU, gradient of input 0 'grad_x6' bf16[11, 1]: max_rel 1 (of max |eager|) (tol 0.0717 = 0.0313 + 2 x rounding spread 0.0202), max_abs 2.22; worst element [4]: budgeted 0, fused -2.21875; eager CPU change under rounding noise nan (--mem-budget 69: the plan saves 66 bytes; the floor 22, --remat none saves 165)
# input-seed=13599737691945550827
# mode=train (a training check: fusec --train, docs/difftest.md)
# reproduce: difftest --replay FILE --input-seed 13599737691945550827
#  the program: fusec run FILE --device cpu --train --mem-budget 69 --random 13599737691945550827
#  with: fusec run FILE --device cpu --train --random 13599737691945550827
block g(x6: bf16[11, 1]) {
    v7 = matmul(x6, transpose(x6))
    v8 = max(v7, axis=-1, keepdim=true)
    return v8
}
