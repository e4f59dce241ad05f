// Dense matrix multiply C = A B of n x n floats (row-major) with TILE x TILE sub-matrices of A and B
// staged in shared memory: one thread per element of C, TILE x TILE threads per CTA, grid
// (n / TILE, n / TILE); n must be a multiple of TILE (no bounds checks).
// Zhang11 (Zhang & Owens, HPCA'11) sec. 5.1 and Fig. 4 compare 8x8, 16x16 and 32x32 sub-matrices
// on 1024 x 1024 matrices. The body here is the classic two-tile kernel of the CUDA C programming
// guide ("Shared Memory") and of the CUDA samples' matrixMul, not the register-blocked Volkov & Demmel
// kernel the paper measured; the three sizes differ only in TILE (32x32 = 1024 threads per CTA).

template <int TILE>
__device__ __forceinline__ void matmul_tile(float *C, const float *A, const float *B, int n)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];

    int tx = threadIdx.x;
    int ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty;
    int col = blockIdx.x * TILE + tx;
    float sum = 0.0f;

    for (int t = 0; t < n; t += TILE) {
        As[ty][tx] = A[row * n + t + tx];
        Bs[ty][tx] = B[(t + ty) * n + col];
        __syncthreads();

#pragma unroll
        for (int k = 0; k < TILE; ++k)
            sum += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    C[row * n + col] = sum;
}

extern "C" __global__ void matmul_tile8(float *C, const float *A, const float *B, int n)
{
    matmul_tile<8>(C, A, B, n);
}

extern "C" __global__ void matmul_tile16(float *C, const float *A, const float *B, int n)
{
    matmul_tile<16>(C, A, B, n);
}

extern "C" __global__ void matmul_tile32(float *C, const float *A, const float *B, int n)
{
    matmul_tile<32>(C, A, B, n);
}
