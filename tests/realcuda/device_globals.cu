// Kernels that keep state in __device__ variables: a scale factor the host sets with
// cudaMemcpyToSymbol, and a counter the host reads back with cudaMemcpyFromSymbol.
__device__ float g_scale;
__device__ unsigned long long g_visits;

__global__ void scale_and_count(float* __restrict__ data, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        data[i] *= g_scale;
        atomicAdd(&g_visits, 1ull);
    }
}
