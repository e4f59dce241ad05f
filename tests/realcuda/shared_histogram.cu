// 256-bin byte histogram: per-block bins in shared memory (shared atomics), then merged into the
// global histogram with one atomic per non-empty bin; a grid-stride loop over uchar4 vectors.
__global__ void histogram256(const uchar4* __restrict__ data, unsigned int n_vec, unsigned int* __restrict__ hist) {
    __shared__ unsigned int bins[256];
    for (int b = threadIdx.x; b < 256; b += blockDim.x) bins[b] = 0;
    __syncthreads();
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n_vec; i += gridDim.x * blockDim.x) {
        uchar4 v = data[i];
        atomicAdd(&bins[v.x], 1u);
        atomicAdd(&bins[v.y], 1u);
        atomicAdd(&bins[v.z], 1u);
        atomicAdd(&bins[v.w], 1u);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < 256; b += blockDim.x)
        if (bins[b]) atomicAdd(&hist[b], bins[b]);
}
