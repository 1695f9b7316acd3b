dim N = 4
blok b(x: f32[N]) { return x }
block c(x: f32[N]) { return x }
