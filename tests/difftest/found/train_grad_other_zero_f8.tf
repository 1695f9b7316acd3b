# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 139 of --seed 20261909; 17 statements minimized to 4
# fixed: difftest normalized two programs' gradients by the eager one's largest magnitude only when
#  compare's relative error was finite, and it is inf when the other's gradient is all 0 (here
#  remat-full's d/dx1 of an rmsnorm over 2 elements, 0 against eager's -0.0078: one rounding
#  apart, spread 1); now 1.0 of max |eager|, within the widened tolerance 2.03
# mismatch: gradients: eager CPU vs remat-full CPU, gradient of input 1 'grad_x1' bf16[]: max_rel inf (of max |eager|) (tol 2.03 = 0.0313 + 2 x rounding spread 1), max_abs 0.00781; worst element [0]: eager -0.0078125, remat-full 0; oracle change under rounding noise 1.89
# input-seed=3637595526019154986
# mode=train (a training check: fusec --train, docs/difftest.md)
# precision=f8 (add --precision to every command below; a replay reads it here)
# reproduce: difftest --replay FILE --input-seed 3637595526019154986
#  the program: fusec run FILE --device cpu --train --no-fuse --remat none --random 3637595526019154986
#  with: fusec run FILE --device cpu --train --remat full --random 3637595526019154986
block g(x0: f32[2], x1: f32[]) {
    v4 = x1 - x0
    v6 = relu(x0)
    v7 = log_softmax(v4)
    v18 = rmsnorm(v4, axis=-1)
    return v18, v6
}
