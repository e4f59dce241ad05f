// Block-wide sum with cooperative groups: each warp reduces with cg::reduce over a tiled partition,
// warp results meet in static shared memory, the first warp reduces them, one atomic per block.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

namespace cg = cooperative_groups;

constexpr int kMaxWarps = 32;

__global__ void block_sum(const float* __restrict__ in, float* __restrict__ out, int n) {
    __shared__ float warp_sums[kMaxWarps];
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);

    float v = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        v += in[i];
    v = cg::reduce(warp, v, cg::plus<float>());
    if (warp.thread_rank() == 0) warp_sums[warp.meta_group_rank()] = v;
    block.sync();
    if (warp.meta_group_rank() == 0) {
        float s = warp.thread_rank() < warp.meta_group_size() ? warp_sums[warp.thread_rank()] : 0.0f;
        s = cg::reduce(warp, s, cg::plus<float>());
        if (warp.thread_rank() == 0) atomicAdd(out, s);
    }
}
