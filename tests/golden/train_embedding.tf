#! --train
# A tied token embedding (GPT-2's wte): the rows the tokens pick, the last layernorm, the
# logits against the same table, the loss. The table's gradient adds two contributions: the
# logits' product and scatter_add, gather's adjoint (the tokens' rows of the gradient summed
# into the rows they name). scatter_add's index kernels (scatter_init, scatter_index) run
# first; the sums fuse with the accumulation and the product's transpose in one kernel.
block embed_lm(param wte: f32[50, 16], tok: i32[6], y: i32[6]) {
    h = layernorm(gather(wte, tok))
    return cross_entropy(h @ transpose(wte), y)
}
