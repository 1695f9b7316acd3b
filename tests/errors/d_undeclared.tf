#! -D Q=3 -D T=0
dim T = 8
block b(x: f32[T]) {
    return x
}
