// Row softmax with one warp per row: float4 loads, an online max/sum with __shfl_xor_sync
// butterflies over warpSize lanes, then a second pass that writes the normalised row.
#include <cfloat>

__device__ __forceinline__ float warp_max(float v) {
    for (int off = warpSize / 2; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int off = warpSize / 2; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

__global__ void softmax_forward(float* __restrict__ out, const float* __restrict__ inp, int rows, int cols) {
    const int warps_per_block = blockDim.x / warpSize;
    const int row = blockIdx.x * warps_per_block + threadIdx.x / warpSize;
    const int lane = threadIdx.x % warpSize;
    if (row >= rows) return;
    const float4* x = reinterpret_cast<const float4*>(inp + (size_t)row * cols);
    float m = -FLT_MAX, s = 0.0f;
    for (int c = lane; c < cols / 4; c += warpSize) {
        float4 v = x[c];
        float vm = fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w));
        float nm = fmaxf(m, vm);
        s = s * __expf(m - nm) + __expf(v.x - nm) + __expf(v.y - nm) + __expf(v.z - nm) + __expf(v.w - nm);
        m = nm;
    }
    const float gm = warp_max(m);
    const float gs = warp_sum(s * __expf(m - gm));
    float4* y = reinterpret_cast<float4*>(out + (size_t)row * cols);
    for (int c = lane; c < cols / 4; c += warpSize) {
        float4 v = x[c];
        y[c] = make_float4(__expf(v.x - gm) / gs, __expf(v.y - gm) / gs, __expf(v.z - gm) / gs, __expf(v.w - gm) / gs);
    }
}
