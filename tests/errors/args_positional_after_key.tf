dim N = 4
block b(x: f32[N]) {
    return softmax(axis=0, x)
}
