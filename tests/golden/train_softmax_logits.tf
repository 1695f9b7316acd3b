#! --train -D B=2 -D V=10
# the backward of examples/softmax_logits.tf (the forward and backward graphs, and their kernels)
# softmax_logits.tf: softmax and log_softmax of logits scaled by 1000, both returned.
# Scaled logits reach several thousand: exp() of them overflows f32 (and f64) unless the
# row maximum is subtracted first, as the definitions of both ops do. A correct program
# gives probabilities in [0, 1] that sum to 1 per row and finite log-probabilities; no
# inf or NaN anywhere. Both outputs read the same input and share the row max and sum,
# so a fusing compiler computes them in one pass (multi-output fusion).
# V defaults to GPT-2's vocabulary size, which is a multiple of no vector width.
dim B = 4, V = 50257
const scale = 1000.0

block softmax_logits(logits: f32[B, V]) -> f32[B, V], f32[B, V]
{
    z = logits * scale
    p = softmax(z, axis=-1)
    lp = log_softmax(z, axis=-1)
    return p, lp
}
