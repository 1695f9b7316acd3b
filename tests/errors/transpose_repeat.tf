dim N = 4
block b(x: f32[N, N, N]) {
    return transpose(x, [0, 1, 1])
}
