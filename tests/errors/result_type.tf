dim N = 4
block b(x: f32[N]) -> f32[N], bf16[N] {
    return x
}
block c(x: f32[N]) -> f32[2] {
    return x * 2
}
block top(x: f32[N]) -> f32[N], f32[N] {
    return b(x), c(x), x
}
