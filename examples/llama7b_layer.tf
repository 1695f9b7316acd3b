# llama7b_layer.tf: one decoder layer of LLaMA-7B in bf16 (Touvron et al. 2023: 32 layers,
# hidden 4096, 32 heads, SwiGLU MLP of 11008), for `fusec mem` (docs/training.md):
#   x = x + attention(rope(h @ wq), rope(h @ wk), h @ wv, causal) @ wo,   h = rmsnorm(x)
#   x = x + (silu(h @ w1) * (h @ w3)) @ w2,                               h = rmsnorm(x)
# No biases. Rotary embeddings are written with split/concat (rotate-half, as Hugging Face's
# LLaMA), their cos/sin tables computed in the block from positions (iota), in f32 and then
# cast to bf16, so they are constants: no inputs, no gradients, free to recompute.
# One layer has 4*C^2 + 3*C*F + 2*C parameters: 202,383,360 at these dims.
# -D shrinks it (-D T=64 -D C=256 -D H=4 -D F=688 for a CPU run).
dim B = 1, T = 2048, C = 4096, H = 32, F = 11008
const THETA = 10000.0

# [B, T, C] -> [B, H, T, C/H]
block heads(x: bf16[B, T, C]) -> bf16[B, H, T, C/H]
{
    return transpose(reshape(x, [B, T, H, C/H]), [0, 2, 1, 3])
}

# Rotates each pair (x[i], x[i + D/2]) of a head by the angle of its row.
block rope(x: bf16[B, H, T, C/H], cos_t: bf16[T, C/H], sin_t: bf16[T, C/H]) -> bf16[B, H, T, C/H]
{
    x1, x2 = split(x, 2, axis=-1)
    return x * cos_t + concat([-x2, x1], axis=-1) * sin_t
}

block llama7b_layer(x: bf16[B, T, C],
                    param g_attn: bf16[C],
                    param wq: bf16[C, C], param wk: bf16[C, C], param wv: bf16[C, C],
                    param wo: bf16[C, C],
                    param g_mlp: bf16[C],
                    param w1: bf16[C, F], param w3: bf16[C, F], param w2: bf16[F, C]) -> bf16[B, T, C]
{
    # angle of position t at frequency j: t * THETA^(-2j/D), D = C/H; both halves alike
    j = iota([T, C/H/2], axis=1, dtype=f32)
    angle = iota([T, C/H/2], axis=0, dtype=f32) * exp(j * (-2 * log(THETA) / (C/H)))
    angle = concat([angle, angle], axis=-1)
    cos_t = cast(cos(angle), bf16)
    sin_t = cast(sin(angle), bf16)

    h = rmsnorm(x, g_attn, eps=1e-6)
    q = rope(heads(h @ wq), cos_t, sin_t)
    k = rope(heads(h @ wk), cos_t, sin_t)
    v = heads(h @ wv)
    o = attention(q, k, v, causal=true)
    x = x + reshape(transpose(o, [0, 2, 1, 3]), [B, T, C]) @ wo
    h = rmsnorm(x, g_mlp, eps=1e-6)
    return x + (silu(h @ w1) * (h @ w3)) @ w2
}
