dim T = 4, C = 8, N = 16, V = 32
block q(x: f32[T, C], param w: i8[C, N], param s: f32[N], e: i8[V, C], ids: i32[T]) -> f32[T, N], i8[T, C] {
    h = x + cast(gather(e, ids), f32) * 0.01
    q = cast(h * 64.0, i8)
    return h @ (cast(w, f32) * s), where(x > 0, q, transpose(reshape(q, [C, T])))
}
