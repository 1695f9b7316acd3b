dim N = 6
block b(x: f32[N]) {
    return reshape(x, [4, 2])
}
