// A BLAS-1 kernel as libraries template it: element type and unroll factor as template parameters,
// inside a namespace, with a grid-stride loop and explicit instantiations for the types it ships.
namespace blas {

template <typename T, int UNROLL>
__global__ void axpy(int n, T alpha, const T* __restrict__ x, T* __restrict__ y) {
    const int stride = gridDim.x * blockDim.x * UNROLL;
    for (int base = blockIdx.x * blockDim.x * UNROLL + threadIdx.x; base < n; base += stride) {
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            int i = base + u * blockDim.x;
            if (i < n) y[i] = alpha * x[i] + y[i];
        }
    }
}

template __global__ void axpy<float, 4>(int, float, const float*, float*);
template __global__ void axpy<double, 2>(int, double, const double*, double*);

}  // namespace blas
