# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 144 of --seed 20240601; 22 statements minimized to 3
# compile error: eager compile: internal error: internal error: /work/main/passes/lower.c:363: check failed: buf >= 0
# input-seed=12277082788701961627
# reproduce: fusec run FILE --device cpu --check --random 12277082788701961627
#        or: difftest --replay FILE --input-seed 12277082788701961627
block g() {
    v11 = iota([12], axis=0, dtype=i64)
    v14 = reshape(v11, [2, 1, 6])
    v22 = slice(v14, -3, -2, 1)
    return v22
}
