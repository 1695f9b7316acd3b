# difftest found: an f16 chain log(abs(v) + 0.5) near log(1): the fused kernel keeps abs(v) + 0.5
# in f32, eager (and the reference interpreter) round it to f16 first; log's condition number
# 1/|log(y)| (about 14 here) amplifies that one rounding to 12 u(f16), over the f16 rule's 8 u.
#   fusec run f16_log_near_one.tf --device cpu --check --random 16378053759302733956
#   observed: check v7: max_abs_err=4.27e-04 max_rel_err=5.97e-03 tol=3.9e-03 FAIL (fused; eager ok)
#   expected: ok: both are legal meanings of f16 intermediates; the tolerance adds 2 x the
#             oracle's rounding spread (5.97e-03: rounding at every op vs at the outputs)
# Status: fixed by the tolerance rule for 16/8-bit intermediates (docs/tolerances.md,
# fc_block_check_tolerances); kept as a regression test (ctest difftest_found_*).
# Found by difftest --seed 20261124 (graph 2479), minimized by difftest.
# input-seed=16378053759302733956
block g(x0: bf16[], x1: f32[], x2: f16[]) {
    v5 = where(x0 > 0.125, x2, x2)
    v7 = log(abs(v5) + 0.5)
    return v7
}
