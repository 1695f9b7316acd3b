#! --no-fuse
# causal attention runs as its definition in eager mode: transpose, q@kT, scale, mask, softmax, @v
dim H = 2, T = 5, D = 4

block f(q: f32[H, T, D], k: f32[H, T, D], v: f32[H, T, D]) {
    return attention(q, k, v, causal=true)
}
