dim N = 10
block b(x: f32[N]) {
    p, q, r = split(x, 2)
    s, t = x
    return p
}
