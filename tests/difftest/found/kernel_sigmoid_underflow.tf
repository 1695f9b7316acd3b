# difftest found: sigmoid(x) for x < -88.7 gave 0 on the CPU (1 / (1 + exp(-x)) overflows in f32) where e^x is an f32 subnormal; an intermediate, masked at the output by a layernorm over one element: found by the per-kernel check
#   fusec run tests/difftest/found/kernel_sigmoid_underflow.tf --device cpu --check --random 18215896716408805046
# Status: fixed in passes/lower.c (emit_unary): sigmoid and silu with e = exp(-|x|), e / (1 + e)
# for x < 0, so nothing overflows and e^x keeps its subnormals; the file stays as a regression test
# (ctest difftest_found_kernel_sigmoid_underflow).
# Kept from difftest-20261307-1250.tf by tests/difftest/keep.sh (difftest --seed 20261307, graph 1250).
# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 1250 of --seed 20261307; 27 statements minimized to 12
# kernel over its bound (fc_program_check_kernels): fused kernel k0_causal_mask (causal_mask,split,sigmoid,mul,relu,minimum): mul at 8:11: max_rel_err=1 tol=4.05e-06
# input-seed=18215896716408805046
# reproduce: fusec run FILE --device cpu --check --random 18215896716408805046
#        or: difftest --replay FILE --input-seed 18215896716408805046
block g(x0: f32[10, 1], x8: f32[1, 2, 1, 1], x6: f32[1, 1]) {
    v1 = causal_mask(x0, -100.0)
    v2, v3 = split(v1, 2, 0)
    v9 = sigmoid(v2)
    v10 = mul(v9, (x8 * 0.5))
    v12 = relu(x6)
    v14 = minimum(v10, v12)
    v15 = mul((v14 * 0.25), 2.0)
    v21 = layernorm(v15, full([1], 1.5), full([1], -0.25))
    v22 = max(v12, axis=0)
    v24 = v21 + v21
    v25 = sin((v22 * 0.03125))
    v27 = v25 * v24
    return v27
}
