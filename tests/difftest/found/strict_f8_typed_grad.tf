# difftest found: a gradient summed in f8e5m2 (the source's own f8 type): --strict-rounding rounded only 16-bit values where eager stores them, not 8-bit ones
#   difftest --replay tests/difftest/found/strict_f8_typed_grad.tf --input-seed 1153605250539991614
# Status: fixed: --strict-rounding rounds 8-bit values where eager stores them too
# (passes/lower.c rounds_stored); the file stays as a regression test
# (ctest difftest_found_strict_f8_typed_grad).
# Kept from difftest-2026112912-98.tf by tests/difftest/keep.sh (difftest --seed 2026112912, graph 98).
# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 98 of --seed 2026112912; 11 statements minimized to 2
# --strict-rounding not the eager program's bits (--strict): gradient of input x0 f16[3 elements]: 1 element(s) differ, the first [2]: 0xbd80 with --strict-rounding, 0xbe00 eager; scales 1 and 1
# input-seed=1153605250539991614
# mode=train (a training check: fusec --train, docs/difftest.md)
# precision=bf16 (add --precision to every command below; a replay reads it here)
# strict=1 (--strict: also --strict-rounding against eager, bit for bit; a replay reads it here)
# reproduce: difftest --replay FILE --input-seed 1153605250539991614
#  or: fusec run FILE --train --remat none --strict-rounding --random 1153605250539991614 --out-dir s; fusec run FILE --train --remat none --no-fuse --random 1153605250539991614 --out-dir e; cmp each s/NAME.npy e/NAME.npy
block g(param x0: f16[1, 3]) {
    v9 = cast(x0, f8e5m2)
    v10 = cast(v9, f32)
    return v10, v9
}
