#! --precision f8 --no-fuse
# A memory-bound chain at --precision f8, eager: one kernel per source op, each value crossing
# between kernels as E4M3 (1 byte) with its slot's scale; the dequant of a value is in its
# reader's kernel, the quant and the amax in its producer's.
dim B = 2, T = 3, C = 16
block chain(x: f32[B, T, C], param g: f32[C], param b: f32[C], r: f32[B, T, C]) -> f32[T, B, C] {
    h = layernorm(x, g, b)
    u = gelu(h * 3.0, approx="tanh")
    return reshape(transpose(u, [1, 0, 2]), [T, B, C]) + transpose(r, [1, 0, 2])
}
