dim C = 10, H = 3
block b(x: f32[C]) {
    return reshape(x, [H, C / H])
}
