# where and concat take i8 data only when every data operand is an i8 tensor (a constant
# is never i8, and nothing casts from i8 implicitly); gather's ids are never i8
dim N = 4
block b(w: i8[N], v: i8[N], x: f32[N], t: i8[N, N]) {
    a = where(x > 0, w, 0)
    c = where(x > 0, w, x)
    d = concat([w, x])
    e = gather(t, w)
    ok = concat([w, v])
    ok2 = where(x > 0, w, v)
    return a, c, d, e, ok, ok2
}
