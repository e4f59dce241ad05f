// Bias + ReLU over half precision activations, eight halves per 16-byte vector load (the
// packed-type idiom of LLM kernels), computed as __half2 pairs.
#include <cuda_fp16.h>

__global__ void bias_relu_h8(__half* __restrict__ act, const __half* __restrict__ bias, int rows, int cols) {
    const int vec = blockIdx.x * blockDim.x + threadIdx.x;   // index of a group of 8 halves
    const int per_row = cols / 8;
    if (vec >= rows * per_row) return;
    const int col = (vec % per_row) * 8;
    float4 a = reinterpret_cast<float4*>(act)[vec];
    const float4 b = *reinterpret_cast<const float4*>(bias + col);
    __half2* ah = reinterpret_cast<__half2*>(&a);
    const __half2* bh = reinterpret_cast<const __half2*>(&b);
    const __half2 zero = __float2half2_rn(0.0f);
#pragma unroll
    for (int k = 0; k < 4; ++k) ah[k] = __hmax2(__hadd2(ah[k], bh[k]), zero);
    reinterpret_cast<float4*>(act)[vec] = a;
}
