// A whole program for tuiprof's instrumented build (tests/toolchain/test_wholeprog.py): SAXPY then a
// gather through an index array, checked on the host; prints "ok" and exits 0 when the results
// are right, explains and exits 1 when no GPU is usable.
#include <cstdio>
#include <cstdlib>
#include <vector>

__global__ void saxpy(float *y, const float *x, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

__global__ void gather(float *out, const float *in, const int *idx, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[idx[i]];
}

int main(int argc, char **argv)
{
    const int n = argc > 1 ? std::atoi(argv[1]) : 4096;
    std::vector<float> x(n), y(n), out(n);
    std::vector<int> idx(n);
    for (int i = 0; i < n; ++i) { x[i] = float(i); y[i] = 1.0f; idx[i] = int(i * 7919LL % n); }
    float *dx, *dy, *dout;
    int *didx;
    if (cudaMalloc(&dx, n * sizeof(float)) != cudaSuccess) {
        std::printf("no usable GPU: %s\n", cudaGetErrorString(cudaGetLastError()));
        return 1;
    }
    cudaMalloc(&dy, n * sizeof(float));
    cudaMalloc(&dout, n * sizeof(float));
    cudaMalloc(&didx, n * sizeof(int));
    cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(didx, idx.data(), n * sizeof(int), cudaMemcpyHostToDevice);
    saxpy<<<(n + 255) / 256, 256>>>(dy, dx, 2.0f, n);
    gather<<<(n + 127) / 128, 128>>>(dout, dy, didx, n);
    cudaMemcpy(out.data(), dout, n * sizeof(float), cudaMemcpyDeviceToHost);
    for (int i = 0; i < n; ++i) {
        float want = 2.0f * float(idx[i]) + 1.0f;
        if (out[i] != want) { std::printf("wrong result at %d: %g, not %g\n", i, out[i], want); return 1; }
    }
    std::printf("ok\n");
    return 0;
}
