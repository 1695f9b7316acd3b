dim N = 6
block b(x: f32[N]) {
    return reshape(x, [-1, 2, -1])
}
