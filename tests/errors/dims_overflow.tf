dim A = 4294967296, B = 4294967296
block b(x: f32[A * B]) {
    return x
}
