# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 308 of --seed 20240601; 24 statements minimized to 9
# compile error: fused compile: internal error: internal error: /work/main/passes/lower.c:1113: the groups form a cycle
# input-seed=16293635075202029798
# reproduce: fusec run FILE --device cpu --check --random 16293635075202029798
#        or: difftest --replay FILE --input-seed 16293635075202029798
block g(x0: f32[2, 1, 1], x25: f32[3, 1], x4: f16[1, 1]) {
    v6 = log_softmax(x0)
    v7 = slice(x4, axis=-1, start=0, end=1, step=1)
    v8 = recip(abs(v6) + 0.5)
    v10 = transpose(v7, [0, -1])
    v11 = v6 + v10
    v19 = max(v8, axis=1)
    v21 = recip(1.0 + v19 * v19)
    v24 = v21 / (abs(v7) + 0.5)
    v26, v27 = split(x25, [1, 2], -2)
    return v26
}
