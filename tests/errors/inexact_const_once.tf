# An inexact division in a const used as three sizes: one error, at the '/', and a note at the first use
dim C = 256
const F = 4 * C * 2 / 3
block b(x: f32[C], w1: f32[C, F], w2: f32[F, C]) {
    h = reshape(x @ w1, [F])
    return h
}
