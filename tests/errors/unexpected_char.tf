block f(x: f32[4]) {
    y = x $ 2
    return y ? x
}
