# A misspelt op, and a name another framework uses: "did you mean"; none when nothing is close
dim N = 4
block b(x: f32[N]) {
    a = swish(x)
    c = sotfmax(x)
    d = frobnicate(x)
    return a + c + d
}
