#! --no-fuse
# i8 through every kind of kernel IR access: a load widened to i32, the float -> i8 cast
# saturating (clamped in i32 after the saturating float -> i32), an i8 store, an index map
# and a gather of i8 rows, an i64 -> i32 cast clamped likewise
dim N = 4, C = 8, V = 16

block q(x: f32[N, C], w: i8[V, C], ids: i32[N], big: i64[N]) -> i8[N, C], f32[N, C], i32[N] {
    q = cast(x * 50, i8)
    e = cast(transpose(gather(w, ids)), f32)
    return q, transpose(e) + cast(q, f32), cast(big, i32)
}
