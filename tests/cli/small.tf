# small.tf: the block of the command-line tests (tests/cli/). Sizes 5 and 7 are not multiples
# of any vector or thread-block width. Two blocks, so that --block has something to pick.
dim N = 5, C = 7

block scale(x: f32[N, C], param g: f32[C]) -> f32[N, C]
{
    return x * g
}

block small(x: f32[N, C], param g: f32[C], param b: f32[C])
{
    h = layernorm(x, g, b, eps=1e-5)
    y = gelu(h, approx="tanh") + x
    return y, sum(h * x, axis=-1)
}
