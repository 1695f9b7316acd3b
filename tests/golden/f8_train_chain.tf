#! --precision f8 --train
# Trained at --precision f8 (docs/precision.md, "f8"): the forward stores its intermediates in
# E4M3 and saves the E4M3 copies the backward reads (the backward's gradients are bf16); the
# backward reads the forward's scales (its slots are read_only: no amax, no update there).
dim N = 3, C = 16
block chain(x: f32[N, C], param g: f32[C], param w: f32[C, 8]) {
    h = layernorm(x, g)
    u = gelu(h * 2.0, approx="tanh")
    return sum(exp(u @ w) * 0.5, axis=-1)
}
