dim B = 2, T = 3
block b(x: f32[B, T], y: f32[T, B]) {
    return x + y
}
