dim N = 4
block b(x: f32[N]) {
    return softmax(x, -1, axis=0)
}
