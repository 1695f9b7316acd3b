# difftest found: v - mean(v) over one element with the mean stored as f16 and read by the subtraction: the kernel's v - round(v) residue (1.5e-5) against 0 in both legal meanings; the per-kernel check reported it over its bound
#   fusec run tests/difftest/found/stored_mean_residue.tf --device cpu --check --random 16727204629111172382
# Status: fixed in the check, not the kernel: the kernel's value is the third legal meaning of a
# 16-bit intermediate (rounded where stored and read, passes/lower.c rounds_stored), which the
# tolerance's spread now includes (RT_ROUND_STORED, docs/tolerances.md); the file stays as a
# regression test (ctest difftest_found_stored_mean_residue).
# Kept from r300.tf by tests/difftest/keep.sh (difftest --seed 2026112883, graph 300).
# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 300 of --seed 2026112883; 10 statements minimized to 4
# kernel over its bound (fc_program_check_kernels): fused kernel k1_mean (gelu,mean,sub): fp8_quant of sub at 4:10: max_rel_err=1.64e+04 tol=0.25
# input-seed=16727204629111172382
# precision=f8 (add --precision to every command below; a replay reads it here)
# reproduce: fusec run FILE --device cpu --check --random 16727204629111172382
#        or: difftest --replay FILE --input-seed 16727204629111172382
block g(x3: f16[1, 1]) {
    v4 = gelu(x3, approx="tanh")
    v5 = mean(v4, axis=1, keepdim=true)
    v6 = sub(v4, v5)
    v7 = concat([v6, v5], axis=-2)
    return v7
}
