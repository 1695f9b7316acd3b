dim N = 4
block b(x: f32[N - 4, 2]) {
    return x
}
