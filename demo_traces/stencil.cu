// 7-point 3D Jacobi stencil on an nx x ny x nz float grid (x fastest), one thread per grid point:
// 2D CTAs of 32x8 threads tile an xy-plane, blockIdx.z selects the plane (the basic form of
// Parboil's stencil and of Kirk & Hwu, PMPP ch. 8). Boundary points are not written.

extern "C" __global__ void stencil7(float *out, const float *in, int nx, int ny, int nz,
                                    float c0, float c1)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    int k = blockIdx.z;

    if (i > 0 && i < nx - 1 && j > 0 && j < ny - 1 && k > 0 && k < nz - 1) {
        int idx = (k * ny + j) * nx + i;
        float sum = in[idx - nx * ny];
        sum += in[idx - nx];
        sum += in[idx - 1];
        sum += in[idx + 1];
        sum += in[idx + nx];
        sum += in[idx + nx * ny];
        out[idx] = c1 * sum - c0 * in[idx];
    }
}
