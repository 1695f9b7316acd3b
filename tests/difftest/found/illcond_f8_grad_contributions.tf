# difftest found: mismatch: gradients: fused CPU vs reference backward, grad_x1 bf16[]: fused 0, reference -0.2421875 (max_rel 1, tol 0.5) (difftest --seed 2026112618 --precision bf16, graph 115)
#   difftest --replay tests/difftest/found/illcond_f8_grad_contributions.tf
# Status: not a compiler bug. v3 is e5m2, so its gradient is too: the gradients of v5 and v4
# (-1.09, -1.16) reach it as one contribution, -2.24, stored as -2 (2 significand bits) and
# added to grad_v3 = 2: 0, in fused and eager alike (an autograd engine adds contributions in the
# value's dtype), where the f64 oracle has -0.24. The oracle's noisy backward now rounds each
# contribution to an f8 gradient (node_bw_noisy in runtime/interp_grad.c), so the check calls
# it ill-conditioned (oracle change 1.08); it must keep doing so. The file stays as a
# regression test (ctest difftest_found_illcond_f8_grad_contributions).
# Kept from repro115.tf by tests/difftest/keep.sh.
# input-seed=15985692255779912395
# mode=train
# precision=bf16
block g(x0: bf16[], x1: f32[]) {
    v3 = cast(x1, f8e5m2)
    v4 = cast(v3, f32)
    v5 = maximum(v4, -1.0)
    return v5, v3, v4
}
