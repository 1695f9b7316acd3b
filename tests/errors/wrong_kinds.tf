dim N = 4
block f(x: f32[N]) {
    a = sum(x, axis=1.5)
    b = reshape(x, x)
    c = cast(x, 3)
    d = softmax(x, keepdim=1)
    e = x + "s"
    f = exp(f32)
    return a
}
