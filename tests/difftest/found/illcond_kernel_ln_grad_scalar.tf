# difftest found: the kernel check failed a layernorm backward's sum into a broadcast f16 scalar (rounding noise against terms of 1) once pass_cse merged the recomputed terms: one noise seed moved it by 0; four seeds call it ill-conditioned
#   difftest --replay tests/difftest/found/illcond_kernel_ln_grad_scalar.tf --input-seed 8130226322311430119
# Status: open. When fixed, say by what here; the file stays as a regression test
# (ctest difftest_found_illcond_kernel_ln_grad_scalar).
# Kept from difftest-2026112921-191.tf by tests/difftest/keep.sh (difftest --seed 2026112921, graph 191).
# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 191 of --seed 2026112921; 18 statements minimized to 5
# kernel over its bound (fc_program_check_kernels): fused backward kernel k1_add (add): cast of add at 2:13: max_rel_err=1 tol=0.0313
# input-seed=8130226322311430119
# mode=train (a training check: fusec --train, docs/difftest.md)
# reproduce: difftest --replay FILE --input-seed 8130226322311430119
#  the program: fusec run FILE --device cpu --train --random 8130226322311430119
block g(param x0: bf16[6, 6], x1: f32[1, 1], x2: i32[1, 1], x3: f16[]) {
    v5 = x3 + x0
    v12 = layernorm(v5, full([6], 1.5), full([6], -0.25), axis=1)
    v17 = log_softmax(v12)
    v18 = transpose(v12)
    v21 = scatter_add(v18, minimum(iota([6], 0), 5), 6)
    return v21, v18, v17
}
