// A layer-norm style kernel whose bias is optional (a null pointer when absent), launched on a
// sub-range of the rows by passing a pointer into the middle of the buffers.
__global__ void scale_rows(float* __restrict__ out, const float* __restrict__ inp, const float* __restrict__ gamma,
                           const float* __restrict__ beta, int rows, int cols) {
    int r = blockIdx.x;
    if (r >= rows) return;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        float v = inp[r * cols + c] * gamma[c];
        if (beta != nullptr) v += beta[c];
        out[r * cols + c] = v;
    }
}
