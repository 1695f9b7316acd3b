block f(x: bool[4], i: i32[4]) {
    a = x + x
    b = i + 3000000000
    c = exp(x)
    return a, b, c
}
