# difftest found: silu of x = -100: e^x rounded to the f32 subnormal grid, then multiplied by x, was off by 45 units of that grid (-3.7835e-42 for -3.7204e-42)
#   fusec run tests/difftest/found/silu_subnormal_exp.tf --device cpu --check --random 12651603371059609360
# Status: fixed: below x = -87 silu takes the exponential at 87 + x and divides by e^87, so e^x
# never holds a subnormal before the last rounding (passes/lower.c emit_unary, docs/passes.md);
# the file stays as a regression test (ctest difftest_found_silu_subnormal_exp).
# Kept from r220.tf by tests/difftest/keep.sh (difftest --seed 2026112871, graph 220).
# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 220 of --seed 2026112871; 19 statements minimized to 5
# mismatch: fused CPU vs reference, output 0 'v19' f32[1, 1]: max_rel 5.36e-06 (tol 4.05e-06 = 4.05e-06 + 2 x rounding spread 0), max_abs 6.31e-44; worst element [0]: fused -3.78350585e-42, reference -3.72044742e-42; oracle change under rounding noise 0
# input-seed=12651603371059609360
# reproduce: fusec run FILE --device cpu --check --random 12651603371059609360
#        or: difftest --replay FILE --input-seed 12651603371059609360
block g(x3: f32[10, 7]) {
    v6 = causal_mask(x3, -100.0)
    v9, v10 = split(v6, [6, 1], axis=-1)
    v12 = slice(v10, 1, -1, -2, -2)
    v14, v15, v16, v17 = split(v12, [5, 1, 1, 3], -2)
    v19 = silu(v16)
    return v19
}
