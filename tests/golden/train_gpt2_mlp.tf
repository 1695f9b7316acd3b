#! --train -D B=1 -D T=2 -D C=8
# the backward of examples/gpt2_mlp.tf (the forward and backward graphs, and their kernels)
# gpt2_mlp.tf: the GPT-2 MLP sub-block with its pre-norm and residual (the language
# reference's first example). layernorm -> matmul + bias -> tanh GELU -> matmul + bias ->
# residual add. The matrix products run through the BLAS library, each as its own call, so
# the memory-bound ops around them fuse into three kernels of their own: the norm, then bias
# + GELU after the first product, then bias + residual after the second (five launches;
# pinned by tests/doc/reports/gpt2_mlp.report). The dims are small so a CPU run takes a
# moment; GPT-2 small is
# -D B=4 -D T=1024 -D C=768.
dim B = 2, T = 64, C = 128

block mlp(x: f32[B, T, C],
          param g: f32[C], param b: f32[C],
          param w_fc: f32[C, 4*C], param b_fc: f32[4*C],
          param w_proj: f32[4*C, C], param b_proj: f32[C]) -> f32[B, T, C]
{
    h = layernorm(x, g, b, eps=1e-5)
    u = gelu(h @ w_fc + b_fc, approx="tanh")
    return x + u @ w_proj + b_proj
}
