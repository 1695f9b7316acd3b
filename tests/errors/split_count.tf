dim N = 10
block b(x: f32[N]) {
    p, q, r = split(x, 3)
    s, t = split(x, [4, 6, 0])
    u = split(x, 2)
    return p
}
