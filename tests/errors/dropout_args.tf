dim N = 4
block b(x: f32[N], i: i32[N]) {
    a = dropout(x, 1, seed=3)
    b = dropout(x, -0.25, seed=3)
    c = dropout(x, 0.5)
    d = dropout(x, 0.5, seed=1.5)
    e = dropout(x, 0.5, seed=x)
    f = dropout(i, 0.5, seed=1)
    g = dropout_mask([N], 1.0, seed=2)
    h = dropout(x, x, seed=2)
    return a
}
