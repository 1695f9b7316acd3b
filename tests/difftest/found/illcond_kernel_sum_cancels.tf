# difftest found: the per-kernel check: a sum of 6 inputs that cancel, an intermediate; rounding noise on the inputs explains its error
#   fusec run tests/difftest/found/illcond_kernel_sum_cancels.tf --device cpu --check --random 1666958012370482315
# Status: fixed in the check (fc_program_check_kernels): the conditioning measure perturbs the
# inputs at their rounding level too (a sum of inputs has no computing op before it for the
# interpreter's noise to move); kept as a regression test
# (ctest difftest_found_illcond_kernel_sum_cancels).
# Kept from difftest-20261305-564.tf by tests/difftest/keep.sh (difftest --seed 20261305, graph 564).
# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 564 of --seed 20261305; 22 statements minimized to 2
# kernel over its bound (fc_program_check_kernels): fused kernel k0_sum (sum): sum at 2:10: max_rel_err=1.44e-05 tol=4.4e-06
# input-seed=1666958012370482315
# reproduce: fusec run FILE --device cpu --check --random 1666958012370482315
#        or: difftest --replay FILE --input-seed 1666958012370482315
block g(x0: f32[6], x10: f32[1, 1, 1]) {
    v3 = sum(x0, axis=[0], keepdim=true)
    v13 = add(x10, v3)
    return v13
}
