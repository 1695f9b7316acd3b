dim N = 4
block b(x: f32[N]) {
    y = exp(x
    z = y * 2
    return z +
}
