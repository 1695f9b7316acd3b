# difftest found: wrong on a real GPU only (an H100, fused and eager): log_softmax over one element (6e-9 where the reference is exactly 0). NVRTC contracted
# a*b + c into FMA by default, so a normalization's x - mean was no longer exact.
#   difftest --replay gpu_fma_log_softmax_one.tf --emu-every 1                 passes (the generated CUDA says where
#                                                          contraction is allowed: nowhere here)
#   difftest --replay gpu_fma_log_softmax_one.tf --emu-every 1 --emu-contract  fails, as the GPU did (the emulation
#                                                          compiled with contraction everywhere)
# Status: fixed by codegen/cuda.c (__fmul_rn / __dmul_rn for every multiply, fmaf only in matrix
# accumulations); tests/unit/test_cuda_fma.c checks the PTX. Graph 99 of difftest --seed 424242
# (the generator of commit b286d41; later generators make other graphs from that seed).
# input-seed=9055900683996431778
block g(x0: f32[7, 2]) {
    v1 = reshape(x0, [2, 7])
    v2 = sigmoid(x0)
    v3 = log_softmax(v1, 1)
    v4 = transpose(v1, [1, 0])
    v5 = layernorm(v4, full([2], 1.5), axis=-1)
    v6 = softmax(causal_mask(v1))
    v7 = where(v4 > 0.125, v4, -1.5)
    v8 = relu(v3)
    v9 = softmax(v6, 1)
    v10 = pow(abs(v7) + 0.5, (v4 * 0.5))
    v11 = slice(v10, -1, 3, 0, -1)
    v12 = reshape(v9, [14])
    v13 = gather(v10, iota([4, 6, 5], 1))
    v14 = mean(v4, keepdim=true)
    v15 = sub(v12, v12)
    v16 = sum(v14, axis=-2, keepdim=true)
    v17 = v7 - v16
    v18 = square(v16)
    v19 = log_softmax(v18)
    v20 = slice(v19, axis=0, start=-1, end=1, step=1)
    v21 = minimum(v10, v19)
    return v21
}
