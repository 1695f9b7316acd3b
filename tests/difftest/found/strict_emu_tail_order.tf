# difftest found: emulated CUDA: cross_entropy's mean of the row losses ran in the fused row kernel's tail (32 threads) under --strict-rounding, where eager's kernel of its own has 96: another order of summation, other f32 bits
#   difftest --replay tests/difftest/found/strict_emu_tail_order.tf --emu-every 1 --input-seed 16508495750184188563
# Status: fixed: under --strict-rounding a kernel with a reduction holds one source op's
# nodes only, as eager's (passes/fuse.c strict_split); the file stays as a regression test
# (ctest difftest_found_strict_emu_tail_order).
# Kept from difftest-2026112919-340-emu.tf by tests/difftest/keep.sh (difftest --seed 2026112919, graph 340).
# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 340 of --seed 2026112919; 3 statements minimized to 1
# CUDA emulation mismatch: the fused --strict-rounding unit, emulated, vs the reference: forward order: output 0: not the eager unit's bits, first at element 0 (2.52522802, eager 2.52522826); oracle change under rounding noise 0
# input-seed=16508495750184188563
# precision=f8 (add --precision to every command below; a replay reads it here)
# strict=1 (--strict: also --strict-rounding against eager, bit for bit; a replay reads it here)
# reproduce: difftest --replay FILE --emu-every 1 --input-seed 16508495750184188563
#  the unit: fusec FILE --emit cuda --strict-rounding, whose outputs must be the eager unit's (--no-fuse) bits (docs/cuda_emu.md)
block g(x0: f32[1, 1, 1], x1: f32[5, 13, 12], x2: f32[1, 1, 1]) {
    v6 = cross_entropy((x1 * 0.25), iota([5, 13], 0, dtype=i64))
    return v6
}
