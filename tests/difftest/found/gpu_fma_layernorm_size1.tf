# difftest found: wrong on a real GPU only (an H100, fused and eager): layernorm over a size-1 axis (1.75e-5 instead of 0). NVRTC contracted
# a*b + c into FMA by default, so a normalization's x - mean was no longer exact.
#   difftest --replay gpu_fma_layernorm_size1.tf --emu-every 1                 passes (the generated CUDA says where
#                                                          contraction is allowed: nowhere here)
#   difftest --replay gpu_fma_layernorm_size1.tf --emu-every 1 --emu-contract  fails, as the GPU did (the emulation
#                                                          compiled with contraction everywhere)
# Status: fixed by codegen/cuda.c (__fmul_rn / __dmul_rn for every multiply, fmaf only in matrix
# accumulations); tests/unit/test_cuda_fma.c checks the PTX. Graph 542 of difftest --seed 424242
# (the generator of commit b286d41; later generators make other graphs from that seed).
# input-seed=13667036044986017070
block g(x0: f32[2, 8, 8, 1], x1: f32[2, 8, 8, 1]) {
    v2 = slice(x0, 0, -3, -1, 3)
    v3 = mean(x1, axis=[0], keepdim=true)
    v4 = cast(v3, f8e4m3)
    v5, v6, v7, v8 = split(x0, [1, 1, 5, 1], -3)
    v9 = reshape(v8, [2, 8])
    v10 = v8 - v7
    v11 = rsqrt(abs(v9) + 0.5)
    v12 = tanh(v11)
    v13 = gelu(v12, approx="tanh")
    v14 = log(abs(v6) + 0.5)
    v15 = softmax(v12, axis=-1)
    v16 = x0 * v3
    v17 = layernorm(v16, axis=-1, eps=1e-5)
    v18 = maximum(v14, v17)
    v19 = maximum(v18, 0.25)
    v20 = where(v7 > 0.125, v14, v7)
    return v20, v9, v17
}
