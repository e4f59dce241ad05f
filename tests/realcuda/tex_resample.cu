// Image resampling through a texture object: the kernel takes a cudaTextureObject_t and samples
// tex2D<float> at pixel centres scaled by the zoom factor (the texture unit filters and clamps).
#include <cuda_runtime.h>

__global__ void resample(cudaTextureObject_t image, float* __restrict__ out, int out_w, int out_h, float scale) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= out_w || y >= out_h) return;
    const float u = (x + 0.5f) * scale;
    const float v = (y + 0.5f) * scale;
    out[y * out_w + x] = tex2D<float>(image, u, v);
}
