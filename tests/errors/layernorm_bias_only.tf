dim N = 4
block f(x: f32[N], b: f32[N], g: f32[3]) {
    y = layernorm(x, b=b)
    z = layernorm(x, g)
    return y, z
}
