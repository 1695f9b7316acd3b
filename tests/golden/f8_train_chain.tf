#! --precision f8 --train
# Trained at --precision f8 (docs/precision.md, "f8"): the forward stores E4M3 and saves the E4M3
# copies the backward reads; the backward reads the forward's scales (read_only there) and stores
# each E4M3 value's gradient in E5M2 with a slot of its own (grad=J), whose scale it owns.
dim N = 3, C = 16
block chain(x: f32[N, C], param g: f32[C], param w: f32[C, 8]) {
    h = layernorm(x, g)
    u = gelu(h * 2.0, approx="tanh")
    return sum(exp(u @ w) * 0.5, axis=-1)
}
