# names_marker.tf: every user-written name here starts with "zqmark". check_emit.py compiles
# this file for CUDA C, PTX and LLVM IR and requires that "zqmark" appears nowhere in the
# generated code outside comments: user names must not reach generated identifiers or
# strings. Covers dims, consts, blocks, parameters, locals, multi-result bindings and outputs.
dim zqmark_N = 5, zqmark_C = 12
const zqmark_eps = 1e-5

block zqmark_helper(zqmark_a: f32[zqmark_N, zqmark_C], zqmark_w: f32[zqmark_C]) -> f32[zqmark_N, zqmark_C]
{
    zqmark_l, zqmark_r = split(zqmark_a * zqmark_w, 2, axis=-1)
    return concat([zqmark_r, zqmark_l], axis=-1)
}

block zqmark_main(zqmark_x: f32[zqmark_N, zqmark_C], param zqmark_g: f32[zqmark_C],
                  param zqmark_m: f32[zqmark_C, zqmark_C]) -> f32[zqmark_N, zqmark_C], f32[zqmark_N]
{
    zqmark_h = layernorm(zqmark_x, zqmark_g, eps=zqmark_eps)
    zqmark_y = gelu(zqmark_helper(zqmark_h, zqmark_g) @ zqmark_m) + zqmark_x
    return zqmark_y, sum(softmax(zqmark_y), axis=-1)
}
