# difftest found: the gradient of silu: its backward rule is one eager kernel (f32 inside), which --strict-rounding rounded after each of its six ops
#   difftest --replay tests/difftest/found/strict_silu_grad.tf
# Status: fixed: --strict-rounding rounds where the eager program stores (passes/lower.c
# eager_stored), no longer after every elementwise op; the file stays as a regression test
# (ctest difftest_found_strict_silu_grad).
# Kept by hand from difftest --seed 2026112911 --precision bf16 --strict --train-every 3, graph 5.
# difftest reproducer (tests/difftest, docs/difftest.md)
# graph 5 of --seed 2026112911
# --strict-rounding not the eager program's bits (--strict): the gradient of silu: its backward rule is one eager kernel (f32 inside), which --strict-rounding rounded after each of its six ops
# input-seed=14837597277476748330
# mode=train (a training check: fusec --train, docs/difftest.md)
# precision=bf16 (add --precision to every command below; a replay reads it here)
# strict=1 (--strict: also --strict-rounding against eager, bit for bit; a replay reads it here)
# reproduce: difftest --replay FILE --input-seed 14837597277476748330
block g(param x3: f32[1, 2, 2]) {
    v5 = silu(x3)
    return v5
}
