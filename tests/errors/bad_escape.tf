block f(x: f32[4]) {
    return gelu(x, approx="ta\nh")
}
