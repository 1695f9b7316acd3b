dim N = 4
block b(x: f32[N]) {
    m = x < 1 < 2
    return x
}
