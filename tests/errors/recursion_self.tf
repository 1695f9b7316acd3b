dim N = 4
block b(x: f32[N]) -> f32[N] {
    return b(x)
}
block top(x: f32[N]) {
    return b(x)
}
