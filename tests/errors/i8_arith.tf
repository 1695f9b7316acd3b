# i8 is a storage type: arithmetic and comparisons on it are errors at the operator, before
# any implicit cast (an integer literal never becomes i8)
dim N = 4
block b(w: i8[N], x: f32[N]) {
    a = w + x
    c = w * 2
    d = -w
    e = w < x
    f = maximum(w, x)
    return a, c, d, e, f
}
