dim B, T = 8
block b(x: f32[B, T]) {
    return x * 2
}
