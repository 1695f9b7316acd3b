# bad.tf: an undefined name at line 6, column 16 (tests/cli/compile.sh pins the location).
dim N = 5

block bad(x: f32[N]) -> f32[N]
{
    return x + zz
}
