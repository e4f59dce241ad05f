// Warp-aggregated atomics through cg::coalesced_threads(): the threads that took the branch form a
// group, its leader adds the group's size once, and each member gets its own slot.
#include <cooperative_groups.h>

namespace cg = cooperative_groups;

__device__ __forceinline__ int reserve_slot(int* counter) {
    cg::coalesced_group active = cg::coalesced_threads();
    int first = 0;
    if (active.thread_rank() == 0) first = atomicAdd(counter, static_cast<int>(active.size()));
    return active.shfl(first, 0) + static_cast<int>(active.thread_rank());
}

__global__ void bucket_indices(const float* __restrict__ values, int n, float threshold,
                               int* __restrict__ selected, int* __restrict__ counter) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && values[i] > threshold) selected[reserve_slot(counter)] = i;
}
