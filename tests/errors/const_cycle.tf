const a = b + 1
const b = a * 2
block f(x: f32[4]) {
    return x * a
}
