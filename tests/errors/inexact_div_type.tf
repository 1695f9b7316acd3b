dim C = 10, H = 4
block b(x: f32[C / H]) {
    return x
}
