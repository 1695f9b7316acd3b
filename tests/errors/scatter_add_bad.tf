dim N = 6
block b(x: f32[N, 4], ids: i32[N], f: f32[N], m: bool[N, 4], j: i32[4]) {
    a = scatter_add(x, f, 3)
    c = scatter_add(m, ids, 3)
    d = scatter_add(x, j, 3)
    e = scatter_add(x, ids, 0)
    g = scatter_add(x, ids)
    return a, c, d, e, g
}
