# difftest found: the emulated fused unit's layernorm of 4 pow results within 2% of each other (the mean's cancellation multiplies their error by 90) was over its f32 bound; the emulation moves powf by the 4 ulp CUDA documents, which the 1-ulp noise of the conditioning measure did not cover
#   difftest --replay tests/difftest/found/illcond_emu_pow_layernorm.tf --emu-every 1 --input-seed 5391157510656754805
# Status: fixed in the tester: the noisy oracle (rt_interp_run_noisy) moves an f32 result of a
# function by as many ulp as the device's documented error (interp.c device_ulps: pow 4,
# exp/tanh/erf/sin/cos/rsqrt 2, ndtr 5), and the emulated unit's conditioning includes the
# composites' inner steps (difftest.c emu_sensitivity, inner_sens), so the mismatch is
# ill-conditioned (oracle change 1.15e-05 against an error of 2.43e-05); kept as a regression test
# (ctest difftest_found_illcond_emu_pow_layernorm).
# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 1569 of --seed 20261309 (--emu-every 1); minimized to 2 statements
# CUDA emulation mismatch: the fused unit, emulated, vs the reference: forward order: output 0: max error / max |ref| = 2.43e-05 over the tolerance 4.29e-06 (element 0: got -1.47072148, want -1.47070682); oracle change under rounding noise nan
# input-seed=5391157510656754805
block g(x9: f32[1, 4]) {
    v11 = pow(abs((x9 * 0.25)) + 0.5, (x9 * 0.0625))
    v15 = layernorm(v11, full([4], 1.5), axis=1)
    return v15
}
