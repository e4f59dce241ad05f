// Per-block sums with CUB's block primitives: a striped BlockLoad into registers, BlockReduce over
// the block, and a BlockScan of the per-thread partials; temporary storage in a union in shared memory.
#include <cub/block/block_load.cuh>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

template <int BLOCK_THREADS, int ITEMS_PER_THREAD>
__global__ void __launch_bounds__(BLOCK_THREADS) block_sums(const int* __restrict__ in, int* __restrict__ block_out,
                                                            int* __restrict__ prefix_out) {
    using Load = cub::BlockLoad<int, BLOCK_THREADS, ITEMS_PER_THREAD, cub::BLOCK_LOAD_DIRECT>;
    using Reduce = cub::BlockReduce<int, BLOCK_THREADS>;
    using Scan = cub::BlockScan<int, BLOCK_THREADS>;
    __shared__ union {
        typename Load::TempStorage load;
        typename Reduce::TempStorage reduce;
        typename Scan::TempStorage scan;
    } temp;

    int items[ITEMS_PER_THREAD];
    const int tile = blockIdx.x * BLOCK_THREADS * ITEMS_PER_THREAD;
    Load(temp.load).Load(in + tile, items);
    int partial = 0;
#pragma unroll
    for (int k = 0; k < ITEMS_PER_THREAD; ++k) partial += items[k];
    __syncthreads();
    int total = Reduce(temp.reduce).Sum(partial);
    __syncthreads();
    int prefix;
    Scan(temp.scan).ExclusiveSum(partial, prefix);
    if (threadIdx.x == 0) block_out[blockIdx.x] = total;
    prefix_out[blockIdx.x * BLOCK_THREADS + threadIdx.x] = prefix;
}

template __global__ void block_sums<128, 4>(const int*, int*, int*);
