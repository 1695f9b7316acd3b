#! --precision f8 --strict-rounding
# f8_chain_fused.tf with --strict-rounding: every f8 value rounded to E4M3 where it is computed
# (round_f8e4m3), and the layernorm (its reductions) in a kernel of its own as eager's, so the
# bits are the eager program's; the mul and the gelu after it still fuse.
dim B = 2, T = 3, C = 16
block chain(x: f32[B, T, C], param g: f32[C], param b: f32[C], r: f32[B, T, C]) -> f32[T, B, C] {
    h = layernorm(x, g, b)
    u = gelu(h * 3.0, approx="tanh")
    return reshape(transpose(u, [1, 0, 2]), [T, B, C]) + transpose(r, [1, 0, 2])
}
