# difftest found: the gradient of a broadcast product: the eager program splits its rule in two kernels (an elementwise product, a column sum) and stores the product in bf16; --strict-rounding had kept it f32
#   difftest --replay tests/difftest/found/strict_eager_split_col_reduce.tf --input-seed 1716058701261540443
# Status: fixed: the values --strict-rounding rounds are those crossing between eager's kernels
# (fuse.c's groups without fusion), not between source ops (passes/lower.c eager_stored); the file stays as a regression test
# (ctest difftest_found_strict_eager_split_col_reduce).
# Kept from difftest-2026112912-71.tf by tests/difftest/keep.sh (difftest --seed 2026112912, graph 71).
# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 71 of --seed 2026112912; 25 statements minimized to 1
# --strict-rounding not the eager program's bits (--strict): gradient of input x13 bf16[3 elements]: 1 element(s) differ, the first [1]: 0xc0a6 with --strict-rounding, 0xc0a7 eager; scales 1 and 1
# input-seed=1716058701261540443
# mode=train (a training check: fusec --train, docs/difftest.md)
# precision=bf16 (add --precision to every command below; a replay reads it here)
# strict=1 (--strict: also --strict-rounding against eager, bit for bit; a replay reads it here)
# reproduce: difftest --replay FILE --input-seed 1716058701261540443
#  or: fusec run FILE --train --remat none --strict-rounding --random 1716058701261540443 --out-dir s; fusec run FILE --train --remat none --no-fuse --random 1716058701261540443 --out-dir e; cmp each s/NAME.npy e/NAME.npy
block g(x13: f32[1, 3], x3: i32[3, 1]) {
    v16 = x13 * x3
    return v16
}
