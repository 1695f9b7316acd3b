# difftest found: wrong code in the CUDA path (GPU-shaped row kernels; the CPU-shaped program was
# right): a gather (ids from iota) of a cast of x1, while x1 was staged for a layernorm: the gather read its rows from the block's own staged row.
#   difftest --replay gpu_row_view_gather.tf --emu-every 1
#   observed: the emulated fused unit differs from the reference (see the numbers below)
#   expected: the reference's values
# Status: fixed by the lowering's row check (passes/lower.c row_current: a row staged in shared
# memory stands for a value only at the block's own row) and dead-code elimination before
# fusion (passes/dce.c); the kernel-IR verifier checks every read of a staged row.
# Found on an H100 by `fusec run --check` over difftest --seed 424242 (graph 1090); reproduced
# by the CUDA emulation and minimized by difftest:
# graph 1090 of --seed 424242; 7 statements minimized to 3
# CUDA emulation mismatch: the fused unit, emulated, vs the reference: forward order: output 0: max error / max |ref| = 1.32 over the tolerance 4.05e-06 (element 1: got 0.411976576, want -0.408571869); oracle change under rounding noise nan
block g(x1: f32[12, 1, 12]) {
    v4 = cast(x1, f64)
    v6 = gather(v4, iota([1], 0))
    v7 = layernorm(x1, full([12], 1.5), axis=2, eps=0.01)
    return v6
}
