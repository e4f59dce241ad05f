// Dense matrix multiply C = A B with 16x16 tiles in shared memory: the kernel of the CUDA
// samples (0_Simple/matrixMul, MatrixMulCUDA<16>). A is hA x wA, B is wA x wB, row-major;
// one thread per element of C, 16x16 threads per CTA, grid (wB / 16, hA / 16).

#define BLOCK_SIZE 16

extern "C" __global__ void matmul16(float *C, const float *A, const float *B, int wA, int wB)
{
    int bx = blockIdx.x;
    int by = blockIdx.y;
    int tx = threadIdx.x;
    int ty = threadIdx.y;

    int aBegin = wA * BLOCK_SIZE * by;   // first tile of A processed by the CTA
    int aEnd = aBegin + wA - 1;          // last tile of A
    int aStep = BLOCK_SIZE;              // step through the tiles of A
    int bBegin = BLOCK_SIZE * bx;        // first tile of B
    int bStep = BLOCK_SIZE * wB;         // step through the tiles of B

    float Csub = 0;

    for (int a = aBegin, b = bBegin; a <= aEnd; a += aStep, b += bStep) {
        __shared__ float As[BLOCK_SIZE][BLOCK_SIZE];
        __shared__ float Bs[BLOCK_SIZE][BLOCK_SIZE];

        As[ty][tx] = A[a + wA * ty + tx];
        Bs[ty][tx] = B[b + wB * ty + tx];

        __syncthreads();

#pragma unroll
        for (int k = 0; k < BLOCK_SIZE; ++k) {
            Csub += As[ty][k] * Bs[k][tx];
        }

        __syncthreads();
    }

    int c = wB * BLOCK_SIZE * by + BLOCK_SIZE * bx;
    C[c + wB * ty + tx] = Csub;
}
