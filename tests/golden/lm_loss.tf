# A language-model loss head: the last layernorm, the logits, and their mean cross-entropy.
# cross_entropy's row losses and their mean are one kernel: the mean runs in the row kernel's
# tail (KirKernel.tail), once, after every row.
block lm_loss(h: f32[4, 16], param w: f32[16, 50], y: i32[4]) {
    logits = layernorm(h) @ w
    return cross_entropy(logits, y)
}
