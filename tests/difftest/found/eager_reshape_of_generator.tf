# difftest found: eager (--no-fuse) compile fails with an internal error when a generator
# (iota or full) is reshaped: the reshape is "free" in eager mode but its source has no buffer.
#   fusec run eager_reshape_of_generator.tf --device cpu --check --no-fuse
#   observed: fusec: error: internal error: ...: passes/lower.c:NNN: check failed: buf >= 0
#   expected: out0[i, j] = (6*i + j) * x[i, j] (the fused build compiles and runs it correctly)
# Status: fixed in the tree by the lowering/fusion commits 6fd1894..88192b2; kept as a regression test
# (ctest difftest_found_*).
# Found by difftest --seed 20240601 (graphs 50 and 144), minimized by hand from its reproducer.
# Also: reshape(full([12], 1.5), [2, 6]) * x, and max(reshape(iota([12], 0), [2, 6]), axis=-1).
block g(x: f32[2, 6]) {
    return reshape(iota([12], axis=0, dtype=f32), [2, 6]) * x
}
