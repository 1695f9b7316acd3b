dim N = 4
block b(x: f32[2, 3], y: f32[4, 5], v: f32[4]) {
    p = x @ y
    q = x @ v
    return p, q
}
