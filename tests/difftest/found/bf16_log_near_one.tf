# difftest found: a bf16 chain log(abs((x - 1.25) * (x + x)) + 0.5) near log(1): eager (and the
# reference interpreter) round the product and abs(.) + 0.5 to bf16 (1.0156 instead of 1.0201),
# the fused kernel keeps them in f32; log's condition number (about 65 here) makes that 0.28
# relative, 9 x the bf16 rule (0.0313).
#   fusec run bf16_log_near_one.tf --device cpu --check --random 14810965746054394676
#   observed: check v5: max_abs_err=4.39e-03 max_rel_err=2.83e-01 tol=3.1e-02 FAIL (fused; eager ok)
#   expected: ok: both are legal meanings of bf16 intermediates; the tolerance adds 2 x the
#             oracle's rounding spread (0.283: rounding at every op vs at the outputs)
# Status: fixed by the tolerance rule for 16/8-bit intermediates (docs/tolerances.md,
# fc_block_check_tolerances); kept as a regression test (ctest difftest_found_*).
# Found by difftest --seed 20261124 (graph 3308), minimized by difftest.
# input-seed=14810965746054394676
block g(x0: bf16[]) {
    v1 = x0 + x0
    v2 = x0 - 1.25
    v3 = v2 * v1
    v5 = log(abs(v3) + 0.5)
    return v5
}
