// cp.async (sm_80+), cooperative groups, redux.sync, match.any, a noinline call through a generic
// pointer: needs the CUDA headers (cuda_pipeline.h, cooperative_groups.h and CCCL's nv/target).
#include <cuda_pipeline.h>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

__device__ __noinline__ float sum3(const float* p) { return p[0] + p[1] + p[2]; }   // generic pointer

extern "C" __global__ void async_copy(const float* in, float* out, int n) {
    __shared__ float buf[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) __pipeline_memcpy_async(&buf[threadIdx.x], &in[i], sizeof(float));
    __pipeline_commit();
    __pipeline_wait_prior(0);
    __syncthreads();
    float v = (threadIdx.x + 2 < 256) ? sum3(&buf[threadIdx.x]) : 0.f;
    int cnt = __syncthreads_count(v > 0.f);
    int any = __syncthreads_or(v < 0.f);
    if (i < n) __stcs(&out[i], v + cnt + any + __ldcs(&in[i]) + __ldg(&in[i]));
}
extern "C" __global__ void cg_reduce(const int* in, int* out, int n) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = i < n ? in[i] : 0;
    int s = v;
    for (int o = 16; o > 0; o /= 2) s += warp.shfl_down(s, o);
    unsigned m = __match_any_sync(0xffffffff, v);
    unsigned r = __reduce_add_sync(0xffffffff, (unsigned)v);
    if (warp.thread_rank() == 0) atomicAdd(out, s + (int)m + (int)r);
    block.sync();
}
