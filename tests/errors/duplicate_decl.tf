dim N = 4
const N = 3
block N(x: f32[4]) { return x }
block softmax(x: f32[4]) { return x }
block b(x: f32[4], x: f32[4]) { return x }
