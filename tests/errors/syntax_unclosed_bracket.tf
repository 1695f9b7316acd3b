dim N = 4
block b(x: f32[N]) {
    y = reshape(x, [2, 2
}
