#! --block mpl
dim N = 4
block mlp(x: f32[N]) { return x }
block main(x: f32[N]) { return x }
