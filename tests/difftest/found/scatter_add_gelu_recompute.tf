# difftest found: a timeout: scatter_add's row walk recomputed at every read (hc_reset after its loop dropped the caller's index expressions, so the value cache missed), and the tanh gelu's backward reads its input a dozen times: a 37,000-line kernel
# Status: fixed by hc_trunc (lower.c): after an inner loop only the expressions made inside it are
# dropped; the kernel is 474 lines. A regression test
# (ctest difftest_found_scatter_add_gelu_recompute).
# Kept from difftest-11251-1079.tf by tests/difftest/keep.sh (difftest --seed 11251, graph 1079).
# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 1079 of --seed 11251; not minimized
# timeout: the training check did not finish in 180 s (LLVM optimizing a 37,000-line backward kernel)
# input-seed=13020216568535153065
# mode=train (a training check: fusec --train, docs/difftest.md)
block g(x0: f32[], x1: bool[8, 7, 12, 1], x2: bool[10, 7, 6], param x3: f32[10, 1]) {
    v4 = causal_mask(x3, -1e4)
    v5 = slice(x2, 2, -6, -1, 1)
    v6 = x3 >= x0
    v7 = x0 - v4
    v8 = cast(x0, bf16)
    v9 = cast(v8, f32)
    v10 = cast(x3, f8e5m2)
    v11 = cast(v10, f32)
    v12 = maximum(v9, v11)
    v13 = v12 / (abs(v12) + 0.5)
    v14 = v13 + 1.5
    v15 = relu(v8)
    v16 = scatter_add(v13, minimum(iota([10, 1], 1), 0), 1)
    v17 = ndtr(v8)
    v18 = cast(v15, f16)
    v19 = gelu(v16, approx="tanh")
    v20 = mean(v19, axis=-1, keepdim=true)
    v21 = transpose(v19, [0])
    return v21, v12, v9
}
