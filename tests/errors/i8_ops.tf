# i8 is a storage type: unary functions, reductions, norms and products do not take it
# (cast it first); each error is at the op
dim N = 4
block b(w: i8[N, N], x: f32[N, N], g: f32[N]) {
    a = exp(w)
    c = sum(w, axis=0)
    d = mean(w)
    e = layernorm(w, g, g)
    f = w @ x
    h = matmul(x, w)
    k = softmax(w)
    return a, c, d, e, f, h, k
}
