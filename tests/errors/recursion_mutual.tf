dim N = 4
block a(x: f32[N]) {
    return c(x) + 1
}
block c(x: f32[N]) {
    return a(x)
}
block top(x: f32[N]) {
    return a(x)
}
