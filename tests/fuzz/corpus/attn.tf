# Multi-head causal self-attention, GPT-2 style
dim B = 4, T = 256, C = 768, H = 12

block attn(x: f32[B, T, C], param w_qkv: f32[C, 3*C], param b_qkv: f32[3*C],
           param w_o: f32[C, C], param b_o: f32[C]) -> f32[B, T, C]
{
    q, k, v = split(x @ w_qkv + b_qkv, 3, axis=-1)
    q = transpose(reshape(q, [B, T, H, C/H]), [0, 2, 1, 3])
    k = transpose(reshape(k, [B, T, H, C/H]), [0, 2, 1, 3])
    v = transpose(reshape(v, [B, T, H, C/H]), [0, 2, 1, 3])
    s = q @ transpose(k) * rsqrt(C/H)
    o = softmax(causal_mask(s)) @ v
    o = reshape(transpose(o, [0, 2, 1, 3]), [B, T, C])
    return o @ w_o + b_o
}
