# difftest found: pow's backward rule, one eager kernel, split by fusion between two kernels: the value between them was stored in bf16, so rounded, where eager keeps it in f32
#   difftest --replay tests/difftest/found/strict_split_rule_temp.tf
# Status: fixed: --strict-rounding rounds where the eager program stores (passes/lower.c
# eager_stored), no longer after every elementwise op; the file stays as a regression test
# (ctest difftest_found_strict_split_rule_temp).
# Kept by hand from difftest --seed 2026112911 --precision bf16 --strict --train-every 3, graph 20.
# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 20 of --seed 2026112911
# --strict-rounding not the eager program's bits (--strict): pow's backward rule, one eager kernel, split by fusion between two kernels: the value between them was stored in bf16, so rounded, where eager keeps it in f32
# input-seed=3700229923989505657
# mode=train (a training check: fusec --train, docs/difftest.md)
# precision=bf16 (add --precision to every command below; a replay reads it here)
# strict=1 (--strict: also --strict-rounding against eager, bit for bit; a replay reads it here)
# reproduce: difftest --replay FILE --input-seed 3700229923989505657
block g(param x0: bf16[1, 1, 1], param x1: f32[1, 5, 5]) {
    v2 = x0 + x1
    v3 = sigmoid(v2)
    v4 = v2 @ v2
    v5 = pow(abs((v4 * 0.015625)) + 0.5, v3)
    return v5
}
