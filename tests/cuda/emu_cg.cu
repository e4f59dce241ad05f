// Cooperative groups as production code writes them (tests/emu/test_emu_collectives.py): tiles of 16
// reduced with cg::reduce, warp-aggregated atomics over coalesced_threads() as in NVIDIA's samples,
// a reduction over a coalesced group, and invoke_one. nvcc lowers cg::reduce to shuffles on sm_75,
// to redux.sync on sm_80, and invoke_one to elect.sync on sm_90.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;

__device__ int aggregated_increment(int* counter) {   // warp-aggregated atomics (NVIDIA's samples)
    cg::coalesced_group active = cg::coalesced_threads();
    int base;
    if (active.thread_rank() == 0) base = atomicAdd(counter, (int)active.size());
    return active.shfl(base, 0) + (int)active.thread_rank();
}
extern "C" __global__ void cg_filter_and_reduce(const int* in, int n, int* kept, int* count, int* tile_sums,
                                                int* tile_max, int* group_sums) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<16> tile = cg::tiled_partition<16>(block);
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = i < n ? in[i] : 0;
    tile_sums[i] = cg::reduce(tile, v, cg::plus<int>());
    tile_max[i] = cg::reduce(tile, v, cg::greater<int>());
    if (i < n && v > 0) {
        kept[aggregated_increment(count)] = v;
        cg::coalesced_group positive = cg::coalesced_threads();
        group_sums[i] = cg::reduce(positive, v, cg::plus<int>()) * 64 + (int)positive.size();
    }
}
extern "C" __global__ void cg_invoke_one(int* counter) {   // elect.sync on sm_90
    cg::invoke_one(cg::coalesced_threads(), [&] { atomicAdd(counter, 1); });
}
