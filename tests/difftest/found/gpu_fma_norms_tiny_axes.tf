# difftest found: wrong on a real GPU only (an H100, fused and eager): layernorm and rmsnorm over tiny axes (rel 5.4e-5 against tol 4.2e-6). NVRTC contracted
# a*b + c into FMA by default, so a normalization's x - mean was no longer exact.
#   difftest --replay gpu_fma_norms_tiny_axes.tf --emu-every 1                 passes (the generated CUDA says where
#                                                          contraction is allowed: nowhere here)
#   difftest --replay gpu_fma_norms_tiny_axes.tf --emu-every 1 --emu-contract  fails, as the GPU did (the emulation
#                                                          compiled with contraction everywhere)
# Status: fixed by codegen/cuda.c (__fmul_rn / __dmul_rn for every multiply, fmaf only in matrix
# accumulations); tests/unit/test_cuda_fma.c checks the PTX. Graph 858 of difftest --seed 424242
# (the generator of commit b286d41; later generators make other graphs from that seed).
# input-seed=10788654835967315091
block g(x0: f32[6, 10, 2, 9], x1: f32[9, 1]) {
    v2 = x0 - x0
    v3 = sin(x0)
    v4 = layernorm(x1, axis=[0, 1])
    v5 = transpose(v4)
    v6 = minimum(x1, v4)
    v7 = rmsnorm(x1)
    v8 = erf(v6)
    v9 = layernorm(v7, full([1], 1.5), full([1], -0.25))
    return v9, v2
}
