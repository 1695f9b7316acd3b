# difftest found: fused compile fails with an internal error: fusion groups form a cycle when a
# log_softmax (a reduction group) feeds both a concat (together with a slice of exp(x)) and an
# elementwise product with exp(x).
#   fusec run fused_group_cycle.tf --device cpu --check
#   observed: fusec: error: internal error: ...: passes/lower.c:NNN: the groups form a cycle
#   expected: compiles and runs (it does with --no-fuse)
# Status: fixed in the tree by the lowering/fusion commits 6fd1894..88192b2; kept as a regression test
# (ctest difftest_found_*).
# Found by difftest --seed 20240601 (graph 308) and --seed 2 (graph 84), minimized by hand.
block g(x: f32[9], y: f32[1]) {
    e = exp(x)
    l = log_softmax(x)
    return concat([y, slice(e, 0, 4, 9), l]), l * e
}
