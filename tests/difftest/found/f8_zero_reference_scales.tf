# difftest found: at --precision f8 the fused output of a layernorm of tanh values near 1 failed against a reference that is all zeros ("max_rel 7.9e+305"): the comparison of f8 tensors with different scales divided by f64's smallest normal
#   difftest --replay tests/difftest/found/f8_zero_reference_scales.tf --input-seed 16490589664689189868 --device cuda
#   observed: fused CUDA vs reference, output 'v20' f8e4m3[3, 3]: max_rel 3.07e+305 (tol 1), max_abs 0.00684
#   expected: within the tolerance (the fused kernel keeps tanh(v9) in f32, where the reference
#   rounds each to 1.0 in E4M3 and its layernorm gives 0; both are the documented meanings)
# Status: fixed in fc_tensor_compare: f8 tensors with scales are compared by their values over
# E4M3's smallest normal at the coarser of the two scales (2^-6 / scale), as f8 tensors at the
# same scale always were (docs/tolerances.md, "The metric"). The GPU program's output scale was
# 2^16 (its delayed scaling saw the kernel's amax of 0.005), the reference's 1 (its amax was 0);
# `fusec run --check` failed the same way on the CPU for these inputs (the program's scale
# settles at 2^16 after three runs). tests/unit/test_tolerance.c (g) checks both.
# Found on an H200 by difftest --device cuda --precision f8 --seed 2026112811 (graph 87, 20
# statements minimized to 5), the only failure in 219 graphs; the CPU replay passed (both scales 1).
# input-seed=16490589664689189868
# precision=f8 (add --precision to every command below; a replay reads it here)
# reproduce: difftest --replay FILE --input-seed 16490589664689189868
#  the program: fusec run FILE --device cuda --check --random 16490589664689189868
block g(x0: f16[1, 1, 1], x1: i32[], x2: f32[1, 1, 1], param x3: i8[1, 1, 1], x5: f16[1, 3, 2]) {
    v7 = x5 + 2.0
    v8 = gather(v7, x1)
    v9 = v8 @ transpose(v8)
    v19 = tanh(v9)
    v20 = layernorm(v19, axis=[0, 1], eps=0.01)
    return v20
}
