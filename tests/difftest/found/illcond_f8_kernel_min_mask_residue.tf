# difftest found: f8 --train, seed 2026112870 graph 171 (CUDA emulation on): the per-kernel check (fc_program_check_kernels, `fusec run --check`) failed backward kernel k4_layernorm on the gradient of a minimum's second input, g (1 - mask), max_rel_err 5.3e36: the fused kernel's g at the one element the mask keeps is 0.0625, a rounding residue (a layernorm backward term plus a cast of another path's gradient, each rounded to bf16, cancelling to one bf16 ulp), where the reference's is 0; every output and gradient passed
#   fusec run tests/difftest/found/illcond_f8_kernel_min_mask_residue.tf --device cpu --check --random 7678540042250034565 --train --precision f8
# Status: fixed in the check (runtime/api.c kc_sensitivity): the rounding noise that tells an
# ill-conditioned value from a wrong one also moved the forward's fp8_quants by a rounding of
# E4M3 (12.5 %), which flipped the minimum's choice between two quantized copies of one value in
# every noisy run, so the masked residue stayed 0 under noise (measure 0). Four more noisy runs
# now leave the quantizations alone (RT_NOISE_KEEP_QUANTS, runtime/interp.h): the residue then
# moves and the value counts as ill-conditioned. Kept as a regression test
# (ctest difftest_found_illcond_f8_kernel_min_mask_residue).
# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 171 of --seed 2026112870; 22 statements minimized to 10
# kernel over its bound (fc_program_check_kernels): fused backward kernel k4_layernorm (minimum,layernorm,add,cast): mul of minimum at 7:11: max_rel_err=5.32e+36 tol=0.5
# input-seed=7678540042250034565
# mode=train (a training check: fusec --train, docs/difftest.md)
# precision=f8 (add --precision to every command below; a replay reads it here)
# reproduce: difftest --replay FILE --input-seed 7678540042250034565
#  the program: fusec run FILE --device cpu --train --random 7678540042250034565
block g(param x0: f32[1, 1], x1: f32[1, 7]) {
    v2 = minimum(x0, x1)
    v4, v5, v6 = split(x1, [3, 1, 3])
    v9 = cast(v6, f8e5m2)
    v11, v12, v13 = split(v9, [1, 1, 1], -1)
    v18 = mean(v13, axis=[0], keepdim=false)
    v21 = minimum(v6, v18)
    v24 = cast(v21, f64)
    v25 = layernorm(v21, axis=-1, eps=0.01)
    v26 = v24 + v25
    v27 = broadcast(v26, [4, 3])
    return v27, v25, v2
}
