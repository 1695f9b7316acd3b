#! --train -D B=1 -D T=4 -D C=8 -D H=2
# the backward of examples/gpt2_block.tf (the forward and backward graphs, and their kernels)
# gpt2_block.tf: a whole GPT-2 transformer block, pre-LN:
#   x = x + attn(layernorm(x))
#   x = x + mlp(layernorm(x))
# The third block calls the other two; calls are inlined, so the compiler sees one graph
# and fuses across the call boundaries: the attention's output bias, the residual add and
# the second layernorm become one kernel (tests/doc/reports/gpt2_block.report). Attention here uses the `attention` op (gpt2_attn.tf writes it
# out op by op). Small dims for a quick CPU run; GPT-2 small is
# -D B=4 -D T=1024 -D C=768 -D H=12.
dim B = 2, T = 64, C = 128, H = 4

block attn(x: f32[B, T, C], param w_qkv: f32[C, 3*C], param b_qkv: f32[3*C],
           param w_o: f32[C, C], param b_o: f32[C]) -> f32[B, T, C]
{
    q, k, v = split(x @ w_qkv + b_qkv, 3, axis=-1)
    q = transpose(reshape(q, [B, T, H, C/H]), [0, 2, 1, 3])
    k = transpose(reshape(k, [B, T, H, C/H]), [0, 2, 1, 3])
    v = transpose(reshape(v, [B, T, H, C/H]), [0, 2, 1, 3])
    o = attention(q, k, v, causal=true)
    o = reshape(transpose(o, [0, 2, 1, 3]), [B, T, C])
    return o @ w_o + b_o
}

block mlp(x: f32[B, T, C], param w_fc: f32[C, 4*C], param b_fc: f32[4*C],
          param w_proj: f32[4*C, C], param b_proj: f32[C]) -> f32[B, T, C]
{
    return gelu(x @ w_fc + b_fc, approx="tanh") @ w_proj + b_proj
}

block gpt2_block(x: f32[B, T, C],
                 param ln1_g: f32[C], param ln1_b: f32[C],
                 param w_qkv: f32[C, 3*C], param b_qkv: f32[3*C],
                 param w_o: f32[C, C], param b_o: f32[C],
                 param ln2_g: f32[C], param ln2_b: f32[C],
                 param w_fc: f32[C, 4*C], param b_fc: f32[4*C],
                 param w_proj: f32[4*C, C], param b_proj: f32[C]) -> f32[B, T, C]
{
    x = x + attn(layernorm(x, ln1_g, ln1_b), w_qkv, b_qkv, w_o, b_o)
    x = x + mlp(layernorm(x, ln2_g, ln2_b), w_fc=w_fc, b_fc=b_fc, w_proj=w_proj, b_proj=b_proj)
    return x
}
