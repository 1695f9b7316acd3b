# difftest found: wrong code in the CUDA path (GPU-shaped row kernels; the CPU-shaped program was
# right): a slice of exp(x1) next to a layernorm of x1 (staged): the slice read the staged row.
#   difftest --replay gpu_row_view_slice_where.tf --emu-every 1
#   observed: the emulated fused unit differs from the reference (see the numbers below)
#   expected: the reference's values
# Status: fixed by the lowering's row check (passes/lower.c row_current: a row staged in shared
# memory stands for a value only at the block's own row) and dead-code elimination before
# fusion (passes/dce.c); the kernel-IR verifier checks every read of a staged row.
# Found on an H100 by `fusec run --check` over difftest --seed 424242 (graph 1210); reproduced
# by the CUDA emulation and minimized by difftest:
# graph 1210 of --seed 424242; 15 statements minimized to 4
# CUDA emulation mismatch: the fused unit, emulated, vs the reference: forward order: output 0: max error / max |ref| = 0.958 over the tolerance 4.05e-06 (element 0: got 1.47057617, want 0.750894368); oracle change under rounding noise nan
block g(x0: bool[1, 1, 1, 1], x1: f32[3, 1, 1, 1]) {
    v4 = exp((x1 * 0.5))
    v7 = layernorm(x1, axis=3)
    v8 = slice(v4, -4, 2, 3)
    v10 = where(x0, v8, x1)
    return v10
}
