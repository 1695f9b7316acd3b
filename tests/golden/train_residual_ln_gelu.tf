#! --train -D N=3 -D C=8
# the backward of examples/residual_ln_gelu.tf (the forward and backward graphs, and their kernels)
# residual_ln_gelu.tf: a residual add feeding layernorm, a bias and exact GELU, with both
# the sum and the activation returned: r = x + y and gelu(layernorm(r) + bias).
# Eager execution makes four passes over [N, C] (add, layernorm, add, gelu); fused, it is
# one kernel that reads x and y once and writes r and the result once: a multi-output
# fusion through a row reduction. The default size, [8192, 1024] f32 (32 MiB per tensor),
# is far larger than any cache, for the fusion benchmark; use -D N=.. -D C=.. for quick runs.
dim N = 8192, C = 1024

block residual_ln_gelu(x: f32[N, C], y: f32[N, C],
                       param g: f32[C], param b: f32[C], param bias: f32[C]) -> f32[N, C], f32[N, C]
{
    r = x + y
    return r, gelu(layernorm(r, g, b, eps=1e-5) + bias)
}
