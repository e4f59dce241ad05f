// Micro-kernel (issue 24): a streaming read with and without the evict-first hint.
//
// Each thread reads its element, then its pair's (`in[i ^ 1]`, the same 32 B sector, just
// brought into the L1 by the warp's first load). `read_twice` uses a plain load for both;
// `read_twice_cs` makes the first a streaming load (`__ldcs`, PTX `ld.global.cs`: "cache
// streaming, likely to be accessed once", allocated evict-first). Whether the second load still
// hits in the L1 after an `ld.global.cs` fill is what ncu's L1 hit ratio tells apart.
extern "C" __global__ void read_twice(const float *__restrict__ in, float *__restrict__ out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float mine = in[i];
        float pair = in[i ^ 1];
        out[i] = mine - pair;
    }
}

extern "C" __global__ void read_twice_cs(const float *__restrict__ in, float *__restrict__ out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float mine = __ldcs(in + i);
        float pair = in[i ^ 1];
        out[i] = mine - pair;
    }
}
