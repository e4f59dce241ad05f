// Shared-memory access patterns whose bank conflicts are known by hand (32 banks of 4 B): a row
// (1 wavefront per request), a column of a 32 x 32 tile (32), the same column of a tile padded to
// 33 (1), a broadcast (1), a stride of two words (2), and float4 rows (4, the ideal for 16 B lanes).
#define TILE 32

template <int PITCH>
__device__ void transpose_tile(const float *in, float *out)
{
    __shared__ float tile[TILE][PITCH];
    int x = threadIdx.x, y = threadIdx.y;
    tile[y][x] = in[y * TILE + x];          // a row per warp: conflict-free
    __syncthreads();
    out[y * TILE + x] = tile[x][y];         // a column per warp: PITCH 32 -> 32-way, 33 -> free
}

extern "C" __global__ void column32(const float *in, float *out) { transpose_tile<32>(in, out); }
extern "C" __global__ void column33(const float *in, float *out) { transpose_tile<33>(in, out); }

extern "C" __global__ void broadcast_and_stride(const float *in, float *out)
{
    __shared__ float s[64];
    int t = threadIdx.x;
    s[t] = in[t];
    s[t + 32] = in[t + 32];
    __syncthreads();
    out[t] = s[0] + s[2 * t];               // every lane one word (free), then two words apart (2-way)
}

extern "C" __global__ void vector_rows(const float4 *in, float4 *out)
{
    __shared__ float4 v[32];
    int t = threadIdx.x;
    v[t] = in[t];                           // 32 lanes x 16 B: 4 quarter-warp wavefronts, the ideal
    __syncthreads();
    out[t] = v[31 - t];
}
