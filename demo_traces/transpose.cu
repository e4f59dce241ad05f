// Matrix transpose, odata = idata^T, of a square float matrix (width a multiple of TILE_DIM).
// The two kernels of NVIDIA's "An Efficient Matrix Transpose in CUDA C/C++" (M. Harris):
// 32x8 threads per CTA, each thread moving TILE_DIM / BLOCK_ROWS = 4 elements of a 32x32 tile.

#define TILE_DIM 32
#define BLOCK_ROWS 8

// Naive: coalesced reads, writes strided by the matrix width.
extern "C" __global__ void transpose_naive(float *odata, const float *idata)
{
    int x = blockIdx.x * TILE_DIM + threadIdx.x;
    int y = blockIdx.y * TILE_DIM + threadIdx.y;
    int width = gridDim.x * TILE_DIM;

    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        odata[x * width + (y + j)] = idata[(y + j) * width + x];
}

// Tiled: the tile is staged in shared memory (padded by one column against bank conflicts)
// so that both the reads and the writes of global memory are coalesced.
extern "C" __global__ void transpose_tiled(float *odata, const float *idata)
{
    __shared__ float tile[TILE_DIM][TILE_DIM + 1];

    int x = blockIdx.x * TILE_DIM + threadIdx.x;
    int y = blockIdx.y * TILE_DIM + threadIdx.y;
    int width = gridDim.x * TILE_DIM;

    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        tile[threadIdx.y + j][threadIdx.x] = idata[(y + j) * width + x];

    __syncthreads();

    x = blockIdx.y * TILE_DIM + threadIdx.x;  // transposed block offset
    y = blockIdx.x * TILE_DIM + threadIdx.y;

    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        odata[(y + j) * width + x] = tile[threadIdx.x][threadIdx.y + j];
}
