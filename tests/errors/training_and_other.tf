dim N = 4
block b(x: f32[N], y: i32[2]) {
    a = cross_entropy(x, y)
    return a + q
}
