dim N = 4, C = 5
block b(x: f32[N, C], y: i32[N], z: f32[N], i: i32[N, C]) {
    a = cross_entropy(x, z)
    c = cross_entropy(i, y)
    d = cross_entropy(x, i)
    e = cross_entropy(x, 2)
    f = cross_entropy(x, y) + q
    return a
}
