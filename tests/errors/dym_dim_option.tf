#! -D SQE=16 -D ZZ=2
dim SEQ = 8, D = 4
block b(x: f32[SEQ, D]) {
    return x
}
