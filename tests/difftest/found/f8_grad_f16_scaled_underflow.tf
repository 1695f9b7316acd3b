# difftest found: the gradient of an f16 value stored in f8 with scale 2^19 was 0 (q's adjoint kept as g / s in f16 underflowed); and the --mem-budget sweep ran its f8 programs at scale 1
#   difftest --replay tests/difftest/found/f8_grad_f16_scaled_underflow.tf --input-seed 11319933831068813249
# Status: fixed in passes/autodiff.c (q's adjoint is kept as that of the value q encodes, q / s,
# so fp8_quant and fp8_dequant pass it on unscaled) and tests/difftest/difftest.c (the sweep
# calibrates its blocks' f8 scales as run_one does). The file stays as a regression test
# (ctest difftest_found_f8_grad_f16_scaled_underflow).
# Kept from difftest-20261426-142.tf by tests/difftest/keep.sh (difftest --seed 20261426, graph 142).
# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 142 of --seed 20261426; 21 statements minimized to 1
# mismatch: gradients: fused CPU vs reference backward, gradient of input 1 'grad_x1' f16[1]: max_rel 1 (tol 0.5 = 0.5 + 2 x rounding spread 0), max_abs 0.000488; worst element [0]: fused 0, reference -0.00048828125; oracle change under rounding noise 0
# input-seed=11319933831068813249
# mode=train (a training check: fusec --train, docs/difftest.md)
# precision=f8 (add --precision to every command below; a replay reads it here)
# reproduce: difftest --replay FILE --input-seed 11319933831068813249
#  the program: fusec run FILE --device cpu --train --random 11319933831068813249
#  with: fusec run FILE --device reference --train --random 11319933831068813249
block g(x0: f32[1], param x1: f16[1]) {
    v2 = x1 @ x1
    return v2
}
