block f(x: f32[4]) {
    return slice(x, 0, 3, 1)
}
