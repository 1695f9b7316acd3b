# difftest found: the emulated training unit's gradient was compared with the CPU's fused program (two approximations, one tolerance): layernorm over 2 elements, its gradient a cancellation; now with the reference backward
#   difftest --replay tests/difftest/found/illcond_emu_train_layernorm_pair.tf --emu-every 1 --input-seed 13575167335233261214
# Status: fixed in the tester: an emulated training unit is compared with the reference
# backward (the interpreter's, f64) within the --check tolerances, and a mismatch in a gradient
# gets its conditioning measured as the CPU check's (tests/cuda_emu/emu_runner.c
# emu_add_train_block, difftest.c emu_grad_sensitivity); kept as a regression test
# (ctest difftest_found_illcond_emu_train_layernorm_pair).
# Kept from difftest-20261125-1949-emu.tf by tests/difftest/keep.sh (difftest --seed 20261125, graph 1949).
# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 1949 of --seed 20261125; 8 statements minimized to 1
# CUDA emulation mismatch: the fused training unit, emulated, vs the reference: forward order: output 3: max error / max |ref| = 0.000495 over the tolerance 4.4e-06 (element 0: got 0.00192737579, want 0.00192832947); oracle change under rounding noise 0 (none measured for a training unit)
# input-seed=13575167335233261214
# mode=train (a training check: fusec --train, docs/difftest.md)
# reproduce: difftest --replay FILE --emu-every 1 --input-seed 13575167335233261214
#  the unit: fusec FILE --train --emit cuda, run as its forward then its backward (tests/cuda_emu/emu_runner.c emu_add_train_block)
block g(x0: f32[1], x2: f32[1], x9: f32[2]) {
    v8 = layernorm(x9)
    return v8
}
