block f(x: f32[1, 1, 1, 1, 1, 1, 1, 1, 1]) {
    return x
}
