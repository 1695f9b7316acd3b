# difftest found: an f8 value the eager kernel computes and reads itself (never stored) stays x there, unrounded (fp8_wide); --strict-rounding rounded it to E4M3
#   difftest --replay tests/difftest/found/strict_f8_wide_quant.tf --input-seed 13407711351359467267
# Status: fixed: under --strict-rounding an fp8_quant is wide where eager keeps it
# (passes/lower.c fp8_wide); the file stays as a regression test
# (ctest difftest_found_strict_f8_wide_quant).
# Kept from difftest-2026112916-172.tf by tests/difftest/keep.sh (difftest --seed 2026112916, graph 172).
# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 172 of --seed 2026112916; 22 statements minimized to 2
# --strict-rounding not the eager program's bits (--strict): output v11 f8e4m3[1 elements]: 1 element(s) differ, the first [0]: 0x78 with --strict-rounding, 0x77 eager; scales 512 and 512
# input-seed=13407711351359467267
# precision=f8 (add --precision to every command below; a replay reads it here)
# strict=1 (--strict: also --strict-rounding against eager, bit for bit; a replay reads it here)
# reproduce: difftest --replay FILE --input-seed 13407711351359467267
#  or: fusec run FILE --strict-rounding --random 13407711351359467267 --out-dir s; fusec run FILE --no-fuse --random 13407711351359467267 --out-dir e; cmp each s/NAME.npy e/NAME.npy
block g(x3: f32[1, 1, 1], x9: f16[1, 1, 1]) {
    v10 = softmax(x9, 2)
    v11 = sub(x9, x3)
    return v11
}
