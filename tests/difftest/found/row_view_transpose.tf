# difftest found: silent wrong code (CPU and CUDA alike): a row kernel's transposed output read
# another row's element from the row the kernel had kept for its own row.
#   difftest --replay row_view_transpose.tf      (or: fusec run FILE --device cpu --check --random 1)
#   observed: v9 max_rel 0.95: `k0_sum [tanh,sum,add,square,transpose]` read sh0[v1] (the kept row
#             of tanh(x0) at the block's row) where transpose(v8)[i, j] needs row j
#   expected: v9 = transpose(square(x0 + tanh(x0))) as the reference computes it
# The dead v4 (a sum reaching no output) was what pulled the transpose into a row kernel.
# Status: fixed by the lowering's row check (passes/lower.c row_current: a staged or kept row
# stands for a value only at the block's own row) and by dead-code elimination before fusion
# (passes/dce.c); the kernel-IR verifier checks every such read (ir/kir.c, the view check).
# Found by difftest --seed 20261124 (graph 707), minimized by difftest.
block g(x0: f32[2, 2]) {
    v2 = tanh(x0)
    v4 = sum(v2, axis=[1])
    v5 = x0 + v2
    v8 = square(v5)
    v9 = transpose(v8)
    return v9
}
