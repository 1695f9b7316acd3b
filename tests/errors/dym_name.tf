dim N = 4
block b(x: f32[N]) {
    hidden = exp(x)
    return hiden
}
