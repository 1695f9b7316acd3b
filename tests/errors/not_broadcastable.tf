block b(x: f32[2, 3], y: f32[4, 1, 2]) {
    return where(x > 0, x, y)
}
