# difftest found: the tanh GELU loses precision for negative x: 0.5 x (1 + tanh(u)) cancels.
#   fusec run gelu_tanh_negative.tf --device cpu --check
#   observed: fused and eager -0.00363743305 against the reference -0.00363739207
#             (rel 1.1e-5, tolerance 4.05e-6); the exact GELU's 0.5 x (1 + erf) likewise below
#             x = -4, and -0 below about -5.9
#   expected: within tolerance; gelu now expands to x sigmoid(2u) and x ndtr(x) (passes/decompose.c)
# Status: fixed by the cancellation-free GELU; kept as a regression test (ctest difftest_found_*).
# Found by difftest --seed 20261124 (graph 3479), its minimized reproducer.
block g() {
    v8 = full([1], -3, dtype=i32)
    v9 = gelu(v8, approx="tanh")
    return v9
}
