dim N = 4
block b(x: f32[N]) {
    y = x + * 2
    z = x )
    return y
}
