# no i8 constants: cast a tensor to i8
dim N = 4
block b(x: f32[N]) {
    a = cast(3, i8)
    c = full([N], 1, dtype=i8)
    k = iota([N], 0, dtype=i8)
    return a, c, k, cast(x, i8)
}
