# difftest found: the square tanh's and erf's backward rules both compute, merged by pass_cse: the shared value crossed from one source op to the other and was rounded, where eager computes each in f32
#   difftest --replay tests/difftest/found/strict_cse_shared_square.tf --input-seed 9668074183157419611
# Status: fixed: pass_cse does not run with --strict-rounding (passes/pipeline.c); the file stays as a regression test
# (ctest difftest_found_strict_cse_shared_square).
# Kept from difftest-2026112913-59.tf by tests/difftest/keep.sh (difftest --seed 2026112913, graph 59).
# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 59 of --seed 2026112913; 19 statements minimized to 2
# --strict-rounding not the eager program's bits (--strict): gradient of input x4 bf16[1 elements]: 1 element(s) differ, the first [0]: 0xbdd5 with --strict-rounding, 0xbdd4 eager; scales 1 and 1
# input-seed=9668074183157419611
# mode=train (a training check: fusec --train, docs/difftest.md)
# precision=bf16 (add --precision to every command below; a replay reads it here)
# strict=1 (--strict: also --strict-rounding against eager, bit for bit; a replay reads it here)
# reproduce: difftest --replay FILE --input-seed 9668074183157419611
#  or: fusec run FILE --train --remat none --strict-rounding --random 9668074183157419611 --out-dir s; fusec run FILE --train --remat none --no-fuse --random 9668074183157419611 --out-dir e; cmp each s/NAME.npy e/NAME.npy
block g(x4: bf16[1]) {
    v5 = tanh(x4)
    v7 = erf(v5)
    return v7
}
