// The second translation unit of the -rdc=true test program (see wholeprog_rdc_main.cu).

__device__ float scaled(const float *p, int i)
{
    return 3.0f * p[i ^ 1];
}

__global__ void fill(float *p, float v, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = v;
}
