dim N = 4
block b(x: f32[N]) {
    y = x ÿ 2
    return y # cafÃ© Ã(
}
