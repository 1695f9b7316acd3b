# difftest found: the --check of an operand kernel making B^T (b_transposed) compared it as B
#   fusec run tests/difftest/found/check_transposed_operand_buffer.tf --device cpu --check --random 1403432239190636703
# Status: fixed before it landed: the operand kernel's buffer holding B^T is no longer tagged as B's value
# (passes/lower.c operand_materialize); the file stays as a regression test
# (ctest difftest_found_check_transposed_operand_buffer).
# Kept from difftest-2026112921-276.tf by tests/difftest/keep.sh (difftest --seed 2026112921, graph 276).
# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 276 of --seed 2026112921; 17 statements minimized to 1
# kernel over its bound (fc_program_check_kernels): fused kernel k1_operand (matmul operand): transpose at 2:10: max_rel_err=0.106 tol=4.05e-06
# input-seed=1403432239190636703
# reproduce: fusec run FILE --device cpu --check --random 1403432239190636703
#        or: difftest --replay FILE --input-seed 1403432239190636703
block g(x0: f32[2, 2], x1: f64[2, 1]) {
    v4 = attention(x0, x0, x1, causal=true)
    return v4
}
