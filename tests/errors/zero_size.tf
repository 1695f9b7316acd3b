dim N = 0
block b(x: f32[N]) {
    return x
}
