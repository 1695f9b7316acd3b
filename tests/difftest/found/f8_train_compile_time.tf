# difftest found: a training check at f8 that timed out (3 x 60 s): forcing llvm.loop.interleave.count 4 on the CPU's
# thread loops with f8 conversions (tried on 2026-11-27 to overlap the E4M3 dependency chains) sent LLVM 19's loop
# vectorizer into InnerLoopVectorizer::sinkScalarOperands for minutes on one of the six programs the check compiles
# Status: the interleave was reverted (docs/cpu.md, "Rounding in registers"); the check takes about 14 s. The file stays
# as a regression test of the compile time of f8 training programs (ctest difftest_found_f8_train_compile_time).
# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 29 of --seed 2026112807 (not minimized: the run was stopped)
# timeout: child killed by signal 14 (Alarm clock)
# input-seed=13150432131706852977
# mode=train (a training check: fusec --train, docs/difftest.md)
# precision=f8 (add --precision to every command below; a replay reads it here)
# reproduce: difftest --replay FILE --input-seed 13150432131706852977
block g(x0: f32[1, 11, 11], x1: i8[1, 11, 11]) {
    v2 = cast(x1, bf16)
    v3 = x0 != x0
    v4 = softmax(causal_mask(x0))
    v5 = erf(v4)
    v6 = slice(v5, -1, 8, 10, 2)
    v7 = rmsnorm(v5, v4, axis=[0, 1, 2], eps=0.01)
    v8 = tanh(v5)
    v9 = layernorm(v8, axis=2)
    v10 = reshape(v8, 121)
    v11 = reshape(v10, [11, -1])
    v12 = ndtr(v10)
    v13 = div(v10, 0.75)
    v14 = gather(v11, iota([2], 0))
    v15 = rsqrt(abs(v8) + 0.5)
    v16 = silu(v14)
    v17 = transpose(v6)
    v18 = neg(v16)
    v19 = square(v18)
    v20 = sqrt(abs(v17) + 0.5)
    v21 = square(v18)
    v22 = cast(v19, bf16)
    v23 = silu(v22)
    v24 = softmax(v22, 1)
    v25 = mul(v23, 3.0)
    v26 = gather(v25, iota([1, 4, 2], 2))
    return v26, v24
}
