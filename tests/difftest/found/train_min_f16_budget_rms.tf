# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 4 of --seed 20261201; 25 statements minimized to 4
# mismatch: gradients: fused CPU with --mem-budget vs fused CPU, gradient of input 0 'grad_x18' f16[1, 5]: max_rel 1 (of max |eager|) (tol 0.00391 = 0.00391 + 2 x rounding spread 0), max_abs 0.269; worst element [0]: budgeted 0, fused 0.269287109; oracle change under rounding noise nan (--mem-budget 31: the plan saves 28 bytes; the floor 20, --remat none saves 31)
# input-seed=1792737120972694850
# mode=train (a training check: fusec --train, docs/difftest.md)
# reproduce: difftest --replay FILE --input-seed 1792737120972694850
#  the program: fusec run FILE --device cpu --train --mem-budget 31 --random 1792737120972694850
#  with: fusec run FILE --device cpu --train --random 1792737120972694850
block g(x18: f16[1, 5], x11: f16[1, 5]) {
    v12 = rmsnorm(x11, x11, axis=[-2, -1], eps=1e-5)
    v21 = exp((x18 * 0.25))
    v23 = transpose(v21)
    v26 = min(v23, axis=0, keepdim=false)
    return v26, v12
}
