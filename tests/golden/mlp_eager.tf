#! -D B=2 -D T=3 -D C=8 --no-fuse
# the same MLP, eager: one kernel per source op (7 launches)
dim B = 4, T = 256, C = 768

block mlp(x: f32[B, T, C],
          param g: f32[C], param b: f32[C],
          param w_fc: f32[C, 4*C], param b_fc: f32[4*C],
          param w_proj: f32[4*C, C], param b_proj: f32[C]) -> f32[B, T, C]
{
    h = layernorm(x, g, b, eps=1e-5)
    u = gelu(h @ w_fc + b_fc, approx="tanh")
    return x + u @ w_proj + b_proj
}
