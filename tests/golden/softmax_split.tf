# softmax fused into one row kernel; split and concat as index maps; a bf16 cast
dim R = 3, N = 10

block f(x: f32[R, N], y: bf16[R, 5]) {
    a, b = split(x, 2)
    s = softmax(concat([b, a], axis=-1) * 2.0)
    return s, cast(y, f32) + a
}
