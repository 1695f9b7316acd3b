# difftest found: the per-kernel check: the backward's sum of a softmax's input gradient (exactly 0: softmax is shift invariant) is pure rounding noise
#   difftest --replay tests/difftest/found/illcond_kernel_softmax_grad_sum.tf --input-seed 6899345267390918781
# Status: fixed in the check (fc_program_check_kernels): a kernel value over its bound whose
# reference moves by a quarter of its error or more under rounding-level noise is counted
# ill-conditioned, not a failure (the tester's rule for outputs); kept as a regression test
# (ctest difftest_found_illcond_kernel_softmax_grad_sum).
# Kept from difftest-20261302-39.tf by tests/difftest/keep.sh (difftest --seed 20261302, graph 39).
# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 39 of --seed 20261302; 16 statements minimized to 4
# kernel over its bound (fc_program_check_kernels): fused backward kernel k0_add (softmax,add): sum of add at 4:15: max_rel_err=0.0303 tol=4.4e-06
# input-seed=6899345267390918781
# mode=train (a training check: fusec --train, docs/difftest.md)
# reproduce: difftest --replay FILE --input-seed 6899345267390918781
#  the program: fusec run FILE --device cpu --train --random 6899345267390918781
block g(x1: f32[2, 1], x11: i32[1, 3]) {
    v4 = sum(x1, axis=-2, keepdim=true)
    v8 = softmax(x1, axis=0)
    v14 = x11 + v4
    v21 = softmax(v14, axis=-1)
    return v21, v8
}
