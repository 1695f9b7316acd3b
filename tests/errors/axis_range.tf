dim N = 6
block b(x: f32[2, N]) {
    s = sum(x, axis=2)
    t = softmax(x, axis=-3)
    return s, t
}
