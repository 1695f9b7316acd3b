# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 370 of --seed 20240601; 25 statements minimized to 7
# compile error: fused compile: internal error: internal error: /work/main/passes/lower.c:1113: the groups form a cycle
# input-seed=405123938739909417
# reproduce: fusec run FILE --device cpu --check --random 405123938739909417
#        or: difftest --replay FILE --input-seed 405123938739909417
block g(x1: f32[1, 1, 1, 1], x2: f32[1, 1], x3: i32[1, 1, 1], x25: f32[1, 1, 1, 1], x22: f32[1, 1, 1, 1], x7: i32[1, 1, 1]) {
    v8 = tanh(x3)
    v13 = v8 @ x1
    v16 = where(x2 > 0.125, v13, x22)
    v23 = where(x7 > -5, x22, x22)
    v24 = max(v23, axis=1, keepdim=true)
    v27 = mul(v24, v8)
    v28 = sigmoid(x25)
    return v28
}
