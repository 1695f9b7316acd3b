# difftest found: an fp8_quant between two fused kernels that eager computes in one: its temporary was made f32 (as for a 16-bit value eager keeps in f32), and its store, which is its rounding, then stored x * s unrounded
#   difftest --replay tests/difftest/found/strict_f8_quant_temp.tf --input-seed 7466261552868430855
# Status: fixed: an fp8_quant keeps its own type in a temporary (passes/lower.c, the
# buffers); the file stays as a regression test
# (ctest difftest_found_strict_f8_quant_temp).
# Kept from difftest-2026112914-104.tf by tests/difftest/keep.sh (difftest --seed 2026112914, graph 104).
# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 104 of --seed 2026112914; 12 statements minimized to 2
# --strict-rounding not the eager program's bits (--strict): gradient of input x3 bf16[1 elements]: 1 element(s) differ, the first [0]: 0x3f29 with --strict-rounding, 0x3f80 eager; scales 1 and 1
# input-seed=7466261552868430855
# mode=train (a training check: fusec --train, docs/difftest.md)
# precision=f8 (add --precision to every command below; a replay reads it here)
# strict=1 (--strict: also --strict-rounding against eager, bit for bit; a replay reads it here)
# reproduce: difftest --replay FILE --input-seed 7466261552868430855
#  or: fusec run FILE --train --remat none --strict-rounding --random 7466261552868430855 --out-dir s; fusec run FILE --train --remat none --no-fuse --random 7466261552868430855 --out-dir e; cmp each s/NAME.npy e/NAME.npy
block g(x3: f32[], x4: bf16[4, 1]) {
    v6 = x4 + x3
    v7 = gather(v6, iota([4, 5, 2], 0))
    return v7
}
