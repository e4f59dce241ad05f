// Two kernels whose per-load hit ratios no valid schedule can change (issue 20 part 1).

// Each element is read exactly once before anything writes it: the read can never hit.
extern "C" __global__ void read_then_write(float *a, float *out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = a[i];
    __syncthreads();
    a[i] = v + 1.0f;
}

// Each warp reads its line, then (after a barrier) the neighbour of each element, in the same
// line: the second read finds the line its own warp just brought into the L1.
extern "C" __global__ void reread_after_sync(const float *a, float *out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float x = a[i];
    __syncthreads();
    float y = a[i ^ 1];
    out[i] = x + y;
}
