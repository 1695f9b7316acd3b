dim N = 8
block int(float: f32[N], threadIdx: f32[N]) -> f32[N] {
    __global__ = float * threadIdx
    main = __global__ + 1
    return main
}
block main(__global__: f32[N]) {
    int = int(__global__, __global__)
    return int, __global__ * 2
}
