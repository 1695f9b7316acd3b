# A LLaMA-style decoder layer: RMSNorm, rotary embeddings, causal attention, SwiGLU.
dim B = 2, T = 16, C = 64, H = 4, F = 172
const D = C / H
const eps = 1e-6

block rope(x: bf16[B, H, T, D], cos_t: f32[T, D/2], sin_t: f32[T, D/2]) -> bf16[B, H, T, D] {
    x1, x2 = split(x, 2)            # halves of the head dim
    c = cast(cos_t, bf16); s = cast(sin_t, bf16)
    return concat([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)
}

block heads(t: bf16[B, T, C]) -> bf16[B, H, T, D] {
    return transpose(reshape(t, [B, T, H, D]), [0, 2, 1, 3])
}

block layer(x: bf16[B, T, C], cos_t: f32[T, D/2], sin_t: f32[T, D/2],
            param g_attn: bf16[C], param wq: bf16[C, C], param wk: bf16[C, C],
            param wv: bf16[C, C], param wo: bf16[C, C],
            param g_mlp: bf16[C], param w_gate: bf16[C, F], param w_up: bf16[C, F],
            param w_down: bf16[F, C]) -> bf16[B, T, C]
{
    h = rmsnorm(x, g_attn, eps=eps)
    q = rope(heads(h @ wq), cos_t, sin_t)
    k = rope(heads(h @ wk), cos_t, sin_t)
    v = heads(h @ wv)
    o = attention(q, k, v, causal=true)
    o = reshape(transpose(o, [0, 2, 1, 3]), [B, T, C])
    x = x + o @ wo
    h = rmsnorm(x, g_mlp, axis=[-1])
    m = silu(h @ w_gate) * (h @ w_up)
    return x + m @ w_down
}
