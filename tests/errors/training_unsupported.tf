dim N = 4
block b(x: f32[N]) {
    return dropout(x, 0.1, seed=3)
}
