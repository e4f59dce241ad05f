// Several accesses of one array on one source line, in the idioms of production kernels: each
// instruction must be labelled from its own address (issue 20 part 2). tests/ptx/test_ptx_labels.py
// checks every recorded address against the expression its op is labelled with.
#include <cuda_fp16.h>

#define RADIUS 1
constexpr int TILE = 32;

// A three-point stencil on one line: the compiler folds &in[i - 1] into one base register.
extern "C" __global__ void stencil3(const float *__restrict__ in, float *__restrict__ out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x + RADIUS;
    if (i < n - RADIUS) out[i] = 0.25f * in[i - 1] + 0.5f * in[i] + 0.25f * in[i + 1];
}

// A neighbour exchange through an xor: same base, same line, another index structure.
extern "C" __global__ void pair_sum(const float *a, float *out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = a[i] + a[i ^ 1];
}

// CSR row bounds read before a loop and in its condition, as bfs does: the loop stores through
// a pointer that may alias row_ptr, so the condition reloads each iteration (the compiler rotates
// the loop: one copy before it, one in it); the lower bound is read once.
extern "C" __global__ void row_sums(const int *row_ptr, const float *val, float *out, int rows)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    out[r] = 0.0f;
    for (int j = row_ptr[r]; j < row_ptr[r + 1]; j++) out[r] += val[j];
}

// Two statements on one line, and a vector load and store through reinterpret_cast.
extern "C" __global__ void two_statements(const float *x, float *y, const float4 *u4)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float a = x[2 * i]; float b = x[2 * i + 1];
    y[i] = a - b;
    reinterpret_cast<float4 *>(y)[i + 64] = *reinterpret_cast<const float4 *>(&u4[i]);
}

// A padded shared tile read along a row and its neighbour.
extern "C" __global__ void tile_pairs(const float *in, float *out)
{
    __shared__ float tile[TILE][TILE + 1];
    int tx = threadIdx.x, ty = threadIdx.y;
    int g = (blockIdx.x * TILE + ty) * TILE + tx;
    tile[ty][tx] = in[g];
    __syncthreads();
    out[g] = tile[ty][(tx + 1) % TILE] - tile[ty][tx];
}

// Arrays reached through a struct passed by value, as kernels with many arguments take them: two
// reads of one line through one parameter, first with the same index, then with different ones.
struct Axpby { const float *a; const float *b; float *out; float alpha, beta; int n; };
extern "C" __global__ void axpby_struct(Axpby p)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < p.n) p.out[i] = p.alpha * p.a[i] + p.beta * p.b[i];
    if (i + 2 < p.n) p.out[p.n + i] = p.b[i + 1] - p.a[i + 2];
}
