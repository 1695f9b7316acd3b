dim N = 99999999999999999999
const e = 1e999
const q = 3abc
block f(x: f32[4]) { return x }
