dim N = 4
block b(x: f32[N]) {
    y = x + z
    w = y * z
    return w + q
}
