#! --train -D B=1 -D T=4 -D C=8 -D H=2
# the backward of examples/gpt2_attn.tf (the forward and backward graphs, and their kernels)
# gpt2_attn.tf: GPT-2 multi-head causal self-attention,
# written out op by op: one QKV projection split three ways, heads made with reshape and
# transpose, scores scaled by 1/sqrt(head dim), the causal mask and softmax, the weighted
# sum of values, heads merged back and the output projection.
# Small dims for a quick CPU run; GPT-2 small is -D B=4 -D T=1024 -D C=768 -D H=12.
dim B = 2, T = 64, C = 128, H = 4

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
