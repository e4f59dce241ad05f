// bf16 arithmetic: nvcc 13 emits fma.rn.bf16 for __hadd/__hmul on sm_80 and add/mul.bf16 on sm_90.
#include <cuda_bf16.h>
extern "C" __global__ void bf16_ops(const float* a, const float* b, unsigned short* raw, int n) {
    int i = threadIdx.x + blockIdx.x * blockDim.x;
    if (i < n) {
        __nv_bfloat16 x = __float2bfloat16_rn(a[i]);
        __nv_bfloat16 y = __float2bfloat16_rn(b[i]);
        __nv_bfloat16 z = __hadd(x, y);
        raw[6 * i] = __bfloat16_as_ushort(x);
        raw[6 * i + 1] = __bfloat16_as_ushort(y);
        raw[6 * i + 2] = __bfloat16_as_ushort(z);
        raw[6 * i + 3] = __bfloat16_as_ushort(__hmul(x, y));
        raw[6 * i + 4] = __bfloat16_as_ushort(__hfma(x, y, z));
        raw[6 * i + 5] = __bfloat16_as_ushort(__float2bfloat16_rz(a[i]));
    }
}
extern "C" __global__ void bf16_to_float(const unsigned short* raw, float* out, int n) {
    int i = threadIdx.x + blockIdx.x * blockDim.x;
    if (i < n) out[i] = __bfloat162float(__ushort_as_bfloat16(raw[i]));
}
