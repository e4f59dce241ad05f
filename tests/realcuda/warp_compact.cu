// Per-warp stream compaction with partial masks: the tail warp votes only over the lanes in range
// (__ballot_sync on the mask of live lanes), offsets come from popc of lower lanes, and the warp
// leader reserves room with one atomic that it broadcasts with __shfl_sync over the same mask.
__global__ void compact_positive(const int* __restrict__ in, int n, int* __restrict__ out,
                                 unsigned int* __restrict__ count) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned live = __ballot_sync(0xffffffffu, i < n);
    if (i >= n) return;
    const int lane = threadIdx.x % warpSize;
    const int v = in[i];
    const unsigned keep = __ballot_sync(live, v > 0);
    const int leader = __ffs(live) - 1;
    unsigned base = 0;
    if (lane == leader) base = atomicAdd(count, __popc(keep));
    base = __shfl_sync(live, base, leader);
    if (v > 0) out[base + __popc(keep & ((1u << lane) - 1))] = v;
}
