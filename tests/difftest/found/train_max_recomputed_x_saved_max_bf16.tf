# difftest found: gradient of a bf16 max with --mem-budget 468: the plan saved the max the backward's rule takes again and recomputed the x it compares with it, whose last bit differed (no element matched)
#   difftest --replay tests/difftest/found/train_max_recomputed_x_saved_max_bf16.tf --input-seed 1477861452573483084
# Status: fixed in passes/remat.c (solve): a value compared with eq or ne with one computed from
# it is not recomputed while the other is computed by the forward (an infinite edge of the cut),
# so the max the max rule takes again and the x it compares with it have the same bits. (The
# rule itself, passes/autodiff.c, already took the max again from x; the cut saved that max and
# recomputed x.) The file stays as a regression test
# (ctest difftest_found_train_max_recomputed_x_saved_max_bf16).
# Kept from difftest-2026113001-1574.tf by tests/difftest/keep.sh (difftest --seed 2026113001, graph 1574).
# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 1574 of --seed 2026113001; 24 statements minimized to 9
# mismatch: gradients: fused CPU with --mem-budget vs fused CPU, gradient of input 0 'grad_x0' bf16[6, 6, 2]: max_rel 0.147 (of max |eager|) (tol 0.0358 = 0.0313 + 2 x rounding spread 0.00228), max_abs 2.01; worst element [45]: budgeted 1.8046875, fused 3.8125; oracle change under rounding noise 0.0228 (--mem-budget 468: the plan saves 264 bytes; the floor 144, --remat none saves 1116)
# input-seed=1477861452573483084
# mode=train (a training check: fusec --train, docs/difftest.md)
# reproduce: difftest --replay FILE --input-seed 1477861452573483084
#  the program: fusec run FILE --device cpu --train --mem-budget 468 --random 1477861452573483084
#  with: fusec run FILE --device cpu --train --random 1477861452573483084
block g(x0: bf16[6, 6, 2]) {
    v2 = where(x0 > 0.125, x0, x0)
    v3 = x0 * v2
    v6 = v3 * x0
    v8 = max(v6, axis=[0, 2])
    v10 = x0 * (v6 * 0.25)
    v15 = cast(v2, bf16)
    v16 = cast(v15, f32)
    v17 = min(v16, axis=[2], keepdim=false)
    v24 = v17 / (abs(v8) + 0.5)
    return v24, v10
}
