dim N = 4
block f(x: f32[N], y: f32[N]) { return x + y }
block b(x: f32[N], z: f32[2, N]) {
    p = f(x)
    q = f(x, z)
    r = f(x, x, w=x)
    return p, q, r
}
