# difftest found: wrong code in the CUDA path (GPU-shaped row kernels; the CPU-shaped program was
# right): a slice of a value staged for a softmax over the same rows (a dead softmax: the slice read the staged row of another block's row).
#   difftest --replay gpu_row_view_slice.tf --emu-every 1
#   observed: the emulated fused unit differs from the reference (see the numbers below)
#   expected: the reference's values
# Status: fixed by the lowering's row check (passes/lower.c row_current: a row staged in shared
# memory stands for a value only at the block's own row) and dead-code elimination before
# fusion (passes/dce.c); the kernel-IR verifier checks every read of a staged row.
# Found on an H100 by `fusec run --check` over difftest --seed 424242 (graph 948); reproduced
# by the CUDA emulation and minimized by difftest:
# graph 948 of --seed 424242; 16 statements minimized to 4
# CUDA emulation mismatch: the fused unit, emulated, vs the reference: forward order: output 0: max error / max |ref| = 0.902 over the tolerance 4.05e-06 (element 0: got -1.72014201, want 1.51891804); oracle change under rounding noise 1.95e-07
block g(x3: f32[8, 2]) {
    v5 = x3 + x3
    v6 = v5 / (abs(v5) + 0.5)
    v8 = slice(v5, axis=-2, start=1, end=5, step=1)
    v12 = softmax(v6)
    return v8
}
