dim N = 4
block mlp(x: f32[N]) {
    return relu(x)
}
block b(x: f32[N]) {
    return mpl(x)
}
