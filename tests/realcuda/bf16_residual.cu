// Residual add in bfloat16 as LLM training code writes it: a 128-bit packed type of eight
// __nv_bfloat16, loaded with __ldcs (streamed, read once) and stored with __stcs, the sum in float.
#include <cuda_bf16.h>

template <class T>
struct alignas(16) Packed128 {
    static constexpr int size = sizeof(int4) / sizeof(T);
    T payload[size];
    __device__ static Packed128 load_cs(const T* p) {
        Packed128 r;
        int4 bits = __ldcs(reinterpret_cast<const int4*>(p));
        memcpy(&r, &bits, sizeof(bits));
        return r;
    }
    __device__ void store_cs(T* p) const {
        int4 bits;
        memcpy(&bits, this, sizeof(bits));
        __stcs(reinterpret_cast<int4*>(p), bits);
    }
};

using x128 = Packed128<__nv_bfloat16>;

__global__ void residual_forward(__nv_bfloat16* out, const __nv_bfloat16* inp1, const __nv_bfloat16* inp2, int N) {
    int idx = (blockIdx.x * blockDim.x + threadIdx.x) * x128::size;
    if (idx >= N) return;
    x128 a = x128::load_cs(inp1 + idx);
    x128 b = x128::load_cs(inp2 + idx);
    x128 r;
#pragma unroll
    for (int k = 0; k < x128::size; ++k)
        r.payload[k] = __float2bfloat16(__bfloat162float(a.payload[k]) + __bfloat162float(b.payload[k]));
    r.store_cs(out + idx);
}
