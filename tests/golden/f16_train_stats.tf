#! --precision f16 --train
# Trained at --precision f16 (docs/precision.md): inputs, weights, activations and gradients
# f16; the hand-written statistics (mean) and the loss (cross_entropy) stay f32, and the ops that
# read them read their f16 operands widened to f32 (casts in the same kernel).
block stats(x: f32[4, 16], param w: f32[16, 24], y: i32[4]) {
    m = mean(x, axis=-1, keepdim=true)
    d = x - m
    v = mean(d * d, axis=-1, keepdim=true)
    h = d * rsqrt(v + 1e-5)
    return cross_entropy(h @ w, y)
}
