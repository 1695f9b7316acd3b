#! --block nope
block a(x: f32[4]) { return x }
block b(x: f32[4]) { return x }
