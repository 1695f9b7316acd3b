dim A = 4294967296
block b(x: f32[A, A]) {
    return x
}
