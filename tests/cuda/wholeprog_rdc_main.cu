// Two translation units linked with -rdc=true (tests/toolchain/test_wholeprog.py): the kernel here calls
// a device function defined in wholeprog_rdc_lib.cu; each unit's instrumented PTX declares the
// probes' control block, which must link (.weak).
#include <cstdio>

__device__ float scaled(const float *p, int i);

__global__ void apply(float *out, const float *in, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = scaled(in, i);
}

int main()
{
    const int n = 1024;
    float *din, *dout;
    if (cudaMalloc(&din, n * sizeof(float)) != cudaSuccess) {
        std::printf("no usable GPU\n");
        return 1;
    }
    cudaMalloc(&dout, n * sizeof(float));
    cudaMemset(din, 0, n * sizeof(float));
    apply<<<n / 128, 128>>>(dout, din, n);
    std::printf("%s\n", cudaGetErrorString(cudaDeviceSynchronize()));
    return 0;
}
