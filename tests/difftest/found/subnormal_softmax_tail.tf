# difftest found: a softmax's all-subnormal outputs and gradients (e^-100 in f32) were held to a relative accuracy they cannot have: one subnormal unit apart failed the CPU gradient check and the emulation; the metric now divides by the dtype's smallest normal at least
#   difftest --replay tests/difftest/found/subnormal_softmax_tail.tf --emu-every 1 --input-seed 16381260141751153351
# Status: open. When fixed, say by what here; the file stays as a regression test
# (ctest difftest_found_subnormal_softmax_tail).
# Kept from difftest-2026112921-785-emu.tf by tests/difftest/keep.sh (difftest --seed 2026112921, graph 785).
# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 785 of --seed 2026112921; 10 statements minimized to 3
# CUDA emulation mismatch: the fused training unit, emulated, vs the reference: forward order: output 0: max error / max |ref| = 0.08 over the tolerance 4.29e-06 (element 0: got 3.78350585e-44, want 3.50324616e-44); oracle change under rounding noise 0
# input-seed=16381260141751153351
# mode=train (a training check: fusec --train, docs/difftest.md)
# reproduce: difftest --replay FILE --emu-every 1 --input-seed 16381260141751153351
#  the unit: fusec FILE --train --emit cuda, run as its forward then its backward (tests/cuda_emu/emu_runner.c emu_add_train_block)
block g(x3: f32[2, 1]) {
    v10 = causal_mask(x3, -100.0)
    v11 = softmax(v10, axis=-2)
    v12 = min(v11, axis=0, keepdim=false)
    return v12
}
