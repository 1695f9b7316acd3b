dim N = 4
block b(x: f32[N]) {
    return x
    y = x
    return y
}
block c(x: f32[N]) {
    y = x
}
block top(x: f32[N]) {
    y = b(x)
    return c(y)
}
