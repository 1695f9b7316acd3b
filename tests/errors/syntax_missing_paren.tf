dim N = 4
block b(x: f32[N]) {
    y = exp(x
    return y
}
