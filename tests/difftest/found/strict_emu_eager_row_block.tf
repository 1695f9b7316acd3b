# difftest found: on the GPU, a row reduction's thread count (so its order) came from its kernel's narrowest operand: eager's backward of sub also wrote a bf16 gradient (32 threads), the fused kernel summing the same f64 gradient had only f64 operands (128 threads)
#   difftest --replay tests/difftest/found/strict_emu_eager_row_block.tf --emu-every 1 --input-seed 12152267922404657878
# Status: fixed: with --strict-rounding each row reduction takes the eager program's thread count
# (passes/lower.c lowers the eager program too and gives a reduction of fewer threads than its
# fused kernel KirStmt.lanes); the file stays as a regression test
# (ctest difftest_found_strict_emu_eager_row_block).
# Kept from difftest-2026112845-464-emu.tf by tests/difftest/keep.sh (difftest --seed 2026112845, graph 464).
# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 464 of --seed 2026112845; 23 statements minimized to 2
# CUDA emulation mismatch: the fused --strict-rounding training unit, emulated, vs the reference: forward order: output 1: not the eager unit's bits, first at element 0 (-0.773550155, eager -0.773550155); oracle change under rounding noise 0
# input-seed=12152267922404657878
# mode=train (a training check: fusec --train, docs/difftest.md)
# precision=bf16 (add --precision to every command below; a replay reads it here)
# strict=1 (--strict: also --strict-rounding against eager, bit for bit; a replay reads it here)
# reproduce: difftest --replay FILE --emu-every 1 --input-seed 12152267922404657878
#  the unit: fusec FILE --train --emit cuda, run as its forward then its backward (tests/cuda_emu/emu_runner.c emu_add_train_block)
block g(x2: f64[], x6: bf16[12, 10]) {
    v13 = causal_mask(x6, -100.0)
    v15 = sub(v13, x2)
    return v15
}
