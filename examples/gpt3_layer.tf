# gpt3_layer.tf: one layer of GPT-3 175B in bf16, written the Megatron-LM way, for `fusec mem`
# (docs/training.md): activations [S, B, H] (sequence first), pre-LN,
#   x = x + dropout(attn(layernorm(x)) @ w_o + b_o)
#   x = x + dropout(gelu(layernorm(x) @ w_fc1 + b_fc1) @ w_fc2 + b_fc2)
# with the attention written op by op as Megatron's unfused path does: one QKV product split
# three ways, heads made with reshape + transpose, scores = q @ k^T * 1/sqrt(H/A),
# causal_mask, softmax, dropout on the probabilities, @ v, heads merged.
# The dims are GPT-3 175B's (Brown et al. 2020: 96 layers, hidden 12288, 96 heads, sequence
# 2048) at micro-batch 1; -D shrinks them (-D S=64 -D H=256 -D A=4 for a CPU run). One layer
# has 12H^2 + 13H parameters (1,812,099,072 at H = 12288).
dim S = 2048, B = 1, H = 12288, A = 96
const P = 0.1             # dropout probability (attention, projection and MLP outputs)

# [S, B, H] -> [B, A, S, H/A]
block heads(t: bf16[S, B, H]) -> bf16[B, A, S, H/A]
{
    return transpose(reshape(t, [S, B, A, H/A]), [1, 2, 0, 3])
}

block gpt3_layer(x: bf16[S, B, H],
                 param ln1_g: bf16[H], param ln1_b: bf16[H],
                 param w_qkv: bf16[H, 3*H], param b_qkv: bf16[3*H],
                 param w_o: bf16[H, H], param b_o: bf16[H],
                 param ln2_g: bf16[H], param ln2_b: bf16[H],
                 param w_fc1: bf16[H, 4*H], param b_fc1: bf16[4*H],
                 param w_fc2: bf16[4*H, H], param b_fc2: bf16[H]) -> bf16[S, B, H]
{
    # attention
    h = layernorm(x, ln1_g, ln1_b)
    q, k, v = split(h @ w_qkv + b_qkv, 3, axis=-1)
    q = heads(q)
    k = heads(k)
    v = heads(v)
    scores = causal_mask(q @ transpose(k) * rsqrt(H/A))
    p = softmax(scores)
    p = dropout(p, P, seed=1)
    o = reshape(transpose(p @ v, [2, 0, 1, 3]), [S, B, H])
    o = o @ w_o + b_o
    o = dropout(o, P, seed=2)
    x = x + o
    # MLP
    h = layernorm(x, ln2_g, ln2_b)
    m = gelu(h @ w_fc1 + b_fc1)
    m = m @ w_fc2 + b_fc2
    m = dropout(m, P, seed=3)
    return x + m
}
