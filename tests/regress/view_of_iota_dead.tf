# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 50 of --seed 20240601; 15 statements minimized to 5
# compile error: eager compile: internal error: internal error: /work/main/passes/lower.c:363: check failed: buf >= 0
# input-seed=13824886301732743117
# reproduce: fusec run FILE --device cpu --check --random 13824886301732743117
#        or: difftest --replay FILE --input-seed 13824886301732743117
block g(x18: f32[1, 1, 1, 1]) {
    v4 = iota([5, 8, 7], axis=-1, dtype=i64)
    v11 = reshape(v4, [14, 5, 4, 1])
    v14 = cast(v11, i64)
    v15 = mean(v14, axis=[3], keepdim=true)
    v17 = sqrt(abs(x18) + 0.5)
    return v17
}
