# difftest found: at --precision bf16 the tester's conditioning measure compiled the unlowered source (f32) and read the bf16 tensors as f32: a heap overflow in the child (free(): invalid next size). The gradient of x1 is 0 in exact arithmetic (cross_entropy of rows shifted by a constant): ill-conditioned
#   fusec run tests/difftest/found/illcond_bf16_grad_shift_invariant.tf --device cpu --check --random 1484993023913704315
# Status: fixed in the tester (difftest.c source_graph: the conditioning measures compile the
# source at --precision, as the library does); kept as a regression test
# (ctest difftest_found_illcond_bf16_grad_shift_invariant).
# Kept from g38r.tf by tests/difftest/keep.sh (difftest --seed 3, graph 38).
# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 38 of --seed 3; 11 statements minimized to 4
# crash: child killed by signal 6 (Aborted)
# input-seed=1484993023913704315
# mode=train (a training check: fusec --train, docs/difftest.md)
# precision=bf16 (add --precision to every command below; a replay reads it here)
# reproduce: fusec run FILE --device cpu --check --random 1484993023913704315
#        or: difftest --replay FILE --input-seed 1484993023913704315
block g(x0: f32[6, 6], x1: f32[6, 6], x2: i32[], x4: bool[1]) {
    v5 = cross_entropy((x1 * 0.25), iota([6], 0))
    v8 = v5 - x0
    v10 = cross_entropy((v8 * 0.0625), iota([6], 0))
    v14 = where(x4, v10, -1.5)
    return v14
}
