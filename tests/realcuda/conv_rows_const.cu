// Row pass of a separable convolution: the filter taps live in __constant__ memory (every lane
// reads the same tap: a broadcast), the row tile with its halo in static shared memory.
#define KERNEL_RADIUS 4
#define KERNEL_LENGTH (2 * KERNEL_RADIUS + 1)
#define ROWS_BLOCKDIM_X 32
#define ROWS_BLOCKDIM_Y 4

__constant__ float c_Kernel[KERNEL_LENGTH];

__global__ void convolutionRows(float* __restrict__ dst, const float* __restrict__ src, int width, int height) {
    __shared__ float tile[ROWS_BLOCKDIM_Y][ROWS_BLOCKDIM_X + 2 * KERNEL_RADIUS];
    const int x = blockIdx.x * ROWS_BLOCKDIM_X + threadIdx.x;
    const int y = blockIdx.y * ROWS_BLOCKDIM_Y + threadIdx.y;
    const float* row = src + y * width;
    tile[threadIdx.y][threadIdx.x + KERNEL_RADIUS] = row[x];
    if (threadIdx.x < KERNEL_RADIUS) {
        tile[threadIdx.y][threadIdx.x] = x >= KERNEL_RADIUS ? row[x - KERNEL_RADIUS] : 0.0f;
        const int right = x + ROWS_BLOCKDIM_X;
        tile[threadIdx.y][threadIdx.x + ROWS_BLOCKDIM_X + KERNEL_RADIUS] = right < width ? row[right] : 0.0f;
    }
    __syncthreads();
    float sum = 0.0f;
#pragma unroll
    for (int j = -KERNEL_RADIUS; j <= KERNEL_RADIUS; j++)
        sum += c_Kernel[KERNEL_RADIUS - j] * tile[threadIdx.y][threadIdx.x + KERNEL_RADIUS + j];
    dst[y * width + x] = sum;
}
