# difftest found: training compile: internal error: pass_autodiff: the gradient of 'sum' made a bad 'broadcast': cannot broadcast f32[6, 4, 1] to [] (a shape read through a pointer into the joint graph's values after emitting moved them)
#   difftest --replay tests/difftest/found/train_grad_shape_moved.tf --input-seed 5609235166810161603
# Status: fixed by passes/autodiff.c copying the shapes it reads across emits (unbroadcast,
# rule_reduce, rule_slice, rule_gather held &V(d, x)->shape while emitting nodes, which grows,
# and may move, the joint graph's values: a use after free). The file stays as a regression test
# (ctest difftest_found_train_grad_shape_moved).
# Kept from difftest-2-101.tf by tests/difftest/keep.sh (difftest --seed 2, graph 101).
# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 101 of --seed 2; 5 statements minimized to 3
# compile error: fused compile (training): internal error: internal error: pass_autodiff: the gradient of 'sum' made a bad 'broadcast': cannot broadcast f32[6, 4, 1] to []
# input-seed=5609235166810161603
# mode=train (a training check: fusec --train, docs/difftest.md)
# reproduce: difftest --replay FILE --input-seed 5609235166810161603
#  the program: fusec run FILE --device cpu --train --random 5609235166810161603
block g(param x0: f32[6, 4, 9]) {
    v1 = reshape(x0, [216])
    v2 = sum(x0, axis=-1)
    v5 = transpose(x0, [1, 0, 2])
    return v5, v2, v1
}
