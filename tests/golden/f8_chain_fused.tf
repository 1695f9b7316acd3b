#! --precision f8
# The chain of f8_chain_eager.tf fused (docs/precision.md, "f8"): h and h * 3.0 are f8 values no
# kernel stores, so the row kernel keeps them in f32 (x * s, no round_f8e4m3, amaxes still
# recorded); u, which the next kernel reads, is rounded by its store. f8_chain_strict rounds all.
dim B = 2, T = 3, C = 16
block chain(x: f32[B, T, C], param g: f32[C], param b: f32[C], r: f32[B, T, C]) -> f32[T, B, C] {
    h = layernorm(x, g, b)
    u = gelu(h * 3.0, approx="tanh")
    return reshape(transpose(u, [1, 0, 2]), [T, B, C]) + transpose(r, [1, 0, 2])
}
