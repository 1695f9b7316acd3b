dim N = 4
block b(x: f32[N]) {
    y = reshape(x)
    z = softmax(axis=0)
    return y, z
}
