# quant_mlp.tf: the GPT-2 MLP of gpt2_mlp.tf with weight-only int8 quantization. Each weight
# matrix is stored as i8 (one byte an element) with one f32 scale per output channel; the
# block dequantizes it where it is used, cast(w, f32) * s (exact: an i8 times an f32 scale is
# one f32 product), so the products run in f32. The AOT unit's cuBLASLt products take the f32
# weight, written by a kernel of its own before the call; the CPU's BLAS takes it a panel at a
# time, made in the cache; on a CUDA device's own programs the conversion lands in the product's
# tile loads (docs/precision.md, "Weight-only quantization"). The i8 weights get no gradient.
# GPT-2 small is -D B=4 -D T=1024 -D C=768.
dim B = 2, T = 64, C = 128

block mlp(x: f32[B, T, C],
          param g: f32[C], param b: f32[C],
          param w_fc: i8[C, 4*C], param s_fc: f32[4*C], param b_fc: f32[4*C],
          param w_proj: i8[4*C, C], param s_proj: f32[C], param b_proj: f32[C]) -> f32[B, T, C]
{
    h = layernorm(x, g, b, eps=1e-5)
    u = gelu(h @ (cast(w_fc, f32) * s_fc) + b_fc, approx="tanh")
    return x + u @ (cast(w_proj, f32) * s_proj) + b_proj
}
