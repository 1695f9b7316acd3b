const a = log(-1)
const z = 1 / 0
block f(x: f32[4]) {
    return x * a + z
}
