# keywords.tf: user names that are keywords or predefined names in C, C++ and CUDA, or
# names a code generator could use for itself. fusec never puts a user-written name into
# generated code (only into comments), so this file must compile for every target and run
# like any other. It also shows that op and block names are not reserved: `float` below is
# both a block and a parameter, and `int` both a parameter and the name of an output.
dim N = 37, M = 96

# A block named `float` with parameters `int` and `threadIdx` and a local `main`.
block float(int: f32[N, M], threadIdx: f32[M]) -> f32[N, M]
{
    main = int * threadIdx
    return softmax(main, axis=-1) + sigmoid(int)
}

# The block compiled by default (the last one) is named `main`; its CUDA entry point is
# fusec_main_forward, so a local of that name is here too.
block main(int: f32[N, M], float: f32[M], threadIdx: f32[M],
           param __global__: f32[M, M], param blockDim: f32[M]) -> f32[N, M], f32[N]
{
    __shared__ = float(int, threadIdx)          # a call of the block `float`
    void = layernorm(__shared__ @ __global__, float, blockDim, eps=1e-5)
    fusec_main_forward = exp(-abs(void))
    int = gelu(void, approx="tanh") * 0.5 + fusec_main_forward
    return int, mean(int, axis=-1)
}
