// Texture and surface objects in the emulator (issue 22 item 4): every fetch form nvcc emits for
// them, each written to its own output so that a test checks it against NumPy.
#include <cuda_runtime.h>

__global__ void fetch_forms(cudaTextureObject_t t1, cudaTextureObject_t t2, cudaTextureObject_t t3,
                            cudaTextureObject_t t4, float* f, int* iv, unsigned int* uv, float4* gathered) {
    const int i = threadIdx.x;
    f[0 * 64 + i] = tex1Dfetch<float>(t1, i - 3);                      // integer coordinate
    f[1 * 64 + i] = tex1D<float>(t1, 0.37f * i - 2.0f);                 // point or linear, per t1
    f[2 * 64 + i] = tex2D<float>(t2, 0.3f * i, 0.25f * i - 1.0f);
    f[3 * 64 + i] = tex3D<float>(t3, 0.5f + (i % 5), 1.25f, 0.75f * (i % 3));
    gathered[i] = tex2Dgather<float4>(t2, 0.4f * i, 0.7f, 0);
    iv[i] = tex2D<int>(t4, i % 7 + 0.5f, 1.5f);
    uchar4 u = tex2D<uchar4>(t4, i % 7 + 0.5f, 0.5f);
    uv[i] = u.x | (u.y << 8) | (u.z << 16) | (u.w << 24);
}

__global__ void surface_copy(cudaSurfaceObject_t in, cudaSurfaceObject_t out, int w, int h) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    float v;
    surf2Dread(&v, in, x * 4, y);
    surf2Dwrite(2.0f * v + 1.0f, out, x * 4, y);
}

__global__ void mip_level(cudaTextureObject_t t, float* out) {
    out[threadIdx.x] = tex2DLod<float>(t, 0.5f, 0.5f, 1.0f);
}
