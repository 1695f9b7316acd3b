block f(x: f32[4]) {
    a1 = u1
    a2 = u2
    a3 = u3
    a4 = u4
    a5 = u5
    a6 = u6
    a7 = u7
    a8 = u8
    a9 = u9
    a10 = u10
    a11 = u11
    a12 = u12
    a13 = u13
    a14 = u14
    a15 = u15
    a16 = u16
    a17 = u17
    a18 = u18
    a19 = u19
    a20 = u20
    a21 = u21
    a22 = u22
    return x
}
