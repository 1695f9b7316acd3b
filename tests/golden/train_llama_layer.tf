#! --train -D B=1 -D T=4 -D C=8 -D H=2 -D F=12
# the backward of examples/llama_layer.tf (the forward and backward graphs, and their kernels)
# llama_layer.tf: a LLaMA-style decoder layer.
#   x = x + attention(rope(q), rope(k), v, causal) @ wo      (RMSNorm before the projections)
#   x = x + (silu(h @ w1) * (h @ w3)) @ w2                    (SwiGLU MLP, RMSNorm before it)
# Rotary embeddings are written with split/concat ("rotate half"): the tables `cos` and `sin`
# are inputs of shape [T, D] (D = C/H, the head dim), each frequency repeated in both halves,
# as Hugging Face's LLaMA builds them. Note that a parameter may be called `cos`: a name is
# only a call when `(` follows it.
# Small dims for a quick CPU run; LLaMA-7B is -D C=4096 -D H=32 -D F=11008 (and T, B to taste).
dim B = 2, T = 64, C = 256, H = 4, F = 688

# [B, T, C] -> [B, H, T, C/H]
block heads(x: f32[B, T, C]) -> f32[B, H, T, C/H]
{
    return transpose(reshape(x, [B, T, H, C/H]), [0, 2, 1, 3])
}

# Rotary position embedding: rotates each pair (x[i], x[i + D/2]) by the angle of its row.
block rope(x: f32[B, H, T, C/H], cos: f32[T, C/H], sin: f32[T, C/H]) -> f32[B, H, T, C/H]
{
    x1, x2 = split(x, 2, axis=-1)
    rotated = concat([-x2, x1], axis=-1)
    return x * cos + rotated * sin
}

block llama_layer(x: f32[B, T, C], cos: f32[T, C/H], sin: f32[T, C/H],
                  param g_attn: f32[C],
                  param wq: f32[C, C], param wk: f32[C, C], param wv: f32[C, C],
                  param wo: f32[C, C],
                  param g_mlp: f32[C],
                  param w1: f32[C, F], param w3: f32[C, F], param w2: f32[F, C]) -> f32[B, T, C]
{
    h = rmsnorm(x, g_attn, eps=1e-6)
    q = rope(heads(h @ wq), cos, sin)
    k = rope(heads(h @ wk), cos, sin)
    v = heads(h @ wv)
    o = attention(q, k, v, causal=true)
    o = reshape(transpose(o, [0, 2, 1, 3]), [B, T, C])
    x = x + o @ wo
    h = rmsnorm(x, g_mlp, eps=1e-6)
    return x + (silu(h @ w1) * (h @ w3)) @ w2
}
